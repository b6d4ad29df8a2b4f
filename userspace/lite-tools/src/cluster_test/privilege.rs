//! Privilege: joining and leaving need `CAP_NET_ADMIN` (or membership of
//! the administrators' group), using LMRs and locks needs nothing.
//!
//! Every node starts a copy of the program as user and group 65534
//! (`nobody`, no capabilities), which must get `-EPERM` from `lite_join`
//! and `lite_leave`, also for requests that would fail otherwise (the
//! privilege is checked first), and must still be able to use an LMR and a
//! lock. This process then checks that the node is still a member and that
//! its own calls still work.
//!
//! The nodes do this between the join barrier and a barrier of their own,
//! touching nothing of the other nodes but one small LMR each, so that a
//! kernel letting the unprivileged leave through disturbs no other case;
//! this node then joins again at once.
//!
//! Between that process and the membership check, [`admin_group`]
//! checks that processes of `nobody` in the group named in debugfs
//! `admin_group` pass the privilege check of `lite_join` (they never call
//! `lite_leave`), while others, and the same once the group is unset, do
//! not.
//!
//! A kernel model cannot start a process under another user: there the same
//! calls run in an unprivileged process of the model
//! ([`Kernel::unprivileged_process`], [`Kernel::process_of_user_and_group`]).

use std::fs;
use std::io::{BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Child;

use libc::{c_long, getegid, geteuid, getgid, getuid};
use lite::sys::{CM_DEFAULT_PORT, LEAVE_FORCE, PRIORITY_NONE};

use super::processes::{
    child_args, child_command, collect, finish, report_point, run_child, ChildPoints,
};
use super::sync::{create_lock, lock_and_unlock};
use super::{
    expect_value, join_with_text, password_of, target_name, TestConfig, UNKNOWN_LEAVE_FLAG,
};
use crate::errno::{describe_result, expect_errno};
use crate::kernel::{Kernel, Region};
use crate::pattern;
use crate::plan::next_node;
use crate::tap::Tap;
use crate::IB_PORT;

mod admin_group;

/// User and group the unprivileged copy runs as (`nobody`, `nogroup`).
const NOBODY: u32 = 65534;

const KIND: &str = "unprivileged";

const LMR_SIZE: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    /// The manager, which it tries to join.
    cm: Ipv4Addr,
    /// This node.
    me: u32,
    /// Where its LMR goes.
    target: u32,
    /// The password of its LMR.
    password: u64,
}

child_args!(Probe, KIND, "CM NODE TARGET PASSWORD", {
    cm: "manager address",
    me: "node",
    target: "target node",
    password: "password",
});

/// Ends by checking that the node is still a member.
pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, config: &TestConfig) {
    let probe = Probe {
        cm: config.cm,
        me,
        target: next_node(me, config.nodes),
        password: password_of(me),
    };
    let total = kernel.get_total_node();
    let who = format!("node {me}: an unprivileged process");
    let probed = if kernel.spawns_processes() {
        let (points, exit) = in_child(NOBODY, NOBODY, &probe.to_args());
        report(tap, &format!("{who} (uid {NOBODY})"), points);
        let point = format!("node {me}: the copy of this program started as uid {NOBODY}, gid {NOBODY} exits with status 0");
        tap.check(&point, exit);
        true
    } else if let Some(process) = kernel.unprivileged_process() {
        tap.comment(&format!(
            "node {me}: no process started as uid {NOBODY}: the kernel model runs the unprivileged calls in an unprivileged process of its own"
        ));
        let calls = unprivileged_calls(&process, probe);
        report(tap, &format!("{who} (modelled)"), calls);
        true
    } else {
        let point =
            format!("{who} gets -EPERM from lite_join and lite_leave and can use LMRs and locks");
        tap.skip(&point, "this kernel offers no unprivileged process");
        false
    };
    admin_group::run(kernel, tap, me, config.cm);
    if probed {
        still_member(kernel, tap, probe, total);
    }
}

