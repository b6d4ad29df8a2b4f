/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * LITE: Local Indirection TiEr for RDMA -- userspace wrappers.
 *
 * Self-contained: the system call numbers and constants below mirror
 * include/uapi/linux/lite.h (a test in userspace/liblite checks that they
 * match), so programs need neither kernel headers nor a library to link.
 *
 * Every wrapper returns what the kernel returned: a non-negative value on
 * success or a negative errno on failure (not -1 with errno set). See
 * include/uapi/linux/lite.h for the meaning of each errno.
 *
 * syscall() is declared by <unistd.h> only with _DEFAULT_SOURCE or
 * _GNU_SOURCE, which glibc enables unless a strict -std=c.. is given.
 */
#ifndef _LITE_USERSPACE_H
#define _LITE_USERSPACE_H

#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>

/*
 * Kept token for token identical to the uapi header. C cannot define
 * struct lite_stats twice, so this block also claims the uapi header's
 * include guard: <linux/lite.h> included afterwards adds nothing, and
 * included before, it makes this block unnecessary.
 */
#ifndef _UAPI_LINUX_LITE_H
#define _UAPI_LINUX_LITE_H

/* System call numbers (x86_64). */
#define __NR_lite_join			548
#define __NR_lite_get_node_id		549
#define __NR_lite_get_total_node	550
#define __NR_lite_alloc_remote		551
#define __NR_lite_rdma_write		552
#define __NR_lite_rdma_read		553
#define __NR_lite_free			554
#define __NR_lite_dist_barrier		555
#define __NR_lite_remote_memset		556
#define __NR_lite_memcpy		557
#define __NR_lite_memmove		558
#define __NR_lite_wrap_alloc		559
#define __NR_lite_add_ask_mr_table	560
#define __NR_lite_ask_lmr		561
#define __NR_lite_umap_lmr		562
#define __NR_lite_register_lmr		563
#define __NR_lite_deregister_lmr	564
#define __NR_lite_rdma_write_async	565
#define __NR_lite_rdma_read_async	566
#define __NR_lite_async_wait		567
#define __NR_lite_fence			568
#define __NR_lite_get_stats		569

/* Permissions of a handle. */
#define LITE_PERM_READ		0x1ull
#define LITE_PERM_WRITE		0x2ull
#define LITE_PERM_SHARE		0x4ull
#define LITE_PERM_ADMIN		0x8ull
#define LITE_PERM_ATOMIC	0x10ull

/* lite_async_wait flags. */
#define LITE_ASYNC_NOWAIT	0x1u

/* Outstanding asynchronous operations per process. */
#define LITE_MAX_ASYNC_OPS	64

/* Largest single asynchronous transfer. */
#define LITE_MAX_ASYNC_SIZE	(16u << 20)

/* Largest lite_register_lmr region. */
#define LITE_MAX_REGISTER_SIZE	(64ull << 20)

/* Node counters returned by lite_get_stats (same layout as the uapi's). */
struct lite_stats {
	uint64_t lmrs;			/* LMRs created on this node and not released */
	uint64_t registrations;		/* of which registered user memory */
	uint64_t mappings;		/* mappings made by lite_ask_lmr */
	uint64_t published_names;	/* names published on this node */
	uint64_t held_chunks;		/* chunks this node holds, for any node */
	uint64_t handles;		/* handles open in all processes */
	uint64_t processes;		/* processes holding LITE handles or operations */
	uint64_t async_in_flight;	/* asynchronous operations not yet reaped */
};

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

/* syscall() reports failure as -1 and errno; give back the kernel's -errno. */
static inline long lite_syscall_result(long ret)
{
	return ret == -1 ? -(long)errno : ret;
}

/*
 * Join the cluster whose manager listens on cm_ip:cm_port (dotted IPv4)
 * using port ib_port of the node's RDMA device. Returns the node id (>= 1).
 */
static inline long lite_join(const char *cm_ip, unsigned int cm_port,
			     unsigned int ib_port)
{
	return lite_syscall_result(syscall(__NR_lite_join, cm_ip,
					   (unsigned long)cm_port,
					   (unsigned long)ib_port));
}

/* This node's id. */
static inline long lite_get_node_id(void)
{
	return lite_syscall_result(syscall(__NR_lite_get_node_id));
}

/* Number of connected nodes, this one included. */
static inline long lite_get_total_node(void)
{
	return lite_syscall_result(syscall(__NR_lite_get_total_node));
}

/*
 * Allocate an LMR of size bytes on node (LITE_NODE_SPREAD: over all other
 * nodes) and return its handle (> 0).
 */
static inline long lite_alloc_remote(unsigned int node, uint64_t size,
				     unsigned int flags, uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_alloc_remote,
					   (unsigned long)node, size,
					   (unsigned long)flags, password));
}

/* Copy size bytes from buf into the LMR at offset. Returns 0. */
static inline long lite_rdma_write(uint64_t handle, const void *buf,
				   uint64_t size, uint64_t offset,
				   unsigned int priority, uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_rdma_write, handle, buf,
					   size, offset,
					   (unsigned long)priority, password));
}

/* Copy size bytes of the LMR at offset into buf. Returns 0. */
static inline long lite_rdma_read(uint64_t handle, void *buf, uint64_t size,
				  uint64_t offset, unsigned int priority,
				  uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_rdma_read, handle, buf,
					   size, offset,
					   (unsigned long)priority, password));
}

/* Release the LMR and the memory behind it. Returns 0. */
static inline long lite_free(uint64_t handle)
{
	return lite_syscall_result(syscall(__NR_lite_free, handle));
}

