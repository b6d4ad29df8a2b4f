//! `cargo xtask test` (README, "Two commands"), ending with one
//! `N passed, M failed` line: KUnit cases + every program's TAP results on
//! every node (the victim's first boot excepted) + one per other check
//! (each step without cases of its own, each log and kmemleak scan, the
//! checks each cluster step's function names). A step that cannot run
//! because an earlier one failed counts as one failure.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::cluster::{self, Cluster, ClusterSpec, Images, NoDeathWatch, Nodes};
use crate::fsutil::LogFollower;
use crate::initramfs::{self, Variant};
use crate::kernel::{self, Flavour};
use crate::logscan::{read_log, MarkerWatch};
use crate::newc;
use crate::paths::{repo_root, Cache};
use crate::pause::{self, ManagerVerdict, PauseLog, PausePlan};
use crate::process::{self, run_logged};
use crate::qemu::{self, Vm, VmSpec};
use crate::ui::Step;
use crate::{
    failure, fsutil, fuzz, interrupt, kmemleak, kunit, lockdep, logscan, man_pages, prereqs,
    rustfmt_check, series, source, tap, uapi_header, ui, user_cluster,
};

const STEPS: usize = 9;
const KUNIT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Fuzzing included, with a margin for the start, the end and the clean-up.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(40 * 60 + FUZZ_SECONDS + 10 * 60);
/// Seconds every node fuzzes after the cluster test.
const FUZZ_SECONDS: u64 = 60;
const CLUSTER_NODES: usize = 3;
/// The last node is the victim.
const FAILURE_NODES: usize = failure::NODES;
const SURVIVOR_ROLE: &str = "failure-survivor";
const VICTIM_ROLE: &str = "failure-victim";
/// The survivors' `lite.cmtimeout` once the failure program ended, for the
/// cluster test after it (the failure program keeps LITE's default).
const CLUSTER_TEST_CMTIMEOUT: &str = "lite.clustertestcmtimeout";
const MANAGER_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// The victim's second boot runs the cluster test with the survivors.
const REJOIN_ROLE: &str = TEST_ROLE;
/// The programs of each role, in order, as `/init` announces them.
const SURVIVOR_PROGRAMS: [&str; 2] = ["lite-failure-test", "lite-cluster-test"];
const TEST_ROLE: &str = "test";
/// The last checks that LITE's resources came back to their baseline; a
/// kmemleak scan follows it.
const TEST_PROGRAMS: [&str; 2] = ["lite-cluster-test", "lite-resources"];
/// With `lite.fuzzsecs=` (the cluster test's; not the victim's second boot).
const FUZZED_TEST_PROGRAMS: [&str; 3] = ["lite-cluster-test", fuzz::PROGRAM, "lite-resources"];

/// The last node is cut off.
const PARTITION_NODES: usize = 3;
const PARTITION_SURVIVOR_ROLE: &str = "partition-survivor";
const PARTITION_CUT_ROLE: &str = "partition-cut";
/// The markers of `lite-partition-test` (see `shared_texts`). The cut node
/// is ready once its writes land on a survivor; a survivor once it
/// returned from the last barrier before the cut, since the cut node can
/// return from it before a survivor heard that it reached it.
pub(crate) const CUT_READY: &str = "LITE-PARTITION-CUT ready";
pub(crate) const SURVIVOR_READY: &str = "LITE-PARTITION-SURVIVOR ready";
/// Every node's traffic through the pauses runs, and its time is up; none
/// may be up before the last pause ended.
pub(crate) const PAUSE_READY: &str = "LITE-PARTITION-PAUSES ready";
pub(crate) const PAUSES_OVER: &str = "LITE-PARTITION-PAUSES over";
/// From the end of the pauses: the rest of every node's pause traffic
/// (the paused node's clock stood still meanwhile), a barrier and the
/// partition's set-up.
const CUT_READY_TIMEOUT: Duration = Duration::from_secs(8 * 60);
/// A survivor, so that the cut node's part is left as it was.
const PAUSED_NODE: usize = 2;
/// Each pause a little shorter than the manager's 3 s dead-after, with as
/// long between them for the heartbeats to come back.
const PAUSES: PausePlan = PausePlan {
    pauses: 10,
    length: Duration::from_millis(2500),
    gap: Duration::from_millis(2500),
};
/// `lite.pausesecs`, from each node's [`PAUSE_READY`] by its own clock:
/// the pauses' 47.5 s and a margin for the markers' spread.
const PAUSE_TRAFFIC_SECS: u64 = 55;
/// From the cluster's start: boot, join and an LMR on every other node.
const PAUSE_READY_TIMEOUT: Duration = Duration::from_secs(8 * 60);
/// Each QMP command, and the wait for the QMP socket.
const QMP_TIMEOUT: Duration = Duration::from_secs(10);
/// A death a pause's silence caused has been declared by then.
const DEATH_SETTLE: Duration = Duration::from_secs(3);
/// Well past the manager's 3 s, so that the node joins again as a new
/// incarnation after a few failed attempts.
const CUT_LENGTH: Duration = Duration::from_secs(10);
/// From the link's return; the guests bound their own waits (90 s for the
/// node to be back, six minutes for the last barrier).
const PARTITION_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Passed and failed counts, and what failed, each problem on its own
/// line and prefixed with where it happened.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    problems: Vec<String>,
    /// The nestings of LITE's locks the guests' lockdep saw.
    lock_nestings: std::collections::BTreeSet<lockdep::Nesting>,
    /// Whether [`Tally::verdict`] ended the step: its error, if any, is of
    /// failures counted already.
    judged: bool,
}

