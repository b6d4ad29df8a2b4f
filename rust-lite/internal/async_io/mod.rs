// SPDX-License-Identifier: GPL-2.0

//! Asynchronous operations (`lite_rdma_write_async`, `lite_rdma_read_async`,
//! `lite_send_reply_imm_async`, `lite_async_wait`, `lite_fence`).
//!
//! An asynchronous RPC call is posted by its caller like a blocking one and
//! reaped like a transfer: reaping copies the reply to the caller's buffer
//! and returns its length.
//!
//! Submitting checks the handle, takes a use of the LMR (so it cannot be
//! revoked under the transfer), copies the data to write into kernel memory
//! and queues the transfer for LITE's I/O threads; the caller's buffer is not
//! referenced after the call returns. Read data lands in kernel memory and
//! is copied to the caller's buffer when the caller reaps the completion, in
//! its own context. An exiting process's queued transfers are cancelled and
//! running ones waited for, so nothing outlives it.

pub(crate) mod op;

use kernel::{
    c_str,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

use self::op::{AsyncBuffer, AsyncKind, AsyncOp, IoJob, Work};
use super::{
    core::{subsystem::Subsystem, Core},
    memory::{
        chunk::check_range,
        handle::{LmrHandle, Password},
        permission::Permission,
    },
    process::Process,
    qos::{
        admission,
        op_stats::{OpKind, OpTimer},
    },
    rpc::{call_in_flight::CallInFlight, client::MAX_ASYNC_CALLS},
    util::workers::{self, Workers},
};

/// Outstanding (unreaped) operations per process (`LITE_MAX_ASYNC_OPS`).
pub(crate) const MAX_ASYNC_OPS: usize = 64;

/// Largest asynchronous transfer (`LITE_MAX_ASYNC_SIZE`).
pub(crate) const MAX_ASYNC_SIZE: u64 = 16 << 20;

/// `lite_async_wait` flag: do not block.
pub(crate) const ASYNC_NOWAIT: u32 = 0x1;

/// Threads running asynchronous transfers.
const IO_WORKERS: usize = 8;

/// Queued asynchronous transfers before submitters wait.
const IO_QUEUE: usize = 1024;

/// One `lite_rdma_write_async` or `lite_rdma_read_async`, as both the system
/// calls and the kernel C API describe it.
pub(crate) struct AsyncDataOp<'a> {
    /// The LMR.
    pub(crate) handle: LmrHandle,
    /// Which way the bytes go, and the caller's side of them.
    pub(crate) data: AsyncData<'a>,
    /// Bytes to move.
    pub(crate) len: u64,
    /// Offset in the LMR.
    pub(crate) offset: u64,
    /// Priority, or `LITE_PRIORITY_NONE` for the process's default.
    pub(crate) priority: u32,
    /// The LMR's password.
    pub(crate) password: Password,
}

/// The caller's side of an asynchronous transfer.
pub(crate) enum AsyncData<'a> {
    /// A write of the calling process's bytes at this address, copied in
    /// when the write is submitted.
    WriteFromUser(UserPtr),
    /// A write of a kernel caller's bytes, copied in when it is submitted.
    WriteFromKernel(&'a [u8]),
    /// A read whose bytes go here when the caller reaps it.
    ReadInto(AsyncBuffer),
}

/// Asynchronous I/O of a joined node: its queue of transfers and the
/// threads running them.
#[pin_data]
pub(crate) struct AsyncIo {
    core: Arc<Core>,
    #[pin]
    jobs: Workers<IoJob>,
}

impl AsyncIo {
    /// Asynchronous I/O over `core`, with its threads started.
    pub(crate) fn new(core: Arc<Core>) -> Result<Arc<Self>> {
        let jobs = Workers::new(IO_QUEUE)?;
        let io = Arc::pin_init(
            try_pin_init!(AsyncIo { core, jobs <- jobs }? Error),
            GFP_KERNEL,
        )?;
        workers::start(&io, c_str!("lite_io"), IO_WORKERS, |io| {
            io.jobs.serve(&io.core)
        })?;
        Ok(io)
    }

