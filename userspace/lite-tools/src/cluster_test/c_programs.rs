//! LITE's C and Python programs, run on every node at once: the
//! compatibility library's test (linked with `lite-lib.so` and with
//! `liblite-compat.a`) and the C examples of `userspace/examples/` that
//! `userspace/compat` builds, all installed in the guests' `/usr/bin`, and
//! the Python package's cluster test.

use std::io::{BufReader, Read, Write};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::io::{barrier, InStep};
use super::processes::collect;
use super::processes::WHY_SKIPPED;
use crate::kernel::Kernel;
use crate::tap::Tap;

const PROGRAM_DIR: &str = "/usr/bin";

/// Where the harness's `guest_python` puts it.
const PYTHON_TEST: &str = "/usr/share/lite/python/cluster_test.py";

/// The README's Python snippet in the guests.
const README_EXAMPLE: &str = "/usr/share/lite/python/readme_example.py";

/// Linked both ways.
const COMPAT_TESTS: [&str; 2] = ["lite-compat-test", "lite-compat-test-static"];

const PROGRAM_LIMIT: Duration = Duration::from_secs(180);

const RPC_SERVER: u32 = 1;

pub(super) struct Finished {
    pub(super) status: ExitStatus,
    pub(super) stdout: String,
}

fn start(dir: &str, program: &str, args: &[String]) -> Result<std::process::Child, String> {
    Command::new(Path::new(dir).join(program))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))
}

/// Kills `child` after [`PROGRAM_LIMIT`]; reads its output meanwhile.
fn finish(program: &str, mut child: std::process::Child) -> Result<Finished, String> {
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        })
    });
    let begun = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if begun.elapsed() > PROGRAM_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} still ran after {PROGRAM_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    };
    let stdout = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    Ok(Finished { status, stdout })
}

fn run_program(program: &str, args: &[String]) -> Result<Finished, String> {
    run_in(PROGRAM_DIR, program, args)
}

pub(super) fn run_in(dir: &str, program: &str, args: &[String]) -> Result<Finished, String> {
    finish(program, start(dir, program, args)?)
}

pub(super) fn judge(finished: &Finished, wanted: &[&str]) -> Result<(), String> {
    if !finished.status.success() {
        return Err(format!(
            "exited with {}; printed: {}",
            finished.status,
            finished.stdout.trim_end()
        ));
    }
    match wanted.iter().find(|w| !finished.stdout.contains(*w)) {
        Some(missing) => Err(format!(
            "printed no \"{missing}\": {}",
            finished.stdout.trim_end()
        )),
        None => Ok(()),
    }
}

/// Runs a test program that reports points (`ok WHAT`, `fail WHAT: WHY`,
/// last `ok all N checks ran`) and reports them as `label: WHAT`.
fn points_test<W: Write>(tap: &mut Tap<W>, label: &str, program: &str, args: &[String], me: u32) {
    let outcome = run_program(program, args);
    let finished = match outcome {
        Ok(finished) => finished,
        Err(e) => {
            tap.check(&format!("node {me}: {label} runs to the end"), Err(e));
            return;
        }
    };
    let points = collect(&mut BufReader::new(finished.stdout.as_bytes()), false);
    let mut ran_all = false;
    for (what, result) in points {
        if what.starts_with("all ") && what.ends_with(" checks ran") {
            ran_all = true;
            continue;
        }
        tap.check(&format!("{label}: {what}"), result);
    }
    let ending = if !ran_all {
        Err(format!("it stopped early ({})", finished.status))
    } else if !finished.status.success() {
        Err(format!("it exited with {}", finished.status))
    } else {
        Ok(())
    };
    tap.check(
        &format!("node {me}: {label} ran every check and exited with 0"),
        ending,
    );
}

fn check_program<W: Write>(
    tap: &mut Tap<W>,
    point: &str,
    program: &str,
    args: &[&str],
    wanted: &[&str],
) {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    tap.check(
        point,
        run_program(program, &args).and_then(|f| judge(&f, wanted)),
    );
}

/// `lite_rpc`: node [`RPC_SERVER`] serves, the last node calls it.
fn rpc_example<W: Write>(tap: &mut Tap<W>, cm: &str, me: u32, nodes: u32) {
    if me == RPC_SERVER {
        let point = format!("node {me}: lite_rpc server answers until told to stop");
        check_program(tap, &point, "lite_rpc", &[cm, "server"], &["stopped"]);
    }
    if me == nodes {
        let point = format!(
            "node {me}: lite_rpc client gets a reply to each request from node {RPC_SERVER}"
        );
        let args = [cm, "client", &RPC_SERVER.to_string()];
        let wanted = ["hello -> ", "remote -> ", "procedure -> "];
        check_program(tap, &point, "lite_rpc", &args, &wanted);
    }
}

pub(super) fn run<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    cm: Ipv4Addr,
    me: u32,
    nodes: u32,
) -> InStep {
    let names = [
        "the compatibility library's test, both builds",
        "the Python package's cluster test",
        "the README's Python snippet",
        "lite_hello",
        "lite_share",
        "lite_rpc",
        "lite_lock",
    ];
    if !kernel.spawns_processes() {
        for name in names {
            tap.skip(&format!("node {me}: {name}"), WHY_SKIPPED);
        }
        return Ok(());
    }
    let cm = cm.to_string();
    barrier(kernel, tap, nodes, "the C programs")?;
    let me_nodes = [me.to_string(), nodes.to_string()];
    for program in COMPAT_TESTS {
        points_test(tap, program, program, &me_nodes, me);
    }
    let mut python_args = vec![PYTHON_TEST.to_string()];
    python_args.extend(me_nodes);
    points_test(tap, "python", "python3", &python_args, me);
    let point = format!("node {me}: the README's Python snippet runs without an error");
    check_program(tap, &point, "python3", &[README_EXAMPLE], &[]);
    let point = format!("node {me}: lite_hello writes hello to another node and reads it back");
    let wanted = ["read back from node", ": hello"];
    check_program(tap, &point, "lite_hello", &[&cm], &wanted);
    let wanted: &[&str] = match me {
        1 => &["published"],
        2 => &["read from node 1: shared by name"],
        _ => &[],
    };
    let cm_nodes = [cm.as_str(), &nodes.to_string()];
    let point =
        format!("node {me}: lite_share on {nodes} nodes (node 2 reads what node 1 published)");
    check_program(tap, &point, "lite_share", &cm_nodes, wanted);

    barrier(kernel, tap, nodes, "lite_rpc")?;
    rpc_example(tap, &cm, me, nodes);

    barrier(kernel, tap, nodes, "lite_lock")?;
    let point =
        format!("node {me}: lite_lock on {nodes} nodes counts every increment under the lock");
    check_program(tap, &point, "lite_lock", &cm_nodes, &[]);
    barrier(kernel, tap, nodes, "the C programs' end")
}
