//! The simulation side of a frame, as the demo and `bench` see it.
//!
//! A [`SimBackend`] advances the bodies and leaves the newest positions in one of the two GL
//! position vertex buffers ([`PositionVbos`]); the renderer then draws that buffer. Two backends:
//! [`cpu::CpuBackend`] (compute on the CPU, upload with `glBufferSubData`) and
//! [`cuda::CudaBackend`], whose storage is one of `map` (registered GL buffers mapped every
//! frame), `copy` (device buffer → pinned host → `glBufferSubData`) or `external` (CUDA
//! allocations imported into GL, drawn from instead of the VBOs: [`Shown::buffers`]).
//! [`select`] is the only place that builds or rebuilds a backend; [`step`] is the pure state
//! machine of step mode.
//!
//! Teardown order: a backend holding CUDA graphics resources must be dropped *before* the GL
//! buffers it registered are deleted and before the GL context goes. The owner of both (the demo's
//! frame state) therefore declares the backend field before the renderer field. A backend that
//! owns GL objects (external storage) deletes them in [`SimBackend::release_gl`], which the owner
//! calls with the GL context current before dropping it.

pub mod cpu;
pub mod cuda;
pub mod select;
pub mod step;
pub use cuda::STEP_MODE_SPLIT;

use serde::Serialize;

use crate::cuda::settings::{DensityPath, InteropMode, ResourceFlags, StreamKind};
pub use crate::cuda::slices_facts::SlicesFacts;
pub use crate::gfx::buffers::PositionVbos;
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;
pub use sim::partial::StepProgress;
use sim::{Bodies, Diagnostics, PhysParams};

/// Timings of the simulate step of one frame, in milliseconds.
///
/// GPU times come from CUDA events recorded on the frame's stream around each step; `None` where
/// the backend has no such step. The external backend has no map or unmap; it reports its two
/// host waits in their places: `map_ms` = the GL-fence wait before the launches (GL's last draw
/// done), `unmap_ms` = the CUDA-event wait after them (kernel done), both host time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SimTimings {
    /// Host time of the whole simulate call (ms).
    pub host_ms: f64,
    /// CUDA-event time of `cuGraphicsMapResources` (ms); external: host wait on the GL fence (ms).
    pub map_ms: Option<f64>,
    /// CUDA-event time of the kernel launches of this frame (ms), or CPU compute time for the CPU backend.
    /// Split over slices: the slowest slice's span from its first step's kernel to its last
    /// one's end (its own stream's events; the backend's stream only waits and copies).
    pub kernel_ms: Option<f64>,
    /// CUDA-event time of `cuGraphicsUnmapResources` (ms); external: host wait on the CUDA event (ms).
    pub unmap_ms: Option<f64>,
    /// Time to bring positions to GL in the copy and CPU paths (device → host copy + `glBufferSubData`), ms.
    pub upload_ms: Option<f64>,
    /// A run split over slices (`--gpus`, `--slices-per-gpu`): the slowest slice's gather time of
    /// the frame's last step (CUDA events on the slices' streams), ms; `None` otherwise or while
    /// not yet known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gather_ms: Option<f64>,
    /// `Some(k)` when the frame completed `k` whole steps of those asked: an interrupt stopped
    /// the next ([`LongSteps::set_interrupt`]), or a long step runs in parts over frames
    /// ([`LongSteps::set_in_parts`]; then `parts` is set); `None` when all ran.
    pub stopped_after: Option<u32>,
    /// Set when the frame worked on a long step in parts over frames: its launches (CPU: parts)
    /// done so far, of all. While [`StepProgress::in_progress`] the frame ended with the step
    /// unfinished: the positions shown are still those of before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<StepProgress>,
    /// The host instant at which the frame's stream reached its first timing event (the start
    /// of the map in `map`, of the kernel otherwise), placed by the backend's
    /// [`crate::cuda::clock::GpuClock`]; the spans above follow it back to back. `None` without
    /// CUDA or without steps.
    #[serde(skip)]
    pub stream_start: Option<std::time::Instant>,
    /// The alignment error of that placement measured this frame, µs
    /// ([`crate::cuda::clock::GpuClock::residual_us`]).
    pub clock_residual_us: Option<f64>,
}

