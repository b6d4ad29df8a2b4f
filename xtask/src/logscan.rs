//! Scanning guest serial logs for kernel crashes and the guest's exit
//! status, and watching a growing log for a marker line.

use std::path::PathBuf;

use crate::fsutil::LogFollower;

/// Substrings that mean the kernel (or Rust code in it) went wrong.
pub const CRASH_PATTERNS: &[&str] = &[
    "BUG:",
    "Oops",
    "WARNING:",
    "Kernel panic",
    "KASAN:",
    "INFO: lockdep",
    "possible circular locking",
    "inconsistent lock state",
    "general protection fault",
    "Call Trace:",
    "panicked",
    "blocked for more than",
    // LITE found a peer's RPC ring corrupt: no correct node writes one.
    "corrupted its request ring",
    "discarded this node's requests",
];

/// Marker the guest's `/init` prints last: `LITE-GUEST-EXIT rc=<code>`.
pub const EXIT_MARKER: &str = "LITE-GUEST-EXIT rc=";

/// Lines of context reported with a crash.
const CONTEXT_LINES: usize = 10;

/// The first crash pattern found in a log.
#[derive(Debug, PartialEq, Eq)]
pub struct Crash {
    /// The pattern that matched.
    pub pattern: &'static str,
    /// 1-based line number of the match.
    pub line: usize,
    /// The matching line and the lines after it.
    pub context: Vec<String>,
}

/// Removes a printk timestamp (`[    1.234567] `) from a console line.
pub fn strip_timestamp(line: &str) -> &str {
    let line = line.trim_end_matches('\r');
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((stamp, after)) = rest.split_once(']') {
            let stamp = stamp.trim();
            if !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return after.strip_prefix(' ').unwrap_or(after);
            }
        }
    }
    line
}

/// The first line matching any of [`CRASH_PATTERNS`], with context.
pub fn first_crash(log: &str) -> Option<Crash> {
    let lines: Vec<&str> = log.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if let Some(pattern) = CRASH_PATTERNS.iter().find(|p| line.contains(*p)) {
            let end = (i + CONTEXT_LINES).min(lines.len());
            return Some(Crash {
                pattern,
                line: i + 1,
                context: lines[i..end].iter().map(|l| l.to_string()).collect(),
            });
        }
    }
    None
}

/// The exit code from the last `LITE-GUEST-EXIT rc=<code>` line, if any.
pub fn guest_exit(log: &str) -> Option<i32> {
    log.lines().rev().find_map(|line| {
        let (_, rest) = line.split_once(EXIT_MARKER)?;
        let code: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        code.parse().ok()
    })
}

/// Problems with one node's log: a crash, or no `LITE-GUEST-EXIT rc=0`.
pub fn problems(log: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(crash) = first_crash(log) {
        let head = format!(
            "kernel log shows \"{}\" at line {}:",
            crash.pattern, crash.line
        );
        problems.push(crate::tap::with_diagnostics(head, &crash.context));
    }
    match guest_exit(log) {
        Some(0) => {}
        Some(rc) => problems.push(format!("guest role exited with rc={rc}")),
        None => problems.push("guest never reported LITE-GUEST-EXIT (hung or crashed)".into()),
    }
    problems
}

/// Follows a console log that is still being written and tells when a
/// complete line containing a marker has appeared.
pub struct MarkerWatch {
    log: LogFollower,
    marker: String,
    found: bool,
}

impl MarkerWatch {
    /// Watches `path` (which need not exist yet) for `marker`.
    pub fn new(path: PathBuf, marker: &str) -> Self {
        Self {
            log: LogFollower::new(path),
            marker: marker.to_string(),
            found: false,
        }
    }

    /// Like [`MarkerWatch::new`], for lines completed after this call only.
    pub fn from_now_on(path: PathBuf, marker: &str) -> Self {
        let mut watch = Self::new(path, marker);
        watch.log.new_lines();
        watch
    }

    /// The marker watched for.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Reads the lines completed in the log since the last call; whether
    /// the marker has appeared by now. A marker on a line not yet ended
    /// counts once its line ends.
    pub fn poll(&mut self) -> bool {
        if !self.found {
            let lines = self.log.new_lines();
            self.found = lines.iter().any(|line| line.contains(&self.marker));
        }
        self.found
    }
}

/// A console log as text; a missing log reads as empty (a scan then fails
/// it, and it reports no exit).
pub fn read_log(path: &std::path::Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "Linux version 6.12.117\n\
        Kernel command line: console=ttyS0 panic=-1 kunit.enable=0 lite.ip=10.77.0.1/24\n\
        Run /init as init process\nLITE-GUEST-RUN role=demo\nLITE-DEMO node 1 ok\n\
        LITE-GUEST-EXIT rc=0\nreboot: Restarting system\n";

    #[test]
    fn clean_log_passes_and_panic_option_does_not_match() {
        assert_eq!(first_crash(CLEAN), None);
        assert_eq!(guest_exit(CLEAN), Some(0));
        assert!(problems(CLEAN).is_empty());
    }

    #[test]
    fn finds_the_first_crash_with_context() {
        let log = format!(
            "{CLEAN}[   12.5] BUG: KASAN: slab-use-after-free in lite_free+0x1/0x2\n\
             Read of size 8\nCall Trace:\n <TASK>\n"
        );
        let crash = first_crash(&log).unwrap();
        assert_eq!(crash.pattern, "BUG:");
        assert_eq!(crash.line, 8);
        assert_eq!(crash.context.len(), 4);
        assert!(crash.context[2].contains("Call Trace:"));
        let p = problems(&log);
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("slab-use-after-free"), "{p:?}");
    }

    #[test]
    fn every_pattern_is_detected() {
        for pattern in CRASH_PATTERNS {
            let log = format!("ok\nxx {pattern} yy\n");
            assert_eq!(first_crash(&log).map(|c| c.pattern), Some(*pattern));
        }
        let rust = "rust_kernel: panicked at drivers/infiniband/ulp/lite/lmr.rs:10:5:\n";
        assert!(first_crash(rust).is_some());
    }

    #[test]
    fn missing_or_failed_exit_is_a_problem() {
        assert_eq!(guest_exit("LITE-GUEST-EXIT rc=3\n"), Some(3));
        assert!(problems("booting\n")[0].contains("never reported"));
        assert!(problems("LITE-GUEST-EXIT rc=1\n")[0].contains("rc=1"));
    }

    #[test]
    fn strips_timestamps_only() {
        assert_eq!(strip_timestamp("[    1.234567] ok 1 lite"), "ok 1 lite");
        assert_eq!(strip_timestamp("[ok] not a stamp"), "[ok] not a stamp");
        assert_eq!(strip_timestamp("    ok 2 x\r"), "    ok 2 x");
    }

    #[test]
    fn a_marker_in_a_missing_or_growing_file_counts_once_its_line_ends() {
        let dir = crate::fsutil::TempDir::new("logscan-marker").expect("temporary directory");
        let path = dir.path().join("node4.log");
        let mut watch = MarkerWatch::new(path.clone(), "VICTIM ready");
        assert!(!watch.poll());
        std::fs::write(&path, "Run /init as init process\nLITE-GUEST-RUN role=x\n").unwrap();
        assert!(!watch.poll());
        crate::fsutil::append(&path, "[   12.5] lite: node 2 joined\nVICTIM re");
        assert!(!watch.poll());
        crate::fsutil::append(&path, "ady");
        assert!(!watch.poll());
        crate::fsutil::append(&path, "\r\nmore output\n");
        assert!(watch.poll());
        assert!(watch.poll(), "once found, it stays found");
    }
}
