//! `lite-bench`'s command line: every option declared once, with the field
//! of [`Options`] it fills, its usage line and how its value is read.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::str::FromStr;

use lite::sys;
use lite_tools::args::{
    in_range, invalid, option, parse_positive_list, ArgError, Cli, Parsed, CM_OPTION,
};
use lite_tools::bench::{Operation, PeerNode, Series};
use lite_tools::{parse_cm_address, MAX_CLUSTER_NODES};

use super::{MAX_SIZE, RPC_THROUGHPUT_SIZE};

/// Largest memset/memcpy size accepted (two LMRs of it are allocated).
const MAX_BW_SIZE: u64 = 64 << 20;

/// Most client (and server) threads of an RPC throughput series.
const MAX_RPC_THREADS: u64 = 64;

/// Most rounds of the isolation run.
const MAX_QOS_ROUNDS: u32 = 100;

/// Most low-priority processes accepted.
const MAX_QOS_LOADERS: usize = 16;

/// Most live LMRs the memory region curve accepts.
const MAX_CURVE_LMRS: u64 = 1_000_000;

/// Largest LMR the memory region curve creates.
const MAX_CREATE_SIZE: u64 = 4 << 30;

/// Most processes of one step of the process curve.
const MAX_CURVE_PROCESSES: u64 = 256;

/// Most rounds of the LITE-DSM faults.
const MAX_DSM_ROUNDS: u32 = 100;

