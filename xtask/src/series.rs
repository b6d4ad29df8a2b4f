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
//! | 1 | system call table, prototypes, `COND_SYSCALL`s, `include/uapi/linux/lite.h`; the entry points `kernel/lite_syscalls.c` with `include/linux/lite_syscalls.h` and the process-exit hook |
//! | 2 | `lite-api-c/rust-bindings/bindings_helper.h` appended to `rust/bindings/bindings_helper.h`; `rust/helpers/lite.c` |
//! | 3 to 24 | `rust-lite/**` and `lite-api-c/*` in `drivers/infiniband/ulp/lite/`, and `include/rdma/lite_api.h`, one part of the driver at a time ([`DRIVER_PARTS`]); the last adds the crate root and the Kconfig/Makefile hooks |
//! | 25, 26 | `tests-kunit/**` in `drivers/infiniband/ulp/lite/`, and the lines that build them: the internal logic's tests, then the wire formats' and the kernel API's ([`KUNIT_API_FILES`]) |
//! | 27 | `lite-api-c/selftests/**` in `tools/testing/selftests/lite/`, and its target |
//! | 28, 29 | `lite-api-c/Documentation/{userspace-api,driver-api}/**` in `Documentation/`, with their index entries |
//! | 30 | the `MAINTAINERS` entry |

use std::collections::{BTreeMap, BTreeSet};
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
pub const EDITED_FILES: [&str; 13] = [
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
    "tools/testing/selftests/Makefile",
    "MAINTAINERS",
];

pub const PATCH_DIR: &str = "linux-patches";
/// In the kernel tree.
const LITE_DIR: &str = "drivers/infiniband/ulp/lite";
const SELFTESTS_DIR: &str = "tools/testing/selftests/lite";

/// Fixed author and committer, so the patches do not depend on who generates them.
const AUTHOR_NAME: &str = "LITE developers";
const AUTHOR_EMAIL: &str = "lite@lite-rs.invalid";
const DATE: &str = "2026-01-01T00:00:00+0000";

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
    ui::fail_listing(&format!("{PATCH_DIR}/ is out of date"), &problems)
}

/// In a scratch repository.
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

/// The cover letter's subject (first line) and text.
const COVER_LETTER_SOURCE: &str = "lite-api-c/cover-letter.txt";
/// Whose verdicts the cover letter quotes.
const BENCH_SUMMARY: &str = "xtask/bench-report/summary.md";

/// `git format-patch`'s cover letter, its `{benchmark}` line replaced by
/// the committed benchmark run's verdicts.
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

/// Each wrapped at 72 columns.
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

struct PatchSpec {
    subject: String,
    body: String,
    changes: Vec<Change>,
}

impl PatchSpec {
    fn new(subject: &str, body: impl Into<String>, changes: Vec<Change>) -> Self {
        let (subject, body) = (subject.to_string(), body.into());
        PatchSpec {
            subject,
            body,
            changes,
        }
    }

    fn message(&self) -> String {
        format!(
            "{}\n\n{}\n\nSigned-off-by: {AUTHOR_NAME} <{AUTHOR_EMAIL}>\n",
            self.subject,
            self.body.trim_end()
        )
    }
}

enum Change {
    /// Insert lines into an existing kernel file: after the first line
    /// containing `anchor`, or at its end without one.
    Edit {
        file: &'static str,
        anchor: Option<&'static str>,
        text: String,
    },
    /// Copy a repository file into the tree, without the text `cut` names.
    Place {
        dest: String,
        from: PathBuf,
        cut: Option<Cut>,
    },
    /// Overwrite a file an earlier patch placed with the repository's whole file.
    Restore { dest: String, from: PathBuf },
}

fn append(file: &'static str, text: impl Into<String>) -> Change {
    let (anchor, text) = (None, text.into());
    Change::Edit { file, anchor, text }
}

fn insert(file: &'static str, anchor: &'static str, text: impl Into<String>) -> Change {
    let (anchor, text) = (Some(anchor), text.into());
    Change::Edit { file, anchor, text }
}

fn place(dest: impl Into<String>, from: PathBuf) -> Change {
    let (dest, cut) = (dest.into(), None);
    Change::Place { dest, from, cut }
}

