// SPDX-License-Identifier: GPL-2.0

//! Backends of the synchronization and priority system calls, and of the
//! debugfs files (`/sys/kernel/debug/lite/`).

use crate::internal::node_id::NodeId;
use core::ffi::{c_int, c_long};
use kernel::{
    bindings,
    error::from_result,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use super::{
    syscalls::caller,
    user::{read_struct, write_struct},
};
use crate::internal::{
    atomics::AtomicOp,
    cluster,
    locks::lockers::LockId,
    membership,
    memory::handle::LmrHandle,
    node::node,
    qos::{
        admission::{self, Param},
        op_stats::{self, TextBuffer},
        priority::Priority,
    },
    quota::command::Command,
};
use crate::sys::cred;

/// Stores `value` at the user's `__u64 *`.
fn write_u64(ptr: UserPtr, value: u64) -> Result {
    UserSlice::new(ptr, 8)
        .writer()
        .write_slice(&value.to_ne_bytes())
}

/// Reads a `struct lite_lock`.
fn read_lock(ptr: UserPtr) -> Result<LockId> {
    let lock: bindings::lite_lock = read_struct(ptr)?;
    Ok(LockId {
        home: NodeId::new(lock.home),
        number: lock.number,
    })
}

/// Stores a `struct lite_lock`.
fn write_lock(ptr: UserPtr, id: LockId) -> Result {
    let lock = bindings::lite_lock {
        home: id.home.get(),
        number: id.number,
    };
    write_struct(ptr, lock)
}

/// Runs `op` and stores the old value at `old`, which is checked for
/// writability first so a bad pointer does not leave the operation done
/// but unreported.
fn atomic(handle: u64, old: UserPtr, op: AtomicOp, priority: u32) -> Result<c_long> {
    let (cluster, process) = caller()?;
    write_u64(old, 0)?;
    let value = cluster
        .atomics
        .atomic(&process, LmrHandle::from_raw(handle), op, priority)?;
    write_u64(old, value)?;
    Ok(0)
}

/// Backend of `lite_fetch_add`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_fetch_add(
    handle: u64,
    old: UserPtr,
    value: u64,
    priority: u32,
) -> c_long {
    from_result(|| atomic(handle, old, AtomicOp::FetchAdd(value), priority))
}

/// Backend of `lite_compare_swp`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_compare_swp(
    handle: u64,
    old: UserPtr,
    expected: u64,
    new_value: u64,
    priority: u32,
) -> c_long {
    from_result(|| {
        let op = AtomicOp::CompareSwap {
            expected,
            new_value,
        };
        atomic(handle, old, op, priority)
    })
}

/// Backend of `lite_create_lock`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_create_lock(home: u32, lock: UserPtr) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        // Checked first: a lock that cannot be reported would be lost.
        write_lock(
            lock,
            LockId {
                home: NodeId::new(home),
                number: 0,
            },
        )?;
        let id = cluster
            .locks
            .create_lock(process.payer(), NodeId::new(home))?;
        write_lock(lock, id)?;
        Ok(c_long::from(id.number))
    })
}

/// Backend of `lite_ask_lock`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_ask_lock(home: u32, number: u32, lock: UserPtr) -> c_long {
    from_result(|| {
        let (cluster, _) = caller()?;
        let id = cluster.locks.ask_lock(NodeId::new(home), number)?;
        write_lock(lock, id)?;
        Ok(0)
    })
}

/// Backend of `lite_lock`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_lock(lock: UserPtr) -> c_long {
    from_result(|| {
        let (cluster, _) = caller()?;
        cluster.locks.lock(read_lock(lock)?)?.to_result()?;
        Ok(0)
    })
}

/// Backend of `lite_unlock`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_unlock(lock: UserPtr) -> c_long {
    from_result(|| {
        let (cluster, _) = caller()?;
        cluster.locks.unlock(read_lock(lock)?)?;
        Ok(0)
    })
}

/// Backend of `lite_set_priority`: returns the previous default.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_set_priority(priority: u32) -> c_long {
    from_result(|| {
        let priority = Priority::from_raw(priority)?;
        let (_, process) = caller()?;
        Ok(c_long::from(process.default_priority.set(priority).raw()))
    })
}