/// Declares [`Options`], [`CLI`] and [`read_options`] from the fields no
/// option fills (set by [`parse_options`]) and one list of options besides
/// `--cm`, each `field: Type = (name, value name), reader;` under its help
/// text, which is also the field's documentation.
macro_rules! options {
    (
        derived {
            $($(#[$derived_doc:meta])* $derived:ident: $derived_type:ty,)*
        }
        $(
            $(#[doc = $help:literal])*
            $field:ident: $type:ty = ($name:literal, $value_name:literal), $read:expr;
        )*
    ) => {
        #[derive(Clone)]
        pub(crate) struct Options {
            /// The cluster manager's address.
            pub(crate) cm: Ipv4Addr,
            $($(#[doc = $help])* pub(crate) $field: $type,)*
            $($(#[$derived_doc])* pub(crate) $derived: $derived_type,)*
        }

        pub(crate) const CLI: Cli = Cli {
            program: "lite-bench",
            synopsis: concat!("--cm IP", $(" [--", $name, " ", $value_name, "]"),*),
            about: ABOUT,
            options: &[
                CM_OPTION,
                // The lines of a doc comment each start with a space.
                $(option($name, $value_name, concat!($($help),*).trim_ascii_start()),)*
            ],
        };

        /// Every option's value, each checked on its own.
        fn read_options(parsed: &Parsed) -> Result<Options, ArgError> {
            Ok(Options {
                cm: parsed.required_with(CM_OPTION.name, parse_cm_address)?,
                $($field: ($read)(parsed, $name)?,)*
                $($derived: Default::default(),)*
            })
        }
    };
}

const ABOUT: &str = "Measures LITE write/read latency, atomics, lock/unlock, memset, memcpy and \
            asynchronous write/read throughput, RPC latency and throughput between two \
            nodes, high-priority write latency under low-priority load, and the memory \
            regions the node registers as live LMRs grow; or, with \
            --contend, lock/unlock with several nodes contending; or, with --dsm, LITE-DSM's \
            page faults.";

options! {
    derived {
        /// The id of the node holding the memory; for `this` and `other`,
        /// node 1 until the cluster met at the first barrier, `peer`
        /// resolved from then on.
        memory_node: u32,
    }
    /// node holding the memory: auto means node 1, this means this node (it serves), other the
    /// other node of a two-node cluster (this node measures) (default auto)
    peer: PeerNode = ("peer-node", "auto|this|other|ID"),
        given_or(PeerNode::Auto, |text| PeerNode::parse(text, sys::MAX_NODES));
    /// timed operations per size and direction (default 1000)
    iters: usize = ("iters", "N"), bounded(1000, 1..=10_000_000);
    /// latency: comma separated sizes in bytes (default 8,64,512,4096,65536)
    sizes: Vec<u64> = ("sizes", "LIST"), given_or(vec![8, 64, 512, 4096, 65536], |text| {
        // Unlike the other lists, not `none`.
        parse_positive_list(text).and_then(|_| parse_size_list(text, MAX_SIZE))
    });
    /// memset/memcpy sizes in bytes, or none (default 4096,65536,1048576,4194304)
    bw_sizes: Vec<u64> = ("bw-sizes", "LIST"), sizes(&[4096, 65536, 1 << 20, 4 << 20], MAX_BW_SIZE);
    /// asynchronous write/read sizes in bytes, or none (default 4096,65536)
    async_sizes: Vec<u64> = ("async-sizes", "LIST"), sizes(&[4096, 65536], sys::MAX_ASYNC_SIZE);
    /// asynchronous operations kept in flight (default 1,2,4,8,16,32)
    depths: Vec<usize> = ("depths", "LIST"), given_or(vec![1, 2, 4, 8, 16, 32], parse_depths);
    /// bytes moved per throughput series, within 8..=--iters operations (default 16777216)
    bw_bytes: u64 = ("bw-bytes", "N"), bounded(16 << 20, 1..=1 << 40);
    /// RPC round trip request (and reply) sizes in bytes, or none (default 8,64,512,4096,65536)
    rpc_sizes: Vec<u64> = ("rpc-sizes", "LIST"),
        sizes(&[8, 64, 512, 4096, 65536], sys::MAX_MESSAGE_SIZE);
    /// RPC throughput: client thread counts, or none (default 1,2,4,8,16)
    rpc_threads: Vec<usize> = ("rpc-threads", "LIST"), counts(&[1, 2, 4, 8, 16], MAX_RPC_THREADS);
    /// RPC throughput: calls per series, shared by its threads (default 2000)
    rpc_calls: usize = ("rpc-calls", "N"), bounded(2000, 1..=10_000_000);
    /// isolation run: low-priority processes loading the link, 0 to skip the run (default 3)
    qos_loaders: usize = ("qos-loaders", "N"), bounded(3, 0..=MAX_QOS_LOADERS);
    /// isolation run: rounds of an unloaded and a loaded phase with QoS on, alternated so both see
    /// the same machine (default 5)
    qos_rounds: u32 = ("qos-rounds", "N"), bounded(5, 1..=MAX_QOS_ROUNDS);
    /// latency: only the write/read latency, atomics and RPC round trip series (one round of the
    /// benchmark's interleaved comparison); regions: only the memory region curve; processes: only
    /// the process curve (default all)
    series: Series = ("series", "all|latency|regions|processes"),
        given_or(Series::All, Series::parse);
    /// latency series: only these of write, read, fetch_add, compare_swp and rpc (default all of
    /// them)
    ops: Vec<Operation> = ("ops", "LIST"), given_or(LATENCY_OPS.to_vec(), parse_latency_ops);
    /// with --series latency: start COMMAND (lite-verbs-bench --client HOST .. --turns, words
    /// separated by spaces) and take turns with it within every series
    baseline: Option<String> = ("baseline", "COMMAND"), text_if_given();
    /// with --baseline: most operations of one side in a row (default 10)
    turn_ops: usize = ("turn-ops", "N"), bounded(10, 1..=10_000_000);
    /// memory region curve: live LMRs at each step (default 1,100,10000,100000)
    region_counts: Vec<usize> = ("region-counts", "LIST"),
        counts(&[1, 100, 10_000, 100_000], MAX_CURVE_LMRS);
    /// memory region curve: sizes of the LMRs created and freed, in bytes (default
    /// 4096,65536,1048576,16777216,268435456,1073741824)
    create_sizes: Vec<u64> = ("create-sizes", "LIST"),
        sizes(&[4096, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30], MAX_CREATE_SIZE);
    /// process curve: processes at each step, each making --iters operations (default
    /// 1,2,4,8,16,32,64)
    process_counts: Vec<usize> = ("process-counts", "LIST"),
        counts(&[1, 2, 4, 8, 16, 32, 64], MAX_CURVE_PROCESSES);
    /// only measure NODES nodes (all running --contend NODES): node 1 keeps one lock and every
    /// other node takes turns on it
    contend: Option<u32> = ("contend", "NODES"), bounded_if_given(2..=MAX_CLUSTER_NODES);
    /// only measure one step of the cluster-size curve: NODES nodes (all running --scale NODES)
    /// time their join, --iters barriers and all-to-all RPC
    scale: Option<u32> = ("scale", "NODES"), bounded_if_given(2..=MAX_CLUSTER_NODES);
    /// calls per peer of the all-to-all RPC with --scale (default 200)
    scale_calls: usize = ("scale-calls", "N"), bounded(200, 1..=10_000_000);
    /// lock/unlock pairs per contending node with --contend (default 300)
    contend_iters: usize = ("contend-iters", "N"), bounded(300, 1..=10_000_000);
    /// only measure LITE-DSM's page faults on NODES nodes (all running --dsm NODES): node 1 times
    /// --iters read faults, write faults on pages 0, 1 and 2 other nodes read, and LITE reads of
    /// 4 KiB, taking turns in blocks of --turn-ops, in each of --dsm-rounds rounds
    dsm: Option<u32> = ("dsm", "NODES"), bounded_if_given(3..=MAX_CLUSTER_NODES);
    /// rounds of the LITE-DSM faults with --dsm (default 5)
    dsm_rounds: u32 = ("dsm-rounds", "N"), bounded(5, 1..=MAX_DSM_ROUNDS);
}

/// The operations of the latency series, of which `--ops` picks.
pub(crate) const LATENCY_OPS: [Operation; 5] = [
    Operation::Write,
    Operation::Read,
    Operation::FetchAdd,
    Operation::CompareSwp,
    Operation::Rpc,
];

/// A comma-separated list of names of [`LATENCY_OPS`].
fn parse_latency_ops(text: &str) -> Result<Vec<Operation>, String> {
    text.split(',')
        .map(|name| {
            let op = Operation::from_name(name).filter(|op| LATENCY_OPS.contains(op));
            op.ok_or_else(|| {
                format!(
                    "unknown operation {name:?}: expected write, read, fetch_add, compare_swp \
                     or rpc"
                )
            })
        })
        .collect()
}

/// Reads the option of a name, or says why its value will not do.
trait Reader<T>: FnOnce(&Parsed, &'static str) -> Result<T, ArgError> {}
impl<T, F: FnOnce(&Parsed, &'static str) -> Result<T, ArgError>> Reader<T> for F {}

/// An option read by `parse`, `default` when it is not given.
fn given_or<T>(default: T, parse: impl FnOnce(&str) -> Result<T, String>) -> impl Reader<T> {
    move |parsed: &Parsed, name: &'static str| parsed.with(name, default, parse)
}

/// A number in `range`, `default` when it is not given.
fn bounded<T>(default: T, range: RangeInclusive<T>) -> impl Reader<T>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
    T::Err: std::fmt::Display,
{
    move |parsed: &Parsed, name: &'static str| {
        in_range(name, parsed.optional(name, default)?, range)
    }
}

/// A number in `range` if it is given.
fn bounded_if_given(range: RangeInclusive<u32>) -> impl Reader<Option<u32>> {
    move |parsed: &Parsed, name: &'static str| match parsed.get(name) {
        Some(_) => Ok(Some(in_range(name, parsed.required(name)?, range)?)),
        None => Ok(None),
    }
}

/// The text given, if any.
fn text_if_given() -> impl Reader<Option<String>> {
    |parsed: &Parsed, name: &'static str| Ok(parsed.get(name).map(str::to_string))
}

/// A list of sizes up to `max`, or `none`.
fn sizes(default: &[u64], max: u64) -> impl Reader<Vec<u64>> {
    given_or(default.to_vec(), move |text| parse_size_list(text, max))
}

/// A list of counts from 1 to `max`, or `none`.
fn counts(default: &[usize], max: u64) -> impl Reader<Vec<usize>> {
    // Bounded by `max`, which fits a usize.
    let parse = move |text: &str| {
        parse_size_list(text, max).map(|n| n.into_iter().map(|n| n as usize).collect())
    };
    given_or(default.to_vec(), parse)
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

/// Depths of asynchronous series, each at most what may be in flight.
fn parse_depths(text: &str) -> Result<Vec<usize>, String> {
    let max_depth = u64::from(sys::MAX_ASYNC_OPS);
    let depths = parse_positive_list(text)?;
    match depths.iter().find(|&&depth| depth > max_depth) {
        Some(depth) => Err(format!("{depth} is more than {max_depth} in flight")),
        // Bounded by MAX_ASYNC_OPS.
        None => Ok(depths.into_iter().map(|d| d as usize).collect()),
    }
}

impl Options {
    /// Whether the latency series of `operation` runs.
    pub(crate) fn runs(&self, operation: Operation) -> bool {
        self.ops.contains(&operation)
    }

    /// Largest message the RPC server must accept; `None` without RPC
    /// series.
    pub(crate) fn rpc_max_size(&self) -> Option<u64> {
        // The process curve's and the RPC throughput series' calls.
        let throughput = (self.series == Series::Processes || !self.rpc_threads.is_empty())
            .then_some(RPC_THROUGHPUT_SIZE);
        self.rpc_sizes.iter().copied().chain(throughput).max()
    }
}

/// The options, checked on their own and together.
pub(crate) fn parse_options(parsed: &Parsed) -> Result<Options, ArgError> {
    let mut options = read_options(parsed)?;
    options.memory_node = match options.peer {
        PeerNode::Id(id) => id,
        _ => 1,
    };
    // The asynchronous buffers hold one slot per operation in flight.
    let async_span = options.async_sizes.iter().max().copied().unwrap_or(0)
        * options.depths.iter().max().copied().unwrap_or(0) as u64;
    if async_span > MAX_BW_SIZE {
        let depths: Vec<String> = options.depths.iter().map(usize::to_string).collect();
        return Err(invalid(
            "depths",
            &depths.join(","),
            format!("the largest async size times the largest depth exceeds {MAX_BW_SIZE} B"),
        ));
    }
    if let Some(command) = &options.baseline {
        if options.series != Series::Latency || command.split_whitespace().next().is_none() {
            return Err(invalid(
                "baseline",
                command,
                "takes a command, and turns only with --series latency",
            ));
        }
    }
    // `this` and `other` are resolved at the first barrier, which those
    // runs do not reach with a memory node.
    let resolved_late = matches!(options.peer, PeerNode::This | PeerNode::Other);
    let alone = options.contend.is_some() || options.scale.is_some() || options.dsm.is_some();
    if resolved_late && alone {
        return Err(invalid(
            "peer-node",
            parsed.get("peer-node").unwrap_or_default(),
            "--contend, --scale and --dsm hold no memory on one node: give auto or a node id",
        ));
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::{parse_latency_ops, Operation, LATENCY_OPS};

    #[test]
    fn latency_ops_name_the_series_that_run() {
        let two = parse_latency_ops("read,fetch_add");
        assert_eq!(two, Ok(vec![Operation::Read, Operation::FetchAdd]));
        let all = parse_latency_ops("write,read,fetch_add,compare_swp,rpc");
        assert_eq!(all, Ok(LATENCY_OPS.to_vec()));
        assert!(parse_latency_ops("write,memset").is_err());
        assert!(parse_latency_ops("").is_err());
    }
}
