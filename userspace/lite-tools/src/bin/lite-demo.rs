//! `lite-demo`: join a LITE cluster, write a greeting and a pattern into
//! memory on the next node, and read both back.
//!
//! Prints progress lines and finally `LITE-DEMO: ok` or
//! `LITE-DEMO: FAILED <reason>`; exits 0 or 1 accordingly.

use std::net::Ipv4Addr;
use std::process::ExitCode;

use lite::{Lmr, Priority};
use lite_tools::args::{in_range, ArgError, Cli, OptionSpec, Parsed, CM_OPTION};
use lite_tools::errno::describe_error;
use lite_tools::plan::next_node;
use lite_tools::{join_cluster, parse_cm_address, pattern, say, Membership, MAX_CLUSTER_NODES};

const CLI: Cli = Cli {
    program: "lite-demo",
    synopsis: "--cm IP [--nodes N]",
    about: "Joins a LITE cluster and writes to and reads from memory on the next node.",
    options: &[
        CM_OPTION,
        OptionSpec {
            name: "nodes",
            value_name: "N",
            help: "number of nodes taking part (default 2)",
        },
    ],
};

/// Size of the demo LMR.
const LMR_SIZE: usize = 64 * 1024;

/// Password of the demo LMR ("demo" in ASCII).
const PASSWORD: u64 = 0x6465_6d6f;

fn main() -> ExitCode {
    let parsed = CLI.parse_env_or_exit();
    let (cm, nodes) = match parse_options(&parsed) {
        Ok(options) => options,
        Err(error) => CLI.exit_with(&error),
    };
    match run(cm, nodes) {
        Ok(()) => {
            say(format_args!("LITE-DEMO: ok"));
            ExitCode::SUCCESS
        }
        Err(reason) => {
            say(format_args!("LITE-DEMO: FAILED {reason}"));
            ExitCode::FAILURE
        }
    }
}

fn parse_options(parsed: &Parsed) -> Result<(Ipv4Addr, u32), ArgError> {
    let cm = parsed.required_with("cm", parse_cm_address)?;
    let nodes = in_range("nodes", parsed.optional("nodes", 2)?, 1..=MAX_CLUSTER_NODES)?;
    Ok((cm, nodes))
}

fn run(cm: Ipv4Addr, nodes: u32) -> Result<(), String> {
    let me = match join_cluster(cm) {
        Ok(Membership::Joined(id)) => {
            say(format_args!(
                "lite-demo: joined the cluster at {cm} as node {id}"
            ));
            id
        }
        Ok(Membership::AlreadyMember(id)) => {
            say(format_args!("lite-demo: already a member as node {id}"));
            id
        }
        Err(e) => return Err(format!("join {cm}: {}", describe_error(&e))),
    };
    barrier(nodes)?;
    say(format_args!("lite-demo: all {nodes} nodes joined"));

    let outcome = exchange(me, nodes);
    // Another node may still be using this node's memory: leave together,
    // whether or not this node's part worked.
    let finished = barrier(nodes);
    outcome.and(finished)
}

fn barrier(nodes: u32) -> Result<(), String> {
    lite::dist_barrier(nodes).map_err(|e| format!("dist_barrier({nodes}): {}", describe_error(&e)))
}

fn exchange(me: u32, nodes: u32) -> Result<(), String> {
    let target = next_node(me, nodes);
    let lmr = Lmr::alloc(target, LMR_SIZE as u64, 0, PASSWORD).map_err(|e| {
        format!(
            "alloc {LMR_SIZE} B on node {target}: {}",
            describe_error(&e)
        )
    })?;
    say(format_args!(
        "lite-demo: allocated {LMR_SIZE} B on node {target} (handle {:#x})",
        lmr.handle()
    ));

    let greeting = format!("hello from node {me} to node {target}");
    lmr.write(0, greeting.as_bytes(), Priority::None)
        .map_err(|e| format!("write greeting: {}", describe_error(&e)))?;
    let mut greeting_back = vec![0u8; greeting.len()];
    lmr.read(0, &mut greeting_back, Priority::None)
        .map_err(|e| format!("read greeting: {}", describe_error(&e)))?;
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
        .map_err(|e| format!("write pattern: {}", describe_error(&e)))?;
    pattern::poison(seed, 0, &mut data);
    lmr.read(0, &mut data, Priority::None)
        .map_err(|e| format!("read pattern: {}", describe_error(&e)))?;
    match pattern::verify(seed, 0, &data) {
        Ok(()) => say(format_args!(
            "lite-demo: {LMR_SIZE} B pattern matched byte for byte"
        )),
        Err(mismatch) => {
            say(format_args!(
                "lite-demo: {LMR_SIZE} B pattern mismatch: {mismatch}"
            ));
            return Err(format!("pattern mismatch: {mismatch}"));
        }
    }

    lmr.free()
        .map_err(|e| format!("free: {}", describe_error(&e)))?;
    say(format_args!("lite-demo: freed the LMR on node {target}"));
    Ok(())
}
