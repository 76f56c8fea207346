//! The demo's frame state ([`Scene`]) and the frame itself ([`Scene::frame`]), shared by the
//! windowed and the headless loop: apply requests → simulate → UI pass (no GL) → render the
//! bodies ([`super::frame::render_view`]) → paint egui. The caller presents or finishes.

use std::time::Instant;

use anyhow::anyhow;

use crate::backend::select::make_backend;
use crate::backend::SimBackend;
use crate::cli::{DemoArgs, StepsPerFrame};
use crate::gfx::camera::OrbitCamera;
use crate::gfx::gl::{CurrentContext, Gl};
use crate::gfx::renderer::{framing_camera, Renderer};
use crate::gfx::target::{OffscreenTarget, RenderTarget};
use crate::gfx::GlInfo;
use crate::ui::action::Action;
use crate::ui::overlay::{Controls, Overlay};
use sim::{Bodies, PhysParams};

mod held;
mod hud;
mod outputs;
mod pacing;
mod parts;
mod requests;
mod simulation;
mod telemetry;
mod view;
mod zoom;

pub use held::{mark_outputs_written, write_held_outputs};
use hud::Hud;
pub use outputs::Diverged;
use simulation::Simulation;
use telemetry::Telemetry;
use view::SceneView;
pub use zoom::auto_ui_zoom;
use zoom::ui_zoom;

/// Everything a frame needs besides the GL context and the window, held by the owners of the
/// frame's steps: the simulation (backend, actions, pacing, step mode, diagnostics), the view
/// (renderer, camera, offscreen target, step mode's snapshot), the HUD (egui, overlay, panels)
/// and telemetry (trace, timeline, CUPTI, stage times, reports).
///
/// Teardown order ([`Scene::destroy`], which `Drop` runs, enforces it):
/// 1. the backend — `release_gl` deletes the GL objects it owns (external memory), then dropping
///    it unregisters any CUDA graphics resources of the VBOs and frees its CUDA memory;
/// 2. GL objects — the renderer (VBOs, VAO, program, timer queries) and the offscreen FBO;
/// 3. egui's painter (`Painter::destroy`);
/// 4. the GL context and the window, which the owner of the scene drops after it.
pub struct Scene {
    sim: Simulation,
    view: SceneView,
    hud: Hud,
    telemetry: Telemetry,
    current: CurrentContext,
    args: DemoArgs,
    gl_info: GlInfo,
    frame: u64,
    last_frame_start: Option<Instant>,
    first_frame_start: Option<Instant>,
    last_frame_end: Option<Instant>,
    start: Instant,
    destroyed: bool,
}

/// Frame rate `--steps-per-frame auto` fills without vsync or `--target-fps` (frames/s).
pub const DEFAULT_TARGET_FPS: f64 = 60.0;

