//! The man pages of LITE's system calls (`userspace/man/`), linted with
//! groff's own warnings.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::fsutil;
use crate::paths::repo_root;
use crate::process;

/// `.so` links in the pages name pages relative to it.
const MAN_DIR: &str = "userspace/man";

/// `groff -man -ww -z` (all warnings, no output) on every page must be
/// silent; how many pages.
pub fn lint() -> Result<usize> {
    lint_dir(&repo_root().join(MAN_DIR))
}

fn lint_dir(dir: &Path) -> Result<usize> {
    let pages: Vec<_> = fsutil::walk_files(dir)?
        .into_iter()
        .filter(|page| page.components().count() == 2 && page.to_string_lossy().starts_with("man"))
        .collect();
    if pages.is_empty() {
        bail!("no man pages in {}", dir.display());
    }
    let mut problems = Vec::new();
    for page in &pages {
        let mut groff = Command::new("groff");
        groff.args(["-man", "-ww", "-z"]).arg(page).current_dir(dir);
        let said = process::complaint(&mut groff).context("Debian package groff-base")?;
        if let Some(said) = said {
            problems.push(format!("{}: {said}", page.display()));
        }
    }
    crate::ui::fail_listing("groff warns about the man pages", &problems)?;
    Ok(pages.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::TempDir;

    #[test]
    fn the_committed_pages_lint_clean() {
        let pages = lint().unwrap();
        assert!(pages >= 40, "only {pages} man pages");
    }

    #[test]
    fn a_page_groff_warns_about_is_refused() {
        let dir = TempDir::new("man-lint").unwrap();
        let page = ".TH LITE_X 2 2026-11-30 LITE\n.SH NAME\nlite_x \\- x\n.XX unknown\n";
        fsutil::write(&dir.path().join("man2/lite_x.2"), page).unwrap();
        let err = lint_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("man2/lite_x.2"), "{err}");
    }
}
