//! The process curve: aggregate 64-byte write and RPC throughput of 1 to
//! many processes on one node, all sharing the node's LITE connections.
//!
//! Each step starts its processes (`lite-bench __process WORKLOAD NODE
//! ITERS`), lets each warm up, starts them together and times until the
//! last one finished; each process checks the data it moved. The queue
//! pairs and memory regions LITE holds on this node are read once the
//! processes are warmed up: LITE needs none per process, where the native
//! baseline (`lite-verbs-bench --processes`) opens one queue pair and
//! registers its memory regions in every process.

use std::fmt::Display;
use std::io::BufRead;

use lite::Priority;
use lite_bench_record::Record;
use lite_tools::bench::{emit, process_record, ProcessWorkload};
use lite_tools::stats::monotonic_ns;
use lite_tools::{pattern, say};

use super::piped::Piped;
use super::{
    alloc, echo_call, failed, free, micros_since, read_region_counters, verify_lmr,
    wait_for_server, WARMUP_OPS,
};

/// The subcommand of one process of the curve.
pub(crate) const PROCESS_SUBCOMMAND: &str = "__process";

/// Size of the curve's operations and of each process's LMR.
const OP_SIZE: usize = 64;

/// Runs every step: each workload with each of `counts` processes making
/// `iters` operations, against node `node`.
pub(crate) fn measure(node: u32, counts: &[usize], iters: usize) -> Result<(), String> {
    wait_for_server(node)?;
    say(format_args!(
        "lite-bench: process curve against node {node}: {counts:?} processes, \
         {iters} operations each"
    ));
    for workload in [ProcessWorkload::Write, ProcessWorkload::Rpc] {
        for &count in counts {
            emit(&step(workload, node, count, iters)?);
        }
    }
    Ok(())
}

/// One step: `count` processes, started together once all are warmed up.
fn step(
    workload: ProcessWorkload,
    node: u32,
    count: usize,
    iters: usize,
) -> Result<Record, String> {
    let mut workers = Vec::with_capacity(count);
    for _ in 0..count {
        workers.push(spawn_worker(workload, node, iters)?);
    }
    for worker in &mut workers {
        worker.expect("ready")?;
    }
    let stats = lite::stats().map_err(failed("get_stats"))?;
    let [_, memory_regions, _, _] = read_region_counters()?;
    let began = monotonic_ns();
    for worker in &mut workers {
        worker.send("go")?;
    }
    let mut slowest_us: f64 = 0.0;
    for worker in &mut workers {
        let line = worker.next_line()?;
        let took = line
            .strip_prefix("done ")
            .and_then(|us| us.parse::<f64>().ok())
            .ok_or_else(|| format!("a {} process said \"{line}\"", workload.name()))?;
        slowest_us = slowest_us.max(took);
    }
    let elapsed_us = micros_since(began);
    for mut worker in workers {
        worker.finish()?;
    }
    Ok(process_record(
        workload,
        OP_SIZE as u64,
        (count, iters),
        (elapsed_us, slowest_us),
        (stats.connections, memory_regions),
    ))
}

/// One process of a step.
fn spawn_worker(workload: ProcessWorkload, node: u32, iters: usize) -> Result<Piped, String> {
    let args: [&dyn Display; 3] = [&workload.name(), &node, &iters];
    Piped::spawn_self(PROCESS_SUBCOMMAND, &args, "a process of the curve", false)
}

/// `lite-bench __process write|rpc NODE ITERS`: one process of the curve.
/// Says `ready` once warmed up, waits for `go` on stdin, then says `done
/// MICROSECONDS` (or `fail REASON`).
pub(crate) fn process_main(args: &[String]) -> Result<String, String> {
    let parsed = match args {
        [workload, node, iters] => ProcessWorkload::from_name(workload)
            .zip(node.parse::<u32>().ok())
            .zip(iters.parse::<usize>().ok().filter(|&n| n > 0)),
        _ => None,
    };
    let ((workload, node), iters) = parsed
        .ok_or_else(|| format!("usage: lite-bench {PROCESS_SUBCOMMAND} write|rpc NODE ITERS"))?;
    run_process(workload, node, iters).map(|took_us| format!("done {took_us:.2}"))
}

/// Warms up, says `ready`, waits for `go`, and returns how long `iters`
/// operations took in microseconds.
fn run_process(workload: ProcessWorkload, node: u32, iters: usize) -> Result<f64, String> {
    let seed = pattern::seed(&[
        u64::from(node),
        OP_SIZE as u64,
        u64::from(std::process::id()),
    ]);
    let mut data = [0u8; OP_SIZE];
    pattern::fill(seed, 0, &mut data);
    let mut back = [0u8; OP_SIZE];
    let lmr = match workload {
        ProcessWorkload::Write => Some(alloc(node, OP_SIZE as u64)?),
        ProcessWorkload::Rpc => None,
    };
    // Every reply is checked: another process's would differ.
    let mut operation = || match &lmr {
        Some(lmr) => lmr
            .write(0, &data, Priority::None)
            .map_err(failed(format_args!("write of {OP_SIZE} B"))),
        None => {
            pattern::poison(seed, 0, &mut back);
            echo_call(node, &data, &mut back)?;
            pattern::verify(seed, 0, &back).map_err(|m| format!("wrong RPC reply: {m}"))
        }
    };
    (0..WARMUP_OPS).try_for_each(|_| operation())?;
    say(format_args!("ready"));
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut go)
        .map_err(|e| format!("waiting for the start: {e}"))?;
    if go.trim_end() != "go" {
        return Err("the step ended before it started".into());
    }
    let began = monotonic_ns();
    (0..iters).try_for_each(|_| operation())?;
    let took_us = micros_since(began);
    if let Some(lmr) = lmr {
        verify_lmr(&lmr, OP_SIZE, Priority::None, seed, "writes")?;
        free(lmr)?;
    }
    Ok(took_us)
}
