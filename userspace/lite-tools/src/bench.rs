//! Pieces of `lite-bench` that do not need a LITE kernel.

use std::fmt;

use crate::stats::Summary;

/// Which node holds the benchmarked memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerNode {
    /// Node 1, the first node to join, which always exists.
    Auto,
    /// A given node id.
    Id(u32),
}

impl PeerNode {
    /// The node id this designates.
    pub fn id(self) -> u32 {
        match self {
            PeerNode::Auto => 1,
            PeerNode::Id(id) => id,
        }
    }

    /// Parses `auto` or a node id in 1..`max_nodes`.
    pub fn parse(text: &str, max_nodes: u32) -> Result<PeerNode, String> {
        if text == "auto" {
            return Ok(PeerNode::Auto);
        }
        match text.parse::<u32>() {
            Ok(id) if (1..max_nodes).contains(&id) => Ok(PeerNode::Id(id)),
            Ok(_) => Err(format!("node ids are 1 to {}", max_nodes - 1)),
            Err(e) => Err(format!("expected 'auto' or a node id: {e}")),
        }
    }
}

/// Kind of measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `lite_rdma_write`.
    Write,
    /// `lite_rdma_read`.
    Read,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Write => "write",
            Operation::Read => "read",
        })
    }
}

/// The result line for one (operation, size) series:
///
/// `LITE-BENCH op=write size=64 iters=1000 median_us=12.30 p10_us=11.00 p90_us=14.25 min_us=10.50 max_us=80.00 stdev_us=3.10`
pub fn result_line(operation: Operation, size: u64, summary: &Summary) -> String {
    format!(
        "LITE-BENCH op={operation} size={size} iters={} median_us={:.2} p10_us={:.2} p90_us={:.2} min_us={:.2} max_us={:.2} stdev_us={:.2}",
        summary.count, summary.median, summary.p10, summary.p90, summary.min, summary.max, summary.stdev
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn peer_node_parsing() {
        assert_eq!(PeerNode::parse("auto", 64), Ok(PeerNode::Auto));
        assert_eq!(PeerNode::Auto.id(), 1);
        assert_eq!(PeerNode::parse("2", 64), Ok(PeerNode::Id(2)));
        assert!(PeerNode::parse("0", 64).is_err());
        assert!(PeerNode::parse("64", 64).is_err());
        assert!(PeerNode::parse("Auto", 64).is_err());
    }

    #[test]
    fn result_line_format() {
        let summary = summarize(&[20.0, 10.0, 12.5]).expect("samples");
        assert_eq!(
            result_line(Operation::Read, 64, &summary),
            "LITE-BENCH op=read size=64 iters=3 median_us=12.50 p10_us=10.50 p90_us=18.50 min_us=10.00 max_us=20.00 stdev_us=5.20"
        );
    }
}
