//! The CUDA simulation backends: `map` (registered GL buffers mapped every frame) and `copy`
//! (device buffer → pinned host → `glBufferSubData`).
//!
//! One frame of `map` (the resource-mapping workflow, `interop::graphics`):
//! `cuGraphicsMapResources` (both buffers, one call, on the frame's stream) →
//! `cuGraphicsResourceGetMappedPointer` (each, size checked) → `cuLaunchKernel` (reads the front
//! buffer, writes the back one) → `cuGraphicsUnmapResources` (one call, same stream) → GL draws
//! the written buffer. CUDA events around each step give the map, kernel and unmap times.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::sys::{event_flags, map_flags, register_flags, stream_flags};
use interop::{
    map_resources, Context, DetachedMapping, Device, DeviceBuffer, DeviceInfo, Event, GraphicsResource, Mapping, PinnedBuffer, SchedFlag,
    Stream, StreamSemantics,
};

use crate::backend::{InteropSettings, PositionVbos, SimBackend, SimTimings};
use crate::cli::{CtxSched, DemoArgs, InteropMode, ResourceFlags, StreamKind};
use crate::gfx::renderer::upload_positions;
use crate::gfx::GlInfo;
use crate::sim::gpu::{check_fits, validate_block_size, GpuStepper, Kernels, BODY_BYTES};
use crate::sim::{diagnostics, Bodies, Diagnostics, PhysParams};
use crate::workflow::{BufferView, FrameStep, StepState, StepView};

/// Everything a CUDA backend is made from.
#[derive(Debug, Clone)]
pub struct CudaOptions {
    /// Map/copy and the other live settings.
    pub settings: InteropSettings,
    /// Map each buffer with its own map/unmap call (the bench's `map-separate`).
    pub separate_maps: bool,
    /// Context scheduling flag.
    pub ctx_sched: CtxSched,
    /// PTX file to load instead of the embedded kernel.
    pub kernel: Option<std::path::PathBuf>,
}

impl CudaOptions {
    /// The options the demo's command line asks for.
    pub fn from_args(args: &DemoArgs) -> CudaOptions {
        CudaOptions {
            settings: InteropSettings {
                interop: args.interop,
                register_flags: args.register_flags,
                map_flags: args.map_flags,
                stream: args.stream,
                stream_priority: args.stream_priority,
                block_size: args.sim.block_size,
            },
            separate_maps: false,
            ctx_sched: args.ctx_sched,
            kernel: args.sim.kernel.clone(),
        }
    }
}

/// `CU_CTX_SCHED_*` of the CLI value.
pub fn sched_flag(s: CtxSched) -> SchedFlag {
    match s {
        CtxSched::Auto => SchedFlag::Auto,
        CtxSched::Spin => SchedFlag::Spin,
        CtxSched::Yield => SchedFlag::Yield,
        CtxSched::Blocking => SchedFlag::BlockingSync,
    }
}

fn register_bits(f: ResourceFlags) -> u32 {
    match f {
        ResourceFlags::None => register_flags::NONE,
        ResourceFlags::ReadOnly => register_flags::READ_ONLY,
        ResourceFlags::WriteDiscard => register_flags::WRITE_DISCARD,
    }
}

/// Opens CUDA with the semantics `stream` needs, makes the context on the CUDA device that
/// shares the current GL context (`cuGLGetDevices`), and the frame's stream.
///
/// # Errors
/// No driver, or no CUDA device can share the GL context (the message names GL_VENDOR and
/// GL_RENDERER and the remedy).
pub fn open_for_gl(
    gl_info: &GlInfo,
    stream: StreamKind,
    priority: i32,
    sched: CtxSched,
) -> anyhow::Result<(Arc<Context>, Stream, DeviceInfo)> {
    let semantics = if stream == StreamKind::PerThread { StreamSemantics::PerThread } else { StreamSemantics::Legacy };
    let no_share = |why: String| {
        anyhow::anyhow!(
            "CUDA cannot share this GL context: GL_VENDOR={}, GL_RENDERER={} ({why}). CUDA–GL interop needs the GL \
             context on an NVIDIA GPU driven by the NVIDIA driver (headless: its EGL device; windowed: the display \
             it drives; not Mesa, another vendor's GPU or WSL2). Remedy: run there, or use --backend cpu",
            gl_info.vendor,
            gl_info.renderer
        )
    };
    let api = interop::init(semantics).map_err(|e| {
        anyhow::anyhow!(
            "CUDA is not available: {e}. CUDA–GL interop needs the NVIDIA driver and the GL context on its GPU; \
             this GL context is GL_VENDOR={}, GL_RENDERER={}",
            gl_info.vendor,
            gl_info.renderer
        )
    })?;
    // The demo's API trace, when on, sees this table's calls from here on (registration included).
    crate::trace::attach_active(&api);
    let devices = interop::gl_devices(&api).map_err(|e| no_share(e.to_string()))?;
    if devices.is_empty() {
        return Err(no_share("cuGLGetDevices lists no CUDA device for it".into()));
    }
    let raw = gl_info.egl_cuda_device.filter(|d| devices.contains(d)).unwrap_or(devices[0]);
    let device = Device::from_raw(&api, raw);
    let ctx = Context::primary(&device, sched_flag(sched)).context("cuDevicePrimaryCtxRetain")?;
    let info = device.info()?;
    let stream = make_stream(&ctx, stream, priority)?;
    Ok((ctx, stream, info))
}

