//! LITE cluster manager.
//!
//! Nodes join a LITE cluster by connecting to this manager over TCP. The
//! manager assigns each node an id (1, 2, 3, … in join order; 0 stands for
//! the manager) and, for every node already in the cluster, relays queue
//! pair endpoints both ways so that the newcomer ends up with a reliable
//! connection to every other node. A node that comes back gets its old id
//! again, as a new incarnation, if no live node has it: the manager knows
//! it by its port GID (a rebooted node has forgotten its id but not its
//! address), or by the old id it asks for. An id never goes to a node with
//! another GID unless that node asks for it, and a node with the GID of a
//! live node is refused.
//!
//! The manager also owns membership: joined nodes send heartbeats, and a
//! node that falls silent, whose connection breaks, or that a peer suspects
//! and that is silent too, is declared dead and every surviving node is
//! told. A node may also leave gracefully: the other nodes are told as they
//! are of a death, and the node itself is told too, as its confirmation.
//!
//! A member whose connection to the manager broke reconnects and resumes
//! its membership, keeping its id, incarnation and queue pairs, instead of
//! joining again. That is also how a restarted manager learns its members:
//! for a start-up grace after it starts (by default as long as a member
//! may stay silent) it takes the resumes of ids it does not know and
//! refuses joins with `EAGAIN`, so that no member's id goes to a new node;
//! a node that joins then must retry. A resume naming a node the manager
//! declared dead, or an unknown id after the grace, is refused with
//! `EHOSTDOWN`, and the node joins again.
//!
//! Every connection starts with mutual authentication by the cluster's
//! secret, which the manager reads from a file and every node holds in its
//! kernel keyring (see [`auth`]); from then on every frame carries a tag
//! that ties it to the connection and to its place in the stream (see
//! [`frame::Channel`]). A node without the secret is refused with
//! `EKEYREJECTED`, and a frame that was forged, altered, replayed or
//! reordered ends its connection.
//!
//! The wire format and the exact exchanges are defined in [`cm_wire`],
//! which the kernel compiles too.

#![warn(missing_docs)]

#[path = "../../../rust-lite/internal/cm_wire.rs"]
pub mod cm_wire;
#[path = "../../../rust-lite/internal/wire_layout.rs"]
pub mod wire_layout;

pub mod auth;
pub mod cli;
pub mod frame;
mod manager;

pub use auth::ClusterSecret;
pub use manager::{ClusterManager, ManagerConfig};

#[cfg(test)]
mod join_tests;
#[cfg(test)]
mod wire_tests;
