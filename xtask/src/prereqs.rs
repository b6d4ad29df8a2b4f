//! Host prerequisites: Debian packages, the `rust-src` component and bindgen.
//!
//! Every check is cheap when already satisfied (one `dpkg-query`, one
//! `rustc --print sysroot`, one `bindgen --version`), so commands call
//! [`ensure`] unconditionally.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use anyhow::{bail, Context, Result};

use crate::paths::Cache;
use crate::process::{self, run_logged};
use crate::ui::{self, Step};

/// Debian packages every command needs: kernel build, QEMU and guest tools.
pub const PACKAGES: &[&str] = &[
    "clang",
    "gcc",
    "libc6-dev",
    "lld",
    "llvm",
    "libclang-dev",
    "flex",
    "fonts-dejavu-core",
    "bison",
    "bc",
    "groff-base",
    "perl",
    "libelf-dev",
    "libssl-dev",
    "cpio",
    "qemu-system-x86",
    "busybox-static",
    "iproute2",
    "ibverbs-utils",
    "ibverbs-providers",
    "libibverbs-dev",
    "perftest",
    "python3",
    "python3-pip",
    "python3-setuptools",
    "python3-wheel",
    "rdma-core",
    "rsync",
];

pub const KERNEL_SOURCE_PACKAGE: &str = "linux-source-6.12";

/// Oldest bindgen the 6.12 kernel accepts (`scripts/min-tool-version.sh`).
const MIN_BINDGEN: (u32, u32, u32) = (0, 65, 1);

pub struct Toolchain {
    /// `PATH` for kernel builds, with cargo's bin directory first so the
    /// cargo-installed bindgen wins over Debian's older one.
    path: OsString,
}

impl Toolchain {
    pub fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("PATH", &self.path)
    }
}

/// Installs what is missing when we can (root with apt-get; cargo; rustup).
pub fn ensure(cache: &Cache, extra_packages: &[&str]) -> Result<Toolchain> {
    let step = Step::start("checking prerequisites");
    let mut packages: Vec<&str> = PACKAGES.to_vec();
    packages.extend_from_slice(extra_packages);
    ensure_packages(cache, &packages)?;
    ensure_rust_src(cache)?;
    let cargo_bin = ensure_bindgen(cache)?;
    let mut path = OsString::from(&cargo_bin);
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    step.done();
    Ok(Toolchain { path })
}

/// Or explains how to install them when not root.
pub fn ensure_packages(cache: &Cache, packages: &[&str]) -> Result<()> {
    let missing = missing_packages(packages)?;
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() || !Path::new("/usr/bin/apt-get").exists() {
        bail!(
            "missing Debian packages: {list}\n\
             install them with:\n    sudo apt-get install -y {list}\n\
             then run the command again"
        );
    }
    let log = cache.logs().join("apt.log");
    let step = Step::start(format!("installing Debian packages: {list}"));
    // The package lists may be stale or absent on a fresh machine; one
    // update per run is enough.
    static UPDATE: Once = Once::new();
    let mut update_result = Ok(());
    UPDATE.call_once(|| {
        update_result = run_logged(
            Command::new("apt-get").arg("update"),
            &log,
            "apt-get update",
            &|l| !l.trim().is_empty(),
        );
    });
    update_result?;
    run_logged(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y"])
            .args(&missing),
        &log,
        "apt-get install",
        &|l| !l.trim().is_empty(),
    )?;
    let still = missing_packages(&missing.iter().map(String::as_str).collect::<Vec<_>>())?;
    if !still.is_empty() {
        bail!(
            "apt-get did not install: {}; see {}",
            still.join(" "),
            log.display()
        );
    }
    step.done();
    Ok(())
}

