//! Cases that need several processes per node: the program starts copies
//! of itself (`lite-cluster-test __child KIND ARGS..`) as children.
//!
//! A child reports on stdout, one line each: `ok DESCRIPTION`,
//! `fail DESCRIPTION: REASON`, and `ready` when it waits for a line on
//! stdin before going on. The parent turns `ok`/`fail` lines into test
//! points. Only the real kernel can be shared with another process, so
//! these cases are skipped when [`Kernel::spawns_processes`] is false;
//! their barriers are still entered so all nodes stay in step.

use std::fmt::Display;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lite::sys::{LiteStats, NODE_SPREAD, PERM_READ, PERM_SHARE, PERM_WRITE, PRIORITY_NONE};

use super::io::{
    barrier, check_free, handle_of, name_of, own_counters, publish, read_vec, stats, write_ok,
    InStep, UserPages,
};
use super::{password_of, Node};
use crate::deadline::show;
use crate::errno::{describe_result, expect_errno, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::pattern;
use crate::plan::next_node;
use crate::tap::Tap;

/// First argument that makes the program act as a child.
pub const CHILD_SUBCOMMAND: &str = "__child";

pub(super) const WHY_SKIPPED: &str = "needs separate processes on the real kernel";
/// The point of the foreign handle case when it cannot run or fails whole.
const FOREIGN_HANDLE_CASE: &str =
    "a second process using this process's handle gets -EBADF for every call";
const LEAK_NAME: u16 = 0x4c4b;
const CONCURRENT_NAME: u16 = 0x434f;
const REGION: u64 = 768 << 10;
const RECORD: usize = 64;
const CHILDREN_PER_NODE: u32 = 2;

/// Longest a child process may run. A child may wait for other nodes (a
/// lock, a request) or for its parent, and its parent reads its output to
/// the end: past this the kernel ends it, so that nothing it waits for can
/// keep its parent waiting for ever. Longer than a barrier's bound, which
/// its parent may spend while it waits for the parent's word.
const CHILD_TIME_LIMIT: Duration = Duration::from_secs(15 * 60);

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let nodes = at.nodes;
    let real = kernel.spawns_processes();
    if real {
        foreign_handle(kernel, tap, at);
    } else {
        tap.skip(FOREIGN_HANDLE_CASE, WHY_SKIPPED);
    }
    barrier(kernel, tap, nodes, "the foreign handle case")?;
    leak(kernel, tap, at, real)?;
    concurrent(kernel, tap, at, real)
}

/// Stdin and stdout are piped.
pub(super) fn child_command(args: &[String]) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(exe);
    command.arg(CHILD_SUBCOMMAND).args(args);
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    command.stderr(Stdio::inherit());
    Ok(command)
}

pub(super) fn spawn(kind: &str, args: &[&dyn Display]) -> Result<Child, String> {
    let mut all = vec![kind.to_string()];
    all.extend(args.iter().map(|arg| arg.to_string()));
    let spawned = child_command(&all)?.spawn();
    spawned.map_err(|e| format!("spawning a child: {e}"))
}

/// In a child: says `ready`, then waits for a line on stdin or its end.
pub(super) fn ready_then_wait() {
    crate::say(format_args!("ready"));
    let _ = std::io::stdin().read_line(&mut String::new());
}

/// In the parent: gives a child waiting in [`ready_then_wait`] its word.
pub(super) fn tell_go(child: &mut Child) {
    if let Some(stdin) = child.stdin.as_mut() {
        let _ = stdin.write_all(b"go\n").and_then(|()| stdin.flush());
    }
}

pub(super) type ChildPoints = Vec<(String, Result<(), String>)>;

/// Prints a child's test point, as its parent [`collect`]s it.
pub(super) fn report_point(what: &str, outcome: Result<(), String>) {
    match outcome {
        Ok(()) => crate::say(format_args!("ok {what}")),
        Err(reason) => crate::say(format_args!("fail {what}: {reason}")),
    }
}

pub(super) fn collect<R: BufRead>(out: &mut R, until_ready: bool) -> ChildPoints {
    collect_with(out, until_ready, |_| {})
}

