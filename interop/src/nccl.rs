//! NCCL (the NVIDIA Collective Communications Library), loaded at run time and optional: the
//! all-gather that shares the positions between the GPUs of a split step.
//!
//! NCCL is a separate library from the driver, so this module opens it on its own with
//! `libloading` ([`Nccl::open_with`]: a file the caller names, else [`DEFAULT_LIBRARY_NAMES`] on the
//! loader's search path) and resolves its functions by name (NCCL has no `cuGetProcAddress`). A
//! machine without NCCL gets [`NcclError::LibraryNotFound`] listing every name tried; the caller
//! falls back to peer copies (`cuMemcpyPeerAsync`) and says so.
//!
//! # What is used (NCCL API reference, `nccl.h`)
//! - `ncclGetVersion(int*)`: `X·10000 + Y·100 + Z` from 2.9 on (`X·1000 + Y·100 + Z` before).
//! - `ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist)`: one communicator per
//!   CUDA device of this process ("single process version"); a device may appear once only.
//! - `ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream)`: rank *r* receives
//!   every rank's `sendcount` values at offset `i · sendcount`; in place when
//!   `sendbuff == recvbuff + rank · sendcount` (what [`Clique::all_gather_in_place`] does).
//!   Equal counts per rank: the caller pads N to a multiple of the rank count.
//! - `ncclGroupStart` / `ncclGroupEnd`: one thread driving several communicators must issue
//!   their collectives inside one group, or the first call would wait for the others forever.
//! - `ncclCommDestroy`, `ncclGetErrorString`, `ncclGetLastError` (2.13 on, optional).
//!
//! `ncclResult_t` codes are an open newtype ([`NcclResult`]); `ncclDataType_t` values used here
//! are in [`data_type`].
//!
//! # Contexts
//! NCCL runs on the CUDA runtime, which works in each device's **primary** context and switches
//! the calling thread's current context (`cudaSetDevice`) inside these calls. Streams given to
//! it must therefore belong to primary contexts (`Context::primary`), and a caller that relies on
//! a current context makes it current again after a call here.
//!
//! # Lifetime
//! NCCL starts helper threads; the library is never unloaded once opened (as CUPTI).

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::path::PathBuf;
use std::sync::Arc;

use libloading::Library;

use crate::driver::error::{error_chain, tried_list, LibraryAttempt};
use crate::driver::library::{open_first, Candidates};
use crate::safe::memory::{DeviceCopy, DevicePtr};
use crate::safe::stream::Stream;
use crate::sys::CUstream;

/// Library names tried, in order, when no file is named (the loader's search path:
/// `LD_LIBRARY_PATH`, the ld.so cache; Debian/Ubuntu's `libnccl2` package installs `libnccl.so.2`).
pub const DEFAULT_LIBRARY_NAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];

/// An `ncclResult_t` (`nccl.h`), as an open newtype.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclResult(pub c_int);

impl NcclResult {
    /// `ncclSuccess`.
    pub const SUCCESS: NcclResult = NcclResult(0);
    /// `ncclUnhandledCudaError`: a CUDA call inside NCCL failed.
    pub const UNHANDLED_CUDA_ERROR: NcclResult = NcclResult(1);
    /// `ncclSystemError`.
    pub const SYSTEM_ERROR: NcclResult = NcclResult(2);
    /// `ncclInternalError`.
    pub const INTERNAL_ERROR: NcclResult = NcclResult(3);
    /// `ncclInvalidArgument`.
    pub const INVALID_ARGUMENT: NcclResult = NcclResult(4);
    /// `ncclInvalidUsage` (for example the same device twice in `ncclCommInitAll`).
    pub const INVALID_USAGE: NcclResult = NcclResult(5);
    /// `ncclRemoteError`.
    pub const REMOTE_ERROR: NcclResult = NcclResult(6);
    /// `ncclInProgress` (non-blocking communicators only; not used here).
    pub const IN_PROGRESS: NcclResult = NcclResult(7);
}

