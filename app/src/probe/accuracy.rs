//! `nbody-interop accuracy`: the Barnes–Hut tree's force error ([`sim::tree`]) against
//! the float64 direct sum, per scene, N and θ, with its cost.
//!
//! For each scene and N: the float64 all-pairs accelerations of the f32 positions
//! ([`accelerations_f64`], the reference), the CPU backend's float32 direct sum
//! ([`accelerations_f32`], timed: the `direct` row, whose error is the f32 rounding floor), then
//! per θ the tree (build and walk timed apart). Each row holds the per-body relative error
//! `|a − a_ref| / |a_ref|` (median, 99th percentile, maximum; [`ErrorStats`]), interactions per
//! body (body–body + body–cell; N for the direct sum) and the times in ms, one run each (after
//! the reference, so the threads and pages are warm). G = 1: relative errors do not depend on G.
//! With `--backend cuda` the same rows come from the GPU ([`super::accuracy_gpu`]): the fp32
//! direct kernel, the GPU tree (build = its build and moments), the reference by the fp64 kernel.
//! The table goes to stdout; `--csv` rewrites the file after every row, so Ctrl-C keeps the rows
//! finished.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context as _};
use serde::Serialize;

use super::accuracy_gpu::GpuAccuracy;
use crate::cli::{AccuracyArgs, BackendChoice};
use crate::provenance::{write_atomic, Provenance};
use crate::stop::{stopped, stopped_in_step, Interrupted};
use sim::cpu::{accelerations_f32, accelerations_f64};
use sim::init::{initial_bodies, InitialCondition, NAMES};
use sim::tree::{relative_errors, ErrorStats, Octree};

/// The fewest bodies `accuracy` measures: below it the tree has few levels
/// ([`sim::tree::LEAF_BODIES`] bodies a leaf: 32 leaves at 512) and a force evaluation
/// takes microseconds, so neither the error nor the speedup (which rounds to `0.0×` at N = 3)
/// tells how the tree does at work. Figure-eight (3 bodies) is refused for the same reason.
pub const MIN_BODIES: usize = 512;

/// One row of the table and the CSV file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccuracyRow {
    /// The scene (`--init`).
    pub scene: String,
    /// N.
    pub n: usize,
    /// `direct` (the CPU backend's f32 all-pairs sum) or `tree`.
    pub solver: &'static str,
    /// θ of the tree; empty for `direct`.
    pub theta: Option<f32>,
    /// Median per-body relative acceleration error (dimensionless).
    pub err_median: f64,
    /// Its 99th percentile.
    pub err_p99: f64,
    /// Its maximum.
    pub err_max: f64,
    /// Interactions per body (body–body + body–cell terms).
    pub interactions_per_body: f64,
    /// Tree build time (bounding cube, Morton sort, cells and moments), ms; empty for `direct`.
    pub build_ms: Option<f64>,
    /// Force evaluation time, ms: the tree's build and walks, or the direct sum.
    pub force_ms: f64,
    /// The direct sum's time over this row's (1 for `direct`).
    pub speedup: f64,
}

