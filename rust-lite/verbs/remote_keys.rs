// SPDX-License-Identifier: GPL-2.0

//! The keys a peer replaced, as this node translates them.
//!
//! Peers name their regions by identity ([`super::region_keys`]); when a
//! peer replaces keys it sends its table of identities and current keys,
//! and every access this node posts to it goes out with the current key.
//! A connection's first table arrives right after it is connected; until
//! then accesses wait for it, as an identity may already be stale.
//!
//! The lookup and the post happen under one lock that a new table also
//! takes: once the table is swapped, no access with an old key can be
//! posted any more, so the confirmation the receiver sends afterwards on
//! the same connection reaches the peer after every such access.

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{new_mutex, new_spinlock, prelude::*, sync::Arc, sync::Mutex, sync::SpinLock};

use super::KeyTable;

/// How long an access waits for a connection's first table.
const FIRST_TABLE_WAIT_MS: u32 = 10_000;

/// How a peer's keys are translated on one connection to it.
#[pin_data]
pub(crate) struct RemoteKeys {
    /// Identity and current key, ascending by identity.
    /// Lock class `lite:remote_keys`: see the lock order in [`crate::internal::core`].
    #[pin]
    table: SpinLock<KeyTable>,
    /// A first table arrived (or the connection translates nothing).
    ready: AtomicBool,
    /// Parts of a table still arriving.
    #[pin]
    incoming: Mutex<KeyTable>,
}

impl RemoteKeys {
    /// No table yet: accesses wait for the first one.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(RemoteKeys {
                table <- new_spinlock!(KVec::new(), "lite:remote_keys"),
                ready: AtomicBool::new(false),
                incoming <- new_mutex!(KVec::new(), "lite:incoming_keys"),
            }),
            GFP_KERNEL,
        )
    }

    /// Keys go out as given, without waiting for a table.
    pub(crate) fn use_as_given(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Waits until the first table arrived.
    ///
    /// # Errors
    ///
    /// `EIO` once `ended` says the connection is gone, `ETIMEDOUT` after
    /// [`FIRST_TABLE_WAIT_MS`].
    pub(crate) fn wait_ready(&self, ended: impl Fn() -> bool) -> Result {
        let mut waited = 0;
        while !self.ready.load(Ordering::Acquire) {
            if ended() {
                return Err(EIO);
            }
            if waited >= FIRST_TABLE_WAIT_MS {
                return Err(crate::errno::ETIMEDOUT());
            }
            crate::sys::sched::sleep_uninterruptible_ms(1);
            waited += 1;
        }
        Ok(())
    }

    /// Runs `post` with `remote` carrying the peer's current key, under the
    /// lock a new table takes. `post` must not sleep.
    pub(crate) fn post_translated<R>(
        &self,
        remote: (u64, u32),
        post: impl FnOnce((u64, u32)) -> R,
    ) -> R {
        let table = self.table.lock();
        let key = translate(&table, remote.1);
        post((remote.0, key))
    }

    /// Takes one part of a table; `first` starts a new one, `last` puts
    /// it in force.
    ///
    /// # Errors
    ///
    /// `ENOMEM`; the table in force stays.
    pub(crate) fn receive(&self, pairs: &[(u32, u32)], first: bool, last: bool) -> Result {
        let mut incoming = self.incoming.lock();
        if first {
            *incoming = KVec::new();
        }
        incoming.extend_from_slice(pairs, GFP_KERNEL)?;
        if !last {
            return Ok(());
        }
        let mut complete = core::mem::take(&mut *incoming);
        drop(incoming);
        complete.sort_unstable_by_key(|&(identity, _)| identity);
        // Swapped under the lock; the old table is freed outside it.
        let old = core::mem::replace(&mut *self.table.lock(), complete);
        drop(old);
        self.ready.store(true, Ordering::Release);
        Ok(())
    }
}

/// The current key for `key` in `table` (sorted by identity): its
/// replacement, or itself.
fn translate(table: &[(u32, u32)], key: u32) -> u32 {
    match table.binary_search_by_key(&key, |&(identity, _)| identity) {
        // PANIC: `binary_search` returns the index of an entry.
        Ok(index) => table[index].1,
        Err(_) => key,
    }
}
