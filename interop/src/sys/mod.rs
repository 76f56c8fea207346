//! Layer 1: C types and constants of the CUDA driver API (`cuda.h`, `cudaGL.h`), no logic.
//!
//! Handles are opaque pointers; status codes and enumerations are open newtypes or plain integer
//! constants, never Rust `enum`s, because the driver may return values this build does not know.
//! The function-pointer types (`PFN_…`) are generated from the entry-point table in
//! [`crate::driver::entry`], the single place that lists driver functions.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};
use std::fmt;

/// `CUdevice` (`CUdevice_v1`): a device ordinal handle, `int`.
pub type CUdevice = c_int;
/// `CUdeviceptr` (`CUdeviceptr_v2`): a device address, `unsigned long long`.
pub type CUdeviceptr = u64;
/// `cuuint64_t`.
pub type cuuint64_t = u64;
/// `GLuint`.
pub type GLuint = c_uint;
/// `GLenum`.
pub type GLenum = c_uint;

macro_rules! opaque_handle {
    ($($(#[$m:meta])* $name:ident => $st:ident;)*) => {$(
        #[doc(hidden)]
        #[repr(C)]
        pub struct $st { _private: [u8; 0] }
        $(#[$m])*
        pub type $name = *mut $st;
    )*};
}

opaque_handle! {
    /// `CUcontext`: a CUDA context.
    CUcontext => CUctx_st;
    /// `CUmodule`: a loaded module (PTX or cubin).
    CUmodule => CUmod_st;
    /// `CUfunction`: a kernel of a module.
    CUfunction => CUfunc_st;
    /// `CUstream`: a stream; null is the default stream of the table's semantics.
    CUstream => CUstream_st;
    /// `CUevent`: an event.
    CUevent => CUevent_st;
    /// `CUgraphicsResource`: a registered graphics (GL) resource.
    CUgraphicsResource => CUgraphicsResource_st;
    /// `CUarray`: a CUDA array (opaque 1D/2D/3D texel storage; here, a mapped GL image).
    CUarray => CUarray_st;
    /// `CUexternalSemaphore`: a semaphore imported from another API (here, Vulkan).
    CUexternalSemaphore => CUextSemaphore_st;
}

/// `CUsurfObject`: a surface object (reads and writes of an array's texels by coordinates).
pub type CUsurfObject = u64;
/// `CUtexObject`: a texture object (filtered, addressed reads of an array).
pub type CUtexObject = u64;

/// `CU_STREAM_LEGACY`: the legacy default stream, whatever the table's semantics.
pub const CU_STREAM_LEGACY: CUstream = 0x1 as CUstream;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream, whatever the table's semantics.
pub const CU_STREAM_PER_THREAD: CUstream = 0x2 as CUstream;

/// `CUresult`: a driver status code, as an open newtype (the driver may return codes newer than
/// this build). Names and texts come from `cuGetErrorName`/`cuGetErrorString` at run time.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct CuResult(pub c_int);

macro_rules! cu_results {
    ($($name:ident = $v:expr;)*) => {
        impl CuResult {
            $(
                #[doc = concat!("`", stringify!($name), "` (", stringify!($v), ").")]
                pub const $name: CuResult = CuResult($v);
            )*
            /// The `cuda.h` name of a code this build knows, for use when `cuGetErrorName` is unavailable.
            pub fn known_name(self) -> Option<&'static str> {
                match self.0 { $($v => Some(stringify!($name)),)* _ => None }
            }
        }
    };
}

cu_results! {
    CUDA_SUCCESS = 0;
    CUDA_ERROR_INVALID_VALUE = 1;
    CUDA_ERROR_OUT_OF_MEMORY = 2;
    CUDA_ERROR_NOT_INITIALIZED = 3;
    CUDA_ERROR_DEINITIALIZED = 4;
    CUDA_ERROR_STUB_LIBRARY = 34;
    CUDA_ERROR_NO_DEVICE = 100;
    CUDA_ERROR_INVALID_DEVICE = 101;
    CUDA_ERROR_INVALID_IMAGE = 200;
    CUDA_ERROR_INVALID_CONTEXT = 201;
    CUDA_ERROR_MAP_FAILED = 205;
    CUDA_ERROR_UNMAP_FAILED = 206;
    CUDA_ERROR_ALREADY_MAPPED = 208;
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
    CUDA_ERROR_NOT_MAPPED = 211;
    CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212;
    CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213;
    CUDA_ERROR_INVALID_PTX = 218;
    CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219;
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
    CUDA_ERROR_INVALID_SOURCE = 300;
    CUDA_ERROR_FILE_NOT_FOUND = 301;
    CUDA_ERROR_INVALID_HANDLE = 400;
    CUDA_ERROR_NOT_FOUND = 500;
    CUDA_ERROR_NOT_READY = 600;
    CUDA_ERROR_ILLEGAL_ADDRESS = 700;
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
    CUDA_ERROR_LAUNCH_FAILED = 719;
    CUDA_ERROR_NOT_PERMITTED = 800;
    CUDA_ERROR_NOT_SUPPORTED = 801;
    CUDA_ERROR_UNKNOWN = 999;
}

impl CuResult {
    /// True for `CUDA_SUCCESS`.
    pub fn is_success(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for CuResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known_name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "CuResult({})", self.0),
        }
    }
}

