use std::io;
use std::sync::Mutex;
use std::time::Instant;

use super::pauses::tests::view;
use super::*;
use crate::cluster_test::tests::defects_with;
use crate::debugfs::Operation;
use crate::failure_test::join_call;
use crate::fake_kernel::{lock, Defects, FakeKernel};
use crate::tap::{assert_contains, assert_contains_all, failures, TapSummary};

const EHOSTDOWN: c_long = -(libc::EHOSTDOWN as c_long);
const EBADF: c_long = -(libc::EBADF as c_long);

#[test]
fn the_writer_notes_its_first_failure_and_what_came_after() {
    let mut report = WriterReport::default();
    for (ret, at) in [(0, 1), (0, 2), (EHOSTDOWN, 3), (EHOSTDOWN, 4), (EBADF, 5)] {
        report.record(ret, at);
    }
    assert_eq!(report.successes, 2);
    let first = (report.first_failure, report.first_failure_ns);
    assert_eq!(first, (Some(EHOSTDOWN), 3));
    assert_eq!((report.later_writes, report.later_successes), (2, 0));
    assert_eq!(report.later_results, [EHOSTDOWN, EBADF]);
    let later = "-112 (-EHOSTDOWN), -9 (-EBADF)";
    assert_eq!(report.later_results_text(), later);
    assert_eq!(report.first_failure_verdict(), Ok(()));
    assert_eq!(report.later_writes_verdict(), Ok(()));

    // A write that succeeds after the cut wrote through a dead membership.
    report.record(0, 6);
    let verdict = report.later_writes_verdict().unwrap_err();
    assert_contains(&verdict, "1 of 3 writes");

    // The first failure must be -EHOSTDOWN or at worst -EIO (the
    // host_down_as_eio run's): not another, and not none at all.
    let mut wrong = WriterReport::default();
    wrong.record(EBADF, 1);
    assert_contains(
        &wrong.first_failure_verdict().unwrap_err(),
        "got -9 (-EBADF)",
    );
    let none = WriterReport::default().first_failure_verdict().unwrap_err();
    assert_contains(&none, "no write failed");
}

#[test]
fn the_canary_counts_failed_reads_and_needs_one_that_succeeded() {
    // Differing bytes are the writes_land_while_cut run's.
    let mut failed = CanaryReport::default();
    failed.record(EBADF, canary_pattern(3, 1), &[0u8; 64]);
    let verdict = failed.verdict().unwrap_err();
    assert_contains(&verdict, "1 reads failed; read 1: -9 (-EBADF)");
    assert_contains(&verdict, "no read succeeded");
}

fn member(node: u32, incarnation: u32, fenced: bool) -> MembershipFile {
    view(node, incarnation, fenced, &[(1, PeerState::Alive, 1)])
}

#[test]
fn a_node_is_cut_off_until_a_later_unfenced_incarnation_of_its_id() {
    assert!(!shows_cut_off(&member(3, 1, false)));
    assert!(shows_cut_off(&member(3, 1, true)) && shows_cut_off(&MembershipFile::NotJoined));
    assert!(shows_member_again(&member(3, 2, false), 3, 1));
    assert!(!shows_member_again(&member(3, 1, false), 3, 1));
    assert!(!shows_member_again(&member(3, 2, true), 3, 1));
    assert!(!shows_member_again(&member(4, 2, false), 3, 1));
    assert!(!shows_member_again(&MembershipFile::NotJoined, 3, 1));
}

/// A console the test harness can read while the program writes it.
#[derive(Clone, Default)]
struct SharedOutput(Arc<Mutex<Vec<u8>>>);

impl SharedOutput {
    fn text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.0)).into_owned()
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Pacing for a model whose membership changes at once, still with
/// several canary reads while the node is cut off.
const TEST_PACING: Pacing = Pacing {
    poll: Duration::from_millis(5),
    canary_every: Duration::from_millis(20),
    marker_every: Duration::from_millis(50),
};

/// How long the model's node stays cut off.
const CUT_FOR: Duration = Duration::from_millis(300);

/// How long every node's traffic of the pause phase runs: well past the
/// model's pauses, also on a busy host.
const PAUSE_TRAFFIC: Duration = Duration::from_millis(1500);

/// The model's pauses of node 2: how many, how long each, and the time
/// between them.
const MODEL_PAUSES: u32 = 3;
const MODEL_PAUSE: Duration = Duration::from_millis(50);
const MODEL_PAUSE_GAP: Duration = Duration::from_millis(50);

/// The node the model pauses: a survivor, not the holder of LMR Y.
const PAUSED: usize = 2;

