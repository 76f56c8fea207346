//! Command-line interface (clap): the command and its subcommands here, the demo's, `bench`'s
//! and the shared options in the files below, each option under the heading `--help` shows it
//! in (scene, simulation, interop, display, output, GPUs, teaching; `bench`: measurement too).
//! `-h` gives one line per option and leaves out the rarer ones; `--help` gives them all, with
//! their long explanations. `docs/guide.md` explains every option.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod bench;
mod demo;
mod gpus;
mod sim;
mod values;

pub use self::bench::BenchArgs;
pub use self::demo::DemoArgs;
pub use self::gpus::GpuArgs;
pub use self::sim::SimArgs;
use self::values::{parse_count_u32, parse_count_usize, parse_f32, parse_whole_u32, parse_whole_u64};
pub use self::values::{
    parse_theta, BenchMode, Present, SolverChoice, StepsPerFrame, StreamSemantics, YesNo, BENCH_INIT, CPU_DEMO_BODIES, DEMO_BODIES, DEMO_INIT,
    MAX_THETA,
};
pub use crate::backend::select::BackendChoice;
pub use crate::cuda::settings::{CtxSched, GatherChoice, GpuCount, InteropMode, Precision, ResourceFlags, SliceOptions, StreamKind};

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
    /// Mistake lab: make a classic interop or entry-point mistake, see the driver's answer.
    Lab(LabArgs),
    /// Time the CUDA↔GL context switch on its own (tiny CUDA and GL work, alone and alternating).
    Switch(SwitchArgs),
    /// Time the step split over 1, 2, 4, … GPUs and slices per GPU, and its scaling.
    ///
    /// Per-step time, gather time (NCCL or peer copies), interactions/s and the scaling against
    /// one GPU.
    Scale(ScaleArgs),
    /// Measure the tree solver's force error against the f64 direct sum, per scene, N and θ.
    ///
    /// Per-body relative acceleration error |a_tree − a_direct| / |a_direct| (median, 99th
    /// percentile, maximum), interactions per body, and the time of the tree against the
    /// direct sum: the CPU backend's (no GPU or display needed), or with `--backend cuda` the
    /// GPU's.
    Accuracy(AccuracyArgs),
    /// Check why CUDA–GL interop works here or not: one check per line, then the demo's routes.
    ///
    /// Exits 0 when the demo runs with CUDA interop, 4 when it does not.
    Doctor(DoctorArgs),
}

/// Options of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print one JSON object (checks, routes, exit) instead of text, for a bug report.
    #[arg(long)]
    pub json: bool,
}

/// Options of `accuracy`.
#[derive(Debug, Args)]
pub struct AccuracyArgs {
    /// Scenes to measure, comma separated: plummer, galaxies, ball, or a state file of at least
    /// 512 bodies (figure-eight's 3 bodies are too few: refused).
    ///
    /// Below 512 bodies the tree has few levels (16 bodies a leaf) and each force evaluation takes
    /// microseconds, so neither the error nor the speedup says how the tree does at work.
    #[arg(long, value_delimiter = ',', default_value = "plummer,galaxies")]
    pub init: Vec<String>,
    /// Body counts N, comma separated, each at least 512 (ignored for state files, which fix N).
    #[arg(long, value_delimiter = ',', value_parser = parse_count_usize, allow_negative_numbers = true, default_value = "16384,65536")]
    pub bodies: Vec<usize>,
    /// Opening angles θ of the tree, comma separated (each from 0 to 2).
    #[arg(long, value_name = "θ", value_delimiter = ',', value_parser = parse_theta, allow_negative_numbers = true, default_value = "0.3,0.5,0.75,1.0")]
    pub theta: Vec<f32>,
    /// Plummer softening length ε (length units), as the demo's `--softening`.
    #[arg(long, value_name = "EPS", default_value_t = 0.01, value_parser = parse_f32, allow_negative_numbers = true)]
    pub softening: f32,
    /// Seed of the initial conditions.
    #[arg(long, default_value_t = 1, value_parser = parse_whole_u64, allow_negative_numbers = true)]
    pub seed: u64,
    /// Also write the rows to this CSV file (rewritten after every row).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Where the solvers run: `cpu` (the CPU backend's direct sum and octree, the f64 reference
    /// on the CPU), or `cuda` (the fp32 direct kernel and the GPU tree, the f64 reference by the
    /// fp64 kernel: large N in seconds); `auto`: cuda where it can be used, else cpu.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
}

/// Options of `scale`.
#[derive(Debug, Args)]
#[command(mut_arg("init", sim::plummer_init_help), mut_arg("steps_per_frame", sim::fixed_steps_help))]
pub struct ScaleArgs {
    /// Physics options (`--steps-per-frame` is the steps per measured frame; `auto` is refused).
    #[command(flatten)]
    pub sim: SimArgs,
    /// Body counts N to time, comma separated [default: 1048576].
    #[arg(long, value_delimiter = ',', value_parser = parse_count_usize, allow_negative_numbers = true, help_heading = "Scene")]
    pub bodies: Vec<usize>,
    /// Untimed frames before measuring, per row.
    #[arg(long, default_value_t = 1, value_parser = parse_whole_u32, allow_negative_numbers = true, help_heading = "Measurement")]
    pub warmup: u32,
    /// Measured frames per row.
    #[arg(long, default_value_t = 3, value_parser = parse_count_u32, allow_negative_numbers = true, help_heading = "Measurement")]
    pub frames: u32,
    /// Directory for scale.json and scale.csv.
    #[arg(long, default_value = "scale-out", help_heading = "Output")]
    pub out: PathBuf,
    /// The GPU setups to sweep (`--render-gpu-computes` only `yes`: `scale` draws nothing); the
    /// scaling is against the 1-GPU row of the same N and slices per GPU.
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Options of `switch`.
#[derive(Debug, Args)]
pub struct SwitchArgs {
    /// Measured iterations per variant, split over the rounds.
    #[arg(long, default_value_t = 1000, value_parser = parse_count_u32, allow_negative_numbers = true)]
    pub iters: u32,
    /// Untimed iterations per variant and round.
    #[arg(long, default_value_t = 50, value_parser = parse_whole_u32, allow_negative_numbers = true)]
    pub warmup: u32,
    /// Interleaved rounds: each round runs every variant once.
    #[arg(long, default_value_t = 5, value_parser = parse_count_u32, allow_negative_numbers = true)]
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
    /// docs/results/2026-12-04-h200/lab.jsonl, run from the repository's root) instead of calling the driver: no GPU needed.
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
