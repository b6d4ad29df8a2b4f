// SPDX-License-Identifier: GPL-2.0

//! Wire formats: control messages between nodes, and the cluster
//! manager's protocol and its authentication.

use super::Check;
use crate::errno;
use crate::internal::atomics::wire::AtomicMessage;
use crate::internal::barrier::wire::BarrierMessage;
use crate::internal::cm_wire::{
    self, Endpoint, Header, Hello, Kind, Message, Resume, WireError, HEADER_LEN, MAX_FRAME_LEN,
};
use crate::internal::core::wire::{Frame, Status, MESSAGE_LEN};
use crate::internal::kernel_messages::pieces;
use crate::internal::locks::wire::LockMessage;
use crate::internal::memory::chunk::{CHUNK_SIZE, MAX_LMR_SIZE};
use crate::internal::memory::ops_wire::MemoryOpMessage;
use crate::internal::memory::wire::MemoryMessage;
use crate::internal::node_id::NodeId;
use crate::internal::rpc::wire::RpcMessage;
use crate::internal::sharing::wire::SharingMessage;
use crate::sys::secret::hmac_sha256;
use kernel::bindings;
use kernel::error::code::{EINVAL, ENOENT, ENOMEM};

kunit_case!(lite_test_control_wire_round_trip, |c| {
    macro_rules! round_trip {
        ($message:expr, $family:ident) => {{
            let message = $message;
            let bytes = message.to_frame().encode();
            check!(c, bytes.len() == MESSAGE_LEN);
            let frame = Frame::decode(&bytes);
            check!(c, frame.kind().family() == Some($family::FAMILY));
            check!(c, $family::from_frame(&frame) == Some(message));
        }};
    }
    round_trip!(
        MemoryMessage::AllocRequest {
            request_id: 7,
            size: CHUNK_SIZE,
        },
        MemoryMessage
    );
    round_trip!(
        MemoryMessage::AllocReply {
            request_id: u64::MAX,
            status: ENOMEM.into(),
            chunk_id: 0x1234_0000_0001,
            addr: 0xffff_8880_0000_0000,
            rkey: 0xdead_beef,
        },
        MemoryMessage
    );
    round_trip!(
        MemoryMessage::FreeRequest {
            request_id: 0,
            chunk_id: 3,
        },
        MemoryMessage
    );
    round_trip!(
        BarrierMessage::Entered {
            round: 100,
            reply_wanted: true,
        },
        BarrierMessage
    );
    round_trip!(
        MemoryOpMessage::MemsetRequest {
            request_id: 11,
            chunk_id: 0x7fff_ffff_ffff_ffff,
            offset: CHUNK_SIZE - 1,
            len: 1,
            byte: 0xff,
        },
        MemoryOpMessage
    );
    round_trip!(
        MemoryOpMessage::CopyRequest {
            request_id: 12,
            src_chunk_id: 1 << 32 | 1,
            src_offset: 4095,
            len: CHUNK_SIZE,
            dst_node: NodeId::new(63),
            dst_chunk_id: 2 << 32 | 7,
            dst_addr: u64::MAX - 1,
            dst_rkey: u32::MAX,
        },
        MemoryOpMessage
    );
    round_trip!(
        SharingMessage::AskRequest {
            request_id: 13,
            name: u64::MAX,
            permission: 0x1f,
            password: 0x0123_4567_89ab_cdef,
        },
        SharingMessage
    );
    round_trip!(
        SharingMessage::AskReply {
            request_id: 14,
            status: ENOENT.into(),
            lmr_id: 3 << 32 | 4,
            size: MAX_LMR_SIZE,
            granted: 0x13,
            table_addr: 0xffff_8880_1234_5000,
            table_rkey: 0x8000_0001,
            chunk_size: 4096,
            lead: 4095,
        },
        SharingMessage
    );
    round_trip!(
        SharingMessage::RevokeRequest {
            request_id: 15,
            lmr_id: 9 << 32 | 1,
        },
        SharingMessage
    );
    round_trip!(
        SharingMessage::HoldMappings {
            request_id: 16,
            lmr_id: u64::MAX,
        },
        SharingMessage
    );
    round_trip!(
        SharingMessage::ResumeMappings {
            request_id: 17,
            lmr_id: 3,
            table_addr: 0xffff_8880_4321_0000,
            table_rkey: u32::MAX,
        },
        SharingMessage
    );
    round_trip!(
        RpcMessage::QueryPort {
            request_id: 19,
            port: 63,
            fresh: true,
        },
        RpcMessage
    );
    round_trip!(
        RpcMessage::QueryPort {
            request_id: 20,
            port: 0,
            fresh: false,
        },
        RpcMessage
    );
    round_trip!(
        RpcMessage::QueryPortReply {
            request_id: 19,
            status: Status::OK,
            ring_addr: 0xffff_8880_1234_0000,
            ring_rkey: 0xdead_beef,
            ring_size: 1 << 20,
            max_size: 1 << 18,
            consumed: 0x1_0000_0040,
            written: 0x1_0000_1000,
            epoch: 0xffff_fffe,
        },
        RpcMessage
    );
    round_trip!(
        RpcMessage::RingAck {
            port: 1,
            consumed: u64::MAX - 63,
        },
        RpcMessage
    );
    round_trip!(
        RpcMessage::RpcFailed {
            slot: 63,
            generation: 0x3fff,
            status: errno::ECONNRESET().into(),
        },
        RpcMessage
    );
    round_trip!(RpcMessage::PortClosed { port: 62 }, RpcMessage);
    round_trip!(
        RpcMessage::RingBroken {
            port: 5,
            epoch: 7,
            received: 0x2_0000_0000,
            injected: true,
        },
        RpcMessage
    );
    round_trip!(LockMessage::CreateLock { request_id: 21 }, LockMessage);
    round_trip!(
        LockMessage::AskLock {
            request_id: 22,
            number: 4095,
        },
        LockMessage
    );
    round_trip!(
        LockMessage::LockReply {
            request_id: 23,
            status: ENOENT.into(),
            number: 7,
            addr: 0xffff_8880_0001_0008,
            rkey: 0x1234_5678,
        },
        LockMessage
    );
    round_trip!(
        LockMessage::ReserveLock {
            request_id: 26,
            number: 3,
            waiter: u64::MAX,
        },
        LockMessage
    );
    round_trip!(
        LockMessage::ReserveReply {
            request_id: 27,
            status: Status::OK,
            number: 4095,
            hold: 0x00ff_ffff,
            granted: 1,
            owner_died: 1,
            managed: 1,
            contended: 0,
        },
        LockMessage
    );
    round_trip!(
        LockMessage::ReleaseLock {
            request_id: 28,
            number: 0,
            hold: 2,
            owner_died: 1,
        },
        LockMessage
    );
    round_trip!(
        AtomicMessage::AtomicRequest {
            request_id: 24,
            addr: 0xffff_8880_0002_0010,
            rkey: 0xabcd,
            compare_swap: true,
            compare: u64::MAX,
            swap: 1,
        },
        AtomicMessage
    );
    round_trip!(
        AtomicMessage::AtomicReply {
            request_id: 25,
            status: Status::OK,
            old: 1 << 63,
        },
        AtomicMessage
    );
    round_trip!(
        LockMessage::AssignLock {
            home: NodeId::new(63),
            number: u32::MAX,
            hold: 5,
            owner_died: 1,
            waiter: 9,
            managed: 0,
            contended: 1,
        },
        LockMessage
    );
    // A message of one family is not another's, and unknown kinds are refused.
    let barrier = BarrierMessage::Entered {
        round: 1,
        reply_wanted: false,
    }
    .to_frame();
    check!(c, MemoryMessage::from_frame(&barrier).is_none());
    let mut bytes = barrier.encode();
    bytes[1] = 99;
    let unknown = Frame::decode(&bytes);
    check!(c, unknown.kind().family().is_none());
    check!(c, BarrierMessage::from_frame(&unknown).is_none());
    // Status-only replies carry their outcome; requests want a reply only
    // with an id.
    let status = Frame::status_reply(5, ENOENT.into());
    check!(c, status.request_id() == 5);
    check!(c, status.status().to_result() == Err(ENOENT));
    check!(
        c,
        Frame::status_reply(5, Status::OK)
            .status()
            .to_result()
            .is_ok()
    );
    check!(c, !status.wants_reply());
    let revoke = SharingMessage::RevokeRequest {
        request_id: 6,
        lmr_id: 1,
    }
    .to_frame();
    check!(c, revoke.wants_reply());
    let free = MemoryMessage::FreeRequest {
        request_id: 0,
        chunk_id: 1,
    }
    .to_frame();
    check!(c, !free.wants_reply());
    check!(c, !barrier.wants_reply());
});

