// SPDX-License-Identifier: GPL-2.0

//! Kernel message handlers (`liteapi_reg_*_handler`) and the messages
//! other kernel code sends them (`liteapi_send_message` and its family).
//!
//! Each kind of handler has a port of its own among the ports above the
//! applications' ([`Kind::port`]). Registering a handler opens its port for
//! the kernel callers and starts a thread that receives from it and calls
//! the handler; senders make ordinary calls to that port. Kernel messages
//! therefore have everything calls have: ring flow control (a sender waits
//! for room, nothing is dropped), QoS admission, the node's quotas,
//! `EHOSTDOWN` when the peer goes, and the RPC counters. A message to a
//! node where no handler of its kind is registered fails with
//! `ECONNREFUSED`.
//!
//! Handlers run in process context, in their kind's thread, with none of
//! LITE's locks held: they may sleep, send LITE messages of their own and
//! answer later. Unregistering closes the port (queued messages fail with
//! `ECONNREFUSED`) and waits until the thread has ended, so no handler of
//! that kind runs once it returns.

use kernel::{
    c_str, new_condvar, new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, CondVar, Mutex},
};

use super::{
    node_id::NodeId,
    process::Process,
    rpc::{
        ring_protocol::{KERNEL_MESSAGE_PORTS, MAX_MESSAGE_SIZE, MAX_PORTS},
        Rpc,
    },
};
use crate::{
    errno,
    sys::{
        kthread,
        sched::{assert_no_locks_held, current_pid, might_sleep},
    },
};

pub(crate) mod pieces;

/// The largest answer of a `send_reply` handler (`LITE_KMSG_MAX_REPLY`):
/// the room a `liteapi_send_reply` caller's buffer must have.
pub(crate) const MAX_REPLY: usize = 4096;

/// The kinds of kernel message handlers, one handler each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One-way messages (`liteapi_send_message`).
    Send,
    /// Calls answered from a buffer LITE provides (`liteapi_send_reply`).
    SendReply,
    /// Calls answered from the handler's own buffer, at once or later
    /// (`liteapi_send_reply_opt`).
    SendReplyOpt,
    /// Calls of several pieces, answered from a buffer LITE provides
    /// (`liteapi_atomic_send`, layout in [`pieces`]).
    AtomicSend,
    /// One-way messages of several pieces (`liteapi_atomic_single_send`).
    AtomicSingleSend,
    /// Requests to the directories of LITE-DSM regions on this node.
    DsmDirectory,
    /// Invalidations of this node's copies of LITE-DSM pages.
    DsmCache,
}

impl Kind {
    /// Every kind, in the order of their ports: one for each of the ports
    /// above the applications'.
    pub(crate) const ALL: [Kind; KERNEL_MESSAGE_PORTS as usize] = [
        Kind::Send,
        Kind::SendReply,
        Kind::SendReplyOpt,
        Kind::AtomicSend,
        Kind::AtomicSingleSend,
        Kind::DsmDirectory,
        Kind::DsmCache,
    ];

    /// The kind's port: one of those above the applications'.
    pub(crate) const fn port(self) -> u32 {
        MAX_PORTS + self as u32
    }

    /// The name its port and thread go by.
    fn name(self) -> &'static CStr {
        match self {
            Kind::Send => c_str!("lite_kmsg_send"),
            Kind::SendReply => c_str!("lite_kmsg_reply"),
            Kind::SendReplyOpt => c_str!("lite_kmsg_opt"),
            Kind::AtomicSend => c_str!("lite_kmsg_atomic"),
            Kind::AtomicSingleSend => c_str!("lite_kmsg_single"),
            Kind::DsmDirectory => c_str!("lite_dsm_dir"),
            Kind::DsmCache => c_str!("lite_dsm_cache"),
        }
    }

    /// The index of its registry entry.
    const fn index(self) -> usize {
        self as usize
    }
}

/// What a handler does with the answer to a call.
pub(crate) trait Answer {
    /// Sends `reply` to the caller now.
    fn reply(&mut self, reply: &[u8]) -> Result;
}

