//! One step of the cluster-size curve: on every node of an N-node cluster,
//! the time its join took, the latency of barriers of all N, and all-to-all
//! RPC, every node calling every other node's echo server at once.

use lite_bench_record::{Record, Scale};
use lite_tools::bench::emit;
use lite_tools::pattern;
use lite_tools::stats::{monotonic_ns, summarize};

use super::{
    barrier_of, echo_call, micros_since, time_each, wait_for_server, RpcServer, Steps,
    RPC_THROUGHPUT_SIZE,
};

/// What one node measures.
pub(crate) struct Plan {
    /// Nodes of the cluster, all running the same step.
    pub(crate) nodes: u32,
    /// This node's id.
    pub(crate) me: u32,
    /// How long this node's join took, if it joined now.
    pub(crate) join_us: Option<f64>,
    /// Barriers timed.
    pub(crate) barriers: usize,
    /// Calls to each peer in the all-to-all RPC.
    pub(crate) calls: usize,
}

/// Runs the step with the other nodes and prints this node's line.
pub(crate) fn measure(plan: &Plan) -> Result<(), String> {
    let mut steps = Steps {
        nodes: plan.nodes,
        failure: None,
    };
    // Every node has joined.
    steps.step(|| Ok(()));
    let barriers = steps.step(|| time_barriers(plan.nodes, plan.barriers));
    // One echo thread per peer: each peer calls from one thread.
    let peers: Vec<u32> = (1..=plan.nodes).filter(|&n| n != plan.me).collect();
    let server = steps.step(|| RpcServer::open(RPC_THROUGHPUT_SIZE, peers.len()));
    let rpc = steps.step(|| all_to_all(&peers, plan.calls));
    let stopped = steps.step(|| server.ok_or("no RPC server")?.stop());
    let finished = steps.finish();
    let (barrier_median, barrier_p90) = barriers.ok_or("no barriers")?;
    let (calls, elapsed_us) = rpc.ok_or("no all-to-all RPC")?;
    stopped.ok_or("the RPC server did not stop")?;
    finished?;
    emit(&Record::Scale(Scale {
        nodes: u64::from(plan.nodes),
        node: u64::from(plan.me),
        join_us: plan.join_us,
        barriers: plan.barriers as u64,
        barrier_median,
        barrier_p90,
        rpc_peers: peers.len() as u64,
        rpc_calls: calls as u64,
        rpc_elapsed_us: elapsed_us,
        rpc_calls_per_s: calls as f64 / elapsed_us.max(f64::MIN_POSITIVE) * 1e6,
    }));
    Ok(())
}

/// Times `count` barriers of all `nodes`: (median, 90th percentile) in
/// microseconds.
fn time_barriers(nodes: u32, count: usize) -> Result<(f64, f64), String> {
    let mut samples = Vec::with_capacity(count);
    time_each(count, &mut samples, || barrier_of(nodes))?;
    let summary = summarize(&samples).ok_or("no barrier samples")?;
    Ok((summary.median, summary.p90))
}

/// Calls every one of `peers` from a thread of its own, `calls` 64-byte
/// echo calls each, all at once: (calls made, microseconds until the last
/// thread finished). Every reply is checked.
fn all_to_all(peers: &[u32], calls: usize) -> Result<(usize, f64), String> {
    for &peer in peers {
        wait_for_server(peer)?;
    }
    let began = monotonic_ns();
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = peers
            .iter()
            .map(|&peer| {
                scope.spawn(move || {
                    let size = RPC_THROUGHPUT_SIZE as usize;
                    let seed = pattern::seed(&[u64::from(peer), size as u64, 0x5ca1e]);
                    let mut request = vec![0u8; size];
                    pattern::fill(seed, 0, &mut request);
                    let mut reply = vec![0u8; size];
                    for _ in 0..calls {
                        pattern::poison(seed, 0, &mut reply);
                        echo_call(peer, &request, &mut reply)?;
                        pattern::verify(seed, 0, &reply)
                            .map_err(|m| format!("RPC to node {peer} got a wrong reply: {m}"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("an RPC thread panicked".into()))
            })
            .collect()
    });
    let elapsed_us = micros_since(began);
    results
        .into_iter()
        .collect::<Result<Vec<()>, String>>()
        .map_err(|e| format!("all-to-all RPC: {e}"))?;
    Ok((calls * peers.len(), elapsed_us))
}
