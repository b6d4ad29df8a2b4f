use super::*;
use crate::cluster_test::tests::defects_with;
use crate::fake_kernel::{Defects, FakeKernel};
use crate::tap::{
    assert_contains, assert_contains_all, assert_count, capture, failures, TapSummary,
};

#[test]
fn roles_parse() {
    assert_eq!(Role::parse("survivor"), Ok(Role::Survivor));
    assert_eq!(Role::parse("victim"), Ok(Role::Victim));
    let other = Err("expected survivor or victim".to_string());
    assert_eq!(Role::parse("bystander"), other);
}

#[test]
fn the_victim_is_the_only_other_node_with_the_port() {
    let size = VICTIM_PORT_MAX_SIZE as c_long;
    let refused = -c_long::from(libc::ECONNREFUSED);
    let port_on = |victim: u32| move |node| if node == victim { size } else { refused };
    assert_eq!(find_port_owner(1, 4, VICTIM_PORT, port_on(4)), Ok(4));
    assert_eq!(find_port_owner(3, 4, VICTIM_PORT, port_on(2)), Ok(2));
    let none = find_port_owner(1, 4, VICTIM_PORT, port_on(1)).unwrap_err();
    assert!(none.starts_with("0 nodes have port 7"), "{none}");
    assert_contains(&none, "node 2: -111 (-ECONNREFUSED)");
    let two = find_port_owner(1, 4, VICTIM_PORT, |node| if node > 2 { 4096 } else { -111 });
    assert!(two.unwrap_err().starts_with("2 nodes"));
}

#[test]
fn the_next_survivor_wraps_around_and_skips_the_victim() {
    assert_eq!(next_survivor(1, 4, 4), Some(2));
    assert_eq!(next_survivor(2, 4, 4), Some(3));
    assert_eq!(next_survivor(3, 4, 4), Some(1));
    assert_eq!(next_survivor(1, 2, 4), Some(3));
    assert_eq!(next_survivor(4, 2, 4), Some(1));
    assert_eq!(next_survivor(1, 2, 2), None);
    // Survivor B follows A.
    assert_eq!(next_survivor(2, 1, 3), Some(3));
}

#[test]
fn lock_records_round_trip_reject_other_data_and_are_checked() {
    let lock_record = |own, home, waited, orphaned| LockRecord {
        own,
        home,
        waited,
        orphaned,
    };
    let full = lock_record(Some(0), 1, Some(4094), Some(4095));
    let bytes = encode_lock_record(&full);
    assert_eq!(decode_lock_record(&bytes), Ok(full));
    let partial = lock_record(None, 1, Some(3), None);
    let bytes = encode_lock_record(&partial);
    assert_eq!(decode_lock_record(&bytes), Ok(partial));
    assert!(decode_lock_record(&[0; LOCK_RECORD_LEN]).is_err());

    // Checked for every lock and for survivor A.
    let record = lock_record(Some(0), 1, Some(0), Some(1));
    assert_eq!(check_record(&record, 4, 4), Ok(()));
    let described = "lock 0 on itself, W 0 and O 1 on survivor A (node 1)";
    assert_eq!(describe_record(&record), described);
    let missing = lock_record(Some(0), 2, None, Some(1));
    let reason = check_record(&missing, 4, 4).unwrap_err();
    assert_contains(&reason, "could not create lock W");
    assert_contains(&reason, "lowest id other than the victim's (node 1)");
    assert_contains(&describe_record(&missing), "W none");
}

fn returned(call: Call, ret: c_long, at_ms: u64) -> Outcome {
    let at_ns = at_ms * 1_000_000;
    Ok(Returned { call, ret, at_ns })
}

