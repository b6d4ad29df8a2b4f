// SPDX-License-Identifier: GPL-2.0

//! Traffic prioritization: low-priority work waits while high-priority
//! work runs.
//!
//! In the spirit of the original LITE's `PRIORITY_IMPLEMENTATION_TRAFFIC_
//! PRIORITIZATION` (compiled out there): every high-priority operation is
//! counted while in flight and stamps the time it ended. A low-priority
//! operation about to start looks at both: while a high-priority operation
//! is in flight, or one ended less than `qos_window_us` ago, it sleeps
//! `qos_delay_us` and looks again, for at most `qos_max_delay_us` in all, so
//! background work is slowed but never starved. All processes on a node
//! share one connection per peer, whose send queue is first come, first
//! served: keeping low-priority transfers out of it while high-priority
//! work is active is what keeps the latter's latency low.
//!
//! The parameters are node-wide and settable at run time through debugfs
//! (`/sys/kernel/debug/lite/qos_*`).

use core::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use kernel::{prelude::*, time::Ktime};

use super::priority::Priority;
use crate::sys::sched;

/// Low-priority operations that waited for high-priority ones.
static THROTTLED: AtomicU64 = AtomicU64::new(0);

/// How many low-priority operations waited for high-priority ones.
pub(crate) fn throttled() -> u64 {
    THROTTLED.load(Ordering::Relaxed)
}

/// A run-time parameter of the throttling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param {
    /// 1 to throttle, 0 to let low-priority work run freely.
    Enabled,
    /// How long after a high-priority operation low-priority work still waits.
    WindowUs,
    /// How long a waiting low-priority operation sleeps before looking again.
    DelayUs,
    /// The longest a low-priority operation waits in all.
    MaxDelayUs,
}

impl Param {
    /// Every parameter, in the order of their ids.
    pub(crate) const ALL: [Param; 4] = [
        Param::Enabled,
        Param::WindowUs,
        Param::DelayUs,
        Param::MaxDelayUs,
    ];

    /// The parameter with id `id` (its index in [`Param::ALL`]).
    pub(crate) fn from_id(id: u32) -> Option<Param> {
        Param::ALL.get(id as usize).copied()
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Values the parameter accepts.
    fn range(self) -> core::ops::RangeInclusive<u32> {
        match self {
            Param::Enabled => 0..=1,
            Param::WindowUs => 0..=1_000_000,
            Param::DelayUs => 1..=100_000,
            Param::MaxDelayUs => 0..=10_000_000,
        }
    }
}

/// The parameters as one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    /// Whether low-priority work is throttled.
    pub(crate) enabled: bool,
    /// See [`Param::WindowUs`].
    pub(crate) window_us: u32,
    /// See [`Param::DelayUs`].
    pub(crate) delay_us: u32,
    /// See [`Param::MaxDelayUs`].
    pub(crate) max_delay_us: u32,
}

/// Defaults, in the order of [`Param::ALL`].
pub(crate) const DEFAULTS: [u32; 4] = [1, 500, 5000, 200_000];

static PARAMS: [AtomicU32; 4] = [
    AtomicU32::new(DEFAULTS[0]),
    AtomicU32::new(DEFAULTS[1]),
    AtomicU32::new(DEFAULTS[2]),
    AtomicU32::new(DEFAULTS[3]),
];

/// High-priority operations in flight on this node.
static HIGH_IN_FLIGHT: AtomicU32 = AtomicU32::new(0);

/// When the last high-priority operation ended (`ktime_get`, ns); far in
/// the past until one does.
static LAST_HIGH_END_NS: AtomicI64 = AtomicI64::new(i64::MIN / 2);

/// The current value of `param`.
pub(crate) fn param(param: Param) -> u32 {
    // PANIC: `index` is a `Param` discriminant, below `Param::ALL.len()`,
    // the length of `PARAMS`.
    PARAMS[param.index()].load(Ordering::Relaxed)
}

/// Sets `param`.
///
/// # Errors
///
/// `EINVAL` for a value out of the parameter's range.
pub(crate) fn set_param(param: Param, value: u64) -> Result {
    let value = u32::try_from(value).map_err(|_| EINVAL)?;
    if !param.range().contains(&value) {
        return Err(EINVAL);
    }
    // PANIC: as in `param`.
    PARAMS[param.index()].store(value, Ordering::Relaxed);
    Ok(())
}

/// All parameters now.
pub(crate) fn params() -> Params {
    Params {
        enabled: param(Param::Enabled) != 0,
        window_us: param(Param::WindowUs),
        delay_us: param(Param::DelayUs),
        max_delay_us: param(Param::MaxDelayUs),
    }
}

/// What a low-priority operation about to start does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Start now.
    Go,
    /// Sleep this many microseconds, then decide again.
    Wait(u32),
}

/// The throttling rule: whether a low-priority operation that has waited
/// `waited_us` so far may start, given `high_in_flight` high-priority
/// operations and `since_high_us` microseconds since the last one ended.
pub(crate) fn decide(
    params: &Params,
    high_in_flight: u32,
    since_high_us: u64,
    waited_us: u64,
) -> Decision {
    if !params.enabled || waited_us >= u64::from(params.max_delay_us) {
        return Decision::Go;
    }
    if high_in_flight == 0 && since_high_us >= u64::from(params.window_us) {
        return Decision::Go;
    }
    // PANIC: `waited_us < max_delay_us` (checked above).
    let left = u64::from(params.max_delay_us) - waited_us;
    Decision::Wait(u64::from(params.delay_us).min(left) as u32)
}

/// An operation admitted to run; dropping it ends the operation for the
/// throttling's purposes.
pub(crate) struct Admission {
    high: bool,
    /// Microseconds the operation waited before it was admitted.
    pub(crate) throttled_us: u64,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.high {
            LAST_HIGH_END_NS.store(Ktime::ktime_get().to_ns(), Ordering::Relaxed);
            HIGH_IN_FLIGHT.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Admits an operation of `priority`: a high-priority one is counted as in
/// flight until the returned value is dropped; a low-priority one first
/// waits as [`decide`] says (sleeping, without holding any lock).
pub(crate) fn admit(priority: Priority) -> Admission {
    match priority {
        Priority::High => {
            HIGH_IN_FLIGHT.fetch_add(1, Ordering::Acquire);
            Admission {
                high: true,
                throttled_us: 0,
            }
        }
        Priority::None => Admission {
            high: false,
            throttled_us: 0,
        },
        Priority::Low => {
            let start = Ktime::ktime_get().to_ns();
            let mut waited_us = 0u64;
            loop {
                let now = Ktime::ktime_get().to_ns();
                let since_high_ns = now.saturating_sub(LAST_HIGH_END_NS.load(Ordering::Relaxed));
                let since_high_us = u64::try_from(since_high_ns / 1000).unwrap_or(0);
                let in_flight = HIGH_IN_FLIGHT.load(Ordering::Acquire);
                match decide(&params(), in_flight, since_high_us, waited_us) {
                    Decision::Go => break,
                    Decision::Wait(us) => sched::sleep_us(us),
                }
                // PANIC: the monotonic clock does not go back and stays far
                // below `i64::MAX`, so the difference is in `0..=now`.
                waited_us = u64::try_from((Ktime::ktime_get().to_ns() - start) / 1000).unwrap_or(0);
            }
            if waited_us > 0 {
                THROTTLED.fetch_add(1, Ordering::Relaxed);
            }
            Admission {
                high: false,
                throttled_us: waited_us,
            }
        }
    }
}