/// Waits until every console in `consoles` shows `marker`.
fn await_everywhere(consoles: &[SharedOutput], marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !consoles.iter().all(|c| c.text().contains(marker)) {
        let texts: Vec<String> = consoles.iter().map(SharedOutput::text).collect();
        assert!(Instant::now() < deadline, "no {marker}:\n{texts:#?}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the whole test on a three-node model. Like the harness, it pauses
/// node 2 [`MODEL_PAUSES`] times once every node's pause traffic runs,
/// then cuts node 3 off once it prints its marker and lets it join again
/// [`CUT_FOR`] later. Each node's output and summary, in node order.
fn run_partition(defects: Defects) -> Vec<(String, TapSummary)> {
    let nodes: Vec<Arc<FakeKernel>> = FakeKernel::cluster(3, defects)
        .into_iter()
        .map(Arc::new)
        .collect();
    let config = PartitionConfig {
        cm: Ipv4Addr::new(10, 77, 0, 254),
        nodes: 3,
        pacing: TEST_PACING,
        pause_traffic: PAUSE_TRAFFIC,
    };
    // One buffer each: a clone shares its buffer.
    let consoles: Vec<SharedOutput> = nodes.iter().map(|_| SharedOutput::default()).collect();
    let (cut, config) = (nodes.len(), &config);
    thread::scope(|scope| {
        let runs: Vec<_> = nodes
            .iter()
            .zip(&consoles)
            .enumerate()
            .map(|(index, (node, console))| {
                scope.spawn(move || {
                    let mut tap = Tap::new(console.clone());
                    if index + 1 == cut {
                        run_cut(node, &mut tap, config);
                    } else {
                        run_survivor(node, &mut tap, config);
                    }
                    let summary = tap.finish();
                    (console.text(), summary)
                })
            })
            .collect();
        await_everywhere(&consoles, PAUSE_READY_MARKER);
        for made in 0..MODEL_PAUSES {
            if made > 0 {
                thread::sleep(MODEL_PAUSE_GAP);
            }
            nodes[PAUSED - 1].pause();
            thread::sleep(MODEL_PAUSE);
            nodes[PAUSED - 1].resume();
        }
        // As the harness checks: every pause fell within every node's traffic.
        for text in consoles.iter().map(SharedOutput::text) {
            let over = text.contains(PAUSES_OVER_MARKER);
            assert!(!over, "the traffic ended before the pauses:\n{text}");
        }
        let cut_node = &nodes[cut - 1];
        await_everywhere(&consoles[cut - 1..], READY_MARKER);
        cut_node.fail_node();
        // However slow the host, the writer must write after the canary
        // before the rejoin: once the holder wrote it, one of the cut
        // node's transfers returns and the next starts, then one returns.
        await_everywhere(&consoles[..1], "rdma_write of the canary");
        let written_by_then = cut_node.operations(Operation::Write);
        while cut_node.operations(Operation::Write) < written_by_then + 2 {
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(CUT_FOR);
        // The old membership ends with everything its process held.
        cut_node.leave(0);
        let joined = join_call(cut_node.as_ref(), Ipv4Addr::new(10, 77, 0, 254));
        assert_eq!(joined, 3, "the model joins again");
        runs.into_iter()
            .map(|run| run.join().expect("a node's thread"))
            .collect()
    })
}

#[test]
fn every_node_of_a_correct_kernel_passes_every_point() {
    let results = run_partition(Defects::default());
    for (output, summary) in &results {
        assert!(summary.all_passed(), "{:?}\n{output}", failures(output));
    }
    for (index, (output, _)) in results.iter().enumerate() {
        let me = index as u32 + 1;
        let mut alive = Vec::new();
        for peer in (1..=3).filter(|&peer| peer != me) {
            let wanted = format!(
                "pauses: every write to and read from node {peer} while a node was paused \
                 succeeded and came back intact ("
            );
            assert_contains(output, &wanted);
            alive.push(format!("peer {peer} alive incarnation 1"));
        }
        let alive = alive.join(", ");
        let members = format!("after the traffic as before it (node {me} incarnation 1, {alive})");
        assert_contains(output, &members);
        // The markers frame the traffic: after the barrier that starts it,
        // before its report, and ahead of the partition.
        let allocated = output.find("after allocating the pause traffic's LMRs returns 0");
        let ready = output.find(PAUSE_READY_MARKER);
        let over = output.find(PAUSES_OVER_MARKER);
        let reported = output.find("pauses: get_total_node returned 3 in each of");
        let partition = output.find("after publishing LMR Y returns 0");
        let framed = [allocated, ready, over, reported, partition];
        assert!(framed.windows(2).all(|w| w[0] < w[1]), "{output}");
    }
    let (holder, holder_summary) = &results[0];
    assert_eq!(holder_summary.passed, 24, "{holder}");
    assert_contains_all(
        holder,
        &[
            "LMR Y holds what node 3 wrote into it before the cut",
            "get_total_node returns 2 once node 3 is expelled",
            "get_total_node returns 3 once node 3 joined again",
            "membership shows node 3 alive again as a later incarnation than 1 (incarnation 2)",
            "LMR Y keeps the canary while node 3 is cut off and after it joined again: 0 bytes differ",
        ],
    );
    let (other, other_summary) = &results[1];
    assert_eq!(other_summary.passed, 19, "{other}");
    assert!(!other.contains("canary"), "{other}");

    let (cut, cut_summary) = &results[2];
    assert_eq!(cut_summary.passed, 24, "{cut}");
    assert_contains_all(cut, &[
        "# LITE-PARTITION-CUT ready\n",
        "membership shows this node cut off within 60 s of its ready marker (node 3 incarnation 1 fenced 1 after",
        "a member again within 90 s of the cut, with its old id and a later incarnation than 1 \
         (node 3 incarnation 2 fenced 0 after",
        "the first failure is -EHOSTDOWN or at worst -EIO (got -112 (-EHOSTDOWN))",
        "a write through the mapping from before the cut fails (got -9 (-EBADF))",
        "final dist_barrier(3) as the node's first after joining again returns 0",
    ]);
    // The marker comes once the writer covered LMR Y, after the last barrier.
    let marker = cut.find(READY_MARKER).unwrap_or(0);
    let covered = cut.find("covers all of LMR Y").unwrap_or(usize::MAX);
    assert!(covered < marker, "{cut}");
}

/// Checks that the holder's canary, and nothing else there or on node 2,
/// caught what happened to LMR Y.
fn assert_canary_caught(results: &[(String, TapSummary)]) {
    let holder = failures(&results[0].0);
    assert_eq!(holder.len(), 1, "{holder:?}");
    assert_contains(holder[0], "LMR Y keeps the canary");
    assert!(failures(&results[1].0).is_empty(), "{}", results[1].0);
}

#[test]
fn writes_that_land_while_cut_off_are_caught() {
    let results = run_partition(defects_with(|d| d.writes_land_while_cut = true));
    assert_canary_caught(&results);
    assert_contains(&results[0].0, "byte(s) differ");
    // Its writes never failed while it was cut off. Whether one came
    // while it joined again (-ENOTCONN) or after (-EBADF) before the
    // writer ended is up to timing.
    let cut = failures(&results[2].0);
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert_contains(cut[0], "the writer's writes fail once this node is cut off");
    let got = [
        "(got -9 (-EBADF))",
        "(got -107 (-ENOTCONN))",
        "(got no failure)",
    ];
    assert!(got.iter().any(|got| cut[0].ends_with(got)), "{cut:?}");
}

#[test]
fn handles_that_survive_the_new_join_are_caught() {
    let results = run_partition(defects_with(|d| d.handles_survive_rejoin = true));
    assert_canary_caught(&results);
    // The old mapping still writes; whether the writer also wrote between
    // the new join and its end is up to timing.
    let cut = failures(&results[2].0);
    let mapped = |l: &&str| l.contains("mapping from before the cut fails (got 0)");
    assert!(cut.last().is_some_and(mapped), "{cut:?}");
    let after_first = "no write succeeds after the writer's first failure";
    let also_after_first = cut.len() == 2 && cut[0].contains(after_first);
    assert!(cut.len() == 1 || also_after_first, "{cut:?}");
}

#[test]
fn a_cut_reported_as_an_io_error_passes_and_says_so() {
    let results = run_partition(defects_with(|d| d.host_down_as_eio = true));
    for (output, summary) in &results {
        assert!(summary.all_passed(), "{:?}\n{output}", failures(output));
    }
    assert_contains(&results[2].0, "(got -5 (-EIO))");
}

#[test]
fn calls_that_fail_while_a_node_is_paused_are_caught() {
    let results = run_partition(defects_with(|d| d.transfers_fail_while_paused = true));
    for (index, (output, _)) in results.iter().enumerate() {
        let failed = failures(output);
        assert_eq!(failed.len(), 2, "node {}: {failed:?}", index + 1);
        for line in failed {
            assert_contains(line, "pauses: every write to and read from node");
        }
        assert_contains(output, "returned -112 (-EHOSTDOWN)");
    }
}

#[test]
fn a_paused_node_taken_for_dead_is_caught() {
    let results = run_partition(defects_with(|d| d.pause_is_a_death = true));
    let count = "pauses: get_total_node returned 3 in each of";
    let members = "pauses: membership lists the same incarnations";
    for index in [0, 2] {
        let failed = failures(&results[index].0);
        assert_eq!(failed.len(), 2, "node {}: {failed:?}", index + 1);
        assert_contains(failed[0], count);
        assert_contains(failed[1], members);
        let shown = &results[index].0;
        assert_contains(shown, "reads differed; the first: 2 after ");
        let reborn = format!(
            "# peer 2: alive incarnation 1 before, alive incarnation {} after",
            1 + MODEL_PAUSES
        );
        assert_contains(shown, &reborn);
    }
    // The paused node counts everyone; it sees itself a new incarnation.
    let paused = failures(&results[PAUSED - 1].0);
    assert_eq!(paused.len(), 1, "{paused:?}");
    assert_contains(paused[0], members);
}
