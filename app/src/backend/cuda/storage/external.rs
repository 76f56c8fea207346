//! The external-memory storage of the CUDA backend (`--interop external`): CUDA allocates the two position buffers,
//! GL imports them, and from then on both APIs use the same memory with no map/unmap per frame.
//!
//! # Workflow
//! Setup, per buffer (`[N][4]` f32, x, y, z, mass; `16 N` bytes asked, rounded up to the
//! allocation granularity, 2 MiB on an H200):
//! 1. CUDA: [`interop::ExportableBuffer::new`] — `cuMemCreate` (POSIX-fd handle type) → `cuMemAddressReserve`
//!    → `cuMemMap` → `cuMemSetAccess`; the initial positions are copied into both buffers;
//! 2. CUDA: [`interop::ExportableBuffer::export_fd`] — `cuMemExportToShareableHandle` gives a new fd;
//! 3. GL (`GL_EXT_memory_object` + `GL_EXT_memory_object_fd`, loaded by
//!    [`crate::gfx::memory_object`] through the context's `get_proc_address`; the import is
//!    [`crate::gfx::memory_object::import_exported`]):
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
//! Each frame: GL fence wait → kernel launches (front → back, ping-pong; with `--precision f64`
//! the launches step the f64 state in CUDA's own buffers and one `nbody_to_float4` writes the
//! buffer GL did not draw last) → CUDA event wait →
//! the renderer draws the imported buffers ([`crate::backend::Shown::buffers`]), never the renderer's
//! own VBOs.
//!
//! # Synchronisation rules
//! Nothing orders CUDA's and GL's work on the shared memory by itself. With
//! `--external-sync semaphore` (or `auto` where Vulkan, `GL_EXT_semaphore_fd` and the CUDA import
//! all work) two Vulkan-made semaphores do it on the GPU (`external_sync`: the stream
//! waits for GL's "draw done" before the launches and signals "step done" after them; GL waits
//! for it in [`crate::backend::SimBackend::before_draw`]). Otherwise, and for the steps that
//! semaphores do not cover (see that module), the host does, explicitly:
//! 1. **Kernel before draw.** After the launches of frame k, a CUDA event is recorded on the
//!    frame's stream and `cuEventSynchronize`d before `simulate` returns; the draw of frame k is
//!    issued after that, so it reads what the kernel wrote.
//! 2. **Draw before kernel.** Every draw reads *both* buffers (the front one for positions, the
//!    other for the speed colour, see [`crate::gfx::renderer`]), so before any launch that writes
//!    a buffer (a step, the synchronising half kick of `bodies`/`diagnostics`, the deferred dt
//!    change) the host waits (`glClientWaitSync`, flushing) on a GL fence (`glFenceSync`): for a
//!    step, the fence that [`crate::backend::SimBackend::after_draw`] put right behind the last draw; otherwise
//!    (no draw since the last step, or the other writers) a new one behind all GL work. Why
//!    the fence goes behind the draw: a fence on an idle GL context makes the GPU switch into
//!    the GL context and back just to signal it (about 0.3 ms on the H200, `nbody-interop
//!    switch`), while behind the draw it is signalled in the same visit.
//! 3. Paused frames (0 steps) write nothing and wait for nothing.
//!
//! The host waits are reported in [`crate::backend::SimTimings`]: `map_ms` = the GL-fence wait, `unmap_ms` =
//! the CUDA-event wait (both host time, ms), `kernel_ms` = the CUDA-event time of the launches.
//!
//! # Reading the buffers back
//! A probe on the H200 showed `glGetBufferSubData` on an imported buffer returning stale
//! contents after CUDA wrote it, while `glCopyBufferSubData` from it into a GL-owned buffer saw
//! CUDA's writes (as the draws do: both read the GPU memory). So readback checks copy into a
//! GL buffer after the CUDA event wait, then read *that* buffer; the backend's own readback
//! ([`crate::backend::SimBackend::state`]) reads the CUDA side with `cuMemcpyDtoH`.
//!
//! # Teardown order
//! GL semaphores (with GPU-side ordering) → GL buffer → GL memory object (GL closes the fd it
//! owns) → CUDA allocation (`cuMemUnmap` → `cuMemAddressFree` → `cuMemRelease`) → the CUDA
//! semaphore imports → the Vulkan semaphores. The GL deletions need the GL context current, so they
//! happen in [`crate::backend::SimBackend::release_gl`], which the owner calls (with the context current) before
//! dropping the backend: the demo's `Scene` on teardown, reset and backend switches, the bench's
//! runner, the tests. Both waits come first (stream synchronised, GL fence waited on), so neither
//! API still uses the memory. `Drop` then synchronises the stream and releases the CUDA side in
//! field order. A storage dropped without `release_gl` logs a warning and leaves its GL objects
//! to the context's destruction (the imported memory stays alive with them; nothing dangles).
//! Every error path of [`ExternalStorage::new`] releases what it made in the same order.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::{Context, DeviceBuffer, DevicePtr, Event, ExportableBuffer, Stream};

