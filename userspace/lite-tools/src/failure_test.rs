//! The node failure test run by `lite-failure-test`, as the README's
//! failure test describes it: the victim sets up state the survivors come
//! to depend on, says so ([`READY_MARKER`]) and is killed; the survivors
//! check every way they waited on it.
//!
//! Survivor A, the lowest id other than the victim's, keeps the victim's
//! locks W ("waited") and O ("orphaned"); survivor B, the survivor after A
//! ([`next_survivor`]), waits for lock W.
//!
//! Both roles go through the same barriers (with all `nodes`), each
//! marking the end of a phase:
//!
//! 1. everybody joined, and the victim has registered port [`VICTIM_PORT`]
//!    and loaded the kernel message module, whose handler holds every
//!    call ([`crate::kernel_message_module`]);
//! 2. the survivors found the victim (the only other node with the port)
//!    and allocated LMR A on it and LMR B on the next survivor, and loaded
//!    the kernel message module as a kernel caller; the victim
//!    created a lock on itself and locks W and O on survivor A, took all
//!    three and published their numbers and A's id in a lock record
//!    (taking a lock needs a peer, hence not before barrier 1);
//! 3. the survivors found the victim's lock (B also lock W, A lock O) and
//!    noted how many chunks they hold, with every survivor's LMR B
//!    allocated;
//! 4. the victim allocated a spread LMR, whose chunks the survivors hold;
//! 5. the survivors' traffic runs (a write to LMR A has succeeded, so the
//!    kill always comes after one); the victim then prints its marker.
//!
//! After barrier 5 each survivor runs T1 (writes to LMR A until a write
//! fails), T2 (calls the victim's port), T3 (waits for the victim's lock),
//! T4 (a barrier the victim never enters), T5 (checked traffic on LMR B)
//! and, where modules load, T7 (a kernel call to the victim's handler);
//! survivor B also T6, which waits for lock W. A call still blocked
//! [`HANG_AFTER`] after T1's last successful write is reported as hung;
//! its thread ends with the process. Once the death is known, survivor A
//! takes lock O, and the survivors' leave and rejoin cycles follow
//! ([`rejoin`]).
//!
//! Survivors report TAP; the victim only prints progress lines, since its
//! output ends wherever the kill cuts it off. Every wait is bounded, the
//! victim's barriers too ([`crate::deadline`]); a failed barrier leaves
//! the nodes out of step and ends the run.

use std::ffi::CString;
use std::io::Write;
use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use libc::c_long;
use lite::sys::{port_priority, LiteLock, CM_DEFAULT_PORT, PERM_READ, PRIORITY_NONE};

use crate::cluster_test::io::{
    await_members, barrier_failed, enter_barrier, handle_of, read_at, stats, status, unless,
    write_at,
};
use crate::cluster_test::password_of;
use crate::deadline::{bounded, spawn_reporting};
use crate::errno::{describe_result, errno_name, expect_errno, expect_value, expect_zero};
use crate::guest_devices::InterfaceAddress;
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::{lowest_other, others_in_ring_order};
use crate::resources::{self, Comparison, Counters, RESOURCES_FILE};
use crate::stats::monotonic_ns;
use crate::tap::{no_problems, Tap};
use crate::IB_PORT;

mod dsm;
pub mod overload;
pub mod rejoin;
mod victim;

pub use rejoin::{CyclePacing, CYCLES};
pub use victim::run_victim;

/// The victim's console line once the survivors wait on it; the harness
/// kills the victim's machine a few seconds after it appears.
pub const READY_MARKER: &str = "LITE-FAILURE-VICTIM ready";

/// The RPC port the victim registers: survivors find the victim by it and
/// call it, and nobody ever receives from it.
pub const VICTIM_PORT: u32 = 7;

const VICTIM_PORT_MAX_SIZE: u64 = 4096;

const KERNEL_MESSAGE_SIZE: u64 = 64;

/// Size of LMR A (on the victim) and LMR B (on the next survivor).
const LMR_SIZE: u64 = 1 << 20;

/// Three 4 MiB chunks, one per survivor of a four-node cluster.
const SPREAD_SIZE: u64 = 12 << 20;

/// Bytes per write of T1 and of the partition test's cut node.
pub(crate) const WRITE_SIZE: usize = 4096;

/// Bytes T5 writes and reads back on LMR B at a time.
const TRAFFIC_SIZE: usize = 16 * 1024;

/// Between T1's writes, T5's round trips and the partition test's cut
/// node's writes. Each VM has one CPU: a loop that never sleeps could
/// starve the thread that sends the node's heartbeats.
pub(crate) const LOOP_PAUSE: Duration = Duration::from_millis(2);

const LOCK_RECORD_NAME: u64 = 0x4641_494c_4c4f_434b;

const LOCK_RECORD_PASSWORD: u64 = 0x7669_6374_696d;

/// So that stale or foreign data is not taken for lock numbers.
const LOCK_RECORD_MAGIC: u32 = 0x4c4f_434b;

/// The magic, the victim's own lock, survivor A's id, locks W and O: each
/// a little-endian `u32`.
const LOCK_RECORD_LEN: usize = 20;

/// For a lock the victim could not create (numbers are below
/// `LITE_MAX_LOCKS`).
const NO_LOCK: u32 = u32::MAX;

/// Of the lock of O and every later unlock and lock of W and O: once the
/// death is known, nobody holds them.
const RELOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a call involving the victim may take to fail, counted from T1's
/// last successful write (the kill follows that write within milliseconds):
/// the manager declares a node dead after 3 s without heartbeat, and the
/// rest is for telling the survivors.
pub const MAX_STALL_MS: i64 = 4500;

/// A call still blocked this long after T1's last successful write hangs.
pub const HANG_AFTER: Duration = Duration::from_secs(60);

/// From the traffic's start to T1's failure: the harness kills the victim
/// 5 s after its marker, so this only ends a run nobody killed it in.
const FAILURE_WAIT: Duration = Duration::from_secs(180);

const CHUNKS_FREED_WITHIN: Duration = Duration::from_secs(10);

const CHUNK_POLL: Duration = Duration::from_millis(200);

/// T5 goes on this long after the calls returned, so that harm done by
/// the cleanup after the death shows.
const TRAFFIC_AFTER_RETURNS: Duration = Duration::from_secs(3);

/// Nodes boot at different speeds under emulation, and the first barrier
/// waits for the slowest.
const SETUP_BARRIER_TIMEOUT: Duration = Duration::from_secs(6 * 60);

const FIRST_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// A call under way may wait out the connection's retries.
const THREAD_STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Another survivor may first spend [`HANG_AFTER`] on a hung call.
const FINAL_BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

const WAIT_POLL: Duration = Duration::from_millis(100);

/// A kernel that the threads a test starts may share.
pub trait SharedKernel: Kernel + Send + 'static {}

impl<K: Kernel + Send + 'static> SharedKernel for K {}

named_enum! {
    /// Which part a node plays, named as on the command line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Role {
        /// Stays up and checks how the cluster copes.
        Survivor = "survivor",
        /// Sets up state the others depend on, then gets killed.
        Victim = "victim",
    }
}

/// What to test against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureConfig {
    /// Address of the cluster manager.
    pub cm: Ipv4Addr,
    /// Number of nodes, the victim included.
    pub nodes: u32,
    /// How the survivors' leave/rejoin cycles are paced.
    pub pacing: CyclePacing,
    /// How long the overload before the failure lasts (see [`overload`]);
    /// zero leaves it out.
    pub overload: Duration,
    /// The address of the leaver's second network interface, on which it
    /// changes RDMA devices during its cycles (see [`rejoin`]); `None`: it
    /// keeps its device.
    pub second_address: Option<InterfaceAddress>,
}

/// [`FailureConfig::overload`] on virtual machines: a minute.
pub const OVERLOAD: Duration = Duration::from_secs(60);

