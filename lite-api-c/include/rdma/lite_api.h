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

/*
 * Join the cluster whose manager listens on server_ip:eth_port through port
 * ib_port (0: the first active one) of the device chosen as for lite_join();
 * returns the node id.
 */
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

/* Free LMR lh on every node holding a part of it, revoking its mappings. */
int liteapi_free(u64 lh);

/* The original's name for liteapi_free (needs ADMIN). */
int liteapi_deregister_mr(u64 lh);

/* Set size bytes of LMR lh at offset to byte (0..255). */
int liteapi_remote_memset(u64 lh, u64 offset, u64 size, int byte);

/* Copy size bytes between LMRs, executed by the nodes holding the source. */
int liteapi_rdma_mr_memcpy(u64 src_lh, u64 src_offset, u64 dst_lh,
			   u64 dst_offset, u64 size);

/* As liteapi_rdma_mr_memcpy, correct for overlapping ranges. */
int liteapi_rdma_mr_memmov(u64 src_lh, u64 src_offset, u64 dst_lh,
			   u64 dst_offset, u64 size);

/*
 * Create an LMR on this node holding size bytes of data and publish it under
 * identifier with READ | WRITE | SHARE. Returns the handle.
 */
long liteapi_wrapup_alloc_for_remote_access(const void *data, u64 size,
					    u64 identifier, u64 password);

/* Publish LMR lh under identifier, granting at most permission. */
int liteapi_add_askmr_table(u64 identifier, u64 lh, u64 permission,
			    u64 password);

/* Map the LMR published as identifier on node owner; returns a handle. */
long liteapi_ask_mr(unsigned int owner, u64 identifier, u64 permission,
		    u64 password);

/* Drop a mapping made by liteapi_ask_mr. */
int liteapi_umap_lmr(u64 lh);

/*
 * Asynchronous transfers of kernel callers. Each returns an operation id
 * (>= 0) to reap with liteapi_rdma_asywait (flags: LITE_ASYNC_NOWAIT gives
 * -EAGAIN while it runs) or liteapi_rdma_asyfence, which reaps every
 * operation of every kernel caller and returns the first error. A write
 * copies buf before returning; a read fills buf when reaped, so buf must
 * stay valid until then. At most LITE_MAX_ASYNC_OPS operations of kernel
 * callers are unreaped at a time (then -EAGAIN), each at most
 * LITE_MAX_ASYNC_SIZE bytes.
 */
long liteapi_rdma_asywrite_offset(u64 lh, const void *buf, u64 size,
				  unsigned int priority, u64 offset,
				  u64 password);
long liteapi_rdma_asyread_offset(u64 lh, void *buf, u64 size,
				 unsigned int priority, u64 offset, u64 password);
int liteapi_rdma_asywait(u64 op, unsigned int flags);
int liteapi_rdma_asyfence(void);

/*
 * Make size bytes of kernel memory at addr (kmalloc, page allocator or
 * vmalloc) an LMR held by this node, allowing permission; returns its
 * owner handle. The memory must stay allocated until liteapi_deregister_mr
 * on the handle returns 0; if it returns -ETIMEDOUT a mapper did not
 * confirm the revocation and the memory must be kept.
 */
long liteapi_register_lmr_with_virt_addr(void *addr, u64 size, u64 permission,
					 u64 password);

/*
 * Handles of kernel callers are shared by all kernel code; those of each
 * process are its own and released when it exits.
 */

/*
 * RPC for kernel callers, with the semantics of the system calls of the
 * same names (see <uapi/linux/lite.h>). Ports registered here belong to
 * kernel callers; descriptors are shared by all kernel callers.
 */
int liteapi_register_application(unsigned int port, u64 max_size,
				 const char *name, u64 name_len);
int liteapi_unregister_application(unsigned int port);
long liteapi_query_port(unsigned int node, unsigned int port);
long liteapi_send_reply_imm(unsigned int node, unsigned int port_priority,
			    const void *msg, u64 size, void *reply,
			    u64 max_reply);
int liteapi_send(unsigned int node, unsigned int port_priority,
		 const void *msg, u64 size);
/*
 * Post a call and return its operation id; liteapi_rdma_asywait on it
 * returns the reply's length once the reply is in reply, which must stay
 * valid until then.
 */
long liteapi_send_reply_imm_async(unsigned int node,
				  unsigned int port_priority, const void *msg,
				  u64 size, void *reply, u64 max_reply);
long liteapi_receive_message(unsigned int port, void *buf, u64 max_size,
			     u64 *descriptor, unsigned int flags);
int liteapi_reply_message(const void *buf, u64 size, u64 descriptor);
int liteapi_send_reply_imm_multicast(unsigned int count,
				     const unsigned int *nodes,
				     unsigned int port_priority,
				     const void *msg, u64 size, void *replies,
				     u64 max_reply, s64 *lengths);

/* Wait until num nodes have entered the same barrier round. */
int liteapi_dist_barrier(unsigned int num);

/*
 * Synchronization for kernel callers, with the semantics of the system
 * calls lite_fetch_add, lite_compare_swp, lite_create_lock, lite_ask_lock,
 * lite_lock and lite_unlock (see <uapi/linux/lite.h>). The old value is
 * stored into *out. The holder of a lock is the calling kernel thread.
 */
int liteapi_rdma_fetch_and_add(u64 lh, u64 *out, u64 value,
			       unsigned int priority);
int liteapi_rdma_compare_and_swp(u64 lh, u64 *out, u64 expected,
				 u64 new_value, unsigned int priority);
