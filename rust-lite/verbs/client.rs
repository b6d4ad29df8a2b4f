// SPDX-License-Identifier: GPL-2.0

//! Registration with the IB core as a client (`struct ib_client`).
//!
//! The IB core calls the client's `add` for every RDMA device that exists or
//! appears later (Soft-RoCE devices appear only when userspace creates them)
//! and `remove` before a device goes away.

use core::{marker::PhantomData, ptr::NonNull};
use kernel::{bindings, c_str, prelude::*, types::Opaque};

use super::{check, Device};

/// What a client does when devices come and go.
pub(crate) trait ClientHandler {
    /// A device appeared. Returning an error declines the device.
    fn add(device: Device) -> Result;
    /// The device at `raw` is going away; every object using it must be released.
    fn remove(raw: *const bindings::ib_device);
}

/// A registered IB client.
///
/// # Invariants
///
/// `client` is registered with the IB core for as long as this object exists;
/// it lives in its own allocation so its address never changes.
pub(crate) struct IbClient<H: ClientHandler> {
    client: Pin<KBox<Opaque<bindings::ib_client>>>,
    _handler: PhantomData<H>,
}

// SAFETY: The registration is only used to unregister, which may happen on
// any thread.
unsafe impl<H: ClientHandler> Send for IbClient<H> {}
// SAFETY: No method takes `&self`.
unsafe impl<H: ClientHandler> Sync for IbClient<H> {}

impl<H: ClientHandler> IbClient<H> {
    /// Registers the client; `add` runs for every existing device before this returns.
    pub(crate) fn register() -> Result<Self> {
        let mut raw = bindings::ib_client::default();
        raw.name = c_str!("lite").as_char_ptr();
        raw.add = Some(Self::add_callback);
        raw.remove = Some(Self::remove_callback);
        let client = KBox::pin(Opaque::new(raw), GFP_KERNEL)?;
        // SAFETY: `client` points to an initialised `ib_client` in a pinned
        // allocation that outlives the registration (unregistered in `drop`).
        check(unsafe { bindings::ib_register_client(client.get()) })?;
        // INVARIANT: Registered above.
        Ok(IbClient {
            client,
            _handler: PhantomData,
        })
    }

    unsafe extern "C" fn add_callback(raw: *mut bindings::ib_device) -> i32 {
        let Some(ptr) = NonNull::new(raw) else {
            return -(bindings::EINVAL as i32);
        };
        // SAFETY: The IB core passes a registered device that stays valid
        // until `remove_callback` returns for it.
        let device = unsafe { Device::from_raw(ptr) };
        match H::add(device) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    unsafe extern "C" fn remove_callback(
        raw: *mut bindings::ib_device,
        _data: *mut core::ffi::c_void,
    ) {
        H::remove(raw);
    }
}

impl<H: ClientHandler> Drop for IbClient<H> {
    fn drop(&mut self) {
        // SAFETY: The client was registered in `register` (type invariant).
        unsafe { bindings::ib_unregister_client(self.client.get()) };
    }
}
