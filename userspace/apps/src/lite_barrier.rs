//! `lite_dist_barrier` with a time limit.
//!
//! LITE's barrier wakes its waiters when a node leaves the cluster, but not
//! when a peer *process* exits: a rank that failed and exited would leave
//! the others waiting forever. Here the barrier runs on a thread of its
//! own and the caller waits at most a limit. After a timeout the barrier
//! is broken for good, since its thread may still be waiting in the kernel
//! and would take part in the next round.

use std::io;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

/// A LITE barrier of a fixed number of nodes whose waits are bounded.
#[derive(Debug)]
pub(crate) struct BoundedBarrier {
    /// One message per barrier to enter; dropping it ends the thread.
    enter: Sender<()>,
    /// The outcome of each barrier, in order.
    outcomes: Receiver<io::Result<()>>,
    /// Set after a timeout: the thread may still be inside a barrier.
    broken: bool,
}

impl BoundedBarrier {
    /// A barrier of nodes `1..=nodes`, with its thread.
    pub(crate) fn new(nodes: u32) -> io::Result<BoundedBarrier> {
        let (enter, entries) = mpsc::channel::<()>();
        let (report, outcomes) = mpsc::channel();
        thread::Builder::new()
            .name("lite-barrier".into())
            .spawn(move || {
                for () in entries {
                    if report.send(lite::dist_barrier(nodes)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(BoundedBarrier {
            enter,
            outcomes,
            broken: false,
        })
    }

    /// Enters the next barrier and waits for it for at most `limit`.
    ///
    /// # Errors
    ///
    /// `ETIMEDOUT` if the barrier did not complete in time, and for every
    /// call after that; LITE's error from the barrier otherwise.
    pub(crate) fn wait(&mut self, limit: Duration) -> io::Result<()> {
        let timed_out = || io::Error::from_raw_os_error(libc::ETIMEDOUT);
        if self.broken {
            return Err(timed_out());
        }
        let gone = |_| io::Error::from_raw_os_error(libc::EPIPE);
        self.enter.send(()).map_err(gone)?;
        match self.outcomes.recv_timeout(limit) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => {
                self.broken = true;
                Err(timed_out())
            }
            Err(RecvTimeoutError::Disconnected) => Err(io::Error::from_raw_os_error(libc::EPIPE)),
        }
    }
}
