//! The syzkaller descriptions of LITE's system calls (`config/syzkaller/`),
//! checked against the C sources they describe.
//!
//! syzkaller does not notice when a description stops matching the kernel:
//! a wrong number fuzzes another call, a shifted or missing argument passes
//! values where the kernel expects others, a struct with a field too few is
//! laid out wrong. The `SYSCALL_DEFINEn` of `lite_syscalls.c`, the entry
//! points the kernel compiles, are the authority on arguments. The files
//! are read as text by small scanners, enough for the way they are
//! written; syzkaller's compiler checks the syntax proper. Widths are those
//! of x86_64, the only architecture LITE numbers its calls for.

// Only the tests below use the scanners.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};

use crate::syscalls::{self, find_top, Syscall};

/// The files' names in messages.
const HEADER: &str = "lite.h";
const SYSCALLS_C: &str = "lite_syscalls.c";
const TXT: &str = "lite.txt";
const CONST: &str = "lite.txt.const";

/// Each file's name and its path in the repository.
const FILES: [(&str, &str); 4] = [
    (HEADER, "lite-api-c/include/uapi/linux/lite.h"),
    (SYSCALLS_C, "lite-api-c/kernel/lite_syscalls.c"),
    (TXT, "config/syzkaller/lite.txt"),
    (CONST, "config/syzkaller/lite.txt.const"),
];

const ARCH: &str = "amd64";

/// Each file's text, by its name.
type Sources = BTreeMap<&'static str, String>;

/// A declaration, `(type, name)`: a C parameter or field, or a syzlang
/// argument or field.
type Decl = (String, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Width {
    Pointer,
    Bytes(u64),
    /// A syscall argument whose syzlang type leaves its width to the
    /// register (`flags`, `len` or `const` without a base type).
    Register,
    Unknown,
}

impl Width {
    fn describe(self) -> String {
        match self {
            Width::Pointer => "a pointer".to_string(),
            Width::Bytes(8) => "an 8-byte integer".to_string(),
            Width::Bytes(n) => format!("a {n}-byte integer"),
            Width::Register => "a register-wide integer".to_string(),
            Width::Unknown => "of unknown width".to_string(),
        }
    }

    /// Inside structs pointers are `ptr64`-sized fields.
    fn in_struct(self) -> Width {
        match self {
            Width::Pointer => Width::Bytes(8),
            w => w,
        }
    }
}

/// Every drift between the descriptions and the C sources.
fn check(src: &Sources) -> Vec<String> {
    check_readable(src).unwrap_or_else(|unreadable| vec![unreadable])
}

/// Or the one problem that a file cannot be read at all.
fn check_readable(src: &Sources) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    // Every numbered call is defined, and only those (see `syscalls::load`).
    let calls = syscalls::load(&src[HEADER], &src[SYSCALLS_C]);
    let calls = calls.map_err(|e| format!("{HEADER} and {SYSCALLS_C}: {e:#}"))?;
    let header = parse_header(&src[HEADER], &mut problems);
    let syz = parse_syzlang(&src[TXT], &mut problems);
    let consts = parse_consts(&src[CONST]).map_err(|e| format!("{CONST}: {e}"))?;
    check_calls(&calls, &header, &syz, &mut problems);
    check_numbers(&calls, &consts, &mut problems);
    check_constants(&header, &syz, &consts, &mut problems);
    check_structs(&header, &syz, &mut problems);
    Ok(problems)
}

/// Each numbered (and so defined) call is described and documented; each
/// described or documented call is numbered; the arguments of the
/// descriptions and of the documented prototypes match the definition's.
fn check_calls(calls: &[Syscall], header: &Header, syz: &Syzlang, problems: &mut Vec<String>) {
    let defined = |name: &str| calls.iter().find(|call| call.name == name);
    let described: BTreeSet<&str> = syz.calls.iter().map(|c| c.base.as_str()).collect();
    for Syscall { name, .. } in calls {
        if !described.contains(name.as_str()) {
            problems.push(format!(
                "{name}: {HEADER} numbers it (__NR_{name}) but {TXT} does not describe it"
            ));
        }
        if !header.prototypes.contains_key(name) {
            problems.push(format!(
                "{name}: {HEADER} documents no prototype `long {name}(...)`"
            ));
        }
    }
    let width = |ty: &str| syz.width(ty, 0);
    for call in &syz.calls {
        match defined(&call.base) {
            None => problems.push(format!(
                "{}: {TXT}:{} describes it but {HEADER} has no __NR_{}",
                call.name, call.line, call.base
            )),
            Some(defined) => compare_decls(
                &call.name,
                (TXT, &call.args, &width),
                (SYSCALLS_C, &defined.params, &c_width),
                problems,
            ),
        }
    }
    for (name, documented) in &header.prototypes {
        match defined(name) {
            None => problems.push(format!(
                "{name}: {HEADER} documents it but does not number it"
            )),
            Some(defined) => compare_decls(
                name,
                (HEADER, documented, &c_width),
                (SYSCALLS_C, &defined.params, &c_width),
                problems,
            ),
        }
    }
}

