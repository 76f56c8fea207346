//! The external-memory backend (`--interop external`): CUDA allocates the two position buffers,
//! GL imports them, and from then on both APIs use the same memory with no map/unmap per frame.
//!
//! # Workflow
//! Setup, per buffer (`[N][4]` f32, x, y, z, mass; `16 N` bytes asked, rounded up to the
//! allocation granularity, 2 MiB on an H200):
//! 1. CUDA: [`ExportableBuffer::new`] — `cuMemCreate` (POSIX-fd handle type) → `cuMemAddressReserve`
//!    → `cuMemMap` → `cuMemSetAccess`; the initial positions are copied into both buffers;
//! 2. CUDA: [`ExportableBuffer::export_fd`] — `cuMemExportToShareableHandle` gives a new fd;
//! 3. GL (`GL_EXT_memory_object` + `GL_EXT_memory_object_fd`, loaded by
//!    [`crate::gfx::memory_object`] through the context's `get_proc_address`):
//!    `glCreateMemoryObjectsEXT` → `glImportMemoryFdEXT(mem, allocation size,
//!    GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd)` — on success GL owns the fd (it is released from its
//!    `OwnedFd` only then; on failure the `OwnedFd` closes it) → `glGenBuffers`, `glBindBuffer`,
//!    `glBufferStorageMemEXT(GL_ARRAY_BUFFER, 16 N, mem, 0)`. The import is tried first as a
//!    dedicated memory object (`GL_DEDICATED_MEMORY_OBJECT_EXT = GL_TRUE`: each `cuMemCreate`
//!    allocation backs exactly one buffer) and, if GL refuses it, again as a non-dedicated one
//!    (for experiments, [`DEDICATED_ENV`]`=1` or `=0` tries only that one). On the H200
//!    (driver 580, N = 65536, 1280×800) the body draw from a non-dedicated import took 1.31 ms
//!    of GL time against 0.63 ms from a dedicated one, the same as from GL's own buffers.
//!
//! Each frame: GL fence wait → kernel launches (front → back, ping-pong) → CUDA event wait →
//! the renderer draws the imported buffers ([`SimBackend::draw_buffers`]), never the renderer's
//! own VBOs.
//!
//! # Synchronisation rules
//! Without GL_EXT_semaphore nothing orders CUDA's and GL's work on the shared memory, so the
//! host does, explicitly:
//! 1. **Kernel before draw.** After the launches of frame k, a CUDA event is recorded on the
//!    frame's stream and `cuEventSynchronize`d before `simulate` returns; the draw of frame k is
//!    issued after that, so it reads what the kernel wrote.
//! 2. **Draw before kernel.** Every draw reads *both* buffers (the front one for positions, the
//!    other for the speed colour, see [`crate::gfx::renderer`]), so before any launch that writes
//!    a buffer (a step, the synchronising half kick of `bodies`/`diagnostics`, the deferred dt
//!    change) the host waits (`glClientWaitSync`, flushing) on a GL fence (`glFenceSync`): for a
//!    step, the fence that [`SimBackend::after_draw`] put right behind the last draw; otherwise
//!    (no draw since the last step, or the other writers) a new one behind all GL work. Why
//!    the fence goes behind the draw: a fence on an idle GL context makes the GPU switch into
//!    the GL context and back just to signal it (about 0.3 ms on the H200, `nbody-interop
//!    switch`), while behind the draw it is signalled in the same visit.
//! 3. Paused frames (0 steps) write nothing and wait for nothing.
//!
//! The host waits are reported in [`SimTimings`]: `map_ms` = the GL-fence wait, `unmap_ms` =
//! the CUDA-event wait (both host time, ms), `kernel_ms` = the CUDA-event time of the launches.
//!
//! # Reading the buffers back
//! A probe on the H200 showed `glGetBufferSubData` on an imported buffer returning stale
//! contents after CUDA wrote it, while `glCopyBufferSubData` from it into a GL-owned buffer saw
//! CUDA's writes (as the draws do: both read the GPU memory). So readback checks copy into a
//! GL buffer after the CUDA event wait, then read *that* buffer; the backend's own readback
//! ([`SimBackend::bodies`]) reads the CUDA side with `cuMemcpyDtoH`.
//!
//! # Teardown order
//! GL buffer → GL memory object (GL closes the fd it owns) → CUDA allocation (`cuMemUnmap` →
//! `cuMemAddressFree` → `cuMemRelease`). The GL deletions need the GL context current, so they
//! happen in [`SimBackend::release_gl`], which the owner calls (with the context current) before
//! dropping the backend: the demo's `Scene` on teardown, reset and backend switches, the bench's
//! runner, the tests. Both waits come first (stream synchronised, GL fence waited on), so neither
//! API still uses the memory. `Drop` then synchronises the stream and releases the CUDA side in
//! field order. A backend dropped without `release_gl` logs a warning and leaves its GL objects
//! to the context's destruction (the imported memory stays alive with them; nothing dangles).
//! Every error path of [`ExternalBackend::new`] releases what it made in the same order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use interop::sys::event_flags;
use interop::{Context, DeviceBuffer, DeviceInfo, Event, ExportableBuffer, Stream};

