//! Exportable device memory for external-memory interop: `cuMemCreate` with a POSIX file
//! descriptor handle type, mapped into CUDA's address space and exported with
//! `cuMemExportToShareableHandle`, so that OpenGL can import it (`GL_EXT_memory_object_fd`).
//!
//! Source: CUDA Driver API, "Virtual Memory Management"; the workflow is
//! `cuMemGetAllocationGranularity` → `cuMemCreate` → `cuMemAddressReserve` → `cuMemMap` →
//! `cuMemSetAccess`, and on teardown `cuMemUnmap` → `cuMemAddressFree` → `cuMemRelease`.

use std::ffi::c_void;
use std::sync::Arc;

use crate::driver::error::{Error, Result};
use crate::safe::context::Context;
use crate::safe::memory::DeviceCopy;
use crate::sys::{vmm, CUdeviceptr, CUmemAccessDesc, CUmemAllocFlags, CUmemAllocationProp, CUmemGenericAllocationHandle, CUmemLocation};

fn prop(ordinal: i32) -> CUmemAllocationProp {
    CUmemAllocationProp {
        type_: vmm::ALLOCATION_TYPE_PINNED,
        requested_handle_types: vmm::HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: CUmemLocation { type_: vmm::LOCATION_TYPE_DEVICE, id: ordinal },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: CUmemAllocFlags::default(),
    }
}

/// Device memory that can be exported as a POSIX file descriptor; unmapped and released on drop.
///
/// The size is rounded up to the allocation granularity (2 MiB on an H200).
#[derive(Debug)]
pub struct ExportableBuffer {
    ctx: Arc<Context>,
    handle: CUmemGenericAllocationHandle,
    ptr: CUdeviceptr,
    size: usize,
    requested: usize,
}

// SAFETY: the handle and address are plain values usable from any thread with the context current.
unsafe impl Send for ExportableBuffer {}

impl ExportableBuffer {
    /// Allocates at least `bytes` bytes on the context's device, readable and writable by it.
    ///
    /// # Errors
    /// [`Error::Unavailable`] without virtual memory management (drivers before 10.2); the
    /// driver's error otherwise (for example `CUDA_ERROR_NOT_SUPPORTED` where the device cannot
    /// export POSIX file descriptors). Whatever was made before the failing step is released.
    #[doc(alias = "cuMemCreate")]
    pub fn new(ctx: &Arc<Context>, bytes: usize) -> Result<Self> {
        if bytes == 0 {
            return Err(Error::InvalidArgument("an exportable buffer of 0 bytes".into()));
        }
        let api = ctx.api();
        let p = prop(ctx.device().ordinal());
        let mut gran = 0usize;
        // SAFETY: `p` is a valid property struct; writes one size_t.
        unsafe { api.cuMemGetAllocationGranularity(&mut gran, &p, vmm::ALLOC_GRANULARITY_RECOMMENDED) }?;
        let gran = gran.max(1);
        let size = bytes.div_ceil(gran) * gran;
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: writes one handle; size is a multiple of the granularity.
        unsafe { api.cuMemCreate(&mut handle, size, &p, 0) }?;
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: writes one address; a fresh range of `size` bytes aligned to the granularity.
        if let Err(e) = unsafe { api.cuMemAddressReserve(&mut ptr, size, gran, 0, 0) } {
            // SAFETY: releases the allocation made above, once.
            drop(unsafe { api.cuMemRelease(handle) });
            return Err(e);
        }
        // SAFETY: maps the whole allocation at offset 0 into the range reserved above.
        if let Err(e) = unsafe { api.cuMemMap(ptr, size, 0, handle, 0) } {
            // SAFETY: undoes the two steps above, in reverse order, once each.
            unsafe {
                drop(api.cuMemAddressFree(ptr, size));
                drop(api.cuMemRelease(handle));
            }
            return Err(e);
        }
        let desc = CUmemAccessDesc {
            location: CUmemLocation { type_: vmm::LOCATION_TYPE_DEVICE, id: ctx.device().ordinal() },
            flags: vmm::ACCESS_FLAGS_PROT_READWRITE,
        };
        let buf = ExportableBuffer { ctx: ctx.clone(), handle, ptr, size, requested: bytes };
        // SAFETY: the range is mapped; one access descriptor. On error `buf` drops and undoes all.
        unsafe { api.cuMemSetAccess(ptr, size, &desc, 1) }?;
        Ok(buf)
    }