/// The frame's stream for a stream kind.
///
/// # Errors
/// `cuStreamCreateWithPriority` fails.
pub fn make_stream(ctx: &Arc<Context>, kind: StreamKind, priority: i32) -> anyhow::Result<Stream> {
    Ok(match kind {
        // With legacy semantics the null stream is the legacy default stream; with per-thread
        // semantics (the table resolved to _ptsz exports) it is the per-thread default stream.
        StreamKind::Legacy | StreamKind::PerThread => Stream::special(ctx, interop::StreamKind::Null),
        StreamKind::NonBlocking => {
            let (least, greatest) = ctx.stream_priority_range()?;
            if !(greatest..=least).contains(&priority) {
                bail!("stream priority {priority} is outside this device's range {greatest}..={least} (lower is higher priority)");
            }
            Stream::create(ctx, stream_flags::NON_BLOCKING, priority).context("cuStreamCreateWithPriority")?
        }
    })
}

/// Where the positions live.
enum Storage {
    /// Both GL buffers registered with CUDA.
    Map { resources: Vec<GraphicsResource> },
    /// Two device buffers and a pinned staging buffer; GL gets a copy each frame.
    /// `gl_front`: the GL buffer holding the newest upload; uploads alternate between the two so
    /// that the other one keeps the previous frame's positions (the renderer colours by speed).
    Copy { pos: [DeviceBuffer<[f32; 4]>; 2], pinned: PinnedBuffer<[f32; 4]>, cur: usize, gl_front: usize },
}

/// A CUDA backend bound to the two GL position buffers.
///
/// Field order is drop order: a step-mode frame (unmaps what it mapped) → the storage (graphics
/// resources are unregistered here, before the renderer deletes the GL buffers) → device buffers
/// → events → kernels and velocities → stream → context.
pub struct CudaBackend {
    stepwise: Option<StepwiseFrame>,
    storage: Option<Storage>,
    phi: Option<DeviceBuffer<f32>>,
    events: [Event; 4],
    gpu: GpuStepper,
    stream: Stream,
    ctx: Arc<Context>,
    opts: CudaOptions,
    info: DeviceInfo,
    gl_info: GlInfo,
    n: usize,
}

/// Make a CUDA backend from the demo's options (see [`create_backend`]).
///
/// # Errors
/// As [`create_backend`].
pub fn create(
    args: &DemoArgs,
    gl: &glow::Context,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    bodies: &Bodies,
    params: PhysParams,
) -> anyhow::Result<Box<dyn SimBackend>> {
    Ok(Box::new(create_backend(&CudaOptions::from_args(args), gl, gl_info, vbos, bodies, params)?))
}

/// Make a CUDA backend sharing `vbos` (which hold `bodies.pos` in buffer 0) with the current GL context.
///
/// # Errors
/// CUDA missing or not sharing the GL context; N too large for the device; an invalid block
/// size; a PTX load or registration failure.
pub fn create_backend(
    opts: &CudaOptions,
    gl: &glow::Context,
    gl_info: &GlInfo,
    vbos: &PositionVbos,
    bodies: &Bodies,
    params: PhysParams,
) -> anyhow::Result<CudaBackend> {
    let s = opts.settings;
    validate_block_size(s.block_size)?;
    if s.interop == InteropMode::Map && s.register_flags == ResourceFlags::ReadOnly {
        tracing::warn!(
            "--register-flags read-only promises the driver that CUDA will not write the buffers, but the kernel \
             writes one of them every frame: GL may draw stale positions (use none or write-discard)"
        );
    }
    let n = bodies.len();
    let (ctx, stream, info) = open_for_gl(gl_info, s.stream, s.stream_priority, opts.ctx_sched)?;
    check_fits(n, if s.interop == InteropMode::Copy { 5 } else { 3 }, info.total_memory_bytes)?;
    let kernels = Kernels::load(&ctx, opts.kernel.as_deref())?;
    let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel).context("uploading velocities")?;
    let storage = make_storage(&ctx, gl, vbos, bodies, s)?;
    let events = [0, 1, 2, 3].map(|_| Event::new(&ctx, event_flags::DEFAULT));
    let [e0, e1, e2, e3] = events;
    let gpu = GpuStepper::new(kernels, vel, s.block_size, params)?;
    Ok(CudaBackend {
        stepwise: None,
        storage: Some(storage),
        phi: None,
        events: [e0?, e1?, e2?, e3?],
        gpu,
        stream,
        ctx,
        opts: opts.clone(),
        info,
        gl_info: gl_info.clone(),
        n,
    })
}

