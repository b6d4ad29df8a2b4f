//! Which errors each call may return, from the uapi header's contracts
//! (`include/uapi/linux/lite.h`), and how results are counted.
//!
//! The header lists errors common to every call, then documents each
//! call's own. [`Syscall::documented`] is that list per call; a host test reads the
//! header's comments and checks that the table names every error the
//! header gives a call, and nothing the header does not document for it
//! (or for a call its text refers to, as `lite_send` does with "errors as
//! lite_send_reply_imm").
//!
//! `EINTR` is judged apart: any call may be interrupted by a signal while
//! it waits for a peer, so `EINTR` passes for every call, but only if a
//! signal reached the calling thread during the call.

use libc::{
    EACCES, EBADF, EFAULT, EHOSTDOWN, EHOSTUNREACH, EINVAL, EIO, EKEYREVOKED, ENOMEM, ENOTCONN,
    EPERM,
};

use super::calls::Syscall;

pub(crate) const COMMON: [i32; 11] = [
    ENOTCONN,
    EFAULT,
    EINVAL,
    EBADF,
    EACCES,
    EPERM,
    EKEYREVOKED,
    EHOSTUNREACH,
    EHOSTDOWN,
    ENOMEM,
    EIO,
];

/// The kernel's restart codes (`ERESTARTSYS` .. `ERESTART_RESTARTBLOCK`),
/// which must never reach userspace: a signal handler without
/// `SA_RESTART` turns them into `EINTR`.
pub(crate) const RESTART_CODES: std::ops::RangeInclusive<i32> = 512..=516;

/// See the module comment for `EINTR`.
pub(crate) fn allowed(call: Syscall, errno: i32) -> bool {
    COMMON.contains(&errno) || call.documented().contains(&errno)
}

/// 0 for success.
pub(crate) fn errno_of(ret: i64) -> i32 {
    if ret < 0 {
        ret.unsigned_abs() as i32
    } else {
        0
    }
}

/// Per call: success, each errno up to [`MAX_ERRNO`], the restart codes,
/// anything else.
pub(crate) const OUTCOMES: usize = MAX_ERRNO as usize + 3;

/// `EHWPOISON`.
pub(crate) const MAX_ERRNO: i32 = 133;

const RESTART_BUCKET: usize = MAX_ERRNO as usize + 1;
/// Neither success nor an errno.
const OTHER_BUCKET: usize = MAX_ERRNO as usize + 2;

pub(crate) fn outcome_bucket(ret: i64) -> usize {
    if ret >= 0 {
        return 0;
    }
    match ret.checked_neg().map(i32::try_from) {
        Some(Ok(errno)) if (1..=MAX_ERRNO).contains(&errno) => errno as usize,
        Some(Ok(errno)) if RESTART_CODES.contains(&errno) => RESTART_BUCKET,
        _ => OTHER_BUCKET,
    }
}

