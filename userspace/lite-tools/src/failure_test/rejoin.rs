//! The failure test's last phase: one survivor leaves the cluster and joins
//! again, [`CYCLES`] times in a row, while the other survivors watch.
//!
//! The highest survivor, the leaver, calls `lite_leave` (where LITE is a
//! module it unloads the module instead, which must leave the same way, and
//! loads it again), checks that its node is out (`ENOTCONN`), joins again
//! and expects its id back. The others, the observers, each hold a spread
//! LMR, some of whose chunks the leaver holds at first (its first leave has
//! to move them, with their bytes), and run checked traffic between
//! themselves throughout. They follow the cycles by the cluster's size
//! alone, read every [`CyclePacing::poll`]: every cycle must take the count
//! down by one and back up, each within [`CyclePacing::change`]. The
//! leaver's pauses ([`CyclePacing::away`], [`CyclePacing::back`]) make
//! every size last several reads.
//!
//! Given the address of a second network interface, the leaver also
//! changes RDMA devices: in cycle [`SECOND_DEVICE_ADDED`] it adds a
//! second Soft-RoCE device, names it in LITE's `device` parameter, leaves
//! with `lite_leave` (LITE stays loaded, so the join asks its id back),
//! and must join again on the new device while the first one is still
//! there; in cycle
//! [`SECOND_DEVICE_REMOVED`] it leaves by deleting that device under the
//! observers' traffic, which must take it out of the cluster as a leave
//! does, and joins again on the first device.
//!
//! The lowest observer also publishes its spread LMR ([`SPREAD_NAME`]).
//! Before its first leave the leaver maps it (`lite_ask_lmr`, retried
//! while it fails with `EAGAIN`, which it may while the LMR's chunks move),
//! reads all of it through the mapping and keeps the mapping: the leave
//! then has to move chunks of an LMR that the leaver itself maps. The
//! owner pauses the mappings, moves the chunks (never to a node that maps
//! the LMR) and the mappings follow; the leave must succeed unforced, and
//! the owner's read-back after the cycle shows that the bytes moved intact.
//!
//! A barrier of all survivors starts the phase (everything allocated and
//! published) and one ends it: the leaver's first barrier after its last
//! join has to take the round the others are at.

use std::cell::Cell;
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use libc::c_long;
use lite::sys::{CHUNK_SIZE, NODE_SPREAD, PERM_READ};

use super::dsm;
use super::{
    after, alloc_lmr, barrier_point, describe_total, elapsed_ms, held_chunks, join_call,
    or_unknown, poll_until, read_poisoned, spawn_traffic, total_nodes, write_pattern,
    FailureConfig, SharedKernel, Stoppable, Target, TrafficReport,
};
use crate::cluster_test::io::{handle_of, unless, write_at};
use crate::cluster_test::password_of;
use crate::deadline::bounded;
use crate::debugfs::membership::{device_in_use, MEMBERSHIP_FILE};
use crate::errno::{describe_result, expect_errno, expect_zero};
use crate::guest_devices::{SecondDevice, FIRST_DEVICE, SECOND_DEVICE};
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::others_in_ring_order;
use crate::stats::monotonic_ns;
use crate::tap::{no_problems, Tap};

/// Leave/rejoin cycles in a row.
pub const CYCLES: u32 = 10;

/// Before its leave the leaver adds a second RDMA device (given a second
/// interface).
pub const SECOND_DEVICE_ADDED: u32 = 3;

/// Its leave is the deletion of that device.
pub const SECOND_DEVICE_REMOVED: u32 = 6;

/// Four 4 MiB chunks round robin over the other survivors: with three
/// survivors two are on the leaver.
const SPREAD_LMR_SIZE: u64 = 16 << 20;

/// "SPREADLM"; its password is the LMR's own, [`password_of`] the observer.
const SPREAD_NAME: u64 = 0x5350_5245_4144_4c4d;

/// `lite_ask_lmr` fails with `EAGAIN` while the LMR's chunks move.
const MAP_TRIES: u32 = 10;

const MAP_RETRY: Duration = Duration::from_millis(200);

const TRAFFIC_LMR_SIZE: u64 = 1 << 20;

/// The leaver tries this LMR's handle once it is out.
const OLD_HANDLE_SIZE: u64 = 4096;

/// Of the leaver's traffic on the second RDMA device, and while it goes.
const DEVICE_TRAFFIC_SIZE: u64 = 64 * 1024;

const DEVICE_TRAFFIC_SPELL: Duration = Duration::from_secs(2);

/// Read around each chunk boundary after the cycles that do not read the
/// spread LMR whole.
const SAMPLE_WINDOW: u64 = 64 << 10;

/// Bound of one `lite_leave` or `lite_join` call, and of writing or reading
/// a whole spread LMR.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The others may first spend [`CyclePacing::change`] on a cycle that
/// does not come, and the observers' whole reads of their 16 MiB spread
/// LMR can leave them minutes behind the leaver under emulation.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(300);

/// After a join the manager refused for now (`EADDRINUSE`, `EAGAIN`).
const JOIN_RETRY: Duration = Duration::from_millis(500);

/// How the cycles are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CyclePacing {
    /// How often the observers read the cluster's size (and the leaver
    /// waits for it to be whole).
    pub poll: Duration,
    /// How long the leaver stays out before it joins again.
    pub away: Duration,
    /// How long the leaver waits, once the cluster is whole again, before
    /// it leaves again.
    pub back: Duration,
    /// Longest one membership change may take to show (a size going down
    /// from the previous cycle's end, or back up from going down; whole
    /// again after the leaver's join), and the leaver's patience with a
    /// manager refusing its join for now.
    pub change: Duration,
    /// Longest the first leave may take to show to an observer: it first
    /// moves every chunk the leaver holds (16 MiB and more over emulated
    /// RDMA on the test machines); later leaves hold none.
    pub first_leave: Duration,
}

