//! Keeping the cached kernel tree in sync with `linux-patches/`.
//!
//! The tree records the series applied to it in `src-<ver>.applied/`. When
//! `linux-patches/` differs, the old series is reverse-applied and the new
//! one applied with `git apply`. Files whose contents end up unchanged get
//! their previous mtime back: `include/linux/syscalls.h` is included by half
//! the kernel and `rust/bindings/bindings_helper.h` rebuilds all Rust code,
//! so touching them needlessly costs many minutes of rebuild.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::fsutil;
use crate::patchset::Series;
use crate::process;
use crate::source::KernelSource;
use crate::ui::Step;

/// Content hash and mtime of a file before the series changed; `None` if absent.
pub type Snapshot = BTreeMap<PathBuf, Option<(String, SystemTime)>>;

/// The tree carries exactly the series in `series_dir`; whether anything changed.
pub fn sync(source: &KernelSource, series_dir: &Path) -> Result<bool> {
    let new = Series::read_dir(series_dir)?;
    sync_series(source, &new, &series_dir.display().to_string())
}

/// [`sync`] with `new`, called `name` in the progress line.
pub fn sync_series(source: &KernelSource, new: &Series, name: &str) -> Result<bool> {
    let old = Series::read_dir(&source.applied)?;
    if old.changes().eq(new.changes()) {
        return Ok(false);
    }
    let step = Step::start(format!(
        "applying {name} ({} patches) to {}",
        new.patches.len(),
        source.dir.display()
    ));
    let mut touched = old.touched_files();
    touched.extend(new.touched_files());
    let before = snapshot(&source.dir, touched.iter())?;

    let result = replace_series(source, &old, new);
    // Restore mtimes even after a failure, so a fixed series re-applied
    // later does not find a tree that looks freshly modified everywhere.
    let restored = restore_mtimes(&source.dir, &before)?;
    result?;
    if restored > 0 {
        step.done_with(&format!("{restored} unchanged files kept their mtime"));
    } else {
        step.done();
    }
    Ok(true)
}

/// Reverse-applies `old` (last patch first), then applies `new` in order,
/// keeping `src-<ver>.applied/` in step after every single patch.
fn replace_series(source: &KernelSource, old: &Series, new: &Series) -> Result<()> {
    fs::create_dir_all(&source.applied)
        .with_context(|| format!("cannot create {}", source.applied.display()))?;
    for patch in old.changes().rev() {
        let file = source.applied.join(&patch.name);
        git_apply(&source.dir, &file, true).with_context(|| {
            format!(
                "cannot reverse {} in {}: the tree was changed outside cargo xtask; \
                 remove {} {} {} and run again to start from a fresh tree",
                patch.name,
                source.dir.display(),
                source.dir.display(),
                source.pristine.display(),
                source.applied.display()
            )
        })?;
        fs::remove_file(&file).with_context(|| format!("cannot remove {}", file.display()))?;
    }
    for patch in new.changes() {
        let file = source.applied.join(&patch.name);
        // Apply from the copy in .applied/, so what is recorded is exactly
        // what was applied even if linux-patches/ changes meanwhile.
        fsutil::write(&file, &patch.bytes)?;
        if let Err(err) = git_apply(&source.dir, &file, false) {
            let _ = fs::remove_file(&file);
            return Err(err).context(format!(
                "patch {} does not apply to {}",
                patch.name,
                source.dir.display()
            ));
        }
    }
    Ok(())
}

/// `git apply [-R] -p1 PATCH` in `tree`, which is not a git repository.
fn git_apply(tree: &Path, patch: &Path, reverse: bool) -> Result<()> {
    let mut cmd = Command::new("git");
    cmd.current_dir(tree);
    // Stop git from finding an enclosing repository (the cache may live
    // inside one): then paths would be taken relative to that repository.
    if let Some(parent) = tree.parent() {
        cmd.env("GIT_CEILING_DIRECTORIES", parent);
    }
    cmd.arg("apply");
    if reverse {
        cmd.arg("-R");
    }
    cmd.args(["-p1", "--whitespace=nowarn"]).arg(patch);
    process::output(&mut cmd)?;
    Ok(())
}

