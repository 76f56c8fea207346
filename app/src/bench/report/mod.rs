//! Results of `bench`: the rows, the stdout table, `bench.json`, `bench.csv` and `bench.png`.
//!
//! Both files hold one [`Row`] per (mode, N, GPU setup) whose measurement finished. They are rewritten after
//! every finished row (written to a temporary file in the same directory, then renamed over the
//! old one), so an interrupted or failed run keeps every row it finished.
//!
//! # Columns (CSV header = JSON keys of each row)
//! Times are milliseconds unless the name says µs; empty (CSV) or `null` (JSON) where a mode has
//! no such step or fact:
//! - `mode`, `n` (bodies), `precision` (`f32`, or `f64` with `--precision f64`), `steps_per_frame`, `block_size` (CUDA threads per block; empty for
//!   cpu), `bodies_per_thread` (P of the step kernel; CUDA modes), `threads_per_body` (S of the j-split; 1: none), `mass_scaled` (the step kernel is `nbody_step_mPxS`, kernels/README.md; CUDA modes), `equal_mass` (the step kernel is `nbody_step_uPxS`, for states whose masses are all equal, kernels/README.md "Equal masses"; CUDA modes), `stream_k_ctas` (the persistent CTAs of a stream-K step, kernels/README.md "stream-K"; empty: one plain launch per step), `frames` (measured frames, all
//!   rounds), `rounds`, `warmup` (untimed frames per round), `width`, `height` (framebuffer px), `max_sprite_px` (sprite diameter cap, px; GL modes);
//! - `gpus`, `slices`, `render_gpu_computes`, `gather`, `devices` (CUDA modes): the GPU setup
//!   (`--gpus`, `--slices-per-gpu`, `--render-gpu-computes`): GPUs that compute, slices in all,
//!   whether the GPU GL draws on computes a slice (`false`: it only receives the positions and
//!   draws; compute rows of that setup leave the same device out), the gather path (`none` for
//!   one slice, `nccl`, `peer`) and the device of each slice (`0;1`);
//! - `frame_ms_{median,p95,p99,max}`: host time of the whole frame (simulate + draw into the FBO +
//!   `glFinish`; compute: kernel launches + event sync);
//! - `map_ms_*`, `kernel_ms_*`, `unmap_ms_*`: CUDA-event times of `cuGraphicsMapResources`, the
//!   kernel launches and `cuGraphicsUnmapResources` (cpu: `kernel_ms` is the CPU force/step time;
//!   external: `map_ms` is the host wait on the GL fence, `unmap_ms` the host wait on the CUDA
//!   event after the launches);
//! - `upload_ms_*`: copy (device → pinned host → `glBufferSubData`) and cpu (`glBufferSubData`);
//! - `draw_ms_*`: GL timer-query time of the body draw (empty without `GL_TIME_ELAPSED`);
//! - `gather_ms_{median,p99}`: split setups, the slowest slice's gather time of each frame's last
//!   step (CUDA events on the slices' streams, from its kernel's end to its gather's end: with
//!   the wait for the other slices' kernels, see `cuda::slices::SplitFrame`);
//! - `theta`, `tree_{build,moments,walk}_ms_{median,p99}`, `tree_interactions_per_body`,
//!   `tree_interactions_per_s` (tree and cpu-tree modes): the opening angle; the tree's phases in
//!   the last step of each frame (tree: CUDA events: box, keys, sort, tree and groups; moments;
//!   walk with the leapfrog update; cpu-tree: the host clock: cube, keys, sort, cells and groups;
//!   moments; the grouped walks and the accelerations put back in the bodies' order); the terms evaluated per body (leaves and accepted cells, median); and
//!   those terms per second over the median kernel time. A tree row leaves `interactions_per_s`
//!   empty and gives `effective_interactions_per_s`: `N² · steps` over the same time, what the
//!   direct sum would need, not a rate of anything evaluated; its `gflops` count 20 flops per
//!   term evaluated;
//! - `interactions_per_s`, `gflops` (0 for `draw`, which simulates nothing): `N² · steps` per frame over the median kernel time (20 flops
//!   per interaction), or over the median frame time where there is no kernel time;
//!   `rate_basis` says which (`kernel` or `frame`); `interactions_per_s_frame`, `gflops_frame`:
//!   always over the median frame time; `effective_interactions_per_s` and
//!   `effective_interactions_per_s_frame`: the same for tree rows, which leave the two
//!   `interactions_per_s` columns empty;
//! - `cpu_isa`, `cpu_mhz`, `cpu_threads`, `fma_peak_gflops_per_core` (cpu and cpu-tree): the
//!   instruction set the CPU backend's SIMD code runs on (`avx512`, `avx2`, `scalar`: what
//!   `pulp` dispatched to), `cpu MHz` of `/proc/cpuinfo`, the rayon threads, and one core's FMA
//!   peak measured on that instruction set (`sim::cpu::peak`: 12 independent chains of vector
//!   FMAs on one thread, 2 flops per lane and FMA, the best of 5 runs of about 7 ms: what the
//!   core does at the clock it runs at); `interactions_per_s_per_core` (cpu): `interactions_per_s`
//!   over the threads (one per core where the CPU has no SMT); `fma_peak_fraction` (cpu): that
//!   rate × 20 flops over the measured peak; `fma_peak_fraction_cpuinfo_clock`: over the nominal
//!   peak instead, 2 FMA pipes × 8 f32 lanes × 2 flops × the `cpu MHz` clock
//!   ([`NOMINAL_FLOPS_PER_CYCLE`]; a core that runs faster than `/proc/cpuinfo` says, as under
//!   boost, can exceed 1);
//! - `speedup`, `scaling_efficiency` (CUDA modes): the median frame time of the same mode, N and
//!   precision on one computing GPU with the render GPU computing and as many slices per GPU,
//!   over this row's (a rate ratio), and that over `gpus`; empty for that 1-GPU row itself and
//!   where the run has none. The 1-GPU row with one slice runs the plain stepper (a stream-K step
//!   where the launch rule picks it), a split runs plain launches: the ratio is against the best
//!   one GPU does, not against the same kernel (`scale` compares equal launches);
//! - `overhead_us`, `overhead_pct`: median frame time of the mode − median frame time of
//!   `compute` at the same N and GPU setup (cpu: the first compute row of its N), in µs and in %
//!   of the compute median (empty for compute, draw, and when compute was not measured there):
//!   with `--render-gpu-computes no`, the interop frame's cost with no context switch on any GPU;
//! - `interop_us`: overhead − median frame time of `draw` at the same N: what the mode costs
//!   beyond the kernel alone and the GL frame alone (the handshakes between CUDA and GL);
//!   empty for cpu and where compute or draw was not measured;
//! - `spread_us`, `spread_pct`: max − min of the per-round medians of the frame time, in µs and
//!   in % of the overall median (0 with one round);
//! - `diverged`: `true` when the state held NaN or ∞ after a round's frames (checked outside the
//!   timed frames): the timings are of non-finite arithmetic and the run exits non-zero;
//! - `gpu_name`, `driver_version` (CUDA modes), `gl_vendor`, `gl_renderer`, `gl_version`,
//!   `egl_device` (GL modes), `stream`, `register_flags`, `map_flags`, `ctx_sched` (the CUDA
//!   options the mode ran with; the flags only for the map modes), `build_profile` (`debug`/`release`), `date` (start of the run,
//!   UTC, RFC 3339), `host` (host name).
//!
//! `bench.json` is `{"schema_version", "tool", "provenance": {schema, program, version, commit,
//! dirty, command_line, date_utc, host, build_profile, cpu: {model, cores, threads}, gpu: {name,
//! uuid, compute_capability, multiprocessors, driver, cuda, sm_clock_mhz, memory_clock_mhz} or
//! null}, "status", "complete", "skipped": [{mode, n, reason}], "rows": [...]}`
//! ([`crate::provenance`]; `bench.csv`'s is in `bench.csv.provenance.json`); `status` is `complete`, `running`, `interrupted` or `error: <message>`, or
//! `incomplete: …` for a run that went to its end without modes asked for by name that could not
//! run here (those are also added to `interrupted` and `error`); `complete` is true only for
//! `complete`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use serde::Serialize;