use crate::backend::{InteropSettings, PositionVbos, SimBackend, SimTimings};
use crate::cli::{DemoArgs, InteropMode};
use crate::cuda_backend::{entry_rows, open_for_gl, CudaOptions};
use crate::gfx::gl::Gl;
use crate::gfx::memory_object::MemoryObjectFns;
use crate::gfx::GlInfo;
use crate::sim::gpu::{check_fits, validate_block_size, GpuStepper, Kernels, BODY_BYTES};
use crate::sim::{diagnostics, Bodies, Diagnostics, PhysParams};

/// Environment variable: `1` imports only as a dedicated memory object, `0` only as a
/// non-dedicated one; unset: dedicated first, then non-dedicated.
pub const DEDICATED_ENV: &str = "NBODY_EXTERNAL_DEDICATED";

/// How long [`wait_for_gl`] waits for a GL fence before giving up.
pub const GL_FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// External-memory interop cannot be used here (missing GL extensions, VMM or export not
/// supported, GL refused the import); the caller may fall back to `--interop map`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// True when `e` (or an error in its chain) is [`Unsupported`].
pub fn is_unsupported(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Unsupported>())
}

/// One CUDA allocation as GL sees it: a buffer object whose storage is an imported memory object.
#[derive(Debug, Clone, Copy)]
pub struct Imported {
    /// The GL buffer (`glBufferStorageMemEXT`).
    pub buffer: glow::NativeBuffer,
    /// The GL memory object holding the imported fd.
    pub memory: u32,
}

impl Imported {
    /// Delete the buffer, then the memory object (which closes the fd GL owns). Context current.
    fn release(self, gl: &glow::Context, fns: &MemoryObjectFns) {
        Gl::current(gl).delete_buffer(self.buffer);
        fns.delete_memory_object(gl, self.memory);
    }
}

/// Export `buf`, import it into GL and make a `bytes`-byte buffer object on it; on any error
/// whatever was made is released (buffer → memory object; the fd closes unless GL took it).
fn import_one(gl: &glow::Context, fns: &MemoryObjectFns, buf: &ExportableBuffer, bytes: usize, dedicated: bool) -> anyhow::Result<Imported> {
    let g = Gl::current(gl);
    let fd = buf.export_fd().context("cuMemExportToShareableHandle (POSIX fd)")?;
    let memory = fns.create_memory_object(gl).map_err(|e| anyhow!(e))?;
    if dedicated {
        fns.set_dedicated(gl, memory, true);
    }
    let size = buf.size() as u64;
    // SAFETY: `size` is the size of the cuMemCreate allocation behind `fd` (ExportableBuffer::size,
    // the granularity-rounded size it was created and exported with); the context is current
    // (the app's GL convention, `gfx::gl`).
    if let Err(e) = unsafe { fns.import_fd(gl, memory, size, fd) } {
        fns.delete_memory_object(gl, memory);
        bail!("{e} (memory object {memory}, {size} bytes, dedicated {dedicated})"); // e.fd closes here
    }
    let buffer = match g.create_buffer() {
        Ok(b) => b,
        Err(e) => {
            fns.delete_memory_object(gl, memory);
            bail!("glGenBuffers: {e}");
        }
    };
    g.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
    let stored = fns.buffer_storage_mem(gl, glow::ARRAY_BUFFER, bytes, memory, 0);
    g.bind_buffer(glow::ARRAY_BUFFER, None);
    if let Err(e) = stored {
        let imported = Imported { buffer, memory };
        imported.release(gl, fns);
        bail!("{e} (dedicated {dedicated})");
    }
    Ok(Imported { buffer, memory })
}

