//! Small helpers the newer cluster test cases share: raw transfers by
//! handle, barriers reported as test points, names, and user memory.

use std::ffi::c_void;
use std::fmt::Display;
use std::io::Write;
use std::time::Duration;

use libc::c_long;
use lite::sys::{LiteStats, PERM_READ, PERM_WRITE, PRIORITY_NONE};

use crate::deadline::{interrupt_at, Deadline};
use crate::errno::{describe_error, describe_result, errno_name, expect_errno, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::pattern;
use crate::tap::Tap;

use super::round_labels;

/// How long a barrier may wait. It waits for the slowest node's work since
/// the barrier before, which is bounded but can be long under emulation
/// (a program the cluster test runs gets three minutes, a wait for a peer
/// tens of seconds), and the first one for every node to boot and join.
pub const BARRIER_LIMIT: Duration = Duration::from_secs(10 * 60);

/// A barrier failed, its point and a bail-out are reported: the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfStep;

/// `Err` once the nodes are out of step.
pub type InStep = Result<(), OutOfStep>;

pub const NO_DEBUGFS: &str = "this kernel has no debugfs";

pub fn read_debugfs_as<K: Kernel, T, E: Display>(
    kernel: &K,
    file: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<T, String> {
    let text = kernel.read_debugfs(file).ok_or(NO_DEBUGFS)?;
    let text = text.map_err(|e| format!("reading {file}: {}", describe_error(&e)))?;
    parse(&text).map_err(|e| format!("{file}: {e}"))
}

pub fn write_debugfs_line<K: Kernel>(
    kernel: &K,
    file: &str,
    line: impl Display,
) -> Result<(), String> {
    let written = kernel
        .write_debugfs(file, &format!("{line}\n"))
        .ok_or(NO_DEBUGFS)?;
    written.map_err(|e| format!("writing \"{line}\" to {file}: {}", describe_error(&e)))
}

/// `file` must refuse `line` with one of `errnos`.
pub fn refused_debugfs_line<K: Kernel>(
    kernel: &K,
    file: &str,
    line: &str,
    errnos: &[i32],
) -> Result<(), String> {
    let expected: Vec<&str> = errnos.iter().map(|&errno| errno_name(errno)).collect();
    let expected = expected.join(" or ");
    match kernel
        .write_debugfs(file, &format!("{line}\n"))
        .ok_or(NO_DEBUGFS)?
    {
        Ok(()) => Err(format!("the write went through; expected {expected}")),
        Err(e) => unless(errnos.contains(&e.raw_os_error().unwrap_or(0)), || {
            format!("expected {expected}, got {}", describe_error(&e))
        }),
    }
}

pub fn write_at<K: Kernel>(kernel: &K, handle: u64, offset: u64, data: &[u8], pw: u64) -> c_long {
    let (from, len) = (data.as_ptr().cast(), data.len() as u64);
    // SAFETY: `data` is readable for its whole length during the call.
    unsafe { kernel.rdma_write(handle, from, len, offset, PRIORITY_NONE, pw) }
}

pub fn read_at<K: Kernel>(kernel: &K, handle: u64, offset: u64, buf: &mut [u8], pw: u64) -> c_long {
    let (into, len) = (buf.as_mut_ptr().cast(), buf.len() as u64);
    // SAFETY: `buf` is exclusively borrowed for the call.
    unsafe { kernel.rdma_read(handle, into, len, offset, PRIORITY_NONE, pw) }
}

pub fn read_vec<K: Kernel>(
    kernel: &K,
    handle: u64,
    offset: u64,
    len: usize,
    pw: u64,
) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len];
    let ret = read_at(kernel, handle, offset, &mut buf, pw);
    expect_zero(ret).map_err(|e| format!("read of {len} B at offset {offset}: {e}"))?;
    Ok(buf)
}

