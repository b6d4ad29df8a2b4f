//! Scanning guest serial logs for kernel crashes and the guest's exit
//! status, and watching a growing log for a marker line.

use std::path::PathBuf;

use crate::fsutil::LogFollower;

/// The kernel (or Rust code in it) went wrong.
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

/// What `/init` prints last.
pub const EXIT_MARKER: &str = "LITE-GUEST-EXIT rc=";
const CONTEXT_LINES: usize = 10;

#[derive(Debug, PartialEq, Eq)]
pub struct Crash {
    pub pattern: &'static str,
    /// From 1.
    pub line: usize,
    /// The matching line and the lines after it.
    pub context: Vec<String>,
}

/// `[    1.234567] `.
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

/// From the last `LITE-GUEST-EXIT rc=<code>`.
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

/// A crash, or no `LITE-GUEST-EXIT rc=0`.
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

/// Tells when a complete line with a marker appeared in a growing log.
pub struct MarkerWatch {
    log: LogFollower,
    marker: String,
    found: bool,
}

impl MarkerWatch {
    /// `path` need not exist yet.
    pub fn new(path: PathBuf, marker: &str) -> Self {
        Self {
            log: LogFollower::new(path),
            marker: marker.to_string(),
            found: false,
        }
    }

    /// For lines completed after this call only.
    pub fn from_now_on(path: PathBuf, marker: &str) -> Self {
        let mut watch = Self::new(path, marker);
        watch.log.new_lines();
        watch
    }

    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Whether the marker has appeared by now, on an ended line.
    pub fn poll(&mut self) -> bool {
        if !self.found {
            let lines = self.log.new_lines();
            self.found = lines.iter().any(|line| line.contains(&self.marker));
        }
        self.found
    }
}

/// A missing log reads as empty (a scan then fails it: it reports no exit).
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
    fn a_clean_log_passes() {
        // `panic=-1` on the command line is no panic.
        assert_eq!(first_crash(CLEAN), None);
        assert_eq!(guest_exit(CLEAN), Some(0));
        assert!(problems(CLEAN).is_empty());
        // A failed or missing exit: suite's nodes_are_counted_per_program_with_their_scans.
    }

    #[test]
    fn finds_the_first_crash_with_context_for_every_pattern() {
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
        for pattern in CRASH_PATTERNS {
            let log = format!("ok\nxx {pattern} yy\n");
            assert_eq!(first_crash(&log).map(|c| c.pattern), Some(*pattern));
        }
        let rust = "rust_kernel: panicked at drivers/infiniband/ulp/lite/lmr.rs:10:5:\n";
        assert!(first_crash(rust).is_some());
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
