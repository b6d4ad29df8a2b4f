// SPDX-License-Identifier: GPL-2.0

//! An RDMA device and the port LITE uses on it.

use core::{
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{bindings, error::code::*, prelude::*, str::CStr, sync::Arc};

use super::check;
use crate::sys::wait::{Sleep, WaitQueue};

/// An RDMA device (`struct ib_device`) handed to LITE's IB client.
///
/// # Invariants
///
/// `ptr` points to a registered `ib_device` that stays valid for as long as
/// this object exists. The IB core keeps a device valid from the client's
/// `add` callback until its `remove` callback returns; objects are only made
/// in `add` (see [`Device::from_raw`]), and the client's `remove` callback
/// waits on `released` until this one has been dropped, after everything
/// created on the device (each holds the device).
///
/// `name` holds the device's name as it was when the IB core handed the
/// device over, NUL-terminated. `released` is told once, when this object
/// is dropped.
pub(crate) struct Device {
    ptr: NonNull<bindings::ib_device>,
    name: [u8; DEVICE_NAME_LEN],
    released: Arc<DeviceReleased>,
}

/// Room for a device name with its NUL (`IB_DEVICE_NAME_MAX`).
const DEVICE_NAME_LEN: usize = bindings::IB_DEVICE_NAME_MAX as usize;

/// Tells the IB client's `remove` callback when the last handle of a device
/// is gone, so that it returns only then.
#[pin_data]
pub(crate) struct DeviceReleased {
    released: AtomicBool,
    #[pin]
    queue: WaitQueue,
}

impl DeviceReleased {
    /// A device handle that is not released yet.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(DeviceReleased {
                released: AtomicBool::new(false),
                queue <- WaitQueue::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until the [`Device`] made with this object has been dropped.
    ///
    /// Every holder of a device handle drops it once the calls and threads
    /// using it end, which are bounded by their own timeouts; the wait
    /// cannot be cut short, since the device is freed once it ends.
    pub(super) fn wait(&self) {
        self.queue
            .wait_until(Sleep::Uninterruptible, RELEASE_RECHECK_MS, || {
                self.released.load(Ordering::Acquire)
            });
    }
}

/// How often [`DeviceReleased::wait`] looks again without a wake-up.
const RELEASE_RECHECK_MS: u32 = 100;

// SAFETY: An `ib_device` is not tied to a thread: verbs on it may be called
// from any thread in process context.
unsafe impl Send for Device {}
// SAFETY: `&self` methods only read fields the IB core sets before the
// device is registered and never changes afterwards (`dma_device`,
// `phys_port_cnt`, the port capability flags behind `rdma_protocol_roce`),
// or call `ib_query_port` and `rdma_get_gid_attr`, which the core and drivers
// make safe to call concurrently (the GID table is read under its lock).
// The other verbs wrappers only pass `as_ptr` to verbs, which do their own
// locking.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        self.released.released.store(true, Ordering::Release);
        self.released.queue.wake_all();
    }
}

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
    /// before then. Renaming the device must be excluded for the length of
    /// the call (the IB core holds its device lock around a client's `add`).
    pub(crate) unsafe fn from_raw(
        ptr: NonNull<bindings::ib_device>,
        released: Arc<DeviceReleased>,
    ) -> Self {
        let mut name = [0u8; DEVICE_NAME_LEN];
        // SAFETY: `ptr` is valid (caller's guarantee) and its `name` is a
        // NUL-terminated array of `DEVICE_NAME_LEN` bytes that no rename
        // changes during this call (caller's guarantee).
        let current = unsafe { &(*ptr.as_ptr()).name };
        for (to, from) in name.iter_mut().zip(current.iter()) {
            *to = *from;
        }
        // PANIC: `DEVICE_NAME_LEN` is at least 1 (`IB_DEVICE_NAME_MAX`).
        name[DEVICE_NAME_LEN - 1] = 0;
        // INVARIANT: `ptr` is registered and outlives this object, as the
        // caller guarantees; `name` is NUL-terminated just above.
        Device {
            ptr,
            name,
            released,
        }
    }

    /// The device's name when LITE bound it.
    pub(crate) fn name(&self) -> &str {
        let len = self.name.iter().position(|&b| b == 0).unwrap_or(0);
        // PANIC: `len` is the index of a byte of `name`.
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }

    /// Whether the device is currently called `name`.
    pub(crate) fn is_named(&self, name: &CStr) -> bool {
        // SAFETY: `name` is NUL-terminated; the lookup takes the IB core's
        // device lock and returns a device with a reference taken, or null.
        let found = unsafe {
            bindings::ib_device_get_by_name(
                name.as_char_ptr(),
                bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
            )
        };
        if found.is_null() {
            return false;
        }
        let same = core::ptr::eq(found, self.ptr.as_ptr());
        // SAFETY: Drops the reference `ib_device_get_by_name` took, once.
        unsafe { bindings::ib_device_put(found) };
        same
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
        unsafe { (*self.ptr.as_ptr()).phys_port_cnt }
    }

    /// Looks up `port` and picks the GID LITE advertises to its peers.
    ///
    /// On RoCE this is a RoCE v2 GID (checked by its type: a RoCE v1 entry
    /// for the same address cannot cross IP routers), IPv4-mapped if the
    /// port has one, else IPv6; on InfiniBand it is the first GID together
    /// with the port's LID.
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
        let entries = (0..table_len).filter_map(|index| self.gid_entry(port, index));
        let (gid_index, gid) = choose_gid(entries, roce).ok_or(ENODEV)?;
        Ok(PortConfig {
            port,
            gid_index,
            gid,
            lid: attr.lid as u16,
            mtu: attr.active_mtu,
            roce,
        })
    }

    /// [`Device::probe_port`] of `port` or, for port 0, of the first port
    /// that is active and has a usable GID.
    ///
    /// # Errors
    ///
    /// `ENODEV` if there is no such port.
    pub(crate) fn probe_port_or_first(&self, port: u32) -> Result<PortConfig> {
        if port != 0 {
            return self.probe_port(port);
        }
        (1..=self.port_count())
            .find_map(|port| self.probe_port(port).ok())
            .ok_or(ENODEV)
    }

    /// Entry `index` of `port`'s GID table, if it holds one.
    fn gid_entry(&self, port: u32, index: u32) -> Option<GidEntry> {
        let table_index = i32::try_from(index).ok()?;
        // SAFETY: `ptr` is valid by the type invariant; `rdma_get_gid_attr`
        // checks `port` and `index` itself and returns an error pointer for
        // an empty or invalid entry.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.ptr.as_ptr(), port, table_index) };
        let attr = kernel::error::from_err_ptr(attr.cast_mut()).ok()?;
        // SAFETY: `attr` is a valid GID attribute on which the call above
        // took a reference, released just below; its GID and type are set
        // before it is published and never change. Every bit pattern is a
        // valid `[u8; 16]`, so reading the GID union's raw view is sound.
        let entry = unsafe {
            GidEntry {
                index,
                gid: (*attr).gid.raw,
                roce_v2: (*attr).gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
            }
        };
        // SAFETY: Releases the reference `rdma_get_gid_attr` took, once.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        Some(entry)
    }
}

/// One entry of a port's GID table.
#[derive(Clone, Copy)]
pub(crate) struct GidEntry {
    /// Its index in the table.
    pub(crate) index: u32,
    /// The GID.
    pub(crate) gid: [u8; 16],
    /// Whether it is a RoCE v2 GID (`IB_GID_TYPE_ROCE_UDP_ENCAP`).
    pub(crate) roce_v2: bool,
}

/// The GID LITE advertises among a port's `entries`, with its index: on
/// RoCE (`roce`) a RoCE v2 GID, the first IPv4-mapped one if any, else the
/// first other; on InfiniBand the first one. All-zero entries never count.
pub(crate) fn choose_gid(
    entries: impl Iterator<Item = GidEntry>,
    roce: bool,
) -> Option<(u32, [u8; 16])> {
    let mut ipv6 = None;
    for entry in entries.filter(|e| e.gid.iter().any(|&b| b != 0)) {
        if !roce {
            return Some((entry.index, entry.gid));
        }
        if !entry.roce_v2 {
            continue;
        }
        if is_ipv4_mapped(&entry.gid) {
            return Some((entry.index, entry.gid));
        }
        ipv6.get_or_insert((entry.index, entry.gid));
    }
    ipv6
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
