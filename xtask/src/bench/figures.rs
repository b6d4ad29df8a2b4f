//! The machine-readable report: every figure of a run as one flat record
//! (a key naming what was measured, its unit, which direction is better,
//! the value and the spread it came with), written to `bench.json`, and
//! `cargo xtask bench --compare OLD NEW`, which lines two such files up
//! and flags each figure that got worse beyond the spread measured for it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::apps::AppRun;
use super::parse::Measurements;
use super::{isolation, rounds};
use crate::ui;

/// Version of the file's layout.
pub const FORMAT: u32 = 1;

/// Change assumed for a figure measured without a spread, so that noise
/// alone does not flag it.
const DEFAULT_TOLERANCE: f64 = 0.10;

/// Which way a figure improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Times, ratios of times.
    Lower,
    /// Throughputs.
    Higher,
}

/// One measured figure: what it is, `/`-separated
/// (`latency/write/64/ratio`), its unit (`us`, `x` for a ratio, `MiB/s`,
/// `calls/s`, ...), its value (a median unless the key says otherwise) and
/// the low and high end of its spread (min and max over rounds, or p10 and
/// p90), if measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub key: String,
    pub unit: String,
    pub better: Better,
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// A whole run: the layout's [`FORMAT`], when it ended (seconds since the
/// epoch), how many seconds it took, its verdict lines as printed and
/// every figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub format: u32,
    pub finished_unix: u64,
    pub duration_s: f64,
    pub verdicts: Vec<String>,
    pub figures: Vec<Figure>,
}

/// The figures of a run, as they are found.
struct Figures(Vec<Figure>);

/// The ends of a range over the rounds, as a figure's spread.
fn span(range: &rounds::Range) -> Option<(f64, f64)> {
    Some((range.min, range.max))
}

impl Figures {
    /// Adds a figure unless its value is no number.
    fn add(
        &mut self,
        better: Better,
        key: String,
        unit: &str,
        value: f64,
        spread: Option<(f64, f64)>,
    ) {
        let (low, high) = spread.unzip();
        if value.is_finite() {
            let unit = unit.to_string();
            self.0.push(Figure {
                key,
                unit,
                better,
                value,
                low,
                high,
            });
        }
    }
}

