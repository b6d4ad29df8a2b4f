/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LITE kernel API: remote memory (LMRs) and synchronisation over RDMA for
 * kernel code. The names and argument order follow the original LITE.
 *
 * Every function returns a non-negative value on success or a negative
 * errno; see include/uapi/linux/lite.h for the error codes. Buffers are
 * kernel memory. All functions may sleep.
 *
 * Handles of kernel callers are shared by all kernel code; those of each
 * process are its own and released when it exits.
 */
#ifndef _RDMA_LITE_API_H
#define _RDMA_LITE_API_H

#include <linux/types.h>
#include <uapi/linux/lite.h>

/**
 * liteapi_establish_conn() - join a LITE cluster
 * @server_ip: the cluster manager's IPv4 address, a NUL-terminated dotted
 *	string
 * @eth_port: the TCP port the cluster manager listens on, 1 to 65535
 *	(%LITE_CM_DEFAULT_PORT unless configured otherwise)
 * @ib_port: the port of the RDMA device to use, or 0 for the first active
 *	one
 *
 * The RDMA device is chosen as for lite_join(): the one LITE's ``device``
 * module parameter names, else the first with a usable port. The node and
 * the manager authenticate each other with the cluster secret, the payload
 * of the "user" key "lite:cluster", looked up in the calling task's
 * keyrings as request_key(2) searches them. Unlike lite_join(), no
 * capability is checked. Membership belongs to the node: it lasts until
 * liteapi_leave() or lite_leave(), whoever joined. A node that left, or was
 * cut off from the manager, joins again as a new incarnation of its id.
 *
 * Context: Process context. Sleeps while it talks to the cluster manager.
 * Return:
 * * the node id (>= 1) - on success.
 * * %-EINVAL - @server_ip is %NULL or not a dotted IPv4 address, @eth_port
 *   is outside 1 to 65535, @ib_port is negative, or the cluster secret is
 *   empty or longer than 256 bytes.
 * * %-EISCONN - the node is a member already.
 * * %-EALREADY - a join or leave is under way.
 * * %-ENODEV - no RDMA device or no usable port.
 * * %-ENOKEY - the caller's keyrings hold no cluster secret.
 * * %-EKEYREJECTED - the manager refused this node's secret, or proved no
 *   knowledge of it.
 * * %-ECONNREFUSED, %-ETIMEDOUT - the cluster manager cannot be reached.
 * * %-EPROTO - the cluster manager answered something unexpected.
 * * %-EADDRINUSE - the manager still counts an earlier incarnation of this
 *   node as alive; try again once it declared that one dead.
 * * %-EAGAIN - the manager has just started and waits for the members of
 *   its cluster to come back; try again.
 * * %-ENOMEM - out of memory.
 */
int liteapi_establish_conn(const char *server_ip, int eth_port, int ib_port);

/**
 * liteapi_get_node_id() - this node's id in the cluster
 *
 * Context: Process context. May sleep.
 * Return: the node id (>= 1), or %-ENOTCONN if the node is not a member of
 * a cluster.
 */
int liteapi_get_node_id(void);

/**
 * liteapi_get_total_node() - number of nodes of the cluster this node knows
 *
 * Context: Process context. May sleep.
 * Return: the number of nodes this node is connected to, itself included,
 * or %-ENOTCONN if the node is not a member of a cluster.
 */
int liteapi_get_total_node(void);

/**
 * liteapi_num_connected_nodes() - number of peers this node is connected to
 *
 * The original LITE's count of live connections: liteapi_get_total_node()
 * without this node.
 *
 * Context: Process context. May sleep.
 * Return: the number of connected peers, or %-ENOTCONN if the node is not a
 * member of a cluster.
 */
int liteapi_num_connected_nodes(void);

/**
 * liteapi_alloc_remote_mem() - allocate an LMR
 * @node: the node to hold the memory (this node included), or
 *	%LITE_NODE_SPREAD to spread the chunks round robin over every other
 *	node (over this node if it is alone)
 * @size: the LMR's size in bytes, 1 to %LITE_MAX_LMR_SIZE; exactly 8 with
 *	%LITE_ALLOC_ATOMIC
 * @flags: 0 or %LITE_ALLOC_ATOMIC
 * @password: the new handle's password, to present to every data operation
 *
 * LMRs larger than %LITE_CHUNK_SIZE are split into chunks. The owner handle
 * has READ, WRITE, SHARE and ADMIN, and ATOMIC with %LITE_ALLOC_ATOMIC. The
 * LMR is charged to no user's quota, but the limit each serving node sets
 * on what this node's LMRs may hold on it applies. It lasts until
 * liteapi_free() or until the node leaves the cluster.
 *
 * Context: Process context. Sleeps while the serving nodes allocate.
 * Return:
 * * the owner handle (above 2^32) - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - bad @size, @flags or @node.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - a serving node was declared dead.
 * * %-EDQUOT - a serving node's limit for this node would be exceeded.
 * * %-ENOMEM - a serving node, or this one, is out of memory.
 */
long liteapi_alloc_remote_mem(unsigned int node, u64 size, unsigned int flags,
			      u64 password);

/**
 * liteapi_rdma_write_offset() - write into an LMR
 * @lh: the LMR's handle; needs WRITE
 * @buf: the bytes to write; may be %NULL if @size is 0
 * @size: the number of bytes; 0 transfers nothing
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 * @offset: where in the LMR to write
 * @password: the handle's password
 *
 * Writes @size bytes of @buf into the LMR at @offset and waits until they
 * are there. Note the argument order: @priority comes before @offset,
 * unlike in lite_rdma_write().
 *
 * Context: Process context. Sleeps until the transfer is complete.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @buf is %NULL and @size is not 0.
 * * %-EINVAL - @offset + @size overflows or goes beyond the LMR, or bad
 *   @priority.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EACCES - @password is not the handle's password.
 * * %-EPERM - the handle lacks WRITE.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-EHOSTDOWN - a node holding the bytes was declared dead.
 * * %-EIO - the RDMA operation completed with an error.
 */
int liteapi_rdma_write_offset(u64 lh, const void *buf, u64 size,
			      unsigned int priority, u64 offset, u64 password);

/**
 * liteapi_rdma_read_offset() - read from an LMR
 * @lh: the LMR's handle; needs READ
 * @buf: where the bytes go; may be %NULL if @size is 0
 * @size: the number of bytes; 0 transfers nothing
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 * @offset: where in the LMR to read
 * @password: the handle's password
 *
 * Reads @size bytes of the LMR at @offset into @buf, which is zeroed over
 * its whole size first. Note the argument order: @priority comes before
 * @offset, unlike in lite_rdma_read().
 *
 * Context: Process context. Sleeps until the transfer is complete.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @buf is %NULL and @size is not 0.
 * * %-EINVAL - @offset + @size overflows or goes beyond the LMR, or bad
 *   @priority.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EACCES - @password is not the handle's password.
 * * %-EPERM - the handle lacks READ.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-EHOSTDOWN - a node holding the bytes was declared dead.
 * * %-EIO - the RDMA operation completed with an error.
 */
int liteapi_rdma_read_offset(u64 lh, void *buf, u64 size,
			     unsigned int priority, u64 offset, u64 password);

