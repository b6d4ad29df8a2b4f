//! Builds LITE's C userspace with the `cc` crate: the compatibility library
//! (static and shared), its test program, the C examples and the
//! benchmark's native verbs baseline. They land in
//! `<target-dir>/<profile>/lite-c/` (see `src/lib.rs`), where the harness
//! packs them into the guests and users link against them.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a program is linked.
#[derive(Clone, Copy)]
enum Link {
    /// Against `lite-lib.so`, found next to the program or in `../lib`.
    Shared,
    /// Against `liblite-compat.a`.
    Static,
    /// Against nothing of LITE's (the header's inline wrappers suffice).
    HeaderOnly,
    /// Against libibverbs alone: the native baseline of the benchmark.
    Verbs,
}

/// Programs: name, source (relative to this crate), linking.
const PROGRAMS: &[(&str, &str, Link)] = &[
    ("lite-compat-test", "tests/lite_compat_test.c", Link::Shared),
    (
        "lite-compat-test-static",
        "tests/lite_compat_test.c",
        Link::Static,
    ),
    ("lite_hello", "../examples/lite_hello.c", Link::HeaderOnly),
    ("lite_share", "../examples/lite_share.c", Link::HeaderOnly),
    ("lite_rpc", "../examples/lite_rpc.c", Link::HeaderOnly),
    ("lite_lock", "../examples/lite_lock.c", Link::HeaderOnly),
    (
        "lite-verbs-bench",
        "../verbs-baseline/lite_verbs_bench.c",
        Link::Verbs,
    ),
];

/// Warnings are errors: the C code is ours and builds cleanly.
const FLAGS: &[&str] = &["-O2", "-g", "-Wall", "-Wextra", "-Werror"];

fn main() {
    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let header_dir = crate_dir.join("../include");
    let library_source = crate_dir.join("lite-lib.c");
    for watched in [
        "lite-lib.c",
        "lite-lib.h",
        "tests",
        "../include/lite.h",
        "../examples",
        "../verbs-baseline",
    ] {
        println!("cargo:rerun-if-changed={watched}");
    }

    let mut library = cc::Build::new();
    library
        .file(&library_source)
        .include(&crate_dir)
        .include(&header_dir)
        .warnings_into_errors(true)
        .extra_warnings(true)
        .pic(true);
    library.compile("lite-compat");

    // The bare compiler: cc's own flags would follow the Rust target's
    // (`-static` with `crt-static`), but these programs link dynamically.
    let compiler = library.get_compiler();
    let compiler = compiler.path();
    let shared = out_dir.join("lite-lib.so");
    run(Command::new(compiler)
        .args(FLAGS)
        .args(["-shared", "-fPIC", "-Wl,-soname,lite-lib.so"])
        .arg("-I")
        .arg(&crate_dir)
        .arg("-I")
        .arg(&header_dir)
        .arg(&library_source)
        .arg("-o")
        .arg(&shared)
        .arg("-lpthread"));

    for &(name, source, link) in PROGRAMS {
        let mut command = Command::new(compiler);
        command
            .args(FLAGS)
            .arg("-I")
            .arg(&crate_dir)
            .arg("-I")
            .arg(&header_dir)
            .arg(crate_dir.join(source))
            .arg("-o")
            .arg(out_dir.join(name));
        match link {
            Link::Shared => {
                command
                    .arg(&shared)
                    .arg("-Wl,-rpath,$ORIGIN:$ORIGIN/../lib");
            }
            Link::Static => {
                command.arg(out_dir.join("liblite-compat.a"));
            }
            Link::HeaderOnly => {}
            Link::Verbs => {
                command.args(["-libverbs", "-lm"]);
            }
        }
        run(command.arg("-lpthread"));
    }

    let artifacts = artifact_dir(&out_dir);
    fs::create_dir_all(&artifacts).expect("creating the artifact directory");
    copy(&out_dir.join("liblite-compat.a"), &artifacts);
    copy(&shared, &artifacts);
    copy(&crate_dir.join("lite-lib.h"), &artifacts);
    for &(name, _, _) in PROGRAMS {
        copy(&out_dir.join(name), &artifacts);
    }
}

/// `<target-dir>/<profile>/lite-c`: `OUT_DIR` is
/// `<target-dir>/<profile>/build/<package>-<hash>/out`.
fn artifact_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR lies under <target-dir>/<profile>/build")
        .join("lite-c")
}

fn copy(file: &Path, dir: &Path) {
    let name = file.file_name().expect("a file name");
    let to = dir.join(name);
    // Replace rather than overwrite: a running program keeps its old copy.
    let _ = fs::remove_file(&to);
    fs::copy(file, &to)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", file.display(), to.display()));
}

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("running {command:?}: {e} (is a C compiler installed?)"));
    assert!(status.success(), "{command:?} failed with {status}");
}
