//! LITE's C userspace artifacts, built by `build.rs` with the `cc` crate.
//!
//! Building this crate (`cargo build -p lite-compat`, or `cargo build` of
//! the workspace) compiles, into `<target-dir>/<profile>/lite-c/`:
//!
//! - `liblite-compat.a` and `lite-lib.so`: the original LITE userspace
//!   library (`lite-lib.h`, copied there too) on this kernel's system calls;
//! - `lite-compat-test` (linked with `lite-lib.so`) and
//!   `lite-compat-test-static` (linked with `liblite-compat.a`): every
//!   compatibility function, run on every node by the cluster test;
//! - the C examples of `userspace/examples/` (but `hello_cluster`, which
//!   `cargo xtask cluster --exec` copies into the guests itself), built
//!   against `userspace/include/lite.h`;
//! - `lite-verbs-bench` (`userspace/verbs-baseline/`, on libibverbs): what
//!   LITE does for each operation the benchmark measures, on plain verbs.
//!
//! The crate itself has no Rust API: [`ARTIFACTS`] names what it builds.

/// File names `build.rs` places in `<target-dir>/<profile>/lite-c/`.
pub const ARTIFACTS: &[&str] = &[
    "liblite-compat.a",
    "lite-lib.so",
    "lite-lib.h",
    "lite-compat-test",
    "lite-compat-test-static",
    "lite_hello",
    "lite_share",
    "lite_rpc",
    "lite_lock",
    "lite-verbs-bench",
];

/// Programs among [`ARTIFACTS`] that run in the guests.
pub const GUEST_PROGRAMS: &[&str] = &[
    "lite-compat-test",
    "lite-compat-test-static",
    "lite_hello",
    "lite_share",
    "lite_rpc",
    "lite_lock",
    "lite-verbs-bench",
];

/// The shared library the guests need for `lite-compat-test`.
pub const GUEST_LIBRARY: &str = "lite-lib.so";

/// Name of the artifacts' directory under `<target-dir>/<profile>/`.
pub const ARTIFACT_DIR: &str = "lite-c";
