//! `lite-bench`: latency and throughput of LITE operations between two
//! nodes, atomics, locks, RPC, kernel messages, the isolation of
//! high-priority operations, the memory regions a node registers as its
//! live LMRs grow and LITE-DSM's page throughput, in the order [`run`]
//! takes them; each `measure_*` function says what it times.
//!
//! Both nodes run it. The node that holds the memory (node 1 by default)
//! only waits (and serves the RPC echo port); the other allocates LMRs
//! there and measures. `--series latency` measures only the latency series
//! and RPC round trips: one round of the interleaved comparison with the
//! native verbs baseline, which with `--baseline COMMAND` this program
//! starts itself and takes turns with within every series (`baseline.rs`).
//! `--series regions` measures the memory region curve (random LMRs in
//! blocks taking turns with blocks on the first, so that the cost of many
//! LMRs is a ratio of series measured in the same minutes), `--series
//! processes` the process curve (`process_curve.rs`), `--scale N` one step
//! of the cluster-size curve (`cluster_scale.rs`), `--contend N` a lock
//! kept by node 1 that the N - 1 other nodes take turns on (the home does
//! not contend: its own threads take its locks with no message at all),
//! and `--dsm N` LITE-DSM's page faults in rounds (`dsm.rs`).
//!
//! Every result is one record of `lite_bench_record` on a line of its own;
//! throughputs are MiB/s (perftest's MB/sec), total bytes over total time,
//! with a spread over single operations or over up to 10 consecutive groups
//! of completions. Every series checks the data it moved afterwards. The
//! run ends with `LITE-BENCH: ok` or `LITE-BENCH: FAILED <reason>`.

use std::fmt::Display;
use std::io::ErrorKind;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libc::{c_long, c_void};
use lite::rpc::{self, Port, Received};
use lite::sync::{AtomicLmr, Lock, LockGuard};
use lite::{sys, Lmr, Priority};
use lite_bench_record::{self as record, LockSamples, Record};
use lite_tools::bench::{
    calls_per_thread, completion_groups, emit, latency, lock_record, qos_records, region_record,
    rpc_throughput, run_window, throughput_iters, throughput_of_completions, throughput_of_ops,
    to_first_region, LoadReport, Operation, QosPhase, QosStep, Series,
};
use lite_tools::debugfs::{self, DEBUGFS_DIR};
use lite_tools::errno::{describe_error, describe_result};
use lite_tools::fuzz::rng::Rng;
use lite_tools::kernel_message_module as kernel_messages;
use lite_tools::resources::{self, RESOURCES_FILE};
use lite_tools::stats::{monotonic_ns, time_us};
use lite_tools::{join_cluster, pattern, say, Membership};

mod baseline;
mod cluster_scale;
mod dsm;
mod options;
mod piped;
mod process_curve;

use baseline::{Baseline, Side};
use options::{parse_options, Options, CLI};
use piped::Piped;

/// Nodes taking part: the one holding the memory and the one measuring.
const BENCH_NODES: u32 = 2;

/// Untimed operations in each direction before measuring, so that first
/// use costs (connection warm-up, page faults) stay out of the numbers.
const WARMUP_OPS: usize = 10;

/// Smallest LMR allocated; larger sizes get an LMR of their size.
const MIN_LMR_SIZE: u64 = 64 * 1024;

/// Largest size accepted, so the buffers fit a small machine.
const MAX_SIZE: u64 = 64 << 20;

/// Password of the benchmark LMR ("bench" in ASCII).
const PASSWORD: u64 = 0x62_656e_6368;

/// Fewest operations in a throughput series (unless `--iters` is lower).
const MIN_THROUGHPUT_OPS: usize = 8;

/// Untimed operations before each throughput series.
const THROUGHPUT_WARMUP_OPS: usize = 2;

/// Port of the RPC echo server on the memory node.
const RPC_PORT: u32 = 20;

/// Request size of the RPC throughput series.
const RPC_THROUGHPUT_SIZE: u64 = 64;

/// How long the measuring node waits for the RPC server to open its port.
const RPC_SERVER_WAIT: Duration = Duration::from_secs(60);

/// Size of the LMR the atomics work on (what `LITE_ALLOC_ATOMIC` requires).
const ATOMIC_SIZE: u64 = 8;

/// Name under which the home node publishes the contended lock's number
/// and the counter that checks mutual exclusion ("lock" in ASCII).
const LOCK_NAME: u64 = 0x6c6f_636b;

/// Rounds each contending node increments the shared counter under the
/// lock, after the timed pairs.
const LOCK_CHECK_ROUNDS: u64 = 10;

/// Size of the high-priority writes of the isolation run.
const QOS_SIZE: u64 = 64;

/// Size of each low-priority write of the isolation run.
const QOS_LOAD_SIZE: u64 = 64 * 1024;

/// How long the low-priority load runs before the timed writes start.
const QOS_SETTLE: Duration = Duration::from_millis(200);

/// The QoS switch (debugfs): `1` on, `0` off.
const QOS_ENABLED: &str = "/sys/kernel/debug/lite/qos_enabled";

/// This node's view of the cluster (debugfs): its alive peers.
const MEMBERSHIP: &str = "/sys/kernel/debug/lite/membership";

/// The steps of the memory region series: the size of the LMRs alive and
/// how many; those of another size are freed first.
const REGION_STEPS: [(u64, usize); 5] = [
    (4096, 1),
    (4096, 10),
    (4096, 100),
    (4096, 1000),
    (64 * 1024, 100),
];

/// Size of each live LMR of the memory region curve.
const CURVE_LMR_SIZE: u64 = 4096;

/// Size of the operations of the memory region curve.
const CURVE_OP_SIZE: usize = 64;

/// Create/free pairs per size of the memory region curve: fewer for
/// sizes from [`CREATE_LARGE_SIZE`] on (the native baseline's counts).
const CREATE_ITERS_SMALL: usize = 20;
const CREATE_ITERS_LARGE: usize = 3;
const CREATE_LARGE_SIZE: u64 = 16 << 20;

/// First argument that makes the program a low-priority load process of
/// the isolation run: `lite-bench __qos-load NODE SIZE`.
const LOAD_SUBCOMMAND: &str = "__qos-load";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The processes this program starts as copies of itself, by their first
    // argument: each says its result, or `fail REASON`, on its last line.
    let helper = match args.split_first() {
        Some((first, rest)) if first == LOAD_SUBCOMMAND => Some(load_process(rest)),
        Some((first, rest)) if first == process_curve::PROCESS_SUBCOMMAND => {
            Some(process_curve::process_main(rest))
        }
        _ => None,
    };
    if let Some(outcome) = helper {
        return say_and_exit(outcome.map_err(|reason| format!("fail {reason}")));
    }
    let options = CLI.config_or_exit(parse_options);
    let outcome = run(&options).map(|()| "LITE-BENCH: ok".to_string());
    say_and_exit(outcome.map_err(|reason| format!("LITE-BENCH: FAILED {reason}")))
}

/// Says the line of `outcome`, and exits with success if it is `Ok`.
fn say_and_exit(outcome: Result<String, String>) -> ExitCode {
    let (line, code) = match outcome {
        Ok(line) => (line, ExitCode::SUCCESS),
        Err(line) => (line, ExitCode::FAILURE),
    };
    say(format_args!("{line}"));
    code
}