/// Import both allocations, dedicated first, then non-dedicated (see the module docs). Returns
/// the objects and whether they are dedicated.
fn import_pair(gl: &glow::Context, fns: &MemoryObjectFns, bufs: &[ExportableBuffer; 2], bytes: usize) -> anyhow::Result<([Imported; 2], bool)> {
    let mut errors = Vec::new();
    let order: &[bool] = match std::env::var(DEDICATED_ENV).as_deref() {
        Ok("1") => &[true],
        Ok("0") => &[false],
        _ => &[true, false],
    };
    for &dedicated in order {
        let a = match import_one(gl, fns, &bufs[0], bytes, dedicated) {
            Ok(a) => a,
            Err(e) => {
                errors.push(format!("{e:#}"));
                continue;
            }
        };
        match import_one(gl, fns, &bufs[1], bytes, dedicated) {
            Ok(b) => return Ok(([a, b], dedicated)),
            Err(e) => {
                a.release(gl, fns);
                errors.push(format!("{e:#}"));
            }
        }
    }
    bail!("GL did not import the CUDA allocations: {}", errors.join("; "))
}

/// Host wait until GL has executed every command issued so far in this context (a fence after
/// them, `glClientWaitSync` with a flush). Returns the wait in ms.
///
/// # Errors
/// `glFenceSync` fails, the wait fails (`GL_WAIT_FAILED`) or exceeds [`GL_FENCE_TIMEOUT`].
pub fn wait_for_gl(gl: &glow::Context) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let fence = Gl::current(gl).fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map_err(|e| anyhow!("glFenceSync: {e}"))?;
    wait_fence(gl, fence, t0)
}

/// Host wait on `fence` (`glClientWaitSync` with a flush, then deleted); returns the ms since `t0`.
///
/// # Errors
/// As [`wait_for_gl`]; the fence is deleted on every path.
fn wait_fence(gl: &glow::Context, fence: glow::NativeFence, t0: Instant) -> anyhow::Result<f64> {
    let g = Gl::current(gl);
    let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
    let result = loop {
        let r = g.client_wait_sync(fence, flags, 100_000_000); // 100 ms per call
        flags = 0;
        match r {
            glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => break Ok(()),
            glow::TIMEOUT_EXPIRED if t0.elapsed() < GL_FENCE_TIMEOUT => {}
            glow::TIMEOUT_EXPIRED => break Err(anyhow!("glClientWaitSync: GL did not finish within {GL_FENCE_TIMEOUT:?}")),
            other => break Err(anyhow!("glClientWaitSync failed (0x{other:04X}, GL error {:?})", crate::gfx::memory_object::gl_error(gl))),
        }
    };
    g.delete_sync(fence);
    result.map(|()| t0.elapsed().as_secs_f64() * 1e3)
}

/// The external-memory backend (see the module docs).
///
/// Field order is drop order, after [`SimBackend::release_gl`] deleted the GL side:
/// `gl_objects` (GL buffers → memory objects; `None` once released) → `bufs` (CUDA allocations:
/// unmap, free the range, release) → φ → events → kernels and velocities → stream → context.
pub struct ExternalBackend {
    /// The GL buffers and memory objects of `bufs`, in the same order. Deleted by `release_gl`.
    gl_objects: Option<[Imported; 2]>,
    /// The two CUDA allocations, `[N][4]` f32 each, that ping-pong as positions.
    bufs: [ExportableBuffer; 2],
    phi: Option<DeviceBuffer<f32>>,
    /// Around the launches of a frame: `[before, after]`.
    events: [Event; 2],
    gpu: GpuStepper,
    stream: Stream,
    ctx: Arc<Context>,
    fns: Arc<MemoryObjectFns>,
    /// New parameters whose dt change must first finish the half step with the old dt (a
    /// launch, which needs the GL fence wait and so the GL context: done at the next call that has it).
    pending_params: Option<PhysParams>,
    /// The fence put behind the last body draw by [`SimBackend::after_draw`]; the next step
    /// waits on it instead of a new fence. Deleted when waited on, or by `release_gl`.
    draw_fence: Option<glow::NativeFence>,
    opts: CudaOptions,
    info: DeviceInfo,
    gl_info: GlInfo,
    n: usize,
    dedicated: bool,
}