kunit_case!(lite_test_cm_wire_round_trip, |c| {
    let endpoint = Endpoint {
        peer: 3,
        qpn: 0x11,
        psn: 0xabcdef,
        lid: 0,
        mtu: 1024,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 2],
    };
    let messages = [
        Message::Hello(Hello {
            gid: endpoint.gid,
            lid: 5,
            rejoin_id: 7,
        }),
        Message::Welcome {
            node_id: 2,
            incarnation: 3,
        },
        Message::Prepare {
            peer: 1,
            incarnation: 2,
        },
        Message::QpInfo(endpoint),
        Message::Connect(endpoint),
        Message::Connected {
            peer: 1,
            status: -110,
        },
        Message::JoinDone {
            total_nodes: 3,
            epoch: 9,
        },
        Message::Failure { errno: -28 },
        Message::Heartbeat {
            node_id: 2,
            epoch: 9,
        },
        Message::HeartbeatAck { epoch: 10 },
        Message::Suspect {
            peer: 4,
            incarnation: 1,
        },
        Message::NodeDead {
            node: 4,
            incarnation: 1,
            epoch: 11,
        },
        Message::Leave {
            node_id: 2,
            incarnation: 3,
        },
        Message::Resume(Resume {
            node_id: 2,
            incarnation: 3,
            epoch: 12,
            gid: endpoint.gid,
        }),
        Message::Resumed { epoch: 13 },
        Message::Challenge { nonce: [7; 16] },
        Message::Auth {
            nonce: [8; 16],
            proof: [9; 32],
        },
        Message::AuthOk { proof: [10; 32] },
    ];
    for message in messages {
        let mut frame = [0u8; MAX_FRAME_LEN];
        let len = message.encode(&mut frame);
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&frame[..HEADER_LEN]);
        let decoded =
            Header::decode(&header).and_then(|h| Message::decode(h, &frame[HEADER_LEN..len]));
        check!(c, decoded == Ok(message));
        check!(c, len == HEADER_LEN + message.kind().payload_len());
    }
});

