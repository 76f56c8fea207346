//! Results of `bench`: the rows, the stdout table, `bench.json`, `bench.csv` and `bench.png`.
//!
//! Both files hold one [`Row`] per (mode, N) whose measurement finished. They are rewritten after
//! every finished row (written to a temporary file in the same directory, then renamed over the
//! old one), so an interrupted or failed run keeps every row it finished.
//!
//! # Columns (CSV header = JSON keys of each row)
//! Times are milliseconds unless the name says µs; empty (CSV) or `null` (JSON) where a mode has
//! no such step or fact:
//! - `mode`, `n` (bodies), `precision` (`f32`, or `f64` with `--precision f64`), `steps_per_frame`, `block_size` (CUDA threads per block; empty for
//!   cpu), `bodies_per_thread` (P of the step kernel; CUDA modes), `threads_per_body` (S of the j-split; 1: none), `mass_scaled` (the step kernel is `nbody_step_mPxS`, kernels/README.md; CUDA modes), `frames` (measured frames, all
//!   rounds), `rounds`, `warmup` (untimed frames per round), `width`, `height` (framebuffer px), `max_sprite_px` (sprite diameter cap, px; GL modes);
//! - `frame_ms_{median,p95,p99,max}`: host time of the whole frame (simulate + draw into the FBO +
//!   `glFinish`; compute: kernel launches + event sync);
//! - `map_ms_*`, `kernel_ms_*`, `unmap_ms_*`: CUDA-event times of `cuGraphicsMapResources`, the
//!   kernel launches and `cuGraphicsUnmapResources` (cpu: `kernel_ms` is the CPU force/step time;
//!   external: `map_ms` is the host wait on the GL fence, `unmap_ms` the host wait on the CUDA
//!   event after the launches);
//! - `upload_ms_*`: copy (device → pinned host → `glBufferSubData`) and cpu (`glBufferSubData`);
//! - `draw_ms_*`: GL timer-query time of the body draw (empty without `GL_TIME_ELAPSED`);
//! - `interactions_per_s`, `gflops` (0 for `draw`, which simulates nothing): `N² · steps` per frame over the median kernel time (20 flops
//!   per interaction), or over the median frame time where there is no kernel time;
//!   `rate_basis` says which (`kernel` or `frame`); `interactions_per_s_frame`, `gflops_frame`:
//!   always over the median frame time;
//! - `overhead_us`, `overhead_pct`: median frame time of the mode − median frame time of
//!   `compute` at the same N, in µs and in % of the compute median (empty for compute, draw, and
//!   when compute was not measured at that N);
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
//! `bench.json` is `{"tool", "version", "status", "complete", "skipped": [{mode, n, reason}],
//! "rows": [...]}`; `status` is `complete`, `running`, `interrupted` or `error: <message>`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context as _};
use serde::Serialize;

use super::stats::Summary;
use crate::cli::BenchMode;
use crate::sim::{interactions, FLOPS_PER_INTERACTION};

/// What was measured for one (mode, N): the statistics and the facts of the run.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The mode.
    pub mode: BenchMode,
    /// Bodies N.
    pub n: usize,
    /// Leapfrog steps per frame.
    pub steps_per_frame: u32,
    /// Threads per block (CUDA modes).
    pub block_size: Option<u32>,
    /// Bodies per thread of the step kernel (CUDA modes).
    pub bodies_per_thread: Option<u32>,
    /// Threads per body of the step kernel (CUDA modes; 1: no j-split).
    pub threads_per_body: Option<u32>,
    /// The step kernel is a mass-scaled one, `nbody_step_mPxS` (CUDA modes).
    pub mass_scaled: Option<bool>,
    /// Measured frames (all rounds).
    pub frames: usize,
    /// Rounds.
    pub rounds: u32,
    /// Untimed frames per round.
    pub warmup: u32,
    /// Framebuffer size in pixels (GL modes).
    pub size: Option<(u32, u32)>,
    /// Sprite diameter cap in pixels (GL modes).
    pub max_sprite_px: Option<f32>,
    /// Host frame time (ms).
    pub frame: Summary,
    /// Map time (ms).
    pub map: Option<Summary>,
    /// Kernel time (ms).
    pub kernel: Option<Summary>,
    /// Unmap time (ms).
    pub unmap: Option<Summary>,
    /// Upload time (ms).
    pub upload: Option<Summary>,
    /// GL draw time (ms).
    pub draw: Option<Summary>,
    /// Median frame time of each round (ms).
    pub round_medians: Vec<f64>,
    /// The state was non-finite after a round's frames.
    pub diverged: bool,
    /// `f32` or `f64` (`--precision`).
    pub precision: &'static str,
    /// Facts about the devices and options.
    pub meta: RowMeta,
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

