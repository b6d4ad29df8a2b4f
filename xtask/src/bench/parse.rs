//! Turning the guests' console output into typed measurements: the
//! benchmark records that `lite-bench` and the native verbs baseline print
//! as JSON lines ([`lite_bench_record`]), perftest's client tables,
//! which the guest brackets with `LITE-PERFTEST-BEGIN` / `LITE-PERFTEST-END`
//! lines, and the TAP comments in which `lite-failure-test`'s survivors
//! give their stall, leave and rejoin times.
//!
//! Malformed lines are skipped, never guessed at: console output
//! interleaves kernel messages with the benchmark's.

use std::collections::BTreeMap;
use std::str::FromStr;

pub use lite_bench_record::{
    Latency, Lock, Process, Qos, Record, Regions, RpcLoad, Scale, Spread, Throughput,
};
use lite_bench_record::{DSM_ROUND, TAG, VERBS_TAG};

use super::rounds::{self, Round, CPU_ROUND, LATENCY_ROUND};
use super::run::NodeLog;
use super::ATOMICS;
use crate::logscan;

/// Opens a perftest block: `LITE-PERFTEST-BEGIN test=ib_X size=N ... side=S`.
const PERFTEST_BEGIN: &str = "LITE-PERFTEST-BEGIN ";

const PERFTEST_END: &str = "LITE-PERFTEST-END ";

/// What the report takes of a row of perftest's latency client table of
/// operation `op` (`write`, `read`, ...), whose columns are `#bytes`,
/// `#iterations`, then in microseconds `t_min`, `t_max`, `t_typical`
/// (perftest's median), `t_avg`, `t_stdev` and the 99th and 99.9th
/// percentiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Native {
    pub op: String,
    pub size: u64,
    pub typical: f64,
    pub stdev: f64,
}

/// Which program measured a series: `lite-bench` or the native verbs
/// baseline `lite-verbs-bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Lite,
    Native,
}

/// Both sides, as the charts name them.
pub const SIDES: [(Side, &str); 2] = [(Side::Lite, "LITE"), (Side::Native, "native verbs")];

impl Side {
    /// Its name in figure keys.
    pub fn name(self) -> &'static str {
        match self {
            Side::Lite => "lite",
            Side::Native => "native",
        }
    }
}

/// Whether `op` names a series of the memory region curve, which is kept
/// apart from the latency series of the same programs.
fn is_region_curve_op(op: &str) -> bool {
    op.starts_with("region_")
}

/// What the report takes of a row of a perftest bandwidth client table
/// of operation `op` run with TX depth (`-t`, operations in flight)
/// `depth`, whose columns are `#bytes`, `#iterations`, `BW peak` and
/// `BW average` in MiB/s (perftest's MB/sec) and `MsgRate` in Mpps.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeBw {
    pub op: String,
    pub size: u64,
    pub depth: u32,
    pub average: f64,
    pub msg_rate: f64,
}

/// How many ms after a survivor's last successful write to the killed
/// node one of its calls waiting on that node (`rdma_write`,
/// `send_reply_imm`, `lock`, ...) returned (`# stall <call> <N> ms`).
#[derive(Clone, Debug, PartialEq)]
pub struct Stall {
    pub call: String,
    pub ms: i64,
}

/// How many ms one `lite_leave` took (`# leave <N> ms`) in its leave/rejoin
/// cycle, from 1 (the first leave moves chunks).
#[derive(Clone, Debug, PartialEq)]
pub struct Leave {
    pub cycle: u32,
    pub ms: i64,
}

/// What one survivor of the failure phase reported, in log order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailureNode {
    /// The node's name, e.g. `failure/node1`.
    pub node: String,
    /// Its calls that waited on the killed node.
    pub stalls: Vec<Stall>,
    /// Its leaves (only the survivor that leaves and joins again has any).
    pub leaves: Vec<Leave>,
    /// How long each of its joins after a leave took, in ms.
    pub rejoins: Vec<i64>,
}

impl FailureNode {
    /// Whether the node reported no time at all.
    pub fn is_empty(&self) -> bool {
        self.stalls.is_empty() && self.leaves.is_empty() && self.rejoins.is_empty()
    }
}

/// The isolation run's phases by (round, phase, QoS).
pub type QosRows = BTreeMap<(u32, String, String), Qos>;

/// Everything parsed from the guest logs of a benchmark run.
#[derive(Debug, Default)]
pub struct Measurements {
    /// perftest latency client rows, in log order.
    pub native: Vec<Native>,
    /// perftest bandwidth client rows, in log order.
    pub native_bw: Vec<NativeBw>,
    /// `lite-bench` latency series by (op, size).
    pub lite: BTreeMap<(String, u64), Latency>,
    /// `lite-bench` throughput series by (op, size, depth).
    pub lite_bw: BTreeMap<(String, u64, Option<u32>), Throughput>,
    /// `lite-bench` RPC throughput series by (size, threads).
    pub lite_rpc_bw: BTreeMap<(u64, u32), RpcLoad>,
    /// `lite-bench` asynchronous RPC series by (size, depth).
    pub lite_rpc_async: BTreeMap<(u64, u32), RpcLoad>,
    /// Lock series by (contenders, node, home).
    pub locks: BTreeMap<(u32, u32, u32), Lock>,
    /// Raw lock-acquire times by (contenders, node), of every node's log.
    pub lock_samples: BTreeMap<(u32, u32), Vec<f64>>,
    /// Pairs per second of all contending nodes together in each round of
    /// a contention phase, by number of contending nodes.
    pub lock_rounds: BTreeMap<u32, Vec<f64>>,
    /// The isolation run's phases.
    pub qos: QosRows,
    /// Memory region counts by (LMR size, live LMRs).
    pub regions: BTreeMap<(u64, u64), Regions>,
    /// The memory region curve by (side, op, size, live regions; 0 for
    /// create and free): the series with a 99th percentile.
    pub region_curve: BTreeMap<(Side, String, u64, u64), Latency>,
    /// The cluster-size curve by (nodes, node).
    pub cluster_scale: BTreeMap<(u64, u64), Scale>,
    /// The process curve by (side, workload, processes): one step per
    /// round, in order.
    pub process_curve: BTreeMap<(Side, String, u64), Vec<Process>>,
    /// The failure phase's survivors, in node order (its victim is not
    /// among them).
    pub failure: Vec<FailureNode>,
    /// The interleaved comparison's latency rounds, by number, of every
    /// node's log.
    pub rounds: BTreeMap<u32, Round>,
    /// Its CPU rounds, by number.
    pub cpu_rounds: BTreeMap<u32, Round>,
    /// The LITE-DSM phase's rounds, by number: the faults and the LITE read
    /// of a page.
    pub dsm_rounds: BTreeMap<u32, Round>,
    /// Crashes and failed guest roles, each prefixed with its node.
    pub problems: Vec<String>,
}

