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
