//! RPC and messaging: every node opens a service port answered by a few
//! server threads, which every node calls in every way (see
//! `served_cases` for the cases, one submodule each); all of it
//! concurrently from every node, threads and processes.
//!
//! A barrier that fails closes the ports whose receivers would wait for ever
//! before the run ends. Every wait for another node is bounded: a call by the
//! kernel's RPC timeout, room in a full ring, a ring filling up and the next
//! message of a drain by [`PEER_WAIT_LIMIT`].

use std::ffi::{c_char, c_void};
use std::io::{BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::{
    port_priority, LiteMulticast, LiteReceive, MAX_MESSAGE_SIZE, MAX_NODES, MAX_PORTS,
    MAX_PORT_NAME, PRIORITY_NONE, RECV_NONBLOCK, SEND_NONBLOCK,
};
use lite::Priority;

use super::io::{
    barrier, check_errno, check_zero, outcome_of, unless, write_debugfs_line, InStep, OutOfStep,
};
use super::processes::{
    child_outcome, collect, finish, first_failure, keep_first_failure, points_of, ready_then_wait,
    report_point, spawn, WHY_SKIPPED,
};
use super::{target_name, Node};
use crate::deadline::{
    current_thread, interrupt_at, interrupt_thread, retry_while_busy, Deadline, Watchdog,
};
use crate::debugfs::RPC_FAULT_FILE;
use crate::errno::{describe_result, expect_errno, expect_zero};
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::{next_node, previous_node};
use crate::tap::Tap;

mod bad_input;
mod calls;
mod corrupt;
mod dying;
mod flood;
mod ports;
mod storm;

pub(super) use ports::child_main;

/// Every node's service: requests get [`transform`]ed replies.
pub(super) const SERVICE_PORT: u32 = 10;
/// Flooded with one-way messages for a slow receiver.
const FLOOD_PORT: u32 = 11;
/// Filled until senders get -EAGAIN.
const FILL_PORT: u32 = 12;
/// Never registered anywhere.
pub(super) const UNUSED_PORT: u32 = 13;
/// Requests queue up here unreceived until the port is closed.
const WAIT_PORT: u32 = 14;
/// A receiver waits here for nothing until the port is closed.
const IDLE_PORT: u32 = 15;
/// Descriptor and receive cases, this node only.
const PRIVATE_PORT: u32 = 16;
/// Registered by a child process that exits holding a request.
const EXIT_PORT: u32 = 17;
/// Registered by the dying server processes, one per round.
const DYING_PORTS: [u32; 2] = [40, 41];
/// Its ring from [`CORRUPT_CLIENT`] on [`CORRUPT_SERVER`] is broken on
/// purpose.
const CORRUPT_PORT: u32 = 43;

const BLOCKING: u32 = 0;

/// Threads answering each node's service port.
const SERVER_THREADS: u32 = 3;
const CALLS_PER_CALLER: u64 = 48;
const BLOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a port must stay empty, once every sender is done, to count
/// as drained: a message already in a ring may take a moment to be
/// noticed by the receiving node.
const QUIET_PERIOD: Duration = Duration::from_secs(2);
/// Longest one wait for another node may take in the flood and fill
/// cases: for room in its full ring, for its ring to fill up, for the
/// next message while its senders are not done.
const PEER_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// Rounds of the storm, each on a port of its own.
const STORM_ROUNDS: u32 = 6;
/// Largest storm request, and the max size of the storm ports.
const STORM_MAX: usize = 24 << 10;

/// The node serving [`CORRUPT_PORT`] in the corrupt ring case.
const CORRUPT_SERVER: u32 = 2;
/// The node whose ring on [`CORRUPT_SERVER`] is broken.
const CORRUPT_CLIENT: u32 = 1;
/// Sizes of the client's requests in the corrupt ring case, in order:
/// the one left queued in the ring, the one whose header the kernel
/// corrupts, then those made once the ring broke, the first of them as
/// long as the two before, so that only its content tells it from them.
const CORRUPT_SIZES: [usize; 8] = [64, 64, 64, 1, 4096, 1000, 17, 2048];

/// The reply a service thread gives to `request`: its bytes reversed, each
/// plus one, so an echo or a reply to another request never passes.
pub fn transform(request: &[u8]) -> Vec<u8> {
    request.iter().rev().map(|b| b.wrapping_add(1)).collect()
}

pub(crate) fn register<K: Kernel>(kernel: &K, port: u32, max_size: u64, name: &str) -> c_long {
    let (name, len) = (name.as_ptr().cast::<c_char>(), name.len() as u64);
    // SAFETY: `name` is readable for its length during the call.
    unsafe { kernel.register_application(port, max_size, name, len) }
}

/// As the point "register_application(port, max) returns 0"; the raw result.
fn register_checked<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    (port, max): (u32, u64),
    name: &str,
) -> c_long {
    let ret = register(kernel, port, max, name);
    let point = format!("node {me}: register_application(port {port}, max {max} B) returns 0");
    check_zero(tap, &point, ret);
    ret
}

