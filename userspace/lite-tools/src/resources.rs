//! The check that LITE's resource counters ([`RESOURCES_FILE`], a
//! `NAME VALUE` line each) come back to a baseline once the test programs
//! have exited.
//!
//! `lite-cluster-test` saves the file's text as the baseline right after
//! every node joined, before this node makes any LMR of the test;
//! `lite-resources` waits, once every test program of the node has ended,
//! for the counters to return to it (other nodes' programs may still hold
//! memory here for a while) and reports each counter of [`COUNTERS`] as a
//! TAP point. Counters of objects that belong to a process, an LMR or a
//! registration must be back at or below the baseline ([`Rule::Returns`]);
//! caches, and locks, which nothing destroys, may stay above it up to a
//! bound ([`Rule::Grows`]). Counters the check does not know are listed,
//! not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use crate::debugfs::{for_each_line, once};
use crate::tap::Tap;

/// In [`crate::debugfs::DEBUGFS_DIR`].
pub const RESOURCES_FILE: &str = "resources";

/// Once the test programs have exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Everything it counts belonged to the programs or to their LMRs and
    /// registrations.
    Returns,
    /// At most this much above the baseline.
    Grows(u64),
}

/// Name, rule, and whether the file must list it (one that is not required
/// is only checked when the file lists it).
pub type Counter = (&'static str, Rule, bool);

/// One segment of the remote memory pool, at most.
const POOL_SEGMENT_BYTES: u64 = 4 << 20;

const BUFFERS_IN_USE: &str = "dma_buffers_in_use";

/// A node keeps a ring per (port, client node) once queried, for as long
/// as it is a member (README, limits): rings are reported but not held to
/// the baseline.
const REGIONS_BEYOND_RINGS: &str = "memory_regions_beyond_rings";

/// `LITE_MAX_LOCKS`: `lite_create_lock` makes locks for good, so the tests
/// leave them behind.
const MAX_LOCKS: u64 = 4096;

/// In report order. The pool keeps one
/// empty segment as a spare, and a buffer that was moved while the tests
/// ran can keep one more segment alive: two segments, each one memory
/// region, bound what the pool may keep. A leak of one region or one page
/// per test operation exceeds that soon: the cluster test makes thousands
/// of LMRs and transfers.
pub const COUNTERS: [Counter; 14] = [
    ("lmrs", Rule::Returns, true),
    ("handles", Rule::Returns, true),
    ("chunks", Rule::Returns, true),
    ("registrations", Rule::Returns, true),
    ("rpc_ports", Rule::Returns, true),
    ("reply_slots", Rule::Returns, true),
    (BUFFERS_IN_USE, Rule::Returns, true),
    ("mappings", Rule::Returns, false),
    ("names", Rule::Returns, false),
    ("async_ops", Rule::Returns, false),
    ("locks", Rule::Grows(MAX_LOCKS), true),
    (REGIONS_BEYOND_RINGS, Rule::Grows(4), true),
    ("pool_bytes", Rule::Grows(2 * POOL_SEGMENT_BYTES), true),
    ("pool_segments", Rule::Grows(2), false),
];

/// Counter values by name.
pub type Counters = BTreeMap<String, u64>;

/// Empty lines are ignored.
pub fn parse(text: &str) -> Result<Counters, String> {
    let mut counters = Counters::new();
    for_each_line(text, |line| {
        let [name, value] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            return Err("expected NAME VALUE".into());
        };
        let value = value
            .parse()
            .map_err(|_| format!("{name} has no decimal value"))?;
        let previous = counters.insert(name.to_string(), value);
        once(previous, &format!("{name} appears twice"))
    })?;
    Ok(counters)
}

/// One counter before and after the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// The counter's name.
    pub name: &'static str,
    /// Its rule.
    pub rule: Rule,
    /// Its value in the baseline, if listed there.
    pub before: Option<u64>,
    /// Its value now, if listed.
    pub after: Option<u64>,
}

impl Comparison {
    /// A counter missing on either side does not hold.
    pub fn holds(&self) -> bool {
        let (Some(before), Some(after)) = (self.before, self.after) else {
            return false;
        };
        match self.rule {
            Rule::Returns => after <= before,
            Rule::Grows(bound) => after <= before.saturating_add(bound),
        }
    }

