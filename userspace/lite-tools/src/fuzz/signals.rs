//! Signals that interrupt calls, and the thread that sends them.
//!
//! Every fuzzing process handles `SIGUSR1` without `SA_RESTART`, so a
//! call it interrupts returns `EINTR` instead of being restarted. The
//! handler only counts, per thread: a call may return `EINTR` only if the
//! count of its thread changed while it ran.
//!
//! The interrupter thread of each process watches its threads' call slots
//! and signals a call that has blocked longer than it may (its
//! `interrupt_after_ms`) every [`RESIGNAL_MS`] until it returns, which
//! bounds every call that waits interruptibly; now and then it also
//! signals a call that is merely running, to interrupt calls at random
//! points.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::rng::Rng;
use super::shared::{now_ms, ProcShared};
use crate::deadline::interrupt_thread;

pub(crate) const RESIGNAL_MS: u64 = 250;
const TICK: Duration = Duration::from_millis(20);
/// Per tick.
const RANDOM_SIGNAL_PER_MILLE: u32 = 3;

pub(crate) fn interrupter(proc: &ProcShared, slots: usize, mut rng: Rng, done: impl Fn() -> bool) {
    while !done() {
        let now = now_ms();
        for slot in proc.slots.iter().take(slots) {
            let Some((_, _, _, started)) = slot.current() else {
                continue;
            };
            let tid = slot.tid.load(Ordering::Relaxed);
            let limit = slot.interrupt_after_ms.load(Ordering::Relaxed);
            let last = slot.last_signal_ms.load(Ordering::Relaxed);
            let overdue = limit > 0
                && now.saturating_sub(started) >= limit
                && now.saturating_sub(last) >= RESIGNAL_MS;
            if overdue || rng.per_mille(RANDOM_SIGNAL_PER_MILLE) {
                slot.last_signal_ms.store(now, Ordering::Relaxed);
                interrupt_thread(tid);
            }
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;
    use crate::deadline::{current_thread, signals_handled, try_install_interrupt_handler};

    #[test]
    fn a_blocked_read_is_interrupted_and_counted() {
        try_install_interrupt_handler().expect("handler");
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let _ = tx.send(current_thread());
            let before = signals_handled();
            let mut byte = 0u8;
            // SAFETY: reads one byte into `byte` from the pipe.
            let n = unsafe { libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) };
            let errno = io::Error::last_os_error().raw_os_error();
            (n, errno, signals_handled() - before)
        });
        let tid = rx.recv().expect("tid");
        // Until the read returns: a signal before it blocks only counts.
        while !reader.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            interrupt_thread(tid);
        }
        let (n, errno, signals) = reader.join().expect("reader");
        assert_eq!((n, errno), (-1, Some(libc::EINTR)));
        assert!(signals >= 1);
        // SAFETY: closes the pipe opened above.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
