// SPDX-License-Identifier: GPL-2.0

//! LITE's kernel API for the Rust units built on it (LITE-DSM): what
//! `include/rdma/lite_api.h` offers kernel C code, as safe Rust.
//!
//! A unit on top of LITE reaches it through this module and nothing of
//! `internal`, as a module written against the C API would; the
//! architecture test checks that. Handles are those of the node's kernel
//! callers, as for the C API, and every call fails with `ENOTCONN` once the
//! session's cluster has been left.

use core::ffi::c_int;
use kernel::{prelude::*, sync::Arc};

pub(crate) use crate::internal::{
    kernel_messages::{Answer, Handler},
    node::LeaveHook,
    node_id::NodeId,
    wire_layout::{self as layout, wire_layout, WireField},
};

use crate::{
    errno,
    internal::{
        cluster::Cluster,
        kernel_messages::{Kind, MAX_REPLY},
        memory::{
            handle::{LmrHandle, Password},
            permission::Permission,
            transfer::{Direction, KernelSink, KernelSource},
            DataOp,
        },
        node::node,
        qos::priority::Priority,
        quota::{
            amounts::{Amounts, Resource},
            Charge, Payer,
        },
        rpc::{payload::ToKernel, Target},
    },
    sys::cred::current_uid,
};

/// The in-kernel services that have a port of their own on every node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Service {
    /// LITE-DSM's directories of pages.
    DsmDirectory,
    /// LITE-DSM's copies of pages.
    DsmCache,
}

impl Service {
    fn kind(self) -> Kind {
        match self {
            Service::DsmDirectory => Kind::DsmDirectory,
            Service::DsmCache => Kind::DsmCache,
        }
    }
}

/// Reading and writing (`LITE_PERM_READ | LITE_PERM_WRITE`).
pub(crate) const PERMISSION_READ_WRITE: u64 = Permission::READ.bits() | Permission::WRITE.bits();

/// The longest answer a service may give ([`Session::call`]).
pub(crate) const MAX_ANSWER: usize = MAX_REPLY;

/// Where in an LMR a transfer goes, and with what.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    /// Offset in the LMR.
    pub(crate) offset: u64,
    /// `LITE_PRIORITY_*`, `LITE_PRIORITY_NONE` for the default.
    pub(crate) priority: u32,
    /// The LMR's password.
    pub(crate) password: u64,
}

/// Runs `hook` before each `lite_leave` and `liteapi_leave` of this node,
/// while it is still a member, until LITE unloads.
///
/// # Errors
///
/// `ENODEV` before LITE has initialised.
pub(crate) fn before_every_leave(hook: Arc<dyn LeaveHook>) -> Result {
    node()?.set_leave_hook(hook);
    Ok(())
}

/// What the user of a task holds of its quotas for something made on its
/// behalf; given back when dropped.
pub(crate) struct QuotaCharge {
    _held: Charge,
}

/// The cluster this node has joined, as a kernel user of LITE holds it.
#[derive(Clone)]
pub(crate) struct Session(Arc<Cluster>);

impl Session {
    /// The cluster this node is a member of.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` before a join or after a leave.
    pub(crate) fn current() -> Result<Self> {
        Ok(Session(node()?.cluster()?))
    }

    /// Whether both are the same membership of the same cluster: a node
    /// that left and joined again has a new session.
    pub(crate) fn is(&self, other: &Session) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// This node's id.
    pub(crate) fn node_id(&self) -> NodeId {
        self.0.core.node_id()
    }

    /// Whether `node` is this node or a peer it is connected to.
    pub(crate) fn is_member(&self, node: NodeId) -> bool {
        let core = &self.0.core;
        node == core.node_id()
            || core
                .connected_peers()
                .is_ok_and(|peers| peers.contains(&node))
    }

    /// Allocates an LMR of `size` bytes, its chunks spread over the other
    /// nodes (`liteapi_alloc_remote_mem` with `LITE_NODE_SPREAD`).
    pub(crate) fn alloc_spread(&self, size: u64, password: u64) -> Result<u64> {
        let cluster = &self.0;
        let handle = cluster.memory.alloc_remote(
            &cluster.kernel_process,
            NodeId::new(0),
            size,
            0,
            Password::from_raw(password),
        )?;
        Ok(handle.raw())
    }

    /// Charges the calling task's user as `lite_alloc_remote` and
    /// `lite_add_ask_mr_table` would for an LMR of `size` bytes published
    /// under a name; the kernel API itself charges nobody.
    ///
    /// # Errors
    ///
    /// `EDQUOT` beyond the user's quota (nothing is charged), `ENOMEM`.
    pub(crate) fn charge_caller_for_lmr(&self, size: u64) -> Result<QuotaCharge> {
        let amounts = Amounts::of(Resource::RemoteMemory, size)
            .with(Resource::Lmrs, 1)
            .with(Resource::Names, 1);
        let charge = self
            .0
            .core
            .quotas
            .charge(Payer::User(current_uid()), amounts)?;
        Ok(QuotaCharge { _held: charge })
    }

