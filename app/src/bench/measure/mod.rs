//! The measuring loop: for each N, round, GPU setup and mode, the runner is built, warmed up and
//! timed frame by frame; the rows, and the N the cpu mode's estimate ([`super::estimate`]) skips.

mod visit;

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context as _;

use self::visit::{Visit, VisitState, Visits};
use super::env::Env;
use super::estimate::{estimate, ms_text, plan_skips, DEFAULT_RUN_S};
use super::modes::{self, check_count, FrameSample, Runner};
use super::outputs::Timelines;
use super::plan::{flag_name, runs_cuda, Plan};
use super::report::{self, mode_name, Document, Measured, RowMeta, RunMeta, Skipped};
use super::stats::Summary;
use super::Interrupted;
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::{CudaBackend, CudaOptions};
use crate::backend::{InteropSettings, PositionVbos};
use crate::cli::{BenchArgs, BenchMode, InteropMode, Precision, SliceOptions};
use crate::demo::frame::trace_stream;
use crate::stop::stopped;
use crate::trace::Recorder;
use sim::init::initial_bodies;
use sim::tree::Solver;
use sim::Bodies;

/// Per-frame samples of one (mode, N), all rounds.
#[derive(Debug, Default)]
pub(super) struct Acc {
    pub(super) frame: Vec<f64>,
    pub(super) map: Vec<f64>,
    pub(super) kernel: Vec<f64>,
    pub(super) unmap: Vec<f64>,
    pub(super) upload: Vec<f64>,
    pub(super) draw: Vec<f64>,
    pub(super) readback: Vec<f64>,
    pub(super) density: Vec<f64>,
    pub(super) gather: Vec<f64>,
    /// The tree's phases (build, moments, walk; ms) and interactions per body, each frame's
    /// last step (tree mode).
    pub(super) tree: [Vec<f64>; 4],
    pub(super) round_medians: Vec<f64>,
    /// The GPU setup the runner ran in (CUDA modes).
    pub(super) setup: Option<report::SetupFacts>,
    /// (block size, bodies per thread) of the kernel, for CUDA modes.
    pub(super) launch: Option<kernels::launch_rule::LaunchConfig>,
    /// A visit ended with non-finite positions or velocities.
    pub(super) diverged: bool,
}

impl Acc {
    pub(super) fn push(&mut self, s: &FrameSample) {
        self.frame.push(s.frame_ms);
        self.map.extend(s.sim.map_ms);
        self.kernel.extend(s.sim.kernel_ms);
        self.unmap.extend(s.sim.unmap_ms);
        self.upload.extend(s.sim.upload_ms);
        self.draw.extend(s.draw_ms);
        self.readback.extend(s.readback_ms);
        self.density.extend(s.density_ms);
        self.gather.extend(s.sim.gather_ms);
        if let Some(t) = &s.tree {
            for (v, x) in
                self.tree.iter_mut().zip([t.phases.build_ms, t.phases.moments_ms, t.phases.walk_ms].map(f64::from).into_iter().chain([t.per_body]))
            {
                v.push(x);
            }
        }
    }

    /// The tree row's facts at opening angle `theta` (`None` for the other modes).
    fn tree(&self, theta: f32) -> Option<report::TreeFacts> {
        let [build, moments, walk, per_body] = &self.tree;
        Some(report::TreeFacts {
            theta,
            build: Summary::of(build)?,
            moments: Summary::of(moments)?,
            walk: Summary::of(walk)?,
            per_body: Summary::of(per_body)?.median,
        })
    }
}

/// Everything a run has found out so far; what the output files are written from.
pub(super) struct Results {
    pub(super) measured: Vec<Measured>,
    pub(super) skipped: Vec<Skipped>,
    pub(super) run: RunMeta,
    pub(super) out: PathBuf,
    /// Where the run came from, for `bench.json` and `bench.csv`'s sidecar.
    pub(super) provenance: crate::provenance::Provenance,
    /// This run's tables replaced any earlier ones in `out` (and the earlier plot is gone).
    pub(super) tables_written: bool,
}

impl Results {
    pub(super) fn rows(&self) -> Vec<report::Row> {
        report::rows(&self.measured, &self.run)
    }

