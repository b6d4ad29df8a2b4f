//! LITE cluster manager.
//!
//! Nodes join a LITE cluster by connecting to this manager over TCP. The
//! manager assigns each node an id (1, 2, 3, … in join order, never reused;
//! 0 stands for the manager) and, for every node already in the cluster,
//! relays queue pair endpoints both ways so that the newcomer ends up with
//! a reliable connection to every other node. The wire format and the exact
//! exchange are defined in [`cm_wire`], which the kernel compiles too.

#![warn(missing_docs)]

#[path = "../../../rust-lite/internal/cm_wire.rs"]
pub mod cm_wire;

pub mod cli;
pub mod frame;
mod manager;

pub use manager::{ClusterManager, ManagerConfig};

#[cfg(test)]
mod join_tests;
#[cfg(test)]
mod wire_tests;