use super::external_sync::SemaphoreSync;
use super::{FrameCx, Storage};
use crate::backend::{PositionVbos, SimTimings};
use crate::cuda::gpu_stepper::FrameSteps;
use crate::cuda::kernel_set::BODY_BYTES;
use crate::cuda::settings::ExternalSync;
use crate::gfx::fence::{wait_fence, wait_for_gl};
use crate::gfx::gl::Gl;
use crate::gfx::gl_semaphore::SemaphoreFns;
use crate::gfx::memory_object::{import_exported, Imported, MemoryObjectFns};
use sim::Bodies;

/// Environment variable: `1` imports only as a dedicated memory object, `0` only as a
/// non-dedicated one; unset: dedicated first, then non-dedicated.
pub const DEDICATED_ENV: &str = "NBODY_EXTERNAL_DEDICATED";

/// External-memory interop cannot be used here (missing GL extensions, VMM or export not
/// supported, GL refused the import); the caller may fall back to `--interop map`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// True when `e` (or an error in its chain) is [`Unsupported`].
pub fn is_unsupported(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Unsupported>())
}

/// Import both allocations, dedicated first, then non-dedicated (see the module docs). Returns
/// the objects and whether they are dedicated.
fn import_pair(gl: Gl<'_>, fns: &MemoryObjectFns, bufs: &[ExportableBuffer; 2], bytes: usize) -> anyhow::Result<([Imported; 2], bool)> {
    let mut errors = Vec::new();
    let order: &[bool] = match std::env::var(DEDICATED_ENV).as_deref() {
        Ok("1") => &[true],
        Ok("0") => &[false],
        _ => &[true, false],
    };
    for &dedicated in order {
        let a = match import_exported(gl, fns, &bufs[0], bytes, dedicated) {
            Ok(a) => a,
            Err(e) => {
                errors.push(format!("{e:#}"));
                continue;
            }
        };
        match import_exported(gl, fns, &bufs[1], bytes, dedicated) {
            Ok(b) => return Ok(([a, b], dedicated)),
            Err(e) => {
                a.release(gl, fns);
                errors.push(format!("{e:#}"));
            }
        }
    }
    bail!("GL did not import the CUDA allocations: {}", errors.join("; "))
}

