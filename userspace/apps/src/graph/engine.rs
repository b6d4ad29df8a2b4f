//! The gather-apply-scatter engine: vertices partitioned over the ranks,
//! supersteps of one all-to-all exchange each.

use std::io;

use super::rmat::EdgeSource;
use crate::exchange::Exchange;

/// A value with a fixed-size little-endian encoding, for messages and
/// vertex values on the wire.
pub trait Wire: Copy + PartialEq + Send {
    /// Encoded size in bytes.
    const SIZE: usize;

    /// Appends the encoding to `out`.
    fn put(self, out: &mut Vec<u8>);

    /// Decodes exactly `SIZE` bytes.
    fn get(bytes: &[u8]) -> Option<Self>;
}

impl Wire for u32 {
    const SIZE: usize = 4;

    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }

    fn get(bytes: &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }
}

impl Wire for f64 {
    const SIZE: usize = 8;

    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }

    fn get(bytes: &[u8]) -> Option<f64> {
        Some(f64::from_le_bytes(bytes.try_into().ok()?))
    }
}

/// A vertex program in PowerGraph's gather-apply-scatter (GAS) form.
///
/// In each superstep every active vertex scatters a message along its
/// out-edges; each vertex gathers the messages on its in-edges with
/// [`combine`](VertexProgram::combine) and applies the result to its value.
/// The engine stops after a superstep in which no value changed anywhere,
/// or after the most supersteps it was given.
pub trait VertexProgram: Sync {
    /// A vertex's value.
    type Value: Wire;
    /// What travels along an edge; also the gather accumulator.
    type Message: Wire;

    /// Whether every edge carries messages both ways.
    const UNDIRECTED: bool;

    /// Whether [`apply`](VertexProgram::apply) uses the superstep's global
    /// sum: it costs a collective every superstep, which the engine skips
    /// for a program without one.
    const USES_GLOBAL_SUM: bool;

    /// The value of `vertex` before the first superstep.
    fn initial(&self, vertex: u32) -> Self::Value;

    /// Gather: folds two messages to one vertex (commutative and
    /// associative, so ranks may combine in any order).
    fn combine(&self, a: Self::Message, b: Self::Message) -> Self::Message;

    /// A vertex's share of a sum over all vertices handed to every
    /// [`apply`](VertexProgram::apply) of the superstep; only called if
    /// [`USES_GLOBAL_SUM`](VertexProgram::USES_GLOBAL_SUM).
    fn global_share(&self, _value: Self::Value, _out_degree: usize) -> f64 {
        0.0
    }

    /// Apply: the new value from the gathered messages (`None` if none
    /// arrived) and the superstep's global sum (0 without
    /// [`USES_GLOBAL_SUM`](VertexProgram::USES_GLOBAL_SUM)).
    fn apply(
        &self,
        value: Self::Value,
        gathered: Option<Self::Message>,
        global: f64,
    ) -> Self::Value;

    /// Scatter: the message sent along every out-edge, or `None` if the
    /// vertex is inactive. `changed` says whether the last apply changed
    /// the value (true before the first superstep).
    fn scatter(
        &self,
        value: Self::Value,
        out_degree: usize,
        changed: bool,
    ) -> Option<Self::Message>;
}

/// Which rank owns which vertex: vertex `v` belongs to rank `v % nodes`,
/// where it has the local index `v / nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Partition {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub nodes: usize,
    /// Number of vertices in the whole graph.
    pub vertices: u32,
}

impl Partition {
    /// The rank owning `vertex`.
    pub fn owner(&self, vertex: u32) -> usize {
        vertex as usize % self.nodes
    }

    /// `vertex`'s index among its owner's vertices.
    pub fn local(&self, vertex: u32) -> usize {
        vertex as usize / self.nodes
    }

    /// The vertex with local index `index` on `rank`.
    pub fn global(&self, rank: usize, index: usize) -> u32 {
        // Below `vertices`, a u32, for every index below `owned_by(rank)`.
        (index * self.nodes + rank) as u32
    }

    /// How many vertices `rank` owns.
    pub fn owned_by(&self, rank: usize) -> usize {
        (self.vertices as usize + self.nodes - 1 - rank) / self.nodes
    }
}

