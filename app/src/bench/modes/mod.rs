//! The timed frame of each bench mode, and the GL and CUDA environments they run in.
//!
//! - GL modes (`draw`, `map`, `map-separate`, `copy`, `external`, `cpu`): a [`SimBackend`] bound to the
//!   renderer's two position VBOs (`external`: drawing its own imported buffers instead); one
//!   frame = `simulate` → draw into the offscreen FBO (timer query waited on) → `glFinish`, timed
//!   on the host from the start of `simulate` to the return of `glFinish`.
//! - `compute`: [`ComputeRunner`], the step kernel alone on two device buffers that ping-pong as
//!   positions; one frame = event, kernel launches, event, `cuEventSynchronize`. No GL at all.
//!   In a split setup (`--gpus`, `--slices-per-gpu`, `--render-gpu-computes no`):
//!   [`SlicedComputeRunner`], the slices' steps and gathers, waited for.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};

use super::report::SetupFacts;
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::CudaBackend;
use crate::backend::{CudaSide as _, PositionVbos, Readout, SimBackend, SimTimings, State};
use crate::cuda::settings::{DensityPath, View};
use crate::demo::frame::{render_view, GlTrack};
use crate::gfx::camera::OrbitCamera;
use crate::gfx::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};
use crate::gfx::gl::{CurrentContext, Gl};
use crate::gfx::readback::{PixelOrder, Readback};
use crate::gfx::renderer::{framing_camera, DrawParams, Renderer};
use crate::gfx::target::{OffscreenTarget, RenderTarget};
use crate::gfx::GlInfo;
use crate::trace::Recorder;
use kernels::launch_rule::LaunchConfig;
use sim::Bodies;

mod compute;

pub use compute::{ComputeCtx, ComputeRunner, ComputeRunnerF64, SlicedComputeRunner};

/// Measurements of one frame, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameSample {
    /// Host time of the whole frame.
    pub frame_ms: f64,
    /// The simulate step's timings (map, kernel, unmap, upload).
    pub sim: SimTimings,
    /// GL timer-query time of the body draw.
    pub draw_ms: Option<f64>,
    /// Host time of the copy route's readback of the frame before (`bench --readback`).
    pub readback_ms: Option<f64>,
    /// GPU time of the density view's pass (density modes; CUDA events).
    pub density_ms: Option<f64>,
    /// The tree's last step of the frame (tree and cpu-tree modes).
    pub tree: Option<TreeSample>,
}

/// The tree's step as the bench records it (the GPU tree's, or the CPU backend's).
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeSample {
    /// Build, moments and walk times (ms; CUDA events, or the CPU's host clock).
    pub phases: crate::cuda::tree::TreePhases,
    /// Terms evaluated per body (leaves and accepted cells).
    pub per_body: f64,
}

/// The CPU backend's last tree step (`cpu-tree`), as a [`TreeSample`]; `None` with the direct sum.
fn cpu_tree_sample(b: &CpuBackend) -> Option<TreeSample> {
    let info = b.describe();
    if !matches!(info.solver, sim::tree::Solver::Tree { .. }) {
        return None;
    }
    let (counts, p) = b.tree_step();
    let phases = crate::cuda::tree::TreePhases { build_ms: p.build_ms as f32, moments_ms: p.moments_ms as f32, walk_ms: p.walk_ms as f32 };
    Some(TreeSample { phases, per_body: counts.total() as f64 / info.n.max(1) as f64 })
}

/// The headless GL side of the bench: one context for the whole run, one renderer whose VBOs
/// are remade for every (mode, N, round), and one offscreen target.
///
/// Teardown: whoever holds a backend bound to the VBOs drops it before this is dropped (or
/// [`Gfx::load`] called again). Field order is drop order; `Drop` deletes the renderer's GL
/// objects and the FBO, then the context goes.
pub struct Gfx {
    renderer: Option<Renderer>,
    /// `--max-sprite-px`.
    sprite_cap: f32,
    target: Option<OffscreenTarget>,
    /// `--readback`: the copy route's pixel-pack buffers and the window-format pixels they fill.
    readback: Option<(Readback, Vec<u32>)>,
    camera: OrbitCamera,
    /// The density modes: the view drawn instead of the bodies, and how its image is written.
    density: Option<DensityPath>,
    ctx: HeadlessContext,
}

