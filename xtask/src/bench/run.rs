//! Running the benchmark: what the guests are asked to measure (kernel
//! command line parameters their `/init` reads), booting the comparison,
//! lock contention and failure clusters, and collecting the nodes' console
//! logs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{ASYNC_SIZES, BW_BYTES, BW_SIZES, DEPTHS, FAILURE_NODES, RPC_ASYNC_SIZE, SIZES};
use crate::cluster::{self, node_ip, Cluster, ClusterSpec, NoDeathWatch};
use crate::failure;
use crate::initramfs;
use crate::kernel::{self, Flavour};
use crate::paths::Cache;

/// Fewest operations per throughput series (`lite-bench`'s minimum too).
const MIN_BW_ITERS: u64 = 8;

/// perftest refuses fewer iterations than this.
const PERFTEST_MIN_ITERS: u64 = 5;

/// Memory of the comparison phase's VMs in MiB, and its upper bound.
const COMPARISON_VMS: (u32, Duration) = (MEMORY_MIB, Duration::from_secs(60 * 60));

/// Lock/unlock pairs per node in the contention phase (fewer if `--iters`
/// is lower): enough that each phase's throughput is measured over
/// several seconds, not over the moments its nodes start apart.
const LOCK_CONTEND_ITERS: u32 = 1000;

/// Memory of a lock contention phase's VMs in MiB, and its upper bound.
const LOCK_VMS: (u32, Duration) = (MEMORY_MIB, Duration::from_secs(30 * 60));

/// Guest role of the failure phase's nodes that stay up.
pub const FAILURE_SURVIVOR_ROLE: &str = "bench-failure-survivor";

/// Guest role of the failure phase's node that gets killed (the last).
pub const FAILURE_VICTIM_ROLE: &str = "bench-failure-victim";

/// Memory of every benchmark VM in MiB.
const MEMORY_MIB: u32 = 512;

/// Memory of the memory region phase's VMs in MiB: node 1 holds 100k
/// one-page regions (native, then LITE's LMRs) and a 1 GiB LMR, node 2
/// maps and registers 1 GiB for the native create/free series; and the
/// phase's upper bound.
const REGIONS_VMS: (u32, Duration) = (2560, Duration::from_secs(30 * 60));

/// Live regions at each step of the memory region curve.
pub const REGION_COUNTS: [u64; 4] = [1, 100, 10_000, 100_000];

/// Sizes of the regions the memory region curve creates and frees.
pub const CREATE_SIZES: [u64; 6] = [4096, 65536, 1 << 20, 16 << 20, 256 << 20, 1 << 30];

/// Memory of the process curve's VMs in MiB: 64 processes on each, every
/// one with its own verbs context, queue pair and buffers in the native
/// steps; and the phase's upper bound.
const PROCESSES_VMS: (u32, Duration) = (1024, Duration::from_secs(30 * 60));

/// Processes at each step of the process curve.
pub const PROCESS_COUNTS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Most operations of one step of the process curve, shared by its
/// processes (fewer if `--iters` is lower): every step takes about as long,
/// and the one-process steps are long enough to be measured.
const PROCESS_STEP_OPS: u32 = 4000;

/// Nodes of the cluster-size curve's clusters.
pub const CLUSTER_SIZES: [usize; 3] = [2, 4, 8];

/// Memory of the cluster-size curve's VMs in MiB (eight of them at once),
/// and the upper bound of one of its phases.
const CLUSTER_VMS: (u32, Duration) = (384, Duration::from_secs(20 * 60));

/// Calls from every node to each of its peers in the all-to-all RPC.
pub const SCALE_CALLS: u32 = 200;

/// Most barriers each node times per cluster size (fewer if `--iters` is
/// lower).
const SCALE_BARRIERS: u32 = 50;

/// Nodes of the LITE-DSM phase: node 1 faults, nodes 2 and 3 read the
/// pages its write faults take back.
pub const DSM_NODES: usize = 3;

/// Memory of the LITE-DSM phase's VMs in MiB, and its upper bound.
const DSM_VMS: (u32, Duration) = (MEMORY_MIB, Duration::from_secs(30 * 60));

/// Memory of an application phase's VMs in MiB, and its upper bound.
pub(super) const APPS_VMS: (u32, Duration) = (MEMORY_MIB, Duration::from_secs(45 * 60));