/// Runs `accuracy` with `args`: prints the table, writes `--csv`.
///
/// # Errors
/// No scene, N or θ; N = 0, or below [`MIN_BODIES`] (a scene that fixes N, figure-eight or a
/// state file, too: figure-eight before anything runs, a file when it is read); a scene that
/// cannot be made; the CSV file cannot be written; an interrupt (after the rows finished).
pub fn run(args: &AccuracyArgs) -> anyhow::Result<()> {
    check_args(args)?;
    crate::stop::install();
    let gpu = match args.backend {
        BackendChoice::Cpu => None,
        BackendChoice::Cuda => Some(GpuAccuracy::open()?),
        BackendChoice::Auto => GpuAccuracy::open().map_err(|e| eprintln!("CUDA unavailable, measuring on the CPU: {e:#}")).ok(),
    };
    // After the backend is chosen (a missing GPU is said first), before anything is measured.
    let takes_n = args.init.iter().any(|s| !matches!(InitialCondition::parse(s), Ok(InitialCondition::Csv(_) | InitialCondition::Tipsy(_))));
    if let Some(&n) = args.bodies.iter().find(|&&n| n < MIN_BODIES && takes_n) {
        bail!("--bodies {n}: {}", too_few(n));
    }
    let provenance = Provenance::now(gpu.as_ref().and_then(GpuAccuracy::facts));
    let on = match &gpu {
        Some(g) => format!("on the GPU: {}", g.device_name()),
        None => format!("on the CPU: {} threads", rayon::current_num_threads()),
    };
    println!("force error of the tree against the f64 direct sum (ε = {}, seed {}, {on})", args.softening, args.seed);
    println!("{}", header());
    let mut rows = Vec::new();
    // An interrupt ends the measurement at the next row (the check after the loop reports it).
    'rows: for scene in &args.init {
        for &n in &args.bodies {
            if stopped() {
                break 'rows;
            }
            if measure_rows(args, gpu.as_ref(), &provenance, (scene, n), &mut rows)?.is_break() {
                break 'rows;
            }
        }
    }
    if stopped() {
        // The rows finished are printed and in `--csv`.
        bail!(Interrupted(format!("after {} row(s)", rows.len())));
    }
    Ok(())
}

/// Refuses what cannot run, before anything is measured: no scene, N or θ, N = 0, a bad
/// softening, a scene that names no preset or file (or figure-eight's fixed N), an unwritable
/// `--csv`.
fn check_args(args: &AccuracyArgs) -> anyhow::Result<()> {
    if args.init.is_empty() || args.bodies.is_empty() || args.theta.is_empty() {
        bail!("accuracy needs at least one scene (--init), one N (--bodies) and one θ (--theta)");
    }
    if args.bodies.contains(&0) {
        bail!("--bodies must be at least 1");
    }
    if !(args.softening.is_finite() && args.softening >= 0.0) {
        bail!("--softening must be a finite number ≥ 0 (got {})", args.softening);
    }
    // Every scene is checked before the first (long) measurement: its name, or its file.
    for scene in &args.init {
        match InitialCondition::parse(scene).with_context(|| format!("--init {scene}"))? {
            InitialCondition::Csv(p) | InitialCondition::Tipsy(p) if !p.is_file() => {
                bail!("--init {scene}: no such file; give an existing state file or a preset ({})", NAMES.join(", "))
            }
            InitialCondition::FigureEight => bail!("--init {scene}: {}", too_few(3)),
            _ => {}
        }
    }
    if let Some(p) = &args.csv {
        // Checked before the GPU opens; the rows' writes carry the GPU's facts.
        write_csv(p, &[], &Provenance::now(None)).with_context(|| format!("--csv {}: choose a path you can write", p.display()))?;
    }
    Ok(())
}