pub fn snapshot<'a>(root: &Path, files: impl Iterator<Item = &'a PathBuf>) -> Result<Snapshot> {
    let mut snap = Snapshot::new();
    for rel in files {
        let path = root.join(rel);
        let state = if path.is_file() {
            Some((fsutil::sha256_file(&path)?, fsutil::mtime(&path)?))
        } else {
            None
        };
        snap.insert(rel.clone(), state);
    }
    Ok(snap)
}

/// Gives every file whose contents match its snapshot its old mtime back;
/// how many.
pub fn restore_mtimes(root: &Path, before: &Snapshot) -> Result<usize> {
    let mut restored = 0;
    for (rel, state) in before {
        let Some((hash, mtime)) = state else { continue };
        let path = root.join(rel);
        if !path.is_file() || fsutil::sha256_file(&path)? != *hash {
            continue;
        }
        if fsutil::mtime(&path)? != *mtime {
            fsutil::set_mtime(&path, *mtime)?;
            restored += 1;
        }
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patchset::PatchFile;
    use std::time::Duration;

    const PATCH_A: &str = "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n\
                           @@ -1,2 +1,3 @@\n one\n+two\n three\n\
                           diff --git a/g.txt b/g.txt\n--- a/g.txt\n+++ b/g.txt\n\
                           @@ -1 +1,2 @@\n g\n+g2\n";
    const PATCH_B: &str = "diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n\
                           @@ -1,2 +1,3 @@\n one\n+two\n three\n";

    fn source_in(dir: &Path) -> KernelSource {
        KernelSource {
            version: "6.12.0".into(),
            dir: dir.join("src"),
            pristine: dir.join("src.pristine"),
            applied: dir.join("src.applied"),
        }
    }

    #[test]
    fn switches_series_keeping_unchanged_mtimes_or_names_the_patch_that_fails() {
        let tmp = fsutil::TempDir::new("xtask-apply-test").unwrap();
        let source = source_in(tmp.path());
        fsutil::write(&source.dir.join("f.txt"), "one\nthree\n").unwrap();
        fsutil::write(&source.dir.join("g.txt"), "g\n").unwrap();
        let series_dir = tmp.path().join("patches");
        let write_series = |body: &str| {
            let patch = PatchFile {
                name: "0001-x.patch".into(),
                bytes: body.as_bytes().to_vec(),
            };
            Series {
                patches: vec![patch],
            }
            .write_dir(&series_dir)
            .unwrap()
        };
        let read = |name: &str| fs::read_to_string(source.dir.join(name)).unwrap();

        write_series(PATCH_A);
        assert!(sync(&source, &series_dir).unwrap());
        let changed = sync(&source, &series_dir).unwrap();
        assert!(!changed, "second sync must be a no-op");
        assert_eq!(read("g.txt"), "g\ng2\n");

        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        fsutil::set_mtime(&source.dir.join("f.txt"), old).unwrap();
        fsutil::set_mtime(&source.dir.join("g.txt"), old).unwrap();

        // Series B keeps f.txt's change and drops g.txt's.
        write_series(PATCH_B);
        assert!(sync(&source, &series_dir).unwrap());
        assert_eq!(read("f.txt"), "one\ntwo\nthree\n");
        assert_eq!(read("g.txt"), "g\n");
        assert_eq!(fsutil::mtime(&source.dir.join("f.txt")).unwrap(), old);
        assert_ne!(fsutil::mtime(&source.dir.join("g.txt")).unwrap(), old);
        let applied = Series::read_dir(&source.applied).unwrap();
        assert_eq!(applied, Series::read_dir(&series_dir).unwrap());
        // A patch that does not apply is named.
        let tmp = fsutil::TempDir::new("xtask-apply-test").unwrap();
        let source = source_in(tmp.path());
        fsutil::write(&source.dir.join("f.txt"), "unrelated\n").unwrap();
        let series_dir = tmp.path().join("patches");
        fsutil::write(&series_dir.join("0001-x.patch"), PATCH_B).unwrap();
        let err = format!("{:#}", sync(&source, &series_dir).unwrap_err());
        let named = err.contains("0001-x.patch") && err.contains("does not apply");
        assert!(named, "{err}");
        let applied = Series::read_dir(&source.applied).unwrap();
        assert!(applied.patches.is_empty());
    }
}
