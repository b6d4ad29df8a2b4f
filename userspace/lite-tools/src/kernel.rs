//! The LITE system calls as a trait, so that the cluster test can also run
//! against an in-memory model of the kernel on hosts without LITE.

use std::mem::ManuallyDrop;

use libc::c_long;

use crate::debugfs;
use crate::errno::describe_result;
use crate::guest_devices::{self, run_tool, SecondDevice};
use crate::kernel_message_module;

/// LITE's system calls, one line each, so that no kernel repeats the
/// signatures, in groups that kernels make alike: `kernel_calls!(MODE:
/// GROUP)`, GROUP `all`, `transfers`, `calls_with_reply`, `rpc` or `rest`,
/// MODE `declare` (the trait's), `sys` (the real system calls), `via
/// METHOD` (`self.METHOD(name, (arguments))`) or `(PATH) with HOOK`
/// (`self.HOOK(|context| self.PATH.call(context, arguments))`, for a
/// model's part that needs what HOOK knows of the caller).
macro_rules! kernel_calls {
    ($mode:tt: all) => {
        $crate::kernel::kernel_calls!($mode: transfers);
        $crate::kernel::kernel_calls!($mode: calls_with_reply);
        $crate::kernel::kernel_calls!($mode: rpc);
        $crate::kernel::kernel_calls!($mode: rest);
    };
    (via $method:ident: $group:ident) => {
        $crate::kernel::kernel_calls!(@$group (via $method));
    };
    ($path:tt with $hook:ident: $group:ident) => {
        $crate::kernel::kernel_calls!(@$group (with $hook $path));
    };
    ($mode:ident: $group:ident) => { $crate::kernel::kernel_calls!(@$group $mode); };
    (@transfers $m:tt) => { $crate::kernel::kernel_calls!(@items $m
        [unsafe rdma_write(handle: u64, buf: *const ::std::ffi::c_void, size: u64, offset: u64,
            priority: u32, password: u64)]
        [unsafe rdma_read(handle: u64, buf: *mut ::std::ffi::c_void, size: u64, offset: u64,
            priority: u32, password: u64)]
        [unsafe rdma_write_async(handle: u64, buf: *const ::std::ffi::c_void, size: u64,
            offset: u64, priority: u32, password: u64)]
        [unsafe rdma_read_async(handle: u64, buf: *mut ::std::ffi::c_void, size: u64,
            offset: u64, priority: u32, password: u64)]); };
    (@calls_with_reply $m:tt) => { $crate::kernel::kernel_calls!(@items $m
        [unsafe send_reply_imm(node: u32, port_priority: u32, msg: *const ::std::ffi::c_void,
            size: u64, reply: *mut ::std::ffi::c_void, max_reply: u64)]
        [unsafe send_reply_imm_async(node: u32, port_priority: u32,
            msg: *const ::std::ffi::c_void, size: u64, reply: *mut ::std::ffi::c_void,
            max_reply: u64)]); };
    (@rpc $m:tt) => { $crate::kernel::kernel_calls!(@items $m
        [unregister_application(port: u32)]
        [query_port(node: u32, port: u32)]
        [unsafe receive_message(port: u32, buf: *mut ::std::ffi::c_void, max_size: u64,
            descriptor: *mut u64, flags: u32)]
        [unsafe reply_and_receive_message(buf: *const ::std::ffi::c_void, size: u64,
            descriptor: u64, next: *mut ::lite::sys::LiteReceive)]
        [unsafe send_reply_multicast(call: *mut ::lite::sys::LiteMulticast)]); };
    (@rest $m:tt) => { $crate::kernel::kernel_calls!(@items $m
        [unsafe join(cm_ip: *const ::std::ffi::c_char, cm_port: u32, ib_port: u32)]
        [leave(flags: u32)]
        [get_node_id()]
        [get_total_node()]
        [alloc_remote(node: u32, size: u64, flags: u32, password: u64)]
        [free(handle: u64)]
        [dist_barrier(num: u32)]
        [remote_memset(handle: u64, offset: u64, size: u64, byte: u32)]
        [memcpy(src_handle: u64, src_offset: u64, dst_handle: u64, dst_offset: u64, size: u64)]
        [memmove(src_handle: u64, src_offset: u64, dst_handle: u64, dst_offset: u64, size: u64)]
        [unsafe wrap_alloc(data: *const ::std::ffi::c_void, size: u64, name: u64, password: u64)]
        [add_ask_mr_table(name: u64, handle: u64, permission: u64, password: u64)]
        [ask_lmr(node: u32, name: u64, permission: u64, password: u64)]
        [umap_lmr(handle: u64)]
        [unsafe register_lmr(buf: *mut ::std::ffi::c_void, size: u64, permission: u64,
            password: u64)]
        [deregister_lmr(handle: u64)]
        [async_wait(op: u64, flags: u32)]
        [fence()]
        [unsafe get_stats(stats: *mut ::lite::sys::LiteStats, size: u64)]
        [unsafe register_application(port: u32, max_size: u64, name: *const ::std::ffi::c_char,
            name_len: u64)]
        [unsafe send(node: u32, port_priority: u32, msg: *const ::std::ffi::c_void, size: u64)]
        [unsafe reply_message(buf: *const ::std::ffi::c_void, size: u64, descriptor: u64)]
        [unsafe fetch_add(handle: u64, old: *mut u64, value: u64, priority: u32)]
        [unsafe compare_swp(handle: u64, old: *mut u64, expected: u64, new_value: u64,
            priority: u32)]
        [unsafe create_lock(home: u32, lock: *mut ::lite::sys::LiteLock)]
        [unsafe ask_lock(home: u32, number: u32, lock: *mut ::lite::sys::LiteLock)]
        [unsafe lock(lock: *const ::lite::sys::LiteLock)]
        [unsafe unlock(lock: *const ::lite::sys::LiteLock)]
        [set_priority(priority: u32)]); };
    (@items $m:tt $([$($item:tt)*])*) => {
        $($crate::kernel::kernel_calls!(@item $m $($item)*);)*
    };
    (@item $m:tt unsafe $name:ident $args:tt) => {
        $crate::kernel::kernel_calls!(@fn $m [unsafe] $name $args);
    };
    (@item $m:tt $name:ident $args:tt) => { $crate::kernel::kernel_calls!(@fn $m [] $name $args); };
    (@fn declare [$($u:tt)?] $name:ident($($arg:ident: $ty:ty),*)) => {
        #[doc = concat!("`lite_", stringify!($name), "`.")]
        $(#[doc = concat!("\n# Safety\n\nAs [`lite::sys::", stringify!($name), "`], an `",
            stringify!($u), "` call.")])?
        $($u)? fn $name(&self, $($arg: $ty),*) -> ::libc::c_long;
    };
    (@fn sys [$($u:tt)?] $name:ident($($arg:ident: $ty:ty),*)) => {
        $($u)? fn $name(&self, $($arg: $ty),*) -> ::libc::c_long {
            // SAFETY (of an unsafe call): the caller upholds the system call's contract.
            $($u)? { ::lite::sys::$name($($arg),*) }
        }
    };
    (@fn (with $hook:ident ($($field:ident).+)) [$($u:tt)?]
        $name:ident($($arg:ident: $ty:ty),*)) => {
        $($u)? fn $name(&self, $($arg: $ty),*) -> ::libc::c_long {
            // SAFETY (of an unsafe call): the caller upholds the contract, the same underneath.
            self.$hook(|context| $($u)? { self.$($field).+.$name(context, $($arg),*) })
        }
    };
    (@fn (via $method:ident) [$($u:tt)?] $name:ident($($arg:ident: $ty:ty),*)) => {
        $($u)? fn $name(&self, $($arg: $ty),*) -> ::libc::c_long {
            // SAFETY: the caller upholds the contract, which the method relies on.
            $($u)? { self.$method(stringify!($name), ($($arg),*)) }
        }
    };
}
pub(crate) use kernel_calls;

