// SPDX-License-Identifier: GPL-2.0

//! Moving the chunks of an LMR that other nodes mapped (when the node
//! holding them leaves the cluster).
//!
//! The owner pauses its LMR, then asks every node that mapped it to pause
//! its mappings too ([`SharingMessage::HoldMappings`]): each waits for the
//! operations running on them, and new ones wait. The owner moves the
//! chunks, then hands the mappers a chunk table with the new places
//! ([`SharingMessage::ResumeMappings`]); each reads it, points its mappings
//! there and lets their operations go on. No operation of any node runs on
//! a chunk while it moves, so no byte written is lost, and none reaches the
//! old place afterwards.
//!
//! A chunk never moves to a node that mapped the LMR: a mapping reaches
//! chunks on its own node as local memory, which a moved chunk cannot
//! become. A mapper whose owner goes away, or does not resume it within
//! [`HOLD_LIMIT_MS`], closes the mappings it holds paused: their places may
//! be stale.

use crate::internal::node_id::NodeId;
use kernel::prelude::*;

use super::{wire::SharingMessage, HeldMappings, Sharing};
use crate::{
    errno,
    internal::{
        core::limits::MAX_NODES,
        memory::lmr::{Lmr, Origin},
        util::{clock::now_ms, vec::put_or_return},
    },
};
use kernel::sync::Arc;

/// Longest a mapper keeps mappings paused for their owner.
const HOLD_LIMIT_MS: u64 = 30_000;

impl Sharing {
    /// Mapper side of [`SharingMessage::HoldMappings`]: pauses every
    /// mapping of LMR `lmr_id` of `owner`, waiting for their operations.
    pub(super) fn hold_mappings(&self, owner: NodeId, lmr_id: u64) -> Result {
        let mut mapped = KVec::new();
        {
            let mut mappings = self.mappings.lock();
            mappings.note_move(owner, lmr_id);
            for lmr in mappings.table.values() {
                if lmr.origin == (Origin::Mapped { owner, lmr_id }) {
                    mapped.push(lmr.clone(), GFP_KERNEL)?;
                }
            }
        }
        let mut pauses = KVec::with_capacity(mapped.len(), GFP_KERNEL)?;
        for lmr in mapped.iter() {
            // A closed mapping needs no move.
            if let Ok(pause) = lmr.hold_paused() {
                pauses.push(pause, GFP_KERNEL)?;
            }
        }
        let held = HeldMappings {
            owner,
            lmr_id,
            since_ms: now_ms(),
            pauses,
        };
        let kept = put_or_return(&mut self.mappings.lock().held, held);
        // A hold that cannot be kept resumes its mappers outside the lock.
        kept.map_err(|(e, _resumed)| e)
    }

    /// Takes the mappings of LMR `lmr_id` of `owner` held paused.
    fn take_held(&self, owner: NodeId, lmr_id: u64) -> Option<HeldMappings> {
        let mut mappings = self.mappings.lock();
        mappings
            .held
            .iter_mut()
            .find(|h| {
                h.as_ref()
                    .is_some_and(|h| h.owner == owner && h.lmr_id == lmr_id)
            })
            .and_then(Option::take)
    }

    /// Mapper side of [`SharingMessage::ResumeMappings`]: points the
    /// mappings held paused at the places in the owner's chunk table and
    /// lets them go on. A mapping the table cannot describe is closed.
    pub(super) fn resume_mappings(
        &self,
        owner: NodeId,
        lmr_id: u64,
        table_addr: u64,
        table_rkey: u32,
    ) -> Result {
        let peer = self.core.peer(owner);
        let Some(held) = self.take_held(owner, lmr_id) else {
            return Ok(());
        };
        let late = now_ms().saturating_sub(held.since_ms) > HOLD_LIMIT_MS;
        let peer = match peer {
            // Past the limit the owner may have freed the table: the
            // mappings close rather than read it.
            Ok(peer) if !late => peer,
            Ok(_) => {
                close_held(&held);
                return Err(errno::ETIMEDOUT());
            }
            Err(e) => {
                close_held(&held);
                return Err(e);
            }
        };
        let mut first_error = None;
        for pause in held.pauses.iter() {
            let lmr = pause.lmr();
            let count = lmr.chunks.len();
            let moved = self
                .read_chunk_table(&peer, table_addr, table_rkey, count)
                .and_then(|places| {
                    for (chunk, new) in lmr.chunks.iter().zip(places.iter()) {
                        if chunk.local.is_some() || new.local.is_some() || new.is_lost() {
                            // Chunks on this node and lost ones never move.
                            if chunk.local.is_some() != new.local.is_some() {
                                return Err(errno::EPROTO());
                            }
                            continue;
                        }
                        if chunk.place() != new.place() {
                            chunk.relocate(new.place(), pause);
                        }
                    }
                    Ok(())
                });
            if let Err(e) = moved {
                lmr.close(errno::EKEYREVOKED());
                first_error.get_or_insert(e);
            }
        }
        // The pauses end here: operations go on at the new places.
        drop(held);
        first_error.map_or(Ok(()), Err)
    }

