// SPDX-License-Identifier: GPL-2.0

//! Bodies of the membership cases of the `lite_internal` suite: the state
//! machine deciding which of the cluster manager's verdicts apply, and
//! barrier rounds that lose nodes.

use crate::internal::node_id::NodeId;
use kernel::{bindings, prelude::*};

use super::Check;
use crate::{
    errno,
    internal::{
        barrier::rounds::{BarrierRounds, MembersWait, WaitOutcome, MEMBERS_WAIT_MS},
        membership::view::{MembershipView, PeerState, Verdict},
    },
};

kunit_case!(lite_test_membership_epochs_and_incarnations, |c| {
    // Node 2, first incarnation, joined in epoch 5 and connected to 1 and 3.
    let mut view = MembershipView::new(NodeId::new(2), 1, 0);
    view.join_done(5);
    view.connected(NodeId::new(1), 1);
    view.connected(NodeId::new(3), 4);
    check!(c, view.epoch() == 5);
    check!(
        c,
        view.peer(NodeId::new(1)).map(|p| p.state) == Some(PeerState::Alive)
    );
    check!(c, view.peer(NodeId::new(2)).is_none());
    check!(
        c,
        view.peer(NodeId::new(9)).map(|p| p.state) == Some(PeerState::Absent)
    );

    // Not newer than the join: stale, whatever it names.
    check!(c, view.node_dead(NodeId::new(1), 1, 5) == Verdict::Stale);
    check!(c, view.node_dead(NodeId::new(1), 1, 4) == Verdict::Stale);
    // An earlier incarnation of node 3 (which rejoined as incarnation 4).
    check!(c, view.node_dead(NodeId::new(3), 3, 6) == Verdict::Stale);
    check!(
        c,
        view.peer(NodeId::new(3)).map(|p| p.state) == Some(PeerState::Alive)
    );
    check!(c, view.epoch() == 5);
    // The current one.
    check!(c, view.node_dead(NodeId::new(3), 4, 6) == Verdict::PeerDead);
    check!(
        c,
        view.peer(NodeId::new(3)).map(|p| p.state) == Some(PeerState::Dead)
    );
    check!(c, view.epoch() == 6);
    // The same message again, and a replay with a newer epoch: no effect.
    check!(c, view.node_dead(NodeId::new(3), 4, 6) == Verdict::Stale);
    check!(c, view.node_dead(NodeId::new(3), 4, 7) == Verdict::Stale);
    // A node never connected to (died while joining): only the epoch moves.
    check!(c, view.node_dead(NodeId::new(9), 1, 8) == Verdict::Unknown);
    check!(c, view.epoch() == 8);
    // Ids no cluster has.
    check!(c, view.node_dead(NodeId::new(0), 1, 20) == Verdict::Invalid);
    check!(
        c,
        view.node_dead(NodeId::new(64), 1, 20) == Verdict::Invalid
    );
    check!(
        c,
        view.node_dead(NodeId::new(u32::MAX), 1, 20) == Verdict::Invalid
    );
    check!(c, view.epoch() == 8);
    // Node 3 rejoins as incarnation 5 and is connected again.
    view.connected(NodeId::new(3), 5);
    check!(
        c,
        view.peer(NodeId::new(3)).map(|p| p.state) == Some(PeerState::Alive)
    );
    check!(c, view.node_dead(NodeId::new(3), 4, 9) == Verdict::Stale);
    check!(c, view.node_dead(NodeId::new(3), 5, 9) == Verdict::PeerDead);
    check!(c, !view.is_fenced());
});

