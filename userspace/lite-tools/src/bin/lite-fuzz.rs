//! `lite-fuzz`: the LITE system call fuzzer.
//!
//! Every node of the cluster runs it at the same time (see
//! [`lite_tools::fuzz`] for what it does). The output is TAP version 13
//! followed by one line `P passed, F failed`; the exit status is 0 exactly
//! when F is 0.

use std::process::ExitCode;

use lite::sys::CM_DEFAULT_PORT;
use lite_tools::args::{in_range, invalid, option, ArgError, Cli, Parsed, CM_OPTION};
use lite_tools::fuzz::{
    parse_seed, run, seed_from_clock, FuzzConfig, DEFAULT_PROCS, DEFAULT_SECONDS, DEFAULT_THREADS,
    MAX_FUZZ_PROCS, MAX_FUZZ_THREADS,
};
use lite_tools::tap::report_to_stdout;
use lite_tools::{parse_cm_address, MAX_CLUSTER_NODES};

const CLI: Cli = Cli {
    program: "lite-fuzz",
    synopsis: "--cm IP --nodes N [--seconds S] [--seed X] [--procs P] [--threads T]",
    about: "Fuzzes LITE's system calls on this node, with every other node of the cluster, and reports TAP.",
    options: &[
        CM_OPTION,
        option("nodes", "N", "number of nodes, all running lite-fuzz"),
        option("seconds", "S", "how long to fuzz (default 60)"),
        option("seed", "X", "seed, decimal or 0x-hex (default: from the clock)"),
        option("procs", "P", "fuzzing processes (default 3, at most 8)"),
        option("threads", "T", "threads per process (default 3, at most 8)"),
    ],
};

fn parse_config(parsed: &Parsed) -> Result<FuzzConfig, ArgError> {
    let seed = match parsed.get("seed") {
        Some(text) => parse_seed(text).map_err(|reason| invalid("seed", text, reason))?,
        None => seed_from_clock(),
    };
    // How many processes or threads, 1 at the least.
    let count = |name, default, max| in_range(name, parsed.optional(name, default)?, 1..=max);
    Ok(FuzzConfig {
        cm: parsed.required_with("cm", parse_cm_address)?,
        nodes: in_range("nodes", parsed.required("nodes")?, 1..=MAX_CLUSTER_NODES)?,
        seconds: in_range(
            "seconds",
            parsed.optional("seconds", DEFAULT_SECONDS)?,
            1..=7 * 24 * 3600,
        )?,
        seed,
        procs: count("procs", DEFAULT_PROCS, MAX_FUZZ_PROCS)?,
        threads: count("threads", DEFAULT_THREADS, MAX_FUZZ_THREADS)?,
    })
}

fn main() -> ExitCode {
    let config = CLI.config_or_exit(parse_config);
    let header = format!(
        "lite-fuzz: manager {}:{CM_DEFAULT_PORT}, {} nodes",
        config.cm, config.nodes
    );
    report_to_stdout(&header, |tap| run(tap, &config))
}
