//! The memory region curve: 64-byte write and read latency with many live
//! memory regions, a random one per operation, and the time to create and
//! free one region of each size; LITE (LMRs on the other node) beside the
//! native verbs baseline (one `ibv_reg_mr` per region). Its table, verdict,
//! figures and charts.
//!
//! Each step times its random operations in blocks that take turns with
//! blocks on the first region (`region_write_first`, `region_read_first`),
//! so the cost of many regions is a ratio of two series measured in the
//! same minutes: the emulator's drift between steps does not enter it.

use std::collections::BTreeSet;

use super::charts::{by_size, LineChart};
use super::parse::{Latency, Measurements, Side, SIDES};
use super::report::{ratio_cell, say_curve, Table};

/// How much more LITE's slowdown with the most live regions (random ones
/// against the first) may be than the native baseline's, for the verdict.
const GROWTH_TOLERANCE: f64 = 1.10;

/// The write and read series, with their names in the table.
const ACCESSES: [(&str, &str); 2] = [("region_write", "write"), ("region_read", "read")];

/// The series on the first region that `op`'s blocks took turns with.
fn first_of(op: &str) -> String {
    format!("{op}_first")
}

/// `side`'s median of `op` on random regions over its median on the first
/// region, with `regions` live.
fn slowdown(m: &Measurements, side: Side, op: &str, size: u64, regions: u64) -> Option<f64> {
    let median = |op: String| Some(m.region_curve.get(&(side, op, size, regions))?.median);
    let (random, first) = (median(op.to_string())?, median(first_of(op))?);
    (first > 0.0).then(|| random / first)
}

/// The create and free series, with their names in the table.
const LIFECYCLE: [(&str, &str); 2] = [("region_create", "create"), ("region_free", "free")];

/// Every (live regions, size) that `op` was measured at, by either side,
/// ascending.
fn steps(m: &Measurements, op: &str) -> BTreeSet<(u64, u64)> {
    let keys = m.region_curve.keys().filter(|key| key.1 == op);
    keys.map(|&(_, _, size, regions)| (regions, size)).collect()
}

fn micros(value: Option<f64>) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.1}"))
}

/// The cells every row of the table has for one step: LITE's and native's
/// medians and p99s, and the ratio of the medians.
fn side_by_side(lite: Option<&Latency>, native: Option<&Latency>) -> [String; 5] {
    let median = |p: Option<&Latency>| p.map(|p| p.median);
    [
        micros(median(lite)),
        micros(median(native)),
        micros(lite.and_then(|p| p.p99)),
        micros(native.and_then(|p| p.p99)),
        ratio_cell(median(lite), median(native)),
    ]
}

/// The curve as table lines: latency by live regions, then create/free
/// time by size, LITE beside native with their ratio.
pub fn table(m: &Measurements) -> Vec<String> {
    let table = Table::new(
        "<7 op|>9 regions|>8 bytes|>11 LITE med|>11 native med|>13 LITE p99|>13 native p99|\
         >6 ratio|>9 LITE/1st|>11 native/1st",
    );
    // One step's row: LITE's and native's medians and p99s with their
    // ratio, and with live `regions` (none for create and free) each
    // side's slowdown against the first region.
    let row = |name: &str, op: &str, size: u64, regions: Option<u64>| {
        let point = |side| {
            m.region_curve
                .get(&(side, op.to_string(), size, regions.unwrap_or(0)))
        };
        let [lite_median, native_median, lite_p99, native_p99, ratio] =
            side_by_side(point(Side::Lite), point(Side::Native));
        let against_first = |side| {
            regions.map_or(String::new(), |r| {
                let x = slowdown(m, side, op, size, r);
                x.map_or("-".to_string(), |x| format!("x{x:.2}"))
            })
        };
        let line = table.row([
            name,
            &regions.map_or(String::new(), |r| r.to_string()),
            &size.to_string(),
            &lite_median,
            &native_median,
            &lite_p99,
            &native_p99,
            &ratio,
            &against_first(Side::Lite),
            &against_first(Side::Native),
        ]);
        line.trim_end().to_string()
    };
    let mut lines = vec![
        "64 B to a random one of N live regions (LITE: LMRs of 4 KiB on the other node; \
         native: one ibv_reg_mr per 4 KiB page there), microseconds; /1st: against the \
         blocks on the first region that took turns with them"
            .to_string(),
        table.header(),
    ];
    for (op, name) in ACCESSES {
        for (regions, size) in steps(m, op) {
            lines.push(row(name, op, size, Some(regions)));
        }
    }
    lines.push(
        "creating and freeing one region (LITE: lite_alloc_remote/lite_remote_free on the other \
         node; native: mmap + ibv_reg_mr / ibv_dereg_mr + munmap), microseconds"
            .to_string(),
    );
    // Create and free have no live regions to count or compare with.
    let headings = table.headings().map(|h| match h {
        "regions" | "LITE/1st" | "native/1st" => "",
        h => h,
    });
    lines.push(table.line(headings).trim_end().to_string());
    for (op, name) in LIFECYCLE {
        for (_, size) in steps(m, op) {
            lines.push(row(name, op, size, None));
        }
    }
    lines
}

