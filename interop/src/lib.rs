//! The CUDA driver API, loaded at run time, with versioned entry points, RAII wrappers and
//! CUDA–OpenGL interop.
//!
//! # Layers (after `ash` and `cudarc`)
//! 1. [`sys`]: C types and constants of `cuda.h`/`cudaGL.h`; no logic.
//! 2. [`entry`]: the one declarative table of driver functions. [`Driver`] opens the library and
//!    looks up only the bootstrap symbols (`cuGetProcAddress_v2` / `cuGetProcAddress`,
//!    `cuDriverGetVersion`); [`Api::load`] resolves every other function through
//!    `cuGetProcAddress` with the ABI version of its `PFN_…_vNNNN` typedef and the chosen
//!    default-stream semantics, keeping a report row per function. Each function is a method of
//!    [`Api`] returning `Result`.
//! 3. RAII types: [`Device`], [`Context`], [`Module`]/[`Function`], [`Stream`], [`Event`],
//!    [`DeviceBuffer`], [`PinnedBuffer`], [`GraphicsResource`] and the [`Mapping`] guard; the
//!    image workflow's [`SurfaceObject`], [`TextureObject`] and [`image::HeldImages`]; and
//!    [`ExternalSemaphore`] (a semaphore another API exported, imported for GPU-side ordering).
//!
//! 4. [`cupti`]: CUPTI activity records (kernels, copies, memsets, context switches), loaded
//!    on its own beside the driver and optional ([`Cupti`]).
//! 5. [`nccl`]: NCCL's all-gather for the bodies split over several GPUs ([`Nccl`],
//!    [`Clique`]), loaded on its own and optional (peer copies, `cuMemcpyPeerAsync`, stand in).
//!
//! # Safety model
//! The library outlives every function pointer: [`Api`] owns the [`Driver`], which holds the
//! `libloading::Library` in an `Arc`; every [`Context`] holds the `Arc<Api>`; every RAII type holds
//! its `Arc<Context>`. Function pointers are stored as `Option`s and never null. Layer-2 methods
//! are `unsafe` (the driver's contract on raw pointers); layer-3 types are safe and document which
//! driver rule each `unsafe` block keeps. A [`Mapping`] borrows its resources mutably and a
//! [`MappedPtr`] borrows the mapping, so the handle to a mapped GL buffer cannot outlive the unmap
//! (a compile-fail test proves it). The raw address it yields (`MappedPtr::device_ptr`, a `u64`)
//! is plain data: kernel launches take it through `unsafe` (`Function::launch`), whose caller
//! promises the memory stays mapped until the launch completes.
//! CUDA calls act on the calling thread's current context; see [`Context`].

#[cfg(feature = "cupti")]
pub mod cupti;
pub mod driver;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod safe;
pub mod sys;

use std::sync::Arc;

#[cfg(feature = "cupti")]
pub use cupti::{Cupti, CuptiError};
pub use driver::{Api, BootstrapKind, Driver, EntryDecl, EntryReport, Error, Result, StreamSemantics, SymbolStatus, TraceRecord, ENTRY_POINTS};
#[cfg(feature = "nccl")]
pub use nccl::{Clique, Nccl, NcclError};
pub use safe::*;

/// Opens the driver, resolves the table with `semantics` and calls `cuInit(0)`.
///
/// # Errors
/// Any load error of [`Driver::open`] or [`Api::load`], or `cuInit`'s error
/// (`CUDA_ERROR_NO_DEVICE` on a machine with the driver but no GPU).
#[doc(alias = "cuInit")]
pub fn init(semantics: StreamSemantics) -> Result<Arc<Api>> {
    init_with(Driver::open()?, semantics)
}

/// As [`init`] on a driver already opened (for example by [`Driver::open_with`], from a path the
/// application names).
///
/// # Errors
/// Any load error of [`Api::load`], or `cuInit`'s error.
#[doc(alias = "cuInit")]
pub fn init_with(driver: Driver, semantics: StreamSemantics) -> Result<Arc<Api>> {
    let api = Api::load(driver, semantics)?;
    cu_init(&api)?;
    Ok(api)
}

/// `cuInit(0)` on a loaded table: initialises the driver (any number of calls is fine).
///
/// # Errors
/// The driver's error (`CUDA_ERROR_NO_DEVICE` on a machine with the driver but no GPU).
#[doc(alias = "cuInit")]
pub fn cu_init(api: &Api) -> Result<()> {
    // SAFETY: cuInit takes a flags value that must be 0.
    unsafe { api.cuInit(0) }
}
