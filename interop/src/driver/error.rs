//! Typed errors of the driver binding (`thiserror`).

use std::ffi::c_int;
use std::fmt;

use crate::driver::status::{cuda_version_string, SymbolStatus};
use crate::sys::CuResult;

/// One library name tried while looking for the driver, with the loader's message.
#[derive(Debug, Clone)]
pub struct LibraryAttempt {
    /// Name or path tried.
    pub name: String,
    /// Why it could not be loaded.
    pub error: String,
}

impl fmt::Display for LibraryAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.error)
    }
}

/// Every attempt, `name (error)`, joined by `; ` (the loaders' "tried: …" lists).
pub(crate) fn tried_list(tried: &[LibraryAttempt]) -> String {
    tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Errors of the driver binding.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No driver library could be opened.
    #[error(
        "no CUDA driver library could be loaded; tried: {}. An NVIDIA driver is needed (it provides \
         libcuda.so.1 / nvcuda.dll): install the NVIDIA driver, or open the driver library by its path \
         (`Driver::open_with`)",
        tried_list(.tried)
    )]
    LibraryNotFound {
        /// Every name tried, in order.
        tried: Vec<LibraryAttempt>,
    },
    /// The library loaded but lacks a bootstrap symbol: it is not the CUDA driver.
    #[error(
        "{library} is not a usable CUDA driver library: bootstrap symbol {symbol} is missing or failed ({detail}); \
         open the NVIDIA driver's libcuda.so.1 instead"
    )]
    MissingBootstrap {
        /// The symbol looked up.
        symbol: &'static str,
        /// The library.
        library: String,
        /// The loader's or driver's message.
        detail: String,
    },
    /// A required entry point could not be resolved.
    #[error(
        "required driver function {name} (ABI version {version}) could not be resolved: {status}; \
         the driver found supports CUDA {}; {remedy}{}",
        cuda_version_string(*driver_version),
        if *more_missing > 0 {
            format!(" ({more_missing} more required function(s) missing too: `Api::resolve_report` lists them all)")
        } else {
            String::new()
        }
    )]
    MissingEntryPoint {
        /// C name.
        name: &'static str,
        /// ABI version asked for.
        version: c_int,
        /// Decoded symbol status.
        status: SymbolStatus,
        /// `cuDriverGetVersion`.
        driver_version: c_int,
        /// What to do.
        remedy: String,
        /// How many other required functions are missing too.
        more_missing: usize,
    },
    /// An optional entry point is not available in this driver.
    #[error(
        "driver function {name} (ABI version {version}) is not available: {status} (driver supports CUDA {})",
        cuda_version_string(*driver_version)
    )]
    Unavailable {
        /// C name.
        name: &'static str,
        /// ABI version asked for.
        version: c_int,
        /// Decoded symbol status.
        status: SymbolStatus,
        /// `cuDriverGetVersion`.
        driver_version: c_int,
    },
    /// A driver call failed.
    #[error("{call} failed: {name} ({}): {text}", .code.0)]
    Driver {
        /// The failing call.
        call: &'static str,
        /// The status code.
        code: CuResult,
        /// `cuGetErrorName`.
        name: String,
        /// `cuGetErrorString`.
        text: String,
    },
    /// A module image contains a NUL byte before its end.
    #[error("the PTX image contains a NUL byte at byte offset {offset}; a PTX text must not contain NUL bytes")]
    InteriorNul {
        /// Byte offset of the first NUL.
        offset: usize,
    },
    /// `cuModuleLoadDataEx` failed; the JIT error log says why.
    #[error("cuModuleLoadDataEx failed: {name} ({}): {text}\nJIT error log:\n{log}", .code.0)]
    Jit {
        /// The status code.
        code: CuResult,
        /// `cuGetErrorName`.
        name: String,
        /// `cuGetErrorString`.
        text: String,
        /// The JIT error log.
        log: String,
    },
    /// A mapped resource is smaller than the caller needs.
    #[error("mapped resource {index} holds {actual} bytes, but {expected} bytes are needed")]
    MappedSize {
        /// Index of the resource in the mapping.
        index: usize,
        /// Bytes needed.
        expected: usize,
        /// Bytes mapped.
        actual: usize,
    },
    /// A caller-side argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// The driver status code, for [`Error::Driver`] and [`Error::Jit`].
    pub fn code(&self) -> Option<CuResult> {
        match self {
            Error::Driver { code, .. } | Error::Jit { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `e` with its sources (libloading puts the `dlerror` text in the source).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