/// Every figure of `m` and `apps`: times, ratios of times and counts
/// better lower, throughputs higher.
pub fn collect(m: &Measurements, apps: &[AppRun]) -> Vec<Figure> {
    use Better::{Higher, Lower};
    let mut f = Figures(Vec::new());
    let latency = rounds::figures(&m.rounds).into_iter();
    let latency = latency.map(|fig| (format!("latency/{}/{}", fig.op, fig.size), fig));
    let cpu = rounds::cpu_figures(&m.cpu_rounds).into_iter();
    for (base, fig) in latency.chain(cpu.map(|fig| (format!("cpu/{}", fig.op), fig))) {
        let ranges = [("ratio", "x", fig.ratio), ("lite", "us", fig.lite)];
        for (name, unit, range) in ranges.into_iter().chain([("native", "us", fig.native)]) {
            let key = format!("{base}/{name}");
            f.add(Lower, key, unit, range.median, span(&range));
        }
    }
    for (op, _) in [super::dsm::READ].into_iter().chain(super::dsm::FAULTS) {
        if let Some(s) = super::dsm::spread(m, op) {
            f.add(
                Lower,
                format!("dsm/{op}/us"),
                "us",
                s.median,
                Some((s.p10, s.p90)),
            );
        }
        let ratio = rounds::Range::of(&super::dsm::ratios(m, op)).filter(|_| op != "read");
        if let Some(ratio) = ratio {
            f.add(
                Lower,
                format!("dsm/{op}/ratio"),
                "x",
                ratio.median,
                span(&ratio),
            );
        }
    }
    for n in &m.native {
        let key = format!("perftest/{}/{}", n.op, n.size);
        f.add(Lower, key, "us", n.typical, None);
    }
    for l in m.lite.values() {
        let key = format!("lite/{}/{}", l.op, l.size);
        f.add(Lower, key, "us", l.median, Some((l.p10, l.p90)));
    }
    for ((side, op, size, regions), p) in &m.region_curve {
        let live = if *regions > 0 {
            format!("/{regions}")
        } else {
            String::new()
        };
        let key = format!("regioncurve/{}/{op}/{size}{live}", side.name());
        f.add(Lower, key, "us", p.median, Some((p.p10, p.p90)));
    }
    for size in super::cluster_scale::sizes(m) {
        let base = format!("clustersize/{}", size.nodes);
        for (name, value) in [("join_ms", size.join_ms), ("barrier_ms", size.barrier_ms)] {
            if let Some(range) = value {
                let key = format!("{base}/{name}");
                f.add(Lower, key, "ms", range.median, span(&range));
            }
        }
        let calls = format!("{base}/all_to_all_calls_per_s");
        f.add(Higher, calls, "calls/s", size.rpc_calls_per_s, None);
    }
    for ((side, workload, processes), rounds) in &m.process_curve {
        let key = format!("processcurve/{}/{workload}/{processes}", side.name());
        let ops: Vec<f64> = rounds.iter().map(|p| p.ops_per_s).collect();
        if let Some(range) = rounds::Range::of(&ops) {
            let ops_key = format!("{key}/ops_per_s");
            f.add(Higher, ops_key, "op/s", range.median, span(&range));
        }
        if let Some(p) = rounds.first() {
            f.add(Lower, format!("{key}/qps"), "QPs", p.qps as f64, None);
            f.add(Lower, format!("{key}/mrs"), "MRs", p.mrs as f64, None);
        }
    }
    for b in m.lite_bw.values() {
        let depth = b.depth.map_or(String::new(), |d| format!("/depth{d}"));
        let key = format!("throughput/{}/{}{depth}", b.op, b.size);
        f.add(Higher, key, "MiB/s", b.average, Some((b.p10, b.p90)));
    }
    for n in &m.native_bw {
        let key = format!("perftest_bw/{}/{}/depth{}", n.op, n.size, n.depth);
        f.add(Higher, key, "MiB/s", n.average, None);
    }
    for r in m.lite_rpc_bw.values() {
        let key = format!("rpc_throughput/{}/threads{}", r.size, r.threads);
        f.add(Higher, key, "calls/s", r.calls_per_s, None);
    }
    for r in m.lite_rpc_async.values() {
        let key = format!("rpc_async/{}/depth{}", r.size, r.depth);
        f.add(Higher, key, "calls/s", r.calls_per_s, None);
    }
    for (contenders, values) in &m.lock_rounds {
        if let Some(range) = rounds::Range::of(values) {
            let key = format!("locks/contenders{contenders}/all/pairs_per_s");
            f.add(Higher, key, "pairs/s", range.median, span(&range));
        }
    }
    for l in m.locks.values() {
        let base = format!(
            "locks/contenders{}/node{}/home{}",
            l.contenders, l.node, l.home
        );
        let pair = Some((l.pair.p10, l.pair.p90));
        f.add(Lower, format!("{base}/pair"), "us", l.pair.median, pair);
        let per_s = format!("{base}/pairs_per_s");
        f.add(Higher, per_s, "pairs/s", l.pairs_per_s, None);
    }
    for (phase, setting) in isolation::phases(&m.qos) {
        if let Some(s) = isolation::phase_spread(&m.qos, phase, setting) {
            let key = format!("qos/{phase}/{setting}");
            f.add(Lower, key, "us", s.median, Some((s.p10, s.p90)));
        }
    }
    for setting in ["on", "off"] {
        let ratios = isolation::round_ratios(&m.qos, setting);
        if let Some(ratio) = rounds::Range::of(&ratios) {
            // One round has no spread to judge a change by: the default
            // tolerance applies.
            let spread = span(&ratio).filter(|_| ratios.len() > 1);
            let key = format!("qos/ratio/{setting}");
            f.add(Lower, key, "x", ratio.median, spread);
        }
    }
    for r in m.regions.values() {
        let key = format!("regions/{}/{}", r.size, r.lmrs);
        f.add(Lower, key, "regions", r.memory_regions as f64, None);
    }
    // The applications ran in rounds: median and range of the seconds.
    let mut app_seconds: BTreeMap<(String, usize, String), Vec<f64>> = BTreeMap::new();
    for run in apps.iter().filter(|r| r.checked) {
        app_seconds
            .entry((run.app.clone(), run.cluster, run.transport.clone()))
            .or_default()
            .push(run.seconds);
    }
    for ((app, cluster, transport), seconds) in app_seconds {
        if let Some(range) = rounds::Range::of(&seconds) {
            let key = format!("apps/{app}/{cluster}/{transport}");
            f.add(Lower, key, "s", range.median, span(&range));
        }
    }
    f.0
}

