//! The network partition test run by `lite-partition-test`, as the
//! README's partition test describes it: the harness cuts the cut node off
//! once it says it is ready ([`READY_MARKER`]) and every survivor is past
//! the last barrier before the cut ([`SURVIVOR_READY_MARKER`]); the cut
//! node must fence itself and join again on its own, with its old id, as a
//! new incarnation. The pause phase ([`pauses`]) comes first when the
//! harness asks for it ([`PartitionConfig::pause_traffic`]).
//!
//! Both roles go through the same barriers (with all `nodes`):
//!
//! 1. everybody joined, and the cut node has registered port [`CUT_PORT`]
//!    (the survivors find it by that port); the pause phase follows, with
//!    a barrier once every node allocated its traffic's LMRs and one at
//!    its end;
//! 2. the holder (the lowest survivor) allocated LMR Y on itself and
//!    published it by name;
//! 3. the cut node mapped Y and its writer thread has written pattern P2
//!    over all of Y at least once; it keeps writing P2 into Y, 4 KiB at a
//!    time, until the end.
//!
//! After barrier 3 the cut node prints its marker and watches its own
//! membership. The survivors wait for the cluster to shrink; then the
//! holder writes a canary pattern P3 over Y and re-reads it every
//! [`Pacing::canary_every`] until the end: no write of the cut node may
//! land once it is expelled. A last barrier of all nodes ends the test:
//! the rejoined node's first barrier takes the round the others are at.
//!
//! Every node reports TAP; every wait is bounded, and what does not
//! happen in time is a failed test point.

use std::io::Write;
use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use libc::c_long;
use lite::sys::{PERM_READ, PERM_WRITE};

use crate::cluster_test::io::{handle_of, unless, write_at};
use crate::cluster_test::rpc::register;
use crate::debugfs::membership::{
    parse_membership, MembershipFile, NodeMembership, PeerState, MEMBERSHIP_FILE,
};
use crate::debugfs::DEBUGFS_DIR;
use crate::errno::{describe_result, errno_name, expect_zero};
use crate::failure_test::{
    after, alloc_lmr, barrier_point, describe_total, elapsed_ms, join_point, node_or_none,
    or_unknown, poll_for, poll_until, port_owner_point, read_poisoned, setup_barrier, total_nodes,
    write_pattern, write_round, SharedKernel, Stoppable, Target, WRITE_SIZE,
};
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::lowest_other;
use crate::stats::monotonic_ns;
use crate::tap::{no_problems, Tap};

pub mod pauses;

pub use pauses::{PAUSES_OVER_MARKER, PAUSE_READY_MARKER};

/// The cut node's console line once its writes to LMR Y land; the harness
/// takes the node's link down when it appears. It is a TAP comment, so it
/// does not disturb the node's TAP.
pub const READY_MARKER: &str = "LITE-PARTITION-CUT ready";

/// A survivor's console line once it returned from the last barrier
/// before the cut. The cut node may return from that barrier while its
/// answer to a survivor is still on the wire, so the harness cuts only
/// once every survivor printed this too. A TAP comment, like
/// [`READY_MARKER`].
pub const SURVIVOR_READY_MARKER: &str = "LITE-PARTITION-SURVIVOR ready";

/// The RPC port the cut node registers, by which the survivors find it.
pub const CUT_PORT: u32 = 8;

/// Nobody sends any.
const CUT_PORT_MAX_SIZE: u64 = 4096;

const LMR_SIZE: u64 = 1 << 20;

/// "PARTITIO".
const LMR_NAME: u64 = 0x5041_5254_4954_494f;

/// Of LMR Y and its name ("cut-off").
const LMR_PASSWORD: u64 = 0x0063_7574_2d6f_6666;

/// Writes of [`WRITE_SIZE`] that cover LMR Y once.
const SLOTS: u64 = LMR_SIZE / WRITE_SIZE as u64;

const FIRST_PASS_TIMEOUT: Duration = Duration::from_secs(60);

/// From the last barrier (survivors) or the marker (the cut node): the
/// harness acts on the marker at once, and both sides notice the silence
/// after 3 s.
const CUT_TIMEOUT: Duration = Duration::from_secs(60);

