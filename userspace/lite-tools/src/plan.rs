//! Which nodes and sizes the cluster test exercises.
//!
//! Every node runs the same plan at the same time, relative to its own id,
//! so the test does not depend on which machine got which id. The plan is
//! bounded by a data budget because the nodes may be emulated machines
//! with debugging kernels, moving well under a megabyte per second.
//!
//! The ids of a cluster of N nodes must be exactly 1..=N: targets are
//! found by walking that ring ([`next_node`], [`others_in_ring_order`]).
//! The cluster manager hands ids out in join order and gives a node that
//! left, or rebooted, its id back (found by its port GID), so a cluster
//! that lost a node and got it back still has ids 1..=N, whichever machine
//! holds which.

use lite::sys::{CHUNK_SIZE, NODE_SPREAD};

/// LMR sizes every target is tested with: tiny, page, multi-page, and
/// around one and several chunks.
pub const DATA_SIZES: [u64; 8] = [
    1,
    7,
    4096,
    65536,
    CHUNK_SIZE - 1,
    CHUNK_SIZE,
    CHUNK_SIZE + 1,
    3 * CHUNK_SIZE + 5,
];

/// Most bytes one node moves (written plus read back) in whole-LMR checks.
/// With three or four nodes, this covers the spread LMR, the largest
/// multi-chunk LMR spread over the others, and LMRs just over one chunk.
pub const DATA_BUDGET_BYTES: u64 = 80 << 20;

/// Sizes at most this large are always tested, whatever the budget.
const SMALL_SIZE_LIMIT: u64 = 65536;

/// One whole-LMR check: allocate on `target`, write, read back, compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataCase {
    /// Node that holds the memory ([`NODE_SPREAD`] for spread).
    pub target: u32,
    /// LMR size in bytes.
    pub size: u64,
}

impl DataCase {
    /// Bytes this case moves: the whole LMR written once and read once.
    pub fn traffic(&self) -> u64 {
        2 * self.size
    }

    /// Whether the LMR spans more than one chunk, so that its chunk
    /// boundaries are worth probing.
    pub fn spans_chunks(&self) -> bool {
        self.size > CHUNK_SIZE
    }
}

/// What [`plan_data_cases`] chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlan {
    /// Cases to run, grouped by target in [`targets`] order, sizes ascending.
    pub run: Vec<DataCase>,
    /// Cases left out to stay within the budget.
    pub skipped: Vec<DataCase>,
    /// Size of the spread LMR that spans two chunks per other node (0 for
    /// a single-node cluster, where there is nothing to spread over).
    pub spread_size: u64,
}

/// The node after `me` in the ring 1..=nodes, i.e. `(me % nodes) + 1`;
/// `me` itself when it is the only node.
pub fn next_node(me: u32, nodes: u32) -> u32 {
    if nodes == 0 {
        return me;
    }
    (me % nodes) + 1
}

/// The node whose next node in the ring 1..=nodes is `me`.
pub fn previous_node(me: u32, nodes: u32) -> u32 {
    if nodes == 0 {
        return me;
    }
    (me + nodes - 2) % nodes + 1
}

/// The nodes 1..=nodes other than `me`, in ring order starting after `me`.
pub fn others_in_ring_order(me: u32, nodes: u32) -> Vec<u32> {
    let mut others = Vec::new();
    let mut node = next_node(me, nodes);
    for _ in 0..nodes {
        if node != me {
            others.push(node);
        }
        node = next_node(node, nodes);
    }
    others
}

/// The lowest node of 1..=nodes other than `node`: the failure test's
/// survivor A, the partition test's holder of LMR Y.
pub fn lowest_other(node: u32, nodes: u32) -> Option<u32> {
    (1..=nodes).find(|&n| n != node)
}

/// Targets in priority order: spread (when there is another node), the
/// next node, this node, then the remaining nodes in ring order.
pub fn targets(me: u32, nodes: u32) -> Vec<u32> {
    let others = others_in_ring_order(me, nodes);
    let mut targets = Vec::with_capacity(others.len() + 2);
    if !others.is_empty() {
        targets.push(NODE_SPREAD);
        targets.push(others[0]);
    }
    targets.push(me);
    targets.extend(others.iter().skip(1));
    targets
}

