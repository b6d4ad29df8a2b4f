// SPDX-License-Identifier: GPL-2.0

//! LITE's internal unit (the original `lite_internal`), in safe Rust on top
//! of [`crate::verbs`] and [`crate::sys`].
//!
//! A joined node is a [`Cluster`](cluster::Cluster): a small [`core`] (device, peers and their
//! connections, the receive queue, pending control requests, the chunks held
//! for others) and subsystems that each own their state, their control
//! messages and their reaction to peers: [`memory`] (LMRs, transfers, memory
//! operations, registration), [`sharing`], [`async_io`], [`rpc`],
//! [`atomics`], [`locks`], [`barrier`], [`probe`] (the device access
//! checks) and [`keys`] (key changes when a peer is fenced); [`qos`] keeps priorities and
//! statistics. [`process`] holds what each process has of them, and
//! [`quota`] what each user may hold.

#![deny(unsafe_code)]

pub(crate) mod async_io;
pub(crate) mod atomics;
pub(crate) mod barrier;
pub(crate) mod cluster;
#[expect(unreachable_pub, reason = "shared with the userspace cluster manager")]
pub(crate) mod cm_wire;
pub(crate) mod core;
pub(crate) mod kernel_messages;
pub(crate) mod keys;
pub(crate) mod locks;
pub(crate) mod membership;
pub(crate) mod memory;
pub(crate) mod node;
pub(crate) mod node_id;
mod poller;
pub(crate) mod probe;
pub(crate) mod process;
pub(crate) mod qos;
pub(crate) mod quota;
pub(crate) mod rpc;
pub(crate) mod sharing;
pub(crate) mod util;
#[expect(unreachable_pub, reason = "shared with the userspace cluster manager")]
pub(crate) mod wire_layout;

pub(crate) use self::node::LiteClient;
