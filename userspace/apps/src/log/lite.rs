//! The LITE backend of LITE-Log: the log's three words are RDMA atomic
//! LMRs on the creating node, its index and data are LMRs spread over the
//! other nodes, and every operation is one LITE call.

use std::io;

use lite::sync::AtomicLmr;
use lite::sys::{NODE_SPREAD, PERM_ATOMIC, PERM_READ, PERM_WRITE};
use lite::{Lmr, Priority};

use super::{Area, Geometry, LogStore, Word};

/// A log's memory in LITE, shared by name with every node.
#[derive(Debug)]
pub struct LiteStore {
    words: [AtomicLmr; 3],
    index: Lmr,
    data: Lmr,
}

impl LiteStore {
    /// Allocates a log of `geometry`'s size and publishes it under names
    /// derived from `tag`, for [`LiteStore::open`] on any node.
    pub fn create(tag: u32, geometry: &Geometry) -> io::Result<LiteStore> {
        let here = lite::node_id()?;
        let spread = if lite::total_nodes()? > 1 {
            NODE_SPREAD
        } else {
            here
        };
        let word = || AtomicLmr::alloc(here, password(tag));
        let store = LiteStore {
            words: [word()?, word()?, word()?],
            index: Lmr::alloc(spread, geometry.index_bytes(), 0, password(tag))?,
            data: Lmr::alloc(spread, geometry.data_bytes, 0, password(tag))?,
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

    /// Maps the log that node `creator` created with `tag`.
    pub fn open(creator: u32, tag: u32) -> io::Result<LiteStore> {
        let ask = |part| {
            Lmr::ask(
                creator,
                name(tag, part),
                PERM_READ | PERM_WRITE,
                password(tag),
            )
        };
        let word = |part| {
            AtomicLmr::ask(
                creator,
                name(tag, part),
                PERM_READ | PERM_ATOMIC,
                password(tag),
            )
        };
        Ok(LiteStore {
            words: [word(0)?, word(1)?, word(2)?],
            index: ask(3)?,
            data: ask(4)?,
        })
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
        self.words[word as usize].fetch_add(value, Priority::None)
    }

    fn compare_swap(&self, word: Word, expected: u64, new: u64) -> io::Result<u64> {
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

/// The password guarding the log tagged `tag`.
fn password(tag: u32) -> u64 {
    0x4c49_5445_0000_0000 | u64::from(tag)
}