/// From the cut: the link is down for 10 s, and the node tries to join
/// again every second once expelled.
const REJOIN_TIMEOUT: Duration = Duration::from_secs(90);

const PEER_BACK_TIMEOUT: Duration = Duration::from_secs(30);

const TOTAL_BACK_TIMEOUT: Duration = Duration::from_secs(60);

/// The cut node may first spend every bound above on checks that fail.
const FINAL_BARRIER_TIMEOUT: Duration = Duration::from_secs(6 * 60);

named_enum! {
    /// Which part a node plays, named as on the command line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Role {
        /// Stays connected and watches the cut node go and come back.
        Survivor = "survivor",
        /// Gets cut off from the network, and joins again on its own.
        Cut = "cut",
    }
}

/// How often things are looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Of the size, the membership file and the writer's progress.
    pub poll: Duration,
    /// How often the holder re-reads LMR Y after writing the canary.
    pub canary_every: Duration,
    /// Of the cut node's marker, in case a kernel message cut into an
    /// earlier one on the console.
    pub marker_every: Duration,
}

impl Pacing {
    /// On the test machines.
    pub const VMS: Pacing = Pacing {
        poll: Duration::from_millis(100),
        canary_every: Duration::from_millis(200),
        marker_every: Duration::from_secs(5),
    };
}

/// What to test against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionConfig {
    /// Address of the cluster manager.
    pub cm: Ipv4Addr,
    /// Number of nodes, the cut node included.
    pub nodes: u32,
    /// How often things are looked at.
    pub pacing: Pacing,
    /// Of the pause phase's traffic, by each node's clock; zero leaves the
    /// phase out.
    pub pause_traffic: Duration,
}

/// Seed of P2, what the cut node writes into LMR Y on `holder`.
fn cut_pattern(cut: u32, holder: u32) -> u64 {
    pattern::seed(&[u64::from(cut), u64::from(holder), LMR_SIZE, 2])
}

/// Seed of P3, the canary over LMR Y once the cut node is expelled.
fn canary_pattern(cut: u32, holder: u32) -> u64 {
    pattern::seed(&[u64::from(holder), u64::from(cut), LMR_SIZE, 3])
}

fn read_membership<K: Kernel>(kernel: &K) -> Result<MembershipFile, String> {
    match kernel.read_debugfs(MEMBERSHIP_FILE) {
        None => Err("this kernel has no debugfs".to_string()),
        Some(Err(e)) => Err(format!("cannot read {DEBUGFS_DIR}/{MEMBERSHIP_FILE}: {e}")),
        Some(Ok(text)) => parse_membership(&text),
    }
}

fn describe_membership(file: &Result<MembershipFile, String>) -> String {
    match file {
        Ok(MembershipFile::NotJoined) => "joined 0".to_string(),
        Ok(MembershipFile::Member(view)) => format!(
            "node {} incarnation {} fenced {}",
            view.node,
            view.incarnation,
            u8::from(view.fenced)
        ),
        Err(e) => e.clone(),
    }
}

fn final_barrier<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    nodes: u32,
    what: &str,
) {
    barrier_point(
        kernel,
        tap,
        nodes,
        FINAL_BARRIER_TIMEOUT,
        &format!("final dist_barrier({nodes}) {what} returns 0"),
    );
}

// ---------------------------------------------------------------------
// The survivors

/// The holder's part before the cut.
fn publish_lmr<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) -> Option<Target> {
    let lmr = tap.check_value(
        &format!(
            "alloc_remote of {} MiB on this node (node {me}) returns a handle (LMR Y)",
            LMR_SIZE >> 20
        ),
        alloc_lmr(kernel, me, LMR_SIZE, LMR_PASSWORD),
    )?;
    let ret = kernel.add_ask_mr_table(LMR_NAME, lmr.handle, PERM_READ | PERM_WRITE, LMR_PASSWORD);
    tap.check(
        &format!("add_ask_mr_table publishes LMR Y under {LMR_NAME:#x} with READ|WRITE"),
        expect_zero(ret),
    )
    .then_some(lmr)
}

/// Peer `cut`'s state and incarnation, or what the file showed instead.
fn peer_line(file: &Result<MembershipFile, String>, cut: u32) -> Result<(PeerState, u32), String> {
    match file {
        Ok(MembershipFile::Member(view)) => view
            .peer(cut)
            .map(|p| (p.state, p.incarnation))
            .ok_or_else(|| format!("no line for peer {cut}")),
        other => Err(describe_membership(other)),
    }
}

