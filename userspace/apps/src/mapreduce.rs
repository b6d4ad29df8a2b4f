//! LITE-MapReduce: Phoenix-style MapReduce across the nodes, with worker
//! threads on each node.
//!
//! A run goes through five steps, each rank doing the same ones (SPMD):
//!
//! 1. **Split.** Rank 0 generates the input ([`text::generate`]: numbered
//!    documents of Zipf-distributed words), cuts it at line boundaries into
//!    one split per rank and scatters the splits with one all-to-all.
//! 2. **Map.** Each rank's `threads` workers take a piece of its split
//!    each, fold every word into a local hash map (the combiner) and cut the
//!    result into partitions: partition `fnv(word) % (nodes * BUCKETS)`
//!    goes to rank `fnv(word) % nodes`, as that rank's bucket
//!    `fnv(word) / nodes % BUCKETS` (FNV-1a, so every rank agrees).
//! 3. **Shuffle.** One all-to-all moves every partition to its rank, in the
//!    compact encoding of [`codec`].
//! 4. **Reduce.** Each rank's workers merge its buckets (every word lives
//!    in one bucket of one rank, so they work independently).
//! 5. **Gather.** The ranks send their reduced words to rank 0, which
//!    sorts them into the result and checks it against the single-process
//!    [`reference`](mod@reference).
//!
//! The engine is written once against [`Exchange`], and what moves the
//! splits, the shuffle and the gather is the transport's all-to-all:
//!
//! - Over LITE ([`crate::lite_exchange`]), each all-to-all goes through
//!   LITE memory: a rank copies its partitions into an LMR of its own and
//!   every other rank pulls its partition out of it with one RDMA read. So
//!   the shuffle is through LMRs rather than RPC: it is one bulk transfer
//!   of a few large buffers per pair of ranks, which one-sided reads move
//!   without a request, a reply or the sender's CPU, and without anyone
//!   having to size receive buffers for what the others will send.
//! - Over TCP ([`crate::tcp_exchange`]), the same buffers go through
//!   sockets: the version a user would write without LITE.
//! - Locally ([`crate::exchange::LocalExchange`]), one rank keeps
//!   everything: the single-node version.
//!
//! The two jobs, [`WordCount`] (word -> count) and [`InvertedIndex`] (word
//! -> ids of the documents it occurs in), differ only in their [`Job`]
//! value: what a word's occurrence adds and how two values merge.

pub mod codec;
pub mod reference;
pub mod text;

pub use text::MAX_SIZE;
use text::{generate, split_at_lines};

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::thread;
use std::time::Instant;

use crate::exchange::Exchange;
use crate::report::AppReport;

/// Tag of the LMRs that carry this application's exchanges over LITE
/// ("MAPR").
pub const EXCHANGE_TAG: u32 = 0x4d41_5052;

/// Reduce buckets per rank: the reduce workers' units of work.
const BUCKETS: usize = 64;

/// The most worker threads a rank runs.
pub const MAX_THREADS: usize = 256;

/// A job's result: every word and its value, sorted by word.
pub type Output<V> = Vec<(Vec<u8>, V)>;

/// A MapReduce job over documents of words: the map step is the same for
/// every job (each word occurrence of each document); a job says what a
/// word's value is.
pub trait Job {
    /// What the job computes for each word.
    type Value: Default + Send + fmt::Debug + PartialEq;

    /// The job's name in reports.
    const NAME: &'static str;

    /// Folds one occurrence of a word, in document `doc`, into its value.
    fn add(value: &mut Self::Value, doc: u32);

    /// Folds another partial value of the same word into `value`.
    fn merge(value: &mut Self::Value, other: Self::Value);

    /// Puts a value in its final form, before it is sent or returned.
    fn finish(_value: &mut Self::Value) {}

    /// Appends `value`, in the encoding of [`codec`].
    fn encode(value: &Self::Value, out: &mut Vec<u8>);

    /// Takes a value written by [`Job::encode`] off the front of `input`.
    fn decode(input: &mut &[u8]) -> io::Result<Self::Value>;
}

