//! `cargo xtask fuzz` (README): every node runs guest role [`ROLE`]; any
//! alarm, failed test point or log problem fails the command.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::cluster;
use crate::demo::{run_showing_consoles, ConsolesRun};
use crate::kernel::Flavour;
use crate::logscan::strip_timestamp;
use crate::paths::Cache;
use crate::{interrupt, logscan, tap, ui};

pub const ROLE: &str = "fuzz";
pub const PROGRAM: &str = "lite-fuzz";
/// For booting, joining and the fuzzers' start and end.
const MARGIN: Duration = Duration::from_secs(20 * 60);

/// Start of the guest's summary lines, after `# ` (see
/// `userspace/lite-tools/src/fuzz/report.rs`, which prints them).
pub(crate) const CALLS_PREFIX: &str = "lite-fuzz calls ";
pub(crate) const TOTAL_PREFIX: &str = "lite-fuzz total ";
pub(crate) const ALARM_PREFIX: &str = "ALARM ";

pub fn seed_from_clock() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // splitmix64's finaliser spreads the clock's low bits over the word.
    let mut z = nanos ^ u64::from(std::process::id()) << 40;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Decimal, or hexadecimal with `0x`.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("expected a decimal or 0x-hexadecimal 64-bit seed ({e})"))
}

pub fn kernel_params(seconds: u64, seed: u64) -> Vec<String> {
    vec![
        format!("lite.fuzzsecs={seconds}"),
        format!("lite.seed={seed:#x}"),
    ]
}

pub fn replay_command(minutes: u64, seed: u64, nodes: usize) -> String {
    format!("cargo xtask fuzz --minutes {minutes} --seed {seed:#x} --nodes {nodes}")
}