/// What to do with a barrier's [`OutOfStep`] while `ports` are open:
/// unregister them, which ends every wait on them, before the run ends.
fn unregistering<'a, K: Kernel>(
    kernel: &'a K,
    ports: &'a [u32],
) -> impl Fn(OutOfStep) -> OutOfStep + Copy + 'a {
    move |out_of_step| {
        for &port in ports {
            kernel.unregister_application(port);
        }
        out_of_step
    }
}

fn call<K: Kernel>(
    kernel: &K,
    node: u32,
    port_priority: u32,
    msg: &[u8],
    reply: &mut [u8],
) -> c_long {
    let (msg, msg_len) = (msg.as_ptr().cast(), msg.len() as u64);
    let (reply, room) = (reply.as_mut_ptr().cast(), reply.len() as u64);
    // SAFETY: `msg` is readable and `reply` exclusively borrowed and
    // writable for their lengths during the call.
    unsafe { kernel.send_reply_imm(node, port_priority, msg, msg_len, reply, room) }
}

fn send<K: Kernel>(kernel: &K, node: u32, port: u32, msg: &[u8], nonblock: bool) -> c_long {
    let flags = if nonblock { SEND_NONBLOCK } else { 0 };
    // SAFETY: `msg` is readable for its length during the call.
    unsafe { kernel.send(node, port | flags, msg.as_ptr().cast(), msg.len() as u64) }
}

/// Replies of at most `max_reply` bytes each go to `replies`.
fn multicast_args(
    targets: &[u32],
    request: &[u8],
    (lengths, replies): (&mut [i64], &mut [u8]),
    max_reply: u64,
    port: u32,
) -> LiteMulticast {
    LiteMulticast {
        nodes: targets.as_ptr() as u64,
        lengths: lengths.as_mut_ptr() as u64,
        msg: request.as_ptr() as u64,
        size: request.len() as u64,
        replies: replies.as_mut_ptr() as u64,
        max_reply,
        count: targets.len() as u32,
        port_priority: port,
    }
}

/// The raw result of a receive into `buf` with `flags` ([`BLOCKING`] or
/// `LITE_RECV_NONBLOCK`), and the descriptor.
fn receive<K: Kernel>(kernel: &K, port: u32, buf: &mut [u8], flags: u32) -> (c_long, u64) {
    let (mut descriptor, len) = (u64::MAX, buf.len() as u64);
    // SAFETY: `buf` and `descriptor` are exclusively borrowed and writable
    // during the call.
    let ret = unsafe {
        kernel.receive_message(port, buf.as_mut_ptr().cast(), len, &mut descriptor, flags)
    };
    (ret, descriptor)
}

fn reply<K: Kernel>(kernel: &K, data: &[u8], descriptor: u64) -> c_long {
    // SAFETY: `data` is readable for its length during the call.
    unsafe { kernel.reply_message(data.as_ptr().cast(), data.len() as u64, descriptor) }
}

/// The raw result and the new descriptor.
fn reply_and_receive<K: Kernel>(
    kernel: &K,
    (data, descriptor): (&[u8], u64),
    port: u32,
    buf: &mut [u8],
    flags: u32,
) -> (c_long, u64) {
    let mut next = LiteReceive {
        buf: buf.as_mut_ptr() as u64,
        max_size: buf.len() as u64,
        descriptor: u64::MAX,
        port,
        flags,
    };
    let (data, len) = (data.as_ptr().cast(), data.len() as u64);
    // SAFETY: `data` is readable, `next` and the buffer it points to are
    // exclusively borrowed and writable during the call.
    let ret = unsafe { kernel.reply_and_receive_message(data, len, descriptor, &mut next) };
    (ret, next.descriptor)
}

