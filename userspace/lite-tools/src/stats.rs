//! Latency statistics and timing.

/// Summary of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// 50th percentile.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 for one sample).
    pub stdev: f64,
}

pub use lite_bench_record::percentile;

/// Summarises `samples`; `None` when there are none.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let count = sorted.len();
    let mean = sorted.iter().sum::<f64>() / count as f64;
    let squares: f64 = sorted.iter().map(|s| (s - mean) * (s - mean)).sum();
    Some(Summary {
        count,
        min: *sorted.first()?,
        max: *sorted.last()?,
        mean,
        median: percentile(&sorted, 50.0)?,
        p10: percentile(&sorted, 10.0)?,
        p90: percentile(&sorted, 90.0)?,
        stdev: if count < 2 {
            0.0
        } else {
            (squares / (count - 1) as f64).sqrt()
        },
    })
}

/// Nanoseconds on the monotonic clock (`clock_gettime(CLOCK_MONOTONIC)`).
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    // CLOCK_MONOTONIC exists on every Linux kernel, so this cannot fail.
    debug_assert_eq!(ret, 0);
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanoseconds = u64::try_from(now.tv_nsec).unwrap_or(0);
    seconds * 1_000_000_000 + nanoseconds
}

/// Runs `operation` and returns its result and its duration in microseconds.
pub fn time_us<T>(operation: impl FnOnce() -> T) -> (T, f64) {
    let start = monotonic_ns();
    let result = operation();
    let elapsed_ns = monotonic_ns().saturating_sub(start);
    (result, elapsed_ns as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn summaries_of_known_odd_and_degenerate_samples() {
        // Unsorted on purpose: summarize must sort.
        let samples = [4.0, 2.0, 9.0, 5.0, 5.0, 4.0, 7.0, 4.0];
        let summary = summarize(&samples).expect("samples given");
        assert_eq!(summary.count, 8);
        assert_eq!(summary.min, 2.0);
        assert_eq!(summary.max, 9.0);
        assert!(close(summary.mean, 5.0));
        assert!(close(summary.median, 4.5));
        // Sum of squared deviations is 32; 32 / 7 under the root.
        assert!(close(summary.stdev, (32.0f64 / 7.0).sqrt()));
        assert!(close(summary.p10, 2.0 + 0.7 * 2.0));
        assert!(close(summary.p90, 7.0 + 0.3 * 2.0));
        // The interpolation between ranks is tested with `lite_bench_record`.
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&sorted, 0.0), Some(1.0));
        assert_eq!(percentile(&sorted, 100.0), Some(4.0));
        assert_eq!(percentile(&sorted, -1.0), None);
        // The median of an odd count is the middle sample.
        assert_eq!(summarize(&[9.0, 1.0, 5.0]).map(|s| s.median), Some(5.0));
        assert_eq!(summarize(&[]), None);
        let one = summarize(&[3.0]).expect("one sample");
        let spread = (one.min, one.max, one.median, one.stdev);
        assert_eq!(spread, (3.0, 3.0, 3.0, 0.0));
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let (value, elapsed) = time_us(|| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            7
        });
        assert_eq!(value, 7);
        assert!(elapsed >= 2000.0, "{elapsed}");
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }
}
