// SPDX-License-Identifier: GPL-2.0

//! Distributed locks: what the lock's home keeps, hand-over between
//! waiters, a compare-and-swap of unknown outcome, and owners that die.

use super::Check;
use crate::internal::node_id::NodeId;
use kernel::bindings;
use kernel::error::code::EIO;

/// One lock word in plain memory, for the home's hand-over logic; with
/// `stale_peeks`, every guess of it is wrong.
struct FakeLockWord(core::cell::Cell<u64>, bool);

impl crate::internal::locks::home::WordAccess for FakeLockWord {
    fn compare_swap(
        &self,
        _number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        let before = self.0.get();
        if before == expected.0 {
            self.0.set(new.0);
        }
        Ok(crate::internal::locks::word::LockWord(before))
    }

    fn peek(&self, _number: u32) -> crate::internal::locks::word::LockWord {
        let value = self.0.get();
        crate::internal::locks::word::LockWord(if self.1 { !value } else { value })
    }
}

/// The node keeping the locks of the hand-over tests; no waiter of theirs
/// is of it.
const HOME: u32 = 0;

/// A lock word that counts the compare-and-swaps reaching it.
struct CountedLockWord(FakeLockWord, core::cell::Cell<u32>);

impl crate::internal::locks::home::WordAccess for CountedLockWord {
    fn compare_swap(
        &self,
        number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        self.1.set(self.1.get() + 1);
        crate::internal::locks::home::WordAccess::compare_swap(&self.0, number, expected, new)
    }

    fn peek(&self, number: u32) -> crate::internal::locks::word::LockWord {
        crate::internal::locks::home::WordAccess::peek(&self.0, number)
    }
}

kunit_case!(lite_test_lock_kept_by_home, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved, WordAccess},
        word::LockWord,
    };
    let word = CountedLockWord(
        FakeLockWord(core::cell::Cell::new(0), false),
        Default::default(),
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // The home's own thread takes the free lock managed: one swap.
    let first = lock.reserve(&word, 0, r(HOME, 1));
    check!(
        c,
        matches!(first, Ok(Reserved::Granted(g)) if !g.owner_died && g.managed)
    );
    let Ok(Reserved::Granted(first)) = first else {
        return;
    };
    let kept_word = word.peek(0);
    check!(
        c,
        lock.is_managed() && kept_word.is_managed() && word.1.get() == 1
    );
    check!(c, kept_word.hold() == Some(first.word_hold()));
    // Released with nobody waiting, it stays managed and free; taking and
    // releasing it again reaches no word.
    check!(
        c,
        matches!(lock.release(&word, 0, first.word_hold(), false), Ok(None))
    );
    check!(c, lock.is_kept_free() && word.1.get() == 1);
    let mut hold = first.word_hold();
    for waiter in 2..5u64 {
        let again = lock.reserve(&word, 0, r(HOME, waiter));
        check!(
            c,
            matches!(again, Ok(Reserved::Granted(g)) if g.word_hold() != hold)
        );
        let Ok(Reserved::Granted(again)) = again else {
            return;
        };
        check!(c, !lock.is_kept_free());
        // A stale release changes nothing: the lock stays held.
        check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
        check!(c, !lock.is_kept_free() && lock.is_managed());
        hold = again.word_hold();
        check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
    }
    check!(
        c,
        lock.is_kept_free() && word.1.get() == 1 && word.peek(0) == kept_word
    );
    // A peer's taker fails on the managed word and asks the home: it gets
    // the lock unmanaged, named in the word, so its release is one swap.
    check!(c, !word.peek(0).is_free());
    let peer = lock.reserve(&word, 0, r(3, 7));
    check!(
        c,
        matches!(peer, Ok(Reserved::Granted(g)) if g.reservation == r(3, 7))
    );
    let Ok(Reserved::Granted(peer)) = peer else {
        return;
    };
    check!(c, !lock.is_managed() && !peer.managed);
    check!(c, word.peek(0) == LockWord::held(peer.word_hold(), false));
    // The home's thread waits behind the peer; as the last waiter it gets
    // the lock managed again.
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(HOME, 8)), Ok(Reserved::Queued))
    );
    let next = lock.release(&word, 0, peer.word_hold(), false);
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(HOME, 8))
    );
    let Ok(Some(next)) = next else {
        return;
    };
    check!(
        c,
        lock.is_managed() && !lock.is_kept_free() && lock.len() == 0
    );
    check!(c, next.managed);
    // A peer dying changes nothing for it; a peer that asks meanwhile
    // queues behind it and then gets the lock managed, and its release
    // with nobody waiting frees it.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(3)), Ok(None))
    );
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(4, 9)), Ok(Reserved::Queued))
    );
    let last = lock.release(&word, 0, next.word_hold(), false);
    check!(
        c,
        matches!(last, Ok(Some(g)) if g.reservation == r(4, 9) && g.managed)
    );
    if let Ok(Some(last)) = last {
        check!(c, lock.is_managed() && word.peek(0).is_managed());
        check!(
            c,
            matches!(lock.release(&word, 0, last.word_hold(), false), Ok(None))
        );
    }
    check!(c, word.peek(0) == LockWord::FREE && !lock.is_managed());
    // A hold of the home's node that ends with its owner dead (a grant its
    // waiter never took, passed on for a dead holder) leaves the lock
    // orphaned, not kept free, so the next taker is told.
    let taken = lock.reserve(&word, 0, r(HOME, 10));
    check!(
        c,
        matches!(taken, Ok(Reserved::Granted(_))) && lock.is_managed()
    );
    if let Ok(Reserved::Granted(taken)) = taken {
        check!(
            c,
            matches!(lock.release(&word, 0, taken.word_hold(), true), Ok(None))
        );
        check!(c, !lock.is_managed() && word.peek(0) == LockWord::ORPHANED);
    }
    let next = lock.reserve(&word, 0, r(HOME, 11));
    check!(c, matches!(next, Ok(Reserved::Granted(g)) if g.owner_died));
    // While it is kept free, a peer's release of an old hold or a peer's
    // death changes nothing.
    if let Ok(Reserved::Granted(next)) = next {
        check!(
            c,
            matches!(lock.release(&word, 0, next.word_hold(), false), Ok(None))
        );
    }
    check!(c, lock.is_kept_free());
    let kept = word.peek(0);
    check!(
        c,
        matches!(lock.release(&word, 0, peer.word_hold(), false), Ok(None))
    );
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(3)), Ok(None))
    );
    check!(c, lock.is_kept_free() && word.peek(0) == kept);
});

