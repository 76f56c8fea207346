//! What a run leaves: the screenshot, the state written at its end (`--save-state`) and the
//! summary, with the frame count and whether the interrupt cut the last frame's steps.

use std::path::Path;

use anyhow::{anyhow, Context as _};

use crate::backend::{Readout, SimBackend};
use crate::demo::summary::{Route, SummaryFile};
use crate::demo::{EnergyChange, Summary};
use crate::gfx::screenshot;
use crate::gfx::target::RenderTarget;
use sim::tree::Solver;
use sim::Bodies;

use super::Scene;

/// The run diverged: positions or velocities became non-finite (NaN or ±∞).
#[derive(Debug, thiserror::Error)]
#[error(
    "the simulation diverged: non-finite positions or velocities found at frame {frame} (the last finite state is \
     frame {last_finite}{saved}); use a smaller --dt or a larger --softening"
)]
pub struct Diverged {
    /// Frame at which it was found.
    pub frame: u64,
    /// Frame of the last finite state.
    pub last_finite: u64,
    /// `", saved to PATH"` when `--save-state` wrote it.
    pub saved: String,
}

/// The two diagnostics samples the summary's energy change compares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct EnergySamples {
    /// Frame of the first sample.
    pub(super) from: u64,
    /// Total energy E there.
    pub(super) e0: f64,
    /// |K| + |U| there (the scale when E is near 0).
    pub(super) ku0: f64,
    /// Frame of the latest sample.
    pub(super) to: u64,
    /// Total energy E there.
    pub(super) e1: f64,
}

impl Scene {
    /// Save `target`'s current contents (bodies and overlay) as PNG.
    ///
    /// # Errors
    /// The file cannot be written (the message names the path and the cause).
    pub fn screenshot(&self, target: &RenderTarget, path: &Path) -> anyhow::Result<()> {
        if self.frame == 0 {
            // The target holds nothing drawn yet (a run stopped before its first frame): no file.
            anyhow::bail!("--screenshot {}: no frame was drawn before the run ended, so no screenshot was made", path.display());
        }
        let [w, h] = target.size();
        target.bind(self.current.gl());
        if matches!(target, RenderTarget::Default { .. }) {
            self.gl().read_buffer(glow::BACK);
        }
        let rgba = screenshot::read_rgba(self.current.gl(), w, h)?;
        screenshot::write_png(path, w, h, &rgba)?;
        tracing::info!(path = %path.display(), "screenshot saved");
        Ok(())
    }

