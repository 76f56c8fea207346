//! Semaphores that another API created and exported, imported into CUDA
//! (`cuImportExternalSemaphore`) so that a stream can signal them and wait on them: GPU-side
//! ordering between CUDA and that API, with no host wait. Here the other API is Vulkan: a binary
//! semaphore made exportable (`VkExportSemaphoreCreateInfo`,
//! `VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT`) and exported twice with `vkGetSemaphoreFdKHR`,
//! once for CUDA and once for GL (`glImportSemaphoreFdEXT`, `GL_EXT_semaphore_fd`), so all three
//! share one payload.
//!
//! A binary semaphore pairs every wait with one earlier signal: a wait with no signal before it
//! may never complete, and a second signal before the wait is not allowed (Vulkan specification,
//! "Semaphore Signaling"; the CUDA reference defers to the exporting API for the semantics).
//! Keeping that pairing is the caller's job.

use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use crate::driver::error::Result;
use crate::safe::context::Context;
use crate::safe::stream::Stream;
use crate::sys::{
    external_semaphore, CUexternalSemaphore, CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS,
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
};

/// A semaphore imported into a CUDA context; destroyed on drop (`cuDestroyExternalSemaphore`).
#[derive(Debug)]
pub struct ExternalSemaphore {
    raw: CUexternalSemaphore,
    ctx: Arc<Context>,
}

impl ExternalSemaphore {
    /// Imports a binary semaphore exported as an opaque POSIX fd into `ctx` (current on this
    /// thread)
    /// (`CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD`). On success the driver owns the fd ("Ownership
    /// of the file descriptor is transferred to the CUDA driver when the handle is imported
    /// successfully", `cuImportExternalSemaphore`); on failure the `OwnedFd` closes it here.
    ///
    /// # Errors
    /// The driver's error (`CUDA_ERROR_INVALID_VALUE`, `CUDA_ERROR_INVALID_HANDLE`,
    /// `CUDA_ERROR_NOT_SUPPORTED`, …); [`crate::Error::Unavailable`] without the entry point.
    #[doc(alias = "cuImportExternalSemaphore")]
    pub fn import_fd(ctx: &Arc<Context>, fd: OwnedFd) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let mut desc = CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC { handle_type: external_semaphore::HANDLE_TYPE_OPAQUE_FD, ..Default::default() };
        // The union's first 4 bytes hold the int fd (written as bytes, right on either endianness).
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&fd.as_raw_fd().to_ne_bytes());
        desc.handle[0] = u64::from_ne_bytes(bytes);
        let mut raw: CUexternalSemaphore = std::ptr::null_mut();
        // SAFETY: `desc` is a complete OPAQUE_FD description with a live fd; writes one handle.
        unsafe { ctx.api().cuImportExternalSemaphore(&mut raw, &desc) }?;
        // Imported: the driver owns the fd now, so it must not be closed here.
        let _ = fd.into_raw_fd();
        Ok(ExternalSemaphore { raw, ctx: Arc::clone(ctx) })
    }

    /// Signals the semaphore once the work issued to `stream` before this call has completed
    /// (`cuSignalExternalSemaphoresAsync`, one semaphore, parameters zero: a binary semaphore).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuSignalExternalSemaphoresAsync")]
    pub fn signal(&self, stream: &Stream) -> Result<()> {
        let params = CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS::default();
        // SAFETY: one live imported semaphore and one parameter struct, both read during the call.
        unsafe { self.ctx.api().cuSignalExternalSemaphoresAsync(&self.raw, &params, 1, stream.raw()) }
    }

    /// Makes the work issued to `stream` after this call wait until the semaphore is signalled
    /// (`cuWaitExternalSemaphoresAsync`); the wait consumes the signal.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuWaitExternalSemaphoresAsync")]
    pub fn wait(&self, stream: &Stream) -> Result<()> {
        let params = CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS::default();
        // SAFETY: one live imported semaphore and one parameter struct, both read during the call.
        unsafe { self.ctx.api().cuWaitExternalSemaphoresAsync(&self.raw, &params, 1, stream.raw()) }
    }
}

impl Drop for ExternalSemaphore {
    fn drop(&mut self) {
        // SAFETY: imported by `import_fd`, destroyed once; the context is alive (`ctx`).
        drop(unsafe { self.ctx.api().cuDestroyExternalSemaphore(self.raw) });
    }
}
