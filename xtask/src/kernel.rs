//! `cargo xtask kernel`: configure and build the kernel with the series applied.
//!
//! The configuration is `tinyconfig` plus `config/base.config` plus
//! `config/<flavour>.config`. Rewriting `.config` makes Kbuild rebuild a lot,
//! so the configuration is only regenerated when its inputs change (a stamp
//! in the build directory records them), and even then it is generated in a
//! scratch directory and copied over only if it differs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::paths::{repo_root, Cache};
use crate::prereqs::{self, Toolchain};
use crate::process::run_logged;
use crate::source::{self, KernelSource};
use crate::ui::{self, Step};
use crate::{apply, fsutil, interrupt, newc, patchset::Series, series};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Flavour {
    /// KUnit, KASAN, lockdep: for tests and the demo.
    Debug,
    /// No debugging options: for benchmarks.
    Release,
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavour::Debug => "debug",
            Flavour::Release => "release",
        })
    }
}

/// Records the inputs of the current `.config`, for `cargo xtask kernel`
/// and for the slow checks' builds.
const CONFIG_STAMP: &str = ".lite-config-stamp";
const SERIES_CONFIG_KEY: &str = ".lite-series-config-key";
/// Of a failed build's log, shown.
const ERROR_LINES: usize = 40;

pub fn run(flavour: Flavour, kernel_src: Option<&Path>, config_only: bool) -> Result<()> {
    let cache = Cache::locate()?;
    match build(&cache, flavour, kernel_src, config_only)? {
        Some(bzimage) => ui::say(&format!("bzImage: {}", bzimage.display())),
        None => ui::say("configured (no build requested)"),
    }
    Ok(())
}

/// The bzImage, unless `config_only`.
pub fn build(
    cache: &Cache,
    flavour: Flavour,
    kernel_src: Option<&Path>,
    config_only: bool,
) -> Result<Option<PathBuf>> {
    let tree = Tree::prepare(cache, kernel_src, &[])?;
    apply::sync(&tree.source, &repo_root().join(series::PATCH_DIR))?;
    let build_dir = cache.build(&flavour.to_string(), &tree.source.version);
    configure(cache, &tree, &build_dir, flavour)?;
    if config_only {
        return Ok(None);
    }
    compile(cache, &tree, &build_dir, flavour).map(Some)
}

/// `kernel_image` if given, else a freshly built one.
pub fn image(
    cache: &Cache,
    flavour: Flavour,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<PathBuf> {
    match kernel_image {
        Some(image) => {
            prereqs::ensure(cache, &[])?;
            if !image.is_file() {
                bail!("kernel image {} not found", image.display());
            }
            Ok(image.to_path_buf())
        }
        None => match build(cache, flavour, kernel_src, false)? {
            Some(image) => Ok(image),
            None => bail!("the kernel build produced no image"),
        },
    }
}

/// What every make of the kernel takes.
pub struct Tree {
    tools: Toolchain,
    pub source: KernelSource,
}

impl Tree {
    /// With the Debian packages `extra`; Debian's tree without `kernel_src`.
    fn prepare(cache: &Cache, kernel_src: Option<&Path>, extra: &[&str]) -> Result<Self> {
        let debian = kernel_src
            .is_none()
            .then_some(prereqs::KERNEL_SOURCE_PACKAGE);
        let packages: Vec<&str> = extra.iter().copied().chain(debian).collect();
        let tools = prereqs::ensure(cache, &packages)?;
        let source = source::prepare(cache, kernel_src)?;
        Ok(Self { tools, source })
    }
}

/// `make -C src O=build LLVM=1`.
fn make(tree: &Tree, build_dir: &Path) -> Command {
    let mut cmd = Command::new("make");
    tree.tools.apply(&mut cmd);
    let mut out = std::ffi::OsString::from("O=");
    out.push(build_dir);
    cmd.arg("-C").arg(&tree.source.dir).arg(out).arg("LLVM=1");
    cmd
}

fn make_target(tree: &Tree, dir: &Path, target: &str, log: &Path) -> Result<()> {
    let label = format!("make {target}");
    run_logged(make(tree, dir).arg(target), log, &label, &|_| false)
}

/// Regenerates `.config` when the fragments, the kernel version or the
/// series' Kconfig files changed, then checks that every fragment line stuck.
fn configure(cache: &Cache, tree: &Tree, build_dir: &Path, flavour: Flavour) -> Result<()> {
    let fragments = fragments(flavour);
    let stamp = config_stamp(&tree.source, &fragments)?;
    let stamp_path = build_dir.join(CONFIG_STAMP);
    if std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(());
    }

    let step = Step::start(format!("configuring the {flavour} kernel"));
    let log = cache.logs().join(format!("config-{flavour}.log"));
    let _ = std::fs::remove_file(&log);
    let scratch = fsutil::TempDir::new_in(cache.root(), &format!("config-{flavour}"))?;
    if regenerate_config(tree, scratch.path(), build_dir, &fragments, &log)? {
        ui::progress(&format!("wrote {}/.config", build_dir.display()));
    } else {
        ui::progress(".config unchanged");
    }

    let problems = unmet_fragments(&fragments, &build_dir.join(".config"))?;
    if !problems.is_empty() {
        bail!(
            "these options did not stick in {}/.config (missing dependency, or a \
             Kconfig symbol the series does not define yet):\n  {}\nlog: {}",
            build_dir.display(),
            problems.join("\n  "),
            log.display()
        );
    }

    make_target(tree, build_dir, "rustavailable", &log).with_context(|| {
        format!(
            "Rust is not available for the kernel build; `make LLVM=1 rustavailable` \
             explains why in {}",
            log.display()
        )
    })?;
    fsutil::write(&stamp_path, &stamp)?;
    step.done();
    Ok(())
}

