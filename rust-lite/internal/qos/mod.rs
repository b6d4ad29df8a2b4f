// SPDX-License-Identifier: GPL-2.0

//! Priorities, traffic prioritization and the node's statistics: node-wide
//! state every data operation goes through, kept in lock-free statics.

pub(crate) mod admission;
#[expect(unreachable_pub, reason = "shared with the userspace tools")]
pub(crate) mod op_kind;
pub(crate) mod op_stats;
pub(crate) mod priority;
pub(crate) mod stats;
