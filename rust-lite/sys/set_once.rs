// SPDX-License-Identifier: GPL-2.0

//! Objects created once and kept for as long as LITE is loaded.
//!
//! Some of LITE's objects (the node state, the registry of its threads) are
//! created when it initialises and only freed when it unloads, once nothing
//! can use them any more. Holding an [`Arc`] to them in a `SetOnce` lets every
//! user borrow them as `&'static` without taking a reference count or a lock
//! on each access.

use core::{
    marker::PhantomData,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::sync::Arc;

/// A value set at most once and freed only as LITE unloads, readable from anywhere.
///
/// Usable both in a `static` and as a struct field. Dropping a `SetOnce`
/// does not drop its value: only [`SetOnce::release`] does, whose callers
/// promise that no reference [`SetOnce::get`] handed out is used any more;
/// that is what lets `get` hand out `&'static` references.
///
/// # Invariants
///
/// `ptr` is either null or a pointer returned by [`Arc::into_raw`] whose
/// reference count is owned by this object and released only by
/// [`SetOnce::release`], so while `ptr` is non-null the `T` it points to
/// stays valid, and is only ever shared. Once non-null, `ptr` changes only
/// back to null, in `release`.
pub(crate) struct SetOnce<T> {
    ptr: AtomicPtr<T>,
    /// Holding the value is holding an `Arc<T>`: this makes `SetOnce<T>`
    /// `Send` and `Sync` exactly when `Arc<T>` is (when `T: Send + Sync`).
    /// `AtomicPtr<T>` alone would be `Send` and `Sync` for every `T`, which
    /// would let [`SetOnce::get`] share a `T` that is not `Sync`.
    _value: PhantomData<Arc<T>>,
}

impl<T: Send + Sync> SetOnce<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        // INVARIANT: `ptr` is null.
        SetOnce {
            ptr: AtomicPtr::new(null_mut()),
            _value: PhantomData,
        }
    }

    /// Stores `value` until [`SetOnce::release`]; gives it back if a value
    /// was already set.
    pub(crate) fn set(&self, value: Arc<T>) -> Result<&'static T, Arc<T>> {
        let raw = Arc::into_raw(value).cast_mut();
        // `Release` on success publishes the initialised `T` to `get`'s
        // `Acquire` load.
        match self
            .ptr
            .compare_exchange(null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                // INVARIANT: `raw` came from `Arc::into_raw`; the count it owns
                // now belongs to `self.ptr`, and the successful exchange means
                // `ptr` was null until now.
                // SAFETY: That count is only released by `release`, whose
                // callers promise not to use this reference afterwards, and
                // `Arc` only ever hands out shared references to the `T`.
                Ok(unsafe { &*raw })
            }
            Err(_) => {
                // SAFETY: `raw` was returned by `Arc::into_raw` above and was
                // not stored anywhere, so this takes back the count it owns,
                // once.
                Err(unsafe { Arc::from_raw(raw) })
            }
        }
    }

    /// Takes the value back, as LITE unloads.
    ///
    /// # Safety
    ///
    /// No reference returned by [`SetOnce::get`] may be used after this
    /// call, and `get` may not be called again: only LITE's module exit
    /// calls this, once every thread, system call and callback that could
    /// use the value has ended.
    pub(crate) unsafe fn release(&self) -> Option<Arc<T>> {
        let ptr = self.ptr.swap(null_mut(), Ordering::AcqRel);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: A non-null `ptr` came from `Arc::into_raw` and owns one
        // count (type invariant), taken back here once: the swap left null
        // behind. The caller guarantees no reference to the `T` is used any
        // more.
        Some(unsafe { Arc::from_raw(ptr) })
    }

    /// The value, once set.
    pub(crate) fn get(&self) -> Option<&'static T> {
        let ptr = self.ptr.load(Ordering::Acquire);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: A non-null `ptr` came from `Arc::into_raw` and its count is
        // only released by `release` (type invariant), whose callers promise
        // that no reference handed out here is used afterwards; the `T` is
        // only ever shared. The `Acquire` load pairs
        // with the `Release` in `set`, so the `T`'s initialisation is
        // visible here.
        Some(unsafe { &*ptr })
    }
}
