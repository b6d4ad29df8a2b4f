// SPDX-License-Identifier: GPL-2.0

//! A node's membership in a LITE cluster: the core and the subsystems built
//! on it, and the processes using them.
//!
//! The cluster hands each control message to the subsystem of its family,
//! and tells every subsystem when a peer joins or goes; it knows nothing of
//! what the subsystems keep.

use crate::internal::node_id::NodeId;
use kernel::{prelude::*, sync::Arc};

use super::{
    async_io::AsyncIo,
    atomics::Atomics,
    barrier::Barrier,
    core::{
        device::DeviceContext,
        peer::Peer,
        subsystem::{Handling, Subsystem},
        wire::{Family, Frame, Role},
        Core, Received,
    },
    kernel_messages::KernelMessages,
    keys::Keys,
    locks::Locks,
    memory::{ops::MemoryOps, registration::Registration, RemoteMemory},
    probe::Probe,
    process::{Process, Processes, Role as HandleRole},
    qos::{admission, op_stats::COUNTERS, stats::Stats},
    quota::Quotas,
    rpc::Rpc,
    sharing::Sharing,
};
use crate::verbs::{self, PortConfig, WorkCompletion};
use core::sync::atomic::Ordering;

/// Most pool segments (one in use and the spare one) for which idle reply
/// slots keep their buffers across housekeeping rounds.
const POOL_SEGMENTS_WITH_KEPT_REPLIES: usize = 2;

/// Everything a joined node shares between its users.
pub(crate) struct Cluster {
    /// Device, peers, connections and the chunks held for others.
    pub(crate) core: Arc<Core>,
    /// Per-process state.
    pub(crate) processes: Arc<Processes>,
    /// The state shared by kernel callers of the C API.
    pub(crate) kernel_process: Arc<Process>,
    /// The kernel callers' message handlers.
    pub(crate) kernel_messages: Arc<KernelMessages>,
    /// LMRs and transfers.
    pub(crate) memory: Arc<RemoteMemory>,
    /// Memset and copy, executed where the bytes are.
    pub(crate) memory_ops: Arc<MemoryOps>,
    /// Registration of callers' own memory.
    pub(crate) registration: Arc<Registration>,
    /// Names, mappings and revocation.
    pub(crate) sharing: Arc<Sharing>,
    /// Asynchronous transfers.
    pub(crate) async_io: Arc<AsyncIo>,
    /// Ports and calls.
    pub(crate) rpc: Arc<Rpc>,
    /// Atomics.
    pub(crate) atomics: Arc<Atomics>,
    /// Locks, the lockers' and the home side.
    pub(crate) locks: Arc<Locks>,
    /// The distributed barrier.
    pub(crate) barrier: Arc<Barrier>,
    /// The device access probe.
    probe: Arc<Probe>,
    /// Key changes.
    pub(crate) keys: Arc<Keys>,
    /// The subsystem owning each family of control messages, by family.
    owners: [Option<Arc<dyn Subsystem>>; Family::COUNT],
}