fn make_storage(
    ctx: &Arc<Context>,
    gl: &glow::Context,
    vbos: &PositionVbos,
    bodies: &Bodies,
    s: InteropSettings,
) -> anyhow::Result<Storage> {
    if vbos.n != bodies.len() {
        bail!("the GL buffers hold {} bodies, the state {}", vbos.n, bodies.len());
    }
    Ok(match s.interop {
        InteropMode::Map => {
            let mut resources = Vec::with_capacity(2);
            for b in vbos.buffers {
                resources.push(
                    GraphicsResource::register_gl_buffer(ctx, b.0.get(), register_bits(s.register_flags))
                        .with_context(|| format!("cuGraphicsGLRegisterBuffer of GL buffer {}", b.0.get()))?,
                );
            }
            Storage::Map { resources }
        }
        InteropMode::Copy => {
            let _ = gl;
            let pos = [DeviceBuffer::from_slice(ctx, &bodies.pos)?, DeviceBuffer::alloc(ctx, bodies.len())?];
            let pinned = PinnedBuffer::alloc(ctx, bodies.len(), 0).context("cuMemHostAlloc")?;
            Storage::Copy { pos, pinned, cur: 0, gl_front: 0 }
        }
        InteropMode::External => bail!("--interop external is not a mode of this backend: crate::external makes it"),
    })
}

/// `cuEventElapsedTime(a, b)` in ms as f64; `None` while `b` has not completed.
pub(crate) fn ms(a: &Event, b: &Event) -> anyhow::Result<Option<f64>> {
    Ok(Event::elapsed_ms(a, b)?.map(f64::from))
}

