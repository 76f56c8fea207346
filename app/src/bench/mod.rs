//! `nbody-interop bench`: whole interop frames (or the kernel alone) timed per mode and body count.
//!
//! # What runs
//! Headless, on the demo's EGL path ([`HeadlessContext`](crate::gfx::context::HeadlessContext) +
//! renderer + offscreen FBO), one GL context for the whole run. Modes (`--modes`, default: all):
//! `map` (CUDA backend, both VBOs mapped in one call per frame), `map-separate` (one map/unmap
//! call per VBO), `copy` (device buffer → pinned host → `glBufferSubData`), `external` (CUDA
//! allocations imported into GL, a GL fence and a CUDA event instead of map/unmap; see
//! the external storage of [`crate::backend::cuda::CudaBackend`]), `compute` (the step
//! kernel alone on device buffers, no GL) and `cpu` (CPU backend + upload + draw). A mode this
//! machine cannot run (CUDA ones without a driver or GPU, GL ones without EGL) is reported once as
//! `skipped: <reason>`; that is an error only for modes named in `--modes`, and then only after
//! the other modes were measured (`bench.json`'s status then says `incomplete`). The cpu mode
//! skips every N whose frame time, estimated from the fastest of three probe frames of the first
//! min(N, 8192) bodies of the smallest N (simulate time scaled by N², the rest by N), exceeds
//! `--cpu-budget-ms`; it says which, and that is not an error.
//!
//! # GPU setups
//! `--gpus 1,2,4,8` × `--slices-per-gpu 1,2` × `--render-gpu-computes yes,no` make the setups
//! the CUDA modes run in (default: one, the plain one-GPU, one-slice run). In a split setup the
//! bodies are cut into slices over the GPUs ([`crate::cuda::split`], gathered with NCCL or peer
//! copies, `--gather`): `compute` steps the slices alone, the interop modes step them and copy the
//! positions into the render GPU's vertex buffer ([`crate::backend::cuda::CudaBackend`]'s split
//! stepper). With `--render-gpu-computes no` the GPU GL draws on computes nothing (the compute
//! rows of that setup leave the same device out), so each interop mode's overhead over compute
//! in that setup is its frame cost with no context switch on any GPU. Every setup's devices are
//! checked before the first frame (more GPUs than the machine has is an error naming the count).
//! draw and cpu have no setup and run in the first one only. fp32 only.
//!
//! # Order
//! For each N (ascending), for each of `--rounds` rounds, for each GPU setup, for each mode: remake the VBOs from the
//! same seeded initial condition, build the backend, run `--warmup` untimed frames, then this
//! round's share of `--frames` timed frames; drop the backend (before the VBOs it registered are
//! remade). Interleaving the rounds spreads slow drifts (clocks, thermals) over all modes, and the
//! spread of the per-round medians shows how repeatable a number is.
//!
//! # Output
//! A table on stdout, and `bench.json`, `bench.csv` and `bench.png` in `--out` (columns: see
//! [`report`]). The two tables are rewritten after every finished (mode, N, setup), so Ctrl-C (which
//! stops after the current frame) or an error keeps every finished row; the run then exits
//! non-zero with the reason (130 after an interrupt, 1 after an error).
//!
//! # Test hook
//! `NBODY_BENCH_STOP_AFTER_ROWS=K` acts exactly like a Ctrl-C arriving right after the K-th row
//! is finished: the run stops, keeps K rows and fails with the "interrupted" error.

pub mod modes;
pub mod report;
pub mod stats;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use self::modes::{check_count, ComputeCtx, FrameSample, Gfx, Runner};
use self::report::{mode_name, Document, Measured, RowMeta, RunMeta, Skipped};
use self::stats::{median, Summary};
use crate::backend::{InteropSettings, PositionVbos, SimBackend as _};
use crate::backend::cpu::CpuBackend;
use crate::cli::{BenchArgs, BenchMode, InteropMode, Precision, SplitOptions, YesNo};
use crate::backend::cuda::{CudaBackend, CudaOptions};
use crate::cuda::session::open_for_gl;
use crate::cuda::kernels::StepLoop;
use crate::sim::init::initial_bodies;
use crate::sim::{Bodies, PhysParams};

/// Body counts timed when `--bodies` is not given.
pub const DEFAULT_BODIES: [usize; 4] = [16384, 65536, 262144, 1048576];

/// Every mode, in the order they run within a round.
pub const ALL_MODES: [BenchMode; 7] = [
    BenchMode::Compute,
    BenchMode::Draw,
    BenchMode::Map,
    BenchMode::MapSeparate,
    BenchMode::Copy,
    BenchMode::External,
    BenchMode::Cpu,
];

/// Environment variable of the test hook (see the module docs).
pub const STOP_AFTER_ROWS_ENV: &str = "NBODY_BENCH_STOP_AFTER_ROWS";

/// The error a run stopped by Ctrl-C (or the test hook) ends with, after writing its rows.
#[derive(Debug, thiserror::Error)]
#[error("bench interrupted after {rows} finished row(s){}", if *.rows == 0 { String::from(" (nothing written)") } else { format!("; they are in {}", .out.display()) })]
pub struct Interrupted {
    /// Rows written.
    pub rows: usize,
    /// The output directory.
    pub out: PathBuf,
}

use crate::demo::frame::trace_stream;
use crate::stop::stopped;
use crate::trace::Recorder;

