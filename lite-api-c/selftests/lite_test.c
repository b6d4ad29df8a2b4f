// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of the 40 LITE system calls against lite(7) and the lite_*(2) pages.
 *
 * The program runs at the same time on every node of a cluster, given by
 * LITE_CM_ADDRESS (the manager, "IP:PORT" or "IP"), LITE_NODE_ADDRESS and
 * LITE_NODES (the number of nodes). The tests without fixture run first,
 * before the node joins. Those of the "lite" fixture join, wait for every
 * node, and use memory of this node and of the next one; nodes meet only at
 * barriers, and names and ports are per node. The last test is a barrier,
 * so that no node goes away while another still uses its memory. Without
 * LITE, or without a cluster, the tests skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <linux/lite.h>

#include "../kselftest_harness.h"

#define PW		0x6c697465ULL		/* "lite" */
#define BAD_PW		(PW ^ 1)
#define LMR_SIZE	8192UL
#define WAIT_STEPS	(5 * 60 * 10)		/* 5 minutes in 100 ms steps */
#define NO_NODE		(LITE_MAX_NODES - 1)	/* not in a small cluster */
#define NO_LOCK		LITE_MAX_LOCKS		/* a number no lock has */
#define BAD_PERM	0x20ULL			/* no LITE_PERM_* bit */
#define PERM_RW		(LITE_PERM_READ | LITE_PERM_WRITE)
#define PRIO(port, p)	LITE_PORT_PRIORITY(port, p)
#define ARG(x)		((unsigned long)(x))
/* Names and ports of node id */
#define NAME(id, n)	(0x4c49544500000000ULL | ((__u64)(id) << 8) | (n))
#define PORT(id, n)	(((id) * 6 + (n)) % 48)
#define XPORT		60	/* served by every node (multicast: one port) */

/* The result of a LITE system call: its value, or -errno. */
static long lite_ret(long ret)
{
	return ret == -1 ? -errno : ret;
}

#define sys_lite(call, ...) lite_ret(syscall(__NR_lite_##call, ##__VA_ARGS__))

/* A call that must fail with err */
struct lite_case {
	const char *call;
	long nr;
	unsigned long arg[6];
	int err;
};

#define CASE(call, err, ...) { #call, __NR_lite_##call, { __VA_ARGS__ }, err }
/* The arguments of a case for each of several calls (CHECK_CALL) */
#define ARGS(err, ...) { NULL, 0, { __VA_ARGS__ }, err }

/* Runs the cases of a table of size bytes, with nr for those without */
static void check_cases(struct __test_metadata *_metadata, const char *call,
			long nr, const struct lite_case *c, size_t size)
{
	size_t i;
	long ret;

	for (i = 0; i < size / sizeof(*c); i++, c++) {
		ret = lite_ret(syscall(c->nr ?: nr, c->arg[0], c->arg[1],
				       c->arg[2], c->arg[3], c->arg[4], c->arg[5]));
		EXPECT_EQ(-c->err, ret)
			TH_LOG("case %zu: lite_%s", i, c->call ?: call);
	}
}