use crate::cli::BenchMode;
pub(crate) use crate::provenance::write_atomic;
use crate::provenance::Provenance;
use sim::{interactions, FLOPS_PER_INTERACTION};

mod columns;
mod plot;
mod table;

pub use columns::{
    ComparisonColumns, CpuColumns, LaunchColumns, ProvenanceColumns, RateColumns, Row, SamplingColumns, SetupColumns, TimeColumns, TreeColumns,
    NOMINAL_FLOPS_PER_CYCLE,
};

pub use plot::plot;
pub(crate) use table::opt;
pub use table::table;

/// What was measured for one (mode, N): the statistics and the facts of the run.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The mode.
    pub mode: BenchMode,
    /// Bodies N.
    pub n: usize,
    /// The step and its kernel launch: the row's [`LaunchColumns`].
    pub launch: LaunchColumns,
    /// How much was measured, and the framebuffer: the row's [`SamplingColumns`].
    pub sampling: SamplingColumns,
    /// The timed parts of the frame (ms): the row's [`TimeColumns`].
    pub times: TimeColumns,
    /// Median frame time of each round (ms).
    pub round_medians: Vec<f64>,
    /// The state was non-finite after a round's frames.
    pub diverged: bool,
    /// `f32` or `f64` (`--precision`).
    pub precision: &'static str,
    /// Facts about the devices and options.
    pub meta: RowMeta,
    /// The GPU setup of a CUDA mode (`None` for draw and cpu).
    pub setup: Option<SetupFacts>,
    /// The tree mode's opening angle, phases and interactions (`None` for the other modes).
    pub tree: Option<TreeFacts>,
}