/// The validated plan of a run.
#[derive(Debug, Clone)]
struct Plan {
    modes: Vec<BenchMode>,
    explicit: bool,
    bodies: Vec<usize>,
    params: PhysParams,
    stop_after_rows: Option<usize>,
    /// GPU setups of the CUDA modes (`--gpus` × `--slices-per-gpu` × `--render-gpu-computes`),
    /// in that order, without repeats.
    setups: Vec<SplitOptions>,
}

fn validate(args: &BenchArgs) -> anyhow::Result<Plan> {
    let mut bodies = if args.bodies.is_empty() { DEFAULT_BODIES.to_vec() } else { args.bodies.clone() };
    for &n in &bodies {
        if n == 0 || n > crate::cuda::kernels::MAX_BODIES {
            bail!("--bodies: N = {n} is not valid; every body count must be from 1 to {}", crate::cuda::kernels::MAX_BODIES);
        }
    }
    crate::cuda::launch_rule::validate_block_size(args.sim.block_size).context("--block-size")?;
    if !(args.max_sprite_px.is_finite() && args.max_sprite_px >= 1.0) {
        bail!("--max-sprite-px must be a number ≥ 1 (got {})", args.max_sprite_px);
    }
    if args.timeline.is_some() && !interop::entry::TRACING_COMPILED {
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
                "--precision f64: {} cannot run in fp64 (the cpu mode runs the float32 CPU backend, the draw mode simulates \
                 nothing); leave {} out of --modes (f64 runs in compute, map, map-separate, copy and external), or use \
                 --precision f32",
                other.join(", "),
                if other.len() == 1 { "it" } else { "them" }
            );
        }
        modes.retain(|m| runs_f64(*m));
    }
    if args.precision == Precision::F64 {
        crate::cuda::gpu_stepper_f64::f64_block(args.sim.block_size).context("--block-size")?;
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
fn setups(args: &BenchArgs) -> anyhow::Result<Vec<SplitOptions>> {
    crate::cuda::settings::check_slices_per_gpu(&args.slices_per_gpu, args.gather)?;
    let mut setups: Vec<SplitOptions> = Vec::new();
    for &gpus in &args.gpus {
        for &slices_per_gpu in &args.slices_per_gpu {
            for &rc in &args.render_gpu_computes {
                let s = SplitOptions { gpus, slices_per_gpu, gather: args.gather, render_gpu_computes: rc == YesNo::Yes };
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
fn runs_cuda(mode: BenchMode) -> bool {
    mode == BenchMode::Compute || mode.interop().is_some()
}

/// True for the modes that run with `--precision f64` (the CUDA ones).
fn runs_f64(mode: BenchMode) -> bool {
    !matches!(mode, BenchMode::Cpu | BenchMode::Draw)
}

/// The run's outcome, with a failed output write taking precedence: the write error is reported
/// even when the run also failed or was interrupted (whose reason it then carries). Shared with
/// the switch probe.
///
/// # Errors
/// The write error (with the run's error as context), else the run's error.
pub(crate) fn with_write_error(outcome: anyhow::Result<()>, write_err: Option<anyhow::Error>) -> anyhow::Result<()> {
    match (write_err, outcome) {
        (Some(e), Err(o)) => Err(e.context(format!("the run also ended with: {o:#}"))),
        (Some(e), Ok(())) => Err(e),
        (None, outcome) => outcome,
    }
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

/// Create `dir` and remove `outputs` of an earlier run, so that files found there afterwards
/// are this run's.
pub(crate) fn prepare_out(dir: &Path, outputs: &[PathBuf]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    for p in outputs {
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing the old {}", p.display())),
        }
    }
    Ok(())
}

fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

pub(crate) fn flag_name<T: clap::ValueEnum>(v: T) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// Frames measured in round `r` (0-based): `frames / rounds`, the remainder going to the first rounds.
pub(crate) fn frames_in_round(frames: u32, rounds: u32, r: u32) -> u32 {
    frames / rounds + u32::from(r < frames % rounds)
}

/// Per-frame samples of one (mode, N), all rounds.
#[derive(Debug, Default)]
struct Acc {
    frame: Vec<f64>,
    map: Vec<f64>,
    kernel: Vec<f64>,
    unmap: Vec<f64>,
    upload: Vec<f64>,
    draw: Vec<f64>,
    gather: Vec<f64>,
    round_medians: Vec<f64>,
    /// The GPU setup the runner ran in (CUDA modes).
    setup: Option<report::SetupFacts>,
    /// (block size, bodies per thread) of the kernel, for CUDA modes.
    launch: Option<crate::cuda::launch_rule::Launch>,
    /// A visit ended with non-finite positions or velocities.
    diverged: bool,
}

impl Acc {
    fn push(&mut self, s: &FrameSample) {
        self.frame.push(s.frame_ms);
        self.map.extend(s.sim.map_ms);
        self.kernel.extend(s.sim.kernel_ms);
        self.unmap.extend(s.sim.unmap_ms);
        self.upload.extend(s.sim.upload_ms);
        self.draw.extend(s.draw_ms);
        self.gather.extend(s.sim.gather_ms);
    }
}

/// Everything a run has found out so far; what the output files are written from.
struct Results {
    measured: Vec<Measured>,
    skipped: Vec<Skipped>,
    run: RunMeta,
    out: PathBuf,
}

impl Results {
    fn rows(&self) -> Vec<report::Row> {
        report::rows(&self.measured, &self.run)
    }

    fn write_tables(&self, status: &str, complete: bool) -> anyhow::Result<()> {
        let rows = self.rows();
        let doc = Document {
            tool: "nbody-interop bench",
            version: env!("CARGO_PKG_VERSION"),
            status: status.to_string(),
            complete,
            skipped: &self.skipped,
            rows: &rows,
        };
        report::write_tables(&self.out, &doc)
    }
}

/// The environment a run measures in: GL (optional), CUDA contexts (optional), and why not.
///
/// Field order is drop order: the CUDA contexts go before the GL context; no backend is alive
/// when this drops (backends live only inside [`measure`]).
struct Env {
    compute: Option<ComputeCtx>,
    /// The context sharing the GL context (held so the primary context stays alive between
    /// backends), and the device's attributes.
    shared: Option<(std::sync::Arc<interop::Context>, interop::DeviceInfo)>,
    gfx: Option<Gfx>,
    /// Why a mode cannot run here.
    unavailable: HashMap<BenchMode, String>,
}

impl Env {
    fn open(args: &BenchArgs, modes: &[BenchMode]) -> Env {
        let mut unavailable = HashMap::new();
        let gl_modes: Vec<BenchMode> = modes.iter().copied().filter(|m| *m != BenchMode::Compute).collect();
        let cuda_gl_modes: Vec<BenchMode> = gl_modes.iter().copied().filter(|m| !matches!(m, BenchMode::Cpu | BenchMode::Draw)).collect();
        let mut gfx = None;
        if !gl_modes.is_empty() {
            match Gfx::open(args.width, args.height, args.max_sprite_px) {
                Ok(g) => gfx = Some(g),
                Err(e) => {
                    for m in &gl_modes {
                        unavailable.insert(*m, format!("no headless GL context: {e:#}"));
                    }
                }
            }
        }
        let mut shared = None;
        if let (Some(g), false) = (&gfx, cuda_gl_modes.is_empty()) {
            match open_for_gl(g.info(), args.stream, 0, args.ctx_sched) {
                Ok((ctx, _stream, info)) => shared = Some((ctx, info)),
                Err(e) => {
                    for m in &cuda_gl_modes {
                        unavailable.insert(*m, format!("{e:#}"));
                    }
                }
            }
        }
        if let (Some(g), true) = (&gfx, modes.contains(&BenchMode::External)) {
            if let Err(why) = &g.info().memory_object {
                // More specific than a CUDA reason: checked before CUDA is touched.
                unavailable.insert(BenchMode::External, why.clone());
            }
        }
        let mut compute = None;
        if modes.contains(&BenchMode::Compute) {
            match ComputeCtx::open(args.stream, args.ctx_sched) {
                Ok(c) => compute = Some(c),
                Err(e) => {
                    unavailable.insert(BenchMode::Compute, format!("{e:#}"));
                }
            }
        }
        Env { compute, shared, gfx, unavailable }
    }
}

/// Run `bench` with `args` (see the module docs).
///
/// # Errors
/// Bad arguments (e.g. `--bodies 0`); a mode named in `--modes` that cannot run here (after the
/// others were measured); nothing at all can run; Ctrl-C ([`Interrupted`]); a failure while
/// measuring; a row that diverged (NaN or ∞ in the state; the row is written, marked). Every
/// finished row is in the output files in each case.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let plan = validate(args)?;
    // Every output path is checked before anything is written or removed; a timeline inside the
    // --out directory once that directory exists (this run makes it).
    let first_timeline = match (&args.timeline, plan.modes.first(), plan.bodies.first()) {
        (Some(base), Some(&m), Some(&n)) => Some(timeline_path(base, m, n)),
        _ => None,
    };
    let in_out = |p: &Path| p.parent().is_some_and(|d| d == args.out.as_path());
    if let Some(p) = first_timeline.as_deref().filter(|p| !in_out(p)) {
        check_timeline_path(p)?;
    }
    let out_existed = args.out.exists();
    prepare_out(&args.out, &report::paths(&args.out))?;
    if let Some(p) = first_timeline.as_deref().filter(|p| in_out(p)) {
        check_timeline_path(p)?;
    }
    crate::stop::install();

    let env = Env::open(args, &plan.modes);
    let mut res = Results {
        measured: Vec::new(),
        skipped: Vec::new(),
        run: RunMeta {
            build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
            date: chrono::Utc::now().to_rfc3339(),
            host: hostname(),
        },
        out: args.out.clone(),
    };

    // Report each unavailable mode once, grouping modes that share a reason.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for m in &plan.modes {
        if let Some(why) = env.unavailable.get(m) {
            res.skipped.push(Skipped { mode: mode_name(*m), n: None, reason: why.clone() });
            match groups.iter_mut().find(|g| &g.0 == why) {
                Some(g) => g.1.push(mode_name(*m)),
                None => groups.push((why.clone(), vec![mode_name(*m)])),
            }
        }
    }
    for (why, ms) in &groups {
        eprintln!("{}: skipped: {why}", ms.join(", "));
    }
    let active: Vec<BenchMode> = plan.modes.iter().copied().filter(|m| !env.unavailable.contains_key(m)).collect();
    if plan.setups.iter().any(|s| !s.is_single()) && plan.modes.iter().any(|m| runs_cuda(*m)) && !active.iter().any(|m| runs_cuda(*m)) {
        eprintln!("notice: no CUDA mode can run here (see above), so none of the GPU setups asked for (--gpus, --slices-per-gpu, --render-gpu-computes) is measured");
    }
    // Modes asked for by name (`--modes`) that cannot run here, with why: the run ends with exit 1.
    let requested_missing: Vec<(String, String)> = if plan.explicit {
        plan.modes.iter().filter_map(|m| env.unavailable.get(m).map(|why| (mode_name(*m), why.clone()))).collect()
    } else {
        Vec::new()
    };
    let missing: Vec<&str> = requested_missing.iter().map(|(m, _)| m.as_str()).collect();
    if active.is_empty() && !plan.explicit {
        bail!("no bench mode can run on this machine:\n  {}", groups.iter().map(|g| format!("{}: {}", g.1.join(", "), g.0)).collect::<Vec<_>>().join("\n  "));
    }

    let mut env = env;
    let mut timelines = Timelines::default();
    let outcome = if active.is_empty() { Ok(()) } else { measure(args, &plan, &active, &mut env, &mut res, &mut timelines) };
    drop(env);
    // Timelines of visits cut short (Ctrl-C, an error) are written too.
    let timeline_err = timelines.finish_all();

    // Report and write what exists, whatever the outcome.
    let interrupted = matches!(&outcome, Err(e) if e.is::<Interrupted>());
    let status = match &outcome {
        Ok(()) => "complete".to_string(),
        Err(_) if interrupted => "interrupted".to_string(),
        Err(e) => format!("error: {e:#}"),
    };
    // Without modes that were asked for by name, even a run that went to its end is incomplete.
    let status = match (status.as_str(), missing.is_empty()) {
        (_, true) => status,
        ("complete", false) => format!("incomplete: requested mode(s) could not run here: {} (see skipped)", missing.join(", ")),
        (_, false) => format!("{status}; requested mode(s) could not run here: {} (see skipped)", missing.join(", ")),
    };
    let complete = outcome.is_ok() && missing.is_empty();
    let rows = res.rows();
    let [json, csv, png] = report::paths(&args.out);
    let mut write_err = None;
    if !rows.is_empty() {
        println!("{}", report::table(&rows));
        if let Err(e) = res.write_tables(&status, complete) {
            write_err = Some(e);
        }
        match report::plot(&png, &rows) {
            Ok(()) => println!("wrote {}, {}, {}", json.display(), csv.display(), png.display()),
            Err(e) => {
                println!("wrote {}, {}", json.display(), csv.display());
                write_err.get_or_insert(e.context(format!("drawing {}", png.display())));
            }
        }
    } else {
        eprintln!("no rows were measured; nothing written to {}", args.out.display());
        if !out_existed {
            // Made by this run and still empty: leave no trace (remove_dir fails if not empty).
            let _ = std::fs::remove_dir(&args.out);
        }
    }

    let write_err = write_err.or(timeline_err);
    with_write_error(outcome, write_err)?;
    if !requested_missing.is_empty() {
        let each: Vec<String> = requested_missing.iter().map(|(m, why)| format!("{m}: {why}")).collect();
        bail!("requested mode(s) could not run here:\n  {}", each.join("\n  "));
    }
    if rows.is_empty() {
        bail!(
            "no row was measured: every (mode, N) was skipped (the reasons are above); raise --cpu-budget-ms, use \
             smaller --bodies, or other --modes"
        );
    }
    let diverged: Vec<String> = rows.iter().filter(|r| r.diverged).map(|r| format!("{} N={}", report::row_label(r, true), r.n)).collect();
    if !diverged.is_empty() {
        bail!(
            "{} row(s) diverged ({}): NaN or ∞ in the state, so their timings are of non-finite arithmetic (the rows \
             are written, marked `diverged`); use a smaller --dt or a larger --softening",
            diverged.len(),
            diverged.join(", ")
        );
    }
    Ok(())
}

/// `--timeline` file of one (mode, N): `PATH-<mode>-<N>.json` beside `base`.
pub fn timeline_path(base: &Path, mode: BenchMode, n: usize) -> PathBuf {
    let stem = base.file_stem().map_or_else(|| "timeline".into(), |s| s.to_string_lossy().into_owned());
    base.with_file_name(format!("{stem}-{}-{n}.json", mode_name(mode)))
}

/// Checks before the first frame that a timeline file can be made there (made, then removed).
fn check_timeline_path(path: &Path) -> anyhow::Result<()> {
    std::fs::File::create(path)
        .with_context(|| format!("--timeline: cannot create {} (the directory must exist and be writable)", path.display()))?;
    let _ = std::fs::remove_file(path);
    Ok(())
}

/// The recorders of `--timeline`, one per (mode, N), each written when its last round is done.
#[derive(Default)]
struct Timelines {
    open: HashMap<(BenchMode, usize), Recorder>,
    first_error: Option<anyhow::Error>,
    /// CUPTI, loaded at the first CUDA visit (its records go to each visit's timeline).
    cupti: Option<crate::trace::cupti::CuptiTrack>,
    cupti_tried: bool,
}

impl Timelines {
    /// The recorder of (mode, N), made on first use.
    fn get(&mut self, base: &Path, mode: BenchMode, n: usize) -> Recorder {
        self.open.entry((mode, n)).or_insert_with(|| Recorder::new().with_timeline(&timeline_path(base, mode, n))).clone()
    }

    /// Writes the timeline of (mode, N).
    fn finish(&mut self, base: &Path, mode: BenchMode, n: usize) {
        if let Some(r) = self.open.remove(&(mode, n)) {
            match r.finish() {
                Ok(()) => eprintln!("wrote {}", timeline_path(base, mode, n).display()),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    self.first_error.get_or_insert(e);
                }
            }
        }
    }

    /// Writes every timeline still open; the first write error.
    fn finish_all(&mut self) -> Option<anyhow::Error> {
        for r in std::mem::take(&mut self.open).into_values() {
            if let Err(e) = r.finish() {
                eprintln!("error: {e:#}");
                self.first_error.get_or_insert(e);
            }
        }
        self.first_error.take()
    }
}

/// The most bodies the cpu probe runs (a prefix of the smallest N's initial state): a step of
/// them takes ~15 ms on two cores, whatever N was asked for (a frame is `--steps-per-frame` of
/// them; Ctrl-C stops the probe inside a step).
const CPU_PROBE_MAX_N: usize = 8192;

/// The cpu probe: after one untimed frame, the fastest of three timed frames of the first
/// min(N, [`CPU_PROBE_MAX_N`]) bodies of the smallest N decides which N the cpu mode skips (one
/// frame alone can be far off: a first estimate of 2159 ms was seen where repeated runs took
/// 48–64 ms). Its simulate time is scaled by N² and the rest of the frame (upload, draw, finish)
/// by N. Returns the body counts to skip with their estimated frame time (ms), or `None` when an
/// interrupt arrived (checked inside each step and between the frames).
fn cpu_probe(args: &BenchArgs, plan: &Plan, gfx: &mut Gfx, bodies: &Bodies) -> anyhow::Result<Option<Vec<(usize, f64)>>> {
    let k = bodies.len().min(CPU_PROBE_MAX_N);
    let bodies = Bodies { pos: bodies.pos[..k].to_vec(), vel: bodies.vel[..k].to_vec() };
    let n0 = k as f64;
    gfx.load(&bodies)?;
    let mut backend = CpuBackend::new(&bodies, plan.params);
    backend.set_interrupt(crate::stop::stopped_in_step);
    let steps = args.sim.fixed_steps_per_frame()?;
    let span = plan.params.dt * steps as f32;
    // One untimed frame (thread pool, caches), then the fastest of three.
    gfx.frame(&mut backend, steps, span)?;
    let mut best: Option<FrameSample> = None;
    for _ in 0..3 {
        if stopped() {
            return Ok(None);
        }
        let p = gfx.frame(&mut backend, steps, span)?;
        if best.as_ref().is_none_or(|b| p.frame_ms < b.frame_ms) {
            best = Some(p);
        }
    }
    if stopped() {
        return Ok(None);
    }
    drop(backend);
    let probe = best.context("the cpu probe ran no timed frame")?;
    let sim_ms = probe.sim.kernel_ms.unwrap_or(probe.frame_ms).min(probe.frame_ms);
    let rest_ms = probe.frame_ms - sim_ms;
    Ok(Some(
        plan.bodies
            .iter()
            .map(|&n| {
                let r = n as f64 / n0;
                (n, sim_ms * r * r + rest_ms * r)
            })
            .filter(|&(_, est)| est > args.cpu_budget_ms)
            .collect(),
    ))
}

/// Build the runner of `mode` for `bodies` in the GPU setup `split` (`devices`: its slices'
/// devices, `None` for the plain one-slice setup); GL modes get `vbos`, freshly loaded with
/// `bodies`.
#[allow(clippy::too_many_arguments)]
fn build(
    args: &BenchArgs,
    plan: &Plan,
    mode: BenchMode,
    env: &Env,
    vbos: Option<PositionVbos>,
    bodies: &Bodies,
    split: &SplitOptions,
    devices: Option<&[i32]>,
) -> anyhow::Result<Runner> {
    Ok(match mode {
        BenchMode::Cpu => Runner::Cpu(Box::new(CpuBackend::new(bodies, plan.params))),
        BenchMode::Draw => Runner::Draw(modes::StaticBackend::new(bodies)),
        BenchMode::Compute => {
            let cc = env.compute.as_ref().context("compute mode without a CUDA context")?;
            let (stream, kernel, block) = (args.stream, args.sim.kernel.as_deref(), args.sim.block_size);
            match (args.precision, devices) {
                (Precision::F32, Some(devices)) => Runner::SplitCompute(Box::new(modes::SplitComputeRunner::new(
                    cc,
                    devices,
                    kernel,
                    block,
                    bodies,
                    plan.params,
                    split.gather,
                )?)),
                (Precision::F32, None) => {
                    Runner::Compute(Box::new(modes::ComputeRunner::new(cc, stream, kernel, block, bodies, plan.params)?))
                }
                (Precision::F64, _) => {
                    Runner::ComputeF64(Box::new(modes::ComputeRunnerF64::new(cc, stream, kernel, block, bodies, plan.params)?))
                }
            }
        }
        BenchMode::Map | BenchMode::MapSeparate | BenchMode::Copy | BenchMode::External => {
            let gfx = env.gfx.as_ref().context("CUDA interop mode without a GL context")?;
            let vbos = vbos.context("CUDA interop mode without VBOs")?;
            let interop = mode.interop().context("a CUDA interop mode without its storage")?;
            let opts = CudaOptions {
                settings: InteropSettings {
                    interop,
                    register_flags: args.register_flags,
                    map_flags: args.map_flags,
                    stream: args.stream,
                    stream_priority: 0,
                    block_size: args.sim.block_size,
                },
                separate_maps: mode == BenchMode::MapSeparate,
                ctx_sched: args.ctx_sched,
                kernel: args.sim.kernel.clone(),
                precision: args.precision,
                // `None` devices: the plain setup, whatever the options said.
                split: devices.map(|_| *split),
            };
            let backend = CudaBackend::new(&opts, gfx.gl(), gfx.info(), &vbos, bodies, plan.params)?;
            if interop == InteropMode::External {
                Runner::External(Box::new(modes::ExternalRunner::new(backend, gfx.current().clone())))
            } else {
                Runner::Cuda(Box::new(backend))
            }
        }
    })
}

/// The facts of a (mode, N) row.
fn row_meta(args: &BenchArgs, mode: BenchMode, env: &Env) -> RowMeta {
    let mut m = RowMeta::default();
    if mode != BenchMode::Compute {
        if let Some(g) = &env.gfx {
            let i = g.info();
            m.gl_vendor = Some(i.vendor.clone());
            m.gl_renderer = Some(i.renderer.clone());
            m.gl_version = Some(i.version.clone());
            m.egl_device = i.egl_device.clone();
        }
    }
    let cuda = match mode {
        BenchMode::Cpu => None,
        BenchMode::Compute => env.compute.as_ref().map(|c| (c.info.name.clone(), c.driver_version())),
        _ => env
            .shared
            .as_ref()
            .map(|(ctx, info)| (info.name.clone(), interop::entry::cuda_version_string(ctx.api().driver_version()))),
    };
    if let Some((name, driver)) = cuda {
        m.gpu_name = Some(name);
        m.driver_version = Some(driver);
        m.stream = Some(flag_name(args.stream));
        m.ctx_sched = Some(flag_name(args.ctx_sched));
        if matches!(mode, BenchMode::Map | BenchMode::MapSeparate) {
            m.register_flags = Some(flag_name(args.register_flags));
            m.map_flags = Some(flag_name(args.map_flags));
        }
    }
    m
}

fn progress_bar(total: u64) -> ProgressBar {
    use std::io::IsTerminal as _;
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) = ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} frames · {msg}") {
        pb.set_style(style);
    }
    pb
}

