// SPDX-License-Identifier: GPL-2.0

//! LITE memory regions (LMRs): memory spread over chunks on any nodes.

use crate::internal::node_id::NodeId;
use core::{
    mem::MaybeUninit,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
};
use kernel::{
    init::InPlaceWrite,
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex, UniqueArc},
};

use super::{chunk::Geometry, permission::Permission};
use crate::{
    errno,
    internal::{core::chunk_memory::ChunkMemory, quota::Charge},
};

/// `lite_alloc_remote` flag: an 8-byte LMR for atomics.
pub(crate) const ALLOC_ATOMIC: u32 = 0x1;

/// Every flag `lite_alloc_remote` accepts.
pub(crate) const ALLOC_FLAGS: u32 = ALLOC_ATOMIC;

/// Size an atomic LMR must have.
pub(crate) const ATOMIC_SIZE: u64 = 8;

/// Where a chunk lives and how to reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// The node holding the chunk.
    pub(crate) node: NodeId,
    /// The chunk's id in that node's memory store.
    pub(crate) chunk_id: u64,
    /// Remote address of the chunk's first byte.
    pub(crate) addr: u64,
    /// Remote key covering the chunk.
    pub(crate) rkey: u32,
}

/// One chunk of an LMR.
///
/// A chunk on another node may move to a third one (when the node holding
/// it leaves the cluster): its place changes only through
/// [`ChunkRef::relocate`], which needs the LMR paused, so an operation,
/// which runs while it holds a use of the LMR, sees one place throughout.
pub(crate) struct ChunkRef {
    node: AtomicU32,
    chunk_id: AtomicU64,
    addr: AtomicU64,
    rkey: AtomicU32,
    /// The node holding the chunk went (died or left without the chunk
    /// being moved): its bytes are gone, and the place must never be used
    /// again, since a node rejoining under the same id holds other memory
    /// there. Never cleared.
    lost: AtomicBool,
    /// Length in bytes.
    pub(crate) len: u64,
    /// The memory, when this node holds it (such a chunk never moves).
    pub(crate) local: Option<Arc<ChunkMemory>>,
}

impl ChunkRef {
    /// A chunk of `len` bytes at `place`, held here if `local`.
    pub(crate) fn new(place: Place, len: u64, local: Option<Arc<ChunkMemory>>) -> Self {
        ChunkRef {
            node: AtomicU32::new(place.node.get()),
            chunk_id: AtomicU64::new(place.chunk_id),
            addr: AtomicU64::new(place.addr),
            rkey: AtomicU32::new(place.rkey),
            lost: AtomicBool::new(false),
            len,
            local,
        }
    }

    /// A chunk of `len` bytes whose node went before this node learned of
    /// the chunk (a mapping of an LMR that lost it).
    pub(crate) fn new_lost(len: u64) -> Self {
        let chunk = ChunkRef::new(
            Place {
                node: NodeId::NONE,
                chunk_id: 0,
                addr: 0,
                rkey: 0,
            },
            len,
            None,
        );
        chunk.lost.store(true, Ordering::Release);
        chunk
    }

    /// The node to reach for the chunk's bytes.
    ///
    /// # Errors
    ///
    /// `EHOSTDOWN` if that node went since: the bytes are gone.
    pub(crate) fn reach(&self) -> Result<NodeId> {
        if self.lost.load(Ordering::Acquire) {
            return Err(errno::EHOSTDOWN());
        }
        Ok(self.node())
    }

    /// Whether the node holding the chunk went since.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    // Relaxed loads: a place changes only while the LMR is paused, and
    // pausing and using the LMR synchronise through its users' lock.

    /// The node holding the chunk.
    pub(crate) fn node(&self) -> NodeId {
        NodeId::new(self.node.load(Ordering::Relaxed))
    }

    /// The chunk's id in that node's memory store.
    pub(crate) fn chunk_id(&self) -> u64 {
        self.chunk_id.load(Ordering::Relaxed)
    }

    /// Remote address of the chunk's first byte.
    pub(crate) fn addr(&self) -> u64 {
        self.addr.load(Ordering::Relaxed)
    }

