//! Activity records: the kinds and byte offsets this binding reads (module docs of `cupti`), and
//! [`parse_record`], which turns one record's bytes into an [`Activity`].

use std::ffi::{c_char, CStr};

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
    /// `cuptiActivityEnable` succeeded (now or by an earlier call of this [`super::Cupti`]).
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
/// Times are CUPTI timestamps in ns ([`super::Cupti::timestamp_ns`] gives the same clock now, to align
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
        ParseOptions { kernel_name: name_offset_verified(api_version), context_switch: (CTX_SWITCH_MIN_VERSION..1_000_000).contains(&api_version) }
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
