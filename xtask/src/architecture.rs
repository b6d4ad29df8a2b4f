//! Architecture rules for LITE's internal unit (`rust-lite/internal/`),
//! checked on its sources.
//!
//! Two rules keep the kernel side reviewable: the internal unit is safe Rust
//! (everything `unsafe` lives in the thin bindings below it), and its files
//! depend on each other without cycles, so each one can be read, tested and
//! changed knowing only the files beneath it.
//!
//! The checks read the sources as Rust tokens: the kernel crate cannot be
//! built on the host, and its tokens' paths are enough for the way the unit
//! writes its imports.

// Only the tests below read the sources.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};

const INTERNAL_DIR: &str = "rust-lite/internal";
const INTERNAL_UNIT: [&str; 1] = ["internal"];

/// LITE-DSM, a unit on top of LITE's API.
const DSM_DIR: &str = "rust-lite/dsm";
const DSM_UNIT: [&str; 1] = ["dsm"];

/// Makes the compiler enforce the no-`unsafe` rule too.
const DENY_UNSAFE: &str = "#![deny(unsafe_code)]";

/// Below the directory its sources were read from, with `/` separators.
pub(crate) type FileName = String;

const CRATE_ROOT: &str = "lite_main.rs";

/// For each file, the other files it uses items from, each with the first
/// line that uses it.
pub(crate) type Graph = BTreeMap<FileName, BTreeMap<FileName, usize>>;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

/// Comments and literals left out; a macro's `$crate` and `::` are one
/// token each, a group's delimiters included.
fn tokens(source: &str) -> Vec<Token> {
    let stream: TokenStream = source
        .parse()
        .unwrap_or_else(|err| panic!("cannot read the source as Rust tokens: {err}"));
    let mut found = Vec::new();
    flatten(stream, &mut found);
    found
}

/// An invisible group has none.
fn push_delimiter(found: &mut Vec<Token>, text: &str, span: Span) {
    if !text.is_empty() {
        let (text, line) = (text.into(), span.start().line);
        found.push(Token { text, line });
    }
}

fn flatten(stream: TokenStream, found: &mut Vec<Token>) {
    let mut trees = stream.into_iter().peekable();
    while let Some(tree) = trees.next() {
        let line = tree.span().start().line;
        let text = match tree {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                push_delimiter(found, open, group.span_open());
                flatten(group.stream(), found);
                push_delimiter(found, close, group.span_close());
                continue;
            }
            TokenTree::Literal(_) => continue,
            TokenTree::Ident(ident) => ident.to_string(),
            TokenTree::Punct(punct) => {
                let joined = |next: &Option<&TokenTree>| match (punct.as_char(), next) {
                    ('$', Some(TokenTree::Ident(ident))) => Some(format!("${ident}")),
                    (':', Some(TokenTree::Punct(colon)))
                        if colon.as_char() == ':' && punct.spacing() == Spacing::Joint =>
                    {
                        Some("::".to_string())
                    }
                    _ => None,
                };
                match joined(&trees.peek()) {
                    Some(text) => {
                        trees.next();
                        text
                    }
                    None => punct.as_char().to_string(),
                }
            }
        };
        found.push(Token { text, line });
    }
}

fn is_identifier(token: &str) -> bool {
    let name = token.strip_prefix('$').unwrap_or(token);
    name.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Every unsafe block, function, impl, trait and extern block needs the
/// keyword; comments, literals and the `unsafe_code` lint do not count.
fn unsafe_lines(source: &str) -> Vec<usize> {
    tokens(source)
        .iter()
        .filter(|t| t.text == "unsafe")
        .map(|t| t.line)
        .collect()
}

/// A path in a file that may name a module of the internal unit: it starts
/// at `crate::internal`, `$crate::internal`, `super` or `self`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    /// The path's segments as written (`super`, `memory`, `lmr`, `Lmr`); a
    /// brace group yields one reference per leaf.
    segments: Vec<String>,
    /// The line of the path's last segment.
    line: usize,
}

/// The paths in `tokens` that start at `crate`, `$crate`, `super` or `self`,
/// in `use` declarations (brace groups expanded) or inline in code.
fn references(tokens: &[Token]) -> Vec<Reference> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        if starts_relative_path(tokens, at) {
            at = read_use_tree(tokens, at, &[], &mut found);
        } else {
            at += 1;
        }
    }
    found
}

/// Not in the middle of a longer path.
fn starts_relative_path(tokens: &[Token], at: usize) -> bool {
    let text = |i: usize| tokens.get(i).map(|t| t.text.as_str());
    matches!(text(at), Some("crate" | "$crate" | "super" | "self"))
        && text(at + 1) == Some("::")
        && (at == 0 || text(at - 1) != Some("::"))
}