/// Writes `report` to `path` as JSON.
pub fn write(report: &Report, path: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(report).context("encoding the report")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a report written by [`write`].
pub fn read(path: &Path) -> Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a benchmark report", path.display()))?;
    anyhow::ensure!(
        report.format == FORMAT,
        "{} has layout {}, this tool reads {FORMAT}",
        path.display(),
        report.format
    );
    Ok(report)
}

/// How one figure moved between two reports: `worse_by` is new / old - 1,
/// signed so that positive is worse; a regression or improvement is a
/// change beyond both runs' spreads.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub key: String,
    pub unit: String,
    pub old: f64,
    pub new: f64,
    pub worse_by: f64,
    pub regression: bool,
    pub improvement: bool,
}

/// The end of `f`'s spread above its value (`up`) or below it,
/// or the value moved by [`DEFAULT_TOLERANCE`] without a spread.
fn bound(f: &Figure, up: bool) -> f64 {
    let measured = if up { f.high } else { f.low };
    measured.unwrap_or(if up {
        f.value * (1.0 + DEFAULT_TOLERANCE)
    } else {
        f.value * (1.0 - DEFAULT_TOLERANCE)
    })
}

/// The figures both reports have, in the new report's order. A figure is a
/// regression when its new value is worse than the old spread's worse end
/// and the old value is better than the new spread's better end (so two
/// overlapping spreads never flag); improvements likewise.
pub fn changes(old: &Report, new: &Report) -> Vec<Change> {
    let old_by_key: BTreeMap<&str, &Figure> =
        old.figures.iter().map(|f| (f.key.as_str(), f)).collect();
    new.figures
        .iter()
        .filter_map(|n| {
            let o = old_by_key.get(n.key.as_str())?;
            if o.value == 0.0 {
                return None;
            }
            let higher_is_worse = n.better == Better::Lower;
            let change = n.value / o.value - 1.0;
            let worse_by = if higher_is_worse { change } else { -change };
            let beyond = |a: &Figure, b: &Figure, a_up: bool| {
                // Whether a's value lies beyond b's spread on a_up's side.
                if a_up {
                    a.value > bound(b, true) && bound(a, false) > b.value
                } else {
                    a.value < bound(b, false) && bound(a, true) < b.value
                }
            };
            Some(Change {
                key: n.key.clone(),
                unit: n.unit.clone(),
                old: o.value,
                new: n.value,
                worse_by,
                regression: beyond(n, o, higher_is_worse),
                improvement: beyond(n, o, !higher_is_worse),
            })
        })
        .collect()
}

