// SPDX-License-Identifier: GPL-2.0

//! Backends of LITE's system calls.
//!
//! Each `SYSCALL_DEFINE` in `lite_syscalls.c` forwards its arguments to one
//! function here, which validates them and returns a value or a negative
//! errno (see `include/uapi/linux/lite.h` for the contract).

use core::ffi::c_long;
use kernel::{
    error::from_result,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use super::user::read_user_cstr;
use crate::internal::{node, parse_ipv4};

/// Longest cluster manager address accepted, NUL included (`LITE_MAX_IP_LEN`).
const MAX_IP_LEN: usize = 16;

/// Converts a user-supplied 64-bit size into a `usize`.
fn user_len(size: u64) -> Result<usize> {
    usize::try_from(size).map_err(|_| EINVAL)
}

/// Backend of `lite_join`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_join(cm_ip: UserPtr, cm_port: u32, ib_port: u32) -> c_long {
    from_result(|| {
        let (text, len) = read_user_cstr::<MAX_IP_LEN>(cm_ip)?;
        let addr = parse_ipv4(&text[..len]).ok_or(EINVAL)?;
        let port = u16::try_from(cm_port)
            .ok()
            .filter(|&p| p != 0)
            .ok_or(EINVAL)?;
        Ok(node()?.join(addr, port, ib_port)? as c_long)
    })
}

/// Backend of `lite_get_node_id`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_get_node_id() -> c_long {
    from_result(|| Ok(node()?.cluster()?.node_id as c_long))
}

/// Backend of `lite_get_total_node`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_get_total_node() -> c_long {
    from_result(|| Ok(node()?.cluster()?.total_nodes() as c_long))
}

/// Backend of `lite_alloc_remote`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_alloc_remote(node_id: u32, size: u64, flags: u32, password: u64) -> c_long {
    from_result(|| {
        let handle = node()?
            .cluster()?
            .alloc_remote(node_id, size, flags, password)?;
        c_long::try_from(handle).map_err(|_| EINVAL)
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
        let cluster = node()?.cluster()?;
        let mut reader = UserSlice::new(buf, user_len(size)?).reader();
        cluster.rdma_write(handle, &mut reader, size, offset, priority, password)?;
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
        let cluster = node()?.cluster()?;
        let mut writer = UserSlice::new(buf, user_len(size)?).writer();
        cluster.rdma_read(handle, &mut writer, size, offset, priority, password)?;
        Ok(0)
    })
}

/// Backend of `lite_free`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_free(handle: u64) -> c_long {
    from_result(|| {
        node()?.cluster()?.free(handle)?;
        Ok(0)
    })
}

/// Backend of `lite_dist_barrier`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_dist_barrier(num: u32) -> c_long {
    from_result(|| {
        node()?.cluster()?.dist_barrier(num)?;
        Ok(0)
    })
}
