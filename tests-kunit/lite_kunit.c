// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suites for LITE. The test bodies are Rust (kunit_tests.rs and
 * kunit_tests/, part of the LITE crate) so they can reach LITE's internal
 * modules; they report each failed check through lite_kunit_fail().
 */

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
LITE_RUST_CASE(api_before_join)
LITE_RUST_CASE(memory_api_before_join)
LITE_RUST_CASE(sync_api_before_join)
LITE_RUST_CASE(remote_key_tables)
LITE_RUST_CLUSTER_CASE(kernel_remote_memory)
LITE_RUST_CLUSTER_CASE(kernel_async)
LITE_RUST_CLUSTER_CASE(kernel_registration)
LITE_RUST_CLUSTER_CASE(kernel_sync)
LITE_RUST_CLUSTER_CASE(kernel_rpc_async)

static struct kunit_case lite_wire_cases[] = {
	KUNIT_CASE(control_wire_round_trip),
	KUNIT_CASE(cm_wire_round_trip),
	KUNIT_CASE(cm_wire_rejects_bad_frames),
	KUNIT_CASE(manager_authentication),
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