impl CudaBackend {
    /// The CUDA device's attributes.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Block size and bodies per thread of the step kernel in use.
    pub fn launch_config(&self) -> (u32, u32) {
        (self.gpu.block, self.gpu.p)
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Sets the per-frame map flags by role (the buffer CUDA reads gets READ_ONLY for
    /// `read-only`, the one it writes gets WRITE_DISCARD for `write-discard`); with several steps
    /// per frame both buffers are read and written, so no hint is given.
    fn set_role_map_flags(resources: &mut [GraphicsResource], front: usize, wanted: ResourceFlags, steps: u32) -> anyhow::Result<()> {
        for (i, r) in resources.iter_mut().enumerate() {
            let bits = match (wanted, i == front, steps == 1) {
                (ResourceFlags::ReadOnly, true, true) => map_flags::READ_ONLY,
                (ResourceFlags::WriteDiscard, false, true) => map_flags::WRITE_DISCARD,
                _ => map_flags::NONE,
            };
            if r.map_flags() != bits {
                r.set_map_flags(bits).context("cuGraphicsResourceSetMapFlags")?;
            }
        }
        Ok(())
    }

    fn mapped_ptrs(mapping: &Mapping<'_>, bytes: usize) -> anyhow::Result<[u64; 2]> {
        let a = mapping.pointer(0)?.require(bytes)?.device_ptr();
        let b = mapping.pointer(1)?.require(bytes)?.device_ptr();
        Ok([a, b])
    }

    /// Positions, velocities (synchronised) and, if asked, φ from the GPU.
    fn read_state(&mut self, with_phi: bool) -> anyhow::Result<(Bodies, Option<Vec<f32>>)> {
        self.leave_mapped_step()?;
        let n = self.n;
        if with_phi && self.phi.is_none() {
            self.phi = Some(DeviceBuffer::alloc(&self.ctx, n)?);
        }
        let mut pos = vec![[0f32; 4]; n];
        let mut phi_host = with_phi.then(|| vec![0f32; n]);
        let bytes = n * BODY_BYTES;
        let mut storage = self.storage.take().context("backend storage missing")?;
        let res = (|| -> anyhow::Result<()> {
            match &mut storage {
                Storage::Map { resources } => {
                    Self::set_role_map_flags(resources, self.gpu.front, ResourceFlags::None, 1)?;
                    let mapping = map_resources(resources, &self.stream).context("cuGraphicsMapResources")?;
                    let ptrs = Self::mapped_ptrs(&mapping, bytes)?;
                    // SAFETY: both buffers are mapped until the unmap below, after the stream sync.
                    unsafe { self.gpu.sync_in(ptrs, &self.stream) }?;
                    if let (Some(phi), true) = (&self.phi, with_phi) {
                        // SAFETY: the front buffer is mapped and holds N bodies; phi holds N floats.
                        unsafe { self.gpu.kernels.launch_potential(self.gpu.block, n, ptrs[self.gpu.front], phi.ptr(), self.gpu.params.softening, &self.stream) }?;
                    }
                    self.stream.synchronize()?;
                    mapping.pointer(self.gpu.front)?.copy_to_host(&mut pos)?;
                    mapping.unmap().context("cuGraphicsUnmapResources")?;
                }
                Storage::Copy { pos: dpos, cur, .. } => {
                    self.gpu.front = *cur;
                    // SAFETY: the buffers are ours and outlive the stream sync below.
                    unsafe { self.gpu.sync_in([dpos[0].ptr(), dpos[1].ptr()], &self.stream) }?;
                    *cur = self.gpu.front;
                    if let (Some(phi), true) = (&self.phi, with_phi) {
                        // SAFETY: the buffers are ours and hold N values each.
                        unsafe { self.gpu.kernels.launch_potential(self.gpu.block, n, dpos[*cur].ptr(), phi.ptr(), self.gpu.params.softening, &self.stream) }?;
                    }
                    self.stream.synchronize()?;
                    dpos[*cur].copy_to_host(&mut pos)?;
                }
            }
            Ok(())
        })();
        self.storage = Some(storage);
        res?;
        let vel = self.gpu.vel.to_vec()?;
        if let (Some(phi), Some(h)) = (&self.phi, phi_host.as_mut()) {
            phi.copy_to_host(h)?;
        }
        Ok((Bodies { pos, vel }, phi_host))
    }

    /// Kernel-only frames for `bench --modes compute` are made by [`crate::bench`]; this runs
    /// one frame of the backend's own path. See [`SimBackend::simulate`].
    fn frame(&mut self, gl: &glow::Context, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.leave_mapped_step()?;
        let t0 = Instant::now();
        let bytes = self.n * BODY_BYTES;
        let mut storage = self.storage.take().context("backend storage missing")?;
        let res = (|| -> anyhow::Result<SimTimings> {
            let [e0, e1, e2, e3] = &self.events;
            let mut t = SimTimings::default();
            match &mut storage {
                Storage::Map { resources } => {
                    Self::set_role_map_flags(resources, self.gpu.front, self.opts.settings.map_flags, steps)?;
                    if self.opts.separate_maps {
                        let (a, b) = resources.split_at_mut(1);
                        e0.record(&self.stream)?;
                        let m0 = map_resources(a, &self.stream).context("cuGraphicsMapResources (buffer 0)")?;
                        let m1 = map_resources(b, &self.stream).context("cuGraphicsMapResources (buffer 1)")?;
                        e1.record(&self.stream)?;
                        let ptrs = [m0.pointer(0)?.require(bytes)?.device_ptr(), m1.pointer(0)?.require(bytes)?.device_ptr()];
                        // SAFETY: both buffers stay mapped until the unmaps below, ordered after the kernels on the stream.
                        unsafe { self.gpu.launch_steps(ptrs, steps, &self.stream) }?;
                        e2.record(&self.stream)?;
                        m0.unmap().context("cuGraphicsUnmapResources (buffer 0)")?;
                        m1.unmap().context("cuGraphicsUnmapResources (buffer 1)")?;
                    } else {
                        e0.record(&self.stream)?;
                        let mapping = map_resources(resources, &self.stream).context("cuGraphicsMapResources")?;
                        e1.record(&self.stream)?;
                        let ptrs = Self::mapped_ptrs(&mapping, bytes)?;
                        // SAFETY: both buffers stay mapped until the unmap below, ordered after the kernels on the stream.
                        unsafe { self.gpu.launch_steps(ptrs, steps, &self.stream) }?;
                        e2.record(&self.stream)?;
                        mapping.unmap().context("cuGraphicsUnmapResources")?;
                    }
                    e3.record(&self.stream)?;
                    e3.synchronize().context("cuEventSynchronize")?;
                    t.map_ms = ms(e0, e1)?;
                    t.kernel_ms = ms(e1, e2)?;
                    t.unmap_ms = ms(e2, e3)?;
                }
                Storage::Copy { pos, pinned, cur, gl_front } => {
                    self.gpu.front = *cur;
                    e0.record(&self.stream)?;
                    // SAFETY: the buffers are ours; the frame waits for the stream before returning.
                    unsafe { self.gpu.launch_steps([pos[0].ptr(), pos[1].ptr()], steps, &self.stream) }?;
                    *cur = self.gpu.front;
                    e1.record(&self.stream)?;
                    // SAFETY: `pinned` is read only after `e2`, recorded after the copy, is waited on below.
                    unsafe { pos[*cur].copy_to_pinned_async(pinned, &self.stream) }.context("cuMemcpyDtoHAsync")?;
                    e2.record(&self.stream)?;
                    e2.synchronize().context("cuEventSynchronize")?;
                    let up = Instant::now();
                    // The pinned data is complete: its copy's event was waited on.
                    upload_positions(gl, vbos, 1 - *gl_front, pinned.as_slice())?;
                    *gl_front = 1 - *gl_front;
                    let upload_host = up.elapsed().as_secs_f64() * 1e3;
                    t.kernel_ms = ms(e0, e1)?;
                    t.upload_ms = Some(ms(e1, e2)?.unwrap_or(0.0) + upload_host);
                }
            }
            Ok(t)
        })();
        self.storage = Some(storage);
        let mut t = res?;
        t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(t)
    }
}

fn flags_name(f: ResourceFlags) -> &'static str {
    match f {
        ResourceFlags::None => "none",
        ResourceFlags::ReadOnly => "read-only",
        ResourceFlags::WriteDiscard => "write-discard",
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // End a step-mode frame (unmap) and let queued kernels finish before the fields free
        // the memory they use (the velocities, the device buffers) and unregister the GL buffers.
        if let Err(e) = self.leave_mapped_step() {
            tracing::warn!("ending the step-mode frame at teardown: {e:#}");
        }
        if let Err(e) = self.stream.synchronize() {
            tracing::warn!("cuStreamSynchronize at teardown: {e:#}");
        }
    }
}

impl SimBackend for CudaBackend {
    fn label(&self) -> String {
        let mode = match (self.opts.settings.interop, self.opts.separate_maps) {
            (InteropMode::Map, false) => "map",
            (InteropMode::Map, true) => "map-separate",
            (InteropMode::Copy, _) => "copy",
            (InteropMode::External, _) => "external",
        };
        format!("CUDA {mode} · {}", self.info.name)
    }