    /// Remote key covering the chunk.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey.load(Ordering::Relaxed)
    }

    /// Where the chunk lives.
    pub(crate) fn place(&self) -> Place {
        Place {
            node: self.node(),
            chunk_id: self.chunk_id(),
            addr: self.addr(),
            rkey: self.rkey(),
        }
    }

    /// Moves the chunk to `place`, while `_paused` proves that no
    /// operation uses its LMR.
    pub(crate) fn relocate(&self, place: Place, _paused: &impl Paused) {
        self.node.store(place.node.get(), Ordering::Relaxed);
        self.chunk_id.store(place.chunk_id, Ordering::Relaxed);
        self.addr.store(place.addr, Ordering::Relaxed);
        self.rkey.store(place.rkey, Ordering::Relaxed);
    }
}

/// Where an LMR comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Allocated on this node's behalf (its chunks may live anywhere).
    Allocated,
    /// User memory of a process on this node, pinned.
    Registered,
    /// Kernel memory of a kernel caller on this node.
    KernelRegistered,
    /// A mapping of LMR `lmr_id` owned by node `owner`.
    Mapped {
        /// The owner node.
        owner: NodeId,
        /// The LMR's id on the owner.
        lmr_id: u64,
    },
}

/// Operations running on an LMR, and why it was closed.
struct Users {
    active: u32,
    closed: Option<Error>,
    /// An [`LmrPause`] exists: new operations wait.
    paused: bool,
}

/// An LMR: a size, a layout and the chunks holding its bytes.
#[pin_data]
pub(crate) struct Lmr {
    /// Size in bytes.
    pub(crate) size: u64,
    /// How bytes map to chunks.
    pub(crate) geometry: Geometry,
    /// Every permission the LMR allows (a handle never has more, ADMIN aside).
    pub(crate) permission: Permission,
    /// Where it comes from.
    pub(crate) origin: Origin,
    /// The chunks, in address order.
    pub(crate) chunks: KVec<ChunkRef>,
    /// What the LMR holds of its creator's quotas (nothing for a mapping).
    /// It goes back when the LMR goes: a handle of this node that mapped
    /// the LMR by name keeps its local chunks alive after it is freed.
    /// Lock class `lite:lmr_charge`: see the lock order in [`crate::internal::core`].
    #[pin]
    charge: Mutex<Charge>,
    /// Nodes that mapped this LMR by name, one bit per node id.
    mapped_by: AtomicU64,
    #[pin]
    users: Mutex<Users>,
    #[pin]
    idle: CondVar,
}

/// Proof that an operation is running on an LMR; the LMR is not closed
/// while one exists.
pub(crate) struct LmrUse<'a> {
    lmr: &'a Lmr,
}

impl Drop for LmrUse<'_> {
    fn drop(&mut self) {
        self.lmr.end();
    }
}

/// Proof that no operation runs on an LMR and none starts: its chunks may
/// move. New operations go on when it is dropped.
pub(crate) struct LmrPause<'a> {
    lmr: &'a Lmr,
}

impl Drop for LmrPause<'_> {
    fn drop(&mut self) {
        self.lmr.end_pause();
    }
}

/// Uses of `a` and `b` at once (one use if they are the same LMR), for an
/// operation between two LMRs. It never waits out a pause of one while
/// holding a use of the other, which the pause could be waiting for.
///
/// # Errors
///
/// As [`Lmr::begin`].
pub(crate) fn begin_both<'a>(a: &'a Lmr, b: &'a Lmr) -> Result<(LmrUse<'a>, Option<LmrUse<'a>>)> {
    if core::ptr::eq(a, b) {
        return Ok((a.begin()?, None));
    }
    loop {
        let first = a.begin()?;
        if let Some(second) = b.try_begin()? {
            return Ok((first, Some(second)));
        }
        drop(first);
        b.wait_unpaused()?;
    }
}

/// Proof that an LMR is paused: no operation runs on it and none starts.
pub(crate) trait Paused {}

impl Paused for LmrPause<'_> {}

/// An [`LmrPause`] that owns a reference to its LMR, kept by a node mapping
/// another node's LMR while the owner moves its chunks (across messages).
pub(crate) struct HeldPause {
    lmr: Arc<Lmr>,
}

