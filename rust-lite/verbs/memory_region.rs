// SPDX-License-Identifier: GPL-2.0

//! Memory regions peers can reach, and the queue pair that registers them.
//!
//! Peers reach a node's memory only through these regions: the device checks
//! every remote access against the region its key names and refuses anything
//! outside it. LITE registers few of them (one per segment of its remote
//! memory pool, one per registered user buffer), never one per LMR.

use core::{
    ptr::NonNull,
    sync::atomic::{AtomicU64, Ordering},
};
use kernel::{
    bindings, error::from_err_ptr, new_mutex, prelude::*, sync::Arc, sync::Mutex, time::Ktime,
};

use super::{
    check,
    cq::POLL_BATCH,
    qp::{QueuePair, QueueSizes, RemoteEnd},
    region_keys::{KeyRegistry, KeyedRegion},
    CompletionQueue, PortConfig, ProtectionDomain, WorkCompletion, PAGE_SIZE,
};

// Only a pointer to `ib_mr` crosses; bindgen gives it an empty member.
#[allow(improper_ctypes)]
extern "C" {
    /// `lite_helpers.c`: maps `count` DMA ranges of `len` bytes into the
    /// fast-registration region `mr`, addressed from `iova` on.
    fn lite_map_mr(
        mr: *mut bindings::ib_mr,
        dma: *const u64,
        count: u32,
        len: u32,
        page_size: u32,
        iova: u64,
    ) -> core::ffi::c_int;
}

/// What peers may do in a region: read, write and atomics.
const REMOTE_ACCESS: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

/// How long a registration may take before the registrar gives up on it. The
/// device executes it locally, without the network, in microseconds.
const REGISTER_TIMEOUT_MS: u32 = 5000;

/// Memory regions alive on this node, for `/sys/kernel/debug/lite/resources`.
static LIVE_REGIONS: AtomicU64 = AtomicU64::new(0);

/// Number of memory regions registered on this node and not yet released.
pub(crate) fn live_memory_regions() -> u64 {
    LIVE_REGIONS.load(Ordering::Relaxed)
}

/// A registered memory region: peers holding its remote key can read, write
/// and use atomics on its bytes, from its I/O virtual address on, and
/// nowhere else.
///
/// # Invariants
///
/// `ptr` is a fast-registration memory region allocated in `pd` and owned by
/// this object. Once [`Registrar::register`] returns it, the region is
/// registered over memory its owner keeps DMA-mapped until the region is
/// dropped, and its keys and address never change.
pub(crate) struct MemoryRegion {
    ptr: NonNull<bindings::ib_mr>,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: A memory region is not tied to a thread: it may be used and
// released (`drop`) from any thread in process context.
unsafe impl Send for MemoryRegion {}
// SAFETY: `&self` methods only read the key and address, fixed once the
// registration completed (type invariant).
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Allocates an unregistered region for up to `pages` pages.
    fn alloc(pd: &Arc<ProtectionDomain>, pages: u32) -> Result<Self> {
        // SAFETY: `pd` is a valid PD (its type invariant); the type and page
        // count are plain values checked by the core and the provider.
        let mr = from_err_ptr(unsafe {
            bindings::ib_alloc_mr(pd.as_ptr(), bindings::ib_mr_type_IB_MR_TYPE_MEM_REG, pages)
        })?;
        let ptr = NonNull::new(mr).ok_or(ENOMEM)?;
        LIVE_REGIONS.fetch_add(1, Ordering::Relaxed);
        // INVARIANT: Allocated in `pd` above and owned from here on.
        Ok(MemoryRegion {
            ptr,
            _pd: pd.clone(),
        })
    }

    /// The key peers name the region by.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: `ptr` is valid (type invariant); the key is fixed once the
        // region is registered.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }

    /// Length of the region in bytes.
    pub(crate) fn len(&self) -> u64 {
        // SAFETY: `ptr` is valid (type invariant); the length is fixed once
        // the region is registered.
        unsafe { (*self.ptr.as_ptr()).length }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: The region is owned by this object (type invariant), and
        // nothing of this node uses it any more. The provider waits for
        // accesses in progress before it frees the region; later ones fail
        // at the device, as the key no longer names a region.
        unsafe { bindings::ib_dereg_mr_user(self.ptr.as_ptr(), core::ptr::null_mut()) };
        LIVE_REGIONS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Registers memory regions: a queue pair connected to itself, on which the
/// node posts its registration work requests (the verbs API registers
/// kernel memory only through a queue pair's send queue).
///
/// # Invariants
///
/// The queue pair in `qp` is connected to itself (ready to send) and has
/// no work request outstanding while nobody holds `qp`.
#[pin_data]
pub(crate) struct Registrar {
    /// One registration at a time: the queue pair's completions are then
    /// always the current registration's.
    /// Lock class `lite:registrar`: see the lock order in [`crate::internal::core`].
    #[pin]
    qp: Mutex<QueuePair>,
    cq: Arc<CompletionQueue>,
    pd: Arc<ProtectionDomain>,
    port: PortConfig,
    /// The node's regions whose keys change together.
    keys: Arc<KeyRegistry>,
}

impl Registrar {
    /// Creates the queue pair in `pd` on `port` and connects it to itself;
    /// regions it registers join `keys`.
    pub(crate) fn new(
        pd: &Arc<ProtectionDomain>,
        port: &PortConfig,
        keys: &Arc<KeyRegistry>,
    ) -> Result<impl PinInit<Self, Error>> {
        let cq = CompletionQueue::new(pd.device().clone(), 8)?;
        let qp = Self::loopback(pd, &cq, port)?;
        let (pd, port, keys) = (pd.clone(), *port, keys.clone());
        Ok(try_pin_init!(Registrar {
            qp <- new_mutex!(qp, "lite:registrar"),
            cq,
            pd,
            port,
            keys,
        }? Error))
    }

    /// Registers memory as [`Registrar::register`] does, as a region whose
    /// key changes with the node's others ([`Registrar::rekey`]).
    ///
    /// # Errors
    ///
    /// As [`Registrar::register`]; `EAGAIN` if the device kept giving keys
    /// that peers translate.
    ///
    /// # Safety
    ///
    /// As for [`Registrar::register`], until the returned region is dropped.
    pub(super) unsafe fn register_keyed(
        &self,
        dma: &[u64],
        len: usize,
        page_size: usize,
        iova: u64,
    ) -> Result<KeyedRegion> {
        // SAFETY: The caller's guarantees, passed on.
        unsafe { self.keys.register(self, dma, len, page_size, iova) }
    }

    /// Replaces the key of every region of the node
    /// ([`KeyRegistry::rekey`]).
    pub(crate) fn rekey(&self) -> Result {
        self.keys.rekey(self)
    }

    /// The node's regions whose keys change together.
    pub(crate) fn keys(&self) -> &Arc<KeyRegistry> {
        &self.keys
    }

    fn loopback(
        pd: &Arc<ProtectionDomain>,
        cq: &Arc<CompletionQueue>,
        port: &PortConfig,
    ) -> Result<QueuePair> {
        let sizes = QueueSizes {
            send: 4,
            recv: 1,
            inline: 0,
        };
        let qp = QueuePair::new(pd, cq, cq, sizes, port)?;
        let itself = RemoteEnd {
            qpn: qp.qpn(),
            psn: qp.psn(),
            lid: port.lid,
            mtu: port.mtu_bytes(),
            gid: port.gid,
        };
        qp.connect(&itself, port)?;
        Ok(qp)
    }

    /// Most pages one region maps on this device.
    pub(crate) fn max_region_pages(&self) -> usize {
        self.pd.device().max_region_pages() as usize
    }

    /// Registers `dma.len()` ranges of `len` bytes each, a whole number of
    /// `page_size` pages (a power of two, at least [`PAGE_SIZE`], and each
    /// range aligned to it), as one region that peers address from `iova`
    /// on, the ranges back to back.
    ///
    /// # Errors
    ///
    /// `EINVAL` for bad sizes or more pages than the device maps in one
    /// region, `EIO` if the device refused the registration, `ETIMEDOUT` if
    /// it did not complete in time, `ENOMEM`.
    ///
    /// # Safety
    ///
    /// Every range `[dma[i], dma[i] + len)` must be memory DMA-mapped on the
    /// PD's device that stays allocated and mapped until the returned region
    /// is dropped. Peers may read and write it at any time meanwhile, so no
    /// Rust reference may cover it.
    pub(super) unsafe fn register(
        &self,
        dma: &[u64],
        len: usize,
        page_size: usize,
        iova: u64,
    ) -> Result<MemoryRegion> {
        let count = u32::try_from(dma.len()).map_err(|_| EINVAL)?;
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        let page32 = u32::try_from(page_size).map_err(|_| EINVAL)?;
        if count == 0
            || !page_size.is_power_of_two()
            || page_size < PAGE_SIZE
            || len == 0
            || len % page_size != 0
        {
            return Err(EINVAL);
        }
        let pages = (len / page_size)
            .checked_mul(dma.len())
            .filter(|&p| p <= self.max_region_pages())
            .and_then(|p| u32::try_from(p).ok())
            .ok_or(EINVAL)?;
        let region = MemoryRegion::alloc(&self.pd, pages)?;
        // SAFETY: `region.ptr` is a fast-registration region owned here and
        // not registered yet; `dma` holds `count` addresses, which the helper
        // only reads during the call.
        check(unsafe {
            lite_map_mr(
                region.ptr.as_ptr(),
                dma.as_ptr(),
                count,
                len32,
                page32,
                iova,
            )
        })?;
        let mut qp = self.qp.lock();
        // SAFETY: `qp` is connected and idle (type invariant, lock held);
        // the region is mapped over memory that stays mapped for as long as
        // the region lives (safety requirements), and the region outlives
        // the work request: it is only dropped once the request completed,
        // or once the queue pair was destroyed (below).
        unsafe { qp.post_reg_mr(region.ptr.as_ptr(), REMOTE_ACCESS, 0)? };
        let outcome = self.wait_completion();
        if outcome != Some(true) {
            // A failed or stuck request leaves the queue pair in the error
            // state, or busy: replace it. Destroying the old one ends the
            // device's use of the region, which may then go.
            match Self::loopback(&self.pd, &self.cq, &self.port) {
                Ok(fresh) => drop(core::mem::replace(&mut *qp, fresh)),
                Err(e) => {
                    pr_err!("cannot replace the registration queue pair ({:?})\n", e);
                    if outcome.is_none() {
                        // The device may still use the region: keep it.
                        core::mem::forget(region);
                        return Err(crate::errno::ETIMEDOUT());
                    }
                }
            }
            // Completions of the old queue pair that are left.
            self.drain();
        }
        match outcome {
            Some(true) => Ok(region),
            Some(false) => Err(EIO),
            None => {
                pr_err!("registering a memory region timed out\n");
                Err(crate::errno::ETIMEDOUT())
            }
        }
    }

    /// Waits for the completion of the request just posted: whether it
    /// succeeded, or `None` if none came within [`REGISTER_TIMEOUT_MS`].
    fn wait_completion(&self) -> Option<bool> {
        let mut completions = [WorkCompletion::default(); POLL_BATCH];
        let start = Ktime::ktime_get();
        let mut polls = 0u32;
        loop {
            if self.cq.poll(&mut completions) > 0 {
                // PANIC: `poll` filled at least one entry of the array.
                return Some(completions[0].succeeded());
            }
            if (Ktime::ktime_get() - start).to_ms() >= i64::from(REGISTER_TIMEOUT_MS) {
                return None;
            }
            // The device usually executes it at once: look again a few
            // times before sleeping.
            polls = polls.saturating_add(1);
            if polls < 64 {
                crate::sys::sched::cond_resched();
            } else {
                crate::sys::sched::sleep_uninterruptible_ms(1);
            }
        }
    }

    /// Takes whatever completions are left in the queue.
    fn drain(&self) {
        let mut completions = [WorkCompletion::default(); POLL_BATCH];
        while self.cq.poll(&mut completions) > 0 {}
    }
}