    /// The TAP description, with the values.
    pub fn description(&self) -> String {
        let value = |v: Option<u64>| v.map_or_else(|| "missing".to_string(), |v| v.to_string());
        let change = format!(
            "{} {} -> {}",
            self.name,
            value(self.before),
            value(self.after)
        );
        match self.rule {
            Rule::Returns => format!("resources back to baseline: {change}"),
            Rule::Grows(bound) => format!("resources within bound: {change} (at most +{bound})"),
        }
    }

    /// Why the counter fails its rule, or `None`.
    pub fn problem(&self) -> Option<String> {
        if self.holds() {
            return None;
        }
        Some(match (self.before, self.after, self.rule) {
            (None, _, _) => format!("the baseline has no {} counter", self.name),
            (_, None, _) => format!("{} no longer lists {}", RESOURCES_FILE, self.name),
            (Some(before), Some(after), Rule::Returns) => format!(
                "{} more than before the tests: something the tests made was not freed",
                after - before
            ),
            (Some(before), Some(after), Rule::Grows(bound)) => format!(
                "{} more than before the tests, more than LITE may keep ({bound})",
                after - before
            ),
        })
    }
}

/// Those required or listed on either side.
pub fn compare(baseline: &Counters, now: &Counters) -> Vec<Comparison> {
    let (baseline, now) = (&with_derived(baseline), &with_derived(now));
    let listed = |name| baseline.contains_key(name) || now.contains_key(name);
    COUNTERS
        .into_iter()
        .filter(|&(name, _, required)| required || listed(name))
        .map(|(name, rule, _)| Comparison {
            name,
            rule,
            before: baseline.get(name).copied(),
            after: now.get(name).copied(),
        })
        .collect()
}

/// A part the kernel does not list counts 0.
fn with_derived(counters: &Counters) -> Counters {
    let mut all = counters.clone();
    let part = |name: &str| counters.get(name).copied().unwrap_or(0);
    if let Some(buffers) = counters.get("dma_buffers") {
        // Kept buffers, and the memory of every pool segment, are DMA
        // buffers the pools' own counters bound.
        let held = part("kept_buffers") + part("pool_segments") + part("ring_segments");
        all.insert(BUFFERS_IN_USE.to_string(), buffers.saturating_sub(held));
    }
    if let Some(regions) = counters.get("memory_regions") {
        let beyond = regions.saturating_sub(part("ring_segments"));
        all.insert(REGIONS_BEYOND_RINGS.to_string(), beyond);
    }
    all
}

/// As `name before -> after` (`missing` on the side that lacks them).
pub fn unchecked(baseline: &Counters, now: &Counters) -> Vec<String> {
    let known = |name: &str| COUNTERS.iter().any(|c| c.0 == name);
    let names: BTreeSet<&String> = baseline.keys().chain(now.keys()).collect();
    names
        .into_iter()
        .filter(|name| !known(name))
        .map(|name| {
            let value = |c: &Counters| c.get(name).map_or("missing".to_string(), u64::to_string);
            format!("{name} {} -> {}", value(baseline), value(now))
        })
        .collect()
}