impl Cluster {
    /// Creates the state of a node that was just assigned `node_id`.
    pub(crate) fn new(
        node_id: NodeId,
        device: Arc<DeviceContext>,
        port: PortConfig,
        quotas: Arc<Quotas>,
    ) -> Result<Arc<Self>> {
        let core = Core::new(node_id, device, port, quotas)?;
        let memory = RemoteMemory::new(core.clone())?;
        let atomics = Atomics::new(core.clone())?;
        let memory_ops = MemoryOps::new(core.clone())?;
        let sharing = Sharing::new(core.clone(), memory.clone())?;
        let rpc = Rpc::new(core.clone())?;
        let locks = Locks::new(core.clone(), atomics.clone())?;
        let barrier = Barrier::new(core.clone())?;
        let keys = Keys::new(core.clone())?;
        let probe = Probe::new(core.clone(), keys.clone())?;
        let kernel_process = Process::new(0)?;
        let kernel_messages = KernelMessages::new(rpc.clone(), kernel_process.clone())?;
        let owners = Family::ALL.map(|family| -> Option<Arc<dyn Subsystem>> {
            Some(match family {
                // Status replies only ever answer a request.
                Family::Status => return None,
                Family::Memory => memory.clone(),
                Family::MemoryOps => memory_ops.clone(),
                Family::Sharing => sharing.clone(),
                Family::Rpc => rpc.clone(),
                Family::Atomics => atomics.clone(),
                Family::Locks => locks.clone(),
                Family::Barrier => barrier.clone(),
                Family::Probe => probe.clone(),
                Family::Keys => keys.clone(),
            })
        });
        Ok(Arc::new(
            Cluster {
                processes: Arc::pin_init(Processes::new(), GFP_KERNEL)?,
                kernel_process,
                kernel_messages,
                registration: Registration::new(core.clone(), memory.clone())?,
                async_io: AsyncIo::new(core.clone())?,
                memory_ops,
                sharing,
                rpc,
                locks,
                barrier,
                probe,
                keys,
                atomics,
                memory,
                core,
                owners,
            },
            GFP_KERNEL,
        )?)
    }

    /// Every subsystem, for news about peers, in the order they hear it: a
    /// peer that joined gets this node's keys before anything else; remote
    /// memory marks lost chunks before sharing updates the chunk tables of
    /// published LMRs.
    fn subsystems(&self) -> [&dyn Subsystem; 11] {
        [
            &*self.keys,
            &*self.memory,
            &*self.memory_ops,
            &*self.registration,
            &*self.sharing,
            &*self.async_io,
            &*self.rpc,
            &*self.atomics,
            &*self.locks,
            &*self.barrier,
            &*self.probe,
        ]
    }

    /// Peer `node` joined and is connected: every subsystem hears of it.
    pub(crate) fn peer_joined(&self, node: NodeId) {
        for subsystem in self.subsystems() {
            subsystem.on_peer_joined(node);
        }
    }

    /// The manager declared peer `node` (incarnation `incarnation`, or
    /// whichever is current for `None`) dead, or it left: its connection is
    /// fenced, callers waiting on it fail with `EHOSTDOWN`, and every
    /// subsystem releases what it kept for it. Runs once per peer.
    ///
    /// When the manager named the peer, this node's keys change before the
    /// membership goes on, so the peer's next incarnation cannot use what
    /// this one kept. (`None` comes from this node's own fencing, after
    /// which its keys go with the membership.)
    pub(crate) fn peer_gone(&self, node: NodeId, incarnation: Option<u32>) {
        if self.core.fence_peer(node, incarnation).is_none() {
            return;
        }
        pr_notice!("node {} is gone\n", node);
        for subsystem in self.subsystems() {
            subsystem.on_peer_gone(node);
        }
        if incarnation.is_some() {
            if let Err(e) = self.keys.replace_keys() {
                pr_err!(
                    "cannot replace this node's keys after node {} went: {:?}\n",
                    node,
                    e
                );
            }
        }
    }

    /// Periodic work (called by the `lite_housekeep` thread): frees what
    /// was kept for gone nodes once its time came, and pool memory no
    /// longer needed.
    pub(crate) fn housekeeping(&self) {
        self.memory.free_orphans();
        self.sharing.drop_held_mappings(None);
        // Idle reply slots keep small pool buffers for their next call,
        // wherever the pool had room then: once the pool has grown, those
        // would keep whole segments the trim releases.
        if self.core.pool.usage().0 > POOL_SEGMENTS_WITH_KEPT_REPLIES {
            self.rpc.release_kept_reply_buffers();
        }
        self.core.pool.trim();
        self.core.ring_pool.trim();
    }

    /// Handles one receive completion (called by the polling thread).
    pub(crate) fn handle_receive(&self, wc: &WorkCompletion) {
        match self.core.receive(wc) {
            Received::Message(peer, frame) => self.dispatch(&peer, frame),
            Received::Rpc { node, imm, len } => self.rpc.arrived(node, imm, len),
            Received::PeerFailed(node) => {
                // Only the manager declares a node dead: a failed
                // connection makes the peer a suspect it hears of.
                pr_notice!("the connection to node {} failed\n", node);
                self.core.suspect(node);
            }
            Received::Nothing => {}
        }
    }