/// One line of `bench.csv` / element of `rows` in `bench.json` (see the module docs for units).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct Row {
    pub mode: String,
    pub n: usize,
    pub precision: String,
    pub steps_per_frame: u32,
    pub block_size: Option<u32>,
    pub bodies_per_thread: Option<u32>,
    pub threads_per_body: Option<u32>,
    pub mass_scaled: Option<bool>,
    pub frames: usize,
    pub rounds: u32,
    pub warmup: u32,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub max_sprite_px: Option<f32>,
    pub frame_ms_median: f64,
    pub frame_ms_p95: f64,
    pub frame_ms_p99: f64,
    pub frame_ms_max: f64,
    pub map_ms_median: Option<f64>,
    pub map_ms_p95: Option<f64>,
    pub map_ms_p99: Option<f64>,
    pub map_ms_max: Option<f64>,
    pub kernel_ms_median: Option<f64>,
    pub kernel_ms_p95: Option<f64>,
    pub kernel_ms_p99: Option<f64>,
    pub kernel_ms_max: Option<f64>,
    pub unmap_ms_median: Option<f64>,
    pub unmap_ms_p95: Option<f64>,
    pub unmap_ms_p99: Option<f64>,
    pub unmap_ms_max: Option<f64>,
    pub upload_ms_median: Option<f64>,
    pub upload_ms_p95: Option<f64>,
    pub upload_ms_p99: Option<f64>,
    pub upload_ms_max: Option<f64>,
    pub draw_ms_median: Option<f64>,
    pub draw_ms_p95: Option<f64>,
    pub draw_ms_p99: Option<f64>,
    pub draw_ms_max: Option<f64>,
    pub interactions_per_s: f64,
    pub gflops: f64,
    pub rate_basis: String,
    pub interactions_per_s_frame: f64,
    pub gflops_frame: f64,
    pub overhead_us: Option<f64>,
    pub overhead_pct: Option<f64>,
    pub interop_us: Option<f64>,
    pub spread_us: f64,
    pub spread_pct: f64,
    pub diverged: bool,
    pub gpu_name: Option<String>,
    pub driver_version: Option<String>,
    pub gl_vendor: Option<String>,
    pub gl_renderer: Option<String>,
    pub gl_version: Option<String>,
    pub egl_device: Option<String>,
    pub stream: Option<String>,
    pub register_flags: Option<String>,
    pub map_flags: Option<String>,
    pub ctx_sched: Option<String>,
    pub build_profile: String,
    pub date: String,
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

/// Contents of `bench.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Document<'a> {
    /// `nbody-interop bench`.
    pub tool: &'static str,
    /// Version of the program.
    pub version: &'static str,
    /// `complete`, `running`, `interrupted` or `error: <message>`.
    pub status: String,
    /// True when the run went to its end (skipped modes and sizes are listed in `skipped`).
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

fn split(s: Option<Summary>) -> [Option<f64>; 4] {
    match s {
        Some(s) => [Some(s.median), Some(s.p95), Some(s.p99), Some(s.max)],
        None => [None; 4],
    }
}

