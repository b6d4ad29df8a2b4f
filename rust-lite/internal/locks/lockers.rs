// SPDX-License-Identifier: GPL-2.0

//! The lockers' side of locks: where the locks this node's threads use
//! live, which thread holds each, and who waits for which turn.

use crate::internal::node_id::NodeId;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation},
    sync::{CondVar, Mutex},
};

use crate::{
    errno,
    internal::{atomics::AtomicTarget, util::slot_table::SlotTable},
};

/// A lock: the node keeping it and its number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockId {
    /// The node keeping the lock.
    pub(crate) home: NodeId,
    /// Its number there.
    pub(crate) number: u32,
}

impl LockId {
    /// The lock's key in this node's tables.
    pub(crate) fn key(self) -> u64 {
        (u64::from(self.home.get()) << 32) | u64::from(self.number)
    }
}

/// The thread holding a lock and the number of its hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holder {
    /// The holding thread.
    pub(crate) pid: i32,
    /// Its process.
    pub(crate) tgid: i32,
    /// The number of the hold, as the lock's word names it.
    pub(crate) hold: u32,
    /// Whether the home manages the lock during the hold.
    pub(crate) managed: bool,
}

impl Holder {
    /// The hold its release ends.
    pub(crate) fn released(&self) -> Taken {
        Taken {
            hold: self.hold,
            owner_died: false,
            managed: self.managed,
            contended: false,
        }
    }
}

/// A lock taken: the number of the hold, whether the last holder died
/// holding it, and whether the home manages it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The number of the hold.
    pub(crate) hold: u32,
    /// Whether the last holder's node died (or left) holding the lock.
    pub(crate) owner_died: bool,
    /// Whether the home manages the lock during the hold (see
    /// [`super::home::Grant::managed`]).
    pub(crate) managed: bool,
    /// Whether others waited behind this node when it got the lock (see
    /// [`super::home::Grant::contended`]).
    pub(crate) contended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Not yet.
    Waiting,
    /// The lock is the waiter's.
    Granted(Taken),
    /// The waiter left; its turn must be passed on.
    Abandoned,
    /// The lock's home is gone: the turn will never come.
    HomeGone,
}

struct Waiter {
    key: u64,
    turn: Turn,
}

/// What became of a hand-over to a waiter of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handed {
    /// The waiter holds the lock now.
    Taken,
    /// The waiter left (or never learnt it was queued): the hold must be
    /// ended for it.
    Abandoned,
    /// The waiter has the lock already or cannot take it (a duplicate).
    Unknown,
}

/// A lock this node's threads use.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// Where its word lives.
    target: AtomicTarget,
    /// Whether this node's last take of it was handed over with others
    /// waiting: the next take likely finds a queue too, and asks the home
    /// at once rather than first fail a compare-and-swap.
    contended: bool,
}

struct State {
    known: RBTree<u64, Known>,
    holders: RBTree<u64, Holder>,
    waiters: SlotTable<Waiter>,
}

/// The locks this node's threads use: where they live, who holds them and
/// who waits for them.
#[pin_data]
pub(crate) struct Lockers {
    /// Lock class `lite:locks`: see the lock order in [`crate::internal::core`].
    #[pin]
    state: Mutex<State>,
    #[pin]
    turns: CondVar,
}

