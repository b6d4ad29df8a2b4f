/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A program in the style of the original LITE's examples: it refers to
 * every function of lite-lib.h, so that building it in each C standard
 * mode (the original's inline declarations failed to link in all but
 * gnu89) proves the library provides them all. Built and linked by
 * tests/link.rs; not meant to run.
 */
#include "lite-lib.h"

typedef void (*any_function)(void);

/* Every function of lite-lib.h, by address. */
static any_function every_function[] = {
	(any_function)userspace_liteapi_join,
	(any_function)userspace_liteapi_get_node_id,
	(any_function)userspace_liteapi_get_total_node,
	(any_function)userspace_liteapi_dist_barrier,
	(any_function)userspace_syscall_test,
	(any_function)stick_this_thread_to_core,
	(any_function)userspace_liteapi_register_application,
	(any_function)userspace_liteapi_receive_message,
	(any_function)userspace_liteapi_receive_message_high,
	(any_function)userspace_liteapi_receive_message_low,
	(any_function)userspace_liteapi_receive_message_fast,
	(any_function)userspace_liteapi_receive_message_fast_record,
	(any_function)userspace_liteapi_send_reply_imm,
	(any_function)userspace_liteapi_send_reply_imm_high,
	(any_function)userspace_liteapi_send_reply_imm_low,
	(any_function)userspace_liteapi_send_reply_imm_fast,
	(any_function)userspace_liteapi_reply_message,
	(any_function)userspace_liteapi_reply_message_high,
	(any_function)userspace_liteapi_reply_message_low,
	(any_function)userspace_liteapi_reply_and_receive_message,
	(any_function)userspace_liteapi_query_port,
	(any_function)userspace_liteapi_send,
	(any_function)userspace_liteapi_alloc_remote_mem,
	(any_function)userspace_liteapi_wrap_alloc,
	(any_function)userspace_liteapi_add_ask_mr_table,
	(any_function)userspace_liteapi_ask_lmr,
	(any_function)userspace_liteapi_rdma_read,
	(any_function)userspace_liteapi_rdma_read_high,
	(any_function)userspace_liteapi_rdma_read_low,
	(any_function)userspace_liteapi_rdma_write,
	(any_function)userspace_liteapi_rdma_write_high,
	(any_function)userspace_liteapi_rdma_write_low,
	(any_function)async_rdma_read,
	(any_function)userspace_liteapi_remote_memset,
	(any_function)userspace_liteapi_memset,
	(any_function)userspace_liteapi_alloc_memory,
	(any_function)userspace_liteapi_fetch_add,
	(any_function)userspace_liteapi_compare_swp,
	(any_function)userspace_liteapi_create_lock,
	(any_function)userspace_liteapi_ask_lock,
	(any_function)userspace_liteapi_lock,
	(any_function)userspace_liteapi_unlock,
};

int main(int argc, char **argv)
{
	remote_spinlock_t lock;
	int node;

	(void)argv;
	if (argc > 100) {
		node = userspace_liteapi_join("192.168.1.1", 18500, 1);
		userspace_liteapi_create_lock(node, &lock);
		userspace_liteapi_lock(&lock);
		userspace_liteapi_unlock(&lock);
	}
	return (int)(sizeof(every_function) / sizeof(every_function[0])) == 42 ? 0 : 1;
}