/// The cut node's incarnation, alive before the cut.
fn cut_peer_before<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, cut: u32) -> Option<u32> {
    let line = peer_line(&read_membership(kernel), cut);
    let shown = line
        .as_ref()
        .map_or("?".to_string(), |(state, incarnation)| {
            format!("{} incarnation {incarnation}", state.name())
        });
    let alive = line.and_then(|(state, incarnation)| {
        unless(state == PeerState::Alive, || {
            format!("peer {cut} is {}", state.name())
        })?;
        Ok(incarnation)
    });
    tap.check_value(
        &format!(
            "membership shows the node to cut off (node {cut}) alive before the cut ({shown})"
        ),
        alive,
    )
}

/// P2 everywhere in LMR Y: the cut node's writes land while it is
/// connected, so the canary later tells something.
fn check_writes_landed<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    lmr: Target,
    cut: u32,
    me: u32,
) {
    let seed = cut_pattern(cut, me);
    let (ret, data) = read_poisoned(kernel, lmr, seed, 0, lmr.size);
    let outcome = expect_zero(ret)
        .map_err(|e| format!("read: {e}"))
        .and_then(|()| pattern::verify(seed, 0, &data).map_err(|m| m.to_string()));
    tap.check(
        &format!("LMR Y holds what node {cut} wrote into it before the cut"),
        outcome,
    );
}

/// What the holder's canary reads found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanaryReport {
    /// Reads of the whole LMR that returned 0.
    pub reads: u64,
    /// Bytes that differed from the canary, summed over every read.
    pub differing_bytes: u64,
    /// The first difference found.
    pub first_difference: Option<String>,
    /// Reads that failed.
    pub failed_reads: u64,
    /// The first failure.
    pub first_failure: Option<String>,
}

impl CanaryReport {
    /// One read of the whole LMR.
    pub fn record(&mut self, ret: c_long, seed: u64, data: &[u8]) {
        if ret != 0 {
            self.failed_reads += 1;
            self.first_failure.get_or_insert_with(|| {
                format!("read {}: {}", self.reads + 1, describe_result(ret))
            });
            return;
        }
        self.reads += 1;
        if let Err(mismatch) = pattern::verify(seed, 0, data) {
            self.differing_bytes += mismatch.count;
            self.first_difference
                .get_or_insert_with(|| format!("read {}: {mismatch}", self.reads));
        }
    }

    /// The canary whole in every read, and at least one read succeeded.
    pub fn verdict(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(difference) = &self.first_difference {
            problems.push(format!(
                "{} bytes differed in all; {difference}",
                self.differing_bytes
            ));
        }
        if let Some(failure) = &self.first_failure {
            problems.push(format!("{} reads failed; {failure}", self.failed_reads));
        }
        if self.reads == 0 {
            problems.push("no read succeeded".to_string());
        }
        no_problems(problems)
    }
}

fn read_canary<K: Kernel>(kernel: &K, lmr: Target, seed: u64, report: &mut CanaryReport) {
    let (ret, data) = read_poisoned(kernel, lmr, seed, 0, lmr.size);
    report.record(ret, seed, &data);
}

/// Written once the cut node is expelled, read back until told to stop.
struct Canary {
    lmr: Target,
    seed: u64,
    reader: Stoppable<CanaryReport>,
}

/// Writes P3 over LMR Y (a test point) and re-reads it every `every`.
fn start_canary<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    lmr: Target,
    cut: u32,
    me: u32,
    every: Duration,
) -> Option<Canary> {
    let seed = canary_pattern(cut, me);
    let ret = write_pattern(kernel.as_ref(), lmr, seed);
    if !tap.check(
        &format!(
            "rdma_write of the canary over all {} MiB of LMR Y returns 0",
            LMR_SIZE >> 20
        ),
        expect_zero(ret),
    ) {
        return None;
    }
    let reader_kernel = Arc::clone(kernel);
    let reader = Stoppable::spawn("canary", move |stop| {
        let mut report = CanaryReport::default();
        while !stop.load(Ordering::SeqCst) {
            read_canary(reader_kernel.as_ref(), lmr, seed, &mut report);
            thread::sleep(every);
        }
        report
    });
    let reader = tap.value_or_not_ok("the canary reader starts", reader)?;
    Some(Canary { lmr, seed, reader })
}

