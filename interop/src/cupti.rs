//! CUPTI activity records (kernels, memory copies, memsets and, where this CUPTI and GPU provide
//! them, compute-engine context switches), loaded at run time and optional.
//!
//! CUPTI (`libcupti.so`, shipped with the CUDA toolkit under `extras/CUPTI/lib64`) is a separate
//! library from the driver: this module opens it on its own with `libloading`
//! ([`Cupti::open`]: `NBODY_CUPTI_LIBRARY`, else [`DEFAULT_LIBRARY_NAMES`], else the toolkit
//! folders) and resolves its functions by name (CUPTI has no `cuGetProcAddress`). A machine
//! without CUPTI gets a [`CuptiError::LibraryNotFound`] that lists every path tried; the caller
//! says in its trace what it lacks and carries on.
//!
//! # How records arrive
//! The CUPTI activity API
//! (<https://docs.nvidia.com/cupti/main/main.html#cupti-activity-api>) hands out records in
//! buffers the client provides: CUPTI calls `bufferRequested` (here [`buffer_requested`]) for an
//! empty buffer, fills it, and calls `bufferCompleted` ([`buffer_completed`]) when it is full or
//! flushed, possibly on a CUPTI thread. Those callbacks are process-wide, so the records are
//! parsed into one process-wide list and only one [`Cupti`] may exist at a time
//! ([`CuptiError::Busy`] for a second one). [`Cupti::flush`] forces the flush
//! (`cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`) and takes the list.
//!
//! # Record layouts
//! Records are read at fixed byte offsets, never through a Rust struct (records are only 8-byte
//! aligned as a whole and CUPTI declares them packed). The offsets come from NVIDIA's
//! `cupti_activity.h` of CUDA 12.0–13.0 (as generated into `cudarc`'s `src/cupti/sys/mod.rs`,
//! features `cuda-12000`…`cuda-13000`) and of CUPTI 13.2 Update 1 (API version 130201, as
//! generated into `singe-cupti-sys/src/cupti_sys_130201.rs`); all structures are
//! `PACKED_ALIGNMENT` (`__attribute__((packed, aligned(8)))`), and every field used here lies at
//! its natural alignment, so packing adds no offsets of its own:
//!
//! | record (struct, CUDA version) | field offsets in bytes |
//! | --- | --- |
//! | kernel: `CUpti_ActivityKernel9` (12.x), `CUpti_ActivityKernel10` (13.0, 13.1), `CUpti_ActivityKernel11` (13.2) | `kind` 0, `start` 16, `end` 24, `deviceId` 40, `contextId` 44, `streamId` 48, `correlationId` 92, `name` (pointer) 104 |
//! | memcpy: `CUpti_ActivityMemcpy5` (12.0–12.6), `CUpti_ActivityMemcpy6` (12.8–13.x) | `copyKind` (u8) 4, `bytes` 8, `start` 16, `end` 24, `deviceId` 32, `contextId` 36, `streamId` 40, `correlationId` 44 |
//! | memset: `CUpti_ActivityMemset3`/`CUpti_ActivityMemset4` | `bytes` 8, `start` 16, `end` 24, `deviceId` 32, `contextId` 36, `streamId` 40, `correlationId` 44 |
//! | `CUpti_ActivityComputeEngineCtxSwitch` (13.1 on) | `contextId` 4, `timestamp` 8, `operationType` 16 |
//!
//! The kernel's `start`/`end`/ids have sat at these offsets since `CUpti_ActivityKernel4`, and the
//! memcpy/memset prefixes since their first versions, so they are read whatever the version. The
//! kernel `name` pointer is read only when `cuptiGetVersion` reports a version whose layout was
//! checked ([`name_offset_verified`]: API 18–28, CUDA 11.8–12.9, and 130000–130299, CUDA
//! 13.0–13.2); on any other version [`Activity::name`] is `None`.
//!
//! # Context switches
//! CUPTI 13.1 added `CUPTI_ACTIVITY_KIND_COMPUTE_ENGINE_CTX_SWITCH` (= 57, record
//! `CUpti_ActivityComputeEngineCtxSwitch`): "CUPTI provides the ability to trace GPU compute
//! engine context switches … Note that context switch events are not supported on MIG, vGPU or
//! QNX setups" (CUPTI user guide, "Compute Engine Context Switch"; release notes, "Updates in
//! CUDA 13.1"). CUDA 13.0's CUPTI (API 130000/130001) has no such kind; `CUPTI_ACTIVITY_KIND_CONTEXT`
//! is context creation only and `CUPTI_ACTIVITY_KIND_PREEMPTION` is CDP block preemption. So
//! [`Track::ContextSwitch`] is [`Availability::NotProvided`] on CUPTI older than 13.1 without
//! asking CUPTI, and wherever `cuptiActivityEnable` answers `CUPTI_ERROR_NOT_COMPATIBLE`,
//! `CUPTI_ERROR_NOT_SUPPORTED` or `CUPTI_ERROR_INVALID_KIND`.
//!
//! # Lifetime
//! Once CUPTI is loaded and its callbacks registered it stays loaded for the life of the process
//! (the driver keeps pointers into it); dropping a [`Cupti`] disables the kinds it enabled,
//! flushes and discards what was left, and lets the next [`Cupti::open`] succeed.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::{c_char, c_void, CStr, OsStr};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use libloading::Library;

use crate::error::{error_chain, tried_list, LibraryAttempt};

/// The environment variable naming the CUPTI library to load instead of the default names.
pub const LIBRARY_ENV: &str = "NBODY_CUPTI_LIBRARY";

/// Library names tried first, in order, when [`LIBRARY_ENV`] is unset (the loader's search path).
pub const DEFAULT_LIBRARY_NAMES: &[&str] = &["libcupti.so", "libcupti.so.13", "libcupti.so.12"];

/// Folders under a CUDA toolkit root that hold `libcupti.so`, tried in order.
pub const TOOLKIT_LIBRARY_DIRS: &[&str] = &["extras/CUPTI/lib64", "lib64"];

/// File names tried in each of [`TOOLKIT_LIBRARY_DIRS`].
pub const TOOLKIT_LIBRARY_FILES: &[&str] = &["libcupti.so", "libcupti.so.13"];

/// Bytes of one activity buffer handed to CUPTI (1 MiB, 8-byte aligned as CUPTI requires).
pub const BUFFER_BYTES: usize = 1 << 20;

/// Alignment CUPTI requires of activity buffers (`ACTIVITY_RECORD_ALIGNMENT`).
const BUFFER_ALIGN: usize = 8;

/// The layout every activity buffer is allocated and freed with.
const BUFFER_LAYOUT: Layout = match Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN) {
    Ok(l) => l,
    Err(_) => panic!("BUFFER_BYTES and BUFFER_ALIGN form a valid layout"),
};

