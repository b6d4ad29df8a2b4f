//! [`Exchange`] over LITE memory.
//!
//! # Protocol
//!
//! Every rank owns LMRs on its own node, all published for READ under
//! names derived from the application's tag and the rank:
//!
//! - a *directory*, fixed for the lifetime of the exchange: two sets of
//!   [`Entry`]s, one per round parity, each with one entry per destination
//!   rank telling (round, outbox generation, offset, length) of the part
//!   for that rank;
//! - two *outboxes*, one per round parity, each holding the outgoing parts
//!   of the latest round of its parity back to back. Each is replaced by a
//!   bigger one, under a new generation's name, when the parts outgrow it,
//!   independently of the other; the directory stays where it is, so
//!   readers learn of the change from the generation in their entry and
//!   map the new outbox then.
//!
//! All-to-all round `r` (counted from 1) uses parity `p = r % 2`:
//!
//! 1. each rank writes its parts into its outbox `p` and then its entries
//!    `p` into its directory;
//! 2. barrier `r`, the round's only one: every outbox and entry of round
//!    `r` is complete;
//! 3. each rank RDMA-reads its entry `p` in every peer's directory, then
//!    its part from that peer's outbox `p` (all peers at once, one thread
//!    each), and the round is over for it.
//!
//! No second barrier protects the reads, because nothing a round reads is
//! rewritten before every rank finished reading it. Round `r + 1` writes
//! only the other parity. The buffers of parity `p` (outbox `p`, which may
//! also be freed to grow, and entries `p`) are rewritten only in round
//! `r + 2`, which a writer starts only after passing barrier `r + 1`. That
//! barrier completes only once every rank entered it, and a reader enters
//! it only after its step 3 of round `r` finished. So every read of round
//! `r` ends before any rank rewrites what was read. (Extra
//! [`Exchange::barrier`] calls between rounds only add ordering.) The
//! price is the memory of a second outbox.
//!
//! Pull rather than push: the reader knows when it is ready and where its
//! data should go, and a writer never needs room in somebody else's
//! memory, so no rank has to size or grant receive buffers for the
//! others. A part is copied once into the owner's outbox (a local copy)
//! and crosses the network once, in a single read. The round number in
//! each entry catches ranks that got out of step, and one whose writing
//! failed: it still enters the barrier but leaves its entries of an older
//! round, so its peers fail with `EPROTO` instead of reading stale data or
//! waiting forever.

use std::io;
use std::thread;
use std::time::Duration;

use lite::sys::{CHUNK_SIZE, MAX_LMR_SIZE, MAX_NODES, PERM_READ};
use lite::{Lmr, Priority};

use crate::exchange::{check_parts, Exchange};
use crate::lite_barrier::BoundedBarrier;

/// High byte of every name this module publishes, so that they do not
/// clash with names other programs publish on the same node.
const NAME_PREFIX: u64 = 0xe7 << 56;

/// Bits of a name holding the generation (0 is the directory).
const GENERATION_BITS: u32 = 17;

/// Bits of a name holding the parity of the outbox.
const PARITY_BITS: u32 = 1;

/// Bits of a name holding the rank: enough for [`MAX_NODES`] ranks.
const RANK_BITS: u32 = 6;

/// Rounds alternate between this many outboxes and sets of entries.
const PARITIES: usize = 2;

// Every rank and parity fits its bits, and the fields (prefix, tag, rank,
// parity, generation) fill the name exactly.
const _: () = assert!(MAX_NODES as u64 <= 1 << RANK_BITS);
const _: () = assert!(PARITIES as u64 <= 1 << PARITY_BITS);
const _: () = assert!(8 + 32 + RANK_BITS + PARITY_BITS + GENERATION_BITS == 64);

/// Highest outbox generation a name can hold, per parity.
const MAX_GENERATION: u64 = (1 << GENERATION_BITS) - 1;

/// Size of one encoded directory [`Entry`].
const ENTRY_LEN: usize = 32;

