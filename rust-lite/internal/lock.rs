// SPDX-License-Identifier: GPL-2.0

//! Distributed locks, the lockers' side (`lite_create_lock`,
//! `lite_ask_lock`, `lite_lock`, `lite_unlock`).
//!
//! See [`lock_home`](super::lock_home) for the protocol. An uncontended
//! lock and unlock are one RDMA atomic each; a waiter sleeps until the
//! lock's home node hands it the lock, in ticket order. The holder is a
//! thread: only it may unlock. Locks held by a process that exits are
//! released; a waiter interrupted by a signal leaves, and when its turn
//! comes the lock is passed on for it.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation},
    sync::{CondVar, Mutex},
};

use super::{
    atomics::{AtomicOp, AtomicTarget},
    cluster::{Cluster, ControlJob},
    control_wire::ControlMessage,
    lock_home::Reservation,
    op_stats::{OpKind, OpTimer, COUNTERS},
    priority::Priority,
    qos::admit,
    slot_table::SlotTable,
};
use crate::{errno, sys::sched};
use core::sync::atomic::Ordering;

/// A lock: the node keeping it and its number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockId {
    /// The node keeping the lock.
    pub(crate) home: u32,
    /// Its number there.
    pub(crate) number: u32,
}

impl LockId {
    fn key(self) -> u64 {
        (u64::from(self.home) << 32) | u64::from(self.number)
    }
}

/// The thread holding a lock and its ticket.
#[derive(Debug, Clone, Copy)]
struct Holder {
    pid: i32,
    tgid: i32,
    ticket: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Not yet.
    Waiting,
    /// The lock is the waiter's.
    Granted,
    /// The waiter left; its turn must be passed on.
    Abandoned,
}

struct Waiter {
    key: u64,
    ticket: u64,
    turn: Turn,
}

/// What became of a hand-over to a waiter of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handed {
    /// The waiter holds the lock now.
    Taken,
    /// The waiter left: the ticket must be released for it.
    Abandoned,
    /// No such waiter (a stale or forged message).
    Unknown,
}

struct State {
    known: RBTree<u64, AtomicTarget>,
    holders: RBTree<u64, Holder>,
    waiters: SlotTable<Waiter>,
}

/// The locks this node's threads use: where they live, who holds them and
/// who waits for them.
#[pin_data]
pub(crate) struct Locks {
    #[pin]
    state: Mutex<State>,
    #[pin]
    turns: CondVar,
}

impl Locks {
    /// No lock known.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Locks {
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

    fn target(&self, id: LockId) -> Option<AtomicTarget> {
        self.state.lock().known.get(&id.key()).copied()
    }

    fn learn(&self, id: LockId, target: AtomicTarget) -> Result {
        let node = RBTreeNode::new(id.key(), target, GFP_KERNEL)?;
        let mut state = self.state.lock();
        if state.known.get(&id.key()).is_none() {
            state.known.insert(node);
        }
        Ok(())
    }

    fn held_by(&self, id: LockId, pid: i32) -> bool {
        self.state
            .lock()
            .holders
            .get(&id.key())
            .is_some_and(|h| h.pid == pid)
    }

    /// A waiter for `id` whose ticket is not drawn yet.
    fn add_waiter(&self, id: LockId) -> Result<u64> {
        self.state.lock().waiters.insert(Waiter {
            key: id.key(),
            ticket: 0,
            turn: Turn::Waiting,
        })
    }

    fn set_ticket(&self, waiter: u64, ticket: u64) {
        if let Some(w) = self.state.lock().waiters.get_mut(waiter) {
            w.ticket = ticket;
        }
    }

    fn remove_waiter(&self, waiter: u64) {
        self.state.lock().waiters.remove(waiter);
    }

    /// Sleeps until `waiter`'s turn; on a signal, leaves instead.
    fn wait_turn(&self, waiter: u64) -> Result {
        let mut state = self.state.lock();
        loop {
            let turn = state.waiters.get(waiter).map(|w| w.turn);
            match turn {
                Some(Turn::Granted) => {
                    state.waiters.remove(waiter);
                    return Ok(());
                }
                Some(Turn::Waiting) => {}
                Some(Turn::Abandoned) | None => return Err(EINVAL),
            }
            if self.turns.wait_interruptible(&mut state) {
                if let Some(w) = state.waiters.get_mut(waiter) {
                    if w.turn == Turn::Granted {
                        state.waiters.remove(waiter);
                        return Ok(());
                    }
                    w.turn = Turn::Abandoned;
                }
                return Err(EINTR);
            }
        }
    }