fn run(options: &Options) -> Result<(), String> {
    let cm = options.cm;
    let (joined, join_us) = time_us(|| join_cluster(cm));
    let mut join_took = None;
    let me = match joined {
        Ok(Membership::Joined(id)) => {
            join_took = Some(join_us);
            say(format_args!(
                "lite-bench: joined the cluster at {cm} as node {id}"
            ));
            id
        }
        Ok(Membership::AlreadyMember(id)) => {
            say(format_args!("lite-bench: already a member as node {id}"));
            id
        }
        Err(e) => return Err(format!("join {cm}: {}", describe_error(&e))),
    };
    if let Some(nodes) = options.contend {
        return contend(options, me, nodes);
    }
    if let Some(nodes) = options.scale {
        let plan = cluster_scale::Plan {
            nodes,
            me,
            join_us: join_took,
            barriers: options.iters,
            calls: options.scale_calls,
        };
        return cluster_scale::measure(&plan);
    }
    if let Some(nodes) = options.dsm {
        return dsm::measure_rounds(&dsm::Rounds {
            me,
            nodes,
            rounds: options.dsm_rounds,
            iters: options.iters,
            turn_ops: options.turn_ops,
        });
    }
    barrier()?;
    let memory_node = options.peer.resolve(me, || {
        std::fs::read_to_string(MEMBERSHIP).map_err(|e| format!("{MEMBERSHIP}: {e}"))
    })?;
    let options = &Options {
        memory_node,
        ..options.clone()
    };

    if me == options.memory_node {
        say(format_args!(
            "lite-bench: node {me} holds the memory and serves RPC; waiting for the measuring node"
        ));
        let server = if options.series == Series::Regions {
            Ok(None)
        } else {
            RpcServer::start(options)
        };
        let handler = if options.series == Series::All {
            kernel_messages::load(false)
        } else {
            Ok(())
        };
        // The measuring node must not be left waiting, whatever failed.
        let finished = barrier();
        let stopped = server.and_then(|server| server.map_or(Ok(()), RpcServer::stop));
        return stopped.and(handler).and(finished);
    }
    let outcome = match options.series {
        Series::Regions => measure_region_curve(options),
        Series::Processes => {
            process_curve::measure(options.memory_node, &options.process_counts, options.iters)
        }
        Series::Latency => options
            .baseline
            .as_deref()
            .map(|command| Baseline::spawn(command, options.turn_ops))
            .transpose()
            .and_then(|mut baseline| {
                measure(options, &mut baseline)
                    .and_then(|()| measure_atomics(options, &mut baseline))
                    .and_then(|()| measure_rpc_round_trips(options, &mut baseline))
                    .and_then(|()| baseline.map_or(Ok(()), Baseline::finish))
            }),
        Series::All => measure(options, &mut None)
            .and_then(|()| measure_atomics(options, &mut None))
            .and_then(|()| measure_locks(options, me))
            .and_then(|()| measure_memory_ops(options))
            .and_then(|()| measure_async(options))
            .and_then(|()| measure_rpc(options))
            .and_then(|()| measure_kernel_messages(options))
            .and_then(|()| measure_qos(options))
            .and_then(|()| measure_regions(options, me))
            .and_then(|()| dsm::measure_throughput(options.iters)),
    };
    // The memory node must not leave while the other still measures, and
    // the measuring node must release it even after a failure.
    let finished = barrier();
    outcome.and(finished)
}

fn barrier() -> Result<(), String> {
    barrier_of(BENCH_NODES)
}

fn barrier_of(nodes: u32) -> Result<(), String> {
    lite::dist_barrier(nodes).map_err(failed(format_args!("dist_barrier({nodes})")))
}

/// The write series of every size, then the read series (which check what
/// they read against what the writes left).
fn measure(options: &Options, baseline: &mut Option<Baseline>) -> Result<(), String> {
    let (writes, reads) = (
        options.runs(Operation::Write),
        options.runs(Operation::Read),
    );
    if !writes && !reads {
        return Ok(());
    }
    let node = options.memory_node;
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    let lmr_size = largest.max(MIN_LMR_SIZE);
    let lmr = alloc(node, lmr_size)?;
    say(format_args!(
        "lite-bench: measuring against {lmr_size} B on node {node}, {} iterations per series",
        options.iters
    ));

    let seed = pattern::seed(&[u64::from(node), lmr_size]);
    let buffer_len = usize::try_from(largest).map_err(|_| "size too large".to_string())?;
    let mut source = vec![0u8; buffer_len];
    pattern::fill(seed, 0, &mut source);
    let mut sink = vec![0u8; buffer_len];

    let smallest = options.sizes.iter().copied().min().unwrap_or(1) as usize;
    for _ in 0..WARMUP_OPS {
        write(&lmr, &source[..smallest])?;
        read(&lmr, &mut sink[..smallest])?;
    }
    // Bounded by MAX_SIZE when parsed.
    let sizes = options.sizes.iter().map(|&size| (size, size as usize));
    if writes {
        for (size, len) in sizes.clone() {
            let samples = timed_turns(baseline, Operation::Write, size, options.iters, || {
                write(&lmr, &source[..len])
            })?;
            report(Operation::Write, size, &samples)?;
        }
    }
    if reads {
        // What the reads check, written once untimed.
        write(&lmr, &source)?;
        for (size, len) in sizes {
            pattern::poison(seed, 0, &mut sink[..len]);
            let samples = timed_turns(baseline, Operation::Read, size, options.iters, || {
                read(&lmr, &mut sink[..len])
            })?;
            // A fast but wrong read would make the numbers meaningless.
            pattern::verify(seed, 0, &sink[..len])
                .map_err(|m| format!("read of {size} B returned wrong data: {m}"))?;
            report(Operation::Read, size, &samples)?;
        }
    }

    free(lmr)
}

/// Times `iters` runs of `operation`, the series of `kind` at `size` bytes:
/// alone, or with a baseline in blocks taking turns with as many of the
/// baseline's same series.
fn timed_turns(
    baseline: &mut Option<Baseline>,
    kind: Operation,
    size: u64,
    iters: usize,
    mut operation: impl FnMut() -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    let mut samples = Vec::with_capacity(iters);
    match baseline {
        None => time_each(iters, &mut samples, operation)?,
        Some(baseline) => {
            for (side, count) in baseline::schedule(iters, baseline.block) {
                match side {
                    Side::Baseline => baseline.turn(kind, size, count)?,
                    Side::Lite => time_each(count, &mut samples, &mut operation)?,
                }
            }
        }
    }
    Ok(samples)
}

/// Times `count` runs of `operation`, adding their durations in
/// microseconds to `samples`.
fn time_each(
    count: usize,
    samples: &mut Vec<f64>,
    mut operation: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    for _ in 0..count {
        let (result, micros) = time_us(&mut operation);
        result?;
        samples.push(micros);
    }
    Ok(())
}

/// Microseconds from `start` (a [`monotonic_ns`] reading) until now.
fn micros_since(start: u64) -> f64 {
    monotonic_ns().saturating_sub(start) as f64 / 1000.0
}

fn write(lmr: &Lmr, data: &[u8]) -> Result<(), String> {
    lmr.write(0, data, Priority::None)
        .map_err(failed(format_args!("write of {} B", data.len())))
}

fn read(lmr: &Lmr, buf: &mut [u8]) -> Result<(), String> {
    let len = buf.len();
    lmr.read(0, buf, Priority::None)
        .map_err(failed(format_args!("read of {len} B")))
}

/// Reads the first `len` bytes of `lmr` back at `priority` and checks that
/// they are the pattern of `seed`, which `what` wrote: a fast but wrong
/// write would make the numbers meaningless.
fn verify_lmr(
    lmr: &Lmr,
    len: usize,
    priority: Priority,
    seed: u64,
    what: &str,
) -> Result<(), String> {
    let mut back = vec![0u8; len];
    lmr.read(0, &mut back, priority)
        .map_err(failed(format_args!("read back after {what}")))?;
    pattern::verify(seed, 0, &back).map_err(|m| format!("{what} left wrong data: {m}"))
}