/// Parts start at multiples of this in an outbox (cache-line aligned).
const PART_ALIGN: u64 = 64;

/// Longest a rank waits in a barrier for the others: they may be busy
/// with their own share of the work until then.
const BARRIER_LIMIT: Duration = Duration::from_secs(600);

/// Longest a departing rank waits for the others to finish reading its
/// last round before freeing its LMRs.
const DEPARTURE_LIMIT: Duration = Duration::from_secs(60);

/// Smallest outbox: one chunk, enough for the small exchanges (sums,
/// gathers) most rounds are.
const MIN_OUTBOX: u64 = CHUNK_SIZE;

/// What a rank's directory says about the part for one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Entry {
    /// The all-to-all round (from 1) the part belongs to; 0 before any.
    round: u64,
    /// Generation of the outbox holding the part (0: no outbox yet).
    generation: u64,
    /// Where the part starts in the outbox.
    offset: u64,
    /// Length of the part in bytes.
    length: u64,
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut bytes = [0u8; ENTRY_LEN];
        let fields = [self.round, self.generation, self.offset, self.length];
        for (slot, field) in bytes.chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&field.to_le_bytes());
        }
        bytes
    }

    fn decode(bytes: &[u8; ENTRY_LEN]) -> Entry {
        let mut fields = bytes.chunks_exact(8).map(|field| {
            let mut word = [0u8; 8];
            word.copy_from_slice(field);
            u64::from_le_bytes(word)
        });
        let mut next = || fields.next().unwrap_or_default();
        Entry {
            round: next(),
            generation: next(),
            offset: next(),
            length: next(),
        }
    }
}

/// Entries as written into a directory's LMR, in order: a whole
/// directory (parity by parity, each in rank order) or one parity's
/// entries.
fn encode_directory(entries: &[Entry]) -> Vec<u8> {
    entries.iter().flat_map(|entry| entry.encode()).collect()
}

/// Where each destination's part goes in the outbox, and the bytes the
/// outbox needs. `own` gets no room: a rank's own part never leaves it.
fn layout(part_lengths: &[u64], own: usize) -> io::Result<(Vec<(u64, u64)>, u64)> {
    let too_big = || io::Error::from_raw_os_error(libc::EFBIG);
    let mut end = 0u64;
    let mut places = Vec::with_capacity(part_lengths.len());
    for (destination, &length) in part_lengths.iter().enumerate() {
        if destination == own || length == 0 {
            places.push((0, 0));
            continue;
        }
        let offset = end
            .checked_next_multiple_of(PART_ALIGN)
            .ok_or_else(too_big)?;
        end = offset.checked_add(length).ok_or_else(too_big)?;
        places.push((offset, length));
    }
    if end > MAX_LMR_SIZE {
        return Err(too_big());
    }
    Ok((places, end))
}

/// The outbox size to allocate when `needed` bytes must fit into an
/// outbox of `current` bytes, or `None` if they fit already.
///
/// Grows at least by half again what is needed and at least doubles, so
/// that steadily growing rounds reallocate only a few times; whole chunks,
/// since LITE allocates chunks anyway.
fn grown_capacity(needed: u64, current: u64) -> Option<u64> {
    if needed <= current {
        return None;
    }
    let generous = needed
        .saturating_add(needed / 2)
        .max(current.saturating_mul(2))
        .max(MIN_OUTBOX);
    Some(whole_chunks(generous).max(whole_chunks(needed)))
}

/// `bytes` rounded up to whole chunks, at most [`MAX_LMR_SIZE`].
fn whole_chunks(bytes: u64) -> u64 {
    bytes
        .checked_next_multiple_of(CHUNK_SIZE)
        .unwrap_or(MAX_LMR_SIZE)
        .min(MAX_LMR_SIZE)
}

