//! A server process that exits or is killed holding requests: every caller must
//! learn at once.

use super::*;

/// Threads of each node calling the dying server at once.
const DYING_CALLERS: u32 = 3;
/// Latest a caller of the dying server may return after its death.
const DYING_NOTICE: Duration = Duration::from_secs(10);
/// Longest a call to the dying server may take in all.
const DYING_CALL_LIMIT: Duration = Duration::from_secs(15);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DyingRound {
    /// How the server's process ends once it holds its requests: killed
    /// by its parent with SIGKILL, or returning from main.
    killed: bool,
    /// Fresh, so that every caller's request is a first use of its ring.
    port: u32,
    /// The node whose child process serves the port.
    server: u32,
    /// Of the [`DYING_CALLERS`] of every node, before it dies.
    held: u32,
}

/// The rounds of the dying server case, the same on every node: the
/// server process exits holding every node's requests, then one is
/// killed holding two thirds of them, the rest still queued or on their
/// way. Each round's server is on another node when there are several.
fn dying_rounds(nodes: u32) -> [DyingRound; 2] {
    [
        DyingRound {
            killed: false,
            port: DYING_PORTS[0],
            server: if nodes >= 2 { 2 } else { 1 },
            held: DYING_CALLERS * nodes,
        },
        DyingRound {
            killed: true,
            port: DYING_PORTS[1],
            server: nodes,
            held: (DYING_CALLERS - 1) * nodes,
        },
    ]
}

#[derive(Clone, Copy, Debug)]
struct DyingCall {
    ret: c_long,
    took: Duration,
    returned: Instant,
}

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
            let (got, took) = (describe_result(call.ret), call.took);
            return Err(format!(
                "{what}: got {got} after {took:?}, expected {wanted}"
            ));
        }
        let late = call.returned.saturating_duration_since(died);
        let too_late =
            || format!("{what}: returned {late:?} after the server's death, over {DYING_NOTICE:?}");
        unless(late <= DYING_NOTICE, too_late)?;
        let took = call.took;
        let too_long = || format!("{what}: the call took {took:?}, over {DYING_CALL_LIMIT:?}");
        unless(took <= DYING_CALL_LIMIT, too_long)?;
    }
    Ok((reset, refused))
}