/// `ncclDataType_t` values (`nccl.h`).
pub mod data_type {
    /// `ncclFloat32`.
    pub const FLOAT32: i32 = 7;
    /// `ncclFloat64`.
    pub const FLOAT64: i32 = 8;
    /// `ncclUint8` (nccl.h `ncclDataType_t`): what [`super::Clique::all_gather_in_place`] moves (an all-gather copies
    /// bits, so any plain-data element goes as its bytes).
    pub const UINT8: i32 = 1;
}

/// Errors of the NCCL binding.
#[derive(Debug, thiserror::Error)]
pub enum NcclError {
    /// No NCCL library could be opened.
    #[error(
        "no NCCL library could be loaded; tried: {}. {}",
        tried_list(.tried),
        if *.named {
            "the file named in place of the search does not load: name libnccl.so.2, or name none"
        } else {
            "Install NCCL (Debian/Ubuntu: the libnccl2 package; or the nvidia-nccl wheel), or open libnccl.so.2 \
             by its path (`Nccl::open_with`)"
        }
    )]
    LibraryNotFound {
        /// Every path or name tried, in order, with the loader's (`dlerror`) message.
        tried: Vec<LibraryAttempt>,
        /// Whether the only candidate was the file the caller named ([`Nccl::open_with`]).
        named: bool,
    },
    /// The library loaded but lacks a required NCCL function.
    #[error("{library} is not a usable NCCL library: {symbol} is missing ({detail}); open libnccl.so.2 instead")]
    MissingSymbol {
        /// The function looked up.
        symbol: &'static str,
        /// The library.
        library: String,
        /// The loader's message.
        detail: String,
    },
    /// An NCCL call failed.
    #[error("{call} failed: ncclResult_t {}: {text}{}", .code.0, if .last.is_empty() { String::new() } else { format!(" ({})", .last) })]
    Call {
        /// The failing NCCL function.
        call: &'static str,
        /// Its `ncclResult_t`.
        code: NcclResult,
        /// `ncclGetErrorString` of the code.
        text: String,
        /// `ncclGetLastError`, where the library has it and says something.
        last: String,
    },
    /// Arguments this binding refuses before calling NCCL.
    #[error("{0}")]
    InvalidArgument(String),
}

