//! Safe CUDA–OpenGL interop over the CUDA driver API, loaded at run time, with versioned entry
//! points and RAII types. It reads no environment variable: library files come in through each
//! `open_with` ([`Driver::open_with`]), the standard names are the defaults.
//!
//! # Layers (after `ash` and `cudarc`), one folder each
//! 1. [`sys`]: C types, constants and handles of `cuda.h`/`cudaGL.h`; no logic.
//! 2. [`driver`]: finding and opening the library, and the one declarative table of driver
//!    functions ([`driver::entry`]). [`Driver`] opens the library and looks up only the bootstrap
//!    symbols (`cuGetProcAddress_v2` / `cuGetProcAddress`, `cuDriverGetVersion`); [`Api::load`]
//!    resolves every other function through `cuGetProcAddress` with the ABI version of its
//!    `PFN_…_vNNNN` typedef and the chosen default-stream semantics, keeping a report row per
//!    function. Each function is an `unsafe` method of [`Api`] returning [`Result`].
//! 3. [`safe`]: RAII types: [`Device`], [`Context`], [`Module`]/[`Function`], [`Stream`],
//!    [`Event`], [`DeviceBuffer`], [`PinnedBuffer`], [`GraphicsResource`] with the borrowing
//!    [`Mapping`] guard and the [`OwnedMapping`] one (for a mapping held across calls); the image
//!    workflow's [`SurfaceObject`], [`TextureObject`] and [`safe::image::HeldImages`];
//!    [`ExportableBuffer`] and [`ExternalSemaphore`] (external memory and semaphores).
//! 4. `cupti` (cargo feature `cupti`): CUPTI activity records (kernels, copies, memsets, context
//!    switches), loaded on its own beside the driver.
//! 5. `nccl` (cargo feature `nccl`): NCCL's in-place all-gather of plain-data elements over
//!    several GPUs, loaded on its own.
//!
//! The crate root re-exports the types of the interop workflow; the rest is one module down.
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

// The front: what a program needs to open the driver and do the interop workflow. Everything
// else is one module down (`driver::`, `safe::`, `cupti::`, `nccl::`).
pub use driver::{Api, Driver, Error, Result, StreamSemantics};
pub use safe::{
    gl_devices, map_resources, Context, Device, DeviceBuffer, DeviceCopy, DevicePtr, Event, ExportableBuffer, ExternalSemaphore, Function,
    GraphicsResource, Launch, MappedArray, MappedPtr, Mapping, Module, OwnedMapping, PinnedBuffer, SchedFlag, Stream, SurfaceObject, TextureObject,
};

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
