//! Device buffers, pinned host buffers and copies.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::driver::error::{Error, Result};
use crate::safe::context::Context;
use crate::safe::stream::Stream;
use crate::sys::CUdeviceptr;

/// Plain data that may be copied byte-for-byte between host and device.
///
/// # Safety
/// Implementors must have no padding, no pointers and accept every bit pattern.
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive number type: no padding, every bit pattern valid.
        unsafe impl DeviceCopy for $t {}
    )*};
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);
// SAFETY: an array of plain data is plain data.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// A borrowed view of `len` values of `T` in device memory: what a typed kernel launch takes
/// ([`crate::safe::launch::Launch::ptr`]). It borrows what owns the memory — a [`DeviceBuffer`]
/// ([`DeviceBuffer::view`]), a mapped GL buffer ([`crate::MappedPtr::view`], so it cannot outlive
/// the mapping), an [`crate::ExportableBuffer`] — for `'a`.
#[derive(Debug, Clone, Copy)]
pub struct DevicePtr<'a, T: DeviceCopy> {
    addr: CUdeviceptr,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

impl<'a, T: DeviceCopy> DevicePtr<'a, T> {
    /// A view of `len` values at `addr`.
    ///
    /// # Safety
    /// `addr` must be the start of at least `len · size_of::<T>()` bytes of device memory of the
    /// current context that stay allocated (and, for a graphics resource, mapped) for `'a`.
    pub unsafe fn from_raw_parts(addr: CUdeviceptr, len: usize) -> Self {
        DevicePtr { addr, len, _borrow: PhantomData }
    }

    /// Device address of the first value.
    pub fn addr(&self) -> CUdeviceptr {
        self.addr
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the view holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The values `range` of this view (a sub-view borrowing the same owner).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `range` is reversed or runs past [`DevicePtr::len`].
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<DevicePtr<'a, T>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(format!("range {range:?} of a device view of {} values", self.len)));
        }
        Ok(DevicePtr { addr: self.addr + (range.start * std::mem::size_of::<T>()) as u64, len: range.len(), _borrow: PhantomData })
    }

    /// True when the byte ranges of `self` and `other` share a byte.
    pub fn overlaps<U: DeviceCopy>(&self, other: &DevicePtr<'_, U>) -> bool {
        let (a0, a1) = (self.addr, self.addr + self.bytes() as u64);
        let (b0, b1) = (other.addr, other.addr + other.bytes() as u64);
        a0 < b1 && b0 < a1
    }
}