impl CyclePacing {
    /// On the test machines: each size lasts ten reads or more.
    pub const VMS: CyclePacing = CyclePacing {
        poll: Duration::from_millis(100),
        away: Duration::from_secs(1),
        back: Duration::from_secs(1),
        change: Duration::from_secs(30),
        first_leave: Duration::from_secs(120),
    };
}

/// The part a survivor plays in the cycles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Leaves and joins again.
    Leaver {
        /// The other survivors, in ascending order.
        observers: Vec<u32>,
    },
    /// Follows the cycles.
    Observer {
        /// The survivor that leaves.
        leaver: u32,
        /// The observer holding this one's traffic LMR.
        peer: u32,
        /// For the leaver to map (the lowest observer's spread LMR).
        publishes: bool,
    },
}

/// The highest survivor leaves, each observer's traffic goes to the next
/// observer (wrapping around). `None` if `me` is no survivor or there are
/// fewer than three: a leaving node's chunks need a third node to move to.
pub fn part(me: u32, victim: u32, nodes: u32) -> Option<Part> {
    let survivors: Vec<u32> = (1..=nodes).filter(|&n| n != victim).collect();
    let (&leaver, observers) = survivors.split_last()?;
    if survivors.len() < 3 || !survivors.contains(&me) {
        return None;
    }
    if me == leaver {
        return Some(Part::Leaver {
            observers: observers.to_vec(),
        });
    }
    let mut next = others_in_ring_order(me, nodes).into_iter();
    let peer = next.find(|n| observers.contains(n))?;
    Some(Part::Observer {
        leaver,
        peer,
        publishes: observers.first() == Some(&me),
    })
}

pub(super) struct Phase {
    pub me: u32,
    pub victim: u32,
    pub config: FailureConfig,
}

impl Phase {
    /// The survivors: the cluster's size while everybody is in.
    fn survivors(&self) -> u32 {
        self.config.nodes - 1
    }
}

pub(super) fn run<K: SharedKernel, W: Write>(kernel: &Arc<K>, tap: &mut Tap<W>, phase: &Phase) {
    match part(phase.me, phase.victim, phase.config.nodes) {
        Some(Part::Leaver { observers }) => leave_and_rejoin(kernel, tap, phase, &observers),
        Some(Part::Observer {
            leaver,
            peer,
            publishes,
        }) => observe(kernel, tap, phase, leaver, peer, publishes),
        None => tap.skip(
            "leave/rejoin cycles",
            "they need three survivors (a leaving node's chunks move to a third node)",
        ),
    }
}

/// A barrier of all survivors as a test point; whether it passed.
fn survivors_barrier<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    phase: &Phase,
    when: &str,
) -> bool {
    let survivors = phase.survivors();
    barrier_point(
        kernel,
        tap,
        survivors,
        BARRIER_TIMEOUT,
        &format!("leave/rejoin: dist_barrier({survivors}) of the survivors {when} returns 0"),
    )
}

/// The leaver's part: maps the lowest observer's spread LMR, then
/// [`CYCLES`] times leaves, checks that the node is out, joins again and
/// waits until the cluster is whole.
fn leave_and_rejoin<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    phase: &Phase,
    observers: &[u32],
) {
    let me = phase.me;
    if !survivors_barrier(kernel, tap, phase, "before the cycles") {
        tap.bail_out("the survivors are out of step");
        return;
    }
    let mapped = observers
        .first()
        .and_then(|&owner| map_spread_point(kernel, tap, me, owner));
    let held = held_chunks(kernel.as_ref());
    let shown = or_unknown(&held);
    tap.check(
        &format!(
            "leave/rejoin: node {me} holds chunks of the observers' spread LMRs before \
             its first leave (held_chunks {shown})"
        ),
        match held {
            Ok(0) => Err("no chunk is held here, so no leave would move any".to_string()),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        },
    );

    for cycle in 1..=CYCLES {
        // Only the first leave happens while the mapping exists.
        let mapped = mapped.filter(|_| cycle == 1);
        match one_cycle(kernel, tap, phase, observers, cycle, mapped) {
            CycleEnd::Completed => {
                if cycle < CYCLES {
                    thread::sleep(phase.config.pacing.back);
                }
            }
            CycleEnd::StillMember => {
                if cycle < CYCLES {
                    tap.comment(&format!("cycles {} to {CYCLES} not run", cycle + 1));
                }
                break;
            }
            CycleEnd::Out => {
                tap.bail_out("this node left the cluster and could not join again");
                return;
            }
        }
    }

    let held = held_chunks(kernel.as_ref());
    let shown = or_unknown(&held);
    tap.check(
        &format!(
            "leave/rejoin: held_chunks on node {me} is 0 after its last join \
             (its chunks moved away; got {shown})"
        ),
        match held {
            Ok(0) => Ok(()),
            Ok(n) => Err(format!("{n} chunks held by a node that joined afresh")),
            Err(e) => Err(e),
        },
    );
    survivors_barrier(kernel, tap, phase, "after the cycles");
}

/// How a cycle of the leaver ended.
enum CycleEnd {
    /// Left, joined again and saw the cluster whole.
    Completed,
    /// Did not leave (or the leave did not return): the node is, or may
    /// still be, a member, and further cycles would fail the same way.
    StillMember,
    /// Left and could not join again.
    Out,
}