#[test]
fn verdicts_need_ehostdown_soon_after_the_last_write() {
    let last_write = 10_000 * 1_000_000;
    let quick = returned(Call::Lock, -112, 13_120);
    assert_eq!(errno_verdict(&quick), Ok(()));
    assert_eq!(stall_verdict(&quick, last_write), (Some(3120), Ok(())));

    let slow = returned(Call::Lock, -112, 14_501);
    let (stall, verdict) = stall_verdict(&slow, last_write);
    assert_eq!(stall, Some(4501));
    assert_contains(&verdict.unwrap_err(), "more than 4500 ms");

    // A wrong errno (-EIO), and lock W handed over with 0, are the
    // host_down_as_eio and lock_hides_owner_death runs'.
    let handed = returned(Call::WaitedLock, -112, 13_100);
    let reason = errno_verdict(&handed).unwrap_err();
    assert!(
        reason.starts_with("expected -EOWNERDEAD (-130)"),
        "{reason}"
    );

    let hung: Outcome = Err("hung".into());
    assert_eq!(errno_verdict(&hung), Err("hung".into()));
    assert_eq!(stall_verdict(&hung, last_write).0, None);
    assert!(stall_verdict(&quick, 0).1.is_err());
    // A call that returned before the last write shows a negative stall.
    let early = returned(Call::Lock, -112, 9_996);
    assert_eq!(stall_verdict(&early, last_write), (Some(-4), Ok(())));
}

#[test]
fn waiting_stops_at_a_hang_or_without_a_failure() {
    let start = 100_000_000_000;
    // Seconds after the start, in ns.
    let at = |s: u64| start + s * 1_000_000_000;
    // Writes still succeed: no hang, however long the other calls wait.
    assert_eq!(stop_waiting(at(170), start, at(169), 0), None);
    // The failure came; a call blocked 60 s after the last write hangs.
    assert_eq!(stop_waiting(at(69), start, at(10), at(13)), None);
    let hang = stop_waiting(at(70), start, at(10), at(13));
    assert!(hang.is_some_and(|r| r.starts_with("hung")));
    // No write ever succeeded: measured from the start.
    assert!(stop_waiting(at(60), start, 0, 0).is_some());
    // Writes went on for 180 s: nobody killed the victim.
    let unkilled = stop_waiting(at(180), start, at(180) - 1, 0);
    assert!(unkilled.is_some_and(|r| r.contains("was it killed")));
}

#[test]
fn polling_ends_at_the_value_or_the_deadline() {
    let mut values = [7u64, 6, 5].into_iter();
    let (far, step) = (monotonic_ns() + 10_000_000_000, Duration::from_millis(1));
    let polled = poll_until(|| values.next().ok_or("done".to_string()), 5, far, step);
    assert!(polled.reached);
    assert_eq!(polled.value, Ok(5));

    let now = monotonic_ns();
    let polled = poll_until(|| Ok(9), 5, now, step);
    assert!(!polled.reached);
    assert_eq!(polled.value, Ok(9));
}

#[test]
fn traffic_ends_at_its_first_failed_call() {
    // Its rounds before and after the failure: see the whole runs.
    let kernel = FakeKernel::new(1, 2, Defects::default());
    assert_eq!(join(&kernel, Ipv4Addr::new(10, 0, 0, 1)), Ok(1));
    let (handle, size, password) = (0x7777, LMR_SIZE, 9);
    let unknown = Target {
        handle,
        size,
        password,
    };
    let (stop, failed) = (AtomicBool::new(false), AtomicU64::new(0));
    let report = run_traffic(&kernel, unknown, 1, &stop, &failed);
    assert_eq!(report.rounds, 0);
    let ended = "round 0: write at offset 0 returned -9 (-EBADF)";
    assert_eq!(report.error.as_deref(), Some(ended));
}

/// A victim of four nodes on its own: nobody to call in the overload.
const LONE_VICTIM: FailureConfig = FailureConfig {
    cm: Ipv4Addr::new(10, 0, 0, 1),
    nodes: 4,
    pacing: TEST_PACING,
    overload: Duration::ZERO,
    second_address: None,
};

