//! `cargo xtask bench`: LITE's latency and throughput against native verbs
//! (perftest), its atomics and locks, and priority isolation.
//!
//! Two VMs run the release kernel, each pinned to its own host CPU. Node 1
//! is the perftest server, node 2 the client: first the latency tests
//! (`ib_write_lat`, `ib_read_lat`, `ib_send_lat`, and `ib_atomic_lat` with
//! fetch-and-add and compare-and-swap), then the bandwidth tests
//! (`ib_write_bw`, `ib_read_bw`, see [`run::bw_runs`]); both nodes then run
//! `lite-bench`, which measures latency, atomics, uncontended lock/unlock
//! pairs, memset/memcpy throughput, asynchronous write/read throughput, RPC
//! round trips and throughput, the isolation of a high-priority process's
//! writes from low-priority processes saturating the link, with QoS off
//! and on, and last how many memory regions node 2 registers as its live
//! LMRs grow from 1 to 1000 (they must follow the pool's memory, not the
//! LMR count). A second, short phase boots [`LOCK_NODES`] VMs that all
//! take turns on one lock. A last phase boots [`FAILURE_NODES`] VMs that
//! run the failure test's program alone: the last node is killed once the
//! others depend on it, and the survivors report how long their calls
//! waiting on it stalled, then one of them leaves and joins again ten
//! times. Then clusters of 2 and 4 VMs run the paper's applications
//! (LITE-Log, LITE-MapReduce, LITE-Graph) over LITE, over TCP and alone
//! ([`apps`]). Absolute numbers under TCG say little, so the
//! report compares LITE with native verbs measured on the same VMs in the
//! same run (an RPC round trip with two `ib_send_lat` one-way latencies,
//! since perftest reports half a round trip), and loaded latency with
//! unloaded latency. Every number printed is parsed from the guests' output.
//!
//! [`run`] boots the clusters and collects their console logs, [`parse`]
//! turns those logs into typed measurements, and [`report`] computes
//! medians and spreads and prints the tables.

mod apps;
mod parse;
mod report;
mod run;

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::{failure, interrupt};

use self::parse::Measurements;

/// Message sizes measured, in bytes.
pub const SIZES: [u64; 5] = [8, 64, 512, 4096, 65536];

/// memset/memcpy sizes, in bytes.
pub const BW_SIZES: [u64; 4] = [4096, 65536, 1 << 20, 4 << 20];

/// Asynchronous write/read sizes, in bytes.
pub const ASYNC_SIZES: [u64; 2] = [4096, 65536];

/// Asynchronous operations kept in flight (perftest's `-t`).
pub const DEPTHS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Size of the asynchronous RPC series (`lite-bench`'s 64-byte RPC
/// throughput size) and of the `ib_send_bw` runs they are compared with.
pub const RPC_ASYNC_SIZE: u64 = 64;

/// Bytes moved per throughput series, LITE's and perftest's alike.
pub const BW_BYTES: u64 = 16 << 20;

/// perftest's `ib_atomic_lat -A` types and the `lite-bench` series each
/// is compared with.
pub const ATOMICS: [(&str, &str); 2] = [
    ("FETCH_AND_ADD", "fetch_add"),
    ("CMP_AND_SWAP", "compare_swp"),
];

/// Nodes of the lock contention phase; every one of them contends.
pub const LOCK_NODES: usize = 4;

/// Nodes of the failure phase: survivors, then the victim (the last).
pub const FAILURE_NODES: usize = failure::NODES;

/// The applications' source files (under `userspace/apps/src/`) holding
/// their LITE code, whose lines the report counts.
const APP_LITE_FILES: [(&str, &str); 3] = [
    ("LITE-Log", "log/lite.rs"),
    ("MapReduce, Graph", "lite_exchange.rs"),
    ("every application", "lite_barrier.rs"),
];

/// `cargo xtask bench`; with `apps_only`, only the application phases.
pub fn run(
    iters: u32,
    apps_only: bool,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<()> {
    let setup = run::Setup::prepare(kernel_src, kernel_image)?;
    let mut m = Measurements::default();
    let mut waits = Vec::new();
    if !apps_only {
        let comparison = run::comparison_phase(&setup, iters)?;
        m.add_logs("", &comparison.logs);
        report::say_comparison(iters, &m);
        waits.push(comparison.waited);

        // The contention phase: a cluster of its own, short.
        let lock_iters = run::lock_iters(iters);
        let lock_waited = interrupt::check()
            .and_then(|()| run::lock_phase(&setup, lock_iters))
            .and_then(|phase| {
                m.add_logs("locks/", &phase.logs);
                phase.waited
            });
        report::say_locks(iters, lock_iters, &m);
        waits.push(lock_waited.context("the lock contention phase"));

        // The failure phase: four VMs again, the last of them killed.
        let failure_waited = interrupt::check()
            .and_then(|()| run::failure_phase(&setup))
            .and_then(|phase| {
                m.add_failure_logs("failure/", &phase.logs, FAILURE_NODES);
                phase.waited
            });
        report::say_failure(&m);
        waits.push(failure_waited.context("the failure phase"));
    }

    // The applications: a cluster per size, each version in turn.
    let mut app_runs = Vec::new();
    for nodes in apps::APP_NODES {
        let waited = interrupt::check()
            .and_then(|()| apps::phase(&setup, nodes))
            .and_then(|phase| {
                m.add_logs(&format!("apps{nodes}/"), &phase.logs);
                for log in &phase.logs {
                    app_runs.extend(apps::parse_app_runs(&log.text, nodes));
                }
                phase.waited
            });
        waits.push(waited.with_context(|| format!("the {nodes}-node application phase")));
    }
    apps::say(&app_runs, &APP_LITE_FILES);

    report::say_logs(&setup.logs, &m.problems);
    waits.into_iter().collect::<Result<Vec<()>>>()?;
    if app_runs.is_empty() {
        bail!("no application run reported a result");
    }
    if !apps_only && m.is_empty() {
        bail!("no measurements found in the guest logs");
    }
    if !m.problems.is_empty() {
        bail!(
            "the benchmark run had {} problems (see above)",
            m.problems.len()
        );
    }
    Ok(())
}
