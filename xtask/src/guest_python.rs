//! Python in the guests: Debian's interpreter, its standard library
//! without what no guest needs, and the `lite` package from
//! `userspace/python`, installed with pip as a user would.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::fsutil;
use crate::initramfs::{copy_executable, shared_libraries};
use crate::paths::{repo_root, Cache};
use crate::process::run_logged;

/// Debian's interpreter (not one a user may have first on `PATH`): the
/// guests get its libraries with it.
const INTERPRETER: &str = "/usr/bin/python3";

/// Standard library entries no guest program imports.
const SKIPPED: &[&str] = &[
    "config-3.11-x86_64-linux-gnu",
    "config-3.12-x86_64-linux-gnu",
    "dist-packages",
    "distutils",
    "ensurepip",
    "idlelib",
    "lib2to3",
    "pydoc_data",
    "site-packages",
    "test",
    "tkinter",
    "turtledemo",
    "venv",
];

/// On Debian's `sys.path`.
const SITE_DIR: &str = "usr/lib/python3/dist-packages";

/// The README's Python snippet in the guests (`README_EXAMPLE` in
/// `userspace/lite-tools/src/cluster_test/c_programs.rs`).
pub const README_EXAMPLE: &str = "/usr/share/lite/python/readme_example.py";

/// The package's cluster test in the guests (`lite-cluster-test` runs it:
/// `PYTHON_TEST` in `userspace/lite-tools/src/cluster_test/c_programs.rs`).
pub const CLUSTER_TEST: &str = "/usr/share/lite/python/cluster_test.py";

/// The interpreter, the standard library and the package; the shared
/// libraries they need are added to `libs`.
pub fn install(root: &Path, cache: &Cache, libs: &mut BTreeSet<PathBuf>) -> Result<()> {
    let interpreter = fs::canonicalize(INTERPRETER)
        .with_context(|| format!("{INTERPRETER} is missing: install python3"))?;
    let name = interpreter
        .file_name()
        .context("the interpreter has no file name")?
        .to_owned();
    copy_executable(&interpreter, &root.join("usr/bin").join(&name))?;
    symlink(&name, root.join("usr/bin/python3"))?;
    libs.extend(shared_libraries(&interpreter)?);

    let stdlib = Path::new("/usr/lib").join(&name);
    for rel in fsutil::walk_files(&stdlib)? {
        let first = rel.components().next();
        if matches!(first, Some(Component::Normal(top)) if SKIPPED.iter().any(|s| top == *s)) {
            continue;
        }
        let from = stdlib.join(&rel);
        fsutil::copy(&from, &root.join("usr/lib").join(&name).join(&rel))?;
        if rel.starts_with("lib-dynload") && rel.extension().is_some_and(|e| e == "so") {
            libs.extend(shared_libraries(&from)?);
        }
    }

    let site = root.join(SITE_DIR);
    let staging = pip_install(cache)?;
    for rel in fsutil::walk_files(&staging)? {
        fsutil::copy(&staging.join(&rel), &site.join(&rel))?;
    }
    fsutil::copy(
        &repo_root().join("userspace/python/tests/cluster_test.py"),
        &root.join(CLUSTER_TEST.trim_start_matches('/')),
    )?;
    let readme = fsutil::read_to_string(&repo_root().join("README.md"))?;
    fsutil::write(
        &root.join(README_EXAMPLE.trim_start_matches('/')),
        python_snippet(&readme).context("README.md has no ```python block")?,
    )
}

fn python_snippet(markdown: &str) -> Option<String> {
    let start = markdown.find("```python\n")? + "```python\n".len();
    let len = markdown[start..].find("```\n")?;
    Some(markdown[start..start + len].to_string())
}

/// Of a copy of `userspace/python`, so the build leaves nothing in the tree.
fn pip_install(cache: &Cache) -> Result<PathBuf> {
    let work = cache.initramfs().join("python-lite");
    fsutil::remove_dir_all_if_exists(&work)?;
    let source = work.join("source");
    let package = repo_root().join("userspace/python");
    for rel in fsutil::walk_files(&package)? {
        if rel.starts_with("build") || rel.to_string_lossy().contains("egg-info") {
            continue;
        }
        fsutil::copy(&package.join(&rel), &source.join(&rel))?;
    }
    let target = work.join("target");
    run_logged(
        Command::new(INTERPRETER)
            .args(["-m", "pip", "install", "--quiet", "--no-build-isolation"])
            .args(["--no-deps", "--no-index", "--target"])
            .arg(&target)
            .arg(&source),
        &cache.logs().join("python-package.log"),
        "pip install ./userspace/python",
        &|_| false,
    )
    .context("installing the Python package failed (packages python3-pip, python3-setuptools and python3-wheel provide pip)")?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_first_python_block() {
        let text =
            "# x\n```sh\nls\n```\n```python\nimport lite\nprint(1)\n```\n```python\nno\n```\n";
        let first = python_snippet(text);
        assert_eq!(first.as_deref(), Some("import lite\nprint(1)\n"));
        assert_eq!(python_snippet("```sh\nls\n```\n"), None);
        let readme = fsutil::read_to_string(&repo_root().join("README.md")).expect("README.md");
        assert!(python_snippet(&readme).is_some_and(|s| s.contains("import lite")));
    }

    /// The package's host tests (`userspace/python/tests/test_*.py`), and
    /// the cluster test compiles.
    #[test]
    fn the_python_package_passes_its_host_tests() {
        let package = repo_root().join("userspace/python");
        let unittest = Command::new(INTERPRETER)
            .args("-B -m unittest discover -s tests -p test_*.py".split(' '))
            .current_dir(&package)
            .env("PYTHONPATH", package.join("src"))
            .output()
            .unwrap_or_else(|e| panic!("{INTERPRETER} cannot run ({e}): install python3"));
        let stderr = String::from_utf8_lossy(&unittest.stderr);
        assert!(unittest.status.success(), "{stderr}");
        let parse = "import ast, sys; ast.parse(open(sys.argv[1]).read())";
        let compiled = Command::new(INTERPRETER)
            .args(["-B", "-c", parse])
            .arg(package.join("tests/cluster_test.py"))
            .status()
            .expect("python3 runs");
        assert!(compiled.success());
    }
}
