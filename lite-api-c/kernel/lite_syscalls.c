// SPDX-License-Identifier: GPL-2.0
/*
 * Entry points of the LITE system calls.
 *
 * LITE may be a module, but system calls and the process-exit hook must be in
 * the core kernel. These entry points forward each call to the operations
 * LITE registered, holding a reference on LITE's module for the length of
 * the call, or return -ENOSYS while LITE is not loaded. SYSCALL_DEFINE
 * generates the pt_regs wrappers and syscall metadata; LITE validates the
 * arguments.
 */

#include <linux/errno.h>
#include <linux/lite_syscalls.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/syscalls.h>
#include <uapi/linux/lite.h>

static const struct lite_syscall_ops __rcu *lite_ops;
/* Serialises registration; calls only read lite_ops under RCU. */
static DEFINE_MUTEX(lite_ops_mutex);

/**
 * lite_syscalls_register - make the LITE system calls call @ops
 * @ops: LITE's operations; must stay valid until unregistered
 *
 * From now on each LITE system call takes a reference on @ops->owner and
 * calls the operation of its name. Only one set of operations can be
 * registered at a time.
 *
 * Context: Process context. May sleep.
 * Return: 0, or %-EBUSY if operations are registered already.
 */
int lite_syscalls_register(const struct lite_syscall_ops *ops)
{
	int ret = 0;

	mutex_lock(&lite_ops_mutex);
	if (rcu_access_pointer(lite_ops))
		ret = -EBUSY;
	else
		rcu_assign_pointer(lite_ops, ops);
	mutex_unlock(&lite_ops_mutex);
	return ret;
}
EXPORT_SYMBOL_GPL(lite_syscalls_register);

/**
 * lite_syscalls_unregister - stop calling @ops
 * @ops: the operations given to lite_syscalls_register()
 *
 * Later calls return %-ENOSYS. Calls that already took a reference on
 * @ops->owner may still run; the module's reference count keeps it loaded
 * for them, so a module's exit function, which only runs once no reference
 * is held, may free everything @ops uses once this returns. Operations
 * other than @ops are left registered.
 *
 * Context: Process context. Sleeps until an RCU grace period has elapsed.
 */
void lite_syscalls_unregister(const struct lite_syscall_ops *ops)
{
	mutex_lock(&lite_ops_mutex);
	if (rcu_access_pointer(lite_ops) == ops)
		RCU_INIT_POINTER(lite_ops, NULL);
	mutex_unlock(&lite_ops_mutex);
	/* No caller still holds @ops without holding the module. */
	synchronize_rcu();
}
EXPORT_SYMBOL_GPL(lite_syscalls_unregister);

/* The registered operations with their module held, or NULL. */
static const struct lite_syscall_ops *lite_ops_get(void)
{
	const struct lite_syscall_ops *ops;

	rcu_read_lock();
	ops = rcu_dereference(lite_ops);
	if (ops && !try_module_get(ops->owner))
		ops = NULL;
	rcu_read_unlock();
	return ops;
}

#define LITE_CALL(op, ...)						\
({									\
	const struct lite_syscall_ops *ops = lite_ops_get();		\
	long ret = -ENOSYS;						\
									\
	if (ops) {							\
		ret = ops->op(__VA_ARGS__);				\
		module_put(ops->owner);					\
	}								\
	ret;								\
})

/**
 * lite_exit_process - release what the exiting process holds in LITE
 *
 * Called from do_exit() when the last thread of a process exits. Calls the
 * exit_process operation LITE registered, which releases the process's
 * handles, mappings, registrations, ports, descriptors, lock holds and
 * asynchronous operations; does nothing while LITE is not loaded.
 *
 * Context: Process context, in the exiting task. May sleep.
 */
void lite_exit_process(void)
{
	const struct lite_syscall_ops *ops = lite_ops_get();

	if (ops) {
		ops->exit_process();
		module_put(ops->owner);
	}
}

SYSCALL_DEFINE3(lite_join, const char __user *, cm_ip, unsigned int, cm_port,
		unsigned int, ib_port)
{
	return LITE_CALL(join, (unsigned long)cm_ip, cm_port, ib_port);
}

