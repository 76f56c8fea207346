//! Backend selection: `--backend cpu | cuda | auto`, `--interop external` with its fallback to
//! `map`, and rebuilds when settings need a new backend. The only place that builds a backend.

use anyhow::Context as _;
use clap::ValueEnum;

use super::cpu::CpuBackend;
use super::cuda::external::is_unsupported;
use super::cuda::{CudaBackend, CudaOptions};
use super::{InteropSettings, PositionVbos, Readout, SettingsChange, SimBackend};
use crate::cuda::settings::InteropMode;
use crate::gfx::buffers::upload_positions;
use crate::gfx::gl::Gl;
use crate::gfx::GlInfo;
use sim::tree::Solver;
use sim::{Bodies, PhysParams};

/// Simulation backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a CUDA device shares the GL context, else the CPU backend (with a notice).
    Auto,
    /// CUDA only: exit with an error when it cannot be used.
    Cuda,
    /// Multithreaded CPU backend (float32, or float64 with `--precision f64`); never touches CUDA.
    Cpu,
}

/// What a backend is made from: the choice and, for CUDA, its options.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// CPU, CUDA, or CUDA with the CPU as fallback.
    pub choice: BackendChoice,
    /// The force solver: the direct sum, or the Barnes–Hut tree (on the CUDA backend the GPU
    /// tree, fp32 on one GPU; on the CPU backend the CPU tree).
    pub solver: Solver,
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
///   `"CUDA unavailable, running the CPU backend: <cause and remedy>; CUDA's error: <error>"`
///   ([`fallback_notice`]) for the overlay (the caller logs it). The CPU backend runs the
///   precision asked for (`--precision f64`: its float64 state and forces).
///
/// With `--interop external` (cuda or auto), where this GL or CUDA cannot do external memory
/// (e.g. `GL_EXT_memory_object_fd missing on <GL_RENDERER>`, checked before CUDA is touched) the
/// notice says so, ending in `": falling back to --interop map"`, and the `map` storage is made
/// as above; a later CPU fallback adds its own line to the notice. Other failures (no CUDA device
/// shares the GL context) are handled like those of `map`.
///
/// With [`Solver::Tree`] (`--solver tree`) the CUDA backend steps by the GPU tree
/// ([`CudaBackend::set_solver`]); where that fails, `auto` falls back to the CPU backend's tree.
///
/// # Errors
/// `--backend cuda` and CUDA (or its tree, with `--solver tree`) cannot be used; the fallback from `external` to `map` with register
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
        return Ok((Box::new(CpuBackend::with_precision(bodies, params, cfg.solver, cfg.cuda.precision)), None));
    }
    let made = CudaBackend::new(&cfg.cuda, gl, gl_info, vbos, bodies, params).and_then(|mut b| {
        b.set_solver(cfg.solver)?;
        Ok(b)
    });
    let err = match made {
        Ok(b) => return Ok((Box::new(b), None)),
        Err(e) => e,
    };
    if err.chain().any(|c| matches!(c.downcast_ref(), Some(kernels::launch_rule::LaunchRuleError::Refused(_)))) {
        // The user's own choice cannot run: say so rather than run the CPU in its place.
        return Err(err);
    }
    if cfg.cuda.settings.interop != InteropMode::External || !is_unsupported(&err) {
        // Not about external memory (e.g. CUDA cannot share this GL context).
        return match cfg.choice {
            BackendChoice::Auto => Ok(cpu_fallback(&err, cfg, gl_info, bodies, params)),
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
/// ([`super::CudaSide::apply_settings`]), else a rebuild. A rebuild reads the state back
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
    // A backend without a CUDA side has no interop settings to change.
    let change = match backend.sides().cuda() {
        Some(c) => c.apply_settings(gl, vbos, s)?,
        None => SettingsChange::Applied,
    };
    if change == SettingsChange::Applied {
        return Ok(Applied::InPlace);
    }
    let old_settings = backend.sides().cuda().and_then(|c| c.settings());
    let bodies = backend.state(gl, vbos, Readout::Bodies).context("reading the state for the backend switch")?.bodies;
    for i in 0..2 {
        upload_positions(gl, vbos, i, &bodies.pos)?;
    }
    let mut new_cfg = cfg.clone();
    new_cfg.cuda.settings = s;
    // The old backend goes first: it may hold CUDA registrations of the same VBOs. Until the new
    // one exists the CPU stands in (it never touches CUDA or the VBOs).
    let mut old = std::mem::replace(backend, Box::new(CpuBackend::with_solver(&bodies, params, cfg.solver)));
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

/// `--backend auto` without CUDA: the CPU backend, with the notice that says why: the cause and
/// remedy the doctor's checks find for `gl_info` ([`crate::doctor::fallback::explain_here`]),
/// then CUDA's error.
fn cpu_fallback(
    err: &anyhow::Error,
    cfg: &BackendConfig,
    gl_info: &GlInfo,
    bodies: &Bodies,
    params: PhysParams,
) -> (Box<dyn SimBackend>, Option<String>) {
    let mut notice = fallback_notice(err, gl_info);
    if let Some(ignored) = ignored_by_cpu(&cuda_only_options(&cfg.cuda, &cfg.typed)) {
        // A line of its own, so that it is not lost at the end of the driver's error.
        notice.push('\n');
        notice.push_str(&ignored);
    }
    (Box::new(CpuBackend::with_precision(bodies, params, cfg.solver, cfg.cuda.precision)), Some(notice))
}

/// The first line of the CPU fallback's notice: `CUDA unavailable, running the CPU backend:
/// <cause> (nbody-interop doctor: <check>); remedy: <remedy>; CUDA's error: <err>` (the cause
/// once where CUDA's error already holds it), or without a cause the doctor's checks find,
/// CUDA's error and where to look.
pub fn fallback_notice(err: &anyhow::Error, gl_info: &GlInfo) -> String {
    let error = format!("{err:#}").replace('\n', " ");
    match crate::doctor::fallback::explain_here(gl_info, &error) {
        // The cause is CUDA's error itself (no driver): said once, with the check and the remedy.
        Some(f) if error.contains(&f.cause) => {
            format!("CUDA unavailable, running the CPU backend: {error} (nbody-interop doctor: {}); remedy: {}", f.check, f.remedy)
        }
        Some(f) => format!("CUDA unavailable, running the CPU backend: {}; CUDA's error: {error}", f.sentence()),
        None => format!("CUDA unavailable, running the CPU backend: {error} (nbody-interop doctor checks what it needs)"),
    }
}

/// The options of the CUDA backend that `o` sets away from their defaults or that were typed
/// (`typed`: long names, whatever the value), by flag name: the CPU backend does not use them
/// (`--backend cpu`, or `auto` without CUDA).
pub fn cuda_only_options(o: &CudaOptions, typed: &[String]) -> Vec<&'static str> {
    use crate::cuda::settings::{CtxSched, GatherChoice, GpuCount, ResourceFlags, StreamKind};
    let s = &o.settings;
    let split = |f: fn(&crate::cuda::settings::SliceOptions) -> bool| o.split.as_ref().is_some_and(f);
    let given = [
        ("--interop", s.interop != InteropMode::Map),
        ("--register-flags", s.register_flags != ResourceFlags::None),
        ("--map-flags", s.map_flags != ResourceFlags::None),
        ("--stream", s.stream != StreamKind::Legacy),
        ("--stream-priority", s.stream_priority != 0),
        ("--block-size", s.block_size != 0),
        ("--ctx-sched", o.ctx_sched != CtxSched::Auto),
        ("--kernel", o.kernel.is_some()),
        ("--step-kernel", o.step_kernel.is_some()),
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
    crate::libraries::open_driver().is_ok()
}

#[cfg(test)]
mod external_fallback_tests {

    use anyhow::anyhow;

    use super::*;
    use crate::backend::cuda::external::*;
    use crate::backend::cuda::{CudaBackend, CudaOptions};
    use crate::backend::select::{make_backend, BackendChoice, BackendConfig};
    use crate::backend::InteropSettings;
    use crate::cuda::settings::{CtxSched, InteropMode, Precision, ResourceFlags, StreamKind};
    use crate::gfx::context::HeadlessContext;
    use crate::gfx::renderer::Renderer;
    use crate::gfx::GlInfo;
    use sim::init::initial_bodies;
    use sim::PhysParams;

    /// What `--interop external` (with `--backend cuda` for `cuda`, `--block-size` for
    /// `block`) makes, the command line's other defaults kept.
    fn external_config(choice: BackendChoice, block: u32) -> BackendConfig {
        let settings = InteropSettings {
            interop: InteropMode::External,
            register_flags: ResourceFlags::None,
            map_flags: ResourceFlags::None,
            stream: StreamKind::Legacy,
            stream_priority: 0,
            block_size: block,
        };
        BackendConfig {
            choice,
            solver: sim::tree::Solver::Direct,
            cuda: CudaOptions {
                settings,
                separate_maps: false,
                ctx_sched: CtxSched::Auto,
                kernel: None,
                step_kernel: None,
                precision: Precision::F32,
                split: None,
                external_sync: crate::cuda::settings::ExternalSync::Auto,
            },
            typed: Vec::new(),
        }
    }

    /// The bodies, parameters and renderer (with its VBOs) these tests hand to the backends:
    /// `n` bodies of `init` (seed 1), ε = 0.01. The caller destroys the renderer.
    fn small_scene(ctx: &HeadlessContext, init: &str, n: usize) -> (Bodies, PhysParams, Renderer, PositionVbos) {
        let bodies = initial_bodies(init, n, 1, 1.0).expect("bodies");
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
        let renderer = Renderer::new(ctx.gl(), &ctx.info, &bodies).expect("renderer");
        let vbos = *renderer.vbos();
        (bodies, params, renderer, vbos)
    }

    #[test]
    fn unsupported_is_found_under_context() {
        let e = anyhow::Error::new(Unsupported("GL_EXT_memory_object_fd missing on x".into())).context("making the backend");
        assert!(is_unsupported(&e));
        assert!(!is_unsupported(&anyhow!("CUDA cannot share this GL context")));
    }

    /// This context's facts, as a GL without `GL_EXT_memory_object_fd` would give them (Mesa's
    /// llvmpipe has the extensions since 22.x, so the missing case is made here).
    fn without_extensions(ctx: &HeadlessContext) -> (GlInfo, String) {
        let mut info = ctx.info.clone();
        let why = format!("GL_EXT_memory_object_fd missing on {}", info.renderer);
        info.memory_object = Err(why.clone());
        (info, why)
    }

    #[test]
    fn the_table_loads_or_names_what_is_missing() {
        let ctx = HeadlessContext::new(0).expect("headless GL");
        match &ctx.info.memory_object {
            Ok(fns) => eprintln!("{}: {fns:?}", ctx.info.renderer),
            Err(why) => {
                assert!(why.contains(&ctx.info.renderer), "the reason names GL_RENDERER: {why}");
                assert!(why.contains("missing on") || why.contains("did not resolve"), "{why}");
            }
        }
    }

    /// Without the extensions `--interop external` says so and falls back to map; where map
    /// fails too (no NVIDIA GL), auto goes on to the CPU backend with a second line, and
    /// `--backend cuda` fails with both reasons in its message.
    #[test]
    fn missing_extensions_fall_back_to_map_then_cpu() {
        let ctx = HeadlessContext::new(0).expect("headless GL");
        let gl = ctx.gl();
        let (info, why) = without_extensions(&ctx);
        let (bodies, params, mut renderer, vbos) = small_scene(&ctx, "plummer", 64);

        let args = external_config(BackendChoice::Auto, 0);
        let (mut backend, notice) = make_backend(&args, gl, &info, &vbos, &bodies, params).expect("auto never fails");
        let notice = notice.expect("a notice");
        let first = notice.lines().next().unwrap_or_default();
        assert_eq!(first, format!("{why}: falling back to --interop map"));
        if backend.describe().label.starts_with("CPU") {
            let second = notice.lines().nth(1).unwrap_or_default();
            assert!(second.starts_with("CUDA unavailable, running the CPU backend: "), "{notice}");
        }
        assert!(backend.shown().buffers.is_none(), "map and CPU draw the renderer's VBOs");
        backend.release_gl(gl);
        drop(backend);

        let args = external_config(BackendChoice::Cuda, 0);
        match make_backend(&args, gl, &info, &vbos, &bodies, params) {
            Ok((mut b, notice)) => {
                // A CUDA device shares this GL: map runs, and the notice still says why.
                assert!(notice.is_some_and(|n| n.ends_with("falling back to --interop map")));
                b.release_gl(gl);
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(msg.starts_with(&format!("{why}: falling back to --interop map: ")), "{msg}");
            }
        }
        renderer.destroy(gl);
    }

    #[test]
    fn the_external_backend_refuses_a_gl_without_the_table_before_touching_cuda() {
        let ctx = HeadlessContext::new(0).expect("headless GL");
        let (info, why) = without_extensions(&ctx);
        let (bodies, params, mut renderer, vbos) = small_scene(&ctx, "ball", 32);
        let args = external_config(BackendChoice::Auto, 0);
        let e = CudaBackend::new(&args.cuda, ctx.gl(), &info, &vbos, &bodies, params).err().expect("no external memory on this GL");
        assert!(is_unsupported(&e), "{e:#}");
        assert_eq!(format!("{e:#}"), why);
        // A bad block size is refused first, and is not a reason to fall back.
        let args = external_config(BackendChoice::Auto, 100);
        let e = CudaBackend::new(&args.cuda, ctx.gl(), &info, &vbos, &bodies, params).err().expect("bad block size");
        assert!(!is_unsupported(&e), "{e:#}");
        renderer.destroy(ctx.gl());
    }

    /// `--precision f64` with `--backend auto` where CUDA cannot share the GL context (Mesa with
    /// no NVIDIA GPU, this machine): the CPU backend in float64, with the fallback's notice — for
    /// every storage.
    #[test]
    fn without_cuda_f64_falls_back_to_the_f64_cpu_backend() {
        let ctx = HeadlessContext::new(0).expect("headless GL");
        if ctx.info.vendor.contains("NVIDIA") {
            eprintln!("skipped: needs a GL that CUDA cannot share (got {})", ctx.info.summary());
            return;
        }
        let gl = ctx.gl();
        let (bodies, params, mut renderer, vbos) = small_scene(&ctx, "ball", 32);
        for interop in [InteropMode::Map, InteropMode::Copy, InteropMode::External] {
            let mut cfg = external_config(BackendChoice::Auto, 0);
            cfg.cuda.settings.interop = interop;
            cfg.cuda.precision = Precision::F64;
            let (mut b, notice) = make_backend(&cfg, gl, &ctx.info, &vbos, &bodies, params).expect("auto falls back");
            let label = b.describe().label;
            b.release_gl(gl);
            assert!(label.starts_with("CPU f64"), "{interop:?}: {label}");
            assert!(notice.is_some_and(|n| n.contains("CUDA unavailable, running the CPU backend")), "{interop:?}");
        }
        renderer.destroy(gl);
    }

    /// Where the GL has the extensions but CUDA cannot share the context (Mesa with no NVIDIA
    /// GPU, this machine), the failure is CUDA's, not external memory's: auto says "CUDA
    /// unavailable" once, with no map detour.
    #[test]
    fn without_cuda_sharing_auto_goes_to_the_cpu_directly() {
        let ctx = HeadlessContext::new(0).expect("headless GL");
        if ctx.info.memory_object.is_err() || ctx.info.vendor.contains("NVIDIA") {
            eprintln!("skipped: needs a non-NVIDIA GL with GL_EXT_memory_object_fd (got {})", ctx.info.summary());
            return;
        }
        let gl = ctx.gl();
        let (bodies, params, mut renderer, vbos) = small_scene(&ctx, "ball", 32);
        let args = external_config(BackendChoice::Auto, 0);
        let (mut backend, notice) = make_backend(&args, gl, &ctx.info, &vbos, &bodies, params).expect("auto never fails");
        let notice = notice.expect("a notice");
        assert!(notice.starts_with("CUDA unavailable, running the CPU backend: "), "{notice}");
        assert!(!notice.contains("falling back to --interop map"), "{notice}");
        assert!(backend.describe().label.starts_with("CPU"));
        backend.release_gl(gl);
        renderer.destroy(gl);
    }
}
