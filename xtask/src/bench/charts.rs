//! Charts of a benchmark run, drawn with plotters as SVG and PNG files:
//! latency against size per operation (LITE beside the native verbs
//! baseline and perftest), the interleaved comparison's ratios with their
//! spread over the rounds, throughput against depth, RPC throughput, the
//! memory region curve, lock times and the isolation run. Text is laid out with the DejaVu Sans font (package
//! fonts-dejavu-core), loaded once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::isolation;
use super::parse::{Measurements, Spread};
use super::rounds::{self, Figure};
use super::{ASYNC_SIZES, SIZES};

/// The font every chart's text uses.
pub const FONT_FILE: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Family name the charts ask for.
const FAMILY: &str = "sans-serif";

/// Pixels of every chart.
const SIZE: (u32, u32) = (900, 560);

/// Colours of the series, in order.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// Registers [`FONT_FILE`] once; later calls return the first outcome.
fn font() -> Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_FILE)
                .map_err(|e| format!("cannot read {FONT_FILE} (package fonts-dejavu-core): {e}"))?;
            // plotters keeps the font for the process's lifetime.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font(FAMILY, FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_FILE} is not a usable font"))
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// A chart of named series of (x, y) points, x ascending, drawn as lines
/// into files `name` (without extension).
pub struct LineChart {
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// A chart of one horizontal bar per figure: its median as a dot on a bar
/// from the low to the high end of its spread, and its target as a tick;
/// with the summary's caption under it and a vertical line at `reference`
/// (1 for ratios), if anywhere.
pub struct RangeChart {
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub caption: String,
    pub reference: Option<f64>,
    pub entries: Vec<Entry>,
}

/// A figure of a range chart: label, median, low, high, target.
pub type Entry = (String, f64, f64, f64, Option<f64>);

/// The entry of a median over rounds and its range.
fn range_entry(label: String, range: &rounds::Range, target: Option<f64>) -> Entry {
    (label, range.median, range.min, range.max, target)
}

/// The entry of a median and its 10th to 90th percentile.
fn spread_entry(label: String, spread: &Spread) -> Entry {
    (label, spread.median, spread.p10, spread.p90, None)
}

/// plotters' drawing errors (which are `Debug` only) as this tool's errors.
fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("{error:?}")
}

/// A tick label: no decimals from 10 on or for whole numbers, two otherwise.
fn tick(value: f64) -> String {
    if value.abs() >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Axis bounds around `values`, padded; logarithmic axes stay positive.
fn bounds(values: impl Iterator<Item = f64>, log: bool) -> Option<(f64, f64)> {
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        low = low.min(v);
        high = high.max(v);
    }
    if low > high {
        return None;
    }
    Some(if log {
        (low / 1.5, high * 1.5)
    } else {
        // Linear axes start at zero, so that heights compare.
        let pad = ((high - low) * 0.1).max(high.abs() * 0.05).max(1e-9);
        (low.min(0.0), high + pad)
    })
}

fn draw_lines<DB: DrawingBackend>(chart: &LineChart, area: &DrawingArea<DB, Shift>) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let points = || chart.series.iter().flat_map(|(_, p)| p.iter().copied());
    let (x0, x1) = bounds(points().map(|p| p.0), chart.log_x).context("no points")?;
    let (y0, y1) = bounds(points().map(|p| p.1), chart.log_y).context("no points")?;
    area.fill(&WHITE).map_err(plot_error)?;
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&chart.title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    macro_rules! finish {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_label_formatter(&|x| tick(*x))
                .y_label_formatter(&|y| tick(*y))
                .x_desc(chart.x_label.as_str())
                .y_desc(chart.y_label.as_str())
                .label_style((FAMILY, 14))
                .draw()
                .map_err(plot_error)?;
            for (i, (name, pts)) in chart.series.iter().enumerate() {
                // PANIC: the index is taken modulo the palette's length.
                let colour = PALETTE[i % PALETTE.len()];
                ctx.draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
                    .map_err(plot_error)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
                ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                    .map_err(plot_error)?;
            }
            ctx.configure_series_labels()
                .label_font((FAMILY, 14))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(plot_error)?;
        }};
    }
    match (chart.log_x, chart.log_y) {
        (true, true) => finish!(builder
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(plot_error)?),
        (true, false) => finish!(builder
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(plot_error)?),
        (false, true) => finish!(builder
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(plot_error)?),
        (false, false) => finish!(builder
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(plot_error)?),
    }
    area.present().map_err(plot_error)?;
    Ok(())
}