/// Stops the canary reader, reads LMR Y a last time (after the last
/// barrier, so after every write the cut node ever issued) and reports
/// whether the canary stayed whole.
fn finish_canary<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    canary: Option<Canary>,
    cut: u32,
    every: Duration,
) {
    let description = |report: Option<&CanaryReport>| {
        let (reads, differing) = report.map_or(("no".to_string(), "?".to_string()), |r| {
            (r.reads.to_string(), r.differing_bytes.to_string())
        });
        format!(
            "LMR Y keeps the canary while node {cut} is cut off and after it joined again: \
             {differing} bytes differ in {reads} reads, every {} ms",
            every.as_millis()
        )
    };
    let finished = canary
        .ok_or_else(|| "the canary was never written".to_string())
        .and_then(|c| Ok((c.lmr, c.seed, c.reader.finish("canary reader")?)));
    let Some((lmr, seed, mut report)) = tap.value_or_not_ok(&description(None), finished) else {
        return;
    };
    read_canary(kernel, lmr, seed, &mut report);
    tap.check(&description(Some(&report)), report.verdict());
}

struct TotalWait<'a> {
    target: u32,
    /// What reaching it shows, for the description ("node 3 is expelled").
    what: &'a str,
    from_ns: u64,
    /// What happened then, for the description ("the last barrier").
    since: &'a str,
    timeout: Duration,
}

/// A test point; when the size came.
fn total_point<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    wait: &TotalWait<'_>,
    every: Duration,
) -> Option<u64> {
    let target = wait.target;
    let polled = poll_until(
        || total_nodes(kernel),
        u64::from(target),
        after(wait.from_ns, wait.timeout),
        every,
    );
    let took = elapsed_ms(wait.from_ns, polled.at_ns);
    let total = describe_total(&polled.value);
    let shown = if polled.reached {
        tap.comment(&format!("get_total_node {target} after {took} ms"));
        format!("after {took} ms")
    } else {
        format!("still {total}")
    };
    tap.check(
        &format!(
            "get_total_node returns {target} once {}, within {} s of {} ({shown})",
            wait.what,
            wait.timeout.as_secs(),
            wait.since
        ),
        unless(polled.reached, || format!("got {total} after {took} ms")),
    )
    .then_some(polled.at_ns)
}

/// A test point: the cut node alive as an incarnation after `before`.
fn cut_peer_back<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    cut: u32,
    before: Option<u32>,
    every: Duration,
) {
    let shown_before = before.map_or("?".to_string(), |i| i.to_string());
    let mut last = Err("not read".to_string());
    let found = before.and_then(|before| {
        poll_for(after(monotonic_ns(), PEER_BACK_TIMEOUT), every, || {
            last = peer_line(&read_membership(kernel), cut);
            match last {
                Ok((PeerState::Alive, incarnation)) if incarnation > before => Some(incarnation),
                _ => None,
            }
        })
    });
    let shown = match (&found, &last) {
        (Some((incarnation, _)), _) => format!("incarnation {incarnation}"),
        (None, Ok((state, incarnation))) => format!("{} incarnation {incarnation}", state.name()),
        (None, Err(_)) => "?".to_string(),
    };
    tap.check(
        &format!(
            "membership shows node {cut} alive again as a later incarnation than {shown_before} ({shown})"
        ),
        match (found, before, last) {
            (Some(_), _, _) => Ok(()),
            (None, None, _) => Err("its incarnation before the cut is unknown".to_string()),
            (None, Some(_), Ok((state, incarnation))) => Err(format!(
                "still {} incarnation {incarnation} after {} s",
                state.name(),
                PEER_BACK_TIMEOUT.as_secs()
            )),
            (None, Some(_), Err(e)) => Err(e),
        },
    );
}