/// The records in `log`: those of `lite-bench` (and of the guest's /init)
/// first, then those of the native verbs baseline, each with who measured
/// it.
pub fn records(log: &str) -> impl Iterator<Item = (Side, Record)> + '_ {
    let lite = Record::all_in(log, TAG).map(|record| (Side::Lite, record));
    let native = Record::all_in(log, VERBS_TAG).map(|record| (Side::Native, record));
    lite.chain(native)
}

impl Measurements {
    /// Adds what the console log `text` of node `name` holds. Where several
    /// nodes report the same series, the first node's numbers are kept.
    pub fn add_log(&mut self, name: &str, log: &str) {
        // The rounds measure the same series with fewer operations; they
        // are kept apart from the one-off series.
        let mut outside = log.to_string();
        let kinds = [
            (CPU_ROUND, &mut self.cpu_rounds),
            (LATENCY_ROUND, &mut self.rounds),
            (DSM_ROUND, &mut self.dsm_rounds),
        ];
        for (kind, rounds) in kinds {
            let (rest, texts) = rounds::split_rounds(&outside, kind);
            for (number, text) in texts {
                rounds::add_round_text(rounds.entry(number).or_default(), &text);
            }
            outside = rest;
        }
        let text = outside.as_str();
        self.native.extend(parse_perftest(text));
        self.native_bw.extend(parse_perftest_bw(text));
        for (side, record) in records(text) {
            self.add_record(side, record);
        }
        self.problems.extend(
            logscan::problems(log)
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }

    /// Files one record outside the rounds under its series. The baseline's
    /// records count only for the curves that compare both programs; the
    /// load processes' shares and CPU times outside a round are not kept.
    fn add_record(&mut self, side: Side, record: Record) {
        match (side, record) {
            (Side::Lite, Record::Latency(l)) if !is_region_curve_op(&l.op) => {
                self.lite.entry((l.op.clone(), l.size)).or_insert(l);
            }
            (side, Record::Latency(l)) => {
                if is_region_curve_op(&l.op) && l.p99.is_some() {
                    let key = (side, l.op.clone(), l.size, l.regions.unwrap_or(0));
                    self.region_curve.entry(key).or_insert(l);
                }
            }
            (side, Record::Process(p)) => {
                let key = (side, p.workload.clone(), p.processes);
                self.process_curve.entry(key).or_default().push(p);
            }
            (Side::Native, _) => {}
            (_, Record::Throughput(t)) => {
                let key = (t.op.clone(), t.size, t.depth);
                self.lite_bw.entry(key).or_insert(t);
            }
            (_, Record::RpcThroughput(r)) => {
                self.lite_rpc_bw.entry((r.size, r.threads)).or_insert(r);
            }
            (_, Record::RpcAsync(r)) => {
                self.lite_rpc_async.entry((r.size, r.depth)).or_insert(r);
            }
            (_, Record::Lock(l)) => {
                self.locks
                    .entry((l.contenders, l.node, l.home))
                    .or_insert(l);
            }
            (_, Record::LockSamples(s)) => {
                let times = self.lock_samples.entry((s.contenders, s.node));
                times.or_default().extend(s.acquire_us);
            }
            (_, Record::Qos(q)) => {
                let key = (q.round, q.phase.clone(), q.qos.clone());
                self.qos.entry(key).or_insert(q);
            }
            (_, Record::Regions(r)) => {
                self.regions.entry((r.size, r.lmrs)).or_insert(r);
            }
            (_, Record::Scale(s)) => {
                self.cluster_scale.entry((s.nodes, s.node)).or_insert(s);
            }
            (_, Record::QosLoad(_) | Record::Cpu(_)) => {}
        }
    }

    /// Adds the logs of every node of a finished phase, each named
    /// `prefix` + its node name.
    pub fn add_logs(&mut self, prefix: &str, logs: &[NodeLog]) {
        for log in logs {
            self.add_log(&format!("{prefix}{}", log.name), &log.text);
        }
    }

    /// Adds the throughput of one round of the contention phase of
    /// `contenders` nodes, from its nodes' logs.
    pub fn add_lock_round(&mut self, contenders: u32, logs: &[NodeLog]) {
        let rows: Vec<Lock> = logs
            .iter()
            .flat_map(|log| Record::all_in(&log.text, TAG))
            .filter_map(|record| match record {
                Record::Lock(lock) if lock.contenders == contenders => Some(lock),
                _ => None,
            })
            .collect();
        let group: Vec<&Lock> = rows.iter().collect();
        if let Some(throughput) = super::report::contended_throughput(&group) {
            self.lock_rounds
                .entry(contenders)
                .or_default()
                .push(throughput);
        }
    }

    /// Adds the logs of the failure phase's nodes, each named `prefix` +
    /// its node name, but for that of node `victim` (from 1): its log ends
    /// wherever the kill cut it off, so it is neither parsed nor scanned
    /// (as in the failure test). Every other node counts as a survivor,
    /// also one that reported nothing.
    pub fn add_failure_logs(&mut self, prefix: &str, logs: &[NodeLog], victim: usize) {
        for (index, log) in logs.iter().enumerate() {
            if index + 1 == victim {
                continue;
            }
            let name = format!("{prefix}{}", log.name);
            self.add_log(&name, &log.text);
            self.failure.push(parse_failure(&name, &log.text));
        }
    }

    /// Whether no measurement at all was found.
    pub fn is_empty(&self) -> bool {
        self.native.is_empty()
            && self.native_bw.is_empty()
            && self.lite.is_empty()
            && self.lite_bw.is_empty()
            && self.lite_rpc_bw.is_empty()
            && self.lite_rpc_async.is_empty()
            && self.locks.is_empty()
            && self.qos.is_empty()
            && self.regions.is_empty()
            && self.region_curve.is_empty()
            && self.process_curve.is_empty()
            && self.cluster_scale.is_empty()
            && self.rounds.is_empty()
            && self.cpu_rounds.is_empty()
            && self.dsm_rounds.is_empty()
            && self.failure.iter().all(FailureNode::is_empty)
    }
}

/// The `key=value` words of a line (a perftest block's opening line,
/// `test=ib_write_lat size=64 side=client`, or an application's
/// `LITE-APP` line), by key; a later word wins.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Fields<'a>(BTreeMap<&'a str, &'a str>);

impl<'a> Fields<'a> {
    /// The `key=value` words of `text`; words without `=` are ignored.
    pub(super) fn parse(text: &'a str) -> Self {
        Fields(
            text.split_whitespace()
                .filter_map(|word| word.split_once('='))
                .collect(),
        )
    }

