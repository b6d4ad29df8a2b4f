//! Running external commands with useful error messages.
//!
//! Short commands are captured ([`output`], [`succeeds`]). Long ones
//! ([`run_logged`]) write everything to a log file while a progress line is
//! printed every [`PROGRESS_EVERY`], so that a 10-minute kernel build does
//! not flood the terminal but is visibly alive.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{fsutil, interrupt, ui};

pub const PROGRESS_EVERY: Duration = Duration::from_secs(20);

/// Of waiting loops, at their children and at Ctrl-C.
pub const POLL: Duration = Duration::from_millis(200);

/// A shell-like line for messages.
pub fn describe(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        line.push(' ');
        if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '\'') {
            line.push_str(&format!("'{}'", arg.replace('\'', r"'\''")));
        } else {
            line.push_str(&arg);
        }
    }
    line
}

/// On failure the error includes stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{}`", describe(cmd)))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "`{}` failed ({}): {}",
            describe(cmd),
            out.status,
            stderr.trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a checker: what it said on stdout and stderr, if it failed or said
/// anything at all (checkers that pass are silent).
pub fn complaint(cmd: &mut Command) -> Result<Option<String>> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{}`", describe(cmd)))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = said.trim();
    Ok((!out.status.success() || !said.is_empty()).then(|| said.to_string()))
}

pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Every [`PROGRESS_EVERY`] a line `label: elapsed, last: …` is printed,
/// where "last" is the most recent log line accepted by `interesting`.
/// Ctrl-C kills the command. On failure the error names the log file.
pub fn run_logged(
    cmd: &mut Command,
    log: &Path,
    label: &str,
    interesting: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open log {}", log.display()))?;
    writeln!(file, "$ {}", describe(cmd))?;
    let stderr = file.try_clone()?;
    // Its own process group, so that an interrupt stops the whole tree
    // (make and its compilers), not just the top process.
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot run `{}`", describe(cmd)))?;
    let start = Instant::now();
    let mut next_report = start + PROGRESS_EVERY;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if interrupt::interrupted() {
            kill_group(&mut child);
            bail!("interrupted while running `{}`", describe(cmd));
        }
        if Instant::now() >= next_report {
            next_report += PROGRESS_EVERY;
            let last = fsutil::read_tail(log, 64 * 1024)
                .ok()
                .and_then(|tail| {
                    tail.lines()
                        .rev()
                        .find(|l| interesting(l))
                        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                })
                .unwrap_or_default();
            let elapsed = ui::duration(start.elapsed());
            if last.is_empty() {
                ui::progress(&format!("{label}: {elapsed}"));
            } else {
                ui::progress(&format!("{label}: {elapsed}, last: {last}"));
            }
        }
        sleep(POLL);
    };
    if !status.success() {
        bail!(
            "`{}` failed ({status}); full log: {}",
            describe(cmd),
            log.display()
        );
    }
    Ok(())
}

/// Errors are irrelevant during cleanup.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn kill_group(child: &mut Child) {
    // std has no killpg; kill(1) with a negative pid is the portable way.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    kill(child);
}

/// The one that started us, so the same toolchain is used.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_commands_with_quoting() {
        let mut cmd = Command::new("make");
        cmd.args(["-C", "/src", "O=/b", "a b", ""]);
        assert_eq!(describe(&cmd), "make -C /src O=/b 'a b' ''");
    }
}
