//! Generating `linux-patches/` from the LITE sources with `git format-patch`.
//!
//! The series is rebuilt from scratch in a temporary git repository that
//! holds only the pristine copies of the kernel files the series edits:
//! one "base" commit, then one commit per patch. Identity, dates and git
//! configuration are fixed, so the same sources always give byte-identical
//! patches and `cargo xtask patches --check` can detect drift.
//!
//! | patch | contents |
//! |---|---|
//! | 1 | `lite-api-c/rust-bindings/bindings_helper.h` appended to `rust/bindings/bindings_helper.h`; `rust/helpers/lite.c` |
//! | 2 | system call table, prototypes, `COND_SYSCALL`s, `include/uapi/linux/lite.h`; the entry points `kernel/lite_syscalls.c` with `include/linux/lite_syscalls.h` and the process-exit hook |
//! | 3 | `rust-lite/**` and `lite-api-c/*` in `drivers/infiniband/ulp/lite/`, `include/rdma/lite_api.h`, Kconfig/Makefile hooks |
//! | 4 | `tests-kunit/**` in `drivers/infiniband/ulp/lite/` |
//! | 5 | `lite-api-c/Documentation/**` in `Documentation/`, with their index entries |
//! | 6 | the `MAINTAINERS` entry |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::edits;
use crate::fsutil::{self, TempDir};
use crate::kernel_style;
use crate::patchset::{differences, Series, COVER_LETTER};
use crate::paths::{repo_root, Cache};
use crate::process;
use crate::source::{self, KernelSource};
use crate::syscalls;
use crate::ui::{self, Step};

/// Every existing kernel file the series edits; their pristine copies form the base commit.
pub const EDITED_FILES: [&str; 12] = [
    "rust/bindings/bindings_helper.h",
    "rust/helpers/helpers.c",
    "arch/x86/entry/syscalls/syscall_64.tbl",
    "include/linux/syscalls.h",
    "kernel/sys_ni.c",
    "drivers/infiniband/Kconfig",
    "drivers/infiniband/ulp/Makefile",
    "kernel/exit.c",
    "kernel/Makefile",
    "Documentation/userspace-api/index.rst",
    "Documentation/driver-api/index.rst",
    "MAINTAINERS",
];

/// Directory of the committed series, relative to the repository root.
pub const PATCH_DIR: &str = "linux-patches";

/// Where LITE lives in the kernel tree.
const LITE_DIR: &str = "drivers/infiniband/ulp/lite";

/// Fixed author and committer, so the patches do not depend on who generates them.
const AUTHOR_NAME: &str = "LITE developers";
const AUTHOR_EMAIL: &str = "lite@lite-rs.invalid";
const DATE: &str = "2026-01-01T00:00:00+0000";

/// `cargo xtask patches [--check]`.
pub fn run(check_only: bool, kernel_src: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let source = source::prepare(&cache, kernel_src)?;
    if check_only {
        check(&source)?;
        ui::say(&format!(
            "{PATCH_DIR}/ is up to date and applies with git am"
        ));
        return Ok(());
    }
    let step = Step::start(format!("regenerating {PATCH_DIR}/"));
    let tmp = TempDir::new("lite-patches")?;
    let series = generate(&repo_root(), &source.pristine, tmp.path())?;
    series.write_dir(&repo_root().join(PATCH_DIR))?;
    for patch in &series.patches {
        ui::progress(&format!("{PATCH_DIR}/{}", patch.name));
    }
    step.done();
    Ok(())
}

