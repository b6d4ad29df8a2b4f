//! Pausing a running VM again and again, and the account of it.
//!
//! A [`PausePlan`] says how many pauses, how long each and how long the
//! VM runs between them. [`pause_repeatedly`] carries it out on anything
//! that can stop and continue a VM ([`Pausable`]; QMP's `Monitor` on the
//! VMs), and notes in a [`PauseLog`] how long each pause really lasted:
//! from QEMU's answer that the VM stopped to the moment it was told to
//! run again, a span during which the VM certainly stood still.
//! [`ManagerVerdict`] reads the manager's log of the same time.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{cluster, interrupt, ui};

pub trait Pausable {
    /// Returns once the VM stands still.
    fn stop(&mut self) -> Result<()>;
    fn cont(&mut self) -> Result<()>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PausePlan {
    pub pauses: u32,
    /// At least, each.
    pub length: Duration,
    /// The VM runs between two pauses.
    pub gap: Duration,
}

impl PausePlan {
    /// The least time the whole plan takes.
    pub fn span(&self) -> Duration {
        self.length * self.pauses + self.gap * self.pauses.saturating_sub(1)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseLog {
    /// Each pause's length: from the VM standing still to `cont`.
    pub pauses: Vec<Duration>,
}

impl PauseLog {
    /// Every pause of `plan` made, each at least as long as it says.
    pub fn verdict(&self, plan: &PausePlan) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.pauses.len() != plan.pauses as usize {
            problems.push(format!(
                "made {} of {} pauses",
                self.pauses.len(),
                plan.pauses
            ));
        }
        let short: Vec<String> = self
            .pauses
            .iter()
            .enumerate()
            .filter(|(_, &length)| length < plan.length)
            .map(|(i, length)| format!("pause {} lasted {} ms", i + 1, length.as_millis()))
            .collect();
        if !short.is_empty() {
            problems.push(format!(
                "shorter than {} ms: {}",
                plan.length.as_millis(),
                short.join(", ")
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// The pauses in a few words: `10 pauses, 2500 to 2534 ms each`.
    pub fn summary(&self) -> String {
        let (Some(shortest), Some(longest)) = (self.pauses.iter().min(), self.pauses.iter().max())
        else {
            return "no pause".to_string();
        };
        format!(
            "{} pauses, {} to {} ms each",
            self.pauses.len(),
            shortest.as_millis(),
            longest.as_millis()
        )
    }
}

/// A VM that was stopped is always told to run again, also when Ctrl-C
/// ends the plan early.
pub fn pause_repeatedly(vm: &mut dyn Pausable, plan: &PausePlan, log: &mut PauseLog) -> Result<()> {
    for made in 0..plan.pauses {
        if made > 0 {
            interrupt::sleep_until(Instant::now(), plan.gap)?;
        }
        vm.stop()
            .with_context(|| format!("pause {} of {}", made + 1, plan.pauses))?;
        let stopped = Instant::now();
        let waited = interrupt::sleep_until(stopped, plan.length);
        let length = stopped.elapsed();
        vm.cont().with_context(|| {
            format!(
                "continuing after pause {} of {} (the VM may stay stopped)",
                made + 1,
                plan.pauses
            )
        })?;
        log.pauses.push(length);
        waited?;
    }
    Ok(())
}

/// What the manager logged during the pauses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagerVerdict {
    pub deaths: Vec<String>,
    /// Silences longer than half its dead-after.
    pub late: usize,
    /// Which a death would follow.
    pub suspicions: usize,
}

impl ManagerVerdict {
    pub fn from_lines(lines: &[String]) -> Self {
        let mut verdict = ManagerVerdict::default();
        for line in lines {
            if cluster::is_death(line) {
                verdict.deaths.push(line.trim().to_string());
            } else if cluster::is_late_heartbeat(line) {
                verdict.late += 1;
            } else if cluster::is_suspicion(line) {
                verdict.suspicions += 1;
            }
        }
        verdict
    }

    pub fn check(&self) -> Result<()> {
        if !self.deaths.is_empty() {
            bail!(
                "the cluster manager declared {} node(s) dead while a node was only paused:\n{}",
                self.deaths.len(),
                self.deaths.join("\n")
            );
        }
        Ok(())
    }
}

pub fn describe(plan: &PausePlan, log: &PauseLog) -> String {
    format!(
        "{} (planned {} of {} ms, {} ms apart; {} in all)",
        log.summary(),
        plan.pauses,
        plan.length.as_millis(),
        plan.gap.as_millis(),
        ui::duration(plan.span())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VM that notes when it was stopped and continued, and fails the
    /// `fail_stop`-th stop or the `fail_cont`-th cont (from 1).
    #[derive(Default)]
    struct FakeVm {
        events: Vec<(&'static str, Instant)>,
        fail_stop: Option<usize>,
        fail_cont: Option<usize>,
    }

    impl FakeVm {
        fn count(&self, what: &str) -> usize {
            self.events.iter().filter(|(e, _)| *e == what).count()
        }

        /// Notes `what`, unless it is the `fail_at`-th, which it refuses.
        fn act(&mut self, what: &'static str, fail_at: Option<usize>) -> Result<()> {
            if fail_at == Some(self.count(what) + 1) {
                bail!("{what} refused");
            }
            self.events.push((what, Instant::now()));
            Ok(())
        }
    }

    impl Pausable for FakeVm {
        fn stop(&mut self) -> Result<()> {
            self.act("stop", self.fail_stop)
        }

        fn cont(&mut self) -> Result<()> {
            self.act("cont", self.fail_cont)
        }
    }

    const PLAN: PausePlan = PausePlan {
        pauses: 3,
        length: Duration::from_millis(40),
        gap: Duration::from_millis(30),
    };

    type Run = (FakeVm, PauseLog, Result<(), String>);

    /// [`PLAN`] carried out on a VM failing the `fail_stop`-th stop or the
    /// `fail_cont`-th cont: the VM, the log and the error as text.
    fn run(fail_stop: Option<usize>, fail_cont: Option<usize>) -> Run {
        let mut vm = FakeVm::default();
        (vm.fail_stop, vm.fail_cont) = (fail_stop, fail_cont);
        let mut log = PauseLog::default();
        let result = pause_repeatedly(&mut vm, &PLAN, &mut log).map_err(|e| format!("{e:#}"));
        (vm, log, result)
    }

    #[test]
    fn every_pause_is_made_in_turn_and_measured_at_least_as_long_as_planned() {
        let (vm, log, result) = run(None, None);
        assert_eq!(result, Ok(()));
        let order: Vec<&str> = vm.events.iter().map(|(e, _)| *e).collect();
        assert_eq!(order, ["stop", "cont", "stop", "cont", "stop", "cont"]);
        assert_eq!(log.pauses.len(), 3);
        for (pause, events) in log.pauses.iter().zip(vm.events.chunks(2)) {
            assert!(*pause >= PLAN.length, "{pause:?}");
            // What the log says the VM stood still for, it did.
            assert!(events[1].1 - events[0].1 >= *pause);
        }
        // Each gap lets the VM run for at least the planned time.
        for pair in vm.events[1..5].chunks(2) {
            assert!(pair[1].1 - pair[0].1 >= PLAN.gap);
        }
        assert_eq!(log.verdict(&PLAN), Ok(()));
        assert!(log.summary().starts_with("3 pauses, "), "{}", log.summary());
        assert_eq!(PLAN.span(), Duration::from_millis(3 * 40 + 2 * 30));
    }

    #[test]
    fn a_failed_stop_or_cont_ends_the_plan_and_the_verdict_wants_every_pause() {
        let (vm, log, result) = run(Some(2), None);
        assert_eq!(result, Err("pause 2 of 3: stop refused".to_string()));
        assert_eq!(log.pauses.len(), 1);
        // Nothing stopped stays stopped.
        assert_eq!(vm.count("stop"), vm.count("cont"));
        assert_eq!(log.verdict(&PLAN), Err("made 1 of 3 pauses".to_string()));

        let (_, log, result) = run(None, Some(1));
        let err = result.unwrap_err();
        assert!(err.starts_with("continuing after pause 1 of 3"), "{err}");
        assert!(log.pauses.is_empty());
        assert_eq!(log.summary(), "no pause");
        // The verdict wants every pause, and no more (a short one: suite's
        // pause test).
        let pauses = [40, 39, 52].map(Duration::from_millis).to_vec();
        assert_eq!(PauseLog { pauses }.summary(), "3 pauses, 39 to 52 ms each");
        let pauses = vec![Duration::from_millis(40); 4];
        let more = PauseLog { pauses };
        assert_eq!(more.verdict(&PLAN), Err("made 4 of 3 pauses".to_string()));
    }

    #[test]
    fn the_manager_verdict_fails_at_a_death_and_counts_late_heartbeats() {
        let lines = [
            "lite-cm: node 2 was silent for 1600 ms (late; dead after 3000 ms)",
            "lite-cm: node 2 was silent for 2700 ms (late; dead after 3000 ms)",
            "lite-cm: node 1 (incarnation 1) joined from 10.77.0.1:1, now 1 live, epoch 1",
            "lite-cm: node 2 (incarnation 1) suspected: silent for 3010 ms (limit 3000 ms); \
             asking its peers",
            "lite-cm: node 2 (incarnation 1) refuted the suspicion after 20 ms: heard from again",
        ];
        let lines = lines.map(String::from).to_vec();
        let quiet = ManagerVerdict::from_lines(&lines);
        let counts = (quiet.deaths.len(), quiet.late, quiet.suspicions);
        assert_eq!(counts, (0, 2, 1));
        assert!(quiet.check().is_ok());

        let mut lines = lines;
        lines.push("lite-cm: node 2 (incarnation 1) declared dead: silent for 3050 ms".into());
        let dead = ManagerVerdict::from_lines(&lines);
        let err = dead.check().unwrap_err().to_string();
        assert!(err.contains("declared 1 node(s) dead"), "{err}");
        assert!(err.ends_with("node 2 (incarnation 1) declared dead: silent for 3050 ms"));
    }
}