/**
 * liteapi_rdma_write() - write at the start of an LMR, without a password
 * @lh: the LMR's handle; needs WRITE
 * @buf: the bytes to write; may be %NULL if @size is 0
 * @size: the number of bytes; 0 transfers nothing
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 *
 * liteapi_rdma_write_offset() at offset 0 with the handle's own password:
 * as in the original LITE, no password is checked, only the handle's
 * permission.
 *
 * Context: Process context. Sleeps until the transfer is complete.
 * Return: as liteapi_rdma_write_offset(), without %-EACCES.
 */
int liteapi_rdma_write(u64 lh, const void *buf, u64 size,
		       unsigned int priority);

/**
 * liteapi_rdma_read() - read from the start of an LMR, without a password
 * @lh: the LMR's handle; needs READ
 * @buf: where the bytes go; may be %NULL if @size is 0
 * @size: the number of bytes; 0 transfers nothing
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 *
 * liteapi_rdma_read_offset() at offset 0 with the handle's own password:
 * as in the original LITE, no password is checked, only the handle's
 * permission.
 *
 * Context: Process context. Sleeps until the transfer is complete.
 * Return: as liteapi_rdma_read_offset(), without %-EACCES.
 */
int liteapi_rdma_read(u64 lh, void *buf, u64 size, unsigned int priority);

/**
 * liteapi_free() - free an LMR
 * @lh: the LMR's owner handle; needs ADMIN
 *
 * Releases the LMR and the memory behind it on every node holding a chunk
 * of it. Every mapping of it, on every node, is revoked first (they fail
 * with %-EKEYREVOKED from then on) and its names are withdrawn; operations
 * under way finish. For memory registered with
 * liteapi_register_lmr_with_virt_addr(), the caller gets its memory back.
 *
 * Context: Process context. Sleeps while the mappers confirm the
 * revocation.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EPERM - the handle lacks ADMIN (a mapping's handle).
 * * %-ETIMEDOUT - for registered memory only: a node that mapped it did not
 *   confirm the revocation. The handle is gone, but that node may still
 *   write the memory, so the caller must keep it allocated for good.
 */
int liteapi_free(u64 lh);

/**
 * liteapi_deregister_mr() - free an LMR (the original LITE's name)
 * @lh: the LMR's owner handle; needs ADMIN
 *
 * The same function as liteapi_free(), under the name the original LITE
 * gave it for registered memory.
 *
 * Context: Process context. Sleeps while the mappers confirm the
 * revocation.
 * Return: as liteapi_free().
 */
int liteapi_deregister_mr(u64 lh);

/**
 * liteapi_remote_memset() - set bytes of an LMR
 * @lh: the LMR's handle; needs WRITE
 * @offset: the first byte to set
 * @size: the number of bytes to set
 * @byte: the value, 0 to 255
 *
 * Executed by the nodes holding the bytes. As in lite_remote_memset(), no
 * password is checked.
 *
 * Context: Process context. Sleeps until the nodes holding the bytes are
 * done.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @byte is outside 0 to 255, or @offset + @size overflows or
 *   goes beyond the LMR.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EPERM - the handle lacks WRITE.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-EHOSTDOWN - a node holding the bytes was declared dead.
 * * %-EIO - the operation failed on a node holding the bytes.
 */
int liteapi_remote_memset(u64 lh, u64 offset, u64 size, int byte);

/**
 * liteapi_rdma_mr_memcpy() - copy bytes between LMRs
 * @src_lh: the source LMR's handle; needs READ
 * @src_offset: where in the source to start
 * @dst_lh: the destination LMR's handle (may be @src_lh); needs WRITE
 * @dst_offset: where in the destination to start
 * @size: the number of bytes to copy
 *
 * Each part is copied by the node holding its source bytes, straight to the
 * node holding the destination. The result is unspecified for overlapping
 * ranges: use liteapi_rdma_mr_memmov() for them. No password is checked.
 *
 * Context: Process context. Sleeps until the copy is complete.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - an offset + @size overflows or goes beyond its LMR.
 * * %-EBADF - a handle is not one of kernel callers.
 * * %-EPERM - @src_lh lacks READ or @dst_lh lacks WRITE.
 * * %-EKEYREVOKED - the LMR behind a mapping was freed by its owner.
 * * %-EHOSTDOWN - a node holding the bytes was declared dead.
 * * %-EIO - the copy failed on a node doing it.
 */
int liteapi_rdma_mr_memcpy(u64 src_lh, u64 src_offset, u64 dst_lh,
			   u64 dst_offset, u64 size);

/**
 * liteapi_rdma_mr_memmov() - copy bytes between LMRs, ranges may overlap
 * @src_lh: the source LMR's handle; needs READ
 * @src_offset: where in the source to start
 * @dst_lh: the destination LMR's handle (may be @src_lh); needs WRITE
 * @dst_offset: where in the destination to start
 * @size: the number of bytes to copy
 *
 * As liteapi_rdma_mr_memcpy(), correct for overlapping ranges.
 *
 * Context: Process context. Sleeps until the copy is complete.
 * Return: as liteapi_rdma_mr_memcpy().
 */
int liteapi_rdma_mr_memmov(u64 src_lh, u64 src_offset, u64 dst_lh,
			   u64 dst_offset, u64 size);

/**
 * liteapi_wrapup_alloc_for_remote_access() - create and publish an LMR
 * @data: the bytes the LMR starts with
 * @size: the LMR's size, and the number of bytes of @data
 * @identifier: the name to publish the LMR under on this node
 * @password: the handle's password, and the one liteapi_ask_mr() and
 *	lite_ask_lmr() must give for @identifier
 *
 * Creates an LMR on this node holding a copy of @size bytes of @data and
 * publishes it under @identifier, granting READ, WRITE and SHARE, as
 * lite_wrap_alloc() does. Nothing is charged to a quota.
 *
 * Context: Process context. May sleep.
 * Return:
 * * the owner handle (above 2^32) - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @data is %NULL and @size is not 0.
 * * %-EINVAL - bad @size.
 * * %-EEXIST - @identifier is already published on this node.
 * * %-ENOMEM - out of memory.
 */
long liteapi_wrapup_alloc_for_remote_access(const void *data, u64 size,
					    u64 identifier, u64 password);

/**
 * liteapi_add_askmr_table() - publish an LMR under a name
 * @identifier: the name, unique on this node
 * @lh: the owner handle of an LMR created on this node; needs SHARE
 * @permission: the most a mapping gets: any of %LITE_PERM_READ,
 *	%LITE_PERM_WRITE, %LITE_PERM_SHARE and %LITE_PERM_ATOMIC
 * @password: the handle's password, which liteapi_ask_mr() and
 *	lite_ask_lmr() must give for @identifier
 *
 * The name goes away when the LMR is freed. Nothing is charged to a quota.
 *
 * Context: Process context. May sleep.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - bits in @permission beyond those above (ADMIN included), a
 *   mapping's handle, or an LMR too large to publish.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EACCES - @password is not the handle's password.
 * * %-EPERM - the handle lacks SHARE.
 * * %-EEXIST - @identifier is already published on this node.
 * * %-ENOMEM - out of memory.
 */
int liteapi_add_askmr_table(u64 identifier, u64 lh, u64 permission,
			    u64 password);

