// SPDX-License-Identifier: GPL-2.0

//! Locks this node keeps: their words and the queues of their waiters.
//!
//! A lock is a [`LockWord`] in this node's memory. A locker takes a free
//! lock with one RDMA compare-and-swap that writes its node into the word,
//! and releases it with another back to free. When the lock is taken, the
//! locker asks this node (the home) for its turn instead: the home queues
//! it and counts it in the word, so the holder's release fails and comes
//! here too, and the home hands the lock to the first in the queue (FIFO),
//! writing the new holder into the word.
//!
//! Because the word always names the holder's node and the home knows
//! every waiter, the home can end the hold of a node that died: the lock
//! goes to the next waiter, told that the owner died, or is left
//! [`LockWord::ORPHANED`] for the next taker to be told.
//!
//! Invariant, kept under the table's mutex: while a lock is held, its word
//! counts exactly the waiters in its queue. Only the home changes the word
//! while anyone is queued (a holder's compare-and-swap to free expects no
//! waiter), so the home's own compare-and-swaps only race with a taker of
//! a free lock or a holder releasing one nobody waits for.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{new_mutex, prelude::*, sync::Mutex};

use super::word::{next_hold_number, Hold, LockWord, MAX_WAITERS};
use crate::errno;
use crate::verbs::{Device, DmaBuffer};
use kernel::sync::Arc;

/// Locks one node can keep (`LITE_MAX_LOCKS`).
pub(crate) const MAX_LOCKS: u32 = 4096;

/// Bytes of one lock word.
const WORD: usize = 8;

/// Compare-and-swaps tried before a word that keeps changing is given up
/// on; only takers of a free lock and a releasing holder change it beside
/// the home, each at most once per hold.
const CAS_ATTEMPTS: usize = 64;

/// A waiter queued at the home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// The waiter's node.
    pub(crate) node: u32,
    /// The waiter's id on its node.
    pub(crate) waiter: u64,
}

/// The lock handed to a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    /// Who gets it.
    pub(crate) reservation: Reservation,
    /// The number of its hold.
    pub(crate) hold: u32,
    /// Whether the last holder died holding it.
    pub(crate) owner_died: bool,
}

impl Grant {
    /// The hold the word names once the lock is granted.
    pub(crate) fn word_hold(&self) -> Hold {
        Hold {
            node: self.reservation.node,
            number: self.hold,
        }
    }
}

/// What the home did with a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// The lock was free: the waiter holds it now.
    Granted(Grant),
    /// The waiter is queued; the lock is handed to it in its turn.
    Queued,
}

/// Access to the lock words. The home reaches its own words by RDMA
/// atomics too, since the device's atomics are only atomic with respect to
/// each other.
pub(crate) trait WordAccess {
    /// Compare-and-swap of lock `number`'s word; returns its value before.
    fn compare_swap(&self, number: u32, expected: LockWord, new: LockWord) -> Result<LockWord>;

    /// The word of lock `number` as this node's memory last saw it: a guess
    /// for the first compare-and-swap, which checks it.
    fn peek(&self, number: u32) -> LockWord;
}

/// Checks a guess of lock `number`'s word before deciding on it alone:
/// `None` if the word is `seen`, else its actual value.
fn confirm(words: &impl WordAccess, number: u32, seen: LockWord) -> Result<Option<LockWord>> {
    let actual = words.compare_swap(number, seen, seen)?;
    Ok((actual != seen).then_some(actual))
}

/// Compare-and-swap of lock `number`'s word from `seen` to `next`; returns
/// its value before, as [`WordAccess::compare_swap`]. A swap whose outcome
/// is unknown (the peer posting it failed after it may have run) is checked:
/// every `next` the home writes is one nobody else writes, so a word that
/// reads `next` took it.
///
/// # Errors
///
/// The error of the swap, if the word still reads `seen` or cannot be read.
fn swap(words: &impl WordAccess, number: u32, seen: LockWord, next: LockWord) -> Result<LockWord> {
    match words.compare_swap(number, seen, next) {
        Ok(before) => Ok(before),
        Err(e) => match words.compare_swap(number, next, next) {
            Ok(actual) if actual == next => Ok(seen),
            Ok(actual) if actual != seen => Ok(actual),
            _ => Err(e),
        },
    }
}

/// The waiters queued for one lock, in order of arrival. Entries are
/// emptied in place and reused, so the queue only allocates when it grows.
pub(crate) struct Queue {
    /// Waiters with their arrival number.
    entries: KVec<Option<(u64, Reservation)>>,
    /// Arrival number of the next waiter.
    arrivals: u64,
    /// Number of the last hold the home handed over.
    last_hold: u32,
}

impl Queue {
    /// No waiter.
    pub(crate) fn new() -> Self {
        Queue {
            entries: KVec::new(),
            arrivals: 0,
            last_hold: 0,
        }
    }

