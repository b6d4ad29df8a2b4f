//! How the fuzzers of a cluster start and end together.
//!
//! Fuzzing another node's memory, ports and locks while its earlier
//! program (the cluster test) still runs would break that program's
//! checks, and a node that reboots while others still fuzz fails their
//! calls. So each node's coordinator publishes a small LMR under a name
//! of its own when it is ready to start, and another when it is done, and
//! waits until it can map the other nodes' (a node that left the cluster
//! counts as done). It keeps its names published for a while after it
//! saw everyone's, so that the others see its own in time.

use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use lite::sys::PERM_READ;
use lite::Lmr;

use super::pool::{coordinator_name, SHARED_PASSWORD};

const POLL: Duration = Duration::from_millis(250);

/// Published while the returned LMR lives.
pub(crate) fn announce(me: u32, kind: u64) -> io::Result<Lmr> {
    let name = coordinator_name(me, kind);
    Lmr::wrap(&[0x5a; 64], name, SHARED_PASSWORD)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Yes,
    NotYet,
    /// The node is not (or no longer) a member.
    Gone,
}

fn look(node: u32, kind: u64) -> Seen {
    let name = coordinator_name(node, kind);
    match Lmr::ask(node, name, PERM_READ, SHARED_PASSWORD) {
        // The mapping, unmapped when dropped, only had to exist.
        Ok(_) => Seen::Yes,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EHOSTUNREACH | libc::EHOSTDOWN)) => {
            Seen::Gone
        }
        Err(_) => Seen::NotYet,
    }
}

/// `gone_counts`: a node that is not a member counts as seen. Returns the
/// nodes still missing.
pub(crate) fn await_others(
    me: u32,
    nodes: u32,
    kind: u64,
    timeout: Duration,
    gone_counts: bool,
) -> Vec<u32> {
    let since = Instant::now();
    let mut missing: Vec<u32> = (1..=nodes).filter(|&n| n != me).collect();
    loop {
        missing.retain(|&node| match look(node, kind) {
            Seen::Yes => false,
            Seen::Gone => !gone_counts,
            Seen::NotYet => true,
        });
        if missing.is_empty() || since.elapsed() >= timeout {
            return missing;
        }
        sleep(POLL);
    }
}
