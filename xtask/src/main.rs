//! `cargo xtask`: build, test and benchmark automation for LITE (README).

mod apply;
mod architecture;
mod bench;
mod cluster;
mod demo;
mod edits;
mod failure;
mod fsutil;
mod fuzz;
mod guest_python;
mod initramfs;
mod interrupt;
mod kernel;
mod kernel_style;
mod kmemleak;
mod kunit;
mod lockdep;
mod logscan;
mod man_pages;
mod newc;
mod patchset;
mod paths;
mod pause;
mod prereqs;
mod process;
mod qemu;
mod qmp;
mod rustfmt_check;
mod secret;
mod series;
mod shared_texts;
mod slow_checks;
mod source;
mod suite;
mod syscalls;
mod syzlang;
mod tap;
mod uapi_header;
mod ui;
mod user_cluster;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::kernel::Flavour;

/// Command line of `cargo xtask`.
#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Build, test and benchmark LITE",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the kernel source comes from; shared by every command that needs it.
#[derive(Args, Clone)]
struct SourceArgs {
    /// A Linux 6.12.y source tree to use instead of Debian's linux-source-6.12.
    #[arg(long, env = "KERNEL_SRC", value_name = "DIR")]
    kernel_src: Option<PathBuf>,
}

/// The kernel a command boots: built from the source, or given.
#[derive(Args, Clone)]
struct BootArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Boot this kernel image instead of building one.
    #[arg(long, hide = true, value_name = "BZIMAGE")]
    kernel: Option<PathBuf>,
}

impl BootArgs {
    fn kernel_src(&self) -> Option<&Path> {
        self.source.kernel_src.as_deref()
    }

    fn kernel(&self) -> Option<&Path> {
        self.kernel.as_deref()
    }
}

/// The size of a command's cluster.
#[derive(Args, Clone, Copy)]
struct NodesArg {
    /// Number of nodes (virtual machines) in the cluster.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=32))]
    nodes: u8,
}

