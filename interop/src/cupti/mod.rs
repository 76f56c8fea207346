//! CUPTI activity records (kernels, memory copies, memsets and, where this CUPTI and GPU provide
//! them, compute-engine context switches), loaded at run time and optional.
//!
//! CUPTI (`libcupti.so`, shipped with the CUDA toolkit under `extras/CUPTI/lib64`) is a separate
//! library from the driver: this module opens it on its own with `libloading`
//! ([`Cupti::open_with`]: a file the caller names, else [`DEFAULT_LIBRARY_NAMES`], else the toolkit
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

mod buffers;
mod library;
mod records;
mod status;

use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

pub use buffers::{buffer_completed, buffer_requested, BUFFER_BYTES};
pub use library::{candidates_from, locate, toolkit_roots, DEFAULT_LIBRARY_NAMES, TOOLKIT_LIBRARY_DIRS, TOOLKIT_LIBRARY_FILES};
pub use records::{
    copy_kind_name, kind, name_offset_verified, offsets, parse_record, read_name, Activity, ActivityKind, Availability, ParseOptions, ParsedRecord,
    SwitchPhase, Track, ACTIVITY_FLAG_FLUSH_FORCED, CTX_SWITCH_MIN_VERSION, NO_ID,
};
pub use status::{CuptiError, CuptiResult};

use self::buffers::{shared, IN_USE};
use self::library::{load_first, Api};

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
    /// Opens CUPTI: the first of [`DEFAULT_LIBRARY_NAMES`], then `extras/CUPTI/lib64` and `lib64` of `$CUDA_HOME`,
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
        Self::open_with(None, &toolkit_roots())
    }

    /// As [`Cupti::open`], but only `named` (a file name or path) when it is given and not
    /// empty, and `toolkit_roots` in place of [`toolkit_roots`]. An application maps its own
    /// setting (an environment variable, an option) onto `named`.
    ///
    /// # Errors
    /// As [`Cupti::open`].
    pub fn open_with(named: Option<&OsStr>, toolkit_roots: &[PathBuf]) -> Result<Cupti, CuptiError> {
        let (paths, named) = candidates_from(named, toolkit_roots);
        Self::open_paths(&paths, named)
    }

    /// As [`Cupti::open`], trying exactly `candidates` in order.
    ///
    /// # Errors
    /// As [`Cupti::open`].
    pub fn open_candidates(candidates: &[PathBuf]) -> Result<Cupti, CuptiError> {
        Self::open_paths(candidates, false)
    }

    fn open_paths(candidates: &[PathBuf], named: bool) -> Result<Cupti, CuptiError> {
        let (lib, path) = load_first(candidates).map_err(|tried| CuptiError::LibraryNotFound { tried, named })?;
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