pub fn write_ok<K: Kernel>(
    kernel: &K,
    handle: u64,
    offset: u64,
    data: &[u8],
    pw: u64,
) -> Result<(), String> {
    expect_zero(write_at(kernel, handle, offset, data, pw))
        .map_err(|e| format!("write of {} B at offset {offset}: {e}", data.len()))
}

/// Whether an asynchronous operation failed with `-errno` at once or when reaped.
fn started_or_reaped_errno<K: Kernel>(kernel: &K, ret: c_long, errno: i32) -> Result<(), String> {
    if ret <= 0 {
        return expect_errno(ret, errno);
    }
    let reaped = kernel.async_wait(ret.unsigned_abs(), 0);
    expect_errno(reaped, errno).map_err(|e| format!("started as operation {ret}, reaped: {e}"))
}

/// A read-async whose failure may be reported either when it is started
/// or when it is reaped: passes when one of them is exactly `-errno`.
pub fn expect_async_read_errno<K: Kernel>(
    kernel: &K,
    handle: u64,
    buf: *mut c_void,
    size: u64,
    offset: u64,
    pw: u64,
    errno: i32,
) -> Result<(), String> {
    // SAFETY: callers pass either a buffer they own for `size` bytes that
    // outlives this call, or an address the kernel must reject; the
    // operation is reaped before returning.
    let ret = unsafe { kernel.rdma_read_async(handle, buf, size, offset, PRIORITY_NONE, pw) };
    started_or_reaped_errno(kernel, ret, errno)
}

/// A write-async that must fail with `-errno`, when started or reaped.
pub fn expect_async_write_errno<K: Kernel>(
    kernel: &K,
    handle: u64,
    buf: *const c_void,
    size: u64,
    offset: u64,
    pw: u64,
    errno: i32,
) -> Result<(), String> {
    // SAFETY: as for expect_async_read_errno; the data is taken before
    // the call returns.
    let ret = unsafe { kernel.rdma_write_async(handle, buf, size, offset, PRIORITY_NONE, pw) };
    started_or_reaped_errno(kernel, ret, errno)
}

/// Reports the point "`what` returns -ERRNO": whether `ret` is `-errno`.
pub fn check_errno<W: Write>(tap: &mut Tap<W>, what: &str, ret: c_long, errno: i32) -> bool {
    let description = format!("{what} returns -{}", errno_name(errno));
    tap.check(&description, expect_errno(ret, errno))
}

/// A table of calls that must fail: reports each row `what => call,
/// ERRNO;` as [`check_errno`] does, `prefix` before its `what`, calling
/// and reporting one row after the other.
macro_rules! check_errnos {
    ($tap:expr, $prefix:expr; $($what:expr => $ret:expr, $errno:expr;)+) => {
        $(
            let what = format!("{}{}", $prefix, $what);
            $crate::cluster_test::io::check_errno($tap, &what, $ret, $errno);
        )+
    };
}
pub(crate) use check_errnos;

/// A table of points: reports each row `description => outcome;` in turn.
macro_rules! check_each {
    ($tap:expr; $($description:expr => $outcome:expr;)+) => {
        $($tap.check(&$description, $outcome);)+
    };
}
pub(crate) use check_each;

pub fn check_zero<W: Write>(tap: &mut Tap<W>, description: &str, ret: c_long) -> bool {
    tap.check(description, expect_zero(ret))
}

/// Frees `lmr`, if there is one, as the point "node ME: free of WHAT".
pub fn check_free<K: Kernel, W: Write>(
    tap: &mut Tap<W>,
    me: u32,
    what: &str,
    lmr: Option<Region<'_, K>>,
) {
    if let Some(lmr) = lmr {
        tap.check(&format!("node {me}: free of {what}"), lmr.free());
    }
}

