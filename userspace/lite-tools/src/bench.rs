//! Pieces of `lite-bench` that do not need a LITE kernel.

use std::collections::VecDeque;
use std::fmt;

use crate::say;
use crate::stats::{percentile, summarize};
pub use lite_bench_record::LoadReport;
use lite_bench_record::{self as record, Record};

/// Bytes in one "MB" of throughput. perftest's `MB/sec` columns divide by
/// 2^20 (they are MiB/s), so LITE's figures use the same unit.
pub const MIB: f64 = 1_048_576.0;

/// Which node holds the benchmarked memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerNode {
    /// Node 1, the first node to join, which always exists.
    Auto,
    /// This node: it serves, and the other node measures.
    This,
    /// The one other member of a two-node cluster: this node measures.
    /// Which node joins first does not decide which one measures.
    Other,
    /// A given node id.
    Id(u32),
}

impl PeerNode {
    /// The node id this designates, on node `me` whose membership file
    /// (debugfs `membership`) reads `membership`.
    ///
    /// # Errors
    ///
    /// For [`PeerNode::Other`], when the file does not name exactly one
    /// alive peer.
    pub fn resolve(
        self,
        me: u32,
        membership: impl FnOnce() -> Result<String, String>,
    ) -> Result<u32, String> {
        match self {
            PeerNode::Auto => Ok(1),
            PeerNode::This => Ok(me),
            PeerNode::Id(id) => Ok(id),
            PeerNode::Other => match alive_peers(&membership()?)[..] {
                [peer] => Ok(peer),
                ref peers => Err(format!(
                    "--peer-node other needs exactly one other node, found {peers:?}"
                )),
            },
        }
    }

    /// Parses `auto`, `this`, `other` or a node id in 1..`max_nodes`.
    pub fn parse(text: &str, max_nodes: u32) -> Result<PeerNode, String> {
        match text {
            "auto" => return Ok(PeerNode::Auto),
            "this" => return Ok(PeerNode::This),
            "other" => return Ok(PeerNode::Other),
            _ => {}
        }
        match text.parse::<u32>() {
            Ok(id) if (1..max_nodes).contains(&id) => Ok(PeerNode::Id(id)),
            Ok(_) => Err(format!("node ids are 1 to {}", max_nodes - 1)),
            Err(e) => Err(format!("expected auto, this, other or a node id: {e}")),
        }
    }
}

/// The alive peers the membership file lists (`peer <id> alive ..` lines).
pub fn alive_peers(membership: &str) -> Vec<u32> {
    membership
        .lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["peer", id, "alive", ..] => id.parse().ok(),
                _ => None,
            },
        )
        .collect()
}

named_enum! {
    /// Kind of measured operation, by its name in the records.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Operation {
        /// `lite_rdma_write`.
        Write = "write",
        /// `lite_rdma_read`.
        Read = "read",
        /// `lite_remote_memset`.
        Memset = "memset",
        /// `lite_memcpy`.
        Memcpy = "memcpy",
        /// `lite_rdma_write_async`, several in flight.
        WriteAsync = "write_async",
        /// `lite_rdma_read_async`, several in flight.
        ReadAsync = "read_async",
        /// `lite_send_reply_imm` round trip, the reply as long as the request.
        Rpc = "rpc",
        /// `liteapi_send_reply` round trip between two kernels through a
        /// handler, the reply as long as the request, timed in the kernel.
        KernelMessage = "kmsg",
        /// A LITE-DSM read fault: the page fetched from its home.
        DsmRead = "dsm_read",
        /// A LITE-DSM write fault on a page no other node holds.
        DsmWrite = "dsm_write",
        /// A LITE-DSM write fault on a page another node reads, whose copy
        /// is invalidated first.
        DsmWriteShared = "dsm_write_1_reader",
        /// A LITE-DSM write fault on a page two other nodes read, whose
        /// copies are invalidated first.
        DsmWriteTwoReaders = "dsm_write_2_readers",
        /// LITE-DSM read faults of fresh pages by several threads at once:
        /// LITE-DSM's page throughput.
        DsmReadPages = "dsm_read_pages",
        /// `lite_fetch_add` on an 8-byte LMR.
        FetchAdd = "fetch_add",
        /// `lite_compare_swp` on an 8-byte LMR.
        CompareSwp = "compare_swp",
        /// `lite_rdma_write` on one of many live LMRs, picked at random.
        RegionWrite = "region_write",
        /// `lite_rdma_read` on one of many live LMRs, picked at random.
        RegionRead = "region_read",
        /// `lite_rdma_write` on the first of many live LMRs, in blocks
        /// alternating with [`Operation::RegionWrite`]'s.
        RegionWriteFirst = "region_write_first",
        /// `lite_rdma_read` on the first of many live LMRs.
        RegionReadFirst = "region_read_first",
        /// `lite_alloc_remote` of one LMR.
        RegionCreate = "region_create",
        /// `lite_remote_free` of one LMR.
        RegionFree = "region_free",
    }
}

