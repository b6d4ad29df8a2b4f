// SPDX-License-Identifier: GPL-2.0

//! The layout of an atomic kernel message (`liteapi_atomic_send`): several
//! pieces that travel, and reach the handler, as one message.
//!
//! ```text
//! count: u32 | count x length: u32 | the pieces' bytes, one after the other
//! ```
//!
//! All little-endian. Being one message, the pieces are never interleaved
//! with another sender's, and a handler sees all of them or none.

use core::ops::Range;
use kernel::prelude::*;

use crate::internal::wire_layout::WireField;

/// Bytes of the count and of each length.
const FIELD: usize = <u32 as WireField>::LEN;

/// The length of the header of `count` pieces: the count and a length
/// for each; `None` if it overflows.
fn header_len(count: usize) -> Option<usize> {
    count.checked_add(1)?.checked_mul(FIELD)
}

/// The most pieces a message of `max` bytes can hold: each takes a length
/// field, after the count.
pub(crate) fn max_pieces(max: usize) -> usize {
    (max / FIELD).saturating_sub(1)
}

/// The length of the message holding pieces of `lengths` bytes.
///
/// # Errors
///
/// `EINVAL` for no piece, or a message longer than `max` bytes.
pub(crate) fn message_len(
    mut lengths: impl ExactSizeIterator<Item = usize>,
    max: usize,
) -> Result<usize> {
    let count = lengths.len();
    if count == 0 {
        return Err(EINVAL);
    }
    let header = header_len(count).ok_or(EINVAL)?;
    let len = lengths.try_fold(header, |len, piece| len.checked_add(piece).ok_or(EINVAL))?;
    if len > max {
        return Err(EINVAL);
    }
    Ok(len)
}

/// Writes the header of pieces of `lengths` bytes into `out`, and returns
/// the rest of `out`, where the pieces' bytes go in order.
///
/// # Errors
///
/// `EINVAL` if `out` is shorter than the header, or a length does not fit
/// the layout.
pub(crate) fn put_header(
    lengths: impl ExactSizeIterator<Item = usize>,
    out: &mut [u8],
) -> Result<&mut [u8]> {
    let mut rest = out;
    for value in Iterator::chain(core::iter::once(lengths.len()), lengths) {
        if rest.len() < FIELD {
            return Err(EINVAL);
        }
        // PANIC: `rest` holds `FIELD` bytes or more (checked above).
        let (field, after) = rest.split_at_mut(FIELD);
        u32::try_from(value).map_err(|_| EINVAL)?.put(field);
        rest = after;
    }
    Ok(rest)
}

/// The ranges of `message` that hold its pieces, in order.
///
/// # Errors
///
/// `EBADMSG` if `message` does not have the layout: no piece, a header
/// longer than the message, or pieces that do not fill the rest exactly.
pub(crate) fn ranges(message: &[u8]) -> Result<KVec<Range<usize>>> {
    let bad = crate::errno::EBADMSG;
    let count = message.get(..FIELD).map(u32::get).ok_or_else(bad)?;
    let count = usize::try_from(count).map_err(|_| bad())?;
    if count == 0 {
        return Err(bad());
    }
    let header = header_len(count)
        .filter(|header| *header <= message.len())
        .ok_or_else(bad)?;
    let mut ranges = KVec::with_capacity(count, GFP_KERNEL)?;
    let mut at = header;
    let mut field = FIELD;
    while field < header {
        // PANIC: `field + FIELD <= header <= message.len()`: `field` steps
        // by `FIELD` from `FIELD` and stays below `header`, a multiple of it.
        let len = u32::get(&message[field..field + FIELD]);
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| at.checked_add(len))
            .filter(|end| *end <= message.len())
            .ok_or_else(bad)?;
        ranges.push(at..end, GFP_KERNEL)?;
        at = end;
        field += FIELD;
    }
    if at != message.len() {
        return Err(bad());
    }
    Ok(ranges)
}