impl Gfx {
    /// Make the headless context (the demo's EGL path, preferring CUDA device 0's EGL device) and
    /// a `width` × `height` offscreen target.
    ///
    /// # Errors
    /// No EGL context, or the FBO cannot be made.
    pub fn open(width: u32, height: u32, sprite_cap: f32, readback: bool) -> anyhow::Result<Gfx> {
        let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).context("headless GL context")?;
        let target = OffscreenTarget::new(ctx.gl(), width, height).context("offscreen framebuffer")?;
        let readback = if readback {
            let order = PixelOrder::for_context(&ctx.info);
            match Readback::new(ctx.gl(), width, height, order) {
                Ok(r) => Some((r, vec![0u32; width as usize * height as usize])),
                Err(e) => {
                    target.destroy(ctx.gl());
                    return Err(e.context("--readback's pixel-pack buffers"));
                }
            }
        } else {
            None
        };
        Ok(Gfx {
            renderer: None,
            sprite_cap,
            target: Some(target),
            readback,
            camera: OrbitCamera::framing(glam::Vec3::ZERO, 1.0),
            density: None,
            ctx,
        })
    }

    /// Shows the density view (`Some`: a density mode, with its path) or the bodies in the
    /// frames that follow.
    pub fn set_density(&mut self, path: Option<DensityPath>) {
        self.density = path;
    }

    /// Vendor, renderer, version and EGL device of the context.
    pub fn info(&self) -> &GlInfo {
        &self.ctx.info
    }

    /// The proof that the context is current, for GL calls.
    pub fn gl(&self) -> Gl<'_> {
        self.ctx.gl()
    }

    /// The owned proof (for owners that must make GL calls when they drop).
    pub fn current(&self) -> &CurrentContext {
        self.ctx.current()
    }

    /// Framebuffer size in pixels.
    pub fn size(&self) -> Option<(u32, u32)> {
        self.target.map(|t| (t.width, t.height))
    }

    /// Fill both position VBOs with `bodies` (remaking them) and frame the camera on them.
    /// Any backend bound to the old VBOs must have been dropped.
    ///
    /// # Errors
    /// Shader or buffer creation fails.
    pub fn load(&mut self, bodies: &Bodies) -> anyhow::Result<PositionVbos> {
        let gl = self.ctx.gl();
        match &mut self.renderer {
            Some(r) => r.recreate_vbos(gl, bodies).context("remaking the position VBOs")?,
            None => self.renderer = Some(Renderer::new(gl, &self.ctx.info, bodies).context("renderer")?),
        }
        let r = self.renderer.as_mut().context("renderer missing")?;
        r.set_sprite_cap(self.sprite_cap);
        self.camera = framing_camera(r);
        Ok(*r.vbos())
    }

    /// One full frame, the demo's shape without the overlay: `backend.simulate`, the bodies
    /// drawn into the FBO by the demo's render step ([`render_view`], waiting for the timer
    /// query), `glFinish`.
    ///
    /// # Errors
    /// The backend's error.
    pub fn frame(&mut self, backend: &mut dyn SimBackend, steps: u32, time_span: f32) -> anyhow::Result<FrameSample> {
        let gl = self.ctx.gl();
        let renderer = self.renderer.as_mut().context("no VBOs loaded")?;
        let target = RenderTarget::Offscreen(self.target.context("no offscreen target")?);
        let vbos = *renderer.vbos();
        let t0 = Instant::now();
        let sim = backend.simulate(gl, &vbos, steps)?;
        let params =
            DrawParams { camera: &self.camera, front: backend.shown().front, time_span, pixels_per_point: 1.0, scene_left: 0.0, advanced: steps > 0 };
        let view = (if self.density.is_some() { View::Density } else { View::Points }, self.density.unwrap_or_default());
        if let Some(why) = render_view(gl, renderer, backend, &target, &params, true, true, view) {
            bail!("{why}");
        }
        // As the copy route does after a frame: start its readback, take the frame before's.
        let readback_ms = match &mut self.readback {
            Some((r, pixels)) => {
                target.bind(gl);
                r.push(gl, Some(pixels))?
            }
            None => None,
        };
        gl.finish();
        let frame_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (draw_ms, density_ms) = match self.density {
            None => (if self.ctx.info.timer_query { renderer.draw_ms() } else { None }, None),
            // After glFinish: the draw followed the unmap, so the pass's events have completed.
            Some(_) => (None, backend.sides().cuda().and_then(|c| c.density_ms())),
        };
        Ok(FrameSample { frame_ms, sim, draw_ms, readback_ms, density_ms, tree: None })
    }

    /// The state `backend` holds, read back with synchronised velocities (for the divergence check
    /// after a visit's frames; the closing half kick changes the state, so call it last).
    ///
    /// # Errors
    /// The backend's read-back error; no VBOs loaded.
    pub fn state(&mut self, backend: &mut dyn SimBackend) -> anyhow::Result<Bodies> {
        let vbos = *self.renderer.as_ref().context("no VBOs loaded")?.vbos();
        Ok(backend.state(self.ctx.gl(), &vbos, Readout::Bodies)?.bodies)
    }

    /// Starts the GL track of a timeline on the renderer (`None` before [`Gfx::load`]).
    pub fn start_gl_track(&mut self, r: &Recorder) -> Option<GlTrack> {
        let gl = self.ctx.gl();
        self.renderer.as_mut().map(|ren| GlTrack::start(gl, ren, r))
    }

    /// The draws timed since the last call, onto the GL track.
    pub fn record_gl(&mut self, t: &GlTrack, r: &Recorder, what: &str) {
        if let Some(ren) = self.renderer.as_mut() {
            t.record(ren, r, what);
        }
    }

    /// Ends the GL track (measures the GL clock's drift).
    pub fn finish_gl_track(&mut self, t: GlTrack, r: &Recorder) {
        let gl = self.ctx.gl();
        if let Some(ren) = self.renderer.as_mut() {
            t.finish(gl, ren, r);
        }
    }

    /// The pending GL error, if any (`glGetError`).
    pub fn error(&self) -> Option<u32> {
        let e = self.ctx.gl().get_error();
        (e != glow::NO_ERROR).then_some(e)
    }
}

