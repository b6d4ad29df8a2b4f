//! LITE-Log: a distributed, atomic log that writers on every node append
//! to concurrently and readers on every node scan or follow.
//!
//! The log lives in three 8-byte words and two areas:
//!
//! - `tail` packs the number of reserved slots (high 24 bits) and the
//!   bytes of data reserved (low 40 bits), so that one fetch-and-add of
//!   `(1 << 40) | padded_length` reserves an index slot and the space for
//!   the record at once;
//! - `checkpoint`: every slot below it is committed or abandoned;
//! - `head`: readers start here (slots below it were truncated);
//! - the index area: a header describing the log, then one fixed-size
//!   entry per slot `{data offset, length, checksum, seal}`, all zero until
//!   the slot's writer commits;
//! - the data area, where each record is written once, 8-byte aligned.
//!
//! An append is a fetch-and-add on `tail`, one write of the record, then
//! one write of its index entry. The entry is written only after the
//! record reached memory, and its seal is a hash of the slot and of the
//! entry's other fields, so a reader never takes a half-written entry for
//! a committed one; the record's checksum is verified on every read as
//! well. A writer that dies between the reservation and the commit leaves
//! an entry that stays zero: readers skip it, and everybody else's
//! records are unaffected.
//!
//! Space is never reused: [`Log::truncate`] only moves `head`, and once
//! the index or the data area is full, appends fail with `ENOSPC`.
//!
//! A reservation that finds the log full has still moved the tail past
//! the end. Each appender (a thread appending through one [`Log`]) makes
//! at most one such reservation: afterwards its `Log` checks the tail
//! first, and the tail stays past the end for good. Each overshoots by at
//! most one slot and [`MAX_RECORD_SIZE`] bytes, so the margins below
//! ([`MAX_DATA_BYTES`] and [`MAX_RECORDS`] are half of what the tail's
//! fields hold) it would take 2^19 appenders racing past a full log for
//! the data bytes to carry into the slot count.
//!
//! The algorithm is written once against [`LogStore`], which has three
//! implementations: [`LiteStore`] (LMRs and RDMA atomics; the log's data
//! is spread over the nodes), [`TcpStore`] (a client of a [`LogServer`],
//! what one would write without LITE) and [`MemStore`] (one process).

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub mod app;
mod lite;
mod memory;
mod tcp;

pub use app::{run, run_stalled_writer, Settings, OPTIONS};
pub use lite::LiteStore;
pub use memory::MemStore;
pub use tcp::{LogServer, TcpStore};

/// Largest record [`Log::append`] accepts.
pub const MAX_RECORD_SIZE: usize = 1 << 20;

/// Largest data area: half of what the tail's 40 data bits hold, so that
/// reservations overshooting a full log (see the module documentation) do
/// not carry into the slot count.
pub const MAX_DATA_BYTES: u64 = 1 << 39;

/// Most slots a log can have: half of what the tail's 24 slot bits hold.
pub const MAX_RECORDS: u64 = 1 << 23;

/// Bytes of one index entry (and of the index header before them).
pub const ENTRY_SIZE: u64 = 24;

/// One reservation's increment of the slot count in the tail word.
const ONE_SLOT: u64 = 1 << 40;

/// Marks an index area that holds a log ("LITELOG1").
const MAGIC: u64 = u64::from_le_bytes(*b"LITELOG1");

/// Keys that make a committed entry's seal differ from an abandoned one's.
const COMMIT_KEY: u64 = 0x636f_6d6d_6974_7465;
const ABANDON_KEY: u64 = 0x6162_616e_646f_6e65;

/// Index entries read per request while scanning.
const ENTRIES_PER_READ: u64 = 2048;

/// One of the log's 8-byte words, updated with atomics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// Reserved slots and data bytes (see the module documentation).
    Tail = 0,
    /// First slot readers look at.
    Head = 1,
    /// Every slot below it is committed or abandoned.
    Checkpoint = 2,
}

