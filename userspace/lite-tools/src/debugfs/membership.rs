//! The membership file in [`DEBUGFS_DIR`](super::DEBUGFS_DIR): the node's
//! view of the cluster.
//!
//! While the node is a member (or was cut off and has not joined again
//! yet) the file holds `NAME VALUE` lines, then a `peer ID STATE
//! incarnation N` line per peer it ever connected to, then more `NAME
//! VALUE` lines (the tests' `CUT_OFF` is a whole file). A node that is no
//! member shows `joined 0` instead of everything up to
//! the peers.

use std::fmt;

use super::{for_each_line, once, parse_number};

/// The membership file's name.
pub const MEMBERSHIP_FILE: &str = "membership";

named_enum! {
    /// A peer's state as the node sees it, named as in the file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PeerState {
        /// Connected.
        Alive = "alive",
        /// Its connection failed; the manager has not decided yet.
        Suspect = "suspect",
        /// Declared dead by the manager (or fenced by a node cut off).
        Dead = "dead",
        /// Never connected since this node joined (the kernel does not list
        /// such peers).
        Absent = "absent",
    }
}

/// One `peer` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Node id.
    pub node: u32,
    /// As this node sees it.
    pub state: PeerState,
    /// The one this node connected to.
    pub incarnation: u32,
}

/// The membership of a node that is a member, or was cut off and has not
/// joined again yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMembership {
    /// This node's id.
    pub node: u32,
    /// Joins of this id, this one included.
    pub incarnation: u32,
    /// Last applied.
    pub epoch: u32,
    /// Cut off, declared dead, or leaving.
    pub fenced: bool,
    /// In file order.
    pub peers: Vec<Peer>,
}

impl NodeMembership {
    /// By node id.
    pub fn peer(&self, node: u32) -> Option<Peer> {
        self.peers.iter().copied().find(|p| p.node == node)
    }
}

impl fmt::Display for NodeMembership {
    /// Up to the peers (the kernel adds more lines).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "node {}", self.node)?;
        writeln!(f, "incarnation {}", self.incarnation)?;
        writeln!(f, "epoch {}", self.epoch)?;
        writeln!(f, "manager_epoch {}", self.epoch)?;
        writeln!(f, "fenced {}", u8::from(self.fenced))?;
        for peer in &self.peers {
            writeln!(
                f,
                "peer {} {} incarnation {}",
                peer.node,
                peer.state.name(),
                peer.incarnation
            )?;
        }
        Ok(())
    }
}

/// What the membership file shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipFile {
    /// `joined 0`: the node is no member (never joined, left, or between
    /// the end of a cut-off membership and the next join).
    NotJoined,
    /// A member, or cut off and not joined again yet.
    Member(NodeMembership),
}

/// Without the leading `peer`.
fn parse_peer(rest: &str) -> Result<Peer, String> {
    let items: Vec<&str> = rest.split_whitespace().collect();
    let [node, state, "incarnation", incarnation] = items.as_slice() else {
        return Err("expected peer ID STATE incarnation N".to_string());
    };
    Ok(Peer {
        node: parse_number(node, "peer id")?,
        state: PeerState::from_name(state).ok_or_else(|| format!("unknown state {state:?}"))?,
        incarnation: parse_number(incarnation, "incarnation")?,
    })
}

/// Parses the membership file. `node`, `incarnation`, `epoch` and `fenced`
/// must be there once each (unless the file says `joined 0`); other
/// `NAME VALUE` lines are ignored.
pub fn parse_membership(text: &str) -> Result<MembershipFile, String> {
    let not_joined = |line: &str| line.split_whitespace().eq(["joined", "0"]);
    if text.lines().any(not_joined) {
        return Ok(MembershipFile::NotJoined);
    }
    let (mut node, mut incarnation, mut epoch, mut fenced) = (None, None, None, None);
    let mut peers = Vec::new();
    for_each_line(text, |line| {
        let (name, value) = line.split_once(' ').ok_or("expected NAME VALUE")?;
        let value = value.trim();
        let slot = match name {
            "peer" => {
                peers.push(parse_peer(value)?);
                return Ok(());
            }
            "node" => &mut node,
            "incarnation" => &mut incarnation,
            "epoch" => &mut epoch,
            "fenced" => &mut fenced,
            _ => return Ok(()),
        };
        once(slot.replace(parse_number::<u32>(value, name)?), "repeated")
    })?;
    let missing = |what: &str| format!("{what} is missing");
    let fenced = match fenced.ok_or_else(|| missing("fenced"))? {
        0 => false,
        1 => true,
        other => return Err(format!("fenced is {other}, not 0 or 1")),
    };
    Ok(MembershipFile::Member(NodeMembership {
        node: node.ok_or_else(|| missing("node"))?,
        incarnation: incarnation.ok_or_else(|| missing("incarnation"))?,
        epoch: epoch.ok_or_else(|| missing("epoch"))?,
        fenced,
        peers,
    }))
}

