//! Synchronization, priorities and the statistics file: a counter on node
//! 1 incremented under a LITE lock by threads and processes of every node;
//! fetch-add and compare-swap totals; a barrier reused many times; lock
//! waiters served in the order they asked; locks released when their
//! holder exits; default priorities; `/sys/kernel/debug/lite`; and misuse
//! of every call. Every wait for a lock is bounded, and so are the
//! compare-swap retries.

use std::fmt::Display;
use std::io::{BufReader, Write};
use std::ptr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use libc::{c_long, EBADF, EFAULT, EINVAL, ENOENT, EPERM};
use lite::sys::{
    LiteLock, LiteStats, ALLOC_ATOMIC, MAX_LOCKS, MAX_NODES, PERM_ATOMIC, PERM_READ, PERM_WRITE,
    PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_NONE,
};
use lite::Priority;

use super::io::{
    barrier, check_each, check_errnos, check_free, enter_barrier, handle_of, name_of, out_of_step,
    outcome_of, read_debugfs_as, read_vec, stats, status, unless, write_debugfs_line, write_ok,
    InStep, UserPages, BARRIER_LIMIT, NO_DEBUGFS,
};
use super::processes::{
    child_outcome, collect, finish, points_of, ready_then_wait, report_point, spawn, tell_go,
    WHY_SKIPPED,
};
use super::rpc::Blocker;
use super::{password_of, unjoined, Check, Node, INVALID_PRIORITY, UNKNOWN_HANDLE};
use crate::deadline::{install_interrupt_handler, Deadline, Watchdog};
use crate::debugfs::{parse_qos, parse_stats, DebugStats, Operation, QosParam, STATS_FILE};
use crate::errno::{describe_result, expect_errno, expect_value, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::tap::Tap;

/// Threads per node in the counter, fetch-add and compare-swap cases.
const THREADS: u32 = 3;
/// Increments per thread (and per child process).
const ITERATIONS: u32 = 20;
/// How long a locked increment keeps the lock between its read and its
/// write, so that a lock that is not exclusive loses increments.
const CRITICAL_PAUSE: Duration = Duration::from_millis(1);
const WAITERS: usize = 3;
/// Delay between the waiters' requests, so their order is known.
const STAGGER: Duration = Duration::from_millis(300);
const ROUNDS: u64 = 100;
const STATS_OPS: u64 = 10;
const STATS_BYTES: usize = 4096;
/// How long a thread may wait for a lock (or to block in `lite_lock`)
/// before the case fails and the thread is interrupted.
const LOCK_WAIT_LIMIT: Duration = Duration::from_secs(30);
/// How long one thread's compare-swap increments may take in all, losing
/// to the other threads of every node now and then.
const CAS_LIMIT: Duration = Duration::from_secs(120);
/// A lock number no home creates in practice (it would need them all).
const UNKNOWN_LOCK: u32 = MAX_LOCKS - 1;

/// Name kinds of the LMRs node 1 shares.
const COUNTER_NAME: u16 = 0x5343;
const ATOMIC_NAME: u16 = 0x5341;
const ROUNDS_NAME: u16 = 0x5352;

/// Where node 1's counter LMR keeps the counter and the lock number.
const COUNTER_OFFSET: u64 = 0;
const LOCK_NUMBER_OFFSET: u64 = 8;

/// The node that keeps the shared counters and lock.
const OWNER: u32 = 1;

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    install_interrupt_handler();
    locked_counter(kernel, tap, at)?;
    atomics(kernel, tap, at)?;
    barrier_rounds(kernel, tap, at)?;
    let local = local_lock(kernel, tap, me);
    lock_order(kernel, tap, me, local.as_ref());
    exiting_holder(kernel, tap, me, local.as_ref());
    priorities(kernel, tap, me);
    debugfs(kernel, tap, at, local.as_ref())?;
    bad_input(kernel, tap, at);
    barrier(kernel, tap, nodes, "the synchronization cases")
}

/// The lock is all ones where the kernel filled in nothing.
pub(super) fn create_lock_raw<K: Kernel>(kernel: &K, home: u32) -> (c_long, LiteLock) {
    let mut lock = LiteLock {
        home: u32::MAX,
        number: u32::MAX,
    };
    // SAFETY: `lock` is exclusively borrowed and writable.
    let ret = unsafe { kernel.create_lock(home, &mut lock) };
    (ret, lock)
}

fn ask_lock_raw<K: Kernel>(kernel: &K, home: u32, number: u32) -> (c_long, LiteLock) {
    let mut lock = LiteLock::default();
    // SAFETY: `lock` is exclusively borrowed and writable.
    let ret = unsafe { kernel.ask_lock(home, number, &mut lock) };
    (ret, lock)
}

/// `lite_create_lock(home)`; the lock, checked against the number returned.
pub(super) fn create_lock<K: Kernel>(kernel: &K, home: u32) -> Result<LiteLock, String> {
    let (ret, lock) = create_lock_raw(kernel, home);
    let number = u32::try_from(ret)
        .map_err(|_| format!("create_lock({home}) returned {}", describe_result(ret)))?;
    let filled_in = lock == LiteLock { home, number };
    unless(filled_in, || {
        format!("create_lock returned {number} but filled in {lock:?}")
    })
    .map(|()| lock)
}

pub(super) fn ask_lock<K: Kernel>(kernel: &K, home: u32, number: u32) -> Result<LiteLock, String> {
    let (ret, lock) = ask_lock_raw(kernel, home, number);
    expect_zero(ret).map_err(|e| format!("ask_lock({home}, {number}): {e}"))?;
    let expected = LiteLock { home, number };
    unless(lock == expected, || {
        format!("ask_lock filled in {lock:?}, not {expected:?}")
    })
    .map(|()| lock)
}

fn lock<K: Kernel>(kernel: &K, lock: &LiteLock) -> c_long {
    // SAFETY: `lock` is readable for the call.
    unsafe { kernel.lock(lock) }
}

fn unlock<K: Kernel>(kernel: &K, lock: &LiteLock) -> c_long {
    // SAFETY: `lock` is readable for the call.
    unsafe { kernel.unlock(lock) }
}

pub(super) fn lock_and_unlock<K: Kernel>(kernel: &K, lock_: &LiteLock) -> Result<(), String> {
    expect_zero(lock(kernel, lock_))
        .and_then(|()| expect_zero(unlock(kernel, lock_)))
        .map_err(|e| format!("lock or unlock: {e}"))
}