impl Tally {
    fn check(&mut self, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Whether `problems`, noted as `label`'s, were none.
    fn note(&mut self, label: &str, problems: impl IntoIterator<Item = impl Display>) -> bool {
        let before = self.problems.len();
        let noted = problems.into_iter().map(|p| format!("[{label}] {p:#}"));
        self.problems.extend(noted);
        self.problems.len() == before
    }

    /// One check, failed by any of `problems` (an error, or a list).
    fn check_result(&mut self, label: &str, problems: impl IntoIterator<Item = impl Display>) {
        let none = self.note(label, problems);
        self.check(none);
    }

    fn waited(&mut self, waited: Result<()>) {
        if let Err(err) = waited {
            self.problems.push(format!("{err:#}"));
        }
    }

    /// Fails with every problem noted.
    fn verdict(&mut self, waited: Result<()>) -> Result<()> {
        self.waited(waited);
        self.judged = true;
        if !self.problems.is_empty() {
            bail!("{}", std::mem::take(&mut self.problems).join("\n"));
        }
        Ok(())
    }
}

pub fn run(kernel_src: Option<&Path>, kernel_image: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let logs = cache.run_logs("test")?;
    let mut tally = Tally::default();
    // The host tests build C against libibverbs and run bindgen, so the
    // packages come first on a fresh machine.
    prereqs::ensure_packages(&cache, prereqs::PACKAGES)?;
    // After Ctrl-C the remaining steps would only fail one after another.
    let checked = |tally: &mut Tally, ok| {
        tally.check(ok);
        interrupt::check()
    };

    let ok = step(1, "host tests (cargo test --workspace)", || {
        host_tests(&logs)
    });
    checked(&mut tally, ok)?;

    let ok = step(
        2,
        "patch series check, the UAPI header, rustfmt, man pages, and Debian's configuration with LITE=m",
        || {
            let source = source::prepare(&cache, kernel_src)?;
            series::check(&source)?;
            uapi_header::check(&source.dir)?;
            rustfmt_check::check(&source.dir)?;
            let pages = man_pages::lint()?;
            ui::progress(&format!("{pages} man pages lint clean"));
            kernel::check_distribution_config(&cache, kernel_src)
        },
    );
    checked(&mut tally, ok)?;

    let mut kernel = None;
    let mut selftest = None;
    let ok = step(
        3,
        "debug kernel build, and the selftests against its headers",
        || {
            let image = kernel::image(&cache, Flavour::Debug, kernel_src, kernel_image)?;
            kernel = Some(image);
            selftest = Some(build_selftest(&cache, kernel_src, &logs)?);
            Ok(())
        },
    );
    checked(&mut tally, ok)?;

    let (Some(kernel), Some(selftest)) = (kernel, selftest) else {
        let rest = ["KUnit", "cluster test", "failure test", "partition test"];
        let rest = rest
            .into_iter()
            .chain(["programs of one's own", "lock order"]);
        for (k, name) in (4..).zip(rest) {
            ui::say(&format!("==> [{k}/{STEPS}] {name} … not run (no kernel)"));
            tally.failed += 1;
        }
        return finish(&tally);
    };

    counted_step(4, "KUnit (lite*)", &mut tally, |counts| {
        kunit(&cache, &kernel, &logs, counts)
    });
    // The cluster steps share their images, built once.
    type ClusterStep<'a> = &'a dyn Fn(&Images, &Path, &mut Tally) -> Result<()>;
    let exec = |images: &Images, logs: &Path, counts: &mut Tally| {
        exec_test(images, logs, &selftest, counts)
    };
    let cluster_steps: [(String, ClusterStep); 4] = [
        (format!("cluster test ({CLUSTER_NODES} VMs)"), &cluster_test),
        (
            format!(
                "failure test, then the cluster test on the rejoined cluster ({FAILURE_NODES} VMs)"
            ),
            &failure_test,
        ),
        (
            format!("partition test ({PARTITION_NODES} VMs)"),
            &partition_test,
        ),
        (
            format!(
                "programs of one's own through cargo xtask cluster --exec: hello_cluster, the \
                 selftests and a kernel module ({EXEC_NODES} VMs)"
            ),
            &exec,
        ),
    ];
    let mut images = None;
    for (k, (name, body)) in (5..).zip(cluster_steps) {
        interrupt::check()?;
        counted_step(k, &name, &mut tally, |counts| {
            body(
                &cluster_images(&cache, &kernel, &mut images)?,
                &logs,
                counts,
            )
        });
    }

    interrupt::check()?;
    let nestings = std::mem::take(&mut tally.lock_nestings);
    let ok = step(
        9,
        "lock order against what lockdep saw in every guest",
        || lock_order(&nestings),
    );
    tally.check(ok);

    ui::say(&format!("logs: {}", logs.display()));
    finish(&tally)
}

fn lock_order(seen: &std::collections::BTreeSet<lockdep::Nesting>) -> Result<()> {
    let mut documented = std::collections::BTreeSet::new();
    for file in [lockdep::LOCK_ORDER_SOURCE, lockdep::DSM_LOCK_ORDER_SOURCE] {
        let text = fsutil::read_to_string(&repo_root().join(file))?;
        documented.extend(lockdep::documented(&text));
    }
    let sources = fsutil::read_rust_sources(&repo_root().join("rust-lite"))?;
    let condvars = lockdep::condvar_classes(sources.values().map(String::as_str));
    let problems = lockdep::problems(&documented, seen, &condvars);
    let what = format!("{} problems with the lock order", problems.len());
    ui::fail_listing(&what, &problems)?;
    ui::progress(&format!("{} nestings seen, each listed", seen.len()));
    Ok(())
}

/// Runs step `k`, whose `body` counts its checks in a tally of its own,
/// and adds that tally to `tally`. An error but the verdict of the step's
/// tally (a step that could not reach its checks) is one failure.
fn counted_step(
    k: usize,
    name: &str,
    tally: &mut Tally,
    body: impl FnOnce(&mut Tally) -> Result<()>,
) {
    let mut counts = Tally::default();
    step(k, name, || {
        let result = body(&mut counts);
        if result.is_err() && !counts.judged {
            counts.failed += 1;
        }
        result
    });
    tally.passed += counts.passed;
    tally.failed += counts.failed;
    tally.lock_nestings.append(&mut counts.lock_nestings);
}

fn finish(tally: &Tally) -> Result<()> {
    ui::say(&format!("{} passed, {} failed", tally.passed, tally.failed));
    if tally.failed > 0 || tally.passed == 0 {
        return Err(ui::ALREADY_REPORTED.into());
    }
    Ok(())
}

fn step(k: usize, name: &str, body: impl FnOnce() -> Result<()>) -> bool {
    ui::say(&format!("==> [{k}/{STEPS}] {name} …"));
    let start = Instant::now();
    let result = body();
    let time = ui::duration(start.elapsed());
    match result {
        Ok(()) => {
            ui::say(&format!("==> [{k}/{STEPS}] {name} … ok ({time})"));
            true
        }
        Err(err) => {
            ui::say(&format!("==> [{k}/{STEPS}] {name} … FAILED ({time})"));
            for line in format!("{err:#}").lines() {
                ui::say(&format!("    {line}"));
            }
            false
        }
    }
}

fn host_tests(logs: &Path) -> Result<()> {
    let log = logs.join("cargo-test.log");
    let result = run_logged(
        process::cargo()
            .current_dir(repo_root())
            .args(["test", "--workspace"]),
        &log,
        "cargo test",
        &|l| l.trim_start().starts_with("Compiling") || l.starts_with("     Running"),
    );
    if result.is_err() {
        let text = fsutil::read_tail(&log, 1024 * 1024).unwrap_or_default();
        let interesting: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.contains("FAILED")
                    || l.contains("panicked at")
                    || l.starts_with("error")
                    || l.starts_with("failures:")
            })
            .collect();
        for line in &interesting[interesting.len().saturating_sub(40)..] {
            ui::say(&format!("    {line}"));
        }
    }
    result
}

fn kunit(cache: &Cache, kernel: &Path, logs: &Path, counts: &mut Tally) -> Result<()> {
    let mut initrd = initramfs::build(cache, Variant::Minimal)?;
    // A modular kernel runs LITE's suites when the guest loads LITE.
    if let Some(modules) = kernel::modules_archive(kernel) {
        let with_modules = logs.join("kunit-initrd.cpio");
        newc::extend(&initrd, &with_modules, &[&fsutil::read(&modules)?])?;
        initrd = with_modules;
    }
    let serial_log = logs.join("kunit.log");
    let spec = VmSpec {
        name: "kunit".into(),
        kernel: kernel.to_path_buf(),
        initrd,
        append: "console=ttyS0 panic=-1 kunit.enable=1 kunit.filter_glob=lite* lite.run=kunit"
            .into(),
        memory_mib: 1024,
        serial_log: serial_log.clone(),
        // No network, on no terminal, unpinned, unmonitored.
        ..VmSpec::default()
    };
    let mut vms = vec![Vm::spawn(&spec, None, &logs.join("kunit.qemu.log"))?];
    let waited = qemu::wait_all(&mut vms, KUNIT_TIMEOUT, &mut || Ok(()));
    drop(vms);

    let log = read_log(&serial_log);
    let report = kunit::Report::parse(&log);
    for line in report.summary() {
        ui::progress(&line);
    }
    if report.skipped() > 0 {
        ui::progress(&format!("{} cases skipped (not counted)", report.skipped()));
    }
    counts.passed += report.passed();
    counts.failed += report.failed();
    let problems = report.problems();
    // Problems no failed case accounts for (nothing ran, a suite failed to
    // initialise) still have to show in the count.
    if !problems.is_empty() && report.failed() == 0 {
        counts.failed += 1;
    }
    let scan = logscan::problems(&log);
    counts.check(scan.is_empty() && waited.is_ok());
    counts.problems.extend(problems.into_iter().chain(scan));
    counts.waited(waited);
    if !counts.problems.is_empty() {
        let serial_log = format!("serial log: {}", serial_log.display());
        counts.problems.push(serial_log);
    }
    counts.verdict(Ok(()))
}