/// A test point; the mapping is kept, for the first leave to move chunks
/// of a mapped LMR; `owner` if it was made.
fn map_spread_point<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    me: u32,
    owner: u32,
) -> Option<u32> {
    let (mapping, read) = match bounded(kernel, CALL_TIMEOUT, move |k| map_and_read(k, owner)) {
        Ok(outcome) => outcome,
        // The mapping may have been made: the leave tells either way.
        Err(e) => (Err(e.clone()), Err(e)),
    };
    let mapped = mapping.is_ok();
    tap.check(
        &format!(
            "leave/rejoin: leaver (node {me}) mapped observer {owner}'s spread LMR and read \
             it back intact through the mapping ({} MiB, node {owner}'s pattern)",
            SPREAD_LMR_SIZE >> 20
        ),
        mapping.and(read),
    );
    mapped.then_some(owner)
}

/// The mapping's handle, tried again while `ask_lmr` fails with `EAGAIN`,
/// and the read through it.
fn map_and_read<K: Kernel>(kernel: &K, owner: u32) -> (Result<u64, String>, Result<(), String>) {
    let password = password_of(owner);
    let again = -c_long::from(libc::EAGAIN);
    let mut tries = 1;
    let ret = loop {
        let ret = kernel.ask_lmr(owner, SPREAD_NAME, PERM_READ, password);
        if ret != again || tries == MAP_TRIES {
            break ret;
        }
        tries += 1;
        thread::sleep(MAP_RETRY);
    };
    let mapping = handle_of(
        ret,
        &format!("ask_lmr(node {owner}, name {SPREAD_NAME:#x}) (try {tries} of {MAP_TRIES})"),
    );
    let read = match mapping {
        Ok(handle) => {
            let lmr = Target {
                handle,
                size: SPREAD_LMR_SIZE,
                password,
            };
            read_and_verify(kernel, lmr, spread_seed(owner))
                .map_err(|e| format!("through mapping {handle:#x}: {e}"))
        }
        Err(_) => Ok(()),
    };
    (mapping, read)
}

fn change_device<K: SharedKernel>(kernel: &Arc<K>, step: SecondDevice) -> Result<(), String> {
    bounded(kernel, CALL_TIMEOUT, move |k| k.second_device(step))?
        .unwrap_or_else(|| Err("this kernel has no second RDMA device to change".to_string()))
}

fn alloc_on_first_observer<K: Kernel>(
    kernel: &K,
    observers: &[u32],
    size: u64,
    password: u64,
) -> Result<Target, String> {
    let holder = observers.first().ok_or("no observer to allocate on")?;
    alloc_lmr(kernel, *holder, size, password)
}

/// Runs [`super::run_traffic`] on `lmr` (if there is one) on a thread of its own
/// while `during` runs; what `during` returned, and the traffic's report.
/// With `ends_out` the node is out of the cluster once `during` returns,
/// so the traffic has to end by itself, with its first refused call (it
/// is stopped after [`CALL_TIMEOUT`]).
fn traffic_during<K: SharedKernel, T>(
    kernel: &Arc<K>,
    lmr: Result<Target, String>,
    seed: u32,
    ends_out: bool,
    during: impl FnOnce() -> T,
) -> (T, Result<TrafficReport, String>) {
    let traffic =
        lmr.and_then(|lmr| spawn_traffic(kernel, "device-traffic", (lmr, u64::from(seed))));
    let result = during();
    let report = traffic.and_then(|traffic| {
        if ends_out {
            if let Ok(report) = traffic.reports.recv_timeout(CALL_TIMEOUT) {
                return Ok(report);
            }
        }
        traffic.finish("traffic")
    });
    (result, report)
}

/// Test point `name` ([`traffic_verdict`]); an error stands for traffic
/// that could not start.
fn check_traffic<W: Write>(
    tap: &mut Tap<W>,
    name: &str,
    report: Result<TrafficReport, String>,
    ends_out: bool,
) {
    if let Ok(report) = &report {
        tap.comment(&format!("{} checked round trips", report.rounds));
    }
    tap.check(name, report.and_then(|r| traffic_verdict(&r, ends_out)));
}

/// The verdict on the leaver's traffic: some round trips, none with a
/// difference, and an end by `ENOTCONN` if `ends_out` (the node left under
/// it), by no error otherwise.
fn traffic_verdict(report: &TrafficReport, ends_out: bool) -> Result<(), String> {
    let rounds = report.rounds;
    if let Some(mismatch) = &report.first_mismatch {
        return Err(format!(
            "{} of {rounds} round trips differ, first {mismatch}",
            report.mismatches
        ));
    }
    match (&report.error, ends_out) {
        (Some(error), true) if error.contains("ENOTCONN") => {}
        (None, false) => {}
        (Some(error), _) => return Err(format!("after {rounds} round trips: {error}")),
        (None, true) => return Err(format!("{rounds} round trips, none refused")),
    }
    if rounds == 0 && !ends_out {
        return Err("no round trip completed".to_string());
    }
    Ok(())
}

fn joined_on<K: Kernel>(kernel: &K, expected: &str) -> Result<(), String> {
    let text = kernel
        .read_debugfs(MEMBERSHIP_FILE)
        .ok_or("this kernel has no membership file")?
        .map_err(|e| format!("reading {MEMBERSHIP_FILE}: {e}"))?;
    match device_in_use(&text) {
        Some(device) if device == expected => Ok(()),
        Some(device) => Err(format!("it is a member on {device}")),
        None => Err(format!("{MEMBERSHIP_FILE} names no device:\n{text}")),
    }
}

