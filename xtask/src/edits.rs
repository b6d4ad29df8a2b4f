//! Anchor-based text edits for kernel files.
//!
//! Edits are described by a line to find, not by line numbers or diffs, so
//! they survive unrelated changes between 6.12.y stable releases and fail
//! loudly (naming file and anchor) when the anchor is gone.

use anyhow::{bail, Result};

/// After the first line containing `anchor`, as whole lines (a missing
/// final newline is added).
pub fn insert_after(text: &str, file: &str, anchor: &str, insertion: &str) -> Result<String> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if line.contains(anchor) {
            return Ok(append(&text[..offset], insertion) + &text[offset..]);
        }
    }
    bail!("anchor `{anchor}` not found in {file}");
}

/// As whole lines.
pub fn append(text: &str, addition: &str) -> String {
    let mut out = String::with_capacity(text.len() + addition.len() + 2);
    out.push_str(text);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(addition);
    if !addition.is_empty() && !addition.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_after_the_first_line_with_the_anchor() {
        let insert = |text, anchor, line| insert_after(text, "helpers.c", anchor, line).unwrap();
        let text = "a\n#include \"kunit.c\"\nb\n#include \"kunit.c\"\n";
        let out = insert(text, "#include \"kunit.c\"", "#include \"lite.c\"");
        let expected = "a\n#include \"kunit.c\"\n#include \"lite.c\"\nb\n#include \"kunit.c\"\n";
        assert_eq!(out, expected);
        // The anchor may be part of a line, and the last line.
        let out = insert("x\nasmlinkage long sys_mseal(int);", "sys_mseal(", "y\n");
        assert_eq!(out, "x\nasmlinkage long sys_mseal(int);\ny\n");
    }

    #[test]
    fn appends_whole_lines() {
        assert_eq!(append("a\nb", "c"), "a\nb\nc\n");
        assert_eq!(append("a\n", "c\n"), "a\nc\n");
        assert_eq!(append("", "c"), "c\n");
    }
}
