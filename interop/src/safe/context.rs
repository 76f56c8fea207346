//! Contexts: the device's primary context (retain/release) or an own context (`cuCtxCreate`),
//! with a scheduling flag, made current, pushed and popped as the driver API describes.

use std::ffi::c_uint;
use std::sync::Arc;

use crate::driver::error::Result;
use crate::safe::device::Device;
use crate::sys::{ctx_flags, CUcontext};
use crate::Api;

/// How the host thread waits for the GPU (`CU_CTX_SCHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedFlag {
    /// `CU_CTX_SCHED_AUTO`: spin when there are fewer active contexts than cores, else yield.
    Auto,
    /// `CU_CTX_SCHED_SPIN`: busy-wait (lowest latency, one core busy).
    Spin,
    /// `CU_CTX_SCHED_YIELD`: yield the thread while waiting.
    Yield,
    /// `CU_CTX_SCHED_BLOCKING_SYNC`: block on a synchronisation primitive.
    BlockingSync,
}

impl SchedFlag {
    /// The `CU_CTX_SCHED_*` bits.
    pub fn bits(self) -> c_uint {
        match self {
            SchedFlag::Auto => ctx_flags::SCHED_AUTO,
            SchedFlag::Spin => ctx_flags::SCHED_SPIN,
            SchedFlag::Yield => ctx_flags::SCHED_YIELD,
            SchedFlag::BlockingSync => ctx_flags::SCHED_BLOCKING_SYNC,
        }
    }
    /// Decodes the scheduling bits of context flags.
    pub fn from_bits(bits: c_uint) -> SchedFlag {
        match bits & ctx_flags::SCHED_MASK {
            ctx_flags::SCHED_SPIN => SchedFlag::Spin,
            ctx_flags::SCHED_YIELD => SchedFlag::Yield,
            ctx_flags::SCHED_BLOCKING_SYNC => SchedFlag::BlockingSync,
            _ => SchedFlag::Auto,
        }
    }
}

/// Whether the context is the device's primary context or one of our own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextKind {
    /// Retained with `cuDevicePrimaryCtxRetain`, released on drop.
    Primary,
    /// Created with `cuCtxCreate`, destroyed on drop.
    Owned,
}

/// A CUDA context. Every RAII type of this crate holds an `Arc<Context>`, so the context (and
/// through it the table and the library) outlives them.
///
/// Threading: CUDA calls act on the calling thread's *current* context. This type does not
/// switch contexts behind the caller's back; call [`Context::make_current`] (or use
/// [`Context::push`]) on the thread that uses it. The demo uses one thread.
#[derive(Debug)]
pub struct Context {
    api: Arc<Api>,
    raw: CUcontext,
    device: Device,
    kind: ContextKind,
}

