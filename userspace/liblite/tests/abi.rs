//! Checks that the Rust constants, the userspace C header and the kernel's
//! uapi header describe the same ABI, and that the C header and example
//! compile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lite::sys;

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn uapi_header() -> PathBuf {
    repo_path("../../lite-api-c/include/uapi/linux/lite.h")
}

fn user_header() -> PathBuf {
    repo_path("../include/lite.h")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Evaluates the constant expressions these headers use: integer literals
/// with optional `u`/`l` suffixes, hexadecimal, parentheses and `<<`.
fn eval_c_constant(expr: &str) -> u128 {
    let mut expr = expr.trim();
    while let Some(inner) = expr.strip_prefix('(').and_then(|e| e.strip_suffix(')')) {
        expr = inner.trim();
    }
    if let Some((lhs, rhs)) = expr.split_once("<<") {
        return eval_c_constant(lhs) << eval_c_constant(rhs);
    }
    let digits = expr.trim_end_matches(['u', 'U', 'l', 'L']);
    let parsed = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u128::from_str_radix(hex, 16),
        None => digits.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("cannot evaluate C constant {expr:?}: {e}"))
}

/// Every `#define __NR_lite_* VALUE` and `#define LITE_* VALUE` in `text`.
fn abi_defines(text: &str) -> BTreeMap<String, u128> {
    let mut defines = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.trim();
        let Some((name, value)) = rest.split_once(char::is_whitespace) else {
            continue; // include guards carry no value
        };
        if !(name.starts_with("__NR_lite_") || name.starts_with("LITE_")) {
            continue;
        }
        let value = value.split("/*").next().unwrap_or_default();
        let previous = defines.insert(name.to_string(), eval_c_constant(value));
        assert!(previous.is_none(), "{name} defined twice");
    }
    defines
}

/// The Rust side of the ABI: (C name, Rust name, value).
fn rust_constants() -> Vec<(&'static str, &'static str, u128)> {
    let syscall = |n: libc::c_long| u128::try_from(n).expect("syscall numbers are positive");
    vec![
        (
            "__NR_lite_join",
            "SYS_LITE_JOIN",
            syscall(sys::SYS_LITE_JOIN),
        ),
        (
            "__NR_lite_get_node_id",
            "SYS_LITE_GET_NODE_ID",
            syscall(sys::SYS_LITE_GET_NODE_ID),
        ),
        (
            "__NR_lite_get_total_node",
            "SYS_LITE_GET_TOTAL_NODE",
            syscall(sys::SYS_LITE_GET_TOTAL_NODE),
        ),
        (
            "__NR_lite_alloc_remote",
            "SYS_LITE_ALLOC_REMOTE",
            syscall(sys::SYS_LITE_ALLOC_REMOTE),
        ),
        (
            "__NR_lite_rdma_write",
            "SYS_LITE_RDMA_WRITE",
            syscall(sys::SYS_LITE_RDMA_WRITE),
        ),
        (
            "__NR_lite_rdma_read",
            "SYS_LITE_RDMA_READ",
            syscall(sys::SYS_LITE_RDMA_READ),
        ),
        (
            "__NR_lite_free",
            "SYS_LITE_FREE",
            syscall(sys::SYS_LITE_FREE),
        ),
        (
            "__NR_lite_dist_barrier",
            "SYS_LITE_DIST_BARRIER",
            syscall(sys::SYS_LITE_DIST_BARRIER),
        ),
        ("LITE_NODE_SPREAD", "NODE_SPREAD", sys::NODE_SPREAD.into()),
        (
            "LITE_ALLOC_ATOMIC",
            "ALLOC_ATOMIC",
            sys::ALLOC_ATOMIC.into(),
        ),
        (
            "LITE_PRIORITY_NONE",
            "PRIORITY_NONE",
            sys::PRIORITY_NONE.into(),
        ),
        (
            "LITE_PRIORITY_HIGH",
            "PRIORITY_HIGH",
            sys::PRIORITY_HIGH.into(),
        ),
        (
            "LITE_PRIORITY_LOW",
            "PRIORITY_LOW",
            sys::PRIORITY_LOW.into(),
        ),
        ("LITE_CHUNK_SIZE", "CHUNK_SIZE", sys::CHUNK_SIZE.into()),
        (
            "LITE_MAX_LMR_SIZE",
            "MAX_LMR_SIZE",
            sys::MAX_LMR_SIZE.into(),
        ),
        ("LITE_MAX_NODES", "MAX_NODES", sys::MAX_NODES.into()),
        ("LITE_MAX_IP_LEN", "MAX_IP_LEN", sys::MAX_IP_LEN as u128),
        (
            "LITE_CM_DEFAULT_PORT",
            "CM_DEFAULT_PORT",
            sys::CM_DEFAULT_PORT.into(),
        ),
    ]
}

