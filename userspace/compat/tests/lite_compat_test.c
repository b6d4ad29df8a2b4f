// SPDX-License-Identifier: GPL-2.0
/*
 * lite-compat-test ME NODES: every function of the compatibility library
 * (lite-lib.h), run on every node of a joined cluster at once, the way
 * programs written for the original LITE use them. Each check prints
 * "ok WHAT" or "fail WHAT: WHY"; the last line is "ok all N checks ran".
 * Nodes meet in userspace_liteapi_dist_barrier(NODES), so every node must
 * run it.
 */
#include "lite-lib.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>

#define PASSWORD	0x1e57
#define LMR_SIZE	4096
#define RPC_PORT	20
#define UNUSED_PORT	21
#define RPC_ROOM	256
#define LOCK_ROUNDS	50
#define POLL_LIMIT_S	30
#define UNMAPPED	((void *)8)

static unsigned int me, nodes, next, prev;
static int checks, failures;

static void report(int ok, const char *what, const char *why)
{
	checks++;
	/* "fail WHAT: WHY": WHAT holds no ": ". */
	if (ok) {
		printf("ok %s\n", what);
	} else {
		failures++;
		printf("fail %s: %s\n", what, why);
	}
	fflush(stdout);
}

/* Checks that ret is want. */
static void expect(const char *what, long ret, long want)
{
	char why[160];

	snprintf(why, sizeof(why), "returned %ld (errno %d: %s), expected %ld",
		 ret, errno, strerror(errno), want);
	report(ret == want, what, why);
}

/* Checks that ret is -1 with errno err (saved by the caller). */
static void expect_error(const char *what, long ret, int saved, int err)
{
	char why[160];

	snprintf(why, sizeof(why), "returned %ld with errno %d (%s), expected -1 with errno %d (%s)",
		 ret, saved, strerror(saved), err, strerror(err));
	report(ret == -1 && saved == err, what, why);
}

#define EXPECT_ERROR(what, call, err)                     \
	do {                                              \
		long ret_ = (call);                       \
		expect_error(what, ret_, errno, err);     \
	} while (0)

static void meet(const char *why)
{
	char what[128];

	snprintf(what, sizeof(what), "dist_barrier(%u) %s", nodes, why);
	expect(what, userspace_liteapi_dist_barrier(nodes), 0);
}

static uint64_t name_of(unsigned int node, unsigned int kind)
{
	return 0x636f6d7000000000ULL | ((uint64_t)kind << 16) | node;
}

/* ------------------------------------------------------------------ */

static void cluster(void)
{
	char ip[] = "10.0.0.1";
	int ret;

	expect("syscall_test() finds LITE's system calls",
	       userspace_syscall_test(), 0);
	expect("get_node_id() is this node", userspace_liteapi_get_node_id(),
	       me);
	expect("get_total_node() counts every node",
	       userspace_liteapi_get_total_node(), nodes);

	setenv("LITE_CM_ADDRESS", "10.0.0.1:notaport", 1);
	ret = userspace_liteapi_join(ip, 18500, 1);
	expect_error("join with a malformed LITE_CM_ADDRESS returns 0 with EINVAL",
		     ret - 1, errno, EINVAL);
	setenv("LITE_CM_ADDRESS", "10.0.0.1:18500", 1);
	expect("join through LITE_CM_ADDRESS of a member returns its node id",
	       userspace_liteapi_join(NULL, 0, 1), me);
	unsetenv("LITE_CM_ADDRESS");
	expect("join of a member returns its node id",
	       userspace_liteapi_join(ip, 18500, 1), me);
	ret = userspace_liteapi_join((char *)UNMAPPED, 18500, 1);
	expect_error("join with an unmapped address string returns 0 with EFAULT",
		     ret - 1, errno, EFAULT);
	ret = userspace_liteapi_join(ip, 0, 1);
	expect_error("join with manager port 0 returns 0 with EINVAL",
		     ret - 1, errno, EINVAL);

	expect("stick_this_thread_to_core(0)", stick_this_thread_to_core(0), 0);
	expect("stick_this_thread_to_core(-1) returns EINVAL",
	       stick_this_thread_to_core(-1), EINVAL);
	EXPECT_ERROR("dist_barrier(0) fails with EINVAL",
		     userspace_liteapi_dist_barrier(0), EINVAL);
}

