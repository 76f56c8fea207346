//! The demo: one frame loop, windowed (winit + glutin-winit) or headless (EGL device + FBO).
//!
//! Every frame has the same shape ([`Scene::frame`]):
//! 1. apply what the overlay asked for last frame (settings, reset, parameters);
//! 2. `simulate` — `backend.simulate` (CUDA or CPU; uploads/maps the VBOs, draws nothing);
//! 3. UI pass — egui runs the overlay (no GL);
//! 4. render the bodies into the target framebuffer (the default one when windowed, an FBO
//!    headless), timed by a GL timer query;
//! 5. paint egui into the same framebuffer;
//! 6. present (swap buffers) or finish (headless) — the caller's step.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};

use crate::backend::SimBackend;
use crate::cli::DemoArgs;
use crate::gfx::camera::OrbitCamera;
use crate::gfx::context::HeadlessContext;
use crate::gfx::gl::Gl;
use crate::gfx::renderer::{framing_camera, DrawParams, OffscreenTarget, RenderTarget, Renderer};
use crate::gfx::{screenshot, GlInfo};
use crate::overlay::{Action, BackendView, Controls, FrameStats, Overlay};
use crate::select::make_backend;
use crate::sim::init::InitialCondition;
use crate::sim::{Bodies, PhysParams};
use crate::trace::Recorder;
use crate::workflow::WorkflowView;

/// CUDA device ordinal whose EGL device a headless run prefers (see
/// [`HeadlessContext::new`]).
pub const HEADLESS_CUDA_DEVICE: i32 = 0;

/// Run the demo with `args`: windowed, or headless with `--headless`.
///
/// # Errors
/// Bad arguments (unknown `--init`, zero size, unwritable screenshot directory), no GL context,
/// `--backend cuda` without CUDA, or a failure while running; each names what failed.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    validate(args)?;
    let params = PhysParams { g: args.sim.gravitational_constant, dt: args.sim.dt, softening: args.sim.softening };
    let bodies = initial_bodies(&args.sim.init, args.bodies, args.sim.seed, params.g)?;
    if args.headless {
        run_headless(args, bodies, params)
    } else {
        run_windowed(args, bodies, params)
    }
}

fn validate(args: &DemoArgs) -> anyhow::Result<()> {
    if args.width == 0 || args.height == 0 {
        bail!("--width and --height must be at least 1 (got {}×{})", args.width, args.height);
    }
    if args.frames == Some(0) {
        bail!("--frames must be at least 1");
    }
    if !(args.sim.dt.is_finite() && args.sim.dt > 0.0) {
        bail!("--dt must be a finite number > 0 (got {})", args.sim.dt);
    }
    if !(args.sim.softening.is_finite() && args.sim.softening >= 0.0) {
        bail!("--softening must be a finite number ≥ 0 (got {})", args.sim.softening);
    }
    if !(args.sim.gravitational_constant.is_finite() && args.sim.gravitational_constant > 0.0) {
        bail!("--gravitational-constant must be a finite number > 0 (got {})", args.sim.gravitational_constant);
    }
    if !(args.max_sprite_px.is_finite() && args.max_sprite_px >= 1.0) {
        bail!("--max-sprite-px must be a number ≥ 1 (got {})", args.max_sprite_px);
    }
    if args.sim.steps_per_frame == 0 {
        bail!("--steps-per-frame must be at least 1");
    }
    crate::sim::gpu::validate_block_size(args.sim.block_size).context("--block-size")?;
    if args.bodies == 0 || args.bodies > crate::sim::gpu::MAX_BODIES {
        bail!("--bodies must be from 1 to {} (got {})", crate::sim::gpu::MAX_BODIES, args.bodies);
    }
    if args.trace.is_some() && !interop::entry::TRACING_COMPILED {
        bail!("--trace needs driver-call tracing, which this build leaves out: build with the default `trace` feature");
    }
    if let Some(p) = &args.screenshot {
        if !p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            bail!("--screenshot {}: screenshots are written as PNG; give a file name ending in .png", p.display());
        }
    }
    for (flag, path) in [("--screenshot", &args.screenshot), ("--save-state", &args.save_state), ("--trace", &args.trace)] {
        if let Some(p) = path {
            if p.is_dir() {
                bail!("cannot write {flag} file {}: it is a directory; give a file name", p.display());
            }
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    bail!("cannot write {flag} file {}: directory {} does not exist", p.display(), dir.display());
                }
            }
        }
    }
    Ok(())
}

/// Generate the initial bodies for `--init name` (or a CSV path).
///
/// # Errors
/// Unknown name, N = 0, bad G, or an unreadable CSV file.
pub fn initial_bodies(init: &str, n: usize, seed: u64, g: f32) -> anyhow::Result<Bodies> {
    let ic = InitialCondition::parse(init).with_context(|| format!("--init {init}"))?;
    let bodies = ic.generate(n, seed, g).with_context(|| format!("generating the `{}` initial condition", ic.name()))?;
    if bodies.is_empty() {
        bail!("the initial condition `{}` has no bodies", ic.name());
    }
    Ok(bodies)
}

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
    offscreen: Option<OffscreenTarget>,
    painter: egui_glow::Painter,
    gl: Arc<glow::Context>,
    egui_ctx: egui::Context,
    overlay: Overlay,
    camera: OrbitCamera,
    args: DemoArgs,
    gl_info: GlInfo,
    notice: Option<String>,
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
    /// "next step" was asked for (step mode).
    step_next: bool,
    /// Address of the table the recorder was last installed on (0: none).
    traced_api: usize,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frames drawn.
    pub frames: u64,
    /// Mean wall time per frame (ms).
    pub mean_frame_ms: f64,
    /// Backend label.
    pub label: String,
}