pub fn run(
    minutes: u32,
    seed: Option<u64>,
    nodes: usize,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<()> {
    let seed = seed.unwrap_or_else(seed_from_clock);
    let replay = replay_command(minutes.into(), seed, nodes);
    ui::say(&format!("lite-fuzz seed {seed:#x}; replay with: {replay}"));
    let cache = Cache::locate()?;
    let images = cluster::Images::build(&cache, Flavour::Debug, kernel_src, kernel_image)?;
    let logs = cache.run_logs("fuzz")?;
    let seconds = u64::from(minutes) * 60;
    let params = kernel_params(seconds, seed);
    let extra = |_: usize| params.clone();
    let roles = vec![ROLE.to_string(); nodes];
    let spec = images.api_test_spec(roles, &extra, &logs);
    let timeout = Duration::from_secs(seconds) + MARGIN;
    let ConsolesRun { waited, node_logs } = run_showing_consoles(&spec, timeout, alarm_line)?;
    interrupt::check()?;

    ui::say("==> fuzz summary");
    let mut failed = 0;
    let mut cluster_counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (name, log) in &node_logs {
        let node = NodeReport::parse(&logscan::read_log(log));
        for line in node.describe(name) {
            ui::say(&format!("    {line}"));
        }
        if !node.problems().is_empty() {
            failed += 1;
        }
        for (call, outcomes) in &node.calls {
            let merged = cluster_counts.entry(call.clone()).or_default();
            for (outcome, count) in outcomes {
                *merged.entry(outcome.clone()).or_default() += count;
            }
        }
    }
    ui::say("    calls on all nodes (calls: outcomes):");
    for line in call_table(&cluster_counts) {
        ui::say(&format!("      {line}"));
    }
    ui::say(&format!("    logs: {}", logs.display()));
    ui::say(&format!("    seed {seed:#x}; replay with: {replay}"));
    waited?;
    if failed > 0 {
        ui::say(&format!(
            "fuzzing found problems on {failed} of {nodes} nodes"
        ));
        return Err(ui::ALREADY_REPORTED.into());
    }
    ui::say(&format!("fuzzing found nothing on {nodes} nodes"));
    Ok(())
}

/// What one node's console says about its fuzzing.
#[derive(Debug, Default, PartialEq, Eq)]
struct NodeReport {
    /// Per call: outcome (`calls`, `ok`, errno names) and count.
    calls: BTreeMap<String, BTreeMap<String, u64>>,
    /// The totals line's values.
    totals: BTreeMap<String, u64>,
    /// Alarm lines.
    alarms: Vec<String>,
    /// The fuzzer's TAP.
    tap: tap::Report,
    /// The kernel log scan's findings and the guest's exit.
    log_problems: Vec<String>,
}

impl NodeReport {
    fn parse(log: &str) -> NodeReport {
        let mut report = NodeReport {
            tap: tap::Report::parse(log),
            log_problems: logscan::problems(log),
            ..NodeReport::default()
        };
        for line in log.lines() {
            let Some(comment) = strip_timestamp(line).trim_end().strip_prefix("# ") else {
                continue;
            };
            if let Some(counts) = comment.strip_prefix(CALLS_PREFIX) {
                let mut fields = counts.split_whitespace().filter_map(|f| f.split_once('='));
                if let Some((call, total)) = fields.next() {
                    let outcomes = report.calls.entry(call.to_string()).or_default();
                    outcomes.insert("calls".to_string(), total.parse().unwrap_or(0));
                    for (outcome, count) in fields {
                        outcomes.insert(outcome.to_string(), count.parse().unwrap_or(0));
                    }
                }
            } else if let Some(totals) = comment.strip_prefix(TOTAL_PREFIX) {
                for (key, value) in totals.split_whitespace().filter_map(|f| f.split_once('=')) {
                    report
                        .totals
                        .insert(key.to_string(), value.parse().unwrap_or(0));
                }
            } else if comment.starts_with(ALARM_PREFIX) {
                report.alarms.push(comment.to_string());
            }
        }
        report
    }

    fn total(&self, key: &str) -> Option<u64> {
        self.totals.get(key).copied()
    }

    /// Everything that fails the node.
    fn problems(&self) -> Vec<String> {
        let mut problems = self.log_problems.clone();
        // With "no TAP test results" when lite-fuzz printed none.
        problems.extend(self.tap.problems());
        match self.total("alarms") {
            None => problems.push("lite-fuzz printed no totals (it did not finish)".to_string()),
            Some(0) if self.alarms.is_empty() => {}
            Some(alarms) => {
                problems.push(format!("{} alarms", alarms.max(self.alarms.len() as u64)))
            }
        }
        problems
    }

    /// Lines describing the node for the summary.
    fn describe(&self, name: &str) -> Vec<String> {
        let number = |key| self.total(key).map_or("?".to_string(), |n| n.to_string());
        let problems = self.problems();
        let mut lines = vec![format!(
            "{name}: {} calls, {} alarms, {} hung; TAP {} passed, {} failed; {}",
            number("calls"),
            number("alarms"),
            number("hung"),
            self.tap.passed(),
            self.tap.failed(),
            if self.log_problems.is_empty() {
                "kernel log clean"
            } else {
                "kernel log has problems"
            }
        )];
        let mut errnos: BTreeMap<&str, u64> = BTreeMap::new();
        for outcomes in self.calls.values() {
            for (outcome, count) in outcomes {
                if outcome != "calls" && outcome != "ok" {
                    *errnos.entry(outcome).or_default() += count;
                }
            }
        }
        if !errnos.is_empty() {
            lines.push(format!("  errnos: {}", most_frequent_first(errnos)));
        }
        for alarm in self.alarms.iter().take(10) {
            lines.push(format!("  {alarm}"));
        }
        if self.alarms.len() > 10 {
            lines.push(format!(
                "  ... {} more alarms in the log",
                self.alarms.len() - 10
            ));
        }
        for problem in problems.iter().filter(|p| !p.ends_with(" alarms")) {
            for (i, text) in problem.lines().enumerate() {
                lines.push(format!(
                    "  {}{text}",
                    if i == 0 { "problem: " } else { "  " }
                ));
            }
        }
        lines
    }
}

/// Most frequent first.
fn call_table(counts: &BTreeMap<String, BTreeMap<String, u64>>) -> Vec<String> {
    let width = counts.keys().map(String::len).max().unwrap_or(0);
    counts
        .iter()
        .map(|(call, outcomes)| {
            let total = outcomes.get("calls").copied().unwrap_or(0);
            let rest = outcomes
                .iter()
                .filter(|(o, _)| *o != "calls")
                .map(|(o, n)| (o.as_str(), *n));
            format!("{call:<width$} {total:>8}: {}", most_frequent_first(rest))
        })
        .collect()
}

/// `outcome count, ...`, most frequent first (then by name).
fn most_frequent_first<'a>(counts: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let mut counts: Vec<(&str, u64)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let counts: Vec<String> = counts.iter().map(|(o, n)| format!("{o} {n}")).collect();
    counts.join(", ")
}

