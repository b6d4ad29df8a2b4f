//! Races: calls that overlap with what another thread or process does to
//! the same resource.
//!
//! * an LMR freed, deregistered or revoked while a helper thread
//!   transfers with it;
//! * a buffer unmapped by a helper thread while the kernel uses it;
//! * a child process using its parent's handles, lock, descriptor, port
//!   and operation (none of which it inherits);
//! * a child killed while it waits for a lock the parent's thread holds,
//!   or while it waits for an RPC reply; a child server exiting with a
//!   request unanswered;
//! * a port unregistered while a helper thread waits to receive from it.
//!
//! Children are forked from a multi-threaded process, so they make raw
//! system calls only, on memory prepared before the fork (their results
//! go to the parent over a socket pair, written without allocating), and
//! leave with `_exit`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use libc::{EBADF, ECONNREFUSED, ECONNRESET, EINTR, ENOENT, EOWNERDEAD, ESHUTDOWN};
use lite::sys::{
    LiteLock, ASYNC_NOWAIT, CHUNK_SIZE, PERM_READ, PERM_SHARE, PERM_WRITE, RECV_NONBLOCK,
};

use super::calls::{raw_syscall, Syscall};
use super::effects::Effect;
use super::expect::{Expect, Value};
use super::generate::{OutParams, Planned, ThreadState, RUNNING_CALL_MS};
use super::memory::{BadPointer, BULK_AREA, PAGE, RACE_WINDOW};
use super::pool::{
    fuzz_name, pack_lock, race_port, size_class, LmrKind, LmrRecord, SHARED_PASSWORD,
};
use super::rng::Rng;
use super::shared::now_ms;
use super::worker::Caller;

/// Chance per step, in thousandths, that a thread runs a race.
pub(crate) const RACE_PER_MILLE: u32 = 25;
/// How long a waiter may take to learn that what it waits for is gone.
const WOKEN_WITHIN_MS: u64 = 15_000;
/// How long a lock may take to come back after its waiting child died
/// (other nodes may have queued for it meanwhile).
const LOCK_BACK_WITHIN_MS: u64 = 25_000;
/// How long a lock that did not come back during the run may take once
/// fuzzing is over: by then every thread gives back what it holds, so only
/// a turn that was never passed on keeps it away.
const LOCK_BACK_AFTER_RUN_MS: u64 = 40_000;
/// How long a child may take to report its results.
const CHILD_REPORT: Duration = Duration::from_secs(30);
/// How long a child may take to report that it is about to call.
const CHILD_READY: Duration = Duration::from_secs(10);
/// Name slots of the races, apart from those other fuzzers guess.
const RACE_NAME_SLOT: u64 = 0x100;

/// A race, as a thread runs it.
type Race = fn(&mut RaceRun<'_, '_, '_>);

/// The races a thread draws from.
const RACES: [Race; 9] = [
    |race| race.release_during_transfer(false),
    |race| race.release_during_transfer(true),
    |race| race.revoke_during_transfer(),
    |race| race.unmap_during_call(),
    |race| race.fork_with_handles(),
    |race| race.child_dies_waiting_for_lock(),
    |race| race.caller_dies_waiting_for_reply(),
    |race| race.server_dies_with_request(),
    |race| race.unregister_during_receive(),
];

/// Takes once more each lock that did not come back after its waiting
/// child was killed, now that fuzzing is over and every thread has given
/// back its locks; one that still stays away lost the child's turn.
pub(crate) fn recheck_locks_away(
    caller: &Caller<'_, '_>,
    helper: &Caller<'_, '_>,
    rng: &mut Rng,
    state: &mut ThreadState,
    out: &mut OutParams,
) {
    for (lock, step) in std::mem::take(&mut state.locks_away) {
        let mut race_run = RaceRun {
            caller,
            helper,
            rng: &mut *rng,
            step,
            state: &mut *state,
            out: &mut *out,
        };
        let since = now_ms();
        if race_run.take_lock(lock, LOCK_BACK_AFTER_RUN_MS) {
            race_run.give_back(lock);
        } else if now_ms() - since >= LOCK_BACK_AFTER_RUN_MS {
            caller.alarm(
                step,
                &format!("lite_lock({}:{})", lock.home, lock.number),
                "the lock did not come back after the child waiting for it was killed: \
                 not within 25 s, nor within 40 s after fuzzing ended",
            );
        }
    }
}

/// Runs one race, drawn from `rng`.
pub(crate) fn run(
    caller: &Caller<'_, '_>,
    helper: &Caller<'_, '_>,
    rng: &mut Rng,
    step: u64,
    state: &mut ThreadState,
    out: &mut OutParams,
) {
    let race = rng.choose(&RACES, RACES[0]);
    let mut race_run = RaceRun {
        caller,
        helper,
        rng,
        step,
        state,
        out,
    };
    race(&mut race_run);
}

struct RaceRun<'x, 'r, 'a> {
    caller: &'x Caller<'r, 'a>,
    helper: &'x Caller<'r, 'a>,
    rng: &'x mut Rng,
    step: u64,
    state: &'x mut ThreadState,
    out: &'x mut OutParams,
}

