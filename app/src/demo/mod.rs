//! The demo: one frame loop, windowed (winit + glutin-winit) or headless (EGL device + FBO).
//!
//! Every frame has the same shape ([`scene::Scene::frame`]):
//! 1. apply what the overlay asked for last frame (settings, reset, parameters);
//! 2. `simulate` — `backend.simulate` (CUDA or CPU; uploads/maps the VBOs, draws nothing);
//! 3. UI pass — egui runs the overlay (no GL);
//! 4. render the bodies into the target framebuffer (the default one when windowed, an FBO
//!    headless), timed by a GL timer query: [`frame::render_view`], which the bench's frame
//!    uses too;
//! 5. paint egui into the same framebuffer;
//! 6. present (swap buffers, [`windowed`]) or finish (headless, [`headless`]) — the caller's step.

pub mod frame;
pub mod headless;
pub mod pace;
mod present;
pub mod scene;
pub mod summary;
pub mod windowed;

use anyhow::{bail, Context as _};

use crate::cli::DemoArgs;
use sim::init::initial_bodies_with;
use sim::PhysParams;

/// Run the demo with `args`: windowed, or headless with `--headless`.
///
/// # Errors
/// Bad arguments (unknown `--init`, zero size, unwritable screenshot directory), no GL context,
/// `--backend cuda` without CUDA, or a failure while running; each names what failed.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    validate(args)?;
    // From here on an interrupt is a request to stop and write the outputs (the initial
    // condition and the GL context may take a while to make).
    crate::stop::install();
    let mut args = args.clone();
    if args.bodies.is_none() && args.backend == crate::cli::BackendChoice::Cpu {
        args.default_bodies = Some(crate::cli::CPU_DEMO_BODIES);
    }
    let args = &args;
    // Before anything is made: the nominal rate of the backend that will most likely run; the
    // backend's own rate is checked again once it is made (`Scene::new`), and only that check
    // warns under --allow-slow. A file fixes N itself: it is checked once read.
    let cpu = match args.backend {
        crate::cli::BackendChoice::Cpu => true,
        crate::cli::BackendChoice::Cuda => false,
        // Without a driver library `auto` will run the CPU backend: its rate, not a GPU's.
        crate::cli::BackendChoice::Auto => !crate::backend::select::driver_library_loads(),
    };
    let from_file = std::path::Path::new(args.init()).is_file();
    if !from_file {
        refuse_slow_step(args.n_bodies(), args.solver.with_theta(args.theta), cpu, args.allow_slow)?;
        check_host_memory(args)?;
    }
    let params = PhysParams { g: args.sim.gravitational_constant, dt: args.sim.dt, softening: args.sim.softening };
    // A state file is read as it streams; Ctrl-C ends the read (exit 130) as it ends a run.
    let bodies = initial_bodies_with(args.init(), args.n_bodies(), args.sim.seed, params.g, &crate::stop::stopped).map_err(|e| {
        if e.is_interrupted() {
            anyhow::Error::from(crate::stop::Interrupted(format!("while reading --init {}", args.init())))
        } else {
            e.into()
        }
    })?;
    if from_file {
        refuse_slow_step(bodies.len(), args.solver.with_theta(args.theta), cpu, args.allow_slow)?;
    }
    if let crate::cli::StepsPerFrame::Fixed(k) = args.steps_per_frame() {
        refuse_slow_frame(bodies.len(), k, args.solver.with_theta(args.theta), cpu, args.allow_slow)?;
    }
    if args.headless {
        headless::run(args, bodies, params)
    } else {
        windowed::run(args, bodies, params)
    }
}