/// The two position buffers of external storage (see the module docs).
///
/// Field order is drop order, after [`ExternalStorage::release_gl`] deleted the GL side:
/// `gl_objects` (GL buffers → memory objects; `None` once released) → `bufs` (CUDA allocations:
/// unmap, free the range, release).
pub struct ExternalStorage {
    /// The GL buffers and memory objects of `bufs`, in the same order. Deleted by `release_gl`.
    gl_objects: Option<[Imported; 2]>,
    /// The two CUDA allocations, `[N][4]` f32 each, that ping-pong as positions.
    bufs: [ExportableBuffer; 2],
    fns: Arc<MemoryObjectFns>,
    /// The fence put behind the last body draw by `after_draw`; the next step waits on it
    /// instead of a new fence. Deleted when waited on, or by `release_gl`.
    draw_fence: Option<glow::NativeFence>,
    dedicated: bool,
    /// `--external-sync semaphore` (or `auto` where it works): GPU-side ordering in place of the
    /// host waits ([`super::external_sync`]).
    sync: Option<Box<SemaphoreSync>>,
    /// With `sync`: the events hold a step not yet read (its time is reported a frame late).
    timing_pending: bool,
}

impl ExternalStorage {
    /// Allocate, fill, export and import the two position buffers for `bodies`, and order the two
    /// APIs as `sync` asks: `(--external-sync, the GL context's semaphore table)`.
    ///
    /// # Errors
    /// [`Unsupported`] (in the chain) when exportable allocations fail or GL refuses the import;
    /// a failed copy of the initial positions; `--external-sync semaphore` where the semaphores
    /// cannot be made (the message names what is missing; `auto` keeps the host waits then).
    pub fn new(
        ctx: &Arc<Context>,
        gl: Gl<'_>,
        fns: Arc<MemoryObjectFns>,
        bodies: &Bodies,
        sync: (ExternalSync, &Result<Arc<SemaphoreFns>, String>),
    ) -> anyhow::Result<Self> {
        let n = bodies.len();
        let bytes = n * BODY_BYTES;
        let alloc =
            || ExportableBuffer::new(ctx, bytes).map_err(|e| Unsupported(format!("cuMemCreate of {bytes} bytes exportable as a POSIX fd: {e}")));
        let mut bufs = [alloc()?, alloc()?];
        for b in &mut bufs {
            // Both hold the initial positions: the first draw shows every body at rest colour.
            b.write_at(0, &bodies.pos).context("cuMemcpyHtoD of the initial positions")?;
        }
        let (objects, dedicated) = import_pair(gl, &fns, &bufs, bytes).map_err(|e| Unsupported(format!("{e:#}")))?;
        tracing::info!(n, dedicated, bytes = bufs[0].size(), "external-memory buffers imported into GL");
        let mut storage = ExternalStorage { gl_objects: Some(objects), bufs, fns, draw_fence: None, dedicated, sync: None, timing_pending: false };
        let made = match sync {
            (ExternalSync::Host, _) => return Ok(storage),
            (_, Err(why)) => Err(anyhow::anyhow!("{why}")),
            (_, Ok(sem_fns)) => SemaphoreSync::new(ctx, gl, Arc::clone(sem_fns)),
        };
        match (made, sync.0) {
            (Ok(s), _) => storage.sync = Some(Box::new(s)),
            (Err(e), ExternalSync::Semaphore) => {
                storage.release_gl(gl, &Stream::special(ctx, interop::safe::StreamKind::Null));
                bail!("--external-sync semaphore: {e:#}; use --external-sync host (the host waits) or auto");
            }
            (Err(e), _) => tracing::info!("external storage keeps the host waits (no GPU-side semaphores: {e:#})"),
        }
        Ok(storage)
    }

    /// The CUDA allocation behind GL buffer `i` (0 or 1).
    pub fn cuda_buffer(&self, i: usize) -> &ExportableBuffer {
        &self.bufs[i.min(1)]
    }

    /// Both allocations as kernel views, `[N][4]` f32 each.
    fn views(&self) -> [DevicePtr<'_, [f32; 4]>; 2] {
        [self.bufs[0].view(), self.bufs[1].view()]
    }

    /// Errors once `release_gl` ran.
    fn check_live(&self) -> anyhow::Result<()> {
        if self.gl_objects.is_none() {
            bail!("the external-memory storage was released (release_gl) and cannot run");
        }
        Ok(())
    }

