// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for LITE: RDMA verbs that are static inline in <rdma/ib_verbs.h>,
 * and memory, key, credential, scheduler and wait-queue primitives that are
 * static inline or macros. Each only forwards to what it is named after;
 * the logic is LITE's Rust. They only dispatch through device ops or touch
 * per-task state, so they link even when ib_core is a module; helpers that
 * call into ib_core or the crypto API are part of LITE (lite_helpers.c).
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

void rust_helper_might_sleep(void)
{
	might_sleep();
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

bool rust_helper_is_vmalloc_addr(const void *addr)
{
	return is_vmalloc_addr(addr);
}

bool rust_helper_virt_addr_valid(const void *addr)
{
	return virt_addr_valid(addr);
}

struct page *rust_helper_virt_to_page(const void *addr)
{
	return virt_to_page(addr);
}

void rust_helper_ib_update_fast_reg_key(struct ib_mr *mr, u8 newkey)
{
	ib_update_fast_reg_key(mr, newkey);
}

u32 rust_helper_ib_inc_rkey(u32 rkey)
{
	return ib_inc_rkey(rkey);
}

struct key *rust_helper_request_key(struct key_type *type,
				    const char *description,
				    const char *callout_info)
{
	return request_key(type, description, callout_info);
}

struct user_key_payload *rust_helper_user_key_payload_locked(const struct key *key)
{
	return user_key_payload_locked(key);
}

pid_t rust_helper_lite_current_pid(void)
{
	return task_pid_nr(current);
}

kuid_t rust_helper_current_uid(void)
{
	return current_uid();
}

uid_t rust_helper_from_kuid_munged(struct user_namespace *to, kuid_t kuid)
{
	return from_kuid_munged(to, kuid);
}

kgid_t rust_helper_make_kgid(struct user_namespace *from, gid_t gid)
{
	return make_kgid(from, gid);
}

bool rust_helper_gid_valid(kgid_t gid)
{
	return gid_valid(gid);
}

unsigned long rust_helper_totalram_pages(void)
{
	return totalram_pages();
}

struct mm_struct *rust_helper_lite_current_mm(void)
{
	return current->mm;
}

unsigned long rust_helper_rlimit(unsigned int limit)
{
	return rlimit(limit);
}

s64 rust_helper_atomic64_add_return(s64 i, atomic64_t *v)
{
	return atomic64_add_return(i, v);
}

void rust_helper_atomic64_sub(s64 i, atomic64_t *v)
{
	atomic64_sub(i, v);
}

void rust_helper_mmgrab(struct mm_struct *mm)
{
	mmgrab(mm);
}

void rust_helper_mmdrop(struct mm_struct *mm)
{
	mmdrop(mm);
}