/**
 * liteapi_ask_mr() - map an LMR published under a name
 * @owner: the node the name is published on (this node included)
 * @identifier: the name
 * @permission: the permissions wanted (%LITE_PERM_*), restricted to what
 *	the name grants and the LMR has
 * @password: the password the name was published with; it becomes the new
 *	handle's password
 *
 * Context: Process context. Sleeps while @owner answers.
 * Return:
 * * a new mapping handle (above 2^32) - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - unknown bits in @permission, or a bad @owner.
 * * %-EHOSTUNREACH - @owner is not a member of the cluster.
 * * %-EHOSTDOWN - @owner was declared dead.
 * * %-ENOENT - no such name on @owner.
 * * %-EACCES - wrong @password.
 * * %-EPERM - none of the permissions asked for is granted.
 * * %-EKEYREVOKED - the LMR was freed while being mapped.
 * * %-EAGAIN - the LMR's chunks are moving off a node that leaves; ask
 *   again.
 * * %-EPROTO - @owner answered something unexpected.
 * * %-ENOMEM - out of memory.
 */
long liteapi_ask_mr(unsigned int owner, u64 identifier, u64 permission,
		    u64 password);

/**
 * liteapi_umap_lmr() - drop a mapping
 * @lh: a handle returned by liteapi_ask_mr()
 *
 * Also accepted after the mapping was revoked. The handle is gone
 * afterwards.
 *
 * Context: Process context. May sleep.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EINVAL - @lh is not a mapping (use liteapi_free()).
 */
int liteapi_umap_lmr(u64 lh);

/**
 * liteapi_rdma_asywrite_offset() - start a write into an LMR
 * @lh: the LMR's handle; needs WRITE
 * @buf: the bytes to write, copied before the call returns; may be %NULL
 *	if @size is 0
 * @size: the number of bytes, at most %LITE_MAX_ASYNC_SIZE
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 * @offset: where in the LMR to write
 * @password: the handle's password
 *
 * Queues the transfer for LITE's I/O threads and returns its operation id,
 * to reap with liteapi_rdma_asywait() or liteapi_rdma_asyfence(). Kernel
 * callers share one set of operations: at most %LITE_MAX_ASYNC_OPS of them
 * are unreaped at a time.
 *
 * Context: Process context. May sleep.
 * Return:
 * * the operation id (above 2^32) - the transfer is queued; its own errors
 *   (such as %-EIO) are returned by the reap.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @buf is %NULL and @size is not 0.
 * * %-EINVAL - @size above %LITE_MAX_ASYNC_SIZE, @offset + @size overflows
 *   or goes beyond the LMR, or bad @priority.
 * * %-EAGAIN - %LITE_MAX_ASYNC_OPS operations of kernel callers are
 *   unreaped.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EACCES - @password is not the handle's password.
 * * %-EPERM - the handle lacks WRITE.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-ENOMEM - out of memory.
 */
long liteapi_rdma_asywrite_offset(u64 lh, const void *buf, u64 size,
				  unsigned int priority, u64 offset,
				  u64 password);

/**
 * liteapi_rdma_asyread_offset() - start a read from an LMR
 * @lh: the LMR's handle; needs READ
 * @buf: where the bytes go; may be %NULL if @size is 0
 * @size: the number of bytes, at most %LITE_MAX_ASYNC_SIZE
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 * @offset: where in the LMR to read
 * @password: the handle's password
 *
 * Queues the transfer for LITE's I/O threads and returns its operation id.
 * The bytes reach @buf when the operation is reaped, by
 * liteapi_rdma_asywait() on the id or by liteapi_rdma_asyfence() called by
 * any kernel caller, so @buf must stay valid, and untouched by the caller,
 * until then; if the call fails, @buf is not used after it returns. At most
 * %LITE_MAX_ASYNC_OPS operations of kernel callers are unreaped at a time.
 *
 * Context: Process context. May sleep.
 * Return:
 * * the operation id (above 2^32) - the transfer is queued; its own errors
 *   (such as %-EIO) are returned by the reap.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @buf is %NULL and @size is not 0.
 * * %-EINVAL - @size above %LITE_MAX_ASYNC_SIZE, @offset + @size overflows
 *   or goes beyond the LMR, or bad @priority.
 * * %-EAGAIN - %LITE_MAX_ASYNC_OPS operations of kernel callers are
 *   unreaped.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EACCES - @password is not the handle's password.
 * * %-EPERM - the handle lacks READ.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-ENOMEM - out of memory.
 */
long liteapi_rdma_asyread_offset(u64 lh, void *buf, u64 size,
				 unsigned int priority, u64 offset, u64 password);

/**
 * liteapi_rdma_asywait() - reap an asynchronous operation
 * @op: an operation id of a kernel caller: of a transfer or of
 *	liteapi_send_reply_imm_async()
 * @flags: 0 to wait for the operation, or %LITE_ASYNC_NOWAIT
 *
 * Waits until the operation has finished and reaps it: its id is released,
 * and for a read or a call the data is in the caller's buffer. Any kernel
 * caller may reap any operation of kernel callers.
 *
 * Context: Process context. Sleeps until the operation has finished, unless
 * @flags has %LITE_ASYNC_NOWAIT.
 * Return:
 * * 0 - a transfer succeeded.
 * * the reply's length - a call succeeded.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - unknown @op (never issued, or reaped already) or @flags.
 * * %-EAGAIN - with %LITE_ASYNC_NOWAIT, the operation has not finished; it
 *   stays to be reaped.
 * * %-ERESTARTSYS - a signal arrived while waiting; the operation stays to
 *   be reaped.
 * * the operation's error - for a transfer as liteapi_rdma_write_offset()
 *   or liteapi_rdma_read_offset() would return it (such as %-EIO), for a
 *   call as liteapi_send_reply_imm() would. The id is released.
 */
int liteapi_rdma_asywait(u64 op, unsigned int flags);

/**
 * liteapi_rdma_asyfence() - reap every asynchronous operation
 *
 * Waits for and reaps every outstanding operation of every kernel caller,
 * transfers and calls alike.
 *
 * Context: Process context. Sleeps until the operations have finished.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-ERESTARTSYS - a signal arrived while waiting; the operations not yet
 *   reaped stay.
 * * the first error among the operations, as liteapi_rdma_asywait() reports
 *   it.
 */
int liteapi_rdma_asyfence(void);

/**
 * liteapi_register_lmr_with_virt_addr() - make kernel memory an LMR
 * @addr: the memory: directly mapped (kmalloc(), the page allocator) or
 *	vmalloc() memory
 * @size: its size in bytes, 1 to %LITE_MAX_REGISTER_SIZE
 * @permission: what the LMR allows: any of %LITE_PERM_READ,
 *	%LITE_PERM_WRITE, %LITE_PERM_SHARE and %LITE_PERM_ATOMIC; the owner
 *	handle also gets ADMIN
 * @password: the handle's password
 *
 * Makes the memory an LMR held by this node, which other nodes can map
 * once it is published with liteapi_add_askmr_table(). LITE neither pins
 * nor references the pages: they must stay allocated (and vmalloc memory
 * mapped to the same pages) until liteapi_deregister_mr() on the handle
 * returns 0. Every page the range touches is reachable by other nodes in
 * whole, so it must hold nothing but the LMR's bytes: use page-aligned
 * allocations. Nothing is charged to a quota.
 *
 * Context: Process context. May sleep.
 * Return:
 * * the owner handle (above 2^32) - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @size is 0 or above %LITE_MAX_REGISTER_SIZE, bad bits in
 *   @permission, a range that wraps, or memory that is neither directly
 *   mapped nor in the vmalloc area.
 * * %-EFAULT - @addr is %NULL.
 * * %-ENOMEM - out of memory.
 */
