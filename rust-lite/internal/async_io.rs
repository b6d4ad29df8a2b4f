// SPDX-License-Identifier: GPL-2.0

//! Asynchronous transfers (`lite_rdma_write_async`, `lite_rdma_read_async`,
//! `lite_async_wait`, `lite_fence`).
//!
//! Submitting checks the handle, takes a use of the LMR (so it cannot be
//! revoked under the transfer), copies the data to write into kernel memory
//! and queues the transfer for LITE's I/O threads; the caller's buffer is not
//! referenced after the call returns. Read data lands in kernel memory and
//! is copied to the caller's buffer when the caller reaps the completion, in
//! its own context. An exiting process's queued transfers are cancelled and
//! running ones waited for, so nothing outlives it.

use core::ptr::NonNull;
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    uaccess::{UserPtr, UserSlice},
};

use super::{
    chunk::check_range,
    cluster::Cluster,
    lmr::OwnedLmrUse,
    op_stats::{OpKind, OpTimer},
    permission::Permission,
    process::Process,
    qos,
    transfer::{KernelSink, KernelSource},
    workers::Job,
};
use crate::errno;

/// Outstanding (unreaped) operations per process (`LITE_MAX_ASYNC_OPS`).
pub(crate) const MAX_ASYNC_OPS: usize = 64;

/// Largest asynchronous transfer (`LITE_MAX_ASYNC_SIZE`).
pub(crate) const MAX_ASYNC_SIZE: u64 = 16 << 20;

/// `lite_async_wait` flag: do not block.
pub(crate) const ASYNC_NOWAIT: u32 = 0x1;

/// A kernel caller's buffer for an asynchronous transfer.
///
/// # Invariants
///
/// `ptr` points to `len` bytes that are valid for reads and writes, and not
/// accessed by others, until the operation is reaped (for reads) or
/// submitted (for writes).
pub(crate) struct KernelBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The buffer is handed over to the operation by the contract of
// `KernelBuffer::new`; only the thread reaping the operation touches it.
unsafe impl Send for KernelBuffer {}
// SAFETY: No `&self` method accesses the bytes without `&mut` elsewhere.
unsafe impl Sync for KernelBuffer {}

impl KernelBuffer {
    /// Wraps `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// Unless `len` is 0, `ptr` must point to `len` bytes that stay valid
    /// and untouched by others until the operation using the buffer is
    /// reaped by [`Cluster::async_wait`] or [`Cluster::fence`] (a read), or
    /// until [`Cluster::submit_async`] returns (a write).
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Result<Self> {
        let ptr = match NonNull::new(ptr) {
            Some(ptr) => ptr,
            None if len == 0 => NonNull::dangling(),
            None => return Err(EFAULT),
        };
        // INVARIANT: Guaranteed by the caller.
        Ok(KernelBuffer { ptr, len })
    }

    fn read_into(&self, out: &mut [u8]) -> Result {
        if out.len() != self.len {
            return Err(EINVAL);
        }
        // SAFETY: `ptr` is valid for `len` reads (type invariant), and `out`
        // is a distinct Rust buffer of that length.
        unsafe { core::ptr::copy_nonoverlapping(self.ptr.as_ptr(), out.as_mut_ptr(), self.len) };
        Ok(())
    }

    fn write_from(&self, data: &[u8]) -> Result {
        if data.len() != self.len {
            return Err(EINVAL);
        }
        // SAFETY: `ptr` is valid for `len` writes (type invariant), and
        // `data` is a distinct Rust buffer of that length.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr(), self.len) };
        Ok(())
    }
}

/// The caller's side of an asynchronous transfer.
pub(crate) enum AsyncBuffer {
    /// Memory of the calling process.
    User(UserPtr),
    /// Memory of a kernel caller.
    Kernel(KernelBuffer),
}

impl AsyncBuffer {
    /// Copies the caller's `out.len()` bytes into `out`.
    fn read_into(&self, out: &mut [u8]) -> Result {
        match self {
            AsyncBuffer::User(ptr) => UserSlice::new(*ptr, out.len()).reader().read_slice(out),
            AsyncBuffer::Kernel(buffer) => buffer.read_into(out),
        }
    }