named_enum! {
    /// What `lite-bench --series` measures.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Series {
        /// Every series.
        All = "all",
        /// Only the series the benchmark's interleaved rounds compare with
        /// the native verbs baseline.
        Latency = "latency",
        /// Only the memory region curve.
        Regions = "regions",
        /// Only the process curve.
        Processes = "processes",
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Prints `record`'s line.
pub fn emit(record: &Record) {
    say(format_args!("{}", record.line()));
}

/// The latency series of `operation` at `size` timed as `samples_us`;
/// `None` without samples.
pub fn latency(operation: Operation, size: u64, samples_us: &[f64]) -> Option<record::Latency> {
    let summary = summarize(samples_us)?;
    Some(record::Latency {
        op: operation.to_string(),
        size,
        regions: None,
        iters: summary.count as u64,
        median: summary.median,
        p10: summary.p10,
        p90: summary.p90,
        p99: None,
        min: summary.min,
        max: summary.max,
        stdev: summary.stdev,
    })
}

/// The record of one series of the memory region curve, with `regions`
/// live LMRs when given and the 99th percentile of `samples_us`.
pub fn region_record(
    operation: Operation,
    size: u64,
    regions: Option<usize>,
    samples_us: &[f64],
) -> Option<Record> {
    Some(Record::Latency(record::Latency {
        regions: regions.map(|n| n as u64),
        p99: p99(samples_us),
        ..latency(operation, size, samples_us)?
    }))
}

/// Operations of one block of the memory region curve: random ones and
/// ones on the first region take turns by blocks.
pub const REGION_BLOCK: usize = 50;

/// Whether timed operation `timed` of a memory region curve step goes to
/// the first region rather than a random one: odd blocks of
/// [`REGION_BLOCK`] do, until one kind has its `iters` operations and the
/// other finishes.
pub fn to_first_region(timed: usize, random_done: usize, first_done: usize, iters: usize) -> bool {
    let first_turn = (timed / REGION_BLOCK) % 2 == 1;
    if first_turn {
        first_done < iters
    } else {
        random_done >= iters
    }
}

named_enum! {
    /// What each process of the process curve does; its name follows
    /// `proc_` in the curve's lines and names it on command lines.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ProcessWorkload {
        /// Synchronous 64-byte writes to an LMR of its own on the peer.
        Write = "write",
        /// Synchronous 64-byte echo calls to the peer's RPC server.
        Rpc = "rpc",
    }
}

/// The record of one step of the process curve: `processes` processes of
/// `workload` made `iters` operations of `size` bytes each, started
/// together, the last finishing after `elapsed_us` and the slowest taking
/// `slowest_us`; `qps` and `mrs` are the queue pairs and memory regions of
/// the measuring node meanwhile. Its `ops_per_s` are all processes'
/// operations over `elapsed_us`.
pub fn process_record(
    workload: ProcessWorkload,
    size: u64,
    (processes, iters): (usize, usize),
    (elapsed_us, slowest_us): (f64, f64),
    (qps, mrs): (u64, u64),
) -> Record {
    let ops = (processes * iters) as f64;
    Record::Process(record::Process {
        workload: workload.name().into(),
        size,
        processes: processes as u64,
        iters: iters as u64,
        elapsed_us,
        slowest_us,
        ops_per_s: ops / elapsed_us.max(f64::MIN_POSITIVE) * 1e6,
        qps,
        mrs,
    })
}

/// Operations timed for one throughput series: `budget` bytes' worth of
/// `size`-byte operations, at least `min_iters` and at most `max_iters`
/// (`max_iters` wins when the two conflict). Keeps large sizes from taking
/// minutes under emulation while small ones still get many samples.
pub fn throughput_iters(size: u64, budget: u64, min_iters: usize, max_iters: usize) -> usize {
    let by_budget = usize::try_from(budget / size.max(1)).unwrap_or(usize::MAX);
    by_budget.max(min_iters).min(max_iters).max(1)
}

