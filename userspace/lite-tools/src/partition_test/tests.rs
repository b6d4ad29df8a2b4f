use std::io;
use std::sync::Mutex;
use std::time::Instant;

use super::model::{self, CutDefects};
use super::*;
use crate::debugfs::membership::Peer;
use crate::tap::TapSummary;

#[test]
fn roles_parse() {
    assert_eq!(Role::parse("survivor"), Ok(Role::Survivor));
    assert_eq!(Role::parse("cut"), Ok(Role::Cut));
    assert!(Role::parse("victim").is_err());
}

#[test]
fn the_lowest_other_node_holds_the_lmr() {
    assert_eq!(holder_of(3, 3), Some(1));
    assert_eq!(holder_of(1, 3), Some(2));
    assert_eq!(holder_of(1, 1), None);
}

#[test]
fn the_survivors_find_the_cut_node_by_its_port() {
    let found = find_port_owner(1, 3, CUT_PORT, |node| if node == 3 { 4096 } else { -111 });
    assert_eq!(found, Ok(3));
    let none = find_port_owner(1, 3, CUT_PORT, |_| -111).unwrap_err();
    assert!(none.starts_with("0 nodes have port 8"), "{none}");
}

#[test]
fn the_two_patterns_differ() {
    let mut p2 = vec![0u8; 64];
    let mut p3 = vec![0u8; 64];
    pattern::fill(cut_pattern(3, 1), 0, &mut p2);
    pattern::fill(canary_pattern(3, 1), 0, &mut p3);
    assert_ne!(p2, p3);
}

const EHOSTDOWN: c_long = -(libc::EHOSTDOWN as c_long);
const EBADF: c_long = -(libc::EBADF as c_long);

#[test]
fn the_writer_notes_its_first_failure_and_what_came_after() {
    let mut report = WriterReport::default();
    for (ret, at) in [(0, 1), (0, 2), (EHOSTDOWN, 3), (EHOSTDOWN, 4), (EBADF, 5)] {
        report.record(ret, at);
    }
    assert_eq!(report.successes, 2);
    assert_eq!(
        (report.first_failure, report.first_failure_ns),
        (Some(EHOSTDOWN), 3)
    );
    assert_eq!((report.later_writes, report.later_successes), (2, 0));
    assert_eq!(report.later_results, [EHOSTDOWN, EBADF]);
    assert_eq!(
        report.later_results_text(),
        "-112 (-EHOSTDOWN), -9 (-EBADF)"
    );
    assert_eq!(report.first_failure_verdict(), Ok(()));
    assert_eq!(report.later_writes_verdict(), Ok(()));

    // A write that succeeds after the cut wrote through a dead membership.
    report.record(0, 6);
    assert!(report
        .later_writes_verdict()
        .unwrap_err()
        .contains("1 of 3 writes"));
}

#[test]
fn the_first_failure_must_be_ehostdown_or_at_worst_eio() {
    let first = |ret: c_long| {
        let mut report = WriterReport::default();
        report.record(0, 1);
        report.record(ret, 2);
        report.first_failure_verdict()
    };
    assert_eq!(first(EHOSTDOWN), Ok(()));
    assert_eq!(first(-c_long::from(libc::EIO)), Ok(()));
    let wrong = first(EBADF).unwrap_err();
    assert!(wrong.contains("got -9 (-EBADF)"), "{wrong}");
    let none = WriterReport::default().first_failure_verdict().unwrap_err();
    assert!(none.contains("no write failed"), "{none}");
}

