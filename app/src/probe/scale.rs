//! `nbody-interop scale`: the step with the bodies split over 1, 2, 4, … GPUs
//! ([`crate::cuda::slices::SlicedStepper`]), timed per N, GPU count and slices per GPU.
//!
//! A row per (N, GPU count, slices per GPU), every row of an N with the kernel launch of its
//! first row: per-step host time (median and 99th percentile over the measured frames of frame
//! time / steps), the slowest slice's kernel time and gather time per step (CUDA events, medians
//! over every measured step), interactions/s (N² per step) and GFLOP/s (20 flops each), the
//! speedup and scaling efficiency against the 1-GPU row of the same N and slices per GPU (as
//! `bench` compares), and how far the positions ended from the baseline's: the first 1-GPU row
//! of the N, the fewest slices per GPU (the same steps from the same bodies; 0 when the split
//! reproduces the bits). `scale.json` (rows + run facts) and `scale.csv` (rows) are rewritten after every row,
//! so Ctrl-C keeps the rows finished.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use serde::Serialize;

use crate::bench::stats::median;
use crate::cli::{GpuCount, ScaleArgs, SliceOptions};
use crate::cuda::slices::SlicedStepper;
use crate::stop::{stopped, Interrupted};
use sim::init::initial_bodies;
use sim::PhysParams;

/// Body counts timed when `--bodies` is not given.
pub const DEFAULT_BODIES: [usize; 1] = [1 << 20];

/// One row of `scale.csv` / `scale.json` (ms, interactions/s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleRow {
    /// N.
    pub n: usize,
    /// GPUs used (devices 0 to gpus − 1).
    pub gpus: u32,
    /// Slices (gpus × slices per GPU).
    pub slices: u32,
    /// The device of each slice, e.g. `0;0` or `0;1;2;3`.
    pub devices: String,
    /// Bodies per slice (padded to the kernel's bodies per block).
    pub slice_bodies: usize,
    /// `none`, `nccl` or `peer`.
    pub gather: String,
    /// The gather path in words (NCCL version; direct or staged peer copies, and why).
    pub gather_detail: String,
    /// Step kernel, e.g. `nbody_step_m4x1`.
    pub kernel: String,
    /// Threads per block.
    pub block_size: u32,
    /// Steps per measured frame.
    pub steps_per_frame: u32,
    /// Measured frames.
    pub frames: u32,
    /// Host time per step (median over frames of frame time / steps), ms.
    pub step_ms_median: f64,
    /// Its 99th percentile, ms.
    pub step_ms_p99: f64,
    /// The slowest slice's kernel time per step (median over steps), ms.
    pub kernel_ms_median: f64,
    /// The slowest slice's gather time per step (median over steps), ms.
    pub gather_ms_median: f64,
    /// N² / step time (median).
    pub interactions_per_s: f64,
    /// 20 flops per interaction (GPU Gems 3, ch. 31) at that rate, GFLOP/s.
    pub gflops: f64,
    /// Interactions/s over the 1-GPU row's of this N with as many slices per GPU (None on 1-GPU
    /// rows and without such a row).
    pub speedup: Option<f64>,
    /// speedup / gpus.
    pub scaling_efficiency: Option<f64>,
    /// Largest |Δ| of a position coordinate against the baseline's final positions: the first
    /// 1-GPU row of this N, with the fewest slices per GPU (None for that row and without one;
    /// the name is from when `scale` took one slice count).
    pub max_abs_diff_vs_1gpu: Option<f64>,
    /// Every slice's copy of the positions is the same bits at the end.
    pub copies_agree: bool,
}

/// Facts of the run and its rows (`scale.json`).
#[derive(Debug, Serialize)]
struct ScaleDoc {
    tool: &'static str,
    version: &'static str,
    provenance: crate::provenance::Provenance,
    status: String,
    date: String,
    gpu_name: String,
    cuda_devices: i32,
    driver_version: String,
    build_profile: &'static str,
    init: String,
    seed: u64,
    dt: f32,
    softening: f32,
    rows: Vec<ScaleRow>,
}

