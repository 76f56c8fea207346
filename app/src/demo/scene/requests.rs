//! What the user asked for between frames, applied at the start of the next: the overlay's
//! actions, a reset to another initial condition, a diagnostics sample, and the divergence check
//! on each state read back.

use anyhow::{anyhow, Context as _};

use super::outputs::EnergySamples;
use super::Scene;
use crate::backend::select::make_backend;
use crate::backend::Readout;
use crate::demo::pace::Pace;
use crate::gfx::renderer::framing_camera;
use crate::ui::action::Action;
use sim::init::initial_bodies;

impl Scene {
    /// Apply the overlay's requests of the last frame; returns true for a single step.
    pub(super) fn apply_actions(&mut self) -> anyhow::Result<bool> {
        let mut single = false;
        for action in std::mem::take(&mut self.sim.pending) {
            match action {
                Action::SetParams(p) => {
                    let cur = self.current.clone();
                    self.backend()?.set_params(cur.gl(), p);
                    // Another G or ε is another energy function: the change is measured anew.
                    self.sim.energy = None;
                }
                Action::SingleStep => single = true,
                Action::ApplySettings(s) => {
                    let cur = self.current.clone();
                    let gl = cur.gl();
                    let vbos = *self.view.renderer.vbos();
                    let params = self.hud.overlay.controls.params;
                    let backend = self.sim.backend.as_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
                    // Another storage, stream or table replaces the backend (select::apply_settings).
                    // A rebuilt backend keeps the overlay's solver, not the command line's.
                    let mut cfg = self.args.backend_config();
                    cfg.solver = self.hud.overlay.controls.solver;
                    match crate::backend::select::apply_settings(backend, &cfg, gl, &self.gl_info, &vbos, s, params) {
                        Ok(applied) => {
                            if let crate::backend::select::Applied::Replaced { notice } = applied {
                                self.set_notice(notice);
                            }
                            self.hud.panels = None;
                            self.hud.overlay.set_message(None)
                        }
                        Err(e) => {
                            tracing::warn!("settings not applied: {e:#}");
                            self.hud.overlay.set_message(Some(format!("settings not applied: {e:#}")));
                        }
                    }
                }
                Action::ComputeDiagnostics => self.compute_diagnostics()?,
                Action::SetStepMode(on) => self.set_step_mode(on),
                Action::NextStep => self.sim.step_next = true,
                Action::RunLab(name) => self.run_lab(&name),
                Action::SetSolver(s) => {
                    let backend = self.backend()?;
                    let r = backend.set_solver(s);
                    let kept = backend.describe().solver;
                    match r {
                        Ok(()) => self.hud.overlay.set_message(None),
                        Err(e) => {
                            // The row shows the solver in force again.
                            self.hud.overlay.controls.solver = kept;
                            tracing::warn!("solver not changed: {e:#}");
                            self.hud.overlay.set_message(Some(format!("solver not changed: {e:#}")));
                        }
                    }
                }
                Action::Reset { init, n } => self.reset(&init, n)?,
                Action::Restart => {
                    // The run's own scene and N (`--bodies`, else the backend's default).
                    let (init, n) = (self.args.init().to_owned(), self.args.n_bodies());
                    self.reset(&init, n)?
                }
            }
        }
        Ok(single)
    }