/// One perftest bandwidth run: `ib_<op>_bw -s size -t depth -n iters`.
#[derive(Clone, Debug, PartialEq)]
pub struct BwRun {
    pub op: &'static str,
    pub size: u64,
    pub depth: u32,
    pub iters: u64,
}

/// Operations per throughput series of `size`-byte operations: [`BW_BYTES`]
/// worth, at least [`MIN_BW_ITERS`], at most `iters` (which wins). The same
/// rule as `lite_tools::bench::throughput_iters`, which `lite-bench` uses
/// with the same budget.
pub fn bw_iters(size: u64, iters: u32) -> u64 {
    (BW_BYTES / size.max(1))
        .max(MIN_BW_ITERS)
        .min(u64::from(iters))
        .max(1)
}

/// The perftest bandwidth runs, in order: `ib_write_bw` for every
/// asynchronous size at every depth, `ib_write_bw -t 1` for the remaining
/// memset/memcpy sizes (the baseline for one operation at a time),
/// `ib_read_bw` for every asynchronous size at every depth, then
/// `ib_send_bw` of [`RPC_ASYNC_SIZE`] bytes at every depth (the baseline
/// of asynchronous RPC).
pub fn bw_runs(iters: u32) -> Vec<BwRun> {
    let run = |op, size, depth| BwRun {
        op,
        size,
        depth,
        iters: bw_iters(size, iters).max(PERFTEST_MIN_ITERS),
    };
    let sweep = |op| {
        ASYNC_SIZES
            .iter()
            .flat_map(move |&size| DEPTHS.iter().map(move |&depth| run(op, size, depth)))
    };
    let mut runs: Vec<BwRun> = sweep("write").collect();
    for size in BW_SIZES {
        if !runs.iter().any(|r| r.size == size && r.depth == 1) {
            runs.push(run("write", size, 1));
        }
    }
    runs.extend(sweep("read"));
    runs.extend(
        DEPTHS
            .iter()
            .map(|&depth| run("send", RPC_ASYNC_SIZE, depth)),
    );
    runs
}

/// The kernel command line parameters of the throughput measurements
/// (read by the guest's /init).
pub fn bw_params(iters: u32) -> Vec<String> {
    let runs: Vec<String> = bw_runs(iters)
        .iter()
        .map(|r| format!("{}:{}:{}:{}", r.op, r.size, r.depth, r.iters))
        .collect();
    let depths: Vec<u64> = DEPTHS.iter().copied().map(u64::from).collect();
    vec![
        format!("lite.bwruns={}", runs.join(",")),
        format!("lite.bwsizes={}", comma_list(&BW_SIZES)),
        format!("lite.asyncsizes={}", comma_list(&ASYNC_SIZES)),
        format!("lite.depths={}", comma_list(&depths)),
        format!("lite.bwbytes={BW_BYTES}"),
    ]
}

/// `values` as one kernel command line value: `4096,65536`.
fn comma_list(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Lock/unlock pairs per node in the contention phase for `--iters`.
pub fn lock_iters(iters: u32) -> u32 {
    iters.min(LOCK_CONTEND_ITERS)
}

/// What every phase boots: the release kernel, the full initramfs and the
/// cluster manager, and the run's log directory (emptied first), in
/// subdirectories of which the later phases log.
pub struct Setup {
    kernel: PathBuf,
    initrd: PathBuf,
    manager: PathBuf,
    pub logs: PathBuf,
}

impl Setup {
    /// Builds (or takes `kernel_image` for) the release kernel, builds the
    /// initramfs and the cluster manager, and empties the log directory.
    pub fn prepare(kernel_src: Option<&Path>, kernel_image: Option<&Path>) -> Result<Self> {
        let cache = Cache::locate()?;
        let kernel = kernel::image(&cache, Flavour::Release, kernel_src, kernel_image)?;
        let initrd = initramfs::build(&cache, initramfs::Variant::Full)?;
        let manager = cluster::build_manager(&cache)?;
        let logs = cache.run_logs("bench")?;
        Ok(Setup {
            kernel,
            initrd,
            manager,
            logs,
        })
    }

    /// A cluster of one VM per role, pinned to host CPUs so that timing
    /// inside a guest is not disturbed by its neighbours.
    fn spec<'a>(
        &'a self,
        roles: Vec<String>,
        extra_append: &'a dyn Fn(usize) -> Vec<String>,
        logs: &'a Path,
    ) -> ClusterSpec<'a> {
        ClusterSpec {
            roles,
            kernel: &self.kernel,
            initrd: &self.initrd,
            memory_mib: MEMORY_MIB,
            extra_append,
            pin_cpus: true,
            manager: &self.manager,
            logs,
            dead_after_ms: None,
        }
    }

    /// The run's log subdirectory `name`, created.
    fn logs_of(&self, name: &str) -> Result<PathBuf> {
        let logs = self.logs.join(name);
        std::fs::create_dir_all(&logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        Ok(logs)
    }

    /// Boots a VM of `memory_mib` per role, logging into the run's log
    /// subdirectory `dir` (the log directory itself if empty), each given
    /// `args` and node 2 also node 1's address as its peer when `peer`, and
    /// waits up to `timeout` for them.
    pub(super) fn boot_each(
        &self,
        dir: &str,
        roles: Vec<String>,
        args: Vec<String>,
        peer: bool,
        (memory_mib, timeout): (u32, Duration),
    ) -> Result<Phase> {
        let logs = self.logs_of(dir)?;
        let extra = |i: usize| {
            let mut args = args.clone();
            if peer && i == 2 {
                args.push(format!("lite.peer={}", node_ip(1)));
            }
            args
        };
        let mut spec = self.spec(roles, &extra, &logs);
        spec.memory_mib = memory_mib;
        boot(&spec, timeout)
    }
}

