//! Synchronization across nodes: atomic counters in remote memory,
//! distributed locks, and the process's default priority.
//!
//! ```no_run
//! use lite::sync::{AtomicLmr, Lock};
//! use lite::Priority;
//!
//! // On node 1: a counter and a lock, both kept by node 1.
//! let counter = AtomicLmr::alloc(1, 0x5eed)?;
//! let lock = Lock::create(1)?;
//! // Tell the other nodes `lock.number()` (and publish the counter), then:
//! let ticket = counter.fetch_add(1, Priority::None)?;
//! {
//!     let held = lock.lock()?;
//!     if held.owner_died() {
//!         // The last holder's node went while holding it: check what the
//!         // lock guards before relying on it.
//!     }
//!     // ... exclusive across every node until `held` is dropped ...
//! }
//! # let _ = ticket;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Atomics are RDMA atomics even when the memory is on this node, so they
//! are atomic with respect to each other from every node, but not ordered
//! with plain writes to the same LMR.

use std::fmt;
use std::io;
use std::marker::PhantomData;

use libc::c_long;

use crate::sys::{self, LiteLock};
use crate::{check, Lmr, Permission, Priority};

/// An 8-byte LMR used as an atomic counter: [`AtomicLmr::fetch_add`] and
/// [`AtomicLmr::compare_swap`] from any node are atomic with respect to
/// each other.
///
/// Like the [`Lmr`] it wraps, dropping it frees (or unmaps) the memory.
#[derive(Debug)]
pub struct AtomicLmr {
    lmr: Lmr,
}

impl AtomicLmr {
    /// Allocates an 8-byte LMR for atomics (`LITE_ALLOC_ATOMIC`) on `node`,
    /// holding 0. `password` guards its plain reads and writes; atomics do
    /// not check it.
    pub fn alloc(node: u32, password: u64) -> io::Result<AtomicLmr> {
        Lmr::alloc(node, 8, sys::ALLOC_ATOMIC, password).map(|lmr| AtomicLmr { lmr })
    }

    /// Maps the atomic LMR published under `name` on `node`, asking for
    /// `permission` (include [`sys::PERM_ATOMIC`]); see [`Lmr::ask`].
    pub fn ask(
        node: u32,
        name: u64,
        permission: Permission,
        password: u64,
    ) -> io::Result<AtomicLmr> {
        Lmr::ask(node, name, permission, password).map(|lmr| AtomicLmr { lmr })
    }

    /// Uses `lmr` for atomics. Nothing is checked here: the operations fail
    /// with `EPERM` if its handle lacks ATOMIC and `EINVAL` if it is not
    /// exactly 8 bytes at an 8-byte aligned address.
    pub fn from_lmr(lmr: Lmr) -> AtomicLmr {
        AtomicLmr { lmr }
    }

    /// The LMR, for publishing it or for plain reads and writes.
    pub fn lmr(&self) -> &Lmr {
        &self.lmr
    }

    /// The LMR back.
    pub fn into_lmr(self) -> Lmr {
        self.lmr
    }

    /// Atomically adds `value` (modulo 2^64) and returns the value before.
    pub fn fetch_add(&self, value: u64, priority: Priority) -> io::Result<u64> {
        let mut old = 0;
        // SAFETY: `old` is a live, exclusively borrowed u64.
        let ret = unsafe { sys::fetch_add(self.lmr.handle(), &mut old, value, priority.as_raw()) };
        check(ret).map(|_| old)
    }

    /// The current value, read atomically (a fetch-add of 0).
    pub fn load(&self, priority: Priority) -> io::Result<u64> {
        self.fetch_add(0, priority)
    }