/// The measuring loop: for each N, each round, each mode. Rows go into `res` (and the files) as
/// they finish.
fn measure(
    args: &BenchArgs,
    plan: &Plan,
    active: &[BenchMode],
    env: &mut Env,
    res: &mut Results,
    timelines: &mut Timelines,
) -> anyhow::Result<()> {
    let steps = args.sim.fixed_steps_per_frame()?;
    let time_span = plan.params.dt * steps as f32;
    let devices = setup_devices(plan, active, env)?;
    // Setups that resolve to the same slices (e.g. `--gpus 1,all` on a machine of one GPU) run once.
    let cuda_runs = active.iter().any(|m| runs_cuda(*m));
    let repeat: Vec<bool> = (0..plan.setups.len())
        .map(|si| {
            cuda_runs
                && (0..si).any(|sj| devices[sj] == devices[si] && plan.setups[sj].render_gpu_computes == plan.setups[si].render_gpu_computes)
        })
        .collect();
    if repeat.iter().any(|&r| r) {
        eprintln!(
            "notice: {} of the GPU setups asked for resolve to the same slices as an earlier one on this machine: each runs once",
            repeat.iter().filter(|&&r| r).count()
        );
    }
    let initial = |n: usize| -> anyhow::Result<Bodies> {
        let init = args.sim.init_or(crate::cli::BENCH_INIT);
        let b = initial_bodies(init, n, args.sim.seed, plan.params.g)?;
        check_count(init, &b, n)?;
        Ok(b)
    };

    // Which (cpu, N) the budget rules out.
    let mut cpu_skip: Vec<usize> = Vec::new();
    if active.contains(&BenchMode::Cpu) {
        let gfx = env.gfx.as_mut().context("cpu mode without a GL context")?;
        let n0 = plan.bodies[0];
        let Some(skip) = cpu_probe(args, plan, gfx, &initial(n0)?).context("cpu probe frame")? else {
            return Err(Interrupted { rows: res.measured.len(), out: res.out.clone() }.into());
        };
        for (n, est) in skip {
            let reason = format!("estimated {est:.0} ms per frame exceeds --cpu-budget-ms {}", args.cpu_budget_ms);
            eprintln!("cpu N={n}: skipped: {reason}");
            res.skipped.push(Skipped { mode: mode_name(BenchMode::Cpu), n: Some(n), reason });
            cpu_skip.push(n);
        }
    }
    // Setup 0 runs every mode; the others only the CUDA ones (draw and cpu have no GPU setup).
    let modes_at = |n: usize, setup: usize| -> Vec<BenchMode> {
        active
            .iter()
            .copied()
            .filter(|m| !(*m == BenchMode::Cpu && cpu_skip.contains(&n)))
            .filter(|m| setup == 0 || runs_cuda(*m))
            .filter(|_| !repeat[setup])
            .collect()
    };
    let visits = |n: usize| -> u64 { (0..plan.setups.len()).map(|si| modes_at(n, si).len() as u64).sum() };
    let total: u64 =
        plan.bodies.iter().map(|&n| visits(n) * (u64::from(args.warmup) * u64::from(args.rounds) + u64::from(args.frames))).sum();
    let pb = progress_bar(total);
    let say = |pb: &ProgressBar, s: String| pb.suspend(|| eprintln!("{s}"));

    let mut runner: Option<Runner> = None;
    for &n in &plan.bodies {
        if visits(n) == 0 {
            continue;
        }
        let bodies = initial(n)?;
        let mut accs: HashMap<(BenchMode, usize), Acc> = HashMap::new();
        let visits_n: Vec<(usize, BenchMode)> =
            (0..plan.setups.len()).flat_map(|si| modes_at(n, si).into_iter().map(move |m| (si, m))).collect();
        let label = |si: usize, mode: BenchMode| match (&devices[si], runs_cuda(mode)) {
            (Some(d), true) => format!("{} [{} slice(s) on devices {d:?}]", mode_name(mode), d.len()),
            _ => mode_name(mode),
        };
        for round in 0..args.rounds {
            for &(si, mode) in &visits_n {
                if stopped() {
                    pb.finish_and_clear();
                    return Err(Interrupted { rows: res.measured.len(), out: res.out.clone() }.into());
                }
                let name = mode_name(mode);
                let what = label(si, mode);
                let ctx = || format!("mode {what}, N = {n}, round {}/{}", round + 1, args.rounds);
                pb.set_message(format!("{what} N={n} round {}/{}", round + 1, args.rounds));
                // The old backend goes before the VBOs it may have registered are remade.
                runner = None;
                let vbos = match mode {
                    BenchMode::Compute => None,
                    _ => Some(env.gfx.as_mut().context("GL mode without a GL context")?.load(&bodies).with_context(ctx)?),
                };
                let setup = &plan.setups[si];
                let r = runner.insert(build(args, plan, mode, env, vbos, &bodies, setup, devices[si].as_deref()).with_context(ctx)?);
                r.make_current().with_context(ctx)?;
                let acc = accs.entry((mode, si)).or_default();
                acc.launch = r.launch_config();
                acc.setup = r.setup(setup.render_gpu_computes);
                for _ in 0..args.warmup {
                    r.frame(env.gfx.as_mut(), steps, time_span).with_context(ctx)?;
                    pb.inc(1);
                    if stopped() {
                        break;
                    }
                }
                let count = frames_in_round(args.frames, args.rounds, round);
                let mut round_frames = Vec::with_capacity(count as usize);
                // --timeline: the measured frames only (the tracer goes on after the warmup).
                let rec = args.timeline.as_deref().map(|base| timelines.get(base, mode, n));
                let api = r.api();
                let mut gl_track = None;
                if let (Some(rec), Some(_)) = (&rec, &api) {
                    // CUPTI for the CUDA modes' timelines, loaded once (one user per process).
                    if timelines.cupti.is_none() && !timelines.cupti_tried {
                        timelines.cupti_tried = true;
                        timelines.cupti = crate::trace::cupti::CuptiTrack::start(rec);
                    }
                    if let Some(c) = &timelines.cupti {
                        c.discard();
                    }
                }
                if let Some(rec) = &rec {
                    if let Some(a) = &api {
                        rec.install(a);
                    }
                    if mode != BenchMode::Compute {
                        gl_track = env.gfx.as_mut().and_then(|g| g.start_gl_track(rec));
                    }
                }
                // The measured frames; a failure ends them, and the timeline's tracer, CUPTI
                // records and GL track are still finished below before it is reported.
                let frames = (|| -> anyhow::Result<()> {
                    for _ in 0..count {
                        if stopped() {
                            break;
                        }
                        if let Some(rec) = &rec {
                            rec.begin_frame(acc.frame.len() as u64);
                        }
                        let s = r.frame(env.gfx.as_mut(), steps, time_span).with_context(ctx);
                        if let Some(rec) = &rec {
                            if let Ok(s) = &s {
                                trace_frame(rec, mode, s, n, steps);
                                if let (Some(t), Some(g)) = (&gl_track, env.gfx.as_mut()) {
                                    g.record_gl(t, rec, &name);
                                }
                            }
                            rec.end_frame();
                        }
                        let s = s?;
                        acc.push(&s);
                        round_frames.push(s.frame_ms);
                        pb.inc(1);
                    }
                    Ok(())
                })();
                if let Some(rec) = &rec {
                    if let Some(a) = &api {
                        a.set_tracer(None);
                        if let Some(c) = timelines.cupti.as_mut() {
                            c.finish(rec);
                        }
                    }
                    if let (Some(t), Some(g)) = (gl_track, env.gfx.as_mut()) {
                        g.finish_gl_track(t, rec);
                    }
                }
                frames?;
                if stopped() {
                    // The visit was cut short: its frames belong to no finished row.
                    continue;
                }
                if !r.finite(env.gfx.as_mut()).with_context(ctx)? && !acc.diverged {
                    acc.diverged = true;
                    say(
                        &pb,
                        format!(
                            "warning: {}: the state diverged (NaN or ∞ in positions or velocities): the row is marked \
                             `diverged`; use a smaller --dt or a larger --softening",
                            ctx()
                        ),
                    );
                }
                if let Some(g) = env.gfx.as_ref().filter(|_| mode != BenchMode::Compute) {
                    if let Some(e) = g.error() {
                        say(&pb, format!("warning: GL error 0x{e:04X} after {}", ctx()));
                    }
                }
                acc.round_medians.push(median(&round_frames).unwrap_or(f64::NAN));
                if round + 1 == args.rounds {
                    let acc = accs.remove(&(mode, si)).unwrap_or_default();
                    let frame = Summary::of(&acc.frame).with_context(|| format!("no frames measured ({})", ctx()))?;
                    let gl_mode = mode != BenchMode::Compute;
                    res.measured.push(Measured {
                        mode,
                        n,
                        steps_per_frame: steps,
                        block_size: acc.launch.map(|l| l.block),
                        bodies_per_thread: acc.launch.map(|l| l.p),
                        threads_per_body: acc.launch.map(|l| l.split),
                        mass_scaled: acc.launch.map(|l| l.step_loop == StepLoop::MassScaled),
                        equal_mass: acc.launch.map(|l| l.step_loop == StepLoop::EqualMass),
                        stream_k_ctas: acc.launch.and_then(|l| l.stream_k),
                        frames: acc.frame.len(),
                        rounds: args.rounds,
                        warmup: args.warmup,
                        size: if gl_mode { env.gfx.as_ref().and_then(Gfx::size) } else { None },
                        max_sprite_px: gl_mode.then_some(args.max_sprite_px),
                        frame,
                        map: Summary::of(&acc.map),
                        kernel: Summary::of(&acc.kernel),
                        unmap: Summary::of(&acc.unmap),
                        upload: Summary::of(&acc.upload),
                        draw: Summary::of(&acc.draw),
                        round_medians: acc.round_medians,
                        diverged: acc.diverged,
                        precision: if runs_f64(mode) { args.precision.name() } else { "f32" },
                        meta: row_meta(args, mode, env),
                        setup: acc.setup,
                        gather: Summary::of(&acc.gather),
                    });
                    res.write_tables("running", false).context("writing the results")?;
                    if let Some(base) = &args.timeline {
                        pb.suspend(|| timelines.finish(base, mode, n));
                    }
                    let last = res.measured.last().map(|m| (m.frame.median, m.frame.p99));
                    if let Some((med, p99)) = last {
                        say(&pb, format!("{what} N={n}: frame median {med:.3} ms, p99 {p99:.3} ms"));
                    }
                    if plan.stop_after_rows.is_some_and(|k| res.measured.len() >= k) {
                        // Test hook: behave exactly as if Ctrl-C arrived now.
                        crate::stop::request();
                    }
                }
            }
        }
    }
    drop(runner);
    pb.finish_and_clear();
    if stopped() {
        return Err(Interrupted { rows: res.measured.len(), out: res.out.clone() }.into());
    }
    Ok(())
}