/// Pixels the labels of a range chart need at the charts' 14-point font,
/// at least 130.
fn label_width(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    u32::try_from(longest)
        .unwrap_or(u32::MAX)
        .saturating_mul(8)
        .saturating_add(16)
        .max(130)
}

/// Height of a range chart with `entries` figures: one row each.
fn range_chart_height(entries: usize) -> u32 {
    let rows = u32::try_from(entries).unwrap_or(u32::MAX);
    rows.saturating_mul(28).saturating_add(140).max(SIZE.1)
}

fn draw_ranges<DB: DrawingBackend>(chart: &RangeChart, area: &DrawingArea<DB, Shift>) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let values = chart
        .entries
        .iter()
        .flat_map(|e| [e.1, e.2, e.3, e.4.unwrap_or(e.1)]);
    let (_, high) = bounds(values.chain(chart.reference), false).context("no figures")?;
    let n = chart.entries.len();
    area.fill(&WHITE).map_err(plot_error)?;
    // Figures run down the chart, the first at the top.
    let row = |i: usize| (n - 1 - i) as f64;
    let labels: Vec<String> = chart.entries.iter().map(|e| e.0.clone()).collect();
    let mut ctx = ChartBuilder::on(area)
        .caption(&chart.title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(label_width(&labels))
        .build_cartesian_2d(0.0f64..high, -0.5f64..(n as f64 - 0.5))
        .map_err(plot_error)?;
    ctx.configure_mesh()
        .y_labels(n)
        .x_label_formatter(&|x| tick(*x))
        .y_label_formatter(&|y| {
            let r = y.round();
            if (y - r).abs() > 1e-6 || r < 0.0 || r >= n as f64 {
                return String::new();
            }
            // PANIC: 0 <= r < n, so n - 1 - r is an index of `labels`.
            labels[n - 1 - r as usize].clone()
        })
        .x_desc(chart.x_label.as_str())
        .label_style((FAMILY, 14))
        .disable_y_mesh()
        .draw()
        .map_err(plot_error)?;
    if let Some(x) = chart.reference {
        ctx.draw_series(std::iter::once(PathElement::new(
            vec![(x, -0.5), (x, n as f64 - 0.5)],
            BLACK.mix(0.5),
        )))
        .map_err(plot_error)?;
    }
    for (i, (_, median, low, high, target)) in chart.entries.iter().enumerate() {
        let y = row(i);
        let colour = match target {
            Some(t) if median <= t => PALETTE[2],
            Some(_) => PALETTE[0],
            None => PALETTE[1],
        };
        ctx.draw_series(std::iter::once(ErrorBar::new_horizontal(
            y,
            *low,
            *median,
            *high,
            colour.filled(),
            10,
        )))
        .map_err(plot_error)?;
        if let Some(t) = target {
            ctx.draw_series(std::iter::once(PathElement::new(
                vec![(*t, y - 0.35), (*t, y + 0.35)],
                BLACK.stroke_width(2),
            )))
            .map_err(plot_error)?;
        }
    }
    area.present().map_err(plot_error)?;
    Ok(())
}

/// Draws `$chart` with `$draw` into `$dir/<name>.svg` and `.png`, `$size`
/// pixels, and returns the SVG's path: a macro, as `$draw` is generic over
/// the two backends.
macro_rules! draw_both {
    ($draw:ident, $chart:expr, $dir:expr, $size:expr) => {{
        font()?;
        let svg = $dir.join(format!("{}.svg", $chart.name));
        let png = $dir.join(format!("{}.png", $chart.name));
        $draw($chart, &SVGBackend::new(&svg, $size).into_drawing_area())
            .with_context(|| format!("drawing {}", svg.display()))?;
        $draw($chart, &BitMapBackend::new(&png, $size).into_drawing_area())
            .with_context(|| format!("drawing {}", png.display()))?;
        Ok(svg)
    }};
}

impl LineChart {
    /// The chart of those of `series` that have points, its axes labelled
    /// `(x, y)` and logarithmic as `log` says; `None` if no series has any.
    pub fn of(
        name: &str,
        title: String,
        (x_label, y_label): (&str, &str),
        (log_x, log_y): (bool, bool),
        mut series: Vec<(String, Vec<(f64, f64)>)>,
    ) -> Option<LineChart> {
        series.retain(|(_, points)| !points.is_empty());
        (!series.is_empty()).then(|| LineChart {
            name: name.to_string(),
            title,
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            log_x,
            log_y,
            series,
        })
    }