#[test]
fn the_canary_counts_differing_bytes_over_every_read() {
    let seed = canary_pattern(3, 1);
    let mut data = vec![0u8; 4096];
    pattern::fill(seed, 0, &mut data);
    let mut report = CanaryReport::default();
    report.record(0, seed, &data);
    assert_eq!(report.verdict(), Ok(()));

    data[100] ^= 0xff;
    data[200] ^= 0x01;
    report.record(0, seed, &data);
    report.record(0, seed, &data);
    assert_eq!((report.reads, report.differing_bytes), (3, 4));
    let verdict = report.verdict().unwrap_err();
    assert!(verdict.contains("4 bytes differed"), "{verdict}");
    assert!(verdict.contains("read 2: 2 byte(s) differ"), "{verdict}");

    let mut failed = CanaryReport::default();
    failed.record(EBADF, seed, &data);
    let verdict = failed.verdict().unwrap_err();
    assert!(
        verdict.contains("1 reads failed; read 1: -9 (-EBADF)"),
        "{verdict}"
    );
    assert!(verdict.contains("no read succeeded"), "{verdict}");
}

fn member(node: u32, incarnation: u32, fenced: bool) -> MembershipFile {
    MembershipFile::Member(NodeMembership {
        node,
        incarnation,
        epoch: 1,
        fenced,
        peers: vec![Peer {
            node: 1,
            state: PeerState::Alive,
            incarnation: 1,
        }],
    })
}

#[test]
fn a_node_is_cut_off_while_fenced_or_no_member() {
    assert!(!shows_cut_off(&member(3, 1, false)));
    assert!(shows_cut_off(&member(3, 1, true)));
    assert!(shows_cut_off(&MembershipFile::NotJoined));
}