    /// `lite_rdma_write_async` / `lite_rdma_read_async`: queues a transfer
    /// of `len` bytes at `offset` and returns its operation id.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size, range or priority; `EAGAIN` with
    /// [`MAX_ASYNC_OPS`] unreaped operations; handle errors; `EFAULT` if
    /// the data to write cannot be read.
    pub(crate) fn submit_async(&self, process: &Process, op: AsyncDataOp<'_>) -> Result<u64> {
        let AsyncDataOp {
            handle,
            data: caller_data,
            len,
            offset,
            priority,
            password,
        } = op;
        let priority = process.default_priority.resolve(priority)?;
        if len > MAX_ASYNC_SIZE {
            return Err(EINVAL);
        }
        let (kind, needed, op_kind) = match caller_data {
            AsyncData::WriteFromUser(_) | AsyncData::WriteFromKernel(_) => {
                (AsyncKind::Write, Permission::WRITE, OpKind::WriteAsync)
            }
            AsyncData::ReadInto(_) => (AsyncKind::Read, Permission::READ, OpKind::ReadAsync),
        };
        let lmr = process.checked(handle, password, needed)?;
        check_range(lmr.size, offset, len)?;
        let size = usize::try_from(len).map_err(|_| EINVAL)?;
        let mut data = KVVec::from_elem(0u8, size, GFP_KERNEL)?;
        let dest = match caller_data {
            AsyncData::WriteFromUser(ptr) => {
                UserSlice::new(ptr, size).reader().read_slice(&mut data)?;
                None
            }
            AsyncData::WriteFromKernel(bytes) => {
                if bytes.len() != size {
                    return Err(EINVAL);
                }
                // PANIC: both are `size` bytes long (checked above).
                data.copy_from_slice(bytes);
                None
            }
            AsyncData::ReadInto(buf) => Some(buf),
        };
        let work = Work {
            lmr: lmr.begin_owned()?,
            data,
            dest,
        };
        let op = AsyncOp::new(kind, offset, work)?;
        let id = {
            let mut ops = process.ops.lock();
            if ops.len() >= MAX_ASYNC_OPS {
                return Err(EAGAIN);
            }
            ops.insert(op.clone())?
        };
        // Low-priority transfers wait before they are queued; the counters
        // count transfers when they start.
        let admission = admission::admit(priority);
        let timer = OpTimer::start(op_kind, priority);
        if let Err(IoJob(op)) = self.jobs.submit(IoJob(op)) {
            // The node is leaving: the operation never runs, and reaping it
            // reports that.
            op.cancel();
        }
        timer.finish(admission, len, Ok(id))
    }

    /// `lite_send_reply_imm_async`: posts a call with `post` (an
    /// [`Rpc::call_async`](super::rpc::Rpc::call_async)) and returns its
    /// operation id; reaping it
    /// delivers the reply to `dest` and returns the reply's length.
    ///
    /// # Errors
    ///
    /// `EAGAIN` with [`MAX_ASYNC_OPS`] unreaped operations or
    /// [`MAX_ASYNC_CALLS`] unreaped calls; the errors of posting the call.
    pub(crate) fn submit_call(
        &self,
        process: &Process,
        dest: AsyncBuffer,
        post: impl FnOnce() -> Result<CallInFlight>,
    ) -> Result<u64> {
        // The operation is in the table before the request goes out, so a
        // posted call always has an id to be reaped by.
        let op = AsyncOp::new_call()?;
        let id = {
            let mut ops = process.ops.lock();
            let calls = ops.values().filter(|op| op.is_call()).count();
            if ops.len() >= MAX_ASYNC_OPS || calls >= MAX_ASYNC_CALLS {
                return Err(EAGAIN);
            }
            ops.insert(op.clone())?
        };
        // Dropping a posted call that cannot be recorded gives it up.
        let posted = post().and_then(|call| Ok(Arc::new(call, GFP_KERNEL)?));
        match posted {
            Ok(call) => {
                op.posted(call, dest);
                Ok(id)
            }
            Err(e) => {
                op.not_posted(e);
                process.ops.lock().remove(id);
                Err(e)
            }
        }
    }

    /// Stops the I/O threads once they ran the transfers queued; later
    /// transfers are cancelled.
    pub(crate) fn close(&self) {
        self.jobs.close();
    }

    /// `lite_async_wait`: reaps operation `id` of `process`.
    ///
    /// # Errors
    ///
    /// `EINVAL` unknown id or flags, `EAGAIN` not finished with
    /// [`ASYNC_NOWAIT`], `ERESTARTSYS` on a signal, or the operation's error.
    /// Returns the reply's length for a call, else 0.
    pub(crate) fn async_wait(&self, process: &Process, id: u64, flags: u32) -> Result<u64> {
        if flags & !ASYNC_NOWAIT != 0 {
            return Err(EINVAL);
        }
        let op = process.ops.lock().get(id).cloned().ok_or(EINVAL)?;
        if flags & ASYNC_NOWAIT != 0 && !op.is_finished() {
            return Err(EAGAIN);
        }
        reap_when_finished(process, id, &op)?.ok_or(EINVAL)?
    }

    /// `lite_fence`: reaps every outstanding operation of `process`.
    ///
    /// Returns the first error among them.
    pub(crate) fn fence(&self, process: &Process) -> Result {
        let mut first_error = None;
        loop {
            let next = {
                let ops = process.ops.lock();
                ops.first_id()
                    .and_then(|id| Some((id, ops.get(id)?.clone())))
            };
            let Some((id, op)) = next else {
                break;
            };
            if let Some(Err(e)) = reap_when_finished(process, id, &op)? {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Cancels or waits for every operation of an exiting process.
    pub(crate) fn drain_async(&self, process: &Process) {
        loop {
            let next = {
                let mut ops = process.ops.lock();
                ops.first_id().and_then(|id| ops.remove(id))
            };
            match next {
                Some(op) => op.cancel(),
                None => break,
            }
        }
    }
}

/// Asynchronous transfers involve only this node's callers and the LMR's
/// chunks; a peer that goes away fails the transfers that reach it, and RPC
/// fails the calls waiting for its answers.
impl Subsystem for AsyncIo {}

/// Waits (interruptibly) until `op`, operation `id` of `process`, has
/// finished and reaps it. Returns its result, or `None` if another thread of
/// the process reaped it meanwhile.
fn reap_when_finished(process: &Process, id: u64, op: &AsyncOp) -> Result<Option<Result<u64>>> {
    op.wait_finished(true)?;
    if process.ops.lock().remove(id).is_none() {
        return Ok(None);
    }
    Ok(Some(op.reap()))
}
