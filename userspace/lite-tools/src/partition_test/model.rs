//! A model of a network partition on top of the in-memory kernel, so that
//! the whole partition test can run on a host.
//!
//! Each node of a [`FakeKernel::cluster`] is wrapped in a [`Node`] that
//! knows which node gets cut off (the last one). [`cut`] fences that node
//! and takes it out of the others' count: its transfers fail with
//! `EHOSTDOWN` and land nowhere, and its membership file says `fenced 1`
//! while the others list it as dead. [`rejoin`] makes it a member again
//! as its next incarnation: everything its process held belonged to the
//! old membership and is gone (the model leaves and joins again underneath),
//! and the others list it as alive again. Before the cut, [`pause`]
//! stops a node the way the harness stops its VM: until [`resume`], every
//! transfer waits (the paused node's own are frozen, and the model does not
//! tell which node an LMR is on, so it holds the others' too), and then
//! goes on as if nothing happened. Everything else passes through.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use libc::c_long;

use crate::debugfs::membership::{NodeMembership, Peer, PeerState, MEMBERSHIP_FILE};
use crate::failure_test::join_call;
use crate::fake_kernel::{lock, Defects, FakeKernel};
use crate::kernel::{kernel_calls, Kernel};

/// Where the cut stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before the cut.
    Connected,
    /// The cut node is cut off.
    Cut,
    /// The cut node joined again.
    Rejoined,
}

/// How the model's kernel gets the partition wrong.
#[derive(Debug, Clone, Copy, Default)]
pub struct CutDefects {
    /// The cut node's writes still land (and succeed) while it is cut off.
    pub writes_land_while_cut: bool,
    /// The cut node's handles survive its new join, so its old mapping
    /// writes into the LMR again.
    pub handles_survive_rejoin: bool,
    /// The cut node's transfers fail with `EIO` rather than `EHOSTDOWN`.
    pub transfers_fail_with_eio: bool,
    /// Transfers fail with `EHOSTDOWN` while a node is paused, as if its
    /// silence had broken the connections.
    pub transfers_fail_while_paused: bool,
    /// A paused node counts as dead: the others count one node less while
    /// it is paused, and every pause makes it a new incarnation.
    pub pause_is_a_death: bool,
}

/// The pauses of one node, shared by the whole cluster.
#[derive(Default)]
struct Pauses {
    /// The node paused now, if any.
    paused: Option<u32>,
    /// The node paused, now or before.
    node: Option<u32>,
    /// Pauses so far.
    made: u32,
}

/// [`Pauses`] and the signal that a pause ended.
#[derive(Default)]
struct PauseGate {
    pauses: Mutex<Pauses>,
    resumed: Condvar,
}

/// One node (one process) of a cluster with a node to cut off.
pub struct Node {
    inner: FakeKernel,
    id: u32,
    cut_node: u32,
    nodes: u32,
    stage: Arc<Mutex<Stage>>,
    gate: Arc<PauseGate>,
    defects: CutDefects,
    /// Transfers of this node that returned.
    transfers: AtomicU64,
}

/// A cluster of `nodes` whose last node gets cut off; element i is node i + 1.
pub fn cluster(nodes: u32, defects: CutDefects) -> Vec<Arc<Node>> {
    let stage = Arc::new(Mutex::new(Stage::Connected));
    let gate = Arc::new(PauseGate::default());
    (1..=nodes)
        .zip(FakeKernel::cluster(nodes, Defects::default()))
        .map(|(id, inner)| {
            Arc::new(Node {
                inner,
                id,
                cut_node: nodes,
                nodes,
                stage: Arc::clone(&stage),
                gate: Arc::clone(&gate),
                defects,
                transfers: AtomicU64::new(0),
            })
        })
        .collect()
}

/// Cuts `node` (the cut node) off: it fences every peer, once its
/// transfer under way (if any) ended, and the others expel it. In that
/// order, so that nothing it writes lands once the others count it out.
pub fn cut(node: &Node) {
    *node.stage() = Stage::Cut;
    node.inner.fail_node();
}

/// Makes the cut node `node` a member again, as its next incarnation.
pub fn rejoin(node: &Node) {
    if node.defects.handles_survive_rejoin {
        node.inner.revive_node();
    } else {
        // The old membership ends with everything its processes held.
        node.inner.leave(0);
        let joined = join_call(&node.inner, Ipv4Addr::new(10, 77, 0, 254));
        assert_eq!(joined, c_long::from(node.id), "the model joins again");
    }
    *node.stage() = Stage::Rejoined;
}

/// How many of `node`'s transfers have returned.
pub fn transfers(node: &Node) -> u64 {
    node.transfers.load(Ordering::SeqCst)
}

/// Pauses `node` until [`resume`].
pub fn pause(node: &Node) {
    let mut pauses = node.pauses();
    pauses.paused = Some(node.id);
    pauses.node = Some(node.id);
    pauses.made += 1;
}

