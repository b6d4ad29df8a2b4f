// SPDX-License-Identifier: GPL-2.0
/*
 * lite_share: share memory by name between two nodes of a LITE cluster.
 *
 * Node 1 publishes a message under a name; node 2 maps it with
 * lite_ask_lmr, reads it asynchronously, then both print their node's
 * counters. Run it on NODES nodes at once (default 2); nodes other than 1
 * and 2 only take part in the barriers.
 *
 * Usage: lite_share CM_IP [NODES]
 * Build: cc -Wall -I userspace/include -o lite_share userspace/examples/lite_share.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lite.h"

#define SHARE_NAME	0x6c6974652d736872ULL	/* "lite-shr" */
#define SHARE_PASSWORD	0x7368617265ULL

/* Nodes meeting in the barriers. */
static unsigned int nodes = 2;

static int fail(const char *what, long ret)
{
	fprintf(stderr, "lite_share: %s: %s\n", what, strerror((int)-ret));
	return 1;
}

/* Node 1: publish the message, wait until node 2 has read it, free it. */
static int publish(void)
{
	/* Room for what node 2 reads (63 bytes and a NUL). */
	static const char message[64] = "shared by name";
	long handle, ret;

	handle = lite_wrap_alloc(message, sizeof(message), SHARE_NAME,
				 SHARE_PASSWORD);
	if (handle < 0) {
		/* Keep node 2 from waiting forever; it will find no name. */
		lite_dist_barrier(nodes);
		lite_dist_barrier(nodes);
		return fail("lite_wrap_alloc", handle);
	}
	printf("published %zu bytes as %#llx\n", sizeof(message),
	       (unsigned long long)SHARE_NAME);

	ret = lite_dist_barrier(nodes);	/* published */
	if (ret >= 0)
		ret = lite_dist_barrier(nodes);	/* node 2 is done */
	lite_free((uint64_t)handle);
	return ret < 0 ? fail("lite_dist_barrier", ret) : 0;
}

/* Node 2: map node 1's message and read it asynchronously. */
static int ask(void)
{
	char back[64] = { 0 };
	long handle, op, ret;

	ret = lite_dist_barrier(nodes);
	if (ret < 0)
		return fail("lite_dist_barrier", ret);

	handle = lite_ask_lmr(1, SHARE_NAME, LITE_PERM_READ, SHARE_PASSWORD);
	if (handle < 0) {
		lite_dist_barrier(nodes);
		return fail("lite_ask_lmr", handle);
	}

	op = lite_rdma_read_async((uint64_t)handle, back, sizeof(back) - 1, 0,
				  LITE_PRIORITY_NONE, SHARE_PASSWORD);
	/* back must stay untouched until the operation is reaped. */
	ret = op < 0 ? op : lite_async_wait((uint64_t)op, 0);
	lite_umap_lmr((uint64_t)handle);
	lite_dist_barrier(nodes);
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

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: %s CM_IP [NODES]\n", argv[0]);
		return 2;
	}
	if (argc == 3) {
		nodes = (unsigned int)strtoul(argv[2], NULL, 10);
		if (nodes < 2 || nodes >= LITE_MAX_NODES) {
			fprintf(stderr, "lite_share: NODES must be 2..%d\n",
				LITE_MAX_NODES - 1);
			return 2;
		}
	}

	node_id = lite_join(argv[1], LITE_CM_DEFAULT_PORT, 1);
	if (node_id == -EISCONN)
		node_id = lite_get_node_id();
	if (node_id < 0)
		return fail("lite_join", node_id);
	if (node_id > (long)nodes) {
		fprintf(stderr, "lite_share: node %ld is beyond NODES\n",
			node_id);
		return 2;
	}

	if (node_id == 1) {
		status = publish();
	} else if (node_id == 2) {
		status = ask();
	} else {
		/* Published; node 2 is done. */
		ret = lite_dist_barrier(nodes);
		if (ret == 0)
			ret = lite_dist_barrier(nodes);
		status = ret < 0 ? fail("lite_dist_barrier", ret) : 0;
	}

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
