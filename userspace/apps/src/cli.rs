//! The command line every application shares, and connecting its ranks.
//!
//! ```text
//! APP --transport lite --cm IP --nodes N [APP OPTIONS]
//! APP --transport dsm --cm IP --nodes N [APP OPTIONS]
//! APP --transport tcp --hosts IP1,IP2,.. --rank R [--port P] [APP OPTIONS]
//! APP --transport local [APP OPTIONS]
//! ```
//!
//! Over LITE (and LITE-DSM), node `i` (its LITE node id) is rank `i - 1`, and nodes
//! `1..=N` take part. Over TCP, rank `r` listens on `hosts[r]:port`.

use std::collections::BTreeMap;
use std::io;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::dsm_exchange::DsmExchange;
use crate::exchange::{Exchange, LocalExchange};
use crate::lite_exchange::LiteExchange;
use crate::tcp_exchange::TcpMesh;

/// Default TCP port of rank 0 of the TCP versions.
pub const DEFAULT_TCP_PORT: u16 = 18700;

/// How long a LITE rank waits for all `nodes` nodes to have joined.
const JOIN_WAIT: Duration = Duration::from_secs(180);

/// Which version of an application runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// LITE: LMRs, RDMA atomics, barriers and RPC.
    Lite,
    /// LITE-DSM: memory shared through page faults, and LITE barriers.
    Dsm,
    /// TCP sockets between the same nodes.
    Tcp,
    /// One process on one node.
    Local,
}

/// The parsed command line: the shared options and the application's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Which version runs.
    pub transport: Transport,
    /// LITE: the cluster manager's address.
    pub cm: String,
    /// LITE: number of nodes taking part (ids `1..=nodes`).
    pub nodes: usize,
    /// TCP: every rank's address, in rank order.
    pub hosts: Vec<String>,
    /// TCP: this rank.
    pub rank: usize,
    /// TCP: the port every rank listens on.
    pub port: u16,
    /// The application's own `--name value` options.
    own: BTreeMap<String, String>,
}

impl Options {
    /// Parses `args` (without the program name); `own` names the options
    /// the application accepts (without `--`).
    pub fn parse(args: impl IntoIterator<Item = String>, own: &[&str]) -> Result<Options, String> {
        let mut options = Options {
            transport: Transport::Local,
            cm: String::new(),
            nodes: 1,
            hosts: Vec::new(),
            rank: 0,
            port: DEFAULT_TCP_PORT,
            own: BTreeMap::new(),
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {flag:?}"))?;
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = |v: &str| {
                v.parse::<usize>()
                    .map_err(|_| format!("{flag}: {v:?} is not a number"))
            };
            match name {
                "transport" => {
                    options.transport = match value.as_str() {
                        "lite" => Transport::Lite,
                        "dsm" => Transport::Dsm,
                        "tcp" => Transport::Tcp,
                        "local" => Transport::Local,
                        other => {
                            return Err(format!(
                                "unknown transport {other:?} (lite, dsm, tcp or local)"
                            ))
                        }
                    }
                }
                "cm" => options.cm = value,
                "nodes" => options.nodes = number(&value)?,
                "hosts" => options.hosts = value.split(',').map(str::to_string).collect(),
                "rank" => options.rank = number(&value)?,
                "port" => {
                    options.port = value
                        .parse()
                        .map_err(|_| format!("--port: {value:?} is not a port"))?
                }
                _ if own.contains(&name) => {
                    options.own.insert(name.to_string(), value);
                }
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        match options.transport {
            Transport::Lite | Transport::Dsm if options.cm.is_empty() => {
                return Err("--transport lite and dsm need --cm".into())
            }
            Transport::Tcp if options.rank >= options.hosts.len() => {
                return Err("--transport tcp needs --hosts and a --rank below their number".into())
            }
            Transport::Tcp => options.nodes = options.hosts.len(),
            Transport::Local => options.nodes = 1,
            Transport::Lite | Transport::Dsm => {}
        }
        if options.nodes == 0 || options.nodes > lite::sys::MAX_NODES as usize {
            return Err(format!(
                "the number of nodes must be 1 to {}",
                lite::sys::MAX_NODES
            ));
        }
        Ok(options)
    }

    /// The application's option `name` as a number, or `default`.
    pub fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.own.get(name) {
            None => Ok(default),
            Some(v) => parse_size(v).ok_or_else(|| format!("--{name}: {v:?} is not a number")),
        }
    }

    /// The application's option `name` as text, or `default`.
    pub fn text<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.own.get(name).map_or(default, String::as_str)
    }