/// The first of a child's `points` that failed, as `WHAT: REASON`.
pub(super) fn first_failure(points: ChildPoints) -> Result<(), String> {
    let mut failed = points
        .into_iter()
        .filter_map(|(what, r)| Some((what, r.err()?)));
    failed
        .next()
        .map_or(Ok(()), |(what, e)| Err(format!("{what}: {e}")))
}

/// Keeps a failure already in `outcome`.
pub(super) fn keep_first_failure(outcome: &mut Result<(), String>, points: ChildPoints) {
    if outcome.is_ok() {
        *outcome = first_failure(points).map_err(|e| format!("child: {e}"));
    }
}

/// All passed, and `expected` of them.
pub(super) fn child_outcome(points: ChildPoints, expected: usize) -> Result<(), String> {
    if points.len() != expected {
        return Err(format!("reported {} of {expected} checks", points.len()));
    }
    first_failure(points)
}

/// Every point `child` reports until it ends, once it ended well.
pub(super) fn points_of(mut child: Child) -> Result<ChildPoints, String> {
    let out = child.stdout.take().ok_or("no stdout")?;
    let points = collect(&mut BufReader::new(out), false);
    finish(child)?;
    Ok(points)
}

/// Like [`collect`], handing every line that is not a point to `other`.
pub(super) fn collect_with<R: BufRead>(
    out: &mut R,
    until_ready: bool,
    mut other: impl FnMut(&str),
) -> ChildPoints {
    let mut points = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = line.trim_end();
        if text == "ready" && until_ready {
            break;
        }
        if let Some(what) = text.strip_prefix("ok ") {
            points.push((what.to_string(), Ok(())));
        } else if let Some(rest) = text.strip_prefix("fail ") {
            let (what, reason) = rest.split_once(": ").unwrap_or((rest, "failed"));
            points.push((what.to_string(), Err(reason.to_string())));
        } else {
            other(text);
        }
    }
    points
}

/// Gives `$plan`, a struct whose fields print and parse, its command line
/// after the child subcommand (`to_args`: `$kind`, then the fields) and
/// back (`from_args`, given what follows `$kind`); `$usage` names the
/// fields and each `$what` one of them, in the errors.
macro_rules! child_args {
    ($plan:ident, $kind:expr, $usage:literal, { $($field:ident: $what:literal),+ $(,)? }) => {
        impl $plan {
            fn to_args(self) -> Vec<String> {
                vec![$kind.to_string(), $(self.$field.to_string()),+]
            }

            fn from_args(args: &[String]) -> Result<$plan, String> {
                let [$($field),+] = args else {
                    return Err(format!(concat!("expected ", $usage, ", got {:?}"), args));
                };
                let bad = |what: &str, text: &str| format!("bad {what} {text:?}");
                Ok($plan {
                    $($field: $field.parse().map_err(|_| bad($what, $field))?,)+
                })
            }

            /// Asserts that the plan comes back from its command line,
            /// and that one field fewer, or `bad` as field `field`, does
            /// not parse.
            #[cfg(test)]
            fn assert_round_trip(self, field: usize, bad: &str) {
                let args = self.to_args();
                assert_eq!(args[0], $kind);
                assert_eq!($plan::from_args(&args[1..]), Ok(self));
                assert!($plan::from_args(&args[1..args.len() - 1]).is_err());
                let mut wrong = args[1..].to_vec();
                wrong[field] = bad.into();
                assert!($plan::from_args(&wrong).is_err());
            }
        }
    };
}
pub(crate) use child_args;

/// `body`'s status, 2 when `parse` rejects the `args`, `None` for another kind.
pub(super) fn run_child<T>(
    args: &[String],
    kind: &str,
    parse: impl FnOnce(&[String]) -> Result<T, String>,
    body: impl FnOnce(T) -> i32,
) -> Option<i32> {
    let (first, rest) = args.split_first()?;
    if first != kind {
        return None;
    }
    Some(match parse(rest) {
        Ok(plan) => body(plan),
        Err(reason) => {
            eprintln!("{kind}: {reason}");
            2
        }
    })
}