impl HeldPause {
    /// The paused LMR.
    pub(crate) fn lmr(&self) -> &Arc<Lmr> {
        &self.lmr
    }
}

impl Paused for HeldPause {}

impl Drop for HeldPause {
    fn drop(&mut self) {
        self.lmr.end_pause();
    }
}

/// An [`LmrUse`] that owns a reference to its LMR, for operations that
/// outlive the call that started them.
pub(crate) struct OwnedLmrUse {
    lmr: Arc<Lmr>,
}

impl OwnedLmrUse {
    /// The LMR in use.
    pub(crate) fn lmr(&self) -> &Lmr {
        &self.lmr
    }
}

impl Drop for OwnedLmrUse {
    fn drop(&mut self) {
        self.lmr.end();
    }
}

/// What an LMR is made of, given to [`Lmr::new`].
pub(crate) struct LmrParts {
    /// Size in bytes.
    pub(crate) size: u64,
    /// How its bytes lie in its chunks.
    pub(crate) geometry: Geometry,
    /// What the holder of the handle may do.
    pub(crate) permission: Permission,
    /// Whether it was allocated here, registered here or mapped.
    pub(crate) origin: Origin,
    /// Its chunks, in order.
    pub(crate) chunks: KVec<ChunkRef>,
    /// What it holds of its creator's quotas.
    pub(crate) charge: Charge,
}

/// Memory for an LMR, reserved before its chunks are allocated so that
/// creating it over them cannot fail and strand them.
pub(crate) struct LmrSlot(UniqueArc<MaybeUninit<Lmr>>);

impl Lmr {
    /// Reserves memory for one LMR.
    pub(crate) fn reserve() -> Result<LmrSlot> {
        Ok(LmrSlot(UniqueArc::new_uninit(GFP_KERNEL)?))
    }

    /// Creates the LMR `parts` describe in `slot`.
    pub(crate) fn new(slot: LmrSlot, parts: LmrParts) -> Arc<Self> {
        let LmrParts {
            size,
            geometry,
            permission,
            origin,
            chunks,
            charge,
        } = parts;
        let initialised = slot.0.write_pin_init(pin_init!(Lmr {
            size,
            geometry,
            permission,
            origin,
            chunks,
            charge <- new_mutex!(charge, "lite:lmr_charge"),
            mapped_by: AtomicU64::new(0),
            users <- new_mutex!(
                Users { active: 0, closed: None, paused: false },
                "lite:lmr_users"
            ),
            idle <- new_condvar!("lite:lmr_idle"),
        }));
        match initialised {
            Ok(lmr) => lmr.into(),
            Err(never) => match never {},
        }
    }

    /// Takes what the LMR holds of its creator's quotas, for memory kept
    /// beyond the LMR (see [`RemoteMemory::keep_charge`]).
    ///
    /// [`RemoteMemory::keep_charge`]: super::RemoteMemory::keep_charge
    pub(crate) fn take_charge(&self) -> Charge {
        core::mem::replace(&mut *self.charge.lock(), Charge::none())
    }