#[test]
fn a_node_is_a_member_again_as_a_later_unfenced_incarnation_of_its_id() {
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
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
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

/// Runs the whole test on a three-node model: like the harness, cuts node
/// 3 off once it prints its marker and lets it join again [`CUT_FOR`]
/// later. Each node's output and summary, in node order.
fn run_partition(defects: CutDefects) -> Vec<(String, TapSummary)> {
    let nodes = model::cluster(3, defects);
    let config = PartitionConfig {
        cm: Ipv4Addr::new(10, 77, 0, 254),
        nodes: 3,
        pacing: TEST_PACING,
    };
    let console = SharedOutput::default();
    thread::scope(|scope| {
        let survivors: Vec<_> = nodes[..2]
            .iter()
            .map(|node| {
                scope.spawn(move || {
                    let mut out = Vec::new();
                    let mut tap = Tap::new(&mut out);
                    run_survivor(node, &mut tap, &config);
                    let summary = tap.finish();
                    (String::from_utf8_lossy(&out).into_owned(), summary)
                })
            })
            .collect();
        let cut_node = &nodes[2];
        let cut_console = console.clone();
        let cut = scope.spawn(move || {
            let mut tap = Tap::new(cut_console.clone());
            run_cut(cut_node, &mut tap, &config);
            let summary = tap.finish();
            (cut_console.text(), summary)
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !console.text().contains(READY_MARKER) {
            assert!(Instant::now() < deadline, "no marker:\n{}", console.text());
            thread::sleep(Duration::from_millis(5));
        }
        model::cut(cut_node);
        thread::sleep(CUT_FOR);
        model::rejoin(cut_node);
        let mut results: Vec<_> = survivors
            .into_iter()
            .map(|s| s.join().expect("survivor thread"))
            .collect();
        results.push(cut.join().expect("cut node's thread"));
        results
    })
}

fn failures(output: &str) -> Vec<&str> {
    output.lines().filter(|l| l.starts_with("not ok")).collect()
}

#[test]
fn every_node_of_a_correct_kernel_passes_every_point() {
    let results = run_partition(CutDefects::default());
    for (output, summary) in &results {
        assert!(summary.all_passed(), "{:?}\n{output}", failures(output));
    }
    let (holder, holder_summary) = &results[0];
    assert_eq!(holder_summary.passed, 15, "{holder}");
    for wanted in [
        "LMR Y holds what node 3 wrote into it before the cut",
        "get_total_node returns 2 once node 3 is expelled",
        "get_total_node returns 3 once node 3 joined again",
        "membership shows node 3 alive again as a later incarnation than 1 (incarnation 2)",
        "LMR Y keeps the canary while node 3 is cut off and after it joined again: 0 bytes differ",
    ] {
        assert!(holder.contains(wanted), "{wanted}\n{holder}");
    }
    let (other, other_summary) = &results[1];
    assert_eq!(other_summary.passed, 10, "{other}");
    assert!(!other.contains("canary"), "{other}");

    let (cut, cut_summary) = &results[2];
    assert_eq!(cut_summary.passed, 15, "{cut}");
    for wanted in [
        "# LITE-PARTITION-CUT ready\n",
        "membership shows this node cut off within 60 s of its ready marker (node 3 incarnation 1 fenced 1 after",
        "a member again within 90 s of the cut, with its old id and a later incarnation than 1 \
         (node 3 incarnation 2 fenced 0 after",
        "the first failure is -EHOSTDOWN or at worst -EIO (got -112 (-EHOSTDOWN))",
        "a write through the mapping from before the cut fails (got -9 (-EBADF))",
        "final dist_barrier(3) as the node's first after joining again returns 0",
    ] {
        assert!(cut.contains(wanted), "{wanted}\n{cut}");
    }
    // The marker comes once the writer covered LMR Y, after the last barrier.
    let marker = cut.find(READY_MARKER).unwrap_or(0);
    let covered = cut.find("covers all of LMR Y").unwrap_or(usize::MAX);
    assert!(covered < marker, "{cut}");
}

#[test]
fn writes_that_land_while_cut_off_are_caught() {
    let results = run_partition(CutDefects {
        writes_land_while_cut: true,
        ..CutDefects::default()
    });
    let holder = failures(&results[0].0);
    assert_eq!(holder.len(), 1, "{holder:?}");
    assert!(holder[0].contains("LMR Y keeps the canary"), "{holder:?}");
    assert!(results[0].0.contains("byte(s) differ"), "{}", results[0].0);
    assert!(failures(&results[1].0).is_empty(), "{}", results[1].0);
    // Its writes never failed while it was cut off. Whether one came
    // while it joined again (-ENOTCONN) or after (-EBADF) before the
    // writer ended is up to timing.
    let cut = failures(&results[2].0);
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert!(
        cut[0].contains("the writer's writes fail once this node is cut off"),
        "{cut:?}"
    );
    assert!(
        [
            "(got -9 (-EBADF))",
            "(got -107 (-ENOTCONN))",
            "(got no failure)"
        ]
        .iter()
        .any(|got| cut[0].ends_with(got)),
        "{cut:?}"
    );
}

#[test]
fn handles_that_survive_the_new_join_are_caught() {
    let results = run_partition(CutDefects {
        handles_survive_rejoin: true,
        ..CutDefects::default()
    });
    let holder = failures(&results[0].0);
    assert_eq!(holder.len(), 1, "{holder:?}");
    assert!(holder[0].contains("LMR Y keeps the canary"), "{holder:?}");
    assert!(failures(&results[1].0).is_empty(), "{}", results[1].0);
    // The old mapping still writes; whether the writer also wrote between
    // the new join and its end is up to timing.
    let cut = failures(&results[2].0);
    assert!(
        cut.last()
            .is_some_and(|l| l.contains("mapping from before the cut fails (got 0)")),
        "{cut:?}"
    );
    assert!(
        cut.len() == 1
            || cut.len() == 2
                && cut[0].contains("no write succeeds after the writer's first failure"),
        "{cut:?}"
    );
}

#[test]
fn a_cut_reported_as_an_io_error_passes_and_says_so() {
    let results = run_partition(CutDefects {
        transfers_fail_with_eio: true,
        ..CutDefects::default()
    });
    for (output, summary) in &results {
        assert!(summary.all_passed(), "{:?}\n{output}", failures(output));
    }
    assert!(results[2].0.contains("(got -5 (-EIO))"), "{}", results[2].0);
}
