//! An in-memory model of LITE, following the uapi header, so the cluster
//! test can be run on any host. Defects can be switched on to check that
//! the cluster test notices them.
//!
//! A [`FakeKernel`] is one process on one node: alone ([`FakeKernel::new`],
//! whose barriers never wait), or one per node of a cluster sharing one
//! memory and name space ([`FakeKernel::cluster`]), driven from one thread
//! per node. RPC is modelled in [`rpc`], locks, statistics and QoS in
//! [`sync`], quotas in [`quotas`], nodes that fail or pause in
//! [`failures`]; dropping a kernel is its process exiting.
//!
//! Processes are root's and privileged (`CAP_NET_ADMIN`, `CAP_IPC_LOCK`)
//! unless made with [`Kernel::process_of_user_and_group`] (or its
//! shorthands), which are held to their `RLIMIT_MEMLOCK` and may
//! administer LITE only as members of their node's administrators' group.
//! The model follows LITE's own checks: it has no debugfs permissions of
//! its own, which keep everyone but root out on a real node.
//!
//! Membership is kept per process (the real kernel keeps it per node):
//! `lite_leave` releases what the calling process holds (its locks go to
//! their next takers with `EOWNERDEAD`), moves the chunks its node holds
//! for other nodes' LMRs to a third node and takes the node out of the
//! cluster's count until it joins again, with the same id. Chunks of
//! mapped LMRs move too, but never to a node that maps the LMR (nor to
//! its creator). The refusal of a join while an earlier incarnation
//! counts as alive is not modelled.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_void};
use std::net::Ipv4Addr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::{
    LiteLock, LiteStats, ALLOC_ATOMIC, ASYNC_NOWAIT, CHUNK_SIZE, LEAVE_FORCE, MAX_ASYNC_CALLS,
    MAX_ASYNC_SIZE, MAX_IP_LEN, MAX_LMR_SIZE, MAX_MESSAGE_SIZE, MAX_NODES, MAX_REGISTER_SIZE,
    NODE_SPREAD, PERM_ADMIN, PERM_ATOMIC, PERM_READ, PERM_SHARE, PERM_WRITE, PRIORITY_LOW,
    PRIORITY_NONE,
};
use lite::Priority;

pub(crate) use crate::deadline::lock;
use crate::debugfs::membership::MEMBERSHIP_FILE;
use crate::debugfs::quotas::{parse_command, Limit, Limits, Resource, Usage, QUOTAS_FILE};
use crate::debugfs::{parse_stats, Operation, ADMIN_GROUP_FILE, NO_ADMIN_GROUP, STATS_FILE};
use crate::kernel::{kernel_calls, Kernel};
use crate::plan::others_in_ring_order;

/// Returns `-errno` from the call if `failed`: one of the model's checks,
/// in the order the kernel makes them.
macro_rules! fail_if {
    ($failed:expr, $errno:expr) => {
        if $failed {
            return $crate::fake_kernel::err($errno);
        }
    };
}

/// The `Ok` value of a check, or returns its error (a negative errno)
/// from the call; with an errno, the `Some` value of a lookup, or returns
/// `-errno`.
macro_rules! or_return {
    ($checked:expr) => {
        match $checked {
            Ok(value) => value,
            Err(errno) => return errno,
        }
    };
    ($found:expr, $errno:expr) => {
        match $found {
            Some(value) => value,
            None => return $crate::fake_kernel::err($errno),
        }
    };
}

mod failures;
mod quotas;
mod rpc;
mod sync;

/// Defects the model can be given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Defects {
    /// Writes beyond the first chunk land one chunk early.
    pub misplace_later_chunks: bool,
    /// Passwords are not checked.
    pub ignore_password: bool,
    /// Freed handles stay valid.
    pub keep_freed_handles: bool,
    /// The cluster manager cannot be reached.
    pub refuse_join: bool,
    /// Handle permissions (READ, WRITE, SHARE, ADMIN) are not enforced.
    pub ignore_permissions: bool,
    /// memmove copies front to back, like a naive memcpy, so an overlapping
    /// move to a higher offset repeats the start of the source.
    pub memmove_forward_only: bool,
    /// Freeing or deregistering an LMR leaves its mappings working.
    pub no_revocation: bool,
    /// A one-way message sent into a full ring is dropped, and the send
    /// reports success.
    pub drop_when_full: bool,
    /// `lite_lock` returns at once, even while another thread holds the lock.
    pub lock_not_exclusive: bool,
    /// An unlocked lock goes to the waiter that asked last, not first.
    pub lock_serves_newest_first: bool,
    /// A lock whose holder's node failed or left goes to its next taker
    /// with 0 instead of `EOWNERDEAD`, as if the holder had released it.
    pub lock_hides_owner_death: bool,
    /// fetch-add and compare-swap read, let other threads run, then write.
    pub atomics_not_atomic: bool,
    /// `lite_leave` accepts flags it does not define (and leaves).
    pub leave_accepts_unknown_flags: bool,
    /// The chunks a leaving node held for others move without their bytes
    /// (they arrive zeroed).
    pub leave_loses_moved_bytes: bool,
    /// A leave fails with `ENOSPC` when an LMR with chunks on the leaving
    /// node is mapped (by any node), as before mapped LMRs could move.
    pub leave_refuses_mapped_lmrs: bool,
    /// `lite_join` does not check the caller's privilege: an unprivileged
    /// process gets what a privileged one would (`EISCONN` on a member).
    pub join_without_privilege: bool,
    /// `lite_leave` does not check the caller's privilege: an unprivileged
    /// process takes the node out of the cluster.
    pub leave_without_privilege: bool,
    /// Quotas are counted (the quotas file shows them) but never enforced:
    /// no `EDQUOT`, for a user's limits nor for what a node holds for another.
    pub ignore_quotas: bool,
    /// `lite_register_lmr` ignores the caller's `RLIMIT_MEMLOCK`.
    pub ignore_memlock_limit: bool,
    /// Membership of the node's administrators' group gives no privilege:
    /// `EPERM` from `lite_join`, `lite_leave` and settings writes as without
    /// `CAP_NET_ADMIN` (the group file itself works as it should).
    pub ignore_admin_group: bool,
    /// The barrier of this round fails with `EHOSTDOWN` on every node, as
    /// when a member departs while it is in progress; every process counts
    /// its barriers from round 1.
    pub barrier_fails_in_round: Option<u64>,
    /// Transfers from or to a failed node fail with `EIO` rather than
    /// `EHOSTDOWN`.
    pub host_down_as_eio: bool,
    /// A node cut off does not fence its peers: its transfers still land
    /// (and succeed).
    pub writes_land_while_cut: bool,
    /// A node cut off keeps its handles when it joins again, so that its
    /// old mappings write into their LMRs again.
    pub handles_survive_rejoin: bool,
    /// Transfers fail with `EHOSTDOWN` while a node is paused, as if its
    /// silence had broken the connections.
    pub transfers_fail_while_paused: bool,
    /// A paused node counts as dead: the others count one node less while
    /// it is paused, and every pause makes it a new incarnation.
    pub pause_is_a_death: bool,
}

const ALL_PERMS: u64 = PERM_READ | PERM_WRITE | PERM_SHARE | PERM_ADMIN | PERM_ATOMIC;
/// What a name can grant.
const SHAREABLE: u64 = PERM_READ | PERM_WRITE | PERM_SHARE | PERM_ATOMIC;

enum Backing {
    Owned(Vec<u8>),
    /// Registered memory of the creating process.
    User {
        address: usize,
        len: usize,
    },
}

struct Lmr {
    backing: Backing,
    /// What the LMR allows (without ADMIN).
    perms: u64,
    creator: u32,
    /// The holder of each chunk.
    chunks: Vec<u32>,
    /// Mappings by node: a leave moves no chunk to these nodes.
    mappers: BTreeMap<u32, u64>,
    /// Freed while mappings remained (`no_revocation` keeps the data).
    released: bool,
    /// Charged to this user's quota.
    uid: u32,
}

