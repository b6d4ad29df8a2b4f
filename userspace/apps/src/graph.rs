//! LITE-Graph: a vertex-program engine in PowerGraph's gather-apply-scatter
//! design, with PageRank and connected components on R-MAT power-law
//! graphs.
//!
//! - Partitioning: vertex `v` belongs to rank `v % nodes`, with its
//!   out-edges (an edge cut by source).
//! - Input: every rank draws the same deterministic R-MAT edge stream and
//!   keeps the out-edges of its own vertices, so nothing is distributed.
//! - Supersteps: each rank scatters messages along its vertices' out-edges,
//!   combines them per destination vertex, sends one part per owner rank
//!   (u32 vertex id and value records) in one all-to-all, then gathers and
//!   applies to its own vertices. The count of changed values goes through
//!   `all_sum_u64`, and a sum over all vertices (PageRank's dangling rank),
//!   for the programs that use one, through `all_sum_f64`.
//! - Check: rank 0 gathers the final values and compares them with a
//!   single-process reference over the whole graph, then tells every rank
//!   the verdict.
//!
//! The engine only sees [`Exchange`], so the same code runs over LITE
//! memory, TCP sockets and in one process.

mod engine;
mod programs;
mod reference;
mod rmat;
mod shared;

use std::io;
use std::time::Instant;

use engine::{execute, gather_values, LocalGraph};
pub use engine::{VertexProgram, Wire};
pub use programs::{Components, PageRank, DAMPING};
#[cfg(test)]
use rmat::EdgeList;
pub use rmat::{EdgeSource, Rmat, MAX_DRAWS};
pub use shared::SharedGraph;

use crate::exchange::Exchange;
use crate::report::AppReport;

/// Keeps LITE-Graph's LMR names apart from other applications' ("GRPH").
pub const EXCHANGE_TAG: u32 = 0x4752_5048;

/// Which vertex program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// PageRank for a fixed number of iterations.
    PageRank,
    /// Connected components, until no label changes.
    Components,
}

impl Algorithm {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::PageRank => "pagerank",
            Algorithm::Components => "components",
        }
    }

    /// The algorithm called `name`.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "pagerank" => Some(Algorithm::PageRank),
            "components" => Some(Algorithm::Components),
            _ => None,
        }
    }
}

/// Runs `algorithm` on `graph` across the exchange's ranks, checks the
/// result on rank 0 and returns, on every rank, the report with rank 0's
/// verdict. PageRank runs `iterations` supersteps; components runs until
/// no label changes.
///
/// Timed: from after this rank built its part of the graph to after the
/// last superstep; the work is the graph's edges times the supersteps run.
///
/// # Errors
///
/// `EINVAL` for an invalid graph; the exchange's errors.
pub fn run(
    exchange: &mut dyn Exchange,
    graph: &impl EdgeSource,
    algorithm: Algorithm,
    iterations: u32,
) -> io::Result<AppReport> {
    run_checked_against(exchange, graph, graph, algorithm, iterations)
}

/// [`run`] on `input`, a copy of `reference` the ranks read some other
/// way (LITE-Graph-DSM's [`SharedGraph`]), checked against the reference
/// computed from `reference` itself.
///
/// # Errors
///
/// As [`run`].
pub fn run_checked_against(
    exchange: &mut dyn Exchange,
    input: &impl EdgeSource,
    reference: &impl EdgeSource,
    algorithm: Algorithm,
    iterations: u32,
) -> io::Result<AppReport> {
    let graph = Input { input, reference };
    let vertices = reference.vertices();
    match algorithm {
        Algorithm::PageRank => run_checked(
            algorithm.name(),
            exchange,
            graph,
            &PageRank { vertices },
            iterations,
            |ranks, edges| {
                reference::pagerank_matches(
                    ranks,
                    &reference::pagerank(vertices, edges, iterations),
                )
            },
        ),
        // Label propagation settles within (diameter + 1) supersteps.
        Algorithm::Components => run_checked(
            algorithm.name(),
            exchange,
            graph,
            &Components,
            vertices.saturating_add(1),
            |labels, edges| labels == reference::components(vertices, edges),
        ),
    }
}

/// The graph the ranks compute on, and the one the result is checked
/// against.
struct Input<'a, I, R> {
    input: &'a I,
    reference: &'a R,
}