/// How a failed LITE call is reported: `what` it was, then its error.
fn failed(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> String {
    move |e| format!("{what}: {}", describe_error(&e))
}

/// A `size`-byte LMR on `node`, with the benchmark's password.
fn alloc(node: u32, size: u64) -> Result<Lmr, String> {
    Lmr::alloc(node, size, 0, PASSWORD)
        .map_err(failed(format_args!("alloc {size} B on node {node}")))
}

fn free(lmr: Lmr) -> Result<(), String> {
    lmr.free().map_err(failed("free"))
}

fn report(operation: Operation, size: u64, samples: &[f64]) -> Result<(), String> {
    let series = latency(operation, size, samples).ok_or("no samples")?;
    emit(&Record::Latency(series));
    Ok(())
}

/// Operations in one throughput series of `size`-byte operations.
fn throughput_ops(options: &Options, size: u64) -> usize {
    throughput_iters(size, options.bw_bytes, MIN_THROUGHPUT_OPS, options.iters)
}

/// Prints a throughput series' record; `None` is a series that failed.
fn report_throughput(throughput: Option<record::Throughput>) -> Result<(), String> {
    let throughput = throughput.ok_or("no usable samples (zero durations)")?;
    emit(&Record::Throughput(throughput));
    Ok(())
}

/// `lite_remote_memset` and `lite_memcpy` throughput. Both LMRs live on the
/// memory node, so the bytes are set and copied there.
fn measure_memory_ops(options: &Options) -> Result<(), String> {
    let Some(largest) = options.bw_sizes.iter().copied().max() else {
        return Ok(());
    };
    let node = options.memory_node;
    let source = alloc(node, largest)?;
    let target = alloc(node, largest)?;
    say(format_args!(
        "lite-bench: memset/memcpy on two {largest} B LMRs on node {node}, {} B per series",
        options.bw_bytes
    ));

    // memcpy copies this pattern from `source`; reading `target` back
    // afterwards proves the copies happened.
    let buffer_len = usize::try_from(largest).map_err(|_| "size too large".to_string())?;
    let seed = pattern::seed(&[u64::from(node), largest, 0x6d63]);
    let mut data = vec![0u8; buffer_len];
    pattern::fill(seed, 0, &mut data);
    write(&source, &data)?;

    for (index, &size) in options.bw_sizes.iter().enumerate() {
        let ops = throughput_ops(options, size);
        // A different byte per size, so an earlier series cannot pass the check.
        let byte = 0x11u8.wrapping_mul((index as u8).wrapping_add(1)) | 0x80;
        let memset = || {
            let set = target.memset(0, size, byte);
            set.map_err(failed(format_args!("memset of {size} B")))
        };
        let samples = timed_series(ops, memset)?;
        let check = &mut data[..size as usize];
        read(&target, check)?;
        if let Some(at) = check.iter().position(|&b| b != byte) {
            return Err(format!(
                "memset of {size} B left byte {at} at {:#04x}, expected {byte:#04x}",
                check[at]
            ));
        }
        report_throughput(throughput_of_ops(Operation::Memset, size, &samples))?;

        let memcpy = || {
            let copied = source.copy_to(0, &target, 0, size);
            copied.map_err(failed(format_args!("memcpy of {size} B")))
        };
        let samples = timed_series(ops, memcpy)?;
        let check = &mut data[..size as usize];
        read(&target, check)?;
        pattern::verify(seed, 0, check)
            .map_err(|m| format!("memcpy of {size} B copied wrong data: {m}"))?;
        report_throughput(throughput_of_ops(Operation::Memcpy, size, &samples))?;
    }

    free(source).and(free(target))
}

/// Runs `operation` untimed a few times, then `ops` times timed; returns
/// the durations in microseconds.
fn timed_series(
    ops: usize,
    mut operation: impl FnMut() -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    (0..THROUGHPUT_WARMUP_OPS).try_for_each(|_| operation())?;
    let mut samples = Vec::with_capacity(ops);
    time_each(ops, &mut samples, operation)?;
    Ok(samples)
}

/// Asynchronous write and read throughput with several operations in
/// flight. Operation slot `i` uses bytes `i * size..` of the LMR and of the
/// local buffers.
fn measure_async(options: &Options) -> Result<(), String> {
    let largest = options.async_sizes.iter().copied().max().unwrap_or(0);
    let max_depth = options.depths.iter().copied().max().unwrap_or(0);
    if largest == 0 || max_depth == 0 {
        return Ok(());
    }
    // Bounded by the largest memset/memcpy size when parsed.
    let span = largest * max_depth as u64;
    let node = options.memory_node;
    let lmr = alloc(node, span)?;
    say(format_args!(
        "lite-bench: asynchronous transfers against {span} B on node {node}, {} B per series",
        options.bw_bytes
    ));

    // The LMR holds the pattern throughout: writes put back what is there.
    let seed = pattern::seed(&[u64::from(node), span, 0x6173]);
    let mut source = vec![0u8; span as usize];
    pattern::fill(seed, 0, &mut source);
    write(&lmr, &source)?;
    let mut sink = vec![0u8; span as usize];

    let outcome = async_series(options, &lmr, seed, &source, &mut sink);
    if outcome.is_err() {
        // run_window reaps what it started; this catches anything else.
        let _ = sys::fence();
    }
    outcome?;
    free(lmr)
}

fn async_series(
    options: &Options,
    lmr: &Lmr,
    seed: u64,
    source: &[u8],
    sink: &mut [u8],
) -> Result<(), String> {
    let (handle, password) = (lmr.handle(), lmr.password());
    let reap = |op: u64| {
        let waited = lite::check(sys::async_wait(op, 0)).map(drop);
        waited.map_err(failed(format_args!("lite_async_wait({op})")))
    };
    let started = |what: &str, size: u64, ret: c_long| {
        u64::try_from(ret)
            .ok()
            .filter(|&op| op > 0)
            .ok_or_else(|| format!("{what} of {size} B: {}", describe_result(ret)))
    };
    for &size in &options.async_sizes {
        for &depth in &options.depths {
            let ops = throughput_ops(options, size);
            // The throughput of `ops` operations that `submit` starts.
            let timed = |kind, submit: &mut dyn FnMut(usize) -> Result<u64, String>| {
                let start = monotonic_ns();
                let done = run_window(ops, depth, submit, reap, monotonic_ns)?;
                let groups = completion_groups(ops, depth);
                let series = (kind, size, depth);
                Ok::<_, String>(throughput_of_completions(series, start, &done, groups))
            };
            let offset = |slot: usize| slot as u64 * size;
            let mut write_one = |slot: usize| {
                let data = &source[offset(slot) as usize..][..size as usize];
                // SAFETY: `data` is valid for reads of `size` bytes, and the
                // kernel copies it before the call returns.
                let ret = unsafe {
                    sys::rdma_write_async(
                        handle,
                        data.as_ptr().cast::<c_void>(),
                        size,
                        offset(slot),
                        sys::PRIORITY_NONE,
                        password,
                    )
                };
                started("write_async", size, ret)
            };
            run_window(THROUGHPUT_WARMUP_OPS, depth, write_one, reap, monotonic_ns)?;
            report_throughput(timed(Operation::WriteAsync, &mut write_one)?)?;

            let used = (ops.min(depth) as u64 * size) as usize;
            // Reads into slots of the buffer at `base`.
            let reader = |base: *mut u8| {
                move |slot: usize| {
                    // SAFETY: slot `slot` of the sink (in bounds: slot < depth
                    // and the buffer has room for the largest depth) stays
                    // allocated and untouched until run_window has reaped
                    // the operation, which is when the kernel stores into
                    // it; run_window reaps every operation it started, also
                    // on errors.
                    let ret = unsafe {
                        sys::rdma_read_async(
                            handle,
                            base.add(offset(slot) as usize).cast::<c_void>(),
                            size,
                            offset(slot),
                            sys::PRIORITY_NONE,
                            password,
                        )
                    };
                    started("read_async", size, ret)
                }
            };
            run_window(
                THROUGHPUT_WARMUP_OPS,
                depth,
                reader(sink.as_mut_ptr()),
                reap,
                monotonic_ns,
            )?;
            pattern::poison(seed, 0, &mut sink[..used]);
            let reads = timed(Operation::ReadAsync, &mut reader(sink.as_mut_ptr()))?;
            // A fast but wrong read would make the numbers meaningless.
            pattern::verify(seed, 0, &sink[..used]).map_err(|m| {
                format!("read_async of {size} B at depth {depth} returned wrong data: {m}")
            })?;
            report_throughput(reads)?;
        }
    }
    // Writes landed where expected (and the reads above saw them).
    verify_lmr(lmr, source.len(), Priority::None, seed, "write_async")
}

/// The RPC echo server of the memory node: a port and the threads that
/// answer every request with its own bytes.
struct RpcServer {
    port: Port,
    threads: Vec<JoinHandle<Result<u64, String>>>,
}

impl RpcServer {
    /// Opens the port and starts the threads; `None` without RPC series.
    fn start(options: &Options) -> Result<Option<RpcServer>, String> {
        let Some(max_size) = options.rpc_max_size() else {
            return Ok(None);
        };
        // One thread per calling thread, or per calling process of the
        // process curve (as the native baseline has one server process
        // per client process).
        let callers = match options.series {
            Series::Processes => &options.process_counts,
            _ => &options.rpc_threads,
        };
        let count = callers.iter().copied().max().unwrap_or(1).max(1);
        RpcServer::open(max_size, count).map(Some)
    }

    /// Opens the port for messages of up to `max_size` bytes and starts
    /// `count` echo threads.
    fn open(max_size: u64, count: usize) -> Result<RpcServer, String> {
        let port = Port::register(RPC_PORT, max_size, "lite-bench-echo").map_err(failed(
            format_args!("register_application(port {RPC_PORT})"),
        ))?;
        // Bounded by MAX_MESSAGE_SIZE when parsed.
        let len = max_size as usize;
        let threads = (0..count)
            .map(|_| std::thread::spawn(move || echo(len)))
            .collect();
        say(format_args!(
            "lite-bench: {count} threads answer RPCs of up to {max_size} B on port {RPC_PORT}"
        ));
        Ok(RpcServer { port, threads })
    }

    /// Closes the port, which ends the threads, and waits for them.
    fn stop(self) -> Result<(), String> {
        let closed = self
            .port
            .unregister()
            .map_err(failed("unregister_application"));
        let mut served = 0;
        let mut outcome = closed;
        for thread in self.threads {
            match thread.join() {
                Ok(Ok(count)) => served += count,
                Ok(Err(e)) => outcome = outcome.and(Err(e)),
                Err(_) => outcome = outcome.and(Err("an RPC server thread panicked".into())),
            }
        }
        say(format_args!("lite-bench: answered {served} RPCs"));
        outcome
    }
}

/// One echo thread: answers each request with its own bytes until the
/// port closes; returns how many it answered. Receives into one buffer
/// while replying from the other.
fn echo(len: usize) -> Result<u64, String> {
    let (mut current, mut next) = (vec![0u8; len], vec![0u8; len]);
    let mut served = 0;
    let mut received = rpc::receive(RPC_PORT, &mut current, false);
    loop {
        received = match received {
            Ok(Received {
                len,
                descriptor: Some(descriptor),
            }) => {
                served += 1;
                let next_message = descriptor
                    .reply_and_receive(&current[..len], RPC_PORT, &mut next, false)
                    .map_err(std::io::Error::from);
                std::mem::swap(&mut current, &mut next);
                next_message
            }
            // Nothing to answer.
            Ok(Received {
                descriptor: None, ..
            }) => rpc::receive(RPC_PORT, &mut current, false),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESHUTDOWN | libc::ENOENT)) => {
                return Ok(served);
            }
            Err(e) => return Err(format!("RPC server: {}", describe_error(&e))),
        };
    }
}

