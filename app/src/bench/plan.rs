//! What a bench run will measure: the validated plan (modes, body counts, GPU setups) from the
//! command line, with the checks that refuse what cannot run before anything is made.

use anyhow::{bail, Context as _};

use super::report::mode_name;
use super::STOP_AFTER_ROWS_ENV;
use crate::cli::{BenchArgs, BenchMode, Precision, SliceOptions, YesNo};
use sim::PhysParams;

/// Body counts timed when `--bodies` is not given.
pub const DEFAULT_BODIES: [usize; 4] = [16384, 65536, 262144, 1048576];

/// Every mode, in the order they run within a round.
pub const ALL_MODES: [BenchMode; 12] = [
    BenchMode::Compute,
    BenchMode::Tree,
    BenchMode::Draw,
    BenchMode::Map,
    BenchMode::MapSeparate,
    BenchMode::Copy,
    BenchMode::External,
    BenchMode::ExternalSemaphore,
    BenchMode::Density,
    BenchMode::DensityCopy,
    BenchMode::Cpu,
    BenchMode::CpuTree,
];

/// The validated plan of a run.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) modes: Vec<BenchMode>,
    pub(super) explicit: bool,
    pub(super) bodies: Vec<usize>,
    pub(super) params: PhysParams,
    pub(super) stop_after_rows: Option<usize>,
    /// GPU setups of the CUDA modes (`--gpus` × `--slices-per-gpu` × `--render-gpu-computes`),
    /// in that order, without repeats.
    pub(super) setups: Vec<SliceOptions>,
}

pub(super) fn validate(args: &BenchArgs) -> anyhow::Result<Plan> {
    let mut bodies = if args.bodies.is_empty() { DEFAULT_BODIES.to_vec() } else { args.bodies.clone() };
    for &n in &bodies {
        if n == 0 || n > crate::cuda::kernel_set::MAX_BODIES {
            bail!("--bodies: N = {n} is not valid; every body count must be from 1 to {}", crate::cuda::kernel_set::MAX_BODIES);
        }
    }
    kernels::launch_rule::validate_block_size(args.sim.block_size).context("--block-size")?;
    if !(args.max_sprite_px.is_finite() && args.max_sprite_px >= 1.0) {
        bail!("--max-sprite-px must be a number ≥ 1 (got {})", args.max_sprite_px);
    }
    if args.timeline.is_some() && !interop::driver::entry::TRACING_COMPILED {
        bail!("--timeline needs driver-call tracing, which this build leaves out: build with the default `trace` feature");
    }
    bodies.sort_unstable();
    bodies.dedup();
    check_rounds("--frames", "frames", args.frames, args.rounds)?;
    if !(args.cpu_budget_ms.is_finite() && args.cpu_budget_ms > 0.0) {
        bail!("--cpu-budget-ms must be a finite number > 0 (got {})", args.cpu_budget_ms);
    }
    args.sim.fixed_steps_per_frame()?;
    if !(args.sim.dt.is_finite() && args.sim.dt > 0.0) {
        bail!("--dt must be a finite number > 0 (got {})", args.sim.dt);
    }
    if !(args.sim.softening.is_finite() && args.sim.softening >= 0.0) {
        bail!("--softening must be a finite number ≥ 0 (got {})", args.sim.softening);
    }
    if args.width == 0 || args.height == 0 {
        bail!("--width and --height must be at least 1 (got {}×{})", args.width, args.height);
    }
    let explicit = !args.modes.is_empty();
    let mut modes: Vec<BenchMode> = ALL_MODES.into_iter().filter(|m| !explicit || args.modes.contains(m)).collect();
    if args.precision == Precision::F64 {
        let other: Vec<String> = modes.iter().filter(|m| !runs_f64(**m)).map(|m| mode_name(*m)).collect();
        if explicit && !other.is_empty() {
            bail!(
                "--precision f64: {} cannot run in fp64 (the draw mode simulates nothing, the tree mode's GPU tree is \
                 float32); leave {} out of --modes (f64 runs in compute, map, map-separate, copy, external, external-semaphore, \
                 density, density-copy, cpu and cpu-tree), or use --precision f32",
                other.join(", "),
                if other.len() == 1 { "it" } else { "them" }
            );
        }
        modes.retain(|m| runs_f64(*m));
    }
    if args.precision == Precision::F64 {
        crate::cuda::gpu_stepper_f64::f64_block(args.sim.block_size).context("--block-size")?;
        if let Some(k) = args.sim.step_kernel {
            bail!("--step-kernel {} is an fp32 step kernel; --precision f64 runs nbody_step_f64: leave one of them out", k.name());
        }
    }
    modes.iter().filter_map(|m| m.interop()).try_for_each(|i| crate::backend::cuda::check_register_flags(i, args.register_flags))?;
    let stop_after_rows = match std::env::var(STOP_AFTER_ROWS_ENV) {
        Ok(v) => Some(v.trim().parse::<usize>().with_context(|| format!("{STOP_AFTER_ROWS_ENV}={v:?} is not a row count"))?),
        Err(_) => None,
    };
    let setups = setups(args)?;
    if setups.len() > 1 && args.timeline.is_some() {
        bail!(
            "--timeline writes one file per (mode, N) and cannot hold {} GPU setups; give one value each to --gpus, \
             --slices-per-gpu and --render-gpu-computes with --timeline",
            setups.len()
        );
    }
    if setups.iter().any(|s| !s.is_single()) && !modes.iter().any(|m| runs_cuda(*m)) {
        eprintln!(
            "notice: --gpus, --slices-per-gpu, --gather and --render-gpu-computes apply to the CUDA modes (compute, map, \
             map-separate, copy, external); the modes asked for ({}) run as they would without them",
            modes.iter().map(|m| mode_name(*m)).collect::<Vec<_>>().join(", ")
        );
    }
    let params = PhysParams { g: args.sim.gravitational_constant, dt: args.sim.dt, softening: args.sim.softening };
    Ok(Plan { modes, explicit, bodies, params, stop_after_rows, setups })
}

