//! Streams and events.

use std::ffi::c_uint;
use std::sync::Arc;

use crate::driver::error::Result;
use crate::safe::context::Context;
use crate::sys::{CUevent, CUstream, CuResult, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};

/// Which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamKind {
    /// The null stream (0): the legacy or per-thread default stream, per the table's semantics.
    Null,
    /// `CU_STREAM_LEGACY`.
    Legacy,
    /// `CU_STREAM_PER_THREAD`.
    PerThread,
    /// A stream created with `cuStreamCreateWithPriority`.
    Created,
}

/// A stream: a created one (destroyed on drop) or one of the special handles.
#[derive(Debug)]
pub struct Stream {
    ctx: Arc<Context>,
    raw: CUstream,
    kind: StreamKind,
}

// SAFETY: a CUstream handle is usable from any thread with its context current.
unsafe impl Send for Stream {}

impl Stream {
    /// Creates a stream with `flags` (`CU_STREAM_DEFAULT` or `CU_STREAM_NON_BLOCKING`) and
    /// `priority` (within [`Context::stream_priority_range`]; lower is higher priority).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuStreamCreateWithPriority")]
    pub fn create(ctx: &Arc<Context>, flags: c_uint, priority: i32) -> Result<Stream> {
        let mut raw: CUstream = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { ctx.api().cuStreamCreateWithPriority(&mut raw, flags, priority) }?;
        Ok(Stream { ctx: ctx.clone(), raw, kind: StreamKind::Created })
    }

    /// A special stream handle (null, legacy or per-thread); nothing is created or destroyed.
    pub fn special(ctx: &Arc<Context>, kind: StreamKind) -> Stream {
        let raw = match kind {
            StreamKind::Legacy => CU_STREAM_LEGACY,
            StreamKind::PerThread => CU_STREAM_PER_THREAD,
            StreamKind::Null | StreamKind::Created => std::ptr::null_mut(),
        };
        let kind = if kind == StreamKind::Created { StreamKind::Null } else { kind };
        Stream { ctx: ctx.clone(), raw, kind }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUstream {
        self.raw
    }
    /// Which stream this is.
    pub fn kind(&self) -> StreamKind {
        self.kind
    }
    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Waits for the stream's work (`cuStreamSynchronize`).
    ///
    /// # Errors
    /// The driver's error, including errors of earlier asynchronous work.
    #[doc(alias = "cuStreamSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the handle is live (or special).
        unsafe { self.ctx.api().cuStreamSynchronize(self.raw) }
    }

    /// `cuStreamGetFlags`.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuStreamGetFlags")]
    pub fn flags(&self) -> Result<c_uint> {
        let mut f = 0;
        // SAFETY: writes one unsigned int.
        unsafe { self.ctx.api().cuStreamGetFlags(self.raw, &mut f) }?;
        Ok(f)
    }

    /// `cuStreamGetPriority`.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuStreamGetPriority")]
    pub fn priority(&self) -> Result<i32> {
        let mut p = 0;
        // SAFETY: writes one int.
        unsafe { self.ctx.api().cuStreamGetPriority(self.raw, &mut p) }?;
        Ok(p)
    }

    /// Makes later work on this stream wait for `event` (`cuStreamWaitEvent`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { self.ctx.api().cuStreamWaitEvent(self.raw, event.raw, 0) }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.kind == StreamKind::Created {
            // SAFETY: created in `create`; destroyed once.
            drop(unsafe { self.ctx.api().cuStreamDestroy(self.raw) });
        }
    }
}

/// A CUDA event (`cuEventCreate`), destroyed on drop.
#[derive(Debug)]
pub struct Event {
    ctx: Arc<Context>,
    raw: CUevent,
}

// SAFETY: a CUevent handle is usable from any thread.
unsafe impl Send for Event {}

impl Event {
    /// Creates an event with `CU_EVENT_*` flags (0 for a timing event).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuEventCreate")]
    pub fn new(ctx: &Arc<Context>, flags: c_uint) -> Result<Event> {
        let mut raw: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { ctx.api().cuEventCreate(&mut raw, flags) }?;
        Ok(Event { ctx: ctx.clone(), raw })
    }

    /// The raw handle.
    pub fn raw(&self) -> CUevent {
        self.raw
    }

    /// Records the event on `stream` (`cuEventRecord`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuEventRecord")]
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { self.ctx.api().cuEventRecord(self.raw, stream.raw()) }
    }

    /// Waits until the event completed (`cuEventSynchronize`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuEventSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the handle is live.
        unsafe { self.ctx.api().cuEventSynchronize(self.raw) }
    }

    /// Whether the event completed (`cuEventQuery`): `CUDA_ERROR_NOT_READY` reads as `Ok(false)`.
    ///
    /// # Errors
    /// Any other driver error.
    #[doc(alias = "cuEventQuery")]
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the handle is live.
        match unsafe { self.ctx.api().cuEventQuery(self.raw) } {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(CuResult::CUDA_ERROR_NOT_READY) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Milliseconds from `start` to `end` (`cuEventElapsedTime`; resolution about 0.5 µs).
    /// `Ok(None)` when either event has not completed yet ("not ready" is not an error).
    ///
    /// # Errors
    /// Other driver errors (for example `CUDA_ERROR_INVALID_HANDLE` for an event never recorded
    /// or created with `CU_EVENT_DISABLE_TIMING`).
    #[doc(alias = "cuEventElapsedTime")]
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<Option<f32>> {
        let mut ms = 0f32;
        // SAFETY: writes one float; both handles are live.
        match unsafe { start.ctx.api().cuEventElapsedTime(&mut ms, start.raw, end.raw) } {
            Ok(()) => Ok(Some(ms)),
            Err(e) if e.code() == Some(CuResult::CUDA_ERROR_NOT_READY) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created in `new`; destroyed once.
        drop(unsafe { self.ctx.api().cuEventDestroy(self.raw) });
    }
}
