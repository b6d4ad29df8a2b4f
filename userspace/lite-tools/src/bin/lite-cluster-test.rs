//! `lite-cluster-test`: the LITE cluster test.
//!
//! Every node of the cluster runs it at the same time (see
//! [`lite_tools::cluster_test`] for what it checks, and the output
//! contracts in `userspace/README.md` for what it prints).
//!
//! With `--resources-baseline FILE` it saves LITE's resource counters to
//! FILE once every node joined, before it makes any LMR, for
//! `lite-resources` to compare with after the tests.

use std::path::PathBuf;
use std::process::ExitCode;

use lite::sys::CM_DEFAULT_PORT;
use lite_tools::args::{in_range, option, ArgError, Cli, Parsed, CM_OPTION};
use lite_tools::cluster_test::{child_main, run, TestConfig, CHILD_SUBCOMMAND};
use lite_tools::kernel::{Kernel, Syscalls};
use lite_tools::plan::DATA_BUDGET_BYTES;
use lite_tools::resources::{save_baseline, RESOURCES_FILE};
use lite_tools::tap::report_to_stdout;
use lite_tools::{parse_cm_address, MAX_CLUSTER_NODES};

const CLI: Cli = Cli {
    program: "lite-cluster-test",
    synopsis: "--cm IP --nodes N [--resources-baseline FILE]",
    about: "Runs the LITE cluster test on this node and reports TAP.",
    options: &[
        CM_OPTION,
        option("nodes", "N", "number of nodes running the test"),
        option(
            "resources-baseline",
            "FILE",
            "save LITE's resource counters to FILE once all nodes joined",
        ),
    ],
};

fn parse_config(parsed: &Parsed) -> Result<(TestConfig, Option<PathBuf>), ArgError> {
    let config = TestConfig {
        cm: parsed.required_with("cm", parse_cm_address)?,
        nodes: in_range("nodes", parsed.required("nodes")?, 1..=MAX_CLUSTER_NODES)?,
        data_budget: DATA_BUDGET_BYTES,
    };
    Ok((config, parsed.get("resources-baseline").map(PathBuf::from)))
}

fn main() -> ExitCode {
    // A copy of this program started by the test as a second process.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(CHILD_SUBCOMMAND) {
        std::process::exit(child_main(&Syscalls, &args[1..]));
    }
    let (config, baseline) = CLI.config_or_exit(parse_config);
    let header = format!(
        "lite-cluster-test: manager {}:{CM_DEFAULT_PORT}, {} nodes",
        config.cm, config.nodes
    );
    report_to_stdout(&header, |tap| {
        run(&Syscalls, tap, &config, |kernel, tap| {
            if let Some(path) = &baseline {
                save_baseline(tap, kernel.read_debugfs(RESOURCES_FILE), path);
            }
        });
    })
}