fn check_numbers(calls: &[Syscall], consts: &ConstFile, problems: &mut Vec<String>) {
    for Syscall { name, number, .. } in calls {
        let key = format!("__NR_{name}");
        match consts.get(&key) {
            None => problems.push(format!("{key}: {CONST} lacks it ({number} in {HEADER})")),
            Some(None) => problems.push(format!(
                "{key}: {CONST} leaves it undefined for {ARCH} ({number} in {HEADER})"
            )),
            Some(Some(v)) if *v != u64::from(*number) => {
                problems.push(format!("{key}: {v} in {CONST} but {number} in {HEADER}"))
            }
            Some(Some(_)) => {}
        }
    }
}

/// `lite.txt.const` holds only the header's constants, with the header's
/// values, and every constant `lite.txt` uses.
fn check_constants(header: &Header, syz: &Syzlang, consts: &ConstFile, problems: &mut Vec<String>) {
    for (name, value) in consts {
        match (header.defines.get(name), value) {
            // The numbers have their own check.
            (Some(_), _) if name.starts_with("__NR_") => {}
            (Some(Some(expected)), Some(v)) if v != expected => {
                problems.push(format!("{name}: {v} in {CONST} but {expected} in {HEADER}"))
            }
            // Equal, undefined for the architecture, or not a plain number
            // in C (an expression the scanner does not evaluate): only its
            // presence is checked.
            (Some(_), _) => {}
            (None, _) => problems.push(format!(
                "{name}: {CONST} has it but {HEADER} does not define it"
            )),
        }
    }
    for (name, line) in &syz.consts_used {
        if !consts.contains_key(name) {
            problems.push(format!("{name}: {TXT}:{line} uses it but {CONST} lacks it"));
        }
    }
}

fn check_structs(header: &Header, syz: &Syzlang, problems: &mut Vec<String>) {
    let width = |ty: &str| syz.width(ty, 0);
    for (name, fields) in &header.structs {
        let Some(described) = syz.structs.get(name) else {
            problems.push(format!(
                "struct {name}: {HEADER} defines it but {TXT} does not describe it"
            ));
            continue;
        };
        compare_decls(
            &format!("struct {name}"),
            (TXT, described, &width),
            (HEADER, fields, &c_width),
            problems,
        );
    }
}

/// A file's label, its declarations and how it tells their widths.
type Side<'a> = (&'a str, &'a [Decl], &'a dyn Fn(&str) -> Width);

/// Count, names in order and, where both sides tell, widths of a struct's
/// fields (`what` is `struct NAME`) or of a call's arguments.
fn compare_decls(what: &str, a: Side, b: Side, problems: &mut Vec<String>) {
    let ((file_a, decls_a, width_a), (file_b, decls_b, width_b)) = (a, b);
    let in_struct = what.starts_with("struct ");
    let kind = if in_struct { "field" } else { "argument" };
    if decls_a.len() != decls_b.len() {
        let names = |d: &[Decl]| d.iter().map(|(_, n)| &n[..]).collect::<Vec<_>>().join(", ");
        problems.push(format!(
            "{what}: {file_a} has {} {kind}(s) ({}), {file_b} has {} ({})",
            decls_a.len(),
            names(decls_a),
            decls_b.len(),
            names(decls_b)
        ));
        return;
    }
    for (i, ((ty_a, name_a), (ty_b, name_b))) in decls_a.iter().zip(decls_b).enumerate() {
        let at = format!("{what}: {kind} {}", i + 1);
        if name_a != name_b {
            problems.push(format!(
                "{at} is `{name_a}` in {file_a} but `{name_b}` in {file_b}"
            ));
            continue;
        }
        let (mut wa, mut wb) = (width_a(ty_a), width_b(ty_b));
        if in_struct {
            (wa, wb) = (wa.in_struct(), wb.in_struct());
        }
        if widths_disagree(wa, wb) {
            problems.push(format!(
                "{at} `{name_a}` is `{ty_a}`, {}, in {file_a} but `{ty_b}`, {}, in {file_b}",
                wa.describe(),
                wb.describe()
            ));
        }
    }
}

/// Certainly: a pointer against an integer, or integers of other sizes.
fn widths_disagree(a: Width, b: Width) -> bool {
    match (a, b) {
        (Width::Unknown, _) | (_, Width::Unknown) => false,
        (Width::Pointer, Width::Pointer) => false,
        (Width::Pointer, _) | (_, Width::Pointer) => true,
        (Width::Bytes(x), Width::Bytes(y)) => x != y,
        _ => false,
    }
}

