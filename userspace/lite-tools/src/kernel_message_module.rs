//! The `lite_kmsg_bench` module (`userspace/kernel-bench`), a kernel
//! caller and handler of LITE's kernel messages. Every node that loads it
//! answers `liteapi_send_reply` calls with the request (or, with `hold`
//! set, holds them until it unloads); writing to its debugfs file makes
//! that node's kernel call another node's handler, so no system call is
//! in what `lite-bench` times, and the failure test has a kernel caller
//! that waits on a dying node.

use std::io::{Error, ErrorKind};

use crate::errno::describe_error;
use crate::guest_devices::run_tool;

const MODULE: &str = "lite_kmsg_bench";

/// Write `NODE SIZE CALLS` to make the calls, read their times
/// (nanoseconds, one per line).
const ROUND_TRIPS: &str = "/sys/kernel/debug/lite_kmsg_bench/round_trips";

/// Whether the handler holds every call until the module unloads.
const HOLD_PARAMETER: &str = "/sys/module/lite_kmsg_bench/parameters/hold";

/// The largest message it sends: a send-reply handler's largest reply
/// (`LITE_KMSG_MAX_REPLY`), as it echoes the request.
pub const MAX_SIZE: u64 = 4096;

/// Loads the module (if it is not loaded) and makes its handler answer
/// at once or, with `hold`, never while it is loaded.
pub fn load(hold: bool) -> Result<(), String> {
    run_tool("modprobe", &[MODULE])?;
    std::fs::write(HOLD_PARAMETER, if hold { "Y" } else { "N" })
        .map_err(|e| format!("{HOLD_PARAMETER}: {}", describe_error(&e)))
}

/// Unloads the module, which LITE's own module cannot be unloaded
/// before.
pub fn unload() -> Result<(), String> {
    run_tool("rmmod", &[MODULE])
}

/// Makes `calls` round trips of `size` bytes to `node`'s handler; their
/// times in microseconds. The error of a call is the kernel's errno.
pub fn round_trips(node: u32, size: u64, calls: usize) -> Result<Vec<f64>, Error> {
    std::fs::write(ROUND_TRIPS, format!("{node} {size} {calls}"))?;
    let text = std::fs::read_to_string(ROUND_TRIPS)?;
    let times = text
        .lines()
        .map(|line| line.parse::<u64>().map(|ns| ns as f64 / 1000.0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("{ROUND_TRIPS}: {e}")))?;
    if times.len() != calls {
        let got = times.len();
        let what = format!("{ROUND_TRIPS}: {got} times for {calls} calls");
        return Err(Error::new(ErrorKind::InvalidData, what));
    }
    Ok(times)
}
