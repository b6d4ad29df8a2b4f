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
 * Kept token for token identical to the uapi header, except that the
 * structs use <stdint.h> types for the <linux/types.h> ones (same
 * layout). C cannot define a struct twice, so this block also claims the
 * uapi header's include guard: <linux/lite.h> included afterwards adds
 * nothing, and included before, it makes this block unnecessary.
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
#define __NR_lite_register_application	570
#define __NR_lite_unregister_application 571
#define __NR_lite_query_port		572
#define __NR_lite_send_reply_imm	573
#define __NR_lite_send			574
#define __NR_lite_receive_message	575
#define __NR_lite_reply_message		576
#define __NR_lite_reply_and_receive_message 577
#define __NR_lite_send_reply_multicast	578
#define __NR_lite_fetch_add		579
#define __NR_lite_compare_swp		580
#define __NR_lite_create_lock		581
#define __NR_lite_ask_lock		582
#define __NR_lite_lock			583
#define __NR_lite_unlock		584
#define __NR_lite_set_priority		585
#define __NR_lite_leave			586
#define __NR_lite_send_reply_imm_async	587
#define __NR_lite_dsm_open		588

/* A distributed lock: the node that keeps it and its number there. */
struct lite_lock {
	uint32_t home;
	uint32_t number;
};

/* Locks one home node can keep. */
#define LITE_MAX_LOCKS		4096

/* RPC limits. */
#define LITE_MAX_PORTS		64
#define LITE_MAX_MESSAGE_SIZE	(256u << 10)
#define LITE_MAX_PORT_NAME	32
#define LITE_RPC_TIMEOUT_MS	60000

/* Unreaped lite_send_reply_imm_async calls per process. */
#define LITE_MAX_ASYNC_CALLS	32

/* Port and priority of a send, and the non-blocking flag for lite_send. */
#define LITE_PORT_PRIORITY(port, priority) ((port) | ((priority) << 16))
#define LITE_SEND_NONBLOCK	0x80000000u

/* lite_leave flags. */
#define LITE_LEAVE_FORCE	0x1u

/* lite_receive_message flags. */
#define LITE_RECV_NONBLOCK	0x1u

/* lite_dsm_open flag: create the region on this node. */
#define LITE_DSM_CREATE		0x1u

/* The receive half of lite_reply_and_receive_message. */
struct lite_receive {
	uint64_t buf;		/* where the message goes */
	uint64_t max_size;	/* room at buf */
	uint64_t descriptor;	/* out: the new message's descriptor */
	uint32_t port;
	uint32_t flags;		/* LITE_RECV_NONBLOCK */
};

/* Arguments of lite_send_reply_multicast. */
struct lite_multicast {
	uint64_t nodes;		/* const uint32_t[count]: target node ids */
	uint64_t lengths;	/* int64_t[count], out: reply length or -errno */
	uint64_t msg;		/* the request */
	uint64_t size;		/* its length */
	uint64_t replies;	/* count * max_reply bytes, out */
	uint64_t max_reply;	/* room per reply */
	uint32_t count;
	uint32_t port_priority;	/* LITE_PORT_PRIORITY(port, priority) */
};

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
	uint64_t connections;		/* RC connections (queue pairs) to peers */
	uint64_t rpc_ports;		/* RPC ports registered on this node */
	uint64_t locks;			/* distributed locks kept by this node */
	uint64_t lock_acquires;		/* lite_lock calls that acquired here */
	uint64_t lock_waits;		/* of which waited for another holder */
	uint64_t atomics;		/* fetch-add and compare-swap issued here */
	uint64_t qos_throttled;		/* low-priority operations that waited */
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
 * using port ib_port (0: the first active port) of the RDMA device that
 * LITE's "device" module parameter names, or of the first device with such
 * a port if it names none (-ENODEV if there is none). Returns the node id
 * (>= 1).
 * A node that left (or rebooted) gets its earlier id back. Retry on
 * -EADDRINUSE (the manager still counts the node's earlier incarnation as
 * alive) and on -EAGAIN (a manager that just started waits for the members
 * of its cluster to come back). -EPERM the caller lacks CAP_NET_ADMIN
 * (checked before anything else).
 */
static inline long lite_join(const char *cm_ip, unsigned int cm_port,
			     unsigned int ib_port)
{
	return lite_syscall_result(syscall(__NR_lite_join, cm_ip,
					   (unsigned long)cm_port,
					   (unsigned long)ib_port));
}

/*
 * Leave the cluster gracefully: chunks this node holds for other nodes'
 * LMRs move to other nodes first, then everything this node's processes
 * hold is released. Returns 0; new calls on this node get -ENOTCONN from
 * then on, and lite_join makes it a member again with the same id.
 * flags: LITE_LEAVE_FORCE leaves even if a chunk could not move (its data
 * is lost). -ENOSPC a chunk could not move (the node stays a member);
 * -ENOTCONN not a member; -EALREADY a join or leave is under way; -EINVAL
 * unknown flags; -EPERM the caller lacks CAP_NET_ADMIN (checked before
 * anything else). Using LMRs, RPC and locks needs no privilege.
 */