/// On top of `tinyconfig`.
fn fragments(flavour: Flavour) -> Vec<PathBuf> {
    let root = repo_root();
    vec![
        root.join("config/base.config"),
        root.join(format!("config/{flavour}.config")),
    ]
}

/// `make headers` of the debug kernel, for the kselftests: the headers'
/// directory and the tree's.
pub fn export_headers(cache: &Cache, kernel_src: Option<&Path>) -> Result<(PathBuf, PathBuf)> {
    let tree = Tree::prepare(cache, kernel_src, &[])?;
    let build_dir = cache.build(&Flavour::Debug.to_string(), &tree.source.version);
    let log = cache.logs().join("headers.log");
    make_target(&tree, &build_dir, "headers", &log)?;
    Ok((build_dir.join("usr/include"), tree.source.dir))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lite {
    Enabled,
    Disabled,
}

impl fmt::Display for Lite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lite::Enabled => "enabled",
            Lite::Disabled => "disabled",
        })
    }
}

/// By which LITE's diagnostics are told from the kernel's.
const LITE_PATHS: [&str; 7] = [
    "ulp/lite/",
    "kernel/lite_syscalls.c",
    "helpers/lite.c",
    "uapi/linux/lite.h",
    "rdma/lite_api.h",
    "userspace-api/lite.rst",
    "driver-api/lite.rst",
];

/// Beyond the build's.
const SLOW_CHECK_PACKAGES: [&str; 4] = [
    "sparse",
    "python3-sphinx",
    "python3-sphinx-rtd-theme",
    "python3-yaml",
];

/// A C compiler's, sparse's or Sphinx's `FILE:LINE: warning: ...`, or the
/// `--> FILE:LINE` of a Rust compiler's or clippy's, about LITE's files.
fn is_lite_diagnostic(line: &str) -> bool {
    // Every `rust_helper_*` of rust/helpers/ is declared by no header, as
    // bindgen reads them from the C files: sparse says so for the kernel's
    // own helpers as for LITE's.
    if line.contains("helpers/lite.c") && line.contains("symbol 'rust_helper_") {
        return false;
    }
    let about_lite = LITE_PATHS.iter().any(|path| line.contains(path));
    let lower = line.to_ascii_lowercase();
    about_lite
        && (lower.contains("warning")
            || lower.contains("error")
            || line.trim_start().starts_with("--> "))
}

/// Kbuild's command compiling a Rust object as rustdoc's, private items
/// included.
fn rustdoc_command(compile: &str, output: &Path) -> Result<String> {
    let mut words = Vec::new();
    let mut compiler_seen = false;
    let mut skip_next = false;
    for word in compile.split(' ').filter(|w| !w.is_empty()) {
        if skip_next {
            skip_next = false;
            continue;
        }
        match word {
            "rustc" | "clippy-driver" if !compiler_seen => {
                compiler_seen = true;
                words.push("rustdoc".to_owned());
            }
            "--out-dir" => skip_next = true,
            _ if word.starts_with("--emit=") => {}
            _ => words.push(word.to_owned()),
        }
    }
    if !compiler_seen {
        bail!("not a Rust compiler's command: {compile}");
    }
    words.push("--document-private-items".into());
    words.push("-o".into());
    words.push(output.display().to_string());
    Ok(words.join(" "))
}

