//! `cargo xtask cluster` (README, "Running your own program on the test
//! cluster"): the program or shell joins the cluster itself, with
//! [`program_environment`] given through [`ENV_PARAM`].

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use crate::cluster::{self, Cluster, ClusterSpec, Images, Nodes};
use crate::demo;
use crate::fsutil::{self, TempDir};
use crate::kernel::Flavour;
use crate::newc::{self, REGULAR_FILE};
use crate::paths::Cache;
use crate::ui::{self, ReportedExitStatus};
use crate::{initramfs, interrupt, logscan, process};

/// Runs [`GUEST_COMMAND`].
const EXEC_ROLE: &str = "exec";
/// With `--shell`, node [`SHELL_NODE`]'s console is the terminal; the
/// other nodes join, then wait.
const SHELL_ROLE: &str = "shell";
const IDLE_ROLE: &str = "idle";
const SHELL_NODE: usize = 1;
/// Once per variable, `lite.env=NAME=VALUE`.
const ENV_PARAM: &str = "lite.env=";
const GUEST_PROGRAM_DIR: &str = "opt/lite-exec/bin";
/// Runs the program with its arguments.
const GUEST_COMMAND: &str = "opt/lite-exec/run.sh";
/// Of a node that never finished its program, as `timeout(1)`'s.
const UNFINISHED_EXIT_STATUS: u8 = 124;
/// A few debug-kernel VMs' boot under emulation and a short program, with
/// room to spare.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;

#[derive(Debug, PartialEq, Eq)]
pub enum Session {
    /// Runs a program on every node.
    Exec {
        program: PathBuf,
        args: Vec<OsString>,
        /// From the cluster's start.
        timeout: Duration,
    },
    /// A shell on node [`SHELL_NODE`]'s console, on this terminal.
    Shell,
}

impl Session {
    /// `--exec PATH ARGS...` or else `--shell` (the parser allows exactly
    /// one, and no `--exec` without PATH).
    pub fn new(exec: Option<Vec<OsString>>, timeout: Duration) -> Self {
        match exec.as_deref() {
            Some([program, args @ ..]) => Session::Exec {
                program: PathBuf::from(program),
                args: args.to_vec(),
                timeout,
            },
            _ => Session::Shell,
        }
    }
}

pub fn run(
    nodes: usize,
    flavour: Flavour,
    session: Session,
    kernel_src: Option<&Path>,
    kernel_image: Option<&Path>,
) -> Result<()> {
    let cache = Cache::locate()?;
    match session {
        Session::Exec {
            program,
            args,
            timeout,
        } => {
            // Read first: a wrong path need not wait for a kernel build.
            let archive = ProgramArchive::new(&program, &args)?;
            let images = Images::build(&cache, flavour, kernel_src, kernel_image)?;
            let logs = cache.run_logs("cluster")?;
            let run = run_program(&images, &logs, nodes, &archive, timeout)?;
            // After Ctrl-C the nodes were killed half-way: a summary would
            // only list that.
            interrupt::check()?;
            report(&run, &logs)
        }
        Session::Shell => {
            let images = Images::build(&cache, flavour, kernel_src, kernel_image)?;
            let logs = cache.run_logs("cluster")?;
            shell(&images, &logs, nodes)
        }
    }
}

/// A cpio archive appended to the guests' initramfs.
pub struct ProgramArchive {
    /// Also in the guests.
    pub name: String,
    /// The program, [`GUEST_COMMAND`] and the program's shared libraries.
    files: Vec<(String, Vec<u8>)>,
}

impl ProgramArchive {
    pub fn new(program: &Path, args: &[OsString]) -> Result<Self> {
        let contents = fs::read(program)
            .with_context(|| format!("cannot read the program {}", program.display()))?;
        let name = program
            .file_name()
            .and_then(OsStr::to_str)
            .with_context(|| {
                format!(
                    "{}: the program needs a file name in UTF-8",
                    program.display()
                )
            })?
            .to_string();
        let linking = linking(&contents).map_err(|why| anyhow!("{}: {why}", program.display()))?;
        let mut files = vec![
            (format!("{GUEST_PROGRAM_DIR}/{name}"), contents),
            (GUEST_COMMAND.to_string(), command_script(&name, args)),
        ];
        if linking == Linking::Dynamic {
            for library in initramfs::shared_libraries(program)? {
                let contents = fsutil::read(&library)?;
                let guest_path = initramfs::guest_library_path(&library)?;
                files.push((merged_usr_path(&guest_path)?, contents));
            }
        }
        Ok(Self { name, files })
    }

