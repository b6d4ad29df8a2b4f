// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suites for LITE. Most test bodies are Rust (kunit_tests.rs and
 * kunit_tests/, part of the LITE crate) so they can reach LITE's internal
 * modules; they report each failed check through lite_kunit_fail(). The
 * kernel messaging case is C, as the modules using it are.
 */

#include <linux/ctype.h>
#include <linux/delay.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "lite_kunit.h"

void lite_kunit_fail(struct kunit *test, const char *what)
{
	KUNIT_FAIL(test, "%s", what);
}

/* Data layouts, tables, the RPC ring, locks, membership, barriers, QoS, quotas */
LITE_RUST_CASE(chunk_count_and_len)
LITE_RUST_CASE(range_checks_reject_overflow)
LITE_RUST_CASE(pieces_split_at_chunk_edges)
LITE_RUST_CASE(spread_round_robin)
LITE_RUST_CASE(chunk_descriptors)
LITE_RUST_CASE(geometry)
LITE_RUST_CASE(copy_pieces)
LITE_RUST_CASE(stats_layout)
LITE_RUST_CASE(handle_round_trip)
LITE_RUST_CASE(handle_rejects_forged)
LITE_RUST_CASE(slot_table_reuse_and_stale_ids)
LITE_RUST_CASE(permissions)
LITE_RUST_CASE(name_table)
LITE_RUST_CASE(ring_fifo)
LITE_RUST_CASE(ipv4_parsing)
LITE_RUST_CASE(gid_choice)
LITE_RUST_CASE(device_param)
LITE_RUST_CASE(rpc_immediates)
LITE_RUST_CASE(rpc_header)
LITE_RUST_CASE(rpc_ring_space)
LITE_RUST_CASE(rpc_ring_acks_on_demand)
LITE_RUST_CASE(rpc_ring_interleaving)
LITE_RUST_CASE(barrier_counting)
LITE_RUST_CASE(barrier_interrupted_by_departure)
LITE_RUST_CASE(barrier_waits_a_bounded_time_for_members)
LITE_RUST_CASE(barrier_reuse)
LITE_RUST_CASE(mapping_moves)
LITE_RUST_CASE(membership_epochs_and_incarnations)
LITE_RUST_CASE(membership_suspects_and_self)
LITE_RUST_CASE(lock_kept_by_home)
LITE_RUST_CASE(lock_hand_over)
LITE_RUST_CASE(lock_freed_by_uncertain_swap)
LITE_RUST_CASE(lock_owner_died)
LITE_RUST_CASE(qos_decisions)
LITE_RUST_CASE(op_latency_buckets)
LITE_RUST_CASE(quota_commands)
LITE_RUST_CASE(quota_charges)

static struct kunit_case lite_internal_cases[] = {
	KUNIT_CASE(chunk_count_and_len),
	KUNIT_CASE(range_checks_reject_overflow),
	KUNIT_CASE(pieces_split_at_chunk_edges),
	KUNIT_CASE(spread_round_robin),
	KUNIT_CASE(chunk_descriptors),
	KUNIT_CASE(geometry),
	KUNIT_CASE(copy_pieces),
	KUNIT_CASE(stats_layout),
	KUNIT_CASE(handle_round_trip),
	KUNIT_CASE(handle_rejects_forged),
	KUNIT_CASE(slot_table_reuse_and_stale_ids),
	KUNIT_CASE(permissions),
	KUNIT_CASE(name_table),
	KUNIT_CASE(ring_fifo),
	KUNIT_CASE(ipv4_parsing),
	KUNIT_CASE(gid_choice),
	KUNIT_CASE(device_param),
	KUNIT_CASE(rpc_immediates),
	KUNIT_CASE(rpc_header),
	KUNIT_CASE(rpc_ring_space),
	KUNIT_CASE(rpc_ring_acks_on_demand),
	KUNIT_CASE(rpc_ring_interleaving),
	KUNIT_CASE(barrier_counting),
	KUNIT_CASE(barrier_interrupted_by_departure),
	KUNIT_CASE(barrier_waits_a_bounded_time_for_members),
	KUNIT_CASE(barrier_reuse),
	KUNIT_CASE(mapping_moves),
	KUNIT_CASE(membership_epochs_and_incarnations),
	KUNIT_CASE(membership_suspects_and_self),
	KUNIT_CASE(lock_kept_by_home),
	KUNIT_CASE(lock_hand_over),
	KUNIT_CASE(lock_freed_by_uncertain_swap),
	KUNIT_CASE(lock_owner_died),
	KUNIT_CASE(qos_decisions),
	KUNIT_CASE(op_latency_buckets),
	KUNIT_CASE(quota_commands),
	KUNIT_CASE(quota_charges),
	{}
};

