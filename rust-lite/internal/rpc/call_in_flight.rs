// SPDX-License-Identifier: GPL-2.0

//! A call whose reply is reaped later (`lite_send_reply_imm_async`).
//!
//! Posting is the same as for a blocking call: the request goes into the
//! server's ring (waiting for ring space, so nothing is dropped) and a reply
//! slot waits for the answer. Only the wait moves: the caller asks later
//! whether the answer came, waits for it, or gives up.

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{prelude::*, sync::Arc};

use super::{
    client::{Pending, ReplySlots},
    payload::{ReplyDestination, ToKernel},
};
use crate::{
    errno,
    internal::{async_io::op::PendingReply, rpc::client::RPC_TIMEOUT_MS, util::clock::now_ms},
};

/// A posted call waiting to be reaped.
///
/// # Invariants
///
/// `pending` is [`Pending::Remote`] or [`Pending::Local`]: a one-way
/// message is never a call in flight. While `ended` is false the call owns
/// its reply slot; setting it (once) gives the slot up, by taking the
/// answer or abandoning the call, so a slot is never given up twice.
pub(crate) struct CallInFlight {
    slots: Arc<ReplySlots>,
    pending: Pending,
    /// When the caller stops waiting for the answer.
    deadline_ms: u64,
    /// The answer was taken or the call abandoned.
    ended: AtomicBool,
}

impl CallInFlight {
    /// A call just posted as `pending`, its reply (if remote) in one of
    /// `slots`.
    pub(super) fn new(slots: Arc<ReplySlots>, pending: Pending) -> Result<Self> {
        if matches!(pending, Pending::OneWay) {
            return Err(EINVAL);
        }
        Ok(CallInFlight {
            slots,
            pending,
            deadline_ms: now_ms().saturating_add(u64::from(RPC_TIMEOUT_MS)),
            ended: AtomicBool::new(false),
        })
    }

    /// Gives the call up: its reply, when it comes, is discarded. Nothing
    /// happens if the reply was taken.
    pub(crate) fn abandon(&self) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        match &self.pending {
            Pending::Remote(slot) => self.slots.abandon(*slot),
            Pending::Local(call) => {
                let _ = call.take_answer();
            }
            Pending::OneWay => {}
        }
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        self.abandon();
    }
}

impl PendingReply for CallInFlight {
    /// Whether the answer came, or the caller's wait for it is over.
    fn is_settled(&self) -> bool {
        now_ms() >= self.deadline_ms
            || match &self.pending {
                Pending::Remote(slot) => self.slots.is_answered(*slot),
                Pending::Local(call) => call.is_answered(),
                Pending::OneWay => true,
            }
    }

    /// Waits until [`PendingReply::is_settled`].
    ///
    /// # Errors
    ///
    /// `ERESTARTSYS` if a signal arrived; the call goes on.
    fn wait_settled(&self) -> Result {
        match &self.pending {
            Pending::Remote(slot) => self.slots.wait_answered(*slot, self.deadline_ms),
            Pending::Local(call) => call.wait_answered(self.deadline_ms),
            Pending::OneWay => Ok(()),
        }
    }

    /// Takes the reply; `ETIMEDOUT` (the call is abandoned) if it has not
    /// come, `ECANCELED` if it was taken or abandoned before.
    fn take_reply(&self) -> Result<KVVec<u8>> {
        if self.ended.swap(true, Ordering::AcqRel) {
            return Err(errno::ECANCELED());
        }
        match &self.pending {
            Pending::Remote(slot) => self
                .slots
                .take_answer(*slot, |buffer, len| ToKernel.take_from_slot(buffer, len)),
            Pending::Local(call) => call.take_answer(),
            Pending::OneWay => Err(errno::ECANCELED()),
        }
    }
}
