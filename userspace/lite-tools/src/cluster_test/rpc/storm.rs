//! The storm: every node calls and multicasts to every node from several
//! threads at once, on ports nobody used before.

use super::*;

/// The storm rounds' ports, this and the next [`STORM_ROUNDS`] - 1.
const STORM_FIRST_PORT: u32 = 30;
/// Request sizes of the storm, which each thread cycles through.
const STORM_SIZES: [usize; 6] = [16, 100, 1000, 4096, 10000, STORM_MAX];
const STORM_SERVERS: u32 = 2;
const STORM_MULTICASTERS: u32 = 2;
const STORM_CALLERS: u32 = 2;
/// Per multicasting or calling thread and round.
const STORM_REQUESTS: u64 = 12;
/// Per round, of every node's port.
const STORM_QUERIES: u32 = 4;
const STORM_QUERY_PAUSE: Duration = Duration::from_millis(20);
/// Longest a storm request may take: well under the kernel's 60 s RPC
/// timeout, so that a request that got stuck shows as such even if it
/// is answered in the end.
const STORM_CALL_LIMIT: Duration = Duration::from_secs(20);
/// No storm thread starts a request later than this after the round
/// began, so that a thread whose every request times out cannot hold
/// the round for many RPC timeouts.
const STORM_ROUND_LIMIT: Duration = Duration::from_secs(50);

/// Every round uses a port nobody used before, so that every client ring
/// in it is used for the first time.
pub(super) fn storm_port(round: u32) -> u32 {
    STORM_FIRST_PORT + round
}

/// The threads cycle through [`STORM_SIZES`] out of step, so that requests
/// of different sizes meet in the rings from the first request on.
fn storm_size(thread: u32, seq: u64) -> usize {
    STORM_SIZES[((seq + u64::from(thread)) % STORM_SIZES.len() as u64) as usize]
}

/// (node, thread, round, sequence), then pattern bytes: its [`transform`]
/// differs from any other request's, so a misdelivered reply is caught.
fn storm_request(me: u32, round: u32, thread: u32, seq: u64) -> Vec<u8> {
    let mut request = vec![0u8; storm_size(thread, seq)];
    let seq32 = u32::try_from(seq).unwrap_or(u32::MAX);
    for (at, value) in [me, thread, round, seq32].into_iter().enumerate() {
        request[at * 4..][..4].copy_from_slice(&value.to_le_bytes());
    }
    let [me, thread, round] = [me, thread, round].map(u64::from);
    let seed = pattern::seed(&[me, thread, round, seq, 0x5354]);
    pattern::fill(seed, 16, &mut request[16..]);
    request
}

/// Every node in turn, the threads out of step.
fn storm_call_target(thread: u32, seq: u64, nodes: u32) -> u32 {
    1 + ((seq + u64::from(thread)) % u64::from(nodes)) as u32
}

/// Every node's multicasts, and the calls aimed at `me`.
fn storm_requests_to(me: u32, nodes: u32) -> u64 {
    let calling = STORM_MULTICASTERS..STORM_MULTICASTERS + STORM_CALLERS;
    let calls = calling
        .flat_map(|thread| (0..STORM_REQUESTS).map(move |seq| (thread, seq)))
        .filter(|&(thread, seq)| storm_call_target(thread, seq, nodes) == me)
        .count() as u64;
    u64::from(nodes) * (u64::from(STORM_MULTICASTERS) * STORM_REQUESTS + calls)
}

fn storm_in_time(took: Duration) -> Result<(), String> {
    let over = || format!("took {took:?}, over {STORM_CALL_LIMIT:?}");
    unless(took <= STORM_CALL_LIMIT, over)
}

