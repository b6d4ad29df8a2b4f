// SPDX-License-Identifier: GPL-2.0

//! Where an outgoing RPC request or reply is assembled before it is posted.

use kernel::prelude::*;

use crate::{internal::core::peer::Peer, verbs::DmaBuffer};

/// The bytes of a request or reply on their way out.
///
/// Small ones are copied into the work request itself (inline): the write
/// is only posted, not waited for, so a caller goes straight to waiting for
/// its reply and a server to its next request. Larger ones are written from
/// a DMA buffer, and the write is waited for.
pub(crate) enum Outgoing<'a> {
    /// All of these bytes go inline.
    Inline(&'a mut [u8]),
    /// The first `len` bytes of `buffer`.
    Staged {
        /// A DMA buffer of this node's device.
        buffer: &'a mut DmaBuffer,
        /// Bytes that go.
        len: usize,
    },
}

impl Outgoing<'_> {
    /// Copies `bytes` in at `at`.
    ///
    /// # Errors
    ///
    /// `EINVAL` if they do not fit.
    pub(crate) fn write(&mut self, at: usize, bytes: &[u8]) -> Result {
        match self {
            Outgoing::Inline(inline) => {
                let end = at.checked_add(bytes.len()).ok_or(EINVAL)?;
                inline
                    .get_mut(at..end)
                    .ok_or(EINVAL)?
                    .copy_from_slice(bytes);
                Ok(())
            }
            Outgoing::Staged { buffer, .. } => buffer.write_bytes(at, bytes),
        }
    }

    /// Writes the bytes to `remote` on `peer` with `imm`; `once_posted` is
    /// told whether the write was posted, before any wait for it.
    pub(crate) fn post(
        &self,
        peer: &Peer,
        remote: (u64, u32),
        imm: u32,
        once_posted: impl FnOnce(bool),
    ) -> Result {
        match self {
            Outgoing::Inline(inline) => {
                peer.rdma_write_imm_inline(inline, remote, imm, once_posted)
            }
            Outgoing::Staged { buffer, len } => {
                peer.rdma_write_imm_ordered(buffer, *len, remote, imm, once_posted)
            }
        }
    }
}
