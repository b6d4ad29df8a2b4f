// SPDX-License-Identifier: GPL-2.0

//! Keys that change when a peer is fenced.
//!
//! A fenced peer may have kept the keys of this node's regions. When the
//! manager declares a peer dead (or it leaves), this node registers every
//! region again under a new key ([`crate::verbs::KeyRegistry`]), has its
//! connected peers sent the table of identities and current keys (one
//! sending thread per peer at a time, so a dead peer delays nobody), and
//! releases the old keys once all of them answered: from then on the
//! device refuses the old keys, LMRs, rings and lock words in use
//! included, while the peers, which translate identities at every access,
//! go on unaffected. A peer that connects is sent the table first thing.
//!
//! Confirmations travel behind the transfers already queued on each
//! connection, so they can take seconds under load; the old keys stay
//! until every live peer confirmed, or its request failed (at most the
//! request timeout), so that no live peer's access breaks.

pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use kernel::{c_str, new_mutex, prelude::*, sync::Arc, sync::Mutex};

use self::wire::{KeysMessage, FIRST_PART, LAST_PART, PAIRS_PER_PART};
use super::core::{
    limits::MAX_NODES,
    peer::Peer,
    subsystem::{Handling, Subsystem},
    wire::{Frame, Status},
    Core,
};
use super::util::workers::{self, Job, Workers};

/// Threads sending tables: a peer that died keeps one busy until its
/// connection gives up, the others go on.
const SENDERS: usize = 4;

/// Which peers are being sent this node's table.
///
/// # Invariants
///
/// Bit `n` of `running` is set while a [`SendKeys`] job for node `n` is
/// queued or running; bit `n` of `again` only while bit `n` of `running`
/// is, when the table changed after that job took it.
struct Sending {
    running: u64,
    again: u64,
}

/// Replaces this node's keys and tells its peers.
#[pin_data]
pub(crate) struct Keys {
    core: Arc<Core>,
    /// Lock class `lite:keys_sending`: see the lock order in [`crate::internal::core`].
    #[pin]
    sending: Mutex<Sending>,
    #[pin]
    jobs: Workers<SendKeys>,
}

/// Sends node `node` this node's current table until it confirmed the
/// latest one.
struct SendKeys {
    node: NodeId,
}

impl Job for SendKeys {
    type Context = Keys;

    fn run(self, keys: &Keys) {
        keys.send_until_current(self.node);
    }
}

