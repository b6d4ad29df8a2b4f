// SPDX-License-Identifier: GPL-2.0

//! The authenticated connection to the cluster manager.
//!
//! The node and the manager prove to each other that they hold the
//! cluster's secret, then tag every frame with a session key and a sequence
//! number per direction (see [`cm_wire`](crate::internal::cm_wire)): a
//! stranger cannot join, a node cannot be made to follow a manager that
//! does not hold the secret, and nobody without it can forge, alter,
//! replay or reorder frames. The secret is the cluster's, not the node's:
//! a member could act as the manager towards other members.

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

use crate::errno;
use crate::internal::cm_wire::{
    auth_mac, frame_tag, read_frame, same_bytes, FrameError, Header, Message, HEADER_LEN, MAC_LEN,
    MANAGER_LABEL, MANAGER_TO_NODE, MAX_FRAME_LEN, NODE_LABEL, NODE_TO_MANAGER, NONCE_LEN,
    SESSION_LABEL, TAG_LEN,
};
use crate::sys::{
    secret::{hmac_sha256, random_bytes, wipe, Secret},
    tcp::TcpStream,
};

/// A connection to the manager after mutual authentication.
///
/// Sends must be serialised by the caller (the membership's link mutex, or
/// a single thread before the link exists), and so must receives (the one
/// thread that reads the connection at a time): each direction's sequence
/// numbers follow the order of the frames on the stream.
pub(crate) struct ManagerChannel {
    stream: TcpStream,
    session: [u8; MAC_LEN],
    sent: AtomicU64,
    received: AtomicU64,
}

impl ManagerChannel {
    /// Connects to the manager at `addr:port` and runs the authentication
    /// with `secret`.
    ///
    /// # Errors
    ///
    /// `EKEYREJECTED` if the manager refuses this node's proof or gives a
    /// wrong proof of its own, `EPROTO` if it breaks the protocol, or the
    /// connection's errors.
    pub(crate) fn open(addr: [u8; 4], port: u16, timeout_ms: u32, secret: &Secret) -> Result<Self> {
        let stream = TcpStream::connect(addr, port, timeout_ms)?;
        let manager_nonce = match receive_plain(&stream)? {
            Message::Challenge { nonce } => nonce,
            // Nothing untagged is believed but a refusal of this node's
            // proof: anyone could have sent it.
            _ => return Err(errno::EPROTO()),
        };
        let node_nonce: [u8; NONCE_LEN] = random_bytes();
        let keyed = |input: &[u8]| secret.hmac(input);
        let proof = auth_mac(keyed, NODE_LABEL, &manager_nonce, &node_nonce)?;
        send_plain(
            &stream,
            &Message::Auth {
                nonce: node_nonce,
                proof,
            },
        )?;
        let expected = auth_mac(keyed, MANAGER_LABEL, &node_nonce, &manager_nonce)?;
        match receive_plain(&stream)? {
            Message::AuthOk { proof } if same_bytes(&proof, &expected) => {}
            Message::AuthOk { .. } => {
                pr_warn!("the cluster manager does not hold the cluster's secret\n");
                return Err(errno::EKEYREJECTED());
            }
            Message::Failure { errno } if errno == errno::EKEYREJECTED().to_errno() => {
                return Err(errno::EKEYREJECTED());
            }
            _ => return Err(errno::EPROTO()),
        }
        let session = auth_mac(keyed, SESSION_LABEL, &manager_nonce, &node_nonce)?;
        Ok(ManagerChannel {
            stream,
            session,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        })
    }

    /// Sends `message` with its tag. Callers serialise sends (see the type).
    pub(crate) fn send(&self, message: &Message) -> Result {
        let mut frame = [0u8; MAX_FRAME_LEN + TAG_LEN];
        let mut body = [0u8; MAX_FRAME_LEN];
        let len = message.encode(&mut body);
        // Counted once sent: a frame that could not be tagged leaves the
        // sequence as it was.
        let sequence = self.sent.load(Ordering::Relaxed);
        // PANIC: `encode` returns the length of the frame it wrote, at most
        // `MAX_FRAME_LEN`, so every range lies within `frame`.
        let tag = self.tag(NODE_TO_MANAGER, sequence, &body[..len])?;
        frame[..len].copy_from_slice(&body[..len]);
        frame[len..len + TAG_LEN].copy_from_slice(&tag);
        self.stream.send_all(&frame[..len + TAG_LEN])?;
        self.sent.store(sequence.wrapping_add(1), Ordering::Relaxed);
        Ok(())
    }

    /// Receives one frame and checks its tag. Callers serialise receives.
    ///
    /// # Errors
    ///
    /// `EPROTO` for a frame that does not decode or whose tag is wrong (the
    /// caller then drops the connection), or the connection's errors.
    pub(crate) fn receive(&self) -> Result<Message> {
        let mut frame = [0u8; MAX_FRAME_LEN];
        let (header, len) = receive_frame(&self.stream, &mut frame)?;
        let mut tag = [0u8; TAG_LEN];
        self.stream.recv_exact(&mut tag)?;
        let sequence = self.received.fetch_add(1, Ordering::Relaxed);
        // PANIC: `receive_frame` returns the length it filled in `frame`.
        let expected = self.tag(MANAGER_TO_NODE, sequence, &frame[..len])?;
        if !same_bytes(&tag, &expected) {
            pr_warn!("a frame from the cluster manager failed its integrity check\n");
            return Err(errno::EPROTO());
        }
        // PANIC: as above; the payload follows the header.
        Message::decode(header, &frame[HEADER_LEN..len]).map_err(|_| errno::EPROTO())
    }

    /// Ends the connection; a thread blocked on it returns.
    pub(crate) fn shutdown(&self) {
        self.stream.shutdown();
    }

    fn tag(&self, direction: u8, sequence: u64, frame: &[u8]) -> Result<[u8; TAG_LEN]> {
        let keyed = |input: &[u8]| hmac_sha256(&self.session, input);
        frame_tag(keyed, direction, sequence, frame)
    }
}

impl Drop for ManagerChannel {
    fn drop(&mut self) {
        wipe(&mut self.session);
    }
}

/// Reads one frame into `frame`; returns its header and length.
fn receive_frame(stream: &TcpStream, frame: &mut [u8; MAX_FRAME_LEN]) -> Result<(Header, usize)> {
    read_frame(|buffer| stream.recv_exact(buffer), frame).map_err(|e| match e {
        FrameError::Wire(e) => {
            pr_warn!(
                "a frame from the cluster manager does not decode: {:?}\n",
                e
            );
            errno::EPROTO()
        }
        FrameError::Stream(e) => e,
    })
}

/// Reads one frame of the authentication, which carries no tag.
fn receive_plain(stream: &TcpStream) -> Result<Message> {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let (header, len) = receive_frame(stream, &mut frame)?;
    // PANIC: `receive_frame` returns the length it filled in `frame`.
    Message::decode(header, &frame[HEADER_LEN..len]).map_err(|_| errno::EPROTO())
}

/// Sends one frame of the authentication, which carries no tag.
fn send_plain(stream: &TcpStream, message: &Message) -> Result {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = message.encode(&mut frame);
    // PANIC: `encode` returns the length of the frame it wrote.
    stream.send_all(&frame[..len])
}
