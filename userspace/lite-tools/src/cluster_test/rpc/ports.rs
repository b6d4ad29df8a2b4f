//! Ports: closing them under waiting callers and receivers, descriptors and
//! receive flags on a private port, and other processes' use of a port.

use super::*;

const PRIVATE_MAX: u64 = 4096;
/// A descriptor the kernel never issues in practice.
const UNKNOWN_DESCRIPTOR: u64 = 0x7fff_dead_0000;
const DYING_MAX: u64 = 1024;
/// How long the dying server waits for the requests it should hold
/// before it dies all the same: a lost request must not keep it, and the
/// node hosting it, waiting forever.
const DYING_RECEIVE_LIMIT: Duration = Duration::from_secs(20);

/// Closing ports under waiting callers and receivers, and calls on closed ones.
pub(super) fn closing<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let mut answer = [0u8; 16];
    let nowhere = format!("port {UNUSED_PORT} (open nowhere) of every node");
    let calls: [(String, &mut dyn FnMut(u32) -> c_long); 3] = [
        (format!("send_reply_imm to {nowhere}"), &mut |node| {
            call(kernel, node, UNUSED_PORT, b"anyone?", &mut answer)
        }),
        (format!("send to {nowhere}"), &mut |node| {
            send(kernel, node, UNUSED_PORT, b"anyone?", false)
        }),
        (
            format!("query_port(every node, port {UNUSED_PORT})"),
            &mut |node| kernel.query_port(node, UNUSED_PORT),
        ),
    ];
    for (what, on) in calls {
        let refused = (1..=nodes).try_for_each(|node| {
            expect_errno(on(node), libc::ECONNREFUSED).map_err(|e| format!("node {node}: {e}"))
        });
        tap.check(&format!("node {me}: {what} returns -ECONNREFUSED"), refused);
    }

    for (port, name) in [(WAIT_PORT, "lite-test-wait"), (IDLE_PORT, "lite-test-idle")] {
        let point = format!("node {me}: register_application(port {port}) returns 0");
        check_zero(tap, &point, register(kernel, port, 64, name));
    }
    // Out of step, the ports go before the run ends: that ends the waits
    // on this node's ports.
    let close = unregistering(kernel, &[WAIT_PORT, IDLE_PORT]);
    barrier(kernel, tap, nodes, "registering the ports that will close").map_err(close)?;
    let target = next_node(me, nodes);
    let (caller, receiver) = (Blocker::default(), Blocker::default());
    let (called, received) = std::thread::scope(|scope| {
        let calling = scope.spawn(|| {
            let mut answer = [0u8; 16];
            caller.around(|| call(kernel, target, WAIT_PORT, b"will you answer?", &mut answer))
        });
        let receiving = scope.spawn(|| {
            let mut buf = [0u8; 64];
            receiver.around(|| receive(kernel, IDLE_PORT, &mut buf, BLOCKING).0)
        });
        let blocked = [(&caller, "caller"), (&receiver, "receiver")].map(|(blocker, who)| {
            let blocked = blocker.wait_until_blocked(BLOCK_TIMEOUT);
            blocked.map_err(|e| format!("the {who} {e}"))
        });
        if let Some(Err(e)) = blocked.iter().find(|blocked| blocked.is_err()) {
            tap.comment(&format!("node {me}: {e}"));
        }
        // The caller waits for the next node to close its port, or for
        // the RPC timeout.
        let after = "every node's caller and receiver blocked";
        barrier(kernel, tap, nodes, after).map_err(close)?;
        for port in [WAIT_PORT, IDLE_PORT] {
            let point = format!("node {me}: unregister_application(port {port}) with a call or receive waiting returns 0");
            check_zero(tap, &point, kernel.unregister_application(port));
        }
        let failed = -c_long::from(libc::EIO);
        Ok((
            calling.join().unwrap_or(failed),
            receiving.join().unwrap_or(failed),
        ))
    })?;
    let point = format!("node {me} -> {}: an RPC waiting on port {WAIT_PORT} returns -ECONNREFUSED when its owner unregisters the port", target_name(me, target));
    tap.check(&point, expect_errno(called, libc::ECONNREFUSED));
    let point = format!("node {me}: a receive waiting on port {IDLE_PORT} returns -ESHUTDOWN when the port is unregistered");
    tap.check(&point, expect_errno(received, libc::ESHUTDOWN));
    barrier(kernel, tap, nodes, "closing ports under waiting calls")?;

    let point = format!("node {me}: port {WAIT_PORT} can be registered again after unregister");
    let ret = register(kernel, WAIT_PORT, 128, "lite-test-again");
    check_zero(tap, &point, ret);
    let point = format!(
        "node {me}: query_port of port {WAIT_PORT}, registered again with max 128 B, returns 128"
    );
    tap.check(&point, expect_len(kernel.query_port(me, WAIT_PORT), 128));
    let too_long = [0u8; 129];
    let what = format!("node {me}: send_reply_imm of 129 B to its port {WAIT_PORT} (max 128)");
    let ret = call(kernel, me, WAIT_PORT, &too_long, &mut answer);
    check_errno(tap, &what, ret, libc::EMSGSIZE);
    let what = format!("node {me}: send of 129 B to its port {WAIT_PORT} (max 128)");
    let ret = send(kernel, me, WAIT_PORT, &too_long, false);
    check_errno(tap, &what, ret, libc::EMSGSIZE);
    let point = format!("node {me}: unregister_application(port {WAIT_PORT}) returns 0 again");
    check_zero(tap, &point, kernel.unregister_application(WAIT_PORT));
    let what = format!("node {me}: unregister_application(port {WAIT_PORT}) a second time");
    let ret = kernel.unregister_application(WAIT_PORT);
    check_errno(tap, &what, ret, libc::ENOENT);
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
        let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, BLOCKING);
        let outcome = expect_bytes(ret, &buf, request).and_then(|()| match descriptor {
            0 => Err("descriptor 0 for a request".to_string()),
            _ => Ok(()),
        });
        let point = format!("node {me}: receive_message on port {PRIVATE_PORT} returns the {} B request with a descriptor", request.len());
        tap.check(&point, outcome);
        steps(tap, descriptor);
        calling
            .join()
            .unwrap_or((-c_long::from(libc::EIO), Vec::new()))
    })
}

