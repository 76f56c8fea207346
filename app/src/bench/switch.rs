//! `nbody-interop switch`: the cost of handing the GPU from the CUDA context to the GL context and
//! back, measured with work too small to matter.
//!
//! # Why
//! A `bench` frame of the interop modes costs more than the kernel plus the GL frame alone
//! (`interop_us` in [`super::report`]), and `external`, which never maps, pays nearly as much as
//! `map`. The CUDA context and the GL context are two GPU contexts; the GPU runs one at a time
//! and switches between them (time-slicing). This probe times that switch on its own.
//!
//! # Variants
//! One iteration of each, timed on the host (`total_us`); the CUDA and GL parts are also timed
//! on their own (`cuda_host_us`, `gl_host_us`), the GPU side by CUDA events (`kernel_us`,
//! `map_us`) and a `GL_TIME_ELAPSED` query (`gl_us`):
//! - `cuda`: a one-thread kernel that stores one `u32` (`cuLaunchKernel`), events around it,
//!   `cuEventSynchronize`. No GL work.
//! - `gl`: `glClear` of a 1×1 scissor of the FBO inside a timer query, `glFinish`. No CUDA work.
//! - `cuda+gl`: `cuda`, then `gl`: every iteration hands the GPU from GL to CUDA and back.
//! - `cuda+gl-async`: the same work, but the host queues both before waiting (kernel, `glClear`,
//!   `glFinish`, then `cuEventSynchronize`): no host round trip between the two.
//! - `map`: `cuGraphicsMapResources` of one registered 4 KiB GL buffer, the kernel storing into
//!   the mapped pointer, `cuGraphicsUnmapResources`, sync. No GL work.
//! - `map+gl`: `map`, then `gl`.
//! - `gl+map`: the GL part queued first (no `glFinish` yet), then `map` right behind it, then
//!   `glFinish`: the map's wait for GL is queued while the GPU still runs the GL context — the
//!   order of a frame that maps the next frame's buffers right after submitting its draw.
//!
//! Derived (medians of `total_us`): `switch_pair_us` = `cuda+gl` − `cuda` − `gl` (two context
//! switches); `async_pair_us` = `cuda+gl-async` − `cuda` − `gl`; `map_extra_us` = `map` − `cuda`
//! (what mapping adds with GL idle); `map_gl_extra_us` = `map+gl` − `cuda+gl`;
//! `gl_map_extra_us` = `gl+map` − `cuda+gl`.
//!
//! # Order and output
//! `--rounds` interleaved rounds; in each, every variant runs `--warmup` untimed iterations and
//! its share of `--iters`. `switch.json` in `--out` is rewritten after every round (temporary
//! file + rename), so an interrupted or failed run keeps the rounds it finished; a table goes to
//! stdout at the end.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::sys::event_flags;
use interop::{map_resources, Context, DeviceBuffer, Event, Function, GraphicsResource, Module, Stream};
use serde::Serialize;

use super::stats::{median, Summary};
use crate::cli::SwitchArgs;
use crate::cuda_backend::open_for_gl;
use crate::gfx::context::HeadlessContext;
use crate::gfx::gl::Gl;
use crate::gfx::renderer::OffscreenTarget;

/// The one-thread kernel: `*p = v`. PTX ISA 7.0 for sm_50 and later; every driver that this
/// program accepts (CUDA ≥ 11.3 for `cuGetProcAddress`) JIT-compiles it.
const TOUCH_PTX: &str = "\
.version 7.0
.target sm_50
.address_size 64
.visible .entry nbody_touch(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
";

/// Bytes of the registered GL buffer of the map variants.
const VBO_BYTES: usize = 4096;

/// The variants, in the order they run within a round (see the module docs).
pub const VARIANTS: [Variant; 7] =
    [Variant::Cuda, Variant::Gl, Variant::CudaGl, Variant::CudaGlAsync, Variant::Map, Variant::MapGl, Variant::GlMap];

/// One probe loop (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Tiny kernel + sync.
    Cuda,
    /// 1×1 `glClear` + `glFinish`.
    Gl,
    /// `Cuda` then `Gl`, each waited for.
    CudaGl,
    /// The same work queued before any wait.
    CudaGlAsync,
    /// Map, tiny kernel on the mapped pointer, unmap, sync.
    Map,
    /// `Map` then `Gl`.
    MapGl,
    /// `Gl` queued, `Map` behind it, then `glFinish`.
    GlMap,
}

