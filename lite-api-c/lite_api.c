// SPDX-License-Identifier: GPL-2.0
/*
 * Exports of LITE's kernel API. The functions are implemented in Rust
 * (api/kernel_api.rs); Rust symbols are not exported by themselves.
 */

#include <linux/export.h>
#include <rdma/lite_api.h>

EXPORT_SYMBOL_GPL(liteapi_establish_conn);
EXPORT_SYMBOL_GPL(liteapi_get_node_id);
EXPORT_SYMBOL_GPL(liteapi_get_total_node);
EXPORT_SYMBOL_GPL(liteapi_num_connected_nodes);
EXPORT_SYMBOL_GPL(liteapi_alloc_remote_mem);
EXPORT_SYMBOL_GPL(liteapi_rdma_write_offset);
EXPORT_SYMBOL_GPL(liteapi_rdma_read_offset);
EXPORT_SYMBOL_GPL(liteapi_rdma_write);
EXPORT_SYMBOL_GPL(liteapi_rdma_read);
EXPORT_SYMBOL_GPL(liteapi_free);
EXPORT_SYMBOL_GPL(liteapi_dist_barrier);
EXPORT_SYMBOL_GPL(liteapi_deregister_mr);
EXPORT_SYMBOL_GPL(liteapi_remote_memset);
EXPORT_SYMBOL_GPL(liteapi_rdma_mr_memcpy);
EXPORT_SYMBOL_GPL(liteapi_rdma_mr_memmov);
EXPORT_SYMBOL_GPL(liteapi_wrapup_alloc_for_remote_access);
EXPORT_SYMBOL_GPL(liteapi_add_askmr_table);
EXPORT_SYMBOL_GPL(liteapi_ask_mr);
EXPORT_SYMBOL_GPL(liteapi_umap_lmr);
EXPORT_SYMBOL_GPL(liteapi_rdma_asywrite_offset);
EXPORT_SYMBOL_GPL(liteapi_rdma_asyread_offset);
EXPORT_SYMBOL_GPL(liteapi_rdma_asywait);
EXPORT_SYMBOL_GPL(liteapi_rdma_asyfence);
EXPORT_SYMBOL_GPL(liteapi_register_lmr_with_virt_addr);
EXPORT_SYMBOL_GPL(liteapi_register_application);
EXPORT_SYMBOL_GPL(liteapi_unregister_application);
EXPORT_SYMBOL_GPL(liteapi_query_port);
EXPORT_SYMBOL_GPL(liteapi_send_reply_imm);
EXPORT_SYMBOL_GPL(liteapi_send);
EXPORT_SYMBOL_GPL(liteapi_send_reply_imm_async);
EXPORT_SYMBOL_GPL(liteapi_receive_message);
EXPORT_SYMBOL_GPL(liteapi_reg_send_handler);
EXPORT_SYMBOL_GPL(liteapi_reg_send_reply_handler);
EXPORT_SYMBOL_GPL(liteapi_reg_send_reply_opt_handler);
EXPORT_SYMBOL_GPL(liteapi_reg_atomic_send_handler);
EXPORT_SYMBOL_GPL(liteapi_reg_atomic_single_send_handler);
EXPORT_SYMBOL_GPL(liteapi_defer_reply);
EXPORT_SYMBOL_GPL(liteapi_send_message);
EXPORT_SYMBOL_GPL(liteapi_send_message_priority);
EXPORT_SYMBOL_GPL(liteapi_send_message_UD);
EXPORT_SYMBOL_GPL(liteapi_send_reply);
EXPORT_SYMBOL_GPL(liteapi_send_reply_UD);
EXPORT_SYMBOL_GPL(liteapi_send_reply_opt);
EXPORT_SYMBOL_GPL(liteapi_free_recv_buf);
EXPORT_SYMBOL_GPL(liteapi_atomic_send);
EXPORT_SYMBOL_GPL(liteapi_atomic_single_send);
EXPORT_SYMBOL_GPL(liteapi_reply_message);
EXPORT_SYMBOL_GPL(liteapi_reply_and_receive_message);
EXPORT_SYMBOL_GPL(liteapi_send_reply_imm_multicast);
EXPORT_SYMBOL_GPL(liteapi_rdma_fetch_and_add);
EXPORT_SYMBOL_GPL(liteapi_rdma_compare_and_swp);
EXPORT_SYMBOL_GPL(liteapi_create_lock);
EXPORT_SYMBOL_GPL(liteapi_ask_lock);
EXPORT_SYMBOL_GPL(liteapi_lock);
EXPORT_SYMBOL_GPL(liteapi_unlock);
EXPORT_SYMBOL_GPL(liteapi_set_priority);
EXPORT_SYMBOL_GPL(liteapi_leave);