/// Refuses arguments the demo cannot run with, each with the cause and the remedy.
fn validate(args: &DemoArgs) -> anyhow::Result<()> {
    check_numbers(args)?;
    check_combinations(args)?;
    if !args.headless {
        // Checked before the window opens: a misspelt route would otherwise show only as one of
        // the routes' errors, or not at all where the copy route then works.
        crate::gfx::window::check_route_variable()?;
    }
    kernels::launch_rule::validate_block_size(args.sim.block_size).context("--block-size")?;
    if args.backend != crate::cli::BackendChoice::Cpu {
        // The CPU backend ignores the flags (ignored_notice names them).
        crate::backend::cuda::check_register_flags(args.interop, args.register_flags)?;
    }
    check_precision(args)?;
    if args.view == crate::cuda::settings::View::Density && args.backend == crate::cli::BackendChoice::Cpu {
        bail!(
            "--view density needs the CUDA backend: CUDA splats the bodies into GL textures (the image workflow); use \
             --backend cuda (or auto) on a machine with an NVIDIA GPU, or --view points"
        );
    }
    check_split(args)?;
    if args.n_bodies() == 0 || args.n_bodies() > crate::cuda::kernel_set::MAX_BODIES {
        bail!("--bodies must be from 1 to {} (got {})", crate::cuda::kernel_set::MAX_BODIES, args.n_bodies());
    }
    if args.trace.is_some() && !interop::driver::entry::TRACING_COMPILED {
        bail!("--trace needs driver-call tracing, which this build leaves out: build with the default `trace` feature");
    }
    if let Some(p) = &args.screenshot {
        if !p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            bail!("--screenshot {}: screenshots are written as PNG; give a file name ending in .png", p.display());
        }
    }
    if args.timeline.is_some() && !interop::driver::entry::TRACING_COMPILED {
        bail!("--timeline needs driver-call tracing, which this build leaves out: build with the default `trace` feature");
    }
    check_output_paths(args)?;
    if let Some(n) = ignored_notice(args) {
        eprintln!("notice: {n}");
    }
    Ok(())
}

/// Refuses numbers out of their range: the window size, --frames, the physics, the sprite size,
/// --steps-per-frame, --ui-scale and --target-fps.
fn check_numbers(args: &DemoArgs) -> anyhow::Result<()> {
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
    if args.steps_per_frame() == crate::cli::StepsPerFrame::Fixed(0) {
        bail!("--steps-per-frame must be at least 1 (or auto)");
    }
    if let Some(z) = args.ui_scale {
        if !(z.is_finite() && (0.25..=8.0).contains(&z)) {
            bail!("--ui-scale must be a number from 0.25 to 8 (got {z})");
        }
    }
    if let Some(f) = args.target_fps {
        if !(f.is_finite() && f > 0.0) {
            bail!("--target-fps must be a finite number of frames per second > 0 (got {f})");
        }
    }
    Ok(())
}

/// Refuses options that contradict each other (the overlay, step mode, the tree solver, fp64 and
/// the split).
fn check_combinations(args: &DemoArgs) -> anyhow::Result<()> {
    if args.headless && args.no_overlay && args.workflow {
        bail!(
            "--workflow opens the overlay's Workflow panel, and --no-overlay turns the overlay off, so a headless run \
             would show nothing of it: leave one of them out (--trace or --timeline record the same calls to a file)"
        );
    }
    if args.step_mode && args.backend == crate::cli::BackendChoice::Cpu {
        // Asked for together, as --precision f64 with the CPU: an error, not a warning (with
        // `auto` the backend is only known once made: the overlay then says why it cannot).
        bail!(
            "--step-mode walks the CUDA workflow (map → pointers → launch → unmap → draw), which the CPU backend \
             (--backend cpu) does not have: use --backend cuda (or auto) with --interop map on a machine with an NVIDIA \
             GPU, or leave --step-mode out"
        );
    }
    if args.solver == crate::cli::SolverChoice::Tree && args.precision == crate::cli::Precision::F64 && args.backend != crate::cli::BackendChoice::Cpu
    {
        bail!(
            "--solver tree is float32 on the GPU, and --precision f64 runs the direct sum there: use --precision f32 \
             with --solver tree, --solver direct with --precision f64, or --backend cpu (whose tree walks in float64)"
        );
    }
    let split = args.gpu.gpus.iter().any(|g| *g != crate::cli::GpuCount::Count(1)) || args.gpu.slices_per_gpu.iter().any(|&k| k > 1);
    // The CPU backend ignores the split flags (ignored_notice names them), as with the direct sum.
    if args.solver == crate::cli::SolverChoice::Tree && split && args.backend != crate::cli::BackendChoice::Cpu {
        bail!(
            "--solver tree runs on one GPU, and --gpus / --slices-per-gpu split the direct sum over slices: use \
             --solver direct (or auto) with the split, or leave the split out for the tree"
        );
    }
    Ok(())
}

