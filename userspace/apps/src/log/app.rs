//! The `lite-log` program. Every rank runs it at once: rank 0 creates the
//! log, every rank appends its records from several threads (the measured
//! part), then every rank reads the whole log back and checks that each
//! rank's records are all there, exactly once and intact. With
//! `--kill-test 1`, each rank first starts a writer process that reserves
//! a slot, writes half its record and is killed: the check then also
//! requires those slots to be skipped as uncommitted. Finally rank 0
//! checkpoints and truncates the log and every rank checks it looks empty.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::{errno, mix, Geometry, LiteStore, Log, LogServer, MemStore, SlotState, TcpStore};
use super::{MAX_DATA_BYTES, MAX_RECORDS, MAX_RECORD_SIZE};
use crate::cli::{parse_size, Options, Transport};
use crate::exchange::Exchange;
use crate::report::AppReport;

/// The options `lite-log` accepts besides the shared ones:
///
/// - `--records N`: records each rank appends (default 200);
/// - `--record-size BYTES|mix`: every record's size (16 B to 1 MiB), or
///   `mix` (the default): mostly 16 B - 4 KiB, one in 32 of 64 KiB;
/// - `--threads T`: appending threads per rank (default 2);
/// - `--log-size BYTES`: the data area (default: room for every record
///   with a quarter to spare, at least 8 MiB, so more than one chunk);
/// - `--max-records N`: index slots (default: twice the records);
/// - `--kill-test 1`: kill a writer mid-append on every rank first;
/// - `--log-port P`: TCP port of the log server on rank 0 (default: the
///   `--port` + 100);
/// - `--stalled-writer 1`: internal, the writer process `--kill-test`
///   starts and kills; it reads the log's password from its stdin, then
///   waits for the end of its stdin.
pub const OPTIONS: &[&str] = &[
    "records",
    "record-size",
    "threads",
    "log-size",
    "max-records",
    "kill-test",
    "log-port",
    "stalled-writer",
];

/// Keeps this program's LMR names apart from other programs'.
const TAG: u32 = 0x004c_4f47;

/// LITE node that creates the log: rank 0's.
const CREATOR_NODE: u32 = 1;

/// Bytes at the start of each record saying whose it is.
const RECORD_HEADER: usize = 16;

/// The thread number in the record a stalled writer never commits.
const STALLED_THREAD: u16 = u16::MAX;

/// Size of a stalled writer's record; it writes half of it.
const STALLED_RECORD: usize = 64 << 10;

/// How long a rank waits for its stalled writer to say which slot it
/// reserved.
const STALL_WAIT: Duration = Duration::from_secs(60);

/// Sizes of the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// Every record has this size.
    Fixed(usize),
    /// Mostly small records, one in 32 of 64 KiB.
    Mix,
}

/// What `lite-log` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Records each rank appends.
    pub records: u64,
    /// Sizes of the records.
    pub sizes: Sizes,
    /// Appending threads per rank.
    pub threads: u16,
    /// Size of the log rank 0 creates.
    pub geometry: Geometry,
    /// Whether each rank kills a writer mid-append first.
    pub kill_test: bool,
    /// TCP port of the log server.
    pub log_port: u16,
}