/// Descriptor and receive errors on a port only this node uses.
pub(super) fn private_port<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let private = (PRIVATE_PORT, PRIVATE_MAX);
    register_checked(kernel, tap, me, private, "lite-test-private");
    let fitting = [0x5au8; 16];
    let (ret, answer) = private_call(kernel, tap, me, (b"question", 16), |tap, descriptor| {
        let what = "reply_message of 17 B to a caller accepting 16";
        let ret = reply(kernel, &[0u8; 17], descriptor);
        check_errno(tap, what, ret, libc::EMSGSIZE);
        let unmapped: *const c_void = ptr::without_provenance(8);
        // SAFETY: address 8 lies in the never-mapped first page; the
        // kernel must fail with -EFAULT without touching it.
        let ret = unsafe { kernel.reply_message(unmapped, 16, descriptor) };
        let what = "reply_message from unmapped buffer address 0x8";
        check_errno(tap, what, ret, libc::EFAULT);
        let point = "after -EMSGSIZE and -EFAULT the descriptor still takes a 16 B reply";
        check_zero(tap, point, reply(kernel, &fitting, descriptor));
        let what = "reply_message to an answered descriptor";
        check_errno(tap, what, reply(kernel, &fitting, descriptor), libc::ENOENT);
    });
    let point = format!("node {me}: the caller gets the 16 B reply");
    tap.check(&point, expect_bytes(ret, &answer, &fitting));
    let unknown = format!("unknown descriptor {UNKNOWN_DESCRIPTOR:#x}");
    for (what, descriptor) in [
        ("descriptor 0 (one-way)", 0),
        (unknown.as_str(), UNKNOWN_DESCRIPTOR),
    ] {
        let what = format!("reply_message to {what}");
        check_errno(tap, &what, reply(kernel, b"x", descriptor), libc::ENOENT);
    }

    // The next message does not fit: it stays queued.
    let mut message = [0u8; 100];
    pattern::fill(pattern::seed(&[u64::from(me), 0x100]), 0, &mut message);
    let point = format!("node {me}: send of 100 B to its own port {PRIVATE_PORT} returns 0");
    check_zero(tap, &point, send(kernel, me, PRIVATE_PORT, &message, false));
    let mut buf = [0u8; 100];
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut buf[..99], RECV_NONBLOCK);
    let what = "receive_message into 99 B with a 100 B message next";
    check_errno(tap, what, ret, libc::EMSGSIZE);
    let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, RECV_NONBLOCK);
    let one_way = unless(descriptor == 0, || format!("descriptor {descriptor:#x}"));
    let point = "the message stayed queued: a 100 B receive gets it, with descriptor 0 (one-way)";
    tap.check(point, expect_bytes(ret, &buf, &message).and(one_way));
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut buf, RECV_NONBLOCK);
    let what = "receive_message with LITE_RECV_NONBLOCK on an empty port";
    check_errno(tap, what, ret, libc::EAGAIN);

    // A failed reply receives nothing.
    let short = *b"short note";
    let ret = send(kernel, me, PRIVATE_PORT, &short, false);
    let to_unknown = (&b"x"[..], UNKNOWN_DESCRIPTOR);
    let (failed, _) = reply_and_receive(kernel, to_unknown, PRIVATE_PORT, &mut buf, RECV_NONBLOCK);
    let (ret_after, _) = receive(kernel, PRIVATE_PORT, &mut buf, RECV_NONBLOCK);
    tap.check(
        "reply_and_receive_message with an unknown descriptor returns -ENOENT and leaves the next message queued",
        expect_zero(ret)
            .and_then(|()| expect_errno(failed, libc::ENOENT))
            .and_then(|()| expect_bytes(ret_after, &buf, &short)),
    );

    let answer_bytes = transform(b"combined");
    let (ret, answer) = private_call(kernel, tap, me, (b"combined", 64), |tap, descriptor| {
        let answer = (&answer_bytes[..], descriptor);
        let (ret, _) =
            reply_and_receive(kernel, answer, PRIVATE_PORT, &mut [0u8; 64], RECV_NONBLOCK);
        let point = "reply_and_receive_message with LITE_RECV_NONBLOCK answers, then returns -EAGAIN on the empty port";
        tap.check(point, expect_errno(ret, libc::EAGAIN));
    });
    let point = format!("node {me}: the caller gets the reply sent by reply_and_receive_message");
    tap.check(&point, expect_bytes(ret, &answer, &answer_bytes));

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
    let (into, flags) = (small.as_mut_ptr().cast(), RECV_NONBLOCK);
    // SAFETY: as above for the descriptor address.
    let bad_descriptor =
        unsafe { kernel.receive_message(PRIVATE_PORT, into, 64, unmapped.cast(), flags) };
    tap.check(
        "receive_message with descriptor address 0x8 and a message queued returns -EFAULT",
        expect_zero(ret).and_then(|()| expect_errno(bad_descriptor, libc::EFAULT)),
    );
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut small, 0x2);
    let what = "receive_message with unknown flag 0x2";
    check_errno(tap, what, ret, libc::EINVAL);
    let point = format!("node {me}: unregister_application(port {PRIVATE_PORT}) returns 0");
    check_zero(tap, &point, kernel.unregister_application(PRIVATE_PORT));
    let (ret, _) = receive(kernel, PRIVATE_PORT, &mut small, RECV_NONBLOCK);
    let what = "receive_message on an unregistered port";
    check_errno(tap, what, ret, libc::ENOENT);
}

