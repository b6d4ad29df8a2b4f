// SPDX-License-Identifier: GPL-2.0

//! LITE: the Local Indirection TiEr for RDMA, in Rust.
//!
//! LITE (SOSP'17) turns a node's RDMA device into a shared, protected kernel
//! service: processes allocate memory on other nodes (LMRs), read and write
//! it by handle, and synchronise across nodes, while LITE owns every queue
//! pair and memory registration on their behalf.
//!
//! The crate mirrors the units of the original implementation:
//! - [`internal`] (`lite_internal`): the device, cluster membership, one RC
//!   connection per peer shared by all users, the shared receive completion
//!   queue and its polling thread, and the LMR table;
//! - [`api`] (`lite_api`): the system call backends and the kernel C API;
//! - the KUnit suites (`lite_test`), built with `CONFIG_LITE_KUNIT_TEST`.
//!
//! All `unsafe` code lives in [`verbs`] (RDMA verbs), [`sys`] (threads,
//! scheduling, sockets) and at the C and user-memory boundary in [`api`].

// `pin_init!` expands recursively per field; the cluster has many.
#![recursion_limit = "256"]

use kernel::prelude::*;

mod api;
mod errno;
mod internal;
mod sys;
mod verbs;

#[cfg(CONFIG_LITE_KUNIT_TEST)]
mod kunit_tests;

module! {
    type: LiteModule,
    name: "lite",
    author: "LITE developers",
    description: "LITE: Local Indirection TiEr for RDMA",
    license: "GPL",
}

/// The module: LITE's registration as an IB client.
struct LiteModule {
    _client: verbs::IbClient<internal::LiteClient>,
}

impl kernel::Module for LiteModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        internal::node::Node::init()?;
        let client = verbs::IbClient::register()?;
        pr_info!("ready\n");
        Ok(LiteModule { _client: client })
    }
}