impl Settings {
    /// Reads the options in [`OPTIONS`].
    pub fn from_options(options: &Options) -> Result<Settings, String> {
        if options.transport == Transport::Dsm {
            return Err("LITE-Log runs over lite, tcp or local".into());
        }
        let records = options.number("records", 200)?;
        if records > MAX_RECORDS {
            return Err(format!("--records must be at most {MAX_RECORDS}"));
        }
        let threads = options.number("threads", 2)?;
        let threads = u16::try_from(threads)
            .ok()
            .filter(|t| (1..=256).contains(t))
            .ok_or("--threads must be 1 to 256")?;
        let sizes = match options.text("record-size", "mix") {
            "mix" => Sizes::Mix,
            text => match parse_size(text).and_then(|n| usize::try_from(n).ok()) {
                Some(n) if (RECORD_HEADER..=MAX_RECORD_SIZE).contains(&n) => Sizes::Fixed(n),
                _ => return Err(format!("--record-size: {text:?} is not mix or 16 to 1M")),
            },
        };
        let nodes = options.nodes as u64;
        let too_big = || "--records, --threads and --nodes ask for too much".to_string();
        records.checked_mul(nodes).ok_or_else(too_big)?;
        let mut settings = Settings {
            records,
            sizes,
            threads,
            geometry: Geometry {
                data_bytes: 0,
                max_records: 0,
            },
            kill_test: options.number("kill-test", 0)? != 0,
            log_port: 0,
        };
        let mut needed = nodes
            .checked_mul(padded(STALLED_RECORD))
            .ok_or_else(too_big)?;
        for rank in 0..options.nodes {
            for key in settings.keys(rank as u16) {
                let size = padded(settings.size(key));
                needed = needed.checked_add(size).ok_or_else(too_big)?;
            }
        }
        let roomy = needed
            .checked_add(needed / 4)
            .and_then(|n| n.checked_next_multiple_of(1 << 20))
            .ok_or_else(too_big)?
            .max(8 << 20);
        let slots = nodes
            .checked_mul(records + 1)
            .and_then(|n| n.checked_mul(2))
            .ok_or_else(too_big)?
            .max(4096);
        settings.geometry = Geometry {
            data_bytes: options
                .number("log-size", roomy)?
                .checked_next_multiple_of(8)
                .ok_or("--log-size is too large")?,
            max_records: options.number("max-records", slots)?,
        };
        settings.geometry.check().map_err(|_| {
            format!(
                "--log-size must be at most {MAX_DATA_BYTES} and --max-records 1 to {MAX_RECORDS}"
            )
        })?;
        let log_port = options.number("log-port", u64::from(options.port) + 100)?;
        settings.log_port = u16::try_from(log_port).map_err(|_| "--log-port is not a port")?;
        Ok(settings)
    }

    /// Records thread `thread` of a rank appends.
    fn per_thread(&self, thread: u16) -> u64 {
        let threads = u64::from(self.threads);
        self.records / threads + u64::from(u64::from(thread) < self.records % threads)
    }

    /// Every record rank `rank` appends.
    fn keys(&self, rank: u16) -> impl Iterator<Item = Key> + '_ {
        (0..self.threads).flat_map(move |thread| {
            (0..self.per_thread(thread)).map(move |seq| Key {
                rank,
                thread,
                seq: seq as u32,
            })
        })
    }

    fn size(&self, key: Key) -> usize {
        match self.sizes {
            Sizes::Fixed(size) => size,
            Sizes::Mix => match key.hash() % 4096 {
                h if h % 32 == 0 => 64 << 10,
                h => RECORD_HEADER + h as usize,
            },
        }
    }
}

fn padded(len: usize) -> u64 {
    (len as u64).next_multiple_of(8)
}

/// Whose a record is: the rank and thread that appended it, and its
/// number among that thread's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    rank: u16,
    thread: u16,
    seq: u32,
}

impl Key {
    fn hash(self) -> u64 {
        mix(u64::from(self.rank) << 48 | u64::from(self.thread) << 32 | u64::from(self.seq))
    }

    /// The record: "LREC", the key and the length, then bytes derived
    /// from the key, so that a reader can rebuild and compare it.
    fn record(self, len: usize) -> Vec<u8> {
        let mut record = Vec::with_capacity(len.next_multiple_of(8));
        record.extend_from_slice(b"LREC");
        record.extend_from_slice(&self.rank.to_le_bytes());
        record.extend_from_slice(&self.thread.to_le_bytes());
        record.extend_from_slice(&self.seq.to_le_bytes());
        record.extend_from_slice(&(len as u32).to_le_bytes());
        let mut word = self.hash();
        while record.len() < len {
            word = mix(word);
            record.extend_from_slice(&word.to_le_bytes());
        }
        record.truncate(len);
        record
    }

    /// The key a record claims to be, if it has a header at all.
    fn of(record: &[u8]) -> Option<Key> {
        let field = |at: usize, len: usize| record.get(at..at + len);
        if field(0, 4)? != b"LREC" {
            return None;
        }
        Some(Key {
            rank: u16::from_le_bytes(field(4, 2)?.try_into().ok()?),
            thread: u16::from_le_bytes(field(6, 2)?.try_into().ok()?),
            seq: u32::from_le_bytes(field(8, 4)?.try_into().ok()?),
        })
    }
}

