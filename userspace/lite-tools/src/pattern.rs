//! Deterministic test data.
//!
//! A pattern is an endless pseudo-random byte sequence chosen by a seed.
//! Each byte depends only on the seed and its absolute position, so any
//! sub-range of an LMR can be generated or checked on its own, and data
//! written by another node or for another size never passes for ours.

/// Weyl sequence increment of SplitMix64.
pub(crate) const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64 output function: a cheap, well-mixed 64-bit hash.
pub(crate) fn splitmix64_output(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Derives a seed from the values that identify a piece of data, e.g.
/// (writer node, target node, size). Different inputs give unrelated seeds.
pub fn seed(parts: &[u64]) -> u64 {
    parts.iter().fold(0x4c49_5445_u64, |acc, &part| {
        splitmix64_output(acc.wrapping_add(GOLDEN_GAMMA) ^ part)
    })
}

fn word(seed: u64, index: u64) -> [u8; 8] {
    splitmix64_output(seed.wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA)))
        .to_le_bytes()
}

/// The pattern byte at absolute `position`.
pub fn byte_at(seed: u64, position: u64) -> u8 {
    word(seed, position / 8)[(position % 8) as usize]
}

/// Fills `buf` with the pattern bytes of positions `offset..offset + buf.len()`.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut position = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let bytes = word(seed, position / 8);
        let start = (position % 8) as usize;
        let take = (8 - start).min(rest.len());
        let (head, tail) = rest.split_at_mut(take);
        head.copy_from_slice(&bytes[start..start + take]);
        rest = tail;
        position += take as u64;
    }
}

/// Overwrites `buf` with bytes that differ from the pattern at every
/// position, so that bytes a read failed to deliver are always caught.
pub fn poison(seed: u64, offset: u64, buf: &mut [u8]) {
    fill(seed, offset, buf);
    for byte in buf.iter_mut() {
        *byte = !*byte;
    }
}

/// Where data differs from what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Absolute position of the first differing byte.
    pub position: u64,
    /// Byte the pattern has there.
    pub expected: u8,
    /// Byte found there.
    pub found: u8,
    /// Number of differing bytes in the whole buffer.
    pub count: u64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} byte(s) differ; first at offset {}: expected {:#04x}, found {:#04x}",
            self.count, self.position, self.expected, self.found
        )
    }
}

/// Compares `buf` with the pattern at positions `offset..offset + buf.len()`.
pub fn verify(seed: u64, offset: u64, buf: &[u8]) -> Result<(), Mismatch> {
    // Block-wise, so a multi-megabyte check needs no second full buffer.
    const BLOCK: usize = 64 * 1024;
    let mut expected = vec![0u8; BLOCK.min(buf.len())];
    let mut first = None;
    for (block_index, block) in buf.chunks(BLOCK).enumerate() {
        let start = offset + (block_index * BLOCK) as u64;
        let expected = &mut expected[..block.len()];
        fill(seed, start, expected);
        tally(block, expected, start, &mut first);
    }
    first.map_or(Ok(()), Err)
}

/// Compares `found` with `expected`, both holding positions starting at `offset`.
pub fn verify_bytes(found: &[u8], expected: &[u8], offset: u64) -> Result<(), Mismatch> {
    let mut first = None;
    if found.len() != expected.len() {
        return Err(Mismatch {
            position: offset + found.len().min(expected.len()) as u64,
            expected: 0,
            found: 0,
            count: found.len().abs_diff(expected.len()) as u64,
        });
    }
    tally(found, expected, offset, &mut first);
    first.map_or(Ok(()), Err)
}

fn tally(found: &[u8], expected: &[u8], offset: u64, first: &mut Option<Mismatch>) {
    if found == expected {
        return;
    }
    for (i, (&found, &expected)) in found.iter().zip(expected).enumerate() {
        if found != expected {
            let mismatch = first.get_or_insert(Mismatch {
                position: offset + i as u64,
                expected,
                found,
                count: 0,
            });
            mismatch.count += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mismatch(position: u64, expected: u8, found: u8, count: u64) -> Mismatch {
        Mismatch {
            position,
            expected,
            found,
            count,
        }
    }

    #[test]
    fn fill_agrees_with_byte_at_for_any_alignment() {
        let seed = seed(&[1, 2, 3]);
        for offset in [0u64, 1, 7, 8, 9, (4 << 20) - 3] {
            for len in [0usize, 1, 5, 8, 17, 100] {
                let mut buf = vec![0u8; len];
                fill(seed, offset, &mut buf);
                for (i, &byte) in buf.iter().enumerate() {
                    let expected = byte_at(seed, offset + i as u64);
                    assert_eq!(byte, expected, "offset {offset} i {i}");
                }
            }
        }
    }

    #[test]
    fn seeds_differ_per_input_and_order_and_patterns_do_not_repeat() {
        let seeds = [
            seed(&[1, 2, 4096]),
            seed(&[2, 1, 4096]),
            seed(&[1, 2, 4097]),
            seed(&[1, 3, 4096]),
            seed(&[]),
        ];
        for (i, a) in seeds.iter().enumerate() {
            for b in &seeds[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(seed(&[1, 2, 4096]), seed(&[1, 2, 4096]));
        let mut buf = vec![0u8; 4096];
        fill(seed(&[5]), 0, &mut buf);
        let distinct: std::collections::BTreeSet<u8> = buf.iter().copied().collect();
        assert!(distinct.len() > 200);
        assert_ne!(buf[..8], buf[8..16]);
    }

    #[test]
    fn mismatches_report_the_first_position_and_the_count() {
        let seed = seed(&[7]);
        let mut buf = vec![0u8; 200_000];
        fill(seed, 10, &mut buf);
        assert_eq!(verify(seed, 10, &buf), Ok(()));
        buf[70_000] ^= 1;
        buf[150_000] ^= 0xff;
        let expected = byte_at(seed, 70_010);
        let first = mismatch(70_010, expected, expected ^ 1, 2);
        assert_eq!(verify(seed, 10, &buf), Err(first));
        assert_eq!(verify(seed ^ 1, 10, &buf).map_err(|m| m.position), Err(10));
        poison(seed, 5, &mut buf[..333]);
        // Poisoned bytes differ everywhere.
        assert_eq!(verify(seed, 5, &buf[..333]).map_err(|m| m.count), Err(333));
        assert_eq!(verify_bytes(b"abc", b"abc", 5), Ok(()));
        let first = mismatch(7, b'c', b'd', 1);
        assert_eq!(verify_bytes(b"abd", b"abc", 5), Err(first));
        assert!(verify_bytes(b"ab", b"abc", 0).is_err());
    }
}
