//! What the fuzzer prints: alarms as they happen, and the summary at the
//! end, as TAP comments in the formats userspace/README.md gives and the
//! harness (`cargo xtask fuzz`) reads.
//!
//! Lines are written with one `write` each, straight to the file
//! descriptor, so that the lines of the processes and threads of a run
//! never interleave and a process forked from a thread can print too.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::atomic::Ordering;

use super::calls::{describe_call, Syscall};
use super::errnos::{outcome_name, OUTCOMES};
use super::shared::{Shared, MAX_THREADS, UNPRIVILEGED};
use crate::errno::describe_result;

/// Start of the seed line (after `# `).
pub const SEED_PREFIX: &str = "lite-fuzz seed=";
/// Start of the replay line (after `# `).
pub const REPLAY_PREFIX: &str = "lite-fuzz replay: ";
/// Start of an alarm (after `# `).
pub const ALARM_PREFIX: &str = "ALARM ";
/// Start of a call's counts (after `# `).
pub const CALLS_PREFIX: &str = "lite-fuzz calls ";
/// Start of the totals (after `# `).
pub const TOTAL_PREFIX: &str = "lite-fuzz total ";

/// Later ones are only counted.
const PRINTED_PER_PROCESS: u64 = 40;

/// One `write` (more only if the kernel takes part of it), past Rust's
/// stdout buffer and its lock.
pub(crate) fn emit(line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    // SAFETY: descriptor 1 stays open as long as the process; ManuallyDrop
    // keeps this File from closing it.
    let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
    // Nowhere left to report to if this fails; the exit status still tells.
    let _ = stdout.write_all(&bytes);
}

pub(crate) fn alarm(shared: &Shared, proc: usize, origin: &str, what: &str, reason: &str) {
    let Some(record) = shared.procs.get(proc) else {
        return;
    };
    record.alarms.fetch_add(1, Ordering::Relaxed);
    if record.alarms_printed.fetch_add(1, Ordering::Relaxed) < PRINTED_PER_PROCESS {
        emit(&format!("# {ALARM_PREFIX}{origin}: {what}: {reason}"));
    }
}

/// `node 1 proc 0 thread 2 (helper) step 17`.
pub(crate) fn origin(me: u32, proc: usize, slot: usize, step: u64) -> String {
    if proc == UNPRIVILEGED {
        return format!("node {me} unprivileged process step {step}");
    }
    let (thread, helper) = (slot % MAX_THREADS, slot >= MAX_THREADS);
    let helper = if helper { " (helper)" } else { "" };
    format!("node {me} proc {proc} thread {thread}{helper} step {step}")
}

/// `lite_free(0x5) returned -9 (-EBADF)`.
pub(crate) fn call_and_result(call: Syscall, args: &[u64; 6], ret: i64) -> String {
    let (call, result) = (describe_call(call, args), describe_result(ret));
    format!("{call} returned {result}")
}

/// Calls, then every outcome seen.
pub(crate) fn calls_line(shared: &Shared, call: Syscall) -> String {
    let mut line = format!("{CALLS_PREFIX}{}={}", call.name(), shared.calls_of(call));
    for bucket in 0..OUTCOMES {
        let count = shared.outcomes_of(call, bucket);
        if count > 0 {
            let _ = write!(line, " {}={count}", outcome_name(bucket));
        }
    }
    line
}

pub(crate) fn total_line(calls: u64, alarms: u64, hung: u64) -> String {
    format!("{TOTAL_PREFIX}calls={calls} alarms={alarms} hung={hung}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::shared::Shared;

    #[test]
    fn counts_print_in_the_harness_format() {
        let shared = Shared::map().expect("shared");
        shared.procs[0].count(Syscall::Free, 0);
        shared.procs[1].count(Syscall::Free, -i64::from(libc::EBADF));
        shared.procs[1].count(Syscall::Free, -i64::from(libc::EBADF));
        let free = calls_line(shared, Syscall::Free);
        assert_eq!(free, "lite-fuzz calls lite_free=3 ok=1 EBADF=2");
        let fence = calls_line(shared, Syscall::Fence);
        assert_eq!(fence, "lite-fuzz calls lite_fence=0");
        let total = total_line(3, 0, 0);
        assert_eq!(total, "lite-fuzz total calls=3 alarms=0 hung=0");
        let helper = origin(1, 0, MAX_THREADS + 2, 17);
        assert_eq!(helper, "node 1 proc 0 thread 2 (helper) step 17");
        let unprivileged = origin(1, UNPRIVILEGED, 0, 3);
        assert_eq!(unprivileged, "node 1 unprivileged process step 3");
        let free = call_and_result(Syscall::Free, &[5, 0, 0, 0, 0, 0], -9);
        assert_eq!(free, "lite_free(5) returned -9 (-EBADF)");
        // Alarms are counted per process, those of no process ignored.
        let shared = Shared::map().expect("shared");
        alarm(shared, 2, "test", "a call", "a reason");
        alarm(shared, 99, "test", "a call", "out of range: ignored");
        assert_eq!(shared.alarms(), 1);
        assert_eq!(shared.procs[2].alarms.load(Ordering::Relaxed), 1);
    }
}