/// The name rank `rank`'s outbox of `parity` and `generation` (from 1) is
/// published under, for the application tagged `tag`; generation 0 of
/// parity 0 is the directory's name (see [`directory_name`]).
fn lmr_name(tag: u32, rank: usize, parity: usize, generation: u64) -> u64 {
    let rank = (rank as u64) & ((1 << RANK_BITS) - 1);
    let parity = (parity as u64) & ((1 << PARITY_BITS) - 1);
    NAME_PREFIX
        | (u64::from(tag) << (RANK_BITS + PARITY_BITS + GENERATION_BITS))
        | (rank << (PARITY_BITS + GENERATION_BITS))
        | (parity << GENERATION_BITS)
        | (generation & MAX_GENERATION)
}

/// The name rank `rank`'s directory is published under, for the
/// application tagged `tag`.
fn directory_name(tag: u32, rank: usize) -> u64 {
    lmr_name(tag, rank, 0, 0)
}

/// Which outbox and which entries round `round` uses: below [`PARITIES`].
fn parity_of(round: u64) -> usize {
    // The remainder is below 2, so the cast cannot truncate.
    (round % PARITIES as u64) as usize
}

/// Where the entry of `parity` for `destination` starts in a directory of
/// `nodes` ranks. The entries of one parity are contiguous, in rank order,
/// so a round writes them with one write at `entry_offset(parity, 0, _)`.
fn entry_offset(parity: usize, destination: usize, nodes: usize) -> u64 {
    ((parity * nodes + destination) * ENTRY_LEN) as u64
}

