//! RPC and messaging: every node opens a service port answered by a few
//! server threads, and calls every node's service (its own included) with
//! requests of every size, from many threads and processes at once, and by
//! multicast; every node storms every node with calls and multicasts from
//! several threads at once on ports nobody used before, so that many
//! threads make a client's first requests to a port together; a server
//! process receives requests from every node and exits, or is killed,
//! without answering, and every caller must learn at once; a client's
//! ring on a server is broken by a request whose header the kernel
//! corrupts on purpose, and the callers whose requests it held must fail
//! at once with `-EPROTO` while the client's next calls are served; a
//! slow receiver is flooded with one-way messages; rings are filled until
//! senders get `-EAGAIN`; ports are closed under waiting callers and
//! receivers; and descriptors and arguments are misused.
//!
//! Every node runs the same code relative to its own id; the barriers in
//! here are entered unconditionally, in the same order on every node,
//! whatever failed before them, and a barrier that fails ends the run
//! (closing the ports whose receivers would wait for ever). Every wait
//! for another node is bounded: a call by the kernel's RPC timeout, room
//! in a full ring, a ring filling up and the next message of a drain by
//! [`PEER_WAIT_LIMIT`].

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

use super::io::{barrier, InStep};
use super::processes::{collect, finish, spawn};
use super::target_name;
use crate::deadline::{interrupt_at, retry_while_busy, Deadline, Watchdog};
use crate::debugfs::{DEBUGFS_DIR, RPC_FAULT_FILE};
use crate::errno::{describe_error, describe_result, expect_errno, expect_zero};
use crate::kernel::Kernel;
use crate::pattern;
use crate::plan::next_node;
use crate::tap::Tap;

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
/// The storm rounds' ports, this and the next [`STORM_ROUNDS`] - 1.
const STORM_FIRST_PORT: u32 = 30;
/// Registered by the dying server processes, one per round.
const DYING_PORTS: [u32; 2] = [40, 41];
/// Its ring from [`CORRUPT_CLIENT`] on [`CORRUPT_SERVER`] is broken on
/// purpose.
const CORRUPT_PORT: u32 = 43;

/// Threads answering each node's service port.
const SERVER_THREADS: u32 = 3;
/// Request sizes of the transform cases.
const SIZES: [u64; 6] = [1, 7, 64, 4096, 65536, MAX_MESSAGE_SIZE];
/// Threads calling concurrently on each node.
const CALLER_THREADS: u32 = 4;
/// Child processes calling concurrently on each node (real kernel only).
const CALLER_CHILDREN: u32 = 2;
/// Calls each calling thread or process makes.
const CALLS_PER_CALLER: u64 = 48;
/// One-way messages each node sends to each node's flood port.
const FLOOD_MESSAGES: u32 = 2000;
/// Size of a flood message.
const FLOOD_SIZE: usize = 64;
/// The flood receiver pauses 1 ms after this many messages.
const FLOOD_PAUSE_EVERY: u32 = 32;
/// Size of a message that fills a ring.
const FILL_SIZE: usize = 65536;
/// Nonblocking sends that must have filled any sane ring (512 MiB).
const FILL_LIMIT: u32 = 8192;
/// Largest message the private port accepts.
const PRIVATE_MAX: u64 = 4096;
/// How long a thread may take to block in a call.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a port must stay empty, once every sender is done, to count
/// as drained: a message already in a ring may take a moment to be
/// noticed by the receiving node.
const QUIET_PERIOD: Duration = Duration::from_secs(2);
/// Longest one wait for another node may take in the flood and fill
/// cases: for room in its full ring, for its ring to fill up, for the
/// next message while its senders are not done.
const PEER_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// Pause between nonblocking sends retried on -EAGAIN.
const SEND_RETRY_PAUSE: Duration = Duration::from_micros(200);
/// A descriptor the kernel never issues in practice.
const UNKNOWN_DESCRIPTOR: u64 = 0x7fff_dead_0000;
/// A priority outside the defined ones.
const INVALID_PRIORITY: u32 = 99;
/// Rounds of the storm, each on a port of its own.
const STORM_ROUNDS: u32 = 6;
/// Largest storm request, and the max size of the storm ports.
const STORM_MAX: usize = 24 << 10;
/// Request sizes of the storm, which each thread cycles through.
const STORM_SIZES: [usize; 6] = [16, 100, 1000, 4096, 10000, STORM_MAX];
/// Threads answering each node's storm port.
const STORM_SERVERS: u32 = 2;
/// Threads of each node multicasting to every node in a storm round.
const STORM_MULTICASTERS: u32 = 2;
/// Threads of each node calling every node in turn in a storm round.
const STORM_CALLERS: u32 = 2;
/// Requests each multicasting or calling storm thread makes per round.
const STORM_REQUESTS: u64 = 12;
/// Lookups of every node's port the storm's query thread makes per round.
const STORM_QUERIES: u32 = 4;
/// Pause between two lookups of the storm's query thread.
const STORM_QUERY_PAUSE: Duration = Duration::from_millis(20);
/// Longest a storm request may take: well under the kernel's 60 s RPC
/// timeout, so that a request that got stuck shows as such even if it
/// is answered in the end.
const STORM_CALL_LIMIT: Duration = Duration::from_secs(20);
/// No storm thread starts a request later than this after the round
/// began, so that a thread whose every request times out cannot hold
/// the round for many RPC timeouts.
const STORM_ROUND_LIMIT: Duration = Duration::from_secs(50);
/// Threads of each node calling the dying server at once.
const DYING_CALLERS: u32 = 3;
/// Max size of the dying server's port.
const DYING_MAX: u64 = 1024;
/// How long the dying server waits for the requests it should hold
/// before it dies all the same: a lost request must not keep it, and the
/// node hosting it, waiting forever.
const DYING_RECEIVE_LIMIT: Duration = Duration::from_secs(20);
/// Latest a caller of the dying server may return after its death.
const DYING_NOTICE: Duration = Duration::from_secs(10);
/// Longest a call to the dying server may take in all.
const DYING_CALL_LIMIT: Duration = Duration::from_secs(15);

/// The node serving [`CORRUPT_PORT`] in the corrupt ring case.
const CORRUPT_SERVER: u32 = 2;
/// The node whose ring on [`CORRUPT_SERVER`] is broken.
const CORRUPT_CLIENT: u32 = 1;
/// Max size of [`CORRUPT_PORT`].
const CORRUPT_MAX: u64 = 4096;
/// Sizes of the client's requests in the corrupt ring case, in order:
/// the one left queued in the ring, the one whose header the kernel
/// corrupts, then those made once the ring broke, the first of them as
/// long as the two before, so that only its content tells it from them.
const CORRUPT_SIZES: [usize; 8] = [64, 64, 64, 1, 4096, 1000, 17, 2048];
/// Of [`CORRUPT_SIZES`], the first this many are the requests the broken
/// ring discards.
const CORRUPT_DISCARDED: usize = 2;
/// How long the client waits, once its first call sleeps, for the call's
/// request to have surely landed in the ring.
const CORRUPT_SETTLE: Duration = Duration::from_millis(300);
/// Longest a call whose request the broken ring discarded may take: its
/// caller must learn at once, not after the RPC timeout.
const CORRUPT_NOTICE: Duration = Duration::from_secs(10);

const WHY_SKIPPED: &str = "needs separate processes on the real kernel";
const WHY_NO_FAULTS: &str = "needs the real kernel's RPC fault injection";

/// The reply a service thread gives to `request`: its bytes reversed, each
/// plus one, so an echo or a reply to another request never passes.
pub fn transform(request: &[u8]) -> Vec<u8> {
    request.iter().rev().map(|b| b.wrapping_add(1)).collect()
}

/// The raw result of registering `port` with `name`.
pub(crate) fn register<K: Kernel>(kernel: &K, port: u32, max_size: u64, name: &str) -> c_long {
    // SAFETY: `name` is readable for its length during the call.
    unsafe {
        kernel.register_application(
            port,
            max_size,
            name.as_ptr().cast::<c_char>(),
            name.len() as u64,
        )
    }
}

/// The raw result of an RPC of `msg` with room for `reply.len()` bytes.
fn call_raw<K: Kernel>(
    kernel: &K,
    node: u32,
    port_priority: u32,
    msg: &[u8],
    reply: &mut [u8],
) -> c_long {
    // SAFETY: `msg` is readable and `reply` exclusively borrowed and
    // writable for their lengths during the call.
    unsafe {
        kernel.send_reply_imm(
            node,
            port_priority,
            msg.as_ptr().cast(),
            msg.len() as u64,
            reply.as_mut_ptr().cast(),
            reply.len() as u64,
        )
    }
}

fn call<K: Kernel>(kernel: &K, node: u32, port: u32, msg: &[u8], reply: &mut [u8]) -> c_long {
    call_raw(kernel, node, port, msg, reply)
}

/// The raw result of a one-way send of `msg`.
fn send<K: Kernel>(kernel: &K, node: u32, port: u32, msg: &[u8], nonblock: bool) -> c_long {
    let flags = if nonblock { SEND_NONBLOCK } else { 0 };
    // SAFETY: `msg` is readable for its length during the call.
    unsafe { kernel.send(node, port | flags, msg.as_ptr().cast(), msg.len() as u64) }
}

/// The raw result of a receive into `buf`, and the descriptor.
fn receive<K: Kernel>(kernel: &K, port: u32, buf: &mut [u8], nonblock: bool) -> (c_long, u64) {
    let mut descriptor = u64::MAX;
    let flags = if nonblock { RECV_NONBLOCK } else { 0 };
    // SAFETY: `buf` and `descriptor` are exclusively borrowed and writable
    // during the call.
    let ret = unsafe {
        kernel.receive_message(
            port,
            buf.as_mut_ptr().cast(),
            buf.len() as u64,
            &mut descriptor,
            flags,
        )
    };
    (ret, descriptor)
}

fn reply<K: Kernel>(kernel: &K, data: &[u8], descriptor: u64) -> c_long {
    // SAFETY: `data` is readable for its length during the call.
    unsafe { kernel.reply_message(data.as_ptr().cast(), data.len() as u64, descriptor) }
}

/// Replies `data` to `descriptor`, then receives from `port` into `buf`;
/// the raw result and the new descriptor.
fn reply_and_receive<K: Kernel>(
    kernel: &K,
    (data, descriptor): (&[u8], u64),
    port: u32,
    buf: &mut [u8],
    nonblock: bool,
) -> (c_long, u64) {
    let mut next = LiteReceive {
        buf: buf.as_mut_ptr() as u64,
        max_size: buf.len() as u64,
        descriptor: u64::MAX,
        port,
        flags: if nonblock { RECV_NONBLOCK } else { 0 },
    };
    // SAFETY: `data` is readable, `next` and the buffer it points to are
    // exclusively borrowed and writable during the call.
    let ret = unsafe {
        kernel.reply_and_receive_message(
            data.as_ptr().cast(),
            data.len() as u64,
            descriptor,
            &mut next,
        )
    };
    (ret, next.descriptor)
}

/// Passes when `ret` is exactly `expected` bytes.
pub(super) fn expect_len(ret: c_long, expected: usize) -> Result<(), String> {
    if ret == expected as c_long {
        Ok(())
    } else {
        Err(format!("expected {expected}, got {}", describe_result(ret)))
    }
}

/// Where `found` and `expected` first differ, for a failure message.
pub(super) fn compare(found: &[u8], expected: &[u8]) -> Result<(), String> {
    if found.len() != expected.len() {
        return Err(format!("{} B instead of {} B", found.len(), expected.len()));
    }
    pattern::verify_bytes(found, expected, 0).map_err(|m| m.to_string())
}

