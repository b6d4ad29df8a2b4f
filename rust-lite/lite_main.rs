// SPDX-License-Identifier: GPL-2.0

//! LITE: the Local Indirection TiEr for RDMA, in Rust.
//!
//! LITE (SOSP'17) turns a node's RDMA device into a shared, protected kernel
//! service: processes allocate memory on other nodes (LMRs), read and write
//! it by handle, and synchronise across nodes, while LITE owns every queue
//! pair and memory registration on their behalf.
//!
//! The crate mirrors the units of the original implementation:
//! - `internal` (`lite_internal`): the device, cluster membership, one RC
//!   connection per peer shared by all users, the shared receive completion
//!   queue and its polling thread, and the LMR table;
//! - `api` (`lite_api`): the system call backends and the kernel C API;
//! - the KUnit suites (`lite_test`), built with `CONFIG_LITE_KUNIT_TEST`.
//!
//! All `unsafe` code lives in `verbs` (RDMA verbs), `sys` (threads,
//! scheduling, sockets) and at the C and user-memory boundary in `api`.

// `pin_init!` expands recursively per field; the cluster has many.
#![recursion_limit = "256"]

use kernel::prelude::*;

mod api;
mod dsm;
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

/// The module: LITE's entry points and its registration as an IB client.
///
/// Each part is `None` until it is set up; dropping the module (at unload,
/// or when `init` fails half-way) undoes them in the order that lets
/// nothing run LITE's code afterwards.
struct LiteModule {
    modules: Option<api::kernel_messages::ModuleWatch>,
    syscalls: Option<api::entry_points::SyscallEntry>,
    debugfs: Option<api::entry_points::DebugfsFiles>,
    client: Option<verbs::IbClient<internal::LiteClient>>,
}

impl kernel::Module for LiteModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        sys::kthread::init()?;
        let mut module = LiteModule {
            modules: None,
            syscalls: None,
            debugfs: None,
            client: None,
        };
        internal::node::Node::init()?;
        dsm::Dsm::init()?;
        module.modules = Some(api::kernel_messages::ModuleWatch::start()?);
        module.client = Some(verbs::IbClient::register()?);
        module.debugfs = Some(api::entry_points::DebugfsFiles::create());
        module.syscalls = Some(api::entry_points::SyscallEntry::open()?);
        pr_info!("ready\n");
        Ok(module)
    }
}

impl Drop for LiteModule {
    fn drop(&mut self) {
        // No system call starts from here on, and none runs: each holds the
        // module, whose exit only runs when nothing does. Kernel modules
        // calling LITE's API hold it too, through their symbol references.
        drop(self.syscalls.take());
        drop(self.debugfs.take());
        // Modules using LITE hold it: none is left to go.
        drop(self.modules.take());
        if let Ok(node) = internal::node::node() {
            node.shut_down();
        }
        // SAFETY: The node left its cluster: its threads are ending and,
        // with no call able to reach LITE, nothing starts new ones.
        unsafe { sys::kthread::stop_all() };
        // The IB core calls `remove` for the device: it is freed once every
        // object on it is gone, which the ended membership let happen.
        drop(self.client.take());
        // SAFETY: No system call, API call, debugfs access, IB client
        // callback or LITE thread is left to use the node, and nothing
        // looks for it again.
        // SAFETY: As above; region files, which use LITE-DSM, hold LITE's
        // module, so none is open.
        drop(unsafe { dsm::DSM.release() });
        drop(unsafe { internal::node::NODE.release() });
        pr_info!("unloaded\n");
    }
}
