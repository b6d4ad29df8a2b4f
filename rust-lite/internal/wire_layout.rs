// SPDX-License-Identifier: GPL-2.0

//! Fixed byte layouts, each declared once: [`wire_layout!`] takes a struct
//! whose fields lie one after the other, little-endian, in the order they
//! are declared, and derives its encoding and decoding from that.
//!
//! Plain `core` Rust: the cluster manager compiles this file too, for the
//! frames of [`cm_wire`](super::cm_wire).

/// A value with a fixed-size little-endian encoding.
pub trait WireField: Sized {
    /// Bytes of the encoding.
    const LEN: usize;

    /// Writes the value into `out`, which is [`Self::LEN`] bytes long.
    fn put(&self, out: &mut [u8]);

    /// Reads a value from `bytes`, which is [`Self::LEN`] bytes long.
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! integer_fields {
    ($($ty:ty),*) => {$(
        impl WireField for $ty {
            const LEN: usize = core::mem::size_of::<$ty>();

            fn put(&self, out: &mut [u8]) {
                // PANIC: callers pass exactly `LEN` bytes (`wire_layout!`).
                out.copy_from_slice(&self.to_le_bytes());
            }

            fn get(bytes: &[u8]) -> Self {
                let mut le = [0u8; core::mem::size_of::<$ty>()];
                // PANIC: callers pass exactly `LEN` bytes (`wire_layout!`).
                le.copy_from_slice(bytes);
                <$ty>::from_le_bytes(le)
            }
        }
    )*};
}

integer_fields!(u8, u16, u32, u64, i32);

impl<const N: usize> WireField for [u8; N] {
    const LEN: usize = N;

    fn put(&self, out: &mut [u8]) {
        // PANIC: callers pass exactly `LEN` bytes (`wire_layout!`).
        out.copy_from_slice(self);
    }

    fn get(bytes: &[u8]) -> Self {
        let mut value = [0u8; N];
        // PANIC: callers pass exactly `LEN` bytes (`wire_layout!`).
        value.copy_from_slice(bytes);
        value
    }
}

/// Declares a struct and implements [`WireField`] for it: its fields, in
/// declaration order, each right after the one before. The caller has
/// `WireField` in scope (the kernel and the manager reach this file by
/// different paths).
macro_rules! wire_layout {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident: $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[$field_meta])*
                $field_vis $field: $ty,
            )*
        }

        impl WireField for $name {
            const LEN: usize = 0 $(+ <$ty as WireField>::LEN)*;

            fn put(&self, out: &mut [u8]) {
                let mut at = 0;
                $(
                    let end = at + <$ty as WireField>::LEN;
                    // PANIC: `out` is `Self::LEN` bytes, the sum of the
                    // fields' lengths, so every field's range lies in it.
                    self.$field.put(&mut out[at..end]);
                    at = end;
                )*
                let _ = at;
            }

            fn get(bytes: &[u8]) -> Self {
                let mut at = 0;
                $(
                    let end = at + <$ty as WireField>::LEN;
                    // PANIC: as in `put`.
                    let $field = <$ty as WireField>::get(&bytes[at..end]);
                    at = end;
                )*
                let _ = at;
                $name { $($field),* }
            }
        }
    };
}

pub(crate) use wire_layout;

/// A compile-time check that a `T` fits in `N` bytes.
struct Fits<T, const N: usize>(core::marker::PhantomData<T>);

impl<T: WireField, const N: usize> Fits<T, N> {
    /// Fails the build where a `T` is encoded into fewer than its bytes.
    const CHECKED: () = assert!(T::LEN <= N, "layout longer than its buffer");
}

/// Encodes `value` into the first [`WireField::LEN`] bytes of a zeroed
/// array of `N` bytes (`N` at least that long: checked at compile time).
pub fn encode<T: WireField, const N: usize>(value: &T) -> [u8; N] {
    let () = Fits::<T, N>::CHECKED;
    let mut out = [0u8; N];
    // PANIC: `T::LEN <= N` (asserted above).
    value.put(&mut out[..T::LEN]);
    out
}

/// Decodes a `T` from the first [`WireField::LEN`] bytes of `bytes` (`N`
/// at least that long: checked at compile time).
pub fn decode<T: WireField, const N: usize>(bytes: &[u8; N]) -> T {
    let () = Fits::<T, N>::CHECKED;
    // PANIC: `T::LEN <= N` (asserted above).
    T::get(&bytes[..T::LEN])
}
