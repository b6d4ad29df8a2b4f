//! One QEMU virtual machine: its command line and its process.
//!
//! KVM is not assumed (TCG, `-cpu max` without 5-level paging).
//! `-nodefaults -no-user-config` keep QEMU from adding devices of its own,
//! in particular a user-mode NIC: a guest's only network is the tap device
//! it is given, if any. The serial console goes to a file that the caller
//! scans (and, for an interactive VM, to and from the terminal too);
//! `-no-reboot` turns the guest's final `reboot -f` into a QEMU exit.
//! A VM may have a QMP socket ([`VmSpec::qmp_socket`]), through which the
//! harness can pause it ([`crate::qmp`]); there is no human monitor.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::{interrupt, logscan, process, ui};

pub struct Nic {
    /// In the VM's network namespace.
    pub tap: String,
    pub mac: String,
}

#[derive(Default)]
pub struct VmSpec {
    /// Short name, e.g. `node1`.
    pub name: String,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Kernel command line.
    pub append: String,
    pub memory_mib: u32,
    pub serial_log: PathBuf,
    /// Whether the serial console is also QEMU's standard input and output,
    /// for a user at the terminal; the log still gets what the guest writes.
    pub console_on_terminal: bool,
    /// In the guest's order (`eth0`, `eth1`, ...).
    pub nics: Vec<Nic>,
    /// Host CPU to pin the VM to.
    pub cpu: Option<usize>,
    /// QEMU serves QMP there, never waiting for a client.
    pub qmp_socket: Option<PathBuf>,
}

/// A precise clock: the guest kernel has no HPET or ACPI PM timer, so it
/// can only calibrate its TSC against the PIT, which under a loaded TCG
/// host often fails; it then falls back to jiffies, and every latency the
/// guests measure becomes meaningless. TCG's TSC runs at the host's rate,
/// so when the host knows it exactly, the guest is told it.
pub fn clock_params() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| host_tsc_khz(&info))
        .map(|khz| vec![format!("tsc_early_khz={khz}"), "tsc=reliable".to_string()])
        .unwrap_or_default()
}

/// If the kernel reports it as known and constant.
fn host_tsc_khz(cpuinfo: &str) -> Option<u64> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let flags = field("flags")?;
    let flags: Vec<&str> = flags.split_whitespace().collect();
    if !flags.contains(&"tsc_known_freq") || !flags.contains(&"constant_tsc") {
        return None;
    }
    let mhz: f64 = field("cpu MHz")?.parse().ok()?;
    (mhz.is_finite() && mhz > 0.0).then(|| (mhz * 1000.0).round() as u64)
}

/// `52:54:00:12:<0x34 + nic>:<i>`, in hex, `nic` from 0.
pub fn mac(i: usize, nic: usize) -> String {
    format!("52:54:00:12:{:02x}:{:02x}", (0x34 + nic) & 0xff, i & 0xff)
}

/// QEMU's CPU. No 5-level paging: while the boot CPU re-reads its features
/// (identify_cpu), LA57 briefly reads as absent, and an interrupt in that
/// window makes KASAN report a bogus wild-memory-access for the 5-level
/// direct map. Slow TCG makes the window wide. No ERMS or FSRM: with them
/// the kernel copies with `rep movsb`, which TCG executes one byte per
/// step, so copies of large messages would weigh several times what they
/// do on hardware.
const CPU: &str = "max,la57=off,erms=off,fsrm=off";