/// Joins the cluster (or finds this node's id if it is a member already).
pub(crate) fn join<K: Kernel>(kernel: &K, cm: Ipv4Addr) -> Result<u32, String> {
    let ret = join_call(kernel, cm);
    let ret = if ret == -c_long::from(libc::EISCONN) {
        kernel.get_node_id()
    } else {
        ret
    };
    match u32::try_from(ret) {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(format!("join {cm} returned {}", describe_result(ret))),
    }
}

/// `lite_join` with the manager at `cm`; its raw result.
pub(crate) fn join_call<K: Kernel>(kernel: &K, cm: Ipv4Addr) -> c_long {
    let address = CString::new(cm.to_string()).expect("an address's text has no NUL");
    // SAFETY: `address` is a NUL-terminated string the kernel only reads.
    unsafe { kernel.join(address.as_ptr(), CM_DEFAULT_PORT.into(), IB_PORT) }
}

/// What the victim publishes about the locks it holds; a number is `None`
/// for a lock it could not create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockRecord {
    /// The lock kept by the victim itself.
    pub own: Option<u32>,
    /// Survivor A, which keeps locks W and O.
    pub home: u32,
    /// Lock W, which survivor B waits for.
    pub waited: Option<u32>,
    /// Lock O, which nobody waits for.
    pub orphaned: Option<u32>,
}

/// The lock record the victim publishes.
pub fn encode_lock_record(record: &LockRecord) -> [u8; LOCK_RECORD_LEN] {
    let number = |n: Option<u32>| n.unwrap_or(NO_LOCK);
    let fields = [
        LOCK_RECORD_MAGIC,
        number(record.own),
        record.home,
        number(record.waited),
        number(record.orphaned),
    ];
    let mut bytes = [0u8; LOCK_RECORD_LEN];
    for (slot, field) in bytes.chunks_exact_mut(4).zip(fields) {
        slot.copy_from_slice(&field.to_le_bytes());
    }
    bytes
}

/// The lock record in `bytes`.
pub fn decode_lock_record(bytes: &[u8; LOCK_RECORD_LEN]) -> Result<LockRecord, String> {
    let mut fields = [0u32; LOCK_RECORD_LEN / 4];
    for (field, b) in fields.iter_mut().zip(bytes.chunks_exact(4)) {
        *field = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    let [magic, own, home, waited, orphaned] = fields;
    if magic != LOCK_RECORD_MAGIC {
        return Err(format!(
            "the record starts with {magic:#010x}, not {LOCK_RECORD_MAGIC:#010x}"
        ));
    }
    let number = |n: u32| (n != NO_LOCK).then_some(n);
    Ok(LockRecord {
        own: number(own),
        home,
        waited: number(waited),
        orphaned: number(orphaned),
    })
}

/// The one node other than `me` among 1..=nodes on which `has_port` finds
/// RPC port `port` (it returns `lite_query_port`'s result for a node).
pub fn find_port_owner(
    me: u32,
    nodes: u32,
    port: u32,
    has_port: impl Fn(u32) -> c_long,
) -> Result<u32, String> {
    let mut found = Vec::new();
    let mut answers = Vec::new();
    for node in (1..=nodes).filter(|&n| n != me) {
        let ret = has_port(node);
        if ret > 0 {
            found.push(node);
        }
        answers.push(format!("node {node}: {}", describe_result(ret)));
    }
    match found.as_slice() {
        [victim] => Ok(*victim),
        _ => Err(format!(
            "{} nodes have port {port} ({})",
            found.len(),
            answers.join(", ")
        )),
    }
}

/// The survivor after `me` in ascending order of ids, wrapping around;
/// `None` if `me` is the only survivor.
pub fn next_survivor(me: u32, victim: u32, nodes: u32) -> Option<u32> {
    others_in_ring_order(me, nodes)
        .into_iter()
        .find(|&n| n != victim)
}

fn held_chunks<K: Kernel>(kernel: &K) -> Result<u64, String> {
    stats(kernel).map(|s| s.held_chunks)
}

/// The cluster's size, or the error as text.
pub(crate) fn total_nodes<K: Kernel>(kernel: &K) -> Result<u64, String> {
    let ret = kernel.get_total_node();
    u64::try_from(ret).map_err(|_| describe_result(ret))
}

/// A value for humans, `?` if it could not be had.
pub(crate) fn or_unknown<T: std::fmt::Display, E>(value: &Result<T, E>) -> String {
    value.as_ref().map_or("?".to_string(), T::to_string)
}

/// A value of `lite_get_total_node` for humans.
pub(crate) fn describe_total(value: &Result<u64, String>) -> String {
    value.as_ref().map_or_else(Clone::clone, u64::to_string)
}

fn alloc<K: Kernel>(kernel: &K, node: u32, size: u64, password: u64) -> Result<u64, String> {
    handle_of(kernel.alloc_remote(node, size, 0, password), "alloc_remote")
}

/// Allocates `size` bytes on `node` as an LMR to reach by handle.
pub(crate) fn alloc_lmr<K: Kernel>(
    kernel: &K,
    node: u32,
    size: u64,
    password: u64,
) -> Result<Target, String> {
    let handle = alloc(kernel, node, size, password)?;
    Ok(Target {
        handle,
        size,
        password,
    })
}

/// Writes the pattern of `seed` over all of `lmr`; the call's result.
pub(crate) fn write_pattern<K: Kernel>(kernel: &K, lmr: Target, seed: u64) -> c_long {
    let mut data = vec![0u8; lmr.size as usize];
    pattern::fill(seed, 0, &mut data);
    write_at(kernel, lmr.handle, 0, &data, lmr.password)
}

/// Reads `len` bytes at `offset` of `lmr` into a buffer poisoned against
/// the pattern of `seed`, so that a read that stores nothing shows; the
/// call's result and the bytes.
pub(crate) fn read_poisoned<K: Kernel>(
    kernel: &K,
    lmr: Target,
    seed: u64,
    offset: u64,
    len: u64,
) -> (c_long, Vec<u8>) {
    let mut data = vec![0u8; len as usize];
    pattern::poison(seed, offset, &mut data);
    let ret = read_at(kernel, lmr.handle, offset, &mut data, lmr.password);
    (ret, data)
}

/// `node N`, or `none` without a node.
pub(crate) fn node_or_none(node: Option<u32>) -> String {
    node.map_or("none".to_string(), |n| format!("node {n}"))
}

/// For a test point or the victim's log.
fn describe_overload(length: Duration, overloaded: &Result<overload::Overload, String>) -> String {
    let done = match overloaded {
        Ok(o) => format!(
            ": {} calls, the slowest {} ms, {} requests served, {} CPU hog threads",
            o.calls,
            o.slowest.as_millis(),
            o.served,
            o.hog_threads
        ),
        Err(_) => String::new(),
    };
    format!(
        "overload: every node calls every node's port {} for {} s, none fails{done}",
        overload::OVERLOAD_PORT,
        length.as_secs_f32()
    )
}

/// A barrier of every node before the failure; `Err` names it by `after`.
fn enter_setup_barrier<K: Kernel>(kernel: &K, nodes: u32, after: &str) -> Result<(), String> {
    let name = format!("dist_barrier({nodes}) after {after}");
    enter_barrier(kernel, nodes, SETUP_BARRIER_TIMEOUT, &name).map_err(|e| format!("{name}: {e}"))
}

/// With a CPU hog on the real kernel; `barrier` as [`overload::run`]
/// takes it.
fn overload_phase<K: Kernel + Sync>(
    kernel: &K,
    me: u32,
    config: &FailureConfig,
    barrier: impl FnMut(&str) -> Result<(), String>,
) -> Result<overload::Overload, String> {
    let hog = kernel.spawns_processes();
    overload::run(kernel, me, config.nodes, config.overload, hog, barrier)
}

/// A survivor's part of the overload phase, reported; whether the nodes
/// are still in step.
fn survive_overload<K: Kernel + Sync, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    config: &FailureConfig,
) -> bool {
    let nodes = config.nodes;
    let mut in_step = true;
    let overloaded = overload_phase(kernel, me, config, |after| {
        enter_setup_barrier(kernel, nodes, after).inspect_err(|_| in_step = false)
    });
    tap.check(
        &describe_overload(config.overload, &overloaded),
        overloaded.map(drop),
    );
    tap.check(
        &format!("overload: the cluster still has its {nodes} nodes"),
        expect_value(kernel.get_total_node(), nodes.into()),
    );
    in_step
}

