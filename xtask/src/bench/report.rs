//! Reporting: medians and spreads of raw samples, the comparison tables,
//! the memory region counts and the verdicts on the targets, printed under
//! `==>` headings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::parse::{FailureNode, Latency, Lock, Measurements, Native, Regions, Spread};
use super::{isolation, rounds};
use super::{
    ASYNC_SIZES, ATOMICS, BW_BYTES, BW_SIZES, DEPTHS, FAILURE_NODES, LOCK_CONTENDERS, LOCK_ROUNDS,
    RPC_ASYNC_SIZE,
};
use crate::{failure, ui};

/// The perftest latency test LITE's RPC is compared with (`ib_send_lat`).
const RPC_NATIVE_OP: &str = "send";

/// `lite-bench`'s RPC round trip series.
const RPC_OP: &str = "rpc";

/// `lite-bench`'s kernel message round trip series (through handlers,
/// between two kernels).
const KMSG_OP: &str = "kmsg";

/// LITE-DSM's page throughput series, and the LITE reads it is compared
/// with: 4 KiB reads with as many in flight as faulting threads.
const DSM_THROUGHPUT: &str = "dsm_read_pages";
const DSM_THROUGHPUT_BASELINE: &str = "read_async";

/// The calls waiting on the killed node whose stalls `lite-failure-test`
/// reports, in its order.
const STALL_CALLS: [&str; 5] = [
    "rdma_write",
    "send_reply_imm",
    "lock",
    "dist_barrier",
    "kernel_message",
];

/// The call of the one survivor that waits for a lock the dead node held
/// (kept by another survivor), which it gets with `EOWNERDEAD`.
const OWNER_DEAD_CALL: &str = "lock_owner_dead";

/// After how long without a heartbeat the cluster manager suspects a node:
/// `lite-cm`'s default `--dead-after-ms`, which the harness keeps.
const DEAD_AFTER_MS: i64 = 3000;

/// How much longer a suspect may stay silent before it is declared dead:
/// `lite-cm`'s default `--suspicion-ms`, which the harness keeps.
const SUSPICION_MS: i64 = 800;

/// The failure test's bound on a stall (`lite-failure-test`'s
/// `MAX_STALL_MS`): a call returning later fails it.
const STALL_BOUND_MS: i64 = 4500;

/// Leave/rejoin cycles of the failure program (its `CYCLES`).
const LEAVE_CYCLES: u32 = 10;

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

/// Prints the lines of a table (or a verdict) under the current heading.
pub(super) fn say_indented(lines: impl IntoIterator<Item = String>) {
    for line in lines {
        ui::say(&format!("    {line}"));
    }
}

/// Prints the results of the comparison phase: latency, atomics,
/// throughput, RPC and isolation, each with its verdict where it has one.
pub fn say_comparison(iters: u32, m: &Measurements) {
    ui::say(&format!(
        "==> against perftest, for reference ({iters} iterations, times in microseconds; \
         perftest reports half a ping-pong of busy-polling processes, not LITE's operation, \
         so the verdicts are those of the interleaved comparison above)"
    ));
    say_indented(table(m));
    ui::say("==> atomics on an 8-byte LMR on the other node (times in microseconds)");
    say_indented(atomic_table(m));
    ui::say(&format!(
        "==> throughput (MiB/s; up to {iters} operations or {} MiB per series)",
        BW_BYTES >> 20
    ));
    say_indented(bw_table(m));
    ui::say("==> RPC (times in microseconds)");
    say_indented(rpc_table(m));
    say_indented(rpc_throughput_table(m));
    ui::say(&format!(
        "==> asynchronous RPC from one thread ({RPC_ASYNC_SIZE} B calls, times in microseconds)"
    ));
    say_indented(rpc_async_table(m));
    ui::say("==> LITE-DSM page throughput");
    say_indented(dsm_throughput(m));
    ui::say("==> isolation: a high-priority process's write latency (times in microseconds)");
    say_indented(isolation::table(&m.qos));
    say_indented([isolation::verdict(&m.qos)]);
    ui::say("==> memory regions as LMRs grow (the measuring node's resources file)");
    say_indented(regions_table(m));
    say_indented([regions_verdict(m)]);
}

/// Prints the interleaved comparison with the native verbs baseline: the
/// per-round ratios' median and range, and one verdict line per target.
pub fn say_rounds(rounds: u32, round_iters: u32, m: &Measurements) {
    ui::say(&format!(
        "==> LITE against the native verbs baseline (lite-verbs-bench: the same operation, \
         waiting for completions as LITE does), {} of {rounds} interleaved rounds, {round_iters} \
         operations per series; ratios per round",
        m.rounds.len()
    ));
    let figures = rounds::figures(&m.rounds);
    say_indented(rounds::table(&figures));
    say_indented(rounds::verdicts(&figures));
    let cpu = rounds::cpu_figures(&m.cpu_rounds);
    say_indented(rounds::cpu_table(&cpu));
    say_indented(rounds::cpu_line(&cpu));
}

/// The verdicts of the parts that were measured, for the summary: the
/// interleaved comparison's, then those of the CPU time, isolation, memory
/// regions, failure stalls, lock contention and the curves.
pub fn verdict_lines(m: &Measurements) -> Vec<String> {
    let mut lines = rounds::verdicts(&rounds::figures(&m.rounds));
    lines.extend(rounds::cpu_line(&rounds::cpu_figures(&m.cpu_rounds)));
    lines.extend((!m.qos.is_empty()).then(|| isolation::verdict(&m.qos)));
    lines.extend((!m.regions.is_empty()).then(|| regions_verdict(m)));
    lines.extend((!m.failure.is_empty()).then(|| stall_verdict(&m.failure)));
    lines.extend(contention_verdict(&m.lock_rounds));
    lines.extend(super::region_curve::verdict(m));
    lines.extend(super::process_curve::verdict(m));
    lines.extend(super::cluster_scale::summary(m));
    lines
}

/// Prints the lock table: `iters` uncontended pairs and `lock_iters` per
/// contending node of the contention phases.
pub fn say_locks(iters: u32, lock_iters: u32, m: &Measurements) {
    ui::say(&format!(
        "==> locks (lock/unlock pairs: {iters} uncontended, {lock_iters} per node with 2 and \
         {LOCK_CONTENDERS} nodes contending for a lock kept by one more node, in \
         {LOCK_ROUNDS} rounds: the rows of the first round, `all` acquire times of every \
         round; times in microseconds)"
    ));
    say_indented(lock_table(m));
    say_indented(lock_round_lines(&m.lock_rounds));
    say_indented(contention_verdict(&m.lock_rounds));
}

/// Prints the failure phase's table: stalls and detection, leave and
/// rejoin times, with the bounds.
pub fn say_failure(m: &Measurements) {
    ui::say(&format!(
        "==> failure handling ({FAILURE_NODES} VMs, node{FAILURE_NODES} killed {} s after it \
         was ready; then one survivor leaves and joins again {LEAVE_CYCLES} times; \
         times in milliseconds)",
        failure::KILL_DELAY.as_secs()
    ));
    say_indented(failure_table(&m.failure));
}

/// Prints a curve's heading, then its table and verdict, or that the
/// guest logs have no `missing` lines when `measured` is false.
pub(super) fn say_curve(
    heading: String,
    measured: bool,
    missing: &str,
    table: impl FnOnce() -> Vec<String>,
    verdict: impl FnOnce() -> Option<String>,
) {
    ui::say(&format!("==> {heading}"));
    if !measured {
        return say_indented([format!("(no {missing} in the guest logs)")]);
    }
    say_indented(table());
    say_indented(verdict());
}

