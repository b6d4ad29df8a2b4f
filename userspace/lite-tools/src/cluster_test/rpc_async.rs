//! Asynchronous RPC (`lite_send_reply_imm_async`): one thread keeps many
//! calls in flight to the service ports of every node and reaps them with
//! `lite_async_wait` (blocking and polling) and `lite_fence`; bad arguments
//! fail at once, a bad reply buffer when the call is reaped.

use std::io::Write;
use std::time::Duration;

use libc::{c_long, ECONNREFUSED, EFAULT, EINVAL};
use lite::sys::{port_priority, ASYNC_NOWAIT, MAX_ASYNC_CALLS, PRIORITY_NONE, SEND_NONBLOCK};

use super::rpc::{
    compare, expect_len, identified_request, poison_reply, transform, SERVICE_PORT, UNUSED_PORT,
};
use super::{target_name, Node};
use crate::deadline::{retry_while_busy, Deadline};
use crate::errno::{describe_result, expect_errno};
use crate::kernel::Kernel;
use crate::plan::next_node;
use crate::tap::Tap;

/// Caller numbers in the requests, apart from the blocking callers'.
const FIRST_CALLER: u32 = 900;

const FENCED_CALLS: usize = 8;

const POLL_LIMIT: Duration = Duration::from_secs(30);

/// An address no process has mapped.
const UNMAPPED: usize = 0x8;

struct Posted {
    id: c_long,
    request: Vec<u8>,
    reply: Vec<u8>,
}

/// Posts a call of `request` to the service port of `node`; the reply
/// buffer has room to spare and holds the opposite of the expected reply,
/// so a short or missing reply shows.
fn post<K: Kernel>(kernel: &K, node: u32, request: Vec<u8>) -> Posted {
    let mut reply = vec![0u8; request.len() + 16];
    poison_reply(&mut reply, &transform(&request));
    let service = port_priority(SERVICE_PORT, PRIORITY_NONE);
    let (msg, len) = (request.as_ptr().cast(), request.len() as u64);
    let (into, room) = (reply.as_mut_ptr().cast(), reply.len() as u64);
    // SAFETY: `request` is readable during the call; `reply` stays
    // allocated and untouched until the call is reaped (the caller reaps
    // every posted call before dropping it).
    let id = unsafe { kernel.send_reply_imm_async(node, service, msg, len, into, room) };
    Posted { id, request, reply }
}

fn judge(posted: &Posted, ret: c_long) -> Result<(), String> {
    let len = posted.request.len();
    expect_len(ret, len)?;
    let expected = transform(&posted.request);
    compare(&posted.reply[..len], &expected).map_err(|m| format!("reply differs: {m}"))
}

/// Reaps every call of `calls` that was posted, whatever else fails, so no
/// reply buffer is dropped while the kernel may still write it.
fn reap_all<K: Kernel>(kernel: &K, calls: &[Posted]) {
    for call in calls.iter().filter(|c| c.id > 0) {
        let _ = kernel.async_wait(call.id as u64, 0);
    }
}

/// If one was not posted, reaps the others and fails.
fn post_all<K: Kernel>(
    kernel: &K,
    (me, node): (u32, u32),
    caller: u32,
    count: u64,
) -> Result<Vec<Posted>, String> {
    let calls: Vec<Posted> = (0..count)
        .map(|seq| post(kernel, node, identified_request(me, caller, seq)))
        .collect();
    let Some(seq) = calls.iter().position(|c| c.id <= 0) else {
        return Ok(calls);
    };
    reap_all(kernel, &calls);
    Err(format!(
        "posting call {seq} returned {}",
        describe_result(calls[seq].id)
    ))
}

/// One more than [`MAX_ASYNC_CALLS`] gets `-EAGAIN`; reaped last first.
fn full_window<K: Kernel>(kernel: &K, me: u32, node: u32) -> Result<(), String> {
    let caller = FIRST_CALLER + node;
    let mut calls = post_all(kernel, (me, node), caller, u64::from(MAX_ASYNC_CALLS))?;
    let extra = post(kernel, node, identified_request(me, caller, 1000));
    if extra.id > 0 {
        let _ = kernel.async_wait(extra.id as u64, 0);
        reap_all(kernel, &calls);
        return Err(format!(
            "call {} of one process was posted (id {}) instead of -EAGAIN",
            MAX_ASYNC_CALLS + 1,
            extra.id
        ));
    }
    let mut outcome = expect_errno(extra.id, libc::EAGAIN)
        .map_err(|e| format!("call {} beyond the limit: {e}", MAX_ASYNC_CALLS + 1));
    for (seq, call) in calls.iter_mut().enumerate().rev() {
        let ret = kernel.async_wait(call.id as u64, 0);
        call.id = 0;
        if outcome.is_ok() {
            outcome = judge(call, ret).map_err(|e| format!("call {seq}: {e}"));
        }
    }
    outcome
}

