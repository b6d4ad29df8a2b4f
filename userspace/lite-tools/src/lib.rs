//! Programs that exercise LITE on the nodes of a cluster (`lite-demo`,
//! `lite-cluster-test`, `lite-failure-test`, `lite-partition-test`,
//! `lite-bench`, `lite-fuzz`, `lite-resources`, `lite-secret`; see
//! userspace/README.md and the top-level README), and the pieces they share.
//!
//! Among what they share are the bounds on every wait for another node
//! ([`deadline`]). Everything that does not issue a
//! LITE system call is unit tested on any Linux host; the cluster test
//! itself runs there against an in-memory model of the kernel, and the
//! failure and partition tests against that model with one node's death
//! or cut simulated.

#![warn(missing_docs)]

use std::fmt;
use std::io::Write;
use std::net::Ipv4Addr;

/// Declares a field-less enum whose variants have names (in a file, on a
/// command line): `ALL`, every variant in declaration order, `name`,
/// `from_name` and `parse`.
macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $type:ident {
        $($(#[$variant_meta:meta])* $variant:ident = $name:literal,)*
    }) => {
        $(#[$meta])*
        $vis enum $type {
            $($(#[$variant_meta])* $variant,)*
        }

        impl $type {
            /// Every variant, in declaration order.
            pub const ALL: [$type; [$($name),*].len()] = [$($type::$variant),*];

            /// The variant's name.
            pub fn name(self) -> &'static str {
                match self {
                    $($type::$variant => $name,)*
                }
            }

            /// The variant named `name`.
            pub fn from_name(name: &str) -> Option<$type> {
                Self::ALL.into_iter().find(|variant| variant.name() == name)
            }

            /// The variant named `name`, or which names there are.
            pub fn parse(name: &str) -> Result<$type, String> {
                let names = [$($name),*].join(" or ");
                Self::from_name(name).ok_or_else(|| format!("expected {names}"))
            }
        }
    };
}

pub mod args;
pub mod bench;
pub mod cluster_test;
pub mod cpu_hog;
pub mod deadline;
pub mod debugfs;
pub mod errno;
pub mod failure_test;
#[cfg(test)]
mod fake_kernel;
pub mod fuzz;
pub mod guest_devices;
pub mod kernel;
pub mod kernel_message_module;
pub mod keyring;
pub mod partition_test;
pub mod pattern;
pub mod plan;
pub mod resources;
pub mod stats;
pub mod tap;

/// Prints one line to stdout and flushes it at once, so that output on a
/// serial console is complete even if the program hangs or the machine
/// is shut down right after.
pub fn say(line: fmt::Arguments<'_>) {
    say_to(&mut std::io::stdout().lock(), line);
}

/// Writes one line to `out` and flushes it at once, as [`say`] does.
pub(crate) fn say_to(out: &mut impl Write, line: impl fmt::Display) {
    // A closed console leaves nowhere to report to; the exit status remains.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Largest cluster the tools accept: node ids are 1..MAX_NODES.
pub const MAX_CLUSTER_NODES: u32 = lite::sys::MAX_NODES - 1;

/// Parses a `--cm` value: the manager's dotted IPv4 address, which is the
/// only form `lite_join` accepts.
pub fn parse_cm_address(text: &str) -> Result<Ipv4Addr, String> {
    text.parse::<Ipv4Addr>()
        .map_err(|_| "expected a dotted IPv4 address such as 10.0.0.1".to_string())
}

/// Port of the node's RDMA device the tools use.
pub const IB_PORT: u32 = 1;

/// How this node came to be in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// This process joined; the node id.
    Joined(u32),
    /// The node had joined before (membership outlives processes); the node id.
    AlreadyMember(u32),
}

impl Membership {
    /// The node id.
    pub fn id(self) -> u32 {
        match self {
            Membership::Joined(id) | Membership::AlreadyMember(id) => id,
        }
    }
}

/// Joins the cluster managed at `cm` on the default port, or finds out
/// this node's id if it is a member already.
pub fn join_cluster(cm: Ipv4Addr) -> std::io::Result<Membership> {
    match lite::join(&cm.to_string(), lite::sys::CM_DEFAULT_PORT, IB_PORT) {
        Ok(id) => Ok(Membership::Joined(id)),
        Err(e) if e.raw_os_error() == Some(libc::EISCONN) => {
            lite::node_id().map(Membership::AlreadyMember)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cm_address_must_be_dotted_ipv4_and_the_cluster_leaves_room_for_the_manager() {
        assert_eq!(parse_cm_address("10.0.0.1"), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(parse_cm_address("localhost").is_err());
        assert!(parse_cm_address("::1").is_err());
        assert!(parse_cm_address("10.0.0.1:18500").is_err());
        assert_eq!(MAX_CLUSTER_NODES, 63);
    }
}