static struct kunit_suite lite_internal_suite = {
	.name = "lite_internal",
	.test_cases = lite_internal_cases,
};

kunit_test_suites(&lite_internal_suite);

MODULE_LICENSE("GPL");

/* The wire formats, the kernel API, and a joined cluster */
LITE_RUST_CASE(control_wire_round_trip)
LITE_RUST_CASE(cm_wire_round_trip)
LITE_RUST_CASE(cm_wire_rejects_bad_frames)
LITE_RUST_CASE(manager_authentication)
LITE_RUST_CASE(kernel_message_pieces)
LITE_RUST_CASE(api_before_join)
LITE_RUST_CASE(memory_api_before_join)
LITE_RUST_CASE(sync_api_before_join)
LITE_RUST_CASE(remote_key_tables)
LITE_RUST_CLUSTER_CASE(kernel_remote_memory)
LITE_RUST_CLUSTER_CASE(kernel_async)
LITE_RUST_CLUSTER_CASE(kernel_registration)
LITE_RUST_CLUSTER_CASE(kernel_sync)
LITE_RUST_CLUSTER_CASE(kernel_rpc_async)

/*
 * Kernel messages through handlers, written in C as a ported module would
 * be: every node sends to the next one (wrapping around) while serving the
 * previous one, so each node's handlers run while it sends.
 */

/* One-way messages each node sends of each kind (plain, priority, UD). */
#define KMSG_ONE_WAY	32

/* How long the one-way messages may take to be handled. */
#define KMSG_WAIT_MS	20000

/* A request or one-way message: who sent it and its number. */
struct kmsg {
	int from;
	u32 seq;
	char text[24];
};

/* The pieces of an atomic message: KMSG_HEAD, an empty piece and @m. */
#define KMSG_HEAD "head"
#define KMSG_PIECES(head, m) { { head, 4 }, { NULL, 0 }, { &(m), sizeof(m) } }

static atomic_t kmsg_handled;
static atomic_t kmsg_wrong;
static atomic_t kmsg_replied;
static struct kmsg kmsg_opt_reply;
static s64 kmsg_later_descriptor;
static struct kmsg kmsg_later_reply;

static void kmsg_answer_later(struct work_struct *work)
{
	if (liteapi_reply_message(&kmsg_later_reply, sizeof(kmsg_later_reply),
				  kmsg_later_descriptor))
		atomic_inc(&kmsg_wrong);
}

static DECLARE_DELAYED_WORK(kmsg_later_work, kmsg_answer_later);

static bool kmsg_valid(const char *msg, u32 size, int sender_id)
{
	const struct kmsg *m = (const struct kmsg *)msg;

	return size == sizeof(*m) && m->from == sender_id;
}

static int kmsg_on_send(char *msg, u32 size, int sender_id)
{
	if (!kmsg_valid(msg, size, sender_id))
		atomic_inc(&kmsg_wrong);
	atomic_inc(&kmsg_handled);
	return 0;
}