impl Scene {
    /// Make the renderer (VBOs from `bodies`), the egui painter and the backend, in the current
    /// context.
    ///
    /// # Errors
    /// Shader, GL allocation or backend failures.
    ///
    /// `current` proves the context current; the scene keeps it until it drops, so its owner
    /// drops the scene before the context.
    pub fn new(current: CurrentContext, gl_info: GlInfo, args: &DemoArgs, bodies: &Bodies, params: PhysParams) -> anyhow::Result<Self> {
        let gl = current.gl();
        let mut painter = egui_glow::Painter::new(current.shared(), "", None, false).map_err(|e| anyhow!("creating the egui painter: {e}"))?;
        let mut renderer = match Renderer::new(gl, &gl_info, bodies) {
            Ok(r) => r,
            Err(e) => {
                painter.destroy();
                return Err(e.context("creating the body renderer"));
            }
        };
        renderer.set_sprite_cap(args.max_sprite_px);
        let camera = framing_camera(&renderer);
        let egui_ctx = egui::Context::default();
        crate::ui::fonts::install_fonts(&egui_ctx);
        // The zoom of the first frame, set before it: egui lays out the pass that changes the
        // zoom on the previous pass's screen (none yet), so a headless run's only frame at
        // --ui-scale 1.5 was laid out on the wrong screen. (`frame` sets it again if the target
        // asks for another.)
        let first_zoom = ui_zoom(args, args.height, 1.0);
        egui_ctx.options_mut(|o| o.zoom_factor = first_zoom);
        let controls = start_controls(args, params);
        let mut scene = Self {
            sim: Simulation::new(args, bodies),
            view: SceneView { renderer, camera, offscreen: None },
            hud: Hud::new(painter, egui_ctx, Overlay::new(controls), first_zoom),
            telemetry: Telemetry::default(),
            current: current.clone(),
            args: args.clone(),
            gl_info,
            frame: 0,
            last_frame_start: None,
            first_frame_start: None,
            last_frame_end: None,
            start: Instant::now(),
            destroyed: false,
        };
        // With --trace the backend's setup (registration included) is traced too.
        scene.start_trace_file()?;
        // On error `scene` drops here, which tears down in order.
        scene.start_backend(gl, bodies, params)?;
        scene.hud.overlay.workflow.open_at_start = scene.args.workflow;
        if scene.args.step_mode {
            scene.set_step_mode(true);
        }
        Ok(scene)
    }

    /// Makes the backend (`make_backend`: CUDA or the CPU, with the notice of a fallback),
    /// refuses a first step longer than the run allows, and where `auto` fell back to the CPU
    /// starts again at the CPU's default N.
    fn start_backend(&mut self, gl: Gl<'_>, bodies: &Bodies, params: PhysParams) -> anyhow::Result<()> {
        let (mut backend, notice) = make_backend(&self.args.backend_config(), gl, &self.gl_info, self.view.renderer.vbos(), bodies, params)?;
        let info = backend.describe();
        tracing::info!(backend = %info.label, gl = %self.gl_info.summary(), "demo backend ready");
        let cpu = backend.sides().cuda().is_none();
        // The notice first: it says why the rate below is the CPU's.
        self.set_notice(notice);
        if self.args.trace.is_some() && cpu {
            tracing::warn!(
                "--trace: the CPU backend makes no CUDA driver calls, so the trace holds only the GL draws (a CUDA run's \
                 trace: docs/results/2026-12-02-h200/trace-map.jsonl)"
            );
        }
        // The backend's own rate decides now: the CPU's (`cpu`, or `auto` fell back), or the
        // GPU's, derived from its SM count and clock.
        let (rate, what) = (info.rate.per_s, info.rate.basis.to_string());
        let terms = sim::tree::step_terms(info.solver, bodies.len(), !cpu);
        self.check_step_estimate(bodies.len(), terms, rate, &what)?;
        self.sim.backend = Some(backend);
        let preset = sim::init::NAMES.contains(&self.args.init()) && self.args.init() != "figure-eight";
        let fell_back = cpu && self.args.bodies.is_none() && self.args.default_bodies.is_none();
        if fell_back {
            // `auto` fell back to the CPU: its default N is the one of scene keys and `r` too.
            self.args.default_bodies = Some(crate::cli::CPU_DEMO_BODIES);
            self.hud.overlay.controls.reset_n = crate::cli::CPU_DEMO_BODIES;
        }
        if fell_back && preset {
            // Started at the default N: start again at the CPU's default N (the preset with the
            // same seed), which keeps a window at 20 frames/s or more.
            let init = self.args.init().to_owned();
            self.reset(&init, crate::cli::CPU_DEMO_BODIES)?;
            let n = crate::cli::CPU_DEMO_BODIES;
            let note = format!("N = {n}: the CPU backend's default (--bodies sets N)");
            self.hud.notice = Some(self.hud.notice.take().map_or(note.clone(), |old| format!("{old}\n{note}")));
        }
        Ok(())
    }

