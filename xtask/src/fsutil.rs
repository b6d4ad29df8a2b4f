//! Small file-system helpers: temporary directories, hashing, mtimes, tails.

use std::fs::{self, File, FileTimes};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Removed when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh, empty directory `<parent>/<prefix>-<pid>-<n>`.
    pub fn new_in(parent: &Path, prefix: &str) -> Result<Self> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("{prefix}-{}-{n}", std::process::id()));
        remove_dir_all_if_exists(&path)?;
        fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self { path })
    }

    /// Creates a fresh directory under the system temporary directory.
    pub fn new(prefix: &str) -> Result<Self> {
        Self::new_in(&std::env::temp_dir(), prefix)
    }

    /// Creates a fresh directory under the system temporary directory
    /// that only its owner can enter.
    pub fn private(prefix: &str) -> Result<Self> {
        let dir = Self::new(prefix)?;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} private", dir.path().display()))?;
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

pub fn remove_dir_all_if_exists(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(err).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// These name the file in the error.
pub fn read_to_string(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn create_parent(path: &Path) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new(""));
    fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))
}

/// Creating the parent directories.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    create_parent(path)?;
    fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))
}

/// Following symlinks.
pub fn copy(from: &Path, to: &Path) -> Result<()> {
    create_parent(to)?;
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// Decoded lossily, from a line boundary.
pub fn read_tail(path: &Path, max: u64) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // Drop the partial first line.
        if let Some(pos) = text.find('\n') {
            return Ok(text[pos + 1..].to_string());
        }
    }
    Ok(text)
}

pub fn sha256_file(path: &Path) -> Result<String> {
    Ok(sha256_hex(&read(path)?))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn mtime(path: &Path) -> Result<SystemTime> {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .with_context(|| format!("cannot stat {}", path.display()))
}

/// And the access time.
pub fn set_mtime(path: &Path, time: SystemTime) -> Result<()> {
    let file = File::options()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    file.set_times(FileTimes::new().set_modified(time).set_accessed(time))
        .with_context(|| format!("cannot set the mtime of {}", path.display()))
}

pub fn walk_files(dir: &Path) -> Result<Vec<PathBuf>> {
    walk(dir, false)
}

/// Sorted paths relative to `dir`.
pub fn walk(dir: &Path, every_entry: bool) -> Result<Vec<PathBuf>> {
    let (mut found, mut pending) = (Vec::new(), vec![PathBuf::new()]);
    while let Some(rel) = pending.pop() {
        let at = dir.join(&rel);
        for entry in fs::read_dir(&at).with_context(|| format!("cannot list {}", at.display()))? {
            let entry = entry?;
            let (rel, kind) = (rel.join(entry.file_name()), entry.file_type()?);
            if every_entry || kind.is_file() {
                found.push(rel.clone());
            }
            if kind.is_dir() {
                pending.push(rel);
            }
        }
    }
    found.sort();
    Ok(found)
}

pub fn read_rust_sources(dir: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    let rust = walk_files(dir)?
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"));
    rust.map(|file| {
        Ok((
            file.to_string_lossy().into_owned(),
            read_to_string(&dir.join(&file))?,
        ))
    })
    .collect()
}

/// A file that keeps growing (a VM's console log).
pub struct LogFollower {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl LogFollower {
    /// Follows `path` from its start.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// The complete lines added since the last call, without their line
    /// ends. A file not there yet, or unreadable for now, is read next time.
    pub fn new_lines(&mut self) -> Vec<String> {
        let Ok(mut file) = File::open(&self.path) else {
            return Vec::new();
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.read_to_end(&mut fresh) else {
            return Vec::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&fresh);
        let mut lines = Vec::new();
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            lines.push(line.trim_end_matches(['\n', '\r']).to_string());
        }
        lines
    }
}

#[cfg(test)]
pub fn append(path: &Path, text: &str) {
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|err| panic!("cannot open {}: {err}", path.display()));
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("append");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_start_at_a_line_boundary_and_hashes_and_mtimes_are_kept() {
        let dir = TempDir::new("xtask-fsutil-test").unwrap();
        let file = dir.path().join("log");
        write(&file, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(read_tail(&file, 14).unwrap(), "third\n");
        let whole = read_tail(&file, 1000).unwrap();
        assert_eq!(whole, "first line\nsecond line\nthird\n");
        let file = dir.path().join("f");
        write(&file, "abc").unwrap();
        let sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_file(&file).unwrap(), sha256);
        let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        set_mtime(&file, when).unwrap();
        assert_eq!(mtime(&file).unwrap(), when);
    }
}
