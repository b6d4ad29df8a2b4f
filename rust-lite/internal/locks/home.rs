// SPDX-License-Identifier: GPL-2.0

//! Locks this node keeps: their ticket words and the hand-over between
//! holders.
//!
//! A lock is an 8-byte word in this node's memory that counts the tickets
//! drawn since the lock was last free. Lockers on any node draw a ticket by
//! RDMA fetch-and-add: ticket 1 holds the lock at once, any other ticket
//! reserves its turn here and sleeps. A holder releases by RDMA
//! compare-and-swap of its ticket back to 0; if that fails, later tickets
//! were drawn and it tells this node, which hands the lock to the next
//! ticket. Reservations and releases may arrive in either order, so both
//! are kept until their partner arrives ([`HandOver`]).
//!
//! Within one busy period tickets are unique; the word returns to 0 only
//! when the last ticket drawn is released, which needs every earlier ticket
//! to have been handed over, so the hand-over state is empty again whenever
//! a new period (starting at ticket 1) begins.

use kernel::{new_mutex, prelude::*, sync::Mutex};

use crate::verbs::{Device, DmaBuffer};
use kernel::sync::Arc;

/// Locks one node can keep (`LITE_MAX_LOCKS`).
pub(crate) const MAX_LOCKS: u32 = 4096;

/// Bytes of one ticket word.
const WORD: usize = 8;

/// A waiter that drew a ticket and waits for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// The waiter's node.
    pub(crate) node: u32,
    /// Its ticket.
    pub(crate) ticket: u64,
    /// The waiter's id on its node.
    pub(crate) waiter: u64,
}

/// The hand-over state of one lock: reservations whose turn has not come,
/// and turns that came before their reservation. Entries are emptied in
/// place and reused, so the state only allocates when it grows.
pub(crate) struct HandOver {
    waiting: KVec<Option<Reservation>>,
    ready: KVec<Option<u64>>,
}

/// Stores `value` in a free entry of `entries`, growing it if none is free.
fn put<T>(entries: &mut KVec<Option<T>>, value: T) -> Result {
    match entries.iter_mut().find(|e| e.is_none()) {
        Some(free) => *free = Some(value),
        None => entries.push(Some(value), GFP_KERNEL)?,
    }
    Ok(())
}

impl HandOver {
    /// No waiter.
    pub(crate) fn new() -> Self {
        HandOver {
            waiting: KVec::new(),
            ready: KVec::new(),
        }
    }

    /// `reservation` arrived: returns it if its turn has already come (the
    /// lock is then its), else keeps it.
    pub(crate) fn reserve(&mut self, reservation: Reservation) -> Result<Option<Reservation>> {
        if let Some(turn) = self
            .ready
            .iter_mut()
            .find(|t| **t == Some(reservation.ticket))
        {
            *turn = None;
            return Ok(Some(reservation));
        }
        put(&mut self.waiting, reservation)?;
        Ok(None)
    }

    /// The holder of `ticket` released: returns the reservation of the next
    /// ticket if it arrived (the lock is then its), else remembers that the
    /// next ticket's turn has come.
    pub(crate) fn release(&mut self, ticket: u64) -> Result<Option<Reservation>> {
        let next = ticket.wrapping_add(1);
        if let Some(entry) = self
            .waiting
            .iter_mut()
            .find(|r| r.is_some_and(|r| r.ticket == next))
        {
            return Ok(entry.take());
        }
        put(&mut self.ready, next)?;
        Ok(None)
    }

    /// Whether nothing is pending.
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting.iter().all(Option::is_none) && self.ready.iter().all(Option::is_none)
    }
}

struct Table {
    locks: KVec<HandOver>,
}

/// The locks this node keeps.
#[pin_data]
pub(crate) struct LockHome {
    words: DmaBuffer,
    #[pin]
    table: Mutex<Table>,
}

impl LockHome {
    /// Room for [`MAX_LOCKS`] locks, none created.
    pub(crate) fn new(device: &Arc<Device>) -> Result<impl PinInit<Self, Error>> {
        // PANIC: a product of two small constants.
        let words = DmaBuffer::new(device, MAX_LOCKS as usize * WORD)?;
        Ok(try_pin_init!(LockHome {
            words,
            table <- new_mutex!(Table { locks: KVec::new() }, "lite:lock_home"),
        }? Error))
    }

    /// Creates a lock; returns its number.
    ///
    /// # Errors
    ///
    /// `ENOSPC` if [`MAX_LOCKS`] locks exist, `ENOMEM`.
    pub(crate) fn create(&self) -> Result<u32> {
        let mut table = self.table.lock();
        let number = u32::try_from(table.locks.len()).map_err(|_| ENOSPC)?;
        if number >= MAX_LOCKS {
            return Err(ENOSPC);
        }
        // PANIC: `number < MAX_LOCKS`, so the product is below the length
        // of `words`.
        self.words.write_bytes(number as usize * WORD, &[0; WORD])?;
        table.locks.push(HandOver::new(), GFP_KERNEL)?;
        Ok(number)
    }

    /// Number of locks created.
    pub(crate) fn count(&self) -> usize {
        self.table.lock().locks.len()
    }

    /// Address of lock `number`'s ticket word, as peers reach it.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such lock.
    pub(crate) fn word_addr(&self, number: u32) -> Result<u64> {
        if number as usize >= self.count() {
            return Err(ENOENT);
        }
        // PANIC: `number < count() <= MAX_LOCKS`, so the product is below the
        // length of `words`.
        self.words.dma_range(number as usize * WORD, WORD)
    }

    /// A waiter reserved its turn on lock `number`; returns the
    /// reservation if the lock is its now.
    pub(crate) fn reserve(
        &self,
        number: u32,
        reservation: Reservation,
    ) -> Result<Option<Reservation>> {
        let mut table = self.table.lock();
        let lock = table.locks.get_mut(number as usize).ok_or(ENOENT)?;
        lock.reserve(reservation)
    }

    /// The holder of `ticket` released lock `number` with later tickets
    /// drawn; returns the reservation that holds the lock now, if it arrived.
    pub(crate) fn release(&self, number: u32, ticket: u64) -> Result<Option<Reservation>> {
        let mut table = self.table.lock();
        let lock = table.locks.get_mut(number as usize).ok_or(ENOENT)?;
        lock.release(ticket)
    }
}