/* ------------------------------------------------------------------ */

static void fill(char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)(seed * 31 + i * 7);
}

static void memory(void)
{
	static char out[LMR_SIZE], back[LMR_SIZE];
	static const char zeros[LMR_SIZE];
	int key, atomic_key, ret, poll;
	uint64_t old = 0;
	time_t start;
	char *mem;

	key = userspace_liteapi_alloc_remote_mem(next, LMR_SIZE, false, PASSWORD);
	report(key >= 1025, "alloc_remote_mem on the next node returns a key >= 1025",
	       "no key");
	fill(out, sizeof(out), me);
	expect("rdma_write of 4 KiB", userspace_liteapi_rdma_write(key, out, LMR_SIZE, 0, PASSWORD), 0);
	expect("rdma_read of 4 KiB", userspace_liteapi_rdma_read(key, back, LMR_SIZE, 0, PASSWORD), 0);
	report(memcmp(out, back, LMR_SIZE) == 0, "rdma_read returns what rdma_write wrote",
	       "data differs");
	fill(out, 64, me + 1);
	expect("rdma_write_high at offset 100",
	       userspace_liteapi_rdma_write_high(key, out, 64, 100, PASSWORD), 0);
	expect("rdma_read_low at offset 100",
	       userspace_liteapi_rdma_read_low(key, back, 64, 100, PASSWORD), 0);
	report(memcmp(out, back, 64) == 0, "rdma_read_low returns what rdma_write_high wrote",
	       "data differs");
	expect("rdma_write_low", userspace_liteapi_rdma_write_low(key, out, 64, 0, PASSWORD), 0);
	expect("rdma_read_high", userspace_liteapi_rdma_read_high(key, back, 64, 0, PASSWORD), 0);
	report(memcmp(out, back, 64) == 0, "rdma_read_high returns what rdma_write_low wrote",
	       "data differs");
	expect("remote_memset of the whole LMR",
	       userspace_liteapi_remote_memset(key, 0, LMR_SIZE), 0);
	userspace_liteapi_rdma_read(key, back, LMR_SIZE, 0, PASSWORD);
	report(memcmp(back, zeros, LMR_SIZE) == 0, "remote_memset zeroes the LMR", "not zero");
	userspace_liteapi_rdma_write(key, out, 64, 0, PASSWORD);
	expect("memset (declared by the original, same as remote_memset)",
	       userspace_liteapi_memset(key, 0, 64), 0);
	userspace_liteapi_rdma_read(key, back, 64, 0, PASSWORD);
	report(memcmp(back, zeros, 64) == 0, "memset zeroes the range", "not zero");

	EXPECT_ERROR("rdma_read with the wrong password fails with EACCES",
		     userspace_liteapi_rdma_read(key, back, 64, 0, PASSWORD + 1), EACCES);
	EXPECT_ERROR("rdma_read of key 7 (never handed out) fails with EBADF",
		     userspace_liteapi_rdma_read(7, back, 64, 0, PASSWORD), EBADF);
	EXPECT_ERROR("rdma_write from an unmapped buffer fails with EFAULT",
		     userspace_liteapi_rdma_write(key, UNMAPPED, 64, 0, PASSWORD), EFAULT);
	EXPECT_ERROR("rdma_read past the LMR's end fails with EINVAL",
		     userspace_liteapi_rdma_read(key, back, 64, LMR_SIZE - 32, PASSWORD), EINVAL);
	EXPECT_ERROR("remote_memset with a negative size fails with EINVAL",
		     userspace_liteapi_remote_memset(key, 0, -1), EINVAL);
	expect("alloc_remote_mem of an atomic LMR of 16 B returns MR_ASK_REFUSE",
	       userspace_liteapi_alloc_remote_mem(next, 16, true, PASSWORD), MR_ASK_REFUSE);

	/* async_rdma_read (4.9 port): *poll leaves SEND_REPLY_WAIT when done. */
	fill(out, 256, me + 2);
	userspace_liteapi_rdma_write(key, out, 256, 512, PASSWORD);
	memset(back, 0, 256);
	poll = 12345;
	ret = async_rdma_read(key, back, 256, 512, &poll);
	expect("async_rdma_read starts", ret, 0);
	start = time(NULL);
	while (__atomic_load_n(&poll, __ATOMIC_ACQUIRE) == SEND_REPLY_WAIT &&
	       time(NULL) - start < POLL_LIMIT_S)
		usleep(100);
	expect("async_rdma_read sets *poll to 0 when done", poll, 0);
	report(memcmp(out, back, 256) == 0, "async_rdma_read delivers the data",
	       "data differs");
	EXPECT_ERROR("async_rdma_read with an unmapped poll word fails with EFAULT",
		     async_rdma_read(key, back, 64, 0, (int *)UNMAPPED), EFAULT);

	atomic_key = userspace_liteapi_alloc_remote_mem(next, 8, true, PASSWORD);
	report(atomic_key >= 1025, "alloc_remote_mem of an atomic 8-byte LMR returns a key",
	       "no key");
	expect("fetch_add(5)", userspace_liteapi_fetch_add(atomic_key, &old, 5), 0);
	expect("fetch_add stores the old value (0)", (long)old, 0);
	expect("compare_swp(5 -> 9)", userspace_liteapi_compare_swp(atomic_key, &old, 5, 9), 0);
	expect("compare_swp stores the old value (5)", (long)old, 5);
	expect("compare_swp(5 -> 1) when the value is 9",
	       userspace_liteapi_compare_swp(atomic_key, &old, 5, 1), 0);
	expect("a failed compare_swp stores the value it found (9)", (long)old, 9);
	expect("compare_swp without the ATOMIC permission returns MR_ASK_UNPERMITTED",
	       userspace_liteapi_compare_swp(userspace_liteapi_alloc_remote_mem(next, 8, false,
										 PASSWORD),
					     &old, 0, 1),
	       MR_ASK_UNPERMITTED);
	EXPECT_ERROR("fetch_add into an unmapped old-value buffer fails with EFAULT",
		     userspace_liteapi_fetch_add(atomic_key, UNMAPPED, 1), EFAULT);

	mem = userspace_liteapi_alloc_memory(8192);
	report(mem != NULL, "alloc_memory(8 KiB) returns memory", "NULL");
	if (mem) {
		memset(mem, 0x5a, 8192);
		expect("rdma_write from alloc_memory's memory",
		       userspace_liteapi_rdma_write(key, mem, LMR_SIZE, 0, PASSWORD), 0);
	}
	report(userspace_liteapi_alloc_memory(0) == NULL, "alloc_memory(0) returns NULL",
	       "not NULL");
}