/// The RDMA device the membership runs on (`None` for no member).
pub fn device_in_use(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("device "))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file of a node cut off from the cluster, as the kernel writes it.
    const CUT_OFF: &str = "node 3\nincarnation 1\nepoch 5\nmanager_epoch 6\nfenced 1\n\
                           peer 1 dead incarnation 1\npeer 2 dead incarnation 2\n\
                           device rxe1\nport 1\n\
                           manager_last_heard_ms_ago 4120\nheartbeat_ms 500\n\
                           manager_timeout_ms 3000\n";

    fn peer(node: u32, state: PeerState, incarnation: u32) -> Peer {
        Peer {
            node,
            state,
            incarnation,
        }
    }

    #[test]
    fn the_kernel_s_files_parse_the_format_round_trips_and_malformed_ones_fail() {
        let MembershipFile::Member(view) = parse_membership(CUT_OFF).expect("parses") else {
            panic!("a member's file read as no member");
        };
        assert_eq!((view.node, view.incarnation, view.epoch), (3, 1, 5));
        assert!(view.fenced);
        assert_eq!(view.peer(2), Some(peer(2, PeerState::Dead, 2)));
        assert_eq!(view.peer(3), None);
        assert_eq!(view.peers.len(), 2);
        assert_eq!(device_in_use(CUT_OFF), Some("rxe1"));
        // What the file's format shows reads back, whatever the states.
        let view = NodeMembership {
            fenced: false,
            peers: vec![peer(2, PeerState::Alive, 1), peer(3, PeerState::Suspect, 4)],
            ..view
        };
        let text = format!("{view}manager_last_heard_ms_ago 3\n");
        assert_eq!(parse_membership(&text), Ok(MembershipFile::Member(view)));
        // A node that is no member says `joined 0`, and names no device.
        let text = "joined 0\nheartbeat_ms 500\nmanager_timeout_ms 3000\n";
        assert_eq!(parse_membership(text), Ok(MembershipFile::NotJoined));
        assert_eq!(device_in_use(text), None);
        for (text, why) in [
            ("node 1\nincarnation 1\nepoch 1\n", "fenced is missing"),
            ("node 1\nincarnation 1\nepoch 1\nfenced 2\n", "not 0 or 1"),
            ("node 1\nnode 2\n", "repeated"),
            ("node x\n", "not a decimal number"),
            ("fenced\n", "expected NAME VALUE"),
            ("peer 2 alive 1\n", "expected peer ID STATE"),
            ("peer 2 gone incarnation 1\n", "unknown state"),
        ] {
            let error = parse_membership(text).unwrap_err();
            assert!(error.contains(why), "{text:?}: {error}");
        }
    }

    #[test]
    fn the_parser_reads_what_the_kernel_writes() {
        let view = include_str!("../../../../rust-lite/internal/membership/view.rs");
        for line in [
            "\"node {}\"",
            "\"incarnation {}\"",
            "\"epoch {}\"",
            "\"fenced {}\"",
            "\"peer {} {} incarnation {}\"",
        ] {
            assert!(view.contains(line), "the kernel no longer writes {line}");
        }
        for state in PeerState::ALL {
            let name = state.name();
            assert!(
                view.contains(&format!("=> \"{name}\"")),
                "the kernel has no state {name}"
            );
        }
        let api = include_str!("../../../../rust-lite/api/sync_syscalls.rs");
        assert!(api.contains("\"joined 0\\n\""));
    }
}