static inline long lite_leave(unsigned int flags)
{
	return lite_syscall_result(syscall(__NR_lite_leave,
					   (unsigned long)flags));
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
 * nodes) and return its handle (> 0). -EDQUOT the caller's remote_memory
 * or lmrs quota, or a serving node's limit for this node, would be
 * exceeded.
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

/*
 * Block until num nodes, this one included, enter the same barrier round.
 * -EHOSTDOWN if a member departed during the round (every node waiting in
 * it fails, and the next call is the next round everywhere); -ETIMEDOUT
 * if the cluster had fewer than num members for 60 s of the wait.
 */
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
 * name with READ | WRITE | SHARE. Returns its handle. -EEXIST name taken;
 * -EDQUOT the caller's remote_memory, lmrs or names quota would be
 * exceeded.
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
 * password. Returns 0. -EEXIST name taken; -EDQUOT the caller's names
 * quota would be exceeded.
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
 * handle. -EDQUOT the caller's pinned_memory or lmrs quota would be
 * exceeded; -ENOMEM the pages would exceed RLIMIT_MEMLOCK (unless the
 * caller has CAP_IPC_LOCK).
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

/*
 * Open port (< LITE_MAX_PORTS) for messages of at most max_size bytes
 * (1..LITE_MAX_MESSAGE_SIZE). name (name_len bytes, at most
 * LITE_MAX_PORT_NAME, no NUL needed) is informational. Returns 0.
 * -EADDRINUSE the port is taken; -EDQUOT the caller's rpc_ports quota
 * would be exceeded. Closed when this process exits.
 */
static inline long lite_register_application(unsigned int port,
					     uint64_t max_size,
					     const char *name,
					     uint64_t name_len)
{
	return lite_syscall_result(syscall(__NR_lite_register_application,
					   (unsigned long)port, max_size, name,
					   name_len));
}

/*
 * Close port: blocked receivers get -ESHUTDOWN, callers whose requests
 * were not received yet -ECONNREFUSED. Returns 0.
 */
static inline long lite_unregister_application(unsigned int port)
{
	return lite_syscall_result(syscall(__NR_lite_unregister_application,
					   (unsigned long)port));
}

/* Connect to port on node and return its max_size. Optional. */
static inline long lite_query_port(unsigned int node, unsigned int port)
{
	return lite_syscall_result(syscall(__NR_lite_query_port,
					   (unsigned long)node,
					   (unsigned long)port));
}

/*
 * Blocking RPC: send size bytes to port on node (this node included) and
 * store the reply (at most max_reply bytes) into reply. Returns the
 * reply's length.
 */
static inline long lite_send_reply_imm(unsigned int node, unsigned int port,
				       const void *msg, uint64_t size,
				       void *reply, uint64_t max_reply,
				       unsigned int priority)
{
	unsigned long port_priority = LITE_PORT_PRIORITY(port, priority);

	return lite_syscall_result(syscall(__NR_lite_send_reply_imm,
					   (unsigned long)node, port_priority,
					   msg, size, reply, max_reply));
}

/*
 * Post the RPC lite_send_reply_imm would make and return an operation id
 * at once; lite_async_wait on it returns the reply's length once the reply
 * is in reply (which must stay valid until then), or the call's error.
 * -EAGAIN with LITE_MAX_ASYNC_CALLS calls unreaped.
 */
static inline long lite_send_reply_imm_async(unsigned int node,
					     unsigned int port,
					     const void *msg, uint64_t size,
					     void *reply, uint64_t max_reply,
					     unsigned int priority)
{
	unsigned long port_priority = LITE_PORT_PRIORITY(port, priority);

	return lite_syscall_result(syscall(__NR_lite_send_reply_imm_async,
					   (unsigned long)node, port_priority,
					   msg, size, reply, max_reply));
}

/*
 * One-way message to port on node. Returns 0 once it is in the server's
 * ring; blocks while the ring is full.
 */
static inline long lite_send(unsigned int node, unsigned int port,
			     const void *msg, uint64_t size,
			     unsigned int priority)
{
	unsigned long port_priority = LITE_PORT_PRIORITY(port, priority);

	return lite_syscall_result(syscall(__NR_lite_send, (unsigned long)node,
					   port_priority, msg, size));
}

/* Like lite_send, but -EAGAIN instead of blocking while the ring is full. */
static inline long lite_send_nonblock(unsigned int node, unsigned int port,
				      const void *msg, uint64_t size,
				      unsigned int priority)
{
	unsigned long port_priority = LITE_PORT_PRIORITY(port, priority) |
				      LITE_SEND_NONBLOCK;

	return lite_syscall_result(syscall(__NR_lite_send, (unsigned long)node,
					   port_priority, msg, size));
}

/*
 * Take the next message of port into buf (max_size bytes) and return its
 * length; *descriptor is its reply descriptor, 0 for a one-way message.
 * flags: LITE_RECV_NONBLOCK (-EAGAIN when empty). -EMSGSIZE the next
 * message does not fit (it stays queued).
 */
