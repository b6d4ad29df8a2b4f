//! `lite-log`: LITE-Log, a log every node appends to concurrently and
//! reads back, over LITE, TCP or one process. Every rank runs it at once:
//!
//! ```text
//! lite-log --transport lite --cm IP --nodes N [--records 200] [--threads 2]
//!          [--record-size mix|BYTES] [--log-size BYTES] [--max-records N]
//!          [--kill-test 1] [--log-port P]
//! ```
//!
//! Rank 0 prints one `LITE-APP app=log ...` line; every rank exits with 1
//! if the log did not hold every rank's records exactly once and intact.

use lite_apps::cli::{fail, Options};
use lite_apps::log::{self, Settings};

fn main() {
    const PROGRAM: &str = "lite-log";
    let options = Options::parse(std::env::args().skip(1), log::OPTIONS)
        .unwrap_or_else(|message| fail(PROGRAM, &message, true));
    let settings =
        Settings::from_options(&options).unwrap_or_else(|message| fail(PROGRAM, &message, true));
    if options.number("stalled-writer", 0) == Ok(1) {
        if let Err(e) = log::run_stalled_writer(&options, &settings) {
            fail(PROGRAM, &format!("stalled writer: {e}"), false);
        }
        return;
    }
    match log::run(&options, &settings) {
        Ok((rank, report)) => {
            if rank == 0 {
                println!("{report}");
            }
            if !report.checked {
                fail(PROGRAM, "the log did not check out", false);
            }
        }
        Err(e) => fail(PROGRAM, &e.to_string(), false),
    }
}
