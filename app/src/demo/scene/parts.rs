//! Long steps in a window: a step in parts over frames runs as many parts a frame as the showing
//! of the frame allows ([`crate::demo::pace::PartBudget`]), so that a software renderer's draw
//! of every body is paid once per several parts rather than once per part; the overlay's step
//! time is then that of a whole step. And the warning before a run whose first step is long.

use std::time::Instant;

use anyhow::{anyhow, Context as _};

use super::Scene;
use crate::backend::{PositionVbos, SimTimings};
use crate::gfx::gl::Gl;

/// A first step estimated longer than this (s) is announced before the run (stderr and the
/// overlay's notice): nothing moves until it is done.
pub const FIRST_STEP_WARN_S: f64 = 2.0;

/// The timings of two `simulate` calls of one frame as one: times added, the progress and the
/// stop of the later call.
fn merged(a: SimTimings, b: SimTimings) -> SimTimings {
    let add = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    };
    SimTimings {
        host_ms: a.host_ms + b.host_ms,
        map_ms: add(a.map_ms, b.map_ms),
        kernel_ms: add(a.kernel_ms, b.kernel_ms),
        unmap_ms: add(a.unmap_ms, b.unmap_ms),
        upload_ms: add(a.upload_ms, b.upload_ms),
        gather_ms: b.gather_ms.or(a.gather_ms),
        stopped_after: b.stopped_after,
        parts: b.parts,
        stream_start: a.stream_start.or(b.stream_start),
        clock_residual_us: b.clock_residual_us.or(a.clock_residual_us),
    }
}

/// The line that announces a first step of `secs` estimated seconds over `n` bodies at the rate
/// of `what`, where it is over [`FIRST_STEP_WARN_S`]; `windowed`: what the window shows meanwhile.
pub fn long_first_step_warning(n: usize, secs: f64, what: &str, windowed: bool) -> Option<String> {
    if secs.is_nan() || secs <= FIRST_STEP_WARN_S {
        return None;
    }
    let meanwhile = if windowed {
        "; the window stays live meanwhile and shows the positions of before each step until it ends (\"step in progress\")"
    } else {
        ""
    };
    Some(format!(
        "one step of N = {n} bodies is estimated at about {} (the nominal rate of {what}): the bodies move only after it{meanwhile}",
        crate::demo::human_seconds(secs)
    ))
}

impl Scene {
    /// Whether this scene runs long steps in parts over frames ([`crate::backend::LongSteps::set_in_parts`]): windowed
    /// runs do, so that closing the window is answered within a frame; headless runs (and the
    /// bench, which does not use the scene) run whole steps, so `--frames N` there is N frames of
    /// whole steps.
    pub fn steps_in_parts(&self) -> bool {
        !self.args.headless
    }

    /// Leapfrog steps completed so far (outside step mode).
    pub fn steps_done(&self) -> u64 {
        self.sim.steps_total
    }

    /// The step in parts over frames that the last frame left in progress: parts done, of all.
    pub fn step_in_progress(&mut self) -> Option<crate::backend::StepProgress> {
        self.sim.backend.as_mut().and_then(|b| b.sides().long_steps()?.step_in_progress())
    }

