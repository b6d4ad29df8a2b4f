//! Many processes at once: [`CHILDREN`] child processes on every node each
//! allocate an LMR of 256 B to 8 KiB on every node in turn, write it,
//! read it back, check every byte and free it, [`ROUNDS`] times, all nodes
//! together. The whole run must end within [`BOUND`]: a kernel in which
//! small operations of many processes queue behind each other (or behind
//! a slow allocation) fails here long before a user notices.

use std::io::{BufReader, Write};
use std::time::{Duration, Instant};

use super::io::{barrier, handle_of, read_vec, unless, write_ok, InStep};
use super::processes::{collect, finish, report_point, spawn};
use crate::cluster_test::Node;
use crate::errno::expect_zero;
use crate::kernel::Kernel;
use crate::pattern;
use crate::tap::Tap;

/// Child processes per node, and the rounds of each: one LMR on every node
/// per round, of each of [`SIZES`] in turn.
pub const CHILDREN: u32 = 32;
pub const ROUNDS: u32 = 10;
const SIZES: [u64; 6] = [256, 512, 1024, 2048, 4096, 8192];

/// Longest the whole run may take on a node, from starting its children to
/// the last one's exit: with 3 nodes of the debug kernel under emulation it
/// takes about 45 s, with 4 sharing two host cores about twice that.
pub const BOUND: Duration = Duration::from_secs(300);

const KIND: &str = "stress";
/// The calls of a cycle, in order, as the children report their times
/// (after [`TIMES`]).
const CALLS: [&str; 4] = ["alloc_remote", "rdma_write", "rdma_read", "free"];
const TIMES: &str = "times ";

/// Total and longest time of each of [`CALLS`], in ms.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct CallTimes {
    total_ms: [u64; CALLS.len()],
    max_ms: [u64; CALLS.len()],
}

impl CallTimes {
    fn merge(&mut self, other: &CallTimes) {
        for i in 0..CALLS.len() {
            self.total_ms[i] += other.total_ms[i];
            self.max_ms[i] = self.max_ms[i].max(other.max_ms[i]);
        }
    }

    fn note(&mut self, i: usize, took: Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.total_ms[i] += ms;
        self.max_ms[i] = self.max_ms[i].max(ms);
    }

    fn time<T>(&mut self, i: usize, call: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let result = call();
        self.note(i, started.elapsed());
        result
    }

    /// As a child reports them: `total max` per call, in [`CALLS`] order.
    fn encode(&self) -> String {
        let fields: Vec<String> = (0..CALLS.len())
            .map(|i| format!("{} {}", self.total_ms[i], self.max_ms[i]))
            .collect();
        fields.join(" ")
    }

    fn decode(text: &str) -> Option<CallTimes> {
        let numbers: Result<Vec<u64>, _> = text.split_whitespace().map(str::parse).collect();
        let numbers = numbers.ok()?;
        if numbers.len() != 2 * CALLS.len() {
            return None;
        }
        let mut times = CallTimes::default();
        for (i, total_and_max) in numbers.chunks(2).enumerate() {
            (times.total_ms[i], times.max_ms[i]) = (total_and_max[0], total_and_max[1]);
        }
        Some(times)
    }

    /// For humans: each call's mean over `count` calls and its longest.
    fn describe(&self, count: u32) -> String {
        let parts: Vec<String> = CALLS
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let (mean, max) = (self.total_ms[i] / u64::from(count.max(1)), self.max_ms[i]);
                format!("{call} mean {mean} ms, max {max} ms")
            })
            .collect();
        parts.join("; ")
    }
}

/// `Err` once the nodes are out of step.
pub(super) fn run<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    at: Node,
    real: bool,
) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    barrier(kernel, tap, nodes, "the start of the many-process stress")?;
    let case = format!(
        "node {me}: {CHILDREN} processes each allocate, write, read back and free {ROUNDS} LMRs of 256 B to 8 KiB on every node, within {} s",
        BOUND.as_secs()
    );
    if !real {
        tap.skip(&case, super::processes::WHY_SKIPPED);
        return barrier(kernel, tap, nodes, "the many-process stress");
    }
    let started = Instant::now();
    let cpu_before = CpuTicks::read();
    let mut outcome = Ok(());
    let mut children = Vec::new();
    for index in 0..CHILDREN {
        match spawn(KIND, &[&me, &index, &nodes, &password]) {
            Ok(mut child) => {
                let out = child.stdout.take().map(BufReader::new);
                children.push((child, out));
            }
            Err(e) => outcome = Err(e),
        }
    }
    let mut times = CallTimes::default();
    for (child, out) in children {
        if let Some(mut out) = out {
            for (what, result) in collect(&mut out, false) {
                if let Some(child_times) = what.strip_prefix(TIMES).and_then(CallTimes::decode) {
                    times.merge(&child_times);
                } else if outcome.is_ok() {
                    outcome = result.map_err(|e| format!("child: {what}: {e}"));
                }
            }
        }
        outcome = outcome.and(finish(child));
    }
    let took = started.elapsed();
    if let (Some(before), Some(after)) = (cpu_before, CpuTicks::read()) {
        tap.comment(&format!(
            "node {me}: CPU during the stress: {}",
            after.since(&before)
        ));
    }
    let cycles = CHILDREN * ROUNDS * nodes;
    tap.comment(&format!(
        "node {me}: {cycles} allocate/write/read/free cycles by {CHILDREN} processes in {} ms ({:.1} cycles/s): {}",
        took.as_millis(),
        f64::from(cycles) / took.as_secs_f64().max(1e-3),
        times.describe(cycles)
    ));
    let bounded =
        outcome.and_then(|()| unless(took <= BOUND, || format!("took {} s", took.as_secs())));
    tap.check(&case, bounded);
    barrier(kernel, tap, nodes, "the many-process stress")
}

