//! The benchmark's records: what `lite-bench` reports on the console and
//! `cargo xtask bench` reads back, one JSON object a line after [`TAG`].
//! The native verbs baseline (`lite-verbs-bench`, in C) prints the same
//! objects after [`VERBS_TAG`], so that both programs' series are read
//! into the same types.
//!
//! A tag rather than a whole line, because the console interleaves kernel
//! messages with the programs' output: a printk timestamp may come first,
//! and a line that a message cut in two is no valid JSON and is skipped.
//! Times are in microseconds and throughputs in MiB/s; a measurement that
//! failed (`inf`, `nan`) is written as `null`, which no record accepts.

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

/// What precedes a record of `lite-bench` on a console line.
pub const TAG: &str = "LITE-RECORD ";

/// What precedes a record of the native verbs baseline.
pub const VERBS_TAG: &str = "LITE-VERBS ";

/// What opens and closes a round of `lite-bench --dsm`, before the round's
/// number, around the round's records.
pub const DSM_ROUND: (&str, &str) = ("LITE-DSM-ROUND-BEGIN round=", "LITE-DSM-ROUND-END round=");

/// Median and 10th and 90th percentiles of a series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

impl Spread {
    /// The spread of `samples`, in any order; `None` without samples.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            median: percentile(&sorted, 50.0)?,
            p10: percentile(&sorted, 10.0)?,
            p90: percentile(&sorted, 90.0)?,
        })
    }
}

/// The `p`-th percentile (0..=100) of ascending `sorted` samples, linearly
/// interpolated between the two closest ranks (the method most tools use by
/// default), as `lite-bench` and the report both take them. `None` for no
/// samples or `p` outside 0..=100.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (below, above) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[below] + (sorted[above] - sorted[below]) * (rank - below as f64))
}

/// One latency series: `iters` operations `op` (e.g. `write`) of `size`
/// bytes, timed one at a time, with the median, percentiles, extremes and
/// standard deviation of their times. The memory region curve's series
/// (`op` `region_*`) say how many regions were alive during the writes and
/// reads and give the 99th percentile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub op: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regions: Option<u64>,
    pub iters: u64,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
    pub min: f64,
    pub max: f64,
    pub stdev: f64,
}

/// One throughput series, in MiB/s: `iters` operations `op` (`memset`,
/// `memcpy`, `write_async` or `read_async`) of `size` bytes, `depth` of them
/// in flight (pipelined series only); their `average` is total bytes over
/// total time (what perftest's `BW average` is), then the median,
/// percentiles, slowest and fastest of the samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub op: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    pub iters: u64,
    pub average: f64,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
}

/// RPC calls of one series with requests and replies of `size` bytes:
/// `threads` threads calling at once, or one thread keeping `depth` calls
/// in flight; the `calls` completed, the calls per second of all threads
/// together and the time of one call under this load, from posting it to
/// its reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpcLoad {
    pub size: u64,
    pub threads: u32,
    pub depth: u32,
    pub calls: u64,
    pub calls_per_s: f64,
    pub latency: Spread,
}

/// `iters` lock/unlock pairs of `node` on a lock kept by node `home`, with
/// `contenders` nodes taking it at the same time (1: uncontended): the time
/// `lite_lock` took to return, the time of `lite_lock` plus `lite_unlock`,
/// the time the node took for all its pairs and its pairs per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    pub contenders: u32,
    pub node: u32,
    pub home: u32,
    pub iters: u64,
    pub acquire: Spread,
    pub pair: Spread,
    pub busy_us: f64,
    pub pairs_per_s: f64,
}

/// Raw lock-acquire times `node` measured in a contended series, so that
/// the host can combine every node's into one distribution; a series
/// takes several records of at most [`LockSamples::PER_RECORD`] values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockSamples {
    pub contenders: u32,
    pub node: u32,
    pub acquire_us: Vec<f64>,
}

impl LockSamples {
    /// Values per record: short enough that a kernel message on the
    /// console seldom lands inside one.
    pub const PER_RECORD: usize = 32;

    /// The records of `acquire_us`.
    pub fn split(contenders: u32, node: u32, acquire_us: &[f64]) -> Vec<LockSamples> {
        acquire_us
            .chunks(Self::PER_RECORD)
            .map(|chunk| LockSamples {
                contenders,
                node,
                acquire_us: chunk.to_vec(),
            })
            .collect()
    }
}