/// `CUpti_ActivityKind` values this module uses (`cupti_activity.h`).
pub mod kind {
    /// `CUPTI_ACTIVITY_KIND_MEMCPY`.
    pub const MEMCPY: u32 = 1;
    /// `CUPTI_ACTIVITY_KIND_MEMSET`.
    pub const MEMSET: u32 = 2;
    /// `CUPTI_ACTIVITY_KIND_KERNEL` (serialising kernel trace; records have the kernel layout).
    pub const KERNEL: u32 = 3;
    /// `CUPTI_ACTIVITY_KIND_CONTEXT` (context creation, not switches).
    pub const CONTEXT: u32 = 9;
    /// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`.
    pub const CONCURRENT_KERNEL: u32 = 10;
    /// `CUPTI_ACTIVITY_KIND_COMPUTE_ENGINE_CTX_SWITCH` (CUPTI 13.1 on).
    pub const COMPUTE_ENGINE_CTX_SWITCH: u32 = 57;
}

/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`: flush buffers that are not yet full too.
pub const ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;

/// First CUPTI API version (`cuptiGetVersion`, format `xxyyzz` from CUDA 13.0 on) that has
/// `CUPTI_ACTIVITY_KIND_COMPUTE_ENGINE_CTX_SWITCH`: CUDA 13.1.
pub const CTX_SWITCH_MIN_VERSION: u32 = 130100;

/// Byte offsets of the record fields read here (see the module docs for their source).
pub mod offsets {
    /// `kind` of every record (`CUpti_Activity`).
    pub const KIND: usize = 0;
    /// `CUpti_ActivityKernel4`–`11`: `start`, u64 ns.
    pub const KERNEL_START: usize = 16;
    /// `CUpti_ActivityKernel4`–`11`: `end`, u64 ns.
    pub const KERNEL_END: usize = 24;
    /// `CUpti_ActivityKernel4`–`11`: `deviceId`, u32.
    pub const KERNEL_DEVICE_ID: usize = 40;
    /// `CUpti_ActivityKernel4`–`11`: `contextId`, u32.
    pub const KERNEL_CONTEXT_ID: usize = 44;
    /// `CUpti_ActivityKernel4`–`11`: `streamId`, u32.
    pub const KERNEL_STREAM_ID: usize = 48;
    /// `CUpti_ActivityKernel4`–`11`: `correlationId`, u32.
    pub const KERNEL_CORRELATION_ID: usize = 92;
    /// `CUpti_ActivityKernel9`–`11`: `name`, `const char *` (read only on verified versions).
    pub const KERNEL_NAME: usize = 104;
    /// Memcpy and memset records: `copyKind` (memcpy only), u8.
    pub const MEMCPY_COPY_KIND: usize = 4;
    /// Memcpy and memset records: `bytes`, u64.
    pub const MEM_BYTES: usize = 8;
    /// Memcpy and memset records: `start`, u64 ns.
    pub const MEM_START: usize = 16;
    /// Memcpy and memset records: `end`, u64 ns.
    pub const MEM_END: usize = 24;
    /// Memcpy and memset records: `deviceId`, u32.
    pub const MEM_DEVICE_ID: usize = 32;
    /// Memcpy and memset records: `contextId`, u32.
    pub const MEM_CONTEXT_ID: usize = 36;
    /// Memcpy and memset records: `streamId`, u32.
    pub const MEM_STREAM_ID: usize = 40;
    /// Memcpy and memset records: `correlationId`, u32.
    pub const MEM_CORRELATION_ID: usize = 44;
    /// `CUpti_ActivityComputeEngineCtxSwitch`: `contextId`, u32.
    pub const SWITCH_CONTEXT_ID: usize = 4;
    /// `CUpti_ActivityComputeEngineCtxSwitch`: `timestamp`, u64 ns.
    pub const SWITCH_TIMESTAMP: usize = 8;
    /// `CUpti_ActivityComputeEngineCtxSwitch`: `operationType`, u32 (1 start, 2 end).
    pub const SWITCH_OPERATION: usize = 16;
}

/// True for the CUPTI API versions whose kernel record layout was checked against the headers
/// (the `name` pointer at [`offsets::KERNEL_NAME`]): 18–28 (CUDA 11.8–12.9: `CUpti_ActivityKernel8`/`9`)
/// and 130000–130299 (CUDA 13.0–13.2: `CUpti_ActivityKernel10`/`11`).
pub fn name_offset_verified(api_version: u32) -> bool {
    (18..=28).contains(&api_version) || (130_000..130_300).contains(&api_version)
}

/// A `CUptiResult`: an open newtype over the C enum, so unknown codes stay representable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CuptiResult(pub i32);

impl CuptiResult {
    /// `CUPTI_SUCCESS`.
    pub const SUCCESS: CuptiResult = CuptiResult(0);
    /// `CUPTI_ERROR_INVALID_PARAMETER`.
    pub const ERROR_INVALID_PARAMETER: CuptiResult = CuptiResult(1);
    /// `CUPTI_ERROR_INVALID_OPERATION`.
    pub const ERROR_INVALID_OPERATION: CuptiResult = CuptiResult(7);
    /// `CUPTI_ERROR_MAX_LIMIT_REACHED` (also: no more records in a buffer).
    pub const ERROR_MAX_LIMIT_REACHED: CuptiResult = CuptiResult(12);
    /// `CUPTI_ERROR_NOT_COMPATIBLE`: the activity kind cannot be enabled here.
    pub const ERROR_NOT_COMPATIBLE: CuptiResult = CuptiResult(14);
    /// `CUPTI_ERROR_NOT_INITIALIZED` (e.g. CUPTI newer than the driver).
    pub const ERROR_NOT_INITIALIZED: CuptiResult = CuptiResult(15);
    /// `CUPTI_ERROR_INVALID_KIND`: this CUPTI does not know the activity kind.
    pub const ERROR_INVALID_KIND: CuptiResult = CuptiResult(21);
    /// `CUPTI_ERROR_NOT_SUPPORTED`.
    pub const ERROR_NOT_SUPPORTED: CuptiResult = CuptiResult(27);
    /// `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`.
    pub const ERROR_INSUFFICIENT_PRIVILEGES: CuptiResult = CuptiResult(35);
    /// `CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED`.
    pub const ERROR_LEGACY_PROFILER_NOT_SUPPORTED: CuptiResult = CuptiResult(38);
    /// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED` (another CUPTI client, e.g. a profiler).
    pub const ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CuptiResult = CuptiResult(39);
    /// `CUPTI_ERROR_UNKNOWN`.
    pub const ERROR_UNKNOWN: CuptiResult = CuptiResult(999);

    /// True for `CUPTI_SUCCESS`.
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }

    /// The C name of the codes this module names, else `None`.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "CUPTI_SUCCESS",
            1 => "CUPTI_ERROR_INVALID_PARAMETER",
            7 => "CUPTI_ERROR_INVALID_OPERATION",
            12 => "CUPTI_ERROR_MAX_LIMIT_REACHED",
            14 => "CUPTI_ERROR_NOT_COMPATIBLE",
            15 => "CUPTI_ERROR_NOT_INITIALIZED",
            21 => "CUPTI_ERROR_INVALID_KIND",
            27 => "CUPTI_ERROR_NOT_SUPPORTED",
            35 => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
            38 => "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
            39 => "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
            999 => "CUPTI_ERROR_UNKNOWN",
            _ => return None,
        })
    }

    /// True for the codes that mean "this CUPTI or GPU does not provide that activity kind".
    pub fn means_not_provided(self) -> bool {
        matches!(
            self,
            Self::ERROR_NOT_COMPATIBLE
                | Self::ERROR_NOT_SUPPORTED
                | Self::ERROR_INVALID_KIND
                | Self::ERROR_LEGACY_PROFILER_NOT_SUPPORTED
        )
    }
}

