//! Quotas: what each user may hold through LITE on a node, and what the
//! LMRs of each node may hold on another (see "Quotas" in the uapi
//! header). On every node: the quotas file parses, with the default
//! limits, and refuses lines that are no command; a user of the test's
//! own ([`UID_BASE`] + node id) gets limits a little above what it holds
//! (its locks stay charged across runs in one membership), and a process
//! of that user, without privilege, goes up to each limit and one step
//! beyond, in an order that leaves exactly one limit to blame for each
//! refusal, while this process (root) checks what the file shows; then,
//! with every node and after every other case, each node limits what the
//! next node's LMRs may hold on it.
//!
//! The user's calls run in a copy of this program started as that user on
//! the real kernel (reporting over its stdout as [`super::processes`]
//! describes, plus one `holds USAGE` line before `ready`; it exits when
//! told to), and in a process of the model for that user on a kernel model
//! ([`Kernel::process_of_user`]).

use std::fmt::Display;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::{LiteLock, PERM_READ, PERM_WRITE};

use super::io::{
    barrier, check_free, name_of, read_debugfs_as, refused_debugfs_line, status, unless,
    write_debugfs_line, InStep, UserPages, NO_DEBUGFS,
};
use super::privilege::{report, report_as_user, spawn_as};
use super::processes::{
    child_args, collect_with, finish, ready_then_wait, run_child, tell_go, ChildPoints,
};
use super::{freed, target_name, Node};
use crate::debugfs::quotas::{
    parse_quotas, parse_usage, Command, Limit, Limits, PerResource, QuotasFile, Resource, Usage,
    DEFAULT_LIMITS, QUOTAS_FILE,
};
use crate::debugfs::DEBUGFS_DIR;
use crate::errno::{describe_result, expect_errno, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::plan::{next_node, previous_node};
use crate::tap::Tap;

const KIND: &str = "quota-user";

/// The quota user of node N is `UID_BASE + N`.
pub(super) const UID_BASE: u32 = 4242;

/// How much more than it holds the quota user may hold, per resource.
const ALLOWANCES: Usage = PerResource([1 << 20, 64 << 10, 8, 3, 2, 2]);

const SMALL: u64 = 4096;

/// Size of the first LMR, half the `remote_memory` allowance.
const HALF: u64 = 512 << 10;

/// Less than the `pinned_memory` allowance.
const MEMLOCK_LIMIT: u64 = 16 << 10;

const FIRST_PORT: u32 = 50;

/// Plus the name's index (see [`name_of`]).
const NAME_KIND: u16 = 0x5100;

/// More than the user's `remote_memory` allowance.
const ROOT_ALLOCATION: u64 = 2 << 20;

/// Over what the next node's LMRs hold on this one.
const SERVING_LIMIT: u64 = 1 << 20;

const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

const HOLDS: &str = "holds";

const MALFORMED: [&str; 8] = [
    "limit default no_such_resource=1",
    "limit default lmrs=many",
    "limit default lmrs=-1",
    "limit default lmrs=18446744073709551616",
    "limit default lmrs=7 no_such_resource=1",
    "limit uid someone lmrs=1",
    "limit node 2 lmrs=5",
    "usage uid 0 lmrs=0",
];

/// `uid` is also the group; `target` is where its LMRs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UserPlan {
    me: u32,
    target: u32,
    uid: u32,
    password: u64,
}

child_args!(UserPlan, KIND, "NODE TARGET UID PASSWORD", {
    me: "node",
    target: "target node",
    uid: "uid",
    password: "password",
});

fn kib(size: u64) -> String {
    format!("{} KiB", size >> 10)
}

/// What a new LMR of `size` bytes charges: its memory and one of `lmrs`.
fn lmr_charge(memory: Resource, size: u64) -> Usage {
    Usage::default().with(memory, size).with(Resource::Lmrs, 1)
}

fn one(resource: Resource) -> Usage {
    Usage::default().with(resource, 1)
}

pub(super) fn read_quotas<K: Kernel>(kernel: &K) -> Result<QuotasFile, String> {
    read_debugfs_as(kernel, QUOTAS_FILE, parse_quotas)
}

fn write_quotas<K: Kernel>(kernel: &K, command: &Command) -> Result<(), String> {
    write_debugfs_line(kernel, QUOTAS_FILE, command)
}

/// Lets the LMRs of `node` hold `more` bytes on this node beyond what they
/// hold now, and checks that the quotas file shows the limit; what they
/// held before.
pub(super) fn limit_served<K: Kernel>(kernel: &K, node: u32, more: u64) -> Result<u64, String> {
    let before = read_quotas(kernel)?.served_for(node);
    let limit = Limit::At(before + more);
    write_quotas(kernel, &Command::Node(node, limit))?;
    match read_quotas(kernel)?.nodes.get(&node) {
        Some(shown) if *shown == limit => Ok(before),
        Some(shown) => Err(format!("the file shows {shown}, not {limit}")),
        None => Err(format!("the file has no limit node {node} line")),
    }
}