/// Names of the `pub const`s declared in `src/sys.rs`.
fn rust_const_names() -> Vec<String> {
    read(&repo_path("src/sys.rs"))
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .filter_map(|rest| rest.split(':').next())
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn uapi_header_matches_rust_constants_both_ways() {
    let uapi = abi_defines(&read(&uapi_header()));
    assert!(
        uapi.len() >= 8,
        "parsed too little of the uapi header: {uapi:?}"
    );
    let rust = rust_constants();
    for (c_name, rust_name, value) in &rust {
        assert_eq!(
            uapi.get(*c_name),
            Some(value),
            "sys::{rust_name} = {value} but the uapi header has {c_name} = {:?}",
            uapi.get(*c_name)
        );
    }
    for name in uapi.keys() {
        assert!(
            rust.iter().any(|(c_name, ..)| c_name == name),
            "{name} is in the uapi header but has no Rust constant"
        );
    }
    for name in rust_const_names() {
        assert!(
            rust.iter().any(|(_, rust_name, _)| *rust_name == name),
            "sys::{name} is not checked against the uapi header"
        );
    }
}

#[test]
fn userspace_header_matches_uapi_header_both_ways() {
    let uapi = abi_defines(&read(&uapi_header()));
    let user = abi_defines(&read(&user_header()));
    for (name, value) in &uapi {
        assert_eq!(
            user.get(name),
            Some(value),
            "{name} differs in userspace/include/lite.h"
        );
    }
    for (name, value) in &user {
        assert_eq!(
            uapi.get(name),
            Some(value),
            "{name} is not in the uapi header"
        );
    }
}

#[test]
fn userspace_header_wraps_every_syscall() {
    let uapi = abi_defines(&read(&uapi_header()));
    let user = read(&user_header());
    for name in uapi.keys() {
        if let Some(call) = name.strip_prefix("__NR_") {
            assert!(
                user.contains(&format!("static inline long {call}(")),
                "userspace/include/lite.h has no wrapper {call}()"
            );
        }
    }
}

#[test]
fn constant_evaluator_understands_the_header_syntax() {
    assert_eq!(eval_c_constant("(4u << 20)"), 4 << 20);
    assert_eq!(eval_c_constant("(1ull << 40)"), 1 << 40);
    assert_eq!(eval_c_constant("0x1u"), 1);
    assert_eq!(eval_c_constant(" 18500 "), 18500);
    let defines =
        abi_defines("#define GUARD\n#define LITE_X\t(2u << 3) /* note */\n#define OTHER 5\n");
    assert_eq!(
        defines.into_iter().collect::<Vec<_>>(),
        vec![("LITE_X".to_string(), 16)]
    );
}

/// Runs `cc` with `args`; `None` when no C compiler is installed.
fn run_cc(args: &[&std::ffi::OsStr]) -> Option<std::process::Output> {
    match Command::new("cc").args(args).output() {
        Ok(output) => Some(output),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("note: `cc` not found; skipping the C compile check");
            None
        }
        Err(e) => panic!("cannot run cc: {e}"),
    }
}

fn assert_compiles(output: std::process::Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed to compile:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn c_example_compiles_with_warnings_as_errors() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lite_hello");
    let include = repo_path("../include");
    let source = repo_path("../examples/lite_hello.c");
    let args = [
        "-Wall".as_ref(),
        "-Wextra".as_ref(),
        "-Werror".as_ref(),
        "-I".as_ref(),
        include.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        source.as_os_str(),
    ];
    if let Some(output) = run_cc(&args) {
        assert_compiles(output, "examples/lite_hello.c");
        assert!(out.exists(), "cc produced no binary");
    }
}

#[test]
fn c_headers_can_be_included_together() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let source = dir.join("both_headers.c");
    // The userspace header first, so the uapi header redefines every
    // constant: any difference is a macro redefinition error.
    std::fs::write(
        &source,
        "#include \"lite.h\"\n#include <linux/lite.h>\n\
         int main(void) { return (int)lite_get_node_id() + LITE_MAX_NODES; }\n",
    )
    .expect("write test source");
    let object = dir.join("both_headers.o");
    let include = repo_path("../include");
    let uapi_include = repo_path("../../lite-api-c/include/uapi");
    let args = [
        "-Wall".as_ref(),
        "-Werror".as_ref(),
        "-c".as_ref(),
        "-I".as_ref(),
        include.as_os_str(),
        "-I".as_ref(),
        uapi_include.as_os_str(),
        "-o".as_ref(),
        object.as_os_str(),
        source.as_os_str(),
    ];
    if let Some(output) = run_cc(&args) {
        assert_compiles(output, "a file including both headers");
    }
}
