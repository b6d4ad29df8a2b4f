// SPDX-License-Identifier: GPL-2.0

//! A reliable connection to one peer node, safe to share between threads.
//!
//! Every operation that lets the device touch memory is synchronous here:
//! it borrows the memory, posts one signaled work request and returns only
//! once the device has reported its completion. That is what makes the
//! wrappers sound without `unsafe` at the call sites: the borrow checker
//! guarantees the memory outlives the device's access to it.
//!
//! Completions of the send queue are reaped by whichever waiting thread gets
//! there first and routed to their owners through [`CompletionSlots`]; the
//! number of slots bounds the work requests in flight, so the send queue can
//! never overflow. A waiter polls briefly (not on a software device), then
//! sleeps, so many waiters do not take the CPU from the device (Soft-RoCE
//! works on the same CPUs). One sleeping waiter at a time, the reaper, is
//! woken by the device's completion event; the others sleep on their own
//! slot and are woken only by the thread that reaps their completion, so a
//! completion wakes its owner and not every waiter. Receives go to a
//! completion queue shared by all connections and polled by one kernel
//! thread, which calls [`Connection::take_message`].

use core::{
    pin::Pin,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
};
use kernel::{bindings, init::pin_init_array_from_fn, prelude::*, sync::Arc, time::Ktime};

use super::{
    cq::POLL_BATCH,
    qp::{LocalSegment, QueuePair, QueueSizes, RemoteEnd},
    CompletionQueue, DmaBuffer, PortConfig, ProtectionDomain, RemoteKeys, WorkCompletion,
};
use crate::sys::wait::{Sleep, WaitQueue};

/// Size of every two-sided (SEND/RECV) message.
pub(crate) const MESSAGE_SIZE: usize = 64;

/// Receive buffers posted per connection.
pub(crate) const RECV_DEPTH: u32 = 256;

/// Send-queue work requests in flight per connection.
///
/// One bit of [`CompletionSlots::busy`] per slot, so exactly 64.
const SEND_SLOTS: usize = 64;
const _: () = assert!(SEND_SLOTS == u64::BITS as usize);

/// Status of a slot whose work request has not completed yet.
const PENDING: u32 = u32::MAX;

/// Bytes a write with immediate may carry inline where the device allows:
/// small RPC requests and replies, which then need no DMA buffer and no
/// wait for their completion.
pub(crate) const INLINE_MAX: usize = 256;

/// How long a waiter polls before it sleeps: a completion that arrives
/// within this time is seen sooner than a sleeping task could be woken.
///
/// Not on a software device: it sends from a worker thread that needs the
/// CPU the waiter would spin on, so polling only delays the completion.
const SPIN_NS: i64 = 20_000;

/// Longest sleep between two looks at the send queue, as a safety net.
const RECHECK_MS: u32 = 10;

/// Tracks which send-queue work requests are in flight and how they ended.
///
/// A work request's `wr_id` is the index of its slot.
///
/// # Invariants
///
/// Bit `i` of `busy` is set while slot `i` (`i < SEND_SLOTS`) is owned by
/// the thread that claimed it in `try_acquire`, or, once that thread set
/// bit `i` of `detached` and posted its request, by the thread that reaps
/// the request's completion. Only the owner passes `i` to `status`,
/// `detach` and `release`; `take_detached` gets it from the owner or from
/// `complete` (an index of `status`); so every slot index they get is
/// below `SEND_SLOTS`. Other threads only read a slot's status, to find
/// the waiters of pending slots (`pending_other_than`).
struct CompletionSlots {
    busy: AtomicU64,
    /// Slots whose requests nobody waits for.
    detached: AtomicU64,
    status: [AtomicU32; SEND_SLOTS],
}

impl CompletionSlots {
    fn new() -> Self {
        CompletionSlots {
            busy: AtomicU64::new(0),
            detached: AtomicU64::new(0),
            status: [const { AtomicU32::new(PENDING) }; SEND_SLOTS],
        }
    }