/// Ends the pause of the node paused.
pub fn resume(node: &Node) {
    node.pauses().paused = None;
    node.gate.resumed.notify_all();
}

impl Node {
    fn pauses(&self) -> MutexGuard<'_, Pauses> {
        lock(&self.gate.pauses)
    }

    /// Waits while a node is paused; the error a transfer then fails with
    /// instead, if the model's kernel fails them.
    fn wait_out_pause(&self) -> Option<c_long> {
        let pauses = self.pauses();
        if pauses.paused.is_some() && self.defects.transfers_fail_while_paused {
            return Some(-c_long::from(libc::EHOSTDOWN));
        }
        let resumed = self.gate.resumed.wait_while(pauses, |p| p.paused.is_some());
        drop(resumed.unwrap_or_else(PoisonError::into_inner));
        None
    }

    /// How many times node `node` was taken for dead while paused.
    fn deaths_of(&self, node: u32) -> u32 {
        let pauses = self.pauses();
        if self.defects.pause_is_a_death && pauses.node == Some(node) {
            pauses.made
        } else {
            0
        }
    }

    fn stage(&self) -> MutexGuard<'_, Stage> {
        lock(&self.stage)
    }

    fn is_cut_node(&self) -> bool {
        self.id == self.cut_node
    }

    /// Runs `transfer` once no node is paused, unless this is the cut node
    /// and it is cut off: then its transfers fail and land nowhere. The
    /// cut node's transfers hold the stage while they run, so that a cut
    /// waits for the one under way, as fencing a connection does. The
    /// model does not tell which node an LMR is on: every handle is alike.
    fn transfer(&self, _handle: u64, transfer: impl FnOnce() -> c_long) -> c_long {
        let ret = self.transfer_now(transfer);
        self.transfers.fetch_add(1, Ordering::SeqCst);
        ret
    }

    fn transfer_now(&self, transfer: impl FnOnce() -> c_long) -> c_long {
        if let Some(failed) = self.wait_out_pause() {
            return failed;
        }
        let stage = self.is_cut_node().then(|| self.stage());
        if stage.as_deref() != Some(&Stage::Cut) || self.defects.writes_land_while_cut {
            return transfer();
        }
        let eio = self.defects.transfers_fail_with_eio;
        -c_long::from(if eio { libc::EIO } else { libc::EHOSTDOWN })
    }

    /// The node's membership file as the kernel would show it now.
    fn membership(&self) -> NodeMembership {
        let stage = *self.stage();
        let incarnation_of = |node| match (node == self.cut_node, stage) {
            (true, Stage::Rejoined) => 2,
            (true, _) => 1,
            (false, _) => 1 + self.deaths_of(node),
        };
        // While cut, the cut node and the others list each other dead.
        let cut_apart = |peer| stage == Stage::Cut && (self.is_cut_node() || peer == self.cut_node);
        let peers = (1..=self.nodes)
            .filter(|&peer| peer != self.id)
            .map(|peer| Peer {
                node: peer,
                state: if cut_apart(peer) {
                    PeerState::Dead
                } else {
                    PeerState::Alive
                },
                incarnation: incarnation_of(peer),
            })
            .collect();
        NodeMembership {
            node: self.id,
            incarnation: incarnation_of(self.id),
            epoch: match stage {
                Stage::Connected => 3,
                Stage::Cut => 4,
                Stage::Rejoined => 5,
            },
            fenced: self.is_cut_node() && stage == Stage::Cut,
            peers,
        }
    }
}

impl Kernel for Node {
    kernel_calls!(inner: join, leave, get_node_id, alloc_remote, free, dist_barrier,
        remote_memset, memcpy, memmove, wrap_alloc, add_ask_mr_table, ask_lmr, umap_lmr,
        register_lmr, deregister_lmr, rdma_write_async, rdma_read_async, async_wait, fence,
        get_stats, register_application, unregister_application, query_port, send_reply_imm,
        send_reply_imm_async, send, receive_message, reply_message, reply_and_receive_message,
        send_reply_multicast, fetch_add, compare_swp, create_lock, ask_lock, lock, unlock,
        set_priority);
    kernel_calls!(inner through transfer: rdma_write, rdma_read);

    fn get_total_node(&self) -> c_long {
        let total = self.inner.get_total_node();
        // With that defect, the others count a paused node out.
        let paused = self.pauses().paused;
        if total > 0 && self.defects.pause_is_a_death && paused.is_some_and(|p| p != self.id) {
            total - 1
        } else {
            total
        }
    }

    fn read_debugfs(&self, name: &str) -> Option<std::io::Result<String>> {
        if name != MEMBERSHIP_FILE {
            return self.inner.read_debugfs(name);
        }
        Some(Ok(format!(
            "{}manager_last_heard_ms_ago 10\nheartbeat_ms 500\nmanager_timeout_ms 3000\n",
            self.membership()
        )))
    }

    fn write_debugfs(&self, name: &str, text: &str) -> Option<std::io::Result<()>> {
        self.inner.write_debugfs(name, text)
    }
}