    fn bytes(&self) -> Vec<u8> {
        newc::archive(&self.files, REGULAR_FILE | 0o755)
    }
}

/// What the guests need for a program.
#[derive(Debug, PartialEq, Eq)]
enum Linking {
    /// Its interpreter is in the guests (busybox's `sh`, or `python3`).
    Script,
    Static,
    /// With an ELF interpreter: the shared libraries `ldd` lists.
    Dynamic,
}

const EM_X86_64: u16 = 62;
const PT_INTERP: u32 = 3;

/// Or why the guests cannot run it.
fn linking(bytes: &[u8]) -> Result<Linking, String> {
    if bytes.starts_with(b"#!") {
        return Ok(Linking::Script);
    }
    if !bytes.starts_with(b"\x7fELF") {
        return Err("neither an ELF executable nor a #! script".to_string());
    }
    // ELFCLASS64 and ELFDATA2LSB.
    if bytes.get(4..6) != Some(&[2, 1]) {
        return Err("not a 64-bit little-endian ELF file: the guests are x86-64".to_string());
    }
    let truncated = || "a truncated ELF file".to_string();
    let field = |at: usize, len: usize| read_le(bytes, at, len).ok_or_else(truncated);
    let machine = field(0x12, 2)?;
    if machine != u64::from(EM_X86_64) {
        return Err(format!(
            "built for ELF machine {machine}, not x86-64 ({EM_X86_64}): the guests are x86-64"
        ));
    }
    let (headers_at, header_size, headers) = (field(0x20, 8)?, field(0x36, 2)?, field(0x38, 2)?);
    for index in 0..headers {
        let at = index
            .checked_mul(header_size)
            .and_then(|offset| offset.checked_add(headers_at))
            .and_then(|at| usize::try_from(at).ok())
            .ok_or_else(truncated)?;
        if field(at, 4)? == u64::from(PT_INTERP) {
            return Ok(Linking::Dynamic);
        }
    }
    Ok(Linking::Static)
}

fn read_le(bytes: &[u8], at: usize, len: usize) -> Option<u64> {
    let field = bytes.get(at..at.checked_add(len)?)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0, |value, &byte| value << 8 | u64::from(byte)),
    )
}

/// `relative` to the guests' root, as the guests have it. Their `/lib` and
/// `/lib64` are links into `/usr`: a path under them (from a host without
/// merged `/usr`) is named by its place in `/usr`, so that no directory
/// entry replaces them.
fn merged_usr_path(relative: &Path) -> Result<String> {
    let relative =
        (relative.to_str()).with_context(|| format!("{} is not UTF-8", relative.display()))?;
    Ok(
        if relative.starts_with("lib/") || relative.starts_with("lib64/") {
            format!("usr/{relative}")
        } else {
            relative.to_string()
        },
    )
}

/// [`GUEST_COMMAND`], with `args` whatever bytes they hold.
fn command_script(name: &str, args: &[OsString]) -> Vec<u8> {
    let program = format!("/{GUEST_PROGRAM_DIR}/{name}");
    let mut script =
        b"#!/bin/sh\n# Written by cargo xtask cluster --exec: the program and its arguments.\nexec "
            .to_vec();
    script.extend(shell_words(
        std::iter::once(OsStr::new(&program)).chain(args.iter().map(OsString::as_os_str)),
    ));
    script.push(b'\n');
    script
}

/// Each word in single quotes (`'` written `'\''`): no character in them
/// means anything to the shell.
fn shell_words<'a>(words: impl Iterator<Item = &'a OsStr>) -> Vec<u8> {
    let mut line = Vec::new();
    for word in words {
        if !line.is_empty() {
            line.push(b' ');
        }
        line.push(b'\'');
        for &byte in word.as_bytes() {
            if byte == b'\'' {
                line.extend_from_slice(b"'\\''");
            } else {
                line.push(byte);
            }
        }
        line.push(b'\'');
    }
    line
}

