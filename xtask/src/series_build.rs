//! `cargo xtask patches --build-each`: builds the series one patch at a
//! time, to show that every patch builds.
//!
//! The cached tree and the debug kernel's build directory are taken back
//! to the pristine kernel, then each patch is applied in turn and the
//! kernel built incrementally with the test's debug configuration (LITE as
//! a module, its KUnit tests and fault injection on, as far as the tree at
//! that patch defines them), and last the whole series with LITE disabled.
//! Warnings in LITE's files fail a step as errors do. The tree and build
//! directory end where `cargo xtask kernel` leaves them.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::kernel::{self, Flavour, Lite};
use crate::patchset::Series;
use crate::paths::{repo_root, Cache};
use crate::series::PATCH_DIR;
use crate::ui::{self, Step};
use crate::{apply, fsutil};

/// Where the result table of the last run is written, below the logs.
const REPORT: &str = "series-build.md";

/// One build of the run: what was applied, how LITE was configured, how it went.
struct Stage {
    name: String,
    lite: Lite,
    outcome: Result<()>,
    took: Duration,
}

/// `cargo xtask patches --build-each`.
pub fn run(kernel_src: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let started = Instant::now();
    let build = kernel::StageBuild::prepare(&cache, kernel_src)?;
    let series = Series::read_dir(&repo_root().join(PATCH_DIR))?;
    let patches: Vec<_> = series.changes().cloned().collect();
    let mut stages = Vec::new();
    for count in 0..=patches.len() {
        let name = match count.checked_sub(1) {
            Some(last) => patches[last].name.clone(),
            None => "the pristine kernel".to_owned(),
        };
        let applied = Series {
            patches: patches[..count].to_vec(),
        };
        let stage = build_stage(&build, &applied, name, Lite::Enabled);
        let failed = stage.outcome.is_err();
        stages.push(stage);
        if failed {
            break;
        }
    }
    if stages.iter().all(|stage| stage.outcome.is_ok()) {
        let whole = Series {
            patches: patches.clone(),
        };
        stages.push(build_stage(
            &build,
            &whole,
            "the whole series".into(),
            Lite::Disabled,
        ));
    }
    // Back to the configuration and tree the tests build.
    build.forget_configuration()?;
    let restored = kernel::build(&cache, Flavour::Debug, kernel_src, false).map(|_| ());

    let report = report(&stages, started.elapsed());
    ui::say(&report);
    fsutil::write(&cache.logs().join(REPORT), &report)?;
    let failures: Vec<String> = stages
        .iter()
        .filter_map(|stage| {
            stage
                .outcome
                .as_ref()
                .err()
                .map(|err| format!("{}: {err:#}", stage.name))
        })
        .collect();
    if !failures.is_empty() {
        bail!(
            "the series does not build patch by patch:\n  {}",
            failures.join("\n  ")
        );
    }
    restored
}

/// Applies `applied` to the tree and builds it with LITE as `lite` says.
fn build_stage(build: &kernel::StageBuild, applied: &Series, name: String, lite: Lite) -> Stage {
    let step = Step::start(format!("building with {name} applied, LITE {lite}"));
    let start = Instant::now();
    let outcome = apply::sync_series(&build.source, applied, &name).and_then(|_| build.build(lite));
    let took = start.elapsed();
    match &outcome {
        Ok(()) => step.done(),
        Err(err) => ui::progress(&format!("failed: {err:#}")),
    }
    Stage {
        name,
        lite,
        outcome,
        took,
    }
}

/// A Markdown table of the stages and the total time.
fn report(stages: &[Stage], total: Duration) -> String {
    let mut text = String::from("| applied | LITE | result | seconds |\n|---|---|---|---|\n");
    for stage in stages {
        let result = if stage.outcome.is_ok() {
            "builds"
        } else {
            "FAILS"
        };
        text.push_str(&format!(
            "| {} | {} | {result} | {} |\n",
            stage.name,
            stage.lite,
            stage.took.as_secs()
        ));
    }
    text.push_str(&format!(
        "\n{} builds in {} minutes, the kernel of the tests rebuilt after them.\n",
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
        let stage = |name: &str, lite, outcome| Stage {
            name: name.into(),
            lite,
            outcome,
            took: Duration::from_secs(42),
        };
        let stages = [
            stage("the pristine kernel", Lite::Enabled, Ok(())),
            stage("0001-x.patch", Lite::Enabled, Err(anyhow::anyhow!("no"))),
        ];
        let text = report(&stages, Duration::from_secs(61));
        assert!(text.contains("| the pristine kernel | enabled | builds | 42 |\n"));
        assert!(text.contains("| 0001-x.patch | enabled | FAILS | 42 |\n"));
        assert!(text.contains("2 builds in 2 minutes"));
    }
}