fn errno_of(ret: i64) -> i32 {
    if ret < 0 {
        ret.unsigned_abs() as i32
    } else {
        0
    }
}

impl RaceRun<'_, '_, '_> {
    /// Makes `call` on this thread: `value` on success, else a documented
    /// error.
    fn plain(&self, call: Syscall, args: [u64; 6], value: Value) -> i64 {
        self.caller.simple(self.step, call, args, value)
    }

    /// Makes `call`, which returns 0 on success and must succeed (or, if
    /// not `succeeds`, fail) for `reason`.
    fn certain(&self, call: Syscall, args: [u64; 6], succeeds: bool, reason: &'static str) -> i64 {
        let mut expect = Expect::value(Value::Zero);
        if succeeds {
            expect.must_succeed = Some(reason);
        } else {
            expect.must_fail = Some(reason);
        }
        let planned = Planned::running(call, args, expect, Effect::None);
        self.caller.run(self.step, &planned)
    }

    fn me(&self) -> u32 {
        self.caller.run.ctx.plan.me
    }

    fn thread(&self) -> usize {
        self.state.thread as usize
    }

    fn scratch(&self) -> u64 {
        self.caller.run.ctx.arena.scratch(self.thread())
    }

    /// This node or another member.
    fn some_node(&mut self) -> u32 {
        let nodes = self.caller.run.ctx.plan.nodes.max(1);
        self.rng.between(1, nodes.into()) as u32
    }

    fn race_port(&self) -> u32 {
        let plan = &self.caller.run.ctx.plan;
        race_port(plan.proc, plan.threads, self.state.thread)
    }

    /// Allocates (or registers, with `register`) a fresh LMR; its handle,
    /// size and password.
    fn fresh_lmr(&mut self, register: bool) -> Option<(u64, u64, u64)> {
        let password = self.rng.next_u64();
        let (call, args) = if register {
            let size = self.rng.choose(&[PAGE as u64, 65536], PAGE as u64);
            let bulk = self.caller.run.ctx.arena.bulk_area();
            let buf = (bulk + self.rng.below(BULK_AREA as u64 - size)) & !7;
            let permission = PERM_READ | PERM_WRITE | PERM_SHARE;
            (
                Syscall::RegisterLmr,
                [buf, size, permission, password, 0, 0],
            )
        } else {
            let size = self
                .rng
                .choose(&[PAGE as u64, 65536, CHUNK_SIZE + PAGE as u64], PAGE as u64);
            let node = self.some_node();
            (Syscall::AllocRemote, [node.into(), size, 0, password, 0, 0])
        };
        let ret = self.plain(call, args, Value::Positive);
        (ret > 0).then_some((ret as u64, args[1], password))
    }

    /// A few transfers with `handle` by the helper thread, from its own
    /// buffer; asynchronous ones are reaped at the end.
    fn helper_transfers(
        &mut self,
        handle: u64,
        size: u64,
        password: u64,
    ) -> Vec<(Syscall, [u64; 6])> {
        let buf = self.caller.run.ctx.arena.scratch(self.thread()) + (SCRATCHES_HALF as u64);
        (0..self.rng.between(3, 6))
            .map(|_| {
                let len = self.rng.between(1, size.min(16384));
                let offset = self.rng.below(size - len + 1);
                match self.rng.below(4) {
                    0 => (Syscall::RdmaWrite, [handle, buf, len, offset, 0, password]),
                    1 => (Syscall::RdmaRead, [handle, buf, len, offset, 0, password]),
                    2 => (Syscall::RemoteMemset, [handle, offset, len, 0xa5, 0, 0]),
                    _ => (
                        Syscall::RdmaWriteAsync,
                        [handle, buf, len, offset, 0, password],
                    ),
                }
            })
            .collect()
    }

    /// Runs `calls` on the helper thread while `main` runs on this one.
    fn with_helper<T>(
        &mut self,
        calls: &[(Syscall, [u64; 6])],
        main: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let helper = self.helper;
        let step = self.step;
        std::thread::scope(|scope| {
            scope.spawn(move || {
                helper.enter();
                let mut ops = Vec::new();
                for &(call, args) in calls {
                    let value = if call == Syscall::RdmaWriteAsync {
                        Value::Positive
                    } else {
                        Value::Zero
                    };
                    let ret = helper.simple(step, call, args, value);
                    if call == Syscall::RdmaWriteAsync && ret > 0 {
                        ops.push(ret as u64);
                    }
                }
                for op in ops {
                    helper.simple(step, Syscall::AsyncWait, [op, 0, 0, 0, 0, 0], Value::Zero);
                }
            });
            main(self)
        })
    }

    fn short_pause(&mut self) {
        std::thread::sleep(Duration::from_micros(self.rng.below(3000)));
    }

    /// Frees (or deregisters) an LMR while the helper transfers with it;
    /// afterwards the handle must be refused.
    fn release_during_transfer(&mut self, deregister: bool) {
        let Some((handle, size, password)) = self.fresh_lmr(deregister) else {
            return;
        };
        let calls = self.helper_transfers(handle, size, password);
        let (release, kind) = if deregister {
            (Syscall::DeregisterLmr, LmrKind::Registered)
        } else {
            (Syscall::Free, LmrKind::Allocated { atomic: false })
        };
        let ret = self.with_helper(&calls, |race| {
            race.short_pause();
            race.release_own(
                release,
                handle,
                "the process's own LMR, while another thread transfers with it",
            )
        });
        self.settle(handle, size, password, ret, kind);
    }

    /// Releases `handle`, which this race holds outside the pool, with
    /// `call`. That must succeed, unless another thread of the process
    /// released the same value meanwhile: one it made up or took from
    /// another process, which it may do (and then the handle is gone).
    fn release_own(&mut self, call: Syscall, handle: u64, reason: &'static str) -> i64 {
        let args = [handle, 0, 0, 0, 0, 0];
        let (ret, signaled) = self.caller.call(self.step, call, args, RUNNING_CALL_MS);
        let mut expect = Expect::value(Value::Zero);
        let taken = errno_of(ret) == EBADF && self.caller.run.pool().release_attempted(handle);
        if !taken {
            expect.must_succeed = Some(reason);
        }
        self.caller
            .check(self.step, call, &args, ret, signaled, &expect);
        if taken {
            // Released, though not by this call.
            0
        } else {
            ret
        }
    }

    /// After a release in a race: a released handle must be refused; one
    /// that was not released goes to the pool.
    fn settle(&mut self, handle: u64, size: u64, password: u64, released: i64, kind: LmrKind) {
        if released == 0 {
            self.caller.run.pool().release_lmr(handle);
            let args = [handle, self.scratch(), 8.min(size), 0, 0, password];
            self.certain(
                Syscall::RdmaRead,
                args,
                false,
                "a handle released earlier in the race",
            );
        } else {
            self.caller.run.pool().add_lmr(LmrRecord {
                handle,
                password,
                size: Some(size),
                permission: PERM_READ | PERM_WRITE | PERM_SHARE | lite::sys::PERM_ADMIN,
                kind,
            });
        }
    }

    /// Frees an LMR while the helper transfers through a mapping of it:
    /// the mapping must then be refused, and may still be dropped.
    fn revoke_during_transfer(&mut self) {
        let Some((handle, size, password)) = self.fresh_lmr(false) else {
            return;
        };
        let plan = self.caller.run.ctx.plan;
        let name = fuzz_name(
            plan.me,
            plan.proc,
            size_class(size),
            RACE_NAME_SLOT + u64::from(self.state.thread),
        );
        let permission = PERM_READ | PERM_WRITE;
        let publish = [name, handle, permission, password, 0, 0];
        let mapping = if self.plain(Syscall::AddAskMrTable, publish, Value::Zero) == 0 {
            let ask = [self.me().into(), name, permission, password, 0, 0];
            self.plain(Syscall::AskLmr, ask, Value::Positive)
        } else {
            -1
        };
        if mapping <= 0 {
            let ret = self.release_own(
                Syscall::Free,
                handle,
                "the process's own LMR, whose name was not mapped",
            );
            self.settle(
                handle,
                size,
                password,
                ret,
                LmrKind::Allocated { atomic: false },
            );
            return;
        }
        let mapping = mapping as u64;
        let calls = self.helper_transfers(mapping, size, password);
        let freed = self.with_helper(&calls, |race| {
            race.short_pause();
            race.release_own(
                Syscall::Free,
                handle,
                "the process's own LMR, while a mapping of it is in use",
            )
        });
        self.settle(
            handle,
            size,
            password,
            freed,
            LmrKind::Allocated { atomic: false },
        );
        if freed == 0 {
            let args = [mapping, self.scratch(), 8, 0, 0, password];
            self.certain(
                Syscall::RdmaRead,
                args,
                false,
                "a mapping whose LMR its owner freed",
            );
        }
        let unmapped = self.release_own(
            Syscall::UmapLmr,
            mapping,
            "a mapping may be dropped, also after it was revoked",
        );
        if unmapped == 0 {
            self.caller.run.pool().release_lmr(mapping);
        }
    }

    /// The helper unmaps the thread's race window while a call uses it.
    fn unmap_during_call(&mut self) {
        let arena = self.caller.run.ctx.arena;
        let thread = self.thread();
        let window = arena.race_window(thread);
        let len = self
            .rng
            .choose(&[PAGE as u64, RACE_WINDOW as u64], PAGE as u64);
        let target = self.caller.run.pool().lmrs.first().copied();
        let plan = self.caller.run.ctx.plan;
        let (call, args) = match (self.rng.below(4), target) {
            (0, Some(record)) if record.size.is_some() => {
                let len = len.min(record.size.unwrap_or(1));
                (
                    Syscall::RdmaRead,
                    [record.handle, window, len, 0, 0, record.password],
                )
            }
            (1, Some(record)) if record.size.is_some() => {
                let len = len.min(record.size.unwrap_or(1));
                (
                    Syscall::RdmaWrite,
                    [record.handle, window, len, 0, 0, record.password],
                )
            }
            (2, _) => {
                let name = fuzz_name(
                    plan.me,
                    plan.proc,
                    size_class(len),
                    RACE_NAME_SLOT + 0x80 + thread as u64,
                );
                (
                    Syscall::WrapAlloc,
                    [window, len, name, SHARED_PASSWORD, 0, 0],
                )
            }
            _ => (
                Syscall::RegisterLmr,
                [
                    window,
                    len,
                    PERM_READ | PERM_WRITE,
                    self.rng.next_u64(),
                    0,
                    0,
                ],
            ),
        };
        let delay = Duration::from_micros(self.rng.below(2000));
        let ret = std::thread::scope(|scope| {
            scope.spawn(move || {
                std::thread::sleep(delay);
                // Failing to unmap only makes the race a plain call.
                let _ = arena.revoke_window(thread);
            });
            let value = match call {
                Syscall::RdmaRead | Syscall::RdmaWrite => Value::Zero,
                _ => Value::Positive,
            };
            self.plain(call, args, value)
        });
        if let Err(error) = arena.restore_window(thread) {
            self.caller.alarm(
                self.step,
                "mapping the race window again",
                &error.to_string(),
            );
        }
        if ret > 0 && matches!(call, Syscall::RegisterLmr | Syscall::WrapAlloc) {
            let (kind, permission) = if call == Syscall::WrapAlloc {
                (
                    LmrKind::Wrapped { name: args[2] },
                    PERM_READ | PERM_WRITE | PERM_SHARE,
                )
            } else {
                (LmrKind::Registered, args[2])
            };
            self.caller.run.pool().add_lmr(LmrRecord {
                handle: ret as u64,
                password: args[3],
                size: Some(len),
                permission: permission | lite::sys::PERM_ADMIN,
                kind,
            });
        }
    }

    /// A child uses what its parent holds: every call must fail.
    fn fork_with_handles(&mut self) {
        let scratch = self.scratch();
        let mut calls: Vec<(Syscall, [u64; 6], &'static str)> = Vec::new();
        {
            let pool = self.caller.run.pool();
            for record in pool.lmrs.iter().take(3) {
                let len = record.size.unwrap_or(8).clamp(1, 16);
                calls.push((
                    Syscall::RdmaRead,
                    [record.handle, scratch, len, 0, 0, record.password],
                    "a read with the parent's handle",
                ));
                calls.push((
                    Syscall::RdmaWrite,
                    [record.handle, scratch, len, 0, 0, record.password],
                    "a write with the parent's handle",
                ));
            }
            if let Some(record) = pool.lmrs.iter().find(|r| r.kind.is_owner()) {
                calls.push((
                    Syscall::Free,
                    [record.handle, 0, 0, 0, 0, 0],
                    "a free of the parent's LMR",
                ));
            }
            if let Some(record) = pool.lmrs.iter().find(|r| !r.kind.is_owner()) {
                calls.push((
                    Syscall::UmapLmr,
                    [record.handle, 0, 0, 0, 0, 0],
                    "an unmap of the parent's mapping",
                ));
            }
            if let Some(&op) = pool.ops.first() {
                calls.push((
                    Syscall::AsyncWait,
                    [op, ASYNC_NOWAIT.into(), 0, 0, 0, 0],
                    "a reap of the parent's operation",
                ));
            }
            if let Some(&descriptor) = pool.descriptors.first() {
                calls.push((
                    Syscall::ReplyMessage,
                    [scratch, 8, descriptor, 0, 0, 0],
                    "a reply to the parent's descriptor",
                ));
            }
            if let Some(&(port, _)) = pool.ports.first() {
                calls.push((
                    Syscall::UnregisterApplication,
                    [port.into(), 0, 0, 0, 0, 0],
                    "closing the parent's port",
                ));
            }
        }
        if let Some(&lock) = self.state.held.first() {
            self.out.lock = lock;
            let pointer = std::ptr::addr_of_mut!(self.out.lock) as u64;
            calls.push((
                Syscall::Unlock,
                [pointer, 0, 0, 0, 0, 0],
                "an unlock of a lock the parent's thread holds",
            ));
        }
        if calls.is_empty() {
            return;
        }
        let numbers: Vec<(libc::c_long, [u64; 6])> = calls
            .iter()
            .map(|(call, args, _)| (call.number(), *args))
            .collect();
        let Some((child, mut parent_end)) = fork_child(|parent| {
            let mut results = [0i64; 16];
            for (slot, (number, args)) in results.iter_mut().zip(&numbers) {
                // SAFETY: the child's copy of the parent's arena and
                // out-parameters, used by nothing else in the child.
                *slot = unsafe { raw_syscall(*number, *args) };
            }
            send(parent, &results[..numbers.len()]);
        }) else {
            return;
        };
        let results = read_results(&mut parent_end, calls.len(), Some(CHILD_REPORT));
        let Some(results) = results else {
            self.caller.alarm(
                self.step,
                "a child using its parent's handles",
                "it reported nothing within 30 s",
            );
            self.kill_child(child, "the child using its parent's handles");
            return;
        };
        self.reap_child(child, false, "the child using its parent's handles");
        for ((call, args, reason), ret) in calls.iter().zip(results) {
            self.caller.run.ctx.own().count(*call, ret);
            let expect = Expect {
                must_fail: Some(reason),
                ..Expect::default()
            };
            self.caller
                .check(self.step, *call, args, ret, false, &expect);
        }
    }

    /// A child waits for a lock this thread holds and is killed; the lock
    /// must come back to this thread.
    fn child_dies_waiting_for_lock(&mut self) {
        let home = self.some_node();
        let pointer = std::ptr::addr_of_mut!(self.out.lock) as u64;
        let create = [home.into(), pointer, 0, 0, 0, 0];
        if self.plain(Syscall::CreateLock, create, Value::Range(0, 4095)) < 0 {
            return;
        }
        let lock = self.out.lock;
        {
            let mut pool = self.caller.run.pool();
            pool.add_lock(lock);
        }
        self.caller.run.ctx.own().locks.offer(pack_lock(lock));
        if !self.take_lock(lock, RUNNING_CALL_MS) {
            return;
        }
        let lock_number = super::calls::Syscall::Lock.number();
        let forked = fork_child(|parent| {
            send(parent, &[0]);
            // SAFETY: the child's copy of the out-parameters holds the lock.
            let ret = unsafe { raw_syscall(lock_number, [pointer, 0, 0, 0, 0, 0]) };
            send(parent, &[ret]);
        });
        let Some((child, mut child_end)) = forked else {
            self.give_back(lock);
            return;
        };
        let ready = read_results(&mut child_end, 1, Some(CHILD_READY)).is_some();
        if ready {
            std::thread::sleep(Duration::from_millis(self.rng.between(100, 400)));
        }
        self.kill_child(child, "the child waiting for a lock");
        if let Some([ret]) = read_results(&mut child_end, 1, None).map(|r| [r[0]]) {
            if ret == 0 || ret == -i64::from(EOWNERDEAD) {
                self.caller.alarm(
                    self.step,
                    &format!("lite_lock({}:{}) in a child", lock.home, lock.number),
                    "the child took a lock its parent's thread held",
                );
            }
        }
        drop(child_end);
        if !self.give_back(lock) {
            return;
        }
        // The child's turn must be passed on: the lock comes back. Others
        // learn the lock and may hold it for long, so a lock that stays
        // away is checked again after the run, when nobody holds it.
        let since = now_ms();
        if self.take_lock(lock, LOCK_BACK_WITHIN_MS) {
            self.give_back(lock);
        } else if now_ms() - since >= LOCK_BACK_WITHIN_MS {
            self.state.locks_away.push((lock, self.step));
        }
    }

    /// Locks `lock`, retrying after stray signals for up to `within_ms`;
    /// whether the thread holds it.
    fn take_lock(&mut self, lock: LiteLock, within_ms: u64) -> bool {
        let since = now_ms();
        loop {
            self.out.lock = lock;
            let pointer = std::ptr::addr_of_mut!(self.out.lock) as u64;
            let left = within_ms.saturating_sub(now_ms() - since).max(1);
            let expect = Expect::value(Value::Zero);
            let planned =
                Planned::of(Syscall::Lock, &[pointer], expect, Effect::None).blocking(left);
            let ret = self.caller.run(self.step, &planned);
            if ret == 0 || ret == -i64::from(EOWNERDEAD) {
                self.state.held.push(lock);
                return true;
            }
            if errno_of(ret) != EINTR || now_ms() - since >= within_ms {
                return false;
            }
        }
    }

    /// Unlocks `lock`, which this thread took; whether that worked.
    fn give_back(&mut self, lock: LiteLock) -> bool {
        self.out.lock = lock;
        let pointer = std::ptr::addr_of_mut!(self.out.lock) as u64;
        let args = [pointer, 0, 0, 0, 0, 0];
        let ret = self.certain(Syscall::Unlock, args, true, "a lock this thread took");
        self.state.held.retain(|&l| l != lock);
        if ret != 0 {
            self.state.uncertain.push(lock);
        }
        ret == 0
    }

    /// Registers the thread's race port; whether that worked.
    fn register_race_port(&mut self) -> bool {
        let name = self.caller.run.ctx.arena.bad_pointer(BadPointer::ReadOnly);
        let args = [self.race_port().into(), 4096, name, 8, 0, 0];
        self.plain(Syscall::RegisterApplication, args, Value::Zero) == 0
    }

    fn unregister_race_port(&mut self) {
        let args = [self.race_port().into(), 0, 0, 0, 0, 0];
        let reason = "the port this process registered";
        self.certain(Syscall::UnregisterApplication, args, true, reason);
    }

    /// A child calls this process's port and is killed while it waits for
    /// the reply; the request is then taken and answered, or not.
    fn caller_dies_waiting_for_reply(&mut self) {
        if !self.register_race_port() {
            return;
        }
        let me = u64::from(self.me());
        let port = u64::from(self.race_port());
        let scratch = self.scratch();
        let send_reply = Syscall::SendReplyImm.number();
        let forked = fork_child(|parent| {
            send(parent, &[0]);
            let args = [me, port, scratch, 64, scratch + 4096, 64];
            // SAFETY: the child's copy of the arena.
            let _ = unsafe { raw_syscall(send_reply, args) };
        });
        let Some((child, mut child_end)) = forked else {
            self.unregister_race_port();
            return;
        };
        if read_results(&mut child_end, 1, Some(CHILD_READY)).is_some() {
            std::thread::sleep(Duration::from_millis(self.rng.between(50, 300)));
        }
        let descriptor_address = std::ptr::addr_of_mut!(self.out.descriptor) as u64;
        let buf = self.caller.run.ctx.arena.async_area();
        let receive = [port, buf, 4096, descriptor_address, RECV_NONBLOCK.into(), 0];
        let early = self.rng.percent(50);
        let mut received = if early {
            self.plain(Syscall::ReceiveMessage, receive, Value::Range(0, 4096))
        } else {
            -1
        };
        self.kill_child(child, "the child waiting for a reply");
        drop(child_end);
        if received < 0 {
            received = self.plain(Syscall::ReceiveMessage, receive, Value::Range(0, 4096));
        }
        if received >= 0 && self.out.descriptor != 0 {
            let reply = [scratch, 16, self.out.descriptor, 0, 0, 0];
            self.plain(Syscall::ReplyMessage, reply, Value::Zero);
        }
        self.unregister_race_port();
    }

    /// A child serves this node's port and exits with the request taken
    /// but unanswered: the caller must be told.
    fn server_dies_with_request(&mut self) {
        let me = u64::from(self.me());
        let port = u64::from(self.race_port());
        let scratch = self.scratch();
        let name = self.caller.run.ctx.arena.bad_pointer(BadPointer::ReadOnly);
        let descriptor_address = std::ptr::addr_of_mut!(self.out.descriptor) as u64;
        let register = Syscall::RegisterApplication.number();
        let receive = Syscall::ReceiveMessage.number();
        let forked = fork_child(|parent| {
            // SAFETY: the child's copy of the arena's read-only page.
            let registered = unsafe { raw_syscall(register, [port, 4096, name, 8, 0, 0]) };
            send(parent, &[registered]);
            if registered == 0 {
                // SAFETY: the child's copy of the arena and out-parameters.
                let _ = unsafe {
                    raw_syscall(receive, [port, scratch, 4096, descriptor_address, 0, 0])
                };
            }
        });
        let Some((child, mut child_end)) = forked else {
            return;
        };
        let registered = read_results(&mut child_end, 1, Some(CHILD_READY)).map(|r| r[0]);
        drop(child_end);
        let register_args = [port, 4096, name, 8, 0, 0];
        if let Some(ret) = registered {
            self.caller
                .run
                .ctx
                .own()
                .count(Syscall::RegisterApplication, ret);
            self.caller.check(
                self.step,
                Syscall::RegisterApplication,
                &register_args,
                ret,
                false,
                &Expect::value(Value::Zero),
            );
        }
        if registered == Some(0) {
            let args = [me, port, scratch, 64, scratch + 8192, 64];
            let expect = Expect {
                must_fail: Some("the server process exits without replying"),
                ..Expect::default()
            };
            let ended = (
                &[ECONNRESET, ECONNREFUSED][..],
                "the server process exited without replying",
            );
            woken(
                self.caller,
                self.step,
                Syscall::SendReplyImm,
                args,
                expect,
                ended,
            );
        }
        // It exits once it took the request; if it never got one, it is killed.
        let deadline = now_ms() + 5_000;
        while now_ms() < deadline && !child_exited(child) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_child(child, "the child serving a port");
    }

    /// The helper waits to receive from a port this thread then closes:
    /// the receiver must be woken.
    fn unregister_during_receive(&mut self) {
        if !self.register_race_port() {
            return;
        }
        let port = u64::from(self.race_port());
        let buf = self.caller.run.ctx.arena.async_area() + 65536 * u64::from(self.state.thread);
        let mut descriptor = Box::new(0u64);
        let descriptor_address = std::ptr::addr_of_mut!(*descriptor) as u64;
        let args = [port, buf, 4096, descriptor_address, 0, 0];
        let helper = self.helper;
        let step = self.step;
        let pause = Duration::from_millis(self.rng.between(20, 200));
        std::thread::scope(|scope| {
            let receiver = scope.spawn(move || {
                helper.enter();
                let expect = Expect::value(Value::Range(0, 4096));
                let ended = (
                    &[ESHUTDOWN, ENOENT][..],
                    "the port was unregistered while the receiver waited",
                );
                woken(helper, step, Syscall::ReceiveMessage, args, expect, ended);
            });
            std::thread::sleep(pause);
            self.unregister_race_port();
            // Joined here, so that a receiver that panicked ends only itself.
            let _ = receiver.join();
        });
        drop(descriptor);
    }

    /// Kills `child`, which has not been reaped, and reaps it.
    fn kill_child(&mut self, child: libc::pid_t, what: &str) {
        // SAFETY: kills a child of this process that has not been reaped.
        unsafe { libc::kill(child, libc::SIGKILL) };
        self.reap_child(child, true, what);
    }

    /// Waits for `child`; an alarm if it died of a signal it was not sent
    /// (`killed`: SIGKILL was sent on purpose).
    fn reap_child(&mut self, child: libc::pid_t, killed: bool, what: &str) {
        let mut status = 0;
        loop {
            // SAFETY: waits for a child of this process.
            let ret = unsafe { libc::waitpid(child, &mut status, libc::__WALL) };
            if ret == child {
                break;
            }
            if ret < 0 && std::io::Error::last_os_error().raw_os_error() == Some(EINTR) {
                continue;
            }
            return;
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            if !(killed && signal == libc::SIGKILL) {
                self.caller.alarm(
                    self.step,
                    what,
                    &format!("it was killed by signal {signal}"),
                );
            }
        } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0 {
            self.caller.alarm(
                self.step,
                what,
                &format!("it exited with status {}", libc::WEXITSTATUS(status)),
            );
        }
    }
}

