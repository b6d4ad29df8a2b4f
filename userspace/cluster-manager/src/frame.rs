//! Reading and writing whole [`cm_wire`](crate::cm_wire) frames on a byte
//! stream, and [`Channel`], the authenticated connection between the
//! manager and a node that every frame after the authentication goes
//! through.
//!
//! A channel starts with the mutual authentication by the cluster's secret
//! (frames without tags: `Challenge`, `Auth`, then `AuthOk` or the
//! `Failure` that refuses the node). From then on every frame is followed
//! by its tag, computed with the connection's session key over the
//! direction, the frame's sequence number in that direction (from 0 for
//! the first frame after `AuthOk`) and the frame's bytes; a frame whose tag
//! is wrong fails with [`ProtocolError::BadTag`], and the connection must
//! then be dropped, since its sequence numbers no longer line up.

use std::fmt;
use std::io::{self, Read, Write};

use crate::auth::{random_nonce, ClusterSecret, SessionKey};
use crate::cm_wire::{
    self, same_bytes, FrameError, Header, Kind, Message, WireError, HEADER_LEN, MANAGER_LABEL,
    MANAGER_TO_NODE, MAX_FRAME_LEN, NODE_LABEL, NODE_TO_MANAGER, TAG_LEN,
};

/// Why an exchange with a node failed.
#[derive(Debug)]
pub enum ProtocolError {
    /// The stream failed or timed out.
    Io(io::Error),
    /// The node closed the connection between frames.
    Closed,
    /// The node sent a frame that does not decode.
    Wire(WireError),
    /// The node sent a valid frame of the wrong kind.
    Unexpected {
        /// Kind the protocol called for.
        expected: Kind,
        /// Kind that arrived.
        received: Kind,
    },
    /// The node answered with a `Failure` frame.
    Refused {
        /// Negative errno the node reported.
        errno: i32,
    },
    /// The node answered about a different peer than the one asked about.
    WrongPeer {
        /// Peer the request named.
        expected: u32,
        /// Peer the answer named.
        received: u32,
    },
    /// The node could not connect its queue pair to `peer`.
    ConnectFailed {
        /// Peer whose queue pair failed to connect.
        peer: u32,
        /// Negative errno the node reported.
        status: i32,
    },
    /// The node sent `Leave`, so the manager waits for no answer from it.
    Leaving,
    /// A frame's tag is wrong: the frame was forged, altered, replayed or
    /// reordered.
    BadTag,
    /// The other side's proof of the cluster secret is wrong.
    WrongProof,
}

