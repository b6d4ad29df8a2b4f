// SPDX-License-Identifier: GPL-2.0

//! One asynchronous operation (a transfer or an RPC call), from submission
//! until its caller reaps it.

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

/// A request posted elsewhere whose reply the caller reaps later (an RPC
/// call): what an asynchronous operation needs of it.
pub(crate) trait PendingReply: Send + Sync {
    /// Whether the reply came, or the caller's wait for it is over.
    fn is_settled(&self) -> bool;
    /// Waits until [`PendingReply::is_settled`]; `ERESTARTSYS` on a signal
    /// (the request goes on).
    fn wait_settled(&self) -> Result;
    /// Takes the reply (once), or the request's error.
    fn take_reply(&self) -> Result<KVVec<u8>>;
}

/// Which way an operation moves data.
#[derive(Clone, Copy)]
pub(crate) enum AsyncKind {
    /// Into the LMR.
    Write,
    /// Out of the LMR, to the caller's buffer once reaped.
    Read,
    /// An RPC call, whose reply goes to the caller's buffer once reaped.
    Call,
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
    /// A transfer waiting for an I/O thread.
    Queued(Work),
    /// A transfer on an I/O thread.
    Running,
    /// A transfer that ended.
    Done {
        result: Result,
        data: KVVec<u8>,
        dest: Option<AsyncBuffer>,
    },
    /// A call whose request is being posted.
    Posting,
    /// A posted call; its reply goes to `dest`. Dropping `call` gives it
    /// up.
    Calling {
        call: Arc<dyn PendingReply>,
        dest: AsyncBuffer,
    },
    /// Reaped, or cancelled before it ran.
    Cancelled,
}

/// One asynchronous operation.
#[pin_data]
pub(crate) struct AsyncOp {
    kind: AsyncKind,
    offset: u64,
    /// Lock class `lite:async_phase`: see the lock order in [`crate::internal::core`].
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

    /// A call about to be posted; [`AsyncOp::posted`] or
    /// [`AsyncOp::not_posted`] tells how posting went.
    pub(crate) fn new_call() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(AsyncOp {
                kind: AsyncKind::Call,
                offset: 0,
                phase <- new_mutex!(Phase::Posting, "lite:async_phase"),
                finished <- new_condvar!("lite:async_finished"),
            }),
            GFP_KERNEL,
        )
    }

    /// The call was posted; its reply goes to `dest` when reaped.
    pub(crate) fn posted(&self, call: Arc<dyn PendingReply>, dest: AsyncBuffer) {
        *self.phase.lock() = Phase::Calling { call, dest };
        self.finished.notify_all();
    }

    /// Posting the call failed with `error`.
    pub(crate) fn not_posted(&self, error: Error) {
        *self.phase.lock() = Phase::Done {
            result: Err(error),
            data: KVVec::new(),
            dest: None,
        };
        self.finished.notify_all();
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
            // Calls are posted by their callers, never queued.
            AsyncKind::Call => Err(EINVAL),
        };
        // Release the LMR before reporting completion, so a revocation
        // waiting for it can go on.
        drop(lmr);
        *self.phase.lock() = Phase::Done { result, data, dest };
        self.finished.notify_all();
    }

    /// Whether the operation is an RPC call.
    pub(crate) fn is_call(&self) -> bool {
        matches!(self.kind, AsyncKind::Call)
    }

    /// Whether the operation has finished (or was cancelled); a call, once
    /// its answer came or its caller's wait for it is over.
    pub(crate) fn is_finished(&self) -> bool {
        let call = match &*self.phase.lock() {
            Phase::Done { .. } | Phase::Cancelled => return true,
            Phase::Calling { call, .. } => call.clone(),
            Phase::Queued(_) | Phase::Running | Phase::Posting => return false,
        };
        // Asked outside the phase's lock: the call has locks of its own.
        call.is_settled()
    }

    /// Waits until the operation has finished; `interruptible` lets a
    /// signal end the wait with `ERESTARTSYS`. A posted call is only ever
    /// waited for interruptibly (cancelling one abandons it instead).
    pub(crate) fn wait_finished(&self, interruptible: bool) -> Result {
        let mut phase = self.phase.lock();
        loop {
            match &*phase {
                Phase::Done { .. } | Phase::Cancelled => return Ok(()),
                Phase::Calling { call, .. } => {
                    if !interruptible {
                        return Ok(());
                    }
                    let call = call.clone();
                    drop(phase);
                    return call.wait_settled();
                }
                Phase::Queued(_) | Phase::Running | Phase::Posting => {}
            }
            if interruptible {
                if self.finished.wait_interruptible(&mut phase) {
                    return Err(ERESTARTSYS);
                }
            } else {
                self.finished.wait(&mut phase);
            }
        }
    }

    /// Cancels the operation if it has not started (a posted call is
    /// abandoned: its reply is discarded), else waits for it.
    pub(crate) fn cancel(&self) {
        {
            let mut phase = self.phase.lock();
            if let Phase::Queued(_) | Phase::Calling { .. } = *phase {
                let dropped = core::mem::replace(&mut *phase, Phase::Cancelled);
                drop(phase);
                // Frees the work, or abandons the call, outside the lock.
                drop(dropped);
                return;
            }
        }
        let _ = self.wait_finished(false);
    }

    /// The result of a finished operation: read data or a call's reply goes
    /// to the caller. Returns the reply's length for a call, else 0.
    pub(crate) fn reap(&self) -> Result<u64> {
        let phase = core::mem::replace(&mut *self.phase.lock(), Phase::Cancelled);
        match phase {
            Phase::Done { result, data, dest } => {
                result?;
                match dest {
                    Some(mut dest) => dest.write_from(&data).map(|()| 0),
                    None => Ok(0),
                }
            }
            Phase::Calling { call, mut dest } => {
                let reply = call.take_reply()?;
                dest.write_from(&reply)?;
                Ok(reply.len() as u64)
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
