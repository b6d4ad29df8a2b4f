//! `lite-failure-test`: the LITE node failure test
//! ([`lite_tools::failure_test`]), run by every node at once, one as the
//! victim; its output is as userspace/README.md's output contracts say. A
//! survivor leaves the node a member, for the programs run after it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lite::sys::CM_DEFAULT_PORT;
use lite_tools::args::{in_range, invalid, option, ArgError, Cli, Parsed, CM_OPTION};
use lite_tools::failure_test::{
    run_survivor, run_victim, CyclePacing, FailureConfig, Role, OVERLOAD, READY_MARKER,
};
use lite_tools::guest_devices::InterfaceAddress;
use lite_tools::kernel::Syscalls;
use lite_tools::tap::report_to_stdout;
use lite_tools::{parse_cm_address, say, MAX_CLUSTER_NODES};

const CLI: Cli = Cli {
    program: "lite-failure-test",
    synopsis: "--cm IP --nodes N --role survivor|victim [--second-address ADDR/LEN]",
    about: "Runs one node's part of the LITE node failure test.",
    options: &[
        CM_OPTION,
        option(
            "nodes",
            "N",
            "number of nodes, the victim included (at least 3)",
        ),
        option(
            "role",
            "ROLE",
            "survivor (checks and reports TAP) or victim (gets killed)",
        ),
        option(
            "second-address",
            "ADDR/LEN",
            "address of eth1, on which the leaver adds a second Soft-RoCE device \
                   (default: it keeps rxe0)",
        ),
    ],
};

/// In case a kernel message cut into an earlier marker on the console.
const MARKER_REPEAT: Duration = Duration::from_secs(5);

fn parse_config(parsed: &Parsed) -> Result<(FailureConfig, Role), ArgError> {
    let config = FailureConfig {
        cm: parsed.required_with("cm", parse_cm_address)?,
        // The victim and at least two survivors, so that LMR B lives on
        // another survivor.
        nodes: in_range("nodes", parsed.required("nodes")?, 3..=MAX_CLUSTER_NODES)?,
        pacing: CyclePacing::VMS,
        overload: OVERLOAD,
        second_address: parsed
            .get("second-address")
            .map(|text| {
                InterfaceAddress::parse(text)
                    .map_err(|reason| invalid("second-address", text, reason))
            })
            .transpose()?,
    };
    let role = parsed.required_with("role", Role::parse)?;
    Ok((config, role))
}

fn main() -> ExitCode {
    let (config, role) = CLI.config_or_exit(parse_config);
    match role {
        Role::Victim => {
            let mut out = std::io::stdout();
            if let Err(reason) = run_victim(&Syscalls, &config, &mut out) {
                say(format_args!("lite-failure-test: victim: FAILED {reason}"));
                return ExitCode::FAILURE;
            }
            // The port, the lock and the LMRs belong to this process: it
            // must live until the harness kills the machine.
            loop {
                std::thread::sleep(MARKER_REPEAT);
                say(format_args!("{READY_MARKER}"));
            }
        }
        Role::Survivor => {
            let header = format!(
                "lite-failure-test: manager {}:{CM_DEFAULT_PORT}, {} nodes, survivor",
                config.cm, config.nodes
            );
            report_to_stdout(&header, |tap| {
                run_survivor(&Arc::new(Syscalls), tap, &config)
            })
        }
    }
}
