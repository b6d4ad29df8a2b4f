//! The benchmark's application phases: the paper's applications
//! (`userspace/apps`) on clusters of [`APP_NODES`] VMs, each over LITE, over
//! TCP sockets between the same VMs (what a user would write without LITE)
//! and alone on one VM, in several rounds. Every run prints one
//! `LITE-APP` line (see `userspace/apps/src/report.rs`); the report gives,
//! per application and cluster size, the median run time and spread of
//! each version, LITE's speedup over both, and the lines of the
//! applications' code that touch LITE.

use std::collections::BTreeSet;

use anyhow::Result;

use super::parse::{number, Fields};
use super::report::{say_indented, Table};
use super::rounds::Range;
use super::run::{Phase, Setup, APPS_VMS};
use crate::paths::repo_root;
use crate::ui;

/// Cluster sizes of the application phases (the paper's scaling, 2 to 4).
pub const APP_NODES: [usize; 2] = [2, 4];

/// Rounds of every application run per phase.
pub const APP_ROUNDS: u32 = 3;

/// The guest role of the application phases.
pub const APPS_ROLE: &str = "bench-apps";

/// The applications' jobs in report order.
const JOBS: [&str; 5] = ["log", "wordcount", "invindex", "pagerank", "components"];

/// Versions in report order (`dsm`: LITE-Graph-DSM, the graph jobs only).
const TRANSPORTS: [&str; 4] = ["local", "tcp", "lite", "dsm"];

/// What the report takes of a `LITE-APP` line: a run of job `app` (`log`,
/// `wordcount`, ...) over `transport` (`lite`, `tcp` or `local`) in the
/// phase of `cluster` VMs (a local run's neighbours were busy too), its
/// `work` in `unit`s, and whether its result matched the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct AppRun {
    pub cluster: usize,
    pub app: String,
    pub transport: String,
    pub work: u64,
    pub unit: String,
    pub seconds: f64,
    pub checked: bool,
}

/// The `LITE-APP` lines of `text`, a log of the `cluster`-VM phase;
/// malformed ones are skipped.
pub fn parse_app_runs(text: &str, cluster: usize) -> Vec<AppRun> {
    text.lines()
        .filter_map(|line| {
            line.split_once("LITE-APP ")
                .map(|(_, rest)| Fields::parse(rest))
        })
        .filter_map(|fields| {
            Some(AppRun {
                cluster,
                app: fields.text("app")?.to_string(),
                transport: fields.text("transport")?.to_string(),
                work: fields.integer("work")?,
                unit: fields.text("unit")?.to_string(),
                seconds: number(fields.text("seconds")?)?,
                checked: fields.text("checked")? == "yes",
            })
        })
        .collect()
}

/// Boots `nodes` VMs running every application [`APP_ROUNDS`] times;
/// logs into `apps<nodes>/`.
pub fn phase(setup: &Setup, nodes: usize) -> Result<Phase> {
    let roles = vec![APPS_ROLE.to_string(); nodes];
    let args = vec![format!("lite.approunds={APP_ROUNDS}")];
    setup.boot_each(&format!("apps{nodes}"), roles, args, false, APPS_VMS)
}

/// The applications' table, one string per line: per job and cluster size,
/// each version's median time (min-max over its runs; the local runs of
/// the same phase), LITE's speedup over TCP and over one node, and LITE's
/// throughput; runs whose result differed are counted.
pub fn table(runs: &[AppRun]) -> Vec<String> {
    let table = Table::new(
        "<11 job|>5 nodes|>22 local s (min-max)|>22 tcp s (min-max)|>22 lite s (min-max)|\
         >9 lite/tcp|>9 lite/1|>18 lite per s|>22 dsm s (min-max)|>9 dsm/lite",
    );
    let mut lines = vec![table.header()];
    // LITE's throughput at its median time, in the job's unit.
    let throughput = |job: &str, cluster: usize, seconds: Option<Range>| {
        let run = runs
            .iter()
            .find(|r| r.app == job && r.transport == "lite" && r.cluster == cluster);
        match (run, seconds) {
            (Some(run), Some(range)) if range.median > 0.0 => {
                format!("{:.0} {}", run.work as f64 / range.median, run.unit)
            }
            _ => "-".to_string(),
        }
    };
    let cell = |job: &str, transport: &str, cluster: usize| {
        let times: Vec<f64> = runs
            .iter()
            .filter(|r| r.app == job && r.transport == transport && r.checked)
            .filter(|r| r.cluster == cluster)
            .map(|r| r.seconds)
            .collect();
        Range::of(&times)
    };
    let sizes: BTreeSet<usize> = runs.iter().map(|r| r.cluster).collect();
    let show = |m: Option<Range>| m.map_or("-".to_string(), |r| r.show(3));
    let speedup = |slow: Option<Range>, fast: Option<Range>| match (slow, fast) {
        (Some(s), Some(f)) if f.median > 0.0 => format!("{:.2}x", s.median / f.median),
        _ => "-".to_string(),
    };
    for job in JOBS {
        for &nodes in &sizes {
            let [local, tcp, lite, dsm] = TRANSPORTS.map(|transport| cell(job, transport, nodes));
            if tcp.is_none() && lite.is_none() {
                continue;
            }
            lines.push(table.row([
                job,
                &nodes.to_string(),
                &show(local),
                &show(tcp),
                &show(lite),
                &speedup(tcp, lite),
                &speedup(local, lite),
                &throughput(job, nodes, lite),
                &show(dsm),
                &speedup(dsm, lite),
            ]));
        }
    }
    for transport in TRANSPORTS {
        let failed = runs
            .iter()
            .filter(|r| r.transport == transport && !r.checked)
            .count();
        if failed > 0 {
            lines.push(format!(
                "{failed} {transport} run(s) differed from the reference"
            ));
        }
    }
    lines.push(
        "lite/tcp and lite/1: how many times faster LITE's median is than TCP's and than one node's"
            .to_string(),
    );
    lines.push(
        "dsm: LITE-Graph-DSM, the graph engine sharing its graph and values through LITE-DSM; \
         dsm/lite: its median over LITE's (how many times slower)"
            .to_string(),
    );
    lines
}

