//! Memory shared by every process of a run (mapped before the fork): the
//! counters, what each thread is calling right now (for the watchdog and
//! the signals that interrupt blocking calls), and the resources each
//! process offers the others (handles, locks, operation ids, descriptors,
//! names), so that they can try each other's.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use super::calls::{Syscall, SYSCALLS};
use super::errnos::{outcome_bucket, OUTCOMES};
use super::memory::map_anonymous;
use super::rng::Rng;
use crate::stats::monotonic_ns;

pub(crate) const MAX_PROCS: usize = 8;
pub(crate) const MAX_THREADS: usize = 8;
/// One per thread and one per thread's helper.
pub(crate) const SLOTS: usize = 2 * MAX_THREADS;
/// The unprivileged process's record.
pub(crate) const UNPRIVILEGED: usize = MAX_PROCS;
const RING: usize = 16;

/// `CLOCK_MONOTONIC`, the same in every process; never 0.
pub(crate) fn now_ms() -> u64 {
    (monotonic_ns() / 1_000_000).max(1)
}

#[repr(C)]
pub(crate) struct CallSlot {
    /// For `tgkill`; 0 before the thread starts.
    pub(crate) tid: AtomicI32,
    /// Index in [`Syscall::ALL`] plus one; 0 between calls.
    pub(crate) call: AtomicU32,
    pub(crate) step: AtomicU64,
    pub(crate) args: [AtomicU64; 6],
    /// [`now_ms`].
    pub(crate) started_ms: AtomicU64,
    /// 0: never.
    pub(crate) interrupt_after_ms: AtomicU64,
    pub(crate) last_signal_ms: AtomicU64,
    /// `started_ms` of the call reported.
    pub(crate) hung_reported: AtomicU64,
}

impl CallSlot {
    pub(crate) fn begin(&self, call: Syscall, step: u64, args: &[u64; 6], interrupt_after_ms: u64) {
        self.step.store(step, Ordering::Relaxed);
        for (slot, &arg) in self.args.iter().zip(args) {
            slot.store(arg, Ordering::Relaxed);
        }
        self.interrupt_after_ms
            .store(interrupt_after_ms, Ordering::Relaxed);
        self.last_signal_ms.store(0, Ordering::Relaxed);
        self.started_ms.store(now_ms(), Ordering::Relaxed);
        self.call.store(call.index() as u32 + 1, Ordering::Release);
    }

    pub(crate) fn end(&self) {
        self.call.store(0, Ordering::Release);
    }

    pub(crate) fn current(&self) -> Option<(Syscall, u64, [u64; 6], u64)> {
        let call = self.call.load(Ordering::Acquire);
        let call = Syscall::from_index((call as usize).checked_sub(1)?)?;
        let args = std::array::from_fn(|i| self.args[i].load(Ordering::Relaxed));
        let step = self.step.load(Ordering::Relaxed);
        Some((call, step, args, self.started_ms.load(Ordering::Relaxed)))
    }
}

#[repr(C)]
pub(crate) struct Offered {
    entries: [AtomicU64; RING],
    cursor: AtomicU64,
}

impl Offered {
    /// `value` is not 0; it replaces the oldest entry.
    pub(crate) fn offer(&self, value: u64) {
        let at = self.cursor.fetch_add(1, Ordering::Relaxed) as usize % RING;
        self.entries[at].store(value, Ordering::Relaxed);
    }

    pub(crate) fn pick(&self, rng: &mut Rng) -> Option<u64> {
        let value = self.entries[rng.index(RING)].load(Ordering::Relaxed);
        (value != 0).then_some(value)
    }
}

#[repr(C)]
pub(crate) struct ProcShared {
    pub(crate) counts: [[AtomicU64; OUTCOMES]; SYSCALLS],
    pub(crate) alarms: AtomicU64,
    /// The rest are counted only.
    pub(crate) alarms_printed: AtomicU64,
    pub(crate) slots: [CallSlot; SLOTS],
    pub(crate) handles: Offered,
    /// `home << 32 | number`.
    pub(crate) locks: Offered,
    pub(crate) ops: Offered,
    pub(crate) descriptors: Offered,
    pub(crate) names: Offered,
}

impl ProcShared {
    pub(crate) fn count(&self, call: Syscall, ret: i64) {
        self.counts[call.index()][outcome_bucket(ret)].fetch_add(1, Ordering::Relaxed);
    }

    /// Any outcome.
    pub(crate) fn calls_of(&self, call: Syscall) -> u64 {
        self.counts[call.index()]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

#[repr(C)]
pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    /// The unprivileged one last ([`UNPRIVILEGED`]).
    pub(crate) procs: [ProcShared; MAX_PROCS + 1],
}

impl Shared {
    /// All zeros, for this process and the children it forks from now on,
    /// until the process exits.
    pub(crate) fn map() -> io::Result<&'static Shared> {
        let len = std::mem::size_of::<Shared>();
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh shared mapping, referred to by nothing.
        let base = unsafe { map_anonymous(ptr::null_mut(), len, prot, libc::MAP_SHARED)? };
        // SAFETY: the mapping is page aligned, as long as `Shared` and
        // zero-filled; all zeros is a valid value of every atomic in it, and
        // it is never unmapped, so the reference may live forever. Processes
        // share it only through atomics.
        Ok(unsafe { &*(base as *const Shared) })
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn alarms(&self) -> u64 {
        self.procs
            .iter()
            .map(|p| p.alarms.load(Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn calls_of(&self, call: Syscall) -> u64 {
        self.procs.iter().map(|p| p.calls_of(call)).sum()
    }

    /// In every process.
    pub(crate) fn outcomes_of(&self, call: Syscall, bucket: usize) -> u64 {
        self.procs
            .iter()
            .map(|p| p.counts[call.index()][bucket].load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_offers_and_calls_under_way_are_shared() {
        let shared = Shared::map().expect("mapping");
        let proc = &shared.procs[1];
        proc.count(Syscall::Free, 0);
        proc.handles.offer(7);
        // SAFETY: the child only touches atomics in the shared mapping and
        // leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            proc.count(Syscall::Free, -i64::from(libc::EBADF));
            shared.stop.store(true, Ordering::Relaxed);
            // SAFETY: ends the child without running the parent's cleanup.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(shared.stopped());
        assert_eq!(shared.calls_of(Syscall::Free), 2);
        assert_eq!(shared.outcomes_of(Syscall::Free, libc::EBADF as usize), 1);
        let mut rng = Rng::from_seed(3);
        let picked = (0..200).filter_map(|_| proc.handles.pick(&mut rng)).next();
        assert_eq!(picked, Some(7));
        // A slot tells what runs.
        let shared = Shared::map().expect("mapping");
        let slot = &shared.procs[0].slots[3];
        assert!(slot.current().is_none());
        slot.begin(Syscall::Lock, 9, &[1, 2, 3, 4, 5, 6], 100);
        let (call, step, args, started) = slot.current().expect("a call");
        assert_eq!((call, step, args[5]), (Syscall::Lock, 9, 6));
        assert!(started > 0);
        slot.end();
        assert!(slot.current().is_none());
    }
}