/// `lite_fetch_add`: the raw result and the old value.
fn fetch_add_raw<K: Kernel>(kernel: &K, handle: u64, value: u64, priority: u32) -> (c_long, u64) {
    let mut old = u64::MAX;
    // SAFETY: `old` is exclusively borrowed and writable.
    let ret = unsafe { kernel.fetch_add(handle, &mut old, value, priority) };
    (ret, old)
}

fn fetch_add<K: Kernel>(kernel: &K, handle: u64, value: u64, priority: u32) -> Result<u64, String> {
    let (ret, old) = fetch_add_raw(kernel, handle, value, priority);
    expect_zero(ret)
        .map(|()| old)
        .map_err(|e| format!("fetch_add({value}): {e}"))
}

/// `lite_compare_swp`: the raw result and the old value.
fn compare_swp_raw<K: Kernel>(
    kernel: &K,
    handle: u64,
    expected: u64,
    new_value: u64,
    priority: u32,
) -> (c_long, u64) {
    let mut old = u64::MAX;
    // SAFETY: `old` is exclusively borrowed and writable.
    let ret = unsafe { kernel.compare_swp(handle, &mut old, expected, new_value, priority) };
    (ret, old)
}

fn compare_swp<K: Kernel>(
    kernel: &K,
    handle: u64,
    expected: u64,
    new_value: u64,
) -> Result<u64, String> {
    let (ret, old) = compare_swp_raw(kernel, handle, expected, new_value, PRIORITY_NONE);
    expect_zero(ret)
        .map(|()| old)
        .map_err(|e| format!("compare_swp({expected}, {new_value}): {e}"))
}

/// The value of an atomic LMR, read atomically (a fetch-add of 0).
fn atomic_value<K: Kernel>(kernel: &K, handle: u64) -> Result<u64, String> {
    fetch_add(kernel, handle, 0, PRIORITY_NONE)
}

fn holds<K: Kernel>(kernel: &K, handle: Result<u64, String>, expected: u64) -> Result<(), String> {
    let value = atomic_value(kernel, handle?)?;
    unless(value == expected, || format!("it holds {value}"))
}

fn read_u64<K: Kernel>(kernel: &K, handle: u64, offset: u64, pw: u64) -> Result<u64, String> {
    let bytes = read_vec(kernel, handle, offset, 8, pw)?;
    let bytes: [u8; 8] = bytes.try_into().map_err(|_| "short read".to_string())?;
    Ok(u64::from_le_bytes(bytes))
}

fn write_u64<K: Kernel>(
    kernel: &K,
    handle: u64,
    offset: u64,
    value: u64,
    pw: u64,
) -> Result<(), String> {
    write_ok(kernel, handle, offset, &value.to_le_bytes(), pw)
}

/// Locks `mutex`, also after a thread panicked holding it.
fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What each thread returned in thread order, or the first failure in it.
fn on_threads<T: Send>(work: impl Fn() -> Result<T, String> + Sync) -> Result<Vec<T>, String> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS).map(|_| scope.spawn(&work)).collect();
        let outcomes = workers
            .into_iter()
            .map(|worker| outcome_of(worker, "a thread panicked"));
        outcomes.collect()
    })
}

/// Each a plain read and write under `lock`, which threads of every node
/// take; each wait for it is bounded by [`LOCK_WAIT_LIMIT`].
fn locked_increments<K: Kernel>(
    kernel: &K,
    handle: u64,
    pw: u64,
    lock_: &LiteLock,
    iterations: u32,
) -> Result<(), String> {
    let mut free = Deadline::after(
        LOCK_WAIT_LIMIT,
        format!(
            "lock {} of node {}, which every node's threads take",
            lock_.number, lock_.home
        ),
    );
    Watchdog::guard(|watchdog| {
        for i in 0..iterations {
            free.restart();
            watchdog
                .call_zero(&free, || lock(kernel, lock_))
                .map_err(|e| format!("lock #{i}: {e}"))?;
            let step = read_u64(kernel, handle, COUNTER_OFFSET, pw).and_then(|value| {
                std::thread::sleep(CRITICAL_PAUSE);
                write_u64(kernel, handle, COUNTER_OFFSET, value + 1, pw)
            });
            let unlocked =
                expect_zero(unlock(kernel, lock_)).map_err(|e| format!("unlock #{i}: {e}"));
            step.and(unlocked)?;
        }
        Ok(())
    })
}

/// Maps node 1's counter LMR and looks up the lock whose number it holds.
fn map_counter<K: Kernel>(kernel: &K, name: u64, pw: u64) -> Result<(u64, LiteLock), String> {
    let handle = handle_of(
        kernel.ask_lmr(OWNER, name, PERM_READ | PERM_WRITE, pw),
        "ask_lmr of the counter",
    )?;
    let number = read_u64(kernel, handle, LOCK_NUMBER_OFFSET, pw).and_then(|n| {
        u32::try_from(n).map_err(|_| format!("the counter LMR holds lock number {n}"))
    });
    let found = number.and_then(|number| ask_lock(kernel, OWNER, number));
    found.map(|lock| (handle, lock)).inspect_err(|_| {
        kernel.umap_lmr(handle);
    })
}

