//! The doctor's diagnosis where the demo falls back to the CPU backend: the first check that
//! finds a problem with the driver, `cuInit` and the devices, the PTX, the place (WSL2, a
//! container, a remote display) or the GL context the backend was to share, so that the
//! fallback's notice names the cause and its remedy and not only CUDA's error code. The same pure
//! checks as `doctor` ([`super::checks`]).

use std::path::Path;

use super::checks::{self, gl, place, Check};
use super::env::{Env, GlvndFiles};
use super::facts::{ContextFact, CudaFact, DriverFact, GlSeen, JitFact, PtxHeader, SharesFact};

/// A cause found by a check, with its remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The check that found it (`wsl`, `container`, …).
    pub check: &'static str,
    /// What it saw.
    pub cause: String,
    /// What to do.
    pub remedy: String,
}

impl Finding {
    fn of(c: Check) -> Self {
        Self { check: c.name, cause: c.evidence, remedy: c.remedy }
    }

    /// One line: `<cause> (nbody-interop doctor: <check>); remedy: <remedy>`.
    pub fn sentence(&self) -> String {
        format!("{} (nbody-interop doctor: {}); remedy: {}", self.cause, self.check, self.remedy)
    }
}

/// The first problem that explains why CUDA could not be used with the GL context `gl_seen`
/// (headless when it has an EGL device), `error` being CUDA's error as text: in order the
/// driver, `cuInit` and the devices (`cuda`), the PTX (`ptx`: the embedded PTX's header; a JIT
/// failure in `error`), WSL2, a
/// container without NVIDIA's GL files, then for a window's context a remote display, PRIME
/// offload and the GL's vendor, for a headless one its EGL device. `None` when no check finds
/// one.
pub fn explain(
    env: &Env,
    root: &Path,
    driver: &DriverFact,
    cuda: &CudaFact,
    ptx: Option<PtxHeader>,
    gl_seen: &GlSeen,
    error: &str,
) -> Option<Finding> {
    let glvnd = GlvndFiles::find(env, root);
    let jit = if error.contains("cuModuleLoadDataEx") { JitFact::Failed(error.to_string()) } else { JitFact::NotTried };
    let context = ContextFact::Made { gl: gl_seen.clone(), shares: SharesFact::NoCuda("see CUDA's error".into()) };
    let headless = if gl_seen.egl_device.is_some() { context.clone() } else { ContextFact::NotTried("a window's context".into()) };
    let mut checks = vec![
        checks::cuda::driver(driver),
        checks::cuda::devices(driver, cuda),
        checks::cuda::ptx(ptx, driver, cuda, &jit),
        place::wsl(env, root),
        place::container(env, root, &glvnd, &headless),
    ];
    if gl_seen.egl_device.is_some() {
        if gl_seen.egl_cuda_device.is_none() {
            checks.push(gl::egl_match(gl_seen, &SharesFact::NoCuda("see CUDA's error".into()), &glvnd));
        }
    } else {
        checks.push(place::remote_display(env, &context));
        checks.push(gl::prime(env, &glvnd, &context));
        checks.push(gl::window_gl(&context));
    }
    checks.into_iter().find(Check::is_problem).map(Finding::of)
}

/// [`explain`] on this process: its environment, `/`, the driver and devices as the loader and
/// `cuInit` find them, the embedded PTX.
pub fn explain_here(gl_info: &crate::gfx::GlInfo, error: &str) -> Option<Finding> {
    let (driver, cuda) = super::probe::driver_and_devices();
    let ptx = PtxHeader::parse(kernels::PTX);
    explain(&Env::from_process(), Path::new("/"), &driver, &cuda, ptx, &GlSeen::from(gl_info), error)
}
