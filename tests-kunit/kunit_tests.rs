// SPDX-License-Identifier: GPL-2.0

//! Bodies of LITE's KUnit cases (suites in `lite_kunit.c`), one file per
//! subject.
//!
//! Each `lite_test_*` function checks one unit of LITE's internal logic and
//! reports every failed check to KUnit with its location and expression.

use core::ffi::c_char;
use kernel::bindings;

extern "C" {
    fn lite_kunit_fail(test: *mut bindings::kunit, what: *const c_char);
}

/// Reports failed checks of one test case.
struct Check {
    test: *mut bindings::kunit,
}

impl Check {
    fn that(&self, ok: bool, what: &'static [u8]) {
        if !ok {
            // SAFETY: `test` is the running test passed in by KUnit and
            // `what` is NUL-terminated (built by `check!`).
            unsafe { lite_kunit_fail(self.test, what.as_ptr().cast()) };
        }
    }
}

macro_rules! check {
    ($c:expr, $cond:expr) => {
        $c.that(
            $cond,
            concat!(file!(), ":", line!(), ": ", stringify!($cond), "\0").as_bytes(),
        )
    };
}

macro_rules! kunit_case {
    ($name:ident, |$c:ident| $body:block) => {
        /// KUnit case body, called from `lite_kunit.c`.
        #[no_mangle]
        pub(crate) extern "C" fn $name(test: *mut bindings::kunit) {
            let $c = Check { test };
            $body
        }
    };
}

// The `lite_internal` suite: data layouts, tables, the RPC ring, locks,
// membership, barriers, QoS and quotas.
mod device;
mod locks;
mod membership;
mod memory_layout;
mod quotas;
mod rpc_ring;
mod sync;
mod tables;

// The `lite_wire`, `lite_api` and `lite_cluster` suites: the wire formats,
// the kernel API, and a joined cluster.
mod api;
mod cluster;
mod wire;
