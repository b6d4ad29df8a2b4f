// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the kernel's RDMA verbs ([`include/rdma/ib_verbs.h`]).
//!
//! This is the only part of LITE that calls verbs. Every object is an RAII
//! type that owns its C counterpart and holds references to whatever must
//! outlive it (a queue pair keeps its protection domain and completion
//! queues alive), so destruction order is enforced by the types. Work
//! requests that let the device touch memory are only posted through
//! [`Connection`], whose methods borrow the memory until the device reports
//! completion, so no device access can outlive the buffer.
//!
//! [`include/rdma/ib_verbs.h`]: srctree/include/rdma/ib_verbs.h

mod buffer;
mod client;
mod connection;
mod cq;
mod device;
mod kernel_buffer;
mod memory_region;
mod pd;
mod qp;
mod region_keys;
mod remote_keys;
mod remote_pool;
mod shared_memory;
mod staging;
mod user_pages;

pub(crate) use buffer::MAX_DMA_BUFFER;
pub(crate) use buffer::{live_dma_buffers, DmaBuffer};
pub(crate) use client::{ClientHandler, IbClient};
pub(crate) use connection::{split_recv_wr_id, Connection, INLINE_MAX, RECV_DEPTH};
pub(crate) use cq::{CompletionQueue, WorkCompletion, POLL_BATCH};
#[cfg(CONFIG_LITE_KUNIT_TEST)]
pub(crate) use device::{choose_gid, GidEntry};
pub(crate) use device::{Device, PortConfig};
pub(crate) use kernel_buffer::KernelBuffer;
pub(crate) use memory_region::live_memory_regions;
pub(crate) use pd::ProtectionDomain;
pub(crate) use qp::RemoteEnd;
pub(crate) use region_keys::{KeyRegistry, KeyTable};
pub(crate) use remote_keys::RemoteKeys;
pub(crate) use remote_pool::{pool_bytes, RemotePool};
pub(crate) use staging::{StagingPool, STAGING_SIZE};
pub(crate) use user_pages::{PinnedPages, PAGE_SIZE};

use kernel::error::Error;

/// Turns a negative errno returned by a verbs call into a [`Result`].
fn check(ret: i32) -> kernel::error::Result<i32> {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(ret)
    }
}