/// One node's console log, read after its VM stopped: everything node
/// `name` (`node2`) printed, invalid UTF-8 replaced; empty if the log
/// could not be read.
pub struct NodeLog {
    pub name: String,
    pub text: String,
}

/// What a finished phase left behind: every node's console log, in node
/// order, and how waiting for the VMs ended (an error if one failed or
/// timed out).
pub struct Phase {
    pub logs: Vec<NodeLog>,
    pub waited: Result<()>,
}

/// What the two VMs of the comparison phase measure.
#[derive(Clone, Copy, Debug)]
pub struct ComparisonPlan {
    /// Operations per series of the one-off series.
    pub iters: u32,
    /// Interleaved rounds of the native verbs baseline and LITE (0: none).
    pub rounds: u32,
    /// Operations per series in each round.
    pub round_iters: u32,
    /// Rounds of the isolation run's unloaded and loaded phases.
    pub isolation_rounds: u32,
    /// Whether perftest and every `lite-bench` series run after the rounds.
    pub full: bool,
}

/// The comparison phase: first the interleaved rounds (node 1 serves the
/// native verbs baseline and holds LITE's memory, node 2 measures both),
/// then, if `plan.full`, node 1 serves perftest and node 2 is its client,
/// and node 2 measures every `lite-bench` series against node 1.
pub fn comparison_phase(setup: &Setup, plan: ComparisonPlan) -> Result<Phase> {
    let mut args = vec![
        format!("lite.iters={}", plan.iters),
        format!("lite.sizes={}", comma_list(&SIZES)),
        format!("lite.rounds={}", plan.rounds),
        format!("lite.rounditers={}", plan.round_iters),
        format!("lite.isolationrounds={}", plan.isolation_rounds),
        format!("lite.comparison={}", u8::from(plan.full)),
    ];
    args.extend(bw_params(plan.iters));
    let roles = vec!["bench-native-server".into(), "bench-native-client".into()];
    setup.boot_each("", roles, args, true, COMPARISON_VMS)
}

/// Name of round `round` of the lock contention phase of `contenders`
/// nodes, and of its log directory.
pub fn lock_phase_name(contenders: usize, round: u32) -> String {
    format!("locks{contenders}-{round}")
}

/// Round `round` of a lock contention phase: `contenders` nodes taking
/// turns on one lock kept by one more node (node 1, which does not
/// contend), `lock_iters` pairs each, logging into [`lock_phase_name`].
pub fn lock_phase(setup: &Setup, contenders: usize, round: u32, lock_iters: u32) -> Result<Phase> {
    let roles = vec!["bench-lock".into(); contenders + 1];
    let args = vec![format!("lite.lockiters={lock_iters}")];
    let dir = lock_phase_name(contenders, round);
    setup.boot_each(&dir, roles, args, false, LOCK_VMS)
}

