// SPDX-License-Identifier: GPL-2.0

//! The client side of RPC: reply slots that replies are written into, the
//! rings of remote ports this node writes requests to, and calls to this
//! node's own ports.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};

use super::ring_protocol::{next_generation, RingWriter, MAX_PORTS};
use crate::{errno, verbs::DmaBuffer};

/// Calls of this node waiting for remote replies at once.
pub(crate) const REPLY_SLOTS: usize = 64;

/// Largest reply buffer a slot keeps for its next call; larger ones go
/// back to the pool once their reply is delivered, so idle slots hold
/// little memory.
const KEPT_REPLY_BUFFER: usize = 4096;

/// How long a caller waits for a reply (`LITE_RPC_TIMEOUT_MS`).
pub(crate) const RPC_TIMEOUT_MS: u32 = 60_000;

/// How a call ended, or that it has not yet.
pub(crate) enum Outcome {
    /// No answer yet.
    Waiting,
    /// Answered with this many bytes.
    Replied(u32),
    /// Failed on the server's side.
    Failed(Error),
    /// The caller gave up; the slot is reused once the answer comes.
    Abandoned,
}

/// Where the request of a call went: which ring, and where in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SentRequest {
    /// The server node.
    pub(crate) node: u32,
    /// The server port.
    pub(crate) port: u32,
    /// The ring's epoch.
    pub(crate) epoch: u32,
    /// The request's position in the ring.
    pub(crate) position: u64,
}

impl SentRequest {
    /// The ring and epoch as one word (never 0), so that a reader sees all
    /// of a record's key or none of it.
    fn key(&self) -> u64 {
        (1 << 63)
            | (u64::from(self.node) << 48)
            | (u64::from(self.port) << 32)
            | u64::from(self.epoch)
    }
}

/// Where the request of the call in one slot went (a [`SentRequest`]).
///
/// Written by the posting thread without the slots' lock, while it holds
/// the ring's view locked: a report that the ring broke drops the view
/// under that lock before looking at the records, so it sees every record
/// of the broken epoch whole. Read under the slots' lock.
struct SentRecord {
    /// [`SentRequest::key`], or 0 for none.
    key: AtomicU64,
    /// The request's position in the ring.
    position: AtomicU64,
}

/// One reply slot.
pub(crate) struct ReplySlot {
    /// Distinguishes successive calls through the slot.
    pub(crate) generation: u32,
    /// `None` while free.
    pub(crate) outcome: Option<Outcome>,
    /// Where the server writes the reply; kept for the next call.
    pub(crate) buffer: Option<DmaBuffer>,
}

/// A slot claimed for one call.
pub(crate) struct ClaimedSlot {
    /// Its index.
    pub(crate) slot: usize,
    /// Its generation for this call.
    pub(crate) generation: u32,
    /// Address and key peers write its reply buffer with.
    pub(crate) reply_addr: (u64, u32),
    /// Bytes the reply buffer takes.
    pub(crate) room: usize,
}

/// Reply slots of this node's remote calls.
#[pin_data]
pub(crate) struct ReplySlots {
    #[pin]
    pub(crate) slots: Mutex<KVec<ReplySlot>>,
    /// Where each slot's request went, by slot.
    sent: [SentRecord; REPLY_SLOTS],
    #[pin]
    pub(crate) changed: CondVar,
}

impl ReplySlots {
    /// Reply buffers idle slots keep for their next call.
    pub(crate) fn kept_buffers(&self) -> usize {
        self.slots
            .lock()
            .iter()
            .filter(|slot| slot.outcome.is_none() && slot.buffer.is_some())
            .count()
    }

    /// Slots claimed by a call whose reply is not consumed yet.
    pub(crate) fn in_use(&self) -> usize {
        self.slots
            .lock()
            .iter()
            .filter(|slot| slot.outcome.is_some())
            .count()
    }

