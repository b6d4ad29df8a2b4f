// SPDX-License-Identifier: GPL-2.0

//! Quotas: what each user of this node may hold through LITE, and what
//! each other node's LMRs may hold on it.
//!
//! A call that creates something charges its user before it creates it and
//! keeps the [`Charge`] in what it created, so the charge is given back
//! however that goes away (freed, deregistered, its process exiting, the
//! node leaving). Kernel callers of the C API are not charged.
//!
//! The limits belong to the node and outlive its memberships; the bytes a
//! node holds for each other node are counted by its memory store.

pub(crate) mod amounts;
pub(crate) mod command;

use crate::internal::node_id::NodeId;
use core::fmt::{self, Write};
use kernel::{
    new_spinlock,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, SpinLock},
};

use self::{
    amounts::{write_value, Amounts, Resource},
    command::{Changes, Command},
};
use super::core::limits::MAX_NODES;
use super::util::vec::push_or_return;

/// Who pays for what a call creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Payer {
    /// The user with this real uid.
    User(u32),
    /// A kernel caller of the C API, not charged.
    Kernel,
}

/// One user: its own limits, if it has any, and what it holds.
struct UserQuota {
    limits: Option<Amounts>,
    usage: Amounts,
}

impl UserQuota {
    /// Whether the entry says nothing the defaults do not.
    fn is_idle(&self) -> bool {
        self.limits.is_none() && self.usage.is_zero()
    }
}

struct QuotaState {
    defaults: Amounts,
    users: RBTree<u32, UserQuota>,
    node_default: u64,
    node_limits: [Option<u64>; MAX_NODES],
}

/// The quotas of a node.
#[pin_data]
pub(crate) struct Quotas {
    /// Lock class `lite:quotas`: see the lock order in [`crate::internal::core`].
    #[pin]
    state: SpinLock<QuotaState>,
}