    /// Makes sure [`Queue::push`] has a free entry, so nothing allocates
    /// once the word counts the waiter.
    fn make_room(&mut self) -> Result {
        if self.entries.iter().all(Option::is_some) {
            self.entries.push(None, GFP_KERNEL)?;
        }
        Ok(())
    }

    fn push(&mut self, reservation: Reservation) {
        let arrival = self.arrivals;
        self.arrivals = self.arrivals.wrapping_add(1);
        if let Some(free) = self.entries.iter_mut().find(|e| e.is_none()) {
            *free = Some((arrival, reservation));
        }
    }

    /// Index and reservation of the first waiter.
    fn first(&self) -> Option<(usize, Reservation)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|(arrival, r)| (i, arrival, r)))
            .min_by_key(|(_, arrival, _)| *arrival)
            .map(|(i, _, r)| (i, r))
    }

    /// Index of a waiter of `node`.
    fn of_node(&self, node: u32) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.is_some_and(|(_, r)| r.node == node))
    }

    fn remove(&mut self, index: usize) {
        if let Some(entry) = self.entries.get_mut(index) {
            *entry = None;
        }
    }

    /// Number of waiters.
    pub(crate) fn len(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }

    /// `reservation` arrived: takes the lock for it if it is free, else
    /// queues it.
    ///
    /// # Errors
    ///
    /// `EAGAIN` the queue is full or the word kept changing, `ENOMEM`, and
    /// errors of `words`.
    pub(crate) fn reserve(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        reservation: Reservation,
    ) -> Result<Reserved> {
        self.make_room()?;
        let hold = Hold {
            node: reservation.node,
            number: next_hold_number(self.last_hold),
        };
        let mut seen = words.peek(number);
        for _ in 0..CAS_ATTEMPTS {
            let next = if seen.is_free() {
                LockWord::held(hold, 0)
            } else if seen.waiters() >= MAX_WAITERS {
                match confirm(words, number, seen)? {
                    None => return Err(EAGAIN),
                    Some(actual) => {
                        seen = actual;
                        continue;
                    }
                }
            } else {
                // PANIC: `waiters() < MAX_WAITERS`, so the count does not
                // reach the holder's bits.
                LockWord(seen.0 + 1)
            };
            let before = swap(words, number, seen, next)?;
            if before != seen {
                seen = before;
                continue;
            }
            if seen.is_free() {
                self.last_hold = hold.number;
                return Ok(Reserved::Granted(Grant {
                    reservation,
                    hold: hold.number,
                    owner_died: seen != LockWord::FREE,
                }));
            }
            self.push(reservation);
            return Ok(Reserved::Queued);
        }
        Err(EAGAIN)
    }

    /// Ends `hold`: hands the lock to the first waiter, or frees it
    /// (orphaned if `owner_died`). Returns the grant to deliver, if any. A
    /// hold the word does not name any more is stale and changes nothing.
    ///
    /// # Errors
    ///
    /// `EPROTO` the word and the queue disagree, `EAGAIN` the word kept
    /// changing, and errors of `words`.
    pub(crate) fn release(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        hold: Hold,
        owner_died: bool,
    ) -> Result<Option<Grant>> {
        let mut seen = words.peek(number);
        for _ in 0..CAS_ATTEMPTS {
            if seen.hold() != Some(hold) {
                match confirm(words, number, seen)? {
                    None => return Ok(None),
                    Some(actual) => {
                        seen = actual;
                        continue;
                    }
                }
            }
            let first = self.first();
            let (next, grant) = match first {
                None if seen.waiters() == 0 => {
                    let free = if owner_died {
                        LockWord::ORPHANED
                    } else {
                        LockWord::FREE
                    };
                    (free, None)
                }
                Some((index, reservation)) if seen.waiters() > 0 => {
                    let grant = Grant {
                        reservation,
                        hold: next_hold_number(self.last_hold),
                        owner_died,
                    };
                    let word = LockWord::held(grant.word_hold(), seen.waiters() - 1);
                    (word, Some((index, grant)))
                }
                _ => match confirm(words, number, seen)? {
                    None => return Err(errno::EPROTO()),
                    Some(actual) => {
                        seen = actual;
                        continue;
                    }
                },
            };
            let before = swap(words, number, seen, next)?;
            if before != seen {
                seen = before;
                continue;
            }
            return Ok(grant.map(|(index, grant)| {
                self.remove(index);
                self.last_hold = grant.hold;
                grant
            }));
        }
        Err(EAGAIN)
    }

    /// `node` is gone: its waiters leave the queue, and a hold of it ends
    /// with the owner dead. Returns the grant to deliver, if any.
    ///
    /// # Errors
    ///
    /// As [`Queue::release`].
    pub(crate) fn node_gone(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        node: u32,
    ) -> Result<Option<Grant>> {
        while let Some(index) = self.of_node(node) {
            let mut seen = words.peek(number);
            let mut removed = false;
            for _ in 0..CAS_ATTEMPTS {
                if seen.waiters() == 0 {
                    match confirm(words, number, seen)? {
                        None => return Err(errno::EPROTO()),
                        Some(actual) => {
                            seen = actual;
                            continue;
                        }
                    }
                }
                let before = swap(words, number, seen, LockWord(seen.0 - 1))?;
                if before == seen {
                    removed = true;
                    break;
                }
                seen = before;
            }
            if !removed {
                return Err(EAGAIN);
            }
            self.remove(index);
        }
        let seen = words.peek(number);
        match seen.hold() {
            Some(hold) if hold.node == node => self.release(words, number, hold, true),
            _ => Ok(None),
        }
    }
}