long liteapi_register_lmr_with_virt_addr(void *addr, u64 size, u64 permission,
					 u64 password);

/*
 * RPC for kernel callers, with the semantics of the system calls of the
 * same names (see <uapi/linux/lite.h>). Ports registered here belong to
 * kernel callers; descriptors are shared by all kernel callers.
 */

/**
 * liteapi_register_application() - open an RPC port for kernel callers
 * @port: the port, below %LITE_MAX_PORTS
 * @max_size: the largest message the port takes, 1 to
 *	%LITE_MAX_MESSAGE_SIZE bytes
 * @name: an informational name, no NUL needed; may be %NULL if @name_len
 *	is 0
 * @name_len: the name's length, at most %LITE_MAX_PORT_NAME
 *
 * The port belongs to kernel callers: any of them may receive from it and
 * unregister it. It stays registered until liteapi_unregister_application()
 * or until the node leaves the cluster. Nothing is charged to a quota.
 *
 * Context: Process context. May sleep.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @name is %NULL and @name_len is not 0.
 * * %-EINVAL - bad @port, @max_size or @name_len.
 * * %-EADDRINUSE - the port is registered already.
 * * %-ENOMEM - out of memory.
 */
int liteapi_register_application(unsigned int port, u64 max_size,
				 const char *name, u64 name_len);

/**
 * liteapi_unregister_application() - close an RPC port of kernel callers
 * @port: the port
 *
 * Receivers blocked on the port return %-ESHUTDOWN; requests queued and
 * not yet received fail with %-ECONNREFUSED, as do later sends. The port
 * can be registered again.
 *
 * Context: Process context. May sleep.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @port is not below %LITE_MAX_PORTS.
 * * %-ENOENT - the port is not registered.
 * * %-EPERM - a user process registered the port.
 */
int liteapi_unregister_application(unsigned int port);

/**
 * liteapi_query_port() - learn the largest message size of a port
 * @node: the server node (this node included)
 * @port: the port
 *
 * Connects to @port on @node. Optional: sends do it on first use.
 *
 * Context: Process context. Sleeps while @node answers.
 * Return:
 * * the port's largest message size - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @port is not below %LITE_MAX_PORTS.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 * * %-ECONNREFUSED - the port is not registered on @node.
 */
long liteapi_query_port(unsigned int node, unsigned int port);

/**
 * liteapi_send_reply_imm() - call an RPC port and wait for the reply
 * @node: the server node (this node included)
 * @port_priority: LITE_PORT_PRIORITY(port, priority), or'ed with
 *	%LITE_SEND_NONBLOCK to fail rather than wait for room in the server's
 *	ring
 * @msg: the request
 * @size: the request's length, 1 to the port's largest message size
 * @reply: where the reply goes; zeroed over @max_reply bytes first
 * @max_reply: the room at @reply
 *
 * Unlike lite_send_reply_imm(), accepts %LITE_SEND_NONBLOCK.
 *
 * Context: Process context. Sleeps until the reply arrives, for at most
 * %LITE_RPC_TIMEOUT_MS.
 * Return:
 * * the reply's length - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @msg or @reply is %NULL with a non-zero size.
 * * %-EINVAL - a bad port, priority or unknown bits in @port_priority, or
 *   @size is 0 or above %LITE_MAX_MESSAGE_SIZE.
 * * %-EAGAIN - with %LITE_SEND_NONBLOCK, the server's ring is full.
 * * %-ECONNREFUSED - the port is not registered, or was unregistered before
 *   the request was received.
 * * %-EMSGSIZE - @size is above the port's largest message size.
 * * %-ECONNRESET - the receiver's process exited without replying.
 * * %-EPROTO - the server found this node's ring corrupt and discarded the
 *   request unread.
 * * %-ETIMEDOUT - no reply within %LITE_RPC_TIMEOUT_MS.
 * * %-EINTR - a signal arrived; the request may still be served, its reply
 *   is discarded.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 */
long liteapi_send_reply_imm(unsigned int node, unsigned int port_priority,
			    const void *msg, u64 size, void *reply,
			    u64 max_reply);

/**
 * liteapi_send() - send a one-way message to an RPC port
 * @node: the server node (this node included)
 * @port_priority: LITE_PORT_PRIORITY(port, priority), or'ed with
 *	%LITE_SEND_NONBLOCK to fail rather than wait for room in the server's
 *	ring
 * @msg: the message
 * @size: the message's length, 1 to the port's largest message size
 *
 * The receiver gets descriptor 0 for it and does not answer.
 *
 * Context: Process context. Sleeps while the server's ring is full, unless
 * @port_priority has %LITE_SEND_NONBLOCK.
 * Return:
 * * 0 - the message is in the server's ring.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @msg is %NULL and @size is not 0.
 * * %-EINVAL - a bad port, priority or unknown bits in @port_priority, or
 *   @size is 0 or above %LITE_MAX_MESSAGE_SIZE.
 * * %-EAGAIN - with %LITE_SEND_NONBLOCK, the server's ring is full.
 * * %-ECONNREFUSED - the port is not registered.
 * * %-EMSGSIZE - @size is above the port's largest message size.
 * * %-EINTR - a signal arrived while waiting for room.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 */
int liteapi_send(unsigned int node, unsigned int port_priority,
		 const void *msg, u64 size);

/**
 * liteapi_send_reply_imm_async() - post an RPC call
 * @node: the server node (this node included)
 * @port_priority: LITE_PORT_PRIORITY(port, priority); %LITE_SEND_NONBLOCK
 *	is refused
 * @msg: the request, taken before the call returns
 * @size: the request's length, 1 to the port's largest message size
 * @reply: where the reply goes
 * @max_reply: the room at @reply
 *
 * Posts the call and returns its operation id without waiting for the
 * reply. liteapi_rdma_asywait() on the id, or liteapi_rdma_asyfence(),
 * stores the reply into @reply, which must stay valid until then, and
 * returns its length or the call's error as liteapi_send_reply_imm() would.
 * If the call fails, @reply is not used after it returns.
 *
 * Context: Process context. May sleep while the request is posted.
 * Return:
 * * the operation id (above 2^32) - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @msg or @reply is %NULL with a non-zero size.
 * * %-EINVAL - a bad port, priority or unknown bits in @port_priority,
 *   %LITE_SEND_NONBLOCK, or @size is 0 or above %LITE_MAX_MESSAGE_SIZE.
 * * %-EAGAIN - %LITE_MAX_ASYNC_OPS operations or %LITE_MAX_ASYNC_CALLS
 *   calls of kernel callers are unreaped.
 * * %-ECONNREFUSED - the port is not registered.
 * * %-EMSGSIZE - @size is above the port's largest message size.
 * * %-EINTR - a signal arrived while posting.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 */
long liteapi_send_reply_imm_async(unsigned int node,
				  unsigned int port_priority, const void *msg,
				  u64 size, void *reply, u64 max_reply);

