//! Generates the raw ABI (system call numbers, constants and structures)
//! from the kernel's uapi header, `include/uapi/linux/lite.h`, the one
//! source of truth for it.

use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let header = manifest.join("../../lite-api-c/include/uapi/linux/lite.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    // The header's only include is <linux/types.h>; its fixed-width types
    // are given here so the build does not depend on the host's kernel
    // headers.
    let shim = out.join("shim");
    std::fs::create_dir_all(shim.join("linux")).expect("OUT_DIR is writable");
    std::fs::write(
        shim.join("linux/types.h"),
        "typedef unsigned char __u8;\ntypedef unsigned short __u16;\n\
         typedef unsigned int __u32;\ntypedef unsigned long long __u64;\n\
         typedef signed char __s8;\ntypedef short __s16;\n\
         typedef int __s32;\ntypedef long long __s64;\n",
    )
    .expect("OUT_DIR is writable");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", shim.display()))
        .allowlist_var("__NR_lite_.*|LITE_.*")
        .allowlist_type("lite_.*")
        .derive_default(true)
        .derive_eq(true)
        .derive_hash(true)
        .use_core()
        .layout_tests(true)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "generating the LITE ABI from {} with bindgen (libclang) failed: {e}",
                header.display()
            )
        });
    bindings
        .write_to_file(out.join("uapi.rs"))
        .expect("OUT_DIR is writable");
}