/// What a tree row measured besides the frame: the row's [`TreeColumns`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeFacts {
    /// Opening angle θ.
    pub theta: f32,
    /// Build (box, keys, sort, tree, groups), moments and walk (with the leapfrog update) of each
    /// frame's last step (ms; CUDA events).
    pub build: crate::bench::stats::Summary,
    /// See `build`.
    pub moments: crate::bench::stats::Summary,
    /// See `build`.
    pub walk: crate::bench::stats::Summary,
    /// Median terms per body (leaves and accepted cells).
    pub per_body: f64,
}

/// The GPU setup a CUDA row ran in (`--gpus`, `--slices-per-gpu`, `--render-gpu-computes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupFacts {
    /// GPUs that compute (distinct devices among the slices).
    pub gpus: u32,
    /// Slices in all.
    pub slices: u32,
    /// The GPU GL draws on computes a slice (for compute: the device GL would draw on).
    pub render_gpu_computes: bool,
    /// `none` (one slice), `nccl` or `peer`.
    pub gather: String,
    /// The device of each slice, e.g. `0;0` or `1;2;3`.
    pub devices: String,
}

impl SetupFacts {
    /// What rows of one setup share: GPUs, slices, the render GPU's role.
    fn key(&self) -> (u32, u32, bool) {
        (self.gpus, self.slices, self.render_gpu_computes)
    }
}

/// A setup's short label from its parts, e.g. `2 GPUs`, `1 GPU × 2 slices`, `1 GPU + render GPU`.
fn setup_label(gpus: u32, slices: u32, render_gpu_computes: bool) -> String {
    let mut l = format!("{gpus} GPU{}", if gpus == 1 { "" } else { "s" });
    if slices != gpus {
        let _ = write!(l, " × {} slices", slices / gpus.max(1));
    }
    if !render_gpu_computes {
        l.push_str(" + render GPU");
    }
    l
}

/// True when a row ran in a GPU setup other than the plain one (one GPU, one slice, the render
/// GPU computing).
fn has_setups(rows: &[Row]) -> bool {
    rows.iter().any(|r| r.setup.gpus.is_some_and(|g| g != 1) || r.setup.slices.is_some_and(|k| k != 1) || r.setup.render_gpu_computes == Some(false))
}