/// Lines of code, without blank lines, comments and tests, of the source
/// files under `userspace/apps/src/` that touch LITE, as the paper counted
/// its applications' LITE code.
pub fn lite_lines_table(files: &[(&str, &str)]) -> Vec<String> {
    let root = repo_root().join("userspace/apps/src");
    files
        .iter()
        .map(|(app, file)| {
            let count = std::fs::read_to_string(root.join(file))
                .map(|text| code_lines(&text).to_string())
                .unwrap_or_else(|_| "?".to_string());
            format!("{app:<15} {count:>5} lines touching LITE ({file})")
        })
        .collect()
}

/// Lines of `source` that are code: not blank, not only a comment, not in
/// its `#[cfg(test)]` module (which is taken to run to the end).
fn code_lines(source: &str) -> usize {
    source
        .lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .filter(|line| {
            let t = line.trim();
            !t.is_empty() && !t.starts_with("//")
        })
        .count()
}

/// Prints the applications' tables.
pub fn say(runs: &[AppRun], lite_files: &[(&str, &str)]) {
    ui::say(&format!(
        "==> applications ({} rounds; clusters of {:?} VMs on this host's cores; each version \
         checks its result against a single-process reference)",
        APP_ROUNDS, APP_NODES
    ));
    say_indented(table(runs));
    say_indented(lite_lines_table(lite_files));
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
[  1.0] LITE-APP app=wordcount transport=lite nodes=2 work=100 unit=bytes seconds=0.5 per_s=200.00 checked=yes
LITE-APP app=wordcount transport=tcp nodes=2 work=100 unit=bytes seconds=1.0 per_s=100.00 checked=yes
LITE-APP app=wordcount transport=local nodes=1 work=100 unit=bytes seconds=2.0 per_s=50.00 checked=yes
LITE-APP app=wordcount transport=local nodes=1 work=100 unit=bytes seconds=4.0 per_s=25.00 checked=yes
LITE-APP app=pagerank transport=lite nodes=2 work=9 unit=edges seconds=nan per_s=0 checked=yes
LITE-APP app=pagerank transport=tcp nodes=2 work=9 unit=edges seconds=1.0 per_s=9 checked=no
LITE-APP app=broken
LITE-APP app=wordcount transport=dsm nodes=2 work=100 unit=bytes seconds=1.5 per_s=66.67 checked=yes
";

    #[test]
    fn the_table_compares_medians_and_names_failed_checks() {
        // Every well-formed line.
        let mut runs = parse_app_runs(LOG, 2);
        assert_eq!(runs.len(), 6);
        assert_eq!((runs[0].app.as_str(), runs[0].seconds), ("wordcount", 0.5));
        assert!(!runs[4].checked);
        // A 4-VM phase's local run is not the 2-VM phase's baseline.
        runs.extend(parse_app_runs(
            "LITE-APP app=wordcount transport=local nodes=1 work=1 unit=bytes seconds=99 per_s=0 checked=yes",
            4,
        ));
        let table = table(&runs);
        let row = table.iter().find(|l| l.starts_with("wordcount"));
        let row = row.expect("a wordcount row");
        assert!(row.contains("3.000 (2.000-4.000)"), "{row}");
        assert!(row.contains("2.00x") && row.contains("6.00x"), "{row}");
        assert!(row.contains("200 bytes"), "{row}");
        // LITE-Graph-DSM's column, and its ratio to LITE.
        assert!(
            row.contains("1.500 (1.500-1.500)") && row.ends_with("3.00x"),
            "{row}"
        );
        let differed = "1 tcp run(s) differed from the reference";
        assert!(table.iter().any(|l| l == differed));
    }

    #[test]
    fn counts_code_lines_only() {
        let source = "//! doc\n\nfn a() {\n    // why\n    b();\n}\n#[cfg(test)]\nmod tests {}\n";
        assert_eq!(code_lines(source), 3);
    }
}
