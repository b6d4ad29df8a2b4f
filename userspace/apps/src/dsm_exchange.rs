//! [`Exchange`] over LITE-DSM: the ranks share one region, which node 1
//! creates and every rank maps, and synchronize with LITE barriers. Apart
//! from joining, opening the region and the barriers, nothing here calls
//! LITE: the parts move as ordinary loads and stores, which the kernel
//! turns into page faults, fetches and invalidations.
//!
//! # Layout
//!
//! The region holds, for each of two parities, one header page per rank
//! (the lengths of that rank's parts, one `u64` per destination) and one
//! slot of [`DsmExchange::slot_size`] bytes per (sender, destination) pair.
//!
//! # Protocol
//!
//! All-to-all call `c` writes this rank's lengths into its header page of
//! parity `c % 2` and enters a barrier; every rank then reads every
//! header, so all agree on how many rounds the largest part needs. Round
//! `k` (counted over the whole exchange) writes each part's `k`-th piece
//! into the sender's slot for its destination, of parity `k % 2`, enters a
//! barrier and reads the pieces addressed to this rank.
//!
//! As in [`crate::lite_exchange`], no barrier protects the reads: what a
//! round or a call reads has the other parity from what the next one
//! writes, and the one after that writes it only after passing a barrier
//! that every reader enters once it finished reading.

use std::io;
use std::time::Duration;

use lite::dsm::{Mapping, Region};

use crate::exchange::{check_parts, Exchange};
use crate::lite_barrier::BoundedBarrier;
use crate::lite_exchange::{check_ranks, password_for};

/// High byte of the region's name, apart from other programs' names.
const NAME_PREFIX: u64 = 0xd5 << 56;

/// The node that keeps the region: rank 0's.
const HOME_NODE: u32 = 1;

/// Rounds and calls alternate between this many sets of slots and headers.
const PARITIES: usize = 2;

/// The size of a page of the region, and of each header.
const PAGE: usize = 4096;

/// Largest and smallest slot; the slots of a large cluster share at most
/// [`SLOTS_BUDGET`] bytes.
const MAX_SLOT: usize = 256 << 10;
const SLOTS_BUDGET: usize = 64 << 20;

/// Longest part a header may announce: more is a corrupt header.
const MAX_PART: u64 = 1 << 36;

/// Longest a rank waits in a barrier for the others, as over LITE memory.
const BARRIER_LIMIT: Duration = Duration::from_secs(600);

/// All-to-all exchange through a LITE-DSM region.
#[derive(Debug)]
pub struct DsmExchange {
    rank: usize,
    nodes: usize,
    /// The whole region, mapped; unmapped before the region closes.
    map: Mapping,
    _region: Region,
    barrier: BoundedBarrier,
    /// Bytes of each slot, a whole number of pages.
    slot_size: usize,
    /// All-to-all calls so far: the parity of the next call's headers.
    calls: usize,
    /// Rounds so far: the parity of the next round's slots.
    rounds: usize,
}

impl DsmExchange {
    /// Rank `rank` of `nodes`, on node `rank + 1`: rank 0 creates the
    /// region of `tag` on its node, the others open it once it exists.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `rank` is not below `nodes` or `nodes` is above what
    /// LITE holds; LITE's errors of opening the region or of a barrier.
    pub fn new(rank: usize, nodes: usize, tag: u32) -> io::Result<DsmExchange> {
        check_ranks(rank, nodes)?;
        let slot_size = DsmExchange::slot_size(nodes);
        let size = (PARITIES * nodes * (PAGE + nodes * slot_size)) as u64;
        // `check_ranks` bounded `nodes` by MAX_NODES: it fits a u32 and
        // leaves the low byte of the name free.
        let name = NAME_PREFIX | u64::from(tag) << 8 | nodes as u64;
        let password = password_for(tag);
        let mut barrier = BoundedBarrier::new(nodes as u32)?;
        let region = if rank == 0 {
            let region = Region::create(name, size, password)?;
            barrier.wait(BARRIER_LIMIT)?;
            region
        } else {
            barrier.wait(BARRIER_LIMIT)?;
            Region::open(HOME_NODE, name, size, password)?
        };
        let map = region.map()?;
        // Rank 0 keeps its file open until every rank opened its own.
        barrier.wait(BARRIER_LIMIT)?;
        Ok(DsmExchange {
            rank,
            nodes,
            map,
            _region: region,
            barrier,
            slot_size,
            calls: 0,
            rounds: 0,
        })
    }

    /// Bytes of each of the `PARITIES * nodes²` slots of `nodes` ranks.
    pub fn slot_size(nodes: usize) -> usize {
        let share = SLOTS_BUDGET / (PARITIES * nodes * nodes).max(1);
        (share.min(MAX_SLOT) / PAGE).max(1) * PAGE
    }