/// Failure is a TAP comment: `lite-resources` fails for a missing baseline
/// later, so this is no test point of its own.
pub fn save_baseline<W: Write>(
    tap: &mut Tap<W>,
    counters: Option<io::Result<String>>,
    path: &Path,
) {
    let saved = match counters {
        None => Err("this kernel has no debugfs".to_string()),
        Some(Err(e)) => Err(format!("cannot read {RESOURCES_FILE}: {e}")),
        Some(Ok(text)) => {
            std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
    };
    match saved {
        Ok(()) => tap.comment(&format!("resource baseline saved to {}", path.display())),
        Err(why) => tap.comment(&format!("no resource baseline saved: {why}")),
    }
}

/// Time between two reads while waiting.
pub const POLL: Duration = Duration::from_secs(1);

/// One point per checked counter with the last values read, or one failed
/// point if either side cannot be read or parsed. The wait is counted in
/// polls: a read takes next to no time next to a poll.
pub fn check<W: Write>(
    tap: &mut Tap<W>,
    baseline_path: &Path,
    baseline: Result<String, String>,
    mut read: impl FnMut() -> io::Result<String>,
    mut sleep: impl FnMut(Duration),
    wait: Duration,
) {
    let path = Path::new(crate::debugfs::DEBUGFS_DIR).join(RESOURCES_FILE);
    let baseline = match baseline.and_then(|text| parse(&text)) {
        Ok(counters) => counters,
        Err(why) => {
            return tap.not_ok(
                &format!("resource baseline {} is readable", baseline_path.display()),
                &format!("{why}; lite-cluster-test saves it once every node joined"),
            )
        }
    };
    let mut waited = Duration::ZERO;
    loop {
        let now = match read().map(|text| parse(&text)) {
            Ok(Ok(now)) => now,
            Ok(Err(why)) => return tap.not_ok(&format!("{} parses", path.display()), &why),
            Err(e) => {
                let why = format!("{e}: this kernel does not report LITE's resources");
                return tap.not_ok(&format!("{} is readable", path.display()), &why);
            }
        };
        let comparisons = compare(&baseline, &now);
        let settled = comparisons.iter().all(Comparison::holds);
        if settled || waited >= wait {
            let not = if settled { "" } else { "not " };
            let waited = waited.as_secs();
            tap.comment(&format!("counters {not}settled after {waited} s"));
            for comparison in &comparisons {
                let outcome = comparison.problem().map_or(Ok(()), Err);
                tap.check(&comparison.description(), outcome);
            }
            for other in unchecked(&baseline, &now) {
                tap.comment(&format!("not checked: {other}"));
            }
            return;
        }
        sleep(POLL);
        waited += POLL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::{assert_contains, capture};

    /// The file as the kernel writes it, with every peer connected.
    const BASELINE: &str = "lmrs 0\nregistrations 0\nmappings 0\nnames 0\nhandles 0\n\
                            chunks 0\nasync_ops 0\nrpc_ports 0\nreply_slots 0\nlocks 0\n\
                            pool_segments 1\nkept_buffers 2\ndma_buffers 9\n\
                            memory_regions 1\npool_bytes 4194304\n";

    fn counters(text: &str) -> Counters {
        parse(text).expect("counters parse")
    }

    #[test]
    fn parses_name_value_lines_and_rejects_malformed_ones() {
        let parsed =
            counters("lmrs 3\n\n  pool_bytes   4096  \nnew_counter 18446744073709551615\n");
        let expected = [("lmrs", 3), ("new_counter", u64::MAX), ("pool_bytes", 4096)];
        assert_eq!(parsed, expected.map(|(n, v)| (n.to_string(), v)).into());
        // The file lists every counter but the two derived ones, and the
        // three they are derived from.
        assert_eq!(counters(BASELINE).len(), COUNTERS.len() + 1);
        for (text, error) in [
            ("lmrs\n", "line 1"),
            ("lmrs 1\nchunks -1\n", "line 2: chunks"),
            ("lmrs 1 2\n", "NAME VALUE"),
            ("lmrs 0x10\n", "no decimal value"),
            ("lmrs 1\nlmrs 2\n", "twice"),
        ] {
            let found = parse(text).expect_err(text);
            assert!(found.contains(error), "{text:?}: {found}");
        }
    }

    /// `BASELINE` with `edits` made: `NAME VALUE` sets a counter, a bare
    /// `NAME` removes it.
    fn edited(edits: &[&str]) -> Counters {
        let mut counters = counters(BASELINE);
        for edit in edits {
            match edit.split_once(' ') {
                Some((name, value)) => counters.insert(name.into(), value.parse().expect("u64")),
                None => counters.remove(*edit),
            };
        }
        counters
    }

    /// Every known counter compared between `BASELINE` and `edited(edits)`:
    /// the description of each, with its problem after ` => ` if it fails.
    fn compared(edits: &[&str]) -> Vec<String> {
        let all = compare(&counters(BASELINE), &edited(edits));
        let problem = |c: &Comparison| c.problem().map(|p| format!(" => {p}"));
        let line = |c: &Comparison| c.description() + &problem(c).unwrap_or_default();
        all.iter().map(line).collect()
    }

    #[test]
    fn counters_return_or_stay_within_their_bound() {
        let (back, within) = ("resources back to baseline:", "resources within bound:");
        let every_counter = compared(&["dma_buffers 8"]);
        assert_eq!(every_counter.len(), COUNTERS.len());
        assert_eq!(every_counter[0], format!("{back} lmrs 0 -> 0"));
        assert!(!every_counter.concat().contains("=>"), "{every_counter:?}");
        let freed = ": something the tests made was not freed";
        let leaked = compared(&["chunks 2", "async_ops 1"]);
        assert_eq!(
            leaked[2],
            format!("{back} chunks 0 -> 2 => 2 more than before the tests{freed}")
        );
        assert_eq!(
            leaked[9],
            format!("{back} async_ops 0 -> 1 => 1 more than before the tests{freed}")
        );
        assert_eq!(leaked.concat().matches("=>").count(), 2);

        let pool = format!("pool_bytes {}", 4194304 + 2 * POOL_SEGMENT_BYTES);
        let grown = compared(&["pool_segments 3", "memory_regions 5", "locks 12", &pool]);
        assert!(!grown.concat().contains("=>"), "{grown:?}");
        let over = [
            "pool_segments 3",
            "memory_regions 6",
            "locks 12",
            "pool_bytes 12587008",
        ];
        let beyond = "more than before the tests, more than LITE may keep";
        let too_many = compared(&over);
        assert_eq!(
            too_many[10],
            format!("{within} locks 0 -> 12 (at most +4096)")
        );
        let regions = "memory_regions_beyond_rings 1 -> 6 (at most +4) => 5";
        assert_eq!(too_many[11], format!("{within} {regions} {beyond} (4)"));
        let bytes = "pool_bytes 4194304 -> 12587008 (at most +8388608) => 8392704";
        assert_eq!(too_many[12], format!("{within} {bytes} {beyond} (8388608)"));
        assert_eq!(too_many.concat().matches("=>").count(), 2);
        // Segments of the ring pool are not held to the bound.
        let rings = compared(&[&over[..], &["ring_segments 2"]].concat());
        assert_eq!(rings.concat().matches("=>").count(), 1);
        assert!(!rings[11].contains("=>"));

        let handles = compared(&["handles", "sparkles 7"]);
        let missing = "handles 0 -> missing => resources no longer lists handles";
        assert_eq!(handles[1], format!("{back} {missing}"));
        assert_eq!(handles.concat().matches("=>").count(), 1);
        let lmrs = compare(&counters("chunks 0\n"), &counters(BASELINE));
        let missing = lmrs[0].problem().expect("a problem");
        assert_eq!(missing, "the baseline has no lmrs counter");
        // These are checked through the derived counters.
        let unchecked = unchecked(&counters(BASELINE), &edited(&["handles", "sparkles 7"]));
        let expected = "dma_buffers 9 -> 9, kept_buffers 2 -> 2, memory_regions 1 -> 1";
        assert_eq!(
            unchecked.join(", "),
            format!("{expected}, sparkles missing -> 7")
        );
        // Optional counters are checked only when listed.
        let brief = ["mappings", "names", "async_ops", "pool_segments"];
        let all = compare(&edited(&brief), &edited(&brief));
        assert_eq!(all.len(), COUNTERS.len() - 4);
        assert!(all.iter().all(Comparison::holds));
        let names = compare(&edited(&brief), &edited(&[brief[0], brief[2], brief[3]]));
        assert_eq!(names.len(), COUNTERS.len() - 3);
        assert!(!names
            .iter()
            .find(|c| c.name == "names")
            .expect("listed")
            .holds());
        // Buffers in use leave out kept buffers and segment memory. The
        // counts of a node after the fuzzer: rings and caches kept, 15
        // ring segments and 2 pool segments, nothing else; then one more
        // buffer, leaked.
        for (dma_buffers, kept, segments, rings, in_use) in
            [(6, 0, 1, 0, 5), (91, 69, 2, 15, 5), (92, 69, 2, 15, 6)]
        {
            let text = format!(
                "dma_buffers {dma_buffers}\nkept_buffers {kept}\n\
                 pool_segments {segments}\nring_segments {rings}\n"
            );
            let derived = with_derived(&counters(&text));
            assert_eq!(derived.get(BUFFERS_IN_USE), Some(&in_use), "{text}");
        }
    }

    /// `reads` come one after another, the last again and again; an error
    /// is an errno. Also how many times it slept.
    fn run_check(
        baseline: Result<&str, &str>,
        mut reads: Vec<Result<String, i32>>,
    ) -> (String, u32) {
        let baseline = baseline.map(str::to_string).map_err(str::to_string);
        let read = || {
            let next = if reads.len() == 1 {
                reads[0].clone()
            } else {
                reads.remove(0)
            };
            next.map_err(io::Error::from_raw_os_error)
        };
        let mut sleeps = 0;
        let sleep = |pause| {
            assert_eq!(pause, POLL);
            sleeps += 1;
        };
        let wait = Duration::from_secs(5);
        let path = Path::new("/tmp/baseline");
        let (tap, _) = capture(|tap| check(tap, path, baseline, read, sleep, wait));
        (tap, sleeps)
    }

    #[test]
    fn the_check_waits_for_other_nodes_to_let_go_and_reports_each_counter() {
        let busy = BASELINE.replace("chunks 0", "chunks 3");
        let leaked = BASELINE.replace("lmrs 0", "lmrs 1") + "extra 2\n";
        let file = "/sys/kernel/debug/lite/resources";
        // Each case: the baseline, the reads, how many times the check
        // sleeps, lines its TAP has (each in part: the last line of a case
        // may be the end of one), and how it ends.
        for (baseline, reads, sleeps, lines, end) in [
            (
                Ok(BASELINE),
                vec![Ok(busy.clone()), Ok(busy), Ok(BASELINE.into())],
                2,
                "# counters settled after 2 s\n\
                 ok 3 - resources back to baseline: chunks 0 -> 0\n",
                "1..14\n14 passed, 0 failed\n",
            ),
            // Gives up after the wait with the last values.
            (
                Ok(BASELINE),
                vec![Ok(leaked)],
                5,
                "# counters not settled after 5 s\n\
                 not ok 1 - resources back to baseline: lmrs 0 -> 1\n\
                 # not checked: extra missing -> 2\n",
                "13 passed, 1 failed\n",
            ),
            // A missing file or baseline is one failed point.
            (
                Ok(BASELINE),
                vec![Err(libc::ENOENT)],
                0,
                &format!(
                    "not ok 1 - {file} is readable\n: this kernel does not report LITE's resources"
                ),
                "0 passed, 1 failed\n",
            ),
            (
                Err("no such file"),
                vec![Ok(BASELINE.into())],
                0,
                "not ok 1 - resource baseline /tmp/baseline is readable\n\
                 # no such file; lite-cluster-test saves it once every node joined\n",
                "0 passed, 1 failed\n",
            ),
            (
                Ok(BASELINE),
                vec![Ok("lmrs many\n".into())],
                0,
                &format!("not ok 1 - {file} parses\n# line 1: lmrs has no decimal value"),
                "0 passed, 1 failed\n",
            ),
        ] {
            let (tap, slept) = run_check(baseline, reads);
            assert_eq!(slept, sleeps, "{tap}");
            let lines: Vec<_> = lines.split_inclusive('\n').collect();
            crate::tap::assert_contains_all(&tap, &lines);
            assert!(tap.ends_with(end), "{tap}");
        }
    }

    #[test]
    fn saves_the_baseline_or_says_why_not() {
        let dir = std::env::temp_dir().join(format!("lite-resources-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let path = dir.join("baseline");
        let (text, summary) = capture(|tap| {
            save_baseline(tap, Some(Ok(BASELINE.into())), &path);
            save_baseline(tap, None, &dir.join("none"));
            let missing = io::Error::from_raw_os_error(libc::ENOENT);
            save_baseline(tap, Some(Err(missing)), &dir.join("missing"));
        });
        assert_eq!((summary.passed, summary.failed), (0, 0));
        let saved = format!("# resource baseline saved to {}\n", path.display());
        assert_contains(&text, &saved);
        assert!(text.contains("# no resource baseline saved: this kernel has no debugfs\n"));
        assert!(text.contains("# no resource baseline saved: cannot read resources: "));
        assert_eq!(std::fs::read_to_string(&path).expect("saved"), BASELINE);
        assert!(!dir.join("none").exists() && !dir.join("missing").exists());
        std::fs::remove_dir_all(&dir).expect("remove temporary directory");
    }
}