/// Node 1 creates a lock and an LMR holding a counter and the lock's
/// number; every node's threads, and a child process on the real kernel,
/// increment the counter under the lock; the total must be exact.
fn locked_counter<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let after = |tap: &mut Tap<W>, what: &str| barrier(kernel, tap, nodes, what);
    let pw = password_of(OWNER);
    let name = name_of(COUNTER_NAME, OWNER);
    let point =
        format!("node {me}: create_lock(node {me}) and a published counter LMR holding its number");
    let make = || {
        let lock = create_lock(kernel, OWNER)?;
        let lmr = Region::alloc(kernel, OWNER, 4096, 0, pw)?;
        lmr.write(COUNTER_OFFSET, &0u64.to_le_bytes(), PRIORITY_NONE)?;
        let number = u64::from(lock.number).to_le_bytes();
        lmr.write(LOCK_NUMBER_OFFSET, &number, PRIORITY_NONE)?;
        Ok(lmr)
    };
    let published = (name, PERM_READ | PERM_WRITE);
    let owned = owner_publishes(kernel, tap, (me, point), published, make);
    after(tap, "publishing the locked counter")?;

    let real = kernel.spawns_processes();
    let mapped = map_counter(kernel, name, pw);
    let (by_child, child_increments) = if real {
        (format!(" and a child process x {ITERATIONS}"), ITERATIONS)
    } else {
        (String::new(), 0)
    };
    let description = format!("node {me}: {THREADS} threads x {ITERATIONS}{by_child} locked read+write increments of node {OWNER}'s counter succeed");
    let outcome = mapped.clone().and_then(|(handle, lock_)| {
        let args: [&dyn Display; 4] = [&name, &pw, &lock_.number, &ITERATIONS];
        let child = real.then(|| spawn("sync-counter", &args));
        let threads = on_threads(|| locked_increments(kernel, handle, pw, &lock_, ITERATIONS));
        let child = child.map_or(Ok(()), |child| {
            child
                .and_then(points_of)
                .and_then(|points| child_outcome(points, 1))
        });
        threads.and(child.map_err(|e| format!("child: {e}")))
    });
    tap.check(&description, outcome);
    after(tap, "every node incremented the locked counter")?;

    let per_node = THREADS * ITERATIONS + child_increments;
    let expected = u64::from(nodes) * u64::from(per_node);
    let outcome = mapped.clone().and_then(|(handle, _)| {
        let value = read_u64(kernel, handle, COUNTER_OFFSET, pw)?;
        unless(value == expected, || {
            format!("it holds {value}: increments were lost")
        })
    });
    let point = format!("node {me}: node {OWNER}'s locked counter holds exactly {expected} ({nodes} nodes x {per_node})");
    tap.check(&point, outcome);
    after(tap, "reading the locked counter")?;
    if let Ok((handle, _)) = mapped {
        kernel.umap_lmr(handle);
    }
    check_free(tap, me, "the counter LMR", owned);
    Ok(())
}

/// On [`OWNER`] only: the LMR `make` gives, published as `name` with
/// `perms` and reported as `point`; `None` elsewhere or on failure.
fn owner_publishes<'k, K: Kernel, W: Write>(
    kernel: &'k K,
    tap: &mut Tap<W>,
    (me, point): (u32, String),
    (name, perms): (u64, u64),
    make: impl FnOnce() -> Result<Region<'k, K>, String>,
) -> Option<Region<'k, K>> {
    if me != OWNER {
        return None;
    }
    let outcome = make().and_then(|lmr| {
        let ret = kernel.add_ask_mr_table(name, lmr.handle(), perms, password_of(OWNER));
        expect_zero(ret).map_err(|e| format!("add_ask_mr_table: {e}"))?;
        Ok(lmr)
    });
    tap.check(&point, status(&outcome));
    outcome.ok()
}

/// fetch-add and compare-swap from every node on an atomic LMR of node 1,
/// and from this node's threads on one of this node.
fn atomics<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let after = |tap: &mut Tap<W>, what: &str| barrier(kernel, tap, nodes, what);
    let pw = password_of(OWNER);
    let name = name_of(ATOMIC_NAME, OWNER);
    let point = format!("node {me}: an 8 B ATOMIC LMR allocated and published with ATOMIC");
    let published = (name, PERM_READ | PERM_WRITE | PERM_ATOMIC);
    let owned = owner_publishes(kernel, tap, (me, point), published, || {
        Region::alloc(kernel, OWNER, 8, ALLOC_ATOMIC, pw)
    });
    let local = Region::alloc(kernel, me, 8, ALLOC_ATOMIC, password_of(me));
    after(tap, "publishing the atomic counter")?;

    let shared = handle_of(
        kernel.ask_lmr(OWNER, name, PERM_READ | PERM_ATOMIC, pw),
        "ask_lmr of the atomic counter",
    );
    let local_handle = local.as_ref().map(Region::handle).map_err(Clone::clone);
    let per_node = u64::from(THREADS * ITERATIONS);
    // The old values each fetch_add returned: (shared, local).
    let fetched = shared.clone().and_then(|shared| {
        let local = local_handle.clone()?;
        let increments = || -> Result<Vec<(u64, u64)>, String> {
            let pair = |_: u32| -> Result<(u64, u64), String> {
                let old = fetch_add(kernel, shared, 1, PRIORITY_NONE)?;
                Ok((old, fetch_add(kernel, local, 1, PRIORITY_NONE)?))
            };
            (0..ITERATIONS).map(pair).collect()
        };
        on_threads(increments).map(|olds| olds.concat())
    });
    tap.check(
        &format!("node {me}: {THREADS} threads x {ITERATIONS} fetch_add(1) on node {OWNER}'s and on this node's atomic LMR return 0"),
        status(&fetched),
    );
    // The old values returned from one of the two LMRs, sorted.
    let olds = |of: fn(&(u64, u64)) -> u64| {
        fetched.clone().map(|all| {
            let mut olds: Vec<u64> = all.iter().map(of).collect();
            olds.sort_unstable();
            olds
        })
    };
    let distinct = olds(|&(shared, _)| shared).and_then(|mut olds| {
        let before = olds.len();
        olds.dedup();
        unless(olds.len() == before, || {
            format!("{} duplicates", before - olds.len())
        })
    });
    let point = format!(
        "node {me}: the old values fetch_add returned from node {OWNER}'s LMR are all distinct"
    );
    tap.check(&point, distinct);
    let sequence = olds(|&(_, local)| local).and_then(|olds| {
        unless(olds == (0..per_node).collect::<Vec<_>>(), || {
            format!("got {olds:?}")
        })
    });
    let point = format!(
        "node {me}: fetch_add on this node's atomic LMR returned each of 0..{per_node} once"
    );
    tap.check(&point, sequence);
    after(tap, "every node's fetch_adds")?;

    let total = u64::from(nodes) * per_node;
    let point =
        format!("node {me}: node {OWNER}'s atomic LMR holds {total} after every node's fetch_adds");
    tap.check(&point, holds(kernel, shared.clone(), total));
    let point = format!("node {me}: this node's atomic LMR holds {per_node}");
    tap.check(&point, holds(kernel, local_handle, per_node));
    after(tap, "reading the fetch_add totals")?;

    let swapped = shared.clone().and_then(|handle| {
        let retries = on_threads(|| cas_increments(kernel, handle, ITERATIONS))?;
        Ok(retries.iter().sum::<u64>())
    });
    if let Ok(retries) = &swapped {
        tap.comment(&format!(
            "node {me}: the compare_swp increments retried {retries} times"
        ));
    }
    tap.check(
        &format!("node {me}: {THREADS} threads x {ITERATIONS} compare_swp increments of node {OWNER}'s atomic LMR (retrying on conflict) succeed"),
        swapped.map(drop),
    );
    after(tap, "every node's compare_swp increments")?;

    let point = format!(
        "node {me}: node {OWNER}'s atomic LMR holds {} after every node's compare_swp increments",
        2 * total
    );
    tap.check(&point, holds(kernel, shared.clone(), 2 * total));
    let failing = shared.clone().and_then(|handle| {
        let current = atomic_value(kernel, handle)?;
        let wrong = current ^ 0x5a5a_5a5a_0000_0001;
        let old = compare_swp(kernel, handle, wrong, 7)?;
        if old != current {
            return Err(format!("returned {old}, the value is {current}"));
        }
        match atomic_value(kernel, handle)? {
            after if after == current => Ok(()),
            after => Err(format!("the value changed from {current} to {after}")),
        }
    });
    tap.check(
        &format!("node {me}: compare_swp with a wrong expected value returns the current value and leaves it unchanged"),
        failing,
    );
    let succeeding = local.as_ref().map_err(Clone::clone).and_then(|lmr| {
        let old = compare_swp(kernel, lmr.handle(), per_node, 1000)?;
        let now = atomic_value(kernel, lmr.handle())?;
        unless((old, now) == (per_node, 1000), || {
            format!("returned {old}, then the LMR held {now}")
        })
    });
    tap.check(
        &format!("node {me}: compare_swp({per_node} -> 1000) on this node's atomic LMR returns {per_node} and swaps"),
        succeeding,
    );
    after(tap, "the failing compare_swp")?;

    if let Ok(handle) = shared {
        kernel.umap_lmr(handle);
    }
    check_free(tap, me, "this node's atomic LMR", local.ok());
    check_free(tap, me, "the shared atomic LMR", owned);
    Ok(())
}