fn c_width(ty: &str) -> Width {
    if ty.contains('*') {
        return Width::Pointer;
    }
    let words: Vec<&str> = ty
        .split_whitespace()
        .filter(|w| !matches!(*w, "const" | "volatile" | "__user"))
        .collect();
    match words.join(" ").as_str() {
        "u8" | "__u8" | "s8" | "__s8" | "char" | "unsigned char" => Width::Bytes(1),
        "u16" | "__u16" | "s16" | "__s16" | "short" | "unsigned short" => Width::Bytes(2),
        "u32" | "__u32" | "s32" | "__s32" | "int" | "unsigned" | "unsigned int" => Width::Bytes(4),
        "u64" | "__u64" | "s64" | "__s64" | "long" | "unsigned long" | "long long"
        | "unsigned long long" => Width::Bytes(8),
        _ => Width::Unknown,
    }
}

// ---------------------------------------------------------------------------
// The uapi header

#[derive(Default)]
struct Header {
    /// Every `#define`d object-like macro, with its value when it is an
    /// integer the scanner can evaluate.
    defines: BTreeMap<String, Option<u64>>,
    structs: BTreeMap<String, Vec<Decl>>,
    /// The `long lite_*(...)` prototypes of the comments.
    prototypes: BTreeMap<String, Vec<Decl>>,
}

fn parse_header(text: &str, problems: &mut Vec<String>) -> Header {
    let code = syscalls::code_only(text);
    let mut header = Header::default();
    for (_, name, value) in syscalls::defines(&code) {
        // Function-like macros (`NAME(args)`) are no constants.
        if name.chars().all(is_ident_char) {
            header.defines.insert(name.to_string(), eval_c(value));
        }
    }
    parse_c_structs(&code, &mut header, problems);
    parse_prototypes(&comment_text(text), &mut header, problems);
    header
}

/// Literals with suffixes, parentheses and `<<`.
fn eval_c(expr: &str) -> Option<u64> {
    let expr = expr.trim();
    if let Some(inner) = expr.strip_prefix('(').and_then(|e| e.strip_suffix(')')) {
        return eval_c(inner);
    }
    if let Some((a, b)) = expr.split_once("<<") {
        let (a, b) = (eval_c(a)?, u32::try_from(eval_c(b)?).ok()?);
        let shifted = a.checked_shl(b)?;
        return (shifted >> b == a).then_some(shifted);
    }
    let digits = expr
        .trim_end_matches(['u', 'U', 'l', 'L'])
        .to_ascii_lowercase();
    if let Some(hex) = digits.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else if let Some(octal) = digits.strip_prefix('0').filter(|o| !o.is_empty()) {
        u64::from_str_radix(octal, 8).ok()
    } else {
        digits.parse().ok()
    }
}

fn parse_c_structs(code: &str, header: &mut Header, problems: &mut Vec<String>) {
    let mut rest = code;
    while let Some(pos) = rest.find("struct ") {
        let after = &rest[pos + "struct ".len()..];
        rest = after;
        let name: String = after.chars().take_while(|&c| is_ident_char(c)).collect();
        let Some(body) = after[name.len()..].trim_start().strip_prefix('{') else {
            continue; // a use, not a definition
        };
        let Some(end) = body.find('}') else {
            problems.push(format!("struct {name}: unterminated in {HEADER}"));
            return;
        };
        let mut fields = Vec::new();
        let decls = body[..end].split(';').map(str::trim);
        for decl in decls.filter(|d| !d.is_empty()) {
            // `TYPE a, b` declares several fields of one type.
            let mut parts = decl.split(',');
            let first = parts.next().unwrap_or_default();
            let Some((ty, field)) = split_c_decl(first) else {
                problems.push(format!("struct {name}: cannot read `{decl}` in {HEADER}"));
                continue;
            };
            fields.push((ty.clone(), field));
            for more in parts {
                let more = more.trim();
                let stars = more.chars().take_while(|&c| c == '*').count();
                let ty = format!("{ty}{}", "*".repeat(stars));
                fields.push((ty, more[stars..].trim().to_string()));
            }
        }
        header.structs.insert(name, fields);
        rest = &body[end..];
    }
}

/// Splits `const char *name` or `__u8 name[16]` into its type
/// (`const char *`, `__u8 [16]`) and name.
fn split_c_decl(decl: &str) -> Option<(String, String)> {
    let decl = decl.trim();
    let (decl, array) = match decl.find('[') {
        Some(at) => (decl[..at].trim_end(), &decl[at..]),
        None => (decl, ""),
    };
    let start = decl.trim_end_matches(is_ident_char).len();
    let (ty, name) = (decl[..start].trim(), &decl[start..]);
    if ty.is_empty() || name.is_empty() {
        return None;
    }
    let ty = format!("{ty} {array}").trim_end().to_string();
    Some((ty, name.to_string()))
}

