// SPDX-License-Identifier: GPL-2.0

//! Wire format between a LITE node and the cluster manager.
//!
//! The cluster manager (`userspace/cluster-manager`) is a userspace daemon
//! listening on TCP (port 18500 by default). It assigns node ids and
//! brokers the exchange of RC queue pair endpoints so that every node ends
//! up connected to every other node. This module is plain `core` Rust: the
//! kernel and the manager both compile this very file, so the two sides
//! cannot disagree on the format.
//!
//! Every frame is a 12-byte [`Header`] followed by a payload whose length
//! depends only on the [`Kind`]. All integers are little-endian.
//!
//! Every connection starts with mutual authentication by the cluster's
//! secret `K`, which the manager and every node hold (the manager in a
//! file, a node in its kernel keyring):
//!
//! ```text
//! node                       manager
//!                   <------  Challenge{nonce_m}       on accept
//!   Auth{nonce_n, proof_n} ->
//!                            proof_n = HMAC(K, NODE_LABEL | nonce_m | nonce_n)
//!                   <------  AuthOk{proof_m}
//!                            proof_m = HMAC(K, MANAGER_LABEL | nonce_n | nonce_m)
//!                   <------  Failure{-EKEYREJECTED}   instead, for a wrong
//!                                                      proof; then closes
//! ```
//!
//! HMAC is HMAC-SHA256. A node that finds `proof_m` wrong drops the
//! connection (`EKEYREJECTED`): only a holder of `K` can act as its
//! manager. After `AuthOk`, in both directions, every frame is followed
//! by a [`TAG_LEN`]-byte tag, the first bytes of
//! `HMAC(S, direction | sequence | frame)` ([`tag_input`]) with the session
//! key `S = HMAC(K, SESSION_LABEL | nonce_m | nonce_n)`, the direction
//! [`NODE_TO_MANAGER`] or [`MANAGER_TO_NODE`] and a sequence number
//! counting that direction's tagged frames from 0. A frame whose tag does
//! not match ends the connection: frames cannot be forged, altered,
//! replayed or reordered. The authentication frames (`Challenge`, `Auth`,
//! `AuthOk`, or the `Failure` that refuses the node) carry no tag; tagging
//! starts with the first frame after `AuthOk`, sequence 0 in each
//! direction.
//!
//! A join then runs as follows (the manager serialises joins):
//!
//! ```text
//! node N                     manager                      node P (each earlier node)
//!   Hello{gid,lid}  ------>
//!                   <------  Welcome{node_id}
//!                            Prepare{peer=N}  ----------> creates a QP for N
//!                            <------------------ QpInfo{peer=N, P's endpoint}
//!                   <------  Prepare{peer=P}
//!   QpInfo{peer=P} ------->
//!                            Connect{peer=N, N's endpoint} --> QP to RTS
//!                            <------------------ Connected{peer=N, status}
//!                   <------  Connect{peer=P, P's endpoint}
//!   Connected{P}   ------->
//!                   <------  JoinDone{total_nodes}
//! ```
//!
//! After `JoinDone` the node keeps the connection open; the manager uses it
//! to run the right-hand side of this exchange when later nodes join.
//!
//! Membership after the join:
//!
//! ```text
//! node                       manager
//!   Heartbeat{node,epoch} -->         every heartbeat interval (500 ms)
//!                   <------  HeartbeatAck{epoch}
//!   Suspect{peer,inc}  --->           the connection to `peer` failed
//!                   <------  Probe{peer,inc}   to every other member once
//!                            `peer` is silent for `dead_after` (3 s): it is
//!                            suspected
//!   ProbeReply{peer,inc,heard_ms_ago} --> when this node last heard from
//!                            `peer` over its RDMA connection
//!                   <------  NodeDead{node,inc,epoch}  to every survivor,
//!                            once a suspect stayed silent through the
//!                            suspicion and no peer heard from it, or when
//!                            the node's connection to the manager breaks
//!   Leave{node,inc}    --->           the node leaves gracefully
//!                   <------  NodeDead{node,inc,epoch}  to the leaver and to
//!                            every other member; then the manager closes
//!                            the leaver's connection
//! ```
//!
//! A member whose connection to the manager broke (the manager restarted,
//! or the connection was reset) connects again and resumes instead of
//! joining, keeping its id, incarnation and queue pairs:
//!
//! ```text
//!   Resume{node,inc,epoch,gid} -->
//!                   <------  Resumed{epoch}     still a member, or
//!                   <------  Failure{-EHOSTDOWN} declared dead meanwhile
//! ```
//!
//! A manager that starts afresh learns its members from their resumes; for
//! its first `dead_after` it refuses joins with `-EAGAIN`, so that no id of
//! a member yet to resume is handed out again.
//!
//! Only the manager declares a node dead. The epoch counts membership
//! changes (joins and deaths) and never goes back, so a node drops any
//! `NodeDead` whose epoch is not newer than the last it applied; the
//! incarnation counts the joins of one node id, so news about an earlier
//! incarnation of a node that rejoined is dropped too.