impl fmt::Display for CuResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// `CUdriverProcAddressQueryResult`: what `cuGetProcAddress_v2` says about a symbol (open newtype).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CUdriverProcAddressQueryResult(pub c_int);

impl CUdriverProcAddressQueryResult {
    /// `CU_GET_PROC_ADDRESS_SUCCESS`: found.
    pub const SUCCESS: Self = Self(0);
    /// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`: this driver has no such symbol.
    pub const SYMBOL_NOT_FOUND: Self = Self(1);
    /// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`: the symbol exists, but only in versions newer than the one asked for.
    pub const VERSION_NOT_SUFFICIENT: Self = Self(2);
}

/// `CU_GET_PROC_ADDRESS_DEFAULT`: the default-stream semantics of the build (legacy unless
/// compiled with per-thread default stream).
pub const CU_GET_PROC_ADDRESS_DEFAULT: cuuint64_t = 0;
/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`: stream-ordered functions use the legacy default stream.
pub const CU_GET_PROC_ADDRESS_LEGACY_STREAM: cuuint64_t = 1;
/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`: stream-ordered functions resolve to their
/// `_ptsz`/`_ptds` variants, whose null stream is the per-thread default stream.
pub const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: cuuint64_t = 2;

/// `CUuuid`: 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CUuuid {
    /// The bytes.
    pub bytes: [u8; 16],
}

/// `CUdevice_attribute` values used here (`cuda.h`).
pub mod attr {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const MAX_THREADS_PER_BLOCK: c_int = 1;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: c_int = 8;
    pub const TOTAL_CONSTANT_MEMORY: c_int = 9;
    pub const WARP_SIZE: c_int = 10;
    pub const MAX_REGISTERS_PER_BLOCK: c_int = 12;
    pub const CLOCK_RATE: c_int = 13;
    pub const MULTIPROCESSOR_COUNT: c_int = 16;
    pub const INTEGRATED: c_int = 18;
    pub const CAN_MAP_HOST_MEMORY: c_int = 19;
    pub const COMPUTE_MODE: c_int = 20;
    pub const CONCURRENT_KERNELS: c_int = 31;
    pub const ECC_ENABLED: c_int = 32;
    pub const PCI_BUS_ID: c_int = 33;
    pub const PCI_DEVICE_ID: c_int = 34;
    pub const MEMORY_CLOCK_RATE: c_int = 36;
    pub const GLOBAL_MEMORY_BUS_WIDTH: c_int = 37;
    pub const L2_CACHE_SIZE: c_int = 38;
    pub const MAX_THREADS_PER_MULTIPROCESSOR: c_int = 39;
    pub const ASYNC_ENGINE_COUNT: c_int = 40;
    pub const UNIFIED_ADDRESSING: c_int = 41;
    pub const PCI_DOMAIN_ID: c_int = 50;
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 76;
    pub const STREAM_PRIORITIES_SUPPORTED: c_int = 78;
    pub const MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: c_int = 81;
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
    pub const VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: c_int = 102;
    pub const HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: c_int = 103;
    pub const MAX_BLOCKS_PER_MULTIPROCESSOR: c_int = 106;
}

/// `CUfunction_attribute` values (`cuda.h`).
pub mod func_attr {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const MAX_THREADS_PER_BLOCK: c_int = 0;
    pub const SHARED_SIZE_BYTES: c_int = 1;
    pub const CONST_SIZE_BYTES: c_int = 2;
    pub const LOCAL_SIZE_BYTES: c_int = 3;
    pub const NUM_REGS: c_int = 4;
    pub const PTX_VERSION: c_int = 5;
    pub const BINARY_VERSION: c_int = 6;
}

