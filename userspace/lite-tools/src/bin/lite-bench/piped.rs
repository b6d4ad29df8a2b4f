//! A helper process talked to one line at a time over its standard input
//! and output: the native verbs baseline, the process curve's processes
//! and the isolation run's load processes.

use std::ffi::OsStr;
use std::fmt::Display;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};

/// A running helper process; its standard error is this program's.
pub(crate) struct Piped {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// What it is, in messages: `the baseline`, `a load process`.
    what: &'static str,
    /// Whether closing its input is enough to make it end soon, so that a
    /// process left running is waited for rather than killed.
    ends_when_closed: bool,
}

impl Piped {
    /// Starts `program` with `args`.
    pub(crate) fn spawn<I, S>(
        program: impl AsRef<OsStr>,
        args: I,
        what: &'static str,
        ends_when_closed: bool,
    ) -> Result<Piped, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {what}: {e}"))?;
        match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => Ok(Piped {
                child,
                stdin: Some(stdin),
                stdout: BufReader::new(stdout),
                what,
                ends_when_closed,
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{what} started without its pipes"))
            }
        }
    }

    /// Starts this program again as its helper process `subcommand`, with
    /// `args`.
    pub(crate) fn spawn_self(
        subcommand: &str,
        args: &[&dyn Display],
        what: &'static str,
        ends_when_closed: bool,
    ) -> Result<Piped, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let args = args.iter().map(ToString::to_string);
        let args = std::iter::once(subcommand.to_string()).chain(args);
        Piped::spawn(exe, args, what, ends_when_closed)
    }

    /// The next line it prints; `None` once it closed its output.
    pub(crate) fn line(&mut self) -> Result<Option<String>, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line.trim_end().to_string())),
            Err(e) => Err(format!("reading from {}: {e}", self.what)),
        }
    }

    /// The next line it prints, which must come.
    pub(crate) fn next_line(&mut self) -> Result<String, String> {
        self.line()?
            .ok_or_else(|| format!("{} ended without a word", self.what))
    }

    /// Reads the next line, which must be `word`.
    pub(crate) fn expect(&mut self, word: &str) -> Result<(), String> {
        match self.next_line()? {
            line if line == word => Ok(()),
            line => Err(format!("{}: {line}", self.what)),
        }
    }

    /// Writes `line` to its input.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), String> {
        let what = self.what;
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("the input of {what} is closed"))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to {what}: {e}"))
    }

    /// Closes its input, which tells it to end.
    pub(crate) fn close(&mut self) {
        self.stdin.take();
    }

    /// Waits for it to end.
    pub(crate) fn wait(&mut self) -> Result<ExitStatus, String> {
        self.child
            .wait()
            .map_err(|e| format!("waiting for {}: {e}", self.what))
    }

    /// Closes its input and waits for it, which must succeed.
    pub(crate) fn finish(&mut self) -> Result<(), String> {
        self.close();
        match self.wait()? {
            status if status.success() => Ok(()),
            status => Err(format!("{} ended with {status}", self.what)),
        }
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        // Only a failure leaves one running: one that would wait on for
        // a word that never comes is killed.
        self.close();
        if !self.ends_when_closed && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