    /// Atomically replaces the value with `new` if it is `expected`, like
    /// [`std::sync::atomic::AtomicU64::compare_exchange`]: `Ok(Ok(expected))`
    /// if it swapped, `Ok(Err(actual))` with the value found if not, and
    /// `Err` if the operation itself failed.
    pub fn compare_swap(
        &self,
        expected: u64,
        new: u64,
        priority: Priority,
    ) -> io::Result<Result<u64, u64>> {
        let mut old = 0;
        // SAFETY: `old` is a live, exclusively borrowed u64.
        let ret = unsafe {
            sys::compare_swp(
                self.lmr.handle(),
                &mut old,
                expected,
                new,
                priority.as_raw(),
            )
        };
        check(ret)?;
        Ok(if old == expected { Ok(old) } else { Err(old) })
    }

    /// Frees the LMR (see [`Lmr::free`]).
    pub fn free(self) -> io::Result<()> {
        self.lmr.free()
    }
}

/// A distributed lock, kept by its home node: a FIFO lock, so callers on
/// every node get it in the order they asked.
///
/// A `Lock` is only a name (home node and number): it can be copied, sent
/// to other threads and re-created on other nodes with [`Lock::ask`].
/// Locks live as long as their home node is in the cluster; there is no
/// call to destroy one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lock {
    raw: LiteLock,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("home", &self.raw.home)
            .field("number", &self.raw.number)
            .finish()
    }
}

impl Lock {
    /// Creates a lock kept by node `home` (this node included). `ENOSPC`
    /// if `home` keeps [`sys::MAX_LOCKS`] locks already; `EDQUOT` if the
    /// caller's `locks` quota would be exceeded (a lock stays charged for
    /// as long as this node is a member).
    pub fn create(home: u32) -> io::Result<Lock> {
        let mut raw = LiteLock::default();
        // SAFETY: `raw` is a live, exclusively borrowed LiteLock.
        check(unsafe { sys::create_lock(home, &mut raw) })?;
        Ok(Lock { raw })
    }

    /// The existing lock `number` of node `home`, as another node or
    /// process created it. `ENOENT` if there is no such lock.
    pub fn ask(home: u32, number: u32) -> io::Result<Lock> {
        let mut raw = LiteLock::default();
        // SAFETY: `raw` is a live, exclusively borrowed LiteLock.
        check(unsafe { sys::ask_lock(home, number, &mut raw) })?;
        Ok(Lock { raw })
    }

    /// The node that keeps the lock.
    pub fn home(&self) -> u32 {
        self.raw.home
    }

    /// The lock's number on its home node, for [`Lock::ask`] elsewhere.
    pub fn number(&self) -> u32 {
        self.raw.number
    }

    /// The `struct lite_lock` the system calls take.
    pub fn as_raw(&self) -> &LiteLock {
        &self.raw
    }

    /// Blocks until the calling thread holds the lock, and returns a guard
    /// that releases it when dropped. `EDEADLK` if this thread holds it
    /// already, `EINTR` if a signal arrived while waiting, `EHOSTDOWN` if
    /// the lock's home node is gone.
    ///
    /// When the previous holder's node died or left while holding the lock,
    /// the kernel returns `EOWNERDEAD` with the lock held: this is a guard
    /// too, whose [`LockGuard::owner_died`] says so, since what the lock
    /// guards may have been left half updated.
    ///
    /// The holder is the calling thread, so the guard cannot be sent to
    /// another thread. Locks still held when the process exits are
    /// released.
    pub fn lock(&self) -> io::Result<LockGuard<'_>> {
        // SAFETY: `raw` is readable for the call.
        let owner_died = held(unsafe { sys::lock(&self.raw) })?;
        Ok(LockGuard {
            lock: self,
            owner_died,
            _holder_thread: PhantomData,
        })
    }

    /// Releases the lock held by the calling thread without a guard (for
    /// one given up with [`std::mem::forget`]). `EPERM` if this thread
    /// does not hold it.
    pub fn unlock(&self) -> io::Result<()> {
        // SAFETY: `raw` is readable for the call.
        check(unsafe { sys::unlock(&self.raw) }).map(drop)
    }
}

