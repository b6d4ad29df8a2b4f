//! LITE's system calls, derived from the C sources so they are written once.
//!
//! Numbers come from the `#define __NR_lite_*` lines of the UAPI header;
//! argument lists come from the `SYSCALL_DEFINEn(...)` invocations in
//! `lite_syscalls.c`. From those, this module generates the lines the
//! patch series adds to `syscall_64.tbl`, `include/linux/syscalls.h` and
//! `kernel/sys_ni.c`.

use std::collections::BTreeSet;

use anyhow::{bail, Result};

#[derive(Debug, PartialEq, Eq)]
pub struct Syscall {
    /// Name without the `sys_` prefix, e.g. `lite_join`.
    pub name: String,
    /// x86_64 system call number.
    pub number: u32,
    /// `(type, name)` pairs, e.g. `("const char __user *", "cm_ip")`.
    pub params: Params,
}

/// Matches the numbers of `uapi_header` with the definitions of
/// `syscalls_c`; both must name the same set of calls. Ordered as the header.
pub fn load(uapi_header: &str, syscalls_c: &str) -> Result<Vec<Syscall>> {
    let numbers = parse_numbers(uapi_header)?;
    let mut defs = parse_definitions(syscalls_c)?;
    let numbered: BTreeSet<&str> = numbers.iter().map(|(n, _)| n.as_str()).collect();
    let defined: BTreeSet<&str> = defs.iter().map(|(n, _)| n.as_str()).collect();
    let no_def: Vec<_> = numbered.difference(&defined).copied().collect();
    let no_nr: Vec<_> = defined.difference(&numbered).copied().collect();
    if !no_def.is_empty() || !no_nr.is_empty() {
        let mut msg = String::from("LITE system calls do not match:");
        if !no_def.is_empty() {
            msg += &format!("\n  __NR_* without a SYSCALL_DEFINE: {}", no_def.join(", "));
        }
        if !no_nr.is_empty() {
            msg += &format!("\n  SYSCALL_DEFINE without an __NR_*: {}", no_nr.join(", "));
        }
        bail!(msg);
    }
    let mut calls = Vec::new();
    for (name, number) in numbers {
        // Present by the set comparison above.
        let Some(pos) = defs.iter().position(|(n, _)| *n == name) else {
            continue;
        };
        let (_, params) = defs.swap_remove(pos);
        calls.push(Syscall {
            name,
            number,
            params,
        });
    }
    Ok(calls)
}

/// Each `#define NAME VALUE` line of C `text`: the line, NAME and VALUE.
pub fn defines(text: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix("#define")?;
        let rest = rest.strip_prefix(char::is_whitespace)?.trim_start();
        let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        Some((line, name, value.trim()))
    })
}

/// `(name, number)` from lines `#define __NR_lite_<name> <number>`.
pub fn parse_numbers(header: &str) -> Result<Vec<(String, u32)>> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for (line, name, value) in defines(header) {
        let Some(name) = name
            .strip_prefix("__NR_")
            .filter(|n| n.starts_with("lite_"))
        else {
            continue;
        };
        let Some(value) = value.split_whitespace().next() else {
            bail!("`{}` has no value", line.trim());
        };
        let Ok(number) = value.parse::<u32>() else {
            bail!("`{}`: the number must be a decimal literal", line.trim());
        };
        if let Some((dup, _)) = out.iter().find(|(n, nr)| n == name || *nr == number) {
            bail!("`{}` clashes with __NR_{dup}", line.trim());
        }
        out.push((name.to_string(), number));
    }
    if out.is_empty() {
        bail!("no `#define __NR_lite_*` lines found");
    }
    Ok(out)
}

/// `(type, name)` pairs.
pub type Params = Vec<(String, String)>;

