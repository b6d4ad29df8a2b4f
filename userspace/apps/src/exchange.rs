//! How the ranks of a distributed application exchange data.
//!
//! MapReduce's shuffle and the graph engine's supersteps are all-to-all
//! exchanges between barriers. [`Exchange`] is that one operation, so that
//! an application's algorithm is written once and runs over LITE memory
//! ([`crate::lite_exchange`]), over TCP sockets ([`crate::tcp_exchange`],
//! what a user would write without LITE), or in one process
//! ([`LocalExchange`]). The tests run several ranks as threads of one
//! process (`ThreadMesh`).

use std::io;
#[cfg(test)]
use std::sync::mpsc::{channel, Receiver, Sender};
#[cfg(test)]
use std::sync::{Arc, Barrier};

/// All-to-all exchange between `nodes()` ranks, `0..nodes()`.
///
/// Every rank calls the same sequence of operations (SPMD): a call returns
/// once every rank made the matching call.
pub trait Exchange {
    /// This rank, from 0.
    fn rank(&self) -> usize;

    /// Number of ranks.
    fn nodes(&self) -> usize;

    /// Sends `outgoing[d]` to rank `d` (`outgoing.len() == nodes()`, this
    /// rank's own part included) and returns what every rank sent to this
    /// one, indexed by sender.
    ///
    /// # Errors
    ///
    /// `EINVAL` if `outgoing` has the wrong length; the transport's error
    /// otherwise.
    fn all_to_all(&mut self, outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>>;

    /// Waits until every rank reached the same barrier.
    fn barrier(&mut self) -> io::Result<()>;

    /// Name of the transport, for reports ("lite", "tcp", "local").
    fn transport(&self) -> &'static str;

    /// Gives `data` to rank 0: rank 0 gets every rank's data, indexed by
    /// rank; the others get `None`.
    fn gather(&mut self, data: Vec<u8>) -> io::Result<Option<Vec<Vec<u8>>>> {
        let mut outgoing = vec![Vec::new(); self.nodes()];
        // PANIC: `nodes() >= 1`, so index 0 exists.
        outgoing[0] = data;
        let incoming = self.all_to_all(outgoing)?;
        Ok((self.rank() == 0).then_some(incoming))
    }

    /// Gives `data` to every rank; returns every rank's data, indexed by
    /// rank.
    fn all_gather(&mut self, data: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let outgoing = vec![data.to_vec(); self.nodes()];
        self.all_to_all(outgoing)
    }

    /// The sum of `value` over every rank, on every rank.
    fn all_sum_f64(&mut self, value: f64) -> io::Result<f64> {
        let parts = self.all_gather(&value.to_le_bytes())?;
        parts
            .iter()
            .map(|p| <[u8; 8]>::try_from(p.as_slice()).map(f64::from_le_bytes))
            .sum::<Result<f64, _>>()
            .map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))
    }

    /// The sum of `value` over every rank, on every rank.
    fn all_sum_u64(&mut self, value: u64) -> io::Result<u64> {
        let parts = self.all_gather(&value.to_le_bytes())?;
        parts
            .iter()
            .map(|p| <[u8; 8]>::try_from(p.as_slice()).map(u64::from_le_bytes))
            .try_fold(0u64, |sum, v| v.map(|v| sum.wrapping_add(v)))
            .map_err(|_| io::Error::from_raw_os_error(libc::EPROTO))
    }
}

/// `EINVAL` unless `outgoing` has one part per rank.
pub(crate) fn check_parts(outgoing: &[Vec<u8>], nodes: usize) -> io::Result<()> {
    if outgoing.len() == nodes {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    }
}

/// One rank alone: the single-node version of an application.
#[derive(Debug, Default)]
pub struct LocalExchange;

impl Exchange for LocalExchange {
    fn rank(&self) -> usize {
        0
    }

    fn nodes(&self) -> usize {
        1
    }

    fn all_to_all(&mut self, outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, 1)?;
        Ok(outgoing)
    }

    fn barrier(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn transport(&self) -> &'static str {
        "local"
    }
}

