// SPDX-License-Identifier: GPL-2.0

//! DMA buffers kept for reuse, so that a call, an atomic or a large RPC
//! message does not allocate, zero and map pages on its way to the device.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{Device, DmaBuffer, PAGE_SIZE};

/// Size of every small pooled buffer.
pub(crate) const STAGING_SIZE: usize = PAGE_SIZE;

/// Size of every large pooled buffer: an RPC message of up to 128 KiB less
/// its 32-byte header; larger requests get a buffer of their own.
const LARGE_STAGING_SIZE: usize = 128 << 10;

/// Small buffers kept between uses; more in use at once are allocated and
/// freed.
const POOLED: usize = 32;

/// Large buffers kept between uses, few because each holds
/// `LARGE_STAGING_SIZE / PAGE_SIZE` pages.
const POOLED_LARGE: usize = 4;

/// Free buffers of one size.
type Tier<const N: usize> = Mutex<[Option<DmaBuffer>; N]>;

/// Free buffers of [`STAGING_SIZE`] and [`LARGE_STAGING_SIZE`] bytes on one
/// device.
#[pin_data]
pub(crate) struct StagingPool {
    device: Arc<Device>,
    /// Lock class `lite:staging`: see the lock order in [`crate::internal::core`].
    #[pin]
    free: Tier<POOLED>,
    /// Lock class `lite:staging_large`: see the lock order in
    /// [`crate::internal::core`].
    #[pin]
    free_large: Tier<POOLED_LARGE>,
}

impl StagingPool {
    /// An empty pool for `device`.
    pub(crate) fn new(device: Arc<Device>) -> impl PinInit<Self> {
        pin_init!(StagingPool {
            device,
            free <- new_mutex!([const { None }; POOLED], "lite:staging"),
            free_large <- new_mutex!([const { None }; POOLED_LARGE], "lite:staging_large"),
        })
    }

    /// Runs `f` on a buffer of at least `len` bytes, then keeps the buffer
    /// for the next user if it is of a pooled size.
    ///
    /// A reused buffer still holds what an earlier user left in it: `f`
    /// hands the device only the bytes it wrote itself, and its caller
    /// only the bytes the device wrote.
    ///
    /// # Errors
    ///
    /// As [`DmaBuffer::new`], or `f`'s error.
    pub(crate) fn with<T>(
        &self,
        len: usize,
        f: impl FnOnce(&mut DmaBuffer) -> Result<T>,
    ) -> Result<T> {
        if len <= STAGING_SIZE {
            self.with_tier(&self.free, STAGING_SIZE, len, f)
        } else if len <= LARGE_STAGING_SIZE {
            self.with_tier(&self.free_large, LARGE_STAGING_SIZE, len, f)
        } else {
            self.unpooled(len, f)
        }
    }

    /// Runs `f` on a buffer of exactly `len` bytes, freed afterwards.
    fn unpooled<T>(&self, len: usize, f: impl FnOnce(&mut DmaBuffer) -> Result<T>) -> Result<T> {
        f(&mut DmaBuffer::new(&self.device, len)?)
    }

    /// Buffers kept for reuse.
    pub(crate) fn kept(&self) -> usize {
        let count = |free: &[Option<DmaBuffer>]| free.iter().filter(|b| b.is_some()).count();
        // One lock at a time.
        let small = count(&*self.free.lock());
        small + count(&*self.free_large.lock())
    }

    /// [`StagingPool::with`] on a buffer of `tier`, whose buffers are of
    /// `size` bytes, for `len` of them.
    fn with_tier<const N: usize, T>(
        &self,
        tier: &Tier<N>,
        size: usize,
        len: usize,
        f: impl FnOnce(&mut DmaBuffer) -> Result<T>,
    ) -> Result<T> {
        let reused = tier.lock().iter_mut().find_map(Option::take);
        let mut buffer = match reused {
            Some(buffer) => buffer,
            None => match DmaBuffer::new(&self.device, size) {
                Ok(buffer) => buffer,
                // A tier's buffer takes more contiguous pages than `len`
                // needs: when memory is too fragmented for it, the request
                // gets a buffer of its own size, not pooled.
                Err(_) if len < size => return self.unpooled(len, f),
                Err(e) => return Err(e),
            },
        };
        let result = f(&mut buffer);
        Self::give_back(tier, buffer);
        result
    }

    fn give_back<const N: usize>(tier: &Tier<N>, buffer: DmaBuffer) {
        let mut free = tier.lock();
        if let Some(slot) = free.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(buffer);
            return;
        }
        drop(free);
        // The tier is full: `buffer` is freed here, outside the lock.
    }
}