/// Gives the LMRs of `node` the default limit on this node again, which
/// the quotas file shows by having no line of its own for `node`.
pub(super) fn reset_served<K: Kernel>(kernel: &K, node: u32) -> Result<(), String> {
    write_quotas(kernel, &Command::NodeReset(node))
        .and_then(|()| no_line(read_quotas(kernel)?.nodes.get(&node)))
}

/// `shown` is the file's own line for a user or node.
fn no_line(shown: Option<impl Display>) -> Result<(), String> {
    shown.map_or(Ok(()), |shown| Err(format!("the file still shows {shown}")))
}

/// Runs after every other case.
pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let me = at.me;
    if kernel.read_debugfs(QUOTAS_FILE).is_none() {
        tap.skip(
            &format!("node {me}: users and nodes hold no more than their quotas allow"),
            NO_DEBUGFS,
        );
        return Ok(());
    }
    the_file(kernel, tap, me);
    malformed_lines(kernel, tap, me);
    user_quotas(kernel, tap, at);
    serving_limits(kernel, tap, at)
}

fn the_file<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let file = read_quotas(kernel);
    tap.check(
        &format!("node {me}: {DEBUGFS_DIR}/{QUOTAS_FILE} parses, with the default limits of every resource and of other nodes"),
        status(&file),
    );
    if let Ok(file) = file {
        if file.defaults != DEFAULT_LIMITS {
            tap.comment(&format!(
                "node {me}: the default limits are {}, not the documented {DEFAULT_LIMITS}",
                file.defaults
            ));
        }
    }
}

/// Every line of [`MALFORMED`] is refused with `EINVAL` and changes no
/// limit; what a kernel changed anyway is put back.
fn malformed_lines<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let before = read_quotas(kernel).map(|file| file.limits_only());
    for line in MALFORMED {
        let outcome = refused_debugfs_line(kernel, QUOTAS_FILE, line, &[libc::EINVAL]);
        let point = format!("node {me}: writing \"{line}\" to the quotas file fails with EINVAL");
        tap.check(&point, outcome);
    }
    let outcome = before.and_then(|before| {
        let after = read_quotas(kernel)?.limits_only();
        if after == before {
            return Ok(());
        }
        let restored = restore_limits(kernel, &before, &after);
        Err(format!(
            "before:\n{before}after:\n{after}{}",
            restored
                .err()
                .map(|e| format!("putting them back failed: {e}"))
                .unwrap_or_default()
        ))
    });
    tap.check(
        &format!("node {me}: the refused lines changed no limit"),
        outcome,
    );
}

/// Writes what it takes to bring the limits from `now` back to `wanted`.
fn restore_limits<K: Kernel>(
    kernel: &K,
    wanted: &QuotasFile,
    now: &QuotasFile,
) -> Result<(), String> {
    let mut commands = vec![
        Command::Defaults(wanted.defaults.iter().collect()),
        Command::NodeDefault(wanted.node_default),
    ];
    for uid in now.users.keys() {
        commands.push(match wanted.users.get(uid) {
            Some(limits) => Command::user_limits(*uid, limits),
            None => Command::UserDefault(*uid),
        });
    }
    for node in now.nodes.keys() {
        commands.push(match wanted.nodes.get(node) {
            Some(limit) => Command::Node(*node, *limit),
            None => Command::NodeReset(*node),
        });
    }
    commands
        .iter()
        .try_for_each(|command| write_quotas(kernel, command))
}

fn limits_over(held: &Usage) -> Limits {
    Limits::from_fn(|r| Limit::At(held.get(r).saturating_add(ALLOWANCES.get(r))))
}

fn user_quotas<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let uid = UID_BASE + me;
    let target = next_node(me, nodes);
    let description = format!(
        "node {me}: \"limit uid {uid} ...\" gives uid {uid} limits of its own ({ALLOWANCES} over what it holds), which the quotas file shows"
    );
    let before = match read_quotas(kernel) {
        Ok(file) => file.usage_of(uid),
        Err(reason) => {
            tap.not_ok(&description, &reason);
            return;
        }
    };
    let limits = limits_over(&before);
    let set = write_quotas(kernel, &Command::user_limits(uid, &limits))
        .and_then(|()| shows_limits(kernel, uid, &limits));
    let limits_set = set.is_ok();
    tap.check(&description, set);
    if limits_set {
        let plan = UserPlan {
            me,
            target,
            uid,
            password,
        };
        with_user_process(kernel, tap, plan, before, &limits);
    }
    tap.check(
        &format!("node {me}: \"limit uid {uid} default\" takes uid {uid}'s own limits away (no limit uid {uid} line)"),
        write_quotas(kernel, &Command::UserDefault(uid))
            .and_then(|()| no_line(read_quotas(kernel)?.users.get(&uid))),
    );
}

fn shows_limits<K: Kernel>(kernel: &K, uid: u32, limits: &Limits) -> Result<(), String> {
    match read_quotas(kernel)?.users.get(&uid) {
        Some(shown) if shown == limits => Ok(()),
        Some(shown) => Err(format!("the file shows {shown}")),
        None => Err(format!("the file has no limit uid {uid} line")),
    }
}

