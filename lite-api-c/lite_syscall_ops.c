// SPDX-License-Identifier: GPL-2.0
/*
 * LITE's system call operations, registered with the entry points in the
 * core kernel (kernel/lite_syscalls.c) while LITE is loaded.
 */

#include <linux/lite_syscalls.h>
#include <linux/module.h>
#include <rdma/lite_api.h>

static const struct lite_syscall_ops lite_syscall_ops = {
	.owner = THIS_MODULE,
	.join = lite_rs_join,
	.leave = lite_rs_leave,
	.get_node_id = lite_rs_get_node_id,
	.get_total_node = lite_rs_get_total_node,
	.alloc_remote = lite_rs_alloc_remote,
	.rdma_write = lite_rs_rdma_write,
	.rdma_read = lite_rs_rdma_read,
	.free = lite_rs_free,
	.dist_barrier = lite_rs_dist_barrier,
	.remote_memset = lite_rs_remote_memset,
	.lmr_memcpy = lite_rs_memcpy,
	.lmr_memmove = lite_rs_memmove,
	.wrap_alloc = lite_rs_wrap_alloc,
	.add_ask_mr_table = lite_rs_add_ask_mr_table,
	.ask_lmr = lite_rs_ask_lmr,
	.umap_lmr = lite_rs_umap_lmr,
	.register_lmr = lite_rs_register_lmr,
	.deregister_lmr = lite_rs_deregister_lmr,
	.rdma_write_async = lite_rs_rdma_write_async,
	.rdma_read_async = lite_rs_rdma_read_async,
	.async_wait = lite_rs_async_wait,
	.fence = lite_rs_fence,
	.get_stats = lite_rs_get_stats,
	.register_application = lite_rs_register_application,
	.unregister_application = lite_rs_unregister_application,
	.query_port = lite_rs_query_port,
	.send_reply_imm = lite_rs_send_reply_imm,
	.send_reply_imm_async = lite_rs_send_reply_imm_async,
	.send = lite_rs_send,
	.receive_message = lite_rs_receive_message,
	.reply_message = lite_rs_reply_message,
	.reply_and_receive_message = lite_rs_reply_and_receive_message,
	.send_reply_multicast = lite_rs_send_reply_multicast,
	.fetch_add = lite_rs_fetch_add,
	.compare_swp = lite_rs_compare_swp,
	.create_lock = lite_rs_create_lock,
	.ask_lock = lite_rs_ask_lock,
	.lock = lite_rs_lock,
	.unlock = lite_rs_unlock,
	.set_priority = lite_rs_set_priority,
	.dsm_open = lite_rs_dsm_open,
	.exit_process = lite_rs_exit_process,
};

int lite_syscall_ops_register(void)
{
	return lite_syscalls_register(&lite_syscall_ops);
}

void lite_syscall_ops_unregister(void)
{
	lite_syscalls_unregister(&lite_syscall_ops);
}