/// A barrier of `count` nodes as a test point, bounded by `timeout`;
/// whether it passed. A failed one says `barrier failed:` and why, and
/// leaves the nodes out of step: the caller ends its run.
pub(crate) fn barrier_point<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    count: u32,
    timeout: Duration,
    description: &str,
) -> bool {
    let returned = bounded(kernel, timeout, move |k| k.dist_barrier(count));
    match returned {
        Ok(0) => {
            tap.ok(description);
            true
        }
        failed => {
            let why = failed.map_or_else(|e| e, describe_result);
            tap.not_ok(
                &format!("{description}: {}", barrier_failed(&why)),
                "the nodes are out of step",
            );
            false
        }
    }
}

/// Joins as a test point; the node id, or `None` after bailing out.
pub(crate) fn join_point<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    cm: Ipv4Addr,
    nodes: u32,
) -> Option<u32> {
    let joined = join(kernel, cm);
    let description = format!(
        "join {cm}:{CM_DEFAULT_PORT} returns a node id in 1..={nodes} (got {})",
        joined.as_ref().map_or("none".to_string(), u32::to_string)
    );
    match joined {
        Ok(id) if (1..=nodes).contains(&id) => {
            tap.ok(&description);
            Some(id)
        }
        Ok(id) => {
            tap.not_ok(
                &description,
                &format!("got node id {id}; is --nodes right?"),
            );
            tap.bail_out("node id out of range");
            None
        }
        Err(reason) => {
            tap.not_ok(&description, &reason);
            tap.bail_out("cannot test a cluster this node is not part of");
            None
        }
    }
}

/// A barrier of every node before the failure (or the cut) as a test
/// point; a failed one leaves the nodes out of step, and nothing after it
/// would mean anything.
pub(crate) fn setup_barrier<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    nodes: u32,
    what: &str,
) -> bool {
    let ok = barrier_point(
        kernel,
        tap,
        nodes,
        SETUP_BARRIER_TIMEOUT,
        &format!("dist_barrier({nodes}) after {what} returns 0"),
    );
    if !ok {
        tap.bail_out("the nodes are out of step");
    }
    ok
}

/// `who` names the owner in the description ("the victim").
pub(crate) fn port_owner_point<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    nodes: u32,
    (port, who): (u32, &str),
) -> Option<u32> {
    let found = find_port_owner(me, nodes, port, |node| kernel.query_port(node, port));
    let shown = node_or_none(found.as_ref().ok().copied());
    tap.check_value(
        &format!("exactly one other node has RPC port {port}: {who} ({shown})"),
        found,
    )
}

/// `None` for what failed.
#[derive(Debug, Default)]
struct Setup {
    victim: Option<u32>,
    /// Holder of LMR B.
    next: Option<u32>,
    lmr_a: Option<Target>,
    lmr_b: Option<Target>,
    /// T7's caller; `None` where modules cannot be loaded.
    kernel_caller: Option<KernelCaller>,
    /// `None` where memory cannot be mapped.
    dsm: Option<dsm::Shared>,
}

/// The kernel message module, T7's caller.
#[derive(Debug)]
struct KernelCaller {
    loaded: bool,
    /// LITE's resource counters before it loaded.
    counters_before: Result<Counters, String>,
}

/// The counters of LITE's calls, which the calls to the dead node and the
/// module's handler must give back.
const CALL_COUNTERS: [&str; 2] = ["rpc_ports", "reply_slots"];

fn resource_counters<K: Kernel>(kernel: &K) -> Result<Counters, String> {
    let text = kernel
        .read_debugfs(RESOURCES_FILE)
        .ok_or("this kernel has no debugfs")?;
    resources::parse(&text.map_err(|e| format!("{RESOURCES_FILE}: {e}"))?)
}

/// Once the calls returned and T7's module unloaded, every
/// [`CALL_COUNTERS`] counter must be back.
fn check_calls_released<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, caller: &KernelCaller) {
    let compared = match (&caller.counters_before, &resource_counters(kernel)) {
        (Ok(before), Ok(now)) => Ok(resources::compare(before, now)),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    for name in CALL_COUNTERS {
        let comparison = compared
            .as_ref()
            .ok()
            .and_then(|all| all.iter().find(|c| c.name == name));
        let value = |side: fn(&Comparison) -> Option<u64>| {
            comparison
                .and_then(side)
                .map_or("?".to_string(), |v| v.to_string())
        };
        tap.check(
            &format!(
                "{name} back to its value before T7's module loaded ({} -> {})",
                value(|c| c.before),
                value(|c| c.after)
            ),
            match (&compared, comparison) {
                (Err(e), _) => Err(e.clone()),
                (Ok(_), Some(c)) => c.problem().map_or(Ok(()), Err),
                (Ok(_), None) => Err(format!("{name} is not a counter the check knows")),
            },
        );
    }
}

/// Through a mapping, dropped again before the victim dies.
fn read_lock_record<K: Kernel>(kernel: &K, victim: u32) -> Result<LockRecord, String> {
    let ret = kernel.ask_lmr(victim, LOCK_RECORD_NAME, PERM_READ, LOCK_RECORD_PASSWORD);
    let handle = handle_of(ret, "ask_lmr")?;
    let mut record = [0u8; LOCK_RECORD_LEN];
    let read = read_at(kernel, handle, 0, &mut record, LOCK_RECORD_PASSWORD);
    let unmapped = kernel.umap_lmr(handle);
    expect_zero(read).map_err(|e| format!("read: {e}"))?;
    expect_zero(unmapped).map_err(|e| format!("umap_lmr: {e}"))?;
    decode_lock_record(&record)
}

/// Phase 1 of a survivor.
fn set_up_survivor<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    nodes: u32,
) -> Setup {
    let mut setup = Setup::default();
    let password = password_of(me);
    let Some(victim) = port_owner_point(kernel, tap, me, nodes, (VICTIM_PORT, "the victim")) else {
        return setup;
    };
    setup.victim = Some(victim);
    if let Some(place) = dsm::Placement::of(victim, nodes) {
        setup.dsm = dsm::set_up(kernel, tap, me, place);
    }

    setup.lmr_a = tap.check_value(
        &format!("alloc_remote of 1 MiB on the victim (node {victim}) returns a handle (LMR A)"),
        alloc_lmr(kernel, victim, LMR_SIZE, password),
    );
    setup.next = next_survivor(me, victim, nodes);
    let lmr_b = match setup.next {
        Some(next) => alloc_lmr(kernel, next, LMR_SIZE, password),
        None => Err("no other survivor".to_string()),
    };
    let next = node_or_none(setup.next);
    setup.lmr_b = tap.check_value(
        &format!("alloc_remote of 1 MiB on the next survivor ({next}) returns a handle (LMR B)"),
        lmr_b,
    );
    let counters_before = resource_counters(kernel);
    setup.kernel_caller = kernel.load_kernel_message_module(false).map(|loaded| {
        let what = "the kernel message module loads (a kernel caller for T7)";
        let loaded = tap.check_value(what, loaded).is_some();
        KernelCaller {
            loaded,
            counters_before,
        }
    });
    setup
}

/// What a survivor does with the locks the victim holds on survivor A.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum LockDuty {
    /// Neither A nor B (or the lock record was not found).
    #[default]
    None,
    /// Survivor B: T6 waits for lock W, kept by `home`.
    WaitFor {
        home: u32,
        /// `None` if it was not found.
        lock: Option<LiteLock>,
    },
    /// Survivor A: takes lock O once the death is known.
    TakeOrphan {
        /// `None` if it was not found.
        lock: Option<LiteLock>,
    },
}

#[derive(Debug, Default, Clone, Copy)]
struct VictimLocks {
    /// The lock kept by the victim.
    own: Option<LiteLock>,
    duty: LockDuty,
}

