//! The guest initramfs: busybox, RDMA tools, LITE's guest programs and `/init`.
//!
//! Dynamically linked host tools (`rdma`, perftest, `ibv_devinfo`) are
//! copied with every library `ldd` lists and the ELF interpreter, plus the
//! rxe verbs provider that libibverbs loads at run time. LITE's Rust guest
//! programs are built statically; its C programs (`userspace/compat`) link
//! `lite-lib.so` and libc, and Python comes with its standard library and
//! the `lite` package (see `guest_python`). The image is a gzipped newc
//! cpio archive whose entries are in sorted order.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::fsutil;
use crate::guest_python;
use crate::paths::{repo_root, Cache};
use crate::process::{self, run_logged};
use crate::ui::Step;

const INIT_SCRIPT: &str = include_str!("init.sh");

/// The body of guest role `role`'s case in `/init`.
#[cfg(test)]
pub fn role_body(role: &str) -> &'static str {
    let start = INIT_SCRIPT
        .find(&format!("\n{role})"))
        .unwrap_or_else(|| panic!("init.sh has no role {role}"));
    let body = &INIT_SCRIPT[start + role.len() + 2..];
    &body[..body
        .find(";;")
        .unwrap_or_else(|| panic!("role {role} has no end"))]
}

/// Each of `needles` first found after the one before it.
#[cfg(test)]
pub fn assert_in_order(text: &str, needles: &[&str]) {
    let at = |needle: &&str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in {text}"))
    };
    let places: Vec<usize> = needles.iter().map(at).collect();
    assert!(
        places.windows(2).all(|w| w[0] < w[1]),
        "not in this order: {needles:?}"
    );
}

/// Host programs the guest needs.
pub(crate) const HOST_TOOLS: &[&str] = &[
    "rdma",
    "ibv_devinfo",
    "ib_write_lat",
    "ib_read_lat",
    "ib_send_lat",
    "ib_send_bw",
    "ib_write_bw",
    "ib_read_bw",
    "ib_atomic_lat",
];

/// Package `lite-tools`.
const GUEST_TOOLS: &[&str] = &[
    "lite-demo",
    "lite-cluster-test",
    "lite-failure-test",
    "lite-partition-test",
    "lite-bench",
    "lite-resources",
    "lite-secret",
    "lite-fuzz",
];

/// The paper's applications (package `lite-apps`).
pub(crate) const GUEST_APPS: &[&str] = &["lite-log", "lite-mapreduce", "lite-graph"];

/// `userspace/compat`'s `GUEST_PROGRAMS`, installed in `/usr/bin`.
const GUEST_C_PROGRAMS: &[&str] = &[
    "lite-compat-test",
    "lite-compat-test-static",
    "lite_hello",
    "lite_share",
    "lite_rpc",
    "lite_lock",
    "lite-verbs-bench",
];

/// Installed in `/usr/lib` (the programs' run path has `$ORIGIN/../lib`).
pub(crate) const GUEST_C_LIBRARY: &str = "lite-lib.so";
/// Where `userspace/compat`'s build script puts its artifacts.
pub(crate) const C_ARTIFACT_DIR: &str = "lite-c";
/// Where libibverbs finds its provider configuration and the rxe provider.
const RXE_DRIVER_CONF: &str = "/etc/libibverbs.d/rxe.driver";
const PROVIDER_DIR: &str = "/usr/lib/x86_64-linux-gnu/libibverbs";

const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Full,
    /// Busybox and `/init` only: enough for a KUnit boot, and independent
    /// of whether LITE's guest programs build.
    Minimal,
}