/// `before` is what the user held before its process started.
fn with_user_process<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    plan: UserPlan,
    before: Usage,
    limits: &Limits,
) {
    let (me, target, uid, password) = (plan.me, plan.target, plan.uid, plan.password);
    let who = format!("node {me}: a process of uid {uid}");
    let started = if kernel.spawns_processes() {
        start_child(plan)
    } else if let Some(process) = kernel.process_of_user(uid) {
        tap.comment(&format!(
            "node {me}: no process started as uid {uid}: the kernel model runs its calls in a process of its own for that user"
        ));
        let (points, held) = user_calls(&process, plan);
        let pages = held.pages;
        Ok((points, Ok(held.usage), Holder::Model { process, pages }))
    } else {
        tap.skip(
            &format!("{who} holds no more than its quotas allow"),
            "this kernel offers no process of another user",
        );
        return;
    };
    let (points, usage, holder) = match started {
        Ok(started) => started,
        Err(reason) => {
            tap.not_ok(&format!("{who} starts"), &reason);
            return;
        }
    };
    report(tap, &who, points);
    let expected = usage.map(|held| (held, before.plus(&held)));
    tap.check(
        &format!("node {me}: while its process holds what it got, usage uid {uid} shows that on top of what uid {uid} held before"),
        expected.clone().and_then(|(held, expected)| {
            let shown = read_quotas(kernel)?.usage_of(uid);
            unless(shown == expected, || {
                format!("it shows {shown}; before {before}, the process holds {held}")
            })
        }),
    );
    tap.check(
        &format!("node {me}: the limit uid {uid} line still shows the limits set, the writes of uid {uid} having been refused"),
        shows_limits(kernel, uid, limits),
    );
    let point = format!("node {me}: this process (uid 0, default limits) can still allocate {} on {}, more than uid {uid}'s remote_memory quota", kib(ROOT_ALLOCATION), target_name(me, target));
    tap.check(
        &point,
        Region::alloc(kernel, target, ROOT_ALLOCATION, 0, password).and_then(Region::free),
    );
    tap.check(&format!("{who} exits"), holder.release());
    let locks = expected
        .as_ref()
        .map_or(0, |(held, _)| held.get(Resource::Locks));
    let after = before.with(Resource::Locks, before.get(Resource::Locks) + locks);
    tap.check(
        &format!("node {me}: once its process exited, usage uid {uid} is back to what it was before but for the {locks} locks it created, which stay charged"),
        expected.and_then(|_| wait_for_usage(kernel, uid, &after)),
    );
}

fn wait_for_usage<K: Kernel>(kernel: &K, uid: u32, expected: &Usage) -> Result<(), String> {
    let deadline = Instant::now() + RELEASE_TIMEOUT;
    loop {
        let shown = read_quotas(kernel)?.usage_of(uid);
        if shown == *expected {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} s after the exit it shows {shown}, expected {expected}",
                RELEASE_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

type Started<K> = (ChildPoints, Result<Usage, String>, Holder<K>);

/// The quota user's process while it holds what it got.
enum Holder<K> {
    /// A copy of this program on the real kernel; exits when told to.
    Child {
        child: Child,
        out: BufReader<ChildStdout>,
    },
    /// A process of the model, and the memory its registrations pin.
    Model { process: K, pages: Vec<UserPages> },
}

impl<K> Holder<K> {
    /// Lets the process exit, and reports how it ended.
    fn release(self) -> Result<(), String> {
        match self {
            Holder::Child { mut child, mut out } => {
                tell_go(&mut child);
                let (late, _) = read_report(&mut out);
                let finished = finish(child);
                match late.into_iter().find(|(_, outcome)| outcome.is_err()) {
                    Some((what, Err(reason))) => Err(format!("it reported late {what}: {reason}")),
                    _ => finished,
                }
            }
            Holder::Model { process, pages } => {
                // The process exits before the memory it registered goes.
                drop(process);
                drop(pages);
                Ok(())
            }
        }
    }
}

fn start_child<K>(plan: UserPlan) -> Result<Started<K>, String> {
    let mut child = spawn_as(plan.uid, plan.uid, &plan.to_args())?;
    let Some(stdout) = child.stdout.take() else {
        let _ = finish(child);
        return Err("the child has no stdout".to_string());
    };
    let mut out = BufReader::new(stdout);
    let (points, usage) = read_report(&mut out);
    let usage = usage.unwrap_or_else(|| Err(format!("the child reported no {HOLDS} line")));
    Ok((points, usage, Holder::Child { child, out }))
}

/// Reads up to `ready` or the end.
fn read_report<R: BufRead>(out: &mut R) -> (ChildPoints, Option<Result<Usage, String>>) {
    let mut usage = None;
    let points = collect_with(out, true, |text| {
        if let Some(held) = text.strip_prefix(HOLDS) {
            usage = Some(parse_usage(held).map_err(|e| format!("its {HOLDS} line: {e}")));
        }
    });
    (points, usage)
}

/// The exit status, or `None` for other child kinds.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    run_child(args, KIND, UserPlan::from_args, |plan| {
        let mut kept = None;
        report_as_user((plan.uid, plan.uid), || {
            let (calls, held) = user_calls(kernel, plan);
            kept = Some(held);
            calls
        });
        let Some(held) = kept else {
            return 1;
        };
        crate::say(format_args!("{HOLDS} {}", held.usage));
        ready_then_wait();
        // The kernel releases everything at exit; the registered memory
        // stays mapped until then.
        std::mem::forget(held.pages);
        0
    })
}

