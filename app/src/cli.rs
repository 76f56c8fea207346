//! Command-line interface (clap). One place lists every option of the demo, `bench` and `info`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::backend::cuda::CudaOptions;
pub use crate::backend::select::BackendChoice;
use crate::backend::select::BackendConfig;
use crate::backend::InteropSettings;
pub use crate::cuda::settings::{CtxSched, GatherChoice, GpuCount, InteropMode, Precision, ResourceFlags, SplitOptions, StreamKind};

/// `nbody-interop`: CUDA–OpenGL interop N-body demo, benchmark and teaching tool.
#[derive(Debug, Parser)]
#[command(name = "nbody-interop", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do; without a subcommand the demo runs.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the demo (without a subcommand).
    #[command(flatten)]
    pub demo: DemoArgs,
}

impl Cli {
    /// Parses `std::env::args` (clap prints the error or help and exits on bad input) and
    /// records which demo options were typed ([`DemoArgs::typed`]).
    pub fn parse_command_line() -> Self {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let cmd = Self::command();
        let matches = cmd.clone().get_matches();
        let mut cli = Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        cli.demo.typed = typed_options(&cmd, &matches);
        cli
    }
}

/// The long names (with `--`) of `cmd`'s options whose value came from the command line.
fn typed_options(cmd: &clap::Command, matches: &clap::ArgMatches) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CUDA driver version, each device's attributes and the entry-point report.
    Info(InfoArgs),
    /// Time whole interop frames (or the kernel alone) per mode and body count.
    Bench(BenchArgs),
    /// Mistake lab: make one classic interop or entry-point mistake and show the driver's answer.
    Lab(LabArgs),
    /// Time the CUDA↔GL context switch on its own: tiny CUDA and GL work, alone and alternating.
    Switch(SwitchArgs),
    /// Time the step with the bodies split over 1, 2, 4, … GPUs and slices per GPU (NCCL or
    /// peer-copy gather): per-step time, gather time, interactions/s and the scaling against one GPU.
    Scale(ScaleArgs),
}

/// Options of `scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Physics options (`--steps-per-frame` is the steps per measured frame; `auto` is refused).
    #[command(flatten)]
    pub sim: SimArgs,
    /// The GPU setups to sweep (`--render-gpu-computes` only `yes`: `scale` draws nothing).
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Body counts N to time, comma separated (default 1048576).
    #[arg(long, value_delimiter = ',')]
    pub bodies: Vec<usize>,
    /// Untimed frames before measuring, per row.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Measured frames per row.
    #[arg(long, default_value_t = 3)]
    pub frames: u32,
    /// Directory for scale.json and scale.csv.
    #[arg(long, default_value = "scale-out")]
    pub out: PathBuf,
}

/// Options of `switch`.
#[derive(Debug, Args)]
pub struct SwitchArgs {
    /// Measured iterations per variant, split over the rounds.
    #[arg(long, default_value_t = 1000)]
    pub iters: u32,
    /// Untimed iterations per variant and round.
    #[arg(long, default_value_t = 50)]
    pub warmup: u32,
    /// Interleaved rounds: each round runs every variant once.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Directory for switch.json.
    #[arg(long, default_value = "switch-out")]
    pub out: PathBuf,
    /// Scheduling flag of the CUDA context.
    #[arg(long = "ctx-sched", value_enum, default_value_t = CtxSched::Auto)]
    pub ctx_sched: CtxSched,
    /// Stream the CUDA work goes to.
    #[arg(long, value_enum, default_value_t = StreamKind::Legacy)]
    pub stream: StreamKind,
}