kunit_case!(lite_test_membership_suspects_and_self, |c| {
    let mut view = MembershipView::new(NodeId::new(2), 3, 0);
    view.join_done(10);
    view.connected(NodeId::new(1), 1);
    // A failed connection is reported once, and only for a live peer.
    check!(c, view.suspect(NodeId::new(1)) == Some(1));
    check!(c, view.suspect(NodeId::new(1)).is_none());
    check!(c, view.suspect(NodeId::new(7)).is_none());
    check!(c, view.suspect(NodeId::new(2)).is_none());
    check!(c, view.suspect(NodeId::new(200)).is_none());
    check!(
        c,
        view.peer(NodeId::new(1)).map(|p| p.state) == Some(PeerState::Suspect)
    );
    // Only the manager's verdict makes it dead.
    check!(
        c,
        view.node_dead(NodeId::new(1), 1, 11) == Verdict::PeerDead
    );
    check!(c, view.suspect(NodeId::new(1)).is_none());
    // The manager's heartbeat answers do not move the applied epoch.
    view.manager_epoch_seen(40);
    check!(c, view.epoch() == 11);
    check!(c, view.node_dead(NodeId::new(4), 1, 12) == Verdict::Unknown);
    // A verdict about an earlier incarnation of this node is stale ...
    check!(c, view.node_dead(NodeId::new(2), 2, 13) == Verdict::Stale);
    check!(c, !view.is_fenced());
    // ... one about this incarnation fences it, and every peer with it.
    view.connected(NodeId::new(5), 1);
    check!(
        c,
        view.node_dead(NodeId::new(2), 3, 13) == Verdict::SelfDead
    );
    check!(c, view.is_fenced());
    check!(
        c,
        view.peer(NodeId::new(5)).map(|p| p.state) == Some(PeerState::Dead)
    );
});

kunit_case!(lite_test_barrier_interrupted_by_departure, |c| {
    let Ok(rounds) = KBox::pin_init(BarrierRounds::new(), GFP_KERNEL) else {
        check!(c, false);
        return;
    };
    rounds.joined(NodeId::new(2));
    rounds.joined(NodeId::new(3));
    let first = rounds.enter(NodeId::new(1));
    rounds.arrived(NodeId::new(2), first.round);
    rounds.arrived(NodeId::new(3), first.round);
    check!(c, matches!(rounds.wait(first, 3), Ok(WaitOutcome::Done)));
    rounds.finish(first.round);
    // Node 3 departs while the second round waits for it: the round fails
    // although node 2 would still make the two nodes asked for.
    let second = rounds.enter(NodeId::new(1));
    rounds.departed(NodeId::new(3));
    check!(c, rounds.members() == 2);
    check!(c, rounds.wait(second, 2).err() == Some(errno::EHOSTDOWN()));
    rounds.arrived(NodeId::new(2), second.round);
    check!(c, rounds.wait(second, 2).err() == Some(errno::EHOSTDOWN()));
    // It counts as finished at once, so a node joining now takes the
    // round after it.
    check!(c, rounds.finished() == second.round);
    // The next round is not interrupted.
    let third = rounds.enter(NodeId::new(1));
    rounds.arrived(NodeId::new(2), third.round);
    check!(c, matches!(rounds.wait(third, 2), Ok(WaitOutcome::Done)));
    rounds.finish(third.round);
    // A round a peer reports interrupted fails here when entered, but a
    // report of a round finished here changes nothing.
    rounds.interrupted_elsewhere(third.round);
    rounds.interrupted_elsewhere(third.round + 1);
    let fourth = rounds.enter(NodeId::new(1));
    rounds.arrived(NodeId::new(2), fourth.round);
    check!(c, rounds.wait(fourth, 2).err() == Some(errno::EHOSTDOWN()));
    rounds.finish(fourth.round);
    let fifth = rounds.enter(NodeId::new(1));
    rounds.arrived(NodeId::new(2), fifth.round);
    check!(c, matches!(rounds.wait(fifth, 2), Ok(WaitOutcome::Done)));
});

kunit_case!(lite_test_barrier_waits_a_bounded_time_for_members, |c| {
    let mut wait = MembersWait::default();
    // Enough members: waiting for slow ones has no limit.
    check!(c, !wait.gave_up(3, 3, 1_000));
    check!(c, !wait.gave_up(3, 3, 1_000 + 10 * MEMBERS_WAIT_MS));
    // Short of one from 5 s on: the wait ends after the limit, not before.
    check!(c, !wait.gave_up(2, 3, 5_000));
    check!(c, !wait.gave_up(2, 3, 5_000 + MEMBERS_WAIT_MS));
    check!(c, wait.gave_up(2, 3, 5_001 + MEMBERS_WAIT_MS));
    // A member that joins meanwhile starts the count afresh.
    let mut wait = MembersWait::default();
    check!(c, !wait.gave_up(1, 2, 0));
    check!(c, !wait.gave_up(2, 2, MEMBERS_WAIT_MS - 1));
    check!(c, !wait.gave_up(1, 2, MEMBERS_WAIT_MS + 1));
    check!(c, !wait.gave_up(1, 2, 2 * MEMBERS_WAIT_MS));
    check!(c, wait.gave_up(1, 2, 2 * MEMBERS_WAIT_MS + 2));
});