/// A row's mode with its precision and, when `setups` (the run has a setup other than the
/// plain one), its GPU setup: `map`, `map f64`, `map [2 GPUs]`.
pub(crate) fn row_label(r: &Row, setups: bool) -> String {
    let mut l = if r.precision == "f64" { format!("{} f64", r.mode) } else { r.mode.clone() };
    if let (true, Some(g), Some(k), Some(c)) = (setups, r.setup.gpus, r.setup.slices, r.setup.render_gpu_computes) {
        let _ = write!(l, " [{}]", setup_label(g, k, c));
    }
    l
}

/// Device and option facts of a row; `None` where they do not apply to the mode.
#[derive(Debug, Clone, Default)]
pub struct RowMeta {
    /// CUDA device name.
    pub gpu_name: Option<String>,
    /// CUDA driver version, e.g. `12.8`.
    pub driver_version: Option<String>,
    /// `GL_VENDOR`.
    pub gl_vendor: Option<String>,
    /// `GL_RENDERER`.
    pub gl_renderer: Option<String>,
    /// `GL_VERSION`.
    pub gl_version: Option<String>,
    /// The EGL device of the headless context.
    pub egl_device: Option<String>,
    /// Stream kind.
    pub stream: Option<String>,
    /// Register flags.
    pub register_flags: Option<String>,
    /// Map flags.
    pub map_flags: Option<String>,
    /// Context scheduling flag.
    pub ctx_sched: Option<String>,
    /// The CPU modes: the core's FMA peak and the threads the CPU backend ran on.
    pub cpu: Option<(sim::cpu::peak::FmaPeak, usize)>,
}

/// Facts of the whole run, the same in every row.
#[derive(Debug, Clone)]
pub struct RunMeta {
    /// `debug` or `release`.
    pub build_profile: &'static str,
    /// Start of the run, UTC, RFC 3339.
    pub date: String,
    /// Host name (empty when unknown).
    pub host: String,
}

/// A mode, or a (mode, N), that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    /// The mode.
    pub mode: String,
    /// The body count, when only that N was skipped.
    pub n: Option<usize>,
    /// Why.
    pub reason: String,
}

/// The version of `bench.json`'s layout: 2 added `schema_version`, `git_commit`,
/// `command_line` and `machine`; 3 gathers them, with the CPU and the GPU's UUID, into
/// `provenance` ([`crate::provenance`]); tree rows give their N²/t rate as
/// `effective_interactions_per_s`, never as `interactions_per_s`.
pub const SCHEMA_VERSION: u32 = 3;

/// Contents of `bench.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Document<'a> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `nbody-interop bench`.
    pub tool: &'static str,
    /// Program, commit, command line, date, host, CPU and GPU of the run.
    pub provenance: &'a Provenance,
    /// `complete`, `running`, `interrupted`, `incomplete: requested mode(s) could not run here: …`
    /// or `error: <message>` (the last two, when modes asked for could not run, name them too).
    pub status: String,
    /// True when the run went to its end with every mode asked for by name and every N of `cpu`
    /// when it was named without `--skip-slow` (other skipped sizes, and modes of the default
    /// list that cannot run here, are listed in `skipped`).
    pub complete: bool,
    /// What was not measured.
    pub skipped: &'a [Skipped],
    /// The finished rows.
    pub rows: &'a [Row],
}

/// The CLI name of a mode (`map-separate`, ...).
pub fn mode_name(m: BenchMode) -> String {
    clap::ValueEnum::to_possible_value(&m).map(|v| v.get_name().to_string()).unwrap_or_else(|| format!("{m:?}"))
}

/// The rows of `measured`, with the overhead against `compute` at the same N (and, for CUDA
/// modes, the same GPU setup) and the scaling against the mode's 1-GPU row filled in.
pub fn rows(measured: &[Measured], run: &RunMeta) -> Vec<Row> {
    measured.iter().map(|m| row(m, measured, run)).collect()
}