/// Without the ` * ` that starts their lines.
fn comment_text(source: &str) -> String {
    let mut out = String::new();
    let mut rest = source;
    while let Some(start) = rest.find("/*") {
        let body = &rest[start + 2..];
        let end = body.find("*/").unwrap_or(body.len());
        for line in body[..end].lines() {
            out.push_str(line.trim_start().trim_start_matches('*').trim_start());
            out.push('\n');
        }
        rest = &body[(end + 2).min(body.len())..];
    }
    out
}

/// Prototypes `long lite_name(params)` that start a comment line; they may
/// continue on the next lines.
fn parse_prototypes(comments: &str, header: &mut Header, problems: &mut Vec<String>) {
    let lines: Vec<&str> = comments.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("long lite_") else {
            continue;
        };
        let mut text = format!("lite_{rest}");
        for more in &lines[i + 1..] {
            if text.contains(')') {
                break;
            }
            text.push(' ');
            text.push_str(more);
        }
        let (Some(open), Some(close)) = (text.find('('), text.find(')')) else {
            problems.push(format!("{HEADER}: cannot read the prototype `long {text}`"));
            continue;
        };
        let name = text[..open].trim().to_string();
        let inner = text[open + 1..close].trim();
        let mut params = Vec::new();
        if inner != "void" && !inner.is_empty() {
            for param in inner.split(',') {
                match split_c_decl(param) {
                    Some(decl) => params.push(decl),
                    None => problems.push(format!(
                        "{name}: cannot read the parameter `{}` documented in {HEADER}",
                        param.trim()
                    )),
                }
            }
        }
        if header.prototypes.insert(name.clone(), params).is_some() {
            problems.push(format!("{name}: {HEADER} documents it twice"));
        }
    }
}

// ---------------------------------------------------------------------------
// The syzlang descriptions

/// `name$variant(args) ret`.
struct SynCall {
    name: String,
    /// Before `$`: the kernel's name of the call.
    base: String,
    args: Vec<Decl>,
    line: usize,
}

#[derive(Default)]
struct Syzlang {
    calls: Vec<SynCall>,
    structs: BTreeMap<String, Vec<Decl>>,
    /// Resource and type alias names (syzkaller gives no two types one
    /// name) to underlying types.
    underlying: BTreeMap<String, String>,
    /// Constants the descriptions use, each with the first line using it.
    consts_used: BTreeMap<String, usize>,
}

/// `include`, resources, type aliases, calls, structs and flags; anything
/// else (a union, a template, a `define`) is reported as unreadable.
fn parse_syzlang(text: &str, problems: &mut Vec<String>) -> Syzlang {
    let mut syz = Syzlang::default();
    // The struct being read: its name and its fields so far.
    let mut open: Option<(String, Vec<Decl>)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = strip_comment(raw).trim();
        if line.is_empty() || line.starts_with("include ") {
            continue;
        }
        for name in constants_in(line) {
            syz.consts_used.entry(name).or_insert(line_no);
        }
        if let Some((name, fields)) = &mut open {
            if line.starts_with('}') {
                syz.structs
                    .insert(std::mem::take(name), std::mem::take(fields));
                open = None;
            } else {
                let (field, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let (ty, _attrs) = split_type(rest.trim());
                if ty.is_empty() {
                    problems.push(format!("{TXT}:{line_no}: a field without a type"));
                }
                fields.push((ty.to_string(), field.to_string()));
            }
            continue;
        }
        if let Some(decl) = line.strip_prefix("resource ") {
            let (name, args) = parse_type(decl.split(':').next().unwrap_or_default());
            match args[..] {
                [base] => {
                    syz.underlying.insert(name.to_string(), base.to_string());
                }
                _ => problems.push(format!("{TXT}:{line_no}: cannot read the resource")),
            }
            continue;
        }
        let alias = line.strip_prefix("type ").map(str::trim);
        if let Some((name, ty)) = alias.and_then(|a| a.split_once(char::is_whitespace)) {
            syz.underlying
                .insert(name.to_string(), ty.trim().to_string());
            continue;
        }
        let after = line.trim_start_matches(|c| is_ident_char(c) || c == '$');
        let name = line[..line.len() - after.len()].to_string();
        let after = after.trim_start();
        if name.is_empty() {
            problems.push(format!("{TXT}:{line_no}: cannot read `{line}`"));
        } else if after.starts_with('=') {
            // Flags; their constants are already collected.
        } else if after == "{" {
            open = Some((name, Vec::new()));
        } else if after.starts_with('(') {
            match parse_call(&name, after, line_no) {
                Ok(call) => syz.calls.push(call),
                Err(e) => problems.push(format!("{TXT}:{line_no}: {e}")),
            }
        } else {
            problems.push(format!("{TXT}:{line_no}: cannot read `{line}`"));
        }
    }
    if open.is_some() {
        problems.push(format!("{TXT}: the last struct is not closed"));
    }
    syz
}

