// SPDX-License-Identifier: GPL-2.0

//! Locks this node keeps: their words and the queues of their waiters.
//!
//! A lock is a [`LockWord`] in this node's memory. A locker takes a free
//! lock with one RDMA compare-and-swap that writes its node into the word,
//! and releases it with another back to free. When the lock is taken, the
//! locker asks this node (the home) for its turn instead: the home queues
//! it and, for the first waiter, marks the word managed, so that holders'
//! releases fail and come here; the home then hands the lock to the first
//! in the queue (FIFO). The lock stays managed until a holder releases it
//! with nobody waiting: then the home frees the word, and the next taker
//! takes it with one compare-and-swap again.
//!
//! While a lock is managed only the home changes its word (a holder's
//! release expects it unmanaged, a taker expects it free), so the home
//! knows the word and the holder without asking the device: hand-overs
//! cost no RDMA atomic, also to the last waiter, whose release may well
//! find new waiters under contention. The grant tells its holder that the
//! lock is managed, so the holder's release is one message to the home,
//! with no compare-and-swap bound to fail, and whether others wait behind
//! it, so that its node's next take asks the home at once. The home posts
//! its replies that grant nothing without waiting for the node's
//! acknowledgment. Outside that, its compare-and-swaps only race with a
//! taker of a free lock or a holder releasing one nobody waits for.
//!
//! The home's own threads ask the home directly, and a lock they take stays
//! managed, also once they release it with nobody waiting: their next lock
//! and unlock change nothing but the home's table, with no RDMA atomic and
//! no message. (The device's atomics are atomic only with respect to each
//! other, so the home reaches its own words through a peer; a lock the
//! home's node used that way would otherwise cost it more than a remote
//! one.) A peer's taker finds such a lock's word managed and asks the home,
//! which, if the lock is free, hands it over unmanaged, so that its release
//! is one compare-and-swap; else the taker queues like any other.
//!
//! Because the home knows every holder (from the word, or itself while it
//! manages the lock) and every waiter, it can end the hold of a node that
//! died: the lock goes to the next waiter, told that the owner died, or is
//! left [`LockWord::ORPHANED`] for the next taker to be told.

use crate::internal::node_id::NodeId;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{new_mutex, prelude::*, sync::Mutex};

use super::{
    lockers::Taken,
    word::{next_hold_number, Hold, LockWord},
};
use crate::errno;
use crate::verbs::{DmaBuffer, RemotePool};

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
    pub(crate) node: NodeId,
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
    /// Whether the home manages the lock while it is held: only the home
    /// changes its word then, so the holder's release goes straight to the
    /// home, with no compare-and-swap that would fail.
    pub(crate) managed: bool,
    /// Whether others still wait behind the waiter: its node's next take
    /// will likely find the lock managed too.
    pub(crate) contended: bool,
}

impl Grant {
    /// The lock as its waiter takes it.
    pub(crate) fn taken(&self) -> Taken {
        Taken {
            hold: self.hold,
            owner_died: self.owner_died,
            managed: self.managed,
            contended: self.contended,
        }
    }

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

/// A lock the home manages: the word (which only the home changes now) and
/// the current holder, if any: a lock the home's own node released stays
/// managed while free.
#[derive(Debug, Clone, Copy)]
struct Managed {
    word: LockWord,
    holder: Option<Hold>,
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
    /// Set while the home manages the lock.
    managed: Option<Managed>,
    /// The home's node.
    home: NodeId,
}

impl Queue {
    /// No waiter, for a lock kept by node `home`.
    pub(crate) fn new(home: NodeId) -> Self {
        Queue {
            entries: KVec::new(),
            arrivals: 0,
            last_hold: 0,
            managed: None,
            home,
        }
    }

    /// Makes sure [`Queue::push`] has a free entry, so nothing allocates
    /// once the word says the lock is managed.
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

    fn remove(&mut self, index: usize) {
        if let Some(entry) = self.entries.get_mut(index) {
            *entry = None;
        }
    }

    /// Number of waiters.
    pub(crate) fn len(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }

    /// Whether the home manages the lock (someone waited for it, or the
    /// home's own node took it).
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn is_managed(&self) -> bool {
        self.managed.is_some()
    }

    /// Whether the home manages the lock and nobody holds it.
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn is_kept_free(&self) -> bool {
        self.managed.is_some_and(|m| m.holder.is_none())
    }

