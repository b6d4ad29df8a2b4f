//! `lite-bench`: latency and throughput of LITE operations between two
//! nodes.
//!
//! Both nodes run it. The node that holds the memory (node 1 by default)
//! only waits; the other allocates LMRs there and measures, in order:
//!
//! 1. latency: for every `--sizes` size, `--iters` synchronous writes and
//!    then `--iters` reads, one at a time;
//! 2. memory operations: for every `--bw-sizes` size, `lite_remote_memset`
//!    on an LMR and `lite_memcpy` between two LMRs, all on the memory node
//!    (so the work is done there), one at a time;
//! 3. asynchronous transfers: for every `--async-sizes` size and every
//!    `--depths` depth N, `lite_rdma_write_async` and then
//!    `lite_rdma_read_async` with N operations kept in flight, reaped
//!    oldest first with `lite_async_wait`;
//! 4. RPC: the memory node serves an echo port (as many threads as the
//!    most `--rpc-threads`); the measuring node times `--iters` round
//!    trips (`lite_send_reply_imm`, reply as long as the request) for
//!    every `--rpc-sizes` size, then for every `--rpc-threads` count N
//!    lets N threads make `--rpc-calls` 64-byte calls together.
//!
//! Series of 2 and 3 run `--bw-bytes` bytes' worth of operations (at least
//! 8, at most `--iters`). Latency series print
//!
//! `LITE-BENCH op=write size=64 iters=1000 median_us=.. p10_us=.. p90_us=.. min_us=.. max_us=.. stdev_us=..`
//!
//! and throughput series (MiB/s, i.e. perftest's MB/sec)
//!
//! `LITE-BENCH op=memset size=4096 iters=1000 mibps_avg=.. mibps_median=.. mibps_p10=.. mibps_p90=.. mibps_min=.. mibps_max=..`
//! `LITE-BENCH op=write_async size=4096 depth=8 iters=1000 mibps_avg=.. ..`
//!
//! RPC round trips print as latency series (`op=rpc`), RPC throughput as
//!
//! `LITE-BENCH op=rpc_throughput size=64 threads=4 calls=2000 calls_per_s=.. median_us=.. p10_us=.. p90_us=..`
//!
//! where `avg` is total bytes over total time, and the distribution is over
//! single operations (memset, memcpy) or over up to 10 consecutive groups
//! of completions (asynchronous series). Every series checks the data it
//! moved afterwards. The run ends with `LITE-BENCH: ok` or
//! `LITE-BENCH: FAILED <reason>`.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libc::{c_long, c_void};
use lite::rpc::{self, Port, Received};
use lite::{sys, Lmr, Priority};
use lite_tools::args::{in_range, parse_positive_list, ArgError, Cli, OptionSpec, Parsed};
use lite_tools::bench::{
    calls_per_thread, completion_groups, result_line, rpc_throughput, rpc_throughput_line,
    run_window, throughput_iters, throughput_line, throughput_of_completions, throughput_of_ops,
    Operation, PeerNode, Throughput,
};
use lite_tools::errno::{describe_error, describe_result};
use lite_tools::stats::{monotonic_ns, summarize, time_us};
use lite_tools::{join_cluster, parse_cm_address, pattern, say, Membership};

