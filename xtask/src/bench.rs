//! `cargo xtask bench`: LITE's latency and throughput against native verbs
//! (perftest), its atomics and locks, and priority isolation.
//!
//! Two VMs run the release kernel, each pinned to its own host CPU. Node 1
//! is the perftest server, node 2 the client: first the latency tests
//! (`ib_write_lat`, `ib_read_lat`, `ib_send_lat`, and `ib_atomic_lat` with
//! fetch-and-add and compare-and-swap), then the bandwidth tests
//! (`ib_write_bw`, `ib_read_bw`, see [`bw_runs`]); both nodes then run
//! `lite-bench`, which measures latency, atomics, uncontended lock/unlock
//! pairs, memset/memcpy throughput, asynchronous write/read throughput, RPC
//! round trips and throughput, and last the isolation of a high-priority
//! process's writes from low-priority processes saturating the link, with
//! QoS off and on. A second, short phase boots [`LOCK_NODES`] VMs that all
//! take turns on one lock. Absolute numbers under TCG say little, so the
//! report compares LITE with native verbs measured on the same VMs in the
//! same run (an RPC round trip with two `ib_send_lat` one-way latencies,
//! since perftest reports half a round trip), and loaded latency with
//! unloaded latency. Every number printed is parsed from the guests' output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cluster::{self, node_ip, Cluster, ClusterSpec};
use crate::kernel::{self, Flavour};
use crate::paths::Cache;
use crate::{initramfs, interrupt, logscan, ui};

/// Message sizes measured, in bytes.
pub const SIZES: [u64; 5] = [8, 64, 512, 4096, 65536];

/// memset/memcpy sizes, in bytes.
pub const BW_SIZES: [u64; 4] = [4096, 65536, 1 << 20, 4 << 20];

/// Asynchronous write/read sizes, in bytes.
pub const ASYNC_SIZES: [u64; 2] = [4096, 65536];

/// Asynchronous operations kept in flight (perftest's `-t`).
pub const DEPTHS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Bytes moved per throughput series, LITE's and perftest's alike.
pub const BW_BYTES: u64 = 16 << 20;

/// Fewest operations per throughput series (`lite-bench`'s minimum too).
const MIN_BW_ITERS: u64 = 8;

/// perftest refuses fewer iterations than this.
const PERFTEST_MIN_ITERS: u64 = 5;

/// Upper bound for the whole benchmark run.
const TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The perftest latency test LITE's RPC is compared with (`ib_send_lat`).
const RPC_NATIVE_OP: &str = "send";

/// `lite-bench`'s RPC round trip series.
const RPC_OP: &str = "rpc";

/// perftest's `ib_atomic_lat -A` types and the `lite-bench` series each
/// is compared with.
pub const ATOMICS: [(&str, &str); 2] = [
    ("FETCH_AND_ADD", "fetch_add"),
    ("CMP_AND_SWAP", "compare_swp"),
];

/// Nodes of the lock contention phase; every one of them contends.
pub const LOCK_NODES: usize = 4;

/// Lock/unlock pairs per node in the contention phase (fewer if `--iters`
/// is lower): the phase boots four TCG-emulated VMs on two host cores.
pub const LOCK_CONTEND_ITERS: u32 = 300;

/// Upper bound for the lock contention phase.
const LOCK_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The isolation target: with QoS on, the high-priority process's median
/// write latency under load within 1.5x of its unloaded median.
const QOS_TARGET_RATIO: f64 = 1.5;

/// The RPC target: a LITE round trip within 1.2x of two `ib_send_lat`
/// one-way latencies, at every size measured on both sides.
const RPC_TARGET_RATIO: f64 = 1.2;

/// The headline target: LITE's 64-byte write within 10% of native.
const TARGET_OP: &str = "write";
const TARGET_SIZE: u64 = 64;
const TARGET_RATIO: f64 = 1.10;

/// One row of perftest's client table (microseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Native {
    /// `write` or `read`.
    pub op: String,
    /// Message size in bytes.
    pub size: u64,
    /// Iterations.
    pub iterations: u64,
    /// t_min.
    pub min: f64,
    /// t_max.
    pub max: f64,
    /// t_typical (perftest's median).
    pub typical: f64,
    /// t_avg.
    pub avg: f64,
    /// t_stdev.
    pub stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// One `LITE-BENCH` line (microseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Lite {
    /// Operation, e.g. `write`.
    pub op: String,
    /// Message size in bytes.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Standard deviation.
    pub stdev: f64,
}

/// One perftest bandwidth test client row, in MiB/s (perftest's MB/sec).
#[derive(Clone, Debug, PartialEq)]
pub struct NativeBw {
    /// `write` or `read`.
    pub op: String,
    /// Message size in bytes.
    pub size: u64,
    /// TX depth (`-t`): operations in flight.
    pub depth: u32,
    /// Iterations.
    pub iterations: u64,
    /// BW peak.
    pub peak: f64,
    /// BW average.
    pub average: f64,
    /// MsgRate in Mpps.
    pub msg_rate: f64,
}

/// One throughput `LITE-BENCH` line, in MiB/s.
#[derive(Clone, Debug, PartialEq)]
pub struct LiteBw {
    /// `memset`, `memcpy`, `write_async` or `read_async`.
    pub op: String,
    /// Size of one operation in bytes.
    pub size: u64,
    /// Operations in flight (asynchronous series only).
    pub depth: Option<u32>,
    /// Operations timed.
    pub iters: u64,
    /// Total bytes over total time.
    pub average: f64,
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
}

/// One RPC throughput `LITE-BENCH op=rpc_throughput` line.
#[derive(Clone, Debug, PartialEq)]
pub struct LiteRpcBw {
    /// Request (and reply) size in bytes.
    pub size: u64,
    /// Client threads calling at once.
    pub threads: u32,
    /// Calls completed.
    pub calls: u64,
    /// Calls per second, all threads together.
    pub calls_per_s: f64,
    /// Median round trip under this load, in microseconds.
    pub median: f64,
    /// 10th percentile round trip.
    pub p10: f64,
    /// 90th percentile round trip.
    pub p90: f64,
}

/// Median and 10th-90th percentiles of a series, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
}

/// One `LITE-LOCK` line: lock/unlock pairs of one node on one lock.
#[derive(Clone, Debug, PartialEq)]
pub struct LockRow {
    /// Nodes taking the lock at the same time (1: uncontended).
    pub contenders: u32,
    /// The node that measured.
    pub node: u32,
    /// The node that keeps the lock.
    pub home: u32,
    /// Lock/unlock pairs timed.
    pub iters: u64,
    /// Time `lite_lock` took to return.
    pub acquire: Spread,
    /// Time of `lite_lock` plus `lite_unlock`.
    pub pair: Spread,
    /// Time the node took for all its pairs, in microseconds.
    pub busy_us: f64,
    /// Pairs per second of this node.
    pub pairs_per_s: f64,
}

/// One `LITE-QOS` line: the high-priority process's write latency in one
/// phase of the isolation run.
#[derive(Clone, Debug, PartialEq)]
pub struct QosRow {
    /// `unloaded` or `loaded`.
    pub phase: String,
    /// `on` or `off`: QoS (traffic prioritization) during the phase.
    pub qos: String,
    /// Write size in bytes.
    pub size: u64,
    /// Writes timed.
    pub iters: u64,
    /// Median, 10th and 90th percentiles.
    pub latency: Spread,
    /// 99th percentile.
    pub p99: f64,
    /// Low-priority processes writing during the phase.
    pub loaders: u32,
    /// Size of each of their writes in bytes.
    pub load_size: u64,
    /// Their writes completed.
    pub load_ops: u64,
    /// Their throughput, all together, in MiB/s.
    pub load_mibps: f64,
    /// Low-priority operations the node throttled during the phase.
    pub throttled: u64,
}

/// One perftest bandwidth run: `ib_<op>_bw -s size -t depth -n iters`.
#[derive(Clone, Debug, PartialEq)]
pub struct BwRun {
    /// `write` or `read`.
    pub op: &'static str,
    /// Message size in bytes.
    pub size: u64,
    /// TX depth.
    pub depth: u32,
    /// Iterations.
    pub iters: u64,
}

/// Operations per throughput series of `size`-byte operations: [`BW_BYTES`]
/// worth, at least [`MIN_BW_ITERS`], at most `iters` (which wins). The same
/// rule as `lite_tools::bench::throughput_iters`, which `lite-bench` uses
/// with the same budget.
pub fn bw_iters(size: u64, iters: u32) -> u64 {
    (BW_BYTES / size.max(1))
        .max(MIN_BW_ITERS)
        .min(u64::from(iters))
        .max(1)
}

/// The perftest bandwidth runs, in order: `ib_write_bw` for every
/// asynchronous size at every depth, `ib_write_bw -t 1` for the remaining
/// memset/memcpy sizes (the baseline for one operation at a time), then
/// `ib_read_bw` for every asynchronous size at every depth.
pub fn bw_runs(iters: u32) -> Vec<BwRun> {
    let run = |op, size, depth| BwRun {
        op,
        size,
        depth,
        iters: bw_iters(size, iters).max(PERFTEST_MIN_ITERS),
    };
    let sweep = |op| {
        ASYNC_SIZES
            .iter()
            .flat_map(move |&size| DEPTHS.iter().map(move |&depth| run(op, size, depth)))
    };
    let mut runs: Vec<BwRun> = sweep("write").collect();
    for size in BW_SIZES {
        if !runs.iter().any(|r| r.size == size && r.depth == 1) {
            runs.push(run("write", size, 1));
        }
    }
    runs.extend(sweep("read"));
    runs
}