/// The index of the first token after the tree.
fn read_use_tree(
    tokens: &[Token],
    mut at: usize,
    prefix: &[String],
    found: &mut Vec<Reference>,
) -> usize {
    let text = |i: usize| tokens.get(i).map(|t| t.text.as_str());
    let mut segments = prefix.to_vec();
    loop {
        match text(at) {
            Some("{") => return read_use_group(tokens, at + 1, &segments, found),
            Some("*") => {
                let line = tokens[at].line;
                found.push(Reference { segments, line });
                return at + 1;
            }
            Some(name) if is_identifier(name) => {
                segments.push(name.to_owned());
                let line = tokens[at].line;
                at += 1;
                if text(at) == Some("::") {
                    at += 1;
                    continue;
                }
                if text(at) == Some("as") {
                    at += 2;
                }
                found.push(Reference { segments, line });
                return at;
            }
            _ => return at,
        }
    }
}

/// The index after its closing brace.
fn read_use_group(
    tokens: &[Token],
    mut at: usize,
    prefix: &[String],
    found: &mut Vec<Reference>,
) -> usize {
    while let Some(token) = tokens.get(at) {
        match token.text.as_str() {
            "}" => return at + 1,
            "," => at += 1,
            _ => {
                let after = read_use_tree(tokens, at, prefix, found);
                // Skip anything the tree reader does not understand rather
                // than stall on it.
                at = after.max(at + 1);
            }
        }
    }
    at
}

/// From the crate root: in the unit `[internal]`, `memory/mod.rs` is
/// `[internal, memory]`.
fn module_of(unit: &[&str], file: &str) -> Vec<String> {
    let mut module: Vec<String> = unit.iter().map(|&s| s.to_owned()).collect();
    if unit.is_empty() && file == CRATE_ROOT {
        return module;
    }
    module.extend(file.trim_end_matches(".rs").split('/').map(str::to_owned));
    if module.last().is_some_and(|last| last == "mod") {
        module.pop();
    }
    module
}

/// The path from the crate root that `segments`, written in the module
/// `here`, names; `None` if it climbs above the root or is not a path from
/// `crate` or the current module.
fn absolute_path(here: &[String], segments: &[String]) -> Option<Vec<String>> {
    let (first, rest) = segments.split_first()?;
    // `self` and `super` are read as the segments after them are.
    let (mut path, rest) = match first.as_str() {
        "crate" | "$crate" => (Vec::new(), rest),
        "self" | "super" => (here.to_vec(), segments),
        _ => return None,
    };
    for segment in rest {
        match segment.as_str() {
            "super" => {
                path.pop()?;
            }
            "self" => {}
            name => path.push(name.to_owned()),
        }
    }
    Some(path)
}

/// The deepest module's that `path` passes through: its item's file.
fn file_reached<'a>(modules: &'a Modules, path: &[String]) -> Option<&'a FileName> {
    let prefix = |len| modules.get(&path[..len]);
    (0..=path.len()).rev().find_map(prefix)
}

type Modules = BTreeMap<Vec<String>, FileName>;

/// The graph of which files use items from which other files, built from
/// their paths, for the files of the module `unit` (`[]` for the whole
/// crate). Declaring a submodule (`mod x;`) is not a use, and neither is a
/// file naming its own items; uses of modules outside `unit` are left out.
pub(crate) fn dependency_graph(sources: &BTreeMap<FileName, String>, unit: &[&str]) -> Graph {
    let modules: Modules = sources
        .keys()
        .map(|file| (module_of(unit, file), file.clone()))
        .collect();
    let mut graph = Graph::new();
    for (file, source) in sources {
        let here = module_of(unit, file);
        let uses = graph.entry(file.clone()).or_default();
        for reference in references(&tokens(source)) {
            let path = absolute_path(&here, &reference.segments);
            let target = path.and_then(|path| file_reached(&modules, &path));
            if let Some(target) = target.filter(|&target| target != file) {
                uses.entry(target.clone()).or_insert(reference.line);
            }
        }
    }
    graph
}

/// The files along it; the last one uses the first.
fn find_cycle(graph: &Graph) -> Option<Vec<FileName>> {
    let mut finished = BTreeSet::new();
    let mut path = Vec::new();
    graph
        .keys()
        .find_map(|file| cycle_from(graph, file, &mut path, &mut finished))
}

