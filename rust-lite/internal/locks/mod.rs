// SPDX-License-Identifier: GPL-2.0

//! Distributed locks (`lite_create_lock`, `lite_ask_lock`, `lite_lock`,
//! `lite_unlock`): the lockers' side and, for the locks this node keeps,
//! the home side.
//!
//! See [`home`] for the protocol. An uncontended lock and unlock are one
//! RDMA atomic each; a waiter sleeps until the lock's home node hands it the
//! lock, in ticket order. The holder is a thread: only it may unlock. Locks
//! held by a process that exits are released; a waiter interrupted by a
//! signal leaves, and when its turn comes the lock is passed on for it.

pub(crate) mod home;
pub(crate) mod lockers;
pub(crate) mod wire;

use core::sync::atomic::Ordering;
use kernel::{c_str, prelude::*, rbtree::RBTreeNodeReservation, sync::Arc};

use self::{
    home::{LockHome, Reservation},
    lockers::{id_of_key, Handed, Holder, LockId, Lockers},
    wire::LockMessage,
};
use super::{
    atomics::{AtomicOp, AtomicTarget, Atomics},
    core::{
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Frame, Status},
        Core,
    },
    qos::{
        admission::admit,
        op_stats::{OpKind, OpTimer, COUNTERS},
        priority::Priority,
    },
    util::workers::{self, Job, Workers},
};
use crate::{errno, sys::sched};

/// Turns queued for passing on before a waiter that left keeps its lock
/// taken.
const PASSING_QUEUE: usize = 256;

/// A turn whose waiter left, to be passed on by the lock thread (the
/// polling thread, which may learn of it, must not wait for RDMA).
struct PassTurn {
    id: LockId,
    ticket: u64,
}

impl Job for PassTurn {
    type Context = Locks;

    fn run(self, locks: &Locks) {
        if let Err(e) = locks.pass_abandoned_turn(self.id, self.ticket) {
            pr_err!(
                "lock {}:{} may stay taken: {:?}\n",
                self.id.home,
                self.id.number,
                e
            );
        }
    }
}

/// Locks of a joined node.
#[pin_data]
pub(crate) struct Locks {
    core: Arc<Core>,
    atomics: Arc<Atomics>,
    /// Locks this node's threads use.
    #[pin]
    lockers: Lockers,
    /// Locks this node keeps.
    #[pin]
    home: LockHome,
    /// Turns to pass on.
    #[pin]
    passing: Workers<PassTurn>,
}

