// SPDX-License-Identifier: GPL-2.0
/*
 * lite_share: share memory by name between two nodes of a LITE cluster.
 *
 * Node 1 publishes a message under a name; node 2 maps it with
 * lite_ask_lmr, reads it asynchronously, then both print their node's
 * counters. Run it on two nodes at once.
 *
 * Usage: lite_share CM_IP
 * Build: cc -Wall -I userspace/include -o lite_share userspace/examples/lite_share.c
 */
#include <stdio.h>
#include <string.h>

#include "lite.h"

#define SHARE_NAME	0x6c6974652d736872ULL	/* "lite-shr" */
#define SHARE_PASSWORD	0x7368617265ULL

static int fail(const char *what, long ret)
{
	fprintf(stderr, "lite_share: %s: %s\n", what, strerror((int)-ret));
	return 1;
}

/* Node 1: publish the message, wait until node 2 has read it, free it. */
static int publish(void)
{
	static const char message[] = "shared by name";
	long handle, ret;

	handle = lite_wrap_alloc(message, sizeof(message), SHARE_NAME,
				 SHARE_PASSWORD);
	if (handle < 0) {
		/* Keep node 2 from waiting forever; it will find no name. */
		lite_dist_barrier(2);
		lite_dist_barrier(2);
		return fail("lite_wrap_alloc", handle);
	}
	printf("published %zu bytes as %#llx\n", sizeof(message),
	       (unsigned long long)SHARE_NAME);

	ret = lite_dist_barrier(2);	/* published */
	if (ret >= 0)
		ret = lite_dist_barrier(2);	/* node 2 is done */
	lite_free((uint64_t)handle);
	return ret < 0 ? fail("lite_dist_barrier", ret) : 0;
}

/* Node 2: map node 1's message and read it asynchronously. */
static int ask(void)
{
	char back[64] = { 0 };
	long handle, op, ret;

	ret = lite_dist_barrier(2);
	if (ret < 0)
		return fail("lite_dist_barrier", ret);

	handle = lite_ask_lmr(1, SHARE_NAME, LITE_PERM_READ, SHARE_PASSWORD);
	if (handle < 0) {
		lite_dist_barrier(2);
		return fail("lite_ask_lmr", handle);
	}

	op = lite_rdma_read_async((uint64_t)handle, back, sizeof(back) - 1, 0,
				  LITE_PRIORITY_NONE, SHARE_PASSWORD);
	/* back must stay untouched until the operation is reaped. */
	ret = op < 0 ? op : lite_async_wait((uint64_t)op, 0);
	lite_umap_lmr((uint64_t)handle);
	lite_dist_barrier(2);
	if (ret < 0)
		return fail(op < 0 ? "lite_rdma_read_async" : "lite_async_wait",
			    ret);
	printf("read from node 1: %s\n", back);
	return 0;
}

int main(int argc, char **argv)
{
	struct lite_stats stats;
	long node_id, ret;
	int status;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CM_IP\n", argv[0]);
		return 2;
	}

	node_id = lite_join(argv[1], LITE_CM_DEFAULT_PORT, 1);
	if (node_id < 0)
		return fail("lite_join", node_id);
	if (node_id > 2) {
		fprintf(stderr, "lite_share: only nodes 1 and 2 take part\n");
		return 2;
	}

	status = node_id == 1 ? publish() : ask();

	ret = lite_get_stats(&stats, sizeof(stats));
	if (ret < 0)
		return fail("lite_get_stats", ret);
	printf("node %ld: %llu LMRs, %llu mappings, %llu names, %llu handles\n",
	       node_id, (unsigned long long)stats.lmrs,
	       (unsigned long long)stats.mappings,
	       (unsigned long long)stats.published_names,
	       (unsigned long long)stats.handles);
	return status;
}
