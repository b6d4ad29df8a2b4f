// SPDX-License-Identifier: GPL-2.0

//! Adding to vectors under a lock without dropping anything under it.

use kernel::prelude::*;

/// Puts `value` in the first `None` of `slots`, or after them; without
/// memory for it, hands it back so that the caller drops it once its lock
/// is released (dropping may take other locks).
///
/// # Errors
///
/// `ENOMEM`, with `value`.
pub(crate) fn put_or_return<T>(slots: &mut KVec<Option<T>>, value: T) -> Result<(), (Error, T)> {
    match slots.iter_mut().find(|slot| slot.is_none()) {
        Some(free) => *free = Some(value),
        None => {
            if slots.reserve(1, GFP_KERNEL).is_err() {
                return Err((ENOMEM, value));
            }
            // Cannot fail: room for one more was reserved.
            let _ = slots.push(Some(value), GFP_KERNEL);
        }
    }
    Ok(())
}

/// Pushes `value` onto `vec`; without memory for it, hands it back so that
/// the caller drops it once its lock is released.
///
/// # Errors
///
/// `ENOMEM`, with `value`.
pub(crate) fn push_or_return<T>(vec: &mut KVec<T>, value: T) -> Result<(), (Error, T)> {
    if vec.reserve(1, GFP_KERNEL).is_err() {
        return Err((ENOMEM, value));
    }
    // Cannot fail: room for one more was reserved.
    let _ = vec.push(value, GFP_KERNEL);
    Ok(())
}