/// One of the log's two memory areas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// The header and the index entries.
    Index,
    /// The records.
    Data,
}

/// Where a log's memory lives: the operations the algorithm needs.
///
/// Reads and writes of an area return once the bytes arrived; the words
/// start at 0 and the index area zeroed.
pub trait LogStore: Send + Sync {
    /// Atomically adds `value` to `word` and returns the value before.
    fn fetch_add(&self, word: Word, value: u64) -> io::Result<u64>;

    /// Atomically sets `word` to `new` if it holds `expected`; returns the
    /// value it held before (the swap happened if that is `expected`).
    fn compare_swap(&self, word: Word, expected: u64, new: u64) -> io::Result<u64>;

    /// Writes `bytes` into `area` at `offset`.
    fn write(&self, area: Area, offset: u64, bytes: &[u8]) -> io::Result<()>;

    /// Fills `buf` from `area` at `offset`.
    fn read(&self, area: Area, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// The size of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of the data area: a multiple of 8, at most [`MAX_DATA_BYTES`].
    pub data_bytes: u64,
    /// Number of index slots, at most [`MAX_RECORDS`].
    pub max_records: u64,
}

impl Geometry {
    /// `EINVAL` unless the sizes are within the limits.
    pub fn check(&self) -> io::Result<()> {
        let data_ok = self.data_bytes >= 8 && self.data_bytes.is_multiple_of(8);
        let data_ok = data_ok && self.data_bytes <= MAX_DATA_BYTES;
        if data_ok && (1..=MAX_RECORDS).contains(&self.max_records) {
            Ok(())
        } else {
            Err(errno(libc::EINVAL))
        }
    }

    /// Bytes of the index area: the header and one entry per slot.
    pub fn index_bytes(&self) -> u64 {
        (self.max_records + 1) * ENTRY_SIZE
    }
}

/// What an index slot holds, as [`Log::slot_state`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Not reserved yet (at or past the tail).
    Unreserved,
    /// Reserved, not committed: being written, or its writer died.
    Uncommitted,
    /// Committed: its record is complete.
    Committed,
    /// Given up: by a writer that found the log full, or by
    /// [`Log::abandon_uncommitted`].
    Abandoned,
}

/// A slot and data space reserved by [`Log::reserve`], to be filled and
/// committed by its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The record's index slot.
    pub slot: u64,
    /// Where the record goes in the data area.
    pub offset: u64,
    /// The record's length.
    pub len: usize,
}

/// What one [`Log::scan`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// First slot looked at (the requested one, or the head if later).
    pub start: u64,
    /// One past the last slot looked at: the tail when the scan began.
    pub end: u64,
    /// Committed records handed to the visitor.
    pub committed: u64,
    /// Slots skipped because they are not committed.
    pub uncommitted: u64,
    /// Slots skipped because they were abandoned.
    pub abandoned: u64,
    /// Committed slots whose record failed its checksum (skipped).
    pub corrupt: u64,
}

/// An index entry, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Zero, or torn by a concurrent write: not committed (yet).
    Uncommitted,
    Committed {
        offset: u64,
        len: u32,
        checksum: u32,
    },
    Abandoned,
}

/// A log in some [`LogStore`]; every method may be called from many
/// threads and processes at once.
pub struct Log {
    store: Arc<dyn LogStore>,
    geometry: Geometry,
    /// Set once an append found the log full: later appends check the tail
    /// before reserving, so each appender pushes a full log's tail at most
    /// once (see the module documentation).
    seen_full: AtomicBool,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("geometry", &self.geometry)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Starts a new log in `store`, whose areas must have `geometry`'s
    /// sizes, its words 0 and its index area zeroed. `EINVAL` for a
    /// geometry beyond the limits.
    pub fn create(store: Arc<dyn LogStore>, geometry: Geometry) -> io::Result<Log> {
        geometry.check()?;
        let mut header = Vec::with_capacity(ENTRY_SIZE as usize);
        for word in [MAGIC, geometry.data_bytes, geometry.max_records] {
            header.extend_from_slice(&word.to_le_bytes());
        }
        store.write(Area::Index, 0, &header)?;
        Ok(Log::with(store, geometry))
    }

