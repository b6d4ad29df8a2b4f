// SPDX-License-Identifier: GPL-2.0

//! The node: the RDMA devices LITE may use and, while joined, the cluster.
//!
//! There is one [`Node`] for the whole kernel. It is created when LITE
//! initialises and freed when LITE unloads, after [`Node::shut_down`] and
//! once nothing can use it any more. A node joins a cluster,
//! may leave it (or be cut off from it) and join again: each membership
//! has its own [`Cluster`], which callers hold for the length of one call,
//! so a call under way when the node leaves finishes on the cluster it
//! started on, while later calls get `ENOTCONN`.

use kernel::{
    bindings, new_mutex, new_spinlock,
    prelude::*,
    sync::{Arc, Mutex, SpinLock},
};

use super::{
    cluster::Cluster,
    core::device::DeviceContext,
    membership::{self, Membership},
    node_id::NodeId,
    poller,
    quota::Quotas,
};
use crate::{
    errno,
    sys::{module_param::DeviceParam, ram, secret::Secret, set_once::SetOnce},
    verbs::{ClientHandler, Device, PortConfig, ProtectionDomain},
};

struct NodeState {
    /// The RDMA devices, in the order they appeared; a device that went
    /// away leaves `None` until the next one appears.
    devices: KVec<Option<Arc<DeviceContext>>>,
    /// A join or a leave is under way.
    busy: bool,
    /// LITE is unloading: the node joins no cluster any more.
    unloading: bool,
    /// The id this node had in its last cluster, asked back when it joins
    /// again (0 before the first join).
    last_id: NodeId,
    /// The manager address and port, the RDMA port and the cluster secret
    /// of the last join, for joining again on its own after being cut off.
    last_join: Option<([u8; 4], u16, u32, Secret)>,
    /// What a unit built on LITE's kernel API does before the node leaves.
    leave_hook: Option<Arc<dyn LeaveHook>>,
}

/// Work a unit built on LITE's kernel API (LITE-DSM) does before this node
/// leaves its cluster with `lite_leave` or `liteapi_leave`, while it is
/// still a member.
pub(crate) trait LeaveHook: Send + Sync {
    /// Runs with none of LITE's locks held.
    fn before_leave(&self);
}

/// A membership: the cluster and the link to its manager.
#[derive(Clone)]
struct Joined {
    cluster: Arc<Cluster>,
    membership: Arc<Membership>,
}

/// The node-wide state of LITE.
#[pin_data]
pub(crate) struct Node {
    /// Lock class `lite:node`: see the lock order in [`crate::internal::core`].
    #[pin]
    state: Mutex<NodeState>,
    /// The current membership; taken and read in a few instructions, so
    /// every call can afford to look.
    #[pin]
    joined: SpinLock<Option<Joined>>,
    /// What users and other nodes may hold; outlives memberships.
    quotas: Arc<Quotas>,
}

/// The node state, from LITE's initialisation until it unloads (when the
/// module's exit takes it back, once nothing can use it).
pub(crate) static NODE: SetOnce<Node> = SetOnce::new();

/// The node state.
///
/// # Errors
///
/// `ENODEV` before LITE has initialised.
pub(crate) fn node() -> Result<&'static Node> {
    NODE.get().ok_or(ENODEV)
}

impl Node {
    /// Creates the node state; called once when LITE initialises.
    pub(crate) fn init() -> Result {
        // Each other node's LMRs may hold half of this node's RAM.
        let quotas = Quotas::new(ram::total_ram_bytes() / 2)?;
        let node = Arc::pin_init(
            pin_init!(Node {
                state <- new_mutex!(
                    NodeState {
                        devices: KVec::new(),
                        busy: false,
                        unloading: false,
                        last_id: NodeId::NONE,
                        last_join: None,
                        leave_hook: None,
                    },
                    "lite:node"
                ),
                joined <- new_spinlock!(None, "lite:joined"),
                quotas,
            }),
            GFP_KERNEL,
        )?;
        NODE.set(node).map_err(|_| EBUSY)?;
        Ok(())
    }

    /// Sets what runs before each `lite_leave` (see [`LeaveHook`]).
    pub(crate) fn set_leave_hook(&self, hook: Arc<dyn LeaveHook>) {
        let replaced = self.state.lock().leave_hook.replace(hook);
        drop(replaced);
    }