    /// Gives up waiting (the reservation could not be sent).
    fn abandon(&self, waiter: u64) {
        if let Some(w) = self.state.lock().waiters.get_mut(waiter) {
            w.turn = Turn::Abandoned;
        }
    }

    /// The home node handed lock `id` to `waiter` with `ticket`.
    pub(crate) fn hand_over(&self, id: LockId, ticket: u64, waiter: u64) -> Handed {
        let mut state = self.state.lock();
        let turn = match state.waiters.get_mut(waiter) {
            Some(w) if w.key == id.key() && w.ticket == ticket => {
                let turn = w.turn;
                w.turn = Turn::Granted;
                turn
            }
            _ => return Handed::Unknown,
        };
        match turn {
            Turn::Waiting => {
                self.turns.notify_all();
                Handed::Taken
            }
            Turn::Abandoned => {
                state.waiters.remove(waiter);
                Handed::Abandoned
            }
            Turn::Granted => Handed::Unknown,
        }
    }

    fn set_holder(&self, node: RBTreeNode<u64, Holder>) {
        self.state.lock().holders.insert(node);
    }

    /// Removes the calling thread's hold of `id`.
    fn take_holder(&self, id: LockId, pid: i32) -> Result<Holder> {
        let mut state = self.state.lock();
        if state.known.get(&id.key()).is_none() {
            return Err(ENOENT);
        }
        if !state.holders.get(&id.key()).is_some_and(|h| h.pid == pid) {
            return Err(EPERM);
        }
        state.holders.remove(&id.key()).ok_or(EPERM)
    }

    /// Removes one lock held by a thread of `tgid`, if any.
    fn take_one_held_by(&self, tgid: i32) -> Option<(u64, Holder)> {
        let mut state = self.state.lock();
        let key = state
            .holders
            .iter()
            .find(|(_, h)| h.tgid == tgid)
            .map(|(k, _)| *k)?;
        let holder = state.holders.remove(&key)?;
        Some((key, holder))
    }
}

fn id_of_key(key: u64) -> LockId {
    LockId {
        home: (key >> 32) as u32,
        number: key as u32,
    }
}

impl Cluster {
    /// `lite_create_lock`: creates a lock kept by `home`.
    ///
    /// # Errors
    ///
    /// `EHOSTUNREACH` home not a member, `ENOSPC` home keeps the most locks
    /// it can, `ETIMEDOUT`, `ENOMEM`.
    pub(crate) fn create_lock(&self, home: u32) -> Result<LockId> {
        if home == self.node_id {
            let number = self.lock_home.create()?;
            return self.learn_local_lock(number);
        }
        let peer = self.peer(home)?;
        let reply = self
            .requests
            .call(&peer, |request_id| ControlMessage::CreateLock {
                request_id,
            })?;
        self.learn_lock(home, reply)
    }

    /// `lite_ask_lock`: finds lock `number` of `home`.
    ///
    /// # Errors
    ///
    /// `ENOENT` no such lock, `EHOSTUNREACH`, `ETIMEDOUT`.
    pub(crate) fn ask_lock(&self, home: u32, number: u32) -> Result<LockId> {
        let id = LockId { home, number };
        self.lock_target(id)?;
        Ok(id)
    }

    fn learn_local_lock(&self, number: u32) -> Result<LockId> {
        let id = LockId {
            home: self.node_id,
            number,
        };
        let target = AtomicTarget {
            node: self.node_id,
            addr: self.lock_home.word_addr(number)?,
            rkey: self.device.pd.global_rkey(),
        };
        self.locks.learn(id, target)?;
        Ok(id)
    }

    fn learn_lock(&self, home: u32, reply: ControlMessage) -> Result<LockId> {
        match reply {
            ControlMessage::LockReply {
                status: 0,
                number,
                addr,
                rkey,
                ..
            } => {
                let id = LockId { home, number };
                let target = AtomicTarget {
                    node: home,
                    addr,
                    rkey,
                };
                self.locks.learn(id, target)?;
                Ok(id)
            }
            ControlMessage::LockReply { status, .. } if status < 0 => {
                Err(Error::from_errno(status))
            }
            _ => Err(errno::EPROTO()),
        }
    }