/// Joins, does `joined`, meets the others in a barrier and runs the pause
/// phase, if any; `None` if the run ends.
fn start<K: SharedKernel, W: Write, T>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    config: &PartitionConfig,
    joined: impl FnOnce(&mut Tap<W>, u32) -> T,
) -> Option<(u32, T)> {
    let nodes = config.nodes;
    let me = join_point(kernel.as_ref(), tap, config.cm, nodes)?;
    let done = joined(tap, me);
    let in_step = setup_barrier(kernel, tap, nodes, &format!("all {nodes} nodes joined"))
        && (config.pause_traffic.is_zero() || pauses::run(kernel, tap, config, me));
    in_step.then_some((me, done))
}

/// Runs a survivor's part, reporting each test point to `tap`.
pub fn run_survivor<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    config: &PartitionConfig,
) {
    let (nodes, pacing) = (config.nodes, config.pacing);
    let Some((me, ())) = start(kernel, tap, config, |_, _| ()) else {
        return;
    };
    let cut = port_owner_point(
        kernel.as_ref(),
        tap,
        me,
        nodes,
        (CUT_PORT, "the node to cut off"),
    );
    let holder = cut.and_then(|cut| lowest_other(cut, nodes));
    let lmr = if holder == Some(me) {
        publish_lmr(kernel.as_ref(), tap, me)
    } else {
        None
    };
    let incarnation_before = cut.and_then(|cut| cut_peer_before(kernel.as_ref(), tap, cut));
    if !setup_barrier(kernel, tap, nodes, "publishing LMR Y")
        || !setup_barrier(kernel, tap, nodes, "the cut node's writer covered LMR Y")
    {
        return;
    }
    tap.comment(SURVIVOR_READY_MARKER);
    let Some(cut) = cut else {
        // The cut node still gets ready and is cut off, so that it is not
        // held up; there is nothing to watch here.
        tap.bail_out("no node to cut off");
        return;
    };
    if let Some(lmr) = lmr {
        check_writes_landed(kernel.as_ref(), tap, lmr, cut, me);
    }

    let waiting_since = monotonic_ns();
    let shrunk = total_point(
        kernel.as_ref(),
        tap,
        &TotalWait {
            target: nodes - 1,
            what: &format!("node {cut} is expelled"),
            from_ns: waiting_since,
            since: "the last barrier",
            timeout: CUT_TIMEOUT,
        },
        pacing.poll,
    );
    let canary = lmr.and_then(|lmr| start_canary(kernel, tap, lmr, cut, me, pacing.canary_every));
    total_point(
        kernel.as_ref(),
        tap,
        &TotalWait {
            target: nodes,
            what: &format!("node {cut} joined again"),
            from_ns: shrunk.unwrap_or_else(monotonic_ns),
            since: "the cut",
            timeout: REJOIN_TIMEOUT,
        },
        pacing.poll,
    );
    cut_peer_back(kernel.as_ref(), tap, cut, incarnation_before, pacing.poll);
    final_barrier(kernel, tap, nodes, "with the node that was cut off");
    if lmr.is_some() {
        finish_canary(kernel.as_ref(), tap, canary, cut, pacing.canary_every);
    }
}

// ---------------------------------------------------------------------
// The cut node

/// What the cut node's writer saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterReport {
    /// Writes that returned 0 before the first failure.
    pub successes: u64,
    /// The first failed write's result.
    pub first_failure: Option<c_long>,
    /// When it returned (`CLOCK_MONOTONIC`, ns).
    pub first_failure_ns: u64,
    /// Writes issued after the first failure.
    pub later_writes: u64,
    /// Of which returned 0.
    pub later_successes: u64,
    /// Each once, in the order they first came.
    pub later_results: Vec<c_long>,
}

impl WriterReport {
    /// Notes one write's result `ret`, returned at `at_ns`.
    pub fn record(&mut self, ret: c_long, at_ns: u64) {
        if self.first_failure.is_none() {
            if ret == 0 {
                self.successes += 1;
            } else {
                self.first_failure = Some(ret);
                self.first_failure_ns = at_ns;
            }
            return;
        }
        self.later_writes += 1;
        if ret == 0 {
            self.later_successes += 1;
        }
        if !self.later_results.contains(&ret) {
            self.later_results.push(ret);
        }
    }

