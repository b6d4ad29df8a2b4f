// SPDX-License-Identifier: GPL-2.0

//! Reading and writing LMRs (`lite_rdma_write`, `lite_rdma_read`).
//!
//! Data moves through a staging buffer the device can access: for a write
//! the caller's bytes are copied into it and written to the chunk's node
//! with one RDMA write per piece; a read does the reverse. Chunks on this
//! node are copied directly.

use kernel::{
    prelude::*,
    uaccess::{UserSliceReader, UserSliceWriter},
};

use super::{
    chunk::{self, pieces},
    cluster::Cluster,
    lmr::Chunk,
    priority::Priority,
};
use crate::verbs::DmaBuffer;

/// Largest piece moved by one RDMA operation.
const MAX_PIECE: u64 = 256 << 10;

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
        let (now, rest) = self.rest.split_at_checked(len).ok_or(EINVAL)?;
        staging.write_bytes(0, now)?;
        self.rest = rest;
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
        let rest = core::mem::take(&mut self.rest);
        let (now, rest) = rest.split_at_mut_checked(len).ok_or(EINVAL)?;
        staging.read_bytes(0, now)?;
        self.rest = rest;
        Ok(())
    }
}

/// Direction of a transfer.
enum Direction<'a> {
    Write(&'a mut dyn Source),
    Read(&'a mut dyn Sink),
}

impl Cluster {
    /// Writes `len` bytes from `source` into LMR `handle` at `offset`.
    pub(crate) fn rdma_write(
        &self,
        handle: u64,
        source: &mut dyn Source,
        len: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> Result {
        self.transfer(handle, Direction::Write(source), len, offset, priority, password)
    }

    /// Reads `len` bytes of LMR `handle` at `offset` into `sink`.
    pub(crate) fn rdma_read(
        &self,
        handle: u64,
        sink: &mut dyn Sink,
        len: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> Result {
        self.transfer(handle, Direction::Read(sink), len, offset, priority, password)
    }

    /// A staging buffer for a transfer of `len` bytes: as large as the
    /// transfer up to [`MAX_PIECE`], smaller if memory is fragmented.
    fn staging_buffer(&self, len: u64) -> Result<DmaBuffer> {
        let mut size = usize::try_from(len.min(MAX_PIECE)).map_err(|_| EINVAL)?;
        loop {
            match DmaBuffer::new(&self.device.device, size) {
                Err(e) if e == ENOMEM && size > MIN_PIECE => size = (size / 2).max(MIN_PIECE),
                result => return result,
            }
        }
    }

    fn transfer(
        &self,
        handle: u64,
        mut direction: Direction<'_>,
        len: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> Result {
        let _priority = Priority::from_raw(priority)?;
        let lmr = self.lmr(handle)?;
        lmr.check_password(password)?;
        chunk::check_range(lmr.size, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let _use = lmr.begin()?;
        let mut staging = self.staging_buffer(len)?;
        let max_piece = staging.len() as u64;
        for piece in pieces(offset, len, max_piece) {
            let piece_len = usize::try_from(piece.len).map_err(|_| EINVAL)?;
            let at = usize::try_from(piece.chunk_offset).map_err(|_| EINVAL)?;
            let chunk = lmr.chunks.get(piece.chunk).ok_or(EINVAL)?;
            match &mut direction {
                Direction::Write(source) => {
                    source.fill(&mut staging, piece_len)?;
                    match chunk {
                        Chunk::Local(memory) => memory.copy_from(at, &staging, 0, piece_len)?,
                        Chunk::Remote {
                            node, addr, rkey, ..
                        } => self.peer(*node)?.conn.rdma_write(
                            &staging,
                            0,
                            piece_len,
                            addr.checked_add(piece.chunk_offset).ok_or(EINVAL)?,
                            *rkey,
                        )?,
                    }
                }
                Direction::Read(sink) => {
                    match chunk {
                        Chunk::Local(memory) => staging.copy_from(0, memory, at, piece_len)?,
                        Chunk::Remote {
                            node, addr, rkey, ..
                        } => self.peer(*node)?.conn.rdma_read(
                            &staging,
                            0,
                            piece_len,
                            addr.checked_add(piece.chunk_offset).ok_or(EINVAL)?,
                            *rkey,
                        )?,
                    }
                    sink.drain(&mut staging, piece_len)?;
                }
            }
        }
        Ok(())
    }
}
