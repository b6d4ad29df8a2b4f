// SPDX-License-Identifier: GPL-2.0

//! Generation-checked identifiers for table entries (LMR handles, chunk ids).
//!
//! An identifier is `generation << 32 | (index + 1)`. The generation of a
//! table entry changes every time the entry is reused, so an identifier
//! kept after its object was released never names the entry's next
//! occupant. Identifiers are never 0 and always fit in a positive `i64`, so
//! a system call can return one as its non-negative result.

/// Highest generation; generations cycle through `1..=MAX_GENERATION`.
pub(crate) const MAX_GENERATION: u32 = 0x7fff_ffff;

/// Highest index an identifier can carry.
pub(crate) const MAX_INDEX: usize = u32::MAX as usize - 1;

/// Encodes the identifier of entry `index` in its `generation`.
///
/// `index` must be at most [`MAX_INDEX`] and `generation` in `1..=MAX_GENERATION`.
pub(crate) fn encode(index: usize, generation: u32) -> u64 {
    // PANIC: `index <= MAX_INDEX < u32::MAX` (precondition), so adding 1
    // cannot overflow.
    (u64::from(generation) << 32) | (index as u64 + 1)
}

/// Decodes an identifier into `(index, generation)`, or `None` if it cannot
/// have been produced by [`encode`].
pub(crate) fn decode(id: u64) -> Option<(usize, u32)> {
    let low = (id & 0xffff_ffff) as u32;
    let generation = (id >> 32) as u32;
    if low == 0 || generation == 0 || generation > MAX_GENERATION {
        return None;
    }
    // PANIC: `low != 0` (checked above).
    Some((low as usize - 1, generation))
}

/// The generation following `generation`.
pub(crate) fn next_generation(generation: u32) -> u32 {
    if generation >= MAX_GENERATION {
        1
    } else {
        // PANIC: `generation < MAX_GENERATION < u32::MAX`.
        generation + 1
    }
}