/// Each retried until it wins, all within [`CAS_LIMIT`]; the retries.
fn cas_increments<K: Kernel>(kernel: &K, handle: u64, iterations: u32) -> Result<u64, String> {
    let won = Deadline::after(
        CAS_LIMIT,
        format!("{iterations} compare_swp increments to win against the other nodes' threads"),
    );
    let mut guess = 0;
    let mut retries = 0;
    for _ in 0..iterations {
        loop {
            won.check()
                .map_err(|e| format!("{e} ({retries} lost so far)"))?;
            let old = compare_swp(kernel, handle, guess, guess.wrapping_add(1))?;
            if old == guess {
                guess = old.wrapping_add(1);
                break;
            }
            guess = old;
            retries += 1;
        }
    }
    Ok(retries)
}

/// The barrier reused [`ROUNDS`] times: before each, every node writes
/// the round's number into its slot of an LMR on node 1; after it, every
/// node must see that number in every slot. Slots alternate between two
/// banks, so a node already in the next round cannot overwrite what a
/// slower node is still reading.
fn barrier_rounds<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let pw = password_of(OWNER);
    let name = name_of(ROUNDS_NAME, OWNER);
    let bank = u64::from(nodes) * 8;
    let rounds_lmr = "the LMR of the barrier rounds";
    let point = format!("node {me}: {rounds_lmr} allocated and published");
    let make = || Region::alloc(kernel, OWNER, 2 * bank, 0, pw);
    let published = (name, PERM_READ | PERM_WRITE);
    let owned = owner_publishes(kernel, tap, (me, point), published, make);
    barrier(kernel, tap, nodes, &format!("publishing {rounds_lmr}"))?;

    let mapping = handle_of(
        kernel.ask_lmr(OWNER, name, PERM_READ | PERM_WRITE, pw),
        "ask_lmr",
    );
    let mut failure = mapping.as_ref().err().cloned();
    for round in 1..=ROUNDS {
        let offset = (round % 2) * bank;
        if let (None, Ok(handle)) = (&failure, &mapping) {
            let mine = offset + u64::from(me - 1) * 8;
            if let Err(e) = write_u64(kernel, *handle, mine, round, pw) {
                failure = Some(format!("round {round}: {e}"));
            }
        }
        let name = format!("node {me}: dist_barrier({nodes}) round {round} of {ROUNDS}");
        if let Err(reason) = enter_barrier(kernel, nodes, BARRIER_LIMIT, &name) {
            return Err(out_of_step(tap, &format!("{name} returns 0"), &reason));
        }
        if let (None, Ok(handle)) = (&failure, &mapping) {
            match read_vec(kernel, *handle, offset, bank as usize, pw) {
                Ok(slots) => {
                    for (node, slot) in (1..).zip(slots.chunks(8)) {
                        let value = u64::from_le_bytes(slot.try_into().unwrap_or_default());
                        if value != round && failure.is_none() {
                            failure =
                                Some(format!("round {round}: node {node}'s slot holds {value}"));
                        }
                    }
                }
                Err(e) => failure = Some(format!("round {round}: {e}")),
            }
        }
    }
    tap.check(
        &format!("node {me}: dist_barrier({nodes}) {ROUNDS} times in a row returns 0, each round seeing every node's round number"),
        failure.map_or(Ok(()), Err),
    );
    barrier(kernel, tap, nodes, "the barrier rounds")?;
    if let Ok(handle) = mapping {
        kernel.umap_lmr(handle);
    }
    check_free(tap, me, rounds_lmr, owned);
    Ok(())
}

/// A lock kept by this node, for the cases of this node alone.
fn local_lock<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) -> Option<LiteLock> {
    let created = create_lock(kernel, me);
    tap.check(
        &format!("node {me}: create_lock(node {me}) returns a number and fills in the lock"),
        status(&created),
    );
    let created = created.ok()?;
    let point = format!(
        "node {me}: ask_lock(node {me}, {}) fills in the same lock",
        created.number
    );
    tap.check(&point, ask_lock(kernel, me, created.number).map(drop));
    Some(created)
}

