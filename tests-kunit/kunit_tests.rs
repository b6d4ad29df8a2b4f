// SPDX-License-Identifier: GPL-2.0

//! Bodies of LITE's KUnit cases (suites in `lite_kunit.c`).
//!
//! Each `lite_test_*` function checks one unit of LITE's internal logic and
//! reports every failed check to KUnit with its location and expression.

use crate::internal::node_id::NodeId;
use core::ffi::c_char;
use kernel::{
    alloc::{flags::GFP_KERNEL, KBox},
    bindings,
    error::code::{EINVAL, EIO, ENOENT, ENOMEM},
    init::InPlaceInit,
};

use crate::{
    errno,
    internal::{
        atomics::wire::AtomicMessage,
        barrier::{
            rounds::{nodes_reached, BarrierRounds},
            wire::BarrierMessage,
        },
        cm_wire::{
            self, Endpoint, Header, Hello, Kind, Message, Resume, WireError, HEADER_LEN,
            MAX_FRAME_LEN,
        },
        core::wire::{Frame, Status, MESSAGE_LEN},
        keys::{
            part_frame,
            wire::{KeysMessage, FIRST_PART, LAST_PART},
        },
        locks::wire::LockMessage,
        memory::{
            chunk::{
                self, check_range, chunk_count, chunk_len, copy_pieces, pieces, pieces_in,
                CopyPiece, Geometry, Piece, CHUNK_SIZE, MAX_LMR_SIZE,
            },
            handle::Password,
            ops_wire::MemoryOpMessage,
            permission::Permission,
            wire::MemoryMessage,
        },
        qos::{
            op_stats::TextBuffer,
            stats::{Stats, STATS_LEN},
        },
        quota::{
            amounts::{Amounts, Resource, UNLIMITED},
            command::{Changes, Command},
            Payer, Quotas,
        },
        rpc::wire::RpcMessage,
        sharing::{
            names::{table_len, ChunkDescriptor, NameTable, Published, DESCRIPTOR_LEN},
            wire::SharingMessage,
        },
        util::{address::parse_ipv4, handle, ring::Ring, slot_table::SlotTable},
    },
    sys::{module_param::DeviceParam, secret::hmac_sha256},
    verbs::{choose_gid, GidEntry, RemoteKeys},
};

extern "C" {
    fn lite_kunit_fail(test: *mut bindings::kunit, what: *const c_char);
}

/// Reports failed checks of one test case.
struct Check {
    test: *mut bindings::kunit,
}

impl Check {
    fn that(&self, ok: bool, what: &'static [u8]) {
        if !ok {
            // SAFETY: `test` is the running test passed in by KUnit and
            // `what` is NUL-terminated (built by `check!`).
            unsafe { lite_kunit_fail(self.test, what.as_ptr().cast()) };
        }
    }
}

macro_rules! check {
    ($c:expr, $cond:expr) => {
        $c.that(
            $cond,
            concat!(file!(), ":", line!(), ": ", stringify!($cond), "\0").as_bytes(),
        )
    };
}

macro_rules! kunit_case {
    ($name:ident, |$c:ident| $body:block) => {
        /// KUnit case body, called from `lite_kunit.c`.
        #[no_mangle]
        pub(crate) extern "C" fn $name(test: *mut bindings::kunit) {
            let $c = Check { test };
            $body
        }
    };
}

mod cluster;
mod membership;

kunit_case!(lite_test_chunk_count_and_len, |c| {
    check!(c, chunk_count(1) == 1);
    check!(c, chunk_count(CHUNK_SIZE) == 1);
    check!(c, chunk_count(CHUNK_SIZE + 1) == 2);
    check!(c, chunk_count(3 * CHUNK_SIZE + 5) == 4);
    check!(
        c,
        chunk_count(MAX_LMR_SIZE) == (MAX_LMR_SIZE / CHUNK_SIZE) as usize
    );
    check!(c, chunk_len(CHUNK_SIZE + 1, 0) == CHUNK_SIZE);
    check!(c, chunk_len(CHUNK_SIZE + 1, 1) == 1);
    check!(c, chunk_len(CHUNK_SIZE + 1, 2) == 0);
    check!(c, chunk_len(7, 0) == 7);
    check!(c, chunk_len(7, usize::MAX) == 0);
    check!(c, chunk::check_size(0).is_err());
    check!(c, chunk::check_size(1).is_ok());
    check!(c, chunk::check_size(MAX_LMR_SIZE).is_ok());
    check!(c, chunk::check_size(MAX_LMR_SIZE + 1).is_err());
});

kunit_case!(lite_test_range_checks_reject_overflow, |c| {
    check!(c, check_range(10, 0, 10).is_ok());
    check!(c, check_range(10, 10, 0).is_ok());
    check!(c, check_range(10, 9, 2).is_err());
    check!(c, check_range(10, 11, 0).is_err());
    check!(c, check_range(10, u64::MAX, 2).is_err());
    check!(c, check_range(u64::MAX, u64::MAX, 1).is_err());
    check!(c, check_range(u64::MAX, 1, u64::MAX).is_err());
    check!(c, check_range(u64::MAX, 0, u64::MAX).is_ok());
});

kunit_case!(lite_test_pieces_split_at_chunk_edges, |c| {
    let mut it = pieces(CHUNK_SIZE - 3, 6, 1 << 20);
    check!(
        c,
        it.next()
            == Some(Piece {
                chunk: 0,
                chunk_offset: CHUNK_SIZE - 3,
                len: 3,
                data_offset: 0
            })
    );
    check!(
        c,
        it.next()
            == Some(Piece {
                chunk: 1,
                chunk_offset: 0,
                len: 3,
                data_offset: 3
            })
    );
    check!(c, it.next().is_none());
    // Pieces cover the range exactly, in order, never cross a chunk and
    // respect the maximal piece length.
    let (offset, len, max) = (CHUNK_SIZE / 2 + 7, 2 * CHUNK_SIZE + 11, 1 << 20);
    let mut expected_offset = 0;
    let mut ok = true;
    for piece in pieces(offset, len, max) {
        ok &= piece.data_offset == expected_offset;
        ok &= piece.len > 0 && piece.len <= max;
        ok &= piece.chunk_offset + piece.len <= CHUNK_SIZE;
        ok &= piece.chunk as u64 * CHUNK_SIZE + piece.chunk_offset == offset + piece.data_offset;
        expected_offset += piece.len;
    }
    check!(c, ok);
    check!(c, expected_offset == len);
    check!(c, pieces(5, 0, max).next().is_none());
    // A maximal piece length of 0 still makes progress.
    check!(c, pieces(0, 2, 0).count() == 2);
});

kunit_case!(lite_test_spread_round_robin, |c| {
    let nodes = [NodeId::new(2), NodeId::new(3), NodeId::new(5)];
    check!(c, chunk::spread_target(&nodes, 0) == Some(NodeId::new(2)));
    check!(c, chunk::spread_target(&nodes, 1) == Some(NodeId::new(3)));
    check!(c, chunk::spread_target(&nodes, 2) == Some(NodeId::new(5)));
    check!(c, chunk::spread_target(&nodes, 3) == Some(NodeId::new(2)));
    check!(c, chunk::spread_target(&[], 0).is_none());
});

kunit_case!(lite_test_handle_round_trip, |c| {
    for (index, generation) in [
        (0usize, 1u32),
        (1, 2),
        (4095, 77),
        (handle::MAX_INDEX, handle::MAX_GENERATION),
    ] {
        let id = handle::encode(index, generation);
        check!(c, id != 0);
        check!(c, (id as i64) > 0);
        check!(c, handle::decode(id) == Some((index, generation)));
    }
    check!(c, handle::next_generation(1) == 2);
    check!(c, handle::next_generation(handle::MAX_GENERATION) == 1);
});

kunit_case!(lite_test_handle_rejects_forged, |c| {
    check!(c, handle::decode(0).is_none());
    check!(c, handle::decode(1).is_none());
    check!(c, handle::decode(1 << 32).is_none());
    check!(c, handle::decode(u64::MAX).is_none());
    check!(c, handle::decode((1u64 << 63) | 1).is_none());
    check!(c, handle::decode((1 << 32) | 0xffff_ffff).is_some());
});

