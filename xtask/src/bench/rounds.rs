//! The interleaved comparison: in each round the guests run, one group of
//! operations at a time (writes, reads, the atomics, RPC), LITE's series
//! (`lite-bench --series latency --ops`) and the native verbs baseline's
//! (`lite-verbs-bench`, which does exactly what LITE does for each
//! operation, with LITE's wait policy), in the same VMs. The emulator's
//! speed drifts by tens of percent over seconds, so the two programs take
//! turns within every series, in blocks of a few operations; the ratio is
//! computed per round, and the report gives the median ratio with its
//! min-max over the rounds. A verdict is "met" only when the median ratio
//! is within target, and the report says when the rounds disagree about
//! it. Each round then runs the same groups once more, one program after
//! the other, and each program's busy CPU time on each VM, kernel threads
//! included, gives the CPU time per operation of both sides
//! ([`cpu_figures`]).

use std::collections::BTreeMap;

use lite_bench_record::percentile;

use super::parse::{records, Latency, Record, Side, Spread};
use super::report::Table;

/// What a round measures, which the markers around its lines in a guest
/// log tell: the text before the round number on the lines that open and
/// close it.
pub type RoundKind = (&'static str, &'static str);

/// A latency round, the two programs taking turns within every series.
pub const LATENCY_ROUND: RoundKind = ("LITE-ROUND-BEGIN round=", "LITE-ROUND-END round=");

/// A CPU round, each program running alone.
pub const CPU_ROUND: RoundKind = ("LITE-CPU-ROUND-BEGIN round=", "LITE-CPU-ROUND-END round=");

/// Operations compared, in report order, with the size every target
/// applies to (`None`: every size) and the target ratio.
const TARGETS: [(&str, Option<u64>, f64); 5] = [
    ("write", Some(64), 1.05),
    ("read", Some(64), 1.05),
    ("fetch_add", None, 1.05),
    ("compare_swp", None, 1.05),
    ("rpc", None, 1.10),
];

/// The operations compared, as the guests' programs name them.
#[cfg(test)]
pub fn compared_ops() -> impl Iterator<Item = &'static str> {
    TARGETS.iter().map(|&(op, _, _)| op)
}

/// USER_HZ: ticks per second of the guests' `/proc/stat`.
const TICKS_PER_S: f64 = 100.0;

/// The series of one round, the native verbs baseline's and LITE's by
/// (operation, size), and the busy CPU ticks of each VM while each program
/// ran, summed over the round's groups of operations, by (side, program):
/// `("client", "lite")`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Round {
    pub native: BTreeMap<(String, u64), Latency>,
    pub lite: BTreeMap<(String, u64), Latency>,
    pub cpu: BTreeMap<(String, String), u64>,
}

/// The text of `log` outside every round of `kind`, and each such round's
/// text by its number. An unterminated round (a VM stopped mid-round) ends
/// the log.
pub fn split_rounds(log: &str, (begin, end): RoundKind) -> (String, BTreeMap<u32, String>) {
    let mut outside = String::new();
    let mut rounds: BTreeMap<u32, String> = BTreeMap::new();
    let mut current: Option<u32> = None;
    for line in log.lines() {
        if let Some(number) = marker(line, begin) {
            current = Some(number);
            continue;
        }
        if marker(line, end).is_some() {
            current = None;
            continue;
        }
        let text = match current {
            Some(number) => rounds.entry(number).or_default(),
            None => &mut outside,
        };
        text.push_str(line);
        text.push('\n');
    }
    (outside, rounds)
}

