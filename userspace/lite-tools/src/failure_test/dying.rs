//! A model of a node's death on top of the in-memory kernel, so that the
//! whole failure test can run on a host.
//!
//! Each node of a [`FakeKernel::cluster`] is wrapped in a [`Node`] that
//! knows which node is the victim. Until [`kill`] is called, calls pass
//! through, except those the real kernel would keep waiting on the victim:
//! an RPC call to its port [`VICTIM_PORT`] and the locks it keeps wait for
//! its death, and a
//! barrier of every node waits until the victim enters it too (or dies).
//! A lock kept by a survivor that the victim holds waits in the model
//! underneath. At the death the victim's LMRs are freed (their chunks with
//! them), the survivors' calls involving the victim fail with `EHOSTDOWN`,
//! and the model hands the locks the victim held on survivors over with
//! `EOWNERDEAD` (see [`FakeKernel::fail_node`]); the cluster shrinks by
//! one. Leaving and joining again pass through to the model.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use libc::c_long;
use lite::sys::{LiteLock, LiteMulticast, LiteReceive, LiteStats};

use super::VICTIM_PORT;
use crate::fake_kernel::rpc::port_of;
use crate::fake_kernel::{Defects, FakeKernel};
use crate::kernel::Kernel;

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
}

impl Fate {
    fn state(&self) -> MutexGuard<'_, FateState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until `ready` holds or the victim is dead; whether it died.
    fn wait_for(&self, ready: impl Fn(&FateState) -> bool) -> bool {
        let state = self
            .changed
            .wait_while(self.state(), |s| !s.dead && !ready(s))
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.dead
    }
}

/// How a survivor's kernel misbehaves at the death, and otherwise.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeathDefects {
    /// Writes to the dead node fail with `EIO` instead of `EHOSTDOWN`.
    write_fails_with_eio: bool,
    /// Defects of the model underneath, on every node.
    kernel: Defects,
}

impl DeathDefects {
    /// Writes to the dead node fail with `EIO`.
    pub fn write_fails_with_eio() -> Self {
        DeathDefects {
            write_fails_with_eio: true,
            ..DeathDefects::default()
        }
    }

