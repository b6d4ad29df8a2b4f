//! The cached kernel source tree: version detection, extraction or copy, and
//! the pristine copies of the files the patch series edits.
//!
//! A tree is prepared once per version and origin: either Debian's
//! `linux-source-6.12` tarball or a user-supplied 6.12.y tree (copied with
//! rsync, `.git` excluded). Preparation happens in a temporary directory
//! renamed into place at the end, so an interrupted run never leaves a
//! half-extracted tree behind. Later runs reuse the tree; only the patch
//! series is re-synchronised ([`crate::apply`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::paths::Cache;
use crate::process::{self, run_logged};
use crate::series::EDITED_FILES;
use crate::ui::{self, Step};
use crate::{fsutil, prereqs};

const DEBIAN_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const TARBALL_TOP: &str = "linux-source-6.12";

pub struct KernelSource {
    /// Kernel version, e.g. `6.12.117`.
    pub version: String,
    /// The tree (`src-<ver>/`), with whatever series is recorded in `src-<ver>.applied/`.
    pub dir: PathBuf,
    /// Pristine copies of [`EDITED_FILES`] (`src-<ver>.pristine/`).
    pub pristine: PathBuf,
    /// Copies of the patches applied to `dir` (`src-<ver>.applied/`).
    pub applied: PathBuf,
}

/// Or reuses it; Debian's linux-source-6.12 without `kernel_src`.
pub fn prepare(cache: &Cache, kernel_src: Option<&Path>) -> Result<KernelSource> {
    let (version, origin) = match kernel_src {
        Some(dir) => {
            let dir = dir
                .canonicalize()
                .with_context(|| format!("kernel source {} not found", dir.display()))?;
            let makefile = fsutil::read_to_string(&dir.join("Makefile"))
                .with_context(|| format!("{} is not a kernel source tree", dir.display()))?;
            (
                checked_version(&makefile, &dir.display().to_string())?,
                Origin::Tree(dir),
            )
        }
        None => {
            if !Path::new(DEBIAN_TARBALL).exists() {
                prereqs::ensure_packages(cache, &[prereqs::KERNEL_SOURCE_PACKAGE])?;
            }
            // --occurrence stops reading the 145 MB archive once the
            // Makefile (one of its first members) has been found.
            let makefile = process::output(Command::new("tar").args([
                "-xJOf",
                DEBIAN_TARBALL,
                "--occurrence=1",
                &format!("{TARBALL_TOP}/Makefile"),
            ]))?;
            (checked_version(&makefile, DEBIAN_TARBALL)?, Origin::Debian)
        }
    };

    let source = KernelSource {
        dir: cache.src(&version),
        pristine: cache.pristine(&version),
        applied: cache.applied(&version),
        version,
    };
    let origin_file = cache.root().join(format!("src-{}.origin", source.version));
    // Trees prepared before origins were recorded came from the tarball.
    let recorded = fs::read_to_string(&origin_file).unwrap_or_else(|_| Origin::Debian.describe());
    if source.dir.is_dir() && recorded.trim() == origin.describe() {
        if !source.pristine.is_dir() {
            bail!(
                "{} has no pristine copies ({}); remove {} and run again",
                source.dir.display(),
                source.pristine.display(),
                source.dir.display()
            );
        }
        // A file the series only started to edit after this tree was
        // prepared is still untouched in the tree: save its pristine copy.
        for rel in EDITED_FILES {
            let saved = source.pristine.join(rel);
            if !saved.is_file() {
                fsutil::copy(&source.dir.join(rel), &saved)?;
            }
        }
        return Ok(source);
    }

    populate(cache, &source, &origin)?;
    fsutil::write(&origin_file, origin.describe())?;
    Ok(source)
}

enum Origin {
    Debian,
    Tree(PathBuf),
}

impl Origin {
    fn describe(&self) -> String {
        match self {
            Origin::Debian => format!("debian:{DEBIAN_TARBALL}"),
            Origin::Tree(dir) => format!("tree:{}", dir.display()),
        }
    }
}