// SAFETY: a CUcontext handle may be used from any thread (the driver API binds contexts to
// threads explicitly with cuCtxSetCurrent/cuCtxPushCurrent); the handle itself is plain data.
unsafe impl Send for Context {}
// SAFETY: all methods take &self; those that act on "the current context" push this context
// on the calling thread's stack first (ContextGuard pops it on the same thread), and the driver
// API is thread-safe.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of `device` with `sched` and makes it current on this thread.
    ///
    /// # Errors
    /// The driver's error from `cuDevicePrimaryCtxSetFlags`, `cuDevicePrimaryCtxRetain` or `cuCtxSetCurrent`.
    #[doc(alias = "cuDevicePrimaryCtxRetain")]
    pub fn primary(device: &Device, sched: SchedFlag) -> Result<Arc<Context>> {
        let api = device.api().clone();
        // SAFETY: plain value arguments; allowed while the primary context is active (CUDA ≥ 11.0).
        unsafe { api.cuDevicePrimaryCtxSetFlags(device.raw(), sched.bits()) }?;
        let mut raw: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { api.cuDevicePrimaryCtxRetain(&mut raw, device.raw()) }?;
        let ctx = Arc::new(Context { api, raw, device: device.clone(), kind: ContextKind::Primary });
        ctx.make_current()?;
        Ok(ctx)
    }

    /// Creates an own context on `device` with `sched` (`cuCtxCreate`, version 3020); it becomes
    /// current on this thread (pushed on its context stack).
    ///
    /// # Errors
    /// The driver's error (for example `CUDA_ERROR_OUT_OF_MEMORY`).
    #[doc(alias = "cuCtxCreate")]
    pub fn create(device: &Device, sched: SchedFlag) -> Result<Arc<Context>> {
        let api = device.api().clone();
        let mut raw: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle; flags and device are plain values.
        unsafe { api.cuCtxCreate(&mut raw, sched.bits(), device.raw()) }?;
        Ok(Arc::new(Context { api, raw, device: device.clone(), kind: ContextKind::Owned }))
    }

    /// The entry-point table.
    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }
    /// The raw handle.
    pub fn raw(&self) -> CUcontext {
        self.raw
    }
    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Primary or own.
    pub fn kind(&self) -> ContextKind {
        self.kind
    }

    /// Binds this context to the calling thread (`cuCtxSetCurrent`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuCtxSetCurrent")]
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: `raw` is a live context (self keeps it retained or created).
        unsafe { self.api.cuCtxSetCurrent(self.raw) }
    }

    /// Pushes this context on the calling thread's stack; the guard pops it when dropped.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuCtxPushCurrent")]
    pub fn push(&self) -> Result<ContextGuard<'_>> {
        // SAFETY: `raw` is a live context.
        unsafe { self.api.cuCtxPushCurrent(self.raw) }?;
        Ok(ContextGuard { ctx: self, _not_send: std::marker::PhantomData })
    }

    /// Lets kernels and copies of this context access `peer`'s memory directly
    /// (`cuCtxEnablePeerAccess` with this context pushed; flags 0). Access is one-way: call it on
    /// both contexts for both ways. Already enabled counts as success
    /// (`CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`). Without it, `cuMemcpyPeerAsync` between the two
    /// still works, staged through host memory.
    ///
    /// # Errors
    /// `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED` when [`Device::can_access_peer`] says no,
    /// `CUDA_ERROR_INVALID_DEVICE` for the same device, `CUDA_ERROR_TOO_MANY_PEERS`; the driver's error.
    #[doc(alias = "cuCtxEnablePeerAccess")]
    pub fn enable_peer_access(&self, peer: &Context) -> Result<()> {
        let _current = self.push()?;
        // SAFETY: `peer.raw` is a live context (the reference keeps it); flags must be 0.
        match unsafe { self.api.cuCtxEnablePeerAccess(peer.raw, 0) } {
            Err(e) if e.code() == Some(crate::sys::CuResult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) => Ok(()),
            r => r,
        }
    }

    /// Waits for all work of the context (`cuCtxSynchronize`; the context must be current).
    ///
    /// # Errors
    /// The driver's error, including errors of earlier asynchronous work.
    #[doc(alias = "cuCtxSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let _current = self.push()?;
        // SAFETY: no arguments; acts on the context pushed above.
        unsafe { self.api.cuCtxSynchronize() }
    }

    /// Flags of the current context (`cuCtxGetFlags`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuCtxGetFlags")]
    pub fn flags(&self) -> Result<c_uint> {
        let mut f = 0;
        let _current = self.push()?;
        // SAFETY: writes one unsigned int; acts on the context pushed above.
        unsafe { self.api.cuCtxGetFlags(&mut f) }?;
        Ok(f)
    }

    /// `(least, greatest)` stream priorities of the current context (`cuCtxGetStreamPriorityRange`).
    /// Numerically lower is higher priority: on an H200 the range is (0, −5).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuCtxGetStreamPriorityRange")]
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        let _current = self.push()?;
        // SAFETY: writes two ints; acts on the context pushed above.
        unsafe { self.api.cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }?;
        Ok((least, greatest))
    }

    /// `(free, total)` device memory in bytes (`cuMemGetInfo`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuMemGetInfo")]
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let (mut free, mut total) = (0usize, 0usize);
        let _current = self.push()?;
        // SAFETY: writes two size_t; acts on the context pushed above.
        unsafe { self.api.cuMemGetInfo(&mut free, &mut total) }?;
        Ok((free, total))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Errors on teardown cannot be returned; they are ignored (the process keeps running).
        match self.kind {
            // SAFETY: we retained it once in `primary`.
            ContextKind::Primary => drop(unsafe { self.api.cuDevicePrimaryCtxRelease(self.device.raw()) }),
            // SAFETY: we created it in `create`; every child holds an Arc to us, so none is left.
            ContextKind::Owned => drop(unsafe { self.api.cuCtxDestroy(self.raw) }),
        }
    }
}

/// Pops the context pushed by [`Context::push`] when dropped.
#[derive(Debug)]
pub struct ContextGuard<'a> {
    ctx: &'a Context,
    /// Not `Send`: the pop must happen on the thread that pushed.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ContextGuard<'_> {
    fn drop(&mut self) {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle; pops what `push` pushed on this thread.
        drop(unsafe { self.ctx.api.cuCtxPopCurrent(&mut popped) });
    }
}