kunit_case!(lite_test_lock_hand_over, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let word = CountedLockWord(
        FakeLockWord(core::cell::Cell::new(0), true),
        Default::default(),
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // A free lock is granted at once, and the word names the holder.
    let granted = lock.reserve(&word, 0, r(2, 20));
    check!(
        c,
        matches!(granted, Ok(Reserved::Granted(g)) if g.reservation == r(2, 20) && !g.owner_died)
    );
    let Ok(Reserved::Granted(first)) = granted else {
        return;
    };
    check!(
        c,
        LockWord(word.0 .0.get()).hold() == Some(first.word_hold())
    );
    check!(c, !first.managed);
    // Taken: waiters queue in order of arrival, and the word says managed,
    // so the holder's own release fails.
    for waiter in [30u64, 10, 40] {
        check!(
            c,
            matches!(
                lock.reserve(&word, 0, r((waiter / 10) as u32, waiter)),
                Ok(Reserved::Queued)
            )
        );
    }
    check!(
        c,
        LockWord(word.0 .0.get()).is_managed() && lock.is_managed() && lock.len() == 3
    );
    let managed_word = word.0 .0.get();
    let swaps = word.1.get();
    // A stale release (not the current hold) changes nothing.
    let stale = Hold {
        node: NodeId::new(7),
        number: first.hold,
    };
    check!(c, matches!(lock.release(&word, 0, stale, false), Ok(None)));
    let mut hold = first.word_hold();
    for (i, expected) in [r(3, 30), r(1, 10), r(4, 40)].into_iter().enumerate() {
        let next = lock.release(&word, 0, hold, false);
        check!(
            c,
            matches!(next, Ok(Some(g)) if g.reservation == expected && !g.owner_died)
        );
        let Ok(Some(next)) = next else {
            return;
        };
        // The word does not change, also for the last waiter, and the grant
        // says so: its release needs no compare-and-swap.
        check!(c, lock.is_managed() && word.0 .0.get() == managed_word);
        // Others still wait behind all but the last.
        check!(
            c,
            next.managed && lock.len() == 2 - i && next.contended == (i < 2)
        );
        hold = next.word_hold();
    }
    // No hand-over reached the word.
    check!(c, word.1.get() == swaps);
    // Released with nobody waiting, the lock is free: one swap.
    check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
    check!(c, word.1.get() == swaps + 1);
    check!(c, word.0 .0.get() == 0 && !lock.is_managed());
    // A taker of the free lock without the home (hold 0) is named too.
    let fast = LockWord::held(
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    word.0 .0.set(fast.0);
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(6, 60)), Ok(Reserved::Queued))
    );
    check!(c, word.0 .0.get() == fast.managed().0);
    let next = lock.release(
        &word,
        0,
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(6, 60) && g.hold != 0)
    );
    if let Ok(Some(g)) = next {
        check!(c, g.managed && word.0 .0.get() == fast.managed().0);
    }
});