impl Summary {
    /// Print the one-line summary to stdout.
    pub fn print(&self) {
        println!("nbody-interop: {} frames, mean frame {:.3} ms, backend: {}", self.frames, self.mean_frame_ms, self.label);
    }
}

impl Scene {
    /// Make the renderer (VBOs from `bodies`), the egui painter and the backend, in the current
    /// context.
    ///
    /// # Errors
    /// Shader, GL allocation or backend failures.
    ///
    /// The context of `gl` must be current on this thread from now until the scene is dropped
    /// (the app's GL convention, see [`crate::gfx::gl`]).
    pub fn new(gl: Arc<glow::Context>, gl_info: GlInfo, args: &DemoArgs, bodies: &Bodies, params: PhysParams) -> anyhow::Result<Self> {
        let mut painter =
            egui_glow::Painter::new(Arc::clone(&gl), "", None, false).map_err(|e| anyhow!("creating the egui painter: {e}"))?;
        let mut renderer = match Renderer::new(&gl, &gl_info, bodies) {
            Ok(r) => r,
            Err(e) => {
                painter.destroy();
                return Err(e.context("creating the body renderer"));
            }
        };
        renderer.set_sprite_cap(args.max_sprite_px);
        let camera = framing_camera(&renderer);
        let egui_ctx = egui::Context::default();
        crate::overlay::install_fonts(&egui_ctx);
        let controls = Controls {
            params,
            steps_per_frame: args.sim.steps_per_frame.max(1),
            paused: false,
            reset_init: if crate::overlay::RESET_INITS.contains(&args.sim.init.as_str()) {
                args.sim.init.clone()
            } else {
                "plummer".into()
            },
            reset_n: args.bodies.max(1),
        };
        let mut scene = Self {
            backend: None,
            renderer,
            offscreen: None,
            painter,
            gl,
            egui_ctx,
            overlay: Overlay::new(controls),
            camera,
            args: args.clone(),
            gl_info,
            notice: None,
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
            step_next: false,
            traced_api: 0,
        };
        // With --trace the backend's setup (registration included) is traced too.
        scene.start_trace_file()?;
        // On error `scene` drops here, which tears down in order.
        let (backend, notice) = make_backend(&scene.args, &scene.gl, &scene.gl_info, scene.renderer.vbos(), bodies, params)?;
        tracing::info!(backend = %backend.label(), gl = %scene.gl_info.summary(), "demo backend ready");
        scene.backend = Some(backend);
        scene.notice = notice;
        if scene.args.step_mode {
            scene.set_step_mode(true);
        }
        Ok(scene)
    }

    /// The GL calls of the scene's context (current while the scene lives: `Scene::new`).
    fn gl(&self) -> Gl<'_> {
        Gl::current(&self.gl)
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

    /// Apply the overlay's requests of the last frame; returns true for a single step.
    fn apply_actions(&mut self) -> anyhow::Result<bool> {
        let mut single = false;
        for action in std::mem::take(&mut self.pending) {
            match action {
                Action::SetParams(p) => self.backend()?.set_params(p),
                Action::SingleStep => single = true,
                Action::ApplySettings(s) => {
                    let gl = Arc::clone(&self.gl);
                    let vbos = *self.renderer.vbos();
                    let params = self.overlay.controls.params;
                    let backend = self.backend.as_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
                    // A switch to or from `external` replaces the backend (crate::select::apply_settings).
                    match crate::select::apply_settings(backend, &self.args, &gl, &self.gl_info, &vbos, s, params) {
                        Ok(applied) => {
                            if let crate::select::Applied::Replaced { notice } = applied {
                                self.notice = notice;
                            }
                            self.overlay.set_message(None)
                        }
                        Err(e) => {
                            tracing::warn!("settings not applied: {e:#}");
                            self.overlay.set_message(Some(format!("settings not applied: {e:#}")));
                        }
                    }
                }
                Action::ComputeDiagnostics => self.compute_diagnostics()?,
                Action::SetStepMode(on) => self.set_step_mode(on),
                Action::NextStep => self.step_next = true,
                Action::RunLab(name) => self.run_lab(&name),
                Action::Reset { init, n } => self.reset(&init, n)?,
            }
        }
        Ok(single)
    }

    /// Reset: drop the backend FIRST (it may hold CUDA registrations of the VBOs), then recreate
    /// the VBOs, then make a new backend.
    fn reset(&mut self, init: &str, n: usize) -> anyhow::Result<()> {
        let params = self.overlay.controls.params;
        let bodies = match initial_bodies(init, n, self.args.sim.seed, params.g) {
            Ok(b) => b,
            Err(e) => {
                self.overlay.set_message(Some(format!("reset failed: {e:#}")));
                return Ok(());
            }
        };
        self.drop_backend();
        self.renderer.recreate_vbos(&self.gl, &bodies).context("reset: recreating the position VBOs")?;
        let mut args = self.args.clone();
        args.sim.init = init.to_owned();
        args.bodies = n;
        let (backend, notice) =
            make_backend(&args, &self.gl, &self.gl_info, self.renderer.vbos(), &bodies, params).context("reset: making the backend")?;
        self.backend = Some(backend);
        self.notice = notice;
        self.camera = framing_camera(&self.renderer);
        self.time_span = 0.0;
        self.overlay.clear();
        self.overlay.set_message(None);
        tracing::info!(init, n = bodies.len(), "reset");
        Ok(())
    }