    /// End of run: write `--save-state` and return the summary.
    ///
    /// # Errors
    /// Reading the state back or writing the file failed.
    pub fn finish(&mut self) -> anyhow::Result<Summary> {
        // Every output is attempted, whatever another one did; the error names each that failed.
        let mut failed: Vec<String> = Vec::new();
        self.abandon_step_in_progress(&mut failed);
        self.read_final_state(&mut failed);
        let mut saved = String::new();
        if let Some(path) = self.args.save_state.clone() {
            let (which, state) = (self.sim.last_finite.0, &self.sim.last_finite.1);
            // The header's time is 0 (the run does not track simulated time across dt changes).
            let written = sim::write_state_file(&path, state, 0.0, self.hud.overlay.controls.params.softening);
            match written.with_context(|| format!("writing --save-state {}", path.display())) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), n = state.len(), frame = which, "state saved");
                    saved = format!(", saved to {}", path.display());
                }
                Err(e) => failed.push(format!("{e:#}")),
            }
        }
        if let Some(r) = &self.telemetry.trace_file {
            if let Err(e) = r.finish().context("--trace") {
                failed.push(format!("{e:#}"));
            }
        }
        if let Some(path) = self.args.summary.clone() {
            if let Err(e) = self.write_summary(&path) {
                failed.push(format!("{e:#}"));
            }
        }
        if !failed.is_empty() {
            anyhow::bail!("{} output(s) could not be written: {}", failed.len(), failed.join("; "));
        }
        if let Some(at) = self.sim.diverged {
            return Err(Diverged { frame: at, last_finite: self.sim.last_finite.0, saved }.into());
        }
        Ok(self.summary())
    }

    /// A run that ends with a step in parts over frames in progress (window closed, Ctrl-C, Esc)
    /// keeps the state of before it, as an interrupted step does; a failure joins `failed`.
    fn abandon_step_in_progress(&mut self, failed: &mut Vec<String>) {
        if let Some(b) = self.sim.backend.as_deref_mut() {
            let unit = if b.sides().cuda().is_some() { "launches" } else { "parts" };
            let long_steps = b.sides().long_steps();
            if let Some((l, p)) = long_steps.and_then(|l| l.step_in_progress().map(|p| (l, p))) {
                match l.abandon_step() {
                    Ok(()) => eprintln!(
                        "the run ended during a long step ({} of {} {unit} done): it was abandoned, the state of before it is kept",
                        p.done, p.of
                    ),
                    Err(e) => failed.push(format!("abandoning the step in progress: {e:#}")),
                }
            }
        }
    }

    /// Reads the final state for `--save-state` (and the last divergence check); a failure
    /// joins `failed`.
    fn read_final_state(&mut self, failed: &mut Vec<String>) {
        let cur = self.current.clone();
        let gl = cur.gl();
        let vbos = *self.view.renderer.vbos();
        // A backend without long steps cannot say: one force evaluation may be needed.
        let unsynchronized = |b: &mut dyn SimBackend| b.sides().long_steps().is_none_or(|l| !l.synchronized());
        // The final state is read for --save-state; without it only where reading costs no force
        // evaluation (velocities already synchronised), for the last divergence check.
        let wanted = self.args.save_state.is_some();
        let stopping = self.sim.backend.as_deref_mut().filter(|_| wanted && crate::stop::stopped());
        if let Some(b) = stopping.and_then(|b| unsynchronized(&mut *b).then_some(b)) {
            // The state written has synchronised velocities: one more force evaluation, unless
            // they are already (no step finished since the start or the last synchronisation).
            let info = b.describe();
            let rate = info.rate.per_s;
            let n = info.n as f64;
            let secs = n * n / rate.max(1.0);
            if secs > 1.0 {
                eprintln!(
                    "stopping: the state written needs one more force evaluation (about {secs:.0} s at N = {n}); {} exits \
                     at once without writing it",
                    crate::stop::again_hint()
                );
            }
        }
        let end = match self.sim.backend.as_deref_mut() {
            Some(b) => {
                (wanted || !unsynchronized(&mut *b)).then(|| b.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies).context("reading the final state"))
            }
            None => Some(Err(anyhow!("no simulation backend (a reset failed)"))),
        };
        // A finite final state becomes the last finite one; a diverged run keeps the one before.
        match end {
            Some(Ok(b)) => self.check_finite(self.frame, b),
            Some(Err(e)) => failed.push(format!("{e:#}")),
            None => {}
        }
    }

    /// Writes `--summary` at `path`: the summary, each stage's times, the route, the provenance.
    ///
    /// # Errors
    /// The file cannot be written.
    fn write_summary(&mut self, path: &Path) -> anyhow::Result<()> {
        let name = |v: &dyn Fn() -> Option<clap::builder::PossibleValue>| v().map(|p| p.get_name().to_string());
        let s = self.summary();
        let cuda = self.sim.backend.as_deref_mut().is_some_and(|b| b.sides().cuda().is_some());
        let info = self.sim.backend.as_deref().map(SimBackend::describe);
        let solver = match info.as_ref().map(|i| i.solver) {
            Some(Solver::Tree { theta }) => format!("tree θ={theta}"),
            Some(Solver::Auto { .. }) => "auto".to_string(),
            Some(Solver::Direct) | None => "direct".to_string(),
        };
        let a = &self.args;
        let file = SummaryFile {
            provenance: SummaryFile::provenance(self.telemetry.stages.started(), if cuda { crate::provenance::device0() } else { None }),
            status: if self.sim.diverged.is_some() {
                "error: diverged".to_string()
            } else if crate::stop::stopped() {
                "interrupted".to_string()
            } else {
                "complete".to_string()
            },
            frames: s.frames,
            steps: s.steps,
            steps_per_s: s.steps_per_s,
            mean_frame_ms: s.mean_frame_ms,
            bodies: info.map_or(0, |i| i.n),
            backend: s.label,
            route: Route {
                headless: a.headless,
                present: if a.headless { None } else { name(&|| clap::ValueEnum::to_possible_value(&a.present)) },
                interop: if cuda { name(&|| clap::ValueEnum::to_possible_value(&a.interop)) } else { None },
                precision: name(&|| clap::ValueEnum::to_possible_value(&a.precision)).unwrap_or_default(),
                solver,
            },
            stages_ms: self.telemetry.stages.stats(),
            energy_change: s.energy.map(|e| e.relative),
        };
        file.write(path)
    }

    /// Frames, mean frame time and the backend, as the run ends.
    pub fn summary(&self) -> Summary {
        let wall = match (self.first_frame_start, self.last_frame_end) {
            (Some(a), Some(b)) => (b - a).as_secs_f64() * 1e3,
            _ => 0.0,
        };
        let label = self.sim.backend.as_ref().map_or_else(|| "none".to_owned(), |b| b.describe().label);
        let steps_per_s = if wall > 0.0 { self.sim.steps_total as f64 / (wall * 1e-3) } else { 0.0 };
        // Relative to |E| at the first sample; where E is near 0 (|E| under a thousandth of
        // |K| + |U|: an unbound or marginal state) to that thousandth instead, so that a tiny E
        // does not make a small change look huge.
        let energy = self.sim.energy.filter(|e| e.to > e.from).map(|e| EnergyChange {
            from: e.from,
            to: e.to,
            relative: (e.e1 - e.e0) / e.e0.abs().max(1e-3 * e.ku0),
            dt: self.hud.overlay.controls.params.dt,
        });
        Summary { frames: self.frame, mean_frame_ms: wall / self.frame.max(1) as f64, steps: self.sim.steps_total, steps_per_s, label, energy }
    }

    /// Checks the state read at `frame` for non-finite values: keeps it as the last finite
    /// state, or marks the run diverged (once: banner, warning, the simulation paused).
    pub(super) fn check_finite(&mut self, frame: u64, bodies: Bodies) {
        if bodies.is_finite() {
            self.sim.last_finite = (frame, bodies);
            return;
        }
        if self.sim.diverged.is_none() {
            self.sim.diverged = Some(frame);
            let msg = format!(
                "diverged: non-finite positions or velocities at frame {frame} (last finite state: frame {}); the \
                 simulation is paused. Use a smaller dt or a larger softening ε",
                self.sim.last_finite.0
            );
            tracing::warn!("{msg}");
            self.hud.overlay.set_message(Some(msg));
            self.hud.overlay.controls.paused = true;
        }
    }

    /// Frames drawn so far.
    pub fn frames(&self) -> u64 {
        self.frame
    }

    /// Seconds since the scene was made (egui's clock).
    pub fn time(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The interrupt stopped a step of the last frame, which then ran fewer steps than asked (a
    /// step in parts over frames is not stopped: it continues in the next).
    pub fn last_frame_cut(&self) -> bool {
        self.sim.last_frame_cut
    }
}
