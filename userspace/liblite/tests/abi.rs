//! Checks that the Rust constants are all taken from the generated uapi
//! module, that the userspace C header and the kernel's uapi header
//! describe the same ABI, and that the C header and example compile.

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
        if !(name.starts_with("__NR_lite_") || name.starts_with("LITE_")) || name.contains('(') {
            continue; // function-like macros: see function_macros
        }
        let value = value.split("/*").next().unwrap_or_default();
        let previous = defines.insert(name.to_string(), eval_c_constant(value));
        assert!(previous.is_none(), "{name} defined twice");
    }
    defines
}

/// Every function-like `#define LITE_*(..) BODY` in `text`: the macro's
/// head (name and parameters) and its body, whitespace normalised.
fn function_macros(text: &str) -> BTreeMap<String, String> {
    let mut macros = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.trim();
        let Some(open) = rest.find('(') else {
            continue;
        };
        let (name, _) = rest.split_at(open);
        if !name.starts_with("LITE_") || name.contains(char::is_whitespace) {
            continue;
        }
        let Some(close) = rest.find(')') else {
            panic!("unterminated macro parameters in {line:?}");
        };
        let (head, body) = rest.split_at(close + 1);
        let body = body.split("/*").next().unwrap_or_default();
        let normalise = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        macros.insert(normalise(head), normalise(body));
    }
    macros
}

