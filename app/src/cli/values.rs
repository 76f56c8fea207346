//! Values of options that several commands share: steps per frame, yes/no, the entry points'
//! default-stream semantics, the bench modes, the window's present route, the CPU backend's
//! force solver and opening angle, and the default scene and N.

use clap::ValueEnum;

use crate::cuda::settings::{DensityPath, ExternalSync, InteropMode};
use crate::sim::tree::{check_theta, Solver};

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

/// `--theta`: a finite opening angle ≥ 0 ([`check_theta`] says why not).
///
/// # Errors
/// Not a number, or negative, NaN or infinite.
pub fn parse_theta(s: &str) -> Result<f32, String> {
    let t = s.trim();
    let v: f32 = t.parse().map_err(|_| format!("`{t}` is not a number: give an opening angle θ ≥ 0, such as 0.5"))?;
    check_theta(v)
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
    /// CPU backend + upload.
    Cpu,
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
    /// GL buffers); `None` for the modes without one (compute, draw, cpu).
    pub fn interop(self) -> Option<InteropMode> {
        match self {
            BenchMode::Map | BenchMode::MapSeparate | BenchMode::Density | BenchMode::DensityCopy => Some(InteropMode::Map),
            BenchMode::Copy => Some(InteropMode::Copy),
            BenchMode::External | BenchMode::ExternalSemaphore => Some(InteropMode::External),
            BenchMode::Compute | BenchMode::Tree | BenchMode::Draw | BenchMode::Cpu => None,
        }
    }

    /// True for the modes without GL that step device buffers in a CUDA context of their own
    /// (`compute`, `tree`).
    pub fn is_compute(self) -> bool {
        matches!(self, BenchMode::Compute | BenchMode::Tree)
    }

    /// How an external mode orders CUDA and GL (`external`: the host waits; the others ignore it).
    pub fn external_sync(self) -> ExternalSync {
        if self == BenchMode::ExternalSemaphore { ExternalSync::Semaphore } else { ExternalSync::Host }
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