/// What another process may and may not do with this process's port and
/// descriptors, and what happens when a process exits holding a request.
pub(super) fn processes<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let foreign = format!(
        "node {me}: another process cannot unregister this process's port or answer its descriptor, but can receive from the port"
    );
    let exiting = format!(
        "node {me}: a process exiting without answering a request fails its caller with -ECONNRESET and closes its port"
    );
    let skipped = (!kernel.spawns_processes()).then_some(WHY_SKIPPED);
    tap.check_or_skip(&foreign, skipped, || foreign_process(kernel, me));
    tap.check_or_skip(&exiting, skipped, || exiting_process(kernel, me));
}

/// Against a descriptor and a queued one-way message of the private port.
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
            expect_bytes(ret, &answer, b"MINE")
        });
        let mut buf = [0u8; 64];
        let (ret, descriptor) = receive(kernel, PRIVATE_PORT, &mut buf, BLOCKING);
        expect_len(ret, 4).map_err(|e| format!("receive: {e}"))?;
        let queued = expect_zero(send(kernel, me, PRIVATE_PORT, FOREIGN_NOTE, false))
            .map_err(|e| format!("send: {e}"));
        let child = queued.and_then(|()| spawn("rpc-foreign", &[&PRIVATE_PORT, &descriptor]));
        let points = child.and_then(points_of);
        // Answer whatever happened, so the caller does not wait forever.
        let answered = expect_zero(reply(kernel, b"MINE", descriptor))
            .map_err(|e| format!("the owner's reply after the child: {e}"));
        let called = outcome_of(calling, "panicked").map_err(|e| format!("the caller: {e}"));
        child_outcome(points?, 3).map_err(|e| format!("child: {e}"))?;
        answered.and(called)
    });
    let closed = expect_zero(kernel.unregister_application(PRIVATE_PORT))
        .map_err(|e| format!("unregister_application: {e}"));
    outcome.and(closed)
}

/// The one-way message a foreign process receives.
const FOREIGN_NOTE: &[u8] = b"for any process";

