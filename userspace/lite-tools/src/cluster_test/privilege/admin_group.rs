//! The administrators' group (debugfs [`ADMIN_GROUP_FILE`]), checked on
//! every node as the README's privilege section describes; whatever the
//! file held is put back at the end. No process calls `lite_leave`, which
//! the group allows too: a member's leave would take the node out of the
//! cluster.
//!
//! The processes are copies of this program on the real kernel (reporting
//! as [`super::super::processes`] describes), and processes of the model
//! on a kernel model ([`Kernel::process_of_user_and_group`]).

use std::io::Write;
use std::net::Ipv4Addr;

use lite::sys::CM_DEFAULT_PORT;

use super::super::processes::{child_args, run_child};
use super::{in_child, report, report_as_user, ChildPoints, NOBODY};
use crate::cluster_test::io::{
    read_debugfs_as, refused_debugfs_line, unless, write_debugfs_line, NO_DEBUGFS,
};
use crate::cluster_test::join_with_text;
use crate::debugfs::{parse_admin_group, ADMIN_GROUP_FILE, NO_ADMIN_GROUP};
use crate::errno::{describe_error, errno_name, expect_errno};
use crate::kernel::Kernel;
use crate::tap::Tap;
use crate::IB_PORT;

const KIND: &str = "admin-group";

/// The administrators' group node N sets is `GID_BASE + N`, which nothing else uses.
const GID_BASE: u32 = 4300;

/// It runs as `nobody`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupProbe {
    /// The manager, which it tries to join.
    cm: Ipv4Addr,
    gid: u32,
    /// Whether LITE's privilege check must let it pass, as a member of
    /// the administrators' group (or refuse it with `EPERM`).
    admitted: bool,
}

child_args!(GroupProbe, KIND, "CM GID VERDICT", {
    cm: "manager address",
    gid: "group",
    admitted: "verdict",
});

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, cm: Ipv4Addr) {
    let group = GID_BASE + me;
    let file = ADMIN_GROUP_FILE;
    let Some(first_read) = kernel.read_debugfs(file) else {
        let point = format!(
            "node {me}: members of the group in {file} pass the privilege check of lite_join"
        );
        tap.skip(&point, NO_DEBUGFS);
        return;
    };
    if !kernel.spawns_processes() {
        tap.comment(&format!(
            "node {me}: no process started as uid {NOBODY} in another group: the kernel model runs their calls in processes of its own"
        ));
    }
    let original = first_read
        .map_err(|e| format!("reading it: {}", describe_error(&e)))
        .and_then(|text| parse_admin_group(&text));
    let default = original.clone().and_then(|gid| {
        unless(gid == NO_ADMIN_GROUP, || {
            format!("it reads {gid} (put back at the end)")
        })
    });
    let point = format!("node {me}: {file} reads {NO_ADMIN_GROUP} (no group), its default");
    tap.check(&point, default);
    let point = format!("node {me}: root writes {group} to {file}, which then reads {group}");
    tap.check(&point, set_group(kernel, group));
    let too_big = u64::from(NO_ADMIN_GROUP) + 1;
    let refused = refused_debugfs_line(kernel, file, &too_big.to_string(), &[libc::EINVAL]);
    let point = format!(
        "node {me}: root gets EINVAL writing {too_big} to {file}, which still reads {group}"
    );
    tap.check(&point, refused.and_then(|()| reads(kernel, group)));
    let probe = |tap: &mut Tap<W>, gid, admitted, situation: &str| {
        probe_process(kernel, tap, me, GroupProbe { cm, gid, admitted }, situation);
    };
    probe(tap, group, true, "the admin group");
    let outsider = format!("not admin group {group}");
    probe(tap, NOBODY, false, &outsider);
    let point =
        format!("node {me}: {file} still reads {group} after the unprivileged processes' writes");
    tap.check(&point, reads(kernel, group));
    let point = format!(
        "node {me}: root writes {NO_ADMIN_GROUP} to {file}, which then reads {NO_ADMIN_GROUP}"
    );
    tap.check(&point, set_group(kernel, NO_ADMIN_GROUP));
    probe(tap, group, false, "no longer the admin group");
    if let Ok(gid) = original {
        if gid != NO_ADMIN_GROUP {
            let point = format!("node {me}: {file} is set back to {gid}, what it read before");
            tap.check(&point, set_group(kernel, gid));
        }
    }
}

