//! A model of a node's death on top of the in-memory kernel, so that the
//! whole failure test can run on a host.
//!
//! Each node of a [`FakeKernel::cluster`] is wrapped in a [`Node`] that
//! knows which node is the victim. Until [`kill`] is called, calls pass
//! through, except those the real kernel would keep waiting on the victim:
//! an RPC call to its port [`VICTIM_PORT`] and the locks it keeps wait for
//! its death, and a barrier of every node waits until the victim enters it
//! too (or dies). A lock kept by a survivor that the victim holds waits in
//! the model underneath. At the death the victim's LMRs are freed (their chunks with
//! them), the survivors' calls involving the victim fail with `EHOSTDOWN`,
//! and the model hands the locks the victim held on survivors over with
//! `EOWNERDEAD` (see [`FakeKernel::fail_node`]); the cluster shrinks by
//! one.
//!
//! Leaving and joining again pass through to the model, each once every
//! other survivor has read the cluster's size since the last such change
//! (or [`SEEN_WITHIN`] passed): the observers of the leave/rejoin cycles
//! follow them by reading the size every few milliseconds, and on a
//! loaded host their threads may not run for longer than the leaver
//! stays out. On the machines the leaver's pauses are long enough.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use libc::c_long;
use lite::sys::LiteLock;

use super::VICTIM_PORT;
use crate::fake_kernel::rpc::port_of;
use crate::fake_kernel::{lock, Defects, FakeKernel};
use crate::kernel::{kernel_calls, Kernel};

/// What every node knows of the victim.
#[derive(Default)]
struct Fate {
    state: Mutex<FateState>,
    changed: Condvar,
}

#[derive(Default)]
struct FateState {
    dead: bool,
    /// Barriers the victim has entered.
    victim_barriers: u32,
    /// Leaves, and joins after a leave, so far: changes of the cluster's
    /// size.
    changes: u64,
    /// What `changes` was at each node's last read of the cluster's size.
    seen: BTreeMap<u32, u64>,
    /// Nodes that did not read the size within [`SEEN_WITHIN`] of a
    /// change: they stopped following, and nobody waits for them again.
    laggards: BTreeSet<u32>,
}

/// Longest a leave or a join waits for the other survivors to read the
/// cluster's size.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

impl Fate {
    fn state(&self) -> MutexGuard<'_, FateState> {
        lock(&self.state)
    }

    /// Waits until `ready` holds or the victim is dead; whether it died.
    fn wait_for(&self, ready: impl Fn(&FateState) -> bool) -> bool {
        let state = self
            .changed
            .wait_while(self.state(), |s| !s.dead && !ready(s));
        state.unwrap_or_else(PoisonError::into_inner).dead
    }
}

/// How a survivor's kernel misbehaves at the death, and otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeathDefects {
    /// Writes to the dead node fail with `EIO` instead of `EHOSTDOWN`.
    pub(super) write_fails_with_eio: bool,
    /// Defects of the model underneath, on every node.
    pub(super) kernel: Defects,
}

impl DeathDefects {
    /// The defects `set` switches on.
    pub fn with(set: fn(&mut DeathDefects)) -> Self {
        let mut defects = DeathDefects::default();
        set(&mut defects);
        defects
    }
}

/// One node (one process) of a cluster with a victim.
pub struct Node {
    inner: FakeKernel,
    id: u32,
    victim: u32,
    nodes: u32,
    fate: Arc<Fate>,
    defects: DeathDefects,
    /// Survivor: LMRs it allocated on the victim. Victim: LMRs it created.
    tracked: Mutex<BTreeSet<u64>>,
    /// Barriers this node entered.
    barriers: AtomicU32,
    /// Whether it left: its next join changes the cluster's size.
    left: AtomicBool,
}

/// A cluster of `nodes` whose last node is the victim; element i is node i + 1.
pub fn cluster(nodes: u32, defects: DeathDefects) -> Vec<Arc<Node>> {
    let fate = Arc::new(Fate::default());
    (1..=nodes)
        .zip(FakeKernel::cluster(nodes, defects.kernel))
        .map(|(id, inner)| {
            Arc::new(Node {
                inner,
                id,
                victim: nodes,
                nodes,
                fate: Arc::clone(&fate),
                defects,
                tracked: Mutex::new(BTreeSet::new()),
                barriers: AtomicU32::new(0),
                left: AtomicBool::new(false),
            })
        })
        .collect()
}

/// Kills the victim: its LMRs go, the locks it holds on survivors go to
/// their waiters (or are orphaned), and everybody learns of its death.
pub fn kill(victim: &Node) {
    let created: Vec<u64> = victim.tracked().iter().copied().collect();
    for handle in created {
        victim.inner.free(handle);
    }
    victim.inner.fail_node();
    victim.fate.state().dead = true;
    victim.fate.changed.notify_all();
}

