//! LITE-DSM's page faults and page throughput.
//!
//! With `--dsm NODES`, in rounds: node 1 creates a region (its directory is
//! local; LITE spreads the region's data over the other nodes, from where
//! each fault fetches its page with an RDMA read), nodes 2 and 3 read the
//! pages of the shared-write series, and node 1 then times, taking turns
//! in blocks of `--turn-ops`, LITE reads of 4 KiB from node 2 and each of
//! [`FAULTS`]. Each round has a region of its own, closed at its end, and
//! prints its series between the markers of [`record::DSM_ROUND`]. Every
//! node enters every barrier whatever failed, so that none is left waiting.
//!
//! In the comparison phase, [`THROUGHPUT_THREADS`] threads read-fault
//! fresh pages at once: LITE-DSM's page throughput.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use lite::dsm::{Mapping, Region};
use lite::Lmr;
use lite_bench_record as record;

use super::{alloc, barrier_of, free, read, report, report_throughput, say, time_each, WARMUP_OPS};
use lite_tools::bench::{completion_groups, throughput_of_completions, Operation};
use lite_tools::stats::monotonic_ns;

/// The regions' name (a round's is this plus the round) and password.
const NAME: u64 = 0x6473_6d2d_6265_6e63;
const PASSWORD: u64 = 0x6473_6d2d_7077;
/// Bytes of a page, the size every fault moves.
pub(crate) const PAGE: u64 = 4096;

/// The node that creates the regions and times the faults.
const MEASURING_NODE: u32 = 1;
/// The node holding the 4 KiB LMR of the LITE reads the faults are
/// compared with.
const READ_NODE: u32 = 2;

/// The fault series of a round, in the order of their pages in its region,
/// each with how many nodes (from node 2 on) read its pages before they
/// are timed.
const FAULTS: [(Operation, u32); 4] = [
    (Operation::DsmRead, 0),
    (Operation::DsmWrite, 0),
    (Operation::DsmWriteShared, 1),
    (Operation::DsmWriteTwoReaders, 2),
];

/// Threads of the throughput series, each faulting its own `iters` pages.
const THROUGHPUT_THREADS: usize = 4;

/// Pages of each fault series: the warm-up faults and the timed ones.
fn pages(iters: usize) -> usize {
    WARMUP_OPS + iters
}

/// The pages of fault series `index`.
fn series_pages(index: usize, iters: usize) -> Range<usize> {
    let n = pages(iters);
    index * n..(index + 1) * n
}

/// The pages of the throughput series' thread `thread`.
fn throughput_pages(thread: usize, iters: usize) -> Range<usize> {
    thread * iters..(thread + 1) * iters
}

/// The first word of page `page`.
fn word(map: &Mapping, page: usize) -> Result<&AtomicU64, String> {
    map.words()
        .get(page * PAGE as usize / 8)
        .ok_or_else(|| format!("page {page} is past the region's end"))
}

/// Opens and maps region `name` of [`MEASURING_NODE`], creating it with
/// `create`.
fn open(name: u64, size: u64, create: bool) -> Result<(Mapping, Region), String> {
    let region = if create {
        Region::create(name, size, PASSWORD)
    } else {
        Region::open(MEASURING_NODE, name, size, PASSWORD)
    };
    region
        .and_then(|region| Ok((region.map()?, region)))
        .map_err(|e| format!("lite_dsm_open and mmap of {size} B: {e}"))
}

/// What `--dsm` measures.
pub(crate) struct Rounds {
    /// This node.
    pub(crate) me: u32,
    /// Nodes taking part, all running `--dsm`.
    pub(crate) nodes: u32,
    pub(crate) rounds: u32,
    /// Timed operations of each series in a round.
    pub(crate) iters: usize,
    /// Most operations of one series in a row.
    pub(crate) turn_ops: usize,
}

/// Every node's part of the rounds.
pub(crate) fn measure_rounds(plan: &Rounds) -> Result<(), String> {
    let Rounds { me, nodes, .. } = *plan;
    let mut outcome = Ok(());
    let mut step = || {
        let entered = barrier_of(nodes);
        if outcome.is_ok() {
            outcome = entered;
        }
    };
    // Everybody joined.
    step();
    let measuring = me == MEASURING_NODE;
    let reads = measuring.then(|| alloc(READ_NODE, PAGE));
    let size = (FAULTS.len() * pages(plan.iters)) as u64 * PAGE;
    let mut failed = Ok(());
    for round in 1..=plan.rounds {
        let name = NAME + u64::from(round);
        let created = measuring.then(|| open(name, size, true));
        // 1: the region exists.
        step();
        let opened = created.or_else(|| {
            let reads_pages = (2..=3).contains(&me);
            reads_pages.then(|| open(name, size, false))
        });
        if let (false, Some(Ok((map, _)))) = (measuring, &opened) {
            read_shared_pages(map, me, plan.iters);
        }
        // 2: the readers hold their copies.
        step();
        if let (Some(opened), Some(reads)) = (&opened, &reads) {
            let timed = opened.as_ref().map_err(String::clone).and_then(|(map, _)| {
                let reads = reads.as_ref().map_err(String::clone)?;
                time_round(round, map, reads, plan)
            });
            failed = failed.and(timed);
        } else if let Some(Err(e)) = &opened {
            failed = failed.and(Err(e.clone()));
        }
        // 3: the round is timed; 4: every node closed the region.
        step();
        drop(opened);
        step();
    }
    if let Some(reads) = reads {
        failed = failed.and(reads.and_then(free));
    }
    failed.and(outcome)
}