/// Reports a process's points, each prefixed with `who`.
pub(super) fn report<W: Write>(tap: &mut Tap<W>, who: &str, points: ChildPoints) {
    if points.is_empty() {
        tap.not_ok(&format!("{who} reports its calls"), "it reported nothing");
    }
    for (what, outcome) in points {
        tap.check(&format!("{who} {what}"), outcome);
    }
}

/// The descriptions hold no `": "`, as a child's `fail` lines need.
fn unprivileged_calls<K: Kernel>(kernel: &K, probe: Probe) -> ChildPoints {
    let (cm, me, target) = (probe.cm, probe.me, probe.target);
    let eperm = |call: &str, ret| {
        (
            format!("gets -EPERM from {call}"),
            expect_errno(ret, libc::EPERM),
        )
    };
    let join = format!("lite_join({cm}, {CM_DEFAULT_PORT}, {IB_PORT})");
    let bad_join = "lite_join(\"not-an-ip\"), the privilege being checked first";
    let flagged = format!(
        "lite_leave({UNKNOWN_LEAVE_FLAG:#x}), the privilege being checked before the flags"
    );
    let lmr = format!(
        "can allocate a {LMR_SIZE} B LMR on {}, write a pattern, read it back and free it",
        target_name(me, target)
    );
    // Joins first: on a member node, a join that skips the privilege check
    // fails harmlessly with -EISCONN; after a leave that wrongly went
    // through it would join for real.
    vec![
        eperm(&join, join_with_text(kernel, &cm.to_string())),
        eperm(bad_join, join_with_text(kernel, "not-an-ip")),
        eperm("lite_leave(0)", kernel.leave(0)),
        eperm("lite_leave(LITE_LEAVE_FORCE)", kernel.leave(LEAVE_FORCE)),
        eperm(&flagged, kernel.leave(UNKNOWN_LEAVE_FLAG)),
        (lmr, lmr_round_trip(kernel, probe)),
        (
            format!("can create a lock on node {me}, lock and unlock it"),
            create_lock(kernel, me).and_then(|lock| lock_and_unlock(kernel, &lock)),
        ),
    ]
}

fn lmr_round_trip<K: Kernel>(kernel: &K, probe: Probe) -> Result<(), String> {
    let (me, target, password) = (probe.me, probe.target, probe.password);
    let lmr = Region::alloc(kernel, target, LMR_SIZE, 0, password)?;
    let seed = pattern::seed(&[u64::from(me), u64::from(target), u64::from(NOBODY)]);
    super::whole_round_trip(&lmr, seed, PRIORITY_NONE, &mut Vec::new())?;
    lmr.free()
}

/// The node must be a member as before, and this process's calls must
/// work. A node that left after all is joined again at once, so that the
/// other nodes, waiting in the next barrier, can go on with it.
fn still_member<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, probe: Probe, total: c_long) {
    let (cm, me) = (probe.cm, probe.me);
    let id = kernel.get_node_id();
    let outcome = if id == -c_long::from(libc::ENOTCONN) {
        let rejoined = join_with_text(kernel, &cm.to_string());
        Err(format!(
            "get_node_id returned {}: the node left the cluster; joining again returned {}",
            describe_result(id),
            describe_result(rejoined)
        ))
    } else {
        let id = expect_value(id, me.into()).map_err(|e| format!("get_node_id: {e}"));
        id.and_then(|()| {
            let total = expect_value(kernel.get_total_node(), total);
            total.map_err(|e| format!("get_total_node: {e}"))
        })
    };
    let point = format!("node {me}: still a member after the unprivileged process (get_node_id returns {me}, get_total_node {total})");
    tap.check(&point, outcome);
    let point = format!(
        "node {me}: this process can still allocate, write, read and free a {LMR_SIZE} B LMR on {}",
        target_name(me, probe.target)
    );
    tap.check(&point, lmr_round_trip(kernel, probe));
}

