//! The overlay's timing rows: which of a frame's measurements a backend shows, each named for
//! what measured it. A backend shows only what it measures: the CPU backend its step on the host
//! clock and its upload, never a map, a kernel or an interop share; each CUDA storage its own
//! hand-over (`map`: map and unmap; `copy`: the copy and upload; `external`: its two host waits).
//! The body draw is timed by a GL timer query where GL gives one, else by the host time of its
//! draw calls, and the row says which.

use super::action::FrameStats;
use crate::cuda::settings::InteropMode;
use crate::gfx::gpu_timer::DrawClock;

/// One measurement of a frame ([`FrameStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// `map_ms`: the map (CUDA events), or external memory's GL-fence wait (host).
    Map,
    /// `kernel_ms`: the kernels (CUDA events), or the CPU backend's step (host clock).
    Kernel,
    /// `unmap_ms`: the unmap (CUDA events), or external memory's CUDA-event wait (host).
    Unmap,
    /// `upload_ms`: the copy to the host and `glBufferSubData` (copy), or the upload (CPU).
    Upload,
    /// `gather_ms`: the slices' gather (split runs only).
    Gather,
    /// The body draw ([`FrameStats::draw_ms`], measured as [`FrameStats::draw_clock`] says).
    Draw,
    /// The density view's CUDA pass ([`FrameStats::density_ms`]: map, splat, store, tone map).
    Density,
}

impl Measure {
    /// This measurement of the frame `s`, ms (`None` where the frame had none).
    pub fn of(self, s: &FrameStats) -> Option<f64> {
        match self {
            Measure::Map => s.sim.map_ms,
            Measure::Kernel => s.sim.kernel_ms,
            Measure::Unmap => s.sim.unmap_ms,
            Measure::Upload => s.sim.upload_ms,
            Measure::Gather => s.sim.gather_ms,
            Measure::Draw => s.draw_ms,
            Measure::Density => s.density_ms,
        }
    }
}

/// A timing row: its label and what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The row's name in the overlay (and its plot's).
    pub label: &'static str,
    /// What it shows.
    pub measure: Measure,
}

const fn row(label: &'static str, measure: Measure) -> Row {
    Row { label, measure }
}

/// The label of the body-draw row for a draw timed by `clock`.
pub fn draw_label(clock: DrawClock) -> &'static str {
    match clock {
        DrawClock::GlTimer => "GL draw, bodies (GL timer)",
        DrawClock::HostCalls => "GL draw calls, bodies (CPU time)",
    }
}

/// The timing rows of a backend, in order: `mode` is the CUDA backend's interop mode (`None`:
/// the CPU backend), `draw` what timed the body draw. The gather row (split runs) is not
/// listed: it shows where the frame reported one.
pub fn timing_rows(mode: Option<InteropMode>, draw: DrawClock) -> Vec<Row> {
    let mut rows = match mode {
        None => vec![row("CPU step (host clock)", Measure::Kernel), row("upload (glBufferSubData)", Measure::Upload)],
        Some(InteropMode::Map) => {
            vec![row("map (CUDA events)", Measure::Map), row("kernel (CUDA events)", Measure::Kernel), row("unmap (CUDA events)", Measure::Unmap)]
        }
        Some(InteropMode::Copy) => vec![row("kernel (CUDA events)", Measure::Kernel), row("copy + upload", Measure::Upload)],
        // External memory maps nothing: its two host waits stand where map and unmap are.
        Some(InteropMode::External) => vec![
            row("GL fence wait (host)", Measure::Map),
            row("kernel (CUDA events)", Measure::Kernel),
            row("CUDA event wait (host)", Measure::Unmap),
        ],
    };
    rows.push(row(draw_label(draw), Measure::Draw));
    rows
}

/// The gather row of split runs, shown where the frame reported a gather.
pub const GATHER_ROW: Row = row("gather (slices)", Measure::Gather);

/// The density view's row, shown where the frame reported a density pass.
pub const DENSITY_ROW: Row = row("density view (CUDA events)", Measure::Density);

