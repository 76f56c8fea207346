//! Entry-point cases: `cuGetProcAddress` lookups that need only the driver library (no GPU).
//! None of them calls what it looks up; addresses are only compared (with the library's exports,
//! [`Driver::export_address`]).

use std::ffi::c_int;

use interop::driver::loader::ProcQuery;
use interop::sys::{CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
use interop::{driver::SymbolStatus, Driver};

use super::{status_name, Case, Got, SetupFailed};

/// Runs a driver-only case.
pub(super) fn run(case: &Case, d: &Driver) -> Result<Got, SetupFailed> {
    match case.name {
        "proc-address-old-version" | "proc-address-misspelt" => lookup(case, d),
        "proc-address-above-driver" => above_driver(d),
        "ctx-create-versions" => ctx_create_versions(d),
        "ptsz-at-4000" => ptsz_at_4000(d),
        other => Err(SetupFailed(format!("no driver-only case {other}"))),
    }
}

/// The answer of a lookup as the lab reports it: the `symbolStatus` (its code and name), or
/// the `CUresult` where a pre-12.0 driver gives no status.
fn status_got(q: &ProcQuery) -> (i32, String, String) {
    match q.status {
        SymbolStatus::Found => (0, status_name(0), "found: the driver returned a function pointer".to_string()),
        SymbolStatus::SymbolNotFound => (1, status_name(1), "the driver has no symbol of this name".to_string()),
        SymbolStatus::VersionNotSufficient => (2, status_name(2), "the symbol exists, but only in versions newer than the one asked for".to_string()),
        SymbolStatus::NotFoundUnknownReason => (
            q.result.0,
            crate::trace::result_name(q.result),
            "not found; this driver's cuGetProcAddress (before CUDA 12.0) gives no symbolStatus".to_string(),
        ),
        SymbolStatus::Other(s) => (s, status_name(s), "an unknown symbolStatus".to_string()),
    }
}

/// `result, status, address` of a lookup in words.
fn describe(q: &ProcQuery) -> String {
    format!(
        "{}, symbolStatus {}, {}",
        crate::trace::result_name(q.result),
        q.status,
        if q.address == 0 { "a null pointer".to_string() } else { format!("address {:#x}", q.address) }
    )
}

/// Which of `exports` (looked up by name in the library) `address` is, in words.
fn which_export(d: &Driver, address: usize, exports: &[&str]) -> String {
    if address == 0 {
        return "no function".into();
    }
    match exports.iter().find(|e| d.export_address(e) == address) {
        Some(e) => format!("the export {e}"),
        None => format!("none of the exports {}", exports.join(", ")),
    }
}

fn lookup(case: &Case, d: &Driver) -> Result<Got, SetupFailed> {
    let (symbol, version) = match case.name {
        "proc-address-old-version" => ("cuMemAllocAsync", 11010),
        _ => ("cuLaunchKernal", 4000),
    };
    let q = d.get_proc_address(symbol, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, symbol);
    let mut detail = format!(
        "cuGetProcAddress returned {} and {} (bootstrap {:?}, driver CUDA {})",
        crate::trace::result_name(q.result),
        if q.address == 0 { "a null pointer".to_string() } else { format!("address {:#x}", q.address) },
        d.bootstrap(),
        interop::driver::entry::cuda_version_string(d.version())
    );
    if case.name == "proc-address-old-version" {
        let ok = d.get_proc_address(symbol, 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, symbol);
        detail.push_str(&format!("; asked at 11020 (its first version) it is {}", ok.status));
    }
    let (code, name, text) = status_got(&q);
    Ok(Got { code, name, text, detail: Some(detail) })
}

/// `proc-address-above-driver`: `cuMemAlloc` at the driver's version + 1000; the `CUresult` is
/// the answer.
fn above_driver(d: &Driver) -> Result<Got, SetupFailed> {
    let version: c_int = d.version() + 1000;
    let q = d.get_proc_address("cuMemAlloc", version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAlloc_v2");
    let ok = d.get_proc_address("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAlloc_v2");
    let detail = format!(
        "asked cuMemAlloc at {version} (driver {}, CUDA {}): {}; asked at 3020 (PFN_cuMemAlloc_v3020): {} (bootstrap {:?})",
        d.version(),
        interop::driver::entry::cuda_version_string(d.version()),
        describe(&q),
        describe(&ok),
        d.bootstrap()
    );
    let text = if q.result.is_success() {
        format!("the call succeeded: {}", q.status)
    } else {
        "the call itself was refused (the CUresult, not the symbolStatus)".to_string()
    };
    Ok(Got { code: q.result.0, name: crate::trace::result_name(q.result), text, detail: Some(detail) })
}

/// The exports of the three `cuCtxCreate` ABI versions (and the first, unversioned one).
const CTX_CREATE_EXPORTS: [&str; 4] = ["cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v3", "cuCtxCreate_v4"];

/// `ctx-create-versions`: `cuCtxCreate` at 3020 and at 13000, compared; neither is called.
fn ctx_create_versions(d: &Driver) -> Result<Got, SetupFailed> {
    let old = d.get_proc_address("cuCtxCreate", 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuCtxCreate_v2");
    let new = d.get_proc_address("cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuCtxCreate_v4");
    let compared = match (old.address, new.address) {
        (0, _) | (_, 0) => "not both found, nothing to compare".to_string(),
        (a, b) if a == b => "the same address: this driver has one variant for both versions".to_string(),
        _ => "different addresses: the 13000 lookup is another function, with another signature (neither was called)".to_string(),
    };
    let detail = format!(
        "at 3020 (PFN_cuCtxCreate_v3020: pctx, flags, dev): {}, which is {}; at 13000 (newest variant ≤ 13000, \
         PFN_cuCtxCreate_v12050 on a CUDA 12.5+ driver: pctx, CUctxCreateParams*, flags, dev): {}, which is {}; {compared} \
         (driver {}, bootstrap {:?})",
        describe(&old),
        which_export(d, old.address, &CTX_CREATE_EXPORTS),
        describe(&new),
        which_export(d, new.address, &CTX_CREATE_EXPORTS),
        d.version(),
        d.bootstrap()
    );
    if !new.result.is_success() {
        let text = "the 13000 lookup was refused by its CUresult (13000 is above this driver's version)".to_string();
        return Ok(Got { code: new.result.0, name: crate::trace::result_name(new.result), text, detail: Some(detail) });
    }
    let (code, name, text) = status_got(&new);
    Ok(Got { code, name, text: format!("the 13000 lookup: {text}"), detail: Some(detail) })
}

/// `ptsz-at-4000`: `cuLaunchKernel` with per-thread semantics at 4000 (and, for the detail, at 7000).
fn ptsz_at_4000(d: &Driver) -> Result<Got, SetupFailed> {
    let flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    let q = d.get_proc_address("cuLaunchKernel", 4000, flags, "cuLaunchKernel_ptsz");
    let at_7000 = d.get_proc_address("cuLaunchKernel", interop::driver::entry::PER_THREAD_VERSION, flags, "cuLaunchKernel_ptsz");
    let exports = ["cuLaunchKernel_ptsz", "cuLaunchKernel"];
    let detail = format!(
        "per-thread lookup at 4000: {}, which is {}; at {}: {}, which is {} (driver {}, bootstrap {:?})",
        describe(&q),
        which_export(d, q.address, &exports),
        interop::driver::entry::PER_THREAD_VERSION,
        describe(&at_7000),
        which_export(d, at_7000.address, &exports),
        d.version(),
        d.bootstrap()
    );
    let (code, name, text) = status_got(&q);
    Ok(Got { code, name, text, detail: Some(detail) })
}
