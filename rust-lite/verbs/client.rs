// SPDX-License-Identifier: GPL-2.0

//! Registration with the IB core as a client (`struct ib_client`).
//!
//! The IB core calls the client's `add` for every RDMA device that exists or
//! appears later (Soft-RoCE devices appear only when userspace creates them)
//! and `remove` before a device goes away.

use core::{
    ffi::c_void,
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{bindings, c_str, prelude::*, sync::Arc, types::Opaque};

use super::{check, device::DeviceReleased, Device};

/// What a client does when devices come and go.
///
/// The IB core frees a device once the client's `remove` callback returns;
/// [`IbClient`] makes that callback wait, after [`ClientHandler::remove`],
/// until the [`Device`] handed to `add` has been dropped, and with it every
/// object created on the device (each holds the device).
pub(crate) trait ClientHandler {
    /// A device appeared. Returning an error declines the device.
    fn add(device: Device) -> Result;
    /// The device at `raw` is going away: the handler lets go of it and
    /// makes every user of it end.
    fn remove(raw: *const bindings::ib_device);
}

/// The registered client, for `ib_set_client_data` in the `add` callback
/// (which is not given the client); LITE registers one client.
static REGISTERED: AtomicPtr<bindings::ib_client> = AtomicPtr::new(ptr::null_mut());

/// A registered IB client.
///
/// # Invariants
///
/// `client` is an `ib_client` registered with the IB core for as long as
/// this object exists (unregistered in `drop`); it lives in its own pinned
/// allocation so its address never changes while the core uses it. Its
/// callbacks are `Self::add_callback` and `Self::remove_callback`, and
/// [`REGISTERED`] holds its address while it is registered.
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
        let raw = bindings::ib_client {
            name: c_str!("lite").as_char_ptr(),
            add: Some(Self::add_callback),
            remove: Some(Self::remove_callback),
            ..Default::default()
        };
        let client = KBox::pin(Opaque::new(raw), GFP_KERNEL)?;
        // `add` callbacks start within the registration below.
        REGISTERED
            .compare_exchange(
                ptr::null_mut(),
                client.get(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| EBUSY)?;
        // SAFETY: `client` points to an initialised `ib_client` (name and
        // callbacks set, the rest zeroed as the core expects) in a pinned
        // allocation that outlives the registration: it is unregistered in
        // `drop` before the allocation is freed, and if registering fails the
        // core keeps no pointer to it.
        let registered = check(unsafe { bindings::ib_register_client(client.get()) });
        if let Err(e) = registered {
            REGISTERED.store(ptr::null_mut(), Ordering::Release);
            return Err(e);
        }
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
        let released = match DeviceReleased::new() {
            Ok(released) => released,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: The IB core passes a registered device that stays valid
        // until `remove_callback` returns for it, which waits on `released`
        // until the `Device` made here, and so everything created on it, has
        // been dropped. The core holds its device lock around `add`
        // callbacks, which excludes renames.
        let device = unsafe { Device::from_raw(ptr, released.clone()) };
        if let Err(e) = H::add(device) {
            return e.to_errno();
        }
        // SAFETY: `raw` is the device being added and `REGISTERED` is the
        // client whose `add` this is (set before registering); the core
        // allows setting client data from `add`. The pointer stored is
        // taken back, once, by `remove_callback`.
        unsafe {
            bindings::ib_set_client_data(
                raw,
                REGISTERED.load(Ordering::Acquire),
                Arc::into_raw(released).cast_mut().cast::<c_void>(),
            )
        };
        0
    }

    /// The IB core's `remove` callback.
    ///
    /// # Safety
    ///
    /// Only for the IB core: `raw` must be a device whose `add_callback`
    /// succeeded, and `data` the client data that callback set; the device
    /// stays valid until this returns.
    unsafe extern "C" fn remove_callback(raw: *mut bindings::ib_device, data: *mut c_void) {
        H::remove(raw);
        if data.is_null() {
            return;
        }
        // SAFETY: `data` came from `Arc::into_raw` in `add_callback` for
        // this device, and the core calls `remove` once per device.
        let released = unsafe { Arc::from_raw(data.cast::<DeviceReleased>().cast_const()) };
        released.wait();
    }
}

impl<H: ClientHandler> Drop for IbClient<H> {
    fn drop(&mut self) {
        // SAFETY: The client was registered in `register` and is still at
        // the same address (type invariant). Unregistering waits for running
        // callbacks and calls `remove` for every device, so the core holds
        // no pointer to it once this returns and the box is freed.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
        REGISTERED.store(ptr::null_mut(), Ordering::Release);
    }
}