/// `CUjit_option` values (`cuda.h`), passed to `cuModuleLoadDataEx`.
pub mod jit {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const WALL_TIME: c_uint = 2;
    pub const INFO_LOG_BUFFER: c_uint = 3;
    pub const INFO_LOG_BUFFER_SIZE_BYTES: c_uint = 4;
    pub const ERROR_LOG_BUFFER: c_uint = 5;
    pub const ERROR_LOG_BUFFER_SIZE_BYTES: c_uint = 6;
    pub const LOG_VERBOSE: c_uint = 12;
}

/// Context flags (`CUctx_flags`).
pub mod ctx_flags {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const SCHED_AUTO: c_uint = 0x00;
    pub const SCHED_SPIN: c_uint = 0x01;
    pub const SCHED_YIELD: c_uint = 0x02;
    pub const SCHED_BLOCKING_SYNC: c_uint = 0x04;
    pub const SCHED_MASK: c_uint = 0x07;
}

/// Stream flags (`CUstream_flags`).
pub mod stream_flags {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const DEFAULT: c_uint = 0x0;
    pub const NON_BLOCKING: c_uint = 0x1;
}

/// Event flags (`CUevent_flags`).
pub mod event_flags {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const DEFAULT: c_uint = 0x0;
    pub const BLOCKING_SYNC: c_uint = 0x1;
    pub const DISABLE_TIMING: c_uint = 0x2;
}

/// `cuMemHostAlloc` flags.
pub mod host_alloc {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const PORTABLE: c_uint = 0x01;
    pub const DEVICEMAP: c_uint = 0x02;
    pub const WRITECOMBINED: c_uint = 0x04;
}

/// `CUgraphicsRegisterFlags`.
pub mod register_flags {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const NONE: c_uint = 0x00;
    pub const READ_ONLY: c_uint = 0x01;
    pub const WRITE_DISCARD: c_uint = 0x02;
    /// `CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST`: the image will be bound as a surface
    /// (surface load/store through a surface object).
    pub const SURFACE_LDST: c_uint = 0x04;
    /// `CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER`: the image will be used for texture gather.
    pub const TEXTURE_GATHER: c_uint = 0x08;
}

/// `CUgraphicsMapResourceFlags`.
pub mod map_flags {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const NONE: c_uint = 0x00;
    pub const READ_ONLY: c_uint = 0x01;
    pub const WRITE_DISCARD: c_uint = 0x02;
}

/// `CUGLDeviceList` values.
pub mod gl_device_list {
    #![allow(missing_docs)]
    use std::ffi::c_uint;
    pub const ALL: c_uint = 0x01;
    pub const CURRENT_FRAME: c_uint = 0x02;
    pub const NEXT_FRAME: c_uint = 0x03;
}

/// `CUresourcetype`: what a [`CUDA_RESOURCE_DESC`] describes.
pub mod resource_type {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const ARRAY: c_int = 0x00;
    pub const MIPMAPPED_ARRAY: c_int = 0x01;
    pub const LINEAR: c_int = 0x02;
    pub const PITCH2D: c_int = 0x03;
}

/// `CUmemorytype`: where a side of a [`CUDA_MEMCPY2D`] is.
pub mod memory_type {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const HOST: c_int = 0x01;
    pub const DEVICE: c_int = 0x02;
    pub const ARRAY: c_int = 0x03;
    pub const UNIFIED: c_int = 0x04;
}

/// `CUaddress_mode` and `CUfilter_mode` of a [`CUDA_TEXTURE_DESC`], and its `CU_TRSF_*` flags.
pub mod texture {
    #![allow(missing_docs)]
    use std::ffi::{c_int, c_uint};
    pub const ADDRESS_WRAP: c_int = 0;
    pub const ADDRESS_CLAMP: c_int = 1;
    pub const ADDRESS_MIRROR: c_int = 2;
    pub const ADDRESS_BORDER: c_int = 3;
    pub const FILTER_POINT: c_int = 0;
    pub const FILTER_LINEAR: c_int = 1;
    pub const TRSF_READ_AS_INTEGER: c_uint = 0x01;
    pub const TRSF_NORMALIZED_COORDINATES: c_uint = 0x02;
}

