//! Which driver, CUPTI and NCCL files the program loads: its environment variables mapped onto
//! the `interop` crate's parameters (the crate itself reads no variable). Unset or empty, each
//! library is searched under its standard names (`interop::driver::loader::DEFAULT_LIBRARY_NAMES`
//! and the like); set, only the file it names is tried. `docs/environment.md` lists them.

use std::ffi::OsString;
use std::sync::Arc;

use interop::cupti::{toolkit_roots, Cupti, CuptiError};
use interop::nccl::{Nccl, NcclError};
use interop::{Api, Driver, StreamSemantics};

/// The variable naming the CUDA driver library (`libcuda.so.1`) to load in place of the search.
pub const CUDA_LIBRARY_ENV: &str = "NBODY_CUDA_LIBRARY";
/// The variable naming the CUPTI library (`--timeline`) to load in place of the search.
pub const CUPTI_LIBRARY_ENV: &str = "NBODY_CUPTI_LIBRARY";
/// The variable naming the NCCL library (`--gather nccl`) to load in place of the search.
pub const NCCL_LIBRARY_ENV: &str = "NBODY_NCCL_LIBRARY";

fn named(var: &str) -> Option<OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// Opens the CUDA driver: the file in [`CUDA_LIBRARY_ENV`] if set, else the standard names.
///
/// # Errors
/// As `interop::Driver::open_with`: every name tried with the loader's message, or a library
/// that is not the driver.
pub fn open_driver() -> interop::Result<Driver> {
    Driver::open_with(named(CUDA_LIBRARY_ENV).as_deref())
}

/// Opens the driver as [`open_driver`], resolves its entry points with `semantics` and calls
/// `cuInit(0)`.
///
/// # Errors
/// As [`open_driver`], then `interop::init_with`'s (`CUDA_ERROR_NO_DEVICE` without a GPU).
pub fn init(semantics: StreamSemantics) -> interop::Result<Arc<Api>> {
    interop::init_with(open_driver()?, semantics)
}

/// Opens CUPTI: the file in [`CUPTI_LIBRARY_ENV`] if set, else the standard names and the
/// toolkit's folders (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`).
///
/// # Errors
/// As `interop::cupti::Cupti::open_with`.
pub fn open_cupti() -> Result<Cupti, CuptiError> {
    Cupti::open_with(named(CUPTI_LIBRARY_ENV).as_deref(), &toolkit_roots())
}

/// Opens NCCL: the file in [`NCCL_LIBRARY_ENV`] if set, else the standard names.
///
/// # Errors
/// As `interop::nccl::Nccl::open_with`.
pub fn open_nccl() -> Result<Arc<Nccl>, NcclError> {
    Nccl::open_with(named(NCCL_LIBRARY_ENV).as_deref())
}
