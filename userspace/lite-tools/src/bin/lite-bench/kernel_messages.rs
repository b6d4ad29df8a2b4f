//! Kernel-to-kernel message round trips through LITE's handlers, timed in
//! the kernel by the `lite_kmsg_bench` module (`userspace/kernel-bench`).
//! Both nodes load it, which registers an echo handler on each; the
//! measuring node then asks its module for round trips to the memory node
//! and reads their times back, so no system call is in what is timed.

use std::io::ErrorKind;
use std::process::Command;
use std::time::Instant;

use lite_tools::errno::describe_error;

use super::RPC_SERVER_WAIT;

/// The module.
const MODULE: &str = "lite_kmsg_bench";

/// Its file: write `NODE SIZE CALLS` to make the calls, read their times
/// (nanoseconds, one per line).
const ROUND_TRIPS: &str = "/sys/kernel/debug/lite_kmsg_bench/round_trips";

/// The largest message it times: a send-reply handler's largest reply
/// (`LITE_KMSG_MAX_REPLY`), as it echoes the request.
pub const MAX_SIZE: u64 = 4096;

/// Loads the module (a no-op if it is loaded).
pub fn load() -> Result<(), String> {
    let status = Command::new("modprobe")
        .arg(MODULE)
        .status()
        .map_err(|e| format!("modprobe {MODULE}: {e}"))?;
    if !status.success() {
        return Err(format!("modprobe {MODULE}: {status}"));
    }
    Ok(())
}

/// Waits until `node`'s module answers, as the memory node loads it while
/// this node starts measuring.
pub fn wait_for_handler(node: u32) -> Result<(), String> {
    let deadline = Instant::now() + RPC_SERVER_WAIT;
    loop {
        match round_trips(node, 1, 1) {
            Err((ErrorKind::ConnectionRefused, _)) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => return other.map(drop).map_err(|(_, e)| e),
        }
    }
}

/// Makes `calls` round trips of `size` bytes to `node`; their times in
/// microseconds, or the error's kind and description.
pub fn round_trips(node: u32, size: u64, calls: usize) -> Result<Vec<f64>, (ErrorKind, String)> {
    std::fs::write(ROUND_TRIPS, format!("{node} {size} {calls}")).map_err(|e| {
        let what = format!("{calls} kernel messages of {size} B to node {node}");
        (e.kind(), format!("{what}: {}", describe_error(&e)))
    })?;
    let text = std::fs::read_to_string(ROUND_TRIPS)
        .map_err(|e| (e.kind(), format!("{ROUND_TRIPS}: {}", describe_error(&e))))?;
    let times = text
        .lines()
        .map(|line| line.parse::<u64>().map(|ns| ns as f64 / 1000.0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (ErrorKind::InvalidData, format!("{ROUND_TRIPS}: {e}")))?;
    if times.len() != calls {
        let got = times.len();
        return Err((
            ErrorKind::InvalidData,
            format!("{ROUND_TRIPS}: {got} times for {calls} calls"),
        ));
    }
    Ok(times)
}