    /// Hands `frame` from `peer` to its subsystem; a reply goes to the
    /// request waiting for it, or, if none waits any more, to its subsystem
    /// so that its effect can be undone.
    fn dispatch(&self, peer: &Arc<Peer>, frame: Frame) {
        let kind = frame.kind();
        let (Some(family), Some(role)) = (kind.family(), kind.role()) else {
            pr_warn!("node {} sent an unknown message {:?}\n", peer.node, kind);
            return;
        };
        let frame = if role == Role::Reply {
            match self.core.requests.complete(frame) {
                Some(orphan) => orphan,
                None => return,
            }
        } else {
            frame
        };
        let Some(subsystem) = self.owners.get(family as usize).and_then(Option::as_ref) else {
            return;
        };
        let reply = match subsystem.on_message(peer, &frame) {
            Handling::Done => None,
            Handling::Answer(reply) => Some(reply),
            Handling::Defer => self.core.defer(subsystem.clone(), peer, frame),
        };
        // Posted, not waited for: this thread serves every peer, and waiting
        // for one's acknowledgment would hold up every other message
        // behind it. A reply that fails breaks the connection, which makes
        // the peer a suspect; its request fails by its timeout.
        if let Some(reply) = reply {
            if let Err(e) = peer.post(&reply) {
                pr_err!("cannot answer node {}: {:?}\n", peer.node, e);
            }
        }
    }

    /// The state of the calling process, created on first use.
    pub(crate) fn current_process(&self) -> Result<Arc<Process>> {
        let tgid = crate::sys::sched::current_tgid();
        self.processes.get_or_create(tgid)
    }

    /// Releases everything process `tgid` holds: its locks are released,
    /// its asynchronous operations cancelled or completed, callers waiting
    /// on its RPC descriptors failed and its ports unregistered, LMRs it
    /// created freed (revoking their mappings), its mappings dropped.
    pub(crate) fn process_exit(&self, tgid: i32) {
        self.locks.release_locks_of(Some(tgid));
        let Some(process) = self.processes.remove(tgid) else {
            return;
        };
        self.release_process(&process);
    }

    /// Releases what every process and kernel caller holds, as if all
    /// exited (the node leaves the cluster).
    pub(crate) fn release_all(&self) {
        while let Some(tgid) = self.processes.any_tgid() {
            self.process_exit(tgid);
        }
        self.locks.release_locks_of(None);
        self.kernel_messages.unregister_all();
        self.release_process(&self.kernel_process);
    }

    /// Asks the owners of the chunks this node holds for other nodes to
    /// move them elsewhere; returns how many are still held for live nodes.
    pub(crate) fn evacuate(&self) -> Result<usize> {
        self.sharing.evacuate_held_chunks()
    }

    /// Ends this membership: peers are fenced, waiters fail, and the
    /// threads serving it end.
    pub(crate) fn shutdown(&self) {
        self.core.close();
        self.keys.close();
        self.async_io.close();
        self.locks.close();
        // After the core: a handler blocked on a peer fails and returns.
        self.kernel_messages.unregister_all();
    }

    /// Releases what `process` holds (see [`Cluster::process_exit`]).
    fn release_process(&self, process: &Process) {
        self.async_io.drain_async(process);
        self.rpc.release_rpc(process);
        while let Some(entry) = process.remove_any() {
            match entry.role {
                HandleRole::Owner { lmr_id } => {
                    self.sharing.destroy_lmr(lmr_id, &entry.lmr);
                }
                HandleRole::Mapping {
                    mapping_id: Some(id),
                } => self.sharing.drop_mapping(id),
                HandleRole::Mapping { mapping_id: None } => {}
            }
        }
    }