    /// `simulate` for this frame: in a window, a step in parts over frames runs up to the part
    /// budget's parts ([`crate::demo::pace::PartBudget::parts`]) before the frame is shown, going
    /// on into the next step where one ends within them (a frame of parts is paced by its time,
    /// not by the step count, which is less than one such step a frame anyway); elsewhere one
    /// call. `stopped_after` then holds the whole steps done where they differ from `steps`.
    ///
    /// # Errors
    /// The backend's failure, with its label.
    pub(super) fn simulate_parts(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        let start = Instant::now();
        let budget = &mut self.sim.pace.parts;
        budget.frame_started(start);
        let most = budget.parts();
        let backend = self.sim.backend.as_deref_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
        if backend.sides().long_steps().and_then(|l| l.step_in_progress()).is_none() {
            budget.step_dropped();
        }
        let (mut parts, mut parts_ms, mut done) = (0, 0.0, 0);
        let mut total: Option<SimTimings> = None;
        loop {
            // A call that runs a part completes at most that step, whatever the count asked.
            let t = backend.simulate(gl, vbos, steps).with_context(|| format!("simulate ({})", backend.describe().label))?;
            done += t.stopped_after.unwrap_or(steps);
            if let Some(p) = t.parts {
                parts += 1;
                parts_ms += t.host_ms;
                budget.part_ran(t.kernel_ms.unwrap_or(t.host_ms), !p.in_progress());
            }
            let mut sum = total.map_or(t, |a| merged(a, t));
            sum.stopped_after = (done != steps).then_some(done);
            total = Some(sum);
            // Only parts go on, and not past the budget or an interrupt.
            if t.parts.is_none() || parts >= most || crate::stop::stopped() {
                break;
            }
        }
        budget.frame_ran(start, parts, parts_ms);
        total.context("no simulate call")
    }

    /// The timings the overlay shows for a frame: a frame that worked on a step in parts over
    /// frames shows as the step's time the compute of all the last whole step's parts (before
    /// one is complete: none), never one part's.
    pub(super) fn shown_timings(&self, t: SimTimings) -> SimTimings {
        if t.parts.is_none() {
            return t;
        }
        SimTimings { kernel_ms: self.sim.pace.parts.step_ms(), ..t }
    }

    /// The backend's step estimate at its nominal `rate` (`terms` interactions a step, the rate
    /// of `what`): refused over [`crate::demo::SLOW_STEP_S`] without `--allow-slow`
    /// ([`crate::demo::check_step_rate`]), announced over [`FIRST_STEP_WARN_S`] on stderr and in
    /// the overlay's notice.
    ///
    /// # Errors
    /// The refusal.
    pub(super) fn check_step_estimate(&mut self, n: usize, terms: f64, rate: f64, what: &str) -> anyhow::Result<()> {
        crate::demo::check_step_rate(n, terms, rate, what, self.args.allow_slow)?;
        if let Some(line) = long_first_step_warning(n, terms / rate.max(1.0), what, !self.args.headless) {
            eprintln!("warning: {line}");
            self.hud.notice = Some(self.hud.notice.take().map_or_else(|| line.clone(), |old| format!("{old}\n{line}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StepProgress;

    /// Two parts of a frame: times add up, the later call's progress and stop stand.
    #[test]
    fn a_frames_parts_merge_into_one_timing() {
        let a = SimTimings {
            host_ms: 5.0,
            kernel_ms: Some(4.0),
            stopped_after: Some(0),
            parts: Some(StepProgress { done: 3, of: 9 }),
            ..SimTimings::default()
        };
        let b = SimTimings { host_ms: 6.0, kernel_ms: Some(4.5), upload_ms: Some(1.0), parts: Some(StepProgress { done: 4, of: 9 }), ..a };
        let m = merged(a, b);
        assert_eq!((m.host_ms, m.kernel_ms, m.upload_ms), (11.0, Some(8.5), Some(1.0)));
        assert_eq!(m.parts, Some(StepProgress { done: 4, of: 9 }));
    }

    /// A first step over a few seconds is announced, a short one not; the window's line says
    /// what it shows meanwhile.
    #[test]
    fn a_long_first_step_is_announced() {
        assert_eq!(long_first_step_warning(4096, 0.01, "the CPU backend on 2 threads", true), None);
        let w = long_first_step_warning(1 << 20, 8.7, "the CPU backend on 2 threads", true).expect("announced");
        assert!(w.contains("N = 1048576") && w.contains("about 9 s") && w.contains("window stays live"), "{w}");
        let h = long_first_step_warning(1 << 20, 8.7, "the CPU backend on 2 threads", false).expect("announced");
        assert!(!h.contains("window"), "{h}");
    }
}