impl Quotas {
    /// Quotas with the default limits, and `node_default` bytes for what
    /// each other node's LMRs may hold here.
    pub(crate) fn new(node_default: u64) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Quotas {
                state <- new_spinlock!(
                    QuotaState {
                        defaults: Amounts::DEFAULT_LIMITS,
                        users: RBTree::new(),
                        node_default,
                        node_limits: [None; MAX_NODES],
                    },
                    "lite:quotas"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Charges `amounts` to `payer`; the charge lasts as long as the
    /// returned [`Charge`].
    ///
    /// # Errors
    ///
    /// `EDQUOT` if the payer would hold more than its limit of something
    /// (and nothing is charged), `ENOMEM`.
    pub(crate) fn charge(self: &Arc<Self>, payer: Payer, amounts: Amounts) -> Result<Charge> {
        let Payer::User(uid) = payer else {
            return Ok(Charge::none());
        };
        // A user's first entry is allocated before the lock is taken.
        let mut spare: Option<RBTreeNodeReservation<u32, UserQuota>> = None;
        loop {
            let mut state = self.state.lock();
            let defaults = state.defaults;
            if let Some(user) = state.users.get_mut(&uid) {
                let limits = user.limits.unwrap_or(defaults);
                user.usage = user
                    .usage
                    .plus_within(&amounts, &limits)
                    .map_err(|_| crate::errno::EDQUOT())?;
                break;
            }
            if let Some(reservation) = spare.take() {
                let usage = Amounts::ZERO
                    .plus_within(&amounts, &defaults)
                    .map_err(|_| crate::errno::EDQUOT())?;
                let entry = UserQuota {
                    limits: None,
                    usage,
                };
                state.users.insert(reservation.into_node(uid, entry));
                break;
            }
            drop(state);
            spare = Some(RBTreeNodeReservation::new(GFP_KERNEL)?);
        }
        Ok(Charge {
            quotas: Some(self.clone()),
            uid,
            amounts,
        })
    }

    /// Gives back `amounts` charged to `uid`.
    fn uncharge(&self, uid: u32, amounts: &Amounts) {
        let removed = {
            let mut state = self.state.lock();
            let Some(user) = state.users.get_mut(&uid) else {
                return;
            };
            user.usage = user.usage.minus(amounts);
            if user.is_idle() {
                state.users.remove_node(&uid)
            } else {
                None
            }
        };
        // Freed outside the lock.
        drop(removed);
    }

    /// How many bytes node `node`'s LMRs may hold on this node.
    pub(crate) fn node_limit(&self, node: NodeId) -> u64 {
        let state = self.state.lock();
        state
            .node_limits
            .get(node.index())
            .copied()
            .flatten()
            .unwrap_or(state.node_default)
    }

    /// Applies a line the administrator wrote.
    ///
    /// # Errors
    ///
    /// `ENOMEM`.
    pub(crate) fn apply(&self, command: Command) -> Result {
        match command {
            Command::SetDefaults(changes) => {
                let mut state = self.state.lock();
                state.defaults = changed(state.defaults, &changes);
            }
            Command::SetUser { uid, changes } => {
                let mut spare: Option<RBTreeNodeReservation<u32, UserQuota>> = None;
                loop {
                    let mut state = self.state.lock();
                    let defaults = state.defaults;
                    if let Some(user) = state.users.get_mut(&uid) {
                        user.limits = Some(changed(user.limits.unwrap_or(defaults), &changes));
                        break;
                    }
                    if let Some(reservation) = spare.take() {
                        let entry = UserQuota {
                            limits: Some(changed(defaults, &changes)),
                            usage: Amounts::ZERO,
                        };
                        state.users.insert(reservation.into_node(uid, entry));
                        break;
                    }
                    drop(state);
                    spare = Some(RBTreeNodeReservation::new(GFP_KERNEL)?);
                }
            }
            Command::ResetUser { uid } => {
                let removed = {
                    let mut state = self.state.lock();
                    match state.users.get_mut(&uid) {
                        Some(user) => {
                            user.limits = None;
                            if user.is_idle() {
                                state.users.remove_node(&uid)
                            } else {
                                None
                            }
                        }
                        None => None,
                    }
                };
                drop(removed);
            }
            Command::SetNodeDefault(limit) => self.state.lock().node_default = limit,
            Command::SetNode { node, limit } => self.set_node_limit(node, Some(limit)),
            Command::ResetNode { node } => self.set_node_limit(node, None),
        }
        Ok(())
    }

    fn set_node_limit(&self, node: NodeId, limit: Option<u64>) {
        let mut state = self.state.lock();
        if let Some(slot) = state.node_limits.get_mut(node.index()) {
            *slot = limit;
        }
    }

    /// What `uid` holds.
    #[cfg(CONFIG_LITE_KUNIT_TEST)]
    pub(crate) fn usage(&self, uid: u32) -> Amounts {
        self.state
            .lock()
            .users
            .get(&uid)
            .map_or(Amounts::ZERO, |u| u.usage)
    }

    /// Writes the limits and every user's usage, one line each (the
    /// format of `/sys/kernel/debug/lite/quotas`).
    pub(crate) fn write_text(&self, out: &mut impl Write) -> fmt::Result {
        let state = self.state.lock();
        out.write_str("limit default")?;
        state.defaults.write_text(out)?;
        out.write_str("\n")?;
        for (uid, user) in state.users.iter() {
            if let Some(limits) = &user.limits {
                write!(out, "limit uid {uid}")?;
                limits.write_text(out)?;
                out.write_str("\n")?;
            }
        }
        out.write_str("limit node default remote_memory=")?;
        write_value(out, state.node_default)?;
        out.write_str("\n")?;
        for (node, limit) in state.node_limits.iter().enumerate() {
            if let Some(limit) = limit {
                write!(out, "limit node {node} remote_memory=")?;
                write_value(out, *limit)?;
                out.write_str("\n")?;
            }
        }
        for (uid, user) in state.users.iter() {
            if !user.usage.is_zero() {
                write!(out, "usage uid {uid}")?;
                user.usage.write_text(out)?;
                out.write_str("\n")?;
            }
        }
        Ok(())
    }
}

/// `limits` with `changes` applied.
fn changed(limits: Amounts, changes: &Changes) -> Amounts {
    Resource::ALL
        .into_iter()
        .zip(changes.0)
        .fold(limits, |limits, (resource, change)| match change {
            Some(value) => limits.with(resource, value),
            None => limits,
        })
}

/// What one object holds of its user's quotas, given back when dropped.
pub(crate) struct Charge {
    quotas: Option<Arc<Quotas>>,
    uid: u32,
    amounts: Amounts,
}

impl Charge {
    /// A charge of nothing (for kernel callers, and what nobody created).
    pub(crate) const fn none() -> Charge {
        Charge {
            quotas: None,
            uid: 0,
            amounts: Amounts::ZERO,
        }
    }

    /// Whether the charge is of nothing.
    pub(crate) fn is_none(&self) -> bool {
        self.quotas.is_none()
    }

    /// Whether `other` is charged to the same user of the same quotas.
    pub(crate) fn same_payer(&self, other: &Charge) -> bool {
        match (&self.quotas, &other.quotas) {
            (Some(mine), Some(theirs)) => Arc::ptr_eq(mine, theirs) && self.uid == other.uid,
            _ => false,
        }
    }

    /// Adds `other`, charged to the same payer (see [`Charge::same_payer`]),
    /// to this charge; the sum goes back when this charge does. A charge of
    /// another payer is dropped instead (and so given back).
    pub(crate) fn absorb(&mut self, mut other: Charge) {
        if !self.same_payer(&other) {
            return;
        }
        // Against no limit, only an overflow fails: the sum saturates.
        self.amounts = self
            .amounts
            .plus_within(&other.amounts, &Amounts::UNLIMITED)
            .unwrap_or(Amounts::UNLIMITED);
        // Now part of this charge: `other` gives nothing back.
        other.quotas = None;
    }
}

/// Adds `charge` to the one of the same payer in `kept` (usually without
/// allocating), or keeps it beside them; without memory for it, hands it
/// back, for the caller to drop (which gives it back) once the lock over
/// `kept` is released.
pub(crate) fn keep_by_payer(
    kept: &mut KVec<Charge>,
    charge: Charge,
) -> Result<(), (Error, Charge)> {
    match kept.iter_mut().find(|held| held.same_payer(&charge)) {
        Some(held) => {
            held.absorb(charge);
            Ok(())
        }
        None => push_or_return(kept, charge),
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(quotas) = &self.quotas {
            quotas.uncharge(self.uid, &self.amounts);
        }
    }
}