/// `ok`, `EINVAL` (`E123` for an errno without a name here), `ERESTART`,
/// `other`.
pub(crate) fn outcome_name(bucket: usize) -> String {
    match bucket {
        0 => "ok".to_string(),
        RESTART_BUCKET => "ERESTART".to_string(),
        OTHER_BUCKET => "other".to_string(),
        errno => match crate::errno::errno_name(errno as i32) {
            "?" => format!("E{errno}"),
            name => name.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use libc::{EAGAIN, ECONNREFUSED, ECONNRESET, EINTR, EOWNERDEAD, ESHUTDOWN};

    use super::*;

    const HEADER: &str = include_str!("../../../../lite-api-c/include/uapi/linux/lite.h");

    #[derive(Debug, Default)]
    struct HeaderCall {
        arity: usize,
        direct: BTreeSet<i32>,
        refers_to: BTreeSet<String>,
    }

    /// Errors the header names in one call's description that are other
    /// calls' results (what `lite_unregister_application` does to blocked
    /// receivers and queued callers, what a receiver's exit does to its
    /// callers), not the call's own.
    const OTHERS_RESULTS: [(Syscall, i32); 3] = [
        (Syscall::UnregisterApplication, ESHUTDOWN),
        (Syscall::UnregisterApplication, ECONNREFUSED),
        (Syscall::ReceiveMessage, ECONNRESET),
    ];

    fn errno_value(name: &str) -> Option<i32> {
        (1..=512).find(|&errno| crate::errno::errno_name(errno) == name)
    }

    fn prefix(text: &str, keep: impl Fn(char) -> bool) -> &str {
        &text[..text.find(|c: char| !keep(c)).unwrap_or(text.len())]
    }

    /// `-ERESTARTSYS` as the `-EINTR` userspace sees; panics on one this
    /// test cannot name.
    fn errnos_in(text: &str) -> BTreeSet<i32> {
        let in_name = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
        let unknown = |name| panic!("the header names {name}, unknown to this test");
        text.match_indices("-E")
            .filter(|&(at, _)| !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric()))
            .map(|(at, _)| prefix(&text[at + 1..], in_name))
            .filter(|name| name.len() >= 3)
            .map(|name| errno_value(name).unwrap_or_else(|| unknown(name)))
            .map(|errno| if errno == 512 { EINTR } else { errno })
            .collect()
    }

    fn calls_named_in(text: &str) -> BTreeSet<String> {
        let in_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
        text.match_indices("lite_")
            .map(|(at, _)| prefix(&text[at..], in_name))
            .filter(|name| Syscall::from_name(name).is_some())
            .map(str::to_string)
            .collect()
    }

    /// Its first comment.
    fn header_common(header: &str) -> BTreeSet<i32> {
        let start = header
            .find("Errors common to every call")
            .expect("the header lists the common errors");
        let end = start + header[start..].find("*/").expect("the comment ends");
        errnos_in(&header[start..end])
    }

    /// A description is the `*   `-indented text of a
    /// comment after one or more prototypes (`* long lite_...(`, over as
    /// many lines as it takes), and ends at the next prototype or at a
    /// line that is not indented (a new section, or the comment's end).
    fn header_calls(header: &str) -> BTreeMap<String, HeaderCall> {
        let mut calls: BTreeMap<String, HeaderCall> = BTreeMap::new();
        // Each description with the calls it follows; the last one is read
        // while `reading`.
        let mut groups: Vec<(Vec<String>, String)> = Vec::new();
        let mut reading = false;
        let mut bodies = header
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix('*'));
        while let Some(body) = bodies.next() {
            if let Some(signature) = body.strip_prefix(" long lite_") {
                let mut prototype = signature.to_string();
                while !prototype.contains(')') {
                    let next = bodies.next().expect("a prototype ends");
                    prototype.push_str(next.trim());
                }
                let in_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
                let name = format!("lite_{}", prefix(signature, in_name));
                let open = prototype.find('(').expect("a prototype has arguments");
                let (params, rest) = prototype[open + 1..].split_once(')').unwrap_or_default();
                let params = params.trim();
                calls.entry(name.clone()).or_default().arity = match params {
                    "" | "void" => 0,
                    _ => params.split(',').count(),
                };
                match groups.last_mut() {
                    Some((names, text)) if reading && text.trim().is_empty() => {
                        names.push(name);
                        text.push_str(&format!("{rest}\n"));
                    }
                    _ => groups.push((vec![name], format!("{rest}\n"))),
                }
                reading = true;
            } else if !body.starts_with("   ") && !body.trim().is_empty() {
                reading = false;
            } else if let Some((_, text)) = groups.last_mut().filter(|_| reading) {
                text.push_str(&format!("{body}\n"));
            }
        }
        for (names, text) in groups {
            for name in names {
                let entry = calls.entry(name.clone()).or_default();
                entry.direct.extend(errnos_in(&text));
                let mut named = calls_named_in(&text);
                named.remove(&name);
                entry.refers_to.extend(named);
            }
        }
        calls
    }

    fn names(errnos: &BTreeSet<i32>) -> Vec<&'static str> {
        errnos
            .iter()
            .map(|&e| crate::errno::errno_name(e))
            .collect()
    }

    #[test]
    fn the_tables_cover_every_call_and_every_error_the_header_documents() {
        let header = header_calls(HEADER);
        let common: BTreeSet<i32> = COMMON.into_iter().collect();
        assert_eq!(names(&header_common(HEADER)), names(&common));
        let header_names: BTreeSet<&str> = header.keys().map(String::as_str).collect();
        let table_names: BTreeSet<&str> = Syscall::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(header_names, table_names, "documented calls");
        let mut problems = Vec::new();
        for call in Syscall::ALL {
            let (name, arity, documented) = (call.name(), call.arity(), &header[call.name()]);
            if documented.arity != arity {
                let documented = documented.arity;
                problems.push(format!(
                    "{name}: the header's prototype has {documented} arguments, the fuzzer passes {arity}"
                ));
            }
            let table: BTreeSet<i32> = call.documented().iter().copied().collect();
            let others_result = |errno: &i32| OTHERS_RESULTS.contains(&(call, *errno));
            let missing: BTreeSet<i32> = (documented.direct.iter())
                .filter(|e| !others_result(e) && !table.contains(e) && !common.contains(e))
                .copied()
                .collect();
            if !missing.is_empty() {
                let missing = names(&missing);
                problems.push(format!(
                    "{name}: the header documents {missing:?}, missing from the table"
                ));
            }
            // What the table allows must be documented for the call, for a
            // call its text refers to, or common.
            let referred = |e: &i32| {
                documented
                    .refers_to
                    .iter()
                    .any(|o| header[o].direct.contains(e))
            };
            let extra: BTreeSet<i32> = (table.iter())
                .filter(|e| !documented.direct.contains(e) && !common.contains(e) && !referred(e))
                .copied()
                .collect();
            if !extra.is_empty() {
                let extra = names(&extra);
                problems.push(format!(
                    "{name}: the table allows {extra:?}, which the header does not document"
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn the_header_reader_finds_groups_references_and_section_ends() {
        let header = header_calls(HEADER);
        // Two prototypes sharing one description.
        assert_eq!(header["lite_rdma_write"].arity, 6);
        assert_eq!(header["lite_rdma_read"].arity, 6);
        let send = &header["lite_send"];
        assert!(send.refers_to.contains("lite_send_reply_imm"));
        assert!(send.direct.contains(&EAGAIN));
        assert!(header["lite_lock"].direct.contains(&EOWNERDEAD));
        // The QoS section after lite_set_priority is no part of it.
        assert!(header["lite_set_priority"].direct.is_empty());
        assert_eq!(header["lite_get_node_id"].arity, 0);
        assert!(header["lite_dist_barrier"].direct.contains(&EINTR));
        assert_eq!(
            errnos_in("-ERESTARTSYS, -EFAULT"),
            BTreeSet::from([EINTR, EFAULT])
        );
    }

    #[test]
    fn results_land_in_their_buckets() {
        assert_eq!(outcome_bucket(0), 0);
        assert_eq!(outcome_bucket(12345), 0);
        assert_eq!(outcome_bucket(-i64::from(EINVAL)), EINVAL as usize);
        assert_eq!(outcome_bucket(-512), RESTART_BUCKET);
        assert_eq!(outcome_bucket(-4095), OTHER_BUCKET);
        assert_eq!(outcome_bucket(i64::MIN), OTHER_BUCKET);
        assert_eq!(outcome_name(0), "ok");
        assert_eq!(outcome_name(EINVAL as usize), "EINVAL");
        assert_eq!(outcome_name(RESTART_BUCKET), "ERESTART");
        assert_eq!(outcome_name(OTHER_BUCKET), "other");
        assert_eq!(outcome_name(120), "E120");
        assert!(allowed(Syscall::Lock, EOWNERDEAD));
        assert!(allowed(Syscall::Free, EBADF));
        assert!(!allowed(Syscall::Free, EOWNERDEAD));
    }
}
