// SPDX-License-Identifier: GPL-2.0

//! Counters of the operations this node issues, per operation type and
//! priority, with latency histograms; shown as text in
//! `/sys/kernel/debug/lite/stats`.
//!
//! Counting is lock-free (relaxed atomics) so it costs the data path next to
//! nothing; a reader sees each counter exact, not all of them at one instant.

use core::{
    fmt::{self, Write},
    sync::atomic::{AtomicU64, Ordering},
};
use kernel::{prelude::*, time::Ktime};

pub(crate) use super::op_kind::OpKind;
use super::{
    admission::Admission,
    priority::{Priority, PRIORITIES},
    stats::Stats,
};

const KINDS: usize = OpKind::ALL.len();

/// Latency buckets: at most 2^i microseconds for i in 0..=20, then more.
pub(crate) const LATENCY_BUCKETS: usize = 22;

/// The bucket of a latency of `us` microseconds.
pub(crate) fn latency_bucket(us: u64) -> usize {
    if us <= 1 {
        return 0;
    }
    // PANIC: `us > 1`, and `leading_zeros() <= 64`.
    let bits = (64 - (us - 1).leading_zeros()) as usize;
    bits.min(LATENCY_BUCKETS - 1)
}

struct OpCounters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    throttled_us: AtomicU64,
    latency: [AtomicU64; LATENCY_BUCKETS],
}

impl OpCounters {
    const fn new() -> Self {
        OpCounters {
            ops: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            throttled_us: AtomicU64::new(0),
            latency: [const { AtomicU64::new(0) }; LATENCY_BUCKETS],
        }
    }
}

static OPS: [[OpCounters; PRIORITIES]; KINDS] =
    [const { [const { OpCounters::new() }; PRIORITIES] }; KINDS];

/// Node-wide event counters that are not per operation type.
pub(crate) struct Counters {
    /// Atomic operations issued.
    pub(crate) atomics: AtomicU64,
    /// `lite_lock` calls that acquired a lock.
    pub(crate) lock_acquires: AtomicU64,
    /// Of which had to wait for another holder.
    pub(crate) lock_waits: AtomicU64,
}

/// This node's event counters.
pub(crate) static COUNTERS: Counters = Counters {
    atomics: AtomicU64::new(0),
    lock_acquires: AtomicU64::new(0),
    lock_waits: AtomicU64::new(0),
};

/// Records one finished operation.
pub(crate) fn record(
    kind: OpKind,
    priority: Priority,
    bytes: u64,
    succeeded: bool,
    latency_us: u64,
    throttled_us: u64,
) {
    // PANIC: `OpKind::ALL` lists every kind with `ALL[i] as usize == i`
    // (checked at compile time in `op_kind`), so `kind as usize < KINDS`;
    // `priority.index() < PRIORITIES`.
    let counters = &OPS[kind as usize][priority.index()];
    counters.ops.fetch_add(1, Ordering::Relaxed);
    if succeeded {
        counters.bytes.fetch_add(bytes, Ordering::Relaxed);
    } else {
        counters.errors.fetch_add(1, Ordering::Relaxed);
    }
    if throttled_us > 0 {
        counters.throttled.fetch_add(1, Ordering::Relaxed);
        counters
            .throttled_us
            .fetch_add(throttled_us, Ordering::Relaxed);
    }
    // PANIC: `latency_bucket` returns at most `LATENCY_BUCKETS - 1`.
    counters.latency[latency_bucket(latency_us)].fetch_add(1, Ordering::Relaxed);
}

/// Times one operation from its admission to [`OpTimer::finish`].
pub(crate) struct OpTimer {
    kind: OpKind,
    priority: Priority,
    start_ns: i64,
}

impl OpTimer {
    /// Starts timing an operation of `kind` at `priority`.
    pub(crate) fn start(kind: OpKind, priority: Priority) -> Self {
        OpTimer {
            kind,
            priority,
            start_ns: Ktime::ktime_get().to_ns(),
        }
    }

    /// Records the operation, which moved `bytes` if it succeeded, and
    /// passes its result through. `admission` tells how long it was
    /// throttled; it is released (ending a high-priority operation) here.
    pub(crate) fn finish<T>(
        self,
        admission: Admission,
        bytes: u64,
        result: Result<T>,
    ) -> Result<T> {
        // PANIC: the monotonic clock does not go back and stays far below
        // `i64::MAX`, so the difference is in `0..=now`.
        let elapsed_ns = Ktime::ktime_get().to_ns() - self.start_ns;
        let latency_us = u64::try_from(elapsed_ns / 1000).unwrap_or(0);
        let throttled_us = admission.throttled_us;
        drop(admission);
        record(
            self.kind,
            self.priority,
            bytes,
            result.is_ok(),
            latency_us,
            throttled_us,
        );
        result
    }
}

/// Writes the node's counters as text: `name value` lines for `stats`,
/// then one line per operation type and priority.
pub(crate) fn write_text(out: &mut impl Write, stats: &Stats) -> fmt::Result {
    for (name, value) in stats.named() {
        writeln!(out, "{name} {value}")?;
    }
    for kind in OpKind::ALL {
        for priority in Priority::ALL {
            // PANIC: as in `record`.
            let c = &OPS[kind as usize][priority.index()];
            write!(
                out,
                "op={} priority={} ops={} bytes={} errors={} throttled={} throttled_us={} latency_us=",
                kind.name(),
                priority.name(),
                c.ops.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed),
                c.errors.load(Ordering::Relaxed),
                c.throttled.load(Ordering::Relaxed),
                c.throttled_us.load(Ordering::Relaxed),
            )?;
            for (i, bucket) in c.latency.iter().enumerate() {
                let n = bucket.load(Ordering::Relaxed);
                // PANIC: `i < LATENCY_BUCKETS`, and the shift runs only for
                // `i < LATENCY_BUCKETS - 1`, well below 64.
                if i + 1 < LATENCY_BUCKETS {
                    write!(out, "{}:{},", 1u64 << i, n)?;
                } else {
                    writeln!(out, "inf:{n}")?;
                }
            }
        }
    }
    Ok(())
}

/// A [`Write`] into a byte buffer that fails once the buffer is full.
pub(crate) struct TextBuffer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> TextBuffer<'a> {
    /// An empty text in `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        TextBuffer { buf, len: 0 }
    }

    /// Bytes written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Write for TextBuffer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let room = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        // PANIC: `room` is `end - len == s.len()` bytes long.
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}
