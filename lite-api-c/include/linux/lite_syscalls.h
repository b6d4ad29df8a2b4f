/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Entry points of the LITE system calls, which stay in the core kernel while
 * LITE itself may be a module.
 *
 * LITE registers its operations when it loads and removes them before it
 * unloads. While none are registered every LITE system call returns -ENOSYS,
 * as on a kernel built without LITE. A call in progress holds a reference on
 * the module that registered the operations, so the module cannot be
 * unloaded under it (delete_module() then fails with -EWOULDBLOCK), and no
 * operation is called once lite_syscalls_unregister() has returned.
 */
#ifndef _LINUX_LITE_SYSCALLS_H
#define _LINUX_LITE_SYSCALLS_H

#include <linux/types.h>

struct module;

/*
 * LITE's system call backends, one per system call of the same name (see
 * <uapi/linux/lite.h>); user pointers are passed as integers. exit_process
 * releases what the current process holds in LITE, called when the last
 * thread of a process exits.
 */
struct lite_syscall_ops {
	struct module *owner;
	long (*join)(unsigned long cm_ip, unsigned int cm_port,
		     unsigned int ib_port);
	long (*leave)(unsigned int flags);
	long (*get_node_id)(void);
	long (*get_total_node)(void);
	long (*alloc_remote)(unsigned int node, u64 size, unsigned int flags,
			     u64 password);
	long (*rdma_write)(u64 handle, unsigned long buf, u64 size, u64 offset,
			   unsigned int priority, u64 password);
	long (*rdma_read)(u64 handle, unsigned long buf, u64 size, u64 offset,
			  unsigned int priority, u64 password);
	long (*free)(u64 handle);
	long (*dist_barrier)(unsigned int num);
	long (*remote_memset)(u64 handle, u64 offset, u64 size,
			      unsigned int byte);
	long (*lmr_memcpy)(u64 src, u64 src_offset, u64 dst, u64 dst_offset,
			   u64 size);
	long (*lmr_memmove)(u64 src, u64 src_offset, u64 dst,
			    u64 dst_offset, u64 size);
	long (*wrap_alloc)(unsigned long data, u64 size, u64 name,
			   u64 password);
	long (*add_ask_mr_table)(u64 name, u64 handle, u64 permission,
				 u64 password);
	long (*ask_lmr)(unsigned int node, u64 name, u64 permission,
			u64 password);
	long (*umap_lmr)(u64 handle);
	long (*register_lmr)(unsigned long buf, u64 size, u64 permission,
			     u64 password);
	long (*deregister_lmr)(u64 handle);
	long (*rdma_write_async)(u64 handle, unsigned long buf, u64 size,
				 u64 offset, unsigned int priority,
				 u64 password);
	long (*rdma_read_async)(u64 handle, unsigned long buf, u64 size,
				u64 offset, unsigned int priority,
				u64 password);
	long (*async_wait)(u64 op, unsigned int flags);
	long (*fence)(void);
	long (*get_stats)(unsigned long stats, u64 size);
	long (*register_application)(unsigned int port, u64 max_size,
				     unsigned long name, u64 name_len);
	long (*unregister_application)(unsigned int port);
	long (*query_port)(unsigned int node, unsigned int port);
	long (*send_reply_imm)(unsigned int node, unsigned int port_priority,
			       unsigned long msg, u64 size, unsigned long reply,
			       u64 max_reply);
	long (*send_reply_imm_async)(unsigned int node,
				     unsigned int port_priority,
				     unsigned long msg, u64 size,
				     unsigned long reply, u64 max_reply);
	long (*send)(unsigned int node, unsigned int port_priority,
		     unsigned long msg, u64 size);
	long (*receive_message)(unsigned int port, unsigned long buf,
				u64 max_size, unsigned long descriptor,
				unsigned int flags);
	long (*reply_message)(unsigned long buf, u64 size, u64 descriptor);
	long (*reply_and_receive_message)(unsigned long buf, u64 size,
					  u64 descriptor, unsigned long next);
	long (*send_reply_multicast)(unsigned long call);
	long (*fetch_add)(u64 handle, unsigned long old, u64 value,
			  unsigned int priority);
	long (*compare_swp)(u64 handle, unsigned long old, u64 expected,
			    u64 new_value, unsigned int priority);
	long (*create_lock)(unsigned int home, unsigned long lock);
	long (*ask_lock)(unsigned int home, unsigned int number,
			 unsigned long lock);
	long (*lock)(unsigned long lock);
	long (*unlock)(unsigned long lock);
	long (*set_priority)(unsigned int priority);
	long (*dsm_open)(unsigned int node, u64 name, u64 size,
			 unsigned int flags, u64 password);
	void (*exit_process)(void);
};

#if IS_ENABLED(CONFIG_LITE_SYSCALLS)
int lite_syscalls_register(const struct lite_syscall_ops *ops);
void lite_syscalls_unregister(const struct lite_syscall_ops *ops);
void lite_exit_process(void);
#else
static inline void lite_exit_process(void) { }
#endif

#endif /* _LINUX_LITE_SYSCALLS_H */