/// `LITE_CM_ADDRESS` is `IP:PORT`, as `userspace/compat`'s
/// `userspace_liteapi_join` reads it.
pub(crate) fn program_environment(node: usize, nodes: usize) -> Vec<(&'static str, String)> {
    vec![
        (
            "LITE_CM_ADDRESS",
            format!("{}:{}", cluster::MANAGER_IP, cluster::MANAGER_PORT),
        ),
        ("LITE_NODE_ADDRESS", cluster::node_ip(node)),
        ("LITE_NODES", nodes.to_string()),
    ]
}

/// No value holds a blank, which a kernel parameter cannot carry.
fn environment_params(node: usize, nodes: usize) -> Vec<String> {
    program_environment(node, nodes)
        .into_iter()
        .map(|(name, value)| format!("{ENV_PARAM}{name}={value}"))
        .collect()
}

fn shell_roles(nodes: usize) -> Vec<String> {
    let mut roles = vec![IDLE_ROLE.to_string(); nodes];
    if let Some(shell) = roles.get_mut(SHELL_NODE - 1) {
        *shell = SHELL_ROLE.to_string();
    }
    roles
}

/// How one node's program (or shell) ended; ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeStatus {
    Succeeded,
    /// Not 0; `/init`'s own failures before the program are 1 too.
    Failed(u8),
    /// No `LITE-GUEST-EXIT`: timed out, crashed or stopped.
    Unfinished,
}

impl NodeStatus {
    pub fn of_console(log: &str) -> Self {
        match logscan::guest_exit(log) {
            None => NodeStatus::Unfinished,
            Some(0) => NodeStatus::Succeeded,
            // A shell's statuses are 1 to 255; anything else still failed.
            Some(rc) => NodeStatus::Failed(
                u8::try_from(rc)
                    .ok()
                    .filter(|&status| status != 0)
                    .unwrap_or(u8::MAX),
            ),
        }
    }

    fn exit_status(self) -> u8 {
        match self {
            NodeStatus::Succeeded => 0,
            NodeStatus::Failed(status) => status,
            NodeStatus::Unfinished => UNFINISHED_EXIT_STATUS,
        }
    }

    fn describe(self) -> String {
        match self {
            NodeStatus::Succeeded => "exited 0".to_string(),
            NodeStatus::Failed(status) => format!("exited {status}"),
            NodeStatus::Unfinished => "did not finish: no LITE-GUEST-EXIT on its console (it \
                                       timed out, crashed or was stopped)"
                .to_string(),
        }
    }
}

fn worst(statuses: impl IntoIterator<Item = NodeStatus>) -> NodeStatus {
    statuses.into_iter().max().unwrap_or(NodeStatus::Succeeded)
}

pub struct ProgramRun {
    pub nodes: Vec<NodeRun>,
    /// How the wait for the nodes ended (a timeout, a node declared dead).
    pub waited: Result<()>,
}

pub struct NodeRun {
    pub name: String,
    /// Its console log.
    pub log: PathBuf,
    pub status: NodeStatus,
}

/// Shows the consoles until every node ran the program, at most `timeout`
/// from the cluster's start.
pub fn run_program(
    images: &Images,
    logs: &Path,
    nodes: usize,
    archive: &ProgramArchive,
    timeout: Duration,
) -> Result<ProgramRun> {
    let initrd = InitrdWithProgram::create(&images.initramfs, archive)?;
    let initrd_path = initrd.path();
    let environment = |i: usize| environment_params(i, nodes);
    let roles = vec![EXEC_ROLE.to_string(); nodes];
    let spec = ClusterSpec {
        initrd: &initrd_path,
        ..images.api_test_spec(roles, &environment, logs)
    };
    ui::say(&format!(
        "==> running {} on {nodes} nodes, for at most {}",
        archive.name,
        ui::duration(timeout)
    ));
    let demo::ConsolesRun { waited, node_logs } =
        demo::run_showing_consoles(&spec, timeout, demo::role_output)?;
    let nodes = node_logs
        .into_iter()
        .map(|(name, log)| {
            let status = NodeStatus::of_console(&logscan::read_log(&log));
            NodeRun { name, log, status }
        })
        .collect();
    Ok(ProgramRun { nodes, waited })
}