impl Lockers {
    /// No lock known.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Lockers {
            state <- new_mutex!(
                State {
                    known: RBTree::new(),
                    holders: RBTree::new(),
                    waiters: SlotTable::new(),
                },
                "lite:locks"
            ),
            turns <- new_condvar!("lite:lock_turns"),
        })
    }

    pub(crate) fn target(&self, id: LockId) -> Option<AtomicTarget> {
        self.state.lock().known.get(&id.key()).map(|k| k.target)
    }

    /// Whether this node's last take of `id` found others waiting.
    pub(crate) fn expects_contention(&self, id: LockId) -> bool {
        self.state
            .lock()
            .known
            .get(&id.key())
            .is_some_and(|k| k.contended)
    }

    pub(crate) fn learn(&self, id: LockId, target: AtomicTarget) -> Result {
        let known = Known {
            target,
            contended: false,
        };
        let node = RBTreeNode::new(id.key(), known, GFP_KERNEL)?;
        let mut state = self.state.lock();
        if state.known.get(&id.key()).is_none() {
            state.known.insert(node);
        }
        Ok(())
    }

    pub(crate) fn held_by(&self, id: LockId, pid: i32) -> bool {
        self.state
            .lock()
            .holders
            .get(&id.key())
            .is_some_and(|h| h.pid == pid)
    }

    /// A waiter for `id`, before it asks the home for its turn.
    pub(crate) fn add_waiter(&self, id: LockId) -> Result<u64> {
        self.state.lock().waiters.insert(Waiter {
            key: id.key(),
            turn: Turn::Waiting,
        })
    }

    pub(crate) fn remove_waiter(&self, waiter: u64) {
        self.state.lock().waiters.remove(waiter);
    }

    /// Sleeps until `waiter`'s turn; on a signal, leaves instead.
    pub(crate) fn wait_turn(&self, waiter: u64) -> Result<Taken> {
        let mut state = self.state.lock();
        loop {
            let turn = state.waiters.get(waiter).map(|w| w.turn);
            match turn {
                Some(Turn::Granted(taken)) => {
                    state.waiters.remove(waiter);
                    return Ok(taken);
                }
                Some(Turn::Waiting) => {}
                Some(Turn::HomeGone) => {
                    state.waiters.remove(waiter);
                    return Err(errno::EHOSTDOWN());
                }
                Some(Turn::Abandoned) | None => return Err(EINVAL),
            }
            if self.turns.wait_interruptible(&mut state) {
                if let Some(w) = state.waiters.get_mut(waiter) {
                    if let Turn::Granted(taken) = w.turn {
                        state.waiters.remove(waiter);
                        return Ok(taken);
                    }
                    w.turn = Turn::Abandoned;
                }
                return Err(EINTR);
            }
        }
    }

    /// Gives up waiting (the home may have queued the waiter without
    /// saying so). Returns the lock if it was handed over meanwhile: the
    /// waiter holds it then.
    pub(crate) fn abandon(&self, waiter: u64) -> Option<Taken> {
        let mut state = self.state.lock();
        let w = state.waiters.get_mut(waiter)?;
        if let Turn::Granted(taken) = w.turn {
            state.waiters.remove(waiter);
            return Some(taken);
        }
        w.turn = Turn::Abandoned;
        None
    }

    /// The home node handed lock `id` to `waiter`.
    pub(crate) fn hand_over(&self, id: LockId, waiter: u64, taken: Taken) -> Handed {
        let mut state = self.state.lock();
        let turn = match state.waiters.get_mut(waiter) {
            Some(w) if w.key == id.key() => w.turn,
            // Its caller gave up before it learnt it was queued.
            _ => return Handed::Abandoned,
        };
        match turn {
            Turn::Waiting => {
                if let Some(w) = state.waiters.get_mut(waiter) {
                    w.turn = Turn::Granted(taken);
                }
                self.turns.notify_all();
                Handed::Taken
            }
            Turn::Abandoned => {
                state.waiters.remove(waiter);
                Handed::Abandoned
            }
            Turn::Granted(_) | Turn::HomeGone => Handed::Unknown,
        }
    }

    /// Fails every waiter for a lock kept by `home`, which is gone, and
    /// forgets where its locks live (a node rejoining under that id keeps
    /// other locks, at other addresses); holds of them are dropped.
    pub(crate) fn fail_home(&self, home: NodeId) {
        let mut state = self.state.lock();
        let mut keys = KVec::new();
        for (key, _) in state.known.iter() {
            if id_of_key(*key).home == home && keys.push(*key, GFP_KERNEL).is_err() {
                break;
            }
        }
        for key in keys.iter() {
            state.known.remove(key);
            state.holders.remove(key);
        }
        self.fail_waiters_locked(&mut state, home);
    }

    /// Fails every waiter for a lock kept by `home`, which cannot hand
    /// locks over any more.
    pub(crate) fn fail_waiters_of(&self, home: NodeId) {
        let mut state = self.state.lock();
        self.fail_waiters_locked(&mut state, home);
    }

    fn fail_waiters_locked(&self, state: &mut State, home: NodeId) {
        let mut failed = false;
        let mut ids = KVec::new();
        if ids.reserve(state.waiters.len(), GFP_KERNEL).is_err()
            || state.waiters.ids_into(&mut ids).is_err()
        {
            return;
        }
        for id in ids.iter() {
            let Some(w) = state.waiters.get_mut(*id) else {
                continue;
            };
            if id_of_key(w.key).home != home {
                continue;
            }
            match w.turn {
                Turn::Waiting => {
                    w.turn = Turn::HomeGone;
                    failed = true;
                }
                // Nobody will hand these over any more.
                Turn::Abandoned => {
                    state.waiters.remove(*id);
                }
                Turn::Granted(_) | Turn::HomeGone => {}
            }
        }
        if failed {
            self.turns.notify_all();
        }
    }

    /// Records `holder` of `id` in `room`, and whether others waited when
    /// it took the lock (`contended`).
    pub(crate) fn set_holder(
        &self,
        id: LockId,
        room: RBTreeNodeReservation<u64, Holder>,
        holder: Holder,
        contended: bool,
    ) {
        let mut state = self.state.lock();
        if let Some(known) = state.known.get_mut(&id.key()) {
            known.contended = contended;
        }
        state.holders.insert(room.into_node(id.key(), holder));
    }

    /// Removes the calling thread's hold of `id`.
    pub(crate) fn take_holder(&self, id: LockId, pid: i32) -> Result<Holder> {
        let mut state = self.state.lock();
        if state.known.get(&id.key()).is_none() {
            return Err(ENOENT);
        }
        if !state.holders.get(&id.key()).is_some_and(|h| h.pid == pid) {
            return Err(EPERM);
        }
        state.holders.remove(&id.key()).ok_or(EPERM)
    }

    /// Removes one lock held by a thread of `tgid` (of any process for
    /// `None`), if any.
    pub(crate) fn take_one_held_by(&self, tgid: Option<i32>) -> Option<(u64, Holder)> {
        let mut state = self.state.lock();
        let key = state
            .holders
            .iter()
            .find(|(_, h)| tgid.map_or(true, |tgid| h.tgid == tgid))
            .map(|(k, _)| *k)?;
        let holder = state.holders.remove(&key)?;
        Some((key, holder))
    }
}

/// The lock a key of this node's tables names.
pub(crate) fn id_of_key(key: u64) -> LockId {
    LockId {
        home: NodeId::new((key >> 32) as u32),
        number: key as u32,
    }
}