/// Make the external backend from the demo's options, or explain why not (see [`is_unsupported`]).
///
/// # Errors
/// As [`ExternalBackend::new`].
pub fn create(args: &DemoArgs, gl: &glow::Context, gl_info: &GlInfo, bodies: &Bodies, params: PhysParams) -> anyhow::Result<ExternalBackend> {
    let mut opts = CudaOptions::from_args(args);
    opts.settings.interop = InteropMode::External;
    ExternalBackend::new(&opts, gl, gl_info, bodies, params)
}

impl ExternalBackend {
    /// Allocate, fill, export and import the two position buffers for `bodies` on the CUDA device
    /// that shares the current GL context.
    ///
    /// # Errors
    /// [`Unsupported`] (in the chain) when this GL or CUDA cannot do external memory: the GL
    /// extensions or entry points are missing (checked first, before CUDA is touched), exportable
    /// allocations fail, or GL refuses the import. Other errors as for the map backend (no CUDA
    /// device shares the GL context, N too large, an invalid block size, a PTX failure).
    pub fn new(opts: &CudaOptions, gl: &glow::Context, gl_info: &GlInfo, bodies: &Bodies, params: PhysParams) -> anyhow::Result<Self> {
        let s = opts.settings;
        validate_block_size(s.block_size)?;
        let fns = gl_info.memory_object.clone().map_err(Unsupported)?;
        let n = bodies.len();
        let (ctx, stream, info) = open_for_gl(gl_info, s.stream, s.stream_priority, opts.ctx_sched)?;
        check_fits(n, 3, info.total_memory_bytes)?;
        let kernels = Kernels::load(&ctx, opts.kernel.as_deref())?;
        let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel).context("uploading velocities")?;
        let events = [Event::new(&ctx, event_flags::DEFAULT)?, Event::new(&ctx, event_flags::DEFAULT)?];
        let gpu = GpuStepper::new(kernels, vel, s.block_size, params)?;
        let bytes = n * BODY_BYTES;
        let alloc = || {
            ExportableBuffer::new(&ctx, bytes)
                .map_err(|e| Unsupported(format!("cuMemCreate of {bytes} bytes exportable as a POSIX fd: {e}")))
        };
        let mut bufs = [alloc()?, alloc()?];
        for b in &mut bufs {
            // Both hold the initial positions: the first draw shows every body at rest colour.
            b.write_at(0, &bodies.pos).context("cuMemcpyHtoD of the initial positions")?;
        }
        let (objects, dedicated) = import_pair(gl, &fns, &bufs, bytes).map_err(|e| Unsupported(format!("{e:#}")))?;
        tracing::info!(n, dedicated, bytes = bufs[0].size(), "external-memory buffers imported into GL");
        Ok(ExternalBackend {
            gl_objects: Some(objects),
            bufs,
            phi: None,
            events,
            gpu,
            stream,
            ctx,
            fns,
            pending_params: None,
            draw_fence: None,
            opts: CudaOptions { settings: InteropSettings { interop: InteropMode::External, ..s }, ..opts.clone() },
            info,
            gl_info: gl_info.clone(),
            n,
            dedicated,
        })
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Block size and bodies per thread of the step kernel in use.
    pub fn launch_config(&self) -> (u32, u32) {
        (self.gpu.block, self.gpu.p)
    }

    /// The CUDA allocation behind GL buffer `i` (0 or 1), for checks that compare both sides.
    pub fn cuda_buffer(&self, i: usize) -> &ExportableBuffer {
        &self.bufs[i.min(1)]
    }

    /// The GL objects of both buffers; `None` after [`SimBackend::release_gl`].
    pub fn gl_objects(&self) -> Option<[Imported; 2]> {
        self.gl_objects
    }

    fn ptrs(&self) -> [u64; 2] {
        [self.bufs[0].ptr(), self.bufs[1].ptr()]
    }