fn cluster_images(cache: &Cache, kernel: &Path, built: &mut Option<Images>) -> Result<Images> {
    if let Some(images) = built {
        return Ok(images.clone());
    }
    let images = Images {
        kernel: kernel.to_path_buf(),
        initramfs: initramfs::build(cache, Variant::Full)?,
        manager: cluster::build_manager(cache)?,
    };
    *built = Some(images.clone());
    Ok(images)
}

fn cluster_test(images: &Images, logs: &Path, counts: &mut Tally) -> Result<()> {
    let seed = fuzz::seed_from_clock();
    ui::progress(&format!(
        "lite-fuzz seed {seed:#x}; replay the fuzzing alone with: {}",
        fuzz::replay_command(FUZZ_SECONDS.div_ceil(60), seed, CLUSTER_NODES)
    ));
    let fuzz_params = fuzz::kernel_params(FUZZ_SECONDS, seed);
    let fuzzing = |_: usize| fuzz_params.clone();
    let roles = vec![TEST_ROLE.to_string(); CLUSTER_NODES];
    let spec = images.api_test_spec(roles, &fuzzing, logs);
    let mut cluster = Cluster::start(&spec)?;
    let mut no_death = NoDeathWatch::new(&spec);
    let waited = cluster.wait(CLUSTER_TIMEOUT, &mut || no_death.check());
    let node_logs = cluster.node_logs();
    drop(cluster);

    for (name, path) in &node_logs {
        counts.test_role(name, &read_log(path), &FUZZED_TEST_PROGRAMS);
    }
    counts.verdict(waited)
}

impl Tally {
    /// Each program's TAP on its own (one never started is one failure),
    /// and the log scan.
    fn programs(&mut self, name: &str, log: &str, programs: &[&str]) {
        let outputs = tap::split_programs(log);
        for program in programs {
            let label = format!("{name} {program}");
            match outputs.iter().find(|o| o.name.as_deref() == Some(*program)) {
                Some(output) => self.tap_report(&label, tap::Report::parse(&output.text)),
                None => self.check_result(&label, ["never started"]),
            }
        }
        self.scan(name, log);
    }

    /// [`Tally::programs`], and one more check: the kmemleak scan ran and
    /// no leak involves LITE (other leaks are only shown).
    fn test_role(&mut self, name: &str, log: &str, programs: &[&str]) {
        self.programs(name, log, programs);
        let findings = kmemleak::check(log);
        for warning in &findings.warnings {
            ui::progress(&format!("[{name}] warning: {warning}"));
        }
        self.check_result(name, findings.problems);
    }

    fn tap_report(&mut self, label: &str, report: tap::Report) {
        self.passed += report.passed();
        self.failed += report.failed();
        ui::progress(&format!(
            "{label}: {} passed, {} failed, {} skipped",
            report.passed(),
            report.failed(),
            report.skipped()
        ));
        self.note(label, report.problems());
        // A program without any TAP output has no result to count: count it.
        if report.points.is_empty() && report.planned.is_none() {
            self.failed += 1;
        }
    }

    fn scan(&mut self, name: &str, log: &str) {
        self.lock_nestings.extend(lockdep::seen(log));
        self.check_result(name, logscan::problems(log));
    }
}

fn failure_roles(nodes: usize) -> Vec<String> {
    failure::roles(nodes, SURVIVOR_ROLE, VICTIM_ROLE)
}

/// The survivors run without kmemleak (it slows emulated RDMA by half
/// again, and they are never scanned); the victim keeps it for its second
/// boot's scan. The survivors get [`CLUSTER_TEST_CMTIMEOUT`] and a second
/// interface, on which the one that leaves and rejoins adds an RDMA device.
fn failure_phase_append(i: usize) -> Vec<String> {
    if i == FAILURE_NODES {
        Vec::new()
    } else {
        vec![
            "kmemleak=off".to_string(),
            format!(
                "{CLUSTER_TEST_CMTIMEOUT}={}",
                cluster::API_TEST_DEAD_AFTER_MS
            ),
            format!("lite.ip2={}/24", cluster::second_ip(i)),
        ]
    }
}

/// LITE's defaults: the phase tests failure detection. The cluster test
/// after it takes [`cluster::API_TEST_DEAD_AFTER_MS`].
const FAILURE_PHASE_DEAD_AFTER_MS: Option<u32> = None;

/// Kills the victim once the survivors depend on it, then [`rejoin_phase`].
/// The victim's first log ends wherever the kill cut it off: it is neither
/// counted nor scanned, but the kill and the second boot are checks.
fn failure_test(images: &Images, logs: &Path, counts: &mut Tally) -> Result<()> {
    let logs = phase_logs(logs, "failure")?;
    let spec = images.spec(
        failure_roles(FAILURE_NODES),
        &failure_phase_append,
        &logs,
        FAILURE_PHASE_DEAD_AFTER_MS,
    );
    let mut cluster = Cluster::start(&spec)?;
    let started = Instant::now();
    let victim = FAILURE_NODES;
    let (_, first_boot_log) = cluster.node_log(victim)?;
    let mut deaths = NoDeathWatch::new(&spec);
    let killed = failure::kill_when_ready(&mut cluster, victim, started, &mut deaths);
    let (rebooted, waited) = match &killed {
        Ok(()) => rejoin_phase(&mut cluster, &spec, victim),
        // Without the victim's death the survivors cannot finish; their
        // logs still tell how far they got.
        Err(_) => {
            cluster.kill_all();
            (Err(anyhow!("not booted again: it was not killed")), Ok(()))
        }
    };
    let node_logs = cluster.node_logs();
    drop(cluster);

    counts.check_result(&format!("node{victim}"), killed.err());
    counts.check_result(&format!("node{victim}"), rebooted.err());
    for (index, (name, path)) in node_logs.iter().enumerate() {
        if index + 1 != victim {
            counts.programs(name, &read_log(path), &SURVIVOR_PROGRAMS);
        } else if *name == rebooted_name(victim) {
            let log = read_log(path);
            counts.test_role(name, &log, &TEST_PROGRAMS);
            let same_id = same_node_again(&read_log(&first_boot_log), &log);
            counts.check_result(name, same_id.err());
        }
    }
    counts.verdict(waited)
}

/// `joined as node N (incarnation I) of T`.
pub(crate) const JOINED_AS: &str = "joined as node ";

