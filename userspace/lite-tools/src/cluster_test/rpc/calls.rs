//! Calls and replies: transformed calls of every size to every node, from many
//! threads and processes at once, and multicasts.

use super::*;

const SIZES: [u64; 6] = [1, 7, 64, 4096, 65536, MAX_MESSAGE_SIZE];
const CALLER_THREADS: u32 = 4;
/// Real kernel only.
const CALLER_CHILDREN: u32 = 2;

/// Port lookups and transformed calls of every size to every node.
pub(super) fn service_calls<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let all: Vec<u32> = (1..=nodes).collect();
    let lookups = all.iter().try_for_each(|&node| {
        let ret = kernel.query_port(node, SERVICE_PORT);
        expect_len(ret, MAX_MESSAGE_SIZE as usize).map_err(|e| format!("node {node}: {e}"))
    });
    let point = format!(
        "node {me}: query_port(every node, port {SERVICE_PORT}) returns {MAX_MESSAGE_SIZE}"
    );
    tap.check(&point, lookups);
    for &node in &all {
        for (index, &size) in SIZES.iter().enumerate() {
            let priority = Priority::ALL[index % Priority::ALL.len()];
            let mut request = vec![0u8; size as usize];
            let seed = pattern::seed(&[u64::from(me), u64::from(node), size, 0x52]);
            pattern::fill(seed, 0, &mut request);
            let point = format!("node {me} -> {}: RPC of {size} B (priority {}) gets the transformed {size} B reply", target_name(me, node), priority.name());
            let service = port_priority(SERVICE_PORT, priority.as_raw());
            tap.check(&point, transformed_call(kernel, node, service, &request));
        }
    }
}

/// Many threads (and child processes) calling every node at once.
pub(super) fn concurrent_calls<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let real = kernel.spawns_processes();
    let mut children = Vec::new();
    let mut started = Ok(());
    for index in (0..CALLER_CHILDREN).filter(|_| real) {
        match spawn("rpc-callers", &[&me, &nodes, &(100 + index)]) {
            Ok(child) => children.push(child),
            Err(e) => started = Err(e),
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
                outcome_of(thread, "panicked").map_err(|e| format!("thread {caller}: {e}"))
            })
    });
    let point = format!("node {me}: {CALLER_THREADS} threads x {CALLS_PER_CALLER} concurrent RPCs to all {nodes} nodes each get the reply to their own request");
    tap.check(&point, threads);
    let description = format!(
        "node {me}: {CALLER_CHILDREN} child processes x {CALLS_PER_CALLER} concurrent RPCs to all {nodes} nodes each get the reply to their own request"
    );
    tap.check_or_skip(&description, (!real).then_some(WHY_SKIPPED), || {
        let mut outcome = started;
        for mut child in children {
            let points = match child.stdout.take() {
                Some(out) => collect(&mut BufReader::new(out), false),
                None => vec![("report".into(), Err("no stdout".into()))],
            };
            let finished = finish(child);
            keep_first_failure(&mut outcome, points);
            outcome = outcome.and(finished);
        }
        outcome
    });
}

/// Room for a reply as long as `request` from each target.
fn multicast_to<K: Kernel>(
    kernel: &K,
    targets: &[u32],
    request: &[u8],
    port: u32,
) -> (c_long, Vec<i64>, Vec<u8>) {
    let mut replies = vec![0u8; request.len() * targets.len()];
    let mut lengths = vec![i64::MIN; targets.len()];
    let (buffers, room) = ((&mut lengths[..], &mut replies[..]), request.len() as u64);
    let mut args = multicast_args(targets, request, buffers, room, port);
    // SAFETY: `args` describes live buffers of the lengths given.
    let ret = unsafe { kernel.send_reply_multicast(&mut args) };
    (ret, lengths, replies)
}

pub(super) fn multicast<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let targets: Vec<u32> = (1..=nodes).collect();
    let mut request = vec![0u8; 1000];
    pattern::fill(pattern::seed(&[u64::from(me), 0x4d43]), 0, &mut request);
    let expected = transform(&request);
    let (ret, lengths, replies) = multicast_to(kernel, &targets, &request, SERVICE_PORT);
    let outcome = expect_len(ret, targets.len()).and_then(|()| {
        for (index, &node) in targets.iter().enumerate() {
            let reply = &replies[index * request.len()..][..request.len()];
            expect_bytes(lengths[index] as c_long, reply, &expected)
                .map_err(|e| format!("node {node}: {e}"))?;
        }
        Ok(())
    });
    let point = format!("node {me}: send_reply_multicast of 1000 B to all {nodes} nodes returns {nodes} and every reply is the transformed request");
    tap.check(&point, outcome);

    // No node has the port: every entry fails on its own.
    let (ret, lengths, _) = multicast_to(kernel, &targets, &request, UNUSED_PORT);
    let refused = -i64::from(libc::ECONNREFUSED);
    let outcome = expect_len(ret, 0).and_then(|()| {
        let Some(index) = lengths.iter().position(|&l| l != refused) else {
            return Ok(());
        };
        let length = describe_result(lengths[index] as c_long);
        Err(format!("node {}: length {length}", targets[index]))
    });
    let point = format!("node {me}: send_reply_multicast to port {UNUSED_PORT} (open nowhere) returns 0 with -ECONNREFUSED for every node");
    tap.check(&point, outcome);

    // A node that is not a member fails its own entry only.
    let (ret, lengths, replies) = multicast_to(kernel, &[0, me], &request, SERVICE_PORT);
    let outcome = expect_len(ret, 1)
        .and_then(|()| expect_errno(lengths[0] as c_long, libc::EHOSTUNREACH))
        .map_err(|e| format!("node 0: {e}"))
        .and_then(|()| {
            let reply = &replies[request.len()..];
            expect_bytes(lengths[1] as c_long, reply, &expected)
                .map_err(|e| format!("node {me}: {e}"))
        });
    let point = format!("node {me}: send_reply_multicast to node 0 and itself returns 1, with -EHOSTUNREACH for node 0 and its own reply");
    tap.check(&point, outcome);
}
