//! Backend selection: `--backend cpu | cuda | auto`, `--interop external` with its fallback to
//! `map`, and rebuilds when settings need a new backend. The only place that builds a backend.

use anyhow::Context as _;
use clap::ValueEnum;

use super::cpu::CpuBackend;
use super::cuda::{CudaBackend, CudaOptions};
use super::external::is_unsupported;
use super::{InteropSettings, PositionVbos, SettingsChange, SimBackend};
use crate::cuda::settings::{InteropMode, Precision};
use crate::gfx::buffers::upload_positions;
use crate::gfx::gl::Gl;
use crate::gfx::GlInfo;
use crate::sim::{Bodies, PhysParams};

/// Simulation backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a CUDA device shares the GL context, else the CPU backend (with a notice).
    Auto,
    /// CUDA only: exit with an error when it cannot be used.
    Cuda,
    /// Multithreaded float32 CPU backend; never touches CUDA.
    Cpu,
}

/// What a backend is made from: the choice and, for CUDA, its options.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// CPU, CUDA, or CUDA with the CPU as fallback.
    pub choice: BackendChoice,
    /// Options of the CUDA backend (ignored for `cpu`).
    pub cuda: CudaOptions,
    /// The long names of the options typed on the command line (`--interop`, …), for the notice
    /// of those the CPU backend ignores ([`cuda_only_options`]); may be empty.
    pub typed: Vec<String>,
}

/// Make the simulation backend `cfg.choice` asks for, bound to `vbos` (which hold `bodies`).
///
/// - `cpu`: [`CpuBackend`]; CUDA is never touched.
/// - `cuda`: [`CudaBackend::new`]; its error is returned.
/// - `auto`: CUDA, else the CPU backend; the second value is then the notice
///   `"CUDA unavailable, running the CPU backend: <error>"` for the overlay (the caller logs it). With
///   `--precision f64` there is no fallback (the CPU backend is float32): CUDA's error is returned.
///
/// With `--interop external` (cuda or auto), where this GL or CUDA cannot do external memory
/// (e.g. `GL_EXT_memory_object_fd missing on <GL_RENDERER>`, checked before CUDA is touched) the
/// notice says so, ending in `": falling back to --interop map"`, and the `map` storage is made
/// as above; a later CPU fallback adds its own line to the notice. Other failures (no CUDA device
/// shares the GL context) are handled like those of `map`.
///
/// # Errors
/// `--backend cuda` and CUDA cannot be used; the fallback from `external` to `map` with register
/// flags that `map` refuses ([`super::cuda::check_register_flags`]).
pub fn make_backend(
    cfg: &BackendConfig,
    gl: Gl<'_>,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    bodies: &Bodies,
    params: PhysParams,
) -> anyhow::Result<(Box<dyn SimBackend>, Option<String>)> {
    if cfg.choice == BackendChoice::Cpu {
        return Ok((Box::new(CpuBackend::new(bodies, params)), None));
    }
    let err = match CudaBackend::new(&cfg.cuda, gl, gl_info, vbos, bodies, params) {
        Ok(b) => return Ok((Box::new(b), None)),
        Err(e) => e,
    };
    if cfg.cuda.settings.interop != InteropMode::External || !is_unsupported(&err) {
        // Not about external memory (e.g. CUDA cannot share this GL context).
        return match cfg.choice {
            // The CPU backend is float32: it cannot stand in for an fp64 run.
            BackendChoice::Auto if cfg.cuda.precision == Precision::F64 => Err(err.context(
                "--precision f64 needs the CUDA backend, which cannot be used here (the CPU backend is float32 only; use \
                 --precision f32 to run on the CPU)",
            )),
            BackendChoice::Auto => Ok(cpu_fallback(&err, cfg, bodies, params)),
            _ => Err(err),
        };
    }
    let first = format!("{err:#}: falling back to --interop map");
    // Refused register flags end here as an error, not in the CPU fallback of `auto`.
    super::cuda::check_register_flags(InteropMode::Map, cfg.cuda.settings.register_flags).with_context(|| first.clone())?;
    let mut map_cfg = cfg.clone();
    map_cfg.cuda.settings.interop = InteropMode::Map;
    let (backend, notice) = make_backend(&map_cfg, gl, gl_info, vbos, bodies, params).with_context(|| first.clone())?;
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
    /// The backend was replaced (another storage, stream or table); the notice of the new one
    /// (a fallback), if any.
    Replaced {
        /// The new notice for the overlay.
        notice: Option<String>,
    },
}