fn last_join(log: &str) -> Option<(u32, u32)> {
    log.lines().rev().find_map(|line| {
        let (_, rest) = line.split_once(JOINED_AS)?;
        let (id, rest) = rest.split_once(" (incarnation ")?;
        let (incarnation, _) = rest.split_once(')')?;
        Some((id.trim().parse().ok()?, incarnation.trim().parse().ok()?))
    })
}

/// The manager recognised the rebooted machine: same id, later incarnation.
fn same_node_again(first: &str, again: &str) -> Result<(), String> {
    let Some((id, incarnation)) = last_join(first) else {
        return Err("its first boot never joined".to_string());
    };
    let Some((new_id, new_incarnation)) = last_join(again) else {
        return Err(format!("it never joined again (it was node {id})"));
    };
    if new_id != id {
        return Err(format!(
            "it was node {id}, and joined again as node {new_id}"
        ));
    }
    if new_incarnation <= incarnation {
        return Err(format!(
            "node {id} joined again as incarnation {new_incarnation}, not after {incarnation}"
        ));
    }
    Ok(())
}

fn rebooted_name(victim: usize) -> String {
    format!("node{victim}-rejoin")
}

/// Once every survivor ended the failure program, gives the manager the
/// API tests' dead-after, boots the victim again with it, and waits for
/// the cluster test, stopping at any death. Whether the victim was booted
/// again, and how the wait ended.
fn rejoin_phase(
    cluster: &mut impl Nodes,
    spec: &ClusterSpec,
    victim: usize,
) -> (Result<()>, Result<()>) {
    let step = Step::start(format!(
        "waiting for the survivors to finish the failure test, then booting {}",
        rebooted_name(victim)
    ));
    match prepare_rejoin(cluster, spec, victim) {
        Ok(mut no_death) => {
            step.done();
            let waited = cluster.wait(CLUSTER_TIMEOUT, &mut || no_death.check());
            (Ok(()), waited)
        }
        // Without the victim's return the survivors cannot finish; their
        // logs still tell how far they got.
        Err(err) => {
            cluster.kill_all();
            (Err(err), Ok(()))
        }
    }
}

/// Up to the second boot; the watch for deaths from then on.
fn prepare_rejoin(
    cluster: &mut impl Nodes,
    spec: &ClusterSpec,
    victim: usize,
) -> Result<NoDeathWatch> {
    await_survivors_done(cluster, victim)?;
    // Every death the manager declared so far was the victim's; from now
    // on no node fails on purpose.
    let no_death = NoDeathWatch::from_now_on(spec, rejoin_node_logs(cluster, spec, victim));
    switch_manager_to_api_test_dead_after(
        cluster,
        &spec.logs.join(cluster::MANAGER_LOG),
        MANAGER_ACK_TIMEOUT,
    )?;
    let rejoin_spec = ClusterSpec {
        roles: spec.roles.clone(),
        dead_after_ms: Some(cluster::API_TEST_DEAD_AFTER_MS),
        ..*spec
    };
    let name = rebooted_name(victim);
    cluster.restart_node(&rejoin_spec, victim, REJOIN_ROLE, &name)?;
    ui::progress(&format!(
        "the survivors run the cluster test; booted {name} (same address and MAC, role {REJOIN_ROLE})"
    ));
    Ok(no_death)
}

/// The VMs' logs once the victim booted again.
fn rejoin_node_logs(cluster: &impl Nodes, spec: &ClusterSpec, victim: usize) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = cluster
        .node_logs()
        .into_iter()
        .map(|(_, log)| log)
        .collect();
    if let Some(log) = victim.checked_sub(1).and_then(|index| logs.get_mut(index)) {
        *log = spec.logs.join(format!("{}.log", rebooted_name(victim)));
    }
    logs
}

/// From `lite-cm: dead after MS ms from now on (was OLD ms)`.
fn dead_after_confirmation(ms: u32) -> String {
    format!("dead after {ms} ms from now on")
}

/// Waits up to `confirm_within` for the log to confirm it. The manager
/// runs on rather than being started anew: a new one would not know the
/// victim's id, with which it must join again as a later incarnation.
fn switch_manager_to_api_test_dead_after(
    cluster: &mut impl Nodes,
    manager_log: &Path,
    confirm_within: Duration,
) -> Result<()> {
    let ms = cluster::API_TEST_DEAD_AFTER_MS;
    let command = format!("dead-after-ms {ms}");
    // Only what the manager writes from now on can confirm the command.
    let confirmation = dead_after_confirmation(ms);
    let mut log = MarkerWatch::from_now_on(manager_log.to_path_buf(), &confirmation);
    cluster.tell_manager(&command)?;
    let manager = "the cluster manager";
    let ended = &mut || Ok(None);
    failure::await_marker(&mut log, manager, Instant::now(), confirm_within, ended).with_context(
        || {
            format!(
                "{manager} did not confirm `{command}` in {}: it must take its dead-after from \
                 that command on its standard input",
                manager_log.display()
            )
        },
    )?;
    ui::progress(&format!(
        "the manager declares a node dead after {ms} ms of silence from now on, \
         as the survivors and the rebooted victim"
    ));
    Ok(())
}

/// Until every survivor's `/init` announces the cluster test.
fn await_survivors_done(cluster: &mut impl Nodes, victim: usize) -> Result<()> {
    let marker = format!("{}{}", tap::PROGRAM_MARKER, SURVIVOR_PROGRAMS[1]);
    let since = Instant::now();
    for i in (1..=cluster.nodes()).filter(|&i| i != victim) {
        let (survivor, log) = cluster.node_log(i)?;
        failure::await_marker(
            &mut MarkerWatch::new(log, &marker),
            &survivor,
            since,
            failure::SURVIVORS_DONE_TIMEOUT,
            &mut || Ok(cluster.node_exited(i)?.then(|| survivor.clone())),
        )?;
    }
    Ok(())
}

fn partition_roles(nodes: usize) -> Vec<String> {
    failure::roles(nodes, PARTITION_SURVIVOR_ROLE, PARTITION_CUT_ROLE)
}

fn partition_append(_node: usize) -> Vec<String> {
    vec![format!("lite.pausesecs={PAUSE_TRAFFIC_SECS}")]
}

/// Pauses [`PAUSED_NODE`] under traffic, then cuts the last node off for
/// [`CUT_LENGTH`]. Every log is scanned as always; the pauses as planned,
/// no death meanwhile and the cut are three more checks.
fn partition_test(images: &Images, logs: &Path, counts: &mut Tally) -> Result<()> {
    let logs = phase_logs(logs, "partition")?;
    let spec = images.spec(
        partition_roles(PARTITION_NODES),
        &partition_append,
        &logs,
        None,
    );
    let mut cluster = Cluster::start(&spec)?;
    let started = Instant::now();
    let cut = PARTITION_NODES;
    let paused = pause_when_ready(&mut cluster, &logs.join(cluster::MANAGER_LOG), started);
    let partitioned = match &paused {
        Ok(_) => cut_when_ready(&mut cluster, cut, started, Instant::now()),
        Err(_) => Err(anyhow!(
            "not cut off: the pauses before the cut were not made"
        )),
    };
    let waited = match &partitioned {
        Ok(()) => cluster.wait(PARTITION_TIMEOUT, &mut || Ok(())),
        // Without the cut the nodes wait out every bound of theirs; their
        // logs still tell how far they got.
        Err(_) => {
            cluster.kill_all();
            Ok(())
        }
    };
    let node_logs = cluster.node_logs();
    drop(cluster);

    let label = format!("node{PAUSED_NODE} pauses");
    let (as_planned, no_death) = match &paused {
        Ok(pauses) => (pauses.problems(), pauses.manager.check().err()),
        Err(err) => {
            let unread = anyhow!("the manager's log was not read: the pauses were not made");
            (vec![format!("{err:#}")], Some(unread))
        }
    };
    counts.check_result(&label, as_planned);
    counts.check_result(&label, no_death);
    counts.check_result(&format!("node{cut}"), partitioned.err());
    for (name, path) in &node_logs {
        let log = read_log(path);
        counts.tap_report(name, tap::Report::parse(&log));
        counts.scan(name, &log);
    }
    counts.verdict(waited)
}