/// The throughput record of `ops` operations of `operation` at `size`
/// bytes (with `depth` in flight for a pipelined series) that moved their
/// bytes at `average` MiB/s over the whole series, its spread that of the
/// per-sample throughputs `samples` (one sample per operation, or per
/// group of completions for pipelined series).
fn throughput_record(
    (operation, size, depth): (Operation, u64, Option<usize>),
    ops: usize,
    average: f64,
    samples: &[f64],
) -> Option<record::Throughput> {
    let s = summarize(samples)?;
    Some(record::Throughput {
        op: operation.to_string(),
        size,
        depth: depth.map(|d| d as u32),
        iters: ops as u64,
        average,
        median: s.median,
        p10: s.p10,
        p90: s.p90,
        min: s.min,
        max: s.max,
    })
}

/// MiB/s for `bytes` moved in `micros` microseconds; `None` for a zero or
/// negative time.
pub fn mib_per_s(bytes: u64, micros: f64) -> Option<f64> {
    (micros > 0.0 && micros.is_finite()).then(|| bytes as f64 / MIB / (micros / 1e6))
}

/// Throughput of `durations_us.len()` operations of `operation` at `size`
/// bytes done one at a time: one sample per operation.
pub fn throughput_of_ops(
    operation: Operation,
    size: u64,
    durations_us: &[f64],
) -> Option<record::Throughput> {
    let samples: Vec<f64> = durations_us
        .iter()
        .map(|&us| mib_per_s(size, us))
        .collect::<Option<_>>()?;
    let total_us: f64 = durations_us.iter().sum();
    let ops = durations_us.len();
    let average = mib_per_s(size * ops as u64, total_us)?;
    throughput_record((operation, size, None), ops, average, &samples)
}

/// Number of consecutive groups the completions of a pipelined series are
/// cut into for the spread: at most 10, each at least `depth` completions
/// long so that every group spans a full window.
pub fn completion_groups(ops: usize, depth: usize) -> usize {
    (ops / depth.max(1)).clamp(1, 10)
}

/// Throughput of a pipelined series of `operation` at `size` bytes,
/// `depth` in flight, that started at `start_ns` and whose completions
/// were reaped at `completions_ns` (ascending). The average covers the
/// whole series; the samples are the throughputs of `groups` consecutive
/// groups of completions, each measured from the end of the previous group.
pub fn throughput_of_completions(
    (operation, size, depth): (Operation, u64, usize),
    start_ns: u64,
    completions_ns: &[u64],
    groups: usize,
) -> Option<record::Throughput> {
    let ops = completions_ns.len();
    let end = *completions_ns.last()?;
    let groups = groups.clamp(1, ops);
    let micros = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1000.0;
    let mut samples = Vec::with_capacity(groups);
    let mut previous_end = start_ns;
    let mut done = 0;
    for group in 0..groups {
        // Spread the remainder over the first groups.
        let len = ops / groups + usize::from(group < ops % groups);
        let group_end = completions_ns[done + len - 1];
        samples.push(mib_per_s(
            size * len as u64,
            micros(previous_end, group_end),
        )?);
        previous_end = group_end;
        done += len;
    }
    let average = mib_per_s(size * ops as u64, micros(start_ns, end))?;
    throughput_record((operation, size, Some(depth)), ops, average, &samples)
}

/// Runs `total` operations keeping up to `depth` in flight: `submit(slot)`
/// starts one and returns its id, `reap(id)` waits for it; operations are
/// reaped oldest first. Operation `i` gets slot `i % depth`, and a slot is
/// only handed out again after its previous operation was reaped, so each
/// slot can own a buffer. Returns the time (`now()`) of every completion.
///
/// On the first error no further operations are started, but those already
/// in flight are still reaped (their results ignored) before the error is
/// returned, so no buffer is left in use by the kernel.
pub fn run_window<E>(
    total: usize,
    depth: usize,
    mut submit: impl FnMut(usize) -> Result<u64, E>,
    mut reap: impl FnMut(u64) -> Result<(), E>,
    mut now: impl FnMut() -> u64,
) -> Result<Vec<u64>, E> {
    let depth = depth.max(1);
    let mut in_flight: VecDeque<u64> = VecDeque::with_capacity(depth);
    let mut completions = Vec::with_capacity(total);
    let mut started = 0;
    let mut failure = None;
    while failure.is_none() && (started < total || !in_flight.is_empty()) {
        if started < total && in_flight.len() < depth {
            match submit(started % depth) {
                Ok(id) => {
                    in_flight.push_back(id);
                    started += 1;
                }
                Err(e) => failure = Some(e),
            }
        } else if let Some(id) = in_flight.pop_front() {
            match reap(id) {
                Ok(()) => completions.push(now()),
                Err(e) => failure = Some(e),
            }
        }
    }
    match failure {
        None => Ok(completions),
        Some(e) => {
            for id in in_flight {
                let _ = reap(id);
            }
            Err(e)
        }
    }
}

