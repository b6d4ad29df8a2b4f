//! Parsing KUnit's KTAP output from a serial console log.
//!
//! KUnit in 6.12 prints, interleaved with other kernel messages:
//!
//! ```text
//! KTAP version 1
//! 1..1
//!     KTAP version 1
//!     # Subtest: lite_wire
//!     1..2
//!     ok 1 lite_test_encode
//!     # lite_test_decode: EXPECTATION FAILED at ...
//!     not ok 2 lite_test_decode
//!     # Totals: pass:1 fail:1 skip:0 total:2
//! not ok 1 lite_wire
//! ```
//!
//! Indentation (4 spaces per level) gives the nesting: suites at level 0,
//! test cases at level 1, parameters of parameterised cases at level 2.

use crate::logscan::strip_timestamp;
use crate::tap::{self, Outcome, TestPoint, MAX_DIAGNOSTICS};

/// `# Totals: pass:P fail:F skip:S total:T`: passed, failed, skipped, all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub pass: u64,
    pub fail: u64,
    pub skip: u64,
    pub total: u64,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Suite {
    /// From `# Subtest:` or its result line.
    pub name: String,
    /// Its cases and their plan; a case's diagnostics are the lines KUnit
    /// printed before its result, and planned cases that never reported
    /// (the kernel died?) fail.
    pub cases: tap::Report,
    /// If it got that far.
    pub result: Option<Outcome>,
    /// Counts parameters individually.
    pub totals: Option<Totals>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub suites: Vec<Suite>,
}

impl Report {
    /// Other kernel messages are ignored.
    pub fn parse(log: &str) -> Self {
        let mut report = Report::default();
        // Index of the suite whose cases are being printed.
        let mut open: Option<usize> = None;
        let mut pending: Vec<String> = Vec::new();
        for raw in log.lines() {
            let line = strip_timestamp(raw);
            let content = line.trim_start_matches(' ');
            let depth = (line.len() - content.len()) / 4;
            let content = content.trim_end();
            if content.is_empty() {
                continue;
            }
            if depth == 0 {
                if let Some((outcome, _, name)) = tap::result_line(content, " ") {
                    // A new suite if it failed before printing any case.
                    let fits = |s: &Suite| s.name == name || s.name.is_empty();
                    let idx = report.open_or_new(open.take(), fits);
                    let suite = &mut report.suites[idx];
                    suite.name = name.to_string();
                    suite.result = Some(outcome);
                    pending.clear();
                } else if let Some(totals) = totals_line(content) {
                    // Suite statistics are printed without indentation.
                    if let Some(i) = open {
                        report.suites[i].totals = Some(totals);
                    }
                } else if open.is_some() && !pending.is_empty() && pending.len() < MAX_DIAGNOSTICS {
                    // Continuation of a failure message (Rust assertions
                    // print the failed expression unindented).
                    pending.push(content.to_string());
                }
                continue;
            }
            if depth == 1 {
                if content.starts_with("KTAP version") {
                    open = Some(report.new_suite());
                    pending.clear();
                    continue;
                }
                if let Some(name) = content.strip_prefix("# Subtest:") {
                    let fits = |s: &Suite| s.name.is_empty() && s.cases.points.is_empty();
                    let idx = report.open_or_new(open, fits);
                    report.suites[idx].name = name.trim().to_string();
                    open = Some(idx);
                    continue;
                }
                let idx = *open.get_or_insert_with(|| report.new_suite());
                let suite = &mut report.suites[idx];
                if let Some(n) = content.strip_prefix("1..").and_then(|n| n.parse().ok()) {
                    suite.cases.planned = Some(n);
                    continue;
                }
                if let Some(totals) = totals_line(content) {
                    suite.totals = Some(totals);
                    continue;
                }
                if let Some((outcome, number, name)) = tap::result_line(content, " ") {
                    suite.cases.points.push(TestPoint {
                        number,
                        description: name.to_string(),
                        outcome,
                        diagnostics: std::mem::take(&mut pending),
                    });
                    continue;
                }
            }
            // Level-1 diagnostics and everything of parameterised cases.
            if pending.len() < MAX_DIAGNOSTICS {
                pending.push(content.to_string());
            }
        }
        report
    }

    fn new_suite(&mut self) -> usize {
        self.suites.push(Suite::default());
        self.suites.len() - 1
    }

    /// The index of the `open` suite if it `fits`, else of a new one.
    fn open_or_new(&mut self, open: Option<usize>, fits: impl Fn(&Suite) -> bool) -> usize {
        match open {
            Some(i) if fits(&self.suites[i]) => i,
            _ => self.new_suite(),
        }
    }

    pub fn passed(&self) -> u64 {
        self.suites.iter().map(|s| s.cases.passed()).sum()
    }

    /// With the planned cases that never reported.
    pub fn failed(&self) -> u64 {
        self.suites.iter().map(|s| s.cases.failed()).sum()
    }

