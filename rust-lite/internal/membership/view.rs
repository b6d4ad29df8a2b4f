// SPDX-License-Identifier: GPL-2.0

//! What this node knows of the cluster's membership, as a state machine
//! without I/O, so that every transition can be tested on its own.
//!
//! The cluster manager alone declares nodes dead; this view decides which
//! of its messages to apply. A peer is `Alive` once connected, `Suspect`
//! after its connection failed (until the manager's verdict), and `Dead`
//! once the manager declared it so. A `NodeDead` is applied only if its
//! epoch is newer than the last one applied (so duplicates and reordered
//! or replayed messages change nothing) and it names the incarnation this
//! node is connected to (news of an earlier incarnation of a node that
//! rejoined is stale).

use crate::internal::node_id::NodeId;
use core::fmt::{self, Write};

use crate::internal::core::limits::MAX_NODES;

/// A peer's state as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// Never connected (or not since this node joined).
    Absent,
    /// Connected.
    Alive,
    /// Its connection failed; the manager has not decided yet.
    Suspect,
    /// Declared dead by the manager; its connection is fenced.
    Dead,
}

impl PeerState {
    /// The state's name in the membership file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PeerState::Absent => "absent",
            PeerState::Alive => "alive",
            PeerState::Suspect => "suspect",
            PeerState::Dead => "dead",
        }
    }
}

/// One peer's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerRecord {
    /// Its state.
    pub(crate) state: PeerState,
    /// The incarnation this node connected to (0 if never).
    pub(crate) incarnation: u32,
}

/// What to do with a `NodeDead` from the manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Fence the peer and release what was kept for it.
    PeerDead,
    /// This node itself was declared dead: fence every peer.
    SelfDead,
    /// Newer epoch, but about a node this node never connected to: only
    /// the epoch advances.
    Unknown,
    /// Not newer than the last applied epoch, or about an earlier
    /// incarnation: ignored.
    Stale,
    /// A node id no cluster has: ignored.
    Invalid,
}

/// The membership as this node sees it.
pub(crate) struct MembershipView {
    node_id: NodeId,
    incarnation: u32,
    /// Epoch of this node's join or of the last `NodeDead` applied.
    epoch: u32,
    /// The manager's epoch in its last heartbeat answer (for display: it
    /// also counts joins, which reach this node otherwise).
    manager_epoch: u32,
    peers: [PeerRecord; MAX_NODES],
    /// This node was declared dead or lost the manager: it is fenced.
    fenced: bool,
}

impl MembershipView {
    /// The view of node `node_id` (incarnation `incarnation`) as of
    /// `epoch` (0 while its join runs, see [`MembershipView::join_done`]).
    pub(crate) fn new(node_id: NodeId, incarnation: u32, epoch: u32) -> Self {
        MembershipView {
            node_id,
            incarnation,
            epoch,
            manager_epoch: epoch,
            peers: [PeerRecord {
                state: PeerState::Absent,
                incarnation: 0,
            }; MAX_NODES],
            fenced: false,
        }
    }

    /// This node's incarnation.
    pub(crate) fn own_incarnation(&self) -> u32 {
        self.incarnation
    }

    /// This node's join completed in `epoch`.
    pub(crate) fn join_done(&mut self, epoch: u32) {
        self.epoch = epoch;
        self.manager_epoch = epoch;
    }

    /// The epoch last applied.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Whether this node is fenced.
    pub(crate) fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The record of `node`, if it is a possible peer.
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn peer(&self, node: NodeId) -> Option<PeerRecord> {
        if node == self.node_id {
            return None;
        }
        self.peers.get(node.index()).copied()
    }

    /// Peer `node`'s incarnation `incarnation` is connected.
    pub(crate) fn connected(&mut self, node: NodeId, incarnation: u32) {
        if node == self.node_id {
            return;
        }
        if let Some(record) = self.peers.get_mut(node.index()) {
            *record = PeerRecord {
                state: PeerState::Alive,
                incarnation,
            };
        }
    }

    /// The connection to `node` failed; returns the incarnation to report
    /// to the manager if the peer was alive until now.
    pub(crate) fn suspect(&mut self, node: NodeId) -> Option<u32> {
        if node == self.node_id {
            return None;
        }
        let record = self.peers.get_mut(node.index())?;
        if record.state != PeerState::Alive {
            return None;
        }
        record.state = PeerState::Suspect;
        Some(record.incarnation)
    }

    /// The manager's heartbeat answer carried `epoch`.
    pub(crate) fn manager_epoch_seen(&mut self, epoch: u32) {
        self.manager_epoch = self.manager_epoch.max(epoch);
    }

    /// Applies the manager's `NodeDead { node, incarnation, epoch }`.
    pub(crate) fn node_dead(&mut self, node: NodeId, incarnation: u32, epoch: u32) -> Verdict {
        if !node.is_member_id() {
            return Verdict::Invalid;
        }
        if epoch <= self.epoch {
            return Verdict::Stale;
        }
        if node == self.node_id {
            if incarnation != self.incarnation {
                return Verdict::Stale;
            }
            self.epoch = epoch;
            self.fence_all();
            return Verdict::SelfDead;
        }
        let Some(record) = self.peers.get_mut(node.index()) else {
            return Verdict::Invalid;
        };
        match record.state {
            PeerState::Absent => {
                self.epoch = epoch;
                Verdict::Unknown
            }
            _ if record.incarnation != incarnation => Verdict::Stale,
            PeerState::Dead => Verdict::Stale,
            PeerState::Alive | PeerState::Suspect => {
                record.state = PeerState::Dead;
                self.epoch = epoch;
                Verdict::PeerDead
            }
        }
    }

    /// This node lost the manager (or was declared dead): every peer
    /// counts as dead to it and it is fenced.
    pub(crate) fn fence_all(&mut self) {
        self.fenced = true;
        for record in self.peers.iter_mut() {
            if matches!(record.state, PeerState::Alive | PeerState::Suspect) {
                record.state = PeerState::Dead;
            }
        }
    }

    /// Writes the view as `name value` lines, then one line per peer ever
    /// connected: `peer <id> <state> incarnation <n>`.
    pub(crate) fn write_text(&self, out: &mut impl Write) -> fmt::Result {
        writeln!(out, "node {}", self.node_id)?;
        writeln!(out, "incarnation {}", self.incarnation)?;
        writeln!(out, "epoch {}", self.epoch)?;
        writeln!(out, "manager_epoch {}", self.manager_epoch)?;
        writeln!(out, "fenced {}", u8::from(self.fenced))?;
        for (node, record) in self.peers.iter().enumerate() {
            if record.state != PeerState::Absent {
                writeln!(
                    out,
                    "peer {} {} incarnation {}",
                    node,
                    record.state.name(),
                    record.incarnation
                )?;
            }
        }
        Ok(())
    }
}
