//! A fuzzing process: its threads, each drawing one call (or now and then
//! a race) per step from its own stream until the time is up, and the
//! interrupter that keeps their calls from blocking for long.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::calls::{args, issue, Syscall};
use super::effects::{apply, Effect};
use super::expect::{judge, Expect, Value};
use super::generate::{Context, OutParams, Planned, Planner, ThreadState, RUNNING_CALL_MS};
use super::memory::Arena;
use super::pool::Pool;
use super::races;
use super::report::{self, call_and_result};
use super::rng::Rng;
use super::shared::{now_ms, CallSlot, Shared, MAX_THREADS};
use super::signals;
use crate::deadline::{current_thread, signals_handled, try_install_interrupt_handler};

/// No thread's stream index.
const INTERRUPTER_STREAM: u32 = 0xffff;

#[derive(Clone, Copy)]
pub(crate) struct ProcessPlan {
    pub(crate) seed: u64,
    pub(crate) me: u32,
    pub(crate) nodes: u32,
    pub(crate) procs: u32,
    pub(crate) threads: u32,
    pub(crate) proc: u32,
    /// [`now_ms`].
    pub(crate) deadline_ms: u64,
    pub(crate) shared: &'static Shared,
}

pub(crate) struct Run<'a> {
    pub(crate) ctx: Context<'a>,
    pool: Mutex<Pool>,
}

impl Run<'_> {
    /// Also if a thread panicked holding it.
    pub(crate) fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn over(&self) -> bool {
        now_ms() >= self.ctx.plan.deadline_ms || self.ctx.plan.shared.stopped()
    }
}

pub(crate) struct Caller<'r, 'a> {
    pub(crate) run: &'r Run<'a>,
    /// Past [`MAX_THREADS`], the thread's helper's (in races).
    index: usize,
    pub(crate) slot: &'static CallSlot,
}

impl<'r, 'a> Caller<'r, 'a> {
    fn new(run: &'r Run<'a>, thread: u32, helper: bool) -> Self {
        let index = thread as usize + if helper { MAX_THREADS } else { 0 };
        let slot = &run.ctx.own().slots[index];
        Caller { run, index, slot }
    }

    /// The calling thread becomes the one signals interrupt.
    pub(crate) fn enter(&self) {
        self.slot.tid.store(current_thread(), Ordering::Relaxed);
    }

    /// The slot gets it interrupted and watched for hangs. Also whether a
    /// signal arrived meanwhile.
    pub(crate) fn call(
        &self,
        step: u64,
        call: Syscall,
        args: [u64; 6],
        interrupt_after_ms: u64,
    ) -> (i64, bool) {
        let before = signals_handled();
        self.slot.begin(call, step, &args, interrupt_after_ms);
        // SAFETY: the fuzzer's pointers point into the process's arena
        // (which nothing references and anything may be written to), into
        // the calling thread's out-parameters (not referenced during the
        // call), to the arena's read-only page, or are bad pointers the
        // kernel must refuse; see `memory` and `generate`.
        let ret = unsafe { issue(call, args) };
        self.slot.end();
        let signaled = signals_handled() != before;
        self.run.ctx.own().count(call, ret);
        (ret, signaled)
    }

    pub(crate) fn run(&self, step: u64, planned: &Planned) -> i64 {
        let Planned { call, args, .. } = *planned;
        let (ret, signaled) = self.call(step, call, args, planned.interrupt_after_ms);
        self.check(step, call, &args, ret, signaled, &planned.expect);
        ret
    }

    /// `value` on success, documented errors otherwise.
    pub(crate) fn simple(&self, step: u64, call: Syscall, args: [u64; 6], value: Value) -> i64 {
        let planned = Planned::of(call, &args, Expect::value(value), Effect::None);
        self.run(step, &planned)
    }