/// Options of `lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Case to run, or `all`; without it the cases are listed (with `--replay`: every recorded
    /// case is replayed).
    pub name: Option<String>,
    /// Print one JSON object per case (with `--replay`: the file's own lines).
    #[arg(long)]
    pub json: bool,
    /// Predict-then-run: show each case's call without its expected code, run it, then show what
    /// came back, the expected code, the explanation and the fix; on a terminal each case asks
    /// for a prediction first. Without NAME the cases are listed with their calls only.
    #[arg(long)]
    pub quiz: bool,
    /// Replay the results recorded in this file (the JSON lines `lab NAME --json` prints, e.g.
    /// docs/results/2026-12-03-h200/lab.jsonl, run from the repository's root) instead of calling the driver: no GPU needed.
    /// Exits non-zero when a replayed case did not get its expected code.
    #[arg(long, value_name = "FILE.jsonl")]
    pub replay: Option<PathBuf>,
    /// Internal: run the one case NAME in this process and print its JSON line. `lab` (and the
    /// overlay) re-executes itself this way for the cases that run in a child process (those
    /// that could crash the process or spoil its CUDA context).
    #[arg(long, hide = true)]
    pub child: bool,
}

/// Options of `info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Default-stream semantics the entry points are resolved with.
    #[arg(long, value_enum, default_value_t = StreamSemantics::Legacy)]
    pub semantics: StreamSemantics,
}

/// Physics and initial-condition options shared by the demo and `bench`.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Seed of the initial-condition generator (reproducible runs).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Initial condition: plummer, galaxies, ball, figure-eight, a path to a CSV file
    /// with header `x,y,z,vx,vy,vz,mass`, or a tipsy snapshot (`.tipsy`, `.std`, `.bin`; the
    /// format of NVIDIA's nbody sample, either byte order). Default: galaxies for the demo,
    /// plummer for `bench` and `scale` (comparable numbers).
    #[arg(long)]
    pub init: Option<String>,
    /// Gravitational constant G (N-body units: 1).
    #[arg(long = "gravitational-constant", default_value_t = 1.0, allow_negative_numbers = true)]
    pub gravitational_constant: f32,
    /// Time step dt of the leapfrog integrator (simulation time units).
    #[arg(long, default_value_t = 0.001, allow_negative_numbers = true)]
    pub dt: f32,
    /// Plummer softening length ε (length units); 0 gives exact Newtonian gravity.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    pub softening: f32,
    /// Leapfrog steps per rendered frame: a number, or `auto` (as many as fit the frame
    /// interval: the display's refresh with vsync, else `--target-fps`; measured as it runs).
    /// Default: `auto` in a window, 1 headless; `bench` and `scale` need a number (default 1).
    #[arg(long = "steps-per-frame")]
    pub steps_per_frame: Option<StepsPerFrame>,
    /// CUDA threads per block of the N-body kernel (a multiple of 32 up to 1024), or 0 to choose
    /// the block size and bodies per thread from N and the SM count.
    #[arg(long = "block-size", default_value_t = 0)]
    pub block_size: u32,
    /// Load this PTX file instead of the embedded kernel.
    #[arg(long)]
    pub kernel: Option<PathBuf>,
    /// Run this fp32 step kernel instead of the launch rule's choice (for tuning and comparisons;
    /// `nbody_stepk_*` are the stream-K pairs). Default: the automatic choice.
    #[arg(
        long = "step-kernel",
        value_name = "NAME",
        value_parser = step_kernel_parser()
    )]
    pub step_kernel: Option<crate::cuda::launch_rule::ForcedKernel>,
}

/// `--step-kernel`: one of [`STEP_KERNEL_NAMES`](crate::cuda::launch_rule::STEP_KERNEL_NAMES)
/// (clap lists them in `--help` and refuses any other), as a [`ForcedKernel`](crate::cuda::launch_rule::ForcedKernel).
fn step_kernel_parser() -> impl clap::builder::TypedValueParser<Value = crate::cuda::launch_rule::ForcedKernel> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(crate::cuda::launch_rule::STEP_KERNEL_NAMES)
        .try_map(|s: String| crate::cuda::launch_rule::ForcedKernel::parse(&s))
}

/// `--steps-per-frame`: a fixed count of leapfrog steps per frame, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepsPerFrame {
    /// This many steps every frame (≥ 1; 0 is refused by validation with a message).
    Fixed(u32),
    /// As many as fit the frame interval (the demo's pace controller, `demo/pace.rs`).
    Auto,
}

impl std::str::FromStr for StepsPerFrame {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(StepsPerFrame::Auto);
        }
        t.parse().map(StepsPerFrame::Fixed).map_err(|_| format!("`{t}` is neither `auto` nor a whole number of steps (1, 2, …)"))
    }
}