pub fn command(spec: &VmSpec, netns: Option<&str>) -> Command {
    let mut argv: Vec<String> = Vec::new();
    let mut words = |line: &str| argv.extend(line.split(' ').map(String::from));
    if let Some(ns) = netns {
        words(&format!("ip netns exec {ns}"));
    }
    if let Some(cpu) = spec.cpu {
        words(&format!("taskset -c {cpu}"));
    }
    words(&format!(
        "qemu-system-x86_64 -nodefaults -no-user-config -machine pc -cpu {CPU} -smp 1 -m {} \
         -display none -monitor none",
        spec.memory_mib
    ));
    argv.extend(serial_console_args(spec));
    argv.extend([
        "-no-reboot".into(),
        "-kernel".into(),
        spec.kernel.display().to_string(),
        "-initrd".into(),
        spec.initrd.display().to_string(),
        "-append".into(),
        spec.append.clone(),
    ]);
    if let Some(socket) = &spec.qmp_socket {
        let socket = format!("unix:{},server=on,wait=off", socket.display());
        argv.extend(["-qmp".into(), socket]);
    }
    for (index, nic) in spec.nics.iter().enumerate() {
        argv.extend([
            "-netdev".into(),
            format!("tap,id=n{index},ifname={},script=no,downscript=no", nic.tap),
            "-device".into(),
            format!("virtio-net-pci,netdev=n{index},mac={}", nic.mac),
        ]);
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// On the terminal, `signal=off` lets Ctrl-C reach the guest instead of
/// stopping QEMU, and `mux=on` gives QEMU's escapes (Ctrl-a x stops the VM).
fn serial_console_args(spec: &VmSpec) -> Vec<String> {
    if !spec.console_on_terminal {
        return vec![
            "-serial".into(),
            format!("file:{}", spec.serial_log.display()),
        ];
    }
    // A comma in an option's value is written twice.
    let log = spec.serial_log.display().to_string().replace(',', ",,");
    vec![
        "-chardev".into(),
        format!("stdio,id=console,mux=on,signal=off,logfile={log}"),
        "-serial".into(),
        "chardev:console".into(),
    ]
}

/// Killed when dropped.
pub struct Vm {
    pub name: String,
    pub serial_log: PathBuf,
    pub qmp_socket: Option<PathBuf>,
    child: Option<Child>,
    killed_as_failure: bool,
}

impl Vm {
    /// QEMU's own messages go to `qemu_log` (or its standard output to the
    /// terminal, for a console on the terminal).
    pub fn spawn(spec: &VmSpec, netns: Option<&str>, qemu_log: &Path) -> Result<Self> {
        // Start from an empty console log so scans never see an older run.
        File::create(&spec.serial_log)
            .with_context(|| format!("cannot create {}", spec.serial_log.display()))?;
        let log = File::create(qemu_log)
            .with_context(|| format!("cannot create {}", qemu_log.display()))?;
        let mut cmd = command(spec, netns);
        if spec.console_on_terminal {
            cmd.stdin(Stdio::inherit()).stdout(Stdio::inherit());
        } else {
            cmd.stdin(Stdio::null()).stdout(log.try_clone()?);
        }
        let child = cmd
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start `{}`", process::describe(&cmd)))?;
        Ok(Self {
            name: spec.name.clone(),
            serial_log: spec.serial_log.clone(),
            qmp_socket: spec.qmp_socket.clone(),
            child: Some(child),
            killed_as_failure: false,
        })
    }

    /// Reaps QEMU if so.
    pub fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// `LITE-GUEST-EXIT rc=0`.
    pub fn succeeded(&self) -> bool {
        logscan::guest_exit(&logscan::read_log(&self.serial_log)) == Some(0)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::kill(&mut child);
        }
    }

    /// SIGKILL, as a machine dying without warning: [`wait_all`] counts the
    /// VM as done, not failed. False if QEMU had already exited by itself.
    pub fn kill_as_failure(&mut self) -> bool {
        if self.exited() {
            return false;
        }
        self.kill();
        self.killed_as_failure = true;
        true
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// After one VM ended without `LITE-GUEST-EXIT rc=0`, its peers likely
/// wait for it forever: they are stopped after this, not the timeout.
const FAILURE_GRACE: Duration = Duration::from_secs(180);

/// Calls `tick` between polls (e.g. to stream logs). On timeout, Ctrl-C, an
/// error from `tick` or after [`FAILURE_GRACE`] every VM is killed.
pub fn wait_all(
    vms: &mut [Vm],
    timeout: Duration,
    tick: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let start = Instant::now();
    let mut failed_at: Option<(String, Instant)> = None;
    // Each exited VM's console is checked once.
    let mut checked = vec![false; vms.len()];
    let stopped = loop {
        if let Err(err) = tick() {
            break err;
        }
        let mut running = Vec::new();
        for (vm, checked) in vms.iter_mut().zip(checked.iter_mut()) {
            if !vm.exited() {
                running.push(vm.name.clone());
                continue;
            }
            if std::mem::replace(checked, true) {
                continue;
            }
            if failed_at.is_none() && !vm.killed_as_failure && !vm.succeeded() {
                ui::progress(&format!(
                    "{} ended without LITE-GUEST-EXIT rc=0; stopping the others in {}",
                    vm.name,
                    ui::duration(FAILURE_GRACE)
                ));
                failed_at = Some((vm.name.clone(), Instant::now()));
            }
        }
        if running.is_empty() {
            return Ok(());
        }
        let names = running.join(", ");
        if interrupt::interrupted() {
            break anyhow!("interrupted");
        }
        if start.elapsed() > timeout {
            break anyhow!("timed out after {}: killed {names}", ui::duration(timeout));
        }
        if let Some((failed, when)) = &failed_at {
            if when.elapsed() > FAILURE_GRACE {
                break anyhow!("{failed} failed; killed the VMs still running: {names}");
            }
        }
        sleep(process::POLL);
    };
    vms.iter_mut().for_each(Vm::kill);
    Err(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_host_tsc_rate_only_when_known() {
        let info = "processor\t: 0\ncpu MHz\t\t: 2600.000\n\
                    flags\t\t: fpu tsc constant_tsc nonstop_tsc tsc_known_freq\n";
        assert_eq!(host_tsc_khz(info), Some(2_600_000));
        let unknown = info.replace(" tsc_known_freq", "");
        assert_eq!(host_tsc_khz(&unknown), None);
        let unreadable = "cpu MHz : fast\nflags : constant_tsc tsc_known_freq\n";
        assert_eq!(host_tsc_khz(unreadable), None);
    }

    #[test]
    fn a_vm_killed_as_a_failure_is_done_not_failed() {
        let child = Command::new("sleep").arg("60").spawn().expect("sleep runs");
        let mut vm = Vm {
            name: "node4".into(),
            serial_log: "/nonexistent/node4.log".into(),
            qmp_socket: None,
            child: Some(child),
            killed_as_failure: false,
        };
        assert!(!vm.exited());
        assert!(vm.kill_as_failure());
        assert!(vm.exited() && vm.killed_as_failure);
        // Gone already: nothing left to kill.
        assert!(!vm.kill_as_failure());
        let mut vms = [vm];
        wait_all(&mut vms, Duration::from_secs(5), &mut || Ok(())).expect("nothing to wait for");
    }

    #[test]
    fn builds_an_isolated_command_line() {
        // Node 2 of a cluster, with two NICs and a monitor socket.
        let no_extra = |_| Vec::new();
        let spec =
            crate::cluster::test_spec(vec!["test".into(); 2], "/logs".as_ref(), &no_extra, None);
        let node2 = crate::cluster::test_vm(&spec, 2, "test", "node2");
        let line = process::describe(&command(&node2, Some("lite-42")));
        let start = "ip netns exec lite-42 qemu-system-x86_64 -nodefaults -no-user-config";
        assert!(line.starts_with(start), "{line}");
        for part in [
            "-serial file:/logs/node2.log -no-reboot",
            "-append 'console=ttyS0 panic=-1 ",
            " -netdev tap,id=n0,ifname=tap2,script=no,downscript=no \
             -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:02 ",
            // A machine protocol for the harness, which QEMU never waits
            // for, and no human monitor.
            " -qmp unix:/tmp/lite-qmp-1-0/node2.qmp,server=on,wait=off ",
            " -monitor none ",
        ] {
            assert!(line.contains(part), "{part}");
        }
        assert!(line.ends_with("-device virtio-net-pci,netdev=n1,mac=52:54:00:12:35:02"));
        assert!(!line.contains("enable-kvm"), "{line}");
        assert!(!line.contains("stdio"), "{line}");
        assert_eq!(mac(10, 0), "52:54:00:12:34:0a");
        // A console on the terminal is logged too.
        let spec = VmSpec {
            serial_log: "/logs,old/node1.log".into(),
            console_on_terminal: true,
            nics: Vec::new(),
            qmp_socket: None,
            ..node2
        };
        let line = process::describe(&command(&spec, None));
        let console = " -chardev stdio,id=console,mux=on,signal=off,logfile=/logs,,old/node1.log \
                       -serial chardev:console -no-reboot ";
        assert!(line.contains(console), "{line}");
        assert!(!line.contains("file:"), "{line}");
        // Still no human monitor on the terminal.
        assert!(line.contains(" -monitor none "));
    }
}
