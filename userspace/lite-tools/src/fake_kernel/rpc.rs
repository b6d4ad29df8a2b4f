//! The model of LITE's RPC and messaging calls, following the "RPC and
//! messaging" part of the uapi header.
//!
//! Ports live per node; each holds one FIFO of messages in which the
//! messages from each client node are limited as the kernel's ring for
//! that (port, client node) is, so a sender to a full ring blocks, or gets
//! `-EAGAIN`, until a receiver makes room. A request's caller waits for its
//! call to be answered; a receiver gets a descriptor, private to its
//! process, that names the call.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::{
    LiteMulticast, LiteReceive, MAX_MESSAGE_SIZE, MAX_NODES, MAX_PORTS, MAX_PORT_NAME,
    PRIORITY_LOW, RECV_NONBLOCK, RPC_TIMEOUT_MS, SEND_NONBLOCK,
};

use super::{check_pointer, err, lock, refuse_if};
use crate::debugfs::quotas::Limit;

/// Messages per (port, client node) ring.
const RING_SLOTS: usize = 64;

/// A message larger than this still fits an empty ring.
const RING_BYTES: usize = 1 << 20;

/// How long a caller waits for a reply, and a sender for room in a ring.
const RPC_TIMEOUT: Duration = Duration::from_millis(RPC_TIMEOUT_MS as u64);

/// The kernel waits forever; the model gives up (`-ETIMEDOUT`) so that a
/// broken host test fails instead of hanging.
const RECEIVE_LIMIT: Duration = Duration::from_secs(120);

/// Who makes a call: one process on one node.
#[derive(Clone, Copy)]
pub(super) struct Caller {
    pub node: u32,
    pub nodes: u32,
    pub process: u64,
    /// A port is charged to this user's `rpc_ports` quota.
    pub uid: u32,
    pub drop_when_full: bool,
}

struct Message {
    from: u32,
    data: Vec<u8>,
    /// The call waiting for the reply; `None` for a one-way message.
    call: Option<u64>,
}

struct Port {
    owner: u64,
    /// Charged to this user's quota.
    uid: u32,
    max_size: u64,
    /// Tells a port apart from an earlier registration of the same number.
    generation: u64,
    queue: VecDeque<Message>,
    /// Receivers wait here for messages (or the port closing).
    arrived: Arc<Condvar>,
    /// Senders wait here for room in their ring (or the port closing).
    room: Arc<Condvar>,
}

impl Port {
    fn has_room(&self, node: u32, size: usize) -> bool {
        let (slots, bytes) = self
            .queue
            .iter()
            .filter(|m| m.from == node)
            .fold((0, 0), |(n, b), m| (n + 1, b + m.data.len()));
        slots == 0 || (slots < RING_SLOTS && bytes + size <= RING_BYTES)
    }
}

enum Outcome {
    /// Queued or being served.
    Pending,
    /// The reply, or why there is none.
    Done(Result<Vec<u8>, c_long>),
}

struct Call {
    max_reply: u64,
    outcome: Outcome,
    done: Arc<Condvar>,
}

#[derive(Default)]
struct State {
    next_process: u64,
    next_generation: u64,
    next_call: u64,
    next_descriptor: u64,
    /// By (node, port).
    ports: BTreeMap<(u32, u32), Port>,
    /// Calls whose caller still waits.
    calls: BTreeMap<u64, Call>,
    /// Unanswered descriptors, by (process, descriptor): their call (which
    /// may have given up waiting meanwhile).
    descriptors: BTreeMap<(u64, u64), u64>,
}

impl State {
    fn ports_of_user(&self, node: u32, uid: u32) -> u64 {
        self.ports
            .range((node, 0)..=(node, u32::MAX))
            .filter(|(_, port)| port.uid == uid)
            .count() as u64
    }