impl std::fmt::Display for StepsPerFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepsPerFrame::Fixed(n) => write!(f, "{n}"),
            StepsPerFrame::Auto => f.write_str("auto"),
        }
    }
}

/// The demo's initial condition when `--init` is not given.
pub const DEMO_INIT: &str = "galaxies";
/// `bench`'s initial condition when `--init` is not given (the Plummer sphere of the committed
/// results).
pub const BENCH_INIT: &str = "plummer";
/// The demo's N when `--bodies` is not given.
pub const DEMO_BODIES: usize = 16384;
/// The demo's N on the CPU backend when `--bodies` is not given.
pub const CPU_DEMO_BODIES: usize = 4096;

impl SimArgs {
    /// `--init`, or `default` when it was not given.
    pub fn init_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.init.as_deref().unwrap_or(default)
    }

    /// The fixed step count of a run that needs one (`bench`): 1 when not given.
    ///
    /// # Errors
    /// `auto` (the bench compares modes at the same count), or 0.
    pub fn fixed_steps_per_frame(&self) -> anyhow::Result<u32> {
        match self.steps_per_frame {
            None => Ok(1),
            Some(StepsPerFrame::Fixed(0)) => anyhow::bail!("--steps-per-frame must be at least 1"),
            Some(StepsPerFrame::Fixed(n)) => Ok(n),
            Some(StepsPerFrame::Auto) => anyhow::bail!(
                "--steps-per-frame auto: the bench measures every mode at the same fixed count of steps per frame; give a \
                 number (the demo's auto pace is measured by `--headless --steps-per-frame auto --target-fps 60`)"
            ),
        }
    }
}

impl DemoArgs {
    /// The initial condition of the demo: `--init`, else [`DEMO_INIT`].
    pub fn init(&self) -> &str {
        self.sim.init_or(DEMO_INIT)
    }

    /// N of the demo: `--bodies`, else [`DEMO_BODIES`] (the demo's entry sets
    /// [`CPU_DEMO_BODIES`] where the CPU backend runs).
    pub fn n_bodies(&self) -> usize {
        self.bodies.unwrap_or(DEMO_BODIES)
    }

    /// The step count the demo starts with: `--steps-per-frame`, else `auto` in a window and 1
    /// headless (headless runs stay reproducible unless asked otherwise).
    pub fn steps_per_frame(&self) -> StepsPerFrame {
        self.sim.steps_per_frame.unwrap_or(if self.headless { StepsPerFrame::Fixed(1) } else { StepsPerFrame::Auto })
    }
}

