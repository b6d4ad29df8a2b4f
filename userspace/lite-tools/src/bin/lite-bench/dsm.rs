//! LITE-DSM's page faults, timed on the measuring node: a read fault, a
//! write fault on a page nobody else holds, and a write fault on a page the
//! memory node reads (one reader to invalidate); then the page throughput
//! of [`THROUGHPUT_THREADS`] threads read-faulting fresh pages at once. The
//! measuring node creates the region, so its directory is local and its
//! pages live on the memory node, where each fault fetches its page with
//! an RDMA read.
//!
//! Both nodes enter the same four barriers whatever fails, so that a
//! failure on one side never leaves the other waiting.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use lite::dsm::{Mapping, Region};
use lite_bench_record as record;

use super::{barrier, report, report_throughput, WARMUP_OPS};
use lite_tools::bench::{completion_groups, throughput_of_completions, Operation};
use lite_tools::stats::monotonic_ns;

/// The region's name and password.
const NAME: u64 = 0x6473_6d2d_6265_6e63;
const PASSWORD: u64 = 0x6473_6d2d_7077;
/// Bytes of a page, the size every fault moves.
pub(crate) const PAGE: u64 = 4096;

/// The series, in the order of their pages in the region.
const SERIES: [Operation; 3] = [
    Operation::DsmRead,
    Operation::DsmWrite,
    Operation::DsmWriteShared,
];

/// Threads of the throughput series, each faulting its own `iters` pages,
/// after the three latency series' pages.
const THROUGHPUT_THREADS: usize = 4;

/// Pages of each series: the warm-up faults and the timed ones.
fn pages(iters: usize) -> usize {
    WARMUP_OPS + iters
}

/// The pages of series `index`.
fn series_pages(index: usize, iters: usize) -> Range<usize> {
    let n = pages(iters);
    index * n..(index + 1) * n
}

/// The pages of the throughput series' thread `thread`.
fn throughput_pages(thread: usize, iters: usize) -> Range<usize> {
    let first = SERIES.len() * pages(iters) + thread * iters;
    first..first + iters
}

fn region_size(iters: usize) -> u64 {
    (SERIES.len() * pages(iters) + THROUGHPUT_THREADS * iters) as u64 * PAGE
}

/// Enters the next of the four barriers, keeping the first error.
fn step(outcome: &mut Result<(), String>) {
    let entered = barrier();
    if outcome.is_ok() {
        *outcome = entered;
    }
}

/// The first word of page `page`.
fn word(map: &Mapping, page: usize) -> Result<&AtomicU64, String> {
    map.words()
        .get(page * PAGE as usize / 8)
        .ok_or_else(|| format!("page {page} is past the region's end"))
}

/// The measuring node's part.
pub(crate) fn measure(iters: usize) -> Result<(), String> {
    let size = region_size(iters);
    let opened = Region::create(NAME, size, PASSWORD)
        .and_then(|region| Ok((region.map()?, region)))
        .map_err(|e| format!("lite_dsm_open and mmap of {size} B: {e}"));
    let mut outcome = Ok(());
    // 1: the region exists.
    step(&mut outcome);
    let mut samples = Vec::new();
    if let Ok((map, _)) = &opened {
        for (index, _) in SERIES.iter().enumerate().take(2) {
            samples.push(time_faults(map, series_pages(index, iters), index > 0));
        }
    }
    // 2: the memory node has opened the region and reads the third
    // series' pages; 3: it has.
    step(&mut outcome);
    step(&mut outcome);
    let mut throughput = None;
    if let Ok((map, _)) = &opened {
        samples.push(time_faults(map, series_pages(2, iters), true));
        throughput = Some(time_concurrent_reads(map, iters));
    }
    // 4: the memory node may close the region.
    step(&mut outcome);
    opened.map(drop)?;
    outcome?;
    for (operation, samples) in SERIES.into_iter().zip(samples) {
        let samples = samples?;
        report(operation, PAGE, samples.get(WARMUP_OPS..).unwrap_or(&[]))?;
    }
    if let Some(throughput) = throughput {
        report_throughput(throughput?)?;
    }
    Ok(())
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

/// The memory node's part: reads the pages of the shared-write series, and
/// keeps its copies while they are timed, so that each write fault on them
/// has a reader to invalidate.
pub(crate) fn serve_reader(measuring_node: u32, iters: usize) -> Result<(), String> {
    let mut outcome = Ok(());
    step(&mut outcome);
    let size = region_size(iters);
    let opened = Region::open(measuring_node, NAME, size, PASSWORD)
        .and_then(|region| Ok((region.map()?, region)))
        .map_err(|e| format!("lite_dsm_open of node {measuring_node}'s region: {e}"));
    step(&mut outcome);
    if let Ok((map, _)) = &opened {
        for page in series_pages(2, iters) {
            if let Ok(word) = word(map, page) {
                std::hint::black_box(word.load(Ordering::SeqCst));
            }
        }
    }
    step(&mut outcome);
    step(&mut outcome);
    opened.map(drop).and(outcome)
}
