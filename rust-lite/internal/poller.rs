// SPDX-License-Identifier: GPL-2.0

//! The polling thread: one kernel thread per node takes every received
//! control message from the shared receive completion queue.
//!
//! It drains the queue, then arms it and sleeps until the device reports
//! the next completion (re-checking periodically as a safety net), until
//! the membership ends.

use kernel::{c_str, prelude::*, sync::Arc};

use super::cluster::Cluster;
use crate::{
    sys::{kthread, sched, wait::Sleep},
    verbs::{WorkCompletion, POLL_BATCH},
};

/// Longest sleep between two looks at the queue.
const IDLE_WAKEUP_MS: u32 = 1000;

/// Starts the polling thread of `cluster`.
pub(crate) fn start(cluster: Arc<Cluster>) -> Result {
    kthread::spawn(c_str!("lite_poll"), cluster, run)?;
    Ok(())
}

fn run(cluster: Arc<Cluster>) {
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    loop {
        let recv_cq = cluster.core.recv_cq();
        let n = recv_cq.poll(&mut wcs);
        // PANIC: `poll` returns at most `POLL_BATCH`, the length of `wcs`.
        for wc in &wcs[..n] {
            cluster.handle_receive(wc);
        }
        if n > 0 {
            sched::cond_resched();
            continue;
        }
        if cluster.core.is_closed() {
            return;
        }
        // `arm` reports whether completions are waiting: then stop sleeping.
        recv_cq.wait_until(Sleep::Idle, IDLE_WAKEUP_MS, || {
            cluster.core.is_closed() || recv_cq.arm()
        });
    }
}