    fn compute_diagnostics(&mut self) -> anyhow::Result<()> {
        let gl = Arc::clone(&self.gl);
        let vbos = *self.renderer.vbos();
        let d = self.backend()?.diagnostics(&gl, &vbos).context("computing diagnostics")?;
        let frame = self.frame;
        println!(
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
        );
        self.overlay.set_diagnostics(frame, d);
        Ok(())
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
        if let Some(r) = &self.recorder {
            r.begin_frame(self.frame);
        }

        // 1. Requests from the last UI pass.
        let single = self.apply_actions()?;

        // 2. Simulate (no GL drawing).
        let c = &self.overlay.controls;
        let steps = if !c.paused || single { c.steps_per_frame } else { 0 };
        let dt = c.params.dt;
        let gl = Arc::clone(&self.gl);
        let vbos = *self.renderer.vbos();
        // In step mode the frame takes (at most) one step of the workflow instead.
        let timings = self.simulate_or_step(&gl, &vbos, steps)?;
        let n = self.backend()?.n();
        if steps > 0 {
            self.time_span = dt * steps as f32;
        }
        let k = self.args.diagnostics_interval;
        if k > 0 && (self.frame + 1) % k == 0 {
            self.compute_diagnostics()?;
        }
        self.overlay.record(&FrameStats { frame: self.frame, host_frame_ms, sim: timings, draw_ms: self.renderer.draw_ms(), n, steps });

        // 3. UI pass (no GL).
        let mut full_output = None;
        let mut scene_left = 0.0;
        if !self.args.no_overlay {
            let (trace_frame, calls) = self.recorder.as_ref().map(Recorder::last_frame).unwrap_or_default();
            let tracing = self.recorder.is_some();
            let backend = self.backend()?;
            let step_view = backend.step_view();
            let step_unavailable = backend.step_mode_unavailable();
            let label = backend.label();
            let settings = backend.settings();
            let device_panel = backend.device_panel();
            let entry_points = backend.entry_points();
            let view = BackendView {
                label: &label,
                notice: self.notice.as_deref(),
                settings,
                device_panel: &device_panel,
                entry_points: &entry_points,
                gl_info: &self.gl_info,
                workflow: WorkflowView {
                    calls: &calls,
                    frame: trace_frame,
                    tracing,
                    step: step_view.as_ref(),
                    step_unavailable: step_unavailable.as_deref(),
                },
            };
            let overlay = &mut self.overlay;
            let mut actions = Vec::new();
            let out = self.egui_ctx.run_ui(raw_input, |ui| actions = overlay.ui(ui, &view));
            self.pending.extend(actions);
            scene_left = self.overlay.panel_width() * out.pixels_per_point;
            full_output = Some(out);
        }

        // 4. Render the bodies into the target.
        // In step mode GL must not touch mapped buffers: `None` skips the body draw.
        let shown = self.shown_front()?;
        let front = shown.unwrap_or(0);
        // The external backend draws from its own imported buffers.
        let source = self.backend()?.draw_buffers();
        let params = DrawParams { camera: &self.camera, front, time_span: self.time_span, pixels_per_point, scene_left };
        let t_draw = Instant::now();
        if shown.is_some() {
            self.renderer.draw_from(&gl, &target, &params, wait_timer, source);
            self.backend()?.after_draw(&gl);
        } else {
            clear_target(&gl, &target);
        }
        self.trace_draw(t_draw, shown);

        // 5. Paint egui into the same framebuffer.
        let mut platform_output = egui::PlatformOutput::default();
        if let Some(mut out) = full_output {
            target.bind(&gl);
            let prims = self.egui_ctx.tessellate(std::mem::take(&mut out.shapes), out.pixels_per_point);
            self.painter.paint_and_update_textures(target.size(), out.pixels_per_point, &prims, &mut out.textures_delta);
            platform_output = out.platform_output;
        }
        if let Some(r) = &self.recorder {
            r.end_frame();
        }
        self.frame += 1;
        self.last_frame_end = Some(Instant::now());
        Ok(platform_output)
    }

    /// Save `target`'s current contents (bodies and overlay) as PNG.
    ///
    /// # Errors
    /// The file cannot be written (the message names the path and the cause).
    pub fn screenshot(&self, target: &RenderTarget, path: &Path) -> anyhow::Result<()> {
        let [w, h] = target.size();
        target.bind(&self.gl);
        if matches!(target, RenderTarget::Default { .. }) {
            self.gl().read_buffer(glow::BACK);
        }
        let rgba = screenshot::read_rgba(&self.gl, w, h)?;
        screenshot::write_png(path, w, h, &rgba)?;
        tracing::info!(path = %path.display(), "screenshot saved");
        Ok(())
    }

    /// End of run: write `--save-state` and return the summary.
    ///
    /// # Errors
    /// Reading the state back or writing the file failed.
    pub fn finish(&mut self) -> anyhow::Result<Summary> {
        if let Some(path) = self.args.save_state.clone() {
            let gl = Arc::clone(&self.gl);
            let vbos = *self.renderer.vbos();
            let bodies = self.backend()?.bodies(&gl, &vbos).context("reading the final state")?;
            crate::sim::state_csv::write_state(&path, &bodies).with_context(|| format!("writing --save-state {}", path.display()))?;
            tracing::info!(path = %path.display(), n = bodies.len(), "state saved");
        }
        if let Some(r) = &self.trace_file {
            r.finish().context("--trace")?;
        }
        let wall = match (self.first_frame_start, self.last_frame_end) {
            (Some(a), Some(b)) => (b - a).as_secs_f64() * 1e3,
            _ => 0.0,
        };
        let label = self.backend.as_ref().map_or_else(|| "none".to_owned(), |b| b.label());
        Ok(Summary { frames: self.frame, mean_frame_ms: wall / self.frame.max(1) as f64, label })
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
        self.renderer.destroy(&self.gl);
        if let Some(t) = self.offscreen.take() {
            t.destroy(&self.gl);
        }
        self.painter.destroy();
    }

