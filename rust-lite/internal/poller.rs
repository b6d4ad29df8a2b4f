// SPDX-License-Identifier: GPL-2.0

//! Polling the shared receive completion queue.
//!
//! One kernel thread per node takes every received message from the
//! queue: it drains the queue, then arms it and sleeps until the device
//! reports the next completion (re-checking periodically as a safety net).
//! A thread waiting for an RPC reply or request may poll the queue itself
//! for a short while first ([`Cluster::spin_on_receives`]): the answer is
//! then handled without waking the polling thread and then the waiter,
//! which under emulation costs more than the round trip itself. Only one
//! thread handles completions at a time, so they are handled in order.

use core::sync::atomic::Ordering;
use kernel::{c_str, prelude::*, sync::Arc, time::Ktime};

use super::cluster::Cluster;
use crate::{
    sys::{kthread, sched, wait::Sleep},
    verbs::{WorkCompletion, POLL_BATCH},
};

/// Longest sleep between two looks at the queue.
const IDLE_WAKEUP_MS: u32 = 1000;

/// How long a waiting thread polls the queue itself before it sleeps:
/// about an RPC round trip under emulation.
const RECEIVE_SPIN_NS: i64 = 2_000_000;

/// Starts the polling thread of `cluster`.
pub(crate) fn start(cluster: Arc<Cluster>) -> Result {
    kthread::spawn(c_str!("lite_poll"), cluster, run)?;
    Ok(())
}

fn run(cluster: Arc<Cluster>) {
    loop {
        if cluster.poll_receives() > 0 {
            sched::cond_resched();
            continue;
        }
        // `arm` reports whether completions are waiting: then stop sleeping.
        // They may be left by a waiting thread that stopped polling.
        cluster
            .recv_cq
            .wait_until(Sleep::Idle, IDLE_WAKEUP_MS, || cluster.recv_cq.arm());
        sched::cond_resched();
    }
}

impl Cluster {
    /// Handles one batch of receive completions unless another thread is
    /// handling completions; returns how many it handled.
    pub(crate) fn poll_receives(&self) -> usize {
        if self
            .recv_polling
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return 0;
        }
        let mut wcs = [WorkCompletion::default(); POLL_BATCH];
        let n = self.recv_cq.poll(&mut wcs);
        for wc in &wcs[..n] {
            self.handle_receive(wc);
        }
        self.recv_polling.store(false, Ordering::Release);
        n
    }

    /// Polls the receive queue from the calling thread until `done` says
    /// so or [`RECEIVE_SPIN_NS`] passed; returns at once if another thread
    /// is already doing this, so at most one thread per node spins.
    pub(crate) fn spin_on_receives(&self, mut done: impl FnMut() -> bool) {
        if self.recv_spinners.fetch_add(1, Ordering::AcqRel) != 0 {
            self.recv_spinners.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let start = Ktime::ktime_get();
        while !done() && (Ktime::ktime_get() - start).to_ns() < RECEIVE_SPIN_NS {
            if self.poll_receives() == 0 {
                core::hint::spin_loop();
            }
            // Soft-RoCE works on this CPU too.
            sched::cond_resched();
        }
        self.recv_spinners.fetch_sub(1, Ordering::AcqRel);
    }
}
