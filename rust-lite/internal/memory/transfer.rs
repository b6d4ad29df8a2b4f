// SPDX-License-Identifier: GPL-2.0

//! Reading and writing LMRs (`lite_rdma_write`, `lite_rdma_read`).
//!
//! Data moves through a staging buffer the device can access: for a write
//! the caller's bytes are copied into it and written to the chunk's node
//! with one RDMA write per piece; a read does the reverse. Chunks on this
//! node are copied directly. Transfers of up to a page take a buffer of the
//! node's staging pool, so that a small write or read does not allocate,
//! zero and map a page of its own.

use kernel::{
    prelude::*,
    uaccess::{UserSliceReader, UserSliceWriter},
};

use super::{chunk::pieces_in, lmr::Lmr};
use crate::{
    internal::core::Core,
    verbs::{DmaBuffer, STAGING_SIZE},
};

/// Largest piece moved by one RDMA operation.
pub(crate) const MAX_PIECE: u64 = 256 << 10;

/// Smallest staging buffer tried when memory is fragmented.
const MIN_PIECE: usize = 4096;

/// Where written bytes come from.
pub(crate) trait Source {
    /// Fills the first `len` bytes of `staging` with the next `len` bytes.
    fn fill(&mut self, staging: &mut DmaBuffer, len: usize) -> Result;
}

/// Where read bytes go.
pub(crate) trait Sink {
    /// Takes the first `len` bytes of `staging` as the next `len` bytes.
    fn drain(&mut self, staging: &mut DmaBuffer, len: usize) -> Result;
}

impl Source for UserSliceReader {
    fn fill(&mut self, staging: &mut DmaBuffer, len: usize) -> Result {
        staging.fill_from_user(0, self, len)
    }
}

impl Sink for UserSliceWriter {
    fn drain(&mut self, staging: &mut DmaBuffer, len: usize) -> Result {
        staging.copy_to_user(0, self, len)
    }
}

/// Bytes from a kernel buffer.
pub(crate) struct KernelSource<'a> {
    /// Bytes not consumed yet.
    pub(crate) rest: &'a [u8],
}

impl Source for KernelSource<'_> {
    fn fill(&mut self, staging: &mut DmaBuffer, len: usize) -> Result {
        let now = self.rest.get(..len).ok_or(EINVAL)?;
        staging.write_bytes(0, now)?;
        // PANIC: `len` is at most `self.rest.len()`, checked just above.
        self.rest = &self.rest[len..];
        Ok(())
    }
}

/// Bytes into a kernel buffer.
pub(crate) struct KernelSink<'a> {
    /// Room not filled yet.
    pub(crate) rest: &'a mut [u8],
}

impl Sink for KernelSink<'_> {
    fn drain(&mut self, staging: &mut DmaBuffer, len: usize) -> Result {
        if len > self.rest.len() {
            return Err(EINVAL);
        }
        // PANIC: `len` is at most `self.rest.len()`, checked just above.
        let (now, rest) = core::mem::take(&mut self.rest).split_at_mut(len);
        staging.read_bytes(0, now)?;
        self.rest = rest;
        Ok(())
    }
}

/// Direction of a transfer.
pub(crate) enum Direction<'a> {
    /// Into the LMR.
    Write(&'a mut dyn Source),
    /// Out of the LMR.
    Read(&'a mut dyn Sink),
}

/// A staging buffer for a transfer of `len` bytes: as large as the
/// transfer up to [`MAX_PIECE`], smaller if memory is fragmented.
pub(crate) fn staging_buffer(core: &Core, len: u64) -> Result<DmaBuffer> {
    // PANIC: `1 <= MAX_PIECE`, so `clamp` accepts the bounds.
    let mut size = usize::try_from(len.clamp(1, MAX_PIECE)).map_err(|_| EINVAL)?;
    loop {
        match DmaBuffer::new(&core.device().device, size) {
            Err(e) if e == ENOMEM && size > MIN_PIECE => size = (size / 2).max(MIN_PIECE),
            result => return result,
        }
    }
}

/// Moves `len` bytes at `offset` of `lmr`, whose range the caller
/// checked and on which the caller holds a use.
pub(crate) fn transfer_lmr(
    core: &Core,
    lmr: &Lmr,
    direction: Direction<'_>,
    len: u64,
    offset: u64,
) -> Result {
    if len == 0 {
        return Ok(());
    }
    match usize::try_from(len) {
        Ok(small) if small <= STAGING_SIZE => core.staging.with(small, |staging| {
            move_pieces(core, lmr, direction, len, offset, staging)
        }),
        _ => move_pieces(
            core,
            lmr,
            direction,
            len,
            offset,
            &mut staging_buffer(core, len)?,
        ),
    }
}

/// Moves `len` bytes at `offset` of `lmr` through `staging`, a piece of at
/// most its length at a time.
///
/// A reused `staging` still holds an earlier transfer's bytes: only the
/// bytes each piece filled (a write) or the device wrote (a read) are
/// handed on.
fn move_pieces(
    core: &Core,
    lmr: &Lmr,
    mut direction: Direction<'_>,
    len: u64,
    offset: u64,
    staging: &mut DmaBuffer,
) -> Result {
    let max_piece = staging.len() as u64;
    for piece in pieces_in(lmr.geometry, offset, len, max_piece) {
        let piece_len = usize::try_from(piece.len).map_err(|_| EINVAL)?;
        let at = usize::try_from(piece.chunk_offset).map_err(|_| EINVAL)?;
        let chunk = lmr.chunks.get(piece.chunk).ok_or(EINVAL)?;
        let remote_addr = chunk.addr().checked_add(piece.chunk_offset).ok_or(EINVAL)?;
        match &mut direction {
            Direction::Write(source) => {
                source.fill(staging, piece_len)?;
                match &chunk.local {
                    Some(memory) => memory.copy_from_buffer(at, staging, piece_len)?,
                    None => core.peer(chunk.reach()?)?.rdma_write(
                        staging,
                        0,
                        piece_len,
                        remote_addr,
                        chunk.rkey(),
                    )?,
                }
            }
            Direction::Read(sink) => {
                match &chunk.local {
                    Some(memory) => memory.copy_to_buffer(at, staging, piece_len)?,
                    None => core.peer(chunk.reach()?)?.rdma_read(
                        staging,
                        0,
                        piece_len,
                        remote_addr,
                        chunk.rkey(),
                    )?,
                }
                sink.drain(staging, piece_len)?;
            }
        }
    }
    Ok(())
}