/// Text left out of a file placed by an earlier patch than the one completing it.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// This exact text.
    Text(&'static str),
    /// The one line holding this text.
    LineWith(&'static str),
    /// The Kconfig entry of this symbol, with the blank line before it.
    KconfigEntry(&'static str),
    /// Everything from the blank line before the one line holding this text.
    Tail(&'static str),
}

impl Cut {
    /// `text` without what this cut names; an error if it is not there once.
    fn apply(self, text: &str, file: &str) -> Result<String> {
        let (start, end) = match self {
            Cut::Text(cut) => match text.match_indices(cut).collect::<Vec<_>>()[..] {
                [(start, _)] => (start, start + cut.len()),
                _ => bail!("{file} does not hold {cut:?} exactly once"),
            },
            Cut::LineWith(needle) => {
                let lines = line_spans(text);
                match lines
                    .iter()
                    .filter(|(s, e)| text[*s..*e].contains(needle))
                    .collect::<Vec<_>>()[..]
                {
                    [&span] => span,
                    _ => bail!("{file} does not have exactly one line with {needle:?}"),
                }
            }
            Cut::KconfigEntry(symbol) => {
                let header = format!("\nconfig {symbol}\n");
                let Some(at) = text.find(&header) else {
                    bail!("{file} has no entry for {symbol}");
                };
                let body = at + header.len();
                let end = [
                    "\nconfig ",
                    "\nmenuconfig ",
                    "\nendmenu",
                    "\nendif",
                    "\nif ",
                ]
                .iter()
                .filter_map(|next| text[body - 1..].find(next).map(|i| body - 1 + i))
                .min()
                .unwrap_or(text.len());
                // The blank line that separated it from the entry before.
                let start = if text[..at].ends_with('\n') {
                    at
                } else {
                    at + 1
                };
                (start, end.max(start))
            }
            Cut::Tail(needle) => {
                let Some(at) = text.find(needle) else {
                    bail!("{file} does not hold {needle:?}");
                };
                if text[at + needle.len()..].contains(needle) {
                    bail!("{file} holds {needle:?} more than once");
                }
                let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let start = if text[..line].ends_with("\n\n") {
                    line - 1
                } else {
                    line
                };
                (start, text.len())
            }
        };
        Ok(format!("{}{}", &text[..start], &text[end..]))
    }
}

/// Each with its newline.
fn line_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        spans.push((start, start + line.len()));
        start += line.len();
    }
    spans
}

impl Change {
    fn apply(&self, tree: &Path) -> Result<()> {
        match self {
            Change::Edit { file, anchor, text } => {
                let path = tree.join(file);
                let old = fsutil::read_to_string(&path)?;
                let new = match anchor {
                    Some(anchor) => edits::insert_after(&old, file, anchor, text)?,
                    None => edits::append(&old, text),
                };
                fsutil::write(&path, new)
            }
            Change::Place { dest, from, cut } => {
                let path = tree.join(dest);
                if path.exists() {
                    bail!(
                        "{dest} already exists in the tree (placing {} again?)",
                        from.display()
                    );
                }
                // Read and write rather than copy: permission bits of the
                // checkout must not leak into the patches.
                let bytes = fsutil::read(from)?;
                match cut {
                    None => fsutil::write(&path, bytes),
                    Some(cut) => {
                        let whole = String::from_utf8(bytes)
                            .with_context(|| format!("{} is not UTF-8", from.display()))?;
                        fsutil::write(&path, cut.apply(&whole, dest)?)
                    }
                }
            }
            Change::Restore { dest, from } => {
                let path = tree.join(dest);
                if !path.exists() {
                    bail!("{dest} is restored before any patch placed it");
                }
                fsutil::write(&path, fsutil::read_to_string(from)?)
            }
        }
    }
}

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

    // 1: system calls.
    let (first, last) = match (calls.first(), calls.last()) {
        (Some(f), Some(l)) => (f.number, l.number),
        _ => bail!("no LITE system calls found"),
    };
    let lines = |f: fn(&syscalls::Syscall) -> String| -> String {
        calls.iter().map(|c| f(c) + "\n").collect()
    };
    let mut changes = vec![
        append(
            "arch/x86/entry/syscalls/syscall_64.tbl",
            lines(syscalls::table_line),
        ),
        insert(
            "include/linux/syscalls.h",
            "asmlinkage long sys_mseal(",
            lines(syscalls::prototype),
        ),
        insert(
            "kernel/sys_ni.c",
            "COND_SYSCALL(mseal);",
            lines(syscalls::cond_syscall_line),
        ),
        place("include/uapi/linux/lite.h", uapi_path),
        // The entry points stay in the core kernel when LITE is a module.
        place("kernel/lite_syscalls.c", syscalls_c_path),
        place(
            "include/linux/lite_syscalls.h",
            api.join("include/linux/lite_syscalls.h"),
        ),
    ];
    let object = "obj-$(CONFIG_LITE_SYSCALLS) += lite_syscalls.o\n";
    changes.push(insert(
        "kernel/Makefile",
        "obj-$(CONFIG_MODULES) += module/",
        object,
    ));
    // Handles, mappings and operations belong to processes: release them
    // when the last thread of a process exits, while its memory still exists.
    let header = "#include <linux/lite_syscalls.h>\n";
    changes.push(insert(
        "kernel/exit.c",
        "#include <linux/uaccess.h>",
        header,
    ));
    let group_dead = "group_dead = atomic_dec_and_test(&tsk->signal->live);";
    let hook = "\tif (group_dead)\n\t\tlite_exit_process();\n";
    changes.push(insert("kernel/exit.c", group_dead, hook));
    patches.push(PatchSpec::new(
        "x86/syscalls: add the LITE system calls",
        format!(
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
    ));

    // 2: bindings and helpers; the bindings see the UAPI header of 1.
    let mut changes = Vec::new();
    let bindings = api.join("rust-bindings/bindings_helper.h");
    if bindings.is_file() {
        // A blank line keeps LITE's block apart from the kernel's own list.
        let text = format!("\n{}", fsutil::read_to_string(&bindings)?);
        changes.push(append("rust/bindings/bindings_helper.h", text));
    }
    let helpers = api.join("rust-helpers/lite.c");
    if helpers.is_file() {
        changes.push(place("rust/helpers/lite.c", helpers));
        let include = "#include \"lite.c\"\n";
        changes.push(insert(
            "rust/helpers/helpers.c",
            "#include \"kunit.c\"",
            include,
        ));
    }
    patches.push(PatchSpec::new(
        "rust: add bindings and helpers for RDMA verbs, kthreads and sockets",
        "LITE is written in Rust and drives RDMA devices through the kernel's\n\
               verbs API. Let bindgen see the verbs, kthread, delay and socket\n\
               headers, and add C helpers for the verbs and scheduler primitives that\n\
               are static inline functions or macros, which bindgen cannot bind.",
        changes,
    ));

    // 3 onwards: the driver, part by part.
    patches.extend(driver_parts(repo)?);

    patches.extend(kunit_tests(repo)?);
    patches.push(selftests(repo)?);
    for page in &API_PAGES {
        patches.push(documentation(repo, page)?);
    }
    patches.push(maintainers_entry(&patches));
    Ok(patches)
}

/// One patch of the driver: the files it adds, named by their path in the
/// repository or by a directory (ending in `/`) holding them.
struct DriverPart {
    subject: &'static str,
    body: &'static str,
    sources: &'static [&'static str],
}

