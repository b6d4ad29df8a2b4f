//! A cluster of QEMU VMs on a private bridge, with LITE's cluster manager.
//!
//! Each run creates a network namespace `lite-<pid>` holding a bridge
//! `br0` ([`MANAGER_IP`]/24) and two tap devices per VM ([`tap_names`]);
//! QEMU and the manager run inside it, so nothing the guests send can
//! leave it. Node `i` (from 1) is [`node_ip`]`(i)` on `eth0`; everything
//! that makes it the same machine depends on `i` alone ([`node_vm`]), so
//! that its VM can be booted again ([`Nodes::restart_node`]). Every
//! cluster has a fresh secret ([`ClusterSecretFiles`]) that the manager
//! and the nodes prove to each other. [`Cluster`]'s `Drop` kills QEMU and
//! the manager and deletes the namespace, also after errors and Ctrl-C.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::fsutil::{LogFollower, TempDir};
use crate::kernel;
use crate::logscan;
use crate::paths::{repo_root, Cache};
use crate::prereqs;
use crate::process::{self, run_logged};
use crate::qemu::{self, Nic, Vm, VmSpec};
use crate::qmp::Monitor;
use crate::secret::ClusterSecretFiles;
use crate::ui::{self, Step};
use crate::{initramfs, interrupt};

/// The bridge's address, where the cluster manager listens.
pub const MANAGER_IP: &str = "10.77.0.254";
pub const MANAGER_PORT: u16 = 18500;
const NETNS_PREFIX: &str = "lite-";
/// In the cluster's log directory.
pub const MANAGER_LOG: &str = "cm.log";
/// So that the VMs do not all boot on the same cores at once.
const START_GAP: Duration = Duration::from_secs(2);
/// Node `i` is this followed by `i`, and its `eth1` by `100 + i`.
const NODE_SUBNET_PREFIX: &str = "10.77.0.";
const SECOND_IP_OFFSET: usize = 100;

pub fn node_ip(i: usize) -> String {
    format!("{NODE_SUBNET_PREFIX}{i}")
}

/// Of `eth1`, which stays down unless a test brings it up.
pub fn second_ip(i: usize) -> String {
    format!("{NODE_SUBNET_PREFIX}{}", SECOND_IP_OFFSET + i)
}

/// Behind node `i`'s `eth0` and `eth1`, both on the namespace's bridge.
pub fn tap_names(i: usize) -> [String; 2] {
    [format!("tap{i}"), format!("tap{i}b")]
}

/// The `lite-cm` binary.
pub fn build_manager(cache: &Cache) -> Result<PathBuf> {
    let log = cache.logs().join("cluster-manager.log");
    let _ = std::fs::remove_file(&log);
    run_logged(
        process::cargo()
            .current_dir(repo_root())
            .args("build --release -p lite-cluster-manager".split(' ')),
        &log,
        "cargo build -p lite-cluster-manager",
        &|l| l.trim_start().starts_with("Compiling"),
    )
    .context("building the cluster manager failed")?;
    let bin = repo_root().join("target/release/lite-cm");
    if !bin.is_file() {
        bail!("lite-cluster-manager did not produce {}", bin.display());
    }
    Ok(bin)
}

pub struct ClusterSpec<'a> {
    /// Guest role (`lite.run=`) of each node; one VM per entry.
    pub roles: Vec<String>,
    pub kernel: &'a Path,
    /// The VMs boot it with the cluster's secret added.
    pub initrd: &'a Path,
    pub memory_mib: u32,
    /// Extra kernel parameters for node `i`.
    pub extra_append: &'a dyn Fn(usize) -> Vec<String>,
    /// Pin VM `i` to host CPU `(i - 1) % ncpus`.
    pub pin_cpus: bool,
    pub manager: &'a Path,
    /// For node and manager logs.
    pub logs: &'a Path,
    /// Silence after which the manager declares a node dead and a node
    /// counts itself cut off (`lite-cm --dead-after-ms` and the guests'
    /// `lite.cmtimeout`); `None` keeps LITE's defaults (3000 ms both).
    pub dead_after_ms: Option<u32>,
}