impl Node {
    fn tracked(&self) -> MutexGuard<'_, BTreeSet<u64>> {
        lock(&self.tracked)
    }

    fn is_victim(&self) -> bool {
        self.id == self.victim
    }

    fn dead(&self) -> bool {
        self.fate.state().dead
    }

    /// Notes a handle this node must know about, if `ret` is one.
    fn track(&self, ret: c_long, wanted: bool) -> c_long {
        if wanted && ret > 0 {
            self.tracked().insert(ret.unsigned_abs());
        }
        ret
    }

    /// Wraps `data` in an LMR, which the victim notes as its own.
    fn track_wrapped(&self, _data: *const c_void, wrap: impl FnOnce() -> c_long) -> c_long {
        self.track(wrap(), self.is_victim())
    }

    /// Posts an asynchronous call to `node`, unless a survivor posts it to
    /// the victim: posting to a dead node fails, and the model answers at
    /// once, so it fails already.
    fn post_to(&self, node: u32, post: impl FnOnce() -> c_long) -> c_long {
        if node == self.victim && !self.is_victim() {
            return host_down();
        }
        post()
    }

    /// Makes `change`, a leave or a join, once every other survivor has
    /// read the cluster's size since the last change (see [`SEEN_WITHIN`]);
    /// it counts as a change if `changed` says so of its result.
    fn change_membership(
        &self,
        change: impl FnOnce() -> c_long,
        changed: impl FnOnce(c_long) -> bool,
    ) -> c_long {
        let behind = |s: &FateState| -> Vec<u32> {
            (1..=self.nodes)
                .filter(|n| ![self.id, self.victim].contains(n) && !s.laggards.contains(n))
                .filter(|n| s.seen.get(n).copied().unwrap_or(0) < s.changes)
                .collect()
        };
        let (mut state, _) = self
            .fate
            .changed
            .wait_timeout_while(self.fate.state(), SEEN_WITHIN, |s| !behind(s).is_empty())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let laggards = behind(&state);
        state.laggards.extend(laggards);
        // Under the lock, so that no read sees the new size with the old count.
        let ret = change();
        if changed(ret) {
            state.changes += 1;
        }
        ret
    }

    /// Makes a transfer on `handle`, unless it reaches the dead victim:
    /// then it fails.
    fn transfer(&self, handle: u64, transfer: impl FnOnce() -> c_long) -> c_long {
        if self.is_victim() || !self.tracked().contains(&handle) || !self.dead() {
            return transfer();
        }
        let eio = self.defects.write_fails_with_eio;
        -c_long::from(if eio { libc::EIO } else { libc::EHOSTDOWN })
    }
}

fn host_down() -> c_long {
    -c_long::from(libc::EHOSTDOWN)
}

impl Kernel for Node {
    // The model underneath counts the dead victim out (see `kill`).
    kernel_calls!(inner: get_node_id, remote_memset, memcpy, memmove,
        add_ask_mr_table, ask_lmr, umap_lmr, register_lmr, deregister_lmr, rdma_write_async,
        rdma_read_async, async_wait, fence, get_stats, register_application,
        unregister_application, query_port, send, receive_message, reply_message,
        reply_and_receive_message, send_reply_multicast, fetch_add, compare_swp, create_lock,
        ask_lock, unlock, set_priority);
    kernel_calls!(inner through transfer: rdma_write, rdma_read);
    kernel_calls!(inner through post_to: send_reply_imm_async);
    kernel_calls!(inner through track_wrapped: wrap_alloc);

    unsafe fn join(&self, cm_ip: *const c_char, cm_port: u32, ib_port: u32) -> c_long {
        let rejoin = self.left.load(Ordering::SeqCst);
        self.change_membership(
            // SAFETY: the caller upholds the contract.
            || unsafe { self.inner.join(cm_ip, cm_port, ib_port) },
            |ret| rejoin && ret > 0,
        )
    }

    fn leave(&self, flags: u32) -> c_long {
        let ret = self.change_membership(|| self.inner.leave(flags), |ret| ret == 0);
        if ret == 0 {
            self.left.store(true, Ordering::SeqCst);
        }
        ret
    }

    fn get_total_node(&self) -> c_long {
        let mut state = self.fate.state();
        let total = self.inner.get_total_node();
        let changes = state.changes;
        state.seen.insert(self.id, changes);
        self.fate.changed.notify_all();
        total
    }

    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long {
        let ret = self.inner.alloc_remote(node, size, flags, password);
        self.track(ret, self.is_victim() || node == self.victim)
    }

    fn free(&self, handle: u64) -> c_long {
        self.tracked().remove(&handle);
        self.inner.free(handle)
    }

    fn dist_barrier(&self, num: u32) -> c_long {
        let round = self.barriers.fetch_add(1, Ordering::SeqCst) + 1;
        if self.is_victim() {
            self.fate.state().victim_barriers = round;
            self.fate.changed.notify_all();
        } else if num > self.nodes - 1 {
            // Every node, the victim included, must come.
            if self.fate.wait_for(|s| s.victim_barriers >= round) {
                return host_down();
            }
        }
        self.inner.dist_barrier(num)
    }

    unsafe fn send_reply_imm(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long {
        let port = port_of(port_priority);
        if node == self.victim && !self.is_victim() && (port == VICTIM_PORT || self.dead()) {
            // Nobody on the victim receives from its port: the call waits
            // for the end. (Its overload port is served until then.)
            self.fate.wait_for(|_| false);
            return host_down();
        }
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .send_reply_imm(node, port_priority, msg, size, reply, max_reply)
        }
    }

    unsafe fn lock(&self, lock: *const LiteLock) -> c_long {
        // SAFETY: the caller guarantees a readable LiteLock at `lock`.
        let home = unsafe { lock.read_unaligned() }.home;
        if home == self.victim && !self.is_victim() {
            // The victim holds it until it dies, and it dies with its home.
            self.fate.wait_for(|_| false);
            return host_down();
        }
        // A survivor's lock the victim holds waits in the model, whose
        // `fail_node` at the death hands it over with `EOWNERDEAD`.
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.lock(lock) }
    }
}