/// What the quota user's process holds once its calls are done.
struct Held {
    usage: Usage,
    /// Must stay mapped as long as the registrations do.
    pages: Vec<UserPages>,
}

/// A call of the quota user's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// `lite_alloc_remote` on the target; the LMR is kept (handle 0 if it failed).
    Alloc(u64),
    /// Frees the LMR kept last.
    FreeLast,
    /// `lite_wrap_alloc` of [`SMALL`] bytes under the name of this index.
    Wrap(u16),
    /// `lite_add_ask_mr_table` of the last kept LMR under this name index.
    Publish(u16),
    /// `lite_register_lmr` of this many bytes of fresh memory.
    Register(u64),
    /// `lite_register_lmr` of what is left of the `pinned_memory` quota.
    RegisterRest,
    /// Sets the soft `RLIMIT_MEMLOCK` to this, or (`None`) to the hard
    /// limit, which must leave room for the `pinned_memory` quota and a
    /// page more.
    Memlock(Option<u64>),
    /// `lite_register_application` of the next port from [`FIRST_PORT`].
    Port,
    /// `lite_create_lock` on this node.
    Lock,
}

/// A point of the quota user's process (see [`user_steps`]).
enum Step {
    /// Calls that must all go through, in order.
    Calls(String, Vec<Call>),
    /// A call that must go through, reported by the points after it.
    Quietly(Call),
    /// Repeats a call until the process holds its whole quota.
    FillUp(String, Resource, Call),
    /// A call that must fail with `-errno`, the quota of the resource
    /// being the only one it would exceed (`None`: none at all).
    Refused(String, Call, Option<Resource>, i32),
}

/// `call` must fail with `-EDQUOT`, `blame`'s quota the only one it exceeds.
fn beyond(what: impl Display, call: Call, blame: Resource) -> Step {
    let point = format!(
        "gets -EDQUOT from {what}, beyond its {} quota",
        blame.name()
    );
    Step::Refused(point, call, Some(blame), libc::EDQUOT)
}

/// What the quota user's process of node `me` does, allocating on
/// `target`: up to each quota and one step beyond, in an order that
/// leaves exactly one quota to blame for each refusal.
fn user_steps(me: u32, target: &str) -> Vec<Step> {
    use Call::*;
    use Resource::*;
    use Step::{Calls, FillUp, Quietly, Refused};
    let [remote, pinned, lmrs, names, ports, locks] = ALLOWANCES.0;
    let rest = remote - HALF;
    let (half, small, memlock) = (kib(HALF), kib(SMALL), kib(MEMLOCK_LIMIT));
    let (remote_kib, rest_kib, beyond_kib) = (kib(remote), kib(rest), kib(rest + SMALL));
    let (pinned_kib, needed, pinned_rest) = (
        kib(pinned),
        kib(pinned + SMALL),
        kib(pinned - MEMLOCK_LIMIT),
    );
    let last_port = FIRST_PORT as u64 + ports - 1;
    Vec::from([
        Calls(
            format!("allocates {half} on {target}, within its remote_memory quota of {remote_kib}"),
            vec![Alloc(HALF)],
        ),
        beyond(
            format!("alloc_remote of {beyond_kib} more on {target}"),
            Alloc(rest + SMALL),
            RemoteMemory,
        ),
        Calls(
            format!("allocates {rest_kib} more, exactly up to its remote_memory quota, and frees it"),
            vec![Alloc(rest), FreeLast],
        ),
        Calls(
            format!("publishes {names} names on node {me}, its names quota, by wrap_alloc of {small} and add_ask_mr_table of two LMRs"),
            vec![Wrap(0), Publish(1), Alloc(SMALL), Publish(2)],
        ),
        // An LMR of its own not published yet.
        Quietly(Alloc(SMALL)),
        beyond("add_ask_mr_table of a fourth name", Publish(3), Names),
        beyond(format!("wrap_alloc of {small} under a fifth name"), Wrap(4), Names),
        Calls(
            format!("lowers its RLIMIT_MEMLOCK to {memlock}"),
            vec![Memlock(Some(MEMLOCK_LIMIT))],
        ),
        Calls(
            format!("registers {memlock} of its memory, within RLIMIT_MEMLOCK and its pinned_memory quota of {pinned_kib}"),
            vec![Register(MEMLOCK_LIMIT)],
        ),
        Refused(
            format!("gets -ENOMEM from register_lmr of {small} more, beyond its RLIMIT_MEMLOCK but within its pinned_memory quota"),
            Register(SMALL),
            None,
            libc::ENOMEM,
        ),
        Calls(
            format!("raises RLIMIT_MEMLOCK to its hard limit, at least {needed}"),
            vec![Memlock(None)],
        ),
        Calls(
            format!("registers {pinned_rest} more, exactly up to its pinned_memory quota"),
            vec![RegisterRest],
        ),
        beyond(format!("register_lmr of {small} more"), Register(SMALL), PinnedMemory),
        FillUp(
            format!("allocates {small} LMRs on {target} up to its lmrs quota of {lmrs}"),
            Lmrs,
            Alloc(SMALL),
        ),
        beyond(format!("alloc_remote of {small} more on {target}"), Alloc(SMALL), Lmrs),
        FillUp(
            format!("registers RPC ports {FIRST_PORT} to {last_port} up to its rpc_ports quota of {ports}"),
            RpcPorts,
            Port,
        ),
        beyond(format!("register_application of port {}", last_port + 1), Port, RpcPorts),
        FillUp(format!("creates locks on node {me} up to its locks quota of {locks}"), Locks, Lock),
        beyond(format!("create_lock on node {me}"), Lock, Locks),
    ])
}