impl fmt::Display for CuptiResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "CUptiResult {}", self.0),
        }
    }
}

fn not_found_remedy(from_env: bool) -> &'static str {
    if from_env {
        "NBODY_CUPTI_LIBRARY is set, so only its path was tried: point it at libcupti.so (the CUDA toolkit \
         has it in extras/CUPTI/lib64) or unset it to search the default places"
    } else {
        "CUPTI ships with the CUDA toolkit (extras/CUPTI/lib64/libcupti.so): install the toolkit's CUPTI, \
         or set NBODY_CUPTI_LIBRARY to the path of libcupti.so"
    }
}

/// Errors of the CUPTI binding.
#[derive(Debug, thiserror::Error)]
pub enum CuptiError {
    /// No CUPTI library could be opened.
    #[error("no CUPTI library could be loaded; tried: {}. {}", tried_list(.tried), not_found_remedy(*.from_env))]
    LibraryNotFound {
        /// Every path or name tried, in order, with the loader's (`dlerror`) message.
        tried: Vec<LibraryAttempt>,
        /// Whether the only candidate came from [`LIBRARY_ENV`].
        from_env: bool,
    },
    /// The library loaded but lacks a required CUPTI function.
    #[error(
        "{library} is not a usable CUPTI library: {symbol} is missing ({detail}); point NBODY_CUPTI_LIBRARY \
         at the CUDA toolkit's extras/CUPTI/lib64/libcupti.so or unset it"
    )]
    MissingSymbol {
        /// The function looked up.
        symbol: &'static str,
        /// The library.
        library: String,
        /// The loader's message.
        detail: String,
    },
    /// A CUPTI call failed.
    #[error("{call} failed: {code}: {text}")]
    Call {
        /// The failing CUPTI function.
        call: &'static str,
        /// Its `CUptiResult`.
        code: CuptiResult,
        /// `cuptiGetResultString` for the code.
        text: String,
    },
    /// Another [`Cupti`] is alive in this process (CUPTI's activity callbacks are process-wide).
    #[error("CUPTI activity tracing is already in use in this process; drop the other Cupti first")]
    Busy,
}

impl CuptiError {
    /// The `CUptiResult` of a failed call, else `None`.
    pub fn code(&self) -> Option<CuptiResult> {
        match self {
            CuptiError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The candidates [`Cupti::open`] tries, in order: `env` alone when it is set and not empty;
/// else [`DEFAULT_LIBRARY_NAMES`], then for each toolkit root (duplicates and empty ones skipped)
/// each of [`TOOLKIT_LIBRARY_DIRS`] × [`TOOLKIT_LIBRARY_FILES`]. The `bool` is true when the list
/// came from `env`.
pub fn candidates_from(env: Option<&OsStr>, toolkit_roots: &[PathBuf]) -> (Vec<PathBuf>, bool) {
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        return (vec![PathBuf::from(p)], true);
    }
    let mut out: Vec<PathBuf> = DEFAULT_LIBRARY_NAMES.iter().map(PathBuf::from).collect();
    let mut roots: Vec<&PathBuf> = Vec::new();
    for r in toolkit_roots.iter().filter(|r| !r.as_os_str().is_empty()) {
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    for root in roots {
        for dir in TOOLKIT_LIBRARY_DIRS {
            for file in TOOLKIT_LIBRARY_FILES {
                out.push(root.join(dir).join(file));
            }
        }
    }
    (out, false)
}

/// The toolkit roots searched: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`.
pub fn toolkit_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots
}

/// Opens the first of `candidates` that loads, or lists every attempt with its `dlerror`.
fn load_first(candidates: &[PathBuf]) -> Result<(Library, String), Vec<LibraryAttempt>> {
    let mut tried = Vec::new();
    for c in candidates {
        // SAFETY: loading a shared library runs its initialisers; we only load CUPTI (or the
        // library the user named in NBODY_CUPTI_LIBRARY), which is made to be loaded by tools.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.display().to_string())),
            Err(e) => tried.push(LibraryAttempt { name: c.display().to_string(), error: error_chain(&e) }),
        }
    }
    Err(tried)
}

/// The first of `candidates` that loads as a shared library, without resolving or calling
/// anything (for deciding up front whether CUPTI work can run). The library stays loaded, as it
/// would after [`Cupti::open`].
///
/// # Errors
/// [`CuptiError::LibraryNotFound`] listing every candidate tried.
pub fn locate(candidates: &[PathBuf]) -> Result<PathBuf, CuptiError> {
    match load_first(candidates) {
        Ok((lib, path)) => {
            std::mem::forget(lib);
            Ok(PathBuf::from(path))
        }
        Err(tried) => Err(CuptiError::LibraryNotFound { tried, from_env: false }),
    }
}


// C signatures (`cupti_activity.h`, `cupti_result.h`, `cupti_version.h`; CUPTIAPI is empty on
// Linux, so they are plain C functions).
type BufferRequestedFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type BufferCompletedFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type GetVersionFn = unsafe extern "C" fn(*mut u32) -> CuptiResult;
type RegisterCallbacksFn = unsafe extern "C" fn(BufferRequestedFn, BufferCompletedFn) -> CuptiResult;
type EnableFn = unsafe extern "C" fn(u32) -> CuptiResult;
type FlushAllFn = unsafe extern "C" fn(u32) -> CuptiResult;
type GetNextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> CuptiResult;
type GetTimestampFn = unsafe extern "C" fn(*mut u64) -> CuptiResult;
type GetResultStringFn = unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult;
type GetNumDroppedRecordsFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult;

/// The resolved CUPTI functions. The library they come from is never unloaded once a [`Cupti`]
/// exists (see the module docs), so the pointers stay valid for the process.
#[derive(Clone, Copy)]
struct Api {
    get_version: GetVersionFn,
    register_callbacks: RegisterCallbacksFn,
    enable: EnableFn,
    disable: EnableFn,
    flush_all: FlushAllFn,
    get_next_record: GetNextRecordFn,
    get_timestamp: GetTimestampFn,
    get_result_string: GetResultStringFn,
    get_num_dropped_records: Option<GetNumDroppedRecordsFn>,
}

impl Api {
    fn resolve(lib: &Library, path: &str) -> Result<Api, CuptiError> {
        fn get<T: Copy>(lib: &Library, path: &str, symbol: &'static str) -> Result<T, CuptiError> {
            let name = format!("{symbol}\0");
            // SAFETY: `T` is the signature `cupti_activity.h`/`cupti_result.h`/`cupti_version.h`
            // declare for `symbol` (the typedefs above); the library stays loaded while the pointer
            // is used (it is leaked once a Cupti is made, dropped otherwise before any call).
            match unsafe { lib.get::<T>(name.as_bytes()) } {
                Ok(s) => Ok(*s),
                Err(e) => Err(CuptiError::MissingSymbol { symbol, library: path.to_string(), detail: error_chain(&e) }),
            }
        }
        Ok(Api {
            get_version: get(lib, path, "cuptiGetVersion")?,
            register_callbacks: get(lib, path, "cuptiActivityRegisterCallbacks")?,
            enable: get(lib, path, "cuptiActivityEnable")?,
            disable: get(lib, path, "cuptiActivityDisable")?,
            flush_all: get(lib, path, "cuptiActivityFlushAll")?,
            get_next_record: get(lib, path, "cuptiActivityGetNextRecord")?,
            get_timestamp: get(lib, path, "cuptiGetTimestamp")?,
            get_result_string: get(lib, path, "cuptiGetResultString")?,
            get_num_dropped_records: get(lib, path, "cuptiActivityGetNumDroppedRecords").ok(),
        })
    }