struct DyingServer {
    child: Child,
    out: BufReader<ChildStdout>,
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Returns once the child registered the port.
fn start_dying_server(round: DyingRound) -> Result<DyingServer, String> {
    let mut child = spawn("rpc-dying", &[&round.port, &round.held, &round.killed])?;
    let Some(out) = child.stdout.take() else {
        kill(child);
        return Err("no stdout".into());
    };
    let mut out = BufReader::new(out);
    let registered = first_failure(collect(&mut out, true));
    if let Err(e) = registered.map_err(|e| format!("the server process: {e}")) {
        kill(child);
        return Err(e);
    }
    Ok(DyingServer { child, out })
}

/// Lets the dying server exit, or kills it if `killed`, once it holds its
/// requests (to be killed, it says `ready` again, then waits), and waits
/// until it is gone: what it reported and how it ended.
fn end_dying_server(mut server: DyingServer, killed: bool) -> Result<(), String> {
    let points = collect(&mut server.out, killed);
    let ended = if killed {
        let killed = server.child.kill();
        let killed = killed.map_err(|e| format!("killing the server process: {e}"));
        let status = server.child.wait();
        let status = status.map_err(|e| format!("waiting for the server process: {e}"));
        killed.and(status).and_then(|status| {
            let not_killed = || format!("the server process ended with {status}, not SIGKILL");
            unless(status.signal() == Some(libc::SIGKILL), not_killed)
        })
    } else {
        finish(server.child)
    };
    first_failure(points).map_err(|e| format!("the server process: {e}"))?;
    ended
}

/// A server process on one node receives requests from every node and
/// dies without answering them: every caller, on every node, must learn
/// at once, not after the RPC timeout.
pub(super) fn dying_server<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes) = (at.me, at.nodes);
    let real = kernel.spawns_processes();
    for (index, round) in dying_rounds(nodes).into_iter().enumerate() {
        let name = ["a", "b"][index];
        let DyingRound { port, server, .. } = round;
        let (held, sent) = (round.held, DYING_CALLERS * nodes);
        let all_received = held == sent;
        let what = if round.killed {
            format!("{held} of the cluster's {sent} received by a server process then killed with SIGKILL, each return -ECONNRESET or -ECONNREFUSED within {DYING_NOTICE:?} of the kill")
        } else {
            format!("all received with every other node's by a server process that then exits without answering, each return -ECONNRESET within {DYING_NOTICE:?} of the exit")
        };
        let description = format!(
            "node {me} -> {}: dying server round {name}: {DYING_CALLERS} concurrent RPCs to port {port}, {what}",
            target_name(me, server)
        );
        let started = (real && me == server).then(|| start_dying_server(round));
        let starting = format!("starting the dying server of round {name} on node {server}");
        let barrier_passed = barrier(kernel, tap, nodes, &starting);
        if let Err(out_of_step) = barrier_passed {
            if let Some(Ok(started)) = started {
                kill(started.child);
            }
            return Err(out_of_step);
        }
        let start = Barrier::new(DYING_CALLERS as usize);
        let (calls, ended, died) = std::thread::scope(|scope| {
            let start = &start;
            let callers: Vec<_> = (0..if real { DYING_CALLERS } else { 0 })
                .map(|caller| scope.spawn(move || dying_call(kernel, me, round, caller, start)))
                .collect();
            let ended =
                started.map(|started| started.and_then(|s| end_dying_server(s, round.killed)));
            // Entered by the server's node once its process is gone: when
            // it returns anywhere, the server is dead.
            let gone = format!("the dying server of round {name} on node {server} ended");
            let ended_everywhere = barrier(kernel, tap, nodes, &gone);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dying_rounds_pick_their_server_the_same_way_everywhere() {
        let one = dying_rounds(1);
        assert_eq!((one[0].server, one[1].server), (1, 1));
        let three = dying_rounds(3);
        assert_eq!((three[0].server, three[1].server), (2, 3));
        assert_eq!((three[0].killed, three[1].killed), (false, true));
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
            killed: false,
            port,
            server: 1,
            held,
        };
        let start = Barrier::new(DYING_CALLERS as usize);
        let (calls, died) = std::thread::scope(|scope| {
            let child = scope.spawn(move || {
                let args = [
                    "rpc-dying",
                    &port.to_string(),
                    &held.to_string(),
                    &round.killed.to_string(),
                ];
                let status = child_main(&other, &args.map(String::from));
                drop(other);
                status
            });
            while owner.query_port(1, port) < 0 {
                std::thread::yield_now();
            }
            let (owner, start) = (&owner, &start);
            let callers: Vec<_> = (0..DYING_CALLERS)
                .map(|caller| scope.spawn(move || dying_call(owner, 1, round, caller, start)))
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
        let judged = judge_dying(1, &calls, died, false);
        assert_eq!(judged, Ok((DYING_CALLERS - 1, 1)));
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
        let reset = || call(libc::ECONNRESET, 1, 0);
        let judged = judge_dying(1, &[reset()], died, true);
        assert_eq!(judged, Ok((1, 0)));
        for (calls, why) in [
            (vec![reset(), call(libc::ETIMEDOUT, 60, 59)], "-ETIMEDOUT"),
            (vec![call(libc::ECONNRESET, 12, 11)], "11s after"),
            (vec![call(libc::ECONNREFUSED, 16, 0)], "took 16s"),
            (vec![reset(), Err("panicked".into())], "caller 1: panicked"),
            (vec![reset().map(|c| DyingCall { ret: 5, ..c })], "got 5"),
        ] {
            let judged = judge_dying(2, &calls, died, false);
            let named = |e: &String| e.contains(why) && e.contains("node 2");
            assert!(judged.as_ref().is_err_and(named), "{why}: {judged:?}");
        }
    }
}
