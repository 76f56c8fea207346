//! The activity buffers CUPTI fills, and the two callbacks that hand them out and drain them
//! into the records the [`super::Cupti`] handle collects.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::library::GetNextRecordFn;
use super::records::{parse_record, read_name, Activity, ParseOptions};
use super::status::CuptiResult;

/// Bytes of one activity buffer handed to CUPTI (1 MiB, 8-byte aligned as CUPTI requires).
pub const BUFFER_BYTES: usize = 1 << 20;

/// Alignment CUPTI requires of activity buffers (`ACTIVITY_RECORD_ALIGNMENT`).
const BUFFER_ALIGN: usize = 8;

/// The layout every activity buffer is allocated and freed with.
const BUFFER_LAYOUT: Layout = match Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN) {
    Ok(l) => l,
    Err(_) => panic!("BUFFER_BYTES and BUFFER_ALIGN form a valid layout"),
};

/// What the buffer callbacks share with the [`super::Cupti`] handle.
pub(super) struct Shared {
    /// `cuptiActivityGetNextRecord` of the loaded CUPTI (set before callbacks are registered).
    pub(super) next_record: Option<GetNextRecordFn>,
    /// How to read records of this CUPTI version.
    pub(super) opts: ParseOptions,
    /// Records completed and not yet taken by [`super::Cupti::flush`].
    pub(super) records: Vec<Activity>,
    /// Records the parser could not read (too short for their kind) or buffers CUPTI reported
    /// corrupt, since the last [`super::Cupti::open`].
    pub(super) unparsed: u64,
    /// Buffers that could not be allocated (CUPTI drops their records).
    pub(super) failed_allocations: u64,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    next_record: None,
    opts: ParseOptions { kernel_name: false, context_switch: false },
    records: Vec::new(),
    unparsed: 0,
    failed_allocations: 0,
});

/// Set while a [`super::Cupti`] exists.
pub(super) static IN_USE: AtomicBool = AtomicBool::new(false);

/// The shared state, also after a panic elsewhere poisoned the lock (its data stays consistent:
/// every update is a single push, extend or assignment).
pub(super) fn shared() -> MutexGuard<'static, Shared> {
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