    /// Where the ticket word of `id` lives, asking its home the first time.
    fn lock_target(&self, id: LockId) -> Result<AtomicTarget> {
        if let Some(target) = self.locks.target(id) {
            return Ok(target);
        }
        if id.home == self.node_id {
            self.learn_local_lock(id.number)?;
        } else {
            let peer = self.peer(id.home)?;
            let reply = self
                .requests
                .call(&peer, |request_id| ControlMessage::AskLock {
                    request_id,
                    number: id.number,
                })?;
            self.learn_lock(id.home, reply)?;
        }
        self.locks.target(id).ok_or(ENOENT)
    }

    /// Answers a peer's [`ControlMessage::CreateLock`] or
    /// [`ControlMessage::AskLock`].
    pub(crate) fn answer_lock_request(&self, message: ControlMessage) -> Option<ControlMessage> {
        let (request_id, number) = match message {
            ControlMessage::CreateLock { request_id } => (request_id, self.lock_home.create()),
            ControlMessage::AskLock { request_id, number } => (request_id, Ok(number)),
            _ => return None,
        };
        let found = number.and_then(|n| Ok((n, self.lock_home.word_addr(n)?)));
        Some(match found {
            Ok((number, addr)) => ControlMessage::LockReply {
                request_id,
                status: 0,
                number,
                addr,
                rkey: self.device.pd.global_rkey(),
            },
            Err(e) => ControlMessage::LockReply {
                request_id,
                status: e.to_errno(),
                number: 0,
                addr: 0,
                rkey: 0,
            },
        })
    }