/// Writes the node's counters as text into `buf` (`len` bytes) for
/// `/sys/kernel/debug/lite/stats`; returns the text's length, or
/// `-ENOSPC` if it does not fit.
///
/// # Safety
///
/// `buf` must be null or point to `len` initialised, writable bytes (one
/// buffer) that stay valid, and that nothing else reads or writes, until the
/// call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_debugfs_stats(buf: *mut u8, len: usize) -> isize {
    if buf.is_null() {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: `buf` is non-null (checked above), so by this function's
    // `# Safety` section it points to `len` writable (and, as kernel memory,
    // readable) bytes of one buffer, so `len <= isize::MAX`, that stay valid,
    // and that nothing else accesses, until this call returns; `out` is only
    // used in this call, and `u8` needs no alignment.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let stats = node()
        .and_then(|n| n.cluster())
        .map(|c| c.stats())
        .unwrap_or_default();
    let mut text = TextBuffer::new(out);
    match op_stats::write_text(&mut text, &stats) {
        Ok(()) => text.len() as isize,
        Err(_) => ENOSPC.to_errno() as isize,
    }
}

/// Writes what the node holds as text into `buf` (`len` bytes) for
/// `/sys/kernel/debug/lite/resources`; returns the text's length, or
/// `-ENOSPC` if it does not fit.
///
/// # Safety
///
/// As for [`lite_rs_debugfs_stats`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_debugfs_resources(buf: *mut u8, len: usize) -> isize {
    if buf.is_null() {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: As in `lite_rs_debugfs_stats`: `buf` is non-null, so by this
    // function's `# Safety` section it points to `len` writable bytes of one
    // buffer that stay valid and unshared until this call returns.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut text = TextBuffer::new(out);
    let written = match node().and_then(|n| n.cluster()) {
        Ok(cluster) => cluster.write_resources(&mut text),
        Err(_) => cluster::write_device_resources(&mut text),
    };
    match written {
        Ok(()) => text.len() as isize,
        Err(_) => ENOSPC.to_errno() as isize,
    }
}

/// Writes the quotas (limits, every user's usage, and the bytes held for
/// each other node) as text into `buf` (`len` bytes) for
/// `/sys/kernel/debug/lite/quotas`; returns the text's length, or
/// `-ENOSPC` if it does not fit.
///
/// # Safety
///
/// As for [`lite_rs_debugfs_stats`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_debugfs_quotas(buf: *mut u8, len: usize) -> isize {
    if buf.is_null() {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: As in `lite_rs_debugfs_stats`: `buf` is non-null, so by this
    // function's `# Safety` section it points to `len` writable bytes of one
    // buffer that stay valid and unshared until this call returns.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut text = TextBuffer::new(out);
    let node = match node() {
        Ok(node) => node,
        Err(e) => return e.to_errno() as isize,
    };
    let written = node
        .quotas()
        .write_text(&mut text)
        .and_then(|()| match node.cluster() {
            Ok(cluster) => cluster
                .core
                .store
                .write_served(cluster.core.node_id(), &mut text),
            Err(_) => Ok(()),
        });
    match written {
        Ok(()) => text.len() as isize,
        Err(_) => ENOSPC.to_errno() as isize,
    }
}

/// Applies one line written to `/sys/kernel/debug/lite/quotas` (see
/// [`Command`]): 0, `-EPERM` without `CAP_NET_ADMIN`, `-EINVAL` for a line
/// that is not a command.
///
/// # Safety
///
/// `line` must point to `len` readable bytes that stay valid and unwritten
/// until this call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_quotas_write(line: *const u8, len: usize) -> c_int {
    from_result(|| {
        if !cred::may_administer() {
            return Err(EPERM);
        }
        if line.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `line` is non-null, so by this function's `# Safety`
        // section it points to `len` readable bytes that nothing writes
        // until this call returns.
        let line = unsafe { core::slice::from_raw_parts(line, len) };
        let command = Command::parse(line)?;
        node()?.quotas().apply(command)?;
        Ok(0)
    })
}

