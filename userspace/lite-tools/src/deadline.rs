//! Bounds on the test programs' waits for other nodes: every wait has a
//! [`Deadline`], and one that runs out fails naming what it waited for, so
//! that a node that stalls or is out of step ends the run instead of
//! hanging it. The bounds are generous for emulation, where a remote
//! operation may take tens of milliseconds and a barrier of four nodes
//! seconds.
//!
//! A LITE call that may block for ever (a barrier, a blocking send to a
//! full ring, a blocking receive) is bounded on its own thread by a
//! [`Watchdog`] ([`interrupt_at`] for a single call), which signals the
//! thread once the deadline passed: a LITE call waiting interruptibly then
//! returns `-EINTR`. A call whose thread may be left behind is bounded by
//! [`bounded`] instead, which runs it on a thread of its own.

use std::cell::Cell;
use std::io;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

use libc::c_long;

use crate::errno::describe_result;
use crate::kernel::Kernel;

/// How often [`interrupt_at`] signals a call still running past its
/// deadline: a signal that comes just before the call starts waiting
/// interrupts nothing.
const INTERRUPT_REPEAT: Duration = Duration::from_millis(100);

/// A bound on one wait: when it ends, and what is waited for.
#[derive(Debug, Clone)]
pub struct Deadline {
    start: Instant,
    limit: Duration,
    what: String,
}

impl Deadline {
    /// Ends `limit` from now; `what` names what is waited for ("room in
    /// node 2's ring of port 12").
    pub fn after(limit: Duration, what: impl Into<String>) -> Self {
        Deadline {
            start: Instant::now(),
            limit,
            what: what.into(),
        }
    }

    /// Starts the same wait afresh from now: for a bound on the time
    /// between two signs of progress rather than on the whole wait.
    pub fn restart(&mut self) {
        self.start = Instant::now();
    }

    /// Whether it passed.
    pub fn passed(&self) -> bool {
        self.start.elapsed() >= self.limit
    }

    /// Time left until the deadline; zero once it passed.
    pub fn left(&self) -> Duration {
        self.limit.saturating_sub(self.start.elapsed())
    }

    /// The failure of a wait that ran out.
    pub fn expired(&self) -> String {
        format!(
            "gave up after {} waiting for {}",
            show(self.limit),
            self.what
        )
    }

    /// `Err` with [`Deadline::expired`] once the deadline passed, for the
    /// `?` of a polling loop.
    pub fn check(&self) -> Result<(), String> {
        if self.passed() {
            Err(self.expired())
        } else {
            Ok(())
        }
    }
}

/// A bound for humans: `90 s`, or `250 ms` below a second.
pub fn show(limit: Duration) -> String {
    if limit >= Duration::from_secs(1) && limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{} ms", limit.as_millis())
    }
}

/// What [`retry_while_busy`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retried {
    /// The first result that was not busy.
    pub ret: c_long,
    /// Tries that returned one of the busy errnos.
    pub busy: u64,
}

/// Calls `attempt` until it returns anything but one of the `busy` errnos
/// (`EAGAIN` while a ring is full, say), pausing `pause` between tries.
/// Fails with [`Deadline::expired`] and the last result once `deadline`
/// passed; tries at least once.
pub fn retry_while_busy(
    deadline: &Deadline,
    busy: &[i32],
    pause: Duration,
    mut attempt: impl FnMut() -> c_long,
) -> Result<Retried, String> {
    let mut tries = 0;
    loop {
        let ret = attempt();
        if !busy.iter().any(|&errno| ret == -c_long::from(errno)) {
            return Ok(Retried { ret, busy: tries });
        }
        tries += 1;
        if deadline.passed() {
            return Err(format!(
                "{} ({tries} tries, the last returned {})",
                deadline.expired(),
                describe_result(ret)
            ));
        }
        thread::sleep(pause);
    }
}

thread_local! {
    /// Signals this thread has handled.
    static HANDLED: Cell<u64> = const { Cell::new(0) };
}

