//! [`Exchange`] over LITE memory.
//!
//! # Protocol
//!
//! Every rank owns two LMRs on its own node, both published for READ
//! under names derived from the application's tag and the rank:
//!
//! - a *directory*, fixed for the lifetime of the exchange: one
//!   [`Entry`] per destination rank, telling (round, outbox generation,
//!   offset, length) of the part for that rank;
//! - an *outbox*, holding this round's outgoing parts back to back. It is
//!   replaced by a bigger one, under a new generation's name, when the
//!   parts outgrow it; the directory stays where it is, so readers learn
//!   of the change from the generation in their entry and map the new
//!   outbox then.
//!
//! One all-to-all round:
//!
//! 1. each rank writes its parts into its outbox and then its directory;
//! 2. barrier: every outbox and directory of this round is complete;
//! 3. each rank RDMA-reads its entry in every peer's directory, then its
//!    part from that peer's outbox (all peers at once, one thread each);
//! 4. barrier: nobody reads any more, so outboxes and directories may be
//!    rewritten by the next round.
//!
//! Pull rather than push: the reader knows when it is ready and where its
//! data should go, and a writer never needs room in somebody else's
//! memory, so no rank has to size or grant receive buffers for the
//! others. A part is copied once into the owner's outbox (a local copy)
//! and crosses the network once, in a single read. The round number in
//! each entry catches ranks that got out of step (or one whose writing
//! failed: it then leaves its old entries, and its peers fail with
//! `EPROTO` instead of reading stale data or waiting forever).

use std::io;
use std::thread;

use lite::sys::{CHUNK_SIZE, MAX_LMR_SIZE, MAX_NODES, PERM_READ};
use lite::{Lmr, Priority};

use crate::exchange::{check_parts, Exchange};

/// High byte of every name this module publishes, so that they do not
/// clash with names other programs publish on the same node.
const NAME_PREFIX: u64 = 0xe7 << 56;

/// Bits of a name holding the generation (0 is the directory).
const GENERATION_BITS: u32 = 18;

/// Bits of a name holding the rank: enough for [`MAX_NODES`] ranks.
const RANK_BITS: u32 = 6;

// Every rank fits its bits, and the fields fill the name exactly.
const _: () = assert!(MAX_NODES as u64 <= 1 << RANK_BITS);
const _: () = assert!(8 + 32 + RANK_BITS + GENERATION_BITS == 64);

/// Highest outbox generation a name can hold.
const MAX_GENERATION: u64 = (1 << GENERATION_BITS) - 1;

/// Size of one encoded directory [`Entry`].
const ENTRY_LEN: usize = 32;

/// Parts start at multiples of this in an outbox (cache-line aligned).
const PART_ALIGN: u64 = 64;

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

/// A whole directory, as written into its LMR: the entries in rank order.
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

/// The name rank `rank`'s LMR of `generation` (0 for its directory) is
/// published under, for the application tagged `tag`.
fn lmr_name(tag: u32, rank: usize, generation: u64) -> u64 {
    let rank = (rank as u64) & ((1 << RANK_BITS) - 1);
    NAME_PREFIX
        | (u64::from(tag) << (GENERATION_BITS + RANK_BITS))
        | (rank << GENERATION_BITS)
        | (generation & MAX_GENERATION)
}