/* ------------------------------------------------------------------ */

static void sharing(void)
{
	char data[64], back[64];
	int wrapped, allocated, key;

	fill(data, sizeof(data), me + 3);
	wrapped = userspace_liteapi_wrap_alloc(data, sizeof(data), name_of(me, 1), PASSWORD);
	report(wrapped >= 1025, "wrap_alloc publishes a copy and returns a key", "no key");
	EXPECT_ERROR("wrap_alloc of a name already published fails with EEXIST",
		     userspace_liteapi_wrap_alloc(data, sizeof(data), name_of(me, 1), PASSWORD),
		     EEXIST);
	EXPECT_ERROR("wrap_alloc from an unmapped buffer fails with EFAULT",
		     userspace_liteapi_wrap_alloc(UNMAPPED, 64, name_of(me, 9), PASSWORD), EFAULT);
	allocated = userspace_liteapi_alloc_remote_mem(me, 64, false, PASSWORD);
	userspace_liteapi_rdma_write(allocated, data, sizeof(data), 0, PASSWORD);
	expect("add_ask_mr_table publishes an LMR READ only (ADMIN asked, left out)",
	       userspace_liteapi_add_ask_mr_table(name_of(me, 2), allocated,
						  MR_READ_FLAG | MR_ADMIN_FLAG, PASSWORD),
	       0);
	EXPECT_ERROR("add_ask_mr_table of key 7 fails with EBADF",
		     userspace_liteapi_add_ask_mr_table(name_of(me, 3), 7, MR_READ_FLAG, PASSWORD),
		     EBADF);
	meet("after publishing");

	key = userspace_liteapi_ask_lmr(next, name_of(next, 1), MR_READ_FLAG | MR_WRITE_FLAG,
					PASSWORD);
	report(key >= 1025, "ask_lmr maps the next node's wrapped LMR", "no key");
	memset(back, 0, sizeof(back));
	fill(data, sizeof(data), next + 3);
	expect("rdma_read of the mapping", userspace_liteapi_rdma_read(key, back, 64, 0, PASSWORD), 0);
	report(memcmp(data, back, 64) == 0, "the mapping holds what wrap_alloc copied",
	       "data differs");
	key = userspace_liteapi_ask_lmr(next, name_of(next, 2), MR_READ_FLAG, PASSWORD);
	report(key >= 1025, "ask_lmr of an add_ask_mr_table name", "no key");
	expect("ask_lmr with the wrong password returns MR_ASK_REFUSE",
	       userspace_liteapi_ask_lmr(next, name_of(next, 2), MR_READ_FLAG, PASSWORD + 1),
	       MR_ASK_REFUSE);
	expect("ask_lmr for WRITE of a READ-only name returns MR_ASK_UNPERMITTED",
	       userspace_liteapi_ask_lmr(next, name_of(next, 2), MR_WRITE_FLAG, PASSWORD),
	       MR_ASK_UNPERMITTED);
	expect("ask_lmr of an unknown name returns MR_ASK_UNKNOWN",
	       userspace_liteapi_ask_lmr(next, name_of(next, 8), MR_READ_FLAG, PASSWORD),
	       MR_ASK_UNKNOWN);
	meet("after mapping");
}

