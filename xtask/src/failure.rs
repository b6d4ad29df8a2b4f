//! The harness side of a node failure, shared by the failure test
//! (`cargo xtask test`) and the failure phase of `cargo xtask bench`, which
//! both run `lite-failure-test` on [`NODES`] VMs: the survivors first,
//! the victim last ([`roles`]). Once the victim's console says that the
//! survivors depend on it ([`VICTIM_READY`]), its QEMU is killed
//! [`KILL_DELAY`] later ([`kill_when_ready`]). [`await_marker`] and
//! [`await_every_node`] watch a running cluster's consoles for the
//! partition test too.

use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::cluster::{Cluster, NoDeathWatch, Nodes};
use crate::logscan::MarkerWatch;
use crate::ui::{self, Step};
use crate::{interrupt, process};

/// Nodes of a failure run: the victim and three survivors, so that the
/// survivors' leave/rejoin cycles have a third node to move the leaving
/// node's chunks to.
pub const NODES: usize = 4;

/// The victim's console line once the survivors depend on it (the
/// `READY_MARKER` of `lite-failure-test`).
pub const VICTIM_READY: &str = "LITE-FAILURE-VICTIM ready";

/// How long after [`VICTIM_READY`] the victim is killed: the survivors
/// start the calls that wait on it right after the barrier before it.
pub const KILL_DELAY: Duration = Duration::from_secs(5);

/// Upper bound, from the start of the cluster, for the victim to get
/// ready: boot, join and set-up on every node.
pub const VICTIM_READY_TIMEOUT: Duration = Duration::from_secs(8 * 60);

/// Upper bound, from the kill, for every survivor to end the failure
/// program: a hung call gets 60 s and their barrier 120 s, then the ten
/// leave/rejoin cycles take a few seconds each (each wait in them is
/// bounded by 30 to 120 s).
pub const SURVIVORS_DONE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// `survivor` for all but the last.
pub fn roles(nodes: usize, survivor: &str, last: &str) -> Vec<String> {
    let mut roles = vec![survivor.to_string(); nodes.saturating_sub(1)];
    roles.push(last.to_string());
    roles
}

/// Kills the victim [`KILL_DELAY`] after [`VICTIM_READY`]. Fails if any
/// node ends before (none can finish while the victim lives), or if the
/// manager declares any node dead before the kill: the set-up includes a
/// minute of overload, which nobody may take for a death.
pub fn kill_when_ready(
    cluster: &mut Cluster,
    victim: usize,
    started: Instant,
    deaths: &mut NoDeathWatch,
) -> Result<()> {
    let (name, log) = cluster.node_log(victim)?;
    let step = Step::start(format!("waiting for {name} to get ready, then killing it"));
    let mut watch = MarkerWatch::new(log, VICTIM_READY);
    await_marker(
        &mut watch,
        &name,
        started,
        VICTIM_READY_TIMEOUT,
        &mut || {
            deaths.check()?;
            first_ended(cluster)
        },
    )?;
    ui::progress(&format!(
        "{name} is ready; killing it in {}",
        ui::duration(KILL_DELAY)
    ));
    let ready_at = Instant::now();
    while ready_at.elapsed() < KILL_DELAY {
        interrupt::check()?;
        deaths.check()?;
        sleep(process::POLL);
    }
    if !cluster.kill_node(victim)? {
        bail!("{name} ended by itself before the harness killed it");
    }
    ui::progress(&format!("killed {name} (SIGKILL to its QEMU)"));
    step.done();
    Ok(())
}

/// Fails if `ended` (asked between polls) names a node that ended first:
/// none can finish while the node is not ready.
pub fn await_marker(
    watch: &mut MarkerWatch,
    name: &str,
    started: Instant,
    timeout: Duration,
    ended: &mut dyn FnMut() -> Result<Option<String>>,
) -> Result<()> {
    while !watch.poll() {
        interrupt::check()?;
        if let Some(ended) = ended()? {
            bail!("{ended} ended before {name} printed \"{}\"", watch.marker());
        }
        if started.elapsed() > timeout {
            bail!(
                "{name} did not print \"{}\" within {}",
                watch.marker(),
                ui::duration(timeout)
            );
        }
        sleep(process::POLL);
    }
    Ok(())
}

/// As [`await_marker`] does, for every node's `marker(node)`.
pub fn await_every_node(
    cluster: &mut Cluster,
    marker: impl Fn(usize) -> &'static str,
    started: Instant,
    timeout: Duration,
) -> Result<()> {
    for node in 1..=cluster.nodes() {
        let (name, log) = cluster.node_log(node)?;
        let mut watch = MarkerWatch::new(log, marker(node));
        await_marker(&mut watch, &name, started, timeout, &mut || {
            first_ended(cluster)
        })?;
    }
    Ok(())
}

fn first_ended(cluster: &mut Cluster) -> Result<Option<String>> {
    for i in 1..=cluster.nodes() {
        if cluster.node_exited(i)? {
            return Ok(Some(cluster.node_log(i)?.0));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_a_marker_ends_at_the_marker_at_an_ended_node_or_at_the_timeout() {
        let tmp = crate::fsutil::TempDir::new("failure-marker").expect("temporary directory");
        let dir = tmp.path();
        let ready = dir.join("node4.log");
        std::fs::write(&ready, format!("boot\n[   40.2] {VICTIM_READY}\nmore\n"))
            .expect("write log");
        // Waits for node4's marker in `log`, `ended` naming a node that ended.
        let wait = |log: &std::path::Path, timeout: u64, ended: Option<&str>| {
            let mut watch = MarkerWatch::new(log.to_path_buf(), VICTIM_READY);
            let mut ended = || -> Result<Option<String>> { Ok(ended.map(String::from)) };
            let timeout = Duration::from_secs(timeout);
            await_marker(&mut watch, "node4", Instant::now(), timeout, &mut ended)
                .map_err(|e| e.to_string())
        };
        let found = wait(&ready, 60, None);
        assert!(found.is_ok(), "{found:?}");
        let booting = dir.join("node4-booting.log");
        std::fs::write(&booting, "boot\n").expect("write log");
        let ended = format!("node1 ended before node4 printed \"{VICTIM_READY}\"");
        assert_eq!(wait(&booting, 60, Some("node1")).unwrap_err(), ended);
        let late = wait(&booting, 0, None).unwrap_err();
        let within = format!("node4 did not print \"{VICTIM_READY}\" within");
        assert!(late.starts_with(&within), "{late}");
    }
}