/// Nothing builds the driver's files before its last part, which adds the
/// crate root, the Kconfig entry and the Makefile: a Rust crate builds from
/// its root as a whole, and LITE's root brings up every subsystem. Each part
/// uses only files of itself and of earlier parts (checked by a test).
const DRIVER_PARTS: &[DriverPart] = &[
    DriverPart {
        subject: "RDMA/lite: add wrappers for threads, waits, credentials and sockets",
        body: "LITE runs kernel threads that poll and serve peers, waits with\n\
               deadlines that end when a peer is gone, checks the caller's\n\
               credentials and talks to its cluster manager over TCP. Add safe\n\
               wrappers for the kernel services the 6.12 kernel crate lacks, the\n\
               C helpers that call modules LITE depends on (ib_core, crypto), and\n\
               the errno values LITE returns.\n\
               \n\
               Nothing builds these files until the patch that adds LITE's\n\
               Kconfig entry, at the end of the driver's patches.",
        sources: &[
            "rust-lite/errno.rs",
            "rust-lite/sys/",
            "lite-api-c/lite_helpers.c",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add safe wrappers for RDMA devices, PDs and CQs",
        body: "LITE owns its RDMA resources on behalf of every user, so their\n\
               lifetimes must not depend on callers. Wrap the IB client, devices,\n\
               protection domains and completion queues in types that release what\n\
               they hold when dropped, with every unsafe call justified here.",
        sources: &[
            "rust-lite/verbs/mod.rs",
            "rust-lite/verbs/client.rs",
            "rust-lite/verbs/device.rs",
            "rust-lite/verbs/pd.rs",
            "rust-lite/verbs/cq.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add safe wrappers for RC queue pairs and connections",
        body: "All users of a node share one reliable connection per peer. Wrap\n\
               queue pairs and their state transitions, and build on them a\n\
               connection that posts sends, RDMA and atomic work requests and\n\
               bounds every wait for their completion.",
        sources: &["rust-lite/verbs/qp.rs", "rust-lite/verbs/connection.rs"],
    },
    DriverPart {
        subject: "RDMA/lite: add memory registration and remote keys",
        body: "LITE hides memory registrations and keys from its users: it\n\
               registers memory with fast registration work requests and keeps\n\
               the keys peers gave it. Add the registration types, their key\n\
               tables and the pool of remote memory a node lends to others.",
        sources: &[
            "rust-lite/verbs/memory_region.rs",
            "rust-lite/verbs/region_keys.rs",
            "rust-lite/verbs/remote_keys.rs",
            "rust-lite/verbs/remote_pool.rs",
            "rust-lite/verbs/shared_memory.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add DMA buffers, staging memory and pinned user pages",
        body: "Data moves between user memory and remote memory without copies\n\
               where it can: pin and register the user's pages, and keep staged,\n\
               registered kernel memory for small transfers and kernel callers.",
        sources: &[
            "rust-lite/verbs/buffer.rs",
            "rust-lite/verbs/kernel_buffer.rs",
            "rust-lite/verbs/staging.rs",
            "rust-lite/verbs/user_pages.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add wire formats, node ids and shared utilities",
        body: "Every message between nodes and to the cluster manager has one\n\
               declared layout, encoded and decoded from that declaration. Add\n\
               the layout macro, the manager's protocol, the control message\n\
               frame, node ids, the limits and the small tables and worker pools\n\
               the subsystems share. They need no RDMA and are unit tested.",
        sources: &[
            "rust-lite/internal/util/",
            "rust-lite/internal/wire_layout.rs",
            "rust-lite/internal/cm_wire.rs",
            "rust-lite/internal/node_id.rs",
            "rust-lite/internal/core/limits.rs",
            "rust-lite/internal/core/wire.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add quotas and quality of service",
        body: "A shared service must keep one user from taking all of it. Add the\n\
               per-user quotas on memory, handles and RPC rings, and the\n\
               priorities and admission control that let high-priority work pass\n\
               low-priority work on a busy node.",
        sources: &["rust-lite/internal/quota/", "rust-lite/internal/qos/"],
    },
    DriverPart {
        subject: "RDMA/lite: add the core: peers, control messages and chunk memory",
        body: "Subsystems talk to peers through control messages over each peer's\n\
               connection, with replies matched to requests and bounded by the\n\
               peer's life. Add the peer table, the request tracking, the\n\
               subsystem interface and the store of memory lent to others.",
        sources: &["rust-lite/internal/core/"],
    },
    DriverPart {
        subject: "RDMA/lite: add key exchange and the peer probe",
        body: "Nodes learn each other's memory keys once and check that a peer\n\
               answers before they rely on it. Add the key exchange and the probe\n\
               that tells a slow peer from a dead one.",
        sources: &["rust-lite/internal/keys/", "rust-lite/internal/probe/"],
    },
    DriverPart {
        subject: "RDMA/lite: add LMRs: chunks, permissions and transfers",
        body: "An LMR is remote memory addressed by handle: chunks spread over\n\
               nodes, with permissions per handle. Add the LMR, its chunks and\n\
               the transfers that read and write them with RDMA.",
        sources: &[
            "rust-lite/internal/memory/chunk.rs",
            "rust-lite/internal/memory/handle.rs",
            "rust-lite/internal/memory/permission.rs",
            "rust-lite/internal/memory/lmr.rs",
            "rust-lite/internal/memory/transfer.rs",
            "rust-lite/internal/memory/wire.rs",
            "rust-lite/internal/memory/ops_wire.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add the RPC ring protocol and ports",
        body: "LITE's RPC writes requests with immediate data into a ring the\n\
               server registered for its client, and flow control keeps a writer\n\
               from overrunning a slow reader. Add the ring protocol, the client\n\
               side of a ring and the server's ports.",
        sources: &[
            "rust-lite/internal/rpc/ring_protocol.rs",
            "rust-lite/internal/rpc/client.rs",
            "rust-lite/internal/rpc/port.rs",
            "rust-lite/internal/rpc/payload.rs",
            "rust-lite/internal/rpc/wire.rs",
            "rust-lite/internal/rpc/outgoing.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add per-process state and asynchronous operations",
        body: "Handles, ports and operations belong to processes and are released\n\
               when a process exits. Add the per-process tables and operations\n\
               that complete in the background and are waited for by id.",
        sources: &[
            "rust-lite/internal/process.rs",
            "rust-lite/internal/async_io/",
            "rust-lite/internal/rpc/call_in_flight.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add remote memory allocation, access and migration",
        body: "Add the memory subsystem: allocating LMRs across nodes, reading\n\
               and writing them, registering user memory as an LMR, moving\n\
               chunks off a node that leaves, and the operations peers run on\n\
               memory they lend.",
        sources: &["rust-lite/internal/memory/"],
    },
    DriverPart {
        subject: "RDMA/lite: add RPC calls and serving",
        body: "Add the RPC subsystem: calls and replies, multicast, the server's\n\
               receive path, and fault injection of corrupt ring headers behind\n\
               CONFIG_LITE_FAULT_INJECTION for the tests.",
        sources: &["rust-lite/internal/rpc/"],
    },
    DriverPart {
        subject: "RDMA/lite: add kernel message handlers",
        body: "Kernel modules written for the original LITE receive messages in\n\
               handlers they register. Add the handlers' registry and the thread\n\
               that calls each kind's handler for the messages of its port.",
        sources: &["rust-lite/internal/kernel_messages/"],
    },
    DriverPart {
        subject: "RDMA/lite: add sharing of LMRs by name",
        body: "Processes on any node share an LMR by publishing it under a name\n\
               and mapping it with the permissions its owner grants. Add the\n\
               cluster-wide names and the moves of LMRs between owners.",
        sources: &["rust-lite/internal/sharing/"],
    },
    DriverPart {
        subject: "RDMA/lite: add remote atomics and barriers",
        body: "Add fetch-and-add and compare-and-swap on LMRs and the\n\
               cluster-wide barrier, whose rounds end when every live node has\n\
               arrived or a node is gone.",
        sources: &["rust-lite/internal/atomics/", "rust-lite/internal/barrier/"],
    },
    DriverPart {
        subject: "RDMA/lite: add distributed locks",
        body: "Add LITE's locks: a lock word on its home node taken with remote\n\
               compare-and-swap, queued lockers, and handing a dead holder's\n\
               lock to the next one as an error its caller sees.",
        sources: &["rust-lite/internal/locks/"],
    },
    DriverPart {
        subject: "RDMA/lite: add the cluster and its membership",
        body: "Nodes join a cluster through a manager that tells them of each\n\
               other, of deaths and of leaves, over an authenticated channel.\n\
               Add the cluster that owns every subsystem, the membership that\n\
               connects to peers and survives their death, and the cluster\n\
               secret read from the keyring.",
        sources: &[
            "rust-lite/internal/cluster.rs",
            "rust-lite/internal/membership/",
            "rust-lite/sys/secret.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add the node and its completion poller",
        body: "Add the node, which finds the RDMA device, joins and leaves the\n\
               cluster, and polls the shared receive completion queue.",
        sources: &[
            "rust-lite/internal/mod.rs",
            "rust-lite/internal/node.rs",
            "rust-lite/internal/poller.rs",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add the system call backends and debugfs files",
        body: "Add the backends of the system calls, registered with the entry\n\
               points in the core kernel, which check every argument and copy\n\
               user memory, and the debugfs files that show LITE's state.",
        sources: &[
            "rust-lite/api/",
            "lite-api-c/lite_syscall_ops.c",
            "lite-api-c/lite_debugfs.c",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add the kernel API",
        body: "Kernel modules use LITE through exported C functions with the\n\
               original LITE's names. Add them and <rdma/lite_api.h>.",
        sources: &[
            "rust-lite/api/kernel_api.rs",
            "rust-lite/api/rust_api.rs",
            "lite-api-c/lite_api.c",
            "lite-api-c/include/rdma/lite_api.h",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: add the kernel messaging functions",
        body: "Add the original LITE's kernel messaging family to the kernel API:\n\
               liteapi_send_message, liteapi_send_reply and liteapi_send_reply_opt\n\
               with their variants, and the registration of their handlers.",
        sources: &["rust-lite/api/kernel_messages.rs"],
    },
    DriverPart {
        subject: "RDMA/lite: add LITE-DSM, shared memory across nodes",
        body: "The LITE paper's kernel-level DSM: regions of memory named\n\
               cluster-wide that processes on every node map with lite_dsm_open()\n\
               and mmap(). Page faults keep one writer or many readers per page\n\
               through a directory on the region's node, fetching pages from their\n\
               homes with RDMA reads and invalidating copies with LITE messages.\n\
               LITE-DSM uses LITE's kernel API and nothing of its internals.",
        sources: &[
            "rust-lite/dsm/",
            "rust-lite/api/dsm_syscalls.rs",
            "rust-lite/sys/shared_mapping.rs",
            "lite-api-c/lite_dsm.c",
        ],
    },
    DriverPart {
        subject: "RDMA/lite: build LITE",
        body: "LITE (SOSP'17) gives kernel and user space shared, protected access to\n\
               remote memory: it owns RDMA connections, registrations and keys and\n\
               exposes remote memory regions by handle. Add the module, which\n\
               registers LITE as an IB client and its system calls, its Kconfig\n\
               entry and Makefile, and hook them into drivers/infiniband/ulp.",
        sources: &[
            "rust-lite/lite_main.rs",
            "lite-api-c/Kconfig",
            "lite-api-c/Makefile",
        ],
    },
];

/// What the driver's last part holds back for the KUnit patch: the text
/// that builds the tests, in the files that hold it.
const KUNIT_HOOKS: [(&str, Cut); 3] = [
    ("lite-api-c/Kconfig", Cut::KconfigEntry("LITE_KUNIT_TEST")),
    (
        "lite-api-c/Makefile",
        Cut::LineWith("CONFIG_LITE_KUNIT_TEST"),
    ),
    (
        "rust-lite/lite_main.rs",
        Cut::Text("\n#[cfg(CONFIG_LITE_KUNIT_TEST)]\nmod kunit_tests;\n"),
    ),
];

/// The KUnit files of the second KUnit patch (the wire formats, the kernel
/// API and a joined cluster), in `tests-kunit/`; the first has the others,
/// among them every user of the driver's test-only accessors, which would
/// otherwise be dead code in the first patch.
const KUNIT_API_FILES: [&str; 3] = [
    "kunit_tests/api.rs",
    "kunit_tests/cluster.rs",
    "kunit_tests/wire.rs",
];

/// What the first KUnit patch holds back of the files both need: the
/// second patch's modules and suites, at the end of each file.
const KUNIT_API_HOOKS: [(&str, Cut); 2] = [
    (
        "kunit_tests.rs",
        Cut::Tail("// The `lite_wire`, `lite_api`"),
    ),
    (
        "lite_kunit.c",
        Cut::Tail("/* The wire formats, the kernel API"),
    ),
];

/// The first with the lines that build them, which the driver's last part
/// held back.
fn kunit_tests(repo: &Path) -> Result<[PatchSpec; 2]> {
    let (mut internal, mut api) = (Vec::new(), Vec::new());
    for rel in source_files(repo, "tests-kunit")? {
        let name = rel.to_string_lossy();
        let dest = format!("{LITE_DIR}/{name}");
        let from = repo.join("tests-kunit").join(&rel);
        if KUNIT_API_FILES.contains(&name.as_ref()) {
            api.push(place(dest, from));
            continue;
        }
        let cut = held_back(&KUNIT_API_HOOKS, &name);
        if cut.is_some() {
            let (dest, from) = (dest.clone(), from.clone());
            api.push(Change::Restore { dest, from });
        }
        internal.push(Change::Place { dest, from, cut });
    }
    for (file, _) in KUNIT_HOOKS {
        internal.push(Change::Restore {
            dest: driver_dest(file),
            from: repo.join(file),
        });
    }
    Ok([
        PatchSpec::new(
            "RDMA/lite: add KUnit tests of the internal logic",
            "Add KUnit suites for LITE's internal logic: chunk layout, handles and\n\
                   tables, device and address choice, the RPC ring protocol, lock\n\
                   hand-over, membership verdicts, barrier rounds, QoS admission and\n\
                   quotas. They need no RDMA device, as boot-time KUnit runs before any\n\
                   rxe device can exist. Enable them with CONFIG_LITE_KUNIT_TEST; select\n\
                   them with kunit.filter_glob=lite*.",
            internal,
        ),
        PatchSpec::new(
            "RDMA/lite: add KUnit tests of the wire formats and the kernel API",
            "Test the wire formats (the control messages between nodes, the cluster\n\
                   manager's protocol and its authentication) and the kernel C API:\n\
                   before the node joins at boot, and in the lite_cluster suite, which the\n\
                   cluster test runs through debugfs once every node has joined.",
            api,
        ),
    ])
}

fn held_back(hooks: &[(&str, Cut)], file: &str) -> Option<Cut> {
    let (_, cut) = hooks.iter().find(|(held, _)| *held == file)?;
    Some(*cut)
}

fn driver_dest(source: &str) -> String {
    if let Some(header) = source.strip_prefix("lite-api-c/include/") {
        return format!("include/{header}");
    }
    let rel = source
        .strip_prefix("rust-lite/")
        .or_else(|| source.strip_prefix("lite-api-c/"))
        .unwrap_or(source);
    format!("{LITE_DIR}/{rel}")
}

/// `rust-lite/`, the files directly in `lite-api-c/` but the cover letter,
/// and the kernel API's header.
fn driver_sources(repo: &Path) -> Result<Vec<String>> {
    let mut sources: Vec<String> = source_files(repo, "rust-lite")?
        .iter()
        .map(|rel| format!("rust-lite/{}", rel.display()))
        .collect();
    for rel in source_files(repo, "lite-api-c")? {
        let path = format!("lite-api-c/{}", rel.display());
        if rel.components().count() == 1 && path != COVER_LETTER_SOURCE {
            sources.push(path);
        }
    }
    let header = "lite-api-c/include/rdma/lite_api.h";
    if repo.join(header).is_file() {
        sources.push(header.to_owned());
    }
    Ok(sources)
}

/// The part naming `source`, else the one naming its deepest directory.
fn driver_part_of(source: &str) -> Option<usize> {
    DRIVER_PARTS
        .iter()
        .enumerate()
        .flat_map(|(index, part)| part.sources.iter().map(move |&named| (index, named)))
        .filter(|&(_, named)| {
            named == source || (named.ends_with('/') && source.starts_with(named))
        })
        .max_by_key(|&(_, named)| named.len())
        .map(|(index, _)| index)
}

/// Every source must belong to one.
fn driver_parts(repo: &Path) -> Result<Vec<PatchSpec>> {
    let mut parts: Vec<Vec<String>> = vec![Vec::new(); DRIVER_PARTS.len()];
    for source in driver_sources(repo)? {
        let Some(index) = driver_part_of(&source) else {
            bail!("{source} belongs to no patch: name it in series.rs DRIVER_PARTS");
        };
        parts[index].push(source);
    }
    let last = DRIVER_PARTS.len() - 1;
    let mut patches = Vec::new();
    for (index, (part, sources)) in DRIVER_PARTS.iter().zip(parts).enumerate() {
        let mut changes = Vec::new();
        for source in sources {
            let from = repo.join(&source);
            let dest = driver_dest(&source);
            let cut = held_back(&KUNIT_HOOKS, &source);
            changes.push(Change::Place { dest, from, cut });
        }
        if index == last {
            let rtrs = "source \"drivers/infiniband/ulp/rtrs/Kconfig\"";
            let kconfig = format!("source \"{LITE_DIR}/Kconfig\"\n");
            changes.push(insert("drivers/infiniband/Kconfig", rtrs, kconfig));
            let object = "obj-$(CONFIG_LITE)\t\t\t+= lite/\n";
            changes.push(append("drivers/infiniband/ulp/Makefile", object));
        }
        patches.push(PatchSpec::new(part.subject, part.body, changes));
    }
    Ok(patches)
}

fn place_dir(repo: &Path, from: &str, to: &str) -> Result<Vec<Change>> {
    Ok(source_files(repo, from)?
        .iter()
        .map(|rel| place(format!("{to}/{}", rel.display()), repo.join(from).join(rel)))
        .collect())
}

fn selftests(repo: &Path) -> Result<PatchSpec> {
    let mut changes = place_dir(repo, "lite-api-c/selftests", SELFTESTS_DIR)?;
    let makefile = "tools/testing/selftests/Makefile";
    changes.push(insert(makefile, "TARGETS += lib\n", "TARGETS += lite\n"));
    Ok(PatchSpec::new(
        "selftests: lite: add tests of the system calls",
        "Check each LITE system call's contract from C, as the man pages state\n\
               it: the errors before a node joins, bad pointers, sizes, handles,\n\
               permissions and flags, and a call that succeeds with its result\n\
               checked. Run on every node of a cluster, with the cluster manager's\n\
               address in LITE_CM_ADDRESS; without one the cluster tests are\n\
               skipped.",
        changes,
    ))
}

/// One API's page: `lite-api-c/Documentation/DIR` placed in the kernel's
/// `Documentation/DIR` and listed in `index` after `anchor`.
struct ApiPage {
    dir: &'static str,
    index: &'static str,
    anchor: &'static str,
    subject: &'static str,
    body: &'static str,
}

const API_PAGES: [ApiPage; 2] = [
    ApiPage {
        dir: "userspace-api",
        index: "Documentation/userspace-api/index.rst",
        anchor: "   mseal",
        subject: "Documentation: add LITE's user-space API",
        body: "Describe what LITE offers to user space and how to use it: its\n\
               concepts, every system call with its errors, the limits, the debugfs\n\
               files and the security model.",
    },
    ApiPage {
        dir: "driver-api",
        index: "Documentation/driver-api/index.rst",
        anchor: "   libata",
        subject: "Documentation: add LITE's kernel API",
        body: "Describe the functions LITE exports to kernel modules: their calling\n\
               context, how they differ from the system calls, and the functions of\n\
               the original LITE that have no counterpart.",
    },
];

fn documentation(repo: &Path, page: &ApiPage) -> Result<PatchSpec> {
    let mut changes = place_dir(
        repo,
        &format!("lite-api-c/Documentation/{}", page.dir),
        &format!("Documentation/{}", page.dir),
    )?;
    changes.push(insert(page.index, page.anchor, "   lite\n"));
    Ok(PatchSpec::new(page.subject, page.body, changes))
}

/// Every file the `patches` add, LITE's directories as a whole.
fn maintainers_entry(patches: &[PatchSpec]) -> PatchSpec {
    let whole_dir = |dest: &String| {
        let mut dirs = [LITE_DIR, SELFTESTS_DIR].into_iter();
        let dir = dirs.find(|dir| dest.starts_with(&format!("{dir}/")));
        dir.map_or_else(|| dest.clone(), |dir| format!("{dir}/"))
    };
    let placed = patches.iter().flat_map(|patch| &patch.changes);
    let files: BTreeSet<String> = (placed.filter_map(|change| match change {
        Change::Place { dest, .. } => Some(whole_dir(dest)),
        _ => None,
    }))
    .collect();
    let mut text = format!(
        "\nLITE (LOCAL INDIRECTION TIER FOR RDMA)\n\
         M:\t{AUTHOR_NAME} <{AUTHOR_EMAIL}>\n\
         L:\tlinux-rdma@vger.kernel.org\n\
         S:\tMaintained\n"
    );
    for file in files {
        text.push_str(&format!("F:\t{file}\n"));
    }
    PatchSpec::new(
        "MAINTAINERS: add an entry for LITE",
        "List the files of LITE, its system calls and its documentation, and\n\
               the list where its changes are reviewed.",
        // The entry before LITE's in alphabetical order ends here.
        vec![insert("MAINTAINERS", "F:\tlib/list-test.c", text)],
    )
}

/// Sorted, relative to `repo/<dir>`: those git tracks or would track
/// (ignored build products excluded); every file when `repo` is not a git
/// checkout.
fn source_files(repo: &Path, dir: &str) -> Result<Vec<PathBuf>> {
    let root = repo.join(dir);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let listed = process::output(
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args("ls-files -z --cached --others --exclude-standard --".split(' '))
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
    /// Its first commit, tagged `base`, holds the pristine files.
    fn base(pristine: &Path) -> Result<Self> {
        let repo = Self {
            dir: TempDir::new("lite-series")?,
        };
        process::output(repo.git().args(["init", "--quiet", "--template="]))?;
        for rel in EDITED_FILES {
            let bytes = fsutil::read(&pristine.join(rel))?;
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

    /// Isolated from user and system configuration.
    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        for var in "GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY".split(' ') {
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
        cmd.envs(identity).arg("-C").arg(self.path());
        let config = "core.autocrlf=false user.useConfigOnly=false core.hooksPath=/dev/null \
                      commit.gpgSign=false init.defaultBranch=main core.abbrev=12";
        for option in config.split(' ') {
            cmd.arg("-c").arg(option);
        }
        cmd
    }

    /// Everything; `false` when there was nothing to commit.
    fn commit(&self, message: &str) -> Result<bool> {
        process::output(self.git().args(["add", "-A"]))?;
        let staged = !process::succeeds(self.git().args(["diff", "--cached", "--quiet"]));
        if !staged {
            return Ok(false);
        }
        process::output(
            self.git()
                .args("commit --quiet --no-verify --cleanup=verbatim -m".split(' '))
                .arg(message),
        )?;
        Ok(true)
    }

    fn format_patch(&self, out: &Path) -> Result<()> {
        process::output(
            self.git()
                .args(
                    "format-patch --quiet --cover-letter --zero-commit --no-signature -o"
                        .split(' '),
                )
                .arg(out)
                .arg("base..HEAD"),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of a pristine kernel tree the generator needs, each as
    /// `path: text`.
    const PRISTINE: [&str; 13] = [
        "rust/bindings/bindings_helper.h: #include <linux/wait.h>\n",
        "rust/helpers/helpers.c: #include \"err.c\"\n#include \"kunit.c\"\n#include \"mutex.c\"\n",
        "arch/x86/entry/syscalls/syscall_64.tbl: 462\tcommon\tmseal\t\t\tsys_mseal\n",
        "include/linux/syscalls.h: asmlinkage long sys_mseal(unsigned long start);\n#endif\n",
        "kernel/sys_ni.c: COND_SYSCALL(mseal);\n\nCOND_SYSCALL(x);\n",
        "drivers/infiniband/Kconfig: source \"drivers/infiniband/ulp/rtrs/Kconfig\"\n",
        "drivers/infiniband/ulp/Makefile: obj-y += rtrs/\n",
        "kernel/Makefile: obj-$(CONFIG_MODULES) += module/\n",
        "kernel/exit.c: #include <linux/uaccess.h>\n\tgroup_dead = atomic_dec_and_test(&tsk->signal->live);\n",
        "Documentation/userspace-api/index.rst:    mseal\n",
        "Documentation/driver-api/index.rst:    libata\n",
        "tools/testing/selftests/Makefile: TARGETS += lib\nTARGETS += livepatch\n",
        "MAINTAINERS: F:\tlib/list-test.c\n\nLITEX PLATFORM\n",
    ];

    /// The repository's files the generator reads, as [`PRISTINE`].
    const SOURCES: [&str; 18] = [
        "lite-api-c/include/uapi/linux/lite.h: #define __NR_lite_join 548\n#define __NR_lite_free 549\n",
        "lite-api-c/kernel/lite_syscalls.c: SYSCALL_DEFINE1(lite_join, int, x)\n{}\nSYSCALL_DEFINE0(lite_free)\n{}\n",
        "lite-api-c/Kconfig: config LITE\n\ttristate \"LITE\"\n\nconfig LITE_KUNIT_TEST\n\tbool \"tests\"\n",
        "lite-api-c/Makefile: obj-$(CONFIG_LITE) += lite.o\nlite-$(CONFIG_LITE_KUNIT_TEST) += lite_kunit.o\n",
        "lite-api-c/include/linux/lite_syscalls.h: struct lite_syscall_ops;\n",
        "lite-api-c/rust-bindings/bindings_helper.h: #include <rdma/ib_verbs.h>\n",
        "lite-api-c/rust-helpers/lite.c: int rust_helper_x(void) { return 0; }\n",
        "rust-lite/lite_main.rs: //! LITE\nmod verbs;\n\n#[cfg(CONFIG_LITE_KUNIT_TEST)]\nmod kunit_tests;\n",
        "rust-lite/verbs/mod.rs: //! verbs\n",
        "lite-api-c/include/rdma/lite_api.h: int liteapi_x(void);\n",
        "tests-kunit/lite_kunit.c: // internal\n\n/* The wire formats, the kernel API */\n// api\n",
        "tests-kunit/kunit_tests.rs: mod locks;\n\n// The `lite_wire`, `lite_api` suites\nmod wire;\n",
        "tests-kunit/kunit_tests/wire.rs: // wire\n",
        "tests-kunit/kunit_tests/locks.rs: // locks\n",
        "lite-api-c/selftests/lite_test.c: // selftests\n",
        "lite-api-c/Documentation/userspace-api/lite.rst: LITE\n====\n",
        "lite-api-c/Documentation/driver-api/lite.rst: LITE kernel API\n====\n",
        "lite-api-c/cover-letter.txt: RDMA/lite: LITE\n\nWhat it is.\n\n{benchmark}\n",
    ];

    /// Writes the files of `tree` (see [`PRISTINE`]) under `dir`.
    fn write_tree(dir: &Path, tree: &[&str]) {
        for file in tree {
            let (rel, text) = file.split_once(": ").unwrap();
            fsutil::write(&dir.join(rel), text).unwrap();
        }
    }

    /// A fake repository and pristine tree good enough for the generator.
    fn fixture() -> (TempDir, PathBuf, PathBuf) {
        let tmp = TempDir::new("xtask-series-test").unwrap();
        let (repo, pristine) = (tmp.path().join("repo"), tmp.path().join("pristine"));
        write_tree(&pristine, &PRISTINE);
        write_tree(&repo, &SOURCES);
        (tmp, repo, pristine)
    }

    #[test]
    fn generates_a_deterministic_series_that_git_am_accepts() {
        let (tmp, repo, pristine) = fixture();
        let a = generate(&repo, &pristine, &tmp.path().join("a")).unwrap();
        let b = generate(&repo, &pristine, &tmp.path().join("b")).unwrap();
        assert_eq!(a, b, "two runs must give identical bytes");
        let names: Vec<_> = a.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), 12, "{names:?}");
        assert_eq!(names[0], COVER_LETTER);
        assert!(names[1].starts_with("0001-x86-syscalls-add-the-LITE"));
        assert!(names[2].starts_with("0002-rust-add-bindings"));
        let cover = String::from_utf8_lossy(&a.patches[0].bytes);
        assert!(cover.contains("Subject: [PATCH 00/11] RDMA/lite: LITE\n\nWhat it is.\n"));
        assert!(cover.contains("(no benchmark summary is committed)"));
        assert!(!cover.contains("***"), "{cover}");
        let all: String = a
            .patches
            .iter()
            .map(|p| String::from_utf8_lossy(&p.bytes).into_owned())
            .collect();
        let signed = all.matches("\nSigned-off-by: LITE developers <lite@lite-rs.invalid>\n");
        assert_eq!(signed.count(), 11, "every patch is signed off");
        // Each of `needles` is in `text`.
        let holds = |text: &str, needles: &[&str]| {
            let missing: Vec<_> = needles.iter().filter(|n| !text.contains(*n)).collect();
            assert!(missing.is_empty(), "missing {missing:?}");
        };
        holds(
            &all,
            &[
                "From: LITE developers <lite@lite-rs.invalid>",
                "b/Documentation/userspace-api/lite.rst",
                "b/Documentation/driver-api/lite.rst",
                "+   lite\n",
                "b/tools/testing/selftests/lite/lite_test.c",
                " TARGETS += lib\n+TARGETS += lite\n TARGETS += livepatch\n",
                "+F:\tdrivers/infiniband/ulp/lite/",
                "+548\t64\tlite_join\t\t\tsys_lite_join",
                "+asmlinkage long sys_lite_free(void);",
                "+COND_SYSCALL(lite_join);",
                "b/drivers/infiniband/ulp/lite/verbs/mod.rs",
                "\n+++ b/include/rdma/lite_api.h\n",
                "b/drivers/infiniband/ulp/lite/Kconfig",
                "+obj-$(CONFIG_LITE)\t\t\t+= lite/",
                "b/kernel/lite_syscalls.c",
                "+obj-$(CONFIG_LITE_SYSCALLS) += lite_syscalls.o",
            ],
        );
        // The selftests go to tools/testing, the entry points stay out of
        // the module, as do lite-api-c's subdirectories; the cover letter
        // is no file.
        for absent in [
            "ulp/lite/selftests",
            "ulp/lite/kernel/",
            "ulp/lite/rust-bindings",
            "b/drivers/infiniband/ulp/lite/cover-letter.txt",
        ] {
            assert!(!all.contains(absent), "{absent}");
        }
        git_am_check(&pristine, &tmp.path().join("a"), &a).unwrap();

        // The driver builds without its tests until the KUnit patch.
        let text = |i: usize| String::from_utf8_lossy(&a.patches[i].bytes).into_owned();
        let (build, kunit, api) = (text(5), text(6), text(7));
        assert!(build.contains("Subject: [PATCH 05/11] RDMA/lite: build LITE"));
        assert!(!build.contains("KUNIT"), "{build}");
        // The kernel API's tests, and the lines naming them, come one patch later.
        holds(
            &kunit,
            &[
                "+config LITE_KUNIT_TEST",
                "+lite-$(CONFIG_LITE_KUNIT_TEST) += lite_kunit.o",
                "+#[cfg(CONFIG_LITE_KUNIT_TEST)]\n+mod kunit_tests;",
                "+// internal\n",
                "+mod locks;\n",
            ],
        );
        holds(
            &api,
            &[
                " // internal\n+\n+/* The wire formats, the kernel API */\n",
                " mod locks;\n+\n+// The `lite_wire`",
                "b/drivers/infiniband/ulp/lite/kunit_tests/wire.rs",
            ],
        );
        assert!(!kunit.contains("api") && !kunit.contains("wire"), "{kunit}");
    }

    #[test]
    fn every_driver_source_has_a_part_and_uses_only_earlier_parts() {
        let repo = crate::paths::repo_root();
        let mut problems = Vec::new();
        let mut named = BTreeMap::new();
        for (index, part) in DRIVER_PARTS.iter().enumerate() {
            for source in part.sources {
                if let Some(other) = named.insert(source, index) {
                    problems.push(format!("{source} is named by parts {other} and {index}"));
                }
            }
        }
        for source in driver_sources(&repo).unwrap() {
            if driver_part_of(&source).is_none() {
                problems.push(format!("{source} belongs to no part"));
            }
        }
        let sources = fsutil::read_rust_sources(&repo.join("rust-lite")).unwrap();
        let graph = crate::architecture::dependency_graph(&sources, &[]);
        let part = |file: &str| driver_part_of(&format!("rust-lite/{file}"));
        for (file, uses) in &graph {
            for (used, line) in uses {
                if part(used) > part(file) {
                    problems.push(format!(
                        "rust-lite/{file}:{line} uses rust-lite/{used}, which a later patch adds"
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn cuts_leave_out_exactly_what_they_name() {
        let kconfig =
            "config A\n\tbool\n\nconfig T\n\tbool \"t\"\n\thelp\n\t  x\n\nconfig B\n\tbool\n";
        let without_t = Cut::KconfigEntry("T").apply(kconfig, "K").unwrap();
        assert_eq!(without_t, "config A\n\tbool\n\nconfig B\n\tbool\n");
        let makefile = Cut::LineWith("T)").apply("a\nx-$(T) += t.o\nb\n", "M");
        assert_eq!(makefile.unwrap(), "a\nb\n");
        assert!(Cut::Text("zz").apply("a\n", "F").is_err());
        assert!(Cut::LineWith("a").apply("a\na\n", "F").is_err());
        assert!(Cut::KconfigEntry("X").apply(kconfig, "K").is_err());
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
    fn a_missing_anchor_or_syscalls_source_is_an_error() {
        let (tmp, repo, pristine) = fixture();
        fsutil::write(&pristine.join("kernel/sys_ni.c"), "nothing here\n").unwrap();
        let err = generate(&repo, &pristine, &tmp.path().join("a")).unwrap_err();
        let err = format!("{err:#}");
        let named = err.contains("COND_SYSCALL(mseal);") && err.contains("kernel/sys_ni.c");
        assert!(named, "{err}");
        let (tmp, repo, pristine) = fixture();
        std::fs::remove_file(repo.join("lite-api-c/kernel/lite_syscalls.c")).unwrap();
        assert!(generate(&repo, &pristine, &tmp.path().join("a")).is_err());
    }
}
