//! `lite-fuzz`: random sequences of every LITE system call, from several
//! processes with several threads each, on every node of a cluster at
//! once, each result checked against the call's contract.
//!
//! Each node's fuzzer ([`run`]) joins (or finds the node joined), waits
//! until the fuzzers of the other nodes are ready too ([`rendezvous`]),
//! then forks its fuzzing processes ([`worker`]) and one unprivileged
//! process ([`privileged`]) and watches them: a call that runs longer
//! than [`HUNG_AFTER_MS`] is reported as hung. Arguments come from the
//! process's live resources, released ones, other processes' and other
//! nodes' ([`pool`]), boundary values and bad pointers ([`memory`]);
//! races pit threads and child processes against each other ([`races`]).
//! Every result is judged against the errors the uapi header documents
//! for the call ([`errnos`], [`expect`]); what breaks the contract is an
//! alarm, printed at once with the call and its arguments.
//!
//! The run is seeded: every thread draws from a stream derived from the
//! seed, the node, the process and the thread ([`rng`]), so the same seed
//! replays the same sequence of steps on the same node (what the calls
//! return depends on timing, and with it the handles the steps pick).
//!
//! The output is TAP with a few test points (no alarms, every call made,
//! nothing hung, every process ended normally, the node still a member,
//! its counters back where they were) and the counts of every call's
//! results as comments ([`report`]).

use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lite::sys::{LiteStats, CM_DEFAULT_PORT};

use crate::cluster_test::io::unless;
use crate::errno::describe_error;
use crate::tap::Tap;
use crate::{join_cluster, Membership};

mod calls;
mod effects;
mod errnos;
mod expect;
mod generate;
mod memory;
mod pool;
mod privileged;
mod races;
mod rendezvous;
pub mod report;
pub mod rng;
mod shared;
mod signals;
mod worker;

use self::calls::Syscall;
use self::shared::{now_ms, Shared, MAX_PROCS, MAX_THREADS, UNPRIVILEGED};

/// Default fuzzing time, in seconds.
pub const DEFAULT_SECONDS: u64 = 60;
/// Per node.
pub const DEFAULT_PROCS: u32 = 3;
/// Per fuzzing process.
pub const DEFAULT_THREADS: u32 = 3;
/// Most fuzzing processes per node.
pub const MAX_FUZZ_PROCS: u32 = MAX_PROCS as u32;
/// Most threads per fuzzing process.
pub const MAX_FUZZ_THREADS: u32 = MAX_THREADS as u32;
/// A call still running this long is hung: longer than any bound the
/// kernel puts on its own waits (30 s for a peer's answer), though
/// signals keep interrupting it.
pub const HUNG_AFTER_MS: u64 = 45_000;
/// For the other nodes' fuzzers to start, and to finish.
const START_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const END_TIMEOUT: Duration = Duration::from_secs(2 * 60);
/// After this node saw that every other node is done.
const LINGER: Duration = Duration::from_secs(5);
/// For the processes' last calls and their release of everything held.
const FINISH_GRACE_MS: u64 = 90_000;
const COUNTERS_SETTLE: Duration = Duration::from_secs(15);
/// A first join may be refused this long, with these errors, for reasons
/// that pass.
const JOIN_TIMEOUT: Duration = Duration::from_secs(120);
const JOIN_REFUSED_FOR_NOW: [i32; 5] = [
    libc::EAGAIN,
    libc::EADDRINUSE,
    libc::EALREADY,
    libc::ETIMEDOUT,
    libc::ECONNREFUSED,
];

/// What to fuzz and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuzzConfig {
    /// The cluster manager's address.
    pub cm: Ipv4Addr,
    /// Ids `1..=nodes`; all run the fuzzer.
    pub nodes: u32,
    /// How long to fuzz.
    pub seconds: u64,
    /// The seed of every random choice.
    pub seed: u64,
    /// Fuzzing processes.
    pub procs: u32,
    /// Per fuzzing process.
    pub threads: u32,
}

/// A seed from the clock and the process id.
pub fn seed_from_clock() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rng::mix(nanos ^ u64::from(std::process::id()) << 32)
}

/// Decimal, or hexadecimal with `0x`.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("expected a decimal or 0x-hexadecimal 64-bit seed ({e})"))
}

/// The command line that replays `config` on a node.
pub fn replay_command(config: &FuzzConfig) -> String {
    format!(
        "lite-fuzz --cm {} --nodes {} --seconds {} --seed {:#x} --procs {} --threads {}",
        config.cm, config.nodes, config.seconds, config.seed, config.procs, config.threads
    )
}