/// The password of every LMR of the application tagged `tag`: the same on
/// every rank, different per tag (a SplitMix64 step, to spread the bits).
fn password_for(tag: u32) -> u64 {
    let mut x = u64::from(tag) ^ 0x4c49_5445_2d58_4348;
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `EINVAL` unless `rank` is one of `nodes` ranks LITE can hold.
fn check_ranks(rank: usize, nodes: usize) -> io::Result<()> {
    if nodes == 0 || rank >= nodes || nodes > MAX_NODES as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(())
}

/// The LITE node id of `rank`.
fn node_of(rank: usize) -> io::Result<u32> {
    u32::try_from(rank + 1).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// This rank's outbox.
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
    /// The peer's outbox as last mapped, with its generation.
    outbox: Option<Outbox>,
}

/// The ranks of an application exchanging data through LMRs on their own
/// nodes (see the module documentation for the protocol).
///
/// Dropping it unmaps the peers' LMRs and frees this rank's own, which
/// also withdraws their names.
#[derive(Debug)]
pub struct LiteExchange {
    // Mappings go before the LMRs they may point at (fields drop in
    // order): peers' views first, then this rank's own LMRs.
    /// Views of every rank, indexed by rank; `None` for this one.
    peers: Vec<Option<PeerView>>,
    outbox: Option<Outbox>,
    directory: Lmr,
    rank: usize,
    tag: u32,
    password: u64,
    /// All-to-all rounds started so far.
    round: u64,
    /// Last outbox generation allocated (names are never reused).
    generation: u64,
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
        let entries = vec![Entry::default(); nodes];
        let empty = encode_directory(&entries);
        let directory = Lmr::alloc(own_node, empty.len() as u64, 0, password)?;
        // Round 0 everywhere: nothing has been sent yet.
        directory.write(0, &empty, Priority::None)?;
        directory.publish(lmr_name(tag, rank, 0), PERM_READ)?;
        lite::dist_barrier(nodes as u32)?;
        let mut peers = Vec::with_capacity(nodes);
        for peer in 0..nodes {
            peers.push(if peer == rank {
                None
            } else {
                let node = node_of(peer)?;
                let name = lmr_name(tag, peer, 0);
                Some(PeerView {
                    rank: peer,
                    node,
                    directory: Lmr::ask(node, name, PERM_READ, password)?,
                    outbox: None,
                })
            });
        }
        Ok(LiteExchange {
            peers,
            outbox: None,
            directory,
            rank,
            tag,
            password,
            round: 0,
            generation: 0,
        })
    }

    /// Steps 1 of a round: this round's parts into the outbox, then their
    /// places into the directory.
    fn stage(&mut self, outgoing: &[Vec<u8>]) -> io::Result<()> {
        let lengths: Vec<u64> = outgoing.iter().map(|part| part.len() as u64).collect();
        let (places, needed) = layout(&lengths, self.rank)?;
        let capacity = self.outbox.as_ref().map_or(0, |outbox| outbox.lmr.size());
        if let Some(wanted) = grown_capacity(needed, capacity) {
            self.replace_outbox(wanted, whole_chunks(needed))?;
        }
        let generation = self.outbox.as_ref().map_or(0, |outbox| outbox.generation);
        if let Some(outbox) = &self.outbox {
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
        self.directory
            .write(0, &encode_directory(&entries), Priority::None)
    }

    /// Frees the outbox and allocates a `wanted`-byte one under the next
    /// generation, or a `minimum`-byte one if this user's quota or the
    /// node's memory cannot hold `wanted` bytes.
    fn replace_outbox(&mut self, wanted: u64, minimum: u64) -> io::Result<()> {
        // The old one first: nobody reads it since the last round's second
        // barrier, and keeping both could exceed the quota.
        if let Some(old) = self.outbox.take() {
            old.lmr.free()?;
        }
        let generation = self.generation + 1;
        if generation > MAX_GENERATION {
            return Err(io::Error::from_raw_os_error(libc::EOVERFLOW));
        }
        self.generation = generation;
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
        lmr.publish(lmr_name(self.tag, self.rank, generation), PERM_READ)?;
        self.outbox = Some(Outbox { lmr, generation });
        Ok(())
    }

    /// Step 3 of a round: this rank's part from every peer, indexed by
    /// rank (empty for this rank).
    fn collect(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let (rank, round, tag, password) = (self.rank, self.round, self.tag, self.password);
        let fetch = move |peer: &mut PeerView| fetch_part(peer, rank, round, tag, password);
        let mut incoming: Vec<Vec<u8>> = vec![Vec::new(); self.peers.len()];
        let mut views: Vec<&mut PeerView> = self.peers.iter_mut().flatten().collect();
        if let [only] = views.as_mut_slice() {
            // Two ranks: no thread needed to overlap reads.
            incoming[only.rank] = fetch(only)?;
            return Ok(incoming);
        }
        thread::scope(|scope| {
            let mut readers = Vec::with_capacity(views.len());
            for view in views {
                let peer = view.rank;
                let reader = thread::Builder::new()
                    .name("lite-fetch".into())
                    .spawn_scoped(scope, move || fetch(view))?;
                readers.push((peer, reader));
            }
            let mut first_error = None;
            for (peer, reader) in readers {
                match reader.join() {
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

/// Reads rank `rank`'s part of round `round` from `peer`: its directory
/// entry, then (mapping a new outbox generation if needed) the part.
fn fetch_part(
    peer: &mut PeerView,
    rank: usize,
    round: u64,
    tag: u32,
    password: u64,
) -> io::Result<Vec<u8>> {
    let mut bytes = [0u8; ENTRY_LEN];
    let at = (rank * ENTRY_LEN) as u64;
    peer.directory.read(at, &mut bytes, Priority::None)?;
    let entry = Entry::decode(&bytes);
    if entry.round != round {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    if entry.length == 0 {
        return Ok(Vec::new());
    }
    let current = peer.outbox.as_ref().map(|outbox| outbox.generation);
    if current != Some(entry.generation) {
        // The old mapping is revoked once its owner freed it; drop it.
        peer.outbox = None;
        let name = lmr_name(tag, peer.rank, entry.generation);
        let lmr = Lmr::ask(peer.node, name, PERM_READ, password)?;
        peer.outbox = Some(Outbox {
            lmr,
            generation: entry.generation,
        });
    }
    let length =
        usize::try_from(entry.length).map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))?;
    let mut part = vec![0u8; length];
    if let Some(outbox) = &peer.outbox {
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
    /// parts (it failed, or ranks got out of step); LITE's error
    /// otherwise.
    fn all_to_all(&mut self, mut outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, self.nodes())?;
        self.round += 1;
        // A rank that fails to stage still takes part in both barriers, so
        // that its peers fail (on the stale round) rather than wait.
        let staged = self.stage(&outgoing);
        self.barrier()?;
        let collected = match staged {
            Ok(()) => self.collect(),
            Err(e) => Err(e),
        };
        self.barrier()?;
        let mut incoming = collected?;
        incoming[self.rank] = std::mem::take(&mut outgoing[self.rank]);
        Ok(incoming)
    }

    fn barrier(&mut self) -> io::Result<()> {
        lite::dist_barrier(self.peers.len() as u32)
    }

    fn transport(&self) -> &'static str {
        "lite"
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
    fn names_are_distinct_per_tag_rank_and_generation() {
        let mut names = std::collections::HashSet::new();
        for tag in [0, 1, 0x1234_5678, u32::MAX] {
            for rank in [0, 1, MAX_NODES as usize - 1] {
                for generation in [0, 1, 2, MAX_GENERATION] {
                    let name = lmr_name(tag, rank, generation);
                    assert_eq!(name >> 56, NAME_PREFIX >> 56);
                    assert!(names.insert(name), "{tag} {rank} {generation}");
                }
            }
        }
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
