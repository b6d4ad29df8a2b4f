//! What a call may return, and the verdict on what it did return.
//!
//! Every result is judged against the call's documented errors
//! ([`super::errnos`]). On top of that, a call may be certain to fail (a
//! released handle, a pointer the kernel cannot access, a size out of
//! range: success is an alarm), certain to succeed (a clean-up the
//! contract promises), limited to a few errors (what a race must end
//! with), or return a value in a known range.

use libc::{EHOSTDOWN, EINTR, EIO, ENOMEM, ENOTCONN};

use super::calls::Syscall;
use super::errnos::{allowed, RESTART_CODES};
use crate::cluster_test::io::unless;
use crate::errno::errno_name;

/// Failures that say the node or a peer went away (or memory ran out),
/// which no call can be blamed for: tolerated where a call must succeed.
pub(crate) const NODE_TROUBLE: [i32; 4] = [EHOSTDOWN, ENOTCONN, ENOMEM, EIO];

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Value {
    /// Non-negative.
    #[default]
    Any,
    Zero,
    /// Identifiers are above 0.
    Positive,
    /// `low..=high`.
    Range(i64, i64),
}

impl Value {
    fn check(self, ret: i64) -> Result<(), String> {
        let (fits, expected) = match self {
            Value::Any => (true, "any value".to_string()),
            Value::Zero => (ret == 0, "0".to_string()),
            Value::Positive => (ret > 0, "a value above 0".to_string()),
            Value::Range(low, high) => ((low..=high).contains(&ret), format!("{low}..={high}")),
        };
        unless(fits, || {
            format!("succeeded with {ret}, expected {expected}")
        })
    }
}

/// Beyond the call's documented errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Expect {
    pub(crate) must_fail: Option<&'static str>,
    /// Failures in [`NODE_TROUBLE`], and `EINTR` after a signal, excepted.
    pub(crate) must_succeed: Option<&'static str>,
    /// With [`NODE_TROUBLE`]; `EINTR` is not among them unless listed.
    pub(crate) only: Option<(&'static [i32], &'static str)>,
    pub(crate) value: Value,
}

impl Expect {
    pub(crate) fn value(value: Value) -> Expect {
        Expect {
            value,
            ..Expect::default()
        }
    }

    pub(crate) fn failing(reason: &'static str) -> Expect {
        Expect {
            must_fail: Some(reason),
            ..Expect::default()
        }
    }

    /// The first reason found is kept.
    pub(crate) fn fail_if(&mut self, condition: bool, reason: &'static str) {
        if condition && self.must_fail.is_none() {
            self.must_fail = Some(reason);
        }
    }

