//! `lite-demo`: join a LITE cluster, write a greeting and a pattern into
//! memory on the next node, and read both back.
//!
//! Prints progress lines and finally `LITE-DEMO: ok` or
//! `LITE-DEMO: FAILED <reason>`; exits 0 or 1 accordingly.

use std::fmt::Display;
use std::io;
use std::net::Ipv4Addr;
use std::process::ExitCode;

use lite::{Lmr, Priority};
use lite_tools::args::{in_range, option, ArgError, Cli, Parsed, CM_OPTION};
use lite_tools::errno::describe_error;
use lite_tools::plan::next_node;
use lite_tools::{join_cluster, parse_cm_address, pattern, say, Membership, MAX_CLUSTER_NODES};

const CLI: Cli = Cli {
    program: "lite-demo",
    synopsis: "--cm IP [--nodes N]",
    about: "Joins a LITE cluster and writes to and reads from memory on the next node.",
    options: &[
        CM_OPTION,
        option("nodes", "N", "number of nodes taking part (default 2)"),
    ],
};

const LMR_SIZE: usize = 64 * 1024;

/// "demo" in ASCII.
const PASSWORD: u64 = 0x6465_6d6f;

fn main() -> ExitCode {
    let (cm, nodes) = CLI.config_or_exit(parse_options);
    let (verdict, status) = match run(cm, nodes) {
        Ok(()) => ("ok".to_string(), ExitCode::SUCCESS),
        Err(reason) => (format!("FAILED {reason}"), ExitCode::FAILURE),
    };
    say(format_args!("LITE-DEMO: {verdict}"));
    status
}

/// With the errno's name.
fn failed(what: impl Display) -> impl FnOnce(io::Error) -> String {
    move |e| format!("{what}: {}", describe_error(&e))
}

fn parse_options(parsed: &Parsed) -> Result<(Ipv4Addr, u32), ArgError> {
    let cm = parsed.required_with("cm", parse_cm_address)?;
    let nodes = in_range("nodes", parsed.optional("nodes", 2)?, 1..=MAX_CLUSTER_NODES)?;
    Ok((cm, nodes))
}

fn run(cm: Ipv4Addr, nodes: u32) -> Result<(), String> {
    let membership = join_cluster(cm).map_err(failed(format!("join {cm}")))?;
    let how = match membership {
        Membership::Joined(_) => format!("joined the cluster at {cm} as"),
        Membership::AlreadyMember(_) => "already a member as".to_string(),
    };
    let me = membership.id();
    say(format_args!("lite-demo: {how} node {me}"));
    barrier(nodes)?;
    say(format_args!("lite-demo: all {nodes} nodes joined"));

    let outcome = exchange(me, nodes);
    // Another node may still be using this node's memory: leave together,
    // whether or not this node's part worked.
    let finished = barrier(nodes);
    outcome.and(finished)
}

fn barrier(nodes: u32) -> Result<(), String> {
    lite::dist_barrier(nodes).map_err(failed(format!("dist_barrier({nodes})")))
}

fn exchange(me: u32, nodes: u32) -> Result<(), String> {
    let target = next_node(me, nodes);
    let lmr = Lmr::alloc(target, LMR_SIZE as u64, 0, PASSWORD)
        .map_err(failed(format!("alloc {LMR_SIZE} B on node {target}")))?;
    say(format_args!(
        "lite-demo: allocated {LMR_SIZE} B on node {target} (handle {:#x})",
        lmr.handle()
    ));

    let greeting = format!("hello from node {me} to node {target}");
    lmr.write(0, greeting.as_bytes(), Priority::None)
        .map_err(failed("write greeting"))?;
    let mut greeting_back = vec![0u8; greeting.len()];
    lmr.read(0, &mut greeting_back, Priority::None)
        .map_err(failed("read greeting"))?;
    say(format_args!(
        "lite-demo: read back \"{}\"",
        String::from_utf8_lossy(&greeting_back)
    ));
    if greeting_back != greeting.as_bytes() {
        return Err("the greeting read back differs from the one written".to_string());
    }

    let seed = pattern::seed(&[u64::from(me), u64::from(target), LMR_SIZE as u64]);
    let mut data = vec![0u8; LMR_SIZE];
    pattern::fill(seed, 0, &mut data);
    lmr.write(0, &data, Priority::None)
        .map_err(failed("write pattern"))?;
    pattern::poison(seed, 0, &mut data);
    lmr.read(0, &mut data, Priority::None)
        .map_err(failed("read pattern"))?;
    pattern::verify(seed, 0, &data)
        .map_err(|mismatch| format!("{LMR_SIZE} B pattern mismatch: {mismatch}"))?;
    say(format_args!(
        "lite-demo: {LMR_SIZE} B pattern matched byte for byte"
    ));

    lmr.free().map_err(failed("free"))?;
    say(format_args!("lite-demo: freed the LMR on node {target}"));
    Ok(())
}