/// Device memory of `len` values of `T` (`cuMemAlloc`), freed on drop (`cuMemFree`).
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceCopy> {
    ctx: Arc<Context>,
    ptr: CUdeviceptr,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the buffer is an address in device memory; the handle may move between threads.
unsafe impl<T: DeviceCopy> Send for DeviceBuffer<T> {}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates `len` values (uninitialised device memory). `len` may not be 0.
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY`; [`Error::InvalidArgument`] for 0 or an overflowing size.
    #[doc(alias = "cuMemAlloc")]
    pub fn alloc(ctx: &Arc<Context>, len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b > 0)
            .ok_or_else(|| Error::InvalidArgument(format!("device buffer of {len} elements")))?;
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: writes one device pointer.
        unsafe { ctx.api().cuMemAlloc(&mut ptr, bytes) }?;
        Ok(DeviceBuffer { ctx: ctx.clone(), ptr, len, _t: PhantomData })
    }

    /// Allocates and fills from a host slice (synchronous copy).
    ///
    /// # Errors
    /// As [`DeviceBuffer::alloc`] and [`DeviceBuffer::copy_from_host`].
    pub fn from_slice(ctx: &Arc<Context>, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(ctx, data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// Device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// The whole buffer as a view for kernel launches, borrowing the buffer.
    pub fn view(&self) -> DevicePtr<'_, T> {
        // SAFETY: `ptr` is this buffer's allocation of `len` values, which lives while `self` is borrowed.
        unsafe { DevicePtr::from_raw_parts(self.ptr, self.len) }
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false (empty buffers cannot be made).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n == self.len {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!("host slice has {n} elements, device buffer {}", self.len)))
        }
    }

    /// Synchronous host → device copy of the whole buffer (`cuMemcpyHtoD`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when lengths differ; the driver's error.
    #[doc(alias = "cuMemcpyHtoD")]
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.check_len(src.len())?;
        // SAFETY: `src` holds `bytes()` readable bytes; the device range is ours.
        unsafe { self.ctx.api().cuMemcpyHtoD(self.ptr, src.as_ptr().cast::<c_void>(), self.bytes()) }
    }

    /// Synchronous device → host copy of the whole buffer (`cuMemcpyDtoH`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when lengths differ; the driver's error.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.check_len(dst.len())?;
        // SAFETY: `dst` holds `bytes()` writable bytes of a type valid for every bit pattern.
        unsafe { self.ctx.api().cuMemcpyDtoH(dst.as_mut_ptr().cast::<c_void>(), self.ptr, self.bytes()) }
    }

    /// Reads the whole buffer into a new vector.
    ///
    /// # Errors
    /// The driver's error.
    pub fn to_vec(&self) -> Result<Vec<T>>
    where
        T: Default,
    {
        let mut v = vec![T::default(); self.len];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Device → pinned host copy on `stream` (`cuMemcpyDtoHAsync`); complete after the stream is synchronised.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when lengths differ; the driver's error.
    ///
    /// # Safety
    /// Until `stream` has been synchronised (or an event recorded after the copy has completed),
    /// `dst` must be neither read, written nor dropped: the copy engine writes it asynchronously.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_pinned_async(&self, dst: &mut PinnedBuffer<T>, stream: &Stream) -> Result<()> {
        self.check_len(dst.len())?;
        // SAFETY: the pinned buffer holds `bytes()` bytes; the caller keeps it untouched and
        // alive until the copy completes (see # Safety).
        unsafe { self.ctx.api().cuMemcpyDtoHAsync(dst.ptr.cast::<c_void>(), self.ptr, self.bytes(), stream.raw()) }
    }

    /// Device → pinned host copy on `stream` (`cuMemcpyDtoHAsync`), safe: the returned
    /// [`PendingCopy`] owns the pinned buffer and the view of this buffer until the copy has been
    /// waited for ([`PendingCopy::wait`] gives the buffer back); dropped unwaited, it waits for
    /// the stream first; forgotten (`mem::forget`), it leaks the pinned buffer, which is then
    /// never read or freed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when lengths differ; the driver's error (the buffer is then
    /// returned with it).
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub fn copy_to_pinned<'a>(
        &'a self,
        mut dst: PinnedBuffer<T>,
        stream: &'a Stream,
    ) -> std::result::Result<PendingCopy<'a, T>, (Error, PinnedBuffer<T>)> {
        // SAFETY: the returned value owns `dst` and borrows `self` until it has waited for the
        // copy (an event recorded after it, or the stream), so `dst` is neither read, written nor
        // freed, and the source is not freed, before the copy completes.
        match unsafe { self.copy_to_pinned_async(&mut dst, stream) } {
            Ok(()) => Ok(PendingCopy { dst: Some(dst), stream, event: None, _src: std::marker::PhantomData }),
            Err(e) => Err((e, dst)),
        }
    }

    /// Device → device copy of the whole buffer on `stream` (`cuMemcpyDtoDAsync`) into `dst`
    /// (a device address with room for `bytes()` bytes, such as a mapped GL buffer).
    ///
    /// # Errors
    /// The driver's error.
    ///
    /// # Safety
    /// `dst` must be valid device memory of at least `bytes()` bytes until the copy completes.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub unsafe fn copy_to_device_async(&self, dst: CUdeviceptr, stream: &Stream) -> Result<()> {
        // SAFETY: the caller guarantees `dst`; our range is live.
        unsafe { self.ctx.api().cuMemcpyDtoDAsync(dst, self.ptr, self.bytes(), stream.raw()) }
    }

    /// Copies all of `src` into this buffer on `stream` (`cuMemcpyDtoDAsync`), device to device.
    /// `src` borrows its owner for the call only: the caller keeps both alive until `stream`
    /// has finished the copy (as for kernel launches: synchronise the stream, or let a
    /// [`DeviceBuffer`]'s drop, which waits for the context's work, do it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ or the ranges overlap; the driver's error.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy_from_device_async(&mut self, src: DevicePtr<'_, T>, stream: &Stream) -> Result<()> {
        self.check_len(src.len())?;
        if src.overlaps(&self.view()) {
            return Err(Error::InvalidArgument("device-to-device copy between overlapping ranges".into()));
        }
        // SAFETY: `src` is a live device range of `bytes()` bytes (its view borrows the owner),
        // ours is live and of the same length, and they do not overlap (checked).
        unsafe { self.ctx.api().cuMemcpyDtoDAsync(self.ptr, src.addr(), self.bytes(), stream.raw()) }
    }

    /// Copies `src` (memory of `src_ctx`, possibly another device's) into this buffer's values
    /// `at..at + src.len()` on `stream`: [`copy_view_async`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range runs past this buffer, or when `src` overlaps
    /// it in the same context; the driver's error.
    #[doc(alias = "cuMemcpyPeerAsync")]
    pub fn copy_peer_async(&mut self, at: usize, src: DevicePtr<'_, T>, src_ctx: &Context, stream: &Stream) -> Result<()> {
        let dst = self.view().slice(at..at.saturating_add(src.len()))?;
        copy_view_async(dst, &self.ctx, src, src_ctx, stream)
    }

    /// The context the buffer was allocated in.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Sets every byte to `value` on `stream` (`cuMemsetD8Async`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_async(&mut self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: our range is live.
        unsafe { self.ctx.api().cuMemsetD8Async(self.ptr, value, self.bytes(), stream.raw()) }
    }
}

/// Copies `src` (memory of `src_ctx`) into `dst` (memory of `dst_ctx`, possibly on another
/// device) on `stream` (`cuMemcpyPeerAsync`; within one context `cuMemcpyDtoDAsync`). `stream`
/// belongs to either context. The driver copies directly where peer access is enabled
/// ([`Context::enable_peer_access`]) and stages through host memory otherwise. `dst` is written
/// through a view, as a kernel launch writes through one: both owners stay alive (and a mapped
/// GL buffer mapped) until `stream` has finished the copy.
///
/// # Errors
/// [`Error::InvalidArgument`] when the lengths differ, or the ranges overlap in one context; the
/// driver's error.
#[doc(alias = "cuMemcpyPeerAsync")]
pub fn copy_view_async<T: DeviceCopy>(
    dst: DevicePtr<'_, T>,
    dst_ctx: &Context,
    src: DevicePtr<'_, T>,
    src_ctx: &Context,
    stream: &Stream,
) -> Result<()> {
    if dst.len() != src.len() {
        return Err(Error::InvalidArgument(format!("copy of {} values into a view of {}", src.len(), dst.len())));
    }
    if src_ctx.raw() == dst_ctx.raw() {
        if src.overlaps(&dst) {
            return Err(Error::InvalidArgument("device-to-device copy between overlapping ranges".into()));
        }
        // SAFETY: both views are live device ranges of `src.bytes()` bytes of one context (each
        // borrows its owner), which do not overlap (checked).
        return unsafe { dst_ctx.api().cuMemcpyDtoDAsync(dst.addr(), src.addr(), src.bytes(), stream.raw()) };
    }
    // SAFETY: `dst` is a live range of `dst_ctx`, `src` one of `src_ctx`, both of `src.bytes()`
    // bytes (the views borrow their owners; the contexts are live references).
    unsafe { dst_ctx.api().cuMemcpyPeerAsync(dst.addr(), dst_ctx.raw(), src.addr(), src_ctx.raw(), src.bytes(), stream.raw()) }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // Work queued on any stream of the context may still use the buffer (a launch made
        // through a view that no longer borrows it): wait for it before the memory goes.
        drop(self.ctx.synchronize());
        // SAFETY: allocated in `alloc`; freed once, after the context's work (above).
        drop(unsafe { self.ctx.api().cuMemFree(self.ptr) });
    }
}

/// An asynchronous device → pinned host copy in flight ([`DeviceBuffer::copy_to_pinned`]): it
/// owns the pinned buffer (and borrows the source) until the copy has completed.
#[derive(Debug)]
#[must_use = "wait for the copy to get the pinned buffer back"]
pub struct PendingCopy<'a, T: DeviceCopy> {
    dst: Option<PinnedBuffer<T>>,
    stream: &'a Stream,
    event: Option<&'a crate::safe::stream::Event>,
    _src: std::marker::PhantomData<&'a DeviceBuffer<T>>,
}

impl<'a, T: DeviceCopy> PendingCopy<'a, T> {
    /// Records `event` on the copy's stream, right behind the copy (`cuEventRecord`); [`wait`]
    /// then waits for that event instead of the whole stream, and the event times the copy.
    ///
    /// # Errors
    /// The driver's error.
    ///
    /// [`wait`]: PendingCopy::wait
    #[doc(alias = "cuEventRecord")]
    pub fn record(&mut self, event: &'a crate::safe::stream::Event) -> Result<()> {
        event.record(self.stream)?;
        self.event = Some(event);
        Ok(())
    }

    /// Waits for the copy (`cuEventSynchronize` of the recorded event, else
    /// `cuStreamSynchronize`) and gives the pinned buffer back, complete.
    ///
    /// # Errors
    /// The driver's error; the buffer is then freed after a stream synchronisation (`Drop`).
    #[doc(alias = "cuEventSynchronize")]
    #[doc(alias = "cuStreamSynchronize")]
    pub fn wait(mut self) -> Result<PinnedBuffer<T>> {
        match self.event {
            Some(e) => e.synchronize()?,
            None => self.stream.synchronize()?,
        }
        self.dst.take().ok_or_else(|| Error::InvalidArgument("copy already waited for".into()))
    }
}

impl<T: DeviceCopy> Drop for PendingCopy<'_, T> {
    fn drop(&mut self) {
        if let Some(dst) = self.dst.take() {
            // Not waited for (an error path): the copy may still write the buffer, so wait
            // before it is freed; if the wait fails, leak it rather than free memory in use.
            if self.stream.synchronize().is_ok() {
                drop(dst);
            } else {
                std::mem::forget(dst);
            }
        }
    }
}

/// Page-locked host memory of `len` values (`cuMemHostAlloc`), zero-filled, freed on drop.
#[derive(Debug)]
pub struct PinnedBuffer<T: DeviceCopy> {
    ctx: Arc<Context>,
    ptr: *mut T,
    len: usize,
}

// SAFETY: the buffer is owned host memory.
unsafe impl<T: DeviceCopy> Send for PinnedBuffer<T> {}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// Allocates `len` values with `CU_MEMHOSTALLOC_*` flags, zero-filled.
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY`; [`Error::InvalidArgument`] for 0 or an overflowing size.
    #[doc(alias = "cuMemHostAlloc")]
    pub fn alloc(ctx: &Arc<Context>, len: usize, flags: u32) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b > 0)
            .ok_or_else(|| Error::InvalidArgument(format!("pinned buffer of {len} elements")))?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        unsafe { ctx.api().cuMemHostAlloc(&mut p, bytes, flags) }?;
        // SAFETY: `p` points to `bytes` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer { ctx: ctx.clone(), ptr: p.cast(), len })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values (read them only after the copies that write them completed).
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised values (zero-filled at allocation, T valid for
        // every bit pattern) for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The values, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`, and &mut self gives unique access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc`; freed once.
        drop(unsafe { self.ctx.api().cuMemFreeHost(self.ptr.cast()) });
    }
}