pub(super) fn finish(mut child: Child) -> Result<(), String> {
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the child: {e}"))?;
    if status.success() {
        Ok(())
    } else if status.signal() == Some(libc::SIGALRM) {
        Err(format!(
            "the child still ran after {}, its limit, and was ended: it waited for something that never came",
            show(CHILD_TIME_LIMIT)
        ))
    } else {
        Err(format!("child exited with {status}"))
    }
}

fn foreign_handle<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let target = next_node(me, nodes);
    let outcome = (|| -> Result<ChildPoints, String> {
        let lmr = Region::alloc(kernel, target, 4096, 0, password)?;
        let data = [0x3cu8; 64];
        lmr.write(0, &data, PRIORITY_NONE)?;
        let points = points_of(spawn("foreign-handle", &[&lmr.handle(), &password])?)?;
        let back = read_vec(kernel, lmr.handle(), 0, 64, password)?;
        if back != data {
            return Err("the LMR changed through the other process's calls".into());
        }
        lmr.free()?;
        Ok(points)
    })();
    match outcome {
        Ok(points) if !points.is_empty() => {
            for (what, result) in points {
                tap.check(&format!("node {me}: second process: {what}"), result);
            }
        }
        Ok(_) => tap.not_ok(FOREIGN_HANDLE_CASE, "the child reported nothing"),
        Err(reason) => tap.not_ok(FOREIGN_HANDLE_CASE, &reason),
    }
}

fn leak<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, real: bool) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let case = format!(
        "node {me}: a child that exits holding LMRs, a mapping, a registration, a name and 32 async writes leaves get_stats as before"
    );
    let name = name_of(LEAK_NAME, me);
    let published = if real {
        Region::alloc(kernel, me, 4096, 0, password)
            .and_then(|lmr| publish(kernel, name, lmr.handle(), password).map(|()| lmr))
    } else {
        Err(WHY_SKIPPED.to_string())
    };
    let after = |tap: &mut Tap<W>, what: &str| barrier(kernel, tap, nodes, what);
    after(tap, "publishing the LMR the exiting child maps")?;
    // Every node counts before any child allocates on it: the previous
    // node's child holds a chunk here while it lives.
    let before = stats(kernel);
    after(tap, "counting before the exiting children")?;
    let outcome = match &published {
        Ok(_) => (|| -> Result<(), String> {
            // What process exit must restore.
            let leak_view = |s: &LiteStats| (own_counters(s), s.held_chunks);
            let before = before?;
            let args: [&dyn Display; 4] = [&me, &next_node(me, nodes), &name, &password];
            let points = points_of(spawn("leak", &args)?)?;
            first_failure(points).map_err(|e| format!("child: {e}"))?;

            // Cleanup happens at exit; wait for every node's child.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let now = stats(kernel)?;
                if leak_view(&now) == leak_view(&before) {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    return Err(format!("before {before:?}, 10 s after exit {now:?}"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })(),
        Err(reason) => Err(reason.clone()),
    };
    // Judged after every node's child is gone.
    after(tap, "the exiting children")?;
    tap.check_or_skip(&case, (!real).then_some(WHY_SKIPPED), || outcome);
    check_free(tap, me, "the LMR the exiting child mapped", published.ok());
    Ok(())
}

fn record(node: u32, child: u32, index: u64) -> [u8; RECORD] {
    let mut record = [0u8; RECORD];
    record[..4].copy_from_slice(&node.to_le_bytes());
    record[4..8].copy_from_slice(&child.to_le_bytes());
    record[8..16].copy_from_slice(&index.to_le_bytes());
    pattern::fill(
        pattern::seed(&[u64::from(node), u64::from(child), index]),
        0,
        &mut record[16..56],
    );
    let sum = super::memory_ops::checksum(0, &record[..56]);
    record[56..].copy_from_slice(&sum.to_le_bytes());
    record
}

fn concurrent<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, real: bool) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let after = |tap: &mut Tap<W>, what: &str| barrier(kernel, tap, nodes, what);
    let owner = 1;
    let pw = password_of(owner);
    let size = u64::from(nodes * CHILDREN_PER_NODE) * REGION;
    let name = name_of(CONCURRENT_NAME, owner);
    let shared = if real && me == owner {
        let target = if nodes > 1 { NODE_SPREAD } else { me };
        let lmr = Region::alloc(kernel, target, size, 0, pw);
        let published = lmr
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|lmr| publish(kernel, name, lmr.handle(), pw));
        tap.check(
            &format!("node {me}: {size} B shared LMR for concurrent child processes allocated and published"),
            published,
        );
        lmr.ok()
    } else {
        None
    };
    after(tap, "publishing the LMR shared by child processes")?;
    let case = format!("node {me}: {CHILDREN_PER_NODE} child processes write checksummed records concurrently with all nodes and read every other region back with 0 mismatches");
    let mut children = Vec::new();
    let mut outcome: Result<(), String> = Ok(());
    if real {
        for index in 0..CHILDREN_PER_NODE {
            let args: [&dyn Display; 6] = [&owner, &name, &pw, &me, &index, &nodes];
            match spawn("concurrent", &args) {
                Ok(mut child) => {
                    let out = child.stdout.take().map(BufReader::new);
                    children.push((child, out));
                }
                Err(e) => outcome = Err(e),
            }
        }
        for (_, out) in &mut children {
            if let Some(out) = out {
                keep_first_failure(&mut outcome, collect(out, true));
            }
        }
    }
    if let Err(out_of_step) = after(tap, "every child process wrote its region") {
        // They wait for a go that will not come.
        for (mut child, _) in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        return Err(out_of_step);
    }
    for (child, out) in &mut children {
        tell_go(child);
        if let Some(out) = out {
            keep_first_failure(&mut outcome, collect(out, false));
        }
    }
    for (child, _) in children {
        outcome = outcome.and(finish(child));
    }
    after(tap, "every child process read the other regions")?;
    tap.check_or_skip(&case, (!real).then_some(WHY_SKIPPED), || outcome);
    check_free(tap, me, "the LMR shared by child processes", shared);
    Ok(())
}