    /// Claims a free slot, if there is one.
    fn try_acquire(&self) -> Option<usize> {
        loop {
            let busy = self.busy.load(Ordering::SeqCst);
            if busy == u64::MAX {
                return None;
            }
            // PANIC: `busy != u64::MAX`, so `!busy` has a set bit and `slot <
            // 64`: the shift cannot overflow.
            let slot = (!busy).trailing_zeros() as usize;
            let claimed = busy | (1u64 << slot);
            if self
                .busy
                .compare_exchange(busy, claimed, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // PANIC: `slot < 64 == SEND_SLOTS` (see above).
                self.status[slot].store(PENDING, Ordering::Release);
                // INVARIANT: This thread set bit `slot` of `busy`.
                return Some(slot);
            }
        }
    }

    fn release(&self, slot: usize) {
        // PANIC: `slot < SEND_SLOTS == 64` (type invariant), so the shift
        // cannot overflow.
        // Sequentially consistent, as the load of `try_acquire`: with the
        // slot waiters' count, a freed slot and a new waiter always see
        // each other.
        self.busy.fetch_and(!(1u64 << slot), Ordering::SeqCst);
    }

    /// Records the completion of the work request with `wr_id`; returns its
    /// slot.
    fn complete(&self, wc: &WorkCompletion) -> Option<usize> {
        let slot = usize::try_from(wc.wr_id).ok()?;
        self.status.get(slot)?.store(wc.status, Ordering::Release);
        Some(slot)
    }

    /// Hands `slot` to whoever reaps its completion.
    fn detach(&self, slot: usize) {
        // PANIC: `slot < SEND_SLOTS == 64` (type invariant).
        self.detached.fetch_or(1u64 << slot, Ordering::SeqCst);
    }

