//! Finding and opening the CUDA driver library, and the bootstrap lookups.
//!
//! Only three symbols are looked up in the library directly (habit 3): `cuGetProcAddress_v2`
//! (CUDA ≥ 12.0, with `symbolStatus`), else `cuGetProcAddress` (11.3–11.8, without it), and
//! `cuDriverGetVersion`. Every other function comes through `cuGetProcAddress` with an explicit
//! version; on a driver older than 11.3, which has neither form, the versioned export names of
//! the table are looked up directly instead.

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use libloading::Library;

use crate::driver::error::{error_chain, Error};
use crate::driver::library::{open_first, Candidates};
use crate::sys::*;

/// Library names tried, in order, when no file is named ([`Driver::open`]).
#[cfg(windows)]
pub const DEFAULT_LIBRARY_NAMES: &[&str] = &["nvcuda.dll"];
/// Library names tried, in order, when no file is named ([`Driver::open`]).
#[cfg(not(windows))]
pub const DEFAULT_LIBRARY_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// Default-stream semantics chosen at load time (`cuGetProcAddress` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamSemantics {
    /// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`: the null stream is the legacy default stream.
    Legacy,
    /// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`: stream-ordered functions resolve to their
    /// `_ptsz`/`_ptds` exports and the null stream is the calling thread's default stream.
    PerThread,
}

impl StreamSemantics {
    /// The `cuGetProcAddress` flags value.
    pub fn flags(self) -> u64 {
        match self {
            StreamSemantics::Legacy => CU_GET_PROC_ADDRESS_LEGACY_STREAM,
            StreamSemantics::PerThread => CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
        }
    }
}

impl fmt::Display for StreamSemantics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamSemantics::Legacy => "legacy default stream",
            StreamSemantics::PerThread => "per-thread default stream",
        })
    }
}

/// `PFN_cuGetProcAddress_v12000`.
type GetProcAddressV2 = unsafe extern "system" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut CUdriverProcAddressQueryResult) -> CuResult;
/// `PFN_cuGetProcAddress_v11030`.
type GetProcAddressV1 = unsafe extern "system" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CuResult;
/// `PFN_cuDriverGetVersion_v2020`.
type DriverGetVersion = unsafe extern "system" fn(*mut c_int) -> CuResult;

/// Which bootstrap the driver offers.
#[derive(Clone, Copy)]
enum Bootstrap {
    V2(GetProcAddressV2),
    V1(GetProcAddressV1),
    /// Driver older than 11.3: versioned exports are looked up directly.
    Exports,
}

/// How the entry points of this driver are looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BootstrapKind {
    /// `cuGetProcAddress_v2` (CUDA ≥ 12.0), with `symbolStatus`.
    GetProcAddressV2,
    /// `cuGetProcAddress` (CUDA 11.3–11.8), without `symbolStatus`.
    GetProcAddressV1,
    /// Versioned export names (driver older than 11.3).
    DirectExports,
}

/// Result of one `cuGetProcAddress` query.
#[derive(Debug, Clone, Copy)]
pub struct ProcQuery {
    /// The function's address (0 when not found).
    pub address: usize,
    /// What `cuGetProcAddress` returned.
    pub result: CuResult,
    /// Decoded `symbolStatus`.
    pub status: crate::driver::status::SymbolStatus,
}

/// The opened driver library with its bootstrap functions. Cheap to clone (the library is in an
/// `Arc`); every [`crate::Api`] owns one, so the library outlives all pointers taken from it.
#[derive(Clone)]
pub struct Driver {
    lib: Arc<Library>,
    path: String,
    version: c_int,
    bootstrap: Bootstrap,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver").field("path", &self.path).field("version", &self.version).finish_non_exhaustive()
    }
}

impl Driver {
    /// Opens the driver: the first of [`DEFAULT_LIBRARY_NAMES`] that the system loader finds.
    ///
    /// # Errors
    /// [`Error::LibraryNotFound`] listing every name tried with the loader's message;
    /// [`Error::MissingBootstrap`] when the library lacks `cuDriverGetVersion` or the driver
    /// reports an error for it.
    pub fn open() -> Result<Driver, Error> {
        Self::open_with(None)
    }

    /// Opens the driver from `library` (a file name or path) alone when it is given and not
    /// empty, else as [`Driver::open`]. An application maps its own setting (an environment
    /// variable, a command-line option) onto `library`.
    ///
    /// # Errors
    /// As [`Driver::open`].
    pub fn open_with(library: Option<&std::ffi::OsStr>) -> Result<Driver, Error> {
        let candidates = Candidates::new(library, DEFAULT_LIBRARY_NAMES, []);
        Self::open_candidates(&candidates.paths)
    }

    /// Opens the first of `candidates` that loads, then resolves the bootstrap symbols.
    ///
    /// # Errors
    /// As [`Driver::open`].
    pub fn open_candidates(candidates: &[PathBuf]) -> Result<Driver, Error> {
        // SAFETY: the candidates are the CUDA driver (or the file the caller named in its place),
        // whose initialisers are designed to run in any process.
        match unsafe { open_first(candidates) } {
            Ok((lib, path)) => Self::from_library(lib, path),
            Err(tried) => Err(Error::LibraryNotFound { tried }),
        }
    }