/// Half of a scratch buffer: the helper uses the upper half.
const SCRATCHES_HALF: usize = super::memory::SCRATCH / 2;

/// Forks a child that runs `body` (raw system calls only) with its
/// end of a socket pair, then leaves with `_exit(0)`. Returns the
/// child's pid and this process's end.
fn fork_child(body: impl FnOnce(&mut UnixStream)) -> Option<(libc::pid_t, UnixStream)> {
    let (ours, mut theirs) = UnixStream::pair().ok()?;
    // SAFETY: the child runs `body`, which makes raw system calls on
    // memory prepared before the fork, and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        drop(ours);
        body(&mut theirs);
        // SAFETY: ends the child without running the parent's cleanup.
        unsafe { libc::_exit(0) };
    }
    drop(theirs);
    (pid > 0).then_some((pid, ours))
}

/// Makes `call` on `caller`, which waits for something the race then
/// ends: unless a stray signal ended the wait early (nothing to judge
/// then), it may end only with the errors and reason of `ended`, besides
/// `expect`.
fn woken(
    caller: &Caller<'_, '_>,
    step: u64,
    call: Syscall,
    args: [u64; 6],
    mut expect: Expect,
    ended: (&'static [i32], &'static str),
) {
    let since = now_ms();
    let (ret, signaled) = caller.call(step, call, args, WOKEN_WITHIN_MS);
    let stray_signal = errno_of(ret) == EINTR && now_ms() - since < WOKEN_WITHIN_MS;
    if !stray_signal {
        expect.only = Some(ended);
    }
    caller.check(step, call, &args, ret, signaled, &expect);
}