impl NodesArg {
    fn count(self) -> usize {
        usize::from(self.nodes)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Build the kernel with the LITE patch series applied.
    Kernel {
        /// Kernel configuration flavour.
        #[arg(long, value_enum, default_value_t = Flavour::Debug)]
        flavour: Flavour,
        #[command(flatten)]
        source: SourceArgs,
        /// Stop after applying the series and configuring the kernel.
        #[arg(long, hide = true)]
        config_only: bool,
    },
    /// Regenerate linux-patches/ from rust-lite/, lite-api-c/ and tests-kunit/.
    Patches {
        /// Only check that linux-patches/ is up to date and applies.
        #[arg(long)]
        check: bool,

        #[command(flatten)]
        source: SourceArgs,
    },
    /// The kernel's slow checks on the series: every patch built in turn
    /// (LITE enabled, then disabled), clippy, rustdoc, sparse and htmldocs (about an hour).
    SlowChecks {
        /// Only the checks of the whole series (minutes), not the build of
        /// every patch (over an hour).
        #[arg(long)]
        whole_series_only: bool,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Boot a QEMU cluster and run the LITE demo on it.
    Demo {
        #[command(flatten)]
        nodes: NodesArg,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Boot a QEMU cluster and run the paper's applications (LITE-Log, LITE-MapReduce, LITE-Graph) over LITE, over TCP and alone.
    Apps {
        #[command(flatten)]
        nodes: NodesArg,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Run every test: host tests, patch check, kernel build, KUnit, the cluster test, the failure test, the partition test and a program of one's own through `cluster --exec`.
    Test {
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Boot the tests' QEMU cluster and run your own program on every node (--exec), or get a shell on node 1 (--shell).
    Cluster {
        #[command(flatten)]
        nodes: NodesArg,
        /// Kernel configuration flavour.
        #[arg(long, value_enum, default_value_t = Flavour::Debug)]
        flavour: Flavour,
        /// Copy the program at PATH (with the shared libraries it needs)
        /// into every node and run it there with ARGS: everything after
        /// PATH is the program's. It joins the cluster itself: its
        /// environment has LITE_CM_ADDRESS (the manager, IP:PORT),
        /// LITE_NODE_ADDRESS (the node's address) and LITE_NODES (the
        /// cluster size). The command's exit status is the worst node's.
        #[arg(
            long,
            value_names = ["PATH", "ARGS"],
            num_args = 1..,
            allow_hyphen_values = true,
            required_unless_present = "shell",
            conflicts_with = "shell"
        )]
        exec: Option<Vec<OsString>>,
        /// Boot the cluster with node 1's console on this terminal: node 1
        /// joins and gives a shell (with the same environment), the other
        /// nodes join and wait; exiting the shell stops the cluster.
        #[arg(long)]
        shell: bool,
        /// With --exec, stop every node this many seconds after the
        /// cluster started (boot included).
        #[arg(
            long,
            value_name = "SECS",
            default_value_t = user_cluster::DEFAULT_TIMEOUT_SECS,
            value_parser = clap::value_parser!(u64).range(1..=7 * 24 * 3600),
            conflicts_with = "shell"
        )]
        timeout: u64,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Fuzz LITE's system calls on a QEMU cluster (debug kernel): every node runs lite-fuzz.
    Fuzz {
        /// How long every node fuzzes, in minutes.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=7 * 24 * 60))]
        minutes: u32,
        /// Seed of the run, decimal or 0x-hex (default: from the clock); printed to replay it.
        #[arg(long, value_parser = fuzz::parse_seed)]
        seed: Option<u64>,
        #[command(flatten)]
        nodes: NodesArg,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Compare LITE with native RDMA verbs (perftest) on two VMs, then lock contention and failure handling on four, then the paper's applications against TCP on two and four.
    Bench {
        /// Iterations per operation and message size.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        iters: u32,
        /// Interleaved rounds of LITE and the native verbs baseline (the
        /// latency part), of LITE-DSM's faults and LITE reads (the dsm
        /// part), and of the isolation run's unloaded and loaded phases;
        /// each figure's verdict is its median ratio.
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Operations per series in each interleaved round (the latency and
        /// dsm parts).
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(5..=1_000_000))]
        round_iters: u32,
        /// Measure only these parts (comma-separated).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<bench::Part>,
        /// Run only the application phases (the same as --only apps).
        #[arg(long, hide = true)]
        apps_only: bool,
        /// Directory for the figures (bench.json), the charts and a summary;
        /// by default a new directory under the cache, named at the end.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        /// Compare two reports' figures and exit, flagging regressions
        /// beyond the measured spread.
        #[arg(long, num_args = 2, value_names = ["OLD.json", "NEW.json"])]
        compare: Option<Vec<PathBuf>>,
        #[command(flatten)]
        boot: BootArgs,
    },
}

fn main() -> ExitCode {
    // `KERNEL_SRC=` (set but empty) means "no tree given", not "no value".
    // Done first, while the process is still single-threaded.
    if std::env::var_os("KERNEL_SRC").is_some_and(|v| v.is_empty()) {
        std::env::remove_var("KERNEL_SRC");
    }
    let cli = Cli::parse();
    interrupt::install();
    let result = match cli.command {
        Command::Kernel {
            flavour,
            source,
            config_only,
        } => kernel::run(flavour, source.kernel_src.as_deref(), config_only),
        Command::Patches { check, source } => series::run(check, source.kernel_src.as_deref()),
        Command::SlowChecks {
            whole_series_only,
            source,
        } => slow_checks::run(source.kernel_src.as_deref(), whole_series_only),
        Command::Demo { nodes, boot } => demo::run(
            demo::DEMO_ROLE,
            nodes.count(),
            boot.kernel_src(),
            boot.kernel(),
        ),
        Command::Apps { nodes, boot } => demo::run(
            demo::APPS_ROLE,
            nodes.count(),
            boot.kernel_src(),
            boot.kernel(),
        ),
        Command::Cluster {
            nodes,
            flavour,
            exec,
            timeout,
            boot,
            ..
        } => user_cluster::run(
            nodes.count(),
            flavour,
            user_cluster::Session::new(exec, Duration::from_secs(timeout)),
            boot.kernel_src(),
            boot.kernel(),
        ),
        Command::Test { boot } => suite::run(boot.kernel_src(), boot.kernel()),
        Command::Fuzz {
            minutes,
            seed,
            nodes,
            boot,
        } => fuzz::run(
            minutes,
            seed,
            nodes.count(),
            boot.kernel_src(),
            boot.kernel(),
        ),
        Command::Bench {
            iters,
            rounds,
            round_iters,
            mut only,
            apps_only,
            report,
            compare,
            boot,
        } => match compare.as_deref() {
            Some([old, new]) => bench::compare(old, new),
            Some(_) => Err(anyhow::anyhow!("--compare takes two reports")),
            None => {
                if apps_only {
                    only.push(bench::Part::Apps);
                }
                let options = bench::Options {
                    iters,
                    rounds,
                    round_iters,
                    only,
                    report,
                };
                bench::run(&options, boot.kernel_src(), boot.kernel())
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => match err.downcast_ref::<ui::ReportedExitStatus>() {
            Some(ui::ReportedExitStatus(status)) => ExitCode::from(*status),
            None => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use user_cluster::Session;

    /// The nodes and the session that `cargo xtask cluster` + `args` asks
    /// for, as `main` makes it.
    fn cluster(args: &[&str]) -> anyhow::Result<(usize, Session)> {
        let cli = Cli::try_parse_from(["cargo xtask", "cluster"].iter().chain(args))?;
        let Command::Cluster {
            nodes,
            exec,
            timeout,
            ..
        } = cli.command
        else {
            panic!("not the cluster command");
        };
        let session = Session::new(exec, Duration::from_secs(timeout));
        Ok((nodes.count(), session))
    }

    /// `--exec PATH ARGS...` for `command` (PATH, then ARGS).
    fn exec(command: &[&str], timeout_secs: u64) -> Session {
        Session::Exec {
            program: PathBuf::from(command[0]),
            args: command[1..].iter().map(OsString::from).collect(),
            timeout: Duration::from_secs(timeout_secs),
        }
    }

    #[test]
    fn a_shell_or_a_program_with_everything_after_it_as_its_arguments() {
        let line = ["./p", "a b", "--x", "-y", "--nodes", "5"];
        let args: Vec<&str> = ["--nodes", "2", "--exec"].into_iter().chain(line).collect();
        assert_eq!(cluster(&args).expect("parses"), (2, exec(&line, 600)));
        let parsed = |line: &str| cluster(&line.split(' ').collect::<Vec<_>>()).expect(line);
        let timed = parsed("--timeout 30 --exec ./p --shell");
        assert_eq!(timed, (3, exec(&["./p", "--shell"], 30)));
        assert_eq!(parsed("--exec /bin/p"), (3, exec(&["/bin/p"], 600)));
        // A shell or a program, but not both nor neither.
        let shell = cluster(&["--nodes", "1", "--shell"]).expect("parses");
        assert_eq!(shell, (1, Session::Shell));
        for line in [
            "--shell --exec ./p",
            "--shell --timeout 5",
            "",
            "--exec",
            "--nodes 0 --shell",
            "--timeout 0 --exec ./p",
        ] {
            let args: Vec<&str> = line.split_whitespace().collect();
            assert!(cluster(&args).is_err(), "{line}");
        }
    }
}
