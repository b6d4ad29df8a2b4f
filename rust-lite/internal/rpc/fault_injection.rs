// SPDX-License-Identifier: GPL-2.0

//! RPC fault injection (`CONFIG_LITE_FAULT_INJECTION`, debugfs
//! `rpc_fault_next`): the next request this node posts to a chosen node
//! carries a header whose length disagrees with its bytes, flagged as
//! injected, so that tests can see a server break the ring and its callers
//! fail with `EPROTO` without a real defect.

use crate::internal::node_id::NodeId;
use core::sync::atomic::{AtomicU32, Ordering};

/// Node whose next request gets a bad header, or 0 for none.
static BAD_HEADER_TO: AtomicU32 = AtomicU32::new(0);

/// Makes the next request this node posts to `node` carry a bad header;
/// 0 disarms.
pub(crate) fn inject_bad_header(node: NodeId) {
    BAD_HEADER_TO.store(node.get(), Ordering::Relaxed);
}

/// Whether the request being posted to `node` is to carry a bad header
/// (once per arming).
pub(crate) fn take_bad_header(node: NodeId) -> bool {
    let node = node.get();
    node != 0
        && BAD_HEADER_TO.load(Ordering::Relaxed) == node
        && BAD_HEADER_TO
            .compare_exchange(node, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