/// A registered handler: the kernel C API wraps the callers' functions in
/// this.
pub(crate) trait Handler: Send + Sync {
    /// Handles `message` from node `from`. For kinds that answer, the
    /// handler either answers through `answer` before returning, or has
    /// taken the message's descriptor with
    /// [`KernelMessages::defer_answer`] and answers later; an error fails
    /// the caller with it.
    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result;

    /// The address of the handler's code, to tell which module holds it.
    fn code(&self) -> usize;
}

/// The thread of a kind and the call it is handling.
#[derive(Default)]
struct Thread {
    /// The thread's pid, once it runs.
    pid: Option<i32>,
    /// The descriptor of the call being handled, while the handler may
    /// still answer or take it: kept until then even if the kind is being
    /// unregistered, so that the call is answered or failed, never left.
    current: Option<u64>,
}

/// One kind's registry entry.
enum Entry {
    /// No handler.
    Idle,
    /// A handler and the thread calling it.
    Serving {
        handler: Arc<dyn Handler>,
        thread: Thread,
    },
    /// Unregistered; the thread has not ended yet.
    Stopping { thread: Thread },
}

impl Entry {
    /// The kind's thread, while it has one.
    fn thread_mut(&mut self) -> Option<&mut Thread> {
        match self {
            Entry::Idle => None,
            Entry::Serving { thread, .. } | Entry::Stopping { thread } => Some(thread),
        }
    }

    /// Unregisters the handler, keeping the thread's state until it ends;
    /// returns the handler, for the caller to drop unlocked.
    fn stop(&mut self) -> Option<Arc<dyn Handler>> {
        match core::mem::replace(self, Entry::Idle) {
            Entry::Serving { handler, thread } => {
                *self = Entry::Stopping { thread };
                Some(handler)
            }
            other => {
                *self = other;
                None
            }
        }
    }
}

/// The handlers of a node's kernel callers.
#[pin_data]
pub(crate) struct KernelMessages {
    rpc: Arc<Rpc>,
    process: Arc<Process>,
    /// Lock class `lite:kernel_handlers`: see the lock order in
    /// [`crate::internal::core`].
    #[pin]
    entries: Mutex<[Entry; KERNEL_MESSAGE_PORTS as usize]>,
    /// Signalled when a kind's thread ends.
    #[pin]
    ended: CondVar,
}

/// What a kind's thread runs with.
struct Serving {
    messages: Arc<KernelMessages>,
    kind: Kind,
}