/// `(name, params)` of every `SYSCALL_DEFINEn(name, type, arg, ...)`.
pub fn parse_definitions(source: &str) -> Result<Vec<(String, Params)>> {
    let code = code_only(source);
    let mut defs = Vec::new();
    let mut rest = code.as_str();
    while let Some(pos) = rest.find("SYSCALL_DEFINE") {
        rest = &rest[pos + "SYSCALL_DEFINE".len()..];
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let Ok(arity) = digits.parse::<usize>() else {
            continue;
        };
        let after = rest[digits.len()..].trim_start();
        let Some(args_start) = after.strip_prefix('(') else {
            continue;
        };
        let Some(close) = find_top(args_start, "", |c, depth| depth == 0 && c == ')') else {
            bail!("unterminated SYSCALL_DEFINE{arity}(");
        };
        let inner = &args_start[..close];
        let parts: Vec<String> = inner
            .split(',')
            .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let name = parts[0].clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("SYSCALL_DEFINE{arity}({inner}): bad system call name");
        }
        let args = &parts[1..];
        if args.len() != 2 * arity || args.iter().any(String::is_empty) {
            bail!(
                "SYSCALL_DEFINE{arity}({name}, ...) must list {arity} type/name pairs, found {}",
                args.len()
            );
        }
        let params = args
            .chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect();
        defs.push((name, params));
        rest = &args_start[close..];
    }
    Ok(defs)
}

/// The index of the first character of `text` outside the quotes in
/// `quotes` for which `stop(c, depth)` holds, `depth` being the nesting of
/// brackets and parentheses before it.
pub(crate) fn find_top(
    text: &str,
    quotes: &str,
    mut stop: impl FnMut(char, i32) -> bool,
) -> Option<usize> {
    let (mut depth, mut quote) = (0, None);
    for (i, c) in text.char_indices() {
        if quote.is_some() {
            quote = quote.filter(|&q| q != c);
        } else if quotes.contains(c) {
            quote = Some(c);
        } else if stop(c, depth) {
            return Some(i);
        } else if matches!(c, '[' | '(') {
            depth += 1;
        } else if matches!(c, ']' | ')') {
            depth -= 1;
        }
    }
    None
}

/// Blanks out C comments and the contents of string and character
/// literals, so that only code is searched (here for `SYSCALL_DEFINE`).
pub fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = '\0';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    // Keep line structure for readable error positions.
                    if c == '\n' {
                        out.push('\n');
                    }
                    prev = c;
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' | '\'' => {
                out.push(c);
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        out.push(d);
                        break;
                    }
                    out.push(if d == '\n' { '\n' } else { ' ' });
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// E.g. `548\t64\tlite_join\t\t\tsys_lite_join`.
pub fn table_line(call: &Syscall) -> String {
    format!("{}\t64\t{}\t\t\tsys_{}", call.number, call.name, call.name)
}

pub fn cond_syscall_line(call: &Syscall) -> String {
    format!("COND_SYSCALL({});", call.name)
}

/// The `include/linux/syscalls.h` prototype, wrapped at 80 columns in the
/// style of that file (continuation lines aligned after the parenthesis).
pub fn prototype(call: &Syscall) -> String {
    let head = format!("asmlinkage long sys_{}(", call.name);
    let params: Vec<String> = if call.params.is_empty() {
        vec!["void".to_string()]
    } else {
        call.params
            .iter()
            .map(|(ty, name)| {
                // `char *name`, not `char * name`, as checkpatch wants.
                if ty.ends_with('*') {
                    format!("{ty}{name}")
                } else {
                    format!("{ty} {name}")
                }
            })
            .collect()
    };
    let indent = continuation_indent(head.len());
    let mut lines = vec![head.clone()];
    for (i, param) in params.iter().enumerate() {
        let piece = if i + 1 == params.len() {
            format!("{param});")
        } else {
            format!("{param},")
        };
        let Some(current) = lines.last_mut() else {
            continue;
        };
        let fresh = current.ends_with('(') || current == &indent;
        let width = display_width(current) + usize::from(!fresh) + piece.len();
        if fresh || width <= 80 {
            if !fresh {
                current.push(' ');
            }
            current.push_str(&piece);
        } else {
            lines.push(format!("{indent}{piece}"));
        }
    }
    lines.join("\n")
}

fn continuation_indent(col: usize) -> String {
    format!("{}{}", "\t".repeat(col / 8), " ".repeat(col % 8))
}

