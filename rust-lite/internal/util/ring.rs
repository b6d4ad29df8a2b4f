// SPDX-License-Identifier: GPL-2.0

//! A first-in, first-out queue of fixed capacity.

use kernel::prelude::*;

/// A FIFO queue that never allocates after creation.
pub(crate) struct Ring<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// An empty ring with room for `capacity` (at least 1) entries.
    pub(crate) fn new(capacity: usize) -> Result<Self> {
        let capacity = capacity.max(1);
        let mut slots = KVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Ring {
            slots,
            head: 0,
            len: 0,
        })
    }

    /// Appends `value`, or gives it back if the ring is full.
    pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
        let capacity = self.slots.len();
        if self.len == capacity {
            return Err(value);
        }
        // PANIC: `capacity >= 1` (see `new`) and `head < capacity`,
        // `len < capacity`, so neither the sum nor the remainder panics,
        // `tail < capacity == slots.len()` and `len + 1 <= capacity`.
        let tail = (self.head + self.len) % capacity;
        self.slots[tail] = Some(value);
        self.len += 1;
        Ok(())
    }

    /// The oldest entry.
    pub(crate) fn peek(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        // PANIC: `head < slots.len()` (kept by `pop`).
        self.slots[self.head].as_ref()
    }

    /// Removes the oldest entry.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        // PANIC: `head < slots.len()`, which is at least 1, and `len > 0`
        // (checked above).
        let value = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        value
    }
}