kunit_case!(lite_test_slot_table_reuse_and_stale_ids, |c| {
    let mut table = SlotTable::new();
    let Ok(a) = table.insert(10u32) else {
        check!(c, false);
        return;
    };
    let Ok(b) = table.insert(20u32) else {
        check!(c, false);
        return;
    };
    check!(c, a != b);
    check!(c, table.get(a) == Some(&10));
    check!(c, table.get(b) == Some(&20));
    check!(c, table.len() == 2);
    check!(c, table.remove(a) == Some(10));
    check!(c, table.get(a).is_none());
    check!(c, table.remove(a).is_none());
    check!(c, table.len() == 1);
    // The freed entry is reused under a new generation: the old id stays dead.
    let Ok(a2) = table.insert(30u32) else {
        check!(c, false);
        return;
    };
    check!(c, a2 != a);
    check!(
        c,
        handle::decode(a2).map(|(i, _)| i) == handle::decode(a).map(|(i, _)| i)
    );
    check!(c, table.get(a).is_none());
    check!(c, table.get(a2) == Some(&30));
    check!(c, table.get(0).is_none());
    check!(c, table.get(u64::MAX).is_none());
});

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

kunit_case!(lite_test_ipv4_parsing, |c| {
    check!(c, parse_ipv4(b"10.77.0.254") == Some([10, 77, 0, 254]));
    check!(c, parse_ipv4(b"0.0.0.0") == Some([0, 0, 0, 0]));
    check!(c, parse_ipv4(b"255.255.255.255") == Some([255; 4]));
    check!(c, parse_ipv4(b"256.0.0.1").is_none());
    check!(c, parse_ipv4(b"1.2.3").is_none());
    check!(c, parse_ipv4(b"1.2.3.4.5").is_none());
    check!(c, parse_ipv4(b"1..3.4").is_none());
    check!(c, parse_ipv4(b"a.b.c.d").is_none());
    check!(c, parse_ipv4(b"not-an-ip").is_none());
    check!(c, parse_ipv4(b"").is_none());
    check!(c, parse_ipv4(b" 1.2.3.4").is_none());
    check!(c, parse_ipv4(b"1.2.3.4444").is_none());
});

kunit_case!(lite_test_gid_choice, |c| {
    let v4 = |last: u8| {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 77, 0, last]);
        gid
    };
    let mut link_local = [0u8; 16];
    link_local[0] = 0xfe;
    link_local[1] = 0x80;
    link_local[15] = 1;
    let entry = |index, gid, roce_v2| GidEntry {
        index,
        gid,
        roce_v2,
    };
    // rxe: an IPv6 link-local v2 entry first, then the IPv4 address.
    let rxe = [entry(0, link_local, true), entry(1, v4(1), true)];
    check!(c, choose_gid(rxe.into_iter(), true) == Some((1, v4(1))));
    // mlx: the v1 entry of an address comes before its v2 entry.
    let v1_first = [entry(0, v4(2), false), entry(1, v4(2), true)];
    check!(
        c,
        choose_gid(v1_first.into_iter(), true) == Some((1, v4(2)))
    );
    // Only v1 entries: no usable GID on RoCE.
    let v1_only = [entry(0, v4(3), false), entry(1, link_local, false)];
    check!(c, choose_gid(v1_only.into_iter(), true).is_none());
    // An IPv6-only port: its v2 GID.
    let v6 = [entry(0, [0; 16], true), entry(2, link_local, true)];
    check!(c, choose_gid(v6.into_iter(), true) == Some((2, link_local)));
    // InfiniBand: the first non-zero GID, whatever its type says.
    let ib = [entry(0, [0; 16], false), entry(1, link_local, false)];
    check!(
        c,
        choose_gid(ib.into_iter(), false) == Some((1, link_local))
    );
    check!(c, choose_gid(core::iter::empty(), true).is_none());
});

kunit_case!(lite_test_device_param, |c| {
    let is = |value: &[u8], expected: Option<&[u8]>| {
        DeviceParam::from_value(value).name().map(|n| n.as_bytes()) == expected
    };
    // Written with echo: the newline is not part of the name.
    check!(c, is(b"rxe1\n", Some(b"rxe1")));
    check!(c, is(b"  mlx5_0 \n\0garbage", Some(b"mlx5_0")));
    // Empty or blank: any device.
    check!(c, is(b"", None));
    check!(c, is(b" \n\0rxe0", None));
    // No NUL at all: the whole value, cut to a device name's length.
    let long = DeviceParam::from_value(&[b'a'; 100]);
    check!(c, long.name().map(|n| n.as_bytes().len()) == Some(63));
});

kunit_case!(lite_test_barrier_counting, |c| {
    let seen = [0u64, 3, 2, 3, 0];
    check!(c, nodes_reached(&seen, 1) == 3);
    check!(c, nodes_reached(&seen, 3) == 2);
    check!(c, nodes_reached(&seen, 4) == 0);
    check!(c, nodes_reached(&seen, 0) == 5);
    // A node entering a round asks for an answer only from the peers it
    // has not yet heard of in that round.
    let Ok(rounds) = KBox::pin_init(BarrierRounds::new(), GFP_KERNEL) else {
        check!(c, false);
        return;
    };
    let entered = rounds.enter(NodeId::new(1));
    check!(c, rounds.has_reached(NodeId::new(1), entered.round));
    check!(c, !rounds.has_reached(NodeId::new(2), entered.round));
    rounds.joined(NodeId::new(2));
    rounds.arrived(NodeId::new(2), entered.round);
    check!(c, rounds.has_reached(NodeId::new(2), entered.round));
    check!(c, !rounds.has_reached(NodeId::new(2), entered.round + 1));
    check!(c, !rounds.has_reached(NodeId::new(u32::MAX), 1));
});

kunit_case!(lite_test_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    check!(c, liteapi_get_node_id() == enotconn);
    check!(c, liteapi_get_total_node() == enotconn);
    check!(
        c,
        liteapi_alloc_remote_mem(1, 4096, 0, 0) == i64::from(enotconn)
    );
    check!(c, liteapi_free(1) == enotconn);
    check!(c, liteapi_dist_barrier(2) == enotconn);
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is a valid 8-byte buffer for both calls.
    unsafe {
        check!(
            c,
            liteapi_rdma_write_offset(1, buf.as_ptr().cast(), 8, 0, 0, 0) == enotconn
        );
        check!(
            c,
            liteapi_rdma_read_offset(1, buf.as_mut_ptr().cast(), 8, 0, 0, 0) == enotconn
        );
    }
    // SAFETY: The strings are NUL-terminated; null is allowed.
    unsafe {
        check!(
            c,
            liteapi_establish_conn(core::ptr::null(), 18500, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"not-an-ip".as_ptr(), 18500, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 0, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 70000, 1) == -(bindings::EINVAL as i32)
        );
        // No RDMA device exists while KUnit runs at boot.
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 18500, 1) == -(bindings::ENODEV as i32)
        );
    }
    check!(c, liteapi_get_node_id() == enotconn);
});

kunit_case!(lite_test_permissions, |c| {
    let rw = Permission::READ.union(Permission::WRITE);
    check!(c, Permission::from_bits(0x1f, Permission::ALL).is_ok());
    check!(c, Permission::from_bits(0x20, Permission::ALL).is_err());
    check!(c, Permission::from_bits(1 << 63, Permission::ALL).is_err());
    check!(
        c,
        Permission::from_bits(Permission::ADMIN.bits(), Permission::SHAREABLE).is_err()
    );
    check!(c, rw.require(Permission::READ).is_ok());
    check!(c, rw.require(rw).is_ok());
    check!(
        c,
        rw.require(Permission::SHARE) == Err(kernel::error::code::EPERM)
    );
    check!(c, Permission::READ.require(rw).is_err());
    // Granted = requested, published and allowed by the LMR, never ADMIN.
    let all = Permission::ALL;
    check!(c, Permission::grant(all, rw, all) == Ok(rw));
    check!(
        c,
        Permission::grant(Permission::WRITE, Permission::READ, all).is_err()
    );
    check!(
        c,
        Permission::grant(all, all, Permission::READ) == Ok(Permission::READ)
    );
    check!(c, Permission::grant(Permission::ADMIN, all, all).is_err());
    check!(
        c,
        !Permission::grant(all, all, all).is_ok_and(|g| g.contains(Permission::ADMIN))
    );
});

