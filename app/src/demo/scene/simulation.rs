//! The simulation, the frame's first owner: the backend, the actions queued for the next frame,
//! the pace of `--steps-per-frame auto`, step mode (one step of the interop workflow a frame),
//! the diagnostics and the state kept for the run's end; and the frame's step itself.

use std::time::Instant;

use anyhow::{anyhow, Context as _};

use super::outputs::EnergySamples;
use super::Scene;
use crate::backend::step::WorkflowStep;
use crate::backend::{PositionVbos, SimBackend, SimTimings};
use crate::cli::DemoArgs;
use crate::demo::pace::Pace;
use crate::gfx::gl::Gl;
use crate::ui::action::{Action, FrameStats};
use sim::Bodies;

/// The simulation's state between frames.
pub(super) struct Simulation {
    /// The backend; `None` only after a reset failed.
    pub(super) backend: Option<Box<dyn SimBackend>>,
    /// Actions from the overlay and the keys, applied at the start of the next frame.
    pub(super) pending: Vec<Action>,
    /// The step-count controller of `--steps-per-frame auto` (used while the overlay's auto box is
    /// ticked).
    pub(super) pace: Pace,
    /// Leapfrog steps simulated so far (outside step mode).
    pub(super) steps_total: u64,
    /// The interrupt stopped a step of the last frame: it ran fewer steps than asked.
    pub(super) last_frame_cut: bool,
    /// Simulation time between the two VBOs (dt · steps of the last simulate that stepped).
    pub(super) time_span: f32,
    /// The step-mode step taken this frame (the timeline grows only then; a map starts it again).
    pub(super) stepped: Option<WorkflowStep>,
    /// "next step" was asked for (step mode).
    pub(super) step_next: bool,
    /// A `--diagnostics-interval` sample is due; taken at the first frame that ends with no
    /// step in progress.
    pub(super) diagnostics_due: bool,
    /// The first diagnostics sample since the start, the last reset or the last change of
    /// parameters (frame, E, |K| + |U|), and the latest (frame, E), for the summary's relative
    /// energy change.
    pub(super) energy: Option<EnergySamples>,
    /// The newest state known to be finite and its frame: the initial state, then each
    /// diagnostics sample that was finite. `--save-state` writes it when the run diverged.
    pub(super) last_finite: (u64, Bodies),
    /// The frame at which non-finite positions or velocities were found (the run diverged).
    pub(super) diverged: Option<u64>,
    /// The scene in force: its `--init` (a preset's name or a state file's path), after the
    /// start, a reset or a scene key.
    pub(super) scene_init: String,
}

impl Simulation {
    /// The state before the backend is made, for `bodies` of `args`.
    pub(super) fn new(args: &DemoArgs, bodies: &Bodies) -> Simulation {
        Simulation {
            backend: None,
            pending: Vec::new(),
            pace: Pace::new(1e3 / args.target_fps.unwrap_or(super::DEFAULT_TARGET_FPS)),
            steps_total: 0,
            last_frame_cut: false,
            time_span: 0.0,
            stepped: None,
            step_next: false,
            diagnostics_due: false,
            energy: None,
            last_finite: (0, bodies.clone()),
            diverged: None,
            scene_init: args.init().to_owned(),
        }
    }
}

/// What the frame's step did: the steps asked for, those done, and their timings.
pub(super) struct Stepped {
    /// Leapfrog steps asked for this frame (0 when paused).
    pub(super) steps: u32,
    /// Whole steps done (fewer than asked when stopped, or with a step in parts over frames).
    pub(super) done: u32,
    /// The backend's timings of the frame's simulate.
    pub(super) timings: SimTimings,
}

impl Scene {
    /// The frame's step: simulate (or in step mode, the next step of the workflow), put it on
    /// the trace, take a diagnostics sample when one is due, and record the frame's stats for
    /// the overlay and the summary. No GL drawing. `single`: one step was asked for while paused.
    pub(super) fn step(&mut self, gl: Gl<'_>, single: bool, host_frame_ms: f64) -> anyhow::Result<Stepped> {
        let c = &self.hud.overlay.controls;
        let steps = if !c.paused || single { c.steps_per_frame } else { 0 };
        let dt = c.params.dt;
        let vbos = *self.view.renderer.vbos();
        // A long step stops between its launches (or CPU tasks) on Ctrl-C/SIGTERM, and in a
        // window it runs in parts over frames (one launch each) so that the event loop, and with it
        // a close request, runs between them. Set every frame: resets and settings changes make
        // new backends.
        let in_parts = self.steps_in_parts();
        if let Some(l) = self.sim.backend.as_deref_mut().and_then(|b| b.sides().long_steps()) {
            l.set_interrupt(crate::stop::stopped_in_step);
            l.set_in_parts(in_parts);
        }
        let t_sim = Instant::now();
        let mut timings = self.simulate_or_step(gl, &vbos, steps)?;
        if timings.parts.is_none() {
            // Paused with a step in parts over frames still in progress: the frame ran no part, but
            // the step is pending (the banner stays, a diagnostics sample keeps waiting).
            timings.parts = self.step_in_progress();
        }
        self.trace_simulate(t_sim, &timings);
        let done = timings.stopped_after.unwrap_or(steps);
        if timings.parts.is_some() {
            // Steps in parts are one at a time: the other buffer holds positions one step from the
            // shown ones (before them, or after them where the step in progress wrote).
            self.sim.time_span = dt;
        } else if done > 0 {
            self.sim.time_span = dt * done as f32;
        }
        self.sample_diagnostics(timings.parts.is_some_and(|p| p.in_progress()))?;
        self.trace_counters(&timings, steps, host_frame_ms);
        self.record_stats(host_frame_ms, steps, dt, timings)?;
        Ok(Stepped { steps, done, timings })
    }