/// The rows of `measured`, with the overhead against `compute` at the same N filled in.
pub fn rows(measured: &[Measured], run: &RunMeta) -> Vec<Row> {
    measured
        .iter()
        .map(|m| {
            // The draw mode simulates nothing.
            let work = if m.mode == BenchMode::Draw { 0.0 } else { interactions(m.n, m.steps_per_frame) };
            let frame_s = m.frame.median * 1e-3;
            let ips_frame = work / frame_s;
            let (ips, basis) = match m.kernel {
                Some(k) if k.median > 0.0 => (work / (k.median * 1e-3), "kernel"),
                _ => (ips_frame, "frame"),
            };
            let compute = measured
                .iter()
                .find(|c| c.mode == BenchMode::Compute && c.n == m.n && !matches!(m.mode, BenchMode::Compute | BenchMode::Draw))
                .map(|c| c.frame.median);
            let overhead_ms = compute.map(|c| m.frame.median - c);
            let draw_frame = measured
                .iter()
                .find(|d| d.mode == BenchMode::Draw && d.n == m.n && m.mode != BenchMode::Cpu)
                .map(|d| d.frame.median);
            // What the mode costs beyond the kernel alone and the GL frame alone.
            let interop_ms = overhead_ms.zip(draw_frame).map(|(o, d)| o - d);
            let spread_ms = super::stats::spread(&m.round_medians);
            let [map_ms_median, map_ms_p95, map_ms_p99, map_ms_max] = split(m.map);
            let [kernel_ms_median, kernel_ms_p95, kernel_ms_p99, kernel_ms_max] = split(m.kernel);
            let [unmap_ms_median, unmap_ms_p95, unmap_ms_p99, unmap_ms_max] = split(m.unmap);
            let [upload_ms_median, upload_ms_p95, upload_ms_p99, upload_ms_max] = split(m.upload);
            let [draw_ms_median, draw_ms_p95, draw_ms_p99, draw_ms_max] = split(m.draw);
            Row {
                mode: mode_name(m.mode),
                n: m.n,
                steps_per_frame: m.steps_per_frame,
                block_size: m.block_size,
                bodies_per_thread: m.bodies_per_thread,
                threads_per_body: m.threads_per_body,
                mass_scaled: m.mass_scaled,
                frames: m.frames,
                rounds: m.rounds,
                warmup: m.warmup,
                width: m.size.map(|s| s.0),
                height: m.size.map(|s| s.1),
                max_sprite_px: m.max_sprite_px,
                frame_ms_median: m.frame.median,
                frame_ms_p95: m.frame.p95,
                frame_ms_p99: m.frame.p99,
                frame_ms_max: m.frame.max,
                map_ms_median,
                map_ms_p95,
                map_ms_p99,
                map_ms_max,
                kernel_ms_median,
                kernel_ms_p95,
                kernel_ms_p99,
                kernel_ms_max,
                unmap_ms_median,
                unmap_ms_p95,
                unmap_ms_p99,
                unmap_ms_max,
                upload_ms_median,
                upload_ms_p95,
                upload_ms_p99,
                upload_ms_max,
                draw_ms_median,
                draw_ms_p95,
                draw_ms_p99,
                draw_ms_max,
                interactions_per_s: ips,
                gflops: ips * FLOPS_PER_INTERACTION * 1e-9,
                rate_basis: basis.to_string(),
                interactions_per_s_frame: ips_frame,
                gflops_frame: ips_frame * FLOPS_PER_INTERACTION * 1e-9,
                overhead_us: overhead_ms.map(|o| o * 1e3),
                overhead_pct: overhead_ms.zip(compute).map(|(o, c)| 100.0 * o / c),
                interop_us: interop_ms.map(|o| o * 1e3),
                spread_us: spread_ms * 1e3,
                spread_pct: 100.0 * spread_ms / m.frame.median,
                diverged: m.diverged,
                precision: m.precision.to_string(),
                gpu_name: m.meta.gpu_name.clone(),
                driver_version: m.meta.driver_version.clone(),
                gl_vendor: m.meta.gl_vendor.clone(),
                gl_renderer: m.meta.gl_renderer.clone(),
                gl_version: m.meta.gl_version.clone(),
                egl_device: m.meta.egl_device.clone(),
                stream: m.meta.stream.clone(),
                register_flags: m.meta.register_flags.clone(),
                map_flags: m.meta.map_flags.clone(),
                ctx_sched: m.meta.ctx_sched.clone(),
                build_profile: run.build_profile.to_string(),
                date: run.date.clone(),
                host: run.host.clone(),
            }
        })
        .collect()
}

/// The three output paths in `dir`: `bench.json`, `bench.csv`, `bench.png`.
pub fn paths(dir: &Path) -> [PathBuf; 3] {
    [dir.join("bench.json"), dir.join("bench.csv"), dir.join("bench.png")]
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader never sees a half-written file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Rewrite `bench.json` and `bench.csv` in `dir` with `doc`.
///
/// # Errors
/// A file cannot be written or renamed; serialisation fails.
pub fn write_tables(dir: &Path, doc: &Document<'_>) -> anyhow::Result<()> {
    let [json, csv_path, _] = paths(dir);
    let mut text = serde_json::to_string_pretty(doc).context("serialising bench.json")?;
    text.push('\n');
    write_atomic(&json, text.as_bytes())?;
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in doc.rows {
        w.serialize(r).context("serialising a bench.csv row")?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow!("serialising bench.csv: {e}"))?;
    write_atomic(&csv_path, &bytes)
}

/// `v` with `prec` decimals, or `—`.
pub(crate) fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.prec$}"))
}