#[test]
fn the_victim_prints_its_marker_last_and_only_once_joined() {
    // On its own: the fake's barriers return at once.
    let kernel = FakeKernel::new(4, 4, Defects::default());
    let mut out = Vec::new();
    assert_eq!(run_victim(&kernel, &LONE_VICTIM, &mut out), Ok(()));
    let text = String::from_utf8_lossy(&out);
    assert!(text.ends_with(&format!("\n{READY_MARKER}\n")), "{text}");
    assert!(!text.contains("FAILED"), "{text}");
    // One that cannot join stops before its marker.
    let kernel = FakeKernel::new(4, 4, defects_with(|d| d.refuse_join = true));
    let mut out = Vec::new();
    let error = run_victim(&kernel, &LONE_VICTIM, &mut out).unwrap_err();
    assert_contains(&error, "ECONNREFUSED");
    assert!(!String::from_utf8_lossy(&out).contains(READY_MARKER));
}

/// Runs the whole test on a model of `count` nodes whose last, the
/// victim, dies shortly after its marker, with cycles paced by `pacing`;
/// each survivor's output and summary.
fn run_with_death(count: u32, pacing: CyclePacing, defects: Defects) -> Vec<(String, TapSummary)> {
    let nodes: Vec<Arc<FakeKernel>> = FakeKernel::watched_cluster(count, defects)
        .into_iter()
        .map(Arc::new)
        .collect();
    let overload = Duration::from_millis(300);
    let config = FailureConfig {
        nodes: count,
        pacing,
        overload,
        ..LONE_VICTIM
    };
    let (survivors, victim) = nodes.split_at(nodes.len() - 1);
    thread::scope(|scope| {
        let survivors: Vec<_> = survivors
            .iter()
            .map(|node| scope.spawn(move || capture(|tap| run_survivor(node, tap, &config))))
            .collect();
        let mut out = Vec::new();
        let victim = &victim[0];
        assert_eq!(run_victim(victim.as_ref(), &config, &mut out), Ok(()));
        thread::sleep(Duration::from_millis(200));
        victim.die();
        survivors
            .into_iter()
            .map(|s| s.join().expect("survivor thread"))
            .collect()
    })
}

/// Cycles paced for a model whose membership changes at once and whose
/// observers read every size (see [`FakeKernel::watched_cluster`]). The bounds are the
/// machines': before its first leave the leaver reads 16 MiB through a
/// mapping, which on a loaded host takes seconds.
const TEST_PACING: CyclePacing = CyclePacing {
    poll: Duration::from_millis(5),
    away: Duration::from_millis(20),
    back: Duration::from_millis(20),
    ..CyclePacing::VMS
};

/// Test points of the failure phase (the overload's two included),
/// before the leave/rejoin cycles, of a survivor that is neither A nor
/// B.
const FAILURE_POINTS: u32 = 28;

/// Survivor A's further points: ask_lock of lock O, its lock, the
/// unlock, the lock and unlock after it.
const A_POINTS: u32 = 4;

/// Survivor B's: ask_lock of lock W, T6's errno and stall, the unlock,
/// the lock and unlock after it.
const B_POINTS: u32 = 5;