/// The descriptions hold no `": "`, as a child's `fail` lines need.
fn user_calls<K: Kernel>(kernel: &K, plan: UserPlan) -> (ChildPoints, Held) {
    let mut user = UserCalls::new(kernel, plan);
    let mut points = Vec::new();
    for step in user_steps(plan.me, &target_name(plan.me, plan.target)) {
        let point = match step {
            Step::Calls(what, calls) => (what, calls.into_iter().try_for_each(|c| user.make(c))),
            Step::Quietly(call) => {
                let _ = user.make(call);
                continue;
            }
            Step::FillUp(what, resource, call) => (what, user.fill_up(resource, call)),
            Step::Refused(what, call, blame, errno) => (what, user.refused(call, blame, errno)),
        };
        points.push(point);
    }
    // Writes to the quotas file are refused: debugfs is open to root only
    // (`EACCES`), and LITE wants `CAP_NET_ADMIN` (`EPERM`) of a writer
    // that could open it.
    let command = Command::UserDefault(plan.uid).to_string();
    let refusals = [libc::EPERM, libc::EACCES];
    points.push((
        format!("gets EPERM or EACCES writing \"{command}\" to the quotas file"),
        refused_debugfs_line(kernel, QUOTAS_FILE, &command, &refusals),
    ));
    let held = Held {
        usage: user.held,
        pages: user.pages,
    };
    (points, held)
}

struct UserCalls<'k, K: Kernel> {
    kernel: &'k K,
    plan: UserPlan,
    held: Usage,
    pages: Vec<UserPages>,
    /// (handle, size) of the LMRs it keeps.
    lmrs: Vec<(u64, u64)>,
    next_port: u32,
}

impl<'k, K: Kernel> UserCalls<'k, K> {
    fn new(kernel: &'k K, plan: UserPlan) -> Self {
        UserCalls {
            kernel,
            plan,
            held: Usage::default(),
            pages: Vec::new(),
            lmrs: Vec::new(),
            next_port: FIRST_PORT,
        }
    }

    /// What `call` charges when it goes through.
    fn charge(call: Call) -> Usage {
        match call {
            Call::Alloc(size) => lmr_charge(Resource::RemoteMemory, size),
            Call::Wrap(_) => lmr_charge(Resource::RemoteMemory, SMALL).with(Resource::Names, 1),
            Call::Publish(_) => one(Resource::Names),
            Call::Register(size) => lmr_charge(Resource::PinnedMemory, size),
            Call::Port => one(Resource::RpcPorts),
            Call::Lock => one(Resource::Locks),
            Call::FreeLast | Call::RegisterRest | Call::Memlock(_) => Usage::default(),
        }
    }