/// Chooses the whole-LMR checks for node `me` of `nodes`.
///
/// Small sizes run on every target. The spread LMR always runs. Larger
/// sizes are then added, largest first (multi-chunk LMRs find the most
/// bugs) and target by target in [`targets`] order, while they fit in
/// `budget` bytes of traffic.
pub fn plan_data_cases(me: u32, nodes: u32, budget: u64) -> DataPlan {
    let targets = targets(me, nodes);
    let spread_size = 2 * u64::from(nodes.saturating_sub(1)) * CHUNK_SIZE;
    let mut chosen: Vec<DataCase> = Vec::new();
    let mut skipped = Vec::new();
    let mut traffic = 2 * spread_size;
    for &size in DATA_SIZES.iter().filter(|&&s| s <= SMALL_SIZE_LIMIT) {
        for &target in &targets {
            let case = DataCase { target, size };
            traffic += case.traffic();
            chosen.push(case);
        }
    }
    for &size in DATA_SIZES.iter().rev().filter(|&&s| s > SMALL_SIZE_LIMIT) {
        for &target in &targets {
            let case = DataCase { target, size };
            if traffic + case.traffic() <= budget {
                traffic += case.traffic();
                chosen.push(case);
            } else {
                skipped.push(case);
            }
        }
    }
    let rank = |target: u32| targets.iter().position(|&t| t == target);
    chosen.sort_by_key(|case| (rank(case.target), case.size));
    skipped.sort_by_key(|case| (rank(case.target), case.size));
    DataPlan {
        run: chosen,
        skipped,
        spread_size,
    }
}

