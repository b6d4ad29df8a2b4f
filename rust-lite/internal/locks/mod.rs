// SPDX-License-Identifier: GPL-2.0

//! Distributed locks (`lite_create_lock`, `lite_ask_lock`, `lite_lock`,
//! `lite_unlock`): the lockers' side and, for the locks this node keeps,
//! the home side.
//!
//! See [`home`] for the protocol. An uncontended lock and unlock are one
//! RDMA atomic each, and none at all for a thread of the lock's home node
//! once that node holds it; a waiter sleeps until the lock's home node hands it the
//! lock, in the order waiters asked. The holder is a thread: only it may
//! unlock. Locks held by a process that exits are released; a waiter
//! interrupted by a signal leaves, and when its turn comes the lock is
//! passed on for it. A lock held by a node that dies or leaves goes to the
//! next waiter, whose `lite_lock` says so (`EOWNERDEAD`).

pub(crate) mod home;
pub(crate) mod lockers;
pub(crate) mod wire;
pub(crate) mod word;

use crate::internal::node_id::NodeId;
use core::sync::atomic::Ordering;
use kernel::{
    c_str, new_mutex,
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::{Arc, Mutex},
};

use self::{
    home::{Grant, LockHome, Reservation, Reserved, WordAccess},
    lockers::{id_of_key, Handed, Holder, LockId, Lockers, Taken},
    wire::LockMessage,
    word::{Hold, LockWord},
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
    quota::{
        amounts::{Amounts, Resource},
        keep_by_payer, Charge, Payer,
    },
    util::workers::{self, Job, Workers},
};
use crate::{errno, sys::sched};

/// Jobs queued for each lock thread before further ones are refused.
const LOCK_JOBS: usize = 256;

/// Times a request the home was too busy for is sent again, and the wait
/// in between: the home's queue drains in far less than their product.
const HOME_BUSY_TRIES: u32 = 100;
const HOME_BUSY_WAIT_MS: u32 = 10;

/// A hold whose waiter left before taking it, to be ended by the passing
/// thread (the polling thread, which learns of it, must not wait for RDMA).
struct PassOn {
    id: LockId,
    taken: Taken,
}

impl Job for PassOn {
    type Context = Locks;

    fn run(self, locks: &Locks) {
        if let Err(e) = locks.pass_on(self.id, self.taken) {
            if e != errno::EHOSTDOWN() {
                pr_err!(
                    "lock {}:{} may stay taken: {:?}\n",
                    self.id.home,
                    self.id.number,
                    e
                );
            }
        }
    }
}

/// Work of the home thread, which alone serves the locks this node keeps
/// for other nodes. It waits for RDMA atomics on their words (run by a
/// peer's control workers), never for another node's lock threads, so no
/// two nodes' lock threads wait for each other.
enum HomeJob {
    /// A waiter's or holder's request from `peer`.
    Request {
        peer: Arc<Peer>,
        message: LockMessage,
    },
    /// `node` is gone: end its holds and drop its waiters.
    NodeGone { node: NodeId },
}

impl Job for HomeJob {
    type Context = Locks;

    fn run(self, locks: &Locks) {
        match self {
            HomeJob::Request { peer, message } => {
                let Some((reply, granted)) = locks.serve_home_request(peer.node, message) else {
                    return;
                };
                // A reply that grants the lock is sent, so that a failure
                // moves the lock on; the others are posted, as the home
                // thread serves every node and need not wait for one's
                // acknowledgment (a lost one fails its request by timeout).
                let answered = if granted.is_some() {
                    peer.send(&reply)
                } else {
                    peer.post(&reply)
                };
                if let Err(e) = answered {
                    if e != errno::EHOSTDOWN() {
                        pr_err!("cannot answer node {}: {:?}\n", peer.node, e);
                    }
                    // Nobody learns of this grant: the lock goes on.
                    if let Some((number, grant)) = granted {
                        if let Some(next) = locks.end_hold_at_home(number, grant) {
                            locks.deliver(number, next);
                        }
                    }
                }
            }
            HomeJob::NodeGone { node } => {
                let words = HomeWords(locks);
                let reachable = locks
                    .home
                    .node_gone(&words, node, |number, grant| locks.deliver(number, grant));
                if !reachable {
                    // No peer is left to reach this node's lock words: the
                    // waiters for them would wait for nothing.
                    locks.lockers.fail_waiters_of(locks.core.node_id());
                }
            }
        }
    }
}