/// Runs the fuzzer on this node.
pub fn run<W: Write>(tap: &mut Tap<W>, config: &FuzzConfig) {
    let (seed_prefix, replay_prefix) = (report::SEED_PREFIX, report::REPLAY_PREFIX);
    let replay = replay_command(config);
    tap.comment(&format!("{seed_prefix}{:#x}", config.seed));
    tap.comment(&format!(
        "{replay_prefix}{replay} (on every node; the same seed replays the same steps on each)"
    ));
    let me = match join(config.cm) {
        Ok(membership) => {
            let how = match membership {
                Membership::Joined(_) => "joined",
                Membership::AlreadyMember(_) => "had joined before",
            };
            let me = membership.id();
            tap.ok(&format!(
                "fuzz: node {me} is a member of the cluster ({how})"
            ));
            me
        }
        Err(reason) => {
            tap.not_ok("fuzz: this node is a member of the cluster", &reason);
            tap.bail_out("cannot fuzz a cluster this node is not part of");
            return;
        }
    };

    let ready = rendezvous::announce(me, pool::READY);
    let unpublished = ready.as_ref().err().map(describe_error);
    if let Some(error) = &unpublished {
        tap.comment(&format!("publishing this node's start: {error}"));
    }
    let late = rendezvous::await_others(me, config.nodes, pool::READY, START_TIMEOUT, false);
    let waited = START_TIMEOUT.as_secs();
    tap.check(
        &format!("fuzz: all {} nodes started lite-fuzz", config.nodes),
        match (unpublished, late.is_empty()) {
            (Some(error), _) => Err(format!("this node's start could not be published: {error}")),
            (_, false) => Err(format!(
                "nodes {late:?} did not start within {waited} s; fuzzing anyway"
            )),
            _ => Ok(()),
        },
    );

    let shared = match Shared::map() {
        Ok(shared) => shared,
        Err(error) => {
            tap.bail_out(&format!("cannot map the shared counters: {error}"));
            return;
        }
    };
    let baseline = lite::stats().ok();
    let outcome = fuzz(tap, config, me, shared);
    report_counts(tap, shared, outcome.hung);

    tap.check(
        &format!(
            "fuzz: {} fuzzing processes and the unprivileged one ended by themselves with status 0",
            config.procs
        ),
        unless(outcome.exits.is_empty(), || outcome.exits.join("\n")),
    );
    let hung = outcome.hung;
    tap.check(
        &format!(
            "fuzz: no call hung (each returned within {} s)",
            HUNG_AFTER_MS / 1000
        ),
        unless(hung == 0, || {
            format!("{hung} calls hung (see the alarms above)")
        }),
    );
    let never: Vec<&str> = Syscall::ALL
        .into_iter()
        .filter(|&call| shared.calls_of(call) == 0)
        .map(Syscall::name)
        .collect();
    let never = never.join(", ");
    tap.check(
        "fuzz: every LITE system call was called",
        unless(never.is_empty(), || format!("never called: {never}")),
    );
    let alarms = shared.alarms();
    tap.check(
        "fuzz: no alarms",
        unless(alarms == 0, || {
            format!("{alarms} alarms (details above); replay with: {replay}")
        }),
    );
    tap.check(
        &format!("fuzz: node {me} is still a member with the same id"),
        match lite::node_id() {
            Ok(id) if id == me => Ok(()),
            Ok(id) => Err(format!("lite_get_node_id returns {id}")),
            Err(error) => Err(format!(
                "lite_get_node_id fails: {}",
                describe_error(&error)
            )),
        },
    );
    match baseline {
        Some(baseline) => {
            tap.check(
                "fuzz: this node's counters of LMRs, names, mappings, handles, processes, asynchronous operations and ports are back where they started",
                counters_settle(&baseline),
            );
        }
        None => tap.skip(
            "fuzz: this node's counters are back where they started",
            "lite_get_stats failed before fuzzing",
        ),
    }

    let done = rendezvous::announce(me, pool::DONE);
    let missing = rendezvous::await_others(me, config.nodes, pool::DONE, END_TIMEOUT, true);
    if !missing.is_empty() {
        let waited = END_TIMEOUT.as_secs();
        tap.comment(&format!(
            "nodes {missing:?} did not finish within {waited} s of this one"
        ));
    }
    std::thread::sleep(LINGER);
    drop(done);
    drop(ready);
}