/* Answers with the request, its text upper-cased; "fail" fails with EPERM. */
static int kmsg_on_send_reply(char *msg, u32 size, char *reply,
			      u32 *reply_size, int sender_id)
{
	struct kmsg *m = (struct kmsg *)msg;
	int i;

	/* Handlers run in process context and may sleep. */
	usleep_range(1000, 2000);
	if (!kmsg_valid(msg, size, sender_id))
		return -EINVAL;
	if (!strcmp(m->text, "fail"))
		return -EPERM;
	for (i = 0; m->text[i]; i++)
		m->text[i] = toupper(m->text[i]);
	memcpy(reply, m, sizeof(*m));
	*reply_size = sizeof(*m);
	atomic_inc(&kmsg_replied);
	return 0;
}

static bool kmsg_valid_pieces(struct atomic_struct *list, u32 length,
			      int sender_id)
{
	return length == 3 && list[0].len == 4 && !memcmp(list[0].vaddr, KMSG_HEAD, 4) &&
	       list[1].len == 0 && kmsg_valid(list[2].vaddr, list[2].len, sender_id);
}

/* Answers with the pieces, concatenated. */
static int kmsg_on_atomic_send(struct atomic_struct *list, u32 length,
			       char *output, u32 *output_size, int sender_id)
{
	u32 i;

	if (!kmsg_valid_pieces(list, length, sender_id))
		return -EINVAL;
	for (i = 0; i < length; i++) {
		memcpy(output + *output_size, list[i].vaddr, list[i].len);
		*output_size += list[i].len;
	}
	return 0;
}

static int kmsg_on_atomic_single_send(struct atomic_struct *list, u32 length,
				      int sender_id)
{
	if (!kmsg_valid_pieces(list, length, sender_id))
		atomic_inc(&kmsg_wrong);
	atomic_inc(&kmsg_handled);
	return 0;
}

/* Answers from its own buffer, or "later" from a work item. */
static int kmsg_on_send_reply_opt(char *msg, u32 size, void **reply,
				  u32 *reply_size, int sender_id)
{
	struct kmsg *m = (struct kmsg *)msg;

	if (!kmsg_valid(msg, size, sender_id))
		return -EINVAL;
	if (!strcmp(m->text, "later")) {
		kmsg_later_reply = *m;
		kmsg_later_reply.seq = m->seq + 1;
		kmsg_later_descriptor = liteapi_defer_reply();
		if (kmsg_later_descriptor < 0)
			return kmsg_later_descriptor;
		/* Taken already: a second deferral fails. */
		if (liteapi_defer_reply() != -EINVAL)
			atomic_inc(&kmsg_wrong);
		schedule_delayed_work(&kmsg_later_work, msecs_to_jiffies(20));
		return LITE_KMSG_REPLY_LATER;
	}
	kmsg_opt_reply = *m;
	kmsg_opt_reply.seq = m->seq * 2;
	*reply = &kmsg_opt_reply;
	*reply_size = sizeof(kmsg_opt_reply);
	return 0;
}

static struct kmsg kmsg_make(u32 seq, const char *text)
{
	struct kmsg m = { .from = liteapi_get_node_id(), .seq = seq };

	strscpy(m.text, text, sizeof(m.text));
	return m;
}