/// Word count: how many times each word occurs.
pub struct WordCount;

impl Job for WordCount {
    type Value = u64;
    const NAME: &'static str = "wordcount";

    fn add(count: &mut u64, _doc: u32) {
        *count += 1;
    }

    fn merge(count: &mut u64, other: u64) {
        *count += other;
    }

    fn encode(count: &u64, out: &mut Vec<u8>) {
        codec::put_varint(out, *count);
    }

    fn decode(input: &mut &[u8]) -> io::Result<u64> {
        codec::get_varint(input)
    }
}

/// Inverted index: the sorted ids of the documents each word occurs in.
pub struct InvertedIndex;

impl Job for InvertedIndex {
    type Value = Vec<u32>;
    const NAME: &'static str = "invindex";

    fn add(ids: &mut Vec<u32>, doc: u32) {
        // A word often repeats within its document: skip the duplicate now.
        if ids.last() != Some(&doc) {
            ids.push(doc);
        }
    }

    fn merge(ids: &mut Vec<u32>, other: Vec<u32>) {
        ids.extend(other);
    }

    fn finish(ids: &mut Vec<u32>) {
        ids.sort_unstable();
        ids.dedup();
    }

    fn encode(ids: &Vec<u32>, out: &mut Vec<u8>) {
        codec::put_ids(out, ids);
    }

    fn decode(input: &mut &[u8]) -> io::Result<Vec<u32>> {
        codec::get_ids(input)
    }
}

/// 64-bit FNV-1a: a fixed hash, so that every rank partitions alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `job` on `input` (rank 0's; the other ranks pass `None`) over the
/// ranks of `exchange`, with `threads` workers on each; returns the result
/// on rank 0 and `None` on the others.
///
/// # Errors
///
/// `EINVAL` if `threads` is not within `1..=`[`MAX_THREADS`] or a line does
/// not start with a document id; `EPROTO` if a rank receives a malformed
/// buffer; the error of a worker thread that could not start; the
/// exchange's errors.
pub fn map_reduce<J: Job>(
    exchange: &mut dyn Exchange,
    input: Option<&[u8]>,
    threads: usize,
) -> io::Result<Option<Output<J::Value>>> {
    let nodes = exchange.nodes();
    if !(1..=MAX_THREADS).contains(&threads) || nodes == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }

    // Split: rank 0 scatters one split per rank.
    let splits = match input {
        Some(input) if exchange.rank() == 0 => split_at_lines(input, nodes)
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect(),
        _ => vec![Vec::new(); nodes],
    };
    let split = from_rank(0, exchange.all_to_all(splits)?)?;

    // Map, then shuffle each rank's partitions to it.
    let mapped = in_parallel(split_at_lines(&split, threads), |piece| {
        map::<J>(piece, nodes)
    })?;
    let mut outgoing = vec![Vec::new(); nodes];
    for partitions in mapped {
        for (out, partition) in outgoing.iter_mut().zip(partitions) {
            out.extend_from_slice(&partition);
        }
    }
    drop(split);
    let incoming = exchange.all_to_all(outgoing)?;

    // Reduce, then gather the reduced words on rank 0.
    let reduced = reduce::<J>(&incoming, threads)?;
    drop(incoming);
    let Some(gathered) = exchange.gather(reduced)? else {
        return Ok(None);
    };
    let mut output = Vec::new();
    for part in &gathered {
        let mut records = part.as_slice();
        while !records.is_empty() {
            let word = codec::get_bytes(&mut records)?.to_vec();
            output.push((word, J::decode(&mut records)?));
        }
    }
    output.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(output))
}

/// What `rank` sent, of the `incoming` parts of an all-to-all.
fn from_rank(rank: usize, mut incoming: Vec<Vec<u8>>) -> io::Result<Vec<u8>> {
    if rank < incoming.len() {
        Ok(incoming.swap_remove(rank))
    } else {
        Err(codec::malformed())
    }
}