fn polled<K: Kernel>(kernel: &K, me: u32, node: u32) -> Result<(), String> {
    let call = post(kernel, node, identified_request(me, FIRST_CALLER, 7));
    if call.id <= 0 {
        return Err(format!("posting returned {}", describe_result(call.id)));
    }
    let answered = Deadline::after(
        POLL_LIMIT,
        format!("node {node} to answer call {} of the service port", call.id),
    );
    let polled = retry_while_busy(&answered, &[libc::EAGAIN], Duration::from_millis(1), || {
        kernel.async_wait(call.id as u64, ASYNC_NOWAIT)
    });
    match polled {
        Ok(reaped) => judge(&call, reaped.ret),
        Err(e) => {
            // Its reply buffer is dropped once reaped.
            let _ = kernel.async_wait(call.id as u64, 0);
            Err(e)
        }
    }
}

/// One `lite_fence` reaps them all; their ids are gone afterwards.
fn fenced<K: Kernel>(kernel: &K, me: u32, node: u32) -> Result<(), String> {
    let calls = post_all(kernel, (me, node), FIRST_CALLER + 1, FENCED_CALLS as u64)?;
    let fence = kernel.fence();
    if fence != 0 {
        reap_all(kernel, &calls);
        return Err(format!("fence returned {}", describe_result(fence)));
    }
    for (seq, call) in calls.iter().enumerate() {
        judge(call, call.request.len() as c_long).map_err(|e| format!("call {seq}: {e}"))?;
        expect_errno(kernel.async_wait(call.id as u64, 0), libc::EINVAL)
            .map_err(|e| format!("reaping call {seq} again: {e}"))?;
    }
    Ok(())
}

/// Any call posted is reaped, its result the second value.
fn post_raw<K: Kernel>(
    kernel: &K,
    node: u32,
    port_priority: u32,
    msg: (usize, u64),
    reply: (usize, u64),
) -> (c_long, Option<c_long>) {
    let (msg, msg_len, reply, room) = (msg.0 as *const _, msg.1, reply.0 as *mut _, reply.1);
    // SAFETY: every address given is either a live buffer of the caller
    // with at least the given length, or one no process maps (the kernel
    // must refuse it); a posted call is reaped before returning.
    let id = unsafe { kernel.send_reply_imm_async(node, port_priority, msg, msg_len, reply, room) };
    let reaped = (id > 0).then(|| kernel.async_wait(id as u64, 0));
    (id, reaped)
}

/// Address and length.
type UserBuffer = (usize, u64);

/// What is wrong, the port and priority word, the message, the reply
/// buffer, and the errno expected.
type BadCase = (&'static str, u32, UserBuffer, UserBuffer, i32);

/// Bad arguments fail at once; a bad reply buffer fails the reap.
fn bad_arguments<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32, node: u32) {
    let request = identified_request(me, FIRST_CALLER + 2, 0);
    let mut reply = vec![0u8; request.len()];
    let msg = (request.as_ptr() as usize, request.len() as u64);
    let room = (reply.as_mut_ptr() as usize, reply.len() as u64);
    let service = port_priority(SERVICE_PORT, PRIORITY_NONE);
    let unused = port_priority(UNUSED_PORT, PRIORITY_NONE);
    let nonblock = service | SEND_NONBLOCK;
    let (unmapped, empty, null) = ((UNMAPPED, msg.1), (msg.0, 0), (0, 64));
    let cases: [BadCase; 5] = [
        ("an unregistered port", unused, msg, room, ECONNREFUSED),
        ("an unmapped message", service, unmapped, room, EFAULT),
        ("an empty message", service, empty, room, EINVAL),
        ("LITE_SEND_NONBLOCK", nonblock, msg, room, EINVAL),
        ("a null reply buffer with room", service, msg, null, EFAULT),
    ];
    for (what, port_priority, msg, reply, errno) in cases {
        let (id, reaped) = post_raw(kernel, node, port_priority, msg, reply);
        let outcome = match reaped {
            Some(ret) => Err(format!("was posted (reaped: {})", describe_result(ret))),
            None => expect_errno(id, errno),
        };
        let (to, errno) = (target_name(me, node), crate::errno::errno_name(errno));
        let point = format!("node {me} -> {to}: send_reply_imm_async with {what} returns -{errno}");
        tap.check(&point, outcome);
    }
    let (id, reaped) = post_raw(kernel, node, service, msg, (UNMAPPED, 64));
    let outcome = match reaped {
        Some(ret) => expect_errno(ret, libc::EFAULT),
        None => Err(format!("posting returned {}", describe_result(id))),
    };
    let point = format!("node {me} -> {}: send_reply_imm_async into an unmapped reply buffer is posted, and reaping it returns -EFAULT", target_name(me, node));
    tap.check(&point, outcome);
}

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    for node in 1..=nodes {
        let point = format!("node {me} -> {}: one thread keeps {MAX_ASYNC_CALLS} send_reply_imm_async calls in flight, one more gets -EAGAIN, and each reaped call returns its own reply", target_name(me, node));
        tap.check(&point, full_window(kernel, me, node));
    }
    let next = next_node(me, nodes);
    let point = format!("node {me} -> {}: a send_reply_imm_async call polled with LITE_ASYNC_NOWAIT (-EAGAIN until done) returns its reply", target_name(me, next));
    tap.check(&point, polled(kernel, me, next));
    let point = format!("node {me} -> {}: lite_fence reaps {FENCED_CALLS} send_reply_imm_async calls, each reply in its buffer, and their ids are gone", target_name(me, next));
    tap.check(&point, fenced(kernel, me, next));
    bad_arguments(kernel, tap, me, next);
}
