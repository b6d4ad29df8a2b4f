/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LITE kernel API: remote memory (LMRs) and synchronisation over RDMA for
 * kernel code. The names and argument order follow the original LITE.
 *
 * Every function returns a non-negative value on success or a negative
 * errno; see include/uapi/linux/lite.h for the error codes. Buffers are
 * kernel memory. All functions may sleep.
 */
#ifndef _RDMA_LITE_API_H
#define _RDMA_LITE_API_H

#include <linux/types.h>
#include <uapi/linux/lite.h>

/* Join the cluster whose manager listens on server_ip:eth_port; returns the node id. */
int liteapi_establish_conn(const char *server_ip, int eth_port, int ib_port);

/* This node's id, or -ENOTCONN. */
int liteapi_get_node_id(void);

/* Nodes this node is connected to, itself included, or -ENOTCONN. */
int liteapi_get_total_node(void);

/*
 * Allocate an LMR of size bytes on node (LITE_NODE_SPREAD: spread over the
 * other nodes); flags: LITE_ALLOC_ATOMIC. Returns the handle (> 0).
 */
long liteapi_alloc_remote_mem(unsigned int node, u64 size, unsigned int flags,
			      u64 password);

/* Write size bytes of buf into LMR lh at offset. */
int liteapi_rdma_write_offset(u64 lh, const void *buf, u64 size,
			      unsigned int priority, u64 offset, u64 password);

/* Read size bytes of LMR lh at offset into buf. */
int liteapi_rdma_read_offset(u64 lh, void *buf, u64 size,
			     unsigned int priority, u64 offset, u64 password);

/* Free LMR lh on every node holding a part of it. */
int liteapi_free(u64 lh);

/* Wait until num nodes have entered the same barrier round. */
int liteapi_dist_barrier(unsigned int num);

/* System call backends (lite_syscalls.c); user pointers are passed as integers. */
long lite_rs_join(unsigned long cm_ip, unsigned int cm_port, unsigned int ib_port);
long lite_rs_get_node_id(void);
long lite_rs_get_total_node(void);
long lite_rs_alloc_remote(unsigned int node, u64 size, unsigned int flags,
			  u64 password);
long lite_rs_rdma_write(u64 handle, unsigned long buf, u64 size, u64 offset,
			unsigned int priority, u64 password);
long lite_rs_rdma_read(u64 handle, unsigned long buf, u64 size, u64 offset,
		       unsigned int priority, u64 password);
long lite_rs_free(u64 handle);
long lite_rs_dist_barrier(unsigned int num);

#endif /* _RDMA_LITE_API_H */