/**
 * liteapi_receive_message() - take the next message of an RPC port
 * @port: a registered port of this node, whoever registered it
 * @buf: where the message goes; zeroed over @max_size bytes first
 * @max_size: the room at @buf
 * @descriptor: where the message's reply descriptor is stored (0 for a
 *	one-way message)
 * @flags: 0 to wait for a message, or %LITE_RECV_NONBLOCK
 *
 * The descriptor is shared by all kernel callers and valid until answered
 * with liteapi_reply_message().
 *
 * Context: Process context. Sleeps until a message arrives, unless @flags
 * has %LITE_RECV_NONBLOCK.
 * Return:
 * * the message's length - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @descriptor is %NULL, or @buf is %NULL and @max_size is not
 *   0.
 * * %-EINVAL - bad @port or @flags.
 * * %-ENOENT - the port is not registered.
 * * %-EAGAIN - with %LITE_RECV_NONBLOCK, no message is queued.
 * * %-EMSGSIZE - the next message is longer than @max_size; it stays
 *   queued.
 * * %-ESHUTDOWN - the port was unregistered while waiting.
 * * %-EINTR - a signal arrived while waiting.
 */
long liteapi_receive_message(unsigned int port, void *buf, u64 max_size,
			     u64 *descriptor, unsigned int flags);

/**
 * liteapi_reply_message() - answer an RPC request
 * @buf: the reply
 * @size: the reply's length, at most the caller's room for it
 * @descriptor: a descriptor from liteapi_receive_message(), not yet
 *	answered
 *
 * Context: Process context. May sleep.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @buf is %NULL and @size is not 0.
 * * %-ENOENT - @descriptor is not an unanswered descriptor of kernel
 *   callers.
 * * %-EMSGSIZE - @size exceeds the caller's room; the descriptor stays valid
 *   for a shorter reply.
 * * %-EHOSTUNREACH, %-EHOSTDOWN - the caller's node is gone.
 * * %-EIO - the reply could not be written.
 */
int liteapi_reply_message(const void *buf, u64 size, u64 descriptor);

/**
 * liteapi_reply_and_receive_message() - answer a request, then receive the
 *	next one
 * @buf: the reply
 * @size: the reply's length, at most the caller's room for it
 * @descriptor: the descriptor of the request to answer
 * @port: the port to receive the next message from
 * @recv_buf: where the next message goes; zeroed over @max_size first
 * @max_size: room at @recv_buf
 * @recv_descriptor: out: the next message's descriptor
 *
 * liteapi_reply_message(), then a waiting liteapi_receive_message(), in one
 * call, as a server loop makes them. Nothing is received if the reply
 * fails.
 *
 * Context: Process context. Sleeps until a message arrives.
 * Return:
 * * the next message's length - on success.
 * * %-EFAULT - @recv_descriptor is %NULL (checked before replying), or a
 *   buffer is %NULL with a non-zero size.
 * * otherwise the errors of liteapi_reply_message(), then those of
 *   liteapi_receive_message().
 */
long liteapi_reply_and_receive_message(const void *buf, u64 size,
				       u64 descriptor, unsigned int port,
				       void *recv_buf, u64 max_size,
				       u64 *recv_descriptor);

/**
 * liteapi_send_reply_imm_multicast() - call an RPC port on several nodes
 * @count: the number of nodes, 1 to %LITE_MAX_NODES
 * @nodes: the @count server nodes
 * @port_priority: LITE_PORT_PRIORITY(port, priority), or'ed with
 *	%LITE_SEND_NONBLOCK to fail the calls to nodes whose ring is full
 *	(with %-EAGAIN in their @lengths entries) rather than wait
 * @msg: the request, sent to every node
 * @size: the request's length, 1 to the port's largest message size
 * @replies: room for @count replies of @max_reply bytes each; zeroed first
 * @max_reply: the room per reply
 * @lengths: @count entries, each set to the length of its node's reply or
 *	to a negative errno
 *
 * Sends the request to every node at once and waits for every reply: reply
 * i goes to @replies + i * @max_reply and its length, or the error of that
 * call as liteapi_send_reply_imm() would return it, to entry i of @lengths.
 *
 * Context: Process context. Sleeps until every node has answered or failed.
 * Return:
 * * the number of nodes that replied - the arguments are valid; the
 *   errors of each call are in @lengths.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @count is 0 or above %LITE_MAX_NODES, @count * @max_reply
 *   overflows, a bad port, priority or unknown bits in @port_priority, or
 *   @size is 0 or above %LITE_MAX_MESSAGE_SIZE.
 * * %-EFAULT - @nodes or @lengths is %NULL, or @msg or @replies is %NULL
 *   with a non-zero size.
 * * %-ENOMEM - out of memory.
 */
int liteapi_send_reply_imm_multicast(unsigned int count,
				     const unsigned int *nodes,
				     unsigned int port_priority,
				     const void *msg, u64 size, void *replies,
				     u64 max_reply, s64 *lengths);

/*
 * Kernel messages to handlers, the original LITE's messaging family. Each
 * kind of handler (send, send-reply, send-reply-opt, atomic send, atomic
 * single send) has one handler per node, registered by any kernel caller.
 * A message travels as an RPC call to a port of the handler's kind, above
 * the applications' ports, so it has the calls' flow control (a sender waits for room; nothing is
 * dropped), QoS priorities and quotas. Handlers run one at a time per
 * kind, in process context, in a kernel thread of LITE's with no lock held:
 * they may sleep and call LITE, and must return holding no lock (lockdep
 * and might_sleep() check both). Handlers last until they are unregistered
 * or the node leaves the cluster.
 */

/* The largest reply of a send-reply handler: liteapi_send_reply()'s room. */
#define LITE_KMSG_MAX_REPLY	4096

/* What a send-reply-opt handler returns to answer later. */
#define LITE_KMSG_REPLY_LATER	1

/**
 * typedef lite_send_handler_t - handler of one-way kernel messages
 * @msg: the message; the handler may change it, until it returns
 * @size: its length
 * @sender_id: the sending node
 *
 * Return: 0, or a negative errno (logged by nobody: one-way messages have
 * no caller to tell).
 */
typedef int (*lite_send_handler_t)(char *msg, u32 size, int sender_id);

/**
 * typedef lite_send_reply_handler_t - handler of kernel calls
 * @msg: the request; the handler may change it, until it returns
 * @size: its length
 * @reply: room for %LITE_KMSG_MAX_REPLY bytes of reply
 * @reply_size: out: the reply's length (0 when the handler starts)
 * @sender_id: the calling node
 *
 * Return: 0 to send @reply_size bytes of @reply, or a negative errno, which
 * the caller's liteapi_send_reply() returns.
 */
typedef int (*lite_send_reply_handler_t)(char *msg, u32 size, char *reply,
					 u32 *reply_size, int sender_id);

/**
 * typedef lite_send_reply_opt_handler_t - handler of kernel calls that
 *	answers from its own memory, at once or later
 * @msg: the request; the handler may change it, until it returns
 * @size: its length
 * @reply: out: the address of the reply, which stays the handler's and must
 *	stay valid until the handler's next call (%NULL when it starts)
 * @reply_size: out: the reply's length, at most %LITE_MAX_MESSAGE_SIZE
 * @sender_id: the calling node
 *
 * To answer later, the handler takes the call with liteapi_defer_reply()
 * and answers it with liteapi_reply_message().
 *
 * Return: 0 to send the reply, %LITE_KMSG_REPLY_LATER after
 * liteapi_defer_reply(), or a negative errno, which the caller's
 * liteapi_send_reply_opt() returns.
 */