const CLI: Cli = Cli {
    program: "lite-bench",
    synopsis: "--cm IP [--peer-node auto|ID] [--iters N] [--sizes LIST] [--bw-sizes LIST] \
               [--async-sizes LIST] [--depths LIST] [--bw-bytes N] [--rpc-sizes LIST] \
               [--rpc-threads LIST] [--rpc-calls N]",
    about: "Measures LITE write/read latency, memset, memcpy and asynchronous \
            write/read throughput, and RPC latency and throughput between two nodes.",
    options: &[
        OptionSpec {
            name: "cm",
            value_name: "IP",
            help: "IPv4 address of the cluster manager (port 18500)",
        },
        OptionSpec {
            name: "peer-node",
            value_name: "auto|ID",
            help: "node holding the memory; auto means node 1 (default auto)",
        },
        OptionSpec {
            name: "iters",
            value_name: "N",
            help: "timed operations per size and direction (default 1000)",
        },
        OptionSpec {
            name: "sizes",
            value_name: "LIST",
            help: "latency: comma separated sizes in bytes (default 8,64,512,4096,65536)",
        },
        OptionSpec {
            name: "bw-sizes",
            value_name: "LIST",
            help: "memset/memcpy sizes in bytes, or none (default 4096,65536,1048576,4194304)",
        },
        OptionSpec {
            name: "async-sizes",
            value_name: "LIST",
            help: "asynchronous write/read sizes in bytes, or none (default 4096,65536)",
        },
        OptionSpec {
            name: "depths",
            value_name: "LIST",
            help: "asynchronous operations kept in flight (default 1,2,4,8,16,32)",
        },
        OptionSpec {
            name: "bw-bytes",
            value_name: "N",
            help: "bytes moved per throughput series, within 8..=--iters operations \
                   (default 16777216)",
        },
        OptionSpec {
            name: "rpc-sizes",
            value_name: "LIST",
            help: "RPC round trip request (and reply) sizes in bytes, or none \
                   (default 8,64,512,4096,65536)",
        },
        OptionSpec {
            name: "rpc-threads",
            value_name: "LIST",
            help: "RPC throughput: client thread counts, or none (default 1,2,4,8,16)",
        },
        OptionSpec {
            name: "rpc-calls",
            value_name: "N",
            help: "RPC throughput: calls per series, shared by its threads (default 2000)",
        },
    ],
};

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

/// Largest memset/memcpy size accepted (two LMRs of it are allocated).
const MAX_BW_SIZE: u64 = 64 << 20;

/// Port of the RPC echo server on the memory node.
const RPC_PORT: u32 = 20;

/// Request size of the RPC throughput series.
const RPC_THROUGHPUT_SIZE: u64 = 64;

/// Most client (and server) threads of an RPC throughput series.
const MAX_RPC_THREADS: u64 = 64;

/// How long the measuring node waits for the RPC server to open its port.
const RPC_SERVER_WAIT: Duration = Duration::from_secs(60);

struct Options {
    cm: Ipv4Addr,
    memory_node: u32,
    iters: usize,
    sizes: Vec<u64>,
    bw_sizes: Vec<u64>,
    async_sizes: Vec<u64>,
    depths: Vec<usize>,
    bw_bytes: u64,
    rpc_sizes: Vec<u64>,
    rpc_threads: Vec<usize>,
    rpc_calls: usize,
}

impl Options {
    /// Largest message the RPC server must accept; `None` without RPC
    /// series.
    fn rpc_max_size(&self) -> Option<u64> {
        let throughput = (!self.rpc_threads.is_empty()).then_some(RPC_THROUGHPUT_SIZE);
        self.rpc_sizes.iter().copied().chain(throughput).max()
    }
}

/// A size list bounded by `max`; `none` for an empty list.
fn parse_size_list(text: &str, max: u64) -> Result<Vec<u64>, String> {
    if text == "none" {
        return Ok(Vec::new());
    }
    let sizes = parse_positive_list(text)?;
    match sizes.iter().find(|&&size| size > max) {
        Some(size) => Err(format!("{size} is larger than {max}")),
        None => Ok(sizes),
    }
}

