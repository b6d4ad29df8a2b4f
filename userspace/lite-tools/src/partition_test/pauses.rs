//! The pause phase of the partition test, before anything is cut (see the
//! README's partition test): a node paused a little less than the
//! manager's dead-after is alive, only silent, so nobody may take it for
//! dead and no call involving it may fail.
//!
//! Every node runs checked traffic with every peer, one thread each, once
//! all allocated their LMRs ([`super::setup_barrier`]), prints
//! [`PAUSE_READY_MARKER`] and keeps the traffic going for
//! [`PartitionConfig::pause_traffic`](super::PartitionConfig) by its own
//! clock (the paused node's stops with its VM, so its traffic runs that
//! much longer) while `lite_get_total_node` must stay the cluster's size.
//! Then it prints [`PAUSES_OVER_MARKER`] and reports; a barrier ends the
//! phase. On the real kernel a thread spins on every node meanwhile:
//! LITE's heartbeats then compete for the CPU with a user's work.

use std::io::Write;
use std::sync::Arc;
use std::thread;

use super::{
    after, describe_membership, read_membership, setup_barrier, total_nodes, PartitionConfig,
};
use crate::cpu_hog::CpuHog;
use crate::debugfs::membership::{MembershipFile, NodeMembership, PeerState};
use crate::errno::describe_result;
use crate::failure_test::{
    alloc_lmr, elapsed_ms, or_unknown, spawn_traffic, SharedKernel, Stoppable, Target,
    TrafficReport,
};
use crate::kernel::Kernel;
use crate::pattern;
use crate::stats::monotonic_ns;
use crate::tap::{no_problems, Tap};

/// Every node's console line once its traffic with every peer runs; the
/// harness starts pausing once every node printed it. A TAP comment.
pub const PAUSE_READY_MARKER: &str = "LITE-PARTITION-PAUSES ready";

/// Every node's console line once its traffic time is up. The harness
/// checks, once its last pause ended, that no node printed it yet: every
/// pause then fell within every node's traffic. A TAP comment.
pub const PAUSES_OVER_MARKER: &str = "LITE-PARTITION-PAUSES over";

const TRAFFIC_LMR_SIZE: u64 = 256 << 10;

/// "pauses".
const TRAFFIC_PASSWORD: u64 = 0x7061_7573_6573;

fn traffic_seed(me: u32, peer: u32) -> u64 {
    pattern::seed(&[u64::from(me), u64::from(peer), TRAFFIC_LMR_SIZE, 4])
}

/// What the cluster's size read while the traffic ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountWatch {
    /// Reads of `lite_get_total_node`.
    pub reads: u64,
    /// Of which gave anything but the cluster's size.
    pub other_reads: u64,
    /// The first of those, and when (ms after the traffic started).
    pub first_other: Option<String>,
}

impl CountWatch {
    /// One read, `at_ms` after the traffic started.
    pub fn record(&mut self, value: Result<u64, String>, nodes: u32, at_ms: i64) {
        self.reads += 1;
        if value.as_ref().is_ok_and(|&v| v == u64::from(nodes)) {
            return;
        }
        self.other_reads += 1;
        self.first_other.get_or_insert_with(|| {
            let shown = value.map_or_else(|e| e, |v| v.to_string());
            format!("{shown} after {at_ms} ms")
        });
    }

    /// Whether every read gave the cluster's size, and there was one.
    pub fn verdict(&self) -> Result<(), String> {
        match &self.first_other {
            Some(first) => Err(format!(
                "{} of {} reads differed; the first: {first}",
                self.other_reads, self.reads
            )),
            None if self.reads == 0 => Err("never read".to_string()),
            None => Ok(()),
        }
    }
}

/// `after` lists the members `before` did: this node not fenced, the other
/// `nodes - 1` alive, each as the same incarnation. The members in a few
/// words, or what differs.
pub fn same_members(
    before: &MembershipFile,
    after: &MembershipFile,
    nodes: u32,
) -> Result<String, String> {
    let (MembershipFile::Member(before), MembershipFile::Member(after)) = (before, after) else {
        return Err(format!(
            "no membership to compare: {} before, {} after",
            describe_membership(&Ok(before.clone())),
            describe_membership(&Ok(after.clone()))
        ));
    };
    let mut problems = Vec::new();
    if before.fenced || after.fenced {
        problems.push(format!(
            "this node is fenced: {} before, {} after",
            u8::from(before.fenced),
            u8::from(after.fenced)
        ));
    }
    if (before.node, before.incarnation) != (after.node, after.incarnation) {
        problems.push(format!(
            "this node was node {} incarnation {}, then node {} incarnation {}",
            before.node, before.incarnation, after.node, after.incarnation
        ));
    }
    let mut shown = vec![format!(
        "node {} incarnation {}",
        after.node, after.incarnation
    )];
    for peer in (1..=nodes).filter(|&n| n != before.node) {
        let line = |view: &NodeMembership| {
            view.peer(peer).map_or("no line".to_string(), |p| {
                format!("{} incarnation {}", p.state.name(), p.incarnation)
            })
        };
        let (was, is) = (line(before), line(after));
        shown.push(format!("peer {peer} {is}"));
        let alive_before = before
            .peer(peer)
            .is_some_and(|p| p.state == PeerState::Alive);
        if !alive_before || was != is {
            problems.push(format!("peer {peer}: {was} before, {is} after"));
        }
    }
    no_problems(problems).map(|()| shown.join(", "))
}