    /// The GL names of the two imported buffers (none once released).
    fn buffer_names(&self) -> Vec<u32> {
        self.gl_objects.iter().flatten().map(|o| o.buffer.0.get()).collect()
    }

    /// Whether CUDA and GL are ordered on the GPU (semaphores), not by host waits.
    fn gpu_side(&self) -> bool {
        self.sync.is_some()
    }
}

impl Storage for ExternalStorage {
    /// One frame: fence wait → launches → event wait (see the module docs); `cx.events[0]` and
    /// `[1]` are recorded before and after the launches. Returns the timings and what the integrator did
    /// ([`crate::cuda::integrator::Integrator::launch_frame`]: a long step may run in parts over frames; each frame's
    /// launches write only the back buffer, after the fence wait of rule 2).
    fn frame(&mut self, cx: FrameCx<'_>, gl: Gl<'_>, _vbos: &PositionVbos, steps: u32) -> anyhow::Result<(SimTimings, Option<FrameSteps>)> {
        self.check_live()?;
        let (gpu, stream, clock) = (cx.gpu, cx.stream, cx.clock);
        let mut t = SimTimings::default();
        let mut f = FrameSteps { done: steps, ..FrameSteps::default() };
        let [e0, e1, ..] = cx.events;
        if self.timing_pending {
            // GPU-side ordering: the last step's time, read now that it has (most likely) run.
            t.kernel_ms = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(f64::from);
            t.stream_start = clock.at(e0)?;
            self.timing_pending = false;
        }
        if steps > 0 {
            let names = self.buffer_names();
            let gpu_side = match &mut self.sync {
                Some(s) => s.before_step(gl, stream, &names)?,
                None => false,
            };
            // Rule 2: GL's last draw (reading both buffers) has finished before a kernel writes:
            // on the GPU ("draw done", waited on by the stream above) unless a later draw has a
            // fence (a paused frame drew again), or there is neither: then on the host, on the
            // fence behind the last draw, or on a fence behind all GL work.
            match (self.draw_fence.take(), gpu_side) {
                (Some(fence), _) => t.map_ms = Some(wait_fence(gl, fence, Instant::now())?),
                (None, true) => {}
                (None, false) => t.map_ms = Some(wait_for_gl(gl)?),
            }
            e0.record(stream).context("cuEventRecord")?;
            // fp64: the launches, then the conversion into the buffer GL did not draw last.
            f = gpu.launch_frame(self.views(), steps, stream)?;
            e1.record(stream).context("cuEventRecord")?;
            if let Some(s) = &mut self.sync {
                // Rule 1 on the GPU: GL waits for "step done" before its next draw.
                s.after_step(stream)?;
                self.timing_pending = true;
                return Ok((t, Some(f)));
            }
            // Rule 1: the kernel finished writing before GL draws.
            let w = Instant::now();
            e1.synchronize().context("cuEventSynchronize")?;
            let waited = Instant::now();
            t.unmap_ms = Some((waited - w).as_secs_f64() * 1e3);
            t.stream_start = clock.at(e0)?;
            t.clock_residual_us = clock.residual_us(e1, waited)?;
            t.kernel_ms = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(f64::from);
        }
        Ok((t, Some(f)))
    }

