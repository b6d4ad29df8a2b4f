//! The model of LITE's distributed locks, per-node operation statistics
//! and QoS parameters, following the "Synchronization" and "Priorities
//! and QoS" parts of the uapi header. (The atomics themselves work on the
//! LMR bytes, in the main model.)
//!
//! A lock is a FIFO lock: callers that find it taken queue up and are
//! handed the lock one at a time in the order they asked. The holder is
//! one thread of one process; locks a process holds are released when it
//! exits (its kernel is dropped). A lock whose holder's node fails or
//! leaves goes to the next waiter, or to the next caller if nobody waits,
//! with `EOWNERDEAD` instead of 0: it is held all the same, but what it
//! guarded may be half updated ([`Sync::holders_gone`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::{LiteStats, MAX_LOCKS};
use lite::Priority;

use super::{err, lock, refuse_if, Defects};
use crate::debugfs::{latency_bucket, parse_qos, DebugStats, Operation, QosParam};

/// The kernel waits forever; the model gives up (`-ETIMEDOUT`) so that a
/// broken host test fails instead of hanging.
const LOCK_LIMIT: Duration = Duration::from_secs(120);

/// Who holds or wants a lock: a thread of a process on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Owner {
    pub node: u32,
    pub process: u64,
    pub thread: ThreadId,
}

