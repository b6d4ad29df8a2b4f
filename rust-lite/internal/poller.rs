// SPDX-License-Identifier: GPL-2.0

//! The polling thread: one kernel thread per node takes every received
//! control message from the shared receive completion queue.
//!
//! It drains the queue, then arms it and sleeps until the device reports
//! the next completion (with a periodic wake-up as a safety net).

use kernel::{c_str, prelude::*, sync::Arc};

use super::cluster::Cluster;
use crate::{
    sys::{kthread, sched},
    verbs::{WorkCompletion, POLL_BATCH},
};

/// Longest sleep between two looks at the queue.
const IDLE_WAKEUP_MS: u32 = 1000;

/// Starts the polling thread of `cluster`.
pub(crate) fn start(cluster: Arc<Cluster>) -> Result {
    let task = kthread::spawn(c_str!("lite_poll"), cluster.clone(), run)?;
    cluster.recv_cq.set_waker(task);
    Ok(())
}

fn run(cluster: Arc<Cluster>) {
    let mut wcs = [WorkCompletion::default(); POLL_BATCH];
    loop {
        let n = cluster.recv_cq.poll(&mut wcs);
        for wc in &wcs[..n] {
            cluster.handle_receive(wc);
        }
        if n > 0 {
            sched::cond_resched();
            continue;
        }
        sched::prepare_to_sleep();
        if cluster.recv_cq.arm() {
            sched::cancel_sleep();
            continue;
        }
        sched::sleep_timeout_ms(IDLE_WAKEUP_MS);
    }
}