    /// Runs the [`LeaveHook`], if one is set.
    pub(crate) fn run_leave_hook(&self) {
        let hook = self.state.lock().leave_hook.clone();
        if let Some(hook) = hook {
            hook.before_leave();
        }
    }

    /// Takes the node out of its cluster for good, as LITE unloads: it
    /// leaves as `lite_leave` does (forcing the leave if chunks held for
    /// other nodes cannot move), or ends a membership that was cut off; it
    /// joins no cluster afterwards. Called once no system call can start.
    pub(crate) fn shut_down(&self) {
        self.state.lock().unloading = true;
        self.leave_for_good(None, "LITE unloads");
    }

    /// Takes the node out of its cluster, if its membership runs on
    /// `device` (any membership for `None`): it leaves as `lite_leave`
    /// does, forcing the leave if chunks held for other nodes cannot move
    /// (what forces this cannot wait), or ends a membership that was cut
    /// off. The node does not join again on its own afterwards.
    fn leave_for_good(&self, device: Option<&Arc<DeviceContext>>, why: &str) {
        // A join or a rejoin after a cut-off may be under way: let it end
        // (it may have joined, in which case that membership is left below).
        while self.begin_change().is_err() {
            crate::sys::sched::sleep_uninterruptible_ms(CHANGE_POLL_MS);
        }
        let current = {
            let mut joined = self.joined.lock();
            let affected = joined.as_ref().is_some_and(|j| {
                device.map_or(true, |device| Arc::ptr_eq(j.cluster.core.device(), device))
            });
            if affected {
                joined.take()
            } else {
                None
            }
        };
        let current_ended = current.is_some();
        let mut last_id = None;
        if let Some(current) = current {
            let node_id = current.cluster.core.node_id();
            let left = current
                .membership
                .leave(false)
                .or_else(|_| current.membership.leave(true));
            match left {
                Ok(()) => {
                    pr_info!("node {} left the cluster: {}\n", node_id, why);
                    last_id = Some(node_id);
                }
                // Cut off: there is no cluster to tell.
                Err(_) => current.membership.stop(),
            }
        }
        if current_ended || device.is_none() {
            self.state.lock().last_join = None;
        }
        self.end_change(last_id);
    }

    /// The node's quotas.
    pub(crate) fn quotas(&self) -> &Arc<Quotas> {
        &self.quotas
    }

    fn joined(&self) -> Result<Joined> {
        self.joined.lock().clone().ok_or_else(errno::ENOTCONN)
    }

    /// The joined cluster.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` if the node is not a member of a cluster (never joined,
    /// left, or leaving).
    pub(crate) fn cluster(&self) -> Result<Arc<Cluster>> {
        Ok(self.joined()?.cluster)
    }

    /// The link to the cluster manager.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` as for [`Node::cluster`].
    pub(crate) fn membership(&self) -> Result<Arc<Membership>> {
        Ok(self.joined()?.membership)
    }

    /// Marks a join or leave under way; `EALREADY` if one is.
    fn begin_change(&self) -> Result<ChangeStart> {
        let mut state = self.state.lock();
        if state.busy {
            return Err(errno::EALREADY());
        }
        state.busy = true;
        Ok(ChangeStart {
            unloading: state.unloading,
            last_id: state.last_id,
        })
    }

    /// Ends what [`Node::begin_change`] began; `last_id` is the id to ask
    /// back at the next join, if it changed.
    fn end_change(&self, last_id: Option<NodeId>) {
        let mut state = self.state.lock();
        state.busy = false;
        if let Some(id) = last_id {
            state.last_id = id;
        }
    }

    /// `lite_join`: joins the cluster managed at `addr:port` using port
    /// `ib_port` (the first active one for 0) of the RDMA device the
    /// `device` module parameter names, or of the first device with such a
    /// port if it names none.
    ///
    /// A node that left joins again as the next incarnation of the id it
    /// had; so does one that was cut off (its old membership ends first).
    ///
    /// # Errors
    ///
    /// `EISCONN` if already a member, `EALREADY` while another join or a
    /// leave runs, `ENODEV` without a usable device or port (or if the
    /// device the parameter names does not exist), connection
    /// errors from the manager (`EADDRINUSE` while the manager still counts
    /// an earlier incarnation of this node as alive), `EPROTO` if the
    /// manager misbehaves, `ENOKEY` if the caller's keyrings hold no
    /// cluster secret (the "user" key `lite:cluster`), `EKEYREJECTED` if the
    /// manager and this node do not hold the same secret.
    pub(crate) fn join(&self, addr: [u8; 4], port: u16, ib_port: u32) -> Result<NodeId> {
        if self
            .joined()
            .is_ok_and(|joined| !joined.membership.is_fenced())
        {
            return Err(errno::EISCONN());
        }
        // Read in the caller's context: only its keyrings hold the secret.
        // Without a device there is nothing to join with, key or not.
        let secret = Secret::from_keyring().map_err(|e| {
            if self.state.lock().devices.iter().any(Option::is_some) {
                e
            } else {
                ENODEV
            }
        })?;
        self.join_using(addr, port, ib_port, secret)
    }