typedef int (*lite_send_reply_opt_handler_t)(char *msg, u32 size,
					     void **reply, u32 *reply_size,
					     int sender_id);

/**
 * liteapi_reg_send_handler() - register the handler of one-way messages
 * @handler: the handler, or %NULL to unregister it
 *
 * Registering replaces the handler registered before. Unregistering fails
 * the messages not yet handled with %-ECONNREFUSED at nobody (one-way
 * messages have no caller) and waits for the handler in flight: no call of
 * it starts or runs once this returns. A module that goes with handlers
 * registered (unloaded, or its init failed) has them unregistered by LITE
 * before its memory is freed.
 *
 * Context: Process context. Unregistering sleeps until the handler in
 * flight returns.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-ENOENT - unregistering: no handler is registered.
 * * %-EDEADLK - unregistering from the handler itself.
 * * %-EBUSY - the handler is being unregistered by another caller.
 * * %-EDQUOT, %-ENOMEM - out of the node's ports or memory.
 */
int liteapi_reg_send_handler(lite_send_handler_t handler);

/**
 * liteapi_reg_send_reply_handler() - register the handler of kernel calls
 * @handler: the handler, or %NULL to unregister it
 *
 * As liteapi_reg_send_handler(); calls not yet handled when it is
 * unregistered fail with %-ECONNREFUSED.
 *
 * Context: Process context. Unregistering sleeps until the handler in
 * flight returns.
 * Return: as liteapi_reg_send_handler().
 */
int liteapi_reg_send_reply_handler(lite_send_reply_handler_t handler);

/**
 * liteapi_reg_send_reply_opt_handler() - register the handler of kernel
 *	calls that answers from its own memory, at once or later
 * @handler: the handler, or %NULL to unregister it
 *
 * As liteapi_reg_send_reply_handler(). Calls deferred with
 * liteapi_defer_reply() stay answerable after unregistering.
 *
 * Context: Process context. Unregistering sleeps until the handler in
 * flight returns.
 * Return: as liteapi_reg_send_handler().
 */
int liteapi_reg_send_reply_opt_handler(lite_send_reply_opt_handler_t handler);

/**
 * liteapi_defer_reply() - keep the call being handled for a later answer
 *
 * Called by a send-reply-opt or send-reply handler, which then returns
 * %LITE_KMSG_REPLY_LATER (opt) or 0 without a reply; the call is answered
 * with liteapi_reply_message() on the descriptor returned, by any kernel
 * caller, within the caller's %LITE_RPC_TIMEOUT_MS.
 *
 * Context: Inside a handler.
 * Return:
 * * the call's descriptor - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - not called from a handler of calls, or the call was answered
 *   or deferred already.
 */
s64 liteapi_defer_reply(void);

/**
 * liteapi_send_message() - send a one-way message to a node's send handler
 * @node: the node (this node included)
 * @addr: the message
 * @size: its length, 1 to %LITE_MAX_MESSAGE_SIZE
 *
 * Returns once the message is in the node's ring, waiting for room there
 * while the handler is behind; messages from one sender are handled in
 * order.
 *
 * Context: Process context. May sleep while the node's ring is full.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @addr is %NULL.
 * * %-EINVAL - bad @node or @size.
 * * %-ECONNREFUSED - @node has no send handler.
 * * %-EINTR - a signal arrived while waiting for room.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 */
int liteapi_send_message(int node, const void *addr, int size);

/**
 * liteapi_send_message_priority() - liteapi_send_message() at a priority
 * @node: the node
 * @addr: the message
 * @size: its length
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or 0 for the kernel
 *	callers' default (liteapi_set_priority())
 *
 * Context: Process context. May sleep, also for QoS admission.
 * Return: as liteapi_send_message(); %-EINVAL also for a bad @priority.
 */
int liteapi_send_message_priority(int node, const void *addr, int size,
				  int priority);

/**
 * liteapi_send_message_UD() - liteapi_send_message() with a datagram's
 *	promise
 * @node: the node
 * @addr: the message
 * @size: its length
 * @type: the original's message type: must be 0
 *
 * The original sent these over an unreliable datagram queue pair. Here they
 * travel as liteapi_send_message() does, so they are never lost; callers
 * must still expect no reply and no order with their other messages.
 *
 * Context: Process context. May sleep while the node's ring is full.
 * Return: as liteapi_send_message(); %-EINVAL also for a non-zero @type.
 */
int liteapi_send_message_UD(int node, const void *addr, int size, int type);

/**
 * liteapi_send_reply() - call a node's send-reply handler
 * @node: the node (this node included)
 * @msg: the request
 * @size: its length, 1 to %LITE_MAX_MESSAGE_SIZE
 * @ack_msg: room for %LITE_KMSG_MAX_REPLY bytes of reply
 *
 * Context: Process context. Sleeps until the reply arrives, for at most
 * %LITE_RPC_TIMEOUT_MS.
 * Return:
 * * the reply's length - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EFAULT - @msg or @ack_msg is %NULL.
 * * %-EINVAL - bad @node or @size.
 * * %-ECONNREFUSED - @node has no send-reply handler, or it was unregistered
 *   before handling the call.
 * * %-ECONNRESET - the handler returned without a reply or a deferral.
 * * %-EMSGSIZE - the handler's reply is longer than %LITE_KMSG_MAX_REPLY.
 * * %-ETIMEDOUT - no reply within %LITE_RPC_TIMEOUT_MS.
 * * %-EINTR - a signal arrived; the reply is discarded.
 * * %-EHOSTUNREACH - @node is not a member of the cluster.
 * * %-EHOSTDOWN - @node was declared dead.
 * * the negative errno the handler returned.
 */
int liteapi_send_reply(int node, const void *msg, int size, void *ack_msg);

/**
 * liteapi_send_reply_UD() - liteapi_send_reply() under the original's
 *	datagram name
 * @node: the node
 * @msg: the request
 * @size: its length
 * @output: room for %LITE_KMSG_MAX_REPLY bytes of reply
 *
 * The original retransmitted these over an unreliable datagram queue pair;
 * here they travel, and are answered, as liteapi_send_reply() calls.
 *
 * Context: Process context. Sleeps until the reply arrives.
 * Return: as liteapi_send_reply().
 */
int liteapi_send_reply_UD(int node, const void *msg, int size, void *output);

/**
 * liteapi_send_reply_opt() - call a node's send-reply-opt handler
 * @node: the node (this node included)
 * @msg: the request
 * @size: its length, 1 to %LITE_MAX_MESSAGE_SIZE
 * @output: out: the reply, in a buffer of LITE's that the caller frees
 *	with liteapi_free_recv_buf(); %NULL for an empty reply
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or 0 for the kernel
 *	callers' default
 *
 * Context: Process context. Sleeps until the reply arrives, for at most
 * %LITE_RPC_TIMEOUT_MS.
 * Return: the reply's length, or the errors of liteapi_send_reply()
 * (%-EMSGSIZE above %LITE_MAX_MESSAGE_SIZE), %-EFAULT also for a %NULL
 * @output, %-EINVAL also for a bad @priority.
 */