impl ProtocolError {
    /// Whether the node simply took too long to answer.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ProtocolError::Io(e)
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }

    /// Negative errno to report to a node whose request failed for this reason.
    pub fn errno(&self) -> i32 {
        match self {
            _ if self.is_timeout() => -libc::ETIMEDOUT,
            ProtocolError::Refused { errno } if *errno < 0 => *errno,
            ProtocolError::ConnectFailed { status, .. } if *status < 0 => *status,
            ProtocolError::WrongProof => -libc::EKEYREJECTED,
            _ => -libc::EPROTO,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // A read timeout surfaces as EAGAIN, whose text would mislead.
            _ if self.is_timeout() => write!(f, "timed out"),
            ProtocolError::Io(e) => write!(f, "I/O error: {e}"),
            ProtocolError::Closed => write!(f, "connection closed"),
            ProtocolError::Wire(e) => write!(f, "malformed frame: {e:?}"),
            ProtocolError::Unexpected { expected, received } => {
                write!(f, "expected {expected:?}, received {received:?}")
            }
            ProtocolError::Refused { errno } => write!(f, "node reported failure {errno}"),
            ProtocolError::WrongPeer { expected, received } => {
                write!(f, "answer names node {received} instead of node {expected}")
            }
            ProtocolError::ConnectFailed { peer, status } => {
                write!(f, "connecting to node {peer} failed with {status}")
            }
            ProtocolError::Leaving => write!(f, "node is leaving the cluster"),
            ProtocolError::BadTag => write!(
                f,
                "a frame failed its integrity check (forged, altered, replayed or reordered)"
            ),
            ProtocolError::WrongProof => write!(f, "wrong proof of the cluster secret"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<io::Error> for ProtocolError {
    fn from(e: io::Error) -> Self {
        ProtocolError::Io(e)
    }
}

impl From<WireError> for ProtocolError {
    fn from(e: WireError) -> Self {
        ProtocolError::Wire(e)
    }
}

/// Reads one frame into `frame`; returns its validated header and length.
/// The end of the stream before a frame is [`ProtocolError::Closed`].
fn read_frame(
    stream: &mut impl Read,
    frame: &mut [u8; MAX_FRAME_LEN],
) -> Result<(Header, usize), ProtocolError> {
    let mut first = true;
    let recv_exact = |buffer: &mut [u8]| {
        let read = stream.read_exact(buffer).map_err(|e| {
            if first && e.kind() == io::ErrorKind::UnexpectedEof {
                ProtocolError::Closed
            } else {
                ProtocolError::Io(e)
            }
        });
        first = false;
        read
    };
    cm_wire::read_frame(recv_exact, frame).map_err(|e| match e {
        FrameError::Wire(e) => e.into(),
        FrameError::Stream(e) => e,
    })
}

/// Reads and validates one frame that carries no tag (those of the
/// authentication).
pub fn read_message(stream: &mut impl Read) -> Result<Message, ProtocolError> {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let (header, len) = read_frame(stream, &mut frame)?;
    Ok(Message::decode(header, &frame[HEADER_LEN..len])?)
}

/// Writes one frame without a tag (those of the authentication) in a
/// single write, so it leaves in one segment.
pub fn write_message(stream: &mut impl Write, message: &Message) -> io::Result<()> {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = message.encode(&mut frame);
    stream.write_all(&frame[..len])?;
    stream.flush()
}

/// Which end of a connection a side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The cluster manager.
    Manager,
    /// A node.
    Node,
}

impl Role {
    /// Direction byte of the frames this side sends.
    fn sends(self) -> u8 {
        match self {
            Role::Manager => MANAGER_TO_NODE,
            Role::Node => NODE_TO_MANAGER,
        }
    }

    /// Direction byte of the frames this side receives.
    fn receives(self) -> u8 {
        match self {
            Role::Manager => NODE_TO_MANAGER,
            Role::Node => MANAGER_TO_NODE,
        }
    }
}

/// Tags the frames one side sends on an authenticated connection.
///
/// Frames must reach the stream in the order they were sealed: whoever
/// shares one between threads writes under the same lock it seals under.
pub struct Outbound {
    key: SessionKey,
    direction: u8,
    /// Sequence number of the next frame.
    sequence: u64,
}

impl Outbound {
    /// The bytes of `message` followed by its tag, as the next frame sent.
    pub fn seal(&mut self, message: &Message) -> Vec<u8> {
        let mut frame = [0u8; MAX_FRAME_LEN];
        let len = message.encode(&mut frame);
        let tag = self.key.tag(self.direction, self.sequence, &frame[..len]);
        // 2^64 frames are never sent on one connection.
        self.sequence = self.sequence.wrapping_add(1);
        let mut sealed = Vec::with_capacity(len + TAG_LEN);
        sealed.extend_from_slice(&frame[..len]);
        sealed.extend_from_slice(&tag);
        sealed
    }

    /// Writes `message` and its tag in a single write, so they leave in one
    /// segment.
    pub fn write(&mut self, stream: &mut impl Write, message: &Message) -> io::Result<()> {
        stream.write_all(&self.seal(message))?;
        stream.flush()
    }
}

/// Checks the tags of the frames one side receives on an authenticated
/// connection.
pub struct Inbound {
    key: SessionKey,
    direction: u8,
    /// Sequence number of the next frame.
    sequence: u64,
}

impl Inbound {
    /// Reads one frame and its tag; fails with [`ProtocolError::BadTag`] if
    /// the tag is not that of this frame as the next one in sequence.
    pub fn read(&mut self, stream: &mut impl Read) -> Result<Message, ProtocolError> {
        let mut frame = [0u8; MAX_FRAME_LEN];
        let (header, len) = read_frame(stream, &mut frame)?;
        let mut tag = [0u8; TAG_LEN];
        stream.read_exact(&mut tag)?;
        let expected = self.key.tag(self.direction, self.sequence, &frame[..len]);
        if !same_bytes(&tag, &expected) {
            return Err(ProtocolError::BadTag);
        }
        self.sequence = self.sequence.wrapping_add(1);
        Ok(Message::decode(header, &frame[HEADER_LEN..len])?)
    }
}

/// An authenticated connection between the manager and a node, from either
/// end: frames sent are tagged, frames received must carry valid tags.
pub struct Channel<S> {
    stream: S,
    role: Role,
    outbound: Outbound,
    inbound: Inbound,
}

impl<S: Read + Write> Channel<S> {
    /// Authenticates the node at the other end of `stream`, as the manager:
    /// sends a `Challenge`, checks the node's `Auth` and answers `AuthOk`.
    /// A node whose proof is wrong is sent `Failure { errno: -EKEYREJECTED }`
    /// (without a tag: it could not check one) and the error is
    /// [`ProtocolError::WrongProof`]; the caller then drops the connection.
    pub fn accept(mut stream: S, secret: &ClusterSecret) -> Result<Self, ProtocolError> {
        let manager_nonce = random_nonce()?;
        write_message(
            &mut stream,
            &Message::Challenge {
                nonce: manager_nonce,
            },
        )?;
        let (node_nonce, proof) = match read_message(&mut stream)? {
            Message::Auth { nonce, proof } => (nonce, proof),
            other => {
                return Err(ProtocolError::Unexpected {
                    expected: Kind::Auth,
                    received: other.kind(),
                })
            }
        };
        if !same_bytes(&proof, &secret.mac(NODE_LABEL, &manager_nonce, &node_nonce)) {
            // The node is about to be dropped: a failure to tell it changes
            // nothing.
            let _ = write_message(
                &mut stream,
                &Message::Failure {
                    errno: -libc::EKEYREJECTED,
                },
            );
            return Err(ProtocolError::WrongProof);
        }
        let proof = secret.mac(MANAGER_LABEL, &node_nonce, &manager_nonce);
        write_message(&mut stream, &Message::AuthOk { proof })?;
        let key = secret.session_key(&manager_nonce, &node_nonce);
        Ok(Self::authenticated(stream, Role::Manager, key))
    }

    /// Authenticates with the manager at the other end of `stream`, as a
    /// node: answers its `Challenge` and checks its `AuthOk`. A manager that
    /// refused this node's proof gives [`ProtocolError::Refused`] with
    /// `-EKEYREJECTED`; one whose own proof is wrong (it does not hold the
    /// secret) gives [`ProtocolError::WrongProof`].
    pub fn connect(mut stream: S, secret: &ClusterSecret) -> Result<Self, ProtocolError> {
        let manager_nonce = match read_message(&mut stream)? {
            Message::Challenge { nonce } => nonce,
            Message::Failure { errno } => return Err(ProtocolError::Refused { errno }),
            other => {
                return Err(ProtocolError::Unexpected {
                    expected: Kind::Challenge,
                    received: other.kind(),
                })
            }
        };
        let node_nonce = random_nonce()?;
        let proof = secret.mac(NODE_LABEL, &manager_nonce, &node_nonce);
        write_message(
            &mut stream,
            &Message::Auth {
                nonce: node_nonce,
                proof,
            },
        )?;
        match read_message(&mut stream)? {
            Message::AuthOk { proof }
                if same_bytes(
                    &proof,
                    &secret.mac(MANAGER_LABEL, &node_nonce, &manager_nonce),
                ) => {}
            Message::AuthOk { .. } => return Err(ProtocolError::WrongProof),
            Message::Failure { errno } => return Err(ProtocolError::Refused { errno }),
            other => {
                return Err(ProtocolError::Unexpected {
                    expected: Kind::AuthOk,
                    received: other.kind(),
                })
            }
        }
        let key = secret.session_key(&manager_nonce, &node_nonce);
        Ok(Self::authenticated(stream, Role::Node, key))
    }

    /// The channel of `role` once the authentication gave `key`.
    fn authenticated(stream: S, role: Role, key: SessionKey) -> Self {
        Channel {
            stream,
            role,
            outbound: Outbound {
                key: key.clone(),
                direction: role.sends(),
                sequence: 0,
            },
            inbound: Inbound {
                key,
                direction: role.receives(),
                sequence: 0,
            },
        }
    }

    /// Sends one frame with its tag.
    pub fn send(&mut self, message: &Message) -> io::Result<()> {
        self.outbound.write(&mut self.stream, message)
    }

    /// Receives one frame and checks its tag.
    pub fn receive(&mut self) -> Result<Message, ProtocolError> {
        self.inbound.read(&mut self.stream)
    }

    /// The next frame sent, tagged, without sending it (to send it
    /// altered, or twice).
    pub fn seal(&mut self, message: &Message) -> Vec<u8> {
        self.outbound.seal(message)
    }
}

impl<S> Channel<S> {
    /// Which end of the connection this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The underlying stream.
    pub fn stream(&self) -> &S {
        &self.stream
    }

    /// The underlying stream, for bytes outside the protocol.
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The stream and the tagging state of each direction, for a reader
    /// and writers that run on their own.
    pub fn into_parts(self) -> (S, Outbound, Inbound) {
        (self.stream, self.outbound, self.inbound)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;
    use std::thread;

    use super::*;
    use crate::cm_wire::{Endpoint, Hello, Resume};

    fn round_trip(message: Message) -> Message {
        let mut bytes = Vec::new();
        write_message(&mut bytes, &message).expect("write to a Vec");
        assert_eq!(bytes.len(), HEADER_LEN + message.kind().payload_len());
        let mut reader = bytes.as_slice();
        let decoded = read_message(&mut reader).expect("decode what was encoded");
        assert!(reader.is_empty(), "frame not fully consumed");
        decoded
    }

    #[test]
    fn frames_survive_a_stream_round_trip() {
        let endpoint = Endpoint {
            peer: 3,
            qpn: 0x11,
            psn: 0x22,
            lid: 0,
            mtu: 1024,
            gid: [7; 16],
        };
        for message in [
            Message::Hello(Hello {
                gid: [1; 16],
                lid: 9,
                rejoin_id: 4,
            }),
            Message::QpInfo(endpoint),
            Message::Connect(endpoint),
            Message::Failure { errno: -28 },
            Message::NodeDead {
                node: 2,
                incarnation: 3,
                epoch: 9,
            },
            Message::Leave {
                node_id: 2,
                incarnation: 3,
            },
            Message::Resume(Resume {
                node_id: 2,
                incarnation: 3,
                epoch: 9,
                gid: [5; 16],
            }),
            Message::Resumed { epoch: 9 },
        ] {
            assert_eq!(round_trip(message), message);
        }
    }

    #[test]
    fn end_of_stream_before_a_frame_is_closed() {
        let mut empty: &[u8] = &[];
        assert!(matches!(
            read_message(&mut empty),
            Err(ProtocolError::Closed)
        ));
    }

    #[test]
    fn truncated_payload_is_an_io_error() {
        let mut bytes = Vec::new();
        write_message(
            &mut bytes,
            &Message::Prepare {
                peer: 2,
                incarnation: 1,
            },
        )
        .expect("write to a Vec");
        bytes.truncate(bytes.len() - 1);
        let mut reader = bytes.as_slice();
        assert!(matches!(
            read_message(&mut reader),
            Err(ProtocolError::Io(_))
        ));
    }

    #[test]
    fn bad_header_is_rejected_before_reading_a_payload() {
        let mut bytes = Vec::new();
        write_message(
            &mut bytes,
            &Message::Prepare {
                peer: 2,
                incarnation: 1,
            },
        )
        .expect("write to a Vec");
        bytes[0] ^= 0xff;
        let mut reader = bytes.as_slice();
        assert!(matches!(
            read_message(&mut reader),
            Err(ProtocolError::Wire(WireError::BadMagic))
        ));
    }

    #[test]
    fn errno_for_failures() {
        let timeout = ProtocolError::Io(io::Error::from(io::ErrorKind::WouldBlock));
        assert_eq!(timeout.errno(), -libc::ETIMEDOUT);
        assert_eq!(timeout.to_string(), "timed out");
        assert_eq!(ProtocolError::Closed.errno(), -libc::EPROTO);
        assert_eq!(ProtocolError::Refused { errno: -5 }.errno(), -5);
        assert_eq!(ProtocolError::Refused { errno: 5 }.errno(), -libc::EPROTO);
        assert_eq!(
            ProtocolError::ConnectFailed {
                peer: 1,
                status: -110
            }
            .errno(),
            -110
        );
        assert_eq!(ProtocolError::WrongProof.errno(), -libc::EKEYREJECTED);
        assert_eq!(ProtocolError::BadTag.errno(), -libc::EPROTO);
    }

    fn secret(text: &str) -> ClusterSecret {
        ClusterSecret::new(text.as_bytes().to_vec()).expect("valid secret")
    }

    type Authenticated = Result<Channel<UnixStream>, ProtocolError>;

    /// Runs the authentication between a manager holding `manager_secret`
    /// and a node holding `node_secret`; what each end got.
    fn authenticate(manager_secret: &str, node_secret: &str) -> (Authenticated, Authenticated) {
        let (manager_end, node_end) = UnixStream::pair().expect("socket pair");
        let manager_secret = secret(manager_secret);
        let manager = thread::spawn(move || Channel::accept(manager_end, &manager_secret));
        let node = Channel::connect(node_end, &secret(node_secret));
        (manager.join().expect("manager thread"), node)
    }

    /// Both ends of an authenticated connection.
    fn channels() -> (Channel<UnixStream>, Channel<UnixStream>) {
        match authenticate("secret", "secret") {
            (Ok(manager), Ok(node)) => (manager, node),
            (manager, node) => panic!(
                "authentication failed: manager {:?}, node {:?}",
                manager.err(),
                node.err()
            ),
        }
    }

    #[test]
    fn authenticated_ends_exchange_tagged_frames_both_ways() {
        let (mut manager, mut node) = channels();
        assert_eq!((manager.role(), node.role()), (Role::Manager, Role::Node));
        for epoch in 1..=3 {
            let heartbeat = Message::Heartbeat { node_id: 1, epoch };
            node.send(&heartbeat).expect("node sends");
            assert_eq!(manager.receive().expect("manager receives"), heartbeat);
            let ack = Message::HeartbeatAck { epoch };
            manager.send(&ack).expect("manager sends");
            assert_eq!(node.receive().expect("node receives"), ack);
        }
        // Every frame carries a tag.
        let sealed = node.seal(&Message::Leave {
            node_id: 1,
            incarnation: 1,
        });
        assert_eq!(sealed.len(), HEADER_LEN + 8 + TAG_LEN);
    }

    #[test]
    fn a_node_with_another_secret_is_refused_with_ekeyrejected() {
        let (manager, node) = authenticate("secret", "another secret");
        assert!(matches!(manager, Err(ProtocolError::WrongProof)));
        match node {
            Err(e @ ProtocolError::Refused { .. }) => {
                assert_eq!(e.errno(), -libc::EKEYREJECTED);
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn a_node_refuses_a_manager_whose_proof_is_wrong() {
        let (mut fake_manager, node_end) = UnixStream::pair().expect("socket pair");
        let fake = thread::spawn(move || {
            write_message(&mut fake_manager, &Message::Challenge { nonce: [9; 16] })
                .expect("send Challenge");
            let auth = read_message(&mut fake_manager).expect("read Auth");
            assert_eq!(auth.kind(), Kind::Auth);
            // Without the secret, the best it can do is guess.
            write_message(&mut fake_manager, &Message::AuthOk { proof: [7; 32] })
                .expect("send AuthOk");
        });
        let node = Channel::connect(node_end, &secret("secret"));
        fake.join().expect("fake manager");
        match node {
            Err(e @ ProtocolError::WrongProof) => assert_eq!(e.errno(), -libc::EKEYREJECTED),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn a_node_insists_on_a_challenge() {
        let (mut fake_manager, node_end) = UnixStream::pair().expect("socket pair");
        write_message(
            &mut fake_manager,
            &Message::Welcome {
                node_id: 1,
                incarnation: 1,
            },
        )
        .expect("send Welcome");
        assert!(matches!(
            Channel::connect(node_end, &secret("secret")),
            Err(ProtocolError::Unexpected {
                expected: Kind::Challenge,
                received: Kind::Welcome
            })
        ));
    }

    #[test]
    fn altered_replayed_reordered_reflected_or_foreign_frames_fail_their_tag() {
        let (manager, node) = channels();
        let (_, mut manager_out, mut manager_in) = manager.into_parts();
        let (_, mut node_out, _) = node.into_parts();
        let first = node_out.seal(&Message::Heartbeat {
            node_id: 2,
            epoch: 5,
        });
        let second = node_out.seal(&Message::Suspect {
            peer: 3,
            incarnation: 1,
        });

        // Every single changed bit is caught, by the header check or the tag.
        for at in 0..first.len() {
            for bit in 0..8 {
                let mut altered = first.clone();
                altered[at] ^= 1 << bit;
                let read = manager_in.read(&mut altered.as_slice());
                assert!(
                    matches!(read, Err(ProtocolError::BadTag | ProtocolError::Wire(_))),
                    "byte {at} bit {bit}: {read:?}"
                );
            }
        }
        // Out of order.
        assert!(matches!(
            manager_in.read(&mut second.as_slice()),
            Err(ProtocolError::BadTag)
        ));
        // In order; failures did not move the sequence on.
        assert!(manager_in.read(&mut first.as_slice()).is_ok());
        // Replayed.
        assert!(matches!(
            manager_in.read(&mut first.as_slice()),
            Err(ProtocolError::BadTag)
        ));
        // The manager's own frame sent back to it, with the next sequence
        // number of the node's direction.
        manager_out.seal(&Message::HeartbeatAck { epoch: 5 });
        let reflected = manager_out.seal(&Message::Suspect {
            peer: 3,
            incarnation: 1,
        });
        assert!(matches!(
            manager_in.read(&mut reflected.as_slice()),
            Err(ProtocolError::BadTag)
        ));
        // A frame of another connection, with the same secret.
        let (_, other_node) = channels();
        let (_, mut other_out, _) = other_node.into_parts();
        other_out.seal(&Message::Heartbeat {
            node_id: 2,
            epoch: 5,
        });
        let foreign = other_out.seal(&Message::Suspect {
            peer: 3,
            incarnation: 1,
        });
        assert!(matches!(
            manager_in.read(&mut foreign.as_slice()),
            Err(ProtocolError::BadTag)
        ));
        assert!(manager_in.read(&mut second.as_slice()).is_ok());
    }

    #[test]
    fn a_frame_without_its_tag_is_cut_short() {
        let (mut manager, mut node) = channels();
        write_message(
            node.stream_mut(),
            &Message::Heartbeat {
                node_id: 1,
                epoch: 1,
            },
        )
        .expect("send an untagged frame");
        drop(node);
        assert!(matches!(manager.receive(), Err(ProtocolError::Io(_))));
    }
}