/// The verdict on a leave that returned `ret`. `mapped` is the observer
/// whose spread LMR this node maps during the leave, if it does: the
/// chunks it holds of that LMR have to move all the same, so a refusal to
/// move a chunk is called out.
fn leave_verdict(ret: c_long, mapped: Option<u32>) -> Result<(), String> {
    expect_zero(ret).map_err(|e| {
        let refused = [libc::ENOSPC, libc::EBUSY].map(|errno| -c_long::from(errno));
        match mapped {
            Some(owner) if refused.contains(&ret) => format!(
                "{e}: the leave refused to move the chunks held here, while this node maps \
                 node {owner}'s spread LMR (chunks of a mapped LMR must move too)"
            ),
            _ => e,
        }
    })
}

/// One cycle of the leaver; `mapped` is the observer whose spread LMR it
/// maps during this cycle's leave, if it does.
fn one_cycle<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    phase: &Phase,
    observers: &[u32],
    cycle: u32,
    mapped: Option<u32>,
) -> CycleEnd {
    let me = phase.me;
    let password = password_of(me);
    // A handle of this membership, to try once the node is out.
    let old = alloc_on_first_observer(kernel.as_ref(), observers, OLD_HANDLE_SIZE, password)
        .map(|lmr| lmr.handle);

    let mapping = mapped.map_or(String::new(), |owner| {
        format!(", keeping its mapping of node {owner}'s spread LMR")
    });
    let device_step = match (phase.config.second_address, cycle) {
        (Some(address), SECOND_DEVICE_ADDED) => Some(SecondDevice::Add(address)),
        (Some(_), SECOND_DEVICE_REMOVED) => Some(SecondDevice::Remove),
        _ => None,
    };
    let (first, _) = FIRST_DEVICE;
    let (second, second_netdev) = SECOND_DEVICE;
    if let Some(SecondDevice::Add(address)) = device_step {
        tap.check(
            &format!(
                "leave/rejoin cycle {cycle}: node {me}, a member on {first}, gets a second \
                 RDMA device, {second} on {second_netdev} ({address}), and names it in \
                 LITE's device parameter"
            ),
            change_device(kernel, SecondDevice::Add(address)),
        );
    }
    let started = monotonic_ns();
    // The observer whose DSM page a `lite_leave` takes written (see
    // `dsm`), and whether this cycle's did.
    let owner = observers.first().copied();
    let wrote_dsm = Cell::new(false);
    // Where LITE is a module, the node leaves by unloading it, which must
    // leave exactly as `lite_leave` does, and loads it again; or by losing
    // its RDMA device, which must too. It calls `lite_leave` before it
    // joins on another device: a node that joins from another address
    // gets its id back only by asking for it, which a reloaded LITE
    // cannot (to the manager it is another machine).
    let leave = |tap: &mut Tap<W>| {
        let written = owner.and_then(|owner| {
            let written = dsm::write_before_leave(kernel.as_ref(), owner, cycle)?;
            let what = format!(
                "leave/rejoin cycle {cycle}: node {me} writes a page of node {owner}'s DSM \
                 region and keeps it through its leave"
            );
            tap.check_value(&what, written)
        });
        wrote_dsm.set(written.is_some());
        let left = bounded(kernel, CALL_TIMEOUT, |k| k.leave(0));
        drop(written);
        let took = elapsed_ms(started, monotonic_ns());
        tap.comment(&format!("leave {took} ms"));
        tap.check(
            &format!("leave/rejoin cycle {cycle}: leave(0) on node {me} returns 0{mapping}"),
            left.and_then(|ret| leave_verdict(ret, mapped)),
        )
    };
    let left_ok = match device_step {
        Some(SecondDevice::Remove) => {
            let traffic =
                alloc_on_first_observer(kernel.as_ref(), observers, DEVICE_TRAFFIC_SIZE, password);
            let (removed, report) = traffic_during(kernel, traffic, me, true, || {
                change_device(kernel, SecondDevice::Remove)
            });
            let took = elapsed_ms(started, monotonic_ns());
            tap.comment(&format!("device removal {took} ms"));
            check_traffic(
                tap,
                &format!(
                    "leave/rejoin cycle {cycle}: node {me}'s checked traffic with an observer \
                     while {second} goes away: no byte differs, and it ends with -ENOTCONN"
                ),
                report,
                true,
            );
            tap.check(
                &format!(
                    "leave/rejoin cycle {cycle}: deleting {second}, the RDMA device node {me} \
                     is a member on, under the observers' traffic takes the node out of the \
                     cluster{mapping}"
                ),
                removed,
            )
        }
        Some(SecondDevice::Add(_)) => leave(tap),
        None => match bounded(kernel, CALL_TIMEOUT, |k| k.reload_module()) {
            Ok(Some(reloaded)) => {
                let took = elapsed_ms(started, monotonic_ns());
                tap.comment(&format!("unload and load {took} ms"));
                tap.check(
                    &format!(
                        "leave/rejoin cycle {cycle}: node {me} unloads LITE's module{mapping} \
                         (-ENOSYS meanwhile) and loads it again"
                    ),
                    reloaded,
                )
            }
            Ok(None) => leave(tap),
            Err(e) => tap.check(
                &format!("leave/rejoin cycle {cycle}: node {me} leaves"),
                Err(e),
            ),
        },
    };
    if !left_ok {
        return CycleEnd::StillMember;
    }

    tap.check(
        &format!(
            "leave/rejoin cycle {cycle}: once left, get_node_id, leave(0) again and \
             rdma_write on a handle from before the leave return -ENOTCONN"
        ),
        out_of_the_cluster(kernel.as_ref(), old, password),
    );
    thread::sleep(phase.config.pacing.away);

    let started = monotonic_ns();
    let joined = join_again(kernel, phase.config.cm, phase.config.pacing.change);
    let took = elapsed_ms(started, monotonic_ns());
    tap.comment(&format!("rejoin {took} ms"));
    let shown = joined
        .as_ref()
        .map_or("none".to_string(), |id| id.to_string());
    let rejoined = joined.is_ok();
    tap.check(
        &format!("leave/rejoin cycle {cycle}: join returns node {me}'s id again (got {shown})"),
        joined.and_then(|id| unless(id == me, || format!("joined as node {id}, not {me}"))),
    );
    if let Some(owner) = owner.filter(|_| rejoined && wrote_dsm.get()) {
        tap.check(
            &format!(
                "leave/rejoin cycle {cycle}: node {me}, back, counts its leave in node \
                 {owner}'s DSM region"
            ),
            dsm::count_leave(kernel.as_ref(), owner),
        );
    }
    if !rejoined {
        return CycleEnd::Out;
    }
    if let Some(step) = device_step {
        let (expected, why) = match step {
            SecondDevice::Add(_) => (
                second,
                format!(", which the parameter names, with {first} there too"),
            ),
            SecondDevice::Remove => (first, String::new()),
        };
        tap.check(
            &format!("leave/rejoin cycle {cycle}: node {me} is a member on {expected} again{why}"),
            joined_on(kernel.as_ref(), expected),
        );
        if let SecondDevice::Add(_) = step {
            let traffic =
                alloc_on_first_observer(kernel.as_ref(), observers, DEVICE_TRAFFIC_SIZE, password);
            let ((), report) = traffic_during(kernel, traffic, me, false, || {
                thread::sleep(DEVICE_TRAFFIC_SPELL)
            });
            check_traffic(
                tap,
                &format!(
                    "leave/rejoin cycle {cycle}: node {me} runs checked traffic with an observer \
                     over {second} for {} s: no error, no byte differs",
                    DEVICE_TRAFFIC_SPELL.as_secs()
                ),
                report,
                false,
            );
        }
    }

    let whole = phase.survivors();
    let started = monotonic_ns();
    let deadline = after(started, phase.config.pacing.change);
    let read = || total_nodes(kernel.as_ref());
    let polled = poll_until(read, whole.into(), deadline, phase.config.pacing.poll);
    let took = elapsed_ms(started, polled.at_ns);
    let total = describe_total(&polled.value);
    tap.check(
        &format!(
            "leave/rejoin cycle {cycle}: get_total_node returns {whole} after the join \
             (got {total}, after {took} ms)"
        ),
        unless(polled.reached, || {
            format!(
                "still {total} after {} s",
                phase.config.pacing.change.as_secs()
            )
        }),
    );
    CycleEnd::Completed
}