/// Runs `lite-log` on this rank; returns the rank and the report, whose
/// check covers every rank.
pub fn run(options: &Options, settings: &Settings) -> io::Result<(usize, AppReport)> {
    let mut ranks = options.connect(TAG)?;
    let report = run_ranks(options, settings, ranks.as_mut())?;
    Ok((ranks.rank(), report))
}

/// [`run`] over ranks already connected.
fn run_ranks(
    options: &Options,
    settings: &Settings,
    ranks: &mut dyn Exchange,
) -> io::Result<AppReport> {
    let (rank, nodes) = (ranks.rank(), ranks.nodes());
    let (log, password, _server) = open_log(options, settings, ranks)?;
    let mut problems = 0;
    let mut stalled = u64::MAX;
    if settings.kill_test {
        // A failure here fails the check, but every rank goes on to the
        // end, so that none waits for it in a barrier.
        match stall_a_writer(options, &log, password, rank) {
            Ok(slot) => stalled = slot,
            Err(e) => {
                eprintln!("lite-log: rank {rank}: stalled writer: {e}");
                problems += 1;
            }
        }
    }
    let stalled: Vec<u64> = ranks
        .all_gather(&stalled.to_le_bytes())?
        .iter()
        .flat_map(|part| le_words(part))
        .filter(|slot| *slot != u64::MAX)
        .collect();

    ranks.barrier()?;
    let start = Instant::now();
    let (appended, failed) = append_records(&log, settings, rank as u16);
    ranks.barrier()?;
    let elapsed = start.elapsed();

    problems += failed + verify(&log, settings, nodes, &stalled)?;
    ranks.barrier()?;
    if rank == 0 {
        problems += checkpoint_and_truncate(&log, &stalled)?;
    }
    ranks.barrier()?;
    let after = log.scan(0, |_, _| {})?;
    if after.committed != 0 || after.start != after.end {
        eprintln!("lite-log: rank {rank}: the truncated log still shows {after:?}");
        problems += 1;
    }
    let problems = ranks.all_sum_u64(problems)?;
    Ok(AppReport {
        app: "log",
        transport: ranks.transport(),
        nodes,
        work: ranks.all_sum_u64(appended)?,
        unit: "records",
        elapsed,
        checked: problems == 0,
    })
}

/// Rank 0 creates the log; then every rank opens it. Returns the log,
/// its password (LITE only; writer processes need it to open the log)
/// and, on rank 0 over TCP, the server holding the log, to keep it
/// running.
fn open_log(
    options: &Options,
    settings: &Settings,
    ranks: &mut dyn Exchange,
) -> io::Result<(Log, u64, Option<LogServer>)> {
    let geometry = settings.geometry;
    if options.transport == Transport::Local {
        let store = Arc::new(MemStore::new(geometry)?);
        return Ok((Log::create(store, geometry)?, 0, None));
    }
    let mut created = None;
    let mut server = None;
    let mut password = 0;
    let mut outcome = Ok(());
    if ranks.rank() == 0 {
        outcome = (|| {
            match options.transport {
                Transport::Lite => {
                    let store = LiteStore::create(TAG, &geometry)?;
                    password = store.password();
                    created = Some(Log::create(Arc::new(store), geometry)?);
                }
                _ => {
                    let store = Arc::new(MemStore::new(geometry)?);
                    Log::create(Arc::clone(&store) as _, geometry)?;
                    // Listens on every interface of the family the other
                    // ranks reach rank 0 by.
                    let rank0 = rank0_log_server(options, settings)?;
                    let any: IpAddr = match rank0 {
                        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
                        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
                    };
                    server = Some(LogServer::start((any, rank0.port()), store)?);
                }
            }
            Ok::<(), io::Error>(())
        })();
    }
    // Tells every rank whether rank 0 managed, so that none waits forever,
    // and the password of the log.
    let code = outcome
        .as_ref()
        .err()
        .map_or(0, |e| e.raw_os_error().unwrap_or(libc::EIO));
    // Errnos are positive.
    let mut message = u64::from(code.unsigned_abs()).to_le_bytes().to_vec();
    message.extend_from_slice(&password.to_le_bytes());
    let parts = ranks.all_gather(&message)?;
    let &[code, password] = le_words(parts.first().map_or(&[], Vec::as_slice)).as_slice() else {
        return Err(errno(libc::EPROTO));
    };
    if code != 0 {
        outcome?;
        return Err(errno(i32::try_from(code).unwrap_or(libc::EIO)));
    }
    let log = match created {
        Some(log) => log,
        None => Log::open(open_store(options, settings, password)?)?,
    };
    Ok((log, password, server))
}