    fn check_live(&self) -> anyhow::Result<()> {
        if self.gl_objects.is_none() {
            bail!("the external-memory backend was released (release_gl) and cannot run");
        }
        Ok(())
    }

    /// Apply parameters held back by `set_params`: finish the half step with the old dt (a
    /// launch that writes the back buffer: GL fence first), then switch.
    fn apply_pending_params(&mut self, gl: &glow::Context) -> anyhow::Result<()> {
        if let Some(p) = self.pending_params.take() {
            if !self.gpu.leap.synchronized {
                wait_for_gl(gl)?;
                let ptrs = self.ptrs();
                // SAFETY: both allocations are ours, distinct, 16 N bytes each, and outlive the
                // stream synchronisation below; GL finished reading them (fence above).
                unsafe { self.gpu.sync_in(ptrs, &self.stream) }?;
                self.stream.synchronize().context("cuStreamSynchronize")?;
            }
            self.gpu.params = p;
        }
        Ok(())
    }

    /// One frame: fence wait → launches → event wait (see the module docs).
    fn frame(&mut self, gl: &glow::Context, steps: u32) -> anyhow::Result<SimTimings> {
        let t0 = Instant::now();
        self.check_live()?;
        self.apply_pending_params(gl)?;
        let mut t = SimTimings::default();
        if steps > 0 {
            // Rule 2: GL's last draw (reading both buffers) has finished before a kernel writes:
            // the fence behind that draw when there is one, else a fence behind all GL work.
            t.map_ms = Some(match self.draw_fence.take() {
                Some(fence) => wait_fence(gl, fence, Instant::now())?,
                None => wait_for_gl(gl)?,
            });
            let ptrs = self.ptrs();
            let [e0, e1] = &self.events;
            e0.record(&self.stream).context("cuEventRecord")?;
            // SAFETY: the two allocations are ours, distinct, 16 N bytes each, and live until
            // the event wait below, recorded after the launches on the same stream.
            unsafe { self.gpu.launch_steps(ptrs, steps, &self.stream) }?;
            e1.record(&self.stream).context("cuEventRecord")?;
            // Rule 1: the kernel finished writing before GL draws.
            let w = Instant::now();
            e1.synchronize().context("cuEventSynchronize")?;
            t.unmap_ms = Some(w.elapsed().as_secs_f64() * 1e3);
            t.kernel_ms = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(f64::from);
        }
        t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(t)
    }

    /// Positions, velocities (synchronised) and, if asked, φ from the CUDA side.
    fn read_state(&mut self, gl: &glow::Context, with_phi: bool) -> anyhow::Result<(Bodies, Option<Vec<f32>>)> {
        self.check_live()?;
        self.apply_pending_params(gl)?;
        let n = self.n;
        if with_phi && self.phi.is_none() {
            self.phi = Some(DeviceBuffer::alloc(&self.ctx, n)?);
        }
        let ptrs = self.ptrs();
        if !self.gpu.leap.synchronized {
            // The synchronising half kick writes the back buffer: rule 2.
            wait_for_gl(gl)?;
        }
        // SAFETY: both allocations are ours and live until the stream synchronisation below.
        unsafe { self.gpu.sync_in(ptrs, &self.stream) }?;
        if let (Some(phi), true) = (&self.phi, with_phi) {
            // SAFETY: the front allocation holds N bodies and φ N floats until the sync below.
            unsafe {
                self.gpu.kernels.launch_potential(self.gpu.block, n, ptrs[self.gpu.front], phi.ptr(), self.gpu.params.softening, &self.stream)
            }?;
        }
        self.stream.synchronize().context("cuStreamSynchronize")?;
        let mut pos = vec![[0f32; 4]; n];
        self.bufs[self.gpu.front].read_at(0, &mut pos).context("cuMemcpyDtoH of the positions")?;
        let vel = self.gpu.vel.to_vec()?;
        let phi = match (&self.phi, with_phi) {
            (Some(phi), true) => Some(phi.to_vec()?),
            _ => None,
        };
        Ok((Bodies { pos, vel }, phi))
    }
}

impl SimBackend for ExternalBackend {
    fn label(&self) -> String {
        format!("CUDA external · {}", self.info.name)
    }

    fn n(&self) -> usize {
        self.n
    }

    fn simulate(&mut self, gl: &glow::Context, _vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.frame(gl, steps)
    }