fn parse_options(parsed: &Parsed) -> Result<Options, ArgError> {
    let cm = parsed.required_with("cm", parse_cm_address)?;
    let peer = parsed.with("peer-node", PeerNode::Auto, |text| {
        PeerNode::parse(text, lite::sys::MAX_NODES)
    })?;
    let iters = in_range("iters", parsed.optional("iters", 1000)?, 1..=10_000_000)?;
    let sizes = parsed.with("sizes", vec![8, 64, 512, 4096, 65536], |text| {
        let sizes = parse_positive_list(text)?;
        match sizes.iter().find(|&&size| size > MAX_SIZE) {
            Some(size) => Err(format!("{size} is larger than {MAX_SIZE}")),
            None => Ok(sizes),
        }
    })?;
    let bw_sizes = parsed.with("bw-sizes", vec![4096, 65536, 1 << 20, 4 << 20], |text| {
        parse_size_list(text, MAX_BW_SIZE)
    })?;
    let async_sizes = parsed.with("async-sizes", vec![4096, 65536], |text| {
        parse_size_list(text, sys::MAX_ASYNC_SIZE)
    })?;
    let max_depth = u64::from(sys::MAX_ASYNC_OPS);
    let depths = parsed.with("depths", vec![1, 2, 4, 8, 16, 32], |text| {
        let depths = parse_positive_list(text)?;
        match depths.iter().find(|&&depth| depth > max_depth) {
            Some(depth) => Err(format!("{depth} is more than {max_depth} in flight")),
            // Bounded by MAX_ASYNC_OPS.
            None => Ok(depths.into_iter().map(|d| d as usize).collect()),
        }
    })?;
    let bw_bytes = in_range(
        "bw-bytes",
        parsed.optional("bw-bytes", 16u64 << 20)?,
        1..=1 << 40,
    )?;
    // The asynchronous buffers hold one slot per operation in flight.
    let async_span = async_sizes.iter().max().copied().unwrap_or(0)
        * depths.iter().max().copied().unwrap_or(0) as u64;
    if async_span > MAX_BW_SIZE {
        return Err(lite_tools::args::invalid(
            "depths",
            &depths
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
            format!("the largest async size times the largest depth exceeds {MAX_BW_SIZE} B"),
        ));
    }
    let rpc_sizes = parsed.with("rpc-sizes", vec![8, 64, 512, 4096, 65536], |text| {
        parse_size_list(text, sys::MAX_MESSAGE_SIZE)
    })?;
    let rpc_threads = parsed.with("rpc-threads", vec![1, 2, 4, 8, 16], |text| {
        // Bounded by MAX_RPC_THREADS.
        parse_size_list(text, MAX_RPC_THREADS).map(|t| t.into_iter().map(|n| n as usize).collect())
    })?;
    let rpc_calls = in_range(
        "rpc-calls",
        parsed.optional("rpc-calls", 2000)?,
        1..=10_000_000,
    )?;
    Ok(Options {
        cm,
        memory_node: peer.id(),
        iters,
        sizes,
        bw_sizes,
        async_sizes,
        depths,
        bw_bytes,
        rpc_sizes,
        rpc_threads,
        rpc_calls,
    })
}