/// The round number after `tag` on `line`.
fn marker(line: &str, tag: &str) -> Option<u32> {
    let (_, rest) = line.split_once(tag)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Adds the series of one round's text (of any node) to `round`; where two
/// nodes report the same series the first is kept.
pub fn add_round_text(round: &mut Round, text: &str) {
    for (side, record) in records(text) {
        match record {
            Record::Latency(series) => {
                let of_side = match side {
                    Side::Lite => &mut round.lite,
                    Side::Native => &mut round.native,
                };
                of_side
                    .entry((series.op.clone(), series.size))
                    .or_insert(series);
            }
            // A CPU round runs each program once per group of operations.
            Record::Cpu(cpu) => {
                *round.cpu.entry((cpu.side, cpu.program)).or_insert(0) += cpu.busy_ticks;
            }
            _ => {}
        }
    }
}

/// Busy CPU microseconds per operation of `program` on `side` in `round`:
/// the VM's busy ticks (both VMs' for `both`) over the operations of every
/// series that program reported in the round.
fn cpu_per_op(round: &Round, side: &str, program: &str) -> Option<f64> {
    let series = if program == "lite" {
        &round.lite
    } else {
        &round.native
    };
    let ops: u64 = series.values().map(|s| s.iters).sum();
    let ticks = |side: &str| {
        round
            .cpu
            .get(&(side.to_string(), program.to_string()))
            .copied()
    };
    let busy = match side {
        "both" => ticks("client")? + ticks("server")?,
        _ => ticks(side)?,
    };
    (ops > 0).then(|| busy as f64 / TICKS_PER_S * 1e6 / ops as f64)
}

/// CPU time per operation on the client, on the server and on both, each
/// side measured in at least one round with a native time above zero: the
/// figures of "operations" `client`, `server` and `both`, of size 0.
pub fn cpu_figures(rounds: &BTreeMap<u32, Round>) -> Vec<Figure> {
    ["client", "server", "both"]
        .into_iter()
        .filter_map(|side| {
            let pairs: Vec<(f64, f64)> = rounds
                .values()
                .filter_map(|round| {
                    let native = cpu_per_op(round, side, "verbs")?;
                    let lite = cpu_per_op(round, side, "lite")?;
                    (native > 0.0).then_some((native, lite))
                })
                .collect();
            Figure::of(side.to_string(), 0, &pairs)
        })
        .collect()
}

/// The CPU table, one string per line.
pub fn cpu_table(figures: &[Figure]) -> Vec<String> {
    let note = "busy CPU time of the whole VM (kernel threads included) per operation of the \
                round's series, microseconds";
    let table = Table::noted(
        &[note],
        "<8 VM|>6 rounds||>20 native (min-max)||>20 LITE (min-max)||>20 LITE/native (min-max)",
    );
    table.lines(figures.iter().map(|f| {
        let cells = [f.native.show(1), f.lite.show(1), f.ratio.show(2)];
        [f.op.clone(), f.rounds.to_string()]
            .into_iter()
            .chain(cells)
    }))
}

/// The CPU figures' summary line, if both VMs were measured together.
pub fn cpu_line(figures: &[Figure]) -> Option<String> {
    let both = figures.iter().find(|f| f.op == "both")?;
    Some(format!(
        "CPU time per operation on both VMs: LITE {:.1} us, native {:.1} us, LITE/native {:.2} \
         (rounds {:.2}-{:.2})",
        both.lite.median, both.native.median, both.ratio.median, both.ratio.min, both.ratio.max
    ))
}

/// Median (the mean of the middle two for an even count) and range of a
/// few values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Range {
    /// The median and range of `values`; `None` for none.
    pub fn of(values: &[f64]) -> Option<Range> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Range {
            median: percentile(&sorted, 50.0)?,
            min: *sorted.first()?,
            max: *sorted.last()?,
        })
    }

    /// `median (min-max)`, each with `decimals` decimals.
    pub fn show(&self, decimals: usize) -> String {
        let Range { median, min, max } = self;
        format!("{median:.decimals$} ({min:.decimals$}-{max:.decimals$})")
    }
}

/// The median over several rounds of each of their spreads' median, 10th
/// and 90th percentile; `None` for none.
pub fn median_spread(spreads: &[Spread]) -> Option<Spread> {
    let of = |pick: fn(&Spread) -> f64| {
        let values: Vec<f64> = spreads.iter().map(pick).collect();
        Range::of(&values).map(|r| r.median)
    };
    Some(Spread {
        median: of(|s| s.median)?,
        p10: of(|s| s.p10)?,
        p90: of(|s| s.p90)?,
    })
}

/// One compared series, operation `op` (`lite-bench`'s name) of `size`
/// bytes, over the `rounds` that measured both sides: the native and LITE
/// medians (microseconds) and LITE/native per round, and the ratio it must
/// stay within, if it has a target. A CPU figure's `op` is the VM it
/// measured (`client`, `server` or `both`) and its times are CPU
/// microseconds per operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub op: String,
    pub size: u64,
    pub rounds: usize,
    pub native: Range,
    pub lite: Range,
    pub ratio: Range,
    pub target: Option<f64>,
}

/// Where per-round ratios stand against a target: the median decides
/// whether it is met, and the rounds disagree when some are within and
/// some not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub met: bool,
    pub disagree: bool,
}

impl Verdict {
    pub fn of(ratio: &Range, target: f64) -> Verdict {
        Verdict {
            met: ratio.median <= target,
            disagree: ratio.min <= target && ratio.max > target,
        }
    }

