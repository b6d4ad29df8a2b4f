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
//!                   <------  Challenge{nonce_m}           on accept
//!   Auth{nonce_n, proof_n} ->  proof_n = HMAC(K, NODE_LABEL | nonce_m | nonce_n)
//!                   <------  AuthOk{proof_m}             proof_m = HMAC(K, MANAGER_LABEL | nonce_n | nonce_m)
//!                   <------  Failure{-EKEYREJECTED}      instead, for a wrong proof; then closes
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

/// Magic number opening every frame ("LITE" in ASCII, little-endian).
pub const MAGIC: u32 = u32::from_le_bytes(*b"LITE");

/// Protocol version carried in every frame.
pub const VERSION: u16 = 4;

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

/// Kinds of frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Kind {
    /// Node to manager: first frame of a join; payload [`Hello`].
    Hello = 1,
    /// Manager to node: the node's id; payload [`Message::Welcome`].
    Welcome = 2,
    /// Manager to node: create a QP for `peer`; payload: the peer's node id.
    Prepare = 3,
    /// Node to manager: the endpoint of the QP created for `peer`; payload [`Endpoint`].
    QpInfo = 4,
    /// Manager to node: connect the QP for `peer` to this endpoint; payload [`Endpoint`].
    Connect = 5,
    /// Node to manager: result of a `Connect`; payload [`Message::Connected`].
    Connected = 6,
    /// Manager to node: the join is complete; payload [`Message::JoinDone`].
    JoinDone = 7,
    /// Either direction: the request failed; payload [`Message::Failure`].
    Failure = 8,
    /// Node to manager: this node is alive; payload [`Message::Heartbeat`].
    Heartbeat = 9,
    /// Manager to node: answer to a heartbeat; payload [`Message::HeartbeatAck`].
    HeartbeatAck = 10,
    /// Node to manager: the connection to a peer failed; payload [`Message::Suspect`].
    Suspect = 11,
    /// Manager to node: a node was declared dead; payload [`Message::NodeDead`].
    NodeDead = 12,
    /// Node to manager: this node leaves the cluster; payload [`Message::Leave`].
    Leave = 13,
    /// Node to manager: first frame of a member reconnecting; payload
    /// [`Resume`].
    Resume = 14,
    /// Manager to node: the member resumed; payload [`Message::Resumed`].
    Resumed = 15,
    /// Manager to node: first frame of every connection; payload: the
    /// manager's nonce.
    Challenge = 16,
    /// Node to manager: answer to the challenge; payload: the node's nonce
    /// and its proof.
    Auth = 17,
    /// Manager to node: the node's proof is right; payload: the manager's
    /// proof.
    AuthOk = 18,
    /// Manager to node: when did you last hear from a suspected peer?
    /// Payload [`Message::Probe`].
    Probe = 19,
    /// Node to manager: answer to a probe; payload [`Message::ProbeReply`].
    ProbeReply = 20,
}

impl Kind {
    /// Decodes a kind number.
    pub fn from_u16(value: u16) -> Result<Self, WireError> {
        Ok(match value {
            1 => Kind::Hello,
            2 => Kind::Welcome,
            3 => Kind::Prepare,
            4 => Kind::QpInfo,
            5 => Kind::Connect,
            6 => Kind::Connected,
            7 => Kind::JoinDone,
            8 => Kind::Failure,
            9 => Kind::Heartbeat,
            10 => Kind::HeartbeatAck,
            11 => Kind::Suspect,
            12 => Kind::NodeDead,
            13 => Kind::Leave,
            14 => Kind::Resume,
            15 => Kind::Resumed,
            16 => Kind::Challenge,
            17 => Kind::Auth,
            18 => Kind::AuthOk,
            19 => Kind::Probe,
            20 => Kind::ProbeReply,
            _ => return Err(WireError::UnknownKind),
        })
    }

    /// Payload length that frames of this kind carry.
    pub fn payload_len(self) -> usize {
        match self {
            Kind::Hello => 24,
            Kind::Welcome
            | Kind::Prepare
            | Kind::Connected
            | Kind::JoinDone
            | Kind::Failure
            | Kind::Heartbeat
            | Kind::HeartbeatAck
            | Kind::Suspect
            | Kind::Leave
            | Kind::Probe
            | Kind::Resumed => 8,
            Kind::Resume => 28,
            Kind::NodeDead | Kind::ProbeReply => 12,
            Kind::QpInfo | Kind::Connect => ENDPOINT_LEN,
            Kind::Challenge => NONCE_LEN,
            Kind::Auth => NONCE_LEN + MAC_LEN,
            Kind::AuthOk => MAC_LEN,
        }
    }
}

/// Frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Kind of the payload that follows.
    pub kind: Kind,
    /// Payload length in bytes (always `kind.payload_len()`).
    pub len: u32,
}

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
        // PANIC: constant ranges within the `HEADER_LEN` (12) bytes of `out`,
        // each as long as the bytes copied into it.
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(self.kind as u16).to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
    }

    /// Decodes and validates a header.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Self, WireError> {
        // PANIC: every field read here lies within the `HEADER_LEN` (12)
        // bytes of `bytes`.
        if le_u32(bytes, 0) != MAGIC {
            return Err(WireError::BadMagic);
        }
        if le_u16(bytes, 4) != VERSION {
            return Err(WireError::BadVersion);
        }
        let kind = Kind::from_u16(le_u16(bytes, 6))?;
        let len = le_u32(bytes, 8);
        if len as usize != kind.payload_len() {
            return Err(WireError::BadLength);
        }
        Ok(Header { kind, len })
    }
}

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

/// Payload of [`Kind::Hello`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hello {
    /// GID of the node's port.
    pub gid: [u8; 16],
    /// LID of the node's port (0 on RoCE).
    pub lid: u16,
    /// The id the node had before, to be given again as a new incarnation
    /// if no live node has it; 0 if the node does not know it (first join,
    /// or a reboot), and the manager then gives back the id last held by a
    /// node with this GID, if any. A Hello with the GID of a live member
    /// is refused with `Failure { errno: -EADDRINUSE }`.
    pub rejoin_id: u32,
}

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