/// Whether `lite_lock`'s result `ret` means the lock is held: `Ok(true)`
/// if it is, but its previous holder's node died (`EOWNERDEAD`).
fn held(ret: c_long) -> io::Result<bool> {
    if ret == -c_long::from(libc::EOWNERDEAD) {
        return Ok(true);
    }
    check(ret).map(|_| false)
}

/// Proof that the calling thread holds a [`Lock`]; dropping it releases
/// the lock. Not [`Send`]: only the holding thread can release it.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard<'a> {
    lock: &'a Lock,
    /// `lite_lock` returned `EOWNERDEAD`.
    owner_died: bool,
    /// The lock belongs to this thread.
    _holder_thread: PhantomData<*const ()>,
}

impl LockGuard<'_> {
    /// The lock held.
    pub fn lock(&self) -> &Lock {
        self.lock
    }

    /// Whether the previous holder's node died or left while holding the
    /// lock (`lite_lock` returned `EOWNERDEAD`). The lock is held all the
    /// same, but what it guards may be half updated. Only the acquisition
    /// right after the death is told; later ones are ordinary.
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    /// Releases the lock and reports whether the kernel did.
    pub fn unlock(self) -> io::Result<()> {
        let lock = self.lock;
        std::mem::forget(self);
        lock.unlock()
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; `unlock` reports it.
        let _ = self.lock.unlock();
    }
}

/// Sets the process's default priority, the one operations given
/// [`Priority::None`] run with, and returns the previous default.
///
/// Initially the default is [`Priority::None`] itself: neither throttled
/// nor protected. Low-priority operations wait while high-priority ones
/// run on the node (see the uapi header's "Priorities and QoS").
pub fn set_priority(priority: Priority) -> io::Result<Priority> {
    let previous = check(sys::set_priority(priority.as_raw()))?;
    u32::try_from(previous)
        .ok()
        .and_then(Priority::from_raw)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("kernel returned {previous}, which is not a priority"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Without LITE in the host kernel every call fails with ENOSYS; these
    // check the wrappers report that instead of made-up values.

    fn errno<T: fmt::Debug>(result: io::Result<T>) -> Option<i32> {
        result.err().and_then(|e| e.raw_os_error())
    }

    #[test]
    fn calls_report_the_kernel_s_error() {
        assert_eq!(errno(Lock::create(1)), Some(libc::ENOSYS));
        assert_eq!(errno(Lock::ask(1, 0)), Some(libc::ENOSYS));
        assert_eq!(errno(set_priority(Priority::High)), Some(libc::ENOSYS));
        assert_eq!(errno(AtomicLmr::alloc(1, 0)), Some(libc::ENOSYS));
    }

    #[test]
    fn a_lock_is_its_home_and_number() {
        let lock = Lock {
            raw: LiteLock { home: 2, number: 7 },
        };
        assert_eq!((lock.home(), lock.number()), (2, 7));
        assert_eq!(lock.as_raw(), &LiteLock { home: 2, number: 7 });
        assert_eq!(format!("{lock:?}"), "Lock { home: 2, number: 7 }");
        assert_eq!(errno(lock.lock()), Some(libc::ENOSYS));
        assert_eq!(errno(lock.unlock()), Some(libc::ENOSYS));
    }

    #[test]
    fn a_lock_whose_owner_died_is_held_all_the_same() {
        assert_eq!(held(0).ok(), Some(false));
        assert_eq!(held(-c_long::from(libc::EOWNERDEAD)).ok(), Some(true));
        assert_eq!(
            errno(held(-c_long::from(libc::EDEADLK))),
            Some(libc::EDEADLK)
        );
        assert_eq!(
            errno(held(-c_long::from(libc::EHOSTDOWN))),
            Some(libc::EHOSTDOWN)
        );
    }

    #[test]
    fn priorities_round_trip_through_raw_values() {
        for priority in Priority::ALL {
            assert_eq!(Priority::from_raw(priority.as_raw()), Some(priority));
        }
        assert_eq!(Priority::from_raw(3), None);
    }
}
