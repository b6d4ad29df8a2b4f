// SPDX-License-Identifier: GPL-2.0
/*
 * LITE system call entry points.
 *
 * SYSCALL_DEFINE generates the pt_regs wrappers and syscall metadata, so the
 * entry points are C; each forwards its arguments unchanged to LITE's Rust
 * API unit, which validates them and returns a value or a negative errno.
 */

#include <linux/syscalls.h>
#include <rdma/lite_api.h>

SYSCALL_DEFINE3(lite_join, const char __user *, cm_ip, unsigned int, cm_port,
		unsigned int, ib_port)
{
	return lite_rs_join((unsigned long)cm_ip, cm_port, ib_port);
}

SYSCALL_DEFINE0(lite_get_node_id)
{
	return lite_rs_get_node_id();
}

SYSCALL_DEFINE0(lite_get_total_node)
{
	return lite_rs_get_total_node();
}

SYSCALL_DEFINE4(lite_alloc_remote, unsigned int, node, u64, size,
		unsigned int, flags, u64, password)
{
	return lite_rs_alloc_remote(node, size, flags, password);
}

SYSCALL_DEFINE6(lite_rdma_write, u64, handle, const void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return lite_rs_rdma_write(handle, (unsigned long)buf, size, offset,
				  priority, password);
}

SYSCALL_DEFINE6(lite_rdma_read, u64, handle, void __user *, buf, u64, size,
		u64, offset, unsigned int, priority, u64, password)
{
	return lite_rs_rdma_read(handle, (unsigned long)buf, size, offset,
				 priority, password);
}

SYSCALL_DEFINE1(lite_free, u64, handle)
{
	return lite_rs_free(handle);
}

SYSCALL_DEFINE1(lite_dist_barrier, unsigned int, num)
{
	return lite_rs_dist_barrier(num);
}

SYSCALL_DEFINE4(lite_remote_memset, u64, handle, u64, offset, u64, size,
		unsigned int, byte)
{
	return lite_rs_remote_memset(handle, offset, size, byte);
}

SYSCALL_DEFINE5(lite_memcpy, u64, src_handle, u64, src_offset, u64, dst_handle,
		u64, dst_offset, u64, size)
{
	return lite_rs_memcpy(src_handle, src_offset, dst_handle, dst_offset,
			      size);
}

SYSCALL_DEFINE5(lite_memmove, u64, src_handle, u64, src_offset,
		u64, dst_handle, u64, dst_offset, u64, size)
{
	return lite_rs_memmove(src_handle, src_offset, dst_handle, dst_offset,
			       size);
}

SYSCALL_DEFINE4(lite_wrap_alloc, const void __user *, data, u64, size,
		u64, name, u64, password)
{
	return lite_rs_wrap_alloc((unsigned long)data, size, name, password);
}

SYSCALL_DEFINE4(lite_add_ask_mr_table, u64, name, u64, handle, u64, permission,
		u64, password)
{
	return lite_rs_add_ask_mr_table(name, handle, permission, password);
}

SYSCALL_DEFINE4(lite_ask_lmr, unsigned int, node, u64, name, u64, permission,
		u64, password)
{
	return lite_rs_ask_lmr(node, name, permission, password);
}

SYSCALL_DEFINE1(lite_umap_lmr, u64, handle)
{
	return lite_rs_umap_lmr(handle);
}

SYSCALL_DEFINE4(lite_register_lmr, void __user *, buf, u64, size,
		u64, permission, u64, password)
{
	return lite_rs_register_lmr((unsigned long)buf, size, permission,
				    password);
}

SYSCALL_DEFINE1(lite_deregister_lmr, u64, handle)
{
	return lite_rs_deregister_lmr(handle);
}

SYSCALL_DEFINE6(lite_rdma_write_async, u64, handle, const void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return lite_rs_rdma_write_async(handle, (unsigned long)buf, size, offset,
					priority, password);
}

SYSCALL_DEFINE6(lite_rdma_read_async, u64, handle, void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return lite_rs_rdma_read_async(handle, (unsigned long)buf, size, offset,
				       priority, password);
}

SYSCALL_DEFINE2(lite_async_wait, u64, op, unsigned int, flags)
{
	return lite_rs_async_wait(op, flags);
}

