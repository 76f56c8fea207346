//! Layer 2: the entry-point table, resolved through `cuGetProcAddress`, with thin `Result` wrappers.
//!
//! `entry_points!` below is the single source of truth: for each driver function it declares the
//! C name, the ABI version of the `PFN_<name>_v<version>` typedef in `cudaTypedefs.h` /
//! `cudaGLTypedefs.h` whose signature the Rust declaration copies, the export a pre-11.3 driver
//! has under that version, whether the function has a per-thread-default-stream variant
//! (`_ptsz` / `_ptds`), whether the application needs it, and the parameters. The macro expands it
//! into the `PFN` types ([`pfn`]), the list [`ENTRY_POINTS`] (checked against the headers by a
//! test), the resolved table [`Api`] and one wrapper method per function.
//!
//! Why explicit versions: `cuGetProcAddress(name, version, …)` returns the newest variant of
//! `name` whose ABI version is ≤ `version`. Asking with the *driver's* version instead of the
//! version of the signature the caller was written for silently returns a function with another
//! signature once the driver adds one (`cuCtxCreate` has variants 3020, 11040 and 12050, with 3, 5
//! and 4 parameters). Source: CUDA Driver API, "Driver Entry Point Access", `cuGetProcAddress`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
#[cfg(feature = "trace")]
use std::time::Instant;

use crate::driver::error::Error;
use crate::driver::loader::{Driver, StreamSemantics};
pub use crate::driver::status::{cuda_version_string, SymbolStatus};
use crate::sys::*;

mod decl;
mod report;
mod trace;

pub use decl::{EntryDecl, PtVariant, PER_THREAD_VERSION};
pub use report::EntryReport;
pub use trace::{NoReturned, OutArg, ShowReturned, TraceRecord, Tracer, TRACING_COMPILED};