/// User and group of `nobody`, whom [`Kernel::unprivileged_process`] runs as.
pub const NOBODY: u32 = 65534;

/// The raw LITE system calls ([`lite::sys`] states their contracts), each
/// returning the raw result (>= 0 or a negative errno). The methods after
/// them return `None`, false or `-ENOSYS` where a kernel lacks what they
/// need: an in-memory model has no debugfs, modules, devices, keyrings or
/// mappings.
///
/// Shared between threads: the RPC cases call it from several at once.
pub trait Kernel: Sync {
    kernel_calls!(declare: all);
    /// Whether these are the real system calls, whose capabilities an
    /// in-memory model lacks: the four `bool` methods below follow it.
    fn is_real(&self) -> bool {
        false
    }
    /// Whether copies of the program started as processes share this kernel
    /// (an in-memory model lives and dies with one process).
    fn spawns_processes(&self) -> bool {
        self.is_real()
    }
    /// Another process on this node, a member, running as `nobody` without
    /// `CAP_NET_ADMIN`; `None` if this kernel cannot make one within this
    /// process (the real kernel: the caller starts a copy under that user).
    fn unprivileged_process(&self) -> Option<Self>
    where
        Self: Sized,
    {
        self.process_of_user(NOBODY)
    }
    /// Like [`Kernel::unprivileged_process`], but of user `uid` (its real
    /// uid, which LITE's quotas charge) and group `uid`, and without
    /// `CAP_IPC_LOCK` either.
    fn process_of_user(&self, uid: u32) -> Option<Self>
    where
        Self: Sized,
    {
        self.process_of_user_and_group(uid, uid)
    }
    /// Like [`Kernel::process_of_user`], but of group `gid` (real, effective
    /// and file system gid, no supplementary group), which may be the
    /// node's administrators' group ([`debugfs::ADMIN_GROUP_FILE`]).
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
    /// The KTAP results of KUnit suite `suite`, run now.
    fn run_kunit_suite(&self, _suite: &str) -> Option<std::io::Result<String>> {
        None
    }
    /// File `name` of LITE's debugfs directory ([`debugfs`]).
    fn read_debugfs(&self, _name: &str) -> Option<std::io::Result<String>> {
        None
    }
    /// Whether an RDMA device's own checks of remote access can be probed.
    fn has_rdma_device(&self) -> bool {
        self.is_real()
    }
    /// Whether `lite_join` proves the cluster's secret from the caller's
    /// keyrings to the manager.
    fn checks_cluster_secret(&self) -> bool {
        self.is_real()
    }
    /// Writes `text` to file `name` of LITE's debugfs directory.
    fn write_debugfs(&self, _name: &str, _text: &str) -> Option<std::io::Result<()>> {
        None
    }
    /// Whether a node id written to [`debugfs::RPC_FAULT_FILE`] makes the
    /// next RPC request to that node carry a corrupt header.
    fn injects_rpc_faults(&self) -> bool {
        self.is_real()
    }
    /// Unloads LITE's module, which takes the node out of its cluster as
    /// `lite_leave` does, checks that LITE's system calls return `ENOSYS`
    /// while it is unloaded, and loads it again (not joined), with the
    /// debugfs settings it had; `None` if LITE is not a loadable module
    /// here (built in, or an in-memory model).
    fn reload_module(&self) -> Option<Result<(), String>> {
        None
    }
    /// Changes the guest's second Soft-RoCE device ([`SecondDevice`]).
    fn second_device(&self, _step: SecondDevice) -> Option<Result<(), String>> {
        None
    }
    /// Loads [`kernel_message_module`], whose handler answers at once or,
    /// with `hold`, never.
    fn load_kernel_message_module(&self, _hold: bool) -> Option<Result<(), String>> {
        None
    }
    /// Unloads the kernel message module.
    fn unload_kernel_message_module(&self) -> Option<Result<(), String>> {
        None
    }
    /// One `liteapi_send_reply` of `size` bytes from this node's kernel
    /// (the module [`Kernel::load_kernel_message_module`] loaded) to the
    /// handler of `node`: 0 or the negative errno.
    fn kernel_message_call(&self, _node: u32, _size: u64) -> c_long {
        -c_long::from(libc::ENOSYS)
    }
    /// `lite_dsm_open`.
    fn dsm_open(
        &self,
        _node: u32,
        _name: u64,
        _size: u64,
        _flags: u32,
        _pw: u64,
    ) -> Option<c_long> {
        None
    }
}

