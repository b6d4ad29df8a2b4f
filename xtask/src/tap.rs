//! Parsing the TAP output of `lite-cluster-test` from a serial console log.
//!
//! ```text
//! 1..3
//! ok 1 - join
//! not ok 2 - remote write then read
//! # expected 0x55, read 0x00 at offset 4096
//! ok 3 - barrier # SKIP single node
//! 2 passed, 1 failed
//! ```
//!
//! Result lines start at column 0; `#` lines after a `not ok` are its
//! diagnostics. Kernel messages in between are ignored.
//!
//! A guest role that runs several programs one after the other prints
//! [`PROGRAM_MARKER`] and the program's name before each; every program
//! has its own numbering, plan and summary, so [`split_programs`] cuts the
//! log there and each part is parsed on its own.

use crate::logscan::strip_timestamp;

/// `LITE-GUEST-PROGRAM <name>`.
pub const PROGRAM_MARKER: &str = "LITE-GUEST-PROGRAM ";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramOutput {
    /// `None` for a whole log without markers.
    pub name: Option<String>,
    pub text: String,
}

/// What comes before the first marker (the boot) belongs to no program;
/// a log without markers is one part, unnamed.
pub fn split_programs(log: &str) -> Vec<ProgramOutput> {
    let mut parts: Vec<ProgramOutput> = Vec::new();
    let mut before_any = String::new();
    for raw in log.lines() {
        // Anywhere in the line, as the harness watches for it: a kernel
        // message may have begun the line.
        if let Some((_, name)) = strip_timestamp(raw).split_once(PROGRAM_MARKER) {
            parts.push(ProgramOutput {
                name: Some(name.trim().to_string()),
                text: String::new(),
            });
            continue;
        }
        let text = match parts.last_mut() {
            Some(part) => &mut part.text,
            None => &mut before_any,
        };
        text.push_str(raw);
        text.push('\n');
    }
    if parts.is_empty() {
        parts.push(ProgramOutput {
            name: None,
            text: before_any,
        });
    }
    parts
}

/// Of a test point, KUnit case or suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
}

#[derive(Debug, PartialEq, Eq)]
pub struct TestPoint {
    pub number: u64,
    /// Without the leading `- ` and the directive.
    pub description: String,
    pub outcome: Outcome,
    /// The `#` lines following a `not ok`.
    pub diagnostics: Vec<String>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub points: Vec<TestPoint>,
    /// `1..N`.
    pub planned: Option<u64>,
    /// `P passed, F failed`.
    pub summary: Option<(u64, u64)>,
}

/// Per failure (a TAP point or a KUnit case).
pub const MAX_DIAGNOSTICS: usize = 30;

impl Report {
    pub fn parse(log: &str) -> Self {
        Self::parse_points(log, DASH)
    }

    /// kselftest's result lines have no dash (`ok 1 fixture.name`), so only
    /// what follows [`crate::demo::RUN_MARKER`] is read, leaving out the
    /// KUnit results of the boot.
    pub fn parse_kselftest(log: &str) -> Self {
        let program = log
            .split_once(crate::demo::RUN_MARKER)
            .map_or("", |(_, after)| after);
        Self::parse_points(program, " ")
    }

    /// `separator` follows the result lines' number.
    fn parse_points(log: &str, separator: &str) -> Self {
        let mut report = Report::default();
        // Whether diagnostics currently attach to the last (failed) point.
        let mut collecting = false;
        for raw in log.lines() {
            let line = strip_timestamp(raw).trim_end();
            if let Some((outcome, number, description)) = result_line(line, separator) {
                collecting = outcome == Outcome::Fail;
                report.points.push(TestPoint {
                    number,
                    description: description.to_string(),
                    outcome,
                    diagnostics: Vec::new(),
                });
                continue;
            }
            if let Some(n) = line.strip_prefix("1..").and_then(|n| n.trim().parse().ok()) {
                report.planned = Some(n);
                collecting = false;
                continue;
            }
            if let Some(summary) = summary_line(line) {
                report.summary = Some(summary);
                collecting = false;
                continue;
            }
            // Only `#` lines: kernel messages between results may be indented too.
            if collecting && line.starts_with('#') {
                if let Some(last) = report.points.last_mut() {
                    if last.diagnostics.len() < MAX_DIAGNOSTICS {
                        last.diagnostics.push(line.to_string());
                    }
                }
            }
        }
        report
    }

