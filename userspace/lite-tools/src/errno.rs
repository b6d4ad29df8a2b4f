//! Readable errno names and checks of raw system call results.

use std::io;

use libc::c_long;

/// Symbolic name of the errnos LITE uses, or `"?"`.
pub fn errno_name(errno: i32) -> &'static str {
    // Each name is that of its libc constant.
    macro_rules! named {
        { $($name:ident)* } => {
            $(if errno == libc::$name {
                return stringify!($name);
            })*
        };
    }
    named! {
        EPERM ENOENT EINTR EIO EBADF EAGAIN ENOMEM EACCES EFAULT EBUSY EEXIST EDEADLK ENODEV
        EINVAL ENOSPC ERANGE ENOSYS EPROTO EMSGSIZE EADDRINUSE EALREADY EOVERFLOW ECONNRESET
        ESHUTDOWN EISCONN ENOTCONN ETIMEDOUT ECONNREFUSED EHOSTDOWN EHOSTUNREACH EOWNERDEAD
        EKEYREVOKED ENOKEY EKEYREJECTED EDQUOT
    }
    match errno {
        // The kernel-internal restart code can leak out of an interrupted call.
        512 => "ERESTARTSYS",
        _ => "?",
    }
}

/// A raw result for humans: `0`, `5` or `-22 (-EINVAL)`.
pub fn describe_result(ret: c_long) -> String {
    match ret.checked_neg().map(i32::try_from) {
        Some(Ok(errno)) if ret < 0 => format!("{ret} (-{})", errno_name(errno)),
        _ => ret.to_string(),
    }
}

/// An error from the safe API for humans, with the errno's name.
pub fn describe_error(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(errno) => format!("-{} ({error})", errno_name(errno)),
        None => error.to_string(),
    }
}

/// Passes when `ret` is exactly `-errno`.
pub fn expect_errno(ret: c_long, errno: i32) -> Result<(), String> {
    if ret == -c_long::from(errno) {
        Ok(())
    } else {
        Err(format!(
            "expected -{} (-{errno}), got {}",
            errno_name(errno),
            describe_result(ret)
        ))
    }
}

/// Passes when `ret` is 0.
pub fn expect_zero(ret: c_long) -> Result<(), String> {
    expect_value(ret, 0)
}

/// Passes when `ret` is exactly `expected`.
pub fn expect_value(ret: c_long, expected: c_long) -> Result<(), String> {
    if ret == expected {
        Ok(())
    } else {
        Err(format!("expected {expected}, got {}", describe_result(ret)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_results_and_expectations_are_described_with_names() {
        assert_eq!(errno_name(libc::ENOTCONN), "ENOTCONN");
        assert_eq!(errno_name(libc::EHOSTUNREACH), "EHOSTUNREACH");
        assert_eq!(errno_name(libc::EHOSTDOWN), "EHOSTDOWN");
        assert_eq!(errno_name(libc::EDEADLK), "EDEADLK");
        assert_eq!(errno_name(libc::EOWNERDEAD), "EOWNERDEAD");
        assert_eq!(errno_name(130), "EOWNERDEAD");
        assert_eq!(errno_name(libc::EDQUOT), "EDQUOT");
        assert_eq!(errno_name(100_000), "?");
        assert_eq!(describe_result(0), "0");
        assert_eq!(describe_result(42), "42");
        assert_eq!(describe_result(-22), "-22 (-EINVAL)");
        assert_eq!(describe_result(c_long::MIN), c_long::MIN.to_string());
        let error = io::Error::from_raw_os_error(libc::EACCES);
        assert!(describe_error(&error).starts_with("-EACCES ("));
        assert_eq!(expect_errno(-14, libc::EFAULT), Ok(()));
        let got_zero = "expected -EFAULT (-14), got 0";
        assert_eq!(expect_errno(0, libc::EFAULT), Err(got_zero.to_string()));
        let got_einval = "expected -EFAULT (-14), got -22 (-EINVAL)";
        assert_eq!(expect_errno(-22, libc::EFAULT), Err(got_einval.into()));
        assert_eq!(expect_zero(0), Ok(()));
        assert!(expect_zero(-1).is_err());
        assert!(expect_zero(3).is_err());
    }
}