    pub(super) fn text(&self, key: &str) -> Option<&'a str> {
        self.0.get(key).copied()
    }

    pub(super) fn integer<T: FromStr>(&self, key: &str) -> Option<T> {
        integer(self.text(key)?)
    }
}

/// The text after the first `tag` on `line`, if it has one. Anywhere on
/// the line, not only at its start: a printk timestamp may come first.
fn after_tag<'a>(line: &'a str, tag: &str) -> Option<&'a str> {
    line.split_once(tag).map(|(_, rest)| rest)
}

/// `text` as a finite number: `inf` and `nan` are what failed
/// measurements print, never results.
pub(super) fn number(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn integer<T: FromStr>(text: &str) -> Option<T> {
    text.parse().ok()
}

/// The client blocks of a guest log: the fields of each
/// `LITE-PERFTEST-BEGIN test=ib_X size=N ... side=client` line and the lines
/// up to the matching `LITE-PERFTEST-END`. A block that never ends (the
/// guest died in it) is dropped.
fn perftest_client_blocks(log: &str) -> Vec<(Fields<'_>, Vec<&str>)> {
    let mut out = Vec::new();
    let mut block: Option<(Fields, Vec<&str>)> = None;
    for line in log.lines().map(logscan::strip_timestamp) {
        if let Some(rest) = line.strip_prefix(PERFTEST_BEGIN) {
            let fields = Fields::parse(rest);
            block = (fields.text("side") == Some("client")).then(|| (fields, Vec::new()));
        } else if line.starts_with(PERFTEST_END) {
            out.extend(block.take());
        } else if let Some((_, lines)) = &mut block {
            lines.push(line);
        }
    }
    out
}

/// The operation a perftest test measures: `ib_write_lat` with `kind`
/// `_lat` → `write`.
fn perftest_op<'a>(test: &'a str, kind: &str) -> Option<&'a str> {
    test.strip_prefix("ib_")?.strip_suffix(kind)
}

/// The `N` numbers of a perftest table row (9 for latency, 5 for
/// bandwidth); `None` for headers, separators, rows of another width and
/// rows with `inf`/`nan` (failed clock calibration, the server side) or a
/// negative value. The first column (bytes) must be an integer.
fn perftest_row<const N: usize>(line: &str) -> Option<[f64; N]> {
    let cells: Vec<&str> = line.split_whitespace().collect();
    integer::<u64>(cells.first()?)?;
    let row: Option<Vec<f64>> = cells
        .iter()
        .map(|c| number(c).filter(|&v| v >= 0.0))
        .collect();
    row?.try_into().ok()
}

/// The last valid `N`-number table row of each perftest client block of
/// `log` whose test is `ib_<op><kind>` (`_lat` or `_bw`), with the block's
/// fields and its operation (earlier tries may have failed). Rows under a
/// Gb/sec header are skipped: `--report_gbits` would need converting and is
/// never asked for. `ib_atomic_lat` blocks carry `atomic=FETCH_AND_ADD` or
/// `atomic=CMP_AND_SWAP` and are named after the LITE series they are
/// compared with ([`ATOMICS`]).
fn perftest_results<'a, const N: usize>(
    log: &'a str,
    kind: &str,
) -> Vec<(Fields<'a>, &'a str, [f64; N])> {
    let mut out = Vec::new();
    for (fields, lines) in perftest_client_blocks(log) {
        let op = match fields.text("test") {
            Some("ib_atomic_lat") if kind == "_lat" => fields.text("atomic").and_then(|atomic| {
                ATOMICS
                    .iter()
                    .find(|(flag, _)| *flag == atomic)
                    .map(|&(_, op)| op)
            }),
            test => test.and_then(|test| perftest_op(test, kind)),
        };
        let (Some(op), Some(size)) = (op, fields.integer::<u64>("size")) else {
            continue;
        };
        let mut gbits = false;
        let mut last = None;
        for line in &lines {
            if line.contains("#bytes") {
                gbits = line.contains("Gb/sec");
            } else if let Some(row) = perftest_row::<N>(line) {
                if row[0] == size as f64 && !gbits {
                    last = Some(row);
                }
            }
        }
        out.extend(last.map(|row| (fields, op, row)));
    }
    out
}

/// perftest latency client results, from the blocks the guest brackets with
/// `LITE-PERFTEST-BEGIN test=ib_X_lat size=N side=client` / `LITE-PERFTEST-END`.
pub fn parse_perftest(log: &str) -> Vec<Native> {
    perftest_results::<9>(log, "_lat")
        .into_iter()
        .map(|(_, op, row)| Native {
            op: op.to_string(),
            size: row[0] as u64,
            typical: row[4],
            stdev: row[6],
        })
        .collect()
}

/// perftest bandwidth client results, from the blocks bracketed with
/// `LITE-PERFTEST-BEGIN test=ib_X_bw size=N depth=D ... side=client` /
/// `LITE-PERFTEST-END`: the row under `#bytes #iterations BW peak[MB/sec]
/// BW average[MB/sec] MsgRate[Mpps]`.
pub fn parse_perftest_bw(log: &str) -> Vec<NativeBw> {
    perftest_results::<5>(log, "_bw")
        .into_iter()
        .filter_map(|(fields, op, row)| {
            Some(NativeBw {
                op: op.to_string(),
                size: row[0] as u64,
                depth: fields.integer("depth")?,
                average: row[3],
                msg_rate: row[4],
            })
        })
        .collect()
}

/// The cycle a `leave/rejoin cycle <K>: ...` test point is about.
fn cycle_of(line: &str) -> Option<u32> {
    let (cycle, _) = after_tag(line, "leave/rejoin cycle ")?.split_once(':')?;
    integer(cycle)
}

