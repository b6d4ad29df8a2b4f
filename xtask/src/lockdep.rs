//! The nestings of LITE's locks that lockdep saw (`LITE-LOCKDEP lite:A ->
//! lite:B` from each guest), against the lock order (README,
//! "Architecture"): a line ``//! - `lite:A` → `lite:B` `` per nesting,
//! leaving out the wait queues of condition variables (`new_condvar!`),
//! each taken under the mutex it is used with.
//!
//! LITE-DSM, a unit on top of LITE's API, has locks of its own
//! (`lite_dsm:`), whose nestings [`DSM_LOCK_ORDER_SOURCE`] lists the same
//! way. It calls LITE holding them, so any of LITE's locks may be taken
//! under one of its; LITE never calls into LITE-DSM holding a lock, and a
//! nesting of a LITE lock outside a LITE-DSM one is a problem.

use std::collections::BTreeSet;

use crate::logscan::strip_timestamp;

/// Their `# Lock order` sections list the nestings, LITE's and LITE-DSM's.
pub const LOCK_ORDER_SOURCE: &str = "rust-lite/internal/core/mod.rs";
pub const DSM_LOCK_ORDER_SOURCE: &str = "rust-lite/dsm/mod.rs";

/// Class prefixes of LITE's locks and of LITE-DSM's.
const LITE_PREFIX: &str = "lite:";
const DSM_PREFIX: &str = "lite_dsm:";

pub const EDGE_TAG: &str = "LITE-LOCKDEP ";

/// The outer lock's class, then the inner one's.
pub type Nesting = (String, String);

/// In a guest's console log.
pub fn seen(log: &str) -> BTreeSet<Nesting> {
    log.lines()
        .filter_map(|line| strip_timestamp(line).strip_prefix(EDGE_TAG))
        .filter_map(|edge| {
            let (outer, inner) = edge.split_once(" -> ")?;
            Some((class_name(outer)?, class_name(inner)?))
        })
        .collect()
}

pub fn documented(source: &str) -> BTreeSet<Nesting> {
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("//! - `"))
        .filter_map(|rest| {
            let (outer, rest) = rest.split_once("` → `")?;
            let inner = rest.strip_suffix('`')?;
            Some((class_name(outer)?, class_name(inner)?))
        })
        .collect()
}

/// The class names given to `new_condvar!`.
pub fn condvar_classes<'a>(sources: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    sources
        .into_iter()
        .flat_map(|source| source.split("new_condvar!(").skip(1))
        .filter_map(|call| {
            let name = call.split(')').next()?.split('"').nth(1)?;
            class_name(name)
        })
        .collect()
}

/// Each nesting seen but not listed, or listed but never seen, but for
/// those that involve a condition variable's class in `condvars`.
pub fn problems(
    documented: &BTreeSet<Nesting>,
    seen: &BTreeSet<Nesting>,
    condvars: &BTreeSet<String>,
) -> Vec<String> {
    let locks_only = seen
        .iter()
        .filter(|(outer, inner)| !condvars.contains(outer) && !condvars.contains(inner));
    // LITE-DSM calls LITE with its own locks held.
    let within_a_unit = |(outer, inner): &&Nesting| {
        !(outer.starts_with(DSM_PREFIX) && inner.starts_with(LITE_PREFIX))
    };
    let seen: BTreeSet<Nesting> = locks_only.filter(within_a_unit).cloned().collect();
    let unlisted = seen.difference(documented).map(|(outer, inner)| {
        if outer.starts_with(LITE_PREFIX) && inner.starts_with(DSM_PREFIX) {
            return format!("lockdep saw {outer} -> {inner}: LITE called LITE-DSM holding a lock");
        }
        let source = if outer.starts_with(DSM_PREFIX) {
            DSM_LOCK_ORDER_SOURCE
        } else {
            LOCK_ORDER_SOURCE
        };
        format!("lockdep saw {outer} -> {inner}, which the lock order in {source} does not list")
    });
    let untested = documented.difference(&seen).map(|(outer, inner)| {
        format!("the lock order lists {outer} -> {inner}, which no guest of this run reached")
    });
    unlisted.chain(untested).collect()
}