    /// Connects this rank to the others over the chosen transport; `tag`
    /// keeps the LMR names of different applications apart.
    pub fn connect(&self, tag: u32) -> io::Result<Box<dyn Exchange>> {
        Ok(match self.transport {
            Transport::Local => Box::new(LocalExchange),
            Transport::Tcp => Box::new(TcpMesh::connect(&self.hosts, self.rank, self.port)?),
            Transport::Lite => {
                let rank = join_lite(&self.cm, self.nodes)?;
                Box::new(LiteExchange::new(rank, self.nodes, tag)?)
            }
            Transport::Dsm => {
                let rank = join_lite(&self.cm, self.nodes)?;
                Box::new(DsmExchange::new(rank, self.nodes, tag)?)
            }
        })
    }
}

/// A number, with an optional `K`, `M` or `G` suffix (powers of 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// Joins the LITE cluster (a node already joined is fine) and waits until
/// `nodes` nodes are connected; returns this node's rank (its id - 1).
///
/// # Errors
///
/// The join's error; `ETIMEDOUT` if the nodes did not all join in time;
/// `ERANGE` if this node's id is above `nodes`.
pub fn join_lite(cm: &str, nodes: usize) -> io::Result<usize> {
    match lite::join(cm, lite::sys::CM_DEFAULT_PORT, 1) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EISCONN) => {}
        Err(e) => return Err(e),
    }
    let id = lite::node_id()? as usize;
    if id == 0 || id > nodes {
        return Err(io::Error::from_raw_os_error(libc::ERANGE));
    }
    let start = Instant::now();
    while (lite::total_nodes()? as usize) < nodes {
        if start.elapsed() > JOIN_WAIT {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        sleep(Duration::from_millis(200));
    }
    Ok(id - 1)
}

/// Prints `message` as the program's error and exits with status 2 (bad
/// command line) or 1.
pub fn fail(program: &str, message: &str, usage: bool) -> ! {
    eprintln!("{program}: {message}");
    std::process::exit(if usage { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn each_transport_takes_its_own_options() {
        let lite = Options::parse(
            args("--transport lite --cm 10.0.0.1 --nodes 3 --size 4M"),
            &["size"],
        )
        .expect("parses");
        assert_eq!(
            (lite.transport, lite.nodes, lite.cm.as_str()),
            (Transport::Lite, 3, "10.0.0.1")
        );
        assert_eq!(lite.number("size", 0), Ok(4 << 20));
        assert_eq!(lite.number("missing", 7), Ok(7));
        let dsm =
            Options::parse(args("--transport dsm --cm 10.0.0.1 --nodes 2"), &[]).expect("parses");
        assert_eq!((dsm.transport, dsm.nodes), (Transport::Dsm, 2));
        let tcp =
            Options::parse(args("--transport tcp --hosts a,b --rank 1"), &[]).expect("parses");
        assert_eq!((tcp.nodes, tcp.rank, tcp.port), (2, 1, DEFAULT_TCP_PORT));
        let local = Options::parse(args("--nodes 5"), &[]).expect("parses");
        assert_eq!((local.transport, local.nodes), (Transport::Local, 1));
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for bad in [
            "--transport lite",
            "--transport dsm --nodes 2",
            "--transport tcp --hosts a --rank 1",
            "--transport carrier-pigeon",
            "--size 1",
            "--nodes",
            "--nodes x",
            "--transport lite --cm a --nodes 0",
            "--transport lite --cm a --nodes 100000",
            "stray",
        ] {
            assert!(Options::parse(args(bad), &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("3m"), Some(3 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("99999999999G"), None);
    }
}
