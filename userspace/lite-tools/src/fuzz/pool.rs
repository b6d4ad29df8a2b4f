//! The resources a fuzzing process holds (its pool, shared by its
//! threads), what it released (stale ones, which must be refused), and
//! how fuzzers on different nodes find each other's names and ports.
//!
//! Names carry the node, the process and a size class, so that a fuzzer
//! guessing a name on another node also knows the size of what it maps.
//! Most LMRs are created with one password shared by every fuzzer
//! ([`SHARED_PASSWORD`]), and a name is published with its LMR's password,
//! so that guessing a name is mostly enough to map it (and a wrong
//! password a deliberate choice).

use std::collections::VecDeque;

use lite::sys::{
    LiteLock, CHUNK_SIZE, MAX_PORTS, PERM_ADMIN, PERM_ATOMIC, PERM_READ, PERM_SHARE, PERM_WRITE,
};

use super::memory::PAGE;

/// "LF".
const NAME_TAG: u64 = 0x4c46 << 48;
/// The process field of the coordinator's names.
const COORDINATOR: u64 = 0xff;
/// Names per (node, process, size class).
pub(crate) const NAME_SLOTS: u64 = 4;
pub(crate) const SIZE_CLASSES: [u64; 4] = [64, PAGE as u64, 65536, CHUNK_SIZE + PAGE as u64];
/// For a size none of [`SIZE_CLASSES`].
pub(crate) const UNSIZED_CLASS: u64 = 15;

pub(crate) fn fuzz_name(node: u32, proc: u32, class: u64, slot: u64) -> u64 {
    NAME_TAG
        | (u64::from(node) & 0xff) << 40
        | (u64::from(proc) & 0xff) << 32
        | (class & 0xff) << 16
        | (slot & 0xffff)
}

pub(crate) fn size_class(size: u64) -> u64 {
    SIZE_CLASSES
        .iter()
        .position(|&s| s == size)
        .map_or(UNSIZED_CLASS, |class| class as u64)
}

pub(crate) fn size_of_name(name: u64) -> Option<u64> {
    if name & (0xffff << 48) != NAME_TAG {
        return None;
    }
    SIZE_CLASSES.get(((name >> 16) & 0xff) as usize).copied()
}

/// Of most LMRs the fuzzers create, and of every name they ask for.
pub(crate) const SHARED_PASSWORD: u64 = 0x4c46_7061_7373_7764;

pub(crate) fn coordinator_name(node: u32, kind: u64) -> u64 {
    NAME_TAG | (u64::from(node) & 0xff) << 40 | COORDINATOR << 32 | kind
}

/// Kinds of [`coordinator_name`]: fuzzing starts, fuzzing is done.
pub(crate) const READY: u64 = 1;
pub(crate) const DONE: u64 = 2;

/// Every fuzzer registers, receives on and calls them, on any node.
pub(crate) const POOL_PORTS: u32 = 32;

/// For races with processes of its own: above [`POOL_PORTS`], which random
/// calls never use, so no other process takes its messages.
pub(crate) fn race_port(proc: u32, threads: u32, thread: u32) -> u32 {
    POOL_PORTS + (proc * threads + thread) % (MAX_PORTS - POOL_PORTS)
}

pub(crate) fn pack_lock(lock: LiteLock) -> u64 {
    u64::from(lock.home) << 32 | u64::from(lock.number)
}