/// Fails with the worst status unless every node succeeded.
fn report(run: &ProgramRun, logs: &Path) -> Result<()> {
    ui::say("==> cluster summary");
    for node in &run.nodes {
        ui::say(&format!("    {}: {}", node.name, node.status.describe()));
    }
    report_kernel_problems(run.nodes.iter().map(|node| (&node.name, &node.log)));
    if let Err(err) = &run.waited {
        ui::say(&format!("    {err:#}"));
    }
    ui::say(&format!("    logs: {}", logs.display()));
    let nodes = run.nodes.len();
    match worst(run.nodes.iter().map(|node| node.status)) {
        NodeStatus::Succeeded => {
            ui::say(&format!("the program succeeded on all {nodes} nodes"));
            Ok(())
        }
        worst => {
            ui::say(&format!(
                "the program did not succeed on every node: exit status {}",
                worst.exit_status()
            ));
            Err(ReportedExitStatus(worst.exit_status()).into())
        }
    }
}

/// Only shown: the user's program writes to the same console, and its
/// status is its own.
fn report_kernel_problems<'a>(nodes: impl Iterator<Item = (&'a String, &'a PathBuf)>) {
    for (name, log) in nodes {
        if let Some(crash) = logscan::first_crash(&logscan::read_log(log)) {
            ui::say(&format!(
                "    {name}: its console shows \"{}\" at line {}, a kernel problem unless the \
                 program printed it",
                crash.pattern, crash.line
            ));
        }
    }
}

/// Until node [`SHELL_NODE`]'s VM ends, once its shell exited; the
/// command's status is the shell's.
fn shell(images: &Images, logs: &Path, nodes: usize) -> Result<()> {
    let environment = |i: usize| environment_params(i, nodes);
    let spec = images.api_test_spec(shell_roles(nodes), &environment, logs);
    ui::say(&format!(
        "==> node{SHELL_NODE}'s console is this terminal: its shell starts once it joined the \
         cluster; exit the shell to stop the cluster (Ctrl-a x stops node{SHELL_NODE} at once)"
    ));
    // Declared first, so dropped last: after every VM is gone.
    let terminal = SavedTerminal::save();
    let mut cluster = Cluster::start_with_terminal(&spec, Some(SHELL_NODE))?;
    while !cluster.node_exited(SHELL_NODE)? {
        interrupt::check()?;
        sleep(process::POLL);
    }
    let (name, log) = cluster.node_log(SHELL_NODE)?;
    let node_logs = cluster.node_logs();
    drop(cluster);
    drop(terminal);

    let status = NodeStatus::of_console(&logscan::read_log(&log));
    ui::say(&format!("==> {name}'s shell {}", status.describe()));
    report_kernel_problems(node_logs.iter().map(|(name, log)| (name, log)));
    ui::say(&format!("    logs: {}", logs.display()));
    match status {
        NodeStatus::Succeeded => Ok(()),
        failed => Err(ReportedExitStatus(failed.exit_status()).into()),
    }
}

/// Put back when dropped: QEMU makes the terminal raw for a console on it,
/// and restores it only when it exits by itself.
struct SavedTerminal {
    settings: Option<OsString>,
}

impl SavedTerminal {
    fn save() -> Self {
        let settings = std::io::stdin()
            .is_terminal()
            .then(|| {
                Command::new("stty")
                    .arg("-g")
                    .stdin(Stdio::inherit())
                    .stderr(Stdio::null())
                    .output()
                    .ok()
            })
            .flatten()
            .filter(|out| out.status.success())
            .map(|out| OsStr::from_bytes(out.stdout.trim_ascii()).to_os_string());
        Self { settings }
    }
}

impl Drop for SavedTerminal {
    fn drop(&mut self) {
        if let Some(settings) = &self.settings {
            // Nothing more can be done for a terminal that refuses them.
            let _ = Command::new("stty")
                .arg(settings)
                .stdin(Stdio::inherit())
                .status();
        }
    }
}

/// In a private directory (the program may be private too).
struct InitrdWithProgram {
    dir: TempDir,
}