/* ------------------------------------------------------------------ */

/* Node 1 keeps a lock and a counter; every node adds LOCK_ROUNDS to the
 * counter under the lock, reading and writing it (not atomically). */
static void locks(void)
{
	remote_spinlock_t lock, own;
	uint64_t number = 0, counter;
	int key, number_key = -1, counter_key = -1, i, ok = 1;
	char why[96] = "";

	memset(&lock, 0, sizeof(lock));
	if (me == 1) {
		int n = userspace_liteapi_create_lock(1, &lock);

		report(n >= 0 && lock.lock_num == n && lock.lock_mr.node_id == 1,
		       "create_lock(1) returns the number it stores in the lock", "no");
		number = (uint64_t)n;
		number_key = userspace_liteapi_wrap_alloc(&number, sizeof(number),
							  name_of(0, 4), PASSWORD);
		counter = 0;
		counter_key = userspace_liteapi_wrap_alloc(&counter, sizeof(counter),
							   name_of(0, 5), PASSWORD);
	}
	meet("after node 1 created the lock");
	key = userspace_liteapi_ask_lmr(1, name_of(0, 4), MR_READ_FLAG, PASSWORD);
	userspace_liteapi_rdma_read(key, &number, sizeof(number), 0, PASSWORD);
	counter_key = userspace_liteapi_ask_lmr(1, name_of(0, 5), MR_READ_FLAG | MR_WRITE_FLAG,
						PASSWORD);
	expect("ask_lock(1, its number) returns the number",
	       userspace_liteapi_ask_lock(1, (int)number, &lock), (long)number);
	for (i = 0; i < LOCK_ROUNDS && ok; i++) {
		if (userspace_liteapi_lock(&lock) != 0 || lock.ticket_num != 1) {
			snprintf(why, sizeof(why), "lock in round %d: errno %d", i, errno);
			ok = 0;
			break;
		}
		ok = userspace_liteapi_rdma_read(counter_key, &counter, 8, 0, PASSWORD) == 0;
		counter++;
		ok = ok && userspace_liteapi_rdma_write(counter_key, &counter, 8, 0, PASSWORD) == 0;
		if (userspace_liteapi_unlock(&lock) != 0 || lock.ticket_num != 0) {
			snprintf(why, sizeof(why), "unlock in round %d: errno %d", i, errno);
			ok = 0;
		}
	}
	report(ok, "lock/unlock around a read-modify-write, every round", why);
	EXPECT_ERROR("unlock of a lock the thread does not hold fails with EPERM",
		     userspace_liteapi_unlock(&lock), EPERM);
	EXPECT_ERROR("lock of an unmapped lock form fails with EFAULT",
		     userspace_liteapi_lock((remote_spinlock_t *)UNMAPPED), EFAULT);
	EXPECT_ERROR("create_lock into an unmapped lock form fails with EFAULT",
		     userspace_liteapi_create_lock(next, (remote_spinlock_t *)UNMAPPED), EFAULT);
	EXPECT_ERROR("ask_lock of number 4103 fails with ENOENT",
		     userspace_liteapi_ask_lock(next, 4103, &own), ENOENT);
	meet("after the lock rounds");
	userspace_liteapi_rdma_read(counter_key, &counter, 8, 0, PASSWORD);
	expect("the counter under the lock counts every round of every node",
	       (long)counter, (long)LOCK_ROUNDS * nodes);
	meet("after reading the counter");
	(void)number_key;
}

