// SPDX-License-Identifier: GPL-2.0

//! Control requests to peers and matching of their replies.
//!
//! A caller sends a request carrying a fresh request id and sleeps; the
//! polling thread hands the reply to [`Requests::complete`], which wakes the
//! caller. At most [`MAX_PENDING`] requests are outstanding per node; more
//! callers wait for a free entry, which bounds what peers must buffer.

use crate::internal::node_id::NodeId;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};

use super::{
    peer::Peer,
    wire::{Frame, Role},
};
use crate::{errno, sys::sched};

/// Most requests outstanding at once on this node.
pub(crate) const MAX_PENDING: usize = 64;

/// How long a caller waits for a reply.
const REPLY_TIMEOUT_MS: u32 = 30_000;

#[derive(Clone, Copy)]
struct Entry {
    /// Request id, 0 if the entry is free.
    id: u64,
    /// The node the request went to.
    node: NodeId,
    /// The reply, or why none will come.
    reply: Option<Result<Frame>>,
}

const FREE: Entry = Entry {
    id: 0,
    node: NodeId::NONE,
    reply: None,
};

struct Pending {
    next_id: u64,
    entries: [Entry; MAX_PENDING],
}

/// Requests waiting for replies.
#[pin_data]
pub(crate) struct Requests {
    /// Lock class `lite:requests`: see the lock order in [`crate::internal::core`].
    #[pin]
    pending: Mutex<Pending>,
    #[pin]
    changed: CondVar,
}

impl Requests {
    /// No request outstanding.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Requests {
            pending <- new_mutex!(
                Pending {
                    next_id: 1,
                    entries: [FREE; MAX_PENDING],
                },
                "lite:requests"
            ),
            changed <- new_condvar!("lite:requests_changed"),
        })
    }

    /// Sends the request built by `build` (given its id) to `peer` and
    /// returns the reply.
    ///
    /// # Errors
    ///
    /// Errors of the send, `ETIMEDOUT` if no reply came in time,
    /// `EHOSTDOWN` if the peer is or becomes gone, or `ERESTARTSYS` if a
    /// signal arrived while waiting. A reply arriving
    /// after the caller gave up is passed back by [`Requests::complete`].
    pub(crate) fn call(&self, peer: &Peer, build: impl FnOnce(u64) -> Frame) -> Result<Frame> {
        self.call_with(peer, build, true)
    }

    /// [`Requests::call`] that signals do not interrupt, for releasing
    /// resources (also from exiting processes, which may have a fatal signal
    /// pending); only the timeout ends the wait.
    pub(crate) fn call_uninterruptible(
        &self,
        peer: &Peer,
        build: impl FnOnce(u64) -> Frame,
    ) -> Result<Frame> {
        self.call_with(peer, build, false)
    }

    fn call_with(
        &self,
        peer: &Peer,
        build: impl FnOnce(u64) -> Frame,
        interruptible: bool,
    ) -> Result<Frame> {
        let (slot, id) = self.reserve(peer.node, interruptible)?;
        // Checked after the entry is reserved: a peer gone before this was
        // seen here, one gone after it fails the entry (`fail_node`).
        let result = peer
            .send(&build(id))
            .and_then(|()| self.wait_reply(slot, id, interruptible));
        let mut pending = self.pending.lock();
        // PANIC: `reserve` returns the index of an entry of `entries`.
        pending.entries[slot] = FREE;
        self.changed.notify_all();
        result
    }

    fn reserve(&self, node: NodeId, interruptible: bool) -> Result<(usize, u64)> {
        let mut pending = self.pending.lock();
        loop {
            if let Some(slot) = pending.entries.iter().position(|e| e.id == 0) {
                let id = pending.next_id;
                pending.next_id = pending.next_id.checked_add(1).unwrap_or(1);
                // PANIC: `slot` is a position in `entries`.
                pending.entries[slot] = Entry {
                    id,
                    node,
                    reply: None,
                };
                return Ok((slot, id));
            }
            if interruptible {
                if self.changed.wait_interruptible(&mut pending) {
                    return Err(ERESTARTSYS);
                }
            } else {
                self.changed.wait(&mut pending);
            }
        }
    }

    fn wait_reply(&self, slot: usize, id: u64, interruptible: bool) -> Result<Frame> {
        let mut pending = self.pending.lock();
        // The condition variable is shared by every request, so a wake-up
        // is often another's: the wait goes on for what is left of the
        // timeout, not for a fresh one.
        let mut remaining = msecs_to_jiffies(REPLY_TIMEOUT_MS);
        // Without `interruptible`, a pending signal makes every wait return
        // at once, so the wait continues in short uninterruptible sleeps,
        // counted against the same timeout.
        let mut slept_ms = 0u32;
        loop {
            // PANIC: `slot` comes from `reserve`, an index of `entries`.
            let entry = &mut pending.entries[slot];
            if entry.id == id {
                if let Some(reply) = entry.reply.take() {
                    return reply;
                }
            }
            if slept_ms >= REPLY_TIMEOUT_MS || remaining == 0 {
                return Err(errno::ETIMEDOUT());
            }
            match self
                .changed
                .wait_interruptible_timeout(&mut pending, remaining)
            {
                CondVarTimeoutResult::Signal { .. } if interruptible => return Err(ERESTARTSYS),
                CondVarTimeoutResult::Signal { jiffies } => {
                    remaining = jiffies;
                    drop(pending);
                    sched::sleep_uninterruptible_ms(1);
                    // PANIC: `slept_ms < REPLY_TIMEOUT_MS` (checked above).
                    slept_ms += 1;
                    pending = self.pending.lock();
                }
                CondVarTimeoutResult::Timeout => remaining = 0,
                CondVarTimeoutResult::Woken { jiffies } => remaining = jiffies,
            }
        }
    }

    /// Hands `reply` to the caller waiting for it.
    ///
    /// Returns the reply back if nobody waits for it any more, so the caller
    /// can undo its effect (for example free an orphaned chunk).
    pub(crate) fn complete(&self, reply: Frame) -> Option<Frame> {
        if reply.kind().role() != Some(Role::Reply) {
            return Some(reply);
        }
        let id = reply.request_id();
        let mut pending = self.pending.lock();
        match pending
            .entries
            .iter_mut()
            .find(|e| e.id == id && id != 0 && e.reply.is_none())
        {
            Some(entry) => {
                entry.reply = Some(Ok(reply));
                self.changed.notify_all();
                None
            }
            None => Some(reply),
        }
    }

    /// Fails every request waiting for a reply from `node`, which is gone.
    pub(crate) fn fail_node(&self, node: NodeId) {
        let mut pending = self.pending.lock();
        for entry in pending.entries.iter_mut() {
            if entry.id != 0 && entry.node == node && entry.reply.is_none() {
                entry.reply = Some(Err(errno::EHOSTDOWN()));
            }
        }
        self.changed.notify_all();
    }
}