kunit_case!(lite_test_cm_wire_rejects_bad_frames, |c| {
    let mut frame = [0u8; MAX_FRAME_LEN];
    Message::Welcome {
        node_id: 1,
        incarnation: 1,
    }
    .encode(&mut frame);
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&frame[..HEADER_LEN]);
    let mut bad = header;
    bad[0] ^= 1;
    check!(c, Header::decode(&bad) == Err(WireError::BadMagic));
    let mut bad = header;
    bad[4] = 9;
    check!(c, Header::decode(&bad) == Err(WireError::BadVersion));
    let mut bad = header;
    bad[6] = 200;
    check!(c, Header::decode(&bad) == Err(WireError::UnknownKind));
    let mut bad = header;
    bad[8] = 99;
    check!(c, Header::decode(&bad) == Err(WireError::BadLength));
    let short = Header::new(Kind::QpInfo);
    check!(
        c,
        Message::decode(short, &[0u8; 4]) == Err(WireError::Truncated)
    );
    check!(c, cm_wire::MAGIC == u32::from_le_bytes(*b"LITE"));
});

kunit_case!(lite_test_kernel_message_pieces, |c| {
    let parts: [&[u8]; 3] = [b"head", b"", b"tail!"];
    let lengths = parts.map(<[u8]>::len);
    let Ok(len) = pieces::message_len(lengths.iter().copied(), 64) else {
        check!(c, false);
        return;
    };
    check!(c, len == 4 + 3 * 4 + 9);
    let mut message = [0u8; 25];
    let Ok(rest) = pieces::put_header(lengths.iter().copied(), &mut message) else {
        check!(c, false);
        return;
    };
    check!(c, rest.len() == 9);
    rest[..4].copy_from_slice(parts[0]);
    rest[4..].copy_from_slice(parts[2]);
    let ranges = pieces::ranges(&message);
    check!(
        c,
        ranges.as_ref().is_ok_and(|r| r.len() == 3
            && parts
                .iter()
                .zip(r.iter())
                .all(|(p, r)| message[r.clone()] == **p))
    );
    // No piece, a message too long, and every way the bytes can disagree
    // with the header.
    check!(c, pieces::message_len([].into_iter(), 64) == Err(EINVAL));
    check!(
        c,
        pieces::message_len(lengths.iter().copied(), len - 1) == Err(EINVAL)
    );
    let bad = errno::EBADMSG();
    check!(c, pieces::ranges(&message[..24]).err() == Some(bad));
    check!(c, pieces::ranges(&[0u8; 8]).err() == Some(bad));
    check!(
        c,
        pieces::ranges(&[9, 0, 0, 0, 1, 0, 0, 0]).err() == Some(bad)
    );
    let mut longer = [0u8; 26];
    longer[..25].copy_from_slice(&message);
    check!(c, pieces::ranges(&longer).err() == Some(bad));
});