    /// Rewrites `bench.json` and `bench.csv` (with its sidecar) with the rows so far. The first
    /// time, an earlier run's `bench.png` goes: it would not show these rows (this run's is drawn
    /// at its end).
    ///
    /// # Errors
    /// A file cannot be written.
    pub(super) fn write_tables(&mut self, status: &str, complete: bool) -> anyhow::Result<()> {
        let rows = self.rows();
        let doc = Document {
            schema_version: report::SCHEMA_VERSION,
            tool: "nbody-interop bench",
            provenance: &self.provenance,
            status: status.to_string(),
            complete,
            skipped: &self.skipped,
            rows: &rows,
        };
        report::write_tables(&self.out, &doc)?;
        if !self.tables_written {
            self.tables_written = true;
            let [_, _, png, _] = report::paths(&self.out);
            let _ = std::fs::remove_file(png);
        }
        Ok(())
    }
}

/// Build the runner of `mode` for `bodies` in the GPU setup `split` (`devices`: its slices'
/// devices, `None` for the plain one-slice setup); GL modes get `vbos`, freshly loaded with
/// `bodies`.
#[allow(clippy::too_many_arguments)]
pub(super) fn build(
    args: &BenchArgs,
    plan: &Plan,
    mode: BenchMode,
    env: &Env,
    vbos: Option<PositionVbos>,
    bodies: &Bodies,
    split: &SliceOptions,
    devices: Option<&[i32]>,
) -> anyhow::Result<Runner> {
    Ok(match mode {
        BenchMode::Cpu => Runner::Cpu(Box::new(CpuBackend::with_precision(bodies, plan.params, Solver::Direct, args.precision))),
        BenchMode::CpuTree => {
            let tree = Solver::Tree { theta: args.theta };
            Runner::Cpu(Box::new(CpuBackend::with_precision(bodies, plan.params, tree, args.precision)))
        }
        BenchMode::Draw => Runner::Draw(modes::StaticBackend::new(bodies)),
        BenchMode::Compute => {
            let cc = env.compute.as_ref().context("compute mode without a CUDA context")?;
            let (stream, kernel, block) = (args.stream, args.sim.kernel.as_deref(), args.sim.block_size);
            match (args.precision, devices) {
                (Precision::F32, Some(devices)) => Runner::SplitCompute(Box::new(modes::SlicedComputeRunner::new(
                    cc,
                    devices,
                    kernel,
                    args.sim.step_kernel,
                    block,
                    bodies,
                    plan.params,
                    split.gather,
                )?)),
                (Precision::F32, None) => {
                    Runner::Compute(Box::new(modes::ComputeRunner::new(cc, stream, kernel, args.sim.step_kernel, block, bodies, plan.params)?))
                }
                (Precision::F64, _) => Runner::ComputeF64(Box::new(modes::ComputeRunnerF64::new(cc, stream, kernel, block, bodies, plan.params)?)),
            }
        }
        BenchMode::Tree => {
            let cc = env.compute.as_ref().context("tree mode without a CUDA context")?;
            let (stream, kernel, block) = (args.stream, args.sim.kernel.as_deref(), args.sim.block_size);
            let mut r = modes::ComputeRunner::new(cc, stream, kernel, args.sim.step_kernel, block, bodies, plan.params)?;
            r.use_tree(args.theta)?;
            Runner::Compute(Box::new(r))
        }
        BenchMode::Map
        | BenchMode::MapSeparate
        | BenchMode::Copy
        | BenchMode::External
        | BenchMode::ExternalSemaphore
        | BenchMode::Density
        | BenchMode::DensityCopy => {
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
                step_kernel: args.sim.step_kernel,
                precision: args.precision,
                // `None` devices: the plain setup, whatever the options said.
                split: devices.map(|_| *split),
                external_sync: mode.external_sync(),
            };
            let backend = CudaBackend::new(&opts, gfx.gl(), gfx.info(), &vbos, bodies, plan.params)?;
            Runner::Cuda(Box::new(modes::CudaRunner::new(backend, gfx.current().clone())))
        }
    })
}