/// Runs `attempt` again every 100 ms while it is refused, for up to
/// [`RPC_SERVER_WAIT`]: the memory node may still be opening what it serves.
fn retry_while_refused<T>(mut attempt: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let deadline = Instant::now() + RPC_SERVER_WAIT;
    loop {
        match attempt() {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            outcome => return outcome,
        }
    }
}

/// Waits until the memory node's RPC port is open.
fn wait_for_server(node: u32) -> Result<(), String> {
    let query = || rpc::query_port(node, RPC_PORT);
    retry_while_refused(query).map_err(failed(format_args!(
        "query_port(node {node}, port {RPC_PORT})"
    )))?;
    Ok(())
}

/// One echo call: `request` out, the same bytes back into `reply`.
fn echo_call(node: u32, request: &[u8], reply: &mut [u8]) -> Result<(), String> {
    let size = request.len();
    let len = rpc::call(node, RPC_PORT, request, reply, Priority::None)
        .map_err(failed(format_args!("RPC of {size} B")))?;
    if len != size {
        return Err(format!("RPC of {size} B got a {len} B reply"));
    }
    Ok(())
}

/// RPC round trip latency, then throughput with several client threads.
fn measure_rpc(options: &Options) -> Result<(), String> {
    if options.rpc_max_size().is_none() {
        return Ok(());
    }
    measure_rpc_round_trips(options, &mut None)?;
    let node = options.memory_node;
    for &threads in &options.rpc_threads {
        rpc_throughput_series(node, threads, calls_per_thread(options.rpc_calls, threads))?;
    }
    let async_depths = options.depths.iter().copied();
    for depth in async_depths.filter(|&d| d <= sys::MAX_ASYNC_CALLS as usize) {
        rpc_async_series(node, depth, options.rpc_calls)?;
    }
    Ok(())
}

/// `--iters` kernel message round trips for every `--rpc-sizes` size up to
/// a send-reply handler's largest reply, each reply checked by the module.
fn measure_kernel_messages(options: &Options) -> Result<(), String> {
    let sizes = options.rpc_sizes.iter().copied();
    let sizes: Vec<u64> = sizes
        .filter(|&size| size <= kernel_messages::MAX_SIZE)
        .collect();
    if sizes.is_empty() {
        return Ok(());
    }
    let node = options.memory_node;
    kernel_messages::load(false)?;
    let round_trips = |size, calls| kernel_messages::round_trips(node, size, calls);
    let what = |size, calls| format!("{calls} kernel messages of {size} B to node {node}");
    // The memory node loads its module while this node starts measuring.
    retry_while_refused(|| round_trips(1, 1)).map_err(failed(what(1, 1)))?;
    say(format_args!(
        "lite-bench: kernel messages to node {node}'s handler, {} round trips per size",
        options.iters
    ));
    let round_trips = |size, calls| round_trips(size, calls).map_err(failed(what(size, calls)));
    for size in sizes {
        round_trips(size, WARMUP_OPS)?;
        report(
            Operation::KernelMessage,
            size,
            &round_trips(size, options.iters)?,
        )?;
    }
    Ok(())
}

