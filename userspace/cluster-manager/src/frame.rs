//! Reading and writing whole [`cm_wire`](crate::cm_wire) frames on a byte stream.

use std::fmt;
use std::io::{self, Read, Write};

use crate::cm_wire::{
    Header, Kind, Message, WireError, HEADER_LEN, MAX_FRAME_LEN, MAX_PAYLOAD_LEN,
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

/// Reads and validates one frame.
pub fn read_message(stream: &mut impl Read) -> Result<Message, ProtocolError> {
    let mut header_bytes = [0u8; HEADER_LEN];
    stream.read_exact(&mut header_bytes).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ProtocolError::Closed
        } else {
            ProtocolError::Io(e)
        }
    })?;
    let header = Header::decode(&header_bytes)?;
    // Header::decode only accepts the exact payload length of the kind, so
    // this cannot exceed the buffer; checked anyway to never trust a length.
    let len = usize::try_from(header.len).map_err(|_| WireError::BadLength)?;
    if len > MAX_PAYLOAD_LEN {
        return Err(WireError::BadLength.into());
    }
    let mut payload = [0u8; MAX_PAYLOAD_LEN];
    stream.read_exact(&mut payload[..len])?;
    Ok(Message::decode(header, &payload[..len])?)
}

/// Writes one frame in a single write, so it leaves in one segment.
pub fn write_message(stream: &mut impl Write, message: &Message) -> io::Result<()> {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = message.encode(&mut frame);
    stream.write_all(&frame[..len])?;
    stream.flush()
}

#[cfg(test)]
mod tests {
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
    }
}