#[test]
fn survivors_of_a_correct_kernel_pass_every_point() {
    let results = run_with_death(4, TEST_PACING, Defects::default());
    let points = [A_POINTS, B_POINTS, 0].map(|extra| FAILURE_POINTS + extra);
    for (node, (output, summary)) in (1..).zip(&results) {
        assert!(summary.all_passed(), "{:?}\n{output}", failures(output));
        for call in Call::ALL {
            // Only survivor B, node 2, waits for lock W; the model loads no
            // kernel module, so makes no kernel call (T7).
            let stall = format!("\n# stall {} ", call.name());
            let expected = (node == 2 || call != Call::WaitedLock) && call != Call::KernelMessage;
            assert_eq!(output.contains(&stall), expected, "{output}");
        }
        // T5's round trips: some before the failure, some after.
        let round_trips = |point: &str| -> u64 {
            let line = output.lines().find(|l| l.contains(point)).expect(point);
            let (_, counted) = line.rsplit_once(" (").expect(line);
            counted
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect(line)
        };
        let all = round_trips("traffic to LMR B on the next survivor");
        let after = round_trips("traffic to LMR B goes on after the failure");
        assert!(all > after && after > 0, "{output}");
        // The failure's points come first.
        let final_barrier = format!(
            "\nok {} - final dist_barrier(3) among the survivors returns 0\n",
            points[node - 1]
        );
        assert_contains_all(
            output,
            &[
                "held_chunks back to 1 within 10 s",
                "get_total_node returns 3 once",
                &final_barrier,
                "leave/rejoin: dist_barrier(3) of the survivors after the cycles returns 0",
            ],
        );
    }
    let (a, b) = (&results[0].0, &results[1].0);
    let got = "returns -EOWNERDEAD (got -130 (-EOWNERDEAD))\n";
    let o = " - lock of lock O 1, kept here, which the dead victim held and nobody waited for,";
    assert_contains(a, &format!("{o} {got}"));
    let w = " - lock of lock W 0 on survivor A (node 1), which the victim held,";
    assert_contains(b, &format!("{w} {got}"));
    for (output, name) in [(a, "lock O 1"), (b, "lock W 0")] {
        let unlock =
            format!(" - unlock of {name}, taken over from the dead victim, returns 0 (got 0)\n");
        let again = format!(" - lock and unlock of {name} once more return 0 (got 0, 0)\n");
        assert_contains_all(output, &[&unlock, &again]);
    }
    // Nodes 1 and 2 watch node 3 leave and come back; node 1 also
    // publishes its spread LMR for node 3 to map. The exact counts keep
    // the locks' points to A and B, the publishing to node 1.
    for ((output, summary), points) in results[..2].iter().zip([points[0] + 1, points[1]]) {
        assert_eq!(summary.passed, points + 26, "{output}");
        let followed = output
            .lines()
            .filter(|l| l.contains("get_total_node went from 3 to 2 and back to 3 (node 3 left"))
            .count();
        assert_eq!(followed, CYCLES as usize, "{output}");
        assert_count(output, "reads back whole with this node's pattern", 2);
        let sampled = "reads back around every chunk boundary with this node's pattern";
        assert_count(output, sampled, CYCLES as usize - 2);
        assert_contains(output, "during the cycles comes back intact");
    }
    let published = " - leave/rejoin: add_ask_mr_table of the spread LMR as name \
                     0x5350524541444c4d (for node 3 to map) returns 0\n";
    assert_contains(&results[0].0, published);
    let (output, summary) = &results[2];
    assert_eq!(summary.passed, FAILURE_POINTS + 45, "{output}");
    // Only the first leave happens while the mapping exists.
    assert_count(output, ", keeping its mapping", 1);
    assert_count(output, "\n# leave ", CYCLES as usize);
    assert_count(output, "\n# rejoin ", CYCLES as usize);
    assert_contains_all(
        output,
        &[
            " - leave/rejoin: leaver (node 3) mapped observer 1's spread LMR and read it \
             back intact through the mapping (16 MiB, node 1's pattern)\n",
            " - leave/rejoin cycle 1: leave(0) on node 3 returns 0, keeping its mapping of \
             node 1's spread LMR\n",
            // Two chunks of each observer's spread LMR, which the first leave moved.
            "before its first leave (held_chunks 4)",
            "held_chunks on node 3 is 0 after its last join",
            "join returns node 3's id again (got 3)\n",
        ],
    );
}

#[test]
fn three_nodes_hand_the_dead_victim_s_locks_over_too() {
    let results = run_with_death(3, TEST_PACING, Defects::default());
    // Node 1 is survivor A, node 2 survivor B (and the leaver).
    for ((output, summary), points) in results.iter().zip([A_POINTS, B_POINTS]) {
        let failed = failures(output);
        assert!(failed.is_empty(), "{failed:?}\n{output}");
        assert!(summary.passed > FAILURE_POINTS + points, "{output}");
        let last = FAILURE_POINTS + points;
        let barrier = "final dist_barrier(2) among the survivors returns 0";
        assert_contains(output, &format!("\nok {last} - {barrier}\n"));
    }
    assert_contains(&results[0].0, "lock O 1, kept here");
    assert_contains(&results[1].0, "\n# stall lock_owner_dead ");
}

