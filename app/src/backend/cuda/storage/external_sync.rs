//! GPU-side ordering for external-memory storage (`--external-sync semaphore`): two binary
//! semaphores that Vulkan makes and exports ([`crate::gfx::vulkan`]), each imported into CUDA
//! ([`interop::ExternalSemaphore`]) and into GL ([`crate::gfx::gl_semaphore`]):
//!
//! ```text
//! "draw done"  GL signals it after the draw (glSignalSemaphoreEXT, both buffers), the stream
//!              waits on it before the launches (cuWaitExternalSemaphoresAsync)   — rule 2
//! "step done"  the stream signals it after the launches (cuSignalExternalSemaphoresAsync), GL
//!              waits on it before the draw (glWaitSemaphoreEXT, both buffers)     — rule 1
//! ```
//!
//! in place of the host's GL-fence wait and CUDA-event wait ([`super::external`]'s rules): the CPU
//! queues both APIs' work and returns at once. A binary semaphore pairs each wait with one earlier
//! signal, and must be unsignalled when a signal executes, so each side remembers what it
//! signalled and the other has not yet waited for, and never signals again before that wait:
//! - two steps with no draw between: GL consumes the pending "step done" (a GL wait) first;
//! - two draws with no step between (paused): the second draw signals nothing; a GL fence covers
//!   it, which the next step waits for on the host (a paused frame has no step to hold up);
//! - a step with no "draw done" pending (the first, or after a view that drew nothing from the
//!   buffers) waits for GL on the host.

use std::sync::Arc;

use anyhow::Context as _;
use interop::{Context, ExternalSemaphore, Stream};

use crate::gfx::gl::Gl;
use crate::gfx::gl_semaphore::SemaphoreFns;
use crate::gfx::vulkan::ExportableSemaphores;
use crate::gfx::GlInfo;

/// Why GPU-side ordering cannot run for `ctx` with the GL context of `gl` (`None`: it can): GL
/// lacks `GL_EXT_semaphore_fd`, or there is no Vulkan device of `ctx`'s GPU that exports
/// semaphores. The bench asks before it builds its `external-semaphore` mode.
pub fn semaphores_unavailable(ctx: &Context, gl: &GlInfo) -> Option<String> {
    if let Err(why) = &gl.semaphore {
        return Some(why.clone());
    }
    let uuid = ctx.device().uuid_bytes().context("cuDeviceGetUuid");
    uuid.and_then(crate::gfx::vulkan::device_for).err().map(|e| format!("{e:#}"))
}

/// Index of the "draw done" semaphore (GL signals, CUDA waits).
const DRAW_DONE: usize = 0;
/// Index of the "step done" semaphore (CUDA signals, GL waits).
const STEP_DONE: usize = 1;

/// The two semaphores in all three APIs and what each side has signalled. Teardown:
/// [`SemaphoreSync::release_gl`] deletes the GL semaphores; then, in field order, CUDA's
/// imports, then the Vulkan objects.
pub struct SemaphoreSync {
    /// GL's names of [draw done, step done]; 0 once released.
    gl: [u32; 2],
    fns: Arc<SemaphoreFns>,
    /// CUDA's imports of [draw done, step done].
    cuda: [ExternalSemaphore; 2],
    /// GL signalled "draw done" and the stream has not waited on it yet.
    draw_signalled: bool,
    /// The stream signalled "step done" and GL has not waited on it yet.
    step_signalled: bool,
    vulkan: ExportableSemaphores,
}

