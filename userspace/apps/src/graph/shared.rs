//! LITE-Graph-DSM's input: rank 0 draws the graph and stores its edges in a
//! LITE-DSM region, which every rank maps and reads its part from, so the
//! workers share the graph through LITE-DSM as they share its values
//! (through [`crate::dsm_exchange`]).

use std::io;
use std::sync::atomic::Ordering;

use lite::dsm::{Mapping, Region};

use super::rmat::EdgeSource;
use crate::exchange::Exchange;
use crate::lite_exchange::password_for;

/// High byte of the region's name, apart from the exchange's region.
const NAME_PREFIX: u64 = 0xd6 << 56;

/// The node that keeps the region: rank 0's.
const HOME_NODE: u32 = 1;

/// The region starts with the number of vertices and of edges, one word
/// each; then come the edges, one word each (source in the low half).
const HEADER_WORDS: usize = 2;

/// Edges rank 0 stores per write.
const EDGES_PER_WRITE: usize = 8192;

/// A graph every rank reads from a LITE-DSM region.
#[derive(Debug)]
pub struct SharedGraph {
    vertices: u32,
    edges: usize,
    map: Mapping,
    _region: Region,
}

impl SharedGraph {
    /// Rank 0 stores `source`'s edges in the region of `tag`; every rank
    /// then maps it. Called by every rank of `exchange`.
    ///
    /// # Errors
    ///
    /// LITE's errors of creating or opening the region, the exchange's
    /// errors, `EPROTO` for a region that does not hold a graph.
    pub fn share(
        source: &impl EdgeSource,
        exchange: &mut dyn Exchange,
        tag: u32,
    ) -> io::Result<SharedGraph> {
        let name = NAME_PREFIX | u64::from(tag) << 8 | exchange.nodes() as u64;
        let password = password_for(tag).rotate_left(17);
        let stored = if exchange.rank() == 0 {
            Some(store(source, name, password)?)
        } else {
            None
        };
        // Rank 0 tells the region's size once the edges are in it.
        let size = stored
            .as_ref()
            .map_or(0, |(region, _)| region.size() as u64);
        let sizes = exchange.all_gather(&size.to_le_bytes())?;
        let size = sizes
            .first()
            .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EPROTO))?;
        let (region, map) = match stored {
            Some(stored) => stored,
            None => {
                let region = Region::open(HOME_NODE, name, size, password)?;
                let map = region.map()?;
                (region, map)
            }
        };
        let words = map.words();
        let protocol = || io::Error::from_raw_os_error(libc::EPROTO);
        let word = |index: usize| {
            words
                .get(index)
                .map(|word| word.load(Ordering::Relaxed))
                .ok_or_else(protocol)
        };
        let vertices = u32::try_from(word(0)?).map_err(|_| protocol())?;
        let edges = usize::try_from(word(1)?)
            .ok()
            .filter(|&edges| HEADER_WORDS + edges <= words.len())
            .ok_or_else(protocol)?;
        Ok(SharedGraph {
            vertices,
            edges,
            map,
            _region: region,
        })
    }
}

/// Creates region `name` holding `source`'s graph, mapped.
fn store(source: &impl EdgeSource, name: u64, password: u64) -> io::Result<(Region, Mapping)> {
    let edges = source.edges().count();
    let size = (HEADER_WORDS + edges) as u64 * 8;
    let region = Region::create(name, size, password)?;
    let map = region.map()?;
    let header = [u64::from(source.vertices()), edges as u64];
    let bytes: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
    map.write(0, &bytes)?;
    let mut at = HEADER_WORDS * 8;
    let mut batch = Vec::with_capacity(EDGES_PER_WRITE * 8);
    let mut edges = source.edges().peekable();
    while edges.peek().is_some() {
        batch.clear();
        for (s, t) in edges.by_ref().take(EDGES_PER_WRITE) {
            batch.extend_from_slice(&(u64::from(s) | u64::from(t) << 32).to_le_bytes());
        }
        map.write(at, &batch)?;
        at += batch.len();
    }
    Ok((region, map))
}

impl EdgeSource for SharedGraph {
    fn vertices(&self) -> u32 {
        self.vertices
    }

    fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        // PANIC: `share` checked that the edges lie within the mapping.
        self.map.words()[HEADER_WORDS..HEADER_WORDS + self.edges]
            .iter()
            .map(|word| {
                let word = word.load(Ordering::Relaxed);
                (word as u32, (word >> 32) as u32)
            })
    }
}