    /// Closes the mappings held paused for `owner`, which is gone, or for
    /// longer than [`HOLD_LIMIT_MS`] (only those for `None`), and lets their
    /// waiting operations fail.
    pub(crate) fn drop_held_mappings(&self, owner: Option<NodeId>) {
        let now = now_ms();
        let mut expired = KVec::new();
        {
            let mut mappings = self.mappings.lock();
            // Room first: an entry taken must not be dropped unclosed.
            if expired.reserve(mappings.held.len(), GFP_KERNEL).is_err() {
                return;
            }
            for entry in mappings.held.iter_mut() {
                let due = entry.as_ref().is_some_and(|h| {
                    owner == Some(h.owner) || now.saturating_sub(h.since_ms) > HOLD_LIMIT_MS
                });
                if due {
                    if let Some(held) = entry.take() {
                        // Room was reserved: this does not allocate.
                        let _ = expired.push(held, GFP_KERNEL);
                    }
                }
            }
        }
        for held in expired.iter() {
            close_held(held);
        }
    }

    /// Owner side: asks every node in `mappers` (one bit per node id) but
    /// this one to pause its mappings of `lmr_id`; returns the peers that
    /// did. Nodes that are gone are skipped.
    ///
    /// # Errors
    ///
    /// The first error of a mapper that is not gone; the mappers paused
    /// before it are resumed.
    pub(super) fn hold_mappers(
        &self,
        lmr_id: u64,
        lmr: &Lmr,
        mappers: u64,
    ) -> Result<KVec<Arc<super::Peer>>> {
        let mut held = KVec::with_capacity(MAX_NODES, GFP_KERNEL)?;
        for peer in self.core.peers_among(mappers) {
            let reply = self
                .core
                .requests
                .call_uninterruptible(&peer, |request_id| {
                    SharingMessage::HoldMappings { request_id, lmr_id }.to_frame()
                })
                .and_then(|reply| reply.status().to_result());
            match reply {
                // Room for every node was reserved: this does not allocate.
                Ok(()) => held.push(peer, GFP_KERNEL)?,
                Err(e) if e == errno::EHOSTDOWN() => {}
                Err(e) => {
                    // It may have paused them after all (a late answer).
                    held.push(peer, GFP_KERNEL)?;
                    self.resume_mappers(lmr_id, lmr, &held);
                    return Err(e);
                }
            }
        }
        Ok(held)
    }

    /// Owner side: hands the mappers in `held` the places of `lmr`'s chunks
    /// and resumes their mappings.
    pub(super) fn resume_mappers(&self, lmr_id: u64, lmr: &Lmr, held: &[Arc<super::Peer>]) {
        if held.is_empty() {
            return;
        }
        // A table of its own: the LMR may have no published name left.
        let table = self
            .chunk_table(lmr)
            .and_then(|table| Ok((table.remote_range(0, table.len())?, table)));
        let (table_addr, table_rkey, _table) = match table {
            Ok(((addr, rkey), table)) => (addr, rkey, Some(table)),
            // The mappers close their mappings when they read nothing.
            Err(_) => (0, 0, None),
        };
        for peer in held.iter() {
            let reply = self
                .core
                .requests
                .call_uninterruptible(peer, |request_id| {
                    SharingMessage::ResumeMappings {
                        request_id,
                        lmr_id,
                        table_addr,
                        table_rkey,
                    }
                    .to_frame()
                })
                .and_then(|reply| reply.status().to_result());
            if let Err(e) = reply {
                if e != errno::EHOSTDOWN() {
                    pr_warn!(
                        "node {} could not follow the moved chunks of LMR {:#x}: {:?}\n",
                        peer.node,
                        lmr_id,
                        e
                    );
                }
            }
        }
    }
}

/// Closes the mappings `held` keeps paused, before their pauses end: their
/// places may be stale.
fn close_held(held: &HeldMappings) {
    for pause in held.pauses.iter() {
        pause.lmr().close(errno::EKEYREVOKED());
    }
}