/// Prints where the logs are and every problem found in them.
pub fn say_logs(logs: &Path, problems: &[String]) {
    say_indented([format!("logs: {}", logs.display())]);
    say_indented(problems.iter().map(|problem| format!("problem: {problem}")));
}

/// The comparison table, one string per line.
pub fn table(m: &Measurements) -> Vec<String> {
    let (native, lite) = (&m.native, m.lite.values());
    // RPC, kernel messages and atomics have tables of their own.
    let keys: BTreeSet<(String, u64)> = native
        .iter()
        .map(|n| (n.op.clone(), n.size))
        .chain(lite.map(|l| (l.op.clone(), l.size)))
        .filter(|(op, _)| op != RPC_NATIVE_OP && op != RPC_OP && op != KMSG_OP && !is_atomic(op))
        .collect();
    let table = Table::new(
        "<6 op|>7 size|>13 native med|>12 native sd|>11 LITE med|>19 LITE p10-p90|>11 LITE/native",
    );
    table.lines(keys.into_iter().map(|(op, size)| {
        let n = native.iter().find(|n| n.op == op && n.size == size);
        let cells = side_by_side(n, m.lite.get(&(op.clone(), size)));
        [op, size.to_string()].into_iter().chain(cells)
    }))
}

/// The perftest run a LITE throughput series is compared with: memset and
/// memcpy (one operation at a time) with `ib_write_bw -t 1`, asynchronous
/// writes and reads with `ib_write_bw` / `ib_read_bw` at `-t` = depth.
fn native_counterpart(op: &str, depth: Option<u32>) -> Option<(&'static str, u32)> {
    match (op, depth) {
        ("memset" | "memcpy", None) => Some(("write", 1)),
        ("dsm_read_pages", Some(depth)) => Some(("read", depth)),
        ("write_async", Some(depth)) => Some(("write", depth)),
        ("read_async", Some(depth)) => Some(("read", depth)),
        _ => None,
    }
}

/// The throughput comparison table, one string per line: a row for every
/// planned series ([`BW_SIZES`], [`ASYNC_SIZES`] × [`DEPTHS`]) and for any
/// other series LITE reported, `-` where a measurement is missing.
pub fn bw_table(m: &Measurements) -> Vec<String> {
    let (native, lite) = (&m.native_bw, &m.lite_bw);
    let mut keys: Vec<(String, u64, Option<u32>)> = Vec::new();
    for op in ["memset", "memcpy"] {
        keys.extend(BW_SIZES.iter().map(|&size| (op.to_string(), size, None)));
    }
    for op in ["write_async", "read_async"] {
        for size in ASYNC_SIZES {
            keys.extend(DEPTHS.iter().map(|&d| (op.to_string(), size, Some(d))));
        }
    }
    for key in lite.keys() {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    let notes = [
        "native: perftest BW average with -t (TX depth) = LITE's operations in flight,",
        "1 for memset/memcpy (one at a time); LITE/native = LITE avg / native avg",
    ];
    let table = Table::noted(
        &notes,
        "<11 op|>7 size|>5 depth||<17 native|>10 native avg|>9 LITE avg|>9 LITE med|\
         >19 LITE p10-p90|>11 LITE/native",
    );
    table.lines(keys.into_iter().map(|(op, size, depth)| {
        let l = lite.get(&(op.clone(), size, depth));
        let counterpart = native_counterpart(&op, depth);
        let n = counterpart.and_then(|(test, d)| {
            native
                .iter()
                .find(|n| n.op == test && n.size == size && n.depth == d)
        });
        [
            op,
            size.to_string(),
            depth.map_or("1".to_string(), |d| d.to_string()),
            counterpart.map_or("-".to_string(), |(test, d)| format!("ib_{test}_bw -t {d}")),
            cell(n.map(|n| n.average)),
            cell(l.map(|l| l.average)),
            cell(l.map(|l| l.median)),
            range_cell(l.map(|l| (l.p10, l.p90))),
            ratio_cell(l.map(|l| l.average), n.map(|n| n.average)),
        ]
    }))
}

/// The RPC round trip table, one string per line: for every size either
/// side measured, `ib_send_lat`'s t_typical (half a round trip), twice
/// that, and for LITE's RPC between processes and its kernel messages
/// between kernels, the median, the spread and the median / (2 x native).
pub fn rpc_table(m: &Measurements) -> Vec<String> {
    let native = &m.native;
    let sizes: BTreeSet<u64> = native
        .iter()
        .filter(|n| n.op == RPC_NATIVE_OP)
        .map(|n| n.size)
        .chain(
            m.lite
                .keys()
                .filter(|l| l.0 == RPC_OP || l.0 == KMSG_OP)
                .map(|l| l.1),
        )
        .collect();
    let notes = [
        "native: ib_send_lat t_typical is half a round trip; an RPC is a whole one",
        "kmsg: liteapi_send_reply() from kernel to kernel through a handler, timed in the kernel",
    ];
    let table = Table::noted(
        &notes,
        ">7 size|>16 ib_send_lat typ|>12 2 x native|>12 LITE RPC med|>19 LITE p10-p90|\
         >15 LITE/(2x nat)|>12 kmsg med|>19 kmsg p10-p90|>15 kmsg/(2x nat)",
    );
    table.lines(sizes.into_iter().map(|size| {
        let n = native
            .iter()
            .find(|n| n.op == RPC_NATIVE_OP && n.size == size);
        let round_trip = n.map(|n| 2.0 * n.typical);
        let lite = [RPC_OP, KMSG_OP].into_iter().flat_map(move |op| {
            let l = m.lite.get(&(op.to_string(), size));
            [
                cell(l.map(|l| l.median)),
                range_cell(l.map(|l| (l.p10, l.p90))),
                ratio_cell(l.map(|l| l.median), round_trip),
            ]
        });
        let native = [
            size.to_string(),
            cell(n.map(|n| n.typical)),
            cell(round_trip),
        ];
        native.into_iter().chain(lite)
    }))
}

/// LITE-DSM's page throughput, a line per series, with its ratio to LITE's
/// asynchronous reads of 4 KiB in the same run (its faults have a phase of
/// their own, [`super::dsm`]).
pub fn dsm_throughput(m: &Measurements) -> Vec<String> {
    let throughput = m
        .lite_bw
        .values()
        .filter(|t| t.op == DSM_THROUGHPUT && t.size == 4096);
    let mut lines = Vec::new();
    for t in throughput {
        let threads = t.depth.unwrap_or(1);
        let key = (DSM_THROUGHPUT_BASELINE.to_string(), 4096, Some(threads));
        let reads = m.lite_bw.get(&key).map(|r| r.average);
        lines.push(format!(
            "page throughput, {threads} threads faulting at once: {} MiB/s (groups p10-p90 {}); \
             / LITE reads of 4096 B, {threads} in flight: {}",
            cell(Some(t.average)),
            range_cell(Some((t.p10, t.p90))),
            ratio_cell(Some(t.average), reads),
        ));
    }
    lines
}

/// The RPC throughput table, one string per line, by size and threads.
pub fn rpc_throughput_table(m: &Measurements) -> Vec<String> {
    let table = Table::new(">7 size|>8 threads|>8 calls|>12 calls/s|>12 RPC med|>19 RPC p10-p90");
    table.lines(m.lite_rpc_bw.values().map(|r| {
        [
            r.size.to_string(),
            r.threads.to_string(),
            r.calls.to_string(),
            format!("{:.2}", r.calls_per_s),
            format!("{:.2}", r.latency.median),
            spread_cell(Some(&r.latency)),
        ]
    }))
}

/// The asynchronous RPC table, one string per line: for every depth in
/// [`DEPTHS`] (and any other reported), one thread's calls per second with
/// that many `lite_send_reply_imm_async` calls in flight, beside
/// `ib_send_bw`'s one-way messages per second at the same `-t`. A call is
/// two messages (request and reply) and a server's work, so the ratio is
/// a lower bound of what LITE adds.
pub fn rpc_async_table(m: &Measurements) -> Vec<String> {
    let notes = [
        "native: ib_send_bw messages/s at -t = calls in flight (one way, no server work);",
        "LITE/native = LITE calls/s / native messages/s",
    ];
    let table = Table::noted(
        &notes,
        ">7 depth|>7 calls|>12 calls/s|>16 native msgs/s|>11 LITE/native|>12 call med|\
         >19 call p10-p90",
    );
    let mut depths = BTreeSet::from(DEPTHS);
    let measured = m.lite_rpc_async.keys().filter(|k| k.0 == RPC_ASYNC_SIZE);
    depths.extend(measured.map(|&(_, depth)| depth));
    table.lines(depths.into_iter().map(|depth| {
        let lite = m.lite_rpc_async.get(&(RPC_ASYNC_SIZE, depth));
        let native_rate = m
            .native_bw
            .iter()
            .find(|n| n.op == RPC_NATIVE_OP && n.size == RPC_ASYNC_SIZE && n.depth == depth)
            .map(|n| n.msg_rate * 1e6)
            .filter(|rate| *rate > 0.0);
        let ratio = lite.zip(native_rate).map(|(l, rate)| l.calls_per_s / rate);
        [
            depth.to_string(),
            lite.map_or("-".to_string(), |l| l.calls.to_string()),
            cell(lite.map(|l| l.calls_per_s)),
            cell(native_rate),
            ratio.map_or("-".to_string(), |r| format!("{r:.4}")),
            cell(lite.map(|l| l.latency.median)),
            spread_cell(lite.map(|l| &l.latency)),
        ]
    }))
}

/// The cells of a perftest row beside a LITE series: perftest's t_typical
/// and stdev, LITE's median and p10-p90, and LITE/native.
fn side_by_side(n: Option<&Native>, l: Option<&Latency>) -> [String; 5] {
    let (typical, median) = (n.map(|n| n.typical), l.map(|l| l.median));
    [
        cell(typical),
        cell(n.map(|n| n.stdev)),
        cell(median),
        range_cell(l.map(|l| (l.p10, l.p90))),
        ratio_cell(median, typical),
    ]
}

/// Whether `op` is one of LITE's atomic series.
fn is_atomic(op: &str) -> bool {
    ATOMICS.iter().any(|&(_, atomic)| atomic == op)
}

/// Two decimals, or `-`.
pub(super) fn cell(value: Option<f64>) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.2}"))
}

