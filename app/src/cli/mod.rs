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
pub use self::values::{parse_theta, BenchMode, Present, SolverChoice, StepsPerFrame, StreamSemantics, YesNo, BENCH_INIT, CPU_DEMO_BODIES, DEMO_BODIES, DEMO_INIT};
pub use crate::backend::select::BackendChoice;
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
}

/// Options of `accuracy`.
#[derive(Debug, Args)]
pub struct AccuracyArgs {
    /// Scenes to measure, comma separated (plummer, galaxies, ball, or a state file).
    #[arg(long, value_delimiter = ',', default_value = "plummer,galaxies")]
    pub init: Vec<String>,
    /// Body counts N, comma separated (ignored for state files, which fix N).
    #[arg(long, value_delimiter = ',', default_value = "16384,65536")]
    pub bodies: Vec<usize>,
    /// Opening angles θ of the tree, comma separated (each finite and ≥ 0).
    #[arg(long, value_name = "θ", value_delimiter = ',', value_parser = parse_theta, allow_negative_numbers = true, default_value = "0.3,0.5,0.75,1.0")]
    pub theta: Vec<f32>,
    /// Plummer softening length ε (length units), as the demo's `--softening`.
    #[arg(long, value_name = "EPS", default_value_t = 0.01, allow_negative_numbers = true)]
    pub softening: f32,
    /// Seed of the initial conditions.
    #[arg(long, default_value_t = 1)]
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
pub struct ScaleArgs {
    /// Physics options (`--steps-per-frame` is the steps per measured frame; `auto` is refused).
    #[command(flatten)]
    pub sim: SimArgs,
    /// Body counts N to time, comma separated [default: 1048576].
    #[arg(long, value_delimiter = ',', help_heading = "Scene")]
    pub bodies: Vec<usize>,
    /// Untimed frames before measuring, per row.
    #[arg(long, default_value_t = 1, help_heading = "Measurement")]
    pub warmup: u32,
    /// Measured frames per row.
    #[arg(long, default_value_t = 3, help_heading = "Measurement")]
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

