//! Programs written like the original LITE's link against the library in
//! every C standard mode: the original declared its functions `inline`,
//! which linked only as gnu89.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `<target-dir>/<profile>/lite-c`, where `build.rs` put the library: the
/// test binary lives in `<target-dir>/<profile>/deps`.
fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("<target-dir>/<profile>/deps/<test>")
        .join(lite_compat::ARTIFACT_DIR)
}

#[test]
fn an_original_style_program_links_in_every_c_standard() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = artifacts().join("liblite-compat.a");
    assert!(library.is_file(), "{} is missing", library.display());
    let out = std::env::temp_dir().join(format!("lite-original-style-{}", std::process::id()));
    for standard in ["gnu89", "c99", "gnu99", "c11", "gnu17"] {
        let status = Command::new("cc")
            .args(["-Wall", "-Werror", &format!("-std={standard}")])
            .arg("-I")
            .arg(crate_dir)
            .arg(crate_dir.join("tests/original_style.c"))
            .arg(&library)
            .arg("-lpthread")
            .arg("-o")
            .arg(&out)
            .status()
            .expect("cc runs (install gcc)");
        assert!(status.success(), "building with -std={standard} failed");
    }
    let _ = std::fs::remove_file(&out);
}
