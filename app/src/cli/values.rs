//! Values of options that several commands share: steps per frame, yes/no, the entry points'
//! default-stream semantics, the bench modes, the window's present route, the CPU backend's
//! force solver and opening angle, and the default scene and N.

use clap::ValueEnum;

use crate::cuda::settings::{DensityPath, ExternalSync, InteropMode};
use sim::tree::{check_theta, Solver};

/// `--solver`: how the accelerations are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SolverChoice {
    /// The all-pairs sum, O(N²): exact up to float rounding.
    Direct,
    /// The Barnes–Hut tree (monopole + quadrupole), O(N log N), with opening angle `--theta`.
    Tree,
    /// The tree from the N where it is faster than the direct sum on the backend that runs it
    /// (measured crossovers, by θ), the direct sum below.
    Auto,
}

impl SolverChoice {
    /// The solver with opening angle `theta` (used by `tree` and `auto` only).
    pub fn with_theta(self, theta: f32) -> Solver {
        match self {
            SolverChoice::Direct => Solver::Direct,
            SolverChoice::Tree => Solver::Tree { theta },
            SolverChoice::Auto => Solver::Auto { theta },
        }
    }
}

/// The largest opening angle `--theta` takes (the overlay's θ field has the same range, 0 to 2).
///
/// A cell of side `l` whose centre of mass is at distance `d` is taken whole when `l / d < θ`
/// (the tree's module docs): at θ = 2 that is any cell whose centre of mass is more than half a
/// side away, and the measured range is 0.3–1 (Barnes & Hut 1986 used θ ≈ 1). Beyond 2 a larger
/// θ only takes ever nearer cells whole; it has no use, and a typo such as `5e-1` → `5e1` is
/// refused instead of run.
pub const MAX_THETA: f32 = 2.0;

/// `--theta`: a finite opening angle from 0 to [`MAX_THETA`] (a wider range than the tree's own
/// [`check_theta`], which takes any finite θ ≥ 0).
///
/// # Errors
/// Not a number, outside 0 ≤ θ ≤ [`MAX_THETA`], NaN or infinite; the message names the range.
pub fn parse_theta(s: &str) -> Result<f32, String> {
    let t = s.trim();
    let v: f32 = t.parse().map_err(|_| format!("`{t}` is not a number: give an opening angle θ from 0 to {MAX_THETA}, such as 0.5"))?;
    if v.is_finite() && (0.0..=MAX_THETA).contains(&v) {
        return check_theta(v);
    }
    // The typed text, not the f32's digits (1e30 would print as 31 of them).
    Err(format!(
        "θ must be a finite number ≥ 0 and at most {MAX_THETA} (got {t}): 0 opens every cell (the direct sum), 0.5 is the \
         usual choice, larger is faster and less accurate up to {MAX_THETA}, where a cell is taken whole once its centre \
         of mass is half a side away"
    ))
}

/// A 32-bit float option (`--dt`, `--softening`, …): any number `f32` holds, NaN and ∞ included
/// (the command's own checks say which are allowed), but never one that `f32` cannot hold and
/// would silently turn into ∞ or 0 (`1e308`, `1e-50`).
///
/// # Errors
/// Not a number; a finite value beyond ±3.4e38, or a non-zero one below 1.4e-45 in magnitude.
pub fn parse_f32(s: &str) -> Result<f32, String> {
    let t = s.trim();
    let v: f32 = t.parse().map_err(|_| format!("`{t}` is not a number"))?;
    let wide: f64 = t.parse().map_err(|_| format!("`{t}` is not a number"))?;
    if v.is_infinite() && wide.is_finite() {
        return Err(format!("{t} is beyond the range of a 32-bit float: give a value of magnitude at most {:.1e}", f32::MAX));
    }
    if v == 0.0 && wide != 0.0 {
        return Err(format!(
            "{t} is too small for a 32-bit float: give 0, or a value of magnitude from {:.1e} to {:.1e}",
            f32::from_bits(1),
            f32::MAX
        ));
    }
    Ok(v)
}

/// A whole number from 0 to `max`, for the `parse_count_*` and `parse_whole_*` parsers: the
/// message says "a positive integer" for counts (whose 0 is left to the command's check, which
/// names the least value and why) and "a whole number ≥ 0" where 0 means something
/// (`zero_ok`: `--warmup 0`, `--block-size 0`).
fn whole(s: &str, max: u64, zero_ok: bool) -> Result<u64, String> {
    let t = s.trim();
    let what = if zero_ok { "a whole number ≥ 0" } else { "a positive integer" };
    match t.parse::<i128>() {
        Ok(v) if v < 0 => Err(format!("must be {what} (got {t})")),
        Ok(v) if v > i128::from(max) => Err(format!("must be {what} of at most {max} (got {t})")),
        Ok(v) => u64::try_from(v).map_err(|_| format!("must be {what} of at most {max} (got {t})")),
        Err(_) if t.starts_with('-') => Err(format!("must be {what} (got {t})")),
        Err(_) => Err(format!("must be {what} (got `{t}`)")),
    }
}