/// Whether `lmr` still holds the pattern of `seed`, read into `buf`
/// (poisoned first, so that a read that stores nothing fails).
pub fn unchanged<K: Kernel>(lmr: &Region<'_, K>, seed: u64, buf: &mut [u8]) -> Result<(), String> {
    pattern::poison(seed, 0, buf);
    lmr.read(0, buf, PRIORITY_NONE)?;
    pattern::verify(seed, 0, buf).map_err(|m| format!("changed: {m}"))
}

/// A check's verdict: passed if `ok`, else failed for `why`.
pub(crate) fn unless(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// Whether `result` is `Ok`, with its error, as a test point's verdict.
pub(crate) fn status<T>(result: &Result<T, String>) -> Result<(), String> {
    result.as_ref().map(drop).map_err(Clone::clone)
}

/// A new handle (> 0) or a description of the result.
pub fn handle_of(ret: c_long, what: &str) -> Result<u64, String> {
    match u64::try_from(ret) {
        Ok(handle) if handle > 0 => Ok(handle),
        _ => Err(format!("{what} returned {}", describe_result(ret))),
    }
}

/// The handle, or 0 (which every later call rejects) when it failed.
pub fn check_handle<W: Write>(tap: &mut Tap<W>, description: &str, ret: c_long) -> u64 {
    tap.check_value(description, handle_of(ret, "the call"))
        .unwrap_or(0)
}

const MEMBERS_POLL: Duration = Duration::from_millis(200);

/// Waits, within `limit`, until the cluster has `nodes` members as this
/// node sees it. Before the first barrier: it waits for every node to boot
/// and join, which can take minutes under emulation, and the kernel fails
/// a barrier that waits long for members that have not joined yet.
pub fn await_members<K: Kernel>(kernel: &K, nodes: u32, limit: Duration) -> Result<(), String> {
    let joined = Deadline::after(limit, format!("all {nodes} nodes to join"));
    loop {
        let total = kernel.get_total_node();
        if total < 0 {
            let total = describe_result(total);
            return Err(format!("get_total_node returned {total}"));
        }
        // More than expected is for the membership checks to report.
        if total >= c_long::from(nodes) {
            return Ok(());
        }
        let waited = joined.check();
        waited.map_err(|e| format!("{e} (get_total_node returns {total})"))?;
        std::thread::sleep(MEMBERS_POLL);
    }
}

pub fn barrier_failed(why: &str) -> String {
    format!("barrier failed: {why}")
}

/// Enters a barrier of `nodes` nodes, interrupted once `limit` passed;
/// `name` names it (`dist_barrier(4) after X`) in the failure, which is a
/// [`barrier_failed`] reason.
pub fn enter_barrier<K: Kernel>(
    kernel: &K,
    nodes: u32,
    limit: Duration,
    name: &str,
) -> Result<(), String> {
    let deadline = Deadline::after(limit, format!("every node to enter {name}"));
    let (ret, interrupted) = interrupt_at(&deadline, || kernel.dist_barrier(nodes));
    let why = describe_result(ret);
    match ret {
        0 => Ok(()),
        _ if interrupted => Err(barrier_failed(&format!("{why} ({})", deadline.expired()))),
        _ => Err(barrier_failed(&why)),
    }
}

/// Reports the failed barrier `point` and that the run ends here.
pub fn out_of_step<W: Write>(tap: &mut Tap<W>, point: &str, reason: &str) -> OutOfStep {
    tap.not_ok(
        &format!("{point}: {reason}"),
        "the nodes are out of step: this node's run ends here",
    );
    tap.bail_out("a barrier failed, the nodes are out of step");
    OutOfStep
}

/// Every node calls this at the same point; reports the result. A failed
/// barrier ends the run ([`OutOfStep`]), and so does one that other nodes
/// entered at another point ([`round_labels`]).
pub fn barrier<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    nodes: u32,
    after: &str,
) -> InStep {
    let name = format!("dist_barrier({nodes}) after {after}");
    let point = format!("{name} returns 0");
    let entered = round_labels::labelled(kernel, &name, || {
        enter_barrier(kernel, nodes, BARRIER_LIMIT, &name)
    });
    entered
        .map(|()| tap.ok(&point))
        .map_err(|reason| out_of_step(tap, &point, &reason))
}