impl Drop for Gfx {
    fn drop(&mut self) {
        let gl = self.ctx.gl();
        if let Some(mut r) = self.renderer.take() {
            r.destroy(gl);
        }
        if let Some(t) = self.target.take() {
            t.destroy(gl);
        }
        if let Some((r, _)) = self.readback.take() {
            r.destroy(gl);
        }
    }
}

/// What runs the frames of one (mode, N, round) visit.
pub enum Runner {
    /// The CPU backend (GL upload and draw).
    Cpu(Box<CpuBackend>),
    /// A CUDA interop backend (every mode but compute, draw and cpu), released with its GL side.
    Cuda(Box<CudaRunner>),
    /// The kernel alone.
    Compute(Box<ComputeRunner>),
    /// The fp64 kernel alone (`--precision f64`).
    ComputeF64(Box<ComputeRunnerF64>),
    /// The kernel alone, the bodies split over slices and GPUs.
    SplitCompute(Box<SlicedComputeRunner>),
    /// GL draw only, no simulation.
    Draw(StaticBackend),
}

impl Runner {
    /// Make this visit's CUDA context current (backends of different devices may alternate).
    ///
    /// # Errors
    /// `cuCtxSetCurrent` fails.
    pub fn make_current(&self) -> anyhow::Result<()> {
        match self {
            Runner::Cpu(_) | Runner::Draw(_) => Ok(()),
            Runner::Cuda(b) => b.backend.context().make_current().context("cuCtxSetCurrent"),
            Runner::Compute(c) => c.ctx.make_current().context("cuCtxSetCurrent"),
            Runner::ComputeF64(c) => c.ctx.make_current().context("cuCtxSetCurrent"),
            // Each slice makes its own context current.
            Runner::SplitCompute(_) => Ok(()),
        }
    }