/// The facts of a (mode, N) row.
pub(super) fn row_meta(args: &BenchArgs, mode: BenchMode, env: &Env) -> RowMeta {
    let mut m = RowMeta::default();
    if !mode.is_compute() {
        if let Some(g) = &env.gfx {
            let i = g.info();
            m.gl_vendor = Some(i.vendor.clone());
            m.gl_renderer = Some(i.renderer.clone());
            m.gl_version = Some(i.version.clone());
            m.egl_device = i.egl_device.clone();
        }
    }
    let cuda = match mode {
        BenchMode::Cpu | BenchMode::CpuTree => None,
        BenchMode::Compute | BenchMode::Tree => env.compute.as_ref().map(|c| (c.info.name.clone(), c.driver_version())),
        _ => env.shared.as_ref().map(|(ctx, info)| (info.name.clone(), interop::driver::entry::cuda_version_string(ctx.api().driver_version()))),
    };
    if let Some((name, driver)) = cuda {
        m.gpu_name = Some(name);
        m.driver_version = Some(driver);
        m.stream = Some(flag_name(args.stream));
        m.ctx_sched = Some(flag_name(args.ctx_sched));
        if mode.interop() == Some(InteropMode::Map) {
            m.register_flags = Some(flag_name(args.register_flags));
            m.map_flags = Some(flag_name(args.map_flags));
        }
    }
    m
}

