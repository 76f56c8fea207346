//! `nbody-interop doctor`: why CUDA–GL interop does or does not work on this machine, one check
//! per line, then the routes the demo takes with its defaults.
//!
//! The register call (`cuGraphicsGLRegisterBuffer`) of a GL context CUDA cannot use fails with a
//! bare code (`CUDA_ERROR_OPERATING_SYSTEM`, `CUDA_ERROR_UNKNOWN`); the usual causes are
//! elsewhere: no driver or a driver too old for the PTX, GL on another GPU or on Mesa, WSL2, a
//! container without NVIDIA's GL files, a remote display. Each check ([`checks`]) is a pure
//! function of [`facts::Facts`] (or of an [`env::Env`] and a root folder), so tests run it on
//! made-up machines; `probe` gathers the facts of this one: the driver through the interop
//! crate's loader, the embedded PTX through `cuda::kernel_set::Kernels::load`, a headless context
//! and a window's context as the demo makes them (`gfx`), the Vulkan device of the GPU's UUID,
//! CUPTI and NCCL. [`routes`] predicts what `--present auto` and `--backend auto` do on them,
//! and [`fallback`] puts the same diagnosis into the CPU fallback's notice.
//!
//! Exit status: [`EXIT_INTEROP`] (0) when the demo runs with CUDA interop (in a window where
//! there is a display, else with `--headless`), [`EXIT_NO_INTEROP`] (4) when it does not.

use serde::Serialize;

pub mod checks;
pub mod env;
pub mod facts;
pub mod fallback;
mod print;
mod probe;
pub mod routes;
mod window;

pub use checks::{Check, Verdict};
pub use routes::{Route, Routes};

/// Exit status when the demo runs with CUDA interop.
pub const EXIT_INTEROP: u8 = 0;

/// Exit status when it does not (the CPU backend, or no GL at all). 1 stays for errors, 2 for
/// command-line errors and 3 for a window whose display went away, as everywhere in this program.
pub const EXIT_NO_INTEROP: u8 = 4;

/// What `doctor` prints, and its `--json` object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every check, in order ([`checks::all`]).
    pub checks: Vec<Check>,
    /// The routes with the demo's defaults.
    pub routes: Routes,
    /// The exit status ([`EXIT_INTEROP`] or [`EXIT_NO_INTEROP`]).
    pub exit: u8,
}

impl Report {
    /// The report on `f`: every check and the routes.
    pub fn of(f: &facts::Facts) -> Self {
        let routes = routes::routes(f);
        let exit = if routes.interop { EXIT_INTEROP } else { EXIT_NO_INTEROP };
        Self { checks: checks::all(f), routes, exit }
    }
}

/// The error `run` returns when the demo will not run with CUDA interop here: `main` exits with
/// [`EXIT_NO_INTEROP`] for it.
#[derive(Debug, thiserror::Error)]
#[error("doctor: the demo will not run with CUDA interop here (exit status {EXIT_NO_INTEROP}); the checks marked problem say why")]
pub struct NoInterop;

/// Runs `doctor`: gathers the facts, prints the report (text, or one JSON object with `json`).
///
/// # Errors
/// [`NoInterop`] after the report when the demo will not run with CUDA interop; writing to
/// stdout failed.
pub fn run(json: bool) -> anyhow::Result<()> {
    let facts = probe::gather();
    let report = Report::of(&facts);
    let text = if json { format!("{}\n", serde_json::to_string_pretty(&report)?) } else { print::text(&report) };
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    if report.exit == EXIT_INTEROP {
        Ok(())
    } else {
        Err(NoInterop.into())
    }
}
