//! Ctrl-C and termination handling.
//!
//! The handler only records that a signal arrived. Every loop that waits on
//! child processes polls [`check`], so an interrupt unwinds through the
//! normal error path and the `Drop` guards (QEMU, cluster manager, network
//! namespace) clean up instead of the process dying on the spot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the SIGINT/SIGTERM/SIGHUP handler. Call once, early in `main`.
pub fn install() {
    // Without a handler the default action still ends the process, only
    // without cleanup, so failing to install one is worth a warning, not an abort.
    if let Err(err) = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            // A second Ctrl-C while cleanup runs: the user wants out now.
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: cleaning up (press Ctrl-C again to quit at once)");
    }) {
        eprintln!("warning: cannot install the Ctrl-C handler: {err}");
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub fn check() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

const TICK: Duration = Duration::from_millis(50);

/// Fails within [`TICK`] of a signal.
pub fn sleep_until(from: Instant, length: Duration) -> Result<()> {
    while from.elapsed() < length {
        check()?;
        sleep(TICK.min(length.saturating_sub(from.elapsed())));
    }
    Ok(())
}