    /// Ends `call` with `outcome`, if its caller still waits.
    fn finish(&mut self, call: u64, outcome: Result<Vec<u8>, c_long>) {
        if let Some(call) = self.calls.get_mut(&call) {
            call.outcome = Outcome::Done(outcome);
            call.done.notify_all();
        }
    }

    /// Removes port `key`, failing the requests nobody received yet.
    fn close(&mut self, key: (u32, u32)) {
        if let Some(port) = self.ports.remove(&key) {
            port.arrived.notify_all();
            port.room.notify_all();
            for message in port.queue {
                if let Some(call) = message.call {
                    self.finish(call, Err(err(libc::ECONNREFUSED)));
                }
            }
        }
    }
}

/// The RPC state of a whole cluster. Each waiter has a condition
/// variable of its own (per port for receivers and senders, per call for
/// callers), so that a message wakes only who may care.
pub(super) struct Rpc {
    state: Mutex<State>,
}

/// Port and whether the send may not block, from a `port_priority` (see
/// [`lite::sys::port_priority`]).
fn decode_port_priority(port_priority: u32, nonblock_allowed: bool) -> Result<(u32, bool), c_long> {
    let nonblock = port_priority & SEND_NONBLOCK != 0;
    let priority = super::priority_of(port_priority);
    let port = port_priority & 0xffff;
    let invalid = (nonblock && !nonblock_allowed) || priority > PRIORITY_LOW || port >= MAX_PORTS;
    refuse_if(invalid, libc::EINVAL)?;
    Ok((port, nonblock))
}

/// `-EINVAL` for a node id beyond any cluster, `-EHOSTUNREACH` for one not
/// in this cluster (node 0 included: it is never a member).
fn check_node(who: &Caller, node: u32) -> Result<(), c_long> {
    refuse_if(node >= MAX_NODES, libc::EINVAL)?;
    refuse_if(node == 0 || node > who.nodes, libc::EHOSTUNREACH)
}

/// The checks of a message `who` sends to `node` in the kernel's order
/// (`port_priority`, which may ask not to block if `nonblock_allowed`, the
/// node, the message's size and address), then its port, whether the send
/// may block, and its bytes.
///
/// # Safety
///
/// `msg` must be readable for `size` bytes if it is mapped.
unsafe fn message(
    who: &Caller,
    node: u32,
    port_priority: u32,
    (msg, size): (*const c_void, u64),
    nonblock_allowed: bool,
) -> Result<((u32, bool), Vec<u8>), c_long> {
    let port = decode_port_priority(port_priority, nonblock_allowed)?;
    check_node(who, node)?;
    refuse_if(size == 0, libc::EINVAL)?;
    check_pointer(msg as usize, size)?;
    // SAFETY: as the caller promised.
    Ok((port, unsafe { load(msg as usize, size) }))
}

/// Copies `data` to `address`.
///
/// # Safety
///
/// `address` must be valid for writes of `data.len()` bytes.
unsafe fn store(address: usize, data: &[u8]) {
    // SAFETY: as the caller promised.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut u8, data.len()) }
}

/// Copies `size` bytes from `address`.
///
/// # Safety
///
/// `address` must be valid for reads of `size` bytes (or `size` be 0).
unsafe fn load(address: usize, size: u64) -> Vec<u8> {
    if size == 0 {
        return Vec::new();
    }
    // SAFETY: as the caller promised.
    unsafe { std::slice::from_raw_parts(address as *const u8, size as usize) }.to_vec()
}