struct PausesMade {
    log: PauseLog,
    manager: ManagerVerdict,
    /// Nodes whose traffic time was up before the last pause ended.
    ended_early: Vec<String>,
}

impl PausesMade {
    fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self.log.verdict(&PAUSES).err().into_iter().collect();
        if !self.ended_early.is_empty() {
            problems.push(format!(
                "the traffic of {} ended before the last pause did: lite.pausesecs={} is too \
                 short for the pauses",
                self.ended_early.join(", "),
                PAUSE_TRAFFIC_SECS
            ));
        }
        problems
    }
}

/// Once every node printed [`PAUSE_READY`], and what the manager logged
/// until [`DEATH_SETTLE`] after the last pause. A failed QMP command stops
/// the cluster, since the VM may stay stopped.
fn pause_when_ready(
    cluster: &mut Cluster,
    manager_log: &Path,
    started: Instant,
) -> Result<PausesMade> {
    let (name, _) = cluster.node_log(PAUSED_NODE)?;
    let step = Step::start(format!(
        "waiting for every node's traffic, then pausing {name} {} times for {} ms, {} ms apart",
        PAUSES.pauses,
        PAUSES.length.as_millis(),
        PAUSES.gap.as_millis()
    ));
    failure::await_every_node(cluster, |_| PAUSE_READY, started, PAUSE_READY_TIMEOUT)?;
    let over: Vec<_> = (cluster.node_logs().into_iter())
        .map(|(node_name, log)| (node_name, MarkerWatch::new(log, PAUSES_OVER)))
        .collect();
    let mut manager = LogFollower::new(manager_log.to_path_buf());
    // What the manager said before the pauses is not theirs to answer for.
    manager.new_lines();
    let mut log = PauseLog::default();
    let paused = cluster
        .monitor(PAUSED_NODE, QMP_TIMEOUT)
        .and_then(|mut monitor| pause::pause_repeatedly(&mut monitor, &PAUSES, &mut log));
    if let Err(err) = paused {
        cluster.kill_all();
        return Err(err.context(format!("after {}", log.summary())));
    }
    let ended_early = over
        .into_iter()
        .filter_map(|(node_name, mut watch)| watch.poll().then_some(node_name))
        .collect();
    interrupt::sleep_until(Instant::now(), DEATH_SETTLE)?;
    let manager = ManagerVerdict::from_lines(&manager.new_lines());
    ui::progress(&format!(
        "paused {name}: {}; the manager logged {} late heartbeats, {} suspicions and {} \
         deaths meanwhile",
        pause::describe(&PAUSES, &log),
        manager.late,
        manager.suspicions,
        manager.deaths.len()
    ));
    step.done();
    Ok(PausesMade {
        log,
        manager,
        ended_early,
    })
}

/// Once every node printed its [`readiness_marker`].
fn cut_when_ready(
    cluster: &mut Cluster,
    cut: usize,
    started: Instant,
    ready_from: Instant,
) -> Result<()> {
    let (name, _) = cluster.node_log(cut)?;
    let step = Step::start(format!(
        "waiting for every node to get ready, then cutting {name} off the network for {}",
        ui::duration(CUT_LENGTH)
    ));
    let marker = |node| readiness_marker(node, cut);
    failure::await_every_node(cluster, marker, ready_from, CUT_READY_TIMEOUT)?;
    let tap = cluster.set_link(cut, false)?;
    let down_at = Instant::now();
    ui::progress(&format!(
        "{name} is ready; took its link ({tap}) down {} after the cluster started",
        ui::duration(started.elapsed())
    ));
    interrupt::sleep_until(Instant::now(), CUT_LENGTH)?;
    cluster.set_link(cut, true)?;
    ui::progress(&format!(
        "brought {name}'s link ({tap}) up again {} after the cluster started, after {} down",
        ui::duration(started.elapsed()),
        ui::duration(down_at.elapsed())
    ));
    step.done();
    Ok(())
}

fn readiness_marker(node: usize, cut: usize) -> &'static str {
    if node == cut {
        CUT_READY
    } else {
        SURVIVOR_READY
    }
}

pub(crate) const EXEC_EXAMPLE: &str = "userspace/examples/hello_cluster.c";
const EXEC_NODES: usize = 2;
/// Written on the next node and read back: a blank and quotes must reach
/// the program as one argument, unchanged.
const EXEC_MESSAGE: &str = "it's \"LITE\" on 2 nodes";
/// Boot included.
const EXEC_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Loads [`kernel::EXAMPLE_MODULE_DIR`]'s module on each node; done once
/// its memory, lock and RPC work with the next node succeeded.
const EXEC_MODULE_SCRIPT: &str = "userspace/examples/kernel-module/load-on-cluster.sh";
const EXEC_MODULE_DONE: &str = "load-on-cluster: lite_example loaded and unloaded";

/// Runs through `cargo xtask cluster --exec` [`EXEC_EXAMPLE`] (linked
/// dynamically, so its libraries must reach the guests), the selftests and,
/// on a kernel with modules, [`EXEC_MODULE_SCRIPT`]: on each node, the log
/// scan and the line that says the program did its work.
fn exec_test(images: &Images, logs: &Path, selftest: &Path, counts: &mut Tally) -> Result<()> {
    let logs = phase_logs(logs, "exec")?;
    let program = logs.join("hello_cluster");
    let flags = ["-O2", "-Wall", "-Wextra", "-Werror", "-I"];
    let (include, example) = (
        repo_root().join("userspace/include"),
        repo_root().join(EXEC_EXAMPLE),
    );
    compile(&flags, &include, &example, &program)?;
    let hello = user_cluster::ProgramArchive::new(&program, &[EXEC_MESSAGE.into()])?;
    let read_back = |log: &str| read_back_message(log, EXEC_MESSAGE);
    let not_read = format!("hello_cluster did not print that it read back \"{EXEC_MESSAGE}\"");
    run_own_program(images, &logs, &hello, counts, read_back, &not_read)?;
    let selftests = user_cluster::ProgramArchive::new(selftest, &[])?;
    // On the cluster nothing is skipped: a skip means the tests did not find it.
    let none_skipped = |log: &str| tap::Report::parse_kselftest(log).skipped() == 0;
    let skipped = "selftests skipped";
    for (name, log) in run_own_program(images, &logs, &selftests, counts, none_skipped, skipped)? {
        let report = tap::Report::parse_kselftest(&log);
        counts.tap_report(&format!("{name} {SELFTEST_NAME}"), report);
    }
    if kernel::modules_archive(&images.kernel).is_some() {
        let script = user_cluster::ProgramArchive::new(&repo_root().join(EXEC_MODULE_SCRIPT), &[])?;
        let loaded = |log: &str| {
            log.lines()
                .any(|l| logscan::strip_timestamp(l) == EXEC_MODULE_DONE)
        };
        let not_loaded = format!("no \"{EXEC_MODULE_DONE}\"");
        run_own_program(images, &logs, &script, counts, loaded, &not_loaded)?;
    } else {
        ui::progress("the kernel has no modules: the example kernel module is not loaded");
    }
    counts.verdict(Ok(()))
}

