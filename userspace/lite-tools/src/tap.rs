//! A TAP version 13 reporter.
//!
//! Output looks like:
//!
//! ```text
//! TAP version 13
//! ok 1 - get_node_id before join returns -ENOTCONN
//! not ok 2 - dist_barrier(2) after join returns 0
//! # expected 0, got -110 (ETIMEDOUT)
//! 1..2
//! 1 passed, 1 failed
//! ```
//!
//! The last line is not TAP; it gives harnesses that grep serial consoles
//! one line to look for.

use std::io::{Stdout, Write};
use std::process::ExitCode;

/// Runs `checks`, reporting TAP on stdout after `header` as a comment;
/// the exit status of a test program: success exactly when every point
/// passed.
pub fn report_to_stdout(header: &str, checks: impl FnOnce(&mut Tap<Stdout>)) -> ExitCode {
    let mut tap = Tap::new(std::io::stdout());
    tap.comment(header);
    checks(&mut tap);
    if tap.finish().all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The outcome of a test point that found `problems`: it passes if there
/// are none, and otherwise fails with all of them, one a line.
pub fn no_problems(problems: Vec<String>) -> Result<(), String> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Counts of a finished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapSummary {
    /// Test points reported `ok` (skips included, as TAP counts them).
    pub passed: u32,
    /// Test points reported `not ok`.
    pub failed: u32,
}

impl TapSummary {
    /// Whether every test point passed.
    pub fn all_passed(&self) -> bool {
        self.failed == 0
    }
}

/// Writes TAP to `out`, flushing after every line so that a crash or a
/// hang still leaves every finished test point on the console.
pub struct Tap<W: Write> {
    out: W,
    passed: u32,
    failed: u32,
}

impl<W: Write> Tap<W> {
    /// Starts a TAP stream by printing its version line.
    pub fn new(out: W) -> Self {
        let mut tap = Tap {
            out,
            passed: 0,
            failed: 0,
        };
        tap.line("TAP version 13");
        tap
    }

    /// Reports a passing test point.
    pub fn ok(&mut self, description: &str) {
        self.point(true, description, "");
    }

    /// Reports a failing test point with the reason as a diagnostic.
    pub fn not_ok(&mut self, description: &str, reason: &str) {
        self.point(false, description, "");
        self.comment(reason);
    }

    /// Reports `outcome` as one test point; returns whether it passed.
    pub fn check(&mut self, description: &str, outcome: Result<(), String>) -> bool {
        self.check_value(description, outcome).is_some()
    }

    /// Reports `outcome` as one test point; returns its value if it passed.
    pub fn check_value<T>(&mut self, description: &str, outcome: Result<T, String>) -> Option<T> {
        if outcome.is_ok() {
            self.ok(description);
        }
        self.value_or_not_ok(description, outcome)
    }

    /// Reports a failed `outcome` as test point `description`, for a
    /// step whose success a later point reports; returns its value if it
    /// succeeded, reporting nothing.
    pub fn value_or_not_ok<T>(
        &mut self,
        description: &str,
        outcome: Result<T, String>,
    ) -> Option<T> {
        outcome
            .map_err(|reason| self.not_ok(description, &reason))
            .ok()
    }

    /// Reports `outcome()` as one test point, or skips it (not calling
    /// `outcome`) for the reason `skipped` gives.
    pub fn check_or_skip(
        &mut self,
        description: &str,
        skipped: Option<&str>,
        outcome: impl FnOnce() -> Result<(), String>,
    ) {
        match skipped {
            Some(reason) => self.skip(description, reason),
            None => {
                self.check(description, outcome());
            }
        }
    }

    /// Reports a test point that could not be run here; TAP counts it as passed.
    pub fn skip(&mut self, description: &str, reason: &str) {
        self.point(true, description, &format!(" # SKIP {}", sanitize(reason)));
    }

    /// Reports the next test point, `directive` (if any) after its
    /// description.
    fn point(&mut self, passed: bool, description: &str, directive: &str) {
        let status = if passed {
            self.passed += 1;
            "ok"
        } else {
            self.failed += 1;
            "not ok"
        };
        let line = format!(
            "{status} {} - {}{directive}",
            self.points(),
            sanitize(description)
        );
        self.line(&line);
    }

    /// Tells the TAP consumer that the remaining tests cannot run.
    pub fn bail_out(&mut self, reason: &str) {
        let line = format!("Bail out! {}", sanitize(reason));
        self.line(&line);
    }

    /// Writes a diagnostic; every line of `text` becomes a `# ` line.
    pub fn comment(&mut self, text: &str) {
        for line in text.lines() {
            let line = format!("# {line}");
            self.line(&line);
        }
    }

    /// Number of test points reported so far.
    pub fn points(&self) -> u32 {
        self.passed + self.failed
    }

    /// Prints the plan and the summary line; returns the counts.
    pub fn finish(mut self) -> TapSummary {
        let plan = format!("1..{}", self.points());
        self.line(&plan);
        let summary = format!("{} passed, {} failed", self.passed, self.failed);
        self.line(&summary);
        TapSummary {
            passed: self.passed,
            failed: self.failed,
        }
    }

    fn line(&mut self, line: &str) {
        // A broken console does not stop the tests: the exit status tells.
        crate::say_to(&mut self.out, line);
    }
}

/// Keeps a description on one line and free of `#`, which would start a
/// TAP directive.
fn sanitize(description: &str) -> String {
    description
        .chars()
        .map(|c| match c {
            '#' => '_',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// The TAP text and summary of the points `report` makes, for tests.
#[cfg(test)]
pub(crate) fn capture(report: impl FnOnce(&mut Tap<&mut Vec<u8>>)) -> (String, TapSummary) {
    let mut out = Vec::new();
    let mut tap = Tap::new(&mut out);
    report(&mut tap);
    let summary = tap.finish();
    (String::from_utf8_lossy(&out).into_owned(), summary)
}

/// The points of TAP `output` that failed.
#[cfg(test)]
pub(crate) fn failures(output: &str) -> Vec<&str> {
    output.lines().filter(|l| l.starts_with("not ok")).collect()
}

/// Asserts that `output` contains `text`, and shows it whole if not.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_contains(output: &str, text: &str) {
    assert!(output.contains(text), "{text:?} is missing from:\n{output}");
}

/// Asserts that `output` contains every one of `texts`.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_contains_all(output: &str, texts: &[&str]) {
    for text in texts {
        assert_contains(output, text);
    }
}

/// Asserts that `output` contains `text` `count` times, and shows it
/// whole if not.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_count(output: &str, text: &str, count: usize) {
    let found = output.matches(text).count();
    assert_eq!(found, count, "{text:?} in:\n{output}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_points_plan_and_summary() {
        let (text, summary) = capture(|tap| {
            tap.ok("first");
            assert!(!tap.check("second", Err("expected 0\ngot 1".into())));
            tap.skip("third", "not here");
            assert!(tap.check("fourth", Ok(())));
            assert_eq!(tap.points(), 4);
            tap.bail_out("no cluster");
        });
        assert_eq!(
            text,
            "TAP version 13\n\
             ok 1 - first\n\
             not ok 2 - second\n\
             # expected 0\n\
             # got 1\n\
             ok 3 - third # SKIP not here\n\
             ok 4 - fourth\n\
             Bail out! no cluster\n\
             1..4\n\
             3 passed, 1 failed\n"
        );
        assert_eq!((summary.passed, summary.failed), (3, 1));
        assert!(!summary.all_passed());
        // A description cannot inject a directive or a line.
        let (text, _) = capture(|tap| tap.ok("a # SKIP b\nok 9 - c"));
        assert!(text.contains("ok 1 - a _ SKIP b ok 9 - c\n"));
        let (text, summary) = capture(|_| {});
        assert_eq!(text, "TAP version 13\n1..0\n0 passed, 0 failed\n");
        assert!(summary.all_passed());
    }
}