    fn front(&self) -> usize {
        self.gpu.front
    }

    fn draw_buffers(&self) -> Option<PositionVbos> {
        self.gl_objects.map(|[a, b]| PositionVbos { buffers: [a.buffer, b.buffer], n: self.n })
    }

    fn set_params(&mut self, params: PhysParams) {
        if self.pending_params.is_some() || (params.dt != self.gpu.params.dt && !self.gpu.leap.synchronized) {
            // Finishing the step with the old dt is a launch: it waits for the next call with GL.
            self.pending_params = Some(params);
        } else {
            self.gpu.params = params;
        }
    }

    fn bodies(&mut self, gl: &glow::Context, _vbos: &PositionVbos) -> anyhow::Result<Bodies> {
        Ok(self.read_state(gl, false)?.0)
    }

    fn diagnostics(&mut self, gl: &glow::Context, _vbos: &PositionVbos) -> anyhow::Result<Diagnostics> {
        let (b, phi) = self.read_state(gl, true)?;
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
        validate_block_size(s.block_size)?;
        if s.interop != InteropMode::External {
            bail!("switching from --interop external needs a new backend (crate::select::apply_settings)");
        }
        if s.stream != old.stream || s.stream_priority != old.stream_priority {
            // A new table (semantics) or stream: a new backend from the current state; the old
            // one goes only once the new one exists, and releases its GL side first.
            let bodies = self.bodies(gl, vbos)?;
            let mut opts = self.opts.clone();
            opts.settings = s;
            let params = self.pending_params.unwrap_or(self.gpu.params);
            let new = ExternalBackend::new(&opts, gl, &self.gl_info.clone(), &bodies, params)?;
            let mut old = std::mem::replace(self, new);
            old.release_gl(gl);
            return Ok(());
        }
        // Register and map flags do not apply: nothing is registered or mapped.
        self.gpu.set_block(s.block_size)?;
        self.opts.settings = s;
        Ok(())
    }

    fn after_draw(&mut self, gl: &glow::Context) {
        let g = Gl::current(gl);
        if let Some(old) = self.draw_fence.take() {
            // A draw without a step in between (paused): the new fence covers both.
            g.delete_sync(old);
        }
        match g.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) {
            Ok(f) => self.draw_fence = Some(f),
            // Without it the next step puts a fence behind all GL work instead.
            Err(e) => tracing::warn!("glFenceSync after the draw: {e}"),
        }
    }

    fn release_gl(&mut self, gl: &glow::Context) {
        if let Some(f) = self.draw_fence.take() {
            Gl::current(gl).delete_sync(f);
        }
        let Some(objects) = self.gl_objects.take() else { return };
        // Neither API may still use the memory: CUDA's work done, GL's work done.
        if let Err(e) = self.stream.synchronize() {
            tracing::warn!("cuStreamSynchronize before releasing the external buffers: {e}");
        }
        if let Err(e) = wait_for_gl(gl) {
            tracing::warn!("GL fence before releasing the external buffers: {e:#}");
        }
        for o in objects {
            o.release(gl, &self.fns);
        }
    }

    fn device_panel(&self) -> Vec<(String, String)> {
        let i = &self.info;
        let s = &self.opts.settings;
        vec![
            ("device".into(), format!("{} (ordinal {})", i.name, i.ordinal)),
            ("PCI bus id".into(), i.pci_bus_id.clone()),
            ("compute capability".into(), format!("{}.{}", i.compute_capability.0, i.compute_capability.1)),
            ("memory".into(), format!("{:.1} GiB", i.total_memory_bytes as f64 / (1u64 << 30) as f64)),
            ("driver".into(), format!("CUDA {}", interop::entry::cuda_version_string(self.ctx.api().driver_version()))),
            ("default-stream semantics".into(), self.ctx.api().semantics().to_string()),
            ("stream".into(), format!("{:?} (priority {})", s.stream, self.stream.priority().unwrap_or(0))),
            (
                "interop".into(),
                format!(
                    "external memory: cuMemCreate → fd → glImportMemoryFdEXT ({} MiB each, {})",
                    self.bufs[0].size() >> 20,
                    if self.dedicated { "dedicated" } else { "not dedicated" }
                ),
            ),
            ("sync".into(), "GL fence wait → kernel → CUDA event wait (map = fence, unmap = event)".into()),
            ("kernel".into(), format!("{} · P = {} · block {}", self.gpu.kernels.source(), self.gpu.p, s.block_size)),
            ("GL".into(), format!("{} · {}", self.gl_info.vendor, self.gl_info.renderer)),
        ]
    }

    fn entry_points(&self) -> Vec<[String; 5]> {
        entry_rows(self.ctx.api())
    }

    fn cuda_context(&self) -> Option<Arc<Context>> {
        Some(Arc::clone(&self.ctx))
    }

    fn step_mode_unavailable(&self) -> Option<String> {
        Some("step mode walks through map → launch → unmap; --interop external has no map or unmap (use map)".into())
    }
}

