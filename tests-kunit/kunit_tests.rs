// SPDX-License-Identifier: GPL-2.0

//! Bodies of LITE's KUnit cases (suites in `lite_kunit.c`).
//!
//! Each `lite_test_*` function checks one unit of LITE's internal logic and
//! reports every failed check to KUnit with its location and expression.

use core::ffi::c_char;
use kernel::bindings;

use crate::internal::{
    chunk::{self, check_range, chunk_count, chunk_len, pieces, Piece, CHUNK_SIZE, MAX_LMR_SIZE},
    cm_wire::{self, Endpoint, Header, Hello, Kind, Message, WireError, HEADER_LEN, MAX_FRAME_LEN},
    control_wire::{ControlMessage, MESSAGE_LEN},
    handle, nodes_reached, parse_ipv4,
    slot_table::SlotTable,
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

kunit_case!(lite_test_chunk_count_and_len, |c| {
    check!(c, chunk_count(1) == 1);
    check!(c, chunk_count(CHUNK_SIZE) == 1);
    check!(c, chunk_count(CHUNK_SIZE + 1) == 2);
    check!(c, chunk_count(3 * CHUNK_SIZE + 5) == 4);
    check!(c, chunk_count(MAX_LMR_SIZE) == (MAX_LMR_SIZE / CHUNK_SIZE) as usize);
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
    let nodes = [2u32, 3, 5];
    check!(c, chunk::spread_target(&nodes, 0) == Some(2));
    check!(c, chunk::spread_target(&nodes, 1) == Some(3));
    check!(c, chunk::spread_target(&nodes, 2) == Some(5));
    check!(c, chunk::spread_target(&nodes, 3) == Some(2));
    check!(c, chunk::spread_target(&[], 0).is_none());
});

kunit_case!(lite_test_handle_round_trip, |c| {
    for (index, generation) in [(0usize, 1u32), (1, 2), (4095, 77), (handle::MAX_INDEX, handle::MAX_GENERATION)] {
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
    check!(c, handle::decode(a2).map(|(i, _)| i) == handle::decode(a).map(|(i, _)| i));
    check!(c, table.get(a).is_none());
    check!(c, table.get(a2) == Some(&30));
    check!(c, table.get(0).is_none());
    check!(c, table.get(u64::MAX).is_none());
});

kunit_case!(lite_test_control_wire_round_trip, |c| {
    let messages = [
        ControlMessage::AllocRequest {
            request_id: 7,
            size: CHUNK_SIZE,
        },
        ControlMessage::AllocReply {
            request_id: u64::MAX,
            status: -12,
            chunk_id: 0x1234_0000_0001,
            addr: 0xffff_8880_0000_0000,
            rkey: 0xdead_beef,
        },
        ControlMessage::FreeRequest {
            request_id: 0,
            chunk_id: 3,
        },
        ControlMessage::FreeReply {
            request_id: 9,
            status: 0,
        },
        ControlMessage::Barrier {
            round: 100,
            reply_wanted: true,
        },
    ];
    for message in messages {
        let bytes = message.encode();
        check!(c, bytes.len() == MESSAGE_LEN);
        check!(c, ControlMessage::decode(&bytes) == Ok(message));
    }
    let mut bytes = ControlMessage::Barrier {
        round: 1,
        reply_wanted: false,
    }
    .encode();
    bytes[0] = 99;
    check!(c, ControlMessage::decode(&bytes).is_err());
    check!(c, ControlMessage::FreeReply { request_id: 5, status: 0 }.reply_id() == Some(5));
    check!(
        c,
        ControlMessage::Barrier {
            round: 5,
            reply_wanted: false
        }
        .reply_id()
        .is_none()
    );
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
        }),
        Message::Welcome { node_id: 2 },
        Message::Prepare { peer: 1 },
        Message::QpInfo(endpoint),
        Message::Connect(endpoint),
        Message::Connected { peer: 1, status: -110 },
        Message::JoinDone { total_nodes: 3 },
        Message::Failure { errno: -28 },
    ];
    for message in messages {
        let mut frame = [0u8; MAX_FRAME_LEN];
        let len = message.encode(&mut frame);
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&frame[..HEADER_LEN]);
        let decoded = Header::decode(&header).and_then(|h| Message::decode(h, &frame[HEADER_LEN..len]));
        check!(c, decoded == Ok(message));
        check!(c, len == HEADER_LEN + message.kind().payload_len());
    }
});

kunit_case!(lite_test_cm_wire_rejects_bad_frames, |c| {
    let mut frame = [0u8; MAX_FRAME_LEN];
    Message::Welcome { node_id: 1 }.encode(&mut frame);
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
    check!(c, Message::decode(short, &[0u8; 4]) == Err(WireError::Truncated));
    check!(c, cm_wire::MAGIC == u32::from_le_bytes(*b"LITE"));
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

kunit_case!(lite_test_barrier_counting, |c| {
    let seen = [0u64, 3, 2, 3, 0];
    check!(c, nodes_reached(&seen, 1) == 3);
    check!(c, nodes_reached(&seen, 3) == 2);
    check!(c, nodes_reached(&seen, 4) == 0);
    check!(c, nodes_reached(&seen, 0) == 5);
});

kunit_case!(lite_test_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    check!(c, liteapi_get_node_id() == enotconn);
    check!(c, liteapi_get_total_node() == enotconn);
    check!(c, liteapi_alloc_remote_mem(1, 4096, 0, 0) == i64::from(enotconn));
    check!(c, liteapi_free(1) == enotconn);
    check!(c, liteapi_dist_barrier(2) == enotconn);
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is a valid 8-byte buffer for both calls.
    unsafe {
        check!(c, liteapi_rdma_write_offset(1, buf.as_ptr().cast(), 8, 0, 0, 0) == enotconn);
        check!(c, liteapi_rdma_read_offset(1, buf.as_mut_ptr().cast(), 8, 0, 0, 0) == enotconn);
    }
    // SAFETY: The strings are NUL-terminated; null is allowed.
    unsafe {
        check!(c, liteapi_establish_conn(core::ptr::null(), 18500, 1) == -(bindings::EINVAL as i32));
        check!(c, liteapi_establish_conn(c"not-an-ip".as_ptr(), 18500, 1) == -(bindings::EINVAL as i32));
        check!(c, liteapi_establish_conn(c"10.0.0.1".as_ptr(), 0, 1) == -(bindings::EINVAL as i32));
        check!(c, liteapi_establish_conn(c"10.0.0.1".as_ptr(), 70000, 1) == -(bindings::EINVAL as i32));
        // No RDMA device exists while KUnit runs at boot.
        check!(c, liteapi_establish_conn(c"10.0.0.1".as_ptr(), 18500, 1) == -(bindings::ENODEV as i32));
    }
    check!(c, liteapi_get_node_id() == enotconn);
});