/// Refuses output paths that are the same file, a directory, in a missing directory, or not
/// writable.
fn check_output_paths(args: &DemoArgs) -> anyhow::Result<()> {
    let outputs = [
        ("--screenshot", &args.screenshot),
        ("--save-state", &args.save_state),
        ("--summary", &args.summary),
        ("--trace", &args.trace),
        ("--timeline", &args.timeline),
    ];
    for (i, (flag, path)) in outputs.iter().enumerate() {
        if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| p.is_some() && *p == *path) {
            bail!("{other} and {flag} name the same file, so one would overwrite the other: give each its own path");
        }
    }
    for (flag, path) in outputs {
        if let Some(p) = path {
            if p.is_dir() {
                bail!("cannot write {flag} file {}: it is a directory; give a file name", p.display());
            }
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    bail!("cannot write {flag} file {}: directory {} does not exist", p.display(), dir.display());
                }
            }
            check_writable(flag, p)?;
        }
    }
    Ok(())
}

/// `--precision f64`: refuses what cannot run in fp64 (step mode, fp32 step kernels, blocks
/// above 256 threads), naming the cause and the remedy. The CPU backend runs it (float64 state
/// and forces).
///
/// # Errors
/// One of those combinations.
fn check_precision(args: &DemoArgs) -> anyhow::Result<()> {
    if args.precision != crate::cli::Precision::F64 {
        return Ok(());
    }
    if args.step_mode {
        bail!(
            "--step-mode cannot run with --precision f64: step mode walks the fp32 workflow (map → pointers → one step \
             kernel in the mapped buffers → unmap), while the fp64 state lives in CUDA buffers and a conversion kernel \
             writes GL's buffer; use --precision f32 for step mode"
        );
    }
    if let Some(k) = args.sim.step_kernel {
        bail!("--step-kernel {} is an fp32 step kernel; --precision f64 runs nbody_step_f64: leave one of them out", k.name());
    }
    crate::cuda::gpu_stepper_f64::f64_block(args.sim.block_size).context("--block-size")?;
    Ok(())
}

/// The split over slices and GPUs: slices ≥ 1; it is a CUDA fp32 path without step mode.
fn check_split(args: &DemoArgs) -> anyhow::Result<()> {
    let lists = args.gpu.lists();
    if !lists.is_empty() {
        bail!("{} take(s) one value in the demo (it runs one GPU setup); `bench` and `scale` sweep lists of setups", lists.join(", "));
    }
    let o = args.split_options();
    if o.slices_per_gpu == 0 {
        bail!("--slices-per-gpu must be at least 1");
    }
    if o.is_single() {
        if o.gather == crate::cli::GatherChoice::Peer && args.backend != crate::cli::BackendChoice::Cpu {
            eprintln!("notice: --gather peer does not apply to one slice on one GPU (there is nothing to gather) and is ignored");
        }
        return Ok(());
    }
    if args.backend == crate::cli::BackendChoice::Cpu {
        // ignored_notice names them: they do not apply there.
        return Ok(());
    }
    if args.precision == crate::cli::Precision::F64 {
        bail!(
            "--precision f64 runs on one GPU in one slice; the split over slices and GPUs (--gpus, --slices-per-gpu, \
             --render-gpu-computes no, --gather nccl) is fp32 (given: {}): use --precision f32, or leave those options out",
            split_flags(args).join(", ")
        );
    }
    if args.step_mode {
        bail!("{} (given: {})", crate::backend::STEP_MODE_SPLIT, split_flags(args).join(", "));
    }
    Ok(())
}

/// The split options given on the command line (as typed), for messages.
fn split_flags(args: &DemoArgs) -> Vec<String> {
    let mut v = Vec::new();
    let o = args.split_options();
    if o.gpus != crate::cli::GpuCount::Count(1) {
        v.push(match o.gpus {
            crate::cli::GpuCount::All => "--gpus all".to_string(),
            crate::cli::GpuCount::Count(n) => format!("--gpus {n}"),
        });
    }
    if o.slices_per_gpu != 1 {
        v.push(format!("--slices-per-gpu {}", o.slices_per_gpu));
    }
    if !o.render_gpu_computes {
        v.push("--render-gpu-computes no".into());
    }
    if o.gather != crate::cli::GatherChoice::Auto {
        let name = clap::ValueEnum::to_possible_value(&o.gather).map(|p| p.get_name().to_string()).unwrap_or_default();
        v.push(format!("--gather {name}"));
    }
    v
}