kunit_case!(lite_test_name_table, |c| {
    let entry = |name, lmr_id| Published {
        name,
        lmr_id,
        permission: Permission::READ,
        password: Password::from_raw(7),
        value: name as u32,
    };
    let mut table = NameTable::new();
    check!(c, table.insert(entry(1, 10)).is_ok());
    check!(c, table.insert(entry(2, 10)).is_ok());
    check!(c, table.insert(entry(3, 20)).is_ok());
    check!(
        c,
        table
            .insert(entry(1, 30))
            .map_err(|(e, refused)| (e, refused.lmr_id))
            == Err((kernel::error::code::EEXIST, 30))
    );
    check!(c, table.len() == 3);
    check!(
        c,
        table
            .find(2)
            .is_some_and(|e| e.lmr_id == 10 && e.value == 2)
    );
    check!(c, table.find(4).is_none());
    check!(c, table.take_of_lmr(10).is_some_and(|e| e.lmr_id == 10));
    check!(c, table.take_of_lmr(10).is_some_and(|e| e.lmr_id == 10));
    check!(c, table.take_of_lmr(10).is_none());
    check!(c, table.find(1).is_none() && table.find(2).is_none());
    check!(c, table.len() == 1);
    // A freed name can be published again, also for another LMR.
    check!(c, table.insert(entry(1, 40)).is_ok());
    check!(c, table.find(1).is_some_and(|e| e.lmr_id == 40));
    check!(c, table.take_of_lmr(99).is_none());
});

kunit_case!(lite_test_chunk_descriptors, |c| {
    let d = ChunkDescriptor {
        node: NodeId::new(63),
        rkey: 0xdead_beef,
        chunk_id: u64::MAX,
        addr: 0xffff_8880_0000_1000,
        len: CHUNK_SIZE,
    };
    check!(c, ChunkDescriptor::decode(&d.encode()) == d);
    check!(c, table_len(1, 4096) == Some(DESCRIPTOR_LEN));
    check!(c, table_len(128, 4096) == Some(4096));
    check!(c, table_len(129, 4096).is_none());
    check!(c, table_len(0, 4096).is_none());
    check!(c, table_len(usize::MAX, usize::MAX).is_none());
});

kunit_case!(lite_test_geometry, |c| {
    check!(c, Geometry::new(0, 0).is_err());
    check!(c, Geometry::new(4096, 4096).is_err());
    let page = Geometry::new(4096, 100);
    check!(c, page.is_ok());
    let Ok(page) = page else {
        return;
    };
    check!(c, page.chunk_count(1) == Some(1));
    check!(c, page.chunk_count(3996) == Some(1));
    check!(c, page.chunk_count(3997) == Some(2));
    check!(c, page.chunk_count(u64::MAX).is_none());
    check!(c, page.locate(0) == Some((0, 100)));
    check!(c, page.locate(3996) == Some((1, 0)));
    check!(c, page.locate(u64::MAX).is_none());
    check!(
        c,
        Geometry::ALLOCATED.chunk_count(CHUNK_SIZE + 1) == Some(2)
    );
    // An unaligned registration: pieces follow page edges, lead included.
    let mut it = pieces_in(page, 3990, 10, u64::MAX);
    check!(
        c,
        it.next()
            == Some(Piece {
                chunk: 0,
                chunk_offset: 4090,
                len: 6,
                data_offset: 0
            })
    );
    check!(
        c,
        it.next()
            == Some(Piece {
                chunk: 1,
                chunk_offset: 0,
                len: 4,
                data_offset: 6
            })
    );
    check!(c, it.next().is_none());
});

kunit_case!(lite_test_copy_pieces, |c| {
    let alloc = Geometry::ALLOCATED;
    // Forward across a source chunk edge.
    let mut it = copy_pieces(alloc, CHUNK_SIZE - 2, alloc, 0, 5, false);
    check!(
        c,
        it.next()
            == Some(CopyPiece {
                src_chunk: 0,
                src_at: CHUNK_SIZE - 2,
                dst_chunk: 0,
                dst_at: 0,
                len: 2
            })
    );
    check!(
        c,
        it.next()
            == Some(CopyPiece {
                src_chunk: 1,
                src_at: 0,
                dst_chunk: 0,
                dst_at: 2,
                len: 3
            })
    );
    check!(c, it.next().is_none());
    // Backward yields the same pieces in reverse order.
    let mut it = copy_pieces(alloc, CHUNK_SIZE - 2, alloc, 0, 5, true);
    check!(
        c,
        it.next()
            == Some(CopyPiece {
                src_chunk: 1,
                src_at: 0,
                dst_chunk: 0,
                dst_at: 2,
                len: 3
            })
    );
    check!(
        c,
        it.next()
            == Some(CopyPiece {
                src_chunk: 0,
                src_at: CHUNK_SIZE - 2,
                dst_chunk: 0,
                dst_at: 0,
                len: 2
            })
    );
    check!(c, it.next().is_none());
    // Both edges, pages against chunks, every byte covered exactly once.
    let Ok(page) = Geometry::new(4096, 10) else {
        check!(c, false);
        return;
    };
    for backward in [false, true] {
        let (mut total, mut count) = (0u64, 0);
        for piece in copy_pieces(page, 5000, alloc, CHUNK_SIZE - 3000, 20_000, backward) {
            check!(c, piece.len > 0);
            check!(c, piece.src_at + piece.len <= 4096);
            check!(c, piece.dst_at + piece.len <= CHUNK_SIZE);
            total += piece.len;
            count += 1;
        }
        check!(c, total == 20_000);
        check!(c, count == 7);
    }
    check!(c, copy_pieces(alloc, 0, alloc, 0, 0, true).next().is_none());
});

kunit_case!(lite_test_ring_fifo, |c| {
    let Ok(mut ring) = Ring::new(3) else {
        check!(c, false);
        return;
    };
    check!(c, ring.pop().is_none());
    check!(
        c,
        ring.push(1).is_ok() && ring.push(2).is_ok() && ring.push(3).is_ok()
    );
    check!(c, ring.push(4) == Err(4));
    check!(c, ring.pop() == Some(1));
    check!(c, ring.push(4).is_ok());
    check!(
        c,
        ring.pop() == Some(2) && ring.pop() == Some(3) && ring.pop() == Some(4)
    );
    check!(c, ring.pop().is_none());
});

kunit_case!(lite_test_stats_layout, |c| {
    let stats = Stats {
        lmrs: 1,
        registrations: 2,
        mappings: 3,
        published_names: 4,
        held_chunks: 5,
        handles: 6,
        processes: 7,
        async_in_flight: 8,
        connections: 9,
        rpc_ports: 10,
        locks: 11,
        lock_acquires: 12,
        lock_waits: 13,
        atomics: 14,
        qos_throttled: 15,
    };
    let bytes = stats.to_bytes();
    check!(c, STATS_LEN == 15 * 8);
    for i in 0..15 {
        let mut field = [0u8; 8];
        field.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        check!(c, u64::from_ne_bytes(field) == i as u64 + 1);
    }
    let named = stats.named();
    check!(c, named[0] == ("lmrs", 1));
    check!(c, named[14] == ("qos_throttled", 15));
});

kunit_case!(lite_test_memory_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    check!(c, liteapi_remote_memset(1, 0, 8, 0) == enotconn);
    check!(c, liteapi_rdma_mr_memcpy(1, 0, 2, 0, 8) == enotconn);
    check!(c, liteapi_rdma_mr_memmov(1, 0, 2, 0, 8) == enotconn);
    check!(c, liteapi_add_askmr_table(1, 1, 1, 0) == enotconn);
    check!(c, liteapi_ask_mr(1, 1, 1, 0) == i64::from(enotconn));
    check!(c, liteapi_umap_lmr(1) == enotconn);
    check!(c, liteapi_deregister_mr(1) == enotconn);
    let data = [0u8; 8];
    // SAFETY: `data` holds 8 readable bytes.
    let wrapped = unsafe { liteapi_wrapup_alloc_for_remote_access(data.as_ptr().cast(), 8, 1, 0) };
    check!(c, wrapped == i64::from(enotconn));
});

kunit_case!(lite_test_rpc_immediates, |c| {
    use crate::internal::rpc::ring_protocol::{
        next_generation, Imm, MAX_PORTS, RING_ALIGN, RING_SIZE,
    };
    let request = Imm::Request {
        port: MAX_PORTS - 1,
        offset: RING_SIZE - RING_ALIGN,
    };
    check!(c, request.encode().and_then(Imm::decode) == Some(request));
    let reply = Imm::Reply {
        slot: 63,
        generation: 0x3fff,
    };
    check!(c, reply.encode().and_then(Imm::decode) == Some(reply));
    // Requests and replies never share an encoding.
    let (Some(req), Some(rep)) = (request.encode(), reply.encode()) else {
        check!(c, false);
        return;
    };
    check!(c, req >> 30 == 0b10 && rep >> 30 == 0b01);
    // Out of range fields are refused, not truncated.
    check!(
        c,
        Imm::Request {
            port: MAX_PORTS,
            offset: 0
        }
        .encode()
        .is_none()
    );
    check!(c, Imm::Request { port: 0, offset: 3 }.encode().is_none());
    check!(
        c,
        Imm::Request {
            port: 0,
            offset: RING_ALIGN << 24
        }
        .encode()
        .is_none()
    );
    check!(
        c,
        Imm::Reply {
            slot: 1 << 16,
            generation: 0
        }
        .encode()
        .is_none()
    );
    check!(
        c,
        Imm::Reply {
            slot: 0,
            generation: 1 << 14
        }
        .encode()
        .is_none()
    );
    check!(
        c,
        Imm::decode(0).is_none() && Imm::decode(0xc000_0000).is_none()
    );
    check!(c, next_generation(0x3fff) == 0 && next_generation(5) == 6);
});

