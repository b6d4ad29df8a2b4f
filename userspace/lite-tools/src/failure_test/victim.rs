//! The victim's part of the failure test: it sets up what the survivors
//! come to depend on, noting each step on its console, and prints
//! [`READY_MARKER`] once they wait on it.

use std::ffi::c_void;
use std::io::Write;

use lite::sys::{LiteLock, NODE_SPREAD};

use super::{
    alloc_lmr, describe_overload, encode_lock_record, enter_setup_barrier, join, overload_phase,
    write_pattern, FailureConfig, LockRecord, LOCK_RECORD_NAME, LOCK_RECORD_PASSWORD, READY_MARKER,
    SETUP_BARRIER_TIMEOUT, SPREAD_SIZE, VICTIM_PORT, VICTIM_PORT_MAX_SIZE,
};
use crate::cluster_test::io::{await_members, handle_of};
use crate::cluster_test::password_of;
use crate::cluster_test::rpc::register;
use crate::errno::{describe_result, expect_zero};
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::lowest_other;
use crate::say_to;

struct VictimLog<'w, W: Write> {
    out: &'w mut W,
    problems: u32,
}

impl<W: Write> VictimLog<'_, W> {
    fn note(&mut self, text: &str) {
        say_to(self.out, format_args!("lite-failure-test: victim: {text}"));
    }

    /// Notes `what` as done, or as failed with the reason.
    fn step(&mut self, what: &str, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.note(&format!("{what}: ok")),
            Err(reason) => {
                self.problems += 1;
                self.note(&format!("{what}: FAILED: {reason}"));
            }
        }
    }
}

/// Failures are noted and the test goes on: the survivors report what
/// they find missing.
fn register_victim_port<K: Kernel, W: Write>(kernel: &K, log: &mut VictimLog<'_, W>) {
    let ret = register(kernel, VICTIM_PORT, VICTIM_PORT_MAX_SIZE, "failure-victim");
    log.step(
        &format!("register_application(port {VICTIM_PORT})"),
        expect_zero(ret),
    );
}

/// Held until the machine dies; `None` if it could not be created.
/// Failures are noted as in [`register_victim_port`].
fn create_and_take<K: Kernel, W: Write>(
    kernel: &K,
    home: u32,
    label: &str,
    log: &mut VictimLog<'_, W>,
) -> Option<u32> {
    let mut lock = LiteLock::default();
    // SAFETY: `lock` is writable.
    let number = unsafe { kernel.create_lock(home, &mut lock) };
    let Ok(number) = u32::try_from(number) else {
        log.step(
            &format!("create_lock(node {home}) for {label}"),
            Err(describe_result(number)),
        );
        return None;
    };
    log.step(
        &format!("create_lock(node {home}) gave {label} {number}"),
        Ok(()),
    );
    // SAFETY: `lock` was filled in by create_lock.
    let ret = unsafe { kernel.lock(&lock) };
    log.step(&format!("lock of {label} {number}"), expect_zero(ret));
    Some(number)
}

/// Creates a lock on this node and locks W and O on survivor A, takes all
/// three and publishes the lock record. Taking a lock needs a peer (a peer
/// posts the atomic on this node's memory), so this waits until every
/// node joined. Failures are noted as in [`register_victim_port`].
fn hold_victim_locks<K: Kernel, W: Write>(
    kernel: &K,
    me: u32,
    nodes: u32,
    log: &mut VictimLog<'_, W>,
) {
    let Some(home) = lowest_other(me, nodes) else {
        log.step("finding survivor A", Err("no other node".to_string()));
        return;
    };
    let record = LockRecord {
        own: create_and_take(kernel, me, "lock", log),
        home,
        waited: create_and_take(kernel, home, "lock W", log),
        orphaned: create_and_take(kernel, home, "lock O", log),
    };
    let record = encode_lock_record(&record);
    // SAFETY: `record` is readable for its length.
    let ret = unsafe {
        kernel.wrap_alloc(
            record.as_ptr().cast::<c_void>(),
            record.len() as u64,
            LOCK_RECORD_NAME,
            LOCK_RECORD_PASSWORD,
        )
    };
    log.step(
        &format!("wrap_alloc of the lock record under {LOCK_RECORD_NAME:#x}"),
        handle_of(ret, "wrap_alloc").map(drop),
    );
}

/// Allocated until the machine dies.
fn allocate_spread<K: Kernel, W: Write>(kernel: &K, me: u32, log: &mut VictimLog<'_, W>) {
    let outcome = alloc_lmr(kernel, NODE_SPREAD, SPREAD_SIZE, password_of(me)).and_then(|lmr| {
        let written = write_pattern(kernel, lmr, pattern::seed(&[u64::from(me), SPREAD_SIZE]));
        expect_zero(written).map_err(|e| format!("write: {e}"))
    });
    log.step(
        &format!("alloc_remote of {} MiB spread and write", SPREAD_SIZE >> 20),
        outcome,
    );
}

/// Runs the victim's part up to its [`READY_MARKER`]; the caller then
/// keeps the process (and with it the port and the lock) alive until the
/// machine is killed. An error means the victim cannot go on.
pub fn run_victim<K: Kernel, W: Write>(
    kernel: &K,
    config: &FailureConfig,
    out: &mut W,
) -> Result<(), String> {
    let nodes = config.nodes;
    let mut log = VictimLog { out, problems: 0 };
    let me = join(kernel, config.cm)?;
    log.note(&format!("joined the cluster at {} as node {me}", config.cm));
    register_victim_port(kernel, &mut log);
    if let Some(loaded) = kernel.load_kernel_message_module(true) {
        log.step(
            "loading the kernel message module, holding every call",
            loaded,
        );
    }

    let barrier = |log: &mut VictimLog<'_, W>, after: &str| -> Result<(), String> {
        enter_setup_barrier(kernel, nodes, after)?;
        log.note(&format!("dist_barrier({nodes}) after {after}: ok"));
        Ok(())
    };
    await_members(kernel, nodes, SETUP_BARRIER_TIMEOUT)?;
    barrier(&mut log, "joining")?;
    if !config.overload.is_zero() {
        let mut out_of_step = None;
        let overloaded = overload_phase(kernel, me, config, |after| {
            barrier(&mut log, after).inspect_err(|e| out_of_step = Some(e.clone()))
        });
        if let Some(e) = out_of_step {
            return Err(e);
        }
        log.step(
            &describe_overload(config.overload, &overloaded),
            overloaded.map(drop),
        );
    }
    hold_victim_locks(kernel, me, nodes, &mut log);
    barrier(&mut log, "the survivors' allocations")?;
    if let Some(place) = super::dsm::Placement::of(me, nodes) {
        if let Some(held) = super::dsm::victim_holds_a_page(kernel, place) {
            log.step(
                "T8: opening survivor A's DSM region and writing a page",
                held,
            );
        }
    }
    barrier(&mut log, "the survivors counted their chunks")?;
    allocate_spread(kernel, me, &mut log);
    barrier(&mut log, "the spread allocation")?;
    barrier(&mut log, "the survivors' traffic started")?;
    if log.problems > 0 {
        log.note(&format!(
            "{} steps failed; the survivors will report it",
            log.problems
        ));
    }
    say_to(log.out, READY_MARKER);
    Ok(())
}
