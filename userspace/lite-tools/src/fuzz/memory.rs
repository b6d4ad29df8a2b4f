//! The memory a fuzzing process hands the kernel, and the bad pointers.
//!
//! Every pointer the fuzzer passes points into one reservation per
//! process (the *arena*) or is one the kernel must refuse. The arena holds
//! nothing the program itself relies on: the kernel may write anything
//! into it at any time (reads land there, registered memory is written by
//! other nodes), so no Rust reference to it ever exists. Its layout:
//!
//! ```text
//! read-only page | no-access page | race windows (one per thread)
//! | scratch (one MiB per thread) | async buffers | bulk (registrations)
//! | tail guard (no access)
//! ```
//!
//! The tail guard is larger than any LMR the fuzzers create, so a
//! transfer the kernel splits into pieces can never reach past the arena
//! into the program's own memory, whatever pointer inside the arena it
//! started from: no transfer is longer than its LMR.

use std::io;
use std::ptr;

use lite::sys::CHUNK_SIZE;

pub(crate) const PAGE: usize = 4096;
/// Per thread, for the unmap-during-a-call race.
pub(crate) const RACE_WINDOW: usize = 64 << 10;
/// Per thread.
pub(crate) const SCRATCH: usize = 1 << 20;
/// The kernel fills asynchronous reads' buffers when they are reaped.
pub(crate) const ASYNC_AREA: usize = 4 << 20;
/// Registered memory and the sources of large copies.
pub(crate) const BULK_AREA: usize = 8 << 20;
/// The largest LMR any fuzzer creates.
pub(crate) const MAX_FUZZ_LMR: u64 = 2 * CHUNK_SIZE + PAGE as u64;
/// No-access memory after the read-write part, longer than any LMR.
pub(crate) const TAIL_GUARD: usize = 16 << 20;

const _: () = assert!(MAX_FUZZ_LMR < TAIL_GUARD as u64);

/// In the direct map of x86_64.
pub(crate) const KERNEL_ADDRESS: u64 = 0xffff_8880_0000_0000;
pub(crate) const NON_CANONICAL: u64 = 0x0000_8000_0000_0000;
/// Below `mmap_min_addr`, so nothing can map it.
pub(crate) const LOW_PAGE: u64 = 0x1000;

/// For the accesses noted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadPointer {
    Null,
    LowPage,
    Kernel,
    NonCanonical,
    Max,
    /// A mapped page without any access.
    NoAccess,
    /// Bad only where the kernel writes.
    ReadOnly,
    /// The last 16 bytes before the tail guard: bad for more than 16 bytes.
    Straddle,
    /// `i64::MIN`.
    SignBit,
}

impl BadPointer {
    pub(crate) const ALL: [BadPointer; 9] = [
        BadPointer::Null,
        BadPointer::LowPage,
        BadPointer::Kernel,
        BadPointer::NonCanonical,
        BadPointer::Max,
        BadPointer::NoAccess,
        BadPointer::ReadOnly,
        BadPointer::Straddle,
        BadPointer::SignBit,
    ];

    pub(crate) fn faults(self, len: u64, writes: bool) -> bool {
        match self {
            BadPointer::ReadOnly if !writes => false,
            BadPointer::Straddle => len > STRADDLE_ROOM,
            _ => len > 0,
        }
    }
}

const STRADDLE_ROOM: u64 = 16;

#[derive(Debug)]
pub(crate) struct Arena {
    base: usize,
    len: usize,
    threads: usize,
}

impl Arena {
    pub(crate) fn new(threads: usize) -> io::Result<Arena> {
        let len = 2 * PAGE + threads * RACE_WINDOW + read_write_len(threads) + TAIL_GUARD;
        let flags = libc::MAP_PRIVATE | libc::MAP_NORESERVE;
        // SAFETY: a fresh reservation; nothing else refers to it.
        let base = unsafe { map_anonymous(ptr::null_mut(), len, libc::PROT_NONE, flags)? };
        let arena = Arena { base, len, threads };
        let read_write = libc::PROT_READ | libc::PROT_WRITE;
        // The read-only page holds a pattern, so reads through it carry data.
        arena.protect(arena.base, PAGE, read_write)?;
        // SAFETY: the page was just made writable and belongs to the arena,
        // which nothing else uses yet.
        unsafe { ptr::write_bytes(arena.base as *mut u8, 0x5a, PAGE) };
        arena.protect(arena.base, PAGE, libc::PROT_READ)?;
        arena.protect(arena.base + 2 * PAGE, threads * RACE_WINDOW, read_write)?;
        let (start, len) = (arena.read_write_start(), read_write_len(threads));
        arena.protect(start, len, read_write)?;
        Ok(arena)
    }