/// Ranks as threads of one process, exchanging through channels: lets the
/// tests run a distributed algorithm without a cluster.
#[cfg(test)]
pub(crate) struct ThreadMesh {
    rank: usize,
    to: Vec<Sender<Vec<u8>>>,
    from: Vec<Receiver<Vec<u8>>>,
    barrier: Arc<Barrier>,
}

#[cfg(test)]
impl ThreadMesh {
    /// One endpoint per rank, for `nodes` ranks.
    pub(crate) fn new(nodes: usize) -> Vec<ThreadMesh> {
        let barrier = Arc::new(Barrier::new(nodes));
        // channels[s][d] carries from rank s to rank d.
        let mut senders: Vec<Vec<Sender<Vec<u8>>>> = (0..nodes).map(|_| Vec::new()).collect();
        let mut receivers: Vec<Vec<Receiver<Vec<u8>>>> = (0..nodes).map(|_| Vec::new()).collect();
        for sender in senders.iter_mut() {
            for receiver in receivers.iter_mut() {
                let (tx, rx) = channel();
                sender.push(tx);
                receiver.push(rx);
            }
        }
        senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(rank, (to, from))| ThreadMesh {
                rank,
                to,
                from,
                barrier: Arc::clone(&barrier),
            })
            .collect()
    }

    /// Runs `body` on `nodes` ranks, one thread each; returns their results
    /// in rank order.
    pub(crate) fn run<T: Send>(nodes: usize, body: impl Fn(&mut ThreadMesh) -> T + Sync) -> Vec<T> {
        let meshes = ThreadMesh::new(nodes);
        std::thread::scope(|scope| {
            let handles: Vec<_> = meshes
                .into_iter()
                .map(|mut mesh| {
                    let body = &body;
                    scope.spawn(move || body(&mut mesh))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a rank panicked"))
                .collect()
        })
    }
}

#[cfg(test)]
impl Exchange for ThreadMesh {
    fn rank(&self) -> usize {
        self.rank
    }

    fn nodes(&self) -> usize {
        self.to.len()
    }

    fn all_to_all(&mut self, outgoing: Vec<Vec<u8>>) -> io::Result<Vec<Vec<u8>>> {
        check_parts(&outgoing, self.nodes())?;
        let broken = || io::Error::from_raw_os_error(libc::EPIPE);
        for (to, part) in self.to.iter().zip(outgoing) {
            to.send(part).map_err(|_| broken())?;
        }
        self.from
            .iter()
            .map(|from| from.recv().map_err(|_| broken()))
            .collect()
    }

    fn barrier(&mut self) -> io::Result<()> {
        self.barrier.wait();
        Ok(())
    }

    fn transport(&self) -> &'static str {
        "threads"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_gets_what_every_rank_sent_it() {
        let got = ThreadMesh::run(3, |mesh| {
            let me = mesh.rank() as u8;
            let out = (0..3u8).map(|d| vec![me, d]).collect();
            mesh.all_to_all(out).expect("exchange")
        });
        for (d, incoming) in got.iter().enumerate() {
            for (s, part) in incoming.iter().enumerate() {
                assert_eq!(part, &vec![s as u8, d as u8]);
            }
        }
    }

    #[test]
    fn sums_and_gathers_cover_every_rank() {
        let got = ThreadMesh::run(4, |mesh| {
            let r = mesh.rank() as u64;
            let sum = mesh.all_sum_u64(r + 1).expect("sum");
            let fsum = mesh.all_sum_f64(0.5).expect("sum");
            let gathered = mesh.gather(vec![r as u8]).expect("gather");
            (sum, fsum, gathered)
        });
        for (rank, (sum, fsum, gathered)) in got.into_iter().enumerate() {
            assert_eq!(sum, 10);
            assert_eq!(fsum, 2.0);
            assert_eq!(gathered.is_some(), rank == 0);
        }
    }

    #[test]
    fn a_wrong_number_of_parts_is_einval() {
        let err = LocalExchange
            .all_to_all(vec![Vec::new(), Vec::new()])
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    }
}