/// This rank's part of the graph: the out-edges of the vertices it owns,
/// in compressed sparse row form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalGraph {
    /// Who owns what.
    pub partition: Partition,
    /// Out-edges of local vertex `i` are `targets[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    targets: Vec<u32>,
    /// Edges in the whole graph (each once, even if undirected).
    pub total_edges: u64,
}

impl LocalGraph {
    /// Keeps, from `source`'s edge stream, the out-edges of this rank's
    /// vertices (with `undirected`, each edge also counts reversed).
    ///
    /// # Errors
    ///
    /// `EINVAL` if an edge names a vertex out of range or there are no
    /// ranks.
    pub fn build(
        source: &impl EdgeSource,
        rank: usize,
        nodes: usize,
        undirected: bool,
    ) -> io::Result<LocalGraph> {
        let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
        if rank >= nodes {
            return Err(invalid());
        }
        let partition = Partition {
            rank,
            nodes,
            vertices: source.vertices(),
        };
        let mut kept: Vec<(u32, u32)> = Vec::new();
        let mut total_edges = 0u64;
        for (s, t) in source.edges() {
            if s >= partition.vertices || t >= partition.vertices {
                return Err(invalid());
            }
            total_edges += 1;
            if partition.owner(s) == rank {
                kept.push((s, t));
            }
            if undirected && partition.owner(t) == rank {
                kept.push((t, s));
            }
        }
        // CSR: the edges sorted by source, stably so that each vertex keeps
        // its edges' order; local vertex `i`'s edges start after those of
        // the vertices before it.
        kept.sort_by_key(|&(s, _)| s);
        let offsets = (0..=partition.owned_by(rank))
            .map(|i| kept.partition_point(|&(s, _)| partition.local(s) < i))
            .collect();
        let targets = kept.into_iter().map(|(_, t)| t).collect();
        Ok(LocalGraph {
            partition,
            offsets,
            targets,
            total_edges,
        })
    }

    /// Number of vertices this rank owns.
    pub fn owned(&self) -> usize {
        // `offsets` has one entry more than there are vertices.
        self.offsets.len().saturating_sub(1)
    }

    /// The out-edge targets of each of this rank's vertices, by local
    /// index.
    pub fn adjacency(&self) -> impl Iterator<Item = &[u32]> + '_ {
        self.offsets.windows(2).map(|bounds| {
            // PANIC: windows of 2 have 2 bounds; `build` made them
            // non-decreasing and at most `targets.len()`.
            &self.targets[bounds[0]..bounds[1]]
        })
    }
}

/// What a run of the engine produced on one rank.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome<V> {
    /// Values of this rank's vertices, by local index.
    pub values: Vec<V>,
    /// Supersteps run.
    pub supersteps: u32,
}

