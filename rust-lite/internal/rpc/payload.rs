// SPDX-License-Identifier: GPL-2.0

//! The bytes of an outgoing request or reply, and where a reply goes.
//!
//! A process's message is copied once, from its memory straight into the
//! work request or the staging buffer it is posted from, and a reply once,
//! from the reply slot straight into the process's memory: a large RPC then
//! costs no more copies than it must.

use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use crate::verbs::DmaBuffer;

/// Bytes of a request or reply on their way out.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Bytes in the kernel.
    Kernel(&'a [u8]),
    /// `len` bytes of the calling process's memory at `at`, read when the
    /// message is posted (a multicast reads them once per node).
    User {
        /// Start of the bytes.
        at: UserPtr,
        /// Number of bytes.
        len: usize,
    },
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Payload::Kernel(bytes)
    }
}

impl Payload<'_> {
    /// Number of bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Kernel(bytes) => bytes.len(),
            Payload::User { len, .. } => *len,
        }
    }

    /// Copies the bytes into `out`, which must be as long.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `out` is not as long, `EFAULT` if user memory cannot be read.
    pub(crate) fn copy_to(&self, out: &mut [u8]) -> Result {
        if out.len() != self.len() {
            return Err(EINVAL);
        }
        match self {
            Payload::Kernel(bytes) => {
                out.copy_from_slice(bytes);
                Ok(())
            }
            Payload::User { at, len } => UserSlice::new(*at, *len).reader().read_slice(out),
        }
    }

    /// Copies the bytes into `buffer` at `at`.
    ///
    /// # Errors
    ///
    /// `EINVAL` if they do not fit, `EFAULT` if user memory cannot be read.
    pub(crate) fn copy_to_buffer(&self, buffer: &mut DmaBuffer, at: usize) -> Result {
        match self {
            Payload::Kernel(bytes) => buffer.write_bytes(at, bytes),
            Payload::User { at: user, len } => {
                buffer.fill_from_user(at, &mut UserSlice::new(*user, *len).reader(), *len)
            }
        }
    }

    /// A kernel copy of the bytes.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, `EFAULT` if user memory cannot be read.
    pub(crate) fn to_vec(self) -> Result<KVVec<u8>> {
        match self {
            Payload::Kernel(bytes) => {
                let mut data = KVVec::with_capacity(bytes.len(), GFP_KERNEL)?;
                data.extend_from_slice(bytes, GFP_KERNEL)?;
                Ok(data)
            }
            Payload::User { .. } => {
                let mut data = KVVec::from_elem(0u8, self.len(), GFP_KERNEL)?;
                self.copy_to(&mut data)?;
                Ok(data)
            }
        }
    }
}

/// Where the reply to a call goes.
pub(crate) trait ReplyDestination: Copy {
    /// The reply as this destination has it.
    type Reply;

    /// Takes the `len`-byte reply in `buffer`, a reply slot's buffer.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, `EINVAL` for a length beyond the buffer, `EFAULT` if user
    /// memory cannot be written.
    fn take_from_slot(self, buffer: &DmaBuffer, len: usize) -> Result<Self::Reply>;

    /// Takes a reply made on this node.
    ///
    /// # Errors
    ///
    /// `EFAULT` if user memory cannot be written.
    fn take_local(self, reply: KVVec<u8>) -> Result<Self::Reply>;
}

/// The reply is returned as a kernel vector.
#[derive(Clone, Copy)]
pub(crate) struct ToKernel;

impl ReplyDestination for ToKernel {
    type Reply = KVVec<u8>;

    fn take_from_slot(self, buffer: &DmaBuffer, len: usize) -> Result<KVVec<u8>> {
        buffer.copied(0, len)
    }

    fn take_local(self, reply: KVVec<u8>) -> Result<KVVec<u8>> {
        Ok(reply)
    }
}

/// The reply is copied to the calling process's memory at this address,
/// which has room for the call's largest reply; its length is returned.
#[derive(Clone, Copy)]
pub(crate) struct ToUser(pub(crate) UserPtr);

impl ReplyDestination for ToUser {
    type Reply = usize;

    fn take_from_slot(self, buffer: &DmaBuffer, len: usize) -> Result<usize> {
        buffer.write_to_user(0, self.0, len)?;
        Ok(len)
    }

    fn take_local(self, reply: KVVec<u8>) -> Result<usize> {
        UserSlice::new(self.0, reply.len())
            .writer()
            .write_slice(&reply)?;
        Ok(reply.len())
    }
}