    /// Rule 2 first when the rest of a step in progress or the synchronising half kick writes
    /// the back buffer.
    fn sync(&mut self, cx: FrameCx<'_>, gl: Gl<'_>, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> anyhow::Result<()> {
        self.check_live()?;
        let launch = cx.potential_launch();
        if cx.gpu.sync_writes_float4() || cx.gpu.step_in_progress().is_some() {
            wait_for_gl(gl)?;
        }
        cx.gpu.sync_in(self.views(), cx.stream)?;
        let front = cx.gpu.front();
        if let Some(phi) = phi {
            cx.potential(launch, self.views()[front], phi)?;
        }
        cx.stream.synchronize().context("cuStreamSynchronize")?;
        if let Some(out) = out {
            self.cuda_buffer(front).read_at(0, out).context("cuMemcpyDtoH of the positions")?;
        }
        Ok(())
    }

    fn with_shown(
        &mut self,
        front: usize,
        _n: usize,
        _stream: &Stream,
        f: &mut dyn FnMut(DevicePtr<'_, [f32; 4]>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        f(self.views()[front])
    }

    fn step_mode_refusal(&self, _separate_maps: bool) -> Option<&'static str> {
        Some("step mode walks through map → launch → unmap; --interop external has no map or unmap (use map)")
    }

    fn as_external(&self) -> Option<&ExternalStorage> {
        Some(self)
    }

    fn stream_idle_after_frame(&self) -> bool {
        !self.gpu_side()
    }

    /// The imported GL buffers to draw; `None` after `release_gl`.
    fn draw_buffers(&self, n: usize) -> Option<PositionVbos> {
        self.gl_objects.map(|[a, b]| PositionVbos { buffers: [a.buffer, b.buffer], n })
    }

    /// Before a draw of the imported buffers: with GPU-side ordering, GL waits for the last step.
    fn before_draw(&mut self, gl: Gl<'_>) {
        let names = self.buffer_names();
        if let Some(s) = &mut self.sync {
            s.before_draw(gl, &names);
        }
    }

    /// Puts what the next step waits on right behind the draw just issued: the "draw done"
    /// semaphore's signal (GPU-side ordering), else a fence.
    fn after_draw(&mut self, gl: Gl<'_>) {
        let names = self.buffer_names();
        if self.sync.as_mut().is_some_and(|s| s.after_draw(gl, &names)) {
            return;
        }
        if let Some(old) = self.draw_fence.take() {
            // A draw without a step in between (paused): the new fence covers both.
            gl.delete_sync(old);
        }
        match gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) {
            Ok(f) => self.draw_fence = Some(f),
            // Without it the next step puts a fence behind all GL work instead.
            Err(e) => tracing::warn!("glFenceSync after the draw: {e}"),
        }
    }

    /// Deletes the GL side (fence, buffers, memory objects) once neither API uses the memory.
    fn release_gl(&mut self, gl: Gl<'_>, stream: &Stream) {
        if let Some(f) = self.draw_fence.take() {
            gl.delete_sync(f);
        }
        let Some(objects) = self.gl_objects.take() else { return };
        // Neither API may still use the memory: CUDA's work done, GL's work done (GL first: with
        // semaphores, CUDA's last wait may be on GL's last signal).
        if let Err(e) = wait_for_gl(gl) {
            tracing::warn!("GL fence before releasing the external buffers: {e:#}");
        }
        if let Err(e) = stream.synchronize() {
            tracing::warn!("cuStreamSynchronize before releasing the external buffers: {e}");
        }
        if let Some(s) = &mut self.sync {
            s.release_gl(gl);
        }
        for o in objects {
            o.release(gl, &self.fns);
        }
    }

    /// What the device panel says about this storage.
    fn interop_facts(&self, _settings: &crate::backend::InteropSettings) -> crate::backend::InteropFacts {
        crate::backend::InteropFacts::External {
            mib_each: self.bufs[0].size() >> 20,
            dedicated: self.dedicated,
            semaphores: self.sync.as_ref().map(|s| s.device_name().to_string()),
        }
    }

    /// Logs a warning when the GL side was never released (its objects then stay until the GL
    /// context goes; the imported memory stays alive with them, nothing dangles).
    fn warn_if_not_released(&self) {
        if self.gl_objects.is_some() {
            tracing::warn!(
                "external storage dropped without release_gl(): its GL buffers and memory objects stay until the GL \
                 context goes (the imported memory stays alive with them)"
            );
        }
    }
}