pub(super) fn expect_len(ret: c_long, expected: usize) -> Result<(), String> {
    unless(ret == expected as c_long, || {
        format!("expected {expected}, got {}", describe_result(ret))
    })
}

/// Where `found` and `expected` first differ, for a failure message.
pub(super) fn compare(found: &[u8], expected: &[u8]) -> Result<(), String> {
    if found.len() != expected.len() {
        return Err(format!("{} B instead of {} B", found.len(), expected.len()));
    }
    pattern::verify_bytes(found, expected, 0).map_err(|m| m.to_string())
}

/// `ret` must be exactly `expected.len()` and `found` begin with `expected`.
pub(super) fn expect_bytes(ret: c_long, found: &[u8], expected: &[u8]) -> Result<(), String> {
    expect_len(ret, expected.len())?;
    compare(found.get(..expected.len()).unwrap_or(found), expected)
}

/// Sets every byte of `buf` that `expected` covers to its opposite, so
/// that a reply which does not arrive, or arrives short, cannot pass.
pub(super) fn poison_reply(buf: &mut [u8], expected: &[u8]) {
    for (byte, want) in buf.iter_mut().zip(expected) {
        *byte = !want;
    }
}

pub(crate) fn transformed_call<K: Kernel>(
    kernel: &K,
    node: u32,
    port_priority: u32,
    request: &[u8],
) -> Result<(), String> {
    // Room to spare, so a reply that is too long shows.
    let mut answer = vec![0u8; request.len() + 16];
    let expected = transform(request);
    poison_reply(&mut answer, &expected);
    let ret = call(kernel, node, port_priority, request, &mut answer);
    expect_len(ret, request.len())?;
    compare(&answer[..request.len()], &expected).map_err(|m| format!("reply differs: {m}"))
}

/// A request identifying its sender: (node, caller, sequence), then
/// pattern bytes, 16 to 515 bytes in all.
pub(crate) fn identified_request(node: u32, caller: u32, seq: u64) -> Vec<u8> {
    let len = 16 + (seq as usize * 37) % 500;
    let mut request = vec![0u8; len];
    request[..4].copy_from_slice(&node.to_le_bytes());
    request[4..8].copy_from_slice(&caller.to_le_bytes());
    request[8..16].copy_from_slice(&seq.to_le_bytes());
    let seed = pattern::seed(&[u64::from(node), u64::from(caller), seq]);
    pattern::fill(seed, 16, &mut request[16..]);
    request
}

/// Each call is checked against its own request.
fn caller_run<K: Kernel>(kernel: &K, me: u32, nodes: u32, caller: u32) -> Result<(), String> {
    for seq in 0..CALLS_PER_CALLER {
        let target = 1 + ((seq + u64::from(caller)) % u64::from(nodes)) as u32;
        let request = identified_request(me, caller, seq);
        transformed_call(kernel, target, SERVICE_PORT, &request)
            .map_err(|e| format!("call {seq} to node {target}: {e}"))?;
    }
    Ok(())
}

pub(crate) struct Served {
    pub(crate) requests: u64,
    pub(crate) one_way: u64,
    /// How its loop ended: `Ok` with the closing errno, or what went wrong.
    pub(crate) ending: Result<c_long, String>,
}

impl Served {
    fn joined(server: std::thread::ScopedJoinHandle<'_, Served>) -> Served {
        let panicked = || Served::ended(Err("the thread panicked".into()));
        server.join().unwrap_or_else(|_| panicked())
    }

    fn ended(ending: Result<c_long, String>) -> Served {
        Served {
            requests: 0,
            one_way: 0,
            ending,
        }
    }

    /// Whether its loop ended as a port closing ends it, having received
    /// no one-way message.
    fn verdict(&self) -> Result<(), String> {
        self.ending.as_ref().map_err(Clone::clone)?;
        unless(self.one_way == 0, || {
            format!("got {} one-way messages", self.one_way)
        })
    }
}

/// Whether a receive's `ret` is how closing its port ends it: closed while
/// waiting, or closed before the receive.
fn port_closed(ret: c_long) -> bool {
    ret == -c_long::from(libc::ESHUTDOWN) || ret == -c_long::from(libc::ENOENT)
}

/// Answers until the port is closed; `combined` replies and receives in one call.
pub(crate) fn serve<K: Kernel>(kernel: &K, port: u32, combined: bool) -> Served {
    serve_keeping(kernel, port, combined, |_| {})
}