/// A decoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// See [`Kind::Hello`].
    Hello(Hello),
    /// See [`Kind::Welcome`]: the node id assigned to the joining node.
    Welcome {
        /// Assigned node id (>= 1; 0 is the manager).
        node_id: u32,
        /// How many times this id has joined, this join included (>= 1).
        incarnation: u32,
    },
    /// See [`Kind::Prepare`].
    Prepare {
        /// Node the QP is to be created for.
        peer: u32,
        /// That node's incarnation.
        incarnation: u32,
    },
    /// See [`Kind::QpInfo`].
    QpInfo(Endpoint),
    /// See [`Kind::Connect`].
    Connect(Endpoint),
    /// See [`Kind::Connected`].
    Connected {
        /// Peer whose QP was connected.
        peer: u32,
        /// 0 on success, else a negative errno.
        status: i32,
    },
    /// See [`Kind::JoinDone`].
    JoinDone {
        /// Nodes in the cluster including the new one.
        total_nodes: u32,
        /// Membership epoch after this join.
        epoch: u32,
    },
    /// See [`Kind::Failure`].
    Failure {
        /// Negative errno describing the failure.
        errno: i32,
    },
    /// See [`Kind::Heartbeat`].
    Heartbeat {
        /// The sending node.
        node_id: u32,
        /// The newest membership epoch the node applied.
        epoch: u32,
    },
    /// See [`Kind::HeartbeatAck`].
    HeartbeatAck {
        /// The manager's current membership epoch.
        epoch: u32,
    },
    /// See [`Kind::Suspect`].
    Suspect {
        /// The peer whose connection failed.
        peer: u32,
        /// The incarnation of that peer the connection was to.
        incarnation: u32,
    },
    /// See [`Kind::Leave`].
    Leave {
        /// The leaving node.
        node_id: u32,
        /// Its incarnation.
        incarnation: u32,
    },
    /// See [`Kind::Resume`].
    Resume(Resume),
    /// See [`Kind::Resumed`].
    Resumed {
        /// The manager's membership epoch.
        epoch: u32,
    },
    /// See [`Kind::Challenge`].
    Challenge {
        /// The manager's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// See [`Kind::Auth`].
    Auth {
        /// The node's nonce.
        nonce: [u8; NONCE_LEN],
        /// `HMAC(K, NODE_LABEL | manager's nonce | node's nonce)`.
        proof: [u8; MAC_LEN],
    },
    /// See [`Kind::AuthOk`].
    AuthOk {
        /// `HMAC(K, MANAGER_LABEL | node's nonce | manager's nonce)`.
        proof: [u8; MAC_LEN],
    },
    /// See [`Kind::NodeDead`].
    NodeDead {
        /// The node declared dead.
        node: u32,
        /// Its incarnation.
        incarnation: u32,
        /// Membership epoch of this change.
        epoch: u32,
    },
    /// See [`Kind::Probe`].
    Probe {
        /// The suspected node.
        peer: u32,
        /// Its incarnation.
        incarnation: u32,
    },
    /// See [`Kind::ProbeReply`].
    ProbeReply {
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

impl Message {
    /// Kind of this message.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Hello(_) => Kind::Hello,
            Message::Welcome { .. } => Kind::Welcome,
            Message::Prepare { .. } => Kind::Prepare,
            Message::QpInfo(_) => Kind::QpInfo,
            Message::Connect(_) => Kind::Connect,
            Message::Connected { .. } => Kind::Connected,
            Message::JoinDone { .. } => Kind::JoinDone,
            Message::Failure { .. } => Kind::Failure,
            Message::Heartbeat { .. } => Kind::Heartbeat,
            Message::HeartbeatAck { .. } => Kind::HeartbeatAck,
            Message::Suspect { .. } => Kind::Suspect,
            Message::NodeDead { .. } => Kind::NodeDead,
            Message::Leave { .. } => Kind::Leave,
            Message::Resume(_) => Kind::Resume,
            Message::Resumed { .. } => Kind::Resumed,
            Message::Challenge { .. } => Kind::Challenge,
            Message::Auth { .. } => Kind::Auth,
            Message::AuthOk { .. } => Kind::AuthOk,
            Message::Probe { .. } => Kind::Probe,
            Message::ProbeReply { .. } => Kind::ProbeReply,
        }
    }

    /// Encodes the whole frame (header and payload) into `out`; returns its length.
    pub fn encode(&self, out: &mut [u8; MAX_FRAME_LEN]) -> usize {
        *out = [0; MAX_FRAME_LEN];
        let kind = self.kind();
        let mut header = [0u8; HEADER_LEN];
        Header::new(kind).encode(&mut header);
        // PANIC: `out` is `HEADER_LEN + MAX_PAYLOAD_LEN` bytes, so `p` is
        // `MAX_PAYLOAD_LEN` (48) bytes; every range below ends at 48 or
        // before and is as long as the bytes copied into it.
        out[..HEADER_LEN].copy_from_slice(&header);
        let p = &mut out[HEADER_LEN..];
        match *self {
            Message::Hello(h) => {
                p[0..16].copy_from_slice(&h.gid);
                p[16..18].copy_from_slice(&h.lid.to_le_bytes());
                p[20..24].copy_from_slice(&h.rejoin_id.to_le_bytes());
            }
            Message::Welcome {
                node_id: a,
                incarnation: b,
            }
            | Message::Prepare {
                peer: a,
                incarnation: b,
            }
            | Message::JoinDone {
                total_nodes: a,
                epoch: b,
            }
            | Message::Heartbeat {
                node_id: a,
                epoch: b,
            }
            | Message::Suspect {
                peer: a,
                incarnation: b,
            }
            | Message::Probe {
                peer: a,
                incarnation: b,
            }
            | Message::Leave {
                node_id: a,
                incarnation: b,
            } => {
                p[0..4].copy_from_slice(&a.to_le_bytes());
                p[4..8].copy_from_slice(&b.to_le_bytes());
            }
            Message::HeartbeatAck { epoch } | Message::Resumed { epoch } => {
                p[0..4].copy_from_slice(&epoch.to_le_bytes());
            }
            Message::Resume(r) => {
                p[0..4].copy_from_slice(&r.node_id.to_le_bytes());
                p[4..8].copy_from_slice(&r.incarnation.to_le_bytes());
                p[8..12].copy_from_slice(&r.epoch.to_le_bytes());
                p[12..28].copy_from_slice(&r.gid);
            }
            Message::NodeDead {
                node: a,
                incarnation: b,
                epoch: c,
            }
            | Message::ProbeReply {
                peer: a,
                incarnation: b,
                heard_ms_ago: c,
            } => {
                p[0..4].copy_from_slice(&a.to_le_bytes());
                p[4..8].copy_from_slice(&b.to_le_bytes());
                p[8..12].copy_from_slice(&c.to_le_bytes());
            }
            Message::Connected { peer, status } => {
                p[0..4].copy_from_slice(&peer.to_le_bytes());
                p[4..8].copy_from_slice(&status.to_le_bytes());
            }
            Message::Failure { errno } => {
                p[0..4].copy_from_slice(&errno.to_le_bytes());
            }
            Message::Challenge { nonce } => p[0..NONCE_LEN].copy_from_slice(&nonce),
            Message::Auth { nonce, proof } => {
                p[0..NONCE_LEN].copy_from_slice(&nonce);
                p[NONCE_LEN..NONCE_LEN + MAC_LEN].copy_from_slice(&proof);
            }
            Message::AuthOk { proof } => p[0..MAC_LEN].copy_from_slice(&proof),
            Message::QpInfo(e) | Message::Connect(e) => {
                p[0..4].copy_from_slice(&e.peer.to_le_bytes());
                p[4..8].copy_from_slice(&e.qpn.to_le_bytes());
                p[8..12].copy_from_slice(&e.psn.to_le_bytes());
                p[12..14].copy_from_slice(&e.lid.to_le_bytes());
                p[14..16].copy_from_slice(&e.mtu.to_le_bytes());
                p[16..32].copy_from_slice(&e.gid);
            }
        }
        // PANIC: `payload_len() <= MAX_PAYLOAD_LEN`, a small constant.
        HEADER_LEN + kind.payload_len()
    }

    /// Decodes the payload of a frame whose header was already decoded.
    pub fn decode(header: Header, payload: &[u8]) -> Result<Self, WireError> {
        if payload.len() < header.kind.payload_len() {
            return Err(WireError::Truncated);
        }
        let p = payload;
        // PANIC: `p` holds at least `kind.payload_len()` bytes (checked
        // above), and each kind reads only within that length: 8 of 8 for the one- and two-word kinds, 32 of
        // `ENDPOINT_LEN` (32) for endpoints, 12 of 12 for `NodeDead` and `ProbeReply`, 24 of
        // 24 for `Hello`, 28 of 28 for `Resume`, 16, 48 and 32 of as many
        // for `Challenge`, `Auth` and `AuthOk`.
        Ok(match header.kind {
            Kind::Hello => {
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&p[0..16]);
                Message::Hello(Hello {
                    gid,
                    lid: le_u16(p, 16),
                    rejoin_id: le_u32(p, 20),
                })
            }
            Kind::Welcome => Message::Welcome {
                node_id: le_u32(p, 0),
                incarnation: le_u32(p, 4),
            },
            Kind::Prepare => Message::Prepare {
                peer: le_u32(p, 0),
                incarnation: le_u32(p, 4),
            },
            Kind::JoinDone => Message::JoinDone {
                total_nodes: le_u32(p, 0),
                epoch: le_u32(p, 4),
            },
            Kind::Heartbeat => Message::Heartbeat {
                node_id: le_u32(p, 0),
                epoch: le_u32(p, 4),
            },
            Kind::HeartbeatAck => Message::HeartbeatAck {
                epoch: le_u32(p, 0),
            },
            Kind::Suspect => Message::Suspect {
                peer: le_u32(p, 0),
                incarnation: le_u32(p, 4),
            },
            Kind::Probe => Message::Probe {
                peer: le_u32(p, 0),
                incarnation: le_u32(p, 4),
            },
            Kind::ProbeReply => Message::ProbeReply {
                peer: le_u32(p, 0),
                incarnation: le_u32(p, 4),
                heard_ms_ago: le_u32(p, 8),
            },
            Kind::Resume => {
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&p[12..28]);
                Message::Resume(Resume {
                    node_id: le_u32(p, 0),
                    incarnation: le_u32(p, 4),
                    epoch: le_u32(p, 8),
                    gid,
                })
            }
            Kind::Resumed => Message::Resumed {
                epoch: le_u32(p, 0),
            },
            Kind::Leave => Message::Leave {
                node_id: le_u32(p, 0),
                incarnation: le_u32(p, 4),
            },
            Kind::NodeDead => Message::NodeDead {
                node: le_u32(p, 0),
                incarnation: le_u32(p, 4),
                epoch: le_u32(p, 8),
            },
            Kind::Connected => Message::Connected {
                peer: le_u32(p, 0),
                status: le_u32(p, 4) as i32,
            },
            Kind::Failure => Message::Failure {
                errno: le_u32(p, 0) as i32,
            },
            Kind::Challenge => {
                let mut nonce = [0u8; NONCE_LEN];
                nonce.copy_from_slice(&p[0..NONCE_LEN]);
                Message::Challenge { nonce }
            }
            Kind::Auth => {
                let mut nonce = [0u8; NONCE_LEN];
                nonce.copy_from_slice(&p[0..NONCE_LEN]);
                let mut proof = [0u8; MAC_LEN];
                proof.copy_from_slice(&p[NONCE_LEN..NONCE_LEN + MAC_LEN]);
                Message::Auth { nonce, proof }
            }
            Kind::AuthOk => {
                let mut proof = [0u8; MAC_LEN];
                proof.copy_from_slice(&p[0..MAC_LEN]);
                Message::AuthOk { proof }
            }
            Kind::QpInfo | Kind::Connect => {
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&p[16..32]);
                let e = Endpoint {
                    peer: le_u32(p, 0),
                    qpn: le_u32(p, 4),
                    psn: le_u32(p, 8),
                    lid: le_u16(p, 12),
                    mtu: le_u16(p, 14),
                    gid,
                };
                if header.kind == Kind::QpInfo {
                    Message::QpInfo(e)
                } else {
                    Message::Connect(e)
                }
            }
        })
    }
}

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

/// Compares two byte strings in time independent of where they differ.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

fn le_u16(bytes: &[u8], at: usize) -> u16 {
    // PANIC: callers pass constant offsets with `at + 2 <= bytes.len()`.
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    // PANIC: callers pass constant offsets with `at + 4 <= bytes.len()`.
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}
