//! The isolation run: a high-priority process's 64 B write latency alone
//! and while low-priority processes load the link. Its unloaded and loaded
//! phases (QoS on) alternate in rounds, and each round's loaded/unloaded
//! ratio compares two phases measured a moment apart: the emulator's speed
//! drifts by tens of percent over minutes, which single phases measured
//! minutes apart would take for an effect of the load. The verdict takes
//! the median ratio over the rounds, as the latency comparison does.

use std::collections::BTreeSet;

use super::parse::{Qos, QosRows, Spread};
use super::report::{cell, ratio_cell, spread_cell, Table};
use super::rounds::{median_spread, Range, Verdict};

/// The target: with QoS on, the high-priority process's median write
/// latency under load within 1.5x of its unloaded median.
pub const TARGET_RATIO: f64 = 1.5;

/// The phases of a round in the order they run: (phase, QoS). Only the
/// first round measures the load with QoS off.
const PHASES: [(&str, &str); 3] = [("unloaded", "on"), ("loaded", "off"), ("loaded", "on")];

/// The row of `phase` with QoS `qos` in `round`.
fn find<'a>(rows: &'a QosRows, round: u32, phase: &str, qos: &str) -> Option<&'a Qos> {
    rows.get(&(round, phase.to_string(), qos.to_string()))
}

/// The rounds `rows` hold, in order.
fn rounds(rows: &QosRows) -> BTreeSet<u32> {
    rows.keys().map(|key| key.0).collect()
}

/// The loaded/unloaded median ratio with QoS `qos` of every round that
/// measured both phases.
pub fn round_ratios(rows: &QosRows, qos: &str) -> Vec<f64> {
    rounds(rows)
        .into_iter()
        .filter_map(|round| {
            let unloaded = find(rows, round, "unloaded", "on")?.latency.median;
            let loaded = find(rows, round, "loaded", qos)?.latency.median;
            (unloaded > 0.0).then(|| loaded / unloaded)
        })
        .collect()
}

/// The median over the rounds of a phase's median, 10th and 90th
/// percentile.
pub fn phase_spread(rows: &QosRows, phase: &str, qos: &str) -> Option<Spread> {
    let spreads: Vec<Spread> = rows
        .values()
        .filter(|r| r.phase == phase && r.qos == qos)
        .map(|r| r.latency)
        .collect();
    median_spread(&spreads)
}

/// The phases measured, in report order: (phase, QoS).
pub fn phases(rows: &QosRows) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
    PHASES
        .into_iter()
        .filter(|&(phase, qos)| rows.values().any(|r| r.phase == phase && r.qos == qos))
}

/// Whether, with QoS on, the median over the rounds of the loaded/unloaded
/// median ratio is within [`TARGET_RATIO`]; the rounds' range and the
/// QoS-off ratio beside.
pub fn verdict(rows: &QosRows) -> String {
    let on_ratios = round_ratios(rows, "on");
    let off = Range::of(&round_ratios(rows, "off"))
        .map_or("-".to_string(), |r| format!("{:.2}", r.median));
    let what = format!(
        "isolation target (loaded/unloaded median <= {TARGET_RATIO:.2} with QoS on, median of \
         the rounds' ratios)"
    );
    let Some(on) = Range::of(&on_ratios) else {
        return format!("{what}: not evaluated, a measurement is missing; with QoS off: {off}");
    };
    format!(
        "{what}: {}; ratio {:.2}, {} rounds {:.2}-{:.2}; with QoS off: {off}",
        Verdict::of(&on, TARGET_RATIO).describe(),
        on.median,
        on_ratios.len(),
        on.min,
        on.max
    )
}

