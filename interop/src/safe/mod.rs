//! Layer 3, the safe types: RAII owners of driver objects, each holding its [`Context`] in an
//! `Arc` (which holds the [`crate::driver::Api`], which holds the library), so no handle outlives
//! what made it. Devices and contexts; streams and events; device, pinned and exportable memory;
//! modules, functions and typed launches; registered GL buffers and images with their mapping
//! guards; surface and texture objects; imported semaphores.

pub mod context;
pub mod device;
pub mod graphics;
pub mod image;
pub mod launch;
pub mod memory;
pub mod module;
pub mod semaphore;
pub mod stream;
pub mod vmm;

pub use context::{Context, ContextKind, SchedFlag};
pub use device::{Device, DeviceInfo};
pub use graphics::{gl_devices, map_resources, GraphicsResource, MappedArray, MappedPtr, Mapping, OwnedMapping};
pub use image::{HeldImages, HeldKind, HeldObject, Sampling, SurfaceObject, TextureObject};
pub use launch::Launch;
pub use memory::{copy_view_async, DeviceBuffer, DeviceCopy, DevicePtr, PendingCopy, PinnedBuffer};
pub use module::{ptx_entries, Function, FunctionAttributes, Module, PtxParam};
pub use semaphore::ExternalSemaphore;
pub use stream::{Event, Stream, StreamKind};
pub use vmm::ExportableBuffer;