/// The high-priority process's write latency in one phase (`unloaded` or
/// `loaded`) of the interleaved `round` (from 1) of the isolation run, QoS
/// (traffic prioritization) `on` or `off`: `iters` writes of `size` bytes,
/// their latency and its 99th percentile, extremes and standard deviation;
/// and what the low-priority processes (`loaders`, writing `load_size`
/// bytes each time) achieved meanwhile: their writes, their throughput all
/// together, and their operations the node throttled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Qos {
    pub round: u32,
    pub phase: String,
    pub qos: String,
    pub size: u64,
    pub iters: u64,
    pub latency: Spread,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    pub stdev: f64,
    pub loaders: u32,
    pub load_size: u64,
    pub load_ops: u64,
    pub load_mibps: f64,
    pub throttled: u64,
}

/// One low-priority process's share (`loader`, from 1) of a loaded
/// isolation phase: its writes, their bytes, the time from the start of the
/// load to the last write and its throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QosLoad {
    pub round: u32,
    pub phase: String,
    pub qos: String,
    pub loader: u32,
    pub ops: u64,
    pub bytes: u64,
    pub elapsed_us: f64,
    pub mibps: f64,
}

/// The measuring node's resource counters with `lmrs` LMRs of `size` bytes
/// alive (its `lmrs` counter): `local` of them on the measuring node itself,
/// the others on the other node (only theirs take the node's pool memory),
/// the memory regions the node registered, and the segments of its remote
/// memory pool (one memory region each) and their bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regions {
    pub size: u64,
    pub lmrs: u64,
    pub local: u64,
    pub memory_regions: u64,
    pub pool_segments: u64,
    pub pool_bytes: u64,
}

/// One step of the process curve: `processes` processes started together,
/// each making `iters` operations of the `workload` (`write` or `rpc`) of
/// `size` bytes; the time from the start until the last process finished,
/// the longest one process took, all processes' operations per second, and
/// the queue pairs and memory regions on the measuring node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub workload: String,
    pub size: u64,
    pub processes: u64,
    pub iters: u64,
    pub elapsed_us: f64,
    pub slowest_us: f64,
    pub ops_per_s: f64,
    pub qps: u64,
    pub mrs: u64,
}

/// Node `node`'s share of the step of the cluster-size curve with `nodes`
/// nodes: how long its join took (`None` if it had joined before), the
/// median and 90th percentile of its `barriers` barriers of all nodes, and
/// its calls to `rpc_peers` peers at once: the calls completed, their time
/// and the calls per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    pub nodes: u64,
    pub node: u64,
    pub join_us: Option<f64>,
    pub barriers: u64,
    pub barrier_median: f64,
    pub barrier_p90: f64,
    pub rpc_peers: u64,
    pub rpc_calls: u64,
    pub rpc_elapsed_us: f64,
    pub rpc_calls_per_s: f64,
}

/// The busy CPU time, in USER_HZ ticks, of a whole VM (`server` or
/// `client`) while one program (`verbs` or `lite`) of a round ran (printed
/// by the guest's /init).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub side: String,
    pub program: String,
    pub busy_ticks: u64,
}

/// What a low-priority load process of the isolation run tells its parent
/// on its last line: its writes, their bytes and the time from the start
/// of the load to the last write. No record: the parent turns it into a
/// [`QosLoad`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub ops: u64,
    pub bytes: u64,
    pub elapsed_us: f64,
}

impl LoadReport {
    /// Its line, JSON.
    pub fn line(&self) -> String {
        // Plain data with string keys: serializing it cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The report on `line`; `None` for any other line, or a time that
    /// is no number.
    pub fn parse(line: &str) -> Option<LoadReport> {
        serde_json::from_str(line).ok()
    }
}

/// Any record, named by its kind: `{"latency":{...}}`; each kind's type
/// says what it holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    Latency(Latency),
    Throughput(Throughput),
    /// RPC calls from several threads at once.
    RpcThroughput(RpcLoad),
    /// RPC calls of one thread, several in flight.
    RpcAsync(RpcLoad),
    Lock(Lock),
    LockSamples(LockSamples),
    Qos(Qos),
    QosLoad(QosLoad),
    Regions(Regions),
    Process(Process),
    Scale(Scale),
    Cpu(Cpu),
}

impl Record {
    /// The console line of the record, its fractions rounded to hundredths
    /// (10 ns, 0.01 MiB/s): finer digits are noise under emulation, and
    /// shorter lines are less often cut by a kernel message.
    pub fn line(&self) -> String {
        // Plain data with string keys: serializing it cannot fail.
        let value = serde_json::to_value(self).unwrap_or_default();
        format!("{TAG}{}", rounded(value))
    }

