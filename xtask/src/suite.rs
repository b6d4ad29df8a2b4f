//! `cargo xtask test`: every test, ending with one `N passed, M failed` line.
//!
//! Steps: host unit tests, patch-series check, debug kernel build, KUnit in
//! one VM, and the cluster test on three VMs. A step that cannot run
//! because an earlier one failed counts as one failure. The final count is
//! KUnit cases + every node's TAP results + one per other check (host
//! tests, patch check, kernel build, each log scan).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::cluster::{self, Cluster, ClusterSpec};
use crate::initramfs::{self, Variant};
use crate::kernel::{self, Flavour};
use crate::paths::{repo_root, Cache};
use crate::process::{self, run_logged};
use crate::qemu::{self, Vm, VmSpec};
use crate::{fsutil, interrupt, kunit, logscan, series, source, tap, ui};

/// Number of steps, for `[k/N]`.
const STEPS: usize = 5;
/// Upper bound for the KUnit boot.
const KUNIT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// Upper bound for the cluster test.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(40 * 60);
/// Nodes in the cluster test.
const CLUSTER_NODES: usize = 3;

/// Passed and failed counts.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
}

impl Tally {
    fn check(&mut self, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }
}

/// `cargo xtask test`.
pub fn run(kernel_src: Option<&Path>, kernel_image: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let logs = cache.run_logs("test")?;
    let mut tally = Tally::default();

    let ok = step(1, "host tests (cargo test --workspace)", || {
        host_tests(&logs)
    });
    tally.check(ok);
    // After Ctrl-C the remaining steps would only fail one after another.
    interrupt::check()?;

    let ok = step(2, "patch series check", || {
        let source = source::prepare(&cache, kernel_src)?;
        series::check(&source)
    });
    tally.check(ok);
    // After Ctrl-C the remaining steps would only fail one after another.
    interrupt::check()?;

    let mut kernel = None;
    let ok = step(3, "debug kernel build", || {
        kernel = Some(kernel::image(
            &cache,
            Flavour::Debug,
            kernel_src,
            kernel_image,
        )?);
        Ok(())
    });
    tally.check(ok);
    // After Ctrl-C the remaining steps would only fail one after another.
    interrupt::check()?;

    let Some(kernel) = kernel else {
        skip(4, "KUnit", "no kernel");
        skip(5, "cluster test", "no kernel");
        tally.failed += 2;
        return finish(&tally);
    };

    let mut kunit_counts = Tally::default();
    step(4, "KUnit (lite*)", || {
        kunit(&cache, &kernel, &logs, &mut kunit_counts)
    });
    tally.passed += kunit_counts.passed;
    tally.failed += kunit_counts.failed;
    interrupt::check()?;

    let mut cluster_counts = Tally::default();
    step(5, &format!("cluster test ({CLUSTER_NODES} VMs)"), || {
        cluster_test(&cache, &kernel, &logs, &mut cluster_counts)
    });
    tally.passed += cluster_counts.passed;
    tally.failed += cluster_counts.failed;

    ui::say(&format!("logs: {}", logs.display()));
    finish(&tally)
}

/// Prints the final line and turns failures into a non-zero exit.
fn finish(tally: &Tally) -> Result<()> {
    ui::say(&format!("{} passed, {} failed", tally.passed, tally.failed));
    if tally.failed > 0 || tally.passed == 0 {
        return Err(ui::AlreadyReported.into());
    }
    Ok(())
}

/// Runs one numbered step, printing its start, result and time.
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

fn skip(k: usize, name: &str, why: &str) {
    ui::say(&format!("==> [{k}/{STEPS}] {name} … not run ({why})"));
}

/// `cargo test --workspace`; on failure shows the failing tests.
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

/// Boots one VM with KUnit enabled and checks its KTAP output.
fn kunit(cache: &Cache, kernel: &Path, logs: &Path, counts: &mut Tally) -> Result<()> {
    let initrd = initramfs::build(cache, Variant::Minimal).inspect_err(|_| counts.failed += 1)?;
    let serial_log = logs.join("kunit.log");
    let spec = VmSpec {
        name: "kunit".into(),
        kernel: kernel.to_path_buf(),
        initrd,
        append: "console=ttyS0 panic=-1 kunit.enable=1 kunit.filter_glob=lite* lite.run=kunit"
            .into(),
        memory_mib: 1024,
        serial_log: serial_log.clone(),
        nic: None,
        cpu: None,
    };
    let mut vms = vec![Vm::spawn(&spec, None, &logs.join("kunit.qemu.log"))?];
    let waited = qemu::wait_all(&mut vms, KUNIT_TIMEOUT, &mut || {});
    drop(vms);

    let log = read_log(&serial_log);
    let report = kunit::Report::parse(&log);
    for line in report.summary() {
        ui::progress(&line);
    }
    if report.skipped() > 0 {
        ui::progress(&format!("{} cases skipped (not counted)", report.skipped()));
    }
    counts.passed += report.passed() as u64;
    counts.failed += report.failed() as u64;
    let mut problems = report.problems();
    // Problems no failed case accounts for (nothing ran, a suite failed to
    // initialise) still have to show in the count.
    if !problems.is_empty() && report.failed() == 0 {
        counts.failed += 1;
    }
    let scan = logscan::problems(&log);
    counts.check(scan.is_empty() && waited.is_ok());
    problems.extend(scan);
    if let Err(err) = waited {
        problems.push(format!("{err:#}"));
    }
    if !problems.is_empty() {
        bail!(
            "{}\nserial log: {}",
            problems.join("\n"),
            serial_log.display()
        );
    }
    Ok(())
}

/// Boots the cluster with role `test` and checks every node's TAP and log.
fn cluster_test(cache: &Cache, kernel: &Path, logs: &Path, counts: &mut Tally) -> Result<()> {
    let prepared = (|| -> Result<(PathBuf, PathBuf)> {
        Ok((
            initramfs::build(cache, Variant::Full)?,
            cluster::build_manager(cache)?,
        ))
    })();
    let (initrd, manager) = prepared.inspect_err(|_| counts.failed += 1)?;
    let no_extra = |_: usize| Vec::new();
    let spec = ClusterSpec {
        roles: vec!["test".to_string(); CLUSTER_NODES],
        kernel,
        initrd: &initrd,
        memory_mib: 1024,
        extra_append: &no_extra,
        pin_cpus: false,
        manager: &manager,
        logs,
    };
    let mut cluster = Cluster::start(&spec).inspect_err(|_| counts.failed += 1)?;
    let waited = cluster.wait(CLUSTER_TIMEOUT, &mut || {});
    let node_logs = cluster.node_logs();
    drop(cluster);

    let mut problems = Vec::new();
    for (name, path) in &node_logs {
        let log = read_log(path);
        let report = tap::Report::parse(&log);
        counts.passed += report.passed();
        counts.failed += report.failed();
        ui::progress(&format!(
            "{name}: {} passed, {} failed, {} skipped",
            report.passed(),
            report.failed(),
            report.skipped()
        ));
        problems.extend(
            report
                .problems()
                .into_iter()
                .map(|p| format!("[{name}] {p}")),
        );
        // A node without any TAP output has no result to count: count it.
        if report.points.is_empty() && report.planned.is_none() {
            counts.failed += 1;
        }
        let scan = logscan::problems(&log);
        counts.check(scan.is_empty());
        problems.extend(scan.into_iter().map(|p| format!("[{name}] {p}")));
    }
    if let Err(err) = waited {
        problems.push(format!("{err:#}"));
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}

/// A console log as text; a missing log reads as empty (the scan then fails it).
fn read_log(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