impl NcclError {
    /// The `ncclResult_t` of a failed call, else `None`.
    pub fn code(&self) -> Option<NcclResult> {
        match self {
            NcclError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// `ncclComm_t`: an opaque pointer.
type RawComm = *mut c_void;

type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type GetErrorStringFn = unsafe extern "C" fn(NcclResult) -> *const c_char;
type GetLastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;
type CommInitAllFn = unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> NcclResult;
type CommDestroyFn = unsafe extern "C" fn(RawComm) -> NcclResult;
type AllGatherFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, CUstream) -> NcclResult;
type GroupFn = unsafe extern "C" fn() -> NcclResult;

/// The loaded NCCL library: its functions and version. Made by [`Nccl::open`]; shared by the
/// [`Clique`]s made from it.
#[derive(Debug)]
pub struct Nccl {
    get_error_string: GetErrorStringFn,
    get_last_error: Option<GetLastErrorFn>,
    comm_init_all: CommInitAllFn,
    comm_destroy: CommDestroyFn,
    all_gather: AllGatherFn,
    group_start: GroupFn,
    group_end: GroupFn,
    path: String,
    version: i32,
}

/// The candidates [`Nccl::open_with`] tries for `named`: that path alone when given and not
/// empty (and `true`), else [`DEFAULT_LIBRARY_NAMES`] (and `false`).
pub fn candidates_from(named: Option<&OsStr>) -> (Vec<PathBuf>, bool) {
    let c = Candidates::new(named, DEFAULT_LIBRARY_NAMES, []);
    (c.paths, c.named)
}

impl Nccl {
    /// Opens NCCL: the first of [`DEFAULT_LIBRARY_NAMES`] that loads; resolves its functions and asks its version.
    ///
    /// # Errors
    /// [`NcclError::LibraryNotFound`] listing every candidate with the loader's message;
    /// [`NcclError::MissingSymbol`]; [`NcclError::Call`] for `ncclGetVersion`.
    pub fn open() -> Result<Arc<Nccl>, NcclError> {
        Self::open_with(None)
    }

    /// As [`Nccl::open`], but only `named` (a file name or path) when it is given and not empty.
    /// An application maps its own setting (an environment variable, an option) onto `named`.
    ///
    /// # Errors
    /// As [`Nccl::open`].
    pub fn open_with(named: Option<&OsStr>) -> Result<Arc<Nccl>, NcclError> {
        let (candidates, named) = candidates_from(named);
        // SAFETY: the candidates are NCCL (or the file the caller named in its place),
        // which is made to be loaded by applications.
        match unsafe { open_first(&candidates) } {
            Ok((lib, path)) => Self::resolve(lib, path),
            Err(tried) => Err(NcclError::LibraryNotFound { tried, named }),
        }
    }

    fn resolve(lib: Library, path: String) -> Result<Arc<Nccl>, NcclError> {
        fn get<T: Copy>(lib: &Library, path: &str, symbol: &'static str) -> Result<T, NcclError> {
            let name = format!("{symbol}\0");
            // SAFETY: `T` is the signature `nccl.h` declares for `symbol` (the typedefs above);
            // the library is never unloaded once a function of it is kept (leaked below).
            match unsafe { lib.get::<T>(name.as_bytes()) } {
                Ok(s) => Ok(*s),
                Err(e) => Err(NcclError::MissingSymbol { symbol, library: path.to_string(), detail: error_chain(&e) }),
            }
        }
        let get_version: GetVersionFn = get(&lib, &path, "ncclGetVersion")?;
        let nccl = Nccl {
            get_error_string: get(&lib, &path, "ncclGetErrorString")?,
            get_last_error: get(&lib, &path, "ncclGetLastError").ok(),
            comm_init_all: get(&lib, &path, "ncclCommInitAll")?,
            comm_destroy: get(&lib, &path, "ncclCommDestroy")?,
            all_gather: get(&lib, &path, "ncclAllGather")?,
            group_start: get(&lib, &path, "ncclGroupStart")?,
            group_end: get(&lib, &path, "ncclGroupEnd")?,
            path,
            version: 0,
        };
        // NCCL's helper threads run its code: keep it loaded for the process.
        std::mem::forget(lib);
        let mut version = 0;
        // SAFETY: writes one int.
        nccl.check("ncclGetVersion", unsafe { get_version(&mut version) }, std::ptr::null_mut())?;
        Ok(Arc::new(Nccl { version, ..nccl }))
    }

    /// The path or name NCCL was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `ncclGetVersion`'s code (22803 for 2.28.3).
    #[doc(alias = "ncclGetVersion")]
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The version as `major.minor.patch` (both encodings of `NCCL_VERSION`).
    pub fn version_string(&self) -> String {
        let v = self.version;
        if v >= 10000 {
            format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
        } else {
            format!("{}.{}.{}", v / 1000, v / 100 % 10, v % 100)
        }
    }

    fn check(&self, call: &'static str, rc: NcclResult, comm: RawComm) -> Result<(), NcclError> {
        if rc == NcclResult::SUCCESS {
            return Ok(());
        }
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: NCCL returns NUL-terminated strings that live at least until the next
                // call on this thread; copied at once.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        // SAFETY: takes any code, returns a static string.
        let t = text(unsafe { (self.get_error_string)(rc) });
        let last = match self.get_last_error {
            // SAFETY: takes a communicator or NULL (the thread's last error).
            Some(f) => text(unsafe { f(comm) }),
            None => String::new(),
        };
        Err(NcclError::Call { call, code: rc, text: if t.is_empty() { "no description".into() } else { t }, last })
    }
}

/// Communicators of one process over several CUDA devices (`ncclCommInitAll`), one rank per
/// device in the order given; destroyed on drop (`ncclCommDestroy`), which the owner does only
/// after synchronising the streams its collectives ran on.
#[derive(Debug)]
pub struct Clique {
    nccl: Arc<Nccl>,
    comms: Vec<RawComm>,
    devices: Vec<i32>,
}

impl Clique {
    /// One communicator per device ordinal of `devices` (rank *r* on `devices[r]`).
    ///
    /// # Errors
    /// [`NcclError::InvalidArgument`] for no device or a device named twice (NCCL allows one
    /// rank per device in a process); NCCL's error (`ncclUnhandledCudaError` when a device
    /// cannot be used, …).
    #[doc(alias = "ncclCommInitAll")]
    pub fn init_all(nccl: &Arc<Nccl>, devices: &[i32]) -> Result<Clique, NcclError> {
        if devices.is_empty() {
            return Err(NcclError::InvalidArgument("ncclCommInitAll needs at least one device".into()));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].contains(d) {
                return Err(NcclError::InvalidArgument(format!(
                    "device {d} is named twice: NCCL takes one rank per device in a process (devices {devices:?})"
                )));
            }
        }
        let n = c_int::try_from(devices.len()).map_err(|_| NcclError::InvalidArgument("too many devices".into()))?;
        let mut comms: Vec<RawComm> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `comms` holds `n` slots for the handles, `devices` `n` ordinals.
        let rc = unsafe { (nccl.comm_init_all)(comms.as_mut_ptr(), n, devices.as_ptr()) };
        nccl.check("ncclCommInitAll", rc, std::ptr::null_mut())?;
        Ok(Clique { nccl: Arc::clone(nccl), comms, devices: devices.to_vec() })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.comms.len()
    }

    /// The device ordinal of each rank.
    pub fn devices(&self) -> &[i32] {
        &self.devices
    }

    /// The library.
    pub fn nccl(&self) -> &Arc<Nccl> {
        &self.nccl
    }

    /// In-place all-gather of plain-data elements `T` (for instance `[f32; 4]`): rank *r*'s
    /// buffer `bufs[r]` (on device `devices()[r]`, at least `ranks · count` elements) sends its
    /// elements `r·count..(r+1)·count`
    /// and receives every other rank's at the same offsets, on `streams[r]` (a stream of that
    /// device's primary context). The calls are enqueued in one `ncclGroupStart`/`ncclGroupEnd`;
    /// each stream holds the complete buffer once its work up to here has run. Afterwards the
    /// calling thread's current context may be another (see the module docs).
    ///
    /// # Errors
    /// [`NcclError::InvalidArgument`] for counts of buffers or streams other than the ranks, or
    /// a buffer shorter than `ranks · count`; NCCL's error.
    #[doc(alias = "ncclAllGather")]
    pub fn all_gather_in_place<T: DeviceCopy>(&self, bufs: &[DevicePtr<'_, T>], count: usize, streams: &[&Stream]) -> Result<(), NcclError> {
        let ranks = self.ranks();
        if bufs.len() != ranks || streams.len() != ranks {
            return Err(NcclError::InvalidArgument(format!(
                "all-gather over {ranks} ranks given {} buffers and {} streams",
                bufs.len(),
                streams.len()
            )));
        }
        let total = count.checked_mul(ranks).ok_or_else(|| NcclError::InvalidArgument("count too large".into()))?;
        if let Some((r, b)) = bufs.iter().enumerate().find(|(_, b)| b.len() < total) {
            return Err(NcclError::InvalidArgument(format!("all-gather of {ranks} × {count} elements: rank {r}'s buffer holds {}", b.len())));
        }
        // Each rank's part as bytes (total · size_of::<T>() fits: the buffers hold that many).
        let bytes = count * std::mem::size_of::<T>();
        // SAFETY: takes no arguments; the group it opens is closed by the ncclGroupEnd below on
        // every path (NCCL's rule for grouped calls).
        self.nccl.check("ncclGroupStart", unsafe { (self.nccl.group_start)() }, std::ptr::null_mut())?;
        let mut first_err = None;
        for (r, (b, s)) in bufs.iter().zip(streams).enumerate() {
            let recv = b.addr();
            let send = recv + (r * bytes) as u64;
            // SAFETY: `recv` is a live device range of ≥ ranks·count elements (checked; the view
            // borrows its owner) on rank r's device, `send` lies inside it at rank r's offset
            // (NCCL's in-place form); `self.comms[r]` is live; the stream is the caller's.
            let rc = unsafe { (self.nccl.all_gather)(send as *const c_void, recv as *mut c_void, bytes, data_type::UINT8, self.comms[r], s.raw()) };
            if let Err(e) = self.nccl.check("ncclAllGather", rc, self.comms[r]) {
                first_err.get_or_insert(e);
            }
        }
        // The group is always closed, so that NCCL is not left inside it.
        // SAFETY: takes no arguments; closes the group opened above (each start has one end).
        let end = self.nccl.check("ncclGroupEnd", unsafe { (self.nccl.group_end)() }, std::ptr::null_mut());
        match first_err {
            Some(e) => Err(e),
            None => end,
        }
    }
}

impl Drop for Clique {
    fn drop(&mut self) {
        for &c in &self.comms {
            // SAFETY: each handle came from ncclCommInitAll and is destroyed once, after its last
            // use: the owner synchronises the streams its collectives ran on before dropping the
            // clique (ncclCommDestroy "frees local resources"; it does not flush work).
            // A failure here has no one to report to; the handle is gone either way.
            let _ = unsafe { (self.nccl.comm_destroy)(c) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_lists_what_was_tried_and_the_remedy() {
        let e = Nccl::open_with(Some(OsStr::new("/nonexistent/libnccl.so.2"))).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("/nonexistent/libnccl.so.2"), "{s}");
        assert!(s.contains("name libnccl.so.2"), "{s}");
    }

    #[test]
    fn default_candidates_are_the_soname_then_the_dev_link() {
        let (c, named) = candidates_from(None);
        assert!(!named);
        assert_eq!(c, vec![PathBuf::from("libnccl.so.2"), PathBuf::from("libnccl.so")]);
        let (c, named) = candidates_from(Some(OsStr::new("")));
        assert!(!named && c.len() == 2, "an empty name is none");
    }

    #[test]
    fn a_library_without_nccl_functions_is_refused_by_name() {
        // libc loads everywhere and has no NCCL symbol.
        let e = Nccl::open_with(Some(OsStr::new("libc.so.6"))).unwrap_err();
        assert!(matches!(e, NcclError::MissingSymbol { symbol: "ncclGetErrorString" | "ncclGetVersion", .. }), "{e}");
    }

    #[test]
    fn versions_read_in_both_encodings() {
        let v = |version| {
            Nccl {
                get_error_string: dummy_str,
                get_last_error: None,
                comm_init_all: dummy_init,
                comm_destroy: dummy_destroy,
                all_gather: dummy_gather,
                group_start: dummy_group,
                group_end: dummy_group,
                path: String::new(),
                version,
            }
            .version_string()
        };
        assert_eq!(v(22803), "2.28.3");
        assert_eq!(v(2708), "2.7.8");
    }

    unsafe extern "C" fn dummy_str(_: NcclResult) -> *const c_char {
        std::ptr::null()
    }
    unsafe extern "C" fn dummy_init(_: *mut RawComm, _: c_int, _: *const c_int) -> NcclResult {
        NcclResult::INVALID_USAGE
    }
    unsafe extern "C" fn dummy_destroy(_: RawComm) -> NcclResult {
        NcclResult::SUCCESS
    }
    unsafe extern "C" fn dummy_gather(_: *const c_void, _: *mut c_void, _: usize, _: c_int, _: RawComm, _: CUstream) -> NcclResult {
        NcclResult::INVALID_USAGE
    }
    unsafe extern "C" fn dummy_group() -> NcclResult {
        NcclResult::SUCCESS
    }
}