/// What the nodes boot, and the cluster manager.
#[derive(Clone)]
pub struct Images {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub manager: PathBuf,
}

impl Images {
    /// Each built unless up to date (the kernel unless `kernel_image`).
    pub fn build(
        cache: &Cache,
        flavour: kernel::Flavour,
        kernel_src: Option<&Path>,
        kernel_image: Option<&Path>,
    ) -> Result<Self> {
        Ok(Self {
            kernel: kernel::image(cache, flavour, kernel_src, kernel_image)?,
            initramfs: initramfs::build(cache, initramfs::Variant::Full)?,
            manager: build_manager(cache)?,
        })
    }

    /// 1 GiB per VM, unpinned.
    pub fn spec<'a>(
        &'a self,
        roles: Vec<String>,
        extra_append: &'a dyn Fn(usize) -> Vec<String>,
        logs: &'a Path,
        dead_after_ms: Option<u32>,
    ) -> ClusterSpec<'a> {
        ClusterSpec {
            roles,
            kernel: &self.kernel,
            initrd: &self.initramfs,
            memory_mib: 1024,
            extra_append,
            pin_cpus: false,
            manager: &self.manager,
            logs,
            dead_after_ms,
        }
    }

    /// With [`API_TEST_DEAD_AFTER_MS`].
    pub fn api_test_spec<'a>(
        &'a self,
        roles: Vec<String>,
        extra_append: &'a dyn Fn(usize) -> Vec<String>,
        logs: &'a Path,
    ) -> ClusterSpec<'a> {
        self.spec(roles, extra_append, logs, Some(API_TEST_DEAD_AFTER_MS))
    }
}

/// [`ClusterSpec::dead_after_ms`] of the clusters that test the API rather
/// than failure detection. Under TCG a busy host can stop one VM's vCPU
/// for seconds; such a stall is no node failure, and these runs must not
/// take it for one.
pub const API_TEST_DEAD_AFTER_MS: u32 = 10_000;

pub struct Cluster {
    vms: Vec<Vm>,
    manager: Option<Child>,
    netns: Option<Netns>,
    /// Removed after the VMs and the manager are gone.
    secret: ClusterSecretFiles,
    /// The VMs' QMP sockets, in a directory of their own: whoever can
    /// reach one controls a VM, and a unix socket's path must stay short.
    monitors: TempDir,
}

impl Cluster {
    pub fn start(spec: &ClusterSpec) -> Result<Self> {
        Self::start_with_terminal(spec, None)
    }

    /// With node `terminal_node`'s console on this process's terminal too.
    pub fn start_with_terminal(spec: &ClusterSpec, terminal_node: Option<usize>) -> Result<Self> {
        if !prereqs::is_root() {
            bail!(
                "the QEMU cluster needs root: it creates a network namespace, a bridge \
                 and tap devices; run the command as root (e.g. with sudo)"
            );
        }
        remove_stale_namespaces();
        let nodes = spec.roles.len();
        let mut roles = spec.roles.clone();
        roles.dedup();
        let step = Step::start(format!(
            "starting {nodes} VMs (role {}), logs in {}",
            roles.join(", "),
            spec.logs.display()
        ));
        let mut cluster = Cluster {
            vms: Vec::new(),
            manager: None,
            netns: None,
            secret: ClusterSecretFiles::create(
                spec.initrd,
                kernel::modules_archive(spec.kernel).as_deref(),
            )
            .context("cannot make the cluster's secret")?,
            monitors: TempDir::private("lite-qmp")?,
        };
        let netns = Netns::create(&format!("{NETNS_PREFIX}{}", std::process::id()))?;
        netns.ip(&["link", "set", "lo", "up"])?;
        netns.ip(&["link", "add", "br0", "type", "bridge"])?;
        netns.ip(&["addr", "add", &format!("{MANAGER_IP}/24"), "dev", "br0"])?;
        netns.ip(&["link", "set", "br0", "up"])?;
        for tap in (1..=nodes).flat_map(tap_names) {
            netns.ip(&["tuntap", "add", &tap, "mode", "tap"])?;
            netns.ip(&["link", "set", &tap, "master", "br0"])?;
            netns.ip(&["link", "set", &tap, "up"])?;
        }
        let ns_name = netns.name.clone();
        cluster.netns = Some(netns);

        cluster.manager = Some(start_manager(
            spec,
            &ns_name,
            &cluster.secret.secret_file(),
        )?);

        for i in 1..=nodes {
            if i > 1 {
                interrupt::sleep_until(Instant::now(), START_GAP)?;
            }
            let (role, on_terminal) = (&spec.roles[i - 1], terminal_node == Some(i));
            let vm = cluster.spawn_node(spec, i, role, &format!("node{i}"), on_terminal)?;
            cluster.vms.push(vm);
        }
        step.done();
        Ok(cluster)
    }