/// The record of a series of `size`-byte calls whose round trips
/// `durations_us` `threads` threads completed together within
/// `elapsed_us`; with `depth`, one thread kept `depth` calls in flight,
/// each timed from posting to reaping. `None` without calls or with no
/// elapsed time.
pub fn rpc_throughput(
    (size, threads, depth): (u64, usize, Option<usize>),
    durations_us: &[f64],
    elapsed_us: f64,
) -> Option<Record> {
    if !(elapsed_us > 0.0 && elapsed_us.is_finite()) {
        return None;
    }
    let load = record::RpcLoad {
        size,
        threads: threads as u32,
        depth: depth.unwrap_or(1) as u32,
        calls: durations_us.len() as u64,
        calls_per_s: durations_us.len() as f64 / (elapsed_us / 1e6),
        latency: record::Spread::of(durations_us)?,
    };
    Some(match depth {
        Some(_) => Record::RpcAsync(load),
        None => Record::RpcThroughput(load),
    })
}

/// Calls each of `threads` threads makes so that together they make about
/// `total` (at least one each).
pub fn calls_per_thread(total: usize, threads: usize) -> usize {
    (total / threads.max(1)).max(1)
}

/// The record of the lock/unlock pairs node `node` timed on a lock kept by
/// `home` with `contenders` nodes taking it at once: the times of
/// `lite_lock` alone and of each pair, all pairs taking `busy_us`. `None`
/// without samples, with counts that differ or with no time elapsed.
pub fn lock_record(
    (contenders, node, home): (u32, u32, u32),
    acquire_us: &[f64],
    pair_us: &[f64],
    busy_us: f64,
) -> Option<record::Lock> {
    if acquire_us.len() != pair_us.len() || !(busy_us > 0.0 && busy_us.is_finite()) {
        return None;
    }
    Some(record::Lock {
        contenders,
        node,
        home,
        iters: pair_us.len() as u64,
        acquire: record::Spread::of(acquire_us)?,
        pair: record::Spread::of(pair_us)?,
        busy_us,
        pairs_per_s: pair_us.len() as f64 / (busy_us / 1e6),
    })
}

/// The 99th percentile of `samples`; `None` without samples.
pub fn p99(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 99.0)
}

/// MiB/s of a load process; 0 when no time elapsed.
fn mibps(load: &LoadReport) -> f64 {
    mib_per_s(load.bytes, load.elapsed_us).unwrap_or(0.0)
}

named_enum! {
    /// A phase of the isolation run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum QosPhase {
        /// The high-priority process alone.
        Unloaded = "unloaded",
        /// Low-priority processes writing at the same time.
        Loaded = "loaded",
    }
}

/// One phase of the isolation run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosStep {
    /// The interleaved round the phase belongs to, from 1.
    pub round: u32,
    /// The phase.
    pub phase: QosPhase,
    /// Whether QoS was on.
    pub qos: bool,
}

