// SPDX-License-Identifier: GPL-2.0

//! The node: which device LITE uses and, once joined, the cluster.
//!
//! There is one [`Node`] for the whole kernel. It is created when LITE
//! initialises and never freed (LITE is built in). The cluster it points to
//! after a successful join is never freed either: membership lasts for the
//! life of the node.

use kernel::{
    bindings, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{
    cluster::Cluster,
    core::device::DeviceContext,
    membership::{self, Membership},
    poller,
};
use crate::{
    errno,
    sys::set_once::SetOnce,
    verbs::{ClientHandler, Device, ProtectionDomain},
};

struct NodeState {
    device: Option<Arc<DeviceContext>>,
    joining: bool,
}

/// The node-wide state of LITE.
#[pin_data]
pub(crate) struct Node {
    #[pin]
    state: Mutex<NodeState>,
    /// The joined cluster; set when `join` succeeds, then never changed.
    cluster: SetOnce<Cluster>,
    /// The link to the cluster manager; set with `cluster`.
    membership: SetOnce<Membership>,
}

static NODE: SetOnce<Node> = SetOnce::new();

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
        let node = Arc::pin_init(
            pin_init!(Node {
                state <- new_mutex!(NodeState { device: None, joining: false }, "lite:node"),
                cluster: SetOnce::new(),
                membership: SetOnce::new(),
            }),
            GFP_KERNEL,
        )?;
        // Never released: see `node()`.
        NODE.set(node).map_err(|_| EBUSY)?;
        Ok(())
    }

    /// The joined cluster.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` if the node has not joined a cluster.
    pub(crate) fn cluster(&self) -> Result<&'static Cluster> {
        self.cluster.get().ok_or_else(errno::ENOTCONN)
    }

    /// The link to the cluster manager.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` if the node has not joined a cluster.
    pub(crate) fn membership(&self) -> Result<&'static Membership> {
        self.membership.get().ok_or_else(errno::ENOTCONN)
    }

    /// `lite_join`: joins the cluster managed at `addr:port` using `ib_port`.
    ///
    /// # Errors
    ///
    /// `EISCONN` if already joined, `EALREADY` while another join runs,
    /// `ENODEV` without a usable device or port, connection errors from the
    /// manager, `EPROTO` if the manager misbehaves.
    pub(crate) fn join(&self, addr: [u8; 4], port: u16, ib_port: u32) -> Result<u32> {
        if self.cluster().is_ok() {
            return Err(errno::EISCONN());
        }
        let device = {
            let mut state = self.state.lock();
            if state.joining {
                return Err(errno::EALREADY());
            }
            state.joining = true;
            state.device.clone()
        };
        let result = match device {
            Some(device) => self.join_with(device, addr, port, ib_port),
            None => Err(ENODEV),
        };
        self.state.lock().joining = false;
        result
    }

    fn join_with(
        &self,
        device: Arc<DeviceContext>,
        addr: [u8; 4],
        port: u16,
        ib_port: u32,
    ) -> Result<u32> {
        let port_config = device.device.probe_port(ib_port)?;
        let (stream, node_id, incarnation) = membership::hello(addr, port, &port_config)?;
        let cluster = Cluster::new(node_id, device, port_config)?;
        let membership = Membership::new(cluster.clone(), stream, node_id, incarnation)?;
        let total = membership.complete_join()?;
        poller::start(cluster.clone())?;
        membership.keep()?;
        // `joining` lets one join run at a time, and none after success, so
        // neither is set yet.
        if self.membership.set(membership).is_err() || self.cluster.set(cluster).is_err() {
            return Err(errno::EISCONN());
        }
        pr_info!(
            "joined as node {} (incarnation {}) of {}\n",
            node_id,
            incarnation,
            total
        );
        Ok(node_id)
    }
}

/// LITE's IB client: binds the first RDMA device that appears.
pub(crate) struct LiteClient;

impl ClientHandler for LiteClient {
    fn add(device: Device) -> Result {
        let node = node()?;
        let mut state = node.state.lock();
        if state.device.is_some() {
            // LITE drives one device per node.
            return Err(errno::EOPNOTSUPP());
        }
        let device = Arc::new(device, GFP_KERNEL)?;
        let pd = Arc::new(ProtectionDomain::new(device.clone())?, GFP_KERNEL)?;
        state.device = Some(Arc::new(DeviceContext { device, pd }, GFP_KERNEL)?);
        pr_info!("using RDMA device\n");
        Ok(())
    }

    fn remove(raw: *const bindings::ib_device) {
        let Ok(node) = node() else {
            return;
        };
        let mut state = node.state.lock();
        let ours = state.device.as_ref().is_some_and(|d| d.device.is(raw));
        if !ours {
            return;
        }
        if node.cluster().is_ok() {
            pr_err!(
                "the RDMA device of a joined node is going away; LITE on this node stops working\n"
            );
        }
        state.device = None;
    }
}