/// Runs `scale`.
///
/// # Errors
/// Bad arguments (a GPU count above the devices, no frames, 0 slices per GPU, `--gather nccl`
/// with more than one slice per GPU); no CUDA driver or device; a failure while stepping; Ctrl-C
/// (after writing the finished rows).
pub fn run(args: &ScaleArgs) -> anyhow::Result<()> {
    let (steps, slices_list, bodies_list) = check_args(args)?;
    let api = crate::libraries::init(interop::StreamSemantics::Legacy).context("loading the CUDA driver")?;
    let count = interop::Device::count(&api).context("cuDeviceGetCount")?;
    let mut gpus: Vec<u32> = args.gpu.gpus.iter().map(|g| g.resolve(count.max(0) as u32)).collect::<anyhow::Result<_>>()?;
    gpus.sort_unstable();
    gpus.dedup();
    if gpus.first() != Some(&1) {
        eprintln!(
            "notice: --gpus has no 1: the speedup, scaling-efficiency and position-difference columns stay empty (they \
             compare with 1-GPU rows)"
        );
    }
    let first = interop::Device::get(&api, 0).context("cuDeviceGet(0)")?;
    let json_path: PathBuf = args.out.join("scale.json");
    let csv_path: PathBuf = args.out.join("scale.csv");
    crate::bench::prepare_out(&args.out, &[json_path.clone(), csv_path.clone(), crate::provenance::sidecar_path(&csv_path)])?;
    let params = PhysParams { g: args.sim.gravitational_constant, dt: args.sim.dt, softening: args.sim.softening };
    let init = args.sim.init_or(crate::cli::BENCH_INIT).to_string();
    let mut doc = new_doc(&api, &first, count, (&init, args.sim.seed), params);
    let write = |doc: &ScaleDoc| write_files(doc, &json_path, &csv_path);
    crate::stop::install();
    let mut outcome = Ok(());
    let mut write_err = None;
    'all: for &n in &bodies_list {
        let bodies = initial_bodies(&init, n, args.sim.seed, params.g)?;
        crate::bench::modes::check_count(&init, &bodies, n)?;
        let mut base = Baseline::default();
        let mut launch = None;
        for (g, spg) in gpus.iter().flat_map(|&g| slices_list.iter().map(move |&spg| (g, spg))) {
            // Devices 0 to g − 1, each with its slices (the demo's order, device 0 first).
            let split = SliceOptions { gpus: GpuCount::Count(g), slices_per_gpu: spg, gather: args.gpu.gather, render_gpu_computes: true };
            let devices = split.devices(count.max(0) as u32, 0)?;
            let r = measure_row(&api, args, &bodies, &devices, (g, spg), steps, params, &mut base, &mut launch);
            match r {
                Ok(Some(row)) => {
                    println!("{}", row_line(n, (g, spg), &row));
                    doc.rows.push(row);
                    if let Err(e) = write(&doc) {
                        write_err = Some(e);
                        break 'all;
                    }
                }
                Ok(None) => {
                    outcome = Err(Interrupted(format!("after {} finished row(s); they are in {}", doc.rows.len(), args.out.display())).into());
                    break 'all;
                }
                Err(e) => {
                    outcome = Err(e.context(format!("N = {n}, {g} GPU(s), {spg} slice(s) per GPU")));
                    break 'all;
                }
            }
        }
    }
    doc.status = match &outcome {
        Ok(()) => "complete".into(),
        Err(e) if e.is::<Interrupted>() => "interrupted".into(),
        Err(e) => format!("error: {e:#}"),
    };
    if write_err.is_none() {
        write_err = write(&doc).err();
        println!("wrote {} and {}", json_path.display(), csv_path.display());
    }
    crate::bench::with_write_error(outcome, write_err)
}

/// Refuses what cannot run, before the driver loads; returns the steps per frame and the sorted,
/// distinct slices per GPU and body counts.
fn check_args(args: &ScaleArgs) -> anyhow::Result<(u32, Vec<u32>, Vec<usize>)> {
    if let Some(crate::cli::StepsPerFrame::Auto) = args.sim.steps_per_frame {
        bail!("--steps-per-frame auto: scale times a fixed count of steps per frame; give a number (default 1)");
    }
    let steps = args.sim.fixed_steps_per_frame()?;
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    crate::cuda::settings::check_slices_per_gpu(&args.gpu.slices_per_gpu, args.gpu.gather)?;
    if args.gpu.render_gpu_computes.contains(&crate::cli::YesNo::No) {
        bail!(
            "--render-gpu-computes no: scale draws nothing, so every GPU it uses computes; `bench --render-gpu-computes yes,no` measures that setup"
        );
    }
    let mut slices_list = args.gpu.slices_per_gpu.clone();
    slices_list.sort_unstable();
    slices_list.dedup();
    let mut bodies_list = if args.bodies.is_empty() { DEFAULT_BODIES.to_vec() } else { args.bodies.clone() };
    if let Some(n) = bodies_list.iter().find(|&&n| n == 0 || n > crate::cuda::kernel_set::MAX_BODIES) {
        bail!("--bodies: N = {n} is not valid; every body count must be from 1 to {}", crate::cuda::kernel_set::MAX_BODIES);
    }
    bodies_list.sort_unstable();
    bodies_list.dedup();
    kernels::launch_rule::validate_block_size(args.sim.block_size).context("--block-size")?;
    if !(args.sim.dt.is_finite() && args.sim.dt > 0.0) {
        bail!("--dt must be a finite number > 0 (got {})", args.sim.dt);
    }
    if !(args.sim.softening.is_finite() && args.sim.softening >= 0.0) {
        bail!("--softening must be a finite number ≥ 0 (got {})", args.sim.softening);
    }
    Ok((steps, slices_list, bodies_list))
}

