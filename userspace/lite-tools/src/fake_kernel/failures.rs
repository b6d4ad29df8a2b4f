//! Nodes of a model cluster that fail, for the failure and partition
//! tests on a host: a node dies ([`FakeKernel::die`]) or is cut off
//! ([`FakeKernel::fail_node`]), joins again as its next incarnation, or
//! is paused ([`FakeKernel::pause`]) the way the harness stops its VM.
//!
//! A failed node is out of the others' count and fenced: its own
//! transfers fail with `EHOSTDOWN` and land nowhere, and so do the others'
//! transfers to LMRs with a chunk on it, calls queued on its RPC ports,
//! waits for the locks kept on it and barriers that need it. Its
//! membership file says `fenced 1` and the others list it as dead, until
//! it joins again. While a node is paused every transfer waits (the
//! paused node's own are frozen, and the model holds the others' too),
//! then goes on as if nothing happened.
//!
//! In a [`FakeKernel::watched_cluster`], a leave and a join after it each
//! wait until every other member has read the cluster's size since the
//! last change of membership (or [`SEEN_WITHIN`] passed): the observers of
//! the failure test's leave/rejoin cycles follow them by reading the size
//! every few milliseconds, and on a loaded host their threads may not run
//! for longer than the leaver stays out. On the machines the leaver's
//! pauses are long enough.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;
use std::time::Duration;

use libc::c_long;

use super::{refuse_if, Cluster, Defects, FakeKernel, Lmr};
use crate::debugfs::membership::{NodeMembership, Peer, PeerState};

/// Longest a leave or a join waits for the others to read the size.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

#[derive(Default)]
pub(super) struct Failures {
    /// Failed and did not join again: fenced.
    pub(super) failed: BTreeSet<u32>,
    rejoins: BTreeMap<u32, u32>,
    changes: u64,
    paused: Option<u32>,
    /// The node paused, now or before, and its pauses.
    pauses: Option<(u32, u32)>,
    /// Leaves and joins wait for the others to read the size.
    pub(super) watched: bool,
    /// `changes` at each node's last read of the size.
    seen: BTreeMap<u32, u64>,
    /// Stopped following (no read within [`SEEN_WITHIN`] of a change):
    /// nobody waits for them again.
    laggards: BTreeSet<u32>,
}

impl Failures {
    pub(super) fn changed(&mut self) {
        self.changes += 1;
    }

    pub(super) fn rejoined(&mut self, node: u32) {
        self.failed.remove(&node);
        *self.rejoins.entry(node).or_default() += 1;
        self.changed();
    }

    /// How many members `reader` counts out besides those gone (a paused
    /// node, under the `pause_is_a_death` defect).
    pub(super) fn size_read(&mut self, reader: u32, defects: Defects) -> u32 {
        self.seen.insert(reader, self.changes);
        let paused_elsewhere = self.paused.is_some_and(|p| p != reader);
        u32::from(defects.pause_is_a_death && paused_elsewhere)
    }

    /// One more for each rejoin, and under the `pause_is_a_death` defect
    /// for each pause.
    fn incarnation(&self, node: u32, defects: Defects) -> u32 {
        let pauses = match self.pauses {
            Some((paused, made)) if paused == node && defects.pause_is_a_death => made,
            _ => 0,
        };
        1 + self.rejoins.get(&node).copied().unwrap_or(0) + pauses
    }
}

impl FakeKernel {
    /// [`FakeKernel::cluster`] whose leaves and rejoins wait for the other
    /// members to read the size (see [`super::failures`]).
    pub fn watched_cluster(nodes: u32, defects: Defects) -> Vec<FakeKernel> {
        let kernels = Self::cluster(nodes, defects);
        if let Some(kernel) = kernels.first() {
            kernel.cluster_state().failures.watched = true;
        }
        kernels
    }

    /// Takes this node out of the cluster as if the manager had declared it
    /// dead, and fences it (see [`super::failures`]). The locks its threads
    /// hold go to their next waiters, or to whoever takes them next, with
    /// `EOWNERDEAD`, and its threads' own waits for locks end. Whatever
    /// else it created or holds stays.
    pub fn fail_node(&self) {
        let id = self.id;
        let mut cluster = self.cluster_state();
        cluster.gone.insert(id);
        cluster.failures.failed.insert(id);
        cluster.failures.changed();
        drop(cluster);
        // Its own locks die with it, before any could be handed over.
        let sync = &self.shared.sync;
        sync.home_gone(id);
        sync.holders_gone(|owner| owner.node == id, true, self.defects);
        self.shared.rpc.node_failed(id);
        self.shared.changed.notify_all();
    }