/// Runs `program` on `graph` for at most `max_supersteps` supersteps.
///
/// # Errors
///
/// The exchange's error; `EPROTO` if a rank sent a malformed part.
pub(crate) fn execute<P: VertexProgram>(
    exchange: &mut dyn Exchange,
    graph: &LocalGraph,
    program: &P,
    max_supersteps: u32,
) -> io::Result<Outcome<P::Value>> {
    let partition = graph.partition;
    let owned = graph.owned();
    let mut values: Vec<P::Value> = (0..owned)
        .map(|i| program.initial(partition.global(partition.rank, i)))
        .collect();
    let mut changed = vec![true; owned];
    // Messages combined per destination vertex, one array per owner rank,
    // emptied again as they are encoded.
    let mut outbox: Vec<Vec<Option<P::Message>>> = (0..partition.nodes)
        .map(|r| vec![None; partition.owned_by(r)])
        .collect();
    let mut supersteps = 0;
    while supersteps < max_supersteps {
        let global = if P::USES_GLOBAL_SUM {
            let share = values
                .iter()
                .zip(graph.adjacency())
                .map(|(&value, targets)| program.global_share(value, targets.len()))
                .sum();
            exchange.all_sum_f64(share)?
        } else {
            0.0
        };

        for ((&value, &changed), targets) in values.iter().zip(&changed).zip(graph.adjacency()) {
            let Some(message) = program.scatter(value, targets.len(), changed) else {
                continue;
            };
            for &t in targets {
                // PANIC: `build` checked `t < vertices`, so its owner is a
                // rank, and its local index is below the number of vertices
                // that rank owns, the length of its outbox.
                let slot = &mut outbox[partition.owner(t)][partition.local(t)];
                combine_into(program, slot, message);
            }
        }
        let outgoing = outbox
            .iter_mut()
            .enumerate()
            .map(|(rank, messages)| encode_messages(&partition, rank, messages))
            .collect();
        let incoming = exchange.all_to_all(outgoing)?;

        let mut gathered: Vec<Option<P::Message>> = vec![None; owned];
        for part in &incoming {
            decode_messages::<P::Message>(&partition, part, |i, message| {
                // PANIC: `decode_messages` only delivers this rank's
                // vertices, whose local indices are below `owned`.
                combine_into(program, &mut gathered[i], message);
            })?;
        }
        let mut changes = 0u64;
        for ((value, changed), gathered) in values.iter_mut().zip(&mut changed).zip(gathered) {
            let new = program.apply(*value, gathered, global);
            *changed = new != *value;
            changes += u64::from(*changed);
            *value = new;
        }
        supersteps += 1;
        // Unchanged values would give the same messages again.
        if exchange.all_sum_u64(changes)? == 0 {
            break;
        }
    }
    Ok(Outcome { values, supersteps })
}

/// Folds `message` into `slot` with the program's combine; an empty slot
/// takes it as it is.
fn combine_into<P: VertexProgram>(program: &P, slot: &mut Option<P::Message>, message: P::Message) {
    *slot = Some(match *slot {
        Some(m) => program.combine(m, message),
        None => message,
    });
}

/// Encodes (and empties) the messages to `rank`'s vertices, indexed by
/// their local index there, as records of vertex id (u32) and message.
pub(crate) fn encode_messages<M: Wire>(
    partition: &Partition,
    rank: usize,
    messages: &mut [Option<M>],
) -> Vec<u8> {
    let mut out = Vec::new();
    for (index, slot) in messages.iter_mut().enumerate() {
        if let Some(message) = slot.take() {
            partition.global(rank, index).put(&mut out);
            message.put(&mut out);
        }
    }
    out
}

/// Decodes a part sent to this rank, handing each message to `deliver`
/// with its vertex's local index.
///
/// # Errors
///
/// `EPROTO` if the part is truncated or names a vertex this rank does not
/// own.
pub(crate) fn decode_messages<M: Wire>(
    partition: &Partition,
    part: &[u8],
    mut deliver: impl FnMut(usize, M),
) -> io::Result<()> {
    let malformed = || io::Error::from_raw_os_error(libc::EPROTO);
    let records = part.chunks_exact(u32::SIZE + M::SIZE);
    if !records.remainder().is_empty() {
        return Err(malformed());
    }
    for record in records {
        // PANIC: every record is `u32::SIZE + M::SIZE` bytes long.
        let (id, message) = record.split_at(u32::SIZE);
        let vertex = u32::get(id).ok_or_else(malformed)?;
        let message = M::get(message).ok_or_else(malformed)?;
        if vertex >= partition.vertices || partition.owner(vertex) != partition.rank {
            return Err(malformed());
        }
        deliver(partition.local(vertex), message);
    }
    Ok(())
}

/// Encodes vertex values in order.
pub(crate) fn encode_values<V: Wire>(values: &[V]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * V::SIZE);
    for &value in values {
        value.put(&mut out);
    }
    out
}

/// Decodes `count` vertex values.
///
/// # Errors
///
/// `EPROTO` unless `bytes` holds exactly `count` values.
pub(crate) fn decode_values<V: Wire>(bytes: &[u8], count: usize) -> io::Result<Vec<V>> {
    let malformed = || io::Error::from_raw_os_error(libc::EPROTO);
    if count.checked_mul(V::SIZE) != Some(bytes.len()) {
        return Err(malformed());
    }
    bytes
        .chunks_exact(V::SIZE)
        .map(|b| V::get(b).ok_or_else(malformed))
        .collect()
}

