//! The vertex programs: PageRank and connected components.

use super::engine::VertexProgram;

/// PageRank's damping factor: the probability of following a link.
pub const DAMPING: f64 = 0.85;

/// PageRank over the directed graph. A vertex without out-edges (dangling)
/// links to every vertex: its rank is spread uniformly over the graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageRank {
    /// Number of vertices in the graph.
    pub vertices: u32,
}

impl VertexProgram for PageRank {
    type Value = f64;
    type Message = f64;
    const UNDIRECTED: bool = false;
    const USES_GLOBAL_SUM: bool = true;

    fn initial(&self, _vertex: u32) -> f64 {
        1.0 / f64::from(self.vertices)
    }

    fn combine(&self, a: f64, b: f64) -> f64 {
        a + b
    }

    /// The dangling vertices' total rank.
    fn global_share(&self, rank: f64, out_degree: usize) -> f64 {
        if out_degree == 0 {
            rank
        } else {
            0.0
        }
    }

    fn apply(&self, _rank: f64, gathered: Option<f64>, dangling: f64) -> f64 {
        let n = f64::from(self.vertices);
        (1.0 - DAMPING) / n + DAMPING * (gathered.unwrap_or(0.0) + dangling / n)
    }

    fn scatter(&self, rank: f64, out_degree: usize, _changed: bool) -> Option<f64> {
        (out_degree > 0).then(|| rank / out_degree as f64)
    }
}

/// Connected components of the undirected graph by min-label propagation:
/// every vertex ends labelled with the smallest vertex id in its component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Components;

impl VertexProgram for Components {
    type Value = u32;
    type Message = u32;
    const UNDIRECTED: bool = true;
    const USES_GLOBAL_SUM: bool = false;

    fn initial(&self, vertex: u32) -> u32 {
        vertex
    }

    fn combine(&self, a: u32, b: u32) -> u32 {
        a.min(b)
    }

    fn apply(&self, label: u32, gathered: Option<u32>, _global: f64) -> u32 {
        gathered.map_or(label, |g| g.min(label))
    }

    /// Only a vertex whose label just dropped has news for its neighbours.
    fn scatter(&self, label: u32, _out_degree: usize, changed: bool) -> Option<u32> {
        changed.then_some(label)
    }
}
