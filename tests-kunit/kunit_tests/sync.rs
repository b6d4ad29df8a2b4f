// SPDX-License-Identifier: GPL-2.0

//! Barrier rounds and the moves of shared-memory mappings.

use super::Check;
use crate::internal::barrier::rounds::{nodes_reached, BarrierRounds};
use crate::internal::node_id::NodeId;
use kernel::alloc::flags::GFP_KERNEL;
use kernel::alloc::KBox;
use kernel::bindings;
use kernel::init::InPlaceInit;

kunit_case!(lite_test_barrier_counting, |c| {
    let seen = [0u64, 3, 2, 3, 0];
    check!(c, nodes_reached(&seen, 1) == 3);
    check!(c, nodes_reached(&seen, 3) == 2);
    check!(c, nodes_reached(&seen, 4) == 0);
    check!(c, nodes_reached(&seen, 0) == 5);
    // A node entering a round asks for an answer only from the peers it
    // has not yet heard of in that round.
    let Ok(rounds) = KBox::pin_init(BarrierRounds::new(), GFP_KERNEL) else {
        check!(c, false);
        return;
    };
    let entered = rounds.enter(NodeId::new(1));
    check!(c, rounds.has_reached(NodeId::new(1), entered.round));
    check!(c, !rounds.has_reached(NodeId::new(2), entered.round));
    rounds.joined(NodeId::new(2));
    rounds.arrived(NodeId::new(2), entered.round);
    check!(c, rounds.has_reached(NodeId::new(2), entered.round));
    check!(c, !rounds.has_reached(NodeId::new(2), entered.round + 1));
    check!(c, !rounds.has_reached(NodeId::new(u32::MAX), 1));
});

kunit_case!(lite_test_mapping_moves, |c| {
    use crate::internal::sharing::Mappings;
    let mut mappings = Mappings::new();
    let before = mappings.moves();
    check!(c, !mappings.moved_since(NodeId::new(2), 7, before));
    // A mapping whose chunk table was read before a move is refused; other
    // LMRs are not affected.
    mappings.note_move(NodeId::new(2), 7);
    check!(c, mappings.moved_since(NodeId::new(2), 7, before));
    check!(c, !mappings.moved_since(NodeId::new(2), 8, before));
    check!(c, !mappings.moved_since(NodeId::new(3), 7, before));
    // One read after the move is fine.
    let after = mappings.moves();
    check!(c, !mappings.moved_since(NodeId::new(2), 7, after));
    // Too many moves to remember: every mapping begun before is refused.
    for lmr_id in 100..400u64 {
        mappings.note_move(NodeId::new(3), lmr_id);
    }
    check!(c, mappings.moved_since(NodeId::new(2), 8, after));
    let now = mappings.moves();
    mappings.note_move(NodeId::new(3), 1);
    check!(c, !mappings.moved_since(NodeId::new(2), 8, now));
    check!(c, mappings.moved_since(NodeId::new(3), 1, now));
});

kunit_case!(lite_test_barrier_reuse, |c| {
    // Three nodes run 100 barrier rounds; each only learns the others'
    // latest round, possibly late or repeated: a node may leave round r
    // once all three reached it, and never before.
    const NODES: usize = 3;
    // `seen[viewer][node]`: the latest round `viewer` knows `node` reached.
    let mut seen = [[0u64; NODES]; NODES];
    for round in 1u64..=100 {
        for node in 0..NODES {
            for view in seen.iter_mut() {
                // Maximum of what arrives: a stale repeat changes nothing.
                view[node] = view[node].max(round).max(round - 1);
            }
            // Only the last node's arrival completes the round, for anyone.
            let complete = seen
                .iter()
                .filter(|view| nodes_reached(&view[..], round) == NODES)
                .count();
            check!(c, complete == 0 || node == NODES - 1);
        }
        for view in &seen {
            check!(c, nodes_reached(view, round) == NODES);
            check!(c, nodes_reached(view, round + 1) == 0);
        }
    }
});