/// What [`CudaSide::apply_settings`] did with new settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsChange {
    /// The backend applied them itself (flags, block size).
    Applied,
    /// They need a new backend (another storage, stream or table): [`select::apply_settings`]
    /// makes it from the current state. The backend is unchanged.
    Rebuild,
}

/// Interop settings that can change while the demo runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InteropSettings {
    /// Map, copy or external.
    pub interop: InteropMode,
    /// Flags of `cuGraphicsGLRegisterBuffer`.
    pub register_flags: ResourceFlags,
    /// Flags of `cuGraphicsResourceSetMapFlags`.
    pub map_flags: ResourceFlags,
    /// Stream kind.
    pub stream: StreamKind,
    /// Priority of a created stream.
    pub stream_priority: i32,
    /// Threads per block of the kernel.
    pub block_size: u32,
}

/// What the overlay's device panel shows about a CUDA backend: typed facts, formatted by
/// `ui::overlay`.
#[derive(Debug, Clone)]
pub struct DevicePanel {
    /// The device's attributes.
    pub device: interop::safe::DeviceInfo,
    /// `cuDriverGetVersion`.
    pub driver_version: i32,
    /// The default-stream semantics the table was resolved with.
    pub semantics: interop::StreamSemantics,
    /// The context: primary or own, and its scheduling flag.
    pub context: (interop::safe::ContextKind, crate::cuda::settings::CtxSched),
    /// The stream asked for and its priority.
    pub stream: (crate::cuda::settings::StreamKind, i32),
    /// How positions reach GL.
    pub interop: InteropFacts,
    /// The bodies over slices and GPUs (`--gpus`, `--slices-per-gpu`), where they are.
    pub slices: Option<SlicesFacts>,
    /// The state's precision.
    pub precision: crate::cuda::settings::Precision,
    /// The kernel source and launch (`kernels.source() · launch`).
    pub kernel: String,
    /// GL vendor and renderer.
    pub gl: (String, String),
    /// The step kernel's registers and local memory, where the driver gave them.
    pub kernel_attributes: Option<interop::safe::FunctionAttributes>,
}

/// How a CUDA backend's positions reach GL, for the device panel.
#[derive(Debug, Clone)]
pub enum InteropFacts {
    /// Registered buffers (map, copy): the register and map flags.
    Flags {
        /// `cuGraphicsGLRegisterBuffer`'s flags.
        register: crate::cuda::settings::ResourceFlags,
        /// `cuGraphicsResourceSetMapFlags`' flags.
        map: crate::cuda::settings::ResourceFlags,
    },
    /// External memory: each buffer's size, whether dedicated, and the Vulkan device whose
    /// semaphores order CUDA and GL (`None`: host waits).
    External {
        /// MiB of each buffer.
        mib_each: usize,
        /// Imported as a dedicated allocation.
        dedicated: bool,
        /// The Vulkan device of the semaphores, with `--external-sync semaphore`.
        semaphores: Option<String>,
    },
}

/// A backend's nominal rate of pair interactions, and what the figure rests on (formatted for
/// messages by `ui::rows`).
#[derive(Debug, Clone, PartialEq)]
pub struct NominalRate {
    /// Pair interactions per second.
    pub per_s: f64,
    /// What the figure rests on.
    pub basis: RateBasis,
}

/// What a [`NominalRate`] rests on.
#[derive(Debug, Clone, PartialEq)]
pub enum RateBasis {
    /// The CPU backend: a measured rate per thread × `threads`; `precision` once the backend
    /// exists.
    Cpu {
        /// Worker threads.
        threads: usize,
        /// `f32` or `f64`, where known.
        precision: Option<&'static str>,
    },
    /// An opened GPU: the H200's measured rate scaled by SMs × clock (× `f64_fraction` for the
    /// fp64 kernel).
    Gpu {
        /// The device's name.
        name: String,
        /// Streaming multiprocessors.
        sms: i32,
        /// SM clock (MHz).
        clock_mhz: i32,
        /// The fp64 kernel's fraction of the fp32 rate, with `--precision f64`.
        f64_fraction: Option<f64>,
    },
    /// A GPU not opened yet (the checks before the backend exists): an H200-class GPU.
    GpuClass,
    /// A backend that simulates nothing (the bench's draw mode, the scene's test backend).
    Nothing,
}

