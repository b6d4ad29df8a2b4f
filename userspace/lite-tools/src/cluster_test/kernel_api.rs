//! The kernel C API (`liteapi_*`), exercised from inside the kernel by
//! LITE's `lite_cluster` KUnit suite: remote memory, asynchronous
//! transfers, registered kernel memory, RPC and kernel messages through
//! handlers. At boot the node has not joined, so the suite skips its cases;
//! here, with every node joined, it is run again through KUnit's debugfs
//! interface and each case reported.

use std::io::Write;

use crate::kernel::Kernel;
use crate::tap::Tap;

pub const SUITE: &str = "lite_cluster";

/// The cases the suite must report, each as passed.
pub const CASES: [&str; 6] = [
    "kernel_remote_memory",
    "kernel_async",
    "kernel_registration",
    "kernel_sync",
    "kernel_rpc_async",
    "kernel_messages",
];

/// The outcome of every case line (`ok`/`not ok`, at any indentation) in
/// KTAP `results`, by case name, the suite's own line too: passed, or why
/// not (`skipped: REASON`, or `failed: ` and KUnit's diagnostics).
fn case_results(results: &str) -> Vec<(String, Result<(), String>)> {
    let mut cases = Vec::new();
    for line in results.lines().map(str::trim_start) {
        let (failed, rest) = if let Some(rest) = line.strip_prefix("not ok ") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("ok ") {
            (false, rest)
        } else {
            continue;
        };
        let Some((number, rest)) = rest.split_once(' ') else {
            continue;
        };
        if number.parse::<u32>().is_err() {
            continue;
        }
        let (name, directive) = match rest.split_once(" # ") {
            Some((name, directive)) => (name.trim(), Some(directive.trim())),
            None => (rest.trim(), None),
        };
        let result = match (failed, directive) {
            (true, _) => Err(format!("failed: {}", diagnostics(results))),
            (false, Some(d)) if d.starts_with("SKIP") => {
                Err(format!("skipped: {}", d.trim_start_matches("SKIP").trim()))
            }
            (false, _) => Ok(()),
        };
        cases.push((name.to_string(), result));
    }
    cases
}

/// KUnit's diagnostic lines (`# ...`) for failed checks.
fn diagnostics(results: &str) -> String {
    results
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("# ") && (l.contains("EXPECTATION FAILED") || l.contains(".rs:")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn point(case: &str) -> String {
    format!("kernel C API in the kernel: KUnit {SUITE}.{case} passes")
}

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, nodes: u32) {
    // Why no case ran: a reason to skip them, or a failure.
    let not_run = match (nodes >= 2).then(|| kernel.run_kunit_suite(SUITE)) {
        None => Ok("needs two nodes or more"),
        Some(None) => Ok("needs the real kernel's KUnit"),
        Some(Some(Err(e))) => Err(format!("cannot run the suite: {e}")),
        Some(Some(Ok(results))) => return report(tap, &results),
    };
    for case in CASES {
        match &not_run {
            Ok(why) => tap.skip(&point(case), why),
            Err(reason) => tap.not_ok(&point(case), reason),
        }
    }
}

fn report<W: Write>(tap: &mut Tap<W>, results: &str) {
    let reported = case_results(results);
    for case in CASES {
        let outcome = match reported.iter().find(|(name, _)| name == case) {
            Some((_, outcome)) => outcome.clone(),
            None => Err(format!("not reported; results were: {results:?}")),
        };
        tap.check(&point(case), outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::{assert_contains, capture};

    const RESULTS: &str = "KTAP version 1\n\
        # Subtest: lite_cluster\n\
        # module: lite\n\
        1..6\n\
        \x20   ok 1 kernel_remote_memory\n\
        \x20   # kernel_async: EXPECTATION FAILED at drivers/infiniband/ulp/lite/lite_kunit.c:14\n\
        \x20   # kernel_async: cluster.rs:120: back[..] == data[..]\n\
        \x20   not ok 2 kernel_async\n\
        \x20   ok 3 kernel_registration # SKIP needs a joined cluster of 2+ nodes\n\
        \x20   ok 4 kernel_sync\n\
        \x20   ok 5 kernel_rpc_async\n\
        \x20   ok 6 kernel_messages\n\
        not ok 1 lite_cluster\n";

    #[test]
    fn parses_passes_failures_and_skips_and_passes_only_passed_cases() {
        let case = |name: &str, result| (name.to_string(), result);
        let failed = Err(format!("failed: {}", diagnostics(RESULTS)));
        let skipped = Err("skipped: needs a joined cluster of 2+ nodes".to_string());
        let expected = vec![
            case("kernel_remote_memory", Ok(())),
            case("kernel_async", failed.clone()),
            case("kernel_registration", skipped),
            case("kernel_sync", Ok(())),
            case("kernel_rpc_async", Ok(())),
            case("kernel_messages", Ok(())),
            case("lite_cluster", failed),
        ];
        assert_eq!(case_results(RESULTS), expected);
        let text = diagnostics(RESULTS);
        assert_contains(&text, "cluster.rs:120: back[..] == data[..]");
        // Only passed cases pass.
        let (_, summary) = capture(|tap| report(tap, RESULTS));
        assert_eq!((summary.passed, summary.failed), (4, 2));
        let all_ok = RESULTS
            .replace("not ok 2", "ok 2")
            .replace(" # SKIP needs a joined cluster of 2+ nodes", "");
        assert!(capture(|tap| report(tap, &all_ok)).1.all_passed());
        let (_, summary) = capture(|tap| report(tap, "KTAP version 1\n"));
        assert_eq!(summary.failed as usize, CASES.len());
    }
}