pub fn build(cache: &Cache, variant: Variant) -> Result<PathBuf> {
    let name = match variant {
        Variant::Full => "initramfs",
        Variant::Minimal => "initramfs-minimal",
    };
    let step = Step::start(format!("building {name}"));
    let guest = match variant {
        Variant::Full => build_guest_tools(cache)?,
        Variant::Minimal => GuestBuild::default(),
    };
    let full = variant == Variant::Full;
    let dir = cache.initramfs();
    let root = dir.join(format!("{name}.root"));
    fsutil::remove_dir_all_if_exists(&root)?;
    for sub in "bin dev etc proc root sys tmp usr/bin usr/lib usr/lib64".split(' ') {
        fs::create_dir_all(root.join(sub))?;
    }
    // Debian merged /usr: keep the same shape so the paths compiled into
    // the loader and libibverbs resolve.
    symlink("usr/lib", root.join("lib"))?;
    symlink("usr/lib64", root.join("lib64"))?;
    symlink("bin", root.join("sbin"))?;
    symlink("../bin", root.join("usr/sbin"))?;

    install_busybox(&root)?;
    let mut libs = BTreeSet::new();
    if full {
        for tool in HOST_TOOLS {
            let path = find_host_tool(tool)?;
            copy_executable(&path, &root.join("usr/bin").join(tool))?;
            libs.extend(shared_libraries(&path)?);
        }
        fsutil::copy(
            Path::new(RXE_DRIVER_CONF),
            &root.join(&RXE_DRIVER_CONF[1..]),
        )
        .context("the rxe verbs provider is missing: install ibverbs-providers")?;
        let provider = rxe_provider()?;
        libs.extend(shared_libraries(&provider)?);
        libs.insert(provider);
        guest_python::install(&root, cache, &mut libs)?;
    }
    for program in &guest.c_programs {
        let name = program.file_name().context("C program without a name")?;
        copy_executable(program, &root.join("usr/bin").join(name))?;
        // The compatibility library is installed below, from the build.
        libs.extend(
            shared_libraries(program)?
                .into_iter()
                .filter(|lib| lib.file_name() != Some(GUEST_C_LIBRARY.as_ref())),
        );
    }
    if let Some(library) = &guest.c_library {
        copy_executable(library, &root.join("usr/lib").join(GUEST_C_LIBRARY))?;
    }
    for lib in &libs {
        install_library(&root, lib)?;
    }
    for bin in &guest.rust_tools {
        let name = bin.file_name().context("guest tool without a name")?;
        copy_executable(bin, &root.join("bin").join(name))?;
    }
    let init = root.join("init");
    fs::write(&init, INIT_SCRIPT)?;
    fs::set_permissions(&init, fs::Permissions::from_mode(0o755))?;

    let image = dir.join(format!("{name}.cpio.gz"));
    pack(&root, &image)?;
    step.done();
    Ok(image)
}

#[derive(Default)]
struct GuestBuild {
    /// Static.
    rust_tools: Vec<PathBuf>,
    /// Dynamically linked.
    c_programs: Vec<PathBuf>,
    c_library: Option<PathBuf>,
}

/// The Rust tools and applications static, the C programs and library
/// with `cc`.
fn build_guest_tools(cache: &Cache) -> Result<GuestBuild> {
    let target_dir = repo_root().join("target/guest");
    let log = cache.logs().join("guest-tools.log");
    let _ = fs::remove_file(&log);
    run_logged(
        process::cargo()
            .current_dir(repo_root())
            .args("build --release -p lite-tools -p lite-apps -p lite-compat --target".split(' '))
            .arg(GUEST_TARGET)
            .arg("--target-dir")
            .arg(&target_dir)
            // Static binaries need no libraries in the guest. With an
            // explicit --target, RUSTFLAGS spares build scripts and proc macros.
            .env("RUSTFLAGS", "-C target-feature=+crt-static"),
        &log,
        "cargo build -p lite-tools -p lite-apps -p lite-compat",
        &|l| l.trim_start().starts_with("Compiling"),
    )
    .context("building LITE's guest tools failed")?;
    let out = target_dir.join(GUEST_TARGET).join("release");
    let existing = |path: PathBuf, what: &str| {
        if path.is_file() {
            Ok(path)
        } else {
            bail!("{what} did not produce {}", path.display())
        }
    };
    let c_dir = out.join(C_ARTIFACT_DIR);
    Ok(GuestBuild {
        rust_tools: GUEST_TOOLS
            .iter()
            .map(|name| existing(out.join(name), "lite-tools"))
            .chain(
                GUEST_APPS
                    .iter()
                    .map(|name| existing(out.join(name), "lite-apps")),
            )
            .collect::<Result<_>>()?,
        c_programs: GUEST_C_PROGRAMS
            .iter()
            .map(|name| existing(c_dir.join(name), "lite-compat"))
            .collect::<Result<_>>()?,
        c_library: Some(existing(c_dir.join(GUEST_C_LIBRARY), "lite-compat")?),
    })
}

fn install_busybox(root: &Path) -> Result<()> {
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        bail!("/bin/busybox not found: install busybox-static");
    }
    copy_executable(busybox, &root.join("bin/busybox"))?;
    let list = process::output(Command::new(busybox).arg("--list"))?;
    for applet in list.lines().map(str::trim).filter(|a| !a.is_empty()) {
        // `--list` prints plain names; anything else would escape /bin.
        if applet.contains('/') || applet == "busybox" {
            continue;
        }
        symlink("busybox", root.join("bin").join(applet))?;
    }
    Ok(())
}

fn find_host_tool(name: &str) -> Result<PathBuf> {
    ["/usr/bin", "/usr/sbin", "/sbin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
        .with_context(|| {
            format!("{name} not found (packages iproute2, ibverbs-utils and perftest provide the guest tools)")
        })
}

fn rxe_provider() -> Result<PathBuf> {
    let entries = fs::read_dir(PROVIDER_DIR)
        .with_context(|| format!("cannot list {PROVIDER_DIR}: install ibverbs-providers"))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with("librxe-rdmav") && n.ends_with(".so"))
        })
        .collect();
    found.sort();
    found
        .pop()
        .with_context(|| format!("no librxe-rdmav*.so in {PROVIDER_DIR}"))
}

