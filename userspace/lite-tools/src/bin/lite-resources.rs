//! `lite-resources`: checks that LITE's resource counters came back to
//! their baseline once this node's test programs have ended.
//!
//! The baseline is the file `lite-cluster-test --resources-baseline FILE`
//! saved. Other nodes' programs may still hold memory on this node for a
//! while, so the counters are read again every second until they are back
//! or `--wait` seconds have passed (see [`lite_tools::resources`]). The
//! output is TAP version 13, one point per counter, followed by one line
//! `P passed, F failed`; the exit status is 0 exactly when F is 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use lite_tools::args::{option, ArgError, Cli, OptionSpec, Parsed};
use lite_tools::debugfs::read_file;
use lite_tools::resources::{check, RESOURCES_FILE};
use lite_tools::tap::report_to_stdout;

/// Default of `--wait`: the nodes end their tests within a minute or two
/// of each other.
const DEFAULT_WAIT_SECS: u64 = 120;

const CLI: Cli = Cli {
    program: "lite-resources",
    synopsis: "--baseline FILE [--wait SECONDS]",
    about: "Checks that LITE's resource counters are back to their baseline; reports TAP.",
    options: &[BASELINE_OPTION, WAIT_OPTION],
};

const BASELINE_OPTION: OptionSpec = option(
    "baseline",
    "FILE",
    "counters saved by lite-cluster-test --resources-baseline",
);

const WAIT_OPTION: OptionSpec = option(
    "wait",
    "SECONDS",
    "longest wait for the counters to come back (default 120)",
);

fn parse_config(parsed: &Parsed) -> Result<(PathBuf, Duration), ArgError> {
    let baseline: String = parsed.required("baseline")?;
    let wait = parsed.optional("wait", DEFAULT_WAIT_SECS)?;
    Ok((PathBuf::from(baseline), Duration::from_secs(wait)))
}

fn main() -> ExitCode {
    let (baseline_path, wait) = CLI.config_or_exit(parse_config);
    let header = format!(
        "lite-resources: baseline {}, waiting up to {} s",
        baseline_path.display(),
        wait.as_secs()
    );
    report_to_stdout(&header, |tap| {
        let baseline = std::fs::read_to_string(&baseline_path)
            .map_err(|e| format!("cannot read {}: {e}", baseline_path.display()));
        let read = || read_file(RESOURCES_FILE);
        check(tap, &baseline_path, baseline, read, thread::sleep, wait);
    })
}