    /// How the report words it.
    pub fn describe(self) -> &'static str {
        match (self.met, self.disagree) {
            (true, false) => "met",
            (true, true) => "met (rounds disagree)",
            (false, true) => "NOT met (rounds disagree)",
            (false, false) => "NOT met",
        }
    }
}

impl Figure {
    /// The figure of `op` at `size` over per-round (native, LITE) pairs;
    /// `None` for none.
    fn of(op: String, size: u64, pairs: &[(f64, f64)]) -> Option<Figure> {
        let range = |value: fn(&(f64, f64)) -> f64| {
            let values: Vec<f64> = pairs.iter().map(value).collect();
            Range::of(&values)
        };
        Some(Figure {
            target: target_of(&op, size),
            rounds: pairs.len(),
            native: range(|p| p.0)?,
            lite: range(|p| p.1)?,
            ratio: range(|(native, lite)| lite / native)?,
            op,
            size,
        })
    }

    /// The verdict against the target, if the figure has one.
    pub fn verdict(&self) -> Option<Verdict> {
        Some(Verdict::of(&self.ratio, self.target?))
    }
}

/// The target ratio of `op` at `size`, if any.
fn target_of(op: &str, size: u64) -> Option<f64> {
    TARGETS
        .iter()
        .find(|(o, s, _)| *o == op && s.is_none_or(|s| s == size))
        .map(|(_, _, ratio)| *ratio)
}

/// Report order of an operation: that of [`TARGETS`], unknown ones last.
fn order_of(op: &str) -> usize {
    TARGETS
        .iter()
        .position(|(o, _, _)| *o == op)
        .unwrap_or(TARGETS.len())
}

