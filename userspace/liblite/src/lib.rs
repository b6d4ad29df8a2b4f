//! Userspace interface to LITE, the Local Indirection TiEr for RDMA.
//!
//! LITE lets every process on a node allocate memory on other nodes of a
//! cluster (an LMR, "LITE memory region") and read and write it over RDMA
//! through system calls. [`sys`] holds the raw calls; the rest of this
//! crate wraps them in a safe API:
//!
//! ```no_run
//! use lite::{Lmr, Priority};
//!
//! let my_id = lite::join("10.0.0.1", lite::sys::CM_DEFAULT_PORT, 1)?;
//! lite::dist_barrier(2)?;
//! let peer = if my_id == 1 { 2 } else { 1 };
//! let lmr = Lmr::alloc(peer, 4096, 0, 0x5eed)?;
//! lmr.write(0, b"hello", Priority::None)?;
//! let mut back = [0u8; 5];
//! lmr.read(0, &mut back, Priority::None)?;
//! assert_eq!(&back, b"hello");
//! lmr.free()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Errors are [`io::Error`]s carrying the kernel's errno, so
//! [`io::Error::raw_os_error`] gives the exact reason (see the uapi header
//! for what each errno means).

#![warn(missing_docs)]

use std::ffi::CString;
use std::io;
use std::mem::ManuallyDrop;

use libc::c_long;

pub mod sys;

/// Turns a raw result into the value on success or the errno as an error.
pub fn check(ret: c_long) -> io::Result<u64> {
    if ret >= 0 {
        Ok(ret.unsigned_abs())
    } else {
        // Kernel errnos are small; anything else is reported as EIO rather
        // than truncated into an unrelated errno.
        let errno = i32::try_from(ret.unsigned_abs()).unwrap_or(libc::EIO);
        Err(io::Error::from_raw_os_error(errno))
    }
}

/// Like [`check`] for calls whose result is a node id or a node count.
fn check_u32(ret: c_long) -> io::Result<u32> {
    let value = check(ret)?;
    u32::try_from(value).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("kernel returned {value}, which does not fit a node number"),
        )
    })
}

/// Joins the cluster whose manager listens on `cm_ip:cm_port` (dotted
/// IPv4), using port `ib_port` of the node's RDMA device, and returns this
/// node's id (>= 1).
///
/// Membership belongs to the node, not the process: it outlives the caller
/// and a second join fails with `EISCONN`.
pub fn join(cm_ip: &str, cm_port: u16, ib_port: u32) -> io::Result<u32> {
    // An embedded NUL would silently cut the address short.
    let cm_ip = CString::new(cm_ip).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `cm_ip` is NUL-terminated and lives until the call returns.
    check_u32(unsafe { sys::join(cm_ip.as_ptr(), cm_port.into(), ib_port) })
}

/// Returns this node's id.
pub fn node_id() -> io::Result<u32> {
    check_u32(sys::get_node_id())
}

/// Returns the number of nodes connected to this one, this one included.
pub fn total_nodes() -> io::Result<u32> {
    check_u32(sys::get_total_node())
}

/// Blocks until `num` nodes, this one included, have entered the same
/// barrier round. Every call starts a new round on this node.
pub fn dist_barrier(num: u32) -> io::Result<()> {
    check(sys::dist_barrier(num)).map(drop)
}

/// Priority of a data operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Priority {
    /// No preference.
    #[default]
    None,
    /// Latency sensitive: served ahead of low priority traffic.
    High,
    /// Background traffic: may be delayed in favour of high priority.
    Low,
}

impl Priority {
    /// Every priority, in the order of their raw values.
    pub const ALL: [Priority; 3] = [Priority::None, Priority::High, Priority::Low];

    /// The value the system calls expect.
    pub fn as_raw(self) -> u32 {
        match self {
            Priority::None => sys::PRIORITY_NONE,
            Priority::High => sys::PRIORITY_HIGH,
            Priority::Low => sys::PRIORITY_LOW,
        }
    }

    /// Lower-case name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Priority::None => "none",
            Priority::High => "high",
            Priority::Low => "low",
        }
    }
}

