/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * LITE: Local Indirection TiEr for RDMA -- userspace ABI.
 *
 * LITE gives every process on a node shared, protected access to remote
 * memory (LMRs) over RDMA. These are the raw system call numbers and the
 * constants their arguments use. All calls return a negative errno on
 * failure.
 *
 * Errors common to every call:
 *   -ENOTCONN     the node has not joined a LITE cluster yet
 *   -EFAULT       a user pointer could not be read or written
 *   -EINVAL       a size, offset, flag or priority is out of range
 *                 (including integer overflow of offset + size)
 *   -EBADF        the LMR handle is unknown (never allocated or freed)
 *   -EACCES       the password does not match the LMR's password
 *   -EHOSTUNREACH the target node is not a member of the cluster
 *   -ENOMEM       the node holding the memory could not allocate it
 *   -EIO          the RDMA operation completed with an error
 */
#ifndef _UAPI_LINUX_LITE_H
#define _UAPI_LINUX_LITE_H

#include <linux/types.h>

/* System call numbers (x86_64), in the range free for non-x32 use. */
#define __NR_lite_join			548
#define __NR_lite_get_node_id		549
#define __NR_lite_get_total_node	550
#define __NR_lite_alloc_remote		551
#define __NR_lite_rdma_write		552
#define __NR_lite_rdma_read		553
#define __NR_lite_free			554
#define __NR_lite_dist_barrier		555

/*
 * long lite_join(const char *cm_ip, unsigned int cm_port, unsigned int ib_port)
 *   Join the cluster whose manager listens on cm_ip:cm_port (dotted IPv4,
 *   NUL-terminated, at most LITE_MAX_IP_LEN bytes including the NUL) using
 *   port ib_port of the node's RDMA device. Returns the node id (>= 1).
 *   Membership belongs to the node and outlives the calling process.
 *   -EISCONN already joined; -ENODEV no RDMA device or port;
 *   -ECONNREFUSED / -ETIMEDOUT the cluster manager cannot be reached;
 *   -EPROTO the cluster manager answered something unexpected.
 *
 * long lite_get_node_id(void)      -> this node's id
 * long lite_get_total_node(void)   -> number of nodes connected, self included
 *
 * long lite_alloc_remote(unsigned int node, __u64 size, unsigned int flags,
 *                        __u64 password)
 *   Allocate an LMR of size bytes on node (this node included) and return
 *   its handle (> 0). node == LITE_NODE_SPREAD spreads the chunks round
 *   robin over every other node. LMRs larger than LITE_CHUNK_SIZE are split
 *   into chunks. flags: LITE_ALLOC_ATOMIC (size must be 8).
 *
 * long lite_rdma_write(__u64 handle, const void *buf, __u64 size,
 *                      __u64 offset, unsigned int priority, __u64 password)
 * long lite_rdma_read(__u64 handle, void *buf, __u64 size, __u64 offset,
 *                     unsigned int priority, __u64 password)
 *   Copy size bytes between buf and the LMR at offset; synchronous.
 *   Returns 0. size may be 0 (nothing is transferred).
 *
 * long lite_free(__u64 handle)
 *   Release the LMR and the memory behind it on every node that holds a
 *   chunk of it. Operations already under way finish first.
 *
 * long lite_dist_barrier(unsigned int num)
 *   Block until num nodes (this one included) have entered the same
 *   barrier round. Rounds are numbered per node, so the call can be
 *   repeated. -EINVAL if num is 0 or larger than LITE_MAX_NODES;
 *   -ERESTARTSYS / -EINTR if interrupted by a signal.
 */

/* Target node for lite_alloc_remote that spreads chunks over all other nodes. */
#define LITE_NODE_SPREAD	0

/* lite_alloc_remote flags. */
#define LITE_ALLOC_ATOMIC	0x1u

/* Priorities for data operations. */
#define LITE_PRIORITY_NONE	0u
#define LITE_PRIORITY_HIGH	1u
#define LITE_PRIORITY_LOW	2u

/* Size of one LMR chunk: LMRs larger than this span several chunks. */
#define LITE_CHUNK_SIZE		(4u << 20)

/* Largest LMR one call may allocate. */
#define LITE_MAX_LMR_SIZE	(1ull << 40)

/* Most nodes one cluster may hold. */
#define LITE_MAX_NODES		64

/* Longest cluster manager address accepted by lite_join, NUL included. */
#define LITE_MAX_IP_LEN		16

/* TCP port the cluster manager listens on by default. */
#define LITE_CM_DEFAULT_PORT	18500

#endif /* _UAPI_LINUX_LITE_H */