    fn n(&self) -> usize {
        self.n
    }

    fn simulate(&mut self, gl: &glow::Context, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.frame(gl, vbos, steps)
    }

    fn front(&self) -> usize {
        match &self.storage {
            Some(Storage::Copy { gl_front, .. }) => *gl_front,
            _ => self.gpu.front,
        }
    }

    fn set_params(&mut self, params: PhysParams) {
        if let Err(e) = self.leave_mapped_step() {
            tracing::warn!("ending the step-mode frame: {e:#}");
        }
        if params.dt != self.gpu.params.dt && !self.gpu.leap.synchronized {
            // The half-step velocities belong to the old dt: finish the step with it first.
            let stream = &self.stream;
            let n = self.n;
            let gpu = &mut self.gpu;
            let finish = match self.storage.as_mut() {
                Some(Storage::Map { resources }) => (|| -> anyhow::Result<()> {
                    let m = map_resources(resources, stream).context("cuGraphicsMapResources")?;
                    let ptrs = Self::mapped_ptrs(&m, n * BODY_BYTES)?;
                    // SAFETY: both buffers are mapped until the unmap below, ordered after the launch.
                    unsafe { gpu.sync_in(ptrs, stream) }?;
                    m.unmap().context("cuGraphicsUnmapResources")
                })(),
                Some(Storage::Copy { pos, cur, .. }) => {
                    gpu.front = *cur;
                    // SAFETY: the buffers are ours and live as long as the backend.
                    let r = unsafe { gpu.sync_in([pos[0].ptr(), pos[1].ptr()], stream) };
                    *cur = gpu.front;
                    r
                }
                None => Ok(()),
            };
            if let Err(e) = finish {
                tracing::warn!("finishing the leapfrog step before the dt change failed: {e:#}");
            }
        }
        self.gpu.params = params;
    }