impl Backing {
    /// What it charges its creator's user: its memory (registered memory
    /// pins whole pages) and one LMR.
    fn charge(&self) -> Usage {
        let (memory, bytes) = match *self {
            Backing::Owned(ref data) => (Resource::RemoteMemory, data.len() as u64),
            Backing::User { address, len } => (
                Resource::PinnedMemory,
                quotas::pages_spanned(address, len) * quotas::PAGE,
            ),
        };
        Usage::default().with(memory, bytes).with(Resource::Lmrs, 1)
    }
}

impl Lmr {
    fn len(&self) -> usize {
        match &self.backing {
            Backing::Owned(data) => data.len(),
            Backing::User { len, .. } => *len,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.backing {
            Backing::Owned(data) => data,
            // SAFETY: whoever registered the memory promised it stays valid
            // until it is deregistered, which removes this LMR.
            Backing::User { address, len } => unsafe {
                std::slice::from_raw_parts_mut(*address as *mut u8, *len)
            },
        }
    }
}

struct Published {
    lmr: u64,
    perms: u64,
    password: u64,
    /// Charged to this user's quota.
    uid: u32,
}

#[derive(Default)]
struct Cluster {
    next_lmr: u64,
    lmrs: BTreeMap<u64, Lmr>,
    /// By (node, name).
    names: BTreeMap<(u32, u64), Published>,
    /// Per node, for the statistics.
    mappings: BTreeMap<u32, u64>,
    /// Nodes that entered each barrier round.
    rounds: BTreeMap<u64, u32>,
    /// Nodes that left or failed ([`FakeKernel::fail_node`]).
    gone: BTreeSet<u32>,
    /// A node without an entry has the defaults.
    quotas: BTreeMap<u32, quotas::NodeQuotas>,
    /// [`ADMIN_GROUP_FILE`]; like the kernel's, it outlives leaves.
    admin_groups: BTreeMap<u32, u32>,
    failures: failures::Failures,
}

impl Cluster {
    fn map(&mut self, node: u32, lmr: u64) {
        *self.mappings.entry(node).or_default() += 1;
        if let Some(lmr) = self.lmrs.get_mut(&lmr) {
            *lmr.mappers.entry(node).or_default() += 1;
        }
    }