/// The kernel command line parameters of the throughput measurements
/// (read by the guest's /init).
pub fn bw_params(iters: u32) -> Vec<String> {
    let list = |values: &[u64]| {
        values
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let runs: Vec<String> = bw_runs(iters)
        .iter()
        .map(|r| format!("{}:{}:{}:{}", r.op, r.size, r.depth, r.iters))
        .collect();
    let depths: Vec<u64> = DEPTHS.iter().copied().map(u64::from).collect();
    vec![
        format!("lite.bwruns={}", runs.join(",")),
        format!("lite.bwsizes={}", list(&BW_SIZES)),
        format!("lite.asyncsizes={}", list(&ASYNC_SIZES)),
        format!("lite.depths={}", list(&depths)),
        format!("lite.bwbytes={BW_BYTES}"),
    ]
}

/// Everything parsed from the guest logs of a benchmark run.
#[derive(Default)]
struct Measurements {
    native: Vec<Native>,
    native_bw: Vec<NativeBw>,
    lite: BTreeMap<(String, u64), Lite>,
    lite_bw: BTreeMap<(String, u64, Option<u32>), LiteBw>,
    lite_rpc_bw: BTreeMap<(u64, u32), LiteRpcBw>,
    locks: BTreeMap<(u32, u32, u32), LockRow>,
    lock_samples: BTreeMap<(u32, u32), Vec<f64>>,
    qos: BTreeMap<(String, String), QosRow>,
    problems: Vec<String>,
}

impl Measurements {
    /// Adds what the console log `text` of node `name` holds. Where several
    /// nodes report the same series, the first node's numbers are kept.
    fn add_log(&mut self, name: &str, text: &str) {
        self.native.extend(parse_perftest(text));
        self.native_bw.extend(parse_perftest_bw(text));
        for row in parse_lite_bench(text) {
            self.lite.entry((row.op.clone(), row.size)).or_insert(row);
        }
        for row in parse_lite_throughput(text) {
            self.lite_bw
                .entry((row.op.clone(), row.size, row.depth))
                .or_insert(row);
        }
        for row in parse_lite_rpc_throughput(text) {
            self.lite_rpc_bw
                .entry((row.size, row.threads))
                .or_insert(row);
        }
        for row in parse_lite_lock(text) {
            self.locks
                .entry((row.contenders, row.node, row.home))
                .or_insert(row);
        }
        for (key, samples) in parse_lock_samples(text) {
            self.lock_samples.entry(key).or_default().extend(samples);
        }
        for row in parse_lite_qos(text) {
            self.qos
                .entry((row.phase.clone(), row.qos.clone()))
                .or_insert(row);
        }
        self.problems.extend(
            logscan::problems(text)
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }

    /// Adds the logs of every node of a finished cluster, each named
    /// `prefix` + its node name.
    fn add_logs(&mut self, prefix: &str, node_logs: &NodeLogs) {
        for (name, path) in node_logs {
            let text =
                String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
            self.add_log(&format!("{prefix}{name}"), &text);
        }
    }

    fn is_empty(&self) -> bool {
        self.native.is_empty()
            && self.native_bw.is_empty()
            && self.lite.is_empty()
            && self.lite_bw.is_empty()
            && self.lite_rpc_bw.is_empty()
            && self.locks.is_empty()
            && self.qos.is_empty()
    }
}

/// Node names and their console logs, in node order.
type NodeLogs = Vec<(String, PathBuf)>;

/// Boots `spec`, waits up to `timeout` for every VM and returns the node
/// logs with the outcome of the wait.
fn boot(spec: &ClusterSpec, timeout: Duration) -> Result<(NodeLogs, Result<()>)> {
    let mut cluster = Cluster::start(spec)?;
    let waited = cluster.wait(timeout, &mut || {});
    let node_logs = cluster.node_logs();
    drop(cluster);
    Ok((node_logs, waited))
}

/// `cargo xtask bench`.
pub fn run(iters: u32, kernel_src: Option<&Path>, kernel_image: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let kernel = kernel::image(&cache, Flavour::Release, kernel_src, kernel_image)?;
    let initrd = initramfs::build(&cache, initramfs::Variant::Full)?;
    let manager = cluster::build_manager(&cache)?;
    let logs = cache.run_logs("bench")?;
    let sizes: Vec<String> = SIZES.iter().map(u64::to_string).collect();
    let extra = |i: usize| {
        let mut args = vec![
            format!("lite.iters={iters}"),
            format!("lite.sizes={}", sizes.join(",")),
        ];
        args.extend(bw_params(iters));
        if i == 2 {
            args.push(format!("lite.peer={}", node_ip(1)));
        }
        args
    };
    let spec = ClusterSpec {
        roles: vec!["bench-native-server".into(), "bench-native-client".into()],
        kernel: &kernel,
        initrd: &initrd,
        memory_mib: 512,
        extra_append: &extra,
        pin_cpus: true,
        manager: &manager,
        logs: &logs,
    };
    let (node_logs, waited) = boot(&spec, TIMEOUT)?;
    let mut m = Measurements::default();
    m.add_logs("", &node_logs);
    let native = &m.native;
    let lite: Vec<Lite> = m.lite.values().cloned().collect();
    let lite_bw: Vec<LiteBw> = m.lite_bw.values().cloned().collect();
    let lite_rpc_bw: Vec<LiteRpcBw> = m.lite_rpc_bw.values().cloned().collect();
    let qos: Vec<QosRow> = m.qos.values().cloned().collect();

    ui::say(&format!(
        "==> results ({iters} iterations, times in microseconds)"
    ));
    for line in table(native, &lite) {
        ui::say(&format!("    {line}"));
    }
    ui::say(&format!("    {}", target_verdict(native, &lite)));
    ui::say("==> atomics on an 8-byte LMR on the other node (times in microseconds)");
    for line in atomic_table(native, &lite) {
        ui::say(&format!("    {line}"));
    }
    ui::say(&format!(
        "==> throughput (MiB/s; up to {iters} operations or {} MiB per series)",
        BW_BYTES >> 20
    ));
    for line in bw_table(&m.native_bw, &lite_bw) {
        ui::say(&format!("    {line}"));
    }
    ui::say("==> RPC (times in microseconds)");
    for line in rpc_table(native, &lite) {
        ui::say(&format!("    {line}"));
    }
    ui::say(&format!("    {}", rpc_target_verdict(native, &lite)));
    for line in rpc_throughput_table(&lite_rpc_bw) {
        ui::say(&format!("    {line}"));
    }
    ui::say("==> isolation: a high-priority process's write latency (times in microseconds)");
    for line in qos_table(&qos) {
        ui::say(&format!("    {line}"));
    }
    ui::say(&format!("    {}", qos_verdict(&qos)));

    // The contention phase: a cluster of its own, short.
    let lock_iters = iters.min(LOCK_CONTEND_ITERS);
    let lock_logs = logs.join("locks");
    let lock_extra = |_: usize| vec![format!("lite.lockiters={lock_iters}")];
    let lock_spec = ClusterSpec {
        roles: vec!["bench-lock".into(); LOCK_NODES],
        extra_append: &lock_extra,
        logs: &lock_logs,
        ..spec
    };
    let lock_waited = interrupt::check()
        .and_then(|()| {
            std::fs::create_dir_all(&lock_logs)
                .with_context(|| format!("cannot create {}", lock_logs.display()))
        })
        .and_then(|()| boot(&lock_spec, LOCK_TIMEOUT))
        .and_then(|(node_logs, waited)| {
            m.add_logs("locks/", &node_logs);
            waited
        });
    let locks: Vec<LockRow> = m.locks.values().cloned().collect();
    ui::say(&format!(
        "==> locks (lock/unlock pairs: {iters} uncontended, {lock_iters} per node with \
         {LOCK_NODES} nodes contending; times in microseconds)"
    ));
    for line in lock_table(&locks, &m.lock_samples) {
        ui::say(&format!("    {line}"));
    }

    ui::say(&format!("    logs: {}", logs.display()));
    for problem in &m.problems {
        ui::say(&format!("    problem: {problem}"));
    }
    waited?;
    lock_waited.context("the lock contention phase")?;
    if m.is_empty() {
        bail!("no measurements found in the guest logs");
    }
    if !m.problems.is_empty() {
        bail!(
            "the benchmark run had {} problems (see above)",
            m.problems.len()
        );
    }
    Ok(())
}

/// The client blocks of a guest log: the fields of each
/// `LITE-PERFTEST-BEGIN test=ib_X size=N ... side=client` line and the lines
/// up to the matching `LITE-PERFTEST-END`. A block that never ends (the
/// guest died in it) is dropped.
fn perftest_client_blocks(log: &str) -> Vec<(BTreeMap<String, String>, Vec<&str>)> {
    let mut out = Vec::new();
    let mut block: Option<(BTreeMap<String, String>, Vec<&str>)> = None;
    for line in log.lines().map(logscan::strip_timestamp) {
        if let Some(rest) = line.strip_prefix("LITE-PERFTEST-BEGIN ") {
            let fields = key_values(rest);
            block = (fields.get("side").map(String::as_str) == Some("client"))
                .then(|| (fields, Vec::new()));
        } else if line.starts_with("LITE-PERFTEST-END ") {
            out.extend(block.take());
        } else if let Some((_, lines)) = &mut block {
            lines.push(line);
        }
    }
    out
}

/// perftest latency client results, from the blocks the guest brackets with
/// `LITE-PERFTEST-BEGIN test=ib_X_lat size=N side=client` / `LITE-PERFTEST-END`.
/// The last valid table row of a block wins (earlier tries may have failed).
/// `ib_atomic_lat` blocks carry `atomic=FETCH_AND_ADD` or
/// `atomic=CMP_AND_SWAP` and are named after the LITE series they are
/// compared with ([`ATOMICS`]).
pub fn parse_perftest(log: &str) -> Vec<Native> {
    let mut out = Vec::new();
    for (fields, lines) in perftest_client_blocks(log) {
        let op = match fields.get("test").map(String::as_str) {
            Some("ib_atomic_lat") => fields.get("atomic").and_then(|kind| {
                ATOMICS
                    .iter()
                    .find(|(flag, _)| flag == kind)
                    .map(|&(_, op)| op)
            }),
            test => test.and_then(perftest_op),
        };
        let size: Option<u64> = fields.get("size").and_then(|s| s.parse().ok());
        let (Some(op), Some(size)) = (op, size) else {
            continue;
        };
        let last = lines
            .iter()
            .filter_map(|line| perftest_row::<9>(line))
            .rfind(|row| row[0] == size as f64);
        out.extend(last.map(|row| Native {
            op: op.to_string(),
            size,
            iterations: row[1] as u64,
            min: row[2],
            max: row[3],
            typical: row[4],
            avg: row[5],
            stdev: row[6],
            p99: row[7],
            p999: row[8],
        }));
    }
    out
}

/// perftest bandwidth client results, from the blocks bracketed with
/// `LITE-PERFTEST-BEGIN test=ib_X_bw size=N depth=D ... side=client` /
/// `LITE-PERFTEST-END`: the row under `#bytes #iterations BW peak[MB/sec]
/// BW average[MB/sec] MsgRate[Mpps]`. The last valid row of a block wins.
pub fn parse_perftest_bw(log: &str) -> Vec<NativeBw> {
    let mut out = Vec::new();
    for (fields, lines) in perftest_client_blocks(log) {
        let op = fields
            .get("test")
            .and_then(|t| t.strip_prefix("ib_")?.strip_suffix("_bw"));
        let size: Option<u64> = fields.get("size").and_then(|s| s.parse().ok());
        let depth: Option<u32> = fields.get("depth").and_then(|s| s.parse().ok());
        let (Some(op), Some(size), Some(depth)) = (op, size, depth) else {
            continue;
        };
        // Gb/sec (--report_gbits) would need converting; never asked for.
        let mut gbits = false;
        let mut last = None;
        for line in &lines {
            if line.contains("#bytes") {
                gbits = line.contains("Gb/sec");
            } else if let Some(row) = perftest_row::<5>(line) {
                if row[0] == size as f64 && !gbits {
                    last = Some(row);
                }
            }
        }
        out.extend(last.map(|row| NativeBw {
            op: op.to_string(),
            size,
            depth,
            iterations: row[1] as u64,
            peak: row[2],
            average: row[3],
            msg_rate: row[4],
        }));
    }
    out
}

/// `ib_write_lat` → `write`.
fn perftest_op(test: &str) -> Option<&str> {
    test.strip_prefix("ib_")?.strip_suffix("_lat")
}

/// The `N` numbers of a perftest table row (9 for latency, 5 for
/// bandwidth); `None` for headers, separators, rows of another width and
/// rows with `inf`/`nan` (failed clock calibration, the server side). The
/// first column (bytes) must be an integer.
fn perftest_row<const N: usize>(line: &str) -> Option<[f64; N]> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() != N || fields[0].parse::<u64>().is_err() {
        return None;
    }
    let mut row = [0.0; N];
    for (slot, field) in row.iter_mut().zip(&fields) {
        let value: f64 = field.parse().ok()?;
        if !value.is_finite() || value < 0.0 {
            return None;
        }
        *slot = value;
    }
    Some(row)
}

/// `LITE-BENCH op=write size=64 iters=1000 median_us=.. p10_us=.. p90_us=..
/// min_us=.. max_us=.. stdev_us=..` lines; malformed lines are skipped.
pub fn parse_lite_bench(log: &str) -> Vec<Lite> {
    log.lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("LITE-BENCH ")?;
            let kv = key_values(rest);
            let num = |key: &str| -> Option<f64> {
                kv.get(key)?.parse::<f64>().ok().filter(|v| v.is_finite())
            };
            Some(Lite {
                op: kv.get("op")?.clone(),
                size: kv.get("size")?.parse().ok()?,
                iters: kv.get("iters")?.parse().ok()?,
                median: num("median_us")?,
                p10: num("p10_us")?,
                p90: num("p90_us")?,
                min: num("min_us")?,
                max: num("max_us")?,
                stdev: num("stdev_us")?,
            })
        })
        .collect()
}