    fn protect(&self, start: usize, len: usize, prot: libc::c_int) -> io::Result<()> {
        // SAFETY: the range lies inside the arena's reservation.
        if unsafe { libc::mprotect(start as *mut libc::c_void, len, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// With fresh anonymous memory: the addresses stay reserved so that
    /// nothing else can be mapped there.
    fn remap(&self, start: usize, len: usize, prot: libc::c_int) -> io::Result<()> {
        let flags = libc::MAP_PRIVATE | libc::MAP_FIXED | libc::MAP_NORESERVE;
        // SAFETY: MAP_FIXED inside the arena's own reservation replaces
        // only arena memory, to which no reference exists.
        unsafe { map_anonymous(start as *mut libc::c_void, len, prot, flags) }.map(drop)
    }

    fn read_write_start(&self) -> usize {
        self.base + 2 * PAGE + self.threads * RACE_WINDOW
    }

    /// Where the tail guard starts.
    fn read_write_end(&self) -> usize {
        self.read_write_start() + read_write_len(self.threads)
    }

    pub(crate) fn scratch(&self, thread: usize) -> u64 {
        (self.read_write_start() + (thread % self.threads.max(1)) * SCRATCH) as u64
    }

    pub(crate) fn async_area(&self) -> u64 {
        (self.read_write_start() + self.threads * SCRATCH) as u64
    }

    pub(crate) fn bulk_area(&self) -> u64 {
        self.async_area() + ASYNC_AREA as u64
    }

    pub(crate) fn race_window(&self, thread: usize) -> u64 {
        (self.base + 2 * PAGE + (thread % self.threads.max(1)) * RACE_WINDOW) as u64
    }

    /// Unmapped, the addresses stay reserved.
    pub(crate) fn remap_window(&self, thread: usize, mapped: bool) -> io::Result<()> {
        let prot = if mapped {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_NONE
        };
        self.remap(self.race_window(thread) as usize, RACE_WINDOW, prot)
    }

    pub(crate) fn bad_pointer(&self, kind: BadPointer) -> u64 {
        match kind {
            BadPointer::Null => 0,
            BadPointer::LowPage => LOW_PAGE,
            BadPointer::Kernel => KERNEL_ADDRESS,
            BadPointer::NonCanonical => NON_CANONICAL,
            BadPointer::Max => u64::MAX,
            BadPointer::NoAccess => (self.base + PAGE) as u64,
            BadPointer::ReadOnly => self.base as u64,
            BadPointer::Straddle => self.read_write_end() as u64 - STRADDLE_ROOM,
            BadPointer::SignBit => i64::MIN as u64,
        }
    }

    /// Whether the kernel may write `extent` bytes from `address` without
    /// leaving the arena (faults in the guard included).
    #[cfg(test)]
    pub(crate) fn holds(&self, address: u64, extent: u64) -> bool {
        let start = self.base as u64;
        let end = (self.base + self.len) as u64;
        address >= start && address.checked_add(extent).is_some_and(|last| last <= end)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the whole reservation is unmapped once, when no call can
        // use it any more (the arena outlives every fuzzing thread).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// # Safety
///
/// With `MAP_FIXED`, whatever `at..at + len` held is replaced: nothing may
/// refer to it.
pub(crate) unsafe fn map_anonymous(
    at: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: passed on to the caller.
    let base = unsafe { libc::mmap(at, len, prot, flags | libc::MAP_ANONYMOUS, -1, 0) };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(base as usize)
}

fn read_write_len(threads: usize) -> usize {
    threads * SCRATCH + ASYNC_AREA + BULK_AREA
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without faulting: `process_vm_readv` fails with EFAULT where nothing
    /// readable is.
    fn readable(address: u64) -> bool {
        let mut byte = 0u8;
        let local = libc::iovec {
            iov_base: (&mut byte as *mut u8).cast(),
            iov_len: 1,
        };
        let remote = libc::iovec {
            iov_base: address as *mut libc::c_void,
            iov_len: 1,
        };
        // SAFETY: reads one byte of this process into `byte`.
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        n == 1
    }

    #[test]
    fn the_layout_gives_each_part_and_bad_pointer_its_access() {
        let arena = Arena::new(2).expect("arena");
        assert!(readable(arena.bad_pointer(BadPointer::ReadOnly)));
        assert!(!readable(arena.bad_pointer(BadPointer::NoAccess)));
        assert!(readable(arena.scratch(0)));
        assert!(readable(arena.scratch(1) + SCRATCH as u64 - 1));
        assert!(readable(arena.bulk_area() + BULK_AREA as u64 - 1));
        let straddle = arena.bad_pointer(BadPointer::Straddle);
        assert!(readable(straddle + STRADDLE_ROOM - 1));
        assert!(!readable(straddle + STRADDLE_ROOM));
        assert!(arena.holds(arena.scratch(1), MAX_FUZZ_LMR));
        assert!(arena.holds(straddle, MAX_FUZZ_LMR));
        assert!(!arena.holds(straddle, TAIL_GUARD as u64 + 17));
        assert!(!arena.holds(0, 1));
        assert!(!arena.holds(u64::MAX, 1));
        assert_ne!(arena.scratch(0), arena.scratch(1));
        assert_eq!(arena.scratch(2), arena.scratch(0));
        for kind in BadPointer::ALL {
            if kind != BadPointer::ReadOnly && kind != BadPointer::Straddle {
                assert!(!readable(arena.bad_pointer(kind)), "{kind:?}");
            }
        }
        // A race window goes and comes back.
        let window = arena.race_window(1);
        assert!(readable(window));
        arena.remap_window(1, false).expect("revoke");
        assert!(!readable(window));
        arena.remap_window(1, true).expect("restore");
        assert!(readable(window + RACE_WINDOW as u64 - 1));
        // Where a kernel access through a bad pointer must fault.
        assert!(!BadPointer::ReadOnly.faults(100, false));
        assert!(BadPointer::ReadOnly.faults(1, true));
        assert!(!BadPointer::Null.faults(0, false));
        assert!(BadPointer::Null.faults(1, false));
        assert!(!BadPointer::Straddle.faults(16, true));
        assert!(BadPointer::Straddle.faults(17, true));
        assert!(BadPointer::Straddle.faults(17, false));
    }
}