    /// The call's name and raw result.
    fn call(&mut self, call: Call) -> Result<(String, c_long), String> {
        let (kernel, me, password) = (self.kernel, self.plan.me, self.plan.password);
        let name = |index| name_of(NAME_KIND + index, me);
        let data = [0x51u8; SMALL as usize];
        let made = match call {
            Call::Alloc(size) => (
                format!("alloc_remote of {}", kib(size)),
                kernel.alloc_remote(self.plan.target, size, 0, password),
            ),
            // SAFETY: `data` is readable for its whole length during the call.
            Call::Wrap(index) => ("wrap_alloc".into(), unsafe {
                kernel.wrap_alloc(data.as_ptr().cast(), SMALL, name(index), password)
            }),
            Call::Publish(index) => {
                let (handle, _) = self.lmrs.last().copied().unwrap_or_default();
                let ret = kernel.add_ask_mr_table(name(index), handle, PERM_READ, password);
                ("add_ask_mr_table".into(), ret)
            }
            Call::Register(size) => {
                let pages = UserPages::new(size as usize)?;
                let at = pages.at(0).cast();
                // Kept mapped as long as the process holds them: a
                // registration that went through may not be undone.
                self.pages.push(pages);
                // SAFETY: the pages stay mapped as long as the process holds them.
                let ret =
                    unsafe { kernel.register_lmr(at, size, PERM_READ | PERM_WRITE, password) };
                (format!("register_lmr of {}", kib(size)), ret)
            }
            Call::Port => {
                self.next_port += 1;
                let port = self.next_port - 1;
                // SAFETY: the name is readable for its 5 bytes.
                let ret = unsafe { kernel.register_application(port, 64, c"quota".as_ptr(), 5) };
                (format!("register_application(port {port})"), ret)
            }
            Call::Lock => {
                let (ret, lock) = super::sync::create_lock_raw(kernel, me);
                if let Ok(number) = u32::try_from(ret) {
                    unless(lock == LiteLock { home: me, number }, || {
                        format!("create_lock returned {number} but filled in {lock:?}")
                    })?;
                }
                (format!("create_lock({me})"), ret)
            }
            Call::FreeLast | Call::RegisterRest | Call::Memlock(_) => {
                return Err(format!("{call:?} takes nothing"))
            }
        };
        Ok(made)
    }

    /// Whether it could; what `call` charged stays held otherwise.
    fn undo(&self, call: Call, made: u64) -> bool {
        let kernel = self.kernel;
        match call {
            Call::Alloc(_) | Call::Wrap(_) => kernel.free(made) == 0,
            Call::Register(_) => kernel.deregister_lmr(made) == 0,
            Call::Port => kernel.unregister_application(self.next_port - 1) == 0,
            // A name or a lock is never taken back: it stays charged.
            _ => false,
        }
    }

    /// Makes `call`, which must go through.
    fn make(&mut self, call: Call) -> Result<(), String> {
        match call {
            Call::FreeLast => {
                let (handle, size) = self.lmrs.pop().ok_or("no LMR to free")?;
                expect_zero(self.kernel.free(handle)).map_err(|e| format!("free: {e}"))?;
                self.held = self.held.minus(&lmr_charge(Resource::RemoteMemory, size));
                Ok(())
            }
            Call::RegisterRest => {
                let held = self.held.get(Resource::PinnedMemory);
                match ALLOWANCES.get(Resource::PinnedMemory).saturating_sub(held) {
                    0 => Err("it holds its whole quota already".to_string()),
                    rest => self.make(Call::Register(rest)),
                }
            }
            Call::Memlock(limit) => {
                let needed = ALLOWANCES.get(Resource::PinnedMemory) + SMALL;
                match (self.kernel.set_memlock_limit(limit), limit) {
                    (Some(Ok(set)), Some(wanted)) if set == wanted => Ok(()),
                    (Some(Ok(set)), None) if set >= needed => Ok(()),
                    (Some(Ok(set)), Some(_)) => Err(format!("the soft limit is {set} B")),
                    (Some(Ok(set)), None) => Err(format!(
                        "its hard limit of {set} B is below the {needed} B the next registrations need"
                    )),
                    (Some(Err(e)), _) => Err(format!("setrlimit: {e}")),
                    (None, _) => Err("this kernel cannot set it".to_string()),
                }
            }
            _ => {
                let (name, ret) = self.call(call)?;
                let through = match call {
                    Call::Publish(_) | Call::Port => ret == 0,
                    Call::Lock => ret >= 0,
                    _ => ret > 0,
                };
                if let Call::Alloc(size) = call {
                    self.lmrs.push((u64::try_from(ret).unwrap_or(0), size));
                }
                unless(through, || {
                    format!("{name} returned {}", describe_result(ret))
                })?;
                self.held = self.held.plus(&Self::charge(call));
                Ok(())
            }
        }
    }

    /// Until the process holds its whole quota of `resource` or a call fails.
    fn fill_up(&mut self, resource: Resource, call: Call) -> Result<(), String> {
        while self.held.get(resource) < ALLOWANCES.get(resource) {
            self.make(call)?;
        }
        Ok(())
    }

    /// Whether a call charging `charge` would, from what the process
    /// holds, exceed the quota of `blame` and no other (`None`: no quota
    /// at all), so that its refusal can be blamed on that one.
    fn only_exceeds(&self, charge: &Usage, blame: Option<Resource>) -> Result<(), String> {
        if let Some(blamed) = blame {
            if charge.get(blamed) == 0 {
                return Err(format!("the call charges no {}", blamed.name()));
            }
        }
        for (resource, amount) in charge.iter() {
            if amount == 0 {
                continue;
            }
            let total = self.held.get(resource).saturating_add(amount);
            let allowance = ALLOWANCES.get(resource);
            let exceeds = total > allowance;
            if exceeds != (blame == Some(resource)) {
                return Err(format!(
                    "no refusal to blame on {} alone: holding {}, the call would bring {} to {total} of {allowance}",
                    blame.map_or("RLIMIT_MEMLOCK", Resource::name),
                    self.held,
                    resource.name()
                ));
            }
        }
        Ok(())
    }