    /// Drop the backend, letting it first delete the GL objects it owns (`release_gl`; the
    /// context is current while the scene lives).
    fn drop_backend(&mut self) {
        if let Some(mut b) = self.backend.take() {
            b.release_gl(&self.gl);
        }
    }

    /// Seconds since the scene was made (egui's clock).
    fn time(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        self.destroy();
    }
}

// ---------------------------------------------------------------------------------------------
// Teaching the workflow: API trace, step mode, mistake lab (crate::trace, crate::workflow, crate::lab)

impl Scene {
    /// `--trace PATH`: a recorder writing every call, active before the backend is made.
    fn start_trace_file(&mut self) -> anyhow::Result<()> {
        if let Some(path) = &self.args.trace {
            let r = Recorder::to_file(path)?;
            crate::trace::set_active(Some(r.clone()));
            tracing::info!(path = %path.display(), "tracing every driver call (one JSON object per line)");
            self.trace_file = Some(r.clone());
            self.recorder = Some(r);
        }
        Ok(())
    }

    /// Tracing is on while the Workflow panel is open or with `--trace`, off otherwise (then a
    /// driver call costs one relaxed atomic load more). Installs the recorder on the backend's
    /// table, again whenever the backend was re-made.
    fn sync_trace(&mut self) {
        let want = self.trace_file.is_some() || (!self.args.no_overlay && self.overlay.workflow.open);
        let api = self.backend.as_ref().and_then(|b| b.api());
        let addr = api.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize);
        match (want, &self.recorder) {
            (true, Some(r)) if addr != self.traced_api => {
                if let Some(a) = &api {
                    r.install(a);
                }
                self.traced_api = addr;
            }
            (true, None) => {
                let r = Recorder::new();
                if let Some(a) = &api {
                    r.install(a);
                }
                crate::trace::set_active(Some(r.clone()));
                self.recorder = Some(r);
                self.traced_api = addr;
            }
            (false, Some(_)) => {
                if let Some(a) = &api {
                    a.set_tracer(None);
                }
                crate::trace::set_active(None);
                self.recorder = None;
                self.traced_api = 0;
            }
            _ => {}
        }
    }

    /// Stops tracing and flushes the `--trace` file (after the backend's teardown).
    fn stop_trace(&mut self) {
        crate::trace::set_active(None);
        self.recorder = None;
        if let Some(r) = self.trace_file.take() {
            match r.finish() {
                Ok(()) => tracing::info!(calls = r.count(), "trace written"),
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
    }

    /// Adds the GL draw (with the renderer's timer-query time) to the trace.
    fn trace_draw(&self, t0: Instant, shown: Option<usize>) {
        if let (Some(r), Some(i)) = (&self.recorder, shown) {
            let buffer = self.renderer.vbos().buffers[i.min(1)].0.get();
            r.gl_draw(self.renderer.draw_ms(), t0.elapsed().as_secs_f64() * 1e6, buffer);
        }
    }

    /// Turns the backend's step mode on or off; the overlay shows why it cannot.
    fn set_step_mode(&mut self, on: bool) {
        let r = match self.backend.as_mut() {
            Some(b) => b.set_step_mode(on),
            None => Err(anyhow!("no simulation backend")),
        };
        match r {
            Ok(()) => self.overlay.workflow.step_mode = on,
            Err(e) => {
                tracing::warn!("step mode: {e:#}");
                self.overlay.workflow.step_mode = false;
                self.overlay.set_message(Some(format!("step mode: {e:#}")));
            }
        }
    }

    /// `simulate`, or in step mode the next step of the frame when one was asked for (headless
    /// `--step-mode` runs take one step every frame).
    fn simulate_or_step(
        &mut self,
        gl: &glow::Context,
        vbos: &crate::backend::PositionVbos,
        steps: u32,
    ) -> anyhow::Result<crate::backend::SimTimings> {
        let per_frame = self.overlay.controls.steps_per_frame.max(1);
        let auto = self.args.headless && self.args.step_mode;
        let next = std::mem::take(&mut self.step_next) || auto;
        if self.overlay.workflow.step_mode && self.backend()?.step_view().is_none() {
            // The backend was re-made (new settings): step mode again, if it still can.
            self.set_step_mode(true);
        }
        let backend = self.backend()?;
        if backend.step_view().is_none() {
            return backend.simulate(gl, vbos, steps).with_context(|| format!("simulate ({})", backend.label()));
        }
        let mut t = crate::backend::SimTimings::default();
        if next {
            let t0 = Instant::now();
            let r = backend.next_step(gl, vbos, per_frame);
            t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
            match r {
                Ok(step) => tracing::debug!(?step, frame = self.frame, "step mode"),
                Err(e) if auto => return Err(e.context("step mode")),
                Err(e) => self.overlay.set_message(Some(format!("step failed: {e:#}"))),
            }
        }
        Ok(t)
    }

    /// The buffer GL may draw now: the backend's front, or in step mode the one the state
    /// machine allows (`None` while the buffers are mapped).
    fn shown_front(&mut self) -> anyhow::Result<Option<usize>> {
        let b = self.backend()?;
        Ok(match b.step_view() {
            Some(v) => v.display_front,
            None => Some(b.front()),
        })
    }

    /// Runs a mistake-lab case against the live contexts, on scratch resources.
    fn run_lab(&mut self, name: &str) {
        let ctx = self.backend.as_ref().and_then(|b| b.cuda_context());
        let o = crate::lab::run_live(name, &self.gl, ctx.as_ref());
        tracing::info!(case = %o.case, got = %o.got_summary(), ok = o.ok, "mistake lab");
        self.overlay.workflow.lab.push(o);
    }
}

/// Clears `target` as the body draw does, without touching the position buffers.
fn clear_target(gl: &glow::Context, target: &RenderTarget) {
    let [w, h] = target.size();
    target.bind(gl);
    let g = Gl::current(gl);
    g.viewport(0, 0, w as i32, h as i32);
    g.disable(glow::SCISSOR_TEST);
    g.clear_color(0.0, 0.0, 0.015, 1.0);
    g.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
}

// ---------------------------------------------------------------------------------------------
// Headless

/// Egui input of a headless frame: `width` × `height` points at 1 pixel per point.
fn headless_input(width: u32, height: u32, time: f64) -> egui::RawInput {
    let mut raw = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width as f32, height as f32))),
        time: Some(time),
        ..Default::default()
    };
    raw.viewports.entry(egui::ViewportId::ROOT).or_default().native_pixels_per_point = Some(1.0);
    raw
}