    /// Draws the chart as SVG and PNG in `dir`; returns the SVG's path.
    pub fn draw(&self, dir: &Path) -> Result<PathBuf> {
        draw_both!(draw_lines, self, dir, SIZE)
    }
}

impl RangeChart {
    /// The chart of `entries`, its text as named, with a reference line
    /// at `reference`; `None` without entries.
    fn of(
        name: &str,
        title: &str,
        x_label: &str,
        caption: &str,
        reference: Option<f64>,
        entries: Vec<Entry>,
    ) -> Option<RangeChart> {
        (!entries.is_empty()).then(|| RangeChart {
            name: name.into(),
            title: title.into(),
            x_label: x_label.into(),
            caption: caption.into(),
            reference,
            entries,
        })
    }

    /// Draws the chart as SVG and PNG in `dir`; returns the SVG's path.
    pub fn draw(&self, dir: &Path) -> Result<PathBuf> {
        let size = (SIZE.0, range_chart_height(self.entries.len()));
        draw_both!(draw_ranges, self, dir, size)
    }
}

/// A series' points from `(size, value)` pairs, sizes as x.
pub(super) fn by_size(points: impl Iterator<Item = (u64, f64)>) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = points
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .map(|(s, v)| (s as f64, v))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// The latency charts: the operation, its title, and the perftest latency
/// test it is shown beside with the factor that makes perftest's time
/// comparable (2 for a round trip: perftest reports half a ping-pong).
const LATENCY_CHARTS: [(&str, &str, &str, f64); 3] = [
    ("write", "Synchronous RDMA write", "write", 1.0),
    ("read", "Synchronous RDMA read", "read", 1.0),
    (
        "rpc",
        "RPC round trip (request and reply of the same size)",
        "send",
        2.0,
    ),
];

/// Every chart `m` has data for; a chart without data is left out.
pub fn charts(m: &Measurements) -> (Vec<LineChart>, Vec<RangeChart>) {
    let figures: Vec<Figure> = rounds::figures(&m.rounds);
    let mut lines = Vec::new();
    for (op, title, perftest_op, perftest_factor) in LATENCY_CHARTS {
        let perftest_name = if perftest_factor == 1.0 {
            "perftest (half a busy-polling ping-pong)".to_string()
        } else {
            format!("perftest ib_{perftest_op}_lat x{perftest_factor} (busy polling)")
        };
        let compared = figures.iter().filter(|f| f.op == op);
        let lite = by_size(compared.clone().map(|f| (f.size, f.lite.median)));
        let native = by_size(compared.map(|f| (f.size, f.native.median)));
        let one_off = m
            .lite
            .values()
            .filter(|l| l.op == op && SIZES.contains(&l.size));
        let one_off = by_size(one_off.map(|l| (l.size, l.median)));
        let perftest = m.native.iter().filter(|n| n.op == perftest_op);
        let perftest = by_size(perftest.map(|n| (n.size, n.typical * perftest_factor)));
        let series = vec![
            ("LITE (rounds)".to_string(), lite),
            ("native verbs, same wait (rounds)".to_string(), native),
            ("LITE (one-off series)".to_string(), one_off),
            (perftest_name, perftest),
        ];
        lines.extend(LineChart::of(
            &format!("latency-{op}"),
            format!("{title}: median latency"),
            ("bytes", "microseconds"),
            (true, true),
            series,
        ));
    }
    for op in ["write", "read"] {
        for size in ASYNC_SIZES {
            let lite = by_size(
                m.lite_bw
                    .values()
                    .filter(|b| b.op == format!("{op}_async") && b.size == size)
                    .filter_map(|b| Some((u64::from(b.depth?), b.average))),
            );
            let native = by_size(
                m.native_bw
                    .iter()
                    .filter(|n| n.op == op && n.size == size)
                    .map(|n| (u64::from(n.depth), n.average)),
            );
            lines.extend(LineChart::of(
                &format!("throughput-{op}-{size}"),
                format!("{size} B RDMA {op}s: throughput against operations in flight"),
                ("operations in flight", "MiB/s"),
                (true, false),
                vec![
                    ("LITE asynchronous".to_string(), lite),
                    (format!("perftest ib_{op}_bw"), native),
                ],
            ));
        }
    }
    let rpc_async = by_size(
        m.lite_rpc_async
            .values()
            .map(|r| (u64::from(r.depth), r.calls_per_s)),
    );
    let rpc_threads = by_size(
        m.lite_rpc_bw
            .values()
            .map(|r| (u64::from(r.threads), r.calls_per_s)),
    );
    lines.extend(LineChart::of(
        "rpc-throughput",
        "64 B RPC throughput".into(),
        ("calls in flight (N)", "calls per second"),
        (true, false),
        vec![
            ("one thread, N asynchronous calls".to_string(), rpc_async),
            ("N threads, synchronous calls".to_string(), rpc_threads),
        ],
    ));
    lines.extend(super::region_curve::charts(m));
    lines.extend(super::process_curve::charts(m));
    lines.extend(super::cluster_scale::charts(m));
    let ratios = figures
        .iter()
        .map(|f| range_entry(format!("{} {} B", f.op, f.size), &f.ratio, f.target));
    let ratios = RangeChart::of(
        "ratios",
        "LITE against the native verbs baseline, per interleaved round",
        "LITE / native: median of the rounds, bar from the lowest to the highest",
        "Median of the per-round ratios, bar from the lowest to the highest round; the black \
         tick is the target (green: met).",
        Some(1.0),
        ratios.collect(),
    );
    let ranges = [
        ratios,
        cpu_chart(m),
        lock_chart(m),
        qos_chart(m),
        dsm_chart(m),
    ];
    (lines, ranges.into_iter().flatten().collect())
}