kunit_case!(lite_test_rpc_header, |c| {
    use crate::internal::rpc::ring_protocol::{footprint, RequestHeader, FLAG_ONE_WAY, HEADER_LEN};
    let header = RequestHeader {
        len: 262_144,
        flags: FLAG_ONE_WAY,
        port: 63,
        max_reply: 4096,
        reply_rkey: 0xdead_beef,
        reply_addr: 0x1234_5678_9abc_def0,
        slot: 17,
        generation: 0x3fff,
    };
    check!(c, RequestHeader::decode(&header.encode()) == header);
    check!(c, !header.wants_reply());
    check!(
        c,
        HEADER_LEN == 32 && footprint(1) == 64 && footprint(32) == 64
    );
    check!(c, footprint(33) == 128 && footprint(0) == 64);
});

kunit_case!(lite_test_rpc_ring_space, |c| {
    use crate::internal::rpc::ring_protocol::{
        footprint, Arrival, RingReader, RingWriter, HEADER_LEN,
    };
    let size = 1024;
    let header = HEADER_LEN as u64;
    let (Some(mut writer), mut reader) = (RingWriter::resuming(size, 0, 0), RingReader::new(size))
    else {
        check!(c, false);
        return;
    };
    // Three 224-byte messages (256 in the ring) fit, a fourth not yet.
    for expected in [0, 256, 512] {
        let r = writer.reserve(224);
        check!(
            c,
            r.map(|r| (r.offset, r.position)) == Some((expected, expected))
        );
        check!(
            c,
            reader.arrive(expected, header + 224)
                == Ok(Arrival::Request {
                    offset: expected,
                    len: 224
                })
        );
    }
    check!(c, writer.reserve(480).is_none());
    // Consuming a quarter of the ring acknowledges it.
    check!(c, reader.next_offset() == Some(0));
    check!(c, reader.consume(224, false) == Ok(Some(256)));
    check!(c, reader.next_offset() == Some(256));
    check!(c, reader.consume(224, false) == Ok(Some(512)));
    writer.acknowledge(512);
    // 480 bytes (512 in the ring) do not fit in the 256 left at the end:
    // the writer leaves the end of the lap unused and starts again at 0;
    // the reader places the request the same way from its offset alone.
    let r = writer.reserve(480);
    check!(c, r.map(|r| (r.offset, r.position)) == Some((0, 1024)));
    check!(
        c,
        reader.arrive(0, header + 480)
            == Ok(Arrival::Request {
                offset: 0,
                len: 480
            })
    );
    check!(c, reader.written() == 1024 + footprint(480));
    // The reader consumes in order, skipping the unused end of the lap.
    check!(c, reader.next_offset() == Some(512));
    check!(c, reader.consume(224, false) == Ok(Some(768)));
    check!(c, reader.next_offset() == Some(0));
    // A quarter of the ring again (the unused end counts).
    check!(
        c,
        reader.consume(480, false) == Ok(Some(1024 + footprint(480)))
    );
    check!(c, reader.pending() == 0 && reader.next_offset().is_none());
    // Acknowledgments never move backwards or past what was written.
    writer.acknowledge(100);
    writer.acknowledge(1 << 40);
    check!(c, writer.reserve(448).is_none());
    writer.acknowledge(1024 + footprint(480));
    check!(c, writer.reserve(448).is_some());
    // A writer resumes where the reader says requests go, and refuses
    // positions no reader could report.
    check!(c, RingWriter::resuming(size, 512, 512 + size).is_some());
    check!(c, RingWriter::resuming(size, 512, 513 + size).is_none());
    check!(c, RingWriter::resuming(size, 512, 511).is_none());
});

kunit_case!(lite_test_rpc_ring_acks_on_demand, |c| {
    use crate::internal::rpc::ring_protocol::{footprint, RingReader, RingWriter, HEADER_LEN};
    let size = 4096;
    let step = footprint(224);
    let bytes = HEADER_LEN as u64 + 224;
    let (Some(mut writer), mut reader) = (RingWriter::resuming(size, 0, 0), RingReader::new(size))
    else {
        check!(c, false);
        return;
    };
    // A lone call in a roomy ring is not acknowledged: no round trip per
    // call just to report room.
    let r = writer.reserve(224);
    check!(c, r.map(|r| r.ack_wanted) == Some(false));
    check!(c, reader.arrive(0, bytes).is_ok());
    check!(c, reader.next_offset() == Some(0));
    check!(c, reader.consume(224, false) == Ok(None));
    // Fill the ring; messages ask for an acknowledgment once more than
    // half of it is unacknowledged.
    let mut written = 1;
    let mut last_wanted = false;
    while let Some(r) = writer.reserve(224) {
        check!(c, r.ack_wanted == ((written + 1) * step > size / 2));
        last_wanted = r.ack_wanted;
        check!(c, reader.arrive(r.offset, bytes).is_ok());
        written += 1;
    }
    check!(c, written == size / step && last_wanted);
    // The reader acknowledges every quarter, and once it is empty after a
    // flagged message: the full writer learns that all space is free.
    let mut last_ack = None;
    for i in 1..written {
        let flagged = (i + 1) * step > size / 2;
        check!(c, reader.next_offset().is_some());
        if let Ok(Some(at)) = reader.consume(224, flagged) {
            last_ack = Some(at);
        }
    }
    check!(c, reader.pending() == 0 && last_ack == Some(written * step));
    writer.acknowledge(written * step);
    // Nine more messages: the ninth takes the unacknowledged part past
    // half the ring. Quarters are acknowledged after the fourth and the
    // eighth; the ninth, flagged and emptying the ring, is acknowledged
    // although less than a quarter was consumed since.
    let mut wanted = [false; 9];
    for flag in &mut wanted {
        let r = writer.reserve(224);
        check!(c, r.is_some_and(|r| reader.arrive(r.offset, bytes).is_ok()));
        *flag = r.is_some_and(|r| r.ack_wanted);
    }
    let base = written * step;
    for (i, &flagged) in wanted.iter().enumerate() {
        let expected = match i {
            3 => Some(base + 4 * step),
            7 => Some(base + 8 * step),
            8 => Some(base + 9 * step),
            _ => None,
        };
        check!(c, flagged == (i == 8));
        check!(c, reader.next_offset().is_some());
        check!(c, reader.consume(224, flagged) == Ok(expected));
    }
});

