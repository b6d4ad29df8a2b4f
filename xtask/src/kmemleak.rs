//! The kmemleak report a guest prints at the end of role `test`, and which
//! of its leaks involve LITE.
//!
//! The guest's `/init` scans for leaks once the node's LITE resources are
//! back to their baseline and prints `/sys/kernel/debug/kmemleak` between
//! [`BEGIN_MARKER`] and [`END_MARKER`]`<status>`. Linux 6.12 writes each
//! leak as:
//!
//! ```text
//! unreferenced object 0xffff888005a3c000 (size 4096):
//!   comm "lite-cluster-te", pid 213, jiffies 4294940170
//!   hex dump (first 32 bytes):
//!     00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................
//!   backtrace (crc 0):
//!     __kmalloc_cache_noprof+0x2f8/0x3b0
//!     _RNvMNtNtCsesOCXVHmCIi_4lite8internal6memoryNtB2_6Memory5alloc+0x1d2/0x8c0
//!     __x64_sys_lite_alloc_remote+0x99/0x120
//! ```
//!
//! A leak involves LITE when a frame of its backtrace is LITE's code or
//! when a LITE thread or test program allocated it ([`Leak::involves_lite`]);
//! those fail the node, others are only reported.

use crate::logscan::strip_timestamp;
use crate::tap::with_diagnostics;

pub const BEGIN_MARKER: &str = "LITE-KMEMLEAK-BEGIN";
/// `LITE-KMEMLEAK-END rc=N`, N 0 when both scans and the read succeeded.
pub const END_MARKER: &str = "LITE-KMEMLEAK-END rc=";
const LEAK_START: &str = "unreferenced object ";
/// Of one leak, in a problem or a warning.
const QUOTED_LINES: usize = 24;
/// Quoted in full; the others are counted.
const QUOTED_LEAKS: usize = 3;

/// The lines of its report, without indentation changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub lines: Vec<String>,
}

impl Leak {
    /// Address and size of the object.
    pub fn headline(&self) -> &str {
        self.lines.first().map_or("", |l| l.trim())
    }

    /// The task that allocated the object (`comm "NAME", …`).
    pub fn comm(&self) -> Option<&str> {
        self.lines.iter().find_map(|line| {
            let rest = line.trim_start().strip_prefix("comm \"")?;
            rest.split_once('"').map(|(comm, _)| comm)
        })
    }

    /// `name+0xOFF/0xSIZE [module]`, in order.
    pub fn frames(&self) -> Vec<&str> {
        let Some(start) = self
            .lines
            .iter()
            .position(|l| l.trim_start().starts_with("backtrace"))
        else {
            return Vec::new();
        };
        self.lines[start + 1..]
            .iter()
            .map(|line| line.trim())
            // Kernels before 6.7 print the address first: `[<ffff…>] name+0x…`.
            .map(|line| line.split_once("] ").map_or(line, |(_, frame)| frame))
            .filter(|frame| !frame.is_empty())
            .collect()
    }

    /// A frame is LITE's code, or the task that allocated it is one of
    /// LITE's threads (`lite_cm`, `lite_io`, …) or test programs
    /// (`lite-cluster-test`, …), whose allocations come from LITE's system
    /// calls even where inlining hid LITE's frames.
    pub fn involves_lite(&self) -> bool {
        let comm = self.comm();
        comm.is_some_and(|c| c.starts_with("lite_") || c.starts_with("lite-"))
            || self.frames().iter().any(|f| is_lite_frame(f))
    }
}

/// Whether a backtrace frame (`name+0xOFF/0xSIZE`, maybe followed by
/// `[module]`) is LITE's code:
///
/// * Rust, mangled (v0): the crate root of `lite` is `C<hash>_4lite`, as
///   in `_RNvMNtNtCsesOCXVHmCIi_4lite8internal…`, also for generic kernel
///   code instantiated for LITE's types;
/// * Rust, demangled: paths starting with `lite::`;
/// * C: LITE's own functions (`lite_*`, `liteapi_*`, `__lite_init`), its
///   system calls (`__x64_sys_lite_*`, `__do_sys_lite_*`) and its Rust
///   helpers (`rust_helper_lite_*`);
/// * anything in module `lite`, should LITE be built as one.
pub fn is_lite_frame(frame: &str) -> bool {
    let frame = frame.trim();
    if frame.ends_with("[lite]") {
        return true;
    }
    let symbol = frame.split(['+', ' ']).next().unwrap_or(frame);
    let demangled = |s: &str| s.starts_with("lite::") || s.contains("<lite::");
    symbol.contains("_4lite")
        || demangled(symbol)
        || ["lite_", "liteapi_", "__lite_", "rust_helper_lite_"]
            .iter()
            .any(|prefix| symbol.starts_with(prefix))
        || symbol.contains("sys_lite_")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// No [`BEGIN_MARKER`]: the scan never ran.
    Missing,
    /// [`BEGIN_MARKER`] without [`END_MARKER`]: the guest stopped during it.
    Unfinished,
    /// The scan or the read failed; the block's lines tell why.
    Failed { status: String, lines: Vec<String> },
    /// The leaks reported (none for a clean kernel).
    Done(Vec<Leak>),
}

