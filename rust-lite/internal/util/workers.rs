// SPDX-License-Identifier: GPL-2.0

//! Kernel threads that run queued jobs.
//!
//! The polling thread must never block on work that may itself need the
//! polling thread (a reply it has to deliver), so requests from peers that
//! take time run here; so do asynchronous transfers of processes.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, CondVar, Mutex},
};

use super::ring::Ring;
use crate::sys::kthread;

/// Work a pool can run.
pub(crate) trait Job: Send + 'static {
    /// What the pool's jobs run against: the owner of the pool.
    type Context;

    /// Runs the job.
    fn run(self, context: &Self::Context);
}

/// The jobs waiting, and whether the pool still takes any.
struct Queue<J> {
    jobs: Ring<J>,
    /// Set by [`Workers::close`]: no job is taken any more, and the threads
    /// end once the queue is empty.
    closed: bool,
}

/// A queue of jobs and the threads that run them.
#[pin_data]
pub(crate) struct Workers<J> {
    /// Lock class `lite:jobs`: see the lock order in [`crate::internal::core`].
    #[pin]
    queue: Mutex<Queue<J>>,
    #[pin]
    queued: CondVar,
    #[pin]
    room: CondVar,
}

impl<J: Job> Workers<J> {
    /// A pool whose queue holds at most `capacity` jobs.
    pub(crate) fn new(capacity: usize) -> Result<impl PinInit<Self, Error>> {
        let jobs = Ring::new(capacity)?;
        Ok(try_pin_init!(Workers {
            queue <- new_mutex!(Queue { jobs, closed: false }, "lite:jobs"),
            queued <- new_condvar!("lite:jobs_queued"),
            room <- new_condvar!("lite:jobs_room"),
        }))
    }

    /// Queues `job`, waiting while the queue is full; gives it back if the
    /// pool is closed.
    pub(crate) fn submit(&self, job: J) -> Result<(), J> {
        let mut queue = self.queue.lock();
        let mut job = job;
        loop {
            if queue.closed {
                return Err(job);
            }
            match queue.jobs.push(job) {
                Ok(()) => break,
                Err(back) => {
                    job = back;
                    self.room.wait(&mut queue);
                }
            }
        }
        drop(queue);
        self.queued.notify_one();
        Ok(())
    }

    /// Queues `job` if there is room and the pool is open, or gives it back.
    pub(crate) fn try_submit(&self, job: J) -> Result<(), J> {
        {
            let mut queue = self.queue.lock();
            if queue.closed {
                return Err(job);
            }
            queue.jobs.push(job)?;
        }
        self.queued.notify_one();
        Ok(())
    }

    /// Takes no more jobs; the threads end once they ran the queued ones.
    pub(crate) fn close(&self) {
        self.queue.lock().closed = true;
        self.queued.notify_all();
        self.room.notify_all();
    }

    /// Body of a worker thread: runs jobs until the pool is closed and
    /// empty.
    pub(crate) fn serve(&self, context: &J::Context) {
        loop {
            let job = {
                let mut queue = self.queue.lock();
                loop {
                    if let Some(job) = queue.jobs.pop() {
                        break job;
                    }
                    if queue.closed {
                        return;
                    }
                    // Kernel threads get no signals; interruptible sleep
                    // keeps idle workers out of the hung-task detector.
                    let _ = self.queued.wait_interruptible(&mut queue);
                }
            };
            self.room.notify_one();
            job.run(context);
        }
    }
}

/// Starts `count` threads named `name` running `body(owner)`, where
/// `owner` holds the pool.
pub(crate) fn start<T: Send + Sync + 'static>(
    owner: &Arc<T>,
    name: &'static CStr,
    count: usize,
    body: fn(Arc<T>),
) -> Result {
    for _ in 0..count {
        kthread::spawn(name, owner.clone(), body)?;
    }
    Ok(())
}