kunit_case!(lite_test_rpc_ring_interleaving, |c| {
    use crate::internal::rpc::ring_protocol::{
        footprint, Arrival, RingFault, RingReader, RingWriter, HEADER_LEN, MAX_MESSAGE_SIZE,
        RING_SIZE,
    };
    let header = HEADER_LEN as u64;
    // Calls and multicasts of mixed sizes from several threads share one
    // writer (reservations in posting order) while receivers consume in
    // between and acknowledgments come back late: the reader never loses
    // its place, across many laps.
    let sizes = [16, 100, 1000, 4096, 10_000, 24_576, MAX_MESSAGE_SIZE, 1];
    let (Some(mut writer), mut reader) = (
        RingWriter::resuming(RING_SIZE, 0, 0),
        RingReader::new(RING_SIZE),
    ) else {
        check!(c, false);
        return;
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // Requests written and not yet consumed, oldest first: length, ring
    // offset and whether the writer asked for an acknowledgment.
    let mut in_ring = [(0u64, 0u64, false); 64];
    let (mut first, mut count) = (0usize, 0usize);
    let mut pending_ack = None;
    let mut faults = 0;
    let mut stalls = 0;
    let mut sent = 0;
    for _ in 0..4000 {
        let roll = next();
        if roll % 3 != 0 && count < in_ring.len() {
            // PANIC: the index is reduced modulo the array's length.
            let len = sizes[(roll >> 8) as usize % sizes.len()];
            match writer.reserve(len) {
                Some(r) => {
                    check!(c, r.position % RING_SIZE == r.offset);
                    match reader.arrive(r.offset, header + len) {
                        Ok(Arrival::Request { offset, len: got }) => {
                            check!(c, offset == r.offset && got == len)
                        }
                        _ => faults += 1,
                    }
                    // PANIC: the index is reduced modulo the array's length.
                    in_ring[(first + count) % in_ring.len()] = (len, r.offset, r.ack_wanted);
                    count += 1;
                    sent += 1;
                }
                None => match pending_ack.take() {
                    // A full writer waits for the acknowledgment in flight.
                    Some(at) => writer.acknowledge(at),
                    // With nothing queued and no acknowledgment on its
                    // way, the writer would wait forever.
                    None if count == 0 => stalls += 1,
                    None => {}
                },
            }
        } else if count > 0 {
            // PANIC: `first` is kept below the array's length.
            let (len, offset, flagged) = in_ring[first];
            check!(c, reader.next_offset() == Some(offset));
            match reader.consume(len, flagged) {
                Ok(Some(at)) => pending_ack = Some(at),
                Ok(None) => {}
                Err(_) => faults += 1,
            }
            first = (first + 1) % in_ring.len();
            count -= 1;
        } else if let Some(at) = pending_ack.take() {
            writer.acknowledge(at);
        }
    }
    check!(c, faults == 0 && stalls == 0 && sent > 1000);
    check!(c, reader.written() > 3 * RING_SIZE);
    check!(c, reader.pending() as usize == count);

    // A reservation whose request was never posted is taken back: the next
    // request goes where the reader expects one. Only the last one can be.
    let Some(mut writer) = RingWriter::resuming(RING_SIZE, 0, 0) else {
        check!(c, false);
        return;
    };
    let kept = writer.reserve(4096);
    let unposted = writer.reserve(100);
    if let (Some(kept), Some(unposted)) = (kept, unposted) {
        writer.cancel(&kept);
        writer.cancel(&unposted);
    }
    let next = writer.reserve(100);
    check!(
        c,
        unposted.is_some() && unposted.map(|r| r.position) == next.map(|r| r.position)
    );
    check!(c, next.map(|r| r.position) == Some(footprint(4096)));

    // Two views of one ring (two answers to concurrent queries) put two
    // requests at one offset: the second arrival is not where the next
    // request goes, so the reader breaks the ring instead of reading a
    // request out of the middle of another.
    let mut reader = RingReader::new(RING_SIZE);
    let (Some(mut one), Some(mut other)) = (
        RingWriter::resuming(RING_SIZE, 0, 0),
        RingWriter::resuming(RING_SIZE, 0, 0),
    ) else {
        check!(c, false);
        return;
    };
    let a = one.reserve(4096).map(|r| r.offset);
    let b = other.reserve(100).map(|r| r.offset);
    check!(c, a == Some(0) && b == Some(0));
    check!(c, reader.arrive(0, header + 4096).is_ok());
    check!(
        c,
        reader.arrive(0, header + 100) == Err(RingFault::Misplaced)
    );
    // Writes shorter than a header, longer than a message, or past
    // unconsumed space are refused too.
    let mut fresh = RingReader::new(RING_SIZE);
    check!(c, fresh.arrive(0, header - 1) == Err(RingFault::BadLength));
    check!(
        c,
        fresh.arrive(0, header + MAX_MESSAGE_SIZE + 1) == Err(RingFault::BadLength)
    );
    for _ in 0..4 {
        check!(
            c,
            fresh
                .arrive(fresh.written() % RING_SIZE, header + MAX_MESSAGE_SIZE)
                .is_ok()
        );
    }
    check!(
        c,
        fresh.arrive(fresh.written() % RING_SIZE, header + 1) == Err(RingFault::Overrun)
    );
    // A header whose length disagrees with what arrived is caught when the
    // last waiting request does not end where the writes did.
    check!(c, fresh.next_offset() == Some(0));
    check!(c, fresh.consume(MAX_MESSAGE_SIZE, false).is_ok());
    check!(c, fresh.next_offset().is_some());
    check!(c, fresh.consume(MAX_MESSAGE_SIZE - 1000, false).is_ok());
    check!(c, fresh.next_offset().is_some());
    check!(c, fresh.consume(MAX_MESSAGE_SIZE, false).is_ok());
    check!(c, fresh.next_offset().is_some());
    check!(
        c,
        fresh.consume(MAX_MESSAGE_SIZE, false) == Err(RingFault::BadHeader)
    );

    // Breaking discards what waits and everything written until the sender
    // starts afresh, in a new epoch, where it left off consuming.
    check!(
        c,
        reader.next_offset() == Some(0) && reader.consume(4096, false).is_ok()
    );
    let at = reader.written();
    check!(
        c,
        at == footprint(4096) && reader.arrive(at, header + 8).is_ok()
    );
    let consumed = reader.consumed();
    let broken = reader.break_ring(RingFault::Misplaced);
    check!(
        c,
        broken.epoch == 0
            && broken.received == at
            && consumed == at
            && broken.discarded == 1
            && !broken.injected
    );
    check!(c, {
        let mut injected = RingReader::new(RING_SIZE);
        injected.break_ring(RingFault::Injected).injected
    });
    check!(c, reader.is_broken() && reader.next_offset().is_none());
    check!(
        c,
        reader.arrive(4096 + 64, header + 8) == Ok(Arrival::Discarded)
    );
    reader.start_afresh();
    check!(c, !reader.is_broken() && reader.epoch() == 1);
    check!(c, reader.written() == consumed && reader.pending() == 0);
    let resumed = RingWriter::resuming(RING_SIZE, reader.consumed(), reader.written());
    let r = resumed.and_then(|mut w| w.reserve(8));
    check!(
        c,
        r.is_some_and(|r| reader.arrive(r.offset, header + 8).is_ok())
    );
    check!(
        c,
        reader.next_offset().is_some() && reader.consume(8, false).is_ok()
    );
    check!(c, reader.written() == consumed + footprint(8));
});

/// One lock word in plain memory, for the home's hand-over logic; with
/// `stale_peeks`, every guess of it is wrong.
struct FakeLockWord(core::cell::Cell<u64>, bool);

impl crate::internal::locks::home::WordAccess for FakeLockWord {
    fn compare_swap(
        &self,
        _number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        let before = self.0.get();
        if before == expected.0 {
            self.0.set(new.0);
        }
        Ok(crate::internal::locks::word::LockWord(before))
    }

    fn peek(&self, _number: u32) -> crate::internal::locks::word::LockWord {
        let value = self.0.get();
        crate::internal::locks::word::LockWord(if self.1 { !value } else { value })
    }
}

/// The node keeping the locks of the hand-over tests; no waiter of theirs
/// is of it.
const HOME: u32 = 0;

/// A lock word that counts the compare-and-swaps reaching it.
struct CountedLockWord(FakeLockWord, core::cell::Cell<u32>);

impl crate::internal::locks::home::WordAccess for CountedLockWord {
    fn compare_swap(
        &self,
        number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        self.1.set(self.1.get() + 1);
        crate::internal::locks::home::WordAccess::compare_swap(&self.0, number, expected, new)
    }

    fn peek(&self, number: u32) -> crate::internal::locks::word::LockWord {
        crate::internal::locks::home::WordAccess::peek(&self.0, number)
    }
}

kunit_case!(lite_test_lock_kept_by_home, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved, WordAccess},
        word::LockWord,
    };
    let word = CountedLockWord(
        FakeLockWord(core::cell::Cell::new(0), false),
        Default::default(),
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // The home's own thread takes the free lock managed: one swap.
    let first = lock.reserve(&word, 0, r(HOME, 1));
    check!(
        c,
        matches!(first, Ok(Reserved::Granted(g)) if !g.owner_died && g.managed)
    );
    let Ok(Reserved::Granted(first)) = first else {
        return;
    };
    let kept_word = word.peek(0);
    check!(
        c,
        lock.is_managed() && kept_word.is_managed() && word.1.get() == 1
    );
    check!(c, kept_word.hold() == Some(first.word_hold()));
    // Released with nobody waiting, it stays managed and free; taking and
    // releasing it again reaches no word.
    check!(
        c,
        matches!(lock.release(&word, 0, first.word_hold(), false), Ok(None))
    );
    check!(c, lock.is_kept_free() && word.1.get() == 1);
    let mut hold = first.word_hold();
    for waiter in 2..5u64 {
        let again = lock.reserve(&word, 0, r(HOME, waiter));
        check!(
            c,
            matches!(again, Ok(Reserved::Granted(g)) if g.word_hold() != hold)
        );
        let Ok(Reserved::Granted(again)) = again else {
            return;
        };
        check!(c, !lock.is_kept_free());
        // A stale release changes nothing: the lock stays held.
        check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
        check!(c, !lock.is_kept_free() && lock.is_managed());
        hold = again.word_hold();
        check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
    }
    check!(
        c,
        lock.is_kept_free() && word.1.get() == 1 && word.peek(0) == kept_word
    );
    // A peer's taker fails on the managed word and asks the home: it gets
    // the lock unmanaged, named in the word, so its release is one swap.
    check!(c, !word.peek(0).is_free());
    let peer = lock.reserve(&word, 0, r(3, 7));
    check!(
        c,
        matches!(peer, Ok(Reserved::Granted(g)) if g.reservation == r(3, 7))
    );
    let Ok(Reserved::Granted(peer)) = peer else {
        return;
    };
    check!(c, !lock.is_managed() && !peer.managed);
    check!(c, word.peek(0) == LockWord::held(peer.word_hold(), false));
    // The home's thread waits behind the peer; as the last waiter it gets
    // the lock managed again.
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(HOME, 8)), Ok(Reserved::Queued))
    );
    let next = lock.release(&word, 0, peer.word_hold(), false);
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(HOME, 8))
    );
    let Ok(Some(next)) = next else {
        return;
    };
    check!(
        c,
        lock.is_managed() && !lock.is_kept_free() && lock.len() == 0
    );
    check!(c, next.managed);
    // A peer dying changes nothing for it; a peer that asks meanwhile
    // queues behind it and then gets the lock managed, and its release
    // with nobody waiting frees it.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(3)), Ok(None))
    );
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(4, 9)), Ok(Reserved::Queued))
    );
    let last = lock.release(&word, 0, next.word_hold(), false);
    check!(
        c,
        matches!(last, Ok(Some(g)) if g.reservation == r(4, 9) && g.managed)
    );
    if let Ok(Some(last)) = last {
        check!(c, lock.is_managed() && word.peek(0).is_managed());
        check!(
            c,
            matches!(lock.release(&word, 0, last.word_hold(), false), Ok(None))
        );
    }
    check!(c, word.peek(0) == LockWord::FREE && !lock.is_managed());
    // A hold of the home's node that ends with its owner dead (a grant its
    // waiter never took, passed on for a dead holder) leaves the lock
    // orphaned, not kept free, so the next taker is told.
    let taken = lock.reserve(&word, 0, r(HOME, 10));
    check!(
        c,
        matches!(taken, Ok(Reserved::Granted(_))) && lock.is_managed()
    );
    if let Ok(Reserved::Granted(taken)) = taken {
        check!(
            c,
            matches!(lock.release(&word, 0, taken.word_hold(), true), Ok(None))
        );
        check!(c, !lock.is_managed() && word.peek(0) == LockWord::ORPHANED);
    }
    let next = lock.reserve(&word, 0, r(HOME, 11));
    check!(c, matches!(next, Ok(Reserved::Granted(g)) if g.owner_died));
    // While it is kept free, a peer's release of an old hold or a peer's
    // death changes nothing.
    if let Ok(Reserved::Granted(next)) = next {
        check!(
            c,
            matches!(lock.release(&word, 0, next.word_hold(), false), Ok(None))
        );
    }
    check!(c, lock.is_kept_free());
    let kept = word.peek(0);
    check!(
        c,
        matches!(lock.release(&word, 0, peer.word_hold(), false), Ok(None))
    );
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(3)), Ok(None))
    );
    check!(c, lock.is_kept_free() && word.peek(0) == kept);
});