/// The document of a run that has measured no row yet (`status` running): the GPU `first` (of
/// `count`), the driver, the scene `(init, seed)` and `params`.
fn new_doc(api: &Arc<interop::Api>, first: &interop::Device, count: i32, (init, seed): (&str, u64), params: PhysParams) -> ScaleDoc {
    ScaleDoc {
        tool: "nbody-interop scale",
        version: env!("CARGO_PKG_VERSION"),
        provenance: crate::provenance::Provenance::now(
            first.info().ok().map(|i| crate::provenance::GpuFacts::of(&i, interop::driver::entry::cuda_version_string(api.driver_version()))),
        ),
        status: "running".into(),
        date: chrono::Utc::now().to_rfc3339(),
        gpu_name: first.name().unwrap_or_default(),
        cuda_devices: count,
        driver_version: interop::driver::entry::cuda_version_string(api.driver_version()),
        build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
        init: init.to_string(),
        seed,
        dt: params.dt,
        softening: params.softening,
        rows: Vec::new(),
    }
}

/// Writes `doc` to `json_path`, and its rows to `csv_path` with the provenance sidecar.
fn write_files(doc: &ScaleDoc, json_path: &Path, csv_path: &Path) -> anyhow::Result<()> {
    let mut json = serde_json::to_vec_pretty(doc).context("serialising scale.json")?;
    json.push(b'\n');
    crate::bench::report::write_atomic(json_path, &json)?;
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in &doc.rows {
        w.serialize(r).context("serialising scale.csv")?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}")).context("serialising scale.csv")?;
    doc.provenance.write_sidecar(csv_path)?;
    crate::bench::report::write_atomic(csv_path, &bytes)
}

/// The line said for `row`, of N = `n` on `g` GPUs with `spg` slices each.
fn row_line(n: usize, (g, spg): (u32, u32), row: &ScaleRow) -> String {
    format!(
        "N={n} gpus={g} slices={} ({spg} per GPU): {:.3} ms/step ({:.3e} interactions/s), gather {:.3} ms/step via {}{}{}",
        row.slices,
        row.step_ms_median,
        row.interactions_per_s,
        row.gather_ms_median,
        row.gather,
        row.scaling_efficiency.map(|e| format!(", scaling efficiency {:.1} %", e * 100.0)).unwrap_or_default(),
        row.max_abs_diff_vs_1gpu.map(|d| format!(", positions max |Δ| {d:.3e} from the baseline")).unwrap_or_default()
    )
}

/// What the rows of one N compare with: the 1-GPU rows' rates by slices per GPU (speedup) and
/// the final positions of the first 1-GPU row, the fewest slices per GPU (the bits).
#[derive(Default)]
struct Baseline {
    rates: Vec<(u32, f64)>,
    positions: Option<Vec<[f32; 4]>>,
}

impl Baseline {
    /// A row's speedup (its rate over the 1-GPU row's with as many slices per GPU; None for 1
    /// GPU) and its positions' largest |Δ| from the first 1-GPU row's; then, for a 1-GPU row,
    /// records its rate and (the first time) its positions for the rows after it.
    fn compare_and_record(&mut self, gpus: u32, slices_per_gpu: u32, rate: f64, pos: Vec<[f32; 4]>) -> (Option<f64>, Option<f64>) {
        let speedup = if gpus > 1 { self.rates.iter().find(|(s, _)| *s == slices_per_gpu).map(|(_, r1)| rate / r1) } else { None };
        let diff = self
            .positions
            .as_ref()
            .map(|p1| pos.iter().flatten().zip(p1.iter().flatten()).map(|(a, b)| f64::from((a - b).abs())).fold(0.0, f64::max));
        if gpus == 1 {
            self.rates.push((slices_per_gpu, rate));
            self.positions.get_or_insert(pos);
        }
        (speedup, diff)
    }
}

