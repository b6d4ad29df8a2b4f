//! The cluster-size curve: with 2, 4 and 8 nodes, how long joining took,
//! the latency of a barrier of all nodes, and all-to-all RPC throughput
//! (every node calling every other at once). Its table, summary line and
//! charts.
//!
//! All VMs share the host's two cores under TCG, so with 8 nodes each VM
//! gets a quarter of a core: the aggregate throughput measures LITE's
//! protocol under that limit, not how it would scale on real machines.

use std::collections::BTreeSet;

use super::charts::{by_size, LineChart};
use super::parse::{Measurements, Scale};
use super::report::{say_curve, Table};
use super::rounds::Range;

/// The figures of one cluster of `nodes`, over the nodes that reported:
/// the joins that were timed, the nodes' median barriers (each range over
/// the nodes) and their all-to-all calls per second, added up.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSize {
    pub nodes: u64,
    pub reported: usize,
    pub join_ms: Option<Range>,
    pub barrier_ms: Option<Range>,
    pub rpc_calls_per_s: f64,
}

/// The cluster sizes measured, ascending.
pub fn sizes(m: &Measurements) -> Vec<ClusterSize> {
    let nodes: BTreeSet<u64> = m.cluster_scale.keys().map(|&(n, _)| n).collect();
    nodes
        .into_iter()
        .map(|n| {
            let points: Vec<&Scale> = m
                .cluster_scale
                .range((n, 0)..=(n, u64::MAX))
                .map(|(_, p)| p)
                .collect();
            let joins: Vec<f64> = points
                .iter()
                .filter_map(|p| p.join_us)
                .map(|us| us / 1000.0)
                .collect();
            let barriers: Vec<f64> = points.iter().map(|p| p.barrier_median / 1000.0).collect();
            ClusterSize {
                nodes: n,
                reported: points.len(),
                join_ms: Range::of(&joins),
                barrier_ms: Range::of(&barriers),
                rpc_calls_per_s: points.iter().map(|p| p.rpc_calls_per_s).sum(),
            }
        })
        .collect()
}

fn millis(value: Option<Range>) -> [String; 2] {
    match value {
        Some(Range { median, min, max }) => [format!("{median:.1}"), format!("{min:.1}-{max:.1}")],
        None => ["-".to_string(), "-".to_string()],
    }
}

/// The curve as table lines, one row per cluster size.
pub fn table(m: &Measurements) -> Vec<String> {
    let note =
        "every node of an N-node cluster: its join (ms, median and range over the nodes), a \
                barrier of all N (each node's median, ms: median and range over the nodes), and \
                64 B RPC from every node to every other at once (calls per second of all nodes)";
    let table = Table::noted(
        &[note],
        "<6 nodes|>9 reported|>9 join ms|>13 join range|>12 barrier ms|>13 barrier range|\
         >14 all-to-all/s",
    );
    table.lines(sizes(m).into_iter().map(|size| {
        let counts = [size.nodes.to_string(), size.reported.to_string()];
        let times = [millis(size.join_ms), millis(size.barrier_ms)].concat();
        let calls = format!("{:.0}", size.rpc_calls_per_s);
        counts.into_iter().chain(times).chain([calls])
    }))
}

/// Prints the curve's table and summary; `barriers` timed per node and
/// `calls` per peer.
pub fn say(barriers: u32, calls: u32, m: &Measurements) {
    say_curve(
        format!("cluster-size curve ({barriers} barriers per node, {calls} calls to each peer)"),
        !m.cluster_scale.is_empty(),
        "scale records",
        || table(m),
        || summary(m),
    );
}

/// The cluster sizes every node of which reported: the others' throughput
/// would be missing some nodes' calls.
fn complete(m: &Measurements) -> Vec<ClusterSize> {
    sizes(m)
        .into_iter()
        .filter(|s| s.reported as u64 == s.nodes)
        .collect()
}

/// One line on the curve from the fewest nodes to the most, over the
/// sizes every node of which reported, with what limits it here; `None`
/// without a curve. It sets no target: on two host cores the VMs of a
/// larger cluster each get less CPU.
pub fn summary(m: &Measurements) -> Option<String> {
    if m.cluster_scale.is_empty() {
        return None;
    }
    let sizes = complete(m);
    let partial = match self::sizes(m).len() - sizes.len() {
        0 => String::new(),
        n => format!(" ({n} cluster sizes left out: not every node reported)"),
    };
    let (Some(first), Some(last)) = (sizes.first(), sizes.last()) else {
        return Some(format!("cluster size: not measured{partial}"));
    };
    let median = |v: Option<Range>| v.map_or("-".to_string(), |r| format!("{:.1}", r.median));
    Some(format!(
        "cluster size {} -> {} nodes (no target: the VMs share two host cores under TCG): join \
         {} -> {} ms, barrier {} -> {} ms, all-to-all RPC {:.0} -> {:.0} calls/s{partial}",
        first.nodes,
        last.nodes,
        median(first.join_ms),
        median(last.join_ms),
        median(first.barrier_ms),
        median(last.barrier_ms),
        first.rpc_calls_per_s,
        last.rpc_calls_per_s
    ))
}