    /// Free slots.
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut slots = KVec::with_capacity(REPLY_SLOTS, GFP_KERNEL)?;
        for _ in 0..REPLY_SLOTS {
            slots.push(
                ReplySlot {
                    generation: 0,
                    outcome: None,
                    buffer: None,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(try_pin_init!(ReplySlots {
            slots <- new_mutex!(slots, "lite:reply_slots"),
            sent: [const {
                SentRecord {
                    key: AtomicU64::new(0),
                    position: AtomicU64::new(0),
                }
            }; REPLY_SLOTS],
            changed <- new_condvar!("lite:reply_slots_changed"),
        }))
    }

    /// Claims a slot whose buffer holds at least `room` bytes, made by
    /// `allocate` if needed.
    pub(crate) fn claim(
        &self,
        room: usize,
        allocate: impl Fn(usize) -> Result<DmaBuffer>,
    ) -> Result<ClaimedSlot> {
        let mut slots = self.slots.lock();
        let index = loop {
            if let Some(index) = slots.iter().position(|s| s.outcome.is_none()) {
                break index;
            }
            if self.changed.wait_interruptible(&mut slots) {
                return Err(EINTR);
            }
        };
        // PANIC: `index` came from iterating over `slots`, which has
        // `REPLY_SLOTS` entries like `sent`.
        let slot = &mut slots[index];
        slot.generation = next_generation(slot.generation);
        slot.outcome = Some(Outcome::Waiting);
        // PANIC: as above.
        self.sent[index].key.store(0, Ordering::Relaxed);
        let generation = slot.generation;
        let cached = slot.buffer.as_ref().filter(|b| b.len() >= room);
        if let Some(reply_addr) = cached.and_then(|b| b.remote_range(0, room).ok()) {
            return Ok(ClaimedSlot {
                slot: index,
                generation,
                reply_addr,
                room,
            });
        }
        let old = slot.buffer.take();
        drop(slots);
        // Free and allocate outside the lock.
        drop(old);
        let fresh = allocate(room.max(1)).and_then(|buffer| {
            let reply_addr = buffer.remote_range(0, room)?;
            Ok((buffer, reply_addr))
        });
        let mut slots = self.slots.lock();
        // PANIC: `index < REPLY_SLOTS` (as above); `slots` never changes
        // length.
        match fresh {
            Ok((buffer, reply_addr)) => {
                slots[index].buffer = Some(buffer);
                Ok(ClaimedSlot {
                    slot: index,
                    generation,
                    reply_addr,
                    room,
                })
            }
            Err(e) => {
                slots[index].outcome = None;
                drop(slots);
                self.changed.notify_all();
                Err(e)
            }
        }
    }

    /// Records the answer to the call in `slot` of `generation`; a stale
    /// answer (of an abandoned or earlier call) only frees the slot.
    pub(crate) fn answer(&self, slot: usize, generation: u32, answer: Outcome) {
        let mut slots = self.slots.lock();
        let Some(entry) = slots.get_mut(slot) else {
            return;
        };
        if entry.generation != generation {
            return;
        }
        match entry.outcome {
            Some(Outcome::Waiting) => entry.outcome = Some(answer),
            Some(Outcome::Abandoned) => entry.outcome = None,
            _ => return,
        }
        drop(slots);
        self.changed.notify_all();
    }

    /// Waits for the answer to the call in `slot`. On success, `deliver`
    /// gets the reply buffer and the reply's length.
    pub(crate) fn wait<T>(
        &self,
        slot: usize,
        deliver: impl FnOnce(&DmaBuffer, usize) -> Result<T>,
    ) -> Result<T> {
        let mut slots = self.slots.lock();
        let mut waited_ms = 0u32;
        loop {
            // PANIC: `slot` was returned by `claim`, an index below
            // `REPLY_SLOTS`, and `slots` never changes length.
            let entry = &mut slots[slot];
            match entry.outcome.take() {
                Some(Outcome::Replied(len)) => {
                    let buffer = entry.buffer.take();
                    drop(slots);
                    let result = match &buffer {
                        Some(buffer) => deliver(buffer, len as usize),
                        None => Err(EIO),
                    };
                    let kept = buffer.filter(|b| b.len() <= KEPT_REPLY_BUFFER);
                    let mut slots = self.slots.lock();
                    // PANIC: as above.
                    slots[slot].buffer = kept;
                    drop(slots);
                    self.changed.notify_all();
                    return result;
                }
                Some(Outcome::Failed(e)) => {
                    drop(slots);
                    self.changed.notify_all();
                    return Err(e);
                }
                other => entry.outcome = other,
            }
            let give_up = match self
                .changed
                .wait_interruptible_timeout(&mut slots, msecs_to_jiffies(1000))
            {
                CondVarTimeoutResult::Signal { .. } => Some(EINTR),
                CondVarTimeoutResult::Timeout => {
                    waited_ms = waited_ms.saturating_add(1000);
                    (waited_ms >= RPC_TIMEOUT_MS).then(errno::ETIMEDOUT)
                }
                CondVarTimeoutResult::Woken { .. } => None,
            };
            if let Some(e) = give_up {
                // PANIC: as above.
                let entry = &mut slots[slot];
                if let Some(Outcome::Waiting) = entry.outcome {
                    // The server may still write the reply: the buffer
                    // stays with the slot until it does.
                    entry.outcome = Some(Outcome::Abandoned);
                    return Err(e);
                }
            }
        }
    }

    /// Notes where the request of the call in `slot` goes, before it is
    /// posted (and while the ring's view is locked, so that a report of the
    /// ring breaking cannot miss it).
    pub(crate) fn record(&self, slot: usize, sent: SentRequest) {
        if let Some(record) = self.sent.get(slot) {
            record.position.store(sent.position, Ordering::Relaxed);
            record.key.store(sent.key(), Ordering::Release);
        }
    }

    /// Fails with `error` every call whose request went to the ring of
    /// (`node`, `port`) in `epoch` at or after position `received`: the
    /// server discarded those requests, so no answer will come. Returns how
    /// many callers were waiting.
    pub(crate) fn fail_discarded(
        &self,
        node: u32,
        port: u32,
        epoch: u32,
        received: u64,
        error: Error,
    ) -> usize {
        let key = SentRequest {
            node,
            port,
            epoch,
            position: 0,
        }
        .key();
        let mut failed = 0;
        let mut slots = self.slots.lock();
        for (entry, record) in slots.iter_mut().zip(self.sent.iter()) {
            if record.key.load(Ordering::Acquire) != key
                || record.position.load(Ordering::Relaxed) < received
            {
                continue;
            }
            record.key.store(0, Ordering::Relaxed);
            match entry.outcome {
                Some(Outcome::Waiting) => {
                    entry.outcome = Some(Outcome::Failed(error));
                    // PANIC: at most one per slot, `REPLY_SLOTS` in all.
                    failed += 1;
                }
                // Its caller gave up; nothing will ever be written into
                // its buffer now.
                Some(Outcome::Abandoned) => entry.outcome = None,
                _ => {}
            }
        }
        drop(slots);
        self.changed.notify_all();
        failed
    }

    /// Fails with `EHOSTDOWN` every call waiting for an answer from `node`,
    /// which is gone; slots whose callers gave up are free again (nothing
    /// will be written into them: the connection is fenced).
    pub(crate) fn fail_node(&self, node: u32) {
        let mut slots = self.slots.lock();
        for (entry, record) in slots.iter_mut().zip(self.sent.iter()) {
            let key = record.key.load(Ordering::Acquire);
            // The node's bits of `SentRequest::key`.
            if key == 0 || (key >> 48) & 0x7fff != u64::from(node) {
                continue;
            }
            record.key.store(0, Ordering::Relaxed);
            match entry.outcome {
                Some(Outcome::Waiting) => entry.outcome = Some(Outcome::Failed(errno::EHOSTDOWN())),
                Some(Outcome::Abandoned) => entry.outcome = None,
                _ => {}
            }
        }
        drop(slots);
        self.changed.notify_all();
    }

    /// Gives up the call in `slot` before its request was sent.
    pub(crate) fn cancel(&self, slot: usize) {
        let mut slots = self.slots.lock();
        // PANIC: `slot` was returned by `claim`, an index below
        // `REPLY_SLOTS`, and `slots` never changes length.
        slots[slot].outcome = None;
        drop(slots);
        self.changed.notify_all();
    }
}

/// A call to a port of this node.
#[pin_data]
pub(crate) struct LocalCall {
    /// Room for the reply.
    pub(crate) max_reply: u64,
    #[pin]
    outcome: Mutex<Option<Result<KVVec<u8>>>>,
    #[pin]
    done: CondVar,
}

impl LocalCall {
    /// A call waiting for a reply of at most `max_reply` bytes.
    pub(crate) fn new(max_reply: u64) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(LocalCall {
                max_reply,
                outcome <- new_mutex!(None, "lite:local_call"),
                done <- new_condvar!("lite:local_call_done"),
            }),
            GFP_KERNEL,
        )
    }