/// The points the copy reported, and how it ended.
fn in_child(uid: u32, gid: u32, args: &[String]) -> (ChildPoints, Result<(), String>) {
    let mut child = match spawn_as(uid, gid, args) {
        Ok(child) => child,
        Err(reason) => return (Vec::new(), Err(reason)),
    };
    let out = child.stdout.take();
    let points = out.map_or_else(Vec::new, |out| collect(&mut BufReader::new(out), false));
    (points, finish(child))
}

/// Between fork and exec, std calls setgid, then `setgroups(0, NULL)` (what
/// [`CommandExt::uid`] does when no groups are given; setting them
/// explicitly is not stable yet), then setuid: the copy keeps neither a
/// supplementary group nor, since its uid is no longer 0, any capability;
/// `gid` is its real, effective and file system group. It then runs on its
/// own: the program is static and reads no file (it checks its credentials
/// in `/proc/self`, its own).
pub(super) fn spawn_as(uid: u32, gid: u32, args: &[String]) -> Result<Child, String> {
    let mut command = child_command(args)?;
    // The working directory of root may be closed to others.
    let spawned = command.gid(gid).uid(uid).current_dir("/").spawn();
    spawned.map_err(|e| {
        let exe = Path::new(command.get_program());
        let closed = closed_to_others(exe).map(|path| path.display().to_string());
        let closed = closed.map(|path| format!(" ({path} is not open to others)"));
        let exe = exe.display();
        format!(
            "starting {exe} as uid {uid}, gid {gid}: {e}{}",
            closed.unwrap_or_default()
        )
    })
}

/// The first of `exe` and the directories above it that others may not
/// search or execute, which would keep nobody from running it.
fn closed_to_others(exe: &Path) -> Option<&Path> {
    let mut paths: Vec<&Path> = exe.ancestors().collect();
    paths.reverse();
    let closed =
        |path: &&Path| fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o001 == 0);
    paths.into_iter().find(closed)
}

/// The exit status, or `None` for other child kinds.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    if let Some(status) = admin_group::child_main(kernel, args) {
        return Some(status);
    }
    run_child(args, KIND, Probe::from_args, |probe| {
        report_as_user((NOBODY, NOBODY), || unprivileged_calls(kernel, probe));
        0
    })
}

/// Reports, as a child started as user `uid` and group `gid`, that it
/// runs as them with nothing of root's privilege left, then the points
/// of its `calls`, made after that check.
pub(super) fn report_as_user((uid, gid): (u32, u32), calls: impl FnOnce() -> ChildPoints) {
    let credentials = credentials_of_user_and_group(uid, gid);
    let points = calls();
    let what = format!(
        "runs as uid {uid} and gid {gid} with no supplementary group and no effective capability"
    );
    report_point(&what, credentials);
    for (what, outcome) in points {
        report_point(&what, outcome);
    }
}

/// Whether this process runs as user and group `id` (which is how it was
/// started), with nothing left of root's privilege.
pub(crate) fn credentials_of(id: u32) -> Result<(), String> {
    credentials_of_user_and_group(id, id)
}