    fn unmap(&mut self, node: u32, lmr: u64) {
        *self.mappings.entry(node).or_default() -= 1;
        if let Some(lmr) = self.lmrs.get_mut(&lmr) {
            if let Some(count) = lmr.mappers.get_mut(&node) {
                *count -= 1;
                if *count == 0 {
                    lmr.mappers.remove(&node);
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Created,
    Mapping,
}

#[derive(Clone, Copy)]
struct Handle {
    lmr: u64,
    perms: u64,
    password: u64,
    kind: Kind,
    /// Freed, but kept by the `keep_freed_handles` defect.
    freed: bool,
}

/// An operation started but not reaped.
struct Op {
    result: c_long,
    /// For reads: where to, and the data read.
    delivery: Option<(usize, Vec<u8>)>,
    /// NOWAIT polls still answered with -EAGAIN.
    pending_polls: u32,
    /// Whether it is an RPC call (`lite_send_reply_imm_async`).
    is_call: bool,
}

#[derive(Default)]
struct Process {
    joined: bool,
    next_handle: u64,
    handles: BTreeMap<u64, Handle>,
    next_op: u64,
    ops: BTreeMap<u64, Op>,
    barrier_round: u64,
    /// Default priority (`lite_set_priority`).
    priority: u32,
    /// Soft `RLIMIT_MEMLOCK` in bytes.
    memlock_limit: u64,
}

struct Shared {
    cluster: Mutex<Cluster>,
    /// A barrier entered, a node failed or resumed, the size read.
    changed: Condvar,
    rpc: rpc::Rpc,
    sync: sync::Sync,
}

/// One process on one node of a cluster of `nodes` nodes.
pub struct FakeKernel {
    id: u32,
    nodes: u32,
    defects: Defects,
    /// Whether other nodes exist as threads (otherwise barriers never wait).
    connected: bool,
    shared: Arc<Shared>,
    process: Mutex<Process>,
    process_id: u64,
    /// `CAP_NET_ADMIN` (joins, leaves, debugfs writes) and `CAP_IPC_LOCK`
    /// (no `RLIMIT_MEMLOCK`).
    privileged: bool,
    /// Real uid, whose quotas it is charged to.
    uid: u32,
    /// Real, effective and file system gid (no supplementary group).
    gid: u32,
}

/// Addresses below this are never mapped, like the first page of a process.
const FIRST_MAPPED_ADDRESS: usize = 4096;

/// `-EFAULT` for a pointer to `size` bytes that cannot be mapped.
fn check_pointer(address: usize, size: u64) -> Result<(), c_long> {
    refuse_if(size > 0 && address < FIRST_MAPPED_ADDRESS, libc::EFAULT)
}

const BARRIER_TIMEOUT: Duration = Duration::from_secs(120);

fn err(errno: i32) -> c_long {
    -c_long::from(errno)
}

/// `Err(-errno)` if `failed`: [`fail_if!`] for checks returning a `Result`.
fn refuse_if(failed: bool, errno: i32) -> Result<(), c_long> {
    if failed {
        Err(err(errno))
    } else {
        Ok(())
    }
}

/// A write's source or a read's destination.
#[derive(Clone, Copy)]
enum Buffer {
    Source(*const c_void),
    Destination(*mut c_void),
}

impl From<*const c_void> for Buffer {
    fn from(source: *const c_void) -> Self {
        Buffer::Source(source)
    }
}

impl From<*mut c_void> for Buffer {
    fn from(destination: *mut c_void) -> Self {
        Buffer::Destination(destination)
    }
}

/// Handle, buffer, size, offset, priority and password.
type Transfer<B> = (u64, B, u64, u64, u32, u64);

/// Node, port and priority, message and size, reply buffer and size.
type RpcCall = (u32, u32, *const c_void, u64, *mut c_void, u64);

#[derive(Clone, Copy)]
struct Access {
    perm: u64,
    /// If the call takes one.
    password: Option<u64>,
    /// Handles the `keep_freed_handles` defect kept.
    allow_freed: bool,
}

impl Access {
    fn to(perm: u64) -> Self {
        Access {
            perm,
            password: None,
            allow_freed: false,
        }
    }
}

impl FakeKernel {
    /// A node on its own that will get id `id` when it joins a cluster of
    /// `nodes`; the other nodes are imagined, so barriers return at once.
    pub fn new(id: u32, nodes: u32, defects: Defects) -> Self {
        Self::node(id, nodes, defects, false, Self::new_shared())
    }

    /// One kernel per node of a cluster of `nodes`, sharing their memory;
    /// element i becomes node i + 1.
    pub fn cluster(nodes: u32, defects: Defects) -> Vec<FakeKernel> {
        let shared = Self::new_shared();
        (1..=nodes)
            .map(|id| Self::node(id, nodes, defects, true, Arc::clone(&shared)))
            .collect()
    }

    /// [`FakeKernel::cluster`] with every node joined.
    pub fn joined_cluster(nodes: u32, defects: Defects) -> Vec<FakeKernel> {
        let kernels = Self::cluster(nodes, defects);
        for kernel in &kernels {
            // SAFETY: the address is a NUL-terminated string.
            let id = unsafe { kernel.join(c"10.0.0.1".as_ptr(), 0, 0) };
            assert_eq!(id, c_long::from(kernel.id), "node {} joins", kernel.id);
        }
        kernels
    }

    /// Another process on the same node, with handles of its own and the
    /// privilege of this one.
    pub fn other_process(&self) -> FakeKernel {
        let mut kernel = Self::node(
            self.id,
            self.nodes,
            self.defects,
            self.connected,
            Arc::clone(&self.shared),
        );
        lock(&kernel.process).joined = lock(&self.process).joined;
        kernel.privileged = self.privileged;
        kernel.uid = self.uid;
        kernel.gid = self.gid;
        kernel
    }

    fn new_shared() -> Arc<Shared> {
        Arc::new(Shared {
            cluster: Mutex::new(Cluster {
                next_lmr: 1,
                ..Cluster::default()
            }),
            changed: Condvar::new(),
            rpc: rpc::Rpc::new(),
            sync: sync::Sync::new(),
        })
    }

    fn node(id: u32, nodes: u32, defects: Defects, connected: bool, shared: Arc<Shared>) -> Self {
        let process_id = shared.rpc.new_process();
        FakeKernel {
            process_id,
            id,
            nodes,
            defects,
            connected,
            shared,
            privileged: true,
            uid: 0,
            gid: 0,
            process: Mutex::new(Process {
                next_handle: 0x1000,
                next_op: 1,
                memlock_limit: quotas::MEMLOCK_HARD_LIMIT,
                ..Process::default()
            }),
        }
    }

    /// Number of handles this process holds (LMRs, mappings, registrations).
    pub fn live_handles(&self) -> usize {
        lock(&self.process).handles.len()
    }

    /// Number of LMRs in the whole cluster.
    pub fn live_lmrs(&self) -> usize {
        lock(&self.shared.cluster).lmrs.len()
    }

    /// How many operations `op` this node made, as its statistics count
    /// them.
    pub fn operations(&self, op: Operation) -> u64 {
        let text = self.shared.sync.stats_text(self.id, self.stats());
        parse_stats(&text).map_or(0, |stats| stats.ops_of(op))
    }

    /// Number of RPC ports open in the whole cluster.
    pub fn open_ports(&self) -> usize {
        self.shared.rpc.open_ports()
    }

    fn joined(&self) -> bool {
        lock(&self.process).joined
    }

    /// Whether this process may join, leave and change LITE's settings
    /// (`EPERM` before any other check otherwise): with `CAP_NET_ADMIN`, or
    /// as a member of its node's administrators' group, which only a
    /// privileged process sets.
    fn may_administer(&self) -> bool {
        self.privileged
            || (!self.defects.ignore_admin_group
                && self.cluster_state().admin_groups.get(&self.id) == Some(&self.gid))
    }

    /// `-ENOTCONN` before join.
    fn rpc_call(&self, call: impl FnOnce(&rpc::Caller) -> Result<c_long, c_long>) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        call(&self.caller()).unwrap_or_else(|errno| errno)
    }

    fn caller(&self) -> rpc::Caller {
        rpc::Caller {
            node: self.id,
            nodes: self.nodes,
            process: self.process_id,
            uid: self.uid,
            drop_when_full: self.defects.drop_when_full,
        }
    }

    fn own_limits(&self, cluster: &Cluster) -> Limits {
        match cluster.quotas.get(&self.id) {
            Some(node) => node.limits_of(self.uid),
            None => quotas::NodeQuotas::default().limits_of(self.uid),
        }
    }

    /// `EDQUOT` beyond the user's limits on its node.
    fn check_quota(&self, cluster: &Cluster, charge: Usage) -> Result<(), c_long> {
        if self.defects.ignore_quotas {
            return Ok(());
        }
        let ports = self.shared.rpc.ports_of_user(self.id, self.uid);
        let held = quotas::usage_of(cluster, self.id, self.uid, ports);
        let allowed = quotas::allows(&self.own_limits(cluster), &held, &charge);
        refuse_if(!allowed, libc::EDQUOT)
    }

    /// In the order every call takes them in.
    fn locked(&self) -> (MutexGuard<'_, Process>, MutexGuard<'_, Cluster>) {
        (lock(&self.process), self.cluster_state())
    }

    fn cluster_state(&self) -> MutexGuard<'_, Cluster> {
        lock(&self.shared.cluster)
    }

    /// The handle's LMR, checked in the kernel's order: handle, revocation,
    /// password, permission, range.
    fn check_access(
        &self,
        process: &Process,
        cluster: &Cluster,
        handle: u64,
        access: Access,
        offset: u64,
        size: u64,
    ) -> Result<u64, c_long> {
        let entry = Self::live_handle(process, handle, access.allow_freed)?;
        let lmr = match cluster.lmrs.get(&entry.lmr) {
            Some(lmr) if !lmr.released || self.defects.no_revocation || entry.freed => lmr,
            _ => return Err(err(libc::EKEYREVOKED)),
        };
        self.check_grant(&entry, access.password, access.perm)?;
        let end = offset.checked_add(size).ok_or(err(libc::EINVAL))?;
        refuse_if(end > lmr.len() as u64, libc::EINVAL)?;
        Ok(entry.lmr)
    }

    /// Where byte `position` of an LMR is stored.
    fn placement(&self, position: u64) -> usize {
        let misplaced = self.defects.misplace_later_chunks && position >= CHUNK_SIZE;
        let shift = if misplaced { CHUNK_SIZE } else { 0 };
        (position - shift) as usize
    }

    fn read_bytes(&self, lmr: &mut Lmr, offset: u64, size: u64) -> Vec<u8> {
        let mut out = vec![0u8; size as usize];
        let data = lmr.bytes_mut();
        for (start, len) in chunk_segments(offset, size) {
            let from = self.placement(start);
            let to = (start - offset) as usize;
            out[to..to + len].copy_from_slice(&data[from..from + len]);
        }
        out
    }

    fn write_bytes(&self, lmr: &mut Lmr, offset: u64, source: &[u8]) {
        let data = lmr.bytes_mut();
        for (start, len) in chunk_segments(offset, source.len() as u64) {
            let from = (start - offset) as usize;
            let to = self.placement(start);
            data[to..to + len].copy_from_slice(&source[from..from + len]);
        }
    }

    /// Its id and handle, which adds ADMIN to `perms`.
    fn create_lmr(
        &self,
        process: &mut Process,
        cluster: &mut Cluster,
        backing: Backing,
        perms: u64,
        chunks: Vec<u32>,
        password: u64,
    ) -> (u64, c_long) {
        let lmr = Lmr {
            backing,
            perms,
            creator: self.id,
            chunks,
            released: false,
            mappers: BTreeMap::new(),
            uid: self.uid,
        };
        let id = cluster.next_lmr;
        cluster.next_lmr += 1;
        cluster.lmrs.insert(id, lmr);
        let handle = Self::new_handle(process, id, perms | PERM_ADMIN, password, Kind::Created);
        (id, handle)
    }

    /// `-EBADF` for an unknown or freed handle (but one the
    /// `keep_freed_handles` defect kept if `allow_freed`).
    fn live_handle(process: &Process, handle: u64, allow_freed: bool) -> Result<Handle, c_long> {
        match process.handles.get(&handle) {
            Some(entry) if !entry.freed || allow_freed => Ok(*entry),
            _ => Err(err(libc::EBADF)),
        }
    }

    /// `-EACCES` for a wrong `password` (if the call takes one), then
    /// `-EPERM` if `entry` lacks `perm`, unless the defects ignore them.
    fn check_grant(&self, entry: &Handle, password: Option<u64>, perm: u64) -> Result<(), c_long> {
        let wrong_password = password.is_some_and(|given| given != entry.password);
        refuse_if(
            wrong_password && !self.defects.ignore_password,
            libc::EACCES,
        )?;
        let lacking = entry.perms & perm != perm;
        refuse_if(lacking && !self.defects.ignore_permissions, libc::EPERM)
    }

    fn unmap(&self, process: &mut Process, cluster: &mut Cluster, handle: u64, lmr: u64) {
        process.handles.remove(&handle);
        cluster.unmap(self.id, lmr);
    }

    fn publish(&self, cluster: &mut Cluster, name: u64, lmr: u64, perms: u64, password: u64) {
        let published = Published {
            lmr,
            perms,
            password,
            uid: self.uid,
        };
        cluster.names.insert((self.id, name), published);
    }

    fn new_handle(
        process: &mut Process,
        lmr: u64,
        perms: u64,
        password: u64,
        kind: Kind,
    ) -> c_long {
        process.next_handle += 1;
        let number = process.next_handle;
        let handle = Handle {
            lmr,
            perms,
            password,
            kind,
            freed: false,
        };
        process.handles.insert(number, handle);
        number as c_long
    }

    /// Which node holds each chunk of `size` bytes allocated on `target`:
    /// a spread LMR goes round robin over the other members, starting
    /// after this node.
    fn chunk_holders(&self, cluster: &Cluster, target: u32, size: u64) -> Vec<u32> {
        let count = size.div_ceil(CHUNK_SIZE);
        if target != NODE_SPREAD {
            return vec![target; count as usize];
        }
        let others: Vec<u32> = others_in_ring_order(self.id, self.nodes)
            .into_iter()
            .filter(|node| !cluster.gone.contains(node))
            .collect();
        (0..count as usize)
            .map(|chunk| {
                others
                    .get(chunk % others.len().max(1))
                    .copied()
                    .unwrap_or(0)
            })
            .collect()
    }

    fn is_member(cluster: &Cluster, node: u32, nodes: u32) -> bool {
        (1..=nodes).contains(&node) && !cluster.gone.contains(&node)
    }

    /// Moves every chunk this node holds for another node's LMR to a third
    /// member (neither this node, nor the LMR's creator, nor a node that
    /// maps the LMR), as the owners do when a node leaves. Without `force`,
    /// nothing moves unless every chunk can (`-ENOSPC`); with it, chunks
    /// that cannot move are held by no node any more (the model keeps
    /// their bytes, the kernel would not).
    fn move_held_chunks(&self, cluster: &mut Cluster, force: bool) -> Result<(), c_long> {
        let nodes = self.nodes;
        let me = self.id;
        let mut moves = Vec::new();
        for (&id, lmr) in &cluster.lmrs {
            if lmr.creator == me {
                continue;
            }
            // With the defect, a mapped LMR's chunks cannot move at all.
            let thirds: Vec<u32> =
                if self.defects.leave_refuses_mapped_lmrs && !lmr.mappers.is_empty() {
                    Vec::new()
                } else {
                    (1..=nodes)
                        .filter(|&n| {
                            n != me
                                && n != lmr.creator
                                && !lmr.mappers.contains_key(&n)
                                && Self::is_member(cluster, n, nodes)
                        })
                        .collect()
                };
            let held = lmr.chunks.iter().enumerate().filter(|(_, &n)| n == me);
            for (turn, (chunk, _)) in held.enumerate() {
                match thirds.get(turn % thirds.len().max(1)) {
                    Some(&third) => moves.push((id, chunk, third)),
                    None if force => moves.push((id, chunk, 0)),
                    None => return Err(err(libc::ENOSPC)),
                }
            }
        }
        for (id, chunk, third) in moves {
            let Some(lmr) = cluster.lmrs.get_mut(&id) else {
                continue;
            };
            if let Some(holder) = lmr.chunks.get_mut(chunk) {
                *holder = third;
            }
            if self.defects.leave_loses_moved_bytes {
                let data = lmr.bytes_mut();
                let start = (chunk as u64 * CHUNK_SIZE) as usize;
                let end = (start + CHUNK_SIZE as usize).min(data.len());
                data[start..end].fill(0);
            }
        }
        Ok(())
    }

    /// Releases an LMR created by this process: its names go and its
    /// mappings are revoked (the defects keep the data reachable).
    fn release(&self, process: &mut Process, cluster: &mut Cluster, handle: u64) {
        let Some(entry) = process.handles.get(&handle).copied() else {
            return;
        };
        cluster
            .names
            .retain(|_, published| published.lmr != entry.lmr);
        match process.handles.get_mut(&handle) {
            Some(entry) if self.defects.keep_freed_handles => entry.freed = true,
            _ => drop(process.handles.remove(&handle)),
        }
        let keep = self.defects.keep_freed_handles || self.defects.no_revocation;
        match cluster.lmrs.get_mut(&entry.lmr) {
            Some(lmr) if keep => {
                lmr.released = true;
                lmr.chunks.clear();
                if let Backing::User { .. } = lmr.backing {
                    // The memory goes back to its owner: never touch it again.
                    lmr.backing = Backing::Owned(vec![0; lmr.len()]);
                }
            }
            _ => {
                cluster.lmrs.remove(&entry.lmr);
            }
        }
    }

    fn check_joined(&self) -> Result<(), c_long> {
        refuse_if(!self.joined(), libc::ENOTCONN)
    }

    fn transfer_prelude(&self, priority: u32) -> Result<(), c_long> {
        self.check_joined()?;
        refuse_if(priority > PRIORITY_LOW, libc::EINVAL)
    }

    /// After the kernel's checks in its order; the bytes read (none for a
    /// write).
    fn do_transfer(
        &self,
        (handle, buf, size, offset, priority, password): Transfer<Buffer>,
        allow_freed: bool,
    ) -> Result<Vec<u8>, c_long> {
        self.transfer_prelude(priority)?;
        let (process, mut cluster) = self.locked();
        let (perm, address) = match buf {
            Buffer::Source(source) => (PERM_WRITE, source as usize),
            Buffer::Destination(destination) => (PERM_READ, destination as usize),
        };
        let access = Access {
            password: Some(password),
            allow_freed,
            ..Access::to(perm)
        };
        let lmr_id = self.check_access(&process, &cluster, handle, access, offset, size)?;
        check_pointer(address, size)?;
        let lmr = cluster.lmrs.get(&lmr_id).ok_or(err(libc::EBADF))?;
        self.check_reachable(&cluster, lmr)?;
        let lmr = cluster.lmrs.get_mut(&lmr_id).ok_or(err(libc::EBADF))?;
        if let Buffer::Source(source) = buf {
            // SAFETY: the caller guarantees `size` readable bytes at `buf`.
            let source = unsafe { std::slice::from_raw_parts(source.cast::<u8>(), size as usize) };
            self.write_bytes(lmr, offset, source);
            return Ok(Vec::new());
        }
        Ok(self.read_bytes(lmr, offset, size))
    }

    /// `lite_rdma_write` or `lite_rdma_read`, or their asynchronous forms,
    /// as the call `name` says, counted. An asynchronous one becomes an
    /// operation, whose reaping delivers what it read; a synchronous one
    /// also takes a handle the `keep_freed_handles` defect kept.
    ///
    /// # Safety
    ///
    /// As the system call's.
    unsafe fn transfer_call(
        &self,
        name: &str,
        (handle, buf, size, offset, priority, password): Transfer<impl Into<Buffer>>,
    ) -> c_long {
        let buf = buf.into();
        let args = (handle, buf, size, offset, priority, password);
        let asynchronous = name.ends_with("_async");
        let too_large = asynchronous && size > MAX_ASYNC_SIZE;
        fail_if!(too_large && self.joined(), libc::EINVAL);
        let op = match (buf, asynchronous) {
            (Buffer::Source(_), false) => Operation::Write,
            (Buffer::Destination(_), false) => Operation::Read,
            (Buffer::Source(_), true) => Operation::WriteAsync,
            (Buffer::Destination(_), true) => Operation::ReadAsync,
        };
        self.counted(op, priority, size, || {
            or_return!(self.wait_out_pause());
            let data = or_return!(self.do_transfer(args, !asynchronous));
            match (buf, asynchronous) {
                (Buffer::Source(_), false) => 0,
                (Buffer::Source(_), true) => self.start_op(Ok(None), None),
                (Buffer::Destination(to), true) => {
                    self.start_op(Ok(Some((to as usize, data))), None)
                }
                (Buffer::Destination(to), false) => {
                    // SAFETY: the caller guarantees `size` writable bytes at `buf`.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to.cast(), data.len()) };
                    0
                }
            }
        })
    }

    /// `lite_send_reply_imm`, or its asynchronous form if the call `name`
    /// is that, counted. The model answers an asynchronous call at once
    /// into memory of its own; reaping delivers the reply, or `-EFAULT`
    /// for a bad buffer.
    ///
    /// # Safety
    ///
    /// As the system call's.
    unsafe fn rpc_call_with_reply(
        &self,
        name: &str,
        (node, port_priority, msg, size, reply, max_reply): RpcCall,
    ) -> c_long {
        let priority = priority_of(port_priority);
        let rpc = &self.shared.rpc;
        fail_if!(self.has_failed(node), libc::EHOSTDOWN);
        if !name.ends_with("_async") {
            return self.counted(Operation::RpcCall, priority, size, || {
                // SAFETY: the caller upholds the system call's contract.
                self.rpc_call(|who| unsafe {
                    rpc.call(who, node, port_priority, (msg, size), (reply, max_reply))
                })
            });
        }
        let process = lock(&self.process);
        let calls = process.ops.values().filter(|op| op.is_call).count();
        drop(process);
        fail_if!(calls >= MAX_ASYNC_CALLS as usize, libc::EAGAIN);
        self.counted(Operation::RpcCallAsync, priority, size, || {
            let room = max_reply.min(MAX_MESSAGE_SIZE);
            let mut answer = vec![0u8; room as usize];
            let answer_buf = (answer.as_mut_ptr().cast(), room);
            // SAFETY: the caller upholds the system call's contract for
            // `msg`; `answer` has `room` writable bytes.
            let ret = self.rpc_call(|who| unsafe {
                rpc.call(who, node, port_priority, (msg, size), answer_buf)
            });
            if ret < 0 {
                return ret;
            }
            answer.truncate(ret as usize);
            fail_if!(reply.is_null() && max_reply > 0, libc::EFAULT);
            let delivery = if (reply as usize) < FIRST_MAPPED_ADDRESS && ret > 0 {
                Err(err(libc::EFAULT))
            } else {
                Ok(Some((reply as usize, answer)))
            };
            self.start_op(delivery, Some(ret))
        })
    }

    fn copy(
        &self,
        src: (u64, u64),
        dst: (u64, u64),
        size: u64,
        overlap_safe: bool,
    ) -> Result<(), c_long> {
        self.check_joined()?;
        let (process, mut cluster) = self.locked();
        let read = Access::to(PERM_READ);
        let src_lmr = self.check_access(&process, &cluster, src.0, read, src.1, size)?;
        let write = Access::to(PERM_WRITE);
        let dst_lmr = self.check_access(&process, &cluster, dst.0, write, dst.1, size)?;
        if size == 0 {
            return Ok(());
        }
        let naive = !overlap_safe || self.defects.memmove_forward_only;
        if naive && src_lmr == dst_lmr && dst.1 > src.1 && dst.1 < src.1 + size {
            // Front to back in small steps, as a naive copy does: the
            // moved start overwrites source bytes not yet copied.
            let step = (dst.1 - src.1).min(4096);
            let lmr = cluster.lmrs.get_mut(&dst_lmr).ok_or(err(libc::EBADF))?;
            let mut done = 0;
            while done < size {
                let len = step.min(size - done);
                let bytes = self.read_bytes(lmr, src.1 + done, len);
                self.write_bytes(lmr, dst.1 + done, &bytes);
                done += len;
            }
            return Ok(());
        }
        let bytes = {
            let lmr = cluster.lmrs.get_mut(&src_lmr).ok_or(err(libc::EBADF))?;
            self.read_bytes(lmr, src.1, size)
        };
        let lmr = cluster.lmrs.get_mut(&dst_lmr).ok_or(err(libc::EBADF))?;
        self.write_bytes(lmr, dst.1, &bytes);
        Ok(())
    }

    /// Starts an operation; its id. Reaping it delivers what `delivery`
    /// holds and returns 0, or `reply_len` for an answered asynchronous
    /// call; or it returns the delivery's error.
    fn start_op(
        &self,
        delivery: Result<Option<(usize, Vec<u8>)>, c_long>,
        reply_len: Option<c_long>,
    ) -> c_long {
        let mut process = lock(&self.process);
        let id = process.next_op;
        process.next_op += 1;
        let (result, delivery) = match delivery {
            Ok(delivery) => (reply_len.unwrap_or(0), delivery),
            Err(errno) => (errno, None),
        };
        let op = Op {
            result,
            delivery,
            pending_polls: 1,
            is_call: reply_len.is_some(),
        };
        process.ops.insert(id, op);
        id as c_long
    }

    fn reap(op: Op) -> c_long {
        if let Some((address, data)) = op.delivery {
            // SAFETY: the caller of rdma_read_async promised the buffer
            // stays valid and unused until the operation is reaped.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut u8, data.len()) };
        }
        op.result
    }

    fn stats(&self) -> LiteStats {
        let (process, cluster) = self.locked();
        if !process.joined {
            return LiteStats::default();
        }
        let mine: Vec<&Lmr> = cluster
            .lmrs
            .values()
            .filter(|lmr| lmr.creator == self.id && !lmr.released)
            .collect();
        let registered = mine
            .iter()
            .filter(|lmr| matches!(lmr.backing, Backing::User { .. }));
        let registrations = registered.count() as u64;
        let held_chunks = cluster
            .lmrs
            .values()
            .flat_map(|lmr| lmr.chunks.iter())
            .filter(|&&node| node == self.id)
            .count() as u64;
        let handles = process.handles.len() as u64;
        let async_in_flight = process.ops.len() as u64;
        LiteStats {
            lmrs: mine.len() as u64,
            registrations,
            mappings: cluster.mappings.get(&self.id).copied().unwrap_or(0),
            published_names: cluster.names.keys().filter(|(n, _)| *n == self.id).count() as u64,
            held_chunks,
            handles,
            processes: u64::from(handles + async_in_flight > 0),
            async_in_flight,
            // One connection to every other node.
            connections: u64::from(self.nodes - 1),
            rpc_ports: self.shared.rpc.ports_by_user(self.id).values().sum(),
            ..self.shared.sync.counters(self.id)
        }
    }

    fn effective_priority(&self, priority: u32) -> Option<Priority> {
        let priority = if priority == PRIORITY_NONE {
            lock(&self.process).priority
        } else {
            priority
        };
        Priority::from_raw(priority)
    }

    /// Counts `call` in the node's statistics, unless made before join or
    /// with an invalid priority.
    fn counted(
        &self,
        op: Operation,
        priority: u32,
        bytes: u64,
        call: impl FnOnce() -> c_long,
    ) -> c_long {
        self.counted_as(op, self.effective_priority(priority), bytes, call)
    }

    /// At a resolved priority; `None` counts nothing.
    fn counted_as(
        &self,
        op: Operation,
        priority: Option<Priority>,
        bytes: u64,
        call: impl FnOnce() -> c_long,
    ) -> c_long {
        let start = Instant::now();
        let ret = call();
        if let (true, Some(priority)) = (self.joined(), priority) {
            self.shared
                .sync
                .record(self.id, op, priority, bytes, ret, start.elapsed());
        }
        ret
    }

    /// `update` gives the new value from the old one, which goes to `*old`.
    fn atomic(
        &self,
        handle: u64,
        old: *mut u64,
        priority: u32,
        update: impl Fn(u64) -> u64,
    ) -> Result<(), c_long> {
        self.transfer_prelude(priority)?;
        let (process, mut cluster) = self.locked();
        let id = self.check_access(&process, &cluster, handle, Access::to(PERM_ATOMIC), 0, 0)?;
        let lmr = cluster.lmrs.get_mut(&id).ok_or(err(libc::EBADF))?;
        let aligned = !matches!(lmr.backing, Backing::User { address, .. } if address % 8 != 0);
        refuse_if(lmr.len() != 8 || !aligned, libc::EINVAL)?;
        check_pointer(old as usize, 8)?;
        let bytes = self.read_bytes(lmr, 0, 8);
        let before = u64::from_ne_bytes(bytes.try_into().unwrap_or_default());
        if self.defects.atomics_not_atomic {
            drop(cluster);
            drop(process);
            std::thread::sleep(Duration::from_millis(1));
            cluster = self.cluster_state();
        }
        let lmr = cluster.lmrs.get_mut(&id).ok_or(err(libc::EBADF))?;
        self.write_bytes(lmr, 0, &update(before).to_ne_bytes());
        drop(cluster);
        // SAFETY: the caller guarantees a writable u64 at `old` (checked
        // above against the unmapped first page, like the kernel's fault).
        unsafe { old.write_unaligned(before) };
        self.shared.sync.count_atomic(self.id);
        Ok(())
    }

    /// The lock `*lock` names, after the checks every lock call makes.
    fn lock_key(&self, lock: *const LiteLock) -> Result<(u32, u32), c_long> {
        self.check_joined()?;
        check_pointer(lock as usize, 1)?;
        // SAFETY: the caller guarantees a readable LiteLock at `lock`.
        let LiteLock { home, number } = unsafe { lock.read_unaligned() };
        self.check_home(home)?;
        Ok((home, number))
    }

    fn check_home(&self, home: u32) -> Result<(), c_long> {
        refuse_if(home == 0 || home >= MAX_NODES, libc::EINVAL)?;
        refuse_if(home > self.nodes, libc::EHOSTUNREACH)
    }

    fn store_lock(lock: *mut LiteLock, value: LiteLock) -> Result<(), c_long> {
        check_pointer(lock as usize, 1)?;
        // SAFETY: the caller guarantees a writable LiteLock at `lock`.
        unsafe { lock.write_unaligned(value) };
        Ok(())
    }
}

impl FakeKernel {
    /// `ENOMEM` if a registration charging `charge` would pin more pages
    /// than the process's `RLIMIT_MEMLOCK` allows with what its
    /// registrations pin already (unless it has `CAP_IPC_LOCK`, or the
    /// `ignore_memlock_limit` defect).
    fn check_memlock(
        &self,
        process: &Process,
        cluster: &Cluster,
        charge: Usage,
    ) -> Result<(), c_long> {
        if self.privileged || self.defects.ignore_memlock_limit {
            return Ok(());
        }
        let pinned: u64 = process
            .handles
            .values()
            .filter(|handle| handle.kind == Kind::Created && !handle.freed)
            .filter_map(|handle| cluster.lmrs.get(&handle.lmr))
            .map(|lmr| lmr.backing.charge().get(Resource::PinnedMemory))
            .sum();
        let pinned = pinned + charge.get(Resource::PinnedMemory);
        refuse_if(
            pinned / quotas::PAGE > process.memlock_limit / quotas::PAGE,
            libc::ENOMEM,
        )
    }

    fn quotas_text(&self) -> String {
        let ports = self.shared.rpc.ports_by_user(self.id);
        let cluster = self.cluster_state();
        let member = Self::is_member(&cluster, self.id, self.nodes);
        quotas::file_text(&cluster, self.id, self.nodes, &ports, member)
    }

    fn write_quotas(&self, text: &str) -> Result<(), i32> {
        let command = parse_command(text).map_err(|_| libc::EINVAL)?;
        self.cluster_state()
            .quotas
            .entry(self.id)
            .or_default()
            .apply(command)
    }

    fn admin_group_text(&self) -> String {
        let cluster = self.cluster_state();
        let gid = cluster.admin_groups.get(&self.id).copied();
        format!("{}\n", gid.unwrap_or(NO_ADMIN_GROUP))
    }

    /// In the kernel's order: `EINVAL` for anything but a decimal number
    /// (and a newline), `EPERM` without `CAP_NET_ADMIN` (the group's members
    /// may not hand it on), `EINVAL` above [`NO_ADMIN_GROUP`].
    fn write_admin_group(&self, text: &str) -> Result<(), i32> {
        let number = text.strip_suffix('\n').unwrap_or(text);
        let value: u64 = number.parse().map_err(|_| libc::EINVAL)?;
        if !self.privileged {
            return Err(libc::EPERM);
        }
        let gid = u32::try_from(value).map_err(|_| libc::EINVAL)?;
        let mut cluster = self.cluster_state();
        if gid == NO_ADMIN_GROUP {
            cluster.admin_groups.remove(&self.id);
        } else {
            cluster.admin_groups.insert(self.id, gid);
        }
        Ok(())
    }

    /// What an exiting process's handles become.
    fn release_everything(&self) {
        let (mut process, mut cluster) = self.locked();
        self.release_handles(&mut process, &mut cluster);
    }

    /// Releases the LMRs the process created and did not free (their names
    /// go, their mappings are revoked), drops its mappings and operations.
    fn release_handles(&self, process: &mut Process, cluster: &mut Cluster) {
        let handles: Vec<(u64, Handle)> = process
            .handles
            .iter()
            .map(|(&number, handle)| (number, *handle))
            .collect();
        for (number, handle) in handles {
            match handle.kind {
                Kind::Created if !handle.freed => self.release(process, cluster, number),
                Kind::Created => {}
                Kind::Mapping => cluster.unmap(self.id, handle.lmr),
            }
        }
        process.handles.clear();
        process.ops.clear();
    }

    fn memset(&self, handle: u64, offset: u64, size: u64, byte: u32) -> Result<(), c_long> {
        self.check_joined()?;
        let byte = u8::try_from(byte).map_err(|_| err(libc::EINVAL))?;
        let (process, mut cluster) = self.locked();
        let access = Access::to(PERM_WRITE);
        let lmr = self.check_access(&process, &cluster, handle, access, offset, size)?;
        let lmr = cluster.lmrs.get_mut(&lmr).ok_or(err(libc::EBADF))?;
        self.write_bytes(lmr, offset, &vec![byte; size as usize]);
        Ok(())
    }
}

/// (start, length) pieces that cross no chunk boundary.
fn chunk_segments(offset: u64, size: u64) -> impl Iterator<Item = (u64, usize)> {
    let end = offset + size;
    let mut start = offset;
    std::iter::from_fn(move || {
        if start >= end {
            return None;
        }
        let chunk_end = (start / CHUNK_SIZE + 1) * CHUNK_SIZE;
        let segment_end = chunk_end.min(end);
        let segment = (start, (segment_end - start) as usize);
        start = segment_end;
        Some(segment)
    })
}

fn result(outcome: Result<(), c_long>) -> c_long {
    outcome.err().unwrap_or(0)
}

/// The priority in a send's `port_priority`.
fn priority_of(port_priority: u32) -> u32 {
    (port_priority & !lite::sys::SEND_NONBLOCK) >> 16
}

impl Kernel for FakeKernel {
    kernel_calls!(via transfer_call: transfers);
    kernel_calls!(via rpc_call_with_reply: calls_with_reply);
    kernel_calls!((shared.rpc) with rpc_call: rpc);

    unsafe fn join(&self, cm_ip: *const c_char, _cm_port: u32, _ib_port: u32) -> c_long {
        let unprivileged = !self.may_administer() && !self.defects.join_without_privilege;
        fail_if!(unprivileged, libc::EPERM);
        fail_if!((cm_ip as usize) < FIRST_MAPPED_ADDRESS, libc::EFAULT);
        // SAFETY: callers pass NUL-terminated strings; reading stops at the
        // NUL or after MAX_IP_LEN bytes.
        let len = unsafe { libc::strnlen(cm_ip, MAX_IP_LEN) };
        fail_if!(len == MAX_IP_LEN, libc::EINVAL);
        // SAFETY: the `len` bytes before the NUL were just read.
        let text = unsafe { std::slice::from_raw_parts(cm_ip.cast::<u8>(), len) };
        let valid = std::str::from_utf8(text).is_ok_and(|t| t.parse::<Ipv4Addr>().is_ok());
        fail_if!(!valid, libc::EINVAL);
        self.await_watchers();
        let mut process = lock(&self.process);
        fail_if!(process.joined, libc::EISCONN);
        fail_if!(self.defects.refuse_join, libc::ECONNREFUSED);
        process.joined = true;
        // A node that left or failed comes back with its id.
        let mut cluster = self.cluster_state();
        if cluster.gone.remove(&self.id) {
            cluster.failures.rejoined(self.id);
        }
        self.id.into()
    }

    fn leave(&self, flags: u32) -> c_long {
        let unprivileged = !self.may_administer() && !self.defects.leave_without_privilege;
        fail_if!(unprivileged, libc::EPERM);
        let unknown_flags = flags & !LEAVE_FORCE != 0;
        fail_if!(
            unknown_flags && !self.defects.leave_accepts_unknown_flags,
            libc::EINVAL
        );
        self.await_watchers();
        let mut process = lock(&self.process);
        fail_if!(!process.joined, libc::ENOTCONN);
        let mut cluster = self.cluster_state();
        or_return!(self.move_held_chunks(&mut cluster, flags & LEAVE_FORCE != 0));
        cluster.failures.changed();
        // Handles of the old membership are gone, even those a defect keeps
        // (but for a fenced node's, under `handles_survive_rejoin`).
        let fenced = cluster.failures.failed.contains(&self.id);
        if !(fenced && self.defects.handles_survive_rejoin) {
            self.release_handles(&mut process, &mut cluster);
        }
        process.joined = false;
        cluster.gone.insert(self.id);
        // Locks are charged for as long as the node is a member.
        cluster.quotas.entry(self.id).or_default().forget_locks();
        drop(cluster);
        drop(process);
        let me = self.process_id;
        self.shared
            .sync
            .holders_gone(|owner| owner.process == me, true, self.defects);
        0
    }

    fn get_node_id(&self) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        self.id.into()
    }

    fn get_total_node(&self) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let mut cluster = self.cluster_state();
        let gone = cluster.gone.len() as u32 + cluster.failures.size_read(self.id, self.defects);
        if cluster.failures.watched {
            self.shared.changed.notify_all();
        }
        self.nodes.saturating_sub(gone).into()
    }

    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let invalid = node >= MAX_NODES || size == 0 || size > MAX_LMR_SIZE;
        fail_if!(invalid || flags & !ALLOC_ATOMIC != 0, libc::EINVAL);
        let atomic = flags & ALLOC_ATOMIC != 0;
        fail_if!(atomic && size != 8, libc::EINVAL);
        let unreachable = node > self.nodes || (node == NODE_SPREAD && self.nodes < 2);
        fail_if!(unreachable, libc::EHOSTUNREACH);
        let perms = PERM_READ | PERM_WRITE | PERM_SHARE | if atomic { PERM_ATOMIC } else { 0 };
        let (mut process, mut cluster) = self.locked();
        let chunks = self.chunk_holders(&cluster, node, size);
        let reachable = if node == NODE_SPREAD {
            !chunks.contains(&0)
        } else {
            Self::is_member(&cluster, node, self.nodes)
        };
        fail_if!(!reachable, libc::EHOSTUNREACH);
        let backing = Backing::Owned(vec![0; size as usize]);
        or_return!(self.check_quota(&cluster, backing.charge()));
        let served = quotas::serving_allows(&cluster, self.id, &chunks, size);
        fail_if!(!served && !self.defects.ignore_quotas, libc::EDQUOT);
        self.create_lmr(&mut process, &mut cluster, backing, perms, chunks, password)
            .1
    }

