// SPDX-License-Identifier: GPL-2.0

//! What LITE knows of each process: its handles and asynchronous operations.
//!
//! Handles are per process, like file descriptors: a process only reaches
//! the LMRs behind its own handles. A process is identified by its thread
//! group id; its state is created on first use and released when its last
//! thread exits (see [`Cluster::process_exit`](super::cluster::Cluster)).
//! Kernel callers of the C API share one state that lives as long as the
//! node.

use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode},
    sync::{Arc, Mutex},
};

use super::{
    async_io::op::AsyncOp,
    memory::{
        handle::{LmrHandle, Password},
        lmr::Lmr,
        permission::Permission,
    },
    qos::priority::DefaultPriority,
    quota::Payer,
    rpc::port::ReplyTo,
    util::slot_table::SlotTable,
};
use crate::sys::cred;

/// What a handle is to its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The process created the LMR; `lmr_id` names it in the node's table.
    Owner {
        /// The LMR's id on this node.
        lmr_id: u64,
    },
    /// A mapping from `lite_ask_lmr`; `mapping_id` names it in the node's
    /// table of mappings of other nodes' LMRs (`None` for an LMR of this node).
    Mapping {
        /// The mapping's id on this node, if the LMR is another node's.
        mapping_id: Option<u64>,
    },
}

/// One handle of a process.
pub(crate) struct HandleEntry {
    /// The LMR.
    pub(crate) lmr: Arc<Lmr>,
    /// What the handle allows.
    pub(crate) permission: Permission,
    /// The password data operations must present.
    pub(crate) password: Password,
    /// Owner or mapping.
    pub(crate) role: Role,
}

impl HandleEntry {
    /// Checks `password` and that the handle allows `needed`.
    ///
    /// # Errors
    ///
    /// `EACCES` for a wrong password, `EPERM` for a missing permission.
    pub(crate) fn check(&self, password: Password, needed: Permission) -> Result {
        if password != self.password {
            return Err(EACCES);
        }
        self.permission.require(needed)
    }
}

/// The LITE state of one process.
#[pin_data]
pub(crate) struct Process {
    /// Thread group id; 0 for kernel callers.
    pub(crate) tgid: i32,
    /// Handles, by handle number.
    /// Lock class `lite:handles`: see the lock order in [`crate::internal::core`].
    #[pin]
    handles: Mutex<SlotTable<HandleEntry>>,
    /// Asynchronous operations not yet reaped, by operation id.
    #[pin]
    pub(crate) ops: Mutex<SlotTable<Arc<AsyncOp>>>,
    /// Received requests not yet answered, by descriptor.
    /// Lock class `lite:rpc_descriptors`: see the lock order in [`crate::internal::core`].
    #[pin]
    pub(crate) descriptors: Mutex<SlotTable<ReplyTo>>,
    /// Priority of calls that pass `LITE_PRIORITY_NONE`.
    pub(crate) default_priority: DefaultPriority,
}

impl Process {
    /// Who pays for what the calling task creates for this process: its
    /// user, or nobody for kernel callers.
    pub(crate) fn payer(&self) -> Payer {
        if self.tgid == 0 {
            Payer::Kernel
        } else {
            Payer::User(cred::current_uid())
        }
    }