/// Extracts or copies the tree into a temporary directory, saves the
/// pristine copies, then renames both into place.
fn populate(cache: &Cache, source: &KernelSource, origin: &Origin) -> Result<()> {
    let tmp = cache.root().join(format!("src-{}.tmp", source.version));
    let pristine_tmp = cache
        .root()
        .join(format!("src-{}.pristine.tmp", source.version));
    fsutil::remove_dir_all_if_exists(&tmp)?;
    fsutil::remove_dir_all_if_exists(&pristine_tmp)?;
    fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let log = cache.logs().join("source.log");
    let run = |cmd: &mut Command, label| run_logged(cmd, &log, label, &|_| false);

    match origin {
        Origin::Debian => {
            let step = Step::start(format!("extracting {DEBIAN_TARBALL}"));
            let tar = format!("-xJf {DEBIAN_TARBALL} --strip-components=1 --no-same-owner -C");
            run(Command::new("tar").args(tar.split(' ')).arg(&tmp), "tar")?;
            step.done();
        }
        Origin::Tree(dir) => {
            prereqs::ensure_packages(cache, &["rsync"])?;
            let step = Step::start(format!("copying {}", dir.display()));
            let mut from = dir.as_os_str().to_owned();
            from.push("/");
            let rsync = ["-a", "--delete", "--exclude=.git"];
            run(
                Command::new("rsync").args(rsync).arg(from).arg(&tmp),
                "rsync",
            )?;
            // Builds use O=, which refuses a source tree that was configured
            // or built in; the copy is ours, so clean it.
            if tmp.join(".config").exists() || tmp.join("include/config").exists() {
                run(
                    Command::new("make").arg("-C").arg(&tmp).arg("mrproper"),
                    "make mrproper",
                )?;
            }
            step.done();
        }
    }

    for rel in EDITED_FILES {
        let from = tmp.join(rel);
        if !from.is_file() {
            bail!(
                "{} lacks {rel}: not a complete Linux 6.12 tree (see {})",
                origin.describe(),
                log.display()
            );
        }
        fsutil::copy(&from, &pristine_tmp.join(rel))?;
    }

    // Objects built from another tree of the same version would look newer
    // than the new tree's files (rsync and tar keep the original mtimes) and
    // silently survive, so build directories of this version start over.
    remove_build_dirs(cache, &source.version)?;

    // Pristine copies go in first: a tree without them is treated as broken.
    fsutil::remove_dir_all_if_exists(&source.dir)?;
    fsutil::remove_dir_all_if_exists(&source.pristine)?;
    fsutil::remove_dir_all_if_exists(&source.applied)?;
    rename(&pristine_tmp, &source.pristine)?;
    rename(&tmp, &source.dir)?;
    Ok(())
}

fn remove_build_dirs(cache: &Cache, version: &str) -> Result<()> {
    let suffix = format!("-{version}");
    for entry in fs::read_dir(cache.root())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("build-") && name.ends_with(&suffix) && entry.file_type()?.is_dir() {
            ui::progress(&format!("removing {name}/: it was built from another tree"));
            fsutil::remove_dir_all_if_exists(&entry.path())?;
        }
    }
    Ok(())
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to)
        .with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}

/// Insists on 6.12.y.
fn checked_version(makefile: &str, what: &str) -> Result<String> {
    let Some(version) = makefile_version(makefile) else {
        bail!("cannot read VERSION/PATCHLEVEL/SUBLEVEL from the Makefile of {what}");
    };
    if !version.starts_with("6.12.") {
        bail!("{what} is Linux {version}, but LITE targets 6.12.y");
    }
    Ok(version)
}

/// `VERSION.PATCHLEVEL.SUBLEVEL`.
fn makefile_version(makefile: &str) -> Option<String> {
    let field = |name: &str| -> Option<u32> {
        makefile.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == name).then(|| value.trim().parse().ok())?
        })
    };
    Some(format!(
        "{}.{}.{}",
        field("VERSION")?,
        field("PATCHLEVEL")?,
        field("SUBLEVEL")?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAKEFILE: &str = "# SPDX-License-Identifier: GPL-2.0\nVERSION = 6\n\
                            PATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\nNAME = Baby Opossum Posse\n";

    #[test]
    fn reads_the_version_and_rejects_other_versions_and_garbage() {
        assert_eq!(makefile_version(MAKEFILE).as_deref(), Some("6.12.117"));
        assert_eq!(checked_version(MAKEFILE, "t").unwrap(), "6.12.117");
        let old = MAKEFILE.replace("PATCHLEVEL = 12", "PATCHLEVEL = 1");
        let err = checked_version(&old, "tree").unwrap_err().to_string();
        assert!(err.contains("6.1.117") && err.contains("6.12.y"), "{err}");
        assert!(checked_version("all: foo\n", "tree").is_err());
    }
}
