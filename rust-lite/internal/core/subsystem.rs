// SPDX-License-Identifier: GPL-2.0

//! What every subsystem of a joined node answers to: its control messages
//! and the comings and goings of peers.

use crate::internal::node_id::NodeId;
use kernel::sync::Arc;

use super::{peer::Peer, wire::Frame};

/// How a subsystem handled a control message on the polling thread.
pub(crate) enum Handling {
    /// Nothing more to do.
    Done,
    /// Send this reply to the peer.
    Answer(Frame),
    /// The message needs work that may block: run
    /// [`Subsystem::serve`] for it on a worker thread.
    Defer,
}

/// A subsystem of a joined node.
///
/// The polling thread hands each control message to the subsystem of its
/// family, and replies nobody waits for any more too, so that their effect
/// can be undone.
pub(crate) trait Subsystem: Send + Sync {
    /// Handles `frame` from `peer` on the polling thread, which must not
    /// block: work that may wait for the network is deferred.
    /// Subsystems without control messages keep the default.
    fn on_message(&self, peer: &Arc<Peer>, frame: &Frame) -> Handling {
        let _ = (peer, frame);
        Handling::Done
    }

    /// Runs a message [`Subsystem::on_message`] deferred, on a worker
    /// thread; returns the reply to send, if any.
    fn serve(&self, peer: &Arc<Peer>, frame: &Frame) -> Option<Frame> {
        let _ = (peer, frame);
        None
    }

    /// `node` joined the cluster and is connected to this node.
    fn on_peer_joined(&self, node: NodeId) {
        let _ = node;
    }

    /// `node` left the cluster or died: nothing from it will arrive.
    fn on_peer_gone(&self, node: NodeId) {
        let _ = node;
    }
}