/// `1.23e9` style for rates.
fn sci(v: f64) -> String {
    format!("{v:.3e}")
}

/// The results as a text table (one line per row).
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<13} {:>8} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9} {:>8}",
        "mode",
        "N",
        "frame med",
        "frame p99",
        "map",
        "kernel",
        "unmap",
        "draw",
        "overhead µs",
        "overhead",
        "interact/s",
        "GFLOP/s",
        "spread"
    );
    let _ = writeln!(
        s,
        "{:<13} {:>8} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9} {:>8}",
        "", "bodies", "ms", "ms", "ms", "ms", "ms", "ms", "", "%", "", "", "%"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<13} {:>8} {:>10.3} {:>10.3} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9.1} {:>8.1}",
            if r.precision == "f64" { format!("{} f64", r.mode) } else { r.mode.clone() },
            r.n,
            r.frame_ms_median,
            r.frame_ms_p99,
            opt(r.map_ms_median, 3),
            opt(r.kernel_ms_median, 3),
            opt(r.unmap_ms_median, 3),
            opt(r.draw_ms_median, 3),
            opt(r.overhead_us, 1),
            opt(r.overhead_pct, 1),
            sci(r.interactions_per_s),
            r.gflops,
            r.spread_pct
        );
        if r.diverged {
            let _ = writeln!(s, "{:<13} {:>8} ↑ diverged: NaN or ∞ in the state; these timings are of non-finite arithmetic", "", "");
        }
    }
    s
}

/// Register the embedded font plotters draws text with (once per process).
///
/// plotters is built with its `ab_glyph` feature rather than `ttf`: `ttf` goes through font-kit,
/// which links fontconfig and needs system fonts, which headless GPU machines often lack. The
/// font is Ubuntu Light from `epaint_default_fonts` (the crate egui takes its fonts from).
fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded font (Ubuntu Light) could not be loaded"))
    }
}

/// `16k`, `1M`-style label of a body count.
fn n_label(n: f64) -> String {
    if n >= 1048576.0 && (n / 1048576.0).fract() == 0.0 {
        format!("{}M", n / 1048576.0)
    } else if n >= 1024.0 && (n / 1024.0).fract() == 0.0 {
        format!("{}k", n / 1024.0)
    } else {
        format!("{n:.0}")
    }
}

/// Draw `bench.png`: median frame time (ms) against N, log-log, one line per mode.
///
/// # Errors
/// Nothing to plot, or plotters fails to draw or encode the PNG.
pub fn plot(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use plotters::prelude::*;

    register_font()?;
    if rows.is_empty() {
        anyhow::bail!("no rows to plot");
    }
    let mut modes: Vec<&str> = Vec::new();
    for r in rows {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for r in rows {
        let (x, y) = (r.n as f64, r.frame_ms_median.max(1e-6));
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let (x0, x1, y0, y1) = (x0 / 1.5, x1 * 1.5, y0 / 2.0, y1 * 2.0);
    // Label the x axis at the measured body counts.
    let mut ns: Vec<f64> = rows.iter().map(|r| r.n as f64).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();

    // plotters picks the encoder from the extension, so the temporary file ends in `.png` too.
    let tmp = path.with_extension("tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (1024, 680)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("nbody-interop bench: median frame time", ("sans-serif", 26))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((x0..x1).log_scale().with_key_points(ns), (y0..y1).log_scale())
            .map_err(|e| anyhow!("plot: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("bodies N")
            .y_desc("median frame time (ms)")
            .x_label_formatter(&|x| n_label(*x))
            .y_label_formatter(&|y| if *y >= 1.0 { format!("{y:.0}") } else { format!("{y:.3}") })
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        for (i, mode) in modes.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut pts: Vec<(f64, f64)> =
                rows.iter().filter(|r| r.mode == *mode).map(|r| (r.n as f64, r.frame_ms_median.max(1e-6))).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow!("plot: {e}"))?
                .label(mode.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                .map_err(|e| anyhow!("plot: {e}"))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(n_label(16384.0), "16k");
        assert_eq!(n_label(1048576.0), "1M");
        assert_eq!(n_label(1000.0), "1000");
    }
}