/// Builds and checks of the debug kernel's directory with whatever part
/// of the series the tree holds: the debug configuration where the tree
/// defines its options, LITE enabled or disabled.
pub struct StageBuild {
    pub tree: Tree,
    build_dir: PathBuf,
    scratch_root: PathBuf,
    log: PathBuf,
}

impl StageBuild {
    pub fn prepare(cache: &Cache, kernel_src: Option<&Path>) -> Result<Self> {
        let tree = Tree::prepare(cache, kernel_src, &SLOW_CHECK_PACKAGES)?;
        let build_dir = cache.build(&Flavour::Debug.to_string(), &tree.source.version);
        let log = cache.logs().join("slow-checks.log");
        let _ = std::fs::remove_file(&log);
        let build = Self {
            tree,
            build_dir,
            scratch_root: cache.root().to_path_buf(),
            log,
        };
        build.forget_configuration()?;
        Ok(build)
    }

    /// Makes the next `cargo xtask kernel` configure the build directory
    /// afresh, as these builds leave other configurations in it.
    pub fn forget_configuration(&self) -> Result<()> {
        for stamp in [CONFIG_STAMP, SERIES_CONFIG_KEY] {
            match std::fs::remove_file(self.build_dir.join(stamp)) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(err).context("cannot remove a configuration stamp");
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn build(&self, lite: Lite) -> Result<()> {
        self.configure(lite)?;
        let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()) + 1;
        self.make_checked(&[&format!("-j{jobs}"), "bzImage", "modules"])
    }

    /// The whole series applied.
    pub fn clippy(&self) -> Result<()> {
        self.configure(Lite::Enabled)?;
        self.make_checked(&["CLIPPY=1", "drivers/infiniband/ulp/lite/"])
    }

    /// On LITE's C files, those of the module and those in the kernel
    /// image (the whole series applied).
    pub fn sparse(&self) -> Result<()> {
        self.configure(Lite::Enabled)?;
        self.make_checked(&[
            "C=2",
            "drivers/infiniband/ulp/lite/",
            "kernel/lite_syscalls.o",
            "rust/helpers/helpers.o",
        ])
    }

    /// Of the directories holding LITE's pages.
    pub fn htmldocs(&self) -> Result<()> {
        self.make_checked(&["SPHINXDIRS=userspace-api driver-api", "htmldocs"])
    }

    /// The compiler's command from the object's `.cmd` file, as rustdoc:
    /// Kbuild's `rustdoc` target covers only the kernel's own crates.
    pub fn rustdoc(&self) -> Result<()> {
        let cmd_file = self
            .build_dir
            .join("drivers/infiniband/ulp/lite/.lite_main.o.cmd");
        let saved = fsutil::read_to_string(&cmd_file)?;
        let Some(compile) = saved
            .lines()
            .find_map(|line| line.split_once(" := ").map(|(_, cmd)| cmd))
        else {
            bail!("{} holds no command", cmd_file.display());
        };
        let output = self.build_dir.join("Documentation/output/lite-rustdoc");
        let command = rustdoc_command(compile, &output)?;
        let mut sh = Command::new("sh");
        self.tree.tools.apply(&mut sh);
        sh.current_dir(&self.build_dir)
            .env("RUSTC_BOOTSTRAP", "1")
            .args(["-c", &command]);
        self.run_checked(&mut sh, "rustdoc lite_main.rs")
    }

    fn make_checked(&self, args: &[&str]) -> Result<()> {
        let mut make = make(&self.tree, &self.build_dir);
        make.args(args);
        self.run_checked(&mut make, &format!("make {}", args.join(" ")))
    }

    /// Fails if `command` does, or if it reported anything about LITE's files.
    fn run_checked(&self, command: &mut Command, label: &str) -> Result<()> {
        let logged_before = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let made = run_logged(command, &self.log, label, &|l| is_progress_line(l));
        let text = fsutil::read_to_string(&self.log)?;
        let this_run = text.get(logged_before as usize..).unwrap_or(&text);
        if let Err(err) = made {
            interrupt::check()?;
            let lines = relevant_lines(this_run, ERROR_LINES).join("\n");
            return Err(err.context(format!("{label} failed:\n{lines}")));
        }
        let found: Vec<&str> = this_run.lines().filter(|l| is_lite_diagnostic(l)).collect();
        ui::fail_listing(&format!("{label} reports on LITE's files"), &found)
    }

    /// The debug configuration, with `CONFIG_LITE` off when `lite` says so;
    /// options the tree does not define yet are dropped, but LITE must be
    /// as asked wherever its Kconfig entry exists.
    fn configure(&self, lite: Lite) -> Result<()> {
        let mut fragments = fragments(Flavour::Debug);
        // What decides the configuration: LITE's switch and what decides
        // any configuration ([`config_stamp`]), the Kconfig files of the
        // part of the series applied among it. Patches that change none of
        // them keep the configuration as it is.
        let key = format!(
            "LITE {lite}\n{}",
            config_stamp(&self.tree.source, &fragments)?
        );
        let key_path = self.build_dir.join(SERIES_CONFIG_KEY);
        if std::fs::read_to_string(&key_path).ok().as_deref() == Some(key.as_str()) {
            return Ok(());
        }
        let scratch = fsutil::TempDir::new_in(&self.scratch_root, "config-series")?;
        if lite == Lite::Disabled {
            let off = scratch.path().join("lite-off.config");
            fsutil::write(&off, "# CONFIG_LITE is not set\n")?;
            fragments.push(off);
        }
        let (tree, build_dir) = (&self.tree, &self.build_dir);
        regenerate_config(tree, scratch.path(), build_dir, &fragments, &self.log)?;
        let config = self.build_dir.join(".config");
        let lite_kconfig = tree.source.dir.join("drivers/infiniband/ulp/lite/Kconfig");
        let defined = lite_kconfig.is_file();
        let built = fsutil::read_to_string(&config)?
            .lines()
            .any(|line| line == "CONFIG_LITE=m");
        if defined && built != (lite == Lite::Enabled) {
            bail!(
                "CONFIG_LITE did not come out {lite} in {}",
                config.display()
            );
        }
        fsutil::write(&key_path, &key)
    }
}

/// Generates the configuration in `scratch` and copies it to `build_dir`
/// unless the same already, as rewriting `.config` makes Kbuild rebuild a
/// lot; whether it was written.
fn regenerate_config(
    tree: &Tree,
    scratch: &Path,
    build_dir: &Path,
    fragments: &[PathBuf],
    log: &Path,
) -> Result<bool> {
    make_target(tree, scratch, "tinyconfig", log)?;
    merge_onto(tree, scratch, fragments, log)?;
    let fresh = fsutil::read_to_string(&scratch.join(".config"))?;
    let config = build_dir.join(".config");
    if std::fs::read_to_string(&config).ok().as_deref() == Some(fresh.as_str()) {
        return Ok(false);
    }
    fsutil::write(&config, &fresh)?;
    make_target(tree, build_dir, "olddefconfig", log)?;
    Ok(true)
}

/// Completed with `olddefconfig`.
fn merge_onto(tree: &Tree, dir: &Path, fragments: &[PathBuf], log: &Path) -> Result<()> {
    let merge_config = tree.source.dir.join("scripts/kconfig/merge_config.sh");
    let mut merge = Command::new(merge_config);
    merge
        .current_dir(dir)
        .args(["-m", "-O"])
        .arg(dir)
        .arg(dir.join(".config"))
        .args(fragments);
    run_logged(&mut merge, log, "merge_config.sh", &|_| false)?;
    make_target(tree, dir, "olddefconfig", log)
}

/// Debian's kernel configurations for 6.12, one xz file per flavour.
const DISTRIBUTION_CONFIG_PACKAGE: &str = "linux-config-6.12";
const DISTRIBUTION_CONFIG: &str = "/usr/src/linux-config-6.12/config.amd64_none_amd64.xz";

/// Checks that a distribution's configuration accepts LITE as a module:
/// Debian's amd64 configuration with `config/distribution.config` on top,
/// through `olddefconfig` on the source with the series applied, must keep
/// every option of that fragment (`LITE=m` with the RDMA core as modules).
///
/// Only the configuration: building `lite.ko` against it would first build
/// the Rust core crates of a distribution-sized kernel, several times the
/// whole test command's budget for a kernel build here.
pub fn check_distribution_config(cache: &Cache, kernel_src: Option<&Path>) -> Result<()> {
    let tree = Tree::prepare(cache, kernel_src, &[DISTRIBUTION_CONFIG_PACKAGE])?;
    apply::sync(&tree.source, &repo_root().join(series::PATCH_DIR))?;
    let scratch = fsutil::TempDir::new_in(cache.root(), "config-distribution")?;
    let log = cache.logs().join("config-distribution.log");
    let _ = std::fs::remove_file(&log);
    let debian = crate::process::output(Command::new("xz").args(["-dc", DISTRIBUTION_CONFIG]))
        .with_context(|| {
            format!("cannot read {DISTRIBUTION_CONFIG} (package {DISTRIBUTION_CONFIG_PACKAGE})")
        })?;
    fsutil::write(&scratch.path().join(".config"), debian)?;
    let fragment = [repo_root().join("config/distribution.config")];
    merge_onto(&tree, scratch.path(), &fragment, &log)?;
    let unmet = unmet_fragments(&fragment, &scratch.path().join(".config"))?;
    if !unmet.is_empty() {
        bail!(
            "Debian's configuration with config/distribution.config does not keep:\n  {}\nlog: {}",
            unmet.join("\n  "),
            log.display()
        );
    }
    Ok(())
}

fn config_stamp(source: &KernelSource, fragments: &[PathBuf]) -> Result<String> {
    let mut stamp = format!("version {}\n", source.version);
    for fragment in fragments {
        // Names, not paths: a checkout elsewhere must not force a new config.
        let name = fragment.file_name().unwrap_or(fragment.as_os_str());
        stamp += &format!(
            "fragment {} {}\n",
            name.to_string_lossy(),
            fsutil::sha256_file(fragment)?
        );
    }
    // Kconfig files the series adds or edits decide which fragment options
    // can stick, so they count as inputs too.
    let applied = Series::read_dir(&source.applied)?;
    for rel in applied.touched_files() {
        let is_kconfig = rel
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("Kconfig"));
        let path = source.dir.join(&rel);
        if is_kconfig && path.is_file() {
            stamp += &format!(
                "kconfig {} {}\n",
                rel.display(),
                fsutil::sha256_file(&path)?
            );
        }
    }
    Ok(stamp)
}