/// How `lite_lock` took a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// Its last holder released it.
    Released,
    /// Its last holder's node died or left holding it (`EOWNERDEAD`).
    OwnerDied,
}

impl Acquired {
    /// The result the C interfaces report: `EOWNERDEAD` with the lock held,
    /// as robust mutexes do.
    pub(crate) fn to_result(self) -> Result {
        match self {
            Acquired::Released => Ok(()),
            Acquired::OwnerDied => Err(errno::EOWNERDEAD()),
        }
    }
}

/// The words of the locks this node keeps, reached by RDMA atomics.
struct HomeWords<'a>(&'a Locks);

impl WordAccess for HomeWords<'_> {
    fn compare_swap(&self, number: u32, expected: LockWord, new: LockWord) -> Result<LockWord> {
        let locks = self.0;
        let (addr, rkey) = locks.home.word_remote_range(number)?;
        let target = AtomicTarget {
            node: locks.core.node_id(),
            addr,
            rkey,
        };
        let op = AtomicOp::CompareSwap {
            expected: expected.0,
            new_value: new.0,
        };
        locks.atomics.atomic_on(target, op).map(LockWord)
    }

    fn peek(&self, number: u32) -> LockWord {
        self.0.home.peek(number)
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
    /// Holds nobody here took, to end.
    #[pin]
    passing: Workers<PassOn>,
    /// Requests to this node as a home.
    #[pin]
    home_jobs: Workers<HomeJob>,
    /// What the locks this node's users created hold of their quotas, one
    /// charge per user: locks are never destroyed, so they count for the
    /// membership.
    /// Lock class `lite:created_locks`: see the lock order in [`crate::internal::core`].
    #[pin]
    created: Mutex<KVec<Charge>>,
}