/// Throughput `LITE-BENCH op=memset size=4096 [depth=8] iters=.. mibps_avg=..
/// mibps_median=.. mibps_p10=.. mibps_p90=.. ..` lines; malformed lines are
/// skipped (as are the latency lines).
pub fn parse_lite_throughput(log: &str) -> Vec<LiteBw> {
    log.lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("LITE-BENCH ")?;
            let kv = key_values(rest);
            let num = |key: &str| -> Option<f64> {
                kv.get(key)?.parse::<f64>().ok().filter(|v| v.is_finite())
            };
            let depth = match kv.get("depth") {
                Some(depth) => Some(depth.parse().ok()?),
                None => None,
            };
            Some(LiteBw {
                op: kv.get("op")?.clone(),
                size: kv.get("size")?.parse().ok()?,
                depth,
                iters: kv.get("iters")?.parse().ok()?,
                average: num("mibps_avg")?,
                median: num("mibps_median")?,
                p10: num("mibps_p10")?,
                p90: num("mibps_p90")?,
            })
        })
        .collect()
}

/// `LITE-BENCH op=rpc_throughput size=64 threads=4 calls=.. calls_per_s=..
/// median_us=.. p10_us=.. p90_us=..` lines; malformed lines are skipped.
pub fn parse_lite_rpc_throughput(log: &str) -> Vec<LiteRpcBw> {
    log.lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once("LITE-BENCH ")?;
            let kv = key_values(rest);
            if kv.get("op")? != "rpc_throughput" {
                return None;
            }
            let num = |key: &str| -> Option<f64> {
                kv.get(key)?.parse::<f64>().ok().filter(|v| v.is_finite())
            };
            Some(LiteRpcBw {
                size: kv.get("size")?.parse().ok()?,
                threads: kv.get("threads")?.parse().ok()?,
                calls: kv.get("calls")?.parse().ok()?,
                calls_per_s: num("calls_per_s")?,
                median: num("median_us")?,
                p10: num("p10_us")?,
                p90: num("p90_us")?,
            })
        })
        .collect()
}

/// The fields after `tag` (e.g. `"LITE-LOCK "`) on every line that has it.
fn tagged_lines<'a>(
    log: &'a str,
    tag: &'a str,
) -> impl Iterator<Item = BTreeMap<String, String>> + 'a {
    log.lines()
        .filter_map(move |line| line.split_once(tag).map(|(_, rest)| key_values(rest)))
}

