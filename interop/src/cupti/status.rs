//! CUPTI's status codes ([`CuptiResult`], an open newtype) and the binding's errors ([`CuptiError`]).

use std::fmt;

use crate::driver::error::{tried_list, LibraryAttempt};

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
        matches!(self, Self::ERROR_NOT_COMPATIBLE | Self::ERROR_NOT_SUPPORTED | Self::ERROR_INVALID_KIND | Self::ERROR_LEGACY_PROFILER_NOT_SUPPORTED)
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

fn not_found_remedy(named: bool) -> &'static str {
    if named {
        "only the file named in place of the search was tried: name libcupti.so (the CUDA toolkit \
         has it in extras/CUPTI/lib64), or name none to search the default places"
    } else {
        "CUPTI ships with the CUDA toolkit (extras/CUPTI/lib64/libcupti.so): install the toolkit's CUPTI, \
         or open libcupti.so by its path (`Cupti::open_with`)"
    }
}

/// Errors of the CUPTI binding.
#[derive(Debug, thiserror::Error)]
pub enum CuptiError {
    /// No CUPTI library could be opened.
    #[error("no CUPTI library could be loaded; tried: {}. {}", tried_list(.tried), not_found_remedy(*.named))]
    LibraryNotFound {
        /// Every path or name tried, in order, with the loader's (`dlerror`) message.
        tried: Vec<LibraryAttempt>,
        /// Whether the only candidate was the file the caller named ([`super::Cupti::open_with`]).
        named: bool,
    },
    /// The library loaded but lacks a required CUPTI function.
    #[error(
        "{library} is not a usable CUPTI library: {symbol} is missing ({detail}); open the CUDA \
         toolkit's extras/CUPTI/lib64/libcupti.so instead"
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
    /// Another [`super::Cupti`] is alive in this process (CUPTI's activity callbacks are process-wide).
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