impl Locks {
    /// Locks over `core`, drawing tickets with `atomics`.
    pub(crate) fn new(core: Arc<Core>, atomics: Arc<Atomics>) -> Result<Arc<Self>> {
        let home = LockHome::new(&core.device().device)?;
        let passing = Workers::new(PASSING_QUEUE)?;
        let locks = Arc::pin_init(
            try_pin_init!(Locks {
                core,
                atomics,
                lockers <- Lockers::new(),
                home <- home,
                passing <- passing,
            }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&locks, c_str!("lite_locks"), 1, |locks| {
            locks.passing.serve(&locks)
        })?;
        Ok(locks)
    }

    /// `lite_create_lock`: creates a lock kept by `home`.
    ///
    /// # Errors
    ///
    /// `EHOSTUNREACH` home not a member, `ENOSPC` home keeps the most locks
    /// it can, `ETIMEDOUT`, `ENOMEM`.
    pub(crate) fn create_lock(&self, home: u32) -> Result<LockId> {
        if home == self.core.node_id() {
            let number = self.home.create()?;
            return self.learn_local_lock(number);
        }
        let peer = self.core.peer(home)?;
        let reply = self.core.requests.call(&peer, |request_id| {
            LockMessage::CreateLock { request_id }.to_frame()
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
            home: self.core.node_id(),
            number,
        };
        let target = AtomicTarget {
            node: self.core.node_id(),
            addr: self.home.word_addr(number)?,
            rkey: self.core.pd().global_rkey(),
        };
        self.lockers.learn(id, target)?;
        Ok(id)
    }

    fn learn_lock(&self, home: u32, reply: Frame) -> Result<LockId> {
        match LockMessage::from_frame(&reply) {
            Some(LockMessage::LockReply {
                status,
                number,
                addr,
                rkey,
                ..
            }) => {
                status.to_result()?;
                let id = LockId { home, number };
                let target = AtomicTarget {
                    node: home,
                    addr,
                    rkey,
                };
                self.lockers.learn(id, target)?;
                Ok(id)
            }
            _ => Err(reply.status().to_error()),
        }
    }

    /// Where the ticket word of `id` lives, asking its home the first time.
    fn lock_target(&self, id: LockId) -> Result<AtomicTarget> {
        if let Some(target) = self.lockers.target(id) {
            return Ok(target);
        }
        if id.home == self.core.node_id() {
            self.learn_local_lock(id.number)?;
        } else {
            let peer = self.core.peer(id.home)?;
            let reply = self.core.requests.call(&peer, |request_id| {
                LockMessage::AskLock {
                    request_id,
                    number: id.number,
                }
                .to_frame()
            })?;
            self.learn_lock(id.home, reply)?;
        }
        self.lockers.target(id).ok_or(ENOENT)
    }

    /// Answers a peer's [`LockMessage::CreateLock`] or
    /// [`LockMessage::AskLock`].
    fn answer_lock_request(&self, message: LockMessage) -> Option<LockMessage> {
        let (request_id, number) = match message {
            LockMessage::CreateLock { request_id } => (request_id, self.home.create()),
            LockMessage::AskLock { request_id, number } => (request_id, Ok(number)),
            _ => return None,
        };
        let found = number.and_then(|n| Ok((n, self.home.word_addr(n)?)));
        Some(match found {
            Ok((number, addr)) => LockMessage::LockReply {
                request_id,
                status: Status::OK,
                number,
                addr,
                rkey: self.core.pd().global_rkey(),
            },
            Err(e) => LockMessage::LockReply {
                request_id,
                status: e.into(),
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
        if self.lockers.held_by(id, pid) {
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
        self.lockers.set_holder(room.into_node(id.key(), holder));
        COUNTERS.lock_acquires.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Draws a ticket and waits for its turn; returns the ticket.
    fn acquire(&self, id: LockId, target: AtomicTarget) -> Result<u64> {
        // The waiter exists before the ticket is drawn: once drawn, a turn
        // must always have somebody to take it or pass it on.
        let waiter = self.lockers.add_waiter(id)?;
        let old = match self.atomics.atomic_on(target, AtomicOp::FetchAdd(1)) {
            Ok(old) => old,
            Err(e) => {
                self.lockers.remove_waiter(waiter);
                return Err(e);
            }
        };
        let ticket = old.wrapping_add(1);
        if old == 0 {
            self.lockers.remove_waiter(waiter);
            return Ok(ticket);
        }
        COUNTERS.lock_waits.fetch_add(1, Ordering::Relaxed);
        self.lockers.set_ticket(waiter, ticket);
        let reservation = Reservation {
            node: self.core.node_id(),
            ticket,
            waiter,
        };
        if let Err(e) = self.reserve_turn(id, reservation) {
            pr_err!("lock {}:{} may stay taken: {:?}\n", id.home, id.number, e);
            self.lockers.abandon(waiter);
            return Err(e);
        }
        self.lockers.wait_turn(waiter)?;
        Ok(ticket)
    }

    /// Tells `id`'s home that `reservation` waits for its turn.
    fn reserve_turn(&self, id: LockId, reservation: Reservation) -> Result {
        if id.home == self.core.node_id() {
            if let Some(due) = self.home.reserve(id.number, reservation)? {
                self.hand_lock(id.number, due);
            }
            return Ok(());
        }
        let reserve = LockMessage::ReserveLock {
            number: id.number,
            ticket: reservation.ticket,
            waiter: reservation.waiter,
        };
        self.core.peer(id.home)?.send(&reserve.to_frame())
    }

    /// `lite_unlock`: releases `id`, held by the calling thread.
    ///
    /// # Errors
    ///
    /// `ENOENT` unknown lock, `EPERM` the thread does not hold it,
    /// `EHOSTUNREACH`, `EIO`.
    pub(crate) fn unlock(&self, id: LockId) -> Result {
        let target = self.lock_target(id)?;
        let holder = self.lockers.take_holder(id, sched::current_pid())?;
        self.release_ticket(id, target, holder.ticket)
    }

    /// Ends the turn of `ticket` on `id`.
    fn release_ticket(&self, id: LockId, target: AtomicTarget, ticket: u64) -> Result {
        let old = self.atomics.atomic_on(
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
        if id.home == self.core.node_id() {
            if let Some(due) = self.home.release(id.number, ticket)? {
                self.hand_lock(id.number, due);
            }
            return Ok(());
        }
        let release = LockMessage::ReleaseLock {
            number: id.number,
            ticket,
        };
        self.core.peer(id.home)?.send(&release.to_frame())
    }

    /// Hands lock `number` of this node to the waiter of `due`.
    fn hand_lock(&self, number: u32, due: Reservation) {
        let id = LockId {
            home: self.core.node_id(),
            number,
        };
        if due.node == self.core.node_id() {
            self.lock_handed(id, due.ticket, due.waiter);
            return;
        }
        let sent = self.core.peer(due.node).and_then(|peer| {
            let assign = LockMessage::AssignLock {
                home: self.core.node_id(),
                number,
                ticket: due.ticket,
                waiter: due.waiter,
            };
            peer.send(&assign.to_frame())
        });
        if let Err(e) = sent {
            if e == errno::EHOSTDOWN() {
                // The waiter's node is gone: its turn goes to the next.
                self.pass_turn(id, due.ticket);
                return;
            }
            pr_err!(
                "cannot hand lock {} to node {}: {:?}\n",
                number,
                due.node,
                e
            );
        }
    }

    /// Lock `id` was handed to this node's `waiter`; a waiter that left has
    /// its turn passed on.
    fn lock_handed(&self, id: LockId, ticket: u64, waiter: u64) {
        if self.lockers.hand_over(id, ticket, waiter) == Handed::Abandoned {
            self.pass_turn(id, ticket);
        }
    }

    /// Has the lock thread pass on the turn of `ticket` on `id`, whose
    /// waiter left (this may run on the polling thread, which must not wait
    /// for RDMA).
    fn pass_turn(&self, id: LockId, ticket: u64) {
        if self.passing.try_submit(PassTurn { id, ticket }).is_err() {
            pr_err!(
                "lock {}:{} may stay taken: too many jobs\n",
                id.home,
                id.number
            );
        }
    }

    /// Passes on a turn whose waiter left (run by the lock thread).
    fn pass_abandoned_turn(&self, id: LockId, ticket: u64) -> Result {
        let target = self.lock_target(id)?;
        self.release_ticket(id, target, ticket)
    }

    /// Handles a lockers' message to this node as a home.
    fn lock_home_message(&self, from: u32, message: LockMessage) {
        let (number, due) = match message {
            LockMessage::ReserveLock {
                number,
                ticket,
                waiter,
            } => (
                number,
                self.home.reserve(
                    number,
                    Reservation {
                        node: from,
                        ticket,
                        waiter,
                    },
                ),
            ),
            LockMessage::ReleaseLock { number, ticket } => {
                (number, self.home.release(number, ticket))
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

    /// Releases every lock held by threads of process `tgid`, or by any
    /// thread for `None`.
    pub(crate) fn release_locks_of(&self, tgid: Option<i32>) {
        while let Some((key, holder)) = self.lockers.take_one_held_by(tgid) {
            let id = id_of_key(key);
            let released = self
                .lock_target(id)
                .and_then(|target| self.release_ticket(id, target, holder.ticket));
            if let Err(e) = released {
                if e != errno::EHOSTDOWN() {
                    pr_err!("cannot release lock {}:{}: {:?}\n", id.home, id.number, e);
                }
            }
        }
    }

    /// Stops the lock thread once it passed on the turns queued.
    pub(crate) fn close(&self) {
        self.passing.close();
    }

    /// Number of locks this node keeps.
    pub(crate) fn kept_locks(&self) -> usize {
        self.home.count()
    }
}

impl Subsystem for Locks {
    /// Waiters for locks the gone node kept fail with `EHOSTDOWN`; turns
    /// of this node's locks due to its waiters are passed on when they come.
    fn on_peer_gone(&self, node: u32) {
        self.lockers.fail_home(node);
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let Some(message) = LockMessage::from_frame(frame) else {
            return Handling::Done;
        };
        match message {
            LockMessage::CreateLock { .. } | LockMessage::AskLock { .. } => self
                .answer_lock_request(message)
                .map_or(Handling::Done, |reply| Handling::Answer(reply.to_frame())),
            LockMessage::ReserveLock { .. } | LockMessage::ReleaseLock { .. } => {
                self.lock_home_message(peer.node, message);
                Handling::Done
            }
            LockMessage::AssignLock {
                home,
                number,
                ticket,
                waiter,
            } => {
                // Only the lock's home hands it over.
                if home == peer.node {
                    self.lock_handed(LockId { home, number }, ticket, waiter);
                }
                Handling::Done
            }
            LockMessage::LockReply { .. } => Handling::Done,
        }
    }
}