/// Sends `values` to the other end (in a child: without allocating).
fn send(to: &mut UnixStream, values: &[i64]) {
    for value in values {
        if to.write_all(&value.to_ne_bytes()).is_err() {
            return;
        }
    }
}

/// Reads `count` results, waiting at most `timeout` for each part (not at
/// all if `None`); `None` if they do not all come.
fn read_results(
    from: &mut UnixStream,
    count: usize,
    timeout: Option<Duration>,
) -> Option<Vec<i64>> {
    from.set_nonblocking(timeout.is_none()).ok()?;
    from.set_read_timeout(timeout).ok()?;
    let mut bytes = vec![0u8; count * 8];
    from.read_exact(&mut bytes).ok()?;
    let values = bytes
        .chunks_exact(8)
        .map(|c| c.try_into().map(i64::from_ne_bytes));
    values.collect::<Result<_, _>>().ok()
}

/// Whether `child` has exited (without reaping it).
fn child_exited(child: libc::pid_t) -> bool {
    // SAFETY: `info` is written by waitid; WNOWAIT leaves the child unreaped.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ret = unsafe {
        libc::waitid(
            libc::P_PID,
            child as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is set by waitid when a child changed state.
    ret == 0 && unsafe { info.si_pid() } == child
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_cross_a_socket_pair() {
        let (mut ours, mut theirs) = UnixStream::pair().expect("socket pair");
        send(&mut theirs, &[-4, 7]);
        let second = Some(Duration::from_secs(1));
        assert_eq!(read_results(&mut ours, 2, second), Some(vec![-4, 7]));
        assert_eq!(read_results(&mut ours, 1, None), None, "nothing more yet");
        send(&mut theirs, &[9]);
        assert_eq!(read_results(&mut ours, 1, None), Some(vec![9]));
        drop(theirs);
        assert_eq!(read_results(&mut ours, 1, second), None);
    }

    #[test]
    fn a_forked_child_reports_and_exits() {
        let (child, mut child_end) = fork_child(|parent| send(parent, &[42])).expect("fork");
        let results = read_results(&mut child_end, 1, Some(Duration::from_secs(10)));
        assert_eq!(results, Some(vec![42]));
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let results = read_results(&mut child_end, 1, Some(Duration::from_secs(1)));
        assert_eq!(results, None);
    }
}