    /// The next hold handed to `reservation`, managed if `managed`.
    fn grant_for(&self, reservation: Reservation, owner_died: bool, managed: bool) -> Grant {
        Grant {
            reservation,
            hold: next_hold_number(self.last_hold),
            owner_died,
            managed,
            contended: false,
        }
    }

    /// Records `grant` as the holder of a managed lock, leaving it
    /// unmanaged unless the grant is managed, with the grant named in its
    /// word.
    fn hand_managed(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        managed: Managed,
        grant: Grant,
    ) -> Result {
        if !grant.managed {
            let next = LockWord::held(grant.word_hold(), false);
            self.leave_managed(words, number, managed, next)?;
        } else {
            self.managed = Some(Managed {
                holder: Some(grant.word_hold()),
                ..managed
            });
        }
        self.last_hold = grant.hold;
        Ok(())
    }

    /// `reservation` arrived: takes the lock for it if it is free, else
    /// queues it.
    ///
    /// # Errors
    ///
    /// `EAGAIN` the word kept changing, `EPROTO` the word says managed but
    /// the home does not manage it, `ENOMEM`, and errors of `words`.
    pub(crate) fn reserve(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        reservation: Reservation,
    ) -> Result<Reserved> {
        self.make_room()?;
        let own = reservation.node == self.home;
        if let Some(managed) = self.managed {
            if managed.holder.is_some() {
                self.push(reservation);
                return Ok(Reserved::Queued);
            }
            // Kept free for the home's node (nobody waits): a peer gets it
            // unmanaged, so that its release is one compare-and-swap.
            let grant = self.grant_for(reservation, false, own);
            self.hand_managed(words, number, managed, grant)?;
            return Ok(Reserved::Granted(grant));
        }
        let hold = Hold {
            node: reservation.node,
            number: next_hold_number(self.last_hold),
        };
        let mut seen = words.peek(number);
        for _ in 0..CAS_ATTEMPTS {
            let (next, holder) = match seen.hold() {
                // The home's own node takes it managed.
                None => (LockWord::held(hold, own), None),
                Some(_) if seen.is_managed() => match confirm(words, number, seen)? {
                    None => return Err(errno::EPROTO()),
                    Some(actual) => {
                        seen = actual;
                        continue;
                    }
                },
                Some(holder) => (seen.managed(), Some(holder)),
            };
            let before = swap(words, number, seen, next)?;
            if before != seen {
                seen = before;
                continue;
            }
            let Some(holder) = holder else {
                self.last_hold = hold.number;
                if own {
                    self.managed = Some(Managed {
                        word: next,
                        holder: Some(hold),
                    });
                }
                return Ok(Reserved::Granted(Grant {
                    reservation,
                    hold: hold.number,
                    owner_died: seen != LockWord::FREE,
                    managed: own,
                    contended: false,
                }));
            };
            self.managed = Some(Managed {
                word: next,
                holder: Some(holder),
            });
            self.push(reservation);
            return Ok(Reserved::Queued);
        }
        Err(EAGAIN)
    }

    /// Ends `hold`: hands the lock to the first waiter, or frees it
    /// (orphaned if `owner_died`; kept free and managed after a hold of the
    /// home's node). Returns the grant to deliver, if any. A
    /// hold that is not the current one is stale and changes nothing.
    ///
    /// # Errors
    ///
    /// `EPROTO` the word changed while the home managed it, `EAGAIN` the
    /// word kept changing, and errors of `words`.
    pub(crate) fn release(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        hold: Hold,
        owner_died: bool,
    ) -> Result<Option<Grant>> {
        match self.managed {
            Some(managed) if managed.holder == Some(hold) => {
                self.hand_on(words, number, managed, owner_died)
            }
            Some(_) => Ok(None),
            None => self.free_unmanaged(words, number, hold, owner_died),
        }
    }

    /// Ends the current hold of a managed lock: the first waiter gets it,
    /// managed. With nobody left the lock is freed, or kept free and managed
    /// after a hold of the home's node.
    fn hand_on(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        managed: Managed,
        owner_died: bool,
    ) -> Result<Option<Grant>> {
        let Some((index, reservation)) = self.first() else {
            if !owner_died && managed.holder.is_some_and(|h| h.node == self.home) {
                self.managed = Some(Managed {
                    holder: None,
                    ..managed
                });
                return Ok(None);
            }
            let free = if owner_died {
                LockWord::ORPHANED
            } else {
                LockWord::FREE
            };
            self.leave_managed(words, number, managed, free)?;
            return Ok(None);
        };
        let grant = Grant {
            contended: self.len() > 1,
            ..self.grant_for(reservation, owner_died, true)
        };
        self.hand_managed(words, number, managed, grant)?;
        self.remove(index);
        Ok(Some(grant))
    }