/// Depth-first; a file met again on `path` closes a cycle.
fn cycle_from<'a>(
    graph: &'a Graph,
    file: &'a FileName,
    path: &mut Vec<&'a FileName>,
    finished: &mut BTreeSet<&'a FileName>,
) -> Option<Vec<FileName>> {
    if finished.contains(file) {
        return None;
    }
    if let Some(start) = path.iter().position(|&f| f == file) {
        return Some(path[start..].iter().map(|&f| f.clone()).collect());
    }
    path.push(file);
    for used in graph.get(file).into_iter().flat_map(BTreeMap::keys) {
        if let Some(cycle) = cycle_from(graph, used, path, finished) {
            return Some(cycle);
        }
    }
    path.pop();
    finished.insert(file);
    None
}

fn describe_cycle(graph: &Graph, cycle: &[FileName]) -> String {
    let steps = cycle.iter().zip(cycle.iter().cycle().skip(1));
    steps
        .map(|(from, to)| {
            let line = graph[from][to];
            format!("  {INTERNAL_DIR}/{from}:{line} uses {INTERNAL_DIR}/{to}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::repo_root;

    /// The sources of the unit in `dir`, and one line per break of its
    /// safety rule: its `mod.rs` lacks [`DENY_UNSAFE`], or a file holds
    /// `unsafe` code.
    fn safe_unit(dir: &str) -> (BTreeMap<FileName, String>, Vec<String>) {
        let sources = crate::fsutil::read_rust_sources(&repo_root().join(dir));
        let sources = sources.unwrap_or_else(|err| panic!("the sources in {dir}: {err:#}"));
        let root = sources.get("mod.rs").map(|source| tokens(source));
        let root: String = root.into_iter().flatten().map(|t| t.text).collect();
        let mut found = Vec::new();
        if !root.contains(DENY_UNSAFE) {
            found.push(format!("  {dir}/mod.rs lacks {DENY_UNSAFE}"));
        }
        for (file, source) in &sources {
            for line in unsafe_lines(source) {
                let text = source.lines().nth(line - 1).unwrap_or("").trim();
                found.push(format!("  {dir}/{file}:{line}: unsafe code: {text}"));
            }
        }
        (sources, found)
    }

    /// The dependency graph of in-memory sources, each `file: text`.
    fn graph(files: &[&str]) -> Graph {
        let split = |file: &str| {
            let (name, text) = file.split_once(": ").expect("file: text");
            (name.to_owned(), text.to_owned())
        };
        let sources = files.iter().map(|file| split(file));
        dependency_graph(&sources.collect(), &INTERNAL_UNIT)
    }

    /// The files `file` uses in the graph of `files`.
    fn uses(files: &[&str], file: &str) -> Vec<FileName> {
        graph(files)[file].keys().cloned().collect()
    }

    /// `"a b"` as `["a", "b"]`.
    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn internal_unit_is_safe_denies_unsafe_and_has_no_cycles() {
        let (sources, found) = safe_unit(INTERNAL_DIR);
        let found = found.join("\n");
        assert!(found.is_empty(), "the internal unit is not safe:\n{found}");
        let graph = dependency_graph(&sources, &INTERNAL_UNIT);
        let cycle = find_cycle(&graph).map(|cycle| describe_cycle(&graph, &cycle));
        assert_eq!(cycle, None, "import cycle in the internal unit");
    }

    /// LITE-DSM is built on LITE's kernel API: it holds no `unsafe` code
    /// and reaches LITE only through `crate::api`, never its internals or
    /// its verbs.
    #[test]
    fn dsm_unit_is_safe_and_uses_only_lite_s_api() {
        let (sources, mut found) = safe_unit(DSM_DIR);
        for (file, source) in &sources {
            let here = module_of(&DSM_UNIT, file);
            for reference in references(&tokens(source)) {
                let path = absolute_path(&here, &reference.segments).unwrap_or_default();
                if matches!(path.first().map(String::as_str), Some("internal" | "verbs")) {
                    let (line, path) = (reference.line, path.join("::"));
                    found.push(format!("  {DSM_DIR}/{file}:{line}: crate::{path}"));
                }
            }
        }
        let found = found.join("\n");
        assert!(
            found.is_empty(),
            "the DSM unit is not safe or goes around LITE's API:\n{found}"
        );
    }

    #[test]
    fn tokens_leave_out_comments_and_literals_and_find_unsafe_code_and_paths() {
        let source =
            "a // x\n/* b /* nested */ c\n*/ \"s // t\" 'q' '\\'' r#\"u\"# d: &'static str\n";
        // Each token `text@line`.
        let found = tokens(source).into_iter();
        let found: Vec<String> = found.map(|t| format!("{}@{}", t.text, t.line)).collect();
        assert_eq!(found.join(" "), "a@1 d@3 :@3 &@3 '@3 static@3 str@3");
        let source = "#![deny(unsafe_code)]\n\
            /// Calling this is not `unsafe {`.\n\
            // unsafe fn old() {}\n\
            const S: &str = \"unsafe impl\";\n\
            fn f() { unsafe { g() } }\n\
            unsafe impl Send for T {}\n\
            pub unsafe extern \"C\" fn h() {}\n";
        assert_eq!(unsafe_lines(source), vec![5, 6, 7]);
        // Nested use groups yield every leaf.
        let code = "use super::{a::{b, c as d}, e::E, self};\nlet x = crate::internal::f::g();";
        // Each reference `path@line`.
        let found = references(&tokens(code)).into_iter();
        let found: Vec<String> = found
            .map(|r| format!("{}@{}", r.segments.join("::"), r.line))
            .collect();
        let expected =
            "super::a::b@1 super::a::c@1 super::e::E@1 super::self@1 crate::internal::f::g@2";
        assert_eq!(found.join(" "), expected);
    }

    #[test]
    fn paths_resolve_to_the_deepest_module_file_and_cycles_are_found() {
        let files = [
            "mod.rs: pub(crate) mod memory; pub(crate) mod rpc; pub(crate) mod sharing;",
            "memory/mod.rs: pub(crate) mod lmr; pub(crate) struct RemoteMemory;",
            "memory/lmr.rs: pub(crate) struct Lmr;",
            "rpc/mod.rs: mod wire; use self::wire::X;",
            "rpc/wire.rs: pub(crate) struct X;",
            "sharing/mod.rs: use super::memory::lmr::Lmr;\nfn f(m: super::memory::RemoteMemory) {}",
        ];
        let sharing = uses(&files, "sharing/mod.rs");
        assert_eq!(sharing, words("memory/lmr.rs memory/mod.rs"));
        assert_eq!(uses(&files, "rpc/mod.rs"), words("rpc/wire.rs"));
        assert_eq!(uses(&files, "mod.rs"), words(""));
        // Macro paths count; a file naming itself does not.
        let files = [
            "core/wire.rs: macro_rules! m { () => { $crate::internal::core::wire::Frame } }",
            "memory/wire.rs: fn f() -> $crate::internal::core::wire::Frame { todo!() }",
        ];
        assert_eq!(uses(&files, "core/wire.rs"), words(""));
        assert_eq!(uses(&files, "memory/wire.rs"), words("core/wire.rs"));
        // Absolute paths cover every start.
        let here = module_of(&INTERNAL_UNIT, "memory/lmr.rs");
        for (path, expected) in [
            ("self X", Some("internal memory lmr X")),
            ("super X", Some("internal memory X")),
            ("super super MAX_NODES", Some("internal MAX_NODES")),
            ("$crate internal core wire", Some("internal core wire")),
            ("crate verbs Device", Some("verbs Device")),
            ("super super super super x", None),
        ] {
            let absolute = absolute_path(&here, &words(path));
            assert_eq!(absolute, expected.map(words), "{path}");
        }
        assert_eq!(module_of(&[], CRATE_ROOT), words(""));
        assert_eq!(module_of(&[], "verbs/mod.rs"), words("verbs"));
        // Cycles are found without their lead-in nor child declarations.
        let two = [
            "a.rs: use super::b::B;\npub(crate) struct A;",
            "b.rs: pub(crate) struct B;\n\nfn f() { let _ = crate::internal::a::A; }",
        ];
        let child = "x/child.rs: use super::X;\npub(crate) struct Y;";
        let cases: [(&[&str], _); 4] = [
            (&two, Some("a.rs b.rs")),
            // Declaring a child is not using it ...
            (&["x/mod.rs: pub(crate) mod child;\npub(crate) struct X;", child], None),
            // ... but using a child that uses its parent is a cycle.
            (
                &["x/mod.rs: pub(crate) mod child;\npub(crate) use self::child::Y;\npub(crate) struct X;", child],
                Some("x/child.rs x/mod.rs"),
            ),
            (
                &[
                    "a.rs: use super::b::B;",
                    "b.rs: use super::c::C;",
                    "c.rs: use super::d::D;",
                    "d.rs: use super::b::B;",
                ],
                Some("b.rs c.rs d.rs"),
            ),
        ];
        for (files, expected) in cases {
            assert_eq!(find_cycle(&graph(files)), expected.map(words), "{files:?}");
        }
        let graph = graph(&two);
        assert_eq!(
            describe_cycle(&graph, &words("a.rs b.rs")),
            format!("  {INTERNAL_DIR}/a.rs:1 uses {INTERNAL_DIR}/b.rs\n  {INTERNAL_DIR}/b.rs:3 uses {INTERNAL_DIR}/a.rs")
        );
    }
}
