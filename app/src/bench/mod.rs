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
//! `skipped: <reason>`, the modes that share a reason together (without a CUDA driver: every CUDA
//! mode, one line); that is an error only for modes named in `--modes`, and then only after
//! the other modes were measured (`bench.json`'s status then says `incomplete`, and the error
//! points to `--modes cpu` where a CUDA mode could not run). The cpu mode skips every N whose
//! frame time, estimated from this machine (`estimate.rs`: the all-pairs sum timed at a size
//! where a step takes 50–200 ms, scaled by N² and the steps per frame, plus a probe frame's
//! upload and draw scaled by N), exceeds `--cpu-budget-ms`; it says which. With cpu named in
//! `--modes` such a skip is an error too (after the other rows) unless `--skip-slow` accepts it.
//!
//! # GPU setups
//! `--gpus 1,2,4,8` × `--slices-per-gpu 1,2` × `--render-gpu-computes yes,no` make the setups
//! the CUDA modes run in (default: one, the plain one-GPU, one-slice run). In a split setup the
//! bodies are cut into slices over the GPUs ([`crate::cuda::slices`], gathered with NCCL or peer
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
//! A table on stdout, and `bench.json`, `bench.csv` (with `bench.csv.provenance.json`) and
//! `bench.png` in `--out` (columns: see [`report`]). The two tables are rewritten after every
//! finished (mode, N, setup), so Ctrl-C (which stops after the current frame) or an error keeps
//! every finished row; the run then exits non-zero with the reason (130 after an interrupt, 1
//! after an error). Each file is replaced whole (written beside it, then renamed): the files of an
//! earlier run in `--out` stay until this run has rows of its own (its first rows replace the
//! tables and remove the earlier plot, which no longer shows them), so a run that measures nothing
//! keeps them.
//!
//! # Test hook
//! `NBODY_BENCH_STOP_AFTER_ROWS=K` acts exactly like a Ctrl-C arriving right after the K-th row
//! is finished: the run stops, keeps K rows and fails with the "interrupted" error.

mod env;
mod estimate;
mod measure;
pub mod modes;
mod outputs;
mod plan;
pub mod report;
pub mod stats;

use std::path::{Path, PathBuf};

use anyhow::bail;

use self::env::Env;
use self::measure::Results;
use self::outputs::{check_timeline_path, Timelines};
pub(crate) use self::outputs::{prepare_out, timeline_path, with_write_error};
pub(crate) use self::plan::{check_rounds, flag_name, frames_in_round};
use self::plan::{runs_cuda, validate, Plan};
use self::report::{mode_name, RunMeta, Skipped};
use crate::cli::{BenchArgs, BenchMode};
use crate::provenance::{hostname, GpuFacts, Provenance};

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

/// Run `bench` with `args` (see the module docs).
///
/// # Errors
/// Bad arguments (e.g. `--bodies 0`); a mode named in `--modes` that cannot run here (after the
/// others were measured); nothing at all can run; Ctrl-C ([`Interrupted`]); a failure while
/// measuring; a row that diverged (NaN or ∞ in the state; the row is written, marked). Every
/// finished row is in the output files in each case.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let plan = validate(args)?;
    let out_existed = check_outputs(args, &plan)?;
    crate::stop::install();

    let mut env = Env::open(args, &plan.modes);
    let mut res = new_results(args, &env);
    let (active, requested_missing) = available_modes(&plan, &env, &mut res)?;
    let missing: Vec<String> = requested_missing.iter().map(|(m, _)| mode_name(*m)).collect();

    let mut timelines = Timelines::default();
    let outcome = if active.is_empty() { Ok(()) } else { measure::measure(args, &plan, &active, &mut env, &mut res, &mut timelines) };
    drop(env);
    // Timelines of visits cut short (Ctrl-C, an error) are written too.
    let timeline_err = timelines.finish_all();

    // The cpu mode's N over --cpu-budget-ms: an error when cpu was asked for by name, unless
    // --skip-slow accepts the skip.
    let too_slow: Vec<String> = if plan.explicit && !args.skip_slow {
        res.skipped.iter().filter(|s| s.n.is_some()).map(|s| format!("{} N={}", s.mode, s.n.unwrap_or_default())).collect()
    } else {
        Vec::new()
    };

    // Report and write what exists, whatever the outcome.
    let (status, complete) = run_status(&outcome, &missing, &too_slow);
    let (rows, write_err) = write_outputs(args, &mut res, &status, complete, out_existed);
    let write_err = write_err.or(timeline_err);
    with_write_error(outcome, write_err)?;
    run_errors(args, &requested_missing, &rows, &too_slow)
}