    /// [`Expect::fail_if`] on each in turn.
    pub(crate) fn failing_if(mut self, reasons: &[(bool, &'static str)]) -> Expect {
        for &(condition, reason) in reasons {
            self.fail_if(condition, reason);
        }
        self
    }
}

/// `signaled`: a signal reached the thread while the call ran. `Err` is an
/// alarm.
pub(crate) fn judge(
    call: Syscall,
    ret: i64,
    signaled: bool,
    expect: &Expect,
) -> Result<(), String> {
    if ret >= 0 {
        if let Some(reason) = expect.must_fail {
            return Err(format!("succeeded ({ret}), though it must fail: {reason}"));
        }
        return expect.value.check(ret);
    }
    let Ok(errno) = i32::try_from(ret.unsigned_abs()) else {
        return Err(format!("returned {ret}, which is no errno"));
    };
    let name = errno_name(errno);
    if RESTART_CODES.contains(&errno) {
        return Err(format!(
            "returned the kernel's restart code {errno}, which must never reach userspace"
        ));
    }
    if errno == EINTR {
        if !signaled {
            return Err("returned -EINTR, but no signal arrived during the call".to_string());
        }
    } else if !allowed(call, errno) {
        let call = call.name();
        let undocumented = format!("which the header does not document for {call}");
        return Err(format!("returned -{name} ({errno}), {undocumented}"));
    }
    let trouble = NODE_TROUBLE.contains(&errno);
    if let Some(reason) = expect.must_succeed {
        // A signal may end any call early.
        if !trouble && errno != EINTR {
            return Err(format!(
                "failed with -{name}, though it must succeed: {reason}"
            ));
        }
    }
    if let Some((errnos, reason)) = expect.only {
        if !trouble && !errnos.contains(&errno) {
            let wanted: Vec<String> = errnos
                .iter()
                .map(|&e| format!("-{}", errno_name(e)))
                .collect();
            let wanted = wanted.join(", ");
            return Err(format!(
                "failed with -{name}, expected one of {wanted}: {reason}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use libc::{EBADF, ECONNRESET, EOWNERDEAD, ESHUTDOWN};

    use super::*;

    fn errno(e: i32) -> i64 {
        -i64::from(e)
    }

    #[test]
    fn results_are_judged_by_the_documented_errors_and_the_expectation() {
        let none = Expect::default();
        let mut must_fail = Expect::value(Value::Zero);
        must_fail.fail_if(false, "not this");
        must_fail.fail_if(true, "a released handle");
        must_fail.fail_if(true, "a second reason");
        assert_eq!(must_fail.must_fail, Some("a released handle"));
        let succeed = Expect {
            must_succeed: Some("a mapping may always be dropped"),
            ..Expect::default()
        };
        let only = Expect {
            only: Some((&[ESHUTDOWN, libc::ENOENT], "the port was closed")),
            ..Expect::default()
        };
        let zero = Expect::value(Value::Zero);
        let positive = Expect::value(Value::Positive);
        let range = Expect::value(Value::Range(1, 64));
        let only_these = "expected one of -ESHUTDOWN, -ENOENT";
        let undocumented = "does not document for lite_free";
        let released = "must fail: a released handle";
        use Syscall::*;
        // The call, its result, whether a signal came, what was expected of
        // it, and the verdict: a failure's reason contains its text.
        let cases = [
            (Free, errno(EBADF), false, &none, Ok(())),
            (Lock, errno(EOWNERDEAD), false, &none, Ok(())),
            (Free, errno(EOWNERDEAD), false, &none, Err(undocumented)),
            (Free, -512, true, &none, Err("restart code 512")),
            (Free, i64::MIN, false, &none, Err("")),
            // EINTR needs a signal.
            (AllocRemote, errno(EINTR), true, &none, Ok(())),
            (Lock, errno(EINTR), false, &none, Err("no signal")),
            // Certain failures and successes.
            (Free, 0, false, &must_fail, Err(released)),
            (Free, errno(EBADF), false, &must_fail, Ok(())),
            (UmapLmr, errno(EBADF), false, &succeed, Err("")),
            (UmapLmr, errno(EHOSTDOWN), false, &succeed, Ok(())),
            (UmapLmr, errno(EINTR), true, &succeed, Ok(())),
            // Races may end only as documented.
            (ReceiveMessage, errno(ESHUTDOWN), false, &only, Ok(())),
            (ReceiveMessage, errno(EINTR), true, &only, Err(only_these)),
            (ReceiveMessage, errno(ECONNRESET), false, &only, Err("")),
            // Values.
            (Free, 3, false, &zero, Err("")),
            (AllocRemote, 0, false, &positive, Err("")),
            (GetTotalNode, 3, false, &range, Ok(())),
            (GetTotalNode, 65, false, &range, Err("1..=64")),
        ];
        for (call, ret, signalled, expect, verdict) in cases {
            match (judge(call, ret, signalled, expect), verdict) {
                (Ok(()), Ok(())) => {}
                (Err(reason), Err(part)) => assert!(reason.contains(part), "{call:?}: {reason}"),
                (got, _) => panic!("{call:?} returning {ret}: {got:?}, not {verdict:?}"),
            }
        }
    }
}
