//! LITE's resource counters and the check that they come back to a
//! baseline once the test programs have exited.
//!
//! The kernel lists what it holds in debugfs file [`RESOURCES_FILE`], one
//! `NAME VALUE` line per counter (decimal `u64`):
//!
//! ```text
//! lmrs 0
//! handles 0
//! chunks 0
//! pool_bytes 16384
//! ```
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
use std::time::{Duration, Instant};

use crate::tap::Tap;

/// The counters file in [`crate::debugfs::DEBUGFS_DIR`].
pub const RESOURCES_FILE: &str = "resources";

/// What a counter must do once the test programs have exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Be at or below the baseline: everything it counts belonged to the
    /// programs or to their LMRs and registrations.
    Returns,
    /// Exceed the baseline by at most this much.
    Grows(u64),
}

/// A counter the check knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// Its name in [`RESOURCES_FILE`].
    pub name: &'static str,
    /// What it must do.
    pub rule: Rule,
    /// Whether the file must list it; one that is not required is only
    /// checked when the file lists it.
    pub required: bool,
}

const fn counter(name: &'static str, rule: Rule, required: bool) -> Counter {
    Counter {
        name,
        rule,
        required,
    }
}

/// Bytes of one segment of LITE's remote memory pool (at most).
const POOL_SEGMENT_BYTES: u64 = 4 << 20;

/// Name of the derived counter: DMA buffers minus those kept for reuse.
const BUFFERS_IN_USE: &str = "dma_buffers_in_use";

/// Name of the derived counter: memory regions minus the segments of the
/// RPC ring pool. A node keeps a ring per (port, client node) once queried,
/// for as long as it is a member (README, limits): those are reported
/// (`rpc_rings`, `ring_segments`, `ring_bytes`) but not held to the
/// baseline.
const REGIONS_BEYOND_RINGS: &str = "memory_regions_beyond_rings";

/// Locks a node keeps at most (`LITE_MAX_LOCKS`): `lite_create_lock`
/// makes locks for good, so the tests leave them behind.
const MAX_LOCKS: u64 = 4096;

/// Every counter the check knows, in report order. The pool keeps one
/// empty segment as a spare, and a buffer that was moved while the tests
/// ran can keep one more segment alive: two segments, each one memory
/// region, bound what the pool may keep. A leak of one region or one page
/// per test operation exceeds that soon: the cluster test makes thousands
/// of LMRs and transfers.
pub const COUNTERS: [Counter; 14] = [
    counter("lmrs", Rule::Returns, true),
    counter("handles", Rule::Returns, true),
    counter("chunks", Rule::Returns, true),
    counter("registrations", Rule::Returns, true),
    counter("rpc_ports", Rule::Returns, true),
    counter("reply_slots", Rule::Returns, true),
    counter(BUFFERS_IN_USE, Rule::Returns, true),
    counter("mappings", Rule::Returns, false),
    counter("names", Rule::Returns, false),
    counter("async_ops", Rule::Returns, false),
    counter("locks", Rule::Grows(MAX_LOCKS), true),
    counter(REGIONS_BEYOND_RINGS, Rule::Grows(4), true),
    counter("pool_bytes", Rule::Grows(2 * POOL_SEGMENT_BYTES), true),
    counter("pool_segments", Rule::Grows(2), false),
];

/// Counter values by name.
pub type Counters = BTreeMap<String, u64>;

/// Parses the text of [`RESOURCES_FILE`]; empty lines are ignored.
pub fn parse(text: &str) -> Result<Counters, String> {
    let mut counters = Counters::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (name, value) = match fields[..] {
            [] => continue,
            [name, value] => (name, value),
            _ => return Err(format!("line {number}: expected NAME VALUE, got {line:?}")),
        };
        let value: u64 = value
            .parse()
            .map_err(|_| format!("line {number}: {name} has no decimal value: {value:?}"))?;
        if counters.insert(name.to_string(), value).is_some() {
            return Err(format!("line {number}: {name} appears twice"));
        }
    }
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
    /// Whether the counter obeys its rule; a counter missing on either
    /// side does not.
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