    /// Reset: drop the backend FIRST (it may hold CUDA registrations of the VBOs), then recreate
    /// the VBOs, then make a new backend.
    pub(super) fn reset(&mut self, init: &str, n: usize) -> anyhow::Result<()> {
        let params = self.hud.overlay.controls.params;
        // The same refusals as at the start: no impossible N from the overlay either, at the
        // rate of the backend in use.
        let rate = self.sim.backend.as_ref().map(|b| b.describe().rate);
        let gpu = self.sim.backend.as_mut().is_some_and(|b| b.sides().cuda().is_some());
        let terms = sim::tree::step_terms(self.hud.overlay.controls.solver, n, gpu);
        let preset = !std::path::Path::new(init).is_file();
        let checks = if n == 0 || n > crate::cuda::kernel_set::MAX_BODIES {
            Err(anyhow!("N must be from 1 to {}", crate::cuda::kernel_set::MAX_BODIES))
        } else if preset {
            let step = match &rate {
                Some(r) => crate::demo::check_step_rate(n, terms, r.per_s, &r.basis.to_string(), self.args.allow_slow),
                None => crate::demo::check_step_time(n, self.hud.overlay.controls.solver, true, self.args.allow_slow),
            };
            step.and_then(|()| crate::demo::check_host_memory_n(n))
        } else {
            Ok(())
        };
        if let Err(e) = checks {
            self.hud.overlay.set_message(Some(format!("reset refused: {e:#}")));
            return Ok(());
        }
        let bodies = match initial_bodies(init, n, self.args.sim.seed, params.g) {
            Ok(b) => b,
            Err(e) => {
                self.hud.overlay.set_message(Some(format!("reset failed: {e:#}")));
                return Ok(());
            }
        };
        self.drop_backend();
        self.view.renderer.recreate_vbos(self.current.gl(), &bodies).context("reset: recreating the position VBOs")?;
        let mut args = self.args.clone();
        args.sim.init = Some(init.to_owned());
        args.bodies = Some(n);
        let mut cfg = args.backend_config();
        cfg.solver = self.hud.overlay.controls.solver;
        let (backend, notice) =
            make_backend(&cfg, self.current.gl(), &self.gl_info, self.view.renderer.vbos(), &bodies, params).context("reset: making the backend")?;
        self.sim.backend = Some(backend);
        self.hud.panels = None;
        self.set_notice(notice);
        self.view.camera = framing_camera(&self.view.renderer);
        self.sim.time_span = 0.0;
        // Another N: the auto pace starts again from one step (its step times are of the old N).
        self.sim.pace = Pace::new(self.sim.pace.interval_ms());
        if self.hud.overlay.controls.auto_steps {
            self.hud.overlay.controls.steps_per_frame = 1;
        }
        self.set_scene_in_force(init, bodies.len());
        self.sim.last_finite = (self.frame, bodies.clone());
        self.sim.diverged = None;
        self.hud.overlay.clear();
        self.sim.energy = None;
        self.hud.overlay.set_message(None);
        tracing::info!(init, n = bodies.len(), "reset");
        Ok(())
    }

    pub(super) fn compute_diagnostics(&mut self) -> anyhow::Result<()> {
        let cur = self.current.clone();
        let gl = cur.gl();
        let vbos = *self.view.renderer.vbos();
        // One read: the diagnostics and, for the divergence check, the bodies they were taken of.
        let state = self.backend()?.state(gl, &vbos, Readout::WithDiagnostics).context("computing diagnostics")?;
        let d = state.diagnostics.context("computing diagnostics: the backend gave none")?;
        let frame = self.frame;
        self.check_finite(frame, state.bodies);
        self.telemetry.reports.push(format!(
            "diagnostics frame {frame}: E={:.9e} K={:.9e} U={:.9e} P=({:.3e}, {:.3e}, {:.3e}) L=({:.6e}, {:.6e}, {:.6e})",
            d.total,
            d.kinetic,
            d.potential,
            d.momentum[0],
            d.momentum[1],
            d.momentum[2],
            d.angular_momentum[0],
            d.angular_momentum[1],
            d.angular_momentum[2]
        ));
        self.hud.overlay.set_diagnostics(frame, d);
        self.sim.energy = Some(match self.sim.energy {
            Some(e) => EnergySamples { to: frame, e1: d.total, ..e },
            None => EnergySamples { from: frame, e0: d.total, ku0: d.kinetic.abs() + d.potential.abs(), to: frame, e1: d.total },
        });
        Ok(())
    }
}
