// SPDX-License-Identifier: GPL-2.0

//! An RDMA device and the port LITE uses on it.

use core::ptr::NonNull;
use kernel::{bindings, error::code::*, prelude::*};

use super::check;

/// An RDMA device (`struct ib_device`) handed to LITE's IB client.
///
/// # Invariants
///
/// `ptr` points to a registered `ib_device` that stays valid for as long as
/// this object exists. The IB core keeps a device valid from the client's
/// `add` callback until its `remove` callback returns; objects are only made
/// in `add` (see [`Device::from_raw`]), and [`ClientHandler::remove`] must not
/// return while any of them, or anything created on the device, still exists.
///
/// [`ClientHandler::remove`]: super::ClientHandler::remove
pub(crate) struct Device {
    ptr: NonNull<bindings::ib_device>,
}

// SAFETY: An `ib_device` is not tied to a thread: verbs on it may be called
// from any thread in process context.
unsafe impl Send for Device {}
// SAFETY: `&self` methods only read fields the IB core sets before the
// device is registered and never changes afterwards (`dma_device`,
// `phys_port_cnt`, the port capability flags behind `rdma_protocol_roce`),
// or call `ib_query_port` and `rdma_query_gid`, which the core and drivers
// make safe to call concurrently (the GID table is read under its lock).
// The other verbs wrappers only pass `as_ptr` to verbs, which do their own
// locking.
unsafe impl Sync for Device {}

/// Largest GID table LITE scans for a usable address.
const MAX_GID_SCAN: u32 = 256;

impl Device {
    /// Wraps a device pointer received from the IB core.
    ///
    /// # Safety
    ///
    /// `ptr` must point to an `ib_device` registered with the IB core (as
    /// passed to an IB client's `add` callback) that stays registered and
    /// valid until the returned object, and every verbs object created
    /// through it (PD, CQ, QP, DMA mapping), has been dropped: in practice,
    /// the client's `remove` callback for this device must not return
    /// before then.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::ib_device>) -> Self {
        // INVARIANT: `ptr` is registered and outlives this object, as the
        // caller guarantees.
        Device { ptr }
    }

    /// The raw pointer, for the other verbs wrappers.
    pub(super) fn as_ptr(&self) -> *mut bindings::ib_device {
        self.ptr.as_ptr()
    }

    /// Whether this object wraps the device at `raw`.
    pub(crate) fn is(&self, raw: *const bindings::ib_device) -> bool {
        core::ptr::eq(self.ptr.as_ptr(), raw)
    }

    /// Whether the device is implemented in software (Soft-RoCE, siw): it
    /// has no DMA device of its own and works on this host's CPUs.
    pub(crate) fn is_software(&self) -> bool {
        // SAFETY: `ptr` is valid by the type invariant, and `dma_device` is
        // set before registration and never changed afterwards.
        unsafe { (*self.ptr.as_ptr()).dma_device.is_null() }
    }

    /// Most pages one fast-registration memory region maps (at least 1).
    pub(crate) fn max_region_pages(&self) -> u32 {
        // SAFETY: `ptr` is valid by the type invariant, and `attrs` is set
        // before registration and never changed afterwards.
        unsafe { (*self.ptr.as_ptr()).attrs.max_fast_reg_page_list_len }.max(1)
    }

    /// Number of physical ports (ports are numbered from 1).
    pub(crate) fn port_count(&self) -> u32 {
        // SAFETY: `ptr` is valid by the type invariant, and `phys_port_cnt`
        // is set before registration and never changed afterwards.
        u32::from(unsafe { (*self.ptr.as_ptr()).phys_port_cnt })
    }

    /// Looks up `port` and picks the GID LITE advertises to its peers.
    ///
    /// On RoCE this is the first IPv4-mapped GID (RoCE v2 over IPv4); on
    /// InfiniBand it is GID 0 together with the port's LID.
    ///
    /// # Errors
    ///
    /// `ENODEV` if the port does not exist, is not active or has no usable GID.
    pub(crate) fn probe_port(&self, port: u32) -> Result<PortConfig> {
        if port == 0 || port > self.port_count() {
            return Err(ENODEV);
        }
        let mut attr = bindings::ib_port_attr::default();
        // SAFETY: `ptr` is valid by the type invariant and `attr` is a valid
        // out-parameter for the duration of the call.
        check(unsafe { bindings::ib_query_port(self.ptr.as_ptr(), port, &mut attr) })?;
        if attr.state != bindings::ib_port_state_IB_PORT_ACTIVE {
            return Err(ENODEV);
        }
        // SAFETY: `ptr` is valid by the type invariant and `port` is between
        // 1 and `phys_port_cnt` (checked above), as the helper's per-port
        // array lookup requires.
        let roce = unsafe { bindings::rdma_protocol_roce(self.ptr.as_ptr(), port) };
        let table_len = u32::try_from(attr.gid_tbl_len)
            .unwrap_or(0)
            .min(MAX_GID_SCAN);
        for index in 0..table_len {
            let Some(gid) = self.query_gid(port, index) else {
                continue;
            };
            if gid.iter().all(|&b| b == 0) {
                continue;
            }
            if roce && !is_ipv4_mapped(&gid) {
                continue;
            }
            return Ok(PortConfig {
                port,
                gid_index: index,
                gid,
                lid: attr.lid as u16,
                mtu: attr.active_mtu,
                roce,
            });
        }
        Err(ENODEV)
    }

    fn query_gid(&self, port: u32, index: u32) -> Option<[u8; 16]> {
        let mut gid = bindings::ib_gid::default();
        let index = i32::try_from(index).ok()?;
        // SAFETY: `ptr` is valid by the type invariant and `gid` is a valid
        // out-parameter for the duration of the call; `rdma_query_gid`
        // checks `port` and `index` itself.
        let ret = unsafe { bindings::rdma_query_gid(self.ptr.as_ptr(), port, index, &mut gid) };
        if ret != 0 {
            return None;
        }
        // SAFETY: Every bit pattern is a valid `[u8; 16]` and the union is 16
        // initialised bytes (from `default()`, then filled by the call), so
        // reading its raw view is sound.
        Some(unsafe { gid.raw })
    }
}