impl InitrdWithProgram {
    fn create(initramfs: &Path, archive: &ProgramArchive) -> Result<Self> {
        let initrd = Self {
            dir: TempDir::private("lite-exec")?,
        };
        newc::extend(initramfs, &initrd.path(), &[&archive.bytes()])?;
        Ok(initrd)
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("initramfs-with-program.cpio.gz")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initramfs::{assert_in_order, role_body};

    #[test]
    fn every_node_is_told_the_manager_its_own_address_and_the_cluster_size() {
        let params = "lite.env=LITE_CM_ADDRESS=10.77.0.254:18500 \
                      lite.env=LITE_NODE_ADDRESS=10.77.0.2 lite.env=LITE_NODES=3";
        assert_eq!(
            environment_params(2, 3),
            params.split(' ').collect::<Vec<_>>()
        );
        for param in environment_params(1, 32) {
            assert!(!param.contains(char::is_whitespace), "{param}");
        }
        // Node 1 gets the shell, the others idle.
        assert_eq!(shell_roles(1), ["shell"]);
        assert_eq!(shell_roles(3), ["shell", "idle", "idle"]);
    }

    #[test]
    fn every_argument_reaches_the_program_unchanged() {
        let script = command_script("hello_cluster", &[OsString::from("it's here")]);
        assert_eq!(
            String::from_utf8_lossy(&script),
            "#!/bin/sh\n# Written by cargo xtask cluster --exec: the program and its arguments.\n\
             exec '/opt/lite-exec/bin/hello_cluster' 'it'\\''s here'\n"
        );
        let args = "plain|a b|it's||$HOME|`id`|*|back\\slash|two\nlines|'|\"";
        let args: Vec<OsString> = (args.split('|').map(OsString::from))
            .chain([OsStr::from_bytes(b"not \xff UTF-8").to_os_string()])
            .collect();
        let line = shell_words(
            [OsStr::new("printf"), OsStr::new("[%s]")]
                .into_iter()
                .chain(args.iter().map(OsString::as_os_str)),
        );
        let out = Command::new("sh")
            .arg("-c")
            .arg(OsStr::from_bytes(&line))
            .output()
            .expect("sh runs");
        assert!(out.status.success());
        let expected: Vec<u8> = args
            .iter()
            .flat_map(|arg| [b"[", arg.as_bytes(), b"]"].concat())
            .collect();
        assert_eq!(out.stdout, expected);
    }

    /// An x86-64 ELF header with program headers of `types`.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2;
        bytes[5] = 1;
        bytes[0x12..0x14].copy_from_slice(&EM_X86_64.to_le_bytes());
        bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        bytes[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for &kind in types {
            let mut header = vec![0u8; 56];
            header[..4].copy_from_slice(&kind.to_le_bytes());
            bytes.extend(header);
        }
        bytes
    }

    #[test]
    fn a_program_is_a_script_or_a_static_or_dynamic_x86_64_executable() {
        const PT_LOAD: u32 = 1;
        assert_eq!(linking(&elf(&[PT_LOAD])), Ok(Linking::Static));
        assert_eq!(linking(&elf(&[PT_LOAD, PT_INTERP])), Ok(Linking::Dynamic));
        assert_eq!(linking(b"#!/bin/sh\necho hi\n"), Ok(Linking::Script));
        let this_test = std::env::current_exe().expect("the test's path");
        let this_test = fs::read(this_test).expect("the test's binary");
        assert_eq!(linking(&this_test), Ok(Linking::Dynamic));

        assert!(linking(b"hello").is_err());
        let mut arm = elf(&[PT_LOAD]);
        arm[0x12..0x14].copy_from_slice(&183u16.to_le_bytes());
        assert!(linking(&arm).unwrap_err().contains("machine 183"));
        let mut elf32 = elf(&[PT_LOAD]);
        elf32[4] = 1;
        assert!(linking(&elf32).is_err());
        let whole = elf(&[PT_LOAD, PT_INTERP]);
        let truncated = Err("a truncated ELF file".to_string());
        for len in [7, 0x30, whole.len() - 60] {
            assert_eq!(linking(&whole[..len]), truncated, "{len} bytes");
        }
    }

    #[test]
    fn libraries_go_where_the_guests_merged_usr_has_them() {
        for paths in [
            "usr/lib/x86_64-linux-gnu/libc.so.6 usr/lib/x86_64-linux-gnu/libc.so.6",
            "lib64/ld-linux-x86-64.so.2 usr/lib64/ld-linux-x86-64.so.2",
            "lib/x86_64-linux-gnu/libm.so.6 usr/lib/x86_64-linux-gnu/libm.so.6",
            "library/libx.so library/libx.so",
        ] {
            let (host, guest) = paths.split_once(' ').expect("host and guest path");
            assert_eq!(merged_usr_path(Path::new(host)).expect("UTF-8"), guest);
        }
    }

    #[test]
    fn a_dynamically_linked_program_brings_its_libraries_and_no_program_is_refused_at_once() {
        let scratch = TempDir::new("user-cluster-test").expect("a directory");
        let text = scratch.path().join("notes.txt");
        fs::write(&text, "not a program").expect("write");
        for (program, expected) in [
            (Path::new("/nonexistent/p"), "/nonexistent/p"),
            (&text, "neither an ELF executable nor a #! script"),
        ] {
            let err = ProgramArchive::new(program, &[]).err().expect("an error");
            assert!(format!("{err:#}").contains(expected), "{err:#}");
        }
        let program = Path::new("/bin/true");
        if !program.is_file() {
            return;
        }
        let archive = ProgramArchive::new(program, &[OsString::from("x")]).expect("an archive");
        assert_eq!(archive.name, "true");
        let paths: Vec<&str> = archive.files.iter().map(|(p, _)| p.as_str()).collect();
        let program_and_script = ["opt/lite-exec/bin/true", "opt/lite-exec/run.sh"];
        assert_eq!(paths[..2], program_and_script);
        assert_eq!(archive.files[0].1, fs::read(program).expect("the program"));
        for library in ["/libc.so.6", "/ld-linux-x86-64.so.2"] {
            assert!(paths.iter().any(|p| p.ends_with(library)), "{paths:?}");
        }
        // Nothing replaces the guests' links into /usr.
        for newc::Entry { path, .. } in newc::with_directories(&archive.files, REGULAR_FILE | 0o755)
        {
            assert!(!["lib", "lib64", "bin", "sbin"].contains(&path), "{path}");
        }
    }

    #[test]
    fn the_worst_node_decides_the_exit_status() {
        use NodeStatus::*;
        for (console, status) in [
            ("LITE-GUEST-EXIT rc=0\r\n", Succeeded),
            ("LITE-GUEST-EXIT rc=3\r\n", Failed(3)),
            ("LITE-GUEST-EXIT rc=300\n", Failed(255)),
            ("Run /init as init process\n", Unfinished),
        ] {
            assert_eq!(NodeStatus::of_console(console), status, "{console}");
        }
        assert_eq!(worst([Succeeded, Succeeded]), Succeeded);
        let failures = [Succeeded, Failed(1), Failed(3), Failed(2)];
        assert_eq!(worst(failures), Failed(3));
        assert_eq!(worst([Failed(200), Unfinished, Succeeded]), Unfinished);
        assert_eq!(worst([Succeeded, Failed(3)]).exit_status(), 3);
        assert_eq!(worst([Unfinished]).exit_status(), 124);
        assert_eq!(worst([Succeeded]).exit_status(), 0);
    }

    #[test]
    fn init_runs_the_program_or_the_shell_in_the_environment_given() {
        let init = include_str!("init.sh");
        // No environment by default, then the lite.env= parameters, then the roles.
        let parsed = "\tlite.env=*) programenv=\"$programenv ${arg#lite.env=}\" ;;\n";
        let roles = "case \"$run\" in";
        let parsing = "for arg in $(cat /proc/cmdline); do";
        assert_in_order(init, &["\nprogramenv=\n", parsing, parsed, roles]);
        let roles = init.find(roles).expect("the roles");
        assert_eq!(ENV_PARAM, "lite.env=");
        assert!(init.contains("#   lite.env=NAME=VALUE"));
        for role in [EXEC_ROLE, SHELL_ROLE, IDLE_ROLE] {
            let described = init[..roles].contains(&format!("| {role}"));
            assert!(described, "{role} is not described");
        }
        let run_exec = format!("\tenv $programenv sh /{GUEST_COMMAND} </dev/null || rc=$?\n");
        let run_shell = "\tenv $programenv PS1='\\h:\\w\\$ ' setsid cttyhack sh || rc=$?\n";
        for (role, line) in [(EXEC_ROLE, run_exec.as_str()), (SHELL_ROLE, run_shell)] {
            assert!(role_body(role).contains(line), "{}", role_body(role));
        }
        // Node 1 and the others join as the user's programs do.
        for role in [SHELL_ROLE, IDLE_ROLE] {
            let joins = role_body(role).starts_with("\n\tjoin_from_environment\n");
            assert!(joins, "{role}");
        }
        let join = &init[init.find("\njoin_from_environment() {").expect("join")..];
        assert!(join.contains("env $programenv python3 -c"));
        assert!(join.contains("os.environ[\"LITE_CM_ADDRESS\"].rsplit(\":\", 1)"));
    }
}