/// The curve's charts: join and barrier time, and all-to-all throughput,
/// against cluster size (those every node of which reported); left out
/// without data.
pub fn charts(m: &Measurements) -> Vec<LineChart> {
    let sizes = complete(m);
    type Value = fn(&ClusterSize) -> Option<f64>;
    let of = |value: Value| by_size(sizes.iter().filter_map(|s| Some((s.nodes, value(s)?))));
    let times: [(&str, Value); 3] = [
        ("join, median", |s| Some(s.join_ms?.median)),
        ("join, slowest", |s| Some(s.join_ms?.max)),
        ("barrier, median", |s| Some(s.barrier_ms?.median)),
    ];
    let times = Vec::from(times.map(|(name, value)| (name.to_string(), of(value))));
    let rpc = "LITE, every node calling every other".to_string();
    let charts = [
        LineChart::of(
            "cluster-join-barrier",
            "Joining and barriers against cluster size".into(),
            ("nodes", "milliseconds"),
            (true, true),
            times,
        ),
        LineChart::of(
            "cluster-rpc",
            "All-to-all 64 B RPC against cluster size".into(),
            ("nodes", "calls per second, all nodes"),
            (true, false),
            vec![(rpc, of(|s| Some(s.rpc_calls_per_s)))],
        ),
    ];
    charts.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::tests::{words_of, CLUSTER_SCALE_LOG};

    fn curve() -> Measurements {
        let mut m = Measurements::default();
        m.add_log("cluster4/node1", CLUSTER_SCALE_LOG);
        m.add_log(
            "cluster2/node1",
            "LITE-RECORD {\"scale\":{\"nodes\":2,\"node\":1,\"join_us\":100000,\"barriers\":50,\"barrier_median\":3000,\"barrier_p90\":4000,\"rpc_peers\":1,\"rpc_calls\":200,\"rpc_elapsed_us\":1,\"rpc_calls_per_s\":800}}\n\
             LITE-RECORD {\"scale\":{\"nodes\":2,\"node\":2,\"join_us\":120000,\"barriers\":50,\"barrier_median\":3500,\"barrier_p90\":4000,\"rpc_peers\":1,\"rpc_calls\":200,\"rpc_elapsed_us\":1,\"rpc_calls_per_s\":700}}\n",
        );
        m
    }

    /// [`curve`] with the 4-node step's last node too.
    fn full() -> Measurements {
        let mut m = curve();
        m.add_log(
            "cluster4/node4",
            "LITE-RECORD {\"scale\":{\"nodes\":4,\"node\":4,\"join_us\":300000,\"barriers\":50,\"barrier_median\":8500,\"barrier_p90\":9000,\"rpc_peers\":3,\"rpc_calls\":600,\"rpc_elapsed_us\":1,\"rpc_calls_per_s\":300}}\n",
        );
        m
    }

    #[test]
    fn each_size_sums_throughput_and_takes_medians_over_its_nodes() {
        let rows = words_of(&table(&curve()));
        let sizes = [
            "2 2 110.0 100.0-120.0 3.2 3.0-3.5 1500",
            "4 3 330.0 250.0-410.0 8.5 8.0-9.0 1700",
        ];
        assert_eq!(rows[2..], sizes);
        // The 4-node step misses a node: left out of the summary.
        let partial =
            "cluster size 2 -> 2 nodes (no target: the VMs share two host cores under TCG): \
             join 110.0 -> 110.0 ms, barrier 3.2 -> 3.2 ms, all-to-all RPC 1500 -> 1500 calls/s \
             (1 cluster sizes left out: not every node reported)";
        assert_eq!(summary(&curve()).expect("a summary"), partial);
        let full_curve =
            "cluster size 2 -> 4 nodes (no target: the VMs share two host cores under TCG): \
             join 110.0 -> 300.0 ms, barrier 3.2 -> 8.5 ms, all-to-all RPC 1500 -> 2000 calls/s";
        assert_eq!(summary(&full()).expect("a summary"), full_curve);
        assert_eq!(summary(&Measurements::default()), None);
    }

    #[test]
    fn the_charts_plot_times_and_throughput_by_size() {
        let drawn = charts(&full());
        assert_eq!(drawn.len(), 2);
        assert_eq!(drawn[0].series[0].1, [(2.0, 110.0), (4.0, 300.0)]);
        assert_eq!(drawn[1].series[0].1, [(2.0, 1500.0), (4.0, 2000.0)]);
        // A size with a node missing is not plotted.
        assert_eq!(charts(&curve())[1].series[0].1, [(2.0, 1500.0)]);
        assert!(charts(&Measurements::default()).is_empty());
    }
}