static void kmsg_call_handlers(struct kunit *test, int next)
{
	struct kmsg m = kmsg_make(7, "hello"), reply;
	char head[] = KMSG_HEAD;
	struct atomic_struct pieces[] = KMSG_PIECES(head, m);
	char *ack = kunit_kzalloc(test, LITE_KMSG_MAX_REPLY, GFP_KERNEL);
	void *out = NULL;

	KUNIT_ASSERT_NOT_NULL(test, ack);
	KUNIT_EXPECT_EQ(test, liteapi_send_reply(next, &m, sizeof(m), ack),
			(int)sizeof(m));
	memcpy(&reply, ack, sizeof(reply));
	KUNIT_EXPECT_STREQ(test, reply.text, "HELLO");
	KUNIT_EXPECT_EQ(test, reply.from, m.from);
	m = kmsg_make(8, "datagram");
	KUNIT_EXPECT_EQ(test, liteapi_send_reply_UD(next, &m, sizeof(m), ack),
			(int)sizeof(m));
	KUNIT_EXPECT_STREQ(test, ((struct kmsg *)ack)->text, "DATAGRAM");
	m = kmsg_make(9, "fail");
	KUNIT_EXPECT_EQ(test, liteapi_send_reply(next, &m, sizeof(m), ack), -EPERM);
	m = kmsg_make(40, "atomic");
	KUNIT_EXPECT_EQ(test, liteapi_atomic_send(next, pieces, 3, ack),
			(int)(4 + sizeof(m)));
	KUNIT_EXPECT_MEMEQ(test, ack, KMSG_HEAD, 4);
	KUNIT_EXPECT_MEMEQ(test, ack + 4, &m, sizeof(m));

	m = kmsg_make(21, "opt");
	KUNIT_EXPECT_EQ(test, liteapi_send_reply_opt(next, &m, sizeof(m), &out,
						     LITE_PRIORITY_HIGH),
			(int)sizeof(m));
	KUNIT_ASSERT_NOT_NULL(test, out);
	KUNIT_EXPECT_EQ(test, ((struct kmsg *)out)->seq, 42u);
	liteapi_free_recv_buf(out);
	out = NULL;
	m = kmsg_make(30, "later");
	KUNIT_EXPECT_EQ(test, liteapi_send_reply_opt(next, &m, sizeof(m), &out, 0),
			(int)sizeof(m));
	KUNIT_ASSERT_NOT_NULL(test, out);
	KUNIT_EXPECT_EQ(test, ((struct kmsg *)out)->seq, 31u);
	liteapi_free_recv_buf(out);
}