/// The child ends after [`CHILD_TIME_LIMIT`] at the latest.
pub fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> i32 {
    if kernel.spawns_processes() {
        let seconds = u32::try_from(CHILD_TIME_LIMIT.as_secs()).unwrap_or(u32::MAX);
        // SAFETY: alarm only arms this process's timer; SIGALRM keeps its
        // default action, which ends the process.
        unsafe { libc::alarm(seconds) };
    }
    // The cases with children of their own kinds, each `None` for others.
    let cases = [
        super::rpc::child_main::<K>,
        super::sync::child_main,
        super::membership_auth::child_main,
        super::privilege::child_main,
        super::quotas::child_main,
        super::stress::child_main,
    ];
    if let Some(status) = cases.iter().find_map(|case| case(kernel, args)) {
        return status;
    }
    let ready = || crate::say(format_args!("ready"));
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0) };
    match args.first().map(String::as_str) {
        Some("foreign-handle") => {
            let (h, pw) = (number(1), number(2));
            let (data, mut buf) = ([0u8; 16], [0u8; 16]);
            let (from, into) = (data.as_ptr().cast(), buf.as_mut_ptr().cast());
            let (none, name) = (PRIORITY_NONE, name_of(0x4642, 0));
            // SAFETY: `data`/`buf` are valid for 16 bytes; the async write
            // takes its data before returning.
            let calls = unsafe {
                [
                    ("rdma_read", kernel.rdma_read(h, into, 16, 0, none, pw)),
                    ("rdma_write", kernel.rdma_write(h, from, 16, 0, none, pw)),
                    (
                        "rdma_write_async",
                        kernel.rdma_write_async(h, from, 16, 0, none, pw),
                    ),
                    ("remote_memset", kernel.remote_memset(h, 0, 16, 1)),
                    ("memcpy", kernel.memcpy(h, 0, h, 32, 16)),
                    (
                        "add_ask_mr_table",
                        kernel.add_ask_mr_table(name, h, PERM_READ, pw),
                    ),
                    ("umap_lmr", kernel.umap_lmr(h)),
                    ("deregister_lmr", kernel.deregister_lmr(h)),
                    ("free", kernel.free(h)),
                ]
            };
            for (call, ret) in calls {
                let what = format!("{call} returns -EBADF");
                report_point(&what, expect_errno(ret, libc::EBADF));
            }
            0
        }
        Some("leak") => {
            let (me, next, name, pw) = (number(1) as u32, number(2) as u32, number(3), number(4));
            let outcome = (|| -> Result<(), String> {
                let alloc = |node, what| handle_of(kernel.alloc_remote(node, 65536, 0, pw), what);
                let local = alloc(me, "alloc_remote local")?;
                let remote = alloc(next, "alloc_remote remote")?;
                let shared = name_of(LEAK_NAME + 1, me);
                let ret = kernel.add_ask_mr_table(shared, local, PERM_READ | PERM_SHARE, pw);
                expect_zero(ret).map_err(|e| format!("publish: {e}"))?;
                let mapped = kernel.ask_lmr(me, name, PERM_READ | PERM_WRITE, pw);
                handle_of(mapped, "ask_lmr")?;
                let pages = UserPages::new(65536)?;
                // SAFETY: the pages stay mapped until the process exits.
                let ret = unsafe { pages.register(kernel, (0, 65536), PERM_READ | PERM_WRITE, pw) };
                handle_of(ret, "register_lmr")?;
                std::mem::forget(pages);
                let data = vec![0x11u8; 2048];
                for i in 0..32u64 {
                    // SAFETY: the data is taken before the call returns.
                    let ret = unsafe {
                        let (at, none) = (data.as_ptr().cast(), PRIORITY_NONE);
                        kernel.rdma_write_async(remote, at, 2048, i * 2048, none, pw)
                    };
                    handle_of(ret, "rdma_write_async")?;
                }
                Ok(())
            })();
            report_point("set up everything and exit without releasing it", outcome);
            0
        }
        Some("concurrent") => {
            let [owner, name, pw, node, index, nodes] = [1, 2, 3, 4, 5, 6].map(number);
            let [owner, node, index, nodes] = [owner, node, index, nodes].map(|n| n as u32);
            let mapped = kernel.ask_lmr(owner, name, PERM_READ | PERM_WRITE, pw);
            let mapping = match handle_of(mapped, "ask_lmr") {
                Ok(h) => h,
                Err(e) => {
                    report_point("map the shared LMR", Err(e));
                    ready();
                    return 1;
                }
            };
            let region_of = |n: u32, c: u32| u64::from((n - 1) * CHILDREN_PER_NODE + c) * REGION;
            let records = REGION / RECORD as u64;
            let batch = 256u64;
            let outcome = (0..records).step_by(batch as usize).try_for_each(|first| {
                let indices = first..(first + batch).min(records);
                let buf: Vec<u8> = indices.flat_map(|i| record(node, index, i)).collect();
                let offset = region_of(node, index) + first * RECORD as u64;
                write_ok(kernel, mapping, offset, &buf, pw)
            });
            report_point(
                &format!("write region of child {index} on node {node}"),
                outcome,
            );
            ready_then_wait();
            let mut mismatches = 0;
            let mut failure = None;
            for n in 1..=nodes {
                for c in 0..CHILDREN_PER_NODE {
                    if (n, c) == (node, index) {
                        continue;
                    }
                    match read_vec(kernel, mapping, region_of(n, c), REGION as usize, pw) {
                        Ok(back) => {
                            let found = back.chunks(RECORD).zip(0..);
                            mismatches += found.filter(|&(got, i)| got != record(n, c, i)).count();
                        }
                        Err(e) => failure = Some(e),
                    }
                }
            }
            let outcome = match failure {
                Some(e) => Err(e),
                None if mismatches == 0 => Ok(()),
                None => Err(format!("{mismatches} record(s) differ")),
            };
            report_point("read every other region", outcome);
            let _ = kernel.umap_lmr(mapping);
            0
        }
        other => {
            eprintln!("unknown child kind {other:?}: {}", describe_result(-22));
            2
        }
    }
}
