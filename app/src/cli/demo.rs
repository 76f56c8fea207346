//! The demo's options (the command without a subcommand), grouped as `--help` shows them.

use std::path::PathBuf;

use clap::Args;

use super::gpus::GpuArgs;
use super::sim::SimArgs;
use super::values::{
    parse_count_u32, parse_count_u64, parse_count_usize, parse_f32, parse_theta, parse_whole_u64, Present, SolverChoice, StepsPerFrame, YesNo,
    DEMO_BODIES, DEMO_INIT,
};
use crate::backend::cuda::CudaOptions;
use crate::backend::select::{BackendChoice, BackendConfig};
use crate::backend::InteropSettings;
use crate::cuda::settings::{CtxSched, DensityPath, ExternalSync, GpuCount, InteropMode, Precision, ResourceFlags, SliceOptions, StreamKind, View};

/// Options of the demo.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Physics options.
    #[command(flatten)]
    pub sim: SimArgs,
    /// Number of bodies N [default: 16384; CPU backend: 4096].
    ///
    /// Ignored for `figure-eight` and state files, which fix N. The CPU backend's default keeps
    /// a window at 20 frames/s or more on 2 cores.
    #[arg(long, value_parser = parse_count_usize, allow_negative_numbers = true, help_heading = "Scene")]
    pub bodies: Option<usize>,
    /// Simulation backend (auto: CUDA where it works, else the CPU).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto, help_heading = "Simulation")]
    pub backend: BackendChoice,
    /// Precision of the state and the forces (f64: CUDA only).
    ///
    /// f64 keeps double4 state in CUDA buffers, steps it with `nbody_step_f64`, and each frame
    /// one conversion kernel writes the float4 positions GL draws. With `--backend auto` a
    /// missing GPU is then an error, not the fp32 CPU backend; no `--step-mode`; block sizes up
    /// to 256.
    #[arg(long, value_enum, default_value_t = Precision::F32, help_heading = "Simulation")]
    pub precision: Precision,
    /// Force solver: the all-pairs sum, the Barnes–Hut tree (fp32), or auto: the tree from the N
    /// where it is faster (by θ: on the GPU 32768 at θ ≥ 0.75, 49152 at θ ≥ 0.5, 131072 below;
    /// on the CPU 16384, 65536, 262144).
    ///
    /// `tree` builds a tree each step from the bodies' Morton keys (monopole + quadrupole
    /// moments) and opens a cell when its side over the distance to its centre of mass is ≥
    /// `--theta`. On the CUDA backend the whole tree runs on the GPU (a radix tree walked by
    /// groups of 32 bodies; not with --precision f64 or a split over slices); on the CPU backend
    /// an octree walked per body.
    #[arg(long, value_enum, default_value_t = SolverChoice::Direct, help_heading = "Simulation")]
    pub solver: SolverChoice,
    /// Opening angle θ of `--solver tree` (0 to 2; 0 opens every cell: the direct sum).
    ///
    /// Smaller is more accurate and slower; `nbody-interop accuracy` measures the force error
    /// per θ.
    #[arg(long, value_name = "θ", default_value_t = sim::tree::DEFAULT_THETA, value_parser = parse_theta, allow_negative_numbers = true, help_heading = "Simulation")]
    pub theta: f32,
    /// Start even when one step is estimated to take over 10 s.
    ///
    /// Without it such a run is refused with the estimate (N² interactions for the direct sum,
    /// the tree's estimated terms for the tree, at the backend's nominal rate).
    #[arg(long = "allow-slow", help_heading = "Simulation", hide_short_help = true)]
    pub allow_slow: bool,
    /// Frame rate that `--steps-per-frame auto` fills, frames/s [default: the display's refresh, else 60].
    #[arg(long = "target-fps", allow_negative_numbers = true, help_heading = "Simulation", hide_short_help = true)]
    pub target_fps: Option<f64>,
    /// How CUDA's results reach the GL vertex buffers.
    #[arg(long, value_enum, default_value_t = InteropMode::Map, help_heading = "Interop")]
    pub interop: InteropMode,
    /// Flags of cuGraphicsGLRegisterBuffer (`--interop map`): only none.
    ///
    /// A registration lasts the buffer's life, and each ping-pong buffer is read by the kernel
    /// in one frame and written in the next, so `read-only` ("CUDA will not write") and
    /// `write-discard` ("CUDA will not read") are refused; `--map-flags` gives the per-frame
    /// roles.
    #[arg(long = "register-flags", value_enum, default_value_t = ResourceFlags::None, help_heading = "Interop", hide_short_help = true)]
    pub register_flags: ResourceFlags,
    /// Map flags by buffer role (cuGraphicsResourceSetMapFlags).
    ///
    /// Set before each map: `read-only` marks the buffer the kernel only reads (front)
    /// CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY, `write-discard` the one it only writes (back)
    /// CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD; the other buffer gets none. Only with
    /// `--steps-per-frame 1`: with more, both buffers are read and written in a frame.
    #[arg(long = "map-flags", value_enum, default_value_t = ResourceFlags::None, help_heading = "Interop")]
    pub map_flags: ResourceFlags,
    /// Stream the frame's CUDA work goes to.
    #[arg(long, value_enum, default_value_t = StreamKind::Legacy, help_heading = "Interop")]
    pub stream: StreamKind,
    /// Priority of a created stream (lower is higher; cuCtxGetStreamPriorityRange).
    #[arg(long = "stream-priority", default_value_t = 0, allow_hyphen_values = true, help_heading = "Interop", hide_short_help = true)]
    pub stream_priority: i32,
    /// How `--interop external` orders CUDA's writes and GL's reads: `host` (a GL fence and a
    /// CUDA event waited on by the CPU), `semaphore` (two Vulkan-made semaphores imported into
    /// CUDA and GL: GPU-side, no host wait) or `auto` (semaphore where Vulkan is there).
    #[arg(long = "external-sync", value_enum, default_value_t = ExternalSync::Auto, help_heading = "Interop", hide_short_help = true)]
    pub external_sync: ExternalSync,
    /// Scheduling flag of the CUDA context (how the host waits for the GPU).
    #[arg(long = "ctx-sched", value_enum, default_value_t = CtxSched::Auto, help_heading = "Interop", hide_short_help = true)]
    pub ctx_sched: CtxSched,
    /// Run without a window: an EGL device, rendering into an FBO.
    #[arg(long, help_heading = "Display")]
    pub headless: bool,
    /// Window or framebuffer width, physical pixels.
    #[arg(long, default_value_t = 1280, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Display")]
    pub width: u32,
    /// Window or framebuffer height, physical pixels.
    #[arg(long, default_value_t = 800, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Display")]
    pub height: u32,
    /// How the window shows frames: `native` (the window's own GL context), `copy` (frames made
    /// on the GPU's EGL device, read back and shown through the window system's shared memory:
    /// for GPUs without an NVIDIA-driven display, such as servers under VNC, Xvfb or X forwarding)
    /// or `auto` (native where the window's GL is on the CUDA device, else copy).
    #[arg(long, value_enum, default_value_t = Present::Auto, help_heading = "Display", hide_short_help = true)]
    pub present: Present,
    /// Disable vsync (windowed runs).
    #[arg(long = "no-vsync", help_heading = "Display", hide_short_help = true)]
    pub no_vsync: bool,
    /// Largest sprite diameter, pixels at 1 pixel per point (smaller draw faster at large N).
    #[arg(long = "max-sprite-px", default_value_t = 64.0, value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Display", hide_short_help = true)]
    pub max_sprite_px: f32,
    /// What to show: `points` (each body a sprite) or `density` (the projected mass density,
    /// made by CUDA in GL textures through the image workflow; CUDA backend). Key v toggles.
    #[arg(long, value_enum, default_value_t = View::Points, help_heading = "Display")]
    pub view: View,
    /// How the density view's float image is written: `surface` (a kernel, through a surface
    /// object) or `copy` (cuMemcpy2D from linear memory).
    #[arg(long = "density-path", value_enum, default_value_t = DensityPath::Surface, help_heading = "Display", hide_short_help = true)]
    pub density_path: DensityPath,
    /// Draw trails: each body's positions of the last 12 frames, fading (key t toggles).
    #[arg(long, help_heading = "Display", hide_short_help = true)]
    pub trails: bool,
    /// Zoom of the overlay [default: 1 up to 1080 logical pixels high, 2 at 2160].
    ///
    /// egui's zoom factor, on top of the window system's HiDPI scale; Ctrl +/- zoom in a
    /// running window too.
    #[arg(long = "ui-scale", value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Display", hide_short_help = true)]
    pub ui_scale: Option<f32>,
    /// Hide the egui overlay.
    #[arg(long = "no-overlay", help_heading = "Display", hide_short_help = true)]
    pub no_overlay: bool,
    /// Stop after this many frames.
    #[arg(long, value_parser = parse_count_u64, allow_negative_numbers = true, help_heading = "Output")]
    pub frames: Option<u64>,
    /// Save the last frame, overlay included, to this PNG file.
    #[arg(long, help_heading = "Output")]
    pub screenshot: Option<PathBuf>,
    /// Write the final state to this file (CSV, or tipsy for .tipsy, .std, .bin).
    ///
    /// Full precision: CSV `x,y,z,vx,vy,vz,mass`, or a little-endian tipsy snapshot.
    #[arg(long = "save-state", help_heading = "Output")]
    pub save_state: Option<PathBuf>,
    /// Compute energy and momentum every this many frames (0: on demand only).
    #[arg(long = "diagnostics-interval", default_value_t = 0, value_parser = parse_whole_u64, allow_negative_numbers = true, help_heading = "Output", hide_short_help = true)]
    pub diagnostics_interval: u64,
    /// Write the run's summary to this JSON file: frames, steps, each stage's time, the route
    /// and the backend, with the run's provenance (commit, command line, machine, GPU).
    #[arg(long, value_name = "FILE.json", help_heading = "Output")]
    pub summary: Option<PathBuf>,
    /// Write every driver call to this file (JSON lines, with the frame index).
    #[arg(long, help_heading = "Output")]
    pub trace: Option<PathBuf>,
    /// Write a timeline of the run (Trace Event Format JSON, for ui.perfetto.dev).
    ///
    /// Host calls, the CUDA stream's map/kernel/unmap, GL draws, frame markers and counters;
    /// CUPTI's kernel and memcpy records where libcupti loads.
    #[arg(long, help_heading = "Output")]
    pub timeline: Option<PathBuf>,
    /// The GPUs that compute (one setup: one value each).
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Open the overlay's Workflow panel (the last frame's driver calls) from the start.
    #[arg(long, help_heading = "Teaching")]
    pub workflow: bool,
    /// Start in step mode: the frame pauses between the workflow's steps (CUDA map, fp32).
    ///
    /// Map, get pointers, launch, unmap and draw, one at a time. Headless runs take one step per
    /// frame.
    #[arg(long = "step-mode", help_heading = "Teaching")]
    pub step_mode: bool,
    /// N where `--bodies` is not given, set by the demo for the CPU backend
    /// ([`CPU_DEMO_BODIES`](super::values::CPU_DEMO_BODIES)); `None`: [`DEMO_BODIES`]. Kept apart
    /// from `bodies`, which stays what the command line says (scene keys use it, `Scene::load_scene`).
    #[arg(skip)]
    pub default_bodies: Option<usize>,
    /// The long names of the options typed (`--interop`, …), defaults included, for the notice of
    /// options that do not apply. Filled by `Cli::parse_command_line`; empty when parsed otherwise.
    #[arg(skip)]
    pub typed: Vec<String>,
}