/// Options of the demo.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Physics options.
    #[command(flatten)]
    pub sim: SimArgs,
    /// Number of bodies N (ignored for `figure-eight` and file input, which fix N). Default:
    /// 16384, or 4096 on the CPU backend (about 100 steps/s on 2 cores, so a window keeps
    /// 20 frames/s or more).
    #[arg(long, allow_negative_numbers = true)]
    pub bodies: Option<usize>,
    /// Which simulation backend to use.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Precision of the state and the force sum: f32, or f64 (CUDA only: double4 state in CUDA
    /// buffers, `nbody_step_f64`, and each frame one conversion kernel writes the float4
    /// positions GL draws into the mapped, copied or external buffer). f64 needs CUDA (with
    /// `--backend auto` a missing GPU is an error, not the fp32 CPU backend) and excludes
    /// `--step-mode`; block sizes up to 256.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// The GPUs that compute (one setup: one value each).
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// How CUDA's results reach the GL vertex buffers.
    #[arg(long, value_enum, default_value_t = InteropMode::Map)]
    pub interop: InteropMode,
    /// Flags given to cuGraphicsGLRegisterBuffer (`--interop map`): only `none`. A registration
    /// lasts the buffer's life, and each ping-pong buffer is read by the kernel in one frame and
    /// written in the next, so `read-only` ("CUDA will not write") and `write-discard` ("CUDA will
    /// not read") are refused; use `--map-flags` for the per-frame roles.
    #[arg(long = "register-flags", value_enum, default_value_t = ResourceFlags::None)]
    pub register_flags: ResourceFlags,
    /// Flags given to cuGraphicsResourceSetMapFlags before each map, by role: `read-only` marks
    /// the buffer the kernel only reads (front) CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY,
    /// `write-discard` marks the buffer it only writes (back) CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD;
    /// the other buffer gets none. Only with `--steps-per-frame 1`: with more, both buffers are
    /// read and written in a frame and no hint is given.
    #[arg(long = "map-flags", value_enum, default_value_t = ResourceFlags::None)]
    pub map_flags: ResourceFlags,
    /// Stream the frame's CUDA work goes to.
    #[arg(long, value_enum, default_value_t = StreamKind::Legacy)]
    pub stream: StreamKind,
    /// Priority of a created stream (lower is higher priority; cuCtxGetStreamPriorityRange).
    #[arg(long = "stream-priority", default_value_t = 0, allow_hyphen_values = true)]
    pub stream_priority: i32,
    /// Scheduling flag of the CUDA context (how the host waits for the GPU).
    #[arg(long = "ctx-sched", value_enum, default_value_t = CtxSched::Auto)]
    pub ctx_sched: CtxSched,
    /// Run without a window on an EGL device, rendering into an FBO.
    #[arg(long)]
    pub headless: bool,
    /// Start even when one step is estimated to take over 10 s (N² interactions at the backend's
    /// nominal rate); without it such a run is refused with the estimate.
    #[arg(long = "allow-slow")]
    pub allow_slow: bool,
    /// Stop after this many frames.
    #[arg(long)]
    pub frames: Option<u64>,
    /// Save the last frame, overlay included, to this PNG file.
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// Write the final state to this file at full precision: CSV (x,y,z,vx,vy,vz,mass), or a
    /// little-endian tipsy snapshot when the name ends in `.tipsy`, `.std` or `.bin`.
    #[arg(long = "save-state")]
    pub save_state: Option<PathBuf>,
    /// Compute energy and momentum every this many frames (0: only on demand).
    #[arg(long = "diagnostics-interval", default_value_t = 0)]
    pub diagnostics_interval: u64,
    /// Disable vsync (windowed runs).
    #[arg(long = "no-vsync")]
    pub no_vsync: bool,
    /// Frame rate that `--steps-per-frame auto` fills (frames/s). Default: the display's refresh
    /// rate when vsync is on and the window system reports it, else 60.
    #[arg(long = "target-fps")]
    pub target_fps: Option<f64>,
    /// Largest sprite diameter in pixels (at 1 pixel per point; smaller draw faster at large N).
    #[arg(long = "max-sprite-px", default_value_t = 64.0)]
    pub max_sprite_px: f32,
    /// Window or framebuffer width in physical pixels.
    #[arg(long, default_value_t = 1280)]
    pub width: u32,
    /// Window or framebuffer height in physical pixels.
    #[arg(long, default_value_t = 800)]
    pub height: u32,
    /// Draw short trails: the positions of the last 12 frames behind each body, fading with age
    /// (key `t` and the overlay's box turn them on and off).
    #[arg(long)]
    pub trails: bool,
    /// Zoom of the overlay (egui's zoom factor, on top of the window system's HiDPI scale).
    /// Default: 1 up to a window 1080 logical pixels high, growing with the height to 2 at 2160
    /// (4K). Ctrl +/- zoom in a running window too.
    #[arg(long = "ui-scale")]
    pub ui_scale: Option<f32>,
    /// Hide the egui overlay.
    #[arg(long = "no-overlay")]
    pub no_overlay: bool,
    /// Write every driver call (one JSON object per line, with its frame index) to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write a timeline of the run to this file in the Trace Event Format (JSON; open it in
    /// ui.perfetto.dev or chrome://tracing): host calls, the CUDA stream's map/kernel/unmap, GL
    /// draws, frame markers and counters.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Open the overlay's Workflow panel (the driver calls and the timeline of the last frame)
    /// from the first frame; tracing is on while it is open.
    #[arg(long)]
    pub workflow: bool,
    /// Start in step mode (CUDA map backend): the frame pauses between map, get pointers, launch,
    /// unmap and draw. Headless runs take one step per frame. fp32 only (`--precision f64` is refused).
    #[arg(long = "step-mode")]
    pub step_mode: bool,
    /// The long names of the options typed (`--interop`, …), defaults included, for the notice of
    /// options that do not apply. Filled by [`Cli::parse_command_line`]; empty when parsed otherwise.
    #[arg(skip)]
    pub typed: Vec<String>,
}