    /// `cuptiGetResultString` for `code`, or a fallback naming the code.
    fn result_string(&self, code: CuptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: writes one pointer; CUPTI returns a static NUL-terminated string for any code.
        let rc = unsafe { (self.get_result_string)(code, &mut p) };
        if rc.is_success() && !p.is_null() {
            // SAFETY: non-null pointer to CUPTI's static NUL-terminated string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            format!("no description (cuptiGetResultString returned {rc})")
        }
    }

    fn check(&self, call: &'static str, rc: CuptiResult) -> Result<(), CuptiError> {
        if rc.is_success() {
            Ok(())
        } else {
            Err(CuptiError::Call { call, code: rc, text: self.result_string(rc) })
        }
    }
}

/// An activity track a caller can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Track {
    /// Kernel executions (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`).
    Kernels,
    /// Memory copies (`CUPTI_ACTIVITY_KIND_MEMCPY`).
    Memcpy,
    /// Memory sets (`CUPTI_ACTIVITY_KIND_MEMSET`).
    Memset,
    /// Compute-engine context switches (`CUPTI_ACTIVITY_KIND_COMPUTE_ENGINE_CTX_SWITCH`, CUPTI
    /// 13.1 on, not on MIG or vGPU).
    ContextSwitch,
}

impl Track {
    /// Every track, in display order.
    pub const ALL: [Track; 4] = [Track::Kernels, Track::Memcpy, Track::Memset, Track::ContextSwitch];

    /// The `CUpti_ActivityKind` enabled for this track.
    pub fn raw_kind(self) -> u32 {
        match self {
            Track::Kernels => kind::CONCURRENT_KERNEL,
            Track::Memcpy => kind::MEMCPY,
            Track::Memset => kind::MEMSET,
            Track::ContextSwitch => kind::COMPUTE_ENGINE_CTX_SWITCH,
        }
    }

    /// The C name of [`Track::raw_kind`].
    pub fn kind_name(self) -> &'static str {
        match self {
            Track::Kernels => "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
            Track::Memcpy => "CUPTI_ACTIVITY_KIND_MEMCPY",
            Track::Memset => "CUPTI_ACTIVITY_KIND_MEMSET",
            Track::ContextSwitch => "CUPTI_ACTIVITY_KIND_COMPUTE_ENGINE_CTX_SWITCH",
        }
    }
}

/// Whether a [`Track`] is being collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// `cuptiActivityEnable` succeeded (now or by an earlier call of this [`Cupti`]).
    Enabled,
    /// This CUPTI or GPU does not provide the kind; the text says why (for the trace).
    NotProvided(String),
}

/// Phase of a compute-engine context switch (`CUpti_ComputeEngineCtxSwitchOperationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwitchPhase {
    /// `CUPTI_COMPUTE_ENGINE_CTX_SWITCH_OPERATION_START` (1): the context starts switching in.
    Start,
    /// `CUPTI_COMPUTE_ENGINE_CTX_SWITCH_OPERATION_END` (2).
    End,
    /// Any other value.
    Other(u32),
}

/// What a record is, with the fields of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivityKind {
    /// A kernel execution.
    Kernel,
    /// A memory copy of `bytes` bytes; `copy_kind` is `"HtoD"`, `"DtoH"`, `"DtoD"`, `"HtoH"`,
    /// `"PtoP"`, `"HtoA"`, `"AtoH"`, `"AtoA"`, `"AtoD"`, `"DtoA"` or `"unknown"`.
    Memcpy {
        /// Bytes copied.
        bytes: u64,
        /// Direction (`CUpti_ActivityMemcpyKind`, short form).
        copy_kind: &'static str,
    },
    /// A memory set of `bytes` bytes.
    Memset {
        /// Bytes set.
        bytes: u64,
    },
    /// A compute-engine context switch event (a point in time: `start_ns == end_ns`).
    ContextSwitch {
        /// Start or end of the switch.
        phase: SwitchPhase,
    },
    /// A record of another `CUpti_ActivityKind` (its value); only kind and nothing else is read.
    Other(u32),
}

/// The short name of a `CUpti_ActivityMemcpyKind` value.
pub fn copy_kind_name(raw: u8) -> &'static str {
    match raw {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => "unknown",
    }
}

/// Value of an id CUPTI did not give (context switches have no device, stream or correlation).
pub const NO_ID: u32 = u32::MAX;

/// One activity record, copied out of CUPTI's buffer (plain data).
///
/// Times are CUPTI timestamps in ns ([`Cupti::timestamp_ns`] gives the same clock now, to align
/// with the host clock). Ids are CUPTI's (`deviceId` is the CUDA device ordinal; `contextId` and
/// `streamId` are CUPTI's process-unique ids, not driver handles); [`NO_ID`] where the record has
/// none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// What the record is.
    pub kind: ActivityKind,
    /// The kernel's name (for kernels, on CUPTI versions whose layout was verified), else `None`.
    pub name: Option<String>,
    /// Start, ns (CUPTI clock).
    pub start_ns: u64,
    /// End, ns (CUPTI clock).
    pub end_ns: u64,
    /// `deviceId`.
    pub device_id: u32,
    /// `contextId`.
    pub context_id: u32,
    /// `streamId`.
    pub stream_id: u32,
    /// `correlationId`: equal to that of the driver API call that launched the work.
    pub correlation_id: u32,
}

