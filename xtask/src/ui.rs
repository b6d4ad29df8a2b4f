//! Console reporting: `==> step` lines, elapsed times and progress lines.

use std::io::Write;
use std::time::{Duration, Instant};

/// A long-running step: announced when created, timed when finished.
pub struct Step {
    name: String,
    start: Instant,
}

impl Step {
    /// Prints `==> name` and starts the clock.
    pub fn start(name: impl Into<String>) -> Self {
        let name = name.into();
        say(&format!("==> {name}"));
        Self {
            name,
            start: Instant::now(),
        }
    }

    /// Prints `==> name (elapsed)`.
    pub fn done(self) {
        let time = duration(self.start.elapsed());
        say(&format!("==> {} ({time})", self.name));
    }

    /// Prints `==> name: note (elapsed)`, e.g. "up to date".
    pub fn done_with(self, note: &str) {
        let time = duration(self.start.elapsed());
        say(&format!("==> {}: {note} ({time})", self.name));
    }
}

/// An error whose explanation has already been printed: `main` exits with
/// this status (never 0) without adding an `error:` line, so a command's
/// own final summary stays the last line of output.
#[derive(Debug)]
pub struct ReportedExitStatus(pub u8);

/// The [`ReportedExitStatus`] of a command whose status says no more than
/// that it failed.
pub const ALREADY_REPORTED: ReportedExitStatus = ReportedExitStatus(1);

impl std::fmt::Display for ReportedExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed with exit status {} (see above)", self.0)
    }
}

impl std::error::Error for ReportedExitStatus {}

/// Each of `items` on an indented line of its own, unless there are none.
pub fn fail_listing(what: &str, items: &[impl AsRef<str>]) -> anyhow::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    anyhow::bail!("{what}:\n  {}", items.join("\n  "))
}

/// Flushes, so progress shows up immediately when stdout is a pipe.
pub fn say(line: &str) {
    if cfg!(test) {
        // println! output is captured by the test harness; direct writes are not.
        println!("{line}");
        return;
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) must not abort a build half-way.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub fn progress(line: &str) {
    say(&format!("    {line}"));
}

/// `42s`, `3m07s` or `1h02m`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{}.{}s", secs, d.subsec_millis() / 100)
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations() {
        assert_eq!(duration(Duration::from_millis(4_250)), "4.2s");
        assert_eq!(duration(Duration::from_secs(187)), "3m07s");
        assert_eq!(duration(Duration::from_secs(3720)), "1h02m");
    }
}