/// Calls `port` on `node` with `request` and checks that the reply is its
/// [`transform`].
pub(crate) fn transformed_call<K: Kernel>(
    kernel: &K,
    node: u32,
    port_priority: u32,
    request: &[u8],
) -> Result<(), String> {
    // Room to spare, so a reply that is too long shows.
    let mut answer = vec![0u8; request.len() + 16];
    let expected = transform(request);
    for (byte, want) in answer.iter_mut().zip(&expected) {
        *byte = !want;
    }
    let ret = call_raw(kernel, node, port_priority, request, &mut answer);
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

/// Calls every node's service [`CALLS_PER_CALLER`] times as caller
/// `caller` of node `me`, each call checked against its own request.
fn caller_run<K: Kernel>(kernel: &K, me: u32, nodes: u32, caller: u32) -> Result<(), String> {
    for seq in 0..CALLS_PER_CALLER {
        let target = 1 + ((seq + u64::from(caller)) % u64::from(nodes)) as u32;
        let request = identified_request(me, caller, seq);
        transformed_call(kernel, target, SERVICE_PORT, &request)
            .map_err(|e| format!("call {seq} to node {target}: {e}"))?;
    }
    Ok(())
}

/// What one service thread saw.
pub(crate) struct Served {
    pub(crate) requests: u64,
    pub(crate) one_way: u64,
    /// How its loop ended: `Ok` with the closing errno, or what went wrong.
    pub(crate) ending: Result<c_long, String>,
}

/// A service thread: answers requests on `port` with their [`transform`]
/// until the port is closed. With `combined`, answers and receives the
/// next request in one call.
pub(crate) fn serve<K: Kernel>(kernel: &K, port: u32, combined: bool) -> Served {
    let mut buf = vec![0u8; MAX_MESSAGE_SIZE as usize];
    let mut served = Served {
        requests: 0,
        one_way: 0,
        ending: Ok(0),
    };
    let (mut ret, mut descriptor) = receive(kernel, port, &mut buf, false);
    loop {
        let len = match usize::try_from(ret) {
            Ok(len) if len <= buf.len() => len,
            // Closed while waiting, or closed before the next receive.
            _ if ret == -c_long::from(libc::ESHUTDOWN) || ret == -c_long::from(libc::ENOENT) => {
                served.ending = Ok(ret);
                return served;
            }
            _ => {
                served.ending = Err(format!("receive returned {}", describe_result(ret)));
                return served;
            }
        };
        if descriptor == 0 {
            served.one_way += 1;
            (ret, descriptor) = receive(kernel, port, &mut buf, false);
            continue;
        }
        let answer = transform(&buf[..len]);
        served.requests += 1;
        if combined {
            (ret, descriptor) =
                reply_and_receive(kernel, (&answer, descriptor), port, &mut buf, false);
        } else {
            let replied = reply(kernel, &answer, descriptor);
            if replied != 0 {
                served.ending = Err(format!("reply returned {}", describe_result(replied)));
                return served;
            }
            (ret, descriptor) = receive(kernel, port, &mut buf, false);
        }
    }
}

/// A thread about to block in a call, observable from another thread.
#[derive(Default)]
struct Blocker {
    tid: AtomicI32,
    finished: AtomicBool,
}

impl Blocker {
    /// Records the calling thread; call right before the blocking call.
    fn arm(&self) {
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        self.tid
            .store(i32::try_from(tid).unwrap_or(0), Ordering::SeqCst);
    }

    /// Waits until the thread sleeps (in the call) or has returned from
    /// it; fails after [`BLOCK_TIMEOUT`].
    fn wait_until_blocked(&self, what: &str) -> Result<(), String> {
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        loop {
            if self.finished.load(Ordering::SeqCst) {
                return Ok(());
            }
            let tid = self.tid.load(Ordering::SeqCst);
            if tid != 0 && matches!(thread_state(tid), Some('S' | 'D')) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{what} did not block within {BLOCK_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
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

    /// A message arrived.
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

pub(super) fn run<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    nodes: u32,
) -> InStep {
    let registered = register(kernel, SERVICE_PORT, MAX_MESSAGE_SIZE, "lite-test-service");
    tap.check(
        &format!(
            "node {me}: register_application(port {SERVICE_PORT}, max {MAX_MESSAGE_SIZE} B) returns 0"
        ),
        expect_zero(registered),
    );
    std::thread::scope(|scope| {
        let servers: Vec<_> = if registered == 0 {
            (0..SERVER_THREADS)
                .map(|index| scope.spawn(move || serve(kernel, SERVICE_PORT, index % 2 == 1)))
                .collect()
        } else {
            Vec::new()
        };
        if let Err(out_of_step) = served_cases(kernel, tap, me, nodes) {
            // Closing the port ends the service threads, which the scope
            // waits for.
            kernel.unregister_application(SERVICE_PORT);
            return Err(out_of_step);
        }
        tap.check(
            &format!("node {me}: unregister_application(port {SERVICE_PORT}) returns 0"),
            expect_zero(kernel.unregister_application(SERVICE_PORT)),
        );
        if servers.is_empty() {
            return Ok(());
        }
        let mut requests = 0;
        let mut outcome = Ok(());
        for server in servers {
            let served = server.join().unwrap_or_else(|_| Served {
                requests: 0,
                one_way: 0,
                ending: Err("the thread panicked".into()),
            });
            requests += served.requests;
            if outcome.is_ok() {
                outcome = served.ending.map(drop);
            }
            if served.one_way > 0 && outcome.is_ok() {
                outcome = Err(format!("got {} one-way messages", served.one_way));
            }
        }
        tap.comment(&format!(
            "node {me}: the service threads answered {requests} requests"
        ));
        tap.check(
            &format!(
                "node {me}: {SERVER_THREADS} service threads answered every request and returned -ESHUTDOWN or -ENOENT once the port was closed"
            ),
            outcome,
        );
        Ok(())
    })
}

/// The cases while every node's service port is served, up to the barrier
/// after the last call to them.
fn served_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    barrier(kernel, tap, nodes, "registering the RPC service ports")?;
    service_calls(kernel, tap, me, nodes);
    concurrent_calls(kernel, tap, me, nodes);
    super::rpc_async::run(kernel, tap, me, nodes);
    barrier(kernel, tap, nodes, "the concurrent RPCs")?;
    multicast(kernel, tap, me, nodes);
    storm(kernel, tap, me, nodes)?;
    dying_server(kernel, tap, me, nodes)?;
    corrupt_ring(kernel, tap, me, nodes)?;
    flood(kernel, tap, me, nodes)?;
    fill(kernel, tap, me, nodes)?;
    closing(kernel, tap, me, nodes)?;
    private_port(kernel, tap, me);
    processes(kernel, tap, me);
    bad_input(kernel, tap, me, nodes);
    barrier(kernel, tap, nodes, "the last call to the service ports")
}

/// Port lookups and transformed calls of every size to every node.
fn service_calls<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) {
    let all: Vec<u32> = (1..=nodes).collect();
    let lookups = all.iter().try_for_each(|&node| {
        let ret = kernel.query_port(node, SERVICE_PORT);
        expect_len(ret, MAX_MESSAGE_SIZE as usize).map_err(|e| format!("node {node}: {e}"))
    });
    tap.check(
        &format!(
            "node {me}: query_port(every node, port {SERVICE_PORT}) returns {MAX_MESSAGE_SIZE}"
        ),
        lookups,
    );
    for &node in &all {
        for (index, &size) in SIZES.iter().enumerate() {
            let priority = Priority::ALL[index % Priority::ALL.len()];
            let mut request = vec![0u8; size as usize];
            let seed = pattern::seed(&[u64::from(me), u64::from(node), size, 0x52]);
            pattern::fill(seed, 0, &mut request);
            tap.check(
                &format!(
                    "node {me} -> {}: RPC of {size} B (priority {}) gets the transformed {size} B reply",
                    target_name(me, node),
                    priority.name()
                ),
                transformed_call(
                    kernel,
                    node,
                    port_priority(SERVICE_PORT, priority.as_raw()),
                    &request,
                ),
            );
        }
    }
}

/// Many threads (and child processes) calling every node at once.
fn concurrent_calls<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) {
    let real = kernel.spawns_processes();
    let mut children = Vec::new();
    let mut started = Ok(());
    if real {
        for index in 0..CALLER_CHILDREN {
            let args = [
                "rpc-callers".to_string(),
                me.to_string(),
                nodes.to_string(),
                (100 + index).to_string(),
            ];
            match spawn(&args) {
                Ok(child) => children.push(child),
                Err(e) => started = Err(e),
            }
        }
    }
    let threads: Result<(), String> = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..CALLER_THREADS)
            .map(|caller| scope.spawn(move || caller_run(kernel, me, nodes, caller)))
            .collect();
        callers
            .into_iter()
            .enumerate()
            .try_for_each(|(caller, thread)| {
                thread
                    .join()
                    .unwrap_or_else(|_| Err("panicked".into()))
                    .map_err(|e| format!("thread {caller}: {e}"))
            })
    });
    tap.check(
        &format!(
            "node {me}: {CALLER_THREADS} threads x {CALLS_PER_CALLER} concurrent RPCs to all {nodes} nodes each get the reply to their own request"
        ),
        threads,
    );
    let description = format!(
        "node {me}: {CALLER_CHILDREN} child processes x {CALLS_PER_CALLER} concurrent RPCs to all {nodes} nodes each get the reply to their own request"
    );
    if !real {
        tap.skip(&description, WHY_SKIPPED);
        return;
    }
    let mut outcome = started;
    for mut child in children {
        let points = match child.stdout.take() {
            Some(out) => collect(&mut BufReader::new(out), false),
            None => vec![("report".into(), Err("no stdout".into()))],
        };
        let finished = finish(child);
        for (what, result) in points {
            if outcome.is_ok() {
                outcome = result.map_err(|e| format!("child: {what}: {e}"));
            }
        }
        if outcome.is_ok() {
            outcome = finished;
        }
    }
    tap.check(&description, outcome);
}

fn multicast<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) {
    let targets: Vec<u32> = (1..=nodes).collect();
    let mut request = vec![0u8; 1000];
    pattern::fill(pattern::seed(&[u64::from(me), 0x4d43]), 0, &mut request);
    let expected = transform(&request);
    let max_reply = request.len() as u64;
    let mut replies = vec![0u8; request.len() * targets.len()];
    let mut lengths = vec![i64::MIN; targets.len()];
    let mut args = LiteMulticast {
        nodes: targets.as_ptr() as u64,
        lengths: lengths.as_mut_ptr() as u64,
        msg: request.as_ptr() as u64,
        size: request.len() as u64,
        replies: replies.as_mut_ptr() as u64,
        max_reply,
        count: nodes,
        port_priority: SERVICE_PORT,
    };
    // SAFETY: `args` describes live buffers of the lengths given.
    let ret = unsafe { kernel.send_reply_multicast(&mut args) };
    let outcome = expect_len(ret, targets.len()).and_then(|()| {
        for (index, &node) in targets.iter().enumerate() {
            let reply = &replies[index * request.len()..][..request.len()];
            expect_len(lengths[index] as c_long, request.len())
                .and_then(|()| compare(reply, &expected))
                .map_err(|e| format!("node {node}: {e}"))?;
        }
        Ok(())
    });
    tap.check(
        &format!(
            "node {me}: send_reply_multicast of 1000 B to all {nodes} nodes returns {nodes} and every reply is the transformed request"
        ),
        outcome,
    );

    // No node has the port: every entry fails on its own.
    let mut lengths = vec![i64::MIN; targets.len()];
    let mut args = LiteMulticast {
        lengths: lengths.as_mut_ptr() as u64,
        port_priority: UNUSED_PORT,
        ..args
    };
    // SAFETY: as above.
    let ret = unsafe { kernel.send_reply_multicast(&mut args) };
    let refused = -i64::from(libc::ECONNREFUSED);
    let outcome =
        expect_len(ret, 0).and_then(|()| match lengths.iter().position(|&l| l != refused) {
            Some(index) => Err(format!(
                "node {}: length {}",
                targets[index],
                describe_result(lengths[index] as c_long)
            )),
            None => Ok(()),
        });
    tap.check(
        &format!(
            "node {me}: send_reply_multicast to port {UNUSED_PORT} (open nowhere) returns 0 with -ECONNREFUSED for every node"
        ),
        outcome,
    );

    // A node that is not a member fails its own entry only.
    let mixed = [0, me];
    let mut lengths = [i64::MIN; 2];
    let mut replies = vec![0u8; 2 * request.len()];
    let mut args = LiteMulticast {
        nodes: mixed.as_ptr() as u64,
        lengths: lengths.as_mut_ptr() as u64,
        replies: replies.as_mut_ptr() as u64,
        count: 2,
        port_priority: SERVICE_PORT,
        ..args
    };
    // SAFETY: `args` describes live buffers for two nodes.
    let ret = unsafe { kernel.send_reply_multicast(&mut args) };
    let outcome = expect_len(ret, 1)
        .and_then(|()| expect_errno(lengths[0] as c_long, libc::EHOSTUNREACH))
        .map_err(|e| format!("node 0: {e}"))
        .and_then(|()| {
            let reply = &replies[request.len()..];
            expect_len(lengths[1] as c_long, request.len())
                .and_then(|()| compare(reply, &expected))
                .map_err(|e| format!("node {me}: {e}"))
        });
    tap.check(
        &format!(
            "node {me}: send_reply_multicast to node 0 and itself returns 1, with -EHOSTUNREACH for node 0 and its own reply"
        ),
        outcome,
    );
}

/// Port of storm round `round`: every round uses a port nobody used
/// before, so that every client ring in it is used for the first time.
fn storm_port(round: u32) -> u32 {
    STORM_FIRST_PORT + round
}

/// Size of request `seq` of storm thread `thread`: the threads cycle
/// through [`STORM_SIZES`] out of step, so that requests of different
/// sizes meet in the rings from the first request on.
fn storm_size(thread: u32, seq: u64) -> usize {
    STORM_SIZES[((seq + u64::from(thread)) % STORM_SIZES.len() as u64) as usize]
}

/// Request `seq` of storm thread `thread` of node `me` in round `round`:
/// (node, thread, round, sequence), then pattern bytes, [`storm_size`]
/// long; its [`transform`] differs from that of any other request, so a
/// reply delivered to the wrong caller is caught.
fn storm_request(me: u32, round: u32, thread: u32, seq: u64) -> Vec<u8> {
    let mut request = vec![0u8; storm_size(thread, seq)];
    let seq32 = u32::try_from(seq).unwrap_or(u32::MAX);
    for (at, value) in [me, thread, round, seq32].into_iter().enumerate() {
        request[at * 4..][..4].copy_from_slice(&value.to_le_bytes());
    }
    let seed = pattern::seed(&[
        u64::from(me),
        u64::from(thread),
        u64::from(round),
        seq,
        0x5354,
    ]);
    pattern::fill(seed, 16, &mut request[16..]);
    request
}

/// The node calling storm thread `thread` (a calling one) sends request
/// `seq` to: every node in turn, the threads out of step.
fn storm_call_target(thread: u32, seq: u64, nodes: u32) -> u32 {
    1 + ((seq + u64::from(thread)) % u64::from(nodes)) as u32
}

/// Requests node `me`'s storm port gets in a round: every node's
/// multicasts, and the calls every node's calling threads aim at it.
fn storm_requests_to(me: u32, nodes: u32) -> u64 {
    let calling = STORM_MULTICASTERS..STORM_MULTICASTERS + STORM_CALLERS;
    let calls = calling
        .flat_map(|thread| (0..STORM_REQUESTS).map(move |seq| (thread, seq)))
        .filter(|&(thread, seq)| storm_call_target(thread, seq, nodes) == me)
        .count() as u64;
    u64::from(nodes) * (u64::from(STORM_MULTICASTERS) * STORM_REQUESTS + calls)
}

/// Sets every byte of `buf` that `expected` covers to its opposite, so
/// that a reply which does not arrive, or arrives short, cannot pass.
fn poison_reply(buf: &mut [u8], expected: &[u8]) {
    for (byte, want) in buf.iter_mut().zip(expected) {
        *byte = !want;
    }
}

/// Passes when a request took at most [`STORM_CALL_LIMIT`]: a request
/// that took longer was stuck, even if it was answered in the end.
fn storm_in_time(took: Duration) -> Result<(), String> {
    if took > STORM_CALL_LIMIT {
        return Err(format!("took {took:?}, over {STORM_CALL_LIMIT:?}"));
    }
    Ok(())
}

/// Fails once [`STORM_ROUND_LIMIT`] passed since `begun`, so that a storm
/// thread whose requests time out one after the other does not hold the
/// round for many RPC timeouts.
fn storm_not_late(begun: Instant, what: &str) -> Result<(), String> {
    if begun.elapsed() > STORM_ROUND_LIMIT {
        return Err(format!(
            "{what}: not started within {STORM_ROUND_LIMIT:?} of the round's start"
        ));
    }
    Ok(())
}