/// The measuring loop: for each N, each round, each mode. Rows go into `res` (and the files) as
/// they finish.
pub(super) fn measure(
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
    let repeat = repeated_setups(plan, active, &devices);
    let initial = |n: usize| -> anyhow::Result<Bodies> {
        let init = args.sim.init_or(crate::cli::BENCH_INIT);
        let b = initial_bodies(init, n, args.sim.seed, plan.params.g)?;
        check_count(init, &b, n)?;
        Ok(b)
    };

    // Which (mode, N) the estimate measured here rules out: a cpu or cpu-tree frame over
    // --cpu-budget-ms, and in a default run without a GPU what would take it past DEFAULT_RUN_S.
    let mut skip: Vec<(BenchMode, usize)> = Vec::new();
    // One core's FMA peak, which the CPU rows' rates are put against (about 50 ms).
    let peak = active.iter().any(|m| m.is_cpu()).then(sim::cpu::peak::measure);
    if active.iter().any(|m| m.is_cpu()) {
        // The initial condition is checked first (a wrong N for a file is said before any timing).
        initial(plan.bodies[0])?;
        skip = cpu_skips(args, plan, active, env, res, steps)?;
    }
    // Setup 0 runs every mode; the others only the CUDA ones (draw and cpu have no GPU setup).
    let modes_at = |n: usize, setup: usize| -> Vec<BenchMode> {
        active
            .iter()
            .copied()
            .filter(|m| !skip.contains(&(*m, n)))
            // The tree runs on one GPU: in the plain setup only.
            .filter(|m| setup == 0 || (runs_cuda(*m) && *m != BenchMode::Tree))
            .filter(|_| !repeat[setup])
            .collect()
    };
    let visits = |n: usize| -> u64 { (0..plan.setups.len()).map(|si| modes_at(n, si).len() as u64).sum() };
    let total: u64 = plan.bodies.iter().map(|&n| visits(n) * (u64::from(args.warmup) * u64::from(args.rounds) + u64::from(args.frames))).sum();
    let pb = super::outputs::progress_bar(total);
    let run = Visits { args, plan, devices: &devices, steps, time_span, peak, pb: &pb };

    let mut runner: Option<Runner> = None;
    for &n in &plan.bodies {
        if visits(n) == 0 {
            continue;
        }
        let bodies = initial(n)?;
        let mut accs: HashMap<(BenchMode, usize), Acc> = HashMap::new();
        let visits_n: Vec<(usize, BenchMode)> = (0..plan.setups.len()).flat_map(|si| modes_at(n, si).into_iter().map(move |m| (si, m))).collect();
        for round in 0..args.rounds {
            for &(si, mode) in &visits_n {
                if stopped() {
                    pb.finish_and_clear();
                    return Err(Interrupted { rows: res.measured.len(), out: res.out.clone() }.into());
                }
                let state = VisitState { env: &mut *env, res: &mut *res, timelines: &mut *timelines, runner: &mut runner, accs: &mut accs };
                run.visit(state, &bodies, Visit { n, round, si, mode })?;
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

/// Which setups of `plan` resolve to the same slices as an earlier one (e.g. `--gpus 1,all` on a
/// machine of one GPU): those run once, which a notice says.
fn repeated_setups(plan: &Plan, active: &[BenchMode], devices: &[Option<Vec<i32>>]) -> Vec<bool> {
    let cuda_runs = active.iter().any(|m| runs_cuda(*m));
    let repeat: Vec<bool> = (0..plan.setups.len())
        .map(|si| {
            cuda_runs && (0..si).any(|sj| devices[sj] == devices[si] && plan.setups[sj].render_gpu_computes == plan.setups[si].render_gpu_computes)
        })
        .collect();
    if repeat.iter().any(|&r| r) {
        eprintln!(
            "notice: {} of the GPU setups asked for resolve to the same slices as an earlier one on this machine: each runs once",
            repeat.iter().filter(|&&r| r).count()
        );
    }
    repeat
}

/// The (mode, N) the cpu modes' estimate rules out, each recorded in `res` as skipped and said,
/// with the estimated frame times and the time the CPU and draw rows will take.
///
/// # Errors
/// No GL context, the estimate fails, or it was interrupted.
fn cpu_skips(
    args: &BenchArgs,
    plan: &Plan,
    active: &[BenchMode],
    env: &mut Env,
    res: &mut Results,
    steps: u32,
) -> anyhow::Result<Vec<(BenchMode, usize)>> {
    let mut skip = Vec::new();
    let gfx = env.gfx.as_mut().context("cpu mode without a GL context")?;
    let init = args.sim.init_or(crate::cli::BENCH_INIT);
    let Some(est) = estimate(plan, gfx, init, args.sim.seed, args.precision).context("the cpu modes' estimate")? else {
        return Err(Interrupted { rows: res.measured.len(), out: res.out.clone() }.into());
    };
    for m in active.iter().filter(|m| m.is_cpu()) {
        let each: Vec<String> =
            plan.bodies.iter().filter_map(|&n| Some(format!("N={n} {} ms", ms_text(est.mode_ms(*m, n, steps, args.theta)?)))).collect();
        eprintln!("{}: estimated frame times: {} ({})", mode_name(*m), each.join(", "), est.describe());
    }
    let frames = u64::from(args.warmup) * u64::from(args.rounds) + u64::from(args.frames);
    let run_budget = (!plan.explicit && args.bodies.is_empty() && !active.iter().any(|m| runs_cuda(*m))).then_some(DEFAULT_RUN_S);
    let (skips, total_s) = plan_skips(&est, active, &plan.bodies, (steps, frames, args.theta), args.cpu_budget_ms, run_budget);
    for s in skips {
        eprintln!("{} N={}: skipped: {}", mode_name(s.mode), s.n, s.reason);
        res.skipped.push(Skipped { mode: mode_name(s.mode), n: Some(s.n), reason: s.reason });
        skip.push((s.mode, s.n));
    }
    let cuda = if active.iter().any(|m| runs_cuda(*m)) { ", and the CUDA modes' (not estimated)" } else { "" };
    eprintln!("bench: the CPU and draw rows will take about {total_s:.0} s by the estimate{cuda}");
    Ok(skip)
}

/// The slices' devices of each setup of `plan` (`None` for the plain one-slice setup — also
/// one that resolves to a single slice on the render GPU without NCCL, as `--gpus all` on a
/// machine of one GPU — and for every setup when no CUDA mode runs): the render GPU is the
/// device the GL context's CUDA context is on (device 0 without GL).
///
/// # Errors
/// More GPUs than the machine has (counting the render GPU apart), with the remedy.
pub(super) fn setup_devices(plan: &Plan, active: &[BenchMode], env: &Env) -> anyhow::Result<Vec<Option<Vec<i32>>>> {
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
pub(super) fn trace_frame(rec: &Recorder, mode: BenchMode, s: &FrameSample, n: usize, steps: u32) {
    trace_stream(rec, mode.interop(), &s.sim);
    rec.counter("frame ms", s.frame_ms);
    if let Some(k) = s.sim.kernel_ms.filter(|&k| k > 0.0 && steps > 0) {
        rec.counter("interactions/s", sim::interactions(n, steps) / (k * 1e-3));
    }
}
