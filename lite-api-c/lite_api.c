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
EXPORT_SYMBOL_GPL(liteapi_alloc_remote_mem);
EXPORT_SYMBOL_GPL(liteapi_rdma_write_offset);
EXPORT_SYMBOL_GPL(liteapi_rdma_read_offset);
EXPORT_SYMBOL_GPL(liteapi_free);
EXPORT_SYMBOL_GPL(liteapi_dist_barrier);