/// CPU time per operation of LITE and of the native baseline on each VM
/// and on both, median over the rounds on a min–max bar.
fn cpu_chart(m: &Measurements) -> Option<RangeChart> {
    let mut entries = Vec::new();
    for f in rounds::cpu_figures(&m.cpu_rounds) {
        let vm = if f.op == "both" {
            "both VMs".to_string()
        } else {
            format!("{} VM", f.op)
        };
        for (who, range) in [("LITE", &f.lite), ("native", &f.native)] {
            entries.push(range_entry(format!("{who}, {vm}"), range, None));
        }
    }
    RangeChart::of(
        "cpu",
        "CPU time per operation, interleaved rounds",
        "microseconds of busy CPU per operation: median of the rounds, bar from the lowest to \
         the highest",
        "Busy CPU time of each whole VM (kernel threads included) while each program ran its \
         round's series, over the operations of those series.",
        None,
        entries,
    )
}

/// Lock/unlock pair times: uncontended on a lock kept by another node and
/// on one kept by the caller's node, and the acquire time of every node
/// together for each number of contending nodes; median on a p10–p90 bar.
fn lock_chart(m: &Measurements) -> Option<RangeChart> {
    let mut entries = Vec::new();
    for r in m.locks.values().filter(|r| r.contenders == 1) {
        let home = if r.home == r.node {
            "own node"
        } else {
            "another node"
        };
        entries.push(spread_entry(
            format!("uncontended pair, home on {home}"),
            &r.pair,
        ));
    }
    let contenders: BTreeSet<u32> = m.lock_samples.keys().map(|&(c, _)| c).collect();
    for count in contenders {
        let all: Vec<f64> = m
            .lock_samples
            .iter()
            .filter(|(&(c, _), _)| c == count)
            .flat_map(|(_, samples)| samples.iter().copied())
            .collect();
        if let Some(spread) = Spread::of(&all) {
            entries.push(spread_entry(
                format!("acquire, {count} nodes contending"),
                &spread,
            ));
        }
    }
    RangeChart::of(
        "locks",
        "Locks: lite_lock + lite_unlock, and lite_lock under contention",
        "microseconds: median, bar from the 10th to the 90th percentile",
        "Uncontended pairs on a lock kept by the other node and on one kept by the caller's own \
         node; the acquire times of every contending node together (the lock kept by a node \
         that does not contend).",
        None,
        entries,
    )
}