/// The hand-over between CUDA and GL in the frame `s`, ms, for the interop share: map + unmap
/// (`map`), the copy and upload (`copy`), or the GL-fence wait plus what the CUDA-event wait adds
/// to the kernel (`external`: that wait spans the launches). `None` without interop (the CPU
/// backend, `mode` `None`) or where the frame measured none.
pub fn handover_ms(mode: Option<InteropMode>, s: &FrameStats) -> Option<f64> {
    let t = &s.sim;
    let sum: f64 = match mode? {
        InteropMode::External => {
            let beyond = t.unmap_ms.zip(t.kernel_ms).map(|(w, k)| (w - k).max(0.0));
            [t.map_ms, beyond].iter().flatten().sum()
        }
        InteropMode::Map => [t.map_ms, t.unmap_ms].iter().flatten().sum(),
        InteropMode::Copy => t.upload_ms.unwrap_or(0.0),
    };
    (sum > 0.0).then_some(sum)
}

/// What a nominal rate rests on, as the step-time messages say it.
impl std::fmt::Display for crate::backend::RateBasis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::backend::RateBasis;
        match self {
            RateBasis::Cpu { threads, precision: Some(p) } => write!(f, "the CPU backend on {threads} threads ({p})"),
            RateBasis::Cpu { threads, precision: None } => write!(f, "the CPU backend on {threads} threads"),
            RateBasis::Gpu { name, sms, clock_mhz, f64_fraction } => {
                let scale = f64_fraction.map_or_else(String::new, |x| format!(", × {x} for the fp64 kernel"));
                write!(f, "{name} ({sms} SMs at {clock_mhz} MHz; the H200's measured 2.0e12 scaled by SMs × clock{scale})")
            }
            RateBasis::GpuClass => write!(f, "an H200-class GPU"),
            RateBasis::Nothing => write!(f, "a backend that simulates nothing"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::SimTimings;

    fn labels(mode: Option<InteropMode>, draw: DrawClock) -> Vec<&'static str> {
        timing_rows(mode, draw).iter().map(|r| r.label).collect()
    }

    /// The CPU backend: its step on the host clock and its upload; no map, kernel or unmap.
    #[test]
    fn the_cpu_backend_shows_its_step_not_a_kernel() {
        let rows = labels(None, DrawClock::GlTimer);
        assert_eq!(rows, ["CPU step (host clock)", "upload (glBufferSubData)", "GL draw, bodies (GL timer)"]);
        assert!(rows.iter().all(|r| !r.contains("kernel") && !r.contains("map")), "{rows:?}");
    }

    /// Each CUDA storage shows its own hand-over.
    #[test]
    fn each_storage_shows_what_it_measures() {
        assert_eq!(
            labels(Some(InteropMode::Map), DrawClock::GlTimer),
            ["map (CUDA events)", "kernel (CUDA events)", "unmap (CUDA events)", "GL draw, bodies (GL timer)"]
        );
        assert_eq!(labels(Some(InteropMode::Copy), DrawClock::GlTimer), ["kernel (CUDA events)", "copy + upload", "GL draw, bodies (GL timer)"]);
        let ext = labels(Some(InteropMode::External), DrawClock::GlTimer);
        assert_eq!(ext[0], "GL fence wait (host)");
        assert_eq!(ext[2], "CUDA event wait (host)");
    }

    /// Without a GL timer query the draw row says it is the CPU time of the draw calls.
    #[test]
    fn the_draw_row_names_its_clock() {
        let rows = timing_rows(None, DrawClock::HostCalls);
        let draw = rows.last().expect("a draw row");
        assert_eq!(draw.measure, Measure::Draw);
        assert_eq!(draw.label, "GL draw calls, bodies (CPU time)");
    }

    /// No interop, no interop share: the CPU backend's upload is not a CUDA↔GL hand-over.
    #[test]
    fn no_interop_share_without_interop() {
        let s = FrameStats {
            sim: SimTimings { kernel_ms: Some(2.0), upload_ms: Some(0.5), map_ms: Some(0.1), unmap_ms: Some(0.2), ..SimTimings::default() },
            ..FrameStats::default()
        };
        assert_eq!(handover_ms(None, &s), None);
        assert_eq!(handover_ms(Some(InteropMode::Map), &s), Some(0.1 + 0.2));
        assert_eq!(handover_ms(Some(InteropMode::Copy), &s), Some(0.5));
        // External: the fence wait, plus nothing where the event wait is shorter than the kernel.
        assert_eq!(handover_ms(Some(InteropMode::External), &s), Some(0.1));
        assert_eq!(handover_ms(Some(InteropMode::Map), &FrameStats::default()), None);
    }
}