/// What the parser may read, decided from the CUPTI version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Read the kernel `name` pointer ([`name_offset_verified`]).
    pub kernel_name: bool,
    /// Records of kind 57 are context switches (CUPTI ≥ 13.1, [`CTX_SWITCH_MIN_VERSION`]).
    pub context_switch: bool,
}

impl ParseOptions {
    /// The options for CUPTI API version `api_version`.
    pub fn for_version(api_version: u32) -> ParseOptions {
        ParseOptions {
            kernel_name: name_offset_verified(api_version),
            context_switch: (CTX_SWITCH_MIN_VERSION..1_000_000).contains(&api_version),
        }
    }
}

/// A parsed record and the address of its kernel name (0 when none or not read); the name is
/// read by the caller while the buffer is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRecord {
    /// The record, `name` still `None`.
    pub activity: Activity,
    /// `name` pointer of a kernel record (0 when absent or not read).
    pub name_addr: usize,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

fn usize_at(b: &[u8], o: usize) -> Option<usize> {
    const N: usize = std::mem::size_of::<usize>();
    Some(usize::from_ne_bytes(b.get(o..o + N)?.try_into().ok()?))
}

/// Parses the record at the start of `bytes` (the record and anything after it, up to the end
/// of the buffer's valid data) at the offsets of [`offsets`]. `None` when `bytes` is too short
/// for the record's kind. Never panics.
pub fn parse_record(bytes: &[u8], opts: ParseOptions) -> Option<ParsedRecord> {
    use offsets::*;
    let raw_kind = u32_at(bytes, KIND)?;
    let (activity, name_addr) = match raw_kind {
        kind::KERNEL | kind::CONCURRENT_KERNEL => {
            let name_addr = if opts.kernel_name { usize_at(bytes, KERNEL_NAME)? } else { 0 };
            let a = Activity {
                kind: ActivityKind::Kernel,
                name: None,
                start_ns: u64_at(bytes, KERNEL_START)?,
                end_ns: u64_at(bytes, KERNEL_END)?,
                device_id: u32_at(bytes, KERNEL_DEVICE_ID)?,
                context_id: u32_at(bytes, KERNEL_CONTEXT_ID)?,
                stream_id: u32_at(bytes, KERNEL_STREAM_ID)?,
                correlation_id: u32_at(bytes, KERNEL_CORRELATION_ID)?,
            };
            (a, name_addr)
        }
        kind::MEMCPY | kind::MEMSET => {
            let bytes_moved = u64_at(bytes, MEM_BYTES)?;
            let k = if raw_kind == kind::MEMCPY {
                ActivityKind::Memcpy { bytes: bytes_moved, copy_kind: copy_kind_name(*bytes.get(MEMCPY_COPY_KIND)?) }
            } else {
                ActivityKind::Memset { bytes: bytes_moved }
            };
            let a = Activity {
                kind: k,
                name: None,
                start_ns: u64_at(bytes, MEM_START)?,
                end_ns: u64_at(bytes, MEM_END)?,
                device_id: u32_at(bytes, MEM_DEVICE_ID)?,
                context_id: u32_at(bytes, MEM_CONTEXT_ID)?,
                stream_id: u32_at(bytes, MEM_STREAM_ID)?,
                correlation_id: u32_at(bytes, MEM_CORRELATION_ID)?,
            };
            (a, 0)
        }
        kind::COMPUTE_ENGINE_CTX_SWITCH if opts.context_switch => {
            let t = u64_at(bytes, SWITCH_TIMESTAMP)?;
            let phase = match u32_at(bytes, SWITCH_OPERATION)? {
                1 => SwitchPhase::Start,
                2 => SwitchPhase::End,
                other => SwitchPhase::Other(other),
            };
            let a = Activity {
                kind: ActivityKind::ContextSwitch { phase },
                name: None,
                start_ns: t,
                end_ns: t,
                device_id: NO_ID,
                context_id: u32_at(bytes, SWITCH_CONTEXT_ID)?,
                stream_id: NO_ID,
                correlation_id: NO_ID,
            };
            (a, 0)
        }
        other => {
            let a = Activity {
                kind: ActivityKind::Other(other),
                name: None,
                start_ns: 0,
                end_ns: 0,
                device_id: NO_ID,
                context_id: NO_ID,
                stream_id: NO_ID,
                correlation_id: NO_ID,
            };
            (a, 0)
        }
    };
    Some(ParsedRecord { activity, name_addr })
}

/// Reads the NUL-terminated kernel name at `addr` (`None` for 0).
///
/// # Safety
/// `addr` is 0 or points to a NUL-terminated string that stays valid during the call (CUPTI's
/// kernel name, valid while the record's buffer is being processed).
pub unsafe fn read_name(addr: usize) -> Option<String> {
    if addr == 0 {
        return None;
    }
    // SAFETY: the caller promises a live NUL-terminated string at `addr`.
    Some(unsafe { CStr::from_ptr(addr as *const c_char) }.to_string_lossy().into_owned())
}

/// What the buffer callbacks share with the [`Cupti`] handle.
struct Shared {
    /// `cuptiActivityGetNextRecord` of the loaded CUPTI (set before callbacks are registered).
    next_record: Option<GetNextRecordFn>,
    /// How to read records of this CUPTI version.
    opts: ParseOptions,
    /// Records completed and not yet taken by [`Cupti::flush`].
    records: Vec<Activity>,
    /// Records the parser could not read (too short for their kind) or buffers CUPTI reported
    /// corrupt, since the last [`Cupti::open`].
    unparsed: u64,
    /// Buffers that could not be allocated (CUPTI drops their records).
    failed_allocations: u64,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    next_record: None,
    opts: ParseOptions { kernel_name: false, context_switch: false },
    records: Vec::new(),
    unparsed: 0,
    failed_allocations: 0,
});

/// Set while a [`Cupti`] exists.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// The shared state, also after a panic elsewhere poisoned the lock (its data stays consistent:
/// every update is a single push, extend or assignment).
fn shared() -> MutexGuard<'static, Shared> {
    SHARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// CUPTI's `bufferRequested` callback: hands CUPTI an empty [`BUFFER_BYTES`] buffer, 8-byte
/// aligned, with no record limit. On allocation failure it hands out none (CUPTI then drops the
/// records and counts them as dropped). Never unwinds.
///
/// # Safety
/// Called by CUPTI with writable `buffer`, `size` and `max_num_records`.
pub unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_num_records: *mut usize) {
    if buffer.is_null() || size.is_null() || max_num_records.is_null() {
        return;
    }
    // SAFETY: BUFFER_LAYOUT has a non-zero size.
    let p = unsafe { alloc(BUFFER_LAYOUT) };
    // SAFETY: the three out-pointers are non-null (checked) and writable (CUPTI's contract).
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { BUFFER_BYTES };
        *max_num_records = 0;
    }
    if p.is_null() {
        shared().failed_allocations += 1;
    }
}