/// A storm thread once `start` lets it go: a multicasting one (the first
/// [`STORM_MULTICASTERS`]) sends each request to every node, this one
/// included, a calling one to every node in turn; the first failure.
fn storm_sender<K: Kernel>(
    kernel: &K,
    (me, nodes): (u32, u32),
    (round, port): (u32, u32),
    thread: u32,
    start: &Barrier,
) -> Result<(), String> {
    let multicasting = thread < STORM_MULTICASTERS;
    let targets: Vec<u32> = (1..=nodes).collect();
    // Room for the largest reply from every node, so that a reply to
    // another request, whatever its size, shows in its length.
    let mut replies = vec![0u8; STORM_MAX * targets.len()];
    let mut lengths = vec![i64::MIN; targets.len()];
    start.wait();
    let begun = Instant::now();
    for seq in 0..STORM_REQUESTS {
        let request = storm_request(me, round, thread, seq);
        let (len, target) = (request.len(), storm_call_target(thread, seq, nodes));
        let what = if multicasting {
            format!("node {me} multicast thread {thread} request {seq} ({len} B)")
        } else {
            format!("node {me} calling thread {thread} request {seq} ({len} B) to node {target}")
        };
        let late =
            || format!("{what}: not started within {STORM_ROUND_LIMIT:?} of the round's start");
        unless(begun.elapsed() <= STORM_ROUND_LIMIT, late)?;
        let expected = transform(&request);
        for slot in replies.chunks_mut(STORM_MAX) {
            poison_reply(slot, &expected);
        }
        let began = Instant::now();
        if !multicasting {
            let ret = call(kernel, target, port, &request, &mut replies[..STORM_MAX]);
            let took = began.elapsed();
            expect_bytes(ret, &replies, &expected)
                .and_then(|()| storm_in_time(took))
                .map_err(|e| format!("{what}: {e} (after {took:?})"))?;
            continue;
        }
        lengths.fill(i64::MIN);
        let buffers = (&mut lengths[..], &mut replies[..]);
        let mut args = multicast_args(&targets, &request, buffers, STORM_MAX as u64, port);
        // SAFETY: `args` describes live buffers of the lengths given.
        let ret = unsafe { kernel.send_reply_multicast(&mut args) };
        let took = began.elapsed();
        if ret < 0 {
            let ret = describe_result(ret);
            return Err(format!("{what}: returned {ret} after {took:?}"));
        }
        for (index, &node) in targets.iter().enumerate() {
            let reply = &replies[index * STORM_MAX..][..len];
            expect_bytes(lengths[index] as c_long, reply, &expected)
                .map_err(|e| format!("{what} to node {node}: {e} (after {took:?})"))?;
        }
        expect_len(ret, targets.len())
            .and_then(|()| storm_in_time(took))
            .map_err(|e| format!("{what}: {e}"))?;
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

/// All released at the same instant.
fn storm_threads<K: Kernel>(kernel: &K, me: u32, nodes: u32, round: u32) -> Result<(), String> {
    let port = storm_port(round);
    let senders = STORM_MULTICASTERS + STORM_CALLERS;
    // The query thread too.
    let start = Barrier::new(senders as usize + 1);
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let start = &start;
        let mut threads: Vec<_> = (0..senders)
            .map(|thread| {
                scope.spawn(move || storm_sender(kernel, (me, nodes), (round, port), thread, start))
            })
            .collect();
        threads.push(scope.spawn(move || storm_querier(kernel, (me, nodes), port, start)));
        threads
            .into_iter()
            .map(|thread| outcome_of(thread, "a storm thread panicked"))
            .collect()
    });
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    unless(failures.is_empty(), || failures.join("; "))
}

/// The first requests of a client to a (port, node) must not trample each
/// other however many threads make them at the same time; fresh ports make
/// many first uses.
pub(super) fn storm<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    for round in 0..STORM_ROUNDS {
        storm_round(kernel, tap, at, round)?;
    }
    Ok(())
}

/// Served by [`STORM_SERVERS`] threads on every node, then closed.
fn storm_round<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, round: u32) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let port = storm_port(round);
    let registered = register(kernel, port, STORM_MAX as u64, "lite-test-storm");
    let threads = if registered == 0 { STORM_SERVERS } else { 0 };
    let (stormed, closed, served) = serving(kernel, port, threads, || {
        let registering = format!("registering the port {port} of storm round {round}");
        barrier(kernel, tap, nodes, &registering)?;
        let stormed = storm_threads(kernel, me, nodes, round);
        // Nobody calls the port any more once every node passed this.
        barrier(kernel, tap, nodes, &format!("storm round {round}")).map(|()| stormed)
    })?;
    let expected = storm_requests_to(me, nodes);
    let answered: u64 = served.iter().map(|s| s.requests).sum();
    let each: Vec<String> = served.iter().map(|s| s.requests.to_string()).collect();
    tap.comment(&format!(
        "node {me}: storm round {round}: the service threads answered [{}] requests, {answered} of the {expected} sent to port {port} of this node",
        each.join(", ")
    ));
    let registered =
        expect_zero(registered).map_err(|e| format!("register_application(port {port}): {e}"));
    let closed =
        expect_zero(closed).map_err(|e| format!("unregister_application(port {port}): {e}"));
    let mut outcome = registered.and(stormed).and(closed);
    for (index, served) in served.iter().enumerate() {
        let verdict = served.verdict();
        outcome = outcome.and(verdict.map_err(|e| format!("service thread {index}: {e}")));
    }
    if answered > expected && outcome.is_ok() {
        outcome = Err(format!(
            "the service threads answered {answered} requests, more than the {expected} sent: some were served twice"
        ));
    }
    let point = format!("node {me}: storm round {round} on port {port}, first use: {STORM_MULTICASTERS} multicasting and {STORM_CALLERS} calling threads x {STORM_REQUESTS} requests of {} B to {STORM_MAX} B to all {nodes} nodes, started at once with port lookups, each get the transformed reply within {STORM_CALL_LIMIT:?}", STORM_SIZES[0]);
    tap.check(&point, outcome);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let sizes = STORM_SIZES.iter();
        assert!(sizes.clone().all(|size| (16..=STORM_MAX).contains(size)));
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
}