/// `p10-p90`, or `-`.
pub(super) fn spread_cell(spread: Option<&Spread>) -> String {
    range_cell(spread.map(|s| (s.p10, s.p90)))
}

/// `low-high` with two decimals each, or `-`.
fn range_cell(range: Option<(f64, f64)>) -> String {
    range.map_or("-".to_string(), |(low, high)| format!("{low:.2}-{high:.2}"))
}

/// A report table's notes, printed above it, and its columns: for each,
/// the spaces before it (none before the first), its width, whether it is
/// padded on the right rather than the left, and its heading.
pub(super) struct Table {
    notes: Vec<String>,
    columns: Vec<(usize, usize, bool, String)>,
}

impl Table {
    /// The table `spec` lays out: each column as `<` (padded on the right)
    /// or `>` (on the left), its width, a space and its heading; the
    /// columns are as many `|` apart as spaces are between them.
    pub(super) fn new(spec: &str) -> Self {
        Table::noted(&[], spec)
    }

    /// The table `spec` lays out (see [`Table::new`]) under `notes`.
    pub(super) fn noted(notes: &[&str], spec: &str) -> Self {
        let mut columns = Vec::new();
        let mut gap = 0;
        for part in spec.split('|') {
            gap += 1;
            if let Some((layout, heading)) = part.split_once(' ') {
                let (align, width) = layout.split_at(1);
                let width = width
                    .parse()
                    .unwrap_or_else(|_| panic!("{spec}: width {width}"));
                columns.push((gap, width, align == "<", heading.to_string()));
                gap = 0;
            }
        }
        let notes = notes.iter().map(|note| note.to_string()).collect();
        Table { notes, columns }
    }

    pub(super) fn header(&self) -> String {
        self.line(self.headings())
    }

    pub(super) fn headings(&self) -> impl Iterator<Item = &str> {
        self.columns
            .iter()
            .map(|(_, _, _, heading)| heading.as_str())
    }

    /// The notes, the line of headings, then a line of each row's cells.
    pub(super) fn lines<R, C>(&self, rows: impl IntoIterator<Item = R>) -> Vec<String>
    where
        R: IntoIterator<Item = C>,
        C: AsRef<str>,
    {
        let mut lines = self.notes.clone();
        lines.push(self.header());
        lines.extend(rows.into_iter().map(|row| self.line(row)));
        lines
    }

    /// [`Table::line`] of cells some of which are `String`s.
    pub(super) fn row<const N: usize>(&self, cells: [&str; N]) -> String {
        self.line(cells)
    }

    /// One line of the table: `cells`, one per column, laid out in them.
    pub(super) fn line(&self, cells: impl IntoIterator<Item = impl AsRef<str>>) -> String {
        let cells: Vec<_> = cells.into_iter().collect();
        assert_eq!(cells.len(), self.columns.len(), "cells of a row");
        let mut line = String::new();
        for (i, ((gap, width, left, _), cell)) in self.columns.iter().zip(cells).enumerate() {
            let cell = cell.as_ref();
            if i > 0 {
                line.push_str(&" ".repeat(*gap));
            }
            line.push_str(&if *left {
                format!("{cell:<width$}")
            } else {
                format!("{cell:>width$}")
            });
        }
        line
    }
}

/// `a / b` with two decimals, or `-` without both or with `b` not positive.
pub(super) fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    }
}

/// The atomics table, one string per line: for each of [`ATOMICS`],
/// `ib_atomic_lat`'s t_typical and stdev next to LITE's median and spread,
/// and the LITE/native ratio.
pub fn atomic_table(m: &Measurements) -> Vec<String> {
    let table = Table::new(
        "<12 op|>5 size||<30 native|>11 native med|>10 native sd|>10 LITE med|>19 LITE p10-p90|\
         >11 LITE/native",
    );
    table.lines(ATOMICS.map(|(flag, op)| {
        let n = m.native.iter().find(|n| n.op == op);
        let l = m.lite.values().find(|l| l.op == op);
        let size = n.map(|n| n.size).or(l.map(|l| l.size));
        let size = size.map_or("-".to_string(), |s| s.to_string());
        let test = format!("ib_atomic_lat -A {flag}");
        [op.to_string(), size, test]
            .into_iter()
            .chain(side_by_side(n, l))
    }))
}

