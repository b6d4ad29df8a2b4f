//! LITE-MapReduce: word count or an inverted index of generated text,
//! across the nodes, checked against a single-process reference.
//!
//! ```text
//! lite-mapreduce [TRANSPORT OPTIONS] [--job wordcount|invindex] [--size 2M]
//!                [--threads 2] [--seed 1]
//! ```
//!
//! Rank 0 prints one `LITE-APP` line (see `lite_apps::report`); every rank
//! exits with status 1 if the result did not match the reference.

use lite_apps::cli::{fail, Options};
use lite_apps::mapreduce::{self, Config, JobKind};

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
    let too_big = |name: &str| format!("--{name} is too large");
    let size = options.number("size", 2 << 20)?;
    let threads = options.number("threads", 2)?;
    if threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    Ok(Config {
        job,
        size: usize::try_from(size).map_err(|_| too_big("size"))?,
        threads: usize::try_from(threads).map_err(|_| too_big("threads"))?,
        seed: options.number("seed", 1)?,
    })
}
