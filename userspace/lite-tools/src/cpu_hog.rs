//! Threads that keep a node's CPUs busy, as a user's work would: LITE's
//! own threads (its heartbeats among them) then compete for the CPU.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// Spinning threads, one per CPU, until [`CpuHog::stop`].
#[derive(Debug)]
pub struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<u64>>,
}

impl CpuHog {
    /// Starts `threads` spinning threads named `name`.
    pub fn start(name: &str, threads: usize) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut hog = Self {
            stop,
            threads: Vec::with_capacity(threads),
        };
        for _ in 0..threads {
            let stop = Arc::clone(&hog.stop);
            let spawned = thread::Builder::new().name(name.into()).spawn(move || {
                let mut turns = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..100_000 {
                        turns = std::hint::black_box(turns.wrapping_add(1));
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

    /// Starts one spinning thread per CPU of this machine.
    pub fn on_every_cpu(name: &str) -> Result<Self, String> {
        let cpus = thread::available_parallelism().map_or(1, usize::from);
        Self::start(name, cpus)
    }

    /// Stops every thread; `Ok` with how many there were once each of them
    /// turned at least once, a sign that it ran.
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
        thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(hog.stop(), Ok(2));
    }
}