/// The options given that do not apply to the backend or mode in force, in one line (a notice,
/// not silence): with `--backend cpu` the CUDA options typed or set away from their defaults;
/// headless, the window-only `--no-vsync`; without the overlay, `--ui-scale`. `None` when every
/// option given applies.
fn ignored_notice(args: &DemoArgs) -> Option<String> {
    let typed = |flag: &str| args.typed.iter().any(|t| t == flag);
    let mut parts = Vec::new();
    if args.backend == crate::cli::BackendChoice::Cpu {
        let cfg = args.backend_config();
        let cuda = crate::backend::select::cuda_only_options(&cfg.cuda, &args.typed);
        if !cuda.is_empty() {
            parts.push(format!("{} (the CPU backend never touches CUDA)", cuda.join(", ")));
        }
    }
    if args.headless && (args.no_vsync || typed("--no-vsync")) {
        parts.push("--no-vsync (a headless run has no window to synchronise with)".to_string());
    }
    if args.headless && typed("--present") {
        parts.push("--present (a headless run shows no window: its frames stay in the FBO)".to_string());
    }
    if args.solver == crate::cli::SolverChoice::Direct && typed("--theta") {
        parts.push("--theta (only --solver tree opens cells)".to_string());
    }
    if args.target_fps.is_some() && args.steps_per_frame() != crate::cli::StepsPerFrame::Auto {
        parts.push("--target-fps (only --steps-per-frame auto fills a frame rate)".to_string());
    }
    if args.init() == "figure-eight" && (args.bodies.is_some() || typed("--bodies")) {
        parts.push("--bodies (the figure-eight has always 3 bodies)".to_string());
    }
    if args.no_overlay && (args.ui_scale.is_some() || typed("--ui-scale")) {
        parts.push("--ui-scale (--no-overlay hides the overlay it scales)".to_string());
    }
    (!parts.is_empty()).then(|| format!("options that do not apply here are ignored: {}", parts.join("; ")))
}

/// Checks up front that `path` can be written, so that a run never learns it only at its end: an
/// existing file is opened for appending (nothing is changed), a new one is created and removed.
fn check_writable(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    let existed = path.exists();
    let r = std::fs::OpenOptions::new().append(true).create(true).open(path);
    match r {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => bail!("cannot write {flag} file {}: {e}; choose a path you can write", path.display()),
    }
}

/// Why a run asked for `n` frames ended after `done`: an interrupt before the last, or during
/// the last one's steps (`cut`, [`scene::Scene::last_frame_cut`]).
fn frames_interrupted(done: u64, n: u64, cut: bool) -> crate::stop::Interrupted {
    let last = if cut { " (the last one's steps stopped)" } else { "" };
    crate::stop::Interrupted(format!("after {done} of {n} frames{last}"))
}

/// Exit status of a windowed run whose display went away (the window destroyed by another
/// client, the X connection broken, the X server ended), after writing the outputs it could:
/// the state, and the screenshot from the last frame drawn (docs/troubleshooting.md).
pub const EXIT_DISPLAY_LOST: i32 = 3;

/// Nominal all-pairs rate of the CPU backend per thread (interactions/s): see
/// [`sim::cpu::NOMINAL_RATE_PER_THREAD`].
pub const CPU_INTERACTIONS_PER_THREAD: f64 = sim::cpu::NOMINAL_RATE_PER_THREAD;
/// Nominal all-pairs rate of the CUDA backend (interactions/s): 2.0e12 measured on an H200
/// (`bench --modes compute`, N ≥ 131072).
pub const GPU_INTERACTIONS_NOMINAL: f64 = 2.0e12;
/// A step estimated to take longer than this (s) needs `--allow-slow`.
pub const SLOW_STEP_S: f64 = 10.0;
/// Host bytes per body the demo needs at most (initial state, the last finite copy, the CPU
/// backend's arrays, the renderer's scratch, upload staging): the figure the state-file reader
/// limits N by too.
pub const HOST_BYTES_PER_BODY: u64 = sim::file_io::HOST_BYTES_PER_BODY;

