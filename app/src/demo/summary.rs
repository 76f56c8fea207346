//! `--summary FILE.json`: the demo's run as a raw result: frames, steps, the time of each stage
//! of the frame (median, 99th percentile, mean, count), the route and the backend, with the
//! run's provenance ([`crate::provenance`]). Written whole at every ending of the run (the last
//! frame, Ctrl-C, a closed window), beside `--save-state`.
//!
//! The file: `{"provenance", "status", "frames", "steps", "steps_per_s", "mean_frame_ms",
//! "bodies", "backend", "route": {headless, present, interop, precision, solver},
//! "stages_ms": {frame, simulate, map, kernel, unmap, upload, draw, density}, "energy_change"}`.
//! A stage is `{median, p99, mean, count}` in ms over the frames that measured it (`frame` is the
//! host time from one frame's start to the next's; `simulate` the host time of the simulate
//! call; `map`, `kernel`, `unmap` CUDA-event times, or the CPU step for `kernel` on the CPU
//! backend; `upload` the copy and CPU routes' transfer; `draw` the body draw as the overlay
//! measures it; `density` the density pass); a stage no frame measured is absent.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::backend::SimTimings;
use crate::provenance::{write_atomic, GpuFacts, Provenance};

/// The stages a frame measures, in frame order, with how to read each from a frame's facts.
type Stage = (&'static str, fn(&StageSample) -> Option<f64>);

/// What one frame measured, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageSample {
    /// Host time since the previous frame's start (`None` for the first frame).
    pub frame: Option<f64>,
    /// The simulate call's timings.
    pub sim: SimTimings,
    /// The body draw.
    pub draw: Option<f64>,
    /// The density pass.
    pub density: Option<f64>,
}

const STAGES: [Stage; 8] = [
    ("frame", |s| s.frame),
    ("simulate", |s| Some(s.sim.host_ms)),
    ("map", |s| s.sim.map_ms),
    ("kernel", |s| s.sim.kernel_ms),
    ("unmap", |s| s.sim.unmap_ms),
    ("upload", |s| s.sim.upload_ms),
    ("draw", |s| s.draw),
    ("density", |s| s.density),
];

/// Every frame's stage times, kept for the summary file (8 floats a frame).
#[derive(Debug, Clone)]
pub struct StageLog {
    started: String,
    samples: [Vec<f64>; 8],
}

impl Default for StageLog {
    fn default() -> Self {
        StageLog { started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true), samples: Default::default() }
    }
}

/// One stage's statistics over the run, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageStats {
    /// Median.
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Frames that measured the stage.
    pub count: usize,
}

impl StageStats {
    /// The statistics of `values` (finite ones only); `None` when there are none.
    pub fn of(values: &[f64]) -> Option<StageStats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { 0.5 * (v[v.len() / 2 - 1] + v[v.len() / 2]) };
        Some(StageStats { median, p99: rank(0.99), mean: v.iter().sum::<f64>() / v.len() as f64, count: v.len() })
    }
}

impl StageLog {
    /// Adds one frame's times.
    pub fn push(&mut self, s: &StageSample) {
        for (samples, (_, read)) in self.samples.iter_mut().zip(STAGES) {
            if let Some(ms) = read(s) {
                samples.push(ms);
            }
        }
    }

    /// The statistics of every stage some frame measured, by name.
    pub fn stats(&self) -> BTreeMap<&'static str, StageStats> {
        STAGES.iter().zip(&self.samples).filter_map(|((name, _), v)| StageStats::of(v).map(|s| (*name, s))).collect()
    }

    /// When the run started, UTC, RFC 3339.
    pub fn started(&self) -> &str {
        &self.started
    }
}

/// How the run made its frames.
#[derive(Debug, Clone, Serialize)]
pub struct Route {
    /// No window: the EGL device and an FBO.
    pub headless: bool,
    /// `--present` in force (`native`, `copy`, `auto`), in a window.
    pub present: Option<String>,
    /// `--interop` (`map`, `copy`, `external`) on the CUDA backend.
    pub interop: Option<String>,
    /// `f32` or `f64`.
    pub precision: String,
    /// The solver the backend ran (`direct`, `tree θ=0.75`).
    pub solver: String,
}

/// The contents of `--summary`.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryFile {
    /// Where the run came from.
    pub provenance: Provenance,
    /// `complete`, `interrupted` (Ctrl-C, SIGTERM, a closed window) or `error: …`.
    pub status: String,
    /// Frames drawn.
    pub frames: u64,
    /// Leapfrog steps taken.
    pub steps: u64,
    /// Steps per second of wall time.
    pub steps_per_s: f64,
    /// Mean wall time per frame, ms.
    pub mean_frame_ms: f64,
    /// Bodies N.
    pub bodies: usize,
    /// The backend's label.
    pub backend: String,
    /// How the frames were made.
    pub route: Route,
    /// Each stage's statistics, ms.
    pub stages_ms: BTreeMap<&'static str, StageStats>,
    /// The relative change of the total energy, where the run sampled it twice or more.
    pub energy_change: Option<f64>,
}

impl SummaryFile {
    /// The provenance of a run that started at `started` (RFC 3339) on `gpu`.
    pub fn provenance(started: &str, gpu: Option<GpuFacts>) -> Provenance {
        Provenance { date_utc: started.to_string(), ..Provenance::now(gpu) }
    }

    /// Writes the file whole at `path` (a temporary file renamed over it).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self).context("serialising the summary")?;
        text.push('\n');
        write_atomic(path, text.as_bytes()).with_context(|| format!("writing --summary {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_a_frame_did_not_measure_are_left_out() {
        let mut log = StageLog::default();
        for (i, ms) in [4.0, 2.0, 3.0].into_iter().enumerate() {
            let sim = SimTimings { host_ms: ms, kernel_ms: Some(ms / 2.0), ..SimTimings::default() };
            log.push(&StageSample { frame: (i > 0).then_some(ms + 1.0), sim, draw: None, density: None });
        }
        let s = log.stats();
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), ["frame", "kernel", "simulate"]);
        assert_eq!(s["simulate"], StageStats { median: 3.0, p99: 4.0, mean: 3.0, count: 3 });
        assert_eq!(s["frame"].count, 2);
        assert_eq!(s["frame"].median, 3.5);
    }

    #[test]
    fn no_finite_value_gives_no_statistics() {
        assert_eq!(StageStats::of(&[f64::NAN]), None);
        assert_eq!(StageStats::of(&[]), None);
    }
}