fn unmet_fragments(fragments: &[PathBuf], config: &Path) -> Result<Vec<String>> {
    let config = fsutil::read_to_string(config)?;
    let mut unmet = Vec::new();
    for fragment in fragments {
        let name = fragment.strip_prefix(repo_root()).unwrap_or(fragment);
        let lines = unmet_options(&fsutil::read_to_string(fragment)?, &config);
        unmet.extend(
            lines
                .iter()
                .map(|p| format!("{p} (from {})", name.display())),
        );
    }
    Ok(unmet)
}

fn unmet_options(fragment: &str, config: &str) -> Vec<String> {
    let mut unmet = Vec::new();
    for line in fragment.lines().map(str::trim) {
        if let Some(name) = line
            .strip_prefix("# ")
            .and_then(|l| l.strip_suffix(" is not set"))
        {
            let set = format!("{name}=");
            if config.lines().any(|l| l.starts_with(&set)) {
                unmet.push(format!("{line}: .config sets it"));
            }
        } else if line.starts_with("CONFIG_")
            && line.contains('=')
            && !config.lines().any(|l| l == line)
        {
            let name = line.split('=').next().unwrap_or(line);
            let actual = config
                .lines()
                .find(|l| l.starts_with(&format!("{name}=")))
                .unwrap_or("not set");
            unmet.push(format!("{line}: .config has {actual}"));
        }
    }
    unmet
}