/// Fails if `linux-patches/` differs from what the sources generate, if
/// the committed series does not apply with `git am` to the pristine files,
/// or if the kernel's checkpatch and kernel-doc find fault with it.
pub fn check(source: &KernelSource) -> Result<()> {
    let root = repo_root();
    let tmp = TempDir::new("lite-patches-check")?;
    let generated = generate(&root, &source.pristine, tmp.path())?;
    let committed = Series::read_dir(&root.join(PATCH_DIR))?;
    let committed_name = format!("{PATCH_DIR}/");
    let mut problems = differences(
        &generated,
        &committed,
        "the generated series",
        &committed_name,
    );
    if !problems.is_empty() {
        problems.push(format!("run `cargo xtask patches` and commit {PATCH_DIR}/"));
    }
    if let Err(err) = git_am_check(&source.pristine, &root.join(PATCH_DIR), &committed) {
        problems.push(format!("{err:#}"));
    }
    let style = kernel_style::checkpatch(&source.dir, &root.join(PATCH_DIR), &committed)
        .and_then(|()| kernel_style::kernel_doc(&source.dir));
    if let Err(err) = style {
        problems.push(format!("{err:#}"));
    }
    if !problems.is_empty() {
        bail!("{PATCH_DIR}/ is out of date:\n  {}", problems.join("\n  "));
    }
    Ok(())
}

/// Builds the series in a scratch repository and writes it to `out`.
pub fn generate(repo: &Path, pristine: &Path, out: &Path) -> Result<Series> {
    let patches = describe_series(repo)?;
    let scratch = ScratchRepo::base(pristine)?;
    let mut committed = 0;
    for patch in &patches {
        for change in &patch.changes {
            change.apply(scratch.path())?;
        }
        if scratch.commit(&patch.message())? {
            committed += 1;
        } else {
            ui::progress(&format!(
                "warning: patch \"{}\" is empty: skipped",
                patch.subject
            ));
        }
    }
    if committed == 0 {
        bail!("the patch series is empty");
    }
    scratch.format_patch(out)?;
    write_cover_letter(repo, &out.join(COVER_LETTER))?;
    Series::read_dir(out)
}

/// Where the cover letter's subject (first line) and text are written.
const COVER_LETTER_SOURCE: &str = "lite-api-c/cover-letter.txt";

/// The committed benchmark summary whose verdicts the cover letter quotes.
const BENCH_SUMMARY: &str = "xtask/bench-report/summary.md";

/// Fills the cover letter `git format-patch` left at `path` with the
/// subject and text of [`COVER_LETTER_SOURCE`], its `{benchmark}` line
/// replaced by the verdicts of the committed benchmark run.
fn write_cover_letter(repo: &Path, path: &Path) -> Result<()> {
    let source = fsutil::read_to_string(&repo.join(COVER_LETTER_SOURCE))?;
    let Some((subject, text)) = source.split_once("\n\n") else {
        bail!("{COVER_LETTER_SOURCE}: a subject line, a blank line, then the text");
    };
    let summary = fsutil::read_to_string(&repo.join(BENCH_SUMMARY)).unwrap_or_default();
    let text = text.replace("{benchmark}", &verdicts(&summary));
    let letter = fsutil::read_to_string(path)?;
    if !letter.contains("*** SUBJECT HERE ***") || !letter.contains("*** BLURB HERE ***") {
        bail!("{} is not git format-patch's cover letter", path.display());
    }
    let letter = letter
        .replace("*** SUBJECT HERE ***", subject.trim())
        .replace("*** BLURB HERE ***", text.trim_end());
    fsutil::write(path, letter)
}