kunit_case!(lite_test_lock_hand_over, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let word = CountedLockWord(
        FakeLockWord(core::cell::Cell::new(0), true),
        Default::default(),
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // A free lock is granted at once, and the word names the holder.
    let granted = lock.reserve(&word, 0, r(2, 20));
    check!(
        c,
        matches!(granted, Ok(Reserved::Granted(g)) if g.reservation == r(2, 20) && !g.owner_died)
    );
    let Ok(Reserved::Granted(first)) = granted else {
        return;
    };
    check!(
        c,
        LockWord(word.0 .0.get()).hold() == Some(first.word_hold())
    );
    check!(c, !first.managed);
    // Taken: waiters queue in order of arrival, and the word says managed,
    // so the holder's own release fails.
    for waiter in [30u64, 10, 40] {
        check!(
            c,
            matches!(
                lock.reserve(&word, 0, r((waiter / 10) as u32, waiter)),
                Ok(Reserved::Queued)
            )
        );
    }
    check!(
        c,
        LockWord(word.0 .0.get()).is_managed() && lock.is_managed() && lock.len() == 3
    );
    let managed_word = word.0 .0.get();
    let swaps = word.1.get();
    // A stale release (not the current hold) changes nothing.
    let stale = Hold {
        node: NodeId::new(7),
        number: first.hold,
    };
    check!(c, matches!(lock.release(&word, 0, stale, false), Ok(None)));
    let mut hold = first.word_hold();
    for (i, expected) in [r(3, 30), r(1, 10), r(4, 40)].into_iter().enumerate() {
        let next = lock.release(&word, 0, hold, false);
        check!(
            c,
            matches!(next, Ok(Some(g)) if g.reservation == expected && !g.owner_died)
        );
        let Ok(Some(next)) = next else {
            return;
        };
        // The word does not change, also for the last waiter, and the grant
        // says so: its release needs no compare-and-swap.
        check!(c, lock.is_managed() && word.0 .0.get() == managed_word);
        // Others still wait behind all but the last.
        check!(
            c,
            next.managed && lock.len() == 2 - i && next.contended == (i < 2)
        );
        hold = next.word_hold();
    }
    // No hand-over reached the word.
    check!(c, word.1.get() == swaps);
    // Released with nobody waiting, the lock is free: one swap.
    check!(c, matches!(lock.release(&word, 0, hold, false), Ok(None)));
    check!(c, word.1.get() == swaps + 1);
    check!(c, word.0 .0.get() == 0 && !lock.is_managed());
    // A taker of the free lock without the home (hold 0) is named too.
    let fast = LockWord::held(
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    word.0 .0.set(fast.0);
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(6, 60)), Ok(Reserved::Queued))
    );
    check!(c, word.0 .0.get() == fast.managed().0);
    let next = lock.release(
        &word,
        0,
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(6, 60) && g.hold != 0)
    );
    if let Ok(Some(g)) = next {
        check!(c, g.managed && word.0 .0.get() == fast.managed().0);
    }
});

/// A lock word whose compare-and-swap, once armed, runs but reports an
/// error (its outcome unknown to the home), after which a taker without the
/// home takes the lock if the swap freed it.
struct UncertainLockWord(FakeLockWord, core::cell::Cell<bool>, u64);

impl crate::internal::locks::home::WordAccess for UncertainLockWord {
    fn compare_swap(
        &self,
        number: u32,
        expected: crate::internal::locks::word::LockWord,
        new: crate::internal::locks::word::LockWord,
    ) -> kernel::error::Result<crate::internal::locks::word::LockWord> {
        let before =
            crate::internal::locks::home::WordAccess::compare_swap(&self.0, number, expected, new)?;
        if self.1.replace(false) {
            if self.0 .0.get() == 0 {
                self.0 .0.set(self.2);
            }
            return Err(EIO);
        }
        Ok(before)
    }

    fn peek(&self, number: u32) -> crate::internal::locks::word::LockWord {
        crate::internal::locks::home::WordAccess::peek(&self.0, number)
    }
}

kunit_case!(lite_test_lock_freed_by_uncertain_swap, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let taker = LockWord::held(
        Hold {
            node: NodeId::new(5),
            number: 0,
        },
        false,
    );
    let word = UncertainLockWord(
        FakeLockWord(core::cell::Cell::new(0), false),
        Default::default(),
        taker.0,
    );
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // Node 3 gets the lock from node 2 managed, with nobody behind it.
    let first = lock.reserve(&word, 0, r(2, 20));
    let Ok(Reserved::Granted(first)) = first else {
        check!(c, false);
        return;
    };
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(3, 30)), Ok(Reserved::Queued))
    );
    let next = lock.release(&word, 0, first.word_hold(), false);
    let Ok(Some(next)) = next else {
        check!(c, false);
        return;
    };
    check!(c, next.managed && !next.contended);
    // Its release frees the word, but the home cannot tell, and node 5
    // takes the free lock before the home looks again: the home still
    // leaves the lock to it.
    word.1.set(true);
    check!(
        c,
        matches!(lock.release(&word, 0, next.word_hold(), false), Ok(None))
    );
    check!(c, !lock.is_managed() && word.0 .0.get() == taker.0);
});