impl Owner {
    pub(super) fn current(node: u32, process: u64) -> Owner {
        Owner {
            node,
            process,
            thread: std::thread::current().id(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    ticket: u64,
    who: Owner,
}

#[derive(Default)]
struct TicketLock {
    /// At most one, unless the lock is not exclusive.
    holders: Vec<Owner>,
    next_ticket: u64,
    /// The waiters, in the order they asked.
    waiting: VecDeque<Waiter>,
    /// The waiter the lock was handed to, which has not woken up yet.
    handed_to: Option<u64>,
    /// Its last holder's node went: the next to take it is told so.
    owner_died: bool,
}

impl TicketLock {
    fn free(&self) -> bool {
        self.holders.is_empty() && self.handed_to.is_none()
    }

    fn pass_on(&mut self, lifo: bool) -> bool {
        if !self.free() {
            return false;
        }
        let next = if lifo {
            self.waiting.pop_back()
        } else {
            self.waiting.pop_front()
        };
        self.handed_to = next.map(|w| w.ticket);
        next.is_some()
    }

    /// What `who`'s `lite_lock` returns.
    fn take(&mut self, who: Owner) -> c_long {
        self.holders.push(who);
        if std::mem::take(&mut self.owner_died) {
            err(libc::EOWNERDEAD)
        } else {
            0
        }
    }
}

struct NodeState {
    /// The per-operation rows, and the counters of lock acquisitions and
    /// waits and of atomics (the others are the main model's).
    rows: DebugStats,
    qos: BTreeMap<&'static str, u64>,
}

impl NodeState {
    fn new() -> NodeState {
        NodeState {
            rows: DebugStats::new(),
            qos: QosParam::ALL
                .into_iter()
                .map(|p| (p.file_name(), p.default_value()))
                .collect(),
        }
    }
}

#[derive(Default)]
struct State {
    /// By (home node, number).
    locks: BTreeMap<(u32, u32), TicketLock>,
    next_number: BTreeMap<u32, u32>,
    nodes: BTreeMap<u32, NodeState>,
}

impl State {
    fn node(&mut self, node: u32) -> &mut NodeState {
        self.nodes.entry(node).or_insert_with(NodeState::new)
    }

    fn counts(&mut self, node: u32) -> &mut LiteStats {
        &mut self.node(node).rows.counters
    }
}

pub(super) struct Sync {
    state: Mutex<State>,
    /// Signalled whenever a lock is handed on.
    handed: Condvar,
}

impl Sync {
    pub(super) fn new() -> Sync {
        Sync {
            state: Mutex::new(State::default()),
            handed: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(super) fn create(&self, home: u32) -> Result<u32, c_long> {
        let mut state = self.state();
        let kept = state.locks.keys().filter(|(h, _)| *h == home).count();
        refuse_if(kept >= MAX_LOCKS as usize, libc::ENOSPC)?;
        let next = state.next_number.entry(home).or_insert(0);
        let number = *next;
        *next += 1;
        state.locks.insert((home, number), TicketLock::default());
        Ok(number)
    }

    pub(super) fn exists(&self, home: u32, number: u32) -> bool {
        self.state().locks.contains_key(&(home, number))
    }

    /// `lite_lock` of lock `key` by `who`: 0 or `-EOWNERDEAD` once `who`
    /// holds it.
    pub(super) fn lock(&self, who: Owner, key: (u32, u32), defects: Defects) -> c_long {
        let mut state = self.state();
        let entry = or_return!(state.locks.get_mut(&key), libc::ENOENT);
        fail_if!(entry.holders.contains(&who), libc::EDEADLK);
        if defects.lock_not_exclusive || (entry.free() && entry.waiting.is_empty()) {
            let ret = entry.take(who);
            state.counts(who.node).lock_acquires += 1;
            return ret;
        }
        let ticket = entry.next_ticket;
        entry.next_ticket += 1;
        entry.waiting.push_back(Waiter { ticket, who });
        let deadline = Instant::now() + LOCK_LIMIT;
        loop {
            let entry = or_return!(state.locks.get_mut(&key), libc::ENOENT);
            if entry.handed_to == Some(ticket) {
                entry.handed_to = None;
                let ret = entry.take(who);
                let counts = state.counts(who.node);
                counts.lock_acquires += 1;
                counts.lock_waits += 1;
                return ret;
            }
            // Dropped by `holders_gone` or `home_gone`: this caller's
            // node or the lock's home went.
            let dropped = !entry.waiting.iter().any(|w| w.ticket == ticket);
            fail_if!(dropped, libc::EHOSTDOWN);
            let now = Instant::now();
            if now >= deadline {
                entry.waiting.retain(|w| w.ticket != ticket);
                return err(libc::ETIMEDOUT);
            }
            state = self
                .handed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    pub(super) fn unlock(&self, who: Owner, key: (u32, u32), defects: Defects) -> c_long {
        let mut state = self.state();
        let entry = or_return!(state.locks.get_mut(&key), libc::ENOENT);
        let position = or_return!(entry.holders.iter().position(|&h| h == who), libc::EPERM);
        entry.holders.remove(position);
        if entry.pass_on(defects.lock_serves_newest_first) {
            self.handed.notify_all();
        }
        0
    }

    /// The holders and waiters `gone` picks are gone: their queued calls
    /// end, and each lock they held goes to its next waiter, or to whoever
    /// takes it next. If their node `died` (it failed or left) rather than
    /// their process exiting, the taker gets `EOWNERDEAD` (0 with the
    /// `lock_hides_owner_death` defect).
    pub(super) fn holders_gone(&self, gone: impl Fn(&Owner) -> bool, died: bool, defects: Defects) {
        let mut state = self.state();
        for entry in state.locks.values_mut() {
            entry.waiting.retain(|w| !gone(&w.who));
            let before = entry.holders.len();
            entry.holders.retain(|h| !gone(h));
            if entry.holders.len() != before {
                entry.owner_died |= died && !defects.lock_hides_owner_death;
                entry.pass_on(defects.lock_serves_newest_first);
            }
        }
        // Dropped waiters must wake up too.
        self.handed.notify_all();
    }

    /// The home of the locks of node `home` failed: their waiters stop
    /// waiting, with `-EHOSTDOWN`.
    pub(super) fn home_gone(&self, home: u32) {
        let mut state = self.state();
        for (_, entry) in state.locks.range_mut((home, 0)..=(home, u32::MAX)) {
            entry.waiting.clear();
        }
        self.handed.notify_all();
    }

    pub(super) fn count_atomic(&self, node: u32) {
        self.state().counts(node).atomics += 1;
    }

    pub(super) fn record(
        &self,
        node: u32,
        op: Operation,
        priority: Priority,
        bytes: u64,
        ret: c_long,
        elapsed: Duration,
    ) {
        let mut state = self.state();
        if let Some(row) = state.node(node).rows.op_mut(op, priority) {
            row.ops += 1;
            if ret < 0 {
                row.errors += 1;
            } else {
                row.bytes += bytes;
            }
            let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
            row.latency_us[latency_bucket(us)] += 1;
        }
    }

    /// The others are 0: the model runs nothing concurrently enough to
    /// throttle.
    pub(super) fn counters(&self, node: u32) -> LiteStats {
        let mut state = self.state();
        let locks = state.locks.keys().filter(|(h, _)| *h == node).count() as u64;
        LiteStats {
            locks,
            ..*state.counts(node)
        }
    }

    /// The statistics file of `node`, around `counters`.
    pub(super) fn stats_text(&self, node: u32, counters: LiteStats) -> String {
        let mut rows = self.state().node(node).rows.clone();
        rows.counters = counters;
        rows.to_string()
    }

    pub(super) fn read_qos(&self, node: u32, name: &str) -> Result<String, i32> {
        let mut state = self.state();
        let value = state
            .node(node)
            .qos
            .get(name)
            .copied()
            .ok_or(libc::ENOENT)?;
        Ok(format!("{value}\n"))
    }

    pub(super) fn write_qos(&self, node: u32, name: &str, text: &str) -> Result<(), i32> {
        let mut state = self.state();
        let slot = state.node(node).qos.get_mut(name).ok_or(libc::ENOENT)?;
        let value = parse_qos(text).map_err(|_| libc::EINVAL)?;
        if name == QosParam::Enabled.file_name() && value > 1 {
            return Err(libc::EINVAL);
        }
        *slot = value;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    const KEY: (u32, u32) = (1, 0);

    fn owner(node: u32) -> Owner {
        Owner::current(node, u64::from(node))
    }

    /// Locks with [`KEY`], created and held by node `holder`.
    fn held_by(holder: u32, defects: Defects) -> Sync {
        let sync = Sync::new();
        assert_eq!(sync.create(1), Ok(0));
        assert_eq!(sync.lock(owner(holder), KEY, defects), 0);
        sync
    }

    /// Waits until `count` callers queue for [`KEY`].
    fn wait_for_waiters(sync: &Sync, count: usize) {
        while sync.state().locks[&KEY].waiting.len() < count {
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Told with `EOWNERDEAD`, but with 0 under the defect that hides it,
    /// or when the holder's process exited (its node lives on).
    #[test]
    fn a_dead_holder_s_lock_nobody_waits_for_goes_to_the_next_caller() {
        let hides = Defects {
            lock_hides_owner_death: true,
            ..Defects::default()
        };
        let eownerdead = err(libc::EOWNERDEAD);
        let cases = [
            (true, Defects::default(), eownerdead),
            (true, hides, 0),
            (false, Defects::default(), 0),
        ];
        for (died, defects, told) in cases {
            let sync = held_by(3, defects);
            sync.holders_gone(|o| o.node == 3, died, defects);
            assert_eq!(sync.lock(owner(1), KEY, defects), told);
            assert_eq!(sync.unlock(owner(1), KEY, defects), 0);
            assert_eq!(sync.lock(owner(2), KEY, defects), 0);
            assert_eq!(sync.unlock(owner(2), KEY, defects), 0);
        }
    }

    #[test]
    fn a_gone_node_s_waiters_stop_waiting_and_others_are_untouched() {
        let defects = Defects::default();
        let sync = held_by(1, defects);
        thread::scope(|scope| {
            let waiter = scope.spawn(|| sync.lock(owner(3), KEY, defects));
            wait_for_waiters(&sync, 1);
            sync.holders_gone(|o| o.node == 3, true, defects);
            assert_eq!(waiter.join().expect("no panic"), err(libc::EHOSTDOWN));
        });
        assert_eq!(sync.unlock(owner(1), KEY, defects), 0);
        assert_eq!(sync.lock(owner(2), KEY, defects), 0);
    }
}
