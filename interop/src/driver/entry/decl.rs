//! What the table declares of each driver function ([`EntryDecl`]): its name, ABI version,
//! per-thread variant and whether the application needs it.

use std::ffi::c_int;

use crate::driver::loader::StreamSemantics;

/// Whether a function has a per-thread-default-stream variant, and which suffix it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PtVariant {
    /// No variant: the same export under both semantics.
    None,
    /// `_ptsz`: a stream-ordered function whose null stream becomes the per-thread stream.
    Ptsz,
    /// `_ptds`: a synchronous function ordered with the per-thread default stream.
    Ptds,
}

impl PtVariant {
    /// The export-name suffix (`"_ptsz"`, `"_ptds"` or `""`).
    pub fn suffix(self) -> &'static str {
        match self {
            PtVariant::None => "",
            PtVariant::Ptsz => "_ptsz",
            PtVariant::Ptds => "_ptds",
        }
    }
}

/// One declared driver function (a row of [`super::ENTRY_POINTS`]).
#[derive(Debug, Clone, Copy)]
pub struct EntryDecl {
    /// C name, as passed to `cuGetProcAddress` (`"cuCtxCreate"`).
    pub name: &'static str,
    /// ABI version asked for: the `NNNN` of `PFN_<name>_vNNNN` (CUDA major·1000 + minor·10).
    pub version: c_int,
    /// The library export of that version with legacy semantics (`"cuCtxCreate_v2"`), used on
    /// drivers older than 11.3 and to check resolution.
    pub export: &'static str,
    /// Per-thread-default-stream variant.
    pub pt: PtVariant,
    /// Whether loading fails without it.
    pub required: bool,
    /// Parameter names, in order (their count is checked against the header's typedef).
    pub params: &'static [&'static str],
}

/// ABI version of every `_ptsz`/`_ptds` typedef (`PFN_<name>_v7000_ptsz`): the per-thread
/// variants appeared in CUDA 7.0, so asking for one with an older version is answered
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT` (seen on driver 580 for `cuLaunchKernel` at 4000).
pub const PER_THREAD_VERSION: c_int = 7000;

impl EntryDecl {
    /// The ABI version asked for under `semantics`: the declared one, or for a function with a
    /// per-thread variant under per-thread semantics the version of its `_ptsz`/`_ptds` typedef.
    pub fn version_for(&self, semantics: StreamSemantics) -> c_int {
        match (semantics, self.pt) {
            (StreamSemantics::PerThread, PtVariant::Ptsz | PtVariant::Ptds) => self.version.max(PER_THREAD_VERSION),
            _ => self.version,
        }
    }

    /// The export name this entry resolves to under `semantics` (`cuLaunchKernel_ptsz`, …).
    pub fn export_for(&self, semantics: StreamSemantics) -> String {
        match semantics {
            StreamSemantics::PerThread => format!("{}{}", self.export, self.pt.suffix()),
            StreamSemantics::Legacy => self.export.to_string(),
        }
    }
}
