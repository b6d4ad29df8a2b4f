//! The LITE paper's applications, each a short program on the `lite`
//! crate, with the version a user would write without LITE (TCP sockets)
//! and a single-node version to compare against:
//!
//! - [`log`]: LITE-Log, a distributed atomic log every node appends to and
//!   reads, in remote memory spread over the nodes.
//! - [`mapreduce`]: LITE-MapReduce, Phoenix-style MapReduce (word count and
//!   an inverted index) across the nodes' worker threads.
//! - [`graph`]: LITE-Graph, a gather-apply-scatter vertex-program engine
//!   (PageRank, connected components) on power-law graphs. Run over
//!   LITE-DSM (`--transport dsm`) it is LITE-Graph-DSM: the graph and the
//!   values the supersteps exchange are shared through LITE-DSM regions,
//!   and its only LITE calls are opening and mapping them and barriers.
//!
//! MapReduce and the graph engine are written once against [`Exchange`]
//! (all-to-all exchanges between barriers), which [`lite_exchange`]
//! implements over LMRs, [`dsm_exchange`] over a LITE-DSM region,
//! [`tcp_exchange`] over TCP sockets and
//! [`exchange::LocalExchange`] in one process. LITE-Log is written
//! directly on LMRs and RDMA atomics; its TCP version is a log server.

pub mod cli;
pub mod dsm_exchange;
pub mod exchange;
pub mod graph;
mod lite_barrier;
pub mod lite_exchange;
pub mod log;
pub mod mapreduce;
pub mod report;
pub(crate) mod rng;
pub mod tcp_exchange;

pub use exchange::Exchange;