/// The memory region phase: node 1 serves the native baseline's regions
/// and holds LITE's LMRs, node 2 measures both; `iters` operations per
/// series, logging into `regions/`.
pub fn regions_phase(setup: &Setup, iters: u32) -> Result<Phase> {
    let roles = vec!["bench-regions-server".into(), "bench-regions-client".into()];
    let args = vec![
        format!("lite.iters={iters}"),
        format!("lite.regioncounts={}", comma_list(&REGION_COUNTS)),
        format!("lite.createsizes={}", comma_list(&CREATE_SIZES)),
    ];
    setup.boot_each("regions", roles, args, true, REGIONS_VMS)
}

/// Rounds of the process curve: each step's LITE/native ratio is the
/// median of as many.
pub const PROCESS_ROUNDS: u32 = 3;

/// Barriers each node times per cluster size for `--iters`.
pub fn scale_barriers(iters: u32) -> u32 {
    iters.min(SCALE_BARRIERS)
}

/// One step of the cluster-size curve: `nodes` small VMs, every one
/// timing its join, `barriers` barriers and all-to-all RPC, logging into
/// `cluster<nodes>/`.
pub fn cluster_phase(setup: &Setup, nodes: usize, barriers: u32) -> Result<Phase> {
    let roles = vec!["bench-scale".into(); nodes];
    let args = vec![
        format!("lite.iters={barriers}"),
        format!("lite.scalecalls={SCALE_CALLS}"),
    ];
    setup.boot_each(&format!("cluster{nodes}"), roles, args, false, CLUSTER_VMS)
}

/// The LITE-DSM phase: [`DSM_NODES`] VMs, node 1 timing `round_iters`
/// faults of each kind and as many LITE reads of a page in each of
/// `rounds` rounds, logging into `dsm/`.
pub fn dsm_phase(setup: &Setup, rounds: u32, round_iters: u32) -> Result<Phase> {
    let roles = vec!["bench-dsm".into(); DSM_NODES];
    let args = vec![
        format!("lite.rounds={rounds}"),
        format!("lite.rounditers={round_iters}"),
    ];
    setup.boot_each("dsm", roles, args, false, DSM_VMS)
}

/// Operations of each step of the process curve for `--iters`.
pub fn process_step_ops(iters: u32) -> u32 {
    iters.saturating_mul(4).min(PROCESS_STEP_OPS)
}

/// The process curve phase: node 1 serves (a server process per native
/// client process, an echo thread per LITE process) and holds the LMRs,
/// node 2 runs the processes; `step_ops` operations per step, shared by
/// its processes; logging into `processes/`.
pub fn processes_phase(setup: &Setup, step_ops: u32) -> Result<Phase> {
    let roles = vec![
        "bench-processes-server".into(),
        "bench-processes-client".into(),
    ];
    let args = vec![
        format!("lite.processops={step_ops}"),
        format!("lite.processrounds={PROCESS_ROUNDS}"),
        format!("lite.processcounts={}", comma_list(&PROCESS_COUNTS)),
    ];
    setup.boot_each("processes", roles, args, true, PROCESSES_VMS)
}

/// The failure phase: [`FAILURE_NODES`] nodes running `lite-failure-test`
/// alone, the last one the victim, whose VM is killed
/// [`failure::KILL_DELAY`] after its ready marker, exactly as in the
/// failure test; the survivors then finish the program, leave/rejoin
/// cycles included. Logs into `failure/`. `waited` fails if the victim
/// did not get ready or was not killed by the harness (the survivors are
/// then stopped at once: without its death they cannot finish).
pub fn failure_phase(setup: &Setup) -> Result<Phase> {
    let logs = setup.logs_of("failure")?;
    let no_extra = |_: usize| Vec::new();
    let roles = failure::roles(FAILURE_NODES, FAILURE_SURVIVOR_ROLE, FAILURE_VICTIM_ROLE);
    let spec = setup.spec(roles, &no_extra, &logs);
    let mut cluster = Cluster::start(&spec)?;
    let started = Instant::now();
    let mut deaths = NoDeathWatch::new(&spec);
    let waited = match failure::kill_when_ready(&mut cluster, FAILURE_NODES, started, &mut deaths) {
        Ok(()) => cluster.wait(failure::SURVIVORS_DONE_TIMEOUT, &mut || Ok(())),
        Err(err) => {
            cluster.kill_all();
            Err(err.context(format!("node{FAILURE_NODES} (the victim) was not killed")))
        }
    };
    Ok(collect(cluster, waited))
}

