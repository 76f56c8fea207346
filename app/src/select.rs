//! Backend selection: `--backend cpu | cuda | auto`.

use crate::backend::{PositionVbos, SimBackend};
use crate::backend_cpu::CpuBackend;
use crate::cli::{BackendChoice, DemoArgs};
use crate::gfx::GlInfo;
use crate::sim::{Bodies, PhysParams};

/// Make the simulation backend `args.backend` asks for, bound to `vbos` (which hold `bodies`).
///
/// - `cpu`: [`CpuBackend`]; CUDA is never touched.
/// - `cuda`: [`crate::cuda_backend::create`]; its error is returned.
/// - `auto`: CUDA, else the CPU backend; the second value is then the notice
///   `"CUDA unavailable, running the CPU backend: <error>"` for the overlay (also logged).
///
/// Needs the GL context current on this thread.
///
/// # Errors
/// `--backend cuda` and CUDA cannot be used.
pub fn make_backend(
    args: &DemoArgs,
    gl: &glow::Context,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    bodies: &Bodies,
    params: PhysParams,
) -> anyhow::Result<(Box<dyn SimBackend>, Option<String>)> {
    match args.backend {
        BackendChoice::Cpu => Ok((Box::new(CpuBackend::new(bodies, params)), None)),
        BackendChoice::Cuda => Ok((crate::cuda_backend::create(args, gl, gl_info, vbos, bodies, params)?, None)),
        BackendChoice::Auto => match crate::cuda_backend::create(args, gl, gl_info, vbos, bodies, params) {
            Ok(b) => Ok((b, None)),
            Err(e) => {
                let notice = format!("CUDA unavailable, running the CPU backend: {e:#}");
                tracing::warn!("{notice}");
                Ok((Box::new(CpuBackend::new(bodies, params)), Some(notice)))
            }
        },
    }
}