fn run_headless(args: &DemoArgs, bodies: Bodies, params: PhysParams) -> anyhow::Result<()> {
    // Declared first, dropped last: the context outlives the scene.
    let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).context("headless GL context")?;
    tracing::info!(gl = %ctx.info.summary(), device = ?ctx.info.egl_device, "headless GL");
    let gl = Arc::clone(&ctx.gl);
    // `HeadlessContext::new` made its context current on this thread, and `ctx` (declared first)
    // outlives `scene`.
    let mut scene = Scene::new(Arc::clone(&gl), ctx.info.clone(), args, &bodies, params)?;
    drop(bodies);
    let fbo = OffscreenTarget::new(&gl, args.width, args.height).context("offscreen framebuffer")?;
    scene.offscreen = Some(fbo);
    let target = RenderTarget::Offscreen(fbo);

    let stop = Arc::new(AtomicBool::new(false));
    if args.frames.is_none() {
        let s = Arc::clone(&stop);
        match ctrlc::set_handler(move || s.store(true, Ordering::SeqCst)) {
            Ok(()) => eprintln!("headless without --frames: running until Ctrl-C (the screenshot and state are saved then)"),
            Err(e) => tracing::warn!("no Ctrl-C handler ({e}); stop with --frames"),
        }
    }
    while args.frames.is_none_or(|n| scene.frame < n) && !stop.load(Ordering::SeqCst) {
        let input = headless_input(args.width, args.height, scene.time());
        scene.frame(input, target, 1.0, true)?;
        scene.gl().finish();
    }
    if let Some(path) = &args.screenshot {
        scene.screenshot(&target, path)?;
    }
    let summary = scene.finish()?;
    drop(scene);
    drop(ctx);
    summary.print();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Windowed

use glutin::config::{ConfigTemplateBuilder, GlConfig as _};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::{GetGlDisplay as _, GlDisplay as _};
use glutin::prelude::{GlSurface as _, NotCurrentGlContext as _};
use glutin::surface::{SwapInterval, WindowSurface};
use glutin_winit::GlWindow as _;
use raw_window_handle::HasWindowHandle as _;
use winit::application::ApplicationHandler;
use winit::dpi::{PhysicalPosition, PhysicalSize};
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::window::{Window, WindowId};

/// The windowed state, made in `resumed`.
///
/// Teardown order = field order: `scene` (backend → GL objects → egui painter), then the
/// egui-winit state, then the GL surface, the GL context, and last the window.
struct WindowState {
    scene: Scene,
    egui_winit: egui_winit::State,
    surface: glutin::surface::Surface<WindowSurface>,
    context: glutin::context::PossiblyCurrentContext,
    window: Window,
    size: PhysicalSize<u32>,
    cursor: Option<PhysicalPosition<f64>>,
    drag: Option<MouseButton>,
    presented: u64,
    screenshot_taken: bool,
    /// The window was destroyed under us: no more GL calls on its surface.
    window_gone: bool,
}

/// winit application: `state` is `None` until `resumed` makes the window.
struct App {
    args: DemoArgs,
    start: Option<(Bodies, PhysParams)>,
    state: Option<WindowState>,
    error: Option<anyhow::Error>,
    summary: Option<Summary>,
}

fn run_windowed(args: &DemoArgs, bodies: Bodies, params: PhysParams) -> anyhow::Result<()> {
    let event_loop = EventLoop::new().context("opening the display (winit event loop); use --headless without a display")?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App { args: args.clone(), start: Some((bodies, params)), state: None, error: None, summary: None };
    event_loop.run_app(&mut app).context("winit event loop")?;
    // Normally `exiting` tore down already; this covers an event loop that ended otherwise.
    app.teardown();
    if let Some(e) = app.error.take() {
        return Err(e);
    }
    if let Some(s) = &app.summary {
        s.print();
    }
    Ok(())
}

impl App {
    fn fail(&mut self, event_loop: &ActiveEventLoop, e: anyhow::Error) {
        tracing::error!("{e:#}");
        if self.error.is_none() {
            self.error = Some(e);
        }
        event_loop.exit();
    }

    /// Final screenshot (if not taken), save state, summary, then drop in order.
    fn teardown(&mut self) {
        let Some(mut st) = self.state.take() else { return };
        if let (Some(path), false) = (self.args.screenshot.clone(), st.screenshot_taken) {
            if self.error.is_none() && !st.window_gone && st.size.width > 0 && st.size.height > 0 {
                // Render one more frame (no steps) and read it back before any swap.
                st.scene.overlay.controls.paused = true;
                let target = RenderTarget::Default { width: st.size.width, height: st.size.height };
                let input = st.egui_winit.take_egui_input(&st.window);
                let ppp = st.window.scale_factor() as f32;
                let r = st.scene.frame(input, target, ppp, false).and_then(|_| st.scene.screenshot(&target, &path));
                if let Err(e) = r {
                    self.error = Some(e);
                }
            }
        }
        match st.scene.finish() {
            Ok(s) => self.summary = Some(s),
            Err(e) => {
                if self.error.is_none() {
                    self.error = Some(e);
                }
            }
        }
        st.scene.destroy();
        drop(st);
    }