/// Refuses N whose estimated step time exceeds [`SLOW_STEP_S`] unless `allow_slow`: the step's
/// terms by `solver` ([`sim::tree::step_terms`]) at the backend's nominal rate.
///
/// # Errors
/// The estimate, the rate it assumed and the remedy.
pub fn check_step_time(n: usize, solver: sim::tree::Solver, cpu: bool, allow_slow: bool) -> anyhow::Result<()> {
    let rate = nominal_rate(cpu);
    check_step_rate(n, sim::tree::step_terms(solver, n, !cpu), rate.per_s, &rate.basis.to_string(), allow_slow)
}

/// The nominal all-pairs rate (interactions/s) the estimates assume, and whose rate it is: the
/// CPU backend on this process's threads, or an H200-class GPU.
fn nominal_rate(cpu: bool) -> crate::backend::NominalRate {
    use crate::backend::{NominalRate, RateBasis};
    if cpu {
        let threads = rayon::current_num_threads();
        NominalRate { per_s: CPU_INTERACTIONS_PER_THREAD * threads as f64, basis: RateBasis::Cpu { threads, precision: None } }
    } else {
        NominalRate { per_s: GPU_INTERACTIONS_NOMINAL, basis: RateBasis::GpuClass }
    }
}

/// [`check_step_time`] before the backend exists: the same refusal, but no warning with
/// `allow_slow` (the check of the backend that was made gives it, once, with that backend's rate).
///
/// # Errors
/// As [`check_step_time`] without `allow_slow`.
fn refuse_slow_step(n: usize, solver: sim::tree::Solver, cpu: bool, allow_slow: bool) -> anyhow::Result<()> {
    if allow_slow {
        return Ok(());
    }
    check_step_time(n, solver, cpu, false)
}

/// Refuses a frame of `k` steps (`--steps-per-frame K`) estimated over [`SLOW_STEP_S`] unless
/// `allow_slow`, at the rate [`check_step_time`] assumes: a frame that long holds the window and
/// the outputs.
///
/// # Errors
/// The estimate and the remedies.
fn refuse_slow_frame(n: usize, k: u32, solver: sim::tree::Solver, cpu: bool, allow_slow: bool) -> anyhow::Result<()> {
    let rate = nominal_rate(cpu).per_s;
    let secs = sim::tree::step_terms(solver, n, !cpu) * f64::from(k) / rate;
    if secs > SLOW_STEP_S && !allow_slow {
        bail!(
            "one frame of --steps-per-frame {k} steps of N = {n} bodies is estimated at {}; give fewer steps a frame (or \
             --steps-per-frame auto), or pass --allow-slow to run anyway",
            human_seconds(secs)
        );
    }
    Ok(())
}

/// [`check_step_time`] for a step of `interactions` terms at `rate` interactions/s, the rate of
/// `what` (e.g. the backend's own [`crate::backend::BackendInfo::rate`]).
///
/// # Errors
/// The estimate, the rate it assumed and the remedy.
pub fn check_step_rate(n: usize, interactions: f64, rate: f64, what: &str, allow_slow: bool) -> anyhow::Result<()> {
    let secs = interactions / rate;
    if secs > SLOW_STEP_S {
        let msg = format!(
            "one step of N = {n} bodies is estimated at {} ({interactions:.2e} interactions at {rate:.2e} interactions/s, the \
             nominal rate of {what})",
            human_seconds(secs)
        );
        if !allow_slow {
            bail!("{msg}; use fewer bodies, or pass --allow-slow to run anyway");
        }
        tracing::warn!("{msg}; running anyway (--allow-slow)");
    }
    Ok(())
}

fn human_seconds(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.0} days", s / 86400.0),
    }
}

/// Refuses a preset N whose host memory would not fit what this machine has available
/// (`MemAvailable` of `/proc/meminfo`; where that cannot be read nothing is checked).
///
/// # Errors
/// The bytes needed and available, and the remedy.
fn check_host_memory(args: &DemoArgs) -> anyhow::Result<()> {
    check_host_memory_n(args.n_bodies()).map_err(|e| anyhow::anyhow!("--bodies {}: {e}", args.n_bodies()))
}