    /// Opens the log another process created in `store`. `EPROTO` if the
    /// store holds no log.
    pub fn open(store: Arc<dyn LogStore>) -> io::Result<Log> {
        let mut header = [0u8; ENTRY_SIZE as usize];
        store.read(Area::Index, 0, &mut header)?;
        let [magic, data_bytes, max_records] = words(&header);
        let geometry = Geometry {
            data_bytes,
            max_records,
        };
        if magic != MAGIC || geometry.check().is_err() {
            return Err(errno(libc::EPROTO));
        }
        Ok(Log::with(store, geometry))
    }

    fn with(store: Arc<dyn LogStore>, geometry: Geometry) -> Log {
        Log {
            store,
            geometry,
            seen_full: AtomicBool::new(false),
        }
    }

    /// The log's size.
    #[cfg(test)]
    pub(crate) fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Appends `record` and returns its slot. `EINVAL` if it is empty or
    /// longer than [`MAX_RECORD_SIZE`]; `ENOSPC` if the log is full.
    pub fn append(&self, record: &[u8]) -> io::Result<u64> {
        let reservation = self.reserve(record.len())?;
        self.fill(&reservation, record)?;
        self.commit(&reservation, record)?;
        Ok(reservation.slot)
    }

    /// First step of [`Log::append`]: reserves a slot and `len` bytes of
    /// data with one fetch-and-add on the tail. The slot stays uncommitted
    /// (and skipped by readers) until [`Log::commit`].
    pub fn reserve(&self, len: usize) -> io::Result<Reservation> {
        if len == 0 || len > MAX_RECORD_SIZE {
            return Err(errno(libc::EINVAL));
        }
        let padded = (len as u64).next_multiple_of(8);
        if padded > self.geometry.data_bytes
            || (self.seen_full.load(Ordering::Relaxed) && !self.fits(self.tail()?, padded))
        {
            return Err(errno(libc::ENOSPC));
        }
        let before = self.store.fetch_add(Word::Tail, ONE_SLOT | padded)?;
        if !self.fits(before, padded) {
            self.seen_full.store(true, Ordering::Relaxed);
            let slot = before / ONE_SLOT;
            if slot < self.geometry.max_records {
                // Lets checkpoints pass the slot we reserved but cannot
                // use. If this fails the slot merely stays uncommitted,
                // which readers handle, so ENOSPC is still the answer.
                let marker = abandoned_entry(slot);
                let _ = self.store.write(Area::Index, entry_offset(slot), &marker);
            }
            return Err(errno(libc::ENOSPC));
        }
        Ok(Reservation {
            slot: before / ONE_SLOT,
            offset: before % ONE_SLOT,
            len,
        })
    }

    /// Second step of [`Log::append`]: writes `bytes` (the record, or a
    /// prefix of it) into the reserved space. `EINVAL` if longer than the
    /// reservation.
    pub fn fill(&self, reservation: &Reservation, bytes: &[u8]) -> io::Result<()> {
        if bytes.len() > reservation.len {
            return Err(errno(libc::EINVAL));
        }
        self.store.write(Area::Data, reservation.offset, bytes)
    }

    /// Last step of [`Log::append`]: writes the slot's index entry, which
    /// makes `record` (already filled in) visible to readers. `EINVAL` if
    /// its length is not the reserved one.
    pub fn commit(&self, reservation: &Reservation, record: &[u8]) -> io::Result<()> {
        if record.len() != reservation.len {
            return Err(errno(libc::EINVAL));
        }
        let entry = committed_entry(
            reservation.slot,
            reservation.offset,
            record.len() as u32,
            checksum(record),
        );
        let at = entry_offset(reservation.slot);
        self.store.write(Area::Index, at, &entry)
    }

