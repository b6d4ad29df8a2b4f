// SPDX-License-Identifier: GPL-2.0

//! LITE's internal unit (the original `lite_internal`): the device, the
//! cluster and its connections, LMRs, RPC, control messages and the polling
//! thread. Everything here is safe Rust on top of [`crate::verbs`] and
//! [`crate::sys`].

mod address;
mod allocation;
pub(crate) mod async_io;
pub(crate) mod atomics;
mod barrier;
pub(crate) mod chunk;
mod chunk_memory;
mod cluster;
#[expect(unreachable_pub, reason = "shared with the userspace cluster manager")]
pub(crate) mod cm_wire;
mod control;
pub(crate) mod control_wire;
pub(crate) mod handle;
mod lmr;
pub(crate) mod lock;
pub(crate) mod lock_home;
mod membership;
mod memory_ops;
mod memory_store;
pub(crate) mod names;
mod node;
mod peer;
pub(crate) mod op_stats;
pub(crate) mod permission;
mod poller;
pub(crate) mod priority;
pub(crate) mod process;
pub(crate) mod qos;
pub(crate) mod registration;
pub(crate) mod ring;
pub(crate) mod rpc;
mod rpc_client;
mod rpc_port;
pub(crate) mod rpc_wire;
mod sharing;
pub(crate) mod slot_table;
pub(crate) mod stats;
mod transfer;
mod workers;

pub(crate) use address::parse_ipv4;
pub(crate) use barrier::nodes_reached;
pub(crate) use cluster::Cluster;
pub(crate) use node::{node, LiteClient, Node};
pub(crate) use transfer::{Direction, KernelSink, KernelSource};

use kernel::sync::Arc;

use crate::verbs::{Device, ProtectionDomain};

/// Most nodes in one cluster; node ids are below this.
pub(crate) const MAX_NODES: usize = 64;

/// `lite_alloc_remote` target meaning "spread over the other nodes".
pub(crate) const NODE_SPREAD: u32 = 0;

/// The RDMA device LITE uses and its protection domain.
pub(crate) struct DeviceContext {
    /// The device.
    pub(crate) device: Arc<Device>,
    /// The node's one protection domain, with its global keys.
    pub(crate) pd: Arc<ProtectionDomain>,
}
