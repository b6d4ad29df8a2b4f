//! A patch series as files: reading, comparing and listing touched paths.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::fsutil;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchFile {
    /// File name, e.g. `0001-rust-add-bindings.patch`.
    pub name: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// The `*.patch` files of a directory, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series {
    /// The patches, in application order.
    pub patches: Vec<PatchFile>,
}

/// The file name `git format-patch --cover-letter` gives the cover letter,
/// which changes nothing.
pub const COVER_LETTER: &str = "0000-cover-letter.patch";

impl Series {
    /// The patches that change the tree: all but the cover letter.
    pub fn changes(&self) -> impl DoubleEndedIterator<Item = &PatchFile> {
        self.patches.iter().filter(|p| p.name != COVER_LETTER)
    }

    /// Reads the `*.patch` files of `dir`; a missing directory is an empty series.
    pub fn read_dir(dir: &Path) -> Result<Self> {
        let mut patches = Vec::new();
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(err) => return Err(err).with_context(|| format!("cannot list {}", dir.display())),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".patch") || !entry.file_type()?.is_file() {
                continue;
            }
            let bytes = fsutil::read(&entry.path())?;
            patches.push(PatchFile { name, bytes });
        }
        patches.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self { patches })
    }

    /// Replaces the `*.patch` files of `dir` with this series (other files stay).
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for old in Self::read_dir(dir)?.patches {
            let path = dir.join(&old.name);
            fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        }
        for patch in &self.patches {
            crate::fsutil::write(&dir.join(&patch.name), &patch.bytes)?;
        }
        Ok(())
    }

    /// Every path the series creates, modifies or deletes (relative to the tree root).
    pub fn touched_files(&self) -> BTreeSet<PathBuf> {
        self.patches
            .iter()
            .flat_map(|p| touched_files(&String::from_utf8_lossy(&p.bytes)))
            .collect()
    }
}

/// Both X and Y of `diff --git a/X b/Y`.
pub fn touched_files(patch: &str) -> BTreeSet<PathBuf> {
    let mut files = BTreeSet::new();
    for line in patch.lines() {
        let Some(rest) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        // Kernel paths have no spaces, so " b/" separates the two names.
        if let Some((a, b)) = rest.split_once(" b/") {
            files.insert(PathBuf::from(a));
            files.insert(PathBuf::from(b));
        }
    }
    files
}

/// One line per differing file (e.g. `differs: 0002-x86.patch`): missing
/// from `actual`, not in `expected`, then whose bytes differ.
pub fn differences(
    expected: &Series,
    actual: &Series,
    expected_name: &str,
    actual_name: &str,
) -> Vec<String> {
    let find = |series: &Series, name: &str| {
        let found = series.patches.iter().find(|p| p.name == name);
        found.map(|p| p.bytes.clone())
    };
    let mut missing = Vec::new();
    let mut changed = Vec::new();
    for patch in &expected.patches {
        match find(actual, &patch.name) {
            None => missing.push(format!("missing from {actual_name}: {}", patch.name)),
            Some(bytes) if bytes != patch.bytes => changed.push(format!("differs: {}", patch.name)),
            Some(_) => {}
        }
    }
    let extra = actual
        .patches
        .iter()
        .filter(|p| find(expected, &p.name).is_none());
    missing.extend(extra.map(|p| format!("not in {expected_name}: {}", p.name)));
    missing.extend(changed);
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(files: &[(&str, &str)]) -> Series {
        let patch = |&(name, bytes): &(&str, &str)| PatchFile {
            name: name.into(),
            bytes: bytes.into(),
        };
        Series {
            patches: files.iter().map(patch).collect(),
        }
    }

    #[test]
    fn reports_missing_extra_and_changed_patches() {
        let expected = series(&[("0001-a.patch", "x"), ("0002-b.patch", "y")]);
        let differ =
            |actual: &Series| differences(&expected, actual, "generated", "linux-patches/");
        assert!(differ(&expected.clone()).is_empty());
        let actual = series(&[("0001-a.patch", "x!"), ("0003-c.patch", "z")]);
        assert_eq!(
            differ(&actual),
            [
                "missing from linux-patches/: 0002-b.patch",
                "not in generated: 0003-c.patch",
                "differs: 0001-a.patch"
            ]
        );
    }

    #[test]
    fn lists_touched_files() {
        let patch = "Subject: x\n\ndiff --git a/kernel/sys_ni.c b/kernel/sys_ni.c\n\
                     index 1..2\n--- a/kernel/sys_ni.c\n+++ b/kernel/sys_ni.c\n\
                     diff --git a/old/name.c b/new/name.c\n";
        let files: Vec<_> = touched_files(patch).into_iter().collect();
        let expected = ["kernel/sys_ni.c", "new/name.c", "old/name.c"];
        assert_eq!(files, expected.map(PathBuf::from));
    }

    #[test]
    fn reads_and_writes_directories() {
        let dir = crate::fsutil::TempDir::new("xtask-patchset-test").unwrap();
        std::fs::write(dir.path().join("README"), "keep").unwrap();
        std::fs::write(dir.path().join("0009-old.patch"), "old").unwrap();
        let s = series(&[("0002-b.patch", "y"), ("0001-a.patch", "x")]);
        s.write_dir(dir.path()).unwrap();
        let back = Series::read_dir(dir.path()).unwrap();
        let names: Vec<_> = back.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["0001-a.patch", "0002-b.patch"]);
        assert!(dir.path().join("README").exists());
    }
}
