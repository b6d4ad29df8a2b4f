// SPDX-License-Identifier: GPL-2.0

//! The RPC ring protocol: immediates, request headers, ring space,
//! acknowledgements on demand, and writers interleaving in one ring.

use super::Check;
use kernel::bindings;

kunit_case!(lite_test_rpc_immediates, |c| {
    use crate::internal::rpc::ring_protocol::{
        next_generation, Imm, MAX_PORTS, PORTS, RING_ALIGN, RING_SIZE,
    };
    // The last application port, and the last kernel handler port above.
    for port in [MAX_PORTS - 1, PORTS - 1] {
        let request = Imm::Request {
            port,
            offset: RING_SIZE - RING_ALIGN,
        };
        check!(c, request.encode().and_then(Imm::decode) == Some(request));
    }
    let request = Imm::Request {
        port: PORTS - 1,
        offset: RING_SIZE - RING_ALIGN,
    };
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
    check!(c, req >> 31 == 1 && rep >> 30 == 0b01);
    // Out of range fields are refused, not truncated.
    check!(
        c,
        Imm::Request {
            port: PORTS,
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
        Imm::decode(0).is_none() && Imm::decode(0x8000_0000 | (PORTS << 24)).is_none()
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