/// LITE-DSM's page faults beside the LITE read of a page they are compared
/// with, medians over the rounds of the median on a p10–p90 bar.
fn dsm_chart(m: &Measurements) -> Option<RangeChart> {
    let series = [super::dsm::READ].into_iter().chain(super::dsm::FAULTS);
    let entries = series
        .filter_map(|(op, what)| Some(spread_entry(what.to_string(), &super::dsm::spread(m, op)?)))
        .collect::<Vec<_>>();
    // The LITE read alone is no DSM chart.
    if entries.len() < 2 {
        return None;
    }
    RangeChart::of(
        "dsm",
        "LITE-DSM page faults beside a LITE read of the page",
        "microseconds: median, bar from the 10th to the 90th percentile (medians over the \
         rounds)",
        "Faults on pages touched for the first time, whose directory is local and whose data \
         lives on the two other VMs, each moving 4 KiB with an RDMA read; a write fault first \
         takes back the copies of the pages' readers. In rounds, taking turns with the LITE \
         reads.",
        None,
        entries,
    )
}

/// The isolation run: a high-priority process's 64 B write latency alone,
/// and while low-priority processes load the link with QoS on and off, as
/// medians over the rounds that measured each phase.
fn qos_chart(m: &Measurements) -> Option<RangeChart> {
    let entries = isolation::phases(&m.qos).filter_map(|(phase, qos)| {
        let spread = isolation::phase_spread(&m.qos, phase, qos)?;
        Some(spread_entry(format!("{phase}, QoS {qos}"), &spread))
    });
    RangeChart::of(
        "isolation",
        "Isolation: high-priority 64 B writes under low-priority load",
        "microseconds: median, bar from the 10th to the 90th percentile (medians over the \
         rounds)",
        "The high-priority process's writes alone and while low-priority processes write 64 KiB \
         in a loop, alternated in rounds with QoS on; the first round also with QoS off.",
        None,
        entries.collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::assert_has;

    #[test]
    fn charts_are_drawn_as_svg_and_png() {
        use crate::bench::parse::tests::{LOCK_LOG, QOS_LOG};
        let mut m = Measurements::default();
        let node2 = crate::bench::rounds::tests::NODE2;
        let fault = crate::bench::parse::tests::latency_record_4k;
        let (begin, end) = lite_bench_record::DSM_ROUND;
        let dsm = format!(
            "{begin}1\n{}{}{end}1\n",
            fault("read", 300),
            fault("dsm_read", 450)
        );
        m.add_log("node2", &format!("{node2}{LOCK_LOG}{QOS_LOG}{dsm}"));
        let (lines, ranges) = charts(&m);
        let names: Vec<&str> = lines.iter().map(|c| c.name.as_str()).collect();
        // The LITE-DSM phase's read of a page is none of the latency series.
        assert_eq!(names, ["latency-write", "latency-rpc"]);
        let names: Vec<&str> = ranges.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ratios", "locks", "isolation", "dsm"]);
        assert_eq!(ranges[0].entries.len(), 2);
        assert_eq!(ranges[0].reference, Some(1.0));
        let locks = &ranges[1];
        let labels: Vec<&str> = locks.entries.iter().map(|e| e.0.as_str()).collect();
        let pairs = "uncontended pair, home on another node; uncontended pair, home on own node";
        let want = format!("{pairs}; acquire, 4 nodes contending");
        assert_eq!(labels, want.split("; ").collect::<Vec<_>>());
        assert_eq!(locks.entries[0].1, 1600.0);
        // Every contending node's samples together (the broken one left out).
        let contended = &locks.entries[2];
        assert!(contended.2 <= contended.1 && contended.1 <= contended.3);
        assert!(ranges[2].entries.len() >= 2);
        // The faults measured, beside the LITE read.
        let dsm: Vec<(&str, f64)> = ranges[3]
            .entries
            .iter()
            .map(|e| (e.0.as_str(), e.1))
            .collect();
        assert_eq!(dsm, [("LITE read of 4 KiB", 300.0), ("read fault", 450.0)]);
        assert!(ranges[1..].iter().all(|r| r.reference.is_none()));
        let temp = crate::fsutil::TempDir::new("lite-charts").expect("a directory");
        let dir = temp.path();
        let svg = lines[0].draw(dir).expect("latency chart");
        let text = std::fs::read_to_string(&svg).expect("svg");
        assert_has(&text, "<svg");
        assert_has(&text, "LITE (rounds)");
        let png = std::fs::read(dir.join("latency-write.png")).expect("png");
        assert_eq!(&png[1..4], b"PNG");
        for chart in &ranges {
            chart.draw(dir).expect("range chart");
            assert!(dir.join(format!("{}.png", chart.name)).exists());
        }
    }
}