impl Locks {
    /// Locks over `core`, taking them with `atomics`.
    pub(crate) fn new(core: Arc<Core>, atomics: Arc<Atomics>) -> Result<Arc<Self>> {
        let home = LockHome::new(&core.pool, core.node_id())?;
        let passing = Workers::new(LOCK_JOBS)?;
        let home_jobs = Workers::new(LOCK_JOBS)?;
        let locks = Arc::pin_init(
            try_pin_init!(Locks {
                core,
                atomics,
                lockers <- Lockers::new(),
                home <- home,
                passing <- passing,
                home_jobs <- home_jobs,
                created <- new_mutex!(KVec::new(), "lite:created_locks"),
            }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&locks, c_str!("lite_locks"), 1, |locks| {
            locks.passing.serve(&locks)
        })?;
        workers::start(&locks, c_str!("lite_lock_home"), 1, |locks| {
            locks.home_jobs.serve(&locks)
        })?;
        Ok(locks)
    }

    /// `lite_create_lock`: creates a lock kept by `home`.
    ///
    /// # Errors
    ///
    /// `EHOSTUNREACH` home not a member, `ENOSPC` home keeps the most locks
    /// it can, `EDQUOT` beyond `payer`'s locks quota, `ETIMEDOUT`, `ENOMEM`.
    pub(crate) fn create_lock(&self, payer: Payer, home: NodeId) -> Result<LockId> {
        let charge = self
            .core
            .quotas
            .charge(payer, Amounts::of(Resource::Locks, 1))?;
        let id = if home == self.core.node_id() {
            let number = self.home.create()?;
            self.learn_local_lock(number)?
        } else {
            let peer = self.core.peer(home)?;
            let reply = self.core.requests.call(&peer, |request_id| {
                LockMessage::CreateLock { request_id }.to_frame()
            })?;
            self.learn_lock(home, reply)?
        };
        if !charge.is_none() {
            // One charge per user. Without memory for it, the charge goes
            // back early, outside the lock.
            let refused = keep_by_payer(&mut self.created.lock(), charge);
            drop(refused);
        }
        Ok(id)
    }

    /// `lite_ask_lock`: finds lock `number` of `home`.
    ///
    /// # Errors
    ///
    /// `ENOENT` no such lock, `EHOSTUNREACH`, `ETIMEDOUT`.
    pub(crate) fn ask_lock(&self, home: NodeId, number: u32) -> Result<LockId> {
        let id = LockId { home, number };
        self.lock_target(id)?;
        Ok(id)
    }

    fn learn_local_lock(&self, number: u32) -> Result<LockId> {
        let id = LockId {
            home: self.core.node_id(),
            number,
        };
        let (addr, rkey) = self.home.word_addr(number)?;
        let target = AtomicTarget {
            node: self.core.node_id(),
            addr,
            rkey,
        };
        self.lockers.learn(id, target)?;
        Ok(id)
    }

    fn learn_lock(&self, home: NodeId, reply: Frame) -> Result<LockId> {
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

    /// Where the word of `id` lives, asking its home the first time.
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
            Ok((number, (addr, rkey))) => LockMessage::LockReply {
                request_id,
                status: Status::OK,
                number,
                addr,
                rkey,
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
    /// `EINTR` a signal arrived while waiting, `EAGAIN` the lock's word kept
    /// changing under the home, `EHOSTDOWN` the home is gone,
    /// `EHOSTUNREACH`, `EIO`.
    pub(crate) fn lock(&self, id: LockId) -> Result<Acquired> {
        let target = self.lock_target(id)?;
        let pid = sched::current_pid();
        if self.lockers.held_by(id, pid) {
            return Err(errno::EDEADLK());
        }
        // Allocated before the lock is taken: once it is, it must be
        // recorded as held.
        let room = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let admission = admit(Priority::None);
        let timer = OpTimer::start(OpKind::Lock, Priority::None);
        let acquired = self.acquire(id, target);
        let taken = timer.finish(admission, 0, acquired)?;
        let holder = Holder {
            pid,
            tgid: sched::current_tgid(),
            hold: taken.hold,
            managed: taken.managed,
        };
        self.lockers.set_holder(id, room, holder, taken.contended);
        COUNTERS.lock_acquires.fetch_add(1, Ordering::Relaxed);
        Ok(if taken.owner_died {
            Acquired::OwnerDied
        } else {
            Acquired::Released
        })
    }

    /// Takes `id` if it is free, else waits for the home to hand it over.
    /// A lock this node keeps is taken from its home directly (see
    /// [`home`]): its word is reached only through a peer. So is one whose
    /// last take here found others waiting: its word is likely managed, and
    /// a compare-and-swap would only fail.
    fn acquire(&self, id: LockId, target: AtomicTarget) -> Result<Taken> {
        let own = id.home == self.core.node_id();
        let mut waited = false;
        if !own && !self.lockers.expects_contention(id) {
            let mine = LockWord::held(
                Hold {
                    node: self.core.node_id(),
                    number: 0,
                },
                false,
            );
            let op = AtomicOp::CompareSwap {
                expected: LockWord::FREE.0,
                new_value: mine.0,
            };
            if self.atomics.atomic_on(target, op)? == LockWord::FREE.0 {
                return Ok(Taken {
                    hold: 0,
                    owner_died: false,
                    managed: false,
                    contended: false,
                });
            }
            waited = true;
        }
        // The waiter exists before the home hears of it: a hand-over must
        // always find somebody to take it or pass it on.
        let waiter = self.lockers.add_waiter(id)?;
        match self.reserve_turn(id, waiter) {
            Ok(Reserved::Granted(grant)) => {
                self.lockers.remove_waiter(waiter);
                if waited {
                    COUNTERS.lock_waits.fetch_add(1, Ordering::Relaxed);
                }
                Ok(grant.taken())
            }
            Ok(Reserved::Queued) => {
                COUNTERS.lock_waits.fetch_add(1, Ordering::Relaxed);
                self.lockers.wait_turn(waiter)
            }
            Err(e) => {
                if e != errno::ETIMEDOUT() {
                    self.lockers.remove_waiter(waiter);
                    return Err(e);
                }
                // The home may have queued it: its turn is passed on, unless
                // it came already.
                self.lockers.abandon(waiter).ok_or(e)
            }
        }
    }

    /// Asks `id`'s home for `waiter`'s turn.
    fn reserve_turn(&self, id: LockId, waiter: u64) -> Result<Reserved> {
        let me = self.core.node_id();
        if id.home == me {
            let reservation = Reservation { node: me, waiter };
            return self.home.reserve(&HomeWords(self), id.number, reservation);
        }
        let peer = self.core.peer(id.home)?;
        // Not interruptible: once sent, the home may queue the waiter, and
        // whether it did must not be lost (a wait for the turn follows, and
        // that one a signal ends).
        let reply = self.call_home(&peer, |request_id| LockMessage::ReserveLock {
            request_id,
            number: id.number,
            waiter,
        })?;
        match LockMessage::from_frame(&reply) {
            Some(LockMessage::ReserveReply {
                status,
                hold,
                granted,
                owner_died,
                managed,
                contended,
                ..
            }) => {
                status.to_result()?;
                if granted == 0 {
                    return Ok(Reserved::Queued);
                }
                Ok(Reserved::Granted(Grant {
                    reservation: Reservation { node: me, waiter },
                    hold,
                    owner_died: owner_died != 0,
                    managed: managed != 0,
                    contended: contended != 0,
                }))
            }
            _ => Err(reply.status().to_error()),
        }
    }

    /// `lite_unlock`: releases `id`, held by the calling thread.
    ///
    /// # Errors
    ///
    /// `ENOENT` unknown lock, `EPERM` the thread does not hold it,
    /// `EHOSTDOWN` the home is gone, `EHOSTUNREACH`, `EIO`.
    pub(crate) fn unlock(&self, id: LockId) -> Result {
        let target = self.lock_target(id)?;
        let holder = self.lockers.take_holder(id, sched::current_pid())?;
        self.end_hold_or_retry(id, target, holder.released())
    }

    /// Ends this node's hold `taken` of `id`; if that fails while the home
    /// lives, the lock thread tries again, so the lock is never left taken.
    fn end_hold_or_retry(&self, id: LockId, target: AtomicTarget, taken: Taken) -> Result {
        match self.end_hold(id, target, taken) {
            Err(e) if e != errno::EHOSTDOWN() => {
                if self.pass_on_later(id, taken) {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            result => result,
        }
    }

    /// Ends this node's hold `taken` of `id`: frees the lock if nobody
    /// waits, else has the home hand it on (telling the next holder that
    /// the owner died if `taken.owner_died`).
    fn end_hold(&self, id: LockId, target: AtomicTarget, taken: Taken) -> Result {
        let owner_died = taken.owner_died;
        let hold = Hold {
            node: self.core.node_id(),
            number: taken.hold,
        };
        // A word the home manages during the hold (as it does for its own
        // node's locks) never names a hold to free without the home.
        if !owner_died && !taken.managed && id.home != self.core.node_id() {
            let mine = LockWord::held(hold, false);
            let op = AtomicOp::CompareSwap {
                expected: mine.0,
                new_value: LockWord::FREE.0,
            };
            let before = LockWord(self.atomics.atomic_on(target, op)?);
            // Freed; or, unmanaged, no longer this node's: its home ended
            // the hold while this node was cut off from the cluster. A
            // managed lock names an earlier holder: the home knows.
            if before == mine || (!before.is_managed() && before.hold() != Some(hold)) {
                return Ok(());
            }
        }
        if id.home == self.core.node_id() {
            let grant = self
                .home
                .release(&HomeWords(self), id.number, hold, owner_died)?;
            if let Some(grant) = grant {
                self.deliver(id.number, grant);
            }
            return Ok(());
        }
        let peer = self.core.peer(id.home)?;
        // Not interruptible: an exiting process releases its locks with a
        // fatal signal pending.
        let reply = self.call_home(&peer, |request_id| LockMessage::ReleaseLock {
            request_id,
            number: id.number,
            hold: hold.number,
            owner_died: u32::from(owner_died),
        })?;
        reply.status().to_result()
    }

    /// Sends a request built by `build` to the home `peer` and returns the
    /// reply, asking again while the home is too busy to take it.
    fn call_home(&self, peer: &Peer, build: impl Fn(u64) -> LockMessage) -> Result<Frame> {
        let mut tries = 0;
        loop {
            let reply = self
                .core
                .requests
                .call_uninterruptible(peer, |request_id| build(request_id).to_frame())?;
            if reply.status() != Status::from(EBUSY) || tries >= HOME_BUSY_TRIES {
                return Ok(reply);
            }
            tries += 1;
            sched::sleep_uninterruptible_ms(HOME_BUSY_WAIT_MS);
        }
    }

    /// Hands lock `number` of this node over as `grant` says; a hold whose
    /// waiter is gone or left is ended at once, and the lock goes on.
    fn deliver(&self, number: u32, grant: Grant) {
        let me = self.core.node_id();
        let id = LockId { home: me, number };
        let mut next = Some(grant);
        while let Some(grant) = next.take() {
            let taken = grant.taken();
            let node = grant.reservation.node;
            let waiter = grant.reservation.waiter;
            let delivered = if node == me {
                self.lockers.hand_over(id, waiter, taken) != Handed::Abandoned
            } else {
                let assign = LockMessage::AssignLock {
                    home: me,
                    number,
                    hold: grant.hold,
                    owner_died: u32::from(grant.owner_died),
                    waiter,
                    managed: u32::from(grant.managed),
                    contended: u32::from(grant.contended),
                };
                // Sent, not posted: a grant that fails must move the lock
                // on (see `HomeJob::run`).
                match self
                    .core
                    .peer(node)
                    .and_then(|p| p.send(&assign.to_frame()))
                {
                    Ok(()) => true,
                    Err(e) => {
                        if e != errno::EHOSTDOWN() && e != errno::EHOSTUNREACH() {
                            pr_err!("cannot hand lock {} to node {}: {:?}\n", number, node, e);
                        }
                        // The lock goes on to the next waiter rather than
                        // stay with one that cannot learn of it.
                        false
                    }
                }
            };
            if !delivered {
                next = self.end_hold_at_home(number, grant);
            }
        }
    }

    /// Lock `id` was handed to this node's `waiter`; a hold its waiter
    /// does not take is passed on.
    fn lock_handed(&self, id: LockId, waiter: u64, taken: Taken) {
        if self.lockers.hand_over(id, waiter, taken) == Handed::Abandoned {
            self.pass_on_later(id, taken);
        }
    }

    /// Has the lock thread end hold `taken` of `id`, which nobody here
    /// takes (this may run on the polling thread, which must not wait for
    /// RDMA).
    fn pass_on_later(&self, id: LockId, taken: Taken) -> bool {
        let job = PassOn { id, taken };
        let queued = self.passing.try_submit(job).is_ok();
        if !queued {
            pr_err!(
                "lock {}:{} may stay taken: too many jobs\n",
                id.home,
                id.number
            );
        }
        queued
    }

    /// Ends a hold nobody took (run by the lock thread).
    fn pass_on(&self, id: LockId, taken: Taken) -> Result {
        let target = self.lock_target(id)?;
        self.end_hold(id, target, taken)
    }

    /// Serves a locker's request to this node as a home; returns the reply
    /// and the lock it grants, if any.
    fn serve_home_request(
        &self,
        from: NodeId,
        message: LockMessage,
    ) -> Option<(Frame, Option<(u32, Grant)>)> {
        let words = HomeWords(self);
        match message {
            LockMessage::CreateLock { .. } => self
                .answer_lock_request(message)
                .map(|reply| (reply.to_frame(), None)),
            LockMessage::ReserveLock {
                request_id,
                number,
                waiter,
            } => {
                let reservation = Reservation { node: from, waiter };
                let mut granted = None;
                let reply = match self.home.reserve(&words, number, reservation) {
                    Ok(reserved) => {
                        let grant = match reserved {
                            Reserved::Granted(grant) => Some(grant),
                            Reserved::Queued => None,
                        };
                        granted = grant.map(|g| (number, g));
                        LockMessage::ReserveReply {
                            request_id,
                            status: Status::OK,
                            number,
                            hold: grant.map_or(0, |g| g.hold),
                            granted: u32::from(grant.is_some()),
                            owner_died: u32::from(grant.is_some_and(|g| g.owner_died)),
                            managed: u32::from(grant.is_some_and(|g| g.managed)),
                            contended: u32::from(grant.is_some_and(|g| g.contended)),
                        }
                    }
                    Err(e) => LockMessage::ReserveReply {
                        request_id,
                        status: e.into(),
                        number,
                        hold: 0,
                        granted: 0,
                        owner_died: 0,
                        managed: 0,
                        contended: 0,
                    },
                };
                Some((reply.to_frame(), granted))
            }
            LockMessage::ReleaseLock {
                request_id,
                number,
                hold,
                owner_died,
            } => {
                // A node ends only its own holds.
                let hold = Hold {
                    node: from,
                    number: hold,
                };
                let status = match self.home.release(&words, number, hold, owner_died != 0) {
                    Ok(grant) => {
                        if let Some(grant) = grant {
                            self.deliver(number, grant);
                        }
                        Status::OK
                    }
                    Err(e) => e.into(),
                };
                Some((Frame::status_reply(request_id, status), None))
            }
            _ => None,
        }
    }

    /// Ends a hold of lock `number` of this node that its waiter will never
    /// take; returns the grant that hands the lock on, if any.
    fn end_hold_at_home(&self, number: u32, grant: Grant) -> Option<Grant> {
        self.home
            .release(
                &HomeWords(self),
                number,
                grant.word_hold(),
                grant.owner_died,
            )
            .unwrap_or_else(|e| {
                pr_err!("lock {} may stay taken: {:?}\n", number, e);
                None
            })
    }

    /// Releases every lock held by threads of process `tgid`, or by any
    /// thread for `None`.
    pub(crate) fn release_locks_of(&self, tgid: Option<i32>) {
        while let Some((key, holder)) = self.lockers.take_one_held_by(tgid) {
            let id = id_of_key(key);
            let released = self
                .lock_target(id)
                .and_then(|target| self.end_hold_or_retry(id, target, holder.released()));
            if let Err(e) = released {
                if e != errno::EHOSTDOWN() {
                    pr_err!("cannot release lock {}:{}: {:?}\n", id.home, id.number, e);
                }
            }
        }
    }

    /// Stops the lock threads once they ran the jobs queued.
    pub(crate) fn close(&self) {
        self.passing.close();
        self.home_jobs.close();
    }

    /// Number of locks this node keeps.
    pub(crate) fn kept_locks(&self) -> usize {
        self.home.count()
    }
}

impl Subsystem for Locks {
    /// Waiters for locks the gone node kept fail with `EHOSTDOWN`; its
    /// holds of this node's locks end with the owner dead and its waiters
    /// leave their queues.
    fn on_peer_gone(&self, node: NodeId) {
        self.lockers.fail_home(node);
        if self.home.count() == 0 {
            return;
        }
        // Waits while the queue is full (this is a membership thread, which
        // the home thread never waits for): the holds must end.
        if self.home_jobs.submit(HomeJob::NodeGone { node }).is_err() {
            pr_err!("locks held by gone node {} may stay taken\n", node);
        }
    }

    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let Some(message) = LockMessage::from_frame(frame) else {
            return Handling::Done;
        };
        match message {
            // Never waits: the lock count needs no lock.
            LockMessage::AskLock { .. } => self
                .answer_lock_request(message)
                .map_or(Handling::Done, |reply| Handling::Answer(reply.to_frame())),
            // The home's side waits for its table, held across RDMA atomics
            // on its words.
            LockMessage::CreateLock { request_id }
            | LockMessage::ReserveLock { request_id, .. }
            | LockMessage::ReleaseLock { request_id, .. } => {
                let job = HomeJob::Request {
                    peer: peer.clone(),
                    message,
                };
                match self.home_jobs.try_submit(job) {
                    Ok(()) => Handling::Done,
                    Err(_) => Handling::Answer(Frame::status_reply(request_id, EBUSY.into())),
                }
            }
            LockMessage::AssignLock {
                home,
                number,
                hold,
                owner_died,
                waiter,
                managed,
                contended,
            } => {
                // Only the lock's home hands it over.
                if home == peer.node {
                    let taken = Taken {
                        hold,
                        owner_died: owner_died != 0,
                        managed: managed != 0,
                        contended: contended != 0,
                    };
                    self.lock_handed(LockId { home, number }, waiter, taken);
                }
                Handling::Done
            }
            LockMessage::ReserveReply {
                status,
                number,
                hold,
                granted,
                owner_died,
                managed,
                contended,
                ..
            } => {
                // A grant whose waiter stopped waiting for it: pass it on.
                if status == Status::OK && granted != 0 {
                    let id = LockId {
                        home: peer.node,
                        number,
                    };
                    let taken = Taken {
                        hold,
                        owner_died: owner_died != 0,
                        managed: managed != 0,
                        contended: contended != 0,
                    };
                    self.pass_on_later(id, taken);
                }
                Handling::Done
            }
            LockMessage::LockReply { .. } => Handling::Done,
        }
    }
}
