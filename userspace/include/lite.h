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

/* Kept token for token identical to the uapi header, so including both is harmless. */
#ifndef _UAPI_LINUX_LITE_H

/* System call numbers (x86_64). */
#define __NR_lite_join			548
#define __NR_lite_get_node_id		549
#define __NR_lite_get_total_node	550
#define __NR_lite_alloc_remote		551
#define __NR_lite_rdma_write		552
#define __NR_lite_rdma_read		553
#define __NR_lite_free			554
#define __NR_lite_dist_barrier		555

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

#endif /* _LITE_USERSPACE_H */