struct Table {
    locks: KVec<Queue>,
}

/// The locks this node keeps.
///
/// The table's mutex is held across the home's compare-and-swaps, which go
/// through a peer: the polling thread never takes it (see [`LockHome::count`]).
#[pin_data]
pub(crate) struct LockHome {
    words: DmaBuffer,
    /// Locks created: only grows, under the table's mutex.
    created: AtomicU32,
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
            created: AtomicU32::new(0),
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
        table.locks.push(Queue::new(), GFP_KERNEL)?;
        // Published after the queue exists, so a lock counted has one.
        self.created.store(number + 1, Ordering::Release);
        Ok(number)
    }

    /// Number of locks created, without waiting for the table.
    pub(crate) fn count(&self) -> usize {
        self.created.load(Ordering::Acquire) as usize
    }

    /// Address of lock `number`'s word, as peers reach it.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such lock.
    pub(crate) fn word_addr(&self, number: u32) -> Result<u64> {
        if number as usize >= self.count() {
            return Err(ENOENT);
        }
        self.word_dma_addr(number)
    }

    /// Address of the word of lock `number`, which may not exist yet. Does
    /// not take the table's mutex, so the home's own compare-and-swaps can
    /// run under it.
    ///
    /// # Errors
    ///
    /// `ENOENT` if `number` is not below [`MAX_LOCKS`].
    pub(crate) fn word_dma_addr(&self, number: u32) -> Result<u64> {
        if number >= MAX_LOCKS {
            return Err(ENOENT);
        }
        // PANIC: `number < MAX_LOCKS`, so the product is below the length
        // of `words`.
        self.words.dma_range(number as usize * WORD, WORD)
    }

    /// The word of lock `number` as this node's memory holds it (a guess:
    /// the device may be changing it).
    pub(crate) fn peek(&self, number: u32) -> LockWord {
        let mut bytes = [0u8; WORD];
        // PANIC: a product of `number` (a lock created, so below
        // `MAX_LOCKS`) and a small constant; out-of-range reads fail.
        match self.words.read_bytes(number as usize * WORD, &mut bytes) {
            Ok(()) => LockWord(u64::from_le_bytes(bytes)),
            Err(_) => LockWord::FREE,
        }
    }

    /// A waiter asks for lock `number`.
    ///
    /// # Errors
    ///
    /// `ENOENT` no such lock, and errors of [`Queue::reserve`].
    pub(crate) fn reserve(
        &self,
        words: &impl WordAccess,
        number: u32,
        reservation: Reservation,
    ) -> Result<Reserved> {
        let mut table = self.table.lock();
        let queue = table.locks.get_mut(number as usize).ok_or(ENOENT)?;
        queue.reserve(words, number, reservation)
    }

    /// `hold` of lock `number` ends; returns the grant to deliver, if any.
    ///
    /// # Errors
    ///
    /// `ENOENT` no such lock, and errors of [`Queue::release`].
    pub(crate) fn release(
        &self,
        words: &impl WordAccess,
        number: u32,
        hold: Hold,
        owner_died: bool,
    ) -> Result<Option<Grant>> {
        let mut table = self.table.lock();
        let queue = table.locks.get_mut(number as usize).ok_or(ENOENT)?;
        queue.release(words, number, hold, owner_died)
    }

    /// `node` is gone: ends its holds and drops its waiters on every lock
    /// kept here. Calls `deliver` with each lock's number and grant, after
    /// the table is unlocked. Returns false if no peer is left to reach the
    /// words through.
    pub(crate) fn node_gone(
        &self,
        words: &impl WordAccess,
        node: u32,
        mut deliver: impl FnMut(u32, Grant),
    ) -> bool {
        let mut number = 0u32;
        loop {
            let outcome = {
                let mut table = self.table.lock();
                let Some(queue) = table.locks.get_mut(number as usize) else {
                    return true;
                };
                queue.node_gone(words, number, node)
            };
            match outcome {
                Ok(Some(grant)) => deliver(number, grant),
                Ok(None) => {}
                // No peer left to reach the words through.
                Err(e) if e == errno::EHOSTUNREACH() => return false,
                Err(e) => pr_err!(
                    "lock {} may stay taken by gone node {}: {:?}\n",
                    number,
                    node,
                    e
                ),
            }
            number += 1;
        }
    }
}
