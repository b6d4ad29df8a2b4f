//! A small client of QEMU's machine protocol (QMP) on a unix socket, as
//! every cluster VM gets it (`-qmp unix:PATH,server=on,wait=off`): enough
//! to stop a VM, let it run again and ask whether it runs.
//!
//! QMP speaks one JSON object per line. On connection QEMU greets with
//! `{"QMP": {...}}`; the client answers `qmp_capabilities` and may then
//! `execute` commands, each answered by `{"return": ...}` or
//! `{"error": {"class": ..., "desc": ...}}`. Events (`{"event": ...}`)
//! can come at any time and are skipped. Every read and write is bounded
//! by the monitor's timeout: a VM whose QEMU hangs fails the command
//! instead of holding the harness.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::pause::Pausable;

const CONNECT_RETRY: Duration = Duration::from_millis(100);

/// Past the greeting.
pub struct Monitor {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// Stopping a VM stops its CPUs and its virtual clock, as a paused
/// machine; each command fails unless QEMU then reports the VM in the
/// state it should have left it in.
impl Pausable for Monitor {
    fn stop(&mut self) -> Result<()> {
        self.switch("stop", false)
    }

    fn cont(&mut self) -> Result<()> {
        self.switch("cont", true)
    }
}

impl Monitor {
    /// Connects to the socket at `path`, trying again while it is not
    /// there yet or refuses, for up to `timeout`; reads the greeting and
    /// negotiates capabilities. Every later read and write is bounded by
    /// `timeout` too.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Self> {
        let started = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(stream) => break stream,
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::NotFound | ErrorKind::ConnectionRefused
                    ) && started.elapsed() < timeout =>
                {
                    sleep(CONNECT_RETRY);
                }
                Err(err) => {
                    return Err(err)
                        .with_context(|| format!("cannot connect to QMP at {}", path.display()))
                }
            }
        };
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let writer = stream
            .try_clone()
            .with_context(|| format!("cannot use QMP at {}", path.display()))?;
        let mut monitor = Monitor {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = monitor.read_message()?;
        if greeting.get("QMP").is_none() {
            bail!(
                "QMP at {} greeted with {greeting} instead of {{\"QMP\": ...}}",
                path.display()
            );
        }
        monitor.execute("qmp_capabilities")?;
        Ok(monitor)
    }

    /// Runs `command`, then fails unless QEMU reports the VM `running` or
    /// not, as the command should have left it.
    fn switch(&mut self, command: &str, running: bool) -> Result<()> {
        self.execute(command)?;
        if self.running()? != running {
            let state = if running {
                "does not run"
            } else {
                "still runs"
            };
            bail!(
                "QMP at {}: the VM {state} after {command}",
                self.path.display()
            );
        }
        Ok(())
    }

    /// Whether the VM runs (`query-status`).
    pub fn running(&mut self) -> Result<bool> {
        let status = self.execute("query-status")?;
        match status.get("running").and_then(Value::as_bool) {
            Some(running) => Ok(running),
            None => bail!(
                "QMP at {}: query-status answered {status}",
                self.path.display()
            ),
        }
    }

    /// Runs `command` (without arguments); its `return` value.
    pub fn execute(&mut self, command: &str) -> Result<Value> {
        let mut line = json!({ "execute": command }).to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .and_then(|()| self.writer.flush())
            .with_context(|| format!("cannot send {command} to QMP at {}", self.path.display()))?;
        loop {
            let message = self
                .read_message()
                .with_context(|| format!("no answer to {command}"))?;
            if message.get("event").is_some() {
                continue;
            }
            if let Some(value) = message.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = message.get("error") {
                let field = |name: &str| error.get(name).and_then(Value::as_str).unwrap_or("?");
                bail!(
                    "QMP at {} refused {command}: {} ({})",
                    self.path.display(),
                    field("desc"),
                    field("class")
                );
            }
            bail!(
                "QMP at {} answered {command} with {message}",
                self.path.display()
            );
        }
    }

    /// The next message, one JSON object on a line of its own.
    fn read_message(&mut self) -> Result<Value> {
        let mut line = String::new();
        let read = self
            .reader
            .read_line(&mut line)
            .with_context(|| format!("cannot read QMP at {}", self.path.display()))?;
        if read == 0 {
            bail!("QMP at {} closed the connection", self.path.display());
        }
        serde_json::from_str(line.trim_end())
            .with_context(|| format!("QMP at {} sent {:?}", self.path.display(), line.trim_end()))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;
    use std::thread::{self, JoinHandle};

    use super::*;
    use crate::fsutil::TempDir;

    /// A fake QEMU on `socket`: greets, then answers each command it
    /// reads with the next entry of `script` (the lines to send back),
    /// keeps the connection open for `linger` more, and returns the
    /// commands it was sent.
    fn fake_qemu(
        socket: &Path,
        script: Vec<Vec<&'static str>>,
        linger: Duration,
    ) -> JoinHandle<Vec<String>> {
        let listener = UnixListener::bind(socket).expect("bind the fake QMP socket");
        thread::spawn(move || {
            let (stream, _) = listener.accept().expect("the client connects");
            let mut writer = stream.try_clone().expect("clone the stream");
            let mut reader = BufReader::new(stream);
            writer
                .write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": [\"oob\"]}}\r\n")
                .expect("greet");
            let mut received = Vec::new();
            for answers in script {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let request: Value = serde_json::from_str(&line).expect("a JSON command");
                let command = request["execute"].as_str().unwrap_or("?").to_string();
                for answer in answers {
                    writer
                        .write_all(format!("{answer}\r\n").as_bytes())
                        .expect("answer");
                }
                received.push(command);
            }
            sleep(linger);
            received
        })
    }

    /// A monitor connected, within `timeout`, to a fake QEMU playing
    /// `script` (see [`fake_qemu`]) in a directory of its own.
    fn connected(script: Vec<Vec<&'static str>>, linger_ms: u64, timeout_ms: u64) -> Connected {
        let dir = TempDir::new("xtask-qmp-test").expect("temporary directory");
        let socket = dir.path().join("node2.qmp");
        let qemu = fake_qemu(&socket, script, Duration::from_millis(linger_ms));
        let monitor = Monitor::connect(&socket, Duration::from_millis(timeout_ms));
        (dir, monitor.expect("connects"), qemu)
    }

    type Connected = (TempDir, Monitor, JoinHandle<Vec<String>>);

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(String::from).collect()
    }

    const OK: &str = r#"{"return": {}}"#;
    const RUNNING: &str =
        r#"{"return": {"status": "running", "singlestep": false, "running": true}}"#;
    const PAUSED: &str =
        r#"{"return": {"status": "paused", "singlestep": false, "running": false}}"#;
    const STOP_EVENT: &str = r#"{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "STOP"}"#;

    #[test]
    fn stops_and_continues_a_vm_skipping_events_or_fails_to() {
        let resume = r#"{"event": "RESUME"}"#;
        let script = vec![
            vec![OK],
            vec![STOP_EVENT, OK],
            vec![PAUSED],
            vec![resume, OK],
            vec![RUNNING],
        ];
        let (_dir, mut monitor, qemu) = connected(script, 0, 5000);
        monitor.stop().expect("stops");
        monitor.cont().expect("continues");
        drop(monitor);
        let sent = "qmp_capabilities stop query-status cont query-status";
        assert_eq!(qemu.join().expect("the fake QEMU"), words(sent));
        // A refused command, or a VM that still runs, is an error.
        let refused = r#"{"error": {"class": "GenericError", "desc": "Migration is active"}}"#;
        let script = vec![vec![OK], vec![refused], vec![OK], vec![RUNNING]];
        let (_dir, mut monitor, qemu) = connected(script, 0, 5000);
        for expected in [
            "refused stop: Migration is active (GenericError)",
            "the VM still runs after stop",
        ] {
            let err = monitor.stop().unwrap_err();
            assert!(err.to_string().ends_with(expected), "{err}");
        }
        drop(monitor);
        qemu.join().expect("the fake QEMU");
    }

    #[test]
    fn a_silent_or_closing_monitor_fails_within_the_timeout() {
        // Greets and negotiates, then reads the next command and never
        // answers it, for longer than the client waits.
        let (_dir, mut monitor, qemu) = connected(vec![vec![OK], vec![]], 1000, 300);
        let started = Instant::now();
        let silent = format!("{:#}", monitor.stop().unwrap_err());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(silent.contains("no answer to stop"), "{silent}");
        qemu.join().expect("the fake QEMU");
        // The fake QEMU is gone: the connection is closed.
        let closed = format!("{:#}", monitor.cont().unwrap_err());
        let gone = ["closed the connection", "cannot send cont"];
        assert!(gone.iter().any(|e| closed.contains(e)), "{closed}");
    }

    #[test]
    fn a_socket_that_never_appears_or_greets_otherwise_is_an_error() {
        let dir = TempDir::new("xtask-qmp-test").expect("temporary directory");
        let missing = dir.path().join("missing.qmp");
        let started = Instant::now();
        let err = Monitor::connect(&missing, Duration::from_millis(300)).err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let err = err.expect("nothing listens").to_string();
        assert!(err.starts_with("cannot connect to QMP at"), "{err}");

        let socket = dir.path().join("other.qmp");
        let listener = UnixListener::bind(&socket).expect("bind");
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("the client connects");
            stream.write_all(b"{\"hello\": 1}\n").expect("greet");
        });
        let err = Monitor::connect(&socket, Duration::from_secs(5)).err();
        let err = err.expect("not QMP").to_string();
        assert!(err.contains("instead of {\"QMP\": ...}"), "{err}");
        server.join().expect("the server");
    }
}
