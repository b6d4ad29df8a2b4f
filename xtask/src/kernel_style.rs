//! The kernel's own checks on the series: `checkpatch.pl --strict` on every
//! patch and `kernel-doc` on the C files that document LITE's interfaces.
//! What checkpatch reports must be one of the false positives the cover
//! letter names, each for a reason that holds for this series.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::patchset::Series;
use crate::paths::repo_root;
use crate::process;

/// checkpatch's reports that are false positives for this series: the
/// type of the report and the file it may be about. The cover letter
/// (`lite-api-c/cover-letter.txt`) says why for each.
const FALSE_POSITIVES: [(&str, &str); 5] = [
    // The kernel API is implemented in Rust; lite_api.c exports it.
    ("EXPORT_SYMBOL", "drivers/infiniband/ulp/lite/lite_api.c"),
    // The system calls return ENOSYS when they are not available.
    ("ENOSYS", "kernel/lite_syscalls.c"),
    // The selftest checks that ia32 has no LITE system call numbers.
    ("ENOSYS", "tools/testing/selftests/lite/lite_test.c"),
    // The macro argument names a member of struct lite_syscall_ops.
    ("MACRO_ARG_PRECEDENCE", "kernel/lite_syscalls.c"),
    // Every patch adds files; the MAINTAINERS entry comes last.
    ("FILE_PATH_CHANGES", ""),
];

/// Their kernel-doc comments document LITE's interfaces.
const KERNEL_DOC_FILES: [&str; 3] = [
    "lite-api-c/include/rdma/lite_api.h",
    "lite-api-c/include/uapi/linux/lite.h",
    "lite-api-c/kernel/lite_syscalls.c",
];

/// Any report but the [`FALSE_POSITIVES`] fails.
pub fn checkpatch(kernel_src: &Path, dir: &Path, series: &Series) -> Result<()> {
    let script = kernel_src.join("scripts/checkpatch.pl");
    let mut problems = Vec::new();
    for patch in series.changes() {
        let out = Command::new("perl")
            .arg(&script)
            .args(["--strict", "--no-tree", "--terse", "--show-types"])
            .arg(dir.join(&patch.name))
            .stdin(Stdio::null())
            .output()
            .context("cannot run checkpatch.pl")?;
        let report = String::from_utf8_lossy(&out.stdout);
        let text = String::from_utf8_lossy(&patch.bytes);
        let kept = reports(&report, &text).map(|(_, _, message)| message);
        problems.extend(kept.map(|message| format!("{}:{message}", patch.name)));
    }
    crate::ui::fail_listing("checkpatch --strict reports", &problems)
}

/// With every warning; any output fails.
pub fn kernel_doc(kernel_src: &Path) -> Result<()> {
    let mut kernel_doc = Command::new("perl");
    kernel_doc
        .arg(kernel_src.join("scripts/kernel-doc"))
        .args(["-none", "-Wall"])
        .args(KERNEL_DOC_FILES.map(|file| repo_root().join(file)));
    if let Some(said) = process::complaint(&mut kernel_doc)? {
        bail!("kernel-doc warns:\n  {}", said.replace('\n', "\n  "));
    }
    Ok(())
}

/// Type, line of the patch and report of each but the false positives.
fn reports<'a>(output: &'a str, text: &'a str) -> impl Iterator<Item = (&'a str, usize, &'a str)> {
    let reported = output.lines().filter_map(|line| {
        // `PATCH:LINE: LEVEL:TYPE: message`
        let message = line.rsplit_once(".patch:")?.1;
        let mut fields = message.splitn(4, ':');
        let at = fields.next()?.trim().parse().ok()?;
        let level = fields.next()?.trim();
        let kind = fields.next()?.trim();
        ["ERROR", "WARNING", "CHECK"]
            .contains(&level)
            .then_some((kind, at, message))
    });
    reported.filter(move |&(kind, at, _)| !is_false_positive(kind, file_at(text, at)))
}

/// The last `+++ b/` header before line `at` (from 1), or `""`.
fn file_at(text: &str, at: usize) -> &str {
    text.lines()
        .take(at)
        .filter_map(|line| line.strip_prefix("+++ b/"))
        .last()
        .unwrap_or("")
}

fn is_false_positive(kind: &str, file: &str) -> bool {
    FALSE_POSITIVES
        .iter()
        .any(|&(k, f)| k == kind && (f.is_empty() || f == file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "Subject: x\n---\n+++ b/kernel/lite_syscalls.c\n+\tret = -ENOSYS;\n\
                         +++ b/drivers/x.c\n+\tret = -ENOSYS;\n";

    fn kept(report: &str) -> Vec<String> {
        let kept = reports(report, PATCH);
        kept.map(|(kind, at, _)| format!("{kind}@{at}")).collect()
    }

    /// A line's file is the last header before it; the message's is none.
    #[test]
    fn only_the_named_false_positives_in_their_files_pass() {
        let report = "/tmp/0002-x.patch:4: WARNING:ENOSYS: ENOSYS means ...\n\
                      /tmp/0002-x.patch:6: WARNING:ENOSYS: ENOSYS means ...\n\
                      /tmp/0002-x.patch:2: WARNING:ENOSYS: ENOSYS means ...\n\
                      /tmp/0002-x.patch:1: WARNING:FILE_PATH_CHANGES: added ...\n\
                      /tmp/0002-x.patch:6: ERROR:CODE_INDENT: code indent ...\n\
                      total: 1 errors, 3 warnings, 10 lines checked\n";
        assert_eq!(kept(report), ["ENOSYS@6", "ENOSYS@2", "CODE_INDENT@6"]);
    }
}
