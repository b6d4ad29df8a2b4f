// SPDX-License-Identifier: GPL-2.0

//! Limits every part of a node agrees on.

/// Most nodes in one cluster; node ids are below this.
pub(crate) const MAX_NODES: usize = 64;

/// `lite_alloc_remote` target meaning "spread over the other nodes".
pub(crate) const NODE_SPREAD: u32 = 0;