    fn bodies(&mut self, _gl: &glow::Context, _vbos: &PositionVbos) -> anyhow::Result<Bodies> {
        Ok(self.read_state(false)?.0)
    }

    fn diagnostics(&mut self, _gl: &glow::Context, _vbos: &PositionVbos) -> anyhow::Result<Diagnostics> {
        let (b, phi) = self.read_state(true)?;
        let phi = phi.context("potential not computed")?;
        Ok(diagnostics::from_parts(&b.pos, &b.vel, &phi, f64::from(self.gpu.params.g)))
    }

    fn settings(&self) -> Option<InteropSettings> {
        Some(self.opts.settings)
    }

    fn apply_settings(&mut self, gl: &glow::Context, vbos: &PositionVbos, s: InteropSettings) -> anyhow::Result<()> {
        let old = self.opts.settings;
        if s == old {
            return Ok(());
        }
        // Nothing may stay mapped while the storage is re-made (step mode ends with a rebuild).
        self.leave_mapped_step()?;
        validate_block_size(s.block_size)?;
        if s.interop == InteropMode::External {
            // Another backend type: the caller swaps backends (crate::select::apply_settings).
            bail!("switching to --interop external needs a new backend (crate::select::apply_settings)");
        }
        if s.interop != old.interop || s.stream != old.stream || s.stream_priority != old.stream_priority {
            // A new table (semantics), stream or storage: rebuild from the current state, which
            // goes back into GL buffer 0 as a new backend expects.
            let bodies = self.bodies(gl, vbos)?;
            upload_positions(gl, vbos, 0, &bodies.pos)?;
            self.storage = None; // unregister before registering again
            let mut opts = self.opts.clone();
            opts.settings = s;
            let gl_info = self.gl_info.clone();
            *self = create_backend(&opts, gl, &gl_info, vbos, &bodies, self.gpu.params)?;
            return Ok(());
        }
        if s.register_flags != old.register_flags {
            if let Some(Storage::Map { .. }) = &self.storage {
                self.storage = None;
                let bodies_stub = Bodies { pos: vec![[0.0; 4]; self.n], vel: Vec::new() };
                self.storage = Some(make_storage(&self.ctx, gl, vbos, &bodies_stub, s)?);
            }
        }
        self.gpu.set_block(s.block_size)?;
        self.opts.settings = s;
        Ok(())
    }

    fn device_panel(&self) -> Vec<(String, String)> {
        let i = &self.info;
        let s = &self.opts.settings;
        let mut rows = vec![
            ("device".into(), format!("{} (ordinal {})", i.name, i.ordinal)),
            ("uuid".into(), i.uuid.clone().unwrap_or_else(|| "—".into())),
            ("PCI bus id".into(), i.pci_bus_id.clone()),
            ("compute capability".into(), format!("{}.{}", i.compute_capability.0, i.compute_capability.1)),
            ("memory".into(), format!("{:.1} GiB", i.total_memory_bytes as f64 / (1u64 << 30) as f64)),
            ("SMs × clock".into(), format!("{} × {} MHz", i.multiprocessors, i.clock_khz / 1000)),
            ("L2".into(), format!("{} MiB", i.l2_cache_bytes >> 20)),
            ("shared / block, / SM".into(), format!("{} KiB, {} KiB", i.shared_memory_per_block_bytes >> 10, i.shared_memory_per_multiprocessor_bytes >> 10)),
            ("max threads / block".into(), i.max_threads_per_block.to_string()),
            ("warp size".into(), i.warp_size.to_string()),
            ("unified addressing".into(), i.unified_addressing.to_string()),
            ("driver".into(), format!("CUDA {}", interop::entry::cuda_version_string(self.ctx.api().driver_version()))),
            ("default-stream semantics".into(), self.ctx.api().semantics().to_string()),
            ("context".into(), format!("{:?}, sched {:?}", self.ctx.kind(), self.opts.ctx_sched)),
            ("stream".into(), format!("{:?} (priority {})", s.stream, self.stream.priority().unwrap_or(0))),
            ("register / map flags".into(), format!("{} / {}", flags_name(s.register_flags), flags_name(s.map_flags))),
            ("kernel".into(), format!("{} · P = {} · block {}{}", self.gpu.kernels.source(), self.gpu.p, self.gpu.block, if s.block_size == 0 { " (auto)" } else { "" })),
            ("GL".into(), format!("{} · {}", self.gl_info.vendor, self.gl_info.renderer)),
        ];
        if let Some(Ok(a)) = self.gpu.kernels.step_function(self.gpu.p).map(|f| f.attributes()) {
            rows.push(("kernel registers / local".into(), format!("{} / {} B", a.registers, a.local_bytes)));
        }
        rows
    }

