// SPDX-License-Identifier: GPL-2.0

//! Error codes the 6.12 `kernel` crate does not name.

use kernel::{bindings, error::Error};

macro_rules! errno {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            #[expect(non_snake_case)]
            pub(crate) fn $name() -> Error {
                Error::from_errno(-(bindings::$name as i32))
            }
        )*
    };
}

errno! {
    /// The node has not joined a cluster.
    ENOTCONN,
    /// The node has already joined a cluster.
    EISCONN,
    /// A join is already under way.
    EALREADY,
    /// The node is not a member of the cluster.
    EHOSTUNREACH,
    /// The node and the cluster manager do not hold the same secret.
    EKEYREJECTED,
    /// A peer did not answer in time.
    ETIMEDOUT,
    /// The cluster manager or a peer broke the protocol.
    EPROTO,
    /// The operation is not supported (e.g. a second RDMA device).
    /// The LMR behind a mapping was freed or deregistered by its owner.
    EKEYREVOKED,
    /// The operation was cancelled before it ran.
    ECANCELED,
    /// The RPC port is already registered.
    EADDRINUSE,
    /// The calling thread already holds the lock.
    EDEADLK,
    /// The RPC port is not registered on the target node.
    ECONNREFUSED,
    /// The process holding the request exited without replying.
    ECONNRESET,
    /// A message or reply is larger than its destination allows.
    EMSGSIZE,
    /// A kernel message does not have the layout of its kind.
    EBADMSG,
    /// The RPC port was unregistered while waiting on it.
    ESHUTDOWN,
    /// The lock was taken, but its last holder's node died (or left)
    /// holding it.
    EOWNERDEAD,
    /// The node the operation needs was declared dead (or left), or this
    /// node was fenced off the cluster.
    EHOSTDOWN,
    /// The caller's user, or this node at the node serving it, would hold
    /// more than its quota allows.
    EDQUOT,
}
