//! What a bench run can use: the headless GL side, the CUDA context shared with it, the
//! `compute` and `tree` modes' own context, and why a mode cannot run here.

use std::collections::HashMap;

use super::modes::{ComputeCtx, Gfx};
use crate::cli::{BenchArgs, BenchMode};
use crate::cuda::session::open_for_gl;

/// The environment a run measures in: GL (optional), CUDA contexts (optional), and why not.
///
/// Field order is drop order: the CUDA contexts go before the GL context; no backend is alive
/// when this drops (backends live only inside `measure::measure`).
pub(super) struct Env {
    pub(super) compute: Option<ComputeCtx>,
    /// The context sharing the GL context (held so the primary context stays alive between
    /// backends), and the device's attributes.
    pub(super) shared: Option<(std::sync::Arc<interop::Context>, interop::safe::DeviceInfo)>,
    pub(super) gfx: Option<Gfx>,
    /// Why a mode cannot run here.
    pub(super) unavailable: HashMap<BenchMode, String>,
}

impl Env {
    /// Opens what `modes` need, noting why each one that cannot run here cannot. Without a CUDA
    /// driver every CUDA mode gets the same one reason (its first words: `no usable CUDA
    /// driver`), so they are reported together.
    pub(super) fn open(args: &BenchArgs, modes: &[BenchMode]) -> Env {
        let mut unavailable = HashMap::new();
        let needs_cuda = |m: &BenchMode| !(m.is_cpu() || *m == BenchMode::Draw);
        if modes.iter().any(needs_cuda) {
            if let Err(e) = crate::libraries::init(interop::StreamSemantics::Legacy) {
                for m in modes.iter().filter(|m| needs_cuda(m)) {
                    unavailable.insert(*m, format!("no usable CUDA driver: {e}"));
                }
            }
        }
        // The modes still to open (those without a reason yet).
        let modes: Vec<BenchMode> = modes.iter().copied().filter(|m| !unavailable.contains_key(m)).collect();
        let modes = modes.as_slice();
        let gl_modes: Vec<BenchMode> = modes.iter().copied().filter(|m| !m.is_compute()).collect();
        let cuda_gl_modes: Vec<BenchMode> = gl_modes.iter().copied().filter(|m| needs_cuda(m)).collect();
        let mut gfx = None;
        if !gl_modes.is_empty() {
            match Gfx::open(args.width, args.height, args.max_sprite_px, args.readback) {
                Ok(g) => gfx = Some(g),
                Err(e) => {
                    for m in &gl_modes {
                        unavailable.insert(*m, format!("no headless GL context: {e:#}"));
                    }
                }
            }
        }
        let mut shared = None;
        if let (Some(g), false) = (&gfx, cuda_gl_modes.is_empty()) {
            match open_for_gl(g.info(), args.stream, 0, args.ctx_sched) {
                Ok((ctx, _stream, info)) => shared = Some((ctx, info)),
                Err(e) => {
                    for m in &cuda_gl_modes {
                        unavailable.insert(*m, format!("{e:#}"));
                    }
                }
            }
        }
        for m in [BenchMode::External, BenchMode::ExternalSemaphore].into_iter().filter(|m| modes.contains(m)) {
            // More specific than a CUDA reason: checked before CUDA is touched.
            let info = gfx.as_ref().map(Gfx::info);
            let semaphore = || shared.as_ref().zip(info).and_then(|((ctx, _), i)| crate::backend::cuda::semaphores_unavailable(ctx, i));
            let why = info.and_then(|i| i.memory_object.as_ref().err()).cloned();
            if let Some(why) = why.or_else(|| (m == BenchMode::ExternalSemaphore).then(semaphore).flatten()) {
                unavailable.insert(m, why);
            }
        }
        let mut compute = None;
        if modes.iter().any(|m| m.is_compute()) {
            match ComputeCtx::open(args.stream, args.ctx_sched) {
                Ok(c) => compute = Some(c),
                Err(e) => {
                    for m in modes.iter().filter(|m| m.is_compute()) {
                        unavailable.insert(*m, format!("{e:#}"));
                    }
                }
            }
        }
        Env { compute, shared, gfx, unavailable }
    }
}