    /// The driver table of a CUDA runner (for the timeline's tracer).
    pub fn api(&self) -> Option<Arc<interop::Api>> {
        match self {
            Runner::Cpu(_) | Runner::Draw(_) => None,
            Runner::Cuda(b) => b.backend.api(),
            Runner::Compute(c) => Some(Arc::clone(c.ctx.api())),
            Runner::ComputeF64(c) => Some(Arc::clone(c.ctx.api())),
            Runner::SplitCompute(c) => Some(Arc::clone(c.split.api())),
        }
    }

    /// Block size and bodies per thread of the kernel, for CUDA modes.
    pub fn launch_config(&self) -> Option<LaunchConfig> {
        match self {
            Runner::Cpu(_) | Runner::Draw(_) => None,
            Runner::Cuda(b) => Some(b.backend.launch_config()),
            Runner::Compute(c) => Some(c.launch_config()),
            Runner::ComputeF64(c) => Some(crate::cuda::integrator::Integrator::launch_config(&c.gpu)),
            Runner::SplitCompute(c) => Some(c.split.launch()),
        }
    }

    /// The GPU setup a CUDA runner runs in (`None` for cpu and draw): its slices' devices and
    /// gather path, or one slice on its context's device; `render_gpu_computes` as asked.
    pub fn setup(&self, render_gpu_computes: bool) -> Option<SetupFacts> {
        let split = match self {
            Runner::Cpu(_) | Runner::Draw(_) => return None,
            Runner::SplitCompute(c) => Some(c.split()),
            Runner::Cuda(b) => b.backend.split(),
            Runner::Compute(_) | Runner::ComputeF64(_) => None,
        };
        let (devices, gather) = match split {
            Some(s) => (s.devices(), s.gather().name().to_string()),
            None => {
                let ctx = match self {
                    Runner::Cuda(b) => b.backend.context(),
                    Runner::Compute(c) => &c.ctx,
                    Runner::ComputeF64(c) => &c.ctx,
                    _ => return None,
                };
                (vec![ctx.device().ordinal()], "none".to_string())
            }
        };
        let mut gpus = devices.clone();
        gpus.sort_unstable();
        gpus.dedup();
        Some(SetupFacts {
            gpus: gpus.len() as u32,
            slices: devices.len() as u32,
            render_gpu_computes,
            gather,
            devices: devices.iter().map(ToString::to_string).collect::<Vec<_>>().join(";"),
        })
    }

    /// True when the simulated state is still finite (no NaN or ∞ in positions or velocities):
    /// the divergence check after a visit's frames, outside the timed region. It reads the state
    /// back (and for the backends applies the closing half kick), so the visit's frames are over.
    ///
    /// # Errors
    /// The read-back fails; a GL mode without a GL context.
    pub fn finite(&mut self, gfx: Option<&mut Gfx>) -> anyhow::Result<bool> {
        let gfx = || gfx.context("reading the state back needs the GL context");
        Ok(match self {
            Runner::Draw(_) => true,
            Runner::Compute(c) => c.finite()?,
            Runner::ComputeF64(c) => c.finite()?,
            Runner::SplitCompute(c) => c.finite()?,
            Runner::Cpu(b) => gfx()?.state(b.as_mut())?.is_finite(),
            Runner::Cuda(b) => gfx()?.state(&mut b.backend)?.is_finite(),
        })
    }