/// The slices' devices of each setup of `plan` (`None` for the plain one-slice setup — also
/// one that resolves to a single slice on the render GPU without NCCL, as `--gpus all` on a
/// machine of one GPU — and for every setup when no CUDA mode runs): the render GPU is the
/// device the GL context's CUDA context is on (device 0 without GL).
///
/// # Errors
/// More GPUs than the machine has (counting the render GPU apart), with the remedy.
fn setup_devices(plan: &Plan, active: &[BenchMode], env: &Env) -> anyhow::Result<Vec<Option<Vec<i32>>>> {
    let ctx = env.shared.as_ref().map(|(c, _)| c).or(env.compute.as_ref().map(|c| &c.ctx));
    let (Some(ctx), true) = (ctx, active.iter().any(|m| runs_cuda(*m))) else {
        return Ok(vec![None; plan.setups.len()]);
    };
    let render = env.shared.as_ref().map_or(0, |(c, _)| c.device().ordinal());
    let count = interop::Device::count(ctx.api()).context("cuDeviceGetCount")?;
    plan.setups
        .iter()
        .map(|s| {
            if s.is_single() {
                return Ok(None);
            }
            let d = s.devices(count.max(0) as u32, render)?;
            // One slice on the render GPU without NCCL (`--gpus all` on one GPU): the plain setup.
            Ok((d.len() > 1 || !s.render_gpu_computes || s.gather == crate::cli::GatherChoice::Nccl).then_some(d))
        })
        .collect()
}

/// A measured frame on its timeline: the stream's spans, the clock residual, the counters.
fn trace_frame(rec: &Recorder, mode: BenchMode, s: &FrameSample, n: usize, steps: u32) {
    trace_stream(rec, mode.interop(), &s.sim);
    rec.counter("frame ms", s.frame_ms);
    if let Some(k) = s.sim.kernel_ms.filter(|&k| k > 0.0 && steps > 0) {
        rec.counter("interactions/s", crate::sim::interactions(n, steps) / (k * 1e-3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::ResourceFlags;

    #[test]
    fn rounds_split_frames() {
        let per: Vec<u32> = (0..3).map(|r| frames_in_round(10, 3, r)).collect();
        assert_eq!(per, vec![4, 3, 3]);
        assert_eq!((0..2).map(|r| frames_in_round(20, 2, r)).sum::<u32>(), 20);
    }

    #[test]
    fn flag_names() {
        assert_eq!(flag_name(ResourceFlags::WriteDiscard), "write-discard");
        assert_eq!(mode_name(BenchMode::MapSeparate), "map-separate");
    }
}