/// `--iters` echo round trips for every `--rpc-sizes` size, each reply checked.
fn measure_rpc_round_trips(
    options: &Options,
    baseline: &mut Option<Baseline>,
) -> Result<(), String> {
    if options.rpc_sizes.is_empty() || !options.runs(Operation::Rpc) {
        return Ok(());
    }
    let node = options.memory_node;
    wait_for_server(node)?;
    say(format_args!(
        "lite-bench: RPC to port {RPC_PORT} on node {node}, {} round trips per size",
        options.iters
    ));
    for &size in &options.rpc_sizes {
        // Bounded by MAX_MESSAGE_SIZE when parsed.
        let len = size as usize;
        let seed = pattern::seed(&[u64::from(node), size, 0x7270]);
        let mut request = vec![0u8; len];
        pattern::fill(seed, 0, &mut request);
        let mut reply = vec![0u8; len];
        (0..WARMUP_OPS).try_for_each(|_| echo_call(node, &request, &mut reply))?;
        pattern::poison(seed, 0, &mut reply);
        let samples = timed_turns(baseline, Operation::Rpc, size, options.iters, || {
            echo_call(node, &request, &mut reply)
        })?;
        // A fast but wrong reply would make the numbers meaningless.
        pattern::verify(seed, 0, &reply)
            .map_err(|m| format!("RPC of {size} B got a wrong reply: {m}"))?;
        report(Operation::Rpc, size, &samples)?;
    }
    Ok(())
}

/// Posts an echo call of `request` whose reply goes to `reply` (poisoned
/// first, so a missing reply shows); returns it and when it was posted.
fn post_echo<'a>(
    node: u32,
    request: &[u8],
    reply: &'a mut [u8],
    seed: u64,
) -> Result<(rpc::AsyncCall<'a>, u64), String> {
    pattern::poison(seed, 0, reply);
    let call = rpc::call_async(node, RPC_PORT, request, reply, Priority::None)
        .map_err(failed("call_async"))?;
    Ok((call, monotonic_ns()))
}

/// One thread keeping `depth` 64-byte echo calls in flight with
/// `lite_send_reply_imm_async`, `calls` in all, reaped oldest first; every
/// reply is checked.
fn rpc_async_series(node: u32, depth: usize, calls: usize) -> Result<(), String> {
    let size = RPC_THROUGHPUT_SIZE;
    let seed = pattern::seed(&[u64::from(node), size, 0x6173, depth as u64]);
    let mut request = vec![0u8; size as usize];
    pattern::fill(seed, 0, &mut request);
    let request = &request;
    let mut buffers: Vec<Vec<u8>> = (0..depth).map(|_| vec![0u8; size as usize]).collect();
    let mut samples = Vec::with_capacity(calls);
    let began = monotonic_ns();
    let mut window = std::collections::VecDeque::with_capacity(depth);
    for buffer in buffers.iter_mut().take(calls) {
        window.push_back(post_echo(node, request, buffer, seed)?);
    }
    let mut posted = window.len();
    while let Some((call, start)) = window.pop_front() {
        let (len, reply) = call
            .wait()
            .map_err(failed(format_args!("async RPC with {depth} in flight")))?;
        samples.push(micros_since(start));
        if len != size as usize {
            return Err(format!("async RPC of {size} B got a {len} B reply"));
        }
        pattern::verify(seed, 0, reply).map_err(|m| format!("async RPC got a wrong reply: {m}"))?;
        if posted < calls {
            window.push_back(post_echo(node, request, reply, seed)?);
            posted += 1;
        }
    }
    let elapsed_us = micros_since(began);
    let series = (size, 1, Some(depth));
    emit(&rpc_throughput(series, &samples, elapsed_us).ok_or("async RPC: no usable samples")?);
    Ok(())
}

/// `threads` threads making `calls` echo calls each, started together.
fn rpc_throughput_series(node: u32, threads: usize, calls: usize) -> Result<(), String> {
    let start = std::sync::Barrier::new(threads + 1);
    let (results, elapsed_us) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let start = &start;
                scope.spawn(move || {
                    let size = RPC_THROUGHPUT_SIZE;
                    let seed = pattern::seed(&[u64::from(node), size, thread as u64]);
                    let mut request = vec![0u8; size as usize];
                    pattern::fill(seed, 0, &mut request);
                    let mut reply = vec![0u8; size as usize];
                    let warm_up = echo_call(node, &request, &mut reply);
                    // Every thread reaches the start, so nobody waits forever.
                    start.wait();
                    warm_up?;
                    let mut samples = Vec::with_capacity(calls);
                    for _ in 0..calls {
                        pattern::poison(seed, 0, &mut reply);
                        time_each(1, &mut samples, || echo_call(node, &request, &mut reply))?;
                        pattern::verify(seed, 0, &reply)
                            .map_err(|m| format!("RPC got another thread's reply: {m}"))?;
                    }
                    Ok::<_, String>(samples)
                })
            })
            .collect();
        start.wait();
        let began = monotonic_ns();
        let results: Vec<Result<Vec<f64>, String>> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect();
        let elapsed_us = micros_since(began);
        (results, elapsed_us)
    });
    let mut samples = Vec::new();
    for result in results {
        samples.extend(result.map_err(|e| format!("RPC throughput with {threads} threads: {e}"))?);
    }
    let series = (RPC_THROUGHPUT_SIZE, threads, None);
    let record = rpc_throughput(series, &samples, elapsed_us);
    emit(&record.ok_or("RPC throughput: no usable samples")?);
    Ok(())
}

/// `lite_fetch_add` and `lite_compare_swp` latency on an 8-byte LMR on the
/// memory node. Every call's old value is checked: the LMR starts at zero
/// and each call adds one (the swaps replace the value with the next one).
fn measure_atomics(options: &Options, baseline: &mut Option<Baseline>) -> Result<(), String> {
    if !options.runs(Operation::FetchAdd) && !options.runs(Operation::CompareSwp) {
        return Ok(());
    }
    let node = options.memory_node;
    let atomic = AtomicLmr::alloc(node, PASSWORD).map_err(failed(format_args!(
        "alloc {ATOMIC_SIZE} B with LITE_ALLOC_ATOMIC on node {node}"
    )))?;
    say(format_args!(
        "lite-bench: atomics on an {ATOMIC_SIZE} B LMR on node {node}, {} iterations per series",
        options.iters
    ));
    // What the LMR holds; it starts zeroed.
    let mut value = 0u64;
    let mut next = |operation: Operation| {
        let old = match operation {
            Operation::FetchAdd => atomic.fetch_add(1, Priority::None),
            // The value found, whether it was swapped or not.
            _ => atomic
                .compare_swap(value, value + 1, Priority::None)
                .map(|found| found.unwrap_or_else(|old| old)),
        };
        let old = old.map_err(failed(operation))?;
        if old != value {
            return Err(format!("{operation} saw {old}, expected {value}"));
        }
        value += 1;
        Ok(())
    };
    for operation in [Operation::FetchAdd, Operation::CompareSwp] {
        if !options.runs(operation) {
            continue;
        }
        (0..WARMUP_OPS).try_for_each(|_| next(operation))?;
        let samples = timed_turns(baseline, operation, ATOMIC_SIZE, options.iters, || {
            next(operation)
        })?;
        report(operation, ATOMIC_SIZE, &samples)?;
    }
    let mut check = [0u8; ATOMIC_SIZE as usize];
    atomic
        .lmr()
        .read(0, &mut check, Priority::None)
        .map_err(failed("read of the atomic LMR"))?;
    let held = u64::from_ne_bytes(check);
    if held != value {
        return Err(format!(
            "the atomic LMR holds {held} after {value} increments"
        ));
    }
    free(atomic.into_lmr())
}

