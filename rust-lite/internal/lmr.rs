// SPDX-License-Identifier: GPL-2.0

//! LITE memory regions (LMRs): remote memory named by a handle.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use crate::verbs::DmaBuffer;

/// `lite_alloc_remote` flag: an 8-byte LMR for atomics.
pub(crate) const ALLOC_ATOMIC: u32 = 0x1;

/// Every flag `lite_alloc_remote` accepts.
pub(crate) const ALLOC_FLAGS: u32 = ALLOC_ATOMIC;

/// Size an atomic LMR must have.
pub(crate) const ATOMIC_SIZE: u64 = 8;

/// Where one chunk of an LMR lives.
pub(crate) enum Chunk {
    /// On this node.
    Local(DmaBuffer),
    /// On a peer, reached with RDMA.
    Remote {
        /// The peer holding the chunk.
        node: u32,
        /// The chunk's id in the peer's memory store.
        chunk_id: u64,
        /// Remote address of the chunk.
        addr: u64,
        /// Remote key covering the chunk.
        rkey: u32,
    },
}

/// Operations running on an LMR, and whether it is being freed.
struct Users {
    active: u32,
    closing: bool,
}

/// An LMR: a size, a password, and the chunks holding its bytes.
#[pin_data]
pub(crate) struct Lmr {
    /// Size in bytes.
    pub(crate) size: u64,
    /// `lite_alloc_remote` flags it was created with.
    pub(crate) flags: u32,
    password: u64,
    /// The chunks, in address order.
    pub(crate) chunks: KVec<Chunk>,
    #[pin]
    users: Mutex<Users>,
    #[pin]
    idle: CondVar,
}

/// Proof that an operation is running on an LMR; the LMR's memory is not
/// released while one exists.
pub(crate) struct LmrUse<'a> {
    lmr: &'a Lmr,
}

impl Drop for LmrUse<'_> {
    fn drop(&mut self) {
        let mut users = self.lmr.users.lock();
        users.active -= 1;
        if users.active == 0 {
            self.lmr.idle.notify_all();
        }
    }
}

impl Lmr {
    /// Creates an LMR over `chunks`.
    pub(crate) fn new(size: u64, flags: u32, password: u64, chunks: KVec<Chunk>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Lmr {
                size,
                flags,
                password,
                chunks,
                users <- new_mutex!(Users { active: 0, closing: false }, "lite:lmr_users"),
                idle <- new_condvar!("lite:lmr_idle"),
            }),
            GFP_KERNEL,
        )
    }

    /// Checks the password given with an access.
    ///
    /// # Errors
    ///
    /// `EACCES` if it is not the LMR's password.
    pub(crate) fn check_password(&self, password: u64) -> Result {
        if password == self.password {
            Ok(())
        } else {
            Err(EACCES)
        }
    }

    /// Registers a running operation.
    ///
    /// # Errors
    ///
    /// `EBADF` if the LMR is being freed.
    pub(crate) fn begin(&self) -> Result<LmrUse<'_>> {
        let mut users = self.users.lock();
        if users.closing {
            return Err(EBADF);
        }
        users.active += 1;
        Ok(LmrUse { lmr: self })
    }

    /// Refuses new operations and waits for running ones to finish.
    pub(crate) fn close(&self) {
        let mut users = self.users.lock();
        users.closing = true;
        while users.active > 0 {
            self.idle.wait(&mut users);
        }
    }
}