    /// Whether a reservation of `padded` bytes made when the tail was
    /// `tail` is within the log.
    fn fits(&self, tail: u64, padded: u64) -> bool {
        tail / ONE_SLOT < self.geometry.max_records
            && tail % ONE_SLOT + padded <= self.geometry.data_bytes
    }

    fn tail(&self) -> io::Result<u64> {
        self.store.fetch_add(Word::Tail, 0)
    }

    /// One past the last reserved slot.
    pub fn end(&self) -> io::Result<u64> {
        Ok((self.tail()? / ONE_SLOT).min(self.geometry.max_records))
    }

    /// Bytes of the data area reserved so far (including padding and the
    /// space of uncommitted records).
    #[cfg(test)]
    pub(crate) fn data_used(&self) -> io::Result<u64> {
        Ok((self.tail()? % ONE_SLOT).min(self.geometry.data_bytes))
    }

    /// The first slot readers look at.
    pub fn head(&self) -> io::Result<u64> {
        self.store.fetch_add(Word::Head, 0)
    }

    /// The last checkpoint: every slot below it is committed or abandoned.
    pub fn checkpoint_position(&self) -> io::Result<u64> {
        self.store.fetch_add(Word::Checkpoint, 0)
    }

    /// What `slot` holds now.
    pub fn slot_state(&self, slot: u64) -> io::Result<SlotState> {
        if slot >= self.end()? {
            return Ok(SlotState::Unreserved);
        }
        // PANIC: read_entries returns `count` (here 1) entries.
        Ok(match self.read_entries(slot, 1)?[0] {
            Entry::Uncommitted => SlotState::Uncommitted,
            Entry::Committed { .. } => SlotState::Committed,
            Entry::Abandoned => SlotState::Abandoned,
        })
    }

    /// Hands every committed, intact record from slot `from` (or the head,
    /// if later) up to the tail to `visit`, in slot order, and skips the
    /// rest.
    pub fn scan(&self, from: u64, mut visit: impl FnMut(u64, &[u8])) -> io::Result<ScanSummary> {
        let start = from.max(self.head()?);
        let end = self.end()?;
        let mut summary = ScanSummary {
            start,
            end,
            ..ScanSummary::default()
        };
        let mut record = Vec::new();
        self.walk(start, end, |slot, entry| {
            match entry {
                Entry::Uncommitted => summary.uncommitted += 1,
                Entry::Abandoned => summary.abandoned += 1,
                Entry::Committed { .. } => {
                    if self.read_record(entry, &mut record)? {
                        summary.committed += 1;
                        visit(slot, &record);
                    } else {
                        summary.corrupt += 1;
                    }
                }
            }
            Ok(true)
        })?;
        Ok(summary)
    }

    /// Moves the checkpoint up to the first slot that is neither committed
    /// nor abandoned, and returns it. Never moves it back, even when
    /// several processes checkpoint at once.
    pub fn checkpoint(&self) -> io::Result<u64> {
        let from = self.checkpoint_position()?;
        let mut settled = from;
        self.walk(from, self.end()?, |_, entry| {
            let done = entry != Entry::Uncommitted;
            settled += u64::from(done);
            Ok(done)
        })?;
        self.raise(Word::Checkpoint, settled)
    }

    /// Marks every uncommitted slot between the checkpoint and `upto` (at
    /// most the tail) as abandoned, so that checkpoints can pass them, and
    /// returns how many it marked.
    ///
    /// Only for slots whose writers are known to be gone (for example
    /// after every live writer passed a barrier after its appends): a
    /// writer that commits later still makes its record visible, but a
    /// checkpoint may already have passed it.
    pub fn abandon_uncommitted(&self, upto: u64) -> io::Result<u64> {
        let mut marked = 0;
        let from = self.checkpoint_position()?;
        self.walk(from, upto.min(self.end()?), |slot, entry| {
            if entry == Entry::Uncommitted {
                let at = entry_offset(slot);
                self.store.write(Area::Index, at, &abandoned_entry(slot))?;
                marked += 1;
            }
            Ok(true)
        })?;
        Ok(marked)
    }

