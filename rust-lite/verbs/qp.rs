// SPDX-License-Identifier: GPL-2.0

//! Reliable-connected queue pairs.

use core::{
    ptr::{null, null_mut, NonNull},
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{bindings, c_str, error::from_err_ptr, prelude::*, sync::Arc};

use super::{check, device::mtu_from_bytes, CompletionQueue, Device, PortConfig, ProtectionDomain};

/// Access a connected peer has to this node's memory through the global key.
const REMOTE_ACCESS: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

/// Outstanding RDMA reads and atomics per queue pair, each direction.
const MAX_RD_ATOMIC: u8 = 16;

/// Local ACK timeout exponent: 4.096 us * 2^19 = 2.1 s per try.
///
/// Generous on purpose: under emulation a peer may need far longer than on
/// hardware to take in a large message, and a premature timeout resends the
/// whole message, which can snowball into a retransmission storm.
const ACK_TIMEOUT: u8 = 19;

/// Transport retries before a request fails: the most that is still finite
/// (7 means "retry forever" to Soft-RoCE), so a request to a peer that died
/// fails after at most 7 tries of [`ACK_TIMEOUT`] (about 15 s) even if
/// nobody fences the connection first.
const RETRY_COUNT: u8 = 6;

/// Receiver-not-ready retries; 7 means retry for as long as the peer keeps
/// answering "not ready". Only a live peer answers so (a dead one is caught
/// by [`RETRY_COUNT`]), and a peer declared dead is fenced, which ends the
/// retries; a finite count would instead break connections whenever a busy
/// peer reposts its receive buffers late.
const RNR_RETRY: u8 = 7;

/// Minimal RNR NAK timer code (12 = 0.64 ms).
const MIN_RNR_TIMER: u8 = 12;

/// Sizes of a queue pair's work queues.
pub(crate) struct QueueSizes {
    /// Send queue depth.
    pub(crate) send: u32,
    /// Receive queue depth.
    pub(crate) recv: u32,
    /// Bytes a send-queue work request may carry inline (copied into the
    /// request when it is posted); the device may allow more, or refuse.
    pub(crate) inline: u32,
}

/// The remote end of a connection.
pub(crate) struct RemoteEnd {
    /// Remote queue pair number.
    pub(crate) qpn: u32,
    /// Remote initial packet sequence number.
    pub(crate) psn: u32,
    /// Remote LID (InfiniBand).
    pub(crate) lid: u16,
    /// Remote port MTU in bytes.
    pub(crate) mtu: u16,
    /// Remote GID.
    pub(crate) gid: [u8; 16],
}

/// One scatter/gather element of local memory.
pub(super) struct LocalSegment {
    /// DMA address on the QP's device (covered by the PD's local DMA key).
    pub(super) addr: u64,
    /// Length in bytes.
    pub(super) len: u32,
}

/// An RC queue pair.
///
/// # Invariants
///
/// `ptr` is an RC QP created in `pd` with `send_cq` and `recv_cq`, owned by
/// this object. Holding the `Arc`s keeps those alive until the QP is destroyed.
/// Once `new` has returned, `ib_modify_qp` is only called on it by the
/// thread that set `modifying` from `false` to `true`, until it stores
/// `false` again.
pub(super) struct QueuePair {
    ptr: NonNull<bindings::ib_qp>,
    psn: u32,
    /// Bytes a work request may carry inline, as the device granted.
    max_inline: u32,
    /// Serialises calls to `ib_modify_qp` (see the invariants).
    modifying: AtomicBool,
    pd: Arc<ProtectionDomain>,
    _send_cq: Arc<CompletionQueue>,
    _recv_cq: Arc<CompletionQueue>,
}

// SAFETY: A QP is not tied to a thread: it may be used and destroyed (`drop`)
// from any thread in process context.
unsafe impl Send for QueuePair {}
// SAFETY: Of the `&self` methods, `qpn` reads a field fixed at creation, and
// `post_send`/`post_atomic`/`post_recv` call `ib_post_send`/`ib_post_recv`,
// which providers serialise per work queue (rxe `sq_lock`/`producer_lock`
// and `state_lock`, mlx5 `sq.lock`/`rq.lock`) and which may run concurrently
// with a state change. `connect` and `to_error` call `ib_modify_qp`, which
// is not safe to call concurrently on one QP (the core swaps the QP's GID
// attribute references without a lock): `modifying` lets only one thread at
// a time do so (type invariant).
unsafe impl Sync for QueuePair {}

impl QueuePair {
    /// Creates an RC QP and moves it to INIT on `port`.
    pub(super) fn new(
        pd: &Arc<ProtectionDomain>,
        send_cq: &Arc<CompletionQueue>,
        recv_cq: &Arc<CompletionQueue>,
        sizes: QueueSizes,
        port: &PortConfig,
    ) -> Result<Self> {
        let mut attr = bindings::ib_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: sizes.send,
                max_recv_wr: sizes.recv,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: sizes.inline,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: `pd` is a valid PD (its type invariant) and `attr` is
        // valid for the call; the CQs it names are valid (their type
        // invariants) and outlive the QP (held below).
        let qp = from_err_ptr(unsafe {
            bindings::ib_create_qp_kernel(pd.as_ptr(), &mut attr, c_str!("lite").as_char_ptr())
        })?;
        let ptr = NonNull::new(qp).ok_or(ENOMEM)?;
        // SAFETY: Plain call without arguments or memory-safety requirements.
        let psn = unsafe { bindings::get_random_u32() } & 0x00ff_ffff;
        // INVARIANT: Created above and owned from here on; the modification
        // below runs before the object is returned, so no other thread can
        // modify the QP concurrently.
        let this = QueuePair {
            ptr,
            psn,
            // The provider wrote back what it granted.
            max_inline: attr.cap.max_inline_data,
            modifying: AtomicBool::new(false),
            pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
        };
        let mut init = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_INIT,
            pkey_index: 0,
            port_num: port.port,
            qp_access_flags: REMOTE_ACCESS as i32,
            ..Default::default()
        };
        this.modify(
            &mut init,
            bindings::ib_qp_attr_mask_IB_QP_STATE
                | bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
                | bindings::ib_qp_attr_mask_IB_QP_PORT
                | bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
        )?;
        Ok(this)
    }

    /// Queue pair number.
    pub(super) fn qpn(&self) -> u32 {
        // SAFETY: `ptr` is valid by the type invariant, and `qp_num` is set
        // at creation and never changed.
        unsafe { (*self.ptr.as_ptr()).qp_num }
    }

    /// Bytes a work request may carry inline.
    pub(super) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Initial packet sequence number of the send side.
    pub(super) fn psn(&self) -> u32 {
        self.psn
    }

    /// The device the QP is on.
    pub(super) fn device(&self) -> &Device {
        self.pd.device()
    }

    /// Local key for segments in kernel memory.
    pub(super) fn lkey(&self) -> u32 {
        self.pd.local_dma_lkey()
    }

    /// Calls `ib_modify_qp`.
    ///
    /// Callers must be the only thread modifying the QP: `new` before it
    /// returns the object, or `connect` or `to_error` holding `modifying`.
    fn modify(&self, attr: &mut bindings::ib_qp_attr, mask: u32) -> Result {
        // SAFETY: `ptr` is valid (type invariant), `attr` is valid for the
        // call, and no other thread modifies the QP concurrently (required
        // of the callers above).
        check(unsafe { bindings::ib_modify_qp(self.ptr.as_ptr(), attr, mask as i32) })?;
        Ok(())
    }

    /// Connects to `remote`: INIT to RTR to RTS.
    ///
    /// # Errors
    ///
    /// `EBUSY` if another thread is connecting this QP at the same time;
    /// the error of `ib_modify_qp` if a transition fails.
    pub(super) fn connect(&self, remote: &RemoteEnd, port: &PortConfig) -> Result {
        if self
            .modifying
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(EBUSY);
        }
        // INVARIANT: This thread set `modifying`, and clears it once it no
        // longer modifies the QP.
        let result = self.transition_to_rts(remote, port);
        self.modifying.store(false, Ordering::Release);
        result
    }

    /// Moves the QP to the error state: the device stops executing its work
    /// requests and completes every outstanding one with a flush error, so
    /// nobody waits on it any longer. A QP being connected is moved once
    /// that ends.
    pub(super) fn to_error(&self) -> Result {
        while self
            .modifying
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // `connect` holds it for two state changes, never for long.
            crate::sys::sched::sleep_uninterruptible_ms(1);
        }
        // INVARIANT: This thread set `modifying`, and clears it below.
        let mut attr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_ERR,
            ..Default::default()
        };
        let result = self.modify(&mut attr, bindings::ib_qp_attr_mask_IB_QP_STATE);
        self.modifying.store(false, Ordering::Release);
        result
    }

    /// INIT to RTR to RTS; the caller holds `modifying`.
    fn transition_to_rts(&self, remote: &RemoteEnd, port: &PortConfig) -> Result {
        let mut rtr = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_RTR,
            path_mtu: mtu_from_bytes(remote.mtu.min(port.mtu_bytes())),
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            max_dest_rd_atomic: MAX_RD_ATOMIC,
            min_rnr_timer: MIN_RNR_TIMER,
            ..Default::default()
        };
        let ah = &mut rtr.ah_attr;
        ah.port_num = port.port;
        ah.sl = 0;
        if port.roce {
            ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        } else {
            ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_IB;
            ah.__bindgen_anon_1.ib = bindings::ib_ah_attr {
                dlid: remote.lid,
                ..Default::default()
            };
        }
        if port.roce || remote.gid.iter().any(|&b| b != 0) {
            ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
            ah.grh.dgid.raw = remote.gid;
            ah.grh.sgid_index = port.gid_index as u8;
            ah.grh.hop_limit = 64;
        }
        self.modify(
            &mut rtr,
            bindings::ib_qp_attr_mask_IB_QP_STATE
                | bindings::ib_qp_attr_mask_IB_QP_AV
                | bindings::ib_qp_attr_mask_IB_QP_PATH_MTU
                | bindings::ib_qp_attr_mask_IB_QP_DEST_QPN
                | bindings::ib_qp_attr_mask_IB_QP_RQ_PSN
                | bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC
                | bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER,
        )?;
        let mut rts = bindings::ib_qp_attr {
            qp_state: bindings::ib_qp_state_IB_QPS_RTS,
            timeout: ACK_TIMEOUT,
            retry_cnt: RETRY_COUNT,
            rnr_retry: RNR_RETRY,
            sq_psn: self.psn,
            max_rd_atomic: MAX_RD_ATOMIC,
            ..Default::default()
        };
        self.modify(
            &mut rts,
            bindings::ib_qp_attr_mask_IB_QP_STATE
                | bindings::ib_qp_attr_mask_IB_QP_TIMEOUT
                | bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT
                | bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY
                | bindings::ib_qp_attr_mask_IB_QP_SQ_PSN
                | bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC,
        )
    }

    /// The scatter/gather element for `local`.
    fn sge(&self, local: &LocalSegment) -> bindings::ib_sge {
        bindings::ib_sge {
            addr: local.addr,
            length: local.len,
            lkey: self.lkey(),
        }
    }

    /// Posts one signaled send-queue work request.
    ///
    /// `remote` is `Some((address, rkey))` for RDMA reads and writes; `imm`
    /// the immediate value of a write with immediate.
    ///
    /// # Safety
    ///
    /// `local` must describe memory DMA-mapped on this QP's device (reachable
    /// with the PD's local DMA key) and owned by the caller or an object it
    /// borrows. From the call until the completion for `wr_id` has been
    /// polled from the send CQ (or the QP has been destroyed), that memory
    /// must stay allocated and mapped, and no Rust reference may cover it:
    /// the device reads it for sends and RDMA writes and writes it for RDMA
    /// reads, so the CPU may only use raw copies on it meanwhile (which see
    /// or leave unspecified bytes).
    pub(super) unsafe fn post_send(
        &self,
        opcode: bindings::ib_wr_opcode,
        local: &LocalSegment,
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        wr_id: u64,
    ) -> Result {
        let mut sge = self.sge(local);
        let mut wr = bindings::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        wr.wr.num_sge = 1;
        wr.wr.opcode = opcode;
        wr.wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        if let Some((addr, rkey)) = remote {
            wr.remote_addr = addr;
            wr.rkey = rkey;
        }
        if let Some(imm) = imm {
            // The immediate travels in network byte order.
            wr.wr.ex.imm_data = imm.to_be();
        }
        let mut bad: *const bindings::ib_send_wr = null();
        // The provider reaches `remote_addr` and `rkey` with `rdma_wr()`
        // (`container_of`), so pass a pointer to the whole `ib_rdma_wr`, whose
        // first field is `wr`.
        let send_wr = core::ptr::addr_of!(wr).cast::<bindings::ib_send_wr>();
        // SAFETY: `ptr` is valid (type invariant); `wr` and `sge` live for
        // the call, which is all the verbs API needs of them, and `send_wr`
        // covers all of `wr`; the memory they describe stays valid and
        // unreferenced until completion (safety requirements).
        check(unsafe { bindings::ib_post_send(self.ptr.as_ptr(), send_wr, &mut bad) })?;
        Ok(())
    }

    /// Posts one signaled RDMA write with immediate of `bytes`, which the
    /// provider copies into the work request before this returns
    /// (`IB_SEND_INLINE`), so they need not outlive the call.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `bytes` exceed [`QueuePair::max_inline`], and the error of
    /// `ib_post_send`.
    pub(super) fn post_write_imm_inline(
        &self,
        bytes: &[u8],
        remote: (u64, u32),
        imm: u32,
        wr_id: u64,
    ) -> Result {
        self.post_inline(
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
            bytes,
            Some(remote),
            Some(imm),
            wr_id,
        )
    }

    /// Posts one signaled send of `bytes`, copied into the work request
    /// before this returns as by [`QueuePair::post_write_imm_inline`].
    ///
    /// # Errors
    ///
    /// As [`QueuePair::post_write_imm_inline`].
    pub(super) fn post_send_inline(&self, bytes: &[u8], wr_id: u64) -> Result {
        self.post_inline(bindings::ib_wr_opcode_IB_WR_SEND, bytes, None, None, wr_id)
    }

    /// Posts one signaled `opcode` request carrying `bytes` inline: to
    /// `remote` for an RDMA write, with immediate `imm` if given.
    fn post_inline(
        &self,
        opcode: bindings::ib_wr_opcode,
        bytes: &[u8],
        remote: Option<(u64, u32)>,
        imm: Option<u32>,
        wr_id: u64,
    ) -> Result {
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|&len| len <= self.max_inline)
            .ok_or(EINVAL)?;
        // Inline data is addressed by its kernel virtual address; the key is
        // not used.
        let mut sge = bindings::ib_sge {
            addr: bytes.as_ptr() as u64,
            length: len,
            lkey: self.lkey(),
        };
        let mut wr = bindings::ib_rdma_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        // No element for no bytes: the address is not read then.
        wr.wr.num_sge = i32::from(len > 0);
        wr.wr.opcode = opcode;
        wr.wr.send_flags =
            bindings::ib_send_flags_IB_SEND_SIGNALED | bindings::ib_send_flags_IB_SEND_INLINE;
        if let Some((addr, rkey)) = remote {
            wr.remote_addr = addr;
            wr.rkey = rkey;
        }
        if let Some(imm) = imm {
            // The immediate travels in network byte order.
            wr.wr.ex.imm_data = imm.to_be();
        }
        let mut bad: *const bindings::ib_send_wr = null();
        // As in `post_send`: the provider uses `rdma_wr()` (`container_of`).
        let send_wr = core::ptr::addr_of!(wr).cast::<bindings::ib_send_wr>();
        // SAFETY: `ptr` is valid (type invariant); `wr` and `sge` live for
        // the call and `send_wr` covers all of `wr`. With `IB_SEND_INLINE`
        // the verbs contract has the provider copy the `len` bytes at
        // `sge.addr` (all inside `bytes`, borrowed for the call) into the
        // work request during the call and never read them afterwards; it
        // honours the flag for up to the `max_inline_data` it granted when
        // the QP was created, and `len` is within that. No memory is left in
        // the device's use after the call. With `len == 0` no element is
        // passed, so the address is not read.
        check(unsafe { bindings::ib_post_send(self.ptr.as_ptr(), send_wr, &mut bad) })?;
        Ok(())
    }

    /// Posts one signaled atomic work request on the 8 bytes at `remote`.
    ///
    /// The value found there before the operation is stored into `local`
    /// (8 bytes). For a compare-and-swap, `compare` is the expected value
    /// and `swap` the new one; for a fetch-and-add, `compare` is the addend.
    ///
    /// # Safety
    ///
    /// As for [`Self::post_send`]; `local` must describe 8 bytes, which the
    /// device writes.
    pub(super) unsafe fn post_atomic(
        &self,
        opcode: bindings::ib_wr_opcode,
        local: &LocalSegment,
        remote: (u64, u32),
        compare: u64,
        swap: u64,
        wr_id: u64,
    ) -> Result {
        let mut sge = self.sge(local);
        let mut wr = bindings::ib_atomic_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.sg_list = &mut sge;
        wr.wr.num_sge = 1;
        wr.wr.opcode = opcode;
        wr.wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        wr.remote_addr = remote.0;
        wr.rkey = remote.1;
        wr.compare_add = compare;
        wr.swap = swap;
        let mut bad: *const bindings::ib_send_wr = null();
        // As in `post_send`: the provider uses `atomic_wr()` (`container_of`).
        let send_wr = core::ptr::addr_of!(wr).cast::<bindings::ib_send_wr>();
        // SAFETY: `ptr` is valid (type invariant); `wr` and `sge` live for
        // the call and `send_wr` covers all of `wr`; the memory `local`
        // describes stays valid and unreferenced until completion (safety
        // requirements).
        check(unsafe { bindings::ib_post_send(self.ptr.as_ptr(), send_wr, &mut bad) })?;
        Ok(())
    }

    /// Posts one signaled registration of `mr` with a fresh key and
    /// `access`.
    ///
    /// # Safety
    ///
    /// `mr` must be a fast-registration region of this QP's PD, mapped
    /// (`lite_map_mr`) over memory that stays DMA-mapped on this QP's device
    /// while the region lives, and not registered already; `mr` must stay
    /// allocated until the completion for `wr_id` has been polled from the
    /// send CQ (or the QP has been destroyed).
    pub(super) unsafe fn post_reg_mr(
        &self,
        mr: *mut bindings::ib_mr,
        access: u32,
        wr_id: u64,
    ) -> Result {
        // SAFETY: `mr` is a valid region that nothing registers meanwhile
        // (safety requirements): its key can change.
        let key = unsafe {
            bindings::ib_update_fast_reg_key(mr, bindings::ib_inc_rkey((*mr).rkey) as u8);
            (*mr).rkey
        };
        let mut wr = bindings::ib_reg_wr::default();
        wr.wr.__bindgen_anon_1.wr_id = wr_id;
        wr.wr.opcode = bindings::ib_wr_opcode_IB_WR_REG_MR;
        wr.wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        wr.mr = mr;
        wr.key = key;
        wr.access = access as i32;
        let mut bad: *const bindings::ib_send_wr = null();
        // As in `post_send`: the provider uses `reg_wr()` (`container_of`).
        let send_wr = core::ptr::addr_of!(wr).cast::<bindings::ib_send_wr>();
        // SAFETY: `ptr` is valid (type invariant); `wr` lives for the call
        // and `send_wr` covers all of it; `mr` is a mapped region of the
        // same PD that outlives the request (safety requirements).
        check(unsafe { bindings::ib_post_send(self.ptr.as_ptr(), send_wr, &mut bad) })?;
        Ok(())
    }

    /// Posts one receive work request.
    ///
    /// # Safety
    ///
    /// `local` must describe memory DMA-mapped on this QP's device (reachable
    /// with the PD's local DMA key) and owned by the caller or an object it
    /// borrows. Until the completion for `wr_id` has been polled from the
    /// receive CQ (or the QP has been destroyed), that memory must stay
    /// allocated and mapped, and no Rust reference may cover it: the device
    /// may write it at any time, so the CPU may only use raw copies on it
    /// meanwhile (which see unspecified bytes).
    pub(super) unsafe fn post_recv(&self, local: &LocalSegment, wr_id: u64) -> Result {
        let mut sge = self.sge(local);
        let mut wr = bindings::ib_recv_wr::default();
        wr.__bindgen_anon_1.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *const bindings::ib_recv_wr = null();
        // SAFETY: `ptr` is valid (type invariant); `wr` and `sge` live for
        // the call, which is all the verbs API needs of them; the memory
        // `local` describes stays valid and unreferenced until completion
        // (safety requirements).
        check(unsafe { bindings::ib_post_recv(self.ptr.as_ptr(), &wr, &mut bad) })?;
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: The QP is owned by this object (type invariant) and no call
        // on it can be in progress (this is `&mut self`). Destroying it ends
        // all device access to memory its work requests named, and its PD
        // and CQs are still alive (the `Arc` fields are dropped after this).
        unsafe { bindings::ib_destroy_qp_user(self.ptr.as_ptr(), null_mut()) };
    }
}
