//! The checks: each a pure function of the [`Facts`] it reads (or of an [`super::env::Env`] and a
//! root folder), returning a [`Check`] with its verdict, the evidence it saw and the remedy. Tests
//! run each one on made-up facts; `doctor` runs them on what `probe` gathered, in the order a
//! frame needs them ([`all`]).
//!
//! The groups: [`cuda`] (the driver, the devices, the PTX), [`gl`] (the headless EGL device, the
//! display server, the window's GL, `cuGLGetDevices`, PRIME offload), [`place`] (WSL2, a
//! container, a remote display, TCC) and [`libs`] (Vulkan, CUPTI, NCCL).

use serde::Serialize;

use super::facts::Facts;

pub mod cuda;
pub mod gl;
pub mod libs;
pub mod place;

/// A check's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// What the demo needs from this is there.
    #[serde(rename = "ok")]
    Ok,
    /// Something here keeps the demo from CUDA interop (or, for CUPTI and NCCL, from the
    /// feature that uses them); the remedy says what to do.
    #[serde(rename = "problem")]
    Problem,
    /// The check does not apply here (no display for the window's checks, Linux for TCC, no
    /// CUDA device to match).
    #[serde(rename = "not applicable")]
    NotApplicable,
}

impl Verdict {
    /// The word printed: `ok`, `problem`, `not applicable`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Problem => "problem",
            Verdict::NotApplicable => "not applicable",
        }
    }
}

/// One check's result: a line of `doctor`'s report and an element of its JSON `checks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's name (`driver`, `ptx`, `egl-device`, …).
    pub name: &'static str,
    /// Its verdict.
    pub verdict: Verdict,
    /// What it saw.
    pub evidence: String,
    /// What to do (empty when there is nothing to do).
    pub remedy: String,
}

impl Check {
    /// A check with `verdict`, `evidence` and `remedy`.
    pub fn new(name: &'static str, verdict: Verdict, evidence: impl Into<String>, remedy: impl Into<String>) -> Self {
        Self { name, verdict, evidence: evidence.into(), remedy: remedy.into() }
    }

    /// An `ok` check (no remedy).
    pub fn ok(name: &'static str, evidence: impl Into<String>) -> Self {
        Self::new(name, Verdict::Ok, evidence, "")
    }

    /// A `problem` check.
    pub fn problem(name: &'static str, evidence: impl Into<String>, remedy: impl Into<String>) -> Self {
        Self::new(name, Verdict::Problem, evidence, remedy)
    }

    /// A `not applicable` check (no remedy).
    pub fn not_applicable(name: &'static str, evidence: impl Into<String>) -> Self {
        Self::new(name, Verdict::NotApplicable, evidence, "")
    }

    /// True for a `problem`.
    pub fn is_problem(&self) -> bool {
        self.verdict == Verdict::Problem
    }
}

/// The check names, in the order [`all`] returns them.
pub const NAMES: [&str; 15] = [
    "driver",
    "devices",
    "ptx",
    "egl-device",
    "display",
    "window-gl",
    "gl-devices",
    "prime",
    "wsl",
    "container",
    "remote-display",
    "tcc",
    "vulkan",
    "cupti",
    "nccl",
];

/// Every check on `f`, in the order a frame needs them: the driver, its devices and the PTX,
/// the headless EGL device, the display and the window's GL with `cuGLGetDevices` on it, then
/// what can put GL elsewhere (PRIME offload, WSL2, a container, a remote display, TCC), then the
/// optional libraries.
pub fn all(f: &Facts) -> Vec<Check> {
    vec![
        cuda::driver(&f.driver),
        cuda::devices(&f.driver, &f.cuda),
        cuda::ptx(f.ptx, &f.driver, &f.cuda, &f.jit),
        gl::egl_device(&f.cuda, &f.headless, &f.glvnd),
        gl::display(&f.env),
        gl::window_gl(&f.window),
        gl::gl_devices(&f.cuda, &f.window),
        gl::prime(&f.env, &f.glvnd, &f.window),
        place::wsl(&f.env, &f.root),
        place::container(&f.env, &f.root, &f.glvnd, &f.headless),
        place::remote_display(&f.env, &f.window),
        place::tcc(&f.os),
        libs::vulkan(&f.cuda, &f.vulkan),
        libs::cupti(&f.cupti),
        libs::nccl(&f.nccl, f.cuda.devices().len()),
    ]
}