impl KernelMessages {
    /// The handlers of the kernel callers `process`, receiving through
    /// `rpc`.
    pub(crate) fn new(rpc: Arc<Rpc>, process: Arc<Process>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(KernelMessages {
                rpc,
                process,
                entries <- new_mutex!(
                    [const { Entry::Idle }; KERNEL_MESSAGE_PORTS as usize],
                    "lite:kernel_handlers"
                ),
                ended <- new_condvar!("lite:kernel_handlers_ended"),
            }),
            GFP_KERNEL,
        )
    }

    /// Registers `handler` for `kind`, replacing the one registered, if
    /// any.
    ///
    /// # Errors
    ///
    /// `EBUSY` the previous handler of `kind` is still being unregistered;
    /// the errors of registering a port (quota) or starting a thread.
    pub(crate) fn register(self: &Arc<Self>, kind: Kind, handler: Arc<dyn Handler>) -> Result {
        {
            let mut entries = self.entries.lock();
            // PANIC: `Kind::index` is below the number of kinds.
            match &mut entries[kind.index()] {
                Entry::Serving { handler: old, .. } => {
                    let old = core::mem::replace(old, handler);
                    // Dropped with the lock released.
                    drop(entries);
                    drop(old);
                    return Ok(());
                }
                Entry::Stopping { .. } => return Err(EBUSY),
                Entry::Idle => {}
            }
        }
        let name = kind.name().as_bytes();
        self.rpc
            .register_port(&self.process, kind.port(), MAX_MESSAGE_SIZE, name)?;
        {
            let mut entries = self.entries.lock();
            // PANIC: as above.
            let entry = &mut entries[kind.index()];
            if !matches!(entry, Entry::Idle) {
                // Another registration got in while the port was opened.
                drop(entries);
                let _ = self.rpc.unregister_port(self.process.tgid, kind.port());
                return Err(EBUSY);
            }
            *entry = Entry::Serving {
                handler,
                thread: Thread::default(),
            };
        }
        let serving = Arc::new(
            Serving {
                messages: self.clone(),
                kind,
            },
            GFP_KERNEL,
        );
        let started = serving
            .map_err(Error::from)
            .and_then(|serving| kthread::spawn(kind.name(), serving, serve));
        if let Err(e) = started {
            self.set_entry(kind, Entry::Idle);
            let _ = self.rpc.unregister_port(self.process.tgid, kind.port());
            return Err(e);
        }
        Ok(())
    }

    /// Unregisters the handler of `kind` and waits until its thread has
    /// ended: no handler of `kind` runs once this returns.
    ///
    /// # Errors
    ///
    /// `ENOENT` no handler of `kind`, `EDEADLK` called from the handler
    /// itself, `EBUSY` being unregistered by another caller.
    pub(crate) fn unregister(&self, kind: Kind) -> Result {
        {
            let mut entries = self.entries.lock();
            // PANIC: `Kind::index` is below the number of kinds.
            let entry = &mut entries[kind.index()];
            match entry {
                Entry::Idle => return Err(ENOENT),
                Entry::Stopping { .. } => return Err(EBUSY),
                Entry::Serving { thread, .. } if thread.pid == Some(current_pid()) => {
                    return Err(errno::EDEADLK())
                }
                Entry::Serving { .. } => {}
            }
            let handler = entry.stop();
            // The handler is dropped with the lock released.
            drop(entries);
            drop(handler);
        }
        // Wakes the thread, which ends once it has handled what it took.
        let _ = self.rpc.unregister_port(self.process.tgid, kind.port());
        self.wait_ended(kind);
        Ok(())
    }

    /// Unregisters the handlers whose code `in_going_module` says is in a
    /// module that is going, waiting for those in flight.
    pub(crate) fn unregister_where(&self, in_going_module: impl Fn(usize) -> bool) {
        for kind in Kind::ALL {
            let going = {
                let entries = self.entries.lock();
                // PANIC: `Kind::index` is below the number of kinds.
                match &entries[kind.index()] {
                    Entry::Serving { handler, .. } => in_going_module(handler.code()),
                    _ => false,
                }
            };
            if going {
                let _ = self.unregister(kind);
            }
        }
    }

    /// Unregisters every handler (the node leaves the cluster).
    pub(crate) fn unregister_all(&self) {
        for kind in Kind::ALL {
            let _ = self.unregister(kind);
        }
    }

    /// Takes the descriptor of the call the calling handler is handling, to
    /// answer it later with `liteapi_reply_message`.
    ///
    /// # Errors
    ///
    /// `EINVAL` not called from a handler of a kind that answers, or the
    /// call's descriptor is taken already.
    pub(crate) fn defer_answer(&self) -> Result<u64> {
        let pid = current_pid();
        let mut entries = self.entries.lock();
        let thread = entries
            .iter_mut()
            .filter_map(Entry::thread_mut)
            .find(|thread| thread.pid == Some(pid))
            .ok_or(EINVAL)?;
        thread.current.take().ok_or(EINVAL)
    }

    fn set_entry(&self, kind: Kind, new: Entry) {
        // PANIC: `Kind::index` is below the number of kinds.
        let _old = core::mem::replace(&mut self.entries.lock()[kind.index()], new);
    }

    /// Waits until the thread of `kind`, which is stopping, has ended.
    fn wait_ended(&self, kind: Kind) {
        let mut entries = self.entries.lock();
        // PANIC: `Kind::index` is below the number of kinds.
        while matches!(entries[kind.index()], Entry::Stopping { .. }) {
            // Not interruptible: the handler in flight is local code that
            // must finish before its module may go.
            self.ended.wait(&mut entries);
        }
    }

    /// The handler of `kind` for the next message, noting the thread and
    /// the message's descriptor (0: one-way); `None` once unregistered.
    fn handler_for(&self, kind: Kind, descriptor: u64) -> Option<Arc<dyn Handler>> {
        let mut entries = self.entries.lock();
        // PANIC: `Kind::index` is below the number of kinds.
        match &mut entries[kind.index()] {
            Entry::Serving { handler, thread } => {
                thread.pid = Some(current_pid());
                thread.current = (descriptor != 0).then_some(descriptor);
                Some(handler.clone())
            }
            _ => None,
        }
    }

    /// Takes the descriptor of the call `kind`'s handler is handling, unless
    /// it was answered or deferred already.
    fn take_current(&self, kind: Kind) -> Option<u64> {
        let mut entries = self.entries.lock();
        // PANIC: `Kind::index` is below the number of kinds.
        entries[kind.index()]
            .thread_mut()
            .and_then(|thread| thread.current.take())
    }
}