/// Checks that the node is out of the cluster: its calls, also one on
/// `old`, a handle from before the leave, get `ENOTCONN`.
fn out_of_the_cluster<K: Kernel>(
    kernel: &K,
    old: Result<u64, String>,
    password: u64,
) -> Result<(), String> {
    let mut calls = vec![
        ("get_node_id".to_string(), kernel.get_node_id()),
        ("leave(0) again".to_string(), kernel.leave(0)),
    ];
    if let Ok(handle) = old {
        let ret = write_at(kernel, handle, 0, &[0x4cu8; 16], password);
        calls.push((format!("rdma_write on handle {handle:#x}"), ret));
    }
    let mut problems: Vec<String> = calls
        .into_iter()
        .filter_map(|(call, ret)| {
            let refused = expect_errno(ret, libc::ENOTCONN);
            refused.err().map(|e| format!("{call}: {e}"))
        })
        .collect();
    if let Err(e) = old {
        problems.push(format!("no handle from before the leave to try: {e}"));
    }
    no_problems(problems)
}

/// Tries for up to `patience` while the manager refuses for now:
/// `EADDRINUSE` (this node's earlier incarnation still counts as alive) or
/// `EAGAIN` (it just started).
fn join_again<K: SharedKernel>(
    kernel: &Arc<K>,
    cm: Ipv4Addr,
    patience: Duration,
) -> Result<u32, String> {
    let deadline = after(monotonic_ns(), patience);
    let mut refusals = 0u32;
    loop {
        let ret = bounded(kernel, CALL_TIMEOUT, move |k| join_call(k, cm))?;
        let for_now = [libc::EADDRINUSE, libc::EAGAIN].map(|errno| -c_long::from(errno));
        if for_now.contains(&ret) && monotonic_ns() < deadline {
            refusals += 1;
            thread::sleep(JOIN_RETRY);
            continue;
        }
        return match u32::try_from(ret) {
            Ok(id) if id > 0 => Ok(id),
            _ => Err(format!(
                "join {cm} returned {} (after {refusals} refusals for now)",
                describe_result(ret)
            )),
        };
    }
}

/// A change of the cluster's size, as a [`SizeWatch`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SizeChange {
    /// `lite_get_total_node`'s new result.
    total: c_long,
    /// When it was read (`CLOCK_MONOTONIC`, ns).
    at_ns: u64,
}

/// A thread that reads the cluster's size every so often and reports each
/// change, so that no change is missed while the observer is busy.
struct SizeWatch {
    changes: Receiver<SizeChange>,
    reader: Stoppable<()>,
}

impl SizeWatch {
    /// Starts reading every `every`; the first reading is the first change.
    fn start<K: SharedKernel>(kernel: &Arc<K>, every: Duration) -> Result<Self, String> {
        let (sender, changes) = mpsc::channel();
        let kernel = Arc::clone(kernel);
        let reader = Stoppable::spawn("cluster-size", move |stop| {
            let mut last = None;
            while !stop.load(Ordering::SeqCst) {
                let total = kernel.get_total_node();
                if last != Some(total) {
                    last = Some(total);
                    let at_ns = monotonic_ns();
                    if sender.send(SizeChange { total, at_ns }).is_err() {
                        return;
                    }
                }
                thread::sleep(every);
            }
        })?;
        Ok(SizeWatch { changes, reader })
    }