    /// `lite_lock`: acquires `id` for the calling thread.
    ///
    /// # Errors
    ///
    /// `ENOENT` unknown lock, `EDEADLK` the thread holds it already,
    /// `EINTR` a signal arrived while waiting, `EHOSTUNREACH`, `EIO`.
    pub(crate) fn lock(&self, id: LockId) -> Result {
        let target = self.lock_target(id)?;
        let pid = sched::current_pid();
        if self.locks.held_by(id, pid) {
            return Err(errno::EDEADLK());
        }
        // Allocated before the ticket is drawn: once it is, the lock must be
        // recorded as held.
        let room = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let admission = admit(Priority::None);
        let timer = OpTimer::start(OpKind::Lock, Priority::None);
        let acquired = self.acquire(id, target);
        let ticket = timer.finish(admission, 0, acquired)?;
        let holder = Holder {
            pid,
            tgid: sched::current_tgid(),
            ticket,
        };
        self.locks.set_holder(room.into_node(id.key(), holder));
        COUNTERS.lock_acquires.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Draws a ticket and waits for its turn; returns the ticket.
    fn acquire(&self, id: LockId, target: AtomicTarget) -> Result<u64> {
        // The waiter exists before the ticket is drawn: once drawn, a turn
        // must always have somebody to take it or pass it on.
        let waiter = self.locks.add_waiter(id)?;
        let old = match self.atomic_on(target, AtomicOp::FetchAdd(1)) {
            Ok(old) => old,
            Err(e) => {
                self.locks.remove_waiter(waiter);
                return Err(e);
            }
        };
        let ticket = old.wrapping_add(1);
        if old == 0 {
            self.locks.remove_waiter(waiter);
            return Ok(ticket);
        }
        COUNTERS.lock_waits.fetch_add(1, Ordering::Relaxed);
        self.locks.set_ticket(waiter, ticket);
        let reservation = Reservation {
            node: self.node_id,
            ticket,
            waiter,
        };
        if let Err(e) = self.reserve_turn(id, reservation) {
            pr_err!("lock {}:{} may stay taken: {:?}\n", id.home, id.number, e);
            self.locks.abandon(waiter);
            return Err(e);
        }
        self.locks.wait_turn(waiter)?;
        Ok(ticket)
    }

    /// Tells `id`'s home that `reservation` waits for its turn.
    fn reserve_turn(&self, id: LockId, reservation: Reservation) -> Result {
        if id.home == self.node_id {
            if let Some(due) = self.lock_home.reserve(id.number, reservation)? {
                self.hand_lock(id.number, due);
            }
            return Ok(());
        }
        self.peer(id.home)?.send(&ControlMessage::ReserveLock {
            number: id.number,
            ticket: reservation.ticket,
            waiter: reservation.waiter,
        })
    }

    /// `lite_unlock`: releases `id`, held by the calling thread.
    ///
    /// # Errors
    ///
    /// `ENOENT` unknown lock, `EPERM` the thread does not hold it,
    /// `EHOSTUNREACH`, `EIO`.
    pub(crate) fn unlock(&self, id: LockId) -> Result {
        let target = self.lock_target(id)?;
        let holder = self.locks.take_holder(id, sched::current_pid())?;
        self.release_ticket(id, target, holder.ticket)
    }

    /// Ends the turn of `ticket` on `id`.
    fn release_ticket(&self, id: LockId, target: AtomicTarget, ticket: u64) -> Result {
        let old = self.atomic_on(
            target,
            AtomicOp::CompareSwap {
                expected: ticket,
                new_value: 0,
            },
        )?;
        if old == ticket {
            // No later ticket: the lock is free.
            return Ok(());
        }
        if id.home == self.node_id {
            if let Some(due) = self.lock_home.release(id.number, ticket)? {
                self.hand_lock(id.number, due);
            }
            return Ok(());
        }
        self.peer(id.home)?.send(&ControlMessage::ReleaseLock {
            number: id.number,
            ticket,
        })
    }

    /// Hands lock `number` of this node to the waiter of `due`.
    fn hand_lock(&self, number: u32, due: Reservation) {
        let id = LockId {
            home: self.node_id,
            number,
        };
        if due.node == self.node_id {
            self.lock_handed(id, due.ticket, due.waiter);
            return;
        }
        let sent = self.peer(due.node).and_then(|peer| {
            peer.send(&ControlMessage::AssignLock {
                home: self.node_id,
                number,
                ticket: due.ticket,
                waiter: due.waiter,
            })
        });
        if let Err(e) = sent {
            pr_err!(
                "cannot hand lock {} to node {}: {:?}\n",
                number,
                due.node,
                e
            );
        }
    }

    /// Lock `id` was handed to this node's `waiter`; a waiter that left has
    /// its turn passed on by a worker (this may run on the polling thread,
    /// which must not wait for RDMA).
    pub(crate) fn lock_handed(&self, id: LockId, ticket: u64, waiter: u64) {
        if self.locks.hand_over(id, ticket, waiter) != Handed::Abandoned {
            return;
        }
        let job = ControlJob::local(ControlMessage::AssignLock {
            home: id.home,
            number: id.number,
            ticket,
            waiter,
        });
        if self.control_jobs.try_submit(job).is_err() {
            pr_err!(
                "lock {}:{} may stay taken: too many jobs\n",
                id.home,
                id.number
            );
        }
    }

    /// Passes on a turn whose waiter left (run by a worker).
    pub(crate) fn pass_abandoned_turn(&self, id: LockId, ticket: u64) -> Result {
        let target = self.lock_target(id)?;
        self.release_ticket(id, target, ticket)
    }

    /// Handles a lockers' message to this node as a home.
    pub(crate) fn lock_home_message(&self, from: u32, message: ControlMessage) {
        let (number, due) = match message {
            ControlMessage::ReserveLock {
                number,
                ticket,
                waiter,
            } => (
                number,
                self.lock_home.reserve(
                    number,
                    Reservation {
                        node: from,
                        ticket,
                        waiter,
                    },
                ),
            ),
            ControlMessage::ReleaseLock { number, ticket } => {
                (number, self.lock_home.release(number, ticket))
            }
            _ => return,
        };
        match due {
            Ok(Some(due)) => self.hand_lock(number, due),
            Ok(None) => {}
            Err(e) => pr_err!(
                "lock {} message from node {} failed: {:?}\n",
                number,
                from,
                e
            ),
        }
    }

    /// Releases every lock held by threads of process `tgid`.
    pub(crate) fn release_locks_of(&self, tgid: i32) {
        while let Some((key, holder)) = self.locks.take_one_held_by(tgid) {
            let id = id_of_key(key);
            let released = self
                .lock_target(id)
                .and_then(|target| self.release_ticket(id, target, holder.ticket));
            if let Err(e) = released {
                pr_err!("cannot release lock {}:{}: {:?}\n", id.home, id.number, e);
            }
        }
    }

    /// Number of locks this node keeps.
    pub(crate) fn kept_locks(&self) -> usize {
        self.lock_home.count()
    }
}