fn probe_process<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    probe: GroupProbe,
    situation: &str,
) {
    let gid = probe.gid;
    let who = format!("node {me}: a process of uid {NOBODY} and gid {gid} ({situation})");
    if kernel.spawns_processes() {
        let (points, exit) = in_child(NOBODY, gid, &probe.to_args());
        report(tap, &who, points);
        tap.check(&format!("{who} exits with status 0"), exit);
    } else if let Some(process) = kernel.process_of_user_and_group(NOBODY, gid) {
        report(tap, &who, group_calls(&process, probe));
    } else {
        let errno = errno_name(join_errno(probe.admitted));
        let point = format!("{who} gets -{errno} from lite_join");
        tap.skip(
            &point,
            "this kernel offers no process of another user and group",
        );
    }
}

/// Negated, to a process on a member node, with the real manager.
fn join_errno(admitted: bool) -> i32 {
    if admitted {
        libc::EISCONN
    } else {
        libc::EPERM
    }
}

/// The descriptions hold no `": "`, as a child's `fail` lines need. It
/// never calls `lite_leave`, which would take a member node out.
fn group_calls<K: Kernel>(kernel: &K, probe: GroupProbe) -> ChildPoints {
    let GroupProbe { cm, admitted, .. } = probe;
    let passed = "having passed the privilege check";
    let (bad_address, why, member_node) = if admitted {
        (libc::EINVAL, passed, format!(", {passed} on a member node"))
    } else {
        (
            libc::EPERM,
            "the privilege being checked first",
            String::new(),
        )
    };
    let real = join_errno(admitted);
    let gets = |errno, call: &str, ret| {
        let point = format!("gets -{} from {call}", errno_name(errno));
        (point, expect_errno(ret, errno))
    };
    let join = format!("lite_join({cm}, {CM_DEFAULT_PORT}, {IB_PORT}){member_node}");
    let bad_join = format!("lite_join(\"not-an-ip\"), {why}");
    let (no_group, refusals) = (NO_ADMIN_GROUP.to_string(), [libc::EPERM, libc::EACCES]);
    vec![
        gets(real, &join, join_with_text(kernel, &cm.to_string())),
        gets(bad_address, &bad_join, join_with_text(kernel, "not-an-ip")),
        (
            format!("gets EPERM or EACCES writing {NO_ADMIN_GROUP} to {ADMIN_GROUP_FILE}"),
            refused_debugfs_line(kernel, ADMIN_GROUP_FILE, &no_group, &refusals),
        ),
    ]
}

/// Writes `gid` to the administrators' group file and reads it back.
fn set_group<K: Kernel>(kernel: &K, gid: u32) -> Result<(), String> {
    write_debugfs_line(kernel, ADMIN_GROUP_FILE, gid)?;
    reads(kernel, gid)
}

fn reads<K: Kernel>(kernel: &K, gid: u32) -> Result<(), String> {
    let found = read_debugfs_as(kernel, ADMIN_GROUP_FILE, parse_admin_group)?;
    unless(found == gid, || format!("it reads {found}"))
}

/// The exit status, or `None` for other child kinds.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    run_child(args, KIND, GroupProbe::from_args, |probe| {
        report_as_user((NOBODY, probe.gid), || group_calls(kernel, probe));
        0
    })
}

#[cfg(test)]
mod tests {
    use libc::c_long;

    use super::*;
    use crate::fake_kernel::{Defects, FakeKernel};
    use crate::tap::failures;

    const CM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    fn member(defects: Defects) -> FakeKernel {
        crate::cluster_test::tests::joined(2, 3, defects)
    }

    /// The TAP output of the case on `kernel` (node 2).
    fn output_of(kernel: &FakeKernel) -> String {
        crate::tap::capture(|tap| run(kernel, tap, 2, CM)).0
    }

    fn admin_group(kernel: &FakeKernel) -> String {
        match kernel.read_debugfs(ADMIN_GROUP_FILE) {
            Some(Ok(text)) => text,
            other => panic!("the model's admin group file: {other:?}"),
        }
    }

