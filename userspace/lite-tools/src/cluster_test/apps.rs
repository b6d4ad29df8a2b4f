//! The paper's applications, run on every node at once as the README's
//! "Applications" section describes; every run checks its result against a
//! single-process reference, and a `LITE-APP` line must say `checked=yes`.

use std::io::Write;
use std::net::Ipv4Addr;

use super::c_programs::{judge, run_in};
use super::io::{barrier, InStep};
use super::processes::WHY_SKIPPED;
use crate::kernel::Kernel;
use crate::tap::Tap;

const PROGRAM_DIR: &str = "/bin";

/// First TCP port of the TCP versions; each run takes the next one, so
/// that no run waits for the last one's sockets to close.
const FIRST_TCP_PORT: u16 = 18710;

/// Every run, each over LITE, TCP and alone, LITE-Graph's also over
/// LITE-DSM; small enough for TCG guests: (program, what it does, its own
/// options separated by spaces).
const RUNS: [(&str, &str, &str); 5] = [
    (
        "lite-log",
        "LITE-Log, concurrent appends from every node and a writer killed mid-append",
        "--records 150 --threads 2 --kill-test 1",
    ),
    (
        "lite-mapreduce",
        "LITE-MapReduce word count",
        "--job wordcount --size 1M --threads 2",
    ),
    (
        "lite-mapreduce",
        "LITE-MapReduce inverted index",
        "--job invindex --size 512K --threads 2",
    ),
    (
        "lite-graph",
        "LITE-Graph PageRank",
        "--algo pagerank --scale 12 --edge-factor 8",
    ),
    (
        "lite-graph",
        "LITE-Graph connected components",
        "--algo components --scale 12 --edge-factor 8",
    ),
];

/// The versions `program` runs as, in order, as TAP names them.
fn transports(program: &str) -> &'static [&'static str] {
    if program == "lite-graph" {
        &["LITE", "TCP", "alone", "DSM"]
    } else {
        &["LITE", "TCP", "alone"]
    }
}

/// This guest's address (the harness gives node `i` 10.77.0.i, on the
/// kernel command line as `lite.ip=ADDR/LEN`).
fn own_address() -> Result<Ipv4Addr, String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").map_err(|e| e.to_string())?;
    cmdline
        .split_whitespace()
        .find_map(|arg| arg.strip_prefix("lite.ip="))
        .and_then(|ip| ip.split('/').next())
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| format!("no lite.ip= on the kernel command line: {cmdline}"))
}

/// The TCP hosts in rank order, and this guest's rank among them.
fn tcp_layout(own: Ipv4Addr, nodes: u32) -> Result<(String, u32), String> {
    let [a, b, c, last] = own.octets();
    let rank = u32::from(last)
        .checked_sub(1)
        .filter(|rank| *rank < nodes)
        .ok_or_else(|| format!("{own} is not one of the cluster's {nodes} addresses"))?;
    let hosts = (1..=nodes)
        .map(|i| format!("{a}.{b}.{c}.{i}"))
        .collect::<Vec<_>>()
        .join(",");
    Ok((hosts, rank))
}

/// A `LITE-APP` line, if it printed one, must say `checked=yes`.
fn run_and_judge(program: &str, args: &[String]) -> Result<(), String> {
    let finished = run_in(PROGRAM_DIR, program, args)?;
    judge(&finished, &[])?;
    let report = finished
        .stdout
        .lines()
        .find(|line| line.starts_with("LITE-APP "));
    match report {
        Some(line) if !line.split_whitespace().any(|f| f == "checked=yes") => {
            Err(format!("its result differs from the reference: {line}"))
        }
        _ => Ok(()),
    }
}

pub(super) fn run<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    cm: Ipv4Addr,
    me: u32,
    nodes: u32,
) -> InStep {
    if !kernel.spawns_processes() {
        for (program, what, _) in RUNS {
            for transport in transports(program) {
                tap.skip(&format!("node {me}: {what} ({transport})"), WHY_SKIPPED);
            }
        }
        return Ok(());
    }
    let layout = own_address().and_then(|own| tcp_layout(own, nodes));
    for (port, (program, what, own_args)) in (FIRST_TCP_PORT..).zip(RUNS) {
        barrier(kernel, tap, nodes, what)?;
        // The options of a transport, then the application's own.
        let run = |transport: String| {
            let args = format!("{transport} {own_args}");
            let args: Vec<String> = args.split_whitespace().map(String::from).collect();
            run_and_judge(program, &args)
        };
        for &transport in transports(program) {
            let options = match transport {
                "LITE" => Ok(format!("--transport lite --cm {cm} --nodes {nodes}")),
                "TCP" => layout.clone().map(|(hosts, rank)| {
                    format!("--transport tcp --hosts {hosts} --rank {rank} --port {port}")
                }),
                "alone" => Ok("--transport local".into()),
                _ => Ok(format!("--transport dsm --cm {cm} --nodes {nodes}")),
            };
            let point = format!("node {me}: {what} ({transport}) matches the reference");
            tap.check(&point, options.and_then(run));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_ranks_follow_the_guests_addresses() {
        let (hosts, rank) = tcp_layout(Ipv4Addr::new(10, 77, 0, 3), 3).expect("a member");
        assert_eq!((hosts.as_str(), rank), ("10.77.0.1,10.77.0.2,10.77.0.3", 2));
        assert!(tcp_layout(Ipv4Addr::new(10, 77, 0, 4), 3).is_err());
        assert!(tcp_layout(Ipv4Addr::new(10, 77, 0, 0), 3).is_err());
    }
}