    /// Drops the slots below `upto` from what readers see by moving the
    /// head (their space is not reused); returns the new head. `EINVAL`
    /// beyond the last [`Log::checkpoint`], so that nothing still being
    /// written is dropped.
    pub fn truncate(&self, upto: u64) -> io::Result<u64> {
        if upto > self.checkpoint_position()? {
            return Err(errno(libc::EINVAL));
        }
        self.raise(Word::Head, upto)
    }

    /// Sets `word` to `value` unless it holds more already; returns what
    /// it holds afterwards.
    fn raise(&self, word: Word, value: u64) -> io::Result<u64> {
        let mut current = self.store.fetch_add(word, 0)?;
        while current < value {
            let before = self.store.compare_swap(word, current, value)?;
            if before == current {
                return Ok(value);
            }
            current = before;
        }
        Ok(current)
    }

    /// Calls `step` with the entries of slots `from..end` in order, reading
    /// them in batches, until it returns `false`.
    fn walk(
        &self,
        from: u64,
        end: u64,
        mut step: impl FnMut(u64, Entry) -> io::Result<bool>,
    ) -> io::Result<()> {
        let mut slot = from;
        while slot < end {
            let count = (end - slot).min(ENTRIES_PER_READ);
            for entry in self.read_entries(slot, count)? {
                if !step(slot, entry)? {
                    return Ok(());
                }
                slot += 1;
            }
        }
        Ok(())
    }

    fn read_entries(&self, first: u64, count: u64) -> io::Result<Vec<Entry>> {
        let mut raw = vec![0u8; (count * ENTRY_SIZE) as usize];
        self.store
            .read(Area::Index, entry_offset(first), &mut raw)?;
        let entries = raw.chunks_exact(ENTRY_SIZE as usize);
        Ok((first..)
            .zip(entries)
            .map(|(slot, raw)| self.decode(slot, raw))
            .collect())
    }

    fn decode(&self, slot: u64, raw: &[u8]) -> Entry {
        let [offset, len_and_checksum, seal] = words(raw);
        let len = len_and_checksum as u32;
        let checksum = (len_and_checksum >> 32) as u32;
        let in_bounds = (len as usize) <= MAX_RECORD_SIZE
            && offset.saturating_add(len.into()) <= self.geometry.data_bytes;
        if seal == commit_seal(slot, offset, len_and_checksum) && in_bounds {
            Entry::Committed {
                offset,
                len,
                checksum,
            }
        } else if raw == abandoned_entry(slot) {
            Entry::Abandoned
        } else {
            Entry::Uncommitted
        }
    }

    /// Reads a committed entry's record into `record`; `false` if it
    /// fails its checksum.
    fn read_record(&self, entry: Entry, record: &mut Vec<u8>) -> io::Result<bool> {
        let Entry::Committed {
            offset,
            len,
            checksum: expected,
        } = entry
        else {
            return Ok(false);
        };
        record.resize(len as usize, 0);
        self.store.read(Area::Data, offset, record)?;
        Ok(checksum(record) == expected)
    }
}

/// A reader that follows the log: each [`Tailer::poll`] hands over the
/// records committed since the last one, each exactly once.
#[derive(Debug, Clone, Default)]
pub struct Tailer {
    /// Every slot below it was handed over or skipped for good.
    settled: u64,
    /// Committed slots at or above `settled` already handed over (or
    /// skipped as corrupt).
    passed: BTreeSet<u64>,
    /// Committed records skipped because they failed their checksum.
    corrupt: u64,
}

impl Tailer {
    /// A tailer that starts at `slot` (or the log's head, if later).
    pub fn new(slot: u64) -> Tailer {
        Tailer {
            settled: slot,
            ..Tailer::default()
        }
    }

