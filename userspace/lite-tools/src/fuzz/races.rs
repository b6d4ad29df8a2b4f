//! Races: calls that overlap with what a helper thread or a child process
//! does to the same resource ([`RACES`]).
//!
//! Children are forked from a multi-threaded process, so they make raw
//! system calls only, on memory prepared before the fork (their results
//! go to the parent over a socket pair, written without allocating), and
//! leave with `_exit`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::MutexGuard;
use std::time::Duration;

use libc::{EBADF, ECONNREFUSED, ECONNRESET, EINTR, ENOENT, EOWNERDEAD, ESHUTDOWN};
use lite::sys::{
    LiteLock, ASYNC_NOWAIT, CHUNK_SIZE, PERM_ADMIN, PERM_READ, PERM_SHARE, PERM_WRITE,
    RECV_NONBLOCK,
};

use super::abnormal_end;
use super::calls::{args, raw_syscall, Syscall};
use super::effects::Effect;
use super::errnos::errno_of;
use super::expect::{Expect, Value};
use super::generate::{Context, OutParams, Planned, ThreadState, RUNNING_CALL_MS};
use super::memory::{BadPointer, BULK_AREA, PAGE, RACE_WINDOW};
use super::pool::{
    fuzz_name, pack_lock, race_port, size_class, LmrKind, LmrRecord, Pool, OWNER_PERMISSIONS,
    SHARED_PASSWORD,
};
use super::rng::Rng;
use super::shared::now_ms;
use super::worker::Caller;

/// Per step.
pub(crate) const RACE_PER_MILLE: u32 = 25;
const WOKEN_WITHIN_MS: u64 = 15_000;
/// Other nodes may have queued for the lock meanwhile.
const LOCK_BACK_WITHIN_MS: u64 = 25_000;
/// By then every thread gives back what it holds, so only a turn that was
/// never passed on keeps a lock away.
const LOCK_BACK_AFTER_RUN_MS: u64 = 40_000;
const CHILD_REPORT: Duration = Duration::from_secs(30);
const CHILD_READY: Duration = Duration::from_secs(10);
/// Apart from the name slots other fuzzers guess.
const RACE_NAME_SLOT: u64 = 0x100;
const ALLOCATED: LmrKind = LmrKind::Allocated { atomic: false };

type Race = fn(&mut RaceRun<'_, '_, '_>);

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

/// Now every thread has given back its locks, so a lock that still stays
/// away lost the killed child's turn.
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
        if race_run.stays_away(lock, LOCK_BACK_AFTER_RUN_MS) {
            let what = format!("lite_lock({}:{})", lock.home, lock.number);
            let reason = "the lock did not come back after the child waiting for it was killed: \
                          not within 25 s, nor within 40 s after fuzzing ended";
            caller.alarm(step, &what, reason);
        }
    }
}

pub(crate) fn run(
    caller: &Caller<'_, '_>,
    helper: &Caller<'_, '_>,
    rng: &mut Rng,
    step: u64,
    state: &mut ThreadState,
    out: &mut OutParams,
) {
    rng.choose(&RACES)(&mut RaceRun {
        caller,
        helper,
        rng,
        step,
        state,
        out,
    });
}

struct RaceRun<'x, 'r, 'a> {
    caller: &'x Caller<'r, 'a>,
    helper: &'x Caller<'r, 'a>,
    rng: &'x mut Rng,
    step: u64,
    state: &'x mut ThreadState,
    out: &'x mut OutParams,
}

impl<'a> RaceRun<'_, '_, 'a> {
    /// `value` on success, else a documented error.
    fn plain(&self, call: Syscall, given: &[u64], value: Value) -> i64 {
        self.caller.simple(self.step, call, args(given), value)
    }

    /// For a call that returns 0 on success.
    fn certain(&self, call: Syscall, given: &[u64], succeeds: bool, reason: &'static str) -> i64 {
        let expect = Expect {
            must_succeed: succeeds.then_some(reason),
            must_fail: (!succeeds).then_some(reason),
            ..Expect::value(Value::Zero)
        };
        let planned = Planned::of(call, given, expect, Effect::None);
        self.caller.run(self.step, &planned)
    }