/// Like [`serve`], handing every request to `keep`. A failed reply ends
/// the loop's verdict but not the loop, so that no later caller waits for
/// the RPC timeout.
fn serve_keeping<K: Kernel>(
    kernel: &K,
    port: u32,
    combined: bool,
    mut keep: impl FnMut(&[u8]),
) -> Served {
    let mut buf = vec![0u8; MAX_MESSAGE_SIZE as usize];
    let (mut requests, mut one_way, mut failure) = (0, 0, None);
    let (mut ret, mut descriptor) = receive(kernel, port, &mut buf, BLOCKING);
    let ending = loop {
        let len = match usize::try_from(ret) {
            Ok(len) if len <= buf.len() => len,
            _ if port_closed(ret) => break failure.map_or(Ok(ret), Err),
            _ => {
                let received = || format!("receive returned {}", describe_result(ret));
                break Err(failure.unwrap_or_else(received));
            }
        };
        if descriptor != 0 {
            keep(&buf[..len]);
            let answer = transform(&buf[..len]);
            requests += 1;
            if combined {
                let answer = (&answer[..], descriptor);
                (ret, descriptor) = reply_and_receive(kernel, answer, port, &mut buf, BLOCKING);
                continue;
            }
            let replied = reply(kernel, &answer, descriptor);
            if replied != 0 {
                let replied = describe_result(replied);
                failure.get_or_insert(format!("reply to a {len} B request returned {replied}"));
            }
        } else {
            one_way += 1;
        }
        (ret, descriptor) = receive(kernel, port, &mut buf, BLOCKING);
    };
    Served {
        requests,
        one_way,
        ending,
    }
}

/// A thread about to block in a call, observable from another thread.
#[derive(Default)]
pub(super) struct Blocker {
    tid: AtomicI32,
    pub(super) finished: AtomicBool,
}

impl Blocker {
    pub(super) fn around<T>(&self, call: impl FnOnce() -> T) -> T {
        self.tid.store(current_thread(), Ordering::SeqCst);
        let result = call();
        self.finished.store(true, Ordering::SeqCst);
        result
    }