/// Maps the log rank 0 created (LITE) or connects to its server (TCP).
fn open_store(
    options: &Options,
    settings: &Settings,
    password: u64,
) -> io::Result<Arc<dyn super::LogStore>> {
    Ok(match options.transport {
        Transport::Lite => Arc::new(LiteStore::open(CREATOR_NODE, TAG, password)?),
        Transport::Tcp => Arc::new(TcpStore::connect(rank0_log_server(options, settings)?)?),
        Transport::Local | Transport::Dsm => return Err(errno(libc::EINVAL)),
    })
}

/// The address of rank 0's log server.
fn rank0_log_server(options: &Options, settings: &Settings) -> io::Result<SocketAddr> {
    let rank0 = options.hosts.first().ok_or_else(|| errno(libc::EINVAL))?;
    log_server_address(rank0, settings.log_port)
}

/// The little-endian words in `bytes` (a trailing partial word is left
/// out).
fn le_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .filter_map(|word| word.try_into().ok())
        .map(u64::from_le_bytes)
        .collect()
}

/// Where rank 0's log server listens: the host of rank 0's address
/// ("ip", "name", "ip:port", "name:port" or "[ipv6]:port") and `port`.
fn log_server_address(rank0: &str, port: u16) -> io::Result<SocketAddr> {
    if let Ok(address) = rank0.parse::<SocketAddr>() {
        return Ok(SocketAddr::new(address.ip(), port));
    }
    let host = match rank0.rsplit_once(':') {
        Some((name, p)) if !name.contains(':') && p.parse::<u16>().is_ok() => name,
        _ => rank0,
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| errno(libc::EADDRNOTAVAIL))
}

/// Appends this rank's records from `settings.threads` threads; returns
/// how many were appended and how many failed.
fn append_records(log: &Log, settings: &Settings, rank: u16) -> (u64, u64) {
    let outcomes: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..settings.threads)
            .map(|thread| {
                scope.spawn(move || {
                    let keys = settings.keys(rank).filter(|k| k.thread == thread);
                    let (mut appended, mut failed) = (0, 0);
                    for key in keys {
                        match log.append(&key.record(settings.size(key))) {
                            Ok(_) => appended += 1,
                            Err(e) => {
                                if failed == 0 {
                                    eprintln!("lite-log: rank {rank} thread {thread}: append: {e}");
                                }
                                failed += 1;
                            }
                        }
                    }
                    (appended, failed)
                })
            })
            .collect();
        // A thread that panicked appended nothing we can count on.
        (0..)
            .zip(workers)
            .map(|(thread, w)| w.join().unwrap_or((0, settings.per_thread(thread))))
            .collect()
    });
    outcomes
        .into_iter()
        .fold((0, 0), |(a, f), (a2, f2)| (a + a2, f + f2))
}

/// Reads the whole log and counts what is wrong: records missing, seen
/// twice, damaged or not ours, and stalled slots that did not stay
/// uncommitted.
fn verify(log: &Log, settings: &Settings, nodes: usize, stalled: &[u64]) -> io::Result<u64> {
    let mut seen = HashSet::new();
    let (mut duplicates, mut damaged) = (0u64, 0u64);
    let summary = log.scan(0, |slot, record| {
        let key = Key::of(record).filter(|k| {
            usize::from(k.rank) < nodes
                && k.thread < settings.threads
                && u64::from(k.seq) < settings.per_thread(k.thread)
        });
        match key {
            Some(key) if *record == key.record(settings.size(key)) && !stalled.contains(&slot) => {
                if !seen.insert(key) {
                    duplicates += 1;
                }
            }
            _ => damaged += 1,
        }
    })?;
    let expected = settings
        .records
        .checked_mul(nodes as u64)
        .ok_or_else(|| errno(libc::EINVAL))?;
    let missing = expected.saturating_sub(seen.len() as u64);
    let mut problems = duplicates + damaged + missing + summary.corrupt;
    let mut still_stalled = 0;
    for &slot in stalled {
        if log.slot_state(slot)? == SlotState::Uncommitted {
            still_stalled += 1;
        }
    }
    let stray = summary.uncommitted != still_stalled;
    problems += (stalled.len() as u64 - still_stalled) + u64::from(stray);
    eprintln!(
        "lite-log: slots {}..{}: {} records of {expected} intact, {duplicates} twice, \
         {damaged} damaged, {} corrupt, {} uncommitted skipped ({still_stalled} of {} killed writers)",
        summary.start,
        summary.end,
        seen.len(),
        summary.corrupt,
        summary.uncommitted,
        stalled.len(),
    );
    Ok(problems)
}