    fn spawn_node(
        &self,
        spec: &ClusterSpec,
        i: usize,
        role: &str,
        name: &str,
        on_terminal: bool,
    ) -> Result<Vm> {
        let Some(netns) = &self.netns else {
            bail!("the cluster has no network namespace");
        };
        let (initrd, monitors) = (self.secret.initrd(), self.monitors.path());
        let mut vm = node_vm(spec, &initrd, monitors, i, role, name);
        vm.console_on_terminal = on_terminal;
        let qemu_log = spec.logs.join(format!("{name}.qemu.log"));
        Vm::spawn(&vm, Some(&netns.name), &qemu_log)
    }

    pub fn node_logs(&self) -> Vec<(String, PathBuf)> {
        self.vms
            .iter()
            .map(|vm| (vm.name.clone(), vm.serial_log.clone()))
            .collect()
    }

    fn index(&self, i: usize) -> Result<usize> {
        (i.checked_sub(1).filter(|&index| index < self.vms.len()))
            .with_context(|| format!("the cluster has no node {i}"))
    }

    /// A sudden machine failure ([`Vm::kill_as_failure`]); false if the
    /// node had already exited by itself.
    pub fn kill_node(&mut self, i: usize) -> Result<bool> {
        let index = self.index(i)?;
        Ok(self.vms[index].kill_as_failure())
    }

    /// Takes node `i`'s taps down or up, as in a network partition: its VM
    /// and NICs run on. The first tap's name.
    pub fn set_link(&self, i: usize, up: bool) -> Result<String> {
        self.index(i)?;
        let Some(netns) = &self.netns else {
            bail!("the cluster has no network namespace");
        };
        let [tap, second] = tap_names(i);
        netns.ip(&link_state_args(&tap, up))?;
        netns.ip(&link_state_args(&second, up))?;
        Ok(tap)
    }

    pub fn monitor(&self, i: usize, timeout: Duration) -> Result<Monitor> {
        let vm = &self.vms[self.index(i)?];
        let Some(socket) = &vm.qmp_socket else {
            bail!("{} has no QMP socket", vm.name);
        };
        Monitor::connect(socket, timeout).with_context(|| format!("pausing {}", vm.name))
    }

    pub fn kill_all(&mut self) {
        self.vms.iter_mut().for_each(Vm::kill);
    }

    pub fn wait(&mut self, timeout: Duration, tick: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let step = Step::start("waiting for the VMs to finish");
        qemu::wait_all(&mut self.vms, timeout, tick)?;
        step.done();
        Ok(())
    }
}

