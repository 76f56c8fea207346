//! Values that the loader, the error type and the entry-point table all describe: the decoded
//! `symbolStatus` of `cuGetProcAddress` and the CUDA version string of a driver version.
//! They live below all three so that none of them imports another to name them.

use std::ffi::c_int;
use std::fmt;

use crate::sys::CUdriverProcAddressQueryResult;

/// Decoded `symbolStatus` of `cuGetProcAddress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolStatus {
    /// Resolved.
    Found,
    /// The driver has no such symbol (it is older than the function).
    SymbolNotFound,
    /// The symbol exists only in versions newer than the one asked for.
    VersionNotSufficient,
    /// A pre-12.0 `cuGetProcAddress` (no `symbolStatus`) or a direct export lookup failed.
    NotFoundUnknownReason,
    /// A status code this build does not know.
    Other(i32),
}

impl fmt::Display for SymbolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolStatus::Found => f.write_str("found"),
            SymbolStatus::SymbolNotFound => f.write_str("symbol not found"),
            SymbolStatus::VersionNotSufficient => f.write_str("version not sufficient"),
            SymbolStatus::NotFoundUnknownReason => f.write_str("not found (this driver does not say why)"),
            SymbolStatus::Other(c) => write!(f, "status {c}"),
        }
    }
}

impl SymbolStatus {
    /// Decodes a `CUdriverProcAddressQueryResult`.
    pub fn from_raw(s: CUdriverProcAddressQueryResult) -> Self {
        match s {
            CUdriverProcAddressQueryResult::SUCCESS => SymbolStatus::Found,
            CUdriverProcAddressQueryResult::SYMBOL_NOT_FOUND => SymbolStatus::SymbolNotFound,
            CUdriverProcAddressQueryResult::VERSION_NOT_SUFFICIENT => SymbolStatus::VersionNotSufficient,
            other => SymbolStatus::Other(other.0),
        }
    }
}

/// `"12.4"` for 12040.
pub fn cuda_version_string(v: c_int) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}