/// An LMR: memory allocated by LITE on some node of the cluster.
///
/// Dropping an `Lmr` frees it; call [`Lmr::free`] to see whether freeing
/// succeeded.
#[derive(Debug)]
pub struct Lmr {
    handle: u64,
    size: u64,
    password: u64,
}

impl Lmr {
    /// Allocates `size` bytes on `node` ([`sys::NODE_SPREAD`] spreads the
    /// chunks over every other node). `flags` is 0 or [`sys::ALLOC_ATOMIC`];
    /// `password` guards every later read and write.
    pub fn alloc(node: u32, size: u64, flags: u32, password: u64) -> io::Result<Lmr> {
        let handle = check(sys::alloc_remote(node, size, flags, password))?;
        Ok(Lmr {
            handle,
            size,
            password,
        })
    }

    /// Writes `data` into the LMR starting at `offset`; returns once the
    /// data has reached the remote memory.
    pub fn write(&self, offset: u64, data: &[u8], priority: Priority) -> io::Result<()> {
        // SAFETY: `data` is readable for its whole length during the call.
        let ret = unsafe {
            sys::rdma_write(
                self.handle,
                data.as_ptr().cast(),
                byte_count(data.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        check(ret).map(drop)
    }

    /// Fills `buf` with the LMR's bytes starting at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8], priority: Priority) -> io::Result<()> {
        // SAFETY: `buf` is exclusively borrowed and writable for its whole
        // length during the call.
        let ret = unsafe {
            sys::rdma_read(
                self.handle,
                buf.as_mut_ptr().cast(),
                byte_count(buf.len()),
                offset,
                priority.as_raw(),
                self.password,
            )
        };
        check(ret).map(drop)
    }

    /// The handle the kernel assigned; valid until the LMR is freed.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Password given at allocation.
    pub fn password(&self) -> u64 {
        self.password
    }

    /// Frees the LMR and reports whether the kernel did.
    pub fn free(self) -> io::Result<()> {
        // Drop must not free the handle a second time.
        let lmr = ManuallyDrop::new(self);
        check(sys::free(lmr.handle)).map(drop)
    }
}

impl Drop for Lmr {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here; `free` reports it.
        let _ = sys::free(self.handle);
    }
}

/// Length of a slice as the `u64` the system calls take.
fn byte_count(len: usize) -> u64 {
    // usize is at most 64 bits on every target LITE runs on.
    len as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_passes_values_through() {
        assert_eq!(check(0).ok(), Some(0));
        assert_eq!(check(7).ok(), Some(7));
        assert_eq!(check(c_long::MAX).ok(), Some(c_long::MAX as u64));
    }

    #[test]
    fn check_maps_negative_errno_to_os_error() {
        let err = check(-c_long::from(libc::ENOTCONN)).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::ENOTCONN));
        let err = check(-28).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::ENOSPC));
    }

    #[test]
    fn check_never_truncates_huge_negative_values_into_other_errnos() {
        let err = check(c_long::MIN).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
        let err = check(-(1 << 33) - 2).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EIO));
    }

    #[test]
    fn node_numbers_beyond_u32_are_rejected() {
        assert!(check_u32(1 << 32).is_err());
        assert_eq!(check_u32(3).ok(), Some(3));
        assert_eq!(
            check_u32(-c_long::from(libc::EISCONN))
                .err()
                .and_then(|e| e.raw_os_error()),
            Some(libc::EISCONN)
        );
    }

    #[test]
    fn join_rejects_embedded_nul_without_calling_the_kernel() {
        let err = join("10.0.0.1\0junk", sys::CM_DEFAULT_PORT, 1).err();
        assert_eq!(err.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
    }

    #[test]
    fn priorities_map_to_uapi_values() {
        assert_eq!(Priority::None.as_raw(), 0);
        assert_eq!(Priority::High.as_raw(), 1);
        assert_eq!(Priority::Low.as_raw(), 2);
        assert_eq!(Priority::default(), Priority::None);
        for (raw, priority) in Priority::ALL.iter().enumerate() {
            assert_eq!(priority.as_raw() as usize, raw);
        }
    }
}
