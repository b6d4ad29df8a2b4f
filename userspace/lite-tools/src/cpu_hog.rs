//! Threads that keep a node's CPUs busy, as a user's work would: LITE's
//! own threads (its heartbeats among them) then compete for the CPU.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

/// Turns a thread makes between two looks at the stop flag.
const TURNS_PER_LOOK: u64 = 100_000;

/// Spinning threads, one per CPU, until [`CpuHog::stop`].
#[derive(Debug)]
pub struct CpuHog {
    stop: Arc<AtomicBool>,
    /// Threads that have turned at least once.
    spinning: Arc<AtomicUsize>,
    threads: Vec<thread::JoinHandle<u64>>,
}

impl CpuHog {
    /// Starts `threads` spinning threads named `name`.
    pub fn start(name: &str, threads: usize) -> Result<Self, String> {
        let mut hog = Self {
            stop: Arc::new(AtomicBool::new(false)),
            spinning: Arc::new(AtomicUsize::new(0)),
            threads: Vec::with_capacity(threads),
        };
        for _ in 0..threads {
            let (stop, spinning) = (Arc::clone(&hog.stop), Arc::clone(&hog.spinning));
            let spawned = thread::Builder::new().name(name.into()).spawn(move || {
                let mut turns = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..TURNS_PER_LOOK {
                        turns = std::hint::black_box(turns.wrapping_add(1));
                    }
                    if turns == TURNS_PER_LOOK {
                        spinning.fetch_add(1, Ordering::Relaxed);
                    }
                }
                turns
            });
            match spawned {
                Ok(thread) => hog.threads.push(thread),
                Err(e) => {
                    // Stops the threads started so far.
                    let _ = hog.stop();
                    return Err(format!("cannot start the CPU hog: {e}"));
                }
            }
        }
        Ok(hog)
    }

    /// One per CPU of this machine.
    pub fn on_every_cpu(name: &str) -> Result<Self, String> {
        let cpus = thread::available_parallelism().map_or(1, usize::from);
        Self::start(name, cpus)
    }

    /// How many of the threads have turned so far.
    pub fn spinning(&self) -> usize {
        self.spinning.load(Ordering::Relaxed)
    }

    /// How many threads there were, once each turned at least once (a sign
    /// that it ran).
    pub fn stop(self) -> Result<usize, String> {
        self.stop.store(true, Ordering::Relaxed);
        let count = self.threads.len();
        for thread in self.threads {
            match thread.join() {
                Ok(0) => return Err("a CPU hog thread never turned".into()),
                Ok(_) => {}
                Err(_) => return Err("a CPU hog thread panicked".into()),
            }
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_turns_until_stopped() {
        let hog = CpuHog::start("test-hog", 2).expect("start");
        // However loaded this machine is, each thread gets to turn.
        while hog.spinning() < 2 {
            thread::yield_now();
        }
        assert_eq!(hog.stop(), Ok(2));
    }
}