    fn create(&mut self, event_loop: &ActiveEventLoop) -> anyhow::Result<WindowState> {
        let (bodies, params) = self.start.take().ok_or_else(|| anyhow!("window state made twice"))?;
        let attrs = Window::default_attributes()
            .with_title("nbody-interop")
            .with_inner_size(PhysicalSize::new(self.args.width, self.args.height))
            .with_resizable(true);
        let template = ConfigTemplateBuilder::new().with_alpha_size(8);
        let builder = glutin_winit::DisplayBuilder::new().with_window_attributes(Some(attrs.clone()));
        // The picker must return a config; an empty list is reported by unwinding out of it,
        // caught here and turned into an error (no panic escapes; the default hook, which would
        // print a panic message, is swapped out for the duration).
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            builder.build(event_loop, template, |configs| {
                configs
                    .reduce(|best, c| if c.num_samples() < best.num_samples() { c } else { best })
                    .unwrap_or_else(|| std::panic::panic_any("no GL config for the window"))
            })
        }));
        std::panic::set_hook(hook);
        let built = built.map_err(|_| anyhow!("no GL framebuffer config for the window"))?;
        let (window, config) = built.map_err(|e| anyhow!("creating the GL display and window: {e}"))?;
        let display = config.display();
        let window = match window {
            Some(w) => w,
            None => glutin_winit::finalize_window(event_loop, attrs, &config).context("creating the window")?,
        };
        let raw = window.window_handle().context("window handle")?.as_raw();
        let gl_attrs = ContextAttributesBuilder::new()
            .with_context_api(ContextApi::OpenGl(Some(Version::new(3, 3))))
            .with_profile(GlProfile::Core)
            .build(Some(raw));
        let gles_attrs = ContextAttributesBuilder::new().with_context_api(ContextApi::Gles(Some(Version::new(3, 0)))).build(Some(raw));
        let desktop = if crate::gfx::context::force_gles() {
            Err(glutin::error::ErrorKind::NotSupported("NBODY_GL_API=gles").into())
        } else {
            // SAFETY: the attributes carry the handle of `window`, which outlives the context
            // (WindowState drops the window last), and `config` belongs to `display`.
            unsafe { display.create_context(&config, &gl_attrs) }
        };
        let not_current = desktop.or_else(|e: glutin::error::Error| {
            tracing::info!("no OpenGL 3.3 core context ({e}); trying OpenGL ES 3.0");
            // SAFETY: as for the desktop context above.
            unsafe { display.create_context(&config, &gles_attrs) }
        });
        let not_current = not_current.map_err(|e| anyhow!("no OpenGL 3.3 core or OpenGL ES 3.0 context: {e}"))?;
        let sattrs = window.build_surface_attributes(Default::default()).context("window surface attributes")?;
        // SAFETY: the surface attributes hold the handle of `window`, which outlives the surface
        // (dropped after it, by field order).
        let surface =
            unsafe { display.create_window_surface(&config, &sattrs) }.map_err(|e| anyhow!("creating the window surface: {e}"))?;
        let context = not_current.make_current(&surface).map_err(|e| anyhow!("making the GL context current: {e}"))?;
        let interval = if self.args.no_vsync { SwapInterval::DontWait } else { SwapInterval::Wait(std::num::NonZeroU32::MIN) };
        if let Err(e) = surface.set_swap_interval(&context, interval) {
            tracing::warn!("could not set the swap interval ({interval:?}): {e}");
        }
        let fns = crate::gfx::context::query_fns_loaded(|s| display.get_proc_address(s));
        // SAFETY: the context is current on this thread; the loader gives its entry points.
        let gl = unsafe { glow::Context::from_loader_function_cstr(|s| display.get_proc_address(s)) };
        let gl_info = GlInfo::query(&gl, None, None, fns).with_memory_object(&gl, |s| display.get_proc_address(s));
        tracing::info!(gl = %gl_info.summary(), "windowed GL");
        // The context is current on this (the event-loop) thread and stays so: nothing releases
        // it, and WindowState drops the scene before the context (field order).
        let scene = Scene::new(Arc::new(gl), gl_info, &self.args, &bodies, params)?;
        let egui_winit = egui_winit::State::new(
            scene.egui_ctx().clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            window.theme(),
            Some(scene.max_texture_side()),
        );
        let size = window.inner_size();
        Ok(WindowState {
            scene,
            egui_winit,
            surface,
            context,
            window,
            size,
            cursor: None,
            drag: None,
            presented: 0,
            screenshot_taken: false,
            window_gone: false,
        })
    }

    fn redraw(&mut self, event_loop: &ActiveEventLoop) -> anyhow::Result<()> {
        let frames = self.args.frames;
        let screenshot = self.args.screenshot.clone();
        let Some(st) = self.state.as_mut() else { return Ok(()) };
        let size = st.window.inner_size();
        if size.width == 0 || size.height == 0 || st.window.is_minimized() == Some(true) {
            // Minimised: no frame and no GL calls until the window comes back.
            return Ok(());
        }
        if size != st.size {
            st.size = size;
            st.window.resize_surface(&st.surface, &st.context);
        }
        let target = RenderTarget::Default { width: size.width, height: size.height };
        let input = st.egui_winit.take_egui_input(&st.window);
        let ppp = st.window.scale_factor() as f32;
        let platform_output = st.scene.frame(input, target, ppp, false)?;
        st.egui_winit.handle_platform_output(&st.window, platform_output);
        let last = frames.is_some_and(|n| st.presented + 1 >= n);
        if last {
            if let Some(path) = &screenshot {
                st.scene.screenshot(&target, path)?;
                st.screenshot_taken = true;
            }
        }
        st.surface.swap_buffers(&st.context).map_err(|e| anyhow!("eglSwapBuffers/glXSwapBuffers: {e}"))?;
        st.presented += 1;
        if last {
            event_loop.exit();
        } else {
            st.window.request_redraw();
        }
        Ok(())
    }

    fn camera_input(st: &mut WindowState, event: &WindowEvent) {
        let over_egui = st.scene.egui_ctx().is_pointer_over_egui() || st.scene.egui_ctx().egui_wants_pointer_input();
        let scale = st.window.scale_factor() as f32;
        match event {
            WindowEvent::MouseInput { state: ElementState::Pressed, button, .. } if !over_egui => {
                if matches!(button, MouseButton::Left | MouseButton::Right) {
                    st.drag = Some(*button);
                }
            }
            WindowEvent::MouseInput { state: ElementState::Released, button, .. } if st.drag == Some(*button) => st.drag = None,
            WindowEvent::CursorMoved { position, .. } => {
                if let (Some(prev), Some(button)) = (st.cursor, st.drag) {
                    let (dx, dy) = ((position.x - prev.x) as f32, (position.y - prev.y) as f32);
                    let h = st.size.height as f32;
                    match button {
                        MouseButton::Left => st.scene.camera_mut().orbit(dx / scale, dy / scale),
                        _ => st.scene.camera_mut().pan(dx, dy, h),
                    }
                }
                st.cursor = Some(*position);
            }
            WindowEvent::CursorLeft { .. } => st.cursor = None,
            WindowEvent::MouseWheel { delta, .. } if !over_egui => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / (40.0 * scale),
                };
                st.scene.camera_mut().zoom(steps);
            }
            _ => {}
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.state.is_some() || self.start.is_none() {
            return;
        }
        match self.create(event_loop) {
            Ok(st) => {
                st.window.request_redraw();
                self.state = Some(st);
            }
            Err(e) => self.fail(event_loop, e),
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        match event {
            WindowEvent::CloseRequested => {
                event_loop.exit();
                return;
            }
            WindowEvent::Destroyed => {
                if let Some(st) = self.state.as_mut() {
                    st.window_gone = true;
                }
                event_loop.exit();
                return;
            }
            WindowEvent::RedrawRequested => {
                if let Err(e) = self.redraw(event_loop) {
                    self.fail(event_loop, e);
                }
                return;
            }
            _ => {}
        }
        let Some(st) = self.state.as_mut() else { return };
        let response = st.egui_winit.on_window_event(&st.window, &event);
        if !response.consumed {
            Self::camera_input(st, &event);
        } else if let WindowEvent::CursorMoved { position, .. } = event {
            st.cursor = Some(position);
        }
        match event {
            WindowEvent::Resized(size) if size.width > 0 && size.height > 0 => {
                st.size = size;
                st.window.resize_surface(&st.surface, &st.context);
                st.window.request_redraw();
            }
            WindowEvent::Occluded(false) | WindowEvent::ScaleFactorChanged { .. } => st.window.request_redraw(),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        if let Some(st) = &self.state {
            if st.window.is_minimized() == Some(true) {
                // Nothing to draw: sleep until an event instead of spinning.
                event_loop.set_control_flow(ControlFlow::Wait);
            } else {
                event_loop.set_control_flow(ControlFlow::Poll);
                st.window.request_redraw();
            }
        }
    }

    fn exiting(&mut self, _event_loop: &ActiveEventLoop) {
        self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;

    fn args(extra: &[&str]) -> DemoArgs {
        let mut v = vec!["nbody-interop", "--headless", "--backend", "cpu", "--bodies", "200"];
        v.extend_from_slice(extra);
        if !extra.contains(&"--width") {
            v.extend_from_slice(&["--width", "96", "--height", "64"]);
        }
        Cli::try_parse_from(v).expect("arguments parse").demo
    }

    /// Headless scene on Mesa's software EGL device (or whatever device this machine has).
    fn scene(a: &DemoArgs) -> (Scene, RenderTarget, HeadlessContext) {
        let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).expect("headless GL");
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
        let bodies = initial_bodies(&a.sim.init, a.bodies, a.sim.seed, params.g).expect("bodies");
        let mut s = Scene::new(Arc::clone(&ctx.gl), ctx.info.clone(), a, &bodies, params).expect("scene");
        let fbo = OffscreenTarget::new(&ctx.gl, a.width, a.height).expect("fbo");
        s.offscreen = Some(fbo);
        (s, RenderTarget::Offscreen(fbo), ctx)
    }

    fn frame(s: &mut Scene, t: RenderTarget) {
        let [w, h] = t.size();
        s.frame(headless_input(w, h, s.time()), t, 1.0, true).expect("frame");
    }

    #[test]
    fn reset_recreates_vbos_and_backend_with_the_new_n() {
        let a = args(&[]);
        let (mut s, t, ctx) = scene(&a);
        frame(&mut s, t);
        s.pending.push(Action::Reset { init: "ball".into(), n: 300 });
        frame(&mut s, t);
        assert_eq!(s.renderer.vbos().n, 300);
        assert_eq!(s.backend.as_ref().map(|b| b.n()), Some(300));
        assert_eq!(s.overlay.controls.reset_n, 200, "the reset combo keeps its own value");
        // A bad reset is shown in the overlay and keeps the old state.
        s.pending.push(Action::Reset { init: "nosuch".into(), n: 10 });
        frame(&mut s, t);
        assert_eq!(s.renderer.vbos().n, 300);
        drop(s);
        drop(ctx);
    }

    /// A backend with CUDA-like settings and tables, to exercise the overlay's CUDA panels.
    struct Fake(Option<crate::backend::InteropSettings>);

    impl SimBackend for Fake {
        fn label(&self) -> String {
            "CUDA map · fake device".into()
        }
        fn n(&self) -> usize {
            200
        }
        fn simulate(&mut self, _: &glow::Context, _: &crate::backend::PositionVbos, _: u32) -> anyhow::Result<crate::backend::SimTimings> {
            Ok(crate::backend::SimTimings { host_ms: 1.0, map_ms: Some(0.01), kernel_ms: Some(0.5), unmap_ms: Some(0.02), upload_ms: None })
        }
        fn front(&self) -> usize {
            0
        }
        fn set_params(&mut self, _: PhysParams) {}
        fn bodies(&mut self, _: &glow::Context, _: &crate::backend::PositionVbos) -> anyhow::Result<Bodies> {
            anyhow::bail!("fake")
        }
        fn diagnostics(&mut self, _: &glow::Context, _: &crate::backend::PositionVbos) -> anyhow::Result<crate::sim::Diagnostics> {
            Ok(crate::sim::Diagnostics::default())
        }
        fn settings(&self) -> Option<crate::backend::InteropSettings> {
            self.0
        }
        fn apply_settings(
            &mut self,
            _: &glow::Context,
            _: &crate::backend::PositionVbos,
            s: crate::backend::InteropSettings,
        ) -> anyhow::Result<()> {
            self.0 = Some(s);
            Ok(())
        }
        fn device_panel(&self) -> Vec<(String, String)> {
            vec![("device".into(), "Fake GPU".into()), ("SMs".into(), "132".into())]
        }
        fn entry_points(&self) -> Vec<[String; 5]> {
            vec![["cuGraphicsMapResources".into(), "3000".into(), "legacy".into(), "found".into(), "".into()]]
        }
    }

    #[test]
    fn overlay_with_cuda_panels_and_settings_change() {
        use crate::backend::InteropSettings;
        use crate::cli::{InteropMode, ResourceFlags, StreamKind};
        let a = args(&["--width", "900", "--height", "700"]);
        let (mut s, t, ctx) = scene(&a);
        let settings = InteropSettings {
            interop: InteropMode::Map,
            register_flags: ResourceFlags::None,
            map_flags: ResourceFlags::WriteDiscard,
            stream: StreamKind::NonBlocking,
            stream_priority: -1,
            block_size: 256,
        };
        s.backend = Some(Box::new(Fake(Some(settings))));
        s.notice = Some("CUDA unavailable, running the CPU backend: example notice".into());
        for _ in 0..3 {
            frame(&mut s, t);
        }
        if let Some(path) = std::env::var_os("NBODY_OVERLAY_PNG") {
            s.screenshot(&t, std::path::Path::new(&path)).expect("screenshot");
        }
        let changed = InteropSettings { interop: InteropMode::Copy, ..settings };
        s.pending.push(Action::ApplySettings(changed));
        frame(&mut s, t);
        assert_eq!(s.backend.as_ref().and_then(|b| b.settings()), Some(changed));
        drop(s);
        drop(ctx);
    }

    #[test]
    fn pause_single_step_and_params() {
        let a = args(&["--steps-per-frame", "2"]);
        let (mut s, t, ctx) = scene(&a);
        s.overlay.controls.paused = true;
        let gl = Arc::clone(&s.gl);
        let vbos = *s.renderer.vbos();
        let before = s.backend.as_mut().expect("backend").bodies(&gl, &vbos).expect("bodies");
        frame(&mut s, t);
        let paused = s.backend.as_mut().expect("backend").bodies(&gl, &vbos).expect("bodies");
        assert_eq!(before.pos, paused.pos, "paused frames do not step");
        s.pending.push(Action::SingleStep);
        // What the overlay does when dt is edited: new controls, and an action for the backend.
        let p = PhysParams { g: 1.0, dt: 2e-3, softening: 0.02 };
        s.overlay.controls.params = p;
        s.pending.push(Action::SetParams(p));
        frame(&mut s, t);
        let stepped = s.backend.as_mut().expect("backend").bodies(&gl, &vbos).expect("bodies");
        assert_ne!(before.pos, stepped.pos, "single step advances");
        assert_eq!(s.time_span, 2.0 * 2e-3, "time span = dt · steps of the last stepping frame");
        drop(s);
        drop(ctx);
    }

    #[test]
    fn workflow_panel_traces_and_explains_what_needs_cuda() {
        let a = args(&[]);
        let (mut s, t, ctx) = scene(&a);
        frame(&mut s, t);
        assert!(s.recorder.is_none(), "no tracing while the Workflow panel is closed");
        // What opening the panel does (the UI pass sets `open` from the collapsing header).
        s.overlay.workflow.open = true;
        frame(&mut s, t);
        let (_, calls) = s.recorder.as_ref().expect("tracing while the panel is open").last_frame();
        assert!(calls.iter().any(|c| c.name == "glDrawArrays" && c.step == crate::trace::Step::Draw), "{calls:?}");
        // The CPU backend: the lab says what a case needs, step mode says why it cannot run.
        s.pending.push(Action::RunLab("ptx-version-too-new".into()));
        s.pending.push(Action::SetStepMode(true));
        frame(&mut s, t);
        let o = s.overlay.workflow.lab.last().expect("a lab outcome");
        assert!(o.is_unavailable() && o.got_text.contains("CUDA backend"), "{o:?}");
        assert!(!s.overlay.workflow.step_mode);
        // The panel closed again (the test's UI pass leaves it collapsed): tracing stops.
        frame(&mut s, t);
        assert!(s.recorder.is_none());
        drop(s);
        drop(ctx);
    }
}