/// CUPTI's `bufferCompleted` callback: parses the `valid_size` bytes of records into the shared
/// list, then frees the buffer (allocated by [`buffer_requested`]). Never unwinds.
///
/// # Safety
/// Called by CUPTI with a buffer [`buffer_requested`] allocated (or null) whose first
/// `valid_size` bytes hold records.
pub unsafe extern "C" fn buffer_completed(_ctx: *mut c_void, _stream_id: u32, buffer: *mut u8, _size: usize, valid_size: usize) {
    if buffer.is_null() {
        return;
    }
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CUPTI's contract: `buffer` holds `valid_size` bytes of records and is alive
        // until we free it below.
        unsafe { drain(buffer, valid_size.min(BUFFER_BYTES)) }
    }));
    if parsed.is_err() {
        shared().unparsed += 1;
    }
    // SAFETY: every buffer CUPTI completes came from `buffer_requested`, which allocated it with
    // BUFFER_LAYOUT; it is freed exactly once, here.
    unsafe { dealloc(buffer, BUFFER_LAYOUT) };
}

/// Walks the records of one completed buffer with `cuptiActivityGetNextRecord`.
///
/// # Safety
/// `buffer` holds `valid` bytes of CUPTI activity records and stays alive during the call.
unsafe fn drain(buffer: *mut u8, valid: usize) {
    let (next, opts) = {
        let s = shared();
        (s.next_record, s.opts)
    };
    let Some(next) = next else { return };
    let mut out = Vec::new();
    let mut unparsed = 0u64;
    let mut rec: *mut c_void = std::ptr::null_mut();
    loop {
        // SAFETY: `buffer`/`valid` describe the completed buffer; `rec` is null on the first call
        // and the previous record after (the iteration protocol of cuptiActivityGetNextRecord).
        let rc = unsafe { next(buffer, valid, &mut rec) };
        if !rc.is_success() {
            if rc != CuptiResult::ERROR_MAX_LIMIT_REACHED {
                unparsed += 1; // CUPTI_ERROR_INVALID_KIND: the rest of the buffer is corrupt
            }
            break;
        }
        let offset = (rec as usize).wrapping_sub(buffer as usize);
        if rec.is_null() || offset >= valid {
            unparsed += 1;
            break;
        }
        // SAFETY: the record starts `offset` bytes into the buffer's `valid` bytes (checked), so
        // the slice up to the end of the valid data is inside the live buffer.
        let bytes = unsafe { std::slice::from_raw_parts(rec as *const u8, valid - offset) };
        match parse_record(bytes, opts) {
            Some(p) => {
                let mut a = p.activity;
                // SAFETY: `name_addr` was read at the kernel record's `name` offset, verified for
                // this CUPTI version (ParseOptions::kernel_name); CUPTI keeps the string alive
                // while the buffer is being completed.
                a.name = unsafe { read_name(p.name_addr) };
                out.push(a);
            }
            None => unparsed += 1,
        }
    }
    let mut s = shared();
    s.records.append(&mut out);
    s.unparsed += unparsed;
}

/// The process's CUPTI activity collection (at most one at a time).
///
/// `open` → [`Cupti::enable`] the tracks wanted → run GPU work → [`Cupti::flush`] (as often as
/// wanted) → drop. Not tied to a CUDA context: CUPTI records work of every context of the
/// process.
pub struct Cupti {
    api: Api,
    path: String,
    version: u32,
    /// Raw kinds this handle enabled, disabled again on drop.
    enabled: Mutex<Vec<u32>>,
}

impl fmt::Debug for Cupti {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cupti").field("path", &self.path).field("version", &self.version).finish_non_exhaustive()
    }
}

impl Cupti {
    /// Opens CUPTI: the path in `NBODY_CUPTI_LIBRARY` if set (and only it), else
    /// [`DEFAULT_LIBRARY_NAMES`], then `extras/CUPTI/lib64` and `lib64` of `$CUDA_HOME`,
    /// `$CUDA_PATH` and `/usr/local/cuda` ([`candidates_from`]); resolves its functions, reads
    /// `cuptiGetVersion` and registers the buffer callbacks. Enables nothing yet.
    ///
    /// # Errors
    /// [`CuptiError::LibraryNotFound`] listing every path tried with its `dlerror`;
    /// [`CuptiError::MissingSymbol`]; [`CuptiError::Busy`] while another [`Cupti`] exists;
    /// [`CuptiError::Call`] from `cuptiGetVersion` or `cuptiActivityRegisterCallbacks` (for
    /// example `CUPTI_ERROR_NOT_INITIALIZED` when this CUPTI is newer than the driver).
    #[doc(alias = "cuptiActivityRegisterCallbacks")]
    pub fn open() -> Result<Cupti, CuptiError> {
        let env = std::env::var_os(LIBRARY_ENV);
        Self::open_with(env.as_deref(), &toolkit_roots())
    }

    /// As [`Cupti::open`] with `env` standing for the value of `NBODY_CUPTI_LIBRARY` and
    /// `toolkit_roots` for [`toolkit_roots`] (so tests need not set environment variables).
    ///
    /// # Errors
    /// As [`Cupti::open`].
    pub fn open_with(env: Option<&OsStr>, toolkit_roots: &[PathBuf]) -> Result<Cupti, CuptiError> {
        let (paths, from_env) = candidates_from(env, toolkit_roots);
        Self::open_paths(&paths, from_env)
    }

    /// As [`Cupti::open`], trying exactly `candidates` in order.
    ///
    /// # Errors
    /// As [`Cupti::open`].
    pub fn open_candidates(candidates: &[PathBuf]) -> Result<Cupti, CuptiError> {
        Self::open_paths(candidates, false)
    }