/// With every writer done: the checkpoint must stop at the first killed
/// writer's slot, pass it once the killed writers' slots are abandoned,
/// and truncating up to it must work while truncating past it must not.
fn checkpoint_and_truncate(log: &Log, stalled: &[u64]) -> io::Result<u64> {
    let end = log.end()?;
    let mut problems = 0;
    let first_gap = stalled.iter().copied().min().unwrap_or(end).min(end);
    let checkpoint = log.checkpoint()?;
    if checkpoint != first_gap {
        eprintln!("lite-log: checkpoint at {checkpoint}, expected {first_gap}");
        problems += 1;
    }
    let abandoned = log.abandon_uncommitted(end)?;
    let checkpoint = log.checkpoint()?;
    if abandoned != stalled.len() as u64 || checkpoint != end {
        eprintln!(
            "lite-log: {abandoned} slots abandoned, checkpoint then at {checkpoint} of {end}"
        );
        problems += 1;
    }
    if log.truncate(end + 1).is_ok() || log.truncate(end)? != end {
        eprintln!("lite-log: truncate past the checkpoint was allowed, or to it refused");
        problems += 1;
    }
    Ok(problems)
}

/// Starts a writer process that reserves a slot, writes half its record
/// and stops; kills it once it said so, and returns its slot. Over one
/// process (`local`), a reservation that is never committed stands in.
fn stall_a_writer(options: &Options, log: &Log, password: u64, rank: usize) -> io::Result<u64> {
    if options.transport == Transport::Local {
        let reservation = log.reserve(STALLED_RECORD)?;
        log.fill(&reservation, &half_stalled_record(rank))?;
        return Ok(reservation.slot);
    }
    // Its stdin stays open until it is killed; should this process die
    // first, the writer sees the end of its stdin and exits.
    let mut child = Command::new(std::env::current_exe()?)
        .args(std::env::args().skip(1))
        .args(["--stalled-writer", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let said = hear_stalled_slot(&mut child, password);
    let killed = child.kill();
    child.wait()?;
    let line = said?;
    killed?;
    line.trim()
        .strip_prefix("stalled slot=")
        .and_then(|slot| slot.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("stalled writer said {line:?}"),
            )
        })
}

/// Gives a stalled writer the log's password and returns the line it
/// then prints; `ETIMEDOUT` if none came within [`STALL_WAIT`].
fn hear_stalled_slot(child: &mut Child, password: u64) -> io::Result<String> {
    let stdin = child.stdin.as_mut().ok_or_else(|| errno(libc::EPIPE))?;
    writeln!(stdin, "{password:016x}")?;
    stdin.flush()?;
    let out = child.stdout.take().ok_or_else(|| errno(libc::EPIPE))?;
    // Read on a thread, so that a writer that hangs cannot hang us.
    let (said, hear) = mpsc::channel();
    std::thread::Builder::new().spawn(move || {
        let mut line = String::new();
        let _ = said.send(BufReader::new(out).read_line(&mut line).map(|_| line));
    })?;
    hear.recv_timeout(STALL_WAIT).map_err(|e| match e {
        mpsc::RecvTimeoutError::Timeout => errno(libc::ETIMEDOUT),
        mpsc::RecvTimeoutError::Disconnected => errno(libc::EPIPE),
    })?
}