impl Rpc {
    pub(super) fn new() -> Rpc {
        Rpc {
            state: Mutex::new(State {
                next_process: 1,
                next_generation: 1,
                next_call: 1,
                next_descriptor: 0x100,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// `None` once `deadline` passed.
    fn wait<'a>(
        state: MutexGuard<'a, State>,
        condvar: &Condvar,
        deadline: Instant,
    ) -> Option<MutexGuard<'a, State>> {
        let left = deadline.checked_duration_since(Instant::now())?;
        let (state, _) = condvar
            .wait_timeout(state, left)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Some(state)
    }

    pub(super) fn new_process(&self) -> u64 {
        let mut state = self.state();
        state.next_process += 1;
        state.next_process
    }

    pub(super) fn open_ports(&self) -> usize {
        self.state().ports.len()
    }

    pub(super) fn ports_of_user(&self, node: u32, uid: u32) -> u64 {
        self.state().ports_of_user(node, uid)
    }

    /// By the user of their owner.
    pub(super) fn ports_by_user(&self, node: u32) -> BTreeMap<u32, u64> {
        let mut counts = BTreeMap::new();
        for ((_, _), port) in self.state().ports.range((node, 0)..=(node, u32::MAX)) {
            *counts.entry(port.uid).or_default() += 1;
        }
        counts
    }

    /// What the kernel does when `who`'s process exits: its ports close
    /// and the callers of its unanswered descriptors get `-ECONNRESET`.
    pub(super) fn exit(&self, who: &Caller) {
        let mut state = self.state();
        let owned: Vec<(u32, u32)> = state
            .ports
            .iter()
            .filter(|(_, port)| port.owner == who.process)
            .map(|(key, _)| *key)
            .collect();
        for key in owned {
            state.close(key);
        }
        // Descriptors are keyed by process first: this one's are a range.
        let mut unanswered = state.descriptors.split_off(&(who.process, 0));
        let mut later = unanswered.split_off(&(who.process + 1, 0));
        state.descriptors.append(&mut later);
        for call in unanswered.into_values() {
            state.finish(call, Err(err(libc::ECONNRESET)));
        }
    }

    /// `node` failed: the calls queued on its ports fail with `-EHOSTDOWN`.
    pub(super) fn node_failed(&self, node: u32) {
        let mut state = self.state();
        let mut calls = Vec::new();
        for (_, port) in state.ports.range_mut((node, 0)..=(node, u32::MAX)) {
            port.queue
                .retain(|message| message.call.map(|c| calls.push(c)).is_none());
        }
        for call in calls {
            state.finish(call, Err(err(libc::EHOSTDOWN)));
        }
    }

    /// `lite_register_application` by a process whose user may hold
    /// `quota` ports on its node (`EDQUOT` beyond).
    ///
    /// # Safety
    ///
    /// `name` must be readable for `name_len` bytes or below
    /// [`super::FIRST_MAPPED_ADDRESS`].
    pub(super) unsafe fn register_within(
        &self,
        who: &Caller,
        port: u32,
        max_size: u64,
        name: usize,
        name_len: u64,
        quota: Limit,
    ) -> Result<c_long, c_long> {
        let bad_size = max_size == 0 || max_size > MAX_MESSAGE_SIZE;
        let bad_name = name_len > MAX_PORT_NAME as u64;
        refuse_if(port >= MAX_PORTS || bad_size || bad_name, libc::EINVAL)?;
        check_pointer(name, name_len)?;
        // The name is informational, but the kernel reads it.
        // SAFETY: checked readable above, as the caller promised.
        drop(unsafe { load(name, name_len) });
        let mut state = self.state();
        let taken = state.ports.contains_key(&(who.node, port));
        refuse_if(taken, libc::EADDRINUSE)?;
        let held = state.ports_of_user(who.node, who.uid);
        refuse_if(!quota.allows(held + 1), libc::EDQUOT)?;
        state.next_generation += 1;
        let generation = state.next_generation;
        state.ports.insert(
            (who.node, port),
            Port {
                owner: who.process,
                uid: who.uid,
                max_size,
                generation,
                queue: VecDeque::new(),
                arrived: Arc::new(Condvar::new()),
                room: Arc::new(Condvar::new()),
            },
        );
        Ok(0)
    }

    pub(super) fn unregister_application(&self, who: &Caller, port: u32) -> Result<c_long, c_long> {
        refuse_if(port >= MAX_PORTS, libc::EINVAL)?;
        let mut state = self.state();
        let open = state
            .ports
            .get(&(who.node, port))
            .ok_or(err(libc::ENOENT))?;
        refuse_if(open.owner != who.process, libc::EPERM)?;
        state.close((who.node, port));
        Ok(0)
    }

    pub(super) fn query_port(&self, who: &Caller, node: u32, port: u32) -> Result<c_long, c_long> {
        refuse_if(port >= MAX_PORTS, libc::EINVAL)?;
        check_node(who, node)?;
        let state = self.state();
        let open = state
            .ports
            .get(&(node, port))
            .ok_or(err(libc::ECONNREFUSED))?;
        Ok(open.max_size as c_long)
    }

    /// Puts `data` into the ring of `who`'s node on `port` of `node`,
    /// waiting for room unless `nonblock`. One-way messages into a full
    /// ring vanish under the `drop_when_full` defect.
    fn enqueue(
        &self,
        who: &Caller,
        (node, port): (u32, u32),
        data: Vec<u8>,
        call: Option<u64>,
        nonblock: bool,
    ) -> Result<(), c_long> {
        let deadline = Instant::now() + RPC_TIMEOUT;
        let mut state = self.state();
        let generation = match state.ports.get(&(node, port)) {
            Some(open) if data.len() as u64 > open.max_size => return Err(err(libc::EMSGSIZE)),
            Some(open) => open.generation,
            None => return Err(err(libc::ECONNREFUSED)),
        };
        loop {
            let open = match state.ports.get_mut(&(node, port)) {
                Some(open) if open.generation == generation => open,
                _ => return Err(err(libc::ECONNREFUSED)),
            };
            if open.has_room(who.node, data.len()) {
                open.queue.push_back(Message {
                    from: who.node,
                    data,
                    call,
                });
                open.arrived.notify_all();
                return Ok(());
            }
            if call.is_none() && who.drop_when_full {
                return Ok(());
            }
            refuse_if(nonblock, libc::EAGAIN)?;
            let room = Arc::clone(&open.room);
            state = Self::wait(state, &room, deadline).ok_or(err(libc::ETIMEDOUT))?;
        }
    }

    fn start_call(
        &self,
        who: &Caller,
        target: (u32, u32),
        data: Vec<u8>,
        max_reply: u64,
    ) -> Result<u64, c_long> {
        let id = {
            let mut state = self.state();
            state.next_call += 1;
            let id = state.next_call;
            state.calls.insert(
                id,
                Call {
                    max_reply,
                    outcome: Outcome::Pending,
                    done: Arc::new(Condvar::new()),
                },
            );
            id
        };
        let queued = self.enqueue(who, target, data, Some(id), false);
        // A request that never queued has no call to wait for.
        queued.inspect_err(|_| drop(self.state().calls.remove(&id)))?;
        Ok(id)
    }

    fn finish_call(&self, id: u64, deadline: Instant) -> Result<Vec<u8>, c_long> {
        let mut state = self.state();
        while let Some(call) = state.calls.get(&id) {
            let Outcome::Pending = call.outcome else {
                break;
            };
            let done = Arc::clone(&call.done);
            let Some(waited) = Self::wait(state, &done, deadline) else {
                // A receiver may still take the request; its reply is then
                // discarded.
                self.state().calls.remove(&id);
                return Err(err(libc::ETIMEDOUT));
            };
            state = waited;
        }
        match state.calls.remove(&id).map(|call| call.outcome) {
            Some(Outcome::Done(result)) => result,
            _ => Err(err(libc::EIO)),
        }
    }

    /// `lite_send_reply_imm`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::send_reply_imm`].
    pub(super) unsafe fn call(
        &self,
        who: &Caller,
        node: u32,
        port_priority: u32,
        (msg, size): (*const c_void, u64),
        (reply, max_reply): (*mut c_void, u64),
    ) -> Result<c_long, c_long> {
        // SAFETY: the caller promised `size` readable bytes at `msg`.
        let ((port, _), data) = unsafe { message(who, node, port_priority, (msg, size), false)? };
        check_pointer(reply as usize, max_reply)?;
        let id = self.start_call(who, (node, port), data, max_reply)?;
        let answer = self.finish_call(id, Instant::now() + RPC_TIMEOUT)?;
        // SAFETY: the caller promised `max_reply` writable bytes at
        // `reply`, and replies are at most that long.
        unsafe { store(reply as usize, &answer) };
        Ok(answer.len() as c_long)
    }

    /// `lite_send`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::send`].
    pub(super) unsafe fn send(
        &self,
        who: &Caller,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
    ) -> Result<c_long, c_long> {
        // SAFETY: the caller promised `size` readable bytes at `msg`.
        let ((port, nonblock), data) =
            unsafe { message(who, node, port_priority, (msg, size), true)? };
        self.enqueue(who, (node, port), data, None, nonblock)?;
        Ok(0)
    }

    /// `lite_receive_message`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::receive_message`].
    pub(super) unsafe fn receive_message(
        &self,
        who: &Caller,
        port: u32,
        buf: *mut c_void,
        max_size: u64,
        descriptor: *mut u64,
        flags: u32,
    ) -> Result<c_long, c_long> {
        let unknown_flags = flags & !RECV_NONBLOCK != 0;
        refuse_if(unknown_flags || port >= MAX_PORTS, libc::EINVAL)?;
        check_pointer(buf as usize, max_size)?;
        check_pointer(descriptor as usize, 8)?;
        let deadline = Instant::now() + RECEIVE_LIMIT;
        let mut state = self.state();
        let open = state
            .ports
            .get(&(who.node, port))
            .ok_or(err(libc::ENOENT))?;
        let generation = open.generation;
        loop {
            let open = match state.ports.get_mut(&(who.node, port)) {
                Some(open) if open.generation == generation => open,
                _ => return Err(err(libc::ESHUTDOWN)),
            };
            let (arrived, room) = (Arc::clone(&open.arrived), Arc::clone(&open.room));
            let next_size = open.queue.front().map(|next| next.data.len() as u64);
            refuse_if(
                next_size.is_some_and(|size| size > max_size),
                libc::EMSGSIZE,
            )?;
            if let Some(message) = open.queue.pop_front() {
                let number = match message.call {
                    Some(call) => {
                        state.next_descriptor += 1;
                        let number = state.next_descriptor;
                        state.descriptors.insert((who.process, number), call);
                        number
                    }
                    None => 0,
                };
                // SAFETY: the caller promised `max_size` writable bytes at
                // `buf`, which the message fits, and a writable u64 at
                // `descriptor`.
                unsafe {
                    store(buf as usize, &message.data);
                    descriptor.write_unaligned(number);
                }
                // Room in the ring for a waiting sender.
                room.notify_all();
                return Ok(message.data.len() as c_long);
            }
            refuse_if(flags & RECV_NONBLOCK != 0, libc::EAGAIN)?;
            state = Self::wait(state, &arrived, deadline).ok_or(err(libc::ETIMEDOUT))?;
        }
    }

    /// `lite_reply_message`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::reply_message`].
    pub(super) unsafe fn reply(
        &self,
        who: &Caller,
        buf: *const c_void,
        size: u64,
        descriptor: u64,
    ) -> Result<c_long, c_long> {
        check_pointer(buf as usize, size)?;
        let mut state = self.state();
        let key = (who.process, descriptor);
        let call = *state.descriptors.get(&key).ok_or(err(libc::ENOENT))?;
        if let Some(waiting) = state.calls.get(&call) {
            refuse_if(size > waiting.max_reply, libc::EMSGSIZE)?;
        }
        state.descriptors.remove(&key);
        // SAFETY: the caller promised `size` readable bytes at `buf`.
        let data = unsafe { load(buf as usize, size) };
        state.finish(call, Ok(data));
        Ok(0)
    }

    /// `lite_reply_and_receive_message`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::reply_and_receive_message`].
    pub(super) unsafe fn reply_and_receive_message(
        &self,
        who: &Caller,
        buf: *const c_void,
        size: u64,
        descriptor: u64,
        next: *mut LiteReceive,
    ) -> Result<c_long, c_long> {
        check_pointer(next as usize, 1)?;
        // SAFETY: the caller promised a readable LiteReceive at `next`.
        let request = unsafe { next.read_unaligned() };
        // SAFETY: as the caller promised for `buf`.
        unsafe { self.reply(who, buf, size, descriptor)? };
        let mut number = 0u64;
        // SAFETY: the caller promised `request.buf` writable for
        // `request.max_size` bytes; `number` is a local.
        let received = unsafe {
            self.receive_message(
                who,
                request.port,
                request.buf as usize as *mut c_void,
                request.max_size,
                &mut number,
                request.flags,
            )
        };
        // SAFETY: the caller promised a writable LiteReceive at `next`.
        unsafe { std::ptr::addr_of_mut!((*next).descriptor).write_unaligned(number) };
        received
    }

    /// `lite_send_reply_multicast`.
    ///
    /// # Safety
    ///
    /// As [`lite::sys::send_reply_multicast`].
    pub(super) unsafe fn send_reply_multicast(
        &self,
        who: &Caller,
        call: *mut LiteMulticast,
    ) -> Result<c_long, c_long> {
        check_pointer(call as usize, 1)?;
        // SAFETY: the caller promised a readable LiteMulticast at `call`.
        let call = unsafe { call.read_unaligned() };
        let (port, _) = decode_port_priority(call.port_priority, false)?;
        let invalid = call.count == 0 || call.count > MAX_NODES || call.size == 0;
        refuse_if(invalid, libc::EINVAL)?;
        let count = u64::from(call.count);
        check_pointer(call.nodes as usize, count * 4)?;
        check_pointer(call.lengths as usize, count * 8)?;
        check_pointer(call.msg as usize, call.size)?;
        let room = call.max_reply.checked_mul(count).ok_or(err(libc::EINVAL))?;
        check_pointer(call.replies as usize, room)?;
        // SAFETY: the caller promised `count` readable node ids.
        let targets: Vec<u32> = unsafe { load(call.nodes as usize, count * 4) }
            .chunks_exact(4)
            .map(|id| u32::from_ne_bytes([id[0], id[1], id[2], id[3]]))
            .collect();
        // SAFETY: the caller promised `size` readable bytes at `msg`.
        let data = unsafe { load(call.msg as usize, call.size) };
        let started: Vec<Result<u64, c_long>> = targets
            .iter()
            .map(|&node| {
                check_node(who, node)?;
                self.start_call(who, (node, port), data.clone(), call.max_reply)
            })
            .collect();
        let deadline = Instant::now() + RPC_TIMEOUT;
        let mut replied = 0;
        for (index, started) in started.into_iter().enumerate() {
            let length = match started.and_then(|id| self.finish_call(id, deadline)) {
                Ok(answer) => {
                    let at = call.replies as usize + index * call.max_reply as usize;
                    // SAFETY: the caller promised `max_reply` writable
                    // bytes for every node; replies are at most that.
                    unsafe { store(at, &answer) };
                    replied += 1;
                    answer.len() as i64
                }
                Err(errno) => errno,
            };
            let at = call.lengths as usize + index * 8;
            // SAFETY: the caller promised `count` writable lengths.
            unsafe { store(at, &length.to_ne_bytes()) };
        }
        Ok(replied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Res = Result<c_long, c_long>;

    fn caller(node: u32, process: u64) -> Caller {
        Caller {
            node,
            nodes: 2,
            process,
            uid: 0,
            drop_when_full: false,
        }
    }

    fn send(rpc: &Rpc, who: &Caller, node: u32, port: u32, data: &[u8], nonblock: bool) -> Res {
        let flag = if nonblock { SEND_NONBLOCK } else { 0 };
        // SAFETY: `data` is readable for its length.
        unsafe {
            rpc.send(
                who,
                node,
                port | flag,
                data.as_ptr().cast(),
                data.len() as u64,
            )
        }
    }

    /// Opens `port` of 64-byte messages for `who`, whatever its quota.
    fn open_port(rpc: &Rpc, who: &Caller, port: u32) -> Res {
        // SAFETY: an empty name is never read.
        unsafe { rpc.register_within(who, port, 64, 0, 0, Limit::Unlimited) }
    }

    fn receive(rpc: &Rpc, who: &Caller, port: u32, buf: &mut [u8]) -> (Res, u64) {
        let mut descriptor = u64::MAX;
        // SAFETY: `buf` and `descriptor` are writable locals.
        let ret = unsafe {
            rpc.receive_message(
                who,
                port,
                buf.as_mut_ptr().cast(),
                buf.len() as u64,
                &mut descriptor,
                RECV_NONBLOCK,
            )
        };
        (ret, descriptor)
    }

    #[test]
    fn a_full_ring_refuses_nonblocking_sends_until_a_receive() {
        let rpc = Rpc::new();
        let (server, client) = (caller(1, 1), caller(2, 2));
        assert_eq!(open_port(&rpc, &server, 3), Ok(0));
        for i in 0..RING_SLOTS {
            assert_eq!(send(&rpc, &client, 1, 3, &[i as u8], true), Ok(0));
        }
        assert_eq!(
            send(&rpc, &client, 1, 3, b"x", true),
            Err(err(libc::EAGAIN))
        );
        // Another client node has a ring of its own.
        assert_eq!(send(&rpc, &server, 1, 3, b"local", true), Ok(0));
        let mut buf = [0u8; 64];
        assert_eq!(receive(&rpc, &server, 3, &mut buf), (Ok(1), 0));
        assert_eq!(buf[0], 0);
        assert_eq!(send(&rpc, &client, 1, 3, b"y", true), Ok(0));
        assert_eq!(
            rpc.unregister_application(&client, 3),
            Err(err(libc::ENOENT))
        );
        let other_process = rpc.unregister_application(&caller(1, 9), 3);
        assert_eq!(other_process, Err(err(libc::EPERM)));
        assert_eq!(rpc.unregister_application(&server, 3), Ok(0));
        let sent = send(&rpc, &client, 1, 3, b"z", true);
        assert_eq!(sent, Err(err(libc::ECONNREFUSED)));
        assert_eq!(rpc.open_ports(), 0);
    }

    #[test]
    fn exiting_fails_the_callers_of_unanswered_descriptors() {
        let rpc = Rpc::new();
        let (server, client) = (caller(1, 1), caller(2, 2));
        assert_eq!(open_port(&rpc, &server, 5), Ok(0));
        let call = rpc.start_call(&client, (1, 5), b"req".to_vec(), 8);
        let call = call.expect("queued");
        let mut buf = [0u8; 8];
        let (len, descriptor) = receive(&rpc, &server, 5, &mut buf);
        assert_eq!(len, Ok(3));
        assert_ne!(descriptor, 0);
        // Another process cannot answer it.
        // SAFETY: `buf` is readable.
        let foreign = unsafe { rpc.reply(&caller(1, 7), buf.as_ptr().cast(), 1, descriptor) };
        assert_eq!(foreign, Err(err(libc::ENOENT)));
        rpc.exit(&server);
        let answer = rpc.finish_call(call, Instant::now() + RPC_TIMEOUT);
        assert_eq!(answer, Err(err(libc::ECONNRESET)));
        assert_eq!(rpc.open_ports(), 0);
    }
}
