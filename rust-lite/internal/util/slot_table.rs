// SPDX-License-Identifier: GPL-2.0

//! A table of objects named by generation-checked identifiers.

use kernel::prelude::*;

use super::handle;

struct Entry<T> {
    generation: u32,
    value: Option<T>,
}

/// Objects addressed by identifiers from [`handle`].
///
/// Entries are reused after removal with a new generation, so a stale
/// identifier finds nothing. Callers keep the table behind a sleeping lock:
/// [`SlotTable::insert`] may allocate.
pub(crate) struct SlotTable<T> {
    /// Falls back to virtually contiguous memory: a process may hold more
    /// than 100k handles, beyond what one physically contiguous allocation
    /// can hold.
    entries: KVVec<Entry<T>>,
    /// No free entry exists below this index.
    first_free: usize,
    live: usize,
}

impl<T> SlotTable<T> {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        SlotTable {
            entries: KVVec::new(),
            first_free: 0,
            live: 0,
        }
    }

    /// Stores `value` and returns its identifier.
    ///
    /// # Errors
    ///
    /// `ENOMEM` if the table cannot grow, `ENOSPC` if it is full.
    pub(crate) fn insert(&mut self, value: T) -> Result<u64> {
        self.insert_or_return(value).map_err(|(e, _)| e)
    }

    /// [`SlotTable::insert`] that gives `value` back if it fails.
    pub(crate) fn insert_or_return(&mut self, value: T) -> Result<u64, (Error, T)> {
        // PANIC: The start is clamped to `entries.len()`. A position is found
        // only in a non-empty tail, so then `first_free <= entries.len()` and
        // `i + first_free < entries.len()`.
        let free = self.entries[self.first_free.min(self.entries.len())..]
            .iter()
            .position(|e| e.value.is_none())
            .map(|i| i + self.first_free);
        let index = match free {
            Some(index) => index,
            None => {
                if self.entries.len() > handle::MAX_INDEX {
                    return Err((ENOSPC, value));
                }
                let pushed = self.entries.push(
                    Entry {
                        generation: 0,
                        value: None,
                    },
                    GFP_KERNEL,
                );
                if let Err(e) = pushed {
                    return Err((e.into(), value));
                }
                // PANIC: an entry was just pushed, so the length is at least 1.
                self.entries.len() - 1
            }
        };
        // PANIC: `index < entries.len()` in both arms above. `index <=
        // MAX_INDEX` (the table never grows past it), so `index + 1` does
        // not overflow; `live` counts occupied entries, at most
        // `entries.len()`, and `entries[index]` was free until now.
        let entry = &mut self.entries[index];
        entry.generation = handle::next_generation(entry.generation);
        entry.value = Some(value);
        self.first_free = index + 1;
        self.live += 1;
        Ok(handle::encode(index, entry.generation))
    }

    fn entry(&self, id: u64) -> Option<&Entry<T>> {
        let (index, generation) = handle::decode(id)?;
        self.entries
            .get(index)
            .filter(|e| e.generation == generation && e.value.is_some())
    }

    /// The object named by `id`, if it is still there.
    pub(crate) fn get(&self, id: u64) -> Option<&T> {
        self.entry(id).and_then(|e| e.value.as_ref())
    }

    /// The object named by `id`, mutably, if it is still there.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        self.entry(id)?;
        let (index, _) = handle::decode(id)?;
        self.entries.get_mut(index)?.value.as_mut()
    }

    /// Removes and returns the object named by `id`.
    pub(crate) fn remove(&mut self, id: u64) -> Option<T> {
        self.entry(id)?;
        let (index, _) = handle::decode(id)?;
        let value = self.entries.get_mut(index)?.value.take()?;
        self.first_free = self.first_free.min(index);
        // PANIC: an occupied entry was just emptied, so `live >= 1`.
        self.live -= 1;
        Some(value)
    }

    /// The identifier of the object with the lowest index, if any.
    pub(crate) fn first_id(&self) -> Option<u64> {
        self.entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.value.is_some())
            .map(|(index, e)| handle::encode(index, e.generation))
    }

    /// Identifiers of every object, appended to `out` (which must have room:
    /// nothing is allocated).
    pub(crate) fn ids_into(&self, out: &mut KVec<u64>) -> Result {
        for (index, entry) in self.entries.iter().enumerate() {
            if entry.value.is_some() {
                out.push(handle::encode(index, entry.generation), GFP_NOWAIT)?;
            }
        }
        Ok(())
    }

    /// Every object in the table.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().filter_map(|e| e.value.as_ref())
    }

    /// Number of objects in the table.
    pub(crate) fn len(&self) -> usize {
        self.live
    }
}
