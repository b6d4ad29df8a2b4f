//! `cargo xtask demo` and `cargo xtask apps` (README): each node's console
//! is shown, prefixed with `[node<i>]`, from `LITE-GUEST-RUN` on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cluster::{self, Cluster, ClusterSpec, NoDeathWatch};
use crate::fsutil::LogFollower;
use crate::kernel::Flavour;
use crate::paths::Cache;
use crate::{interrupt, logscan, ui};

const TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The guest starts its role.
pub const RUN_MARKER: &str = "LITE-GUEST-RUN";

/// The guest roles of the showcases: `lite-demo` (remote memory written
/// and read back), and the paper's applications (`userspace/apps`).
pub const DEMO_ROLE: &str = "demo";
pub const APPS_ROLE: &str = "apps";

/// Runs the showcase of guest role `role` ([`DEMO_ROLE`] or [`APPS_ROLE`]).
pub fn run(
    role: &str,
    nodes: usize,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<()> {
    let cache = Cache::locate()?;
    let images = cluster::Images::build(&cache, Flavour::Debug, kernel_src, kernel_image)?;
    let logs = cache.run_logs(role)?;
    let no_extra = |_: usize| Vec::new();
    let roles = vec![role.to_string(); nodes];
    let spec = images.api_test_spec(roles, &no_extra, &logs);
    let ConsolesRun { waited, node_logs } = run_showing_consoles(&spec, TIMEOUT, role_output)?;
    // After Ctrl-C the nodes were killed half-way: a summary would only list that.
    interrupt::check()?;

    ui::say(&format!("==> {role} summary"));
    let mut failed = 0;
    for (name, path) in &node_logs {
        let problems = logscan::problems(&logscan::read_log(path));
        if problems.is_empty() {
            ui::say(&format!("    {name}: ok"));
        } else {
            failed += 1;
            for problem in problems {
                ui::say(&format!("    {name}: {problem}"));
            }
        }
    }
    ui::say(&format!("    logs: {}", logs.display()));
    waited?;
    if failed > 0 {
        bail!("the {role} run failed on {failed} of {nodes} nodes");
    }
    ui::say(&format!("the {role} run succeeded on all {nodes} nodes"));
    Ok(())
}

pub struct ConsolesRun {
    /// What waiting for the VMs gave: an error for a timeout or a death.
    pub waited: Result<()>,
    /// Every node's name and console log.
    pub node_logs: Vec<(String, PathBuf)>,
}

/// Prints, prefixed with `[node<i>]`, what `shown` picks of every console
/// line once the guest started its role; stops at any death the manager
/// declares, and returns once the cluster is gone.
pub fn run_showing_consoles(
    spec: &ClusterSpec,
    timeout: Duration,
    shown: fn(&str) -> Option<&str>,
) -> Result<ConsolesRun> {
    let mut cluster = Cluster::start(spec)?;
    let mut no_death = NoDeathWatch::new(spec);
    let mut tails: Vec<Tail> = cluster
        .node_logs()
        .into_iter()
        .map(|(name, path)| Tail::new(&name, path, shown))
        .collect();
    let waited = cluster.wait(timeout, &mut || {
        tails.iter_mut().for_each(Tail::poll);
        no_death.check()
    });
    tails.iter_mut().for_each(Tail::poll);
    let node_logs = cluster.node_logs();
    drop(cluster);
    Ok(ConsolesRun { waited, node_logs })
}

/// Every line but the lock nestings a debug guest lists for the test
/// command.
pub fn role_output(line: &str) -> Option<&str> {
    (!line.contains(crate::lockdep::EDGE_TAG)).then_some(line)
}

struct Tail {
    name: String,
    log: LogFollower,
    started: bool,
    shown: fn(&str) -> Option<&str>,
}

impl Tail {
    fn new(name: &str, path: PathBuf, shown: fn(&str) -> Option<&str>) -> Self {
        Self {
            name: name.to_string(),
            log: LogFollower::new(path),
            started: false,
            shown,
        }
    }

    /// Prints the complete lines added since the last call.
    fn poll(&mut self) {
        for line in self.log.new_lines() {
            if !self.started && line.contains(RUN_MARKER) {
                self.started = true;
            }
            if let Some(text) = (self.shown)(&line).filter(|_| self.started) {
                ui::say(&format!("[{}] {text}", self.name));
            }
        }
    }
}