/// The holder holds; waiters ask one after the other and must get the lock
/// in that order; a thread that does not hold the lock cannot unlock it,
/// and the holder cannot lock it again.
fn lock_order<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    local: Option<&LiteLock>,
) {
    let Some(lock_) = local else {
        tap.not_ok(
            &format!("node {me}: lock waiters are served in the order they asked"),
            "no lock",
        );
        return;
    };
    let held = expect_zero(lock(kernel, lock_));
    let holding = held.is_ok();
    tap.check(&format!("node {me}: lock of a free lock returns 0"), held);
    let foreign_unlock = || {
        let unlocking = std::thread::scope(|scope| scope.spawn(|| unlock(kernel, lock_)).join());
        unlocking.unwrap_or(c_long::MIN)
    };
    check_errnos! { tap, format!("node {me}: ");
        "lock by the thread holding it" => lock(kernel, lock_), libc::EDEADLK;
        "unlock by a thread that does not hold the lock" => foreign_unlock(), libc::EPERM;
    }

    let order = Mutex::new(Vec::new());
    let waiters: Vec<Blocker> = (0..WAITERS).map(|_| Blocker::default()).collect();
    let outcome = std::thread::scope(|scope| -> Result<(), String> {
        let mut started = Ok(());
        for (index, waiter) in waiters.iter().enumerate() {
            let order = &order;
            scope.spawn(move || {
                waiter.around(|| {
                    // The last call and its result: an unlock once it got the lock.
                    let (call, ret) = match lock(kernel, lock_) {
                        0 => {
                            guard(order).push(Ok(index));
                            ("unlock", unlock(kernel, lock_))
                        }
                        ret => ("lock", ret),
                    };
                    if ret != 0 {
                        let failure =
                            format!("waiter {index}: {call} returned {}", describe_result(ret));
                        guard(order).push(Err(failure));
                    }
                })
            });
            if started.is_ok() {
                started = waiter
                    .wait_until_blocked(LOCK_WAIT_LIMIT)
                    .map_err(|e| format!("waiter {index} {e}"));
            }
            std::thread::sleep(STAGGER);
        }
        let released = if holding {
            expect_zero(unlock(kernel, lock_)).map_err(|e| format!("the holder's unlock: {e}"))
        } else {
            Err("the holder did not get the lock".into())
        };
        let in_time = waiters
            .iter()
            .all(|waiter| waiter.wait_finished(LOCK_WAIT_LIMIT));
        started?;
        released?;
        unless(in_time, || {
            format!("a waiter did not get the lock within {LOCK_WAIT_LIMIT:?} and was interrupted")
        })
    });
    let order = order.into_inner().unwrap_or_else(|e| e.into_inner());
    let outcome = outcome.and_then(|()| {
        let got = order.into_iter().collect::<Result<Vec<_>, _>>()?;
        unless(got == (0..WAITERS).collect::<Vec<_>>(), || {
            format!("they got it in the order {got:?}")
        })
    });
    tap.check(
        &format!("node {me}: {WAITERS} waiters asking {STAGGER:?} apart get the lock in the order they asked once the holder unlocks"),
        outcome,
    );
    let point = format!("node {me}: the lock is free again once every waiter unlocked");
    tap.check(&point, lock_and_unlock(kernel, lock_));
}

/// A child process that exits holding the lock: a thread of this process
/// waiting for it gets it.
fn exiting_holder<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    local: Option<&LiteLock>,
) {
    let description =
        format!("node {me}: a child process that exits holding the lock hands it to a waiter of this process");
    let skipped = (!kernel.spawns_processes()).then_some(WHY_SKIPPED);
    tap.check_or_skip(&description, skipped, || {
        let lock_ = local.ok_or("no lock")?;
        let mut child = spawn("sync-hold", &[&lock_.home, &lock_.number])?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut points = collect(&mut out, true);
        if points.iter().any(|(_, result)| result.is_err()) || points.is_empty() {
            drop(child.stdin.take());
            let _ = finish(child);
            return child_outcome(points, 1).map_err(|e| format!("child: {e}"));
        }
        let waiter = Blocker::default();
        std::thread::scope(|scope| {
            let got = scope.spawn(|| {
                let ret = waiter.around(|| lock(kernel, lock_));
                if ret == 0 {
                    expect_zero(unlock(kernel, lock_))
                        .map_err(|e| format!("unlock after getting it: {e}"))
                } else {
                    Err(format!("lock returned {}", describe_result(ret)))
                }
            });
            let blocked = waiter.wait_until_blocked(LOCK_WAIT_LIMIT);
            tell_go(&mut child);
            points.extend(collect(&mut out, false));
            let finished = finish(child);
            let in_time = waiter.wait_finished(LOCK_WAIT_LIMIT);
            let got = outcome_of(got, "the waiter panicked");
            blocked.map_err(|e| format!("the waiter {e} behind the child"))?;
            finished?;
            child_outcome(points, 1).map_err(|e| format!("child: {e}"))?;
            unless(in_time, || {
                format!("the waiter did not get the lock within {LOCK_WAIT_LIMIT:?} of the exit")
            })?;
            got
        })
    });
}

/// `lite_set_priority` returns the previous default and rejects unknown
/// priorities; fetch-add takes every priority.
fn priorities<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let set =
        |priority: u32, previous: u32| expect_value(kernel.set_priority(priority), previous.into());
    let invalid = || expect_errno(kernel.set_priority(INVALID_PRIORITY), libc::EINVAL);
    let (none, high, low) = (PRIORITY_NONE, PRIORITY_HIGH, PRIORITY_LOW);
    check_each! { tap;
        format!("node {me}: set_priority(HIGH) returns the initial default, NONE ({none})") =>
            set(high, none);
        format!("node {me}: set_priority(LOW) returns the previous default, HIGH ({high})") =>
            set(low, high);
        format!("node {me}: set_priority({INVALID_PRIORITY}) returns -EINVAL") => invalid();
        format!("node {me}: set_priority(NONE) returns LOW ({low}): the rejected call changed nothing") =>
            set(none, low);
    }
    let outcome = Region::alloc(kernel, me, 8, ALLOC_ATOMIC, password_of(me)).and_then(|lmr| {
        for (index, priority) in (0..).zip(Priority::ALL) {
            let name = priority.name();
            let old = fetch_add(kernel, lmr.handle(), 1, priority.as_raw())
                .map_err(|e| format!("priority {name}: {e}"))?;
            unless(old == index, || {
                format!("priority {name}: returned {old}, expected {index}")
            })?;
        }
        lmr.free()
    });
    tap.check(
        &format!("node {me}: fetch_add with priority NONE, HIGH and LOW each adds and returns 0"),
        outcome,
    );
}