/// A storm thread multicasting its requests to every node (this one
/// included) once `start` lets it go; the first failure.
fn storm_multicaster<K: Kernel>(
    kernel: &K,
    (me, nodes): (u32, u32),
    (round, port): (u32, u32),
    thread: u32,
    start: &Barrier,
) -> Result<(), String> {
    let targets: Vec<u32> = (1..=nodes).collect();
    // Room for the largest reply from every node, so that a reply to
    // another request, whatever its size, shows in its length.
    let mut replies = vec![0u8; STORM_MAX * targets.len()];
    let mut lengths = vec![i64::MIN; targets.len()];
    start.wait();
    let begun = Instant::now();
    for seq in 0..STORM_REQUESTS {
        let request = storm_request(me, round, thread, seq);
        let what = format!(
            "node {me} multicast thread {thread} request {seq} ({} B)",
            request.len()
        );
        storm_not_late(begun, &what)?;
        let expected = transform(&request);
        for slot in replies.chunks_mut(STORM_MAX) {
            poison_reply(slot, &expected);
        }
        lengths.fill(i64::MIN);
        let mut args = LiteMulticast {
            nodes: targets.as_ptr() as u64,
            lengths: lengths.as_mut_ptr() as u64,
            msg: request.as_ptr() as u64,
            size: request.len() as u64,
            replies: replies.as_mut_ptr() as u64,
            max_reply: STORM_MAX as u64,
            count: nodes,
            port_priority: port,
        };
        let began = Instant::now();
        // SAFETY: `args` describes live buffers of the lengths given.
        let ret = unsafe { kernel.send_reply_multicast(&mut args) };
        let took = began.elapsed();
        if ret < 0 {
            return Err(format!(
                "{what}: returned {} after {took:?}",
                describe_result(ret)
            ));
        }
        for (index, &node) in targets.iter().enumerate() {
            let reply = &replies[index * STORM_MAX..][..request.len()];
            expect_len(lengths[index] as c_long, request.len())
                .and_then(|()| compare(reply, &expected))
                .map_err(|e| format!("{what} to node {node}: {e} (after {took:?})"))?;
        }
        expect_len(ret, targets.len())
            .and_then(|()| storm_in_time(took))
            .map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// A storm thread calling every node in turn once `start` lets it go;
/// the first failure.
fn storm_caller<K: Kernel>(
    kernel: &K,
    (me, nodes): (u32, u32),
    (round, port): (u32, u32),
    thread: u32,
    start: &Barrier,
) -> Result<(), String> {
    let mut answer = vec![0u8; STORM_MAX];
    start.wait();
    let begun = Instant::now();
    for seq in 0..STORM_REQUESTS {
        let target = storm_call_target(thread, seq, nodes);
        let request = storm_request(me, round, thread, seq);
        let what = format!(
            "node {me} calling thread {thread} request {seq} ({} B) to node {target}",
            request.len()
        );
        storm_not_late(begun, &what)?;
        let expected = transform(&request);
        poison_reply(&mut answer, &expected);
        let began = Instant::now();
        let ret = call(kernel, target, port, &request, &mut answer);
        let took = began.elapsed();
        expect_len(ret, request.len())
            .and_then(|()| compare(&answer[..request.len()], &expected))
            .and_then(|()| storm_in_time(took))
            .map_err(|e| format!("{what}: {e} (after {took:?})"))?;
    }
    Ok(())
}

/// A storm thread looking up every node's port now and then while the
/// others call: a lookup connects to the port too, so it races with the
/// first requests as a second first call would.
fn storm_querier<K: Kernel>(
    kernel: &K,
    (me, nodes): (u32, u32),
    port: u32,
    start: &Barrier,
) -> Result<(), String> {
    start.wait();
    for pass in 0..STORM_QUERIES {
        if pass > 0 {
            std::thread::sleep(STORM_QUERY_PAUSE);
        }
        for node in 1..=nodes {
            let began = Instant::now();
            let ret = kernel.query_port(node, port);
            let took = began.elapsed();
            expect_len(ret, STORM_MAX)
                .and_then(|()| storm_in_time(took))
                .map_err(|e| {
                    format!("node {me} query {pass} of port {port} on node {node}: {e} (after {took:?})")
                })?;
        }
    }
    Ok(())
}

/// Runs this node's storm threads, all released at the same instant; the
/// failures of all of them.
fn storm_threads<K: Kernel>(kernel: &K, me: u32, nodes: u32, round: u32) -> Result<(), String> {
    let port = storm_port(round);
    let senders = STORM_MULTICASTERS + STORM_CALLERS;
    // The query thread too.
    let start = Barrier::new(senders as usize + 1);
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let start = &start;
        let mut threads: Vec<_> = (0..senders)
            .map(|thread| {
                scope.spawn(move || {
                    if thread < STORM_MULTICASTERS {
                        storm_multicaster(kernel, (me, nodes), (round, port), thread, start)
                    } else {
                        storm_caller(kernel, (me, nodes), (round, port), thread, start)
                    }
                })
            })
            .collect();
        threads.push(scope.spawn(move || storm_querier(kernel, (me, nodes), port, start)));
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|_| Err("a storm thread panicked".into()))
            })
            .collect()
    });
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// Every node calls and multicasts to every node at once, from several
/// threads, on a port none of them used before: the first requests of a
/// client to a (port, node) must not trample each other however many
/// threads make them at the same time. Fresh ports make many first uses.
fn storm<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    for round in 0..STORM_ROUNDS {
        storm_round(kernel, tap, me, nodes, round)?;
    }
    Ok(())
}

/// One storm round on its fresh port: served by [`STORM_SERVERS`]
/// threads on every node, stormed by every node at once, then closed.
fn storm_round<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    nodes: u32,
    round: u32,
) -> InStep {
    let port = storm_port(round);
    let registered = register(kernel, port, STORM_MAX as u64, "lite-test-storm");
    std::thread::scope(|scope| {
        let servers: Vec<_> = if registered == 0 {
            (0..STORM_SERVERS)
                .map(|index| scope.spawn(move || serve(kernel, port, index % 2 == 1)))
                .collect()
        } else {
            Vec::new()
        };
        let stormed = barrier(
            kernel,
            tap,
            nodes,
            &format!("registering the port {port} of storm round {round}"),
        )
        .map(|()| storm_threads(kernel, me, nodes, round))
        // Nobody calls the port any more once every node passed this.
        .and_then(|stormed| {
            barrier(kernel, tap, nodes, &format!("storm round {round}")).map(|()| stormed)
        });
        // Closing the port ends the service threads' receives.
        let closed = kernel.unregister_application(port);
        let stormed = stormed?;
        let served: Vec<Served> = servers
            .into_iter()
            .map(|server| {
                server.join().unwrap_or_else(|_| Served {
                    requests: 0,
                    one_way: 0,
                    ending: Err("the thread panicked".into()),
                })
            })
            .collect();
        let expected = storm_requests_to(me, nodes);
        let answered: u64 = served.iter().map(|s| s.requests).sum();
        let each: Vec<String> = served.iter().map(|s| s.requests.to_string()).collect();
        tap.comment(&format!(
            "node {me}: storm round {round}: the service threads answered [{}] requests, {answered} of the {expected} sent to port {port} of this node",
            each.join(", ")
        ));
        let mut outcome = expect_zero(registered)
            .map_err(|e| format!("register_application(port {port}): {e}"))
            .and(stormed)
            .and(
                expect_zero(closed)
                    .map_err(|e| format!("unregister_application(port {port}): {e}")),
            );
        for (index, served) in served.into_iter().enumerate() {
            if outcome.is_ok() {
                outcome = served
                    .ending
                    .map(drop)
                    .map_err(|e| format!("service thread {index}: {e}"));
            }
            if served.one_way > 0 && outcome.is_ok() {
                outcome = Err(format!(
                    "service thread {index} got {} one-way messages",
                    served.one_way
                ));
            }
        }
        if answered > expected && outcome.is_ok() {
            outcome = Err(format!(
                "the service threads answered {answered} requests, more than the {expected} sent: some were served twice"
            ));
        }
        tap.check(
            &format!(
                "node {me}: storm round {round} on port {port}, first use: {STORM_MULTICASTERS} multicasting and {STORM_CALLERS} calling threads x {STORM_REQUESTS} requests of {} B to {STORM_MAX} B to all {nodes} nodes, started at once with port lookups, each get the transformed reply within {STORM_CALL_LIMIT:?}",
                STORM_SIZES[0]
            ),
            outcome,
        );
        Ok(())
    })
}

/// How the dying server's process ends once it holds its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Death {
    /// It returns from main.
    Exit,
    /// Its parent kills it with SIGKILL.
    Kill,
}

impl Death {
    /// Its name on the child's command line.
    fn arg(self) -> &'static str {
        match self {
            Death::Exit => "exit",
            Death::Kill => "kill",
        }
    }
}

/// One round of the dying server case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DyingRound {
    death: Death,
    /// Fresh, so that every caller's request is a first use of its ring.
    port: u32,
    /// The node whose child process serves the port.
    server: u32,
    /// Requests the server receives, of the [`DYING_CALLERS`] of every
    /// node, before it dies.
    held: u32,
}

/// The rounds of the dying server case, the same on every node: the
/// server process exits holding every node's requests, then one is
/// killed holding two thirds of them, the rest still queued or on their
/// way. Each round's server is on another node when there are several.
fn dying_rounds(nodes: u32) -> [DyingRound; 2] {
    [
        DyingRound {
            death: Death::Exit,
            port: DYING_PORTS[0],
            server: if nodes >= 2 { 2 } else { 1 },
            held: DYING_CALLERS * nodes,
        },
        DyingRound {
            death: Death::Kill,
            port: DYING_PORTS[1],
            server: nodes,
            held: (DYING_CALLERS - 1) * nodes,
        },
    ]
}

/// What one caller of the dying server saw.
#[derive(Clone, Copy, Debug)]
struct DyingCall {
    /// The raw result.
    ret: c_long,
    /// How long the call took.
    took: Duration,
    /// When it returned.
    returned: Instant,
}

/// Calls the dying server once `start` lets this thread go.
fn dying_call<K: Kernel>(
    kernel: &K,
    me: u32,
    round: DyingRound,
    caller: u32,
    start: &Barrier,
) -> DyingCall {
    let request = identified_request(me, 200 + caller, u64::from(round.port));
    // Never answered.
    let mut answer = [0u8; 64];
    start.wait();
    let began = Instant::now();
    let ret = call(kernel, round.server, round.port, &request, &mut answer);
    DyingCall {
        ret,
        took: began.elapsed(),
        returned: Instant::now(),
    }
}

/// Checks this node's calls to a server that was dead by `died`: each
/// must fail with -ECONNRESET (its request was received) or, unless
/// `all_received`, -ECONNREFUSED (it was not), within [`DYING_NOTICE`] of
/// the death and [`DYING_CALL_LIMIT`] in all. The number of each.
fn judge_dying(
    me: u32,
    calls: &[Result<DyingCall, String>],
    died: Instant,
    all_received: bool,
) -> Result<(u32, u32), String> {
    let (mut reset, mut refused) = (0, 0);
    for (caller, outcome) in calls.iter().enumerate() {
        let what = format!("node {me} caller {caller}");
        let call = outcome.as_ref().map_err(|e| format!("{what}: {e}"))?;
        if call.ret == -c_long::from(libc::ECONNRESET) {
            reset += 1;
        } else if call.ret == -c_long::from(libc::ECONNREFUSED) && !all_received {
            refused += 1;
        } else {
            let wanted = if all_received {
                "-ECONNRESET, every request having been received"
            } else {
                "-ECONNRESET or -ECONNREFUSED"
            };
            return Err(format!(
                "{what}: got {} after {:?}, expected {wanted}",
                describe_result(call.ret),
                call.took
            ));
        }
        let late = call.returned.saturating_duration_since(died);
        if late > DYING_NOTICE {
            return Err(format!(
                "{what}: returned {late:?} after the server's death, over {DYING_NOTICE:?}"
            ));
        }
        if call.took > DYING_CALL_LIMIT {
            return Err(format!(
                "{what}: the call took {:?}, over {DYING_CALL_LIMIT:?}",
                call.took
            ));
        }
    }
    Ok((reset, refused))
}

/// The dying server's process and its reports.
struct DyingServer {
    child: Child,
    out: BufReader<ChildStdout>,
}

/// Starts the child serving `round`'s port and waits until it registered
/// the port.
fn start_dying_server(round: DyingRound) -> Result<DyingServer, String> {
    let mut child = spawn(&[
        "rpc-dying".into(),
        round.port.to_string(),
        round.held.to_string(),
        round.death.arg().into(),
    ])?;
    let Some(out) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("no stdout".into());
    };
    let mut server = DyingServer {
        child,
        out: BufReader::new(out),
    };
    let registered = collect(&mut server.out, true)
        .into_iter()
        .try_for_each(|(what, result)| {
            result.map_err(|e| format!("the server process: {what}: {e}"))
        });
    match registered {
        Ok(()) => Ok(server),
        Err(e) => {
            let _ = server.child.kill();
            let _ = server.child.wait();
            Err(e)
        }
    }
}

/// Lets the dying server die as `death` says once it holds its requests
/// (for a kill, it says `ready` again, then waits to be killed), and
/// waits until it is gone: what it reported and how it ended.
fn end_dying_server(mut server: DyingServer, death: Death) -> Result<(), String> {
    let points = collect(&mut server.out, death == Death::Kill);
    let ended = match death {
        Death::Exit => finish(server.child),
        Death::Kill => {
            let killed = server
                .child
                .kill()
                .map_err(|e| format!("killing the server process: {e}"));
            let status = server
                .child
                .wait()
                .map_err(|e| format!("waiting for the server process: {e}"));
            killed.and(status).and_then(|status| match status.signal() {
                Some(libc::SIGKILL) => Ok(()),
                _ => Err(format!(
                    "the server process ended with {status}, not SIGKILL"
                )),
            })
        }
    };
    for (what, result) in points {
        result.map_err(|e| format!("the server process: {what}: {e}"))?;
    }
    ended
}

