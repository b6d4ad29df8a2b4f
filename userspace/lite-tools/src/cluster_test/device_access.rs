//! Remote access confined by the device: the kernel's access probe
//! ([`ACCESS_PROBE_FILE`], `rust-lite/internal/probe` says what it checks)
//! run against every peer, each line of its answer one TAP point here.

use std::io::Write;

use crate::cluster_test::io::read_debugfs_as;
use crate::cluster_test::Node;
use crate::debugfs::ACCESS_PROBE_FILE;
use crate::kernel::Kernel;
use crate::tap::Tap;

/// Checks the kernel runs against each peer; fewer lines mean a check
/// went missing.
const CHECKS: usize = 6;

pub fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let what = format!("node {me}: the peers' devices confine remote access to LITE's regions");
    if !kernel.has_rdma_device() {
        tap.skip(&what, "an in-memory model has no device to probe");
        return;
    }
    let read = read_debugfs_as(kernel, ACCESS_PROBE_FILE, |text| {
        Ok::<String, String>(text.into())
    });
    let Some(text) = tap.value_or_not_ok(&what, read) else {
        return;
    };
    let checks = parse(&text);
    for (name, outcome) in &checks {
        tap.check(&format!("node {me} -> {name}"), outcome.clone());
    }
    let expected = CHECKS * (nodes.max(1) as usize - 1);
    tap.check(
        &format!("node {me}: all {expected} device access checks ran ({CHECKS} per peer)"),
        if checks.len() == expected {
            Ok(())
        } else {
            Err(format!("{} ran:\n{text}", checks.len()))
        },
    );
}

/// Lines are `ok NAME`, `FAIL NAME` or `FAIL NAME: error ERRNO`.
fn parse(text: &str) -> Vec<(String, Result<(), String>)> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| match line.strip_prefix("ok ") {
            Some(name) => (name.to_string(), Ok(())),
            None => {
                let rest = line.strip_prefix("FAIL ").unwrap_or(line);
                match rest.rsplit_once(": error ") {
                    Some((name, errno)) => (
                        name.to_string(),
                        Err(format!("the check failed with error {errno}")),
                    ),
                    None => (
                        rest.to_string(),
                        Err("the device did not behave as it must".to_string()),
                    ),
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_is_a_failed_point_with_its_reason() {
        let checks = parse(
            "ok node 2: a write into a buffer of the remote memory pool is accepted\n\
             FAIL node 2: a write outside LITE's regions is refused, the memory unchanged\n\
             FAIL node 3: a read outside LITE's regions is refused: error -5\n",
        );
        assert_eq!(checks.len(), 3);
        let accepted = "node 2: a write into a buffer of the remote memory pool is accepted";
        assert_eq!(checks[0], (accepted.to_string(), Ok(())));
        let refused = "node 2: a write outside LITE's regions is refused, the memory unchanged";
        assert_eq!(checks[1].0, refused);
        assert!(checks[1].1.is_err());
        let refused = "node 3: a read outside LITE's regions is refused";
        assert_eq!(checks[2].0, refused);
        assert!(checks[2].1.as_ref().unwrap_err().contains("-5"));
    }
}