extern "C" fn count_signal(_: libc::c_int) {
    // A const-initialised thread-local without destructor is a plain TLS
    // access, which is safe in a signal handler.
    HANDLED.with(|handled| handled.set(handled.get().wrapping_add(1)));
}

/// Signals the calling thread has handled so far: a call may have been
/// interrupted only if this changed while it ran.
pub fn signals_handled() -> u64 {
    HANDLED.with(Cell::get)
}

/// Installs the process's one `SIGUSR1` handler, which only counts, per
/// thread, without `SA_RESTART`, so that the signal makes a thread blocked
/// in a LITE call return `-EINTR`. Every user installs this same handler,
/// so none can replace another's in a process that has several.
pub fn try_install_interrupt_handler() -> io::Result<()> {
    // SAFETY: `action` is fully initialised before use; the handler only
    // touches a thread-local counter.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// [`try_install_interrupt_handler`] once per process; a failure leaves
/// the calls unbounded.
pub fn install_interrupt_handler() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let _ = try_install_interrupt_handler();
    });
}

/// The calling thread's id, for [`interrupt_thread`].
pub fn current_thread() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Sends `SIGUSR1` to thread `tid` of this process; see
/// [`install_interrupt_handler`].
pub fn interrupt_thread(tid: i32) {
    if tid <= 0 {
        return;
    }
    // SAFETY: tgkill only reaches a thread of this process (ESRCH if it is
    // gone), whose SIGUSR1 handler only counts.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            c_long::from(libc::getpid()),
            c_long::from(tid),
            c_long::from(libc::SIGUSR1),
        );
    }
}

#[derive(Default)]
struct Watch {
    call_ends: Option<Instant>,
    interrupted: bool,
    done: bool,
}

/// Locks `mutex`, also after a panic while it was held: what it guards
/// stays usable for the checks that follow.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Bounds the LITE calls of one thread, one after the other, each by a
/// [`Deadline`] of its own: a thread of its own interrupts a call still
/// running once its deadline passed, every [`INTERRUPT_REPEAT`] until it
/// returns (see [`install_interrupt_handler`]). One watchdog serves many
/// calls, so that even calls made by the thousand each get a bound.
pub struct Watchdog {
    tid: i32,
    watch: Mutex<Watch>,
    changed: Condvar,
}

/// Runs its closure when dropped, also in a panic: ends a call of
/// [`Watchdog::call`] (the watchdog signals under the same lock, so no
/// signal is sent once this ran), or the watchdog's thread once its thread
/// is done with calls.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

impl Watchdog {
    /// Runs `body` with a watchdog for the calling thread's calls. Without
    /// a thread for the watchdog, the calls run unbounded.
    pub fn guard<T>(body: impl FnOnce(&Watchdog) -> T) -> T {
        install_interrupt_handler();
        let watchdog = Watchdog {
            tid: current_thread(),
            watch: Mutex::new(Watch::default()),
            changed: Condvar::new(),
        };
        thread::scope(|scope| {
            let watching = thread::Builder::new()
                .name("deadline".into())
                .spawn_scoped(scope, || watchdog.watch());
            let value = {
                let _ended = OnDrop(|| {
                    lock(&watchdog.watch).done = true;
                    watchdog.changed.notify_all();
                });
                body(&watchdog)
            };
            // A scoped thread is joined at the end of the scope anyway.
            drop(watching);
            value
        })
    }

