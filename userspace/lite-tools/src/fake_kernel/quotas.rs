//! Quotas in the model (see "Quotas" in the uapi header): each node's
//! limits, set through its quotas file, and what each user holds there.
//!
//! What a user holds is not counted separately but found in the model's
//! state whenever it is needed: the LMRs its processes created on the
//! node (allocated and wrapped ones count towards `remote_memory`,
//! registered ones towards `pinned_memory`, all towards `lmrs`), the
//! names they published there, their RPC ports (counted by the RPC
//! model), and the locks they created, the one thing kept here: locks are
//! never destroyed, so they stay charged until the node leaves. What goes
//! when a process frees, deregisters or exits is thereby uncharged at
//! once, and nothing a refused call did not create can be charged.
//!
//! The bytes a node holds for another node's LMRs are found the same way,
//! from the chunks each node holds.

use std::collections::BTreeMap;

use lite::sys::{CHUNK_SIZE, MAX_NODES};

use super::Cluster;
use crate::debugfs::quotas::{Command, Limit, Limits, QuotasFile, Resource, Usage, DEFAULT_LIMITS};

/// Each node's memory; by default each other node's LMRs may hold half.
pub(super) const NODE_RAM: u64 = 16 << 30;

/// Linux's default since 5.16, also the soft limit until lowered.
pub(super) const MEMLOCK_HARD_LIMIT: u64 = 8 << 20;

/// Registrations pin, and are charged, whole pages.
pub(super) const PAGE: u64 = 4096;

/// One node's limits, and the locks its users created.
pub(super) struct NodeQuotas {
    defaults: Limits,
    users: BTreeMap<u32, Limits>,
    node_default: Limit,
    nodes: BTreeMap<u32, Limit>,
    /// By uid.
    locks: BTreeMap<u32, u64>,
}

impl Default for NodeQuotas {
    fn default() -> Self {
        NodeQuotas {
            defaults: DEFAULT_LIMITS,
            users: BTreeMap::new(),
            node_default: Limit::At(NODE_RAM / 2),
            nodes: BTreeMap::new(),
            locks: BTreeMap::new(),
        }
    }
}

impl NodeQuotas {
    /// Its own, or the defaults.
    pub(super) fn limits_of(&self, uid: u32) -> Limits {
        self.users.get(&uid).copied().unwrap_or(self.defaults)
    }

    pub(super) fn serving_limit(&self, node: u32) -> Limit {
        self.nodes.get(&node).copied().unwrap_or(self.node_default)
    }

    pub(super) fn charge_lock(&mut self, uid: u32) {
        *self.locks.entry(uid).or_default() += 1;
    }

    /// The node left: the locks of its membership are gone.
    pub(super) fn forget_locks(&mut self) {
        self.locks.clear();
    }

    /// `EINVAL` for a node id out of range.
    pub(super) fn apply(&mut self, command: Command) -> Result<(), i32> {
        let check_node = |node: u32| {
            let valid = (1..MAX_NODES).contains(&node);
            valid.then_some(node).ok_or(libc::EINVAL)
        };
        match command {
            Command::Defaults(keys) => {
                for (resource, limit) in keys {
                    self.defaults.set(resource, limit);
                }
            }
            Command::User(uid, keys) => {
                let mut limits = self.limits_of(uid);
                for (resource, limit) in keys {
                    limits.set(resource, limit);
                }
                self.users.insert(uid, limits);
            }
            Command::UserDefault(uid) => {
                self.users.remove(&uid);
            }
            Command::NodeDefault(limit) => self.node_default = limit,
            Command::Node(node, limit) => {
                self.nodes.insert(check_node(node)?, limit);
            }
            Command::NodeReset(node) => {
                self.nodes.remove(&check_node(node)?);
            }
        }
        Ok(())
    }
}