    /// Answers the call (once; later answers are ignored).
    pub(crate) fn answer(&self, answer: Result<KVVec<u8>>) {
        let mut outcome = self.outcome.lock();
        if outcome.is_none() {
            *outcome = Some(answer);
            drop(outcome);
            self.done.notify_all();
        }
    }

    /// Waits for the answer.
    pub(crate) fn wait(&self) -> Result<KVVec<u8>> {
        let mut outcome = self.outcome.lock();
        let mut waited_ms = 0u32;
        loop {
            if let Some(answer) = outcome.take() {
                return answer;
            }
            match self
                .done
                .wait_interruptible_timeout(&mut outcome, msecs_to_jiffies(1000))
            {
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                CondVarTimeoutResult::Timeout => {
                    // PANIC: the wait ends once `waited_ms` reaches
                    // `RPC_TIMEOUT_MS`, far below `u32::MAX`.
                    waited_ms += 1000;
                    if waited_ms >= RPC_TIMEOUT_MS {
                        return Err(errno::ETIMEDOUT());
                    }
                }
                CondVarTimeoutResult::Woken { .. } => {}
            }
        }
    }
}

/// What this node knows of a remote port.
pub(crate) struct RemotePort {
    /// Remote address of the ring the server keeps for this node.
    pub(crate) ring_addr: u64,
    /// Its remote key.
    pub(crate) ring_rkey: u32,
    /// Largest message the port takes.
    pub(crate) max_size: u64,
    /// The ring's epoch (how often the server started it afresh).
    pub(crate) epoch: u32,
    /// Room in the ring.
    pub(crate) writer: RingWriter,
}

