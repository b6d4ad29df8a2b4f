//! Small cpio archives in the "newc" format, written by hand.
//!
//! Linux unpacks an initrd that is several cpio archives one after the
//! other, compressed or not, so a few files can be added to a cached
//! initramfs by appending an archive of their own. Each entry is a 110-byte
//! ASCII header (`070701` and 13 eight-digit hexadecimal fields), the path
//! and its NUL padded to a multiple of 4 bytes, then the data padded the
//! same way; a `TRAILER!!!` entry ends the archive. Everything belongs to
//! root and has mtime 0, so an archive depends on its entries alone.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

const MAGIC: &[u8] = b"070701";
const HEADER_LEN: usize = 110;
const TRAILER: &str = "TRAILER!!!";
/// `S_IFDIR` and `S_IFREG`.
pub const DIRECTORY: u32 = 0o040000;
pub const REGULAR_FILE: u32 = 0o100000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Path relative to the root, without a leading `/`.
    pub path: &'a str,
    /// File type and permission bits, e.g. `REGULAR_FILE | 0o400`.
    pub mode: u32,
    /// Contents of a regular file; empty for a directory.
    pub data: &'a [u8],
}

/// `files` (path and contents), each with `file_mode`, after the
/// directories that hold them: the kernel creates no directory on its own.
pub fn archive(files: &[(String, Vec<u8>)], file_mode: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for (index, entry) in with_directories(files, file_mode).iter().enumerate() {
        let is_directory = entry.mode & 0o170000 == DIRECTORY;
        // Inode numbers only need to differ; 0 is left out.
        let inode = index + 1;
        let links = if is_directory { 2 } else { 1 };
        push_entry(&mut out, inode, entry.mode, links, entry.path, entry.data);
    }
    push_entry(&mut out, 0, 0, 1, TRAILER, &[]);
    out
}

/// Header, NUL-terminated path, data, each padded.
fn push_entry(out: &mut Vec<u8>, inode: usize, mode: u32, links: u32, path: &str, data: &[u8]) {
    let fields = [
        inode,
        mode as usize,
        0, // uid
        0, // gid
        links as usize,
        0, // mtime
        data.len(),
        0, // devmajor
        0, // devminor
        0, // rdevmajor
        0, // rdevminor
        path.len() + 1,
        0, // check, unused by newc
    ];
    let start = out.len();
    out.extend_from_slice(MAGIC);
    for field in fields {
        out.extend_from_slice(format!("{field:08X}").as_bytes());
    }
    debug_assert_eq!(out.len() - start, HEADER_LEN);
    out.extend_from_slice(path.as_bytes());
    out.push(0);
    pad_to_4(out);
    out.extend_from_slice(data);
    pad_to_4(out);
}

/// After the directories that hold them, parents first.
pub fn with_directories(files: &[(String, Vec<u8>)], file_mode: u32) -> Vec<Entry<'_>> {
    // A parent sorts before what it holds.
    let directories: BTreeSet<&str> = files
        .iter()
        .flat_map(|(path, _)| path.match_indices('/').map(move |(at, _)| &path[..at]))
        .collect();
    directories
        .into_iter()
        .map(|path| Entry {
            path,
            mode: DIRECTORY | 0o755,
            data: &[],
        })
        .chain(files.iter().map(|(path, data)| Entry {
            path,
            mode: file_mode,
            data,
        }))
        .collect()
}