/// Runs the device access checks and writes their results as text into
/// `buf` (`len` bytes) for `/sys/kernel/debug/lite/access_probe`; returns
/// the text's length, `-ENOTCONN` before join, or `-ENOSPC` if it does not
/// fit.
///
/// # Safety
///
/// As for [`lite_rs_debugfs_stats`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_debugfs_access_probe(buf: *mut u8, len: usize) -> isize {
    if buf.is_null() {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: As in `lite_rs_debugfs_stats`: `buf` is non-null, so by this
    // function's `# Safety` section it points to `len` writable bytes of one
    // buffer that stay valid and unshared until this call returns.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut text = TextBuffer::new(out);
    match node()
        .and_then(|n| n.cluster())
        .and_then(|cluster| cluster.probe_access(&mut text))
    {
        Ok(()) => text.len() as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// Writes the node's membership as text into `buf` (`len` bytes) for
/// `/sys/kernel/debug/lite/membership`; returns the text's length, or
/// `-ENOSPC` if it does not fit.
///
/// # Safety
///
/// As for [`lite_rs_debugfs_stats`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_debugfs_membership(buf: *mut u8, len: usize) -> isize {
    if buf.is_null() {
        return EINVAL.to_errno() as isize;
    }
    // SAFETY: As in `lite_rs_debugfs_stats`: `buf` is non-null, so by this
    // function's `# Safety` section it points to `len` writable bytes of one
    // buffer that stay valid and unshared until this call returns.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut text = TextBuffer::new(out);
    let written = match node().and_then(|n| n.membership()) {
        Ok(link) => link.write_text(&mut text),
        Err(_) => core::fmt::Write::write_str(&mut text, "joined 0\n"),
    }
    .and_then(|()| membership::write_settings(&mut text));
    match written {
        Ok(()) => text.len() as isize,
        Err(_) => ENOSPC.to_errno() as isize,
    }
}

/// Reads membership setting `id` (see `lite_debugfs.c`).
///
/// # Safety
///
/// As for [`lite_rs_qos_get`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_membership_get(id: u32, value: *mut u64) -> c_int {
    let Some(setting) = membership::setting(id) else {
        return EINVAL.to_errno();
    };
    if value.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `value` is non-null (checked above), so by this function's
    // `# Safety` section it points to a writable, aligned `u64` that is
    // valid, and accessed by nothing else, until this call returns.
    unsafe { value.write(u64::from(setting)) };
    0
}

/// Sets membership setting `id` (see `lite_debugfs.c`); `-EINVAL` for a
/// value out of its range, `-EPERM` without `CAP_NET_ADMIN`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_membership_set(id: u32, value: u64) -> c_int {
    from_result(|| {
        if !cred::may_administer() {
            return Err(EPERM);
        }
        membership::set_setting(id, value)?;
        Ok(0)
    })
}

/// Reads the administrators' group into `value` (`u32::MAX` for none).
///
/// # Safety
///
/// As for [`lite_rs_qos_get`].
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_admin_group_get(value: *mut u64) -> c_int {
    if value.is_null() {
        return EINVAL.to_errno();
    }
    let gid = cred::admin_group().unwrap_or(u32::MAX);
    // SAFETY: `value` is non-null (checked above), so by this function's
    // `# Safety` section it points to a writable, aligned `u64` that is
    // valid, and accessed by nothing else, until this call returns.
    unsafe { value.write(u64::from(gid)) };
    0
}

/// Sets the administrators' group (`u32::MAX` for none); `-EINVAL` for a
/// value above `u32::MAX`, `-EPERM` without `CAP_NET_ADMIN` (members of the
/// group may not hand it on).
#[no_mangle]
pub(crate) extern "C" fn lite_rs_admin_group_set(value: u64) -> c_int {
    from_result(|| {
        if !cred::has_net_admin() {
            return Err(EPERM);
        }
        let gid = u32::try_from(value).map_err(|_| EINVAL)?;
        cred::set_admin_group((gid != u32::MAX).then_some(gid));
        Ok(0)
    })
}

/// Reads QoS parameter `id` (see `lite_debugfs.c`).
///
/// # Safety
///
/// `value` must be null or point to a writable, 8-byte aligned `u64` that
/// stays valid, and that nothing else reads or writes, until the call
/// returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_qos_get(id: u32, value: *mut u64) -> c_int {
    let Some(param) = Param::from_id(id) else {
        return EINVAL.to_errno();
    };
    if value.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `value` is non-null (checked above), so by this function's
    // `# Safety` section it points to a writable, aligned `u64` that is
    // valid, and accessed by nothing else, until this call returns.
    unsafe { value.write(u64::from(admission::param(param))) };
    0
}

/// Sets QoS parameter `id` (see `lite_debugfs.c`); `-EINVAL` for a value
/// out of its range, `-EPERM` without `CAP_NET_ADMIN`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_qos_set(id: u32, value: u64) -> c_int {
    from_result(|| {
        if !cred::may_administer() {
            return Err(EPERM);
        }
        let param = Param::from_id(id).ok_or(EINVAL)?;
        admission::set_param(param, value)?;
        Ok(0)
    })
}
