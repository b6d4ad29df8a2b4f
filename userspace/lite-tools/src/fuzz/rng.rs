//! The fuzzer's random numbers: splitmix64 to seed, xoshiro256** to draw.
//!
//! Every thread of every process draws from its own stream, derived from
//! the run's seed, the node, the process and the thread
//! ([`Rng::for_stream`]), and every step of a thread from a stream split
//! off the thread's ([`Rng::split`]): how many numbers one step draws never
//! shifts the next step, so the same seed replays the same sequence of
//! steps whatever the calls returned.

use crate::pattern::{splitmix64_output, GOLDEN_GAMMA};

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN_GAMMA);
    splitmix64_output(*state)
}

/// For deriving seeds and passwords.
pub(crate) fn mix(value: u64) -> u64 {
    let mut state = value;
    splitmix64(&mut state)
}

/// xoshiro256**.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// Splitmix64 never yields an all-zero state from four consecutive
    /// outputs.
    pub fn from_seed(seed: u64) -> Rng {
        let mut s = seed;
        Rng {
            state: std::array::from_fn(|_| splitmix64(&mut s)),
        }
    }

    pub(crate) fn for_stream(seed: u64, node: u32, proc: u32, thread: u32) -> Rng {
        let key = mix(mix(mix(seed) ^ u64::from(node)) ^ u64::from(proc)) ^ u64::from(thread);
        Rng::from_seed(mix(key))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// 0 if `bound` is 0; Lemire's multiply-shift leaves no modulo bias
    /// worth mentioning.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// `low` if the range is empty.
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        match (high - low).checked_add(1) {
            Some(span) => low + self.below(span),
            None => self.next_u64(),
        }
    }

    /// 0 if `len` is 0.
    pub(crate) fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    pub(crate) fn per_mille(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }

    pub(crate) fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < u64::from(percent)
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            items.get(self.index(items.len()))
        }
    }

    /// For a constant list, which cannot be empty.
    pub(crate) fn choose<T: Copy, const N: usize>(&mut self, items: &[T; N]) -> T {
        const { assert!(N > 0) };
        items[self.index(N)]
    }

    pub(crate) fn mostly<T: Copy, const N: usize>(
        &mut self,
        percent: u32,
        usual: impl FnOnce(&mut Rng) -> T,
        rare: &[T; N],
    ) -> T {
        if self.percent(percent) {
            usual(self)
        } else {
            self.choose(rare)
        }
    }

    pub(crate) fn or_random(&mut self, percent: u32, usual: u64) -> u64 {
        if self.percent(percent) {
            usual
        } else {
            self.next_u64()
        }
    }

    /// The last index if every weight is 0.
    pub(crate) fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut at = self.below(total);
        for (index, &weight) in weights.iter().enumerate() {
            if at < u64::from(weight) {
                return index;
            }
            at -= u64::from(weight);
        }
        weights.len().saturating_sub(1)
    }

    /// The stream of one step, so that how much the step draws never
    /// shifts the next.
    pub(crate) fn split(&mut self) -> Rng {
        Rng::from_seed(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_splitmix_seeded_replay_and_differ() {
        let draw = |mut rng: Rng| (0..8).map(|_| rng.next_u64()).collect::<Vec<_>>();
        let a = draw(Rng::for_stream(42, 1, 0, 0));
        assert_eq!(a, draw(Rng::for_stream(42, 1, 0, 0)));
        for other in [
            Rng::for_stream(43, 1, 0, 0),
            Rng::for_stream(42, 2, 0, 0),
            Rng::for_stream(42, 1, 1, 0),
            Rng::for_stream(42, 1, 0, 1),
        ] {
            assert_ne!(a, draw(other));
        }
        // A step does not shift the next.
        let mut one = Rng::from_seed(7);
        let mut two = one.clone();
        let mut step = one.split();
        for _ in 0..10 {
            step.next_u64();
        }
        let _ = two.split();
        assert_eq!(one.next_u64(), two.next_u64());
        // The first outputs of the reference splitmix64 seeded with 0.
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn bounded_draws_stay_in_range() {
        let mut rng = Rng::from_seed(1);
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
            let b = rng.between(5, 9);
            assert!((5..=9).contains(&b));
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.between(3, 3), 3);
        assert_eq!(rng.between(9, 2), 9);
        let _ = rng.between(0, u64::MAX);
        assert_eq!(rng.pick::<u8>(&[]), None);
        assert_eq!(rng.choose(&[4]), 4);
        assert!((0..100).all(|_| rng.mostly(100, |_| 1, &[2]) == 1));
        assert!((0..100).all(|_| rng.mostly(0, |_| 1, &[2]) == 2));
        assert!((0..100).all(|_| rng.or_random(100, 7) == 7));
        assert_eq!(rng.weighted(&[0, 0, 5]), 2);
        assert_eq!(rng.weighted(&[0, 0]), 1);
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            seen[rng.weighted(&[1, 0, 2])] += 1;
        }
        assert_eq!(seen[1], 0);
        assert!(seen[2] > seen[0], "{seen:?}");
    }
}