use super::wire_layout::{self, wire_layout, WireField};

/// Magic number opening every frame ("LITE" in ASCII, little-endian).
pub const MAGIC: u32 = u32::from_le_bytes(*b"LITE");

/// Protocol version carried in every frame.
pub const VERSION: u16 = 5;

/// Size of an encoded [`Header`].
pub const HEADER_LEN: usize = 12;

/// Size of an encoded [`Endpoint`].
pub const ENDPOINT_LEN: usize = 32;

/// Bytes of a nonce of the authentication.
pub const NONCE_LEN: usize = 16;

/// Bytes of an HMAC-SHA256 result: a proof of the authentication, the
/// session key.
pub const MAC_LEN: usize = 32;

/// Bytes of the tag that follows every frame after the authentication.
pub const TAG_LEN: usize = 16;

/// Largest secret a node or the manager uses.
pub const MAX_SECRET_LEN: usize = 256;

/// Label of the node's proof.
pub const NODE_LABEL: &[u8] = b"LITE node proof v3";

/// Label of the manager's proof.
pub const MANAGER_LABEL: &[u8] = b"LITE manager proof v3";

/// Label of the session key.
pub const SESSION_LABEL: &[u8] = b"LITE session key v3";

/// Direction byte of frames a node sends.
pub const NODE_TO_MANAGER: u8 = b'N';

/// Direction byte of frames the manager sends.
pub const MANAGER_TO_NODE: u8 = b'M';

/// Largest input of the HMACs of the authentication: a label and two nonces.
pub const AUTH_INPUT_LEN: usize = 32 + 2 * NONCE_LEN;

/// Largest input of a tag's HMAC: direction, sequence number and frame.
pub const TAG_INPUT_LEN: usize = 1 + 8 + MAX_FRAME_LEN;

/// Largest payload of any frame kind.
pub const MAX_PAYLOAD_LEN: usize = NONCE_LEN + MAC_LEN;

/// Largest encoded frame.
pub const MAX_FRAME_LEN: usize = HEADER_LEN + MAX_PAYLOAD_LEN;

/// Errors found while decoding a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The frame does not start with [`MAGIC`].
    BadMagic,
    /// The frame has a version this side does not speak.
    BadVersion,
    /// The kind field is not a known [`Kind`].
    UnknownKind,
    /// The payload length does not match the kind.
    BadLength,
    /// The buffer is shorter than the frame claims.
    Truncated,
}

/// Frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Kind of the payload that follows.
    pub kind: Kind,
    /// Payload length in bytes (always `kind.payload_len()`).
    pub len: u32,
}

wire_layout! {
    /// A [`Header`] as it travels.
    struct RawHeader {
        magic: u32,
        version: u16,
        kind: u16,
        len: u32,
    }
}

const _: () = assert!(<RawHeader as WireField>::LEN == HEADER_LEN);

