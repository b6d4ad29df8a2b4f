// SPDX-License-Identifier: GPL-2.0

//! The distributed barrier (`lite_dist_barrier`); see [`rounds`] for how
//! nodes agree that a round is complete.

pub(crate) mod rounds;
pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use kernel::{prelude::*, sync::Arc};

use crate::{errno, internal::util::clock::now_ms};

use self::{
    rounds::{BarrierRounds, MembersWait, WaitOutcome},
    wire::BarrierMessage,
};
use super::core::{
    limits::MAX_NODES,
    peer::Peer,
    subsystem::{Handling, Subsystem},
    wire::{Frame, Status},
    Core,
};

/// The distributed barrier of a joined node.
#[pin_data]
pub(crate) struct Barrier {
    core: Arc<Core>,
    #[pin]
    rounds: BarrierRounds,
}

impl Barrier {
    /// The barrier over `core`, no round entered yet.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Barrier {
                core,
                rounds <- BarrierRounds::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// `lite_dist_barrier`: waits until `num` nodes entered the same round.
    ///
    /// # Errors
    ///
    /// `EINVAL` for 0 or more nodes than a cluster has, `ERESTARTSYS` if a
    /// signal arrived while waiting, `EHOSTDOWN` if a member departed while
    /// the round was in progress (here or on a peer: every node waiting in
    /// it fails, and the next call is the next round everywhere),
    /// `ETIMEDOUT` if the cluster had fewer than `num` members for
    /// [`rounds::MEMBERS_WAIT_MS`] of the wait.
    pub(crate) fn dist_barrier(&self, num: u32) -> Result {
        if num == 0 || num as usize > MAX_NODES {
            return Err(EINVAL);
        }
        if self.rounds.needs_adoption() {
            self.adopt_round()?;
        }
        let entered = self.rounds.enter(self.core.node_id());
        let message = |reply_wanted| {
            BarrierMessage::Entered {
                round: entered.round,
                reply_wanted,
            }
            .to_frame()
        };
        // Only a peer not yet heard of in this round is asked to answer: if
        // it already entered, its own message was missed (sent before this
        // node was connected to it); the others would answer for nothing,
        // doubling the messages of every round.
        let (asking, telling) = (message(true), message(false));
        let mut members_wait = MembersWait::default();
        loop {
            for node in self.core.connected_peers()?.iter() {
                if let Ok(peer) = self.core.peer(*node) {
                    let frame = if self.rounds.has_reached(*node, entered.round) {
                        &telling
                    } else {
                        &asking
                    };
                    // A peer that cannot be reached now is retried on the
                    // next resend; it cannot count towards `num` meanwhile.
                    let _ = peer.send(frame);
                }
            }
            let outcome = match self.rounds.wait(entered, num as usize) {
                Ok(WaitOutcome::Resend) => {
                    if !members_wait.gave_up(self.rounds.members(), num as usize, now_ms()) {
                        continue;
                    }
                    Err(errno::ETIMEDOUT())
                }
                outcome => outcome,
            };
            // Done or failed, the call returns: the round is finished here.
            self.rounds.finish(entered.round);
            if outcome.as_ref().err() == Some(&errno::EHOSTDOWN()) {
                self.tell_interrupted(entered.round);
            }
            return outcome.map(|_| ());
        }
    }

    /// Tells every connected peer that `round` was interrupted here, so
    /// that one that has yet to enter it fails it too (see [`rounds`]).
    fn tell_interrupted(&self, round: u64) {
        let Ok(peers) = self.core.connected_peers() else {
            return;
        };
        let frame = BarrierMessage::Interrupted { round }.to_frame();
        for node in peers.iter() {
            if let Ok(peer) = self.core.peer(*node) {
                // A peer that cannot be told is gone or going: its own
                // departure interrupts its rounds.
                let _ = peer.send(&frame);
            }
        }
    }

    /// Takes the latest round the connected peers finished (see
    /// [`BarrierRounds::adopt`]); a peer that does not answer counts for
    /// nothing.
    fn adopt_round(&self) -> Result {
        let mut latest = 0;
        for node in self.core.connected_peers()?.iter() {
            let Ok(peer) = self.core.peer(*node) else {
                continue;
            };
            let reply = self.core.requests.call(&peer, |request_id| {
                BarrierMessage::RoundQuery { request_id }.to_frame()
            });
            match reply.map(|frame| BarrierMessage::from_frame(&frame)) {
                Ok(Some(BarrierMessage::RoundReply { finished, .. })) => {
                    latest = latest.max(finished)
                }
                Err(e) if e == ERESTARTSYS => return Err(e),
                _ => {}
            }
        }
        self.rounds.adopt(latest);
        Ok(())
    }
}

impl Subsystem for Barrier {
    fn on_peer_joined(&self, node: NodeId) {
        self.rounds.joined(node);
    }

    fn on_peer_gone(&self, node: NodeId) {
        self.rounds.departed(node);
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let (round, reply_wanted) = match BarrierMessage::from_frame(frame) {
            Some(BarrierMessage::Entered {
                round,
                reply_wanted,
            }) => (round, reply_wanted),
            Some(BarrierMessage::Interrupted { round }) => {
                self.rounds.interrupted_elsewhere(round);
                return Handling::Done;
            }
            Some(BarrierMessage::RoundQuery { request_id }) => {
                let answer = BarrierMessage::RoundReply {
                    request_id,
                    status: Status::OK,
                    finished: self.rounds.finished(),
                };
                return Handling::Answer(answer.to_frame());
            }
            _ => return Handling::Done,
        };
        self.rounds.arrived(peer.node, round);
        // A node that finished `round` before the sender joined or heard of
        // it would otherwise never tell the sender.
        let own = self.rounds.own_round();
        if reply_wanted && own >= round {
            let answer = BarrierMessage::Entered {
                round: own,
                reply_wanted: false,
            };
            Handling::Answer(answer.to_frame())
        } else {
            Handling::Done
        }
    }
}