/// Apply overlay settings to `backend`: in place when the backend can
/// ([`SimBackend::apply_settings`]), else a rebuild. A rebuild reads the state back
/// (synchronised), writes it into both GL buffers of `vbos` (where map and copy storages expect
/// it), lets the old backend release its GL objects and go (its registrations of the VBOs
/// first), and makes the new one with [`make_backend`] from `cfg` with the settings `s`. Where
/// that fails the backend is made again with its old settings, and the error returned.
///
/// # Errors
/// The backend's error, or the new backend could not be made.
#[allow(clippy::too_many_arguments)]
pub fn apply_settings(
    backend: &mut Box<dyn SimBackend>,
    cfg: &BackendConfig,
    gl: Gl<'_>,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    s: InteropSettings,
    params: PhysParams,
) -> anyhow::Result<Applied> {
    if backend.apply_settings(gl, vbos, s)? == SettingsChange::Applied {
        return Ok(Applied::InPlace);
    }
    let old_settings = backend.settings();
    let bodies = backend.bodies(gl, vbos).context("reading the state for the backend switch")?;
    for i in 0..2 {
        upload_positions(gl, vbos, i, &bodies.pos)?;
    }
    let mut new_cfg = cfg.clone();
    new_cfg.cuda.settings = s;
    // The old backend goes first: it may hold CUDA registrations of the same VBOs. Until the new
    // one exists the CPU stands in (it never touches CUDA or the VBOs).
    let mut old = std::mem::replace(backend, Box::new(CpuBackend::new(&bodies, params)));
    old.release_gl(gl);
    drop(old);
    match make_backend(&new_cfg, gl, gl_info, vbos, &bodies, params) {
        Ok((new, notice)) => {
            *backend = new;
            Ok(Applied::Replaced { notice })
        }
        Err(e) => {
            let mut back = cfg.clone();
            if let Some(o) = old_settings {
                back.cuda.settings = o;
            }
            match make_backend(&back, gl, gl_info, vbos, &bodies, params) {
                Ok((b, notice)) => {
                    // The old settings' backend, made again: its fallback (if any) is said here,
                    // as the caller keeps its notice and reports only the error.
                    if let Some(n) = notice {
                        tracing::warn!("{n}");
                    }
                    *backend = b;
                    Err(e)
                }
                // The CPU backend stays in its place (same state): say so, with both reasons.
                Err(again) => Err(e.context(format!(
                    "the backend could not be made again with its old settings either ({again:#}): the CPU backend runs in its place"
                ))),
            }
        }
    }
}

/// `--backend auto` without CUDA: the CPU backend, with the notice that says why.
fn cpu_fallback(err: &anyhow::Error, cfg: &BackendConfig, bodies: &Bodies, params: PhysParams) -> (Box<dyn SimBackend>, Option<String>) {
    let mut notice = format!("CUDA unavailable, running the CPU backend: {err:#}");
    if let Some(ignored) = ignored_by_cpu(&cuda_only_options(&cfg.cuda, &cfg.typed)) {
        // A line of its own, so that it is not lost at the end of the driver's error.
        notice.push('\n');
        notice.push_str(&ignored);
    }
    (Box::new(CpuBackend::new(bodies, params)), Some(notice))
}

/// The options of the CUDA backend that `o` sets away from their defaults or that were typed
/// (`typed`: long names, whatever the value), by flag name: the CPU backend does not use them
/// (`--backend cpu`, or `auto` without CUDA).
pub fn cuda_only_options(o: &CudaOptions, typed: &[String]) -> Vec<&'static str> {
    use crate::cuda::settings::{CtxSched, GatherChoice, GpuCount, ResourceFlags, StreamKind};
    let s = &o.settings;
    let split = |f: fn(&crate::cuda::settings::SplitOptions) -> bool| o.split.as_ref().is_some_and(f);
    let given = [
        ("--interop", s.interop != InteropMode::Map),
        ("--register-flags", s.register_flags != ResourceFlags::None),
        ("--map-flags", s.map_flags != ResourceFlags::None),
        ("--stream", s.stream != StreamKind::Legacy),
        ("--stream-priority", s.stream_priority != 0),
        ("--block-size", s.block_size != 0),
        ("--ctx-sched", o.ctx_sched != CtxSched::Auto),
        ("--kernel", o.kernel.is_some()),
        ("--gpus", split(|x| x.gpus != GpuCount::Count(1))),
        ("--slices-per-gpu", split(|x| x.slices_per_gpu != 1)),
        ("--gather", split(|x| x.gather != GatherChoice::Auto)),
        ("--render-gpu-computes", split(|x| !x.render_gpu_computes)),
    ];
    given.iter().filter(|(flag, set)| *set || typed.iter().any(|t| t == flag)).map(|g| g.0).collect()
}

/// The sentence that names `options` (flag names, [`cuda_only_options`]) as ignored by the CPU
/// backend; `None` when there are none.
pub fn ignored_by_cpu(options: &[&str]) -> Option<String> {
    match options {
        [] => None,
        [one] => Some(format!("{one} does not apply to the CPU backend and is ignored")),
        many => Some(format!("{} do not apply to the CPU backend and are ignored", many.join(", "))),
    }
}

/// Whether the CUDA driver library loads here ([`interop::Driver::open`]: the library and
/// `cuDriverGetVersion`, no `cuInit`). Without it `auto` runs the CPU backend; with it `auto` may
/// still fall back once the backend is made (no device, no GL context on one).
pub fn driver_library_loads() -> bool {
    interop::Driver::open().is_ok()
}
