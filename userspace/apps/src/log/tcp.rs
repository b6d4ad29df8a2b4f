//! LITE-Log without LITE: a log server keeps the log in its memory and
//! serves the [`LogStore`] operations over TCP; clients on every node run
//! the same append and read algorithm through [`TcpStore`].
//!
//! A request is a 24-byte header `{op, target, 6 zero bytes, a, b}` (words
//! little-endian), followed by `b` bytes for a write. The reply is
//! `{errno or 0, value}`, followed by `b` bytes for a successful read.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::{errno, Area, LogStore, Word};

/// Largest read or write one request may carry.
const MAX_TRANSFER: u64 = 4 << 20;

const FETCH_ADD: u8 = 1;
const COMPARE_SWAP: u8 = 2;
const WRITE: u8 = 3;
const READ: u8 = 4;

/// Serves a [`LogStore`] to [`TcpStore`] clients, one thread per
/// connection, until dropped.
pub struct LogServer {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl LogServer {
    /// Listens on `address` (port 0 picks a free port) and serves `store`.
    pub fn start(address: impl ToSocketAddrs, store: Arc<dyn LogStore>) -> io::Result<LogServer> {
        let listener = TcpListener::bind(address)?;
        let address = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let acceptor = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                // A failed accept concerns that one client only.
                if let Ok(stream) = stream {
                    let store = Arc::clone(&store);
                    // A client that goes away mid-request only ends its
                    // own connection; the log is left as it was.
                    std::thread::spawn(move || serve(stream, &*store));
                }
            }
        });
        Ok(LogServer {
            address,
            stopping,
            acceptor: Some(acceptor),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees `stopping`.
        let mut wake = self.address;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        if TcpStream::connect(wake).is_ok() {
            if let Some(acceptor) = self.acceptor.take() {
                let _ = acceptor.join();
            }
        }
    }
}

/// Answers one client's requests until it disconnects.
fn serve(mut stream: TcpStream, store: &dyn LogStore) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut header = [0u8; 24];
    let mut payload = Vec::new();
    loop {
        match stream.read_exact(&mut header) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            other => other?,
        }
        let (op, target, a, b) = decode(&header);
        let transfer = if op == WRITE || op == READ { b } else { 0 };
        if transfer > MAX_TRANSFER {
            // The payload cannot be skipped safely: answer and hang up.
            stream.write_all(&reply(&Err(errno(libc::EINVAL))))?;
            return Err(errno(libc::EINVAL));
        }
        payload.resize(transfer as usize, 0);
        let result = match (op, word(target), area(target)) {
            (FETCH_ADD, Some(word), _) => store.fetch_add(word, a),
            (COMPARE_SWAP, Some(word), _) => store.compare_swap(word, a, b),
            (WRITE, _, Some(area)) => {
                stream.read_exact(&mut payload)?;
                store.write(area, a, &payload).map(|()| 0)
            }
            (READ, _, Some(area)) => store.read(area, a, &mut payload).map(|()| 0),
            _ => Err(errno(libc::EINVAL)),
        };
        let mut out = reply(&result).to_vec();
        if op == READ && result.is_ok() {
            out.extend_from_slice(&payload);
        }
        stream.write_all(&out)?;
    }
}

fn reply(result: &io::Result<u64>) -> [u8; 16] {
    let (status, value) = match result {
        Ok(value) => (0, *value),
        Err(e) => (e.raw_os_error().unwrap_or(libc::EIO) as u64, 0),
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&status.to_le_bytes());
    out[8..].copy_from_slice(&value.to_le_bytes());
    out
}

fn word(target: u8) -> Option<Word> {
    [Word::Tail, Word::Head, Word::Checkpoint]
        .into_iter()
        .find(|w| *w as u8 == target)
}

fn area(target: u8) -> Option<Area> {
    match target {
        0 => Some(Area::Index),
        1 => Some(Area::Data),
        _ => None,
    }
}