int liteapi_create_lock(unsigned int home, struct lite_lock *lock);
int liteapi_ask_lock(unsigned int home, unsigned int number,
		     struct lite_lock *lock);
int liteapi_lock(const struct lite_lock *lock);
int liteapi_unlock(const struct lite_lock *lock);

/* Default priority of kernel callers; returns the previous one. */
int liteapi_set_priority(unsigned int priority);

/*
 * Leaves the cluster gracefully (flags: LITE_LEAVE_FORCE or 0); see
 * lite_leave in <uapi/linux/lite.h>. 0 or a negative errno.
 */
int liteapi_leave(unsigned int flags);

/*
 * System call backends (struct lite_syscall_ops in <linux/lite_syscalls.h>);
 * user pointers are passed as integers. lite_syscall_ops_register() makes the
 * system calls reach them, lite_syscall_ops_unregister() stops it.
 */
int lite_syscall_ops_register(void);
void lite_syscall_ops_unregister(void);
void lite_rs_exit_process(void);
long lite_rs_join(unsigned long cm_ip, unsigned int cm_port, unsigned int ib_port);
long lite_rs_leave(unsigned int flags);
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
long lite_rs_remote_memset(u64 handle, u64 offset, u64 size, unsigned int byte);
long lite_rs_memcpy(u64 src, u64 src_offset, u64 dst, u64 dst_offset, u64 size);
long lite_rs_memmove(u64 src, u64 src_offset, u64 dst, u64 dst_offset, u64 size);
long lite_rs_wrap_alloc(unsigned long data, u64 size, u64 name, u64 password);
long lite_rs_add_ask_mr_table(u64 name, u64 handle, u64 permission,
			      u64 password);
long lite_rs_ask_lmr(unsigned int node, u64 name, u64 permission, u64 password);
long lite_rs_umap_lmr(u64 handle);
long lite_rs_register_lmr(unsigned long buf, u64 size, u64 permission,
			  u64 password);
long lite_rs_deregister_lmr(u64 handle);
long lite_rs_rdma_write_async(u64 handle, unsigned long buf, u64 size,
			      u64 offset, unsigned int priority, u64 password);
long lite_rs_rdma_read_async(u64 handle, unsigned long buf, u64 size,
			     u64 offset, unsigned int priority, u64 password);
long lite_rs_async_wait(u64 op, unsigned int flags);
long lite_rs_fence(void);
long lite_rs_get_stats(unsigned long stats, u64 size);
long lite_rs_register_application(unsigned int port, u64 max_size,
				  unsigned long name, u64 name_len);
long lite_rs_unregister_application(unsigned int port);
long lite_rs_query_port(unsigned int node, unsigned int port);
long lite_rs_send_reply_imm(unsigned int node, unsigned int port_priority,
			    unsigned long msg, u64 size, unsigned long reply,
			    u64 max_reply);
long lite_rs_send_reply_imm_async(unsigned int node,
				  unsigned int port_priority, unsigned long msg,
				  u64 size, unsigned long reply, u64 max_reply);
long lite_rs_send(unsigned int node, unsigned int port_priority,
		  unsigned long msg, u64 size);
long lite_rs_receive_message(unsigned int port, unsigned long buf,
			     u64 max_size, unsigned long descriptor,
			     unsigned int flags);
long lite_rs_reply_message(unsigned long buf, u64 size, u64 descriptor);
long lite_rs_reply_and_receive_message(unsigned long buf, u64 size,
				       u64 descriptor, unsigned long next);
long lite_rs_send_reply_multicast(unsigned long call);
long lite_rs_fetch_add(u64 handle, unsigned long old, u64 value,
		       unsigned int priority);
long lite_rs_compare_swp(u64 handle, unsigned long old, u64 expected,
			 u64 new_value, unsigned int priority);
long lite_rs_create_lock(unsigned int home, unsigned long lock);
long lite_rs_ask_lock(unsigned int home, unsigned int number,
		      unsigned long lock);
long lite_rs_lock(unsigned long lock);
long lite_rs_unlock(unsigned long lock);
long lite_rs_set_priority(unsigned int priority);

/* Helpers of LITE's Rust code that call into ib_core and crypto (lite_helpers.c). */
struct ib_mr;
int lite_map_mr(struct ib_mr *mr, const u64 *dma, u32 count, u32 len,
		u32 page_size, u64 iova);
int lite_hmac_sha256(const u8 *key, unsigned int keylen, const u8 *data,
		     unsigned int len, u8 *out);

/* /sys/kernel/debug/lite/ (lite_debugfs.c) and its backends. */
void lite_debugfs_create(void);
void lite_debugfs_remove(void);
ssize_t lite_rs_debugfs_stats(char *buf, size_t len);
ssize_t lite_rs_debugfs_resources(char *buf, size_t len);
ssize_t lite_rs_debugfs_access_probe(char *buf, size_t len);
ssize_t lite_rs_debugfs_quotas(char *buf, size_t len);
int lite_rs_quotas_write(const char *line, size_t len);
int lite_rs_admin_group_get(u64 *value);
int lite_rs_admin_group_set(u64 value);
int lite_rs_qos_get(unsigned int id, u64 *value);
int lite_rs_qos_set(unsigned int id, u64 value);
ssize_t lite_rs_debugfs_membership(char *buf, size_t len);
int lite_rs_membership_get(unsigned int id, u64 *value);
int lite_rs_membership_set(unsigned int id, u64 value);
int lite_rs_rpc_fault_next(u64 node);

#endif /* _RDMA_LITE_API_H */
