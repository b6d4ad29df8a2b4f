//! `cargo xtask bench`: LITE's latency against native verbs (perftest).
//!
//! Two VMs run the release kernel, each pinned to its own host CPU. Node 1
//! is the perftest server, node 2 the client; both then run `lite-bench`.
//! Absolute times under TCG say little, so the report compares LITE with
//! native verbs measured on the same VMs in the same run. Every number
//! printed is parsed from the guests' output.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cluster::{self, node_ip, Cluster, ClusterSpec};
use crate::kernel::{self, Flavour};
use crate::paths::Cache;
use crate::{initramfs, logscan, ui};

/// Message sizes measured, in bytes.
pub const SIZES: [u64; 5] = [8, 64, 512, 4096, 65536];

/// Upper bound for the whole benchmark run.
const TIMEOUT: Duration = Duration::from_secs(40 * 60);

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
    let mut cluster = Cluster::start(&spec)?;
    let waited = cluster.wait(TIMEOUT, &mut || {});
    let node_logs = cluster.node_logs();
    drop(cluster);

    let mut native = Vec::new();
    let mut lite: BTreeMap<(String, u64), Lite> = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, path) in &node_logs {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
        native.extend(parse_perftest(&text));
        for row in parse_lite_bench(&text) {
            // Both nodes may report; the first node's numbers are kept.
            lite.entry((row.op.clone(), row.size)).or_insert(row);
        }
        problems.extend(
            logscan::problems(&text)
                .into_iter()
                .map(|p| format!("{name}: {p}")),
        );
    }
    let lite: Vec<Lite> = lite.into_values().collect();

    ui::say(&format!(
        "==> results ({iters} iterations, times in microseconds)"
    ));
    for line in table(&native, &lite) {
        ui::say(&format!("    {line}"));
    }
    ui::say(&format!("    {}", target_verdict(&native, &lite)));
    ui::say(&format!("    logs: {}", logs.display()));
    for problem in &problems {
        ui::say(&format!("    problem: {problem}"));
    }
    waited?;
    if native.is_empty() && lite.is_empty() {
        bail!("no measurements found in the guest logs");
    }
    if !problems.is_empty() {
        bail!(
            "the benchmark run had {} problems (see above)",
            problems.len()
        );
    }
    Ok(())
}

/// perftest client results, from the blocks the guest brackets with
/// `LITE-PERFTEST-BEGIN test=ib_X_lat size=N side=client` / `LITE-PERFTEST-END`.
/// The last valid table row of a block wins (earlier tries may have failed).
pub fn parse_perftest(log: &str) -> Vec<Native> {
    let mut out = Vec::new();
    let mut block: Option<(String, u64)> = None;
    let mut last: Option<Native> = None;
    for line in log.lines().map(logscan::strip_timestamp) {
        if let Some(rest) = line.strip_prefix("LITE-PERFTEST-BEGIN ") {
            let fields = key_values(rest);
            block = None;
            last = None;
            if fields.get("side").map(String::as_str) == Some("client") {
                let op = fields.get("test").and_then(|t| perftest_op(t));
                let size = fields.get("size").and_then(|s| s.parse().ok());
                if let (Some(op), Some(size)) = (op, size) {
                    block = Some((op.to_string(), size));
                }
            }
            continue;
        }
        if line.starts_with("LITE-PERFTEST-END ") {
            out.extend(last.take());
            block = None;
            continue;
        }
        let Some((op, size)) = &block else { continue };
        if let Some(row) = perftest_row(line) {
            if row[0] as u64 == *size && row[0].fract() == 0.0 {
                last = Some(Native {
                    op: op.clone(),
                    size: *size,
                    iterations: row[1] as u64,
                    min: row[2],
                    max: row[3],
                    typical: row[4],
                    avg: row[5],
                    stdev: row[6],
                    p99: row[7],
                    p999: row[8],
                });
            }
        }
    }
    out
}

/// `ib_write_lat` → `write`.
fn perftest_op(test: &str) -> Option<&str> {
    test.strip_prefix("ib_")?.strip_suffix("_lat")
}

/// The nine numbers of a perftest latency row; `None` for headers,
/// separators and rows with `inf`/`nan` (the server side).
fn perftest_row(line: &str) -> Option<[f64; 9]> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() != 9 {
        return None;
    }
    let mut row = [0.0; 9];
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

/// `a=1 b=x` into a map.
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The comparison table, one string per line.
pub fn table(native: &[Native], lite: &[Lite]) -> Vec<String> {
    let mut keys: Vec<(String, u64)> = native
        .iter()
        .map(|n| (n.op.clone(), n.size))
        .chain(lite.iter().map(|l| (l.op.clone(), l.size)))
        .collect();
    keys.sort();
    keys.dedup();
    let mut lines = vec![format!(
        "{:<6} {:>7} {:>13} {:>12} {:>11} {:>19} {:>11}",
        "op", "size", "native med", "native sd", "LITE med", "LITE p10-p90", "LITE/native"
    )];
    for (op, size) in keys {
        let n = native.iter().find(|n| n.op == op && n.size == size);
        let l = lite.iter().find(|l| l.op == op && l.size == size);
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let spread = l.map_or("-".to_string(), |l| format!("{:.2}-{:.2}", l.p10, l.p90));
        let ratio = match (n, l) {
            (Some(n), Some(l)) if n.typical > 0.0 => format!("{:.2}", l.median / n.typical),
            _ => "-".to_string(),
        };
        lines.push(format!(
            "{:<6} {:>7} {:>13} {:>12} {:>11} {:>19} {:>11}",
            op,
            size,
            cell(n.map(|n| n.typical)),
            cell(n.map(|n| n.stdev)),
            cell(l.map(|l| l.median)),
            spread,
            ratio
        ));
    }
    lines
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
}