fn describe_record(record: &LockRecord) -> String {
    let number = |n: Option<u32>| n.map_or("none".to_string(), |n| n.to_string());
    format!(
        "lock {} on itself, W {} and O {} on survivor A (node {})",
        number(record.own),
        number(record.waited),
        number(record.orphaned),
        record.home
    )
}

/// Every lock published, and survivor A the lowest id but the victim's.
fn check_record(record: &LockRecord, victim: u32, nodes: u32) -> Result<(), String> {
    let mut problems = Vec::new();
    for (number, lock) in [
        (record.own, "its own lock"),
        (record.waited, "lock W"),
        (record.orphaned, "lock O"),
    ] {
        if number.is_none() {
            problems.push(format!("the victim could not create {lock}"));
        }
    }
    let expected = lowest_other(victim, nodes);
    if Some(record.home) != expected {
        problems.push(format!(
            "survivor A should be the lowest id other than the victim's ({})",
            node_or_none(expected)
        ));
    }
    unless(problems.is_empty(), || problems.join("; "))
}

/// A test point if the victim published the lock; `suffix` follows the
/// call in the description.
fn ask_lock_point<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    home: u32,
    number: Option<u32>,
    suffix: &str,
) -> Option<LiteLock> {
    let number = number?;
    let mut lock = LiteLock::default();
    // SAFETY: `lock` is writable.
    let ret = unsafe { kernel.ask_lock(home, number, &mut lock) };
    tap.check(
        &format!("ask_lock(node {home}, {number}){suffix} returns 0"),
        expect_zero(ret),
    )
    .then_some(lock)
}

/// Phase 2 of a survivor: the victim's own lock, and lock W on survivor B
/// or lock O on survivor A.
fn find_victims_locks<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    victim: u32,
    nodes: u32,
) -> VictimLocks {
    let mut locks = VictimLocks::default();
    let record = read_lock_record(kernel, victim);
    let shown = record.as_ref().map_or("none".to_string(), describe_record);
    tap.check(
        &format!("the victim published the locks it holds ({shown})"),
        record
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|r| check_record(r, victim, nodes)),
    );
    let Ok(record) = record else {
        return locks;
    };
    locks.own = ask_lock_point(kernel, tap, victim, record.own, "");
    let home = record.home;
    if me == home {
        let lock = ask_lock_point(kernel, tap, home, record.orphaned, " (lock O)");
        locks.duty = LockDuty::TakeOrphan { lock };
    } else if next_survivor(home, victim, nodes) == Some(me) {
        let lock = ask_lock_point(kernel, tap, home, record.waited, " (lock W)");
        locks.duty = LockDuty::WaitFor { home, lock };
    }
    locks
}

named_enum! {
    /// A survivor's call that waits on the victim, in report order; its
    /// name, told apart for the lock that must come with `EOWNERDEAD`,
    /// names its stall.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Call {
        /// T1: `lite_rdma_write` to LMR A, in a loop until it fails.
        RdmaWrite = "rdma_write",
        /// T2: `lite_send_reply_imm` to the victim's port.
        SendReplyImm = "send_reply_imm",
        /// T3: `lite_lock` on the victim's lock.
        Lock = "lock",
        /// T6, on survivor B only: `lite_lock` on lock W, which the victim
        /// holds on survivor A.
        WaitedLock = "lock_owner_dead",
        /// T4: `lite_dist_barrier` with all nodes.
        DistBarrier = "dist_barrier",
        /// T7: `liteapi_send_reply` from this node's kernel to the victim's
        /// kernel message handler, which holds its calls.
        KernelMessage = "kernel_message",
    }
}

impl Call {
    /// The errno the call must return once the victim is dead: every call
    /// fails with `EHOSTDOWN`, except that lock W is handed over, held,
    /// with `EOWNERDEAD`.
    pub fn expected_errno(self) -> i32 {
        match self {
            Call::WaitedLock => libc::EOWNERDEAD,
            _ => libc::EHOSTDOWN,
        }
    }
}

/// A call's return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Returned {
    /// Which call.
    pub call: Call,
    /// Its raw result.
    pub ret: c_long,
    /// When it returned (`CLOCK_MONOTONIC`, ns).
    pub at_ns: u64,
}

/// A call's return, or why there is none.
pub type Outcome = Result<Returned, String>;

#[derive(Default)]
struct Progress {
    /// When T1's last successful write returned; 0 before the first.
    last_write_ns: AtomicU64,
    /// When T1's write failed; 0 while none has.
    failed_ns: AtomicU64,
    /// Tells T1 to stop writing (when the failure never came).
    stop_writer: AtomicBool,
}

/// Milliseconds from `from_ns` to `to_ns`, negative if `to_ns` is earlier.
pub fn elapsed_ms(from_ns: u64, to_ns: u64) -> i64 {
    let ms = (i128::from(to_ns) - i128::from(from_ns)) / 1_000_000;
    i64::try_from(ms).unwrap_or(if ms < 0 { i64::MIN } else { i64::MAX })
}

/// Why waiting for the calls must stop at `now_ns`, if it must: a call
/// blocked [`HANG_AFTER`] past the last successful write (or past the start
/// of the traffic, if no write succeeded), or no failure seen within
/// [`FAILURE_WAIT`] of the start.
pub fn stop_waiting(
    now_ns: u64,
    started_ns: u64,
    last_write_ns: u64,
    failed_ns: u64,
) -> Option<String> {
    let reference = if last_write_ns == 0 {
        started_ns
    } else {
        last_write_ns
    };
    if now_ns >= after(reference, HANG_AFTER) {
        return Some(format!(
            "hung: still blocked {} s after the last successful write to the victim",
            HANG_AFTER.as_secs()
        ));
    }
    let failure_deadline = after(started_ns, FAILURE_WAIT);
    if failed_ns == 0 && now_ns >= failure_deadline {
        return Some(format!(
            "writes to the victim still succeeded {} s after the traffic started: \
             was it killed?",
            FAILURE_WAIT.as_secs()
        ));
    }
    None
}

/// Whether the call returned with its [`Call::expected_errno`].
pub fn errno_verdict(outcome: &Outcome) -> Result<(), String> {
    match outcome {
        Ok(returned) => expect_errno(returned.ret, returned.call.expected_errno()),
        Err(reason) => Err(reason.clone()),
    }
}

/// The call's stall in ms (if it returned after a successful write), and
/// whether that is at most [`MAX_STALL_MS`].
pub fn stall_verdict(outcome: &Outcome, last_write_ns: u64) -> (Option<i64>, Result<(), String>) {
    let returned = match outcome {
        Ok(returned) => returned,
        Err(reason) => return (None, Err(format!("no return: {reason}"))),
    };
    if last_write_ns == 0 {
        return (
            None,
            Err(
                "no write to the victim ever succeeded, so there is nothing to measure from".into(),
            ),
        );
    }
    let stall = elapsed_ms(last_write_ns, returned.at_ns);
    let verdict = unless(stall <= MAX_STALL_MS, || {
        format!("returned {stall} ms after the last successful write, more than {MAX_STALL_MS} ms")
    });
    (Some(stall), verdict)
}

/// The result of polling a counter for a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Polled {
    /// The last value read, or why it could not be.
    pub value: Result<u64, String>,
    /// Whether it was the value waited for.
    pub reached: bool,
    /// When it was read (`CLOCK_MONOTONIC`, ns).
    pub at_ns: u64,
}

/// `from_ns` plus `duration` (`CLOCK_MONOTONIC` ns), saturated.
pub(crate) fn after(from_ns: u64, duration: Duration) -> u64 {
    from_ns.saturating_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX))
}

/// Reads `read` every `every` until it gives `target` or `deadline_ns`
/// passes; reads at least once.
pub fn poll_until(
    mut read: impl FnMut() -> Result<u64, String>,
    target: u64,
    deadline_ns: u64,
    every: Duration,
) -> Polled {
    let mut value = Err("not read".to_string());
    let found = poll_for(deadline_ns, every, || {
        value = read();
        value.as_ref().is_ok_and(|&v| v == target).then_some(())
    });
    Polled {
        value,
        reached: found.is_some(),
        at_ns: found.map_or_else(monotonic_ns, |((), at_ns)| at_ns),
    }
}