#[test]
fn a_dead_holder_s_lock_handed_over_as_if_released_is_caught() {
    let defects = defects_with(|d| d.lock_hides_owner_death = true);
    let results = run_with_death(4, TEST_PACING, defects);
    let failed: Vec<Vec<&str>> = results.iter().map(|(o, _)| failures(o)).collect();
    // Survivor A takes lock O with 0, survivor B gets lock W with 0;
    // both still hold it, so unlocking works.
    let locks = [
        "lock of lock O 1, kept here",
        "lock of lock W 0 on survivor A (node 1)",
    ];
    for (failed, lock) in failed.iter().zip(locks) {
        let handed = |l: &str| l.contains(lock) && l.ends_with("returns -EOWNERDEAD (got 0)");
        assert!(matches!(failed[..], [only] if handed(only)), "{failed:?}");
    }
    assert!(failed[2].is_empty(), "{:?}", failed[2]);
}

#[test]
fn bytes_lost_by_a_leave_are_caught() {
    let defects = defects_with(|d| d.leave_loses_moved_bytes = true);
    let results = run_with_death(4, TEST_PACING, defects);
    for (output, _) in &results[..2] {
        let failed = failures(output);
        // Every check after the first leave, which zeroed two chunks.
        assert_eq!(failed.len(), CYCLES as usize, "{failed:?}");
        let reads_back = |l: &&str| l.contains("spread LMR reads back");
        assert!(failed.iter().all(reads_back), "{failed:?}");
        assert_contains(output, "byte(s) differ");
    }
    assert!(failures(&results[2].0).is_empty(), "{}", results[2].0);
}

#[test]
fn a_leave_refused_while_the_leaver_maps_an_lmr_is_caught() {
    let defects = defects_with(|d| d.leave_refuses_mapped_lmrs = true);
    // The leave never comes: the observers need not wait long for it.
    let pacing = CyclePacing {
        first_leave: Duration::from_secs(2),
        ..TEST_PACING
    };
    let results = run_with_death(4, pacing, defects);
    // Node 3 stays: the observers see no cycle, and their spread LMRs,
    // which did not move, read back whole.
    for (output, _) in &results[..2] {
        let failed = failures(output);
        assert_eq!(failed.len(), 1, "{failed:?}\n{output}");
        let no_cycle = "leave/rejoin cycle 1: get_total_node went from 3 to 2 and back to 3";
        assert_contains(failed[0], no_cycle);
        let missed = "# get_total_node did not return 2 in time (2000 ms)";
        assert_contains(output, missed);
        assert_contains(output, "cycle 1: the 16 MiB spread LMR reads back whole");
    }
    let output = &results[2].0;
    let failed = failures(output);
    assert_eq!(failed.len(), 2, "{failed:?}\n{output}");
    let leave = " - leave/rejoin cycle 1: leave(0) on node 3 returns 0, keeping its mapping of \
                 node 1's spread LMR";
    assert!(failed[0].ends_with(leave), "{failed:?}");
    assert_contains_all(
        output,
        &[
            "\n# expected 0, got -28 (-ENOSPC): the leave refused to move the chunks held \
             here, while this node maps node 1's spread LMR",
            "\n# cycles 2 to 10 not run\n",
        ],
    );
    // Its chunks never moved.
    assert_contains(failed[1], "held_chunks on node 3 is 0 after its last join");
}

#[test]
fn a_dead_node_reported_as_an_io_error_is_caught() {
    let defects = defects_with(|d| d.host_down_as_eio = true);
    for (output, _) in run_with_death(4, TEST_PACING, defects) {
        let failed = failures(&output);
        assert_eq!(failed.len(), 1, "{failed:?}");
        let write = "rdma_write of 4 KiB to LMR A on the victim (node 4)";
        let eio = format!("{write} fails with -EHOSTDOWN (got -5 (-EIO))");
        assert_contains(failed[0], &eio);
    }
}