/// What the harness does with a running cluster's nodes: a trait, so
/// that host tests can fake a cluster (the failure test's second phase).
/// [`Cluster`] also has `node_logs`, `wait` and `kill_all` of its own.
pub trait Nodes {
    fn nodes(&self) -> usize;
    /// Name and serial log of node `i` (from 1).
    fn node_log(&self, i: usize) -> Result<(String, PathBuf)>;
    fn node_logs(&self) -> Vec<(String, PathBuf)> {
        (1..=self.nodes())
            .filter_map(|i| self.node_log(i).ok())
            .collect()
    }
    fn node_exited(&mut self, i: usize) -> Result<bool>;
    /// A line on the manager's standard input.
    fn tell_manager(&mut self, command: &str) -> Result<()>;
    /// Boots node `i` (from 1) again, after its VM ended, as the same
    /// machine (address, MAC, tap, cluster secret) running `role`. `spec`
    /// must be the one the cluster started with. The new VM is called
    /// `name`, and its logs are `<name>.log` and `<name>.qemu.log`, so the
    /// first boot's stay; from then on the node's name, log and exit are
    /// the new VM's.
    fn restart_node(&mut self, spec: &ClusterSpec, i: usize, role: &str, name: &str) -> Result<()>;
    /// Until every VM exited (see [`qemu::wait_all`]).
    fn wait(&mut self, timeout: Duration, tick: &mut dyn FnMut() -> Result<()>) -> Result<()>;
    /// The cluster stays until dropped.
    fn kill_all(&mut self);
}

impl Nodes for Cluster {
    fn nodes(&self) -> usize {
        self.vms.len()
    }

    fn node_log(&self, i: usize) -> Result<(String, PathBuf)> {
        let vm = &self.vms[self.index(i)?];
        Ok((vm.name.clone(), vm.serial_log.clone()))
    }

    fn node_exited(&mut self, i: usize) -> Result<bool> {
        let index = self.index(i)?;
        Ok(self.vms[index].exited())
    }

    fn tell_manager(&mut self, command: &str) -> Result<()> {
        let Some(stdin) = self.manager.as_mut().and_then(|m| m.stdin.as_mut()) else {
            bail!("the cluster manager takes no commands: it has no standard input");
        };
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .with_context(|| format!("cannot tell the cluster manager `{command}`"))
    }

    fn restart_node(&mut self, spec: &ClusterSpec, i: usize, role: &str, name: &str) -> Result<()> {
        if !self.node_exited(i)? {
            bail!("node {i} cannot be booted again: its VM still runs");
        }
        let restarted = self.spawn_node(spec, i, role, name, false)?;
        let index = self.index(i)?;
        self.vms[index] = restarted;
        Ok(())
    }

    fn wait(&mut self, timeout: Duration, tick: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        Cluster::wait(self, timeout, tick)
    }

    fn kill_all(&mut self) {
        Cluster::kill_all(self)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // VMs first: they hold the tap devices open.
        for vm in &mut self.vms {
            vm.kill();
        }
        if let Some(mut manager) = self.manager.take() {
            process::kill(&mut manager);
        }
        // Netns's own Drop deletes the namespace, bridge and taps.
        self.netns.take();
    }
}

/// Watches the manager's log of a cluster where no node is failed on
/// purpose: a node declared dead there means the run can no longer test
/// what it meant to, and its peers may wait for it until the timeout, so
/// [`NoDeathWatch::check`] ends the wait at once instead.
///
/// A node whose guest already reported `LITE-GUEST-EXIT` has finished its
/// role and powered off; the manager declaring it dead afterwards is the
/// expected end of its membership, not a failure, while its peers may
/// still be running their last checks.
pub struct NoDeathWatch {
    log: LogFollower,
    node_logs: Vec<PathBuf>,
    /// VM index (from 1) of each LITE node id, from the manager's join lines.
    vm_of_node: HashMap<u32, usize>,
}

impl NoDeathWatch {
    pub fn new(spec: &ClusterSpec) -> Self {
        Self {
            log: LogFollower::new(spec.logs.join(MANAGER_LOG)),
            node_logs: (1..=spec.roles.len())
                .map(|i| spec.logs.join(format!("node{i}.log")))
                .collect(),
            vm_of_node: HashMap::new(),
        }
    }

    /// From the log's current end, after a node failed on purpose: the
    /// deaths so far were meant, while the joins so far still tell which
    /// VM each node is. `node_logs` are the VMs' logs from now on.
    pub fn from_now_on(spec: &ClusterSpec, node_logs: Vec<PathBuf>) -> Self {
        let mut watch = Self::new(spec);
        watch.node_logs = node_logs;
        for line in watch.log.new_lines() {
            if let Some((node, vm)) = parse_join(&line) {
                watch.vm_of_node.insert(node, vm);
            }
        }
        watch
    }