    /// Waits until the size becomes `target`, read no later than `within`
    /// after `since_ns`; when that was. Sizes neither `target` nor in
    /// `expected` on the way are added to `odd`.
    fn wait_for(
        &self,
        target: c_long,
        expected: &[c_long],
        since_ns: u64,
        within: Duration,
        odd: &mut Vec<String>,
    ) -> Result<u64, String> {
        let deadline_ns = after(since_ns, within);
        loop {
            let left = Duration::from_nanos(deadline_ns.saturating_sub(monotonic_ns()));
            match self.changes.recv_timeout(left) {
                Ok(change) if change.at_ns > deadline_ns => {
                    return Err(format!(
                        "get_total_node did not return {target} in time (the next change, to \
                         {}, came {} ms late)",
                        describe_result(change.total),
                        elapsed_ms(deadline_ns, change.at_ns)
                    ))
                }
                Ok(change) if change.total == target => return Ok(change.at_ns),
                Ok(change) => {
                    if !expected.contains(&change.total) {
                        odd.push(describe_result(change.total));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "get_total_node did not return {target} in time ({} ms)",
                        within.as_millis()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the thread reading the cluster's size ended".to_string())
                }
            }
        }
    }
}

impl Drop for SizeWatch {
    fn drop(&mut self) {
        self.reader.stop();
    }
}

/// `None` for what failed.
struct Observed {
    /// The spread LMR, filled with this node's pattern.
    spread: Option<Target>,
    /// The traffic LMR on the peer.
    traffic: Option<Target>,
}

fn spread_seed(node: u32) -> u64 {
    pattern::seed(&[u64::from(node), SPREAD_LMR_SIZE, 0x1ea7e])
}

/// Sets up, then follows every cycle and checks its spread LMR after each.
fn observe<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    phase: &Phase,
    leaver: u32,
    peer: u32,
    publishes: bool,
) {
    let me = phase.me;
    let seed = spread_seed(me);
    // Before anything else, so that it sees the cluster whole at first.
    let watch = SizeWatch::start(kernel, phase.config.pacing.poll);
    let mapper = publishes.then_some(leaver);
    let observed = set_up_observer(kernel, tap, me, peer, mapper, seed);
    let leave_region = if publishes {
        dsm::create_leave_region(kernel.as_ref(), tap, me)
    } else {
        None
    };
    let traffic = observed.traffic.map(|lmr| {
        let seed = pattern::seed(&[u64::from(me), 0x7a1c]);
        spawn_traffic(kernel, "rejoin-traffic", (lmr, seed))
    });

    if !survivors_barrier(kernel, tap, phase, "before the cycles") {
        traffic.iter().flatten().for_each(Stoppable::stop);
        tap.bail_out("the survivors are out of step");
        return;
    }
    let mut cycle_from_ns = monotonic_ns();
    match &watch {
        Ok(watch) => {
            for cycle in 1..=CYCLES {
                let followed = follow_cycle(tap, phase, watch, leaver, cycle, cycle_from_ns);
                check_spread(kernel, tap, observed.spread, seed, cycle);
                match followed {
                    Some(back_ns) => cycle_from_ns = back_ns,
                    None => {
                        if cycle < CYCLES {
                            tap.comment(&format!(
                                "cycles {} to {CYCLES} not followed: cycle {cycle} did not \
                                 complete",
                                cycle + 1
                            ));
                        }
                        break;
                    }
                }
            }
        }
        Err(e) => tap.not_ok(
            &format!("leave/rejoin: node {me} follows the cluster's size"),
            e,
        ),
    }
    drop(watch);

    check_observer_traffic(tap, peer, traffic);
    survivors_barrier(kernel, tap, phase, "after the cycles");
    dsm::check_after_leaves(tap, me, leave_region);
    let freed: Vec<String> = [("spread", observed.spread), ("traffic", observed.traffic)]
        .into_iter()
        .filter_map(|(name, lmr)| {
            let lmr = lmr?;
            expect_zero(kernel.free(lmr.handle))
                .err()
                .map(|e| format!("the {name} LMR: {e}"))
        })
        .collect();
    tap.check(
        "leave/rejoin: free of the spread and traffic LMRs returns 0",
        no_problems(freed),
    );
}

/// One test point each: the spread LMR, published for `mapper` if there
/// is one, and the traffic LMR on `peer`.
fn set_up_observer<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    me: u32,
    peer: u32,
    mapper: Option<u32>,
    seed: u64,
) -> Observed {
    let password = password_of(me);
    let spread = alloc_lmr(kernel.as_ref(), NODE_SPREAD, SPREAD_LMR_SIZE, password)
        .and_then(|lmr| bounded(kernel, CALL_TIMEOUT, move |k| fill(k, lmr, seed))?.map(|()| lmr));
    tap.check(
        &format!(
            "leave/rejoin: alloc_remote of {} MiB spread (node 0) and a write of node {me}'s \
             pattern over all of it return 0",
            SPREAD_LMR_SIZE >> 20
        ),
        spread.as_ref().map(drop).map_err(Clone::clone),
    );
    if let Some(mapper) = mapper {
        let published = match &spread {
            Ok(lmr) => expect_zero(kernel.add_ask_mr_table(
                SPREAD_NAME,
                lmr.handle,
                PERM_READ,
                lmr.password,
            )),
            Err(_) => Err("there is no spread LMR to publish".to_string()),
        };
        tap.check(
            &format!(
                "leave/rejoin: add_ask_mr_table of the spread LMR as name {SPREAD_NAME:#x} \
                 (for node {mapper} to map) returns 0"
            ),
            published,
        );
    }
    let traffic = alloc_lmr(kernel.as_ref(), peer, TRAFFIC_LMR_SIZE, password);
    let traffic = tap.check_value(
        &format!(
            "leave/rejoin: alloc_remote of {} MiB on node {peer} for traffic during the \
             cycles returns a handle",
            TRAFFIC_LMR_SIZE >> 20
        ),
        traffic,
    );
    Observed {
        spread: spread.ok(),
        traffic,
    }
}