/// Calls `probe` every `every`, at least once, until it returns `Some` or
/// `deadline_ns` passes; the value and when it came.
pub(crate) fn poll_for<T>(
    deadline_ns: u64,
    every: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Option<(T, u64)> {
    loop {
        if let Some(value) = probe() {
            return Some((value, monotonic_ns()));
        }
        if monotonic_ns() >= deadline_ns {
            return None;
        }
        thread::sleep(every);
    }
}

/// What T5 saw on LMR B.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrafficReport {
    /// Round trips (write, read back, compare) completed.
    pub rounds: u64,
    /// Of which started after T1 saw its write fail.
    pub rounds_after_failure: u64,
    /// Round trips whose data came back different.
    pub mismatches: u64,
    /// The first difference found.
    pub first_mismatch: Option<String>,
    /// The call that failed, which ended the traffic.
    pub error: Option<String>,
}

impl TrafficReport {
    /// Whether the traffic ran, and every round trip came back intact
    /// with every call succeeding.
    pub fn verdict(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(error) = &self.error {
            problems.push(error.clone());
        }
        if let Some(mismatch) = &self.first_mismatch {
            problems.push(format!(
                "{} round trips came back different; the first: {mismatch}",
                self.mismatches
            ));
        }
        if self.rounds == 0 {
            problems.push("no round trip completed".to_string());
        }
        no_problems(problems)
    }
}

/// An LMR reached by handle.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its handle.
    pub handle: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its password.
    pub password: u64,
}

/// T5: until `stop`, writes data that depends on the round to a slot of
/// `lmr`, reads it back and compares. A round counts as after the failure
/// when `failed_ns` was set before it started. Ends at the first failed call.
pub fn run_traffic<K: Kernel>(
    kernel: &K,
    lmr: Target,
    seed: u64,
    stop: &AtomicBool,
    failed_ns: &AtomicU64,
) -> TrafficReport {
    let mut report = TrafficReport::default();
    let slots = (lmr.size / TRAFFIC_SIZE as u64).max(1);
    let mut data = vec![0u8; TRAFFIC_SIZE];
    let mut back = vec![0u8; TRAFFIC_SIZE];
    while !stop.load(Ordering::SeqCst) {
        let after_failure = failed_ns.load(Ordering::SeqCst) != 0;
        let round = report.rounds;
        let offset = (round % slots) * TRAFFIC_SIZE as u64;
        let round_seed = pattern::seed(&[seed, round]);
        let failed = |call: &str, ret| {
            let shown = describe_result(ret);
            Some(format!(
                "round {round}: {call} at offset {offset} returned {shown}"
            ))
        };
        pattern::fill(round_seed, offset, &mut data);
        let ret = write_at(kernel, lmr.handle, offset, &data, lmr.password);
        if ret != 0 {
            report.error = failed("write", ret);
            break;
        }
        pattern::poison(round_seed, offset, &mut back);
        let ret = read_at(kernel, lmr.handle, offset, &mut back, lmr.password);
        if ret != 0 {
            report.error = failed("read", ret);
            break;
        }
        if let Err(mismatch) = pattern::verify(round_seed, offset, &back) {
            report.mismatches += 1;
            report
                .first_mismatch
                .get_or_insert_with(|| format!("round {round}: {mismatch}"));
        }
        report.rounds += 1;
        if after_failure {
            report.rounds_after_failure += 1;
        }
        thread::sleep(LOOP_PAUSE);
    }
    report
}

/// `body`'s return is reported on `returns`.
fn spawn_call<K, F>(
    kernel: &Arc<K>,
    call: Call,
    returns: &Sender<Returned>,
    body: F,
) -> Result<(), String>
where
    K: SharedKernel,
    F: FnOnce(&K) -> c_long + Send + 'static,
{
    let kernel = Arc::clone(kernel);
    let returns = returns.clone();
    thread::Builder::new()
        .name(call.name().to_string())
        .spawn(move || {
            let ret = body(&kernel);
            let at_ns = monotonic_ns();
            // The receiver is gone only once the test stopped waiting.
            let _ = returns.send(Returned { call, ret, at_ns });
        })
        .map(drop)
        .map_err(|e| format!("cannot start a thread: {e}"))
}

/// Writes the pattern of `seed` over `lmr`, [`WRITE_SIZE`] bytes at a
/// time round the whole LMR, until `stop` is set or `wrote`, given each
/// write's result and when it returned, breaks off.
pub(crate) fn write_round<K: Kernel>(
    kernel: &K,
    (lmr, seed): (Target, u64),
    stop: &AtomicBool,
    mut wrote: impl FnMut(c_long, u64) -> ControlFlow<()>,
) {
    let slots = (lmr.size / WRITE_SIZE as u64).max(1);
    let mut data = vec![0u8; WRITE_SIZE];
    let mut round = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let offset = (round % slots) * WRITE_SIZE as u64;
        pattern::fill(seed, offset, &mut data);
        let ret = write_at(kernel, lmr.handle, offset, &data, lmr.password);
        if wrote(ret, monotonic_ns()).is_break() {
            return;
        }
        round += 1;
        thread::sleep(LOOP_PAUSE);
    }
}

/// T1: the failed write's result, or 0 once told to stop.
fn write_until_failure<K: Kernel>(
    kernel: &K,
    lmr: Target,
    seed: u64,
    progress: &Progress,
) -> c_long {
    let mut failure = 0;
    write_round(kernel, (lmr, seed), &progress.stop_writer, |ret, now| {
        if ret != 0 {
            progress.failed_ns.store(now, Ordering::SeqCst);
            failure = ret;
            return ControlFlow::Break(());
        }
        progress.last_write_ns.store(now, Ordering::SeqCst);
        ControlFlow::Continue(())
    });
    failure
}

/// How long T1's first write took, in ms.
fn wait_for_first_write(progress: &Progress, started_ns: u64) -> Result<i64, String> {
    let deadline = after(started_ns, FIRST_WRITE_TIMEOUT);
    // The last write's time, 0 once the first write failed.
    let seen = poll_for(deadline, Duration::from_millis(10), || {
        let last = progress.last_write_ns.load(Ordering::SeqCst);
        (last != 0 || progress.failed_ns.load(Ordering::SeqCst) != 0).then_some(last)
    });
    match seen {
        Some((0, _)) => Err("the first write failed".to_string()),
        Some((last, _)) => Ok(elapsed_ms(started_ns, last)),
        None => Err(format!(
            "no write completed within {} s",
            FIRST_WRITE_TIMEOUT.as_secs()
        )),
    }
}

struct ChunkCounts {
    /// Before the allocation.
    base: Result<u64, String>,
    /// While it exists.
    grown: Result<u64, String>,
}

/// Phase 1's setup, with the victim and LMR A found, and the locks.
struct Ready {
    me: u32,
    nodes: u32,
    victim: u32,
    lmr_a: Target,
    setup: Setup,
    locks: VictimLocks,
}