/// `(args) ret (attrs)` after the name of a call.
fn parse_call(name: &str, after: &str, line: usize) -> Result<SynCall, String> {
    let inner = &after[1..];
    let close = closing_bracket(inner).ok_or_else(|| format!("{name}: unclosed `(`"))?;
    let mut args = Vec::new();
    for arg in split_top(&inner[..close], ',') {
        let arg = arg.trim();
        let Some((arg_name, ty)) = arg.split_once(char::is_whitespace) else {
            return Err(format!("{name}: argument `{arg}` has no type"));
        };
        args.push((ty.trim().to_string(), arg_name.to_string()));
    }
    let base = name.split('$').next().unwrap_or(name).to_string();
    Ok(SynCall {
        name: name.to_string(),
        base,
        args,
        line,
    })
}

impl Syzlang {
    fn width(&self, ty: &str, depth: usize) -> Width {
        // Resources and aliases refer to each other only a few levels deep.
        if depth > 16 {
            return Width::Unknown;
        }
        let (name, args) = parse_type(ty);
        match name {
            "ptr" | "ptr64" | "buffer" | "vma" | "vma64" => Width::Pointer,
            "intptr" | "boolptr" => Width::Bytes(8),
            // The base type, when given, comes last.
            "const" | "flags" | "len" | "bytesize" | "bytesize2" | "bytesize4" | "bytesize8"
            | "bitsize" | "offsetof" | "proc" | "fileoff" => match args.last() {
                Some(base) if int_bytes(base).is_some() || *base == "intptr" => {
                    self.width(base, depth + 1)
                }
                _ => Width::Register,
            },
            _ => {
                let underlying = self.underlying.get(name);
                match (int_bytes(name), underlying) {
                    (Some(bytes), _) => Width::Bytes(bytes),
                    (None, Some(underlying)) => self.width(underlying, depth + 1),
                    (None, None) => Width::Unknown,
                }
            }
        }
    }
}

/// Of `intN`, `intNbe` and `boolN`.
fn int_bytes(name: &str) -> Option<u64> {
    let bits = name.strip_prefix("int").or(name.strip_prefix("bool"))?;
    match bits.strip_suffix("be").unwrap_or(bits) {
        "8" => Some(1),
        "16" => Some(2),
        "32" => Some(4),
        "64" => Some(8),
        _ => None,
    }
}

/// `name[args]`.
fn parse_type(text: &str) -> (&str, Vec<&str>) {
    let text = text.trim();
    match text.find('[') {
        Some(open) if text.ends_with(']') => {
            let args = split_top(&text[open + 1..text.len() - 1], ',');
            (
                text[..open].trim(),
                args.into_iter().map(str::trim).collect(),
            )
        }
        _ => (text, Vec::new()),
    }
}

/// A field's `type (attrs)`: the type ends at the first blank outside
/// brackets.
fn split_type(text: &str) -> (&str, &str) {
    match find_top(text, "", |c, depth| c.is_whitespace() && depth == 0) {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    }
}

/// Splits at `sep` outside brackets, parentheses and quotes.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(i) = find_top(rest, "\"`'", |c, depth| c == sep && depth == 0) {
        parts.push(&rest[..i]);
        rest = &rest[i + sep.len_utf8()..];
    }
    if !rest.trim().is_empty() || !parts.is_empty() {
        parts.push(rest);
    }
    parts
}

fn closing_bracket(text: &str) -> Option<usize> {
    find_top(text, "", |c, depth| depth == 0 && matches!(c, ')' | ']'))
}

/// `line` without its `#` comment (a `#` in a string is kept).
fn strip_comment(line: &str) -> &str {
    find_top(line, "\"`", |c, _| c == '#').map_or(line, |i| &line[..i])
}

