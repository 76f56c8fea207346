//! The demo's frame state ([`Scene`]) and the frame itself ([`Scene::frame`]), shared by the
//! windowed and the headless loop: apply requests → simulate → UI pass (no GL) → render the
//! bodies ([`super::frame::render_view`]) → paint egui. The caller presents or finishes.

use std::time::Instant;

use anyhow::{anyhow, Context as _};

use super::frame::{render_view, trace_cpu_step, trace_stream, GlTrack};
use super::pace::Pace;
use crate::backend::select::make_backend;
use crate::backend::SimBackend;
use crate::cli::{DemoArgs, StepsPerFrame};
use crate::cuda::settings::View;
use crate::gfx::camera::OrbitCamera;
use crate::gfx::gl::{CurrentContext, Gl};
use crate::gfx::renderer::{framing_camera, DrawParams, Renderer};
use crate::gfx::target::{OffscreenTarget, RenderTarget};
use crate::gfx::GlInfo;
use crate::trace::{Recorder, Span};
use crate::ui::action::{Action, FrameStats};
use crate::ui::overlay::{BackendView, Controls, Overlay};
use crate::ui::workflow::WorkflowView;
use sim::{Bodies, PhysParams};

mod held;
mod outputs;
mod pacing;
mod parts;
mod requests;
mod teaching;
mod view;
mod zoom;

pub use held::{mark_outputs_written, write_held_outputs};
pub use outputs::Diverged;
use outputs::EnergySamples;
pub use zoom::auto_ui_zoom;
use zoom::ui_zoom;

/// Everything a frame needs besides the GL context and the window.
///
/// Teardown order (the field order, and [`Scene::destroy`], which `Drop` runs, enforces it):
/// 1. `backend` — `release_gl` deletes the GL objects it owns (external memory), then dropping
///    it unregisters any CUDA graphics resources of the VBOs and frees its CUDA memory;
/// 2. GL objects — `renderer` (VBOs, VAO, program, timer queries) and `offscreen` (FBO);
/// 3. `painter` — egui's GL objects (`Painter::destroy`);
/// 4. the GL context and the window, which the owner of the scene drops after it.
pub struct Scene {
    backend: Option<Box<dyn SimBackend>>,
    renderer: Renderer,
    /// The headless run's FBO, deleted with the scene's other GL objects.
    pub offscreen: Option<OffscreenTarget>,
    painter: egui_glow::Painter,
    current: CurrentContext,
    egui_ctx: egui::Context,
    overlay: Overlay,
    camera: OrbitCamera,
    args: DemoArgs,
    gl_info: GlInfo,
    notice: Option<String>,
    /// How the window shows frames ([`Scene::set_present`]; `None` headless).
    present: Option<String>,
    pending: Vec<Action>,
    frame: u64,
    last_frame_start: Option<Instant>,
    first_frame_start: Option<Instant>,
    last_frame_end: Option<Instant>,
    /// Simulation time between the two VBOs (dt · steps of the last simulate that stepped).
    time_span: f32,
    start: Instant,
    destroyed: bool,
    /// The API trace while it is on (Workflow panel open, or `--trace`); see [`crate::trace`].
    recorder: Option<Recorder>,
    /// The `--trace` recorder, kept for the whole run.
    trace_file: Option<Recorder>,
    /// The GL clock and timestamp queries while the recorder is on (the GL track).
    gl_track: Option<GlTrack>,
    /// CUPTI's activity records for `--timeline` (where CUPTI loads).
    cupti: Option<crate::trace::cupti::CuptiTrack>,
    /// What the overlay's timeline panel shows: the last frame's spans, or in step mode the
    /// spans of the workflow frame so far (one step more each time).
    timeline_spans: Vec<Span>,
    /// The step-mode step taken this frame (the timeline grows only then; a map starts it again).
    stepped: Option<crate::backend::step::FrameStep>,
    /// "next step" was asked for (step mode).
    step_next: bool,
    /// Address of the table the recorder was last installed on (0: none).
    traced_api: usize,
    /// The backend's device panel and entry-point rows, made once per backend (and again after
    /// its settings change), not every frame.
    panels: Option<Panels>,
    /// Lines for stdout (diagnostics) made during the last frame; the loop prints them after it.
    reports: Vec<String>,
    /// The step-count controller of `--steps-per-frame auto` (used while the overlay's auto box is
    /// ticked).
    pace: Pace,
    /// Leapfrog steps simulated so far (outside step mode).
    steps_total: u64,
    /// The interrupt stopped a step of the last frame: it ran fewer steps than asked.
    last_frame_cut: bool,
    /// The scene in force: its `--init` (a preset's name or a state file's path), after the
    /// start, a reset or a scene key.
    scene_init: String,
    /// The overlay zoom last set (`--ui-scale`, or [`auto_ui_zoom`] of the target's height).
    ui_zoom: Option<f32>,
    /// The newest state known to be finite and its frame: the initial state, then each
    /// diagnostics sample that was finite. `--save-state` writes it when the run diverged.
    last_finite: (u64, Bodies),
    /// The frame at which non-finite positions or velocities were found (the run diverged).
    diverged: Option<u64>,
    /// The overlay was hidden with `h`.
    overlay_hidden: bool,
    /// A `--diagnostics-interval` sample is due; taken at the first frame that ends with no
    /// step in progress.
    diagnostics_due: bool,
    /// The first diagnostics sample since the start, the last reset or the last change of
    /// parameters (frame, E, |K| + |U|), and the latest (frame, E), for the summary's relative
    /// energy change.
    energy: Option<EnergySamples>,
    /// Every frame's stage times, for `--summary`.
    stages: crate::demo::summary::StageLog,
}