    fn open_paths(candidates: &[PathBuf], from_env: bool) -> Result<Cupti, CuptiError> {
        let (lib, path) = load_first(candidates).map_err(|tried| CuptiError::LibraryNotFound { tried, from_env })?;
        let api = Api::resolve(&lib, &path)?;
        if IN_USE.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(CuptiError::Busy);
        }
        match Self::start(api) {
            Ok(version) => {
                // CUPTI may now hold pointers into the driver and the driver into CUPTI: never
                // unload it (the `api` pointers stay valid for the process).
                std::mem::forget(lib);
                Ok(Cupti { api, path, version, enabled: Mutex::new(Vec::new()) })
            }
            Err(e) => {
                IN_USE.store(false, Ordering::Release);
                // Callbacks may have been registered before the failure: keep CUPTI loaded.
                std::mem::forget(lib);
                Err(e)
            }
        }
    }

    fn start(api: Api) -> Result<u32, CuptiError> {
        let mut version = 0u32;
        // SAFETY: writes one u32.
        api.check("cuptiGetVersion", unsafe { (api.get_version)(&mut version) })?;
        {
            let mut s = shared();
            s.next_record = Some(api.get_next_record);
            s.opts = ParseOptions::for_version(version);
            s.records.clear();
            s.unparsed = 0;
            s.failed_allocations = 0;
        }
        // SAFETY: both callbacks have the CUpti_BuffersCallbackRequestFunc /
        // CUpti_BuffersCallbackCompleteFunc signatures, never unwind, and live for the process.
        api.check("cuptiActivityRegisterCallbacks", unsafe { (api.register_callbacks)(buffer_requested, buffer_completed) })?;
        Ok(version)
    }

    /// The path or name CUPTI was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `cuptiGetVersion`: the CUPTI API version (18–28 for CUDA 11.8–12.9; `xxyyzz` from CUDA
    /// 13.0 on, e.g. 130000 or 130001 for 13.0).
    #[doc(alias = "cuptiGetVersion")]
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Whether kernel names are read on this CUPTI ([`name_offset_verified`]); when false,
    /// kernel records come without [`Activity::name`].
    pub fn kernel_names(&self) -> bool {
        name_offset_verified(self.version)
    }

    /// Enables collection of each of `tracks` (idempotent: a track this handle already enabled
    /// is [`Availability::Enabled`] without a new call). A track this CUPTI or GPU does not
    /// provide (`CUPTI_ERROR_NOT_COMPATIBLE`, `CUPTI_ERROR_NOT_SUPPORTED`,
    /// `CUPTI_ERROR_INVALID_KIND`, `CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED`; for
    /// [`Track::ContextSwitch`], which is optional by nature, any error, and CUPTI older than
    /// 13.1 without asking) is [`Availability::NotProvided`] with the reason. Returns one entry
    /// per track, in order.
    ///
    /// # Errors
    /// Any other `cuptiActivityEnable` failure of the other tracks (e.g. `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`,
    /// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED` when a profiler is attached); tracks
    /// enabled before the failure stay enabled (and are disabled on drop).
    #[doc(alias = "cuptiActivityEnable")]
    pub fn enable(&self, tracks: &[Track]) -> Result<Vec<(Track, Availability)>, CuptiError> {
        let mut enabled = self.enabled.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::with_capacity(tracks.len());
        for &t in tracks {
            let raw = t.raw_kind();
            if enabled.contains(&raw) {
                out.push((t, Availability::Enabled));
                continue;
            }
            if t == Track::ContextSwitch && !ParseOptions::for_version(self.version).context_switch {
                out.push((
                    t,
                    Availability::NotProvided(format!(
                        "CUPTI API version {} predates {} (added in CUDA 13.1, API version {CTX_SWITCH_MIN_VERSION})",
                        self.version,
                        t.kind_name()
                    )),
                ));
                continue;
            }
            // SAFETY: takes a CUpti_ActivityKind value; CUPTI rejects kinds it does not know.
            let rc = unsafe { (self.api.enable)(raw) };
            if rc.is_success() {
                enabled.push(raw);
                out.push((t, Availability::Enabled));
            } else if rc.means_not_provided() || t == Track::ContextSwitch {
                let text = self.api.result_string(rc);
                out.push((t, Availability::NotProvided(format!("cuptiActivityEnable({}) returned {rc}: {text}", t.kind_name()))));
            } else {
                self.api.check("cuptiActivityEnable", rc)?;
            }
        }
        Ok(out)
    }

    /// Flushes every buffer (`cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`, which
    /// completes them through the callback on this thread or CUPTI's) and returns the records
    /// collected since the last flush, in CUPTI's order (per buffer; not sorted by time).
    /// Records of work still running on the GPU arrive in a later flush: synchronise first.
    ///
    /// # Errors
    /// `cuptiActivityFlushAll`'s error; the records collected so far stay for the next flush.
    #[doc(alias = "cuptiActivityFlushAll")]
    pub fn flush(&self) -> Result<Vec<Activity>, CuptiError> {
        // SAFETY: takes a flags value; the callbacks it runs only touch SHARED.
        self.api.check("cuptiActivityFlushAll", unsafe { (self.api.flush_all)(ACTIVITY_FLAG_FLUSH_FORCED) })?;
        Ok(std::mem::take(&mut shared().records))
    }

    /// The CUPTI timestamp now, ns: the clock of [`Activity::start_ns`]/[`Activity::end_ns`].
    /// Sample it next to `Instant::now()` to place records on the host timeline. 0 if CUPTI
    /// reports an error (it only does for a NULL argument, which this never passes).
    #[doc(alias = "cuptiGetTimestamp")]
    pub fn timestamp_ns(&self) -> u64 {
        let mut t = 0u64;
        // SAFETY: writes one u64.
        let rc = unsafe { (self.api.get_timestamp)(&mut t) };
        if rc.is_success() {
            t
        } else {
            0
        }
    }

    /// Records CUPTI dropped for want of buffer space (`cuptiActivityGetNumDroppedRecords` for the
    /// global queue); `Ok(None)` when this CUPTI lacks the function.
    ///
    /// # Errors
    /// The function's error.
    #[doc(alias = "cuptiActivityGetNumDroppedRecords")]
    pub fn dropped_records(&self) -> Result<Option<usize>, CuptiError> {
        let Some(f) = self.api.get_num_dropped_records else { return Ok(None) };
        let mut n = 0usize;
        // SAFETY: a NULL context and stream 0 select the global queue; writes one size_t.
        self.api.check("cuptiActivityGetNumDroppedRecords", unsafe { f(std::ptr::null_mut(), 0, &mut n) })?;
        Ok(Some(n))
    }

    /// Records this module could not read (too short for their kind, or a corrupt buffer), and
    /// buffers it could not allocate, since [`Cupti::open`].
    pub fn unparsed_records(&self) -> (u64, u64) {
        let s = shared();
        (s.unparsed, s.failed_allocations)
    }
}

impl Drop for Cupti {
    /// Disables the kinds this handle enabled, flushes, discards the records nobody took, and
    /// frees the process-wide slot for the next [`Cupti::open`]. CUPTI stays loaded.
    fn drop(&mut self) {
        let enabled = std::mem::take(&mut *self.enabled.lock().unwrap_or_else(PoisonError::into_inner));
        for raw in enabled {
            // SAFETY: disables a kind this handle enabled; errors are ignored on teardown.
            let _ = unsafe { (self.api.disable)(raw) };
        }
        // SAFETY: as in `flush`.
        let _ = unsafe { (self.api.flush_all)(ACTIVITY_FLAG_FLUSH_FORCED) };
        shared().records.clear();
        IN_USE.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// A zeroed record of `len` bytes (the parser reads bytes, so alignment does not matter).
    fn record(len: usize) -> Vec<u8> {
        vec![0u8; len]
    }

    fn put_u32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn put_u64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
    }

    const CUDA13: ParseOptions = ParseOptions { kernel_name: true, context_switch: false };