/// The lock table, one string per line: a row per lock record
/// (uncontended first), and for every contended series an `all` row with
/// the pairs of every round (the lock rounds, the throughput of each by
/// number of contending nodes; one round without), the median and spread
/// of every node's acquire times together (from the `lock_samples`
/// records) and the pairs per second of all nodes together: every pair
/// over the longest time a node took, the median of the rounds.
pub fn lock_table(m: &Measurements) -> Vec<String> {
    let (samples, rounds) = (&m.lock_samples, &m.lock_rounds);
    let table = Table::new(
        ">10 contenders|>5 node||<9 home|>6 pairs|>12 acquire med|>19 acquire p10-p90|\
         >10 pair med|>19 pair p10-p90|>10 pairs/s",
    );
    let mut lines = vec![
        "acquire: lite_lock alone; pair: lite_lock + lite_unlock; home: the node keeping the lock"
            .to_string(),
        table.header(),
    ];
    if m.locks.is_empty() {
        lines.push("(no lock records in the guest logs)".to_string());
        return lines;
    }
    let groups: BTreeSet<u32> = m.locks.keys().map(|key| key.0).collect();
    let mut notes = Vec::new();
    for contenders in groups {
        let group: Vec<&Lock> = m
            .locks
            .values()
            .filter(|r| r.contenders == contenders)
            .collect();
        for r in &group {
            let home = if r.home == r.node {
                format!("{} (local)", r.home)
            } else {
                r.home.to_string()
            };
            let ids = [r.contenders.to_string(), r.node.to_string(), home];
            let times = [&r.acquire, &r.pair].map(|s| [cell(Some(s.median)), spread_cell(Some(s))]);
            let per_s = cell(Some(r.pairs_per_s));
            let rate = [r.iters.to_string()]
                .into_iter()
                .chain(times.concat())
                .chain([per_s]);
            lines.push(table.line(ids.into_iter().chain(rate)));
        }
        if contenders < 2 {
            continue;
        }
        let round_throughputs = rounds.get(&contenders).filter(|t| !t.is_empty());
        let round_count = round_throughputs.map_or(1, Vec::len) as u64;
        let pairs: u64 = group.iter().map(|r| r.iters).sum::<u64>() * round_count;
        let throughput = match round_throughputs {
            Some(t) => rounds::Range::of(t).map(|r| r.median),
            None => contended_throughput(&group),
        };
        let all: Vec<f64> = group
            .iter()
            .flat_map(|r| samples.get(&(contenders, r.node)).into_iter().flatten())
            .copied()
            .collect();
        let overall = Spread::of(&all);
        let mut homes: Vec<u32> = group.iter().map(|r| r.home).collect();
        homes.dedup();
        let home = match homes[..] {
            [home] => home.to_string(),
            _ => "-".to_string(),
        };
        lines.push(table.row([
            &contenders.to_string(),
            "all",
            &home,
            &pairs.to_string(),
            &cell(overall.map(|s| s.median)),
            &spread_cell(overall.as_ref()),
            "-",
            "-",
            &cell(throughput),
        ]));
        if all.len() as u64 != pairs {
            notes.push(format!(
                "note: {contenders} contenders: {} of {pairs} acquire times were readable in the logs",
                all.len()
            ));
        }
    }
    lines.extend(notes);
    lines
}

/// Lock/unlock pairs per second of a group of contending nodes: every
/// node's pairs over the longest any node was busy; `None` without time.
pub(super) fn contended_throughput(group: &[&Lock]) -> Option<f64> {
    let pairs: u64 = group.iter().map(|r| r.iters).sum();
    let longest = group.iter().map(|r| r.busy_us).fold(0.0, f64::max);
    (longest > 0.0).then(|| pairs as f64 * 1e6 / longest)
}

/// How much lower contended throughput with the most nodes may be than
/// with the fewest, for the verdict (the spread of one phase under TCG).
const CONTENTION_TOLERANCE: f64 = 1.10;

/// The contended throughput of every round, by number of contending
/// nodes, one line each: the rounds in order and their median.
pub fn lock_round_lines(rounds: &BTreeMap<u32, Vec<f64>>) -> Vec<String> {
    rounds
        .iter()
        .filter_map(|(contenders, values)| {
            let range = rounds::Range::of(values)?;
            let each: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
            Some(format!(
                "{contenders} contenders: {} pairs/s in {} rounds, median {:.0}",
                each.join(", "),
                values.len(),
                range.median
            ))
        })
        .collect()
}

/// Whether contended lock throughput with the most contending nodes is no
/// lower than with the fewest (within [`CONTENTION_TOLERANCE`]), as the
/// medians of their rounds' throughput (`rounds`, by number of contending
/// nodes); `None` unless two numbers of contenders were measured.
pub fn contention_verdict(rounds: &BTreeMap<u32, Vec<f64>>) -> Option<String> {
    let counts: Vec<u32> = rounds.keys().copied().filter(|&c| c >= 2).collect();
    let (&fewest, &most) = (counts.first()?, counts.last()?);
    if fewest == most {
        return None;
    }
    let what = format!(
        "contended lock throughput with {most} nodes no lower than with {fewest} (within \
         {CONTENTION_TOLERANCE:.2}x)"
    );
    let range = |contenders: u32| rounds.get(&contenders).and_then(|v| rounds::Range::of(v));
    Some(match (range(fewest), range(most)) {
        (Some(few), Some(many)) => {
            let met = many.median * CONTENTION_TOLERANCE >= few.median;
            // Rounds disagree when the verdict of some pair of them differs.
            let disagree = if met {
                many.min * CONTENTION_TOLERANCE < few.max
            } else {
                many.max * CONTENTION_TOLERANCE >= few.min
            };
            format!(
                "{what}: {} (medians {:.0} pairs/s ({:.0}-{:.0}) against {:.0} ({:.0}-{:.0}){})",
                if met { "met" } else { "NOT met" },
                many.median,
                many.min,
                many.max,
                few.median,
                few.min,
                few.max,
                if disagree {
                    "; the rounds disagree"
                } else {
                    ""
                }
            )
        }
        _ => format!("{what}: NOT met (not timed with both)"),
    })
}

/// The memory region table, one string per line: the measuring node's
/// memory regions and pool after each step, by LMR size and count.
pub fn regions_table(m: &Measurements) -> Vec<String> {
    let note = "LMRs alive, half of them (every other one) on this node and half on the other; \
                counters read right after each step's allocations";
    let spec = ">6 LMRs|>9 LMR size|>15 memory regions|>14 pool segments|>9 pool MiB";
    let mut lines = Table::noted(&[note], spec).lines(m.regions.values().map(|r| {
        let counts = [r.lmrs, r.size, r.memory_regions, r.pool_segments];
        let mut cells = counts.map(|count| count.to_string()).to_vec();
        cells.push(format!("{:.2}", r.pool_bytes as f64 / MIB));
        cells
    }));
    if m.regions.is_empty() {
        lines.push("(no regions records in the guest logs)".to_string());
    }
    lines
}