pub(crate) fn unpack_lock(value: u64) -> LiteLock {
    LiteLock {
        home: (value >> 32) as u32,
        number: value as u32,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LmrKind {
    /// `lite_alloc_remote` (with `LITE_ALLOC_ATOMIC` if `atomic`).
    Allocated { atomic: bool },
    /// `lite_wrap_alloc` under `name`.
    Wrapped { name: u64 },
    /// `lite_register_lmr`.
    Registered,
    /// `lite_ask_lmr` of `name` on `owner`.
    Mapping { owner: u32, name: u64 },
}

impl LmrKind {
    /// The creator's handle has ADMIN.
    pub(crate) fn is_owner(self) -> bool {
        !matches!(self, LmrKind::Mapping { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LmrRecord {
    pub(crate) handle: u64,
    pub(crate) password: u64,
    pub(crate) size: Option<u64>,
    /// `LITE_PERM_*` asked for or given.
    pub(crate) permission: u64,
    pub(crate) kind: LmrKind,
}

impl LmrRecord {
    /// Certainly lacks ATOMIC or is not an 8-byte LMR.
    pub(crate) fn never_atomic(&self) -> bool {
        let lacks_atomic = self.permission & PERM_ATOMIC == 0;
        let wrong_size = self.size.is_some_and(|size| size != 8);
        match self.kind {
            // What a mapping got is at most what it asked for.
            LmrKind::Mapping { .. } => lacks_atomic,
            _ => lacks_atomic || wrong_size,
        }
    }
}

/// Atomics aside.
pub(crate) const OWNER_PERMISSIONS: u64 = PERM_READ | PERM_WRITE | PERM_SHARE | PERM_ADMIN;

/// Bounds that keep a process's footprint small enough for every node.
pub(crate) const MAX_LMRS: usize = 32;
/// Its own and remote.
pub(crate) const MAX_LMR_BYTES: u64 = 16 << 20;
pub(crate) const MAX_PORTS_HELD: usize = 4;
pub(crate) const MAX_REGISTRATIONS: usize = 8;
/// Per kind.
const STALE: usize = 32;
/// Far more than the process's threads make while one race runs.
const RELEASE_ATTEMPTS: usize = 1024;

/// Shared by the process's threads.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    pub(crate) lmrs: Vec<LmrRecord>,
    /// Released by a call that returned 0: never valid again.
    pub(crate) stale_handles: VecDeque<u64>,
    /// With their LMR's handle.
    pub(crate) names: Vec<(u64, u64)>,
    /// With their message size.
    pub(crate) ports: Vec<(u32, u64)>,
    pub(crate) locks: Vec<LiteLock>,
    pub(crate) ops: Vec<u64>,
    /// RPC calls: reaping one returns a length.
    pub(crate) calls: Vec<u64>,
    pub(crate) stale_ops: VecDeque<u64>,
    pub(crate) descriptors: Vec<u64>,
    pub(crate) stale_descriptors: VecDeque<u64>,
    /// Noted before each release: a value made up or taken from another
    /// process may be a handle a race of this process holds outside the pool.
    release_attempts: VecDeque<u64>,
}

/// Drops the oldest beyond `capacity`.
fn remember(list: &mut VecDeque<u64>, value: u64, capacity: usize) {
    if list.len() == capacity {
        list.pop_front();
    }
    list.push_back(value);
}

impl Pool {
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.lmrs
            .iter()
            .filter(|r| matches!(r.kind, LmrKind::Allocated { .. } | LmrKind::Wrapped { .. }))
            .filter_map(|r| r.size)
            .sum()
    }

    pub(crate) fn registrations(&self) -> usize {
        self.lmrs
            .iter()
            .filter(|r| r.kind == LmrKind::Registered)
            .count()
    }

    pub(crate) fn lmr(&self, handle: u64) -> Option<&LmrRecord> {
        self.lmrs.iter().find(|r| r.handle == handle)
    }

    pub(crate) fn add_lmr(&mut self, record: LmrRecord) {
        if let LmrKind::Wrapped { name } = record.kind {
            self.names.push((name, record.handle));
        }
        self.lmrs.push(record);
    }

    /// Its LMR's names go too.
    pub(crate) fn release_lmr(&mut self, handle: u64) {
        self.forget_lmr(handle);
        remember(&mut self.stale_handles, handle, STALE);
    }

    pub(crate) fn note_release_attempt(&mut self, handle: u64) {
        remember(&mut self.release_attempts, handle, RELEASE_ATTEMPTS);
    }

    pub(crate) fn release_attempted(&self, handle: u64) -> bool {
        self.release_attempts.contains(&handle)
    }

    /// After a release that failed oddly: neither used as valid nor as
    /// certainly stale.
    pub(crate) fn forget_lmr(&mut self, handle: u64) {
        self.lmrs.retain(|r| r.handle != handle);
        self.names.retain(|&(_, h)| h != handle);
    }

    pub(crate) fn reaped(&mut self, op: u64) {
        self.ops.retain(|&o| o != op);
        self.calls.retain(|&o| o != op);
        remember(&mut self.stale_ops, op, STALE);
    }

    pub(crate) fn answered(&mut self, descriptor: u64) {
        self.descriptors.retain(|&d| d != descriptor);
        remember(&mut self.stale_descriptors, descriptor, STALE);
    }

    /// Once.
    pub(crate) fn add_lock(&mut self, lock: LiteLock) {
        if !self.locks.contains(&lock) {
            if self.locks.len() >= 64 {
                self.locks.remove(0);
            }
            self.locks.push(lock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_race_ports_stay_apart() {
        let name = fuzz_name(3, 1, 2, 3);
        assert_eq!(size_of_name(name), Some(65536));
        assert_eq!(size_of_name(fuzz_name(3, 1, UNSIZED_CLASS, 0)), None);
        assert_eq!(size_of_name(42), None);
        assert_ne!(name, fuzz_name(2, 1, 2, 3));
        assert_ne!(name, fuzz_name(3, 2, 2, 3));
        assert_eq!(size_class(4096), 1);
        assert_eq!(size_class(4097), UNSIZED_CLASS);
        assert_ne!(coordinator_name(1, READY), coordinator_name(2, READY));
        assert_ne!(coordinator_name(1, READY), coordinator_name(1, DONE));
        assert_ne!(coordinator_name(1, READY), fuzz_name(1, 0, 0, 1));
        for proc in 0..8 {
            for thread in 0..8 {
                let port = race_port(proc, 8, thread);
                assert!((POOL_PORTS..MAX_PORTS).contains(&port));
            }
        }
        assert_ne!(race_port(0, 3, 1), race_port(1, 3, 1));
    }

    #[test]
    fn released_handles_become_stale_and_lose_their_names() {
        let mut pool = Pool::default();
        let record = LmrRecord {
            handle: 5,
            password: 1,
            size: Some(64),
            permission: 7,
            kind: LmrKind::Wrapped { name: 99 },
        };
        pool.add_lmr(record);
        assert_eq!(pool.names, [(99, 5)]);
        assert_eq!(pool.allocated_bytes(), 64);
        pool.release_lmr(5);
        assert!(pool.stale_handles.contains(&5));
        assert!(pool.names.is_empty() && pool.lmrs.is_empty());
        for op in 0..40 {
            pool.reaped(op);
        }
        assert_eq!(pool.stale_ops.len(), STALE);
        let lock = LiteLock { home: 2, number: 7 };
        assert_eq!(unpack_lock(pack_lock(lock)), lock);
        // Release attempts are remembered up to a bound.
        let mut pool = Pool::default();
        assert!(!pool.release_attempted(0x1_0000_0001));
        pool.note_release_attempt(0x1_0000_0001);
        assert!(pool.release_attempted(0x1_0000_0001));
        for handle in 0..RELEASE_ATTEMPTS as u64 {
            pool.note_release_attempt(handle);
        }
        assert!(!pool.release_attempted(0x1_0000_0001));
        assert_eq!(pool.release_attempts.len(), RELEASE_ATTEMPTS);
    }

    #[test]
    fn atomics_are_certain_to_fail_only_without_atomic_or_size() {
        let mut record = LmrRecord {
            handle: 1,
            password: 0,
            size: Some(8),
            permission: PERM_ATOMIC | PERM_ADMIN,
            kind: LmrKind::Allocated { atomic: true },
        };
        assert!(!record.never_atomic());
        record.size = Some(16);
        assert!(record.never_atomic());
        record.kind = LmrKind::Mapping { owner: 1, name: 0 };
        assert!(!record.never_atomic());
        record.permission = 0x3;
        assert!(record.never_atomic());
    }
}
