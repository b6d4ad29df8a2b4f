//! A client's ring broken by a request with a corrupt header: the held calls
//! fail with `-EPROTO`, the next ones are served.

use super::*;

const CORRUPT_MAX: u64 = 4096;
/// Of [`CORRUPT_SIZES`], the first this many are the requests the broken
/// ring discards.
const CORRUPT_DISCARDED: usize = 2;
/// How long the client waits, once its first call sleeps, for the call's
/// request to have surely landed in the ring.
const CORRUPT_SETTLE: Duration = Duration::from_millis(300);
/// Longest a call whose request the broken ring discarded may take: its
/// caller must learn at once, not after the RPC timeout.
const CORRUPT_NOTICE: Duration = Duration::from_secs(10);
const WHY_NO_FAULTS: &str = "needs the real kernel's RPC fault injection";

/// The same on every node; `None` for a single node.
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
    write_debugfs_line(kernel, RPC_FAULT_FILE, node)
}

/// The raw result and how long the call took.
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

fn expect_discarded(index: usize, ret: c_long, took: Duration) -> Result<(), String> {
    let name = corrupt_call_name(index);
    expect_errno(ret, libc::EPROTO).map_err(|e| format!("{name}: {e} after {took:?}"))?;
    let late = || format!("{name}: returned -EPROTO after {took:?}, over {CORRUPT_NOTICE:?}");
    unless(took <= CORRUPT_NOTICE, late)
}