fn create_lock(home: u32) -> Result<Lock, String> {
    Lock::create(home).map_err(failed(format_args!("create_lock(home {home})")))
}

/// Takes `lock`. A previous holder's node that died holding it
/// (`EOWNERDEAD`) is a failure too: no node of the benchmark may die.
fn acquire(lock: &Lock) -> Result<LockGuard<'_>, String> {
    // Described only on a failure: a success is timed.
    let what = || format!("lock({}/{})", lock.home(), lock.number());
    match lock.lock() {
        Ok(guard) if !guard.owner_died() => Ok(guard),
        Ok(_) => Err(format!("{}: its holder's node died", what())),
        Err(e) => Err(format!("{}: {}", what(), describe_error(&e))),
    }
}

fn release(guard: LockGuard<'_>) -> Result<(), String> {
    let lock = *guard.lock();
    let what = format_args!("unlock({}/{})", lock.home(), lock.number());
    guard.unlock().map_err(failed(what))
}

/// Times `pairs` lock/unlock pairs on `lock` as node `node` with
/// `contenders` nodes taking part.
fn time_lock_pairs(
    lock: &Lock,
    pairs: usize,
    contenders: u32,
    node: u32,
) -> Result<(Record, Vec<f64>), String> {
    let mut acquire_us = Vec::with_capacity(pairs);
    let mut pair_us = Vec::with_capacity(pairs);
    let begin = monotonic_ns();
    for _ in 0..pairs {
        let start = monotonic_ns();
        let locked = acquire(lock);
        let acquired = micros_since(start);
        let unlocked = release(locked?);
        let pair = micros_since(start);
        unlocked?;
        acquire_us.push(acquired);
        pair_us.push(pair);
    }
    let busy_us = micros_since(begin);
    let series = lock_record(
        (contenders, node, lock.home()),
        &acquire_us,
        &pair_us,
        busy_us,
    )
    .ok_or("no usable lock samples")?;
    Ok((Record::Lock(series), acquire_us))
}

/// Uncontended lock/unlock pairs on a lock kept by the memory node and on
/// one kept by this node.
fn measure_locks(options: &Options, me: u32) -> Result<(), String> {
    say(format_args!(
        "lite-bench: uncontended lock/unlock, locks kept by node {} and by this node {me}, \
         {} pairs each",
        options.memory_node, options.iters
    ));
    for home in [options.memory_node, me] {
        let lock = create_lock(home)?;
        for _ in 0..WARMUP_OPS {
            release(acquire(&lock)?)?;
        }
        let (series, _) = time_lock_pairs(&lock, options.iters, 1, me)?;
        emit(&series);
    }
    Ok(())
}

/// Steps that every node of a cluster takes together: each runs only if
/// every earlier one succeeded here, and is followed by a barrier that is
/// entered either way, so one node's failure never leaves the others
/// waiting.
struct Steps {
    nodes: u32,
    failure: Option<String>,
}

impl Steps {
    fn step<T>(&mut self, work: impl FnOnce() -> Result<T, String>) -> Option<T> {
        let result = match self.failure {
            None => work().map_err(|e| self.failure = Some(e)).ok(),
            Some(_) => None,
        };
        if let Err(e) = barrier_of(self.nodes) {
            self.failure.get_or_insert(e);
        }
        result
    }

    fn finish(self) -> Result<(), String> {
        self.failure.map_or(Ok(()), Err)
    }
}

/// `--contend`: every one of `nodes` nodes but the memory node takes one
/// lock kept by the memory node `--contend-iters` times, all at once. The
/// home node creates the lock and publishes, under [`LOCK_NAME`], its
/// number (bytes 0..8) and a counter (bytes 8..16); afterwards every node,
/// the home too, increments the counter [`LOCK_CHECK_ROUNDS`] times under
/// the lock, and the home node checks that no increment was lost.
fn contend(options: &Options, me: u32, nodes: u32) -> Result<(), String> {
    let home = options.memory_node;
    let contenders = nodes - 1;
    let mut steps = Steps {
        nodes,
        failure: None,
    };
    // Everyone has joined.
    steps.step(|| Ok(()));
    let created = steps.step(|| {
        if me != home {
            return Ok(None);
        }
        let lock = create_lock(home)?;
        let mut shared = [0u8; 16];
        shared[..8].copy_from_slice(&u64::from(lock.number()).to_le_bytes());
        let lmr = Lmr::wrap(&shared, LOCK_NAME, PASSWORD)
            .map_err(failed("wrap_alloc of the lock's number"))?;
        say(format_args!(
            "lite-bench: lock {} on node {home} for {contenders} contending nodes",
            lock.number()
        ));
        Ok(Some((lock, lmr)))
    });
    let mut ready = steps.step(|| {
        let (lock, lmr) = match created.flatten() {
            Some(created) => created,
            None => {
                let permission = sys::PERM_READ | sys::PERM_WRITE;
                let lmr = Lmr::ask(home, LOCK_NAME, permission, PASSWORD).map_err(failed(
                    format_args!("ask_lmr(node {home}, the lock's name)"),
                ))?;
                let mut number = [0u8; 8];
                lmr.read(0, &mut number, Priority::None)
                    .map_err(failed("read of the lock's number"))?;
                let number = u32::try_from(u64::from_le_bytes(number))
                    .map_err(|_| "the published lock number is out of range".to_string())?;
                let asked = Lock::ask(home, number);
                let what = format_args!("ask_lock(home {home}, number {number})");
                (asked.map_err(failed(what))?, lmr)
            }
        };
        // Only the contenders warm up: the home takes no part in the timing.
        let warmups = if me == home { 0 } else { WARMUP_OPS };
        for _ in 0..warmups {
            release(acquire(&lock)?)?;
        }
        Ok((lock, lmr))
    });
    let measured = steps.step(|| {
        let (lock, _) = ready.as_ref().ok_or("no lock")?;
        if me == home {
            return Ok(());
        }
        let (series, acquired) = time_lock_pairs(lock, options.contend_iters, contenders, me)?;
        emit(&series);
        for samples in LockSamples::split(contenders, me, &acquired) {
            emit(&Record::LockSamples(samples));
        }
        Ok(())
    });
    let incremented = steps.step(|| {
        measured.ok_or("not measured")?;
        let (lock, lmr) = ready.as_ref().ok_or("no lock")?;
        for _ in 0..LOCK_CHECK_ROUNDS {
            let guard = acquire(lock)?;
            let done = increment(lmr);
            release(guard)?;
            done?;
        }
        Ok(())
    });
    let checked = steps.step(|| {
        incremented.ok_or("not incremented")?;
        let (_, lmr) = ready.as_ref().ok_or("no lock")?;
        if me != home {
            return Ok(());
        }
        let count = counter(lmr)?;
        let expected = u64::from(nodes) * LOCK_CHECK_ROUNDS;
        if count != expected {
            return Err(format!(
                "the counter under the lock reached {count}, not {expected}: \
                 the lock did not exclude"
            ));
        }
        say(format_args!(
            "lite-bench: {nodes} nodes incremented the counter under the lock {count} times"
        ));
        Ok(())
    });
    // The mappings go before the home node frees the LMR (when `ready`
    // goes out of scope, after the last barrier).
    steps.step(|| {
        checked.ok_or("not checked")?;
        match ready.take() {
            Some((_, lmr)) if me != home => lmr.unmap().map_err(failed("umap of the lock's LMR")),
            _ => Ok(()),
        }
    });
    steps.finish()
}