    /// A correct death on a model with `kernel`'s defects.
    pub fn with_kernel(kernel: Defects) -> Self {
        DeathDefects {
            kernel,
            ..DeathDefects::default()
        }
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
        self.tracked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

    /// `Some(error)` if a transfer on `handle` reaches the dead victim.
    fn transfer_error(&self, handle: u64) -> Option<c_long> {
        if self.is_victim() || !self.tracked().contains(&handle) || !self.dead() {
            return None;
        }
        let errno = if self.defects.write_fails_with_eio {
            libc::EIO
        } else {
            libc::EHOSTDOWN
        };
        Some(-c_long::from(errno))
    }
}

fn host_down() -> c_long {
    -c_long::from(libc::EHOSTDOWN)
}

impl Kernel for Node {
    unsafe fn join(&self, cm_ip: *const c_char, cm_port: u32, ib_port: u32) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.join(cm_ip, cm_port, ib_port) }
    }

    fn leave(&self, flags: u32) -> c_long {
        self.inner.leave(flags)
    }

    fn get_node_id(&self) -> c_long {
        self.inner.get_node_id()
    }

    fn get_total_node(&self) -> c_long {
        // The model counts the dead victim out (see `kill`).
        self.inner.get_total_node()
    }

    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long {
        let ret = self.inner.alloc_remote(node, size, flags, password);
        self.track(ret, self.is_victim() || node == self.victim)
    }

    unsafe fn rdma_write(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        if let Some(error) = self.transfer_error(handle) {
            return error;
        }
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .rdma_write(handle, buf, size, offset, priority, password)
        }
    }

    unsafe fn rdma_read(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        if let Some(error) = self.transfer_error(handle) {
            return error;
        }
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .rdma_read(handle, buf, size, offset, priority, password)
        }
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

    fn remote_memset(&self, handle: u64, offset: u64, size: u64, byte: u32) -> c_long {
        self.inner.remote_memset(handle, offset, size, byte)
    }

    fn memcpy(&self, src: u64, src_offset: u64, dst: u64, dst_offset: u64, size: u64) -> c_long {
        self.inner.memcpy(src, src_offset, dst, dst_offset, size)
    }

    fn memmove(&self, src: u64, src_offset: u64, dst: u64, dst_offset: u64, size: u64) -> c_long {
        self.inner.memmove(src, src_offset, dst, dst_offset, size)
    }

    unsafe fn wrap_alloc(
        &self,
        data: *const c_void,
        size: u64,
        name: u64,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        let ret = unsafe { self.inner.wrap_alloc(data, size, name, password) };
        self.track(ret, self.is_victim())
    }

    fn add_ask_mr_table(&self, name: u64, handle: u64, permission: u64, password: u64) -> c_long {
        self.inner
            .add_ask_mr_table(name, handle, permission, password)
    }

    fn ask_lmr(&self, node: u32, name: u64, permission: u64, password: u64) -> c_long {
        self.inner.ask_lmr(node, name, permission, password)
    }

    fn umap_lmr(&self, handle: u64) -> c_long {
        self.inner.umap_lmr(handle)
    }

    unsafe fn register_lmr(
        &self,
        buf: *mut c_void,
        size: u64,
        permission: u64,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.register_lmr(buf, size, permission, password) }
    }

    fn deregister_lmr(&self, handle: u64) -> c_long {
        self.inner.deregister_lmr(handle)
    }

    unsafe fn rdma_write_async(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .rdma_write_async(handle, buf, size, offset, priority, password)
        }
    }

    unsafe fn rdma_read_async(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .rdma_read_async(handle, buf, size, offset, priority, password)
        }
    }

    fn async_wait(&self, op: u64, flags: u32) -> c_long {
        self.inner.async_wait(op, flags)
    }

    fn fence(&self) -> c_long {
        self.inner.fence()
    }

    unsafe fn get_stats(&self, stats: *mut LiteStats, size: u64) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.get_stats(stats, size) }
    }

    unsafe fn register_application(
        &self,
        port: u32,
        max_size: u64,
        name: *const c_char,
        name_len: u64,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .register_application(port, max_size, name, name_len)
        }
    }

    fn unregister_application(&self, port: u32) -> c_long {
        self.inner.unregister_application(port)
    }

    fn query_port(&self, node: u32, port: u32) -> c_long {
        self.inner.query_port(node, port)
    }

    unsafe fn send_reply_imm_async(
        &self,
        node: u32,
        port_priority: u32,
        msg: *const c_void,
        size: u64,
        reply: *mut c_void,
        max_reply: u64,
    ) -> c_long {
        if node == self.victim && !self.is_victim() {
            // Posting to a dead node fails; the model answers at once.
            return host_down();
        }
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .send_reply_imm_async(node, port_priority, msg, size, reply, max_reply)
        }
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

    unsafe fn send(&self, node: u32, port_priority: u32, msg: *const c_void, size: u64) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.send(node, port_priority, msg, size) }
    }

    unsafe fn receive_message(
        &self,
        port: u32,
        buf: *mut c_void,
        max_size: u64,
        descriptor: *mut u64,
        flags: u32,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .receive_message(port, buf, max_size, descriptor, flags)
        }
    }

    unsafe fn reply_message(&self, buf: *const c_void, size: u64, descriptor: u64) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.reply_message(buf, size, descriptor) }
    }

    unsafe fn reply_and_receive_message(
        &self,
        buf: *const c_void,
        size: u64,
        descriptor: u64,
        next: *mut LiteReceive,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .reply_and_receive_message(buf, size, descriptor, next)
        }
    }

    unsafe fn send_reply_multicast(&self, call: *mut LiteMulticast) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.send_reply_multicast(call) }
    }

    unsafe fn fetch_add(&self, handle: u64, old: *mut u64, value: u64, priority: u32) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.fetch_add(handle, old, value, priority) }
    }

    unsafe fn compare_swp(
        &self,
        handle: u64,
        old: *mut u64,
        expected: u64,
        new_value: u64,
        priority: u32,
    ) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe {
            self.inner
                .compare_swp(handle, old, expected, new_value, priority)
        }
    }

    unsafe fn create_lock(&self, home: u32, lock: *mut LiteLock) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.create_lock(home, lock) }
    }

    unsafe fn ask_lock(&self, home: u32, number: u32, lock: *mut LiteLock) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.ask_lock(home, number, lock) }
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

    unsafe fn unlock(&self, lock: *const LiteLock) -> c_long {
        // SAFETY: the caller upholds the contract.
        unsafe { self.inner.unlock(lock) }
    }

    fn set_priority(&self, priority: u32) -> c_long {
        self.inner.set_priority(priority)
    }
}
