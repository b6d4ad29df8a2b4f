// SPDX-License-Identifier: GPL-2.0

//! The lines an administrator writes to `/sys/kernel/debug/lite/quotas`.
//!
//! ```text
//! limit default KEY=V ...          the defaults; only the keys given change
//! limit uid U KEY=V ...            limits of user U, from the defaults on
//! limit uid U default              user U follows the defaults
//! limit node default remote_memory=V
//! limit node N remote_memory=V     what node N's LMRs may hold here
//! limit node N default
//! ```
//!
//! `V` is a decimal number or `unlimited`.

use crate::internal::node_id::NodeId;
use kernel::prelude::*;

use super::amounts::{Resource, UNLIMITED};

/// Changes to some of the limits of a user or of the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changes(pub(crate) [Option<u64>; Resource::COUNT]);

/// One line written by the administrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// New values for some default limits.
    SetDefaults(Changes),
    /// New values for some limits of user `uid`.
    SetUser {
        /// The user.
        uid: u32,
        /// The values.
        changes: Changes,
    },
    /// User `uid` follows the defaults again.
    ResetUser {
        /// The user.
        uid: u32,
    },
    /// What every other node's LMRs may hold on this node, in bytes.
    SetNodeDefault(u64),
    /// What node `node`'s LMRs may hold on this node, in bytes.
    SetNode {
        /// The node.
        node: NodeId,
        /// The limit.
        limit: u64,
    },
    /// Node `node` follows the default again.
    ResetNode {
        /// The node.
        node: NodeId,
    },
}

impl Command {
    /// Parses one line (a trailing newline is allowed).
    ///
    /// # Errors
    ///
    /// `EINVAL` for anything but one of the lines above.
    pub(crate) fn parse(line: &[u8]) -> Result<Command> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut words = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|w| !w.is_empty());
        if words.next() != Some(b"limit".as_slice()) {
            return Err(EINVAL);
        }
        let command = match (words.next(), words.next()) {
            (Some(b"default"), Some(first)) => {
                Command::SetDefaults(parse_changes(Some(first), &mut words)?)
            }
            (Some(b"uid"), Some(uid)) => {
                let uid = u32::try_from(parse_number(uid)?).map_err(|_| EINVAL)?;
                match words.next() {
                    Some(b"default") => Command::ResetUser { uid },
                    first => Command::SetUser {
                        uid,
                        changes: parse_changes(first, &mut words)?,
                    },
                }
            }
            (Some(b"node"), Some(b"default")) => {
                Command::SetNodeDefault(parse_node_limit(words.next())?)
            }
            (Some(b"node"), Some(node)) => {
                let node = parse_number(node)?;
                let node = match u32::try_from(node).map(NodeId::new) {
                    Ok(node) if node.is_member_id() => node,
                    _ => return Err(EINVAL),
                };
                match words.next() {
                    Some(b"default") => Command::ResetNode { node },
                    first => Command::SetNode {
                        node,
                        limit: parse_node_limit(first)?,
                    },
                }
            }
            _ => return Err(EINVAL),
        };
        // Nothing may follow a complete command.
        if words.next().is_some() {
            return Err(EINVAL);
        }
        Ok(command)
    }
}

/// `KEY=V` pairs from `first` on, at least one, each key once.
fn parse_changes<'a>(
    first: Option<&'a [u8]>,
    rest: &mut impl Iterator<Item = &'a [u8]>,
) -> Result<Changes> {
    let mut changes = Changes([None; Resource::COUNT]);
    let mut next = first;
    if next.is_none() {
        return Err(EINVAL);
    }
    while let Some(pair) = next {
        let (resource, value) = parse_pair(pair)?;
        // PANIC: every resource's index is below `Resource::COUNT`.
        let slot = &mut changes.0[resource as usize];
        if slot.is_some() {
            return Err(EINVAL);
        }
        *slot = Some(value);
        next = rest.next();
    }
    Ok(changes)
}

/// `remote_memory=V`, the only limit a node has.
fn parse_node_limit(pair: Option<&[u8]>) -> Result<u64> {
    match parse_pair(pair.ok_or(EINVAL)?)? {
        (Resource::RemoteMemory, value) => Ok(value),
        _ => Err(EINVAL),
    }
}

fn parse_pair(pair: &[u8]) -> Result<(Resource, u64)> {
    let at = pair.iter().position(|&b| b == b'=').ok_or(EINVAL)?;
    // PANIC: `at < pair.len()`, so both ranges are within `pair`.
    let (key, value) = (&pair[..at], &pair[at + 1..]);
    let resource = Resource::from_name(key).ok_or(EINVAL)?;
    let value = if value == b"unlimited" {
        UNLIMITED
    } else {
        parse_number(value)?
    };
    Ok((resource, value))
}

/// A decimal number below [`UNLIMITED`].
fn parse_number(text: &[u8]) -> Result<u64> {
    if text.is_empty() || text.len() > 20 {
        return Err(EINVAL);
    }
    let mut value = 0u64;
    for &digit in text {
        if !digit.is_ascii_digit() {
            return Err(EINVAL);
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .ok_or(EINVAL)?;
    }
    if value == UNLIMITED {
        return Err(EINVAL);
    }
    Ok(value)
}