/// `EPROTO` unless `entry` describes a part of round `round` that can be
/// read: an entry of an older round is stale (its writer failed or is out
/// of step), and a non-empty part must name an outbox generation.
fn check_entry(entry: &Entry, round: u64) -> io::Result<()> {
    let bad_generation = entry.generation == 0 || entry.generation > MAX_GENERATION;
    if entry.round != round || (entry.length > 0 && bad_generation) {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    Ok(())
}

/// The password of every LMR of the application tagged `tag`: the same on
/// every rank, different per tag (a SplitMix64 step, to spread the bits).
pub(crate) fn password_for(tag: u32) -> u64 {
    let mut x = u64::from(tag) ^ 0x4c49_5445_2d58_4348;
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `EINVAL` unless `rank` is one of `nodes` ranks LITE can hold.
pub(crate) fn check_ranks(rank: usize, nodes: usize) -> io::Result<()> {
    if nodes == 0 || rank >= nodes || nodes > MAX_NODES as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(())
}

/// The LITE node id of `rank`.
fn node_of(rank: usize) -> io::Result<u32> {
    u32::try_from(rank + 1).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// An outbox: this rank's own, or a mapping of a peer's.
#[derive(Debug)]
struct Outbox {
    lmr: Lmr,
    generation: u64,
}

/// What this rank maps of one peer.
#[derive(Debug)]
struct PeerView {
    rank: usize,
    node: u32,
    directory: Lmr,
    /// The peer's outbox of each parity as last mapped, with its
    /// generation.
    outboxes: [Option<Outbox>; PARITIES],
}

/// What a reader needs to pull its part of one round from any peer.
#[derive(Debug, Clone, Copy)]
struct Pull {
    /// The round; an entry of any other round is stale.
    round: u64,
    /// The round's parity: which entries and outbox hold its parts.
    parity: usize,
    /// Where the reader's entry of this parity is in every directory.
    entry_at: u64,
    tag: u32,
    password: u64,
}

/// The ranks of an application exchanging data through LMRs on their own
/// nodes (see the module documentation for the protocol).
///
/// Dropping it waits (for at most [`DEPARTURE_LIMIT`]) until every rank
/// is done with the last round, then unmaps the peers' LMRs (directories
/// and outboxes of both parities) and frees this rank's own, which also
/// withdraws their names.
#[derive(Debug)]
pub struct LiteExchange {
    // Mappings go before the LMRs they may point at (fields drop in
    // order): peers' views first, then this rank's own LMRs.
    /// Views of every rank, indexed by rank; `None` for this one.
    peers: Vec<Option<PeerView>>,
    /// This rank's outbox of each parity, once it had parts to send.
    outboxes: [Option<Outbox>; PARITIES],
    directory: Lmr,
    rank: usize,
    tag: u32,
    password: u64,
    /// All-to-all rounds started so far.
    round: u64,
    /// Last outbox generation allocated per parity (names are never
    /// reused).
    generations: [u64; PARITIES],
    /// The ranks' barrier; no wait on a rank that exited lasts forever.
    barrier: BoundedBarrier,
}

impl LiteExchange {
    /// Sets up the exchange of rank `rank` (LITE node `rank + 1`) with the
    /// ranks on nodes `1..=nodes`, once this node joined the cluster.
    /// `tag` keeps the LMR names of different applications apart; every
    /// rank must pass the same. Every rank must call this (it contains a
    /// barrier).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `rank` is not below `nodes`, `nodes` is above
    /// [`MAX_NODES`] or this node is not node `rank + 1`; `EEXIST` if
    /// another exchange with the same tag runs on this node; LITE's error
    /// otherwise.
    pub fn new(rank: usize, nodes: usize, tag: u32) -> io::Result<LiteExchange> {
        check_ranks(rank, nodes)?;
        let own_node = node_of(rank)?;
        if lite::node_id()? != own_node {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let password = password_for(tag);
        let entries = vec![Entry::default(); PARITIES * nodes];
        let empty = encode_directory(&entries);
        let directory = Lmr::alloc(own_node, empty.len() as u64, 0, password)?;
        // Round 0 everywhere: nothing has been sent yet.
        directory.write(0, &empty, Priority::None)?;
        directory.publish(directory_name(tag, rank), PERM_READ)?;
        // `check_ranks` bounded `nodes` by MAX_NODES: it fits a u32.
        let mut barrier = BoundedBarrier::new(nodes as u32)?;
        barrier.wait(BARRIER_LIMIT)?;
        let mut peers = Vec::with_capacity(nodes);
        for peer in 0..nodes {
            peers.push(if peer == rank {
                None
            } else {
                let node = node_of(peer)?;
                let name = directory_name(tag, peer);
                Some(PeerView {
                    rank: peer,
                    node,
                    directory: Lmr::ask(node, name, PERM_READ, password)?,
                    outboxes: [None, None],
                })
            });
        }
        Ok(LiteExchange {
            peers,
            outboxes: [None, None],
            directory,
            rank,
            tag,
            password,
            round: 0,
            generations: [0; PARITIES],
            barrier,
        })
    }

    /// Step 1 of a round of `parity`: the parts into that parity's
    /// outbox, then their places into that parity's entries.
    fn stage(&mut self, outgoing: &[Vec<u8>], parity: usize) -> io::Result<()> {
        let lengths: Vec<u64> = outgoing.iter().map(|part| part.len() as u64).collect();
        let (places, needed) = layout(&lengths, self.rank)?;
        // PANIC: `parity` comes from `parity_of`, so it is below PARITIES.
        let capacity = self.outboxes[parity]
            .as_ref()
            .map_or(0, |outbox| outbox.lmr.size());
        if let Some(wanted) = grown_capacity(needed, capacity) {
            self.replace_outbox(parity, wanted, whole_chunks(needed))?;
        }
        // PANIC: as above.
        let outbox = self.outboxes[parity].as_ref();
        let generation = outbox.map_or(0, |outbox| outbox.generation);
        if let Some(outbox) = outbox {
            for (part, &(offset, length)) in outgoing.iter().zip(&places) {
                if length > 0 {
                    // No size limit on a synchronous write: LITE splits it.
                    outbox.lmr.write(offset, part, Priority::None)?;
                }
            }
        }
        let entries: Vec<Entry> = places
            .iter()
            .map(|&(offset, length)| Entry {
                round: self.round,
                generation,
                offset,
                length,
            })
            .collect();
        let at = entry_offset(parity, 0, self.peers.len());
        self.directory
            .write(at, &encode_directory(&entries), Priority::None)
    }

    /// Frees the outbox of `parity` and allocates a `wanted`-byte one under
    /// that parity's next generation, or a `minimum`-byte one if this
    /// user's quota or the node's memory cannot hold `wanted` bytes.
    fn replace_outbox(&mut self, parity: usize, wanted: u64, minimum: u64) -> io::Result<()> {
        // The old one first: its last readers (two rounds ago) finished
        // before the previous round's barrier, and keeping it could exceed
        // the quota.
        // PANIC: `parity` comes from `parity_of`, so it is below PARITIES.
        if let Some(old) = self.outboxes[parity].take() {
            old.lmr.free()?;
        }
        // PANIC: as above.
        let generation = self.generations[parity] + 1;
        if generation > MAX_GENERATION {
            return Err(io::Error::from_raw_os_error(libc::EOVERFLOW));
        }
        // PANIC: as above.
        self.generations[parity] = generation;
        let own_node = node_of(self.rank)?;
        let lmr = match Lmr::alloc(own_node, wanted, 0, self.password) {
            Err(e)
                if wanted > minimum
                    && matches!(e.raw_os_error(), Some(libc::EDQUOT | libc::ENOMEM)) =>
            {
                Lmr::alloc(own_node, minimum, 0, self.password)?
            }
            other => other?,
        };
        let name = lmr_name(self.tag, self.rank, parity, generation);
        lmr.publish(name, PERM_READ)?;
        // PANIC: as above.
        self.outboxes[parity] = Some(Outbox { lmr, generation });
        Ok(())
    }

    /// Step 3 of a round of `parity`: this rank's part from every peer,
    /// indexed by rank (empty for this rank).
    fn collect(&mut self, parity: usize) -> io::Result<Vec<Vec<u8>>> {
        let pull = Pull {
            round: self.round,
            parity,
            entry_at: entry_offset(parity, self.rank, self.peers.len()),
            tag: self.tag,
            password: self.password,
        };
        let mut incoming: Vec<Vec<u8>> = vec![Vec::new(); self.peers.len()];
        let mut views: Vec<&mut PeerView> = self.peers.iter_mut().flatten().collect();
        if let [only] = views.as_mut_slice() {
            // Two ranks: no thread needed to overlap reads.
            // PANIC: views are of ranks below `peers.len()`.
            incoming[only.rank] = fetch_part(only, pull)?;
            return Ok(incoming);
        }
        thread::scope(|scope| {
            let mut readers = Vec::with_capacity(views.len());
            for view in views {
                let peer = view.rank;
                let reader = thread::Builder::new()
                    .name("lite-fetch".into())
                    .spawn_scoped(scope, move || fetch_part(view, pull))?;
                readers.push((peer, reader));
            }
            let mut first_error = None;
            for (peer, reader) in readers {
                match reader.join() {
                    // PANIC: views are of ranks below `peers.len()`.
                    Ok(Ok(part)) => incoming[peer] = part,
                    Ok(Err(e)) => {
                        first_error.get_or_insert(e);
                    }
                    Err(_) => {
                        first_error.get_or_insert(io::Error::from_raw_os_error(libc::EIO));
                    }
                }
            }
            first_error.map_or(Ok(()), Err)
        })?;
        Ok(incoming)
    }
}

/// Reads this rank's part of `pull`'s round from `peer`: its directory
/// entry of the round's parity, then (mapping a new outbox generation if
/// needed) the part from the outbox of that parity.
fn fetch_part(peer: &mut PeerView, pull: Pull) -> io::Result<Vec<u8>> {
    let mut bytes = [0u8; ENTRY_LEN];
    peer.directory
        .read(pull.entry_at, &mut bytes, Priority::None)?;
    let entry = Entry::decode(&bytes);
    check_entry(&entry, pull.round)?;
    if entry.length == 0 {
        return Ok(Vec::new());
    }
    // PANIC: `pull.parity` comes from `parity_of`, so it is below PARITIES.
    let cached = &mut peer.outboxes[pull.parity];
    if cached.as_ref().map(|outbox| outbox.generation) != Some(entry.generation) {
        // The old mapping is revoked once its owner freed it; drop it.
        *cached = None;
        let name = lmr_name(pull.tag, peer.rank, pull.parity, entry.generation);
        let lmr = Lmr::ask(peer.node, name, PERM_READ, pull.password)?;
        *cached = Some(Outbox {
            lmr,
            generation: entry.generation,
        });
    }
    // The length comes from another node's memory: no allocation beyond
    // what an LMR can hold.
    if entry.length > MAX_LMR_SIZE {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    let length =
        usize::try_from(entry.length).map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))?;
    let mut part = vec![0u8; length];
    if let Some(outbox) = cached {
        // No size limit on a synchronous read: LITE splits it.
        outbox.lmr.read(entry.offset, &mut part, Priority::None)?;
    }
    Ok(part)
}

impl Exchange for LiteExchange {
    fn rank(&self) -> usize {
        self.rank
    }

    fn nodes(&self) -> usize {
        self.peers.len()
    }

    /// # Errors
    ///
    /// `EINVAL` for a wrong number of parts; `EFBIG` if the parts exceed
    /// the largest LMR; `EPROTO` if a peer did not publish this round's
    /// parts (it failed, or ranks got out of step); `EOVERFLOW` once an
    /// outbox grew more often than names can count; LITE's error
    /// otherwise.
    fn all_to_all(&mut self, mut outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, self.nodes())?;
        self.round += 1;
        let parity = parity_of(self.round);
        // A rank that fails to stage still takes part in the barrier, so
        // that its peers fail (on the stale round) rather than wait.
        let staged = self.stage(&outgoing, parity);
        self.barrier()?;
        staged?;
        // No barrier after the reads: `collect` returns only once they all
        // ended, and writers rewrite these buffers only two rounds on,
        // after the next round's barrier, which waits for this rank.
        let mut incoming = self.collect(parity)?;
        // PANIC: `check_parts` made `outgoing` and `incoming` one part per
        // rank, and `rank` is below the number of ranks.
        incoming[self.rank] = std::mem::take(&mut outgoing[self.rank]);
        Ok(incoming)
    }

    fn barrier(&mut self) -> io::Result<()> {
        self.barrier.wait(BARRIER_LIMIT)
    }

    fn transport(&self) -> &'static str {
        "lite"
    }
}

impl Drop for LiteExchange {
    fn drop(&mut self) {
        // Peers may still be reading the last round from this rank's
        // outbox (rounds end without a barrier); after a failure nobody
        // may come, hence the limit.
        if self.round > 0 {
            let _ = self.barrier.wait(DEPARTURE_LIMIT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_directories_round_trip() {
        let entry = Entry {
            round: 7,
            generation: 2,
            offset: 1 << 33,
            length: u64::MAX,
        };
        assert_eq!(Entry::decode(&entry.encode()), entry);
        let directory = encode_directory(&[Entry::default(), entry]);
        assert_eq!(directory.len(), 2 * ENTRY_LEN);
        let second: [u8; ENTRY_LEN] = directory[ENTRY_LEN..].try_into().expect("one entry");
        assert_eq!(Entry::decode(&second), entry);
        assert!(directory[..ENTRY_LEN].iter().all(|&b| b == 0));
    }

    #[test]
    fn rounds_alternate_parities() {
        assert_eq!(parity_of(0), 0);
        assert_eq!(parity_of(1), 1);
        assert_eq!(parity_of(2), 0);
        for round in [1, 2, 3, 1000, u64::MAX - 2] {
            assert!(parity_of(round) < PARITIES);
            assert_ne!(parity_of(round), parity_of(round + 1));
            assert_eq!(parity_of(round), parity_of(round + 2));
        }
    }

    #[test]
    fn entries_are_indexed_by_parity_then_destination() {
        for nodes in [1, 2, 3, MAX_NODES as usize] {
            let size = (PARITIES * nodes * ENTRY_LEN) as u64;
            let mut seen = std::collections::HashSet::new();
            for parity in 0..PARITIES {
                let block = entry_offset(parity, 0, nodes);
                for destination in 0..nodes {
                    let at = entry_offset(parity, destination, nodes);
                    assert_eq!(at, block + (destination * ENTRY_LEN) as u64);
                    assert!(at + ENTRY_LEN as u64 <= size);
                    assert!(seen.insert(at), "{parity} {destination} of {nodes}");
                }
            }
        }
    }

    /// A directory's bytes after `stage` wrote the entries of `round` for
    /// `nodes` ranks, each carrying the round and its destination.
    fn stage_round(directory: &mut [u8], round: u64, nodes: usize) {
        let entries: Vec<Entry> = (0..nodes as u64)
            .map(|destination| Entry {
                round,
                generation: 1,
                offset: destination,
                length: 1,
            })
            .collect();
        let at = entry_offset(parity_of(round), 0, nodes) as usize;
        let bytes = encode_directory(&entries);
        directory[at..at + bytes.len()].copy_from_slice(&bytes);
    }

    /// The entry a reader `rank` reads in round `round`.
    fn read_entry(directory: &[u8], round: u64, rank: usize, nodes: usize) -> Entry {
        let at = entry_offset(parity_of(round), rank, nodes) as usize;
        let bytes: [u8; ENTRY_LEN] = directory[at..at + ENTRY_LEN].try_into().expect("entry");
        Entry::decode(&bytes)
    }

    #[test]
    fn a_round_leaves_the_other_parity_alone() {
        let nodes = 3;
        let mut directory = encode_directory(&vec![Entry::default(); PARITIES * nodes]);
        stage_round(&mut directory, 1, nodes);
        stage_round(&mut directory, 2, nodes);
        // Round 2 did not touch what round 1's readers may still read.
        for rank in 0..nodes {
            let first = read_entry(&directory, 1, rank, nodes);
            assert_eq!((first.round, first.offset), (1, rank as u64));
            assert!(check_entry(&first, 1).is_ok());
            let second = read_entry(&directory, 2, rank, nodes);
            assert_eq!((second.round, second.offset), (2, rank as u64));
            assert!(check_entry(&second, 2).is_ok());
        }
        // A writer that failed to stage round 3 left round 1's entries.
        let stale = read_entry(&directory, 3, 0, nodes);
        let err = check_entry(&stale, 3).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPROTO));
    }

    #[test]
    fn stale_or_unreadable_entries_are_eproto() {
        let good = Entry {
            round: 5,
            generation: 3,
            offset: 64,
            length: 10,
        };
        assert!(check_entry(&good, 5).is_ok());
        // Empty parts need no outbox.
        let empty = Entry {
            generation: 0,
            length: 0,
            ..good
        };
        assert!(check_entry(&empty, 5).is_ok());
        let unnamed = Entry {
            generation: 0,
            ..good
        };
        let unnameable = Entry {
            generation: MAX_GENERATION + 1,
            ..good
        };
        let bad = [
            (good, 3),
            (good, 6),
            (Entry::default(), 1),
            (unnamed, 5),
            (unnameable, 5),
        ];
        for (entry, round) in bad {
            let err = check_entry(&entry, round).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EPROTO), "{entry:?} {round}");
        }
    }

    #[test]
    fn parts_are_laid_out_aligned_without_the_own_one() {
        let (places, needed) = layout(&[10, 100, 0, 65], 1).expect("fits");
        assert_eq!(places, vec![(0, 10), (0, 0), (0, 0), (64, 65)]);
        assert_eq!(needed, 129);
        let (places, needed) = layout(&[5, 0], 0).expect("fits");
        assert_eq!((places, needed), (vec![(0, 0), (0, 0)], 0));
    }

    #[test]
    fn parts_beyond_the_largest_lmr_are_efbig() {
        for lengths in [[1, MAX_LMR_SIZE, 0], [0, u64::MAX, 1]] {
            let err = layout(&lengths, 2).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
        }
        assert!(layout(&[MAX_LMR_SIZE, 0], 1).is_ok());
    }

    #[test]
    fn outboxes_grow_rarely_in_whole_chunks() {
        assert_eq!(grown_capacity(0, 0), None);
        assert_eq!(grown_capacity(100, MIN_OUTBOX), None);
        assert_eq!(grown_capacity(1, 0), Some(MIN_OUTBOX));
        // At least doubles.
        assert_eq!(
            grown_capacity(MIN_OUTBOX + 1, MIN_OUTBOX),
            Some(2 * MIN_OUTBOX)
        );
        // Half again what is needed, rounded to chunks.
        let needed = 10 * CHUNK_SIZE + 1;
        assert_eq!(grown_capacity(needed, CHUNK_SIZE), Some(16 * CHUNK_SIZE));
        for (needed, current) in [(3, 0), (5 << 20, 4 << 20), (MAX_LMR_SIZE, 1 << 30)] {
            let grown = grown_capacity(needed, current).expect("grows");
            assert!(grown >= needed && grown <= MAX_LMR_SIZE);
            assert_eq!(grown % CHUNK_SIZE, 0);
        }
        assert_eq!(whole_chunks(1), CHUNK_SIZE);
        assert_eq!(whole_chunks(u64::MAX), MAX_LMR_SIZE);
    }

    #[test]
    fn names_are_distinct_per_tag_rank_parity_and_generation() {
        let mut names = std::collections::HashSet::new();
        for tag in [0, 1, 0x1234_5678, u32::MAX] {
            for rank in [0, 1, MAX_NODES as usize - 1] {
                for parity in 0..PARITIES {
                    for generation in [0, 1, 2, MAX_GENERATION] {
                        let name = lmr_name(tag, rank, parity, generation);
                        assert_eq!(name >> 56, NAME_PREFIX >> 56);
                        let fields = format!("{tag} {rank} {parity} {generation}");
                        assert!(names.insert(name), "{fields}");
                    }
                }
                // Outboxes start at generation 1, so no outbox of either
                // parity is named like the directory.
                assert_eq!(directory_name(tag, rank), lmr_name(tag, rank, 0, 0));
            }
        }
        // Each field sits in its own bits: tag, rank, parity, generation.
        assert_eq!(lmr_name(0, 0, 0, MAX_GENERATION), NAME_PREFIX | 0x1_ffff);
        assert_eq!(lmr_name(0, 0, 1, 0), NAME_PREFIX | 1 << 17);
        assert_eq!(lmr_name(0, 63, 0, 0), NAME_PREFIX | 0x3f << 18);
        assert_eq!(lmr_name(u32::MAX, 0, 0, 0), NAME_PREFIX | 0xffff_ffff << 24);
    }

    #[test]
    fn passwords_depend_on_the_tag_only() {
        assert_eq!(password_for(3), password_for(3));
        assert_ne!(password_for(3), password_for(4));
        assert_ne!(password_for(0), 0);
    }

    #[test]
    fn bad_ranks_are_einval_before_lite_is_called() {
        for (rank, nodes) in [(0, 0), (2, 2), (0, MAX_NODES as usize + 1)] {
            let err = LiteExchange::new(rank, nodes, 1).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{rank} of {nodes}");
        }
        assert!(check_ranks(63, 64).is_ok());
        assert_eq!(node_of(0).ok(), Some(1));
    }
}
