// SPDX-License-Identifier: GPL-2.0

//! One asynchronous transfer, from submission until its caller reaps it.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    uaccess::{UserPtr, UserSlice},
};

use crate::{
    errno,
    internal::{
        core::Core,
        memory::{
            lmr::OwnedLmrUse,
            transfer::{transfer_lmr, Direction, KernelSink, KernelSource},
        },
        util::workers::Job,
    },
    verbs::KernelBuffer,
};

/// Where the data of an asynchronous read goes when the caller reaps it.
pub(crate) enum AsyncBuffer {
    /// Memory of the calling process.
    User(UserPtr),
    /// Memory of a kernel caller.
    Kernel(KernelBuffer),
}

impl AsyncBuffer {
    /// Delivers `data` to the caller.
    pub(crate) fn write_from(&mut self, data: &[u8]) -> Result {
        match self {
            AsyncBuffer::User(ptr) => UserSlice::new(*ptr, data.len()).writer().write_slice(data),
            AsyncBuffer::Kernel(buffer) => buffer.write_from(data),
        }
    }
}

/// Which way an operation moves data.
#[derive(Clone, Copy)]
pub(crate) enum AsyncKind {
    /// Into the LMR.
    Write,
    /// Out of the LMR, to the caller's buffer once reaped.
    Read,
}

/// What a queued operation needs to run.
pub(crate) struct Work {
    /// The LMR, in use until the operation ends.
    pub(crate) lmr: OwnedLmrUse,
    /// The bytes to write, or room for the bytes read.
    pub(crate) data: KVVec<u8>,
    /// Where read data goes when the operation is reaped.
    pub(crate) dest: Option<AsyncBuffer>,
}

/// Where an operation stands.
enum Phase {
    Queued(Work),
    Running,
    Done {
        result: Result,
        data: KVVec<u8>,
        dest: Option<AsyncBuffer>,
    },
    Cancelled,
}

/// One asynchronous operation.
#[pin_data]
pub(crate) struct AsyncOp {
    kind: AsyncKind,
    offset: u64,
    #[pin]
    phase: Mutex<Phase>,
    #[pin]
    finished: CondVar,
}

impl AsyncOp {
    /// A queued operation moving `work`'s bytes at `offset` of its LMR.
    pub(crate) fn new(kind: AsyncKind, offset: u64, work: Work) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(AsyncOp {
                kind,
                offset,
                phase <- new_mutex!(Phase::Queued(work), "lite:async_phase"),
                finished <- new_condvar!("lite:async_finished"),
            }),
            GFP_KERNEL,
        )
    }

    /// Runs the operation, unless it was cancelled.
    fn execute(&self, core: &Core) {
        let Work {
            lmr,
            mut data,
            dest,
        } = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Running) {
                Phase::Queued(work) => work,
                other => {
                    *phase = other;
                    return;
                }
            }
        };
        let len = data.len() as u64;
        let result = match self.kind {
            AsyncKind::Write => transfer_lmr(
                core,
                lmr.lmr(),
                Direction::Write(&mut KernelSource { rest: &data }),
                len,
                self.offset,
            ),
            AsyncKind::Read => transfer_lmr(
                core,
                lmr.lmr(),
                Direction::Read(&mut KernelSink { rest: &mut data }),
                len,
                self.offset,
            ),
        };
        // Release the LMR before reporting completion, so a revocation
        // waiting for it can go on.
        drop(lmr);
        *self.phase.lock() = Phase::Done { result, data, dest };
        self.finished.notify_all();
    }

    /// Whether the operation has finished (or was cancelled).
    pub(crate) fn is_finished(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Done { .. } | Phase::Cancelled)
    }

    /// Waits until the operation has finished; `interruptible` lets a
    /// signal end the wait with `ERESTARTSYS`.
    pub(crate) fn wait_finished(&self, interruptible: bool) -> Result {
        let mut phase = self.phase.lock();
        while !matches!(*phase, Phase::Done { .. } | Phase::Cancelled) {
            if interruptible {
                if self.finished.wait_interruptible(&mut phase) {
                    return Err(ERESTARTSYS);
                }
            } else {
                self.finished.wait(&mut phase);
            }
        }
        Ok(())
    }

    /// Cancels the operation if it has not started, else waits for it.
    pub(crate) fn cancel(&self) {
        {
            let mut phase = self.phase.lock();
            if let Phase::Queued(_) = *phase {
                let queued = core::mem::replace(&mut *phase, Phase::Cancelled);
                drop(phase);
                drop(queued);
                return;
            }
        }
        let _ = self.wait_finished(false);
    }

    /// The result of a finished operation; read data goes to the caller.
    pub(crate) fn reap(&self) -> Result {
        let phase = core::mem::replace(&mut *self.phase.lock(), Phase::Cancelled);
        match phase {
            Phase::Done { result, data, dest } => {
                result?;
                match dest {
                    Some(mut dest) => dest.write_from(&data),
                    None => Ok(()),
                }
            }
            _ => Err(errno::ECANCELED()),
        }
    }
}

/// An operation queued on the I/O threads.
pub(crate) struct IoJob(pub(crate) Arc<AsyncOp>);

impl Job for IoJob {
    type Context = Core;

    fn run(self, core: &Core) {
        self.0.execute(core);
    }
}