/// A server process on one node receives requests from every node and
/// dies without answering them: every caller, on every node, must learn
/// at once, not after the RPC timeout.
fn dying_server<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    let real = kernel.spawns_processes();
    for (index, round) in dying_rounds(nodes).into_iter().enumerate() {
        let name = ["a", "b"][index];
        let DyingRound { port, server, .. } = round;
        let all_received = round.held == DYING_CALLERS * nodes;
        let description = match round.death {
            Death::Exit => format!(
                "node {me} -> {}: dying server round {name}: {DYING_CALLERS} concurrent RPCs to port {port}, all received with every other node's by a server process that then exits without answering, each return -ECONNRESET within {DYING_NOTICE:?} of the exit",
                target_name(me, server)
            ),
            Death::Kill => format!(
                "node {me} -> {}: dying server round {name}: {DYING_CALLERS} concurrent RPCs to port {port}, {} of the cluster's {} received by a server process then killed with SIGKILL, each return -ECONNRESET or -ECONNREFUSED within {DYING_NOTICE:?} of the kill",
                target_name(me, server),
                round.held,
                DYING_CALLERS * nodes
            ),
        };
        let started = if real && me == server {
            Some(start_dying_server(round))
        } else {
            None
        };
        let barrier_passed = barrier(
            kernel,
            tap,
            nodes,
            &format!("starting the dying server of round {name} on node {server}"),
        );
        if let Err(out_of_step) = barrier_passed {
            if let Some(Ok(mut started)) = started {
                let _ = started.child.kill();
                let _ = started.child.wait();
            }
            return Err(out_of_step);
        }
        let start = Barrier::new(DYING_CALLERS as usize);
        let (calls, ended, died) = std::thread::scope(|scope| {
            let callers: Vec<_> = if real {
                (0..DYING_CALLERS)
                    .map(|caller| {
                        let start = &start;
                        scope.spawn(move || dying_call(kernel, me, round, caller, start))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let ended =
                started.map(|started| started.and_then(|s| end_dying_server(s, round.death)));
            // Entered by the server's node once its process is gone: when
            // it returns anywhere, the server is dead.
            let ended_everywhere = barrier(
                kernel,
                tap,
                nodes,
                &format!("the dying server of round {name} on node {server} ended"),
            );
            let died = Instant::now();
            // Out of step, they end with the server's death or their RPC
            // timeout all the same.
            let calls: Vec<Result<DyingCall, String>> = callers
                .into_iter()
                .map(|caller| caller.join().map_err(|_| "panicked".to_string()))
                .collect();
            ended_everywhere.map(|()| (calls, ended, died))
        })?;
        if !real {
            tap.skip(&description, WHY_SKIPPED);
            continue;
        }
        let judged = judge_dying(me, &calls, died, all_received);
        if let Ok((reset, refused)) = judged {
            tap.comment(&format!(
                "node {me}: dying server round {name}: {reset} callers got -ECONNRESET, {refused} -ECONNREFUSED"
            ));
        }
        let closed = expect_errno(kernel.query_port(server, port), libc::ECONNREFUSED)
            .map_err(|e| format!("query_port(node {server}, port {port}) after the death: {e}"));
        let outcome = ended.unwrap_or(Ok(())).and(judged.map(drop)).and(closed);
        tap.check(&description, outcome);
    }
    Ok(())
}

/// The server and client nodes of the corrupt ring case, the same on
/// every node; `None` for a single node, which has no other to call.
fn corrupt_roles(nodes: u32) -> Option<(u32, u32)> {
    (nodes >= 2).then_some((CORRUPT_SERVER, CORRUPT_CLIENT))
}

/// Request `index` of node `client` in the corrupt ring case,
/// [`CORRUPT_SIZES`]`[index]` long: pattern bytes that tell it from every
/// other, so that the server knows which call each request it got is.
fn corrupt_request(client: u32, index: usize) -> Vec<u8> {
    let mut request = vec![0u8; CORRUPT_SIZES[index]];
    let seed = pattern::seed(&[u64::from(client), index as u64, 0x4352]);
    pattern::fill(seed, 0, &mut request);
    request
}

/// The name of the client's request `index` in failure messages.
fn corrupt_call_name(index: usize) -> String {
    let size = CORRUPT_SIZES[index];
    match index {
        0 => format!("the queued call ({size} B)"),
        1 => format!("the faulty call ({size} B)"),
        _ => format!(
            "call {} after the break ({size} B)",
            index + 1 - CORRUPT_DISCARDED
        ),
    }
}

/// Writes `node` to this node's [`RPC_FAULT_FILE`]: the next request to
/// `node` gets a corrupt header, or, for 0, no request does.
fn write_fault<K: Kernel>(kernel: &K, node: u32) -> Result<(), String> {
    kernel
        .write_debugfs(RPC_FAULT_FILE, &format!("{node}\n"))
        .ok_or("this kernel has no debugfs")?
        .map_err(|e| {
            format!(
                "writing {node} to {DEBUGFS_DIR}/{RPC_FAULT_FILE}: {}",
                describe_error(&e)
            )
        })
}

/// Calls [`CORRUPT_PORT`] on `server` with request `index` of `client`;
/// the raw result and how long the call took.
fn corrupt_call<K: Kernel>(
    kernel: &K,
    server: u32,
    client: u32,
    index: usize,
) -> (c_long, Duration) {
    let request = corrupt_request(client, index);
    // Room for the reply, should one come after all.
    let mut answer = vec![0u8; request.len() + 16];
    let began = Instant::now();
    let ret = call(kernel, server, CORRUPT_PORT, &request, &mut answer);
    (ret, began.elapsed())
}

/// Passes when request `index`, which the broken ring discarded, failed
/// its call with -EPROTO within [`CORRUPT_NOTICE`].
fn expect_discarded(index: usize, ret: c_long, took: Duration) -> Result<(), String> {
    let name = corrupt_call_name(index);
    expect_errno(ret, libc::EPROTO).map_err(|e| format!("{name}: {e} after {took:?}"))?;
    if took > CORRUPT_NOTICE {
        return Err(format!(
            "{name}: returned -EPROTO after {took:?}, over {CORRUPT_NOTICE:?}"
        ));
    }
    Ok(())
}

/// The client's calls that break the ring: the first stays queued, since
/// nobody receives from the port yet; once it surely landed, the kernel
/// is told to corrupt the header of the next request to `server`, which
/// the second call makes. Both must fail with -EPROTO within
/// [`CORRUPT_NOTICE`]. The fault is disarmed once the second call
/// returned, posted or not. The failures.
fn corrupt_faulty_calls<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    server: u32,
    client: u32,
) -> Vec<String> {
    let looked = expect_len(
        kernel.query_port(server, CORRUPT_PORT),
        CORRUPT_MAX as usize,
    )
    .map_err(|e| format!("query_port(node {server}, port {CORRUPT_PORT}): {e}"));
    // Disarming first shows that the file can be written before a call is
    // left waiting for the fault, and that no fault armed before is left.
    if let Err(e) = looked.and_then(|()| write_fault(kernel, 0)) {
        return vec![e];
    }
    let queued = Blocker::default();
    let mut failures = Vec::new();
    let calls = std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            queued.arm();
            let call = corrupt_call(kernel, server, client, 0);
            queued.finished.store(true, Ordering::SeqCst);
            call
        });
        // Once the caller sleeps in the call its request is on its way; a
        // moment later it is surely in the ring.
        if let Err(e) = queued.wait_until_blocked("the queued call") {
            failures.push(e);
        }
        std::thread::sleep(CORRUPT_SETTLE);
        let faulty = match write_fault(kernel, server) {
            Ok(()) => {
                let second = scope.spawn(|| corrupt_call(kernel, server, client, 1));
                Some(second.join().map_err(|_| "panicked".to_string()))
            }
            Err(e) => {
                failures.push(format!("arming the fault: {e}"));
                None
            }
        };
        // The faulty call may have failed before posting its request: no
        // later request may meet the fault instead.
        if let Err(e) = write_fault(kernel, 0) {
            failures.push(format!("disarming the fault: {e}"));
        }
        let first = first.join().map_err(|_| "panicked".to_string());
        [Some(first), faulty]
    });
    let mut seen = Vec::new();
    for (index, outcome) in calls.into_iter().enumerate() {
        let Some(outcome) = outcome else { continue };
        let judged = outcome
            .map_err(|e| format!("{}: {e}", corrupt_call_name(index)))
            .and_then(|(ret, took)| {
                seen.push(format!(
                    "{} returned {} after {took:?}",
                    corrupt_call_name(index),
                    describe_result(ret)
                ));
                expect_discarded(index, ret, took)
            });
        if let Err(e) = judged {
            failures.push(e);
        }
    }
    if !seen.is_empty() {
        tap.comment(&format!("node {client}: {}", seen.join(", ")));
    }
    failures
}

/// The client's calls once the ring broke: each must get its transformed
/// reply, the first finding the port afresh. The failures; stops after a
/// call that took over [`CORRUPT_NOTICE`], since a ring that still
/// discards requests would hold each of the rest for the RPC timeout.
fn corrupt_calls_after<K: Kernel>(kernel: &K, server: u32, client: u32) -> Vec<String> {
    let mut failures = Vec::new();
    for index in CORRUPT_DISCARDED..CORRUPT_SIZES.len() {
        let request = corrupt_request(client, index);
        let began = Instant::now();
        let served = transformed_call(kernel, server, CORRUPT_PORT, &request);
        let took = began.elapsed();
        if let Err(e) = served {
            failures.push(format!("{}: {e} after {took:?}", corrupt_call_name(index)));
            if took > CORRUPT_NOTICE {
                failures.push("the later calls were not made".into());
                break;
            }
        }
    }
    failures
}

/// What the corrupt ring case's receiver got.
struct CorruptReceived {
    /// The requests, in the order received.
    requests: Vec<Vec<u8>>,
    one_way: u64,
    /// How its loop ended: `Ok` with the closing errno, or the first thing
    /// that went wrong.
    ending: Result<c_long, String>,
}

/// The server's receiver, started once the ring broke: answers requests
/// on [`CORRUPT_PORT`] with their [`transform`] and keeps them, until the
/// port is closed. A failed reply is noted but does not stop it, so that
/// no later caller waits for the RPC timeout.
fn corrupt_receiver<K: Kernel>(kernel: &K) -> CorruptReceived {
    let mut buf = vec![0u8; CORRUPT_MAX as usize];
    let mut got = CorruptReceived {
        requests: Vec::new(),
        one_way: 0,
        ending: Ok(0),
    };
    let mut failure = None;
    loop {
        let (ret, descriptor) = receive(kernel, CORRUPT_PORT, &mut buf, false);
        let len = match usize::try_from(ret) {
            Ok(len) if len <= buf.len() => len,
            // Closed while waiting, or closed before the next receive.
            _ if ret == -c_long::from(libc::ESHUTDOWN) || ret == -c_long::from(libc::ENOENT) => {
                got.ending = failure.map_or(Ok(ret), Err);
                return got;
            }
            _ => {
                got.ending =
                    Err(failure
                        .unwrap_or_else(|| format!("receive returned {}", describe_result(ret))));
                return got;
            }
        };
        if descriptor == 0 {
            got.one_way += 1;
            continue;
        }
        let request = buf[..len].to_vec();
        let replied = reply(kernel, &transform(&request), descriptor);
        if replied != 0 {
            failure.get_or_insert(format!(
                "reply to a {len} B request returned {}",
                describe_result(replied)
            ));
        }
        got.requests.push(request);
    }
}

/// Checks what the server received once the ring from `client` broke:
/// every request the client made afterwards, once each, and nothing
/// else, above all none of the requests the broken ring discarded.
fn judge_corrupt_received(client: u32, received: &[Vec<u8>]) -> Result<(), String> {
    let mut times = [0u32; CORRUPT_SIZES.len()];
    for (nth, request) in received.iter().enumerate() {
        let index = (0..CORRUPT_SIZES.len())
            .find(|&index| *request == corrupt_request(client, index))
            .ok_or_else(|| {
                format!(
                    "request {nth} received ({} B) is none node {client} sent",
                    request.len()
                )
            })?;
        if index < CORRUPT_DISCARDED {
            return Err(format!(
                "request {nth} received is {} of node {client}, which the broken ring should have discarded",
                corrupt_call_name(index)
            ));
        }
        times[index] += 1;
    }
    let wrong: Vec<String> = (CORRUPT_DISCARDED..CORRUPT_SIZES.len())
        .filter(|&index| times[index] != 1)
        .map(|index| {
            format!(
                "{} received {} times",
                corrupt_call_name(index),
                times[index]
            )
        })
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} requests received: {}",
            received.len(),
            wrong.join(", ")
        ))
    }
}