/// This node's knowledge of one port of a server node.
#[derive(Default)]
pub(crate) struct PortView {
    /// The port's ring; `None` until queried, and again once the server
    /// closed the port or found the ring broken.
    pub(crate) remote: Option<RemotePort>,
    /// Counts the times `remote` was dropped: a query answered across a
    /// drop describes a ring that requests may since have been written to,
    /// so its answer is not installed.
    pub(crate) drops: u32,
    /// A query that may install `remote` is under way: one at a time, so
    /// that no request is in flight to the ring while it is.
    pub(crate) querying: bool,
}

impl PortView {
    /// Forgets the port's ring; the next request queries it afresh.
    pub(crate) fn drop_remote(&mut self) {
        self.remote = None;
        self.drops = self.drops.wrapping_add(1);
    }
}

/// The remote ports of one server node.
#[pin_data]
pub(crate) struct ServerNode {
    /// By port.
    #[pin]
    pub(crate) ports: Mutex<KVec<PortView>>,
    /// Signalled when a ring gains room.
    #[pin]
    pub(crate) room: CondVar,
}

impl ServerNode {
    /// Nothing queried yet.
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut ports = KVec::with_capacity(MAX_PORTS as usize, GFP_KERNEL)?;
        for _ in 0..MAX_PORTS {
            ports.push(PortView::default(), GFP_KERNEL)?;
        }
        Ok(try_pin_init!(ServerNode {
            ports <- new_mutex!(ports, "lite:server_node"),
            room <- new_condvar!("lite:server_node_room"),
        }))
    }
}