/// `cargo xtask bench --compare OLD NEW`: prints every shared figure's
/// change and fails when one regressed beyond the spreads.
pub fn compare(old_path: &Path, new_path: &Path) -> Result<()> {
    let old = read(old_path)?;
    let new = read(new_path)?;
    let changes = changes(&old, &new);
    ui::say(&format!(
        "==> {} against {}: {} figures in both",
        new_path.display(),
        old_path.display(),
        changes.len()
    ));
    for c in &changes {
        let flag = if c.regression {
            "  REGRESSION"
        } else if c.improvement {
            "  improved"
        } else {
            ""
        };
        let direction = if c.worse_by > 0.0 { "worse" } else { "better" };
        ui::say(&format!(
            "    {:<48} {:>12.2} -> {:>12.2} {:<8} {:>6.1}% {direction}{flag}",
            c.key,
            c.old,
            c.new,
            c.unit,
            100.0 * c.worse_by.abs()
        ));
    }
    let regressions = changes.iter().filter(|c| c.regression).count();
    anyhow::ensure!(
        regressions == 0,
        "{regressions} figures regressed beyond the measured spread"
    );
    ui::say("    no figure regressed beyond the measured spread");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse;
    use Better::{Higher, Lower};

    fn figure(key: &str, better: Better, value: f64, spread: Option<(f64, f64)>) -> Figure {
        let mut f = Figures(Vec::new());
        f.add(better, key.to_string(), "us", value, spread);
        f.0.remove(0)
    }

    fn report(figures: Vec<Figure>) -> Report {
        Report {
            format: FORMAT,
            finished_unix: 0,
            duration_s: 1.0,
            verdicts: Vec::new(),
            figures,
        }
    }

    #[test]
    fn a_report_survives_the_file() {
        let dir = crate::fsutil::TempDir::new("lite-figures").expect("a directory");
        let path = dir.path().join("bench.json");
        let ratio = figure("latency/write/64/ratio", Lower, 1.1, Some((1.0, 1.2)));
        let original = report(vec![ratio]);
        write(&original, &path).expect("write");
        assert_eq!(read(&path).expect("read"), original);
        std::fs::write(&path, "{\"format\": 99}").expect("write");
        assert!(read(&path).is_err());
        // The committed report, which `--compare` is given as the old run.
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-report/bench.json");
        let committed = read(&committed).expect("the committed report");
        assert!(!committed.figures.is_empty());
        let same = changes(&committed, &committed);
        assert_eq!(same.len(), committed.figures.len());
        assert!(same.iter().all(|c| !c.regression && !c.improvement));
    }

    #[test]
    fn only_changes_beyond_both_spreads_count() {
        let old = report(vec![
            figure("a", Lower, 100.0, Some((95.0, 105.0))),
            figure("b", Lower, 100.0, Some((95.0, 105.0))),
            figure("c", Higher, 100.0, Some((95.0, 105.0))),
            figure("d", Lower, 100.0, None),
            figure("gone", Lower, 1.0, None),
        ]);
        let new = report(vec![
            // Worse, but the spreads overlap.
            figure("a", Lower, 104.0, Some((100.0, 110.0))),
            // Worse beyond both spreads.
            figure("b", Lower, 130.0, Some((120.0, 140.0))),
            // A throughput that fell beyond both spreads.
            figure("c", Higher, 70.0, Some((65.0, 75.0))),
            // No spread: 10% either way is noise, 20% is not.
            figure("d", Lower, 80.0, None),
            figure("new", Lower, 1.0, None),
        ]);
        let changes = changes(&old, &new);
        let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c", "d"]);
        assert!(!changes[0].regression && !changes[0].improvement);
        assert!(changes[1].regression);
        assert!((changes[1].worse_by - 0.30).abs() < 1e-9);
        assert!(changes[2].regression, "{:?}", changes[2]);
        assert!((changes[2].worse_by - 0.30).abs() < 1e-9);
        assert!(changes[3].improvement && !changes[3].regression);
    }

    #[test]
    fn figures_come_from_rounds_one_off_series_and_isolation_rounds() {
        let mut m = Measurements::default();
        let (node2, qos) = (crate::bench::rounds::tests::NODE2, parse::tests::QOS_LOG);
        m.add_log("node2", &format!("{node2}{qos}"));
        // Two LITE-DSM rounds: the read fault 3 and 2 times the read.
        let (begin, end) = lite_bench_record::DSM_ROUND;
        let record = parse::tests::latency_record_4k;
        for (round, read, fault) in [(1, 200, 600), (2, 300, 600)] {
            let text = format!(
                "{begin}{round}\n{}{}{end}{round}\n",
                record("read", read),
                record("dsm_read", fault)
            );
            m.add_log("dsm/node1", &text);
        }
        let app = "LITE-APP app=log transport=lite nodes=2 work=1 unit=records seconds=2.5 \
                   per_s=0.4 checked=yes";
        let apps = super::super::apps::parse_app_runs(app, 2);
        let figures = collect(&m, &apps);
        // Value, low and high end of the spread, to hundredths; `-` for no
        // spread, None for no figure.
        let find = |key: &str| {
            let figure = figures.iter().find(|f| f.key == key)?;
            let ends =
                [figure.low, figure.high].map(|end| end.map_or("-".into(), |e| format!("{e:.2}")));
            Some(format!("{:.2} {} {}", figure.value, ends[0], ends[1]))
        };
        let want = [
            // The rounds' ratios 1.10, 1.02 and 1.03.
            ("latency/write/64/ratio", Some("1.03 1.02 1.10")),
            ("lite/write/64", Some("999.00 900.00 1100.00")),
            ("apps/log/2/lite", Some("2.50 2.50 2.50")),
            // A round series is no one-off.
            ("lite/rpc/64", None),
            // Isolation: the phases' medians over the rounds, the ratios of
            // the rounds 1.3 and 1.1; measured in one round only, no spread
            // of zero width.
            ("qos/unloaded/on", Some("1500.00 1350.00 1800.00")),
            ("qos/ratio/on", Some("1.20 1.10 1.30")),
            ("qos/ratio/off", Some("4.00 - -")),
            // LITE-DSM: ratios per round, the medians over the rounds.
            ("dsm/dsm_read/ratio", Some("2.50 2.00 3.00")),
            ("dsm/read/us", Some("250.00 150.00 350.00")),
            ("dsm/read/ratio", None),
        ];
        for (key, want) in want {
            assert_eq!(find(key).as_deref(), want, "{key}");
        }
    }
}