/// The times survivor `node` of the failure phase gave in its console log
/// `log`: `# stall <call> <N> ms`, `# leave <N> ms` and `# rejoin <N> ms`
/// comments. A leave belongs to the cycle after the last one a test point
/// or an earlier leave named (a leave's comment comes before its cycle's
/// test points), so that a comment a kernel message broke (and which is
/// skipped, like any malformed line) cannot make a later leave pass for
/// the first.
pub fn parse_failure(node: &str, log: &str) -> FailureNode {
    let mut out = FailureNode {
        node: node.to_string(),
        ..FailureNode::default()
    };
    let mut last_cycle = 0;
    for line in log.lines() {
        let comment = after_tag(line, "# ").map(|c| c.split_whitespace().collect::<Vec<_>>());
        match comment.as_deref() {
            Some(["stall", call, ms, "ms"]) => {
                let call = call.to_string();
                out.stalls.extend(integer(ms).map(|ms| Stall { call, ms }));
            }
            Some(["leave", ms, "ms"]) => {
                if let Some(ms) = integer(ms) {
                    last_cycle += 1;
                    out.leaves.push(Leave {
                        cycle: last_cycle,
                        ms,
                    });
                }
            }
            Some(["rejoin", ms, "ms"]) => out.rejoins.extend(integer::<i64>(ms)),
            _ => last_cycle = cycle_of(line).map_or(last_cycle, |cycle| last_cycle.max(cycle)),
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    //! The sample logs here are shared with the report tests, which build
    //! their tables from what these parsers make of them.

    use super::*;

    /// The words of a table line, one space apart.
    pub(crate) fn words(line: &str) -> String {
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The words of each of `lines`.
    pub(crate) fn words_of(lines: &[String]) -> Vec<String> {
        lines.iter().map(|l| words(l)).collect()
    }

    /// That each of `wanted` is the words of one of `lines`.
    pub(crate) fn assert_rows(lines: &[String], wanted: &[&str]) {
        let rows = words_of(lines);
        for want in wanted {
            assert!(rows.iter().any(|r| r == want), "{want}: {rows:#?}");
        }
    }

    /// That `text` contains `part`.
    #[track_caller]
    pub(crate) fn assert_has(text: &str, part: &str) {
        assert!(text.contains(part), "{part:?} is not in {text}");
    }

    /// What [`Measurements`] makes of `log`, of a node named `node2`.
    pub(crate) fn measured(log: &str) -> Measurements {
        let mut m = Measurements::default();
        m.add_log("node2", log);
        m
    }

    /// perftest latency client output as the guest logs it: a failed
    /// connection, then a table; a read test; a `lite-bench` latency line.
    pub(crate) const CLIENT: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client
Couldn't connect to 10.77.0.1:18515
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client
                    RDMA_Write Latency Test
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          1523.45        4012.00      1987.50            2011.13        210.44         \t3020.00    \t4012.00  
---------------------------------------------------------------------------------------
LITE-PERFTEST-END test=ib_write_lat size=64 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_read_lat size=8 side=client
 8       1000          1.00        2.00      1.50            1.60        0.10         \t1.90    \t2.00
LITE-PERFTEST-END test=ib_read_lat size=8 side=client rc=0
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":2100.5,\"p10\":1900,\"p90\":2500.25,\"min\":1500,\"max\":5000,\"stdev\":300}}
";

    /// Blocks that give no row: the server side of a latency test, which
    /// has no valid timing, and of a bandwidth test, which has; client rows
    /// whose byte count is no integer, with a negative value or a column
    /// short; a test not named `ib_*`; a block the guest died in.
    const SERVERS: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=server
 64      1000          inf        inf      inf            inf        inf         \tinf    \tinf
LITE-PERFTEST-END test=ib_write_lat size=64 side=server rc=0
LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=8 iters=1000 side=server
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 4096       1000             25.31              21.47  \t\t   0.005496
LITE-PERFTEST-END test=ib_write_bw size=4096 depth=8 side=server rc=0
LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=16 iters=1000 side=client
 4096.0     1000             9.89               4.94   \t\t   0.001265
 4096       1000             -9.89              4.94   \t\t   0.001265
 4096       1000             9.89               4.94
LITE-PERFTEST-END test=ib_write_bw size=4096 depth=16 side=client rc=0
LITE-PERFTEST-BEGIN test=write_bw size=4096 depth=4 iters=1000 side=client
 4096       1000             9.89               4.94   \t\t   0.001265
LITE-PERFTEST-END test=write_bw size=4096 depth=4 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_read_lat size=8 side=client
 8       1000          1.00        2.00      1.50            1.60        0.10         \t1.90    \t2.00
";

    /// perftest 4.5 bandwidth output as the guest logs it: a round with
    /// failed clock calibration, then a good one; a read test.
    pub(crate) const BW_CLIENT: &str = "\
LITE-PERFTEST-BEGIN test=ib_write_bw size=4096 depth=8 iters=1000 side=client
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : rxe0
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
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":2100.5,\"p10\":1900,\"p90\":2500.25,\"min\":1500,\"max\":5000,\"stdev\":300}}
LITE-RECORD {\"throughput\":{\"op\":\"memset\",\"size\":4096,\"iters\":1000,\"average\":10.00,\"median\":11.00,\"p10\":9.00,\"p90\":12.50,\"min\":5.00,\"max\":13.00}}
LITE-RECORD {\"throughput\":{\"op\":\"write_async\",\"size\":4096,\"depth\":8,\"iters\":1000,\"average\":19.32,\"median\":19.00,\"p10\":18.00,\"p90\":20.00,\"min\":17.00,\"max\":21.00}}
LITE-RECORD {\"throughput\":{\"op\":\"read_async\",\"size\":65536,\"depth\":32,\"iters\":256,\"average\":48.00,\"median\":50.00,\"p10\":40.00,\"p90\":55.00,\"min\":30.00,\"max\":60.00}}
";

    /// perftest's `ib_send_lat` client table and `lite-bench`'s RPC lines.
    /// A `lite-bench` latency record of 4096 B operations `op` whose median
    /// is `median` µs, p10 and p90 100 µs either side.
    pub(crate) fn latency_record_4k(op: &str, median: u32) -> String {
        format!(
            "LITE-RECORD {{\"latency\":{{\"op\":\"{op}\",\"size\":4096,\"iters\":500,\
             \"median\":{median}.00,\"p10\":{}.00,\"p90\":{}.00,\"min\":1,\"max\":9999,\
             \"stdev\":1}}}}\n",
            median - 100,
            median + 100
        )
    }

    pub(crate) const RPC_LOG: &str = "\
LITE-PERFTEST-BEGIN test=ib_send_lat size=64 side=client
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          800.00        3000.00      1000.00            1100.00        150.00         \t2500.00    \t3000.00  
LITE-PERFTEST-END test=ib_send_lat size=64 side=client rc=0
LITE-PERFTEST-BEGIN test=ib_send_lat size=8 side=client
 8       1000          700.00        2000.00      900.00            950.00        100.00         \t1900.00    \t2000.00
LITE-PERFTEST-END test=ib_send_lat size=8 side=client rc=0
LITE-RECORD {\"latency\":{\"op\":\"rpc\",\"size\":64,\"iters\":1000,\"median\":2500.00,\"p10\":2300.00,\"p90\":2900.50,\"min\":2000,\"max\":9000,\"stdev\":400}}
LITE-RECORD {\"latency\":{\"op\":\"rpc\",\"size\":512,\"iters\":1000,\"median\":2600.00,\"p10\":2400.00,\"p90\":3000.00,\"min\":2100,\"max\":9100,\"stdev\":410}}
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":1100,\"p10\":1000,\"p90\":1300,\"min\":900,\"max\":5000,\"stdev\":100}}
LITE-RECORD {\"rpc_throughput\":{\"size\":64,\"threads\":4,\"depth\":1,\"calls\":2000,\"calls_per_s\":1234.50,\"latency\":{\"median\":3000.00,\"p10\":2800.00,\"p90\":3500.00}}}
LITE-RECORD {\"rpc_throughput\":{\"size\":64,\"threads\":1,\"depth\":1,\"calls\":2000,\"calls_per_s\":400.00,\"latency\":{\"median\":2500.00,\"p10\":2400.00,\"p90\":2600.00}}}
";

    /// `lite-bench`'s asynchronous RPC series.
    const RPC_ASYNC_LOG: &str = "\
LITE-RECORD {\"rpc_async\":{\"size\":64,\"threads\":1,\"depth\":8,\"calls\":300,\"calls_per_s\":812.50,\"latency\":{\"median\":9000.00,\"p10\":8000.00,\"p90\":11000.00}}}
";

    /// `ib_atomic_lat` client blocks (one of an unknown type) and
    /// `lite-bench`'s atomic series.
    pub(crate) const ATOMIC_LOG: &str = "\
LITE-PERFTEST-BEGIN test=ib_atomic_lat size=8 atomic=FETCH_AND_ADD side=client
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
LITE-RECORD {\"latency\":{\"op\":\"fetch_add\",\"size\":8,\"iters\":1000,\"median\":1200.00,\"p10\":1100.00,\"p90\":1500.00,\"min\":1000.00,\"max\":4000.00,\"stdev\":150.00}}
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":1100,\"p10\":1000,\"p90\":1300,\"min\":900,\"max\":5000,\"stdev\":100}}
";

    /// Lock lines of both phases: uncontended from node 2, contended from
    /// nodes 1 and 3 of four, with their raw acquire times (one line of
    /// node 3 cut by a kernel message, which `Record::all_in` skips).
    pub(crate) const LOCK_LOG: &str = "\
LITE-RECORD {\"lock\":{\"contenders\":1,\"node\":2,\"home\":1,\"iters\":1000,\"acquire\":{\"median\":800.00,\"p10\":700.00,\"p90\":900.00},\"pair\":{\"median\":1600.00,\"p10\":1500.00,\"p90\":1800.00},\"busy_us\":1700000.00,\"pairs_per_s\":588.24}}
LITE-RECORD {\"lock\":{\"contenders\":1,\"node\":2,\"home\":2,\"iters\":1000,\"acquire\":{\"median\":300.00,\"p10\":250.00,\"p90\":350.00},\"pair\":{\"median\":600.00,\"p10\":550.00,\"p90\":700.00},\"busy_us\":650000.00,\"pairs_per_s\":1538.46}}
LITE-RECORD {\"lock\":{\"contenders\":4,\"node\":1,\"home\":1,\"iters\":4,\"acquire\":{\"median\":10.00,\"p10\":5.00,\"p90\":20.00},\"pair\":{\"median\":15.00,\"p10\":9.00,\"p90\":25.00},\"busy_us\":800.00,\"pairs_per_s\":5000.00}}
LITE-RECORD {\"lock_samples\":{\"contenders\":4,\"node\":1,\"acquire_us\":[1.00,2.00]}}
LITE-RECORD {\"lock_samples\":{\"contenders\":4,\"node\":1,\"acquire_us\":[3.00,4.00]}}
[   42.000000] LITE-RECORD {\"lock\":{\"contenders\":4,\"node\":3,\"home\":1,\"iters\":4,\"acquire\":{\"median\":50.00,\"p10\":40.00,\"p90\":60.00},\"pair\":{\"median\":55.00,\"p10\":45.00,\"p90\":65.00},\"busy_us\":1000.00,\"pairs_per_s\":4000.00}}
LITE-RECORD {\"lock_samples\":{\"contenders\":4,\"node\":3,\"acquire_us\":[5.00,6.00]}}
LITE-RECORD {\"lock_samples\":{\"contenders\":4,\"node\":3,\"acquire_us\":[7.00,8.0rxe0: some kernel message
";

    /// The isolation run's phase lines and its load lines.
    pub(crate) const QOS_LOG: &str = "\
LITE-RECORD {\"qos\":{\"round\":1,\"phase\":\"unloaded\",\"qos\":\"on\",\"size\":64,\"iters\":1000,\"latency\":{\"median\":1000.00,\"p10\":900.00,\"p90\":1200.00},\"p99\":2000.00,\"min\":800.00,\"max\":3000.00,\"stdev\":100.00,\"loaders\":0,\"load_size\":65536,\"load_ops\":0,\"load_mibps\":0.00,\"throttled\":0}}
LITE-RECORD {\"qos\":{\"round\":1,\"phase\":\"loaded\",\"qos\":\"off\",\"size\":64,\"iters\":1000,\"latency\":{\"median\":4000.00,\"p10\":3000.00,\"p90\":6000.00},\"p99\":9000.00,\"min\":900.00,\"max\":12000.00,\"stdev\":900.00,\"loaders\":3,\"load_size\":65536,\"load_ops\":900,\"load_mibps\":30.00,\"throttled\":0}}
LITE-RECORD {\"qos_load\":{\"phase\":\"loaded\",\"qos\":\"off\",\"loader\":1,\"ops\":300,\"bytes\":19660800,\"elapsed_us\":2000000.00,\"mibps\":10.00}}
LITE-RECORD {\"qos\":{\"round\":1,\"phase\":\"loaded\",\"qos\":\"on\",\"size\":64,\"iters\":1000,\"latency\":{\"median\":1300.00,\"p10\":1000.00,\"p90\":1600.00},\"p99\":2600.00,\"min\":850.00,\"max\":5000.00,\"stdev\":200.00,\"loaders\":3,\"load_size\":65536,\"load_ops\":150,\"load_mibps\":5.50,\"throttled\":140}}
LITE-RECORD {\"qos\":{\"round\":2,\"phase\":\"unloaded\",\"qos\":\"on\",\"size\":64,\"iters\":1000,\"latency\":{\"median\":2000.00,\"p10\":1800.00,\"p90\":2400.00},\"p99\":3000.00,\"min\":1700.00,\"max\":4000.00,\"stdev\":100.00,\"loaders\":0,\"load_size\":65536,\"load_ops\":0,\"load_mibps\":0.00,\"throttled\":0}}
LITE-RECORD {\"qos\":{\"round\":2,\"phase\":\"loaded\",\"qos\":\"on\",\"size\":64,\"iters\":1000,\"latency\":{\"median\":2200.00,\"p10\":2000.00,\"p90\":2600.00},\"p99\":3300.00,\"min\":1900.00,\"max\":6000.00,\"stdev\":200.00,\"loaders\":3,\"load_size\":65536,\"load_ops\":90,\"load_mibps\":3.00,\"throttled\":80}}
";

    /// The memory region series: 4 KiB LMRs up to 1000, then 100 LMRs of
    /// 64 KiB (pool: 4 MiB segments).
    pub(crate) const REGIONS_LOG: &str = "\
LITE-RECORD {\"regions\":{\"size\":4096,\"lmrs\":1,\"local\":1,\"memory_regions\":3,\"pool_segments\":1,\"pool_bytes\":4194304}}
LITE-RECORD {\"regions\":{\"size\":4096,\"lmrs\":10,\"local\":5,\"memory_regions\":3,\"pool_segments\":1,\"pool_bytes\":4194304}}
[   80.123456] LITE-RECORD {\"regions\":{\"size\":4096,\"lmrs\":100,\"local\":50,\"memory_regions\":3,\"pool_segments\":1,\"pool_bytes\":4194304}}
LITE-RECORD {\"regions\":{\"size\":4096,\"lmrs\":1000,\"local\":500,\"memory_regions\":4,\"pool_segments\":2,\"pool_bytes\":8388608}}
LITE-RECORD {\"regions\":{\"size\":65536,\"lmrs\":100,\"local\":50,\"memory_regions\":4,\"pool_segments\":2,\"pool_bytes\":8388608}}
";

    /// A survivor of the failure phase that watches the leaves, as its
    /// console logged it (a real run, shortened): kernel messages between
    /// the TAP lines, five stall comments, the first cycle.
    pub(crate) const FAILURE_OBSERVER: &str = "\
LITE-GUEST-RUN role=bench-failure-survivor
TAP version 13
lite: the cluster manager declared node 4 (incarnation 1) dead, epoch 5
ok 14 - rdma_write of 4 KiB to LMR A on the victim (node 4) fails with -EHOSTDOWN (got -112 (-EHOSTDOWN))
# stall rdma_write 2970 ms
# stall send_reply_imm 2951 ms
# stall lock 2944 ms
# stall dist_barrier 2973 ms
# stall kernel_message 2948 ms
ok 29 - leave/rejoin: dist_barrier(3) of the survivors before the cycles returns 0
# cycle 1: 2 nodes 13309 ms after the cycle could begin, for 1203 ms
ok 30 - leave/rejoin cycle 1: get_total_node went from 3 to 2 and back to 3 (node 3 left and joined again)
LITE-GUEST-EXIT rc=0
";

    /// The survivor that leaves and joins again (a real run, shortened to
    /// four cycles), the comment on its second leave broken by a kernel
    /// message.
    pub(crate) const FAILURE_LEAVER: &str = "\
LITE-GUEST-RUN role=bench-failure-survivor
TAP version 13
ok 14 - rdma_write of 4 KiB to LMR A on the victim (node 4) fails with -EHOSTDOWN (got -112 (-EHOSTDOWN))
# stall rdma_write 2919 ms
# stall send_reply_imm 2910 ms
# stall lock 2904 ms
# stall dist_barrier 2922 ms
# stall kernel_message 2912 ms
lite: node 3 left the cluster
# leave 13302 ms
ok 29 - leave/rejoin cycle 1: leave(0) on node 3 returns 0
lite: joined as node 3 (incarnation 2) of 3
# rejoin 207 ms
ok 31 - leave/rejoin cycle 1: join returns node 3's id again (got 3)
# leave 9lite: node 3 left the cluster
2 ms
ok 33 - leave/rejoin cycle 2: leave(0) on node 3 returns 0
# rejoin 316 ms
ok 35 - leave/rejoin cycle 2: join returns node 3's id again (got 3)
# leave 158 ms
ok 37 - leave/rejoin cycle 3: leave(0) on node 3 returns 0
# rejoin 527 ms
ok 39 - leave/rejoin cycle 3: join returns node 3's id again (got 3)
# leave 187 ms
ok 41 - leave/rejoin cycle 4: leave(0) on node 3 returns 0
# rejoin 330 ms
ok 43 - leave/rejoin cycle 4: join returns node 3's id again (got 3)
LITE-GUEST-EXIT rc=0
";

    /// The victim's console up to the kill: no exit line, nothing to
    /// parse.
    pub(crate) const FAILURE_VICTIM: &str = "\
LITE-GUEST-RUN role=bench-failure-victim
lite-failure-test: victim: dist_barrier(4) after the survivors' traffic started: ok
LITE-FAILURE-VICTIM ready
LITE-FAILURE-VICTIM re";

    /// The failure phase's four node logs as the harness collects them:
    /// node 2 is an observer whose lock stall a kernel message broke.
    pub(crate) fn failure_logs() -> Vec<NodeLog> {
        let broken = FAILURE_OBSERVER.replace(
            "# stall lock 2944 ms\n",
            "# stall lock 29lite: node 4 is gone\n44 ms\n",
        );
        [
            ("node1", FAILURE_OBSERVER.to_string()),
            ("node2", broken),
            ("node3", FAILURE_LEAVER.to_string()),
            ("node4", FAILURE_VICTIM.to_string()),
        ]
        .into_iter()
        .map(|(name, text)| node_log(name, &console(&text)))
        .collect()
    }

    /// A node's log as the harness collects it.
    fn node_log(name: &str, text: &str) -> NodeLog {
        NodeLog {
            name: name.into(),
            text: text.into(),
        }
    }

    #[test]
    fn perftest_client_rows_are_parsed_by_kind() {
        // Each log's rows, latency before bandwidth: not the servers', nor
        // those of an unknown atomic type or without valid timing.
        let rows = [
            (CLIENT, "write 64 1987.5 210.44"),
            (CLIENT, "read 8 1.5 0.1"),
            (BW_CLIENT, "write 64 1.5 0.1"),
            // Measured again after a round without valid timing; MiB/sec is
            // the same unit; Gb/sec rows and the unfinished block are left out.
            (BW_CLIENT, "write 4096 8 21.47 0.005496"),
            (BW_CLIENT, "write 4096 1 8.0 0.002048"),
            (BW_CLIENT, "read 65536 32 64.0 0.001024"),
            (ATOMIC_LOG, "fetch_add 8 1000.0 120.0"),
            (ATOMIC_LOG, "compare_swp 8 1050.0 130.0"),
        ];
        for log in [CLIENT, SERVERS, BW_CLIENT, ATOMIC_LOG] {
            let console = console(log);
            let lat = parse_perftest(&console).into_iter();
            let mut found: Vec<String> = lat
                .map(|n| format!("{} {} {:?} {:?}", n.op, n.size, n.typical, n.stdev))
                .collect();
            found.extend(parse_perftest_bw(&console).iter().map(|n| {
                format!(
                    "{} {} {} {:?} {:?}",
                    n.op, n.size, n.depth, n.average, n.msg_rate
                )
            }));
            let want: Vec<&str> = rows.iter().filter(|r| r.0 == log).map(|r| r.1).collect();
            assert_eq!(found, want, "{log}");
        }
    }

    #[test]
    fn records_as_lite_bench_prints_them_are_filed_whole() {
        let logs = [
            CLIENT,
            BW_CLIENT,
            CLUSTER_SCALE_LOG,
            RPC_LOG,
            RPC_ASYNC_LOG,
            LOCK_LOG,
            QOS_LOG,
        ];
        let curves = [REGIONS_LOG, REGION_CURVE_LOG, PROCESS_CURVE_LOG];
        let records = logs.iter().chain(&curves);
        let mut filed_kinds = std::collections::HashSet::new();
        for record in records.flat_map(|log| Record::all_in(log, TAG)) {
            // The line as `lite-bench` prints it, after a timestamp, then
            // a copy that a kernel message cut.
            let line = record.line();
            let cut = &line[..line.len() / 2];
            let log = format!("[ 12.5] {line}\r\n{cut}rxe0: hello\r\nLITE-GUEST-EXIT rc=0\r\n");
            let m = measured(&log);
            assert!(m.problems.is_empty(), "{:?}", m.problems);
            // The record's fields, all of them, in the series it is filed under.
            let debug = format!("{record:?}");
            let fields = debug.split_once('(').and_then(|(_, f)| f.strip_suffix(')'));
            if fields.is_some_and(|fields| format!("{m:?}").contains(fields)) {
                filed_kinds.insert(std::mem::discriminant(&record));
            }
        }
        // Every kind that has a series of its own.
        assert_eq!(filed_kinds.len(), 9);
    }

    #[test]
    fn every_node_s_lock_samples_add_up() {
        let mut m = measured(&console(LOCK_LOG));
        assert_eq!(m.lock_samples[&(4, 1)], [1.0, 2.0, 3.0, 4.0]);
        // The line a kernel message cut is dropped whole.
        assert_eq!(m.lock_samples[&(4, 3)], [5.0, 6.0]);
        // Another node's samples add up; its series do not replace the
        // first node's.
        m.add_log("locks/node3", &LOCK_LOG.replace("5000.00", "1.00"));
        assert_eq!(m.lock_samples[&(4, 1)].len(), 8);
        assert_eq!(m.locks[&(4, 1, 1)].pairs_per_s, 5000.0);
    }

    /// The memory region curve of both programs.
    pub(crate) const REGION_CURVE_LOG: &str = "\
LITE-VERBS {\"latency\":{\"op\":\"region_write\",\"size\":64,\"regions\":1,\"wait\":\"event\",\"iters\":100,\"median\":200.00,\"p10\":180.00,\"p90\":250.00,\"p99\":400.00,\"min\":150.00,\"max\":500.00,\"stdev\":20.00,\"cpu_us_per_op\":90.00}}
LITE-VERBS {\"latency\":{\"op\":\"region_write\",\"size\":64,\"regions\":100000,\"wait\":\"event\",\"iters\":100,\"median\":210.00,\"p10\":190.00,\"p90\":260.00,\"p99\":420.00,\"min\":150.00,\"max\":500.00,\"stdev\":20.00,\"cpu_us_per_op\":90.00}}
LITE-VERBS {\"latency\":{\"op\":\"region_create\",\"size\":4096,\"wait\":\"event\",\"iters\":20,\"median\":60.00,\"p10\":50.00,\"p90\":70.00,\"p99\":80.00,\"min\":40.00,\"max\":90.00,\"stdev\":5.00,\"cpu_us_per_op\":50.00}}
LITE-RECORD {\"latency\":{\"op\":\"region_write\",\"size\":64,\"regions\":1,\"iters\":100,\"median\":205.00,\"p10\":185.00,\"p90\":255.00,\"p99\":410.00,\"min\":150.00,\"max\":500.00,\"stdev\":20.00}}
[   99.5] LITE-RECORD {\"latency\":{\"op\":\"region_read\",\"size\":64,\"regions\":100000,\"iters\":100,\"median\":230.00,\"p10\":200.00,\"p90\":280.00,\"p99\":450.00,\"min\":150.00,\"max\":500.00,\"stdev\":20.00}}
LITE-RECORD {\"latency\":{\"op\":\"region_create\",\"size\":1073741824,\"iters\":3,\"median\":900000.00,\"p10\":1.00,\"p90\":1.00,\"p99\":1.00,\"min\":1.00,\"max\":1.00,\"stdev\":1.00}}
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":1100,\"p10\":1000,\"p90\":1300,\"min\":900,\"max\":5000,\"stdev\":100}}
";

    /// The process curve of both programs.
    pub(crate) const PROCESS_CURVE_LOG: &str = "\
LITE-VERBS {\"process\":{\"workload\":\"write\",\"size\":64,\"processes\":1,\"wait\":\"event\",\"iters\":200,\"elapsed_us\":40000.00,\"slowest_us\":40000.00,\"ops_per_s\":5000.0,\"qps\":1,\"mrs\":3}}
LITE-VERBS {\"process\":{\"workload\":\"write\",\"size\":64,\"processes\":4,\"wait\":\"event\",\"iters\":200,\"elapsed_us\":80000.00,\"slowest_us\":79000.00,\"ops_per_s\":10000.0,\"qps\":4,\"mrs\":12}}
LITE-VERBS {\"process\":{\"workload\":\"rpc\",\"size\":64,\"processes\":4,\"wait\":\"event\",\"iters\":200,\"elapsed_us\":200000.00,\"slowest_us\":199000.00,\"ops_per_s\":4000.0,\"qps\":4,\"mrs\":12}}
LITE-RECORD {\"process\":{\"workload\":\"write\",\"size\":64,\"processes\":1,\"iters\":200,\"elapsed_us\":50000.00,\"slowest_us\":50000.00,\"ops_per_s\":4000.0,\"qps\":1,\"mrs\":2}}
[   12.5] LITE-RECORD {\"process\":{\"workload\":\"write\",\"size\":64,\"processes\":4,\"iters\":200,\"elapsed_us\":100000.00,\"slowest_us\":99000.00,\"ops_per_s\":8000.0,\"qps\":1,\"mrs\":2}}
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":1100,\"p10\":1000,\"p90\":1300,\"min\":900,\"max\":5000,\"stdev\":100}}
";

    /// The cluster-size curve of a 4-node step.
    pub(crate) const CLUSTER_SCALE_LOG: &str = "\
LITE-RECORD {\"scale\":{\"nodes\":4,\"node\":1,\"join_us\":250000,\"barriers\":50,\"barrier_median\":9000.00,\"barrier_p90\":12000.00,\"rpc_peers\":3,\"rpc_calls\":600,\"rpc_elapsed_us\":1000000.00,\"rpc_calls_per_s\":600.0}}
[   30.1] LITE-RECORD {\"scale\":{\"nodes\":4,\"node\":2,\"join_us\":null,\"barriers\":50,\"barrier_median\":8000.00,\"barrier_p90\":11000.00,\"rpc_peers\":3,\"rpc_calls\":600,\"rpc_elapsed_us\":1200000.00,\"rpc_calls_per_s\":500.0}}
LITE-RECORD {\"scale\":{\"nodes\":4,\"node\":3,\"join_us\":410000,\"barriers\":50,\"barrier_median\":8500.00,\"barrier_p90\":13000.00,\"rpc_peers\":3,\"rpc_calls\":600,\"rpc_elapsed_us\":1000000.00,\"rpc_calls_per_s\":600.0}}
";

    #[test]
    fn the_curves_are_kept_apart_from_the_latency_series() {
        let m = measured(REGION_CURVE_LOG);
        let points: Vec<String> = m
            .region_curve
            .keys()
            .map(|(side, op, size, regions)| format!("{side:?} {op} {size} {regions}"))
            .collect();
        // LITE's points first, then the baseline's, each by op and size;
        // create and free have no live regions.
        let want = [
            "Lite region_create 1073741824 0",
            "Lite region_read 64 100000",
            "Lite region_write 64 1",
            "Native region_create 4096 0",
            "Native region_write 64 1",
            "Native region_write 64 100000",
        ];
        assert_eq!(points, want);
        // The plain write stays a latency series; the curve's lines do not.
        assert_eq!(m.lite.keys().collect::<Vec<_>>(), [&("write".into(), 64)]);
        assert!(m.process_curve.is_empty());
        let mut m = measured(PROCESS_CURVE_LOG);
        assert_eq!(
            (m.process_curve.len(), m.lite.len(), m.is_empty()),
            (5, 1, false)
        );
        // A second round adds to the same steps.
        m.add_log("processes/node2", PROCESS_CURVE_LOG);
        assert_eq!(m.process_curve.len(), 5);
        assert!(m.process_curve.values().all(|rounds| rounds.len() == 2));
    }

    #[test]
    fn each_contention_round_adds_its_throughput() {
        let mut m = Measurements::default();
        // Node 1's and node 3's 4 pairs over the longest 1000 us: 8000/s;
        // the uncontended lines do not count.
        let logs = [node_log("node1", LOCK_LOG), node_log("node2", "")];
        m.add_lock_round(4, &logs);
        m.add_lock_round(4, &[node_log("node1", "")]);
        m.add_lock_round(2, &logs);
        assert_eq!(m.lock_rounds, BTreeMap::from([(4, vec![8000.0])]));
        m.add_lock_round(4, &logs);
        assert_eq!(m.lock_rounds[&4], [8000.0, 8000.0]);
    }

    #[test]
    fn failure_comments_give_stalls_leaves_and_rejoins() {
        // Stalls; leaves as cycle:ms; rejoins.
        let summary = |log: &str| {
            let node = parse_failure("n", log);
            let stalls = node.stalls.iter().map(|s| format!("{} {}", s.call, s.ms));
            let leaves = node.leaves.iter().map(|l| format!("{}:{}", l.cycle, l.ms));
            let rejoins = node.rejoins.iter().map(i64::to_string);
            let parts: [Vec<String>; 3] = [stalls.collect(), leaves.collect(), rejoins.collect()];
            parts.map(|p| p.join(", ")).join("; ")
        };
        let leaver = console(FAILURE_LEAVER);
        let cycle_unseen = "# leave 900 ms\n# leave 80 ms\nok 9 - leave/rejoin cycle 2: leave(0)\n\
                            # leave 70 ms\n";
        let broken = "# stall lock 2944\n# stall lock x ms\n# stall 2944 ms\n# stall lock 2944 s\n\
                      # leave 12 ms extra\n# leave ms\n# rejoin -\n# leave(0) again: got -107\n\
                      not ok 3 - leave/rejoin cycle x: leave(0)\n[   61.5] # stall lock 3001 ms\n\
                      # rejoin 12 ms\r\n";
        // The observers' times are the failure table test's.
        let want = [
            // The second leave's comment is broken: the next one is still the
            // third cycle's, not taken for the first or second.
            "rdma_write 2919, send_reply_imm 2910, lock 2904, dist_barrier 2922, \
             kernel_message 2912; 1:13302, 3:158, 4:187; 207, 316, 527, 330",
            // A leave whose cycle's test points are all missing still follows
            // the leave before it.
            "; 1:900, 2:80, 3:70; ",
            // Only whole comments count.
            "lock 3001; ; 12",
        ];
        assert_eq!([&leaver, cycle_unseen, broken].map(summary), want);
        let observer = parse_failure("failure/node1", FAILURE_OBSERVER);
        assert_eq!(observer.node, "failure/node1");
        assert!(!observer.is_empty() && parse_failure("n", "").is_empty());
        assert_eq!(cycle_of("ok 9 - leave/rejoin cycle 10: join"), Some(10));
        assert_eq!(cycle_of("ok 9 - leave/rejoin: dist_barrier(3)"), None);
    }

    #[test]
    fn the_victims_log_is_neither_parsed_nor_scanned() {
        let mut m = Measurements::default();
        m.add_failure_logs("failure/", &failure_logs(), 4);
        // The survivors' times are the failure table test's.
        assert_eq!(m.failure.len(), 3);
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        assert!(!m.is_empty());
        // A survivor that failed is a problem, and still a survivor.
        let mut logs = failure_logs();
        logs[0].text = "LITE-GUEST-EXIT rc=1\n".into();
        let mut m = Measurements::default();
        m.add_failure_logs("failure/", &logs, 4);
        assert_eq!(m.failure.len(), 3);
        assert!(m.failure[0].is_empty());
        assert_eq!(m.problems, ["failure/node1: guest role exited with rc=1"]);
        // Nothing but empty survivors: no measurement.
        let mut m = Measurements::default();
        m.add_failure_logs("failure/", &logs[..1], 4);
        assert!(m.is_empty());
    }

    /// `text` with the serial console's line endings, CR LF.
    fn console(text: &str) -> String {
        text.replace('\n', "\r\n")
    }
}