/// A reader's part of a round: node 2 reads the pages of every series with
/// a reader, node 3 those with two; each keeps its copies until node 1's
/// write faults take them back.
fn read_shared_pages(map: &Mapping, me: u32, iters: usize) {
    for (index, &(_, readers)) in FAULTS.iter().enumerate() {
        if me >= 2 && me - 2 < readers {
            for page in series_pages(index, iters) {
                if let Ok(word) = word(map, page) {
                    std::hint::black_box(word.load(Ordering::SeqCst));
                }
            }
        }
    }
}

/// Node 1's part of round `round`: the warm-up of each series, then the
/// series in turns, and their records between the round's markers.
fn time_round(round: u32, map: &Mapping, reads: &Lmr, plan: &Rounds) -> Result<(), String> {
    let mut page = vec![0u8; PAGE as usize];
    let is_write = |operation| operation != Operation::DsmRead;
    for _ in 0..WARMUP_OPS {
        read(reads, &mut page)?;
    }
    for (index, &(operation, _)) in FAULTS.iter().enumerate() {
        let first = series_pages(index, plan.iters).start;
        time_faults(map, first..first + WARMUP_OPS, is_write(operation))?;
    }
    let mut read_samples = Vec::with_capacity(plan.iters);
    let mut fault_samples = vec![Vec::with_capacity(plan.iters); FAULTS.len()];
    let mut done = 0;
    while done < plan.iters {
        let count = plan.turn_ops.min(plan.iters - done);
        time_each(count, &mut read_samples, || read(reads, &mut page))?;
        for ((index, &(operation, _)), samples) in FAULTS.iter().enumerate().zip(&mut fault_samples)
        {
            let first = series_pages(index, plan.iters).start + WARMUP_OPS + done;
            samples.extend(time_faults(map, first..first + count, is_write(operation))?);
        }
        done += count;
    }
    let (begin, end) = record::DSM_ROUND;
    say(format_args!("{begin}{round}"));
    report(Operation::Read, PAGE, &read_samples)?;
    for ((operation, _), samples) in FAULTS.into_iter().zip(fault_samples) {
        report(operation, PAGE, &samples)?;
    }
    say(format_args!("{end}{round}"));
    Ok(())
}

/// The page throughput, on the measuring node of the comparison phase:
/// the region's data lives on the memory node.
pub(crate) fn measure_throughput(iters: usize) -> Result<(), String> {
    let size = (THROUGHPUT_THREADS * iters) as u64 * PAGE;
    let (map, region) = open(NAME, size, true)?;
    let throughput = time_concurrent_reads(&map, iters);
    drop(map);
    drop(region);
    report_throughput(throughput?)
}

/// [`THROUGHPUT_THREADS`] threads each read-fault their own `iters` fresh
/// pages at once; the throughput of all of them, from their start to each
/// completion.
fn time_concurrent_reads(
    map: &Mapping,
    iters: usize,
) -> Result<Option<record::Throughput>, String> {
    let start = monotonic_ns();
    let completions = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THROUGHPUT_THREADS)
            .map(|thread| {
                scope.spawn(move || {
                    let mut done = Vec::with_capacity(iters);
                    for page in throughput_pages(thread, iters) {
                        std::hint::black_box(word(map, page)?.load(Ordering::SeqCst));
                        done.push(monotonic_ns());
                    }
                    Ok::<_, String>(done)
                })
            })
            .collect();
        let mut completions = Vec::with_capacity(THROUGHPUT_THREADS * iters);
        for thread in threads {
            let done = thread
                .join()
                .map_err(|_| "a faulting thread panicked".to_string())??;
            completions.extend(done);
        }
        Ok::<_, String>(completions)
    })?;
    let mut completions = completions;
    completions.sort_unstable();
    let groups = completion_groups(completions.len(), THROUGHPUT_THREADS);
    let series = (Operation::DsmReadPages, PAGE, THROUGHPUT_THREADS);
    Ok(throughput_of_completions(
        series,
        start,
        &completions,
        groups,
    ))
}

/// Times one fault on each page of `pages`: a read, or a write.
fn time_faults(map: &Mapping, pages: Range<usize>, write: bool) -> Result<Vec<f64>, String> {
    let mut samples = Vec::with_capacity(pages.len());
    for page in pages {
        let word = word(map, page)?;
        let start = monotonic_ns();
        if write {
            word.store(page as u64, Ordering::SeqCst);
        } else {
            std::hint::black_box(word.load(Ordering::SeqCst));
        }
        samples.push(monotonic_ns().saturating_sub(start) as f64 / 1000.0);
    }
    Ok(samples)
}
