//! A fresh secret per cluster: the manager reads it from a file, the guests
//! from [`GUEST_SECRET_PATH`] in a cpio archive appended to their initrd
//! (after the kernel's modules, if any), so it never appears on a kernel
//! command line. Both files are readable by their owner only, in a private
//! directory removed with this value; a VM booted again gets the same
//! initrd, and so the same secret.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::fsutil::{self, TempDir};
use crate::newc::{self, REGULAR_FILE};

/// Relative to the guests' root.
pub const GUEST_SECRET_PATH: &str = "etc/lite/cluster.secret";
const SECRET_LEN: usize = 32;

/// The secret of one cluster: the manager's secret file and the guests'
/// initrd, removed when dropped.
pub struct ClusterSecretFiles {
    dir: TempDir,
}

impl ClusterSecretFiles {
    /// Makes a fresh secret, the manager's file and the initrd of the
    /// guests: `base_initrd`, the archive `modules` if given, then an
    /// archive holding the secret.
    pub fn create(base_initrd: &Path, modules: Option<&Path>) -> Result<Self> {
        let files = ClusterSecretFiles {
            dir: TempDir::private("lite-cluster")?,
        };
        let mut secret = [0u8; SECRET_LEN];
        File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut secret))
            .context("cannot read /dev/urandom for the cluster's secret")?;
        write_private(&files.secret_file(), &secret)?;

        let modules = modules.map(fsutil::read).transpose()?;
        let secret = secret_archive(&secret);
        let archives: Vec<&[u8]> = modules.iter().chain([&secret]).map(Vec::as_slice).collect();
        newc::extend(base_initrd, &files.initrd(), &archives)?;
        Ok(files)
    }

    /// The file the manager reads the secret from.
    pub fn secret_file(&self) -> PathBuf {
        self.dir.path().join("cluster.secret")
    }

    pub fn initrd(&self) -> PathBuf {
        self.dir.path().join("initramfs-with-secret.cpio.gz")
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// [`GUEST_SECRET_PATH`], readable by root only, and its directories.
fn secret_archive(secret: &[u8]) -> Vec<u8> {
    let file = [(GUEST_SECRET_PATH.to_string(), secret.to_vec())];
    newc::archive(&file, REGULAR_FILE | 0o400)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Where the archive goes after the initrd, for any length of it,
    /// is `newc::appended`'s, tested there.
    #[test]
    fn every_cluster_gets_its_own_private_secret_and_initrd_for_root_only() {
        let archive = secret_archive(b"0123456789abcdef0123456789abcdef");
        let text = String::from_utf8_lossy(&archive);
        // The path, the secret, the file's mode (a regular file, 0400) and
        // the trailer.
        for part in [
            "etc/lite/cluster.secret\0",
            "0123456789abcdef0123456789abcdef",
            "000081000000",
            "TRAILER!!!",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let scratch = TempDir::new("lite-secret-test").expect("scratch directory");
        let base = scratch.path().join("base.cpio.gz");
        fs::write(&base, b"gzip data of odd length").expect("write");
        let first = ClusterSecretFiles::create(&base, None).expect("first cluster");
        let second = ClusterSecretFiles::create(&base, None).expect("second cluster");
        let mode = |path: &Path| fs::metadata(path).expect("exists").permissions().mode() & 0o777;
        for files in [&first, &second] {
            assert_eq!(mode(&files.secret_file()), 0o600);
            assert_eq!(mode(&files.initrd()), 0o600);
            assert_eq!(mode(files.dir.path()), 0o700);
            let secret = fs::read(files.secret_file()).expect("secret");
            assert_eq!(secret.len(), SECRET_LEN);
            let initrd = fs::read(files.initrd()).expect("initrd");
            let base = b"gzip data of odd length";
            let suffix = newc::appended(base.len() as u64, &secret_archive(&secret));
            assert_eq!(initrd, [&base[..], &suffix].concat());
        }
        let secret = |files: &ClusterSecretFiles| fs::read(files.secret_file()).expect("secret");
        assert_ne!(secret(&first), secret(&second));
        let dir = first.dir.path().to_path_buf();
        drop(first);
        assert!(!dir.exists(), "the secret outlived its cluster");
    }
}