/// A cpio archive to append to the guests' initrd.
pub fn modules_archive(image: &Path) -> Option<PathBuf> {
    let archive = modules_archive_path(image);
    archive.is_file().then_some(archive)
}

fn modules_archive_path(image: &Path) -> PathBuf {
    let mut name = image.as_os_str().to_owned();
    name.push(".modules.cpio");
    PathBuf::from(name)
}

fn compile(cache: &Cache, tree: &Tree, build_dir: &Path, flavour: Flavour) -> Result<PathBuf> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()) + 1;
    let log = cache.logs().join(format!("kernel-{flavour}.log"));
    let _ = std::fs::remove_file(&log);
    let step = Step::start(format!("building the {flavour} kernel (-j{jobs})"));
    let config = fsutil::read_to_string(&build_dir.join(".config"))?;
    let modular = config.lines().any(|l| l == "CONFIG_MODULES=y");
    let mut build = make(tree, build_dir);
    build.arg(format!("-j{jobs}")).arg("bzImage");
    if modular {
        build.arg("modules");
    }
    let result = run_logged(&mut build, &log, "make bzImage", &|l| is_progress_line(l));
    if let Err(err) = result {
        interrupt::check()?;
        let text = fsutil::read_tail(&log, 4 * 1024 * 1024).unwrap_or_default();
        let lines = relevant_lines(&text, ERROR_LINES).join("\n");
        return Err(err.context(format!("the {flavour} kernel build failed:\n{lines}")));
    }
    let bzimage = build_dir.join("arch/x86/boot/bzImage");
    if !bzimage.is_file() {
        bail!("make succeeded but {} is missing", bzimage.display());
    }
    let archive = modules_archive_path(&bzimage);
    if modular {
        pack_modules(tree, build_dir, &archive, &log)?;
    } else if archive.exists() {
        std::fs::remove_file(&archive)
            .with_context(|| format!("cannot remove {}", archive.display()))?;
    }
    step.done();
    Ok(bzimage)
}