/// Frame rate `--steps-per-frame auto` fills without vsync or `--target-fps` (frames/s).
pub const DEFAULT_TARGET_FPS: f64 = 60.0;

/// What the overlay's device and entry-point panels show: built once per backend.
#[derive(Debug, Default)]
struct Panels {
    device: Vec<(String, String)>,
    entry_points: Vec<[String; 5]>,
}

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
        let controls = Controls {
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
        };
        let mut scene = Self {
            backend: None,
            renderer,
            offscreen: None,
            painter,
            current: current.clone(),
            egui_ctx,
            overlay: Overlay::new(controls),
            camera,
            args: args.clone(),
            gl_info,
            notice: None,
            present: None,
            pending: Vec::new(),
            frame: 0,
            last_frame_start: None,
            first_frame_start: None,
            last_frame_end: None,
            time_span: 0.0,
            start: Instant::now(),
            destroyed: false,
            recorder: None,
            trace_file: None,
            gl_track: None,
            cupti: None,
            timeline_spans: Vec::new(),
            stepped: None,
            step_next: false,
            traced_api: 0,
            panels: None,
            reports: Vec::new(),
            steps_total: 0,
            last_frame_cut: false,
            scene_init: args.init().to_owned(),
            ui_zoom: Some(first_zoom),
            pace: Pace::new(1e3 / args.target_fps.unwrap_or(DEFAULT_TARGET_FPS)),
            last_finite: (0, bodies.clone()),
            diverged: None,
            overlay_hidden: false,
            diagnostics_due: false,
            energy: None,
            stages: crate::demo::summary::StageLog::default(),
        };
        // With --trace the backend's setup (registration included) is traced too.
        scene.start_trace_file()?;
        // On error `scene` drops here, which tears down in order.
        let (backend, notice) = make_backend(&scene.args.backend_config(), gl, &scene.gl_info, scene.renderer.vbos(), bodies, params)?;
        tracing::info!(backend = %backend.label(), gl = %scene.gl_info.summary(), "demo backend ready");
        let cpu = backend.cuda().is_none();
        // The notice first: it says why the rate below is the CPU's.
        scene.set_notice(notice);
        if scene.args.trace.is_some() && backend.cuda().is_none() {
            tracing::warn!(
                "--trace: the CPU backend makes no CUDA driver calls, so the trace holds only the GL draws (a CUDA run's \
                 trace: docs/results/2026-12-02-h200/trace-map.jsonl)"
            );
        }
        // The backend's own rate decides now: the CPU's (`cpu`, or `auto` fell back), or the
        // GPU's, derived from its SM count and clock.
        let (rate, what) = backend.nominal_rate();
        let terms = sim::tree::step_terms(backend.solver(), bodies.len(), backend.cuda().is_some());
        scene.check_step_estimate(bodies.len(), terms, rate, &what)?;
        scene.backend = Some(backend);
        let preset = sim::init::NAMES.contains(&scene.args.init()) && scene.args.init() != "figure-eight";
        let fell_back = cpu && scene.args.bodies.is_none() && scene.args.default_bodies.is_none();
        if fell_back {
            // `auto` fell back to the CPU: its default N is the one of scene keys and `r` too.
            scene.args.default_bodies = Some(crate::cli::CPU_DEMO_BODIES);
            scene.overlay.controls.reset_n = crate::cli::CPU_DEMO_BODIES;
        }
        if fell_back && preset {
            // Started at the default N: start again at the CPU's default N (the preset with the
            // same seed), which keeps a window at 20 frames/s or more.
            let init = scene.args.init().to_owned();
            scene.reset(&init, crate::cli::CPU_DEMO_BODIES)?;
            let n = crate::cli::CPU_DEMO_BODIES;
            let note = format!("N = {n}: the CPU backend's default (--bodies sets N)");
            scene.notice = Some(scene.notice.take().map_or(note.clone(), |old| format!("{old}\n{note}")));
        }
        scene.overlay.workflow.open_at_start = scene.args.workflow;
        if scene.args.step_mode {
            scene.set_step_mode(true);
        }
        Ok(scene)
    }

    /// The overlay's notice about the backend (a fallback, `make_backend`), logged as a warning
    /// line by line where a line is new: a reset that falls back the same way again (the CPU
    /// backend's default N at the start, a reset from the overlay) does not repeat it in the log.
    fn set_notice(&mut self, notice: Option<String>) {
        for line in notice.iter().flat_map(|n| n.lines()) {
            if !self.notice.as_deref().is_some_and(|old| old.lines().any(|l| l == line)) {
                tracing::warn!("{line}");
            }
        }
        self.notice = notice;
    }

    /// The GL calls of the scene's context (current while the scene lives: `Scene::new`).
    fn gl(&self) -> Gl<'_> {
        self.current.gl()
    }

    fn backend(&mut self) -> anyhow::Result<&mut Box<dyn SimBackend>> {
        self.backend.as_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))
    }

    /// The egui context (windowed runs feed it through egui-winit).
    pub fn egui_ctx(&self) -> &egui::Context {
        &self.egui_ctx
    }

    /// The camera.
    pub fn camera_mut(&mut self) -> &mut OrbitCamera {
        &mut self.camera
    }

    /// Largest texture side egui may use.
    pub fn max_texture_side(&self) -> usize {
        self.painter.max_texture_side()
    }

    /// One frame: apply requests → simulate → UI pass → render bodies into `target` → paint
    /// egui. The caller presents (swap) or finishes. `pixels_per_point` scales sprite sizes;
    /// `wait_timer` reads the GL timer query of this frame at once (headless).
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
        let host_frame_ms = self.last_frame_start.map_or(0.0, |t| (t0 - t).as_secs_f64() * 1e3);
        self.last_frame_start = Some(t0);
        self.first_frame_start.get_or_insert(t0);

        // The API trace: on while the Workflow panel is open or with --trace.
        self.sync_trace();
        self.sync_gl_track();
        if let Some(r) = &self.recorder {
            r.begin_frame(self.frame);
        }

        // 1. Requests from the last UI pass.
        let single = self.apply_actions()?;

        // 2. Simulate (no GL drawing).
        let c = &self.overlay.controls;
        let steps = if !c.paused || single { c.steps_per_frame } else { 0 };
        let dt = c.params.dt;
        let cur = self.current.clone();
        let gl = cur.gl();
        let vbos = *self.renderer.vbos();
        // A long step stops between its launches (or CPU tasks) on Ctrl-C/SIGTERM, and in a
        // window it is spread over frames (one launch each) so that the event loop, and with it
        // a close request, runs between them. Set every frame: resets and settings changes make
        // new backends.
        let spread = self.spreads_steps();
        if let Some(l) = self.backend.as_deref_mut().and_then(SimBackend::long_steps_mut) {
            l.set_interrupt(crate::stop::stopped_in_step);
            l.set_spread(spread);
        }
        // In step mode the frame takes (at most) one step of the workflow instead.
        let t_sim = Instant::now();
        let mut timings = self.simulate_or_step(gl, &vbos, steps)?;
        if timings.spread.is_none() {
            // Paused with a step spread over frames still in progress: the frame ran no part, but
            // the step is pending (the banner stays, a diagnostics sample keeps waiting).
            timings.spread = self.step_in_progress();
        }
        if let Some(r) = &self.recorder {
            let mode = self.backend.as_ref().and_then(|b| b.cuda()?.settings()).map(|s| s.interop);
            trace_stream(r, mode, &timings);
            if self.backend.as_ref().is_some_and(|b| b.cuda().is_none()) {
                // The CPU backend: its step and the upload on the host row (no stream).
                trace_cpu_step(r, t_sim, &timings);
            }
        }
        let n = self.backend()?.n();
        // Whole steps this frame (fewer than asked when stopped, or with a step spread over frames).
        let done = timings.stopped_after.unwrap_or(steps);
        let in_progress = timings.spread.is_some_and(|p| p.in_progress());
        if timings.spread.is_some() {
            // Spread steps are one at a time: the other buffer holds positions one step from the
            // shown ones (before them, or after them where the step in progress wrote).
            self.time_span = dt;
        } else if done > 0 {
            self.time_span = dt * done as f32;
        }
        let k = self.args.diagnostics_interval;
        if k > 0 && (self.frame + 1).is_multiple_of(k) {
            self.diagnostics_due = true;
        }
        if self.diagnostics_due && !in_progress {
            // Sampled between steps: a sample due while a step is in progress waits for its end
            // (reading the state would finish the step at once and hold the window).
            self.diagnostics_due = false;
            self.compute_diagnostics()?;
        }
        let tree = matches!(self.backend()?.solver(), sim::tree::Solver::Tree { .. });
        if let Some(r) = &self.recorder {
            if self.frame > 0 {
                r.counter("frame ms", host_frame_ms);
            }
            if let Some(t) = timings.kernel_ms.filter(|&t| t > 0.0 && steps > 0 && timings.spread.is_none()) {
                let name = if tree { "effective interactions/s" } else { "interactions/s" };
                r.counter(name, sim::interactions(n, steps) / (t * 1e-3));
            }
        }
        let (draw, density_ms) = (self.renderer.draw_time(), self.density_ms());
        self.overlay.record(&FrameStats {
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
        self.stages.push(&crate::demo::summary::StageSample { frame: frame_ms, sim: timings, draw: draw.ms, density: density_ms });

        // 3. UI pass (no GL).
        let mut full_output = None;
        let mut scene_left = 0.0;
        if !self.args.no_overlay && !self.overlay_hidden {
            let (trace_frame, calls) = self.recorder.as_ref().map(Recorder::last_frame).unwrap_or_default();
            let tracing = self.recorder.is_some();
            let backend = self.backend.as_deref().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
            let cuda = backend.cuda();
            let step_view = cuda.and_then(|c| c.step_view());
            let step_unavailable = cuda.map_or_else(|| Some(crate::backend::STEP_MODE_NEEDS_CUDA.to_string()), |c| c.step_mode_unavailable());
            let label = backend.label();
            let settings = cuda.and_then(|c| c.settings());
            if self.panels.is_none() {
                let (device, entry_points) = cuda.map(|c| (c.device_panel(), c.entry_points())).unwrap_or_default();
                self.panels = Some(Panels { device, entry_points });
            }
            let panels = self.panels.as_ref().context("panels")?;
            let view = BackendView {
                label: &label,
                notice: self.notice.as_deref(),
                settings,
                device_panel: &panels.device,
                entry_points: &panels.entry_points,
                gl_info: &self.gl_info,
                present: self.present.as_deref(),
                workflow: WorkflowView {
                    calls: &calls,
                    frame: trace_frame,
                    spans: &self.timeline_spans,
                    tracing,
                    step: step_view.as_ref(),
                    step_unavailable: step_unavailable.as_deref(),
                    cuda: cuda.is_some(),
                    mode: settings.map(|s| s.interop),
                },
            };
            // The overlay's zoom follows the window's size (a 4K window gets a readable overlay);
            // set only when that size asks for another value, so egui's own Ctrl +/- zoom stays.
            let zoom = self.ui_zoom_for(target.size()[1], pixels_per_point);
            let overlay = &mut self.overlay;
            let mut actions = Vec::new();
            if self.ui_zoom != Some(zoom) {
                self.ui_zoom = Some(zoom);
                self.egui_ctx.set_zoom_factor(zoom);
            }
            let out = self.egui_ctx.run_ui(raw_input, |ui| actions = overlay.ui(ui, &view));
            self.pending.extend(actions);
            scene_left = self.overlay.panel_width() * out.pixels_per_point;
            full_output = Some(out);
        }

        // 4. Render the bodies into the target.
        // In step mode GL must not touch mapped buffers: `None` skips the body draw.
        let shown = self.shown_front()?;
        let advanced = done > 0 && !self.overlay.workflow.step_mode;
        self.renderer.set_trails(self.overlay.controls.trails);
        let params =
            DrawParams { camera: &self.camera, front: shown.unwrap_or(0), time_span: self.time_span, pixels_per_point, scene_left, advanced };
        let t_draw = Instant::now();
        let backend = self.backend.as_deref_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
        match (shown, self.renderer.snapshot()) {
            // Step mode with the buffers mapped: the copy taken before the map, not the buffers.
            (None, Some((snap, front))) if self.overlay.controls.view == View::Points => {
                let p = DrawParams { front, ..params };
                self.renderer.draw_from(gl, &target, &p, wait_timer, Some(snap));
            }
            _ => {
                let view = (self.overlay.controls.view, self.args.density_path);
                if let Some(why) = render_view(gl, &mut self.renderer, backend, &target, &params, wait_timer, shown.is_some(), view) {
                    self.overlay.controls.view = View::Points;
                    self.set_notice(Some(why));
                }
            }
        }
        self.trace_draw(t_draw, shown);

        // 5. Paint egui into the same framebuffer.
        let mut platform_output = egui::PlatformOutput::default();
        if let Some(mut out) = full_output {
            target.bind(gl);
            let prims = self.egui_ctx.tessellate(std::mem::take(&mut out.shapes), out.pixels_per_point);
            self.painter.paint_and_update_textures(target.size(), out.pixels_per_point, &prims, &mut out.textures_delta);
            platform_output = out.platform_output;
        }
        if let Some(r) = &self.recorder {
            if let Some(c) = self.cupti.as_mut().filter(|_| self.frame % 256 == 255) {
                c.flush_into(r);
            }
            r.end_frame();
            self.collect_timeline(r.last_spans());
        }
        if !self.overlay.workflow.step_mode {
            self.steps_total += u64::from(timings.stopped_after.unwrap_or(steps));
        }
        self.last_frame_cut = timings.stopped_after.is_some() && timings.spread.is_none();
        self.pace_frame(t0, host_frame_ms, steps, &timings);
        self.frame += 1;
        self.last_frame_end = Some(Instant::now());
        Ok(platform_output)
    }

    /// The overlay's zoom on a target `height_px` physical pixels high at `pixels_per_point`:
    /// `--ui-scale`, else [`auto_ui_zoom`]. A caller that makes egui's input itself (headless)
    /// gives the screen in points of this zoom (pixels / zoom).
    pub fn ui_zoom_for(&self, height_px: u32, pixels_per_point: f32) -> f32 {
        ui_zoom(&self.args, height_px, pixels_per_point)
    }

    /// The frame at which the run diverged (non-finite state found), if it did.
    pub fn diverged(&self) -> Option<u64> {
        self.diverged
    }

    /// The stdout lines (diagnostics) made since the last call; the frame loop prints them.
    pub fn take_reports(&mut self) -> Vec<String> {
        std::mem::take(&mut self.reports)
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
        self.renderer.destroy(self.current.gl());
        if let Some(t) = self.offscreen.take() {
            t.destroy(self.current.gl());
        }
        self.painter.destroy();
    }

    /// Drop the backend, letting it first delete the GL objects it owns (`release_gl`; the
    /// context is current while the scene lives).
    fn drop_backend(&mut self) {
        if let Some(mut b) = self.backend.take() {
            b.release_gl(self.current.gl());
        }
    }

    /// Queue an action as if the overlay had asked for it (keyboard controls).
    pub fn push_action(&mut self, a: Action) {
        self.pending.push(a);
    }

    /// Pause or resume (space).
    pub fn toggle_pause(&mut self) {
        self.overlay.controls.paused = !self.overlay.controls.paused;
    }

    /// Hide or show the overlay (h); with `--no-overlay` it stays hidden.
    pub fn toggle_overlay(&mut self) {
        self.overlay_hidden = !self.overlay_hidden;
    }

    /// Turn the trails on or off (key `t`; the overlay has the same box).
    pub fn toggle_trails(&mut self) {
        self.overlay.controls.trails = !self.overlay.controls.trails;
    }

    /// The overlay's line on how the window shows frames (the windowed loop sets it).
    pub fn set_present(&mut self, line: Option<String>) {
        self.present = line;
    }

    /// Number of bodies N of the current state.
    pub fn bodies(&self) -> usize {
        self.renderer.vbos().n
    }

    /// Pause the simulation (the following frames take no steps).
    pub fn pause(&mut self) {
        self.overlay.controls.paused = true;
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[cfg(test)]
mod tests;