    /// Writes `next` over the word of a managed lock, which only the home
    /// changed since it began to manage it.
    fn leave_managed(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        managed: Managed,
        next: LockWord,
    ) -> Result {
        let before = match words.compare_swap(number, managed.word, next) {
            Ok(before) => before,
            // The swap may have run. Only the home changes a managed word,
            // so it reads the managed one until then; any other value
            // means it ran (and a taker may have taken the freed lock
            // since).
            Err(e) => match words.compare_swap(number, managed.word, managed.word) {
                Ok(actual) if actual != managed.word => managed.word,
                _ => return Err(e),
            },
        };
        if before != managed.word {
            return Err(errno::EPROTO());
        }
        self.managed = None;
        Ok(())
    }

    /// Ends `hold` of a lock nobody waits for: a hold its taker will never
    /// take, or one of a node that died.
    fn free_unmanaged(
        &mut self,
        words: &impl WordAccess,
        number: u32,
        hold: Hold,
        owner_died: bool,
    ) -> Result<Option<Grant>> {
        let free = if owner_died {
            LockWord::ORPHANED
        } else {
            LockWord::FREE
        };
        let mut seen = words.peek(number);
        for _ in 0..CAS_ATTEMPTS {
            if seen.hold() != Some(hold) || seen.is_managed() {
                match confirm(words, number, seen)? {
                    None if seen.is_managed() => return Err(errno::EPROTO()),
                    // Not this hold any more: stale.
                    None => return Ok(None),
                    Some(actual) => {
                        seen = actual;
                        continue;
                    }
                }
            }
            let before = swap(words, number, seen, free)?;
            if before == seen {
                return Ok(None);
            }
            seen = before;
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
        node: NodeId,
    ) -> Result<Option<Grant>> {
        for entry in self.entries.iter_mut() {
            if entry.is_some_and(|(_, r)| r.node == node) {
                *entry = None;
            }
        }
        match self.managed {
            Some(managed) if managed.holder.is_some_and(|h| h.node == node) => {
                self.hand_on(words, number, managed, true)
            }
            Some(_) => Ok(None),
            None => match words.peek(number).hold() {
                Some(hold) if hold.node == node => self.free_unmanaged(words, number, hold, true),
                _ => Ok(None),
            },
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
    /// This node.
    node: NodeId,
    words: DmaBuffer,
    /// Locks created: only grows, under the table's mutex.
    created: AtomicU32,
    /// Lock class `lite:lock_home`: see the lock order in [`crate::internal::core`].
    #[pin]
    table: Mutex<Table>,
}

impl LockHome {
    /// Room for [`MAX_LOCKS`] locks of node `node`, none created.
    pub(crate) fn new(pool: &RemotePool, node: NodeId) -> Result<impl PinInit<Self, Error>> {
        // PANIC: a product of two small constants.
        let words = pool.allocate(MAX_LOCKS as usize * WORD)?;
        Ok(try_pin_init!(LockHome {
            node,
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
        table.locks.push(Queue::new(self.node), GFP_KERNEL)?;
        // Published after the queue exists, so a lock counted has one.
        self.created.store(number + 1, Ordering::Release);
        Ok(number)
    }

    /// Number of locks created, without waiting for the table.
    pub(crate) fn count(&self) -> usize {
        self.created.load(Ordering::Acquire) as usize
    }

    /// Address and key of lock `number`'s word, as peers reach it.
    ///
    /// # Errors
    ///
    /// `ENOENT` if there is no such lock.
    pub(crate) fn word_addr(&self, number: u32) -> Result<(u64, u32)> {
        if number as usize >= self.count() {
            return Err(ENOENT);
        }
        self.word_remote_range(number)
    }

    /// Address and key of the word of lock `number`, which may not exist
    /// yet. Does not take the table's mutex, so the home's own
    /// compare-and-swaps can run under it.
    ///
    /// # Errors
    ///
    /// `ENOENT` if `number` is not below [`MAX_LOCKS`].
    pub(crate) fn word_remote_range(&self, number: u32) -> Result<(u64, u32)> {
        if number >= MAX_LOCKS {
            return Err(ENOENT);
        }
        // PANIC: `number < MAX_LOCKS`, so the product is below the length
        // of `words`.
        self.words.remote_range(number as usize * WORD, WORD)
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
        node: NodeId,
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
