//! LITE-DSM: memory shared by processes on every node, mapped into each
//! one's address space and kept coherent page by page by the kernel.
//!
//! ```no_run
//! use lite::dsm::Region;
//!
//! // On node 1: a region of 64 KiB named 0x5eed.
//! let region = Region::create(0x5eed, 64 << 10, 42)?;
//! // On every other node: the same region.
//! # let _ = region;
//! let region = Region::open(1, 0x5eed, 64 << 10, 42)?;
//! let map = region.map()?;
//! map.words()[0].fetch_add(0, std::sync::atomic::Ordering::Relaxed);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Every access sees the last write of its page on any node; accesses
//! ordered by a LITE lock or barrier see each other's writes. An access to a
//! page lost with a node raises `SIGBUS`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use crate::check;
use crate::sys;

/// An open region: a descriptor to map.
#[derive(Debug)]
pub struct Region {
    fd: OwnedFd,
    size: usize,
}

impl Region {
    /// Creates region `name` of `size` bytes on this node, or opens it if
    /// it exists with that size.
    pub fn create(name: u64, size: u64, password: u64) -> io::Result<Region> {
        let node = check(sys::get_node_id())?;
        let node = u32::try_from(node).map_err(|_| io::Error::from_raw_os_error(libc::EIO))?;
        Region::open_raw(node, name, size, sys::DSM_CREATE, password)
    }

    /// Opens region `name` of node `node`, whose size is `size` bytes.
    pub fn open(node: u32, name: u64, size: u64, password: u64) -> io::Result<Region> {
        Region::open_raw(node, name, size, 0, password)
    }

    fn open_raw(node: u32, name: u64, size: u64, flags: u32, password: u64) -> io::Result<Region> {
        Region::from_result(sys::dsm_open(node, name, size, flags, password), size)
    }

    /// The region of `size` bytes whose descriptor is `ret`, a result of
    /// [`sys::dsm_open`].
    pub fn from_result(ret: libc::c_long, size: u64) -> io::Result<Region> {
        let fd = check(ret)?;
        let fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EIO))?;
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let page = page_size();
        let size = usize::try_from(size)
            .ok()
            .and_then(|size| size.checked_next_multiple_of(page))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(Region { fd, size })
    }

    /// The region's size in bytes (whole pages: the kernel rounds up).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Maps the whole region, shared.
    pub fn map(&self) -> io::Result<Mapping> {
        self.map_with(self.size, libc::MAP_SHARED)
    }

    /// Maps `len` bytes of the region with `mmap` flags `flags` (the kernel
    /// refuses all but a shared mapping within the region).
    pub fn map_with(&self, len: usize, flags: libc::c_int) -> io::Result<Mapping> {
        Mapping::new(&self.fd, len, flags)
    }

    /// The descriptor, for `mmap` with other arguments.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// A shared mapping of a region, unmapped when dropped.
#[derive(Debug)]
pub struct Mapping {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory that every thread may access through
// the atomic views this type hands out.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize, flags: libc::c_int) -> io::Result<Mapping> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a new mapping chosen by the kernel overlaps no Rust object.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd.as_raw_fd(), 0) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr =
            NonNull::new(addr.cast()).ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))?;
        Ok(Mapping { addr, len })
    }

    /// The mapping as 64-bit words, which other processes and nodes change
    /// under it.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is `len` bytes, page-aligned, readable and
        // writable until `self` is dropped; atomics allow concurrent change.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr().cast(), self.len / 8) }
    }

    /// Copies `data` to the mapping at byte `offset`. Writers of the same
    /// bytes on other threads or nodes must be ordered with this one by a
    /// lock or barrier, or the bytes are a mix of both.
    ///
    /// # Errors
    ///
    /// `EINVAL` if the bytes do not lie within the mapping.
    pub fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: `check` put the range within the mapping, which stays
        // mapped while `self` lives; `data` is ordinary memory of this
        // process, so the two cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copies bytes of the mapping from byte `offset` into `out`, with the
    /// same ordering rule as [`Mapping::write`].
    ///
    /// # Errors
    ///
    /// `EINVAL` if the bytes do not lie within the mapping.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> io::Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    fn check(&self, offset: usize, len: usize) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: mappings are at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is this mapping, which nothing uses any more.
        unsafe { libc::munmap(self.addr.as_ptr().cast(), self.len) };
    }
}