/// The records of one phase of the isolation run: the latency of its
/// `size`-byte high-priority writes, timed as `samples_us` while the node
/// throttled `throttled` low-priority operations, then what each load
/// process, writing `load_size` bytes at a time, reported (numbered from
/// 1); the phase's `load_mibps` adds up their throughputs. `None` without
/// samples.
pub fn qos_records(
    step: QosStep,
    (size, samples_us, throttled): (u64, &[f64], u64),
    (load_size, load): (u64, &[LoadReport]),
) -> Option<Vec<Record>> {
    let l = summarize(samples_us)?;
    let phase = step.phase.name().to_string();
    let qos = if step.qos { "on" } else { "off" }.to_string();
    let mut records = vec![Record::Qos(record::Qos {
        round: step.round,
        phase: phase.clone(),
        qos: qos.clone(),
        size,
        iters: l.count as u64,
        latency: record::Spread {
            median: l.median,
            p10: l.p10,
            p90: l.p90,
        },
        p99: p99(samples_us)?,
        min: l.min,
        max: l.max,
        stdev: l.stdev,
        loaders: load.len() as u32,
        load_size,
        load_ops: load.iter().map(|r| r.ops).sum(),
        // Not `sum()`, which makes -0.0 of nothing.
        load_mibps: load.iter().fold(0.0, |total, r| total + mibps(r)),
        throttled,
    })];
    let loaders = load.iter().zip(1..).map(|(report, loader)| {
        Record::QosLoad(record::QosLoad {
            round: step.round,
            phase: phase.clone(),
            qos: qos.clone(),
            loader,
            ops: report.ops,
            bytes: report.bytes,
            elapsed_us: report.elapsed_us,
            mibps: mibps(report),
        })
    });
    records.extend(loaders);
    Some(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn assert_close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual}, not {expected}");
    }

    #[test]
    fn process_curve_lines_carry_the_aggregate_throughput() {
        let times = (1_000_000.0, 990_000.5);
        let step = process_record(ProcessWorkload::Rpc, 64, (4, 500), times, (1, 2));
        let want = "Process(Process { workload: \"rpc\", size: 64, processes: 4, iters: 500, \
                    elapsed_us: 1000000.0, slowest_us: 990000.5, ops_per_s: 2000.0, qps: 1, \
                    mrs: 2 })";
        assert_eq!(format!("{step:?}"), want);
    }

    #[test]
    fn rpc_throughput_counts_calls_over_the_whole_series() {
        // Two threads, four calls of 100 us each, finished after 200 us.
        let durations = [100.0, 100.0, 100.0, 100.0];
        let Some(Record::RpcThroughput(load)) = rpc_throughput((64, 2, None), &durations, 200.0)
        else {
            panic!("not an RPC throughput record");
        };
        let got = (load.size, load.threads, load.depth, load.calls);
        assert_eq!(got, (64, 2, 1, 4));
        assert_close(load.calls_per_s, 20_000.0);
        assert_eq!(load.latency.median, 100.0);
        let depth8 = rpc_throughput((64, 1, Some(8)), &durations, 200.0);
        assert!(matches!(depth8, Some(Record::RpcAsync(l)) if l.depth == 8 && l.threads == 1));
        assert_eq!(rpc_throughput((64, 1, None), &[], 10.0), None);
        assert_eq!(rpc_throughput((64, 1, None), &[1.0], 0.0), None);
        for (calls, threads, each) in [(2000, 16, 125), (3, 16, 1), (10, 0, 10)] {
            assert_eq!(calls_per_thread(calls, threads), each);
        }
    }

    #[test]
    fn region_blocks_alternate_until_one_kind_is_done() {
        // Runs of operations on random regions (R) and on the first (F).
        let runs = |iters: usize| {
            let (mut random, mut first) = (0, 0);
            let mut runs: Vec<(&str, usize)> = Vec::new();
            for timed in 0..2 * iters {
                let to_first = to_first_region(timed, random, first, iters);
                let (kind, done) = if to_first {
                    ("F", &mut first)
                } else {
                    ("R", &mut random)
                };
                *done += 1;
                match runs.last_mut() {
                    Some((last, n)) if *last == kind => *n += 1,
                    _ => runs.push((kind, 1)),
                }
            }
            let runs: Vec<String> = runs.iter().map(|(kind, n)| format!("{kind}{n}")).collect();
            runs.join(" ")
        };
        // Blocks of REGION_BLOCK until the random ones have their 120.
        assert_eq!(runs(120), "R50 F50 R50 F50 R20 F20");
        assert_eq!(runs(7), "R7 F7");
    }

    #[test]
    fn region_records_carry_regions_and_p99() {
        let samples = [20.0, 10.0, 12.5];
        let Some(Record::Latency(write)) =
            region_record(Operation::RegionWrite, 64, Some(100), &samples)
        else {
            panic!("not a latency record");
        };
        assert_eq!((write.op.as_str(), write.size), ("region_write", 64));
        let got = (write.regions, write.iters, write.median);
        assert_eq!(got, (Some(100), 3, 12.5));
        assert_close(write.p99.unwrap_or_default(), 19.85);
        let create = region_record(Operation::RegionCreate, 4096, None, &samples);
        assert!(matches!(create, Some(Record::Latency(l)) if l.regions.is_none()));
        let plain = latency(Operation::Read, 8, &samples).expect("samples");
        assert_eq!(
            (plain.regions, plain.p99, plain.min, plain.max),
            (None, None, 10.0, 20.0)
        );
        assert_eq!(region_record(Operation::RegionFree, 8, None, &[]), None);
    }

    #[test]
    fn named_enums_say_their_names() {
        fn names<T>(all: &[T], name: fn(&T) -> &'static str) -> String {
            all.iter().map(name).collect::<Vec<_>>().join(" ")
        }
        let operations = "write read memset memcpy write_async read_async rpc kmsg dsm_read \
                          dsm_write dsm_write_1_reader dsm_write_2_readers dsm_read_pages fetch_add compare_swp \
                          region_write region_read region_write_first region_read_first \
                          region_create region_free";
        assert_eq!(names(&Operation::ALL, |o| o.name()), operations);
        assert_eq!(names(&ProcessWorkload::ALL, |w| w.name()), "write rpc");
        let series = "all latency regions processes";
        assert_eq!(names(&Series::ALL, |s| s.name()), series);
        assert_eq!(names(&QosPhase::ALL, |p| p.name()), "unloaded loaded");
    }

    #[test]
    fn iterations_follow_the_byte_budget() {
        let budget = 16 << 20;
        assert_eq!(throughput_iters(4096, budget, 8, 1000), 1000);
        assert_eq!(throughput_iters(65536, budget, 8, 1000), 256);
        assert_eq!(throughput_iters(1 << 20, budget, 8, 1000), 16);
        assert_eq!(throughput_iters(4 << 20, budget, 8, 1000), 8);
        assert_eq!(throughput_iters(64 << 20, budget, 8, 1000), 8);
        // Fewer iterations asked for than the minimum: the request wins.
        assert_eq!(throughput_iters(4 << 20, budget, 8, 3), 3);
        assert_eq!(throughput_iters(4096, 0, 0, 0), 1);
    }

    #[test]
    fn throughput_of_single_operations() {
        // 1 MiB operations taking 2, 1 and 4 ms: 500, 1000 and 250 MiB/s.
        let of = |size, samples: &[f64]| throughput_of_ops(Operation::Memset, size, samples);
        let t = of(1 << 20, &[2000.0, 1000.0, 4000.0]).expect("samples");
        let got = (t.op.as_str(), t.size, t.depth, t.iters);
        assert_eq!(got, ("memset", 1 << 20, None, 3));
        // 3 MiB in 7 ms.
        assert_close(t.average, 3.0 / 0.007);
        let spread = [t.median, t.p10, t.p90, t.min, t.max];
        assert_eq!(spread, [500.0, 300.0, 900.0, 250.0, 1000.0]);
        assert_eq!(of(4096, &[]), None);
        assert_eq!(of(4096, &[10.0, 0.0]), None);
    }

    #[test]
    fn throughput_of_pipelined_completions() {
        // Ten 1 MiB completions, the first five 1 ms apart, then 2 ms apart,
        // starting at t = 0 (times in ns).
        let ms = 1_000_000;
        let completions: Vec<u64> = (1..=5)
            .map(|i| i * ms)
            .chain((1..=5).map(|i| 5 * ms + 2 * i * ms))
            .collect();
        let series = |depth, completions: &[u64], groups| {
            throughput_of_completions(
                (Operation::ReadAsync, 1 << 20, depth),
                0,
                completions,
                groups,
            )
        };
        let t = series(8, &completions, 2).expect("completions");
        let got = (t.op.as_str(), t.depth, t.iters);
        assert_eq!(got, ("read_async", Some(8), 10));
        // 10 MiB in 15 ms.
        assert_close(t.average, 10.0 / 0.015);
        assert_eq!((t.max, t.min), (1000.0, 500.0));
        // Uneven groups: 10 completions in 3 groups of 4 (4 MiB in 4 ms),
        // 3 (3 MiB in 5 ms) and 3 (3 MiB in 6 ms).
        let t = series(8, &completions, 3).expect("completions");
        assert_eq!((t.max, t.median, t.min), (1000.0, 600.0, 500.0));
        // More groups than completions: one per completion (1 MiB in 1 ms,
        // then in 2 ms; one group would be 2 MiB in 3 ms).
        let t = series(8, &[ms, 3 * ms], 10).expect("two");
        assert_eq!((t.max, t.min), (1000.0, 500.0));
        assert_eq!(series(8, &[], 10), None);
        // Two completions at the same instant make an empty interval.
        assert_eq!(series(8, &[5, 5], 2), None);
        // Groups of at least a window each, at most 10.
        for (total, depth, groups) in [(1000, 1, 10), (256, 32, 8), (20, 32, 1), (0, 0, 1)] {
            assert_eq!(completion_groups(total, depth), groups);
        }
    }

    /// A fake asynchronous engine: records which ids are in flight.
    #[derive(Default)]
    struct Engine {
        last_id: u64,
        in_flight: Vec<(u64, usize)>,
        log: Vec<String>,
        fail_submit_at: Option<u64>,
        fail_reap_of: Option<u64>,
    }

    /// Runs a window of `total` operations `depth` deep on `engine`: the
    /// completion times, and the engine's log of submits and reaps.
    fn drive(engine: Engine, total: usize, depth: usize) -> (Result<Vec<u64>, String>, Engine) {
        let engine = std::cell::RefCell::new(engine);
        let mut clock = 0;
        let completions = run_window(
            total,
            depth,
            |slot| {
                let mut e = engine.borrow_mut();
                let id = e.last_id + 1;
                if e.fail_submit_at == Some(id) {
                    return Err(format!("submit {id} failed"));
                }
                let reused = e.in_flight.iter().any(|&(_, s)| s == slot);
                assert!(!reused, "slot {slot} reused while in flight");
                e.last_id = id;
                e.in_flight.push((id, slot));
                e.log.push(format!("s{id}"));
                Ok(id)
            },
            |id| {
                let mut e = engine.borrow_mut();
                let oldest = e.in_flight.remove(0);
                assert_eq!(oldest.0, id, "not reaped oldest first");
                e.log.push(format!("r{id}"));
                if e.fail_reap_of == Some(id) {
                    return Err(format!("op {id} failed"));
                }
                Ok(())
            },
            || {
                clock += 10;
                clock
            },
        );
        (completions, engine.into_inner())
    }

    #[test]
    fn window_keeps_depth_operations_in_flight() {
        let (completions, e) = drive(Engine::default(), 7, 3);
        assert_eq!(completions, Ok(vec![10, 20, 30, 40, 50, 60, 70]));
        // Never more than 3 in flight, and every one reaped.
        assert_eq!(e.log.join(" "), "s1 s2 s3 r1 s4 r2 s5 r3 s6 r4 s7 r5 r6 r7");
        let (completions, e) = drive(Engine::default(), 3, 1);
        assert_eq!(completions.map(|c| c.len()), Ok(3));
        assert_eq!(e.log.join(" "), "s1 r1 s2 r2 s3 r3");
        assert_eq!(drive(Engine::default(), 0, 4).0, Ok(vec![]));
    }

    #[test]
    fn window_drains_in_flight_operations_after_an_error() {
        // The submit or reap that fails, the depth, the error, the log.
        for (fail_submit_at, fail_reap_of, depth, error, log) in [
            (Some(4), None, 4, "submit 4 failed", "s1 s2 s3 r1 r2 r3"),
            (None, Some(2), 3, "op 2 failed", "s1 s2 s3 r1 s4 r2 r3 r4"),
        ] {
            let engine = Engine {
                fail_submit_at,
                fail_reap_of,
                ..Engine::default()
            };
            let (completions, e) = drive(engine, 10, depth);
            assert_eq!(completions, Err(error.into()));
            assert!(e.in_flight.is_empty());
            assert_eq!(e.log.join(" "), log);
        }
    }

    #[test]
    fn lock_records_carry_their_rate() {
        let record =
            |acquire: &[f64], pair: &[f64], busy| lock_record((1, 2, 1), acquire, pair, busy);
        let lock = record(&[10.0, 20.0, 30.0], &[15.0, 25.0, 35.0], 100.0).expect("samples");
        let got = (lock.contenders, lock.node, lock.home, lock.iters);
        assert_eq!(got, (1, 2, 1, 3));
        // 3 pairs in 100 us.
        assert_close(lock.pairs_per_s, 30_000.0);
        let spread = |s: record::Spread| [s.median, s.p10, s.p90];
        assert_eq!(spread(lock.acquire), [20.0, 12.0, 28.0]);
        assert_eq!(spread(lock.pair), [25.0, 17.0, 33.0]);
        assert_eq!(lock.busy_us, 100.0);
        assert_eq!(record(&[1.0], &[1.0, 2.0], 10.0), None);
        assert_eq!(record(&[1.0], &[2.0], 0.0), None);
        assert_eq!(record(&[], &[], 10.0), None);
    }

    #[test]
    fn qos_lines() {
        let load = LoadReport {
            ops: 16,
            bytes: 1 << 20,
            elapsed_us: 1e6,
        };
        let records = |round, phase, qos, load: &[LoadReport]| {
            let step = QosStep { round, phase, qos };
            qos_records(step, (64, &[10.0, 20.0, 30.0], 7), (65536, load)).expect("samples")
        };
        let loaded = records(2, QosPhase::Loaded, false, &[load; 3]);
        let Record::Qos(mut phase) = loaded[0].clone() else {
            panic!("not a QoS record: {:?}", loaded[0]);
        };
        assert_close(phase.p99, 29.8);
        phase.p99 = 29.8;
        let want = "Qos { round: 2, phase: \"loaded\", qos: \"off\", size: 64, iters: 3, \
                    latency: Spread { median: 20.0, p10: 12.0, p90: 28.0 }, p99: 29.8, min: 10.0, \
                    max: 30.0, stdev: 10.0, loaders: 3, load_size: 65536, load_ops: 48, \
                    load_mibps: 3.0, throttled: 7 }";
        assert_eq!(format!("{phase:?}"), want);
        let shares: Vec<String> = loaded[1..].iter().map(|r| format!("{r:?}")).collect();
        let share = |loader| {
            format!(
                "QosLoad(QosLoad {{ round: 2, phase: \"loaded\", qos: \"off\", loader: {loader}, \
                 ops: 16, bytes: 1048576, elapsed_us: 1000000.0, mibps: 1.0 }})"
            )
        };
        assert_eq!(shares, [share(1), share(2), share(3)]);
        let idle = LoadReport {
            elapsed_us: 0.0,
            ..load
        };
        assert_eq!(mibps(&idle), 0.0);
        let unloaded = records(1, QosPhase::Unloaded, true, &[]);
        let [Record::Qos(alone)] = &unloaded[..] else {
            panic!("not one QoS record: {unloaded:?}");
        };
        let got = (alone.phase.as_str(), alone.qos.as_str(), alone.round);
        assert_eq!(got, ("unloaded", "on", 1));
        assert_eq!((alone.loaders, alone.load_ops), (0, 0));
        // Not -0.0, which JSON would write as such.
        assert!(alone.load_mibps == 0.0 && alone.load_mibps.is_sign_positive());
        let step = QosStep {
            round: 1,
            phase: QosPhase::Loaded,
            qos: true,
        };
        assert_eq!(qos_records(step, (64, &[], 0), (65536, &[])), None);
    }

    #[test]
    fn peer_nodes_parse_and_resolve_after_joining() {
        let membership = "node 2\nincarnation 1\nepoch 3\nmanager_epoch 3\nfenced 0\n\
                          peer 1 alive incarnation 1\npeer 3 dead incarnation 1\n";
        let two = "node 1\npeer 2 alive incarnation 1\npeer 3 suspect incarnation 1\n\
                   peer 4 alive incarnation 2\n";
        // `--peer-node`, the node's id and its membership file (None:
        // unreadable): the memory node, or None for an error.
        let cases = [
            ("other", 2, Some(membership), Some(1)),
            ("this", 5, Some(membership), Some(5)),
            ("auto", 3, None, Some(1)),
            ("2", 1, None, Some(2)),
            ("other", 1, Some(two), None),
            ("other", 1, Some("node 1\n"), None),
            ("other", 1, None, None),
        ];
        for (text, me, file, want) in cases {
            let read = || file.map(str::to_string).ok_or("no file".to_string());
            let node = PeerNode::parse(text, 64).and_then(|peer| peer.resolve(me, read));
            assert_eq!(node.ok(), want, "{text} on node {me}");
        }
        for bad in ["0", "64", "Auto", "others"] {
            assert!(PeerNode::parse(bad, 64).is_err(), "{bad}");
        }
    }
}
