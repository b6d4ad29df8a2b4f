// SPDX-License-Identifier: GPL-2.0

//! The messages of LITE-DSM: requests to a region's directory, which the
//! region's node serves, and invalidations of a node's copies, which every
//! node with the region open serves. Errors travel as the calls' errors.

use kernel::prelude::*;

use crate::api::rust_api::{layout, wire_layout, WireField};

/// What a request to a directory asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// Open the region, creating it with [`OPEN_CREATE`].
    Open = 1,
    /// Grant access to a page, writing with [`ACQUIRE_WRITE`].
    Acquire = 2,
    /// The sender's opening of the region ended: it closed its last file
    /// of the region, or the open failed.
    Detach = 3,
}

impl Op {
    fn from_raw(raw: u8) -> Result<Self> {
        match raw {
            1 => Ok(Op::Open),
            2 => Ok(Op::Acquire),
            3 => Ok(Op::Detach),
            _ => Err(EINVAL),
        }
    }
}

/// `Open` flag: create the region if it does not exist.
pub(super) const OPEN_CREATE: u8 = 0x1;

/// `Acquire` flag: the sender will write the page.
pub(super) const ACQUIRE_WRITE: u8 = 0x1;

wire_layout! {
    /// A request to a region's directory.
    pub(super) struct DirectoryRequest {
        /// [`Op`].
        pub(super) op: u8,
        /// The region's name.
        pub(super) name: u64,
        /// `Acquire`: which region of that name.
        pub(super) incarnation: u64,
        /// `Open`, `Detach`: which opening of the region by the sender this
        /// is, drawn at random by the sender; the directory keeps the
        /// region while it counts an opening.
        pub(super) opening: u64,
        /// `Acquire`: the page; `Open`: the region's size in bytes.
        pub(super) index: u64,
        /// `Open`: the region's password.
        pub(super) password: u64,
        /// `Open`: [`OPEN_CREATE`]; `Acquire`: [`ACQUIRE_WRITE`].
        pub(super) flags: u8,
    }
}

wire_layout! {
    /// A directory's answer.
    pub(super) struct DirectoryAnswer {
        /// `Open`: the region's pages.
        pub(super) pages: u64,
        /// `Open`: which region of its name this is.
        pub(super) incarnation: u64,
        /// `Open`: the password of the region's data LMR.
        pub(super) data_password: u64,
        /// `Acquire`: the grant, larger than every earlier grant of the page.
        pub(super) grant: u64,
    }
}

wire_layout! {
    /// A directory's order to a node to give up its copy of a page.
    pub(super) struct Invalidation {
        /// The region's name.
        pub(super) name: u64,
        /// Which region of that name.
        pub(super) incarnation: u64,
        /// The page.
        pub(super) index: u64,
        /// Every grant of the page to the node up to this one ends.
        pub(super) grant: u64,
        /// 1: write the page back to its home first, if the node wrote it.
        pub(super) write_back: u8,
    }
}

/// Bytes of each message.
pub(super) const REQUEST_LEN: usize = <DirectoryRequest as WireField>::LEN;
pub(super) const ANSWER_LEN: usize = <DirectoryAnswer as WireField>::LEN;
pub(super) const INVALIDATION_LEN: usize = <Invalidation as WireField>::LEN;

impl DirectoryRequest {
    /// The request's encoding.
    pub(super) fn encode(&self) -> [u8; REQUEST_LEN] {
        layout::encode(self)
    }

    /// The request in `message`, and what it asks.
    pub(super) fn decode(message: &[u8]) -> Result<(Self, Op)> {
        let bytes: &[u8; REQUEST_LEN] = message.try_into().map_err(|_| EINVAL)?;
        let request: Self = layout::decode(bytes);
        let op = Op::from_raw(request.op)?;
        Ok((request, op))
    }
}

impl DirectoryAnswer {
    /// The answer's encoding.
    pub(super) fn encode(&self) -> [u8; ANSWER_LEN] {
        layout::encode(self)
    }

    /// The answer in `message`.
    pub(super) fn decode(message: &[u8]) -> Result<Self> {
        let bytes: &[u8; ANSWER_LEN] = message.try_into().map_err(|_| EINVAL)?;
        Ok(layout::decode(bytes))
    }
}

impl Invalidation {
    /// The invalidation's encoding.
    pub(super) fn encode(&self) -> [u8; INVALIDATION_LEN] {
        layout::encode(self)
    }

    /// The invalidation in `message`.
    pub(super) fn decode(message: &[u8]) -> Result<Self> {
        let bytes: &[u8; INVALIDATION_LEN] = message.try_into().map_err(|_| EINVAL)?;
        Ok(layout::decode(bytes))
    }
}
