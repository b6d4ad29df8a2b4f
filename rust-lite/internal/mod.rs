// SPDX-License-Identifier: GPL-2.0

//! LITE's internal unit (the original `lite_internal`), in safe Rust on top
//! of [`crate::verbs`] and [`crate::sys`].
//!
//! A joined node is a [`Cluster`]: a small [`core`] (device, peers and their
//! connections, the receive queue, pending control requests, the chunks held
//! for others) and subsystems that each own their state, their control
//! messages and their reaction to peers: [`memory`] (LMRs, transfers, memory
//! operations, registration), [`sharing`], [`async_io`], [`rpc`],
//! [`atomics`], [`locks`] and [`barrier`]; [`qos`] keeps priorities and
//! statistics. [`process`] holds what each process has of them.

#![deny(unsafe_code)]

pub(crate) mod async_io;
pub(crate) mod atomics;
pub(crate) mod barrier;
mod cluster;
#[expect(unreachable_pub, reason = "shared with the userspace cluster manager")]
pub(crate) mod cm_wire;
pub(crate) mod core;
pub(crate) mod locks;
mod membership;
pub(crate) mod memory;
mod node;
mod poller;
pub(crate) mod process;
pub(crate) mod qos;
pub(crate) mod rpc;
pub(crate) mod sharing;
pub(crate) mod util;

pub(crate) use self::cluster::Cluster;
pub(crate) use self::node::{node, LiteClient, Node};

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
