//! The texts that the harness and the programs it drives must write alike:
//! markers, constants and messages the harness looks for in what another
//! program prints (or gives it), each checked against that program's
//! source, word for word.

// Only the test below reads the sources.
#![cfg(test)]

use crate::guest_python::{CLUSTER_TEST, README_EXAMPLE};
use crate::paths::repo_root;
use crate::{cluster, failure, fuzz, initramfs, suite, user_cluster};

/// A file of `lite-tools`' sources.
macro_rules! tools {
    ($file:literal) => {
        concat!("userspace/lite-tools/src/", $file)
    };
}

const FAILURE_TEST: &str = tools!("failure_test.rs");
const FUZZ_REPORT: &str = tools!("fuzz/report.rs");
const RUNNER: &str = tools!("cluster_test/c_programs.rs");
const PARTITION: &str = tools!("partition_test.rs");
const PAUSES: &str = tools!("partition_test/pauses.rs");
const COMPAT: &str = "userspace/compat/src/lib.rs";
const EXAMPLE: &str = suite::EXEC_EXAMPLE;

/// Each text, and the file of the repository that must hold it.
fn shared_texts() -> Vec<(&'static str, String)> {
    // String constants: the file, the declaration up to its name, and
    // the value.
    let constants = [
        (FAILURE_TEST, "READY_MARKER", failure::VICTIM_READY),
        (FUZZ_REPORT, "pub const CALLS_PREFIX", fuzz::CALLS_PREFIX),
        (FUZZ_REPORT, "pub const TOTAL_PREFIX", fuzz::TOTAL_PREFIX),
        (FUZZ_REPORT, "pub const ALARM_PREFIX", fuzz::ALARM_PREFIX),
        (RUNNER, "const PYTHON_TEST", CLUSTER_TEST),
        (RUNNER, "const README_EXAMPLE", README_EXAMPLE),
        (COMPAT, "GUEST_LIBRARY", initramfs::GUEST_C_LIBRARY),
        (COMPAT, "ARTIFACT_DIR", initramfs::C_ARTIFACT_DIR),
        // Each marker of `lite-partition-test`, printed as a TAP comment
        // (below), which the harness finds like any other line.
        (PARTITION, "READY_MARKER", suite::CUT_READY),
        (PARTITION, "SURVIVOR_READY_MARKER", suite::SURVIVOR_READY),
        (PAUSES, "pub const PAUSE_READY_MARKER", suite::PAUSE_READY),
        (PAUSES, "pub const PAUSES_OVER_MARKER", suite::PAUSES_OVER),
    ];
    let mut texts = Vec::new();
    for (file, declared, value) in constants {
        texts.push((file, format!("{declared}: &str = \"{value}\";")));
        if [PARTITION, PAUSES].contains(&file) {
            let name = declared.trim_start_matches("pub const ");
            texts.push((file, format!("tap.comment({name})")));
        }
    }
    // Each text, after the file that holds it.
    let lines = [
        "userspace/lite-tools/src/bin/lite-partition-test.rs: parsed.optional(\"pause-traffic\", 0)",
        // The example takes its message from argv[1] and prints that it
        // read it back.
        "userspace/examples/hello_cluster.c: snprintf(message, sizeof(message), \"%s\", argv[1]);",
        "userspace/examples/hello_cluster.c: #define PROGRAM \"hello_cluster\"",
        "userspace/examples/hello_cluster.c: printf(PROGRAM \": node %ld read back from node %ld: \\\"%s\\\"%s\\n\", node_id,",
        // The convention of the compatibility library, which a program
        // written for the original LITE follows without a change.
        "userspace/compat/lite-lib.c: #define CM_ADDRESS_ENV\t\"LITE_CM_ADDRESS\"",
        // The manager's words for the deaths, silences and suspicions.
        "userspace/cluster-manager/src/manager.rs: ) declared dead: ",
        "userspace/cluster-manager/src/manager.rs:  was silent for ",
        "userspace/cluster-manager/src/manager.rs:  ms (late; ",
        "userspace/cluster-manager/src/manager.rs: ) suspected: silent for ",
    ];
    let lines = lines.map(|line| line.split_once(": ").expect("file: text"));
    texts.extend(lines.map(|(file, text)| (file, text.to_owned())));
    let port = format!("#define LITE_CM_DEFAULT_PORT\t{}\n", cluster::MANAGER_PORT);
    texts.push(("userspace/include/lite.h", port));
    // The kernel's message when a node joined.
    let joined = suite::JOINED_AS;
    let joined = format!("\"{joined}{{}} (incarnation {{}}) of {{}} on {{}} port {{}}\\n\"");
    texts.push(("rust-lite/internal/node.rs", joined));
    let environment = user_cluster::program_environment(1, 1).into_iter();
    texts.extend(environment.map(|(name, _)| (EXAMPLE, format!("getenv(\"{name}\")"))));
    texts
}

#[test]
fn every_program_writes_what_the_harness_reads() {
    for (file, text) in shared_texts() {
        let source = std::fs::read_to_string(repo_root().join(file))
            .unwrap_or_else(|err| panic!("cannot read {file}: {err}"));
        assert!(source.contains(&text), "{file} lacks {text:?}");
    }
}
