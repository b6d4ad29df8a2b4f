//! `cargo xtask bench`: LITE's latency and throughput against native verbs,
//! its atomics and locks, priority isolation, failure handling, the memory
//! region, process and cluster-size curves and the paper's applications,
//! each [`Part`] in clusters of VMs of its own (`--only` picks some), in the
//! order of [`fn@run`], whose phases [`mod@run`] describes. Every number
//! printed is parsed from the guests' output.
//!
//! [`run`] boots the clusters and collects their console logs, [`parse`]
//! turns those logs into typed measurements, [`report`] and [`rounds`]
//! compute medians and spreads and print the tables, [`figures`] writes
//! them as JSON (and compares two runs) and [`charts`] draws them.

mod apps;
mod charts;
mod cluster_scale;
mod dsm;
mod figures;
mod isolation;
mod parse;
mod process_curve;
mod region_curve;
mod report;
mod rounds;
mod run;

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::{failure, interrupt, ui};

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

/// Nodes contending for one lock in the largest lock contention phase.
pub const LOCK_CONTENDERS: usize = 4;

/// Contending nodes of the lock contention phases, each beside the node
/// keeping the lock: throughput with the most must not fall below that
/// with the fewest.
pub const CONTENDERS: [usize; 2] = [2, LOCK_CONTENDERS];

/// Rounds of the lock contention phases: with few contenders the lock is
/// free or queued by the timing of each run, so one run's throughput
/// wanders by half from run to run.
pub const LOCK_ROUNDS: u32 = 3;

/// Nodes of the failure phase: survivors, then the victim (the last).
pub const FAILURE_NODES: usize = failure::NODES;

/// The applications' source files (under `userspace/apps/src/`) holding
/// their LITE code, whose lines the report counts.
const APP_LITE_FILES: [(&str, &str); 5] = [
    ("LITE-Log", "log/lite.rs"),
    ("MapReduce, Graph", "lite_exchange.rs"),
    ("Graph-DSM", "dsm_exchange.rs"),
    ("Graph-DSM", "graph/shared.rs"),
    ("every application", "lite_barrier.rs"),
];

/// The parts of the benchmark `--only` selects, each measured in its own
/// phase (the first two share the comparison phase's two VMs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Part {
    /// The interleaved rounds of LITE and the native verbs baseline:
    /// write, read, atomics and RPC round trips.
    Latency,
    /// perftest and every other `lite-bench` series: throughput, RPC
    /// throughput, asynchronous RPC, isolation, memory regions, LITE-DSM's
    /// page throughput.
    Comparison,
    /// LITE-DSM's page faults beside LITE reads of a page, in rounds, on
    /// [`run::DSM_NODES`] VMs of their own.
    Dsm,
    /// Lock/unlock, uncontended and with 2 and [`LOCK_CONTENDERS`] nodes
    /// contending.
    Locks,
    /// The failure phase.
    Failure,
    /// The memory region curve, LITE beside native verbs.
    Regions,
    /// The process curve, LITE beside native verbs.
    Processes,
    /// The cluster-size curve: 2, 4 and 8 nodes.
    Cluster,
    /// The paper's applications.
    Apps,
}

/// What `cargo xtask bench` measures and where it reports.
pub struct Options {
    /// Operations per series of the one-off series.
    pub iters: u32,
    /// Interleaved rounds of the latency comparison and of the isolation
    /// run.
    pub rounds: u32,
    /// Operations per series in each round.
    pub round_iters: u32,
    /// The parts to measure; empty for all.
    pub only: Vec<Part>,
    /// Where the figures (JSON) and charts go; a new directory under the
    /// cache when not given.
    pub report: Option<std::path::PathBuf>,
}

impl Options {
    fn runs(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }
}

/// `cargo xtask bench --compare OLD NEW`.
pub fn compare(old: &Path, new: &Path) -> Result<()> {
    figures::compare(old, new)
}