/// Prints the curve's table and verdict; `iters` operations per write and
/// read series.
pub fn say(iters: u32, m: &Measurements) {
    say_curve(
        format!("memory region curve ({iters} operations per write and read series)"),
        !m.region_curve.is_empty(),
        "region_* lines",
        || table(m),
        || verdict(m),
    );
}

/// The most live regions at which both sides measured `op` and its first
/// region series, with both sides' slowdowns there: (regions, LITE, native).
fn slowdowns_at_most(m: &Measurements, op: &str) -> Option<(u64, f64, f64)> {
    steps(m, op).into_iter().rev().find_map(|(regions, size)| {
        Some((
            regions,
            slowdown(m, Side::Lite, op, size, regions)?,
            slowdown(m, Side::Native, op, size, regions)?,
        ))
    })
}

/// The curve's verdict: with the most live regions, random writes and
/// reads are slower than those to the first region, for LITE, no more than
/// [`GROWTH_TOLERANCE`] times as much as for the native baseline. `None`
/// without a curve.
pub fn verdict(m: &Measurements) -> Option<String> {
    if m.region_curve.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    let mut met = true;
    for (op, name) in ACCESSES {
        match slowdowns_at_most(m, op) {
            Some((regions, lite, native)) => {
                met &= lite <= native * GROWTH_TOLERANCE;
                parts.push(format!(
                    "{name} at {regions} regions against the first: LITE x{lite:.2}, \
                     native x{native:.2}"
                ));
            }
            None => {
                met = false;
                parts.push(format!("{name}: not measured by both"));
            }
        }
    }
    Some(format!(
        "many live memory regions slow LITE no more than native verbs (slowdown within \
         {GROWTH_TOLERANCE:.2}x of native's): {} ({})",
        if met { "met" } else { "NOT met" },
        parts.join("; ")
    ))
}

