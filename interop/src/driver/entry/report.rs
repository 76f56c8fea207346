//! The entry-point report: one row per declared function, how it was resolved.

use std::ffi::c_int;

pub use crate::driver::status::{cuda_version_string, SymbolStatus};

/// One row of the entry-point report: how one function was resolved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntryReport {
    /// C name.
    pub name: &'static str,
    /// ABI version asked for.
    pub version: c_int,
    /// `cuGetProcAddress` flags used (`CU_GET_PROC_ADDRESS_*`).
    pub flags: u64,
    /// What `cuGetProcAddress` returned.
    pub result: i32,
    /// Decoded symbol status.
    pub status: SymbolStatus,
    /// Whether the application needs it.
    pub required: bool,
    /// Address resolved (0 when not found).
    pub address: usize,
    /// What to do when it was not found.
    pub remedy: Option<String>,
}

impl EntryReport {
    /// The remedy for a status, given the driver version found.
    pub fn remedy_for(status: SymbolStatus, version: c_int, driver_version: c_int) -> Option<String> {
        match status {
            SymbolStatus::Found => None,
            SymbolStatus::SymbolNotFound | SymbolStatus::NotFoundUnknownReason => Some(format!(
                "update the NVIDIA driver to one that supports CUDA {} or newer (this driver supports CUDA {})",
                cuda_version_string(version),
                cuda_version_string(driver_version)
            )),
            SymbolStatus::VersionNotSufficient => {
                Some(format!("this build asks for version {version}, older than the function itself: fix the entry-point table"))
            }
            SymbolStatus::Other(_) => Some("unexpected status from cuGetProcAddress".into()),
        }
    }
}