/// A count (`--bodies`, `--frames`, `--rounds`, …) as `usize`: a positive integer. A negative
/// value is answered as such (the option takes negative numbers as values, so `-1` reaches
/// here instead of being read as an unknown option); 0 passes, for the command's own check.
///
/// # Errors
/// Negative, not a whole number, or beyond `usize`.
pub fn parse_count_usize(s: &str) -> Result<usize, String> {
    whole(s, usize::MAX as u64, false).map(|v| v as usize)
}

/// [`parse_count_usize`] for a `u32` count.
///
/// # Errors
/// Negative, not a whole number, or beyond `u32`.
pub fn parse_count_u32(s: &str) -> Result<u32, String> {
    whole(s, u64::from(u32::MAX), false).map(|v| v as u32)
}

/// [`parse_count_usize`] for a `u64` count.
///
/// # Errors
/// Negative, not a whole number, or beyond `u64`.
pub fn parse_count_u64(s: &str) -> Result<u64, String> {
    whole(s, u64::MAX, false)
}

/// A whole number ≥ 0 as `u32`, for options where 0 means something (`--warmup`,
/// `--block-size`).
///
/// # Errors
/// Negative, not a whole number, or beyond `u32`.
pub fn parse_whole_u32(s: &str) -> Result<u32, String> {
    whole(s, u64::from(u32::MAX), true).map(|v| v as u32)
}

/// A whole number ≥ 0 as `u64` (`--seed`, `--diagnostics-interval`).
///
/// # Errors
/// Negative, not a whole number, or beyond `u64`.
pub fn parse_whole_u64(s: &str) -> Result<u64, String> {
    whole(s, u64::MAX, true)
}

/// `--steps-per-frame`: a fixed count of leapfrog steps per frame, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepsPerFrame {
    /// This many steps every frame (≥ 1; 0 is refused by validation with a message).
    Fixed(u32),
    /// As many as fit the frame interval (the demo's pace controller, `demo/pace.rs`).
    Auto,
}

impl std::str::FromStr for StepsPerFrame {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(StepsPerFrame::Auto);
        }
        t.parse().map(StepsPerFrame::Fixed).map_err(|_| format!("`{t}` is neither `auto` nor a whole number of steps (1, 2, …)"))
    }
}

impl std::fmt::Display for StepsPerFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepsPerFrame::Fixed(n) => write!(f, "{n}"),
            StepsPerFrame::Auto => f.write_str("auto"),
        }
    }
}

/// The demo's initial condition when `--init` is not given.
pub const DEMO_INIT: &str = "galaxies";
/// `bench`'s initial condition when `--init` is not given (the Plummer sphere of the committed
/// results).
pub const BENCH_INIT: &str = "plummer";
/// The demo's N when `--bodies` is not given.
pub const DEMO_BODIES: usize = 16384;
/// The demo's N on the CPU backend when `--bodies` is not given.
pub const CPU_DEMO_BODIES: usize = 4096;

/// `--present`: which route the window takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Present {
    /// Native where the window's GL context is on the CUDA device (or the backend is the CPU),
    /// else copy, else native with the CPU backend (the notice says why).
    Auto,
    /// The window's own GL context (GLX or EGL on the window system), swapped.
    Native,
    /// A headless EGL-device context, read back and shown through softbuffer.
    Copy,
}

/// A yes/no option value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum YesNo {
    /// Yes.
    Yes,
    /// No.
    No,
}

/// Default-stream semantics of the entry-point table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamSemantics {
    /// CU_GET_PROC_ADDRESS_LEGACY_STREAM.
    Legacy,
    /// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
    PerThread,
}