/// A lock word whose compare-and-swap, once armed, runs but reports an
/// error (its outcome unknown to the home), after which a taker without the
/// home takes the lock if the swap freed it.
struct UncertainLockWord(FakeLockWord, core::cell::Cell<bool>, u64);

impl crate::internal::locks::home::WordAccess for UncertainLockWord {
    fn compare_swap(
        &self,
        number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        let before =
            crate::internal::locks::home::WordAccess::compare_swap(&self.0, number, expected, new)?;
        if self.1.replace(false) {
            if self.0 .0.get() == 0 {
                self.0 .0.set(self.2);
            }
            return Err(EIO);
        }
        Ok(before)
    }

    fn peek(&self, number: u32) -> crate::internal::locks::word::LockWord {
        crate::internal::locks::home::WordAccess::peek(&self.0, number)
    }
}

kunit_case!(lite_test_lock_freed_by_uncertain_swap, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let taker = LockWord::held(
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    let word = UncertainLockWord(
        FakeLockWord(core::cell::Cell::new(0), false),
        Default::default(),
        taker.0,
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // Node 3 gets the lock from node 2 managed, with nobody behind it.
    let first = lock.reserve(&word, 0, r(2, 20));
    let Ok(Reserved::Granted(first)) = first else {
        check!(c, false);
        return;
    };
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(3, 30)), Ok(Reserved::Queued))
    );
    let next = lock.release(&word, 0, first.word_hold(), false);
    let Ok(Some(next)) = next else {
        check!(c, false);
        return;
    };
    check!(c, next.managed && !next.contended);
    // Its release frees the word, but the home cannot tell, and node 5
    // takes the free lock before the home looks again: the home still
    // leaves the lock to it.
    word.1.set(true);
    check!(
        c,
        matches!(lock.release(&word, 0, next.word_hold(), false), Ok(None))
    );
    check!(c, !lock.is_managed() && word.0 .0.get() == taker.0);
});

kunit_case!(lite_test_lock_owner_died, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let word = FakeLockWord(core::cell::Cell::new(0), false);
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // Node 2 holds the lock; node 3 and node 2 again wait, then node 4.
    let dead = LockWord::held(
        Hold {
            node: NodeId::new(2),
            number: 0,
        },
        false,
    );
    word.0.set(dead.0);
    for (node, waiter) in [(3u32, 1u64), (2, 2), (4, 3)] {
        check!(
            c,
            matches!(
                lock.reserve(&word, 0, r(node, waiter)),
                Ok(Reserved::Queued)
            )
        );
    }
    // Node 2 dies: its waiter leaves the queue, and its hold goes to the
    // first waiter of a live node, told that the owner died.
    let next = lock.node_gone(&word, 0, NodeId::new(2));
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(3, 1) && g.owner_died)
    );
    let Ok(Some(next)) = next else {
        return;
    };
    check!(c, lock.len() == 1 && lock.is_managed());
    // A node holding nothing dies: nothing changes.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(9)), Ok(None))
    );
    // The new holder releases normally: node 4 is told nothing, and holds
    // the lock managed.
    let last = lock.release(&word, 0, next.word_hold(), false);
    check!(
        c,
        matches!(last, Ok(Some(g)) if g.reservation == r(4, 3) && !g.owner_died)
    );
    let Ok(Some(last)) = last else {
        return;
    };
    check!(
        c,
        last.managed && lock.is_managed() && LockWord(word.0.get()).is_managed()
    );
    // Node 4 dies holding it with nobody waiting: the lock is orphaned, and
    // its next taker is told.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(4)), Ok(None))
    );
    check!(c, word.0.get() == LockWord::ORPHANED.0);
    check!(c, LockWord(word.0.get()).is_free());
    let taken = lock.reserve(&word, 0, r(5, 4));
    check!(c, matches!(taken, Ok(Reserved::Granted(g)) if g.owner_died));
    // Once released, the lock is plainly free again.
    if let Ok(Reserved::Granted(g)) = taken {
        check!(
            c,
            matches!(lock.release(&word, 0, g.word_hold(), false), Ok(None))
        );
    }
    check!(c, word.0.get() == LockWord::FREE.0);
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(5, 5)), Ok(Reserved::Granted(g)) if !g.owner_died)
    );
    // The holder of a managed lock dies with its waiters all gone too: the
    // lock is orphaned.
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(6, 6)), Ok(Reserved::Queued))
    );
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(6)), Ok(None))
    );
    check!(c, lock.is_managed() && lock.len() == 0);
    let hold = LockWord(word.0.get()).hold();
    check!(c, hold.is_some_and(|h| h.node == NodeId::new(5)));
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(5)), Ok(None))
    );
    check!(
        c,
        word.0.get() == LockWord::ORPHANED.0 && !lock.is_managed()
    );
});
