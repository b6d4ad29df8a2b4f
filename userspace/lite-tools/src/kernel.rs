//! The LITE system calls as a trait, so that the cluster test can also run
//! against an in-memory model of the kernel on hosts without LITE.

use std::ffi::{c_char, c_void};
use std::mem::ManuallyDrop;

use libc::c_long;
use lite::sys::{self, LiteLock, LiteMulticast, LiteReceive, LiteStats};

use crate::debugfs;
use crate::errno::describe_result;
use crate::guest_devices::{self, run_tool, SecondDevice};

/// The raw LITE system calls; see [`lite::sys`] for their contracts. Every
/// method returns the raw result (>= 0 or a negative errno).
///
/// Shared between threads: the RPC cases call it from several at once.
pub trait Kernel: Sync {
    /// `lite_join`.
    ///
    /// # Safety
    ///
    /// As [`sys::join`].
    unsafe fn join(&self, cm_ip: *const c_char, cm_port: u32, ib_port: u32) -> c_long;
    /// `lite_leave`.
    fn leave(&self, flags: u32) -> c_long;
    /// `lite_get_node_id`.
    fn get_node_id(&self) -> c_long;
    /// `lite_get_total_node`.
    fn get_total_node(&self) -> c_long;
    /// `lite_alloc_remote`.
    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long;
    /// `lite_rdma_write`.
    ///
    /// # Safety
    ///
    /// As [`sys::rdma_write`].
    unsafe fn rdma_write(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long;
    /// `lite_rdma_read`.
    ///
    /// # Safety
    ///
    /// As [`sys::rdma_read`].
    unsafe fn rdma_read(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long;
    /// `lite_free`.
    fn free(&self, handle: u64) -> c_long;
    /// `lite_dist_barrier`.
    fn dist_barrier(&self, num: u32) -> c_long;
    /// `lite_remote_memset`.
    fn remote_memset(&self, handle: u64, offset: u64, size: u64, byte: u32) -> c_long;
    /// `lite_memcpy`.
    fn memcpy(
        &self,
        src_handle: u64,
        src_offset: u64,
        dst_handle: u64,
        dst_offset: u64,
        size: u64,
    ) -> c_long;
    /// `lite_memmove`.
    fn memmove(
        &self,
        src_handle: u64,
        src_offset: u64,
        dst_handle: u64,
        dst_offset: u64,
        size: u64,
    ) -> c_long;
    /// `lite_wrap_alloc`.
    ///
    /// # Safety
    ///
    /// As [`sys::wrap_alloc`].
    unsafe fn wrap_alloc(&self, data: *const c_void, size: u64, name: u64, password: u64)
        -> c_long;
    /// `lite_add_ask_mr_table`.
    fn add_ask_mr_table(&self, name: u64, handle: u64, permission: u64, password: u64) -> c_long;
    /// `lite_ask_lmr`.
    fn ask_lmr(&self, node: u32, name: u64, permission: u64, password: u64) -> c_long;
    /// `lite_umap_lmr`.
    fn umap_lmr(&self, handle: u64) -> c_long;
    /// `lite_register_lmr`.
    ///
    /// # Safety
    ///
    /// As [`sys::register_lmr`]: the memory must stay valid, and may be
    /// changed by other nodes, until it is deregistered or the process exits.
    unsafe fn register_lmr(
        &self,
        buf: *mut c_void,
        size: u64,
        permission: u64,
        password: u64,
    ) -> c_long;
    /// `lite_deregister_lmr`.
    fn deregister_lmr(&self, handle: u64) -> c_long;
    /// `lite_rdma_write_async`.
    ///
    /// # Safety
    ///
    /// As [`sys::rdma_write_async`].
    unsafe fn rdma_write_async(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long;
    /// `lite_rdma_read_async`.
    ///
    /// # Safety
    ///
    /// As [`sys::rdma_read_async`]: `buf` must stay valid and otherwise
    /// unused until the operation is reaped.
    unsafe fn rdma_read_async(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long;
    /// `lite_async_wait`.
    fn async_wait(&self, op: u64, flags: u32) -> c_long;
    /// `lite_fence`.
    fn fence(&self) -> c_long;
    /// `lite_get_stats`.
    ///
    /// # Safety
    ///
    /// As [`sys::get_stats`].
    unsafe fn get_stats(&self, stats: *mut LiteStats, size: u64) -> c_long;
    /// `lite_register_application`.
    ///
    /// # Safety
    ///
    /// As [`sys::register_application`].
    unsafe fn register_application(
        &self,
        port: u32,
        max_size: u64,
        name: *const c_char,
        name_len: u64,
    ) -> c_long;
    /// `lite_unregister_application`.
    fn unregister_application(&self, port: u32) -> c_long;
    /// `lite_query_port`.
    fn query_port(&self, node: u32, port: u32) -> c_long;
    /// `lite_send_reply_imm`.
    ///
    /// # Safety
    ///
    /// As [`sys::send_reply_imm`].
    unsafe fn send_reply_imm(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long;
    /// `lite_send_reply_imm_async`.
    ///
    /// # Safety
    ///
    /// As [`sys::send_reply_imm_async`].
    unsafe fn send_reply_imm_async(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long;
    /// `lite_send`.
    ///
    /// # Safety
    ///
    /// As [`sys::send`].
    unsafe fn send(&self, node: u32, port_priority: u32, msg: *const c_void, size: u64) -> c_long;
    /// `lite_receive_message`.
    ///
    /// # Safety
    ///
    /// As [`sys::receive_message`].
    unsafe fn receive_message(
        &self,
        port: u32,
        buf: *mut c_void,
        max_size: u64,
        descriptor: *mut u64,
        flags: u32,
    ) -> c_long;
    /// `lite_reply_message`.
    ///
    /// # Safety
    ///
    /// As [`sys::reply_message`].
    unsafe fn reply_message(&self, buf: *const c_void, size: u64, descriptor: u64) -> c_long;
    /// `lite_reply_and_receive_message`.
    ///
    /// # Safety
    ///
    /// As [`sys::reply_and_receive_message`].
    unsafe fn reply_and_receive_message(
        &self,
        buf: *const c_void,
        size: u64,
        descriptor: u64,
        next: *mut LiteReceive,
    ) -> c_long;
    /// `lite_send_reply_multicast`.
    ///
    /// # Safety
    ///
    /// As [`sys::send_reply_multicast`].
    unsafe fn send_reply_multicast(&self, call: *mut LiteMulticast) -> c_long;
    /// `lite_fetch_add`.
    ///
    /// # Safety
    ///
    /// As [`sys::fetch_add`].
    unsafe fn fetch_add(&self, handle: u64, old: *mut u64, value: u64, priority: u32) -> c_long;
    /// `lite_compare_swp`.
    ///
    /// # Safety
    ///
    /// As [`sys::compare_swp`].
    unsafe fn compare_swp(
        &self,
        handle: u64,
        old: *mut u64,
        expected: u64,
        new_value: u64,
        priority: u32,
    ) -> c_long;
    /// `lite_create_lock`.
    ///
    /// # Safety
    ///
    /// As [`sys::create_lock`].
    unsafe fn create_lock(&self, home: u32, lock: *mut LiteLock) -> c_long;
    /// `lite_ask_lock`.
    ///
    /// # Safety
    ///
    /// As [`sys::ask_lock`].
    unsafe fn ask_lock(&self, home: u32, number: u32, lock: *mut LiteLock) -> c_long;
    /// `lite_lock`.
    ///
    /// # Safety
    ///
    /// As [`sys::lock`].
    unsafe fn lock(&self, lock: *const LiteLock) -> c_long;
    /// `lite_unlock`.
    ///
    /// # Safety
    ///
    /// As [`sys::unlock`].
    unsafe fn unlock(&self, lock: *const LiteLock) -> c_long;
    /// `lite_set_priority`.
    fn set_priority(&self, priority: u32) -> c_long;
    /// Whether the program may start copies of itself as further processes
    /// using the same kernel (true only for the real system calls; an
    /// in-memory model lives and dies with one process).
    fn spawns_processes(&self) -> bool {
        false
    }
    /// Another process on this node, a member like this one, but without
    /// `CAP_NET_ADMIN`, the privilege joining and leaving need; `None` if
    /// this kernel cannot make one within this process (the real kernel:
    /// the caller starts a copy of the program under another user then).
    fn unprivileged_process(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Another process on this node, a member like this one, of user
    /// `uid` (its real uid, which LITE's quotas charge) and group `uid`
    /// and without any privilege (neither `CAP_NET_ADMIN` nor
    /// `CAP_IPC_LOCK`); `None` if this kernel cannot make one within this
    /// process (the real kernel: the caller starts a copy of the program
    /// as that user then).
    fn process_of_user(&self, _uid: u32) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Like [`Kernel::process_of_user`], but of group `gid` (its real,
    /// effective and file system gid, with no supplementary group), which
    /// may be the node's administrators' group
    /// ([`debugfs::ADMIN_GROUP_FILE`]); `None` if this kernel cannot make
    /// one within this process (the real kernel: the caller starts a copy
    /// of the program as that user and group then).
    fn process_of_user_and_group(&self, _uid: u32, _gid: u32) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Sets the soft `RLIMIT_MEMLOCK` of this process, which bounds the
    /// memory it may register (`lite_register_lmr` fails with `ENOMEM`
    /// beyond it, unless the process has `CAP_IPC_LOCK`), to `bytes`, or
    /// to its hard limit for `None`; returns the soft limit then in force
    /// (`u64::MAX`: none). `None` if this kernel cannot.
    fn set_memlock_limit(&self, _bytes: Option<u64>) -> Option<std::io::Result<u64>> {
        None
    }
    /// Runs the in-kernel KUnit suite `suite` and returns its KTAP results,
    /// or `None` if this kernel cannot (an in-memory model).
    fn run_kunit_suite(&self, _suite: &str) -> Option<std::io::Result<String>> {
        None
    }
    /// Reads file `name` of LITE's debugfs directory (see [`debugfs`]),
    /// or `None` if this kernel has none.
    fn read_debugfs(&self, _name: &str) -> Option<std::io::Result<String>> {
        None
    }
    /// Whether the node has an RDMA device whose own checks of remote
    /// access can be probed (false for an in-memory model).
    fn has_rdma_device(&self) -> bool {
        false
    }
    /// Whether `lite_join` proves the cluster's secret, found in the
    /// calling process's kernel keyrings, to the manager (false for an
    /// in-memory model, which has no keyrings).
    fn checks_cluster_secret(&self) -> bool {
        false
    }
    /// Writes `text` to file `name` of LITE's debugfs directory, or `None`
    /// if this kernel has none.
    fn write_debugfs(&self, _name: &str, _text: &str) -> Option<std::io::Result<()>> {
        None
    }
    /// Whether writing a node id to debugfs file
    /// [`debugfs::RPC_FAULT_FILE`] makes this node's next RPC request to
    /// that node carry a corrupt header (true only for the real kernel:
    /// an in-memory model has no rings to corrupt).
    fn injects_rpc_faults(&self) -> bool {
        false
    }
    /// Unloads LITE's module, which takes the node out of its cluster as
    /// `lite_leave` does, checks that LITE's system calls return `ENOSYS`
    /// while it is unloaded, and loads it again (not joined), with the
    /// debugfs settings it had; `None` if LITE is not a loadable module
    /// here (built in, or an in-memory model).
    fn reload_module(&self) -> Option<Result<(), String>> {
        None
    }
    /// Changes the guest's second Soft-RoCE device (see [`SecondDevice`]);
    /// `None` where there is none to change (an in-memory model).
    fn second_device(&self, _step: SecondDevice) -> Option<Result<(), String>> {
        None
    }
}

/// Exists while LITE is loaded as a module (not when it is built in).
const MODULE_STATE_FILE: &str = "/sys/module/lite/initstate";

/// LITE's debugfs settings that a reload would reset to their defaults:
/// the node's timing, which must stay the one the manager was given.
const SETTINGS_KEPT_ACROSS_RELOAD: [&str; 2] =
    [debugfs::MANAGER_TIMEOUT_FILE, debugfs::HEARTBEAT_FILE];

/// [`Kernel::reload_module`] of the real kernel.
fn reload_lite_module(kernel: &Syscalls) -> Result<(), String> {
    let mut settings = Vec::new();
    for name in SETTINGS_KEPT_ACROSS_RELOAD {
        let value = debugfs::read_file(name).map_err(|e| format!("reading {name}: {e}"))?;
        settings.push((name, value));
    }
    let device = guest_devices::read_device_param()?;
    run_tool("rmmod", &["lite"])?;
    crate::errno::expect_errno(kernel.get_node_id(), libc::ENOSYS)
        .map_err(|e| format!("get_node_id while LITE is unloaded: {e}"))?;
    // The device choice is a module parameter: it is given back as one.
    let device_param = format!("device={device}");
    let mut modprobe = vec!["lite"];
    if !device.is_empty() {
        modprobe.push(&device_param);
    }
    run_tool("modprobe", &modprobe)?;
    for (name, value) in settings {
        debugfs::write_file(name, value.trim())
            .map_err(|e| format!("restoring {name} after the reload: {e}"))?;
    }
    Ok(())
}

/// The real system calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct Syscalls;

impl Kernel for Syscalls {
    unsafe fn join(&self, cm_ip: *const c_char, cm_port: u32, ib_port: u32) -> c_long {
        // SAFETY: the caller upholds sys::join's contract.
        unsafe { sys::join(cm_ip, cm_port, ib_port) }
    }

    fn leave(&self, flags: u32) -> c_long {
        sys::leave(flags)
    }

    fn get_node_id(&self) -> c_long {
        sys::get_node_id()
    }

    fn get_total_node(&self) -> c_long {
        sys::get_total_node()
    }

    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long {
        sys::alloc_remote(node, size, flags, password)
    }

    unsafe fn rdma_write(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::rdma_write's contract.
        unsafe { sys::rdma_write(handle, buf, size, offset, priority, password) }
    }

    unsafe fn rdma_read(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::rdma_read's contract.
        unsafe { sys::rdma_read(handle, buf, size, offset, priority, password) }
    }

    fn free(&self, handle: u64) -> c_long {
        sys::free(handle)
    }

    fn dist_barrier(&self, num: u32) -> c_long {
        sys::dist_barrier(num)
    }

    fn remote_memset(&self, handle: u64, offset: u64, size: u64, byte: u32) -> c_long {
        sys::remote_memset(handle, offset, size, byte)
    }

    fn memcpy(
        &self,
        src_handle: u64,
        src_offset: u64,
        dst_handle: u64,
        dst_offset: u64,
        size: u64,
    ) -> c_long {
        sys::memcpy(src_handle, src_offset, dst_handle, dst_offset, size)
    }

    fn memmove(
        &self,
        src_handle: u64,
        src_offset: u64,
        dst_handle: u64,
        dst_offset: u64,
        size: u64,
    ) -> c_long {
        sys::memmove(src_handle, src_offset, dst_handle, dst_offset, size)
    }

    unsafe fn wrap_alloc(
        &self,
        data: *const c_void,
        size: u64,
        name: u64,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::wrap_alloc's contract.
        unsafe { sys::wrap_alloc(data, size, name, password) }
    }

    fn add_ask_mr_table(&self, name: u64, handle: u64, permission: u64, password: u64) -> c_long {
        sys::add_ask_mr_table(name, handle, permission, password)
    }

    fn ask_lmr(&self, node: u32, name: u64, permission: u64, password: u64) -> c_long {
        sys::ask_lmr(node, name, permission, password)
    }

    fn umap_lmr(&self, handle: u64) -> c_long {
        sys::umap_lmr(handle)
    }

    unsafe fn register_lmr(
        &self,
        buf: *mut c_void,
        size: u64,
        permission: u64,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::register_lmr's contract.
        unsafe { sys::register_lmr(buf, size, permission, password) }
    }

    fn deregister_lmr(&self, handle: u64) -> c_long {
        sys::deregister_lmr(handle)
    }

    unsafe fn rdma_write_async(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::rdma_write_async's contract.
        unsafe { sys::rdma_write_async(handle, buf, size, offset, priority, password) }
    }

    unsafe fn rdma_read_async(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::rdma_read_async's contract.
        unsafe { sys::rdma_read_async(handle, buf, size, offset, priority, password) }
    }

    fn async_wait(&self, op: u64, flags: u32) -> c_long {
        sys::async_wait(op, flags)
    }

    fn fence(&self) -> c_long {
        sys::fence()
    }

    unsafe fn get_stats(&self, stats: *mut LiteStats, size: u64) -> c_long {
        // SAFETY: the caller upholds sys::get_stats's contract.
        unsafe { sys::get_stats(stats, size) }
    }

    unsafe fn register_application(
        &self,
        port: u32,
        max_size: u64,
        name: *const c_char,
        name_len: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::register_application's contract.
        unsafe { sys::register_application(port, max_size, name, name_len) }
    }

    fn unregister_application(&self, port: u32) -> c_long {
        sys::unregister_application(port)
    }

    fn query_port(&self, node: u32, port: u32) -> c_long {
        sys::query_port(node, port)
    }

    unsafe fn send_reply_imm(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::send_reply_imm's contract.
        unsafe { sys::send_reply_imm(node, port_priority, msg, size, reply, max_reply) }
    }

    unsafe fn send_reply_imm_async(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long {
        // SAFETY: the caller upholds sys::send_reply_imm_async's contract.
        unsafe { sys::send_reply_imm_async(node, port_priority, msg, size, reply, max_reply) }
    }

    unsafe fn send(&self, node: u32, port_priority: u32, msg: *const c_void, size: u64) -> c_long {
        // SAFETY: the caller upholds sys::send's contract.
        unsafe { sys::send(node, port_priority, msg, size) }
    }

    unsafe fn receive_message(
        &self,
        port: u32,
        buf: *mut c_void,
        max_size: u64,
        descriptor: *mut u64,
        flags: u32,
    ) -> c_long {
        // SAFETY: the caller upholds sys::receive_message's contract.
        unsafe { sys::receive_message(port, buf, max_size, descriptor, flags) }
    }

    unsafe fn reply_message(&self, buf: *const c_void, size: u64, descriptor: u64) -> c_long {
        // SAFETY: the caller upholds sys::reply_message's contract.
        unsafe { sys::reply_message(buf, size, descriptor) }
    }

    unsafe fn reply_and_receive_message(
        &self,
        buf: *const c_void,
        size: u64,
        descriptor: u64,
        next: *mut LiteReceive,
    ) -> c_long {
        // SAFETY: the caller upholds sys::reply_and_receive_message's contract.
        unsafe { sys::reply_and_receive_message(buf, size, descriptor, next) }
    }

    unsafe fn send_reply_multicast(&self, call: *mut LiteMulticast) -> c_long {
        // SAFETY: the caller upholds sys::send_reply_multicast's contract.
        unsafe { sys::send_reply_multicast(call) }
    }

    unsafe fn fetch_add(&self, handle: u64, old: *mut u64, value: u64, priority: u32) -> c_long {
        // SAFETY: the caller upholds sys::fetch_add's contract.
        unsafe { sys::fetch_add(handle, old, value, priority) }
    }

    unsafe fn compare_swp(
        &self,
        handle: u64,
        old: *mut u64,
        expected: u64,
        new_value: u64,
        priority: u32,
    ) -> c_long {
        // SAFETY: the caller upholds sys::compare_swp's contract.
        unsafe { sys::compare_swp(handle, old, expected, new_value, priority) }
    }

    unsafe fn create_lock(&self, home: u32, lock: *mut LiteLock) -> c_long {
        // SAFETY: the caller upholds sys::create_lock's contract.
        unsafe { sys::create_lock(home, lock) }
    }

    unsafe fn ask_lock(&self, home: u32, number: u32, lock: *mut LiteLock) -> c_long {
        // SAFETY: the caller upholds sys::ask_lock's contract.
        unsafe { sys::ask_lock(home, number, lock) }
    }

    unsafe fn lock(&self, lock: *const LiteLock) -> c_long {
        // SAFETY: the caller upholds sys::lock's contract.
        unsafe { sys::lock(lock) }
    }

    unsafe fn unlock(&self, lock: *const LiteLock) -> c_long {
        // SAFETY: the caller upholds sys::unlock's contract.
        unsafe { sys::unlock(lock) }
    }

    fn set_priority(&self, priority: u32) -> c_long {
        sys::set_priority(priority)
    }

    fn spawns_processes(&self) -> bool {
        true
    }

    fn set_memlock_limit(&self, bytes: Option<u64>) -> Option<std::io::Result<u64>> {
        Some(set_memlock_soft_limit(bytes))
    }

    fn run_kunit_suite(&self, suite: &str) -> Option<std::io::Result<String>> {
        let dir = std::path::Path::new(KUNIT_DEBUGFS).join(suite);
        Some(
            std::fs::write(dir.join("run"), "run\n")
                .and_then(|()| std::fs::read_to_string(dir.join("results"))),
        )
    }

    fn read_debugfs(&self, name: &str) -> Option<std::io::Result<String>> {
        Some(debugfs::read_file(name))
    }

    fn write_debugfs(&self, name: &str, text: &str) -> Option<std::io::Result<()>> {
        Some(debugfs::write_file(name, text))
    }

    fn injects_rpc_faults(&self) -> bool {
        true
    }

    fn reload_module(&self) -> Option<Result<(), String>> {
        std::path::Path::new(MODULE_STATE_FILE)
            .exists()
            .then(|| reload_lite_module(self))
    }

    fn second_device(&self, step: SecondDevice) -> Option<Result<(), String>> {
        Some(guest_devices::change_second_device(step))
    }

    fn has_rdma_device(&self) -> bool {
        true
    }

    fn checks_cluster_secret(&self) -> bool {
        true
    }
}

/// Sets this process's soft `RLIMIT_MEMLOCK` to `bytes`, or to the hard
/// limit for `None`; the soft limit then in force.
fn set_memlock_soft_limit(bytes: Option<u64>) -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    limit.rlim_cur = bytes.unwrap_or(limit.rlim_max);
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit.rlim_cur)
}

/// Where KUnit offers its suites for running after boot.
const KUNIT_DEBUGFS: &str = "/sys/kernel/debug/kunit";

/// An LMR reached through a [`Kernel`]; freed on drop unless freed
/// explicitly with [`Region::free`].
pub struct Region<'k, K: Kernel> {
    kernel: &'k K,
    handle: u64,
    size: u64,
    password: u64,
}

impl<'k, K: Kernel> Region<'k, K> {
    /// Allocates `size` bytes on `node`; the error is the raw result.
    pub fn alloc(
        kernel: &'k K,
        node: u32,
        size: u64,
        flags: u32,
        password: u64,
    ) -> Result<Self, String> {
        let ret = kernel.alloc_remote(node, size, flags, password);
        match u64::try_from(ret) {
            Ok(handle) if handle > 0 => Ok(Region {
                kernel,
                handle,
                size,
                password,
            }),
            _ => Err(format!("alloc_remote returned {}", describe_result(ret))),
        }
    }

    /// The LMR handle.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Writes `data` at `offset`; returns the raw result.
    pub fn write_raw(&self, offset: u64, data: &[u8], priority: u32, password: u64) -> c_long {
        // SAFETY: `data` is readable for its whole length during the call.
        unsafe {
            self.kernel.rdma_write(
                self.handle,
                data.as_ptr().cast(),
                data.len() as u64,
                offset,
                priority,
                password,
            )
        }
    }

    /// Reads into `buf` from `offset`; returns the raw result.
    pub fn read_raw(&self, offset: u64, buf: &mut [u8], priority: u32, password: u64) -> c_long {
        // SAFETY: `buf` is exclusively borrowed and writable for its whole
        // length during the call.
        unsafe {
            self.kernel.rdma_read(
                self.handle,
                buf.as_mut_ptr().cast(),
                buf.len() as u64,
                offset,
                priority,
                password,
            )
        }
    }

    /// Writes `data` at `offset` with the region's password.
    pub fn write(&self, offset: u64, data: &[u8], priority: u32) -> Result<(), String> {
        let ret = self.write_raw(offset, data, priority, self.password);
        success(ret).map_err(|e| format!("write of {} B at offset {offset}: {e}", data.len()))
    }

    /// Fills `buf` from `offset` with the region's password.
    pub fn read(&self, offset: u64, buf: &mut [u8], priority: u32) -> Result<(), String> {
        let ret = self.read_raw(offset, buf, priority, self.password);
        success(ret).map_err(|e| format!("read of {} B at offset {offset}: {e}", buf.len()))
    }

    /// Frees the LMR and reports the kernel's verdict.
    pub fn free(self) -> Result<(), String> {
        let region = ManuallyDrop::new(self);
        success(region.kernel.free(region.handle)).map_err(|e| format!("free: {e}"))
    }
}

impl<K: Kernel> Drop for Region<'_, K> {
    fn drop(&mut self) {
        // Only reached on paths that already report a failure.
        self.kernel.free(self.handle);
    }
}

/// `Ok` for a zero result, otherwise a description of what came back.
pub fn success(ret: c_long) -> Result<(), String> {
    if ret == 0 {
        Ok(())
    } else {
        Err(format!("returned {}", describe_result(ret)))
    }
}
