// SPDX-License-Identifier: GPL-2.0

//! Limits every part of a node agrees on.

/// Most nodes in one cluster; node ids are below this.
pub(crate) const MAX_NODES: usize = 64;