impl Variant {
    /// The name in the table and `switch.json`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Cuda => "cuda",
            Variant::Gl => "gl",
            Variant::CudaGl => "cuda+gl",
            Variant::CudaGlAsync => "cuda+gl-async",
            Variant::Map => "map",
            Variant::MapGl => "map+gl",
            Variant::GlMap => "gl+map",
        }
    }
}

/// Times of one iteration, in µs.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    total: f64,
    cuda_host: Option<f64>,
    gl_host: Option<f64>,
    kernel: Option<f64>,
    map: Option<f64>,
    gl: Option<f64>,
}

/// Per-iteration samples of one variant, all rounds.
#[derive(Debug, Default)]
struct Acc {
    total: Vec<f64>,
    cuda_host: Vec<f64>,
    gl_host: Vec<f64>,
    kernel: Vec<f64>,
    map: Vec<f64>,
    gl: Vec<f64>,
    round_medians: Vec<f64>,
}

impl Acc {
    fn push(&mut self, s: Sample) {
        self.total.push(s.total);
        self.cuda_host.extend(s.cuda_host);
        self.gl_host.extend(s.gl_host);
        self.kernel.extend(s.kernel);
        self.map.extend(s.map);
        self.gl.extend(s.gl);
    }
}

/// The statistics of one variant in `switch.json` (µs).
#[derive(Debug, Clone, Serialize)]
pub struct VariantRow {
    /// Variant name.
    pub variant: &'static str,
    /// Measured iterations.
    pub iters: usize,
    /// Host time of the iteration.
    pub total_us: Summary,
    /// Host time of the CUDA part (launch to sync return).
    pub cuda_host_us: Option<Summary>,
    /// Host time of the GL part (clear to `glFinish` return).
    pub gl_host_us: Option<Summary>,
    /// CUDA-event time around the kernel.
    pub kernel_us: Option<Summary>,
    /// CUDA-event time around `cuGraphicsMapResources`.
    pub map_us: Option<Summary>,
    /// `GL_TIME_ELAPSED` of the clear.
    pub gl_us: Option<Summary>,
    /// Median of `total_us` in each round.
    pub round_medians_us: Vec<f64>,
}

/// Differences of medians of `total_us` (µs; see the module docs).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Derived {
    /// `cuda+gl` − `cuda` − `gl`: two context switches.
    pub switch_pair_us: Option<f64>,
    /// `cuda+gl-async` − `cuda` − `gl`.
    pub async_pair_us: Option<f64>,
    /// `map` − `cuda`.
    pub map_extra_us: Option<f64>,
    /// `map+gl` − `cuda+gl`.
    pub map_gl_extra_us: Option<f64>,
    /// `gl+map` − `cuda+gl`.
    pub gl_map_extra_us: Option<f64>,
}

/// `switch.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchDoc {
    /// `nbody-interop switch`.
    pub tool: &'static str,
    /// Program version.
    pub version: &'static str,
    /// `complete`, `running`, `interrupted` or `error: …`.
    pub status: String,
    /// Rounds finished.
    pub rounds_done: u32,
    /// Start of the run, UTC, RFC 3339.
    pub date: String,
    /// CUDA device name.
    pub gpu_name: String,
    /// CUDA version of the driver.
    pub driver_version: String,
    /// `GL_RENDERER`.
    pub gl_renderer: String,
    /// The EGL device of the headless context.
    pub egl_device: Option<String>,
    /// Stream kind.
    pub stream: String,
    /// Context scheduling flag.
    pub ctx_sched: String,
    /// `debug` or `release`.
    pub build_profile: &'static str,
    /// One entry per variant.
    pub variants: Vec<VariantRow>,
    /// Differences of medians.
    pub derived: Derived,
}

/// Everything the probe runs with. Field order is drop order: CUDA objects (the registration
/// first, in [`Drop`]), then the GL objects (deleted in [`Drop`]), then the GL context.
struct Rig {
    resource: Option<GraphicsResource>,
    scratch: DeviceBuffer<u32>,
    events: [Event; 4],
    touch: Function,
    _module: Module,
    stream: Stream,
    ctx: Arc<Context>,
    vbo: Option<glow::NativeBuffer>,
    query: Option<glow::NativeQuery>,
    target: Option<OffscreenTarget>,
    gl: HeadlessContext,
}

