// SPDX-License-Identifier: GPL-2.0

//! Chunking of LMRs: chunk counts and lengths, range checks, access and
//! copy pieces, chunk geometry and descriptors, and the statistics layout.

use super::Check;
use crate::internal::memory::chunk::{
    self, check_range, chunk_count, chunk_len, copy_pieces, pieces, pieces_in, CopyPiece, Geometry,
    Piece, CHUNK_SIZE, MAX_LMR_SIZE,
};
use crate::internal::node_id::NodeId;
use crate::internal::qos::stats::{Stats, STATS_LEN};
use crate::internal::sharing::names::{table_len, ChunkDescriptor, DESCRIPTOR_LEN};
use kernel::bindings;

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