/* ------------------------------------------------------------------ */

static void upcase(const char *in, int len, char *out)
{
	int i;

	for (i = 0; i < len; i++)
		out[i] = (char)toupper((unsigned char)in[i]);
}

struct served {
	int ok;
	char why[160];
};

/* Checks one received message: length and text. */
static int got(struct served *s, const char *step, int len, const char *buf,
	       const char *want)
{
	if (len != (int)strlen(want) || memcmp(buf, want, strlen(want)) != 0) {
		snprintf(s->why, sizeof(s->why), "%s: got %d (errno %d) \"%.*s\", expected \"%s\"",
			 step, len, errno, len > 0 ? len : 0, buf, want);
		s->ok = 0;
	}
	return s->ok;
}

static void *serve(void *arg)
{
	struct served *s = arg;
	char buf[RPC_ROOM], reply[RPC_ROOM], want[32];
	uintptr_t d = 0, d2 = 0;
	int len, ret_length = 0;

	s->ok = 1;
#define WANT(letter) (snprintf(want, sizeof(want), "%c from %u", letter, prev), want)
	len = userspace_liteapi_receive_message(RPC_PORT, buf, RPC_ROOM, &d, BLOCK_CALL);
	if (got(s, "receive_message", len, buf, WANT('a'))) {
		upcase(buf, len, reply);
		if (userspace_liteapi_reply_message(reply, len, d) != 0)
			snprintf(s->why, sizeof(s->why), "reply_message: errno %d", errno), s->ok = 0;
	}
	len = userspace_liteapi_receive_message_high(RPC_PORT, buf, RPC_ROOM, &d, BLOCK_CALL);
	if (s->ok && got(s, "receive_message_high", len, buf, WANT('b'))) {
		upcase(buf, len, reply);
		if (userspace_liteapi_reply_message_high(reply, len, d) != 0)
			snprintf(s->why, sizeof(s->why), "reply_message_high: errno %d", errno), s->ok = 0;
	}
	len = userspace_liteapi_receive_message_low(RPC_PORT, buf, RPC_ROOM, &d, BLOCK_CALL);
	if (s->ok && got(s, "receive_message_low", len, buf, WANT('c'))) {
		upcase(buf, len, reply);
		if (userspace_liteapi_reply_message_low(reply, len, d) != 0)
			snprintf(s->why, sizeof(s->why), "reply_message_low: errno %d", errno), s->ok = 0;
	}
	len = userspace_liteapi_receive_message_fast(RPC_PORT, buf, RPC_ROOM, &d, &ret_length,
						     BLOCK_CALL);
	if (s->ok && got(s, "receive_message_fast", len, buf, WANT('d'))) {
		if (ret_length != len) {
			snprintf(s->why, sizeof(s->why), "receive_message_fast: *ret_length %d", ret_length);
			s->ok = 0;
		}
		upcase(buf, len, reply);
		/* Replies to "d" and takes "e". */
		if (s->ok && userspace_liteapi_reply_and_receive_message(reply, len, d, RPC_PORT,
									 buf, RPC_ROOM, &d2) != 0) {
			snprintf(s->why, sizeof(s->why), "reply_and_receive_message: errno %d", errno);
			s->ok = 0;
		}
	}
	if (s->ok && got(s, "reply_and_receive_message", (int)strlen(WANT('e')), buf, WANT('e'))) {
		upcase(buf, (int)strlen(want), reply);
		if (userspace_liteapi_reply_message(reply, (int)strlen(want), d2) != 0)
			snprintf(s->why, sizeof(s->why), "reply_message to e: errno %d", errno), s->ok = 0;
	}
	d = 77;
	len = (int)userspace_liteapi_receive_message_fast_record(RPC_PORT, buf, RPC_ROOM, &d,
								 &ret_length, BLOCK_CALL);
	if (s->ok && got(s, "receive_message_fast_record", len, buf, WANT('f')) && d != 0) {
		snprintf(s->why, sizeof(s->why), "one-way message f: fast descriptor %#lx, expected 0",
			 (unsigned long)d);
		s->ok = 0;
	}
	len = userspace_liteapi_receive_message(RPC_PORT, buf, RPC_ROOM, &d, BLOCK_CALL);
	if (s->ok && got(s, "receive_message of a one-way message", len, buf, WANT('g')) &&
	    d != (uintptr_t)IMM_SEND_ONLY_FLAG) {
		snprintf(s->why, sizeof(s->why), "one-way message g: descriptor %#lx, expected IMM_SEND_ONLY_FLAG",
			 (unsigned long)d);
		s->ok = 0;
	}
	if (s->ok && (userspace_liteapi_reply_message(reply, 1, d) != -1 || errno != ENOENT)) {
		snprintf(s->why, sizeof(s->why), "reply_message to a one-way message: errno %d", errno);
		s->ok = 0;
	}
#undef WANT
	return NULL;
}