    /// The watchdog's thread: interrupts a call past its deadline.
    fn watch(&self) {
        let mut watch = lock(&self.watch);
        while !watch.done {
            let pause = match watch.call_ends {
                Some(ends) => match ends.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => {
                        watch.interrupted = true;
                        interrupt_thread(self.tid);
                        INTERRUPT_REPEAT
                    }
                },
                // Until a call starts, or the thread is done.
                None => Duration::from_secs(3600),
            };
            watch = self
                .changed
                .wait_timeout(watch, pause)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(watch, _)| watch);
        }
    }

    /// Its result, and whether it had to be interrupted. Only for calls of
    /// the thread that made the watchdog.
    pub fn call<T>(&self, deadline: &Deadline, call: impl FnOnce() -> T) -> (T, bool) {
        debug_assert_eq!(self.tid, current_thread(), "a call of another thread");
        {
            let mut watch = lock(&self.watch);
            watch.call_ends = Some(Instant::now() + deadline.left());
            watch.interrupted = false;
        }
        self.changed.notify_all();
        let value = {
            let _ended = OnDrop(|| lock(&self.watch).call_ends = None);
            call()
        };
        let interrupted = lock(&self.watch).interrupted;
        (value, interrupted)
    }

    /// [`Watchdog::call`] of a system call that must return 0; a failure
    /// says whether the deadline cut it short.
    pub fn call_zero(
        &self,
        deadline: &Deadline,
        call: impl FnOnce() -> c_long,
    ) -> Result<(), String> {
        let (ret, interrupted) = self.call(deadline, call);
        if interrupted && ret != 0 {
            return Err(format!("{} ({})", describe_result(ret), deadline.expired()));
        }
        crate::errno::expect_zero(ret)
    }
}

/// [`Watchdog::call`] for a single call; its result, and whether it had
/// to be interrupted.
pub fn interrupt_at<T>(deadline: &Deadline, call: impl FnOnce() -> T) -> (T, bool) {
    Watchdog::guard(|watchdog| watchdog.call(deadline, call))
}

/// Runs `call` on a thread of its own and waits at most `timeout` for its
/// result. A call that does not return in time stays blocked on its thread,
/// which ends with the process.
pub fn bounded<K, T, F>(kernel: &Arc<K>, timeout: Duration, call: F) -> Result<T, String>
where
    K: Kernel + Send + 'static,
    T: Send + 'static,
    F: FnOnce(&K) -> T + Send + 'static,
{
    let kernel = Arc::clone(kernel);
    spawn_reporting("bounded", move || call(&kernel))?
        .recv_timeout(timeout)
        .map_err(|_| format!("did not return within {}", show(timeout)))
}

