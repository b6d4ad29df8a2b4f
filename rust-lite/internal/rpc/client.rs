// SPDX-License-Identifier: GPL-2.0

//! The client side of RPC: reply slots that replies are written into, the
//! rings of remote ports this node writes requests to, and calls to this
//! node's own ports.

use crate::internal::node_id::NodeId;
use core::{
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
};
use kernel::{
    init::pin_init_array_from_fn,
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};

use super::ring_protocol::{next_generation, RingWriter, PORTS};
use crate::{errno, internal::util::clock::now_ms, verbs::DmaBuffer};

/// Calls of this node waiting for remote replies at once: room for every
/// process's asynchronous calls (at most [`MAX_ASYNC_CALLS`] each) beside
/// blocking ones.
pub(crate) const REPLY_SLOTS: usize = 256;

/// Unreaped asynchronous calls per process (`LITE_MAX_ASYNC_CALLS`), so one
/// process cannot hold every reply slot of its node.
pub(crate) const MAX_ASYNC_CALLS: usize = 32;

/// Largest reply buffer a slot keeps for its next call; larger ones go
/// back to the pool once their reply is delivered, so idle slots hold
/// little memory.
const KEPT_REPLY_BUFFER: usize = 4096;

/// How long a caller waits for a reply (`LITE_RPC_TIMEOUT_MS`).
pub(crate) const RPC_TIMEOUT_MS: u32 = 60_000;

/// A request that was sent.
pub(crate) enum Pending {
    /// One way: nothing to wait for.
    OneWay,
    /// To another node: the reply arrives in this slot.
    Remote(usize),
    /// To this node.
    Local(Arc<LocalCall>),
}

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
    /// The caller is copying the reply out; the slot is free once its
    /// buffer is back.
    Delivering,
}