    /// Takes the `--diagnostics-interval` sample when it is due, between steps: a sample due
    /// while a step is in progress waits for its end (reading the state would finish the step at
    /// once and hold the window).
    fn sample_diagnostics(&mut self, in_progress: bool) -> anyhow::Result<()> {
        let k = self.args.diagnostics_interval;
        if k > 0 && (self.frame + 1).is_multiple_of(k) {
            self.sim.diagnostics_due = true;
        }
        if self.sim.diagnostics_due && !in_progress {
            self.sim.diagnostics_due = false;
            self.compute_diagnostics()?;
        }
        Ok(())
    }

    /// The frame's stats: to the overlay's rows and to the summary's stage times.
    fn record_stats(&mut self, host_frame_ms: f64, steps: u32, dt: f32, timings: SimTimings) -> anyhow::Result<()> {
        let info = self.backend()?.describe();
        let (n, tree) = (info.n, matches!(info.solver, sim::tree::Solver::Tree { .. }));
        let (draw, density_ms) = (self.view.renderer.draw_time(), self.density_ms());
        self.hud.overlay.record(&FrameStats {
            frame: self.frame,
            host_frame_ms,
            sim: self.shown_timings(timings),
            draw_ms: draw.ms,
            draw_clock: draw.clock,
            density_ms,
            n,
            steps,
            dt,
            tree,
        });
        let frame_ms = (self.frame > 0).then_some(host_frame_ms);
        self.telemetry.stages.push(&crate::demo::summary::StageSample { frame: frame_ms, sim: timings, draw: draw.ms, density: density_ms });
        Ok(())
    }

    /// Turns the backend's step mode on or off; the overlay shows why it cannot.
    pub(super) fn set_step_mode(&mut self, on: bool) {
        let r = match self.sim.backend.as_mut().map(|b| b.sides().cuda()) {
            Some(Some(c)) => c.set_step_mode(on),
            Some(None) => Err(anyhow!("step mode needs CUDA: {}", crate::backend::STEP_MODE_NEEDS_CUDA)),
            None => Err(anyhow!("no simulation backend")),
        };
        match r {
            Ok(()) => self.hud.overlay.workflow.step_mode = on,
            Err(e) => {
                // The backends' reasons mostly name step mode already.
                let e = format!("{e:#}");
                let msg = if e.starts_with("step mode") { e } else { format!("step mode: {e}") };
                tracing::warn!("{msg}");
                self.hud.overlay.workflow.step_mode = false;
                self.hud.overlay.set_message(Some(msg));
            }
        }
    }

    /// `simulate`, or in step mode the next step of the frame when one was asked for (headless
    /// `--step-mode` runs take one step every frame).
    pub(super) fn simulate_or_step(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        let per_frame = self.hud.overlay.controls.steps_per_frame.max(1);
        let auto = self.args.headless && self.args.step_mode;
        let next = std::mem::take(&mut self.sim.step_next) || auto;
        self.sim.stepped = None;
        let step_view = |b: &mut dyn SimBackend| b.sides().cuda().and_then(|c| c.step_view());
        if self.hud.overlay.workflow.step_mode && step_view(self.backend()?.as_mut()).is_none() {
            // The backend was re-made (new settings): step mode again, if it still can.
            self.set_step_mode(true);
        }
        if step_view(self.backend()?.as_mut()).is_none() {
            return self.simulate_parts(gl, vbos, steps);
        }
        let backend = self.backend()?;
        let mut t = SimTimings::default();
        if next {
            let want = step_view(backend.as_mut()).map(|v| v.next);
            if want == Some(WorkflowStep::Map) {
                // GL's last look at the buffers before CUDA takes them: keep a copy to show.
                let front = backend.shown().front;
                if let Err(e) = self.view.renderer.take_snapshot(gl, front) {
                    tracing::warn!("step mode snapshot: {e:#}");
                }
            }
            let cuda = self.backend()?.sides().cuda().context("step mode without a CUDA backend")?;
            let t0 = Instant::now();
            let r = cuda.next_step(gl, vbos, per_frame);
            self.sim.stepped = want;
            t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
            match r {
                Ok(step) => tracing::debug!(?step, frame = self.frame, "step mode"),
                Err(e) if auto => return Err(e.context("step mode")),
                Err(e) => self.hud.overlay.set_message(Some(format!("step failed: {e:#}"))),
            }
        }
        Ok(t)
    }

    /// The buffer GL may draw now: the backend's front, or in step mode the one the state
    /// machine allows (`None` while the buffers are mapped).
    pub(super) fn shown_front(&mut self) -> anyhow::Result<Option<usize>> {
        let b = self.backend()?;
        Ok(match b.sides().cuda().and_then(|c| c.step_view()) {
            Some(v) => v.display_front,
            None => Some(b.shown().front),
        })
    }

    /// Runs a mistake-lab case against the live contexts, on scratch resources.
    pub(super) fn run_lab(&mut self, name: &str) {
        let ctx = self.sim.backend.as_mut().and_then(|b| b.sides().cuda()?.cuda_context());
        let o = crate::teach::lab::run_live(name, self.current.gl(), ctx.as_ref());
        tracing::info!(case = %o.case, got = %o.got_summary(), ok = o.ok, "mistake lab");
        self.hud.overlay.workflow.lab.push(o);
    }
}