/// Whether this process runs as user `uid` and group `gid` (which is how
/// it was started), with no supplementary group and nothing left of
/// root's privilege.
fn credentials_of_user_and_group(uid: u32, gid: u32) -> Result<(), String> {
    // SAFETY: these calls only read the calling process's credentials.
    let ids = unsafe { [getuid(), geteuid(), getgid(), getegid()] };
    if ids != [uid, uid, gid, gid] {
        let [uid, euid, gid, egid] = ids;
        return Err(format!("uid {uid}, euid {euid}, gid {gid}, egid {egid}"));
    }
    // SAFETY: with a size of 0, getgroups only counts the groups.
    let groups = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if groups != 0 {
        return Err(format!("getgroups counts {groups} supplementary group(s)"));
    }
    let status =
        fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    let effective = status.lines().find_map(|line| line.strip_prefix("CapEff:"));
    let effective = effective
        .map(str::trim)
        .ok_or("/proc/self/status has no CapEff line")?;
    match u64::from_str_radix(effective, 16) {
        Ok(0) => Ok(()),
        _ => Err(format!("effective capabilities {effective}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_test::tests::{defects_with, joined};
    use crate::fake_kernel::{Defects, FakeKernel};
    use crate::tap::{assert_contains, assert_contains_all, capture, failures};

    const CM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    /// What a node 1 of three runs the case with.
    const CONFIG: TestConfig = TestConfig {
        cm: CM,
        nodes: 3,
        data_budget: 0,
    };

    /// The line that shows node 1 is still a member of three.
    const STILL_A_MEMBER: &str = " - node 1: still a member after the unprivileged process \
                                  (get_node_id returns 1, get_total_node 3)\n";

    /// Node 1 of `nodes`, joined, and the probe it would start.
    fn member(nodes: u32, defects: Defects) -> (FakeKernel, Probe) {
        let kernel = joined(1, nodes, defects);
        let probe = Probe {
            cm: CM,
            me: 1,
            target: next_node(1, nodes),
            password: password_of(1),
        };
        (kernel, probe)
    }

    /// The unprivileged process's 7 points, the admin group's 14 and the
    /// membership's 2 pass; the privileged process is untouched and may
    /// still leave, unlike the other.
    #[test]
    fn the_probe_reports_every_point_and_the_node_stays_a_member() {
        let (kernel, probe) = member(3, Defects::default());
        let (output, summary) = capture(|tap| run(&kernel, tap, 1, &CONFIG));
        assert!(summary.all_passed(), "{output}");
        assert_eq!(summary.passed, 23, "{output}");
        let refused = "ok 1 - node 1: an unprivileged process (modelled) gets -EPERM from \
                       lite_join(10.0.0.1, 18500, 1)\n";
        let modelled = "# node 1: no process started as uid 65534: the kernel model runs";
        assert_contains_all(&output, &[modelled, refused, STILL_A_MEMBER]);
        assert_eq!(kernel.live_lmrs(), 0);
        // A child's `fail` lines need descriptions without ": ".
        let process = kernel.unprivileged_process().expect("the model has one");
        let points = unprivileged_calls(&process, probe);
        assert!(points.iter().all(|(what, _)| !what.contains(": ")));
        drop(process);
        assert_eq!(kernel.leave(0), 0);
    }

    #[test]
    fn a_leave_that_does_not_check_the_privilege_is_caught() {
        let defects = defects_with(|d| d.leave_without_privilege = true);
        let (kernel, _) = member(3, defects);
        let (output, _) = capture(|tap| run(&kernel, tap, 1, &CONFIG));
        let failed = failures(&output);
        let leave = " - node 1: an unprivileged process (modelled) gets -EPERM from lite_leave(0)";
        assert!(failed[0].ends_with(leave), "{output}");
        // The model keeps membership per process: the node is out of the
        // count, though this process still has its id.
        let counted = format!("{STILL_A_MEMBER}# get_total_node: expected 3, got 2\n");
        assert_contains(&output, &counted);
    }

    #[test]
    fn the_probe_survives_the_command_line_and_other_kinds_are_left_alone() {
        let (kernel, probe) = member(2, Defects::default());
        probe.assert_round_trip(0, "localhost");
        assert_eq!(child_main(&kernel, &["leak".to_string()]), None);
        assert_eq!(child_main(&kernel, &[]), None);
        assert_eq!(child_main(&kernel, &[KIND.to_string()]), Some(2));
    }

    #[test]
    fn a_program_others_cannot_reach_is_named() {
        assert_eq!(closed_to_others(Path::new("/bin/sh")), None);
        let dir = std::env::temp_dir().join(format!("lite-closed-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temporary directory");
        let exe = dir.join("program");
        fs::write(&exe, b"").expect("file");
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).expect("chmod");
        let found = closed_to_others(&exe).map(Path::to_path_buf);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(found, Some(dir));
    }
}