/// Why `row` does not keep memory regions flat against `base`, the row
/// with the fewest LMRs: a region beyond `base`'s that no new pool segment
/// accounts for, or a pool too small to hold this node's LMRs (which then
/// must have regions of their own); `None` if it does.
fn regions_problem(base: &Regions, row: &Regions) -> Option<String> {
    let grown = |from: u64, to: u64| i128::from(to) - i128::from(from);
    let regions = grown(base.memory_regions, row.memory_regions);
    let segments = grown(base.pool_segments, row.pool_segments);
    let local_bytes = u128::from(row.local) * u128::from(row.size);
    if regions > segments {
        Some(format!(
            "{} LMRs of {} B: memory regions {} -> {}, pool segments only {} -> {}",
            row.lmrs,
            row.size,
            base.memory_regions,
            row.memory_regions,
            base.pool_segments,
            row.pool_segments
        ))
    } else if u128::from(row.pool_bytes) < local_bytes {
        Some(format!(
            "{} LMRs of {} B: the pool's {:.2} MiB cannot hold the {:.2} MiB of the {} on this node",
            row.lmrs,
            row.size,
            row.pool_bytes as f64 / MIB,
            local_bytes as f64 / MIB,
            row.local
        ))
    } else {
        None
    }
}

/// Whether the measuring node's memory regions stay flat as LMRs grow:
/// against the row with the fewest LMRs, every other row may add memory
/// regions only as pool segments, and its pool must hold the bytes of the
/// LMRs on this node. Names the largest row when met, the first that
/// fails when not.
pub fn regions_verdict(m: &Measurements) -> String {
    let rows: Vec<&Regions> = m.regions.values().collect();
    let what = "memory regions stay flat (every region beyond the fewest-LMR row's is a new \
                pool segment, and the pool holds this node's LMR bytes)";
    // The first of equal rows, in table order.
    let base = rows.iter().min_by_key(|r| r.lmrs);
    let largest = rows.iter().rev().max_by_key(|r| r.lmrs);
    let (Some(base), Some(largest), true) = (base, largest, rows.len() > 1) else {
        return format!("{what}: not evaluated, a measurement is missing");
    };
    match rows.iter().find_map(|r| regions_problem(base, r)) {
        Some(problem) => format!("{what}: NOT met ({problem})"),
        None => format!(
            "{what}: met ({} -> {} LMRs: memory regions {} -> {}, pool segments {} -> {})",
            base.lmrs,
            largest.lmrs,
            base.memory_regions,
            largest.memory_regions,
            base.pool_segments,
            largest.pool_segments
        ),
    }
}

/// Milliseconds as measured (whole), a median between two of them with
/// one decimal, or `-`.
fn ms_cell(value: Option<f64>) -> String {
    match value {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".to_string(),
    }
}

/// The stall of `call` a survivor reported (the first, should it report
/// one twice).
fn stall_of(node: &FailureNode, call: &str) -> Option<i64> {
    node.stalls.iter().find(|s| s.call == call).map(|s| s.ms)
}

/// A survivor's detection time: its smallest stall, when the first of its
/// calls waiting on the killed node was released.
fn detection_of(node: &FailureNode) -> Option<i64> {
    node.stalls.iter().map(|s| s.ms).min()
}

/// The failure table, one string per line: for each metric the count,
/// median, minimum and maximum of what the survivors reported, and for
/// the stalls the manager's dead-after time and the test's bound; then
/// each survivor's stalls, the verdict on the bound, and notes on what
/// the logs lacked. Detection is each survivor's smallest stall: the
/// first of its calls waiting on the killed node that the death released
/// (the failure program gives no time of its own for the cluster's size
/// going down). The first leave moves the chunks the leaving node holds
/// for the others' LMRs, so it is reported apart from the later ones.
pub fn failure_table(nodes: &[FailureNode]) -> Vec<String> {
    if nodes.is_empty() {
        return vec!["(no survivor logs: the failure phase did not run)".to_string()];
    }
    if nodes.iter().all(FailureNode::is_empty) {
        return vec![format!(
            "(no stall, leave or rejoin times in the logs of {})",
            names(nodes.iter())
        )];
    }
    let table = Table::new("<30 metric|>5 count|>9 median|>8 min|>8 max|>10 dead-after|>6 bound");
    let mut lines = vec![
        "stall: from a survivor's last successful write to the killed node (the kill follows \
         it within milliseconds) to the return of a call waiting on that node"
            .to_string(),
        "detection: each survivor's smallest stall, the first of its waiting calls released \
         (the program prints no time of its own for when lite_get_total_node dropped)"
            .to_string(),
        format!(
            "dead-after: the manager suspects a silent node after {DEAD_AFTER_MS} ms and declares it dead \
             {SUSPICION_MS} ms later; \
             bound: the failure test fails a stall over {STALL_BOUND_MS} ms"
        ),
        table.header(),
    ];
    let metric = |name: &str, values: &[i64], bounded: bool| {
        let s = rounds::Range::of(&values.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let (dead_after, bound) = if bounded {
            (DEAD_AFTER_MS.to_string(), STALL_BOUND_MS.to_string())
        } else {
            ("-".to_string(), "-".to_string())
        };
        table.row([
            name,
            &values.len().to_string(),
            &ms_cell(s.map(|s| s.median)),
            &ms_cell(s.map(|s| s.min)),
            &ms_cell(s.map(|s| s.max)),
            &dead_after,
            &bound,
        ])
    };
    let detection: Vec<i64> = nodes.iter().filter_map(detection_of).collect();
    lines.push(metric("detection", &detection, true));
    // One survivor waits for the lock the dead node held on another one.
    let owner_dead = (OWNER_DEAD_CALL, " (handed over)");
    for (call, note) in STALL_CALLS
        .map(|call| (call, ""))
        .into_iter()
        .chain([owner_dead])
    {
        let stalls: Vec<i64> = nodes.iter().filter_map(|n| stall_of(n, call)).collect();
        lines.push(metric(&format!("stall {call}{note}"), &stalls, true));
    }
    let worst: Vec<i64> = nodes
        .iter()
        .filter_map(|n| n.stalls.iter().map(|s| s.ms).max())
        .collect();
    lines.push(metric("worst stall (per survivor)", &worst, true));
    let leaves = |first: bool| -> Vec<i64> {
        nodes
            .iter()
            .flat_map(|n| &n.leaves)
            .filter(|l| (l.cycle == 1) == first)
            .map(|l| l.ms)
            .collect()
    };
    let later = format!("leave, cycles 2-{LEAVE_CYCLES}");
    for (name, first) in [("leave, cycle 1 (moves chunks)", true), (&later, false)] {
        lines.push(metric(name, &leaves(first), false));
    }
    let rejoins: Vec<i64> = nodes.iter().flat_map(|n| n.rejoins.clone()).collect();
    lines.push(metric("rejoin", &rejoins, false));

    lines.extend(stall_table(nodes));
    lines.push(stall_verdict(nodes));
    lines.extend(failure_notes(nodes));
    lines
}

/// `a, b and c` of the nodes' names.
fn names<'a>(nodes: impl Iterator<Item = &'a FailureNode>) -> String {
    let names: Vec<&str> = nodes.map(|n| n.node.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "no node".to_string(),
    }
}