    /// Whether `slot` was detached; it is not any more.
    fn take_detached(&self, slot: usize) -> bool {
        // PANIC: `slot < SEND_SLOTS == 64` (type invariant).
        let bit = 1u64 << slot;
        self.detached.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// A slot other than `except` whose work request has not completed and
    /// is waited for, if any: its owner is posting it or waiting for it.
    fn pending_other_than(&self, except: Option<usize>) -> Option<usize> {
        let mut busy = self.busy.load(Ordering::SeqCst) & !self.detached.load(Ordering::SeqCst);
        if let Some(except) = except {
            // PANIC: `except < SEND_SLOTS == 64` (type invariant).
            busy &= !(1u64 << except);
        }
        while busy != 0 {
            let slot = busy.trailing_zeros() as usize;
            // PANIC: `slot < 64 == SEND_SLOTS`, as `busy` has 64 bits.
            if self.status[slot].load(Ordering::Acquire) == PENDING {
                return Some(slot);
            }
            busy &= busy - 1;
        }
        None
    }

    fn status(&self, slot: usize) -> u32 {
        // PANIC: `slot < SEND_SLOTS` (type invariant).
        self.status[slot].load(Ordering::Acquire)
    }
}

/// Encodes the `wr_id` of a receive: which connection and which ring entry.
fn recv_wr_id(tag: u32, index: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

/// Splits a receive `wr_id` into the connection tag and ring entry.
pub(crate) fn split_recv_wr_id(wr_id: u64) -> (u32, u32) {
    ((wr_id >> 32) as u32, wr_id as u32)
}

/// A reliable connection (an RC queue pair) with its buffers.
pub(crate) struct Connection {
    // Declared first so it is destroyed first: that ends the device's access
    // to the rings below.
    qp: QueuePair,
    recv_ring: DmaBuffer,
    send_ring: DmaBuffer,
    send_cq: Arc<CompletionQueue>,
    slots: CompletionSlots,
    /// Bytes a write with immediate may carry inline here.
    max_inline: usize,
    /// Where the owner of each slot sleeps while another waiter reaps.
    slot_events: Pin<KBox<[WaitQueue; SEND_SLOTS]>>,
    /// Threads waiting for a slot while every one is in use; they sleep on
    /// the send queue's event like the reaper, as slots of requests nobody
    /// waits for are only freed by reaping.
    slot_waiters: AtomicU32,
    /// A waiter sleeps on the send queue's completion event (the reaper).
    reaping: AtomicBool,
    polling: AtomicBool,
    tag: u32,
    /// How long a waiter polls before it sleeps.
    spin_ns: i64,
    /// The peer's replaced keys, translated in every remote access.
    keys: Arc<RemoteKeys>,
    /// The connection was fenced.
    fenced: AtomicBool,
}

impl Connection {
    /// Creates the queue pair in INIT state, with its receive ring posted.
    ///
    /// Receives complete on `recv_cq` with `wr_id`s carrying `tag`.
    pub(crate) fn new(
        pd: &Arc<ProtectionDomain>,
        recv_cq: &Arc<CompletionQueue>,
        port: &PortConfig,
        tag: u32,
    ) -> Result<Self> {
        let device = pd.device();
        // PANIC: Here and below, products of small constants (at most
        // 256 * 64) that cannot overflow.
        let send_cq = CompletionQueue::new(device.clone(), (SEND_SLOTS * 2) as u32)?;
        let sizes = |inline| QueueSizes {
            send: SEND_SLOTS as u32,
            recv: RECV_DEPTH,
            inline,
        };
        // A device that cannot take the data inline sends it from DMA
        // buffers instead.
        let qp = match QueuePair::new(pd, &send_cq, recv_cq, sizes(INLINE_MAX as u32), port) {
            Ok(qp) => qp,
            Err(_) => QueuePair::new(pd, &send_cq, recv_cq, sizes(0), port)?,
        };
        let max_inline = (qp.max_inline() as usize).min(INLINE_MAX);
        let this = Connection {
            qp,
            recv_ring: DmaBuffer::new(device, RECV_DEPTH as usize * MESSAGE_SIZE)?,
            send_ring: DmaBuffer::new(device, SEND_SLOTS * MESSAGE_SIZE)?,
            send_cq,
            slots: CompletionSlots::new(),
            max_inline,
            slot_events: KBox::pin_init(
                pin_init_array_from_fn::<_, SEND_SLOTS, _, core::convert::Infallible>(|_| {
                    WaitQueue::new()
                }),
                GFP_KERNEL,
            )?,
            slot_waiters: AtomicU32::new(0),
            reaping: AtomicBool::new(false),
            polling: AtomicBool::new(false),
            tag,
            spin_ns: if device.is_software() { 0 } else { SPIN_NS },
            keys: RemoteKeys::new()?,
            fenced: AtomicBool::new(false),
        };
        for index in 0..RECV_DEPTH {
            this.post_recv(index)?;
        }
        Ok(this)
    }

    /// Local queue pair number and initial packet sequence number.
    pub(crate) fn endpoint(&self) -> (u32, u32) {
        (self.qp.qpn(), self.qp.psn())
    }

    /// Whether `len` bytes go inline on this connection.
    pub(crate) fn fits_inline(&self, len: usize) -> bool {
        self.max_inline > 0 && len <= self.max_inline
    }

    /// Connects to the peer's queue pair.
    pub(crate) fn connect(&self, remote: &RemoteEnd, port: &PortConfig) -> Result {
        self.qp.connect(remote, port)
    }

    /// Fences the connection: the device stops executing its requests and
    /// completes every outstanding one with an error, so no thread keeps
    /// waiting on a peer that is gone and the peer cannot reach this node's
    /// memory through it any more.
    pub(crate) fn fence(&self) -> Result {
        self.fenced.store(true, Ordering::Release);
        self.qp.to_error()?;
        // Waiters sleep until a completion event or the reaping of their
        // slot; the flushed completions bring both, but wake them in any
        // case.
        self.send_cq.wake_waiters();
        for events in self.slot_events.iter() {
            events.wake_all();
        }
        Ok(())
    }

    /// How the peer's keys are translated on this connection.
    pub(crate) fn keys(&self) -> &RemoteKeys {
        &self.keys
    }

    /// Waits until the peer's keys are known (see [`RemoteKeys`]).
    fn wait_for_keys(&self) -> Result {
        self.keys.wait_ready(|| self.fenced.load(Ordering::Acquire))
    }

    fn post_recv(&self, index: u32) -> Result {
        // PANIC: `u32::MAX * 64` fits in a 64-bit `usize`; whether the entry
        // is inside the ring is checked by `dma_range_on`.
        let at = index as usize * MESSAGE_SIZE;
        let segment = LocalSegment {
            addr: self
                .recv_ring
                .dma_range_on(self.qp.device(), at, MESSAGE_SIZE)?,
            len: MESSAGE_SIZE as u32,
        };
        // SAFETY: The entry is DMA-mapped memory of `recv_ring`, owned by
        // this connection and on the QP's device, which stays allocated and
        // mapped until the QP is destroyed (it is dropped after the QP, see
        // the field order). `DmaBuffer` makes no references into its memory
        // while shared; the CPU only copies an entry out in `take_message`,
        // after its receive has completed.
        unsafe { self.qp.post_recv(&segment, recv_wr_id(self.tag, index)) }
    }

    /// Copies out the message that completed in ring entry `index` and
    /// gives the entry back to the device.
    pub(crate) fn take_message(&self, index: u32, out: &mut [u8; MESSAGE_SIZE]) -> Result {
        if index >= RECV_DEPTH {
            return Err(EINVAL);
        }
        // PANIC: `index < RECV_DEPTH` (checked above), so the product is at
        // most the ring's length.
        self.recv_ring
            .read_bytes(index as usize * MESSAGE_SIZE, out)?;
        self.post_recv(index)
    }

    /// Writes `len` bytes of `local` at `at` to `remote_addr` on the peer.
    pub(crate) fn rdma_write(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        self.execute(
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            local,
            at,
            len,
            Some((remote_addr, rkey)),
        )
    }

    /// Writes `len` bytes of `local` at `at` to `remote_addr` on the peer and
    /// hands `imm` to the peer's receive queue with the completion.
    pub(crate) fn rdma_write_imm(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote: (u64, u32),
        imm: u32,
    ) -> Result {
        self.execute_with_imm(
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
            local,
            at,
            len,
            Some(remote),
            Some(imm),
        )
    }

    /// [`Connection::rdma_write_imm`] posted under a lock that
    /// `once_posted` owns and releases: it is called as soon as the request
    /// is posted (`true`) or has failed to be (`false`), before the wait for
    /// its completion. Requests posted under one lock reach the peer in the
    /// lock's order (a queue pair executes requests in order) without
    /// serializing their round trips, and a request that was never posted
    /// can be taken back before anyone else posts.
    pub(crate) fn rdma_write_imm_ordered(
        &self,
        local: &DmaBuffer,
        len: usize,
        remote: (u64, u32),
        imm: u32,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        self.execute_releasing(
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
            local,
            (0, len),
            Some(remote),
            Some(imm),
            once_posted,
        )
    }

    /// Gives receive buffer `index`, consumed by a write with immediate
    /// (which carries no message), back to the device.
    pub(crate) fn repost_receive(&self, index: u32) -> Result {
        if index >= RECV_DEPTH {
            return Err(EINVAL);
        }
        self.post_recv(index)
    }

    /// Reads `len` bytes at `remote_addr` on the peer into `local` at `at`.
    pub(crate) fn rdma_read(
        &self,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote_addr: u64,
        rkey: u32,
    ) -> Result {
        self.execute(
            bindings::ib_wr_opcode_IB_WR_RDMA_READ,
            local,
            at,
            len,
            Some((remote_addr, rkey)),
        )
    }

    /// Writes (`write`) or reads `len` bytes of `local` at 0 to or from
    /// `remote` on the peer, and reports how the device ended it:
    /// `Ok(true)` if it completed, `Ok(false)` if the peer's device refused
    /// the access (a remote access error, after which the connection is in
    /// the error state).
    ///
    /// # Errors
    ///
    /// `EIO` if the request failed otherwise, or the error of posting it.
    pub(crate) fn try_access(
        &self,
        write: bool,
        local: &DmaBuffer,
        len: usize,
        remote: (u64, u32),
    ) -> Result<bool> {
        let opcode = if write {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
        } else {
            bindings::ib_wr_opcode_IB_WR_RDMA_READ
        };
        let segment = LocalSegment {
            addr: local.dma_range_on(self.qp.device(), 0, len)?,
            len: u32::try_from(len).map_err(|_| EINVAL)?,
        };
        self.wait_for_keys()?;
        let slot = self.acquire_slot();
        let posted = self.keys.post_translated(remote, |remote| {
            // SAFETY: As in `execute_releasing`: `segment` is inside
            // `local`, DMA-mapped on this device, and `local` is borrowed
            // until `finish_status` has seen the completion of `slot`.
            unsafe {
                self.qp
                    .post_send(opcode, &segment, Some(remote), None, slot as u64)
            }
        });
        match self.finish_status(slot, posted)? {
            bindings::ib_wc_status_IB_WC_SUCCESS => Ok(true),
            bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR => Ok(false),
            _ => Err(EIO),
        }
    }

    /// Atomically adds `value` to the 8 bytes at `remote_addr` on the peer;
    /// returns the value they held before.
    ///
    /// `result` is an 8-byte scratch buffer of the caller.
    pub(crate) fn fetch_add(
        &self,
        result: &DmaBuffer,
        remote: (u64, u32),
        value: u64,
    ) -> Result<u64> {
        self.atomic(
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
            result,
            remote,
            value,
            0,
        )
    }

    /// Atomically replaces the 8 bytes at `remote_addr` on the peer with
    /// `new_value` if they hold `expected`; returns the value they held
    /// before (the swap happened if it equals `expected`).
    pub(crate) fn compare_swap(
        &self,
        result: &DmaBuffer,
        remote: (u64, u32),
        expected: u64,
        new_value: u64,
    ) -> Result<u64> {
        self.atomic(
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
            result,
            remote,
            expected,
            new_value,
        )
    }

    fn atomic(
        &self,
        opcode: bindings::ib_wr_opcode,
        result: &DmaBuffer,
        remote: (u64, u32),
        compare: u64,
        swap: u64,
    ) -> Result<u64> {
        let segment = LocalSegment {
            addr: result.dma_range_on(self.qp.device(), 0, 8)?,
            len: 8,
        };
        self.wait_for_keys()?;
        let slot = self.acquire_slot();
        let posted = self.keys.post_translated(remote, |remote| {
            // SAFETY: `segment` is 8 bytes of `result`, DMA-mapped on this
            // device (checked by `dma_range_on`). `result` is borrowed for
            // this whole call, so it stays allocated and mapped and none of
            // its `&mut self` methods (the only ones making references into
            // its memory) can run, and `finish` does not return before the
            // completion of `slot` (the `wr_id`) has been polled.
            unsafe {
                self.qp
                    .post_atomic(opcode, &segment, remote, compare, swap, slot as u64)
            }
        });
        self.finish(slot, posted)?;
        let mut old = [0u8; 8];
        result.read_bytes(0, &mut old)?;
        // The device stores the old value in host byte order.
        Ok(u64::from_ne_bytes(old))
    }

    /// Sends one message; it lands in a receive buffer of the peer.
    pub(crate) fn send_message(&self, message: &[u8; MESSAGE_SIZE]) -> Result {
        let slot = self.acquire_slot();
        // PANIC: `slot < SEND_SLOTS`, so the product is at most the length
        // of `send_ring`.
        let at = slot * MESSAGE_SIZE;
        let result = self.send_ring.write_bytes(at, message).and_then(|()| {
            let segment = LocalSegment {
                addr: self
                    .send_ring
                    .dma_range_on(self.qp.device(), at, MESSAGE_SIZE)?,
                len: MESSAGE_SIZE as u32,
            };
            // SAFETY: The slot's part of `send_ring` is DMA-mapped memory
            // of this connection on the QP's device (checked by `dma_range_on`)
            // and lives as long as the QP (field order); `send_ring` is never
            // borrowed mutably. This thread owns `slot` until `finish` has
            // seen the completion of the request (`wr_id` is the slot), so
            // nobody writes that part meanwhile.
            unsafe {
                self.qp.post_send(
                    bindings::ib_wr_opcode_IB_WR_SEND,
                    &segment,
                    None,
                    None,
                    slot as u64,
                )
            }
        });
        self.finish(slot, result)
    }

    fn execute(
        &self,
        opcode: bindings::ib_wr_opcode,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote: Option<(u64, u32)>,
    ) -> Result {
        self.execute_with_imm(opcode, local, at, len, remote, None)
    }

    fn execute_with_imm(
        &self,
        opcode: bindings::ib_wr_opcode,
        local: &DmaBuffer,
        at: usize,
        len: usize,
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
    ) -> Result {
        self.execute_releasing(opcode, local, (at, len), remote, imm, |_| {})
    }

    /// Posts one request on `len` bytes of `local` at `at` (the `span`),
    /// tells `once_posted` whether it was posted, and waits for its
    /// completion.
    fn execute_releasing(
        &self,
        opcode: bindings::ib_wr_opcode,
        local: &DmaBuffer,
        span: (usize, usize),
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        let (at, len) = span;
        let segment = match (
            local.dma_range_on(self.qp.device(), at, len),
            u32::try_from(len),
        ) {
            (Ok(addr), Ok(len)) => LocalSegment { addr, len },
            (Err(e), _) => {
                once_posted(false);
                return Err(e);
            }
            (_, Err(_)) => {
                once_posted(false);
                return Err(EINVAL);
            }
        };
        if remote.is_some() {
            if let Err(e) = self.wait_for_keys() {
                once_posted(false);
                return Err(e);
            }
        }
        let slot = self.acquire_slot();
        let post = |remote| {
            // SAFETY: `segment` is inside `local`, DMA-mapped on this device
            // (checked by `dma_range_on`). `local` is borrowed for this whole
            // call, so it stays allocated and mapped and none of its `&mut
            // self` methods (the only ones making references into its
            // memory) can run, and `finish` does not return before the
            // completion of `slot` (the `wr_id`) has been polled.
            unsafe {
                self.qp
                    .post_send(opcode, &segment, remote, imm, slot as u64)
            }
        };
        let posted = match remote {
            Some(remote) => self
                .keys
                .post_translated(remote, |remote| post(Some(remote))),
            None => post(None),
        };
        once_posted(posted.is_ok());
        self.finish(slot, posted)
    }

    /// Writes `bytes` (at most [`Connection::max_inline`]) to `remote` on the
    /// peer and hands `imm` to the peer's receive queue, without waiting for
    /// the completion: the device copies the bytes when the request is
    /// posted, and whoever reaps the completion frees its slot. `once_posted`
    /// is told whether the request was posted. A request that fails breaks
    /// the connection, as every failed request does; its flushed receives
    /// tell the node.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `bytes` are too long, and errors of posting.
    pub(crate) fn rdma_write_imm_inline(
        &self,
        bytes: &[u8],
        remote: (u64, u32),
        imm: u32,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        if !self.fits_inline(bytes.len()) {
            once_posted(false);
            return Err(EINVAL);
        }
        if let Err(e) = self.wait_for_keys() {
            once_posted(false);
            return Err(e);
        }
        let posted = self.post_detached(|slot| {
            self.keys.post_translated(remote, |remote| {
                self.qp.post_write_imm_inline(bytes, remote, imm, slot)
            })
        });
        once_posted(posted.is_ok());
        posted
    }

    /// Sends one message as [`Connection::send_message`] does, without
    /// waiting for its completion where the device takes it inline (else
    /// waiting): for a thread that serves many peers, which must not wait
    /// for each one's acknowledgment. A message that fails breaks the
    /// connection, as in [`Connection::rdma_write_imm_inline`].
    ///
    /// # Errors
    ///
    /// Errors of posting.
    pub(crate) fn post_message(&self, message: &[u8; MESSAGE_SIZE]) -> Result {
        if !self.fits_inline(MESSAGE_SIZE) {
            return self.send_message(message);
        }
        self.post_detached(|slot| self.qp.post_send_inline(message, slot))
    }

    /// Claims a slot and posts with `post` (given the slot as `wr_id`) a
    /// request that uses no memory after posting; whoever reaps its
    /// completion frees the slot.
    fn post_detached(&self, post: impl FnOnce(u64) -> Result) -> Result {
        // Completions of earlier requests nobody waits for free their slots.
        self.reap_send_completions();
        let slot = self.acquire_slot();
        // Before posting: the completion may be reaped at once.
        self.slots.detach(slot);
        let posted = post(slot as u64);
        if posted.is_err() {
            // No completion will come to free it.
            self.slots.take_detached(slot);
            self.release_slot(slot);
        } else {
            // A reaper that left before the slot was detached may have
            // handed the role to it: nobody waits on it, so hand it on.
            self.hand_on_reaping(Some(slot));
        }
        posted
    }

    /// Claims a send slot, sleeping while all are in use.
    fn acquire_slot(&self) -> usize {
        if let Some(slot) = self.slots.try_acquire() {
            return slot;
        }
        // Counted before the slots are looked at again, so a slot freed
        // from now on wakes this thread (see `wake_slot_waiters`).
        self.slot_waiters.fetch_add(1, Ordering::SeqCst);
        let mut claimed = None;
        self.send_cq
            .wait_until(Sleep::Uninterruptible, RECHECK_MS, || loop {
                self.reap_send_completions();
                claimed = self.slots.try_acquire();
                if claimed.is_some() {
                    return true;
                }
                if !self.send_cq.arm() {
                    return false;
                }
            });
        self.slot_waiters.fetch_sub(1, Ordering::SeqCst);
        // `wait_until` returns only once the closure claimed a slot.
        claimed.unwrap_or_default()
    }

    /// Wakes the threads waiting for a slot, if any, after one was freed.
    fn wake_slot_waiters(&self) {
        if self.slot_waiters.load(Ordering::SeqCst) > 0 {
            self.send_cq.wake_waiters();
        }
    }

    /// Frees `slot` and wakes any thread waiting for one. If nobody reaps,
    /// wakes the owner of another pending slot to do so.
    fn release_slot(&self, slot: usize) {
        self.slots.release(slot);
        self.wake_slot_waiters();
        self.hand_on_reaping(None);
    }

    /// Wakes the owner of a pending slot other than `except` if no waiter
    /// reaps. A waiter that leaves the reaping, or leaves while nobody
    /// reaps, calls this after giving up the role, so a waiter asleep on
    /// its slot is never left without a reaper: it either saw the role
    /// taken before it was given up, and is woken here, or sees it free.
    ///
    /// The role's flag, the slots' busy bits and the waiters' checks of the
    /// flag are sequentially consistent: a waiter that claimed its slot and
    /// then sees the role taken is seen as pending by a reaper that gives
    /// the role up and then looks for pending slots.
    fn hand_on_reaping(&self, except: Option<usize>) {
        if self.reaping.load(Ordering::SeqCst) {
            return;
        }
        if let Some(pending) = self.slots.pending_other_than(except) {
            // PANIC: `pending < SEND_SLOTS`, the length of `slot_events`.
            self.slot_events[pending].wake_all();
        }
    }

    /// Sleeps until the request in `slot` has completed: as the reaper if
    /// no other waiter is, else until the reaper completes the slot or
    /// gives up the role.
    fn sleep_until_completed(&self, slot: usize) {
        loop {
            if self
                .reaping
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                self.send_cq
                    .wait_until(Sleep::Uninterruptible, RECHECK_MS, || {
                        self.completed_or_armed(slot)
                    });
                self.reaping.store(false, Ordering::SeqCst);
                self.hand_on_reaping(Some(slot));
                return;
            }
            // PANIC: `slot < SEND_SLOTS` (see `CompletionSlots`), the length
            // of `slot_events`.
            self.slot_events[slot].wait_until(Sleep::Uninterruptible, RECHECK_MS, || {
                self.reap_send_completions();
                self.slots.status(slot) != PENDING || !self.reaping.load(Ordering::SeqCst)
            });
            if self.slots.status(slot) != PENDING {
                return;
            }
        }
    }

    /// Whether the request in `slot` has completed, after reaping what the
    /// send queue holds; arms the queue's event when it has not.
    ///
    /// Returns `false` only when the queue was armed while empty, so the
    /// caller may sleep until the event.
    fn completed_or_armed(&self, slot: usize) -> bool {
        loop {
            self.reap_send_completions();
            if self.slots.status(slot) != PENDING {
                return true;
            }
            if !self.send_cq.arm() {
                return false;
            }
        }
    }

    /// Waits for the completion of `slot` if its request was posted, then frees the slot.
    fn finish(&self, slot: usize, posted: Result) -> Result {
        if self.finish_status(slot, posted)? == bindings::ib_wc_status_IB_WC_SUCCESS {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// As [`Connection::finish`], returning the completion's status.
    fn finish_status(&self, slot: usize, posted: Result) -> Result<u32> {
        if let Err(e) = posted {
            self.release_slot(slot);
            return Err(e);
        }
        let spin_start = Ktime::ktime_get();
        loop {
            self.reap_send_completions();
            if self.slots.status(slot) != PENDING {
                break;
            }
            if (Ktime::ktime_get() - spin_start).to_ns() >= self.spin_ns {
                self.sleep_until_completed(slot);
                break;
            }
            core::hint::spin_loop();
        }
        let status = self.slots.status(slot);
        self.release_slot(slot);
        Ok(status)
    }

    /// Polls the send CQ unless another thread is already doing so, and
    /// wakes the owner of every slot it completed, and the reaper.
    fn reap_send_completions(&self) {
        if self
            .polling
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let mut wcs = [WorkCompletion::default(); POLL_BATCH];
        let mut reaped = false;
        loop {
            let n = self.send_cq.poll(&mut wcs);
            // PANIC: `poll` returns at most `POLL_BATCH`.
            for wc in &wcs[..n] {
                let Some(slot) = self.slots.complete(wc) else {
                    continue;
                };
                if self.slots.take_detached(slot) {
                    // This thread owns the slot now (see `CompletionSlots`).
                    self.slots.release(slot);
                    self.wake_slot_waiters();
                } else {
                    // PANIC: `complete` returns only indices of `status`,
                    // which has `SEND_SLOTS` entries like `slot_events`.
                    self.slot_events[slot].wake_all();
                }
            }
            reaped |= n > 0;
            if n < POLL_BATCH {
                break;
            }
        }
        self.polling.store(false, Ordering::Release);
        // The reaper sleeps on the event, not on its slot.
        if reaped {
            self.send_cq.wake_waiters();
        }
    }
}