impl Keys {
    /// The key changes of the node of `core`, with their sending threads.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        let keys = Arc::pin_init(
            try_pin_init!(Keys {
                core,
                sending <- new_mutex!(Sending { running: 0, again: 0 }, "lite:keys_sending"),
                jobs <- Workers::new(MAX_NODES)?,
            }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&keys, c_str!("lite_keys"), SENDERS, |keys| {
            keys.jobs.serve(&keys)
        })?;
        Ok(keys)
    }

    /// Stops the sending threads once they are done (the membership ends).
    pub(crate) fn close(&self) {
        self.jobs.close();
    }

    /// Registers every region of this node under a new key and has every
    /// connected peer sent the new table; the old keys are released once
    /// all of them confirmed it (or are gone). Runs on the membership
    /// thread: the network is not waited for here.
    pub(crate) fn replace_keys(&self) -> Result {
        let peers = self.core.connected_peers()?;
        let mut sending = self.sending.lock();
        // Under `sending`: no release can come between the new keys and
        // the peers being marked as not having them yet.
        self.core.pool.registrar().rekey()?;
        for node in peers.iter() {
            self.request(&mut sending, *node);
        }
        if sending.running == 0 {
            // No peer to tell.
            self.core.pool.registrar().keys().release_replaced();
        }
        Ok(())
    }

    /// Waits until every peer took the current table and the old keys are
    /// released, for at most `timeout_ms`.
    ///
    /// # Errors
    ///
    /// `ETIMEDOUT`.
    pub(crate) fn wait_settled(&self, timeout_ms: u32) -> Result {
        let mut waited = 0;
        while self.sending.lock().running != 0 {
            if waited >= timeout_ms {
                return Err(crate::errno::ETIMEDOUT());
            }
            crate::sys::sched::sleep_uninterruptible_ms(10);
            waited += 10;
        }
        Ok(())
    }

    /// Has `node` sent the current table (again, if a job for it took an
    /// older one).
    fn request(&self, sending: &mut Sending, node: NodeId) {
        let Some(bit) = node.bit() else {
            return;
        };
        if sending.running & bit != 0 {
            sending.again |= bit;
            return;
        }
        if self.jobs.try_submit(SendKeys { node }).is_ok() {
            sending.running |= bit;
        }
    }

    /// Body of a [`SendKeys`] job.
    fn send_until_current(&self, node: NodeId) {
        // Jobs are only made for nodes whose bit fits (`request`).
        let bit = node.bit().unwrap_or(0);
        loop {
            let sent = self.core.peer(node).and_then(|peer| {
                let table = self.core.pool.registrar().keys().table()?;
                self.send_table(&peer, &table)
            });
            if let Err(e) = sent {
                // A gone peer needs no keys; others are logged.
                if self.core.peer(node).is_ok() {
                    pr_warn!("node {} did not take this node's keys ({:?})\n", node, e);
                }
            }
            let mut sending = self.sending.lock();
            if sending.again & bit != 0 {
                sending.again &= !bit;
                continue;
            }
            sending.running &= !bit;
            if sending.running == 0 {
                self.core.pool.registrar().keys().release_replaced();
            }
            return;
        }
    }

    /// Sends `table` to `peer` in parts and waits for the peer's answer
    /// that it is in force.
    fn send_table(&self, peer: &Peer, table: &[(u32, u32)]) -> Result {
        let parts = table.len().div_ceil(PAIRS_PER_PART).max(1);
        for index in 0..parts {
            let start = (index * PAIRS_PER_PART).min(table.len());
            let end = (start + PAIRS_PER_PART).min(table.len());
            // PANIC: `start <= end <= table.len()` (clamped above).
            let part = &table[start..end];
            let mut flags = 0;
            if index == 0 {
                flags |= FIRST_PART;
            }
            if index + 1 == parts {
                flags |= LAST_PART;
            }
            let frame = |request_id| part_frame(request_id, part, flags);
            if flags & LAST_PART != 0 {
                let reply = self.core.requests.call_uninterruptible(peer, frame)?;
                reply.status().to_result()?;
            } else {
                peer.send(&frame(0))?;
            }
        }
        Ok(())
    }
}

/// The frame of one part of a table (at most [`PAIRS_PER_PART`] pairs).
pub(crate) fn part_frame(request_id: u64, part: &[(u32, u32)], flags: u32) -> Frame {
    let mut pairs = [0u64; PAIRS_PER_PART];
    for (word, &(identity, current)) in pairs.iter_mut().zip(part) {
        *word = (u64::from(identity) << 32) | u64::from(current);
    }
    let [pair0, pair1, pair2, pair3, pair4] = pairs;
    KeysMessage::KeyTablePart {
        request_id,
        pair0,
        pair1,
        pair2,
        pair3,
        pair4,
        // PANIC: callers pass at most `PAIRS_PER_PART` pairs.
        count: part.len().min(PAIRS_PER_PART) as u32,
        flags,
    }
    .to_frame()
}

impl Subsystem for Keys {
    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let Some(KeysMessage::KeyTablePart {
            request_id,
            pair0,
            pair1,
            pair2,
            pair3,
            pair4,
            count,
            flags,
        }) = KeysMessage::from_frame(frame)
        else {
            return Handling::Done;
        };
        let words = [pair0, pair1, pair2, pair3, pair4];
        let mut pairs = [(0u32, 0u32); PAIRS_PER_PART];
        for (pair, word) in pairs.iter_mut().zip(words) {
            *pair = ((word >> 32) as u32, word as u32);
        }
        let count = (count as usize).min(PAIRS_PER_PART);
        // Taken on the polling thread, in the order the peer sent the
        // parts; the answer follows the swap of the table.
        // PANIC: `count <= PAIRS_PER_PART`, the length of `pairs`.
        let result = peer.conn.keys().receive(
            &pairs[..count],
            flags & FIRST_PART != 0,
            flags & LAST_PART != 0,
        );
        if let Err(e) = &result {
            pr_err!("cannot take the new keys of node {}: {:?}\n", peer.node, e);
        }
        if request_id == 0 {
            Handling::Done
        } else {
            Handling::Answer(Frame::status_reply(request_id, Status::of(&result)))
        }
    }

    fn on_peer_joined(&self, node: NodeId) {
        let mut sending = self.sending.lock();
        self.request(&mut sending, node);
    }
}