    /// A `CUpti_ActivityKernel10` (216 bytes in CUDA 13.0) with the fields this module reads.
    fn kernel_record(name: &CString) -> Vec<u8> {
        let mut b = record(216);
        put_u32(&mut b, 0, kind::CONCURRENT_KERNEL);
        put_u64(&mut b, 16, 1_000_000);
        put_u64(&mut b, 24, 1_004_500);
        put_u64(&mut b, 32, 1_004_600); // completed: not read
        put_u32(&mut b, 40, 0);
        put_u32(&mut b, 44, 1);
        put_u32(&mut b, 48, 13);
        put_u32(&mut b, 52, 256); // gridX: not read
        put_u32(&mut b, 92, 77);
        put_u64(&mut b, 104, name.as_ptr() as usize as u64);
        b
    }

    #[test]
    fn kernel_record_at_the_cuda13_offsets() {
        let name = CString::new("nbody_touch").unwrap();
        let b = kernel_record(&name);
        let p = parse_record(&b, CUDA13).expect("a full kernel record parses");
        assert_eq!(p.activity.kind, ActivityKind::Kernel);
        assert_eq!((p.activity.start_ns, p.activity.end_ns), (1_000_000, 1_004_500));
        assert_eq!((p.activity.device_id, p.activity.context_id, p.activity.stream_id), (0, 1, 13));
        assert_eq!(p.activity.correlation_id, 77);
        assert_eq!(p.name_addr, name.as_ptr() as usize);
        // SAFETY: name_addr points into `name`, alive here.
        assert_eq!(unsafe { read_name(p.name_addr) }.as_deref(), Some("nbody_touch"));
    }

    #[test]
    fn unverified_version_reads_times_but_not_the_name() {
        let name = CString::new("k").unwrap();
        let b = kernel_record(&name);
        let p = parse_record(&b, ParseOptions::for_version(140_000)).unwrap();
        assert_eq!(p.name_addr, 0);
        assert_eq!((p.activity.start_ns, p.activity.end_ns), (1_000_000, 1_004_500));
        // SAFETY: 0 is never dereferenced.
        assert_eq!(unsafe { read_name(0) }, None);
    }

    #[test]
    fn memcpy_and_memset_records() {
        let mut b = record(80); // CUpti_ActivityMemcpy6
        put_u32(&mut b, 0, kind::MEMCPY);
        b[4] = 1; // HtoD
        put_u64(&mut b, 8, 4096);
        put_u64(&mut b, 16, 500);
        put_u64(&mut b, 24, 900);
        put_u32(&mut b, 32, 0);
        put_u32(&mut b, 36, 1);
        put_u32(&mut b, 40, 7);
        put_u32(&mut b, 44, 42);
        let p = parse_record(&b, CUDA13).unwrap();
        assert_eq!(p.activity.kind, ActivityKind::Memcpy { bytes: 4096, copy_kind: "HtoD" });
        assert_eq!((p.activity.start_ns, p.activity.end_ns, p.activity.stream_id, p.activity.correlation_id), (500, 900, 7, 42));
        b[4] = 2;
        assert_eq!(parse_record(&b, CUDA13).unwrap().activity.kind, ActivityKind::Memcpy { bytes: 4096, copy_kind: "DtoH" });
        b[4] = 8;
        assert_eq!(parse_record(&b, CUDA13).unwrap().activity.kind, ActivityKind::Memcpy { bytes: 4096, copy_kind: "DtoD" });
        put_u32(&mut b, 0, kind::MEMSET);
        assert_eq!(parse_record(&b, CUDA13).unwrap().activity.kind, ActivityKind::Memset { bytes: 4096 });
    }

    #[test]
    fn context_switch_records_only_where_cupti_has_them() {
        let mut b = record(24);
        put_u32(&mut b, 0, kind::COMPUTE_ENGINE_CTX_SWITCH);
        put_u32(&mut b, 4, 3);
        put_u64(&mut b, 8, 123_456);
        put_u32(&mut b, 16, 1);
        let p = parse_record(&b, ParseOptions::for_version(130_100)).unwrap();
        assert_eq!(p.activity.kind, ActivityKind::ContextSwitch { phase: SwitchPhase::Start });
        assert_eq!((p.activity.start_ns, p.activity.end_ns, p.activity.context_id), (123_456, 123_456, 3));
        // CUDA 13.0's CUPTI has no kind 57: read as an unknown kind.
        let p = parse_record(&b, ParseOptions::for_version(130_001)).unwrap();
        assert_eq!(p.activity.kind, ActivityKind::Other(57));
    }

    #[test]
    fn short_records_are_refused_without_panicking() {
        let name = CString::new("k").unwrap();
        let b = kernel_record(&name);
        for len in [0, 3, 20, 100, 111] {
            assert!(parse_record(&b[..len], CUDA13).is_none(), "{len} bytes");
        }
        assert!(parse_record(&b[..112], CUDA13).is_some());
        assert!(parse_record(&b[..96], ParseOptions { kernel_name: false, context_switch: false }).is_some());
    }

    #[test]
    fn versions_and_candidates() {
        assert!(name_offset_verified(18) && name_offset_verified(28));
        assert!(name_offset_verified(130_000) && name_offset_verified(130_001) && name_offset_verified(130_201));
        assert!(!name_offset_verified(17) && !name_offset_verified(130_300));
        assert!(!ParseOptions::for_version(130_001).context_switch && ParseOptions::for_version(130_100).context_switch);
        assert!(!ParseOptions::for_version(28).context_switch);

        let (c, env) = candidates_from(Some(OsStr::new("/x/libcupti.so")), &[PathBuf::from("/usr/local/cuda")]);
        assert!(env);
        assert_eq!(c, [PathBuf::from("/x/libcupti.so")]);
        let roots = [PathBuf::from("/opt/cuda"), PathBuf::new(), PathBuf::from("/opt/cuda"), PathBuf::from("/usr/local/cuda")];
        let (c, env) = candidates_from(Some(OsStr::new("")), &roots);
        assert!(!env);
        assert_eq!(&c[..3], [PathBuf::from("libcupti.so"), PathBuf::from("libcupti.so.13"), PathBuf::from("libcupti.so.12")]);
        assert_eq!(c[3], PathBuf::from("/opt/cuda/extras/CUPTI/lib64/libcupti.so"));
        assert!(c.contains(&PathBuf::from("/usr/local/cuda/lib64/libcupti.so.13")));
        assert_eq!(c.len(), 3 + 2 * 2 * 2, "duplicate and empty roots are skipped");
    }

    #[test]
    fn result_codes_read_as_not_provided() {
        assert!(CuptiResult::ERROR_NOT_COMPATIBLE.means_not_provided());
        assert!(CuptiResult::ERROR_NOT_SUPPORTED.means_not_provided());
        assert!(CuptiResult::ERROR_INVALID_KIND.means_not_provided());
        assert!(!CuptiResult::ERROR_INSUFFICIENT_PRIVILEGES.means_not_provided());
        assert_eq!(CuptiResult(14).to_string(), "CUPTI_ERROR_NOT_COMPATIBLE (14)");
        assert_eq!(CuptiResult(5).to_string(), "CUptiResult 5");
    }
}
