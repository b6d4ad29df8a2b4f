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

    /// The value of `vertex` before the first superstep.
    fn initial(&self, vertex: u32) -> Self::Value;

    /// Gather: folds two messages to one vertex (commutative and
    /// associative, so ranks may combine in any order).
    fn combine(&self, a: Self::Message, b: Self::Message) -> Self::Message;

    /// A vertex's share of a sum over all vertices handed to every
    /// [`apply`](VertexProgram::apply) of the superstep (0 if unused).
    fn global_share(&self, _value: Self::Value, _out_degree: usize) -> f64 {
        0.0
    }

    /// Apply: the new value from the gathered messages (`None` if none
    /// arrived) and the superstep's global sum.
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
pub struct Partition {
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
pub struct LocalGraph {
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
        // Counting sort by source into CSR.
        let owned = partition.owned_by(rank);
        let mut offsets = vec![0usize; owned + 1];
        for &(s, _) in &kept {
            offsets[partition.local(s) + 1] += 1;
        }
        for i in 0..owned {
            offsets[i + 1] += offsets[i];
        }
        let mut next = offsets.clone();
        let mut targets = vec![0u32; kept.len()];
        for (s, t) in kept {
            let slot = &mut next[partition.local(s)];
            targets[*slot] = t;
            *slot += 1;
        }
        Ok(LocalGraph {
            partition,
            offsets,
            targets,
            total_edges,
        })
    }

    /// Number of vertices this rank owns.
    pub fn owned(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Out-edge targets of local vertex `index`.
    pub fn targets(&self, index: usize) -> &[u32] {
        &self.targets[self.offsets[index]..self.offsets[index + 1]]
    }
}

/// What a run of the engine produced on one rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<V> {
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
pub fn execute<P: VertexProgram>(
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
        let share: f64 = (0..owned)
            .map(|i| program.global_share(values[i], graph.targets(i).len()))
            .sum();
        let global = exchange.all_sum_f64(share)?;

        for i in 0..owned {
            let targets = graph.targets(i);
            let Some(message) = program.scatter(values[i], targets.len(), changed[i]) else {
                continue;
            };
            for &t in targets {
                let slot = &mut outbox[partition.owner(t)][partition.local(t)];
                *slot = Some(match *slot {
                    Some(m) => program.combine(m, message),
                    None => message,
                });
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
                gathered[i] = Some(match gathered[i] {
                    Some(m) => program.combine(m, message),
                    None => message,
                });
            })?;
        }
        let mut changes = 0u64;
        for i in 0..owned {
            let new = program.apply(values[i], gathered[i], global);
            changed[i] = new != values[i];
            changes += u64::from(changed[i]);
            values[i] = new;
        }
        supersteps += 1;
        // Unchanged values would give the same messages again.
        if exchange.all_sum_u64(changes)? == 0 {
            break;
        }
    }
    Ok(Outcome { values, supersteps })
}

/// Encodes (and empties) the messages to `rank`'s vertices, indexed by
/// their local index there, as records of vertex id (u32) and message.
pub fn encode_messages<M: Wire>(
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
pub fn decode_messages<M: Wire>(
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
pub fn encode_values<V: Wire>(values: &[V]) -> Vec<u8> {
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
pub fn decode_values<V: Wire>(bytes: &[u8], count: usize) -> io::Result<Vec<V>> {
    let malformed = || io::Error::from_raw_os_error(libc::EPROTO);
    if bytes.len() != count * V::SIZE {
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
pub fn gather_values<V: Wire>(
    exchange: &mut dyn Exchange,
    partition: &Partition,
    values: &[V],
) -> io::Result<Option<Vec<V>>> {
    let Some(parts) = exchange.gather(encode_values(values))? else {
        return Ok(None);
    };
    let mut all: Vec<Option<V>> = vec![None; partition.vertices as usize];
    for (rank, part) in parts.iter().enumerate() {
        let values = decode_values::<V>(part, partition.owned_by(rank))?;
        for (index, value) in values.into_iter().enumerate() {
            all[partition.global(rank, index) as usize] = Some(value);
        }
    }
    // Every vertex has exactly one owner, so every slot is filled.
    all.into_iter()
        .map(|v| v.ok_or_else(|| io::Error::from_raw_os_error(libc::EPROTO)))
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
        assert_eq!(directed.targets(0), &[1, 3, 1]); // vertex 0
        assert_eq!(directed.targets(1), &[0]); // vertex 2
        assert_eq!(directed.targets(2), &[] as &[u32]); // vertex 4
        let undirected = LocalGraph::build(&list, 1, 2, true).expect("builds");
        assert_eq!(undirected.targets(0), &[0, 2, 0]); // vertex 1
        assert_eq!(undirected.targets(1), &[0, 4]); // vertex 3
        let bad = EdgeList {
            vertices: 2,
            edges: vec![(0, 2)],
        };
        let err = LocalGraph::build(&bad, 0, 1, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }
}