impl Header {
    /// Builds the header of a frame of `kind`.
    pub fn new(kind: Kind) -> Self {
        Header {
            kind,
            len: kind.payload_len() as u32,
        }
    }

    /// Encodes the header into the first [`HEADER_LEN`] bytes of `out`.
    pub fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        *out = wire_layout::encode(&RawHeader {
            magic: MAGIC,
            version: VERSION,
            kind: self.kind as u16,
            len: self.len,
        });
    }

    /// Decodes and validates a header.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Self, WireError> {
        let raw: RawHeader = wire_layout::decode(bytes);
        if raw.magic != MAGIC {
            return Err(WireError::BadMagic);
        }
        if raw.version != VERSION {
            return Err(WireError::BadVersion);
        }
        let kind = Kind::from_u16(raw.kind)?;
        if raw.len as usize != kind.payload_len() {
            return Err(WireError::BadLength);
        }
        Ok(Header { kind, len: raw.len })
    }
}

wire_layout! {
    /// An RC queue pair endpoint as seen by the remote side.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Endpoint {
        /// In `QpInfo`: the peer this QP is for. In `Connect`: the peer that owns the endpoint.
        pub peer: u32,
        /// Queue pair number.
        pub qpn: u32,
        /// Initial packet sequence number.
        pub psn: u32,
        /// Port LID (0 on RoCE).
        pub lid: u16,
        /// Path MTU in bytes the owner supports.
        pub mtu: u16,
        /// Port GID (for RoCE the IPv4-mapped address).
        pub gid: [u8; 16],
    }
}

const _: () = assert!(<Endpoint as WireField>::LEN == ENDPOINT_LEN);

wire_layout! {
    /// Payload of [`Kind::Hello`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Hello {
        /// GID of the node's port.
        pub gid: [u8; 16],
        /// The id the node had before, to be given again as a new incarnation
        /// if no live node has it; 0 if the node does not know it (first join,
        /// or a reboot), and the manager then gives back the id last held by a
        /// node with this GID, if any. A Hello with the GID of a live member
        /// is refused with `Failure { errno: -EADDRINUSE }`.
        pub rejoin_id: u32,
        /// LID of the node's port (0 on RoCE).
        pub lid: u16,
    }
}

wire_layout! {
    /// Payload of [`Kind::Resume`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Resume {
        /// The member's node id.
        pub node_id: u32,
        /// Its incarnation.
        pub incarnation: u32,
        /// The newest membership epoch it applied.
        pub epoch: u32,
        /// GID of its port.
        pub gid: [u8; 16],
    }
}

