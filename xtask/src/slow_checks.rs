//! `cargo xtask slow-checks` (README), as [`run`] lists them. The tree and
//! build directory end where `cargo xtask kernel` leaves them.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::kernel::{self, Flavour, Lite};
use crate::patchset::Series;
use crate::paths::{repo_root, Cache};
use crate::series::PATCH_DIR;
use crate::ui::{self, Step};
use crate::{apply, fsutil};

/// The last run's result table, below the logs.
const REPORT: &str = "slow-checks.md";

struct Stage {
    name: String,
    outcome: Result<()>,
    took: Duration,
}

impl Stage {
    /// Runs `check`, timed, under a progress line naming it.
    fn run(name: String, check: impl FnOnce() -> Result<()>) -> Self {
        let step = Step::start(&name);
        let start = Instant::now();
        let outcome = check();
        let took = start.elapsed();
        match &outcome {
            Ok(()) => step.done(),
            Err(err) => ui::progress(&format!("failed: {err:#}")),
        }
        Stage {
            name,
            outcome,
            took,
        }
    }
}

pub fn run(kernel_src: Option<&Path>, whole_series_only: bool) -> Result<()> {
    let cache = Cache::locate()?;
    let build = kernel::StageBuild::prepare(&cache, kernel_src)?;
    let series = Series::read_dir(&repo_root().join(PATCH_DIR))?;
    let patches: Vec<_> = series.changes().cloned().collect();
    let whole = Series {
        patches: patches.clone(),
    };
    let mut run = Run::new(cache.logs().join(REPORT));

    // The checks of the whole series first: they are quicker, and the tree
    // and build directory are where the tests left them.
    let applied = run.record(Stage::run("apply the whole series".into(), || {
        apply::sync_series(&build.tree.source, &whole, "the whole series").map(|_| ())
    }))?;
    let checks: [(&str, fn(&_) -> _); 4] = [
        ("make CLIPPY=1 on LITE", kernel::StageBuild::clippy),
        ("rustdoc of LITE", kernel::StageBuild::rustdoc),
        ("sparse on LITE's C files", kernel::StageBuild::sparse),
        ("htmldocs of LITE's pages", kernel::StageBuild::htmldocs),
    ];
    for (name, check) in checks.into_iter().filter(|_| applied) {
        run.record(Stage::run(name.into(), || check(&build)))?;
    }

    let mut built = true;
    let builds = if whole_series_only {
        0
    } else {
        patches.len() + 1
    };
    for count in 0..builds {
        let applied = Series {
            patches: patches[..count].to_vec(),
        };
        let name = match count.checked_sub(1) {
            Some(last) => format!("build with {} applied", patches[last].name),
            None => "build the pristine kernel".to_owned(),
        };
        built = run.record(build_stage(&build, &applied, name, Lite::Enabled))?;
        if !built {
            break;
        }
    }
    if built && !whole_series_only {
        let name = "build the whole series, LITE disabled".to_owned();
        run.record(build_stage(&build, &whole, name, Lite::Disabled))?;
    }
    // Back to the configuration and tree the tests build.
    build.forget_configuration()?;
    let restored = kernel::build(&cache, Flavour::Debug, kernel_src, false).map(|_| ());

    ui::say(&report(&run.stages, run.started.elapsed(), true));
    let failed = run
        .stages
        .iter()
        .filter_map(|s| Some((&s.name, s.outcome.as_ref().err()?)));
    let failures: Vec<String> = failed
        .map(|(name, err)| format!("{name}: {err:#}"))
        .collect();
    ui::fail_listing("slow checks failed", &failures)?;
    restored
}

/// The stages so far, their table rewritten after each one, so that an
/// interrupted run leaves what it found.
struct Run {
    stages: Vec<Stage>,
    started: Instant,
    report: std::path::PathBuf,
}

impl Run {
    fn new(report: std::path::PathBuf) -> Self {
        Self {
            stages: Vec::new(),
            started: Instant::now(),
            report,
        }
    }

    /// Adds `stage` and rewrites the table; returns whether it passed.
    fn record(&mut self, stage: Stage) -> Result<bool> {
        let passed = stage.outcome.is_ok();
        self.stages.push(stage);
        let table = report(&self.stages, self.started.elapsed(), false);
        fsutil::write(&self.report, table)?;
        Ok(passed)
    }
}

fn build_stage(build: &kernel::StageBuild, applied: &Series, name: String, lite: Lite) -> Stage {
    Stage::run(name, || {
        let count = applied.patches.len();
        apply::sync_series(
            &build.tree.source,
            applied,
            &format!("the first {count} patches"),
        )?;
        build.build(lite)
    })
}

/// The table of the stages and the time so far; `finished` once every
/// stage ran and the tests' kernel was rebuilt.
fn report(stages: &[Stage], total: Duration, finished: bool) -> String {
    let mut text = String::from("| step | result | seconds |\n|---|---|---|\n");
    for stage in stages {
        let result = if stage.outcome.is_ok() {
            "passed"
        } else {
            "FAILED"
        };
        text.push_str(&format!(
            "| {} | {result} | {} |\n",
            stage.name,
            stage.took.as_secs()
        ));
    }
    let passed = stages.iter().filter(|stage| stage.outcome.is_ok()).count();
    let end = if finished {
        "the tests' kernel rebuilt after them"
    } else {
        "the run goes on"
    };
    text.push_str(&format!(
        "\n{passed} of {} steps passed in {} minutes, {end}.\n",
        stages.len(),
        total.as_secs().div_ceil(60)
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lists_every_stage_and_the_total() {
        let stage = |name: &str, outcome| Stage {
            name: name.into(),
            outcome,
            took: Duration::from_secs(42),
        };
        let failed = Err(anyhow::anyhow!("no"));
        let stages = [
            stage("build the pristine kernel", Ok(())),
            stage("build with 0001-x.patch applied", failed),
        ];
        let text = report(&stages, Duration::from_secs(61), true);
        assert!(text.contains("| build the pristine kernel | passed | 42 |\n"));
        assert!(text.contains("| build with 0001-x.patch applied | FAILED | 42 |\n"));
        assert!(text.contains("1 of 2 steps passed in 2 minutes, the tests' kernel rebuilt"));
        assert!(report(&stages, Duration::ZERO, false).contains("the run goes on"));
    }
}