/// Each survivor's stalls and its detection time, `-` for what its log
/// lacks; nothing if no survivor reported a stall.
fn stall_table(nodes: &[FailureNode]) -> Vec<String> {
    if nodes.iter().all(|n| n.stalls.is_empty()) {
        return Vec::new();
    }
    let [rdma_write, send_reply_imm, lock, dist_barrier, kernel_message] = STALL_CALLS;
    let table = Table::new(&format!(
        "<16 survivor|>11 {rdma_write}|>15 {send_reply_imm}|>8 {lock}|>13 {dist_barrier}|\
         >15 {kernel_message}|>10 detection"
    ));
    table.lines(nodes.iter().map(|node| {
        let stalls = STALL_CALLS.iter().map(|call| stall_of(node, call));
        let times = stalls.chain([detection_of(node)]);
        let cells = times.map(|ms| ms_cell(ms.map(|ms| ms as f64)));
        [node.node.clone()].into_iter().chain(cells)
    }))
}

/// Whether every stall is within [`STALL_BOUND_MS`], naming the worst.
pub fn stall_verdict(nodes: &[FailureNode]) -> String {
    let what = format!("stall bound (every stall <= {STALL_BOUND_MS} ms)");
    let stalls = nodes.iter().flat_map(|node| {
        let of_node = node.stalls.iter();
        of_node.map(move |stall| (stall.ms, &node.node, &stall.call))
    });
    // The first of equal stalls, in node order.
    match stalls.reduce(|worst, stall| if stall.0 > worst.0 { stall } else { worst }) {
        Some((ms, node, call)) => {
            let verdict = if ms <= STALL_BOUND_MS {
                "met"
            } else {
                "NOT met"
            };
            format!("{what}: {verdict} (worst {ms} ms, {call} on {node})")
        }
        None => format!("{what}: not evaluated, no stall was measured"),
    }
}