impl Drop for Rig {
    fn drop(&mut self) {
        // cuGraphicsUnregisterResource before the GL buffer goes; the context is current here.
        self.resource = None;
        let gl = Gl::current(&self.gl.gl);
        if let Some(b) = self.vbo.take() {
            gl.delete_buffer(b);
        }
        if let Some(q) = self.query.take() {
            gl.delete_query(q);
        }
        if let Some(t) = self.target.take() {
            t.destroy(&self.gl.gl);
        }
    }
}

fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

impl Rig {
    fn open(args: &SwitchArgs) -> anyhow::Result<Rig> {
        let gl_ctx = HeadlessContext::new(crate::demo::HEADLESS_CUDA_DEVICE).context("headless GL context")?;
        let (ctx, stream, _info) = open_for_gl(&gl_ctx.info, args.stream, 0, args.ctx_sched)?;
        let target = OffscreenTarget::new(&gl_ctx.gl, 16, 16).context("offscreen framebuffer")?;
        let gl = Gl::current(&gl_ctx.gl);
        let query = if gl_ctx.info.timer_query { gl.create_query().ok() } else { None };
        let vbo = gl.create_buffer().map_err(|e| anyhow::anyhow!("glGenBuffers: {e}"))?;
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
        gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &[0u8; VBO_BYTES], glow::DYNAMIC_DRAW);
        gl.bind_buffer(glow::ARRAY_BUFFER, None);
        // From here on, Rig's Drop releases what was made, in order, on every error path.
        let module = Module::from_ptx(&ctx, TOUCH_PTX.as_bytes()).context("loading the probe kernel")?;
        let touch = module.function("nbody_touch").context("cuModuleGetFunction")?;
        let mut events = Vec::with_capacity(4);
        for _ in 0..4 {
            events.push(Event::new(&ctx, event_flags::DEFAULT).context("cuEventCreate")?);
        }
        let events: [Event; 4] = events.try_into().map_err(|_| anyhow::anyhow!("four events"))?;
        let scratch = DeviceBuffer::alloc(&ctx, 1).context("cuMemAlloc (4 bytes)")?;
        let mut rig = Rig {
            resource: None,
            scratch,
            events,
            touch,
            _module: module,
            stream,
            ctx,
            vbo: Some(vbo),
            query,
            target: Some(target),
            gl: gl_ctx,
        };
        let resource = GraphicsResource::register_gl_buffer(&rig.ctx, vbo.0.get(), 0).context("cuGraphicsGLRegisterBuffer")?;
        rig.resource = Some(resource);
        Ok(rig)
    }

    /// Launch the one-thread kernel storing `v` at `ptr` on the rig's stream.
    ///
    /// # Safety
    /// `ptr` must be valid for a 4-byte store until the launch completes.
    unsafe fn touch(&self, ptr: interop::sys::CUdeviceptr, v: u32) -> anyhow::Result<()> {
        let mut p = ptr;
        let mut v = v;
        let mut params = [(&raw mut p).cast::<std::ffi::c_void>(), (&raw mut v).cast::<std::ffi::c_void>()];
        // SAFETY: two parameters matching `.param .u64 p, .param .u32 v`; the caller guarantees `ptr`.
        unsafe { self.touch.launch((1, 1, 1), (1, 1, 1), 0, &self.stream, &mut params) }.context("cuLaunchKernel")
    }

    /// The CUDA part: the kernel between events `0` and `1`, then (with `wait`) wait for event 1.
    /// Returns the host µs.
    fn cuda_part(&self, i: u32, wait: bool) -> anyhow::Result<f64> {
        let t = Instant::now();
        let [e0, e1, ..] = &self.events;
        e0.record(&self.stream).context("cuEventRecord")?;
        // SAFETY: `scratch` is this rig's 4-byte allocation, alive for the rig's lifetime, and
        // every iteration waits for the launch before returning.
        unsafe { self.touch(self.scratch.ptr(), i) }?;
        e1.record(&self.stream).context("cuEventRecord")?;
        if wait {
            e1.synchronize().context("cuEventSynchronize")?;
        }
        Ok(us(t))
    }

    fn kernel_us(&self) -> anyhow::Result<Option<f64>> {
        let [e0, e1, ..] = &self.events;
        Ok(Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(|ms| f64::from(ms) * 1e3))
    }

    /// The GL part: 1×1 scissored clear in a timer query, then (with `finish`) `glFinish` and
    /// the query's result. Returns (host µs, GL µs).
    fn gl_part(&self, i: u32, finish: bool) -> (f64, Option<f64>) {
        let gl = Gl::current(&self.gl.gl);
        let t = Instant::now();
        if let Some(q) = self.query {
            gl.begin_query(glow::TIME_ELAPSED, q);
        }
        gl.bind_framebuffer(glow::FRAMEBUFFER, self.target.map(|t| t.fbo));
        gl.enable(glow::SCISSOR_TEST);
        gl.scissor(0, 0, 1, 1);
        let c = (i % 256) as f32 / 255.0;
        gl.clear_color(c, 0.0, 0.0, 1.0);
        gl.clear(glow::COLOR_BUFFER_BIT);
        gl.disable(glow::SCISSOR_TEST);
        if self.query.is_some() {
            gl.end_query(glow::TIME_ELAPSED);
        }
        if !finish {
            return (us(t), None);
        }
        gl.finish();
        let host = us(t);
        (host, self.gl_us())
    }

    /// The result of the last timer query (waits for it).
    fn gl_us(&self) -> Option<f64> {
        let gl = Gl::current(&self.gl.gl);
        self.query.map(|q| gl.get_query_parameter_u64(q, glow::QUERY_RESULT) as f64 * 1e-3)
    }

    /// Map the registered buffer, store into it, unmap, wait. Returns (host µs, map µs, kernel µs).
    fn map_part(&mut self, i: u32) -> anyhow::Result<(f64, Option<f64>, Option<f64>)> {
        let t = Instant::now();
        let [e0, e1, e2, e3] = &self.events;
        let resource = self.resource.as_mut().context("no registered buffer")?;
        e0.record(&self.stream).context("cuEventRecord")?;
        let mapping = map_resources(std::slice::from_mut(resource), &self.stream).context("cuGraphicsMapResources")?;
        e1.record(&self.stream).context("cuEventRecord")?;
        let ptr = mapping.pointer(0).context("cuGraphicsResourceGetMappedPointer")?.require(4)?.device_ptr();
        let mut p = ptr;
        let mut v = i;
        let mut params = [(&raw mut p).cast::<std::ffi::c_void>(), (&raw mut v).cast::<std::ffi::c_void>()];
        // SAFETY: two parameters matching the kernel's; `ptr` is the mapped buffer (≥ 4 bytes,
        // checked by `require`), which stays mapped until the unmap below, ordered after the
        // launch on the same stream.
        unsafe { self.touch.launch((1, 1, 1), (1, 1, 1), 0, &self.stream, &mut params) }.context("cuLaunchKernel")?;
        e2.record(&self.stream).context("cuEventRecord")?;
        mapping.unmap().context("cuGraphicsUnmapResources")?;
        e3.record(&self.stream).context("cuEventRecord")?;
        e3.synchronize().context("cuEventSynchronize")?;
        let host = us(t);
        let map = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(|ms| f64::from(ms) * 1e3);
        let kernel = Event::elapsed_ms(e1, e2).context("cuEventElapsedTime")?.map(|ms| f64::from(ms) * 1e3);
        Ok((host, map, kernel))
    }

    fn iteration(&mut self, v: Variant, i: u32) -> anyhow::Result<Sample> {
        let t = Instant::now();
        let mut s = Sample::default();
        match v {
            Variant::Cuda => {
                s.cuda_host = Some(self.cuda_part(i, true)?);
                s.kernel = self.kernel_us()?;
            }
            Variant::Gl => {
                let (h, g) = self.gl_part(i, true);
                (s.gl_host, s.gl) = (Some(h), g);
            }
            Variant::CudaGl => {
                s.cuda_host = Some(self.cuda_part(i, true)?);
                s.kernel = self.kernel_us()?;
                let (h, g) = self.gl_part(i, true);
                (s.gl_host, s.gl) = (Some(h), g);
            }
            Variant::CudaGlAsync => {
                self.cuda_part(i, false)?;
                self.gl_part(i, false);
                Gl::current(&self.gl.gl).finish();
                self.events[1].synchronize().context("cuEventSynchronize")?;
                let g = self.gl_us();
                s.kernel = self.kernel_us()?;
                s.gl = g;
            }
            Variant::Map | Variant::MapGl => {
                let (h, m, k) = self.map_part(i)?;
                (s.cuda_host, s.map, s.kernel) = (Some(h), m, k);
                if v == Variant::MapGl {
                    let (h, g) = self.gl_part(i, true);
                    (s.gl_host, s.gl) = (Some(h), g);
                }
            }
            Variant::GlMap => {
                self.gl_part(i, false);
                let (h, m, k) = self.map_part(i)?;
                Gl::current(&self.gl.gl).finish();
                (s.cuda_host, s.map, s.kernel, s.gl) = (Some(h), m, k, self.gl_us());
            }
        }
        s.total = us(t);
        Ok(s)
    }
}

