// SPDX-License-Identifier: GPL-2.0

//! The rounds of the distributed barrier that this node has seen.
//!
//! Each node numbers the barriers it enters: its first call is round 1, the
//! next round 2 and so on; a node that joins an existing cluster (or joins
//! again) first takes the latest round the others finished, so its calls
//! line up with theirs. Entering a round tells every peer "I have reached
//! round r"; a node leaves round r once `num` nodes (itself included) are
//! known to have reached it. Because a node only ever reports its latest
//! round and receivers keep the maximum, messages may be repeated or cross
//! each other freely: while waiting, a node repeats its round every
//! [`RESEND_INTERVAL_MS`] and asks the peers it has not heard of in that
//! round for an answer, so a peer that already left that round (possibly
//! before the waiting node joined) reports it.
//!
//! Rounds follow the membership view: when a member departs (dies, is
//! expelled or leaves), every round in progress on a node that learns of
//! it is interrupted and fails with `EHOSTDOWN`, and counts as finished at
//! once, so that a node joining (again) meanwhile takes the round after
//! it. A node whose round was interrupted tells its peers, so that one
//! that enters that round later fails it too instead of pairing it with
//! its peers' next round: whoever called the barrier once more after the
//! failure meets the others in the next round.

use crate::internal::node_id::NodeId;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};

use crate::{errno, internal::core::limits::MAX_NODES};

/// How often a waiting node repeats its round to its peers.
pub(crate) const RESEND_INTERVAL_MS: u32 = 1000;

/// Longest a barrier call waits while the cluster has fewer members than
/// it asks for, in ms: long enough for nodes to boot and join (or a node
/// to rejoin), short of waiting for ever for nodes that will not come.
pub(crate) const MEMBERS_WAIT_MS: u64 = 60_000;

/// How long a barrier call has found the cluster with fewer members than
/// it asks for.
#[derive(Debug, Default)]
pub(crate) struct MembersWait {
    /// Since when ([`now_ms`](crate::internal::util::clock::now_ms)), if
    /// the cluster is short of members now.
    short_since_ms: Option<u64>,
}

impl MembersWait {
    /// Notes that the cluster has `members` of the `num` nodes asked for at
    /// `now_ms`; returns whether it has been short of them for longer than
    /// [`MEMBERS_WAIT_MS`], which ends the wait.
    pub(crate) fn gave_up(&mut self, members: usize, num: usize, now_ms: u64) -> bool {
        if members >= num {
            self.short_since_ms = None;
            return false;
        }
        let since = *self.short_since_ms.get_or_insert(now_ms);
        now_ms.saturating_sub(since) > MEMBERS_WAIT_MS
    }
}

/// How many interrupted rounds a node remembers: a node more rounds behind
/// its peers than this cannot be interrupted by them any more.
const INTERRUPTED_KEPT: usize = 8;

/// Per-node view of the barrier rounds.
struct Rounds {
    /// The last round this node entered.
    own: u64,
    /// The last round each node is known to have entered.
    seen: [u64; MAX_NODES],
    /// Nodes that are gone, one bit per node id (until they rejoin).
    gone: u64,
    /// Nodes that joined and are not gone, this one included.
    alive: u64,
    /// The last round whose barrier call returned here.
    finished: u64,
    /// Whether this node's first barrier call took the cluster's round.
    adopted: bool,
    /// The latest rounds interrupted by a departure, here or as a peer
    /// reported; 0 for none.
    interrupted: [u64; INTERRUPTED_KEPT],
}

impl Rounds {
    /// Whether `round` was interrupted.
    fn is_interrupted(&self, round: u64) -> bool {
        round != 0 && self.interrupted.contains(&round)
    }

    /// Records that `round` was interrupted, forgetting the oldest
    /// interrupted round if need be.
    fn interrupt(&mut self, round: u64) {
        if self.is_interrupted(round) {
            return;
        }
        if let Some(oldest) = self.interrupted.iter_mut().min() {
            *oldest = round;
        }
    }
}

/// How many nodes in `seen` have reached `round`.
pub(crate) fn nodes_reached(seen: &[u64], round: u64) -> usize {
    seen.iter().filter(|&&r| r >= round).count()
}

/// State of the distributed barrier on this node.
#[pin_data]
pub(crate) struct BarrierRounds {
    /// Lock class `lite:barrier`: see the lock order in [`crate::internal::core`].
    #[pin]
    rounds: Mutex<Rounds>,
    #[pin]
    changed: CondVar,
}

/// What a waiter should do next.
pub(crate) enum WaitOutcome {
    /// Enough nodes reached the round.
    Done,
    /// Time to repeat the round to the peers.
    Resend,
}

/// A barrier round being waited for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entered {
    /// The round's number.
    pub(crate) round: u64,
}

