// SPDX-License-Identifier: GPL-2.0

//! Backends of LITE-DSM's system call and of its region files' operations
//! (`lite_dsm.c`): where descriptors, page offsets and the mm's pages
//! become [`crate::dsm`]'s types.

use core::ffi::{c_int, c_long, c_ulong, c_void};
use kernel::{
    bindings,
    error::from_result,
    prelude::*,
    sync::{Arc, ArcBorrow},
    types::ForeignOwnable,
};

use crate::{
    dsm::{region::LocalRegion, Dsm},
    internal::node_id::NodeId,
};

/// Backend of `lite_dsm_open`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_dsm_open(
    node: u32,
    name: u64,
    size: u64,
    flags: u32,
    password: u64,
) -> c_long {
    from_result(|| {
        let fd = Dsm::get()?.open(NodeId::new(node), name, size, flags, password)?;
        Ok(fd as c_long)
    })
}

/// The region a region file's private data holds.
///
/// # Safety
///
/// `private` must be the private data of a region file that is not
/// released before `'a` ends.
unsafe fn region<'a>(private: *mut c_void) -> ArcBorrow<'a, LocalRegion> {
    // SAFETY: A region file's private data comes from `into_foreign` of an
    // `Arc<LocalRegion>` (`Anchor::open`), given back only at its release,
    // which the caller's promise puts after `'a`.
    unsafe { <Arc<LocalRegion> as ForeignOwnable>::borrow(private) }
}

/// A page index from the mm.
fn page_index(index: c_ulong) -> Result<usize> {
    usize::try_from(index).map_err(|_| EINVAL)
}

/// Backend of a region file's `.fault`: stores the page to map, locked and
/// with a reference for the mm, in `*page`. Returns 0 or a negative errno
/// (`EAGAIN`: fault again).
///
/// # Safety
///
/// `private` must be a live region file's private data and `page` a
/// writable page pointer of the fault, both valid until the call returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_dsm_fault(
    private: *mut c_void,
    index: c_ulong,
    write: bool,
    page: *mut *mut bindings::page,
) -> c_int {
    // SAFETY: The file is live until the fault returns (`# Safety`).
    let region = unsafe { region(private) };
    let mapped = page_index(index)
        .and_then(|index| Dsm::fault(&region, index, write, |lock| Ok(lock.into_fault())));
    match mapped {
        Ok(mapped) => {
            // SAFETY: `page` is writable until the call returns (`# Safety`).
            unsafe { *page = mapped };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// Backend of a region file's `.page_mkwrite`: makes `page`, mapped
/// read-only, writable, returning it locked. Returns 0 or a negative errno
/// (`EAGAIN`: fault again).
///
/// # Safety
///
/// As for [`lite_rs_dsm_fault`], with `page` the page being made writable.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_dsm_page_mkwrite(
    private: *mut c_void,
    index: c_ulong,
    page: *mut bindings::page,
) -> c_int {
    // SAFETY: The file is live until the fault returns (`# Safety`).
    let region = unsafe { region(private) };
    from_result(|| {
        Dsm::fault(&region, page_index(index)?, true, |lock| {
            if !lock.is(page) {
                return Err(EFAULT);
            }
            lock.into_mkwrite();
            Ok(())
        })?;
        Ok(0)
    })
}

/// Backend of a region file's `.mmap`: pages `first..first + pages` must
/// be in the region.
///
/// # Safety
///
/// `private` must be a live region file's private data.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_dsm_mmap(
    private: *mut c_void,
    first: c_ulong,
    pages: c_ulong,
) -> c_int {
    // SAFETY: The file is live during its `.mmap` (`# Safety`).
    let region = unsafe { region(private) };
    from_result(|| {
        Dsm::check_range(&region, page_index(first)?, page_index(pages)?)?;
        Ok(0)
    })
}

/// Backend of a region file's `.release`.
///
/// # Safety
///
/// `private` must be the private data of the region file being released,
/// which is not used again.
#[no_mangle]
pub(crate) unsafe extern "C" fn lite_rs_dsm_release(private: *mut c_void) {
    // SAFETY: The private data came from `into_foreign` of an
    // `Arc<LocalRegion>` and is given back once, here (`# Safety`).
    let region = unsafe { <Arc<LocalRegion> as ForeignOwnable>::from_foreign(private) };
    if let Ok(dsm) = Dsm::get() {
        dsm.release(region);
    }
}