SYSCALL_DEFINE0(lite_fence)
{
	return lite_rs_fence();
}

SYSCALL_DEFINE2(lite_get_stats, struct lite_stats __user *, stats, u64, size)
{
	return lite_rs_get_stats((unsigned long)stats, size);
}

SYSCALL_DEFINE4(lite_register_application, unsigned int, port, u64, max_size,
		const char __user *, name, u64, name_len)
{
	return lite_rs_register_application(port, max_size, (unsigned long)name,
					    name_len);
}

SYSCALL_DEFINE1(lite_unregister_application, unsigned int, port)
{
	return lite_rs_unregister_application(port);
}

SYSCALL_DEFINE2(lite_query_port, unsigned int, node, unsigned int, port)
{
	return lite_rs_query_port(node, port);
}

SYSCALL_DEFINE6(lite_send_reply_imm, unsigned int, node,
		unsigned int, port_priority, const void __user *, msg, u64, size,
		void __user *, reply, u64, max_reply)
{
	return lite_rs_send_reply_imm(node, port_priority, (unsigned long)msg,
				      size, (unsigned long)reply, max_reply);
}

SYSCALL_DEFINE6(lite_send_reply_imm_async, unsigned int, node,
		unsigned int, port_priority, const void __user *, msg, u64, size,
		void __user *, reply, u64, max_reply)
{
	return lite_rs_send_reply_imm_async(node, port_priority,
					    (unsigned long)msg, size,
					    (unsigned long)reply, max_reply);
}

SYSCALL_DEFINE4(lite_send, unsigned int, node, unsigned int, port_priority,
		const void __user *, msg, u64, size)
{
	return lite_rs_send(node, port_priority, (unsigned long)msg, size);
}

SYSCALL_DEFINE5(lite_receive_message, unsigned int, port, void __user *, buf,
		u64, max_size, u64 __user *, descriptor, unsigned int, flags)
{
	return lite_rs_receive_message(port, (unsigned long)buf, max_size,
				       (unsigned long)descriptor, flags);
}

SYSCALL_DEFINE3(lite_reply_message, const void __user *, buf, u64, size,
		u64, descriptor)
{
	return lite_rs_reply_message((unsigned long)buf, size, descriptor);
}

SYSCALL_DEFINE4(lite_reply_and_receive_message, const void __user *, buf,
		u64, size, u64, descriptor, struct lite_receive __user *, next)
{
	return lite_rs_reply_and_receive_message((unsigned long)buf, size,
						 descriptor,
						 (unsigned long)next);
}

SYSCALL_DEFINE1(lite_send_reply_multicast, struct lite_multicast __user *, call)
{
	return lite_rs_send_reply_multicast((unsigned long)call);
}

SYSCALL_DEFINE4(lite_fetch_add, u64, handle, u64 __user *, old, u64, value,
		unsigned int, priority)
{
	return lite_rs_fetch_add(handle, (unsigned long)old, value, priority);
}

SYSCALL_DEFINE5(lite_compare_swp, u64, handle, u64 __user *, old, u64, expected,
		u64, new_value, unsigned int, priority)
{
	return lite_rs_compare_swp(handle, (unsigned long)old, expected,
				   new_value, priority);
}

SYSCALL_DEFINE2(lite_create_lock, unsigned int, home,
		struct lite_lock __user *, lock)
{
	return lite_rs_create_lock(home, (unsigned long)lock);
}

SYSCALL_DEFINE3(lite_ask_lock, unsigned int, home, unsigned int, number,
		struct lite_lock __user *, lock)
{
	return lite_rs_ask_lock(home, number, (unsigned long)lock);
}

SYSCALL_DEFINE1(lite_lock, const struct lite_lock __user *, lock)
{
	return lite_rs_lock((unsigned long)lock);
}

SYSCALL_DEFINE1(lite_unlock, const struct lite_lock __user *, lock)
{
	return lite_rs_unlock((unsigned long)lock);
}

SYSCALL_DEFINE1(lite_set_priority, unsigned int, priority)
{
	return lite_rs_set_priority(priority);
}

SYSCALL_DEFINE1(lite_leave, unsigned int, flags)
{
	return lite_rs_leave(flags);
}