/// The server's verdict once its port is closed (`closed`, the raw
/// result) and its receiver is done.
fn judge_corrupt_server(client: u32, closed: c_long, got: &CorruptReceived) -> Result<(), String> {
    let mut failures = Vec::new();
    if let Err(e) = expect_zero(closed) {
        failures.push(format!("unregister_application(port {CORRUPT_PORT}): {e}"));
    }
    if let Err(e) = &got.ending {
        failures.push(format!("the receiver: {e}"));
    }
    if got.one_way > 0 {
        failures.push(format!("the receiver got {} one-way messages", got.one_way));
    }
    if let Err(e) = judge_corrupt_received(client, &got.requests) {
        failures.push(e);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// A client's ring on a server is broken on purpose: the client leaves a
/// call's request queued on a port nobody receives from yet, then has its
/// kernel corrupt the header of its next request there
/// ([`RPC_FAULT_FILE`]). The server must discard the ring's requests and
/// tell the client, whose two callers then fail at once with -EPROTO
/// instead of waiting for the RPC timeout; the client's next calls find
/// the port afresh and are served, and the receiver started meanwhile
/// gets those and nothing of before. The server is [`CORRUPT_SERVER`],
/// the client [`CORRUPT_CLIENT`]; the other nodes only enter the
/// barriers. Skipped alike on every node, its barriers with it, when the
/// kernel cannot inject the fault or there is no second node.
fn corrupt_ring<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    let port = CORRUPT_PORT;
    let (server, client) = corrupt_roles(nodes).unwrap_or((CORRUPT_SERVER, CORRUPT_CLIENT));
    let client_description = format!(
        "node {me} -> {}: a request with an injected bad header breaks the ring of port {port}: the queued call and the faulty one return -EPROTO within {CORRUPT_NOTICE:?}, and the next calls are served",
        target_name(me, server)
    );
    let server_description = format!(
        "node {me}: after its ring from node {client} broke, port {port} receives only the requests sent afterwards"
    );
    let skipped = if !kernel.injects_rpc_faults() {
        Some(WHY_NO_FAULTS)
    } else if corrupt_roles(nodes).is_none() {
        Some("needs two nodes or more")
    } else {
        None
    };
    if let Some(why) = skipped {
        if me == client {
            tap.skip(&client_description, why);
        }
        if me == server {
            tap.skip(&server_description, why);
        }
        return Ok(());
    }

    let registered =
        (me == server).then(|| register(kernel, port, CORRUPT_MAX, "lite-test-corrupt"));
    // Out of step, the port goes before the run ends.
    let close = |out_of_step| {
        if registered == Some(0) {
            kernel.unregister_application(port);
        }
        out_of_step
    };
    barrier(
        kernel,
        tap,
        nodes,
        &format!("registering port {port} on node {server} with nobody receiving"),
    )
    .map_err(close)?;
    let mut failures = if me == client {
        corrupt_faulty_calls(kernel, tap, server, client)
    } else {
        Vec::new()
    };
    // The ring broke before any receiver ran.
    barrier(
        kernel,
        tap,
        nodes,
        &format!("the calls of node {client} that the broken ring of port {port} on node {server} discarded"),
    )
    .map_err(close)?;
    std::thread::scope(|scope| {
        let receiver = (registered == Some(0)).then(|| scope.spawn(|| corrupt_receiver(kernel)));
        if me == client {
            failures.extend(corrupt_calls_after(kernel, server, client));
        }
        // Nobody calls the port any more once every node passed this.
        // Out of step, closing the port ends the receiver, which the scope
        // waits for.
        barrier(
            kernel,
            tap,
            nodes,
            &format!("the calls of node {client} to port {port} on node {server} after the break"),
        )
        .map_err(close)?;
        if me == client {
            let outcome = if failures.is_empty() {
                Ok(())
            } else {
                Err(failures.join("; "))
            };
            tap.check(&client_description, outcome);
        }
        let Some(registered) = registered else {
            return Ok(());
        };
        let outcome = match receiver {
            None => expect_zero(registered)
                .map_err(|e| format!("register_application(port {port}): {e}")),
            Some(receiver) => {
                // Closing the port ends the receiver's wait.
                let closed = kernel.unregister_application(port);
                let got = receiver.join().unwrap_or_else(|_| CorruptReceived {
                    requests: Vec::new(),
                    one_way: 0,
                    ending: Err("the thread panicked".into()),
                });
                tap.comment(&format!(
                    "node {me}: port {port} received {} requests once the ring from node {client} broke, of the {} node {client} made",
                    got.requests.len(),
                    CORRUPT_SIZES.len() - CORRUPT_DISCARDED
                ));
                judge_corrupt_server(client, closed, &got)
            }
        };
        tap.check(&server_description, outcome);
        Ok(())
    })
}

/// A flood message: sender, sequence number, then pattern bytes.
fn flood_message(sender: u32, seq: u32) -> [u8; FLOOD_SIZE] {
    let mut message = [0u8; FLOOD_SIZE];
    message[..4].copy_from_slice(&sender.to_le_bytes());
    message[4..8].copy_from_slice(&seq.to_le_bytes());
    let seed = pattern::seed(&[u64::from(sender), u64::from(seq), 0x464c]);
    pattern::fill(seed, 8, &mut message[8..]);
    message
}

/// Sends the flood to `target`: blocking sends, and every fourth message
/// a nonblocking one retried while it returns -EAGAIN. Counts the retries.
/// A send waits at most [`PEER_WAIT_LIMIT`] for room in the target's ring.
fn flood_sender<K: Kernel>(
    kernel: &K,
    me: u32,
    target: u32,
    retries: &AtomicU64,
) -> Result<(), String> {
    let mut room = Deadline::after(
        PEER_WAIT_LIMIT,
        format!("room in node {target}'s ring of port {FLOOD_PORT}, which it drains"),
    );
    Watchdog::guard(|watchdog| {
        for seq in 0..FLOOD_MESSAGES {
            let message = flood_message(me, seq);
            room.restart();
            let ret = if seq % 4 == 3 {
                let retried = retry_while_busy(&room, &[libc::EAGAIN], SEND_RETRY_PAUSE, || {
                    send(kernel, target, FLOOD_PORT, &message, true)
                })
                .map_err(|e| format!("message {seq} to node {target}: {e}"))?;
                retries.fetch_add(retried.busy, Ordering::Relaxed);
                retried.ret
            } else {
                let (ret, interrupted) =
                    watchdog.call(&room, || send(kernel, target, FLOOD_PORT, &message, false));
                if interrupted && ret != 0 {
                    return Err(format!(
                        "message {seq} to node {target}: {} ({})",
                        describe_result(ret),
                        room.expired()
                    ));
                }
                ret
            };
            expect_zero(ret).map_err(|e| format!("message {seq} to node {target}: {e}"))?;
        }
        Ok(())
    })
}

/// The slow receiver of the flood: takes messages without blocking,
/// pausing now and then, until every sender is done and the port is
/// drained ([`DrainEnd`]); checks that each sender's messages arrive once
/// and in order.
fn flood_receiver<K: Kernel>(kernel: &K, nodes: u32, all_sent: &AtomicBool) -> Result<(), String> {
    let mut next = vec![0u32; nodes as usize + 1];
    let mut buf = [0u8; FLOOD_SIZE * 2];
    let mut received = 0u32;
    let mut failure = None;
    let expected = nodes * FLOOD_MESSAGES;
    let mut end = DrainEnd::new(
        all_sent,
        format!("the next of the {expected} flood messages"),
    );
    loop {
        let (ret, descriptor) = receive(kernel, FLOOD_PORT, &mut buf, true);
        if ret < 0 {
            if ret != -c_long::from(libc::EAGAIN) {
                failure.get_or_insert(format!("receive returned {}", describe_result(ret)));
            }
            let complete = received == expected;
            if complete && all_sent.load(Ordering::SeqCst) {
                break;
            }
            match end.empty() {
                Ok(true) => break,
                Ok(false) => continue,
                Err(e) => {
                    failure.get_or_insert(format!("{e} ({received} arrived)"));
                    break;
                }
            }
        }
        end.message();
        // Keep draining after a failure, so that no sender stays blocked.
        let checked = (|| {
            expect_len(ret, FLOOD_SIZE)?;
            if descriptor != 0 {
                return Err(format!("descriptor {descriptor:#x} for a one-way message"));
            }
            let word =
                |at: usize| u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
            let (sender, seq) = (word(0), word(4));
            let expected = next
                .get_mut(sender as usize)
                .filter(|_| sender > 0)
                .ok_or(format!("message from unknown sender {sender}"))?;
            if seq != *expected {
                return Err(format!(
                    "node {sender}: message {seq} arrived when {} was due",
                    *expected
                ));
            }
            compare(&buf[..FLOOD_SIZE], &flood_message(sender, seq))
                .map_err(|m| format!("node {sender} message {seq}: {m}"))?;
            *expected += 1;
            Ok(())
        })();
        if let Err(e) = checked {
            failure.get_or_insert(e);
            continue;
        }
        received += 1;
        if received.is_multiple_of(FLOOD_PAUSE_EVERY) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    match (1..=nodes).find(|&n| next[n as usize] != FLOOD_MESSAGES) {
        Some(n) => Err(format!(
            "node {n}: {} of {FLOOD_MESSAGES} messages arrived",
            next[n as usize]
        )),
        None => Ok(()),
    }
}

fn flood<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    tap.check(
        &format!("node {me}: register_application(port {FLOOD_PORT}, max 256 B) returns 0"),
        expect_zero(register(kernel, FLOOD_PORT, 256, "lite-test-flood")),
    );
    let close = |out_of_step| {
        kernel.unregister_application(FLOOD_PORT);
        out_of_step
    };
    barrier(kernel, tap, nodes, "registering the flood ports").map_err(close)?;
    let all_sent = AtomicBool::new(false);
    let retries = AtomicU64::new(0);
    let (sent, received) = std::thread::scope(|scope| {
        let receiver = scope.spawn(|| flood_receiver(kernel, nodes, &all_sent));
        let senders: Vec<_> = (1..=nodes)
            .map(|target| {
                let retries = &retries;
                scope.spawn(move || flood_sender(kernel, me, target, retries))
            })
            .collect();
        let sent = senders
            .into_iter()
            .try_for_each(|sender| sender.join().unwrap_or_else(|_| Err("panicked".into())));
        // Every node's messages are in the rings once its sends returned.
        let in_step = barrier(kernel, tap, nodes, "every node sent its flood");
        // Out of step too, so that the receiver ends.
        all_sent.store(true, Ordering::SeqCst);
        let received = receiver.join().unwrap_or_else(|_| Err("panicked".into()));
        in_step.map(|()| (sent, received))
    })
    .map_err(close)?;
    tap.check(
        &format!(
            "node {me}: {FLOOD_MESSAGES} one-way {FLOOD_SIZE} B messages to port {FLOOD_PORT} of each of the {nodes} nodes sent (blocking, and nonblocking retried on -EAGAIN)"
        ),
        sent,
    );
    tap.comment(&format!(
        "node {me}: nonblocking flood sends returned -EAGAIN {} times",
        retries.load(Ordering::Relaxed)
    ));
    tap.check(
        &format!(
            "node {me}: the slow receiver on port {FLOOD_PORT} got every node's {FLOOD_MESSAGES} messages exactly once, in order per sender"
        ),
        received,
    );
    barrier(kernel, tap, nodes, "draining the flood").map_err(close)?;
    tap.check(
        &format!("node {me}: unregister_application(port {FLOOD_PORT}) returns 0"),
        expect_zero(kernel.unregister_application(FLOOD_PORT)),
    );
    Ok(())
}

/// Fill messages: kind 0 carries its sequence number, kind 1 the count of
/// kind 0 messages sent. The bytes after the header are the same pattern
/// in every message, so that making one is a copy.
struct FillMessages {
    template: Vec<u8>,
}

impl FillMessages {
    fn new() -> FillMessages {
        let mut template = vec![0u8; FILL_SIZE];
        pattern::fill(pattern::seed(&[0x4649]), 5, &mut template[5..]);
        FillMessages { template }
    }

    fn make(&self, kind: u8, value: u32) -> Vec<u8> {
        let mut message = self.template.clone();
        message[0] = kind;
        message[1..5].copy_from_slice(&value.to_le_bytes());
        message
    }
}

/// Takes this node's fill port's messages until the count arrives; checks
/// that the data messages were all there, in order. Does not block, so
/// that it ends with an error if the port stays empty once every count
/// was sent (`counts_sent`).
fn fill_drain<K: Kernel>(
    kernel: &K,
    messages: &FillMessages,
    source: u32,
    counts_sent: &AtomicBool,
) -> Result<u32, String> {
    let mut buf = vec![0u8; FILL_SIZE];
    let mut expected = 0u32;
    let mut end = DrainEnd::new(counts_sent, format!("the count of node {source}'s fill"));
    // Keeps draining after a failure, so that the sender's blocking send
    // of the count returns.
    let mut failure = None;
    loop {
        let (ret, _) = receive(kernel, FILL_PORT, &mut buf, true);
        if ret < 0 {
            if ret != -c_long::from(libc::EAGAIN) {
                failure.get_or_insert(format!("receive returned {}", describe_result(ret)));
            }
            let missing = match end.empty() {
                Ok(false) => continue,
                Ok(true) => format!("{expected} messages arrived, then no count"),
                Err(e) => format!("{e} ({expected} messages arrived)"),
            };
            return Err(failure.unwrap_or(missing));
        }
        end.message();
        let value = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
        let checked = expect_len(ret, FILL_SIZE)
            .and_then(|()| compare(&buf, &messages.make(buf[0], value)))
            .map_err(|m| format!("message {value}: {m}"));
        if let Err(e) = checked {
            failure.get_or_insert(e);
            continue;
        }
        if buf[0] == 1 {
            return match failure {
                Some(e) => Err(e),
                None if value == expected => Ok(expected),
                None => Err(format!("{expected} messages arrived, {value} were sent")),
            };
        }
        if value != expected {
            failure.get_or_insert(format!("message {value} arrived when {expected} was due"));
        }
        expected = value.wrapping_add(1);
    }
}

/// Nonblocking sends of fill messages to `target` until its ring is full
/// (-EAGAIN), within [`PEER_WAIT_LIMIT`]: a receiver that drains the port
/// meanwhile (out of step) would keep room in it for ever. How many went
/// in (also on failure).
fn fill_ring<K: Kernel>(
    kernel: &K,
    target: u32,
    messages: &FillMessages,
) -> (u32, Result<(), String>) {
    let full = Deadline::after(
        PEER_WAIT_LIMIT,
        format!("node {target}'s ring of port {FILL_PORT}, which nobody drains yet, to fill up (-EAGAIN)"),
    );
    let mut count = 0u32;
    let filled = loop {
        if count == FILL_LIMIT {
            break Err(format!(
                "{count} messages ({} MiB) went in without -EAGAIN",
                (u64::from(count) * FILL_SIZE as u64) >> 20
            ));
        }
        if full.passed() {
            break Err(format!("{} ({count} messages went in)", full.expired()));
        }
        let ret = send(kernel, target, FILL_PORT, &messages.make(0, count), true);
        if ret == -c_long::from(libc::EAGAIN) && count > 0 {
            break Ok(());
        }
        if let Err(e) = expect_zero(ret) {
            break Err(format!("message {count}: {e}"));
        }
        count += 1;
    };
    (count, filled)
}

fn fill<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    let max = FILL_SIZE as u64;
    tap.check(
        &format!("node {me}: register_application(port {FILL_PORT}, max {max} B) returns 0"),
        expect_zero(register(kernel, FILL_PORT, max, "lite-test-fill")),
    );
    let close = |out_of_step| {
        kernel.unregister_application(FILL_PORT);
        out_of_step
    };
    barrier(kernel, tap, nodes, "registering the fill ports").map_err(close)?;
    let target = next_node(me, nodes);
    let source = (1..=nodes)
        .find(|&n| next_node(n, nodes) == me)
        .unwrap_or(me);
    let messages = FillMessages::new();
    let (count, filled) = fill_ring(kernel, target, &messages);
    tap.check(
        &format!(
            "node {me} -> {}: nonblocking {FILL_SIZE} B sends to port {FILL_PORT}, which nobody receives from yet, return -EAGAIN once the ring is full",
            target_name(me, target)
        ),
        filled,
    );
    tap.comment(&format!(
        "node {me}: the ring on node {target} took {count} messages"
    ));
    barrier(kernel, tap, nodes, "filling the rings").map_err(close)?;
    let counts_sent = AtomicBool::new(false);
    let (counted, drained) = std::thread::scope(|scope| {
        let drain = scope.spawn(|| fill_drain(kernel, &messages, source, &counts_sent));
        // Blocks until the drain on the target made room.
        let room = Deadline::after(
            PEER_WAIT_LIMIT,
            format!("room for the count in node {target}'s full ring of port {FILL_PORT}, which it drains"),
        );
        let counted = match interrupt_at(&room, || {
            send(kernel, target, FILL_PORT, &messages.make(1, count), false)
        }) {
            (0, _) => Ok(()),
            (ret, true) => Err(format!(
                "sending the count: {} ({})",
                describe_result(ret),
                room.expired()
            )),
            (ret, false) => expect_zero(ret).map_err(|e| format!("sending the count: {e}")),
        };
        // Every count is in its ring once the sends returned.
        let in_step = barrier(kernel, tap, nodes, "sending the counts of the fill");
        // Out of step too, so that the drain ends.
        counts_sent.store(true, Ordering::SeqCst);
        let drained = drain.join().unwrap_or_else(|_| Err("panicked".into()));
        in_step.map(|()| (counted, drained))
    })
    .map_err(close)?;
    let closed = expect_zero(kernel.unregister_application(FILL_PORT))
        .map_err(|e| format!("unregister_application: {e}"));
    tap.check(
        &format!(
            "node {me} -> {}: a blocking send to the full ring returns 0 once its receiver drains it",
            target_name(me, target)
        ),
        counted,
    );
    tap.check(
        &format!(
            "node {me}: port {FILL_PORT} held every message node {source} sent before -EAGAIN, in order and nothing more, and was unregistered"
        ),
        drained.and(closed).map(drop),
    );
    Ok(())
}