/// This node's traffic LMR on each peer, one test point each.
fn allocate<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    nodes: u32,
) -> Vec<(u32, Option<Target>)> {
    (1..=nodes)
        .filter(|&peer| peer != me)
        .map(|peer| {
            let allocated = alloc_lmr(kernel, peer, TRAFFIC_LMR_SIZE, TRAFFIC_PASSWORD);
            let description = format!(
                "pauses: alloc_remote of {} KiB on node {peer} for the traffic returns a handle",
                TRAFFIC_LMR_SIZE >> 10
            );
            (peer, tap.check_value(&description, allocated))
        })
        .collect()
}

/// Prints the ready marker (again every `marker_every`: a kernel message
/// may cut into it) and reads the cluster's size for `pause_traffic`.
fn watch_count<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    config: &PartitionConfig,
) -> CountWatch {
    let started = monotonic_ns();
    let end = after(started, config.pause_traffic);
    let mut watch = CountWatch::default();
    let mut last_marker = started;
    tap.comment(PAUSE_READY_MARKER);
    loop {
        let value = total_nodes(kernel);
        let now = monotonic_ns();
        watch.record(value, config.nodes, elapsed_ms(started, now));
        if now >= end {
            return watch;
        }
        if now >= after(last_marker, config.pacing.marker_every) {
            tap.comment(PAUSE_READY_MARKER);
            last_marker = now;
        }
        thread::sleep(config.pacing.poll);
    }
}

fn report_traffic<W: Write>(
    tap: &mut Tap<W>,
    peer: u32,
    traffic: Result<Stoppable<TrafficReport>, String>,
) {
    let report = traffic.and_then(|traffic| traffic.finish("traffic"));
    let shown = report.as_ref().map_or("no report".to_string(), |r| {
        format!(
            "{} round trips, {} mismatches, {} failed calls",
            r.rounds,
            r.mismatches,
            u8::from(r.error.is_some())
        )
    });
    tap.check(
        &format!(
            "pauses: every write to and read from node {peer} while a node was paused succeeded \
             and came back intact ({shown})"
        ),
        report.and_then(|r| r.verdict()),
    );
}

fn free_all<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, lmrs: &[(u32, Option<Target>)]) {
    let failures: Vec<String> = lmrs
        .iter()
        .filter_map(|&(peer, lmr)| {
            let ret = kernel.free(lmr?.handle);
            (ret != 0).then(|| format!("the LMR on node {peer}: {}", describe_result(ret)))
        })
        .collect();
    tap.check(
        "pauses: free of each traffic LMR returns 0",
        no_problems(failures),
    );
}

