//! The single-process backend of LITE-Log: the log in this process's
//! memory. Also what the TCP log server keeps.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{errno, Area, Geometry, LogStore, Word};

/// A log's memory in this process.
#[derive(Debug)]
pub struct MemStore {
    words: [AtomicU64; 3],
    index: Mutex<Vec<u8>>,
    data: Mutex<Vec<u8>>,
}

impl MemStore {
    /// Zeroed memory for a log of `geometry`'s size. `EINVAL` for a
    /// geometry beyond the limits, `ENOMEM` if there is not enough memory.
    pub fn new(geometry: Geometry) -> io::Result<MemStore> {
        geometry.check()?;
        Ok(MemStore {
            words: Default::default(),
            index: Mutex::new(zeroed(geometry.index_bytes())?),
            data: Mutex::new(zeroed(geometry.data_bytes)?),
        })
    }

    fn area(&self, area: Area) -> &Mutex<Vec<u8>> {
        match area {
            Area::Index => &self.index,
            Area::Data => &self.data,
        }
    }
}

/// `n` zero bytes; `ENOMEM` rather than an abort if they cannot be had
/// (`n` comes from the command line).
fn zeroed(n: u64) -> io::Result<Vec<u8>> {
    let n = usize::try_from(n).map_err(|_| errno(libc::ENOMEM))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(n)
        .map_err(|_| errno(libc::ENOMEM))?;
    bytes.resize(n, 0);
    Ok(bytes)
}

/// The range `offset..offset + len` of an area of `size` bytes; `EINVAL`
/// if it does not fit.
fn range(offset: u64, len: usize, size: usize) -> io::Result<std::ops::Range<usize>> {
    let start = usize::try_from(offset).map_err(|_| errno(libc::EINVAL))?;
    match start.checked_add(len) {
        Some(end) if end <= size => Ok(start..end),
        _ => Err(errno(libc::EINVAL)),
    }
}

impl LogStore for MemStore {
    fn fetch_add(&self, word: Word, value: u64) -> io::Result<u64> {
        // PANIC: a Word is 0, 1 or 2, an index of `words`.
        Ok(self.words[word as usize].fetch_add(value, Ordering::SeqCst))
    }

    fn compare_swap(&self, word: Word, expected: u64, new: u64) -> io::Result<u64> {
        // PANIC: a Word is 0, 1 or 2, an index of `words`.
        let word = &self.words[word as usize];
        let result = word.compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst);
        Ok(result.unwrap_or_else(|actual| actual))
    }

    fn write(&self, area: Area, offset: u64, bytes: &[u8]) -> io::Result<()> {
        // A panic while the lock was held cannot leave the bytes in a state
        // the log does not handle (a torn write at worst), so go on.
        let mut memory = self.area(area).lock().unwrap_or_else(|e| e.into_inner());
        let range = range(offset, bytes.len(), memory.len())?;
        // PANIC: `range` checked that it lies within `memory`.
        memory[range].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, area: Area, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let memory = self.area(area).lock().unwrap_or_else(|e| e.into_inner());
        let range = range(offset, buf.len(), memory.len())?;
        // PANIC: `range` checked that it lies within `memory`.
        buf.copy_from_slice(&memory[range]);
        Ok(())
    }
}