/// Calls on closed ports, and closing ports under waiting callers and
/// receivers.
fn closing<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) -> InStep {
    let all = 1..=nodes;
    let mut answer = [0u8; 16];
    let refused = all.clone().try_for_each(|node| {
        expect_errno(
            call(kernel, node, UNUSED_PORT, b"anyone?", &mut answer),
            libc::ECONNREFUSED,
        )
        .map_err(|e| format!("node {node}: {e}"))
    });
    tap.check(
        &format!(
            "node {me}: send_reply_imm to port {UNUSED_PORT} (open nowhere) of every node returns -ECONNREFUSED"
        ),
        refused,
    );
    let refused = all.clone().try_for_each(|node| {
        expect_errno(
            send(kernel, node, UNUSED_PORT, b"anyone?", false),
            libc::ECONNREFUSED,
        )
        .map_err(|e| format!("node {node}: {e}"))
    });
    tap.check(
        &format!(
            "node {me}: send to port {UNUSED_PORT} (open nowhere) of every node returns -ECONNREFUSED"
        ),
        refused,
    );
    let refused = all.clone().try_for_each(|node| {
        expect_errno(kernel.query_port(node, UNUSED_PORT), libc::ECONNREFUSED)
            .map_err(|e| format!("node {node}: {e}"))
    });
    tap.check(
        &format!("node {me}: query_port(every node, port {UNUSED_PORT}) returns -ECONNREFUSED"),
        refused,
    );

    for (port, name) in [(WAIT_PORT, "lite-test-wait"), (IDLE_PORT, "lite-test-idle")] {
        tap.check(
            &format!("node {me}: register_application(port {port}) returns 0"),
            expect_zero(register(kernel, port, 64, name)),
        );
    }
    // Out of step, the ports go before the run ends: that ends the waits
    // on this node's ports.
    let close = |out_of_step| {
        for port in [WAIT_PORT, IDLE_PORT] {
            kernel.unregister_application(port);
        }
        out_of_step
    };
    barrier(kernel, tap, nodes, "registering the ports that will close").map_err(close)?;
    let target = next_node(me, nodes);
    let (caller, receiver) = (Blocker::default(), Blocker::default());
    let (called, received) = std::thread::scope(|scope| {
        let calling = scope.spawn(|| {
            let mut answer = [0u8; 16];
            caller.arm();
            let ret = call(kernel, target, WAIT_PORT, b"will you answer?", &mut answer);
            caller.finished.store(true, Ordering::SeqCst);
            ret
        });
        let receiving = scope.spawn(|| {
            let mut buf = [0u8; 64];
            receiver.arm();
            let (ret, _) = receive(kernel, IDLE_PORT, &mut buf, false);
            receiver.finished.store(true, Ordering::SeqCst);
            ret
        });
        let blocked = caller
            .wait_until_blocked("the caller")
            .and(receiver.wait_until_blocked("the receiver"));
        if let Err(e) = blocked {
            tap.comment(&format!("node {me}: {e}"));
        }
        // The caller waits for the next node to close its port, or for
        // the RPC timeout.
        barrier(
            kernel,
            tap,
            nodes,
            "every node's caller and receiver blocked",
        )
        .map_err(close)?;
        for port in [WAIT_PORT, IDLE_PORT] {
            tap.check(
                &format!("node {me}: unregister_application(port {port}) with a call or receive waiting returns 0"),
                expect_zero(kernel.unregister_application(port)),
            );
        }
        let failed = -c_long::from(libc::EIO);
        Ok((
            calling.join().unwrap_or(failed),
            receiving.join().unwrap_or(failed),
        ))
    })?;
    tap.check(
        &format!(
            "node {me} -> {}: an RPC waiting on port {WAIT_PORT} returns -ECONNREFUSED when its owner unregisters the port",
            target_name(me, target)
        ),
        expect_errno(called, libc::ECONNREFUSED),
    );
    tap.check(
        &format!(
            "node {me}: a receive waiting on port {IDLE_PORT} returns -ESHUTDOWN when the port is unregistered"
        ),
        expect_errno(received, libc::ESHUTDOWN),
    );
    barrier(kernel, tap, nodes, "closing ports under waiting calls")?;

    tap.check(
        &format!("node {me}: port {WAIT_PORT} can be registered again after unregister"),
        expect_zero(register(kernel, WAIT_PORT, 128, "lite-test-again")),
    );
    tap.check(
        &format!("node {me}: query_port of port {WAIT_PORT}, registered again with max 128 B, returns 128"),
        expect_len(kernel.query_port(me, WAIT_PORT), 128),
    );
    let too_long = [0u8; 129];
    tap.check(
        &format!("node {me}: send_reply_imm of 129 B to its port {WAIT_PORT} (max 128) returns -EMSGSIZE"),
        expect_errno(call(kernel, me, WAIT_PORT, &too_long, &mut answer), libc::EMSGSIZE),
    );
    tap.check(
        &format!("node {me}: send of 129 B to its port {WAIT_PORT} (max 128) returns -EMSGSIZE"),
        expect_errno(
            send(kernel, me, WAIT_PORT, &too_long, false),
            libc::EMSGSIZE,
        ),
    );
    tap.check(
        &format!("node {me}: unregister_application(port {WAIT_PORT}) returns 0 again"),
        expect_zero(kernel.unregister_application(WAIT_PORT)),
    );
    tap.check(
        &format!(
            "node {me}: unregister_application(port {WAIT_PORT}) a second time returns -ENOENT"
        ),
        expect_errno(kernel.unregister_application(WAIT_PORT), libc::ENOENT),
    );
    Ok(())
}

/// A call from another thread of this process to the private port, which
/// this thread receives and answers; `steps` runs between receiving the
/// request and the end, with the descriptor, and must answer it. Returns
/// the caller's raw result and reply.
fn private_call<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    (request, max_reply): (&[u8], usize),
    steps: impl FnOnce(&mut Tap<W>, u64),
) -> (c_long, Vec<u8>) {
    std::thread::scope(|scope| {
        let calling = scope.spawn(move || {
            let mut answer = vec![0u8; max_reply];
            let ret = call(kernel, me, PRIVATE_PORT, request, &mut answer);
            (ret, answer)
        });
        let mut buf = [0u8; PRIVATE_MAX as usize];
        let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, false);
        let outcome = expect_len(ret, request.len())
            .and_then(|()| compare(&buf[..request.len()], request))
            .and_then(|()| match descriptor {
                0 => Err("descriptor 0 for a request".to_string()),
                _ => Ok(()),
            });
        tap.check(
            &format!(
                "node {me}: receive_message on port {PRIVATE_PORT} returns the {} B request with a descriptor",
                request.len()
            ),
            outcome,
        );
        steps(tap, descriptor);
        calling
            .join()
            .unwrap_or((-c_long::from(libc::EIO), Vec::new()))
    })
}

/// Descriptor and receive errors on a port only this node uses.
fn private_port<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    tap.check(
        &format!(
            "node {me}: register_application(port {PRIVATE_PORT}, max {PRIVATE_MAX} B) returns 0"
        ),
        expect_zero(register(
            kernel,
            PRIVATE_PORT,
            PRIVATE_MAX,
            "lite-test-private",
        )),
    );
    let fitting = [0x5au8; 16];
    let (ret, answer) = private_call(kernel, tap, me, (b"question", 16), |tap, descriptor| {
        tap.check(
            "reply_message of 17 B to a caller accepting 16 returns -EMSGSIZE",
            expect_errno(reply(kernel, &[0u8; 17], descriptor), libc::EMSGSIZE),
        );
        let unmapped: *const c_void = ptr::without_provenance(8);
        // SAFETY: address 8 lies in the never-mapped first page; the
        // kernel must fail with -EFAULT without touching it.
        let ret = unsafe { kernel.reply_message(unmapped, 16, descriptor) };
        tap.check(
            "reply_message from unmapped buffer address 0x8 returns -EFAULT",
            expect_errno(ret, libc::EFAULT),
        );
        tap.check(
            "after -EMSGSIZE and -EFAULT the descriptor still takes a 16 B reply",
            expect_zero(reply(kernel, &fitting, descriptor)),
        );
        tap.check(
            "reply_message to an answered descriptor returns -ENOENT",
            expect_errno(reply(kernel, &fitting, descriptor), libc::ENOENT),
        );
    });
    tap.check(
        &format!("node {me}: the caller gets the 16 B reply"),
        expect_len(ret, 16).and_then(|()| compare(&answer[..16], &fitting)),
    );
    for (what, descriptor) in [
        ("descriptor 0 (one-way)".to_string(), 0),
        (
            format!("unknown descriptor {UNKNOWN_DESCRIPTOR:#x}"),
            UNKNOWN_DESCRIPTOR,
        ),
    ] {
        tap.check(
            &format!("reply_message to {what} returns -ENOENT"),
            expect_errno(reply(kernel, b"x", descriptor), libc::ENOENT),
        );
    }

    // The next message does not fit: it stays queued.
    let mut message = [0u8; 100];
    pattern::fill(pattern::seed(&[u64::from(me), 0x100]), 0, &mut message);
    tap.check(
        &format!("node {me}: send of 100 B to its own port {PRIVATE_PORT} returns 0"),
        expect_zero(send(kernel, me, PRIVATE_PORT, &message, false)),
    );
    let mut buf = [0u8; 100];
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut buf[..99], true);
    tap.check(
        "receive_message into 99 B with a 100 B message next returns -EMSGSIZE",
        expect_errno(ret, libc::EMSGSIZE),
    );
    let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, true);
    tap.check(
        "the message stayed queued: a 100 B receive gets it, with descriptor 0 (one-way)",
        expect_len(ret, 100)
            .and_then(|()| compare(&buf, &message))
            .and_then(|()| match descriptor {
                0 => Ok(()),
                other => Err(format!("descriptor {other:#x}")),
            }),
    );
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut buf, true);
    tap.check(
        "receive_message with LITE_RECV_NONBLOCK on an empty port returns -EAGAIN",
        expect_errno(ret, libc::EAGAIN),
    );

    // A failed reply receives nothing.
    let short = *b"short note";
    let ret = send(kernel, me, PRIVATE_PORT, &short, false);
    let (failed, _) = reply_and_receive(
        kernel,
        (b"x", UNKNOWN_DESCRIPTOR),
        PRIVATE_PORT,
        &mut buf,
        true,
    );
    let (ret_after, _) = receive(kernel, PRIVATE_PORT, &mut buf, true);
    tap.check(
        "reply_and_receive_message with an unknown descriptor returns -ENOENT and leaves the next message queued",
        expect_zero(ret)
            .and_then(|()| expect_errno(failed, libc::ENOENT))
            .and_then(|()| expect_len(ret_after, short.len()))
            .and_then(|()| compare(&buf[..short.len()], &short)),
    );

    let answer_bytes = transform(b"combined");
    let (ret, answer) = private_call(kernel, tap, me, (b"combined", 64), |tap, descriptor| {
        let mut next = [0u8; 64];
        let (ret, _) = reply_and_receive(
            kernel,
            (&answer_bytes, descriptor),
            PRIVATE_PORT,
            &mut next,
            true,
        );
        tap.check(
            "reply_and_receive_message with LITE_RECV_NONBLOCK answers, then returns -EAGAIN on the empty port",
            expect_errno(ret, libc::EAGAIN),
        );
    });
    tap.check(
        &format!("node {me}: the caller gets the reply sent by reply_and_receive_message"),
        expect_len(ret, answer_bytes.len())
            .and_then(|()| compare(&answer[..answer_bytes.len()], &answer_bytes)),
    );

    let unmapped: *mut c_void = ptr::without_provenance_mut(8);
    let ret = send(kernel, me, PRIVATE_PORT, &short, false);
    let mut descriptor = 0u64;
    // SAFETY: address 8 lies in the never-mapped first page; the kernel
    // must fail with -EFAULT without writing there.
    let bad_buf = unsafe {
        kernel.receive_message(PRIVATE_PORT, unmapped, 64, &mut descriptor, RECV_NONBLOCK)
    };
    tap.check(
        "receive_message into unmapped buffer address 0x8 with a message queued returns -EFAULT",
        expect_zero(ret).and_then(|()| expect_errno(bad_buf, libc::EFAULT)),
    );
    let ret = send(kernel, me, PRIVATE_PORT, &short, false);
    let mut small = [0u8; 64];
    // SAFETY: as above for the descriptor address.
    let bad_descriptor = unsafe {
        kernel.receive_message(
            PRIVATE_PORT,
            small.as_mut_ptr().cast(),
            64,
            unmapped.cast(),
            RECV_NONBLOCK,
        )
    };
    tap.check(
        "receive_message with descriptor address 0x8 and a message queued returns -EFAULT",
        expect_zero(ret).and_then(|()| expect_errno(bad_descriptor, libc::EFAULT)),
    );
    let (ret, _) = receive_with_flags(kernel, PRIVATE_PORT, &mut small, 0x2);
    tap.check(
        "receive_message with unknown flag 0x2 returns -EINVAL",
        expect_errno(ret, libc::EINVAL),
    );
    tap.check(
        &format!("node {me}: unregister_application(port {PRIVATE_PORT}) returns 0"),
        expect_zero(kernel.unregister_application(PRIVATE_PORT)),
    );
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut small, true);
    tap.check(
        "receive_message on an unregistered port returns -ENOENT",
        expect_errno(ret, libc::ENOENT),
    );
}

fn receive_with_flags<K: Kernel>(
    kernel: &K,
    port: u32,
    buf: &mut [u8],
    flags: u32,
) -> (c_long, u64) {
    let mut descriptor = 0;
    // SAFETY: `buf` and `descriptor` are exclusively borrowed and writable.
    let ret = unsafe {
        kernel.receive_message(
            port,
            buf.as_mut_ptr().cast(),
            buf.len() as u64,
            &mut descriptor,
            flags,
        )
    };
    (ret, descriptor)
}

/// What another process may and may not do with this process's port and
/// descriptors, and what happens when a process exits holding a request.
fn processes<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let foreign = format!(
        "node {me}: another process cannot unregister this process's port or answer its descriptor, but can receive from the port"
    );
    let exiting = format!(
        "node {me}: a process exiting without answering a request fails its caller with -ECONNRESET and closes its port"
    );
    if !kernel.spawns_processes() {
        tap.skip(&foreign, WHY_SKIPPED);
        tap.skip(&exiting, WHY_SKIPPED);
        return;
    }
    tap.check(&foreign, foreign_process(kernel, me));
    tap.check(&exiting, exiting_process(kernel, me));
}

/// Runs a child `foreign` case against a descriptor and a queued one-way
/// message of this process's private port.
fn foreign_process<K: Kernel>(kernel: &K, me: u32) -> Result<(), String> {
    expect_zero(register(
        kernel,
        PRIVATE_PORT,
        PRIVATE_MAX,
        "lite-test-private",
    ))
    .map_err(|e| format!("register_application: {e}"))?;
    let outcome = std::thread::scope(|scope| -> Result<(), String> {
        let calling = scope.spawn(|| {
            let mut answer = [0u8; 16];
            let ret = call(kernel, me, PRIVATE_PORT, b"mine", &mut answer);
            expect_len(ret, 4).and_then(|()| compare(&answer[..4], b"MINE"))
        });
        let mut buf = [0u8; 64];
        let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, false);
        expect_len(ret, 4).map_err(|e| format!("receive: {e}"))?;
        let queued = expect_zero(send(kernel, me, PRIVATE_PORT, FOREIGN_NOTE, false))
            .map_err(|e| format!("send: {e}"));
        let child = queued.and_then(|()| {
            spawn(&[
                "rpc-foreign".into(),
                PRIVATE_PORT.to_string(),
                descriptor.to_string(),
            ])
        });
        let points = child.and_then(|mut child| {
            let out = child.stdout.take().ok_or("no stdout")?;
            let points = collect(&mut BufReader::new(out), false);
            finish(child).map(|()| points)
        });
        // Answer whatever happened, so the caller does not wait forever.
        let answered = expect_zero(reply(kernel, b"MINE", descriptor))
            .map_err(|e| format!("the owner's reply after the child: {e}"));
        let called = calling
            .join()
            .unwrap_or_else(|_| Err("panicked".into()))
            .map_err(|e| format!("the caller: {e}"));
        let points = points?;
        if points.len() != 3 {
            return Err(format!("the child reported {} of 3 checks", points.len()));
        }
        for (what, result) in points {
            result.map_err(|e| format!("child: {what}: {e}"))?;
        }
        answered.and(called)
    });
    let closed = expect_zero(kernel.unregister_application(PRIVATE_PORT))
        .map_err(|e| format!("unregister_application: {e}"));
    outcome.and(closed)
}

/// The one-way message a foreign process receives.
const FOREIGN_NOTE: &[u8] = b"for any process";

fn exiting_process<K: Kernel>(kernel: &K, me: u32) -> Result<(), String> {
    let mut child = spawn(&["rpc-exit".into(), EXIT_PORT.to_string()])?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut out = BufReader::new(out);
    let mut points = collect(&mut out, true);
    let called = if points.iter().all(|(_, result)| result.is_ok()) {
        let mut answer = [0u8; 16];
        call(kernel, me, EXIT_PORT, b"last words?", &mut answer)
    } else {
        0
    };
    points.extend(collect(&mut out, false));
    let finished = finish(child);
    for (what, result) in points {
        result.map_err(|e| format!("child: {what}: {e}"))?;
    }
    finished?;
    expect_errno(called, libc::ECONNRESET).map_err(|e| format!("the caller: {e}"))?;
    expect_errno(kernel.query_port(me, EXIT_PORT), libc::ECONNREFUSED)
        .map_err(|e| format!("query_port after the exit: {e}"))
}