SYSCALL_DEFINE0(lite_get_node_id)
{
	return LITE_CALL(get_node_id);
}

SYSCALL_DEFINE0(lite_get_total_node)
{
	return LITE_CALL(get_total_node);
}

SYSCALL_DEFINE4(lite_alloc_remote, unsigned int, node, u64, size,
		unsigned int, flags, u64, password)
{
	return LITE_CALL(alloc_remote, node, size, flags, password);
}

SYSCALL_DEFINE6(lite_rdma_write, u64, handle, const void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return LITE_CALL(rdma_write, handle, (unsigned long)buf, size, offset,
			 priority, password);
}

SYSCALL_DEFINE6(lite_rdma_read, u64, handle, void __user *, buf, u64, size,
		u64, offset, unsigned int, priority, u64, password)
{
	return LITE_CALL(rdma_read, handle, (unsigned long)buf, size, offset,
			 priority, password);
}

SYSCALL_DEFINE1(lite_free, u64, handle)
{
	return LITE_CALL(free, handle);
}

SYSCALL_DEFINE1(lite_dist_barrier, unsigned int, num)
{
	return LITE_CALL(dist_barrier, num);
}

SYSCALL_DEFINE4(lite_remote_memset, u64, handle, u64, offset, u64, size,
		unsigned int, byte)
{
	return LITE_CALL(remote_memset, handle, offset, size, byte);
}

SYSCALL_DEFINE5(lite_memcpy, u64, src_handle, u64, src_offset, u64, dst_handle,
		u64, dst_offset, u64, size)
{
	return LITE_CALL(lmr_memcpy, src_handle, src_offset, dst_handle,
			 dst_offset, size);
}

SYSCALL_DEFINE5(lite_memmove, u64, src_handle, u64, src_offset,
		u64, dst_handle, u64, dst_offset, u64, size)
{
	return LITE_CALL(lmr_memmove, src_handle, src_offset, dst_handle,
			 dst_offset, size);
}

SYSCALL_DEFINE4(lite_wrap_alloc, const void __user *, data, u64, size,
		u64, name, u64, password)
{
	return LITE_CALL(wrap_alloc, (unsigned long)data, size, name, password);
}

SYSCALL_DEFINE4(lite_add_ask_mr_table, u64, name, u64, handle, u64, permission,
		u64, password)
{
	return LITE_CALL(add_ask_mr_table, name, handle, permission, password);
}

SYSCALL_DEFINE4(lite_ask_lmr, unsigned int, node, u64, name, u64, permission,
		u64, password)
{
	return LITE_CALL(ask_lmr, node, name, permission, password);
}

SYSCALL_DEFINE1(lite_umap_lmr, u64, handle)
{
	return LITE_CALL(umap_lmr, handle);
}

SYSCALL_DEFINE4(lite_register_lmr, void __user *, buf, u64, size,
		u64, permission, u64, password)
{
	return LITE_CALL(register_lmr, (unsigned long)buf, size, permission,
			 password);
}

SYSCALL_DEFINE1(lite_deregister_lmr, u64, handle)
{
	return LITE_CALL(deregister_lmr, handle);
}

SYSCALL_DEFINE6(lite_rdma_write_async, u64, handle, const void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return LITE_CALL(rdma_write_async, handle, (unsigned long)buf, size,
			 offset, priority, password);
}

SYSCALL_DEFINE6(lite_rdma_read_async, u64, handle, void __user *, buf,
		u64, size, u64, offset, unsigned int, priority, u64, password)
{
	return LITE_CALL(rdma_read_async, handle, (unsigned long)buf, size,
			 offset, priority, password);
}

SYSCALL_DEFINE2(lite_async_wait, u64, op, unsigned int, flags)
{
	return LITE_CALL(async_wait, op, flags);
}

SYSCALL_DEFINE0(lite_fence)
{
	return LITE_CALL(fence);
}

SYSCALL_DEFINE2(lite_get_stats, struct lite_stats __user *, stats, u64, size)
{
	return LITE_CALL(get_stats, (unsigned long)stats, size);
}