/// Where the request of a call went: which ring, and where in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SentRequest {
    /// The server node.
    pub(crate) node: NodeId,
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
            | (u64::from(self.node.get()) << 48)
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
    /// Lock class `lite:reply_slots`: see the lock order in [`crate::internal::core`].
    #[pin]
    pub(crate) slots: Mutex<KVec<ReplySlot>>,
    /// Where each slot's request went, by slot.
    sent: [SentRecord; REPLY_SLOTS],
    /// Signalled when a slot is freed.
    #[pin]
    pub(crate) changed: CondVar,
    /// Signalled, by slot, when its call is answered, so that a reply wakes
    /// its caller only and not every caller of this node.
    answered: Pin<KBox<[CondVar; REPLY_SLOTS]>>,
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

    /// Gives the reply buffers idle slots keep back to the pool.
    pub(crate) fn release_kept_buffers(&self) {
        let Ok(mut released) = KVec::with_capacity(REPLY_SLOTS, GFP_KERNEL) else {
            return;
        };
        let mut slots = self.slots.lock();
        for slot in slots.iter_mut().filter(|slot| slot.outcome.is_none()) {
            if let Some(buffer) = slot.buffer.take() {
                // Does not allocate: room for every slot was made above.
                let _ = released.push(buffer, GFP_KERNEL);
            }
        }
        drop(slots);
        // Freed outside the lock, as when a slot replaces its buffer.
        drop(released);
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
        let answered = KBox::pin_init(
            pin_init_array_from_fn::<_, REPLY_SLOTS, _, core::convert::Infallible>(|_| {
                new_condvar!("lite:reply_slot_answered")
            }),
            GFP_KERNEL,
        )?;
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
            answered,
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
            Some(Outcome::Waiting) => {
                entry.outcome = Some(answer);
                drop(slots);
                self.wake_caller(slot);
            }
            Some(Outcome::Abandoned) => {
                entry.outcome = None;
                drop(slots);
                self.changed.notify_all();
            }
            _ => {}
        }
    }

    /// Wakes the caller waiting for the answer in `slot`.
    fn wake_caller(&self, slot: usize) {
        if let Some(answered) = self.answered.get(slot) {
            answered.notify_all();
        }
    }

    /// Wakes every caller waiting for an answer.
    fn wake_callers(&self) {
        for answered in self.answered.iter() {
            answered.notify_all();
        }
    }

    /// Waits for the answer to the call in `slot`, for at most
    /// [`RPC_TIMEOUT_MS`]. On success, `deliver` gets the reply buffer and
    /// the reply's length. A caller that stops waiting (signal, timeout)
    /// abandons the call.
    pub(crate) fn wait<T>(
        &self,
        slot: usize,
        deliver: impl FnOnce(&DmaBuffer, usize) -> Result<T>,
    ) -> Result<T> {
        let deadline_ms = now_ms().saturating_add(u64::from(RPC_TIMEOUT_MS));
        if let Err(e) = self.wait_answered(slot, deadline_ms) {
            self.abandon(slot);
            return Err(if e == ERESTARTSYS { EINTR } else { e });
        }
        self.take_answer(slot, deliver)
    }

    /// Whether the call in `slot` has been answered (or failed).
    pub(crate) fn is_answered(&self, slot: usize) -> bool {
        matches!(
            self.slots.lock().get(slot).and_then(|s| s.outcome.as_ref()),
            Some(Outcome::Replied(_) | Outcome::Failed(_))
        )
    }

    /// Waits until the call in `slot` is answered or the monotonic clock
    /// reaches `deadline_ms`, whichever comes first; the answer stays in
    /// the slot.
    ///
    /// # Errors
    ///
    /// `ERESTARTSYS` if a signal arrived (the call goes on).
    pub(crate) fn wait_answered(&self, slot: usize, deadline_ms: u64) -> Result {
        let mut slots = self.slots.lock();
        loop {
            let answered = matches!(
                slots.get(slot).and_then(|s| s.outcome.as_ref()),
                Some(Outcome::Replied(_) | Outcome::Failed(_))
            );
            let now = now_ms();
            if answered || now >= deadline_ms {
                return Ok(());
            }
            // At most a second at a time, so the deadline is noticed even
            // when nothing changes.
            let wait_ms = (deadline_ms - now).min(1000) as u32;
            let answered = self.answered.get(slot).ok_or(EINVAL)?;
            if let CondVarTimeoutResult::Signal { .. } =
                answered.wait_interruptible_timeout(&mut slots, msecs_to_jiffies(wait_ms))
            {
                return Err(ERESTARTSYS);
            }
        }
    }

    /// Takes the answer to the call in `slot` and frees the slot: `deliver`
    /// gets the reply buffer and the reply's length, or the call's error
    /// is returned. A call not answered yet is abandoned (`ETIMEDOUT`).
    pub(crate) fn take_answer<T>(
        &self,
        slot: usize,
        deliver: impl FnOnce(&DmaBuffer, usize) -> Result<T>,
    ) -> Result<T> {
        let mut slots = self.slots.lock();
        let Some(entry) = slots.get_mut(slot) else {
            return Err(EINVAL);
        };
        match entry.outcome.take() {
            Some(Outcome::Replied(len)) => {
                // The slot stays claimed while the reply is copied out, so
                // no other call gets it before its buffer is back.
                entry.outcome = Some(Outcome::Delivering);
                let buffer = entry.buffer.take();
                drop(slots);
                let result = match &buffer {
                    Some(buffer) => deliver(buffer, len as usize),
                    None => Err(EIO),
                };
                let kept = buffer.filter(|b| b.len() <= KEPT_REPLY_BUFFER);
                let mut slots = self.slots.lock();
                if let Some(entry) = slots.get_mut(slot) {
                    entry.buffer = kept;
                    entry.outcome = None;
                }
                drop(slots);
                self.changed.notify_all();
                result
            }
            Some(Outcome::Failed(e)) => {
                drop(slots);
                self.changed.notify_all();
                Err(e)
            }
            other => {
                entry.outcome = other;
                drop(slots);
                self.abandon(slot);
                Err(errno::ETIMEDOUT())
            }
        }
    }

    /// Gives up the call in `slot`: the slot is free at once if the call
    /// was answered, else when its answer comes (the server may still
    /// write the reply, so the buffer stays with the slot until then).
    pub(crate) fn abandon(&self, slot: usize) {
        let mut slots = self.slots.lock();
        let Some(entry) = slots.get_mut(slot) else {
            return;
        };
        match entry.outcome {
            Some(Outcome::Waiting) => entry.outcome = Some(Outcome::Abandoned),
            Some(Outcome::Replied(_) | Outcome::Failed(_)) => {
                entry.outcome = None;
                drop(slots);
                self.changed.notify_all();
            }
            _ => {}
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
        node: NodeId,
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
        self.wake_callers();
        failed
    }

    /// Fails with `EHOSTDOWN` every call waiting for an answer from `node`,
    /// which is gone; slots whose callers gave up are free again (nothing
    /// will be written into them: the connection is fenced).
    pub(crate) fn fail_node(&self, node: NodeId) {
        let mut slots = self.slots.lock();
        for (entry, record) in slots.iter_mut().zip(self.sent.iter()) {
            let key = record.key.load(Ordering::Acquire);
            // The node's bits of `SentRequest::key`.
            if key == 0 || (key >> 48) & 0x7fff != u64::from(node.get()) {
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
        self.wake_callers();
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
    /// Lock class `lite:local_call`: see the lock order in [`crate::internal::core`].
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

    /// Waits for the answer, for at most [`RPC_TIMEOUT_MS`].
    pub(crate) fn wait(&self) -> Result<KVVec<u8>> {
        let deadline_ms = now_ms().saturating_add(u64::from(RPC_TIMEOUT_MS));
        self.wait_answered(deadline_ms)
            .map_err(|_| EINTR)
            .and_then(|()| self.take_answer())
    }

    /// Whether the call has been answered.
    pub(crate) fn is_answered(&self) -> bool {
        self.outcome.lock().is_some()
    }

    /// Waits until the call is answered or the monotonic clock reaches
    /// `deadline_ms`; the answer stays with the call.
    ///
    /// # Errors
    ///
    /// `ERESTARTSYS` if a signal arrived.
    pub(crate) fn wait_answered(&self, deadline_ms: u64) -> Result {
        let mut outcome = self.outcome.lock();
        loop {
            let now = now_ms();
            if outcome.is_some() || now >= deadline_ms {
                return Ok(());
            }
            let wait_ms = (deadline_ms - now).min(1000) as u32;
            if let CondVarTimeoutResult::Signal { .. } = self
                .done
                .wait_interruptible_timeout(&mut outcome, msecs_to_jiffies(wait_ms))
            {
                return Err(ERESTARTSYS);
            }
        }
    }

    /// Takes the answer; `ETIMEDOUT` if none has come. Later answers are
    /// ignored.
    pub(crate) fn take_answer(&self) -> Result<KVVec<u8>> {
        let mut outcome = self.outcome.lock();
        match outcome.take() {
            Some(answer) => {
                // Keep the call answered, so a late answer is ignored.
                *outcome = Some(Err(errno::ECANCELED()));
                answer
            }
            None => {
                *outcome = Some(Err(errno::ECANCELED()));
                Err(errno::ETIMEDOUT())
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
    /// Lock class `lite:server_node`: see the lock order in [`crate::internal::core`].
    #[pin]
    pub(crate) ports: Mutex<KVec<PortView>>,
    /// Signalled when a ring gains room.
    #[pin]
    pub(crate) room: CondVar,
}

impl ServerNode {
    /// Nothing queried yet.
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut ports = KVec::with_capacity(PORTS as usize, GFP_KERNEL)?;
        for _ in 0..PORTS {
            ports.push(PortView::default(), GFP_KERNEL)?;
        }
        Ok(try_pin_init!(ServerNode {
            ports <- new_mutex!(ports, "lite:server_node"),
            room <- new_condvar!("lite:server_node_room"),
        }))
    }
}