fn fill<K: Kernel>(kernel: &K, lmr: Target, seed: u64) -> Result<(), String> {
    expect_zero(write_pattern(kernel, lmr, seed))
        .map_err(|e| format!("write of {} B: {e}", lmr.size))
}

fn read_and_verify<K: Kernel>(kernel: &K, lmr: Target, seed: u64) -> Result<(), String> {
    read_and_verify_window(kernel, lmr, seed, 0, lmr.size)
}

fn read_and_verify_window<K: Kernel>(
    kernel: &K,
    lmr: Target,
    seed: u64,
    offset: u64,
    len: u64,
) -> Result<(), String> {
    let (ret, data) = read_poisoned(kernel, lmr, seed, offset, len);
    expect_zero(ret).map_err(|e| format!("read of {len} B at {offset}: {e}"))?;
    pattern::verify(seed, offset, &data).map_err(|m| m.to_string())
}

/// `(offset, len)`: [`SAMPLE_WINDOW`] bytes around every chunk boundary,
/// and the first and last bytes.
fn sample_windows(size: u64) -> Vec<(u64, u64)> {
    let half = SAMPLE_WINDOW / 2;
    let mut windows = vec![(0, SAMPLE_WINDOW.min(size))];
    let mut boundary = CHUNK_SIZE;
    while boundary < size {
        windows.push((boundary - half, SAMPLE_WINDOW.min(size - (boundary - half))));
        boundary += CHUNK_SIZE;
    }
    windows.push((size.saturating_sub(SAMPLE_WINDOW), SAMPLE_WINDOW.min(size)));
    windows
}

fn read_and_verify_samples<K: Kernel>(kernel: &K, lmr: Target, seed: u64) -> Result<(), String> {
    sample_windows(lmr.size)
        .into_iter()
        .try_for_each(|(offset, len)| read_and_verify_window(kernel, lmr, seed, offset, len))
}

/// One test point: the size down by one, then whole again, from `from_ns`
/// (the previous cycle's end). When the cluster was whole again, if it was.
fn follow_cycle<W: Write>(
    tap: &mut Tap<W>,
    phase: &Phase,
    watch: &SizeWatch,
    leaver: u32,
    cycle: u32,
    from_ns: u64,
) -> Option<u64> {
    let whole = c_long::from(phase.survivors());
    let without = whole - 1;
    let sizes = [whole, without];
    let mut odd = Vec::new();
    let within = phase.config.pacing.change;
    let down_within = if cycle == 1 {
        phase.config.pacing.first_leave
    } else {
        within
    };
    let down = watch.wait_for(without, &sizes, from_ns, down_within, &mut odd);
    let back = down.as_ref().map_err(Clone::clone).and_then(|&down_ns| {
        watch
            .wait_for(whole, &sizes, down_ns, within, &mut odd)
            .map(|back_ns| (down_ns, back_ns))
    });
    if let Ok((down_ns, back_ns)) = back {
        tap.comment(&format!(
            "cycle {cycle}: {without} nodes {} ms after the cycle could begin, for {} ms",
            elapsed_ms(from_ns, down_ns),
            elapsed_ms(down_ns, back_ns)
        ));
    }
    let outcome = match (&back, odd.is_empty()) {
        (Ok(_), true) => Ok(()),
        (Ok(_), false) => Err(format!("get_total_node also returned {}", odd.join(", "))),
        (Err(e), _) if odd.is_empty() => Err(e.clone()),
        (Err(e), _) => Err(format!(
            "{e}; get_total_node also returned {}",
            odd.join(", ")
        )),
    };
    tap.check(
        &format!(
            "leave/rejoin cycle {cycle}: get_total_node went from {whole} to {without} and \
             back to {whole} (node {leaver} left and joined again)"
        ),
        outcome,
    );
    back.ok().map(|(_, back_ns)| back_ns)
}

/// Whole after the first cycle (whose leave moved the chunks the leaver
/// held) and the last, around every chunk boundary after the others, so
/// that the observers keep up with the leaver under emulation.
fn check_spread<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    spread: Option<Target>,
    seed: u64,
    cycle: u32,
) {
    let whole = cycle == 1 || cycle == CYCLES;
    let read: fn(&K, Target, u64) -> Result<(), String> = if whole {
        read_and_verify
    } else {
        read_and_verify_samples
    };
    let how = if whole {
        "whole"
    } else {
        "around every chunk boundary"
    };
    let outcome = match spread {
        Some(lmr) => {
            bounded(kernel, CALL_TIMEOUT, move |k| read(k, lmr, seed)).and_then(|verdict| verdict)
        }
        None => Err("there is no spread LMR to read".to_string()),
    };
    tap.check(
        &format!(
            "leave/rejoin cycle {cycle}: the {} MiB spread LMR reads back {how} with this \
             node's pattern",
            SPREAD_LMR_SIZE >> 20
        ),
        outcome,
    );
}

fn check_observer_traffic<W: Write>(
    tap: &mut Tap<W>,
    peer: u32,
    traffic: Option<Result<Stoppable<TrafficReport>, String>>,
) {
    let report = traffic
        .ok_or_else(|| "there is no traffic LMR".to_string())
        .and_then(|started| started?.finish("traffic"));
    let shown = report.as_ref().map_or(String::new(), |r| {
        format!(" ({} round trips, {} mismatches)", r.rounds, r.mismatches)
    });
    tap.check(
        &format!("leave/rejoin: traffic to node {peer} during the cycles comes back intact{shown}"),
        report.and_then(|r| r.verdict()),
    );
}