kunit_case!(lite_test_lock_owner_died, |c| {
    use crate::internal::locks::{
        home::{Queue, Reservation, Reserved},
        word::{Hold, LockWord},
    };
    let word = FakeLockWord(core::cell::Cell::new(0), false);
    let r = |node, waiter| Reservation {
        node: NodeId::new(node),
        waiter,
    };
    let mut lock = Queue::new(NodeId::new(HOME));
    // Node 2 holds the lock; node 3 and node 2 again wait, then node 4.
    let dead = LockWord::held(
        Hold {
            node: NodeId::new(2),
            number: 0,
        },
        false,
    );
    word.0.set(dead.0);
    for (node, waiter) in [(3u32, 1u64), (2, 2), (4, 3)] {
        check!(
            c,
            matches!(
                lock.reserve(&word, 0, r(node, waiter)),
                Ok(Reserved::Queued)
            )
        );
    }
    // Node 2 dies: its waiter leaves the queue, and its hold goes to the
    // first waiter of a live node, told that the owner died.
    let next = lock.node_gone(&word, 0, NodeId::new(2));
    check!(
        c,
        matches!(next, Ok(Some(g)) if g.reservation == r(3, 1) && g.owner_died)
    );
    let Ok(Some(next)) = next else {
        return;
    };
    check!(c, lock.len() == 1 && lock.is_managed());
    // A node holding nothing dies: nothing changes.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(9)), Ok(None))
    );
    // The new holder releases normally: node 4 is told nothing, and holds
    // the lock managed.
    let last = lock.release(&word, 0, next.word_hold(), false);
    check!(
        c,
        matches!(last, Ok(Some(g)) if g.reservation == r(4, 3) && !g.owner_died)
    );
    let Ok(Some(last)) = last else {
        return;
    };
    check!(
        c,
        last.managed && lock.is_managed() && LockWord(word.0.get()).is_managed()
    );
    // Node 4 dies holding it with nobody waiting: the lock is orphaned, and
    // its next taker is told.
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(4)), Ok(None))
    );
    check!(c, word.0.get() == LockWord::ORPHANED.0);
    check!(c, LockWord(word.0.get()).is_free());
    let taken = lock.reserve(&word, 0, r(5, 4));
    check!(c, matches!(taken, Ok(Reserved::Granted(g)) if g.owner_died));
    // Once released, the lock is plainly free again.
    if let Ok(Reserved::Granted(g)) = taken {
        check!(
            c,
            matches!(lock.release(&word, 0, g.word_hold(), false), Ok(None))
        );
    }
    check!(c, word.0.get() == LockWord::FREE.0);
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(5, 5)), Ok(Reserved::Granted(g)) if !g.owner_died)
    );
    // The holder of a managed lock dies with its waiters all gone too: the
    // lock is orphaned.
    check!(
        c,
        matches!(lock.reserve(&word, 0, r(6, 6)), Ok(Reserved::Queued))
    );
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(6)), Ok(None))
    );
    check!(c, lock.is_managed() && lock.len() == 0);
    let hold = LockWord(word.0.get()).hold();
    check!(c, hold.is_some_and(|h| h.node == NodeId::new(5)));
    check!(
        c,
        matches!(lock.node_gone(&word, 0, NodeId::new(5)), Ok(None))
    );
    check!(
        c,
        word.0.get() == LockWord::ORPHANED.0 && !lock.is_managed()
    );
});

kunit_case!(lite_test_mapping_moves, |c| {
    use crate::internal::sharing::Mappings;
    let mut mappings = Mappings::new();
    let before = mappings.moves();
    check!(c, !mappings.moved_since(NodeId::new(2), 7, before));
    // A mapping whose chunk table was read before a move is refused; other
    // LMRs are not affected.
    mappings.note_move(NodeId::new(2), 7);
    check!(c, mappings.moved_since(NodeId::new(2), 7, before));
    check!(c, !mappings.moved_since(NodeId::new(2), 8, before));
    check!(c, !mappings.moved_since(NodeId::new(3), 7, before));
    // One read after the move is fine.
    let after = mappings.moves();
    check!(c, !mappings.moved_since(NodeId::new(2), 7, after));
    // Too many moves to remember: every mapping begun before is refused.
    for lmr_id in 100..400u64 {
        mappings.note_move(NodeId::new(3), lmr_id);
    }
    check!(c, mappings.moved_since(NodeId::new(2), 8, after));
    let now = mappings.moves();
    mappings.note_move(NodeId::new(3), 1);
    check!(c, !mappings.moved_since(NodeId::new(2), 8, now));
    check!(c, mappings.moved_since(NodeId::new(3), 1, now));
});

kunit_case!(lite_test_barrier_reuse, |c| {
    // Three nodes run 100 barrier rounds; each only learns the others'
    // latest round, possibly late or repeated: a node may leave round r
    // once all three reached it, and never before.
    const NODES: usize = 3;
    // `seen[viewer][node]`: the latest round `viewer` knows `node` reached.
    let mut seen = [[0u64; NODES]; NODES];
    for round in 1u64..=100 {
        for node in 0..NODES {
            for view in seen.iter_mut() {
                // Maximum of what arrives: a stale repeat changes nothing.
                view[node] = view[node].max(round).max(round - 1);
            }
            // Only the last node's arrival completes the round, for anyone.
            let complete = seen
                .iter()
                .filter(|view| nodes_reached(&view[..], round) == NODES)
                .count();
            check!(c, complete == 0 || node == NODES - 1);
        }
        for view in &seen {
            check!(c, nodes_reached(view, round) == NODES);
            check!(c, nodes_reached(view, round + 1) == 0);
        }
    }
});

kunit_case!(lite_test_qos_decisions, |c| {
    use crate::internal::qos::admission::{decide, Decision, Params};
    let on = Params {
        enabled: true,
        window_us: 200,
        delay_us: 50,
        max_delay_us: 1000,
    };
    let off = Params {
        enabled: false,
        ..on
    };
    // Idle: go at once.
    check!(c, decide(&on, 0, 10_000, 0) == Decision::Go);
    // High-priority work in flight or recent: wait one delay.
    check!(c, decide(&on, 1, 10_000, 0) == Decision::Wait(50));
    check!(c, decide(&on, 0, 199, 0) == Decision::Wait(50));
    check!(c, decide(&on, 0, 200, 0) == Decision::Go);
    // Never longer than the maximum in all.
    check!(c, decide(&on, 3, 0, 980) == Decision::Wait(20));
    check!(c, decide(&on, 3, 0, 1000) == Decision::Go);
    // Switched off: never wait.
    check!(c, decide(&off, 5, 0, 0) == Decision::Go);
});

kunit_case!(lite_test_op_latency_buckets, |c| {
    use crate::internal::qos::op_stats::{latency_bucket, LATENCY_BUCKETS};
    check!(c, latency_bucket(0) == 0);
    check!(c, latency_bucket(1) == 0);
    check!(c, latency_bucket(2) == 1);
    check!(c, latency_bucket(3) == 2);
    check!(c, latency_bucket(4) == 2);
    check!(c, latency_bucket(5) == 3);
    check!(c, latency_bucket(1 << 20) == 20);
    check!(c, latency_bucket((1 << 20) + 1) == LATENCY_BUCKETS - 1);
    check!(c, latency_bucket(u64::MAX) == LATENCY_BUCKETS - 1);
});

kunit_case!(lite_test_sync_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    let mut old = 0u64;
    let mut lock = LiteLock::from(crate::internal::locks::lockers::LockId {
        home: NodeId::new(1),
        number: 0,
    });
    // SAFETY: `old` and `lock` are valid for the calls.
    unsafe {
        check!(c, liteapi_rdma_fetch_and_add(1, &mut old, 1, 0) == enotconn);
        check!(
            c,
            liteapi_rdma_compare_and_swp(1, &mut old, 0, 1, 0) == enotconn
        );
        check!(c, liteapi_create_lock(1, &mut lock) == enotconn);
        check!(c, liteapi_ask_lock(1, 0, &mut lock) == enotconn);
        check!(c, liteapi_lock(&lock) == enotconn);
        check!(c, liteapi_unlock(&lock) == enotconn);
        check!(
            c,
            liteapi_rdma_fetch_and_add(1, core::ptr::null_mut(), 1, 0) < 0
        );
        check!(c, liteapi_lock(core::ptr::null()) < 0);
    }
    check!(c, liteapi_set_priority(1) == enotconn);
});