fn validate(args: &SwitchArgs) -> anyhow::Result<()> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.iters < args.rounds {
        bail!("--iters ({}) must be at least --rounds ({}): each round measures iters/rounds iterations", args.iters, args.rounds);
    }
    Ok(())
}

fn rows(accs: &[(Variant, Acc)]) -> Vec<VariantRow> {
    accs.iter()
        .filter_map(|(v, a)| {
            Some(VariantRow {
                variant: v.name(),
                iters: a.total.len(),
                total_us: Summary::of(&a.total)?,
                cuda_host_us: Summary::of(&a.cuda_host),
                gl_host_us: Summary::of(&a.gl_host),
                kernel_us: Summary::of(&a.kernel),
                map_us: Summary::of(&a.map),
                gl_us: Summary::of(&a.gl),
                round_medians_us: a.round_medians.clone(),
            })
        })
        .collect()
}

/// The differences of medians (see the module docs); `None` where a variant has no rows.
pub fn derive(rows: &[VariantRow]) -> Derived {
    let m = |v: Variant| rows.iter().find(|r| r.variant == v.name()).map(|r| r.total_us.median);
    let sub = |a: Option<f64>, b: &[Option<f64>]| -> Option<f64> {
        let mut x = a?;
        for y in b {
            x -= (*y)?;
        }
        Some(x)
    };
    let (cuda, gl) = (m(Variant::Cuda), m(Variant::Gl));
    Derived {
        switch_pair_us: sub(m(Variant::CudaGl), &[cuda, gl]),
        async_pair_us: sub(m(Variant::CudaGlAsync), &[cuda, gl]),
        map_extra_us: sub(m(Variant::Map), &[cuda]),
        map_gl_extra_us: sub(m(Variant::MapGl), &[m(Variant::CudaGl)]),
        gl_map_extra_us: sub(m(Variant::GlMap), &[m(Variant::CudaGl)]),
    }
}

