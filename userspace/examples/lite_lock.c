// SPDX-License-Identifier: GPL-2.0
/*
 * lite_lock: one counter on node 1, incremented by every node two ways.
 *
 * Node 1 creates a distributed lock and two LMRs: a plain one holding a
 * counter and the lock's number, and an 8-byte atomic one. Every node then
 * increments the plain counter ROUNDS times with a read and a write under
 * the lock, and the atomic one ROUNDS times with lite_fetch_add. Once all
 * are done, each node checks that both hold NODES * ROUNDS. Run it on
 * NODES nodes at once.
 *
 * Usage: lite_lock CM_IP NODES
 * Build: cc -Wall -I userspace/include -o lite_lock userspace/examples/lite_lock.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lite.h"

#define COUNTER_NAME	0x6c6974652d636e74ULL	/* "lite-cnt" */
#define ATOMIC_NAME	0x6c6974652d61746dULL	/* "lite-atm" */
#define PASSWORD	0x6c6f636bULL
#define ROUNDS		100

/* Layout of the plain counter LMR. */
#define COUNTER_OFFSET	0
#define NUMBER_OFFSET	8
#define COUNTER_SIZE	16

static int fail(const char *what, long ret)
{
	fprintf(stderr, "lite_lock: %s: %s\n", what, strerror((int)-ret));
	return 1;
}

static long read_u64(uint64_t handle, uint64_t offset, uint64_t *value)
{
	return lite_rdma_read(handle, value, sizeof(*value), offset,
			      LITE_PRIORITY_NONE, PASSWORD);
}

static long write_u64(uint64_t handle, uint64_t offset, uint64_t value)
{
	return lite_rdma_write(handle, &value, sizeof(value), offset,
			       LITE_PRIORITY_NONE, PASSWORD);
}

/* Node 1: the lock and both counters, published by name. */
static long create(long *counter, long *atomic)
{
	struct lite_lock lock;
	long number, ret;

	number = lite_create_lock(1, &lock);
	if (number < 0)
		return number;
	*counter = lite_alloc_remote(1, COUNTER_SIZE, 0, PASSWORD);
	if (*counter < 0)
		return *counter;
	ret = write_u64((uint64_t)*counter, COUNTER_OFFSET, 0);
	if (ret == 0)
		ret = write_u64((uint64_t)*counter, NUMBER_OFFSET,
				(uint64_t)number);
	if (ret == 0)
		ret = lite_add_ask_mr_table(COUNTER_NAME, (uint64_t)*counter,
					    LITE_PERM_READ | LITE_PERM_WRITE,
					    PASSWORD);
	if (ret < 0)
		return ret;
	*atomic = lite_alloc_remote(1, 8, LITE_ALLOC_ATOMIC, PASSWORD);
	if (*atomic < 0)
		return *atomic;
	return lite_add_ask_mr_table(ATOMIC_NAME, (uint64_t)*atomic,
				     LITE_PERM_READ | LITE_PERM_ATOMIC,
				     PASSWORD);
}

/* Every node: ROUNDS increments of each counter. */
static int increment(uint64_t counter, uint64_t atomic,
		     const struct lite_lock *lock)
{
	uint64_t value, old;
	long ret;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		ret = lite_lock(lock);
		if (ret < 0)
			return fail("lite_lock", ret);
		/* Not atomic by itself: the lock makes it safe. */
		ret = read_u64(counter, COUNTER_OFFSET, &value);
		if (ret == 0)
			ret = write_u64(counter, COUNTER_OFFSET, value + 1);
		lite_unlock(lock);
		if (ret < 0)
			return fail("rdma read or write", ret);

		ret = lite_fetch_add(atomic, &old, 1, LITE_PRIORITY_NONE);
		if (ret < 0)
			return fail("lite_fetch_add", ret);
	}
	return 0;
}

/* Every node: both counters must hold nodes * ROUNDS. */
static int check(uint64_t counter, uint64_t atomic, unsigned int nodes)
{
	uint64_t expected = (uint64_t)nodes * ROUNDS, value, total;
	long ret;

	ret = read_u64(counter, COUNTER_OFFSET, &value);
	if (ret < 0)
		return fail("lite_rdma_read", ret);
	/* Adding 0 reads the atomic counter atomically. */
	ret = lite_fetch_add(atomic, &total, 0, LITE_PRIORITY_NONE);
	if (ret < 0)
		return fail("lite_fetch_add", ret);
	printf("locked counter %llu, atomic counter %llu, expected %llu\n",
	       (unsigned long long)value, (unsigned long long)total,
	       (unsigned long long)expected);
	return value == expected && total == expected ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct lite_lock lock;
	long node_id, counter = -1, atomic = -1, mapped_counter, mapped_atomic;
	long ret;
	uint64_t number;
	unsigned long nodes;
	int status;

	if (argc != 3) {
		fprintf(stderr, "usage: %s CM_IP NODES\n", argv[0]);
		return 2;
	}
	nodes = strtoul(argv[2], NULL, 10);
	if (nodes < 1 || nodes >= LITE_MAX_NODES) {
		fprintf(stderr, "lite_lock: NODES must be 1..%d\n",
			LITE_MAX_NODES - 1);
		return 2;
	}

	node_id = lite_join(argv[1], LITE_CM_DEFAULT_PORT, 1);
	if (node_id == -EISCONN)
		node_id = lite_get_node_id();
	if (node_id < 0)
		return fail("lite_join", node_id);
	printf("node %ld\n", node_id);

	ret = lite_dist_barrier((unsigned int)nodes);
	if (ret == 0 && node_id == 1)
		ret = create(&counter, &atomic);
	if (ret < 0) {
		/* The other nodes will find no names and stop. */
		lite_dist_barrier((unsigned int)nodes);
		return fail("setting up on node 1", ret);
	}
	ret = lite_dist_barrier((unsigned int)nodes);
	if (ret < 0)
		return fail("lite_dist_barrier", ret);

	mapped_counter = lite_ask_lmr(1, COUNTER_NAME,
				      LITE_PERM_READ | LITE_PERM_WRITE, PASSWORD);
	if (mapped_counter < 0)
		return fail("lite_ask_lmr of the counter", mapped_counter);
	mapped_atomic = lite_ask_lmr(1, ATOMIC_NAME,
				     LITE_PERM_READ | LITE_PERM_ATOMIC, PASSWORD);
	if (mapped_atomic < 0)
		return fail("lite_ask_lmr of the atomic counter", mapped_atomic);
	ret = read_u64((uint64_t)mapped_counter, NUMBER_OFFSET, &number);
	if (ret == 0)
		ret = lite_ask_lock(1, (unsigned int)number, &lock);
	if (ret < 0)
		return fail("finding the lock", ret);

	status = increment((uint64_t)mapped_counter, (uint64_t)mapped_atomic,
			   &lock);
	/* Everyone enters the barriers, so nobody waits forever. */
	ret = lite_dist_barrier((unsigned int)nodes);
	if (status == 0 && ret == 0)
		status = check((uint64_t)mapped_counter,
			       (uint64_t)mapped_atomic, (unsigned int)nodes);
	lite_dist_barrier((unsigned int)nodes);

	lite_umap_lmr((uint64_t)mapped_counter);
	lite_umap_lmr((uint64_t)mapped_atomic);
	if (node_id == 1) {
		lite_free((uint64_t)counter);
		lite_free((uint64_t)atomic);
	}
	if (ret < 0)
		return fail("lite_dist_barrier", ret);
	printf(status == 0 ? "ok\n" : "mismatch\n");
	return status;
}