/// The row of `m`, one of `measured`.
fn row(m: &Measured, measured: &[Measured], run: &RunMeta) -> Row {
    // The draw mode simulates nothing.
    let work = if m.mode == BenchMode::Draw { 0.0 } else { interactions(m.n, m.launch.steps_per_frame) };
    let frame_s = m.times.frame.median * 1e-3;
    let ips_frame = work / frame_s;
    // A tree row's flops are those of the terms it evaluated, not of the N² it stands for.
    let flop_ratio = m.tree.map_or(1.0, |t| t.per_body / m.n as f64);
    let (ips, basis) = match m.times.kernel {
        Some(k) if k.median > 0.0 => (work / (k.median * 1e-3), "kernel"),
        _ => (ips_frame, "frame"),
    };
    let setup = m.setup.as_ref();
    Row {
        mode: mode_name(m.mode),
        n: m.n,
        precision: m.precision.to_string(),
        setup: SetupColumns {
            gpus: setup.map(|s| s.gpus),
            slices: setup.map(|s| s.slices),
            render_gpu_computes: setup.map(|s| s.render_gpu_computes),
            gather: setup.map(|s| s.gather.clone()),
            devices: setup.map(|s| s.devices.clone()),
        },
        launch: m.launch.clone(),
        sampling: m.sampling.clone(),
        times: m.times,
        tree: TreeColumns::of(m.tree, m.n, m.launch.steps_per_frame, m.times.kernel.map(|k| k.median)),
        rates: RateColumns {
            interactions_per_s: m.tree.is_none().then_some(ips),
            effective_interactions_per_s: m.tree.is_some().then_some(ips),
            gflops: ips * flop_ratio * FLOPS_PER_INTERACTION * 1e-9,
            rate_basis: basis.to_string(),
            interactions_per_s_frame: m.tree.is_none().then_some(ips_frame),
            effective_interactions_per_s_frame: m.tree.is_some().then_some(ips_frame),
            gflops_frame: ips_frame * flop_ratio * FLOPS_PER_INTERACTION * 1e-9,
        },
        cpu: m.meta.cpu.as_ref().map_or_else(CpuColumns::default, |(peak, threads)| CpuColumns::of(peak, *threads, m.tree.is_none().then_some(ips))),
        comparison: comparison(m, measured),
        provenance: provenance(m.meta.clone(), run),
    }
}

/// `m`'s comparisons with the other rows of `measured`: the overhead against `compute` at the
/// same N (and, for CUDA modes, the same GPU setup), the scaling against the mode's 1-GPU row,
/// and the spread of its round medians.
fn comparison(m: &Measured, measured: &[Measured]) -> ComparisonColumns {
    let key = |m: &Measured| m.setup.as_ref().map(SetupFacts::key);
    // cpu (no setup) compares with the first compute row of its N.
    let compute = measured
        .iter()
        .filter(|c| c.mode == BenchMode::Compute && c.n == m.n && !matches!(m.mode, BenchMode::Compute | BenchMode::Tree | BenchMode::Draw))
        .find(|c| m.setup.is_none() || key(c) == key(m))
        .map(|c| c.times.frame.median);
    // The scaling: frame rates against the same mode's row on one computing GPU with the
    // render GPU computing and as many slices per GPU.
    let speedup = m.setup.as_ref().and_then(|s| {
        let per_gpu = s.slices / s.gpus.max(1);
        let base = measured.iter().find(|b| {
            b.mode == m.mode && b.n == m.n && b.precision == m.precision && b.setup.as_ref().is_some_and(|t| t.key() == (1, per_gpu, true))
        })?;
        (!std::ptr::eq(base, m)).then(|| base.times.frame.median / m.times.frame.median)
    });
    let scaling_efficiency = speedup.zip(m.setup.as_ref()).map(|(x, s)| x / f64::from(s.gpus.max(1)));
    let overhead_ms = compute.map(|c| m.times.frame.median - c);
    let draw_frame = measured.iter().find(|d| d.mode == BenchMode::Draw && d.n == m.n && !m.mode.is_cpu()).map(|d| d.times.frame.median);
    // What the mode costs beyond the kernel alone and the GL frame alone.
    let interop_ms = overhead_ms.zip(draw_frame).map(|(o, d)| o - d);
    let spread_ms = super::stats::spread(&m.round_medians);
    ComparisonColumns {
        speedup,
        scaling_efficiency,
        overhead_us: overhead_ms.map(|o| o * 1e3),
        overhead_pct: overhead_ms.zip(compute).map(|(o, c)| 100.0 * o / c),
        interop_us: interop_ms.map(|o| o * 1e3),
        spread_us: spread_ms * 1e3,
        spread_pct: 100.0 * spread_ms / m.times.frame.median,
        diverged: m.diverged,
    }
}