/// Runs `work` on each of `inputs`, one thread each; returns the results
/// in order, or the first error.
///
/// # Errors
///
/// The first error of `work`; the error of a thread that could not start
/// (the threads already started finish first).
fn in_parallel<I: Send, T: Send>(
    inputs: impl IntoIterator<Item = I>,
    work: impl Fn(I) -> io::Result<T> + Sync,
) -> io::Result<Vec<T>> {
    thread::scope(|scope| {
        let work = &work;
        let workers = inputs
            .into_iter()
            .map(|input| thread::Builder::new().spawn_scoped(scope, move || work(input)))
            .collect::<io::Result<Vec<_>>>()?;
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Maps one piece of a split: combines its words in a hash map and encodes
/// them into one partition per rank, each a sequence of
/// `varint(bucket) varint(length) records`.
fn map<J: Job>(piece: &[u8], nodes: usize) -> io::Result<Vec<Vec<u8>>> {
    // Words borrow from the split: no copy until they are encoded.
    let mut combined = HashMap::<&[u8], J::Value>::new();
    for line in piece.split(|&b| b == b'\n') {
        if let Some((doc, words)) = text::parse_document(line)? {
            for word in words {
                J::add(combined.entry(word).or_default(), doc);
            }
        }
    }
    // Slot `s` is rank `s % nodes`'s bucket `s / nodes`.
    let slot_count = nodes * BUCKETS;
    let mut slots = vec![Vec::new(); slot_count];
    for (word, mut value) in combined {
        J::finish(&mut value);
        // PANIC: the remainder is below `slot_count`, the number of slots.
        let slot = &mut slots[(fnv1a(word) % slot_count as u64) as usize];
        codec::put_bytes(slot, word);
        J::encode(&value, slot);
    }
    // Each run of `nodes` slots is one bucket, on every rank in turn.
    let mut partitions = vec![Vec::new(); nodes];
    for (bucket, ranks) in slots.chunks(nodes).enumerate() {
        for (partition, records) in partitions.iter_mut().zip(ranks) {
            if !records.is_empty() {
                codec::put_varint(partition, bucket as u64);
                codec::put_bytes(partition, records);
            }
        }
    }
    Ok(partitions)
}

/// Reduces the partitions every rank sent this one, bucket by bucket on
/// `threads` workers; returns the reduced records.
fn reduce<J: Job>(incoming: &[Vec<u8>], threads: usize) -> io::Result<Vec<u8>> {
    let mut buckets = vec![Vec::new(); BUCKETS];
    for partition in incoming {
        let mut rest = partition.as_slice();
        while !rest.is_empty() {
            let bucket = codec::get_length(&mut rest)?;
            let records = codec::get_bytes(&mut rest)?;
            buckets
                .get_mut(bucket)
                .ok_or_else(codec::malformed)?
                .push(records);
        }
    }
    let workers = threads.min(BUCKETS);
    let reduced = in_parallel(0..workers, |worker| {
        let mut out = Vec::new();
        for bucket in buckets.iter().skip(worker).step_by(workers) {
            let mut merged = HashMap::<&[u8], J::Value>::new();
            for &chunk in bucket {
                let mut records = chunk;
                while !records.is_empty() {
                    let word = codec::get_bytes(&mut records)?;
                    J::merge(merged.entry(word).or_default(), J::decode(&mut records)?);
                }
            }
            for (word, mut value) in merged {
                J::finish(&mut value);
                codec::put_bytes(&mut out, word);
                J::encode(&value, &mut out);
            }
        }
        Ok(out)
    })?;
    Ok(reduced.concat())
}

/// Which job to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// [`WordCount`].
    WordCount,
    /// [`InvertedIndex`].
    InvertedIndex,
}

impl JobKind {
    /// The job named `name` on the command line: `wordcount` or `invindex`.
    pub fn parse(name: &str) -> Option<JobKind> {
        match name {
            WordCount::NAME => Some(JobKind::WordCount),
            InvertedIndex::NAME => Some(JobKind::InvertedIndex),
            _ => None,
        }
    }
}

/// One run of LITE-MapReduce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The job.
    pub job: JobKind,
    /// Bytes of input to generate (at least; whole lines), at most
    /// [`MAX_SIZE`].
    pub size: usize,
    /// Worker threads on each rank, `1..=`[`MAX_THREADS`].
    pub threads: usize,
    /// Seed of the input generator.
    pub seed: u64,
}

/// Generates the input on rank 0, runs the job over `exchange` and checks
/// the result against the single-process reference. Every rank returns
/// the report, with rank 0's verdict and input size; the time runs from
/// just after the input is generated to the gathered, sorted result.
///
/// # Errors
///
/// `EINVAL` if the size or the number of threads is out of range (on every
/// rank, before any exchange); `ENOMEM` if rank 0 cannot hold the input; as
/// [`map_reduce`].
pub fn run(exchange: &mut dyn Exchange, config: &Config) -> io::Result<AppReport> {
    if config.size > MAX_SIZE || !(1..=MAX_THREADS).contains(&config.threads) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    match config.job {
        JobKind::WordCount => run_job::<WordCount>(exchange, config, reference::word_count),
        JobKind::InvertedIndex => {
            run_job::<InvertedIndex>(exchange, config, reference::inverted_index)
        }
    }
}

fn run_job<J: Job>(
    exchange: &mut dyn Exchange,
    config: &Config,
    reference: fn(&[u8]) -> io::Result<Output<J::Value>>,
) -> io::Result<AppReport> {
    let input = if exchange.rank() == 0 {
        Some(generate(config.size, config.seed)?)
    } else {
        None
    };
    let start = Instant::now();
    let output = map_reduce::<J>(exchange, input.as_deref(), config.threads)?;
    let elapsed = start.elapsed();

    let checked = match (&input, output) {
        (Some(input), Some(output)) => output == reference(input)?,
        _ => false,
    };
    let work = input.as_ref().map_or(0, |input| input.len() as u64);
    let (checked, work) = share_verdict(exchange, checked, work)?;
    Ok(AppReport {
        app: J::NAME,
        transport: exchange.transport(),
        nodes: exchange.nodes(),
        work,
        unit: "bytes",
        elapsed,
        checked,
    })
}

/// Rank 0's verdict and input size, on every rank.
fn share_verdict(exchange: &mut dyn Exchange, checked: bool, work: u64) -> io::Result<(bool, u64)> {
    let mut message = vec![u8::from(checked)];
    message.extend_from_slice(&work.to_le_bytes());
    let mut outgoing = vec![Vec::new(); exchange.nodes()];
    if exchange.rank() == 0 {
        outgoing.fill(message);
    }
    let message = from_rank(0, exchange.all_to_all(outgoing)?)?;
    match message.split_first() {
        Some((&checked, work)) => {
            let work = work.try_into().map_err(|_| codec::malformed())?;
            Ok((checked == 1, u64::from_le_bytes(work)))
        }
        None => Err(codec::malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::{LocalExchange, ThreadMesh};

    /// The engine's result on `nodes` ranks of `threads` workers each.
    fn on_mesh<J: Job>(input: &[u8], nodes: usize, threads: usize) -> Output<J::Value> {
        let mut results = ThreadMesh::run(nodes, |mesh| {
            let input = (mesh.rank() == 0).then_some(input);
            map_reduce::<J>(mesh, input, threads).unwrap()
        });
        assert!(results[1..].iter().all(Option::is_none));
        results.swap_remove(0).unwrap()
    }

    #[test]
    fn mapreduce_equals_the_reference_on_1_to_4_ranks() {
        let input = generate(60_000, 11).unwrap();
        let counts = reference::word_count(&input).unwrap();
        let index = reference::inverted_index(&input).unwrap();
        assert!(counts.len() > 1000 && index.len() == counts.len());
        for nodes in 1..=4 {
            for threads in 1..=3 {
                assert!(
                    on_mesh::<WordCount>(&input, nodes, threads) == counts,
                    "{nodes}x{threads}"
                );
                assert!(
                    on_mesh::<InvertedIndex>(&input, nodes, threads) == index,
                    "{nodes}x{threads}"
                );
            }
        }
    }

    #[test]
    fn mapreduce_of_empty_input_is_empty() {
        for nodes in 1..=3 {
            assert!(on_mesh::<WordCount>(b"", nodes, 2).is_empty());
            assert!(on_mesh::<InvertedIndex>(b"\n\n", nodes, 2).is_empty());
        }
    }

    #[test]
    fn mapreduce_finds_a_word_of_a_single_split() {
        let mut input = Vec::new();
        for id in 0..300 {
            let rare = if id == 150 { " zyzzyva" } else { "" };
            input.extend_from_slice(format!("{id}\tcommon words{rare} common\n").as_bytes());
        }
        let splits = split_at_lines(&input, 3);
        let holding: Vec<bool> = splits
            .iter()
            .map(|s| s.windows(7).any(|w| w == b"zyzzyva"))
            .collect();
        assert_eq!(holding, [false, true, false]);

        let counts = on_mesh::<WordCount>(&input, 3, 2);
        assert_eq!(counts, reference::word_count(&input).unwrap());
        assert!(counts.contains(&(b"zyzzyva".to_vec(), 1)));
        assert!(counts.contains(&(b"common".to_vec(), 600)));
        let index = on_mesh::<InvertedIndex>(&input, 3, 2);
        assert!(index.contains(&(b"zyzzyva".to_vec(), vec![150])));
        assert_eq!(index, reference::inverted_index(&input).unwrap());
    }

    #[test]
    fn mapreduce_reports_a_checked_run_on_every_rank() {
        let config = Config {
            job: JobKind::InvertedIndex,
            size: 30_000,
            threads: 2,
            seed: 5,
        };
        let reports = ThreadMesh::run(3, |mesh| run(mesh, &config).unwrap());
        let work = generate(30_000, 5).unwrap().len() as u64;
        for report in reports {
            assert!(report.checked);
            assert_eq!(
                (report.app, report.transport, report.nodes),
                ("invindex", "threads", 3)
            );
            assert_eq!((report.work, report.unit), (work, "bytes"));
        }
        let config = Config {
            job: JobKind::WordCount,
            size: 0,
            ..config
        };
        let report = run(&mut LocalExchange, &config).unwrap();
        assert!(report.checked && report.work == 0 && report.app == "wordcount");
    }

    #[test]
    fn mapreduce_refuses_bad_lines_and_no_workers() {
        let einval = Some(libc::EINVAL);
        let bad = map_reduce::<WordCount>(&mut LocalExchange, Some(b"0 a\nword\n"), 1);
        assert_eq!(bad.unwrap_err().raw_os_error(), einval);
        for threads in [0, MAX_THREADS + 1] {
            let idle = map_reduce::<WordCount>(&mut LocalExchange, Some(b"0 a\n"), threads);
            assert_eq!(idle.unwrap_err().raw_os_error(), einval);
        }
        let huge = Config {
            job: JobKind::WordCount,
            size: MAX_SIZE + 1,
            threads: 1,
            seed: 1,
        };
        assert_eq!(
            run(&mut LocalExchange, &huge).unwrap_err().raw_os_error(),
            einval
        );
        assert_eq!(JobKind::parse("invindex"), Some(JobKind::InvertedIndex));
        assert_eq!(JobKind::parse("sort"), None);
    }

    #[test]
    fn mapreduce_values_round_trip_through_their_encoding() {
        let mut buffer = Vec::new();
        WordCount::encode(&123_456_789, &mut buffer);
        InvertedIndex::encode(&vec![1, 5, 900_000], &mut buffer);
        let mut input = buffer.as_slice();
        assert_eq!(WordCount::decode(&mut input).unwrap(), 123_456_789);
        assert_eq!(InvertedIndex::decode(&mut input).unwrap(), [1, 5, 900_000]);
        assert!(input.is_empty());
        assert!(WordCount::decode(&mut input).is_err());
    }
}