/// What a backend is, as [`SimBackend::describe`] tells it: for the overlay, messages, the
/// summary and step-time estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendInfo {
    /// Short label for the overlay, e.g. `"CUDA map f32 · NVIDIA H200"` or
    /// `"CPU f32 (rayon, 16 threads)"`.
    pub label: String,
    /// Number of bodies N.
    pub n: usize,
    /// The force solver the steps use (`auto` resolved to the one it picked).
    pub solver: sim::tree::Solver,
    /// The all-pairs rate to expect from this backend and what it rests on (for step-time
    /// estimates: refusals, the notice before a long closing step).
    pub rate: NominalRate,
}

/// What the renderer draws after a frame, as [`SimBackend::shown`] tells it.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// Index (0 or 1) of the buffer that holds the newest positions.
    pub front: usize,
    /// The buffers the renderer must draw instead of its own VBOs (the external backend's
    /// imported buffers, `[N][4]` f32 each); `None`: draw the renderer's VBOs.
    pub buffers: Option<PositionVbos>,
}

/// What [`SimBackend::state`] reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readout {
    /// The bodies alone.
    Bodies,
    /// The bodies and their energy and momentum ([`Diagnostics`]; on the GPU for CUDA backends).
    WithDiagnostics,
}

/// The state read back by [`SimBackend::state`].
#[derive(Debug, Clone)]
pub struct State {
    /// The bodies with synchronised velocities (see [`sim`]): positions `[N][4]` f32 (xyz +
    /// mass), velocities `[N][4]` f32.
    pub bodies: Bodies,
    /// Energy and momentum of `bodies`: `Some` when asked for ([`Readout::WithDiagnostics`]),
    /// `None` otherwise.
    pub diagnostics: Option<Diagnostics>,
}

/// What only some backends can do, as [`SimBackend::sides`] hands it out: long steps
/// ([`LongSteps`]) and a CUDA side ([`CudaSide`]), one, both or neither.
pub enum Sides<'a> {
    /// Neither (the bench's draw mode): every step runs whole and to its end; no CUDA.
    None,
    /// Long steps without a CUDA side (the CPU backend).
    LongSteps(&'a mut dyn LongSteps),
    /// A CUDA side without long steps (the scene's test backend).
    Cuda(&'a mut dyn CudaSide),
    /// Both (the CUDA backend).
    Both(&'a mut dyn CudaLongSteps),
}

/// A backend with both [`LongSteps`] and a [`CudaSide`], as [`Sides::Both`] holds it: every type
/// with both is one.
pub trait CudaLongSteps: LongSteps + CudaSide {}

impl<T: LongSteps + CudaSide> CudaLongSteps for T {}

impl<'a> Sides<'a> {
    /// Stopping long steps and running them in parts, where the backend can ([`LongSteps`]);
    /// `None`: every step runs whole and to its end.
    pub fn long_steps(self) -> Option<&'a mut dyn LongSteps> {
        match self {
            Sides::LongSteps(l) => Some(l),
            Sides::Both(b) => Some(b),
            Sides::None | Sides::Cuda(_) => None,
        }
    }

    /// The CUDA side of a CUDA backend ([`CudaSide`]); `None` for the CPU backend.
    pub fn cuda(self) -> Option<&'a mut dyn CudaSide> {
        match self {
            Sides::Cuda(c) => Some(c),
            Sides::Both(b) => Some(b),
            Sides::None | Sides::LongSteps(_) => None,
        }
    }
}

