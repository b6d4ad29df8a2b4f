// SPDX-License-Identifier: GPL-2.0

//! Backends of LITE's system calls.
//!
//! Each `SYSCALL_DEFINE` in `lite_syscalls.c` forwards its arguments to one
//! function here, which validates them and returns a value or a negative
//! errno (see `include/uapi/linux/lite.h` for the contract). Handles are
//! those of the calling process.

use crate::internal::node_id::NodeId;
use core::ffi::c_long;
use kernel::{
    error::from_result,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

use super::user::read_user_cstr;
use crate::internal::{
    async_io::{op::AsyncBuffer, AsyncData, AsyncDataOp},
    memory::{
        handle::{LmrHandle, Password},
        ops::CopyEnd,
        transfer::Direction,
        DataOp,
    },
    node::node,
    process::Process,
    qos::stats::STATS_LEN,
    util::address::parse_ipv4,
};
use crate::sys::cred;

/// Longest cluster manager address accepted, NUL included (`LITE_MAX_IP_LEN`).
const MAX_IP_LEN: usize = 16;

/// Converts a user-supplied 64-bit size into a `usize`.
fn user_len(size: u64) -> Result<usize> {
    usize::try_from(size).map_err(|_| EINVAL)
}

/// Converts a handle or id into a system call result.
pub(super) fn to_ret(value: u64) -> Result<c_long> {
    c_long::try_from(value).map_err(|_| EINVAL)
}

/// The joined cluster and the calling process's state.
pub(super) fn caller() -> Result<(Arc<crate::internal::cluster::Cluster>, Arc<Process>)> {
    let cluster = node()?.cluster()?;
    let process = cluster.current_process()?;
    Ok((cluster, process))
}

/// Backend of `lite_join`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_join(cm_ip: UserPtr, cm_port: u32, ib_port: u32) -> c_long {
    from_result(|| {
        if !cred::may_administer() {
            return Err(EPERM);
        }
        let (text, len) = read_user_cstr::<MAX_IP_LEN>(cm_ip)?;
        let addr = parse_ipv4(&text[..len]).ok_or(EINVAL)?;
        let port = u16::try_from(cm_port)
            .ok()
            .filter(|&p| p != 0)
            .ok_or(EINVAL)?;
        Ok(node()?.join(addr, port, ib_port)?.get() as c_long)
    })
}

/// `lite_leave` flag: leave even if chunks held for others cannot move.
pub(crate) const LEAVE_FORCE: u32 = 0x1;

/// Backend of `lite_leave`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_leave(flags: u32) -> c_long {
    from_result(|| {
        if !cred::may_administer() {
            return Err(EPERM);
        }
        leave(flags)?;
        Ok(0)
    })
}

/// Leaves the cluster (`lite_leave` and `liteapi_leave`), once the units
/// built on LITE's kernel API did what they do first (LITE-DSM writes its
/// pages back; a leave that then fails leaves them as after a leave).
pub(super) fn leave(flags: u32) -> Result {
    if flags & !LEAVE_FORCE != 0 {
        return Err(EINVAL);
    }
    let node = node()?;
    node.run_leave_hook();
    node.leave(flags & LEAVE_FORCE != 0)
}

/// Backend of `lite_get_node_id`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_get_node_id() -> c_long {
    from_result(|| Ok(node()?.cluster()?.core.node_id().get() as c_long))
}

/// Backend of `lite_get_total_node`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_get_total_node() -> c_long {
    from_result(|| Ok(node()?.cluster()?.core.total_nodes() as c_long))
}

/// Backend of `lite_alloc_remote`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_alloc_remote(
    node_id: u32,
    size: u64,
    flags: u32,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let password = Password::from_raw(password);
        let handle =
            cluster
                .memory
                .alloc_remote(&process, NodeId::new(node_id), size, flags, password)?;
        to_ret(handle.raw())
    })
}

/// Backend of `lite_rdma_write`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_rdma_write(
    handle: u64,
    buf: UserPtr,
    size: u64,
    offset: u64,
    priority: u32,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let mut reader = UserSlice::new(buf, user_len(size)?).reader();
        let write = DataOp {
            handle: LmrHandle::from_raw(handle),
            direction: Direction::Write(&mut reader),
            len: size,
            offset,
            priority,
            password: Password::from_raw(password),
        };
        cluster.memory.transfer(&process, write)?;
        Ok(0)
    })
}

/// Backend of `lite_rdma_read`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_rdma_read(
    handle: u64,
    buf: UserPtr,
    size: u64,
    offset: u64,
    priority: u32,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let mut writer = UserSlice::new(buf, user_len(size)?).writer();
        let read = DataOp {
            handle: LmrHandle::from_raw(handle),
            direction: Direction::Read(&mut writer),
            len: size,
            offset,
            priority,
            password: Password::from_raw(password),
        };
        cluster.memory.transfer(&process, read)?;
        Ok(0)
    })
}

/// Backend of `lite_free`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_free(handle: u64) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster
            .sharing
            .free(&process, LmrHandle::from_raw(handle))?;
        Ok(0)
    })
}

/// Backend of `lite_dist_barrier`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_dist_barrier(num: u32) -> c_long {
    from_result(|| {
        node()?.cluster()?.barrier.dist_barrier(num)?;
        Ok(0)
    })
}

