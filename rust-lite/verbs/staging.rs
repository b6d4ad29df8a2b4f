// SPDX-License-Identifier: GPL-2.0

//! Small DMA buffers kept for reuse, so that a call or an atomic does not
//! allocate, zero and map a page on its way to the device.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{Device, DmaBuffer, PAGE_SIZE};

/// Size of every pooled buffer; larger requests get a buffer of their own.
pub(crate) const STAGING_SIZE: usize = PAGE_SIZE;

/// Buffers kept between uses; more in use at once are allocated and freed.
const POOLED: usize = 32;

/// Free buffers of [`STAGING_SIZE`] bytes on one device.
#[pin_data]
pub(crate) struct StagingPool {
    device: Arc<Device>,
    #[pin]
    free: Mutex<[Option<DmaBuffer>; POOLED]>,
}

impl StagingPool {
    /// An empty pool for `device`.
    pub(crate) fn new(device: Arc<Device>) -> impl PinInit<Self> {
        pin_init!(StagingPool {
            device,
            free <- new_mutex!([const { None }; POOLED], "lite:staging"),
        })
    }

    /// Runs `f` on a buffer of at least `len` bytes, then keeps the buffer
    /// for the next user.
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
        if len > STAGING_SIZE {
            return f(&mut DmaBuffer::new(&self.device, len)?);
        }
        let reused = self.free.lock().iter_mut().find_map(Option::take);
        let mut buffer = match reused {
            Some(buffer) => buffer,
            None => DmaBuffer::new(&self.device, STAGING_SIZE)?,
        };
        let result = f(&mut buffer);
        self.give_back(buffer);
        result
    }

    /// Buffers kept for reuse.
    pub(crate) fn kept(&self) -> usize {
        self.free.lock().iter().filter(|b| b.is_some()).count()
    }

    fn give_back(&self, buffer: DmaBuffer) {
        let mut free = self.free.lock();
        if let Some(slot) = free.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(buffer);
            return;
        }
        drop(free);
        // The pool is full: `buffer` is freed here, outside the lock.
    }
}