int liteapi_send_reply_opt(int node, const void *msg, int size, void **output,
			   int priority);

/**
 * liteapi_free_recv_buf() - free a reply of liteapi_send_reply_opt()
 * @buf: the reply buffer, or %NULL
 *
 * The original's function did nothing; here the buffer is LITE's until
 * freed.
 *
 * Context: Any context kvfree() may run in.
 */
void liteapi_free_recv_buf(void *buf);

/**
 * struct atomic_struct - one piece of an atomic kernel message
 * @vaddr: the piece's bytes
 * @len: their length
 *
 * The pieces of a liteapi_atomic_send() travel as one message: the handler
 * gets all of them, in order, or none, and no other message comes between
 * them.
 */
struct atomic_struct {
	void *vaddr;
	size_t len;
};

/**
 * typedef lite_atomic_send_handler_t - handler of atomic kernel calls
 * @input_list: the pieces, pointing into the message; the handler may
 *	change their bytes, until it returns
 * @length: their number
 * @output_buf: room for %LITE_KMSG_MAX_REPLY bytes of reply
 * @output_size: out: the reply's length (0 when the handler starts)
 * @sender_id: the calling node
 *
 * Return: as &typedef lite_send_reply_handler_t.
 */
typedef int (*lite_atomic_send_handler_t)(struct atomic_struct *input_list,
					  u32 length, char *output_buf,
					  u32 *output_size, int sender_id);

/**
 * typedef lite_atomic_single_send_handler_t - handler of one-way atomic
 *	kernel messages
 * @input_list: the pieces, pointing into the message
 * @length: their number
 * @sender_id: the sending node
 *
 * Return: as &typedef lite_send_handler_t.
 */
typedef int (*lite_atomic_single_send_handler_t)(struct atomic_struct *input_list,
						 u32 length, int sender_id);

/**
 * liteapi_reg_atomic_send_handler() - register the handler of atomic
 *	kernel calls
 * @handler: the handler, or %NULL to unregister it
 *
 * As liteapi_reg_send_reply_handler().
 *
 * Context: Process context. Unregistering sleeps until the handler in
 * flight returns.
 * Return: as liteapi_reg_send_handler().
 */
int liteapi_reg_atomic_send_handler(lite_atomic_send_handler_t handler);

/**
 * liteapi_reg_atomic_single_send_handler() - register the handler of
 *	one-way atomic kernel messages
 * @handler: the handler, or %NULL to unregister it
 *
 * As liteapi_reg_send_handler().
 *
 * Context: Process context. Unregistering sleeps until the handler in
 * flight returns.
 * Return: as liteapi_reg_send_handler().
 */
int liteapi_reg_atomic_single_send_handler(lite_atomic_single_send_handler_t handler);

/**
 * liteapi_atomic_send() - call a node's atomic send handler with pieces
 *	gathered into one message
 * @node: the node (this node included)
 * @input_list: the pieces; empty pieces are allowed
 * @length: their number, at least 1; the pieces and a 4-byte length for
 *	each, plus 4, must fit %LITE_MAX_MESSAGE_SIZE
 * @output_msg: room for %LITE_KMSG_MAX_REPLY bytes of reply
 *
 * The original LITE received these messages but exported no function to
 * send them; this one has the original's sender's name and arguments.
 *
 * Context: Process context. Sleeps until the reply arrives, for at most
 * %LITE_RPC_TIMEOUT_MS.
 * Return: the reply's length, or the errors of liteapi_send_reply();
 * %-EFAULT also for a %NULL @input_list or piece, %-EINVAL also for a bad
 * @length, %-EBADMSG if the message reached the handler malformed.
 */
int liteapi_atomic_send(int node, const struct atomic_struct *input_list,
			int length, void *output_msg);

/**
 * liteapi_atomic_single_send() - send pieces gathered into one one-way
 *	message to a node's atomic single-send handler
 * @node: the node (this node included)
 * @input_list: the pieces
 * @length: their number, as for liteapi_atomic_send()
 *
 * Context: Process context. May sleep while the node's ring is full.
 * Return: as liteapi_send_message(); %-EFAULT also for a %NULL @input_list
 * or piece, %-EINVAL also for a bad @length.
 */
int liteapi_atomic_single_send(int node, const struct atomic_struct *input_list,
			       int length);

/**
 * liteapi_dist_barrier() - wait for other nodes at a barrier
 * @num: the number of nodes to wait for, this one included
 *
 * Waits until @num nodes have entered the same barrier round, as
 * lite_dist_barrier(). Rounds are numbered per node and shared by every
 * caller on it.
 *
 * Context: Process context. Sleeps until @num nodes have arrived, without a
 * limit while the cluster has @num members.
 * Return:
 * * 0 - on success.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EINVAL - @num is 0 or above %LITE_MAX_NODES.
 * * %-ERESTARTSYS - a signal arrived while waiting.
 * * %-EHOSTDOWN - a member departed while the round was in progress; every
 *   node in that round fails it the same way.
 * * %-ETIMEDOUT - the cluster had fewer than @num members for 60 s of the
 *   wait.
 */
int liteapi_dist_barrier(unsigned int num);

/*
 * Synchronization for kernel callers, with the semantics of the system
 * calls lite_fetch_add, lite_compare_swp, lite_create_lock, lite_ask_lock,
 * lite_lock and lite_unlock (see <uapi/linux/lite.h>). The holder of a lock
 * is the calling kernel thread.
 */

/**
 * liteapi_rdma_fetch_and_add() - atomically add to an 8-byte LMR
 * @lh: the LMR's handle; needs ATOMIC
 * @out: where the value the LMR held before is stored
 * @value: what to add, modulo 2^64
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 *
 * An RDMA atomic run by the device of the node holding the LMR, atomic with
 * respect to the atomics of every node; not ordered with writes to the same
 * LMR. As in the original LITE, no password is checked.
 *
 * Context: Process context. Sleeps until the operation is complete.
 * Return:
 * * 0 - on success.
 * * %-EINVAL - @out is %NULL, the LMR is not exactly 8 bytes at an 8-byte
 *   aligned address (allocate it with %LITE_ALLOC_ATOMIC), or bad
 *   @priority.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EBADF - @lh is not a handle of kernel callers.
 * * %-EPERM - the handle lacks ATOMIC.
 * * %-EKEYREVOKED - the LMR behind the mapping @lh was freed by its owner.
 * * %-EHOSTUNREACH - the LMR is on this node while no peer is connected.
 * * %-EHOSTDOWN - the node holding the LMR was declared dead.
 * * %-EIO - the RDMA operation completed with an error.
 */
int liteapi_rdma_fetch_and_add(u64 lh, u64 *out, u64 value,
			       unsigned int priority);