/// Runs a survivor's part, reporting each test point to `tap`.
pub fn run_survivor<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    config: &FailureConfig,
) {
    let nodes = config.nodes;
    let Some(me) = join_point(kernel.as_ref(), tap, config.cm, nodes) else {
        return;
    };
    let setup_barrier = |tap: &mut Tap<W>, after: &str| setup_barrier(kernel, tap, nodes, after);
    if let Err(reason) = await_members(kernel.as_ref(), nodes, SETUP_BARRIER_TIMEOUT) {
        tap.not_ok(&format!("all {nodes} nodes join"), &reason);
        tap.bail_out("cannot test a cluster whose nodes did not all join");
        return;
    }
    if !setup_barrier(tap, &format!("all {nodes} nodes joined")) {
        return;
    }
    if !config.overload.is_zero() && !survive_overload(kernel.as_ref(), tap, me, config) {
        tap.bail_out("the nodes are out of step");
        return;
    }
    let setup = set_up_survivor(kernel.as_ref(), tap, me, nodes);
    if !setup_barrier(tap, "setting up") {
        return;
    }
    let mut setup = setup;
    let locks = setup.victim.map_or(VictimLocks::default(), |victim| {
        find_victims_locks(kernel.as_ref(), tap, me, victim, nodes)
    });
    let shared = setup.dsm.take();
    if setup.victim.and_then(|victim| lowest_other(victim, nodes)) == Some(me) {
        dsm::write_survivors_page(&shared);
    }
    let base = held_chunks(kernel.as_ref());
    if !setup_barrier(tap, "counting the held chunks") {
        return;
    }
    dsm::read_survivors_page(tap, &shared);
    if !setup_barrier(tap, "the victim's spread allocation") {
        return;
    }
    let grown = held_chunks(kernel.as_ref());
    tap.check(
        &format!(
            "held_chunks grew while the victim's {} MiB spread LMR exists ({} -> {})",
            SPREAD_SIZE >> 20,
            or_unknown(&base),
            or_unknown(&grown)
        ),
        match (&base, &grown) {
            (Ok(base), Ok(grown)) if grown > base => Ok(()),
            (Ok(_), Ok(_)) => Err("no chunk of the victim's LMR is held here".to_string()),
            (Err(e), _) | (_, Err(e)) => Err(e.clone()),
        },
    );
    let chunks = ChunkCounts { base, grown };

    let (Some(victim), Some(lmr_a)) = (setup.victim, setup.lmr_a) else {
        // The victim still gets ready, so that the harness kills it and
        // the other survivors are not held up.
        setup_barrier(tap, "starting the traffic");
        tap.bail_out("no victim or no LMR on it: nothing to watch fail");
        return;
    };
    let ready = Ready {
        me,
        nodes,
        victim,
        lmr_a,
        setup,
        locks,
    };
    if !watch_failure(kernel, tap, &ready, &chunks) {
        return;
    }
    // The death is known. The region closes before the leave cycles: LITE
    // cannot unload while one of its files is open.
    dsm::check_after_death(tap, me, shared);
    let config = *config;
    rejoin::run(kernel, tap, &rejoin::Phase { me, victim, config });
}

/// The calls waiting on the victim.
struct Calls {
    outcomes: [Outcome; Call::ALL.len()],
    pending: Vec<Call>,
}

impl Calls {
    fn new() -> Self {
        Calls {
            outcomes: std::array::from_fn(|_| Err("not started".to_string())),
            pending: Vec::new(),
        }
    }

    /// Waits for the pending calls to report on `returns`, until they all
    /// have or [`stop_waiting`] says to stop; every pending call gets an
    /// outcome.
    fn await_returns(
        &mut self,
        returns: &Receiver<Returned>,
        progress: &Progress,
        started_ns: u64,
    ) {
        let mut reason = String::new();
        while !self.pending.is_empty() {
            let last = progress.last_write_ns.load(Ordering::SeqCst);
            let failed = progress.failed_ns.load(Ordering::SeqCst);
            if let Some(why) = stop_waiting(monotonic_ns(), started_ns, last, failed) {
                reason = why;
                break;
            }
            match returns.recv_timeout(WAIT_POLL) {
                Ok(returned) => {
                    self.pending.retain(|&c| c != returned.call);
                    self.outcomes[returned.call as usize] = Ok(returned);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    reason = "its thread ended without reporting".to_string();
                    break;
                }
            }
        }
        for call in std::mem::take(&mut self.pending) {
            self.outcomes[call as usize] = Err(reason.clone());
        }
    }

    fn started(&mut self, call: Call, spawned: Result<(), String>) {
        match spawned {
            Ok(()) => self.pending.push(call),
            Err(reason) => self.outcomes[call as usize] = Err(reason),
        }
    }
}

/// Starts T1, which writes to LMR A until a write fails.
fn start_writer<K: SharedKernel>(
    kernel: &Arc<K>,
    ready: &Ready,
    progress: &Arc<Progress>,
    returns: &Sender<Returned>,
) -> Result<(), String> {
    let lmr = ready.lmr_a;
    let seed = pattern::seed(&[u64::from(ready.me), u64::from(ready.victim)]);
    let progress = Arc::clone(progress);
    spawn_call(kernel, Call::RdmaWrite, returns, move |k| {
        write_until_failure(k, lmr, seed, &progress)
    })
}

fn start_traffic<K: SharedKernel>(
    kernel: &Arc<K>,
    ready: &Ready,
    progress: &Arc<Progress>,
) -> Result<Stoppable<TrafficReport>, String> {
    let lmr = ready.setup.lmr_b.ok_or("there is no LMR B")?;
    let seed = pattern::seed(&[u64::from(ready.me), u64::from(ready.nodes)]);
    let kernel = Arc::clone(kernel);
    let progress = Arc::clone(progress);
    Stoppable::spawn("traffic", move |stop| {
        run_traffic(kernel.as_ref(), lmr, seed, stop, &progress.failed_ns)
    })
}

/// [`run_traffic`] with no failure to count rounds after.
pub(crate) fn spawn_traffic<K: SharedKernel>(
    kernel: &Arc<K>,
    name: &str,
    (lmr, seed): (Target, u64),
) -> Result<Stoppable<TrafficReport>, String> {
    let kernel = Arc::clone(kernel);
    Stoppable::spawn(name, move |stop| {
        run_traffic(kernel.as_ref(), lmr, seed, stop, &AtomicU64::new(0))
    })
}

/// A thread that works until told to stop, then hands over its report.
pub(crate) struct Stoppable<T> {
    stop: Arc<AtomicBool>,
    /// Where the report arrives.
    pub(crate) reports: Receiver<T>,
}

impl<T: Send + 'static> Stoppable<T> {
    /// Runs `work` on a thread named `name`, with the flag that tells it
    /// to stop.
    pub(crate) fn spawn(
        name: &str,
        work: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    ) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let reports = spawn_reporting(name, move || work(&flag))?;
        Ok(Stoppable { stop, reports })
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Stops the thread and takes its report; `what` names it.
    pub(crate) fn finish(self, what: &str) -> Result<T, String> {
        self.stop();
        let within = THREAD_STOP_TIMEOUT.as_secs();
        self.reports
            .recv_timeout(THREAD_STOP_TIMEOUT)
            .map_err(|_| format!("the {what} did not stop within {within} s of being told to"))
    }
}

/// What the [`RELOCK_STEPS`] on a lock got from the dead victim returned,
/// or why they were not tried or did not return.
pub type RelockOutcome = Result<[c_long; 3], String>;

const RELOCK_STEPS: [&str; 3] = ["unlock", "lock", "unlock"];

/// Releases `lock`, whose `lite_lock` by this thread returned `taken`, then
/// takes and releases it once more. Not tried unless the lock is held.
fn release_and_relock<K: Kernel>(kernel: &K, lock: &LiteLock, taken: c_long) -> RelockOutcome {
    if taken != 0 && taken != -c_long::from(libc::EOWNERDEAD) {
        return Err(format!(
            "not tried: lite_lock returned {}, so the lock is not held",
            describe_result(taken)
        ));
    }
    Ok(RELOCK_STEPS.map(|step| {
        // SAFETY: `lock` is a valid lite_lock, readable for the call.
        unsafe {
            match step {
                "lock" => kernel.lock(lock),
                _ => kernel.unlock(lock),
            }
        }
    }))
}

/// Takes `lock` (`taken` gets the result and when), then runs
/// [`release_and_relock`], on one thread: only the holder can release it.
fn spawn_taker<K, F>(
    kernel: &Arc<K>,
    lock: LiteLock,
    name: &str,
    taken: F,
) -> Result<Receiver<RelockOutcome>, String>
where
    K: SharedKernel,
    F: FnOnce(c_long, u64) + Send + 'static,
{
    let kernel = Arc::clone(kernel);
    spawn_reporting(name, move || {
        // SAFETY: `lock` is a valid lite_lock owned by this thread.
        let ret = unsafe { kernel.lock(&lock) };
        taken(ret, monotonic_ns());
        release_and_relock(kernel.as_ref(), &lock, ret)
    })
}

