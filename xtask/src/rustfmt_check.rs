//! LITE's Rust formatted as the kernel's `make rustfmtcheck` wants it: the
//! crate as it lands in the tree (`rust-lite/` with `tests-kunit/` beside
//! it), checked from its root with the kernel's `.rustfmt.toml`.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::fsutil::{self, TempDir};
use crate::paths::repo_root;

/// Merged in the kernel tree.
const CRATE_DIRS: [&str; 2] = ["rust-lite", "tests-kunit"];

/// The crate root; rustfmt follows its `mod` declarations.
const CRATE_ROOT: &str = "lite_main.rs";

/// Fails, naming the files, if rustfmt with `kernel_src`'s configuration
/// would change any file of the crate.
pub fn check(kernel_src: &Path) -> Result<()> {
    check_crate(&repo_root(), &kernel_src.join(".rustfmt.toml"))
}

fn check_crate(repo: &Path, config: &Path) -> Result<()> {
    let crate_dir = TempDir::new("lite-rustfmt")?;
    for dir in CRATE_DIRS {
        let from = repo.join(dir);
        for rel in fsutil::walk_files(&from)? {
            if rel.extension().is_some_and(|e| e == "rs") {
                fsutil::copy(&from.join(&rel), &crate_dir.path().join(&rel))?;
            }
        }
    }
    let out = Command::new("rustfmt")
        .args(["--check", "--edition", "2021", "--config-path"])
        .arg(config)
        .arg(crate_dir.path().join(CRATE_ROOT))
        .stdin(Stdio::null())
        .output()
        .context("cannot run rustfmt")?;
    if out.status.success() {
        return Ok(());
    }
    let prefix = format!("Diff in {}/", crate_dir.path().display());
    let mut files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| rest.split(':').next())
        .map(str::to_string)
        .collect();
    files.dedup();
    if files.is_empty() {
        bail!(
            "rustfmt failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    bail!(
        "rustfmt with the kernel's configuration would change {} (run rustfmt --config-path \
         <kernel>/.rustfmt.toml --edition 2021 on them)",
        files.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings of Linux 6.12's `.rustfmt.toml`.
    const KERNEL_CONFIG: &str = "edition = \"2021\"\nnewline_style = \"Unix\"\n";

    fn config(dir: &TempDir) -> std::path::PathBuf {
        let path = dir.path().join(".rustfmt.toml");
        fsutil::write(&path, KERNEL_CONFIG).unwrap();
        path
    }

    #[test]
    fn the_crate_is_formatted() {
        let dir = TempDir::new("rustfmt-test").unwrap();
        check_crate(&repo_root(), &config(&dir)).unwrap();
    }

    #[test]
    fn a_file_rustfmt_would_change_is_named() {
        let dir = TempDir::new("rustfmt-test").unwrap();
        let repo = dir.path().join("repo");
        fsutil::write(&repo.join("rust-lite/lite_main.rs"), "mod a;\n").unwrap();
        fsutil::write(&repo.join("tests-kunit/a.rs"), "fn  f() {}\n").unwrap();
        let err = check_crate(&repo, &config(&dir)).unwrap_err().to_string();
        let named = err.contains("a.rs") && !err.contains("lite_main.rs");
        assert!(named, "{err}");
    }
}