    /// The overlay's notice about the backend (a fallback, `make_backend`), logged as a warning
    /// line by line where a line is new: a reset that falls back the same way again (the CPU
    /// backend's default N at the start, a reset from the overlay) does not repeat it in the log.
    fn set_notice(&mut self, notice: Option<String>) {
        for line in notice.iter().flat_map(|n| n.lines()) {
            if !self.hud.notice.as_deref().is_some_and(|old| old.lines().any(|l| l == line)) {
                tracing::warn!("{line}");
            }
        }
        self.hud.notice = notice;
    }

    /// The GL calls of the scene's context (current while the scene lives: `Scene::new`).
    fn gl(&self) -> Gl<'_> {
        self.current.gl()
    }

    fn backend(&mut self) -> anyhow::Result<&mut Box<dyn SimBackend>> {
        self.sim.backend.as_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))
    }

    /// Gives the headless run's FBO to the scene, which deletes it with its other GL objects.
    pub fn set_offscreen(&mut self, target: OffscreenTarget) {
        self.view.offscreen = Some(target);
    }

    /// The egui context (windowed runs feed it through egui-winit).
    pub fn egui_ctx(&self) -> &egui::Context {
        &self.hud.egui_ctx
    }

    /// The camera.
    pub fn camera_mut(&mut self) -> &mut OrbitCamera {
        &mut self.view.camera
    }

    /// Largest texture side egui may use.
    pub fn max_texture_side(&self) -> usize {
        self.hud.painter.max_texture_side()
    }

    /// One frame: apply the requests → step the simulation → UI pass → render into `target` →
    /// paint egui → end the frame. The caller presents (swap) or finishes. `pixels_per_point`
    /// scales sprite sizes; `wait_timer` reads the GL timer query of this frame at once
    /// (headless).
    ///
    /// Returns egui's platform output (cursor, clipboard) for the windowed integration.
    ///
    /// # Errors
    /// A backend failure (CUDA or GL), with the failing call named.
    pub fn frame(
        &mut self,
        raw_input: egui::RawInput,
        target: RenderTarget,
        pixels_per_point: f32,
        wait_timer: bool,
    ) -> anyhow::Result<egui::PlatformOutput> {
        let t0 = Instant::now();
        let host_frame_ms = self.begin_frame(t0);
        let current = self.current.clone();
        let gl = current.gl();
        let single = self.apply_actions()?;
        let stepped = self.step(gl, single, host_frame_ms)?;
        let ui = self.ui_pass(raw_input, &target, pixels_per_point)?;
        let scene_left = ui.as_ref().map_or(0.0, |u| u.scene_left);
        let advanced = stepped.done > 0 && !self.hud.overlay.workflow.step_mode;
        self.render(gl, &target, pixels_per_point, scene_left, advanced, wait_timer)?;
        let platform_output = self.paint(gl, ui, &target);
        self.end_frame(t0, host_frame_ms, &stepped);
        Ok(platform_output)
    }

    /// The frame's start: its host interval since the last one (ms, 0 for the first), and the
    /// API trace on while the Workflow panel is open or with `--trace`.
    fn begin_frame(&mut self, t0: Instant) -> f64 {
        let host_frame_ms = self.last_frame_start.map_or(0.0, |t| (t0 - t).as_secs_f64() * 1e3);
        self.last_frame_start = Some(t0);
        self.first_frame_start.get_or_insert(t0);
        self.sync_trace();
        self.sync_gl_track();
        if let Some(r) = &self.telemetry.recorder {
            r.begin_frame(self.frame);
        }
        host_frame_ms
    }

    /// The frame's end: the trace's frame closed, the step count and the pace of
    /// `--steps-per-frame auto` updated, the frame counted.
    fn end_frame(&mut self, t0: Instant, host_frame_ms: f64, s: &simulation::Stepped) {
        self.trace_end_frame();
        if !self.hud.overlay.workflow.step_mode {
            self.sim.steps_total += u64::from(s.done);
        }
        self.sim.last_frame_cut = s.timings.stopped_after.is_some() && s.timings.parts.is_none();
        self.pace_frame(t0, host_frame_ms, s.steps, &s.timings);
        self.frame += 1;
        self.last_frame_end = Some(Instant::now());
    }

    /// The overlay's zoom on a target `height_px` physical pixels high at `pixels_per_point`:
    /// `--ui-scale`, else [`auto_ui_zoom`]. A caller that makes egui's input itself (headless)
    /// gives the screen in points of this zoom (pixels / zoom).
    pub fn ui_zoom_for(&self, height_px: u32, pixels_per_point: f32) -> f32 {
        ui_zoom(&self.args, height_px, pixels_per_point)
    }

    /// The frame at which the run diverged (non-finite state found), if it did.
    pub fn diverged(&self) -> Option<u64> {
        self.sim.diverged
    }

    /// The stdout lines (diagnostics) made since the last call; the frame loop prints them.
    pub fn take_reports(&mut self) -> Vec<String> {
        std::mem::take(&mut self.telemetry.reports)
    }

    /// Tear down in order: backend → GL objects → egui painter. Runs once; `Drop` calls it.
    /// The GL context must still be current.
    pub fn destroy(&mut self) {
        if self.destroyed {
            return;
        }
        self.destroyed = true;
        self.drop_backend();
        // The backend's teardown (unregister) is in the trace; now flush it and stop tracing.
        self.stop_trace();
        self.view.renderer.destroy(self.current.gl());
        if let Some(t) = self.view.offscreen.take() {
            t.destroy(self.current.gl());
        }
        self.hud.painter.destroy();
    }

    /// Drop the backend, letting it first delete the GL objects it owns (`release_gl`; the
    /// context is current while the scene lives).
    fn drop_backend(&mut self) {
        if let Some(mut b) = self.sim.backend.take() {
            b.release_gl(self.current.gl());
        }
    }

    /// Queue an action as if the overlay had asked for it (keyboard controls).
    pub fn push_action(&mut self, a: Action) {
        self.sim.pending.push(a);
    }

    /// Pause or resume (space).
    pub fn toggle_pause(&mut self) {
        self.hud.overlay.controls.paused = !self.hud.overlay.controls.paused;
    }

    /// Hide or show the overlay (h); with `--no-overlay` it stays hidden.
    pub fn toggle_overlay(&mut self) {
        self.hud.overlay_hidden = !self.hud.overlay_hidden;
    }

    /// Turn the trails on or off (key `t`; the overlay has the same box).
    pub fn toggle_trails(&mut self) {
        self.hud.overlay.controls.trails = !self.hud.overlay.controls.trails;
    }

    /// The overlay's line on how the window shows frames (the windowed loop sets it).
    pub fn set_present(&mut self, line: Option<String>) {
        self.hud.present = line;
    }

    /// Number of bodies N of the current state.
    pub fn bodies(&self) -> usize {
        self.view.renderer.vbos().n
    }

    /// Pause the simulation (the following frames take no steps).
    pub fn pause(&mut self) {
        self.hud.overlay.controls.paused = true;
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod contract;
#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod tests;

/// The overlay's controls at the start, from the command line.
fn start_controls(args: &DemoArgs, params: PhysParams) -> Controls {
    Controls {
        params,
        steps_per_frame: match args.steps_per_frame() {
            StepsPerFrame::Fixed(n) => n.max(1),
            StepsPerFrame::Auto => 1,
        },
        auto_steps: args.steps_per_frame() == StepsPerFrame::Auto,
        sim_rate: super::pace::scene_rate(args.init()),
        rate_limited: false,
        trails: args.trails,
        view: args.view,
        paused: false,
        reset_init: args.init().to_owned(),
        reset_n: args.n_bodies().max(1),
        solver: args.solver.with_theta(args.theta),
        theta: args.theta,
    }
}