/// Boots `spec`, waits up to `timeout` for every VM and returns the node
/// logs with the outcome of the wait.
fn boot(spec: &ClusterSpec, timeout: Duration) -> Result<Phase> {
    let mut cluster = Cluster::start(spec)?;
    let waited = cluster.wait(timeout, &mut || Ok(()));
    Ok(collect(cluster, waited))
}

/// Stops what still runs of `cluster` and reads every node's log; the
/// phase ended as `waited` says.
fn collect(cluster: Cluster, waited: Result<()>) -> Phase {
    let node_logs = cluster.node_logs();
    // Every VM is stopped first (after a timeout some still run), so no
    // log is read while it still grows.
    drop(cluster);
    let logs = node_logs
        .into_iter()
        .map(|(name, path)| NodeLog {
            name,
            text: String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned(),
        })
        .collect();
    Phase { logs, waited }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::ATOMICS;

    #[test]
    fn plans_the_perftest_bandwidth_runs() {
        let runs = bw_runs(1000);
        // 2 sizes x 6 depths per direction, plus 1 MiB and 4 MiB at depth
        // 1, plus 64-byte sends at 6 depths.
        assert_eq!(runs.len(), 2 * 6 + 2 + 2 * 6 + 6);
        let run = |r: &BwRun| format!("{} {} {} {}", r.op, r.size, r.depth, r.iters);
        let planned: Vec<String> = [0, 11, 12, 13].iter().map(|&i| run(&runs[i])).collect();
        let want = "write 4096 1 1000, write 65536 32 256, write 1048576 1 16, write 4194304 1 8";
        assert_eq!(planned, want.split(", ").collect::<Vec<_>>());
        assert!(runs[14..26].iter().all(|r| r.op == "read"));
        let rpc_send = |r: &BwRun| r.op == "send" && r.size == RPC_ASYNC_SIZE;
        assert!(runs[26..].iter().all(rpc_send));
        // Every memset/memcpy size has its depth 1 write baseline.
        for size in BW_SIZES {
            let baseline = |r: &BwRun| r.op == "write" && r.size == size && r.depth == 1;
            assert!(runs.iter().any(baseline), "{size}");
        }
        // Every perftest program the plan runs is in the guest image.
        for r in &runs {
            let program = format!("ib_{}_bw", r.op);
            let packed = crate::initramfs::HOST_TOOLS.contains(&program.as_str());
            assert!(packed, "{program} is not packed into the guests");
        }
        // perftest's minimum iteration count.
        assert!(bw_runs(2).iter().all(|r| r.iters == 5));
        assert_eq!(bw_iters(4096, 2), 2);

        let params = bw_params(1000);
        assert!(params[0].starts_with("lite.bwruns=write:4096:1:1000,write:4096:2:1000,"));
        assert!(params[0].ends_with(",read:65536:32:256,send:64:1:1000,send:64:2:1000,send:64:4:1000,send:64:8:1000,send:64:16:1000,send:64:32:1000"));
        assert!(params.contains(&"lite.bwsizes=4096,65536,1048576,4194304".to_string()));
        assert!(params.contains(&"lite.asyncsizes=4096,65536".to_string()));
        assert!(params.contains(&"lite.depths=1,2,4,8,16,32".to_string()));
        assert!(params.contains(&"lite.bwbytes=16777216".to_string()));
        // No spaces: each is one kernel command line word.
        assert!(params.iter().all(|p| !p.contains(' ')));
    }

    #[test]
    fn contention_runs_at_most_its_own_pair_count() {
        assert_eq!(lock_iters(5000), LOCK_CONTEND_ITERS);
        assert_eq!(lock_iters(20), 20);
    }

    #[test]
    fn the_guest_script_runs_what_the_report_expects() {
        let init = include_str!("../init.sh");
        // Both sides run ib_atomic_lat with every atomic type compared.
        let flags: Vec<&str> = ATOMICS.iter().map(|&(flag, _)| flag).collect();
        let loop_line = format!("for atomic in {}; do", flags.join(" "));
        assert!(init.contains(&loop_line), "no {loop_line:?} in init.sh");
        for needle in [
            "test=ib_atomic_lat size=8 atomic=$atomic side=$side",
            // Every program of a round reports its VM's busy CPU time.
            r#"echo "LITE-RECORD {\"cpu\":{\"side\":\"$1\",\"program\":\"$2\",\"busy_ticks\":$(("#,
            "timed_round \"$1\" verbs \"$group\" || status=1",
            "timed_round \"$1\" lite \"$group\" || status=1",
            "echo \"LITE-CPU-ROUND-BEGIN round=$round\"",
            // Latency rounds: LITE's series take turns with the baseline's,
            // which the server side serves beside LITE's.
            "echo \"LITE-ROUND-BEGIN round=$round\"",
            "interleaved_round \"$1\" \"$group\" || status=1",
            "--ops $2 --turns\"",
            "lite_round \"$2\" --turn-ops \"$turnops\" --baseline",
            "lite.turnops=*) turnops=${arg#lite.turnops=} ;;",
            // The memory region phase's parameters.
            "lite.regioncounts=*) regioncounts=${arg#lite.regioncounts=} ;;",
            "lite.createsizes=*) createsizes=${arg#lite.createsizes=} ;;",
            "--series regions",
            "--regions \"$regioncounts\" --create-sizes \"$createsizes\"",
            // The process curve phase's parameters: each step's two sides
            // one after the other.
            "lite.processcounts=*) processcounts=${arg#lite.processcounts=} ;;",
            "lite-verbs-bench --server --fork --wait event",
            "--processes \"$count\" --ops write,rpc",
            "lite.processops=*) processops=${arg#lite.processops=} ;;",
            "lite.processrounds=*) processrounds=${arg#lite.processrounds=} ;;",
            "--series processes --iters \"$each\"",
            "--wait event --iters \"$each\"",
            "--process-counts \"$count\"",
            // A perftest server that could not calibrate its clock does not
            // fail the run: the client's figures are the ones parsed.
            "echo \"$out\" | grep -q \"Can't produce a report\"; then",
            // Whichever VM joins LITE first, the VM serving the native
            // baseline holds LITE's memory and the other measures both sides.
            "*-server) litepeer=this ;;\n*-client) litepeer=other ;;",
            "lite-bench --cm \"$cm\" --peer-node \"$litepeer\" --series latency",
            "lite-bench --cm \"$cm\" --peer-node \"$litepeer\" --series regions",
            "set -- --cm \"$cm\" --peer-node \"$litepeer\" --iters",
            "lite-bench --cm \"$cm\" --peer-node \"$litepeer\" \\\n\t\t\t--series processes",
            "[ -n \"$isolationrounds\" ] && set -- \"$@\" --qos-rounds",
            // The cluster-size phase's role and parameter.
            "bench-scale) lite-bench --cm \"$cm\" --scale \"$nodes\" --iters \"$iters\" \
             --scale-calls \"$scalecalls\"",
            "lite.scalecalls=*) scalecalls=${arg#lite.scalecalls=} ;;",
            // The contention phase's role and parameter.
            "bench-lock) lite-bench --cm \"$cm\" --contend \"$nodes\"",
            // The LITE-DSM phase's role, with the rounds' parameters.
            "bench-dsm) lite-bench --cm \"$cm\" --dsm \"$nodes\" --iters \"$rounditers\" \
             --dsm-rounds \"$rounds\" --turn-ops \"$turnops\"",
            "lite.lockiters=*) lockiters=${arg#lite.lockiters=} ;;",
        ] {
            assert!(init.contains(needle), "init.sh lacks {needle:?}");
        }
        // Every operation compared runs in one group of each round, under
        // the names both programs' `--ops` take.
        let groups = init
            .lines()
            .find_map(|line| line.strip_prefix("latency_groups=\""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("latency_groups in init.sh");
        let mut ops: Vec<&str> = groups.split([' ', ',']).collect();
        ops.sort_unstable();
        let mut compared: Vec<&str> = super::super::rounds::compared_ops().collect();
        compared.sort_unstable();
        assert_eq!(ops, compared);
        // The memory region and process curve phases' roles.
        for (phase, side) in [("regions", "region_curve"), ("processes", "process_curve")] {
            for role in ["server", "client"] {
                let case = format!("\nbench-{phase}-{role}) {side} {role} || rc=1 ;;\n");
                assert!(init.contains(&case), "{case}");
            }
        }
        // The failure phase's roles: the failure program alone, each in
        // its part.
        for (role, part) in [
            (FAILURE_SURVIVOR_ROLE, "survivor"),
            (FAILURE_VICTIM_ROLE, "victim"),
        ] {
            let case = format!(
                "\n{role}) lite-failure-test --cm \"$cm\" --nodes \"$nodes\" --role {part} \
                 || rc=$? ;;\n"
            );
            assert!(init.contains(&case), "{case}");
        }
    }
}