    fn entry_points(&self) -> Vec<[String; 5]> {
        entry_rows(self.ctx.api())
    }

    fn cuda_context(&self) -> Option<Arc<Context>> {
        Some(self.ctx.clone())
    }

    fn step_mode_unavailable(&self) -> Option<String> {
        self.step_support().err()
    }

    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()> {
        self.set_stepwise(on)
    }

    fn next_step(&mut self, _gl: &glow::Context, _vbos: &PositionVbos, steps: u32) -> anyhow::Result<FrameStep> {
        self.step_once(steps)
    }

    fn step_view(&self) -> Option<StepView> {
        self.stepwise_view()
    }
}

/// The entry-point report as rows of (function, version, flags, status, remedy).
pub fn entry_rows(api: &interop::Api) -> Vec<[String; 5]> {
    api.report()
        .iter()
        .map(|r| {
            [
                r.name.to_string(),
                r.version.to_string(),
                format!("{:#x}", r.flags),
                r.status.to_string(),
                r.remedy.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Step mode: one frame of `map`, one step at a time (see crate::workflow for the states).

/// A frame of `--interop map` taken one step at a time: an explicit state machine
/// ([`StepState`]) that owns the mapping between the steps.
///
/// Invariant: `mapping` is `Some` exactly in the mapped states (`Mapped`, `Pointers`,
/// `Launched`), and `ptrs` exactly in `Pointers` and `Launched`.
pub struct StepwiseFrame {
    state: StepState,
    mapping: Option<DetachedMapping>,
    ptrs: Option<[interop::sys::CUdeviceptr; 2]>,
    /// The buffer GL draws (the newest positions already drawn).
    shown: usize,
    /// The buffer the kernel reads this frame (the front at the map).
    read: usize,
    /// What the last step did.
    last: Option<String>,
}

impl std::fmt::Debug for StepwiseFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepwiseFrame").field("state", &self.state).field("shown", &self.shown).finish_non_exhaustive()
    }
}

impl StepwiseFrame {
    /// A frame that starts unmapped, GL drawing buffer `front`.
    fn new(front: usize) -> StepwiseFrame {
        StepwiseFrame { state: StepState::Unmapped, mapping: None, ptrs: None, shown: front, read: front, last: None }
    }

    /// The state.
    pub fn state(&self) -> StepState {
        self.state
    }
}

impl CudaBackend {
    /// Ok when step mode can run: registered buffers mapped in one call.
    fn step_support(&self) -> Result<(), String> {
        match (&self.storage, self.opts.separate_maps) {
            (Some(Storage::Map { .. }), false) => Ok(()),
            (Some(Storage::Map { .. }), true) => Err("map-separate maps each buffer in its own call".into()),
            (Some(Storage::Copy { .. }), _) => Err("--interop copy maps nothing (positions reach GL by a copy)".into()),
            (None, _) => Err("the backend has no storage".into()),
        }
    }

    fn set_stepwise(&mut self, on: bool) -> anyhow::Result<()> {
        if on {
            self.step_support().map_err(|e| anyhow::anyhow!("step mode needs CUDA map mode: {e}"))?;
            if self.stepwise.is_none() {
                self.stepwise = Some(StepwiseFrame::new(self.gpu.front));
            }
            Ok(())
        } else {
            let r = self.leave_mapped_step();
            self.stepwise = None;
            r
        }
    }

    /// Unmaps a step-mode frame that is mapped (before anything else maps, reads back or
    /// re-registers the buffers). A frame whose kernel ran goes on to `AwaitDraw`, others back
    /// to `Unmapped`.
    fn leave_mapped_step(&mut self) -> anyhow::Result<()> {
        let Some(sw) = self.stepwise.as_mut() else { return Ok(()) };
        sw.ptrs = None;
        let r = sw.mapping.take().map_or(Ok(()), DetachedMapping::unmap);
        if sw.state.mapped() {
            sw.state = if sw.state == StepState::Launched { StepState::AwaitDraw } else { StepState::Unmapped };
            sw.last = Some("unmapped early (the buffers were needed elsewhere)".into());
        }
        r.context("cuGraphicsUnmapResources (leaving the step-mode frame)")
    }

    /// Takes the next step of the step-mode frame.
    fn step_once(&mut self, steps: u32) -> anyhow::Result<FrameStep> {
        let bytes = self.n * BODY_BYTES;
        let sw = self.stepwise.as_mut().context("not in step mode")?;
        let Some(Storage::Map { resources }) = self.storage.as_mut() else { bail!("step mode needs --interop map") };
        let step = sw.state.next_step();
        let t0 = Instant::now();
        let r: anyhow::Result<String> = (|| match step {
            FrameStep::Map => {
                Self::set_role_map_flags(resources, self.gpu.front, self.opts.settings.map_flags, steps)?;
                // SAFETY: the resources and the stream are fields of this backend declared after
                // `stepwise`, so they outlive the mapping it holds; every path that maps, reads back
                // or re-registers them first ends the mapped state (`leave_mapped_step`).
                sw.mapping = Some(unsafe { DetachedMapping::map(resources, &self.stream) }.context("cuGraphicsMapResources")?);
                sw.read = self.gpu.front;
                Ok("both buffers mapped on the frame's stream; CUDA owns them, GL must not touch them".to_string())
            }
            FrameStep::GetPointers => {
                let m = sw.mapping.as_ref().context("not mapped")?;
                let pa = m.pointer(0).context("cuGraphicsResourceGetMappedPointer (buffer 0)")?;
                let pb = m.pointer(1).context("cuGraphicsResourceGetMappedPointer (buffer 1)")?;
                let (a, sa, b, sb) = (pa.device_ptr(), pa.size(), pb.device_ptr(), pb.size());
                if sa < bytes || sb < bytes {
                    bail!("mapped sizes {sa} and {sb} bytes, {bytes} needed");
                }
                sw.ptrs = Some([a, b]);
                Ok(format!("device pointers {a:#x} ({sa} B) and {b:#x} ({sb} B)"))
            }
            FrameStep::Launch => {
                let ptrs = sw.ptrs.context("no device pointers")?;
                // SAFETY: both buffers stay mapped (`sw.mapping`) until the unmap step, which is
                // ordered after the kernels on the same stream.
                unsafe { self.gpu.launch_steps(ptrs, steps, &self.stream) }?;
                Ok(format!("{steps} step(s) launched: buffer {} → buffer {}", self.gpu.front ^ (steps as usize & 1), self.gpu.front))
            }
            FrameStep::Unmap => {
                sw.ptrs = None;
                sw.mapping.take().context("not mapped")?.unmap().context("cuGraphicsUnmapResources")?;
                Ok("unmapped on the stream: GL may use both buffers (its commands are ordered after the kernel)".into())
            }
            FrameStep::Draw => {
                sw.shown = self.gpu.front;
                Ok(format!("GL draws buffer {}", self.gpu.front))
            }
        })();
        let host_us = t0.elapsed().as_secs_f64() * 1e6;
        match r {
            Ok(msg) => {
                sw.state = sw.state.after();
                sw.last = Some(format!("{}: {msg} ({host_us:.0} µs host)", step.label()));
                Ok(step)
            }
            Err(e) => {
                sw.last = Some(format!("{} failed: {e:#}", step.label()));
                Err(e)
            }
        }
    }

    fn stepwise_view(&self) -> Option<StepView> {
        let sw = self.stepwise.as_ref()?;
        let Some(Storage::Map { resources }) = &self.storage else { return None };
        let mapped = sw.state.mapped();
        let buffers = resources
            .iter()
            .enumerate()
            .map(|(i, r)| BufferView {
                index: i,
                gl_buffer: r.gl_buffer(),
                registered: true,
                mapped,
                side: sw.state.side(),
                role: match (sw.state, i == sw.read, i == sw.shown, i == self.gpu.front) {
                    (StepState::Mapped | StepState::Pointers, true, _, _) => "front: the kernel will read it".into(),
                    (StepState::Mapped | StepState::Pointers, false, _, _) => "back: the kernel will write it".into(),
                    (StepState::Launched, true, _, _) => "the kernel reads it".into(),
                    (StepState::Launched, false, _, _) => "the kernel writes it".into(),
                    (StepState::AwaitDraw, _, true, _) => "GL draws it (previous positions)".into(),
                    (StepState::AwaitDraw, _, _, true) => "new positions, not drawn yet".into(),
                    (_, _, true, _) => "GL draws it".into(),
                    _ => String::new(),
                },
            })
            .collect();
        Some(StepView {
            state: sw.state,
            buffers,
            display_front: (!mapped).then_some(sw.shown),
            pointers: sw.ptrs,
            last: sw.last.clone(),
        })
    }
}