/// Upper case identifiers outside strings, and system call numbers.
fn constants_in(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    for c in line.chars().chain([' ']) {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        if is_ident_char(c) {
            word.push(c);
            continue;
        }
        let is_const = word.starts_with("__NR_")
            || (word.chars().any(|c| c.is_ascii_uppercase())
                && !word.chars().any(|c| c.is_ascii_lowercase())
                && !word.starts_with(|c: char| c.is_ascii_digit()));
        if is_const {
            found.push(std::mem::take(&mut word));
        }
        word.clear();
        if matches!(c, '"' | '`') {
            quote = Some(c);
        }
    }
    found
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

// ---------------------------------------------------------------------------
// The const file

/// A `.const` file's values for `ARCH`; `None` for `???` (undefined).
type ConstFile = BTreeMap<String, Option<u64>>;

/// syz-extract's format: `arches = ...`, then `NAME = VALUE`, VALUE a
/// default and/or `arch[:arch...]:value` entries, `???` for undefined.
fn parse_consts(text: &str) -> Result<ConstFile, String> {
    let mut seen_arches = false;
    let mut values = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let unreadable = || format!("line {at}: expected NAME = VALUE");
        let (name, value) = line.split_once('=').ok_or_else(unreadable)?;
        let (name, value) = (name.trim(), value.trim());
        if !seen_arches {
            if name != "arches" {
                return Err(format!("line {at}: the first line must be `arches = ...`"));
            }
            if !value.split(',').any(|a| a.trim() == ARCH) {
                return Err(format!("line {at}: `arches` does not list {ARCH}"));
            }
            seen_arches = true;
            continue;
        }
        let mut default = None;
        let mut specific = None;
        for entry in value.split(',') {
            let fields: Vec<&str> = entry.split(':').map(str::trim).collect();
            let Some((value, for_arches)) = fields.split_last() else {
                continue;
            };
            let bad = || format!("line {at}: bad value `{}`", entry.trim());
            let parsed = parse_const_value(value).ok_or_else(bad)?;
            if for_arches.is_empty() {
                default = Some(parsed);
            } else if for_arches.contains(&ARCH) {
                specific = Some(parsed);
            }
        }
        let Some(value) = specific.or(default) else {
            // Given for other architectures only.
            continue;
        };
        if values.insert(name.to_string(), value).is_some() {
            return Err(format!("line {at}: {name} is given twice"));
        }
    }
    if !seen_arches {
        return Err("no `arches = ...` line".to_string());
    }
    Ok(values)
}

