// SPDX-License-Identifier: GPL-2.0
/*
 * lite_hello: join a LITE cluster, write "hello" into memory on another
 * node and read it back.
 *
 * Usage: lite_hello CM_IP
 * Build: cc -Wall -I userspace/include -o lite_hello userspace/examples/lite_hello.c
 */
#include <stdio.h>
#include <string.h>

#include "lite.h"

#define HELLO_LMR_SIZE 4096
#define HELLO_PASSWORD 0x68656c6c6fULL

static int fail(const char *what, long ret)
{
	fprintf(stderr, "lite_hello: %s: %s\n", what, strerror((int)-ret));
	return 1;
}

int main(int argc, char **argv)
{
	static const char message[] = "hello";
	char back[sizeof(message)] = { 0 };
	long node_id, total, target, handle, ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CM_IP\n", argv[0]);
		return 2;
	}

	node_id = lite_join(argv[1], LITE_CM_DEFAULT_PORT, 1);
	if (node_id == -EISCONN)
		node_id = lite_get_node_id();
	if (node_id < 0)
		return fail("lite_join", node_id);
	total = lite_get_total_node();
	if (total < 0)
		return fail("lite_get_total_node", total);
	printf("joined as node %ld of %ld\n", node_id, total);

	/* Node 1 joined first, so it exists whenever anyone else does. */
	target = node_id == 1 ? 2 : 1;
	if (total < 2) {
		printf("no other node yet; using this node's memory\n");
		target = node_id;
	}

	handle = lite_alloc_remote((unsigned int)target, HELLO_LMR_SIZE, 0,
				   HELLO_PASSWORD);
	if (handle < 0)
		return fail("lite_alloc_remote", handle);

	ret = lite_rdma_write((uint64_t)handle, message, sizeof(message), 0,
			      LITE_PRIORITY_NONE, HELLO_PASSWORD);
	if (ret < 0) {
		lite_free((uint64_t)handle);
		return fail("lite_rdma_write", ret);
	}
	ret = lite_rdma_read((uint64_t)handle, back, sizeof(back), 0,
			     LITE_PRIORITY_NONE, HELLO_PASSWORD);
	if (ret < 0) {
		lite_free((uint64_t)handle);
		return fail("lite_rdma_read", ret);
	}
	back[sizeof(back) - 1] = '\0';
	printf("read back from node %ld: %s\n", target, back);

	ret = lite_free((uint64_t)handle);
	if (ret < 0)
		return fail("lite_free", ret);
	return strcmp(back, message) == 0 ? 0 : 1;
}