    /// Frees LMR `handle` (`liteapi_free`).
    pub(crate) fn free(&self, handle: u64) -> Result {
        let cluster = &self.0;
        cluster
            .sharing
            .free(&cluster.kernel_process, LmrHandle::from_raw(handle))
    }

    /// Publishes LMR `handle` under `name` (`liteapi_add_askmr_table`).
    pub(crate) fn publish(&self, name: u64, handle: u64, permission: u64, password: u64) -> Result {
        let cluster = &self.0;
        cluster.sharing.publish(
            &cluster.kernel_process,
            name,
            LmrHandle::from_raw(handle),
            permission,
            Password::from_raw(password),
        )
    }

    /// Maps the LMR `owner` published as `name` (`liteapi_ask_mr`).
    pub(crate) fn map_published(
        &self,
        owner: NodeId,
        name: u64,
        permission: u64,
        password: u64,
    ) -> Result<u64> {
        let cluster = &self.0;
        let handle = cluster.sharing.ask_lmr(
            &cluster.kernel_process,
            owner,
            name,
            permission,
            Password::from_raw(password),
        )?;
        Ok(handle.raw())
    }

    /// Drops mapping `handle` (`liteapi_umap_lmr`).
    pub(crate) fn unmap(&self, handle: u64) -> Result {
        let cluster = &self.0;
        cluster
            .sharing
            .umap(&cluster.kernel_process, LmrHandle::from_raw(handle))
    }

    /// Reads `buf.len()` bytes of LMR `handle` at `at`
    /// (`liteapi_rdma_read_offset`).
    pub(crate) fn read(&self, handle: u64, at: Place, buf: &mut [u8]) -> Result {
        let len = buf.len() as u64;
        let mut sink = KernelSink { rest: buf };
        self.transfer(handle, at, len, Direction::Read(&mut sink))
    }

    /// Writes `data` into LMR `handle` at `at`
    /// (`liteapi_rdma_write_offset`).
    pub(crate) fn write(&self, handle: u64, at: Place, data: &[u8]) -> Result {
        let mut source = KernelSource { rest: data };
        let len = data.len() as u64;
        self.transfer(handle, at, len, Direction::Write(&mut source))
    }

    fn transfer(&self, handle: u64, at: Place, len: u64, direction: Direction<'_>) -> Result {
        let cluster = &self.0;
        let op = DataOp {
            handle: LmrHandle::from_raw(handle),
            direction,
            len,
            offset: at.offset,
            priority: at.priority,
            password: Password::from_raw(at.password),
        };
        cluster.memory.transfer(&cluster.kernel_process, op)
    }

    /// Serves `service` on this node with `handler`, in a thread of its
    /// own, until [`Session::stop_serving`] or the node leaves.
    pub(crate) fn serve(&self, service: Service, handler: Arc<dyn Handler>) -> Result {
        self.0.kernel_messages.register(service.kind(), handler)
    }

    /// Stops serving `service`, waiting for the handler in flight.
    ///
    /// # Errors
    ///
    /// `ENOENT` not served, `EDEADLK` called from its own handler.
    pub(crate) fn stop_serving(&self, service: Service) -> Result {
        self.0.kernel_messages.unregister(service.kind())
    }

    /// Calls `service` on `node` with `message`; the answer, at most
    /// [`MAX_ANSWER`] bytes, goes to the start of `answer`. Returns its
    /// length.
    ///
    /// # Errors
    ///
    /// `ECONNREFUSED` `node` does not serve it, `EHOSTDOWN` `node` is gone,
    /// `EMSGSIZE` the answer does not fit, or the handler's error.
    pub(crate) fn call(
        &self,
        node: NodeId,
        service: Service,
        message: &[u8],
        answer: &mut [u8],
    ) -> Result<usize> {
        let cluster = &self.0;
        let target = target(cluster, service.kind(), Priority::None);
        let len = call_into(cluster, node, &target, message, answer)?;
        Ok(len as usize)
    }
}

/// The target of a kernel message of `kind` at `priority`.
pub(super) fn target(cluster: &Cluster, kind: Kind, priority: Priority) -> Target {
    Target {
        port: kind.port(),
        nonblocking: false,
        priority,
    }
    .with_default(&cluster.kernel_process.default_priority)
}

/// Calls `node` with `message` and copies the reply, of at most
/// `MAX_REPLY` bytes, to `out`; returns its length.
pub(super) fn call_into(
    cluster: &Cluster,
    node: NodeId,
    target: &Target,
    message: &[u8],
    out: &mut [u8],
) -> Result<c_int> {
    let reply = cluster
        .rpc
        .call(node, target, message.into(), MAX_REPLY as u64, ToKernel)?;
    out.get_mut(..reply.len())
        .ok_or(errno::EMSGSIZE())?
        .copy_from_slice(&reply);
    Ok(reply.len() as c_int)
}