/// Checks every output path before anything is written or removed, and prepares --out; a
/// timeline inside the --out directory once that directory exists (this run makes it). Returns
/// whether --out existed before.
fn check_outputs(args: &BenchArgs, plan: &Plan) -> anyhow::Result<bool> {
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
    Ok(out_existed)
}

/// The run's results before any row: its facts and provenance (the GPU of `env`, if any).
fn new_results(args: &BenchArgs, env: &Env) -> Results {
    Results {
        measured: Vec::new(),
        skipped: Vec::new(),
        run: RunMeta {
            build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
            date: chrono::Utc::now().to_rfc3339(),
            host: hostname(),
        },
        out: args.out.clone(),
        tables_written: false,
        provenance: Provenance::now(env.compute.as_ref().map(|c| GpuFacts::of(&c.info, c.driver_version())).or_else(|| {
            env.shared.as_ref().map(|(ctx, info)| GpuFacts::of(info, interop::driver::entry::cuda_version_string(ctx.api().driver_version())))
        })),
    }
}

/// Modes, each with why it cannot run here.
type ModeReasons = Vec<(BenchMode, String)>;

/// The modes of `plan` that can run here, and those asked for by name (`--modes`) that cannot,
/// with why (the run ends with exit 1); every unavailable mode goes into `res` as skipped and is
/// said once, modes that share a reason together.
///
/// # Errors
/// No mode can run here and none was asked for by name.
fn available_modes(plan: &Plan, env: &Env, res: &mut Results) -> anyhow::Result<(Vec<BenchMode>, ModeReasons)> {
    let unavailable: Vec<(BenchMode, String)> = plan.modes.iter().filter_map(|m| env.unavailable.get(m).map(|why| (*m, why.clone()))).collect();
    for (m, why) in &unavailable {
        res.skipped.push(Skipped { mode: mode_name(*m), n: None, reason: why.clone() });
    }
    let groups = group_by_reason(&unavailable);
    for (why, ms) in &groups {
        eprintln!("{}: skipped: {why}", ms.join(", "));
    }
    let active: Vec<BenchMode> = plan.modes.iter().copied().filter(|m| !env.unavailable.contains_key(m)).collect();
    if plan.setups.iter().any(|s| !s.is_single()) && plan.modes.iter().any(|m| runs_cuda(*m)) && !active.iter().any(|m| runs_cuda(*m)) {
        eprintln!("notice: no CUDA mode can run here (see above), so none of the GPU setups asked for (--gpus, --slices-per-gpu, --render-gpu-computes) is measured");
    }
    let requested_missing: Vec<(BenchMode, String)> = if plan.explicit { unavailable.clone() } else { Vec::new() };
    if active.is_empty() && !plan.explicit {
        bail!(
            "no bench mode can run on this machine:\n  {}",
            groups.iter().map(|g| format!("{}: {}", g.1.join(", "), g.0)).collect::<Vec<_>>().join("\n  ")
        );
    }
    Ok((active, requested_missing))
}

/// The run's status for the files (`complete`, `interrupted`, `error: …`, with what is missing)
/// and whether it is complete: without modes that were asked for by name, even a run that went
/// to its end is incomplete.
fn run_status(outcome: &anyhow::Result<()>, missing: &[String], too_slow: &[String]) -> (String, bool) {
    let interrupted = matches!(outcome, Err(e) if e.is::<Interrupted>());
    let status = match outcome {
        Ok(()) => "complete".to_string(),
        Err(_) if interrupted => "interrupted".to_string(),
        Err(e) => format!("error: {e:#}"),
    };
    let mut gaps = Vec::new();
    if !missing.is_empty() {
        gaps.push(format!("requested mode(s) could not run here: {} (see skipped)", missing.join(", ")));
    }
    if !too_slow.is_empty() {
        gaps.push(format!("skipped over --cpu-budget-ms: {} (see skipped; --skip-slow accepts that)", too_slow.join(", ")));
    }
    let status = match (status.as_str(), gaps.is_empty()) {
        (_, true) => status,
        ("complete", false) => format!("incomplete: {}", gaps.join("; ")),
        (_, false) => format!("{status}; {}", gaps.join("; ")),
    };
    (status, outcome.is_ok() && gaps.is_empty())
}

