//! `<linux/lite.h>` as user space and the kernel's header test see it:
//! compiled alone (twice, for its include guard) as C90 and as C++, and
//! read by the kernel's `headers_check.pl`, as `CONFIG_UAPI_HEADER_TEST`
//! does for every UAPI header.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::paths::repo_root;
use crate::process;

const UAPI_INCLUDE: &str = "lite-api-c/include/uapi";
const HEADER: &str = "linux/lite.h";
/// `linux-libc-dev`'s, which `<linux/lite.h>` includes.
const SYSTEM_INCLUDE: &str = "/usr/include";
/// The kernel's header test (C90), a recent C, and C++.
const COMPILERS: [(&str, &str); 3] = [
    ("cc", "-x c -std=c90 -Wall -Werror"),
    ("cc", "-x c -std=c11 -Wall -Wextra -pedantic -Werror"),
    ("c++", "-x c++ -std=c++11 -Wall -Wextra -pedantic -Werror"),
];

/// And `kernel_src`'s `usr/include/headers_check.pl`.
pub fn check(kernel_src: &Path) -> Result<()> {
    let include = repo_root().join(UAPI_INCLUDE);
    let header = include.join(HEADER);
    let mut problems = compile(&include, &header)?;
    let script = kernel_src.join("usr/include/headers_check.pl");
    let mut cmd = Command::new("perl");
    cmd.arg(&script).args([SYSTEM_INCLUDE, "x86"]).arg(&header);
    if let Some(problem) = process::complaint(&mut cmd)? {
        problems.push(format!("headers_check.pl: {problem}"));
    }
    crate::ui::fail_listing(&format!("{HEADER} fails the header checks"), &problems)
}

/// `header` included twice.
fn compile(include: &Path, header: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (compiler, flags) in COMPILERS {
        let mut cmd = Command::new(compiler);
        cmd.args(flags.split(' '))
            .args(["-fsyntax-only", "/dev/null", "-I"])
            .arg(include)
            .arg("-include")
            .arg(header)
            .arg("-include")
            .arg(header);
        if let Some(problem) = process::complaint(&mut cmd)? {
            problems.push(format!("{compiler} {flags}: {problem}"));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil::{self, TempDir};

    #[test]
    fn the_header_compiles_as_c90_c11_and_cxx() {
        let include = repo_root().join(UAPI_INCLUDE);
        let problems = compile(&include, &include.join(HEADER)).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_header_that_is_not_c90_or_lacks_a_guard_is_refused() {
        let dir = TempDir::new("uapi-test").unwrap();
        let bad = dir.path().join("bad.h");
        let text = "// not C90, and no include guard\nstruct s { int x; };\n";
        fsutil::write(&bad, text).unwrap();
        let problems = compile(dir.path(), &bad).unwrap();
        assert_eq!(problems.len(), COMPILERS.len(), "{problems:?}");
    }
}
