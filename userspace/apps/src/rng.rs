//! The one random generator the applications use to build their inputs.

use std::ops::RangeInclusive;

/// SplitMix64 (Steele, Lea, Flood, OOPSLA'14): small, fast, and the same
/// stream on every node for the same seed, so every rank can generate the
/// same input.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `range` (the slight modulo bias does not matter here);
    /// the start of an empty range.
    pub(crate) fn in_range(&mut self, range: RangeInclusive<u64>) -> u64 {
        let (low, high) = range.into_inner();
        // The width of all of u64 does not fit: then any value will do.
        match high.saturating_sub(low).checked_add(1) {
            Some(width) => low + self.next_u64() % width,
            None => self.next_u64(),
        }
    }

    /// Uniform in `[0, 1)`: the top 53 bits as a fraction.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_its_reference_output() {
        // First outputs for seed 1234567 of the reference C implementation.
        let mut random = SplitMix64(1_234_567);
        assert_eq!(random.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(random.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn draws_stay_in_their_range() {
        let mut random = SplitMix64(3);
        for _ in 0..1000 {
            assert!((4..=16).contains(&random.in_range(4..=16)));
            assert!((0.0..1.0).contains(&random.unit()));
        }
        assert_eq!(random.in_range(7..=7), 7);
        random.in_range(0..=u64::MAX);
    }
}