/// Notes on what the survivors' logs lack: stalls fewer than one per
/// call and survivor, leave and rejoin times fewer than the cycles.
fn failure_notes(nodes: &[FailureNode]) -> Vec<String> {
    let mut notes = Vec::new();
    let expected = nodes.len() * STALL_CALLS.len();
    let stalls: usize = nodes.iter().map(|n| n.stalls.len()).sum();
    if stalls == 0 {
        notes.push(format!(
            "note: no stall times in the logs of {}",
            names(nodes.iter())
        ));
    } else if stalls < expected {
        notes.push(format!(
            "note: {stalls} of {expected} stall times were readable in the logs"
        ));
    }
    let leavers: Vec<&FailureNode> = nodes
        .iter()
        .filter(|n| !n.leaves.is_empty() || !n.rejoins.is_empty())
        .collect();
    if leavers.is_empty() {
        notes.push(
            "note: no leave or rejoin times in the logs: the leave/rejoin cycles did not run"
                .to_string(),
        );
        return notes;
    }
    let leaves: usize = leavers.iter().map(|n| n.leaves.len()).sum();
    let rejoins: usize = leavers.iter().map(|n| n.rejoins.len()).sum();
    let cycles = LEAVE_CYCLES as usize;
    let mut note = format!(
        "leave and rejoin: {} ({leaves} leave and {rejoins} rejoin times",
        names(leavers.iter().copied())
    );
    if leaves < cycles || rejoins < cycles {
        note.push_str(&format!(" of {cycles} cycles readable in the logs"));
    }
    note.push(')');
    if !leavers
        .iter()
        .any(|n| n.leaves.iter().any(|l| l.cycle == 1))
    {
        note.push_str("; the first leave's time is missing");
    }
    notes.push(note);
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::{
        assert_rows, failure_logs, measured, words, words_of, ATOMIC_LOG, BW_CLIENT, CLIENT,
        FAILURE_LEAVER, LOCK_LOG, REGIONS_LOG, RPC_LOG,
    };

    #[test]
    fn a_table_spec_gives_each_column_its_width_side_and_gap() {
        let table = Table::new("<4 op|>5 size||<3 x");
        assert_eq!(table.header(), "op    size  x  ");
        assert_eq!(table.row(["a", "1", "b"]), "a        1  b  ");
    }

    #[test]
    fn comparison_tables_line_up_lite_and_perftest() {
        let kmsg = "LITE-RECORD {\"latency\":{\"op\":\"kmsg\",\"size\":64,\"iters\":1000,\
            \"median\":3000.00,\"p10\":2800.00,\"p90\":3400.00,\"min\":2000,\"max\":9000,\
            \"stdev\":400}}\n";
        let rpc = format!("{RPC_LOG}{kmsg}");
        let rpc_async = "LITE-PERFTEST-BEGIN test=ib_send_bw size=64 depth=8 side=client\n\
             64 300 1.00 0.50 0.004\nLITE-PERFTEST-END rc=0\n\
             LITE-RECORD {\"rpc_async\":{\"size\":64,\"threads\":1,\"depth\":8,\"calls\":300,\"calls_per_s\":800.00,\"latency\":{\"median\":9000.00,\"p10\":8000.00,\"p90\":11000.00}}}\n";
        let throughput = |op: &str, average: u32| {
            format!(
                "LITE-RECORD {{\"throughput\":{{\"op\":\"{op}\",\"size\":4096,\"depth\":4,\
                 \"iters\":400,\"average\":{average}.00,\"median\":{average}.00,\"p10\":5.00,\
                 \"p90\":9.00,\"min\":1.00,\"max\":10.00}}}}\n"
            )
        };
        let dsm = format!(
            "{}{}",
            throughput("dsm_read_pages", 6),
            throughput("read_async", 24)
        );
        type Of = fn(&Measurements) -> Vec<String>;
        // Each table of a log: the notes above its column names, then its
        // rows, a line each.
        let cases: [(Of, &str, usize, &str); 7] = [
            // 2100.50 / 1987.50.
            (
                table,
                CLIENT,
                0,
                "read 8 1.50 0.10 - - -
write 64 1987.50 210.44 2100.50 1900.00-2500.25 1.06",
            ),
            // The atomics, RPC and kernel messages have tables of their own.
            (
                table,
                ATOMIC_LOG,
                0,
                "write 64 - - 1100.00 1000.00-1300.00 -",
            ),
            (table, &rpc, 0, "write 64 - - 1100.00 1000.00-1300.00 -"),
            // By threads.
            (
                rpc_throughput_table,
                RPC_LOG,
                0,
                "64 1 2000 400.00 2500.00 2400.00-2600.00
64 4 2000 1234.50 3000.00 2800.00-3500.00",
            ),
            // Sizes 8, 64 (2500 / (2 x 1000) for RPC, 3000 / (2 x 1000) for
            // kernel messages, the ib_send_lat t_typical a round trip twice)
            // and 512.
            (
                rpc_table,
                &rpc,
                2,
                "8 900.00 1800.00 - - - - - -
64 1000.00 2000.00 2500.00 2300.00-2900.50 1.25 3000.00 2800.00-3400.00 1.50
512 - - 2600.00 2400.00-3000.00 - - - -",
            ),
            // 1200 / 1000; no LITE compare_swp series: native only.
            (
                atomic_table,
                ATOMIC_LOG,
                0,
                "\
fetch_add 8 ib_atomic_lat -A FETCH_AND_ADD 1000.00 120.00 1200.00 1100.00-1500.00 1.20
compare_swp 8 ib_atomic_lat -A CMP_AND_SWAP 1050.00 130.00 - - -",
            ),
            // Every planned depth; 800 calls/s against 0.004 Mpps.
            (
                rpc_async_table,
                rpc_async,
                2,
                "1 - - - - - -
2 - - - - - -
4 - - - - - -
8 300 800.00 4000.00 0.2000 9000.00 8000.00-11000.00
16 - - - - - -
32 - - - - - -",
            ),
        ];
        for (of, log, notes, rows) in cases {
            let table = of(&measured(log));
            assert_eq!(words_of(&table[notes + 1..]).join("\n"), rows, "{table:#?}");
        }
        // 6 / 24.
        assert_eq!(
            words_of(&dsm_throughput(&measured(&dsm))),
            [
                "page throughput, 4 threads faulting at once: 6.00 MiB/s (groups p10-p90 \
              5.00-9.00); / LITE reads of 4096 B, 4 in flight: 0.25"
            ]
        );
        // Nothing at all: both atomic rows, all dashes.
        let empty = atomic_table(&Measurements::default());
        assert!(empty[0].contains("LITE/native"));
        assert_eq!(empty.len(), 3);
        assert!(empty[2].split_whitespace().skip(5).all(|f| f == "-"));
    }

    #[test]
    fn throughput_table_compares_with_the_matching_perftest_run() {
        let m = measured(BW_CLIENT);
        let table = bw_table(&m);
        // Two header lines, the column names, then every planned series.
        assert_eq!(table.len(), 3 + 2 * 4 + 2 * 2 * 6, "{table:#?}");
        assert!(table[0].contains("-t (TX depth)"));
        // memset 4 KiB against ib_write_bw -t 1: 10 / 8; write_async at depth
        // 8 against ib_write_bw -t 8: 19.32 / 21.47; read_async at depth 32
        // against ib_read_bw -t 32: 48 / 64. memcpy has no valid LITE line;
        // 4 MiB has neither measurement.
        let rows = [
            "memset 4096 1 ib_write_bw -t 1 8.00 10.00 11.00 9.00-12.50 1.25",
            "write_async 4096 8 ib_write_bw -t 8 21.47 19.32 19.00 18.00-20.00 0.90",
            "read_async 65536 32 ib_read_bw -t 32 64.00 48.00 50.00 40.00-55.00 0.75",
            "memcpy 4096 1 ib_write_bw -t 1 8.00 - - - -",
            "memset 4194304 1 ib_write_bw -t 1 - - - - -",
        ];
        assert_rows(&table, &rows);
        // A series outside the plan still gets a row.
        let mut extra = Measurements::default();
        let key = ("write_async".to_string(), 512, Some(3));
        let series = m.lite_bw.values().next().cloned().expect("a series");
        extra.lite_bw.insert(key, series);
        let table = bw_table(&extra);
        let last = table.last().map_or("", String::as_str);
        assert!(last.starts_with("write_async     512     3"), "{last}");
    }

    #[test]
    fn contended_throughput_must_not_fall_with_more_nodes() {
        let rounds = |two: &[f64], four: &[f64]| {
            BTreeMap::from([(2u32, two.to_vec()), (4u32, four.to_vec())])
        };
        // One contended group only: no verdict.
        let only_four = BTreeMap::from([(1u32, vec![500.0]), (4u32, vec![300.0])]);
        assert_eq!(contention_verdict(&only_four), None);
        let what = "contended lock throughput with 4 nodes no lower than with 2 (within 1.10x)";
        let cases: [(&[f64], &[f64], &str); 4] = [
            // The medians decide: 360 against 390 is within 1.10x.
            (
                &[390.0, 300.0, 420.0],
                &[360.0, 370.0, 350.0],
                "met (medians 360 pairs/s (350-370) against 390 (300-420); the rounds disagree)",
            ),
            (
                &[300.0, 310.0],
                &[400.0, 420.0],
                "met (medians 410 pairs/s (400-420) against 305 (300-310))",
            ),
            (
                &[500.0, 480.0, 520.0],
                &[300.0, 320.0, 310.0],
                "NOT met (medians 310 pairs/s (300-320) against 500 (480-520))",
            ),
            // A count with no round timed.
            (&[500.0], &[], "NOT met (not timed with both)"),
        ];
        for (two, four, verdict) in cases {
            let want = format!("{what}: {verdict}");
            assert_eq!(contention_verdict(&rounds(two, four)), Some(want));
        }
        // Every round is listed with its median.
        let lines = [
            "2 contenders: 390, 300, 420 pairs/s in 3 rounds, median 390",
            "4 contenders: 360 pairs/s in 1 rounds, median 360",
        ];
        assert_eq!(lock_round_lines(&rounds(cases[0].0, &[360.0])), lines);
    }

    #[test]
    fn lock_table_adds_an_overall_row_per_contended_series() {
        let mut m = measured(LOCK_LOG);
        let table = words_of(&lock_table(&m));
        // Explanation, column names, 2 uncontended, 2 contended, all, note.
        // All: samples 1..6 together, median 3.5, p10 1.5, p90 5.5; 8
        // pairs over the longest node's 1000 us.
        assert_eq!(
            table[2..],
            [
                "1 2 1 1000 800.00 700.00-900.00 1600.00 1500.00-1800.00 588.24",
                "1 2 2 (local) 1000 300.00 250.00-350.00 600.00 550.00-700.00 1538.46",
                "4 1 1 (local) 4 10.00 5.00-20.00 15.00 9.00-25.00 5000.00",
                "4 3 1 4 50.00 40.00-60.00 55.00 45.00-65.00 4000.00",
                "4 all 1 8 3.50 1.50-5.50 - - 8000.00",
                "note: 4 contenders: 6 of 8 acquire times were readable in the logs",
            ]
        );
        // Complete samples: no note.
        if let Some(node3) = m.lock_samples.get_mut(&(4, 3)) {
            node3.extend([7.0, 8.0]);
        }
        let table = lock_table(&m);
        assert_eq!(table.len(), 7);
        assert!(words(&table[6]).starts_with("4 all 1 8 4.50 1.70-7.30 "));
        // Two rounds (the rows of the first): twice the pairs, of which
        // the 8 samples are half, and the median of the rounds' throughput.
        m.lock_rounds = BTreeMap::from([(4u32, vec![7000.0, 9000.0])]);
        let table = lock_table(&m);
        assert_eq!(table.len(), 8);
        assert_eq!(words(&table[6]), "4 all 1 16 4.50 1.70-7.30 - - 8000.00");
        let note = "note: 4 contenders: 8 of 16 acquire times were readable in the logs";
        assert_eq!(table.last(), Some(&note.to_string()));
        // Nothing measured.
        let empty = lock_table(&Measurements::default());
        assert_eq!(empty.len(), 3);
        assert!(empty[2].contains("no lock records"));
    }

    #[test]
    fn failure_table_reports_detection_stalls_leaves_and_rejoins() {
        let mut m = Measurements::default();
        m.add_failure_logs("failure/", &failure_logs(), 4);
        let table = words_of(&failure_table(&m.failure));
        assert!(table[0].starts_with("stall: from a survivor's last successful write"));
        assert!(table[1].starts_with("detection: each survivor's smallest stall"));
        assert!(table[2].contains("after 3000 ms") && table[2].contains("over 4500 ms"));
        // Detection: the smallest stalls 2944, 2948 (no lock stall) and
        // 2904. Node 2's lock stall was broken: two, their median between
        // them. No survivor of these logs waited for a lock the victim
        // held. The worst: 2973, 2973 and 2922. The first leave apart; the
        // second's time was unreadable.
        assert_eq!(
            table[3..],
            [
                "metric count median min max dead-after bound",
                "detection 3 2944 2904 2948 3000 4500",
                "stall rdma_write 3 2970 2919 2970 3000 4500",
                "stall send_reply_imm 3 2951 2910 2951 3000 4500",
                "stall lock 2 2924 2904 2944 3000 4500",
                "stall dist_barrier 3 2973 2922 2973 3000 4500",
                "stall kernel_message 3 2948 2912 2948 3000 4500",
                "stall lock_owner_dead (handed over) 0 - - - 3000 4500",
                "worst stall (per survivor) 3 2973 2922 2973 3000 4500",
                "leave, cycle 1 (moves chunks) 1 13302 13302 13302 - -",
                "leave, cycles 2-10 2 172.5 158 187 - -",
                "rejoin 4 323 207 527 - -",
                "survivor rdma_write send_reply_imm lock dist_barrier kernel_message detection",
                "failure/node1 2970 2951 2944 2973 2948 2944",
                "failure/node2 2970 2951 - 2973 2948 2948",
                "failure/node3 2919 2910 2904 2922 2912 2904",
                "stall bound (every stall <= 4500 ms): met (worst 2973 ms, dist_barrier on \
                 failure/node1)",
                "note: 14 of 15 stall times were readable in the logs",
                "leave and rejoin: failure/node3 (3 leave and 4 rejoin times of 10 cycles \
                 readable in the logs)",
            ]
        );
    }

    #[test]
    fn a_failure_phase_without_data_says_so() {
        let no_logs = "(no survivor logs: the failure phase did not run)";
        assert_eq!(failure_table(&[]), [no_logs]);
        let nobody = |name: &str| FailureNode {
            node: name.into(),
            ..FailureNode::default()
        };
        let no_times = "(no stall, leave or rejoin times in the logs of node1, node2 and node3)";
        let nodes = [nobody("node1"), nobody("node2"), nobody("node3")];
        assert_eq!(failure_table(&nodes), [no_times]);
        // Stalls, but the cycles never ran: dashes, not zeros, and a note.
        let mut m = Measurements::default();
        m.add_failure_logs("", &failure_logs()[..1], 4);
        let table = failure_table(&m.failure);
        for line in &table[12..15] {
            assert!(words(line).ends_with(" 0 - - - - -"), "{line}");
        }
        let note =
            "note: no leave or rejoin times in the logs: the leave/rejoin cycles did not run";
        assert_eq!(table.last(), Some(&note.to_string()));
        // Cycles, but no stall: the verdict is not evaluated.
        let leaver = FailureNode {
            stalls: Vec::new(),
            ..crate::bench::parse::parse_failure("node3", FAILURE_LEAVER)
        };
        let table = failure_table(&[nobody("node1"), leaver]);
        assert_eq!(words(&table[4]), "detection 0 - - - 3000 4500");
        assert!(table.contains(
            &"stall bound (every stall <= 4500 ms): not evaluated, no stall was measured"
                .to_string()
        ));
        assert!(table.contains(&"note: no stall times in the logs of node1 and node3".to_string()));
    }

    #[test]
    fn a_stall_over_the_bound_and_a_missing_first_leave_are_named() {
        let mut nodes = vec![crate::bench::parse::parse_failure("node3", FAILURE_LEAVER)];
        nodes[0].stalls[2].ms = 4501;
        nodes[0].leaves.remove(0);
        let not_met =
            "stall bound (every stall <= 4500 ms): NOT met (worst 4501 ms, lock on node3)";
        assert_eq!(stall_verdict(&nodes), not_met);
        let table = failure_table(&nodes);
        let first_leave = words(&table[12]);
        assert_eq!(first_leave, "leave, cycle 1 (moves chunks) 0 - - - - -");
        let note = table.last().map_or("", String::as_str);
        let named = note.ends_with("; the first leave's time is missing");
        assert!(named, "{table:#?}");
    }

    #[test]
    fn the_failure_bounds_are_those_of_the_manager_and_the_test() {
        let test = include_str!("../../../userspace/lite-tools/src/failure_test.rs");
        assert!(test.contains(&format!("pub const MAX_STALL_MS: i64 = {STALL_BOUND_MS};")));
        for call in STALL_CALLS {
            assert!(test.contains(&format!(" = \"{call}\",\n")), "{call}");
        }
        let rejoin = include_str!("../../../userspace/lite-tools/src/failure_test/rejoin.rs");
        assert!(rejoin.contains(&format!("pub const CYCLES: u32 = {LEAVE_CYCLES};")));
        // The manager runs with its default dead-after time.
        let manager = include_str!("../../../userspace/cluster-manager/src/cli.rs");
        assert!(manager.contains(&format!(
            "heartbeat) for MS milliseconds (default {DEAD_AFTER_MS})"
        )));
        assert!(manager.contains(&format!(
            "for MS milliseconds more and no peer heard from it\n                         (default {SUSPICION_MS})"
        )));
        let run = include_str!("run.rs");
        assert!(run.contains("dead_after_ms: None,"));
        assert!(!run.contains("API_TEST_DEAD_AFTER_MS"));
    }

    #[test]
    fn regions_table_and_verdict() {
        let m = measured(REGIONS_LOG);
        let table = regions_table(&m);
        assert_eq!(table.len(), 7, "{table:#?}");
        let cells = words_of(&table);
        let columns = "LMRs LMR size memory regions pool segments pool MiB";
        assert_eq!(cells[1], columns);
        assert_eq!(cells[2], "1 4096 3 1 4.00");
        assert_eq!(cells[5..], ["1000 4096 4 2 8.00", "100 65536 4 2 8.00"]);
        let what = "memory regions stay flat (every region beyond the fewest-LMR row's is a new \
                    pool segment, and the pool holds this node's LMR bytes)";
        let changed = |change: fn(&mut Vec<&mut Regions>)| {
            let mut changed = measured(REGIONS_LOG);
            change(&mut changed.regions.values_mut().collect());
            regions_verdict(&changed)
        };
        let found = [
            regions_verdict(&m),
            // A region per LMR that no pool segment explains.
            changed(|rows| rows[3].memory_regions = 503),
            // Fewer segments again need fewer regions too.
            changed(|rows| rows[4].pool_segments = 1),
            // 50 local LMRs of 64 KiB are 3.125 MiB: a 2 MiB pool cannot hold them.
            changed(|rows| rows[4].pool_bytes = 2 << 20),
            regions_verdict(&measured(REGIONS_LOG.lines().next().unwrap_or_default())),
            regions_verdict(&Measurements::default()),
        ];
        let missing = format!("{what}: not evaluated, a measurement is missing");
        let want = [
            format!("{what}: met (1 -> 1000 LMRs: memory regions 3 -> 4, pool segments 1 -> 2)"),
            format!(
                "{what}: NOT met (1000 LMRs of 4096 B: memory regions 3 -> 503, \
                 pool segments only 1 -> 2)"
            ),
            format!(
                "{what}: NOT met (100 LMRs of 65536 B: memory regions 3 -> 4, \
                 pool segments only 1 -> 1)"
            ),
            format!(
                "{what}: NOT met (100 LMRs of 65536 B: the pool's 2.00 MiB cannot hold the \
                 3.12 MiB of the 50 on this node)"
            ),
            missing.clone(),
            missing,
        ];
        assert_eq!(found, want);
        let nothing = "(no regions records in the guest logs)";
        assert_eq!(regions_table(&Measurements::default())[2], nothing);
    }
}