/// What `relocked` brings within [`RELOCK_TIMEOUT`], if lock `letter`
/// was `taken`.
fn await_relocked(
    taken: Result<(), &String>,
    letter: &str,
    relocked: Result<Receiver<RelockOutcome>, String>,
) -> RelockOutcome {
    if let Err(reason) = taken {
        return Err(format!("not tried: no lock of {letter} ({reason})"));
    }
    relocked?
        .recv_timeout(RELOCK_TIMEOUT)
        .map_err(|_| {
            format!(
                "the unlock or the lock after it did not return within {} s",
                RELOCK_TIMEOUT.as_secs()
            )
        })
        .and_then(|outcome| outcome)
}

/// Starts T2, T3, T4, T7 (where modules load) and on survivor B T6, whose
/// relocking arrives on the returned channel. The buffers belong to the
/// threads, which may outlive the test.
fn start_blocking_calls<K: SharedKernel>(
    kernel: &Arc<K>,
    ready: &Ready,
    returns: &Sender<Returned>,
    calls: &mut Calls,
) -> Option<Receiver<RelockOutcome>> {
    let victim = ready.victim;
    let spawned = spawn_call(kernel, Call::SendReplyImm, returns, move |k| {
        let request = [0x5au8; 64];
        let mut reply = vec![0u8; VICTIM_PORT_MAX_SIZE as usize];
        // SAFETY: `request` is readable and `reply` writable for their
        // lengths, and both live as long as this thread.
        unsafe {
            k.send_reply_imm(
                victim,
                port_priority(VICTIM_PORT, PRIORITY_NONE),
                request.as_ptr().cast(),
                request.len() as u64,
                reply.as_mut_ptr().cast(),
                reply.len() as u64,
            )
        }
    });
    calls.started(Call::SendReplyImm, spawned);

    let spawned = match ready.locks.own {
        Some(lock) => spawn_call(kernel, Call::Lock, returns, move |k| {
            // SAFETY: `lock` is a valid lite_lock owned by this thread.
            unsafe { k.lock(&lock) }
        }),
        None => Err("the victim's lock was not found".to_string()),
    };
    calls.started(Call::Lock, spawned);

    let nodes = ready.nodes;
    let spawned = spawn_call(kernel, Call::DistBarrier, returns, move |k| {
        k.dist_barrier(nodes)
    });
    calls.started(Call::DistBarrier, spawned);

    if let Some(caller) = &ready.setup.kernel_caller {
        let spawned = if caller.loaded {
            spawn_call(kernel, Call::KernelMessage, returns, move |k| {
                k.kernel_message_call(victim, KERNEL_MESSAGE_SIZE)
            })
        } else {
            Err("the kernel message module is not loaded".to_string())
        };
        calls.started(Call::KernelMessage, spawned);
    }

    let LockDuty::WaitFor { lock, .. } = ready.locks.duty else {
        return None;
    };
    let call = Call::WaitedLock;
    let spawned = match lock {
        Some(lock) => {
            let returns = returns.clone();
            spawn_taker(kernel, lock, call.name(), move |ret, at_ns| {
                // The receiver is gone only once the test stopped waiting.
                let _ = returns.send(Returned { call, ret, at_ns });
            })
        }
        None => Err("lock W was not found".to_string()),
    };
    calls.started(call, status(&spawned));
    spawned.ok()
}

/// `lock W 3` for lock W number 3, `lock W` if it was not found.
fn lock_label(letter: &str, lock: Option<LiteLock>) -> String {
    match lock {
        Some(lock) => format!("lock {letter} {}", lock.number),
        None => format!("lock {letter}"),
    }
}

/// Every call's [`errno_verdict`] and [`stall_verdict`].
fn report_calls<W: Write>(tap: &mut Tap<W>, ready: &Ready, calls: &Calls, last_write_ns: u64) {
    let lock_name = ready
        .locks
        .own
        .map_or(String::new(), |l| format!(" {}", l.number));
    let waited = match ready.locks.duty {
        LockDuty::WaitFor { home, lock } => Some((lock_label("W", lock), home)),
        _ => None,
    };
    for call in Call::ALL {
        // Only survivor B waits for lock W, and T7 needs a loadable module.
        let what = match call {
            Call::RdmaWrite => format!(
                "rdma_write of {} KiB to LMR A on the victim (node {})",
                WRITE_SIZE >> 10,
                ready.victim
            ),
            Call::SendReplyImm => format!("send_reply_imm to port {VICTIM_PORT} on the victim"),
            Call::Lock => format!("lock of the victim's lock{lock_name}"),
            Call::WaitedLock => match &waited {
                Some((name, home)) => {
                    format!("lock of {name} on survivor A (node {home}), which the victim held,")
                }
                None => continue,
            },
            Call::DistBarrier => {
                format!("dist_barrier({}) that the victim never enters", ready.nodes)
            }
            Call::KernelMessage if ready.setup.kernel_caller.is_none() => continue,
            Call::KernelMessage => format!(
                "kernel message of {KERNEL_MESSAGE_SIZE} B to the victim's handler, which holds it,"
            ),
        };
        let outcome = &calls.outcomes[call as usize];
        let got = outcome
            .as_ref()
            .map_or("no return".to_string(), |r| describe_result(r.ret));
        let verb = match call.expected_errno() {
            libc::EHOSTDOWN => "fails with",
            _ => "returns",
        };
        tap.check(
            &format!(
                "{what} {verb} -{} (got {got})",
                errno_name(call.expected_errno())
            ),
            errno_verdict(outcome),
        );
        let (stall, verdict) = stall_verdict(outcome, last_write_ns);
        let shown = match stall {
            Some(ms) => {
                tap.comment(&format!("stall {} {ms} ms", call.name()));
                format!("{ms} ms")
            }
            None => "no stall measured".to_string(),
        };
        tap.check(
            &format!(
                "{} returns within {MAX_STALL_MS} ms of the last successful write ({shown})",
                call.name()
            ),
            verdict,
        );
    }
}

/// Lets T5 run until [`TRAFFIC_AFTER_RETURNS`] after `all_returned_ns`.
fn stop_traffic(
    traffic: Result<Stoppable<TrafficReport>, String>,
    all_returned_ns: u64,
) -> Result<TrafficReport, String> {
    let stop_at = after(all_returned_ns, TRAFFIC_AFTER_RETURNS);
    let now = monotonic_ns();
    if traffic.is_ok() && now < stop_at {
        thread::sleep(Duration::from_nanos(stop_at - now));
    }
    traffic?.finish("traffic")
}

