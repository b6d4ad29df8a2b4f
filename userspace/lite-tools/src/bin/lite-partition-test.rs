//! `lite-partition-test`: the LITE network partition test.
//!
//! Every node of the cluster runs it at the same time, one of them as the
//! node the harness cuts off ([`lite_tools::partition_test`]). Every node
//! prints TAP as `lite-cluster-test` does, the markers the harness waits
//! for as TAP comments. `--pause-traffic S` runs the pause phase first.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lite::sys::CM_DEFAULT_PORT;
use lite_tools::args::{in_range, option, ArgError, Cli, Parsed, CM_OPTION};
use lite_tools::kernel::Syscalls;
use lite_tools::partition_test::{run_cut, run_survivor, Pacing, PartitionConfig, Role};
use lite_tools::tap::report_to_stdout;
use lite_tools::{parse_cm_address, MAX_CLUSTER_NODES};

/// Longest pause phase accepted: an hour is far more than any schedule of
/// pauses needs, and a typo should not hold a node for days.
const MAX_PAUSE_TRAFFIC_SECS: u64 = 3600;

const CLI: Cli = Cli {
    program: "lite-partition-test",
    synopsis: "--cm IP --nodes N --role survivor|cut [--pause-traffic S]",
    about: "Runs one node's part of the LITE network partition test.",
    options: &[
        CM_OPTION,
        option(
            "nodes",
            "N",
            "number of nodes, the cut node included (at least 2)",
        ),
        option(
            "role",
            "ROLE",
            "survivor (stays connected) or cut (the harness cuts it off)",
        ),
        option(
            "pause-traffic",
            "S",
            "seconds of checked traffic with every node while the harness pauses a VM, \
                   before the partition (0, the default: no pause phase)",
        ),
    ],
};

fn parse_config(parsed: &Parsed) -> Result<(PartitionConfig, Role), ArgError> {
    let config = PartitionConfig {
        cm: parsed.required_with("cm", parse_cm_address)?,
        // The cut node and at least one survivor, which holds the LMR the
        // cut node writes to.
        nodes: in_range("nodes", parsed.required("nodes")?, 2..=MAX_CLUSTER_NODES)?,
        pacing: Pacing::VMS,
        pause_traffic: Duration::from_secs(in_range(
            "pause-traffic",
            parsed.optional("pause-traffic", 0)?,
            0..=MAX_PAUSE_TRAFFIC_SECS,
        )?),
    };
    let role = parsed.required_with("role", Role::parse)?;
    Ok((config, role))
}

fn main() -> ExitCode {
    let (config, role) = CLI.config_or_exit(parse_config);
    let name = role.name();
    let header = format!(
        "lite-partition-test: manager {}:{CM_DEFAULT_PORT}, {} nodes, {name}, {} s of traffic \
         through pauses",
        config.cm,
        config.nodes,
        config.pause_traffic.as_secs()
    );
    let kernel = Arc::new(Syscalls);
    report_to_stdout(&header, |tap| match role {
        Role::Survivor => run_survivor(&kernel, tap, &config),
        Role::Cut => run_cut(&kernel, tap, &config),
    })
}