    /// Makes `call`, which must fail with `-errno`, `blame`'s quota being
    /// the only one it would exceed. A call that went through anyway is
    /// undone if it can be (its charge stays held otherwise).
    fn refused(&mut self, call: Call, blame: Option<Resource>, errno: i32) -> Result<(), String> {
        let charge = Self::charge(call);
        self.only_exceeds(&charge, blame)?;
        let (_, ret) = self.call(call)?;
        if let Ok(made) = u64::try_from(ret) {
            if !self.undo(call, made) {
                self.held = self.held.plus(&charge);
            }
        }
        expect_errno(ret, errno)
    }
}

/// The per-node case, with every node: the LMRs of the next node may
/// hold [`SERVING_LIMIT`] more on this one; the previous node allocates
/// within and beyond its limit here, and again once it is reset.
fn serving_limits<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    if nodes < 2 {
        tap.skip(
            &format!("node {me}: the LMRs of other nodes hold no more on this node than it allows"),
            "needs a second node to allocate on this one",
        );
        return Ok(());
    }
    // This node limits the next one's LMRs, and allocates on the previous
    // one, which limits this node's.
    let limited = next_node(me, nodes);
    let server = previous_node(me, nodes);
    barrier(kernel, tap, nodes, "the user quota cases of every node")?;
    let served_before = limit_served(kernel, limited, SERVING_LIMIT);
    tap.check(
        &format!("node {me}: \"limit node {limited} remote_memory=N\" lets the LMRs of node {limited} hold {} more on this node than they do, which the quotas file shows", kib(SERVING_LIMIT)),
        served_before.clone().map(drop),
    );
    // Out of step, the limit goes before the run ends, so that it
    // disturbs nothing run after the test.
    let reset_limit = |out_of_step| {
        let _ = reset_served(kernel, limited);
        out_of_step
    };
    barrier(kernel, tap, nodes, "limiting the next nodes").map_err(reset_limit)?;
    let held = Region::alloc(kernel, server, HALF, 0, password);
    let point = format!("node {me}: alloc_remote of {} on node {server}, within node {server}'s limit for node {me}, returns a handle", kib(HALF));
    tap.check(&point, status(&held));
    let beyond = kernel.alloc_remote(server, SERVING_LIMIT, 0, password);
    let point = format!("node {me}: alloc_remote of {} more on node {server} returns -EDQUOT (node {server}'s limit for node {me})", kib(SERVING_LIMIT));
    tap.check(&point, expect_errno(freed(kernel, beyond), libc::EDQUOT));
    barrier(kernel, tap, nodes, "allocating on the previous nodes").map_err(reset_limit)?;
    let served = served_before.and_then(|before| {
        let now = read_quotas(kernel)?.served_for(limited);
        unless(now >= before + HALF, || {
            format!("it shows {now} B, before {before} B")
        })
    });
    let point = format!("node {me}: served node {limited} shows at least {} more than before while node {limited} holds its LMR here", kib(HALF));
    tap.check(&point, served);
    barrier(kernel, tap, nodes, "reading what the next nodes hold").map_err(reset_limit)?;
    tap.check(
        &format!("node {me}: \"limit node {limited} default\" gives node {limited} the default limit again (no limit node {limited} line)"),
        reset_served(kernel, limited),
    );
    barrier(kernel, tap, nodes, "resetting the limits of the next nodes")?;
    let point = format!("node {me}: with node {server}'s limit for node {me} back to the default, alloc_remote of {} more on node {server} returns a handle", kib(SERVING_LIMIT));
    tap.check(
        &point,
        Region::alloc(kernel, server, SERVING_LIMIT, 0, password).and_then(Region::free),
    );
    let what = format!("the {} LMR on node {server}", kib(HALF));
    check_free(tap, me, &what, held.ok());
    barrier(kernel, tap, nodes, "the serving limit case")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_test::tests::{defects_with, failed_points as failures, joined};
    use crate::fake_kernel::{Defects, FakeKernel};

    fn plan(nodes: u32) -> UserPlan {
        UserPlan {
            me: 1,
            target: next_node(1, nodes),
            uid: UID_BASE + 1,
            password: 7,
        }
    }

    fn quotas_of(kernel: &FakeKernel) -> QuotasFile {
        read_quotas(kernel).expect("readable")
    }

    /// Node 1 of `nodes` once its quota user's calls are done.
    fn limited_user(nodes: u32, defects: Defects) -> (FakeKernel, FakeKernel, ChildPoints, Held) {
        let kernel = joined(1, nodes, defects);
        let plan = plan(nodes);
        let limits = limits_over(&Usage::default());
        write_quotas(&kernel, &Command::user_limits(plan.uid, &limits)).expect("limits set");
        let process = kernel.process_of_user(plan.uid).expect("the model has one");
        let (points, held) = user_calls(&process, plan);
        (kernel, process, points, held)
    }

    #[test]
    fn a_user_goes_up_to_every_limit_and_no_further() {
        let (kernel, process, points, held) = limited_user(2, Defects::default());
        let plan = plan(2);
        assert!(failures(&points).is_empty(), "{points:?}");
        assert!(points.iter().all(|(what, _)| !what.contains(": ")));
        // remote_memory, pinned_memory, lmrs, names, rpc_ports, locks.
        let expected = PerResource([HALF + 5 * SMALL, 64 << 10, 8, 3, 2, 2]);
        assert_eq!(held.usage, expected);
        assert_eq!(quotas_of(&kernel).usage_of(plan.uid), expected);
        drop(process);
        drop(held.pages);
        // Only the locks stay.
        let locks = Usage::default().with(Resource::Locks, 2);
        assert_eq!(quotas_of(&kernel).usage_of(plan.uid), locks);
        assert_eq!(kernel.live_lmrs(), 0);
    }

    #[test]
    fn unenforced_quotas_leave_what_cannot_be_undone() {
        // Which refusals fail, the cluster test's defect table checks.
        let defects = defects_with(|d| d.ignore_quotas = true);
        let (kernel, process, _, held) = limited_user(2, defects);
        let plan = plan(2);
        // What went through anyway was undone where it can be: only the
        // extra name and lock stay.
        let counts = [Resource::Names, Resource::Locks, Resource::Lmrs].map(|r| held.usage.get(r));
        assert_eq!(counts, [4, 3, 8]);
        assert_eq!(quotas_of(&kernel).usage_of(plan.uid), held.usage);
        drop(process);
        drop(held.pages);
    }

    #[test]
    fn an_ignored_memlock_limit_is_caught() {
        let defects = defects_with(|d| d.ignore_memlock_limit = true);
        let (_kernel, process, points, held) = limited_user(1, defects);
        let register = "register_lmr of 4 KiB more, beyond its RLIMIT_MEMLOCK";
        let failure = format!("gets -ENOMEM from {register} but within its pinned_memory quota");
        assert_eq!(failures(&points), [failure]);
        drop(process);
        drop(held.pages);
    }

    #[test]
    fn a_refusal_another_limit_could_explain_is_not_counted() {
        let kernel = joined(1, 1, Defects::default());
        let process = kernel.process_of_user(UID_BASE).expect("the model has one");
        let mut user = UserCalls::new(&process, plan(1));
        user.held = ALLOWANCES.with(Resource::Lmrs, 0);
        // Everything but lmrs is used up: a refusal of one more LMR could
        // be remote_memory's, so it cannot be blamed on lmrs.
        let charge = lmr_charge(Resource::RemoteMemory, SMALL);
        let remote = Some(Resource::RemoteMemory);
        for (blamed, blameable) in [(Some(Resource::Lmrs), false), (remote, true), (None, false)] {
            assert_eq!(
                user.only_exceeds(&charge, blamed).is_ok(),
                blameable,
                "{blamed:?}"
            );
        }
        user.held = Usage::default();
        assert!(user.only_exceeds(&charge, None).is_ok());
        let locks = Some(Resource::Locks);
        assert!(user.only_exceeds(&one(Resource::Names), locks).is_err());
    }

    #[test]
    fn the_childs_report_carries_its_points_and_holdings() {
        let text = "ok runs as uid 4243\nfail gets -EDQUOT from x: expected -EDQUOT (-122), got 0\nholds remote_memory=1 pinned_memory=2 lmrs=3 names=4 rpc_ports=5 locks=6\nready\nok late\n";
        let mut out = text.as_bytes();
        let (points, usage) = read_report(&mut out);
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].0, "gets -EDQUOT from x");
        assert_eq!(
            points[1].1,
            Err("expected -EDQUOT (-122), got 0".to_string())
        );
        assert_eq!(usage, Some(Ok(PerResource([1, 2, 3, 4, 5, 6]))));
        let (late, usage) = read_report(&mut out);
        assert_eq!(late, [("late".to_string(), Ok(()))]);
        assert_eq!(usage, None);
    }

    #[test]
    fn the_plan_survives_the_command_line_and_other_kinds_are_left_alone() {
        plan(3).assert_round_trip(2, "root");
        let kernel = joined(1, 2, Defects::default());
        assert_eq!(child_main(&kernel, &["leak".to_string()]), None);
        assert_eq!(child_main(&kernel, &[KIND.to_string()]), Some(2));
    }

    #[test]
    fn malformed_lines_that_change_limits_are_caught_and_undone() {
        let kernel = joined(1, 2, Defects::default());
        let before = quotas_of(&kernel).limits_only();
        // What a kernel that applied part of a refused line would leave.
        let defaults = Command::Defaults(vec![(Resource::Lmrs, Limit::At(7))]);
        for command in [defaults, Command::Node(2, Limit::At(5))] {
            write_quotas(&kernel, &command).expect("written");
        }
        let after = quotas_of(&kernel).limits_only();
        assert_ne!(before, after);
        restore_limits(&kernel, &before, &after).expect("restored");
        assert_eq!(quotas_of(&kernel).limits_only(), before);
    }
}