    pub(crate) fn check(
        &self,
        step: u64,
        call: Syscall,
        args: &[u64; 6],
        ret: i64,
        signaled: bool,
        expect: &Expect,
    ) {
        if let Err(reason) = judge(call, ret, signaled, expect) {
            self.alarm(step, &call_and_result(call, args, ret), &reason);
        }
    }

    pub(crate) fn alarm(&self, step: u64, what: &str, reason: &str) {
        let plan = &self.run.ctx.plan;
        let origin = report::origin(plan.me, plan.proc as usize, self.index, step);
        report::alarm(plan.shared, plan.proc as usize, &origin, what, reason);
    }
}

/// Counts when dropped, also when the thread panics.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) fn process_main(plan: ProcessPlan) -> i32 {
    let failed = |what: &str, error: std::io::Error| {
        let origin = format!("node {} proc {}", plan.me, plan.proc);
        let reason = error.to_string();
        report::alarm(plan.shared, plan.proc as usize, &origin, what, &reason);
        1
    };
    if let Err(error) = try_install_interrupt_handler() {
        return failed("sigaction(SIGUSR1)", error);
    }
    let threads = (plan.threads as usize).clamp(1, MAX_THREADS);
    let arena = match Arena::new(threads) {
        Ok(arena) => arena,
        Err(error) => return failed("mapping the arena", error),
    };
    let run = Run {
        ctx: Context {
            plan,
            arena: &arena,
        },
        pool: Mutex::new(Pool::default()),
    };
    let finished = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let interrupter_rng = Rng::for_stream(plan.seed, plan.me, plan.proc, INTERRUPTER_STREAM);
        let own = run.ctx.own();
        let finished = &finished;
        scope.spawn(move || {
            signals::interrupter(own, 2 * MAX_THREADS, interrupter_rng, || {
                finished.load(Ordering::Relaxed) == threads
            })
        });
        for thread in 0..threads as u32 {
            let run = &run;
            scope.spawn(move || {
                let _finished = Finished(finished);
                thread_main(run, thread);
            });
        }
    });
    0
}

fn thread_main(run: &Run<'_>, thread: u32) {
    let own = run.ctx.own();
    let caller = Caller::new(run, thread, false);
    caller.enter();
    let helper = Caller::new(run, thread, true);
    let plan = run.ctx.plan;
    let mut rng = Rng::for_stream(plan.seed, plan.me, plan.proc, thread);
    let mut state = ThreadState {
        thread,
        ..ThreadState::default()
    };
    let mut out = OutParams::new();
    let mut step = 0u64;
    while !run.over() {
        let mut step_rng = rng.split();
        if step_rng.per_mille(races::RACE_PER_MILLE) {
            races::run(&caller, &helper, &mut step_rng, step, &mut state, &mut out);
        } else {
            let planned = {
                let mut pool = run.pool();
                let planned = Planner {
                    rng: &mut step_rng,
                    ctx: &run.ctx,
                    pool: &pool,
                    state: &state,
                    out: &mut out,
                }
                .plan();
                if let Effect::Release { handle } = planned.effect {
                    pool.note_release_attempt(handle);
                }
                planned
            };
            let ret = caller.run(step, &planned);
            apply(&planned, ret, &mut run.pool(), &mut state, &out, own);
        }
        step += 1;
    }
    // The process's exit releases the rest; unlocking here takes the
    // ordinary path for the locks still held, and for those that may be.
    for lock in std::mem::take(&mut state.held) {
        let unlock = args(&[out.lock_record(lock)]);
        caller.simple(step, Syscall::Unlock, unlock, Value::Zero);
    }
    for lock in std::mem::take(&mut state.uncertain) {
        let unlock = args(&[out.lock_record(lock)]);
        // Refused unless this thread holds it: either is fine.
        caller.call(step, Syscall::Unlock, unlock, RUNNING_CALL_MS);
    }
    races::recheck_locks_away(&caller, &helper, &mut rng, &mut state, &mut out);
}