/// The counter of the contended lock's LMR.
fn counter(lmr: &Lmr) -> Result<u64, String> {
    let mut bytes = [0u8; 8];
    lmr.read(8, &mut bytes, Priority::None)
        .map_err(failed("read of the counter"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// Adds one to the counter (read, then write: only correct under the lock).
fn increment(lmr: &Lmr) -> Result<(), String> {
    let next = counter(lmr)? + 1;
    lmr.write(8, &next.to_le_bytes(), Priority::None)
        .map_err(failed("write of the counter"))
}

/// Sets the calling process's default priority; returns the previous one.
fn set_priority(priority: Priority) -> Result<Priority, String> {
    lite::sync::set_priority(priority).map_err(failed(format_args!("set_priority({priority:?})")))
}

/// Whether QoS is on ([`QOS_ENABLED`]).
fn qos_enabled() -> Result<bool, String> {
    let text = std::fs::read_to_string(QOS_ENABLED).map_err(|e| format!("{QOS_ENABLED}: {e}"))?;
    match debugfs::parse_qos(&text) {
        Ok(on @ (0 | 1)) => Ok(on == 1),
        _ => Err(format!("{QOS_ENABLED} holds {:?}", text.trim())),
    }
}

/// Turns QoS on or off and checks that it took.
fn set_qos(on: bool) -> Result<(), String> {
    std::fs::write(QOS_ENABLED, if on { "1" } else { "0" })
        .map_err(|e| format!("writing {QOS_ENABLED}: {e}"))?;
    match qos_enabled()? {
        now if now == on => Ok(()),
        _ => Err(format!("{QOS_ENABLED} did not change")),
    }
}

/// The node's count of throttled low-priority operations.
fn throttled() -> Result<u64, String> {
    lite::stats()
        .map(|s| s.qos_throttled)
        .map_err(failed("get_stats"))
}

/// The isolation run: this process, at high priority, times 64-byte writes
/// to the memory node alone and while `--qos-loaders` low-priority
/// processes write 64 KiB there in a loop. The unloaded and the loaded
/// phase with QoS on alternate for `--qos-rounds` rounds, so each round's
/// ratio compares phases measured on the same machine a moment apart; the
/// first round also measures the load with QoS off.
fn measure_qos(options: &Options) -> Result<(), String> {
    if options.qos_loaders == 0 {
        return Ok(());
    }
    let node = options.memory_node;
    let initial = qos_enabled()?;
    let lmr = alloc(node, QOS_SIZE)?;
    let previous = set_priority(Priority::High)?;
    say(format_args!(
        "lite-bench: isolation: {} rounds of {} high-priority {QOS_SIZE} B writes to node {node} \
         per phase; load: {} low-priority processes writing {QOS_LOAD_SIZE} B",
        options.qos_rounds, options.iters, options.qos_loaders
    ));
    let outcome = (1..=options.qos_rounds)
        .flat_map(|round| {
            // Odd rounds start unloaded, even ones loaded, so that neither
            // phase always runs first; the load with QoS off comes last in
            // round 1, after its two phases with QoS on.
            let (first, second) = if round % 2 == 1 {
                (QosPhase::Unloaded, QosPhase::Loaded)
            } else {
                (QosPhase::Loaded, QosPhase::Unloaded)
            };
            let off = (round == 1).then_some((QosPhase::Loaded, false));
            [Some((first, true)), Some((second, true)), off]
                .into_iter()
                .flatten()
                .map(move |(phase, qos)| QosStep { round, phase, qos })
        })
        .try_for_each(|step| qos_phase(options, &lmr, step));
    let restored = set_qos(initial);
    let reset = set_priority(previous).map(drop);
    outcome.and(restored).and(reset)?;
    free(lmr)
}

fn qos_phase(options: &Options, lmr: &Lmr, step: QosStep) -> Result<(), String> {
    set_qos(step.qos)?;
    // A pattern of its own per phase, so the check sees this phase's writes.
    let loaded = step.phase == QosPhase::Loaded;
    let seed = pattern::seed(&[
        u64::from(options.memory_node),
        QOS_SIZE,
        u64::from(step.qos),
        u64::from(loaded),
        u64::from(step.round),
    ]);
    let mut data = vec![0u8; QOS_SIZE as usize];
    pattern::fill(seed, 0, &mut data);
    let write_high = || {
        lmr.write(0, &data, Priority::High)
            .map_err(failed("high-priority write"))
    };
    let mut loaders = Vec::new();
    if loaded {
        for _ in 0..options.qos_loaders {
            loaders.push(spawn_loader(options.memory_node)?);
        }
        for loader in &mut loaders {
            loader.expect("ready")?;
        }
        std::thread::sleep(QOS_SETTLE);
    }
    (0..WARMUP_OPS).try_for_each(|_| write_high())?;
    let before = throttled()?;
    let mut samples = Vec::with_capacity(options.iters);
    time_each(options.iters, &mut samples, write_high)?;
    let after = throttled()?;
    loaders.iter_mut().for_each(Piped::close);
    let load = loaders
        .iter_mut()
        .map(load_report)
        .collect::<Result<Vec<_>, _>>()?;
    verify_lmr(
        lmr,
        data.len(),
        Priority::High,
        seed,
        "high-priority writes",
    )?;
    let timed = (QOS_SIZE, &samples[..], after.saturating_sub(before));
    let records = qos_records(step, timed, (QOS_LOAD_SIZE, &load)).ok_or("no samples")?;
    records.iter().for_each(emit);
    Ok(())
}

/// Memory regions as live LMRs grow: LMRs alternately on this node and on
/// the memory node are allocated and kept until each step of
/// [`REGION_STEPS`] is alive; each step reports this node's resources file
/// right after its allocations.
fn measure_regions(options: &Options, me: u32) -> Result<(), String> {
    let peer = options.memory_node;
    // A kernel without the file fails here, before allocating anything.
    read_region_counters()?;
    say(format_args!(
        "lite-bench: memory regions with (size, LMRs) {REGION_STEPS:?}, alternately on this \
         node {me} and on node {peer}"
    ));
    let started = Instant::now();
    let (mut lmrs, mut lmr_size) = (Vec::new(), 0);
    for (size, count) in REGION_STEPS {
        if size != lmr_size {
            free_all(std::mem::take(&mut lmrs))?;
            lmr_size = size;
        }
        alloc_alternately(&mut lmrs, count, size, me, peer)?;
        report_regions(size, lmrs.len())?;
    }
    free_all(lmrs)?;
    say(format_args!(
        "lite-bench: memory region series took {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The memory region curve: 64-byte writes and reads on a random one of
/// N live LMRs on the memory node, for each `--region-counts` N, then the
/// time to create and free one LMR of each `--create-sizes` size there.
fn measure_region_curve(options: &Options) -> Result<(), String> {
    let node = options.memory_node;
    say(format_args!(
        "lite-bench: memory region curve: {:?} live LMRs of {CURVE_LMR_SIZE} B on node {node}, \
         {} random {CURVE_OP_SIZE}-byte writes and reads each; then creating and freeing \
         LMRs of {:?} B",
        options.region_counts, options.iters, options.create_sizes
    ));
    let started = Instant::now();
    let mut lmrs = Vec::new();
    let source = [0x5au8; CURVE_OP_SIZE];
    let mut sink = [0u8; CURVE_OP_SIZE];
    let mut random = Rng::from_seed(pattern::seed(&[u64::from(node), CURVE_LMR_SIZE]));
    for &count in &options.region_counts {
        alloc_alternately(&mut lmrs, count, CURVE_LMR_SIZE, node, node)?;
        for (operation, on_first) in [
            (Operation::RegionWrite, Operation::RegionWriteFirst),
            (Operation::RegionRead, Operation::RegionReadFirst),
        ] {
            let mut samples = Vec::with_capacity(options.iters);
            let mut first = Vec::with_capacity(options.iters);
            for done in 0..WARMUP_OPS + 2 * options.iters {
                let timed = done.checked_sub(WARMUP_OPS);
                let to_first = timed.is_some_and(|timed| {
                    to_first_region(timed, samples.len(), first.len(), options.iters)
                });
                let index = if to_first {
                    0
                } else {
                    // Below `count`, a `usize`.
                    random.below(count as u64) as usize
                };
                // PANIC: `count` is at least 1, `lmrs` holds at least
                // `count` and `index` is below it.
                let lmr = &lmrs[index];
                let (result, micros) = time_us(|| match operation {
                    Operation::RegionWrite => write(lmr, &source),
                    _ => read(lmr, &mut sink),
                });
                result?;
                match (timed, to_first) {
                    (None, _) => {}
                    (Some(_), true) => first.push(micros),
                    (Some(_), false) => samples.push(micros),
                }
            }
            for (series, times) in [(operation, &samples), (on_first, &first)] {
                let record = region_record(series, CURVE_OP_SIZE as u64, Some(count), times);
                emit(&record.ok_or("no samples")?);
            }
        }
    }
    free_all(lmrs)?;
    for &size in &options.create_sizes {
        let iters = if size >= CREATE_LARGE_SIZE {
            CREATE_ITERS_LARGE
        } else {
            CREATE_ITERS_SMALL
        };
        let mut create = Vec::with_capacity(iters);
        let mut release = Vec::with_capacity(iters);
        for _ in 0..iters {
            let (lmr, micros) = time_us(|| Lmr::alloc(node, size, 0, PASSWORD));
            let lmr = lmr.map_err(failed(format_args!("alloc {size} B on node {node}")))?;
            create.push(micros);
            let (freed, micros) = time_us(|| lmr.free());
            freed.map_err(failed(format_args!("free {size} B")))?;
            release.push(micros);
        }
        for (operation, samples) in [
            (Operation::RegionCreate, &create),
            (Operation::RegionFree, &release),
        ] {
            emit(&region_record(operation, size, None, samples).ok_or("no samples")?);
        }
    }
    say(format_args!(
        "lite-bench: memory region curve took {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Allocates `size`-byte LMRs into `lmrs` until it holds `count`: the
/// first, third and so on on node `local`, the others on node `peer`.
fn alloc_alternately(
    lmrs: &mut Vec<Lmr>,
    count: usize,
    size: u64,
    local: u32,
    peer: u32,
) -> Result<(), String> {
    while lmrs.len() < count {
        let node = if lmrs.len().is_multiple_of(2) {
            local
        } else {
            peer
        };
        let alive = lmrs.len();
        let lmr = Lmr::alloc(node, size, 0, PASSWORD).map_err(failed(format_args!(
            "alloc {size} B on node {node} with {alive} LMRs alive"
        )))?;
        lmrs.push(lmr);
    }
    Ok(())
}

/// Frees every LMR of `lmrs` (on an error, dropping frees the rest).
fn free_all(lmrs: Vec<Lmr>) -> Result<(), String> {
    lmrs.into_iter().try_for_each(free)
}

/// Prints the resources file's counters with `alive` LMRs of `size` bytes
/// allocated by [`alloc_alternately`].
fn report_regions(size: u64, alive: usize) -> Result<(), String> {
    let [lmrs, memory_regions, pool_segments, pool_bytes] = read_region_counters()?;
    emit(&Record::Regions(record::Regions {
        size,
        lmrs,
        local: alive.div_ceil(2) as u64,
        memory_regions,
        pool_segments,
        pool_bytes,
    }));
    Ok(())
}

/// `lmrs`, `memory_regions`, `pool_segments` and `pool_bytes` of this
/// node's resources file.
fn read_region_counters() -> Result<[u64; 4], String> {
    let path = format!("{DEBUGFS_DIR}/{RESOURCES_FILE}");
    let text = debugfs::read_file(RESOURCES_FILE)
        .map_err(|e| format!("{path}: {e}: this kernel does not report its memory regions"))?;
    let counters = resources::parse(&text).map_err(|e| format!("{path}: {e}"))?;
    let counter = |name: &str| {
        counters
            .get(name)
            .copied()
            .ok_or_else(|| format!("{path} lists no {name}"))
    };
    Ok([
        counter("lmrs")?,
        counter("memory_regions")?,
        counter("pool_segments")?,
        counter("pool_bytes")?,
    ])
}

/// A low-priority load process: `lite-bench __qos-load NODE SIZE`. It says
/// `ready` once it is writing, stops when its stdin closes and then says
/// [`LoadReport::line`] (or `fail REASON`).
fn spawn_loader(node: u32) -> Result<Piped, String> {
    // A closed stdin makes it stop; it ends within one write.
    let args: [&dyn Display; 2] = [&node, &QOS_LOAD_SIZE];
    Piped::spawn_self(LOAD_SUBCOMMAND, &args, "a load process", true)
}

/// What load process `loader` did, once it stopped.
fn load_report(loader: &mut Piped) -> Result<LoadReport, String> {
    loader.close();
    let line = loader.next_line()?;
    let status = loader.wait()?;
    match LoadReport::parse(&line) {
        Some(report) if status.success() => Ok(report),
        _ => Err(format!("load process ({status}): {line}")),
    }
}

/// `lite-bench __qos-load NODE SIZE`: a low-priority process of the
/// isolation run.
fn load_process(args: &[String]) -> Result<String, String> {
    let parsed = match args {
        [node, size] => node.parse::<u32>().ok().zip(size.parse::<u64>().ok()),
        _ => None,
    };
    match parsed {
        Some((node, size)) if (1..=MAX_SIZE).contains(&size) => load(node, size).map(|r| r.line()),
        _ => Err(format!("usage: lite-bench {LOAD_SUBCOMMAND} NODE SIZE")),
    }
}

/// Writes `size` bytes to an LMR on `node` at low priority, again and
/// again, until stdin closes.
fn load(node: u32, size: u64) -> Result<LoadReport, String> {
    set_priority(Priority::Low)?;
    let lmr = alloc(node, size)?;
    let seed = pattern::seed(&[u64::from(node), size, u64::from(std::process::id())]);
    let mut data = vec![0u8; size as usize];
    pattern::fill(seed, 0, &mut data);
    let write_low = || {
        lmr.write(0, &data, Priority::Low)
            .map_err(failed(format_args!("low-priority write of {size} B")))
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    std::thread::spawn(move || {
        // Nothing is ever sent; the end of stdin is the signal.
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        stopper.store(true, Ordering::SeqCst);
    });
    write_low()?;
    say(format_args!("ready"));
    let start = monotonic_ns();
    let mut end = start;
    let mut ops = 0u64;
    while !stop.load(Ordering::SeqCst) {
        write_low()?;
        ops += 1;
        end = monotonic_ns();
    }
    verify_lmr(&lmr, data.len(), Priority::Low, seed, "low-priority writes")?;
    free(lmr)?;
    Ok(LoadReport {
        ops,
        bytes: ops * size,
        elapsed_us: end.saturating_sub(start) as f64 / 1000.0,
    })
}