fn area_number(area: Area) -> u8 {
    match area {
        Area::Index => 0,
        Area::Data => 1,
    }
}

fn encode(op: u8, target: u8, a: u64, b: u64) -> [u8; 24] {
    let mut header = [0u8; 24];
    header[0] = op;
    header[1] = target;
    header[8..16].copy_from_slice(&a.to_le_bytes());
    header[16..].copy_from_slice(&b.to_le_bytes());
    header
}

fn decode(header: &[u8; 24]) -> (u8, u8, u64, u64) {
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    (header[0], header[1], word(8), word(16))
}

/// A log's memory behind a [`LogServer`]. Threads share it: each request
/// takes an idle connection, or opens one.
#[derive(Debug)]
pub struct TcpStore {
    server: SocketAddr,
    idle: Mutex<Vec<TcpStream>>,
}

impl TcpStore {
    /// Connects to the log server at `server`.
    pub fn connect(server: impl ToSocketAddrs) -> io::Result<TcpStore> {
        let stream = TcpStream::connect(server)?;
        stream.set_nodelay(true)?;
        Ok(TcpStore {
            server: stream.peer_addr()?,
            idle: Mutex::new(vec![stream]),
        })
    }

    /// Sends one request and returns the reply's value; a read's bytes go
    /// to `into`.
    fn call(&self, header: [u8; 24], payload: &[u8], into: &mut [u8]) -> io::Result<u64> {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut stream = match taken {
            Some(stream) => stream,
            None => {
                let stream = TcpStream::connect(self.server)?;
                stream.set_nodelay(true)?;
                stream
            }
        };
        // A connection that failed mid-request is out of step: drop it.
        let (status, value) = request(&mut stream, &header, payload, into)?;
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(stream);
        match status {
            0 => Ok(value),
            code => Err(errno(i32::try_from(code).unwrap_or(libc::EIO))),
        }
    }
}

/// `EINVAL` for a read or write larger than one request may carry.
fn check_transfer(len: usize) -> io::Result<()> {
    if len as u64 <= MAX_TRANSFER {
        Ok(())
    } else {
        Err(errno(libc::EINVAL))
    }
}

fn request(
    stream: &mut TcpStream,
    header: &[u8; 24],
    payload: &[u8],
    into: &mut [u8],
) -> io::Result<(u64, u64)> {
    let mut message = header.to_vec();
    message.extend_from_slice(payload);
    stream.write_all(&message)?;
    let mut answer = [0u8; 16];
    stream.read_exact(&mut answer)?;
    let (status, value) = {
        let (status, value) = answer.split_at(8);
        let word = |b: &[u8]| b.try_into().map(u64::from_le_bytes);
        let protocol = |_| errno(libc::EPROTO);
        (
            word(status).map_err(protocol)?,
            word(value).map_err(protocol)?,
        )
    };
    if status == 0 && header[0] == READ {
        stream.read_exact(into)?;
    }
    Ok((status, value))
}

impl LogStore for TcpStore {
    fn fetch_add(&self, word: Word, value: u64) -> io::Result<u64> {
        self.call(encode(FETCH_ADD, word as u8, value, 0), &[], &mut [])
    }

    fn compare_swap(&self, word: Word, expected: u64, new: u64) -> io::Result<u64> {
        self.call(
            encode(COMPARE_SWAP, word as u8, expected, new),
            &[],
            &mut [],
        )
    }

    fn write(&self, area: Area, offset: u64, bytes: &[u8]) -> io::Result<()> {
        check_transfer(bytes.len())?;
        let header = encode(WRITE, area_number(area), offset, bytes.len() as u64);
        self.call(header, bytes, &mut []).map(drop)
    }

    fn read(&self, area: Area, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_transfer(buf.len())?;
        let header = encode(READ, area_number(area), offset, buf.len() as u64);
        self.call(header, &[], buf).map(drop)
    }
}