/// A finite number under `key`.
fn number(kv: &BTreeMap<String, String>, key: &str) -> Option<f64> {
    kv.get(key)?.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// An integer under `key`.
fn integer<T: std::str::FromStr>(kv: &BTreeMap<String, String>, key: &str) -> Option<T> {
    kv.get(key)?.parse().ok()
}

/// The `PREFIX_median_us`, `PREFIX_p10_us` and `PREFIX_p90_us` fields
/// (`median_us` and so on for an empty prefix).
fn spread(kv: &BTreeMap<String, String>, prefix: &str) -> Option<Spread> {
    Some(Spread {
        median: number(kv, &format!("{prefix}median_us"))?,
        p10: number(kv, &format!("{prefix}p10_us"))?,
        p90: number(kv, &format!("{prefix}p90_us"))?,
    })
}

/// `LITE-LOCK contenders=1 node=2 home=1 iters=.. acquire_median_us=..
/// acquire_p10_us=.. acquire_p90_us=.. pair_median_us=.. pair_p10_us=..
/// pair_p90_us=.. busy_us=.. pairs_per_s=..` lines; malformed lines are
/// skipped.
pub fn parse_lite_lock(log: &str) -> Vec<LockRow> {
    tagged_lines(log, "LITE-LOCK ")
        .filter_map(|kv| {
            Some(LockRow {
                contenders: integer(&kv, "contenders")?,
                node: integer(&kv, "node")?,
                home: integer(&kv, "home")?,
                iters: integer(&kv, "iters")?,
                acquire: spread(&kv, "acquire_")?,
                pair: spread(&kv, "pair_")?,
                busy_us: number(&kv, "busy_us")?,
                pairs_per_s: number(&kv, "pairs_per_s")?,
            })
        })
        .collect()
}

/// The raw lock-acquire times of `LITE-LOCK-SAMPLES contenders=4 node=2
/// acquire_us=12.50,13.00,..` lines, by (contenders, node), in log order.
/// A line with any value that is not a finite number is skipped whole.
pub fn parse_lock_samples(log: &str) -> BTreeMap<(u32, u32), Vec<f64>> {
    let mut out: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
    for kv in tagged_lines(log, "LITE-LOCK-SAMPLES ") {
        let (Some(contenders), Some(node), Some(values)) = (
            integer(&kv, "contenders"),
            integer(&kv, "node"),
            kv.get("acquire_us"),
        ) else {
            continue;
        };
        let values: Option<Vec<f64>> = values
            .split(',')
            .map(|v| v.parse::<f64>().ok().filter(|v| v.is_finite()))
            .collect();
        if let Some(values) = values {
            out.entry((contenders, node)).or_default().extend(values);
        }
    }
    out
}

/// `LITE-QOS phase=unloaded|loaded qos=on|off size=64 iters=.. median_us=..
/// p10_us=.. p90_us=.. p99_us=.. .. loaders=3 load_size=65536 load_ops=..
/// load_mibps=.. throttled=..` lines; malformed lines are skipped.
pub fn parse_lite_qos(log: &str) -> Vec<QosRow> {
    tagged_lines(log, "LITE-QOS ")
        .filter_map(|kv| {
            Some(QosRow {
                phase: kv.get("phase")?.clone(),
                qos: kv.get("qos")?.clone(),
                size: integer(&kv, "size")?,
                iters: integer(&kv, "iters")?,
                latency: spread(&kv, "")?,
                p99: number(&kv, "p99_us")?,
                loaders: integer(&kv, "loaders")?,
                load_size: integer(&kv, "load_size")?,
                load_ops: integer(&kv, "load_ops")?,
                load_mibps: number(&kv, "load_mibps")?,
                throttled: integer(&kv, "throttled")?,
            })
        })
        .collect()
}

/// `a=1 b=x` into a map.
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The comparison table, one string per line.
pub fn table(native: &[Native], lite: &[Lite]) -> Vec<String> {
    // RPC and atomics have tables of their own.
    let mut keys: Vec<(String, u64)> = native
        .iter()
        .map(|n| (n.op.clone(), n.size))
        .chain(lite.iter().map(|l| (l.op.clone(), l.size)))
        .filter(|(op, _)| op != RPC_NATIVE_OP && op != RPC_OP && !is_atomic(op))
        .collect();
    keys.sort();
    keys.dedup();
    let row = |cells: [&str; 7]| {
        table_row(
            &[
                left(6),
                right(7),
                right(13),
                right(12),
                right(11),
                right(19),
                right(11),
            ],
            &cells,
        )
    };
    let mut lines = vec![row([
        "op",
        "size",
        "native med",
        "native sd",
        "LITE med",
        "LITE p10-p90",
        "LITE/native",
    ])];
    for (op, size) in keys {
        let n = native.iter().find(|n| n.op == op && n.size == size);
        let l = lite.iter().find(|l| l.op == op && l.size == size);
        lines.push(row([
            &op,
            &size.to_string(),
            &cell(n.map(|n| n.typical)),
            &cell(n.map(|n| n.stdev)),
            &cell(l.map(|l| l.median)),
            &range_cell(l.map(|l| (l.p10, l.p90))),
            &ratio_cell(l.map(|l| l.median), n.map(|n| n.typical)),
        ]));
    }
    lines
}

/// The perftest run a LITE throughput series is compared with: memset and
/// memcpy (one operation at a time) with `ib_write_bw -t 1`, asynchronous
/// writes and reads with `ib_write_bw` / `ib_read_bw` at `-t` = depth.
fn native_counterpart(op: &str, depth: Option<u32>) -> Option<(&'static str, u32)> {
    match (op, depth) {
        ("memset" | "memcpy", None) => Some(("write", 1)),
        ("write_async", Some(depth)) => Some(("write", depth)),
        ("read_async", Some(depth)) => Some(("read", depth)),
        _ => None,
    }
}

/// The throughput comparison table, one string per line: a row for every
/// planned series ([`BW_SIZES`], [`ASYNC_SIZES`] × [`DEPTHS`]) and for any
/// other series LITE reported, `-` where a measurement is missing.
pub fn bw_table(native: &[NativeBw], lite: &[LiteBw]) -> Vec<String> {
    let mut keys: Vec<(String, u64, Option<u32>)> = Vec::new();
    for op in ["memset", "memcpy"] {
        keys.extend(BW_SIZES.iter().map(|&size| (op.to_string(), size, None)));
    }
    for op in ["write_async", "read_async"] {
        for size in ASYNC_SIZES {
            keys.extend(DEPTHS.iter().map(|&d| (op.to_string(), size, Some(d))));
        }
    }
    for l in lite {
        let key = (l.op.clone(), l.size, l.depth);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let row = |cells: [&str; 9]| {
        table_row(
            &[
                left(11),
                right(7),
                right(5),
                left(17).apart(),
                right(10),
                right(9),
                right(9),
                right(19),
                right(11),
            ],
            &cells,
        )
    };
    let mut lines = vec![
        "native: perftest BW average with -t (TX depth) = LITE's operations in flight,".to_string(),
        "1 for memset/memcpy (one at a time); LITE/native = LITE avg / native avg".to_string(),
        row([
            "op",
            "size",
            "depth",
            "native",
            "native avg",
            "LITE avg",
            "LITE med",
            "LITE p10-p90",
            "LITE/native",
        ]),
    ];
    for (op, size, depth) in keys {
        let l = lite
            .iter()
            .find(|l| l.op == op && l.size == size && l.depth == depth);
        let counterpart = native_counterpart(&op, depth);
        let n = counterpart.and_then(|(test, d)| {
            native
                .iter()
                .find(|n| n.op == test && n.size == size && n.depth == d)
        });
        let test = counterpart.map_or("-".to_string(), |(test, d)| format!("ib_{test}_bw -t {d}"));
        lines.push(row([
            &op,
            &size.to_string(),
            &depth.map_or("1".to_string(), |d| d.to_string()),
            &test,
            &cell(n.map(|n| n.average)),
            &cell(l.map(|l| l.average)),
            &cell(l.map(|l| l.median)),
            &range_cell(l.map(|l| (l.p10, l.p90))),
            &ratio_cell(l.map(|l| l.average), n.map(|n| n.average)),
        ]));
    }
    lines
}

/// The RPC round trip table, one string per line: for every size either
/// side measured, `ib_send_lat`'s t_typical (half a round trip), twice
/// that, LITE's RPC median and spread, and LITE / (2 x native).
pub fn rpc_table(native: &[Native], lite: &[Lite]) -> Vec<String> {
    let mut sizes: Vec<u64> = native
        .iter()
        .filter(|n| n.op == RPC_NATIVE_OP)
        .map(|n| n.size)
        .chain(lite.iter().filter(|l| l.op == RPC_OP).map(|l| l.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let row = |cells: [&str; 6]| {
        table_row(
            &[
                right(7),
                right(16),
                right(12),
                right(12),
                right(19),
                right(15),
            ],
            &cells,
        )
    };
    let mut lines = vec![
        "native: ib_send_lat t_typical is half a round trip; an RPC is a whole one".to_string(),
        row([
            "size",
            "ib_send_lat typ",
            "2 x native",
            "LITE RPC med",
            "LITE p10-p90",
            "LITE/(2x nat)",
        ]),
    ];
    for size in sizes {
        let n = native
            .iter()
            .find(|n| n.op == RPC_NATIVE_OP && n.size == size);
        let l = lite.iter().find(|l| l.op == RPC_OP && l.size == size);
        let round_trip = n.map(|n| 2.0 * n.typical);
        lines.push(row([
            &size.to_string(),
            &cell(n.map(|n| n.typical)),
            &cell(round_trip),
            &cell(l.map(|l| l.median)),
            &range_cell(l.map(|l| (l.p10, l.p90))),
            &ratio_cell(l.map(|l| l.median), round_trip),
        ]));
    }
    lines
}

/// Whether every RPC round trip is within [`RPC_TARGET_RATIO`] of two
/// `ib_send_lat` one-way latencies, naming the worst size.
pub fn rpc_target_verdict(native: &[Native], lite: &[Lite]) -> String {
    let what = format!("RPC target (LITE/(2x ib_send_lat) <= {RPC_TARGET_RATIO:.2} at every size)");
    let worst = lite
        .iter()
        .filter(|l| l.op == RPC_OP)
        .filter_map(|l| {
            let n = native
                .iter()
                .find(|n| n.op == RPC_NATIVE_OP && n.size == l.size)?;
            (n.typical > 0.0).then(|| (l.median / (2.0 * n.typical), l.size))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((ratio, size)) => {
            let verdict = if ratio <= RPC_TARGET_RATIO {
                "met"
            } else {
                "NOT met"
            };
            format!("{what}: {verdict} (worst {ratio:.2} at {size} B)")
        }
        None => format!("{what}: not evaluated, a measurement is missing"),
    }
}

/// The RPC throughput table, one string per line, by size and threads.
pub fn rpc_throughput_table(rows: &[LiteRpcBw]) -> Vec<String> {
    let row = |cells: [&str; 6]| {
        table_row(
            &[
                right(7),
                right(8),
                right(8),
                right(12),
                right(12),
                right(19),
            ],
            &cells,
        )
    };
    let mut lines = vec![row([
        "size",
        "threads",
        "calls",
        "calls/s",
        "RPC med",
        "RPC p10-p90",
    ])];
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| (r.size, r.threads));
    for r in rows {
        lines.push(row([
            &r.size.to_string(),
            &r.threads.to_string(),
            &r.calls.to_string(),
            &format!("{:.2}", r.calls_per_s),
            &format!("{:.2}", r.median),
            &range_cell(Some((r.p10, r.p90))),
        ]));
    }
    lines
}

/// Whether `op` is one of LITE's atomic series.
fn is_atomic(op: &str) -> bool {
    ATOMICS.iter().any(|&(_, atomic)| atomic == op)
}

/// Two decimals, or `-`.
fn cell(value: Option<f64>) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.2}"))
}

/// `p10-p90`, or `-`.
fn spread_cell(spread: Option<&Spread>) -> String {
    range_cell(spread.map(|s| (s.p10, s.p90)))
}

/// `low-high` with two decimals each, or `-`.
fn range_cell(range: Option<(f64, f64)>) -> String {
    range.map_or("-".to_string(), |(low, high)| format!("{low:.2}-{high:.2}"))
}

/// How one column of a report table is laid out.
#[derive(Clone, Copy)]
struct Column {
    /// Spaces before it (none before the first column).
    gap: usize,
    /// Characters it is padded to.
    width: usize,
    /// Padded on the right rather than the left.
    left: bool,
}

/// A right-aligned column one space after the previous one.
const fn right(width: usize) -> Column {
    Column {
        gap: 1,
        width,
        left: false,
    }
}

/// A left-aligned column one space after the previous one.
const fn left(width: usize) -> Column {
    Column {
        gap: 1,
        width,
        left: true,
    }
}

impl Column {
    /// The column two spaces after the previous one.
    const fn apart(self) -> Column {
        Column { gap: 2, ..self }
    }
}

/// One line of a report table: `cells` laid out in `columns`.
fn table_row(columns: &[Column], cells: &[&str]) -> String {
    let mut line = String::new();
    for (i, (column, cell)) in columns.iter().zip(cells).enumerate() {
        if i > 0 {
            line.push_str(&" ".repeat(column.gap));
        }
        let width = column.width;
        line.push_str(&if column.left {
            format!("{cell:<width$}")
        } else {
            format!("{cell:>width$}")
        });
    }
    line
}

/// `a / b` with two decimals, or `-` without both or with `b` not positive.
fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_string(),
    }
}

/// The `p`-th percentile (0..=100) of ascending `sorted`, interpolated
/// linearly between the closest ranks as `lite-bench` does.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (below, above) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[below] + (sorted[above] - sorted[below]) * (rank - below as f64))
}

/// Median and 10th-90th percentiles of `samples`.
fn spread_of(samples: &[f64]) -> Option<Spread> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(Spread {
        median: percentile(&sorted, 50.0)?,
        p10: percentile(&sorted, 10.0)?,
        p90: percentile(&sorted, 90.0)?,
    })
}