    /// Hands every committed record not handed over yet to `visit`, in
    /// slot order, and returns how many. An uncommitted slot is looked at
    /// again by the next poll, until its writer commits it or it is
    /// abandoned. A committed record that fails its checksum is skipped
    /// and counted in [`Tailer::corrupt`].
    pub fn poll(&mut self, log: &Log, mut visit: impl FnMut(u64, &[u8])) -> io::Result<u64> {
        self.settled = self.settled.max(log.head()?);
        let mut handed = 0;
        let mut record = Vec::new();
        let mut gap_seen = false;
        log.walk(self.settled, log.end()?, |slot, entry| {
            let settled_now = match entry {
                Entry::Uncommitted => false,
                Entry::Abandoned => true,
                Entry::Committed { .. } if self.passed.contains(&slot) => true,
                Entry::Committed { .. } => {
                    if log.read_record(entry, &mut record)? {
                        visit(slot, &record);
                        handed += 1;
                    } else {
                        self.corrupt += 1;
                    }
                    self.passed.insert(slot);
                    true
                }
            };
            gap_seen |= !settled_now;
            if !gap_seen {
                self.settled = slot + 1;
            }
            Ok(true)
        })?;
        self.passed = self.passed.split_off(&self.settled);
        Ok(handed)
    }

    /// The first slot not settled yet: below it, every record was handed
    /// over or skipped for good.
    pub fn position(&self) -> u64 {
        self.settled
    }

    /// Committed records skipped so far because they failed their
    /// checksum.
    pub fn corrupt(&self) -> u64 {
        self.corrupt
    }
}

/// A 32-bit checksum of `bytes` (a 64-bit multiply-xorshift hash, folded).
fn checksum(bytes: &[u8]) -> u32 {
    let mut hash = mix(0x9e37_79b9_7f4a_7c15 ^ bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        hash = mix(hash ^ u64::from_le_bytes(w));
    }
    let mut last = [0u8; 8];
    // PANIC: the remainder of 8-byte chunks is shorter than 8 bytes.
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    hash = mix(hash ^ u64::from_le_bytes(last));
    (hash ^ (hash >> 32)) as u32
}

/// A 64-bit finalizer (MurmurHash3's): every input bit affects every
/// output bit.
pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn entry_offset(slot: u64) -> u64 {
    (slot + 1) * ENTRY_SIZE
}

/// The seal of a committed entry: ties its fields to its slot, so that a
/// torn or misplaced entry never passes for committed. Never 0.
fn commit_seal(slot: u64, offset: u64, len_and_checksum: u64) -> u64 {
    mix(COMMIT_KEY ^ mix(slot ^ mix(offset ^ mix(len_and_checksum)))).max(1)
}

fn committed_entry(slot: u64, offset: u64, len: u32, checksum: u32) -> [u8; ENTRY_SIZE as usize] {
    let len_and_checksum = u64::from(len) | u64::from(checksum) << 32;
    let seal = commit_seal(slot, offset, len_and_checksum);
    entry_bytes([offset, len_and_checksum, seal])
}

fn abandoned_entry(slot: u64) -> [u8; ENTRY_SIZE as usize] {
    entry_bytes([0, 0, mix(ABANDON_KEY ^ mix(slot)).max(1)])
}

fn entry_bytes(fields: [u64; 3]) -> [u8; ENTRY_SIZE as usize] {
    let mut bytes = [0u8; ENTRY_SIZE as usize];
    for (chunk, field) in bytes.chunks_exact_mut(8).zip(fields) {
        chunk.copy_from_slice(&field.to_le_bytes());
    }
    bytes
}

/// The three little-endian words of an entry-sized slice.
fn words(raw: &[u8]) -> [u64; 3] {
    let mut fields = [0u64; 3];
    for (field, chunk) in fields.iter_mut().zip(raw.chunks_exact(8)) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        *field = u64::from_le_bytes(bytes);
    }
    fields
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

#[cfg(test)]
mod tests;
