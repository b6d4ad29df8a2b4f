//! The LITE backend of LITE-Log: the log's three words are RDMA atomic
//! LMRs on the creating node, its index and data are LMRs spread over the
//! other nodes, and every operation is one LITE call.
//!
//! The LMRs are published for reading and writing, so their password is
//! what keeps other processes from writing into the log: it is drawn at
//! random for each log and handed to the other ranks by the program.

use std::fs::File;
use std::io::{self, Read};

use lite::sync::AtomicLmr;
use lite::sys::{NODE_SPREAD, PERM_ATOMIC, PERM_READ, PERM_WRITE};
use lite::{Lmr, Priority};

use super::{Area, Geometry, LogStore, Word};

/// A log's memory in LITE, shared by name with every node.
pub struct LiteStore {
    password: u64,
    words: [AtomicLmr; 3],
    index: Lmr,
    data: Lmr,
}

// By hand, so that a debug print never shows the password (the LMRs'
// own debug output holds it too).
impl std::fmt::Debug for LiteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteStore").finish_non_exhaustive()
    }
}

impl LiteStore {
    /// Allocates a log of `geometry`'s size and publishes it under names
    /// derived from `tag` with a random password, for [`LiteStore::open`]
    /// on any node that is given [`LiteStore::password`].
    pub fn create(tag: u32, geometry: &Geometry) -> io::Result<LiteStore> {
        let password = random_password()?;
        let here = lite::node_id()?;
        let spread = if lite::total_nodes()? > 1 {
            NODE_SPREAD
        } else {
            here
        };
        let word = || AtomicLmr::alloc(here, password);
        let store = LiteStore {
            password,
            words: [word()?, word()?, word()?],
            index: Lmr::alloc(spread, geometry.index_bytes(), 0, password)?,
            data: Lmr::alloc(spread, geometry.data_bytes, 0, password)?,
        };
        // An index entry counts as uncommitted until its writer fills it.
        store.index.memset(0, geometry.index_bytes(), 0)?;
        for (part, word) in (0..).zip(&store.words) {
            word.lmr()
                .publish(name(tag, part), PERM_READ | PERM_ATOMIC)?;
        }
        store.index.publish(name(tag, 3), PERM_READ | PERM_WRITE)?;
        store.data.publish(name(tag, 4), PERM_READ | PERM_WRITE)?;
        Ok(store)
    }

    /// Maps the log that node `creator` created with `tag`, whose
    /// password is `password`.
    pub fn open(creator: u32, tag: u32, password: u64) -> io::Result<LiteStore> {
        let ask = |part| Lmr::ask(creator, name(tag, part), PERM_READ | PERM_WRITE, password);
        let word =
            |part| AtomicLmr::ask(creator, name(tag, part), PERM_READ | PERM_ATOMIC, password);
        Ok(LiteStore {
            password,
            words: [word(0)?, word(1)?, word(2)?],
            index: ask(3)?,
            data: ask(4)?,
        })
    }

    /// The password guarding the log's LMRs.
    pub fn password(&self) -> u64 {
        self.password
    }

    fn area(&self, area: Area) -> &Lmr {
        match area {
            Area::Index => &self.index,
            Area::Data => &self.data,
        }
    }
}

impl LogStore for LiteStore {
    fn fetch_add(&self, word: Word, value: u64) -> io::Result<u64> {
        // PANIC: a Word is 0, 1 or 2, an index of `words`.
        self.words[word as usize].fetch_add(value, Priority::None)
    }

    fn compare_swap(&self, word: Word, expected: u64, new: u64) -> io::Result<u64> {
        // PANIC: a Word is 0, 1 or 2, an index of `words`.
        let swap = self.words[word as usize].compare_swap(expected, new, Priority::None)?;
        Ok(swap.unwrap_or_else(|actual| actual))
    }

    fn write(&self, area: Area, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.area(area).write(offset, bytes, Priority::None)
    }

    fn read(&self, area: Area, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.area(area).read(offset, buf, Priority::None)
    }
}

/// The name of part `part` (0-2 the words, 3 the index, 4 the data) of
/// the log tagged `tag`: "LLOG", the tag's low 24 bits, the part.
fn name(tag: u32, part: u64) -> u64 {
    u64::from_be_bytes(*b"LLOG\0\0\0\0") | u64::from(tag & 0xff_ffff) << 8 | part
}

/// A password nobody can guess: 8 bytes from the kernel's random source.
fn random_password() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}