    /// The records after `tag` in `log`, in order; lines that are not
    /// whole records are skipped.
    pub fn all_in<'a>(log: &'a str, tag: &'a str) -> impl Iterator<Item = Record> + 'a {
        log.lines().filter_map(move |line| {
            let (_, json) = line.split_once(tag)?;
            serde_json::from_str(json).ok()
        })
    }
}

/// `value` with every fraction rounded to hundredths.
fn rounded(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .and_then(|v| Number::from_f64((v * 100.0).round() / 100.0))
            .map_or(Value::Null, Value::Number),
        Value::Array(values) => Value::Array(values.into_iter().map(rounded).collect()),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, rounded(v))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A latency series of `op`, its spread from 10 to 20 us, without the
    /// region curve's fields.
    fn latency(op: &str) -> Latency {
        let json = format!(
            "{{\"op\":\"{op}\",\"size\":64,\"iters\":3,\"median\":12.5,\"p10\":10.5,\
             \"p90\":18.5,\"min\":10.0,\"max\":20.0,\"stdev\":5.2}}"
        );
        serde_json::from_str(&json).expect("a latency series")
    }

    #[test]
    fn records_read_back_as_written() {
        let record = Record::Latency(Latency {
            p90: 18.456,
            ..latency("write")
        });
        let line = record.line();
        // Keys in name order; fractions to hundredths.
        assert_eq!(
            line,
            "LITE-RECORD {\"latency\":{\"iters\":3,\"max\":20.0,\"median\":12.5,\"min\":10.0,\
             \"op\":\"write\",\"p10\":10.5,\"p90\":18.46,\"size\":64,\"stdev\":5.2}}"
        );
        // After a timestamp, with the console's line ending.
        let log = format!("[   1.5] {line}\r\nrxe0: a kernel message\n{line}");
        assert_eq!(Record::all_in(&log, TAG).count(), 2);
    }

    #[test]
    fn broken_and_failed_records_are_skipped() {
        let cut = "LITE-RECORD {\"cpu\":{\"side\":\"client\",\"program\":\"lite\",\"busy_t";
        let null = "LITE-RECORD {\"lock_samples\":{\"contenders\":4,\"node\":1,\"acquire_us\":[1.0,null]}}";
        let good =
            "LITE-RECORD {\"cpu\":{\"side\":\"client\",\"program\":\"lite\",\"busy_ticks\":7}}";
        let log = [cut, null, good, "LITE-VERBS: ok"].join("\n");
        let records: Vec<Record> = Record::all_in(&log, TAG).collect();
        assert_eq!(
            records,
            [Record::Cpu(Cpu {
                side: "client".into(),
                program: "lite".into(),
                busy_ticks: 7
            })]
        );
        // A failed measurement is written as null, which reads back as no record.
        let mut latency = latency("read");
        latency.median = f64::NAN;
        assert_eq!(
            Record::all_in(&Record::Latency(latency).line(), TAG).count(),
            0
        );
    }

    #[test]
    fn spreads_interpolate_between_ranks() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.5));
        assert_eq!(percentile(&[5.0], 90.0), Some(5.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).expect("samples");
        assert_eq!(s.median, 2.5);
        assert!(
            (s.p10 - 1.3).abs() < 1e-9 && (s.p90 - 3.7).abs() < 1e-9,
            "{s:?}"
        );
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn load_reports_round_trip() {
        let report = LoadReport {
            ops: 16,
            bytes: 1 << 20,
            elapsed_us: 500_000.25,
        };
        assert_eq!(LoadReport::parse(&report.line()), Some(report));
        let failed = LoadReport {
            elapsed_us: f64::INFINITY,
            ..report
        };
        assert_eq!(LoadReport::parse(&failed.line()), None);
        assert_eq!(LoadReport::parse("ready"), None);
    }

    #[test]
    fn lock_samples_split_into_short_rounded_records() {
        let times: Vec<f64> = (0..70).map(|i| f64::from(i) + 0.126).collect();
        let records = LockSamples::split(4, 3, &times);
        let lengths: Vec<usize> = records.iter().map(|r| r.acquire_us.len()).collect();
        assert_eq!(lengths, [32, 32, 6]);
        assert!(records.iter().all(|r| (r.contenders, r.node) == (4, 3)));
        let line = Record::LockSamples(records[2].clone()).line();
        assert!(line.contains("\"acquire_us\":[64.13,65.13,66.13,67.13,68.13,69.13]"));
        assert!(LockSamples::split(4, 3, &[]).is_empty());
    }
}