/// Runs `work` on a thread named `name`; what it returns arrives on the
/// returned channel.
pub(crate) fn spawn_reporting<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<Receiver<T>, String> {
    let (sender, reports) = mpsc::channel();
    thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            // Nobody listens any more once the wait timed out.
            let _ = sender.send(work());
        })
        .map_err(|e| format!("cannot start the {name} thread: {e}"))?;
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kernel::{Defects, FakeKernel};
    use crate::tap::assert_contains;

    #[test]
    fn a_deadline_says_what_was_waited_for_once_it_passed() {
        let later = Deadline::after(Duration::from_secs(60), "the count of node 2");
        assert!(!later.passed());
        assert!(later.left() > Duration::from_secs(59));
        assert_eq!(later.check(), Ok(()));
        let now = Deadline::after(Duration::ZERO, "the count of node 2");
        assert!(now.passed());
        assert_eq!(now.left(), Duration::ZERO);
        let gave_up = "gave up after 0 ms waiting for the count of node 2";
        assert_eq!(now.check(), Err(gave_up.to_string()));
        let mut restarted = Deadline::after(Duration::from_millis(30), "a message");
        thread::sleep(Duration::from_millis(40));
        assert!(restarted.passed());
        restarted.restart();
        assert!(!restarted.passed());
        let minutes = Deadline::after(Duration::from_secs(600), "every node");
        let gave_up = "gave up after 600 s waiting for every node";
        assert_eq!(minutes.expired(), gave_up);
        assert_eq!(show(Duration::from_millis(1500)), "1500 ms");
    }

    #[test]
    fn a_retry_ends_at_the_first_result_that_is_not_busy() {
        let deadline = Deadline::after(Duration::from_secs(60), "room in the ring");
        let mut results = vec![0, -c_long::from(libc::EAGAIN), -c_long::from(libc::EBUSY)];
        let retried = retry_while_busy(
            &deadline,
            &[libc::EAGAIN, libc::EBUSY],
            Duration::ZERO,
            || results.pop().unwrap_or(c_long::MIN),
        );
        assert_eq!(retried, Ok(Retried { ret: 0, busy: 2 }));
        // Another errno ends it too: only the caller can judge it.
        let retried = retry_while_busy(&deadline, &[libc::EAGAIN], Duration::ZERO, || {
            -c_long::from(libc::EIO)
        });
        assert_eq!(retried.map(|r| r.ret), Ok(-c_long::from(libc::EIO)));

        // One that stays busy fails naming what it waited for.
        let deadline = Deadline::after(Duration::from_millis(50), "room in node 3's ring");
        let begun = Instant::now();
        let mut tries = 0;
        let retried =
            retry_while_busy(&deadline, &[libc::EAGAIN], Duration::from_millis(5), || {
                tries += 1;
                -c_long::from(libc::EAGAIN)
            });
        let failure = retried.expect_err("always busy");
        let gave_up = "gave up after 50 ms waiting for room in node 3's ring";
        assert!(failure.starts_with(gave_up), "{failure}");
        assert_contains(&failure, "-EAGAIN");
        assert!(begun.elapsed() >= Duration::from_millis(50));
        assert!(tries > 1);
        // Tried once even when the deadline passed before.
        let passed = Deadline::after(Duration::ZERO, "nothing");
        let retried = retry_while_busy(&passed, &[libc::EAGAIN], Duration::ZERO, || 7);
        assert_eq!(retried, Ok(Retried { ret: 7, busy: 0 }));
    }

    /// Sleeps in a system call that a handled signal interrupts, as a
    /// blocked LITE call would wait; whether it was interrupted.
    fn interruptible_sleep(length: Duration) -> bool {
        let request = libc::timespec {
            tv_sec: libc::time_t::try_from(length.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(length.subsec_nanos()),
        };
        let mut left = request;
        // SAFETY: both timespecs are valid for the call.
        let ret = unsafe { libc::nanosleep(&request, &mut left) };
        ret == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    }

    #[test]
    fn a_watchdog_bounds_each_of_many_calls_and_ends_with_its_thread() {
        let mut each = Deadline::after(Duration::from_millis(100), "a peer");
        let interrupted: Vec<bool> = Watchdog::guard(|watchdog| {
            [Duration::ZERO, Duration::from_secs(30), Duration::ZERO]
                .into_iter()
                .map(|sleep| {
                    each.restart();
                    let (cut_short, interrupted) =
                        watchdog.call(&each, || interruptible_sleep(sleep));
                    assert_eq!(cut_short, interrupted);
                    interrupted
                })
                .collect()
        });
        assert_eq!(interrupted, [false, true, false]);
        // No signal is left over for the thread's next call.
        assert!(!interruptible_sleep(Duration::from_millis(50)));
        // One call on its own, cut short soon after its deadline.
        let deadline = Deadline::after(Duration::from_millis(100), "a peer that never answers");
        let begun = Instant::now();
        let sleep = || interruptible_sleep(Duration::from_secs(30));
        assert_eq!(interrupt_at(&deadline, sleep), (true, true));
        let took = begun.elapsed();
        let bounds = Duration::from_millis(100)..Duration::from_secs(10);
        assert!(bounds.contains(&took), "{took:?}");
        // A panic in the calls ends the watchdog too, rather than hanging.
        let panicked = std::panic::catch_unwind(|| {
            Watchdog::guard(|_| panic!("a failed check"));
        });
        assert!(panicked.is_err());
    }

    #[test]
    fn a_bounded_call_that_hangs_is_left_behind() {
        let kernel = Arc::new(FakeKernel::new(1, 1, Defects::default()));
        let returned = bounded(&kernel, Duration::from_secs(5), |k| k.get_node_id());
        assert_eq!(returned, Ok(-c_long::from(libc::ENOTCONN)));
        let begun = Instant::now();
        let hung = bounded(&kernel, Duration::from_millis(50), |_| {
            thread::sleep(Duration::from_secs(2));
        });
        assert_eq!(hung, Err("did not return within 50 ms".to_string()));
        assert!(begun.elapsed() < Duration::from_secs(2));
    }
}