/// Phase 3 of a survivor: starts the threads, waits for the victim's
/// death to reach them and checks the aftermath. Whether the survivors
/// are still in step (their last barrier passed).
fn watch_failure<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    ready: &Ready,
    chunks: &ChunkCounts,
) -> bool {
    let nodes = ready.nodes;
    let progress = Arc::new(Progress::default());
    let (returns, returned) = mpsc::channel();
    let mut calls = Calls::new();
    let started_ns = monotonic_ns();

    let spawned = start_writer(kernel, ready, &progress, &returns);
    calls.started(Call::RdmaWrite, spawned);
    let traffic = start_traffic(kernel, ready, &progress);
    let first = wait_for_first_write(&progress, started_ns);
    tap.check(
        &format!(
            "rdma_write of {} KiB to LMR A works while the victim is up (first after {} ms)",
            WRITE_SIZE >> 10,
            or_unknown(&first)
        ),
        first.map(drop),
    );
    // The victim prints its marker once past this barrier, so the harness
    // kills it only after a write to it succeeded.
    let in_step = barrier_point(
        kernel,
        tap,
        nodes,
        SETUP_BARRIER_TIMEOUT,
        &format!("dist_barrier({nodes}) with the traffic running returns 0"),
    );
    if !in_step {
        progress.stop_writer.store(true, Ordering::SeqCst);
        traffic.iter().for_each(Stoppable::stop);
        tap.bail_out("the nodes are out of step");
        return false;
    }
    let w_relocked = start_blocking_calls(kernel, ready, &returns, &mut calls);
    // Only the threads hold senders now, so a thread that died unreported
    // shows as a disconnected channel.
    drop(returns);

    calls.await_returns(&returned, &progress, started_ns);
    let all_returned_ns = monotonic_ns();
    // T1 is still writing only if the failure never came.
    progress.stop_writer.store(true, Ordering::SeqCst);
    let last_write_ns = progress.last_write_ns.load(Ordering::SeqCst);
    let failed_ns = progress.failed_ns.load(Ordering::SeqCst);
    report_calls(tap, ready, &calls, last_write_ns);
    // LITE's module, which the leaver unloads in the cycles, cannot be
    // unloaded before it.
    let kernel_caller = ready
        .setup
        .kernel_caller
        .as_ref()
        .filter(|caller| caller.loaded);
    if kernel_caller.is_some() {
        if let Some(unloaded) = kernel.unload_kernel_message_module() {
            tap.check("the kernel message module unloads after T7", unloaded);
        }
    }
    match ready.locks.duty {
        LockDuty::WaitFor { lock, .. } => {
            let taken = calls.outcomes[Call::WaitedLock as usize].as_ref().map(drop);
            let relocked = w_relocked.ok_or_else(|| "T6 did not start".to_string());
            let relocked = await_relocked(taken, "W", relocked);
            report_relocked(tap, &lock_label("W", lock), &relocked);
        }
        LockDuty::TakeOrphan { lock } => take_orphaned_lock(kernel, tap, lock),
        LockDuty::None => {}
    }

    let total = kernel.get_total_node();
    tap.check(
        &format!(
            "get_total_node returns {} once the victim is gone (got {})",
            nodes - 1,
            describe_result(total)
        ),
        unless(total == c_long::from(nodes - 1), || {
            format!("expected {}", nodes - 1)
        }),
    );

    check_chunks_freed(kernel.as_ref(), tap, chunks, failed_ns);

    let report = stop_traffic(traffic, all_returned_ns);
    check_traffic(tap, ready.setup.lmr_b.and(ready.setup.next), &report);
    if let Some(caller) = kernel_caller {
        check_calls_released(kernel.as_ref(), tap, caller);
    }

    let survivors = nodes - 1;
    let in_step = barrier_point(
        kernel,
        tap,
        survivors,
        FINAL_BARRIER_TIMEOUT,
        &format!("final dist_barrier({survivors}) among the survivors returns 0"),
    );
    // Only LMR B, which lives on a survivor and which the traffic no longer
    // uses; LMR A, on the dead node, goes with the process (or with this
    // node's leave in the next phase).
    if let (Some(lmr), Ok(_)) = (ready.setup.lmr_b, &report) {
        kernel.free(lmr.handle);
    }
    if !in_step {
        tap.bail_out("the survivors are out of step");
    }
    in_step
}

/// The [`RelockOutcome`] of lock `name`.
fn report_relocked<W: Write>(tap: &mut Tap<W>, name: &str, relocked: &RelockOutcome) {
    // The results of `steps`, and whether each is 0 (the failed step named
    // when there are several).
    let got = |steps: std::ops::Range<usize>| match relocked {
        Ok(r) => r[steps].iter().map(|&r| describe_result(r)).collect(),
        Err(_) => vec!["no return".to_string()],
    };
    let verdict = |steps: std::ops::Range<usize>, named: bool| {
        let r = relocked.as_ref().map_err(Clone::clone)?;
        steps.into_iter().try_for_each(|i| {
            let step = RELOCK_STEPS[i];
            expect_zero(r[i]).map_err(|e| if named { format!("{step}: {e}") } else { e })
        })
    };
    tap.check(
        &format!(
            "unlock of {name}, taken over from the dead victim, returns 0 (got {})",
            got(0..1).join(", ")
        ),
        verdict(0..1, false),
    );
    let again = got(1..3).join(", ");
    tap.check(
        &format!("lock and unlock of {name} once more return 0 (got {again})"),
        verdict(1..3, true),
    );
}

/// Survivor A, once the death is known: lock O, which nobody waited for,
/// must come with `EOWNERDEAD`; then the [`RELOCK_STEPS`].
fn take_orphaned_lock<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    lock: Option<LiteLock>,
) {
    let name = lock_label("O", lock);
    let (sender, taken) = mpsc::channel();
    let relocked = match lock {
        Some(lock) => spawn_taker(kernel, lock, "lock_orphaned", move |ret, _| {
            // The receiver is gone only once the test stopped waiting.
            let _ = sender.send(ret);
        }),
        None => Err("lock O was not found".to_string()),
    };
    let ret = relocked.as_ref().map_err(Clone::clone).and_then(|_| {
        taken
            .recv_timeout(RELOCK_TIMEOUT)
            .map_err(|_| format!("did not return within {} s", RELOCK_TIMEOUT.as_secs()))
    });
    let got = ret
        .as_ref()
        .map_or("no return".to_string(), |&r| describe_result(r));
    tap.check(
        &format!(
            "lock of {name}, kept here, which the dead victim held and nobody waited for, \
             returns -{} (got {got})",
            errno_name(libc::EOWNERDEAD)
        ),
        ret.as_ref()
            .map_err(Clone::clone)
            .and_then(|&r| expect_errno(r, libc::EOWNERDEAD)),
    );
    let relocked = await_relocked(ret.as_ref().map(drop), "O", relocked);
    report_relocked(tap, &name, &relocked);
}

/// `held_chunks` back to its base within [`CHUNKS_FREED_WITHIN`] of
/// `failed_ns` (now if T1 never saw the failure).
fn check_chunks_freed<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    chunks: &ChunkCounts,
    failed_ns: u64,
) {
    let within = CHUNKS_FREED_WITHIN.as_secs();
    let earlier = format!("held_chunks back to its earlier value within {within} s of the failure");
    let Some(base) = tap.value_or_not_ok(&earlier, chunks.base.clone()) else {
        return;
    };
    let since = if failed_ns == 0 {
        monotonic_ns()
    } else {
        failed_ns
    };
    let deadline = after(since, CHUNKS_FREED_WITHIN);
    let polled = poll_until(|| held_chunks(kernel), base, deadline, CHUNK_POLL);
    let (value, grown) = (or_unknown(&polled.value), or_unknown(&chunks.grown));
    tap.check(
        &format!(
            "held_chunks back to {base} within {within} s of the failure (was {grown}, {value} after {} ms)",
            elapsed_ms(since, polled.at_ns)
        ),
        match polled.value {
            Err(e) => Err(e),
            Ok(_) if polled.reached => Ok(()),
            Ok(v) => Err(format!("still {v}: the chunks held for the victim were not freed")),
        },
    );
}

fn check_traffic<W: Write>(
    tap: &mut Tap<W>,
    holder: Option<u32>,
    report: &Result<TrafficReport, String>,
) {
    let intact = format!(
        "traffic to LMR B on the next survivor ({}) comes back intact",
        node_or_none(holder)
    );
    let goes_on = "traffic to LMR B goes on after the failure";
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            tap.not_ok(&intact, e);
            tap.not_ok(goes_on, e);
            return;
        }
    };
    let (rounds, mismatches) = (report.rounds, report.mismatches);
    let ended = report
        .error
        .as_ref()
        .map_or("no errors", |_| "ended by an error");
    tap.check(
        &format!("{intact} ({rounds} round trips, {mismatches} mismatches, {ended})"),
        report.verdict(),
    );
    let after_failure = report.rounds_after_failure;
    tap.check(
        &format!("{goes_on} ({after_failure} round trips after)"),
        unless(after_failure > 0, || {
            "no round trip started after T1's write failed".to_string()
        }),
    );
}

#[cfg(test)]
mod tests;
