//! LITE-Log without LITE: a log server keeps the log in its memory and
//! serves the [`LogStore`] operations over TCP; clients on every node run
//! the same append and read algorithm through [`TcpStore`].
//!
//! A request is a 24-byte header `{op, target, 6 zero bytes, a, b}` (words
//! little-endian), followed by `b` bytes for a write. The reply is
//! `{errno or 0, value}`, followed by `b` bytes for a successful read.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{sleep, JoinHandle};
use std::time::Duration;

use super::{errno, Area, LogStore, Word};

/// Largest read or write one request may carry.
const MAX_TRANSFER: u64 = 4 << 20;

const FETCH_ADD: u8 = 1;
const COMPARE_SWAP: u8 = 2;
const WRITE: u8 = 3;
const READ: u8 = 4;

/// Longest a request may take to be sent or answered, and a server
/// connection may stay idle: generous, but finite, so that a peer that
/// vanished without closing its socket cannot hang the other end.
const IO_TIMEOUT: Duration = Duration::from_secs(600);

/// Limit of one connection attempt, and how many a client makes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_ATTEMPTS: u32 = 5;

/// Pause between connection attempts, and after a failed accept.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How often the server looks for new clients (and for being dropped).
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// The server's open connections, by number, to shut down with it.
type Connections = Mutex<HashMap<u64, TcpStream>>;

/// Serves a [`LogStore`] to [`TcpStore`] clients, one thread per
/// connection, until dropped; dropping it also ends every connection.
pub struct LogServer {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    open: Arc<Connections>,
    acceptor: Option<JoinHandle<()>>,
}

impl LogServer {
    /// Listens on `address` (port 0 picks a free port) and serves `store`.
    pub fn start(address: impl ToSocketAddrs, store: Arc<dyn LogStore>) -> io::Result<LogServer> {
        let listener = TcpListener::bind(address)?;
        // Polled, so that the acceptor notices when the server is dropped.
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Connections::default());
        let (stop, connections) = (Arc::clone(&stopping), Arc::clone(&open));
        let acceptor = std::thread::Builder::new().spawn(move || {
            let mut number = 0;
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        number += 1;
                        // A client that cannot be served concerns that
                        // client only.
                        let _ = admit(stream, number, &store, &connections);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => sleep(ACCEPT_POLL),
                    // Out of file descriptors, say: wait rather than spin.
                    Err(_) => sleep(RETRY_PAUSE),
                }
            }
        })?;
        Ok(LogServer {
            address,
            stopping,
            open,
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
        // Once the acceptor is gone, no connection is added to `open`.
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // Their threads then see the end of the stream and finish.
        for stream in lock(&self.open).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Serves a new client, connection `number`, on a thread of its own.
fn admit(
    stream: TcpStream,
    number: u64,
    store: &Arc<dyn LogStore>,
    open: &Arc<Connections>,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    configure(&stream)?;
    lock(open).insert(number, stream.try_clone()?);
    let (store, connections) = (Arc::clone(store), Arc::clone(open));
    let spawned = std::thread::Builder::new().spawn(move || {
        // A client that goes away mid-request only ends its own
        // connection; the log is left as it was.
        let _ = serve(stream, &*store);
        lock(&connections).remove(&number);
    });
    if spawned.is_err() {
        lock(open).remove(&number);
    }
    spawned.map(drop)
}

/// Answers one client's requests until it disconnects.
fn serve(mut stream: TcpStream, store: &dyn LogStore) -> io::Result<()> {
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
        if op == WRITE {
            // Whatever the target, so that the stream stays in step.
            stream.read_exact(&mut payload)?;
        }
        let result = match (op, word(target), area(target)) {
            (FETCH_ADD, Some(word), _) => store.fetch_add(word, a),
            (COMPARE_SWAP, Some(word), _) => store.compare_swap(word, a, b),
            (WRITE, _, Some(area)) => store.write(area, a, &payload).map(|()| 0),
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

/// Sets the options every connection of the protocol uses.
fn configure(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))
}

/// Locks `mutex`, also after a panic elsewhere: what it guards (streams
/// and their numbers) stays usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
        // PANIC: called with 8 and 16 only, within the 24 bytes.
        bytes.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    (header[0], header[1], word(8), word(16))
}

/// A log's memory behind a [`LogServer`]. Threads share it: each request
/// takes an idle connection, or opens one. A connection left idle for
/// longer than the server waits ([`IO_TIMEOUT`]) is closed by it.
#[derive(Debug)]
pub struct TcpStore {
    server: SocketAddr,
    idle: Mutex<Vec<TcpStream>>,
}

impl TcpStore {
    /// Connects to the log server at `server`, trying a few times (it may
    /// be starting up).
    pub fn connect(server: SocketAddr) -> io::Result<TcpStore> {
        Ok(TcpStore {
            server,
            idle: Mutex::new(vec![connect(server)?]),
        })
    }

    /// Sends one request and returns the reply's value; a read's bytes go
    /// to `into`.
    fn call(&self, header: [u8; 24], payload: &[u8], into: &mut [u8]) -> io::Result<u64> {
        let taken = lock(&self.idle).pop();
        let mut stream = match taken {
            Some(stream) => stream,
            None => connect(self.server)?,
        };
        // A connection that failed mid-request is out of step: drop it.
        let (status, value) = request(&mut stream, &header, payload, into)?;
        lock(&self.idle).push(stream);
        match status {
            0 => Ok(value),
            code => Err(errno(i32::try_from(code).unwrap_or(libc::EIO))),
        }
    }
}

/// A new connection to the server at `server`, with
/// [`CONNECT_ATTEMPTS`] attempts of at most [`CONNECT_TIMEOUT`] each.
fn connect(server: SocketAddr) -> io::Result<TcpStream> {
    let mut attempt = 1;
    let stream = loop {
        match TcpStream::connect_timeout(&server, CONNECT_TIMEOUT) {
            Ok(stream) => break stream,
            Err(_) if attempt < CONNECT_ATTEMPTS => {
                attempt += 1;
                sleep(RETRY_PAUSE);
            }
            Err(e) => return Err(e),
        }
    };
    configure(&stream)?;
    Ok(stream)
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
