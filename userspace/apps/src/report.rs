//! The one line each application run prints, read by `cargo xtask bench`:
//!
//! ```text
//! LITE-APP app=wordcount transport=lite nodes=3 work=16777216 unit=bytes seconds=1.250000 per_s=13421772.80 checked=yes
//! ```

use std::fmt;
use std::time::Duration;

/// What one run of an application did, how long it took, and whether its
/// result was checked against the single-process reference.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    /// Application and job: `log`, `wordcount`, `invindex`, `pagerank`,
    /// `components`.
    pub app: &'static str,
    /// Transport: `lite`, `tcp` or `local`.
    pub transport: &'static str,
    /// Ranks (nodes) that took part.
    pub nodes: usize,
    /// Amount of work, in `unit`s (records, bytes, edges).
    pub work: u64,
    /// Unit of `work`.
    pub unit: &'static str,
    /// Wall-clock time of the measured part.
    pub elapsed: Duration,
    /// Whether the result matched the reference.
    pub checked: bool,
}

impl AppReport {
    /// Work per second.
    pub fn per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.work as f64 / secs
        } else {
            0.0
        }
    }
}

impl fmt::Display for AppReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LITE-APP app={} transport={} nodes={} work={} unit={} seconds={:.6} per_s={:.2} checked={}",
            self.app,
            self.transport,
            self.nodes,
            self.work,
            self.unit,
            self.elapsed.as_secs_f64(),
            self.per_second(),
            if self.checked { "yes" } else { "no" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_carries_every_field() {
        let report = AppReport {
            app: "wordcount",
            transport: "lite",
            nodes: 3,
            work: 1000,
            unit: "bytes",
            elapsed: Duration::from_millis(500),
            checked: true,
        };
        assert_eq!(
            report.to_string(),
            "LITE-APP app=wordcount transport=lite nodes=3 work=1000 unit=bytes \
             seconds=0.500000 per_s=2000.00 checked=yes"
        );
    }
}