    fn count(&self, outcome: Outcome) -> u64 {
        self.points.iter().filter(|p| p.outcome == outcome).count() as u64
    }

    /// Skipped ones excluded.
    pub fn passed(&self) -> u64 {
        self.count(Outcome::Pass)
    }

    pub fn skipped(&self) -> u64 {
        self.count(Outcome::Skip)
    }

    /// Plus planned points that never reported.
    pub fn failed(&self) -> u64 {
        self.count(Outcome::Fail) + self.missing()
    }

    pub fn missing(&self) -> u64 {
        self.planned
            .unwrap_or(0)
            .saturating_sub(self.points.len() as u64)
    }

    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.points.is_empty() {
            problems.push("no TAP test results".to_string());
        }
        for point in self.points.iter().filter(|p| p.outcome == Outcome::Fail) {
            let head = format!("not ok {} - {}", point.number, point.description);
            problems.push(with_diagnostics(head, &point.diagnostics));
        }
        if self.missing() > 0 {
            problems.push(format!(
                "{} of {} planned tests never reported",
                self.missing(),
                self.planned.unwrap_or(0)
            ));
        }
        if let Some((p, f)) = self.summary {
            let failed = self.count(Outcome::Fail);
            // Whether skips count as passed is the test program's choice.
            let passed_ok = p == self.passed() || p == self.passed() + self.skipped();
            if !passed_ok || f != failed {
                problems.push(format!(
                    "summary says {p} passed, {f} failed but the results say {} passed \
                     ({} skipped), {failed} failed",
                    self.passed(),
                    self.skipped()
                ));
            }
        }
        problems
    }
}

/// `ok 1 - desc`, `not ok 2 - desc`, `ok 3 - desc # SKIP why` with
/// `separator` [`DASH`], `ok 1 fixture.name` with a blank (kselftest,
/// KUnit); the description without the directive.
pub fn result_line<'a>(line: &'a str, separator: &str) -> Option<(Outcome, u64, &'a str)> {
    let (passed, rest) = match line.strip_prefix("not ok ") {
        Some(rest) => (false, rest),
        None => (true, line.strip_prefix("ok ")?),
    };
    let (number, description) = rest.split_once(separator).unwrap_or((rest, ""));
    let (description, directive) = description.split_once(" # ").unwrap_or((description, ""));
    let skipped = directive
        .trim_start()
        .to_ascii_uppercase()
        .starts_with("SKIP");
    let outcome = match (passed, skipped) {
        (false, _) => Outcome::Fail,
        (true, true) => Outcome::Skip,
        (true, false) => Outcome::Pass,
    };
    Some((outcome, number.parse().ok()?, description.trim()))
}

/// The separator LITE's programs print after a result's number. It is
/// required: KUnit prints its own `ok 1 suite` lines on the same console
/// when a suite runs, and those are not the test's points.
const DASH: &str = " - ";

/// `lines` indented below `head`.
pub fn with_diagnostics(
    mut head: String,
    lines: impl IntoIterator<Item = impl AsRef<str>>,
) -> String {
    for line in lines {
        head.push_str("\n      ");
        head.push_str(line.as_ref());
    }
    head
}