/// The CPU's time by state, from the first line of `/proc/stat`, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuTicks {
    user: u64,
    system: u64,
    idle: u64,
    softirq: u64,
    all: u64,
}

impl CpuTicks {
    fn read() -> Option<CpuTicks> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(text: &str) -> Option<CpuTicks> {
        let cpu = text.lines().next()?.strip_prefix("cpu ")?;
        let fields: Result<Vec<u64>, _> = cpu.split_whitespace().map(str::parse).collect();
        let fields = fields.ok()?;
        let field = |i: usize| fields.get(i).copied().unwrap_or(0);
        Some(CpuTicks {
            user: field(0) + field(1),
            system: field(2),
            idle: field(3) + field(4),
            softirq: field(5) + field(6),
            all: fields.iter().sum(),
        })
    }

    /// Each state's share of the time since `before`, for humans.
    fn since(&self, before: &CpuTicks) -> String {
        let all = self.all.saturating_sub(before.all).max(1) as f64;
        let share = |now: u64, then: u64| 100.0 * now.saturating_sub(then) as f64 / all;
        format!(
            "user {:.0}%, system {:.0}%, interrupts {:.0}%, idle {:.0}%",
            share(self.user, before.user),
            share(self.system, before.system),
            share(self.softirq, before.softirq),
            share(self.idle, before.idle)
        )
    }
}

pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    if args.first().map(String::as_str) != Some(KIND) {
        return None;
    }
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0) };
    let (me, index, nodes, password) = (number(1), number(2), number(3), number(4));
    let mut times = CallTimes::default();
    let mut outcome = Ok(());
    'rounds: for round in 0..u64::from(ROUNDS) {
        for target in 1..=nodes {
            // PANIC: the index is reduced modulo the table's length.
            let size = SIZES[((index + round + target) % SIZES.len() as u64) as usize];
            let seed = pattern::seed(&[me, index, round, target]);
            if let Err(e) = cycle(kernel, target, size, seed, password, &mut times) {
                outcome = Err(format!("round {round}, {size} B on node {target}: {e}"));
                break 'rounds;
            }
        }
    }
    crate::say(format_args!("ok {TIMES}{}", times.encode()));
    let status = i32::from(outcome.is_err());
    report_point(&format!("process {index} on node {me}"), outcome);
    Some(status)
}

/// Allocates, writes, reads back, checks and frees one LMR, timing each call.
fn cycle<K: Kernel>(
    kernel: &K,
    target: u64,
    size: u64,
    seed: u64,
    password: u64,
    times: &mut CallTimes,
) -> Result<(), String> {
    let target = u32::try_from(target).map_err(|_| format!("node {target}"))?;
    let len = usize::try_from(size).map_err(|_| format!("size {size}"))?;
    let mut data = vec![0u8; len];
    pattern::fill(seed, 0, &mut data);
    let handle = times.time(0, || kernel.alloc_remote(target, size, 0, password));
    let handle = handle_of(handle, "alloc_remote")?;
    let written = times.time(1, || write_ok(kernel, handle, 0, &data, password));
    let checked = times.time(2, || {
        written.and_then(|()| read_vec(kernel, handle, 0, len, password))
    });
    let checked = checked
        .and_then(|back| pattern::verify(seed, 0, &back).map_err(|m| format!("read back: {m:?}")));
    let freed = times.time(3, || kernel.free(handle));
    checked.and(expect_zero(freed).map_err(|e| format!("free: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_times_survive_a_child_report_and_add_up() {
        let mut times = CallTimes::default();
        times.note(0, Duration::from_millis(12));
        times.note(0, Duration::from_millis(30));
        times.note(3, Duration::from_millis(5));
        let decoded = CallTimes::decode(&times.encode());
        assert_eq!(decoded, Some(times));
        let mut all = CallTimes::default();
        all.merge(&times);
        all.merge(&times);
        assert_eq!(all.total_ms[0], 84);
        assert_eq!(all.max_ms[0], 30);
        assert!(all
            .describe(4)
            .starts_with("alloc_remote mean 21 ms, max 30 ms"));
        assert_eq!(CallTimes::decode("1 2 3"), None);
        assert_eq!(CallTimes::decode("a b c d e f g h"), None);
    }
}