/// With the out-of-tree ones, as `/usr/lib/modules/<release>/` (the
/// guests' `/lib` links to `usr/lib`; the `build` link is left out).
fn pack_modules(tree: &Tree, build_dir: &Path, archive: &Path, log: &Path) -> Result<()> {
    let staging = build_dir.join("modules-staging");
    fsutil::remove_dir_all_if_exists(&staging)?;
    let mut install_path = std::ffi::OsString::from("INSTALL_MOD_PATH=");
    install_path.push(&staging);
    run_logged(
        make(tree, build_dir)
            .arg(&install_path)
            .arg("INSTALL_MOD_STRIP=1")
            .arg("modules_install"),
        log,
        "make modules_install",
        &|l| is_progress_line(l),
    )?;
    for dir in OUT_OF_TREE_MODULES {
        build_out_of_tree_module(dir, tree, build_dir, &install_path, log)?;
    }
    let modules_dir = staging.join("lib/modules");
    let mut files = Vec::new();
    for rel in fsutil::walk_files(&modules_dir)? {
        let data = std::fs::read(modules_dir.join(&rel))?;
        files.push((format!("usr/lib/modules/{}", rel.display()), data));
    }
    fsutil::write(archive, newc::archive(&files, newc::REGULAR_FILE | 0o644))
}

/// Uses LITE's kernel API.
pub const EXAMPLE_MODULE_DIR: &str = "userspace/examples/kernel-module";
/// `lite-bench` times kernel message round trips with it.
const KMSG_BENCH_MODULE_DIR: &str = "userspace/kernel-bench";
const OUT_OF_TREE_MODULES: [&str; 2] = [EXAMPLE_MODULE_DIR, KMSG_BENCH_MODULE_DIR];

/// As a user does (`make M=`), from a copy in the build directory, since
/// Kbuild writes its objects beside the sources.
fn build_out_of_tree_module(
    dir: &str,
    tree: &Tree,
    build_dir: &Path,
    install_path: &std::ffi::OsStr,
    log: &Path,
) -> Result<()> {
    let name = Path::new(dir).file_name().context("a module directory")?;
    let copy = build_dir.join("out-of-tree").join(name);
    fsutil::remove_dir_all_if_exists(&copy)?;
    let sources = repo_root().join(dir);
    for rel in fsutil::walk_files(&sources)? {
        fsutil::copy(&sources.join(&rel), &copy.join(&rel))?;
    }
    let mut module = std::ffi::OsString::from("M=");
    module.push(&copy);
    run_logged(
        make(tree, build_dir).arg(&module).arg("modules"),
        log,
        &format!("make M={dir} modules"),
        &|l| is_progress_line(l),
    )?;
    run_logged(
        make(tree, build_dir)
            .arg(&module)
            .arg(install_path)
            .arg("INSTALL_MOD_STRIP=1")
            .arg("modules_install"),
        log,
        &format!("make M={dir} modules_install"),
        &|l| is_progress_line(l),
    )
}