/// Measures one (N, GPU count, slices per GPU) row; `Ok(None)` when Ctrl-C stopped it. A 1-GPU
/// row leaves its rate in `base` for the rows of more GPUs with as many slices per GPU, and the
/// first (the fewest slices per GPU: the sweep's order) its final positions for every row after it.
#[allow(clippy::too_many_arguments)]
fn measure_row(
    api: &Arc<interop::Api>,
    args: &ScaleArgs,
    bodies: &sim::Bodies,
    devices: &[i32],
    (gpus, slices_per_gpu): (u32, u32),
    steps: u32,
    params: PhysParams,
    base: &mut Baseline,
    launch: &mut Option<kernels::launch_rule::LaunchConfig>,
) -> anyhow::Result<Option<ScaleRow>> {
    let n = bodies.len();
    let mut s = SlicedStepper::new(
        api,
        interop::SchedFlag::Auto,
        devices,
        bodies,
        args.sim.block_size,
        *launch,
        params,
        args.sim.kernel.as_deref(),
        args.sim.step_kernel,
        args.gpu.gather,
    )?;
    // Every row of this N runs the first row's kernel launch, so that rows differ only in the split.
    launch.get_or_insert(s.launch());
    let mut step_ms = Vec::new();
    let (mut kernel_ms, mut gather_ms) = (Vec::new(), Vec::new());
    for f in 0..args.warmup + args.frames {
        if stopped() {
            return Ok(None);
        }
        let fr = s.frame(steps)?;
        if f >= args.warmup {
            step_ms.push(fr.wall_ms / f64::from(steps));
            kernel_ms.extend(fr.kernel_ms);
            gather_ms.extend(fr.gather_ms);
        }
    }
    let pos = s.positions()?;
    if !pos.iter().flatten().all(|x| x.is_finite()) {
        bail!("the positions are not finite after the run: the step diverged (a smaller --dt or a larger --softening)");
    }
    let step = median(&step_ms).unwrap_or(f64::NAN);
    let rate = (n as f64) * (n as f64) / (step / 1e3);
    let (speedup, diff) = base.compare_and_record(gpus, slices_per_gpu, rate, pos);
    let layout = s.layout();
    let launch = s.launch();
    let row = ScaleRow {
        n,
        gpus,
        slices: devices.len() as u32,
        devices: devices.iter().map(ToString::to_string).collect::<Vec<_>>().join(";"),
        slice_bodies: layout.len,
        gather: s.gather().name().into(),
        gather_detail: s.gather().describe(),
        kernel: launch.kernel_name(),
        block_size: launch.block,
        steps_per_frame: steps,
        frames: args.frames,
        step_ms_median: step,
        step_ms_p99: crate::bench::stats::Summary::of(&step_ms).map_or(f64::NAN, |x| x.p99),
        kernel_ms_median: median(&kernel_ms).unwrap_or(f64::NAN),
        gather_ms_median: median(&gather_ms).unwrap_or(f64::NAN),
        interactions_per_s: rate,
        gflops: rate * 20.0 / 1e9,
        speedup,
        scaling_efficiency: speedup.map(|x| x / f64::from(gpus)),
        max_abs_diff_vs_1gpu: diff,
        copies_agree: s.copies_agree()?,
    };
    Ok(Some(row))
}

#[cfg(test)]
mod tests {
    use super::Baseline;

    /// The sweep's order for `--gpus 1,2 --slices-per-gpu 1,2`: (1, 1), (1, 2), (2, 1), (2, 2).
    /// Speedups compare equal slices per GPU; positions compare with the (1, 1) row.
    #[test]
    fn rows_compare_with_one_gpu_at_as_many_slices_and_with_the_first_row_s_bits() {
        let mut base = Baseline::default();
        let at = |x: f32| vec![[x, 0.0, 0.0, 1.0]];
        assert_eq!(base.compare_and_record(1, 1, 10.0, at(1.0)), (None, None));
        assert_eq!(base.compare_and_record(1, 2, 8.0, at(1.0)), (None, Some(0.0)));
        assert_eq!(base.compare_and_record(2, 1, 19.0, at(1.5)), (Some(1.9), Some(0.5)));
        assert_eq!(base.compare_and_record(2, 2, 16.0, at(1.0)), (Some(2.0), Some(0.0)));
        // Without a 1-GPU row (--gpus 2,4) nothing is compared.
        let mut none = Baseline::default();
        assert_eq!(none.compare_and_record(2, 1, 19.0, at(1.0)), (None, None));
        assert_eq!(none.compare_and_record(4, 1, 30.0, at(1.0)), (None, None));
    }
}