pub fn name_of(kind: u16, node: u32) -> u64 {
    0x4c49_5445_0000_0000 | (u64::from(kind) << 16) | u64::from(node)
}

/// Publishes `handle` under `name` for reading and writing.
pub fn publish<K: Kernel>(kernel: &K, name: u64, handle: u64, pw: u64) -> Result<(), String> {
    expect_zero(kernel.add_ask_mr_table(name, handle, PERM_READ | PERM_WRITE, pw))
}

pub fn stats<K: Kernel>(kernel: &K) -> Result<LiteStats, String> {
    let mut stats = LiteStats::default();
    // SAFETY: `stats` is writable for its whole size.
    let ret = unsafe { kernel.get_stats(&mut stats, std::mem::size_of::<LiteStats>() as u64) };
    expect_zero(ret)
        .map(|()| stats)
        .map_err(|e| format!("get_stats: {e}"))
}

/// The counters of `s` that only this process's own LMRs, registrations,
/// mappings, names, handles and operations change, unlike the node-wide
/// ones (chunks, connections, locks, atomics, QoS).
pub fn own_counters(s: &LiteStats) -> [u64; 7] {
    [
        s.lmrs,
        s.registrations,
        s.mappings,
        s.published_names,
        s.handles,
        s.processes,
        s.async_in_flight,
    ]
}

/// Anonymous private memory from mmap, page aligned, for registration.
pub struct UserPages {
    address: *mut u8,
    len: usize,
}

impl UserPages {
    /// Maps `len` bytes (rounded up to pages), zero filled.
    pub fn new(len: usize) -> Result<Self, String> {
        let protection = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: an anonymous mapping at an address of the kernel's choice.
        let address = unsafe { libc::mmap(std::ptr::null_mut(), len, protection, flags, -1, 0) };
        if address == libc::MAP_FAILED {
            let error = std::io::Error::last_os_error();
            return Err(format!("mmap of {len} B: {error}"));
        }
        let address = address.cast();
        Ok(UserPages { address, len })
    }

    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len);
        // SAFETY: within the mapping.
        unsafe { self.address.add(offset) }
    }

    /// `lite_register_lmr` of the `len` bytes at `offset`; the raw result.
    ///
    /// # Safety
    ///
    /// The pages must outlive the registration: the caller deregisters it
    /// before dropping them.
    pub unsafe fn register<K: Kernel>(
        &self,
        kernel: &K,
        (offset, len): (usize, u64),
        perms: u64,
        pw: u64,
    ) -> c_long {
        assert!(offset as u64 + len <= self.len as u64);
        // SAFETY: the range lies within the mapping, which outlives the
        // registration as the caller promised.
        unsafe { kernel.register_lmr(self.at(offset).cast(), len, perms, pw) }
    }

    pub fn store(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len);
        // SAFETY: within the mapping; nothing else holds a reference.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.at(offset), data.len()) }
    }

    /// Copies `len` bytes at `offset` out of the mapping, as they are now
    /// (other nodes may have written them through a registration).
    pub fn load(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset + len <= self.len);
        let mut out = vec![0u8; len];
        for (i, byte) in out.iter_mut().enumerate() {
            // SAFETY: within the mapping; volatile, because the memory
            // changes behind the compiler's back.
            *byte = unsafe { std::ptr::read_volatile(self.at(offset + i)) };
        }
        out
    }
}

impl Drop for UserPages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.address.cast(), self.len) };
    }
}

/// What a scoped thread returned; `Err(panicked)` if it panicked.
pub(crate) fn outcome_of<T>(
    thread: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    panicked: &str,
) -> Result<T, String> {
    thread.join().unwrap_or_else(|_| Err(panicked.to_string()))
}
