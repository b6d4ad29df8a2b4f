//! The binary encoding of map and reduce output: records of a
//! length-prefixed key and a job-specific value, built from LEB128 varints.
//!
//! ```text
//! record  = varint(key length) key value
//! count   = varint(count)                                  (word count)
//! ids     = varint(n) varint(id[0]) varint(id[1] - id[0]) ..  (inverted index)
//! ```
//!
//! A buffer is a plain sequence of records, so buffers concatenate.

use std::io;

/// The error for a buffer that does not decode.
pub fn malformed() -> io::Error {
    io::Error::from_raw_os_error(libc::EPROTO)
}

/// Appends `value` as an LEB128 varint: 7 bits a byte, low bits first.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Takes a varint off the front of `input`.
///
/// # Errors
///
/// `EPROTO` if `input` ends inside it or it does not fit in 64 bits.
pub fn get_varint(input: &mut &[u8]) -> io::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or_else(malformed)?;
        *input = rest;
        let bits = u64::from(byte & 0x7f);
        if bits << shift >> shift != bits {
            return Err(malformed());
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(malformed())
}

/// Takes a varint that must fit in `usize` off the front of `input`.
pub fn get_length(input: &mut &[u8]) -> io::Result<usize> {
    usize::try_from(get_varint(input)?).map_err(|_| malformed())
}

/// Appends `bytes`, prefixed by their length.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Takes length-prefixed bytes off the front of `input`, borrowing them.
pub fn get_bytes<'a>(input: &mut &'a [u8]) -> io::Result<&'a [u8]> {
    let len = get_length(input)?;
    if len > input.len() {
        return Err(malformed());
    }
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    Ok(bytes)
}

/// Appends a list of document ids as the differences between neighbours:
/// small numbers, hence short varints, when the list is sorted. Wrapping
/// arithmetic makes any order round-trip.
pub fn put_ids(out: &mut Vec<u8>, ids: &[u32]) {
    put_varint(out, ids.len() as u64);
    let mut previous = 0u32;
    for &id in ids {
        put_varint(out, u64::from(id.wrapping_sub(previous)));
        previous = id;
    }
}

/// Takes a list of document ids written by [`put_ids`] off `input`.
pub fn get_ids(input: &mut &[u8]) -> io::Result<Vec<u32>> {
    let len = get_length(input)?;
    // Each id takes at least a byte: a corrupt length cannot allocate more.
    let mut ids = Vec::with_capacity(len.min(input.len()));
    let mut previous = 0u32;
    for _ in 0..len {
        let delta = u32::try_from(get_varint(input)?).map_err(|_| malformed())?;
        previous = previous.wrapping_add(delta);
        ids.push(previous);
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        let values = [
            0,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut buffer = Vec::new();
        for &v in &values {
            put_varint(&mut buffer, v);
        }
        let mut input = buffer.as_slice();
        for &v in &values {
            assert_eq!(get_varint(&mut input).unwrap(), v);
        }
        assert!(input.is_empty());
        let mut one_byte: &[u8] = &[0x7f];
        assert_eq!(get_varint(&mut one_byte).unwrap(), 127);
    }

    #[test]
    fn truncated_or_oversized_varints_are_eproto() {
        for bad in [
            &[0x80u8][..],
            &[],
            &[0xff; 10],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
        ] {
            let mut input = bad;
            assert_eq!(
                get_varint(&mut input).unwrap_err().raw_os_error(),
                Some(libc::EPROTO)
            );
        }
    }

    #[test]
    fn keys_and_id_lists_round_trip() {
        let mut buffer = Vec::new();
        put_bytes(&mut buffer, b"zipf");
        put_ids(&mut buffer, &[3, 9, 9, 4_000_000_000]);
        put_bytes(&mut buffer, b"");
        put_ids(&mut buffer, &[7, 2, u32::MAX, 0]);
        put_ids(&mut buffer, &[]);
        let mut input = buffer.as_slice();
        assert_eq!(get_bytes(&mut input).unwrap(), b"zipf");
        assert_eq!(get_ids(&mut input).unwrap(), [3, 9, 9, 4_000_000_000]);
        assert_eq!(get_bytes(&mut input).unwrap(), b"");
        assert_eq!(get_ids(&mut input).unwrap(), [7, 2, u32::MAX, 0]);
        assert_eq!(get_ids(&mut input).unwrap(), Vec::<u32>::new());
        assert!(input.is_empty());
    }

    #[test]
    fn lengths_past_the_end_are_eproto() {
        let mut buffer = Vec::new();
        put_varint(&mut buffer, 10);
        buffer.extend_from_slice(b"short");
        assert!(get_bytes(&mut buffer.as_slice()).is_err());
        assert!(get_ids(&mut buffer.as_slice()).is_err());
    }
}