    /// Empty state for thread group `tgid`.
    pub(crate) fn new(tgid: i32) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Process {
                tgid,
                handles <- new_mutex!(SlotTable::new(), "lite:handles"),
                ops <- new_mutex!(SlotTable::new(), "lite:async_ops"),
                descriptors <- new_mutex!(SlotTable::new(), "lite:rpc_descriptors"),
                default_priority: DefaultPriority::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// A copy of what handle `handle` refers to.
    ///
    /// # Errors
    ///
    /// `EBADF` if the process has no such handle.
    pub(crate) fn handle(
        &self,
        handle: LmrHandle,
    ) -> Result<(Arc<Lmr>, Permission, Password, Role)> {
        let handles = self.handles.lock();
        let entry = handles.get(handle.raw()).ok_or(EBADF)?;
        Ok((
            entry.lmr.clone(),
            entry.permission,
            entry.password,
            entry.role,
        ))
    }

    /// The LMR of `handle` after checking password and permission.
    ///
    /// # Errors
    ///
    /// `EBADF` unknown handle, `EACCES` wrong password, `EPERM` missing permission.
    pub(crate) fn checked(
        &self,
        handle: LmrHandle,
        password: Password,
        needed: Permission,
    ) -> Result<Arc<Lmr>> {
        let handles = self.handles.lock();
        let entry = handles.get(handle.raw()).ok_or(EBADF)?;
        entry.check(password, needed)?;
        Ok(entry.lmr.clone())
    }

    /// The LMR of `handle` after checking permission only (operations that,
    /// as in the original LITE, take no password).
    pub(crate) fn permitted(&self, handle: LmrHandle, needed: Permission) -> Result<Arc<Lmr>> {
        let handles = self.handles.lock();
        let entry = handles.get(handle.raw()).ok_or(EBADF)?;
        entry.permission.require(needed)?;
        Ok(entry.lmr.clone())
    }

    /// Adds a handle.
    pub(crate) fn insert(&self, entry: HandleEntry) -> Result<LmrHandle> {
        self.handles.lock().insert(entry).map(LmrHandle::from_raw)
    }

    /// Takes handle `handle` away from the process.
    pub(crate) fn remove(&self, handle: LmrHandle) -> Option<HandleEntry> {
        self.handles.lock().remove(handle.raw())
    }

    /// Takes any one handle away from the process, for releasing them all.
    pub(crate) fn remove_any(&self) -> Option<HandleEntry> {
        let mut handles = self.handles.lock();
        let id = handles.first_id()?;
        handles.remove(id)
    }

    /// The LMR of owner handle `handle` and its id on this node, after
    /// checking password and permission.
    ///
    /// # Errors
    ///
    /// `EBADF`, `EACCES`, `EPERM` as [`Process::checked`]; `EINVAL` if the
    /// handle is a mapping.
    pub(crate) fn owned(
        &self,
        handle: LmrHandle,
        password: Password,
        needed: Permission,
    ) -> Result<(Arc<Lmr>, u64)> {
        let handles = self.handles.lock();
        let entry = handles.get(handle.raw()).ok_or(EBADF)?;
        let Role::Owner { lmr_id } = entry.role else {
            return Err(EINVAL);
        };
        entry.check(password, needed)?;
        Ok((entry.lmr.clone(), lmr_id))
    }

    /// Number of handles, and of those that are mappings.
    pub(crate) fn handle_counts(&self) -> (usize, usize) {
        let handles = self.handles.lock();
        let mappings = handles
            .values()
            .filter(|e| matches!(e.role, Role::Mapping { .. }))
            .count();
        (handles.len(), mappings)
    }
}

/// Every process with LITE state, by thread group id.
#[pin_data]
pub(crate) struct Processes {
    /// Lock class `lite:processes`: see the lock order in [`crate::internal::core`].
    #[pin]
    tree: Mutex<RBTree<i32, Arc<Process>>>,
}

impl Processes {
    /// No process yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Processes {
            tree <- new_mutex!(RBTree::new(), "lite:processes"),
        })
    }

    /// The state of `tgid`, created if it has none.
    pub(crate) fn get_or_create(&self, tgid: i32) -> Result<Arc<Process>> {
        if let Some(process) = self.find(tgid) {
            return Ok(process);
        }
        // Allocate outside the lock; another thread of the same process may
        // win the race, in which case its state is used.
        let fresh = Process::new(tgid)?;
        let node = RBTreeNode::new(tgid, fresh.clone(), GFP_KERNEL)?;
        let mut tree = self.tree.lock();
        if let Some(existing) = tree.get(&tgid) {
            return Ok(existing.clone());
        }
        tree.insert(node);
        Ok(fresh)
    }

    /// The state of `tgid`, if any.
    pub(crate) fn find(&self, tgid: i32) -> Option<Arc<Process>> {
        self.tree.lock().get(&tgid).cloned()
    }

    /// Removes and returns the state of `tgid`.
    pub(crate) fn remove(&self, tgid: i32) -> Option<Arc<Process>> {
        let removed = self.tree.lock().remove_node(&tgid)?;
        // The tree node is freed outside the lock.
        Some(removed.to_key_value().1)
    }

    /// The thread group id of some process with state, if any.
    pub(crate) fn any_tgid(&self) -> Option<i32> {
        self.tree.lock().iter().next().map(|(tgid, _)| *tgid)
    }

    /// Number of processes with state.
    pub(crate) fn count(&self) -> usize {
        self.tree.lock().values().count()
    }

    /// Handles of every process, and of those the mappings.
    pub(crate) fn handle_counts(&self) -> (usize, usize) {
        // PANIC: the sums count handles, each an object in memory, so they
        // stay far below `usize::MAX`.
        self.tree
            .lock()
            .values()
            .map(|p| p.handle_counts())
            .fold((0, 0), |(h, m), (ph, pm)| (h + ph, m + pm))
    }

    /// Sums `f` over every process.
    pub(crate) fn sum(&self, f: impl Fn(&Process) -> usize) -> usize {
        // PANIC: callers sum counts of objects in memory, far below
        // `usize::MAX`.
        self.tree.lock().values().map(|p| f(p)).sum()
    }
}