    /// Fails with the manager's line if it declared a node dead whose
    /// guest had not finished; for [`Cluster::wait`]'s tick.
    pub fn check(&mut self) -> Result<()> {
        for line in self.log.new_lines() {
            if let Some((node, vm)) = parse_join(&line) {
                self.vm_of_node.insert(node, vm);
            }
            if !is_death(&line) {
                continue;
            }
            let finished = parse_death(&line)
                .and_then(|node| self.vm_of_node.get(&node))
                .is_some_and(|&vm| self.guest_finished(vm));
            if !finished {
                bail!(
                    "no node fails here on purpose, yet the cluster manager declared one dead \
                     ({}); stopped the VMs",
                    line.trim()
                );
            }
        }
        Ok(())
    }

    fn guest_finished(&self, vm: usize) -> bool {
        let Some(path) = vm
            .checked_sub(1)
            .and_then(|index| self.node_logs.get(index))
        else {
            return false;
        };
        logscan::guest_exit(&logscan::read_log(path)).is_some()
    }
}

pub fn is_death(line: &str) -> bool {
    line.contains(") declared dead: ")
}

/// Whether a line of the manager's log names a silence longer than half
/// its dead-after: `node N was silent for M ms (late; dead after D ms)`.
pub fn is_late_heartbeat(line: &str) -> bool {
    line.contains(" was silent for ") && line.contains(" ms (late; ")
}

/// Whether a line of the manager's log suspects a silent node, the stage
/// before a death: `node N (incarnation K) suspected: silent for M ms ...`.
pub fn is_suspicion(line: &str) -> bool {
    line.contains(") suspected: silent for ")
}

/// From `node N (incarnation K) declared dead: ...`.
fn parse_death(line: &str) -> Option<u32> {
    let (head, _) = line.split_once(") declared dead: ")?;
    node_id_before_incarnation(head)
}

/// Node id and VM from `node N (incarnation K) joined from 10.77.0.I:PORT`.
fn parse_join(line: &str) -> Option<(u32, usize)> {
    let (head, rest) = line.split_once(") joined from ")?;
    let node = node_id_before_incarnation(head)?;
    let address = rest.split(':').next()?;
    let vm = address.strip_prefix(NODE_SUBNET_PREFIX)?.parse().ok()?;
    Some((node, vm))
}

/// `N` of a text ending in `node N (incarnation K`.
fn node_id_before_incarnation(head: &str) -> Option<u32> {
    let (before, _) = head.rsplit_once(" (incarnation ")?;
    let (_, id) = before.rsplit_once("node ")?;
    id.parse().ok()
}

/// Everything that makes node `i` the same machine to the cluster
/// (address, MAC, tap, and with them the RDMA device's GID) depends on `i`
/// alone; its logs and QMP socket are named after `name`.
fn node_vm(
    spec: &ClusterSpec,
    initrd: &Path,
    monitors: &Path,
    i: usize,
    role: &str,
    name: &str,
) -> VmSpec {
    let mut append = vec![
        "console=ttyS0".to_string(),
        "panic=-1".to_string(),
        // Only the suite that needs a joined cluster: at boot it skips its
        // cases, and the cluster test runs it again through debugfs once
        // the nodes have joined.
        "kunit.filter_glob=lite_cluster".to_string(),
        format!("lite.ip={}/24", node_ip(i)),
        format!("lite.cm={MANAGER_IP}"),
        format!("lite.nodes={}", spec.roles.len()),
        format!("lite.run={role}"),
    ];
    append.extend(spec.dead_after_ms.map(|ms| format!("lite.cmtimeout={ms}")));
    append.extend(qemu::clock_params());
    append.extend((spec.extra_append)(i));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    VmSpec {
        name: name.to_string(),
        kernel: spec.kernel.to_path_buf(),
        initrd: initrd.to_path_buf(),
        append: append.join(" "),
        memory_mib: spec.memory_mib,
        serial_log: spec.logs.join(format!("{name}.log")),
        console_on_terminal: false,
        nics: tap_names(i)
            .into_iter()
            .enumerate()
            .map(|(nic, tap)| Nic {
                tap,
                mac: qemu::mac(i, nic),
            })
            .collect(),
        cpu: spec.pin_cpus.then_some((i - 1) % cpus),
        qmp_socket: Some(monitors.join(format!("{name}.qmp"))),
    }
}