/// Entry point of the RPC child processes: `args` are the child kind and
/// its arguments. Returns the exit status, or `None` for another kind.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    let say = |line: String| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    };
    let report = |what: &str, outcome: Result<(), String>| match outcome {
        Ok(()) => say(format!("ok {what}")),
        Err(reason) => say(format!("fail {what}: {reason}")),
    };
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0) };
    match args.first().map(String::as_str)? {
        "rpc-callers" => {
            let (me, nodes, caller) = (number(1) as u32, number(2) as u32, number(3) as u32);
            report(
                &format!("caller {caller}: {CALLS_PER_CALLER} RPCs"),
                caller_run(kernel, me, nodes.max(1), caller),
            );
            Some(0)
        }
        "rpc-foreign" => {
            let (port, descriptor) = (number(1) as u32, number(2));
            report(
                "unregister_application of the parent's port returns -EPERM",
                expect_errno(kernel.unregister_application(port), libc::EPERM),
            );
            report(
                "reply_message to the parent's descriptor returns -ENOENT",
                expect_errno(reply(kernel, b"THEIRS", descriptor), libc::ENOENT),
            );
            let mut buf = [0u8; 64];
            let (ret, _) = receive(kernel, port, &mut buf, true);
            report(
                "receive_message from the parent's port gets the queued message",
                expect_len(ret, FOREIGN_NOTE.len())
                    .and_then(|()| compare(&buf[..FOREIGN_NOTE.len()], FOREIGN_NOTE)),
            );
            Some(0)
        }
        "rpc-dying" => {
            let (port, held) = (number(1) as u32, number(2));
            let killed = args.get(3).map(String::as_str) == Some(Death::Kill.arg());
            let registered = expect_zero(register(kernel, port, DYING_MAX, "lite-test-dying"));
            let ok = registered.is_ok();
            report("register_application", registered);
            say("ready".into());
            if !ok {
                return Some(1);
            }
            // Without blocking, so that it gives up if a request never
            // comes.
            let mut buf = [0u8; DYING_MAX as usize];
            let deadline = Instant::now() + DYING_RECEIVE_LIMIT;
            let mut received = 0;
            let mut failure = None;
            while received < held {
                let (ret, descriptor) = receive(kernel, port, &mut buf, true);
                if ret == -c_long::from(libc::EAGAIN) {
                    if Instant::now() > deadline {
                        failure =
                            Some(format!("{received} arrived within {DYING_RECEIVE_LIMIT:?}"));
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                if ret <= 0 || descriptor == 0 {
                    failure = Some(format!(
                        "receive returned {} with descriptor {descriptor:#x}",
                        describe_result(ret)
                    ));
                    break;
                }
                received += 1;
            }
            report(
                &format!("receive {held} requests and hold them unanswered"),
                failure.map_or(Ok(()), Err),
            );
            if killed {
                // The parent kills it instead of answering.
                say("ready".into());
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
            Some(0)
        }
        "rpc-exit" => {
            let port = number(1) as u32;
            let registered = expect_zero(register(kernel, port, 64, "lite-test-exit"));
            let ok = registered.is_ok();
            report("register_application", registered);
            say("ready".into());
            if !ok {
                return Some(1);
            }
            let mut buf = [0u8; 64];
            let (ret, descriptor) = receive(kernel, port, &mut buf, false);
            report(
                "receive a request and exit without answering it",
                if ret > 0 && descriptor != 0 {
                    Ok(())
                } else {
                    Err(format!("receive returned {}", describe_result(ret)))
                },
            );
            Some(0)
        }
        _ => None,
    }
}

/// Invalid arguments to every call, each with its exact errno.
fn bad_input<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) {
    let long_name = "n".repeat(MAX_PORT_NAME + 1);
    let registrations: [(String, u32, u64, &str, i32); 6] = [
        (
            format!("port {MAX_PORTS} (>= LITE_MAX_PORTS)"),
            MAX_PORTS,
            64,
            "x",
            libc::EINVAL,
        ),
        ("port 1000".into(), 1000, 64, "x", libc::EINVAL),
        ("max size 0".into(), UNUSED_PORT, 0, "x", libc::EINVAL),
        (
            format!(
                "max size {} (over LITE_MAX_MESSAGE_SIZE)",
                MAX_MESSAGE_SIZE + 1
            ),
            UNUSED_PORT,
            MAX_MESSAGE_SIZE + 1,
            "x",
            libc::EINVAL,
        ),
        (
            format!("a {} B name (over LITE_MAX_PORT_NAME)", MAX_PORT_NAME + 1),
            UNUSED_PORT,
            64,
            &long_name,
            libc::EINVAL,
        ),
        (
            format!("port {SERVICE_PORT} (already registered)"),
            SERVICE_PORT,
            64,
            "x",
            libc::EADDRINUSE,
        ),
    ];
    for (what, port, max, name, errno) in registrations {
        let ret = register(kernel, port, max, name);
        if ret == 0 && port != SERVICE_PORT {
            kernel.unregister_application(port);
        }
        tap.check(
            &format!(
                "register_application of {what} returns -{}",
                crate::errno::errno_name(errno)
            ),
            expect_errno(ret, errno),
        );
    }
    // SAFETY: a null name must be rejected without being read.
    let ret = unsafe { kernel.register_application(UNUSED_PORT, 64, ptr::null(), 4) };
    if ret == 0 {
        kernel.unregister_application(UNUSED_PORT);
    }
    tap.check(
        "register_application with a NULL name of 4 B returns -EFAULT",
        expect_errno(ret, libc::EFAULT),
    );
    tap.check(
        &format!("unregister_application(port {MAX_PORTS}) returns -EINVAL"),
        expect_errno(kernel.unregister_application(MAX_PORTS), libc::EINVAL),
    );
    tap.check(
        &format!("unregister_application(port {UNUSED_PORT}), never registered, returns -ENOENT"),
        expect_errno(kernel.unregister_application(UNUSED_PORT), libc::ENOENT),
    );

    // Calls, sends and lookups aimed at nodes and ports that cannot be.
    let absent = MAX_NODES - 1;
    let mut targets: Vec<(String, u32, u32, i32)> = vec![
        (
            format!("port {MAX_PORTS} (>= LITE_MAX_PORTS) of node {me}"),
            me,
            MAX_PORTS,
            libc::EINVAL,
        ),
        (
            format!("port {SERVICE_PORT} of node 0 (never a member)"),
            0,
            SERVICE_PORT,
            libc::EHOSTUNREACH,
        ),
        (
            format!("port {SERVICE_PORT} of node {MAX_NODES} (>= LITE_MAX_NODES)"),
            MAX_NODES,
            SERVICE_PORT,
            libc::EINVAL,
        ),
    ];
    let unreachable = format!("port {SERVICE_PORT} of node {absent} (not in the cluster)");
    if nodes < absent {
        targets.push((unreachable, absent, SERVICE_PORT, libc::EHOSTUNREACH));
    } else {
        for call in ["query_port", "send_reply_imm", "send"] {
            tap.skip(
                &format!("{call} to {unreachable}"),
                "the cluster is large enough to include it",
            );
        }
    }
    let errno_name = crate::errno::errno_name;
    let mut answer = [0u8; 16];
    for (what, node, port, errno) in &targets {
        tap.check(
            &format!("query_port of {what} returns -{}", errno_name(*errno)),
            expect_errno(kernel.query_port(*node, *port), *errno),
        );
        tap.check(
            &format!("send_reply_imm to {what} returns -{}", errno_name(*errno)),
            expect_errno(call(kernel, *node, *port, b"hello", &mut answer), *errno),
        );
        tap.check(
            &format!("send to {what} returns -{}", errno_name(*errno)),
            expect_errno(send(kernel, *node, *port, b"hello", false), *errno),
        );
    }

    let service = |priority| port_priority(SERVICE_PORT, priority);
    let unmapped: *const c_void = ptr::without_provenance(8);
    let calls: [(String, c_long, i32); 5] = [
        (
            format!("with priority {INVALID_PRIORITY}"),
            call_raw(kernel, me, service(INVALID_PRIORITY), b"hello", &mut answer),
            libc::EINVAL,
        ),
        (
            "of 0 B".into(),
            call_raw(kernel, me, service(PRIORITY_NONE), &[], &mut answer),
            libc::EINVAL,
        ),
        (
            "from unmapped address 0x8".into(),
            // SAFETY: address 8 is never mapped; `answer` is writable.
            unsafe {
                kernel.send_reply_imm(
                    me,
                    SERVICE_PORT,
                    unmapped,
                    16,
                    answer.as_mut_ptr().cast(),
                    16,
                )
            },
            libc::EFAULT,
        ),
        (
            "with its reply to unmapped address 0x8".into(),
            // SAFETY: the request is readable; address 8 is never mapped.
            unsafe {
                kernel.send_reply_imm(
                    me,
                    SERVICE_PORT,
                    b"hello".as_ptr().cast(),
                    5,
                    unmapped.cast_mut(),
                    16,
                )
            },
            libc::EFAULT,
        ),
        (
            "with a NULL request of 16 B".into(),
            // SAFETY: a null request must be rejected without being read.
            unsafe {
                kernel.send_reply_imm(
                    me,
                    SERVICE_PORT,
                    ptr::null(),
                    16,
                    answer.as_mut_ptr().cast(),
                    16,
                )
            },
            libc::EFAULT,
        ),
    ];
    for (what, ret, errno) in calls {
        tap.check(
            &format!(
                "send_reply_imm to port {SERVICE_PORT} of node {me} {what} returns -{}",
                errno_name(errno)
            ),
            expect_errno(ret, errno),
        );
    }
    let sends: [(String, c_long, i32); 3] = [
        (
            format!("with priority {INVALID_PRIORITY}"),
            // SAFETY: the message is readable.
            unsafe { kernel.send(me, service(INVALID_PRIORITY), b"hi".as_ptr().cast(), 2) },
            libc::EINVAL,
        ),
        (
            "of 0 B".into(),
            // SAFETY: nothing is read for 0 bytes.
            unsafe { kernel.send(me, SERVICE_PORT, b"hi".as_ptr().cast(), 0) },
            libc::EINVAL,
        ),
        (
            "from unmapped address 0x8".into(),
            // SAFETY: address 8 is never mapped.
            unsafe { kernel.send(me, SERVICE_PORT, unmapped, 16) },
            libc::EFAULT,
        ),
    ];
    for (what, ret, errno) in sends {
        tap.check(
            &format!(
                "send to port {SERVICE_PORT} of node {me} {what} returns -{}",
                errno_name(errno)
            ),
            expect_errno(ret, errno),
        );
    }
    let mut buf = [0u8; 16];
    let (ret, _) = receive(kernel, MAX_PORTS, &mut buf, true);
    tap.check(
        &format!("receive_message on port {MAX_PORTS} (>= LITE_MAX_PORTS) returns -EINVAL"),
        expect_errno(ret, libc::EINVAL),
    );

    bad_multicasts(kernel, tap, me);
    bad_remote_buffers(kernel, tap, me, nodes);
}

/// Unreadable requests and unwritable reply buffers of calls to another
/// node, inline and staged: the kernel copies them straight between the
/// caller's memory and the device's buffers, and must fail with -EFAULT and
/// leave the call's reply slot and the server's ring usable.
fn bad_remote_buffers<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, nodes: u32) {
    if nodes < 2 {
        return;
    }
    let peer = me % nodes + 1;
    let unmapped: *mut c_void = ptr::without_provenance_mut(8);
    for size in [16usize, 4096, 65536] {
        let request = vec![0x3cu8; size];
        let mut answer = vec![0u8; size];
        // SAFETY: address 8 is never mapped; `answer` is writable.
        let ret = unsafe {
            kernel.send_reply_imm(
                peer,
                SERVICE_PORT,
                unmapped.cast_const(),
                size as u64,
                answer.as_mut_ptr().cast(),
                size as u64,
            )
        };
        tap.check(
            &format!(
                "node {me} -> node {peer}: send_reply_imm of {size} B from unmapped address 0x8 returns -EFAULT"
            ),
            expect_errno(ret, libc::EFAULT),
        );
        // SAFETY: the request is readable; address 8 is never mapped.
        let ret = unsafe {
            kernel.send_reply_imm(
                peer,
                SERVICE_PORT,
                request.as_ptr().cast(),
                size as u64,
                unmapped,
                size as u64,
            )
        };
        tap.check(
            &format!(
                "node {me} -> node {peer}: send_reply_imm of {size} B with its reply to unmapped address 0x8 returns -EFAULT"
            ),
            expect_errno(ret, libc::EFAULT),
        );
        tap.check(
            &format!(
                "node {me} -> node {peer}: after those, an RPC of {size} B gets the transformed reply"
            ),
            transformed_call(kernel, peer, SERVICE_PORT, &request),
        );
    }
}