static void kmsg_bad_arguments(struct kunit *test, int next)
{
	struct kmsg m = kmsg_make(0, "bad");
	char head[] = KMSG_HEAD;
	struct atomic_struct pieces[] = KMSG_PIECES(head, m);
	char *ack = kunit_kzalloc(test, LITE_KMSG_MAX_REPLY, GFP_KERNEL);

	KUNIT_EXPECT_EQ(test, liteapi_send_message(next, NULL, 8), -EFAULT);
	KUNIT_EXPECT_EQ(test, liteapi_send_message(next, &m, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_message(next, &m, -1), -EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_message(-1, &m, sizeof(m)), -EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_message(LITE_MAX_NODES + 1, &m, sizeof(m)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_message(0, &m, sizeof(m)), -EHOSTUNREACH);
	KUNIT_EXPECT_EQ(test, liteapi_send_message_priority(next, &m, sizeof(m), 9),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_message_UD(next, &m, sizeof(m), 1),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_send_reply(next, &m, sizeof(m), NULL), -EFAULT);
	KUNIT_EXPECT_EQ(test, liteapi_send_reply_opt(next, &m, sizeof(m), NULL, 0),
			-EFAULT);
	KUNIT_EXPECT_EQ(test, liteapi_defer_reply(), -EINVAL);
	KUNIT_ASSERT_NOT_NULL(test, ack);
	KUNIT_EXPECT_EQ(test, liteapi_atomic_send(next, NULL, 1, ack), -EFAULT);
	KUNIT_EXPECT_EQ(test, liteapi_atomic_send(next, pieces, 0, ack), -EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_atomic_send(next, pieces, -1, ack), -EINVAL);
	KUNIT_EXPECT_EQ(test, liteapi_atomic_send(next, pieces, 3, NULL), -EFAULT);
	KUNIT_EXPECT_EQ(test, liteapi_atomic_single_send(next, pieces, 70000),
			-EINVAL);
	pieces[0].vaddr = NULL;
	KUNIT_EXPECT_EQ(test, liteapi_atomic_single_send(next, pieces, 3), -EFAULT);
}

/* Unregistering while calls arrive: see kmsg_unregister_during_traffic(). */
static int kmsg_unregistered;
static int kmsg_replied_at_unregister;

static void kmsg_unregister(struct work_struct *work)
{
	kmsg_unregistered = liteapi_reg_send_reply_handler(NULL);
	kmsg_replied_at_unregister = atomic_read(&kmsg_replied);
}

static DECLARE_DELAYED_WORK(kmsg_unregister_work, kmsg_unregister);

/* How long the calls may go on before the next node's handler is gone. */
#define KMSG_TRAFFIC_MS	20000

/*
 * Each node calls the next one's send-reply handler without pause while a
 * work item unregisters its own: every call is answered until the calls
 * are refused, none fails otherwise, and no handler runs once unregistering
 * has returned.
 */
static void kmsg_unregister_during_traffic(struct kunit *test, int next,
					   int total)
{
	char *ack = kunit_kzalloc(test, LITE_KMSG_MAX_REPLY, GFP_KERNEL);
	unsigned long deadline = jiffies + msecs_to_jiffies(KMSG_TRAFFIC_MS);
	int answered = 0, ret;
	struct kmsg m;

	KUNIT_ASSERT_NOT_NULL(test, ack);
	kmsg_unregistered = 1;
	schedule_delayed_work(&kmsg_unregister_work, msecs_to_jiffies(50));
	do {
		m = kmsg_make(answered, "traffic");
		ret = liteapi_send_reply(next, &m, sizeof(m), ack);
		if (ret == sizeof(m))
			answered++;
	} while (ret == sizeof(m) && time_before(jiffies, deadline));
	KUNIT_EXPECT_EQ(test, ret, -ECONNREFUSED);
	KUNIT_EXPECT_GT(test, answered, 0);
	flush_delayed_work(&kmsg_unregister_work);
	KUNIT_EXPECT_EQ(test, kmsg_unregistered, 0);
	/* Every node is done calling. */
	KUNIT_ASSERT_EQ(test, liteapi_dist_barrier(total), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&kmsg_replied),
			kmsg_replied_at_unregister);
}

static void kernel_messages(struct kunit *test)
{
	int me = liteapi_get_node_id(), total = liteapi_get_total_node();
	int next = me % total + 1, i, waited;
	struct kmsg m;
	void *out = NULL;

	if (total < 2)
		kunit_skip(test, "needs a joined cluster of 2+ nodes");
	atomic_set(&kmsg_handled, 0);
	atomic_set(&kmsg_wrong, 0);
	atomic_set(&kmsg_replied, 0);
	KUNIT_EXPECT_EQ(test, liteapi_reg_send_handler(NULL), -ENOENT);
	KUNIT_ASSERT_EQ(test, liteapi_reg_send_handler(kmsg_on_send), 0);
	/* Registering again replaces the handler. */
	KUNIT_ASSERT_EQ(test, liteapi_reg_send_handler(kmsg_on_send), 0);
	KUNIT_ASSERT_EQ(test, liteapi_reg_send_reply_handler(kmsg_on_send_reply), 0);
	KUNIT_ASSERT_EQ(test,
			liteapi_reg_send_reply_opt_handler(kmsg_on_send_reply_opt), 0);
	KUNIT_ASSERT_EQ(test, liteapi_reg_atomic_send_handler(kmsg_on_atomic_send), 0);
	KUNIT_ASSERT_EQ(test,
			liteapi_reg_atomic_single_send_handler(kmsg_on_atomic_single_send),
			0);
	KUNIT_ASSERT_EQ(test, liteapi_dist_barrier(total), 0);

	for (i = 0; i < KMSG_ONE_WAY; i++) {
		char head[] = KMSG_HEAD;
		struct atomic_struct pieces[] = KMSG_PIECES(head, m);

		m = kmsg_make(i, "one way");
		KUNIT_EXPECT_EQ(test, liteapi_atomic_single_send(next, pieces, 3), 0);
		KUNIT_EXPECT_EQ(test, liteapi_send_message(next, &m, sizeof(m)), 0);
		KUNIT_EXPECT_EQ(test, liteapi_send_message_priority(next, &m, sizeof(m),
								    LITE_PRIORITY_LOW), 0);
		KUNIT_EXPECT_EQ(test, liteapi_send_message_UD(next, &m, sizeof(m), 0), 0);
	}
	kmsg_call_handlers(test, next);
	kmsg_bad_arguments(test, next);
	for (waited = 0; atomic_read(&kmsg_handled) < 4 * KMSG_ONE_WAY &&
	     waited < KMSG_WAIT_MS; waited += 20)
		msleep(20);
	KUNIT_EXPECT_EQ(test, atomic_read(&kmsg_handled), 4 * KMSG_ONE_WAY);
	KUNIT_EXPECT_EQ(test, atomic_read(&kmsg_wrong), 0);

	/* Every node is done sending before the handlers go. */
	KUNIT_ASSERT_EQ(test, liteapi_dist_barrier(total), 0);
	flush_delayed_work(&kmsg_later_work);
	kmsg_unregister_during_traffic(test, next, total);
	KUNIT_EXPECT_EQ(test, liteapi_reg_send_handler(NULL), 0);
	KUNIT_EXPECT_EQ(test, liteapi_reg_send_reply_handler(NULL), -ENOENT);
	KUNIT_EXPECT_EQ(test, liteapi_reg_atomic_send_handler(NULL), 0);
	KUNIT_EXPECT_EQ(test, liteapi_reg_atomic_single_send_handler(NULL), 0);
	KUNIT_EXPECT_EQ(test, liteapi_reg_send_reply_opt_handler(NULL), 0);
	KUNIT_EXPECT_EQ(test, liteapi_reg_send_reply_opt_handler(NULL), -ENOENT);
	KUNIT_ASSERT_EQ(test, liteapi_dist_barrier(total), 0);
	m = kmsg_make(99, "too late");
	KUNIT_EXPECT_EQ(test, liteapi_send_message(next, &m, sizeof(m)),
			-ECONNREFUSED);
	KUNIT_EXPECT_EQ(test, liteapi_send_reply_opt(next, &m, sizeof(m), &out, 0),
			-ECONNREFUSED);
}

static struct kunit_case lite_wire_cases[] = {
	KUNIT_CASE(control_wire_round_trip),
	KUNIT_CASE(cm_wire_round_trip),
	KUNIT_CASE(cm_wire_rejects_bad_frames),
	KUNIT_CASE(manager_authentication),
	KUNIT_CASE(kernel_message_pieces),
	{}
};

static struct kunit_suite lite_wire_suite = {
	.name = "lite_wire",
	.test_cases = lite_wire_cases,
};

static struct kunit_case lite_api_cases[] = {
	KUNIT_CASE(api_before_join),
	KUNIT_CASE(memory_api_before_join),
	KUNIT_CASE(sync_api_before_join),
	KUNIT_CASE(remote_key_tables),
	{}
};

static struct kunit_suite lite_api_suite = {
	.name = "lite_api",
	.test_cases = lite_api_cases,
};

/*
 * Run by the cluster test through debugfs once the nodes have joined:
 * echo run > /sys/kernel/debug/kunit/lite_cluster/run
 */
static struct kunit_case lite_cluster_cases[] = {
	KUNIT_CASE_SLOW(kernel_remote_memory),
	KUNIT_CASE_SLOW(kernel_async),
	KUNIT_CASE_SLOW(kernel_registration),
	KUNIT_CASE_SLOW(kernel_sync),
	KUNIT_CASE_SLOW(kernel_rpc_async),
	KUNIT_CASE_SLOW(kernel_messages),
	{}
};

/*
 * KUnit remembers that a case skipped (at boot, before the node joined)
 * and would skip it again without running it: start every run afresh.
 */
static int lite_cluster_suite_init(struct kunit_suite *suite)
{
	struct kunit_case *test_case;

	for (test_case = suite->test_cases; test_case->run_case; test_case++)
		test_case->status = KUNIT_SUCCESS;
	return 0;
}

static struct kunit_suite lite_cluster_suite = {
	.name = "lite_cluster",
	.suite_init = lite_cluster_suite_init,
	.test_cases = lite_cluster_cases,
};

kunit_test_suites(&lite_wire_suite, &lite_api_suite, &lite_cluster_suite);
