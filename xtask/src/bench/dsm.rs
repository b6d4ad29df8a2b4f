//! The LITE-DSM phase: node 1's page faults beside LITE reads of a page,
//! taking turns in blocks within each round (`lite-bench --dsm`), so that
//! the emulator's drift moves both sides of a ratio alike. Each round's
//! fault/read ratio is that of its medians; the report gives the median
//! ratio with its min-max over the rounds.

use super::parse::{Latency, Measurements, Spread};
use super::report::{cell, spread_cell, Table};
use super::rounds::{median_spread, Range, Round};
use crate::ui;

/// LITE-DSM's faults, by their names in the records, and what each is.
pub const FAULTS: [(&str, &str); 4] = [
    ("dsm_read", "read fault"),
    ("dsm_write", "write fault, 0 readers"),
    ("dsm_write_1_reader", "write fault, 1 reader"),
    ("dsm_write_2_readers", "write fault, 2 readers"),
];

/// The LITE read of a page each fault is compared with, by its name in the
/// records, and what it is.
pub const READ: (&str, &str) = ("read", "LITE read of 4 KiB");

/// The series `op` of a round.
fn series<'a>(round: &'a Round, op: &str) -> Option<&'a Latency> {
    round.lite.values().find(|l| l.op == op)
}

/// One series over the rounds that measured it: the median over the
/// rounds of its median, 10th and 90th percentile.
pub fn spread(m: &Measurements, op: &str) -> Option<Spread> {
    let spreads: Vec<Spread> = m
        .dsm_rounds
        .values()
        .filter_map(|round| series(round, op))
        .map(|l: &Latency| Spread {
            median: l.median,
            p10: l.p10,
            p90: l.p90,
        })
        .collect();
    median_spread(&spreads)
}

/// The fault/read ratio of the medians of every round that measured both.
pub fn ratios(m: &Measurements, op: &str) -> Vec<f64> {
    m.dsm_rounds
        .values()
        .filter_map(|round| {
            let read = series(round, READ.0)?.median;
            let fault = series(round, op)?.median;
            (read > 0.0).then(|| fault / read)
        })
        .collect()
}

/// The phase's table, one string per line: the read, then each fault.
pub fn table(m: &Measurements) -> Vec<String> {
    let notes = [
        "node 1 faults pages of its own region, whose data lives on nodes 2 and 3; a write fault",
        "first takes back the copies of the readers; medians over the rounds of each round's",
        "median and p10-p90; ratio: fault median / LITE read median, per round",
    ];
    let table = Table::noted(
        &notes,
        "<24 series|>6 rounds|>11 median|>19 p10-p90|>22 / LITE read (min-max)",
    );
    table.lines([READ].into_iter().chain(FAULTS).map(|(op, what)| {
        let rounds = m
            .dsm_rounds
            .values()
            .filter(|r| series(r, op).is_some())
            .count();
        let spread = spread(m, op);
        let ratio = Range::of(&ratios(m, op)).filter(|_| op != READ.0);
        [
            what.to_string(),
            rounds.to_string(),
            cell(spread.map(|s| s.median)),
            spread_cell(spread.as_ref()),
            ratio.map_or("-".to_string(), |r| r.show(2)),
        ]
    }))
}

/// Prints the phase's table.
pub fn say(rounds: u32, round_iters: u32, m: &Measurements) {
    ui::say(&format!(
        "==> LITE-DSM page faults: {rounds} rounds of {round_iters} of each beside as many LITE \
         reads of 4 KiB (times in microseconds)"
    ));
    super::report::say_indented(table(m));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::{assert_rows, latency_record_4k};

    /// Round `round` of node 1's log with a read of `read` us and faults
    /// of `faults` us.
    fn round(round: u32, read: u32, faults: [u32; 4]) -> String {
        let (begin, end) = lite_bench_record::DSM_ROUND;
        let mut text = format!("{begin}{round}\n{}", latency_record_4k(READ.0, read));
        for ((op, _), median) in FAULTS.into_iter().zip(faults) {
            text.push_str(&latency_record_4k(op, median));
        }
        text + &format!("{end}{round}\n")
    }

    #[test]
    fn faults_are_compared_with_the_read_of_their_own_round() {
        let mut m = Measurements::default();
        // The comparison phase's read of a page is no round's.
        let log = latency_record_4k("read", 5000)
            + &round(1, 100, [300, 400, 800, 1200])
            + &round(2, 200, [400, 600, 1000, 1400])
            + &round(3, 100, [500, 500, 900, 1300]);
        m.add_log("node1", &log);
        assert_eq!(m.dsm_rounds.len(), 3);
        // latency_record_4k puts p10 and p90 100 us from the median; the
        // read fault's ratios per round are 3, 2 and 5.
        assert_rows(
            &table(&m),
            &[
                "LITE read of 4 KiB 3 100.00 0.00-200.00 -",
                "read fault 3 400.00 300.00-500.00 3.00 (2.00-5.00)",
                "write fault, 0 readers 3 500.00 400.00-600.00 4.00 (3.00-5.00)",
                "write fault, 1 reader 3 900.00 800.00-1000.00 8.00 (5.00-9.00)",
                "write fault, 2 readers 3 1300.00 1200.00-1400.00 12.00 (7.00-13.00)",
            ],
        );
    }
}