/// The second call's header is corrupted only once the first surely landed;
/// the fault is disarmed once the second call returned, posted or not.
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
        let first = scope.spawn(|| queued.around(|| corrupt_call(kernel, server, client, 0)));
        // Once the caller sleeps in the call its request is on its way; a
        // moment later it is surely in the ring.
        if let Err(e) = queued.wait_until_blocked(BLOCK_TIMEOUT) {
            failures.push(format!("the queued call {e}"));
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
        let name = corrupt_call_name(index);
        let judged = match outcome {
            None => continue,
            Some(Err(e)) => Err(format!("{name}: {e}")),
            Some(Ok((ret, took))) => {
                seen.push(format!(
                    "{name} returned {} after {took:?}",
                    describe_result(ret)
                ));
                expect_discarded(index, ret, took)
            }
        };
        failures.extend(judged.err());
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

/// Started once the ring broke; keeps the requests in order.
fn corrupt_receiver<K: Kernel>(kernel: &K) -> (Served, Vec<Vec<u8>>) {
    let mut requests = Vec::new();
    let served = serve_keeping(kernel, CORRUPT_PORT, false, |request| {
        requests.push(request.to_vec())
    });
    (served, requests)
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
    let count = received.len();
    unless(wrong.is_empty(), || {
        format!("{count} requests received: {}", wrong.join(", "))
    })
}

/// `closed` is the raw result of closing the port.
fn judge_corrupt_server(
    client: u32,
    closed: c_long,
    (served, requests): &(Served, Vec<Vec<u8>>),
) -> Result<(), String> {
    let mut failures = Vec::new();
    if let Err(e) = expect_zero(closed) {
        failures.push(format!("unregister_application(port {CORRUPT_PORT}): {e}"));
    }
    if let Err(e) = served.verdict() {
        failures.push(format!("the receiver: {e}"));
    }
    if let Err(e) = judge_corrupt_received(client, requests) {
        failures.push(e);
    }
    unless(failures.is_empty(), || failures.join("; "))
}

/// The client leaves a call's request queued on a port nobody receives
/// from yet, then has its kernel corrupt its next request's header there
/// ([`RPC_FAULT_FILE`]): the server must discard the ring's requests and
/// tell the client, whose two callers fail at once with -EPROTO, not after
/// the RPC timeout; its next calls find the port afresh and are served,
/// and the receiver started meanwhile gets those and nothing of before.
/// The other nodes only enter the barriers; every node skips alike,
/// barriers included, when the kernel cannot inject the fault or there is
/// no second node.
pub(super) fn corrupt_ring<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let port = CORRUPT_PORT;
    let (server, client) = corrupt_roles(nodes).unwrap_or((CORRUPT_SERVER, CORRUPT_CLIENT));
    let client_description = format!(
        "node {me} -> {}: a request with an injected bad header breaks the ring of port {port}: the queued call and the faulty one return -EPROTO within {CORRUPT_NOTICE:?}, and the next calls are served",
        target_name(me, server)
    );
    let server_description = format!(
        "node {me}: after its ring from node {client} broke, port {port} receives only the requests sent afterwards"
    );
    let no_faults = (!kernel.injects_rpc_faults(), WHY_NO_FAULTS);
    let alone = (corrupt_roles(nodes).is_none(), "needs two nodes or more");
    if let Some((_, why)) = [no_faults, alone].into_iter().find(|&(skipped, _)| skipped) {
        for (node, description) in [(client, &client_description), (server, &server_description)] {
            if me == node {
                tap.skip(description, why);
            }
        }
        return Ok(());
    }

    let registered =
        (me == server).then(|| register(kernel, port, CORRUPT_MAX, "lite-test-corrupt"));
    // Out of step, the port goes before the run ends.
    let ours: &[u32] = if registered == Some(0) {
        &[CORRUPT_PORT]
    } else {
        &[]
    };
    let close = unregistering(kernel, ours);
    let registering = format!("registering port {port} on node {server} with nobody receiving");
    barrier(kernel, tap, nodes, &registering).map_err(close)?;
    let mut failures = if me == client {
        corrupt_faulty_calls(kernel, tap, server, client)
    } else {
        Vec::new()
    };
    // The ring broke before any receiver ran.
    let discarded = format!(
        "the calls of node {client} that the broken ring of port {port} on node {server} discarded"
    );
    barrier(kernel, tap, nodes, &discarded).map_err(close)?;
    std::thread::scope(|scope| {
        let receiver = (registered == Some(0)).then(|| scope.spawn(|| corrupt_receiver(kernel)));
        if me == client {
            failures.extend(corrupt_calls_after(kernel, server, client));
        }
        // Nobody calls the port any more once every node passed this.
        // Out of step, closing the port ends the receiver, which the scope
        // waits for.
        let after =
            format!("the calls of node {client} to port {port} on node {server} after the break");
        barrier(kernel, tap, nodes, &after).map_err(close)?;
        if me == client {
            tap.check(
                &client_description,
                unless(failures.is_empty(), || failures.join("; ")),
            );
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
                let got = receiver.join().unwrap_or_else(|_| {
                    let panicked = Err("the thread panicked".into());
                    (Served::ended(panicked), Vec::new())
                });
                tap.comment(&format!(
                    "node {me}: port {port} received {} requests once the ring from node {client} broke, of the {} node {client} made",
                    got.1.len(),
                    CORRUPT_SIZES.len() - CORRUPT_DISCARDED
                ));
                judge_corrupt_server(client, closed, &got)
            }
        };
        tap.check(&server_description, outcome);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::{assert_contains, assert_contains_all};

    /// Asserts that `result` is an error naming every one of `parts`.
    #[track_caller]
    fn assert_fails_with(result: Result<(), String>, parts: &[&str]) -> String {
        let error = result.expect_err("a failure");
        assert_contains_all(&error, parts);
        error
    }

    #[test]
    fn corrupt_ring_requests_are_told_apart_by_content() {
        let requests: Vec<Vec<u8>> = (0..CORRUPT_SIZES.len())
            .map(|i| corrupt_request(1, i))
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
        let at_once = Duration::from_millis(300);
        assert_eq!(expect_discarded(0, eproto, at_once), Ok(()));
        let late = assert_fails_with(
            expect_discarded(1, eproto, Duration::from_secs(11)),
            &["11s"],
        );
        assert!(late.starts_with("the faulty call"), "{late}");
        let timed_out = -c_long::from(libc::ETIMEDOUT);
        let timed_out = expect_discarded(0, timed_out, Duration::from_secs(60));
        assert_fails_with(timed_out, &["-ETIMEDOUT", "after 60s"]);
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
        assert_fails_with(
            with(corrupt_request(1, 0)),
            &["the queued call", "discarded"],
        );
        let twice = "call 2 after the break (1 B) received 2 times";
        assert_fails_with(with(corrupt_request(1, 3)), &[twice]);
        assert_fails_with(with(b"stranger".to_vec()), &["none node 1 sent"]);
        let missing = judge_corrupt_received(1, &after[1..]);
        assert_fails_with(missing, &["5 requests received", "0 times"]);
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

    /// The roles are the same whatever the cluster's size, and a single
    /// node has none.
    #[test]
    fn the_corrupt_ring_case_is_skipped_without_fault_injection() {
        assert_eq!(corrupt_roles(1), None);
        assert_eq!([2, 5].map(corrupt_roles), [Some((2, 1)); 2]);
        let kernel = joined_node();
        assert!(!kernel.injects_rpc_faults());
        let outputs: Vec<String> = (1..=3)
            .map(|me| {
                let mut out = Vec::new();
                let step = corrupt_ring(&kernel, &mut Tap::new(&mut out), Node::new(me, 3));
                assert_eq!(step, Ok(()));
                String::from_utf8_lossy(&out).into_owned()
            })
            .collect();
        let skip = format!("# SKIP {WHY_NO_FAULTS}");
        assert_contains(&outputs[0], &format!("ok 1 - node 1 -> node 2: a request with an injected bad header breaks the ring of port {CORRUPT_PORT}: "));
        assert_contains(&outputs[1], &format!("ok 1 - node 2: after its ring from node 1 broke, port {CORRUPT_PORT} receives only the requests sent afterwards {skip}"));
        assert_eq!(outputs[0].matches(&skip).count(), 1);
        assert_eq!(outputs[2].lines().count(), 1, "{}", outputs[2]);
        assert_eq!(kernel.open_ports(), 0);
    }
}
