// SPDX-License-Identifier: GPL-2.0

//! Regions whose keys can be replaced.
//!
//! Every region peers can reach is named by the key of its first
//! registration, its *identity*: that is the key LMR descriptors, chunk
//! tables, ring and lock addresses carry, wherever they went. When a peer is
//! fenced, the node registers each region again over the same memory, under
//! a new key ([`KeyRegistry::rekey`]), tells its live peers which key now
//! stands for each identity (their [`RemoteKeys`](super::RemoteKeys)
//! translate at every access), and once they confirmed, releases the
//! registrations of the old keys ([`KeyRegistry::release_replaced`]). From
//! then on the keys a fenced peer kept name nothing on the device.
//!
//! Identities peers translate are never given to a new region, so that its
//! accesses are not sent elsewhere; they are kept for the life of the node
//! (one word per region that lived through a change of keys).

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::memory_region::{MemoryRegion, Registrar};

/// Registrations a new region tries before giving up on getting a key that
/// no peer translates.
const KEY_ATTEMPTS: usize = 4;

/// Where a region's memory lies, to register it again.
struct Layout {
    dma: KVec<u64>,
    len: usize,
    page_size: usize,
    iova: u64,
}

/// The registrations of one region.
struct Registrations {
    /// The registration peers reach the memory through; `None` once the
    /// region's owner released it.
    current: Option<MemoryRegion>,
    /// The registrations of keys replaced, kept until the peers confirmed
    /// the new one.
    replaced: KVec<MemoryRegion>,
}

/// One region, shared by its owner and the registry.
///
/// # Invariants
///
/// While `registrations.current` is `Some`, the memory `layout` describes
/// is DMA-mapped and allocated: the owning [`KeyedRegion`] empties
/// `registrations` before it lets the memory go. Every registration in
/// `registrations` covers that memory from `layout.iova` on.
#[pin_data]
struct RegionCell {
    identity: u32,
    layout: Layout,
    /// Lock class `lite:region_registrations`: see the lock order in [`crate::internal::core`].
    #[pin]
    registrations: Mutex<Registrations>,
}

/// A region peers can reach under its identity, whatever its key on the
/// device is now.
///
/// # Invariants
///
/// `cell` is in `registry.cells` until this object is dropped; `len` is the
/// length of every registration of the cell.
pub(crate) struct KeyedRegion {
    cell: Arc<RegionCell>,
    registry: Arc<KeyRegistry>,
    len: u64,
}

impl KeyedRegion {
    /// The key peers name the region by.
    pub(crate) fn identity(&self) -> u32 {
        self.cell.identity
    }

    /// The remote address and identity of `[at, at + len)` of the region,
    /// after checking that the range is inside it.
    pub(crate) fn remote_range(&self, at: u64, len: u64) -> Result<(u64, u32)> {
        match at.checked_add(len) {
            Some(end) if end <= self.len => Ok((
                self.cell.layout.iova.checked_add(at).ok_or(EINVAL)?,
                self.cell.identity,
            )),
            _ => Err(EINVAL),
        }
    }
}

impl Drop for KeyedRegion {
    fn drop(&mut self) {
        // Waits for a rekey registering this region; afterwards nothing
        // registers it again (`current` is `None`).
        let (current, replaced) = {
            let mut registrations = self.cell.registrations.lock();
            (
                registrations.current.take(),
                core::mem::take(&mut registrations.replaced),
            )
        };
        // Deregistered here, before the owner lets the memory go.
        drop(current);
        drop(replaced);
        self.registry.forget(&self.cell);
    }
}

/// The regions of a node, and the identities its peers translate.
#[pin_data]
pub(crate) struct KeyRegistry {
    /// Live regions; a released region leaves a free entry for the next.
    /// Lock class `lite:region_keys`: see the lock order in [`crate::internal::core`].
    #[pin]
    cells: Mutex<KVec<Option<Arc<RegionCell>>>>,
    /// Identities peers may hold a translation for: a new region must not
    /// be registered under one of them, or peers would send its accesses
    /// elsewhere.
    #[pin]
    translated: Mutex<KVec<u32>>,
}

/// Identity and current key of every region whose key was replaced,
/// ascending by identity.
pub(crate) type KeyTable = KVec<(u32, u32)>;