impl BarrierRounds {
    /// A barrier no node has entered.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(BarrierRounds {
            rounds <- new_mutex!(
                Rounds {
                    own: 0,
                    seen: [0; MAX_NODES],
                    gone: 0,
                    alive: 0,
                    finished: 0,
                    adopted: false,
                    interrupted: [0; INTERRUPTED_KEPT],
                },
                "lite:barrier"
            ),
            changed <- new_condvar!("lite:barrier_changed"),
        })
    }

    /// Enters the next round on node `self_id`.
    pub(crate) fn enter(&self, self_id: NodeId) -> Entered {
        let mut rounds = self.rounds.lock();
        // PANIC: one increment per `lite_dist_barrier` call on this node; a
        // `u64` does not run out.
        rounds.own += 1;
        let round = rounds.own;
        if let Some(seen) = rounds.seen.get_mut(self_id.index()) {
            *seen = round;
        }
        if let Some(bit) = self_id.bit() {
            rounds.alive |= bit;
        }
        Entered { round }
    }

    /// How many nodes are members, as far as this node knows (itself
    /// included once it entered a round).
    pub(crate) fn members(&self) -> usize {
        self.rounds.lock().alive.count_ones() as usize
    }

    /// A peer reports that `round` was interrupted: it fails here too,
    /// now if this node waits in it, or when it enters it.
    pub(crate) fn interrupted_elsewhere(&self, round: u64) {
        let mut rounds = self.rounds.lock();
        if round <= rounds.finished {
            // Over here, whatever its outcome.
            return;
        }
        rounds.interrupt(round);
        self.changed.notify_all();
    }

    /// Whether this is the node's first barrier call since it joined (and
    /// no other call took the cluster's round yet).
    pub(crate) fn needs_adoption(&self) -> bool {
        let rounds = self.rounds.lock();
        !rounds.adopted && rounds.own == 0
    }

    /// Takes `finished`, the latest round other nodes finished, as the last
    /// round of this node, so that its next call enters the round the
    /// others enter next (or wait in).
    pub(crate) fn adopt(&self, finished: u64) {
        let mut rounds = self.rounds.lock();
        rounds.adopted = true;
        if rounds.own < finished {
            rounds.own = finished;
            rounds.finished = finished;
        }
    }

    /// The barrier call of `round` returned.
    pub(crate) fn finish(&self, round: u64) {
        let mut rounds = self.rounds.lock();
        rounds.finished = rounds.finished.max(round);
    }

    /// The last round whose barrier call returned here.
    pub(crate) fn finished(&self) -> u64 {
        self.rounds.lock().finished
    }

    /// `node` joined: it may take part in rounds.
    pub(crate) fn joined(&self, node: NodeId) {
        let Some(bit) = node.bit() else {
            return;
        };
        let mut rounds = self.rounds.lock();
        rounds.gone &= !bit;
        rounds.alive |= bit;
    }

    /// `node` is gone: it counts for no round any more, and every round
    /// in progress here is interrupted (see the module documentation).
    pub(crate) fn departed(&self, node: NodeId) {
        let Some(bit) = node.bit() else {
            return;
        };
        let mut rounds = self.rounds.lock();
        rounds.gone |= bit;
        rounds.alive &= !bit;
        if let Some(seen) = rounds.seen.get_mut(node.index()) {
            *seen = 0;
        }
        let in_progress = rounds.finished + 1..=rounds.own;
        for round in in_progress.rev().take(INTERRUPTED_KEPT) {
            rounds.interrupt(round);
        }
        // A node joining from now on takes the round after these.
        rounds.finished = rounds.own;
        self.changed.notify_all();
    }

    /// The last round this node entered.
    pub(crate) fn own_round(&self) -> u64 {
        self.rounds.lock().own
    }

    /// Whether `node` is known to have reached `round`.
    pub(crate) fn has_reached(&self, node: NodeId, round: u64) -> bool {
        let rounds = self.rounds.lock();
        rounds
            .seen
            .get(node.index())
            .is_some_and(|&seen| seen >= round)
    }

    /// Records that `node` reached `round`.
    pub(crate) fn arrived(&self, node: NodeId, round: u64) {
        let mut rounds = self.rounds.lock();
        if node.bit().is_some_and(|bit| rounds.gone & bit != 0) {
            // Sent before it was declared gone.
            return;
        }
        if let Some(seen) = rounds.seen.get_mut(node.index()) {
            if round > *seen {
                *seen = round;
                self.changed.notify_all();
            }
        }
    }

    /// Waits until `num` nodes reached `entered`'s round, or until it is
    /// time to resend.
    ///
    /// # Errors
    ///
    /// `ERESTARTSYS` if a signal is pending, `EHOSTDOWN` if the round was
    /// interrupted by a departure (here or on a peer).
    pub(crate) fn wait(&self, entered: Entered, num: usize) -> Result<WaitOutcome> {
        let round = entered.round;
        let mut rounds = self.rounds.lock();
        loop {
            // An interrupted round fails even if enough nodes reached it
            // since: its peers fail it too.
            if rounds.is_interrupted(round) {
                return Err(errno::EHOSTDOWN());
            }
            if nodes_reached(&rounds.seen, round) >= num {
                return Ok(WaitOutcome::Done);
            }
            match self
                .changed
                .wait_interruptible_timeout(&mut rounds, msecs_to_jiffies(RESEND_INTERVAL_MS))
            {
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                CondVarTimeoutResult::Timeout => return Ok(WaitOutcome::Resend),
                CondVarTimeoutResult::Woken { .. } => {}
            }
        }
    }
}