    /// Where the header of `rank`, parity `parity`, starts.
    fn header(&self, parity: usize, rank: usize) -> usize {
        (parity * self.nodes + rank) * PAGE
    }

    /// Where the slot from `sender` to `destination`, parity `parity`,
    /// starts.
    fn slot(&self, parity: usize, sender: usize, destination: usize) -> usize {
        let headers = PARITIES * self.nodes * PAGE;
        headers + ((parity * self.nodes + sender) * self.nodes + destination) * self.slot_size
    }

    /// Every rank's part lengths, by sender then destination, once every
    /// rank published its own `lengths`.
    fn share_lengths(&mut self, lengths: &[u64]) -> io::Result<Vec<Vec<u64>>> {
        let parity = self.calls % PARITIES;
        self.calls += 1;
        let bytes: Vec<u8> = lengths.iter().flat_map(|l| l.to_le_bytes()).collect();
        self.map.write(self.header(parity, self.rank), &bytes)?;
        self.barrier.wait(BARRIER_LIMIT)?;
        let mut all = Vec::with_capacity(self.nodes);
        let mut header = vec![0u8; 8 * self.nodes];
        for sender in 0..self.nodes {
            self.map.read(self.header(parity, sender), &mut header)?;
            let row = header
                .chunks_exact(8)
                .map(|word| {
                    let mut bytes = [0u8; 8];
                    bytes.copy_from_slice(word);
                    u64::from_le_bytes(bytes)
                })
                .map(|length| {
                    (length <= MAX_PART)
                        .then_some(length)
                        .ok_or_else(|| io::Error::from_raw_os_error(libc::EPROTO))
                })
                .collect::<io::Result<Vec<u64>>>()?;
            all.push(row);
        }
        Ok(all)
    }
}

impl Exchange for DsmExchange {
    fn rank(&self) -> usize {
        self.rank
    }

    fn nodes(&self) -> usize {
        self.nodes
    }

    fn all_to_all(&mut self, mut outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, self.nodes)?;
        let lengths: Vec<u64> = outgoing.iter().map(|part| part.len() as u64).collect();
        let all = self.share_lengths(&lengths)?;
        // A rank's own part stays with it.
        let slot = self.slot_size as u64;
        let rounds = all
            .iter()
            .enumerate()
            .flat_map(|(sender, row)| {
                row.iter()
                    .enumerate()
                    .filter(move |&(destination, _)| destination != sender)
                    .map(|(_, &length)| length.div_ceil(slot))
            })
            .max()
            .unwrap_or(0);
        // Grown piece by piece: a length read from a header is not trusted
        // with an allocation up front.
        let mut incoming: Vec<Vec<u8>> = vec![Vec::new(); self.nodes];
        for round in 0..rounds {
            let parity = self.rounds % PARITIES;
            self.rounds += 1;
            // `round * slot` is at most a part's length, which fits a usize.
            let start = (round * slot) as usize;
            for (destination, part) in outgoing.iter().enumerate() {
                if destination == self.rank || start >= part.len() {
                    continue;
                }
                let end = part.len().min(start + self.slot_size);
                // PANIC: `start < end <= part.len()`.
                let piece = &part[start..end];
                self.map
                    .write(self.slot(parity, self.rank, destination), piece)?;
            }
            self.barrier.wait(BARRIER_LIMIT)?;
            for (sender, part) in incoming.iter_mut().enumerate() {
                // PANIC: `all` has a row per rank and each row a length per
                // rank, `self.rank` among them.
                let length = all[sender][self.rank];
                if sender == self.rank || (start as u64) >= length {
                    continue;
                }
                let piece = (length - start as u64).min(slot) as usize;
                let at = part.len();
                part.resize(at + piece, 0);
                // PANIC: `at` was the length before the resize.
                self.map
                    .read(self.slot(parity, sender, self.rank), &mut part[at..])?;
            }
        }
        // PANIC: `check_parts` made `outgoing` one part per rank.
        incoming[self.rank] = std::mem::take(&mut outgoing[self.rank]);
        Ok(incoming)
    }

    fn barrier(&mut self) -> io::Result<()> {
        self.barrier.wait(BARRIER_LIMIT)
    }

    fn transport(&self) -> &'static str {
        "dsm"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_whole_pages_within_the_budget() {
        for nodes in [1, 2, 4, 16, 64] {
            let slot = DsmExchange::slot_size(nodes);
            assert_eq!(slot % PAGE, 0, "{nodes} ranks");
            assert!((PAGE..=MAX_SLOT).contains(&slot), "{nodes} ranks");
            assert!(
                PARITIES * nodes * nodes * slot
                    <= SLOTS_BUDGET.max(PARITIES * nodes * nodes * PAGE)
            );
        }
        assert_eq!(DsmExchange::slot_size(4), MAX_SLOT);
    }
}