    #[test]
    fn members_pass_the_privilege_check_and_others_do_not() {
        let kernel = member(Defects::default());
        let output = output_of(&kernel);
        assert!(failures(&output).is_empty(), "{output}");
        assert!(output.ends_with("1..14\n14 passed, 0 failed\n"), "{output}");
        for point in [
            "ok 1 - node 2: admin_group reads 4294967295 (no group), its default\n",
            "ok 2 - node 2: root writes 4302 to admin_group, which then reads 4302\n",
            "ok 3 - node 2: root gets EINVAL writing 4294967296 to admin_group, which still reads 4302\n",
            "ok 4 - node 2: a process of uid 65534 and gid 4302 (the admin group) gets -EISCONN from lite_join(10.0.0.1, 18500, 1), having passed the privilege check on a member node\n",
            "ok 5 - node 2: a process of uid 65534 and gid 4302 (the admin group) gets -EINVAL from lite_join(\"not-an-ip\"), having passed the privilege check\n",
            "ok 6 - node 2: a process of uid 65534 and gid 4302 (the admin group) gets EPERM or EACCES writing 4294967295 to admin_group\n",
            "ok 7 - node 2: a process of uid 65534 and gid 65534 (not admin group 4302) gets -EPERM from lite_join(10.0.0.1, 18500, 1)\n",
            "ok 10 - node 2: admin_group still reads 4302 after the unprivileged processes' writes\n",
            "ok 11 - node 2: root writes 4294967295 to admin_group, which then reads 4294967295\n",
            "ok 12 - node 2: a process of uid 65534 and gid 4302 (no longer the admin group) gets -EPERM from lite_join(10.0.0.1, 18500, 1)\n",
        ] {
            assert!(output.contains(point), "{point}{output}");
        }
        assert_eq!(admin_group(&kernel), "4294967295\n");
        // The node is a member as before.
        assert_eq!((kernel.get_node_id(), kernel.get_total_node()), (2, 3));
    }

    #[test]
    fn a_group_set_before_is_reported_and_set_back() {
        let kernel = member(Defects::default());
        let written = kernel.write_debugfs(ADMIN_GROUP_FILE, "77\n");
        assert!(matches!(written, Some(Ok(()))));
        let output = output_of(&kernel);
        let default = "not ok 1 - node 2: admin_group reads 4294967295 (no group), its default";
        assert_eq!(failures(&output), [default], "{output}");
        assert!(output.contains("# it reads 77 (put back at the end)\n"));
        let set_back = "ok 15 - node 2: admin_group is set back to 77, what it read before\n";
        assert!(output.contains(set_back));
        assert_eq!(admin_group(&kernel), "77\n");
    }

    #[test]
    fn the_model_lets_members_leave_and_change_settings_but_not_the_group() {
        let kernel = member(Defects::default());
        let process = kernel
            .process_of_user_and_group(NOBODY, 4302)
            .expect("the model has one");
        let outsider = kernel.process_of_user(NOBODY).expect("the model has one");
        // A write to debugfs that must fail with `errno`.
        let refused = |written: Option<std::io::Result<()>>, errno| {
            let got = written.and_then(|result| result.err());
            assert_eq!(got.and_then(|e| e.raw_os_error()), Some(errno));
        };
        assert_eq!(process.leave(0), -c_long::from(libc::EPERM));
        refused(process.write_debugfs("qos_enabled", "0\n"), libc::EPERM);
        refused(kernel.write_debugfs(ADMIN_GROUP_FILE, "x\n"), libc::EINVAL);
        refused(process.write_debugfs(ADMIN_GROUP_FILE, "x\n"), libc::EINVAL);
        let written = kernel.write_debugfs(ADMIN_GROUP_FILE, "4302");
        assert!(matches!(written, Some(Ok(()))));
        assert_eq!(admin_group(&kernel), "4302\n");
        let written = process.write_debugfs("qos_enabled", "0\n");
        assert!(matches!(written, Some(Ok(()))));
        refused(outsider.write_debugfs("qos_enabled", "1\n"), libc::EPERM);
        // Members may not hand the group on.
        refused(process.write_debugfs(ADMIN_GROUP_FILE, "1\n"), libc::EPERM);
        assert_eq!(outsider.leave(0), -c_long::from(libc::EPERM));
        assert_eq!(process.leave(0), 0);
        assert_eq!(kernel.get_total_node(), 2);
        assert_eq!(join_with_text(&process, &CM.to_string()), 2);
        assert_eq!(kernel.get_total_node(), 3);
    }

    #[test]
    fn the_probe_survives_the_command_line_and_other_kinds_are_left_alone() {
        let probe = GroupProbe {
            cm: CM,
            gid: 4303,
            admitted: true,
        };
        probe.assert_round_trip(2, "maybe");
        let refused = GroupProbe {
            admitted: false,
            ..probe
        };
        assert_eq!(GroupProbe::from_args(&refused.to_args()[1..]), Ok(refused));
        let kernel = member(Defects::default());
        assert_eq!(child_main(&kernel, &["unprivileged".to_string()]), None);
        assert_eq!(child_main(&kernel, &[]), None);
        assert_eq!(child_main(&kernel, &[KIND.to_string()]), Some(2));
    }
}