kunit_case!(lite_test_manager_authentication, |c| {
    // RFC 4231, test case 2.
    let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    let expected = [
        0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75,
        0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec,
        0x38, 0x43,
    ];
    check!(c, mac == Ok(expected));
    // The proofs of the two sides differ, and depend on both nonces.
    let (manager, node) = ([1u8; 16], [2u8; 16]);
    let mut input = [0u8; cm_wire::AUTH_INPUT_LEN];
    let len = cm_wire::auth_input(cm_wire::NODE_LABEL, &manager, &node, &mut input);
    let node_proof = hmac_sha256(b"secret", &input[..len]);
    let len = cm_wire::auth_input(cm_wire::MANAGER_LABEL, &node, &manager, &mut input);
    let manager_proof = hmac_sha256(b"secret", &input[..len]);
    check!(c, node_proof.is_ok() && node_proof != manager_proof);
    let len = cm_wire::auth_input(cm_wire::NODE_LABEL, &manager, &[3u8; 16], &mut input);
    check!(c, hmac_sha256(b"secret", &input[..len]) != node_proof);
    check!(
        c,
        hmac_sha256(b"other secret", &input[..len]) != hmac_sha256(b"secret", &input[..len])
    );
    // A tag covers direction, sequence number and every byte of the frame.
    let mut frame = [0u8; MAX_FRAME_LEN];
    let frame_len = Message::HeartbeatAck { epoch: 4 }.encode(&mut frame);
    let tag = |direction, sequence, frame: &[u8]| {
        let mut input = [0u8; cm_wire::TAG_INPUT_LEN];
        cm_wire::tag_input(direction, sequence, frame, &mut input)
            .ok_or(ENOMEM)
            .and_then(|len| hmac_sha256(b"session", &input[..len]))
    };
    let first = tag(cm_wire::MANAGER_TO_NODE, 0, &frame[..frame_len]);
    check!(c, first.is_ok());
    check!(
        c,
        tag(cm_wire::MANAGER_TO_NODE, 1, &frame[..frame_len]) != first
    );
    check!(
        c,
        tag(cm_wire::NODE_TO_MANAGER, 0, &frame[..frame_len]) != first
    );
    frame[HEADER_LEN] ^= 1;
    check!(
        c,
        tag(cm_wire::MANAGER_TO_NODE, 0, &frame[..frame_len]) != first
    );
    check!(c, cm_wire::same_bytes(b"abc", b"abc"));
    check!(c, !cm_wire::same_bytes(b"abc", b"abd"));
    check!(c, !cm_wire::same_bytes(b"abc", b"ab"));
});