/// Answers the call a kind's handler is handling.
struct CurrentCall<'a> {
    messages: &'a KernelMessages,
    kind: Kind,
}

impl Answer for CurrentCall<'_> {
    fn reply(&mut self, reply: &[u8]) -> Result {
        let descriptor = self.messages.take_current(self.kind).ok_or(EINVAL)?;
        let messages = self.messages;
        messages
            .rpc
            .reply(&messages.process, descriptor, reply.into())
    }
}

/// Body of a kind's thread: receives its messages and calls the handler,
/// until the kind is unregistered or the node leaves.
fn serve(serving: Arc<Serving>) {
    let Serving { messages, kind } = &*serving;
    let kind = *kind;
    if let Ok(mut buffer) = KVVec::from_elem(0u8, MAX_MESSAGE_SIZE as usize, GFP_KERNEL) {
        while let Some(()) = serve_one(messages, kind, &mut buffer) {}
    }
    // Closed already unless the thread ends for want of memory.
    let _ = messages
        .rpc
        .unregister_port(messages.process.tgid, kind.port());
    messages.set_entry(kind, Entry::Idle);
    messages.ended.notify_all();
}

/// Receives and handles one message; `None` once the kind's port is closed.
fn serve_one(messages: &KernelMessages, kind: Kind, buffer: &mut [u8]) -> Option<()> {
    let received = messages.rpc.receive_on_port(
        &messages.process,
        kind.port(),
        buffer.len() as u64,
        0,
        |data| {
            buffer
                .get_mut(..data.len())
                .ok_or(EINVAL)?
                .copy_from_slice(data);
            Ok(())
        },
    );
    let received = match received {
        Ok(received) => received,
        // Kernel threads take no signals: only a closed port ends the wait.
        Err(e) if e == EINTR => return Some(()),
        Err(_) => return None,
    };
    let Some(handler) = messages.handler_for(kind, received.descriptor) else {
        if received.descriptor != 0 {
            let _ = messages.rpc.fail(
                &messages.process,
                received.descriptor,
                errno::ECONNREFUSED(),
            );
        }
        return None;
    };
    // PANIC: `received.len` bytes were copied into `buffer` above, whose
    // length bounded them.
    let message = &mut buffer[..received.len];
    let mut answer = CurrentCall { messages, kind };
    // Handlers may sleep and take locks of their own: the thread holds
    // none, and a handler must not return holding one.
    might_sleep();
    assert_no_locks_held();
    let handled = handler.handle(message, received.from, &mut answer);
    assert_no_locks_held();
    drop(handler);
    // A call the handler neither answered nor kept for later fails at
    // once rather than at its caller's timeout.
    if let Some(descriptor) = messages.take_current(kind) {
        let error = handled.err().unwrap_or(errno::ECONNRESET());
        let _ = messages.rpc.fail(&messages.process, descriptor, error);
    }
    Some(())
}