/// A lock class of LITE's or LITE-DSM's as lockdep names it, without the
/// `#N` it adds to a second class of the same name or the `/N` of a
/// subclass.
fn class_name(text: &str) -> Option<String> {
    let name = text.trim();
    let name = name.split(['#', '/']).next().unwrap_or(name);
    let named = |prefix: &str| name.starts_with(prefix) && name.len() > prefix.len();
    (named(LITE_PREFIX) || named(DSM_PREFIX)).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nesting(outer: &str, inner: &str) -> Nesting {
        (outer.to_string(), inner.to_string())
    }

    #[test]
    fn guest_lines_and_the_lock_order_give_nestings_of_lites_classes() {
        let log = "[   12.5] LITE-LOCKDEP lite:names -> lite:lmr_users\n\
                   LITE-LOCKDEP lite:async_phase#2 -> lite:reply_slots\n\
                   LITE-LOCKDEP lite:port -> &rxe->pending_lock\n\
                   LITE-LOCKDEP lite:names lite:lmr_users\n\
                   lite:processes -> lite:handles\n";
        let expected = BTreeSet::from([
            nesting("lite:names", "lite:lmr_users"),
            nesting("lite:async_phase", "lite:reply_slots"),
        ]);
        assert_eq!(seen(log), expected);
        // The kernel's lock order lists its nestings.
        let source = std::fs::read_to_string(crate::paths::repo_root().join(LOCK_ORDER_SOURCE))
            .expect("the lock order's source");
        let listed = documented(&source);
        assert!(listed.contains(&nesting("lite:names", "lite:lmr_users")));
        assert!(listed.contains(&nesting("lite:remote_pool", "lite:pool_segment")));
        assert!(listed.len() >= 10, "{listed:?}");
    }

    #[test]
    fn unlisted_and_untested_nestings_are_problems_but_condition_variables() {
        let listed = BTreeSet::from([nesting("lite:a", "lite:b"), nesting("lite:c", "lite:d")]);
        let seen = BTreeSet::from([
            nesting("lite:a", "lite:b"),
            nesting("lite:e", "lite:f"),
            nesting("lite:a", "lite:a_changed"),
        ]);
        let condvars = condvar_classes([
            "changed <- new_condvar!(\"lite:a_changed\"),",
            "room <- new_condvar!(\n    \"lite:room\"\n),",
        ]);
        let expected = ["lite:a_changed", "lite:room"].map(String::from);
        assert_eq!(condvars, BTreeSet::from(expected));
        let problems = problems(&listed, &seen, &condvars);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("lockdep saw lite:e -> lite:f"));
        assert!(problems[1].contains("lite:c -> lite:d, which no guest"));
        assert!(super::problems(&listed, &listed, &condvars).is_empty());
    }

    #[test]
    fn lite_dsm_may_hold_its_locks_around_lite_s_but_not_the_other_way() {
        let source = std::fs::read_to_string(crate::paths::repo_root().join(DSM_LOCK_ORDER_SOURCE))
            .expect("LITE-DSM's lock order");
        let listed = documented(&source);
        let own = nesting("lite_dsm:open", "lite_dsm:state");
        assert_eq!(listed, BTreeSet::from([own.clone()]));
        let around = nesting("lite_dsm:directory", "lite:peers");
        let inside = nesting("lite:peers", "lite_dsm:pages");
        let unlisted = nesting("lite_dsm:state", "lite_dsm:pages");
        let observed = BTreeSet::from([own, around, inside, unlisted]);
        let problems = problems(&listed, &observed, &BTreeSet::new());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("lite:peers -> lite_dsm:pages: LITE called LITE-DSM"));
        assert!(problems[1].contains(&format!(
            "lite_dsm:pages, which the lock order in {DSM_LOCK_ORDER_SOURCE}"
        )));
        let guest = "LITE-LOCKDEP lite_dsm:open -> lite_dsm:state\n";
        let open = nesting("lite_dsm:open", "lite_dsm:state");
        assert_eq!(super::seen(guest), BTreeSet::from([open]));
    }
}