/// The bytes of a payload: one [`WireField`] type, or fields one after the
/// other.
macro_rules! payload_len {
    (($ty:ty)) => {
        <$ty as WireField>::LEN
    };
    ({ $($(#[$meta:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        0 $(+ <$ty as WireField>::LEN)*
    };
}

/// Writes the payload of `$message` into `$out` if it is a `$name`.
macro_rules! put_payload {
    ($message:expr, $out:expr, $name:ident ($ty:ty)) => {
        if let Message::$name(value) = $message {
            value.put($out);
        }
    };
    (
        $message:expr, $out:expr,
        $name:ident { $($(#[$meta:meta])* $field:ident: $ty:ty),* $(,)? }
    ) => {
        if let Message::$name { $($field),* } = $message {
            let mut at = 0;
            $(
                let end = at + <$ty as WireField>::LEN;
                // PANIC: `$out` is the payload's length, the sum of its
                // fields' lengths.
                $field.put(&mut $out[at..end]);
                at = end;
            )*
            let _ = at;
        }
    };
}

/// Reads a `$name` from the payload `$bytes`, which is its length.
macro_rules! get_payload {
    ($bytes:expr, $name:ident ($ty:ty)) => {
        Message::$name(<$ty as WireField>::get($bytes))
    };
    ($bytes:expr, $name:ident { $($(#[$meta:meta])* $field:ident: $ty:ty),* $(,)? }) => {{
        let mut at = 0;
        $(
            let end = at + <$ty as WireField>::LEN;
            // PANIC: as in `put_payload`.
            let $field = <$ty as WireField>::get(&$bytes[at..end]);
            at = end;
        )*
        let _ = at;
        Message::$name { $($field),* }
    }};
}

/// Declares every kind of frame once, with its number and its payload:
/// [`Kind`], [`Message`] with one variant per kind, and their encoding.
macro_rules! cm_messages {
    ($($(#[$doc:meta])* $name:ident = $number:literal $payload:tt),* $(,)?) => {
        /// Kinds of frames.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u16)]
        pub enum Kind {
            $($(#[$doc])* $name = $number,)*
        }

        impl Kind {
            /// Decodes a kind number.
            pub fn from_u16(value: u16) -> Result<Self, WireError> {
                match value {
                    $($number => Ok(Kind::$name),)*
                    _ => Err(WireError::UnknownKind),
                }
            }

            /// Payload length that frames of this kind carry.
            pub fn payload_len(self) -> usize {
                match self {
                    $(Kind::$name => payload_len!($payload),)*
                }
            }
        }

        /// A decoded frame.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Message {
            $($(#[$doc])* $name $payload,)*
        }

        impl Message {
            /// Kind of this message.
            pub fn kind(&self) -> Kind {
                match self {
                    $(Message::$name { .. } => Kind::$name,)*
                }
            }

            /// Encodes the whole frame (header and payload) into `out`;
            /// returns its length.
            pub fn encode(&self, out: &mut [u8; MAX_FRAME_LEN]) -> usize {
                *out = [0; MAX_FRAME_LEN];
                let kind = self.kind();
                let len = kind.payload_len();
                let mut header = [0u8; HEADER_LEN];
                Header::new(kind).encode(&mut header);
                // PANIC: `out` is `HEADER_LEN + MAX_PAYLOAD_LEN` bytes, and no
                // payload is longer than `MAX_PAYLOAD_LEN` (asserted below).
                out[..HEADER_LEN].copy_from_slice(&header);
                let payload = &mut out[HEADER_LEN..HEADER_LEN + len];
                $(put_payload!(*self, payload, $name $payload);)*
                HEADER_LEN + len
            }

            /// Decodes the payload of a frame whose header was already
            /// decoded.
            pub fn decode(header: Header, payload: &[u8]) -> Result<Self, WireError> {
                let Some(p) = payload.get(..header.kind.payload_len()) else {
                    return Err(WireError::Truncated);
                };
                Ok(match header.kind {
                    $(Kind::$name => get_payload!(p, $name $payload),)*
                })
            }
        }

        const _: () = {
            $(assert!(payload_len!($payload) <= MAX_PAYLOAD_LEN);)*
        };
    };
}

cm_messages! {
    /// Node to manager: first frame of a join.
    Hello = 1 (Hello),
    /// Manager to node: the node id assigned to the joining node.
    Welcome = 2 {
        /// Assigned node id (>= 1; 0 is the manager).
        node_id: u32,
        /// How many times this id has joined, this join included (>= 1).
        incarnation: u32,
    },
    /// Manager to node: create a QP for `peer`.
    Prepare = 3 {
        /// Node the QP is to be created for.
        peer: u32,
        /// That node's incarnation.
        incarnation: u32,
    },
    /// Node to manager: the endpoint of the QP created for `peer`.
    QpInfo = 4 (Endpoint),
    /// Manager to node: connect the QP for `peer` to this endpoint.
    Connect = 5 (Endpoint),
    /// Node to manager: result of a `Connect`.
    Connected = 6 {
        /// Peer whose QP was connected.
        peer: u32,
        /// 0 on success, else a negative errno.
        status: i32,
    },
    /// Manager to node: the join is complete.
    JoinDone = 7 {
        /// Nodes in the cluster including the new one.
        total_nodes: u32,
        /// Membership epoch after this join.
        epoch: u32,
    },
    /// Either direction: the request failed.
    Failure = 8 {
        /// Negative errno describing the failure.
        errno: i32,
    },
    /// Node to manager: this node is alive.
    Heartbeat = 9 {
        /// The sending node.
        node_id: u32,
        /// The newest membership epoch the node applied.
        epoch: u32,
    },
    /// Manager to node: answer to a heartbeat.
    HeartbeatAck = 10 {
        /// The manager's current membership epoch.
        epoch: u32,
    },
    /// Node to manager: the connection to a peer failed.
    Suspect = 11 {
        /// The peer whose connection failed.
        peer: u32,
        /// The incarnation of that peer the connection was to.
        incarnation: u32,
    },
    /// Manager to node: a node was declared dead.
    NodeDead = 12 {
        /// The node declared dead.
        node: u32,
        /// Its incarnation.
        incarnation: u32,
        /// Membership epoch of this change.
        epoch: u32,
    },
    /// Node to manager: this node leaves the cluster.
    Leave = 13 {
        /// The leaving node.
        node_id: u32,
        /// Its incarnation.
        incarnation: u32,
    },
    /// Node to manager: first frame of a member reconnecting.
    Resume = 14 (Resume),
    /// Manager to node: the member resumed.
    Resumed = 15 {
        /// The manager's membership epoch.
        epoch: u32,
    },
    /// Manager to node: first frame of every connection.
    Challenge = 16 {
        /// The manager's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Node to manager: answer to the challenge.
    Auth = 17 {
        /// The node's nonce.
        nonce: [u8; NONCE_LEN],
        /// `HMAC(K, NODE_LABEL | manager's nonce | node's nonce)`.
        proof: [u8; MAC_LEN],
    },
    /// Manager to node: the node's proof is right.
    AuthOk = 18 {
        /// `HMAC(K, MANAGER_LABEL | node's nonce | manager's nonce)`.
        proof: [u8; MAC_LEN],
    },
    /// Manager to node: when did you last hear from a suspected peer?
    Probe = 19 {
        /// The suspected node.
        peer: u32,
        /// Its incarnation.
        incarnation: u32,
    },
    /// Node to manager: answer to a probe.
    ProbeReply = 20 {
        /// The suspected node, as in the probe.
        peer: u32,
        /// Its incarnation, as in the probe.
        incarnation: u32,
        /// Milliseconds since a message from `peer` last arrived or its
        /// device last acknowledged an operation, [`NEVER_HEARD`] if that
        /// never happened or the answering node has no connection to that
        /// incarnation.
        heard_ms_ago: u32,
    },
}

/// [`Message::ProbeReply::heard_ms_ago`] of a peer never heard from.
pub const NEVER_HEARD: u32 = u32::MAX;

/// Writes `label | first | second` into `out`, the input of a proof or of
/// the session key; returns its length.
///
/// For the node's proof `first` is the manager's nonce and `second` the
/// node's; for the manager's proof the other way round; for the session key
/// the manager's nonce first.
pub fn auth_input(
    label: &[u8],
    first: &[u8; NONCE_LEN],
    second: &[u8; NONCE_LEN],
    out: &mut [u8; AUTH_INPUT_LEN],
) -> usize {
    // The labels are constants of this file, all shorter than 32 bytes.
    let label = &label[..label.len().min(AUTH_INPUT_LEN - 2 * NONCE_LEN)];
    let at = label.len();
    // PANIC: `at <= 32`, so every range ends at most at `AUTH_INPUT_LEN`.
    out[..at].copy_from_slice(label);
    out[at..at + NONCE_LEN].copy_from_slice(first);
    out[at + NONCE_LEN..at + 2 * NONCE_LEN].copy_from_slice(second);
    at + 2 * NONCE_LEN
}

/// Writes `direction | sequence (little-endian) | frame` into `out`, the
/// input of the tag of `frame`; returns its length, or `None` if `frame` is
/// longer than any frame.
pub fn tag_input(
    direction: u8,
    sequence: u64,
    frame: &[u8],
    out: &mut [u8; TAG_INPUT_LEN],
) -> Option<usize> {
    if frame.len() > MAX_FRAME_LEN {
        return None;
    }
    // PANIC: `frame.len() <= MAX_FRAME_LEN`, so every range ends at most at
    // `TAG_INPUT_LEN`.
    out[0] = direction;
    out[1..9].copy_from_slice(&sequence.to_le_bytes());
    out[9..9 + frame.len()].copy_from_slice(frame);
    Some(9 + frame.len())
}

/// `HMAC(K, label | first | second)` with `mac`, the side's HMAC-SHA256
/// keyed with the cluster's secret `K`: a proof of the authentication
/// ([`NODE_LABEL`], [`MANAGER_LABEL`]) or the session key
/// ([`SESSION_LABEL`]); see [`auth_input`] for the order of the nonces.
pub fn auth_mac<E>(
    mac: impl FnOnce(&[u8]) -> Result<[u8; MAC_LEN], E>,
    label: &[u8],
    first: &[u8; NONCE_LEN],
    second: &[u8; NONCE_LEN],
) -> Result<[u8; MAC_LEN], E> {
    let mut input = [0u8; AUTH_INPUT_LEN];
    let len = auth_input(label, first, second, &mut input);
    // PANIC: `auth_input` returns a length within `input`.
    mac(&input[..len])
}

/// The tag of `frame`, the `sequence`th frame sent in `direction`, with
/// `mac`, the side's HMAC-SHA256 keyed with the session key.
pub fn frame_tag<E>(
    mac: impl FnOnce(&[u8]) -> Result<[u8; MAC_LEN], E>,
    direction: u8,
    sequence: u64,
    frame: &[u8],
) -> Result<[u8; TAG_LEN], E> {
    let mut input = [0u8; TAG_INPUT_LEN];
    // Frames come from `Message::encode` or `read_frame`, never longer
    // than `MAX_FRAME_LEN`; an empty input would only yield a tag no peer
    // expects.
    let len = tag_input(direction, sequence, frame, &mut input).unwrap_or(0);
    // PANIC: `tag_input` returns a length within `input`.
    let mac = mac(&input[..len])?;
    let mut tag = [0u8; TAG_LEN];
    // PANIC: `TAG_LEN <= MAC_LEN`.
    tag.copy_from_slice(&mac[..TAG_LEN]);
    Ok(tag)
}

/// What stopped [`read_frame`].
#[derive(Debug)]
pub enum FrameError<E> {
    /// The header is not one of this protocol's.
    Wire(WireError),
    /// Reading the stream failed.
    Stream(E),
}

/// Reads one frame into `frame` with `recv_exact`, which fills the whole
/// buffer it is given: the header, then the payload its kind carries.
/// Returns the header and the frame's length.
pub fn read_frame<E>(
    mut recv_exact: impl FnMut(&mut [u8]) -> Result<(), E>,
    frame: &mut [u8; MAX_FRAME_LEN],
) -> Result<(Header, usize), FrameError<E>> {
    let mut header = [0u8; HEADER_LEN];
    recv_exact(&mut header).map_err(FrameError::Stream)?;
    let decoded = Header::decode(&header).map_err(FrameError::Wire)?;
    // Every payload fits in `MAX_PAYLOAD_LEN` (asserted where the kinds
    // are declared).
    let end = HEADER_LEN + decoded.kind.payload_len();
    // PANIC: `end <= MAX_FRAME_LEN`, the length of `frame`.
    frame[..HEADER_LEN].copy_from_slice(&header);
    recv_exact(&mut frame[HEADER_LEN..end]).map_err(FrameError::Stream)?;
    Ok((decoded, end))
}

/// Compares two byte strings in time independent of where they differ.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}