    /// [`Node::join`] with the cluster secret at hand.
    fn join_using(&self, addr: [u8; 4], port: u16, ib_port: u32, secret: Secret) -> Result<NodeId> {
        let change = self.begin_change()?;
        let result = if change.unloading {
            // A rejoin after a cut-off may still try as LITE unloads.
            Err(ENODEV)
        } else {
            self.choose_device(ib_port)
                .and_then(|(device, port_config)| {
                    self.join_with(device, port_config, (addr, port), change.last_id, &secret)
                })
        };
        if result.is_ok() {
            self.state.lock().last_join = Some((addr, port, ib_port, secret));
        }
        self.end_change(result.as_ref().ok().copied());
        result
    }

    /// Joins again the cluster this node was cut off from, if it was (not
    /// if it left); called by the cut-off membership until it succeeds.
    fn rejoin_cut_off(&self) -> Result<NodeId> {
        let current = self.joined()?;
        if !current.membership.is_fenced() || current.membership.is_leaving() {
            return Err(errno::EALREADY());
        }
        let (addr, port, ib_port, secret) = self
            .state
            .lock()
            .last_join
            .clone()
            .ok_or_else(errno::ENOTCONN)?;
        if self.joined().is_ok_and(|j| !j.membership.is_fenced()) {
            return Err(errno::EISCONN());
        }
        self.join_using(addr, port, ib_port, secret)
    }

    /// Ends the membership of a node that was cut off, if it is one.
    fn replace_fenced(&self) -> Result {
        // Looked at outside the spinlock: the membership's state is behind
        // a mutex.
        let Ok(current) = self.joined() else {
            return Ok(());
        };
        if !current.membership.is_fenced() {
            return Err(errno::EISCONN());
        }
        let fenced = {
            let mut joined = self.joined.lock();
            // Only a join or leave replaces the membership, and this one
            // holds `busy`: it is still the one looked at.
            joined
                .as_ref()
                .is_some_and(|j| Arc::ptr_eq(&j.membership, &current.membership))
                .then(|| joined.take())
                .flatten()
        };
        if let Some(old) = fenced {
            old.membership.stop();
        }
        Ok(())
    }

    /// The device and port a join uses (see [`Node::join`]).
    fn choose_device(&self, ib_port: u32) -> Result<(Arc<DeviceContext>, PortConfig)> {
        let wanted = DeviceParam::read();
        let devices = {
            let state = self.state.lock();
            let mut devices = KVec::with_capacity(state.devices.len(), GFP_KERNEL)?;
            for device in state.devices.iter().flatten() {
                devices.push(device.clone(), GFP_KERNEL)?;
            }
            devices
        };
        let usable = |device: &Arc<DeviceContext>| {
            device
                .device
                .probe_port_or_first(ib_port)
                .map(|port| (device.clone(), port))
        };
        match wanted.name() {
            Some(name) => devices
                .iter()
                .find(|device| device.device.is_named(name))
                .ok_or(ENODEV)
                .and_then(usable),
            None => devices
                .iter()
                .find_map(|device| usable(device).ok())
                .ok_or(ENODEV),
        }
    }