/// Counts each node's log scan and `done` (the problem `undone` if not);
/// each node's name and log.
fn run_own_program(
    boot: &Images,
    logs: &Path,
    archive: &user_cluster::ProgramArchive,
    counts: &mut Tally,
    done: impl Fn(&str) -> bool,
    undone: &str,
) -> Result<Vec<(String, String)>> {
    // Not the program's own name: the compiled example is there.
    let logs = phase_logs(logs, &format!("{}.logs", archive.name))?;
    let run = user_cluster::run_program(boot, &logs, EXEC_NODES, archive, EXEC_TIMEOUT)?;
    let mut node_logs = Vec::new();
    for node in &run.nodes {
        let log = read_log(&node.log);
        counts.scan(&node.name, &log);
        counts.check_result(&node.name, (!done(&log)).then_some(undone));
        node_logs.push((node.name.clone(), log));
    }
    counts.waited(run.waited);
    Ok(node_logs)
}

/// In the kernel tree the series made.
const SELFTEST_SOURCE: &str = "tools/testing/selftests/lite/lite_test.c";
const SELFTEST_NAME: &str = "lite_test";

/// As the kselftest Makefile does (`-O2 -Wall`, here with `-Werror`),
/// against the tree's exported UAPI headers.
fn build_selftest(cache: &Cache, kernel_src: Option<&Path>, logs: &Path) -> Result<PathBuf> {
    let (headers, tree) = kernel::export_headers(cache, kernel_src)?;
    let source = tree.join(SELFTEST_SOURCE);
    let program = logs.join(SELFTEST_NAME);
    let flags = ["-O2", "-Wall", "-Werror", "-isystem"];
    compile(&flags, &headers, &source, &program)?;
    Ok(program)
}

/// `cc FLAGS DIR -o program source`, FLAGS ending with the option that
/// takes the include directory `dir`.
fn compile(flags: &[&str], dir: &Path, source: &Path, program: &Path) -> Result<()> {
    let mut cc = Command::new("cc");
    cc.args(flags).arg(dir).arg("-o").arg(program).arg(source);
    process::output(&mut cc).with_context(|| format!("cannot compile {}", source.display()))?;
    Ok(())
}

/// Whether `hello_cluster` read `message` back from the next node.
fn read_back_message(log: &str, message: &str) -> bool {
    let quoted = format!(": \"{message}\"");
    log.lines().map(logscan::strip_timestamp).any(|line| {
        line.starts_with("hello_cluster: node ")
            && line.contains(" read back from node ")
            && line.ends_with(&quoted)
    })
}

