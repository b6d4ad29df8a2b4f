//! Where graphs come from: a deterministic R-MAT generator, and plain edge
//! lists for tests.

use std::io;

use crate::rng::SplitMix64;

/// A graph that every rank can enumerate, edge for edge in the same order,
/// so each rank keeps its own edges and no input is distributed.
pub trait EdgeSource: Sync {
    /// Number of vertices; vertex ids are `0..vertices()`.
    fn vertices(&self) -> u32;

    /// Every directed edge `(source, target)`, in the same order on every
    /// call and every node.
    fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_;
}

/// A graph given as a list of edges.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EdgeList {
    /// Number of vertices.
    pub vertices: u32,
    /// Directed edges `(source, target)`, each below `vertices`.
    pub edges: Vec<(u32, u32)>,
}

#[cfg(test)]
impl EdgeSource for EdgeList {
    fn vertices(&self) -> u32 {
        self.vertices
    }

    fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.edges.iter().copied()
    }
}

/// The R-MAT power-law graph generator (Chakrabarti et al., SDM'04) with
/// Graph500's quadrant probabilities a=0.57, b=0.19, c=0.19, d=0.05.
///
/// Draws `edge_factor * 2^scale` edges over `2^scale` vertices. Self-loops
/// are dropped; duplicate edges are kept (the graph is a multigraph, and
/// PageRank counts a repeated link as several), so the edge count is a
/// little below `edge_factor * 2^scale`. Vertex ids are not permuted: low
/// ids have the highest degrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rmat {
    scale: u32,
    edge_factor: u32,
    seed: u64,
}

/// Cumulative quadrant probabilities a, a+b, a+b+c in units of 1/65536:
/// each level of the recursion uses 16 random bits.
const A: u64 = 37_355;
const AB: u64 = 49_807;
const ABC: u64 = 62_259;

/// The most edges a generator draws: 2^32, already 32 GiB as the edge list
/// rank 0 keeps to check the result.
pub const MAX_DRAWS: u64 = 1 << 32;

impl Rmat {
    /// A generator of `2^scale` vertices and `edge_factor * 2^scale` edge
    /// draws from `seed`.
    ///
    /// # Errors
    ///
    /// `EINVAL` unless `1 <= scale <= 31` (ids are `u32`), `edge_factor`
    /// is at least 1 and the draws are at most [`MAX_DRAWS`].
    pub fn new(scale: u32, edge_factor: u32, seed: u64) -> io::Result<Rmat> {
        // `scale <= 31`, so the shift keeps every bit of a u32 factor.
        if !(1..=31).contains(&scale)
            || edge_factor == 0
            || u64::from(edge_factor) << scale > MAX_DRAWS
        {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(Rmat {
            scale,
            edge_factor,
            seed,
        })
    }

    /// Number of edges drawn (before self-loops are dropped): at most
    /// [`MAX_DRAWS`].
    pub fn draws(&self) -> u64 {
        u64::from(self.edge_factor) << self.scale
    }

    fn edge(&self, random: &mut SplitMix64) -> (u32, u32) {
        let (mut source, mut target) = (0u32, 0u32);
        let mut bits = 0u64;
        for level in 0..self.scale {
            if level % 4 == 0 {
                bits = random.next_u64();
            }
            let r = bits & 0xffff;
            bits >>= 16;
            let (s, t) = match r {
                r if r < A => (0, 0),
                r if r < AB => (0, 1),
                r if r < ABC => (1, 0),
                _ => (1, 1),
            };
            source = source << 1 | s;
            target = target << 1 | t;
        }
        (source, target)
    }
}

impl EdgeSource for Rmat {
    fn vertices(&self) -> u32 {
        // scale <= 31, so this fits.
        1 << self.scale
    }

    fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut random = SplitMix64(self.seed);
        (0..self.draws())
            .map(move |_| self.edge(&mut random))
            .filter(|(s, t)| s != t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_graph() {
        let rmat = Rmat::new(10, 8, 42).expect("valid");
        let first: Vec<_> = rmat.edges().collect();
        assert_eq!(first, rmat.edges().collect::<Vec<_>>());
        let other: Vec<_> = Rmat::new(10, 8, 43).expect("valid").edges().collect();
        assert_ne!(first, other);
        assert!(first.iter().all(|&(s, t)| s != t && s < 1024 && t < 1024));
        // Only self-loops are dropped, and there are few of them.
        assert!(first.len() as u64 <= rmat.draws());
        assert!(first.len() as u64 > rmat.draws() * 9 / 10);
    }

    #[test]
    fn degrees_are_skewed() {
        let rmat = Rmat::new(12, 8, 7).expect("valid");
        let mut degree = vec![0u32; rmat.vertices() as usize];
        let mut edges = 0u32;
        for (s, _) in rmat.edges() {
            degree[s as usize] += 1;
            edges += 1;
        }
        let average = edges / rmat.vertices();
        let max = *degree.iter().max().expect("vertices");
        let empty = degree.iter().filter(|&&d| d == 0).count();
        assert!(max > 20 * average, "max {max} average {average}");
        assert!(
            empty > degree.len() / 10,
            "{empty} vertices without out-edges"
        );
        assert_eq!(degree.iter().position(|&d| d == max), Some(0));
    }

    #[test]
    fn out_of_range_parameters_are_einval() {
        for (scale, factor) in [(0, 8), (32, 8), (10, 0), (31, 3), (1, u32::MAX)] {
            let err = Rmat::new(scale, factor, 1).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        }
    }
}