fn bad_multicasts<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let targets = vec![me; MAX_NODES as usize + 1];
    let mut lengths = vec![0i64; targets.len()];
    let mut replies = vec![0u8; 16 * targets.len()];
    let request = *b"hello";
    let valid = LiteMulticast {
        nodes: targets.as_ptr() as u64,
        lengths: lengths.as_mut_ptr() as u64,
        msg: request.as_ptr() as u64,
        size: request.len() as u64,
        replies: replies.as_mut_ptr() as u64,
        max_reply: 16,
        count: 1,
        port_priority: SERVICE_PORT,
    };
    let cases = [
        (
            "count 0".to_string(),
            LiteMulticast { count: 0, ..valid },
            libc::EINVAL,
        ),
        (
            format!("count {} (over LITE_MAX_NODES)", MAX_NODES + 1),
            LiteMulticast {
                count: MAX_NODES + 1,
                ..valid
            },
            libc::EINVAL,
        ),
        (
            format!("port {MAX_PORTS} (>= LITE_MAX_PORTS)"),
            LiteMulticast {
                port_priority: MAX_PORTS,
                ..valid
            },
            libc::EINVAL,
        ),
        (
            "a request of 0 B".to_string(),
            LiteMulticast { size: 0, ..valid },
            libc::EINVAL,
        ),
        (
            "the node list at unmapped address 0x8".to_string(),
            LiteMulticast { nodes: 8, ..valid },
            libc::EFAULT,
        ),
        (
            "the request at unmapped address 0x8".to_string(),
            LiteMulticast { msg: 8, ..valid },
            libc::EFAULT,
        ),
    ];
    for (what, mut args, errno) in cases {
        // SAFETY: every pointer in `args` is a live buffer at least as long
        // as `valid` describes, or an address the kernel must reject.
        let ret = unsafe { kernel.send_reply_multicast(&mut args) };
        tap.check(
            &format!(
                "node {me}: send_reply_multicast with {what} returns -{}",
                crate::errno::errno_name(errno)
            ),
            expect_errno(ret, errno),
        );
    }
    // SAFETY: a null argument must be rejected without being read.
    let ret = unsafe { kernel.send_reply_multicast(ptr::null_mut()) };
    tap.check(
        &format!("node {me}: send_reply_multicast with a NULL argument returns -EFAULT"),
        expect_errno(ret, libc::EFAULT),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kernel::{Defects, FakeKernel};

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

    fn joined_node() -> FakeKernel {
        let kernel = FakeKernel::new(1, 1, Defects::default());
        // SAFETY: the address is NUL-terminated.
        let ret = unsafe { kernel.join(c"10.0.0.1".as_ptr(), 18500, 1) };
        assert_eq!(ret, 1);
        kernel
    }

    #[test]
    fn another_process_may_receive_but_not_close_or_answer() {
        let owner = joined_node();
        let other = owner.other_process();
        assert_eq!(register(&owner, PRIVATE_PORT, PRIVATE_MAX, "p"), 0);
        std::thread::scope(|scope| {
            let caller = scope.spawn(|| {
                let mut answer = [0u8; 8];
                let ret = call(&owner, 1, PRIVATE_PORT, b"mine", &mut answer);
                (ret, answer)
            });
            let mut buf = [0u8; 8];
            let (ret, descriptor) = receive(&owner, PRIVATE_PORT, &mut buf, false);
            assert_eq!(ret, 4);
            assert_eq!(send(&owner, 1, PRIVATE_PORT, FOREIGN_NOTE, false), 0);
            let args = [
                "rpc-foreign".to_string(),
                PRIVATE_PORT.to_string(),
                descriptor.to_string(),
            ];
            assert_eq!(child_main(&other, &args), Some(0));
            // What the child checked, checked again here.
            assert_eq!(
                other.unregister_application(PRIVATE_PORT),
                -c_long::from(libc::EPERM)
            );
            assert_eq!(
                reply(&other, b"MINE", descriptor),
                -c_long::from(libc::ENOENT)
            );
            assert_eq!(
                receive(&other, PRIVATE_PORT, &mut buf, true).0,
                -c_long::from(libc::EAGAIN)
            );
            assert_eq!(reply(&owner, b"MINE", descriptor), 0);
            let (ret, answer) = caller.join().expect("caller");
            assert_eq!((ret, &answer[..4]), (4, &b"MINE"[..]));
        });
        assert_eq!(owner.unregister_application(PRIVATE_PORT), 0);
    }

    #[test]
    fn a_process_exiting_with_a_request_resets_its_caller() {
        let owner = joined_node();
        let other = owner.other_process();
        std::thread::scope(|scope| {
            let child = scope.spawn(move || {
                let args = ["rpc-exit".to_string(), EXIT_PORT.to_string()];
                let status = child_main(&other, &args);
                drop(other);
                status
            });
            while owner.query_port(1, EXIT_PORT) < 0 {
                std::thread::yield_now();
            }
            let mut answer = [0u8; 8];
            let ret = call(&owner, 1, EXIT_PORT, b"last words?", &mut answer);
            assert_eq!(ret, -c_long::from(libc::ECONNRESET));
            assert_eq!(child.join().expect("child"), Some(0));
        });
        assert_eq!(
            owner.query_port(1, EXIT_PORT),
            -c_long::from(libc::ECONNREFUSED)
        );
        assert_eq!(owner.open_ports(), 0);
    }

    #[test]
    fn storm_requests_mix_sizes_and_identify_their_sender() {
        for thread in 0..STORM_MULTICASTERS + STORM_CALLERS {
            let sizes: Vec<usize> = (0..STORM_SIZES.len() as u64)
                .map(|seq| storm_size(thread, seq))
                .collect();
            let mut sorted = sizes.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, STORM_SIZES, "thread {thread}");
        }
        // The threads start with different sizes.
        assert_ne!(storm_size(0, 0), storm_size(1, 0));
        let a = storm_request(2, 3, 1, 7);
        assert_eq!(a.len(), storm_size(1, 7));
        assert_eq!(&a[..4], &2u32.to_le_bytes());
        assert_eq!(&a[4..8], &1u32.to_le_bytes());
        assert_eq!(&a[8..12], &3u32.to_le_bytes());
        assert_eq!(&a[12..16], &7u32.to_le_bytes());
        assert_eq!(a, storm_request(2, 3, 1, 7));
        // Same size, another sender, round or sequence: another reply.
        let same_size = storm_request(2, 3, 1, 7 + STORM_SIZES.len() as u64);
        assert_eq!(same_size.len(), a.len());
        for other in [
            same_size,
            storm_request(1, 3, 1, 7),
            storm_request(2, 4, 1, 7),
        ] {
            assert_ne!(transform(&other), transform(&a));
        }
        assert!(STORM_SIZES
            .iter()
            .all(|&size| (16..=STORM_MAX).contains(&size)));
        assert!(STORM_MAX as u64 <= MAX_MESSAGE_SIZE);
    }

    #[test]
    fn storm_requests_to_every_node_add_up() {
        for nodes in 1..=5 {
            let total: u64 = (1..=nodes).map(|me| storm_requests_to(me, nodes)).sum();
            let per_node = u64::from(STORM_MULTICASTERS) * STORM_REQUESTS * u64::from(nodes)
                + u64::from(STORM_CALLERS) * STORM_REQUESTS;
            assert_eq!(total, u64::from(nodes) * per_node, "{nodes} nodes");
        }
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
        ports.extend((0..STORM_ROUNDS).map(storm_port));
        ports.extend(DYING_PORTS);
        ports.push(CORRUPT_PORT);
        let count = ports.len();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), count);
        assert!(ports.iter().all(|&port| port < MAX_PORTS));
    }

    #[test]
    fn dying_rounds_pick_their_server_the_same_way_everywhere() {
        let one = dying_rounds(1);
        assert_eq!((one[0].server, one[1].server), (1, 1));
        let three = dying_rounds(3);
        assert_eq!((three[0].server, three[1].server), (2, 3));
        assert_eq!((three[0].death, three[1].death), (Death::Exit, Death::Kill));
        assert_eq!((three[0].held, three[1].held), (9, 6));
        assert_ne!(three[0].port, three[1].port);
    }

    /// Runs the dying server child in a thread as another process of a
    /// node on its own, with [`DYING_CALLERS`] callers; their calls and
    /// when the server was gone.
    fn dying_round_on_one_node(held: u32, port: u32) -> (Vec<Result<DyingCall, String>>, Instant) {
        let owner = joined_node();
        let other = owner.other_process();
        let round = DyingRound {
            death: Death::Exit,
            port,
            server: 1,
            held,
        };
        let start = Barrier::new(DYING_CALLERS as usize);
        let (calls, died) = std::thread::scope(|scope| {
            let child = scope.spawn(move || {
                let args = [
                    "rpc-dying".to_string(),
                    port.to_string(),
                    held.to_string(),
                    Death::Exit.arg().to_string(),
                ];
                let status = child_main(&other, &args);
                drop(other);
                status
            });
            while owner.query_port(1, port) < 0 {
                std::thread::yield_now();
            }
            let callers: Vec<_> = (0..DYING_CALLERS)
                .map(|caller| {
                    let (owner, start) = (&owner, &start);
                    scope.spawn(move || dying_call(owner, 1, round, caller, start))
                })
                .collect();
            assert_eq!(child.join().expect("child"), Some(0));
            let died = Instant::now();
            let calls: Vec<_> = callers
                .into_iter()
                .map(|caller| caller.join().map_err(|_| "panicked".to_string()))
                .collect();
            (calls, died)
        });
        assert_eq!(owner.query_port(1, port), -c_long::from(libc::ECONNREFUSED));
        assert_eq!(owner.open_ports(), 0);
        (calls, died)
    }

    #[test]
    fn a_dying_server_fails_every_caller_at_once() {
        let (calls, died) = dying_round_on_one_node(DYING_CALLERS, DYING_PORTS[0]);
        assert_eq!(judge_dying(1, &calls, died, true), Ok((DYING_CALLERS, 0)));
        let (calls, died) = dying_round_on_one_node(DYING_CALLERS - 1, DYING_PORTS[1]);
        assert_eq!(
            judge_dying(1, &calls, died, false),
            Ok((DYING_CALLERS - 1, 1))
        );
        // Not every request was received: -ECONNREFUSED for the rest.
        assert!(judge_dying(1, &calls, died, true).is_err());
    }

    #[test]
    fn late_or_timed_out_calls_to_a_dying_server_fail() {
        let died = Instant::now();
        let call = |errno: i32, took: u64, after: u64| {
            Ok(DyingCall {
                ret: -c_long::from(errno),
                took: Duration::from_secs(took),
                returned: died + Duration::from_secs(after),
            })
        };
        let reset = call(libc::ECONNRESET, 1, 0);
        assert_eq!(
            judge_dying(1, std::slice::from_ref(&reset), died, true),
            Ok((1, 0))
        );
        for (calls, why) in [
            (
                vec![reset.clone(), call(libc::ETIMEDOUT, 60, 59)],
                "-ETIMEDOUT",
            ),
            (vec![call(libc::ECONNRESET, 12, 11)], "11s after"),
            (vec![call(libc::ECONNREFUSED, 16, 0)], "took 16s"),
            (
                vec![reset.clone(), Err("panicked".into())],
                "caller 1: panicked",
            ),
            (
                vec![Ok(DyingCall {
                    ret: 5,
                    ..reset.clone().expect("a call")
                })],
                "got 5",
            ),
        ] {
            let judged = judge_dying(2, &calls, died, false);
            assert!(
                judged
                    .as_ref()
                    .is_err_and(|e| e.contains(why) && e.contains("node 2")),
                "{why}: {judged:?}"
            );
        }
    }

    #[test]
    fn the_corrupt_ring_case_picks_its_nodes_the_same_way_everywhere() {
        assert_eq!(corrupt_roles(1), None);
        assert_eq!(corrupt_roles(2), Some((2, 1)));
        assert_eq!(corrupt_roles(5), Some((2, 1)));
    }

    #[test]
    fn corrupt_ring_requests_are_told_apart_by_content() {
        let requests: Vec<Vec<u8>> = (0..CORRUPT_SIZES.len())
            .map(|index| corrupt_request(1, index))
            .collect();
        for (index, request) in requests.iter().enumerate() {
            assert_eq!(request.len(), CORRUPT_SIZES[index]);
            assert!(request.len() as u64 <= CORRUPT_MAX);
            for other in &requests[index + 1..] {
                assert_ne!(request, other, "request {index}");
            }
        }
        // The first call after the break is as long as the discarded ones.
        assert_eq!(CORRUPT_SIZES[CORRUPT_DISCARDED], CORRUPT_SIZES[0]);
        assert_ne!(corrupt_request(1, 2), corrupt_request(3, 2));
        assert_eq!(corrupt_call_name(0), "the queued call (64 B)");
        assert_eq!(corrupt_call_name(1), "the faulty call (64 B)");
        assert_eq!(corrupt_call_name(4), "call 3 after the break (4096 B)");
    }

    #[test]
    fn discarded_calls_must_fail_at_once_with_eproto() {
        let eproto = -c_long::from(libc::EPROTO);
        assert_eq!(
            expect_discarded(0, eproto, Duration::from_millis(300)),
            Ok(())
        );
        let late = expect_discarded(1, eproto, Duration::from_secs(11));
        assert!(
            late.as_ref()
                .is_err_and(|e| e.starts_with("the faulty call") && e.contains("11s")),
            "{late:?}"
        );
        let timed_out =
            expect_discarded(0, -c_long::from(libc::ETIMEDOUT), Duration::from_secs(60));
        assert!(
            timed_out
                .as_ref()
                .is_err_and(|e| e.contains("-ETIMEDOUT") && e.contains("after 60s")),
            "{timed_out:?}"
        );
        assert!(expect_discarded(1, 64, Duration::from_millis(1)).is_err());
    }

    #[test]
    fn the_server_must_receive_only_the_calls_after_the_break() {
        let after: Vec<Vec<u8>> = (CORRUPT_DISCARDED..CORRUPT_SIZES.len())
            .rev()
            .map(|index| corrupt_request(1, index))
            .collect();
        assert_eq!(judge_corrupt_received(1, &after), Ok(()));
        let with = |extra: Vec<u8>| {
            let mut received = after.clone();
            received.push(extra);
            judge_corrupt_received(1, &received)
        };
        let discarded = with(corrupt_request(1, 0));
        assert!(
            discarded
                .as_ref()
                .is_err_and(|e| e.contains("the queued call") && e.contains("discarded")),
            "{discarded:?}"
        );
        let twice = with(corrupt_request(1, 3));
        assert!(
            twice
                .as_ref()
                .is_err_and(|e| e.contains("call 2 after the break (1 B) received 2 times")),
            "{twice:?}"
        );
        let unknown = with(b"stranger".to_vec());
        assert!(
            unknown
                .as_ref()
                .is_err_and(|e| e.contains("none node 1 sent")),
            "{unknown:?}"
        );
        let missing = judge_corrupt_received(1, &after[1..]);
        assert!(
            missing
                .as_ref()
                .is_err_and(|e| e.contains("5 requests received") && e.contains("0 times")),
            "{missing:?}"
        );
    }

    #[test]
    fn the_receiver_after_the_break_answers_and_keeps_every_request() {
        let kernel = joined_node();
        assert_eq!(register(&kernel, CORRUPT_PORT, CORRUPT_MAX, "c"), 0);
        let (failures, got) = std::thread::scope(|scope| {
            let receiver = scope.spawn(|| corrupt_receiver(&kernel));
            let failures = corrupt_calls_after(&kernel, 1, 1);
            let closed = kernel.unregister_application(CORRUPT_PORT);
            assert_eq!(closed, 0);
            (failures, receiver.join().expect("receiver"))
        });
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(judge_corrupt_server(1, 0, &got), Ok(()));
        assert_eq!(kernel.open_ports(), 0);
    }

    #[test]
    fn the_corrupt_ring_case_is_skipped_without_fault_injection() {
        let kernel = joined_node();
        assert!(!kernel.injects_rpc_faults());
        let outputs: Vec<String> = (1..=3)
            .map(|me| {
                let mut out = Vec::new();
                assert_eq!(
                    corrupt_ring(&kernel, &mut Tap::new(&mut out), me, 3),
                    Ok(())
                );
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect();
        let skip = format!("# SKIP {WHY_NO_FAULTS}");
        assert!(
            outputs[0].contains(&format!("ok 1 - node 1 -> node 2: a request with an injected bad header breaks the ring of port {CORRUPT_PORT}: ")),
            "{}",
            outputs[0]
        );
        assert!(
            outputs[1].contains(&format!("ok 1 - node 2: after its ring from node 1 broke, port {CORRUPT_PORT} receives only the requests sent afterwards {skip}")),
            "{}",
            outputs[1]
        );
        assert_eq!(outputs[0].matches(&skip).count(), 1);
        assert_eq!(outputs[2].lines().count(), 1, "{}", outputs[2]);
        assert_eq!(kernel.open_ports(), 0);
    }

    #[test]
    fn thread_states_are_read_from_proc() {
        // SAFETY: gettid takes no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        assert_eq!(thread_state(tid), Some('R'));
        assert_eq!(thread_state(-1), None);
    }
}