/// Kbuild's quiet progress lines: `  CC      mm/vmalloc.o`, `  RUSTC L rust/core.o`.
fn is_progress_line(line: &str) -> bool {
    line.strip_prefix("  ")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase())
        && line.split_whitespace().count() >= 2
}

/// The last `max` lines that are not progress or directory chatter.
fn relevant_lines(log: &str, max: usize) -> Vec<&str> {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            !l.trim().is_empty()
                && !is_progress_line(l)
                && !l.starts_with("$ ")
                && !l.contains("Entering directory")
                && !l.contains("Leaving directory")
        })
        .collect();
    lines[lines.len().saturating_sub(max)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustdoc_documents_what_the_compiler_compiled() {
        let compile = "RUST_MODFILE=x/lite rustc --edition=2021 -Zcrate-attr='feature(a,b)' \
                       --crate-type rlib --out-dir x/ --emit=dep-info=x/.d --emit=obj=x/o.o \
                       /src/x/lite_main.rs";
        assert_eq!(
            rustdoc_command(compile, Path::new("/out")).unwrap(),
            "RUST_MODFILE=x/lite rustdoc --edition=2021 -Zcrate-attr='feature(a,b)' \
             --crate-type rlib /src/x/lite_main.rs --document-private-items -o /out"
        );
        assert!(rustdoc_command("cc -c x.c", Path::new("/out")).is_err());
    }

    #[test]
    fn diagnostics_about_lite_are_told_from_the_kernel_s() {
        let about_lite = [
            "drivers/infiniband/ulp/lite/lite_api.c:12:5: warning: unused variable 'x'",
            "  --> drivers/infiniband/ulp/lite/internal/node.rs:40:9",
            "kernel/lite_syscalls.c:30:1: warning: symbol 'x' was not declared. Should it be static?",
            "ulp/lite/lite_helpers.c:28:6: warning: symbol 'lite_device_param' was not declared.",
            "Documentation/userspace-api/lite.rst:12: WARNING: Unexpected indentation.",
            "./include/rdma/lite_api.h:99: warning: Function parameter 'x' not described",
        ];
        let not_lite = [
            "  RUSTC [M] drivers/infiniband/ulp/lite/lite_main.o",
            "rust/helpers/lite.c:23:5: warning: symbol 'rust_helper_ib_post_send' was not \
             declared. Should it be static?",
            "mm/slub.c:1:1: warning: something in the kernel",
            "  --> rust/kernel/sync.rs:3:4",
        ];
        assert!(about_lite.iter().all(|l| is_lite_diagnostic(l)));
        assert!(!not_lite.iter().any(|l| is_lite_diagnostic(l)));
    }

    #[test]
    fn checks_fragment_options() {
        let fragment = "# comment\nCONFIG_RUST=y\nCONFIG_LITE=y\n# CONFIG_SLUB_TINY is not set\n\
                        # CONFIG_KASAN is not set\nCONFIG_HZ=250\n";
        let config = "CONFIG_RUST=y\n# CONFIG_LITE is not set\nCONFIG_SLUB_TINY=y\nCONFIG_HZ=100\n";
        let expected = [
            "CONFIG_LITE=y: .config has not set",
            "# CONFIG_SLUB_TINY is not set: .config sets it",
            "CONFIG_HZ=250: .config has CONFIG_HZ=100",
        ];
        assert_eq!(unmet_options(fragment, config), expected);
        let met = "CONFIG_RUST=y\nCONFIG_LITE=y\nCONFIG_HZ=250\n";
        assert!(unmet_options(fragment, met).is_empty());
    }

    #[test]
    fn keeps_errors_not_progress() {
        let log = "  CC      a.o\nerror[E0425]: cannot find value `x`\n  --> lite.rs:3:5\n\
                   make[2]: Entering directory '/b'\n  RUSTC L rust/core.o\n  LD      vmlinux.o\n\
                   mm/vmalloc.c:12:3: error: foo\n   |     ^^^ not found\n\
                   make: *** [Makefile] Error 2\n";
        assert_eq!(
            relevant_lines(log, 40),
            [
                "error[E0425]: cannot find value `x`",
                "  --> lite.rs:3:5",
                "mm/vmalloc.c:12:3: error: foo",
                "   |     ^^^ not found",
                "make: *** [Makefile] Error 2"
            ]
        );
        assert_eq!(relevant_lines(log, 1), ["make: *** [Makefile] Error 2"]);
        assert!(!is_progress_line("  "));
    }
}