/// The counters the statistics file must show grown after the operations
/// of [`debugfs`], and by how much at least.
fn growth(before: &DebugStats, after: &DebugStats) -> Result<(), String> {
    let row = |stats: &DebugStats, op, priority| {
        stats
            .op(op, priority)
            .copied()
            .ok_or_else(|| format!("no row for {op:?} {priority:?}"))
    };
    // (what, the count before, after, and the least growth).
    let grown = |what: &str, count: fn(&DebugStats) -> u64, by: u64| {
        (what.to_string(), count(before), count(after), by)
    };
    let mut checks = vec![
        grown("atomics", |s| s.counters.atomics, 2 * STATS_OPS),
        grown("lock_acquires", |s| s.counters.lock_acquires, STATS_OPS),
        grown(
            "op=lock ops (all priorities)",
            |s| s.ops_of(Operation::Lock),
            STATS_OPS,
        ),
    ];
    let rows = [
        (Operation::Atomic, Priority::High, STATS_OPS, 0),
        (Operation::Atomic, Priority::Low, STATS_OPS, 0),
        (Operation::Write, Priority::High, 1, STATS_BYTES as u64),
        (Operation::Read, Priority::Low, 1, STATS_BYTES as u64),
    ];
    for (op, priority, ops, bytes) in rows {
        let (was, now) = (row(before, op, priority)?, row(after, op, priority)?);
        let label = format!("op={} priority={}", op.name(), priority.name());
        checks.push((format!("{label} ops"), was.ops, now.ops, ops));
        let latency = format!("{label} latency_us (sum of the buckets)");
        checks.push((latency, was.latency_count(), now.latency_count(), ops));
        if bytes > 0 {
            checks.push((format!("{label} bytes"), was.bytes, now.bytes, bytes));
        }
    }
    for (what, was, now, by) in checks {
        unless(now >= was.saturating_add(by), || {
            format!("{what} went from {was} to {now}, expected +{by} or more")
        })?;
    }
    Ok(())
}

/// The statistics file parses, agrees with `lite_get_stats` and counts
/// what this node does; the QoS switch can be turned off and on.
fn debugfs<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    at: Node,
    local: Option<&LiteLock>,
) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let read = || read_debugfs_as(kernel, STATS_FILE, parse_stats);
    // Each point is skipped on a kernel without debugfs.
    let skipped = kernel
        .read_debugfs(STATS_FILE)
        .is_none()
        .then_some(NO_DEBUGFS);
    let first = read();
    let description = format!("node {me}: /sys/kernel/debug/lite/stats is readable and parses");
    tap.check_or_skip(&description, skipped, || status(&first));

    // Nothing else happens on any node between the two readings.
    barrier(kernel, tap, nodes, "reading the statistics file")?;
    let struct_stats = stats(kernel);
    let text_stats = read();
    barrier(kernel, tap, nodes, "comparing the statistics")?;
    let agree = struct_stats.and_then(|s| {
        let text = text_stats?;
        let differ = || format!("get_stats {s:?}, the file {:?}", text.counters);
        unless(text.counters == s, differ).map(|()| s)
    });
    let description =
        format!("node {me}: get_stats and the statistics file agree on every counter");
    tap.check_or_skip(&description, skipped, || status(&agree));
    let sensible = agree.and_then(|s: LiteStats| {
        if s.connections < u64::from(nodes - 1) {
            return Err(format!("{} connections for {nodes} nodes", s.connections));
        }
        unless(s.locks >= 1 && s.lock_waits >= WAITERS as u64, || {
            format!(
                "{} locks and {} lock waits after the lock cases",
                s.locks, s.lock_waits
            )
        })
    });
    let description = format!("node {me}: the counters show a connection to every other node, this node's locks and the lock waits of the order case");
    tap.check_or_skip(&description, skipped, || sensible);

    let description = format!("node {me}: fetch_adds, locks, a high-priority write and a low-priority read grow the statistics file's counters and rows");
    let outcome = (|| -> Result<(), String> {
        let before = first.clone()?;
        let lock_ = local.ok_or("no lock")?;
        let lmr = Region::alloc(kernel, me, 8, ALLOC_ATOMIC, password_of(me))?;
        let add = |priority| fetch_add(kernel, lmr.handle(), 1, priority).map(drop);
        (0..STATS_OPS).try_for_each(|_| add(PRIORITY_HIGH))?;
        // NONE stands for the process's default.
        let previous = kernel.set_priority(PRIORITY_LOW);
        if previous < 0 {
            return Err(format!(
                "set_priority returned {}",
                describe_result(previous)
            ));
        }
        let low = (0..STATS_OPS).try_for_each(|_| add(PRIORITY_NONE));
        kernel.set_priority(PRIORITY_NONE);
        low?;
        lmr.free()?;
        (0..STATS_OPS).try_for_each(|_| lock_and_unlock(kernel, lock_))?;
        let data = Region::alloc(kernel, me, STATS_BYTES as u64, 0, password_of(me))?;
        let mut buf = vec![0x5au8; STATS_BYTES];
        data.write(0, &buf, PRIORITY_HIGH)?;
        data.read(0, &mut buf, PRIORITY_LOW)?;
        data.free()?;
        growth(&before, &read()?)
    })();
    tap.check_or_skip(&description, skipped, || outcome);

    let description = format!("node {me}: qos_enabled can be set to 0 and back to 1, and every QoS parameter reads as a number");
    let outcome = (|| -> Result<(), String> {
        let read_param = |param: QosParam| read_debugfs_as(kernel, param.file_name(), parse_qos);
        let write_param =
            |param: QosParam, value| write_debugfs_line(kernel, param.file_name(), value);
        for param in QosParam::ALL {
            read_param(param)?;
        }
        let enabled = QosParam::Enabled;
        let original = read_param(enabled)?;
        for value in [0, 1] {
            write_param(enabled, value)?;
            let back = read_param(enabled)?;
            unless(back == value, || format!("wrote {value}, read back {back}"))?;
        }
        write_param(enabled, original)
    })();
    tap.check_or_skip(&description, skipped, || outcome);
    Ok(())
}