/// `ip netns exec NS lite-cm --listen 10.77.0.254:18500 --secret-file
/// FILE ...`.
fn manager_command(
    manager: &Path,
    netns: &str,
    secret_file: &Path,
    dead_after_ms: Option<u32>,
) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(manager)
        .arg("--listen")
        .arg(format!("{MANAGER_IP}:{MANAGER_PORT}"))
        .arg("--secret-file")
        .arg(secret_file)
        // A new cluster: no member can come back to this manager.
        .arg("--startup-grace-ms")
        .arg("0");
    if let Some(ms) = dead_after_ms {
        cmd.arg("--dead-after-ms").arg(ms.to_string());
    }
    cmd
}

fn start_manager(spec: &ClusterSpec, netns: &str, secret_file: &Path) -> Result<Child> {
    let log_path = spec.logs.join(MANAGER_LOG);
    let log =
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut cmd = manager_command(spec.manager, netns, secret_file, spec.dead_after_ms);
    // A pipe, for commands to the manager while it runs.
    cmd.stdin(Stdio::piped())
        .stdout(log.try_clone()?)
        .stderr(log);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start `{}`", process::describe(&cmd)))?;
    // A manager that cannot bind dies at once; catch that before booting VMs.
    sleep(Duration::from_millis(500));
    if let Ok(Some(status)) = child.try_wait() {
        bail!(
            "the cluster manager exited at once ({status}); see {}",
            log_path.display()
        );
    }
    Ok(child)
}

/// Deleted, with its devices, on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create(name: &str) -> Result<Self> {
        process::output(Command::new("ip").args(["netns", "add", name]))
            .context("cannot create the cluster's network namespace")?;
        Ok(Self {
            name: name.to_string(),
        })
    }

    fn ip(&self, args: &[&str]) -> Result<()> {
        process::output(&mut ip_command(&self.name, args))?;
        Ok(())
    }
}

fn ip_command(netns: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["-n", netns]).args(args);
    cmd
}

fn link_state_args(tap: &str, up: bool) -> [&str; 4] {
    ["link", "set", tap, if up { "up" } else { "down" }]
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(err) = process::output(Command::new("ip").args(["netns", "del", &self.name])) {
            ui::say(&format!(
                "warning: cannot delete network namespace {}: {err:#}",
                self.name
            ));
        }
    }
}

/// Deletes `lite-<pid>` namespaces whose process is gone (an earlier run
/// that was killed with SIGKILL could not clean up).
fn remove_stale_namespaces() {
    let Ok(list) = process::output(Command::new("ip").args(["netns", "list"])) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            ui::progress(&format!("removing stale network namespace {name}"));
            let _ = process::output(Command::new("ip").args(["netns", "del", name]));
        }
    }
}

#[cfg(test)]
pub fn test_spec<'a>(
    roles: Vec<String>,
    logs: &'a Path,
    extra_append: &'a dyn Fn(usize) -> Vec<String>,
    dead_after_ms: Option<u32>,
) -> ClusterSpec<'a> {
    static IMAGES: std::sync::OnceLock<Images> = std::sync::OnceLock::new();
    let images = IMAGES.get_or_init(|| Images {
        kernel: "/k/bzImage".into(),
        initramfs: "/i.cpio.gz".into(),
        manager: "/bin/lite-cm".into(),
    });
    images.spec(roles, extra_append, logs, dead_after_ms)
}

/// The initramfs with the cluster's secret.
#[cfg(test)]
pub const TEST_INITRD: &str = "/tmp/lite-cluster-1-0/initramfs-with-secret.cpio.gz";

