// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for LITE: RDMA verbs that are static inline in <rdma/ib_verbs.h>,
 * and scheduler and wait-queue primitives that are macros. They only dispatch through
 * device ops or touch per-task state, so they link even when ib_core is a
 * module.
 */

#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/wait.h>
#include <rdma/ib_verbs.h>

int rust_helper_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *send_wr,
			     const struct ib_send_wr **bad_send_wr)
{
	return ib_post_send(qp, send_wr, bad_send_wr);
}

int rust_helper_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *recv_wr,
			     const struct ib_recv_wr **bad_recv_wr)
{
	return ib_post_recv(qp, recv_wr, bad_recv_wr);
}

int rust_helper_ib_poll_cq(struct ib_cq *cq, int num_entries, struct ib_wc *wc)
{
	return ib_poll_cq(cq, num_entries, wc);
}

int rust_helper_ib_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags)
{
	return ib_req_notify_cq(cq, flags);
}

u64 rust_helper_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
				  enum dma_data_direction direction)
{
	return ib_dma_map_single(dev, cpu_addr, size, direction);
}

void rust_helper_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				     enum dma_data_direction direction)
{
	ib_dma_unmap_single(dev, addr, size, direction);
}

int rust_helper_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

void rust_helper_cond_resched(void)
{
	cond_resched();
}

bool rust_helper_rdma_protocol_roce(const struct ib_device *device, u32 port_num)
{
	return rdma_protocol_roce(device, port_num);
}

u64 rust_helper_ib_dma_map_page(struct ib_device *dev, struct page *page,
				unsigned long offset, size_t size,
				enum dma_data_direction direction)
{
	return ib_dma_map_page(dev, page, offset, size, direction);
}

void rust_helper_ib_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
				   enum dma_data_direction direction)
{
	ib_dma_unmap_page(dev, addr, size, direction);
}

pid_t rust_helper_lite_current_tgid(void)
{
	return task_tgid_nr(current);
}

void rust_helper_lite_init_waitqueue_head(struct wait_queue_head *wq_head)
{
	init_waitqueue_head(wq_head);
}

void rust_helper_lite_wake_up_all(struct wait_queue_head *wq_head)
{
	wake_up_all(wq_head);
}

struct page *rust_helper_lite_kernel_addr_to_page(const void *addr)
{
	if (is_vmalloc_addr(addr))
		return vmalloc_to_page(addr);
	if (virt_addr_valid(addr))
		return virt_to_page(addr);
	return NULL;
}

/*
 * A DMA memory region covering all of the node's memory, with the access
 * given (remote atomics included), as __ib_alloc_pd() makes for
 * IB_PD_UNSAFE_GLOBAL_RKEY without REMOTE_ATOMIC. Released with
 * ib_dereg_mr().
 */
struct ib_mr *rust_helper_lite_get_dma_mr(struct ib_pd *pd, int access)
{
	struct ib_mr *mr;

	if (!pd->device->ops.get_dma_mr)
		return ERR_PTR(-EOPNOTSUPP);
	mr = pd->device->ops.get_dma_mr(pd, access);
	if (IS_ERR(mr))
		return mr;
	mr->device = pd->device;
	mr->pd = pd;
	mr->type = IB_MR_TYPE_DMA;
	mr->uobject = NULL;
	mr->need_inval = false;
	atomic_inc(&pd->usecnt);
	return mr;
}

pid_t rust_helper_lite_current_pid(void)
{
	return task_pid_nr(current);
}
