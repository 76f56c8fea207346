//! Finding and opening the CUPTI library, and its resolved functions ([`Api`]).

use std::ffi::{c_char, c_void, CStr, OsStr};
use std::path::PathBuf;

use libloading::Library;

use super::status::{CuptiError, CuptiResult};
use crate::driver::error::{error_chain, LibraryAttempt};
use crate::driver::library::{open_first, Candidates};

/// Library names tried first, in order, when no file is named (the loader's search path).
pub const DEFAULT_LIBRARY_NAMES: &[&str] = &["libcupti.so", "libcupti.so.13", "libcupti.so.12"];

/// Folders under a CUDA toolkit root that hold `libcupti.so`, tried in order.
pub const TOOLKIT_LIBRARY_DIRS: &[&str] = &["extras/CUPTI/lib64", "lib64"];

/// File names tried in each of [`TOOLKIT_LIBRARY_DIRS`].
pub const TOOLKIT_LIBRARY_FILES: &[&str] = &["libcupti.so", "libcupti.so.13"];

/// The candidates [`super::Cupti::open_with`] tries, in order: `named` alone when it is given and not empty;
/// else [`DEFAULT_LIBRARY_NAMES`], then for each toolkit root (duplicates and empty ones skipped)
/// each of [`TOOLKIT_LIBRARY_DIRS`] × [`TOOLKIT_LIBRARY_FILES`]. The `bool` is true when the list
/// is the named file alone.
pub fn candidates_from(named: Option<&OsStr>, toolkit_roots: &[PathBuf]) -> (Vec<PathBuf>, bool) {
    let mut roots: Vec<&PathBuf> = Vec::new();
    for r in toolkit_roots.iter().filter(|r| !r.as_os_str().is_empty()) {
        if !roots.contains(&r) {
            roots.push(r);
        }
    }
    let under_roots = roots
        .into_iter()
        .flat_map(|root| TOOLKIT_LIBRARY_DIRS.iter().flat_map(move |dir| TOOLKIT_LIBRARY_FILES.iter().map(move |f| root.join(dir).join(f))));
    let c = Candidates::new(named, DEFAULT_LIBRARY_NAMES, under_roots);
    (c.paths, c.named)
}

/// The toolkit roots searched: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`.
pub fn toolkit_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots
}

/// Opens the first of `candidates` that loads, or lists every attempt with its `dlerror`.
pub(super) fn load_first(candidates: &[PathBuf]) -> Result<(Library, String), Vec<LibraryAttempt>> {
    // SAFETY: the candidates are CUPTI (or the file the caller named in its place),
    // which is made to be loaded by tools.
    unsafe { open_first(candidates) }
}

/// The first of `candidates` that loads as a shared library, without resolving or calling
/// anything (for deciding up front whether CUPTI work can run). The library stays loaded, as it
/// would after [`super::Cupti::open`].
///
/// # Errors
/// [`CuptiError::LibraryNotFound`] listing every candidate tried.
pub fn locate(candidates: &[PathBuf]) -> Result<PathBuf, CuptiError> {
    match load_first(candidates) {
        Ok((lib, path)) => {
            std::mem::forget(lib);
            Ok(PathBuf::from(path))
        }
        Err(tried) => Err(CuptiError::LibraryNotFound { tried, named: false }),
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
pub(super) type GetNextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> CuptiResult;
type GetTimestampFn = unsafe extern "C" fn(*mut u64) -> CuptiResult;
type GetResultStringFn = unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult;
type GetNumDroppedRecordsFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult;

/// The resolved CUPTI functions. The library they come from is never unloaded once a [`super::Cupti`]
/// exists (see the module docs), so the pointers stay valid for the process.
#[derive(Clone, Copy)]
pub(super) struct Api {
    pub(super) get_version: GetVersionFn,
    pub(super) register_callbacks: RegisterCallbacksFn,
    pub(super) enable: EnableFn,
    pub(super) disable: EnableFn,
    pub(super) flush_all: FlushAllFn,
    pub(super) get_next_record: GetNextRecordFn,
    pub(super) get_timestamp: GetTimestampFn,
    pub(super) get_result_string: GetResultStringFn,
    pub(super) get_num_dropped_records: Option<GetNumDroppedRecordsFn>,
}

impl Api {
    pub(super) fn resolve(lib: &Library, path: &str) -> Result<Api, CuptiError> {
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
    pub(super) fn result_string(&self, code: CuptiResult) -> String {
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

    pub(super) fn check(&self, call: &'static str, rc: CuptiResult) -> Result<(), CuptiError> {
        if rc.is_success() {
            Ok(())
        } else {
            Err(CuptiError::Call { call, code: rc, text: self.result_string(rc) })
        }
    }
}