    /// The first failure must be `EHOSTDOWN`, the fenced connection's
    /// error, or at worst `EIO`, a write the cut broke under way.
    pub fn first_failure_verdict(&self) -> Result<(), String> {
        match self.first_failure {
            None => Err(format!("no write failed ({} succeeded)", self.successes)),
            Some(ret) if ret == -c_long::from(libc::EHOSTDOWN) => Ok(()),
            Some(ret) if ret == -c_long::from(libc::EIO) => Ok(()),
            Some(ret) => Err(format!(
                "expected -{} or -{}, got {}",
                errno_name(libc::EHOSTDOWN),
                errno_name(libc::EIO),
                describe_result(ret)
            )),
        }
    }

    /// No write may succeed once one failed: the handle belongs to the
    /// membership the cut ended.
    pub fn later_writes_verdict(&self) -> Result<(), String> {
        unless(self.later_successes == 0, || {
            format!(
                "{} of {} writes after the first failure returned 0",
                self.later_successes, self.later_writes
            )
        })
    }

    /// The later results for humans: `-112 (-EHOSTDOWN), -9 (-EBADF)`.
    fn later_results_text(&self) -> String {
        if self.later_results.is_empty() {
            return "none".to_string();
        }
        let shown: Vec<String> = self
            .later_results
            .iter()
            .map(|&r| describe_result(r))
            .collect();
        shown.join(", ")
    }
}

/// What the writer and the main thread share.
#[derive(Default)]
struct WriterProgress {
    successes: AtomicU64,
    failed: AtomicBool,
}

/// Writes P2 into LMR Y through `handle` until told to stop.
fn write_until_stopped<K: Kernel>(
    kernel: &K,
    (handle, seed): (u64, u64),
    progress: &WriterProgress,
    stop: &AtomicBool,
) -> WriterReport {
    let mut report = WriterReport::default();
    let (size, password) = (LMR_SIZE, LMR_PASSWORD);
    let lmr = Target {
        handle,
        size,
        password,
    };
    write_round(kernel, (lmr, seed), stop, |ret, at_ns| {
        report.record(ret, at_ns);
        if report.first_failure.is_none() {
            progress.successes.store(report.successes, Ordering::SeqCst);
        } else {
            progress.failed.store(true, Ordering::SeqCst);
        }
        ControlFlow::Continue(())
    });
    report
}

struct Writer {
    progress: Arc<WriterProgress>,
    thread: Stoppable<WriterReport>,
}

fn start_writer<K: SharedKernel>(
    kernel: &Arc<K>,
    handle: u64,
    seed: u64,
) -> Result<Writer, String> {
    let progress = Arc::new(WriterProgress::default());
    let (thread_kernel, thread_progress) = (Arc::clone(kernel), Arc::clone(&progress));
    let thread = Stoppable::spawn("writer", move |stop| {
        write_until_stopped(
            thread_kernel.as_ref(),
            (handle, seed),
            &thread_progress,
            stop,
        )
    })?;
    Ok(Writer { progress, thread })
}

/// Waits until the writer covered LMR Y once, as a test point.
fn first_pass_point<W: Write>(tap: &mut Tap<W>, writer: &Result<Writer, String>, every: Duration) {
    let started = monotonic_ns();
    let outcome = writer.as_ref().map_err(Clone::clone).and_then(|writer| {
        let progress = &writer.progress;
        let done = poll_for(after(started, FIRST_PASS_TIMEOUT), every, || {
            let covered = progress.successes.load(Ordering::SeqCst) >= SLOTS;
            (covered || progress.failed.load(Ordering::SeqCst)).then_some(covered)
        });
        match done {
            Some((true, at)) => Ok(elapsed_ms(started, at)),
            Some((false, _)) => Err(format!(
                "a write failed after {} succeeded",
                progress.successes.load(Ordering::SeqCst)
            )),
            None => Err(format!(
                "{} of {SLOTS} writes done after {} s",
                progress.successes.load(Ordering::SeqCst),
                FIRST_PASS_TIMEOUT.as_secs()
            )),
        }
    });
    let shown = outcome
        .as_ref()
        .map_or("not done".to_string(), |ms| format!("took {ms} ms"));
    tap.check(
        &format!(
            "rdma_write of {} KiB covers all of LMR Y before the cut ({SLOTS} writes, {shown})",
            WRITE_SIZE >> 10
        ),
        outcome.map(drop),
    );
}

