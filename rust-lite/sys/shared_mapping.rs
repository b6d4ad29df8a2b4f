// SPDX-License-Identifier: GPL-2.0

//! Memory that processes map from a file and that the kernel takes back
//! page by page (`lite_dsm.c`): the anchor whose address space every
//! mapping of one region on this node joins, the files processes hold, and
//! the page lock that orders mapping a page against taking it back.

use core::{
    ffi::{c_int, c_ulong, c_void},
    ptr::{null_mut, NonNull},
};
use kernel::{
    bindings, error::to_result, page::Page, prelude::*, sync::Arc, types::ForeignOwnable,
};

/// Bytes of a page.
pub(crate) const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

// `struct file` and `struct page` pass as opaque pointers: their bindings
// hold types that are not FFI-safe.
extern "C" {
    fn lite_dsm_anchor_create(anchor: *mut *mut c_void) -> c_int;
    fn lite_dsm_install_fd(anchor: *mut c_void, private: *mut c_void) -> c_int;
    fn lite_dsm_zap(anchor: *mut c_void, index: c_ulong);
    fn lite_dsm_lock_page(page: *mut c_void);
    fn lite_dsm_unlock_page(page: *mut c_void);
    fn lite_dsm_get_page(page: *mut c_void);
}

/// The address space every mapping of one region on this node joins.
///
/// # Invariants
///
/// `file` is an anchor file from `lite_dsm_anchor_create` whose reference
/// this object owns.
pub(crate) struct Anchor {
    file: NonNull<c_void>,
}

// SAFETY: A file reference may be used and dropped from any thread.
unsafe impl Send for Anchor {}
// SAFETY: The methods taking `&self` only pass the file to functions that
// may run concurrently on it.
unsafe impl Sync for Anchor {}

impl Anchor {
    /// A new anchor, which nothing maps yet.
    pub(crate) fn new() -> Result<Self> {
        let mut file = null_mut();
        // SAFETY: `file` is writable; on success it holds a file reference
        // that is now ours.
        to_result(unsafe { lite_dsm_anchor_create(&mut file) })?;
        // INVARIANT: Created just above, its reference given to us.
        Ok(Anchor {
            file: NonNull::new(file).ok_or(ENOMEM)?,
        })
    }

    /// Removes page `index` from every mapping of the anchor: the next
    /// access to it faults.
    pub(crate) fn take_back(&self, index: usize) {
        // SAFETY: `file` is a live anchor file (type invariant).
        unsafe { lite_dsm_zap(self.file.as_ptr(), index as c_ulong) };
    }

    /// Gives the calling process a descriptor of a new file that maps
    /// through this anchor and holds `private` until it is released, when
    /// the file operations get it back (`lite_rs_dsm_release`).
    pub(crate) fn open<T: Send + Sync + 'static>(&self, private: Arc<T>) -> Result<i32> {
        let raw = private.into_foreign();
        // SAFETY: `file` is a live anchor file (type invariant); on success
        // the new file owns `raw`, on failure it stays ours.
        let fd = unsafe { lite_dsm_install_fd(self.file.as_ptr(), raw.cast_mut()) };
        if fd < 0 {
            // SAFETY: `raw` came from `into_foreign` above and, the file not
            // being made, nothing else took it.
            drop(unsafe { Arc::<T>::from_foreign(raw) });
            return Err(Error::from_errno(fd));
        }
        Ok(fd)
    }
}

impl Drop for Anchor {
    fn drop(&mut self) {
        // SAFETY: The reference is ours (type invariant) and dropped once.
        unsafe { bindings::fput(self.file.as_ptr().cast()) };
    }
}

/// A page locked with `lock_page`: while it is held, no fault maps the
/// page and nothing takes it back. Unlocked when dropped.
pub(crate) struct PageLock<'a> {
    page: &'a Page,
}

impl<'a> PageLock<'a> {
    /// Locks `page`, sleeping until no one else holds it; holders never
    /// wait for the network.
    pub(crate) fn new(page: &'a Page) -> Self {
        // SAFETY: `page` is a live page.
        unsafe { lite_dsm_lock_page(page.as_ptr().cast()) };
        PageLock { page }
    }

    /// Whether the mm's page `page` is this one.
    pub(crate) fn is(&self, page: *const bindings::page) -> bool {
        core::ptr::eq(self.page.as_ptr(), page)
    }

    /// Copies the page's bytes into `out`.
    pub(crate) fn copy_to(&self, out: &mut [u8; PAGE_SIZE]) -> Result {
        // SAFETY: `out` is writable for `PAGE_SIZE` bytes. The page is
        // locked; the caller took it back from every mapping first, so only
        // a reference pinned before that could write it meanwhile, as any
        // copy of user memory allows.
        unsafe { self.page.read_raw(out.as_mut_ptr(), 0, PAGE_SIZE) }
    }

    /// Overwrites the page with `data`. Called only while no mapping has
    /// the page: it was never mapped or was taken back.
    pub(crate) fn fill(&self, data: &[u8; PAGE_SIZE]) -> Result {
        // SAFETY: `data` is readable for `PAGE_SIZE` bytes and, the page
        // being locked and mapped nowhere, nothing reads or writes it.
        unsafe { self.page.write_raw(data.as_ptr(), 0, PAGE_SIZE) }
    }

    /// Hands the page, locked and with a reference of its own, to the
    /// fault handler that maps it; the mm unlocks it once it is mapped.
    pub(crate) fn into_fault(self) -> *mut bindings::page {
        let page = self.page.as_ptr();
        // SAFETY: `page` is a live page; the reference taken is the fault's.
        unsafe { lite_dsm_get_page(page.cast()) };
        core::mem::forget(self);
        page
    }

    /// Hands the page, still locked, to `page_mkwrite`'s caller, which
    /// unlocks it once the mapping is writable.
    pub(crate) fn into_mkwrite(self) {
        core::mem::forget(self);
    }
}

impl Drop for PageLock<'_> {
    fn drop(&mut self) {
        // SAFETY: This object locked the page and unlocks it once.
        unsafe { lite_dsm_unlock_page(self.page.as_ptr().cast()) };
    }
}