    fn join_with(
        &self,
        device: Arc<DeviceContext>,
        port_config: PortConfig,
        manager: ([u8; 4], u16),
        rejoin_id: NodeId,
        secret: &Secret,
    ) -> Result<NodeId> {
        let (addr, port) = manager;
        let (channel, node_id, incarnation) =
            membership::hello(addr, port, &port_config, rejoin_id.get(), secret)?;
        let node_id = NodeId::new(node_id);
        // Only now that the manager took this node back does a membership
        // it was cut off from end: until then it keeps trying to rejoin.
        self.replace_fenced()?;
        let cluster = Cluster::new(node_id, device.clone(), port_config, self.quotas.clone())?;
        let membership = Membership::new(
            cluster.clone(),
            (addr, port),
            channel,
            secret.clone(),
            incarnation,
            rejoin_after_cut_off,
        )?;
        let joined = membership.complete_join().and_then(|total| {
            poller::start(cluster.clone())?;
            membership.keep()?;
            Ok(total)
        });
        let total = match joined {
            Ok(total) => total,
            Err(e) => {
                // Threads that started end, and the queue pairs with them.
                membership.stop();
                return Err(e);
            }
        };
        // Whatever was there is dropped after the spinlock is released
        // (dropping a membership may sleep).
        let _previous = self.joined.lock().replace(Joined {
            cluster,
            membership,
        });
        pr_info!(
            "joined as node {} (incarnation {}) of {} on {} port {}\n",
            node_id,
            incarnation,
            total,
            device.device.name(),
            port_config.port
        );
        Ok(node_id)
    }

    /// `lite_leave`: leaves the cluster gracefully. New calls get
    /// `ENOTCONN` at once, calls under way finish; chunks this node holds
    /// for other nodes' LMRs move to other nodes first; then everything
    /// this node's processes hold is released (mappings of its LMRs on
    /// other nodes are revoked) and the manager tells every other node.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` if not a member, `EALREADY` while a join or another
    /// leave runs, `ENOSPC` (or the error that stopped a move) if a chunk
    /// held for another node could not be moved and `force` is not set;
    /// the node then stays a member.
    pub(crate) fn leave(&self, force: bool) -> Result {
        self.joined()?;
        self.begin_change()?;
        let Some(current) = self.joined.lock().take() else {
            self.end_change(None);
            return Err(errno::ENOTCONN());
        };
        let node_id = current.cluster.core.node_id();
        match current.membership.leave(force) {
            Ok(()) => {
                // A node that left does not rejoin on its own: it needs
                // neither the manager's address nor the secret any more.
                self.state.lock().last_join = None;
                self.end_change(Some(node_id));
                pr_info!("node {} left the cluster\n", node_id);
                Ok(())
            }
            Err(e) => {
                // Nothing was released: the node stays a member (nothing
                // else can have taken the place: this leave holds `busy`).
                let _none = self.joined.lock().replace(current);
                self.end_change(None);
                Err(e)
            }
        }
    }
}

/// Joins the cluster again after this node was cut off from it (see
/// [`Membership::new`]).
fn rejoin_after_cut_off() {
    let Ok(node) = node() else {
        return;
    };
    if let Ok(id) = node.rejoin_cut_off() {
        pr_info!("node {} is a member again\n", id);
    }
}

/// How often [`Node::leave_for_good`] looks whether a join under way has
/// ended.
const CHANGE_POLL_MS: u32 = 10;

/// What a join or leave starts from.
struct ChangeStart {
    /// LITE is unloading: nothing may join.
    unloading: bool,
    last_id: NodeId,
}

/// LITE's IB client: keeps every RDMA device that appears, with a
/// protection domain on it, for joins to choose from.
pub(crate) struct LiteClient;

impl ClientHandler for LiteClient {
    fn add(device: Device) -> Result {
        let node = node()?;
        let device = Arc::new(device, GFP_KERNEL)?;
        let pd = Arc::new(ProtectionDomain::new(device.clone())?, GFP_KERNEL)?;
        let context = Arc::new(DeviceContext { device, pd }, GFP_KERNEL)?;
        pr_info!("RDMA device {} available\n", context.device.name());
        let mut state = node.state.lock();
        // Slots of devices that went away go now, keeping the order.
        let mut devices = KVec::with_capacity(state.devices.len() + 1, GFP_KERNEL)?;
        for present in state.devices.iter().flatten() {
            devices.push(Some(present.clone()), GFP_KERNEL)?;
        }
        devices.push(Some(context), GFP_KERNEL)?;
        state.devices = devices;
        Ok(())
    }

    fn remove(raw: *const bindings::ib_device) {
        let Ok(node) = node() else {
            return;
        };
        let removed = node
            .state
            .lock()
            .devices
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|d| d.device.is(raw)))
            .and_then(Option::take);
        if let Some(removed) = removed {
            node.leave_for_good(Some(&removed), "its RDMA device goes away");
            pr_info!("RDMA device {} gone\n", removed.device.name());
        }
    }
}