    fn from_library(lib: Library, path: String) -> Result<Driver, Error> {
        // SAFETY: `cuDriverGetVersion` has had this signature since CUDA 2.2 (PFN_cuDriverGetVersion_v2020).
        let get_version: DriverGetVersion = match unsafe { lib.get::<DriverGetVersion>(b"cuDriverGetVersion\0") } {
            Ok(s) => *s,
            Err(e) => return Err(Error::MissingBootstrap { symbol: "cuDriverGetVersion", library: path, detail: error_chain(&e) }),
        };
        let mut version: c_int = 0;
        // SAFETY: writes one int; callable before cuInit.
        let rc = unsafe { get_version(&mut version) };
        if !rc.is_success() {
            return Err(Error::MissingBootstrap { symbol: "cuDriverGetVersion", library: path, detail: format!("it returned {rc}") });
        }
        // SAFETY: `cuGetProcAddress_v2` has the PFN_cuGetProcAddress_v12000 signature in every driver that exports it.
        let bootstrap = if let Ok(s) = unsafe { lib.get::<GetProcAddressV2>(b"cuGetProcAddress_v2\0") } {
            Bootstrap::V2(*s)
        // SAFETY: the unversioned `cuGetProcAddress` export is the PFN_cuGetProcAddress_v11030 form.
        } else if let Ok(s) = unsafe { lib.get::<GetProcAddressV1>(b"cuGetProcAddress\0") } {
            Bootstrap::V1(*s)
        } else {
            Bootstrap::Exports
        };
        Ok(Driver { lib: Arc::new(lib), path, version, bootstrap })
    }

    /// The path or name the library was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `cuDriverGetVersion` (CUDA major·1000 + minor·10; 13000 for CUDA 13.0).
    pub fn version(&self) -> c_int {
        self.version
    }

    /// Which bootstrap this driver offers.
    pub fn bootstrap(&self) -> BootstrapKind {
        match self.bootstrap {
            Bootstrap::V2(_) => BootstrapKind::GetProcAddressV2,
            Bootstrap::V1(_) => BootstrapKind::GetProcAddressV1,
            Bootstrap::Exports => BootstrapKind::DirectExports,
        }
    }

    /// Asks the driver for `symbol` at ABI `version` with `flags`
    /// (`CU_GET_PROC_ADDRESS_*`). `export` is the export name to look up directly on drivers
    /// older than 11.3. Never fails: a missing symbol is reported in the result.
    #[doc(alias = "cuGetProcAddress")]
    pub fn get_proc_address(&self, symbol: &str, version: c_int, flags: u64, export: &str) -> ProcQuery {
        use crate::driver::status::SymbolStatus;
        let Ok(c) = CString::new(symbol) else {
            return ProcQuery { address: 0, result: CuResult::CUDA_ERROR_INVALID_VALUE, status: SymbolStatus::SymbolNotFound };
        };
        let mut p: *mut c_void = std::ptr::null_mut();
        match self.bootstrap {
            Bootstrap::V2(f) => {
                let mut st = CUdriverProcAddressQueryResult::default();
                // SAFETY: `c` is NUL-terminated; `p` and `st` are writable; the library is alive (self owns it).
                let rc = unsafe { f(c.as_ptr(), &mut p, version, flags, &mut st) };
                let status = if rc.is_success() && !p.is_null() {
                    SymbolStatus::Found
                } else if st == CUdriverProcAddressQueryResult::SUCCESS {
                    SymbolStatus::NotFoundUnknownReason
                } else {
                    SymbolStatus::from_raw(st)
                };
                ProcQuery { address: if status == SymbolStatus::Found { p as usize } else { 0 }, result: rc, status }
            }
            Bootstrap::V1(f) => {
                // SAFETY: as above, without the status argument (PFN_cuGetProcAddress_v11030).
                let rc = unsafe { f(c.as_ptr(), &mut p, version, flags) };
                let found = rc.is_success() && !p.is_null();
                ProcQuery {
                    address: if found { p as usize } else { 0 },
                    result: rc,
                    status: if found { SymbolStatus::Found } else { SymbolStatus::NotFoundUnknownReason },
                }
            }
            Bootstrap::Exports => {
                let name = format!("{export}\0");
                // SAFETY: we only read the symbol's address; it is converted to a typed pointer
                // by the table, whose declared signature is that of this export.
                match unsafe { self.lib.get::<*mut c_void>(name.as_bytes()) } {
                    Ok(s) if !(*s).is_null() => ProcQuery { address: *s as usize, result: CuResult::CUDA_SUCCESS, status: SymbolStatus::Found },
                    _ => ProcQuery { address: 0, result: CuResult::CUDA_ERROR_NOT_FOUND, status: SymbolStatus::NotFoundUnknownReason },
                }
            }
        }
    }

    /// The address of an export of the library looked up by name with `dlsym` (0 if absent).
    /// Only for checks and teaching (comparing what `cuGetProcAddress` returned with an export).
    pub fn export_address(&self, export: &str) -> usize {
        let name = format!("{export}\0");
        // SAFETY: the address is only compared, never called.
        match unsafe { self.lib.get::<*mut c_void>(name.as_bytes()) } {
            Ok(s) => *s as usize,
            Err(_) => 0,
        }
    }
}