macro_rules! entry_points {
    ($(
        $(#[$doc:meta])*
        $name:ident @ $version:literal, $export:literal, $pt:ident, $req:ident => ($($arg:ident : $ty:ty),* $(,)?);
    )*) => {
        /// `PFN_<name>` function-pointer types, one per entry, with the signature of the declared version.
        #[allow(non_camel_case_types)]
        pub mod pfn {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[doc = concat!("`PFN_", stringify!($name), "_v", stringify!($version), "`.")]
                pub type $name = unsafe extern "system" fn($($arg: $ty),*) -> CuResult;
            )*
        }

        /// Every declared driver function, in declaration order.
        pub const ENTRY_POINTS: &[EntryDecl] = &[$(
            EntryDecl {
                name: stringify!($name),
                version: $version,
                export: $export,
                pt: PtVariant::$pt,
                required: entry_points!(@req $req),
                params: &[$(stringify!($arg)),*],
            },
        )*];

        /// The resolved function pointers; `None` where the driver has no such function.
        #[allow(non_snake_case)]
        #[derive(Clone, Copy)]
        struct Fns { $($name: Option<pfn::$name>,)* }

        impl Fns {
            /// Builds the table from resolved addresses, in [`ENTRY_POINTS`] order.
            fn from_addresses(addr: &[usize]) -> Fns {
                let mut it = addr.iter().copied();
                Fns {$(
                    $name: {
                        let a = it.next().unwrap_or(0);
                        if a == 0 {
                            None
                        } else {
                            // SAFETY: `a` is a non-null address the driver returned for this name
                            // at the version whose signature `pfn::$name` declares (checked against
                            // the headers by tests/interop_headers.rs); a code address and a
                            // function pointer have the same size and representation.
                            Some(unsafe { std::mem::transmute::<usize, pfn::$name>(a) })
                        }
                    },
                )*}
            }
        }

        #[allow(non_snake_case, clippy::too_many_arguments, missing_docs)]
        impl Api {
            $(
                $(#[$doc])*
                #[doc = ""]
                #[doc = concat!("Calls `", stringify!($name), "` (ABI version ", stringify!($version), ").")]
                #[doc = ""]
                #[doc = "# Errors"]
                #[doc = "[`Error::Driver`] with the driver's code, name and text, or [`Error::Unavailable`] when the driver lacks the function."]
                #[doc = ""]
                #[doc = "# Safety"]
                #[doc = "The arguments must satisfy the driver API's contract for this function (valid handles, pointers to writable memory of the documented size, a current context where needed)."]
                #[inline]
                pub unsafe fn $name(&self, $($arg: $ty),*) -> Result<(), Error> {
                    let Some(f) = self.fns.$name else {
                        return Err(self.unavailable(stringify!($name)));
                    };
                    #[cfg(feature = "trace")]
                    if self.tracing.load(Ordering::Relaxed) {
                        let args = {
                            #[allow(unused_mut)]
                            let mut s = String::new();
                            $( s.push_str(&format!(concat!(stringify!($arg), "={:?} "), $arg)); )*
                            s
                        };
                        let t0 = Instant::now();
                        // SAFETY: the caller keeps this function's contract (see `# Safety`); `f`
                        // has the signature of the version it was resolved with.
                        let r = unsafe { f($($arg),*) };
                        let host_us = t0.elapsed().as_secs_f64() * 1e6;
                        #[allow(unused_mut)]
                        let mut returned = String::new();
                        if r.is_success() {
                            $(
                                if !matches!(stringify!($arg), "resources" | "options" | "p_cuda_devices") {
                                    // SAFETY: the call succeeded, so each single-value output pointer
                                    // the caller passed is valid for one value (this function's
                                    // contract). Array arguments of a readable type are skipped by
                                    // name (`tests::every_readable_pointer_argument_is_one_value`
                                    // checks the table); other types answer `None`.
                                    #[allow(clippy::needless_borrow)]
                                    if let Some(v) = unsafe { (&OutArg($arg)).returned() } {
                                        returned.push_str(&format!(concat!(stringify!($arg), "→{} "), v));
                                    }
                                }
                            )*
                        }
                        self.trace(stringify!($name), $version, args, returned, r, host_us);
                        return self.check(r, stringify!($name));
                    }
                    // SAFETY: as above.
                    let r = unsafe { f($($arg),*) };
                    self.check(r, stringify!($name))
                }
            )*
        }
    };
    (@req required) => { true };
    (@req optional) => { false };
}

entry_points! {
    /// Initialise the driver.
    cuInit @ 2000, "cuInit", None, required => (flags: c_uint);
    /// Driver version (CUDA major·1000 + minor·10).
    cuDriverGetVersion @ 2020, "cuDriverGetVersion", None, required => (driver_version: *mut c_int);
    /// Name of a status code.
    cuGetErrorName @ 6000, "cuGetErrorName", None, required => (error: CuResult, p_str: *mut *const c_char);
    /// Text of a status code.
    cuGetErrorString @ 6000, "cuGetErrorString", None, required => (error: CuResult, p_str: *mut *const c_char);
    /// Number of devices.
    cuDeviceGetCount @ 2000, "cuDeviceGetCount", None, required => (count: *mut c_int);
    /// Device handle of an ordinal.
    cuDeviceGet @ 2000, "cuDeviceGet", None, required => (device: *mut CUdevice, ordinal: c_int);
    /// Device name (NUL-terminated into `name`).
    cuDeviceGetName @ 2000, "cuDeviceGetName", None, required => (name: *mut c_char, len: c_int, dev: CUdevice);
    /// Device UUID.
    cuDeviceGetUuid @ 11040, "cuDeviceGetUuid_v2", None, optional => (uuid: *mut CUuuid, dev: CUdevice);
    /// A device attribute.
    cuDeviceGetAttribute @ 2000, "cuDeviceGetAttribute", None, required => (pi: *mut c_int, attrib: c_int, dev: CUdevice);
    /// Total device memory in bytes.
    cuDeviceTotalMem @ 3020, "cuDeviceTotalMem_v2", None, required => (bytes: *mut usize, dev: CUdevice);
    /// PCI bus id string (`domain:bus:device.function`).
    cuDeviceGetPCIBusId @ 4010, "cuDeviceGetPCIBusId", None, required => (pci_bus_id: *mut c_char, len: c_int, dev: CUdevice);
    /// Retain the device's primary context.
    cuDevicePrimaryCtxRetain @ 7000, "cuDevicePrimaryCtxRetain", None, required => (pctx: *mut CUcontext, dev: CUdevice);
    /// Release the device's primary context.
    cuDevicePrimaryCtxRelease @ 11000, "cuDevicePrimaryCtxRelease_v2", None, required => (dev: CUdevice);
    /// Set the flags (scheduling) of the primary context.
    cuDevicePrimaryCtxSetFlags @ 11000, "cuDevicePrimaryCtxSetFlags_v2", None, required => (dev: CUdevice, flags: c_uint);
    /// Flags and activity of the primary context.
    cuDevicePrimaryCtxGetState @ 7000, "cuDevicePrimaryCtxGetState", None, required => (dev: CUdevice, flags: *mut c_uint, active: *mut c_int);
    /// Create a context (the 3-parameter `cuCtxCreate_v2` signature, version 3020) and make it current.
    cuCtxCreate @ 3020, "cuCtxCreate_v2", None, required => (pctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
    /// Destroy a context.
    cuCtxDestroy @ 4000, "cuCtxDestroy_v2", None, required => (ctx: CUcontext);
    /// Bind a context to the calling thread (replaces the top of its stack).
    cuCtxSetCurrent @ 4000, "cuCtxSetCurrent", None, required => (ctx: CUcontext);
    /// The calling thread's current context.
    cuCtxGetCurrent @ 4000, "cuCtxGetCurrent", None, required => (pctx: *mut CUcontext);
    /// Push a context on the calling thread's stack.
    cuCtxPushCurrent @ 4000, "cuCtxPushCurrent_v2", None, required => (ctx: CUcontext);
    /// Pop the calling thread's current context.
    cuCtxPopCurrent @ 4000, "cuCtxPopCurrent_v2", None, required => (pctx: *mut CUcontext);
    /// Device of the current context.
    cuCtxGetDevice @ 2000, "cuCtxGetDevice", None, required => (device: *mut CUdevice);
    /// Flags of the current context.
    cuCtxGetFlags @ 7000, "cuCtxGetFlags", None, required => (flags: *mut c_uint);
    /// Wait for all work of the current context.
    cuCtxSynchronize @ 2000, "cuCtxSynchronize", None, required => ();
    /// Stream priority range of the current context (least, greatest).
    cuCtxGetStreamPriorityRange @ 5050, "cuCtxGetStreamPriorityRange", None, required => (least_priority: *mut c_int, greatest_priority: *mut c_int);
    /// Free and total device memory in bytes.
    cuMemGetInfo @ 3020, "cuMemGetInfo_v2", None, required => (free: *mut usize, total: *mut usize);
    /// Load a module image (PTX, cubin, fatbin) with JIT options.
    cuModuleLoadDataEx @ 2010, "cuModuleLoadDataEx", None, required => (module: *mut CUmodule, image: *const c_void, num_options: c_uint, options: *mut c_uint, option_values: *mut *mut c_void);
    /// Unload a module.
    cuModuleUnload @ 2000, "cuModuleUnload", None, required => (hmod: CUmodule);
    /// A kernel of a module by name.
    cuModuleGetFunction @ 2000, "cuModuleGetFunction", None, required => (hfunc: *mut CUfunction, hmod: CUmodule, name: *const c_char);
    /// A function attribute.
    cuFuncGetAttribute @ 2020, "cuFuncGetAttribute", None, required => (pi: *mut c_int, attrib: c_int, hfunc: CUfunction);
    /// Occupancy: resident blocks per multiprocessor for a block size and dynamic shared memory.
    cuOccupancyMaxActiveBlocksPerMultiprocessor @ 6050, "cuOccupancyMaxActiveBlocksPerMultiprocessor", None, required => (num_blocks: *mut c_int, func: CUfunction, block_size: c_int, dynamic_smem_size: usize);
    /// Launch a kernel.
    cuLaunchKernel @ 4000, "cuLaunchKernel", Ptsz, required => (f: CUfunction, grid_dim_x: c_uint, grid_dim_y: c_uint, grid_dim_z: c_uint, block_dim_x: c_uint, block_dim_y: c_uint, block_dim_z: c_uint, shared_mem_bytes: c_uint, h_stream: CUstream, kernel_params: *mut *mut c_void, extra: *mut *mut c_void);
    /// Create a stream.
    cuStreamCreate @ 2000, "cuStreamCreate", None, required => (ph_stream: *mut CUstream, flags: c_uint);
    /// Create a stream with a priority.
    cuStreamCreateWithPriority @ 5050, "cuStreamCreateWithPriority", None, required => (ph_stream: *mut CUstream, flags: c_uint, priority: c_int);
    /// Destroy a stream.
    cuStreamDestroy @ 4000, "cuStreamDestroy_v2", None, required => (h_stream: CUstream);
    /// Wait for a stream.
    cuStreamSynchronize @ 2000, "cuStreamSynchronize", Ptsz, required => (h_stream: CUstream);
    /// Whether a stream's work is done (`CUDA_ERROR_NOT_READY` if not).
    cuStreamQuery @ 2000, "cuStreamQuery", Ptsz, required => (h_stream: CUstream);
    /// Flags of a stream.
    cuStreamGetFlags @ 5050, "cuStreamGetFlags", Ptsz, required => (h_stream: CUstream, flags: *mut c_uint);
    /// Priority of a stream.
    cuStreamGetPriority @ 5050, "cuStreamGetPriority", Ptsz, required => (h_stream: CUstream, priority: *mut c_int);
    /// Make a stream wait for an event.
    cuStreamWaitEvent @ 3020, "cuStreamWaitEvent", Ptsz, required => (h_stream: CUstream, h_event: CUevent, flags: c_uint);
    /// Create an event.
    cuEventCreate @ 2000, "cuEventCreate", None, required => (ph_event: *mut CUevent, flags: c_uint);
    /// Destroy an event.
    cuEventDestroy @ 4000, "cuEventDestroy_v2", None, required => (h_event: CUevent);
    /// Record an event on a stream.
    cuEventRecord @ 2000, "cuEventRecord", Ptsz, required => (h_event: CUevent, h_stream: CUstream);
    /// Wait for an event.
    cuEventSynchronize @ 2000, "cuEventSynchronize", None, required => (h_event: CUevent);
    /// Whether an event completed (`CUDA_ERROR_NOT_READY` if not).
    cuEventQuery @ 2000, "cuEventQuery", None, required => (h_event: CUevent);
    /// Milliseconds between two recorded events.
    cuEventElapsedTime @ 2000, "cuEventElapsedTime", None, required => (p_milliseconds: *mut f32, h_start: CUevent, h_end: CUevent);
    /// Allocate device memory.
    cuMemAlloc @ 3020, "cuMemAlloc_v2", None, required => (dptr: *mut CUdeviceptr, bytesize: usize);
    /// Free device memory.
    cuMemFree @ 3020, "cuMemFree_v2", None, required => (dptr: CUdeviceptr);
    /// Copy host → device (synchronous).
    cuMemcpyHtoD @ 3020, "cuMemcpyHtoD_v2", Ptds, required => (dst_device: CUdeviceptr, src_host: *const c_void, byte_count: usize);
    /// Copy device → host (synchronous).
    cuMemcpyDtoH @ 3020, "cuMemcpyDtoH_v2", Ptds, required => (dst_host: *mut c_void, src_device: CUdeviceptr, byte_count: usize);
    /// Copy host → device on a stream.
    cuMemcpyHtoDAsync @ 3020, "cuMemcpyHtoDAsync_v2", Ptsz, required => (dst_device: CUdeviceptr, src_host: *const c_void, byte_count: usize, h_stream: CUstream);
    /// Copy device → host on a stream.
    cuMemcpyDtoHAsync @ 3020, "cuMemcpyDtoHAsync_v2", Ptsz, required => (dst_host: *mut c_void, src_device: CUdeviceptr, byte_count: usize, h_stream: CUstream);
    /// Copy device → device on a stream.
    cuMemcpyDtoDAsync @ 3020, "cuMemcpyDtoDAsync_v2", Ptsz, required => (dst_device: CUdeviceptr, src_device: CUdeviceptr, byte_count: usize, h_stream: CUstream);
    /// Copy between the memory of two contexts (peer copy) on a stream.
    cuMemcpyPeerAsync @ 4000, "cuMemcpyPeerAsync", Ptsz, required => (dst_device: CUdeviceptr, dst_context: CUcontext, src_device: CUdeviceptr, src_context: CUcontext, byte_count: usize, h_stream: CUstream);
    /// Whether `dev` can access the memory of `peer_dev` directly (1) or not (0).
    cuDeviceCanAccessPeer @ 4000, "cuDeviceCanAccessPeer", None, required => (can_access_peer: *mut c_int, dev: CUdevice, peer_dev: CUdevice);
    /// Lets the current context access the memory of `peer_context` (flags must be 0).
    cuCtxEnablePeerAccess @ 4000, "cuCtxEnablePeerAccess", None, required => (peer_context: CUcontext, flags: c_uint);
    /// Set bytes on a stream.
    cuMemsetD8Async @ 3020, "cuMemsetD8Async", Ptsz, required => (dst_device: CUdeviceptr, uc: u8, n: usize, h_stream: CUstream);
    /// Set 32-bit words on a stream.
    cuMemsetD32Async @ 3020, "cuMemsetD32Async", Ptsz, required => (dst_device: CUdeviceptr, ui: c_uint, n: usize, h_stream: CUstream);
    /// Granularity of `cuMemCreate` sizes and `cuMemAddressReserve` alignments, bytes.
    cuMemGetAllocationGranularity @ 10020, "cuMemGetAllocationGranularity", None, optional => (granularity: *mut usize, prop: *const CUmemAllocationProp, option: c_int);
    /// Create a physical allocation (virtual memory management).
    cuMemCreate @ 10020, "cuMemCreate", None, optional => (handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: u64);
    /// Release a physical allocation.
    cuMemRelease @ 10020, "cuMemRelease", None, optional => (handle: CUmemGenericAllocationHandle);
    /// Reserve a virtual address range.
    cuMemAddressReserve @ 10020, "cuMemAddressReserve", None, optional => (ptr: *mut CUdeviceptr, size: usize, alignment: usize, addr: CUdeviceptr, flags: u64);
    /// Free a virtual address range.
    cuMemAddressFree @ 10020, "cuMemAddressFree", None, optional => (ptr: CUdeviceptr, size: usize);
    /// Map a physical allocation into a reserved range.
    cuMemMap @ 10020, "cuMemMap", None, optional => (ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemGenericAllocationHandle, flags: u64);
    /// Unmap a range.
    cuMemUnmap @ 10020, "cuMemUnmap", None, optional => (ptr: CUdeviceptr, size: usize);
    /// Set which devices may access a mapped range.
    cuMemSetAccess @ 10020, "cuMemSetAccess", None, optional => (ptr: CUdeviceptr, size: usize, desc: *const CUmemAccessDesc, count: usize);
    /// Export an allocation as an OS handle (a POSIX file descriptor here).
    cuMemExportToShareableHandle @ 10020, "cuMemExportToShareableHandle", None, optional => (shareable_handle: *mut c_void, handle: CUmemGenericAllocationHandle, handle_type: c_int, flags: u64);
    /// Allocate page-locked (pinned) host memory.
    cuMemHostAlloc @ 2020, "cuMemHostAlloc", None, required => (pp: *mut *mut c_void, bytesize: usize, flags: c_uint);
    /// Free page-locked host memory.
    cuMemFreeHost @ 2000, "cuMemFreeHost", None, required => (p: *mut c_void);
    /// Register a GL buffer object with CUDA.
    cuGraphicsGLRegisterBuffer @ 3000, "cuGraphicsGLRegisterBuffer", None, optional => (p_cuda_resource: *mut CUgraphicsResource, buffer: GLuint, flags: c_uint);
    /// Unregister a graphics resource.
    cuGraphicsUnregisterResource @ 3000, "cuGraphicsUnregisterResource", None, optional => (resource: CUgraphicsResource);
    /// Set the map flags of a registered resource for its next map.
    cuGraphicsResourceSetMapFlags @ 6050, "cuGraphicsResourceSetMapFlags_v2", None, optional => (resource: CUgraphicsResource, flags: c_uint);
    /// Map registered resources for CUDA on a stream.
    cuGraphicsMapResources @ 3000, "cuGraphicsMapResources", Ptsz, optional => (count: c_uint, resources: *mut CUgraphicsResource, h_stream: CUstream);
    /// Unmap resources on a stream, handing them back to GL.
    cuGraphicsUnmapResources @ 3000, "cuGraphicsUnmapResources", Ptsz, optional => (count: c_uint, resources: *mut CUgraphicsResource, h_stream: CUstream);
    /// Device pointer and size of a mapped buffer resource.
    cuGraphicsResourceGetMappedPointer @ 3020, "cuGraphicsResourceGetMappedPointer_v2", None, optional => (p_dev_ptr: *mut CUdeviceptr, p_size: *mut usize, resource: CUgraphicsResource);
    /// Register a GL texture or renderbuffer with CUDA (`target`: GL_TEXTURE_2D, GL_RENDERBUFFER, …).
    cuGraphicsGLRegisterImage @ 3000, "cuGraphicsGLRegisterImage", None, optional => (p_cuda_resource: *mut CUgraphicsResource, image: GLuint, target: GLenum, flags: c_uint);
    /// The CUDA array of one layer and mip level of a mapped image resource.
    cuGraphicsSubResourceGetMappedArray @ 3000, "cuGraphicsSubResourceGetMappedArray", None, optional => (p_array: *mut CUarray, resource: CUgraphicsResource, array_index: c_uint, mip_level: c_uint);
    /// Width, height, element format and channels of a CUDA array.
    cuArrayGetDescriptor @ 3020, "cuArrayGetDescriptor_v2", None, optional => (p_array_descriptor: *mut CUDA_ARRAY_DESCRIPTOR, h_array: CUarray);
    /// Create a surface object over a CUDA array (made with the surface load/store flag).
    cuSurfObjectCreate @ 5000, "cuSurfObjectCreate", None, optional => (p_surf_object: *mut CUsurfObject, p_res_desc: *const CUDA_RESOURCE_DESC);
    /// Destroy a surface object.
    cuSurfObjectDestroy @ 5000, "cuSurfObjectDestroy", None, optional => (surf_object: CUsurfObject);
    /// Create a texture object (no resource view: `p_res_view_desc` null).
    cuTexObjectCreate @ 5000, "cuTexObjectCreate", None, optional => (p_tex_object: *mut CUtexObject, p_res_desc: *const CUDA_RESOURCE_DESC, p_tex_desc: *const CUDA_TEXTURE_DESC, p_res_view_desc: *const c_void);
    /// Destroy a texture object.
    cuTexObjectDestroy @ 5000, "cuTexObjectDestroy", None, optional => (tex_object: CUtexObject);
    /// A 2D copy between host, device and array memory, on a stream.
    cuMemcpy2DAsync @ 3020, "cuMemcpy2DAsync_v2", Ptsz, optional => (p_copy: *const CUDA_MEMCPY2D, h_stream: CUstream);
    /// Import a semaphore another API exported (an opaque fd from Vulkan: ownership of the fd passes to the driver on success).
    cuImportExternalSemaphore @ 10000, "cuImportExternalSemaphore", None, optional => (ext_sem_out: *mut CUexternalSemaphore, sem_handle_desc: *const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC);
    /// Signal imported semaphores once the stream's earlier work is done.
    cuSignalExternalSemaphoresAsync @ 10000, "cuSignalExternalSemaphoresAsync", Ptsz, optional => (ext_sem_array: *const CUexternalSemaphore, params_array: *const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, num_ext_sems: c_uint, stream: CUstream);
    /// Make the stream's later work wait for imported semaphores.
    cuWaitExternalSemaphoresAsync @ 10000, "cuWaitExternalSemaphoresAsync", Ptsz, optional => (ext_sem_array: *const CUexternalSemaphore, params_array: *const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, num_ext_sems: c_uint, stream: CUstream);
    /// Destroy an imported semaphore.
    cuDestroyExternalSemaphore @ 10000, "cuDestroyExternalSemaphore", None, optional => (ext_sem: CUexternalSemaphore);
    /// CUDA devices of the current GL context.
    cuGLGetDevices @ 6050, "cuGLGetDevices_v2", None, optional => (p_cuda_device_count: *mut c_uint, p_cuda_devices: *mut CUdevice, cuda_device_count: c_uint, device_list: c_uint);
}

/// The loaded driver's entry points, resolved with one default-stream semantics.
///
/// Owns the library (through [`Driver`]) so that no function pointer outlives it (habit 5).
/// Every wrapper method returns `Err` rather than calling a missing function.
pub struct Api {
    fns: Fns,
    driver: Driver,
    semantics: StreamSemantics,
    report: Vec<EntryReport>,
    tracing: AtomicBool,
    tracer: Mutex<Option<Tracer>>,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("library", &self.driver.path())
            .field("driver_version", &self.driver.version())
            .field("semantics", &self.semantics)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// Asks the driver for every entry of [`ENTRY_POINTS`] with `semantics` and reports each
    /// (version asked, flags, result, symbol status, address, remedy), failing on nothing: what
    /// a tool prints when [`Api::load`] fails. One row per declared function, in
    /// table order.
    pub fn resolve_report(driver: &Driver, semantics: StreamSemantics) -> Vec<EntryReport> {
        let flags = semantics.flags();
        ENTRY_POINTS
            .iter()
            .map(|decl| {
                let version = decl.version_for(semantics);
                let q = driver.get_proc_address(decl.name, version, flags, &decl.export_for(semantics));
                EntryReport {
                    name: decl.name,
                    version,
                    flags,
                    result: q.result.0,
                    status: q.status,
                    required: decl.required,
                    address: q.address,
                    remedy: EntryReport::remedy_for(q.status, version, driver.version()),
                }
            })
            .collect()
    }

    /// Resolves every entry of [`ENTRY_POINTS`] with `semantics` ([`Api::resolve_report`]).
    ///
    /// # Errors
    /// [`Error::MissingEntryPoint`] for the first *required* function that is not found, naming
    /// function, version, status, the driver version and how many other required functions are
    /// missing ([`Api::resolve_report`] lists them all).
    pub fn load(driver: Driver, semantics: StreamSemantics) -> Result<Arc<Api>, Error> {
        let report = Self::resolve_report(&driver, semantics);
        let mut missing = report.iter().filter(|r| r.required && r.address == 0);
        if let Some(first) = missing.next() {
            return Err(Error::MissingEntryPoint {
                name: first.name,
                version: first.version,
                status: first.status,
                driver_version: driver.version(),
                remedy: first.remedy.clone().unwrap_or_default(),
                more_missing: missing.count(),
            });
        }
        let addresses: Vec<usize> = report.iter().map(|r| r.address).collect();
        Ok(Arc::new(Api {
            fns: Fns::from_addresses(&addresses),
            driver,
            semantics,
            report,
            tracing: AtomicBool::new(false),
            tracer: Mutex::new(None),
        }))
    }

    /// The entry-point report, one row per declared function.
    pub fn report(&self) -> &[EntryReport] {
        &self.report
    }

    /// Whether the function `name` was resolved (the query for optional entries).
    pub fn has(&self, name: &str) -> bool {
        self.report.iter().any(|r| r.name == name && r.address != 0)
    }

    /// The loaded driver library.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Driver version (`cuDriverGetVersion`, e.g. 13000).
    pub fn driver_version(&self) -> c_int {
        self.driver.version()
    }

    /// The default-stream semantics the table was resolved with.
    pub fn semantics(&self) -> StreamSemantics {
        self.semantics
    }

    /// Installs (or removes, with `None`) a receiver of every call made through this table.
    /// Off by default; when off, a call costs one relaxed atomic load more than an untraced one.
    pub fn set_tracer(&self, tracer: Option<Tracer>) {
        if !TRACING_COMPILED {
            return;
        }
        let on = tracer.is_some();
        if let Ok(mut t) = self.tracer.lock() {
            *t = tracer;
        }
        self.tracing.store(on, Ordering::Relaxed);
    }

    /// Hands one call to the tracer, with the version, export and address it was resolved with
    /// (looked up only while tracing).
    #[cfg_attr(not(feature = "trace"), allow(dead_code))]
    fn trace(&self, name: &'static str, version: c_int, args: String, returned: String, result: CuResult, host_us: f64) {
        let row = self.report.iter().find(|r| r.name == name);
        let version = row.map_or(version, |r| r.version);
        let address = row.map_or(0, |r| r.address);
        let export = ENTRY_POINTS.iter().find(|d| d.name == name).map_or_else(|| name.to_string(), |d| d.export_for(self.semantics));
        if let Ok(t) = self.tracer.lock() {
            if let Some(t) = t.as_ref() {
                t(&TraceRecord { name, version, export, address, args, returned, result, host_us });
            }
        }
    }

    fn unavailable(&self, name: &'static str) -> Error {
        let row = self.report.iter().find(|r| r.name == name);
        Error::Unavailable {
            name,
            version: row.map_or(0, |r| r.version),
            status: row.map_or(SymbolStatus::NotFoundUnknownReason, |r| r.status),
            driver_version: self.driver.version(),
        }
    }

    /// Turns a status code into `Ok` or an [`Error::Driver`] carrying name and text.
    pub fn check(&self, r: CuResult, call: &'static str) -> Result<(), Error> {
        if r.is_success() {
            Ok(())
        } else {
            Err(Error::Driver { call, code: r, name: self.error_name(r), text: self.error_string(r) })
        }
    }

    /// `cuGetErrorName` of a code, or its `cuda.h` name, or `"CUDA_ERROR_<n>"`.
    pub fn error_name(&self, r: CuResult) -> String {
        self.lookup_text(self.fns.cuGetErrorName, r).or_else(|| r.known_name().map(str::to_string)).unwrap_or_else(|| format!("CUDA_ERROR_{}", r.0))
    }

    /// `cuGetErrorString` of a code, or `"unknown error"`.
    pub fn error_string(&self, r: CuResult) -> String {
        self.lookup_text(self.fns.cuGetErrorString, r).unwrap_or_else(|| "unknown error".to_string())
    }

    fn lookup_text(&self, f: Option<pfn::cuGetErrorName>, r: CuResult) -> Option<String> {
        let f = f?;
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName/cuGetErrorString write a pointer to a static NUL-terminated
        // string into `p` (or return CUDA_ERROR_INVALID_VALUE for unknown codes).
        let rc = unsafe { f(r, &mut p) };
        if !rc.is_success() || p.is_null() {
            return None;
        }
        // SAFETY: the driver documents `*pStr` as a NUL-terminated string with static lifetime.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `*mut` argument of a type the tracer reads is a single-value output, or one of the
    /// arrays it skips by name: a new row with an array of such a type fails here.
    #[test]
    fn every_readable_pointer_argument_is_one_value() {
        const READABLE: &[&str] = &[
            "CUdeviceptr",
            "CUmemGenericAllocationHandle",
            "u64",
            "usize",
            "c_int",
            "CUdevice",
            "c_uint",
            "f32",
            "CUcontext",
            "CUstream",
            "CUevent",
            "CUgraphicsResource",
            "CUmodule",
            "CUfunction",
        ];
        const SKIPPED: &[&str] = &["resources", "options", "p_cuda_devices"];
        const SINGLE: &[&str] = &[
            "pctx",
            "flags",
            "pi",
            "ph_stream",
            "device",
            "total",
            "ptr",
            "priority",
            "ph_event",
            "p_size",
            "p_milliseconds",
            "p_dev_ptr",
            "p_cuda_resource",
            "p_cuda_device_count",
            "module",
            "num_blocks",
            "least_priority",
            "hfunc",
            "handle",
            "greatest_priority",
            "granularity",
            "free",
            "driver_version",
            "dptr",
            "count",
            "bytes",
            "active",
            "can_access_peer",
        ];
        let table = include_str!("mod.rs");
        let table = &table[table.find("entry_points! {").expect("the table")..];
        for piece in table.split([',', '(']) {
            let Some((name, ty)) = piece.split_once(": *mut ") else { continue };
            let (name, ty) = (name.trim(), ty.trim().trim_end_matches(')').trim_end_matches(';').trim_end_matches(')'));
            if READABLE.contains(&ty) {
                assert!(
                    SINGLE.contains(&name) || SKIPPED.contains(&name),
                    "`{name}: *mut {ty}` would be read as one value by the tracer: add it to the skip list of the \
                     macro (an array) or to SINGLE here (one value)"
                );
            }
        }
    }

    #[test]
    #[allow(clippy::needless_borrow)]
    fn returned_values_come_from_output_pointers_of_known_types_only() {
        let mut dptr: u64 = 0x7f00_0000_1000;
        let mut size: usize = 1_048_576;
        let mut ms: f32 = 0.25;
        let by_value: c_int = 3;
        let mut bytes = [0u8; 4];
        // SAFETY: each pointer is null or points at a live value of its type.
        unsafe {
            assert_eq!((&OutArg(&mut dptr as *mut u64)).returned().as_deref(), Some("0x7f0000001000"));
            assert_eq!((&OutArg(&mut size as *mut usize)).returned().as_deref(), Some("1048576"));
            assert_eq!((&OutArg(&mut ms as *mut f32)).returned().as_deref(), Some("0.25"));
            assert_eq!((&OutArg(std::ptr::null_mut::<u64>())).returned(), None, "null: nothing read");
            assert_eq!((&OutArg(by_value)).returned(), None, "a value argument has nothing to return");
            assert_eq!((&OutArg(bytes.as_mut_ptr().cast::<c_void>())).returned(), None, "void* buffers are not read");
        }
    }
}