/// Invalid arguments to every call, each with its exact errno.
fn bad_input<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let pw = password_of(me);
    let none = PRIORITY_NONE;
    let unmapped = ptr::without_provenance_mut::<u64>(8);
    let atomic = Region::alloc(kernel, me, 8, ALLOC_ATOMIC, pw);
    let plain = Region::alloc(kernel, me, 8, 0, pw);
    let handle = |region: &Result<Region<'_, K>, String>| region.as_ref().map_or(0, Region::handle);
    let (atomic_handle, plain_handle) = (handle(&atomic), handle(&plain));
    tap.check(
        &format!("node {me}: an 8 B ATOMIC and an 8 B plain LMR for the bad atomics"),
        atomic
            .as_ref()
            .and(plain.as_ref())
            .map(drop)
            .map_err(Clone::clone),
    );

    let node = format!("node {me}: ");
    let unknown = format!("of unknown handle {UNKNOWN_HANDLE:#x}");
    let invalid = format!("with priority {INVALID_PRIORITY}");
    let add = |handle, priority| fetch_add_raw(kernel, handle, 1, priority).0;
    let swap = |handle, priority| compare_swp_raw(kernel, handle, 0, 1, priority).0;
    let read_only = "through a READ-only mapping of an ATOMIC LMR";
    check_errnos! { tap, node;
        format!("fetch_add {unknown}") => add(UNKNOWN_HANDLE, none), EBADF;
        format!("compare_swp {unknown}") => swap(UNKNOWN_HANDLE, none), EBADF;
        "fetch_add on an LMR without ATOMIC" => add(plain_handle, none), EPERM;
        "compare_swp on an LMR without ATOMIC" => swap(plain_handle, none), EPERM;
        format!("fetch_add {invalid}") => add(atomic_handle, INVALID_PRIORITY), EINVAL;
        format!("compare_swp {invalid}") => swap(atomic_handle, INVALID_PRIORITY), EINVAL;
        "fetch_add after free" => freed_atomic(kernel, me, pw), EBADF;
        format!("fetch_add {read_only}") => read_only_atomic(kernel, me, pw, atomic_handle), EPERM;
    }
    let unchanged = atomic.as_ref().map(Region::handle).map_err(Clone::clone);
    tap.check(
        &format!("node {me}: the rejected atomics left the ATOMIC LMR at 0"),
        holds(kernel, unchanged, 0),
    );
    // Whether the operation happened before the fault is not specified.
    check_errnos! { tap, node;
        // SAFETY: `old` is an unmapped address the kernel must reject.
        "fetch_add with old at unmapped address 0x8" =>
            unsafe { kernel.fetch_add(atomic_handle, unmapped, 1, none) }, EFAULT;
        // SAFETY: as above.
        "compare_swp with old at unmapped address 0x8" =>
            unsafe { kernel.compare_swp(atomic_handle, unmapped, 0, 1, none) }, EFAULT;
    }

    let registered = (|| -> Result<c_long, String> {
        let pages = UserPages::new(4096)?;
        // SAFETY: the pages stay mapped until deregistered below.
        let ret = unsafe { pages.register(kernel, (0, 16), PERM_READ | PERM_ATOMIC, pw) };
        let handle = handle_of(ret, "register_lmr of 16 B with ATOMIC")?;
        let result = fetch_add_raw(kernel, handle, 1, none).0;
        expect_zero(kernel.deregister_lmr(handle)).map_err(|e| format!("deregister: {e}"))?;
        Ok(result)
    })();
    tap.check(
        &format!("node {me}: fetch_add on a 16 B LMR registered with ATOMIC returns -EINVAL"),
        registered.and_then(|ret| expect_errno(ret, libc::EINVAL)),
    );
    for (name, region) in [("ATOMIC", atomic), ("plain", plain)] {
        let what = format!("the {name} LMR of the bad atomics");
        check_free(tap, me, &what, region.ok());
    }

    let absent = MAX_NODES - 1;
    let description = format!(
        "node {me}: create_lock on node {absent} (not in the cluster) returns -EHOSTUNREACH"
    );
    if nodes < absent {
        let ret = create_lock_raw(kernel, absent).0;
        tap.check(&description, expect_errno(ret, libc::EHOSTUNREACH));
    } else {
        tap.skip(&description, "the cluster is large enough to include it");
    }
    let known = create_lock(kernel, me);
    tap.check(
        &format!("node {me}: create_lock(node {me}) for the bad lock calls"),
        status(&known),
    );
    let unknown = LiteLock {
        home: me,
        number: UNKNOWN_LOCK,
    };
    let known = known.unwrap_or(unknown);
    let unmapped_lock = ptr::without_provenance_mut::<LiteLock>(8);
    let at_0x8 = "at unmapped address 0x8";
    let unknown_at = format!("unknown lock {UNKNOWN_LOCK} on node {me}");
    // SAFETY (every unsafe call below): the lock pointer is an unmapped
    // address the kernel must reject.
    check_errnos! { tap, node;
        format!("create_lock with the lock {at_0x8}") =>
            unsafe { kernel.create_lock(me, unmapped_lock) }, EFAULT;
        "ask_lock of an existing lock into unmapped address 0x8" =>
            unsafe { kernel.ask_lock(me, known.number, unmapped_lock) }, EFAULT;
        format!("ask_lock(node {me}, {UNKNOWN_LOCK}) of a lock never created") =>
            ask_lock_raw(kernel, me, UNKNOWN_LOCK).0, ENOENT;
        format!("lock with the lock {at_0x8}") => unsafe { kernel.lock(unmapped_lock) }, EFAULT;
        format!("unlock with the lock {at_0x8}") => unsafe { kernel.unlock(unmapped_lock) }, EFAULT;
        format!("lock of {unknown_at}") => lock(kernel, &unknown), ENOENT;
        format!("unlock of {unknown_at}") => unlock(kernel, &unknown), ENOENT;
        "unlock of a lock nobody holds" => unlock(kernel, &known), EPERM;
    }
}

/// `lite_fetch_add` on the handle of an ATOMIC LMR already freed.
fn freed_atomic<K: Kernel>(kernel: &K, me: u32, pw: u64) -> c_long {
    match Region::alloc(kernel, me, 8, ALLOC_ATOMIC, pw) {
        Ok(lmr) => {
            let handle = lmr.handle();
            if lmr.free().is_err() {
                return c_long::MIN;
            }
            fetch_add_raw(kernel, handle, 1, PRIORITY_NONE).0
        }
        Err(_) => c_long::MIN,
    }
}

/// `lite_fetch_add` through a READ-only mapping of the ATOMIC LMR `handle`.
fn read_only_atomic<K: Kernel>(kernel: &K, me: u32, pw: u64, handle: u64) -> c_long {
    let name = name_of(ATOMIC_NAME + 1, me);
    if kernel.add_ask_mr_table(name, handle, PERM_READ, pw) != 0 {
        return c_long::MIN;
    }
    let mapping = kernel.ask_lmr(me, name, PERM_READ | PERM_ATOMIC, pw);
    let Ok(mapping) = u64::try_from(mapping) else {
        return c_long::MIN;
    };
    let ret = fetch_add_raw(kernel, mapping, 1, PRIORITY_NONE).0;
    kernel.umap_lmr(mapping);
    ret
}