    /// One frame.
    ///
    /// # Errors
    /// The backend's error; a GL mode without a GL context.
    pub fn frame(&mut self, gfx: Option<&mut Gfx>, steps: u32, time_span: f32) -> anyhow::Result<FrameSample> {
        match self {
            Runner::Compute(c) => c.frame(steps),
            Runner::ComputeF64(c) => c.frame(steps),
            Runner::SplitCompute(c) => c.frame(steps),
            Runner::Cpu(b) => {
                let mut s = gfx.context("the cpu modes need the GL context")?.frame(b.as_mut(), steps, time_span)?;
                s.tree = cpu_tree_sample(b);
                Ok(s)
            }
            Runner::Draw(b) => gfx.context("the draw mode needs the GL context")?.frame(b, steps, time_span),
            Runner::Cuda(b) => gfx.context("CUDA interop modes need the GL context")?.frame(&mut b.backend, steps, time_span),
        }
    }
}

/// A CUDA interop mode's backend and the GL context it was made in: dropping it releases the
/// backend's GL side first ([`SimBackend::release_gl`]: external storage's imported buffers and
/// semaphores, the density view's textures; the bench's context stays current on this thread
/// while [`Gfx`] lives, and runners are dropped before it), on every path out of the measuring
/// loop.
pub struct CudaRunner {
    /// The backend.
    pub backend: CudaBackend,
    current: CurrentContext,
}

impl CudaRunner {
    /// Wrap `backend`, made in the context `current` proves current.
    pub fn new(backend: CudaBackend, current: CurrentContext) -> Self {
        CudaRunner { backend, current }
    }
}

impl Drop for CudaRunner {
    fn drop(&mut self) {
        self.backend.release_gl(self.current.gl());
    }
}

/// Refuse initial conditions that do not give exactly `n` bodies.
///
/// # Errors
/// The counts differ (figure-eight and CSV files fix N).
pub fn check_count(init: &str, bodies: &Bodies, n: usize) -> anyhow::Result<()> {
    if bodies.len() != n {
        bail!(
            "--init {init} gives {} bodies, not the requested {n}; bench needs an initial condition that takes N \
             (plummer, galaxies, ball), or --bodies {} for this one",
            bodies.len(),
            bodies.len()
        );
    }
    Ok(())
}

/// A backend whose bodies never move: `bench --modes draw` times the GL part of a frame alone.
#[derive(Debug)]
pub struct StaticBackend {
    bodies: Bodies,
    params: sim::PhysParams,
}

impl StaticBackend {
    /// Holds `bodies` (already in VBO 0).
    pub fn new(bodies: &Bodies) -> Self {
        StaticBackend { bodies: bodies.clone(), params: sim::PhysParams::default() }
    }
}

impl SimBackend for StaticBackend {
    fn describe(&self) -> crate::backend::BackendInfo {
        crate::backend::BackendInfo {
            label: "static (draw only)".into(),
            n: self.bodies.len(),
            solver: sim::tree::Solver::Direct,
            rate: crate::backend::NominalRate { per_s: f64::INFINITY, basis: crate::backend::RateBasis::Nothing },
        }
    }
    fn simulate(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos, _steps: u32) -> anyhow::Result<SimTimings> {
        Ok(SimTimings::default())
    }
    fn shown(&self) -> crate::backend::Shown {
        crate::backend::Shown { front: 0, buffers: None }
    }
    fn set_params(&mut self, _gl: Gl<'_>, params: sim::PhysParams) {
        self.params = params;
    }
    fn state(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos, with: Readout) -> anyhow::Result<State> {
        let diagnostics = (with == Readout::WithDiagnostics).then(|| sim::diagnostics::diagnostics(&self.bodies, self.params));
        Ok(State { bodies: self.bodies.clone(), diagnostics })
    }
}