/// Stops the writer and reports what it saw once the node was cut off.
fn finish_writer<W: Write>(tap: &mut Tap<W>, writer: Result<Writer, String>) {
    let report = writer.and_then(|writer| writer.thread.finish("writer"));
    let report = match report {
        Ok(report) => report,
        Err(reason) => {
            tap.not_ok(
                "the writer's writes fail once this node is cut off",
                &reason,
            );
            tap.not_ok(
                "no write succeeds after the writer's first failure",
                &reason,
            );
            return;
        }
    };
    let got = report
        .first_failure
        .map_or("no failure".to_string(), describe_result);
    tap.comment(&format!(
        "writer: {} writes before the first failure, then {} more ({})",
        report.successes,
        report.later_writes,
        report.later_results_text()
    ));
    tap.check(
        &format!(
            "the writer's writes fail once this node is cut off: the first failure is \
             -{} or at worst -{} (got {got})",
            errno_name(libc::EHOSTDOWN),
            errno_name(libc::EIO)
        ),
        report.first_failure_verdict(),
    );
    tap.check(
        &format!(
            "no write succeeds after the writer's first failure ({} of {} did)",
            report.later_successes, report.later_writes
        ),
        report.later_writes_verdict(),
    );
}

/// Checks that this node is a member, not fenced; its incarnation.
fn own_membership_before<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
) -> Option<u32> {
    let file = read_membership(kernel);
    let outcome = match &file {
        Ok(MembershipFile::Member(view)) if view.node == me && !view.fenced => Ok(view.incarnation),
        other => Err(format!("read {}", describe_membership(other))),
    };
    let shown = or_unknown(&outcome);
    tap.check_value(
        &format!("membership shows node {me} not fenced before the cut (incarnation {shown})"),
        outcome,
    )
}

/// Whether the membership file shows this node cut off: fenced, or no
/// member any more (a join attempt after the cut ended the membership,
/// which only a fenced node does on its own).
pub fn shows_cut_off(file: &MembershipFile) -> bool {
    match file {
        MembershipFile::Member(view) => view.fenced,
        MembershipFile::NotJoined => true,
    }
}

/// Whether the membership file shows node `me` a member again, not
/// fenced, as an incarnation after `before`.
pub fn shows_member_again(file: &MembershipFile, me: u32, before: u32) -> bool {
    matches!(file, MembershipFile::Member(NodeMembership { node, incarnation, fenced: false, .. })
        if *node == me && *incarnation > before)
}

fn seen_after(seen: &Option<(String, u64)>, from_ns: u64) -> String {
    seen.as_ref().map_or("not seen".to_string(), |(what, at)| {
        format!("{what} after {} ms", elapsed_ms(from_ns, *at))
    })
}

/// Prints the marker (again every [`Pacing::marker_every`]) until this
/// node sees itself cut off; a test point, and when the cut showed.
fn await_cut<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, pacing: Pacing) -> Option<u64> {
    let marked = monotonic_ns();
    tap.comment(READY_MARKER);
    let mut last_marker = marked;
    let mut last = Err("not read".to_string());
    let seen = poll_for(after(marked, CUT_TIMEOUT), pacing.poll, || {
        last = read_membership(kernel);
        if last.as_ref().is_ok_and(shows_cut_off) {
            return Some(describe_membership(&last));
        }
        if monotonic_ns() >= after(last_marker, pacing.marker_every) {
            tap.comment(READY_MARKER);
            last_marker = monotonic_ns();
        }
        None
    });
    let shown = seen_after(&seen, marked);
    let seen = seen.ok_or_else(|| format!("still {}", describe_membership(&last)));
    tap.check_value(
        &format!(
            "membership shows this node cut off within {} s of its ready marker ({shown})",
            CUT_TIMEOUT.as_secs()
        ),
        seen.map(|(_, at)| at),
    )
}