fn phase_logs(logs: &Path, name: &str) -> Result<PathBuf> {
    let dir = logs.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initramfs::role_body;

    #[test]
    fn the_own_program_reads_back_its_argument_as_the_example_prints_it() {
        let log = "LITE-GUEST-RUN role=exec\r\n\
                   hello_cluster: node 2 of 2 (10.77.0.1)\r\n\
                   hello_cluster: node 2 read back from node 1: \"it's \"LITE\" on 2 nodes\"\r\n\
                   LITE-GUEST-EXIT rc=0\r\n";
        assert!(read_back_message(log, EXEC_MESSAGE));
        assert!(!read_back_message(log, "another message"));
        let wrong = log.replace("nodes\"\r", "nodes\" (not what it wrote)\r");
        assert!(!read_back_message(&wrong, EXEC_MESSAGE));
        assert!(repo_root().join(EXEC_MODULE_SCRIPT).is_file());
    }

    #[test]
    fn the_failure_phase_keeps_the_defaults_and_only_the_node_booted_again_keeps_kmemleak() {
        // The failure phase tests failure detection: LITE's 3 s, also on
        // the victim's first boot.
        assert_eq!(FAILURE_PHASE_DEAD_AFTER_MS, None);
        for (i, role) in (1..=FAILURE_NODES).zip(failure_roles(FAILURE_NODES)) {
            let append = failure_phase_append(i);
            if role == VICTIM_ROLE {
                assert!(append.is_empty(), "node {i}: {append:?}");
                assert!(!role_body(&role).contains("set_manager_timeout"));
            } else {
                // Survivors never scan, so nothing waits for a report; each
                // is given the API tests' silence, which it takes once its
                // failure program ended (`initramfs`'s role steps).
                let ip2 = format!("lite.ip2={}/24", cluster::second_ip(i));
                let tolerant = "lite.clustertestcmtimeout=10000";
                assert_eq!(append, ["kmemleak=off", tolerant, &ip2], "node {i}");
                assert!(!role_body(&role).contains("kmemleak_report"), "{role}");
            }
        }
    }

    /// A failure test's cluster for [`rejoin_phase`], in a directory of
    /// logs: a manager that confirms its commands in its log as `lite-cm`
    /// does (if `confirms`), and a wait during which the manager writes
    /// `during_wait`, a line between two ticks.
    struct RejoinFake {
        dir: crate::fsutil::TempDir,
        confirms: bool,
        during_wait: Vec<String>,
        /// What was done to the cluster, in order.
        events: Vec<String>,
        /// The spec's dead-after, role and name of the victim's reboot.
        rebooted: Option<(Option<u32>, String, String)>,
    }

    impl RejoinFake {
        /// A cluster whose survivors ended the failure program, after the
        /// manager declared the victim (node 4) dead.
        fn after_the_failure_phase(confirms: bool, during_wait: &[&str]) -> Self {
            let fake = RejoinFake {
                dir: crate::fsutil::TempDir::new("suite-rejoin").expect("a directory"),
                confirms,
                during_wait: during_wait.iter().map(|l| l.to_string()).collect(),
                events: Vec::new(),
                rebooted: None,
            };
            for i in 1..FAILURE_NODES {
                let marker = format!("{}{}\n", tap::PROGRAM_MARKER, SURVIVOR_PROGRAMS[1]);
                std::fs::write(fake.log(&format!("node{i}")), marker).expect("a node log");
            }
            let mut manager: String = (1..=FAILURE_NODES)
                .map(|i| {
                    format!(
                        "lite-cm: node {i} (incarnation 1) joined from 10.77.0.{i}:4000{i} (gid x), now {i} live, epoch {i}\n"
                    )
                })
                .collect();
            manager.push_str("lite-cm: node 4 (incarnation 1) declared dead: silent for 3104 ms\n");
            std::fs::write(fake.log("cm"), manager).expect("the manager's log");
            fake
        }

        fn log(&self, name: &str) -> PathBuf {
            self.dir.path().join(format!("{name}.log"))
        }

        fn manager_says(&self, line: &str) {
            crate::fsutil::append(&self.log("cm"), &format!("{line}\n"));
        }

        fn name(&self, i: usize) -> String {
            match &self.rebooted {
                Some((_, _, name)) if i == FAILURE_NODES => name.clone(),
                _ => format!("node{i}"),
            }
        }

        /// [`rejoin_phase`] on this cluster, with the failure phase's spec.
        fn rejoin(&mut self) -> (Result<()>, Result<()>) {
            let dir = self.dir.path().to_path_buf();
            let extra: &dyn Fn(usize) -> Vec<String> = &failure_phase_append;
            let roles = failure_roles(FAILURE_NODES);
            let spec = cluster::test_spec(roles, &dir, extra, FAILURE_PHASE_DEAD_AFTER_MS);
            rejoin_phase(self, &spec, FAILURE_NODES)
        }

        /// [`switch_manager_to_api_test_dead_after`] on this cluster.
        fn switch_dead_after(&mut self) -> Result<()> {
            let log = self.log("cm");
            switch_manager_to_api_test_dead_after(self, &log, Duration::from_millis(300))
        }
    }

    impl Nodes for RejoinFake {
        fn nodes(&self) -> usize {
            FAILURE_NODES
        }

        fn node_log(&self, i: usize) -> Result<(String, PathBuf)> {
            let name = self.name(i);
            let log = self.log(&name);
            Ok((name, log))
        }

        fn node_exited(&mut self, i: usize) -> Result<bool> {
            Ok(i == FAILURE_NODES && self.rebooted.is_none())
        }

        fn tell_manager(&mut self, command: &str) -> Result<()> {
            self.events.push(format!("told the manager {command}"));
            let ms = command.strip_prefix("dead-after-ms ");
            if let (true, Some(ms)) = (self.confirms, ms) {
                self.manager_says(&format!(
                    "lite-cm: dead after {ms} ms from now on (was 3000 ms)"
                ));
            }
            Ok(())
        }

        fn restart_node(
            &mut self,
            spec: &ClusterSpec,
            i: usize,
            role: &str,
            name: &str,
        ) -> Result<()> {
            assert_eq!(i, FAILURE_NODES);
            self.events.push(format!("booted {name}"));
            self.rebooted = Some((spec.dead_after_ms, role.to_string(), name.to_string()));
            Ok(())
        }

        fn wait(&mut self, _: Duration, tick: &mut dyn FnMut() -> Result<()>) -> Result<()> {
            self.events.push("waited".to_string());
            for line in std::mem::take(&mut self.during_wait) {
                tick()?;
                self.manager_says(&line);
            }
            tick()
        }

        fn kill_all(&mut self) {
            self.events.push("killed every VM".to_string());
        }
    }

    #[test]
    fn the_rejoined_cluster_is_tolerant_and_stops_at_a_death() {
        let death = "lite-cm: node 2 (incarnation 1) declared dead: silent for 10040 ms";
        let mut fake = RejoinFake::after_the_failure_phase(true, &[death]);
        let (rebooted, waited) = fake.rejoin();
        assert!(rebooted.is_ok(), "{rebooted:?}");
        // The manager first, then the victim's VM, with the same silence.
        let events = "told the manager dead-after-ms 10000, booted node4-rejoin, waited";
        assert_eq!(fake.events, events.split(", ").collect::<Vec<_>>());
        let after = Some(cluster::API_TEST_DEAD_AFTER_MS);
        let rejoin = (after, REJOIN_ROLE.into(), rebooted_name(FAILURE_NODES));
        assert_eq!(fake.rebooted, Some(rejoin));
        // The victim's death in the failure phase was meant; this one stops
        // the wait at once, with the manager's verdict.
        let err = waited.expect_err("a death in the cluster test stops it");
        let err = format!("{err:#}");
        assert!(err.contains(&death["lite-cm: ".len()..]), "{err}");
        // The rebooted victim may end before the survivors.
        let rejoined = "lite-cm: node 4 (incarnation 2) joined from 10.77.0.4:40100 (gid x), \
                        now 4 live, epoch 7";
        let gone = "lite-cm: node 4 (incarnation 2) declared dead: silent for 10020 ms";
        let mut fake = RejoinFake::after_the_failure_phase(true, &[rejoined, gone]);
        let second_boot = "LITE-GUEST-EXIT rc=0\r\nreboot: Restarting system\r\n";
        std::fs::write(fake.log(&rebooted_name(FAILURE_NODES)), second_boot).expect("a log");
        let (rebooted, waited) = fake.rejoin();
        assert!(rebooted.is_ok(), "{rebooted:?}");
        assert!(waited.is_ok(), "{waited:?}");
    }

    #[test]
    fn a_manager_that_keeps_its_dead_after_stops_the_phase() {
        let mut fake = RejoinFake::after_the_failure_phase(false, &[]);
        let err = fake.switch_dead_after().expect_err("no confirmation");
        let err = format!("{err:#}");
        let unconfirmed = err.contains("did not confirm `dead-after-ms 10000`");
        assert!(unconfirmed && err.contains("standard input"), "{err}");
        // Only a confirmation written after the command counts.
        let confirmation =
            |ms, was| format!("lite-cm: dead after {ms} ms from now on (was {was} ms)");
        let mut stale = RejoinFake::after_the_failure_phase(false, &[]);
        stale.manager_says(&confirmation(10_000, 3000));
        assert!(stale.switch_dead_after().is_err());
        let confirms = |line: String| line.contains(&dead_after_confirmation(10_000));
        assert!(confirms(confirmation(10_000, 3000)));
        assert!(!confirms(confirmation(3000, 10_000)));
    }

    /// Each run after its marker: `initramfs`'s role steps.
    #[test]
    fn each_role_announces_its_programs_in_the_order_they_are_counted() {
        let announced = |role| {
            let lines = role_body(role).lines();
            lines
                .filter_map(|l| l.trim().strip_prefix("program "))
                .collect::<Vec<_>>()
        };
        assert_eq!(announced(SURVIVOR_ROLE), SURVIVOR_PROGRAMS);
        assert_eq!(announced(TEST_ROLE), FUZZED_TEST_PROGRAMS);
        // The victim's second boot, which does not fuzz.
        let unfuzzed = FUZZED_TEST_PROGRAMS
            .into_iter()
            .filter(|&p| p != fuzz::PROGRAM);
        assert_eq!(unfuzzed.collect::<Vec<_>>(), TEST_PROGRAMS);
        // The leak scan comes after every program, as the role's last step.
        let body = role_body(TEST_ROLE);
        let last = body.lines().map(str::trim).rfind(|l| !l.is_empty());
        assert_eq!(last, Some("kmemleak_report"), "{body}");
    }

    #[test]
    fn nodes_are_counted_per_program_with_their_scans() {
        let cluster = "LITE-GUEST-PROGRAM lite-cluster-test\nTAP version 13\nok 1 - join\n1..1\n\
                       1 passed, 0 failed\n";
        let resources = "LITE-GUEST-PROGRAM lite-resources\nTAP version 13\n\
                         ok 1 - resources back to baseline: lmrs 0 -> 0\n1..1\n\
                         1 passed, 0 failed\n";
        let fuzz = "LITE-GUEST-PROGRAM lite-fuzz\nTAP version 13\n\
                    ok 1 - fuzz: every LITE system call was called\nnot ok 2 - fuzz: no alarms\n\
                    # 1 alarms\n1..2\n1 passed, 1 failed\n";
        let failure = "LITE-GUEST-PROGRAM lite-failure-test\nTAP version 13\nok 1 - a\nok 2 - b\n\
                       1..2\n2 passed, 0 failed\n";
        let survivor = format!(
            "boot\n1..1\n{failure}LITE-GUEST-PROGRAM lite-cluster-test\nTAP version 13\n\
             ok 1 - c # SKIP joined before\nnot ok 2 - d\n# why\n1..2\n1 passed, 1 failed\n\
             LITE-GUEST-EXIT rc=1\n"
        );
        let leak = "unreferenced object 0xffff888005a3c000 (size 64):\n  \
                    comm \"kworker/0:1\", pid 7, jiffies 4294940170\n  backtrace (crc 0):\n    \
                    __kmalloc_noprof+0x1cc/0x3d0\n    lite_rs_join+0x10/0x90\n";
        let scan = |leaks: &str, rc: u8| {
            format!("LITE-KMEMLEAK-BEGIN\n{leaks}LITE-KMEMLEAK-END rc=0\nLITE-GUEST-EXIT rc={rc}\n")
        };
        let tested = format!("{cluster}{resources}{}", scan("", 0));
        let leaky = format!("{cluster}{resources}{}", scan(leak, 0));
        let unscanned = format!("{cluster}LITE-GUEST-EXIT rc=0\n");
        let fuzzed = format!("{cluster}{fuzz}{resources}{}", scan("", 1));
        // The counts and the first line of each problem, one a line, of a
        // node of the test role (whose leak scan counts) or a survivor.
        let count = |test_role: bool, programs: &[&str], log: &str| {
            let mut tally = Tally::default();
            if test_role {
                tally.test_role("node1", log, programs);
            } else {
                tally.programs("node1", log, programs);
            }
            let problems = tally.problems.iter().filter_map(|p| p.lines().next());
            let problems: Vec<&str> = problems.collect();
            format!("{} {}: {}", tally.passed, tally.failed, problems.join("\n"))
        };
        let (test, fuzzing) = (&TEST_PROGRAMS, &FUZZED_TEST_PROGRAMS);
        let found = [
            count(true, test, &tested),
            count(true, test, &leaky),
            count(true, test, &unscanned),
            count(true, fuzzing, &fuzzed),
            count(true, test, &fuzzed),
            count(false, &SURVIVOR_PROGRAMS, &survivor),
            count(false, &SURVIVOR_PROGRAMS, failure),
        ];
        let exited = "[node1] guest role exited with rc=1";
        let want = [
            // join, lmrs, the log scan and the kmemleak scan.
            "4 0: ".to_string(),
            "3 1: [node1] kmemleak reports leaks involving LITE: 1".into(),
            // No scan at all: the resources program and the scan are missing.
            "2 2: [node1 lite-resources] never started\n[node1] no kmemleak report \
             (LITE-KMEMLEAK-BEGIN missing): the leak scan did not run"
                .into(),
            // join, every call, resources and the leak scan pass; no alarms
            // and the log scan (rc=1) fail.
            format!("4 2: [node1 lite-fuzz] not ok 2 - fuzz: no alarms\n{exited}"),
            // Counted without the fuzzer (the victim's second boot), its TAP
            // is no part of the count.
            format!("3 1: {exited}"),
            // A survivor: a, b; d; and the log scan (rc=1).
            format!("2 2: [node1 lite-cluster-test] not ok 2 - d\n{exited}"),
            // Cut off before the cluster test: it counts as one failure.
            "2 2: [node1 lite-cluster-test] never started\n\
             [node1] guest never reported LITE-GUEST-EXIT (hung or crashed)"
                .into(),
        ];
        assert_eq!(found, want);
    }

    #[test]
    fn the_rebooted_victim_must_join_with_its_old_id() {
        let first = "[    5.1] lite: joined as node 4 (incarnation 1) of 4\nkilled\n";
        let again = "lite: joined as node 4 (incarnation 2) of 4\n";
        assert_eq!(last_join(first), Some((4, 1)));
        assert_eq!(same_node_again(first, again), Ok(()));
        let other = same_node_again(first, "lite: joined as node 5 (incarnation 1) of 5\n");
        assert!(other.unwrap_err().contains("joined again as node 5"));
        let stale = same_node_again(first, first);
        assert!(stale.unwrap_err().contains("incarnation 1, not after 1"));
        assert!(same_node_again("booted\n", again).is_err());
        assert!(same_node_again(first, "").is_err());
    }

    #[test]
    fn the_victim_and_the_cut_node_are_last_and_the_victim_boots_again_under_its_own_name() {
        let survivor = "failure-survivor".to_string();
        let victim = "failure-victim";
        assert_eq!(failure_roles(4), [&survivor, &survivor, &survivor, victim]);
        assert_eq!(failure_roles(1), [victim]);
        let survivor = "partition-survivor".to_string();
        assert_eq!(partition_roles(3), [&survivor, &survivor, "partition-cut"]);
        assert_eq!(rebooted_name(4), "node4-rejoin");
        // Each node of the partition test waits for its own marker.
        assert_eq!(readiness_marker(3, 3), CUT_READY);
        assert_eq!(readiness_marker(1, 3), SURVIVOR_READY);
    }

    #[test]
    fn the_pauses_fit_the_traffic_and_the_managers_patience_and_count_only_all_made() {
        // A survivor, never the node that is cut off later.
        let roles = partition_roles(PARTITION_NODES);
        assert_eq!(roles[PAUSED_NODE - 1], PARTITION_SURVIVOR_ROLE);
        // Ten pauses, each shorter than the manager's default dead-after
        // (3 s) but long enough to be a real silence.
        assert_eq!(PAUSES.pauses, 10);
        assert!(PAUSES.length >= Duration::from_millis(2500));
        assert!(PAUSES.length < Duration::from_secs(3));
        // The traffic covers the pauses with margin for the markers to
        // come at different times (the harness also checks it in each run).
        let traffic = Duration::from_secs(PAUSE_TRAFFIC_SECS);
        assert_eq!(PAUSES.span(), Duration::from_millis(47_500));
        assert!(traffic >= PAUSES.span() + Duration::from_secs(5));
        assert_eq!(partition_append(1), ["lite.pausesecs=55"]);
        // The phase adds at most about 90 s: the paused node's clock
        // stands still while it is paused, so its traffic lasts that much
        // longer.
        assert!(traffic + PAUSES.length * PAUSES.pauses <= Duration::from_secs(90));
        // They count only when all were made under traffic.
        let all = PauseLog {
            pauses: vec![PAUSES.length; PAUSES.pauses as usize],
        };
        let made = |log: &PauseLog, ended_early: &[&str]| PausesMade {
            log: log.clone(),
            manager: ManagerVerdict::default(),
            ended_early: ended_early.iter().map(|n| n.to_string()).collect(),
        };
        assert!(made(&all, &[]).problems().is_empty());
        let early = made(&all, &["node1"]).problems().join("\n");
        let from_traffic =
            early.starts_with("the traffic of node1 ended before the last pause did");
        assert!(from_traffic, "{early}");
        let mut short = all.clone();
        short.pauses[3] = Duration::from_millis(2499);
        short.pauses.pop();
        let short_made = "made 9 of 10 pauses; shorter than 2500 ms: pause 4 lasted 2499 ms";
        assert_eq!(made(&short, &[]).problems(), [short_made]);
    }
}