fn exiting_process<K: Kernel>(kernel: &K, me: u32) -> Result<(), String> {
    let mut child = spawn("rpc-exit", &[&EXIT_PORT])?;
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
    first_failure(points).map_err(|e| format!("child: {e}"))?;
    finished?;
    expect_errno(called, libc::ECONNRESET).map_err(|e| format!("the caller: {e}"))?;
    expect_errno(kernel.query_port(me, EXIT_PORT), libc::ECONNREFUSED)
        .map_err(|e| format!("query_port after the exit: {e}"))
}

/// The exit status, or `None` for another child kind.
pub(in crate::cluster_test) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    let number = |i: usize| -> u64 { args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0) };
    // Registers a server child's port and tells the parent it is ready;
    // whether the port was registered.
    let registered = |port, max, name| {
        let registered = expect_zero(register(kernel, port, max, name));
        let ok = registered.is_ok();
        report_point("register_application", registered);
        crate::say(format_args!("ready"));
        ok
    };
    match args.first().map(String::as_str)? {
        "rpc-callers" => {
            let (me, nodes, caller) = (number(1) as u32, number(2) as u32, number(3) as u32);
            report_point(
                &format!("caller {caller}: {CALLS_PER_CALLER} RPCs"),
                caller_run(kernel, me, nodes.max(1), caller),
            );
            Some(0)
        }
        "rpc-foreign" => {
            let (port, descriptor) = (number(1) as u32, number(2));
            report_point(
                "unregister_application of the parent's port returns -EPERM",
                expect_errno(kernel.unregister_application(port), libc::EPERM),
            );
            report_point(
                "reply_message to the parent's descriptor returns -ENOENT",
                expect_errno(reply(kernel, b"THEIRS", descriptor), libc::ENOENT),
            );
            let mut buf = [0u8; 64];
            let (ret, _) = receive(kernel, port, &mut buf, RECV_NONBLOCK);
            report_point(
                "receive_message from the parent's port gets the queued message",
                expect_bytes(ret, &buf, FOREIGN_NOTE),
            );
            Some(0)
        }
        "rpc-dying" => {
            let (port, held) = (number(1) as u32, number(2));
            let killed = args.get(3).map(String::as_str) == Some("true");
            if !registered(port, DYING_MAX, "lite-test-dying") {
                return Some(1);
            }
            // Without blocking, so that it gives up if a request never
            // comes.
            let mut buf = [0u8; DYING_MAX as usize];
            let deadline = Instant::now() + DYING_RECEIVE_LIMIT;
            let held_all = (0..held).try_for_each(|received| loop {
                let (ret, descriptor) = receive(kernel, port, &mut buf, RECV_NONBLOCK);
                if ret != -c_long::from(libc::EAGAIN) {
                    let got = describe_result(ret);
                    let why = || format!("receive returned {got} with descriptor {descriptor:#x}");
                    break unless(ret > 0 && descriptor != 0, why);
                }
                if Instant::now() > deadline {
                    break Err(format!("{received} arrived within {DYING_RECEIVE_LIMIT:?}"));
                }
                std::thread::sleep(Duration::from_millis(1));
            });
            let point = format!("receive {held} requests and hold them unanswered");
            report_point(&point, held_all);
            if killed {
                // The parent kills it instead of answering.
                ready_then_wait();
            }
            Some(0)
        }
        "rpc-exit" => {
            let port = number(1) as u32;
            if !registered(port, 64, "lite-test-exit") {
                return Some(1);
            }
            let mut buf = [0u8; 64];
            let (ret, descriptor) = receive(kernel, port, &mut buf, BLOCKING);
            let held = unless(ret > 0 && descriptor != 0, || {
                format!("receive returned {}", describe_result(ret))
            });
            report_point("receive a request and exit without answering it", held);
            Some(0)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let (ret, descriptor) = receive(&owner, PRIVATE_PORT, &mut buf, BLOCKING);
            assert_eq!(ret, 4);
            assert_eq!(send(&owner, 1, PRIVATE_PORT, FOREIGN_NOTE, false), 0);
            let args = [
                "rpc-foreign".to_string(),
                PRIVATE_PORT.to_string(),
                descriptor.to_string(),
            ];
            assert_eq!(child_main(&other, &args), Some(0));
            // What the child checked, checked again here.
            let unregistered = other.unregister_application(PRIVATE_PORT);
            assert_eq!(unregistered, -c_long::from(libc::EPERM));
            let replied = reply(&other, b"MINE", descriptor);
            assert_eq!(replied, -c_long::from(libc::ENOENT));
            let received = receive(&other, PRIVATE_PORT, &mut buf, RECV_NONBLOCK).0;
            assert_eq!(received, -c_long::from(libc::EAGAIN));
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
        let queried = owner.query_port(1, EXIT_PORT);
        assert_eq!(queried, -c_long::from(libc::ECONNREFUSED));
        assert_eq!(owner.open_ports(), 0);
    }
}