static inline long lite_receive_message(unsigned int port, void *buf,
					uint64_t max_size,
					uint64_t *descriptor,
					unsigned int flags)
{
	return lite_syscall_result(syscall(__NR_lite_receive_message,
					   (unsigned long)port, buf, max_size,
					   descriptor, (unsigned long)flags));
}

/*
 * Answer the request behind descriptor with size bytes at buf. Returns 0.
 * -ENOENT not an unanswered descriptor of this process; -EMSGSIZE larger
 * than the caller's max_reply (the descriptor stays valid).
 */
static inline long lite_reply_message(const void *buf, uint64_t size,
				      uint64_t descriptor)
{
	return lite_syscall_result(syscall(__NR_lite_reply_message, buf, size,
					   descriptor));
}

/*
 * lite_reply_message, then lite_receive_message as next describes
 * (next->descriptor receives the new descriptor). Returns the new
 * message's length, or the reply's error (then nothing is received).
 */
static inline long lite_reply_and_receive_message(const void *buf,
						  uint64_t size,
						  uint64_t descriptor,
						  struct lite_receive *next)
{
	return lite_syscall_result(syscall(__NR_lite_reply_and_receive_message,
					   buf, size, descriptor, next));
}

/*
 * Send one request to call->count nodes and wait for every reply; see
 * struct lite_multicast. Returns the number of nodes that replied.
 */
static inline long lite_send_reply_multicast(struct lite_multicast *call)
{
	return lite_syscall_result(syscall(__NR_lite_send_reply_multicast,
					   call));
}

/*
 * Atomically add value (modulo 2^64) to the 8-byte LMR behind handle
 * (allocated with LITE_ALLOC_ATOMIC; needs ATOMIC) and store the value it
 * held before into *old. Returns 0.
 */
static inline long lite_fetch_add(uint64_t handle, uint64_t *old,
				  uint64_t value, unsigned int priority)
{
	return lite_syscall_result(syscall(__NR_lite_fetch_add, handle, old,
					   value, (unsigned long)priority));
}

/*
 * Atomically replace the 8-byte LMR's value with new_value if it equals
 * expected; *old receives the value before either way, so the swap
 * happened if and only if *old == expected. Returns 0.
 */
static inline long lite_compare_swp(uint64_t handle, uint64_t *old,
				    uint64_t expected, uint64_t new_value,
				    unsigned int priority)
{
	return lite_syscall_result(syscall(__NR_lite_compare_swp, handle, old,
					   expected, new_value,
					   (unsigned long)priority));
}

/*
 * Create a distributed lock kept by node home (this node included), fill
 * in *lock and return its number. -ENOSPC home keeps LITE_MAX_LOCKS;
 * -EDQUOT the caller's locks quota would be exceeded (a lock stays
 * charged while this node is a member).
 */
static inline long lite_create_lock(unsigned int home, struct lite_lock *lock)
{
	return lite_syscall_result(syscall(__NR_lite_create_lock,
					   (unsigned long)home, lock));
}

/* Fill in *lock for lock number of home. Returns 0. -ENOENT no such lock. */
static inline long lite_ask_lock(unsigned int home, unsigned int number,
				 struct lite_lock *lock)
{
	return lite_syscall_result(syscall(__NR_lite_ask_lock,
					   (unsigned long)home,
					   (unsigned long)number, lock));
}

/*
 * Acquire the lock for the calling thread; callers on all nodes get it in
 * the order they asked. Returns 0, or -EOWNERDEAD when the lock is held
 * all the same but its previous holder's node died or left while holding
 * it (what it guards may be half updated; only the next taker is told,
 * and unlocks as usual). -EDEADLK the thread holds it already, -EHOSTDOWN
 * the lock's home node is gone, -EAGAIN the lock changed hands too
 * often meanwhile (try again).
 */
static inline long lite_lock(const struct lite_lock *lock)
{
	return lite_syscall_result(syscall(__NR_lite_lock, lock));
}

/* Release the lock. Returns 0. -EPERM the calling thread does not hold it. */
static inline long lite_unlock(const struct lite_lock *lock)
{
	return lite_syscall_result(syscall(__NR_lite_unlock, lock));
}

/*
 * Set the process's default priority (what LITE_PRIORITY_NONE stands for)
 * and return the previous default.
 */
static inline long lite_set_priority(unsigned int priority)
{
	return lite_syscall_result(syscall(__NR_lite_set_priority,
					   (unsigned long)priority));
}

/*
 * Opens LITE-DSM region @name of node @node (creating it on this node, of
 * @size bytes, with LITE_DSM_CREATE); returns a file descriptor to mmap()
 * with MAP_SHARED. Every access to the mapping sees the last write of its
 * page on any node; a page lost with a node raises SIGBUS.
 */
static inline long lite_dsm_open(unsigned int node, uint64_t name,
				 uint64_t size, unsigned int flags,
				 uint64_t password)
{
	return lite_syscall_result(syscall(__NR_lite_dsm_open,
					   (unsigned long)node, name, size,
					   (unsigned long)flags, password));
}

#endif /* _LITE_USERSPACE_H */