fn fmt_opt(s: Option<Summary>) -> String {
    s.map_or_else(|| "—".into(), |s| format!("{:.1}", s.median))
}

/// The stdout table: medians in µs.
pub fn table(doc: &SwitchDoc) -> String {
    let mut t = format!(
        "{:<14} {:>9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
        "variant", "total µs", "p95 µs", "cuda host", "gl host", "kernel", "map", "gl gpu"
    );
    for r in &doc.variants {
        t += &format!(
            "{:<14} {:>9.1} {:>9.1} {:>10} {:>9} {:>9} {:>9} {:>9}\n",
            r.variant,
            r.total_us.median,
            r.total_us.p95,
            fmt_opt(r.cuda_host_us),
            fmt_opt(r.gl_host_us),
            fmt_opt(r.kernel_us),
            fmt_opt(r.map_us),
            fmt_opt(r.gl_us)
        );
    }
    let d = &doc.derived;
    let f = |x: Option<f64>| x.map_or_else(|| "—".into(), |x| format!("{x:.1} µs"));
    t += &format!(
        "two context switches (cuda+gl − cuda − gl): {}; queued without host waits: {}\n\
         mapping adds {} with GL idle, {} between GL frames, {} when queued right behind the GL work",
        f(d.switch_pair_us),
        f(d.async_pair_us),
        f(d.map_extra_us),
        f(d.map_gl_extra_us),
        f(d.gl_map_extra_us)
    );
    t
}