/// Rank 0 collects every rank's vertex values into one array by vertex id;
/// the other ranks get `None`.
///
/// # Errors
///
/// The exchange's error; `EPROTO` if a rank sent the wrong number of
/// values.
pub(crate) fn gather_values<V: Wire>(
    exchange: &mut dyn Exchange,
    partition: &Partition,
    values: &[V],
) -> io::Result<Option<Vec<V>>> {
    let Some(parts) = exchange.gather(encode_values(values))? else {
        return Ok(None);
    };
    let malformed = || io::Error::from_raw_os_error(libc::EPROTO);
    if parts.len() != partition.nodes {
        return Err(malformed());
    }
    let mut by_rank = parts
        .iter()
        .enumerate()
        .map(|(rank, part)| decode_values::<V>(part, partition.owned_by(rank)))
        .collect::<io::Result<Vec<_>>>()?
        .into_iter()
        .map(Vec::into_iter)
        .collect::<Vec<_>>();
    // Each rank's values come in vertex order, so every vertex's is the
    // next one of its owner's.
    (0..partition.vertices)
        .map(|v| {
            by_rank
                .get_mut(partition.owner(v))
                .and_then(Iterator::next)
                .ok_or_else(malformed)
        })
        .collect::<io::Result<Vec<V>>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::rmat::EdgeList;

    #[test]
    fn ownership_covers_every_vertex_once() {
        for nodes in 1..=4 {
            let mut seen = vec![0; 11];
            for rank in 0..nodes {
                let p = Partition {
                    rank,
                    nodes,
                    vertices: 11,
                };
                for i in 0..p.owned_by(rank) {
                    let v = p.global(rank, i);
                    assert_eq!((p.owner(v), p.local(v)), (rank, i));
                    seen[v as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{nodes} ranks: {seen:?}");
        }
    }

    #[test]
    fn messages_round_trip() {
        let sender = Partition {
            rank: 0,
            nodes: 3,
            vertices: 10,
        };
        let mut messages = vec![Some(0.5f64), None, Some(-2.0)];
        let part = encode_messages(&sender, 1, &mut messages);
        assert_eq!(part.len(), 2 * 12);
        assert_eq!(messages, vec![None, None, None]);
        let receiver = Partition { rank: 1, ..sender };
        let mut got = Vec::new();
        decode_messages::<f64>(&receiver, &part, |i, m| got.push((i, m))).expect("decodes");
        assert_eq!(got, vec![(0, 0.5), (2, -2.0)]);

        let not_mine = Partition { rank: 2, ..sender };
        let err = decode_messages::<f64>(&not_mine, &part, |_, _| {}).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPROTO));
        let err = decode_messages::<f64>(&receiver, &part[..13], |_, _| {}).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPROTO));
    }

    #[test]
    fn values_round_trip() {
        let values = [3u32, 0, u32::MAX];
        let bytes = encode_values(&values);
        assert_eq!(decode_values::<u32>(&bytes, 3).expect("decodes"), values);
        let err = decode_values::<u32>(&bytes, 2).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPROTO));
    }

    #[test]
    fn the_local_graph_keeps_the_owned_out_edges() {
        let list = EdgeList {
            vertices: 5,
            edges: vec![(0, 1), (1, 2), (2, 0), (0, 3), (3, 4), (0, 1)],
        };
        let directed = LocalGraph::build(&list, 0, 2, false).expect("builds");
        assert_eq!((directed.owned(), directed.total_edges), (3, 6));
        // Vertices 0, 2 and 4.
        let targets: Vec<&[u32]> = directed.adjacency().collect();
        assert_eq!(targets, [&[1, 3, 1][..], &[0], &[]]);
        let undirected = LocalGraph::build(&list, 1, 2, true).expect("builds");
        // Vertices 1 and 3.
        let targets: Vec<&[u32]> = undirected.adjacency().collect();
        assert_eq!(targets, [&[0, 2, 0][..], &[0, 4]]);
        let bad = EdgeList {
            vertices: 2,
            edges: vec![(0, 2)],
        };
        let err = LocalGraph::build(&bad, 0, 1, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }
}
