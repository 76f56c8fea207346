//! `bench`'s options, grouped as `bench --help` shows them.

use std::path::PathBuf;

use clap::Args;

use super::gpus::GpuArgs;
use super::sim::SimArgs;
use super::values::{parse_count_u32, parse_count_usize, parse_f32, parse_whole_u32, BenchMode};
use crate::cuda::settings::{CtxSched, Precision, ResourceFlags, StreamKind};

/// Options of `bench`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("init", super::sim::plummer_init_help), mut_arg("steps_per_frame", super::sim::fixed_steps_help))]
pub struct BenchArgs {
    /// Physics options.
    #[command(flatten)]
    pub sim: SimArgs,
    /// Body counts N to time, comma separated [default: 16384,65536,262144,1048576].
    #[arg(long, value_delimiter = ',', value_parser = parse_count_usize, allow_negative_numbers = true, help_heading = "Scene")]
    pub bodies: Vec<usize>,
    /// Precision of the state and the forces (f64: the CUDA modes only).
    ///
    /// f64 runs compute, map, map-separate, copy and external (the interop modes convert the
    /// double4 state to the float4 GL draws each frame, inside the kernel time); cpu and draw are
    /// fp32 only: named in `--modes` with f64 they are refused, left out of the default list.
    #[arg(long, value_enum, default_value_t = Precision::F32, help_heading = "Simulation")]
    pub precision: Precision,
    /// Opening angle θ of the `tree` mode (0 to 2; 0 opens every cell: the direct sum).
    #[arg(long, value_name = "θ", default_value_t = sim::tree::DEFAULT_THETA, value_parser = super::values::parse_theta, allow_negative_numbers = true, help_heading = "Simulation")]
    pub theta: f32,
    /// Modes to time, comma separated [default: every mode this machine supports].
    #[arg(long, value_enum, value_delimiter = ',', help_heading = "Measurement")]
    pub modes: Vec<BenchMode>,
    /// Untimed frames before measuring, per (mode, N) and round.
    #[arg(long, default_value_t = 20, value_parser = parse_whole_u32, allow_negative_numbers = true, help_heading = "Measurement")]
    pub warmup: u32,
    /// Measured frames per (mode, N), split over the rounds.
    #[arg(long, default_value_t = 200, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Measurement")]
    pub frames: u32,
    /// Interleaved rounds: each round visits every mode once per N.
    #[arg(long, default_value_t = 3, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Measurement")]
    pub rounds: u32,
    /// Time budget of the cpu mode per frame, ms: an N estimated above it is not measured.
    ///
    /// The estimate comes from this machine: the all-pairs sum is timed at a size that takes
    /// 50–200 ms a step (best of three steps), scaled by N² and the steps per frame, plus the
    /// upload and draw of a probe frame, scaled by N. An N over the budget is skipped; where cpu
    /// is named in `--modes`, the run then fails (exit status 1, after measuring the rest) unless
    /// `--skip-slow` accepts the skip.
    #[arg(long = "cpu-budget-ms", default_value_t = 2000.0, allow_negative_numbers = true, help_heading = "Measurement", hide_short_help = true)]
    pub cpu_budget_ms: f64,
    /// Accept the cpu mode's skip of an N over `--cpu-budget-ms`: the skip is listed (stderr,
    /// bench.json's `skipped`) and the run ends with exit status 0.
    #[arg(long = "skip-slow", help_heading = "Measurement", hide_short_help = true)]
    pub skip_slow: bool,
    /// Scheduling flag of the CUDA context.
    #[arg(long = "ctx-sched", value_enum, default_value_t = CtxSched::Auto, help_heading = "Interop", hide_short_help = true)]
    pub ctx_sched: CtxSched,
    /// Stream the frame's CUDA work goes to.
    #[arg(long, value_enum, default_value_t = StreamKind::Legacy, help_heading = "Interop")]
    pub stream: StreamKind,
    /// Flags of cuGraphicsGLRegisterBuffer in the map modes: only none, as for the demo.
    ///
    /// Ping-pong buffers are read and written, so `read-only` and `write-discard` cannot hold
    /// for a registration's life; `--map-flags` gives the per-frame roles.
    #[arg(long = "register-flags", value_enum, default_value_t = ResourceFlags::None, help_heading = "Interop", hide_short_help = true)]
    pub register_flags: ResourceFlags,
    /// Map flags by buffer role in the map modes (cuGraphicsResourceSetMapFlags).
    ///
    /// `read-only` on the buffer the kernel only reads, `write-discard` on the one it only
    /// writes, none on the other; with `--steps-per-frame` above 1 no hint is given (both are
    /// read and written).
    #[arg(long = "map-flags", value_enum, default_value_t = ResourceFlags::None, help_heading = "Interop")]
    pub map_flags: ResourceFlags,
    /// Offscreen framebuffer width, pixels.
    #[arg(long, default_value_t = 1280, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Display")]
    pub width: u32,
    /// Offscreen framebuffer height, pixels.
    #[arg(long, default_value_t = 800, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Display")]
    pub height: u32,
    /// Also read every frame back as the window's copy route does (`--present copy`: two
    /// pixel-pack buffers a frame behind, converted to the window's pixel format), timed in the
    /// `readback_ms_*` columns and included in the frame: the cost of presenting at this size,
    /// without the window system's blit.
    #[arg(long, help_heading = "Display")]
    pub readback: bool,
    /// Largest sprite diameter, pixels (the demo's `--max-sprite-px`: the draw's fill cost).
    #[arg(long = "max-sprite-px", default_value_t = 64.0, value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Display", hide_short_help = true)]
    pub max_sprite_px: f32,
    /// Directory for bench.json, bench.csv and bench.png.
    #[arg(long, default_value = "bench-out", help_heading = "Output")]
    pub out: PathBuf,
    /// Write a timeline of each (mode, N)'s measured frames: `PATH-<mode>-<N>.json` beside PATH.
    ///
    /// The Trace Event Format of the demo's `--timeline` (e.g. `t.json` gives
    /// `t-map-65536.json`). The driver calls are traced during those frames, which adds the
    /// tracer's cost (about 1 µs per call) to their host time.
    #[arg(long, help_heading = "Output", hide_short_help = true)]
    pub timeline: Option<PathBuf>,
    /// The GPU setups of the CUDA modes, each combination a setup of its own: its rows give the
    /// GPUs, the gather path and time, and the speedup and scaling efficiency against the 1-GPU
    /// row; draw and cpu run once, in the first setup. fp32 only.
    #[command(flatten)]
    pub gpu: GpuArgs,
}