SYSCALL_DEFINE4(lite_register_application, unsigned int, port, u64, max_size,
		const char __user *, name, u64, name_len)
{
	return LITE_CALL(register_application, port, max_size,
			 (unsigned long)name, name_len);
}

SYSCALL_DEFINE1(lite_unregister_application, unsigned int, port)
{
	return LITE_CALL(unregister_application, port);
}

SYSCALL_DEFINE2(lite_query_port, unsigned int, node, unsigned int, port)
{
	return LITE_CALL(query_port, node, port);
}

SYSCALL_DEFINE6(lite_send_reply_imm, unsigned int, node,
		unsigned int, port_priority, const void __user *, msg, u64, size,
		void __user *, reply, u64, max_reply)
{
	return LITE_CALL(send_reply_imm, node, port_priority,
			 (unsigned long)msg, size, (unsigned long)reply,
			 max_reply);
}

SYSCALL_DEFINE6(lite_send_reply_imm_async, unsigned int, node,
		unsigned int, port_priority, const void __user *, msg, u64, size,
		void __user *, reply, u64, max_reply)
{
	return LITE_CALL(send_reply_imm_async, node, port_priority,
			 (unsigned long)msg, size, (unsigned long)reply,
			 max_reply);
}

SYSCALL_DEFINE4(lite_send, unsigned int, node, unsigned int, port_priority,
		const void __user *, msg, u64, size)
{
	return LITE_CALL(send, node, port_priority, (unsigned long)msg, size);
}

SYSCALL_DEFINE5(lite_receive_message, unsigned int, port, void __user *, buf,
		u64, max_size, u64 __user *, descriptor, unsigned int, flags)
{
	return LITE_CALL(receive_message, port, (unsigned long)buf, max_size,
			 (unsigned long)descriptor, flags);
}

SYSCALL_DEFINE3(lite_reply_message, const void __user *, buf, u64, size,
		u64, descriptor)
{
	return LITE_CALL(reply_message, (unsigned long)buf, size, descriptor);
}

SYSCALL_DEFINE4(lite_reply_and_receive_message, const void __user *, buf,
		u64, size, u64, descriptor, struct lite_receive __user *, next)
{
	return LITE_CALL(reply_and_receive_message, (unsigned long)buf, size,
			 descriptor, (unsigned long)next);
}

SYSCALL_DEFINE1(lite_send_reply_multicast, struct lite_multicast __user *, call)
{
	return LITE_CALL(send_reply_multicast, (unsigned long)call);
}

SYSCALL_DEFINE4(lite_fetch_add, u64, handle, u64 __user *, old, u64, value,
		unsigned int, priority)
{
	return LITE_CALL(fetch_add, handle, (unsigned long)old, value,
			 priority);
}

SYSCALL_DEFINE5(lite_compare_swp, u64, handle, u64 __user *, old, u64, expected,
		u64, new_value, unsigned int, priority)
{
	return LITE_CALL(compare_swp, handle, (unsigned long)old, expected,
			 new_value, priority);
}

SYSCALL_DEFINE2(lite_create_lock, unsigned int, home,
		struct lite_lock __user *, lock)
{
	return LITE_CALL(create_lock, home, (unsigned long)lock);
}

SYSCALL_DEFINE3(lite_ask_lock, unsigned int, home, unsigned int, number,
		struct lite_lock __user *, lock)
{
	return LITE_CALL(ask_lock, home, number, (unsigned long)lock);
}

SYSCALL_DEFINE1(lite_lock, const struct lite_lock __user *, lock)
{
	return LITE_CALL(lock, (unsigned long)lock);
}

SYSCALL_DEFINE1(lite_unlock, const struct lite_lock __user *, lock)
{
	return LITE_CALL(unlock, (unsigned long)lock);
}

SYSCALL_DEFINE1(lite_set_priority, unsigned int, priority)
{
	return LITE_CALL(set_priority, priority);
}

SYSCALL_DEFINE1(lite_leave, unsigned int, flags)
{
	return LITE_CALL(leave, flags);
}

SYSCALL_DEFINE5(lite_dsm_open, unsigned int, node, u64, name, u64, size,
		unsigned int, flags, u64, password)
{
	return LITE_CALL(dsm_open, node, name, size, flags, password);
}