/* Block until num nodes, this one included, enter the same barrier round. */
static inline long lite_dist_barrier(unsigned int num)
{
	return lite_syscall_result(syscall(__NR_lite_dist_barrier,
					   (unsigned long)num));
}

/* Set size bytes of the LMR at offset to byte (0..255). Needs WRITE. */
static inline long lite_remote_memset(uint64_t handle, uint64_t offset,
				      uint64_t size, unsigned int byte)
{
	return lite_syscall_result(syscall(__NR_lite_remote_memset, handle,
					   offset, size, (unsigned long)byte));
}

/*
 * Copy size bytes between LMRs (possibly the same one), done by the nodes
 * holding the bytes. Unspecified for overlapping ranges: use lite_memmove.
 * Source needs READ, destination WRITE. Returns 0.
 */
static inline long lite_memcpy(uint64_t src_handle, uint64_t src_offset,
			       uint64_t dst_handle, uint64_t dst_offset,
			       uint64_t size)
{
	return lite_syscall_result(syscall(__NR_lite_memcpy, src_handle,
					   src_offset, dst_handle, dst_offset,
					   size));
}

/* Like lite_memcpy, but correct for overlapping ranges. Returns 0. */
static inline long lite_memmove(uint64_t src_handle, uint64_t src_offset,
				uint64_t dst_handle, uint64_t dst_offset,
				uint64_t size)
{
	return lite_syscall_result(syscall(__NR_lite_memmove, src_handle,
					   src_offset, dst_handle, dst_offset,
					   size));
}

/*
 * Create an LMR on this node holding a copy of data and publish it under
 * name with READ | WRITE | SHARE. Returns its handle. -EEXIST name taken.
 */
static inline long lite_wrap_alloc(const void *data, uint64_t size,
				   uint64_t name, uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_wrap_alloc, data, size,
					   name, password));
}

/*
 * Publish the LMR behind handle under name on this node, granting at most
 * permission (LITE_PERM_*, never ADMIN). Needs SHARE and the handle's
 * password. Returns 0. -EEXIST name taken.
 */
static inline long lite_add_ask_mr_table(uint64_t name, uint64_t handle,
					 uint64_t permission,
					 uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_add_ask_mr_table, name,
					   handle, permission, password));
}

/*
 * Map the LMR published under name on node and return a new handle with
 * permission restricted to what the name grants. password must be the one
 * the name was published with. -ENOENT no such name.
 */
static inline long lite_ask_lmr(unsigned int node, uint64_t name,
				uint64_t permission, uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_ask_lmr,
					   (unsigned long)node, name,
					   permission, password));
}

/* Drop a mapping made by lite_ask_lmr (also a revoked one). Returns 0. */
static inline long lite_umap_lmr(uint64_t handle)
{
	return lite_syscall_result(syscall(__NR_lite_umap_lmr, handle));
}

/*
 * Make size bytes (at most LITE_MAX_REGISTER_SIZE) of this process's memory
 * at buf an LMR, allowing permission; the pages stay pinned, and may be
 * read and written by other nodes, until lite_deregister_lmr. Returns the
 * handle.
 */
static inline long lite_register_lmr(void *buf, uint64_t size,
				     uint64_t permission, uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_register_lmr, buf, size,
					   permission, password));
}

/*
 * Revoke the LMR (mappings fail with -EKEYREVOKED from then on) and unpin
 * its pages. Needs ADMIN. For an allocated LMR this is lite_free.
 */
static inline long lite_deregister_lmr(uint64_t handle)
{
	return lite_syscall_result(syscall(__NR_lite_deregister_lmr, handle));
}

/*
 * Start writing size bytes (at most LITE_MAX_ASYNC_SIZE) from buf into the
 * LMR at offset and return the operation id (> 0). buf is free again when
 * the call returns. Reap the id with lite_async_wait or lite_fence.
 */
static inline long lite_rdma_write_async(uint64_t handle, const void *buf,
					 uint64_t size, uint64_t offset,
					 unsigned int priority,
					 uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_rdma_write_async, handle,
					   buf, size, offset,
					   (unsigned long)priority, password));
}

/*
 * Start reading size bytes (at most LITE_MAX_ASYNC_SIZE) of the LMR at
 * offset into buf and return the operation id (> 0). The data is stored
 * into buf when the id is reaped by lite_async_wait or lite_fence, so buf
 * must stay valid until then.
 */
static inline long lite_rdma_read_async(uint64_t handle, void *buf,
					uint64_t size, uint64_t offset,
					unsigned int priority,
					uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_rdma_read_async, handle,
					   buf, size, offset,
					   (unsigned long)priority, password));
}

/*
 * Reap operation op: 0 or its negative errno; the id is released. With
 * LITE_ASYNC_NOWAIT, -EAGAIN while it is in flight (the id stays valid).
 */
static inline long lite_async_wait(uint64_t op, unsigned int flags)
{
	return lite_syscall_result(syscall(__NR_lite_async_wait, op,
					   (unsigned long)flags));
}

/* Reap every outstanding operation: 0 or the first failure's errno. */
static inline long lite_fence(void)
{
	return lite_syscall_result(syscall(__NR_lite_fence));
}

/*
 * Copy min(size, sizeof(struct lite_stats)) bytes of this node's counters
 * into stats. Returns 0. -EINVAL if size < 8.
 */
static inline long lite_get_stats(struct lite_stats *stats, uint64_t size)
{
	return lite_syscall_result(syscall(__NR_lite_get_stats, stats, size));
}

#endif /* _LITE_USERSPACE_H */