/// Run `switch` with `args` (see the module docs).
///
/// # Errors
/// Bad arguments; no headless GL context; no CUDA device that shares it (Mesa, no driver); a
/// CUDA or GL failure while measuring; Ctrl-C. `switch.json` keeps every finished round.
pub fn run(args: &SwitchArgs) -> anyhow::Result<()> {
    validate(args)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    let path: PathBuf = args.out.join("switch.json");
    let mut rig = Rig::open(args).context(
        "the switch probe needs CUDA and a headless GL context on the same NVIDIA GPU (run it where `nbody-interop bench \
         --modes map` runs)",
    )?;
    let dev = rig.ctx.device().info().context("reading the device's attributes")?;
    let mut doc = SwitchDoc {
        tool: "nbody-interop switch",
        version: env!("CARGO_PKG_VERSION"),
        status: "running".into(),
        rounds_done: 0,
        date: chrono::Utc::now().to_rfc3339(),
        gpu_name: dev.name,
        driver_version: interop::entry::cuda_version_string(rig.ctx.api().driver_version()),
        gl_renderer: rig.gl.info.renderer.clone(),
        egl_device: rig.gl.info.egl_device.clone(),
        stream: super::flag_name(args.stream),
        ctx_sched: super::flag_name(args.ctx_sched),
        build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
        variants: Vec::new(),
        derived: Derived::default(),
    };
    super::install_ctrlc();
    super::STOP.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut accs: Vec<(Variant, Acc)> = VARIANTS.iter().map(|v| (*v, Acc::default())).collect();
    let write = |doc: &SwitchDoc| -> anyhow::Result<()> {
        let json = serde_json::to_vec_pretty(doc).context("serialising switch.json")?;
        super::report::write_atomic(&path, &json)
    };
    let mut outcome = Ok(());
    'rounds: for round in 0..args.rounds {
        let count = super::frames_in_round(args.iters, args.rounds, round);
        for (v, acc) in &mut accs {
            let mut samples = Vec::with_capacity(count as usize);
            for i in 0..args.warmup + count {
                if super::stopped() {
                    outcome = Err(anyhow::anyhow!("switch interrupted after {round} finished round(s); they are in {}", path.display()));
                    break 'rounds;
                }
                match rig.iteration(*v, i) {
                    Ok(s) if i >= args.warmup => samples.push(s),
                    Ok(_) => {}
                    Err(e) => {
                        outcome = Err(e.context(format!("variant {}, round {}", v.name(), round + 1)));
                        break 'rounds;
                    }
                }
            }
            acc.round_medians.push(median(&samples.iter().map(|s| s.total).collect::<Vec<_>>()).unwrap_or(f64::NAN));
            samples.into_iter().for_each(|s| acc.push(s));
        }
        doc.rounds_done = round + 1;
        doc.variants = rows(&accs);
        doc.derived = derive(&doc.variants);
        write(&doc)?;
    }
    drop(rig);
    doc.status = match &outcome {
        Ok(()) => "complete".into(),
        Err(e) if super::stopped() => format!("interrupted: {e:#}"),
        Err(e) => format!("error: {e:#}"),
    };
    if doc.rounds_done > 0 {
        write(&doc)?;
        println!("{}", table(&doc));
        println!("wrote {}", path.display());
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: Variant, median: f64) -> VariantRow {
        let s = Summary { median, p95: median, p99: median, max: median };
        VariantRow {
            variant: v.name(),
            iters: 1,
            total_us: s,
            cuda_host_us: None,
            gl_host_us: None,
            kernel_us: None,
            map_us: None,
            gl_us: None,
            round_medians_us: vec![median],
        }
    }

    #[test]
    fn derived_differences_of_medians() {
        let rows = vec![
            row(Variant::Cuda, 10.0),
            row(Variant::Gl, 20.0),
            row(Variant::CudaGl, 100.0),
            row(Variant::CudaGlAsync, 60.0),
            row(Variant::Map, 15.0),
            row(Variant::MapGl, 130.0),
            row(Variant::GlMap, 101.0),
        ];
        let d = derive(&rows);
        assert_eq!(d.switch_pair_us, Some(70.0));
        assert_eq!(d.async_pair_us, Some(30.0));
        assert_eq!(d.map_extra_us, Some(5.0));
        assert_eq!(d.map_gl_extra_us, Some(30.0));
        assert_eq!(d.gl_map_extra_us, Some(1.0));
        let partial = derive(&rows[..2]);
        assert_eq!(partial.switch_pair_us, None);
        assert!(table(&SwitchDoc {
            tool: "t",
            version: "0",
            status: "complete".into(),
            rounds_done: 1,
            date: String::new(),
            gpu_name: String::new(),
            driver_version: String::new(),
            gl_renderer: String::new(),
            egl_device: None,
            stream: "legacy".into(),
            ctx_sched: "auto".into(),
            build_profile: "debug",
            variants: rows,
            derived: d,
        })
        .contains("two context switches"));
    }
}