/// `check_host_memory` for `n` bodies (the overlay's reset too).
///
/// # Errors
/// The bytes needed and available, and the remedy.
pub fn check_host_memory_n(n: usize) -> anyhow::Result<()> {
    let Some(avail) = available_host_memory() else { return Ok(()) };
    let need = (n as u64).saturating_mul(HOST_BYTES_PER_BODY);
    if need > avail {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        bail!(
            "{n} bodies need about {:.1} GiB of host memory, more than the {:.1} GiB this machine has available; use fewer bodies",
            gib(need),
            gib(avail)
        );
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo`, bytes (`None` where it cannot be read).
fn available_host_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frames drawn.
    pub frames: u64,
    /// Mean wall time per frame (ms).
    pub mean_frame_ms: f64,
    /// Leapfrog steps taken (outside step mode).
    pub steps: u64,
    /// Steps per second of wall time, first frame's start to last frame's end.
    pub steps_per_s: f64,
    /// Backend label.
    pub label: String,
    /// The total energy's change between the first and the last diagnostics sample, where the
    /// run took two or more (`--diagnostics-interval`).
    pub energy: Option<EnergyChange>,
}

/// The relative change of the total energy E over a run: a leapfrog run at a fitting `--dt`
/// keeps it small (its error is bounded, of order dt²); a large one means the steps are too long
/// for the closest encounters, and the trajectories mean little even when they stay finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnergyChange {
    /// Frame of the first sample.
    pub from: u64,
    /// Frame of the last sample.
    pub to: u64,
    /// (E_last − E_first) / |E_first|.
    pub relative: f64,
    /// The time step in force at the end.
    pub dt: f32,
}

/// Above this relative energy change (10 %) the summary warns that the run is not physically
/// meaningful and names the remedy.
pub const ENERGY_CHANGE_WARNING: f64 = 0.10;

impl EnergyChange {
    /// The summary's line: the change, and where it is over [`ENERGY_CHANGE_WARNING`] (or not
    /// finite), the warning and the remedy.
    pub fn line(&self) -> String {
        let change = format!("energy change {:+.3e} (relative, frame {} to {})", self.relative, self.from, self.to);
        if self.relative.abs() > ENERGY_CHANGE_WARNING || !self.relative.is_finite() {
            format!(
                "warning: {change}: over {:.0} %, so the run is not physically meaningful at --dt {}; use a smaller --dt \
                 (or a larger --softening)",
                ENERGY_CHANGE_WARNING * 100.0,
                self.dt
            )
        } else {
            change
        }
    }
}

/// A step rate for the summary line: whole steps/s from 10 on, else with two decimals (a
/// long-step run's 0.64 steps/s is not "1").
pub fn steps_per_s_text(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.2}")
    }
}

impl Summary {
    /// Print the one-line summary to stdout.
    pub fn print(&self) {
        println!(
            "nbody-interop: {} frame{}, mean frame {:.3} ms, {} step{} ({:.1} per frame, {} steps/s), backend: {}",
            self.frames,
            if self.frames == 1 { "" } else { "s" },
            self.mean_frame_ms,
            self.steps,
            if self.steps == 1 { "" } else { "s" },
            self.steps as f64 / self.frames.max(1) as f64,
            steps_per_s_text(self.steps_per_s),
            self.label
        );
        if let Some(e) = &self.energy {
            println!("nbody-interop: {}", e.line());
        }
    }
}

#[cfg(test)]
mod energy_tests {
    use super::EnergyChange;

    #[test]
    fn a_large_energy_change_warns_with_the_remedy_and_a_small_one_does_not() {
        let small = EnergyChange { from: 1, to: 20, relative: 3.2e-6, dt: 0.01 };
        assert_eq!(small.line(), "energy change +3.200e-6 (relative, frame 1 to 20)");
        let large = EnergyChange { from: 1, to: 20, relative: -0.35, dt: 0.5 };
        let line = large.line();
        assert!(line.starts_with("warning: energy change -3.500e-1"), "{line}");
        assert!(line.contains("not physically meaningful at --dt 0.5") && line.contains("smaller --dt"), "{line}");
        let nan = EnergyChange { relative: f64::NAN, ..small };
        assert!(nan.line().starts_with("warning:"), "{}", nan.line());
    }
}