/// `P passed, F failed`.
fn summary_line(line: &str) -> Option<(u64, u64)> {
    let (passed, rest) = line.split_once(" passed, ")?;
    let failed = rest.strip_suffix(" failed")?;
    Some((passed.trim().parse().ok()?, failed.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(report: &Report) -> (u64, u64, u64) {
        (report.passed(), report.failed(), report.skipped())
    }

    #[test]
    fn kselftest_results_are_read_after_the_run_marker_only() {
        let log = "KTAP version 1\n1..1\n    ok 1 kernel_sync # SKIP needs a cluster\n\
                   ok 1 lite_cluster # SKIP\n\
                   LITE-GUEST-RUN role=exec\r\nTAP version 13\r\n1..3\r\n\
                   #  RUN           global.a ...\r\nok 1 global.a\r\n\
                   not ok 2 lite.b\r\n# lite_test.c:12:b:Expected 0 (0) == ret (-22)\r\n\
                   ok 3 lite.c # SKIP LITE is not loaded\r\n\
                   # Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0\r\n";
        let report = Report::parse_kselftest(log);
        assert_eq!((report.planned, report.missing()), (Some(3), 0));
        assert_eq!(counts(&report), (1, 1, 1));
        assert_eq!(report.points[1].description, "lite.b");
        assert_eq!(report.points[1].diagnostics.len(), 1);
        assert_eq!(Report::parse_kselftest("ok 1 x\n").points.len(), 0);
    }

    const LOG: &str = "\
Run /init as init process
LITE-GUEST-RUN role=test
TAP version 13
1..4
ok 1 - join the cluster
[   10.1] lite: node 2 joined
not ok 2 - remote write then read
# expected 0x55, read 0x00 at offset 4096
  cache: skbuff_head_cache, object size: 208, buffer size: 320
#   handle 7
ok 3 - barrier # SKIP single node
ok 1 lite_cluster # SKIP
not ok 1 lite_cluster
ok 4 - free
3 passed, 1 failed
LITE-GUEST-EXIT rc=1
";

    #[test]
    fn parses_points_diagnostics_and_summary_and_fails_what_is_missing() {
        let report = Report::parse(LOG);
        assert_eq!(report.planned, Some(4));
        assert_eq!(report.points.len(), 4);
        assert_eq!(report.points[1].description, "remote write then read");
        assert_eq!(report.points[1].diagnostics.len(), 2);
        assert_eq!(report.points[2].outcome, Outcome::Skip);
        assert_eq!(report.points[3].description, "free");
        assert_eq!(report.summary, Some((3, 1)));
        assert_eq!(counts(&report), (2, 1, 1));
        let problems = report.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("offset 4096"));
        // Without markers, the log is one unnamed program.
        let parts = split_programs(LOG);
        assert_eq!((parts.len(), &parts[0].name), (1, &None));
        assert_eq!(Report::parse(&parts[0].text), report);
        assert_eq!(split_programs("")[0].text, "");
        // Missing results and an inconsistent summary fail.
        let report = Report::parse("1..3\nok 1 - a\n");
        assert_eq!(report.failed(), 2);
        assert!(report.problems()[0].contains("2 of 3 planned"));
        let nothing = Report::parse("booted\n");
        assert_eq!(nothing.problems(), ["no TAP test results"]);
        let report = Report::parse("1..1\nok 1 - a\n0 passed, 1 failed\n");
        assert!(report.problems()[0].contains("summary says 0 passed"));
    }

    /// A survivor of the failure test: two programs, each with its plan
    /// and summary, after boot-time KUnit output with a plan of its own.
    const TWO_PROGRAMS: &str = "\
KTAP version 1
1..1
ok 1 lite_cluster # SKIP
LITE-GUEST-RUN role=failure-survivor
[    9.5] LITE-GUEST-PROGRAM lite-failure-test
TAP version 13
ok 1 - join
not ok 2 - leave
# expected 0
1..2
1 passed, 1 failed
LITE-GUEST-PROGRAM lite-cluster-test
TAP version 13
ok 1 - get_node_id # SKIP joined before
ok 2 - barrier
[   80.1] lite: node 4 joined
ok 3 - free
1..3
3 passed, 0 failed
LITE-GUEST-EXIT rc=1
";

    #[test]
    fn two_programs_in_one_log_are_parsed_apart() {
        let parts = split_programs(TWO_PROGRAMS);
        let names: Vec<Option<&str>> = parts.iter().map(|p| p.name.as_deref()).collect();
        let programs = ["lite-failure-test", "lite-cluster-test"];
        assert_eq!(names, programs.map(Some));
        // The boot belongs to no program.
        assert!(!parts[0].text.contains("KTAP"), "{}", parts[0].text);
        let failure = Report::parse(&parts[0].text);
        assert_eq!((failure.planned, failure.summary), (Some(2), Some((1, 1))));
        assert_eq!(counts(&failure), (1, 1, 0));
        assert_eq!(failure.points[1].diagnostics, ["# expected 0"]);
        let cluster = Report::parse(&parts[1].text);
        assert_eq!((cluster.planned, cluster.summary), (Some(3), Some((3, 0))));
        assert_eq!(counts(&cluster), (2, 0, 1));
        assert!(cluster.problems().is_empty(), "{:?}", cluster.problems());
        assert!(parts[1].text.contains("LITE-GUEST-EXIT rc=1"));

        // Parsed as one, the second plan and summary would hide the first.
        let merged = Report::parse(TWO_PROGRAMS);
        assert_eq!(merged.planned, Some(3));
        assert!(!merged.problems().is_empty());
    }
}