    /// Registers a running operation.
    ///
    /// # Errors
    ///
    /// The error the LMR was closed with.
    pub(crate) fn begin(&self) -> Result<LmrUse<'_>> {
        self.enter()?;
        Ok(LmrUse { lmr: self })
    }

    /// [`Lmr::begin`] for an operation that outlives its caller.
    pub(crate) fn begin_owned(self: &Arc<Self>) -> Result<OwnedLmrUse> {
        self.enter()?;
        Ok(OwnedLmrUse { lmr: self.clone() })
    }

    /// [`Lmr::begin`] that does not wait out a pause: `None` while paused.
    fn try_begin(&self) -> Result<Option<LmrUse<'_>>> {
        let mut users = self.users.lock();
        if let Some(reason) = users.closed {
            return Err(reason);
        }
        if users.paused {
            return Ok(None);
        }
        // PANIC: as in `enter`.
        users.active += 1;
        Ok(Some(LmrUse { lmr: self }))
    }

    /// Waits until the LMR is not paused.
    fn wait_unpaused(&self) -> Result {
        let mut users = self.users.lock();
        loop {
            if let Some(reason) = users.closed {
                return Err(reason);
            }
            if !users.paused {
                return Ok(());
            }
            if self.idle.wait_interruptible(&mut users) {
                return Err(ERESTARTSYS);
            }
        }
    }

    fn enter(&self) -> Result {
        let mut users = self.users.lock();
        loop {
            if let Some(reason) = users.closed {
                return Err(reason);
            }
            if !users.paused {
                break;
            }
            // A pause moves chunks between peers: it is bounded by their
            // transfers, which fail once a peer is gone.
            if self.idle.wait_interruptible(&mut users) {
                return Err(ERESTARTSYS);
            }
        }
        // PANIC: each active use is held by a running call or by one of at
        // most `MAX_ASYNC_OPS` asynchronous operations per process: far
        // fewer than `u32::MAX`.
        users.active += 1;
        Ok(())
    }

    fn end(&self) {
        let mut users = self.users.lock();
        // PANIC: `end` runs once per use, when it is dropped, after `enter`
        // counted it.
        users.active -= 1;
        if users.active == 0 {
            self.idle.notify_all();
        }
    }

    /// Refuses new operations with `reason` and waits for running ones to
    /// finish. Returns whether this call closed it (false if it already was).
    pub(crate) fn close(&self, reason: Error) -> bool {
        let mut users = self.users.lock();
        let first = users.closed.is_none();
        if first {
            users.closed = Some(reason);
            // Operations waiting out a pause fail now.
            self.idle.notify_all();
        }
        while users.active > 0 {
            self.idle.wait(&mut users);
        }
        first
    }

    /// Makes new operations wait and waits for running ones to finish, so
    /// that chunks can move; they go on when the returned pause is dropped.
    ///
    /// # Errors
    ///
    /// The error the LMR was closed with, or `EBUSY` if it is paused
    /// already.
    pub(crate) fn pause(&self) -> Result<LmrPause<'_>> {
        self.stop_users()?;
        Ok(LmrPause { lmr: self })
    }

    /// [`Lmr::pause`] with a pause that owns a reference to the LMR.
    ///
    /// # Errors
    ///
    /// As [`Lmr::pause`].
    pub(crate) fn hold_paused(self: &Arc<Self>) -> Result<HeldPause> {
        self.stop_users()?;
        Ok(HeldPause { lmr: self.clone() })
    }

    /// Lets operations start again once a pause ends.
    fn end_pause(&self) {
        self.users.lock().paused = false;
        self.idle.notify_all();
    }

    /// Marks the LMR paused and waits for its running operations.
    fn stop_users(&self) -> Result {
        let mut users = self.users.lock();
        if let Some(reason) = users.closed {
            return Err(reason);
        }
        if users.paused {
            return Err(EBUSY);
        }
        users.paused = true;
        while users.active > 0 {
            self.idle.wait(&mut users);
        }
        Ok(())
    }

    /// Marks the chunks held by `node`, which went, as lost; returns how
    /// many.
    pub(crate) fn lose_chunks_on(&self, node: NodeId) -> usize {
        let mut lost = 0;
        for chunk in self.chunks.iter() {
            if chunk.local.is_none() && chunk.node() == node {
                chunk.lost.store(true, Ordering::Release);
                // PANIC: at most one per chunk.
                lost += 1;
            }
        }
        lost
    }

    /// Remembers that `node` maps this LMR, if it takes new operations now
    /// (without waiting): checked together, so a pause that moves chunks
    /// either sees the new mapper or is seen by it.
    ///
    /// # Errors
    ///
    /// The error the LMR was closed with, or `EAGAIN` while it is paused.
    pub(crate) fn add_mapper_if_open(&self, node: NodeId) -> Result {
        let users = self.users.lock();
        if let Some(reason) = users.closed {
            return Err(reason);
        }
        if users.paused {
            return Err(EAGAIN);
        }
        if let Some(bit) = node.bit() {
            self.mapped_by.fetch_or(bit, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Nodes that mapped this LMR, one bit per node id.
    pub(crate) fn mappers(&self) -> u64 {
        self.mapped_by.load(Ordering::Acquire)
    }
}
