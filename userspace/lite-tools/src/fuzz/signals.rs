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

use std::cell::Cell;
use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::rng::Rng;
use super::shared::{now_ms, ProcShared};

thread_local! {
    /// Signals this thread has handled.
    static HANDLED: Cell<u64> = const { Cell::new(0) };
}

/// How often a blocked call is signalled again until it returns.
pub(crate) const RESIGNAL_MS: u64 = 250;
/// How often the interrupter looks at the slots.
const TICK: Duration = Duration::from_millis(20);
/// Chance per tick, in thousandths, that a running call is signalled anyway.
const RANDOM_SIGNAL_PER_MILLE: u32 = 3;

extern "C" fn on_signal(_: libc::c_int) {
    // A const-initialised thread-local without destructor is a plain TLS
    // access, which is safe in a signal handler.
    HANDLED.with(|handled| handled.set(handled.get().wrapping_add(1)));
}

/// Installs the `SIGUSR1` handler (without `SA_RESTART`) for the process.
pub(crate) fn install_handler() -> io::Result<()> {
    // SAFETY: `action` is fully initialised before use; the handler only
    // touches a thread-local counter.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = 0;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Signals the calling thread has handled so far.
pub(crate) fn handled() -> u64 {
    HANDLED.with(Cell::get)
}

/// The calling thread's id.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Sends `SIGUSR1` to thread `tid` of this process.
pub(crate) fn signal_thread(tid: i32) {
    if tid <= 0 {
        return;
    }
    // SAFETY: tgkill only reaches a thread of this process (ESRCH if the
    // thread is gone), whose handler is installed.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::c_long::from(libc::getpid()),
            libc::c_long::from(tid),
            libc::c_long::from(libc::SIGUSR1),
        );
    }
}

/// Runs the interrupter over `proc`'s first `slots` slots until `done`
/// returns true.
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
                signal_thread(tid);
            }
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_read_is_interrupted_and_counted() {
        install_handler().expect("handler");
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let _ = tx.send(gettid());
            let before = handled();
            let mut byte = 0u8;
            // SAFETY: reads one byte into `byte` from the pipe.
            let n = unsafe { libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) };
            let errno = io::Error::last_os_error().raw_os_error();
            (n, errno, handled() - before)
        });
        let tid = rx.recv().expect("tid");
        // Until the read returns: a signal before it blocks only counts.
        while !reader.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            signal_thread(tid);
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