/// The rows of `scene` at `n` bodies: the direct sum's, then the tree's at each θ, each printed
/// and written to `--csv` as it finishes. `Break`: an interrupt came between them.
fn measure_rows(
    args: &AccuracyArgs,
    gpu: Option<&GpuAccuracy>,
    provenance: &Provenance,
    (scene, n): (&str, usize),
    rows: &mut Vec<AccuracyRow>,
) -> anyhow::Result<ControlFlow<()>> {
    let bodies = initial_bodies(scene, n, args.seed, 1.0)?;
    let pos = &bodies.pos;
    let n = pos.len();
    if n < MIN_BODIES {
        // A state file fixes N: known once it is read.
        bail!("--init {scene}: {}", too_few(n));
    }
    let t = Instant::now();
    let exact = match gpu {
        Some(g) => g.exact(pos, args.softening)?,
        None => accelerations_f64(&pos.iter().map(|p| p.map(f64::from)).collect::<Vec<_>>(), 1.0, f64::from(args.softening)),
    };
    eprintln!("{scene} N = {n}: f64 reference in {:.0} ms", ms(t));
    if stopped() {
        return Ok(ControlFlow::Break(()));
    }
    let t = Instant::now();
    let (direct, direct_ms) = match gpu {
        Some(g) => g.direct(pos, args.softening)?,
        None => (accelerations_f32(pos, 1.0, args.softening), ms(t)),
    };
    let mut row = |solver, theta, acc: &[[f32; 3]], per_body, build_ms, force_ms: f64| -> anyhow::Result<()> {
        let e = ErrorStats::of(&relative_errors(acc, &exact)).unwrap_or_default();
        let r = AccuracyRow {
            scene: scene.to_string(),
            n,
            solver,
            theta,
            err_median: e.median,
            err_p99: e.p99,
            err_max: e.max,
            interactions_per_body: per_body,
            build_ms,
            force_ms,
            speedup: direct_ms / force_ms.max(1e-9),
        };
        println!("{}", line(&r));
        rows.push(r);
        match &args.csv {
            Some(p) => write_csv(p, rows, provenance),
            None => Ok(()),
        }
    };
    row("direct", None, &direct, n as f64, None, direct_ms)?;
    for &theta in &args.theta {
        // Between rows, as a step between its parts (a test can hold the run here).
        if stopped_in_step() {
            return Ok(ControlFlow::Break(()));
        }
        if let Some(g) = gpu {
            let r = g.tree(pos, args.softening, theta)?;
            row("tree", Some(theta), &r.acc, r.per_body, Some(r.build_ms), r.force_ms)?;
            continue;
        }
        let t = Instant::now();
        let tree = Octree::build(pos);
        let build_ms = ms(t);
        let mut acc = vec![[0.0f32; 3]; n];
        let counts = tree.accelerations_into(pos, 0, &mut acc, 1.0, args.softening, theta);
        let force_ms = ms(t);
        row("tree", Some(theta), &acc, counts.total() as f64 / n as f64, Some(build_ms), force_ms)?;
    }
    Ok(ControlFlow::Continue(()))
}

/// Why `n` bodies (below [`MIN_BODIES`]) are refused, with the remedy.
fn too_few(n: usize) -> String {
    format!(
        "{n} bodies are too few for accuracy: it measures from N = {MIN_BODIES}, where the tree has several levels and \
         the times mean something; use plummer, galaxies or ball with --bodies \
         {MIN_BODIES} or more, or a state file of that many bodies"
    )
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The table's header line (Markdown).
fn header() -> String {
    "| scene | N | solver | θ | median | 99th pct | max | interactions/body | build ms | force ms | speedup |\n\
     | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        .to_string()
}

/// One row of the table (Markdown).
fn line(r: &AccuracyRow) -> String {
    let theta = r.theta.map_or("—".to_string(), |t| t.to_string());
    // Whole ms from 10 on, three decimals below (the GPU's times).
    let ms = |t: f64| if t >= 10.0 { format!("{t:.0}") } else { format!("{t:.3}") };
    let build = r.build_ms.map_or("—".to_string(), ms);
    format!(
        "| {} | {} | {} | {} | {:.2e} | {:.2e} | {:.2e} | {:.0} | {} | {} | {:.1}× |",
        r.scene,
        r.n,
        r.solver,
        theta,
        r.err_median,
        r.err_p99,
        r.err_max,
        r.interactions_per_body,
        build,
        ms(r.force_ms),
        r.speedup
    )
}

/// Writes `rows` to `path` (CSV with a header), replacing the file whole (a temporary file
/// renamed over it), and the provenance sidecar beside it (`PATH.provenance.json`).
fn write_csv(path: &Path, rows: &[AccuracyRow], provenance: &Provenance) -> anyhow::Result<()> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    w.write_record([
        "scene",
        "n",
        "solver",
        "theta",
        "err_median",
        "err_p99",
        "err_max",
        "interactions_per_body",
        "build_ms",
        "force_ms",
        "speedup",
    ])?;
    for r in rows {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("serialising the accuracy CSV: {e}"))?;
    provenance.write_sidecar(path)?;
    write_atomic(path, &bytes)
}