impl KeyRegistry {
    /// An empty registry.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(KeyRegistry {
                cells <- new_mutex!(KVec::new(), "lite:region_keys"),
                translated <- new_mutex!(KVec::new(), "lite:translated_keys"),
            }),
            GFP_KERNEL,
        )
    }

    /// Registers `dma.len()` ranges of `len` bytes each as one region, as
    /// [`Registrar::register`] does, under a key no peer translates.
    ///
    /// # Errors
    ///
    /// The registrar's errors; `EAGAIN` if every key the device gave is one
    /// peers translate.
    ///
    /// # Safety
    ///
    /// As for [`Registrar::register`], until the returned region is dropped.
    pub(super) unsafe fn register(
        self: &Arc<Self>,
        registrar: &Registrar,
        dma: &[u64],
        len: usize,
        page_size: usize,
        iova: u64,
    ) -> Result<KeyedRegion> {
        let mut layout_dma = KVec::with_capacity(dma.len(), GFP_KERNEL)?;
        layout_dma.extend_from_slice(dma, GFP_KERNEL)?;
        // Registrations under translated keys, held until a free key came
        // so that the device does not hand the same one out again.
        let mut refused = KVec::with_capacity(KEY_ATTEMPTS, GFP_KERNEL)?;
        for _ in 0..KEY_ATTEMPTS {
            // SAFETY: The caller's guarantees for `dma` hold until the
            // returned region is dropped, which drops this registration.
            let region = unsafe { registrar.register(dma, len, page_size, iova)? };
            if self.is_translated(region.rkey()) {
                // Room for every attempt was reserved above.
                refused.push(region, GFP_KERNEL)?;
                continue;
            }
            let region_len = region.len();
            let cell = Arc::pin_init(
                pin_init!(RegionCell {
                    identity: region.rkey(),
                    layout: Layout {
                        dma: layout_dma,
                        len,
                        page_size,
                        iova,
                    },
                    registrations <- new_mutex!(
                        Registrations {
                            current: Some(region),
                            replaced: KVec::new(),
                        },
                        "lite:region_registrations"
                    ),
                }),
                GFP_KERNEL,
            )?;
            self.adopt(cell.clone())?;
            // INVARIANT: `cell` was added to `cells` just above.
            return Ok(KeyedRegion {
                cell,
                registry: self.clone(),
                len: region_len,
            });
        }
        Err(EAGAIN)
    }

    fn is_translated(&self, key: u32) -> bool {
        self.translated.lock().contains(&key)
    }

    fn adopt(&self, cell: Arc<RegionCell>) -> Result {
        let mut cells = self.cells.lock();
        match cells.iter_mut().find(|entry| entry.is_none()) {
            Some(free) => *free = Some(cell),
            None => cells.push(Some(cell), GFP_KERNEL)?,
        }
        Ok(())
    }

    fn forget(&self, cell: &Arc<RegionCell>) {
        let mut cells = self.cells.lock();
        if let Some(entry) = cells.iter_mut().find(|entry| {
            entry
                .as_ref()
                .is_some_and(|c| core::ptr::eq::<RegionCell>(&**c, &**cell))
        }) {
            *entry = None;
        }
    }

    /// The regions alive now.
    fn live_cells(&self) -> Result<KVec<Arc<RegionCell>>> {
        let count = self.cells.lock().len();
        // Allocated before the regions are looked at; regions in entries
        // added meanwhile are left out.
        let mut live = KVec::with_capacity(count, GFP_KERNEL)?;
        let cells = self.cells.lock();
        for cell in cells.iter().take(count).flatten() {
            // Room for `count` entries was reserved above.
            live.push(cell.clone(), GFP_KERNEL)?;
        }
        Ok(live)
    }

    /// Registers every region again, under new keys, keeping the old
    /// registrations until [`KeyRegistry::release_replaced`]; from now on
    /// no new region gets the identity of one whose key changed.
    ///
    /// A region that cannot be registered again keeps its key (an error is
    /// logged).
    pub(crate) fn rekey(&self, registrar: &Registrar) -> Result {
        for cell in self.live_cells()?.iter() {
            let mut registrations = cell.registrations.lock();
            if registrations.current.is_none() {
                continue;
            }
            registrations.replaced.reserve(1, GFP_KERNEL)?;
            let layout = &cell.layout;
            // SAFETY: `current` is `Some`, so the memory stays DMA-mapped
            // and allocated until the owner empties `registrations` (type
            // invariant), which drops this registration too; the owner only
            // reaches its bytes through raw copies (its own registration's
            // requirement).
            let fresh = unsafe {
                registrar.register(&layout.dma, layout.len, layout.page_size, layout.iova)
            };
            match fresh {
                Ok(fresh) => {
                    if let Some(old) = registrations.current.replace(fresh) {
                        // Room was reserved above.
                        registrations.replaced.push(old, GFP_KERNEL)?;
                    }
                }
                Err(e) => pr_err!(
                    "cannot replace the key of a memory region ({:?}); it keeps its key\n",
                    e
                ),
            }
        }
        let table = self.table()?;
        let mut translated = self.translated.lock();
        for (identity, _) in table.iter() {
            if !translated.contains(identity) {
                translated.push(*identity, GFP_KERNEL)?;
            }
        }
        Ok(())
    }

    /// Releases the registrations of replaced keys: the peers took the new
    /// ones, or a peer that may have kept the old ones is about to connect.
    /// Returns how many were released.
    pub(crate) fn release_replaced(&self) -> usize {
        let mut released = 0;
        if let Ok(cells) = self.live_cells() {
            for cell in cells.iter() {
                let replaced = core::mem::take(&mut cell.registrations.lock().replaced);
                released += replaced.len();
                drop(replaced);
            }
        }
        released
    }

    /// The key the device knows the region named `identity` by now
    /// (`identity` itself if no live region has it).
    pub(crate) fn current(&self, identity: u32) -> u32 {
        let Ok(cells) = self.live_cells() else {
            return identity;
        };
        cells
            .iter()
            .find(|cell| cell.identity == identity)
            .and_then(|cell| {
                cell.registrations
                    .lock()
                    .current
                    .as_ref()
                    .map(MemoryRegion::rkey)
            })
            .unwrap_or(identity)
    }

    /// Identity and current key of every live region whose key changed.
    pub(crate) fn table(&self) -> Result<KeyTable> {
        let cells = self.live_cells()?;
        let mut table = KVec::with_capacity(cells.len(), GFP_KERNEL)?;
        for cell in cells.iter() {
            let current = cell
                .registrations
                .lock()
                .current
                .as_ref()
                .map(MemoryRegion::rkey);
            if let Some(current) = current.filter(|&key| key != cell.identity) {
                // Room for every region was reserved above.
                table.push((cell.identity, current), GFP_KERNEL)?;
            }
        }
        table.sort_unstable_by_key(|&(identity, _)| identity);
        Ok(table)
    }
}