/// Node `index`'s VM booted as `role`, named `name`, in a cluster whose
/// secret and QMP sockets are in `/tmp`.
#[cfg(test)]
pub fn test_vm(spec: &ClusterSpec, index: usize, role: &str, name: &str) -> VmSpec {
    let (initrd, monitors) = (Path::new(TEST_INITRD), Path::new("/tmp/lite-qmp-1-0"));
    node_vm(spec, initrd, monitors, index, role, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(logs: &'a Path, extra: &'a dyn Fn(usize) -> Vec<String>) -> ClusterSpec<'a> {
        let roles = vec!["failure-survivor".into(), "failure-victim".into()];
        test_spec(roles, logs, extra, None)
    }

    fn no_extra(_: usize) -> Vec<String> {
        Vec::new()
    }

    fn has_param(vm: &VmSpec, param: &str) -> bool {
        vm.append.split(' ').any(|p| p == param)
    }

    #[test]
    fn a_node_booted_again_is_the_same_machine_with_a_new_role_and_log() {
        let extra = |i: usize| vec![format!("extra.node={i}")];
        let spec = spec(Path::new("/logs"), &extra);
        let first = test_vm(&spec, 2, &spec.roles[1], "node2");
        let again = test_vm(&spec, 2, "test", "node2-rejoin");
        // Each boot has its own monitor, in the cluster's directory.
        for (vm, name) in [(&first, "node2"), (&again, "node2-rejoin")] {
            let qmp = format!("/tmp/lite-qmp-1-0/{name}.qmp");
            assert_eq!(vm.qmp_socket.as_deref(), Some(Path::new(&qmp)));
            assert_eq!(vm.name, name);
            assert_eq!(vm.serial_log, Path::new(&format!("/logs/{name}.log")));
            // Only `cargo xtask cluster --shell` puts a console on the terminal.
            assert!(!vm.console_on_terminal);
            // The same secret, and none on the command line.
            assert_eq!(vm.initrd, first.initrd);
        }
        let nic = |vm: &VmSpec| vm.nics.first().map(|n| (n.tap.clone(), n.mac.clone()));
        assert_eq!(nic(&first), Some(("tap2".into(), qemu::mac(2, 0))));
        assert_eq!(nic(&again), nic(&first));
        assert!(first.append.contains("lite.run=failure-victim"));
        let (victim, test) = ("lite.run=failure-victim", "lite.run=test");
        assert_eq!(again.append, first.append.replace(victim, test));
        for param in ["lite.ip=10.77.0.2/24", "lite.nodes=2", "extra.node=2"] {
            assert!(has_param(&again, param), "{param}");
        }
        assert_eq!(again.kernel, first.kernel);
        assert_eq!(again.memory_mib, first.memory_mib);
        assert_eq!(first.initrd, Path::new(TEST_INITRD));
        assert!(!first.append.contains("secret"), "{}", first.append);
        // Its link goes down and up through its own taps in the namespace.
        assert_eq!(tap_names(2), ["tap2", "tap2b"]);
        let ip = |args: &[&str]| process::describe(&ip_command("lite-42", args));
        let (down, up) = (
            link_state_args("tap2", false),
            link_state_args("tap2", true),
        );
        assert_eq!(ip(&down), "ip -n lite-42 link set tap2 down");
        assert_eq!(ip(&up), "ip -n lite-42 link set tap2 up");
    }

    /// A death watch of a two-node cluster whose manager logged
    /// `manager` and whose nodes' consoles are `consoles`; and its
    /// manager's log.
    fn death_watch(dir: &Path, manager: &str, consoles: [&str; 2]) -> (NoDeathWatch, PathBuf) {
        let log = dir.join("cm.log");
        std::fs::write(&log, manager).expect("write the log");
        for (i, console) in (1..).zip(consoles) {
            std::fs::write(dir.join(format!("node{i}.log")), console).expect("a console");
        }
        (NoDeathWatch::new(&spec(dir, &no_extra)), log)
    }

    /// Whether `watch` goes on once the manager's `log` declares `node`
    /// dead after `silent_ms`; when it stops, it names the death.
    fn goes_on(watch: &mut NoDeathWatch, log: &Path, node: u32, silent_ms: u32) -> bool {
        let death = format!(
            "lite-cm: node {node} (incarnation 1) declared dead: silent for {silent_ms} ms\n"
        );
        crate::fsutil::append(log, &death);
        let Err(err) = watch.check() else { return true };
        let named = format!("node {node} (incarnation 1) declared dead");
        assert!(err.to_string().contains(&named), "{err}");
        false
    }

    #[test]
    fn the_death_watch_stops_at_the_managers_verdict_only_for_unfinished_guests() {
        let tmp = crate::fsutil::TempDir::new("lite-deathwatch").expect("temporary directory");
        let (mut watch, log) = death_watch(
            tmp.path(),
            "lite-cm: node 1 (incarnation 1) joined from 10.77.0.1:1, now 1 live, epoch 1\n\
             lite-cm: node 3 was silent for 1600 ms (late; dead after 3000 ms)\n",
            ["", ""],
        );
        assert!(watch.check().is_ok());
        assert!(!goes_on(&mut watch, &log, 3, 3082));

        let tmp = crate::fsutil::TempDir::new("lite-deathwatch-done").expect("temporary directory");
        // LITE node ids follow the join order, not the VM index.
        let (mut watch, log) = death_watch(
            tmp.path(),
            "lite-cm: node 1 (incarnation 1) joined from 10.77.0.2:58532 (gid ::ffff:10.77.0.2, lid 0), connected to nodes [], now 1 live, epoch 1\n\
             lite-cm: node 2 (incarnation 1) joined from 10.77.0.1:58892 (gid ::ffff:10.77.0.1, lid 0), connected to nodes [1], now 2 live, epoch 2\n",
            [
                "LITE-GUEST-PROGRAM lite-resources\r\n",
                "LITE-GUEST-EXIT rc=0\r\nreboot: Restarting system\r\n",
            ],
        );
        assert!(watch.check().is_ok());
        // Node 1 is VM 2, which had finished; VM 1 was still running.
        assert!(goes_on(&mut watch, &log, 1, 10040));
        assert!(!goes_on(&mut watch, &log, 2, 10040));
        // Manager lines give node ids and VMs.
        let join = "lite-cm: node 12 (incarnation 3) joined from 10.77.0.4:1 (gid x)";
        assert_eq!(parse_join(join), Some((12, 4)));
        let outside = "lite-cm: node 1 (incarnation 1) joined from 10.9.0.4:1";
        assert_eq!(parse_join(outside), None);
        // Late heartbeats and suspicions: pause's manager verdict test.
        let late = "lite-cm: node 7 was silent for 1600 ms (late; dead after 3000 ms)";
        let dead = "lite-cm: node 7 (incarnation 2) declared dead: silent for 1 ms";
        assert_eq!(parse_death(dead), Some(7));
        assert_eq!(parse_death(late), None);
    }

    #[test]
    fn the_manager_reads_the_clusters_secret_and_a_longer_dead_after_reaches_every_node() {
        let secret = Path::new("/tmp/lite-cluster-42-0/cluster.secret");
        let manager = Path::new("/bin/lite-cm");
        let command = |ms| process::describe(&manager_command(manager, "lite-42", secret, ms));
        assert_eq!(
            command(None),
            "ip netns exec lite-42 /bin/lite-cm --listen 10.77.0.254:18500 \
             --secret-file /tmp/lite-cluster-42-0/cluster.secret --startup-grace-ms 0"
        );
        let longer = format!("{} --dead-after-ms 10000", command(None));
        assert_eq!(command(Some(API_TEST_DEAD_AFTER_MS)), longer);
        let mut spec = spec(Path::new("/logs"), &no_extra);
        let node1 = |spec: &ClusterSpec| test_vm(spec, 1, "test", "node1");
        assert!(!node1(&spec).append.contains("lite.cmtimeout"));
        spec.dead_after_ms = Some(API_TEST_DEAD_AFTER_MS);
        assert!(has_param(&node1(&spec), "lite.cmtimeout=10000"));
    }
}