/// Tabs expanded to multiples of 8.
fn display_width(line: &str) -> usize {
    line.chars().fold(0, |col, c| {
        if c == '\t' {
            (col / 8 + 1) * 8
        } else {
            col + 1
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "/* SPDX */\n#ifndef X\n#define _UAPI_LINUX_LITE_H\n\
        #define __NR_lite_join\t\t\t548\n#define __NR_lite_get_node_id\t\t549\n\
        #define __NR_lite_rdma_write\t\t552\n#define LITE_NODE_SPREAD 0\n";

    const SOURCE: &str =
        "/*\n * SYSCALL_DEFINE generates the wrappers; SYSCALL_DEFINE1(fake, int, x)\n */\n\
        #include <linux/syscalls.h>\n\n\
        SYSCALL_DEFINE3(lite_join, const char __user *, cm_ip, unsigned int, cm_port,\n\
        \t\tunsigned int, ib_port)\n{\n\treturn 0;\n}\n\n\
        SYSCALL_DEFINE0(lite_get_node_id)\n{\n\treturn f(\"SYSCALL_DEFINE2(\");\n}\n\n\
        // SYSCALL_DEFINE1(commented_out, int, x)\n\
        SYSCALL_DEFINE6(lite_rdma_write, u64, handle, const void __user *, buf,\n\
        \t\tu64, size, u64, offset, unsigned int, priority, u64, password)\n{\n}\n";

    fn decls(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let pair = |&(a, b): &(&str, &str)| (a.to_string(), b.to_string());
        pairs.iter().map(pair).collect()
    }

    #[test]
    fn parses_numbers_and_definitions_rejecting_duplicates_and_wrong_arities() {
        let nums = parse_numbers(HEADER).unwrap();
        let names: Vec<_> = nums.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lite_join", "lite_get_node_id", "lite_rdma_write"]);
        let numbers: Vec<u32> = nums.iter().map(|n| n.1).collect();
        assert_eq!(numbers, [548, 549, 552]);
        let bad = "#define __NR_lite_a 548\n#define __NR_lite_b 548\n";
        assert!(parse_numbers(bad).is_err());
        // Definitions span lines; comments and strings are skipped.
        let defs = parse_definitions(SOURCE).unwrap();
        let names: Vec<_> = defs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lite_join", "lite_get_node_id", "lite_rdma_write"]);
        let join = [
            ("const char __user *", "cm_ip"),
            ("unsigned int", "cm_port"),
            ("unsigned int", "ib_port"),
        ];
        assert_eq!(defs[0].1, decls(&join));
        assert!(defs[1].1.is_empty());
        // A wrong arity is refused.
        let err = parse_definitions("SYSCALL_DEFINE2(lite_x, int, a)\n{}\n").unwrap_err();
        assert!(err.to_string().contains("lite_x"), "{err}");
    }

    #[test]
    fn cross_checks_the_calls_and_generates_their_lines() {
        let calls = load(HEADER, SOURCE).unwrap();
        let (join, id) = (&calls[0], &calls[1]);
        assert_eq!(
            prototype(join),
            "asmlinkage long sys_lite_join(const char __user *cm_ip, unsigned int cm_port,\n\
             \t\t\t      unsigned int ib_port);"
        );
        assert_eq!(prototype(id), "asmlinkage long sys_lite_get_node_id(void);");
        let long = prototype(&calls[2]);
        for line in long.lines() {
            assert!(display_width(line) <= 80, "too long: {line:?}");
        }
        assert!(long.starts_with("asmlinkage long sys_lite_rdma_write(u64 handle,"));
        assert!(long.ends_with("u64 password);"));
        assert_eq!(table_line(join), "548\t64\tlite_join\t\t\tsys_lite_join");
        assert_eq!(cond_syscall_line(id), "COND_SYSCALL(lite_get_node_id);");
        // A short prototype stays on one line.
        let params = decls(&[("u64", "handle")]);
        let free = Syscall {
            name: "lite_free".into(),
            number: 554,
            params,
        };
        let one_line = "asmlinkage long sys_lite_free(u64 handle);";
        assert_eq!(prototype(&free), one_line);
        // Numbers and definitions are cross-checked.
        let header = format!("{HEADER}#define __NR_lite_free 554\n");
        let err = load(&header, SOURCE).unwrap_err().to_string();
        assert!(err.contains("without a SYSCALL_DEFINE: lite_free"), "{err}");
        let source = format!("{SOURCE}SYSCALL_DEFINE1(lite_extra, int, x)\n{{}}\n");
        let err = load(HEADER, &source).unwrap_err().to_string();
        assert!(err.contains("without an __NR_*: lite_extra"), "{err}");
    }
}
