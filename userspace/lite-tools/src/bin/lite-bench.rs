//! `lite-bench`: latency of synchronous LITE writes and reads between two
//! nodes.
//!
//! Both nodes run it. The node that holds the memory (node 1 by default)
//! only waits; the other allocates an LMR there and, for every size, times
//! `--iters` writes and then `--iters` reads one at a time. Each series
//! prints one line:
//!
//! `LITE-BENCH op=write size=64 iters=1000 median_us=.. p10_us=.. p90_us=.. min_us=.. max_us=.. stdev_us=..`
//!
//! and the run ends with `LITE-BENCH: ok` or `LITE-BENCH: FAILED <reason>`.

use std::net::Ipv4Addr;
use std::process::ExitCode;

use lite::{Lmr, Priority};
use lite_tools::args::{in_range, parse_positive_list, ArgError, Cli, OptionSpec, Parsed};
use lite_tools::bench::{result_line, Operation, PeerNode};
use lite_tools::errno::describe_error;
use lite_tools::stats::{summarize, time_us};
use lite_tools::{join_cluster, parse_cm_address, pattern, say, Membership};

const CLI: Cli = Cli {
    program: "lite-bench",
    synopsis: "--cm IP [--peer-node auto|ID] [--iters N] [--sizes LIST]",
    about: "Measures LITE write and read latency between two nodes.",
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
            help: "comma separated sizes in bytes (default 8,64,512,4096,65536)",
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

struct Options {
    cm: Ipv4Addr,
    memory_node: u32,
    iters: usize,
    sizes: Vec<u64>,
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
    Ok(Options {
        cm,
        memory_node: peer.id(),
        iters,
        sizes,
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

    let outcome = if me == options.memory_node {
        say(format_args!(
            "lite-bench: node {me} holds the memory; waiting for the measuring node"
        ));
        Ok(())
    } else {
        measure(options)
    };
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