/// The first half of the record a stalled writer of rank `rank` never
/// commits.
fn half_stalled_record(rank: usize) -> Vec<u8> {
    let key = Key {
        rank: rank as u16,
        thread: STALLED_THREAD,
        seq: 0,
    };
    let mut record = key.record(STALLED_RECORD);
    record.truncate(STALLED_RECORD / 2);
    record
}

/// The writer process of `--kill-test`: reads the log's password (hex)
/// from stdin, maps the log, reserves a slot, writes half its record,
/// prints `stalled slot=N` and waits to be killed, or for the end of its
/// stdin (the rank that started it is gone).
pub fn run_stalled_writer(options: &Options, settings: &Settings) -> io::Result<()> {
    let rank = match options.transport {
        Transport::Lite => (lite::node_id()? as usize).saturating_sub(1),
        _ => options.rank,
    };
    let mut input = io::stdin().lock();
    let mut line = String::new();
    input.read_line(&mut line)?;
    let password = u64::from_str_radix(line.trim(), 16).map_err(|_| errno(libc::EINVAL))?;
    let log = Log::open(open_store(options, settings, password)?)?;
    let reservation = log.reserve(STALLED_RECORD)?;
    log.fill(&reservation, &half_stalled_record(rank))?;
    let mut out = io::stdout().lock();
    writeln!(out, "stalled slot={}", reservation.slot)?;
    out.flush()?;
    io::copy(&mut input, &mut io::sink())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::ThreadMesh;

    fn options(line: &str) -> Options {
        Options::parse(line.split_whitespace().map(str::to_string), OPTIONS).unwrap()
    }

    #[test]
    fn a_local_run_with_a_stalled_writer_checks_out() {
        let options = options("--records 60 --threads 3 --kill-test 1");
        let settings = Settings::from_options(&options).unwrap();
        let (rank, report) = run(&options, &settings).unwrap();
        assert!(report.checked);
        assert_eq!(rank, 0);
        assert_eq!(
            (report.app, report.transport, report.work),
            ("log", "local", 60)
        );
    }

    #[test]
    fn tcp_ranks_append_to_and_check_the_log_on_rank_0() {
        let log_port = 40_000 + (std::process::id() % 5_000) as u16;
        let reports = ThreadMesh::run(3, |mesh| {
            let line = format!(
                "--transport tcp --hosts 127.0.0.1:1,localhost,127.0.0.1 --rank {} \
                 --log-port {log_port} --records 30 --record-size 64K",
                mesh.rank()
            );
            let options = options(&line);
            let settings = Settings::from_options(&options).unwrap();
            run_ranks(&options, &settings, mesh).unwrap()
        });
        for report in reports {
            assert!(report.checked);
            assert_eq!((report.nodes, report.work), (3, 90));
        }
    }

    #[test]
    fn defaults_fit_every_record_in_more_than_one_chunk() {
        let settings = Settings::from_options(&options("--records 200")).unwrap();
        assert_eq!((settings.threads, settings.sizes), (2, Sizes::Mix));
        assert!(settings.geometry.data_bytes >= 8 << 20);
        let big = Settings::from_options(&options("--records 200 --record-size 64K")).unwrap();
        assert!(big.geometry.data_bytes >= 200 * (64 << 10));
        for bad in [
            "--record-size 8",
            "--record-size 2M",
            "--threads 0",
            "--log-size 1T",
            "--log-size 18446744073709551615",
        ] {
            assert!(Settings::from_options(&options(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn records_can_be_told_apart_and_rebuilt() {
        let key = Key {
            rank: 2,
            thread: 1,
            seq: 7,
        };
        let record = key.record(100);
        assert_eq!((record.len(), Key::of(&record)), (100, Some(key)));
        assert_ne!(record, Key { seq: 8, ..key }.record(100));
        assert_eq!(Key::of(b"LREC"), None);
    }

    #[test]
    fn the_log_server_address_keeps_the_host_only() {
        let at = |host| log_server_address(host, 9).unwrap().to_string();
        assert_eq!(at("10.0.0.1:18700"), "10.0.0.1:9");
        assert_eq!(at("10.0.0.1"), "10.0.0.1:9");
        assert_eq!(at("[::1]:5"), "[::1]:9");
        assert_eq!(at("::1"), "[::1]:9");
    }
}