/// Options of `bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Physics options.
    #[command(flatten)]
    pub sim: SimArgs,
    /// Modes to time (default: all that this machine supports).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<BenchMode>,
    /// Body counts N to time, comma separated (default 16384,65536,262144,1048576).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub bodies: Vec<usize>,
    /// Untimed frames before measuring, per (mode, N) and round.
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// Measured frames per (mode, N), split over the rounds.
    #[arg(long, default_value_t = 200)]
    pub frames: u32,
    /// Interleaved rounds: each round visits every mode once per N.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Directory for bench.json, bench.csv and bench.png.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// The GPU setups of the CUDA modes, each combination a setup of its own: its rows give the
    /// GPUs, the gather path and time, and the speedup and scaling efficiency against the 1-GPU
    /// row; draw and cpu run once, in the first setup. fp32 only.
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Precision of the state and the force sum: f32, or f64 for the CUDA modes (compute, map,
    /// map-separate, copy, external; the interop modes convert the double4 state to the float4
    /// GL draws each frame, inside the kernel time). cpu and draw are fp32 only: named in
    /// `--modes` with f64 they are refused, left out of the default list.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Scheduling flag of the CUDA context.
    #[arg(long = "ctx-sched", value_enum, default_value_t = CtxSched::Auto)]
    pub ctx_sched: CtxSched,
    /// Stream the frame's CUDA work goes to.
    #[arg(long, value_enum, default_value_t = StreamKind::Legacy)]
    pub stream: StreamKind,
    /// Flags given to cuGraphicsGLRegisterBuffer by the map modes: only `none`, as for the demo
    /// (ping-pong buffers are read and written); use `--map-flags` for the roles.
    #[arg(long = "register-flags", value_enum, default_value_t = ResourceFlags::None)]
    pub register_flags: ResourceFlags,
    /// Flags given to cuGraphicsResourceSetMapFlags before each map, by role (map modes): `read-only`
    /// on the buffer the kernel only reads, `write-discard` on the one it only writes, none on the
    /// other; with `--steps-per-frame` above 1 no hint is given (both are read and written).
    #[arg(long = "map-flags", value_enum, default_value_t = ResourceFlags::None)]
    pub map_flags: ResourceFlags,
    /// Time budget of the cpu mode per frame, in ms: larger N are skipped (estimated beforehand
    /// from a probe of at most 8192 bodies, scaled by N²).
    #[arg(long = "cpu-budget-ms", default_value_t = 2000.0)]
    pub cpu_budget_ms: f64,
    /// Largest sprite diameter in pixels (the demo's `--max-sprite-px`): the fill cost of the draw.
    #[arg(long = "max-sprite-px", default_value_t = 64.0)]
    pub max_sprite_px: f32,
    /// Offscreen framebuffer width in pixels.
    #[arg(long, default_value_t = 1280)]
    pub width: u32,
    /// Offscreen framebuffer height in pixels.
    #[arg(long, default_value_t = 800)]
    pub height: u32,
    /// Write a timeline (Trace Event Format, as the demo's `--timeline`) of the measured frames
    /// of each (mode, N): `PATH-<mode>-<N>.json` beside PATH (e.g. `t.json` gives
    /// `t-map-65536.json`). The driver calls are traced during those frames, which adds the
    /// tracer's cost (about 1 µs per call) to their host time.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
}

/// Default-stream semantics of the entry-point table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamSemantics {
    /// CU_GET_PROC_ADDRESS_LEGACY_STREAM.
    Legacy,
    /// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
    PerThread,
}