/// Every counter of [`COUNTERS`] that is required or listed on either
/// side, before and after.
pub fn compare(baseline: &Counters, now: &Counters) -> Vec<Comparison> {
    let (baseline, now) = (&with_derived(baseline), &with_derived(now));
    COUNTERS
        .iter()
        .filter(|c| c.required || baseline.contains_key(c.name) || now.contains_key(c.name))
        .map(|c| Comparison {
            name: c.name,
            rule: c.rule,
            before: baseline.get(c.name).copied(),
            after: now.get(c.name).copied(),
        })
        .collect()
}

/// `counters` with the derived counters added: [`BUFFERS_IN_USE`]
/// (`dma_buffers` less `kept_buffers` and the segments of both pools, each
/// segment's memory being one buffer) and [`REGIONS_BEYOND_RINGS`]
/// (`memory_regions` less `ring_segments`), each taking 0 for a part the
/// kernel does not list.
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

/// Counters listed before or after that the check does not know, as
/// `name before -> after` (`missing` on the side that lacks them).
pub fn unchecked(baseline: &Counters, now: &Counters) -> Vec<String> {
    let known = |name: &str| COUNTERS.iter().any(|c| c.name == name);
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

/// Saves `counters`, the text of [`RESOURCES_FILE`] as
/// [`crate::kernel::Kernel::read_debugfs`] returned it, to `path` as the baseline. Says so
/// in a TAP comment when it cannot: `lite-resources` fails for a missing
/// baseline later, so this is no test point of its own.
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

/// How [`check`] reads the counters and waits between reads.
pub trait Source {
    /// The text of [`RESOURCES_FILE`] now.
    fn read(&mut self) -> io::Result<String>;
    /// Waits `duration` before the next read.
    fn sleep(&mut self, duration: Duration);
    /// Time since the check started.
    fn elapsed(&self) -> Duration;
}

/// The real counters, in debugfs.
pub struct Debugfs {
    started: Instant,
}

impl Debugfs {
    /// Starts the clock of [`Source::elapsed`].
    pub fn new() -> Self {
        Debugfs {
            started: Instant::now(),
        }
    }
}

impl Default for Debugfs {
    fn default() -> Self {
        Self::new()
    }
}

impl Source for Debugfs {
    fn read(&mut self) -> io::Result<String> {
        crate::debugfs::read_file(RESOURCES_FILE)
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// Time between two reads while waiting.
pub const POLL: Duration = Duration::from_secs(1);

/// Reports to `tap` whether the counters of `source` return to `baseline`
/// (the text of file `baseline_path`, or why it could not be read) within
/// `wait`: one point per checked counter with the last values read, or one
/// failed point if either side cannot be read or parsed.
pub fn check<S: Source, W: Write>(
    tap: &mut Tap<W>,
    baseline_path: &Path,
    baseline: Result<String, String>,
    source: &mut S,
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
    loop {
        let now = match source.read().map(|text| parse(&text)) {
            Ok(Ok(now)) => now,
            Ok(Err(why)) => return tap.not_ok(&format!("{} parses", path.display()), &why),
            Err(e) => {
                let why = format!("{e}: this kernel does not report LITE's resources");
                return tap.not_ok(&format!("{} is readable", path.display()), &why);
            }
        };
        let comparisons = compare(&baseline, &now);
        let settled = comparisons.iter().all(Comparison::holds);
        if settled || source.elapsed() >= wait {
            let waited = source.elapsed().as_secs();
            let not = if settled { "" } else { "not " };
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
        source.sleep(POLL);
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

    fn find<'a>(all: &'a [Comparison], name: &str) -> &'a Comparison {
        all.iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} is not checked"))
    }

    #[test]
    fn buffers_in_use_leave_out_kept_buffers_and_segment_memory() {
        // The counts of a node after the fuzzer: rings and caches kept, 15
        // ring segments and 2 pool segments, nothing else.
        let before = counters("dma_buffers 6\nkept_buffers 0\npool_segments 1\nring_segments 0\n");
        let after =
            counters("dma_buffers 91\nkept_buffers 69\npool_segments 2\nring_segments 15\n");
        assert_eq!(with_derived(&before).get(BUFFERS_IN_USE), Some(&5));
        assert_eq!(with_derived(&after).get(BUFFERS_IN_USE), Some(&5));
        let leaked =
            counters("dma_buffers 92\nkept_buffers 69\npool_segments 2\nring_segments 15\n");
        assert_eq!(with_derived(&leaked).get(BUFFERS_IN_USE), Some(&6));
    }

    #[test]
    fn parses_name_value_lines_and_rejects_malformed_ones() {
        let parsed =
            counters("lmrs 3\n\n  pool_bytes   4096  \nnew_counter 18446744073709551615\n");
        assert_eq!(parsed.get("lmrs"), Some(&3));
        assert_eq!(parsed.get("pool_bytes"), Some(&4096));
        assert_eq!(parsed.get("new_counter"), Some(&u64::MAX));
        assert_eq!(parsed.len(), 3);
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

    /// The comparison of counter `name`, which must fail its rule with
    /// `description`.
    fn failing<'a>(all: &'a [Comparison], name: &str, description: &str) -> &'a Comparison {
        let comparison = find(all, name);
        assert!(!comparison.holds(), "{name}");
        assert_eq!(comparison.description(), description);
        comparison
    }

    #[test]
    fn returning_counters_must_be_back_at_or_below_the_baseline() {
        let before = counters(BASELINE);
        let mut after = before.clone();
        after.insert("dma_buffers".into(), 8);
        let all = compare(&before, &after);
        assert_eq!(all.len(), COUNTERS.len());
        assert!(all.iter().all(Comparison::holds));
        let lmrs = "resources back to baseline: lmrs 0 -> 0";
        assert_eq!(all[0].description(), lmrs);

        after.insert("chunks".into(), 2);
        after.insert("async_ops".into(), 1);
        let all = compare(&before, &after);
        let chunks = failing(&all, "chunks", "resources back to baseline: chunks 0 -> 2");
        assert!(chunks.problem().expect("a problem").starts_with("2 more"));
        assert!(!find(&all, "async_ops").holds());
    }

    #[test]
    fn caches_and_locks_may_grow_up_to_their_bound() {
        let before = counters(BASELINE);
        let mut after = before.clone();
        let spare = 2 * POOL_SEGMENT_BYTES;
        after.insert("pool_bytes".into(), 4194304 + spare);
        after.insert("pool_segments".into(), 3);
        after.insert("memory_regions".into(), 5);
        after.insert("locks".into(), 12);
        assert!(compare(&before, &after).iter().all(Comparison::holds));

        after.insert("pool_bytes".into(), 4194304 + spare + 4096);
        after.insert("memory_regions".into(), 6);
        let all = compare(&before, &after);
        failing(
            &all,
            "pool_bytes",
            "resources within bound: pool_bytes 4194304 -> 12587008 (at most +8388608)",
        );
        assert!(!find(&all, REGIONS_BEYOND_RINGS).holds());
        // Segments of the ring pool are not held to the bound.
        after.insert("ring_segments".into(), 2);
        assert!(find(&compare(&before, &after), REGIONS_BEYOND_RINGS).holds());
        let locks = "resources within bound: locks 0 -> 12 (at most +4096)";
        assert_eq!(find(&all, "locks").description(), locks);
    }

    #[test]
    fn a_required_counter_missing_on_either_side_fails_and_unknown_ones_are_listed() {
        let before = counters(BASELINE);
        let mut after = before.clone();
        after.remove("handles");
        after.insert("sparkles".into(), 7);
        let all = compare(&before, &after);
        let handles = failing(
            &all,
            "handles",
            "resources back to baseline: handles 0 -> missing",
        );
        assert_contains(
            &handles.problem().expect("a problem"),
            "no longer lists handles",
        );
        let lmrs = compare(&counters("chunks 0\n"), &before);
        assert_contains(
            &lmrs[0].problem().expect("a problem"),
            "baseline has no lmrs",
        );
        // These are checked through the derived counters.
        let unchecked = unchecked(&before, &after).join(", ");
        let expected = "dma_buffers 9 -> 9, kept_buffers 2 -> 2, memory_regions 1 -> 1";
        assert_eq!(unchecked, format!("{expected}, sparkles missing -> 7"));
    }

    #[test]
    fn optional_counters_are_checked_only_when_listed() {
        let brief: String = BASELINE
            .lines()
            .filter(|l| {
                !["mappings", "names", "async_ops", "pool_segments"]
                    .iter()
                    .any(|n| l.starts_with(n))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let all = compare(&counters(&brief), &counters(&brief));
        assert_eq!(all.len(), COUNTERS.len() - 4);
        assert!(all.iter().all(Comparison::holds));
        let mut after = counters(&brief);
        after.insert("names".into(), 0);
        assert!(!find(&compare(&counters(&brief), &after), "names").holds());
    }

    /// Counters read one after another, the last one again and again; an
    /// error is an errno.
    struct Script {
        reads: Vec<Result<String, i32>>,
        elapsed: Duration,
        sleeps: u32,
    }

    impl Source for Script {
        fn read(&mut self) -> io::Result<String> {
            let read = match self.reads.len() {
                1 => self.reads[0].clone(),
                _ => self.reads.remove(0),
            };
            read.map_err(io::Error::from_raw_os_error)
        }

        fn sleep(&mut self, duration: Duration) {
            self.elapsed += duration;
            self.sleeps += 1;
        }

        fn elapsed(&self) -> Duration {
            self.elapsed
        }
    }

    /// The TAP of a check of `baseline` against `reads`, waiting up to
    /// 5 s, and how many times it slept.
    fn run_check(baseline: Result<&str, &str>, reads: Vec<Result<String, i32>>) -> (String, u32) {
        let path = Path::new("/tmp/baseline");
        let baseline = baseline.map(str::to_string).map_err(str::to_string);
        let mut source = Script {
            reads,
            elapsed: Duration::ZERO,
            sleeps: 0,
        };
        let wait = Duration::from_secs(5);
        let (tap, _) = capture(|tap| check(tap, path, baseline, &mut source, wait));
        (tap, source.sleeps)
    }

    #[test]
    fn waits_for_other_nodes_to_let_go() {
        let busy = BASELINE.replace("chunks 0", "chunks 3");
        let reads = vec![Ok(busy.clone()), Ok(busy), Ok(BASELINE.into())];
        let (tap, sleeps) = run_check(Ok(BASELINE), reads);
        assert_eq!(sleeps, 2);
        assert_contains(&tap, "# counters settled after 2 s\n");
        assert!(tap.contains("ok 3 - resources back to baseline: chunks 0 -> 0\n"));
        assert!(tap.ends_with("1..14\n14 passed, 0 failed\n"), "{tap}");
    }

    #[test]
    fn gives_up_after_the_wait_with_the_last_values() {
        let leaked = BASELINE.replace("lmrs 0", "lmrs 1") + "extra 2\n";
        let (tap, sleeps) = run_check(Ok(BASELINE), vec![Ok(leaked)]);
        assert_eq!(sleeps, 5);
        assert_contains(&tap, "# counters not settled after 5 s\n");
        assert!(tap.contains("not ok 1 - resources back to baseline: lmrs 0 -> 1\n"));
        assert!(tap.contains("# not checked: extra missing -> 2\n"));
        assert!(tap.ends_with("13 passed, 1 failed\n"), "{tap}");
    }

    #[test]
    fn a_missing_file_or_baseline_is_one_failed_point() {
        let (tap, sleeps) = run_check(Ok(BASELINE), vec![Err(libc::ENOENT)]);
        assert_eq!(sleeps, 0);
        let unreadable = "not ok 1 - /sys/kernel/debug/lite/resources is readable\n";
        assert_contains(&tap, unreadable);
        assert!(tap.contains("does not report LITE's resources"));
        assert!(tap.ends_with("0 passed, 1 failed\n"));

        let (tap, _) = run_check(Err("no such file"), vec![Ok(BASELINE.into())]);
        assert!(tap.contains("not ok 1 - resource baseline /tmp/baseline is readable\n"));
        assert!(tap.contains("# no such file; lite-cluster-test saves it"));

        let (tap, _) = run_check(Ok(BASELINE), vec![Ok("lmrs many\n".into())]);
        assert!(tap.contains("not ok 1 - /sys/kernel/debug/lite/resources parses\n"));
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