/// The GPU setups of `--gpus` × `--slices-per-gpu` × `--render-gpu-computes`.
///
/// # Errors
/// A bad `--slices-per-gpu` list ([`crate::cuda::settings::check_slices_per_gpu`]); a split setup
/// with `--precision f64`.
pub(super) fn setups(args: &BenchArgs) -> anyhow::Result<Vec<SliceOptions>> {
    crate::cuda::settings::check_slices_per_gpu(&args.gpu.slices_per_gpu, args.gpu.gather)?;
    let mut setups: Vec<SliceOptions> = Vec::new();
    for &gpus in &args.gpu.gpus {
        for &slices_per_gpu in &args.gpu.slices_per_gpu {
            for &rc in &args.gpu.render_gpu_computes {
                let s = SliceOptions { gpus, slices_per_gpu, gather: args.gpu.gather, render_gpu_computes: rc == YesNo::Yes };
                if !setups.contains(&s) {
                    setups.push(s);
                }
            }
        }
    }
    if setups.is_empty() {
        bail!("--gpus, --slices-per-gpu and --render-gpu-computes need at least one value each");
    }
    if args.precision == Precision::F64 && setups.iter().any(|s| !s.is_single()) {
        bail!(
            "--precision f64 runs on one GPU in one slice; the split over slices and GPUs (--gpus above 1, --slices-per-gpu \
             above 1, --render-gpu-computes no, --gather nccl) is fp32: use --precision f32, or leave those options at \
             their defaults"
        );
    }
    Ok(setups)
}

/// True for the modes that run the CUDA step, the ones a GPU setup applies to.
pub(super) fn runs_cuda(mode: BenchMode) -> bool {
    mode.is_compute() || mode.interop().is_some()
}

/// True for the modes that run with `--precision f64` (all but the GPU's fp32 tree and draw).
pub(super) fn runs_f64(mode: BenchMode) -> bool {
    !matches!(mode, BenchMode::Draw | BenchMode::Tree)
}

/// Check a measured count (`--frames`, `--iters`) against `--rounds`: both at least 1, and
/// every round gets at least one.
///
/// # Errors
/// A zero, or fewer of them than rounds; the message names the flags.
pub(crate) fn check_rounds(flag: &str, what: &str, count: u32, rounds: u32) -> anyhow::Result<()> {
    if count == 0 {
        bail!("{flag} must be at least 1");
    }
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if count < rounds {
        bail!("{flag} ({count}) must be at least --rounds ({rounds}): each round measures {what}/rounds {what}");
    }
    Ok(())
}

pub(crate) fn flag_name<T: clap::ValueEnum>(v: T) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// Frames measured in round `r` (0-based): `frames / rounds`, the remainder going to the first rounds.
pub(crate) fn frames_in_round(frames: u32, rounds: u32, r: u32) -> u32 {
    frames / rounds + u32::from(r < frames % rounds)
}