/// Each `pub const` of `src/sys.rs` (not `const fn`s): its name and the
/// expression that defines it.
fn rust_constants() -> Vec<(String, String)> {
    let text = read(&repo_path("src/sys.rs"));
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined
        .split("pub const ")
        .skip(1)
        .filter(|rest| !rest.starts_with("fn "))
        .filter_map(|rest| {
            let (name, rest) = rest.split_once(':')?;
            let (_, value) = rest.split_once('=')?;
            let value = value.split(';').next()?;
            Some((name.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

#[test]
fn every_rust_constant_comes_from_the_uapi_header_and_every_define_is_exposed() {
    let uapi = abi_defines(&read(&uapi_header()));
    assert!(
        uapi.len() >= 8,
        "parsed too little of the uapi header: {uapi:?}"
    );
    let rust = rust_constants();
    assert!(
        rust.len() >= uapi.len(),
        "parsed too little of sys.rs: {rust:?}"
    );
    for (name, value) in &rust {
        assert!(
            value.starts_with("uapi::"),
            "sys::{name} = {value} is not taken from the generated uapi module"
        );
    }
    for c_name in uapi.keys() {
        assert!(
            rust.iter().any(|(_, value)| value
                .strip_prefix("uapi::")
                .and_then(|v| v.split_whitespace().next())
                == Some(c_name.as_str())),
            "{c_name} is in the uapi header but sys.rs exposes no constant for it"
        );
    }
    // The values as the header's own arithmetic gives them, for a few
    // constants that are widened or narrowed on the way.
    assert_eq!(u128::from(sys::MAX_LMR_SIZE), uapi["LITE_MAX_LMR_SIZE"]);
    assert_eq!(
        u128::from(sys::MAX_MESSAGE_SIZE),
        uapi["LITE_MAX_MESSAGE_SIZE"]
    );
    assert_eq!(
        u128::from(sys::CM_DEFAULT_PORT),
        uapi["LITE_CM_DEFAULT_PORT"]
    );
    assert_eq!(sys::MAX_IP_LEN as u128, uapi["LITE_MAX_IP_LEN"]);
    assert_eq!(u128::from(sys::PERM_ATOMIC), uapi["LITE_PERM_ATOMIC"]);
    assert_eq!(sys::SYS_LITE_LEAVE as u128, uapi["__NR_lite_leave"]);
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
fn function_like_macros_match_in_both_headers() {
    let uapi = function_macros(&read(&uapi_header()));
    let user = function_macros(&read(&user_header()));
    assert_eq!(user, uapi);
}

#[test]
fn port_priority_matches_the_c_macro() {
    let uapi = function_macros(&read(&uapi_header()));
    assert_eq!(
        uapi.get("LITE_PORT_PRIORITY(port, priority)")
            .map(String::as_str),
        Some("((port) | ((priority) << 16))"),
        "the macro changed; update sys::port_priority and this test"
    );
    assert_eq!(sys::port_priority(7, 2), 7 | (2 << 16));
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
fn leave_wrapper_has_its_number_flag_and_signature_in_c() {
    // The C wrapper must be `long lite_leave(unsigned int)`: assigning it to
    // a pointer of that type is an error under -Werror otherwise.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let source = dir.join("leave_wrapper.c");
    std::fs::write(
        &source,
        format!(
            "#include \"lite.h\"\n\
             _Static_assert(__NR_lite_leave == {}, \"number\");\n\
             _Static_assert(LITE_LEAVE_FORCE == {}u, \"flag\");\n\
             long (*const leave_call)(unsigned int) = lite_leave;\n\
             long leave_forced(void) {{ return leave_call(LITE_LEAVE_FORCE); }}\n",
            sys::SYS_LITE_LEAVE,
            sys::LEAVE_FORCE
        ),
    )
    .expect("write test source");
    let object = dir.join("leave_wrapper.o");
    let include = repo_path("../include");
    let args = [
        "-Wall".as_ref(),
        "-Wextra".as_ref(),
        "-Werror".as_ref(),
        "-c".as_ref(),
        "-I".as_ref(),
        include.as_os_str(),
        "-o".as_ref(),
        object.as_os_str(),
        source.as_os_str(),
    ];
    assert_compiles(run_cc(&args), "the lite_leave wrapper check");
    // The newest call, right after lite_set_priority.
    assert_eq!(sys::SYS_LITE_LEAVE, sys::SYS_LITE_SET_PRIORITY + 1);
}

#[test]
fn constant_evaluator_understands_the_header_syntax() {
    assert_eq!(eval_c_constant("(4u << 20)"), 4 << 20);
    assert_eq!(eval_c_constant("(1ull << 40)"), 1 << 40);
    assert_eq!(eval_c_constant("0x1u"), 1);
    assert_eq!(eval_c_constant(" 18500 "), 18500);
    let text = "#define GUARD\n#define LITE_X\t(2u << 3) /* note */\n#define OTHER 5\n\
                #define LITE_F(a, b) ((a) |  (b)) /* f */\n";
    assert_eq!(
        abi_defines(text).into_iter().collect::<Vec<_>>(),
        vec![("LITE_X".to_string(), 16)]
    );
    assert_eq!(
        function_macros(text).into_iter().collect::<Vec<_>>(),
        vec![("LITE_F(a, b)".to_string(), "((a) | (b))".to_string())]
    );
}

/// Runs `cc` with `args`; `None` when no C compiler is installed.
/// Runs the C compiler; a missing compiler fails the test (the harness
/// installs one), so the C checks never pass by not running.
fn run_cc(args: &[&std::ffi::OsStr]) -> std::process::Output {
    match Command::new("cc").args(args).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("no C compiler (`cc`) found: install gcc or clang to check the C headers and examples")
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

/// The C examples, each compiled by [`c_examples_compile_with_warnings_as_errors`].
const EXAMPLES: [&str; 5] = [
    "hello_cluster",
    "lite_hello",
    "lite_lock",
    "lite_rpc",
    "lite_share",
];

#[test]
fn c_examples_compile_with_warnings_as_errors() {
    let include = repo_path("../include");
    for example in EXAMPLES {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(example);
        let source = repo_path(&format!("../examples/{example}.c"));
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
        assert_compiles(run_cc(&args), &format!("examples/{example}.c"));
        assert!(out.exists(), "cc produced no binary for {example}");
    }
}

#[test]
fn every_c_example_is_compiled() {
    let dir = repo_path("../examples");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("read examples directory").path();
        if path.extension().is_some_and(|ext| ext == "c") {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            assert!(
                EXAMPLES.contains(&stem),
                "{} is not compiled by the ABI test",
                path.display()
            );
        }
    }
}

/// A struct of the ABI: its C name, its Rust size, and its fields in
/// declaration order with their Rust offsets and uapi types.
struct AbiStruct {
    c_name: &'static str,
    size: usize,
    fields: Vec<(&'static str, usize, &'static str)>,
}

/// Every struct of the ABI as the Rust side declares it.
fn abi_structs() -> Vec<AbiStruct> {
    use std::mem::{offset_of, size_of};
    use sys::{LiteLock, LiteMulticast, LiteReceive, LiteStats};
    vec![
        AbiStruct {
            c_name: "lite_stats",
            size: size_of::<LiteStats>(),
            fields: vec![
                ("lmrs", offset_of!(LiteStats, lmrs), "__u64"),
                (
                    "registrations",
                    offset_of!(LiteStats, registrations),
                    "__u64",
                ),
                ("mappings", offset_of!(LiteStats, mappings), "__u64"),
                (
                    "published_names",
                    offset_of!(LiteStats, published_names),
                    "__u64",
                ),
                ("held_chunks", offset_of!(LiteStats, held_chunks), "__u64"),
                ("handles", offset_of!(LiteStats, handles), "__u64"),
                ("processes", offset_of!(LiteStats, processes), "__u64"),
                (
                    "async_in_flight",
                    offset_of!(LiteStats, async_in_flight),
                    "__u64",
                ),
                ("connections", offset_of!(LiteStats, connections), "__u64"),
                ("rpc_ports", offset_of!(LiteStats, rpc_ports), "__u64"),
                ("locks", offset_of!(LiteStats, locks), "__u64"),
                (
                    "lock_acquires",
                    offset_of!(LiteStats, lock_acquires),
                    "__u64",
                ),
                ("lock_waits", offset_of!(LiteStats, lock_waits), "__u64"),
                ("atomics", offset_of!(LiteStats, atomics), "__u64"),
                (
                    "qos_throttled",
                    offset_of!(LiteStats, qos_throttled),
                    "__u64",
                ),
            ],
        },
        AbiStruct {
            c_name: "lite_lock",
            size: size_of::<LiteLock>(),
            fields: vec![
                ("home", offset_of!(LiteLock, home), "__u32"),
                ("number", offset_of!(LiteLock, number), "__u32"),
            ],
        },
        AbiStruct {
            c_name: "lite_receive",
            size: size_of::<LiteReceive>(),
            fields: vec![
                ("buf", offset_of!(LiteReceive, buf), "__u64"),
                ("max_size", offset_of!(LiteReceive, max_size), "__u64"),
                ("descriptor", offset_of!(LiteReceive, descriptor), "__u64"),
                ("port", offset_of!(LiteReceive, port), "__u32"),
                ("flags", offset_of!(LiteReceive, flags), "__u32"),
            ],
        },
        AbiStruct {
            c_name: "lite_multicast",
            size: size_of::<LiteMulticast>(),
            fields: vec![
                ("nodes", offset_of!(LiteMulticast, nodes), "__u64"),
                ("lengths", offset_of!(LiteMulticast, lengths), "__u64"),
                ("msg", offset_of!(LiteMulticast, msg), "__u64"),
                ("size", offset_of!(LiteMulticast, size), "__u64"),
                ("replies", offset_of!(LiteMulticast, replies), "__u64"),
                ("max_reply", offset_of!(LiteMulticast, max_reply), "__u64"),
                ("count", offset_of!(LiteMulticast, count), "__u32"),
                (
                    "port_priority",
                    offset_of!(LiteMulticast, port_priority),
                    "__u32",
                ),
            ],
        },
    ]
}

/// The userspace header's spelling of a uapi type.
fn stdint_type(uapi_type: &str) -> &str {
    match uapi_type {
        "__u64" => "uint64_t",
        "__u32" => "uint32_t",
        other => panic!("no stdint spelling for {other}"),
    }
}

/// Names of the fields of `struct NAME` in `text`, in order, with their C
/// types.
fn c_struct_fields(text: &str, name: &str) -> Vec<(String, String)> {
    let opening = format!("struct {name} {{");
    let start = text
        .find(&opening)
        .unwrap_or_else(|| panic!("no struct {name} definition"));
    let body = &text[start + opening.len()..];
    let body = &body[..body
        .find("};")
        .unwrap_or_else(|| panic!("unterminated struct {name}"))];
    body.lines()
        .map(|line| line.split("/*").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            let decl = line
                .strip_suffix(';')
                .unwrap_or_else(|| panic!("unexpected struct {name} line {line:?}"));
            let (ty, field) = decl
                .trim()
                .rsplit_once(char::is_whitespace)
                .unwrap_or_else(|| panic!("unexpected struct {name} line {line:?}"));
            (field.to_string(), ty.trim().to_string())
        })
        .collect()
}

#[test]
fn structs_match_both_headers() {
    for abi in abi_structs() {
        let name = abi.c_name;
        // Naturally aligned fields with no padding, as the uapi needs.
        let mut expected_offset = 0;
        for (field, offset, ty) in &abi.fields {
            assert_eq!(*offset, expected_offset, "{name}.{field} is misplaced");
            expected_offset += if *ty == "__u64" { 8 } else { 4 };
        }
        assert_eq!(abi.size, expected_offset, "size of {name}");
        for (header, user) in [(uapi_header(), false), (user_header(), true)] {
            let fields = c_struct_fields(&read(&header), name);
            let expected: Vec<(String, String)> = abi
                .fields
                .iter()
                .map(|(field, _, ty)| {
                    let ty = if user { stdint_type(ty) } else { ty };
                    (field.to_string(), ty.to_string())
                })
                .collect();
            assert_eq!(fields, expected, "struct {name} in {}", header.display());
        }
    }
}

#[test]
fn struct_layouts_agree_in_c() {
    // Both headers' definitions side by side: the uapi header is read a
    // second time with every struct renamed, which also redefines every
    // constant (any difference is a macro redefinition error).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let source = dir.join("struct_layouts.c");
    let structs = abi_structs();
    let mut text =
        String::from("#include <stddef.h>\n#include \"lite.h\"\n#undef _UAPI_LINUX_LITE_H\n");
    for abi in &structs {
        text.push_str(&format!("#define {0} {0}_uapi\n", abi.c_name));
    }
    text.push_str("#include <linux/lite.h>\n");
    for abi in &structs {
        let (name, size) = (abi.c_name, abi.size);
        text.push_str(&format!(
            "#undef {name}\n\
             _Static_assert(sizeof(struct {name}) == {size}, \"{name} size\");\n\
             _Static_assert(sizeof(struct {name}_uapi) == {size}, \"uapi {name} size\");\n"
        ));
        for (field, offset, _) in &abi.fields {
            text.push_str(&format!(
                "_Static_assert(offsetof(struct {name}, {field}) == {offset}, \"{field}\");\n\
                 _Static_assert(offsetof(struct {name}_uapi, {field}) == {offset}, \"uapi {field}\");\n"
            ));
        }
    }
    text.push_str("long get(struct lite_stats *s) { return lite_get_stats(s, sizeof(*s)); }\n");
    std::fs::write(&source, text).expect("write test source");
    let object = dir.join("struct_layouts.o");
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
    assert_compiles(run_cc(&args), "the struct layout check");
}

#[test]
fn c_headers_can_be_included_together() {
    // In either order (struct_layouts_agree_in_c checks that the two
    // definitions are the same); the userspace header also twice.
    let orders = [
        ("user_first", "\"lite.h\"", "<linux/lite.h>"),
        ("uapi_first", "<linux/lite.h>", "\"lite.h\""),
    ];
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let include = repo_path("../include");
    let uapi_include = repo_path("../../lite-api-c/include/uapi");
    for (name, first, second) in orders {
        let source = dir.join(format!("both_headers_{name}.c"));
        std::fs::write(
            &source,
            format!(
                "#include {first}\n#include {second}\n#include \"lite.h\"\n\
                 int main(void) {{ struct lite_stats s = {{ 0 }};\n\
                 return (int)lite_get_node_id() + LITE_MAX_NODES + (int)s.lmrs; }}\n"
            ),
        )
        .expect("write test source");
        let object = dir.join(format!("both_headers_{name}.o"));
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
        assert_compiles(
            run_cc(&args),
            &format!("a file including both headers ({name})"),
        );
    }
}