    fn judge_child(&self, call: Syscall, args: &[u64; 6], ret: i64, expect: &Expect) {
        self.caller.run.ctx.own().count(call, ret);
        self.caller.check(self.step, call, args, ret, false, expect);
    }

    fn ctx(&self) -> &Context<'a> {
        &self.caller.run.ctx
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.caller.run.pool()
    }

    fn me(&self) -> u32 {
        self.ctx().plan.me
    }

    fn thread(&self) -> usize {
        self.state.thread as usize
    }

    fn scratch(&self) -> u64 {
        self.ctx().arena.scratch(self.thread())
    }

    fn some_node(&mut self) -> u32 {
        let nodes = self.ctx().plan.nodes.max(1);
        self.rng.between(1, nodes.into()) as u32
    }

    fn race_port(&self) -> u32 {
        let plan = &self.ctx().plan;
        race_port(plan.proc, plan.threads, self.state.thread)
    }

    fn race_name(&self, size: u64, slot: u64) -> u64 {
        let plan = &self.ctx().plan;
        fuzz_name(plan.me, plan.proc, size_class(size), RACE_NAME_SLOT + slot)
    }

    /// Handle, size and password.
    fn fresh_lmr(&mut self, register: bool) -> Option<(u64, u64, u64)> {
        let password = self.rng.next_u64();
        let page = PAGE as u64;
        let (call, args) = if register {
            let size = self.rng.choose(&[page, 65536]);
            let bulk = self.ctx().arena.bulk_area();
            let buf = (bulk + self.rng.below(BULK_AREA as u64 - size)) & !7;
            let permission = PERM_READ | PERM_WRITE | PERM_SHARE;
            (Syscall::RegisterLmr, [buf, size, permission, password])
        } else {
            let size = self.rng.choose(&[page, 65536, CHUNK_SIZE + page]);
            let node = self.some_node();
            (Syscall::AllocRemote, [node.into(), size, 0, password])
        };
        let ret = self.plain(call, &args, Value::Positive);
        (ret > 0).then_some((ret as u64, args[1], password))
    }

    /// Asynchronous ones are reaped at the end.
    fn helper_transfers(
        &mut self,
        handle: u64,
        size: u64,
        password: u64,
    ) -> Vec<(Syscall, [u64; 6])> {
        let buf = self.scratch() + (SCRATCHES_HALF as u64);
        (0..self.rng.between(3, 6))
            .map(|_| {
                let len = self.rng.between(1, size.min(16384));
                let offset = self.rng.below(size - len + 1);
                let transfer = [handle, buf, len, offset, 0, password];
                match self.rng.below(4) {
                    0 => (Syscall::RdmaWrite, transfer),
                    1 => (Syscall::RdmaRead, transfer),
                    2 => (Syscall::RemoteMemset, args(&[handle, offset, len, 0xa5])),
                    _ => (Syscall::RdmaWriteAsync, transfer),
                }
            })
            .collect()
    }

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
                    let asynchronous = call == Syscall::RdmaWriteAsync;
                    let value = if asynchronous {
                        Value::Positive
                    } else {
                        Value::Zero
                    };
                    let ret = helper.simple(step, call, args, value);
                    if asynchronous && ret > 0 {
                        ops.push(ret as u64);
                    }
                }
                for op in ops {
                    helper.simple(step, Syscall::AsyncWait, args(&[op]), Value::Zero);
                }
            });
            main(self)
        })
    }

    fn short_pause(&mut self) {
        std::thread::sleep(Duration::from_micros(self.rng.below(3000)));
    }

    fn release_during(
        &mut self,
        calls: &[(Syscall, [u64; 6])],
        call: Syscall,
        handle: u64,
        reason: &'static str,
    ) -> i64 {
        self.with_helper(calls, |race| {
            race.short_pause();
            race.release_own(call, handle, reason)
        })
    }

    /// Afterwards the handle must be refused.
    fn release_during_transfer(&mut self, deregister: bool) {
        let Some((handle, size, password)) = self.fresh_lmr(deregister) else {
            return;
        };
        let calls = self.helper_transfers(handle, size, password);
        let (release, kind) = if deregister {
            (Syscall::DeregisterLmr, LmrKind::Registered)
        } else {
            (Syscall::Free, ALLOCATED)
        };
        let reason = "the process's own LMR, while another thread transfers with it";
        let ret = self.release_during(&calls, release, handle, reason);
        self.settle(handle, size, password, ret, kind);
    }

    /// `handle` is outside the pool. The release must succeed, unless
    /// another thread of the process released the same value meanwhile: one
    /// it made up or took from another process, which it may do.
    fn release_own(&mut self, call: Syscall, handle: u64, reason: &'static str) -> i64 {
        let args = args(&[handle]);
        let (ret, signaled) = self.caller.call(self.step, call, args, RUNNING_CALL_MS);
        let mut expect = Expect::value(Value::Zero);
        let taken = errno_of(ret) == EBADF && self.pool().release_attempted(handle);
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

    /// A released handle must be refused; one that was not goes to the pool.
    fn settle(&mut self, handle: u64, size: u64, password: u64, released: i64, kind: LmrKind) {
        if released == 0 {
            self.pool().release_lmr(handle);
            let args = [handle, self.scratch(), 8.min(size), 0, 0, password];
            let reason = "a handle released earlier in the race";
            self.certain(Syscall::RdmaRead, &args, false, reason);
        } else {
            self.pool().add_lmr(LmrRecord {
                handle,
                password,
                size: Some(size),
                permission: OWNER_PERMISSIONS,
                kind,
            });
        }
    }

    /// The mapping must then be refused, and may still be dropped.
    fn revoke_during_transfer(&mut self) {
        let Some((handle, size, password)) = self.fresh_lmr(false) else {
            return;
        };
        let name = self.race_name(size, u64::from(self.state.thread));
        let permission = PERM_READ | PERM_WRITE;
        let publish = [name, handle, permission, password];
        let mapping = if self.plain(Syscall::AddAskMrTable, &publish, Value::Zero) == 0 {
            let ask = [self.me().into(), name, permission, password];
            self.plain(Syscall::AskLmr, &ask, Value::Positive)
        } else {
            -1
        };
        if mapping <= 0 {
            let reason = "the process's own LMR, whose name was not mapped";
            let ret = self.release_own(Syscall::Free, handle, reason);
            self.settle(handle, size, password, ret, ALLOCATED);
            return;
        }
        let mapping = mapping as u64;
        let calls = self.helper_transfers(mapping, size, password);
        let reason = "the process's own LMR, while a mapping of it is in use";
        let freed = self.release_during(&calls, Syscall::Free, handle, reason);
        self.settle(handle, size, password, freed, ALLOCATED);
        if freed == 0 {
            let args = [mapping, self.scratch(), 8, 0, 0, password];
            let reason = "a mapping whose LMR its owner freed";
            self.certain(Syscall::RdmaRead, &args, false, reason);
        }
        let reason = "a mapping may be dropped, also after it was revoked";
        if self.release_own(Syscall::UmapLmr, mapping, reason) == 0 {
            self.pool().release_lmr(mapping);
        }
    }

    fn unmap_during_call(&mut self) {
        let arena = self.ctx().arena;
        let thread = self.thread();
        let window = arena.race_window(thread);
        let len = self.rng.choose(&[PAGE as u64, RACE_WINDOW as u64]);
        let sized = self.pool().lmrs.first().copied();
        let sized = sized.filter(|record| record.size.is_some());
        // The call, and the kind and permission of the LMR it creates.
        let (call, args, creates) = match (self.rng.below(4), sized) {
            (roll @ 0..=1, Some(record)) => {
                let call = [Syscall::RdmaRead, Syscall::RdmaWrite][roll as usize];
                let len = len.min(record.size.unwrap_or(1));
                let transfer = [record.handle, window, len, 0, 0, record.password];
                (call, transfer, None)
            }
            (2, _) => {
                let name = self.race_name(len, 0x80 + thread as u64);
                let wrap = args(&[window, len, name, SHARED_PASSWORD]);
                let permission = PERM_READ | PERM_WRITE | PERM_SHARE;
                (
                    Syscall::WrapAlloc,
                    wrap,
                    Some((LmrKind::Wrapped { name }, permission)),
                )
            }
            _ => {
                let password = self.rng.next_u64();
                let permission = PERM_READ | PERM_WRITE;
                let register = args(&[window, len, permission, password]);
                (
                    Syscall::RegisterLmr,
                    register,
                    Some((LmrKind::Registered, permission)),
                )
            }
        };
        let delay = Duration::from_micros(self.rng.below(2000));
        let ret = std::thread::scope(|scope| {
            scope.spawn(move || {
                std::thread::sleep(delay);
                // Failing to unmap only makes the race a plain call.
                let _ = arena.remap_window(thread, false);
            });
            let value = if creates.is_some() {
                Value::Positive
            } else {
                Value::Zero
            };
            self.plain(call, &args, value)
        });
        if let Err(error) = arena.remap_window(thread, true) {
            let what = "mapping the race window again";
            self.caller.alarm(self.step, what, &error.to_string());
        }
        if let (true, Some((kind, permission))) = (ret > 0, creates) {
            self.pool().add_lmr(LmrRecord {
                handle: ret as u64,
                password: args[3],
                size: Some(len),
                permission: permission | PERM_ADMIN,
                kind,
            });
        }
    }

    /// A child inherits none of its parent's resources.
    fn fork_with_handles(&mut self) {
        use Syscall::*;
        let scratch = self.scratch();
        let mut calls: Vec<(Syscall, [u64; 6], &'static str)> = Vec::new();
        let lock = self.state.held.first().copied();
        if let Some(lock) = lock {
            self.out.lock = lock;
        }
        let lock_address = std::ptr::addr_of_mut!(self.out.lock) as u64;
        {
            let pool = self.pool();
            for record in pool.lmrs.iter().take(3) {
                let len = record.size.unwrap_or(8).clamp(1, 16);
                let transfer = [record.handle, scratch, len, 0, 0, record.password];
                calls.push((RdmaRead, transfer, "a read with the parent's handle"));
                calls.push((RdmaWrite, transfer, "a write with the parent's handle"));
            }
            let held = |owner| pool.lmrs.iter().find(|r| r.kind.is_owner() == owner);
            let free = held(true).map(|record| args(&[record.handle]));
            let unmap = held(false).map(|record| args(&[record.handle]));
            let reap = pool.ops.first().map(|&op| args(&[op, ASYNC_NOWAIT.into()]));
            let reply = pool.descriptors.first().map(|&d| args(&[scratch, 8, d]));
            let close = pool.ports.first().map(|&(port, _)| args(&[port.into()]));
            let unlock = lock.map(|_| args(&[lock_address]));
            // The calls on one resource of each other kind, where there is one.
            let singles = [
                (Free, free, "a free of the parent's LMR"),
                (UmapLmr, unmap, "an unmap of the parent's mapping"),
                (AsyncWait, reap, "a reap of the parent's operation"),
                (ReplyMessage, reply, "a reply to the parent's descriptor"),
                (UnregisterApplication, close, "closing the parent's port"),
                (
                    Unlock,
                    unlock,
                    "an unlock of a lock the parent's thread holds",
                ),
            ];
            for (call, args, reason) in singles {
                calls.extend(args.map(|args| (call, args, reason)));
            }
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
        let what = "the child using its parent's handles";
        let results = read_results(&mut parent_end, calls.len(), Some(CHILD_REPORT));
        let Some(results) = results else {
            let reason = "it reported nothing within 30 s";
            self.caller
                .alarm(self.step, "a child using its parent's handles", reason);
            self.kill_child(child, what);
            return;
        };
        self.reap_child(child, false, what);
        for ((call, args, reason), ret) in calls.iter().zip(results) {
            self.judge_child(*call, args, ret, &Expect::failing(reason));
        }
    }

    fn child_dies_waiting_for_lock(&mut self) {
        let home = self.some_node();
        let pointer = std::ptr::addr_of_mut!(self.out.lock) as u64;
        let create = [home.into(), pointer];
        if self.plain(Syscall::CreateLock, &create, Value::Range(0, 4095)) < 0 {
            return;
        }
        let lock = self.out.lock;
        self.pool().add_lock(lock);
        self.ctx().own().locks.offer(pack_lock(lock));
        if !self.take_lock(lock, RUNNING_CALL_MS) {
            return;
        }
        let lock_number = Syscall::Lock.number();
        let forked = fork_child(|parent| {
            send(parent, &[0]);
            // SAFETY: the child's copy of the out-parameters holds the lock.
            let ret = unsafe { raw_syscall(lock_number, args(&[pointer])) };
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
                let what = format!("lite_lock({}:{}) in a child", lock.home, lock.number);
                let reason = "the child took a lock its parent's thread held";
                self.caller.alarm(self.step, &what, reason);
            }
        }
        drop(child_end);
        if !self.give_back(lock) {
            return;
        }
        // The child's turn must be passed on: the lock comes back. Others
        // learn the lock and may hold it for long, so a lock that stays
        // away is checked again after the run, when nobody holds it.
        if self.stays_away(lock, LOCK_BACK_WITHIN_MS) {
            self.state.locks_away.push((lock, self.step));
        }
    }

    /// A lock call that failed sooner tells nothing.
    fn stays_away(&mut self, lock: LiteLock, within_ms: u64) -> bool {
        let since = now_ms();
        if self.take_lock(lock, within_ms) {
            self.give_back(lock);
            return false;
        }
        now_ms() - since >= within_ms
    }

    /// Retries after stray signals.
    fn take_lock(&mut self, lock: LiteLock, within_ms: u64) -> bool {
        let since = now_ms();
        loop {
            let pointer = self.out.lock_record(lock);
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

    fn give_back(&mut self, lock: LiteLock) -> bool {
        let pointer = self.out.lock_record(lock);
        let ret = self.certain(Syscall::Unlock, &[pointer], true, "a lock this thread took");
        self.state.held.retain(|&l| l != lock);
        if ret != 0 {
            self.state.uncertain.push(lock);
        }
        ret == 0
    }

    fn race_port_registration(&self, port: u64) -> [u64; 6] {
        let name = self.ctx().arena.bad_pointer(BadPointer::ReadOnly);
        args(&[port, 4096, name, 8])
    }

    fn register_race_port(&mut self) -> bool {
        let args = self.race_port_registration(self.race_port().into());
        self.plain(Syscall::RegisterApplication, &args, Value::Zero) == 0
    }

    fn unregister_race_port(&mut self) {
        let port = self.race_port().into();
        let reason = "the port this process registered";
        self.certain(Syscall::UnregisterApplication, &[port], true, reason);
    }

    /// The request is then taken and answered, or not.
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
        let buf = self.ctx().arena.async_area();
        let receive = [port, buf, 4096, descriptor_address, RECV_NONBLOCK.into()];
        let early = self.rng.percent(50);
        let mut received = if early {
            self.plain(Syscall::ReceiveMessage, &receive, Value::Range(0, 4096))
        } else {
            -1
        };
        self.kill_child(child, "the child waiting for a reply");
        drop(child_end);
        if received < 0 {
            received = self.plain(Syscall::ReceiveMessage, &receive, Value::Range(0, 4096));
        }
        if received >= 0 && self.out.descriptor != 0 {
            let reply = [scratch, 16, self.out.descriptor];
            self.plain(Syscall::ReplyMessage, &reply, Value::Zero);
        }
        self.unregister_race_port();
    }

    /// The caller must be told.
    fn server_dies_with_request(&mut self) {
        let me = u64::from(self.me());
        let port = u64::from(self.race_port());
        let scratch = self.scratch();
        let register_args = self.race_port_registration(port);
        let descriptor_address = std::ptr::addr_of_mut!(self.out.descriptor) as u64;
        let register = Syscall::RegisterApplication.number();
        let receive = Syscall::ReceiveMessage.number();
        let forked = fork_child(|parent| {
            // SAFETY: the child's copy of the arena's read-only page.
            let registered = unsafe { raw_syscall(register, register_args) };
            send(parent, &[registered]);
            if registered == 0 {
                let args = args(&[port, scratch, 4096, descriptor_address]);
                // SAFETY: the child's copy of the arena and out-parameters.
                let _ = unsafe { raw_syscall(receive, args) };
            }
        });
        let Some((child, mut child_end)) = forked else {
            return;
        };
        let registered = read_results(&mut child_end, 1, Some(CHILD_READY)).map(|r| r[0]);
        drop(child_end);
        if let Some(ret) = registered {
            let expect = Expect::value(Value::Zero);
            self.judge_child(Syscall::RegisterApplication, &register_args, ret, &expect);
        }
        if registered == Some(0) {
            let args = [me, port, scratch, 64, scratch + 8192, 64];
            let expect = Expect::failing("the server process exits without replying");
            let reason = "the server process exited without replying";
            let ended = (&[ECONNRESET, ECONNREFUSED][..], reason);
            let (caller, step) = (self.caller, self.step);
            woken(caller, step, Syscall::SendReplyImm, args, expect, ended);
        }
        // It exits once it took the request; if it never got one, it is killed.
        let deadline = now_ms() + 5_000;
        while now_ms() < deadline && !child_exited(child) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_child(child, "the child serving a port");
    }

    /// The receiver must be woken.
    fn unregister_during_receive(&mut self) {
        if !self.register_race_port() {
            return;
        }
        let port = u64::from(self.race_port());
        let buf = self.ctx().arena.async_area() + 65536 * u64::from(self.state.thread);
        let mut descriptor = Box::new(0u64);
        let descriptor_address = std::ptr::addr_of_mut!(*descriptor) as u64;
        let args = args(&[port, buf, 4096, descriptor_address]);
        let helper = self.helper;
        let step = self.step;
        let pause = Duration::from_millis(self.rng.between(20, 200));
        std::thread::scope(|scope| {
            let receiver = scope.spawn(move || {
                helper.enter();
                let expect = Expect::value(Value::Range(0, 4096));
                let reason = "the port was unregistered while the receiver waited";
                let ended = (&[ESHUTDOWN, ENOENT][..], reason);
                woken(helper, step, Syscall::ReceiveMessage, args, expect, ended);
            });
            std::thread::sleep(pause);
            self.unregister_race_port();
            // Joined here, so that a receiver that panicked ends only itself.
            let _ = receiver.join();
        });
        drop(descriptor);
    }

    fn kill_child(&mut self, child: libc::pid_t, what: &str) {
        // SAFETY: kills a child of this process that has not been reaped.
        unsafe { libc::kill(child, libc::SIGKILL) };
        self.reap_child(child, true, what);
    }

    /// An alarm if it died of a signal it was not sent (`killed`: SIGKILL
    /// was).
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
        let sent = killed && libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL;
        if let Some(end) = abnormal_end(status).filter(|_| !sent) {
            self.caller.alarm(self.step, what, &format!("it {end}"));
        }
    }
}

/// The helper uses the upper half.
const SCRATCHES_HALF: usize = super::memory::SCRATCH / 2;

/// `body` makes raw system calls only; the child leaves with `_exit(0)`.
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

/// Without allocating, for a child.
fn send(to: &mut UnixStream, values: &[i64]) {
    for value in values {
        if to.write_all(&value.to_ne_bytes()).is_err() {
            return;
        }
    }
}

/// Waits up to `timeout` for each part (not at all if `None`).
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

/// Without reaping it.
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
    fn a_forked_child_reports_and_ends_normally_only_with_status_0() {
        let (child, mut child_end) = fork_child(|parent| send(parent, &[42])).expect("fork");
        let results = read_results(&mut child_end, 1, Some(Duration::from_secs(10)));
        assert_eq!(results, Some(vec![42]));
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert_eq!(abnormal_end(status), None);
        let ends = [1 << 8, libc::SIGSEGV].map(|status| abnormal_end(status).unwrap_or_default());
        assert_eq!(ends, ["exited with status 1", "was killed by signal 11"]);
        let results = read_results(&mut child_end, 1, Some(Duration::from_secs(1)));
        assert_eq!(results, None);
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
}