/// The curve's two charts: latency against live regions, and create/free
/// time against size; a chart without data is left out.
pub fn charts(m: &Measurements) -> Vec<LineChart> {
    // Each side's series of each of `ops`, named after the side and the op,
    // with live regions or sizes as x.
    let series = |ops: &[(&str, &str)], value: fn(&Latency) -> Option<f64>, x_is_size: bool| {
        let mut series = Vec::new();
        for &(op, name) in ops {
            for (side, label) in SIDES {
                let points = m
                    .region_curve
                    .iter()
                    .filter_map(|((s, o, size, regions), p)| {
                        let x = if x_is_size { *size } else { *regions };
                        (*s == side && o == op).then_some((x, value(p)?))
                    });
                series.push((format!("{label} {name}"), by_size(points)));
            }
        }
        series
    };
    let medians = [
        ("region_write", "write, median"),
        ("region_read", "read, median"),
    ];
    let latency = [
        series(&medians, |p| Some(p.median), false),
        series(&[("region_write", "write, p99")], |p| p.p99, false),
    ];
    let charts = [
        LineChart::of(
            "regions-latency",
            "64 B to a random one of N live memory regions".into(),
            ("live memory regions", "microseconds"),
            (true, false),
            latency.concat(),
        ),
        LineChart::of(
            "regions-create-free",
            "Creating and freeing one memory region: median time".into(),
            ("bytes", "microseconds"),
            (true, true),
            series(&LIFECYCLE, |p| Some(p.median), true),
        ),
    ];
    charts.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::{assert_has, assert_rows, measured, REGION_CURVE_LOG};

    #[test]
    fn the_verdict_compares_slowdowns_against_the_first_region() {
        assert_eq!(verdict(&Measurements::default()), None);
        // No first-region series in the fixture: not measured.
        let partial = verdict(&measured(REGION_CURVE_LOG)).expect("a verdict");
        assert_has(&partial, ": NOT met (write: not measured by both");
        let step = |side: &str, op: &str, regions: u64, median: f64| {
            format!(
                "{side} {{\"latency\":{{\"op\":\"{op}\",\"size\":64,\"regions\":{regions},\"iters\":9,\
                 \"median\":{median},\"p10\":1,\"p90\":1,\"p99\":1,\"min\":1,\"max\":1,\"stdev\":1}}}}\n"
            )
        };
        let mut log = String::new();
        for op in ["region_write", "region_read"] {
            let first = format!("{op}_first");
            log += &step("LITE-VERBS", op, 1, 100.0);
            log += &step("LITE-VERBS", &first, 1, 100.0);
            log += &step("LITE-VERBS", op, 1000, 120.0);
            log += &step("LITE-VERBS", &first, 1000, 100.0);
            log += &step("LITE-RECORD", op, 1, 200.0);
            log += &step("LITE-RECORD", &first, 1, 210.0);
            log += &step("LITE-RECORD", op, 1000, 250.0);
            log += &step("LITE-RECORD", &first, 1000, 200.0);
        }
        // LITE x1.25 against native x1.20 at 1000: within 10% of native's.
        let m = measured(&log);
        let met = verdict(&m).expect("a verdict");
        let within = ": met (write at 1000 regions against the first: LITE x1.25, native x1.20";
        assert_has(&met, within);
        let wanted = ["write 1000 64 250.0 120.0 1.0 1.0 2.08 x1.25 x1.20"];
        assert_rows(&table(&m), &wanted);
        let slower = log.replace(
            "\"regions\":1000,\"iters\":9,\"median\":250,",
            "\"regions\":1000,\"iters\":9,\"median\":300,",
        );
        let not_met = verdict(&measured(&slower)).expect("a verdict");
        assert_has(&not_met, "NOT met");
    }

    #[test]
    fn the_table_and_charts_line_up_lite_and_native_per_step() {
        let wanted = [
            "write 1 64 205.0 200.0 410.0 400.0 1.02 - -",
            "write 100000 64 - 210.0 - 420.0 - - -",
            "read 100000 64 230.0 - 450.0 - - - -",
            "create 4096 - 60.0 - 80.0 -",
            "create 1073741824 900000.0 - 1.0 - -",
        ];
        let m = measured(REGION_CURVE_LOG);
        assert_rows(&table(&m), &wanted);
        let drawn = charts(&m);
        assert_eq!(drawn.len(), 2);
        let latency = &drawn[0];
        assert_eq!(latency.name, "regions-latency");
        let names: Vec<&str> = latency.series.iter().map(|s| s.0.as_str()).collect();
        let medians = "LITE write, median; native verbs write, median; LITE read, median";
        let p99s = "LITE write, p99; native verbs write, p99";
        let want = format!("{medians}; {p99s}");
        assert_eq!(names, want.split("; ").collect::<Vec<_>>());
        assert_eq!(latency.series[1].1, [(1.0, 200.0), (100_000.0, 210.0)]);
        let lifecycle = &drawn[1];
        assert_eq!(lifecycle.series[0].1, [((1u64 << 30) as f64, 900_000.0)]);
        assert_eq!(lifecycle.series[1].1, [(4096.0, 60.0)]);
        assert!(charts(&Measurements::default()).is_empty());
    }
}