impl DemoArgs {
    /// The initial condition of the demo: `--init`, else [`DEMO_INIT`].
    pub fn init(&self) -> &str {
        self.sim.init_or(DEMO_INIT)
    }

    /// N of the demo: `--bodies`, else the default (`default_bodies`, which the demo's entry sets
    /// to [`CPU_DEMO_BODIES`](super::values::CPU_DEMO_BODIES) where the CPU backend runs), else
    /// [`DEMO_BODIES`].
    pub fn n_bodies(&self) -> usize {
        self.bodies.or(self.default_bodies).unwrap_or(DEMO_BODIES)
    }

    /// The step count the demo starts with: `--steps-per-frame`, else `auto` in a window and 1
    /// headless (headless runs stay reproducible unless asked otherwise).
    pub fn steps_per_frame(&self) -> StepsPerFrame {
        self.sim.steps_per_frame.unwrap_or(if self.headless { StepsPerFrame::Fixed(1) } else { StepsPerFrame::Auto })
    }

    /// The interop settings the command line asks for.
    pub fn interop_settings(&self) -> InteropSettings {
        InteropSettings {
            interop: self.interop,
            register_flags: self.register_flags,
            map_flags: self.map_flags,
            stream: self.stream,
            stream_priority: self.stream_priority,
            block_size: self.sim.block_size,
        }
    }

    /// What the backend is made from, as the command line asks for it.
    pub fn backend_config(&self) -> BackendConfig {
        BackendConfig {
            choice: self.backend,
            solver: self.solver.with_theta(self.theta),
            cuda: CudaOptions {
                settings: self.interop_settings(),
                separate_maps: false,
                ctx_sched: self.ctx_sched,
                kernel: self.sim.kernel.clone(),
                step_kernel: self.sim.step_kernel,
                precision: self.precision,
                split: Some(self.split_options()),
                external_sync: self.external_sync,
            },
            typed: self.typed.clone(),
        }
    }

    /// The split over slices and GPUs the command line asks for (the first value of each list:
    /// the demo's checks refuse more than one, [`GpuArgs::lists`]).
    pub fn split_options(&self) -> SliceOptions {
        let g = &self.gpu;
        SliceOptions {
            gpus: g.gpus.first().copied().unwrap_or(GpuCount::Count(1)),
            slices_per_gpu: g.slices_per_gpu.first().copied().unwrap_or(1),
            gather: g.gather,
            render_gpu_computes: g.render_gpu_computes.first() != Some(&YesNo::No),
        }
    }
}