/* Calls the next node's server and checks the upcased reply. */
static void check_reply(const char *what, int len, const char *reply, char letter)
{
	char want[32], up[32] = { 0 }, why[128];

	snprintf(want, sizeof(want), "%c from %u", letter, me);
	upcase(want, (int)strlen(want), up);
	snprintf(why, sizeof(why), "returned %d (errno %d), reply \"%.*s\"", len, errno,
		 len > 0 && len < 64 ? len : 0, reply);
	report(len == (int)strlen(up) && memcmp(reply, up, strlen(up)) == 0, what, why);
}

static void rpc(void)
{
	char name[] = "compat-test";
	char msg[32], reply[RPC_ROOM];
	struct served served = { 0, "" };
	pthread_t server;
	uintptr_t d = 0;
	int len, ret_length = 0;

	expect("register_application returns the port",
	       userspace_liteapi_register_application(RPC_PORT, RPC_ROOM, 16, name, strlen(name)),
	       RPC_PORT);
	EXPECT_ERROR("register_application of a registered port fails with EADDRINUSE",
		     userspace_liteapi_register_application(RPC_PORT, RPC_ROOM, 16, name,
							    strlen(name)),
		     EADDRINUSE);
	EXPECT_ERROR("register_application of port 64 fails with EINVAL",
		     userspace_liteapi_register_application(64, RPC_ROOM, 16, name, strlen(name)),
		     EINVAL);
	expect("receive_message without BLOCK_CALL on an empty port returns 0",
	       userspace_liteapi_receive_message(RPC_PORT, reply, RPC_ROOM, &d, 0), 0);
	EXPECT_ERROR("receive_message_fast with an unmapped ret_length fails with EFAULT",
		     userspace_liteapi_receive_message_fast(RPC_PORT, reply, RPC_ROOM, &d,
							    (int *)UNMAPPED, 0),
		     EFAULT);
	EXPECT_ERROR("receive_message with an unmapped descriptor fails with EFAULT",
		     userspace_liteapi_receive_message(RPC_PORT, reply, RPC_ROOM,
						       (uintptr_t *)UNMAPPED, 0),
		     EFAULT);
	EXPECT_ERROR("reply_message to an unknown descriptor fails with ENOENT",
		     userspace_liteapi_reply_message(reply, 4, 0x7777), ENOENT);
	EXPECT_ERROR("reply_and_receive_message with an unmapped next descriptor fails with EFAULT",
		     userspace_liteapi_reply_and_receive_message(reply, 4, 0x7777, RPC_PORT, reply,
								 RPC_ROOM, (uintptr_t *)UNMAPPED),
		     EFAULT);
	if (pthread_create(&server, NULL, serve, &served) != 0) {
		report(0, "starting the server thread", strerror(errno));
		return;
	}
	meet("after registering the RPC port");

	expect("query_port of the next node's port returns 0",
	       userspace_liteapi_query_port(next, RPC_PORT), 0);
	EXPECT_ERROR("query_port of an unregistered port fails with ECONNREFUSED",
		     userspace_liteapi_query_port(next, UNUSED_PORT), ECONNREFUSED);
	EXPECT_ERROR("send_reply_imm of -1 bytes fails with EINVAL",
		     userspace_liteapi_send_reply_imm(next, RPC_PORT, msg, -1, reply, RPC_ROOM),
		     EINVAL);
	EXPECT_ERROR("send_reply_imm of LIMITATION bytes fails with EINVAL",
		     userspace_liteapi_send_reply_imm(next, RPC_PORT, msg, LIMITATION, reply,
						      RPC_ROOM),
		     EINVAL);
	EXPECT_ERROR("send_reply_imm_fast with an unmapped ret_length fails with EFAULT",
		     userspace_liteapi_send_reply_imm_fast(next, RPC_PORT, msg, 4, reply,
							   (int *)UNMAPPED, RPC_ROOM),
		     EFAULT);
	EXPECT_ERROR("send of an unmapped message fails with EFAULT",
		     userspace_liteapi_send(next, RPC_PORT, UNMAPPED, 4), EFAULT);

	snprintf(msg, sizeof(msg), "a from %u", me);
	len = userspace_liteapi_send_reply_imm(next, RPC_PORT, msg, strlen(msg), reply, RPC_ROOM);
	check_reply("send_reply_imm gets the reply", len, reply, 'a');
	snprintf(msg, sizeof(msg), "b from %u", me);
	len = userspace_liteapi_send_reply_imm_high(next, RPC_PORT, msg, strlen(msg), reply,
						    RPC_ROOM);
	check_reply("send_reply_imm_high gets the reply", len, reply, 'b');
	snprintf(msg, sizeof(msg), "c from %u", me);
	len = userspace_liteapi_send_reply_imm_low(next, RPC_PORT, msg, strlen(msg), reply,
						   RPC_ROOM);
	check_reply("send_reply_imm_low gets the reply", len, reply, 'c');
	snprintf(msg, sizeof(msg), "d from %u", me);
	len = userspace_liteapi_send_reply_imm_fast(next, RPC_PORT, msg, strlen(msg), reply,
						    &ret_length, RPC_ROOM);
	check_reply("send_reply_imm_fast gets the reply", len, reply, 'd');
	expect("send_reply_imm_fast stores the reply's length in *ret_length", ret_length,
	       (long)strlen(msg));
	snprintf(msg, sizeof(msg), "e from %u", me);
	len = userspace_liteapi_send_reply_imm(next, RPC_PORT, msg, strlen(msg), reply, RPC_ROOM);
	check_reply("send_reply_imm answered through reply_and_receive_message", len, reply, 'e');
	snprintf(msg, sizeof(msg), "f from %u", me);
	expect("send (one way)", userspace_liteapi_send(next, RPC_PORT, msg, strlen(msg)), 0);
	snprintf(msg, sizeof(msg), "g from %u", me);
	expect("send (one way) again", userspace_liteapi_send(next, RPC_PORT, msg, strlen(msg)), 0);

	pthread_join(server, NULL);
	report(served.ok, "the server received every message in order with the original's descriptors and replied",
	       served.why);
	meet("after the RPCs");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s ME NODES\n", argv[0]);
		return 2;
	}
	me = (unsigned int)strtoul(argv[1], NULL, 10);
	nodes = (unsigned int)strtoul(argv[2], NULL, 10);
	if (me == 0 || nodes == 0 || me > nodes) {
		fprintf(stderr, "%s: bad ME or NODES\n", argv[0]);
		return 2;
	}
	next = me % nodes + 1;
	prev = me == 1 ? nodes : me - 1;

	cluster();
	meet("at the start");
	memory();
	sharing();
	locks();
	rpc();
	printf("ok all %d checks ran\n", checks + 1);
	return failures ? 1 : 0;
}