    /// The node dies: [`FakeKernel::fail_node`], and the LMRs this process
    /// created go with it (so do the chunks other nodes held for them).
    pub fn die(&self) {
        self.release_everything();
        self.fail_node();
    }

    /// Pauses this node until [`FakeKernel::resume`].
    pub fn pause(&self) {
        let failures = &mut self.cluster_state().failures;
        let made = failures.pauses.map_or(0, |(_, made)| made);
        failures.paused = Some(self.id);
        failures.pauses = Some((self.id, made + 1));
    }

    /// Ends the pause.
    pub fn resume(&self) {
        self.cluster_state().failures.paused = None;
        self.shared.changed.notify_all();
    }

    pub(super) fn has_failed(&self, node: u32) -> bool {
        self.cluster_state().failures.failed.contains(&node)
    }

    /// Waits while a node is paused; `-EHOSTDOWN` at once instead under
    /// the `transfers_fail_while_paused` defect.
    pub(super) fn wait_out_pause(&self) -> Result<(), c_long> {
        let cluster = self.cluster_state();
        let paused = cluster.failures.paused.is_some();
        refuse_if(
            paused && self.defects.transfers_fail_while_paused,
            libc::EHOSTDOWN,
        )?;
        let waited = self
            .shared
            .changed
            .wait_while(cluster, |c| c.failures.paused.is_some());
        drop(waited.unwrap_or_else(PoisonError::into_inner));
        Ok(())
    }

    /// Fails a transfer on `lmr` made from a fenced node (unless its
    /// writes land under the defect) or reaching a failed one.
    pub(super) fn check_reachable(&self, cluster: &Cluster, lmr: &Lmr) -> Result<(), c_long> {
        let failed = &cluster.failures.failed;
        let fenced = failed.contains(&self.id) && !self.defects.writes_land_while_cut;
        let unreachable = fenced || lmr.chunks.iter().any(|node| failed.contains(node));
        let eio = self.defects.host_down_as_eio;
        refuse_if(unreachable, if eio { libc::EIO } else { libc::EHOSTDOWN })
    }

    pub(super) fn needs_failed(&self, cluster: &Cluster, num: u32) -> bool {
        num > self
            .nodes
            .saturating_sub(cluster.failures.failed.len() as u32)
    }

    /// In a watched cluster, waits until every other member that still
    /// follows has read the cluster's size since the last change.
    pub(super) fn await_watchers(&self) {
        let cluster = self.cluster_state();
        if !cluster.failures.watched {
            return;
        }
        let behind = |c: &Cluster| -> Vec<u32> {
            let f = &c.failures;
            (1..=self.nodes)
                .filter(|n| *n != self.id && !f.failed.contains(n) && !f.laggards.contains(n))
                .filter(|n| f.seen.get(n).copied().unwrap_or(0) < f.changes)
                .collect()
        };
        let (mut cluster, _) = self
            .shared
            .changed
            .wait_timeout_while(cluster, SEEN_WITHIN, |c| !behind(c).is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        let laggards = behind(&cluster);
        cluster.failures.laggards.extend(laggards);
    }

    pub(super) fn membership_text(&self) -> String {
        let cluster = self.cluster_state();
        let failures = &cluster.failures;
        let fenced = failures.failed.contains(&self.id);
        let peers = (1..=self.nodes)
            .filter(|&peer| peer != self.id)
            .map(|peer| Peer {
                node: peer,
                state: if fenced || cluster.gone.contains(&peer) {
                    PeerState::Dead
                } else {
                    PeerState::Alive
                },
                incarnation: failures.incarnation(peer, self.defects),
            })
            .collect();
        let view = NodeMembership {
            node: self.id,
            incarnation: failures.incarnation(self.id, self.defects),
            epoch: 1 + failures.changes as u32,
            fenced,
            peers,
        };
        format!("{view}manager_last_heard_ms_ago 10\nheartbeat_ms 500\nmanager_timeout_ms 3000\n")
    }
}