/// Whether `gid` is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    // PANIC: Constant indices below 16 into a `[u8; 16]`.
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// The port LITE uses and the address it advertises on it.
#[derive(Clone, Copy)]
pub(crate) struct PortConfig {
    /// Port number (from 1).
    pub(crate) port: u32,
    /// Index of [`Self::gid`] in the port's GID table.
    pub(crate) gid_index: u32,
    /// GID advertised to peers.
    pub(crate) gid: [u8; 16],
    /// LID advertised to peers (0 on RoCE).
    pub(crate) lid: u16,
    /// Active MTU of the port (`enum ib_mtu`).
    pub(crate) mtu: bindings::ib_mtu,
    /// Whether the port runs RoCE (Ethernet) rather than InfiniBand.
    pub(crate) roce: bool,
}

impl PortConfig {
    /// The port's active MTU in bytes.
    pub(crate) fn mtu_bytes(&self) -> u16 {
        mtu_to_bytes(self.mtu)
    }
}

/// Converts an `enum ib_mtu` into bytes.
pub(super) fn mtu_to_bytes(mtu: bindings::ib_mtu) -> u16 {
    match mtu {
        bindings::ib_mtu_IB_MTU_256 => 256,
        bindings::ib_mtu_IB_MTU_512 => 512,
        bindings::ib_mtu_IB_MTU_1024 => 1024,
        bindings::ib_mtu_IB_MTU_2048 => 2048,
        _ => 4096,
    }
}

/// Converts a byte count into the largest `enum ib_mtu` not above it.
pub(super) fn mtu_from_bytes(bytes: u16) -> bindings::ib_mtu {
    match bytes {
        0..=511 => bindings::ib_mtu_IB_MTU_256,
        512..=1023 => bindings::ib_mtu_IB_MTU_512,
        1024..=2047 => bindings::ib_mtu_IB_MTU_1024,
        2048..=4095 => bindings::ib_mtu_IB_MTU_2048,
        _ => bindings::ib_mtu_IB_MTU_4096,
    }
}