fn run_checked<P: VertexProgram, I: EdgeSource, R: EdgeSource>(
    app: &'static str,
    exchange: &mut dyn Exchange,
    graph: Input<'_, I, R>,
    program: &P,
    max_supersteps: u32,
    matches_reference: impl FnOnce(&[P::Value], &[(u32, u32)]) -> bool,
) -> io::Result<AppReport> {
    let local = LocalGraph::build(
        graph.input,
        exchange.rank(),
        exchange.nodes(),
        P::UNDIRECTED,
    )?;
    exchange.barrier()?;
    let start = Instant::now();
    let outcome = execute(exchange, &local, program, max_supersteps)?;
    let elapsed = start.elapsed();

    let all_values = gather_values(exchange, &local.partition, &outcome.values)?;
    let failed = match all_values {
        Some(values) => {
            let edges: Vec<(u32, u32)> = graph.reference.edges().collect();
            !matches_reference(&values, &edges)
        }
        None => false,
    };
    // Only rank 0 adds its verdict, so the sum is rank 0's verdict.
    let checked = exchange.all_sum_u64(u64::from(failed))? == 0;
    Ok(AppReport {
        app,
        transport: exchange.transport(),
        nodes: exchange.nodes(),
        work: local
            .total_edges
            .saturating_mul(u64::from(outcome.supersteps)),
        unit: "edges",
        elapsed,
        checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::{LocalExchange, ThreadMesh};

    fn run_on_ranks(nodes: usize, graph: &impl EdgeSource, algorithm: Algorithm) -> Vec<AppReport> {
        ThreadMesh::run(nodes, |mesh| run(mesh, graph, algorithm, 10).expect("runs"))
    }

    #[test]
    fn the_engine_matches_the_reference_on_1_to_4_ranks() {
        for (scale, seed) in [(8, 1), (10, 2), (12, 3)] {
            let graph = Rmat::new(scale, 8, seed).expect("valid");
            for nodes in 1..=4 {
                for algorithm in [Algorithm::PageRank, Algorithm::Components] {
                    let reports = run_on_ranks(nodes, &graph, algorithm);
                    for report in &reports {
                        assert!(report.checked, "scale {scale} {nodes} ranks {algorithm:?}");
                        assert_eq!(report.app, algorithm.name());
                        assert_eq!(report.nodes, nodes);
                    }
                }
            }
        }
    }

    #[test]
    fn the_engine_gives_the_reference_values() {
        let graph = Rmat::new(9, 4, 5).expect("valid");
        let edges: Vec<_> = graph.edges().collect();
        let expected = reference::components(graph.vertices(), &edges);
        let got = ThreadMesh::run(3, |mesh| {
            let local = LocalGraph::build(&graph, mesh.rank(), 3, true).expect("builds");
            let outcome = execute(mesh, &local, &Components, u32::MAX).expect("runs");
            gather_values(mesh, &local.partition, &outcome.values).expect("gathers")
        });
        assert_eq!(got[0].as_ref(), Some(&expected));
        assert!(got[1..].iter().all(Option::is_none));
        // An R-MAT graph this sparse has many components.
        let mut names = expected.clone();
        names.dedup();
        assert!(names.len() > 10);
    }

    #[test]
    fn isolated_and_dangling_vertices_are_handled() {
        // 4 and 7 are dangling, 5 and 8 isolated; a duplicate edge 0->1.
        let graph = EdgeList {
            vertices: 9,
            edges: vec![(0, 1), (0, 1), (1, 2), (2, 0), (3, 4), (6, 7), (2, 6)],
        };
        for nodes in 1..=4 {
            for algorithm in [Algorithm::PageRank, Algorithm::Components] {
                let reports = run_on_ranks(nodes, &graph, algorithm);
                assert!(
                    reports.iter().all(|r| r.checked),
                    "{nodes} ranks {algorithm:?}"
                );
            }
        }
        let got = ThreadMesh::run(2, |mesh| {
            let local = LocalGraph::build(&graph, mesh.rank(), 2, true).expect("builds");
            let outcome = execute(mesh, &local, &Components, u32::MAX).expect("runs");
            gather_values(mesh, &local.partition, &outcome.values).expect("gathers")
        });
        assert_eq!(got[0], Some(vec![0, 0, 0, 3, 3, 5, 0, 0, 8]));
    }

    #[test]
    fn work_counts_edges_times_supersteps() {
        let graph = EdgeList {
            vertices: 3,
            edges: vec![(0, 1), (1, 2)],
        };
        let pagerank = run(&mut LocalExchange, &graph, Algorithm::PageRank, 7).expect("runs");
        assert_eq!(
            (pagerank.work, pagerank.unit, pagerank.checked),
            (14, "edges", true)
        );
        // Labels settle after two supersteps; a third sees no change.
        let components = run(&mut LocalExchange, &graph, Algorithm::Components, 7).expect("runs");
        assert_eq!((components.work, components.transport), (6, "local"));
    }

    #[test]
    fn a_wrong_result_is_reported_on_every_rank() {
        let graph = Rmat::new(8, 4, 9).expect("valid");
        let reports = ThreadMesh::run(3, |mesh| {
            let input = Input {
                input: &graph,
                reference: &graph,
            };
            run_checked("components", mesh, input, &Components, u32::MAX, |_, _| {
                false
            })
            .expect("runs")
        });
        assert!(reports.iter().all(|r| !r.checked));
    }
}