/// The atomics table, one string per line: for each of [`ATOMICS`],
/// `ib_atomic_lat`'s t_typical and stdev next to LITE's median and spread,
/// and the LITE/native ratio.
pub fn atomic_table(native: &[Native], lite: &[Lite]) -> Vec<String> {
    let row = |cells: [&str; 8]| {
        table_row(
            &[
                left(12),
                right(5),
                left(30).apart(),
                right(11),
                right(10),
                right(10),
                right(19),
                right(11),
            ],
            &cells,
        )
    };
    let mut lines = vec![row([
        "op",
        "size",
        "native",
        "native med",
        "native sd",
        "LITE med",
        "LITE p10-p90",
        "LITE/native",
    ])];
    for (flag, op) in ATOMICS {
        let n = native.iter().find(|n| n.op == op);
        let l = lite.iter().find(|l| l.op == op);
        let size = n.map(|n| n.size).or(l.map(|l| l.size));
        lines.push(row([
            op,
            &size.map_or("-".to_string(), |s| s.to_string()),
            &format!("ib_atomic_lat -A {flag}"),
            &cell(n.map(|n| n.typical)),
            &cell(n.map(|n| n.stdev)),
            &cell(l.map(|l| l.median)),
            &spread_cell(
                l.map(|l| Spread {
                    median: l.median,
                    p10: l.p10,
                    p90: l.p90,
                })
                .as_ref(),
            ),
            &ratio_cell(l.map(|l| l.median), n.map(|n| n.typical)),
        ]));
    }
    lines
}