    pub fn skipped(&self) -> u64 {
        self.suites.iter().map(|s| s.cases.skipped()).sum()
    }

    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.suites.iter().all(|s| s.cases.points.is_empty()) {
            problems.push("no KUnit test case ran".to_string());
        }
        for suite in &self.suites {
            let cases = &suite.cases;
            for case in cases.points.iter().filter(|c| c.outcome == Outcome::Fail) {
                let head = format!("{}.{} failed", suite.name, case.description);
                problems.push(tap::with_diagnostics(head, &case.diagnostics));
            }
            if cases.missing() > 0 {
                problems.push(format!(
                    "{}: {} of {} planned cases never reported",
                    suite.name,
                    cases.missing(),
                    cases.planned.unwrap_or(0)
                ));
            }
            if suite.result.is_none() {
                problems.push(format!("{}: suite did not finish", suite.name));
            } else if suite.result == Some(Outcome::Fail) && cases.failed() == 0 {
                problems.push(format!("{}: suite failed (initialisation?)", suite.name));
            }
        }
        problems
    }

    pub fn summary(&self) -> Vec<String> {
        self.suites
            .iter()
            .map(|s| {
                let name = if s.name.is_empty() {
                    "(unnamed suite)"
                } else {
                    &s.name
                };
                let cases = &s.cases;
                let mut line = format!(
                    "{name}: {} passed, {} failed, {} skipped",
                    cases.passed(),
                    cases.failed(),
                    cases.skipped()
                );
                // KUnit's totals count each parameter of a parameterised
                // case; only worth showing when that differs from the cases.
                if let Some(t) = s.totals.filter(|t| t.total != cases.points.len() as u64) {
                    line += &format!(
                        " (counting parameters: pass:{} fail:{} skip:{} total:{})",
                        t.pass, t.fail, t.skip, t.total
                    );
                }
                line
            })
            .collect()
    }
}

/// `# Totals: pass:P fail:F skip:S total:T`.
fn totals_line(line: &str) -> Option<Totals> {
    let rest = line.strip_prefix("# Totals:")?;
    let mut totals = Totals::default();
    for field in rest.split_whitespace() {
        let (key, value) = field.split_once(':')?;
        let value = value.parse().ok()?;
        match key {
            "pass" => totals.pass = value,
            "fail" => totals.fail = value,
            "skip" => totals.skip = value,
            "total" => totals.total = value,
            _ => {}
        }
    }
    Some(totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(report: &Report) -> (u64, u64, u64) {
        (report.passed(), report.failed(), report.skipped())
    }

    const LOG: &str = "\
[    0.500000] Run something
KTAP version 1
1..2
    KTAP version 1
    # Subtest: lite_wire
    # module: lite
    1..3
random: crng init done
    ok 1 lite_test_encode
    # lite_test_decode: EXPECTATION FAILED at drivers/infiniband/ulp/lite/lite_kunit.c:14
/src/drivers/infiniband/ulp/lite/kunit_tests.rs:153: decode(0x7fff).is_none()
    not ok 2 lite_test_decode
        KTAP version 1
        # Subtest: lite_test_sizes
        ok 1 param-0
        ok 2 param-1
    # lite_test_sizes: pass:2 fail:0 skip:0 total:2
    ok 3 lite_test_sizes
# lite_wire: pass:2 fail:1 skip:0 total:3
# Totals: pass:3 fail:1 skip:0 total:4
not ok 1 lite_wire
    KTAP version 1
    # Subtest: lite_lmr
    1..2
    ok 1 lite_test_alloc
    ok 2 lite_test_rdma # SKIP needs an RDMA device
ok 2 lite_lmr
Run /init as init process
";

    #[test]
    fn parses_suites_cases_and_totals() {
        let report = Report::parse(LOG);
        assert_eq!(report.suites.len(), 2);
        let wire = &report.suites[0];
        assert_eq!(wire.name, "lite_wire");
        assert_eq!(wire.cases.planned, Some(3));
        use Outcome::{Fail, Pass, Skip};
        assert_eq!(wire.result, Some(Fail));
        let outcomes: Vec<_> = (wire.cases.points.iter())
            .map(|c| (&c.description[..], c.outcome))
            .collect();
        let (encode, decode, sizes) = ("lite_test_encode", "lite_test_decode", "lite_test_sizes");
        assert_eq!(outcomes, [(encode, Pass), (decode, Fail), (sizes, Pass)]);
        assert!(wire.cases.points[1].diagnostics[0].contains("EXPECTATION FAILED"));
        let totals = wire.totals.map(|t| (t.pass, t.fail, t.skip, t.total));
        assert_eq!(totals, Some((3, 1, 0, 4)));
        assert_eq!(report.suites[1].cases.points[1].outcome, Skip);
        assert_eq!(counts(&report), (3, 1, 1));
        let problems = report.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("lite_wire.lite_test_decode failed"));
        assert!(problems[0].contains("kunit_tests.rs:153: decode(0x7fff).is_none()"));
        // Kernel noise is not a diagnostic.
        assert!(!problems[0].contains("crng"), "{}", problems[0]);
        // A run where all passed.
        let log = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: lite_a\n    1..1\n\
                   \x20   ok 1 lite_test_x\nok 1 lite_a\n";
        let report = Report::parse(log);
        assert!(report.problems().is_empty(), "{:?}", report.problems());
        assert_eq!(report.summary(), ["lite_a: 1 passed, 0 failed, 0 skipped"]);
    }

    #[test]
    fn a_crash_no_tests_or_a_suite_failing_before_its_cases_is_a_problem() {
        let log = "    KTAP version 1\n    # Subtest: lite_a\n    1..3\n    ok 1 lite_test_x\n\
                   BUG: kernel NULL pointer dereference\n";
        let report = Report::parse(log);
        // The missing cases count as failed.
        assert_eq!(counts(&report), (1, 2, 0));
        let problems = report.problems().join("\n");
        let missing = "2 of 3 planned cases never reported";
        assert!(problems.contains(missing), "{problems}");
        assert!(problems.contains("did not finish"), "{problems}");

        let report = Report::parse("Linux version 6.12\nRun /init as init process\n");
        assert_eq!(report.problems(), ["no KUnit test case ran"]);

        let log = "KTAP version 1\n1..1\n    # failed to initialize (-12)\nnot ok 1 lite_a\n";
        let report = Report::parse(log);
        assert_eq!(report.suites[0].name, "lite_a");
        let problems = report.problems();
        let failed = problems.iter().any(|p| p.contains("lite_a: suite failed"));
        assert!(failed, "{problems:?}");
    }
}