    /// Delivers `data` to the caller.
    fn write_from(&self, data: &[u8]) -> Result {
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
struct Work {
    lmr: OwnedLmrUse,
    data: KVVec<u8>,
}

enum Phase {
    Queued(Work),
    Running,
    Done { result: Result, data: KVVec<u8> },
    Cancelled,
}

/// One asynchronous operation.
#[pin_data]
pub(crate) struct AsyncOp {
    kind: AsyncKind,
    /// Where read data goes when the operation is reaped.
    dest: Option<AsyncBuffer>,
    offset: u64,
    #[pin]
    phase: Mutex<Phase>,
    #[pin]
    finished: CondVar,
}

impl AsyncOp {
    /// Runs the operation, unless it was cancelled.
    fn execute(&self, cluster: &Cluster) {
        let Work { lmr, mut data } = {
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
            AsyncKind::Write => cluster.transfer_lmr(
                lmr.lmr(),
                super::transfer::Direction::Write(&mut KernelSource { rest: &data }),
                len,
                self.offset,
            ),
            AsyncKind::Read => cluster.transfer_lmr(
                lmr.lmr(),
                super::transfer::Direction::Read(&mut KernelSink { rest: &mut data }),
                len,
                self.offset,
            ),
        };
        // Release the LMR before reporting completion, so a revocation
        // waiting for it can go on.
        drop(lmr);
        *self.phase.lock() = Phase::Done { result, data };
        self.finished.notify_all();
    }

    /// Whether the operation has finished (or was cancelled).
    fn is_finished(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Done { .. } | Phase::Cancelled)
    }

    /// Waits until the operation has finished; `interruptible` lets a
    /// signal end the wait with `ERESTARTSYS`.
    fn wait_finished(&self, interruptible: bool) -> Result {
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
    fn cancel(&self) {
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
    fn reap(&self) -> Result {
        let phase = core::mem::replace(&mut *self.phase.lock(), Phase::Cancelled);
        match phase {
            Phase::Done { result, data } => {
                result?;
                match &self.dest {
                    Some(dest) => dest.write_from(&data),
                    None => Ok(()),
                }
            }
            _ => Err(errno::ECANCELED()),
        }
    }
}

/// An operation queued on the I/O threads.
pub(crate) struct IoJob(Arc<AsyncOp>);

impl Job for IoJob {
    fn run(self, cluster: &Cluster) {
        self.0.execute(cluster);
    }
}

impl Cluster {
    /// `lite_rdma_write_async` / `lite_rdma_read_async`: queues a transfer
    /// of `len` bytes at `offset` and returns its operation id.
    ///
    /// # Errors
    ///
    /// `EINVAL` bad size, range or priority; `EAGAIN` with
    /// [`MAX_ASYNC_OPS`] unreaped operations; handle errors; `EFAULT` if
    /// the data to write cannot be read.
    #[expect(clippy::too_many_arguments, reason = "mirrors the system call")]
    pub(crate) fn submit_async(
        &self,
        process: &Process,
        handle: u64,
        kind: AsyncKind,
        buf: AsyncBuffer,
        len: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> Result<u64> {
        let priority = process.default_priority.resolve(priority)?;
        if len > MAX_ASYNC_SIZE {
            return Err(EINVAL);
        }
        let needed = match kind {
            AsyncKind::Write => Permission::WRITE,
            AsyncKind::Read => Permission::READ,
        };
        let lmr = process.checked(handle, password, needed)?;
        check_range(lmr.size, offset, len)?;
        let size = usize::try_from(len).map_err(|_| EINVAL)?;
        let mut data = KVVec::from_elem(0u8, size, GFP_KERNEL)?;
        let dest = match kind {
            AsyncKind::Write => {
                buf.read_into(&mut data)?;
                None
            }
            AsyncKind::Read => Some(buf),
        };
        let work = Work {
            lmr: lmr.begin_owned()?,
            data,
        };
        let op = Arc::pin_init(
            pin_init!(AsyncOp {
                kind,
                dest,
                offset,
                phase <- new_mutex!(Phase::Queued(work), "lite:async_phase"),
                finished <- new_condvar!("lite:async_finished"),
            }),
            GFP_KERNEL,
        )?;
        let id = {
            let mut ops = process.ops.lock();
            if ops.len() >= MAX_ASYNC_OPS {
                return Err(EAGAIN);
            }
            ops.insert(op.clone())?
        };
        // Low-priority transfers wait before they are queued; the counters
        // count transfers when they start.
        let admission = qos::admit(priority);
        let timer = OpTimer::start(
            match kind {
                AsyncKind::Write => OpKind::WriteAsync,
                AsyncKind::Read => OpKind::ReadAsync,
            },
            priority,
        );
        self.io_jobs.submit(IoJob(op));
        timer.finish(admission, len, Ok(id))
    }

    /// `lite_async_wait`: reaps operation `id` of `process`.
    ///
    /// # Errors
    ///
    /// `EINVAL` unknown id or flags, `EAGAIN` not finished with
    /// [`ASYNC_NOWAIT`], `ERESTARTSYS` on a signal, or the operation's error.
    pub(crate) fn async_wait(&self, process: &Process, id: u64, flags: u32) -> Result {
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

/// Waits (interruptibly) until `op`, operation `id` of `process`, has
/// finished and reaps it. Returns its result, or `None` if another thread of
/// the process reaped it meanwhile.
fn reap_when_finished(process: &Process, id: u64, op: &AsyncOp) -> Result<Option<Result>> {
    op.wait_finished(true)?;
    if process.ops.lock().remove(id).is_none() {
        return Ok(None);
    }
    Ok(Some(op.reap()))
}