kunit_case!(lite_test_quota_commands, |c| {
    let parse = |line: &str| Command::parse(line.as_bytes());
    let mut changes = [None; Resource::COUNT];
    changes[Resource::RemoteMemory as usize] = Some(1 << 20);
    changes[Resource::Locks as usize] = Some(UNLIMITED);
    check!(
        c,
        parse("limit uid 1000 remote_memory=1048576 locks=unlimited\n")
            == Ok(Command::SetUser {
                uid: 1000,
                changes: Changes(changes),
            })
    );
    check!(
        c,
        parse("limit default lmrs=5")
            == Ok(Command::SetDefaults(Changes({
                let mut only = [None; Resource::COUNT];
                only[Resource::Lmrs as usize] = Some(5);
                only
            })))
    );
    check!(
        c,
        parse("limit uid 7 default") == Ok(Command::ResetUser { uid: 7 })
    );
    check!(
        c,
        parse("limit node default remote_memory=9") == Ok(Command::SetNodeDefault(9))
    );
    check!(
        c,
        parse("limit node 3 remote_memory=unlimited")
            == Ok(Command::SetNode {
                node: NodeId::new(3),
                limit: UNLIMITED
            })
    );
    check!(
        c,
        parse("limit node 3 default")
            == Ok(Command::ResetNode {
                node: NodeId::new(3)
            })
    );
    // Malformed lines change nothing.
    for bad in [
        "",
        "limit",
        "limit uid",
        "limit uid 5",
        "limit uid x lmrs=1",
        "limit uid 4294967296 lmrs=1",
        "limit uid 5 lmrs=1 lmrs=2",
        "limit uid 5 lmrs=",
        "limit uid 5 lmrs=-1",
        "limit uid 5 lmrs=18446744073709551615",
        "limit uid 5 lmrs=99999999999999999999",
        "limit uid 5 bogus=1",
        "limit uid 5 default extra",
        "limit node 0 remote_memory=1",
        "limit node 64 remote_memory=1",
        "limit node 2 lmrs=1",
        "limit node default",
        "quota uid 5 lmrs=1",
    ] {
        check!(c, parse(bad) == Err(EINVAL));
    }
});

kunit_case!(lite_test_quota_charges, |c| {
    let Ok(quotas) = Quotas::new(1 << 20) else {
        check!(c, false);
        return;
    };
    let user = Payer::User(1000);
    let lmr = |bytes| Amounts::of(Resource::RemoteMemory, bytes).with(Resource::Lmrs, 1);
    let set = |line: &str| Command::parse(line.as_bytes()).and_then(|cmd| quotas.apply(cmd));
    check!(c, set("limit uid 1000 remote_memory=100 lmrs=2").is_ok());
    let first = quotas.charge(user, lmr(60));
    check!(c, first.is_ok());
    // Beyond the bytes: refused, and nothing is charged.
    check!(
        c,
        quotas.charge(user, lmr(41)).err() == Some(errno::EDQUOT())
    );
    check!(c, quotas.usage(1000) == lmr(60));
    let second = quotas.charge(user, lmr(40));
    check!(c, second.is_ok());
    // Beyond the count.
    check!(
        c,
        quotas.charge(user, lmr(0)).err() == Some(errno::EDQUOT())
    );
    // Another user, and kernel callers, are not affected.
    let other = quotas.charge(Payer::User(1001), lmr(1 << 20));
    check!(c, other.is_ok());
    check!(c, quotas.charge(Payer::Kernel, lmr(u64::MAX)).is_ok());
    // A new user's refused first charge leaves no trace.
    check!(
        c,
        quotas.charge(Payer::User(1002), lmr(2 << 30)).err() == Some(errno::EDQUOT())
    );
    // Dropping a charge gives it back.
    drop(first);
    check!(c, quotas.usage(1000) == lmr(40));
    let mut text = [0u8; 1024];
    let mut out = TextBuffer::new(&mut text);
    check!(c, quotas.write_text(&mut out).is_ok());
    let len = out.len();
    let text = &text[..len];
    let has = |line: &[u8]| text.windows(line.len()).any(|w| w == line);
    check!(
        c,
        has(concat!(
            "limit default remote_memory=1073741824 pinned_memory=unlimited lmrs=65536 ",
            "names=4096 rpc_ports=1024 locks=4096\n"
        )
        .as_bytes())
    );
    check!(
        c,
        has(b"limit uid 1000 remote_memory=100 pinned_memory=unlimited lmrs=2 names=4096")
    );
    check!(
        c,
        has(
            b"usage uid 1000 remote_memory=40 pinned_memory=0 lmrs=1 names=0 rpc_ports=0 locks=0\n"
        )
    );
    check!(c, has(b"usage uid 1001 remote_memory=1048576 "));
    check!(c, has(b"limit node default remote_memory=1048576\n"));
    check!(c, !has(b"uid 1002"));
    // Back to the defaults: the larger default allows more.
    check!(c, set("limit uid 1000 default").is_ok());
    check!(c, quotas.charge(user, lmr(1000)).is_ok());
    // A lowered default refuses further charges only.
    check!(c, set("limit default lmrs=1").is_ok());
    check!(
        c,
        quotas.charge(Payer::User(1001), lmr(0)).err() == Some(errno::EDQUOT())
    );
    check!(c, quotas.usage(1001) == lmr(1 << 20));
    drop(other);
    drop(second);
    check!(
        c,
        quotas.usage(1000) == Amounts::ZERO && quotas.usage(1001) == Amounts::ZERO
    );
    // A user back on the defaults and holding nothing is forgotten.
    let mut text = [0u8; 1024];
    let mut out = TextBuffer::new(&mut text);
    check!(c, quotas.write_text(&mut out).is_ok());
    let len = out.len();
    check!(c, !text[..len].windows(4).any(|w| w == b"uid "));
    // Node limits.
    check!(c, quotas.node_limit(NodeId::new(5)) == 1 << 20);
    check!(c, set("limit node 5 remote_memory=7").is_ok());
    check!(
        c,
        quotas.node_limit(NodeId::new(5)) == 7 && quotas.node_limit(NodeId::new(6)) == 1 << 20
    );
    check!(c, set("limit node 5 default").is_ok());
    check!(c, quotas.node_limit(NodeId::new(5)) == 1 << 20);
});

kunit_case!(lite_test_remote_key_tables, |c| {
    let Ok(keys) = RemoteKeys::new() else {
        check!(c, false);
        return;
    };
    // Before the peer's first table, accesses wait; a gone connection ends
    // the wait.
    check!(c, keys.wait_ready(|| true) == Err(EIO));
    // A table in two parts is in force once its last part arrived.
    check!(
        c,
        keys.receive(&[(0x300, 0x301), (0x100, 0x101)], true, false)
            .is_ok()
    );
    check!(c, keys.wait_ready(|| true) == Err(EIO));
    check!(c, keys.post_translated((8, 0x100), |r| r) == (8, 0x100));
    check!(c, keys.receive(&[(0x200, 0x201)], false, true).is_ok());
    check!(c, keys.wait_ready(|| true).is_ok());
    check!(c, keys.post_translated((8, 0x100), |r| r) == (8, 0x101));
    check!(c, keys.post_translated((9, 0x200), |r| r) == (9, 0x201));
    check!(c, keys.post_translated((0, 0x300), |r| r) == (0, 0x301));
    // Keys never replaced go out as given.
    check!(c, keys.post_translated((0, 0x150), |r| r) == (0, 0x150));
    // A new table replaces the old one whole.
    check!(c, keys.receive(&[(0x200, 0x202)], true, true).is_ok());
    check!(c, keys.post_translated((0, 0x100), |r| r) == (0, 0x100));
    check!(c, keys.post_translated((0, 0x200), |r| r) == (0, 0x202));
    // An empty table makes every key go out as given.
    check!(c, keys.receive(&[], true, true).is_ok());
    check!(c, keys.post_translated((0, 0x200), |r| r) == (0, 0x200));

    // Parts travel as control messages: identity high, current key low.
    let frame = part_frame(
        5,
        &[(1, 2), (u32::MAX, 0x8000_0000)],
        FIRST_PART | LAST_PART,
    );
    let decoded = KeysMessage::from_frame(&Frame::decode(&frame.encode()));
    check!(
        c,
        decoded
            == Some(KeysMessage::KeyTablePart {
                request_id: 5,
                pair0: (1 << 32) | 2,
                pair1: (u64::from(u32::MAX) << 32) | 0x8000_0000,
                pair2: 0,
                pair3: 0,
                pair4: 0,
                count: 2,
                flags: FIRST_PART | LAST_PART,
            })
    );
    // More pairs than a part holds are cut, never read past.
    let long = [(7, 8); 9];
    let frame = part_frame(0, &long, 0);
    check!(
        c,
        matches!(
            KeysMessage::from_frame(&frame),
            Some(KeysMessage::KeyTablePart { count: 5, .. })
        )
    );
});