fn parse_const_value(text: &str) -> Option<Option<u64>> {
    if text == "???" {
        return Some(None);
    }
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    };
    parsed.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::repo_root;

    fn read(path: &str) -> String {
        let path = repo_root().join(path);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    fn load() -> Sources {
        FILES.map(|(name, path)| (name, read(path))).into()
    }

    #[test]
    fn syzkaller_descriptions_match_the_uapi_header() {
        let repo = load();
        let problems = check(&repo);
        assert!(
            problems.is_empty(),
            "{TXT} and {CONST} drifted from {HEADER} and {SYSCALLS_C}:\n  {}",
            problems.join("\n  ")
        );
        // Every call is described, so the scanners did read the files.
        let numbers = syscalls::parse_numbers(&repo[HEADER]).unwrap();
        let syz = parse_syzlang(&repo[TXT], &mut Vec::new());
        assert_eq!(syz.calls.len(), numbers.len());
        let header = parse_header(&repo[HEADER], &mut Vec::new());
        assert_eq!(header.prototypes.len(), numbers.len());
    }

    /// Runs the check on the repository's files after `edit`, which must
    /// change one of them.
    fn check_edited(edit: impl FnOnce(&mut Sources)) -> Vec<String> {
        let mut repo = load();
        let before = repo.clone();
        edit(&mut repo);
        assert_ne!(before, repo, "the edit did not apply");
        check(&repo)
    }

    fn assert_reported(problems: &[String], needle: &str) {
        let reported = problems.iter().any(|p| p.contains(needle));
        assert!(
            reported,
            "expected a problem containing {needle:?}, got {problems:#?}"
        );
    }

    /// Drifts between the files: each its edits, `file: from => to`
    /// (`from` must be there; an empty `from` appends `to`), then the
    /// problems the check must report after them.
    const DRIFTS: &[&[&str]] = &[
        // A call missing from the descriptions.
        &[
            "lite.txt: lite_free(handle lite_handle)\n =>",
            "lite_free: lite.h numbers it (__NR_lite_free) but lite.txt does not describe it",
        ],
        // A described call the header lacks.
        &[
            "lite.txt:  => lite_frobnicate$x(handle lite_handle)\n",
            "lite_frobnicate$x: lite.txt:",
            "has no __NR_lite_frobnicate",
        ],
        // A renumbered call.
        &[
            "lite.h: #define __NR_lite_join\t\t\t548 => #define __NR_lite_join\t\t\t600",
            "__NR_lite_join: 548 in lite.txt.const but 600 in lite.h",
        ],
        // An argument added in C.
        &[
            "lite_syscalls.c: SYSCALL_DEFINE1(lite_free, u64, handle) => SYSCALL_DEFINE2(lite_free, u64, handle, unsigned int, flags)",
            "lite.h: long lite_free(__u64 handle) => long lite_free(__u64 handle, unsigned int flags)",
            "lite_free: lite.txt has 1 argument(s) (handle), lite_syscalls.c has 2 (handle, flags)",
        ],
        // A prototype documented wrong.
        &[
            "lite.h: long lite_dist_barrier(unsigned int num) => long lite_dist_barrier(void)",
            "lite_dist_barrier: lite.h has 0 argument(s) (), lite_syscalls.c has 1 (num)",
        ],
        // Swapped or retyped arguments.
        &[
            "lite.txt: lite_fetch_add(handle lite_handle, old ptr[out, int64], value int64, => lite_fetch_add(handle lite_handle, value int64, old ptr[out, int64],",
            "lite.txt: lite_unregister_application(port lite_port) => lite_unregister_application(port int64)",
            "lite.txt: lite_free(handle lite_handle) => lite_free(handle ptr[in, int64])",
            "lite_fetch_add: argument 2 is `value` in lite.txt but `old` in lite_syscalls.c",
            "lite_unregister_application: argument 1 `port` is `int64`, an 8-byte integer, \
                 in lite.txt but `unsigned int`, a 4-byte integer, in lite_syscalls.c",
            "lite_free: argument 1 `handle` is `ptr[in, int64]`, a pointer",
        ],
        // Struct drift.
        &[
            "lite.h: \t__u64 qos_throttled; => \t__u64 qos_throttled;\n\t__u64 revoked;",
            "lite.h: \t__u32 number;\n => \t__u64 number;\n",
            "lite.txt: \tmax_size\tlen[buf, int64] => \tmaxsize\tlen[buf, int64]",
            "struct lite_stats: lite.txt has 15 field(s) (lmrs, ",
            "lite.h has 16 (lmrs, ",
            "struct lite_lock: field 2 `number` is `lite_lock_number`, a 4-byte integer, \
                 in lite.txt but `__u64`, an 8-byte integer, in lite.h",
            "struct lite_receive: field 2 is `maxsize` in lite.txt but `max_size` in lite.h",
        ],
        // An undescribed header struct.
        &[
            "lite.h: #endif /* _UAPI_LINUX_LITE_H */ => struct lite_new {\n\t__u64 a, b;\n};\n#endif /* _UAPI_LINUX_LITE_H */",
            "struct lite_new: lite.h defines it but lite.txt does not describe it",
        ],
        // Constant drift.
        &[
            "lite.h: (256u << 10) => (128u << 10)",
            "lite.txt.const: LITE_MAX_PORTS = 64\n =>",
            "lite.txt.const:  => LITE_GONE = 1\n",
            "LITE_MAX_MESSAGE_SIZE: 262144 in lite.txt.const but 131072 in lite.h",
            "LITE_MAX_PORTS: lite.txt:",
            "uses it but lite.txt.const lacks it",
            "LITE_GONE: lite.txt.const has it but lite.h does not define it",
        ],
        // A number missing from the const file.
        &[
            "lite.txt.const: __NR_lite_fence = 568 => __NR_lite_fence = amd64:???",
            "lite.txt.const: __NR_lite_lock = 583\n =>",
            "__NR_lite_fence: lite.txt.const leaves it undefined for amd64",
            "__NR_lite_lock: lite.txt.const lacks it (583 in lite.h)",
        ],
    ];

    #[test]
    fn every_drift_is_reported() {
        for drift in DRIFTS {
            let (edits, expected): (Vec<&str>, _) = drift.iter().partition(|e| e.contains(" =>"));
            let problems = check_edited(|r| {
                for edit in edits {
                    let (file, rest) = edit.split_once(": ").expect("file: from => to");
                    let (from, to) = rest.split_once(" =>").expect("from => to");
                    let to = to.strip_prefix(' ').unwrap_or(to);
                    let text = r.get_mut(file).unwrap_or_else(|| panic!("no file {file}"));
                    if from.is_empty() {
                        text.push_str(to);
                    } else {
                        assert!(text.contains(from), "no {from:?} to edit");
                        *text = text.replace(from, to);
                    }
                }
            });
            for needle in expected {
                assert_reported(&problems, needle);
            }
        }
    }

    #[test]
    fn syzlang_types_have_their_widths() {
        let mut syz = Syzlang::default();
        let text = |(name, ty): (&str, &str)| (name.to_string(), ty.to_string());
        let types = [("h", "int64"), ("sub", "h"), ("p", "flags[ps, int32]")];
        syz.underlying = BTreeMap::from(types.map(text));
        let w = |t: &str| syz.width(t, 0);
        assert_eq!(w("int16be"), Width::Bytes(2));
        assert_eq!(w("int32[0:256]"), Width::Bytes(4));
        assert_eq!(w("bool8"), Width::Bytes(1));
        assert_eq!(w("intptr"), Width::Bytes(8));
        assert_eq!(w("sub"), Width::Bytes(8));
        assert_eq!(w("p"), Width::Bytes(4));
        assert_eq!(w("len[buf, int16]"), Width::Bytes(2));
        assert_eq!(w("len[buf]"), Width::Register);
        assert_eq!(w("const[X]"), Width::Register);
        assert_eq!(w("ptr[in, array[int8]]"), Width::Pointer);
        assert_eq!(w("buffer[out]"), Width::Pointer);
        assert_eq!(w("vma"), Width::Pointer);
        assert_eq!(w("array[int8, 16]"), Width::Unknown);
        assert_eq!(w("int64:20"), Width::Unknown);
    }

    #[test]
    fn c_declarations_are_split_and_header_and_const_file_values_read() {
        let split = |d: &str| split_c_decl(d).unwrap();
        assert_eq!(
            split("const char *cm_ip"),
            ("const char *".into(), "cm_ip".into())
        );
        assert_eq!(split("__u64 handle"), ("__u64".into(), "handle".into()));
        assert_eq!(split("__u8 name[16]"), ("__u8 [16]".into(), "name".into()));
        assert_eq!(split_c_decl("handle"), None);
        assert_eq!(c_width("const struct lite_lock *"), Width::Pointer);
        assert_eq!(c_width("unsigned int"), Width::Bytes(4));
        assert_eq!(c_width("u64"), Width::Bytes(8));
        assert_eq!(c_width("__u8 [16]"), Width::Unknown);
        // The header's values.
        assert_eq!(eval_c("548"), Some(548));
        assert_eq!(eval_c("0x80000000u"), Some(0x8000_0000));
        assert_eq!(eval_c("0x10ull"), Some(16));
        assert_eq!(eval_c("(256u << 10)"), Some(262_144));
        assert_eq!(eval_c("(1ull << 40)"), Some(1 << 40));
        assert_eq!(eval_c("((port) | ((priority) << 16))"), None);
        assert_eq!(eval_c(""), None);
        // The const file is read for amd64.
        let text = "# comment\narches = 386, amd64\nA = 1\nB = 2, amd64:3\nC = 386:4\nD = amd64:???\nE = 0x10\n";
        let file = parse_consts(text).unwrap();
        let values = [("A", Some(1)), ("B", Some(3)), ("D", None), ("E", Some(16))];
        let values = values.map(|(k, v)| (k.to_string(), v));
        assert_eq!(file, BTreeMap::from(values));
        assert!(parse_consts("A = 1\n").is_err());
        assert!(parse_consts("arches = arm64\nA = 1\n").is_err());
        assert!(parse_consts("arches = amd64\nA = x\n").is_err());
        assert!(parse_consts("arches = amd64\nA = 1\nA = 2\n").is_err());
    }

    #[test]
    fn syzlang_is_read_line_by_line() {
        let text = "include <uapi/linux/lite.h>\n\
            resource r[int32]: 0, R_SPECIAL\n\
            type t flags[fs, int64]\n\
            # call(not really)\n\
            call$v(a ptr[in, string[\"#x\"]], b flags[fs]) r (timeout[10])\n\
            s {\n\
            \tf1\tptr64[in, array[int8]]\t(in)\n\
            \tf2\tlen[f1, int32]\n\
            } [packed]\n\
            fs = F_ONE, 0x2, __NR_other\n\
            strs = \"A_B\", \"c\"\n";
        let mut problems = Vec::new();
        let syz = parse_syzlang(text, &mut problems);
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(syz.calls.len(), 1);
        let call = &syz.calls[0];
        assert_eq!((&call.name[..], &call.base[..]), ("call$v", "call"));
        let decl = |name: &str, ty: &str| (ty.to_string(), name.to_string());
        let args = [decl("a", "ptr[in, string[\"#x\"]]"), decl("b", "flags[fs]")];
        assert_eq!(call.args, args);
        let fields = [
            decl("f1", "ptr64[in, array[int8]]"),
            decl("f2", "len[f1, int32]"),
        ];
        assert_eq!(syz.structs["s"], fields);
        assert_eq!(syz.underlying["r"], "int32");
        assert_eq!(syz.underlying["t"], "flags[fs, int64]");
        let used: Vec<&str> = syz.consts_used.keys().map(String::as_str).collect();
        assert_eq!(used, ["F_ONE", "R_SPECIAL", "__NR_other"]);
        // Unreadable lines are reported.
        let mut problems = Vec::new();
        parse_syzlang("call(a ptr[in, int8]\nwhat is this\ns {\n", &mut problems);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(problems[0].contains("lite.txt:1: call: unclosed `(`"));
        assert!(problems[1].contains("lite.txt:2: cannot read"));
        assert!(problems[2].contains("not closed"));
    }
}
