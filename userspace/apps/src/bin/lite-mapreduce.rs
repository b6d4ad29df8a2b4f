//! LITE-MapReduce: word count or an inverted index of generated text,
//! across the nodes, checked against a single-process reference.
//!
//! ```text
//! lite-mapreduce [TRANSPORT OPTIONS] [--job wordcount|invindex] [--size 2M]
//!                [--threads 2] [--seed 1]
//! ```
//!
//! The input is at most 4G, and each rank runs 1 to 256 worker threads.
//!
//! Rank 0 prints one `LITE-APP` line (see `lite_apps::report`); every rank
//! exits with status 1 if the result did not match the reference.

use lite_apps::cli::{fail, Options};
use lite_apps::mapreduce::{self, Config, JobKind, MAX_SIZE, MAX_THREADS};

const PROGRAM: &str = "lite-mapreduce";

fn main() {
    let options = Options::parse(
        std::env::args().skip(1),
        &["job", "size", "threads", "seed"],
    )
    .unwrap_or_else(|e| fail(PROGRAM, &e, true));
    let config = config(&options).unwrap_or_else(|e| fail(PROGRAM, &e, true));
    let mut exchange = options
        .connect(mapreduce::EXCHANGE_TAG)
        .unwrap_or_else(|e| fail(PROGRAM, &format!("connecting: {e}"), false));
    let report = mapreduce::run(exchange.as_mut(), &config).unwrap_or_else(|e| {
        fail(
            PROGRAM,
            &format!("{}: {e}", options.text("job", "wordcount")),
            false,
        )
    });
    if exchange.rank() == 0 {
        println!("{report}");
    } else {
        eprintln!("{PROGRAM}: rank {} done", exchange.rank());
    }
    if !report.checked {
        fail(PROGRAM, "the result differs from the reference", false);
    }
}

/// The run the command line asks for.
fn config(options: &Options) -> Result<Config, String> {
    let job = options.text("job", "wordcount");
    let job = JobKind::parse(job)
        .ok_or_else(|| format!("unknown job {job:?} (wordcount or invindex)"))?;
    let size = options.number("size", 2 << 20)?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&size| size <= MAX_SIZE)
        .ok_or_else(|| format!("--size must be at most {}G", MAX_SIZE >> 30))?;
    let threads = options.number("threads", 2)?;
    let threads = usize::try_from(threads)
        .ok()
        .filter(|threads| (1..=MAX_THREADS).contains(threads))
        .ok_or_else(|| format!("--threads must be 1 to {MAX_THREADS}"))?;
    Ok(Config {
        job,
        size,
        threads,
        seed: options.number("seed", 1)?,
    })
}