/// Every series measured on both sides in at least one round, in report
/// order (operation, then size).
pub fn figures(rounds: &BTreeMap<u32, Round>) -> Vec<Figure> {
    let mut per_series: BTreeMap<(usize, String, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for round in rounds.values() {
        for (key, native) in &round.native {
            let Some(lite) = round.lite.get(key) else {
                continue;
            };
            if native.median > 0.0 {
                per_series
                    .entry((order_of(&key.0), key.0.clone(), key.1))
                    .or_default()
                    .push((native.median, lite.median));
            }
        }
    }
    per_series
        .into_iter()
        .filter_map(|((_, op, size), pairs)| Figure::of(op, size, &pairs))
        .collect()
}

/// The interleaved comparison's table, one string per line.
pub fn table(figures: &[Figure]) -> Vec<String> {
    let table = Table::new(
        "<11 op|>6 size||>6 rounds||>20 native us (min-max)||>20 LITE us (min-max)||\
         >20 LITE/native (min-max)||>6 target||<25 verdict",
    );
    table.lines(figures.iter().map(|f| {
        [
            f.op.clone(),
            f.size.to_string(),
            f.rounds.to_string(),
            f.native.show(1),
            f.lite.show(1),
            f.ratio.show(2),
            f.target.map_or("-".to_string(), |t| format!("{t:.2}")),
            f.verdict().map_or("-", Verdict::describe).to_string(),
        ]
    }))
}

/// One line per target: met or not, by the median ratio, with the worst
/// figure it covers; a target without figures is named as not evaluated.
pub fn verdicts(figures: &[Figure]) -> Vec<String> {
    TARGETS
        .iter()
        .map(|(op, size, target)| {
            let what = match size {
                Some(size) => format!("{op} at {size} B"),
                None => format!("{op} at every size"),
            };
            let covered: Vec<&Figure> = figures
                .iter()
                .filter(|f| f.op == *op && size.is_none_or(|s| s == f.size))
                .collect();
            let worst = covered
                .iter()
                .max_by(|a, b| a.ratio.median.total_cmp(&b.ratio.median));
            match worst {
                Some(worst) => {
                    let met = covered.iter().all(|f| f.verdict().is_some_and(|v| v.met));
                    let disagree = covered
                        .iter()
                        .any(|f| f.verdict().is_some_and(|v| v.disagree));
                    format!(
                        "target LITE/native <= {target:.2} for {what}: {}{} (median {:.2} at {} B, \
                         rounds {:.2}-{:.2})",
                        if met { "met" } else { "NOT met" },
                        if disagree { ", rounds disagree" } else { "" },
                        worst.ratio.median,
                        worst.size,
                        worst.ratio.min,
                        worst.ratio.max
                    )
                }
                None => format!(
                    "target LITE/native <= {target:.2} for {what}: not evaluated, no round \
                     measured both sides"
                ),
            }
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::bench::parse::tests::assert_has;
    use crate::bench::parse::Measurements;

    /// Three rounds of a client node: writes in every round, RPC in the
    /// first; then a one-off write series.
    pub(crate) const NODE2: &str = "\
LITE-ROUND-BEGIN round=1\r
LITE-VERBS {\"latency\":{\"op\":\"write\",\"size\":64,\"wait\":\"event\",\"iters\":300,\"median\":100.00,\"p10\":90.00,\"p90\":120.00,\"p99\":150.00,\"min\":80.00,\"max\":200.00,\"stdev\":10.00,\"cpu_us_per_op\":20.00}}\r
LITE-VERBS {\"latency\":{\"op\":\"rpc\",\"size\":64,\"wait\":\"event\",\"iters\":300,\"median\":300.00,\"p10\":290.00,\"p90\":320.00,\"p99\":350.00,\"min\":280.00,\"max\":400.00,\"stdev\":10.00,\"cpu_us_per_op\":30.00}}\r
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":300,\"median\":110.00,\"p10\":100.00,\"p90\":130.00,\"min\":90.00,\"max\":210.00,\"stdev\":11.00}}\r
LITE-RECORD {\"latency\":{\"op\":\"rpc\",\"size\":64,\"iters\":300,\"median\":320.00,\"p10\":300.00,\"p90\":340.00,\"min\":290.00,\"max\":420.00,\"stdev\":12.00}}\r
LITE-ROUND-END round=1\r
LITE-ROUND-BEGIN round=2\r
LITE-VERBS {\"latency\":{\"op\":\"write\",\"size\":64,\"wait\":\"event\",\"iters\":300,\"median\":50.00,\"p10\":45.00,\"p90\":60.00,\"p99\":70.00,\"min\":40.00,\"max\":90.00,\"stdev\":5.00,\"cpu_us_per_op\":10.00}}\r
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":300,\"median\":51.00,\"p10\":46.00,\"p90\":61.00,\"min\":41.00,\"max\":91.00,\"stdev\":5.00}}\r
LITE-ROUND-END round=2\r
LITE-ROUND-BEGIN round=3\r
LITE-VERBS {\"latency\":{\"op\":\"write\",\"size\":64,\"wait\":\"event\",\"iters\":300,\"median\":200.00,\"p10\":190.00,\"p90\":220.00,\"p99\":250.00,\"min\":180.00,\"max\":300.00,\"stdev\":20.00,\"cpu_us_per_op\":40.00}}\r
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":300,\"median\":206.00,\"p10\":196.00,\"p90\":226.00,\"min\":186.00,\"max\":306.00,\"stdev\":20.00}}\r
LITE-ROUND-END round=3\r
LITE-PERFTEST-BEGIN test=ib_write_lat size=64 side=client\r
LITE-RECORD {\"latency\":{\"op\":\"write\",\"size\":64,\"iters\":1000,\"median\":999.00,\"p10\":900.00,\"p90\":1100.00,\"min\":1.00,\"max\":1.00,\"stdev\":1.00}}\r
";

    /// What the logs of several nodes measured.
    fn measured(logs: &[&str]) -> Measurements {
        let mut m = Measurements::default();
        logs.iter().for_each(|log| m.add_log("node", log));
        m
    }

    #[test]
    fn rounds_are_split_from_the_rest_of_the_log() {
        let (outside, rounds) = split_rounds(NODE2, LATENCY_ROUND);
        assert_eq!(rounds.len(), 3);
        assert!(outside.contains("\"median\":999.00"));
        assert!(!outside.contains("LITE-VERBS"));
        assert!(rounds[&1].contains("\"op\":\"rpc\""));
        assert!(!rounds[&2].contains("\"op\":\"rpc\""));
        // CPU rounds are apart from latency rounds and from the rest.
        let log = format!(
            "{NODE2}LITE-CPU-ROUND-BEGIN round=1\nLITE-RECORD {{\"cpu\":{{\"side\":\"client\",\"program\":\"lite\",\"busy_ticks\":3}}}}\n\
             LITE-CPU-ROUND-END round=1\nafter\n"
        );
        let (outside, cpu) = split_rounds(&log, CPU_ROUND);
        assert_eq!(cpu.len(), 1);
        assert!(cpu[&1].contains("\"busy_ticks\":3") && !cpu[&1].contains("LITE-VERBS"));
        let (rest, latency) = split_rounds(&outside, LATENCY_ROUND);
        assert_eq!(latency, rounds);
        assert!(!rest.contains("busy_ticks") && rest.contains("after"));
    }

    #[test]
    fn ratios_are_taken_per_round_and_summarised_by_their_median() {
        let figures = figures(&measured(&[NODE2]).rounds);
        let write = figures.iter().find(|f| f.op == "write");
        let write = write.expect("write figure");
        assert_eq!(write.rounds, 3);
        // Per round: 1.10, 1.02, 1.03 (the table's 1.03 (1.02-1.10)). The
        // medians of each side alone (100 and 110) would give 1.10.
        assert_eq!(write.target, Some(1.05));
        let verdict = write.verdict().map(Verdict::describe);
        assert_eq!(verdict, Some("met (rounds disagree)"));
        let rpc = figures.iter().find(|f| f.op == "rpc").expect("rpc figure");
        assert_eq!(rpc.rounds, 1);
        assert_eq!(rpc.verdict().map(Verdict::describe), Some("met"));
        // Report order follows the targets: write before rpc.
        assert_eq!(figures[0].op, "write");
    }

    #[test]
    fn verdicts_follow_the_median_and_name_disagreement() {
        let figures = figures(&measured(&[NODE2]).rounds);
        let lines = verdicts(&figures);
        assert_eq!(lines.len(), TARGETS.len());
        for (line, says) in [
            (0, "write at 64 B: met, rounds disagree (median 1.03"),
            (1, "read at 64 B: not evaluated"),
            (4, "rpc at every size: met"),
        ] {
            assert!(lines[line].contains(says), "{}", lines[line]);
        }
        let table = table(&figures);
        assert_eq!(table.len(), 3);
        assert!(table[1].contains("1.03 (1.02-1.10)"), "{}", table[1]);
        // Beyond the target in every round.
        let slow = NODE2.replace("\"median\":51.00", "\"median\":80.00");
        let slow = slow.replace("\"median\":206.00", "\"median\":300.00");
        let figures = super::figures(&measured(&[&slow]).rounds);
        assert_eq!(figures[0].verdict().map(Verdict::describe), Some("NOT met"));
        assert!(verdicts(&figures)[0].contains("NOT met (median 1.50"));
    }

    #[test]
    fn cpu_per_operation_is_busy_time_over_the_round_s_operations() {
        // Round 1 of the fixture as a CPU round: 600 operations per
        // program on the client.
        let client = NODE2
            .replace("LITE-ROUND-BEGIN", "LITE-CPU-ROUND-BEGIN")
            .replace("LITE-ROUND-END", "LITE-CPU-ROUND-END")
            .replace(
                "LITE-CPU-ROUND-END round=1\r",
                "LITE-RECORD {\"cpu\":{\"side\":\"client\",\"program\":\"verbs\",\"busy_ticks\":30}}\r\n\
                 LITE-RECORD {\"cpu\":{\"side\":\"client\",\"program\":\"lite\",\"busy_ticks\":20}}\r\n\
                 LITE-RECORD {\"cpu\":{\"side\":\"client\",\"program\":\"lite\",\"busy_ticks\":25}}\r\n\
                 LITE-CPU-ROUND-END round=1\r",
            );
        let server = "LITE-CPU-ROUND-BEGIN round=1\n\
                      LITE-RECORD {\"cpu\":{\"side\":\"server\",\"program\":\"verbs\",\"busy_ticks\":30}}\n\
                      LITE-RECORD {\"cpu\":{\"side\":\"server\",\"program\":\"lite\",\"busy_ticks\":15}}\n\
                      LITE-CPU-ROUND-END round=1\n";
        let figures = cpu_figures(&measured(&[&client, server]).cpu_rounds);
        let sides: Vec<&str> = figures.iter().map(|f| f.op.as_str()).collect();
        assert_eq!(sides, ["client", "server", "both"]);
        // 30 ticks of 10 ms over 600 operations: 500 us each.
        assert_eq!(figures[0].rounds, 1);
        assert!((figures[0].native.median - 500.0).abs() < 1e-9);
        assert!((figures[0].lite.median - 750.0).abs() < 1e-9);
        assert!((figures[1].ratio.median - 0.5).abs() < 1e-9);
        // Both VMs: 60 ticks against 60.
        assert!((figures[2].ratio.median - 1.0).abs() < 1e-9);
        let line = cpu_line(&figures).expect("a line");
        assert_has(&line, "LITE 1000.0 us, native 1000.0 us, LITE/native 1.00");
        let table = cpu_table(&figures);
        assert_eq!(table.len(), 5);
        assert!(table[2].contains("500.0 (500.0-500.0)"), "{}", table[2]);
        // Rounds without CPU lines give no figures.
        let m = measured(&[NODE2]);
        assert!(cpu_figures(&m.rounds).is_empty() && cpu_figures(&m.cpu_rounds).is_empty());
        assert_eq!(cpu_line(&[]), None);
    }
}
