//! Full rings: a slow receiver flooded with one-way messages, and rings filled
//! until senders get `-EAGAIN`.

use super::*;

/// One-way messages each node sends to each node's flood port.
const FLOOD_MESSAGES: u32 = 2000;
const FLOOD_SIZE: usize = 64;
/// The flood receiver pauses 1 ms after this many messages.
const FLOOD_PAUSE_EVERY: u32 = 32;
const FILL_SIZE: usize = 65536;
/// Nonblocking sends that must have filled any sane ring (512 MiB).
const FILL_LIMIT: u32 = 8192;
const SEND_RETRY_PAUSE: Duration = Duration::from_micros(200);

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
            let sent = if seq % 4 == 3 {
                retry_while_busy(&room, &[libc::EAGAIN], SEND_RETRY_PAUSE, || {
                    send(kernel, target, FLOOD_PORT, &message, true)
                })
                .and_then(|retried| {
                    retries.fetch_add(retried.busy, Ordering::Relaxed);
                    expect_zero(retried.ret)
                })
            } else {
                watchdog.call_zero(&room, || send(kernel, target, FLOOD_PORT, &message, false))
            };
            sent.map_err(|e| format!("message {seq} to node {target}: {e}"))?;
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
    let awaited = format!("the next of the {expected} flood messages");
    let mut end = DrainEnd::new(all_sent, awaited);
    loop {
        let (ret, descriptor) = receive(kernel, FLOOD_PORT, &mut buf, RECV_NONBLOCK);
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
            let due = *expected;
            let late = || format!("node {sender}: message {seq} arrived when {due} was due");
            unless(seq == due, late)?;
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
    failure.map_or(Ok(()), Err)?;
    let Some(short) = (1..=nodes).find(|&n| next[n as usize] != FLOOD_MESSAGES) else {
        return Ok(());
    };
    let arrived = next[short as usize];
    Err(format!(
        "node {short}: {arrived} of {FLOOD_MESSAGES} messages arrived"
    ))
}

pub(super) fn flood<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    register_checked(kernel, tap, me, (FLOOD_PORT, 256), "lite-test-flood");
    let close = unregistering(kernel, &[FLOOD_PORT]);
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
            .try_for_each(|sender| outcome_of(sender, "panicked"));
        // Every node's messages are in the rings once its sends returned.
        let in_step = barrier(kernel, tap, nodes, "every node sent its flood");
        // Out of step too, so that the receiver ends.
        all_sent.store(true, Ordering::SeqCst);
        let received = outcome_of(receiver, "panicked");
        in_step.map(|()| (sent, received))
    })
    .map_err(close)?;
    let point = format!("node {me}: {FLOOD_MESSAGES} one-way {FLOOD_SIZE} B messages to port {FLOOD_PORT} of each of the {nodes} nodes sent (blocking, and nonblocking retried on -EAGAIN)");
    tap.check(&point, sent);
    tap.comment(&format!(
        "node {me}: nonblocking flood sends returned -EAGAIN {} times",
        retries.load(Ordering::Relaxed)
    ));
    let point = format!("node {me}: the slow receiver on port {FLOOD_PORT} got every node's {FLOOD_MESSAGES} messages exactly once, in order per sender");
    tap.check(&point, received);
    barrier(kernel, tap, nodes, "draining the flood").map_err(close)?;
    let point = format!("node {me}: unregister_application(port {FLOOD_PORT}) returns 0");
    check_zero(tap, &point, kernel.unregister_application(FLOOD_PORT));
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
        let (ret, _) = receive(kernel, FILL_PORT, &mut buf, RECV_NONBLOCK);
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

pub(super) fn fill<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let fill = (FILL_PORT, FILL_SIZE as u64);
    register_checked(kernel, tap, me, fill, "lite-test-fill");
    let close = unregistering(kernel, &[FILL_PORT]);
    barrier(kernel, tap, nodes, "registering the fill ports").map_err(close)?;
    let target = next_node(me, nodes);
    let source = previous_node(me, nodes);
    let messages = FillMessages::new();
    let (count, filled) = fill_ring(kernel, target, &messages);
    let point = format!("node {me} -> {}: nonblocking {FILL_SIZE} B sends to port {FILL_PORT}, which nobody receives from yet, return -EAGAIN once the ring is full", target_name(me, target));
    tap.check(&point, filled);
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
        let count_message = messages.make(1, count);
        let sent = interrupt_at(&room, || send(kernel, target, FILL_PORT, &count_message, false));
        let counted = match sent {
            (0, _) => Ok(()),
            (ret, true) => {
                let ret = describe_result(ret);
                Err(format!("sending the count: {ret} ({})", room.expired()))
            }
            (ret, false) => expect_zero(ret).map_err(|e| format!("sending the count: {e}")),
        };
        // Every count is in its ring once the sends returned.
        let in_step = barrier(kernel, tap, nodes, "sending the counts of the fill");
        // Out of step too, so that the drain ends.
        counts_sent.store(true, Ordering::SeqCst);
        let drained = outcome_of(drain, "panicked");
        in_step.map(|()| (counted, drained))
    })
    .map_err(close)?;
    let closed = expect_zero(kernel.unregister_application(FILL_PORT))
        .map_err(|e| format!("unregister_application: {e}"));
    let point = format!(
        "node {me} -> {}: a blocking send to the full ring returns 0 once its receiver drains it",
        target_name(me, target)
    );
    tap.check(&point, counted);
    let point = format!("node {me}: port {FILL_PORT} held every message node {source} sent before -EAGAIN, in order and nothing more, and was unregistered");
    tap.check(&point, drained.and(closed).map(drop));
    Ok(())
}