/// Writes the run's figures (`bench.json`), its charts (SVG and PNG) and a
/// Markdown summary showing them with the verdicts, into `--report DIR` or
/// a new directory under the cache, and names the directory.
fn write_report(
    options: &Options,
    m: &Measurements,
    app_runs: &[apps::AppRun],
    elapsed: std::time::Duration,
) -> Result<()> {
    let finished_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dir = match &options.report {
        Some(dir) => dir.clone(),
        None => crate::paths::Cache::locate()?
            .root()
            .join("bench-reports")
            .join(finished_unix.to_string()),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let verdicts = report::verdict_lines(m);
    let report = figures::Report {
        format: figures::FORMAT,
        finished_unix,
        duration_s: elapsed.as_secs_f64(),
        verdicts: verdicts.clone(),
        figures: figures::collect(m, app_runs),
    };
    let json = dir.join("bench.json");
    figures::write(&report, &json)?;

    let (lines, ranges) = charts::charts(m);
    let mut summary = format!(
        "# LITE benchmark\n\n{} figures in `bench.json`; the run took {}.\n\n## Verdicts\n\n",
        report.figures.len(),
        ui::duration(elapsed)
    );
    for verdict in &verdicts {
        summary.push_str(&format!("- {verdict}\n"));
    }
    for chart in &ranges {
        chart.draw(&dir)?;
        summary.push_str(&format!(
            "\n## {}\n\n{}\n\n![{0}]({}.svg)\n",
            chart.title, chart.caption, chart.name
        ));
    }
    for chart in &lines {
        chart.draw(&dir)?;
        summary.push_str(&format!(
            "\n## {}\n\n![{0}]({}.svg)\n",
            chart.title, chart.name
        ));
    }
    let summary_path = dir.join("summary.md");
    std::fs::write(&summary_path, summary)
        .with_context(|| format!("cannot write {}", summary_path.display()))?;
    ui::say(&format!(
        "==> report: {} (figures in bench.json, {} charts as SVG and PNG, summary.md)",
        dir.display(),
        lines.len() + ranges.len()
    ));
    Ok(())
}

/// Runs one phase unless the run was interrupted, and hands its guests'
/// logs to `file`; whether every guest finished.
fn run_phase(
    start: impl FnOnce() -> Result<run::Phase>,
    file: impl FnOnce(&[run::NodeLog]),
) -> Result<()> {
    let phase = interrupt::check().and_then(|()| start())?;
    file(&phase.logs);
    phase.waited
}

/// `cargo xtask bench`.
pub fn run(
    options: &Options,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<()> {
    let started = std::time::Instant::now();
    let setup = run::Setup::prepare(kernel_src, kernel_image)?;
    let iters = options.iters;
    let mut m = Measurements::default();
    let mut waits = Vec::new();
    if options.runs(Part::Latency) || options.runs(Part::Comparison) {
        let plan = run::ComparisonPlan {
            iters,
            rounds: if options.runs(Part::Latency) {
                options.rounds
            } else {
                0
            },
            round_iters: options.round_iters,
            isolation_rounds: options.rounds,
            full: options.runs(Part::Comparison),
        };
        let comparison = run::comparison_phase(&setup, plan)?;
        m.add_logs("", &comparison.logs);
        if options.runs(Part::Latency) {
            report::say_rounds(options.rounds, options.round_iters, &m);
        }
        if options.runs(Part::Comparison) {
            report::say_comparison(iters, &m);
        }
        waits.push(comparison.waited);
    }
    if options.runs(Part::Dsm) {
        let waited = run_phase(
            || run::dsm_phase(&setup, options.rounds, options.round_iters),
            |logs| m.add_logs("dsm/", logs),
        );
        dsm::say(options.rounds, options.round_iters, &m);
        waits.push(waited.context("the LITE-DSM phase"));
    }
    if options.runs(Part::Locks) {
        // The contention phases: a cluster of their own each, short, in
        // turn for every round.
        let lock_iters = run::lock_iters(iters);
        for round in 1..=LOCK_ROUNDS {
            for contenders in CONTENDERS {
                let lock_waited = run_phase(
                    || run::lock_phase(&setup, contenders, round, lock_iters),
                    |logs| {
                        let prefix = run::lock_phase_name(contenders, round);
                        m.add_logs(&format!("{prefix}/"), logs);
                        m.add_lock_round(contenders as u32, logs);
                    },
                );
                waits.push(lock_waited.with_context(|| {
                    format!("round {round} of the lock contention phase of {contenders} nodes")
                }));
            }
        }
        report::say_locks(iters, lock_iters, &m);
    }
    if options.runs(Part::Failure) {
        // The failure phase: four VMs again, the last of them killed.
        let failure_waited = run_phase(
            || run::failure_phase(&setup),
            |logs| m.add_failure_logs("failure/", logs, FAILURE_NODES),
        );
        report::say_failure(&m);
        waits.push(failure_waited.context("the failure phase"));
    }
    if options.runs(Part::Regions) {
        // Two VMs of their own, with room for 100k regions and a 1 GiB one.
        let waited = run_phase(
            || run::regions_phase(&setup, iters),
            |logs| m.add_logs("regions/", logs),
        );
        region_curve::say(iters, &m);
        waits.push(waited.context("the memory region phase"));
    }
    if options.runs(Part::Processes) {
        let step_ops = run::process_step_ops(iters);
        let waited = run_phase(
            || run::processes_phase(&setup, step_ops),
            |logs| m.add_logs("processes/", logs),
        );
        process_curve::say(step_ops, run::PROCESS_ROUNDS, &m);
        waits.push(waited.context("the process curve phase"));
    }
    if options.runs(Part::Cluster) {
        let barriers = run::scale_barriers(iters);
        for nodes in run::CLUSTER_SIZES {
            let waited = run_phase(
                || run::cluster_phase(&setup, nodes, barriers),
                |logs| m.add_logs(&format!("cluster{nodes}/"), logs),
            );
            waits.push(waited.with_context(|| format!("the {nodes}-node cluster-size phase")));
        }
        cluster_scale::say(barriers, run::SCALE_CALLS, &m);
    }

    // The applications: a cluster per size, each version in turn.
    let mut app_runs = Vec::new();
    if options.runs(Part::Apps) {
        for nodes in apps::APP_NODES {
            let waited = run_phase(
                || apps::phase(&setup, nodes),
                |logs| {
                    m.add_logs(&format!("apps{nodes}/"), logs);
                    for log in logs {
                        app_runs.extend(apps::parse_app_runs(&log.text, nodes));
                    }
                },
            );
            waits.push(waited.with_context(|| format!("the {nodes}-node application phase")));
        }
        apps::say(&app_runs, &APP_LITE_FILES);
    }

    report::say_logs(&setup.logs, &m.problems);
    let elapsed = started.elapsed();
    let written = write_report(options, &m, &app_runs, elapsed);
    ui::say(&format!("==> the benchmark took {}", ui::duration(elapsed)));
    written?;
    waits.into_iter().collect::<Result<Vec<()>>>()?;
    if options.runs(Part::Apps) && app_runs.is_empty() {
        bail!("no application run reported a result");
    }
    // Every part but the applications leaves its measurements in `m`.
    let measured_in_vms = <Part as clap::ValueEnum>::value_variants()
        .iter()
        .any(|&part| part != Part::Apps && options.runs(part));
    if measured_in_vms && m.is_empty() {
        bail!("no measurements found in the guest logs");
    }
    if options.runs(Part::Regions) && m.region_curve.is_empty() {
        bail!("no memory region curve found in the guest logs");
    }
    if options.runs(Part::Cluster) && m.cluster_scale.is_empty() {
        bail!("no cluster-size curve found in the guest logs");
    }
    if options.runs(Part::Processes) && m.process_curve.is_empty() {
        bail!("no process curve found in the guest logs");
    }
    if options.runs(Part::Dsm) && m.dsm_rounds.is_empty() {
        bail!("no LITE-DSM round found in the guest logs");
    }
    if options.runs(Part::Latency) && rounds::figures(&m.rounds).is_empty() {
        bail!("no interleaved round reported both LITE and the native verbs baseline");
    }
    if !m.problems.is_empty() {
        bail!(
            "the benchmark run had {} problems (see above)",
            m.problems.len()
        );
    }
    Ok(())
}