/// The isolation table, one string per line: every phase of every round,
/// the high-priority process's write latency, its ratios to the same
/// round's unloaded phase, and the low-priority processes' throughput.
pub fn table(rows: &QosRows) -> Vec<String> {
    let described = rows.values().find(|r| r.loaders > 0);
    let note = described.or(rows.values().next()).map(|r| {
        format!(
            "high priority: {} B lite_rdma_write; load: {} low-priority processes writing {} B \
             in a loop; ratios: loaded / the same round's unloaded",
            r.size, r.loaders, r.load_size
        )
    });
    let table = Table::noted(
        note.as_deref().as_slice(),
        ">5 round|<9 phase|<4 QoS|>7 loaders|>6 writes|>10 median|>10 p99|>19 p10-p90|\
         >9 med ratio|>9 p99 ratio|>13 low-prio MiB/s|>9 low ops|>9 throttled",
    );
    let phases = rounds(rows).into_iter().flat_map(|round| {
        let unloaded = find(rows, round, "unloaded", "on");
        PHASES.into_iter().filter_map(move |(phase, qos)| {
            let base = if phase == "unloaded" { None } else { unloaded };
            Some((find(rows, round, phase, qos)?, base))
        })
    });
    table.lines(phases.map(|(r, base)| {
        let loaded = (r.loaders > 0).then_some(r);
        [
            r.round.to_string(),
            r.phase.clone(),
            r.qos.clone(),
            r.loaders.to_string(),
            r.iters.to_string(),
            cell(Some(r.latency.median)),
            cell(Some(r.p99)),
            spread_cell(Some(&r.latency)),
            ratio_cell(Some(r.latency.median), base.map(|b| b.latency.median)),
            ratio_cell(Some(r.p99), base.map(|b| b.p99)),
            cell(loaded.map(|r| r.load_mibps)),
            loaded.map_or("-".to_string(), |r| r.load_ops.to_string()),
            r.throttled.to_string(),
        ]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::{measured, words, QOS_LOG};

    fn qos_rows() -> QosRows {
        measured(QOS_LOG).qos
    }

    #[test]
    fn table_shows_every_phase_against_its_rounds_unloaded_one() {
        let table = table(&qos_rows());
        // Header, columns, round 1's three phases, round 2's two.
        assert_eq!(table.len(), 7, "{table:#?}");
        assert!(table[0].contains("64 B lite_rdma_write"), "{table:#?}");
        assert!(table[0].contains("3 low-priority processes writing 65536 B"));
        let unloaded = "1 unloaded on 0 1000 1000.00 2000.00 900.00-1200.00 - - - - 0";
        assert_eq!(words(&table[2]), unloaded);
        // 4000 / 1000 and 9000 / 2000.
        let loaded = "1 loaded off 3 1000 4000.00 9000.00 3000.00-6000.00 4.00 4.50 ";
        assert!(words(&table[3]).starts_with(loaded));
        assert!(words(&table[4]).ends_with(" 1.30 1.30 5.50 150 140"));
        // Round 2 against its own unloaded phase: 2200 / 2000.
        let round_two = "2 loaded on 3 1000 2200.00 3300.00 2000.00-2600.00 1.10 ";
        assert!(words(&table[6]).starts_with(round_two));
        assert_eq!(super::table(&QosRows::new()).len(), 1);
        // The phases' spreads over the rounds are the figures test's.
        let in_order = [("unloaded", "on"), ("loaded", "off"), ("loaded", "on")];
        assert_eq!(phases(&qos_rows()).collect::<Vec<_>>(), in_order);
    }

    #[test]
    fn verdict_takes_the_median_of_the_rounds_ratios() {
        let rows = qos_rows();
        assert_eq!(round_ratios(&rows, "on"), [1.3, 1.1]);
        assert_eq!(round_ratios(&rows, "off"), [4.0]);
        // Round 2's loaded phase with QoS on (the last row) slower, then no
        // loaded phase with QoS on at all.
        let with_round_two_loaded = |median| {
            let mut changed = rows.clone();
            let key = (2, "loaded".to_string(), "on".to_string());
            changed
                .entry(key)
                .and_modify(|row| row.latency.median = median);
            changed
        };
        let mut partial = rows.clone();
        partial.retain(|_, r| r.qos == "off" || r.phase == "unloaded");
        let found = [
            verdict(&rows),
            verdict(&with_round_two_loaded(4000.0)),
            verdict(&with_round_two_loaded(3200.0)),
            verdict(&partial),
            verdict(&QosRows::new()),
        ];
        let target = "isolation target (loaded/unloaded median <= 1.50 with QoS on, median of \
                      the rounds' ratios)";
        let want = [
            format!("{target}: met; ratio 1.20, 2 rounds 1.10-1.30; with QoS off: 4.00"),
            // The median crosses the target, round 1 did not.
            format!(
                "{target}: NOT met (rounds disagree); ratio 1.65, 2 rounds 1.30-2.00; \
                 with QoS off: 4.00"
            ),
            // A second round beyond the target, the median within it.
            format!(
                "{target}: met (rounds disagree); ratio 1.45, 2 rounds 1.30-1.60; \
                 with QoS off: 4.00"
            ),
            format!("{target}: not evaluated, a measurement is missing; with QoS off: 4.00"),
            format!("{target}: not evaluated, a measurement is missing; with QoS off: -"),
        ];
        assert_eq!(found, want);
    }
}