/// The lock table, one string per line: a row per `LITE-LOCK` line
/// (uncontended first), and for every contended series an `all` row with
/// the median and spread of every node's acquire times together (from the
/// `LITE-LOCK-SAMPLES` lines) and the pairs per second of all nodes
/// together: every pair over the longest time a node took.
pub fn lock_table(rows: &[LockRow], samples: &BTreeMap<(u32, u32), Vec<f64>>) -> Vec<String> {
    let row = |cells: [&str; 9]| {
        table_row(
            &[
                right(10),
                right(5),
                left(9).apart(),
                right(6),
                right(12),
                right(19),
                right(10),
                right(19),
                right(10),
            ],
            &cells,
        )
    };
    let mut lines = vec![
        "acquire: lite_lock alone; pair: lite_lock + lite_unlock; home: the node keeping the lock"
            .to_string(),
        row([
            "contenders",
            "node",
            "home",
            "pairs",
            "acquire med",
            "acquire p10-p90",
            "pair med",
            "pair p10-p90",
            "pairs/s",
        ]),
    ];
    if rows.is_empty() {
        lines.push("(no LITE-LOCK lines in the guest logs)".to_string());
        return lines;
    }
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| (r.contenders, r.node, r.home));
    let mut groups: Vec<u32> = rows.iter().map(|r| r.contenders).collect();
    groups.dedup();
    let mut notes = Vec::new();
    for contenders in groups {
        let group: Vec<&LockRow> = rows.iter().filter(|r| r.contenders == contenders).collect();
        for r in &group {
            let home = if r.home == r.node {
                format!("{} (local)", r.home)
            } else {
                r.home.to_string()
            };
            lines.push(row([
                &r.contenders.to_string(),
                &r.node.to_string(),
                &home,
                &r.iters.to_string(),
                &format!("{:.2}", r.acquire.median),
                &spread_cell(Some(&r.acquire)),
                &format!("{:.2}", r.pair.median),
                &spread_cell(Some(&r.pair)),
                &format!("{:.2}", r.pairs_per_s),
            ]));
        }
        if contenders < 2 {
            continue;
        }
        let pairs: u64 = group.iter().map(|r| r.iters).sum();
        let longest = group.iter().map(|r| r.busy_us).fold(0.0, f64::max);
        let all: Vec<f64> = group
            .iter()
            .flat_map(|r| samples.get(&(contenders, r.node)).into_iter().flatten())
            .copied()
            .collect();
        let overall = spread_of(&all);
        let mut homes: Vec<u32> = group.iter().map(|r| r.home).collect();
        homes.dedup();
        let home = match homes[..] {
            [home] => home.to_string(),
            _ => "-".to_string(),
        };
        lines.push(row([
            &contenders.to_string(),
            "all",
            &home,
            &pairs.to_string(),
            &cell(overall.map(|s| s.median)),
            &spread_cell(overall.as_ref()),
            "-",
            "-",
            &ratio_cell(Some(pairs as f64 * 1e6), Some(longest)),
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

/// The isolation phases in the order of the table: (phase, QoS).
const QOS_PHASES: [(&str, &str); 3] = [("unloaded", "on"), ("loaded", "off"), ("loaded", "on")];

/// The isolation table, one string per line: the high-priority process's
/// write latency in each phase, its ratios to the unloaded figures, and
/// the low-priority processes' throughput.
pub fn qos_table(rows: &[QosRow]) -> Vec<String> {
    let find = |phase: &str, qos: &str| rows.iter().find(|r| r.phase == phase && r.qos == qos);
    let unloaded = find("unloaded", "on");
    let row = |cells: [&str; 12]| {
        table_row(
            &[
                left(9),
                left(4),
                right(7),
                right(6),
                right(10),
                right(10),
                right(19),
                right(9),
                right(9),
                right(13),
                right(9),
                right(9),
            ],
            &cells,
        )
    };
    let mut lines = Vec::new();
    if let Some(r) = rows.iter().find(|r| r.loaders > 0).or(rows.first()) {
        lines.push(format!(
            "high priority: {} B lite_rdma_write; load: {} low-priority processes writing {} B \
             in a loop; ratios: loaded / unloaded",
            r.size, r.loaders, r.load_size
        ));
    }
    lines.push(row([
        "phase",
        "QoS",
        "loaders",
        "writes",
        "median",
        "p99",
        "p10-p90",
        "med ratio",
        "p99 ratio",
        "low-prio MiB/s",
        "low ops",
        "throttled",
    ]));
    for (phase, qos) in QOS_PHASES {
        let r = find(phase, qos);
        let base = if phase == "unloaded" { None } else { unloaded };
        let loaded = r.filter(|r| r.loaders > 0);
        lines.push(row([
            phase,
            qos,
            &r.map_or("-".to_string(), |r| r.loaders.to_string()),
            &r.map_or("-".to_string(), |r| r.iters.to_string()),
            &cell(r.map(|r| r.latency.median)),
            &cell(r.map(|r| r.p99)),
            &spread_cell(r.map(|r| &r.latency)),
            &ratio_cell(r.map(|r| r.latency.median), base.map(|b| b.latency.median)),
            &ratio_cell(r.map(|r| r.p99), base.map(|b| b.p99)),
            &cell(loaded.map(|r| r.load_mibps)),
            &loaded.map_or("-".to_string(), |r| r.load_ops.to_string()),
            &r.map_or("-".to_string(), |r| r.throttled.to_string()),
        ]));
    }
    lines
}

/// Whether, with QoS on, the high-priority median under load is within
/// [`QOS_TARGET_RATIO`] of the unloaded median; the QoS-off ratio beside.
pub fn qos_verdict(rows: &[QosRow]) -> String {
    let median = |phase: &str, qos: &str| {
        rows.iter()
            .find(|r| r.phase == phase && r.qos == qos)
            .map(|r| r.latency.median)
    };
    let unloaded = median("unloaded", "on").filter(|&u| u > 0.0);
    let ratio = |loaded: Option<f64>| Some(loaded? / unloaded?);
    let off = ratio(median("loaded", "off")).map_or("-".to_string(), |r| format!("{r:.2}"));
    let what =
        format!("isolation target (loaded/unloaded median <= {QOS_TARGET_RATIO:.2} with QoS on)");
    match ratio(median("loaded", "on")) {
        Some(on) => {
            let verdict = if on <= QOS_TARGET_RATIO {
                "met"
            } else {
                "NOT met"
            };
            format!("{what}: {verdict} ({on:.2}); with QoS off: {off}")
        }
        None => format!("{what}: not evaluated, a measurement is missing; with QoS off: {off}"),
    }
}

/// Whether LITE's 64-byte write median is within 10% of native's.
pub fn target_verdict(native: &[Native], lite: &[Lite]) -> String {
    let n = native
        .iter()
        .find(|n| n.op == TARGET_OP && n.size == TARGET_SIZE);
    let l = lite
        .iter()
        .find(|l| l.op == TARGET_OP && l.size == TARGET_SIZE);
    match (n, l) {
        (Some(n), Some(l)) if n.typical > 0.0 => {
            let ratio = l.median / n.typical;
            let verdict = if ratio <= TARGET_RATIO { "met" } else { "NOT met" };
            format!(
                "target (LITE/native <= {TARGET_RATIO:.2} for {TARGET_SIZE} B {TARGET_OP}): {verdict} ({ratio:.2})"
            )
        }
        _ => format!(
            "target (LITE/native <= {TARGET_RATIO:.2} for {TARGET_SIZE} B {TARGET_OP}): not evaluated, \
             a measurement is missing"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client
Couldn't connect to 10.77.0.1:18515
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client
---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF\t\tDevice         : rxe0
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          1523.45        4012.00      1987.50            2011.13        210.44         \t3020.00    \t4012.00  
---------------------------------------------------------------------------------------
LITE-PERFTEST-END test=ib_write_lat size=64 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_read_lat size=8 side=client
 8       1000          1.00        2.00      1.50            1.60        0.10         \t1.90    \t2.00
LITE-PERFTEST-END test=ib_read_lat size=8 side=client rc=0
LITE-BENCH op=write size=64 iters=1000 median_us=2100.5 p10_us=1900 p90_us=2500.25 min_us=1500 max_us=5000 stdev_us=300
LITE-BENCH op=write size=64 iters=oops median_us=1
";

    const SERVER: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=server
 64      1000          inf        inf      inf            inf        inf         \tinf    \tinf
LITE-PERFTEST-END test=ib_write_lat size=64 side=server rc=0
";

    #[test]
    fn parses_the_client_table_only() {
        let rows = parse_perftest(CLIENT);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].op, "write");
        assert_eq!(rows[0].size, 64);
        assert_eq!(rows[0].iterations, 1000);
        assert_eq!(rows[0].typical, 1987.5);
        assert_eq!(rows[0].stdev, 210.44);
        assert_eq!(rows[0].p999, 4012.0);
        assert_eq!(rows[1].op, "read");
        assert!(parse_perftest(SERVER).is_empty());
    }

    #[test]
    fn parses_lite_bench_lines_and_skips_malformed_ones() {
        let rows = parse_lite_bench(CLIENT);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].op, "write");
        assert_eq!(rows[0].median, 2100.5);
        assert_eq!(rows[0].p90, 2500.25);
    }

    #[test]
    fn reports_ratio_and_target() {
        let native = parse_perftest(CLIENT);
        let lite = parse_lite_bench(CLIENT);
        let table = table(&native, &lite);
        assert_eq!(table.len(), 3);
        assert!(table[1].starts_with("read "), "{table:?}");
        assert!(table[2].contains("1987.50") && table[2].contains("1900.00-2500.25"));
        assert!(table[2].trim_end().ends_with("1.06"), "{table:?}");
        assert!(target_verdict(&native, &lite).contains(": met (1.06)"));
        let slow = vec![Lite {
            median: 2400.0,
            ..lite[0].clone()
        }];
        assert!(target_verdict(&native, &slow).contains("NOT met (1.21)"));
        assert!(target_verdict(&native, &[]).contains("not evaluated"));
    }

    /// perftest 4.5 bandwidth output as the guest logs it: a round with
    /// failed clock calibration, then a good one; a read test; the server.
    const BW_CLIENT: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=8 iters=1000 side=client
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : rxe0
 Number of qps   : 1\t\tTransport type : IB
 TX depth        : 8
 CQ Moderation   : 8
 Mtu             : 1024[B]
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x0011 PSN 0x2ddf57 RKey 0x000343 VAddr 0x0055b79eea0000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       1000             inf                nan\t\t   nan
---------------------------------------------------------------------------------------
LITE-PERFTEST: no valid timing in round 1, measuring again
Couldn't connect to 10.77.0.1:18515
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       1000             25.31              21.47  \t\t   0.005496
---------------------------------------------------------------------------------------
LITE-PERFTEST-END test=ib_write_bw size=4096 depth=8 side=client rc=0
[   12.345678] LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=1 iters=1000 side=client
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       1000             9.80               8.00  \t\t   0.002048
LITE-PERFTEST-END test=ib_write_bw size=4096 depth=1 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_read_bw size=65536 depth=32 iters=256 side=client
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
 65536      256              80.00              64.00  \t\t   0.001024
LITE-PERFTEST-END test=ib_read_bw size=65536 depth=32 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_read_bw size=4096 depth=2 iters=1000 side=client
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 4096       1000             0.20               0.17  \t\t   0.005496
LITE-PERFTEST-END test=ib_read_bw size=4096 depth=2 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_write_bw size=65536 depth=1 iters=256 side=client
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      256              30.00              20.00  \t\t   0.000320
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client
 64      1000          1.00        2.00      1.50            1.60        0.10         \t1.90    \t2.00
LITE-PERFTEST-END test=ib_write_lat size=64 side=client rc=0
LITE-BENCH op=write size=64 iters=1000 median_us=2100.5 p10_us=1900 p90_us=2500.25 min_us=1500 max_us=5000 stdev_us=300
LITE-BENCH op=memset size=4096 iters=1000 mibps_avg=10.00 mibps_median=11.00 mibps_p10=9.00 mibps_p90=12.50 mibps_min=5.00 mibps_max=13.00
LITE-BENCH op=write_async size=4096 depth=8 iters=1000 mibps_avg=19.32 mibps_median=19.00 mibps_p10=18.00 mibps_p90=20.00 mibps_min=17.00 mibps_max=21.00
LITE-BENCH op=read_async size=65536 depth=32 iters=256 mibps_avg=48.00 mibps_median=50.00 mibps_p10=40.00 mibps_p90=55.00 mibps_min=30.00 mibps_max=60.00
LITE-BENCH op=read_async size=65536 depth=x iters=256 mibps_avg=48.00 mibps_median=50.00 mibps_p10=40.00 mibps_p90=55.00
LITE-BENCH op=memcpy size=4096 iters=1000 mibps_avg=inf mibps_median=50.00 mibps_p10=40.00 mibps_p90=55.00
";

    const BW_SERVER: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=8 iters=1000 side=server
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       1000             25.31              21.47  \t\t   0.005496
LITE-PERFTEST-END test=ib_write_bw size=4096 depth=8 side=server rc=0
";

    #[test]
    fn plans_the_perftest_bandwidth_runs() {
        let runs = bw_runs(1000);
        // 2 sizes x 6 depths per direction, plus 1 MiB and 4 MiB at depth 1.
        assert_eq!(runs.len(), 2 * 6 + 2 + 2 * 6);
        assert_eq!(
            runs[0],
            BwRun {
                op: "write",
                size: 4096,
                depth: 1,
                iters: 1000
            }
        );
        assert_eq!(runs[11].size, 65536);
        assert_eq!((runs[11].depth, runs[11].iters), (32, 256));
        assert_eq!(
            (runs[12].size, runs[12].depth, runs[12].iters),
            (1 << 20, 1, 16)
        );
        assert_eq!(
            (runs[13].size, runs[13].depth, runs[13].iters),
            (4 << 20, 1, 8)
        );
        assert!(runs[14..].iter().all(|r| r.op == "read"));
        // Every memset/memcpy size has its depth 1 write baseline.
        for size in BW_SIZES {
            assert!(runs
                .iter()
                .any(|r| r.op == "write" && r.size == size && r.depth == 1));
        }
        // perftest's minimum iteration count.
        assert!(bw_runs(2).iter().all(|r| r.iters == 5));
        assert_eq!(bw_iters(4096, 2), 2);

        let params = bw_params(1000);
        assert!(params[0].starts_with("lite.bwruns=write:4096:1:1000,write:4096:2:1000,"));
        assert!(params[0].ends_with(",read:65536:32:256"));
        assert!(params.contains(&"lite.bwsizes=4096,65536,1048576,4194304".to_string()));
        assert!(params.contains(&"lite.asyncsizes=4096,65536".to_string()));
        assert!(params.contains(&"lite.depths=1,2,4,8,16,32".to_string()));
        assert!(params.contains(&"lite.bwbytes=16777216".to_string()));
        // No spaces: each is one kernel command line word.
        assert!(params.iter().all(|p| !p.contains(' ')));
    }

    #[test]
    fn parses_perftest_bandwidth_client_rows() {
        let rows = parse_perftest_bw(BW_CLIENT);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(
            rows[0],
            NativeBw {
                op: "write".into(),
                size: 4096,
                depth: 8,
                iterations: 1000,
                peak: 25.31,
                average: 21.47,
                msg_rate: 0.005496,
            }
        );
        assert_eq!((rows[1].depth, rows[1].average), (1, 8.0));
        // Newer perftest says MiB/sec for the same unit.
        assert_eq!(rows[2].op, "read");
        assert_eq!(
            (rows[2].size, rows[2].depth, rows[2].average),
            (65536, 32, 64.0)
        );
        // Gb/sec rows and the unfinished block are left out, as is the server.
        assert!(parse_perftest_bw(BW_SERVER).is_empty());
        // The latency parser ignores bandwidth blocks and vice versa.
        let lat = parse_perftest(BW_CLIENT);
        assert_eq!(lat.len(), 1);
        assert_eq!(lat[0].typical, 1.5);
        assert!(parse_perftest_bw(CLIENT).is_empty());
    }

    /// perftest's `ib_send_lat` client table and `lite-bench`'s RPC lines.
    const RPC_LOG: &str = "\
LITE-PERFTEST-BEGIN test=ib_send_lat size=64 side=client
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          800.00        3000.00      1000.00            1100.00        150.00         \t2500.00    \t3000.00  
LITE-PERFTEST-END test=ib_send_lat size=64 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_send_lat size=8 side=client
 8       1000          700.00        2000.00      900.00            950.00        100.00         \t1900.00    \t2000.00
LITE-PERFTEST-END test=ib_send_lat size=8 side=client rc=0
LITE-BENCH op=rpc size=64 iters=1000 median_us=2500.00 p10_us=2300.00 p90_us=2900.50 min_us=2000 max_us=9000 stdev_us=400
LITE-BENCH op=rpc size=512 iters=1000 median_us=2600.00 p10_us=2400.00 p90_us=3000.00 min_us=2100 max_us=9100 stdev_us=410
LITE-BENCH op=write size=64 iters=1000 median_us=1100 p10_us=1000 p90_us=1300 min_us=900 max_us=5000 stdev_us=100
LITE-BENCH op=rpc_throughput size=64 threads=4 calls=2000 calls_per_s=1234.50 median_us=3000.00 p10_us=2800.00 p90_us=3500.00
LITE-BENCH op=rpc_throughput size=64 threads=1 calls=2000 calls_per_s=400.00 median_us=2500.00 p10_us=2400.00 p90_us=2600.00
LITE-BENCH op=rpc_throughput size=64 threads=x calls=2000 calls_per_s=400.00 median_us=2500.00 p10_us=2400.00 p90_us=2600.00
";

    #[test]
    fn compares_rpc_round_trips_with_two_ib_send_lat_one_ways() {
        let native = parse_perftest(RPC_LOG);
        assert_eq!(native.len(), 2);
        assert_eq!((native[0].op.as_str(), native[0].typical), ("send", 1000.0));
        let lite = parse_lite_bench(RPC_LOG);
        let table = rpc_table(&native, &lite);
        // Explanation, column names, then sizes 8, 64 and 512.
        assert_eq!(table.len(), 5, "{table:#?}");
        let fields = |line: &str| {
            line.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(&table[2]), ["8", "900.00", "1800.00", "-", "-", "-"]);
        // 2500 / (2 x 1000).
        assert_eq!(
            fields(&table[3]),
            [
                "64",
                "1000.00",
                "2000.00",
                "2500.00",
                "2300.00-2900.50",
                "1.25"
            ]
        );
        assert_eq!(fields(&table[4])[..4], ["512", "-", "-", "2600.00"]);
        // Only 64 B is measured on both sides: 2500 / 2000.
        assert_eq!(
            rpc_target_verdict(&native, &lite),
            "RPC target (LITE/(2x ib_send_lat) <= 1.20 at every size): NOT met (worst 1.25 at 64 B)"
        );
        let fast: Vec<Lite> = lite
            .iter()
            .map(|l| Lite {
                median: 2300.0,
                ..l.clone()
            })
            .collect();
        assert!(rpc_target_verdict(&native, &fast).ends_with(": met (worst 1.15 at 64 B)"));
        assert!(
            rpc_target_verdict(&native, &[]).ends_with("not evaluated, a measurement is missing")
        );
        // The latency table leaves RPC and ib_send_lat out.
        let main = super::table(&native, &lite);
        assert_eq!(main.len(), 2, "{main:#?}");
        assert!(main[1].starts_with("write "));
    }

    #[test]
    fn parses_rpc_throughput_lines_only() {
        let rows = parse_lite_rpc_throughput(RPC_LOG);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            rows[0],
            LiteRpcBw {
                size: 64,
                threads: 4,
                calls: 2000,
                calls_per_s: 1234.5,
                median: 3000.0,
                p10: 2800.0,
                p90: 3500.0,
            }
        );
        // Neither a latency nor a throughput line of the other kinds.
        assert!(parse_lite_throughput(RPC_LOG).is_empty());
        assert_eq!(parse_lite_bench(RPC_LOG).len(), 3);
        let table = rpc_throughput_table(&rows);
        assert_eq!(table.len(), 3);
        // Sorted by threads.
        assert!(table[1].split_whitespace().eq([
            "64",
            "1",
            "2000",
            "400.00",
            "2500.00",
            "2400.00-2600.00"
        ]));
        assert!(table[2].contains("1234.50"));
    }

    #[test]
    fn parses_lite_throughput_lines_only() {
        let rows = parse_lite_throughput(BW_CLIENT);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(
            rows[0],
            LiteBw {
                op: "memset".into(),
                size: 4096,
                depth: None,
                iters: 1000,
                average: 10.0,
                median: 11.0,
                p10: 9.0,
                p90: 12.5,
            }
        );
        assert_eq!(rows[1].depth, Some(8));
        assert_eq!(
            (rows[2].op.as_str(), rows[2].depth),
            ("read_async", Some(32))
        );
        // Latency lines are not throughput lines and the reverse.
        assert_eq!(parse_lite_bench(BW_CLIENT).len(), 1);
    }

    #[test]
    fn throughput_table_compares_with_the_matching_perftest_run() {
        let native = parse_perftest_bw(BW_CLIENT);
        let lite = parse_lite_throughput(BW_CLIENT);
        let table = bw_table(&native, &lite);
        // Two header lines, the column names, then every planned series.
        assert_eq!(table.len(), 3 + 2 * 4 + 2 * 2 * 6, "{table:#?}");
        assert!(table[0].contains("-t (TX depth)"));
        let find = |prefix: &str, size: &str, depth: &str| {
            table
                .iter()
                .find(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 3 && f[0] == prefix && f[1] == size && f[2] == depth
                })
                .cloned()
                .unwrap_or_else(|| panic!("no {prefix} {size} {depth} row in {table:#?}"))
        };
        // memset 4 KiB against ib_write_bw -t 1 (8.00): 10 / 8.
        let memset = find("memset", "4096", "1");
        assert!(memset.contains("ib_write_bw -t 1"), "{memset}");
        assert!(memset.contains("9.00-12.50"), "{memset}");
        assert!(memset.trim_end().ends_with("1.25"), "{memset}");
        // write_async at depth 8 against ib_write_bw -t 8: 19.32 / 21.47.
        let write = find("write_async", "4096", "8");
        assert!(write.contains("ib_write_bw -t 8") && write.contains("21.47"));
        assert!(write.trim_end().ends_with("0.90"), "{write}");
        // read_async at depth 32 against ib_read_bw -t 32: 48 / 64.
        let read = find("read_async", "65536", "32");
        assert!(read.contains("ib_read_bw -t 32"));
        assert!(read.trim_end().ends_with("0.75"), "{read}");
        // memcpy has no valid LITE line; 4 MiB has neither measurement.
        let memcpy = find("memcpy", "4096", "1");
        assert!(memcpy.contains("8.00") && memcpy.trim_end().ends_with('-'));
        let big = find("memset", "4194304", "1");
        let fields: Vec<&str> = big.split_whitespace().collect();
        assert_eq!(fields[3..6], ["ib_write_bw", "-t", "1"], "{big}");
        assert!(fields[6..].iter().all(|&f| f == "-"), "{big}");
        assert_eq!(fields.len(), 11, "{big}");
        // A series outside the plan still gets a row.
        let extra = vec![LiteBw {
            op: "write_async".into(),
            size: 512,
            depth: Some(3),
            ..lite[0].clone()
        }];
        let table = bw_table(&[], &extra);
        assert!(table
            .last()
            .is_some_and(|l| l.starts_with("write_async     512     3")));
    }

    /// `ib_atomic_lat` client blocks (one of an unknown type) and
    /// `lite-bench`'s atomic series.
    const ATOMIC_LOG: &str = "\
LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=FETCH_AND_ADD side=client
---------------------------------------------------------------------------------------
                    Atomic FETCH_AND_ADD Latency Test
 Dual-port       : OFF\t\tDevice         : rxe0
 Outstand reads  : 128
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 8       1000          900.00        3000.00      1000.00            1100.00        120.00         \t2500.00    \t3000.00  
---------------------------------------------------------------------------------------
LITE-PERFTEST-END test=ib_atomic_lat size=8 atomic=FETCH_AND_ADD side=client rc=0
LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=CMP_AND_SWAP side=client
 8       1000          950.00        3100.00      1050.00            1150.00        130.00         \t2600.00    \t3100.00
LITE-PERFTEST-END test=ib_atomic_lat size=8 atomic=CMP_AND_SWAP side=client rc=0
LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=MASKED side=client
 8       1000          1.00        2.00      1.50            1.60        0.10         \t1.90    \t2.00
LITE-PERFTEST-END test=ib_atomic_lat size=8 atomic=MASKED side=client rc=0
LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=CMP_AND_SWAP side=server
 8       1000          inf        inf      inf            inf        inf         \tinf    \tinf
LITE-PERFTEST-END test=ib_atomic_lat size=8 atomic=CMP_AND_SWAP side=server rc=0
LITE-BENCH op=fetch_add size=8 iters=1000 median_us=1200.00 p10_us=1100.00 p90_us=1500.00 min_us=1000.00 max_us=4000.00 stdev_us=150.00
LITE-BENCH op=write size=64 iters=1000 median_us=1100 p10_us=1000 p90_us=1300 min_us=900 max_us=5000 stdev_us=100
";

    #[test]
    fn parses_ib_atomic_lat_by_atomic_type() {
        let native = parse_perftest(ATOMIC_LOG);
        assert_eq!(native.len(), 2, "{native:?}");
        assert_eq!(
            (native[0].op.as_str(), native[0].size, native[0].typical),
            ("fetch_add", 8, 1000.0)
        );
        assert_eq!(native[0].stdev, 120.0);
        assert_eq!(
            (native[1].op.as_str(), native[1].typical),
            ("compare_swp", 1050.0)
        );
        // The latency table leaves the atomics to their own table.
        let lite = parse_lite_bench(ATOMIC_LOG);
        let main = table(&native, &lite);
        assert_eq!(main.len(), 2, "{main:#?}");
        assert!(main[1].starts_with("write "));
    }

    #[test]
    fn atomic_table_compares_with_ib_atomic_lat() {
        let native = parse_perftest(ATOMIC_LOG);
        let lite = parse_lite_bench(ATOMIC_LOG);
        let table = atomic_table(&native, &lite);
        assert_eq!(table.len(), 3, "{table:#?}");
        assert!(table[0].contains("LITE/native"));
        let fields: Vec<&str> = table[1].split_whitespace().collect();
        // 1200 / 1000.
        assert_eq!(
            fields,
            [
                "fetch_add",
                "8",
                "ib_atomic_lat",
                "-A",
                "FETCH_AND_ADD",
                "1000.00",
                "120.00",
                "1200.00",
                "1100.00-1500.00",
                "1.20"
            ]
        );
        // No LITE compare_swp series: native only.
        let fields: Vec<&str> = table[2].split_whitespace().collect();
        assert_eq!(
            fields[..6],
            [
                "compare_swp",
                "8",
                "ib_atomic_lat",
                "-A",
                "CMP_AND_SWAP",
                "1050.00"
            ]
        );
        assert!(fields[7..].iter().all(|&f| f == "-"), "{fields:?}");
        // Nothing at all: both rows, all dashes.
        let empty = atomic_table(&[], &[]);
        assert_eq!(empty.len(), 3);
        assert!(empty[2].split_whitespace().skip(5).all(|f| f == "-"));
    }

    /// Lock lines of both phases: uncontended from node 2, contended from
    /// four nodes with their raw acquire times (one line of node 3 broken
    /// by a kernel message).
    const LOCK_LOG: &str = "\
LITE-LOCK contenders=1 node=2 home=1 iters=1000 acquire_median_us=800.00 acquire_p10_us=700.00 acquire_p90_us=900.00 pair_median_us=1600.00 pair_p10_us=1500.00 pair_p90_us=1800.00 busy_us=1700000.00 pairs_per_s=588.24
LITE-LOCK contenders=1 node=2 home=2 iters=1000 acquire_median_us=300.00 acquire_p10_us=250.00 acquire_p90_us=350.00 pair_median_us=600.00 pair_p10_us=550.00 pair_p90_us=700.00 busy_us=650000.00 pairs_per_s=1538.46
LITE-LOCK contenders=1 node=2 home=1 iters=oops acquire_median_us=1
LITE-LOCK contenders=4 node=1 home=1 iters=4 acquire_median_us=10.00 acquire_p10_us=5.00 acquire_p90_us=20.00 pair_median_us=15.00 pair_p10_us=9.00 pair_p90_us=25.00 busy_us=800.00 pairs_per_s=5000.00
LITE-LOCK-SAMPLES contenders=4 node=1 acquire_us=1.00,2.00
LITE-LOCK-SAMPLES contenders=4 node=1 acquire_us=3.00,4.00
[   42.000000] LITE-LOCK contenders=4 node=3 home=1 iters=4 acquire_median_us=50.00 acquire_p10_us=40.00 acquire_p90_us=60.00 pair_median_us=55.00 pair_p10_us=45.00 pair_p90_us=65.00 busy_us=1000.00 pairs_per_s=4000.00
LITE-LOCK-SAMPLES contenders=4 node=3 acquire_us=5.00,6.00
LITE-LOCK-SAMPLES contenders=4 node=3 acquire_us=7.00,8.0rxe0: some kernel message
LITE-LOCK-SAMPLES contenders=4 node=x acquire_us=9.00
";

    #[test]
    fn parses_lock_lines_and_samples() {
        let rows = parse_lite_lock(LOCK_LOG);
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(
            rows[0],
            LockRow {
                contenders: 1,
                node: 2,
                home: 1,
                iters: 1000,
                acquire: Spread {
                    median: 800.0,
                    p10: 700.0,
                    p90: 900.0
                },
                pair: Spread {
                    median: 1600.0,
                    p10: 1500.0,
                    p90: 1800.0
                },
                busy_us: 1_700_000.0,
                pairs_per_s: 588.24,
            }
        );
        assert_eq!((rows[3].node, rows[3].busy_us), (3, 1000.0));
        let samples = parse_lock_samples(LOCK_LOG);
        assert_eq!(samples.len(), 2, "{samples:?}");
        assert_eq!(samples[&(4, 1)], [1.0, 2.0, 3.0, 4.0]);
        // The broken line is dropped whole.
        assert_eq!(samples[&(4, 3)], [5.0, 6.0]);
        // Other parsers leave lock lines alone.
        assert!(parse_lite_bench(LOCK_LOG).is_empty());
        assert!(parse_lite_throughput(LOCK_LOG).is_empty());
        assert!(parse_lite_qos(LOCK_LOG).is_empty());
    }

    #[test]
    fn lock_table_adds_an_overall_row_per_contended_series() {
        let rows = parse_lite_lock(LOCK_LOG);
        let samples = parse_lock_samples(LOCK_LOG);
        let table = lock_table(&rows, &samples);
        let fields = |line: &str| {
            line.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        // Explanation, column names, 2 uncontended, 2 contended, all, note.
        assert_eq!(table.len(), 8, "{table:#?}");
        assert_eq!(
            fields(&table[2]),
            [
                "1",
                "2",
                "1",
                "1000",
                "800.00",
                "700.00-900.00",
                "1600.00",
                "1500.00-1800.00",
                "588.24"
            ]
        );
        assert_eq!(fields(&table[3])[..4], ["1", "2", "2", "(local)"]);
        assert_eq!(fields(&table[4])[..4], ["4", "1", "1", "(local)"]);
        assert_eq!(fields(&table[5])[..3], ["4", "3", "1"]);
        // Samples 1..6 together: median 3.5, p10 1.5, p90 5.5; 8 pairs
        // over the longest node's 1000 us.
        assert_eq!(
            fields(&table[6]),
            [
                "4",
                "all",
                "1",
                "8",
                "3.50",
                "1.50-5.50",
                "-",
                "-",
                "8000.00"
            ]
        );
        assert_eq!(
            table.last().map(String::as_str),
            Some("note: 4 contenders: 6 of 8 acquire times were readable in the logs")
        );
        // Complete samples: no note.
        let mut complete = samples.clone();
        if let Some(node3) = complete.get_mut(&(4, 3)) {
            node3.extend([7.0, 8.0]);
        }
        let table = lock_table(&rows, &complete);
        assert_eq!(table.len(), 7);
        assert_eq!(fields(&table[6])[4..6], ["4.50", "1.70-7.30"]);
        // Nothing measured.
        let empty = lock_table(&[], &BTreeMap::new());
        assert_eq!(empty.len(), 3);
        assert!(empty[2].contains("no LITE-LOCK lines"));
    }

    #[test]
    fn percentiles_interpolate_as_lite_bench_does() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.5));
        assert_eq!(percentile(&[5.0], 90.0), Some(5.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
        let s = spread_of(&[4.0, 1.0, 3.0, 2.0]).expect("samples");
        assert_eq!(s.median, 2.5);
        assert!(
            (s.p10 - 1.3).abs() < 1e-9 && (s.p90 - 3.7).abs() < 1e-9,
            "{s:?}"
        );
        assert_eq!(spread_of(&[]), None);
    }

    /// The isolation run's phase lines and its load lines.
    const QOS_LOG: &str = "\
LITE-QOS phase=unloaded qos=on size=64 iters=1000 median_us=1000.00 p10_us=900.00 p90_us=1200.00 p99_us=2000.00 min_us=800.00 max_us=3000.00 stdev_us=100.00 loaders=0 load_size=65536 load_ops=0 load_mibps=0.00 throttled=0
LITE-QOS phase=loaded qos=off size=64 iters=1000 median_us=4000.00 p10_us=3000.00 p90_us=6000.00 p99_us=9000.00 min_us=900.00 max_us=12000.00 stdev_us=900.00 loaders=3 load_size=65536 load_ops=900 load_mibps=30.00 throttled=0
LITE-QOS-LOAD phase=loaded qos=off loader=1 ops=300 bytes=19660800 elapsed_us=2000000.00 mibps=10.00
LITE-QOS phase=loaded qos=on size=64 iters=1000 median_us=1300.00 p10_us=1000.00 p90_us=1600.00 p99_us=2600.00 min_us=850.00 max_us=5000.00 stdev_us=200.00 loaders=3 load_size=65536 load_ops=150 load_mibps=5.50 throttled=140
LITE-QOS phase=loaded qos=on size=64 iters=1000 median_us=nan p10_us=1 p90_us=1 p99_us=1 loaders=3 load_size=65536 load_ops=1 load_mibps=1 throttled=1
";

    #[test]
    fn parses_qos_lines_only() {
        let rows = parse_lite_qos(QOS_LOG);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(
            rows[1],
            QosRow {
                phase: "loaded".into(),
                qos: "off".into(),
                size: 64,
                iters: 1000,
                latency: Spread {
                    median: 4000.0,
                    p10: 3000.0,
                    p90: 6000.0
                },
                p99: 9000.0,
                loaders: 3,
                load_size: 65536,
                load_ops: 900,
                load_mibps: 30.0,
                throttled: 0,
            }
        );
        assert_eq!((rows[2].qos.as_str(), rows[2].throttled), ("on", 140));
        // Not latency, throughput or lock lines.
        assert!(parse_lite_bench(QOS_LOG).is_empty());
        assert!(parse_lite_throughput(QOS_LOG).is_empty());
        assert!(parse_lite_lock(QOS_LOG).is_empty());
    }

    #[test]
    fn qos_table_and_verdict() {
        let rows = parse_lite_qos(QOS_LOG);
        let table = qos_table(&rows);
        assert_eq!(table.len(), 5, "{table:#?}");
        assert!(table[0].contains("64 B lite_rdma_write"), "{table:#?}");
        assert!(table[0].contains("3 low-priority processes writing 65536 B"));
        let fields = |line: &str| {
            line.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fields(&table[2]),
            [
                "unloaded",
                "on",
                "0",
                "1000",
                "1000.00",
                "2000.00",
                "900.00-1200.00",
                "-",
                "-",
                "-",
                "-",
                "0"
            ]
        );
        // 4000 / 1000 and 9000 / 2000.
        assert_eq!(
            fields(&table[3]),
            [
                "loaded",
                "off",
                "3",
                "1000",
                "4000.00",
                "9000.00",
                "3000.00-6000.00",
                "4.00",
                "4.50",
                "30.00",
                "900",
                "0"
            ]
        );
        assert_eq!(
            fields(&table[4])[7..],
            ["1.30", "1.30", "5.50", "150", "140"]
        );
        assert_eq!(
            qos_verdict(&rows),
            "isolation target (loaded/unloaded median <= 1.50 with QoS on): met (1.30); with QoS off: 4.00"
        );
        let slow: Vec<QosRow> = rows
            .iter()
            .cloned()
            .map(|mut r| {
                if r.qos == "on" && r.phase == "loaded" {
                    r.latency.median = 1600.0;
                }
                r
            })
            .collect();
        assert!(qos_verdict(&slow).contains(": NOT met (1.60); with QoS off: 4.00"));
        // Without the QoS-on phase: not evaluated, QoS off still shown.
        let partial = &rows[..2];
        assert_eq!(
            qos_verdict(partial),
            "isolation target (loaded/unloaded median <= 1.50 with QoS on): not evaluated, \
             a measurement is missing; with QoS off: 4.00"
        );
        assert!(qos_verdict(&[]).ends_with("with QoS off: -"));
        // Missing phases are rows of dashes.
        let table = qos_table(partial);
        assert!(
            fields(&table[4])[2..].iter().all(|f| f == "-"),
            "{table:#?}"
        );
        let table = qos_table(&[]);
        assert_eq!(table.len(), 4);
    }

    #[test]
    fn measurements_keep_the_first_node_and_count_every_kind() {
        let mut m = Measurements::default();
        assert!(m.is_empty());
        let log = format!("{LOCK_LOG}{QOS_LOG}{ATOMIC_LOG}LITE-GUEST-EXIT rc=0\n");
        m.add_log("node2", &log);
        m.add_log("locks/node3", &format!("{LOCK_LOG}LITE-GUEST-EXIT rc=1\n"));
        assert!(!m.is_empty());
        assert_eq!(m.locks.len(), 4);
        assert_eq!(m.qos.len(), 3);
        assert_eq!(m.native.len(), 2);
        assert_eq!(m.lite.len(), 2);
        // Samples from several logs add up.
        assert_eq!(m.lock_samples[&(4, 1)].len(), 8);
        assert_eq!(m.problems, ["locks/node3: guest role exited with rc=1"]);
    }

    #[test]
    fn the_guest_script_runs_what_the_report_expects() {
        let init = include_str!("init.sh");
        // Both sides run ib_atomic_lat with every atomic type compared.
        let flags: Vec<&str> = ATOMICS.iter().map(|&(flag, _)| flag).collect();
        assert!(
            init.contains(&format!("for atomic in {}; do", flags.join(" "))),
            "init.sh must loop over {flags:?}"
        );
        assert!(init.contains("test=ib_atomic_lat size=8 atomic=$atomic side=$side"));
        // The contention phase's role and parameter.
        assert!(init.contains("bench-lock) lite-bench --cm \"$cm\" --contend \"$nodes\""));
        assert!(init.contains("lite.lockiters=*) lockiters=${arg#lite.lockiters=} ;;"));
    }
}