impl SemaphoreSync {
    /// Makes the two semaphores on the Vulkan device of `ctx`'s GPU and imports each into CUDA
    /// (`ctx`) and GL (`fns`, the current context's table).
    ///
    /// # Errors
    /// No Vulkan, no matching device, or an import refused: the message names the step.
    pub fn new(ctx: &Arc<Context>, gl: Gl<'_>, fns: Arc<SemaphoreFns>) -> anyhow::Result<Self> {
        let uuid = ctx.device().uuid_bytes().context("cuDeviceGetUuid")?;
        let vulkan = ExportableSemaphores::new(uuid, 2)?;
        let import_cuda = |i| -> anyhow::Result<ExternalSemaphore> {
            ExternalSemaphore::import_fd(ctx, vulkan.export_fd(i)?).context("cuImportExternalSemaphore (opaque fd)")
        };
        let cuda = [import_cuda(DRAW_DONE)?, import_cuda(STEP_DONE)?];
        let a = fns.import_fd(gl, vulkan.export_fd(DRAW_DONE)?).map_err(anyhow::Error::msg)?;
        let b = match vulkan.export_fd(STEP_DONE).and_then(|fd| fns.import_fd(gl, fd).map_err(anyhow::Error::msg)) {
            Ok(b) => b,
            Err(e) => {
                fns.delete(gl, a);
                return Err(e);
            }
        };
        tracing::info!(vulkan_device = vulkan.device_name(), "external storage: GL and CUDA ordered by Vulkan semaphores");
        Ok(SemaphoreSync { gl: [a, b], fns, cuda, draw_signalled: false, step_signalled: false, vulkan })
    }

    /// The Vulkan device the semaphores were made on.
    pub fn device_name(&self) -> &str {
        self.vulkan.device_name()
    }

    /// Before a step's launches on `stream`: a pending "step done" is consumed by GL first (no
    /// draw waited for it), then the stream waits for the last draw. Returns false when no draw
    /// has signalled since the last step: the caller waits for GL on the host instead.
    ///
    /// # Errors
    /// The driver's error for the wait.
    pub fn before_step(&mut self, gl: Gl<'_>, stream: &Stream, buffers: &[u32]) -> anyhow::Result<bool> {
        // A "step done" that no draw waited for: GL consumes it first, as a draw would.
        self.before_draw(gl, buffers);
        if !self.draw_signalled {
            return Ok(false);
        }
        self.cuda[DRAW_DONE].wait(stream).context("cuWaitExternalSemaphoresAsync (draw done)")?;
        self.draw_signalled = false;
        Ok(true)
    }

    /// After a step's launches on `stream`: signal "step done".
    ///
    /// # Errors
    /// The driver's error for the signal.
    pub fn after_step(&mut self, stream: &Stream) -> anyhow::Result<()> {
        self.cuda[STEP_DONE].signal(stream).context("cuSignalExternalSemaphoresAsync (step done)")?;
        self.step_signalled = true;
        Ok(())
    }

    /// Before a draw that reads `buffers`: GL waits for the last step, if it has not yet.
    pub fn before_draw(&mut self, gl: Gl<'_>, buffers: &[u32]) {
        if self.step_signalled {
            self.fns.wait(gl, self.gl[STEP_DONE], buffers);
            self.step_signalled = false;
        }
    }

    /// After a draw that read `buffers`: signals "draw done" (flushed, so that it is submitted)
    /// and returns true; returns false, signalling nothing, while an earlier "draw done" is still
    /// pending (a paused frame drew again): a binary semaphore must be unsignalled when a signal
    /// executes, and nothing orders a second GL signal after the stream's wait on the first, so
    /// the caller covers this draw with a GL fence instead.
    pub fn after_draw(&mut self, gl: Gl<'_>, buffers: &[u32]) -> bool {
        if self.draw_signalled {
            return false;
        }
        self.fns.signal(gl, self.gl[DRAW_DONE], buffers);
        gl.flush();
        self.draw_signalled = true;
        true
    }

    /// Deletes the GL semaphores (once neither API uses them: the caller has synchronised).
    pub fn release_gl(&mut self, gl: Gl<'_>) {
        for s in &mut self.gl {
            if *s != 0 {
                self.fns.delete(gl, *s);
                *s = 0;
            }
        }
    }
}