/// False when a barrier failed: the nodes are out of step, and the test
/// has bailed out.
pub(super) fn run<K: SharedKernel, W: Write>(
    kernel: &Arc<K>,
    tap: &mut Tap<W>,
    config: &PartitionConfig,
    me: u32,
) -> bool {
    let nodes = config.nodes;
    let before = read_membership(kernel.as_ref());
    let allocated = allocate(kernel.as_ref(), tap, me, nodes);
    if !setup_barrier(kernel, tap, nodes, "allocating the pause traffic's LMRs") {
        return false;
    }
    let traffic: Vec<_> = allocated
        .iter()
        .map(|&(peer, lmr)| {
            let lmr = lmr.ok_or_else(|| format!("there is no LMR on node {peer}"))?;
            let name = format!("pause-traffic-{peer}");
            spawn_traffic(kernel, &name, (lmr, traffic_seed(me, peer)))
        })
        .collect();

    let hog = kernel
        .spawns_processes()
        .then(|| CpuHog::start("pause-cpu-hog", 1));
    let count = watch_count(kernel.as_ref(), tap, config);
    tap.comment(PAUSES_OVER_MARKER);
    traffic.iter().flatten().for_each(Stoppable::stop);
    if let Some(hog) = hog {
        tap.check(
            "pauses: a thread kept this node's CPU busy while the traffic ran",
            hog.and_then(CpuHog::stop).map(drop),
        );
    }
    for (&(peer, _), reports) in allocated.iter().zip(traffic) {
        report_traffic(tap, peer, reports);
    }
    tap.check(
        &format!(
            "pauses: get_total_node returned {nodes} in each of {} reads while the traffic ran \
             ({} s)",
            count.reads,
            config.pause_traffic.as_secs()
        ),
        count.verdict(),
    );
    let after_traffic = read_membership(kernel.as_ref());
    let compared = match (&before, &after_traffic) {
        (Ok(before), Ok(after)) => same_members(before, after, nodes),
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
    };
    let shown = or_unknown(&compared);
    tap.check(
        &format!(
            "pauses: membership lists the same incarnations, every peer alive, after the \
             traffic as before it ({shown})"
        ),
        compared.map(drop),
    );
    free_all(kernel.as_ref(), tap, &allocated);
    setup_barrier(kernel, tap, nodes, "the pauses")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::debugfs::membership::Peer;
    use crate::tap::assert_contains;

    #[test]
    fn the_count_must_stay_the_clusters_size_in_every_read() {
        let mut watch = CountWatch::default();
        assert_eq!(watch.verdict(), Err("never read".to_string()));
        watch.record(Ok(3), 3, 0);
        watch.record(Ok(3), 3, 100);
        assert_eq!(watch.verdict(), Ok(()));
        watch.record(Ok(2), 3, 200);
        watch.record(Err("-107 (-ENOTCONN)".to_string()), 3, 300);
        watch.record(Ok(3), 3, 400);
        assert_eq!((watch.reads, watch.other_reads), (5, 2));
        let differed = "2 of 5 reads differed; the first: 2 after 200 ms";
        assert_eq!(watch.verdict(), Err(differed.to_string()));
    }

    #[test]
    fn traffic_passes_only_with_round_trips_and_no_error_or_difference() {
        let good = TrafficReport {
            rounds: 12,
            ..TrafficReport::default()
        };
        assert_eq!(good.verdict(), Ok(()));
        let none = TrafficReport::default().verdict().unwrap_err();
        assert_eq!(none, "no round trip completed");
        // A failed call is the transfers_fail_while_paused run's.
        let different = TrafficReport {
            rounds: 3,
            mismatches: 1,
            first_mismatch: Some("round 1: 4 byte(s) differ".to_string()),
            ..TrafficReport::default()
        };
        let differed = "1 round trips came back different; the first: round 1: 4 byte(s) differ";
        assert_eq!(different.verdict(), Err(differed.into()));
    }

    /// A member's membership file: `node`'s `incarnation`, fenced or not,
    /// with `peers` as (node, state, incarnation).
    pub(crate) fn view(
        node: u32,
        incarnation: u32,
        fenced: bool,
        peers: &[(u32, PeerState, u32)],
    ) -> MembershipFile {
        MembershipFile::Member(NodeMembership {
            node,
            incarnation,
            epoch: 3,
            fenced,
            peers: peers
                .iter()
                .map(|&(node, state, incarnation)| Peer {
                    node,
                    state,
                    incarnation,
                })
                .collect(),
        })
    }

    #[test]
    fn the_members_must_be_the_same_incarnations_alive_after_as_before() {
        use PeerState::{Alive, Dead, Suspect};
        let before = view(1, 1, false, &[(2, Alive, 1), (3, Alive, 1)]);
        let same = "node 1 incarnation 1, peer 2 alive incarnation 1, peer 3 alive incarnation 1";
        assert_eq!(same_members(&before, &before, 3), Ok(same.to_string()));
        // A later epoch alone is no change of members.
        let mut later_epoch = before.clone();
        if let MembershipFile::Member(v) = &mut later_epoch {
            v.epoch = 9;
        }
        assert!(same_members(&before, &later_epoch, 3).is_ok());

        // A peer reborn is the pause_is_a_death run's.
        for state in [Suspect, Dead] {
            let after = view(1, 1, false, &[(2, state, 1), (3, Alive, 1)]);
            assert!(same_members(&before, &after, 3).is_err(), "{state:?}");
        }
        let fenced = view(1, 1, true, &[(2, Alive, 1), (3, Alive, 1)]);
        let fenced = same_members(&before, &fenced, 3).unwrap_err();
        assert_contains(&fenced, "this node is fenced: 0 before, 1 after");
        let rejoined = view(1, 2, false, &[(2, Alive, 1), (3, Alive, 1)]);
        let rejoined = same_members(&before, &rejoined, 3).unwrap_err();
        assert_contains(&rejoined, "node 1 incarnation 1, then node 1 incarnation 2");
        // A peer missing from both files is no member either.
        let missing = view(1, 1, false, &[(2, Alive, 1)]);
        let no_line = "peer 3: no line before, no line after";
        assert_eq!(same_members(&missing, &missing, 3).unwrap_err(), no_line);
        let not_joined = same_members(&MembershipFile::NotJoined, &before, 3).unwrap_err();
        assert!(not_joined.starts_with("no membership to compare: joined 0 before"));
    }

    #[test]
    fn each_direction_has_its_own_data() {
        assert_ne!(traffic_seed(1, 2), traffic_seed(2, 1));
        assert_ne!(traffic_seed(1, 2), traffic_seed(1, 3));
    }
}