#define CHECK_CASES(cases) check_cases(_metadata, NULL, 0, cases, sizeof(cases))
#define CHECK_CALL(call, cases) \
	check_cases(_metadata, #call, __NR_lite_##call, cases, sizeof(cases))

static void sleep_step(void)
{
	const struct timespec step = { .tv_nsec = 100 * 1000 * 1000 };

	nanosleep(&step, NULL);
}

static void *map(size_t size, int prot)
{
	return mmap(NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/* The exit code of child pid, or -1 */
static int wait_child(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 0 if cond holds in a child process, which has LITE handles of its own */
#define IN_CHILD(cond) ({				\
	pid_t __pid = fork();				\
							\
	if (__pid == 0)					\
		_exit((cond) ? 0 : 1);			\
	wait_child(__pid);				\
})

/* LITE_CM_ADDRESS into ip and port; false if it is not set */
static bool manager_address(struct __test_metadata *_metadata,
			    char ip[LITE_MAX_IP_LEN], unsigned int *port)
{
	const char *address = getenv("LITE_CM_ADDRESS");
	const char *colon;
	size_t len;

	if (!address || !*address)
		return false;
	colon = strchr(address, ':');
	len = colon ? (size_t)(colon - address) : strlen(address);
	ASSERT_GT((size_t)LITE_MAX_IP_LEN, len);
	memcpy(ip, address, len);
	ip[len] = '\0';
	*port = colon ? strtoul(colon + 1, NULL, 10) : LITE_CM_DEFAULT_PORT;
	return true;
}

/*
 * Skips unless this node has not joined: lite_get_node_id() fails with
 * ENOTCONN then, and with nothing else unless LITE is not loaded.
 */
static bool before_join(struct __test_metadata *_metadata)
{
	long id = sys_lite(get_node_id);

	if (id > 0)
		SKIP(return false, "this node has joined already");
	if (id != -ENOTCONN)
		SKIP(return false, "LITE is not loaded: %s", strerror(-id));
	return true;
}

TEST(enotconn_before_join)
{
	/* Valid arguments: every pointer is to buf. */
	char buf[64] = "lite";
	const struct lite_case cases[] = {
		CASE(get_node_id, ENOTCONN),
		CASE(get_total_node, ENOTCONN),
		CASE(alloc_remote, ENOTCONN, 1, 4096, 0, PW),
		CASE(rdma_write, ENOTCONN, 1, ARG(buf), 8, 0, 0, PW),
		CASE(rdma_read, ENOTCONN, 1, ARG(buf), 8, 0, 0, PW),
		CASE(free, ENOTCONN, 1),
		CASE(dist_barrier, ENOTCONN, 2),
		CASE(remote_memset, ENOTCONN, 1, 0, 8, 0),
		CASE(memcpy, ENOTCONN, 1, 0, 2, 0, 8),
		CASE(memmove, ENOTCONN, 1, 0, 2, 0, 8),
		CASE(wrap_alloc, ENOTCONN, ARG(buf), 8, NAME(0, 1), PW),
		CASE(add_ask_mr_table, ENOTCONN, NAME(0, 1), 1, 1, PW),
		CASE(ask_lmr, ENOTCONN, 1, NAME(0, 1), 1, PW),
		CASE(umap_lmr, ENOTCONN, 1),
		CASE(register_lmr, ENOTCONN, ARG(buf), 8, PERM_RW, PW),
		CASE(deregister_lmr, ENOTCONN, 1),
		CASE(rdma_write_async, ENOTCONN, 1, ARG(buf), 8, 0, 0, PW),
		CASE(rdma_read_async, ENOTCONN, 1, ARG(buf), 8, 0, 0, PW),
		CASE(async_wait, ENOTCONN, 1, 0),
		CASE(fence, ENOTCONN),
		CASE(register_application, ENOTCONN, 1, 64, ARG(buf), 4),
		CASE(unregister_application, ENOTCONN, 1),
		CASE(query_port, ENOTCONN, 1, 1),
		CASE(send_reply_imm, ENOTCONN, 1, 1, ARG(buf), 4, ARG(buf), 64),
		CASE(send, ENOTCONN, 1, 1, ARG(buf), 4),
		CASE(receive_message, ENOTCONN, 1, ARG(buf), 64, ARG(buf), LITE_RECV_NONBLOCK),
		CASE(reply_message, ENOTCONN, ARG(buf), 4, 1),
		CASE(reply_and_receive_message, ENOTCONN, ARG(buf), 4, 1, ARG(buf)),
		CASE(send_reply_multicast, ENOTCONN, ARG(buf)),
		CASE(fetch_add, ENOTCONN, 1, ARG(buf), 1, 0),
		CASE(compare_swp, ENOTCONN, 1, ARG(buf), 0, 1, 0),
		CASE(create_lock, ENOTCONN, 1, ARG(buf)),
		CASE(ask_lock, ENOTCONN, 1, 0, ARG(buf)),
		CASE(lock, ENOTCONN, ARG(buf)),
		CASE(unlock, ENOTCONN, ARG(buf)),
		CASE(set_priority, ENOTCONN, LITE_PRIORITY_HIGH),
		CASE(leave, ENOTCONN, 0),
		CASE(send_reply_imm_async, ENOTCONN, 1, 1, ARG(buf), 4, ARG(buf), 64),
	};

	if (before_join(_metadata))
		CHECK_CASES(cases);
}

TEST(stats_before_join)
{
	struct lite_stats st, zero = { 0 };
	char *bad = map(getpagesize(), PROT_NONE);
	const struct lite_case cases[] = {
		ARGS(EINVAL, ARG(&st), 7),
		ARGS(EINVAL, ARG(&st), 0),
		ARGS(EFAULT, ARG(bad), sizeof(st)),
	};

	if (!before_join(_metadata))
		return;
	CHECK_CALL(get_stats, cases);
	/* All counters are 0, and only size bytes are written. */
	memset(&st, 0xff, sizeof(st));
	EXPECT_EQ(0, sys_lite(get_stats, &st, sizeof(st)));
	EXPECT_EQ(0, memcmp(&st, &zero, sizeof(st)));
	memset(&st, 0xff, sizeof(st));
	EXPECT_EQ(0, sys_lite(get_stats, &st, 8UL));
	EXPECT_EQ(0ULL, st.lmrs);
	EXPECT_EQ(~0ULL, st.registrations);
}

TEST(join_arguments)
{
	const unsigned int port = LITE_CM_DEFAULT_PORT;
	const struct lite_case cases[] = {
		ARGS(EFAULT, ARG(map(getpagesize(), PROT_NONE)), port, 1),
		ARGS(EINVAL, ARG("lite.invalid"), port, 1),
		/* not NUL-terminated within LITE_MAX_IP_LEN bytes */
		ARGS(EINVAL, ARG("010.000.000.0001"), port, 1),
		ARGS(EINVAL, ARG("10.0.0.1"), 0, 1),
		ARGS(EINVAL, ARG("10.0.0.1"), 65536, 1),
	};

	if (!before_join(_metadata))
		return;
	if (sys_lite(join, "lite.invalid", port, 1) == -EPERM)
		SKIP(return, "joining needs CAP_NET_ADMIN");
	CHECK_CALL(join, cases);
}

/* The result of the ia32 system call nr, entered with int $0x80 */
static long ia32_call(long nr)
{
	long ret = nr;

	/* The ia32 entry clears r8-r11 of a 64-bit caller. */
	asm volatile ("int $0x80" : "+a" (ret) : : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

/*
 * The calls are x86_64 only (lite(7)): the ia32 entry, which 32-bit
 * processes use and a 64-bit one reaches with int $0x80, has none of
 * their numbers.
 */
TEST(no_ia32_calls)
{
	pid_t pid = fork();
	int status;
	long nr;

	ASSERT_LE(0, pid);
	if (pid == 0) {
		for (nr = __NR_lite_join; nr <= __NR_lite_send_reply_imm_async; nr++)
			if (ia32_call(nr) != -ENOSYS)
				_exit(1);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* Without ia32 emulation, int $0x80 faults. */
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		SKIP(return, "the kernel runs no ia32 processes");
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

FIXTURE(lite) {
	long id;		/* this node */
	long nodes;		/* the cluster's size */
	long other;		/* the next node: 3 - id in a cluster of 2 */
	long remote;		/* an LMR of LMR_SIZE bytes on the other node */
	long local;		/* and one on this node */
	char *bad;		/* a page that cannot be accessed */
};

/* Joins unless the node is a member, and waits until all nodes are. */
FIXTURE_SETUP(lite)
{
	const char *nodes = getenv("LITE_NODES");
	char ip[LITE_MAX_IP_LEN];
	unsigned int port;
	long ret = -ETIMEDOUT;
	int i = 0;	/* steps of the 5 minutes all waits share */

	self->bad = map(getpagesize(), PROT_NONE);
	ASSERT_NE(MAP_FAILED, self->bad);
	self->id = sys_lite(get_node_id);
	if (self->id < 0 && self->id != -ENOTCONN)
		SKIP(return, "LITE is not loaded: %s", strerror(-self->id));
	if (self->id == -ENOTCONN) {
		if (!manager_address(_metadata, ip, &port))
			SKIP(return, "LITE_CM_ADDRESS is not set");
		/* The manager may still count an earlier incarnation. */
		for (; i < WAIT_STEPS; i += 10) {
			ret = sys_lite(join, ip, port, 1);
			if (ret != -EADDRINUSE && ret != -EAGAIN && ret != -EALREADY)
				break;
			sleep(1);
		}
		if (ret == -EISCONN)
			ret = sys_lite(get_node_id);
		ASSERT_LT(0, ret)
			TH_LOG("lite_join(%s, %u): %s", ip, port, strerror(-ret));
		self->id = ret;
	}
	ASSERT_LT(0, self->id);
	self->nodes = nodes ? strtol(nodes, NULL, 10) : sys_lite(get_total_node);
	if (self->nodes < 2)
		SKIP(return, "needs a cluster of 2 nodes or more");
	ASSERT_GT(NO_NODE, self->nodes);
	for (; i < WAIT_STEPS; i++) {
		if (sys_lite(get_total_node) >= self->nodes)
			break;
		sleep_step();
	}
	ASSERT_EQ(self->nodes, sys_lite(get_total_node));
	self->other = self->id % self->nodes + 1;
	self->remote = sys_lite(alloc_remote, self->other, LMR_SIZE, 0, PW);
	ASSERT_LT(0, self->remote);
	self->local = sys_lite(alloc_remote, self->id, LMR_SIZE, 0, PW);
	ASSERT_LT(0, self->local);
}

static long free_lmr(long handle)
{
	return handle > 0 ? sys_lite(free, handle) : 0;
}

FIXTURE_TEARDOWN(lite)
{
	EXPECT_EQ(0, free_lmr(self->remote));
	EXPECT_EQ(0, free_lmr(self->local));
}

TEST_F_TIMEOUT(lite, membership, 420)
{
	struct lite_stats st[2];
	char ip[LITE_MAX_IP_LEN];
	unsigned int port;
	const struct lite_case cases[] = {
		CASE(dist_barrier, EINVAL, 0),
		CASE(dist_barrier, EINVAL, LITE_MAX_NODES + 1),
		CASE(leave, EINVAL, 0x2),
		CASE(leave, EINVAL, ~LITE_LEAVE_FORCE),
		CASE(set_priority, EINVAL, 3),
		CASE(set_priority, EINVAL, ~0U),
		CASE(get_stats, EINVAL, ARG(st), 7),
		CASE(get_stats, EFAULT, ARG(self->bad), sizeof(st[0])),
	};

	/* lite_leave() only for its errors: the other node uses this one. */
	EXPECT_GT(LITE_MAX_NODES, self->id);
	EXPECT_EQ(self->id, sys_lite(get_node_id));
	EXPECT_EQ(self->nodes, sys_lite(get_total_node));
	if (manager_address(_metadata, ip, &port))
		EXPECT_EQ(-EISCONN, sys_lite(join, ip, port, 1));
	CHECK_CASES(cases);
	/* The default priority, initially NONE */
	EXPECT_EQ(LITE_PRIORITY_NONE, sys_lite(set_priority, LITE_PRIORITY_HIGH));
	EXPECT_EQ(LITE_PRIORITY_HIGH, sys_lite(set_priority, LITE_PRIORITY_LOW));
	EXPECT_EQ(LITE_PRIORITY_LOW, sys_lite(set_priority, LITE_PRIORITY_NONE));
	/* At most sizeof(struct lite_stats) bytes are written. */
	memset(st, 0xa5, sizeof(st));
	EXPECT_EQ(0, sys_lite(get_stats, st, sizeof(st[0]) + 8));
	EXPECT_LE(2ULL, st[0].handles);
	EXPECT_LE(1ULL, st[0].processes);
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, st[1].lmrs);
}

TEST_F(lite, alloc_free)
{
	const unsigned int nodes[] = {
		self->other, self->id, LITE_NODE_SPREAD,
	};
	const struct lite_case cases[] = {
		CASE(alloc_remote, EINVAL, self->other, 0, 0, PW),
		CASE(alloc_remote, EINVAL, self->other, LITE_MAX_LMR_SIZE + 1, 0, PW),
		CASE(alloc_remote, EINVAL, self->other, 8, 0x2, PW),
		CASE(alloc_remote, EINVAL, self->other, 16, LITE_ALLOC_ATOMIC, PW),
		CASE(alloc_remote, EINVAL, LITE_MAX_NODES, 8, 0, PW),
		CASE(alloc_remote, EHOSTUNREACH, NO_NODE, 8, 0, PW),
		CASE(free, EBADF, 0),
		CASE(free, EBADF, -1),
		CASE(deregister_lmr, EBADF, 0),
	};
	__u64 word = 0x1122334455667788ULL, back = 0;
	size_t i;
	long h;

	CHECK_CASES(cases);
	for (i = 0; i < ARRAY_SIZE(nodes); i++) {
		h = sys_lite(alloc_remote, nodes[i], LMR_SIZE, 0, PW);
		ASSERT_LT(0, h)
			TH_LOG("node %u", nodes[i]);
		EXPECT_EQ(0, sys_lite(rdma_write, h, &word, 8UL, LMR_SIZE - 8, 0, PW));
		EXPECT_EQ(0, sys_lite(rdma_read, h, &back, 8UL, LMR_SIZE - 8, 0, PW));
		EXPECT_EQ(word, back);
		EXPECT_EQ(0, sys_lite(free, h));
		EXPECT_EQ(-EBADF, sys_lite(free, h));
		EXPECT_EQ(-EBADF, sys_lite(rdma_read, h, &back, 8UL, 0UL, 0, PW));
	}
	/* lite_deregister_lmr() frees an allocated LMR too. */
	h = sys_lite(alloc_remote, self->other, 8UL, LITE_ALLOC_ATOMIC, PW);
	ASSERT_LT(0, h);
	EXPECT_EQ(0, sys_lite(deregister_lmr, h));
	EXPECT_EQ(-EBADF, sys_lite(free, h));
	/* Handles are not inherited across fork(). */
	EXPECT_EQ(0, IN_CHILD(sys_lite(rdma_read, self->remote, &back, 8UL, 0UL, 0, PW) == -EBADF));
}

/* The arguments of the four data transfers */
TEST_F(lite, data_errors)
{
	const size_t big_size = LITE_MAX_ASYNC_SIZE + LMR_SIZE;
	const long r = self->remote, l = self->local;
	long big = sys_lite(alloc_remote, self->other, big_size, 0, PW);
	char buf[16], *mem = map(big_size, PROT_READ | PROT_WRITE);
	const struct lite_case data[] = {
		ARGS(EBADF, 0, ARG(buf), 8, 0, 0, PW),
		ARGS(EBADF, -1, ARG(buf), 8, 0, 0, PW),
		ARGS(EACCES, r, ARG(buf), 8, 0, 0, BAD_PW),
		ARGS(EACCES, l, ARG(buf), 8, 0, 0, BAD_PW),
		ARGS(EINVAL, r, ARG(buf), 1, LMR_SIZE, 0, PW),
		ARGS(EINVAL, l, ARG(buf), 16, LMR_SIZE - 8, 0, PW),
		ARGS(EINVAL, r, ARG(buf), 2, -1, 0, PW),
		ARGS(EINVAL, r, ARG(buf), 8, 0, 3, PW),
	};
	const struct lite_case async[] = {
		ARGS(EINVAL, big, ARG(mem), LITE_MAX_ASYNC_SIZE + 1, 0, 0, PW),
	};
	const struct lite_case cases[] = {
		CASE(rdma_write, EFAULT, r, ARG(self->bad), 8, 0, 0, PW),
		CASE(rdma_read, EFAULT, r, ARG(self->bad), 8, 0, 0, PW),
		CASE(rdma_read, EFAULT, l, ARG(self->bad), 8, 0, 0, PW),
		CASE(rdma_write_async, EFAULT, r, ARG(self->bad), 8, 0, 0, PW),
		CASE(async_wait, EINVAL, 0, 0),
		CASE(async_wait, EINVAL, -1, 0),
		CASE(async_wait, EINVAL, -1, 0x2),
	};

	ASSERT_LT(0, big);
	ASSERT_NE(MAP_FAILED, mem);
	CHECK_CALL(rdma_write, data);
	CHECK_CALL(rdma_read, data);
	CHECK_CALL(rdma_write_async, data);
	CHECK_CALL(rdma_read_async, data);
	CHECK_CALL(rdma_write_async, async);
	CHECK_CALL(rdma_read_async, async);
	CHECK_CASES(cases);
	EXPECT_EQ(0, sys_lite(fence));
	EXPECT_EQ(0, sys_lite(free, big));
}

TEST_F(lite, rdma_write_read)
{
	const long handles[] = { self->remote, self->local };
	const unsigned int prio[] = {
		LITE_PRIORITY_NONE, LITE_PRIORITY_HIGH, LITE_PRIORITY_LOW,
	};
	static char out[LMR_SIZE], in[LMR_SIZE];
	size_t i, j;
	long big;

	for (i = 0; i < sizeof(out); i++)
		out[i] = i * 7 + self->id;
	EXPECT_EQ(0, sys_lite(rdma_write, self->remote, out, 0UL, 0UL, 0, PW));
	/* Across a page, on both nodes, at each priority */
	for (i = 0; i < ARRAY_SIZE(handles); i++) {
		for (j = 0; j < ARRAY_SIZE(prio); j++) {
			memset(in, 0, 512);
			EXPECT_EQ(0, sys_lite(rdma_write, handles[i], out + j,
					      512UL, 4000UL, prio[j], PW));
			EXPECT_EQ(0, sys_lite(rdma_read, handles[i], in, 512UL,
					      4000UL, prio[j], PW));
			EXPECT_EQ(0, memcmp(out + j, in, 512));
		}
	}
	/* Across two chunks */
	big = sys_lite(alloc_remote, self->other, LITE_CHUNK_SIZE + LMR_SIZE, 0, PW);
	ASSERT_LT(0, big);
	EXPECT_EQ(0, sys_lite(rdma_write, big, out, LMR_SIZE, LITE_CHUNK_SIZE - 4096UL, 0, PW));
	memset(in, 0, sizeof(in));
	EXPECT_EQ(0, sys_lite(rdma_read, big, in, LMR_SIZE, LITE_CHUNK_SIZE - 4096UL, 0, PW));
	EXPECT_EQ(0, memcmp(out, in, sizeof(in)));
	EXPECT_EQ(0, sys_lite(free, big));
}

TEST_F(lite, async_io)
{
	__u64 out[LITE_MAX_ASYNC_OPS], in[LITE_MAX_ASYNC_OPS];
	long ids[LITE_MAX_ASYNC_OPS], op, ret;
	const long r = self->remote;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(out); i++)
		out[i] = (__u64)self->id << 32 | i;
	op = sys_lite(rdma_write_async, r, out, sizeof(out), 0UL, LITE_PRIORITY_LOW, PW);
	ASSERT_LT(0, op);
	EXPECT_EQ(0, sys_lite(async_wait, op, 0));
	EXPECT_EQ(-EINVAL, sys_lite(async_wait, op, 0));
	op = sys_lite(rdma_read_async, r, in, sizeof(in), 0UL, LITE_PRIORITY_HIGH, PW);
	ASSERT_LT(0, op);
	ret = sys_lite(async_wait, op, LITE_ASYNC_NOWAIT);
	if (ret == -EAGAIN)
		ret = sys_lite(async_wait, op, 0);
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, memcmp(out, in, sizeof(in)));

	/* LITE_MAX_ASYNC_OPS unreaped at most; lite_fence() reaps them. */
	memset(in, 0, sizeof(in));
	for (i = 0; i < ARRAY_SIZE(ids); i++) {
		ids[i] = sys_lite(rdma_read_async, r, &in[i], 8UL, i * 8, 0, PW);
		EXPECT_LT(0, ids[i]);
	}
	EXPECT_EQ(-EAGAIN, sys_lite(rdma_read_async, r, in, 8UL, 0UL, 0, PW));
	EXPECT_EQ(-EAGAIN, sys_lite(rdma_write_async, r, out, 8UL, 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(fence));
	EXPECT_EQ(-EINVAL, sys_lite(async_wait, ids[0], 0));
	EXPECT_EQ(0, memcmp(out, in, sizeof(in)));
	EXPECT_EQ(0, sys_lite(fence));

	/* A read into memory that cannot be written fails when reaped. */
	op = sys_lite(rdma_read_async, r, self->bad, 8UL, 0UL, 0, PW);
	ASSERT_LT(0, op);
	EXPECT_EQ(-EFAULT, sys_lite(async_wait, op, 0));
	op = sys_lite(rdma_read_async, r, self->bad, 8UL, 0UL, 0, PW);
	ASSERT_LT(0, op);
	EXPECT_EQ(-EFAULT, sys_lite(fence));
}

TEST_F(lite, memory_ops)
{
	const long r = self->remote, l = self->local;
	unsigned char pattern[256], zero[1024] = { 0 }, back[1024], copy[1024];
	const struct lite_case copies[] = {
		ARGS(EBADF, 0, 0, l, 0, 8),
		ARGS(EBADF, r, 0, 0, 0, 8),
		ARGS(EINVAL, r, LMR_SIZE - 4, l, 0, 8),
		ARGS(EINVAL, l, 0, r, LMR_SIZE - 4, 8),
		ARGS(EINVAL, r, -1, l, 0, 2),
		ARGS(EINVAL, r, 0, r, -1, 2),
	};
	const struct lite_case memset_cases[] = {
		ARGS(EBADF, 0, 0, 8, 0),
		ARGS(EINVAL, r, 0, 8, 256),
		ARGS(EINVAL, r, LMR_SIZE - 4, 8, 0),
		ARGS(EINVAL, l, -1, 2, 0),
	};
	size_t i;

	CHECK_CALL(memcpy, copies);
	CHECK_CALL(memmove, copies);
	CHECK_CALL(remote_memset, memset_cases);
	/* Bytes 100 to 399 of the other node's LMR, set by that node */
	ASSERT_EQ(0, sys_lite(rdma_write, r, zero, sizeof(zero), 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(remote_memset, r, 100UL, 300UL, 0xa5));
	ASSERT_EQ(0, sys_lite(rdma_read, r, back, sizeof(back), 0UL, 0, PW));
	for (i = 0; i < sizeof(back); i++)
		ASSERT_EQ(i >= 100 && i < 400 ? 0xa5 : 0, back[i])
			TH_LOG("byte %zu", i);
	/* From the other node to this one, and back elsewhere */
	EXPECT_EQ(0, sys_lite(memcpy, r, 0UL, l, 2048UL, sizeof(back)));
	ASSERT_EQ(0, sys_lite(rdma_read, l, copy, sizeof(copy), 2048UL, 0, PW));
	EXPECT_EQ(0, memcmp(back, copy, sizeof(copy)));
	EXPECT_EQ(0, sys_lite(memcpy, l, 2048UL, r, 4096UL, sizeof(back)));
	ASSERT_EQ(0, sys_lite(rdma_read, r, copy, sizeof(copy), 4096UL, 0, PW));
	EXPECT_EQ(0, memcmp(back, copy, sizeof(copy)));
	/* Overlapping ranges of one LMR */
	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = i;
	ASSERT_EQ(0, sys_lite(rdma_write, r, pattern, sizeof(pattern), 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(memmove, r, 0UL, r, 16UL, sizeof(pattern)));
	ASSERT_EQ(0, sys_lite(rdma_read, r, back, sizeof(pattern) + 16, 0UL, 0, PW));
	EXPECT_EQ(0, memcmp(back, pattern, 16));
	EXPECT_EQ(0, memcmp(back + 16, pattern, sizeof(pattern)));
}

TEST_F(lite, register_lmr)
{
	const size_t page = getpagesize();
	char *buf = map(2 * page, PROT_READ | PROT_WRITE);
	char *ro = map(page, PROT_READ);
	char text[] = "registered", back[sizeof(text)];
	const struct lite_case cases[] = {
		CASE(register_lmr, EINVAL, ARG(buf), 0, PERM_RW, PW),
		CASE(register_lmr, EINVAL, ARG(buf), LITE_MAX_REGISTER_SIZE + 1, PERM_RW, PW),
		CASE(register_lmr, EINVAL, ARG(buf), page, LITE_PERM_ADMIN, PW),
		CASE(register_lmr, EINVAL, ARG(buf), page, BAD_PERM, PW),
		CASE(register_lmr, EFAULT, ARG(self->bad), page, PERM_RW, PW),
		CASE(register_lmr, EFAULT, ARG(ro), page, PERM_RW, PW),
		CASE(register_lmr, EFAULT, -page, 2 * page, PERM_RW, PW),
		CASE(deregister_lmr, EBADF, 0),
		CASE(deregister_lmr, EBADF, -1),
	};
	long h;

	ASSERT_NE(MAP_FAILED, buf);
	ASSERT_NE(MAP_FAILED, ro);
	CHECK_CASES(cases);
	h = sys_lite(register_lmr, buf, 2 * page, PERM_RW | LITE_PERM_SHARE, PW);
	ASSERT_LT(0, h);
	/* The handle reaches the process's own memory. */
	EXPECT_EQ(0, sys_lite(rdma_write, h, text, sizeof(text), page - 4, 0, PW));
	EXPECT_EQ(0, memcmp(buf + page - 4, text, sizeof(text)));
	memcpy(buf + 100, "direct", 7);
	EXPECT_EQ(0, sys_lite(rdma_read, h, back, 7UL, 100UL, 0, PW));
	EXPECT_EQ(0, memcmp(back, "direct", 7));
	EXPECT_EQ(0, sys_lite(deregister_lmr, h));
	EXPECT_EQ(-EBADF, sys_lite(deregister_lmr, h));
	EXPECT_EQ(-EBADF, sys_lite(rdma_read, h, back, 7UL, 100UL, 0, PW));
	buf[0] = 1;
	/* The handle has the permissions given; lite_free() deregisters. */
	h = sys_lite(register_lmr, buf, 16UL, LITE_PERM_READ, PW);
	ASSERT_LT(0, h);
	EXPECT_EQ(-EPERM, sys_lite(rdma_write, h, text, 4UL, 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(rdma_read, h, back, 4UL, 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(free, h));
	EXPECT_EQ(-EBADF, sys_lite(free, h));
}

/* Publishes handle h under name, and maps it from node: the mapping */
static long share(long node, long h, __u64 name, __u64 perm)
{
	long ret = sys_lite(add_ask_mr_table, name, h, perm, PW);

	return ret ? ret : sys_lite(ask_lmr, node, name, perm, PW);
}

TEST_F(lite, share_by_name)
{
	const long id = self->id, l = self->local;
	char text[64] = "published", back[64] = "", mem[64];
	long h = sys_lite(wrap_alloc, text, sizeof(text), NAME(id, 1), PW);
	long ro = share(id, l, NAME(id, 2), LITE_PERM_READ);
	long wo = share(id, l, NAME(id, 3), LITE_PERM_WRITE | LITE_PERM_SHARE);
	long ns = sys_lite(register_lmr, mem, sizeof(mem), PERM_RW, PW);
	const struct lite_case cases[] = {
		CASE(wrap_alloc, EFAULT, ARG(self->bad), 64, NAME(id, 9), PW),
		CASE(wrap_alloc, EINVAL, ARG(text), 0, NAME(id, 9), PW),
		CASE(wrap_alloc, EEXIST, ARG(text), 64, NAME(id, 1), PW),
		CASE(add_ask_mr_table, EINVAL, NAME(id, 9), l, LITE_PERM_ADMIN, PW),
		CASE(add_ask_mr_table, EINVAL, NAME(id, 9), l, BAD_PERM, PW),
		CASE(add_ask_mr_table, EINVAL, NAME(id, 9), wo, LITE_PERM_WRITE, PW),
		CASE(add_ask_mr_table, EBADF, NAME(id, 9), 0, LITE_PERM_READ, PW),
		CASE(add_ask_mr_table, EACCES, NAME(id, 9), l, LITE_PERM_READ, BAD_PW),
		CASE(add_ask_mr_table, EPERM, NAME(id, 9), ns, LITE_PERM_READ, PW),
		CASE(add_ask_mr_table, EEXIST, NAME(id, 1), l, LITE_PERM_READ, PW),
		CASE(ask_lmr, ENOENT, id, NAME(id, 9), LITE_PERM_READ, PW),
		CASE(ask_lmr, EACCES, id, NAME(id, 1), LITE_PERM_READ, BAD_PW),
		CASE(ask_lmr, EPERM, id, NAME(id, 2), LITE_PERM_WRITE, PW),
		CASE(ask_lmr, EPERM, id, NAME(id, 1), LITE_PERM_ADMIN, PW),
		CASE(ask_lmr, EINVAL, id, NAME(id, 1), BAD_PERM, PW),
		CASE(ask_lmr, EINVAL, LITE_MAX_NODES, NAME(id, 1),
		     LITE_PERM_READ, PW),
		CASE(ask_lmr, EHOSTUNREACH, NO_NODE, NAME(id, 1),
		     LITE_PERM_READ, PW),
		CASE(umap_lmr, EBADF, 0),
		CASE(umap_lmr, EINVAL, l),
		CASE(free, EPERM, ro),
		CASE(deregister_lmr, EPERM, ro),
		CASE(rdma_write, EPERM, ro, ARG(text), 8, 0, 0, PW),
		CASE(rdma_read, EPERM, wo, ARG(back), 8, 0, 0, PW),
		CASE(rdma_write_async, EPERM, ro, ARG(text), 8, 0, 0, PW),
		CASE(rdma_read_async, EPERM, wo, ARG(back), 8, 0, 0, PW),
		CASE(remote_memset, EPERM, ro, 0, 8, 0),
		CASE(memcpy, EPERM, wo, 0, l, 64, 8),
		CASE(memcpy, EPERM, l, 0, ro, 64, 8),
		CASE(memmove, EPERM, wo, 0, l, 64, 8),
		CASE(memmove, EPERM, l, 0, ro, 64, 8),
	};
	long rw;

	ASSERT_LT(0, h);
	ASSERT_LT(0, ro);
	ASSERT_LT(0, wo);
	ASSERT_LT(0, ns);
	CHECK_CASES(cases);
	/* A mapping gets what the name grants, never ADMIN. */
	rw = sys_lite(ask_lmr, id, NAME(id, 1), PERM_RW | LITE_PERM_ADMIN, PW);
	ASSERT_LT(0, rw);
	EXPECT_EQ(0, sys_lite(rdma_read, rw, back, sizeof(back), 0UL, 0, PW));
	EXPECT_EQ(0, memcmp(text, back, sizeof(back)));
	EXPECT_EQ(0, sys_lite(rdma_write, rw, "X", 1UL, 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(rdma_read, h, back, 1UL, 0UL, 0, PW));
	EXPECT_EQ('X', back[0]);
	EXPECT_EQ(-EPERM, sys_lite(free, rw));
	/* Freeing the LMR revokes its mappings and its name. */
	EXPECT_EQ(0, sys_lite(free, h));
	EXPECT_EQ(-EKEYREVOKED, sys_lite(rdma_read, rw, back, 1UL, 0UL, 0, PW));
	EXPECT_EQ(0, sys_lite(umap_lmr, rw));
	EXPECT_EQ(-EBADF, sys_lite(umap_lmr, rw));
	EXPECT_EQ(-ENOENT, sys_lite(ask_lmr, id, NAME(id, 1), LITE_PERM_READ, PW));
	EXPECT_EQ(0, sys_lite(umap_lmr, ro));
	EXPECT_EQ(0, sys_lite(umap_lmr, wo));
	EXPECT_EQ(0, sys_lite(deregister_lmr, ns));
}

/* No ASSERT between the barriers: every node must reach both. */
TEST_F_TIMEOUT(lite, share_across_nodes, 300)
{
	const long prev = (self->id + self->nodes - 2) % self->nodes + 1;
	char text[64] = "", back[64] = "", want[64];
	long h, m;

	snprintf(text, sizeof(text), "node %ld", self->id);
	h = sys_lite(wrap_alloc, text, sizeof(text), NAME(self->id, 16), PW);
	EXPECT_LT(0, h);
	EXPECT_EQ(0, sys_lite(dist_barrier, self->nodes));
	m = sys_lite(ask_lmr, self->other, NAME(self->other, 16), PERM_RW, PW);
	EXPECT_LT(0, m);
	if (m > 0) {
		snprintf(want, sizeof(want), "node %ld", self->other);
		EXPECT_EQ(0, sys_lite(rdma_read, m, back, sizeof(back), 0UL, 0, PW));
		EXPECT_STREQ(want, back);
		snprintf(text, sizeof(text), "written by node %ld", self->id);
		EXPECT_EQ(0, sys_lite(rdma_write, m, text, sizeof(text), 0UL, 0, PW));
		/* Copied by the other node into this one's LMR */
		EXPECT_EQ(0, sys_lite(memcpy, m, 0UL, self->local, 0UL, sizeof(text)));
		EXPECT_EQ(0, sys_lite(rdma_read, self->local, back, sizeof(back), 0UL, 0, PW));
		EXPECT_STREQ(text, back);
		EXPECT_EQ(0, sys_lite(umap_lmr, m));
	}
	EXPECT_EQ(0, sys_lite(dist_barrier, self->nodes));
	if (h > 0) {
		snprintf(want, sizeof(want), "written by node %ld", prev);
		memset(back, 0, sizeof(back));
		EXPECT_EQ(0, sys_lite(rdma_read, h, back, sizeof(back), 0UL, 0, PW));
		EXPECT_STREQ(want, back);
		EXPECT_EQ(0, sys_lite(free, h));
	}
}

/* fetch_add and compare_swp on the 8-byte LMR h, whatever it holds */
static void atomic_sequence(struct __test_metadata *_metadata, long h)
{
	__u64 v, old;

	ASSERT_EQ(0, sys_lite(compare_swp, h, &v, 0UL, 0UL, 0));
	ASSERT_EQ(0, sys_lite(fetch_add, h, &old, 5UL, 0));
	EXPECT_EQ(v, old);
	ASSERT_EQ(0, sys_lite(fetch_add, h, &old, ~0UL, LITE_PRIORITY_HIGH));
	EXPECT_EQ(v + 5, old);
	ASSERT_EQ(0, sys_lite(compare_swp, h, &old, v + 4, 42UL, LITE_PRIORITY_LOW));
	EXPECT_EQ(v + 4, old);
	/* A failed compare leaves the value. */
	ASSERT_EQ(0, sys_lite(compare_swp, h, &old, 7UL, 1UL, 0));
	EXPECT_EQ(42ULL, old);
	ASSERT_EQ(0, sys_lite(fetch_add, h, &old, 0UL, 0));
	EXPECT_EQ(42ULL, old);
}

TEST_F(lite, atomics)
{
	long ar = sys_lite(alloc_remote, self->other, 8UL, LITE_ALLOC_ATOMIC, PW);
	long al = sys_lite(alloc_remote, self->id, 8UL, LITE_ALLOC_ATOMIC, PW);
	long m = share(self->id, al, NAME(self->id, 5), PERM_RW);
	char *mem = map(getpagesize(), PROT_READ | PROT_WRITE);
	long r16 = sys_lite(register_lmr, mem, 16UL, LITE_PERM_ATOMIC | LITE_PERM_READ, PW);
	__u64 old;
	const struct lite_case cases[] = {
		CASE(fetch_add, EFAULT, ar, ARG(self->bad), 1, 0),
		CASE(fetch_add, EBADF, 0, ARG(&old), 1, 0),
		CASE(fetch_add, EPERM, m, ARG(&old), 1, 0),
		CASE(fetch_add, EINVAL, r16, ARG(&old), 1, 0),
		CASE(fetch_add, EINVAL, ar, ARG(&old), 1, 3),
		CASE(compare_swp, EFAULT, al, ARG(self->bad), 0, 1, 0),
		CASE(compare_swp, EBADF, 0, ARG(&old), 0, 1, 0),
		CASE(compare_swp, EPERM, m, ARG(&old), 0, 1, 0),
		CASE(compare_swp, EINVAL, r16, ARG(&old), 0, 1, 0),
		CASE(compare_swp, EINVAL, al, ARG(&old), 0, 1, 3),
	};

	ASSERT_LT(0, ar);
	ASSERT_LT(0, al);
	ASSERT_LT(0, m);
	ASSERT_LT(0, r16);
	CHECK_CASES(cases);
	atomic_sequence(_metadata, ar);
	atomic_sequence(_metadata, al);
	EXPECT_EQ(0, sys_lite(free, ar));
	EXPECT_EQ(0, sys_lite(free, al));
	EXPECT_EQ(0, sys_lite(umap_lmr, m));
	EXPECT_EQ(0, sys_lite(deregister_lmr, r16));
}

static void lock_sequence(struct __test_metadata *_metadata, const struct lite_lock *lk)
{
	struct lite_lock found = { 0, 0 };

	ASSERT_EQ(0, sys_lite(ask_lock, lk->home, lk->number, &found));
	EXPECT_EQ(0, memcmp(lk, &found, sizeof(found)));
	ASSERT_EQ(0, sys_lite(lock, lk));
	EXPECT_EQ(-EDEADLK, sys_lite(lock, lk));
	/* Only the holder releases it; then another process takes it. */
	EXPECT_EQ(0, IN_CHILD(sys_lite(unlock, lk) == -EPERM));
	EXPECT_EQ(0, sys_lite(unlock, lk));
	EXPECT_EQ(-EPERM, sys_lite(unlock, lk));
	EXPECT_EQ(0, IN_CHILD(!sys_lite(lock, lk) && !sys_lite(unlock, lk)));
}

TEST_F(lite, locks)
{
	struct lite_lock theirs, mine, found;
	const struct lite_lock no_home = { LITE_MAX_NODES, 0 };
	const struct lite_lock none = { self->id, NO_LOCK };
	long n_theirs = sys_lite(create_lock, self->other, &theirs);
	long n_mine = sys_lite(create_lock, self->id, &mine);
	const struct lite_case cases[] = {
		CASE(create_lock, EFAULT, self->other, ARG(self->bad)),
		CASE(create_lock, EINVAL, LITE_MAX_NODES, ARG(&found)),
		CASE(create_lock, EHOSTUNREACH, NO_NODE, ARG(&found)),
		CASE(ask_lock, EFAULT, self->other, n_theirs, ARG(self->bad)),
		CASE(ask_lock, EINVAL, LITE_MAX_NODES, 0, ARG(&found)),
		CASE(ask_lock, ENOENT, self->other, NO_LOCK, ARG(&found)),
		CASE(ask_lock, ENOENT, self->id, NO_LOCK, ARG(&found)),
		CASE(lock, EFAULT, ARG(self->bad)),
		CASE(lock, EINVAL, ARG(&no_home)),
		CASE(lock, ENOENT, ARG(&none)),
		CASE(unlock, EFAULT, ARG(self->bad)),
		CASE(unlock, EINVAL, ARG(&no_home)),
		CASE(unlock, ENOENT, ARG(&none)),
		CASE(unlock, EPERM, ARG(&theirs)),
	};

	ASSERT_LE(0, n_theirs);
	ASSERT_LE(0, n_mine);
	EXPECT_EQ(self->other, (long)theirs.home);
	EXPECT_EQ(n_theirs, (long)theirs.number);
	EXPECT_EQ(self->id, (long)mine.home);
	EXPECT_EQ(n_mine, (long)mine.number);
	CHECK_CASES(cases);
	lock_sequence(_metadata, &theirs);
	lock_sequence(_metadata, &mine);
}

TEST_F(lite, rpc_ports)
{
	const unsigned int p = PORT(self->id, 0), q = PORT(self->id, 1);
	const char name[LITE_MAX_PORT_NAME + 1] = "lite_test";
	struct lite_stats st;
	const struct lite_case cases[] = {
		CASE(register_application, EINVAL, LITE_MAX_PORTS, 64, ARG(name), 4),
		CASE(register_application, EINVAL, q, 0, ARG(name), 4),
		CASE(register_application, EINVAL, q, LITE_MAX_MESSAGE_SIZE + 1, ARG(name), 4),
		CASE(register_application, EINVAL, q, 64, ARG(name),
		     LITE_MAX_PORT_NAME + 1),
		CASE(register_application, EFAULT, q, 64, ARG(self->bad), 4),
		CASE(register_application, EADDRINUSE, p, 64, ARG(name), 4),
		CASE(unregister_application, EINVAL, LITE_MAX_PORTS),
		CASE(unregister_application, ENOENT, q),
		CASE(query_port, EINVAL, self->id, LITE_MAX_PORTS),
		CASE(query_port, EINVAL, LITE_MAX_NODES, p),
		CASE(query_port, ECONNREFUSED, self->id, q),
		CASE(query_port, EHOSTUNREACH, NO_NODE, p),
	};

	ASSERT_EQ(0, sys_lite(register_application, p, 100UL, name, 9UL));
	CHECK_CASES(cases);
	EXPECT_EQ(100, sys_lite(query_port, self->id, p));
	EXPECT_EQ(0, sys_lite(get_stats, &st, sizeof(st)));
	EXPECT_LE(1ULL, st.rpc_ports);
	/* Only the process that registered a port unregisters it. */
	EXPECT_EQ(0, IN_CHILD(sys_lite(unregister_application, p) == -EPERM));
	EXPECT_EQ(0, sys_lite(unregister_application, p));
	EXPECT_EQ(-ECONNREFUSED, sys_lite(query_port, self->id, p));
	EXPECT_EQ(-ENOENT, sys_lite(unregister_application, p));
	EXPECT_EQ(0, sys_lite(register_application, p, 100UL, name, 0UL));
	EXPECT_EQ(0, sys_lite(unregister_application, p));
}

/* lite_send_reply_multicast() with each field of good wrong in turn */
static void check_multicast(struct __test_metadata *_metadata,
			    const struct lite_multicast *good, char *big, char *bad)
{
	struct lite_multicast mc[12];
	const int err[ARRAY_SIZE(mc)] = {
		EINVAL, EINVAL, EINVAL, EINVAL, EINVAL, EINVAL, EINVAL, EINVAL,
		EFAULT, EFAULT, EFAULT, EFAULT,
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mc); i++)
		mc[i] = *good;
	mc[0].count = 0;
	mc[1].count = LITE_MAX_NODES + 1;
	mc[2].size = 0;
	mc[3].msg = ARG(big);
	mc[3].size = LITE_MAX_MESSAGE_SIZE + 1;
	mc[4].port_priority = PRIO(LITE_MAX_PORTS, 0);
	mc[5].port_priority |= LITE_SEND_NONBLOCK;
	mc[6].port_priority |= PRIO(0, 3);
	mc[7].replies = -8UL;
	mc[8].replies = 0;
	mc[9].nodes = ARG(bad);
	mc[10].lengths = ARG(bad);
	mc[11].msg = ARG(bad);
	for (i = 0; i < ARRAY_SIZE(mc); i++)
		EXPECT_EQ(-err[i], sys_lite(send_reply_multicast, &mc[i]))
			TH_LOG("multicast case %zu", i);
	EXPECT_EQ(-EFAULT, sys_lite(send_reply_multicast, bad));
}

/* Sending and receiving on this node, with nobody to answer */
TEST_F(lite, rpc_errors)
{
	static char big[LITE_MAX_MESSAGE_SIZE + 1];
	const long id = self->id;
	const unsigned int p = PORT(id, 2), q = PORT(id, 3);
	const unsigned int pp = PRIO(p, 0);
	char buf[64] = "", reply[64];
	__u32 nodes[2] = { id, NO_NODE };
	__s64 lengths[2];
	__u64 d;
	struct lite_receive next = {
		.buf = ARG(buf), .max_size = sizeof(buf), .port = p, .flags = LITE_RECV_NONBLOCK,
	};
	struct lite_multicast call = {
		.nodes = ARG(nodes), .lengths = ARG(lengths), .msg = ARG(buf),
		.size = 2, .replies = ARG(big), .max_reply = 64, .count = 2, .port_priority = pp,
	};
	/* node, port_priority, msg, size, reply, max_reply */
	const struct lite_case sends[] = {
		ARGS(EINVAL, id, pp, ARG(buf), 0, ARG(reply), 64),
		ARGS(EINVAL, id, pp, ARG(big), LITE_MAX_MESSAGE_SIZE + 1, ARG(reply), 64),
		ARGS(EINVAL, id, PRIO(LITE_MAX_PORTS, 0), ARG(buf), 4, ARG(reply), 64),
		ARGS(EINVAL, id, PRIO(p, 3), ARG(buf), 4, ARG(reply), 64),
		ARGS(EINVAL, LITE_MAX_NODES, pp, ARG(buf), 4, ARG(reply), 64),
		ARGS(EFAULT, id, pp, ARG(self->bad), 4, ARG(reply), 64),
		ARGS(EMSGSIZE, id, pp, ARG(big), 65, ARG(reply), 64),
		ARGS(ECONNREFUSED, id, PRIO(q, 0), ARG(buf), 4, ARG(reply), 64),
		ARGS(EHOSTUNREACH, NO_NODE, pp, ARG(buf), 4, ARG(reply), 64),
	};
	const struct lite_case calls[] = {
		ARGS(EINVAL, id, pp | LITE_SEND_NONBLOCK, ARG(buf), 4, ARG(reply), 64),
		ARGS(EFAULT, id, pp, ARG(buf), 4, 0, 64),
	};
	const struct lite_case cases[] = {
		CASE(receive_message, EINVAL, LITE_MAX_PORTS, ARG(buf), 64, ARG(&d), 0),
		CASE(receive_message, EINVAL, p, ARG(buf), 64, ARG(&d), 0x2),
		CASE(receive_message, ENOENT, q, ARG(buf), 64, ARG(&d), 0),
		/* nothing queued by the calls that failed */
		CASE(receive_message, EAGAIN, p, ARG(buf), 64, ARG(&d),
		     LITE_RECV_NONBLOCK),
		CASE(reply_message, ENOENT, ARG(buf), 4, 0),
		CASE(reply_message, ENOENT, ARG(buf), 4, 0x123456789UL),
		CASE(reply_and_receive_message, ENOENT, ARG(buf), 4, 0, ARG(&next)),
		CASE(reply_and_receive_message, EFAULT, ARG(buf), 4, 0, ARG(self->bad)),
	};

	ASSERT_EQ(0, sys_lite(register_application, p, 64UL, "errors", 6UL));
	CHECK_CALL(send, sends);
	CHECK_CALL(send_reply_imm, sends);
	CHECK_CALL(send_reply_imm_async, sends);
	CHECK_CALL(send_reply_imm, calls);
	CHECK_CALL(send_reply_imm_async, calls);
	check_multicast(_metadata, &call, big, self->bad);
	CHECK_CASES(cases);
	EXPECT_EQ(0, sys_lite(unregister_application, p));
}

/* The server of rpc_messages: the client's calls, in their order */
static int serve_calls(unsigned int port, char *bad)
{
	char buf[128] = "", buf2[128] = "";
	struct lite_receive next = {
		.buf = ARG(buf2), .max_size = sizeof(buf2), .port = port,
	};
	__u64 d;
	long n;
	int i;

	n = sys_lite(receive_message, port, buf, sizeof(buf), &d, 0);
	if (n != 4 || memcmp(buf, "ping", 4) || !d)
		return 1;
	/* Neither a reply that cannot be read nor a long one answers. */
	if (sys_lite(reply_message, bad, 4UL, d) != -EFAULT ||
	    sys_lite(reply_message, buf, 65UL, d) != -EMSGSIZE ||
	    sys_lite(reply_and_receive_message, "PING", 4UL, d, bad) != -EFAULT)
		return 2;
	n = sys_lite(reply_and_receive_message, "PING", 4UL, d, &next);
	if (n != 4 || memcmp(buf2, "pong", 4) || !next.descriptor)
		return 3;
	if (sys_lite(reply_message, "PING", 4UL, d) != -ENOENT ||
	    sys_lite(reply_message, "PONG", 4UL, next.descriptor))
		return 4;
	/* An asynchronous call, then a multicast: echoed */
	for (i = 0; i < 2; i++) {
		n = sys_lite(receive_message, port, buf, sizeof(buf), &d, 0);
		if (n <= 0 || !d || sys_lite(reply_message, buf, n, d))
			return 5 + i;
	}
	/* The last one is not answered: its caller gets ECONNRESET. */
	n = sys_lite(receive_message, port, buf, sizeof(buf), &d, 0);
	return n == 3 && d ? 0 : 7;
}

TEST_F_TIMEOUT(lite, rpc_messages, 90)
{
	const long id = self->id;
	const unsigned int p = PORT(id, 4), r = PORT(id, 5);
	const unsigned int pp = PRIO(p, 0);
	char buf[64], reply[64], replies[2][64];
	__u32 nodes[2] = { id, NO_NODE };
	__s64 lengths[2] = { 0, 0 };
	struct lite_multicast call = {
		.nodes = ARG(nodes), .lengths = ARG(lengths), .msg = ARG("mc"),
		.size = 2, .replies = ARG(replies), .max_reply = 64,
		.count = 2, .port_priority = pp,
	};
	pid_t pid;
	__u64 d;
	long op;

	ASSERT_EQ(0, sys_lite(register_application, p, 64UL, "echo", 4UL));
	/* One-way messages have descriptor 0; a long one stays queued. */
	EXPECT_EQ(0, sys_lite(send, id, pp, "0123456789", 10UL));
	EXPECT_EQ(0, sys_lite(send, id, pp | LITE_SEND_NONBLOCK, "one-way", 7UL));
	EXPECT_EQ(-EMSGSIZE, sys_lite(receive_message, p, buf, 4UL, &d, 0));
	EXPECT_EQ(10, sys_lite(receive_message, p, buf, sizeof(buf), &d, 0));
	EXPECT_EQ(0ULL, d);
	EXPECT_EQ(0, memcmp(buf, "0123456789", 10));
	EXPECT_EQ(7, sys_lite(receive_message, p, buf, sizeof(buf), &d, 0));
	EXPECT_EQ(0ULL, d);
	EXPECT_EQ(0, memcmp(buf, "one-way", 7));
	/* A descriptor that cannot be stored, on a port of its own */
	ASSERT_EQ(0, sys_lite(register_application, r, 64UL, "r", 1UL));
	EXPECT_EQ(0, sys_lite(send, id, PRIO(r, 0), "x", 1UL));
	EXPECT_EQ(-EFAULT, sys_lite(receive_message, r, buf, sizeof(buf),
				    self->bad, 0));
	EXPECT_EQ(0, sys_lite(unregister_application, r));

	/* Calls answered by another process */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(serve_calls(p, self->bad));
	EXPECT_EQ(4, sys_lite(send_reply_imm, id, pp, "ping", 4UL, reply, 64UL));
	EXPECT_EQ(0, memcmp(reply, "PING", 4));
	op = sys_lite(send_reply_imm_async, id, PRIO(p, LITE_PRIORITY_HIGH),
		      "pong", 4UL, reply, 64UL);
	EXPECT_LT(0, op);
	EXPECT_EQ(4, sys_lite(async_wait, op, 0));
	EXPECT_EQ(0, memcmp(reply, "PONG", 4));
	op = sys_lite(send_reply_imm_async, id, pp, "bad", 3UL, self->bad, 64UL);
	EXPECT_LT(0, op);
	EXPECT_EQ(-EFAULT, sys_lite(async_wait, op, 0));
	EXPECT_EQ(1, sys_lite(send_reply_multicast, &call));
	EXPECT_EQ(2, lengths[0]);
	EXPECT_EQ(0, memcmp(replies[0], "mc", 2));
	EXPECT_EQ(-EHOSTUNREACH, lengths[1]);
	EXPECT_EQ(-ECONNRESET, sys_lite(send_reply_imm, id, pp, "bye", 3UL, reply, 64UL));
	EXPECT_EQ(0, wait_child(pid));
	EXPECT_EQ(0, sys_lite(unregister_application, p));
	EXPECT_EQ(-ECONNREFUSED, sys_lite(send_reply_imm, id, pp, "late", 4UL, reply, 64UL));
}

/*
 * The server of rpc_across_nodes: answers "ID:MESSAGE" to the previous
 * node's call, asynchronous call and multicast, and to this node's
 * multicast, and takes the previous node's one-way message.
 */
static int serve_nodes(long id)
{
	int calls = 0, one_way = 0, steps = 0;
	char buf[64], reply[96];
	__u64 d;
	long n;

	while (calls + one_way < 5 && steps < 2 * 60 * 10) {
		n = sys_lite(receive_message, XPORT, buf, sizeof(buf), &d, LITE_RECV_NONBLOCK);
		if (n == -EAGAIN) {
			sleep_step();
			steps++;
		} else if (n < 0) {
			return 1;
		} else if (!d) {
			one_way++;
		} else {
			n = snprintf(reply, sizeof(reply), "%ld:%.*s", id, (int)n, buf);
			if (sys_lite(reply_message, reply, n, d))
				return 2;
			calls++;
		}
	}
	return calls == 4 && one_way == 1 ? 0 : 3;
}

/* No ASSERT between the barriers: every node must reach both. */
TEST_F_TIMEOUT(lite, rpc_across_nodes, 300)
{
	const unsigned int xp = PRIO(XPORT, LITE_PRIORITY_NONE);
	__u32 nodes[2] = { self->id, self->other };
	char reply[64] = "", replies[2][64] = { "", "" }, want[64];
	__s64 lengths[2] = { 0, 0 };
	struct lite_multicast call = {
		.nodes = ARG(nodes), .lengths = ARG(lengths), .msg = ARG("mc"),
		.size = 2, .replies = ARG(replies), .max_reply = 64,
		.count = 2, .port_priority = xp,
	};
	long n, op;
	pid_t pid;
	int i;

	EXPECT_EQ(0, sys_lite(register_application, XPORT, 64UL, "nodes", 5UL));
	pid = fork();
	if (pid == 0)
		_exit(serve_nodes(self->id));
	EXPECT_EQ(0, sys_lite(dist_barrier, self->nodes));
	EXPECT_EQ(64, sys_lite(query_port, self->other, XPORT));
	snprintf(want, sizeof(want), "%ld:hi", self->other);
	n = sys_lite(send_reply_imm, self->other, xp, "hi", 2UL, reply, 64UL);
	EXPECT_EQ((long)strlen(want), n);
	EXPECT_STREQ(want, reply);
	EXPECT_EQ(0, sys_lite(send, self->other, PRIO(XPORT, LITE_PRIORITY_LOW),
			      "one-way", 7UL));
	memset(reply, 0, sizeof(reply));
	snprintf(want, sizeof(want), "%ld:as", self->other);
	op = sys_lite(send_reply_imm_async, self->other, xp, "as", 2UL, reply, 64UL);
	EXPECT_LT(0, op);
	EXPECT_EQ((long)strlen(want), sys_lite(async_wait, op, 0));
	EXPECT_STREQ(want, reply);
	EXPECT_EQ(2, sys_lite(send_reply_multicast, &call));
	for (i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "%u:mc", nodes[i]);
		EXPECT_EQ((__s64)strlen(want), lengths[i]);
		EXPECT_EQ(0, strncmp(want, replies[i], strlen(want)));
	}
	EXPECT_EQ(0, sys_lite(dist_barrier, self->nodes));
	EXPECT_EQ(0, wait_child(pid));
	EXPECT_EQ(0, sys_lite(unregister_application, XPORT));
}

/* Last: free what is held on other nodes, then wait for every node. */
TEST_F_TIMEOUT(lite, last_barrier, 600)
{
	EXPECT_EQ(0, free_lmr(self->remote));
	EXPECT_EQ(0, free_lmr(self->local));
	self->remote = 0;
	self->local = 0;
	EXPECT_EQ(0, sys_lite(dist_barrier, self->nodes));
}

TEST_HARNESS_MAIN