/// Makes `initrd` the initrd `base` followed by `archives`, each as
/// [`appended`] lays it out; the copy is made readable by its owner only
/// before anything (a secret, a private program) is appended.
pub fn extend(base: &Path, initrd: &Path, archives: &[&[u8]]) -> Result<()> {
    fs::copy(base, initrd)
        .with_context(|| format!("cannot copy {} to {}", base.display(), initrd.display()))?;
    fs::set_permissions(initrd, fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", initrd.display()))?;
    archives
        .iter()
        .try_for_each(|archive| append(initrd, archive))
}

fn append(initrd: &Path, archive: &[u8]) -> Result<()> {
    let len = fs::metadata(initrd)
        .with_context(|| format!("cannot stat {}", initrd.display()))?
        .len();
    fs::OpenOptions::new()
        .append(true)
        .open(initrd)
        .and_then(|mut file| file.write_all(&appended(len, archive)))
        .with_context(|| format!("cannot append to {}", initrd.display()))
}

/// What follows an initrd of `base_len` bytes so that `archive` (made by
/// [`archive`]) is unpacked too: zeros up to a multiple of 4 bytes (the
/// kernel looks for an archive's magic only there, and skips zeros), then
/// the archive.
pub fn appended(base_len: u64, archive: &[u8]) -> Vec<u8> {
    let padding = base_len.next_multiple_of(4) - base_len;
    let mut suffix = vec![0u8; padding as usize];
    suffix.extend_from_slice(archive);
    suffix
}

pub fn pad_to_4(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(4), 0);
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    use super::*;

    /// One entry read back: its header fields, path and data.
    #[derive(Debug)]
    struct Parsed {
        fields: Vec<usize>,
        path: String,
        data: Vec<u8>,
    }

    /// Reads an archive back, checking magic and alignment as the kernel
    /// does.
    fn parse(mut bytes: &[u8]) -> Vec<Parsed> {
        let total = bytes.len();
        let mut entries = Vec::new();
        loop {
            assert_eq!((total - bytes.len()) % 4, 0, "entry not 4-byte aligned");
            assert_eq!(&bytes[..6], MAGIC);
            let fields: Vec<usize> = bytes[6..HEADER_LEN]
                .chunks(8)
                .map(|field| {
                    let text = std::str::from_utf8(field).expect("ASCII");
                    usize::from_str_radix(text, 16).expect("hexadecimal")
                })
                .collect();
            assert_eq!(fields.len(), 13);
            let name_len = fields[11];
            let name = &bytes[HEADER_LEN..HEADER_LEN + name_len];
            assert_eq!(name.last(), Some(&0), "path without its NUL");
            let path = String::from_utf8(name[..name_len - 1].to_vec()).expect("UTF-8 path");
            let data_at = (HEADER_LEN + name_len).next_multiple_of(4);
            assert!(bytes[HEADER_LEN + name_len..data_at]
                .iter()
                .all(|&b| b == 0));
            let size = fields[6];
            let data = bytes[data_at..data_at + size].to_vec();
            let next = (data_at + size).next_multiple_of(4);
            bytes = &bytes[next..];
            let done = path == TRAILER;
            entries.push(Parsed { fields, path, data });
            if done {
                assert!(bytes.is_empty(), "bytes after the trailer");
                return entries;
            }
        }
    }

    /// Three files in two trees.
    fn sample() -> Vec<u8> {
        let files = [
            "opt/lite-exec/bin/p",
            "opt/lite-exec/run.sh",
            "usr/lib64/ld.so",
        ];
        archive(
            &files.map(|path| (path.to_string(), path.into())),
            REGULAR_FILE | 0o400,
        )
    }

    /// The paths of [`sample`], directories first, parents before children.
    const SAMPLE_PATHS: &str = "opt opt/lite-exec opt/lite-exec/bin usr usr/lib64 \
                                opt/lite-exec/bin/p opt/lite-exec/run.sh usr/lib64/ld.so";

    #[test]
    fn entries_and_trailer_read_back_aligned() {
        let bytes = sample();
        assert_eq!(bytes.len() % 4, 0);
        let entries = parse(&bytes);
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        let expected: Vec<&str> = SAMPLE_PATHS.split(' ').chain([TRAILER]).collect();
        assert_eq!(paths, expected);
        for entry in &entries[..5] {
            // A directory: mode, owned by root, two links, nothing in it.
            assert_eq!(entry.fields[1..5], [0o040755, 0, 0, 2]);
            assert!(entry.data.is_empty());
        }
        for entry in &entries[5..8] {
            assert_eq!(entry.fields[1..5], [0o100400, 0, 0, 1]);
            assert_eq!(entry.data, entry.path.as_bytes());
        }
        let inodes: Vec<usize> = entries[..8].iter().map(|e| e.fields[0]).collect();
        assert_eq!(inodes, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(entries[8].fields[6], 0, "the trailer holds nothing");
        // Every length of path and data is padded.
        for len in 0..9 {
            let (path, data) = ("p".repeat(len + 1), vec![0xa5; len]);
            let entries = parse(&archive(&[(path.clone(), data.clone())], REGULAR_FILE));
            assert_eq!(entries[0].path, path);
            assert_eq!(entries[0].data, data);
        }
    }

    #[test]
    fn an_appended_archive_starts_aligned() {
        let archive = sample();
        for base_len in 0..8u64 {
            let suffix = appended(base_len, &archive);
            let archive_at = suffix.len() - archive.len();
            assert!(suffix[..archive_at].iter().all(|&b| b == 0));
            assert!(archive_at < 4);
            assert_eq!((base_len + archive_at as u64) % 4, 0, "base {base_len}");
            assert_eq!(&suffix[archive_at..], archive.as_slice());
        }
    }

    /// GNU cpio, where installed, lists the same entries.
    #[test]
    fn cpio_reads_the_archive() {
        let Ok(mut cpio) = Command::new("cpio")
            .args(["-i", "-t", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            return;
        };
        let stdin = cpio.stdin.take();
        stdin
            .expect("stdin")
            .write_all(&sample())
            .expect("feed cpio");
        let out = cpio.wait_with_output().expect("cpio runs");
        assert!(out.status.success());
        let listed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(listed, SAMPLE_PATHS.replace(' ', "\n") + "\n");
    }
}
