//! `cargo xtask slow-checks`: the kernel's checks that take too long for
//! `cargo xtask test`.
//!
//! - Every patch builds: the cached tree and the debug kernel's build
//!   directory are taken back to the pristine kernel, then each patch is
//!   applied in turn and the kernel built incrementally with the test's
//!   debug configuration (LITE as a module, its KUnit tests and fault
//!   injection on, as far as the tree at that patch defines them); last the
//!   whole series with LITE disabled.
//! - `make CLIPPY=1` on LITE, rustdoc of LITE's crate (private items
//!   included), `make C=2` (sparse) on LITE's C files, and `make htmldocs`
//!   of the directories holding LITE's pages.
//!
//! Any warning about LITE's files fails a step as an error does. The tree
//! and build directory end where `cargo xtask kernel` leaves them.

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
const REPORT: &str = "slow-checks.md";

/// One step of the run: what it did, how it went, how long it took.
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

/// `cargo xtask slow-checks`.
pub fn run(kernel_src: Option<&Path>) -> Result<()> {
    let cache = Cache::locate()?;
    let started = Instant::now();
    let build = kernel::StageBuild::prepare(&cache, kernel_src)?;
    let series = Series::read_dir(&repo_root().join(PATCH_DIR))?;
    let patches: Vec<_> = series.changes().cloned().collect();
    let mut stages = Vec::new();
    for count in 0..=patches.len() {
        let applied = Series {
            patches: patches[..count].to_vec(),
        };
        let name = match count.checked_sub(1) {
            Some(last) => format!("build with {} applied", patches[last].name),
            None => "build the pristine kernel".to_owned(),
        };
        let stage = build_stage(&build, &applied, name, Lite::Enabled);
        let failed = stage.outcome.is_err();
        stages.push(stage);
        if failed {
            break;
        }
    }
    let whole = Series {
        patches: patches.clone(),
    };
    if stages.iter().all(|stage| stage.outcome.is_ok()) {
        let name = "build the whole series, LITE disabled".to_owned();
        stages.push(build_stage(&build, &whole, name, Lite::Disabled));
    }
    let applied = Stage::run("apply the whole series".into(), || {
        apply::sync_series(&build.source, &whole, "the whole series").map(|_| ())
    });
    let ready = applied.outcome.is_ok();
    stages.push(applied);
    if ready {
        stages.push(Stage::run("make CLIPPY=1 on LITE".into(), || {
            build.clippy()
        }));
        stages.push(Stage::run("rustdoc of LITE".into(), || build.rustdoc()));
        stages.push(Stage::run("sparse on LITE's C files".into(), || {
            build.sparse()
        }));
        stages.push(Stage::run("htmldocs of LITE's pages".into(), || {
            build.htmldocs()
        }));
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
    Stage::run(name, || {
        let count = applied.patches.len();
        apply::sync_series(
            &build.source,
            applied,
            &format!("the first {count} patches"),
        )?;
        build.build(lite)
    })
}

/// A Markdown table of the stages and the total time.
fn report(stages: &[Stage], total: Duration) -> String {
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
    text.push_str(&format!(
        "\n{passed} of {} steps passed in {} minutes, the tests' kernel rebuilt after them.\n",
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
        let stages = [
            stage("build the pristine kernel", Ok(())),
            stage(
                "build with 0001-x.patch applied",
                Err(anyhow::anyhow!("no")),
            ),
        ];
        let text = report(&stages, Duration::from_secs(61));
        assert!(text.contains("| build the pristine kernel | passed | 42 |\n"));
        assert!(text.contains("| build with 0001-x.patch applied | FAILED | 42 |\n"));
        assert!(text.contains("1 of 2 steps passed in 2 minutes"));
    }
}