#[cfg(test)]
mod tests {
    use super::super::alloc;
    use super::*;
    use crate::fake_kernel::{Defects, FakeKernel};
    use crate::tap::assert_contains;

    fn observer(leaver: u32, peer: u32, publishes: bool) -> Option<Part> {
        Some(Part::Observer {
            leaver,
            peer,
            publishes,
        })
    }

    #[test]
    fn the_samples_straddle_every_chunk_boundary_and_reach_both_ends() {
        let half = SAMPLE_WINDOW / 2;
        assert_eq!(
            sample_windows(SPREAD_LMR_SIZE),
            vec![
                (0, SAMPLE_WINDOW),
                (CHUNK_SIZE - half, SAMPLE_WINDOW),
                (2 * CHUNK_SIZE - half, SAMPLE_WINDOW),
                (3 * CHUNK_SIZE - half, SAMPLE_WINDOW),
                (SPREAD_LMR_SIZE - SAMPLE_WINDOW, SAMPLE_WINDOW),
            ]
        );
        // Smaller than a window: the whole LMR, twice.
        assert_eq!(sample_windows(100), vec![(0, 100), (0, 100)]);
    }

    #[test]
    fn the_highest_survivor_leaves_and_the_others_send_to_each_other() {
        let leaver = |observers: &[u32]| {
            Some(Part::Leaver {
                observers: observers.to_vec(),
            })
        };
        assert_eq!(part(3, 4, 4), leaver(&[1, 2]));
        // The lowest observer publishes its spread LMR.
        assert_eq!(part(1, 4, 4), observer(3, 2, true));
        assert_eq!(part(2, 4, 4), observer(3, 1, false));
        // Whichever node died.
        assert_eq!(part(4, 2, 4), leaver(&[1, 3]));
        assert_eq!(part(1, 2, 4), observer(4, 3, true));
        assert_eq!(part(3, 2, 4), observer(4, 1, false));
        assert_eq!(part(2, 1, 4), observer(4, 3, true));
        assert_eq!(part(2, 5, 5), observer(4, 3, false));
        assert_eq!(part(3, 5, 5), observer(4, 1, false));
        // No part without three survivors, or for the victim.
        assert_eq!(
            [part(1, 3, 3), part(2, 3, 3), part(4, 4, 4)],
            [None, None, None]
        );
    }

    #[test]
    fn a_refused_leave_while_mapping_says_so() {
        // -ENOSPC while mapping is the leave_refuses_mapped_lmrs run's.
        assert_eq!(leave_verdict(0, Some(1)), Ok(()));
        let busy = -c_long::from(libc::EBUSY);
        let reason = leave_verdict(busy, Some(1)).unwrap_err();
        let refused = "got -16 (-EBUSY): the leave refused to move the chunks held here, while \
                       this node maps node 1's spread LMR";
        assert_contains(&reason, refused);
        // Without a mapping, or for another errno, the errno alone.
        let alone = leave_verdict(busy, None);
        assert_eq!(alone, Err("expected 0, got -16 (-EBUSY)".to_string()));
        let other = leave_verdict(-c_long::from(libc::EALREADY), Some(1));
        assert_eq!(other, Err("expected 0, got -114 (-EALREADY)".to_string()));
    }

    fn held(kernel: &FakeKernel) -> u64 {
        held_chunks(kernel).expect("get_stats")
    }

    /// The spread LMR of node 1 of `kernels`, published as [`SPREAD_NAME`]
    /// with password 7.
    fn published_spread(kernels: &[FakeKernel]) -> Target {
        let handle = alloc(&kernels[0], NODE_SPREAD, SPREAD_LMR_SIZE, 7).expect("alloc");
        let published = kernels[0].add_ask_mr_table(SPREAD_NAME, handle, PERM_READ, 7);
        assert_eq!(published, 0);
        let (size, password) = (SPREAD_LMR_SIZE, 7);
        Target {
            handle,
            size,
            password,
        }
    }

    #[test]
    fn a_leave_moves_a_mapped_lmr_s_chunks_but_never_to_a_mapper() {
        let kernels = FakeKernel::joined_cluster(4, Defects::default());
        let lmr = published_spread(&kernels);
        assert_eq!(fill(&kernels[0], lmr, 5), Ok(()));
        // Node 1's chunks are on nodes 2, 3, 4 and 2; node 4 maps the LMR.
        let before: Vec<u64> = kernels.iter().map(held).collect();
        assert_eq!(before, [0, 2, 1, 1]);
        let mapping = kernels[3].ask_lmr(1, SPREAD_NAME, PERM_READ, 7);
        assert!(mapping > 0, "{mapping}");
        assert_eq!(kernels[1].leave(0), 0);
        // Both of node 2's chunks went to node 3, not to the mapper.
        assert_eq!((held(&kernels[2]), held(&kernels[3])), (3, 1));
        let handle = mapping.unsigned_abs();
        let lmr = Target { handle, ..lmr };
        assert_eq!(read_and_verify(&kernels[3], lmr, 5), Ok(()));

        // With node 2 out, node 3's chunks have nowhere to go.
        assert_eq!(kernels[2].leave(0), -c_long::from(libc::ENOSPC));
        assert_eq!(kernels[2].get_node_id(), 3);
        assert_eq!(kernels[3].umap_lmr(lmr.handle), 0);
        assert_eq!(kernels[2].leave(0), 0);
        assert_eq!(held(&kernels[3]), 4);
    }
}