/// A test point: a member again on its own, its old id, not fenced, a
/// later incarnation than `before`.
fn await_member_again<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    before: Option<u32>,
    cut_at: Option<u64>,
    every: Duration,
) {
    let from = cut_at.unwrap_or_else(monotonic_ns);
    let mut last_id = 0;
    let mut last = Err("not read".to_string());
    let back = before.and_then(|before| {
        poll_for(after(from, REJOIN_TIMEOUT), every, || {
            last_id = kernel.get_node_id();
            if last_id != c_long::from(me) {
                return None;
            }
            last = read_membership(kernel);
            match &last {
                Ok(file) if shows_member_again(file, me, before) => {
                    Some(describe_membership(&last))
                }
                _ => None,
            }
        })
    });
    let shown = seen_after(&back, from);
    tap.check(
        &format!(
            "this node is a member again within {} s of the cut, with its old id and a later \
             incarnation than {} ({shown})",
            REJOIN_TIMEOUT.as_secs(),
            before.map_or("?".to_string(), |i| i.to_string())
        ),
        match (&back, before) {
            (Some(_), _) => Ok(()),
            (None, None) => Err("its incarnation before the cut is unknown".to_string()),
            (None, Some(_)) => Err(format!(
                "get_node_id returned {}, membership: {}",
                describe_result(last_id),
                describe_membership(&last)
            )),
        },
    );
}

/// The mapping from before the cut went with the old membership.
fn check_old_mapping<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, mapping: Option<u64>) {
    let Some(handle) = mapping else {
        tap.not_ok(
            "a write through the mapping from before the cut fails",
            "LMR Y was never mapped",
        );
        return;
    };
    let ret = write_at(kernel, handle, 0, &[0u8; 64], LMR_PASSWORD);
    tap.check(
        &format!(
            "a write through the mapping from before the cut fails (got {})",
            describe_result(ret)
        ),
        unless(ret != 0, || {
            "it returned 0: a handle of the old membership still works".to_string()
        }),
    );
}

fn register_cut_port<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>) {
    let ret = register(kernel, CUT_PORT, CUT_PORT_MAX_SIZE, "partition-cut");
    tap.check(
        &format!("register_application(port {CUT_PORT}) returns 0"),
        expect_zero(ret),
    );
}

/// Runs the cut node's part, reporting each test point to `tap`.
pub fn run_cut<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    config: &PartitionConfig,
) {
    let (nodes, pacing) = (config.nodes, config.pacing);
    let Some((me, incarnation_before)) = start(kernel, tap, config, |tap, me| {
        register_cut_port(kernel.as_ref(), tap);
        own_membership_before(kernel.as_ref(), tap, me)
    }) else {
        return;
    };
    if !setup_barrier(kernel, tap, nodes, "publishing LMR Y") {
        return;
    }
    let holder = lowest_other(me, nodes);
    let mapping = match holder {
        Some(holder) => handle_of(
            kernel.ask_lmr(holder, LMR_NAME, PERM_WRITE, LMR_PASSWORD),
            "ask_lmr",
        ),
        None => Err("no other node".to_string()),
    };
    let mapping = tap.check_value(
        &format!(
            "ask_lmr of LMR Y on its holder ({}) for WRITE returns a handle",
            node_or_none(holder)
        ),
        mapping,
    );
    let writer = match (mapping, holder) {
        (Some(handle), Some(holder)) => start_writer(kernel, handle, cut_pattern(me, holder)),
        _ => Err("LMR Y is not mapped".to_string()),
    };
    first_pass_point(tap, &writer, pacing.poll);
    if !setup_barrier(kernel, tap, nodes, "the cut node's writer covered LMR Y") {
        if let Ok(writer) = &writer {
            writer.thread.stop();
        }
        return;
    }

    let cut_at = await_cut(kernel.as_ref(), tap, pacing);
    await_member_again(
        kernel.as_ref(),
        tap,
        me,
        incarnation_before,
        cut_at,
        pacing.poll,
    );
    // Every write the writer issued has returned before the holder's last
    // read of LMR Y, which comes after the last barrier.
    finish_writer(tap, writer);
    check_old_mapping(kernel.as_ref(), tap, mapping);
    total_point(
        kernel.as_ref(),
        tap,
        &TotalWait {
            target: nodes,
            what: "this node joined again",
            from_ns: monotonic_ns(),
            since: "that",
            timeout: TOTAL_BACK_TIMEOUT,
        },
        pacing.poll,
    );
    final_barrier(
        kernel,
        tap,
        nodes,
        "as the node's first after joining again",
    );
}

#[cfg(test)]
mod tests;