/// Small ranges around every chunk boundary of an LMR of `size` bytes, and
/// its last byte, as (offset, length): a range straddling the boundary
/// (three bytes either side) and the first byte of the next chunk.
pub fn boundary_ranges(size: u64) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    let mut boundary = CHUNK_SIZE;
    while boundary < size {
        ranges.push((boundary - 3, 6.min(size - (boundary - 3))));
        ranges.push((boundary, 1));
        boundary += CHUNK_SIZE;
    }
    if size > 0 && ranges.last() != Some(&(size - 1, 1)) {
        ranges.push((size - 1, 1));
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// The bytes a plan moves, its spread LMR's written and read back.
    fn traffic_of(plan: &DataPlan) -> u64 {
        plan.run.iter().map(DataCase::traffic).sum::<u64>() + 2 * plan.spread_size
    }

    #[test]
    fn ring_order_visits_every_other_node_once_and_orders_the_targets() {
        assert_eq!(next_node(1, 3), 2);
        assert_eq!(next_node(3, 3), 1);
        assert_eq!(next_node(1, 1), 1);
        for nodes in 1..=4 {
            for me in 1..=nodes {
                assert_eq!(next_node(previous_node(me, nodes), nodes), me);
            }
        }
        assert_eq!(others_in_ring_order(2, 4), vec![3, 4, 1]);
        assert_eq!(others_in_ring_order(4, 4), vec![1, 2, 3]);
        assert!(others_in_ring_order(1, 1).is_empty());
        assert_eq!(
            [(4, 4), (1, 3), (3, 3), (1, 1)].map(|(n, all)| lowest_other(n, all)),
            [Some(1), Some(2), Some(1), None]
        );
        // An id beyond --nodes still sees every node of 1..=nodes.
        assert_eq!(others_in_ring_order(5, 3), vec![3, 1, 2]);
        // Targets: spread, the next node, this node, then the others.
        assert_eq!(targets(2, 3), vec![NODE_SPREAD, 3, 2, 1]);
        assert_eq!(targets(1, 2), vec![NODE_SPREAD, 2, 1]);
        assert_eq!(targets(1, 1), vec![1]);
    }

    #[test]
    fn plans_run_every_small_size_and_every_node_within_the_budget_largest_first() {
        for nodes in 1..=8 {
            for me in 1..=nodes {
                let plan = plan_data_cases(me, nodes, DATA_BUDGET_BYTES);
                let targets = targets(me, nodes);
                for &target in &targets {
                    for &size in DATA_SIZES.iter().filter(|&&s| s <= SMALL_SIZE_LIMIT) {
                        assert!(plan.run.contains(&DataCase { target, size }));
                    }
                }
                let small_cases = plan.run.iter().filter(|c| c.size <= SMALL_SIZE_LIMIT);
                let small: u64 = small_cases.map(DataCase::traffic).sum();
                let traffic = traffic_of(&plan);
                assert_eq!(plan.spread_size, 2 * u64::from(nodes - 1) * CHUNK_SIZE);
                // The spread LMR and the small sizes always run; the rest
                // only within the budget.
                let fixed = 2 * plan.spread_size + small;
                let within = traffic <= DATA_BUDGET_BYTES.max(fixed);
                assert!(within, "{nodes} nodes: {traffic}");
                let largest_case = DataCase {
                    target: targets[0],
                    size: 3 * CHUNK_SIZE + 5,
                };
                let fits = fixed + largest_case.traffic() <= DATA_BUDGET_BYTES;
                assert_eq!(plan.run.contains(&largest_case), fits, "{nodes} nodes");
                if nodes == 4 {
                    // The failure test runs the cluster test on four nodes:
                    // each node's plan fits whole, the largest LMR included.
                    assert_eq!(plan.spread_size, 24 * MIB);
                    assert!(traffic <= DATA_BUDGET_BYTES && fits, "node {me}: {traffic}");
                }
                let cases = plan.run.len() + plan.skipped.len();
                assert_eq!(cases, DATA_SIZES.len() * targets.len());
            }
        }
    }

    #[test]
    fn two_node_plan_is_as_expected() {
        let plan = plan_data_cases(1, 2, DATA_BUDGET_BYTES);
        // 16 MiB spread + 2 x 24 + 8 (and the small sizes): 72 MiB of 80.
        let skipped: Vec<(u32, u64)> = plan.skipped.iter().map(|c| (c.target, c.size)).collect();
        let (c, large) = (CHUNK_SIZE, 3 * CHUNK_SIZE + 5);
        assert_eq!(
            skipped,
            vec![
                (NODE_SPREAD, c - 1),
                (NODE_SPREAD, c),
                (2, c - 1),
                (2, c),
                (2, c + 1),
                (1, c - 1),
                (1, c),
                (1, c + 1),
                (1, large),
            ]
        );
        assert_eq!(plan.run.first(), Some(&DataCase { target: 0, size: 1 }));
        let on_spread = plan.run.iter().filter(|c| c.target == NODE_SPREAD);
        let sizes_on_spread: Vec<u64> = on_spread.map(|c| c.size).collect();
        assert_eq!(sizes_on_spread, vec![1, 7, 4096, 65536, c + 1, large]);
        assert!(plan.run.iter().map(DataCase::traffic).sum::<u64>() <= 80 * MIB);
    }

    #[test]
    fn boundary_ranges_straddle_each_chunk_edge() {
        assert_eq!(boundary_ranges(4096), vec![(4095, 1)]);
        assert_eq!(boundary_ranges(CHUNK_SIZE), vec![(CHUNK_SIZE - 1, 1)]);
        let past_one = vec![(CHUNK_SIZE - 3, 4), (CHUNK_SIZE, 1)];
        assert_eq!(boundary_ranges(CHUNK_SIZE + 1), past_one);
        let size = 3 * CHUNK_SIZE + 5;
        let ranges = boundary_ranges(size);
        assert_eq!(ranges.len(), 7);
        assert_eq!(ranges[0], (CHUNK_SIZE - 3, 6));
        assert_eq!(ranges[4], (3 * CHUNK_SIZE - 3, 6));
        assert_eq!(ranges[6], (size - 1, 1));
        assert!(ranges.iter().all(|&(offset, len)| offset + len <= size));
        assert!(boundary_ranges(0).is_empty());
    }
}
