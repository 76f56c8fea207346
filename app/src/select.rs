//! Backend selection: `--backend cpu | cuda | auto`, and `--interop external` with its fallback
//! to `map`.

use anyhow::Context as _;

use crate::backend::{InteropSettings, PositionVbos, SimBackend};
use crate::backend_cpu::CpuBackend;
use crate::cli::{BackendChoice, DemoArgs, InteropMode};
use crate::gfx::renderer::upload_positions;
use crate::gfx::GlInfo;
use crate::sim::{Bodies, PhysParams};

/// Make the simulation backend `args.backend` asks for, bound to `vbos` (which hold `bodies`).
///
/// - `cpu`: [`CpuBackend`]; CUDA is never touched.
/// - `cuda`: [`crate::cuda_backend::create`]; its error is returned.
/// - `auto`: CUDA, else the CPU backend; the second value is then the notice
///   `"CUDA unavailable, running the CPU backend: <error>"` for the overlay (also logged).
///
/// With `--interop external` (cuda or auto) the external-memory backend ([`crate::external`])
/// comes first. Where this GL or CUDA cannot do external memory (e.g. `GL_EXT_memory_object_fd
/// missing on <GL_RENDERER>`, checked before CUDA is touched) the notice says so, ending in
/// `": falling back to --interop map"`, and the `map` backend is made as above; a later CPU
/// fallback adds its own line to the notice. Other failures (no CUDA device shares the GL
/// context) are handled like those of `map`.
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
    if args.backend == BackendChoice::Cpu || args.interop != InteropMode::External {
        return make_map_copy_or_cpu(args, gl, gl_info, vbos, bodies, params);
    }
    let err = match crate::external::create(args, gl, gl_info, bodies, params) {
        Ok(b) => return Ok((Box::new(b), None)),
        Err(e) => e,
    };
    if !crate::external::is_unsupported(&err) {
        // Not about external memory (e.g. CUDA cannot share this GL context): as for map.
        return match args.backend {
            BackendChoice::Auto => Ok(cpu_fallback(&err, bodies, params)),
            _ => Err(err),
        };
    }
    let first = format!("{err:#}: falling back to --interop map");
    tracing::warn!("{first}");
    let mut map_args = args.clone();
    map_args.interop = InteropMode::Map;
    let (backend, notice) = make_map_copy_or_cpu(&map_args, gl, gl_info, vbos, bodies, params).with_context(|| first.clone())?;
    let notice = match notice {
        Some(next) => format!("{first}\n{next}"),
        None => first,
    };
    Ok((backend, Some(notice)))
}

/// What [`apply_settings`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The backend changed its settings itself.
    InPlace,
    /// The backend was replaced (a switch to or from `--interop external`, another backend
    /// type); the notice of the new one (a fallback), if any.
    Replaced {
        /// The new notice for the overlay.
        notice: Option<String>,
    },
}

/// Apply overlay settings to `backend`. A switch to or from `external` needs another backend
/// type: the state is read back (synchronised), written into both GL buffers of `vbos` (where
/// map and copy backends expect it), a new backend is made with [`make_backend`] and only then
/// the old one releases its GL objects and goes. Anything else is the backend's own
/// [`SimBackend::apply_settings`]. Needs the GL context current.
///
/// # Errors
/// The backend's error, or the new backend could not be made (the old one is kept then).
#[allow(clippy::too_many_arguments)]
pub fn apply_settings(
    backend: &mut Box<dyn SimBackend>,
    args: &DemoArgs,
    gl: &glow::Context,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    s: InteropSettings,
    params: PhysParams,
) -> anyhow::Result<Applied> {
    let from = backend.settings().map(|c| c.interop);
    let crosses = from.is_some_and(|f| (f == InteropMode::External) != (s.interop == InteropMode::External));
    if !crosses {
        backend.apply_settings(gl, vbos, s)?;
        return Ok(Applied::InPlace);
    }
    let bodies = backend.bodies(gl, vbos).context("reading the state for the backend switch")?;
    for i in 0..2 {
        upload_positions(gl, vbos, i, &bodies.pos)?;
    }
    let mut a = args.clone();
    a.interop = s.interop;
    a.register_flags = s.register_flags;
    a.map_flags = s.map_flags;
    a.stream = s.stream;
    a.stream_priority = s.stream_priority;
    a.sim.block_size = s.block_size;
    let (new, notice) = make_backend(&a, gl, gl_info, vbos, &bodies, params)?;
    let mut old = std::mem::replace(backend, new);
    old.release_gl(gl);
    drop(old);
    Ok(Applied::Replaced { notice })
}

/// [`make_backend`] without the external-memory step.
fn make_map_copy_or_cpu(
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
            Err(e) => Ok(cpu_fallback(&e, bodies, params)),
        },
    }
}

/// `--backend auto` without CUDA: the CPU backend, with the notice (also logged) that says why.
fn cpu_fallback(err: &anyhow::Error, bodies: &Bodies, params: PhysParams) -> (Box<dyn SimBackend>, Option<String>) {
    let notice = format!("CUDA unavailable, running the CPU backend: {err:#}");
    tracing::warn!("{notice}");
    (Box::new(CpuBackend::new(bodies, params)), Some(notice))
}
