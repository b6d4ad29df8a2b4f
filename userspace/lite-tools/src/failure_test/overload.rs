//! The failure test's overload phase, before anything fails (see the
//! README's failure test): a busy node is not a dead one. Every node calls
//! every node's RPC port with [`CALLERS_PER_TARGET`] threads per target
//! while [`SERVER_THREADS`] threads answer its own, for
//! [`FailureConfig::overload`](super::FailureConfig). A barrier of all
//! nodes starts the phase (every port open) and one ends it (every caller
//! done).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster_test::io::outcome_of;
use crate::cluster_test::rpc::{identified_request, register, serve, transformed_call};
use crate::cpu_hog::CpuHog;
use crate::errno::expect_zero;
use crate::kernel::Kernel;

/// Every node serves it during the overload.
pub const OVERLOAD_PORT: u32 = 8;

/// [`identified_request`]s are at most 515 bytes.
const OVERLOAD_MAX_SIZE: u64 = 1024;

const SERVER_THREADS: usize = 2;

const CALLERS_PER_TARGET: u32 = 2;

/// What a node's overload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overload {
    /// Calls this node made, every one answered correctly.
    pub calls: u64,
    /// The longest of them.
    pub slowest: Duration,
    /// Requests this node's port answered.
    pub served: u64,
    /// Spinning threads that kept this node's CPUs busy.
    pub hog_threads: usize,
}

/// With a CPU hog when `hog`. `barrier` enters a barrier of every node,
/// named after what it follows; both are entered whatever failed before
/// them.
pub fn run<K: Kernel + Sync>(
    kernel: &K,
    me: u32,
    nodes: u32,
    duration: Duration,
    hog: bool,
    mut barrier: impl FnMut(&str) -> Result<(), String>,
) -> Result<Overload, String> {
    let opened = expect_zero(register(
        kernel,
        OVERLOAD_PORT,
        OVERLOAD_MAX_SIZE,
        "lite-overload",
    ))
    .map_err(|e| format!("register_application(port {OVERLOAD_PORT}): {e}"));
    let is_open = opened.is_ok();
    let close = || {
        if is_open {
            kernel.unregister_application(OVERLOAD_PORT);
        }
    };
    if let Err(e) = barrier("registering the overload ports") {
        close();
        return Err(e);
    }
    let calls = AtomicU64::new(0);
    let slowest_ns = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    thread::scope(|scope| {
        let servers: Vec<_> = (0..SERVER_THREADS)
            .filter(|_| is_open)
            .map(|_| scope.spawn(|| serve(kernel, OVERLOAD_PORT, false)))
            .collect();
        let hog = hog.then(|| CpuHog::on_every_cpu("overload-cpu-hog"));
        let end = Instant::now() + duration;
        let callers: Vec<_> = (1..=nodes)
            .flat_map(|target| (0..CALLERS_PER_TARGET).map(move |caller| (target, caller)))
            .map(|(target, caller)| {
                let (calls, slowest_ns, failed) = (&calls, &slowest_ns, &failed);
                scope.spawn(move || -> Result<(), String> {
                    let mut seq = 0u64;
                    // A caller that failed stops the others: the phase
                    // has failed, and an unanswered port makes every call
                    // to it wait for the kernel's timeout.
                    while Instant::now() < end && !failed.load(Ordering::Relaxed) {
                        let request = identified_request(me, target * 16 + caller, seq);
                        let started = Instant::now();
                        if let Err(e) = transformed_call(kernel, target, OVERLOAD_PORT, &request) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(format!("call {seq} to node {target}: {e}"));
                        }
                        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        slowest_ns.fetch_max(took, Ordering::Relaxed);
                        calls.fetch_add(1, Ordering::Relaxed);
                        seq += 1;
                    }
                    Ok(())
                })
            })
            .collect();
        let called = callers
            .into_iter()
            .map(|caller| outcome_of(caller, "a caller panicked"))
            .find(Result::is_err)
            .unwrap_or(Ok(()));
        let hog_threads = hog
            .transpose()
            .and_then(|hog| hog.map_or(Ok(0), CpuHog::stop));
        // No node calls any more once every node is past this barrier.
        let in_step = barrier("every node's overload calls");
        close();
        let mut served = 0;
        let mut ended = Ok(());
        for server in servers {
            match server.join() {
                Ok(s) => {
                    served += s.requests;
                    if let Err(e) = s.ending {
                        ended = Err(format!("a server thread: {e}"));
                    }
                }
                Err(_) => ended = Err("a server thread panicked".into()),
            }
        }
        opened?;
        called?;
        in_step?;
        ended?;
        Ok(Overload {
            calls: calls.load(Ordering::Relaxed),
            slowest: Duration::from_nanos(slowest_ns.load(Ordering::Relaxed)),
            served,
            hog_threads: hog_threads?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_test::io::enter_barrier;
    use crate::fake_kernel::{Defects, FakeKernel};

    /// Runs the overload for a moment on a fake cluster of two nodes, of
    /// which node 2 takes part only when `both`, else it only enters the
    /// barriers; node 1's outcome.
    fn overload_node_1(both: bool) -> Result<Overload, String> {
        let kernels = FakeKernel::joined_cluster(2, Defects::default());
        let length = Duration::from_millis(100);
        thread::scope(|scope| {
            let runs: Vec<_> = (1..=2)
                .zip(&kernels)
                .map(|(me, kernel)| {
                    scope.spawn(move || {
                        let barrier =
                            |after: &str| enter_barrier(kernel, 2, Duration::from_secs(10), after);
                        if me == 2 && !both {
                            barrier("registering").and_then(|()| barrier("calling"))?;
                            return Err("node 2 took no part".into());
                        }
                        run(kernel, me, 2, length, false, barrier)
                    })
                })
                .collect();
            let mut outcomes = runs.into_iter().map(|run| run.join().expect("node thread"));
            outcomes.next().expect("node 1")
        })
    }

    #[test]
    fn every_call_answered_passes_and_a_node_that_does_not_answer_fails() {
        let overload = overload_node_1(true).expect("overload");
        assert!(overload.calls > 0 && overload.served > 0);
        assert_eq!(overload.hog_threads, 0);
        let failed = overload_node_1(false).expect_err("node 2 never answers");
        assert!(failed.starts_with("call 0 to node 2: "), "{failed}");
    }
}