    /// Writes what the node holds, one `name value` line each
    /// (`/sys/kernel/debug/lite/resources`): once every user of LITE is
    /// gone, all of it but the pool's spare memory returns to what the
    /// node held right after joining.
    pub(crate) fn write_resources(&self, out: &mut impl core::fmt::Write) -> core::fmt::Result {
        let stats = self.stats();
        let (segments, bytes) = self.core.pool.usage();
        let (ring_segments, ring_bytes) = self.core.ring_pool.usage();
        let named = [
            ("lmrs", stats.lmrs),
            ("registrations", stats.registrations),
            ("mappings", stats.mappings),
            ("names", stats.published_names),
            ("handles", stats.handles),
            ("chunks", stats.held_chunks),
            ("async_ops", stats.async_in_flight),
            ("rpc_ports", stats.rpc_ports),
            ("reply_slots", self.rpc.reply_slots_in_use() as u64),
            ("locks", stats.locks),
            ("pool_segments", segments as u64),
            ("pool_bytes", bytes),
            ("rpc_rings", self.rpc.rings() as u64),
            ("ring_segments", ring_segments as u64),
            ("ring_bytes", ring_bytes),
            // Buffers kept: for reuse by idle reply slots and the staging
            // pool, and the RPC rings. Part of `dma_buffers`.
            (
                "kept_buffers",
                (self.rpc.kept_reply_buffers() + self.core.staging.kept() + self.rpc.rings())
                    as u64,
            ),
        ];
        for (name, value) in named {
            writeln!(out, "{name} {value}")?;
        }
        write_device_counts(out)
    }

    /// Checks that the device refuses remote access outside LITE's memory
    /// regions (`/sys/kernel/debug/lite/access_probe`).
    pub(crate) fn probe_access(&self, out: &mut impl core::fmt::Write) -> Result {
        self.probe.run(out)
    }

    /// The node's counters (`lite_get_stats`).
    pub(crate) fn stats(&self) -> Stats {
        let (lmrs, registrations) = self.memory.count();
        // The process table's lock is held while each process's handle or
        // operation table is locked in turn (see the lock order in `core`).
        let (handles, mappings) = self.processes.handle_counts();
        let (kernel_handles, kernel_mappings) = self.kernel_process.handle_counts();
        let ops = self.processes.sum(|p| p.ops.lock().len());
        let kernel_ops = self.kernel_process.ops.lock().len();
        let connections = self.core.connected_peers().map_or(0, |peers| peers.len());
        // PANIC: the sums below add counts of objects in memory, far below
        // `usize::MAX`.
        Stats {
            lmrs: lmrs as u64,
            registrations: registrations as u64,
            mappings: (mappings + kernel_mappings) as u64,
            published_names: self.sharing.published_names() as u64,
            held_chunks: self.core.store.len() as u64,
            handles: (handles + kernel_handles) as u64,
            processes: self.processes.count() as u64,
            async_in_flight: (ops + kernel_ops) as u64,
            connections: connections as u64,
            rpc_ports: self.rpc.registered_ports() as u64,
            locks: self.locks.kept_locks() as u64,
            lock_acquires: COUNTERS.lock_acquires.load(Ordering::Relaxed),
            lock_waits: COUNTERS.lock_waits.load(Ordering::Relaxed),
            atomics: COUNTERS.atomics.load(Ordering::Relaxed),
            qos_throttled: admission::throttled(),
        }
    }
}

/// Writes the device resources LITE holds on a node that is not joined:
/// whatever is left of pools (nothing, once a membership ended).
pub(crate) fn write_device_resources(out: &mut impl core::fmt::Write) -> core::fmt::Result {
    write_device_counts(out)?;
    writeln!(out, "pool_bytes {}", verbs::pool_bytes())
}

/// Writes the counts of DMA buffers and memory regions.
fn write_device_counts(out: &mut impl core::fmt::Write) -> core::fmt::Result {
    writeln!(out, "dma_buffers {}", verbs::live_dma_buffers())?;
    writeln!(out, "memory_regions {}", verbs::live_memory_regions())
}