/// Prints the rows' table and writes the tables and the plot; with no rows, says so and removes
/// an --out this run made. Returns the rows and the first write error.
fn write_outputs(args: &BenchArgs, res: &mut Results, status: &str, complete: bool, out_existed: bool) -> (Vec<report::Row>, Option<anyhow::Error>) {
    let rows = res.rows();
    let [json, csv, png, _] = report::paths(&args.out);
    let mut write_err = None;
    if !rows.is_empty() {
        println!("{}", report::table(&rows));
        if let Err(e) = res.write_tables(status, complete) {
            write_err = Some(e);
        }
        match report::plot(&png, &rows) {
            Ok(()) => println!("wrote {}, {}, {}", json.display(), csv.display(), png.display()),
            Err(e) => {
                // An earlier run's plot would not show these rows.
                let _ = std::fs::remove_file(&png);
                println!("wrote {}, {}", json.display(), csv.display());
                write_err.get_or_insert(e.context(format!("drawing {}", png.display())));
            }
        }
    } else {
        let earlier: Vec<String> =
            report::paths(&args.out).iter().filter(|p| p.is_file()).filter_map(|p| p.file_name().map(|f| f.to_string_lossy().into_owned())).collect();
        if earlier.is_empty() {
            eprintln!("no rows were measured; nothing written to {}", args.out.display());
        } else {
            eprintln!("no rows were measured; nothing written to {} (the earlier {} there are kept)", args.out.display(), earlier.join(", "));
        }
        if !out_existed {
            // Made by this run and still empty: leave no trace (remove_dir fails if not empty).
            let _ = std::fs::remove_dir(&args.out);
        }
    }
    (rows, write_err)
}

/// The error a run whose outputs are written ends with: modes asked for by name that could not
/// run, no row at all, rows skipped over --cpu-budget-ms, rows that diverged.
fn run_errors(args: &BenchArgs, requested_missing: &[(BenchMode, String)], rows: &[report::Row], too_slow: &[String]) -> anyhow::Result<()> {
    if !requested_missing.is_empty() {
        bail!("{}", missing_modes_error(requested_missing));
    }
    if rows.is_empty() {
        bail!(
            "no row was measured: every (mode, N) was skipped (the reasons are above); raise --cpu-budget-ms, use \
             smaller --bodies, or other --modes"
        );
    }
    if !too_slow.is_empty() {
        bail!(
            "{} skipped: estimated over --cpu-budget-ms {} (the estimates are above); raise --cpu-budget-ms, use smaller \
             --bodies, or pass --skip-slow to accept the skip (the other rows are written)",
            too_slow.join(", "),
            args.cpu_budget_ms
        );
    }
    let diverged: Vec<String> = rows.iter().filter(|r| r.comparison.diverged).map(|r| format!("{} N={}", report::row_label(r, true), r.n)).collect();
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

/// `(reason, modes)` of `unavailable`, in its order: the modes that share a reason together.
fn group_by_reason(unavailable: &[(BenchMode, String)]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (m, why) in unavailable {
        match groups.iter_mut().find(|g| &g.0 == why) {
            Some(g) => g.1.push(mode_name(*m)),
            None => groups.push((why.clone(), vec![mode_name(*m)])),
        }
    }
    groups
}

/// The error of modes asked for by name that could not run: each group of modes with the head
/// of its reason (the whole reason was printed when they were skipped), and, where a CUDA mode is
/// among them, what runs without a GPU.
fn missing_modes_error(missing: &[(BenchMode, String)]) -> String {
    let groups = group_by_reason(missing);
    let above = if groups.len() == 1 { "the reason is above" } else { "the reasons are above" };
    let each: Vec<String> = groups
        .into_iter()
        .map(|(why, ms)| {
            let head = why.split_once(": ").map_or(why.as_str(), |(h, _)| h);
            format!("{} ({head})", ms.join(", "))
        })
        .collect();
    let mut text = format!("requested mode(s) could not run here: {}; {above}", each.join("; "));
    if missing.iter().any(|(m, _)| !(m.is_cpu() || *m == BenchMode::Draw)) {
        text.push_str("; without an NVIDIA GPU and its driver, `nbody-interop bench --modes cpu` measures the CPU backend");
    }
    text
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