    /// Device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// The requested bytes as `requested / size_of::<T>()` values for kernel launches,
    /// borrowing the buffer.
    pub fn view<T: DeviceCopy>(&self) -> crate::safe::memory::DevicePtr<'_, T> {
        // SAFETY: `ptr` is mapped and readable/writable for `size ≥ requested` bytes while the
        // buffer lives (`new` set the access; `Drop` unmaps), and `self` is borrowed for the view.
        unsafe { crate::safe::memory::DevicePtr::from_raw_parts(self.ptr, self.requested / std::mem::size_of::<T>().max(1)) }
    }
    /// Allocated size, bytes (rounded up to the granularity).
    pub fn size(&self) -> usize {
        self.size
    }
    /// Size asked for, bytes.
    pub fn requested(&self) -> usize {
        self.requested
    }

    /// Checks that `len` values of `T` at byte `offset` lie inside the requested size; returns the byte count.
    fn check_range<T>(&self, offset: usize, len: usize) -> Result<usize> {
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        match bytes.and_then(|b| offset.checked_add(b).map(|end| (b, end))) {
            Some((b, end)) if end <= self.requested => Ok(b),
            _ => Err(Error::InvalidArgument(format!(
                "{len} values of {} bytes at offset {offset} do not fit an exportable buffer of {} bytes",
                std::mem::size_of::<T>(),
                self.requested
            ))),
        }
    }

    /// Synchronous host → device copy of `src` to byte `offset` (`cuMemcpyHtoD`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range exceeds [`ExportableBuffer::requested`]; the driver's error.
    #[doc(alias = "cuMemcpyHtoD")]
    pub fn write_at<T: DeviceCopy>(&mut self, offset: usize, src: &[T]) -> Result<()> {
        let bytes = self.check_range::<T>(offset, src.len())?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: `src` holds `bytes` readable bytes; the device range offset..offset+bytes is
        // mapped and ours (checked above).
        unsafe { self.ctx.api().cuMemcpyHtoD(self.ptr + offset as CUdeviceptr, src.as_ptr().cast::<c_void>(), bytes) }
    }

    /// Synchronous device → host copy from byte `offset` into `dst` (`cuMemcpyDtoH`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range exceeds [`ExportableBuffer::requested`]; the driver's error.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn read_at<T: DeviceCopy>(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        let bytes = self.check_range::<T>(offset, dst.len())?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: `dst` holds `bytes` writable bytes of a type valid for every bit pattern
        // (DeviceCopy); the device range is mapped and ours (checked above).
        unsafe { self.ctx.api().cuMemcpyDtoH(dst.as_mut_ptr().cast::<c_void>(), self.ptr + offset as CUdeviceptr, bytes) }
    }

    /// Exports the allocation as a new POSIX file descriptor (`cuMemExportToShareableHandle`).
    /// The caller owns it: `glImportMemoryFdEXT` takes ownership on success; otherwise dropping
    /// the `OwnedFd` closes it.
    ///
    /// # Errors
    /// The driver's error.
    #[cfg(unix)]
    #[doc(alias = "cuMemExportToShareableHandle")]
    pub fn export_fd(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: for CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR the driver writes one int.
        unsafe {
            self.ctx.api().cuMemExportToShareableHandle(
                (&mut fd as *mut std::ffi::c_int).cast::<c_void>(),
                self.handle,
                vmm::HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        }?;
        if fd < 0 {
            return Err(Error::InvalidArgument("cuMemExportToShareableHandle returned no descriptor".into()));
        }
        // SAFETY: the driver just created this descriptor for us and nothing else owns it.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for ExportableBuffer {
    fn drop(&mut self) {
        let api = self.ctx.api();
        // Work queued on any stream of the context may still use the range (a launch made
        // through a view that no longer borrows it): wait for it before the memory goes.
        drop(self.ctx.synchronize());
        // SAFETY: undoes `new` in reverse order, once each, after the context's work (above).
        unsafe {
            drop(api.cuMemUnmap(self.ptr, self.size));
            drop(api.cuMemAddressFree(self.ptr, self.size));
            drop(api.cuMemRelease(self.handle));
        }
    }
}