/// `CUarray_format` values of a [`CUDA_ARRAY_DESCRIPTOR`] (the common ones).
pub mod array_format {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const UNSIGNED_INT8: c_int = 0x01;
    pub const UNSIGNED_INT16: c_int = 0x02;
    pub const UNSIGNED_INT32: c_int = 0x03;
    pub const SIGNED_INT8: c_int = 0x08;
    pub const SIGNED_INT16: c_int = 0x09;
    pub const SIGNED_INT32: c_int = 0x0a;
    pub const HALF: c_int = 0x10;
    pub const FLOAT: c_int = 0x20;
}

/// `CUDA_RESOURCE_DESC` (`_v1`, `cuda.h`): what a surface or texture object reads. The C union
/// `res` is 128 bytes; only its `array` form (a `CUarray` at offset 0) is used (`image.rs`
/// makes it). 144 bytes (the header test compares size and offsets).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUDA_RESOURCE_DESC {
    /// `CUresourcetype` ([`resource_type`]).
    pub res_type: c_int,
    /// The union `res`, as 16 words (8-byte aligned, as its pointer and `size_t` members are).
    pub res: [u64; 16],
    /// Must be 0.
    pub flags: c_uint,
}

/// `CUDA_TEXTURE_DESC` (`_v1`, `cuda.h`): how a texture object samples. 104 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUDA_TEXTURE_DESC {
    /// `CUaddress_mode` per dimension ([`texture`]).
    pub address_mode: [c_int; 3],
    /// `CUfilter_mode` ([`texture`]).
    pub filter_mode: c_int,
    /// `CU_TRSF_*` flags ([`texture`]).
    pub flags: c_uint,
    /// Largest anisotropy ratio.
    pub max_anisotropy: c_uint,
    /// Filter between mip levels.
    pub mipmap_filter_mode: c_int,
    /// Mip level bias.
    pub mipmap_level_bias: f32,
    /// Lowest mip level.
    pub min_mipmap_level_clamp: f32,
    /// Highest mip level.
    pub max_mipmap_level_clamp: f32,
    /// Border colour (`CU_TR_ADDRESS_MODE_BORDER`).
    pub border_color: [f32; 4],
    /// Must be zero.
    pub reserved: [c_int; 12],
}

/// `CUDA_MEMCPY2D` (`_v2`, `cuda.h`): a 2D copy between host, device and array memory. 128 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUDA_MEMCPY2D {
    /// Source X offset, bytes.
    pub src_x_in_bytes: usize,
    /// Source row.
    pub src_y: usize,
    /// Source memory type ([`memory_type`]).
    pub src_memory_type: c_int,
    /// Source host pointer (`HOST`).
    pub src_host: *const c_void,
    /// Source device pointer (`DEVICE`).
    pub src_device: CUdeviceptr,
    /// Source array (`ARRAY`).
    pub src_array: CUarray,
    /// Source row pitch, bytes (not for arrays).
    pub src_pitch: usize,
    /// Destination X offset, bytes.
    pub dst_x_in_bytes: usize,
    /// Destination row.
    pub dst_y: usize,
    /// Destination memory type ([`memory_type`]).
    pub dst_memory_type: c_int,
    /// Destination host pointer (`HOST`).
    pub dst_host: *mut c_void,
    /// Destination device pointer (`DEVICE`).
    pub dst_device: CUdeviceptr,
    /// Destination array (`ARRAY`).
    pub dst_array: CUarray,
    /// Destination row pitch, bytes (not for arrays).
    pub dst_pitch: usize,
    /// Bytes per row copied.
    pub width_in_bytes: usize,
    /// Rows copied.
    pub height: usize,
}

/// `CUDA_ARRAY_DESCRIPTOR` (`_v2`, `cuda.h`): a 1D or 2D array's shape. 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUDA_ARRAY_DESCRIPTOR {
    /// Width, elements.
    pub width: usize,
    /// Height, elements (0 for 1D).
    pub height: usize,
    /// `CUarray_format` ([`array_format`]).
    pub format: c_int,
    /// Channels per element (1, 2 or 4).
    pub num_channels: c_uint,
}

/// A `void*` kernel parameter pointer, as `cuLaunchKernel` takes them.
pub type KernelParam = *mut c_void;

/// `CUmemGenericAllocationHandle`: a physical allocation made by `cuMemCreate`.
pub type CUmemGenericAllocationHandle = u64;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUmemLocation {
    /// `CUmemLocationType` (`CU_MEM_LOCATION_TYPE_DEVICE` = 1).
    pub type_: c_int,
    /// Device ordinal for a device location.
    pub id: c_int,
}