/// And the ELF interpreter.
pub(crate) fn shared_libraries(binary: &Path) -> Result<BTreeSet<PathBuf>> {
    let out = process::output(Command::new("ldd").arg(binary))?;
    parse_ldd(&out).with_context(|| format!("ldd {}", binary.display()))
}

/// A "not found" library is an error.
fn parse_ldd(output: &str) -> Result<BTreeSet<PathBuf>> {
    let mut libs = BTreeSet::new();
    for line in output.lines().map(str::trim) {
        let (name, target) = line.split_once("=>").unwrap_or(("", line));
        let target = target.trim();
        if target.starts_with("not found") {
            bail!("library {} not found", name.trim());
        }
        let path = target.split_whitespace().next();
        libs.extend(path.filter(|p| p.starts_with('/')).map(PathBuf::from));
    }
    Ok(libs)
}

/// Relative to the guests' root: the canonical directory, with the file
/// name ldd used (the soname).
pub(crate) fn guest_library_path(lib: &Path) -> Result<PathBuf> {
    let name = lib
        .file_name()
        .with_context(|| format!("library path {} without a file name", lib.display()))?;
    let dir = lib
        .parent()
        .with_context(|| format!("library path {} without a directory", lib.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    Ok(dir.strip_prefix("/").unwrap_or(&dir).join(name))
}

fn install_library(root: &Path, lib: &Path) -> Result<()> {
    copy_executable(lib, &root.join(guest_library_path(lib)?))
}

pub(crate) fn copy_executable(from: &Path, to: &Path) -> Result<()> {
    fsutil::copy(from, to)?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot chmod {}", to.display()))
}

/// `cpio -o -H newc | gzip` of `root`, entries sorted, owned by root.
fn pack(root: &Path, image: &Path) -> Result<()> {
    let list: String = fsutil::walk(root, true)?
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();

    let tmp = image.with_extension("tmp");
    let out = fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut cpio = Command::new("cpio")
        .current_dir(root)
        .args(["--quiet", "-o", "-H", "newc", "-R", "0:0", "--reproducible"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run cpio (package cpio)")?;
    let cpio_out = cpio.stdout.take().context("cpio has no stdout")?;
    let mut gzip = Command::new("gzip")
        .args(["-n", "-6"])
        .stdin(cpio_out)
        .stdout(out)
        .spawn()
        .context("cannot run gzip")?;
    {
        use std::io::Write;
        let mut stdin = cpio.stdin.take().context("cpio has no stdin")?;
        stdin.write_all(list.as_bytes())?;
    }
    let cpio_status = cpio.wait()?;
    let gzip_status = gzip.wait()?;
    if !cpio_status.success() || !gzip_status.success() {
        bail!("packing the initramfs failed (cpio: {cpio_status}, gzip: {gzip_status})");
    }
    fs::rename(&tmp, image).with_context(|| format!("cannot write {}", image.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_c_programs_are_the_ones_lite_compat_builds() {
        let lib = fs::read_to_string(repo_root().join("userspace/compat/src/lib.rs"))
            .expect("userspace/compat/src/lib.rs");
        let section = lib
            .split("pub const GUEST_PROGRAMS: &[&str] = &[")
            .nth(1)
            .and_then(|rest| rest.split("];").next())
            .expect("GUEST_PROGRAMS in userspace/compat/src/lib.rs");
        let listed: Vec<&str> = section.split('"').skip(1).step_by(2).collect();
        assert_eq!(listed, GUEST_C_PROGRAMS);
    }

    #[test]
    fn parses_ldd_output() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibibverbs.so.1 => /lib/x86_64-linux-gnu/libibverbs.so.1 (0x00007f)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let libs: Vec<_> = parse_ldd(out).unwrap().into_iter().collect();
        let expected = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libibverbs.so.1",
            "/lib64/ld-linux-x86-64.so.2",
        ];
        assert_eq!(libs, expected.map(PathBuf::from));
        assert!(parse_ldd("\tlibfoo.so.1 => not found\n").is_err());
    }

    /// What roles run, `role: step`, each role's steps in order as `/init`
    /// writes them; each `lite-*` program that starts a step is packed.
    const ROLE_STEPS: [&str; 18] = [
        "demo: lite-demo --cm \"$cm\" --nodes \"$nodes\"",
        "test: program lite-cluster-test\n",
        "test: lite-cluster-test --cm \"$cm\" --nodes \"$nodes\" --resources-baseline \"$RESOURCES_BASELINE\"",
        // Fuzzing only with a fuzzing time from the harness, and its seed.
        "test: if [ \"$fuzzsecs\" -gt 0 ]",
        "test: program lite-fuzz\n",
        "test: lite-fuzz --cm \"$cm\" --nodes \"$nodes\" --seconds \"$fuzzsecs\" ${seed:+--seed \"$seed\"}",
        "test: program lite-resources\n",
        // The baseline the cluster test saved is the one compared.
        "test: lite-resources --baseline \"$RESOURCES_BASELINE\"",
        "fuzz: lite-fuzz --cm \"$cm\" --nodes \"$nodes\" --seconds \"$fuzzsecs\" ${seed:+--seed \"$seed\"}",
        // The survivors take the cluster test's silence once the failure
        // program ended, before the marker after which the harness tells
        // the manager the same.
        "failure-survivor: program lite-failure-test\n",
        "failure-survivor: lite-failure-test --cm \"$cm\" --nodes \"$nodes\" --role survivor ${ip2:+--second-address \"$ip2\"}",
        "failure-survivor: set_manager_timeout \"$clustertestcmtimeout\"",
        "failure-survivor: program lite-cluster-test\n",
        "failure-survivor: lite-cluster-test --cm \"$cm\" --nodes \"$nodes\" || rc=$?",
        "failure-victim: lite-failure-test --cm \"$cm\" --nodes \"$nodes\" --role victim",
        "partition-survivor: lite-partition-test --cm \"$cm\" --nodes \"$nodes\" --role survivor --pause-traffic \"$pausesecs\" ",
        "partition-cut: lite-partition-test --cm \"$cm\" --nodes \"$nodes\" --role cut --pause-traffic \"$pausesecs\" ",
        "bench-lock: lite-bench --cm \"$cm\" --contend \"$nodes\"",
    ];

    #[test]
    fn every_guest_role_runs_packed_programs_in_order() {
        let mut steps: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for role_step in ROLE_STEPS {
            let (role, step) = role_step.split_once(": ").expect("role: step");
            steps.entry(role).or_default().push(step);
            let program = step.split(' ').next().filter(|p| p.starts_with("lite-"));
            assert!(program.is_none_or(|p| GUEST_TOOLS.contains(&p)), "{step}");
        }
        for (role, steps) in steps {
            assert_in_order(role_body(role), &steps);
        }
        // The marker /init prints is the one the harness splits at.
        let marker = format!("echo \"{}$1\"", crate::tap::PROGRAM_MARKER);
        assert!(INIT_SCRIPT.contains(&marker));
    }

    /// That init.sh has `texts`, in this order, all before the roles.
    fn before_the_roles(texts: &[&str]) {
        assert_in_order(INIT_SCRIPT, &[texts, &["case \"$run\" in"]].concat());
    }

    #[test]
    fn init_script_reads_its_parameters_loads_the_secret_and_sets_the_timeout_before_any_role() {
        // And it reports its exit and reboots.
        assert!(INIT_SCRIPT.starts_with("#!/bin/sh\n"));
        assert!(INIT_SCRIPT.contains(crate::logscan::EXIT_MARKER));
        assert!(INIT_SCRIPT.contains("reboot -f"));
        // The secret, failing the boot without it.
        let path = format!("CLUSTER_SECRET=/{}\n", crate::secret::GUEST_SECRET_PATH);
        before_the_roles(&[&path, "lite-secret load \"$CLUSTER_SECRET\") || {"]);
        assert!(GUEST_TOOLS.contains(&"lite-secret"));
        // The manager's timeout, written in one place, failing the boot
        // when it cannot be set.
        before_the_roles(&[
            "lite.cmtimeout=*) cmtimeout=${arg#lite.cmtimeout=} ;;",
            "\nset_manager_timeout() {\n\techo \"$1\" > /sys/kernel/debug/lite/manager_timeout_ms || {",
            "\tset_manager_timeout \"$cmtimeout\" || finish 1\n",
        ]);
        // The harness's parameters are read, with their defaults, before any role.
        // Parameter, its variable, and the value it has when the harness
        // gives none: no fuzzing, no pause phase, LITE's own timeout.
        for (parameter, variable, default) in [
            ("lite.cmtimeout", "cmtimeout", ""),
            ("lite.clustertestcmtimeout", "clustertestcmtimeout", ""),
            ("lite.fuzzsecs", "fuzzsecs", "0"),
            ("lite.seed", "seed", ""),
            ("lite.pausesecs", "pausesecs", "0"),
        ] {
            let defined = format!("\n{variable}={default}\n");
            let parsed = format!("\t{parameter}=*) {variable}=${{arg#{parameter}=}} ;;\n");
            before_the_roles(&[&defined, "for arg in $(cat /proc/cmdline); do", &parsed]);
            let described = INIT_SCRIPT.contains(&format!("#   {parameter}="));
            assert!(described, "{parameter} is not described");
        }
    }
}
