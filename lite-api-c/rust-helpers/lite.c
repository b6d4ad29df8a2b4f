// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for LITE: RDMA verbs that are static inline in <rdma/ib_verbs.h>,
 * and scheduler and wait-queue primitives that are macros. They only dispatch
 * through device ops or touch per-task state, so they link even when ib_core
 * is a module; helpers that call into ib_core or the crypto API are part of
 * LITE (lite_helpers.c).
 */

#include <keys/user-type.h>
#include <linux/cred.h>
#include <linux/key.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
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
 * Posts a signaled IB_WR_REG_MR for `mr` with a fresh key byte and the
 * access given; the region's keys are those of `mr` once it completes.
 */
int rust_helper_lite_post_reg_mr(struct ib_qp *qp, struct ib_mr *mr, int access, u64 wr_id)
{
	struct ib_reg_wr wr = {};
	const struct ib_send_wr *bad;

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	wr.wr.opcode = IB_WR_REG_MR;
	wr.wr.wr_id = wr_id;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.mr = mr;
	wr.key = mr->rkey;
	wr.access = access;
	return ib_post_send(qp, &wr.wr, &bad);
}

/*
 * Copies the cluster's secret, the payload of the "user" key "lite:cluster"
 * in the caller's keyrings, into the `len` bytes at `buf`; returns its
 * length, -ENOKEY if there is no such key, -EMSGSIZE if it is longer than
 * `len`, or another key error (revoked, expired, no permission).
 */
int rust_helper_lite_read_cluster_secret(u8 *buf, unsigned int len)
{
	const struct user_key_payload *payload;
	struct key *key = request_key(&key_type_user, "lite:cluster", NULL);
	int ret;

	if (IS_ERR(key))
		return PTR_ERR(key);
	down_read(&key->sem);
	payload = user_key_payload_locked(key);
	if (!payload) {
		ret = -EKEYREVOKED;
	} else if (payload->datalen > len) {
		ret = -EMSGSIZE;
	} else {
		memcpy(buf, payload->data, payload->datalen);
		ret = payload->datalen;
	}
	up_read(&key->sem);
	key_put(key);
	return ret;
}

pid_t rust_helper_lite_current_pid(void)
{
	return task_pid_nr(current);
}

/* The calling task's real uid, as the initial user namespace sees it. */
u32 rust_helper_lite_current_uid(void)
{
	return from_kuid_munged(&init_user_ns, current_uid());
}

/*
 * Whether the calling task belongs to group `gid` of the initial user
 * namespace (as its fsgid or a supplementary group).
 */
bool rust_helper_lite_in_group(u32 gid)
{
	kgid_t group = make_kgid(&init_user_ns, gid);

	return gid_valid(group) && in_group_p(group);
}

/* Bytes of RAM the kernel manages. */
u64 rust_helper_lite_total_ram_bytes(void)
{
	return (u64)totalram_pages() << PAGE_SHIFT;
}

/*
 * Counts `pages` pinned pages against the calling process's RLIMIT_MEMLOCK,
 * as ib_umem_get() does: -ENOMEM beyond the limit unless the caller has
 * CAP_IPC_LOCK, -EFAULT for a task without memory. On success *mm is the
 * process's mm, grabbed until lite_uncharge_pinned_vm().
 */
int rust_helper_lite_charge_pinned_vm(unsigned long pages, struct mm_struct **mm)
{
	struct mm_struct *own = current->mm;
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;

	if (!own)
		return -EFAULT;
	if (atomic64_add_return(pages, &own->pinned_vm) > limit &&
	    !capable(CAP_IPC_LOCK)) {
		atomic64_sub(pages, &own->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(own);
	*mm = own;
	return 0;
}

/* Gives back what lite_charge_pinned_vm() counted and drops the mm. */
void rust_helper_lite_uncharge_pinned_vm(struct mm_struct *mm, unsigned long pages)
{
	atomic64_sub(pages, &mm->pinned_vm);
	mmdrop(mm);
}