impl Drop for ExternalBackend {
    fn drop(&mut self) {
        // Launches may still write the allocations: wait before `bufs` unmaps and releases them.
        if let Err(e) = self.stream.synchronize() {
            tracing::warn!("cuStreamSynchronize before freeing the external buffers: {e}");
        }
        if self.gl_objects.is_some() {
            tracing::warn!(
                "ExternalBackend dropped without release_gl(): its GL buffers and memory objects stay until the GL \
                 context goes (the imported memory stays alive with them)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;
    use crate::gfx::context::HeadlessContext;
    use crate::gfx::renderer::Renderer;
    use crate::select::make_backend;

    fn demo_args(extra: &[&str]) -> DemoArgs {
        let mut v = vec!["nbody-interop", "--headless", "--bodies", "64"];
        v.extend_from_slice(extra);
        Cli::try_parse_from(v).expect("arguments parse").demo
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
        let gl = &ctx.gl;
        let (info, why) = without_extensions(&ctx);
        let bodies = crate::demo::initial_bodies("plummer", 64, 1, 1.0).expect("bodies");
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
        let mut renderer = Renderer::new(gl, &ctx.info, &bodies).expect("renderer");
        let vbos = *renderer.vbos();

        let args = demo_args(&["--interop", "external"]);
        let (mut backend, notice) = make_backend(&args, gl, &info, &vbos, &bodies, params).expect("auto never fails");
        let notice = notice.expect("a notice");
        let first = notice.lines().next().unwrap_or_default();
        assert_eq!(first, format!("{why}: falling back to --interop map"));
        if backend.label().starts_with("CPU") {
            let second = notice.lines().nth(1).unwrap_or_default();
            assert!(second.starts_with("CUDA unavailable, running the CPU backend: "), "{notice}");
        }
        assert!(backend.draw_buffers().is_none(), "map and CPU draw the renderer's VBOs");
        backend.release_gl(gl);
        drop(backend);

        let args = demo_args(&["--interop", "external", "--backend", "cuda"]);
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
        let bodies = crate::demo::initial_bodies("ball", 32, 1, 1.0).expect("bodies");
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
        let args = demo_args(&["--interop", "external"]);
        let e = create(&args, &ctx.gl, &info, &bodies, params).err().expect("no external memory on this GL");
        assert!(is_unsupported(&e), "{e:#}");
        assert_eq!(format!("{e:#}"), why);
        // A bad block size is refused first, and is not a reason to fall back.
        let args = demo_args(&["--interop", "external", "--block-size", "100"]);
        let e = create(&args, &ctx.gl, &info, &bodies, params).err().expect("bad block size");
        assert!(!is_unsupported(&e), "{e:#}");
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
        let gl = &ctx.gl;
        let bodies = crate::demo::initial_bodies("ball", 32, 1, 1.0).expect("bodies");
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
        let mut renderer = Renderer::new(gl, &ctx.info, &bodies).expect("renderer");
        let vbos = *renderer.vbos();
        let args = demo_args(&["--interop", "external"]);
        let (mut backend, notice) = make_backend(&args, gl, &ctx.info, &vbos, &bodies, params).expect("auto never fails");
        let notice = notice.expect("a notice");
        assert!(notice.starts_with("CUDA unavailable, running the CPU backend: "), "{notice}");
        assert!(!notice.contains("falling back to --interop map"), "{notice}");
        assert!(backend.label().starts_with("CPU"));
        backend.release_gl(gl);
        renderer.destroy(gl);
    }
}