    /// Until the thread sleeps in the call or has returned from it.
    pub(super) fn wait_until_blocked(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if self.finished.load(Ordering::SeqCst) {
                return Ok(());
            }
            let tid = self.tid.load(Ordering::SeqCst);
            if tid != 0 && matches!(thread_state(tid), Some('S' | 'D')) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("did not block within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// After `limit`, interrupts the thread with `SIGUSR1` until the call
    /// returns; whether it returned in time.
    pub(super) fn wait_finished(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut in_time = true;
        while !self.finished.load(Ordering::SeqCst) {
            if Instant::now() > deadline {
                in_time = false;
                interrupt_thread(self.tid.load(Ordering::SeqCst));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        in_time
    }
}

/// Decides when a nonblocking drain of a port ends: once `senders_done`
/// is set and the port stayed empty for [`QUIET_PERIOD`]; or, while the
/// senders are not done, once no message came for [`PEER_WAIT_LIMIT`].
struct DrainEnd<'a> {
    senders_done: &'a AtomicBool,
    empty_since: Option<Instant>,
    /// Restarted at every message.
    next_message: Deadline,
}

impl<'a> DrainEnd<'a> {
    /// `awaited` names the messages drained, for the failure.
    fn new(senders_done: &'a AtomicBool, awaited: String) -> Self {
        DrainEnd {
            senders_done,
            empty_since: None,
            next_message: Deadline::after(PEER_WAIT_LIMIT, awaited),
        }
    }

    /// The port was found empty: `Ok(true)` once the drain is over, an
    /// error once no message came for too long. Waits a little before the
    /// next try otherwise.
    fn empty(&mut self) -> Result<bool, String> {
        if self.senders_done.load(Ordering::SeqCst) {
            let since = *self.empty_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= QUIET_PERIOD {
                return Ok(true);
            }
        } else {
            self.next_message.check()?;
        }
        std::thread::sleep(Duration::from_millis(1));
        Ok(false)
    }

    fn message(&mut self) {
        self.empty_since = None;
        self.next_message.restart();
    }
}

/// The scheduler state (`R`, `S`, `D`, ..) of thread `tid` of this process.
pub(super) fn thread_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the state follows
    // the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let me = at.me;
    let service = (SERVICE_PORT, MAX_MESSAGE_SIZE);
    let registered = register_checked(kernel, tap, me, service, "lite-test-service");
    let threads = if registered == 0 { SERVER_THREADS } else { 0 };
    let ((), closed, served) = serving(kernel, SERVICE_PORT, threads, || {
        served_cases(kernel, tap, at)
    })?;
    let point = format!("node {me}: unregister_application(port {SERVICE_PORT}) returns 0");
    check_zero(tap, &point, closed);
    if served.is_empty() {
        return Ok(());
    }
    let requests: u64 = served.iter().map(|served| served.requests).sum();
    tap.comment(&format!(
        "node {me}: the service threads answered {requests} requests"
    ));
    let point = format!("node {me}: {SERVER_THREADS} service threads answered every request and returned -ESHUTDOWN or -ENOENT once the port was closed");
    tap.check(&point, served.iter().try_for_each(Served::verdict));
    Ok(())
}

/// Serves `port` with `threads` service threads, every other one replying
/// and receiving in one call, while `body` runs; then closes the port,
/// which ends them (out of step too). What `body` gave, the raw result of
/// the closing, and what each thread served.
fn serving<T>(
    kernel: &impl Kernel,
    port: u32,
    threads: u32,
    body: impl FnOnce() -> Result<T, OutOfStep>,
) -> Result<(T, c_long, Vec<Served>), OutOfStep> {
    std::thread::scope(|scope| {
        let servers: Vec<_> = (0..threads)
            .map(|index| scope.spawn(move || serve(kernel, port, index % 2 == 1)))
            .collect();
        let ran = body();
        let closed = kernel.unregister_application(port);
        Ok((
            ran?,
            closed,
            servers.into_iter().map(Served::joined).collect(),
        ))
    })
}

/// The cases while every node's service port is served, up to the barrier
/// after the last call to them.
fn served_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    barrier(kernel, tap, nodes, "registering the RPC service ports")?;
    calls::service_calls(kernel, tap, at);
    calls::concurrent_calls(kernel, tap, at);
    super::rpc_async::run(kernel, tap, at);
    barrier(kernel, tap, nodes, "the concurrent RPCs")?;
    calls::multicast(kernel, tap, at);
    storm::storm(kernel, tap, at)?;
    dying::dying_server(kernel, tap, at)?;
    corrupt::corrupt_ring(kernel, tap, at)?;
    flood::flood(kernel, tap, at)?;
    flood::fill(kernel, tap, at)?;
    ports::closing(kernel, tap, at)?;
    ports::private_port(kernel, tap, me);
    ports::processes(kernel, tap, me);
    bad_input::bad_input(kernel, tap, at);
    barrier(kernel, tap, nodes, "the last call to the service ports")
}

/// A node on its own that has joined, for the unit tests of the cases.
#[cfg(test)]
fn joined_node() -> crate::fake_kernel::FakeKernel {
    super::tests::joined(1, 1, crate::fake_kernel::Defects::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformed_replies_differ_from_echoes() {
        assert_eq!(transform(b"abc"), b"dcb");
        assert_eq!(transform(&[0xff]), [0]);
        assert_ne!(transform(b"aa"), b"aa".to_vec());
    }

    #[test]
    fn requests_identify_their_caller() {
        let a = identified_request(1, 2, 3);
        assert_eq!(&a[..4], &1u32.to_le_bytes());
        assert_eq!(&a[8..16], &3u64.to_le_bytes());
        assert_ne!(a, identified_request(1, 3, 3));
        assert!((16..=515).contains(&identified_request(2, 0, 13).len()));
    }

    #[test]
    fn the_new_ports_are_distinct_and_valid() {
        let mut ports = vec![
            SERVICE_PORT,
            FLOOD_PORT,
            FILL_PORT,
            UNUSED_PORT,
            WAIT_PORT,
            IDLE_PORT,
            PRIVATE_PORT,
            EXIT_PORT,
        ];
        ports.extend((0..STORM_ROUNDS).map(storm::storm_port));
        ports.extend(DYING_PORTS);
        ports.push(CORRUPT_PORT);
        let count = ports.len();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), count);
        assert!(ports.iter().all(|&port| port < MAX_PORTS));
    }

    #[test]
    fn thread_states_are_read_from_proc() {
        // SAFETY: gettid takes no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        assert_eq!(thread_state(tid), Some('R'));
        assert_eq!(thread_state(-1), None);
    }
}