    fn free(&self, handle: u64) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let (mut process, mut cluster) = self.locked();
        let entry = or_return!(Self::live_handle(&process, handle, false));
        or_return!(self.check_grant(&entry, None, PERM_ADMIN));
        if entry.kind == Kind::Mapping {
            // Only reachable with ignore_permissions: drop the mapping.
            self.unmap(&mut process, &mut cluster, handle, entry.lmr);
        } else {
            self.release(&mut process, &mut cluster, handle);
        }
        0
    }

    fn dist_barrier(&self, num: u32) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        fail_if!(num == 0 || num > MAX_NODES, libc::EINVAL);
        if !self.connected {
            return 0;
        }
        let round = {
            let mut process = lock(&self.process);
            process.barrier_round += 1;
            process.barrier_round
        };
        let failing = self.defects.barrier_fails_in_round == Some(round);
        fail_if!(failing, libc::EHOSTDOWN);
        let mut cluster = self.cluster_state();
        *cluster.rounds.entry(round).or_default() += 1;
        self.shared.changed.notify_all();
        let missing = |cluster: &Cluster| cluster.rounds.get(&round).copied().unwrap_or(0) < num;
        let (cluster, _) = self
            .shared
            .changed
            .wait_timeout_while(cluster, BARRIER_TIMEOUT, |cluster| {
                missing(cluster) && !self.needs_failed(cluster, num)
            })
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !missing(&cluster) {
            return 0;
        }
        let lost = self.needs_failed(&cluster, num);
        err(if lost {
            libc::EHOSTDOWN
        } else {
            libc::ETIMEDOUT
        })
    }

    fn remote_memset(&self, handle: u64, offset: u64, size: u64, byte: u32) -> c_long {
        self.counted(Operation::Memset, PRIORITY_NONE, size, || {
            result(self.memset(handle, offset, size, byte))
        })
    }

    fn memcpy(&self, src: u64, src_offset: u64, dst: u64, dst_offset: u64, size: u64) -> c_long {
        self.counted(Operation::Memcpy, PRIORITY_NONE, size, || {
            result(self.copy((src, src_offset), (dst, dst_offset), size, false))
        })
    }

    fn memmove(&self, src: u64, src_offset: u64, dst: u64, dst_offset: u64, size: u64) -> c_long {
        self.counted(Operation::Memcpy, PRIORITY_NONE, size, || {
            result(self.copy((src, src_offset), (dst, dst_offset), size, true))
        })
    }

    unsafe fn wrap_alloc(
        &self,
        data: *const c_void,
        size: u64,
        name: u64,
        password: u64,
    ) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        fail_if!(size == 0 || size > MAX_LMR_SIZE, libc::EINVAL);
        fail_if!((data as usize) < FIRST_MAPPED_ADDRESS, libc::EFAULT);
        let (mut process, mut cluster) = self.locked();
        fail_if!(cluster.names.contains_key(&(self.id, name)), libc::EEXIST);
        // SAFETY: the caller guarantees `size` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) };
        let backing = Backing::Owned(bytes.to_vec());
        or_return!(self.check_quota(&cluster, backing.charge().with(Resource::Names, 1)));
        let perms = PERM_READ | PERM_WRITE | PERM_SHARE;
        let chunks = self.chunk_holders(&cluster, self.id, size);
        let (lmr, handle) =
            self.create_lmr(&mut process, &mut cluster, backing, perms, chunks, password);
        self.publish(&mut cluster, name, lmr, perms, password);
        handle
    }

    fn add_ask_mr_table(&self, name: u64, handle: u64, permission: u64, password: u64) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        fail_if!(permission & !SHAREABLE != 0, libc::EINVAL);
        let (process, mut cluster) = self.locked();
        let entry = or_return!(Self::live_handle(&process, handle, false));
        fail_if!(entry.kind == Kind::Mapping, libc::EINVAL);
        or_return!(self.check_grant(&entry, Some(password), PERM_SHARE));
        fail_if!(cluster.names.contains_key(&(self.id, name)), libc::EEXIST);
        let charge = Usage::default().with(Resource::Names, 1);
        or_return!(self.check_quota(&cluster, charge));
        self.publish(&mut cluster, name, entry.lmr, permission, entry.password);
        0
    }

    fn ask_lmr(&self, node: u32, name: u64, permission: u64, password: u64) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let unknown_node = node == 0 || node >= MAX_NODES;
        fail_if!(permission & !ALL_PERMS != 0 || unknown_node, libc::EINVAL);
        fail_if!(node > self.nodes, libc::EHOSTUNREACH);
        let (mut process, mut cluster) = self.locked();
        let published = or_return!(cluster.names.get(&(node, name)), libc::ENOENT);
        let wrong_password = published.password != password;
        fail_if!(
            wrong_password && !self.defects.ignore_password,
            libc::EACCES
        );
        let lmr_perms = cluster.lmrs.get(&published.lmr).map_or(0, |lmr| lmr.perms);
        let mut perms = permission & published.perms & lmr_perms & !PERM_ADMIN;
        if self.defects.ignore_permissions {
            perms = permission & !PERM_ADMIN;
        }
        fail_if!(perms == 0, libc::EPERM);
        let lmr = published.lmr;
        cluster.map(self.id, lmr);
        Self::new_handle(&mut process, lmr, perms, password, Kind::Mapping)
    }

    fn umap_lmr(&self, handle: u64) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let (mut process, mut cluster) = self.locked();
        match process.handles.get(&handle) {
            Some(entry) if entry.kind == Kind::Mapping => {
                let lmr = entry.lmr;
                self.unmap(&mut process, &mut cluster, handle, lmr);
                0
            }
            Some(entry) if !entry.freed => err(libc::EINVAL),
            _ => err(libc::EBADF),
        }
    }

    unsafe fn register_lmr(
        &self,
        buf: *mut c_void,
        size: u64,
        permission: u64,
        password: u64,
    ) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        let bad_size = size == 0 || size > MAX_REGISTER_SIZE;
        fail_if!(permission & !SHAREABLE != 0 || bad_size, libc::EINVAL);
        fail_if!((buf as usize) < FIRST_MAPPED_ADDRESS, libc::EFAULT);
        let (mut process, mut cluster) = self.locked();
        let (address, len) = (buf as usize, size as usize);
        let backing = Backing::User { address, len };
        or_return!(self.check_quota(&cluster, backing.charge()));
        or_return!(self.check_memlock(&process, &cluster, backing.charge()));
        let chunks = Vec::new();
        self.create_lmr(
            &mut process,
            &mut cluster,
            backing,
            permission,
            chunks,
            password,
        )
        .1
    }

    fn deregister_lmr(&self, handle: u64) -> c_long {
        // Deregistering an allocated LMR is freeing it; mappings need ADMIN
        // either way.
        self.free(handle)
    }

    fn async_wait(&self, op: u64, flags: u32) -> c_long {
        fail_if!(flags & !ASYNC_NOWAIT != 0, libc::EINVAL);
        let mut process = lock(&self.process);
        let entry = or_return!(process.ops.get_mut(&op), libc::EINVAL);
        if flags & ASYNC_NOWAIT != 0 && entry.pending_polls > 0 {
            entry.pending_polls -= 1;
            return err(libc::EAGAIN);
        }
        let entry = or_return!(process.ops.remove(&op), libc::EINVAL);
        drop(process);
        Self::reap(entry)
    }

    fn fence(&self) -> c_long {
        let ops = std::mem::take(&mut lock(&self.process).ops);
        let mut first = 0;
        for (_, op) in ops {
            let ret = Self::reap(op);
            // A call's reply length is success too.
            if first == 0 && ret < 0 {
                first = ret;
            }
        }
        first
    }

    unsafe fn get_stats(&self, stats: *mut LiteStats, size: u64) -> c_long {
        fail_if!(size < 8, libc::EINVAL);
        fail_if!((stats as usize) < FIRST_MAPPED_ADDRESS, libc::EFAULT);
        let counters = self.stats();
        let len = (size as usize).min(std::mem::size_of::<LiteStats>());
        // SAFETY: the caller guarantees `size` writable bytes at `stats`;
        // at most the struct's size is copied.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(&counters).cast::<u8>(),
                stats.cast::<u8>(),
                len,
            );
        }
        0
    }

    unsafe fn register_application(
        &self,
        port: u32,
        max_size: u64,
        name: *const c_char,
        name_len: u64,
    ) -> c_long {
        self.rpc_call(|who| {
            let quota = if self.defects.ignore_quotas {
                Limit::Unlimited
            } else {
                self.own_limits(&self.cluster_state())
                    .get(Resource::RpcPorts)
            };
            // SAFETY: the caller upholds the system call's contract.
            unsafe {
                self.shared
                    .rpc
                    .register_within(who, port, max_size, name as usize, name_len, quota)
            }
        })
    }

    unsafe fn send(&self, node: u32, port_priority: u32, msg: *const c_void, size: u64) -> c_long {
        self.counted(Operation::RpcSend, priority_of(port_priority), size, || {
            // SAFETY: the caller upholds the system call's contract.
            self.rpc_call(|who| unsafe {
                self.shared.rpc.send(who, node, port_priority, msg, size)
            })
        })
    }

    unsafe fn reply_message(&self, buf: *const c_void, size: u64, descriptor: u64) -> c_long {
        self.counted(Operation::RpcReply, PRIORITY_NONE, size, || {
            // SAFETY: the caller upholds the system call's contract.
            self.rpc_call(|who| unsafe { self.shared.rpc.reply(who, buf, size, descriptor) })
        })
    }

    unsafe fn fetch_add(&self, handle: u64, old: *mut u64, value: u64, priority: u32) -> c_long {
        self.counted(Operation::Atomic, priority, 8, || {
            result(self.atomic(handle, old, priority, |v| v.wrapping_add(value)))
        })
    }

    unsafe fn compare_swp(
        &self,
        handle: u64,
        old: *mut u64,
        expected: u64,
        new_value: u64,
        priority: u32,
    ) -> c_long {
        self.counted(Operation::Atomic, priority, 8, || {
            let swap = |v| if v == expected { new_value } else { v };
            result(self.atomic(handle, old, priority, swap))
        })
    }

    unsafe fn create_lock(&self, home: u32, lock: *mut LiteLock) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        or_return!(self.check_home(home));
        fail_if!((lock as usize) < FIRST_MAPPED_ADDRESS, libc::EFAULT);
        let mut cluster = self.cluster_state();
        let charge = Usage::default().with(Resource::Locks, 1);
        or_return!(self.check_quota(&cluster, charge));
        let number = or_return!(self.shared.sync.create(home));
        let node_quotas = cluster.quotas.entry(self.id).or_default();
        node_quotas.charge_lock(self.uid);
        drop(cluster);
        or_return!(Self::store_lock(lock, LiteLock { home, number }));
        number.into()
    }

    unsafe fn ask_lock(&self, home: u32, number: u32, lock: *mut LiteLock) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        or_return!(self.check_home(home));
        fail_if!(!self.shared.sync.exists(home, number), libc::ENOENT);
        result(Self::store_lock(lock, LiteLock { home, number }))
    }

    unsafe fn lock(&self, lock: *const LiteLock) -> c_long {
        // Locks take no priority: the kernel counts them under "none".
        self.counted_as(Operation::Lock, Some(Priority::None), 0, || {
            let key = or_return!(self.lock_key(lock));
            fail_if!(self.has_failed(key.0), libc::EHOSTDOWN);
            let owner = sync::Owner::current(self.id, self.process_id);
            self.shared.sync.lock(owner, key, self.defects)
        })
    }

    unsafe fn unlock(&self, lock: *const LiteLock) -> c_long {
        let key = or_return!(self.lock_key(lock));
        let owner = sync::Owner::current(self.id, self.process_id);
        self.shared.sync.unlock(owner, key, self.defects)
    }

    fn set_priority(&self, priority: u32) -> c_long {
        fail_if!(!self.joined(), libc::ENOTCONN);
        fail_if!(Priority::from_raw(priority).is_none(), libc::EINVAL);
        let previous = std::mem::replace(&mut lock(&self.process).priority, priority);
        previous.into()
    }

    fn process_of_user_and_group(&self, uid: u32, gid: u32) -> Option<Self> {
        let mut kernel = self.other_process();
        kernel.privileged = false;
        kernel.uid = uid;
        kernel.gid = gid;
        Some(kernel)
    }

    fn set_memlock_limit(&self, bytes: Option<u64>) -> Option<std::io::Result<u64>> {
        let wanted = bytes.unwrap_or(quotas::MEMLOCK_HARD_LIMIT);
        if wanted > quotas::MEMLOCK_HARD_LIMIT && !self.privileged {
            return Some(Err(std::io::Error::from_raw_os_error(libc::EPERM)));
        }
        lock(&self.process).memlock_limit = wanted;
        Some(Ok(wanted))
    }

    fn read_debugfs(&self, name: &str) -> Option<std::io::Result<String>> {
        let text = match name {
            STATS_FILE => Ok(self.shared.sync.stats_text(self.id, self.stats())),
            QUOTAS_FILE => Ok(self.quotas_text()),
            ADMIN_GROUP_FILE => Ok(self.admin_group_text()),
            MEMBERSHIP_FILE => Ok(self.membership_text()),
            _ => self.shared.sync.read_qos(self.id, name),
        };
        Some(text.map_err(std::io::Error::from_raw_os_error))
    }

    fn write_debugfs(&self, name: &str, text: &str) -> Option<std::io::Result<()>> {
        let written = if name == STATS_FILE {
            Err(libc::EACCES)
        } else if name == ADMIN_GROUP_FILE {
            self.write_admin_group(text)
        } else if !self.may_administer() {
            // LITE's settings need CAP_NET_ADMIN or the admin group.
            Err(libc::EPERM)
        } else if name == QUOTAS_FILE {
            self.write_quotas(text)
        } else {
            self.shared.sync.write_qos(self.id, name, text)
        };
        Some(written.map_err(std::io::Error::from_raw_os_error))
    }
}

impl Drop for FakeKernel {
    /// The process exits: the kernel closes its ports, fails the callers
    /// of the requests it received but did not answer, and releases the
    /// locks it holds.
    fn drop(&mut self) {
        self.release_everything();
        self.shared.rpc.exit(&self.caller());
        let me = self.process_id;
        let exited = |owner: &sync::Owner| owner.process == me;
        self.shared.sync.holders_gone(exited, false, self.defects);
    }
}