/// The `## Verdicts` list of a benchmark summary, each one wrapped at 72
/// columns, or a line saying there is none.
fn verdicts(summary: &str) -> String {
    let list: Vec<&str> = summary
        .lines()
        .skip_while(|line| line.trim() != "## Verdicts")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| line.strip_prefix("- "))
        .collect();
    if list.is_empty() {
        return "  (no benchmark summary is committed)".into();
    }
    let mut out = String::new();
    for verdict in list {
        let mut line = String::from("  -");
        for word in verdict.split_whitespace() {
            if line.len() + 1 + word.len() > 72 {
                out.push_str(&line);
                out.push('\n');
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Applies the committed series with `git am` on a fresh base repository.
fn git_am_check(pristine: &Path, dir: &Path, series: &Series) -> Result<()> {
    if series.patches.is_empty() {
        bail!("{} holds no patches", dir.display());
    }
    let scratch = ScratchRepo::base(pristine)?;
    let mut am = scratch.git();
    am.args(["am", "--quiet", "--no-3way"]);
    for patch in series.changes() {
        am.arg(dir.join(&patch.name));
    }
    process::output(&mut am).context("the committed series does not apply with git am")?;
    Ok(())
}

/// One patch of the series: its message and the changes it makes.
struct PatchSpec {
    subject: String,
    body: String,
    changes: Vec<Change>,
}

impl PatchSpec {
    fn message(&self) -> String {
        format!(
            "{}\n\n{}\n\nSigned-off-by: {AUTHOR_NAME} <{AUTHOR_EMAIL}>\n",
            self.subject,
            self.body.trim_end()
        )
    }
}

/// One change to the scratch tree.
enum Change {
    /// Append lines at the end of an existing kernel file.
    Append { file: &'static str, text: String },
    /// Insert lines after the first line containing `anchor`.
    InsertAfter {
        file: &'static str,
        anchor: &'static str,
        text: String,
    },
    /// Copy a repository file into the tree.
    Place { dest: String, from: PathBuf },
}

impl Change {
    fn apply(&self, tree: &Path) -> Result<()> {
        match self {
            Change::Append { file, text } => {
                let path = tree.join(file);
                let old = fsutil::read_to_string(&path)?;
                fsutil::write(&path, edits::append(&old, text))
            }
            Change::InsertAfter { file, anchor, text } => {
                let path = tree.join(file);
                let old = fsutil::read_to_string(&path)?;
                fsutil::write(&path, edits::insert_after(&old, file, anchor, text)?)
            }
            Change::Place { dest, from } => {
                let path = tree.join(dest);
                if path.exists() {
                    bail!(
                        "{dest} already exists in the tree (placing {} again?)",
                        from.display()
                    );
                }
                // Read and write rather than copy: permission bits of the
                // checkout must not leak into the patches.
                let bytes = std::fs::read(from)
                    .with_context(|| format!("cannot read {}", from.display()))?;
                fsutil::write(&path, bytes)
            }
        }
    }
}

/// Reads the LITE sources and describes the patches.
fn describe_series(repo: &Path) -> Result<Vec<PatchSpec>> {
    let api = repo.join("lite-api-c");
    let uapi_path = api.join("include/uapi/linux/lite.h");
    let syscalls_c_path = api.join("kernel/lite_syscalls.c");
    let calls = syscalls::load(
        &fsutil::read_to_string(&uapi_path)?,
        &fsutil::read_to_string(&syscalls_c_path)?,
    )
    .with_context(|| {
        format!(
            "reading {} and {}",
            uapi_path.display(),
            syscalls_c_path.display()
        )
    })?;

    let mut patches = Vec::new();

    // 1: bindings and helpers.
    let mut changes = Vec::new();
    let bindings = api.join("rust-bindings/bindings_helper.h");
    if bindings.is_file() {
        // A blank line keeps LITE's block apart from the kernel's own list.
        let text = format!("\n{}", fsutil::read_to_string(&bindings)?);
        changes.push(Change::Append {
            file: "rust/bindings/bindings_helper.h",
            text,
        });
    }
    let helpers = api.join("rust-helpers/lite.c");
    if helpers.is_file() {
        changes.push(Change::Place {
            dest: "rust/helpers/lite.c".into(),
            from: helpers,
        });
        changes.push(Change::InsertAfter {
            file: "rust/helpers/helpers.c",
            anchor: "#include \"kunit.c\"",
            text: "#include \"lite.c\"\n".into(),
        });
    }
    patches.push(PatchSpec {
        subject: "rust: add bindings and helpers for RDMA verbs, kthreads and sockets".into(),
        body: "LITE is written in Rust and drives RDMA devices through the kernel's\n\
               verbs API. Let bindgen see the verbs, kthread, delay and socket\n\
               headers, and add C helpers for the verbs and scheduler primitives that\n\
               are static inline functions or macros, which bindgen cannot bind."
            .into(),
        changes,
    });

    // 2: system calls.
    let (first, last) = match (calls.first(), calls.last()) {
        (Some(f), Some(l)) => (f.number, l.number),
        _ => bail!("no LITE system calls found"),
    };
    let lines = |f: fn(&syscalls::Syscall) -> String| -> String {
        calls.iter().map(|c| f(c) + "\n").collect()
    };
    let mut changes = vec![
        Change::Append {
            file: "arch/x86/entry/syscalls/syscall_64.tbl",
            text: lines(syscalls::table_line),
        },
        Change::InsertAfter {
            file: "include/linux/syscalls.h",
            anchor: "asmlinkage long sys_mseal(",
            text: lines(syscalls::prototype),
        },
        Change::InsertAfter {
            file: "kernel/sys_ni.c",
            anchor: "COND_SYSCALL(mseal);",
            text: lines(syscalls::cond_syscall_line),
        },
    ];
    changes.push(Change::Place {
        dest: "include/uapi/linux/lite.h".into(),
        from: uapi_path,
    });
    // The entry points stay in the core kernel when LITE is a module.
    changes.push(Change::Place {
        dest: "kernel/lite_syscalls.c".into(),
        from: syscalls_c_path,
    });
    changes.push(Change::Place {
        dest: "include/linux/lite_syscalls.h".into(),
        from: api.join("include/linux/lite_syscalls.h"),
    });
    changes.push(Change::InsertAfter {
        file: "kernel/Makefile",
        anchor: "obj-$(CONFIG_MODULES) += module/",
        text: "obj-$(CONFIG_LITE_SYSCALLS) += lite_syscalls.o\n".into(),
    });
    // Handles, mappings and operations belong to processes: release them
    // when the last thread of a process exits, while its memory still exists.
    changes.push(Change::InsertAfter {
        file: "kernel/exit.c",
        anchor: "#include <linux/uaccess.h>",
        text: "#include <linux/lite_syscalls.h>\n".into(),
    });
    changes.push(Change::InsertAfter {
        file: "kernel/exit.c",
        anchor: "group_dead = atomic_dec_and_test(&tsk->signal->live);",
        text: "\tif (group_dead)\n\t\tlite_exit_process();\n".into(),
    });
    patches.push(PatchSpec {
        subject: "x86/syscalls: add the LITE system calls".into(),
        body: format!(
            "Wire up LITE's user-space API as x86_64 system calls {first}-{last}, past\n\
             the legacy x32 range: joining a cluster, allocating, reading and\n\
             writing remote memory, and barriers. Add their prototypes, COND_SYSCALL\n\
             stubs for kernels built without LITE, and the UAPI header <linux/lite.h>.\n\
             \n\
             LITE can be a module, so the entry points are in the core kernel\n\
             (kernel/lite_syscalls.c) and forward to the operations LITE registers\n\
             when it loads, holding a reference on its module for the length of each\n\
             call; while none are registered the calls return -ENOSYS. The same goes\n\
             for the hook that releases what a process holds in LITE when it exits."
        ),
        changes,
    });

    // 3: the driver.
    let mut changes = Vec::new();
    for rel in source_files(repo, "rust-lite")? {
        changes.push(place_under(repo, "rust-lite", &rel));
    }
    for rel in source_files(repo, "lite-api-c")? {
        // Only files directly in lite-api-c/ (but the cover letter); its
        // subdirectories go elsewhere.
        if rel.components().count() == 1 && api.join(&rel) != repo.join(COVER_LETTER_SOURCE) {
            changes.push(place_under(repo, "lite-api-c", &rel));
        }
    }
    let api_header = api.join("include/rdma/lite_api.h");
    if api_header.is_file() {
        changes.push(Change::Place {
            dest: "include/rdma/lite_api.h".into(),
            from: api_header,
        });
    }
    changes.push(Change::InsertAfter {
        file: "drivers/infiniband/Kconfig",
        anchor: "source \"drivers/infiniband/ulp/rtrs/Kconfig\"",
        text: format!("source \"{LITE_DIR}/Kconfig\"\n"),
    });
    changes.push(Change::Append {
        file: "drivers/infiniband/ulp/Makefile",
        text: "obj-$(CONFIG_LITE)\t\t\t+= lite/\n".into(),
    });
    patches.push(PatchSpec {
        subject: "RDMA/lite: add LITE, the Local Indirection TiEr for RDMA, in Rust".into(),
        body: "LITE (SOSP'17) gives kernel and user space shared, protected access to\n\
               remote memory: it owns RDMA connections, registrations and keys and\n\
               exposes remote memory regions by handle. This is a rewrite in safe\n\
               Rust on the in-kernel verbs API, with C system call entry points."
            .into(),
        changes,
    });

    // 4: KUnit tests.
    let changes = source_files(repo, "tests-kunit")?
        .iter()
        .map(|rel| place_under(repo, "tests-kunit", rel))
        .collect();
    patches.push(PatchSpec {
        subject: "RDMA/lite: add KUnit tests".into(),
        body: "Add KUnit suites for LITE's internal logic. They need no RDMA device,\n\
               as boot-time KUnit runs before any rxe device can exist. Enable them\n\
               with CONFIG_LITE_KUNIT_TEST; select them with kunit.filter_glob=lite*."
            .into(),
        changes,
    });
    patches.push(documentation(repo)?);
    patches.push(maintainers_entry());
    Ok(patches)
}

/// The documentation of the user-space and kernel APIs, placed in the
/// kernel's `Documentation/` and listed in its indexes.
fn documentation(repo: &Path) -> Result<PatchSpec> {
    let docs = "lite-api-c/Documentation";
    let mut changes: Vec<Change> = source_files(repo, docs)?
        .iter()
        .map(|rel| Change::Place {
            dest: format!("Documentation/{}", rel.display()),
            from: repo.join(docs).join(rel),
        })
        .collect();
    changes.push(Change::InsertAfter {
        file: "Documentation/userspace-api/index.rst",
        anchor: "   mseal",
        text: "   lite\n".into(),
    });
    changes.push(Change::InsertAfter {
        file: "Documentation/driver-api/index.rst",
        anchor: "   libata",
        text: "   lite\n".into(),
    });
    Ok(PatchSpec {
        subject: "Documentation: add LITE's user-space and kernel APIs".into(),
        body: "Describe what LITE offers and how to use it: its concepts, every system\n\
               call with its errors, the limits, the debugfs files and the security\n\
               model for user space; the exported functions, their calling context and\n\
               how they differ from the system calls for kernel modules."
            .into(),
        changes,
    })
}

/// The `MAINTAINERS` entry for every file the series adds.
fn maintainers_entry() -> PatchSpec {
    let files = [
        "Documentation/driver-api/lite.rst",
        "Documentation/userspace-api/lite.rst",
        "drivers/infiniband/ulp/lite/",
        "include/linux/lite_syscalls.h",
        "include/rdma/lite_api.h",
        "include/uapi/linux/lite.h",
        "kernel/lite_syscalls.c",
        "rust/helpers/lite.c",
    ];
    let mut text = format!(
        "\nLITE (LOCAL INDIRECTION TIER FOR RDMA)\n\
         M:\t{AUTHOR_NAME} <{AUTHOR_EMAIL}>\n\
         L:\tlinux-rdma@vger.kernel.org\n\
         S:\tMaintained\n"
    );
    for file in files {
        text.push_str(&format!("F:\t{file}\n"));
    }
    PatchSpec {
        subject: "MAINTAINERS: add an entry for LITE".into(),
        body: "List the files of LITE, its system calls and its documentation, and\n\
               the list where its changes are reviewed."
            .into(),
        changes: vec![Change::InsertAfter {
            // The entry before LITE's in alphabetical order ends here.
            file: "MAINTAINERS",
            anchor: "F:\tlib/list-test.c",
            text,
        }],
    }
}

/// `repo/<dir>/<rel>` placed at `drivers/infiniband/ulp/lite/<rel>`.
fn place_under(repo: &Path, dir: &str, rel: &Path) -> Change {
    Change::Place {
        dest: format!("{LITE_DIR}/{}", rel.display()),
        from: repo.join(dir).join(rel),
    }
}

/// Files under `repo/<dir>`, relative to it and sorted: those git tracks or
/// would track (ignored build products excluded); every file when `repo` is
/// not a git checkout. A missing directory has no files.
fn source_files(repo: &Path, dir: &str) -> Result<Vec<PathBuf>> {
    let root = repo.join(dir);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let listed = process::output(
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
                "--",
            ])
            .arg(dir),
    );
    let Ok(listed) = listed else {
        return fsutil::walk_files(&root);
    };
    let mut files: Vec<PathBuf> = listed
        .split('\0')
        .filter_map(|p| Path::new(p).strip_prefix(dir).ok().map(Path::to_path_buf))
        .filter(|rel| !rel.as_os_str().is_empty() && root.join(rel).is_file())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// A throw-away git repository with a fixed identity and configuration.
struct ScratchRepo {
    dir: TempDir,
}

impl ScratchRepo {
    /// A repository whose first commit ("base", tagged `base`) holds the pristine files.
    fn base(pristine: &Path) -> Result<Self> {
        let repo = Self {
            dir: TempDir::new("lite-series")?,
        };
        process::output(repo.git().args(["init", "--quiet", "--template="]))?;
        for rel in EDITED_FILES {
            let from = pristine.join(rel);
            let bytes =
                std::fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
            fsutil::write(&repo.path().join(rel), bytes)?;
        }
        if !repo.commit("base\n")? {
            bail!("no pristine files in {}", pristine.display());
        }
        process::output(repo.git().args(["tag", "base"]))?;
        Ok(repo)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `git` in this repository, isolated from user and system configuration.
    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        for var in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
        ] {
            cmd.env_remove(var);
        }
        let identity: BTreeMap<&str, &str> = [
            ("GIT_AUTHOR_NAME", AUTHOR_NAME),
            ("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL),
            ("GIT_AUTHOR_DATE", DATE),
            ("GIT_COMMITTER_NAME", AUTHOR_NAME),
            ("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL),
            ("GIT_COMMITTER_DATE", DATE),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("TZ", "UTC"),
        ]
        .into();
        cmd.envs(identity).arg("-C").arg(self.path()).args([
            "-c",
            "core.autocrlf=false",
            "-c",
            "user.useConfigOnly=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.abbrev=12",
        ]);
        cmd
    }

    /// Stages everything and commits; returns `false` when there was nothing to commit.
    fn commit(&self, message: &str) -> Result<bool> {
        process::output(self.git().args(["add", "-A"]))?;
        let staged = !process::succeeds(self.git().args(["diff", "--cached", "--quiet"]));
        if !staged {
            return Ok(false);
        }
        process::output(
            self.git()
                .args([
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "--cleanup=verbatim",
                    "-m",
                ])
                .arg(message),
        )?;
        Ok(true)
    }

    /// `git format-patch` of every commit after `base` into `out`.
    fn format_patch(&self, out: &Path) -> Result<()> {
        process::output(
            self.git()
                .args([
                    "format-patch",
                    "--quiet",
                    "--cover-letter",
                    "--zero-commit",
                    "--no-signature",
                    "-o",
                ])
                .arg(out)
                .arg("base..HEAD"),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake repository and pristine tree good enough for the generator.
    fn fixture() -> (TempDir, PathBuf, PathBuf) {
        let tmp = TempDir::new("xtask-series-test").unwrap();
        let repo = tmp.path().join("repo");
        let pristine = tmp.path().join("pristine");
        let files: &[(&str, &str)] = &[
            (
                "rust/bindings/bindings_helper.h",
                "#include <linux/wait.h>\n",
            ),
            (
                "rust/helpers/helpers.c",
                "#include \"err.c\"\n#include \"kunit.c\"\n#include \"mutex.c\"\n",
            ),
            (
                "arch/x86/entry/syscalls/syscall_64.tbl",
                "462\tcommon\tmseal\t\t\tsys_mseal\n",
            ),
            (
                "include/linux/syscalls.h",
                "asmlinkage long sys_mseal(unsigned long start);\n#endif\n",
            ),
            (
                "kernel/sys_ni.c",
                "COND_SYSCALL(mseal);\n\nCOND_SYSCALL(x);\n",
            ),
            (
                "drivers/infiniband/Kconfig",
                "source \"drivers/infiniband/ulp/rtrs/Kconfig\"\n",
            ),
            ("drivers/infiniband/ulp/Makefile", "obj-y += rtrs/\n"),
            ("kernel/Makefile", "obj-$(CONFIG_MODULES) += module/\n"),
            (
                "kernel/exit.c",
                "#include <linux/uaccess.h>\n\tgroup_dead = atomic_dec_and_test(&tsk->signal->live);\n",
            ),
            ("Documentation/userspace-api/index.rst", "   mseal\n"),
            ("Documentation/driver-api/index.rst", "   libata\n"),
            ("MAINTAINERS", "F:\tlib/list-test.c\n\nLITEX PLATFORM\n"),
        ];
        for (rel, text) in files {
            fsutil::write(&pristine.join(rel), text).unwrap();
        }
        let sources: &[(&str, &str)] = &[
            (
                "lite-api-c/include/uapi/linux/lite.h",
                "#define __NR_lite_join 548\n#define __NR_lite_free 549\n",
            ),
            (
                "lite-api-c/kernel/lite_syscalls.c",
                "SYSCALL_DEFINE1(lite_join, int, x)\n{}\nSYSCALL_DEFINE0(lite_free)\n{}\n",
            ),
            ("lite-api-c/Kconfig", "config LITE\n\ttristate \"LITE\"\n"),
            (
                "lite-api-c/include/linux/lite_syscalls.h",
                "struct lite_syscall_ops;\n",
            ),
            (
                "lite-api-c/rust-bindings/bindings_helper.h",
                "#include <rdma/ib_verbs.h>\n",
            ),
            (
                "lite-api-c/rust-helpers/lite.c",
                "int rust_helper_x(void) { return 0; }\n",
            ),
            ("rust-lite/lite_main.rs", "//! LITE\nmod verbs;\n"),
            ("rust-lite/verbs/mod.rs", "//! verbs\n"),
            ("tests-kunit/lite_kunit.c", "// tests\n"),
            (
                "lite-api-c/Documentation/userspace-api/lite.rst",
                "LITE\n====\n",
            ),
            (
                "lite-api-c/cover-letter.txt",
                "RDMA/lite: LITE\n\nWhat it is.\n\n{benchmark}\n",
            ),
        ];
        for (rel, text) in sources {
            fsutil::write(&repo.join(rel), text).unwrap();
        }
        (tmp, repo, pristine)
    }

    #[test]
    fn generates_a_deterministic_series_that_git_am_accepts() {
        let (tmp, repo, pristine) = fixture();
        let a = generate(&repo, &pristine, &tmp.path().join("a")).unwrap();
        let b = generate(&repo, &pristine, &tmp.path().join("b")).unwrap();
        assert_eq!(a, b, "two runs must give identical bytes");
        let names: Vec<_> = a.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), 7, "{names:?}");
        assert_eq!(names[0], COVER_LETTER);
        assert!(names[1].starts_with("0001-rust-add-bindings"));
        let cover = String::from_utf8_lossy(&a.patches[0].bytes);
        assert!(cover.contains("Subject: [PATCH 0/6] RDMA/lite: LITE\n\nWhat it is.\n"));
        assert!(cover.contains("(no benchmark summary is committed)"));
        assert!(!cover.contains("***"), "{cover}");
        let all: String = a
            .patches
            .iter()
            .map(|p| String::from_utf8_lossy(&p.bytes).into_owned())
            .collect();
        assert!(all.contains("From: LITE developers <lite@lite-rs.invalid>"));
        assert_eq!(
            all.matches("\nSigned-off-by: LITE developers <lite@lite-rs.invalid>\n")
                .count(),
            6,
            "every patch is signed off"
        );
        assert!(all.contains("b/Documentation/userspace-api/lite.rst"));
        assert!(all.contains("+   lite\n"));
        assert!(all.contains("+F:\tdrivers/infiniband/ulp/lite/"));
        assert!(all.contains("+548\t64\tlite_join\t\t\tsys_lite_join"));
        assert!(all.contains("+asmlinkage long sys_lite_free(void);"));
        assert!(all.contains("+COND_SYSCALL(lite_join);"));
        assert!(all.contains("b/drivers/infiniband/ulp/lite/verbs/mod.rs"));
        assert!(all.contains("b/drivers/infiniband/ulp/lite/Kconfig"));
        assert!(all.contains("+obj-$(CONFIG_LITE)\t\t\t+= lite/"));
        assert!(all.contains("b/kernel/lite_syscalls.c"));
        assert!(all.contains("+obj-$(CONFIG_LITE_SYSCALLS) += lite_syscalls.o"));
        assert!(
            !all.contains("ulp/lite/kernel/"),
            "the entry points stay out of the module"
        );
        assert!(
            !all.contains("ulp/lite/rust-bindings"),
            "subdirectories of lite-api-c stay out"
        );
        assert!(!all.contains("b/drivers/infiniband/ulp/lite/cover-letter.txt"));
        git_am_check(&pristine, &tmp.path().join("a"), &a).unwrap();
    }

    #[test]
    fn the_cover_letter_quotes_the_benchmark_verdicts_wrapped() {
        let summary = "# x\n\n## Verdicts\n\n- target met for write at 64 B (median 0.93 at 64 B, \
                       rounds 0.92-0.97, and more words to wrap)\n- second\n\n## Next\n- not this\n";
        let text = verdicts(summary);
        assert_eq!(
            text,
            "  - target met for write at 64 B (median 0.93 at 64 B, rounds 0.92-0.97,\n    \
             and more words to wrap)\n  - second"
        );
        assert!(text.lines().all(|line| line.len() <= 72));
    }

    #[test]
    fn missing_anchor_is_an_error() {
        let (tmp, repo, pristine) = fixture();
        fsutil::write(&pristine.join("kernel/sys_ni.c"), "nothing here\n").unwrap();
        let err = format!(
            "{:#}",
            generate(&repo, &pristine, &tmp.path().join("a")).unwrap_err()
        );
        assert!(
            err.contains("COND_SYSCALL(mseal);") && err.contains("kernel/sys_ni.c"),
            "{err}"
        );
    }

    #[test]
    fn missing_syscalls_source_is_an_error() {
        let (tmp, repo, pristine) = fixture();
        std::fs::remove_file(repo.join("lite-api-c/kernel/lite_syscalls.c")).unwrap();
        assert!(generate(&repo, &pristine, &tmp.path().join("a")).is_err());
    }
}
