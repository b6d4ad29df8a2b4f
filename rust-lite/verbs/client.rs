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
///
/// Soundness of every verbs object rests on [`ClientHandler::remove`]
/// keeping its contract: the IB core frees the device once `remove` returns.
pub(crate) trait ClientHandler {
    /// A device appeared. Returning an error declines the device.
    fn add(device: Device) -> Result;
    /// The device at `raw` is going away.
    ///
    /// Must not return before every [`Device`] made for `raw` by `add`, and
    /// every object created on it (buffers, PDs, CQs, QPs, pinned pages),
    /// has been dropped: the IB core frees the device when this returns.
    fn remove(raw: *const bindings::ib_device);
}

/// A registered IB client.
///
/// # Invariants
///
/// `client` is an `ib_client` registered with the IB core for as long as
/// this object exists (unregistered in `drop`); it lives in its own pinned
/// allocation so its address never changes while the core uses it. Its
/// callbacks are `Self::add_callback` and `Self::remove_callback`.
pub(crate) struct IbClient<H: ClientHandler> {
    client: Pin<KBox<Opaque<bindings::ib_client>>>,
    _handler: PhantomData<H>,
}

// SAFETY: The registration is only used to unregister (`drop`), and
// `ib_unregister_client` may be called from any thread in process context.
// `H` is only a type-level parameter: no `H` value is stored.
unsafe impl<H: ClientHandler> Send for IbClient<H> {}
// SAFETY: No method takes `&self`, so a shared reference gives no access to
// the registration at all.
unsafe impl<H: ClientHandler> Sync for IbClient<H> {}

impl<H: ClientHandler> IbClient<H> {
    /// Registers the client; `add` runs for every existing device before this returns.
    pub(crate) fn register() -> Result<Self> {
        let mut raw = bindings::ib_client::default();
        raw.name = c_str!("lite").as_char_ptr();
        raw.add = Some(Self::add_callback);
        raw.remove = Some(Self::remove_callback);
        let client = KBox::pin(Opaque::new(raw), GFP_KERNEL)?;
        // SAFETY: `client` points to an initialised `ib_client` (name and
        // callbacks set, the rest zeroed as the core expects) in a pinned
        // allocation that outlives the registration: it is unregistered in
        // `drop` before the allocation is freed, and if registering fails the
        // core keeps no pointer to it.
        check(unsafe { bindings::ib_register_client(client.get()) })?;
        // INVARIANT: Registered above.
        Ok(IbClient {
            client,
            _handler: PhantomData,
        })
    }

    /// The IB core's `add` callback.
    ///
    /// # Safety
    ///
    /// Only for the IB core: `raw` must be a registered device, valid until
    /// the `remove` callback for it has returned.
    unsafe extern "C" fn add_callback(raw: *mut bindings::ib_device) -> i32 {
        let Some(ptr) = NonNull::new(raw) else {
            return -(bindings::EINVAL as i32);
        };
        // SAFETY: The IB core passes a registered device that stays valid
        // until `remove_callback` returns for it, and `H::remove` does not
        // return while the `Device` made here, or anything created on it,
        // still exists (the contract of `ClientHandler::remove`).
        let device = unsafe { Device::from_raw(ptr) };
        match H::add(device) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// The IB core's `remove` callback.
    ///
    /// # Safety
    ///
    /// Only for the IB core: `raw` must be a device for which `add_callback`
    /// ran; it stays valid until this returns.
    unsafe extern "C" fn remove_callback(
        raw: *mut bindings::ib_device,
        _data: *mut core::ffi::c_void,
    ) {
        H::remove(raw);
    }
}

impl<H: ClientHandler> Drop for IbClient<H> {
    fn drop(&mut self) {
        // SAFETY: The client was registered in `register` and is still at
        // the same address (type invariant). Unregistering waits for running
        // callbacks and calls `remove` for every device, so the core holds
        // no pointer to it once this returns and the box is freed.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
    }
}