/// Each user's holdings on `node` but RPC ports (the RPC model counts those).
fn usage_on(cluster: &Cluster, node: u32) -> BTreeMap<u32, Usage> {
    let mut usage: BTreeMap<u32, Usage> = BTreeMap::new();
    let live = cluster
        .lmrs
        .values()
        .filter(|lmr| lmr.creator == node && !lmr.released);
    for lmr in live {
        let held = usage.entry(lmr.uid).or_default();
        *held = held.plus(&lmr.backing.charge());
    }
    for ((_, _), published) in cluster.names.range((node, 0)..=(node, u64::MAX)) {
        let held = usage.entry(published.uid).or_default();
        held.set(Resource::Names, held.get(Resource::Names) + 1);
    }
    if let Some(quotas) = cluster.quotas.get(&node) {
        for (&uid, &locks) in &quotas.locks {
            usage.entry(uid).or_default().set(Resource::Locks, locks);
        }
    }
    usage
}

pub(super) fn usage_of(cluster: &Cluster, node: u32, uid: u32, ports: u64) -> Usage {
    usage_on(cluster, node)
        .remove(&uid)
        .unwrap_or_default()
        .with(Resource::RpcPorts, ports)
}

/// Only what is charged is checked: a limit below what the user holds
/// refuses further charges only.
pub(super) fn allows(limits: &Limits, held: &Usage, charge: &Usage) -> bool {
    Resource::ALL.into_iter().all(|resource| {
        charge.get(resource) == 0
            || limits
                .get(resource)
                .allows(held.get(resource).saturating_add(charge.get(resource)))
    })
}

fn chunk_bytes(size: u64, index: usize) -> u64 {
    let start = index as u64 * CHUNK_SIZE;
    size.saturating_sub(start).min(CHUNK_SIZE)
}

pub(super) fn served(cluster: &Cluster, holder: u32, owner: u32) -> u64 {
    cluster
        .lmrs
        .values()
        .filter(|lmr| lmr.creator == owner && !lmr.released)
        .map(|lmr| {
            let size = lmr.len() as u64;
            (0..lmr.chunks.len())
                .filter(|&i| lmr.chunks[i] == holder)
                .map(|i| chunk_bytes(size, i))
                .sum::<u64>()
        })
        .sum()
}

/// Whether the holders of a new LMR's `chunks` allow it: each may hold
/// only so much for each other node.
pub(super) fn serving_allows(cluster: &Cluster, owner: u32, chunks: &[u32], size: u64) -> bool {
    let mut added: BTreeMap<u32, u64> = BTreeMap::new();
    for (index, &holder) in chunks.iter().enumerate() {
        if holder != owner {
            *added.entry(holder).or_default() += chunk_bytes(size, index);
        }
    }
    added.into_iter().all(|(holder, bytes)| {
        let limit = cluster.quotas.get(&holder).map_or_else(
            || NodeQuotas::default().serving_limit(owner),
            |q| q.serving_limit(owner),
        );
        limit.allows(served(cluster, holder, owner).saturating_add(bytes))
    })
}

pub(super) fn pages_spanned(address: usize, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = address as u64 / PAGE;
    let last = (address as u64 + len as u64 - 1) / PAGE;
    last - first + 1
}

/// What `node` serves other nodes is listed only while it is a member.
pub(super) fn file_text(
    cluster: &Cluster,
    node: u32,
    nodes: u32,
    ports_by_uid: &BTreeMap<u32, u64>,
    member: bool,
) -> String {
    let default = NodeQuotas::default();
    let quotas = cluster.quotas.get(&node).unwrap_or(&default);
    let mut usage = usage_on(cluster, node);
    for (&uid, &ports) in ports_by_uid {
        usage.entry(uid).or_default().set(Resource::RpcPorts, ports);
    }
    usage.retain(|_, held| !held.is_empty());
    let served = if member {
        (1..=nodes)
            .filter(|&other| other != node)
            .map(|other| (other, served(cluster, node, other)))
            .filter(|&(_, bytes)| bytes > 0)
            .collect()
    } else {
        BTreeMap::new()
    };
    QuotasFile {
        defaults: quotas.defaults,
        users: quotas.users.clone(),
        node_default: quotas.node_default,
        nodes: quotas.nodes.clone(),
        usage,
        served,
    }
    .to_string()
}
