//! Where things live: the repository and the build cache.
//!
//! Cache layout (root: `$LITE_CACHE_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/lite-rs`):
//!
//! | path | contents |
//! |---|---|
//! | `src-<ver>/` | kernel source with the series applied; never built in (builds use `O=`) |
//! | `src-<ver>.pristine/<relpath>` | pristine copies of the kernel files the series edits |
//! | `src-<ver>.applied/` | the `*.patch` files currently applied to `src-<ver>/` |
//! | `build-<flavour>-<ver>/` | `make O=` directory |
//! | `initramfs/` | guest root file system and its cpio image |
//! | `logs/` | build logs and serial consoles |

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// Its paths are those of the table above.
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// Finds (and creates) the cache directory from the environment.
    pub fn locate() -> Result<Self> {
        let root = cache_root(
            std::env::var_os("LITE_CACHE_DIR").map(PathBuf::from),
            std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )?;
        fs::create_dir_all(root.join("logs"))
            .with_context(|| format!("cannot create the cache directory {}", root.display()))?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn src(&self, version: &str) -> PathBuf {
        self.root.join(format!("src-{version}"))
    }

    pub fn pristine(&self, version: &str) -> PathBuf {
        self.root.join(format!("src-{version}.pristine"))
    }

    pub fn applied(&self, version: &str) -> PathBuf {
        self.root.join(format!("src-{version}.applied"))
    }

    pub fn build(&self, flavour: &str, version: &str) -> PathBuf {
        self.root.join(format!("build-{flavour}-{version}"))
    }

    pub fn initramfs(&self) -> PathBuf {
        self.root.join("initramfs")
    }

    /// The log directory (exists).
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// A per-command log subdirectory, created empty of old node logs.
    pub fn run_logs(&self, name: &str) -> Result<PathBuf> {
        let dir = self.logs().join(name);
        crate::fsutil::remove_dir_all_if_exists(&dir)?;
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(dir)
    }
}

/// `$LITE_CACHE_DIR`, else `$XDG_CACHE_HOME/lite-rs`, else `$HOME/.cache/lite-rs`.
fn cache_root(
    lite: Option<PathBuf>,
    xdg: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<PathBuf> {
    // Empty variables count as unset, as the XDG specification asks.
    let set = |v: Option<PathBuf>| v.filter(|p| !p.as_os_str().is_empty());
    if let Some(dir) = set(lite) {
        return Ok(dir);
    }
    if let Some(dir) = set(xdg) {
        return Ok(dir.join("lite-rs"));
    }
    match set(home) {
        Some(home) => Ok(home.join(".cache").join("lite-rs")),
        None => bail!("cannot place the build cache: set LITE_CACHE_DIR or HOME"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_root_precedence() {
        let p = |s: &str| Some(PathBuf::from(s));
        let root = |lite, xdg, home| cache_root(lite, xdg, home).unwrap();
        assert_eq!(root(p("/c"), p("/x"), p("/h")), Path::new("/c"));
        assert_eq!(root(p(""), p("/x"), p("/h")), Path::new("/x/lite-rs"));
        assert_eq!(root(None, p(""), p("/h")), Path::new("/h/.cache/lite-rs"));
        assert!(cache_root(None, None, None).is_err());
    }
}