/// A row's provenance columns: its facts `meta` and the run's.
fn provenance(meta: RowMeta, run: &RunMeta) -> ProvenanceColumns {
    ProvenanceColumns {
        gpu_name: meta.gpu_name,
        driver_version: meta.driver_version,
        gl_vendor: meta.gl_vendor,
        gl_renderer: meta.gl_renderer,
        gl_version: meta.gl_version,
        egl_device: meta.egl_device,
        stream: meta.stream,
        register_flags: meta.register_flags,
        map_flags: meta.map_flags,
        ctx_sched: meta.ctx_sched,
        build_profile: run.build_profile.to_string(),
        date: run.date.clone(),
        host: run.host.clone(),
    }
}

/// The output paths in `dir`: `bench.json`, `bench.csv`, `bench.png` and the CSV's provenance
/// sidecar `bench.csv.provenance.json`.
pub fn paths(dir: &Path) -> [PathBuf; 4] {
    let csv = dir.join("bench.csv");
    [dir.join("bench.json"), csv.clone(), dir.join("bench.png"), crate::provenance::sidecar_path(&csv)]
}

/// Rewrite `bench.json`, `bench.csv` and its provenance sidecar in `dir` with `doc`.
///
/// # Errors
/// A file cannot be written or renamed; serialisation fails.
pub fn write_tables(dir: &Path, doc: &Document<'_>) -> anyhow::Result<()> {
    let [json, csv_path, _, _] = paths(dir);
    let mut text = serde_json::to_string_pretty(doc).context("serialising bench.json")?;
    text.push('\n');
    write_atomic(&json, text.as_bytes())?;
    let mut w = csv::Writer::from_writer(Vec::new());
    for (i, r) in doc.rows.iter().enumerate() {
        let cells = columns::csv_cells(r)?;
        if i == 0 {
            w.write_record(cells.iter().map(|(k, _)| k)).context("writing the bench.csv header")?;
        }
        w.write_record(cells.iter().map(|(_, v)| v)).context("writing a bench.csv row")?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow!("serialising bench.csv: {e}"))?;
    doc.provenance.write_sidecar(&csv_path)?;
    write_atomic(&csv_path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plot::n_label;

    fn measured(mode: BenchMode, frame_ms: f64, setup: Option<(u32, u32, bool)>) -> Measured {
        let one = |x: f64| crate::bench::stats::Summary::of(&[x]).expect("a finite sample");
        Measured {
            mode,
            n: 1024,
            launch: LaunchColumns { steps_per_frame: 1, ..LaunchColumns::default() },
            sampling: SamplingColumns { frames: 1, rounds: 1, ..SamplingColumns::default() },
            times: TimeColumns {
                frame: one(frame_ms),
                map: None,
                kernel: None,
                unmap: None,
                upload: None,
                draw: None,
                readback: None,
                density: None,
                gather: setup.filter(|s| s.1 > 1).map(|_| one(0.01)),
            },
            tree: None,
            round_medians: vec![frame_ms],
            diverged: false,
            precision: "f32",
            meta: RowMeta::default(),
            setup: setup.map(|(gpus, slices, render_gpu_computes)| SetupFacts {
                gpus,
                slices,
                render_gpu_computes,
                gather: if slices == 1 { "none".into() } else { "peer".into() },
                devices: String::new(),
            }),
        }
    }

    #[test]
    fn tree_rows_give_the_effective_rate_in_its_own_column() {
        let run = RunMeta { build_profile: "test", date: String::new(), host: String::new() };
        let one = |x: f64| crate::bench::stats::Summary::of(&[x]).expect("a finite sample");
        let mut tree = measured(BenchMode::Tree, 2.0, Some((1, 1, true)));
        tree.times.kernel = Some(one(1.0));
        tree.tree = Some(TreeFacts { theta: 0.75, build: one(0.2), moments: one(0.1), walk: one(0.7), per_body: 100.0 });
        let mut direct = measured(BenchMode::Compute, 2.0, Some((1, 1, true)));
        direct.times.kernel = Some(one(1.0));
        let r = rows(&[direct, tree], &run);
        let n2 = 1024.0 * 1024.0 / 1e-3;
        assert_eq!((r[0].rates.interactions_per_s, r[0].rates.effective_interactions_per_s), (Some(n2), None));
        assert_eq!((r[1].rates.interactions_per_s, r[1].rates.effective_interactions_per_s), (None, Some(n2)));
        assert_eq!(r[1].rates.interactions_per_s_frame, None);
        // The tree's GFLOP/s count the terms it evaluated: 100 a body, not N.
        assert!((r[1].rates.gflops - 1024.0 * 100.0 / 1e-3 * 20e-9).abs() < 1e-9, "{}", r[1].rates.gflops);
        let t = table(&r);
        assert!(t.contains(" eff.") && t.contains("effective interactions/s, N²"), "{t}");
    }

    #[test]
    fn setups_compare_with_their_own_compute_row_and_one_gpu() {
        let run = RunMeta { build_profile: "test", date: String::new(), host: String::new() };
        let m = [
            measured(BenchMode::Compute, 10.0, Some((1, 1, true))),
            measured(BenchMode::Map, 10.5, Some((1, 1, true))),
            measured(BenchMode::Compute, 5.0, Some((2, 2, true))),
            measured(BenchMode::Map, 5.2, Some((2, 2, true))),
            measured(BenchMode::Compute, 5.0, Some((2, 2, false))),
            measured(BenchMode::Map, 5.05, Some((2, 2, false))),
            measured(BenchMode::Cpu, 100.0, None),
        ];
        let r = rows(&m, &run);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        // Each map row against the compute row of its own setup.
        assert!(close(r[1].comparison.overhead_us, 500.0) && close(r[3].comparison.overhead_us, 200.0) && close(r[5].comparison.overhead_us, 50.0));
        // cpu: the first compute row of its N.
        assert!(close(r[6].comparison.overhead_us, 90_000.0));
        // Scaling against the same mode on one GPU (none for that row itself, nor for cpu).
        assert!(r[0].comparison.speedup.is_none() && r[6].comparison.speedup.is_none() && r[6].setup.gpus.is_none());
        assert!(close(r[2].comparison.speedup, 2.0) && close(r[2].comparison.scaling_efficiency, 1.0));
        assert!(close(r[3].comparison.scaling_efficiency, 10.5 / 5.2 / 2.0));
        assert_eq!(
            (r[5].setup.gpus, r[5].setup.slices, r[5].setup.render_gpu_computes, r[5].setup.gather.as_deref()),
            (Some(2), Some(2), Some(false), Some("peer"))
        );
        assert!(close(r[3].times.gather.map(|g| g.median), 0.01) && r[1].times.gather.is_none());
        let t = table(&r);
        assert!(t.contains("map [2 GPUs + render GPU]") && t.contains("compute [1 GPU]") && t.contains("eff. %"), "{t}");
        // A plain run keeps the plain table.
        let plain = table(&r[..2]);
        assert!(!plain.contains('[') && !plain.contains("eff. %"), "{plain}");
    }

    #[test]
    fn labels() {
        assert_eq!(n_label(16384.0), "16k");
        assert_eq!(n_label(1048576.0), "1M");
        assert_eq!(n_label(1000.0), "1000");
    }
}