/// The `allocFlags` member of `CUmemAllocationProp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUmemAllocFlags {
    /// `compressionType`.
    pub compression_type: u8,
    /// `gpuDirectRDMACapable`.
    pub gpu_direct_rdma_capable: u8,
    /// `usage`.
    pub usage: u16,
    /// `reserved`.
    pub reserved: [u8; 4],
}

/// `CUmemAllocationProp` (`CUmemAllocationProp_v1`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemAllocationProp {
    /// `CUmemAllocationType` (`CU_MEM_ALLOCATION_TYPE_PINNED` = 1).
    pub type_: c_int,
    /// `CUmemAllocationHandleType` bits (`CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` = 1).
    pub requested_handle_types: c_int,
    /// Where the memory lives.
    pub location: CUmemLocation,
    /// Windows security attributes; null elsewhere.
    pub win32_handle_meta_data: *mut c_void,
    /// Allocation flags.
    pub alloc_flags: CUmemAllocFlags,
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUmemAccessDesc {
    /// Which device gets access.
    pub location: CUmemLocation,
    /// `CUmemAccess_flags` (`CU_MEM_ACCESS_FLAGS_PROT_READWRITE` = 3).
    pub flags: c_int,
}

/// Virtual-memory-management constants (`cuda.h`).
pub mod vmm {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    pub const ALLOCATION_TYPE_PINNED: c_int = 0x1;
    pub const HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 0x1;
    pub const LOCATION_TYPE_DEVICE: c_int = 0x1;
    pub const ACCESS_FLAGS_PROT_READWRITE: c_int = 0x3;
    pub const ALLOC_GRANULARITY_MINIMUM: c_int = 0x0;
    pub const ALLOC_GRANULARITY_RECOMMENDED: c_int = 0x1;
}

/// `CUexternalSemaphoreHandleType` values (`cuda.h`).
pub mod external_semaphore {
    #![allow(missing_docs)]
    use std::ffi::c_int;
    /// `CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD`: a POSIX file descriptor (a Vulkan
    /// semaphore exported with `VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT`).
    pub const HANDLE_TYPE_OPAQUE_FD: c_int = 1;
}

/// `CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC` (`_v1`, `cuda.h`): what `cuImportExternalSemaphore`
/// imports. The handle union is 16 bytes (the Win32 pair); a POSIX fd is its first 4. 96 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    /// `CUexternalSemaphoreHandleType` ([`external_semaphore`]).
    pub handle_type: c_int,
    /// The handle union: `fd` in the first 4 bytes for `OPAQUE_FD` (8-byte aligned at offset 8).
    pub handle: [u64; 2],
    /// Must be zero.
    pub flags: c_uint,
    /// Must be zero.
    pub reserved: [c_uint; 16],
}

/// `CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS` (`_v1`, `cuda.h`): per semaphore, the fence value
/// (timeline and D3D12 fences), the NvSciSync fence and the keyed-mutex key; all zero for a
/// binary (opaque-fd) semaphore. 144 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
    /// `params.fence.value`.
    pub fence_value: u64,
    /// `params.nvSciSync` (pointer or reserved).
    pub nv_sci_sync: u64,
    /// `params.keyedMutex.key`.
    pub keyed_mutex_key: u64,
    /// `params.reserved`.
    pub params_reserved: [c_uint; 12],
    /// `CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC` or 0.
    pub flags: c_uint,
    /// Must be zero.
    pub reserved: [c_uint; 16],
}

/// `CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS` (`_v1`, `cuda.h`): as the signal parameters, with the
/// keyed mutex's timeout. 144 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
    /// `params.fence.value`.
    pub fence_value: u64,
    /// `params.nvSciSync` (pointer or reserved).
    pub nv_sci_sync: u64,
    /// `params.keyedMutex.key`.
    pub keyed_mutex_key: u64,
    /// `params.keyedMutex.timeoutMs`.
    pub keyed_mutex_timeout_ms: c_uint,
    /// The keyed-mutex struct's padding to 16 bytes.
    pub keyed_mutex_pad: c_uint,
    /// `params.reserved`.
    pub params_reserved: [c_uint; 10],
    /// `CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC` or 0.
    pub flags: c_uint,
    /// Must be zero.
    pub reserved: [c_uint; 16],
}