/// Each must return `-ENOTCONN`.
pub(super) fn before_join_cases<K: Kernel>(kernel: &K) -> Vec<Check<'_>> {
    let some_lock = LiteLock { home: 1, number: 0 };
    vec![
        unjoined("fetch_add", move || {
            fetch_add_raw(kernel, 1, 1, PRIORITY_NONE).0
        }),
        unjoined("compare_swp", move || {
            compare_swp_raw(kernel, 1, 0, 1, PRIORITY_NONE).0
        }),
        unjoined("create_lock(node 1)", move || create_lock_raw(kernel, 1).0),
        unjoined("ask_lock(node 1, 0)", move || ask_lock_raw(kernel, 1, 0).0),
        unjoined("lock", move || lock(kernel, &some_lock)),
        unjoined("unlock", move || unlock(kernel, &some_lock)),
        unjoined("set_priority(NONE)", move || {
            kernel.set_priority(PRIORITY_NONE)
        }),
    ]
}

/// The exit status, or `None` for another child kind.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0) };
    match args.first().map(String::as_str)? {
        "sync-counter" => {
            let (name, pw, lock_number, iterations) =
                (number(1), number(2), number(3), number(4) as u32);
            let outcome = map_counter(kernel, name, pw).and_then(|(handle, lock_)| {
                let named = u64::from(lock_.number);
                let outcome = unless(named == lock_number, || {
                    format!("the LMR names lock {named}, the parent {lock_number}")
                });
                let outcome = outcome
                    .and_then(|()| locked_increments(kernel, handle, pw, &lock_, iterations));
                kernel.umap_lmr(handle);
                outcome
            });
            report_point(&format!("{iterations} locked increments"), outcome);
            Some(0)
        }
        "sync-hold" => {
            let (home, lock_number) = (number(1) as u32, number(2) as u32);
            let held = ask_lock(kernel, home, lock_number).and_then(|lock_| {
                expect_zero(lock(kernel, &lock_)).map_err(|e| format!("lock: {e}"))
            });
            let ok = held.is_ok();
            report_point("take the lock and exit holding it", held);
            if ok {
                ready_then_wait();
            } else {
                crate::say(format_args!("ready"));
            }
            Some(0)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::fake_kernel::{Defects, FakeKernel};

    #[test]
    fn a_process_that_exits_holding_a_lock_hands_it_on() {
        let kernel = FakeKernel::joined_cluster(1, Defects::default()).remove(0);
        let held = create_lock(&kernel, 1).expect("create_lock");
        let child = kernel.other_process();
        let theirs = ask_lock(&child, 1, held.number).expect("ask_lock");
        assert_eq!(lock(&child, &theirs), 0);
        let waiter = Blocker::default();
        std::thread::scope(|scope| {
            let got = scope.spawn(|| {
                let ret = waiter.around(|| lock(&kernel, &held));
                // The waiting thread holds it now, not the main thread.
                (ret, unlock(&kernel, &held))
            });
            waiter
                .wait_until_blocked(LOCK_WAIT_LIMIT)
                .expect("the waiter blocks");
            assert!(!waiter.finished.load(Ordering::SeqCst), "got a held lock");
            assert_eq!(unlock(&kernel, &held), -c_long::from(libc::EPERM));
            drop(child);
            assert!(waiter.wait_finished(LOCK_WAIT_LIMIT));
            assert_eq!(got.join().expect("no panic"), (0, 0));
        });
    }

    #[test]
    fn a_lock_whose_holder_s_node_left_or_failed_comes_with_eownerdead() {
        let kernels = FakeKernel::joined_cluster(3, Defects::default());
        let owner_dead = -c_long::from(libc::EOWNERDEAD);
        let held = create_lock(&kernels[0], 1).expect("create_lock");
        let theirs = ask_lock(&kernels[1], 1, held.number).expect("ask_lock");
        assert_eq!(lock(&kernels[1], &theirs), 0);
        assert_eq!(kernels[1].leave(0), 0);
        assert_eq!(lock(&kernels[0], &held), owner_dead);
        assert_eq!(unlock(&kernels[0], &held), 0);

        let theirs = ask_lock(&kernels[2], 1, held.number).expect("ask_lock");
        assert_eq!(lock(&kernels[2], &theirs), 0);
        kernels[2].fail_node();
        assert_eq!(lock(&kernels[0], &held), owner_dead);
        assert_eq!(unlock(&kernels[0], &held), 0);
        // Only the first taker is told.
        assert_eq!(lock(&kernels[0], &held), 0);
        assert_eq!(unlock(&kernels[0], &held), 0);
    }

    #[test]
    fn a_child_increments_under_the_parent_s_lock() {
        let kernel = FakeKernel::joined_cluster(1, Defects::default()).remove(0);
        let held = create_lock(&kernel, 1).expect("create_lock");
        let pw = password_of(OWNER);
        let name = name_of(COUNTER_NAME, OWNER);
        let lmr = Region::alloc(&kernel, 1, 4096, 0, pw).expect("alloc");
        lmr.write(LOCK_NUMBER_OFFSET, &u64::from(held.number).to_le_bytes(), 0)
            .expect("write");
        let added = kernel.add_ask_mr_table(name, lmr.handle(), PERM_READ | PERM_WRITE, pw);
        assert_eq!(added, 0);
        let child = kernel.other_process();
        let args = [
            "sync-counter".to_string(),
            name.to_string(),
            pw.to_string(),
            held.number.to_string(),
            "5".to_string(),
        ];
        assert_eq!(child_main(&child, &args), Some(0));
        assert_eq!(read_u64(&kernel, lmr.handle(), COUNTER_OFFSET, pw), Ok(5));
        lmr.free().expect("free");
    }

    #[test]
    fn the_statistics_file_follows_lite_get_stats() {
        let kernel = FakeKernel::joined_cluster(2, Defects::default()).remove(0);
        let text = kernel
            .read_debugfs(STATS_FILE)
            .expect("the model has debugfs")
            .expect("readable");
        let parsed = parse_stats(&text).expect("parses");
        assert_eq!(Ok(parsed.counters), stats(&kernel));
        assert_eq!(parsed.counters.connections, 1);
        let written = kernel.write_debugfs("qos_enabled", "2\n").expect("debugfs");
        let errno = written.map_err(|e| e.raw_os_error());
        assert_eq!(errno, Err(Some(libc::EINVAL)));
    }
}