/// Bench modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BenchMode {
    /// Registered buffers, one map and one unmap call per frame for both.
    Map,
    /// Each buffer mapped and unmapped in its own call.
    MapSeparate,
    /// Device buffer → pinned host → glBufferSubData.
    Copy,
    /// The kernel alone, no GL.
    Compute,
    /// The GPU Barnes–Hut tree alone (fp32, `--theta`), no GL: `compute` with the tree's build,
    /// moments and walk in place of the direct kernel.
    Tree,
    /// The GL draw of positions that do not move, no simulation: the GL floor of a frame.
    Draw,
    /// CPU backend + upload (the direct sum; `--precision f64` in float64).
    Cpu,
    /// The CPU backend with its Barnes–Hut tree (`--theta`) + upload: `cpu` with the tree's
    /// build, moments and walk in place of the direct sum.
    CpuTree,
    /// CUDA-allocated buffers imported into GL (GL_EXT_memory_object_fd), event + fence sync.
    External,
    /// `external` ordered on the GPU by two Vulkan-made semaphores (GL_EXT_semaphore_fd,
    /// cuImportExternalSemaphore) instead of the host's fence and event waits.
    ExternalSemaphore,
    /// `map`, shown as the density view: the image workflow's pass (splat, surface store, tone
    /// map into registered GL textures) and its full-screen draw in place of the body draw.
    Density,
    /// `density` with the float image written by `cuMemcpy2DAsync` from linear memory instead of
    /// through a surface object.
    DensityCopy,
}

impl BenchMode {
    /// The interop storage of a CUDA interop mode (`map` and `map-separate` register and map the
    /// GL buffers); `None` for the modes without one (compute, tree, draw, cpu, cpu-tree).
    pub fn interop(self) -> Option<InteropMode> {
        match self {
            BenchMode::Map | BenchMode::MapSeparate | BenchMode::Density | BenchMode::DensityCopy => Some(InteropMode::Map),
            BenchMode::Copy => Some(InteropMode::Copy),
            BenchMode::External | BenchMode::ExternalSemaphore => Some(InteropMode::External),
            BenchMode::Compute | BenchMode::Tree | BenchMode::Draw | BenchMode::Cpu | BenchMode::CpuTree => None,
        }
    }

    /// True for the modes without GL that step device buffers in a CUDA context of their own
    /// (`compute`, `tree`).
    pub fn is_compute(self) -> bool {
        matches!(self, BenchMode::Compute | BenchMode::Tree)
    }

    /// True for the modes of the CPU backend (`cpu`, `cpu-tree`).
    pub fn is_cpu(self) -> bool {
        matches!(self, BenchMode::Cpu | BenchMode::CpuTree)
    }

    /// How an external mode orders CUDA and GL (`external`: the host waits; the others ignore it).
    pub fn external_sync(self) -> ExternalSync {
        if self == BenchMode::ExternalSemaphore {
            ExternalSync::Semaphore
        } else {
            ExternalSync::Host
        }
    }

    /// How a density mode writes its float image (`None`: a mode that draws the bodies).
    pub fn density(self) -> Option<DensityPath> {
        match self {
            BenchMode::Density => Some(DensityPath::Surface),
            BenchMode::DensityCopy => Some(DensityPath::Copy),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_beyond_f32_are_refused_with_the_range() {
        assert_eq!(parse_f32("0.001"), Ok(0.001));
        assert_eq!(parse_f32("-2"), Ok(-2.0));
        assert!(parse_f32("NaN").is_ok_and(f32::is_nan) && parse_f32("inf") == Ok(f32::INFINITY), "the commands' checks judge these");
        assert_eq!(parse_f32("3e38"), Ok(3e38));
        let e = parse_f32("1e308").expect_err("overflows f32");
        assert!(e.contains("1e308") && e.contains("3.4e38"), "{e}");
        let e = parse_f32("1e-50").expect_err("underflows to 0");
        assert!(e.contains("1e-50") && e.contains("1.4e-45"), "{e}");
        assert_eq!(parse_f32("0"), Ok(0.0));
    }

    #[test]
    fn counts_refuse_negatives_as_such() {
        assert_eq!(parse_count_usize("16384"), Ok(16384));
        assert_eq!(parse_count_usize("0"), Ok(0), "0 is left to the command, which names the least value");
        assert_eq!(parse_count_u32("-1"), Err("must be a positive integer (got -1)".to_string()));
        assert_eq!(parse_count_u64("-1.5"), Err("must be a positive integer (got -1.5)".to_string()));
        assert!(parse_count_u32("4294967296").is_err_and(|e| e.contains("at most 4294967295")));
        assert_eq!(parse_whole_u32("0"), Ok(0));
        assert_eq!(parse_whole_u64("-3"), Err("must be a whole number ≥ 0 (got -3)".to_string()));
        assert!(parse_count_usize("many").is_err_and(|e| e.contains("`many`")));
    }

    #[test]
    fn theta_is_bounded_and_the_typed_text_is_quoted() {
        assert_eq!(parse_theta("0"), Ok(0.0));
        assert_eq!(parse_theta("2"), Ok(MAX_THETA));
        for bad in ["1e30", "2.01", "-0.5", "NaN", "inf"] {
            let e = parse_theta(bad).expect_err(bad);
            assert!(e.contains("finite number ≥ 0 and at most 2") && e.contains(&format!("(got {bad})")), "{e}");
        }
    }
}