/// One simulation backend bound to the two GL position buffers: what every backend does — its
/// description, the step, the positions for drawing, the state read back. A frame is
/// [`SimBackend::simulate`], then [`SimBackend::before_draw`] → the draw of
/// [`SimBackend::shown`] → [`SimBackend::after_draw`]; [`SimBackend::release_gl`] comes once, at
/// the end. What only some can do is asked for through [`SimBackend::sides`] ([`LongSteps`]:
/// long steps stopped and run in parts; [`CudaSide`]: interop settings, the device and entry-point
/// panels, the context, step mode).
pub trait SimBackend {
    /// What the backend is: its label, N, solver and nominal rate. Builds the label (a
    /// `format!`) on every call.
    fn describe(&self) -> BackendInfo;
    /// Advance `steps` leapfrog steps; afterwards `vbos.buffers[self.shown().front]` holds the
    /// newest positions. Needs the GL context current on this thread.
    ///
    /// # Errors
    /// A CUDA or GL failure, with the failing call named.
    fn simulate(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings>;
    /// Change dt, ε or G for the following steps (a change of dt first finishes the half step
    /// with the old dt, which may launch and so needs the GL context: `gl`).
    fn set_params(&mut self, gl: Gl<'_>, params: PhysParams);
    /// Steps by `solver` from the next frame (the overlay's solver and θ); a step in parts over
    /// frames is abandoned first.
    ///
    /// # Errors
    /// The backend has no such solver (fp64, a split, a backend without one); the tree does not
    /// fit. The backend keeps its solver then.
    fn set_solver(&mut self, _solver: sim::tree::Solver) -> anyhow::Result<()> {
        anyhow::bail!("this backend has one solver, the direct sum")
    }
    /// What the renderer draws: the index of the buffer with the newest positions, and the
    /// buffers to draw it from where they are the backend's own (the external backend's
    /// imported buffers; otherwise the renderer's VBOs).
    fn shown(&self) -> Shown;
    /// Called right before GL draws the backend's buffers ([`Shown::buffers`]): the external
    /// backend with GPU-side ordering makes GL wait there for the last step's semaphore.
    /// Default: nothing.
    fn before_draw(&mut self, _gl: Gl<'_>) {}
    /// Called right after the body draw (from [`Shown::buffers`] or the VBOs) was issued,
    /// context current. Work that must wait for GL is best asked for here, while GL has work
    /// queued anyway, rather than at the start of the next frame on an idle GL context, which
    /// costs the GPU a switch into the GL context and back (`nbody-interop switch`). The
    /// external backend puts the GL fence that the next launch waits on here. Contract: GL
    /// commands that read the backend's buffers after this call are the caller's to wait for
    /// before the next `simulate`. Default: nothing.
    fn after_draw(&mut self, _gl: Gl<'_>) {}
    /// Delete the GL objects the backend owns; the owner calls it with the GL context current
    /// before dropping the backend (GL deletions need the context, `Drop` does not get it).
    /// Afterwards the backend can only be dropped. Default: nothing to delete.
    fn release_gl(&mut self, _gl: Gl<'_>) {}
    /// The current state with synchronised velocities (see [`sim`]), and with
    /// [`Readout::WithDiagnostics`] its energy and momentum (on the GPU for CUDA backends; the
    /// CPU backend computes them only then). A step in parts over frames is finished first.
    ///
    /// # Errors
    /// A CUDA or GL failure; a backend that holds no state (the scene's test backend).
    fn state(&mut self, gl: Gl<'_>, vbos: &PositionVbos, with: Readout) -> anyhow::Result<State>;
    /// What only some backends can do ([`Sides`]): long steps, a CUDA side, both or neither.
    /// Default: neither.
    fn sides(&mut self) -> Sides<'_> {
        Sides::None
    }
}

/// Long steps that an interrupt stops and that a window runs in parts over frames (see
/// [`sim::partial`]): the CPU and the CUDA backends have them.
pub trait LongSteps {
    /// Stop a long step when `requested()` says so (Ctrl-C, SIGTERM): the CPU backend looks
    /// between its tasks, the CUDA backend splits a step estimated over half a second into
    /// launches and looks between them. A stopped step leaves the state as before it, and
    /// `simulate` returns early.
    fn set_interrupt(&mut self, requested: fn() -> bool);
    /// Run a long step in parts over frames (the windowed demo; see [`sim::partial`]): a step
    /// split into parts (CUDA: launches of about `LAUNCH_S`; needs [`LongSteps::set_interrupt`],
    /// which gives the split) runs one part per `simulate` and returns, so the window system's
    /// events are handled between them; the positions flip only after the last part, so the
    /// front buffer keeps the complete positions of before the step. Off (the default, and
    /// headless runs and the bench): every `simulate` runs whole steps.
    fn set_in_parts(&mut self, on: bool);
    /// The step in parts over frames that is in progress: parts done, of all (`None`: none).
    fn step_in_progress(&self) -> Option<StepProgress>;
    /// Abandons the step in progress, if any: the state goes back to the one before it
    /// (velocities restored, positions never written). The run's end (`--save-state`) calls
    /// it; the backends abandon it themselves before a change of parameters or settings and
    /// finish it before reading the state back ([`SimBackend::state`]).
    ///
    /// # Errors
    /// A CUDA failure while restoring the velocities.
    fn abandon_step(&mut self) -> anyhow::Result<()>;
    /// True when the velocities are synchronised with the positions (no step since the start or
    /// the last synchronisation, or the only one was abandoned): [`SimBackend::state`] then needs
    /// no closing half kick, so no force evaluation.
    fn synchronized(&self) -> bool;
}

/// Why step mode cannot run without a CUDA backend ([`CudaSide::step_mode_unavailable`] of none).
pub const STEP_MODE_NEEDS_CUDA: &str = "this run uses the CPU backend";

/// What a CUDA backend has beside the step: its interop settings, the device and entry-point
/// panels, the context and driver table, and step mode (see [`step`]).
pub trait CudaSide {
    /// Settings in force (`None` only for a backend that has none to show).
    fn settings(&self) -> Option<InteropSettings>;
    /// Apply changed settings that the backend can change itself (re-register, block size), or
    /// say that they need a new backend ([`SettingsChange::Rebuild`]).
    ///
    /// # Errors
    /// A CUDA failure or an invalid value; the backend keeps its old settings then.
    fn apply_settings(&mut self, gl: Gl<'_>, vbos: &PositionVbos, s: InteropSettings) -> anyhow::Result<SettingsChange>;
    /// What the overlay's device panel shows (`None`: no device in use).
    fn device_panel(&self) -> Option<DevicePanel>;
    /// Rows of the entry-point report (function, version, flags, status, remedy).
    fn entry_points(&self) -> Vec<interop::driver::EntryReport>;
    /// The CUDA context the backend runs in (`None` only for a test double without one); the
    /// mistake lab runs its cases on it.
    fn cuda_context(&self) -> Option<std::sync::Arc<interop::Context>>;
    /// The driver's entry-point table, where the API trace installs its tracer: the context's.
    fn api(&self) -> Option<std::sync::Arc<interop::Api>> {
        self.cuda_context().map(|c| c.api().clone())
    }
    /// Why step mode cannot run with this backend (`None`: it can; see [`step`]).
    fn step_mode_unavailable(&self) -> Option<String>;
    /// Turns step mode on (the next frames pause between their steps) or off (a frame in
    /// progress is finished: its buffers are unmapped).
    ///
    /// # Errors
    /// This backend cannot run step mode ([`CudaSide::step_mode_unavailable`]); a CUDA failure.
    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()>;
    /// Takes the next step of the step-mode frame (`steps` leapfrog steps at the launch step)
    /// and returns which step it took.
    ///
    /// # Errors
    /// Not in step mode; the step's driver call failed.
    fn next_step(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<step::WorkflowStep>;
    /// The step-mode state (None when not in step mode).
    fn step_view(&self) -> Option<step::StepView>;
    /// Draws the density view of the shown positions into `target` (`--view density`): the
    /// bodies projected by `view_proj` (GL clip space) and splatted into an image of the
    /// target's size through the image workflow on the backend's stream
    /// ([`crate::cuda::density`]), then drawn full-screen. The view is made on the first call
    /// and remade when the target's size or `path` changes.
    ///
    /// # Errors
    /// This backend has no density view, or a CUDA or GL failure, named.
    fn draw_density(&mut self, _gl: Gl<'_>, _target: &RenderTarget, _view_proj: glam::Mat4, _path: DensityPath) -> anyhow::Result<()> {
        anyhow::bail!("this backend has no density view")
    }
    /// GPU time of the last density pass whose events have completed, ms (map → splat → store →
    /// tone map; CUDA events).
    fn density_ms(&mut self) -> Option<f64> {
        None
    }
    /// Unregisters and deletes the density view (`--view points` again), if there is one.
    fn drop_density(&mut self, _gl: Gl<'_>) {}
    /// The density view's CUDA-stream spans recorded since the last call (a whole pass's map,
    /// splat, store, tone map and unmap; in step mode the last step's work), placed on the host
    /// clock for the timeline; waits for their last event. `None`: nothing new.
    fn take_density_spans(&mut self) -> Option<crate::cuda::density::StreamSpans> {
        None
    }
}