/// Exists while LITE is loaded as a module (not when it is built in).
const MODULE_STATE_FILE: &str = "/sys/module/lite/initstate";

/// LITE's debugfs settings that a reload would reset to their defaults:
/// the node's timing, which must stay the one the manager was given.
const SETTINGS_KEPT_ACROSS_RELOAD: [&str; 2] =
    [debugfs::MANAGER_TIMEOUT_FILE, debugfs::HEARTBEAT_FILE];

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
    kernel_calls!(sys: all);

    fn is_real(&self) -> bool {
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

    fn reload_module(&self) -> Option<Result<(), String>> {
        std::path::Path::new(MODULE_STATE_FILE)
            .exists()
            .then(|| reload_lite_module(self))
    }

    fn second_device(&self, step: SecondDevice) -> Option<Result<(), String>> {
        Some(guest_devices::change_second_device(step))
    }

    fn load_kernel_message_module(&self, hold: bool) -> Option<Result<(), String>> {
        Some(kernel_message_module::load(hold))
    }

    fn unload_kernel_message_module(&self) -> Option<Result<(), String>> {
        Some(kernel_message_module::unload())
    }

    fn dsm_open(&self, node: u32, name: u64, size: u64, flags: u32, pw: u64) -> Option<c_long> {
        Some(lite::sys::dsm_open(node, name, size, flags, pw))
    }

    fn kernel_message_call(&self, node: u32, size: u64) -> c_long {
        match kernel_message_module::round_trips(node, size, 1) {
            Ok(_) => 0,
            Err(e) => -c_long::from(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
}

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
