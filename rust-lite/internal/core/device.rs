// SPDX-License-Identifier: GPL-2.0

//! The RDMA device a node uses.

use kernel::sync::Arc;

use crate::verbs::{Device, ProtectionDomain};

/// The RDMA device LITE uses and its protection domain.
pub(crate) struct DeviceContext {
    /// The device.
    pub(crate) device: Arc<Device>,
    /// The node's one protection domain, with its global keys.
    pub(crate) pd: Arc<ProtectionDomain>,
}
