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
 *   -EBADF        the LMR handle is unknown to the calling process (never
 *                 created, freed, unmapped, or another process's handle)
 *   -EACCES       the password does not match the handle's password
 *   -EPERM        the handle lacks the permission the operation needs
 *   -EKEYREVOKED  the LMR behind a mapping was freed or deregistered by
 *                 its owner; only lite_umap_lmr still accepts the handle
 *   -EHOSTUNREACH the target node is not a member of the cluster
 *   -EHOSTDOWN    a node the operation needs was declared dead by the
 *                 cluster manager (no heartbeat for its dead-after time,
 *                 3 s by default), or this node was cut off from the
 *                 manager and fenced itself; callers already waiting on
 *                 that node return with it within about a second of the
 *                 verdict. Data held by a dead node is lost.
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

/*
 * Handles and protection
 *
 * An LMR handle belongs to the process that received it, like a file
 * descriptor: the same number means nothing in another process (-EBADF).
 * Handles are not inherited across fork() and are released when the process
 * exits: LMRs it created are freed (their mappings on every node are
 * revoked), its mappings are unmapped, its registrations deregistered and
 * its asynchronous operations completed before the memory goes.
 *
 * Each handle carries permissions (LITE_PERM_*):
 *   READ   lite_rdma_read, lite_rdma_read_async, source of lite_memcpy/memmove
 *   WRITE  lite_rdma_write, lite_rdma_write_async, lite_remote_memset,
 *          destination of lite_memcpy/memmove
 *   SHARE  lite_add_ask_mr_table
 *   ADMIN  lite_free, lite_deregister_lmr (only the creator has it)
 *   ATOMIC atomic operations on 8-byte LMRs
 * The creator of an LMR holds every permission the LMR has plus ADMIN.
 *
 * Passwords: every handle also has the 64-bit password given when it was
 * created; data operations (read, write, async) must present it. Within one
 * process they guard against code that learned a handle number but not its
 * password; across nodes the password of a published name must be given to
 * lite_ask_lmr, so knowing a 64-bit name is not enough to map the memory.
 */

/*
 * Quotas
 *
 * Each node limits what every user (real uid, as the initial user namespace
 * sees it) of its processes holds through LITE; calls that would go beyond
 * a limit fail with -EDQUOT and change nothing:
 *   remote_memory  bytes of LMRs allocated (lite_alloc_remote,
 *                  lite_wrap_alloc), wherever their chunks are
 *   pinned_memory  bytes of the pages of this node's memory registered
 *                  (lite_register_lmr; whole pages)
 *   lmrs           LMRs created (allocated, wrapped or registered)
 *   names          names published (lite_wrap_alloc, lite_add_ask_mr_table)
 *   rpc_ports      RPC ports registered (lite_register_application)
 *   locks          locks created (lite_create_lock); a lock counts for as
 *                  long as the creating node is a member, as locks are
 *                  never destroyed
 * Registered pages also count against the process's RLIMIT_MEMLOCK, like
 * ibv_reg_mr: -ENOMEM beyond it, unless the caller has CAP_IPC_LOCK.
 * A node serving allocations also limits the bytes each other node's LMRs
 * may hold on it (remote_memory per node); beyond it, the allocating call
 * fails with -EDQUOT. Defaults: remote_memory 1 GiB, pinned_memory
 * unlimited, 65536 lmrs, 4096 names, 1024 rpc_ports, 4096 locks per user;
 * half of the serving node's RAM per other node. Kernel callers of the C
 * API are not charged to a user.
 *
 * The limits and every user's usage are in /sys/kernel/debug/lite/quotas
 * (debugfs), one line each:
 *   limit default remote_memory=V pinned_memory=V lmrs=V names=V
 *         rpc_ports=V locks=V            (all on one line)
 *   limit uid U remote_memory=V ...      a user with limits of its own
 *   limit node default remote_memory=V   per other node, on this node
 *   limit node N remote_memory=V         for node N
 *   usage uid U remote_memory=C pinned_memory=C lmrs=C names=C
 *         rpc_ports=C locks=C            a user holding something
 *   served node N remote_memory=C        bytes held here for node N
 * where V is a number below 2^64 - 1 or "unlimited" and C a number. A task that opened
 * the file with CAP_NET_ADMIN (or in the admin group, see lite_join)
 * writes one line at a time to change them (-EPERM otherwise, -EINVAL for
 * a line that is not one of these); debugfs itself is open to root only
 * unless the administrator mounts it otherwise:
 *   limit default KEY=V ...              changes only the keys given
 *   limit uid U KEY=V ...                the user's own limits (those it
 *                                        has, else the defaults) with
 *                                        only the keys given changed
 *   limit uid U default                  the user follows the defaults
 *   limit node default remote_memory=V
 *   limit node N remote_memory=V
 *   limit node N default
 * A limit below what a user already holds refuses further charges only.
 */

/*
 * long lite_join(const char *cm_ip, unsigned int cm_port, unsigned int ib_port)
 *   Join the cluster whose manager listens on cm_ip:cm_port (dotted IPv4,
 *   NUL-terminated, at most LITE_MAX_IP_LEN bytes including the NUL) using
 *   port ib_port of the node's RDMA device. Returns the node id (>= 1).
 *   Membership belongs to the node and outlives the calling process.
 *   Joining and leaving need CAP_NET_ADMIN, or membership of the group
 *   set in /sys/kernel/debug/lite/admin_group (-EPERM, checked first);
 *   using LMRs, RPC and locks needs no privilege.
 *   The node and the manager authenticate each other with the cluster's
 *   secret, the payload of the "user" key "lite:cluster" in the caller's
 *   keyrings (e.g. keyctl padd user lite:cluster @u < FILE), and protect
 *   every frame between them: -ENOKEY no such key; -EKEYREJECTED the
 *   manager refused this node's secret, or proved no knowledge of it;
 *   -EINVAL an empty key or one longer than 256 bytes.
 *   -EISCONN already joined; -ENODEV no RDMA device or port;
 *   -ECONNREFUSED / -ETIMEDOUT the cluster manager cannot be reached;
 *   -EPROTO the cluster manager answered something unexpected;
 *   -EALREADY a join or leave is under way; -EADDRINUSE the manager
 *   still counts an earlier incarnation of this node (same port GID) as
 *   alive: try again once it declared that one dead; -EAGAIN the manager
 *   has just started and waits for the members of its cluster to come
 *   back: try again (after its dead-after time, 3 s by default).
 *   A node that left (or was cut off from the manager, see -EHOSTDOWN)
 *   may join again: it gets its id back as a new incarnation. Handles of
 *   the earlier membership are gone.
 *
 * long lite_leave(unsigned int flags)
 *   Leave the cluster gracefully. From the call on, new calls on this node
 *   get -ENOTCONN; calls under way finish. First every chunk this node
 *   holds for another node's LMR is moved to another node (not this one,
 *   not the owner, not a node that mapped the LMR) by the LMR's owner, so
 *   no data is lost; mappings of the LMR on other nodes pause meanwhile and
 *   follow the chunks; then
 *   everything this node's processes hold is released (their LMRs freed,
 *   mappings of them on other nodes revoked), and the cluster manager
 *   tells every other node, which then counts this node as gone
 *   (-EHOSTDOWN). Flags: LITE_LEAVE_FORCE leaves even if chunks could
 *   not move (their data is lost).
 *   -EPERM without CAP_NET_ADMIN (or the admin group); -ENOTCONN not a member; -EALREADY a join
 *   or leave is under way;
 *   -ENOSPC some chunk held for another node could not move (no other
 *   node could take it): the node stays a member; -EINVAL unknown
 *   flags.
 *
 * long lite_get_node_id(void)      -> this node's id
 * long lite_get_total_node(void)   -> number of nodes connected, self included
 *
 * long lite_alloc_remote(unsigned int node, __u64 size, unsigned int flags,
 *                        __u64 password)
 *   Allocate an LMR of size bytes on node (this node included) and return
 *   its handle (> 0). node == LITE_NODE_SPREAD spreads the chunks round
 *   robin over every other node. LMRs larger than LITE_CHUNK_SIZE are split
 *   into chunks. flags: LITE_ALLOC_ATOMIC (size must be 8). The handle
 *   has READ | WRITE | SHARE | ADMIN (| ATOMIC with LITE_ALLOC_ATOMIC).
 *   -EDQUOT the caller's remote_memory or lmrs quota, or a serving node's
 *   limit for this node, would be exceeded (see Quotas).
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
 *   -ERESTARTSYS / -EINTR if interrupted by a signal. Rounds follow the
 *   membership: -EHOSTDOWN if a member departed (died, was expelled or
 *   left) while the round was in progress; every node still waiting in
 *   that round, or entering it later, fails it the same way, and each
 *   node's next call is the next round for all of them, so calls stay
 *   paired with the same calls on the other nodes. -ETIMEDOUT if the
 *   cluster had fewer than num members for 60 s of the wait (members
 *   that are slow to arrive are waited for without limit).
 *
 * Memory-like operations (executed by the nodes that hold the bytes)
 *
 * long lite_remote_memset(__u64 handle, __u64 offset, __u64 size,
 *                         unsigned int byte)
 *   Set size bytes at offset to byte (0..255, else -EINVAL). Needs WRITE.
 *
 * long lite_memcpy(__u64 src_handle, __u64 src_offset, __u64 dst_handle,
 *                  __u64 dst_offset, __u64 size)
 * long lite_memmove(__u64 src_handle, __u64 src_offset, __u64 dst_handle,
 *                   __u64 dst_offset, __u64 size)
 *   Copy size bytes between LMRs (the same LMR or two different ones, on
 *   any nodes). Each part is copied by the node holding the source bytes,
 *   straight to the node holding the destination. lite_memmove is correct
 *   for overlapping ranges; lite_memcpy's result is unspecified for them.
 *   Source needs READ, destination WRITE.
 *
 * Sharing by name
 *
 * long lite_wrap_alloc(const void *data, __u64 size, __u64 name,
 *                      __u64 password)
 *   Create an LMR on this node holding a copy of data and publish it under
 *   name with READ | WRITE | SHARE. Returns its handle.
 *   -EEXIST name is already published on this node; -EDQUOT the caller's
 *   remote_memory, lmrs or names quota would be exceeded.
 *
 * long lite_add_ask_mr_table(__u64 name, __u64 handle, __u64 permission,
 *                            __u64 password)
 *   Publish the LMR behind handle under name on this node, granting at most
 *   permission (READ | WRITE | SHARE | ATOMIC; ADMIN is never granted).
 *   Needs SHARE and the handle's password. -EEXIST name already published;
 *   -EINVAL for other permission bits (ADMIN included) or a mapping's handle
 *   (only LMRs created on this node can be published); -EDQUOT the
 *   caller's names quota would be exceeded.
 *   The name goes away when the LMR is freed or deregistered.
 *
 * long lite_ask_lmr(unsigned int node, __u64 name, __u64 permission,
 *                   __u64 password)
 *   Map the LMR published under name on node (this node included) and
 *   return a new handle for it, with permission restricted to what the name
 *   grants and the LMR has; password must be the one the name was published
 *   with and becomes the new handle's password.
 *   -ENOENT no such name on node; -EACCES wrong password; -EPERM none of
 *   the requested permissions is granted; -EINVAL unknown permission bits;
 *   -EAGAIN the LMR's chunks are moving off a node that leaves (ask again).
 *
 * long lite_umap_lmr(__u64 handle)
 *   Drop a mapping made by lite_ask_lmr (also after it was revoked). The
 *   handle is gone afterwards. -EINVAL for a handle that is not a mapping
 *   (use lite_free or lite_deregister_lmr).
 *
 * Registering existing memory
 *
 * long lite_register_lmr(void *buf, __u64 size, __u64 permission,
 *                        __u64 password)
 *   Make size bytes of this process's memory at buf an LMR other nodes can
 *   map (after lite_add_ask_mr_table). The pages stay pinned until it is
 *   deregistered. permission (any of READ | WRITE | SHARE | ATOMIC) is what
 *   the LMR allows; the handle also gets ADMIN. At most
 *   LITE_MAX_REGISTER_SIZE bytes. -EFAULT if buf is not mapped writable;
 *   -EDQUOT the caller's pinned_memory or lmrs quota would be exceeded;
 *   -ENOMEM the pages would exceed RLIMIT_MEMLOCK (see Quotas).
 *
 * long lite_deregister_lmr(__u64 handle)
 *   Revoke the LMR: every mapping of it, on every node, fails with
 *   -EKEYREVOKED from then on; operations under way finish first. Then the
 *   pages are unpinned. Needs ADMIN. Also accepts allocated LMRs, for which
 *   it is lite_free.
 *
 * Asynchronous I/O
 *
 * long lite_rdma_write_async(__u64 handle, const void *buf, __u64 size,
 *                            __u64 offset, unsigned int priority,
 *                            __u64 password)
 * long lite_rdma_read_async(__u64 handle, void *buf, __u64 size,
 *                           __u64 offset, unsigned int priority,
 *                           __u64 password)
 *   Start a transfer and return its operation id (> 0) without waiting.
 *   Written data is taken from buf before the call returns. Read data is
 *   stored into buf when the completion is reaped by lite_async_wait or
 *   lite_fence, so buf must stay valid until then. At most
 *   LITE_MAX_ASYNC_OPS operations per process may be unreaped: a further
 *   call fails with -EAGAIN (reap some first). size at most
 *   LITE_MAX_ASYNC_SIZE. The transfer runs on LITE's I/O threads; handle
 *   errors are reported by this call, transfer errors (-EIO) by the reap.
 *   A revocation of the LMR waits for transfers already started.
 *
 * long lite_async_wait(__u64 op, unsigned int flags)
 *   Reap operation op: 0 if it succeeded (for an RPC call of
 *   lite_send_reply_imm_async, the reply's length), its negative errno if
 *   it failed: for a call, what lite_send_reply_imm would return
 *   (-ECONNREFUSED, -EMSGSIZE, -ECONNRESET, -EPROTO, -ETIMEDOUT,
 *   -EHOSTDOWN), or -EFAULT if the reply cannot be stored.
 *   The id is released either way. With LITE_ASYNC_NOWAIT, -EAGAIN if it
 *   has not completed yet (the id stays valid). -EINVAL unknown id or flags.
 *
 * long lite_fence(void)
 *   Wait for and reap every outstanding operation of the process. Returns
 *   0, or the error of the first failed operation (as lite_async_wait
 *   reports it).
 *
 * long lite_get_stats(struct lite_stats *stats, __u64 size)
 *   Copy min(size, sizeof(struct lite_stats)) bytes of this node's
 *   counters into stats; fields are only ever appended. -EINVAL if size is
 *   smaller than 8. Works before join (all counters 0).
 */

/*
 * RPC and messaging
 *
 * A server registers a port; clients on any node (this one included) send
 * it requests, each written by RDMA write-with-immediate into a ring the
 * server keeps for that (port, client node), and the reply is written
 * straight into the caller's reply buffer the same way. Any thread of any
 * process on the server's node may receive from a registered port; each
 * message is delivered to exactly one receiver, in arrival order per
 * client node. Nothing is dropped: a sender whose ring is full waits until
 * receivers have consumed enough of it.
 *
 * long lite_register_application(unsigned int port, __u64 max_size,
 *                                const char *name, __u64 name_len)
 *   Open port (< LITE_MAX_PORTS) for messages of at most max_size bytes
 *   (1..LITE_MAX_MESSAGE_SIZE); name (at most LITE_MAX_PORT_NAME bytes, no
 *   NUL needed) is informational. Returns 0. -EADDRINUSE the port is
 *   registered; -EDQUOT the caller's rpc_ports quota would be exceeded.
 *   The port is unregistered when the registering process exits.
 *
 * long lite_unregister_application(unsigned int port)
 *   Close port. Receivers blocked on it return -ESHUTDOWN; requests queued
 *   and not yet received are failed with -ECONNREFUSED to their callers;
 *   later sends get -ECONNREFUSED. The port can be registered again.
 *   -ENOENT not registered, -EPERM registered by another process.
 *
 * long lite_query_port(unsigned int node, unsigned int port)
 *   Connect to port on node and return its max_size. Optional: sends do it
 *   on first use. -ECONNREFUSED the port is not registered there.
 *
 * long lite_send_reply_imm(unsigned int node, unsigned int port_priority,
 *                          const void *msg, __u64 size, void *reply,
 *                          __u64 max_reply)
 *   Blocking RPC: send size bytes (at most the port's max_size) to port on
 *   node and wait for the reply, which is stored into reply. Returns the
 *   reply's length. port_priority is LITE_PORT_PRIORITY(port, priority).
 *   -ECONNREFUSED port not registered (or unregistered before the request
 *   was received), -EMSGSIZE size above the port's max_size, -ECONNRESET
 *   the receiving process exited without replying (callers whose requests
 *   were still queued or in flight get -ECONNREFUSED), -EPROTO the server
 *   found this node's ring for the port corrupt and discarded the request
 *   unread (never seen with correct nodes; the next call starts a clean
 *   ring), -ETIMEDOUT no reply within LITE_RPC_TIMEOUT_MS, -EINTR a signal
 *   arrived (the request may still be served; its reply is discarded).
 *   node may be this node.
 *
 * long lite_send_reply_imm_async(unsigned int node,
 *                                unsigned int port_priority,
 *                                const void *msg, __u64 size, void *reply,
 *                                __u64 max_reply)
 *   Post the same call without waiting for the reply and return an
 *   operation id (> 0), reaped like an asynchronous transfer:
 *   lite_async_wait returns the reply's length once the reply is in
 *   reply (which must stay valid until then), or the call's error as
 *   lite_send_reply_imm would; lite_fence reaps every call too. The
 *   message is taken from msg before the call returns. Errors found
 *   while posting (bad arguments, -ECONNREFUSED, -EMSGSIZE, -EINTR) are
 *   returned at once; -EAGAIN with LITE_MAX_ASYNC_OPS operations or
 *   LITE_MAX_ASYNC_CALLS calls of the process unreaped. A bad reply
 *   buffer is reported by the reap (-EFAULT). Calls not reaped when the
 *   process exits are abandoned (their replies discarded).
 *
 * long lite_send(unsigned int node, unsigned int port_priority,
 *                const void *msg, __u64 size)
 *   One-way message: returns 0 once the message is in the server's ring.
 *   Blocks while the ring is full; with LITE_SEND_NONBLOCK or'ed into
 *   port_priority, returns -EAGAIN instead. Errors as lite_send_reply_imm.
 *
 * long lite_receive_message(unsigned int port, void *buf, __u64 max_size,
 *                           __u64 *descriptor, unsigned int flags)
 *   Take the next message of port: its bytes go to buf, its length is
 *   returned, and *descriptor is set to the reply descriptor (0 for a
 *   one-way message). Blocks until a message arrives unless flags has
 *   LITE_RECV_NONBLOCK (then -EAGAIN when empty). -EMSGSIZE the next
 *   message is longer than max_size (it stays queued), -ENOENT port not
 *   registered, -ESHUTDOWN unregistered while waiting, -EINTR a signal.
 *   A descriptor belongs to the receiving process and is valid until
 *   answered; if the process exits first, its callers get -ECONNRESET.
 *
 * long lite_reply_message(const void *buf, __u64 size, __u64 descriptor)
 *   Answer a request. Returns 0. -ENOENT descriptor is not an unanswered
 *   descriptor of this process (already answered, another process's, or
 *   never issued), -EMSGSIZE size exceeds the caller's max_reply (the
 *   descriptor stays valid for a shorter reply).
 *
 * long lite_reply_and_receive_message(const void *buf, __u64 size,
 *                                     __u64 descriptor,
 *                                     struct lite_receive *next)
 *   lite_reply_message, then lite_receive_message with the arguments in
 *   next (next->descriptor receives the new descriptor). Returns the new
 *   message's length; if the reply fails, its error and nothing is
 *   received.
 *
 * long lite_send_reply_multicast(struct lite_multicast *call)
 *   Send the same request to call->count nodes (at most LITE_MAX_NODES)
 *   at once and wait for every reply: reply i (at most call->max_reply
 *   bytes) goes to call->replies + i * call->max_reply and its length (or
 *   negative errno) to call->lengths[i]. Returns the number of nodes that
 *   replied, or a negative errno if the arguments are invalid.
 */

/*
 * Synchronization
 *
 * long lite_fetch_add(__u64 handle, __u64 *old, __u64 value,
 *                     unsigned int priority)
 *   Atomically add value (modulo 2^64) to the 8-byte LMR behind handle and
 *   store the value it held before into *old. Returns 0.
 * long lite_compare_swp(__u64 handle, __u64 *old, __u64 expected,
 *                       __u64 new_value, unsigned int priority)
 *   Atomically replace the LMR's value with new_value if it equals
 *   expected; *old receives the value it held before either way (the swap
 *   happened if and only if *old == expected). Returns 0.
 *   Both are RDMA atomics run by the device of the node holding the LMR,
 *   also when that is this node (a peer posts them for it), so they are
 *   atomic with respect to each other from every node; they are not
 *   ordered with lite_rdma_write to the same LMR. The handle needs ATOMIC.
 *   -EHOSTUNREACH for an LMR on this node while no peer is connected.
 *   -EINVAL the LMR is not exactly 8 bytes at an 8-byte aligned address
 *   (allocate it with LITE_ALLOC_ATOMIC), -EPERM no ATOMIC permission.
 *   As in the original LITE, atomics do not check a password.
 *
 * long lite_create_lock(unsigned int home, struct lite_lock *lock)
 *   Create a distributed lock kept by node home (this node included) and
 *   return its number; *lock is filled in. Locks live as long as the home
 *   node is in the cluster; at most LITE_MAX_LOCKS per home node (-ENOSPC);
 *   -EDQUOT the caller's locks quota would be exceeded.
 * long lite_ask_lock(unsigned int home, unsigned int number,
 *                    struct lite_lock *lock)
 *   Fill in *lock for an existing lock. -ENOENT no such lock on home.
 * long lite_lock(const struct lite_lock *lock)
 *   Acquire the lock. Callers on all nodes get it in the order they asked
 *   (FIFO). An uncontended acquire is one RDMA compare-and-swap; waiters
 *   sleep until the home node hands them the lock. The holder is the
 *   calling thread. -ENOENT unknown lock, -EDEADLK the thread already holds
 *   it, -EINTR a signal arrived while waiting (the caller's turn is passed
 *   on to the next waiter when it comes), -EHOSTDOWN the home node is gone,
 *   -EAGAIN the lock changed hands too often meanwhile (try again).
 *   -EOWNERDEAD: the lock IS acquired, but the previous holder's node died
 *   or left while holding it, so what it protects may be inconsistent (as
 *   with robust mutexes). The next waiter gets it within the failure
 *   detection bound; with nobody waiting, the next caller is told.
 *   Unlock it as usual.
 * long lite_unlock(const struct lite_lock *lock)
 *   Release the lock. -ENOENT unknown lock, -EPERM the calling thread
 *   does not hold it.
 *   Locks still held when their process exits are released.
 *
 * Priorities and QoS
 *
 * Data operations (read, write, their asynchronous forms, atomics) and RPC
 * sends carry a priority: LITE_PRIORITY_HIGH, LITE_PRIORITY_LOW, or
 * LITE_PRIORITY_NONE, which stands for the process's default.
 *
 * long lite_set_priority(unsigned int priority)
 *   Set the calling process's default priority (initially
 *   LITE_PRIORITY_NONE, which is neither throttled nor protected) and
 *   return the previous default.
 *
 * While high-priority operations run on a node, its low-priority
 * operations wait before they start (traffic prioritization). Parameters,
 * in /sys/kernel/debug/lite/ (debugfs), settable at run time by a task
 * with CAP_NET_ADMIN or in the admin group (others get -EPERM):
 *   qos_enabled       1 (default) or 0
 *   qos_window_us     a low-priority operation waits while a high-priority
 *                     operation is in flight or ended less than this long
 *                     ago (default 500)
 *   qos_delay_us      how long it sleeps before looking again (default 5000)
 *   qos_max_delay_us  the longest it waits in all, so low-priority work is
 *                     slowed but never starved (default 200000)
 * /sys/kernel/debug/lite/stats shows the node's counters as text: per
 * operation type and priority the operations, bytes, errors, time spent
 * throttled and a latency histogram, plus LMRs, mappings, connections,
 * RPC ports, locks and lock waits.
 *
 * For testing how callers learn of a corrupt RPC ring, writing a node id
 * to /sys/kernel/debug/lite/rpc_fault_next (write-only; 0 disarms) makes
 * the next request this node posts to that node carry a header whose
 * length disagrees with its bytes: the server breaks the ring, and the
 * calls whose requests it discarded return -EPROTO.
 */

/**
 * struct lite_lock - a distributed lock
 * @home: the node that keeps it
 * @number: its number there
 *
 * Filled in by lite_create_lock() and lite_ask_lock(); given to lite_lock()
 * and lite_unlock().
 */
struct lite_lock {
	__u32 home;
	__u32 number;
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

/*
 * LITE-DSM: shared memory across nodes
 *
 * long lite_dsm_open(unsigned int node, __u64 name, __u64 size,
 *                    unsigned int flags, __u64 password)
 *   Return a file descriptor (O_CLOEXEC) of region name, which the node
 *   numbered node keeps, to mmap() with MAP_SHARED (a private mapping:
 *   -EINVAL) at page offsets within the region. With LITE_DSM_CREATE the
 *   region is created if it does not exist: node must be the caller's node
 *   and size (rounded up to pages, at most LITE_MAX_LMR_SIZE) is its size.
 *   Opening an existing region takes size 0 or its size, and its password.
 *   Every process of a node that opens a region shares the node's copies
 *   of its pages.
 *   -ENOTCONN before a join; -EINVAL unknown flags, a bad size, a node id
 *   of 0 or 64 or more, or creation on another node; -ENOENT no such
 *   region; -EACCES a wrong password; -EEXIST an LMR of the node is
 *   published under the name; -EDQUOT creating it would exceed the
 *   caller's remote_memory, lmrs or names quota (a region counts as an LMR
 *   of its size published under a name), or its memory is beyond a serving
 *   node's limit; -EHOSTDOWN the node is gone.
 *
 * Each page has one writer or any number of readers: a read fault fetches
 * the page from its home with an RDMA read, a write fault first makes every
 * other node give up its copy, the writer's written back. Every access sees
 * the last write of the page, so accesses ordered by lite_lock() /
 * lite_unlock() or lite_dist_barrier() see each other's writes: no call is
 * needed to acquire or release. A region's memory is an LMR of its node,
 * spread over the cluster and published under its name; it is freed once
 * no node has the region open. lite_leave() first writes back the pages
 * the node changed; its descriptors of regions stay open, but accesses
 * through them raise SIGBUS. An access to a page lost with its home, its
 * writer or the region's node raises SIGBUS.
 */
#define LITE_DSM_CREATE		0x1u

/**
 * struct lite_receive - the receive half of lite_reply_and_receive_message()
 * @buf: where the message goes (a user pointer)
 * @max_size: room at @buf
 * @descriptor: out: the new message's descriptor
 * @port: the port to receive from
 * @flags: 0 or %LITE_RECV_NONBLOCK
 *
 * The arguments of lite_receive_message(), with the descriptor stored into
 * the structure.
 */
struct lite_receive {
	__u64 buf;
	__u64 max_size;
	__u64 descriptor;
	__u32 port;
	__u32 flags;
};

/**
 * struct lite_multicast - the arguments of lite_send_reply_multicast()
 * @nodes: a user pointer to const __u32[@count]: the target node ids
 * @lengths: a user pointer to __s64[@count], out: each reply's length or
 *	-errno
 * @msg: a user pointer to the request
 * @size: its length
 * @replies: a user pointer to @count * @max_reply bytes, out: reply i at
 *	@replies + i * @max_reply
 * @max_reply: room per reply
 * @count: the number of target nodes, 1 to %LITE_MAX_NODES
 * @port_priority: LITE_PORT_PRIORITY(port, priority)
 */
struct lite_multicast {
	__u64 nodes;
	__u64 lengths;
	__u64 msg;
	__u64 size;
	__u64 replies;
	__u64 max_reply;
	__u32 count;
	__u32 port_priority;
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

/**
 * struct lite_stats - node counters returned by lite_get_stats()
 * @lmrs: LMRs created on this node and not released
 * @registrations: of which registered user memory
 * @mappings: mappings made by lite_ask_lmr()
 * @published_names: names published on this node
 * @held_chunks: chunks this node holds, for any node
 * @handles: handles open in all processes
 * @processes: processes holding LITE handles or operations
 * @async_in_flight: asynchronous operations not yet reaped
 * @connections: RC connections (queue pairs) to peers
 * @rpc_ports: RPC ports registered on this node
 * @locks: distributed locks kept by this node
 * @lock_acquires: lite_lock() calls that acquired here
 * @lock_waits: of which waited for another holder
 * @atomics: fetch-add and compare-swap issued here
 * @qos_throttled: low-priority operations that waited
 *
 * Fields are only ever appended.
 */
struct lite_stats {
	__u64 lmrs;
	__u64 registrations;
	__u64 mappings;
	__u64 published_names;
	__u64 held_chunks;
	__u64 handles;
	__u64 processes;
	__u64 async_in_flight;
	__u64 connections;
	__u64 rpc_ports;
	__u64 locks;
	__u64 lock_acquires;
	__u64 lock_waits;
	__u64 atomics;
	__u64 qos_throttled;
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
