use std::collections::HashMap;
use std::sync::Arc;

use super::*;

fn geometry(data_bytes: u64, max_records: u64) -> Geometry {
    Geometry {
        data_bytes,
        max_records,
    }
}

fn memory_log(data_bytes: u64, max_records: u64) -> Log {
    let g = geometry(data_bytes, max_records);
    Log::create(Arc::new(MemStore::new(g).unwrap()), g).unwrap()
}

/// A record of `len` bytes (at least 1) that depends on `id`.
fn record(id: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| mix(id << 32 | i) as u8).collect()
}

/// Sizes from 1 B to 64 KiB, several of each order of magnitude.
fn size(id: u64) -> usize {
    match id % 7 {
        0 => 1,
        1 => 7,
        2 => 64 << 10,
        3 => 4096,
        4 => 65535,
        _ => 1 + (mix(id) % 3000) as usize,
    }
}

/// Every committed record, by slot.
fn contents(log: &Log) -> (HashMap<u64, Vec<u8>>, ScanSummary) {
    let mut seen = HashMap::new();
    let summary = log
        .scan(0, |slot, record| {
            assert!(seen.insert(slot, record.to_vec()).is_none());
        })
        .unwrap();
    (seen, summary)
}

/// Appends from `writers` threads at once, each its own ids; returns
/// every record appended by its id.
fn append_concurrently(log: &Log, writers: u64, each: u64) -> HashMap<u64, Vec<u8>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                scope.spawn(move || {
                    (0..each)
                        .map(|i| {
                            let id = w * 1000 + i;
                            let rec = record(id, size(id));
                            log.append(&rec).unwrap();
                            (id, rec)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

fn assert_each_once(log: &Log, appended: &HashMap<u64, Vec<u8>>) -> ScanSummary {
    let (seen, summary) = contents(log);
    let mut found: Vec<&Vec<u8>> = seen.values().collect();
    let mut wanted: Vec<&Vec<u8>> = appended.values().collect();
    found.sort();
    wanted.sort();
    assert_eq!(found, wanted, "every record exactly once and intact");
    summary
}

#[test]
fn concurrent_appends_of_1_byte_to_64_kib_are_each_read_back_once() {
    let log = memory_log(8 << 20, 1024);
    let appended = append_concurrently(&log, 4, 80);
    let summary = assert_each_once(&log, &appended);
    assert_eq!(
        (summary.committed, summary.uncommitted, summary.corrupt),
        (320, 0, 0)
    );
    assert_eq!(log.end().unwrap(), 320);
    assert!(
        log.data_used().unwrap() > 4 << 20,
        "more than one 4 MiB chunk used"
    );
}

#[test]
fn a_writer_that_never_commits_is_skipped_and_harms_nobody() {
    let log = memory_log(4 << 20, 256);
    log.append(&record(1, 100)).unwrap();
    // Dies after reserving and writing half of its record.
    let stalled = log.reserve(64 << 10).unwrap();
    log.fill(&stalled, &record(2, 32 << 10)).unwrap();
    let appended = append_concurrently(&log, 3, 20);
    assert_eq!(
        log.slot_state(stalled.slot).unwrap(),
        SlotState::Uncommitted
    );
    let (seen, summary) = contents(&log);
    assert_eq!((summary.committed, summary.uncommitted), (61, 1));
    assert!(!seen.contains_key(&stalled.slot));
    assert_eq!(seen[&0], record(1, 100));
    for rec in appended.values() {
        assert_eq!(seen.values().filter(|r| *r == rec).count(), 1);
    }
    // The checkpoint stops at the stalled slot until it is abandoned.
    assert_eq!(log.checkpoint().unwrap(), stalled.slot);
    assert_eq!(
        log.truncate(stalled.slot + 1).unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );
    assert_eq!(log.abandon_uncommitted(u64::MAX).unwrap(), 1);
    assert_eq!(log.slot_state(stalled.slot).unwrap(), SlotState::Abandoned);
    assert_eq!(log.checkpoint().unwrap(), 62);
}

#[test]
fn checkpoint_and_truncate_move_readers_forward() {
    let log = memory_log(1 << 20, 64);
    for id in 0..10 {
        log.append(&record(id, 50)).unwrap();
    }
    assert_eq!(log.checkpoint_position().unwrap(), 0);
    assert_eq!(log.checkpoint().unwrap(), 10);
    assert_eq!(log.truncate(4).unwrap(), 4);
    // The head never moves back.
    assert_eq!(log.truncate(2).unwrap(), 4);
    assert_eq!(log.head().unwrap(), 4);
    let (seen, summary) = contents(&log);
    assert_eq!((summary.start, summary.end, summary.committed), (4, 10, 6));
    assert_eq!(seen[&4], record(4, 50));
    assert_eq!(
        log.truncate(11).unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );
}

#[test]
fn a_full_log_refuses_appends_with_enospc() {
    let log = memory_log(1024, 8);
    for id in 0..4 {
        log.append(&record(id, 256)).unwrap();
    }
    assert_eq!(
        log.append(&[1]).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC)
    );
    assert_eq!(
        log.append(&[1]).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC)
    );
    // The slot the failed append got was marked, so checkpoints pass it.
    assert_eq!(log.slot_state(4).unwrap(), SlotState::Abandoned);
    assert_eq!(log.checkpoint().unwrap(), 5);

    let log = memory_log(1 << 20, 3);
    for id in 0..3 {
        log.append(&record(id, 8)).unwrap();
    }
    assert_eq!(
        log.append(&[1]).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC)
    );
    assert_eq!(log.end().unwrap(), 3);
    let (_, summary) = contents(&log);
    assert_eq!(summary.committed, 3);

    let log = memory_log(64, 8);
    let too_big = log.append(&[0; 72]).unwrap_err();
    assert_eq!(too_big.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(
        log.end().unwrap(),
        0,
        "nothing reserved for a record that can never fit"
    );
}

#[test]
fn bad_sizes_are_einval() {
    let log = memory_log(4 << 20, 8);
    for len in [0, MAX_RECORD_SIZE + 1] {
        let err = log.append(&vec![0; len]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{len} bytes");
    }
    let reservation = log.reserve(10).unwrap();
    let einval = Some(libc::EINVAL);
    assert_eq!(
        log.fill(&reservation, &[0; 11]).unwrap_err().raw_os_error(),
        einval
    );
    assert_eq!(
        log.commit(&reservation, &[0; 9])
            .unwrap_err()
            .raw_os_error(),
        einval
    );
    for bad in [
        geometry(0, 8),
        geometry(12, 8),
        geometry(64, 0),
        geometry(64, MAX_RECORDS + 1),
    ] {
        assert_eq!(MemStore::new(bad).unwrap_err().raw_os_error(), einval);
    }
}

#[test]
fn torn_entries_and_damaged_records_are_never_delivered() {
    let g = geometry(4096, 16);
    let store = Arc::new(MemStore::new(g).unwrap());
    let log = Log::create(Arc::clone(&store) as Arc<dyn LogStore>, g).unwrap();
    let rec = record(9, 40);
    let good = log.append(&rec).unwrap();
    let r = log.reserve(40).unwrap();
    log.fill(&r, &rec).unwrap();
    // Half an entry: the offset and length arrived, the seal did not.
    let entry = committed_entry(r.slot, r.offset, 40, checksum(&rec));
    store
        .write(Area::Index, entry_offset(r.slot), &entry[..16])
        .unwrap();
    assert_eq!(log.slot_state(r.slot).unwrap(), SlotState::Uncommitted);
    // An entry copied to another slot does not count there either.
    let other = log.reserve(40).unwrap();
    store
        .write(Area::Index, entry_offset(other.slot), &entry)
        .unwrap();
    assert_eq!(log.slot_state(other.slot).unwrap(), SlotState::Uncommitted);
    // A committed record damaged afterwards is reported, not delivered.
    store.write(Area::Data, 3, &[0xff]).unwrap();
    let (seen, summary) = contents(&log);
    assert!(seen.is_empty());
    assert_eq!((summary.corrupt, summary.uncommitted), (1, 2));
    // A tailer skips it too, counts it, and moves past it.
    let mut tailer = Tailer::new(good);
    assert_eq!(tailer.poll(&log, |_, _| panic!("corrupt")).unwrap(), 0);
    tailer.poll(&log, |_, _| panic!("corrupt")).unwrap();
    assert_eq!((tailer.corrupt(), tailer.position()), (1, good + 1));
}

#[test]
fn a_tailer_hands_over_each_record_once_and_waits_for_slow_writers() {
    let log = memory_log(1 << 20, 64);
    let mut tailer = Tailer::new(0);
    let mut got = Vec::new();
    log.append(b"first").unwrap();
    let slow = log.reserve(4).unwrap();
    log.append(b"third").unwrap();
    let n = tailer
        .poll(&log, |slot, r| got.push((slot, r.to_vec())))
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(tailer.position(), 1, "stops before the uncommitted slot");
    log.fill(&slow, b"slow").unwrap();
    log.commit(&slow, b"slow").unwrap();
    log.append(b"fourth").unwrap();
    tailer
        .poll(&log, |slot, r| got.push((slot, r.to_vec())))
        .unwrap();
    assert_eq!(tailer.position(), 4);
    assert_eq!(tailer.poll(&log, |_, _| panic!("nothing new")).unwrap(), 0);
    let want: Vec<(u64, Vec<u8>)> = [(0, "first"), (2, "third"), (1, "slow"), (3, "fourth")]
        .iter()
        .map(|(s, r)| (*s, r.as_bytes().to_vec()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn open_reads_the_geometry_and_refuses_what_is_no_log() {
    let g = geometry(1 << 16, 32);
    let store: Arc<dyn LogStore> = Arc::new(MemStore::new(g).unwrap());
    assert_eq!(
        Log::open(Arc::clone(&store)).unwrap_err().raw_os_error(),
        Some(libc::EPROTO)
    );
    let writer = Log::create(Arc::clone(&store), g).unwrap();
    writer.append(b"hello").unwrap();
    let reader = Log::open(store).unwrap();
    assert_eq!(reader.geometry(), g);
    assert_eq!(contents(&reader).0[&0], b"hello");
}

#[test]
fn the_tcp_log_server_serves_concurrent_clients() {
    let g = geometry(4 << 20, 1024);
    let memory = Arc::new(MemStore::new(g).unwrap());
    Log::create(Arc::clone(&memory) as Arc<dyn LogStore>, g).unwrap();
    let server = LogServer::start("127.0.0.1:0", memory).unwrap();
    let client = |_| Log::open(Arc::new(TcpStore::connect(server.local_addr()).unwrap())).unwrap();
    let logs: Vec<Log> = (0..3).map(client).collect();
    let appended: HashMap<u64, Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(c, log)| scope.spawn(move || append_concurrently(log, 2, 15 + c as u64)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    // Each client's ids overlap; compare the multiset of records instead.
    let (seen, summary) = contents(&logs[0]);
    assert_eq!(summary.committed, 2 * (15 + 16 + 17));
    for rec in appended.values() {
        assert!(seen.values().any(|r| r == rec));
    }
    // A stalled writer over TCP is skipped like any other.
    let stalled = logs[1].reserve(100).unwrap();
    assert_eq!(
        logs[2].slot_state(stalled.slot).unwrap(),
        SlotState::Uncommitted
    );
    // Errors cross the connection as errnos.
    let store = TcpStore::connect(server.local_addr()).unwrap();
    let mut buf = [0u8; 16];
    let err = store.read(Area::Data, (4 << 20) - 8, &mut buf).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    store.write(Area::Data, 0, &[7; 8]).unwrap();
    store.read(Area::Data, 0, &mut buf[..8]).unwrap();
    assert_eq!(buf[..8], [7; 8]);
    drop(server);
}

#[test]
fn a_write_to_no_area_is_refused_without_running_its_payload() {
    use std::io::{Read, Write};
    let memory = Arc::new(MemStore::new(geometry(4096, 16)).unwrap());
    let server = LogServer::start("127.0.0.1:0", Arc::clone(&memory) as _).unwrap();
    let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let header = |op: u8, target: u8, a: u64, b: u64| {
        let mut h = vec![op, target, 0, 0, 0, 0, 0, 0];
        h.extend(a.to_le_bytes());
        h.extend(b.to_le_bytes());
        h
    };
    // A write to target 9, whose payload reads as a fetch-and-add of 5.
    let mut message = header(3, 9, 0, 24);
    message.extend(header(1, 0, 5, 0));
    raw.write_all(&message).unwrap();
    let mut reply = [0u8; 16];
    raw.read_exact(&mut reply).unwrap();
    assert_eq!(reply[..8], (libc::EINVAL as u64).to_le_bytes());
    // The next request is answered as such, and the payload never ran.
    raw.write_all(&header(1, 0, 0, 0)).unwrap();
    raw.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [0; 16]);
    assert_eq!(memory.fetch_add(Word::Tail, 0).unwrap(), 0);
}