/// The last kmemleak block of a console log.
pub fn scan(log: &str) -> Scan {
    let lines: Vec<&str> = log.lines().collect();
    let Some(begin) = lines
        .iter()
        .rposition(|l| strip_timestamp(l).trim() == BEGIN_MARKER)
    else {
        return Scan::Missing;
    };
    let mut report = Vec::new();
    for raw in &lines[begin + 1..] {
        let line = strip_timestamp(raw);
        if let Some((_, status)) = line.split_once(END_MARKER) {
            let status = status.trim();
            if status == "0" {
                return Scan::Done(leaks(&report));
            }
            return Scan::Failed {
                status: status.to_string(),
                lines: report.iter().map(|l| l.to_string()).collect(),
            };
        }
        report.push(raw.trim_end_matches('\r'));
    }
    Scan::Unfinished
}

/// Cuts kmemleak's report into leaks, one from each [`LEAK_START`] line.
/// Every other line of a leak is indented; a line that is not is a kernel
/// message printed to the console meanwhile, no part of any leak.
fn leaks(report: &[&str]) -> Vec<Leak> {
    let mut leaks: Vec<Leak> = Vec::new();
    for line in report {
        if line.starts_with(LEAK_START) {
            leaks.push(Leak {
                lines: vec![line.to_string()],
            });
        } else if line.starts_with([' ', '\t']) && !line.trim().is_empty() {
            if let Some(leak) = leaks.last_mut() {
                leak.lines.push(line.to_string());
            }
        }
    }
    leaks
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

/// A scan that did not run or failed, or any leak involving LITE, is a
/// problem; other leaks are warnings.
pub fn check(log: &str) -> Findings {
    let mut findings = Findings::default();
    match scan(log) {
        Scan::Missing => findings.problems.push(format!(
            "no kmemleak report ({BEGIN_MARKER} missing): the leak scan did not run"
        )),
        Scan::Unfinished => findings.problems.push(format!(
            "the kmemleak report has no {END_MARKER}: the guest stopped during the leak scan"
        )),
        Scan::Failed { status, lines } => {
            let head = format!("the kmemleak scan failed ({END_MARKER}{status})");
            let quoted = lines.iter().take(QUOTED_LINES);
            findings.problems.push(with_diagnostics(head, quoted));
        }
        Scan::Done(leaks) => {
            let (lite, other): (Vec<Leak>, Vec<Leak>) =
                leaks.into_iter().partition(Leak::involves_lite);
            if !lite.is_empty() {
                findings
                    .problems
                    .push(describe(&lite, "kmemleak reports leaks involving LITE"));
            }
            if !other.is_empty() {
                findings.warnings.push(describe(
                    &other,
                    "kmemleak reports leaks not involving LITE (not counted)",
                ));
            }
        }
    }
    findings
}

/// The first [`QUOTED_LEAKS`] in full, the headlines of the others.
fn describe(leaks: &[Leak], what: &str) -> String {
    let quoted = leaks
        .iter()
        .take(QUOTED_LEAKS)
        .flat_map(|leak| leak.lines.iter().take(QUOTED_LINES).map(String::as_str));
    let headlines = leaks.iter().skip(QUOTED_LEAKS).map(Leak::headline);
    with_diagnostics(format!("{what}: {}", leaks.len()), quoted.chain(headlines))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leak as 6.12 prints it: allocated by `comm`, with a hex dump
    /// (which is no frame) and the backtrace `frames`.
    fn leak(comm: &str, frames: &[&str]) -> String {
        let frames: String = frames.iter().map(|f| format!("    {f}\n")).collect();
        format!(
            "unreferenced object 0xffff888005a3c000 (size 4096):\n  \
             comm \"{comm}\", pid 213, jiffies 4294940170\n  hex dump (first 32 bytes):\n    \
             6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b  kkkkkkkkkkkkkkkk\n  \
             backtrace (crc 5f2a11c3):\n{frames}"
        )
    }

    fn lite_rust_leak() -> String {
        leak("lite-cluster-te", &[
            "__kmalloc_cache_noprof+0x2f8/0x3b0",
            "_RNvXs_NtNtCs1EKtwoKEMO2_6kernel5alloc9allocatorNtB4_7KmallocNtB6_9Allocator7realloc+0x3c/0x90",
            "_RNvMNtNtCsesOCXVHmCIi_4lite8internal6memoryNtB2_6Memory5alloc+0x1d2/0x8c0",
            "lite_rs_alloc_remote+0x41/0x80",
            "__x64_sys_lite_alloc_remote+0x99/0x120",
            "do_syscall_64+0x8d/0x170",
            "entry_SYSCALL_64_after_hwframe+0x76/0x7e",
        ])
    }

    fn other_leak() -> String {
        let frames = [
            "__kmalloc_cache_noprof+0x2f8/0x3b0",
            "virtnet_probe+0x5a1/0x1030",
        ];
        leak("swapper/0", &frames)
    }

    fn block(report: &str, status: i32) -> String {
        format!(
            "ok 14 - resources within bound: pool_bytes 4194304 -> 4194304\n\
             {BEGIN_MARKER}\n{report}{END_MARKER}{status}\nLITE-GUEST-EXIT rc=0\n"
        )
    }

    #[test]
    fn leaks_in_lite_fail_and_others_only_warn() {
        // LITE's thread whose LITE frames were inlined away, and a leak of
        // the RDMA core that LITE's helper caused, from a kworker.
        let thread = leak(
            "lite_poll",
            &["kmem_cache_alloc_noprof+0x229/0x2f0", "kthread+0x1a1/0x1e0"],
        );
        let helper = [
            "ib_alloc_mr+0x60/0x1d0",
            "rust_helper_lite_get_dma_mr+0x17/0x40",
        ];
        let helper = leak("kworker/0:2", &helper);
        let report = format!("{}{}{thread}{helper}", other_leak(), lite_rust_leak());
        let Scan::Done(leaks) = scan(&block(&report, 0)) else {
            panic!("the scan is complete");
        };
        let involved: Vec<bool> = leaks.iter().map(Leak::involves_lite).collect();
        assert_eq!(involved, [false, true, true, true]);
        assert_eq!(leaks[1].comm(), Some("lite-cluster-te"));
        assert_eq!(leaks[1].frames().len(), 7);
        assert_eq!(leaks[1].frames()[0], "__kmalloc_cache_noprof+0x2f8/0x3b0");

        let findings = check(&block(&report, 0));
        assert_eq!(findings.problems.len(), 1, "{findings:?}");
        assert!(findings.problems[0].starts_with("kmemleak reports leaks involving LITE: 3"));
        assert!(findings.problems[0].contains("rust_helper_lite_get_dma_mr"));
        assert_eq!(findings.warnings.len(), 1);
        assert!(findings.warnings[0].contains("not involving LITE (not counted): 1"));
        assert!(findings.warnings[0].contains("virtnet_probe"));

        let only_other = check(&block(&other_leak(), 0));
        assert!(only_other.problems.is_empty(), "{only_other:?}");
        assert_eq!(only_other.warnings.len(), 1);
    }

    #[test]
    fn recognises_lites_symbols_only_in_either_frame_style() {
        for frame in [
            "_RNvMNtNtCsesOCXVHmCIi_4lite8internal6memoryNtB2_6Memory5alloc+0x1d2/0x8c0",
            // Kernel generics instantiated for LITE's types name crate lite last.
            "_RINvMs0_NtNtCs1EKtwoKEMO2_6kernel4sync7condvarNtB6_7CondVar13wait_internalNtNtNtB8_4lock5mutex12MutexBackendECsesOCXVHmCIi_4lite+0x5/0x10",
            "lite::internal::memory::Memory::alloc+0x1d2/0x8c0",
            "<lite::verbs::buffer::DmaBuffer as core::ops::drop::Drop>::drop+0x10/0x20",
            "lite_rs_alloc_remote+0x41/0x80",
            "liteapi_alloc_remote_mem+0x9c/0x100",
            "__lite_init+0x17/0x30",
            "rust_helper_lite_get_dma_mr+0x17/0x40",
            "__x64_sys_lite_alloc_remote+0x99/0x120",
            "__do_sys_lite_join+0x12/0x40",
            "some_function+0x10/0x20 [lite]",
            "[<ffffffff819fce5d>] lite_rs_alloc_remote+0x41/0x80",
        ] {
            let frame = frame.split_once("] ").map_or(frame, |(_, f)| f);
            assert!(is_lite_frame(frame), "{frame}");
        }
        for frame in [
            "__kmalloc_cache_noprof+0x2f8/0x3b0",
            "_RNvXs_NtNtCs1EKtwoKEMO2_6kernel5alloc9allocatorNtB4_7KmallocNtB6_9Allocator7realloc+0x3c/0x90",
            "udplite_sk_init+0x10/0x20",
            "is_literal+0x10/0x20",
            "ZSTD_decodeLiteralsBlock+0x10/0x200",
            "satellite_probe+0x10/0x20",
            "do_syscall_64+0x8d/0x170",
            "0xffffffffc0001234",
        ] {
            assert!(!is_lite_frame(frame), "{frame}");
        }
        let lines = |comm| vec![format!("  comm \"{comm}\", pid 7")];
        let by = |comm| Leak { lines: lines(comm) }.involves_lite();
        assert!(by("lite_io/1") && by("lite-fuzz"));
        assert!(!by("kworker/0:1") && !by("satellite"));
        // Kernels before 6.7 print frames after their address.
        let report = "unreferenced object 0xffff888003c4d2c0 (size 64):\n  \
                      comm \"kworker/1:1\", pid 50, jiffies 4294892297\n  backtrace:\n    \
                      [<ffffffff81234567>] kmalloc_trace+0x25/0x90\n    \
                      [<ffffffff819fce5d>] lite_rs_alloc_remote+0x41/0x80\n";
        let Scan::Done(leaks) = scan(&block(report, 0)) else {
            panic!("the scan is complete");
        };
        let frames = ["kmalloc_trace+0x25/0x90", "lite_rs_alloc_remote+0x41/0x80"];
        assert_eq!(leaks[0].frames(), frames);
        assert!(leaks[0].involves_lite());
    }

    #[test]
    fn a_scan_passes_only_when_clean_finished_and_last_skipping_kernel_messages() {
        // Printed by the kernel while the report was read, with or without
        // a timestamp, one of them after the last frame.
        let log = format!(
            "{BEGIN_MARKER}\n[  901.5] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)\n\
             {}lite_rs_alloc_remote+0x41/0x80\r\n[  901.6] lite: node 2 left\n{END_MARKER}0\n",
            other_leak()
        );
        let findings = check(&log);
        assert!(findings.problems.is_empty(), "{findings:?}");
        assert_eq!(findings.warnings.len(), 1);
        // A clean last scan passes; one that did not run or failed fails.
        assert_eq!(scan(&block("", 0)), Scan::Done(Vec::new()));
        assert_eq!(check(&block("", 0)), Findings::default());
        // The last block counts.
        let log = format!("{}{}", block(&lite_rust_leak(), 1), block("", 0));
        assert_eq!(scan(&log), Scan::Done(Vec::new()));
        let missing = check("LITE-GUEST-PROGRAM lite-resources\nok 1 - x\nLITE-GUEST-EXIT rc=0\n");
        assert_eq!(missing.problems.len(), 1);
        assert!(missing.problems[0].contains("did not run"));

        let cut = format!("{BEGIN_MARKER}\n{}", &lite_rust_leak()[..200]);
        assert_eq!(scan(&cut), Scan::Unfinished);
        assert!(check(&cut).problems[0].contains("stopped during the leak scan"));

        let refused =
            format!("{BEGIN_MARKER}\nsh: write error: Operation not permitted\n{END_MARKER}1\n");
        let lines = vec!["sh: write error: Operation not permitted".into()];
        let status = "1".into();
        assert_eq!(scan(&refused), Scan::Failed { status, lines });
        let failed = check(&refused);
        assert!(failed.problems[0].contains("scan failed (LITE-KMEMLEAK-END rc=1)"));
        assert!(failed.problems[0].contains("Operation not permitted"));
    }

    #[test]
    fn only_the_debug_kernel_has_kmemleak_and_the_guest_scans_when_asked() {
        let debug = include_str!("../../config/debug.config");
        let release = include_str!("../../config/release.config");
        for (config, line) in [
            (debug, "CONFIG_DEBUG_KMEMLEAK=y"),
            (debug, "# CONFIG_DEBUG_KMEMLEAK_AUTO_SCAN is not set"),
            (debug, "# CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF is not set"),
            (release, "# CONFIG_DEBUG_KMEMLEAK is not set"),
        ] {
            assert!(config.lines().any(|l| l == line), "{line}");
        }
        assert!(!include_str!("../../config/base.config").contains("KMEMLEAK"));
        // The guest prints the markers the harness reads.
        let init = include_str!("init.sh");
        assert!(init.contains(&format!("echo \"{BEGIN_MARKER}\"")), "begin");
        assert!(init.contains(&format!("echo \"{END_MARKER}$")), "end");
    }
}