fn missing_packages(packages: &[&str]) -> Result<Vec<String>> {
    if which("dpkg-query").is_none() {
        bail!(
            "dpkg-query not found: this tool expects Debian 12 (or a derivative); \
             install the equivalents of: {}",
            packages.join(" ")
        );
    }
    // dpkg-query exits 1 when some package is unknown, but still prints the
    // known ones, so the exit status is ignored and the output decides.
    let out = Command::new("dpkg-query")
        .arg("-W")
        .arg("-f=${Package} ${Status}\n")
        .args(packages)
        .output()
        .context("cannot run dpkg-query")?;
    let installed = installed_from_dpkg(&String::from_utf8_lossy(&out.stdout));
    Ok(packages
        .iter()
        .filter(|p| !installed.contains(**p))
        .map(|p| p.to_string())
        .collect())
}

fn installed_from_dpkg(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter_map(|line| {
            let (name, status) = line.split_once(' ')?;
            status.ends_with(" installed").then(|| name.to_string())
        })
        .collect()
}

/// `rustup component add rust-src` if the kernel's Rust build cannot find `core`'s source.
fn ensure_rust_src(cache: &Cache) -> Result<()> {
    let sysroot = process::output(Command::new("rustc").args(["--print", "sysroot"]))
        .context("rustc is needed to build the kernel's Rust code")?;
    let library = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library");
    if library.is_dir() {
        return Ok(());
    }
    let step = Step::start("installing the rust-src component");
    run_logged(
        Command::new("rustup").args(["component", "add", "rust-src"]),
        &cache.logs().join("rustup.log"),
        "rustup component add rust-src",
        &|l| !l.trim().is_empty(),
    )?;
    step.done();
    Ok(())
}

/// Cargo's bin directory, holding a bindgen the kernel accepts.
fn ensure_bindgen(cache: &Cache) -> Result<PathBuf> {
    let cargo_bin = cargo_home()?.join("bin");
    let bindgen = cargo_bin.join("bindgen");
    let current = process::output(Command::new(&bindgen).arg("--version"))
        .ok()
        .and_then(|v| parse_bindgen_version(&v));
    match current {
        Some(v) if v >= MIN_BINDGEN => return Ok(cargo_bin),
        Some((a, b, c)) => ui::say(&format!(
            "    bindgen {a}.{b}.{c} is older than the kernel's minimum 0.65.1"
        )),
        None => {}
    }
    let step = Step::start("installing bindgen-cli with cargo (about 2 minutes)");
    run_logged(
        process::cargo().args(["install", "bindgen-cli", "--locked"]),
        &cache.logs().join("bindgen-install.log"),
        "cargo install bindgen-cli",
        &|l| l.trim_start().starts_with("Compiling"),
    )?;
    step.done();
    Ok(cargo_bin)
}

/// `$CARGO_HOME`, else `$HOME/.cargo`.
fn cargo_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cargo")),
        None => bail!("cannot find cargo's home: set CARGO_HOME or HOME"),
    }
}

fn parse_bindgen_version(text: &str) -> Option<(u32, u32, u32)> {
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    Some((major, minor, patch))
}

/// Effective uid 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            // Fields: real, effective, saved, filesystem.
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bindgen_versions() {
        assert_eq!(parse_bindgen_version("bindgen 0.73.2\n"), Some((0, 73, 2)));
        let beta = "bindgen 0.60.1-beta";
        assert_eq!(parse_bindgen_version(beta), Some((0, 60, 1)));
        assert_eq!(parse_bindgen_version("garbage"), None);
        assert!(parse_bindgen_version("bindgen 0.65.0").unwrap() < MIN_BINDGEN);
        assert!(parse_bindgen_version("bindgen 0.65.1").unwrap() >= MIN_BINDGEN);
    }

    #[test]
    fn reads_dpkg_status() {
        let out = "clang install ok installed\nperftest deinstall ok config-files\n\
                   bc install ok installed\n";
        let set = installed_from_dpkg(out);
        assert!(set.contains("clang") && set.contains("bc"));
        assert!(!set.contains("perftest"));
    }
}