/// Backend of `lite_remote_memset`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_remote_memset(
    handle: u64,
    offset: u64,
    size: u64,
    byte: u32,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let handle = LmrHandle::from_raw(handle);
        cluster
            .memory_ops
            .memset(&process, handle, offset, size, byte)?;
        Ok(0)
    })
}

/// Backend of `lite_memcpy` (`overlap_safe` false) and `lite_memmove`.
fn copy(
    src: u64,
    src_offset: u64,
    dst: u64,
    dst_offset: u64,
    size: u64,
    overlap_safe: bool,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster.memory_ops.copy(
            &process,
            CopyEnd::new(src, src_offset),
            CopyEnd::new(dst, dst_offset),
            size,
            overlap_safe,
        )?;
        Ok(0)
    })
}

/// Backend of `lite_memcpy`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_memcpy(
    src: u64,
    src_offset: u64,
    dst: u64,
    dst_offset: u64,
    size: u64,
) -> c_long {
    copy(src, src_offset, dst, dst_offset, size, false)
}

/// Backend of `lite_memmove`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_memmove(
    src: u64,
    src_offset: u64,
    dst: u64,
    dst_offset: u64,
    size: u64,
) -> c_long {
    copy(src, src_offset, dst, dst_offset, size, true)
}

/// Backend of `lite_wrap_alloc`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_wrap_alloc(
    data: UserPtr,
    size: u64,
    name: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let mut reader = UserSlice::new(data, user_len(size)?).reader();
        let password = Password::from_raw(password);
        let handle = cluster
            .sharing
            .wrap_alloc(&process, &mut reader, size, name, password)?;
        to_ret(handle.raw())
    })
}

/// Backend of `lite_add_ask_mr_table`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_add_ask_mr_table(
    name: u64,
    handle: u64,
    permission: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let (handle, password) = (LmrHandle::from_raw(handle), Password::from_raw(password));
        cluster
            .sharing
            .publish(&process, name, handle, permission, password)?;
        Ok(0)
    })
}

/// Backend of `lite_ask_lmr`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_ask_lmr(
    owner: u32,
    name: u64,
    permission: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let password = Password::from_raw(password);
        let handle =
            cluster
                .sharing
                .ask_lmr(&process, NodeId::new(owner), name, permission, password)?;
        to_ret(handle.raw())
    })
}

/// Backend of `lite_umap_lmr`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_umap_lmr(handle: u64) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster
            .sharing
            .umap(&process, LmrHandle::from_raw(handle))?;
        Ok(0)
    })
}

/// Backend of `lite_register_lmr`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_register_lmr(
    buf: UserPtr,
    size: u64,
    permission: u64,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let password = Password::from_raw(password);
        let handle = cluster
            .registration
            .register(&process, buf, size, permission, password)?;
        to_ret(handle.raw())
    })
}

/// Backend of `lite_deregister_lmr`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_deregister_lmr(handle: u64) -> c_long {
    lite_rs_free(handle)
}

/// Backend of `lite_rdma_write_async` and `lite_rdma_read_async`.
fn submit_async(
    handle: u64,
    data: AsyncData<'_>,
    size: u64,
    offset: u64,
    priority: u32,
    password: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let op = AsyncDataOp {
            handle: LmrHandle::from_raw(handle),
            data,
            len: size,
            offset,
            priority,
            password: Password::from_raw(password),
        };
        to_ret(cluster.async_io.submit_async(&process, op)?)
    })
}

/// Backend of `lite_rdma_write_async`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_rdma_write_async(
    handle: u64,
    buf: UserPtr,
    size: u64,
    offset: u64,
    priority: u32,
    password: u64,
) -> c_long {
    let data = AsyncData::WriteFromUser(buf);
    submit_async(handle, data, size, offset, priority, password)
}

/// Backend of `lite_rdma_read_async`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_rdma_read_async(
    handle: u64,
    buf: UserPtr,
    size: u64,
    offset: u64,
    priority: u32,
    password: u64,
) -> c_long {
    let data = AsyncData::ReadInto(AsyncBuffer::User(buf));
    submit_async(handle, data, size, offset, priority, password)
}

/// Backend of `lite_async_wait`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_async_wait(op: u64, flags: u32) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        to_ret(cluster.async_io.async_wait(&process, op, flags)?)
    })
}

/// Backend of `lite_fence`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_fence() -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster.async_io.fence(&process)?;
        Ok(0)
    })
}

/// Backend of `lite_get_stats`; all counters are 0 before join.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_get_stats(buf: UserPtr, size: u64) -> c_long {
    from_result(|| {
        if size < 8 {
            return Err(EINVAL);
        }
        let stats = match node()?.cluster() {
            Ok(cluster) => cluster.stats(),
            Err(_) => Default::default(),
        };
        let bytes = stats.to_bytes();
        let len = user_len(size)?.min(STATS_LEN);
        UserSlice::new(buf, len)
            .writer()
            .write_slice(&bytes[..len])?;
        Ok(0)
    })
}

/// Called by the kernel when the last thread of a process exits: releases
/// everything the process holds in LITE.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_exit_process() {
    let Ok(node) = node() else {
        return;
    };
    let Ok(cluster) = node.cluster() else {
        return;
    };
    cluster.process_exit(crate::sys::sched::current_tgid());
}