/**
 * liteapi_rdma_compare_and_swp() - atomically compare and swap an 8-byte LMR
 * @lh: the LMR's handle; needs ATOMIC
 * @out: where the value the LMR held before is stored, swapped or not
 * @expected: the value the LMR must hold for the swap
 * @new_value: the value it then gets
 * @priority: %LITE_PRIORITY_HIGH, %LITE_PRIORITY_LOW, or
 *	%LITE_PRIORITY_NONE for the kernel callers' default
 *
 * The swap happened if and only if the value stored into @out equals
 * @expected. Otherwise as liteapi_rdma_fetch_and_add().
 *
 * Context: Process context. Sleeps until the operation is complete.
 * Return: as liteapi_rdma_fetch_and_add().
 */
int liteapi_rdma_compare_and_swp(u64 lh, u64 *out, u64 expected,
				 u64 new_value, unsigned int priority);

/**
 * liteapi_create_lock() - create a distributed lock
 * @home: the node to keep the lock (this node included)
 * @lock: filled in with the new lock
 *
 * The lock lives as long as @home is a member of the cluster. Nothing is
 * charged to a quota.
 *
 * Context: Process context. Sleeps while @home answers.
 * Return:
 * * the lock's number on @home (which may be 0) - on success.
 * * %-EINVAL - @lock is %NULL.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EHOSTUNREACH - @home is not a member of the cluster.
 * * %-ENOSPC - @home keeps %LITE_MAX_LOCKS locks already.
 * * %-ETIMEDOUT - @home did not answer.
 * * %-ENOMEM - out of memory.
 */
int liteapi_create_lock(unsigned int home, struct lite_lock *lock);

/**
 * liteapi_ask_lock() - find an existing distributed lock
 * @home: the node keeping the lock
 * @number: the lock's number on @home
 * @lock: filled in with the lock
 *
 * Context: Process context. Sleeps while @home answers.
 * Return:
 * * 0 - on success.
 * * %-EINVAL - @lock is %NULL.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-ENOENT - @home keeps no such lock.
 * * %-EHOSTUNREACH - @home is not a member of the cluster.
 * * %-ETIMEDOUT - @home did not answer.
 */
int liteapi_ask_lock(unsigned int home, unsigned int number,
		     struct lite_lock *lock);

/**
 * liteapi_lock() - acquire a distributed lock
 * @lock: the lock, as liteapi_create_lock() or liteapi_ask_lock() filled it
 *	in
 *
 * Acquires the lock for the calling thread; callers on all nodes get it in
 * the order they asked. Only the same thread can release it.
 *
 * Context: Process context. Sleeps until the lock is handed over.
 * Return:
 * * 0 - the lock is held.
 * * %-EOWNERDEAD - the lock *is* held, but the previous holder's node died
 *   or left holding it: what it protects may be inconsistent. Unlock it as
 *   usual.
 * * %-EINVAL - @lock is %NULL.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-ENOENT - unknown lock.
 * * %-EDEADLK - the calling thread holds the lock already.
 * * %-EINTR - a signal arrived while waiting; the caller's turn is passed on
 *   to the next waiter when it comes.
 * * %-EAGAIN - the lock changed hands too often meanwhile; try again.
 * * %-EHOSTUNREACH - the lock's home is not a member of the cluster.
 * * %-EHOSTDOWN - the lock's home is gone.
 * * %-EIO - an RDMA operation completed with an error.
 */
int liteapi_lock(const struct lite_lock *lock);

/**
 * liteapi_unlock() - release a distributed lock
 * @lock: the lock, held by the calling thread
 *
 * Context: Process context. Sleeps while the lock is handed over.
 * Return:
 * * 0 - on success.
 * * %-EINVAL - @lock is %NULL.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-ENOENT - unknown lock.
 * * %-EPERM - the calling thread does not hold the lock.
 * * %-EHOSTUNREACH - the lock's home is not a member of the cluster.
 * * %-EHOSTDOWN - the lock's home is gone.
 * * %-EIO - an RDMA operation completed with an error.
 */
int liteapi_unlock(const struct lite_lock *lock);

/**
 * liteapi_set_priority() - set the default priority of kernel callers
 * @priority: %LITE_PRIORITY_NONE, %LITE_PRIORITY_HIGH or %LITE_PRIORITY_LOW
 *
 * The default applies to the calls of every kernel caller that pass
 * %LITE_PRIORITY_NONE. Initially %LITE_PRIORITY_NONE, which is neither
 * throttled nor protected.
 *
 * Context: Process context. May sleep.
 * Return:
 * * the previous default - on success.
 * * %-EINVAL - unknown @priority.
 * * %-ENOTCONN - the node is not a member of a cluster.
 */
int liteapi_set_priority(unsigned int priority);

/**
 * liteapi_leave() - leave the cluster gracefully
 * @flags: 0, or %LITE_LEAVE_FORCE to leave even if chunks held for other
 *	nodes could not move (their data is lost)
 *
 * As lite_leave(), without its capability check: new calls on this node
 * get %-ENOTCONN from then on, chunks this node holds for other nodes' LMRs
 * move to other nodes, then everything every process and kernel caller of
 * the node holds is released and the other nodes are told.
 *
 * Context: Process context. Sleeps while the chunks move.
 * Return:
 * * 0 - on success.
 * * %-EINVAL - unknown @flags.
 * * %-ENOTCONN - the node is not a member of a cluster.
 * * %-EALREADY - a join or leave is under way.
 * * %-ENOSPC - without %LITE_LEAVE_FORCE, a chunk held for another node
 *   could not move (or the error that stopped the move); the node stays a
 *   member.
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

/*
 * Helpers of LITE's Rust code that call into ib_core and crypto, and read
 * its module parameter (lite_helpers.c).
 */
struct ib_mr;
void lite_device_param(char *buf, size_t len);
int lite_map_mr(struct ib_mr *mr, const u64 *dma, u32 count, u32 len,
		u32 page_size, u64 iova);
int lite_hmac_sha256(const u8 *key, unsigned int keylen, const u8 *data,
		     unsigned int len, u8 *out);

/* The pieces of atomic kernel messages (lite_helpers.c). */
struct atomic_struct *lite_atomic_pieces(u32 count);
void lite_atomic_piece(const struct atomic_struct *list, u32 i, void **vaddr,
		       size_t *len);
void lite_set_atomic_piece(struct atomic_struct *list, u32 i, void *vaddr,
			   size_t len);

/* Modules going with kernel message handlers registered (lite_helpers.c). */
struct module;
int lite_watch_modules(void);
void lite_unwatch_modules(void);
bool lite_within_module(unsigned long addr, const struct module *mod);
void lite_rs_module_going(const struct module *mod);

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

/* LITE-DSM's region files and mappings (lite_dsm.c) and their backends. */
struct file;
struct page;
long lite_rs_dsm_open(unsigned int node, u64 name, u64 size,
		      unsigned int flags, u64 password);
int lite_rs_dsm_fault(void *region, unsigned long index, bool write,
		      struct page **page);
int lite_rs_dsm_page_mkwrite(void *region, unsigned long index,
			     struct page *page);
int lite_rs_dsm_mmap(void *region, unsigned long first, unsigned long pages);
void lite_rs_dsm_release(void *region);
int lite_dsm_anchor_create(struct file **anchor);
int lite_dsm_install_fd(struct file *anchor, void *private);
void lite_dsm_zap(struct file *anchor, unsigned long index);
void lite_dsm_lock_page(struct page *page);
void lite_dsm_unlock_page(struct page *page);
void lite_dsm_get_page(struct page *page);

#endif /* _RDMA_LITE_API_H */
