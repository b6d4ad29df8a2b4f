// SPDX-License-Identifier: GPL-2.0

//! Objects created once and kept for the rest of the kernel's life.
//!
//! LITE is built in and never unloaded, so some of its objects (the node
//! state, the joined cluster) are created once and never freed. Leaking an
//! [`Arc`] to them lets every user borrow them as `&'static` without taking
//! a reference count or a lock on each access.

use core::{
    marker::PhantomData,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::sync::Arc;

/// A value set at most once and never freed afterwards, readable from anywhere.
///
/// Usable both in a `static` and as a struct field. Dropping a `SetOnce`
/// does not drop its value: the value is leaked on purpose, which is what
/// lets [`SetOnce::get`] hand out `&'static` references.
///
/// # Invariants
///
/// `ptr` is either null or a pointer returned by [`Arc::into_raw`] whose
/// reference count is owned by this object and never released (there is no
/// `Drop` impl and no way to take the value back out), so once `ptr` is
/// non-null the `T` it points to stays valid, and is only ever shared, until
/// the kernel stops. Once non-null, `ptr` never changes.
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

    /// Stores `value` for the rest of the kernel's life; gives it back if a
    /// value was already set.
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
                // now belongs to `self.ptr`, which never releases it, and the
                // successful exchange means `ptr` was null until now.
                // SAFETY: That count is never released (type invariant), so
                // the `T` behind `raw` stays valid until the kernel stops,
                // and `Arc` only ever hands out shared references to it.
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

    /// The value, once set.
    pub(crate) fn get(&self) -> Option<&'static T> {
        let ptr = self.ptr.load(Ordering::Acquire);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: A non-null `ptr` came from `Arc::into_raw` and its count is
        // never released (type invariant), so the `T` stays valid until the
        // kernel stops and is only ever shared. The `Acquire` load pairs
        // with the `Release` in `set`, so the `T`'s initialisation is
        // visible here.
        Some(unsafe { &*ptr })
    }
}