/// Bench modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BenchMode {
    /// Registered buffers, one map and one unmap call per frame for both.
    Map,
    /// Each buffer mapped and unmapped in its own call.
    MapSeparate,
    /// Device buffer → pinned host → glBufferSubData.
    Copy,
    /// The kernel alone, no GL.
    Compute,
    /// The GL draw of positions that do not move, no simulation: the GL floor of a frame.
    Draw,
    /// CPU backend + upload.
    Cpu,
    /// CUDA-allocated buffers imported into GL (GL_EXT_memory_object_fd), event + fence sync.
    External,
}

impl BenchMode {
    /// The interop storage of a CUDA interop mode (`map` and `map-separate` register and map the
    /// GL buffers); `None` for the modes without one (compute, draw, cpu).
    pub fn interop(self) -> Option<InteropMode> {
        match self {
            BenchMode::Map | BenchMode::MapSeparate => Some(InteropMode::Map),
            BenchMode::Copy => Some(InteropMode::Copy),
            BenchMode::External => Some(InteropMode::External),
            BenchMode::Compute | BenchMode::Draw | BenchMode::Cpu => None,
        }
    }
}

impl DemoArgs {
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
            cuda: CudaOptions {
                settings: self.interop_settings(),
                separate_maps: false,
                ctx_sched: self.ctx_sched,
                kernel: self.sim.kernel.clone(),
                step_kernel: self.sim.step_kernel,
                precision: self.precision,
                split: Some(self.split_options()),
            },
            typed: self.typed.clone(),
        }
    }

    /// The split over slices and GPUs the command line asks for (the first value of each list:
    /// the demo's checks refuse more than one, [`GpuArgs::lists`]).
    pub fn split_options(&self) -> SplitOptions {
        let g = &self.gpu;
        SplitOptions {
            gpus: g.gpus.first().copied().unwrap_or(GpuCount::Count(1)),
            slices_per_gpu: g.slices_per_gpu.first().copied().unwrap_or(1),
            gather: g.gather,
            render_gpu_computes: g.render_gpu_computes.first() != Some(&YesNo::No),
        }
    }
}

/// The GPUs that compute and how their slices share the positions (CUDA backend, fp32): the
/// demo runs one setup (one value each); `bench` and `scale` take comma-separated lists and
/// sweep every combination.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "GPUs")]
pub struct GpuArgs {
    /// GPUs that compute, a number or `all` (a list for bench and scale, e.g. 1,2,4,8): the
    /// bodies are split into one slice per GPU (the GPU GL draws on first), gathered after every
    /// step, and the render GPU's vertex buffer receives the positions; a count g uses CUDA
    /// devices 0 to g − 1.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub gpus: Vec<GpuCount>,
    /// Slices per computing GPU, each with its own stream and buffers (above 1 the split path
    /// runs on one GPU too; `--gather nccl` takes only 1). A list for bench and scale.
    #[arg(long = "slices-per-gpu", value_delimiter = ',', default_value = "1")]
    pub slices_per_gpu: Vec<u32>,
    /// How the slices share the positions after each step.
    #[arg(long, value_enum, default_value_t = GatherChoice::Auto)]
    pub gather: GatherChoice,
    /// Whether the GPU GL draws on computes a slice: `no` leaves it to receive the positions and
    /// draw (it runs no step kernel, only the copy in and the map or import; needs another GPU).
    /// bench takes `yes,no`; scale, which draws nothing, only `yes`.
    #[arg(long = "render-gpu-computes", value_enum, value_delimiter = ',', default_value = "yes")]
    pub render_gpu_computes: Vec<YesNo>,
}

impl GpuArgs {
    /// The options given more than one value (`--gpus 1,2`), as typed: the demo runs one setup.
    pub fn lists(&self) -> Vec<&'static str> {
        [
            ("--gpus", self.gpus.len()),
            ("--slices-per-gpu", self.slices_per_gpu.len()),
            ("--render-gpu-computes", self.render_gpu_computes.len()),
        ]
        .into_iter()
        .filter(|(_, len)| *len > 1)
        .map(|(name, _)| name)
        .collect()
    }
}

/// A yes/no option value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum YesNo {
    /// Yes.
    Yes,
    /// No.
    No,
}