/// Or finds the node joined; retries while the manager asks to.
fn join(cm: Ipv4Addr) -> Result<Membership, String> {
    let start = std::time::Instant::now();
    loop {
        match join_cluster(cm) {
            Ok(membership) => return Ok(membership),
            Err(error)
                if start.elapsed() < JOIN_TIMEOUT
                    && JOIN_REFUSED_FOR_NOW.contains(&error.raw_os_error().unwrap_or(0)) =>
            {
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(error) => {
                return Err(format!(
                    "lite_join({cm}, {CM_DEFAULT_PORT}) failed: {}",
                    describe_error(&error)
                ))
            }
        }
    }
}

struct Outcome {
    /// What was wrong with the processes' ends.
    exits: Vec<String>,
    hung: u64,
}

struct ChildProcess {
    pid: libc::pid_t,
    name: String,
    /// Index of its shared record.
    record: usize,
    status: Option<i32>,
}

/// The child leaves with `body`'s return value.
fn spawn(name: String, record: usize, body: impl FnOnce() -> i32) -> Result<ChildProcess, String> {
    // Nothing buffered may be printed twice.
    let _ = std::io::stdout().flush();
    // SAFETY: this process has a single thread (the coordinator starts
    // none), so the child may run any code; it leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = body();
        // SAFETY: ends the child without the parent's cleanup (its handles
        // and LMRs are the parent's to release).
        unsafe { libc::_exit(code) };
    }
    if pid < 0 {
        return Err(format!(
            "fork for {name}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(ChildProcess {
        pid,
        name,
        record,
        status: None,
    })
}

fn fuzz<W: Write>(
    tap: &mut Tap<W>,
    config: &FuzzConfig,
    me: u32,
    shared: &'static Shared,
) -> Outcome {
    let deadline_ms = now_ms() + config.seconds * 1000;
    let mut children = Vec::new();
    let mut exits = Vec::new();
    for proc in 0..config.procs.min(MAX_FUZZ_PROCS) {
        let plan = worker::ProcessPlan {
            seed: config.seed,
            me,
            nodes: config.nodes,
            procs: config.procs,
            threads: config.threads,
            proc,
            deadline_ms,
            shared,
        };
        let name = format!("fuzzing process {proc}");
        match spawn(name, proc as usize, move || worker::process_main(plan)) {
            Ok(child) => children.push(child),
            Err(reason) => exits.push(reason),
        }
    }
    let (mut settings, missing) = privileged::open_settings();
    if !missing.is_empty() {
        tap.comment(&format!(
            "settings the unprivileged process cannot try: {}",
            missing.join("; ")
        ));
    }
    let unprivileged = spawn("the unprivileged process".to_string(), UNPRIVILEGED, || {
        privileged::unprivileged_main(privileged::UnprivilegedPlan {
            seed: config.seed,
            me,
            cm: config.cm,
            deadline_ms,
            shared,
            settings: &mut settings,
        })
    });
    drop(settings);
    match unprivileged {
        Ok(child) => children.push(child),
        Err(reason) => exits.push(reason),
    }
    tap.comment(&format!(
        "fuzzing for {} s with {} processes of {} threads, and an unprivileged process",
        config.seconds, config.procs, config.threads
    ));

    let mut hung = 0;
    let mut killed_at = None;
    loop {
        let now = now_ms();
        // A process that ended leaves no call running.
        let running: Vec<usize> = children
            .iter()
            .filter(|c| c.status.is_none())
            .map(|c| c.record)
            .collect();
        hung += report_hung(shared, me, now, &running);
        if now >= deadline_ms {
            shared.stop.store(true, Ordering::Relaxed);
        }
        for child in children.iter_mut().filter(|c| c.status.is_none()) {
            let mut status = 0;
            // SAFETY: polls a child of this process without blocking.
            if unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) } == child.pid {
                child.status = Some(status);
            }
        }
        let running: Vec<&ChildProcess> = children.iter().filter(|c| c.status.is_none()).collect();
        if running.is_empty() {
            break;
        }
        match killed_at {
            None if now >= deadline_ms + FINISH_GRACE_MS => {
                let grace = FINISH_GRACE_MS / 1000;
                for child in &running {
                    let name = &child.name;
                    exits.push(format!(
                        "{name} did not finish within {grace} s of the end: killed"
                    ));
                    // SAFETY: kills a child of this process.
                    unsafe { libc::kill(child.pid, libc::SIGKILL) };
                }
                killed_at = Some(now);
            }
            Some(at) if now >= at + 10_000 => {
                for child in &running {
                    exits.push(format!("{} could not be reaped after SIGKILL", child.name));
                }
                break;
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    for child in &children {
        if let Some(end) = abnormal_end(child.status.unwrap_or(0)) {
            exits.push(format!("{} {end}", child.name));
        }
    }
    Outcome { exits, hung }
}

/// E.g. `exited with status 1`, or `was killed by signal 11`.
fn abnormal_end(status: i32) -> Option<String> {
    if libc::WIFSIGNALED(status) {
        Some(format!("was killed by signal {}", libc::WTERMSIG(status)))
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0 {
        Some(format!("exited with status {}", libc::WEXITSTATUS(status)))
    } else {
        None
    }
}

/// Each hung call once; how many were new.
fn report_hung(shared: &Shared, me: u32, now: u64, running: &[usize]) -> u64 {
    let mut found = 0;
    for (proc, record) in shared.procs.iter().enumerate() {
        if !running.contains(&proc) {
            continue;
        }
        for (index, slot) in record.slots.iter().enumerate() {
            let Some((call, step, args, started)) = slot.current() else {
                continue;
            };
            if now.saturating_sub(started) < HUNG_AFTER_MS
                || slot.hung_reported.swap(started, Ordering::Relaxed) == started
            {
                continue;
            }
            found += 1;
            let who = report::origin(me, proc, index, step);
            let (seconds, every) = ((now - started) / 1000, signals::RESIGNAL_MS);
            let why =
                format!("hung: still running after {seconds} s, though signalled every {every} ms");
            report::alarm(shared, proc, &who, &calls::describe_call(call, &args), &why);
        }
    }
    found
}

fn report_counts<W: Write>(tap: &mut Tap<W>, shared: &Shared, hung: u64) {
    let mut total = 0;
    for call in Syscall::ALL {
        total += shared.calls_of(call);
        tap.comment(&report::calls_line(shared, call));
    }
    tap.comment(&report::total_line(total, shared.alarms(), hung));
}

/// Those only this node's processes change.
fn local_counters(stats: &LiteStats) -> [(&'static str, u64); 8] {
    [
        ("lmrs", stats.lmrs),
        ("registrations", stats.registrations),
        ("mappings", stats.mappings),
        ("published_names", stats.published_names),
        ("handles", stats.handles),
        ("processes", stats.processes),
        ("async_in_flight", stats.async_in_flight),
        ("rpc_ports", stats.rpc_ports),
    ]
}

/// Names the local counters that still differ after [`COUNTERS_SETTLE`].
fn counters_settle(baseline: &LiteStats) -> Result<(), String> {
    let start = std::time::Instant::now();
    loop {
        let differ = match lite::stats() {
            Ok(now) => (local_counters(baseline).into_iter())
                .zip(local_counters(&now))
                .filter(|((_, before), (_, after))| before != after)
                .map(|((name, before), (_, after))| {
                    format!("{name} {before} before, {after} after; ")
                })
                .collect(),
            Err(error) => format!("lite_get_stats fails: {}", describe_error(&error)),
        };
        if differ.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= COUNTERS_SETTLE {
            let (waited, differ) = (COUNTERS_SETTLE.as_secs(), differ.trim_end_matches("; "));
            return Err(format!("{waited} s after the processes ended: {differ}"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_both_bases_and_round_trip_the_replay_command() {
        let config = FuzzConfig {
            cm: Ipv4Addr::new(10, 77, 0, 254),
            nodes: 3,
            seconds: 60,
            seed: 0xdead_beef,
            procs: 3,
            threads: 2,
        };
        let command = replay_command(&config);
        let expected = "lite-fuzz --cm 10.77.0.254 --nodes 3 --seconds 60 --seed 0xdeadbeef \
                        --procs 3 --threads 2";
        assert_eq!(command, expected);
        let seed = command
            .split_once("--seed ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(parse_seed);
        assert_eq!(seed, Some(Ok(0xdead_beef)));
        assert_eq!(parse_seed("42"), Ok(42));
        assert_eq!(parse_seed(" 0X2A "), Ok(42));
        assert_eq!(parse_seed("0xffffffffffffffff"), Ok(u64::MAX));
        for bad in ["0x", "-1", "seed"] {
            assert!(parse_seed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_counters_compared_are_those_local_processes_change() {
        let stats = LiteStats {
            handles: 3,
            held_chunks: 9,
            ..LiteStats::default()
        };
        let names: Vec<&str> = local_counters(&stats).iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&"handles"));
        assert!(!names.contains(&"held_chunks"), "other nodes change it");
        let locks = names.contains(&"locks");
        assert!(!locks, "locks live as long as their home");
    }
}