fn main() -> ExitCode {
    let parsed = CLI.parse_env_or_exit();
    let options = match parse_options(&parsed) {
        Ok(options) => options,
        Err(error) => CLI.exit_with(&error),
    };
    match run(&options) {
        Ok(()) => {
            say(format_args!("LITE-BENCH: ok"));
            ExitCode::SUCCESS
        }
        Err(reason) => {
            say(format_args!("LITE-BENCH: FAILED {reason}"));
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<(), String> {
    let cm = options.cm;
    let me = match join_cluster(cm) {
        Ok(Membership::Joined(id)) => {
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
    barrier()?;

    if me == options.memory_node {
        say(format_args!(
            "lite-bench: node {me} holds the memory and serves RPC; waiting for the measuring node"
        ));
        let server = RpcServer::start(options);
        // The measuring node must not be left waiting, whatever failed.
        let finished = barrier();
        let stopped = server.and_then(|server| server.map_or(Ok(()), RpcServer::stop));
        return stopped.and(finished);
    }
    let outcome = measure(options)
        .and_then(|()| measure_memory_ops(options))
        .and_then(|()| measure_async(options))
        .and_then(|()| measure_rpc(options));
    // The memory node must not leave while the other still measures, and
    // the measuring node must release it even after a failure.
    let finished = barrier();
    outcome.and(finished)
}

fn barrier() -> Result<(), String> {
    lite::dist_barrier(BENCH_NODES)
        .map_err(|e| format!("dist_barrier({BENCH_NODES}): {}", describe_error(&e)))
}

fn measure(options: &Options) -> Result<(), String> {
    let node = options.memory_node;
    let largest = options.sizes.iter().copied().max().unwrap_or(0);
    let lmr_size = largest.max(MIN_LMR_SIZE);
    let lmr = Lmr::alloc(node, lmr_size, 0, PASSWORD)
        .map_err(|e| format!("alloc {lmr_size} B on node {node}: {}", describe_error(&e)))?;
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

    for &size in &options.sizes {
        // Bounded by MAX_SIZE when parsed.
        let len = size as usize;
        let mut samples = Vec::with_capacity(options.iters);
        for _ in 0..options.iters {
            let (result, micros) = time_us(|| write(&lmr, &source[..len]));
            result?;
            samples.push(micros);
        }
        report(Operation::Write, size, &samples)?;

        samples.clear();
        pattern::poison(seed, 0, &mut sink[..len]);
        for _ in 0..options.iters {
            let (result, micros) = time_us(|| read(&lmr, &mut sink[..len]));
            result?;
            samples.push(micros);
        }
        // A fast but wrong read would make the numbers meaningless.
        pattern::verify(seed, 0, &sink[..len])
            .map_err(|m| format!("read of {size} B returned wrong data: {m}"))?;
        report(Operation::Read, size, &samples)?;
    }

    lmr.free()
        .map_err(|e| format!("free: {}", describe_error(&e)))
}

fn write(lmr: &Lmr, data: &[u8]) -> Result<(), String> {
    lmr.write(0, data, Priority::None)
        .map_err(|e| format!("write of {} B: {}", data.len(), describe_error(&e)))
}

fn read(lmr: &Lmr, buf: &mut [u8]) -> Result<(), String> {
    let len = buf.len();
    lmr.read(0, buf, Priority::None)
        .map_err(|e| format!("read of {len} B: {}", describe_error(&e)))
}

fn report(operation: Operation, size: u64, samples: &[f64]) -> Result<(), String> {
    let summary = summarize(samples).ok_or("no samples")?;
    say(format_args!("{}", result_line(operation, size, &summary)));
    Ok(())
}

/// Operations in one throughput series of `size`-byte operations.
fn throughput_ops(options: &Options, size: u64) -> usize {
    throughput_iters(size, options.bw_bytes, MIN_THROUGHPUT_OPS, options.iters)
}

/// A raw result of a call that returns 0 on success.
fn expect_ok(what: impl FnOnce() -> String, ret: c_long) -> Result<(), String> {
    if ret == 0 {
        Ok(())
    } else {
        Err(format!("{}: {}", what(), describe_result(ret)))
    }
}

fn report_throughput(
    operation: Operation,
    size: u64,
    depth: Option<usize>,
    throughput: Option<Throughput>,
) -> Result<(), String> {
    let throughput = throughput.ok_or("no usable samples (zero durations)")?;
    say(format_args!(
        "{}",
        throughput_line(operation, size, depth, &throughput)
    ));
    Ok(())
}

/// `lite_remote_memset` and `lite_memcpy` throughput. Both LMRs live on the
/// memory node, so the bytes are set and copied there.
fn measure_memory_ops(options: &Options) -> Result<(), String> {
    let Some(largest) = options.bw_sizes.iter().copied().max() else {
        return Ok(());
    };
    let node = options.memory_node;
    let alloc = || {
        Lmr::alloc(node, largest, 0, PASSWORD)
            .map_err(|e| format!("alloc {largest} B on node {node}: {}", describe_error(&e)))
    };
    let source = alloc()?;
    let target = alloc()?;
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
            let ret = sys::remote_memset(target.handle(), 0, size, byte.into());
            expect_ok(|| format!("memset of {size} B"), ret)
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
        report_throughput(
            Operation::Memset,
            size,
            None,
            throughput_of_ops(size, &samples),
        )?;

        let memcpy = || {
            let ret = sys::memcpy(source.handle(), 0, target.handle(), 0, size);
            expect_ok(|| format!("memcpy of {size} B"), ret)
        };
        let samples = timed_series(ops, memcpy)?;
        let check = &mut data[..size as usize];
        read(&target, check)?;
        pattern::verify(seed, 0, check)
            .map_err(|m| format!("memcpy of {size} B copied wrong data: {m}"))?;
        report_throughput(
            Operation::Memcpy,
            size,
            None,
            throughput_of_ops(size, &samples),
        )?;
    }

    source
        .free()
        .and_then(|()| target.free())
        .map_err(|e| format!("free: {}", describe_error(&e)))
}

/// Runs `operation` untimed a few times, then `ops` times timed; returns
/// the durations in microseconds.
fn timed_series(
    ops: usize,
    mut operation: impl FnMut() -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    for _ in 0..THROUGHPUT_WARMUP_OPS {
        operation()?;
    }
    let mut samples = Vec::with_capacity(ops);
    for _ in 0..ops {
        let (result, micros) = time_us(&mut operation);
        result?;
        samples.push(micros);
    }
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
    // Bounded by MAX_BW_SIZE when parsed.
    let span = largest * max_depth as u64;
    let node = options.memory_node;
    let lmr = Lmr::alloc(node, span, 0, PASSWORD)
        .map_err(|e| format!("alloc {span} B on node {node}: {}", describe_error(&e)))?;
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
    lmr.free()
        .map_err(|e| format!("free: {}", describe_error(&e)))
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
        let ret = sys::async_wait(op, 0);
        expect_ok(|| format!("lite_async_wait({op})"), ret)
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
            let offset = |slot: usize| slot as u64 * size;
            let write_one = |slot: usize| {
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
            let start = monotonic_ns();
            let completions = run_window(ops, depth, write_one, reap, monotonic_ns)?;
            report_throughput(
                Operation::WriteAsync,
                size,
                Some(depth),
                throughput_of_completions(size, start, &completions, completion_groups(ops, depth)),
            )?;

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
            let start = monotonic_ns();
            let completions =
                run_window(ops, depth, reader(sink.as_mut_ptr()), reap, monotonic_ns)?;
            // A fast but wrong read would make the numbers meaningless.
            pattern::verify(seed, 0, &sink[..used]).map_err(|m| {
                format!("read_async of {size} B at depth {depth} returned wrong data: {m}")
            })?;
            report_throughput(
                Operation::ReadAsync,
                size,
                Some(depth),
                throughput_of_completions(size, start, &completions, completion_groups(ops, depth)),
            )?;
        }
    }
    // Writes landed where expected (and the reads above saw them).
    let mut check = vec![0u8; source.len()];
    read(lmr, &mut check)?;
    pattern::verify(seed, 0, &check)
        .map_err(|m| format!("write_async left wrong data in the LMR: {m}"))
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
        let port = Port::register(RPC_PORT, max_size, "lite-bench-echo").map_err(|e| {
            format!(
                "register_application(port {RPC_PORT}): {}",
                describe_error(&e)
            )
        })?;
        let count = options
            .rpc_threads
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .max(1);
        // Bounded by MAX_MESSAGE_SIZE when parsed.
        let len = max_size as usize;
        let threads = (0..count)
            .map(|_| std::thread::spawn(move || echo(len)))
            .collect();
        say(format_args!(
            "lite-bench: {count} threads answer RPCs of up to {max_size} B on port {RPC_PORT}"
        ));
        Ok(Some(RpcServer { port, threads }))
    }

    /// Closes the port, which ends the threads, and waits for them.
    fn stop(self) -> Result<(), String> {
        let closed = self
            .port
            .unregister()
            .map_err(|e| format!("unregister_application: {}", describe_error(&e)));
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

/// Waits until the memory node's RPC port is open.
fn wait_for_server(node: u32) -> Result<(), String> {
    let deadline = Instant::now() + RPC_SERVER_WAIT;
    loop {
        match rpc::query_port(node, RPC_PORT) {
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(format!(
                    "query_port(node {node}, port {RPC_PORT}): {}",
                    describe_error(&e)
                ))
            }
        }
    }
}

/// One echo call: `request` out, the same bytes back into `reply`.
fn echo_call(node: u32, request: &[u8], reply: &mut [u8]) -> Result<(), String> {
    let size = request.len();
    let len = rpc::call(node, RPC_PORT, request, reply, Priority::None)
        .map_err(|e| format!("RPC of {size} B: {}", describe_error(&e)))?;
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
        for _ in 0..WARMUP_OPS {
            echo_call(node, &request, &mut reply)?;
        }
        pattern::poison(seed, 0, &mut reply);
        let mut samples = Vec::with_capacity(options.iters);
        for _ in 0..options.iters {
            let (result, micros) = time_us(|| echo_call(node, &request, &mut reply));
            result?;
            samples.push(micros);
        }
        // A fast but wrong reply would make the numbers meaningless.
        pattern::verify(seed, 0, &reply)
            .map_err(|m| format!("RPC of {size} B got a wrong reply: {m}"))?;
        report(Operation::Rpc, size, &samples)?;
    }
    for &threads in &options.rpc_threads {
        rpc_throughput_series(node, threads, calls_per_thread(options.rpc_calls, threads))?;
    }
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
                        let (result, micros) = time_us(|| echo_call(node, &request, &mut reply));
                        result?;
                        samples.push(micros);
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
        let elapsed_us = monotonic_ns().saturating_sub(began) as f64 / 1000.0;
        (results, elapsed_us)
    });
    let mut samples = Vec::new();
    for result in results {
        samples.extend(result.map_err(|e| format!("RPC throughput with {threads} threads: {e}"))?);
    }
    let throughput =
        rpc_throughput(threads, &samples, elapsed_us).ok_or("RPC throughput: no usable samples")?;
    say(format_args!(
        "{}",
        rpc_throughput_line(RPC_THROUGHPUT_SIZE, &throughput)
    ));
    Ok(())
}
