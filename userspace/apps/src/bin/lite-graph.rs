//! LITE-Graph: PageRank or connected components on a generated R-MAT
//! power-law graph, across the nodes, checked against a single-process
//! reference.
//!
//! ```text
//! lite-graph [--transport lite|dsm|tcp|local ...] [--algo pagerank|components]
//!            [--scale 14] [--edge-factor 8] [--iterations 10] [--seed 1]
//! ```
//!
//! Over `dsm` it is LITE-Graph-DSM: rank 0 stores the graph in a LITE-DSM
//! region every rank reads, and the supersteps' values travel through
//! another; rank 0 checks the result against the graph it drew itself.
//!
//! Rank 0 prints one `LITE-APP` line; every rank exits 1 if the result did
//! not match the reference.

use lite_apps::cli::{fail, Options, Transport};
use lite_apps::graph::{self, Algorithm, Rmat, SharedGraph, EXCHANGE_TAG, MAX_DRAWS};

const PROGRAM: &str = "lite-graph";

fn main() {
    let options = Options::parse(
        std::env::args().skip(1),
        &["algo", "scale", "edge-factor", "iterations", "seed"],
    )
    .unwrap_or_else(|e| fail(PROGRAM, &e, true));
    let algo = options.text("algo", "pagerank");
    let algorithm = Algorithm::from_name(algo).unwrap_or_else(|| {
        fail(
            PROGRAM,
            &format!("unknown --algo {algo:?} (pagerank or components)"),
            true,
        )
    });
    let small = |name: &str, default: u64| {
        let value = options
            .number(name, default)
            .unwrap_or_else(|e| fail(PROGRAM, &e, true));
        u32::try_from(value)
            .unwrap_or_else(|_| fail(PROGRAM, &format!("--{name} is too large"), true))
    };
    let (scale, edge_factor, iterations) = (
        small("scale", 14),
        small("edge-factor", 8),
        small("iterations", 10),
    );
    let seed = options
        .number("seed", 1)
        .unwrap_or_else(|e| fail(PROGRAM, &e, true));
    let rmat = Rmat::new(scale, edge_factor, seed).unwrap_or_else(|_| {
        let message = format!(
            "--scale must be 1 to 31, --edge-factor at least 1, and \
             edge-factor * 2^scale at most {MAX_DRAWS}"
        );
        fail(PROGRAM, &message, true)
    });

    let mut exchange = options
        .connect(EXCHANGE_TAG)
        .unwrap_or_else(|e| fail(PROGRAM, &format!("connecting: {e}"), false));
    let report = if options.transport == Transport::Dsm {
        SharedGraph::share(&rmat, exchange.as_mut(), EXCHANGE_TAG).and_then(|shared| {
            graph::run_checked_against(exchange.as_mut(), &shared, &rmat, algorithm, iterations)
        })
    } else {
        graph::run(exchange.as_mut(), &rmat, algorithm, iterations)
    }
    .unwrap_or_else(|e| fail(PROGRAM, &format!("{}: {e}", algorithm.name()), false));
    if exchange.rank() == 0 {
        println!("{report}");
    }
    if !report.checked {
        fail(PROGRAM, "the result does not match the reference", false);
    }
}
