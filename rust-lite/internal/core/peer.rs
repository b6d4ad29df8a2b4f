// SPDX-License-Identifier: GPL-2.0

//! Another node of the cluster and the connection to it.

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{prelude::*, sync::Arc};

use super::wire::Frame;
use crate::verbs::{CompletionQueue, Connection, PortConfig, ProtectionDomain, RemoteEnd};

/// A peer node.
///
/// One RC connection per peer is shared by every process on this node, as
/// in the original LITE; it carries both one-sided RDMA and control messages.
pub(crate) struct Peer {
    /// The peer's node id.
    pub(crate) node: u32,
    /// The connection to the peer.
    pub(crate) conn: Connection,
    connected: AtomicBool,
    /// The connection failed and subsystems were told.
    failed: AtomicBool,
}

impl Peer {
    /// Creates the connection to `node`, not yet connected.
    pub(crate) fn new(
        node: u32,
        pd: &Arc<ProtectionDomain>,
        recv_cq: &Arc<CompletionQueue>,
        port: &PortConfig,
    ) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Peer {
                node,
                conn: Connection::new(pd, recv_cq, port, node)?,
                connected: AtomicBool::new(false),
                failed: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?)
    }

    /// Connects to the peer's queue pair; the peer is usable afterwards.
    pub(crate) fn connect(&self, remote: &RemoteEnd, port: &PortConfig) -> Result {
        self.conn.connect(remote, port)?;
        self.connected.store(true, Ordering::Release);
        Ok(())
    }

    /// Notes that the connection failed; returns whether this is the first
    /// time it is noted.
    pub(crate) fn note_failure(&self) -> bool {
        !self.failed.swap(true, Ordering::AcqRel)
    }

    /// Whether the connection is up.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Sends a control message.
    pub(crate) fn send(&self, frame: &Frame) -> Result {
        self.conn.send_message(&frame.encode())
    }
}
