//! Single-process reference results over the whole graph, written plainly
//! and apart from the engine, to check it against.

use super::programs::DAMPING;

/// PageRank after `iterations` iterations, with the same damping and
/// dangling-vertex rule as [`super::programs::PageRank`].
///
/// Every edge must be below `vertices`, as `LocalGraph::build` checked.
pub(crate) fn pagerank(vertices: u32, edges: &[(u32, u32)], iterations: u32) -> Vec<f64> {
    let n = vertices as usize;
    let mut out_degree = vec![0u32; n];
    for &(s, _) in edges {
        // PANIC: `s < vertices`, the length.
        out_degree[s as usize] += 1;
    }
    let mut rank = vec![1.0 / n as f64; n];
    for _ in 0..iterations {
        let dangling: f64 = rank
            .iter()
            .zip(&out_degree)
            .filter(|&(_, &degree)| degree == 0)
            .map(|(r, _)| r)
            .sum();
        let mut incoming = vec![0.0; n];
        for &(s, t) in edges {
            // PANIC: `s` and `t` are below `vertices`, the lengths.
            incoming[t as usize] += rank[s as usize] / f64::from(out_degree[s as usize]);
        }
        for (r, sum) in rank.iter_mut().zip(incoming) {
            *r = (1.0 - DAMPING) / n as f64 + DAMPING * (sum + dangling / n as f64);
        }
    }
    rank
}

/// Each vertex's component, named by its smallest vertex, treating edges
/// as undirected: union-find where the smaller root always wins.
///
/// Every edge must be below `vertices`, as `LocalGraph::build` checked.
pub(crate) fn components(vertices: u32, edges: &[(u32, u32)]) -> Vec<u32> {
    let mut parent: Vec<u32> = (0..vertices).collect();
    fn root(parent: &mut [u32], mut v: u32) -> u32 {
        // PANIC: every index here is a vertex (`v` or a parent), below
        // `parent.len()`.
        while parent[v as usize] != v {
            // Path halving.
            parent[v as usize] = parent[parent[v as usize] as usize];
            v = parent[v as usize];
        }
        v
    }
    for &(s, t) in edges {
        let (a, b) = (root(&mut parent, s), root(&mut parent, t));
        // PANIC: roots are vertices, below `parent.len()`.
        parent[a.max(b) as usize] = a.min(b);
    }
    (0..vertices).map(|v| root(&mut parent, v)).collect()
}

/// Whether each rank is within the tolerance of the reference.
///
/// Ranks are sums of positive terms (no cancellation), so summing in a
/// different order, as the partitioned engine does, changes each by a
/// relative error of at most about (in-degree) x 2^-53 per iteration: far
/// below 1e-9 for any graph here, while a real bug shows up far above it.
pub(crate) fn pagerank_matches(ranks: &[f64], reference: &[f64]) -> bool {
    ranks.len() == reference.len()
        && ranks
            .iter()
            .zip(reference)
            .all(|(r, expected)| (r - expected).abs() <= 1e-9 * expected.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_keeps_uniform_ranks() {
        let ranks = pagerank(4, &[(0, 1), (1, 2), (2, 3), (3, 0)], 10);
        assert!(ranks.iter().all(|&r| (r - 0.25).abs() < 1e-15));
    }

    #[test]
    fn ranks_sum_to_one_with_dangling_vertices() {
        // 2 is dangling, 3 isolated.
        let ranks = pagerank(4, &[(0, 1), (1, 2), (0, 2)], 20);
        assert!((ranks.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(ranks[2] > ranks[1] && ranks[1] > ranks[0]);
    }

    #[test]
    fn components_are_named_by_their_smallest_vertex() {
        let labels = components(7, &[(5, 1), (1, 3), (6, 4), (3, 5)]);
        assert_eq!(labels, vec![0, 1, 2, 1, 4, 1, 4]);
    }

    #[test]
    fn the_tolerance_is_relative() {
        let reference = [1e-6, 0.5];
        assert!(pagerank_matches(&[1e-6 * (1.0 + 1e-12), 0.5], &reference));
        assert!(!pagerank_matches(&[1e-6 * (1.0 + 1e-8), 0.5], &reference));
        assert!(!pagerank_matches(&[1e-6], &reference));
    }
}
