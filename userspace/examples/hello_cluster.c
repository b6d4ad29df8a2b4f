// SPDX-License-Identifier: GPL-2.0
/*
 * hello_cluster: a program of one's own, run on every node of the test
 * cluster by `cargo xtask cluster --exec`, which gives it the cluster in
 * its environment:
 *
 *   LITE_CM_ADDRESS    the cluster manager, "IP:PORT" (or "IP": port 18500)
 *   LITE_NODE_ADDRESS  this node's IP address
 *   LITE_NODES         how many nodes the cluster has
 *
 * It joins, waits until every node has joined and meets them at a
 * barrier, prints its node id and the cluster size, writes MESSAGE into
 * 4 KiB of memory on the next node, reads it back, checks it and frees the
 * memory, then meets the others at a last barrier, so that no node powers
 * off while another still uses its memory. Any failure makes it exit 1.
 *
 * Usage: hello_cluster [MESSAGE]
 * Build: cc -Wall -I userspace/include -o hello_cluster userspace/examples/hello_cluster.c
 * Run:   cargo xtask cluster --nodes 2 --exec ./hello_cluster 'hello, cluster'
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lite.h"

#define PROGRAM "hello_cluster"
#define LMR_SIZE 4096
#define PASSWORD 0x636c7573746572ULL /* "cluster" */

/* How long the nodes may take to join, one after the other, in 100 ms steps. */
#define JOIN_WAIT_STEPS (5 * 60 * 10)

static int fail(const char *what, long ret)
{
	fprintf(stderr, PROGRAM ": %s: %s\n", what, strerror((int)-ret));
	return 1;
}

/*
 * The manager's address from LITE_CM_ADDRESS ("IP" or "IP:PORT") into ip
 * and port: 0, or -1 after saying what is wrong.
 */
static int manager_address(char ip[LITE_MAX_IP_LEN], unsigned int *port)
{
	const char *address = getenv("LITE_CM_ADDRESS");
	const char *colon;
	unsigned long parsed;
	size_t len;
	char *end;

	if (!address || !*address) {
		fprintf(stderr, PROGRAM ": LITE_CM_ADDRESS is not set\n");
		return -1;
	}
	colon = strchr(address, ':');
	len = colon ? (size_t)(colon - address) : strlen(address);
	if (len == 0 || len >= LITE_MAX_IP_LEN) {
		fprintf(stderr, PROGRAM ": bad LITE_CM_ADDRESS \"%s\"\n", address);
		return -1;
	}
	memcpy(ip, address, len);
	ip[len] = '\0';
	*port = LITE_CM_DEFAULT_PORT;
	if (colon) {
		parsed = strtoul(colon + 1, &end, 10);
		if (*end || end == colon + 1 || parsed == 0 || parsed > 65535) {
			fprintf(stderr, PROGRAM ": bad port in LITE_CM_ADDRESS \"%s\"\n",
				address);
			return -1;
		}
		*port = (unsigned int)parsed;
	}
	return 0;
}

/* LITE_NODES, or -1 after saying what is wrong. */
static long cluster_size(void)
{
	const char *text = getenv("LITE_NODES");
	long nodes;
	char *end;

	if (!text || !*text) {
		fprintf(stderr, PROGRAM ": LITE_NODES is not set\n");
		return -1;
	}
	nodes = strtol(text, &end, 10);
	if (*end || nodes < 1 || nodes > LITE_MAX_NODES) {
		fprintf(stderr, PROGRAM ": bad LITE_NODES \"%s\"\n", text);
		return -1;
	}
	return nodes;
}

/*
 * Waits until nodes nodes have joined: the nodes boot one after the other,
 * and a barrier waits only 60 s for members that have not joined yet.
 * Returns the number of nodes, or a negative errno.
 */
static long await_members(long nodes)
{
	const struct timespec step = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };
	long total = 0;
	int i;

	for (i = 0; i < JOIN_WAIT_STEPS; i++) {
		total = lite_get_total_node();
		if (total < 0 || total >= nodes)
			return total;
		nanosleep(&step, NULL);
	}
	return total;
}

int main(int argc, char **argv)
{
	char message[LMR_SIZE] = { 0 };
	char back[LMR_SIZE] = { 0 };
	const char *node_address = getenv("LITE_NODE_ADDRESS");
	long nodes, node_id, total, target, handle, ret;
	char ip[LITE_MAX_IP_LEN];
	unsigned int port;
	size_t size;
	int mismatch;

	if (argc > 2 || (argc == 2 && strlen(argv[1]) >= LMR_SIZE)) {
		fprintf(stderr, "usage: %s [MESSAGE, shorter than %d bytes]\n",
			argv[0], LMR_SIZE);
		return 1;
	}
	nodes = cluster_size();
	if (nodes < 0 || manager_address(ip, &port) < 0)
		return 1;

	node_id = lite_join(ip, port, 1);
	/* Joined already: by another program, or in cargo xtask cluster --shell. */
	if (node_id == -EISCONN)
		node_id = lite_get_node_id();
	if (node_id < 0)
		return fail("lite_join", node_id);
	total = await_members(nodes);
	if (total < 0)
		return fail("lite_get_total_node", total);
	if (total != nodes) {
		fprintf(stderr, PROGRAM ": %ld of %ld nodes joined\n", total, nodes);
		return 1;
	}
	ret = lite_dist_barrier((unsigned int)nodes);
	if (ret < 0)
		return fail("lite_dist_barrier", ret);
	printf(PROGRAM ": node %ld of %ld (%s)\n", node_id, total,
	       node_address ? node_address : "LITE_NODE_ADDRESS not set");

	/* Node ids run from 1 to the cluster size in a cluster nobody left. */
	target = node_id % total + 1;
	if (argc == 2)
		snprintf(message, sizeof(message), "%s", argv[1]);
	else
		snprintf(message, sizeof(message), "hello from node %ld", node_id);
	size = strlen(message) + 1;
	handle = lite_alloc_remote((unsigned int)target, LMR_SIZE, 0, PASSWORD);
	if (handle < 0)
		return fail("lite_alloc_remote", handle);
	ret = lite_rdma_write((uint64_t)handle, message, size, 0,
			      LITE_PRIORITY_NONE, PASSWORD);
	if (ret == 0)
		ret = lite_rdma_read((uint64_t)handle, back, size, 0,
				     LITE_PRIORITY_NONE, PASSWORD);
	if (ret < 0) {
		lite_free((uint64_t)handle);
		return fail("lite_rdma_write/lite_rdma_read", ret);
	}
	mismatch = memcmp(back, message, size) != 0;
	back[size - 1] = '\0';
	printf(PROGRAM ": node %ld read back from node %ld: \"%s\"%s\n", node_id,
	       target, back, mismatch ? " (not what it wrote)" : "");
	ret = lite_free((uint64_t)handle);
	if (ret < 0)
		return fail("lite_free", ret);

	ret = lite_dist_barrier((unsigned int)nodes);
	if (ret < 0)
		return fail("lite_dist_barrier (the last)", ret);
	return mismatch ? 1 : 0;
}