/// Alarms, failed test points and totals, without their timestamps.
fn alarm_line(line: &str) -> Option<&str> {
    let line = strip_timestamp(line.trim_end());
    let shown = line.starts_with(&format!("# {ALARM_PREFIX}"))
        || line.starts_with("not ok ")
        || line.starts_with("Bail out!")
        || line.starts_with(&format!("# {TOTAL_PREFIX}"));
    shown.then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[    3.0] Run /init as init process
LITE-GUEST-RUN role=fuzz
TAP version 13
# lite-fuzz seed=0x2a
ok 1 - fuzz: node 1 is a member of the cluster (joined)
[   40.1] lite: node 2 joined
# ALARM node 1 proc 0 thread 2 step 17: lite_free(0x5) returned 0: succeeded (0), though it must fail
# lite-fuzz calls lite_free=3 ok=1 EBADF=2
# lite-fuzz calls lite_fence=4 ok=3 EINTR=1
# lite-fuzz total calls=7 alarms=1 hung=0
not ok 2 - fuzz: no alarms
# 1 alarms
1..2
1 passed, 1 failed
LITE-GUEST-EXIT rc=1
";

    #[test]
    fn a_nodes_console_gives_its_counts_alarms_and_verdict() {
        let report = NodeReport::parse(LOG);
        assert_eq!(report.calls["lite_free"]["calls"], 3);
        assert_eq!(report.calls["lite_free"]["EBADF"], 2);
        assert_eq!(report.calls["lite_fence"]["EINTR"], 1);
        assert_eq!(report.total("calls"), Some(7));
        assert_eq!(report.alarms.len(), 1);
        let problems = report.problems();
        assert!(problems.iter().any(|p| p == "1 alarms"), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("rc=1")), "{problems:?}");
        let lines = report.describe("node1");
        assert!(lines[0].starts_with("node1: 7 calls, 1 alarms, 0 hung; TAP 1 passed, 1 failed"));
        assert_eq!(lines[1], "  errnos: EBADF 2, EINTR 1");
        assert!(lines[2].starts_with("  ALARM node 1 proc 0"));
        // The table sums the outcomes per call, most frequent first.
        let table = [
            "lite_fence        4: ok 3, EINTR 1",
            "lite_free         3: EBADF 2, ok 1",
        ];
        assert_eq!(call_table(&report.calls), table);
        // A clean run has no problems, and a cut one does.
        let clean = "TAP version 13\nok 1 - fuzz: no alarms\n\
                     # lite-fuzz total calls=10 alarms=0 hung=0\n1..1\n1 passed, 0 failed\n\
                     LITE-GUEST-EXIT rc=0\n";
        assert_eq!(NodeReport::parse(clean).problems(), Vec::<String>::new());
        let cut = "TAP version 13\nok 1 - fuzz: joined\n";
        let problems = NodeReport::parse(cut).problems();
        let no_totals = problems.iter().any(|p| p.contains("no totals"));
        assert!(no_totals, "{problems:?}");
    }

    #[test]
    fn seeds_and_parameters_reach_the_guest_and_the_replay() {
        assert_eq!(parse_seed("0x2a"), Ok(42));
        assert_eq!(parse_seed("42"), Ok(42));
        assert!(parse_seed("x").is_err());
        let params = kernel_params(60, 42);
        assert_eq!(params, ["lite.fuzzsecs=60", "lite.seed=0x2a"]);
        let replay = "cargo xtask fuzz --minutes 2 --seed 0x2a --nodes 3";
        assert_eq!(replay_command(2, 42, 3), replay);
    }
}
