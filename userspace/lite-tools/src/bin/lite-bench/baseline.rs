//! The native verbs baseline taking turns with LITE's latency series
//! (`--baseline`). This program starts `lite-verbs-bench --turns` and lets
//! it time each series in blocks, alternating with blocks of LITE's same
//! series, so that the two sides of every ratio are measured within
//! milliseconds of each other and drift of the emulator, which moves
//! latencies by tens of percent over seconds, moves both alike.
//!
//! The protocol is the baseline's: a line `GO OP SIZE COUNT` on its
//! standard input lets it time COUNT operations of that series, and it
//! ends each block with `LITE-VERBS-TURN` on its standard output. Every
//! other line it prints (its result lines) is passed on to this program's
//! output.

use lite_tools::bench::Operation;
use lite_tools::say;

use super::piped::Piped;

/// The line that ends each of the baseline's blocks.
const TURN_DONE: &str = "LITE-VERBS-TURN";

/// Who times one block of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The native verbs baseline.
    Baseline,
    /// LITE, in this program.
    Lite,
}

/// The blocks of a series of `iters` operations per side, at most `block`
/// each, in the order they run. Blocks come in pairs, the baseline first
/// in even pairs and LITE first in odd ones, so that neither side always
/// runs right after the other.
pub fn schedule(iters: usize, block: usize) -> Vec<(Side, usize)> {
    let block = block.max(1);
    let mut blocks = Vec::with_capacity(2 * iters.div_ceil(block));
    let mut left = iters;
    let mut pair = 0;
    while left > 0 {
        let count = left.min(block);
        let order = if pair % 2 == 0 {
            [Side::Baseline, Side::Lite]
        } else {
            [Side::Lite, Side::Baseline]
        };
        blocks.extend(order.map(|side| (side, count)));
        left -= count;
        pair += 1;
    }
    blocks
}

/// A running `lite-verbs-bench --turns`, waiting for its turns.
pub struct Baseline {
    process: Piped,
    /// Most operations per block.
    pub block: usize,
}

impl Baseline {
    /// Starts `command` (a program and its arguments, separated by spaces),
    /// which must take turns (`lite-verbs-bench --turns`), with blocks of
    /// at most `block` operations.
    pub fn spawn(command: &str, block: usize) -> Result<Baseline, String> {
        let mut words = command.split_whitespace();
        let program = words.next().ok_or("an empty --baseline command")?;
        // It would wait for a turn that never comes, up to its own
        // bounded wait.
        let process = Piped::spawn(program, words, "the baseline", false)?;
        Ok(Baseline { process, block })
    }

    /// Lets the baseline time `count` operations of its series of
    /// `operation` at `size` bytes; returns once its block ended, having
    /// passed on what it printed meanwhile.
    pub fn turn(&mut self, operation: Operation, size: u64, count: usize) -> Result<(), String> {
        self.process
            .send(&format!("GO {operation} {size} {count}"))
            .map_err(|e| format!("giving the baseline its turn at {operation} of {size} B: {e}"))?;
        loop {
            match self.process.line()? {
                Some(line) if line == TURN_DONE => return Ok(()),
                Some(line) => say(format_args!("{line}")),
                None => {
                    let status = self.process.wait()?;
                    return Err(format!(
                        "the baseline ended during its turn at {operation} of {size} B ({status})"
                    ));
                }
            }
        }
    }

    /// Lets the baseline end once every series took its turns: passes on
    /// what it still prints and checks that it succeeded.
    pub fn finish(mut self) -> Result<(), String> {
        self.process.close();
        while let Some(line) = self.process.line()? {
            say(format_args!("{line}"));
        }
        self.process.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_alternate_in_pairs_whose_order_changes() {
        use Side::{Baseline as B, Lite as L};
        let blocks = vec![(B, 10), (L, 10), (L, 10), (B, 10), (B, 5), (L, 5)];
        assert_eq!(schedule(25, 10), blocks);
        assert_eq!(schedule(0, 10), vec![]);
        let blocks = vec![(B, 1), (L, 1), (L, 1), (B, 1), (B, 1), (L, 1)];
        assert_eq!(schedule(3, 0), blocks);
    }

    #[test]
    fn both_sides_time_every_operation() {
        for (iters, block) in [(300, 10), (301, 7), (1, 50), (1000, 1000)] {
            let blocks = schedule(iters, block);
            for side in [Side::Baseline, Side::Lite] {
                let total: usize = blocks.iter().filter(|b| b.0 == side).map(|b| b.1).sum();
                assert_eq!(total, iters, "{iters} in blocks of {block}");
            }
            let within = |&(_, count): &(_, usize)| (1..=block).contains(&count);
            assert!(blocks.iter().all(within));
        }
    }
}
