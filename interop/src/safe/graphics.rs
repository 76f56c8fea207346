//! CUDA–OpenGL interop: registered GL buffers and the per-frame mapping guard.
//!
//! The resource-mapping workflow (CUDA Driver API, "OpenGL Interoperability" and "Graphics
//! Interoperability"):
//!
//! ```text
//! register (once)  cuGraphicsGLRegisterBuffer      GraphicsResource::register_gl_buffer
//! map (per frame)  cuGraphicsMapResources           map_resources -> Mapping
//! get pointer      cuGraphicsResourceGetMappedPointer  Mapping::pointer -> MappedPtr
//! launch           cuLaunchKernel                   (uses MappedPtr::device_ptr)
//! unmap            cuGraphicsUnmapResources         Mapping::unmap / drop(Mapping)
//! draw             (GL)                             the renderer
//! unregister       cuGraphicsUnregisterResource     drop(GraphicsResource)
//! ```
//!
//! The image workflow (a GL texture or renderbuffer) differs in two steps: register with
//! `cuGraphicsGLRegisterImage` ([`GraphicsResource::register_gl_image`]) and, instead of a
//! pointer, get the CUDA array of a layer and mip level with
//! `cuGraphicsSubResourceGetMappedArray` ([`Mapping::array`] → [`MappedArray`]), which kernels
//! reach through surface and texture objects ([`crate::safe::image`]) or `cuMemcpy2D` copies.
//!
//! While mapped, only CUDA may touch the buffer; GL may use it again after the unmap, which is
//! ordered on the stream given to it. The guard types make the order a borrow: a [`Mapping`]
//! borrows the resources mutably (they cannot be mapped twice, re-flagged or unregistered while
//! mapped) and a [`MappedPtr`] borrows the mapping (it cannot outlive the unmap). The raw address
//! a `MappedPtr` yields is a plain `u64`; launches that use it are `unsafe` for that reason.

use std::ffi::c_uint;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use crate::driver::error::{Error, Result};
use crate::safe::context::Context;
use crate::safe::stream::Stream;
use crate::sys::{gl_device_list, CUarray, CUdevice, CUdeviceptr, CUgraphicsResource, GLenum, GLuint, CUDA_ARRAY_DESCRIPTOR};
use crate::Api;

/// The CUDA devices that can share the current GL context (`cuGLGetDevices`,
/// `CU_GL_DEVICE_LIST_ALL`). Empty when none can (Mesa, another vendor's GPU, WSL2).
///
/// # Errors
/// [`Error::Unavailable`] when the driver has no GL interop; the driver's error otherwise.
/// `CUDA_ERROR_NO_DEVICE` and `CUDA_ERROR_INVALID_GRAPHICS_CONTEXT` are reported as an empty list.
#[doc(alias = "cuGLGetDevices")]
pub fn gl_devices(api: &Api) -> Result<Vec<CUdevice>> {
    let mut devices = [0 as CUdevice; 16];
    let mut count: c_uint = 0;
    // SAFETY: the array holds 16 devices and we say so; writes `count`.
    let r = unsafe { api.cuGLGetDevices(&mut count, devices.as_mut_ptr(), devices.len() as c_uint, gl_device_list::ALL) };
    match r {
        Ok(()) => Ok(devices[..(count as usize).min(devices.len())].to_vec()),
        Err(e)
            if matches!(
                e.code(),
                Some(crate::sys::CuResult::CUDA_ERROR_NO_DEVICE) | Some(crate::sys::CuResult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT)
            ) =>
        {
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// A GL buffer object, texture or renderbuffer registered with CUDA; unregistered on drop.
///
/// Drop it *before* deleting the GL object and before the GL context goes.
#[derive(Debug)]
pub struct GraphicsResource {
    ctx: Arc<Context>,
    raw: CUgraphicsResource,
    gl_buffer: GLuint,
    /// The GL target of a registered image (`GL_TEXTURE_2D`, `GL_RENDERBUFFER`, …); `None` for a buffer.
    image_target: Option<GLenum>,
    register_flags: c_uint,
    map_flags: c_uint,
}

// SAFETY: the handle is plain data; the driver API allows use from any thread with the context current.
unsafe impl Send for GraphicsResource {}

impl GraphicsResource {
    /// Registers the GL buffer object `buffer` of the current GL context
    /// (`cuGraphicsGLRegisterBuffer`) with `CU_GRAPHICS_REGISTER_FLAGS_*` flags.
    ///
    /// # Errors
    /// The driver's error: on driver 580, `CUDA_ERROR_INVALID_VALUE` for name 0 and
    /// `CUDA_ERROR_INVALID_HANDLE` for a deleted buffer (seen in this workspace's mistake lab);
    /// `CUDA_ERROR_INVALID_GRAPHICS_CONTEXT` without a current GL context that CUDA can share;
    /// [`Error::Unavailable`] without GL interop.
    #[doc(alias = "cuGraphicsGLRegisterBuffer")]
    pub fn register_gl_buffer(ctx: &Arc<Context>, buffer: GLuint, flags: c_uint) -> Result<GraphicsResource> {
        let mut raw: CUgraphicsResource = std::ptr::null_mut();
        // SAFETY: writes one handle; the driver validates the buffer name against the current GL context.
        unsafe { ctx.api().cuGraphicsGLRegisterBuffer(&mut raw, buffer, flags) }?;
        Ok(GraphicsResource { ctx: ctx.clone(), raw, gl_buffer: buffer, image_target: None, register_flags: flags, map_flags: 0 })
    }

    /// Registers the GL texture or renderbuffer `image` of the current GL context, bound to
    /// `target` (`GL_TEXTURE_2D`, `GL_TEXTURE_RECTANGLE`, `GL_TEXTURE_CUBE_MAP`, `GL_TEXTURE_3D`,
    /// `GL_TEXTURE_2D_ARRAY` or `GL_RENDERBUFFER`), with `CU_GRAPHICS_REGISTER_FLAGS_*` flags
    /// (`SURFACE_LDST`: "CUDA will bind this resource to a surface") (`cuGraphicsGLRegisterImage`).
    /// The reference lists the internal formats it supports: GL_RED, GL_RG, GL_RGBA,
    /// GL_LUMINANCE, GL_ALPHA, GL_LUMINANCE_ALPHA, GL_INTENSITY; {GL_R, GL_RG, GL_RGBA} ×
    /// {8, 16, 16F, 32F, 8UI, 16UI, 32UI, 8I, 16I, 32I} (e.g. GL_R32F, GL_RGBA8); and
    /// {GL_LUMINANCE, GL_ALPHA, GL_LUMINANCE_ALPHA, GL_INTENSITY} × the same sizes; three-channel
    /// formats such as GL_RGB8 are not in the list (driver 580 on an H200 registered a GL_RGB8
    /// texture all the same). Textures with borders and multisampled renderbuffers are disallowed.
    ///
    /// # Errors
    /// The driver's error; the reference lists `CUDA_ERROR_INVALID_HANDLE`,
    /// `CUDA_ERROR_ALREADY_MAPPED`, `CUDA_ERROR_INVALID_CONTEXT` and `CUDA_ERROR_OPERATING_SYSTEM`;
    /// [`Error::Unavailable`] without GL interop.
    #[doc(alias = "cuGraphicsGLRegisterImage")]
    pub fn register_gl_image(ctx: &Arc<Context>, image: GLuint, target: GLenum, flags: c_uint) -> Result<GraphicsResource> {
        let mut raw: CUgraphicsResource = std::ptr::null_mut();
        // SAFETY: writes one handle; the driver validates the name and target against the current GL context.
        unsafe { ctx.api().cuGraphicsGLRegisterImage(&mut raw, image, target, flags) }?;
        Ok(GraphicsResource { ctx: ctx.clone(), raw, gl_buffer: image, image_target: Some(target), register_flags: flags, map_flags: 0 })
    }

    /// Sets `CU_GRAPHICS_MAP_RESOURCE_FLAGS_*` for the following maps (`cuGraphicsResourceSetMapFlags`).
    ///
    /// # Errors
    /// The driver's error (`CUDA_ERROR_ALREADY_MAPPED` cannot happen: a mapped resource is borrowed).
    #[doc(alias = "cuGraphicsResourceSetMapFlags")]
    pub fn set_map_flags(&mut self, flags: c_uint) -> Result<()> {
        // SAFETY: the resource is registered and, being borrowed mutably, not mapped.
        unsafe { self.ctx.api().cuGraphicsResourceSetMapFlags(self.raw, flags) }?;
        self.map_flags = flags;
        Ok(())
    }

    /// The raw handle.
    pub fn raw(&self) -> CUgraphicsResource {
        self.raw
    }
    /// The GL object's name (a buffer, or the texture or renderbuffer of an image).
    pub fn gl_buffer(&self) -> GLuint {
        self.gl_buffer
    }
    /// The GL target of a registered image; `None` for a buffer.
    pub fn image_target(&self) -> Option<GLenum> {
        self.image_target
    }
    /// The register flags.
    pub fn register_flags(&self) -> c_uint {
        self.register_flags
    }
    /// The map flags last set.
    pub fn map_flags(&self) -> c_uint {
        self.map_flags
    }
}

impl Drop for GraphicsResource {
    fn drop(&mut self) {
        // SAFETY: registered in `register_gl_buffer` or `register_gl_image`; not mapped (a Mapping
        // borrows it); unregistered once.
        drop(unsafe { self.ctx.api().cuGraphicsUnregisterResource(self.raw) });
    }
}

/// Maps `resources` for CUDA with one `cuGraphicsMapResources` call ordered on `stream`.
/// The returned guard unmaps them (one `cuGraphicsUnmapResources` on the same stream) on
/// [`Mapping::unmap`] or drop. Until then GL must not use the buffers.
///
/// # Errors
/// The driver's error (`CUDA_ERROR_ALREADY_MAPPED`, `CUDA_ERROR_INVALID_GRAPHICS_CONTEXT`, …);
/// [`Error::InvalidArgument`] for an empty slice.
#[doc(alias = "cuGraphicsMapResources")]
pub fn map_resources<'a>(resources: &'a mut [GraphicsResource], stream: &'a Stream) -> Result<Mapping<'a>> {
    // SAFETY: the mutable borrow of the resources and the borrow of the stream last as long as
    // the returned `Mapping` ('a): the resources stay registered and cannot be mapped by anyone
    // else, and the stream stays alive, until the inner mapping is unmapped or dropped.
    let inner = unsafe { RawMapping::map(resources, stream) }?;
    Ok(Mapping { inner, _borrows: PhantomData })
}

/// Resources mapped for CUDA. Unmaps on drop; its device pointers borrow it.
///
/// The mapping core (`RawMapping`, private) that also borrows the resources (mutably) and the stream, which is
/// what makes [`map_resources`] safe.
#[derive(Debug)]
pub struct Mapping<'a> {
    inner: RawMapping,
    _borrows: PhantomData<(&'a mut [GraphicsResource], &'a Stream)>,
}

impl Mapping<'_> {
    /// Number of mapped resources.
    pub fn len(&self) -> usize {
        self.inner.len()
    }
    /// Always false.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Device pointer and size of mapped resource `index` (`cuGraphicsResourceGetMappedPointer`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index out of range; the driver's error.
    #[doc(alias = "cuGraphicsResourceGetMappedPointer")]
    pub fn pointer(&self, index: usize) -> Result<MappedPtr<'_>> {
        self.inner.pointer(index)
    }

    /// The CUDA array of layer `array_index`, mip level `mip_level` of mapped image resource
    /// `index` (`cuGraphicsSubResourceGetMappedArray`), with its shape (`cuArrayGetDescriptor`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index out of range; the driver's error:
    /// `CUDA_ERROR_NOT_MAPPED_AS_ARRAY` for a buffer resource, `CUDA_ERROR_INVALID_VALUE` for a
    /// layer or level the image does not have (reference).
    #[doc(alias = "cuGraphicsSubResourceGetMappedArray")]
    pub fn array(&self, index: usize, array_index: u32, mip_level: u32) -> Result<MappedArray<'_>> {
        self.inner.array(index, array_index, mip_level)
    }

    /// Unmaps now (one `cuGraphicsUnmapResources` on the mapping's stream), returning its error.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuGraphicsUnmapResources")]
    pub fn unmap(self) -> Result<()> {
        self.inner.unmap()
    }
}

/// The core both guards share: mapped resources that do *not* borrow the resources or the
/// stream. Whoever holds one keeps the rules the borrows enforce for [`Mapping`] (see `map`):
/// [`Mapping`] by its borrows, [`OwnedMapping`] by owning what it maps. Unmaps on `unmap` or drop.
#[derive(Debug)]
pub(crate) struct RawMapping {
    api: Arc<Api>,
    raw: Vec<CUgraphicsResource>,
    stream: crate::sys::CUstream,
    mapped: bool,
}

impl RawMapping {
    /// Maps `resources` with one `cuGraphicsMapResources` ordered on `stream`.
    ///
    /// # Errors
    /// As [`map_resources`].
    ///
    /// # Safety
    /// Until the value is unmapped or dropped: the resources stay registered (not dropped), the
    /// stream stays alive, and nothing else maps, unmaps or re-flags the resources.
    #[doc(alias = "cuGraphicsMapResources")]
    pub(crate) unsafe fn map(resources: &[GraphicsResource], stream: &Stream) -> Result<RawMapping> {
        let Some(first) = resources.first() else {
            return Err(Error::InvalidArgument("no resources to map".into()));
        };
        let api = first.ctx.api().clone();
        let mut raw: Vec<CUgraphicsResource> = resources.iter().map(|r| r.raw).collect();
        // SAFETY: `raw` holds `len` registered handles; the stream is live (the caller's contract).
        unsafe { api.cuGraphicsMapResources(raw.len() as c_uint, raw.as_mut_ptr(), stream.raw()) }?;
        Ok(RawMapping { api, raw, stream: stream.raw(), mapped: true })
    }

    /// Number of mapped resources.
    pub fn len(&self) -> usize {
        self.raw.len()
    }
    /// Always false.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Device pointer and size of mapped resource `index` (`cuGraphicsResourceGetMappedPointer`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index out of range; the driver's error.
    #[doc(alias = "cuGraphicsResourceGetMappedPointer")]
    pub fn pointer(&self, index: usize) -> Result<MappedPtr<'_>> {
        let res = *self.raw.get(index).ok_or_else(|| Error::InvalidArgument(format!("resource index {index} of {}", self.raw.len())))?;
        let mut ptr: CUdeviceptr = 0;
        let mut size = 0usize;
        // SAFETY: the resource is mapped (self exists and was not unmapped); writes two values.
        unsafe { self.api.cuGraphicsResourceGetMappedPointer(&mut ptr, &mut size, res) }?;
        Ok(MappedPtr { ptr, size, index, api: &self.api })
    }

    /// The CUDA array of layer `array_index`, mip level `mip_level` of mapped image resource
    /// `index` (`cuGraphicsSubResourceGetMappedArray`), with its shape (`cuArrayGetDescriptor`).
    /// The array is valid until the unmap: the returned value borrows the mapping.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index out of range; the driver's error:
    /// `CUDA_ERROR_NOT_MAPPED_AS_ARRAY` for a buffer resource, `CUDA_ERROR_INVALID_VALUE` for a
    /// layer or level the image does not have (reference).
    #[doc(alias = "cuGraphicsSubResourceGetMappedArray")]
    pub fn array(&self, index: usize, array_index: u32, mip_level: u32) -> Result<MappedArray<'_>> {
        let res = *self.raw.get(index).ok_or_else(|| Error::InvalidArgument(format!("resource index {index} of {}", self.raw.len())))?;
        let mut raw: CUarray = std::ptr::null_mut();
        // SAFETY: the resource is mapped (self exists and was not unmapped); writes one handle.
        unsafe { self.api.cuGraphicsSubResourceGetMappedArray(&mut raw, res, array_index, mip_level) }?;
        let mut desc = CUDA_ARRAY_DESCRIPTOR::default();
        // SAFETY: `raw` is the live array the driver just returned; writes one descriptor.
        unsafe { self.api.cuArrayGetDescriptor(&mut desc, raw) }?;
        Ok(MappedArray { raw, desc, stream: self.stream, api: &self.api })
    }

    /// Unmaps now (one `cuGraphicsUnmapResources` on the mapping's stream), returning its error.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuGraphicsUnmapResources")]
    pub fn unmap(mut self) -> Result<()> {
        self.unmap_raw()
    }

    fn unmap_raw(&mut self) -> Result<()> {
        if !self.mapped {
            return Ok(());
        }
        self.mapped = false;
        // SAFETY: the handles were mapped on this stream by `map` and are unmapped once
        // (`mapped`); resources and stream are still alive (the contract of `map`).
        unsafe { self.api.cuGraphicsUnmapResources(self.raw.len() as c_uint, self.raw.as_mut_ptr(), self.stream) }
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        // An error here cannot be returned; callers who care call `unmap`.
        drop(self.unmap_raw());
    }
}

/// Resources mapped for CUDA that own what the mapping needs: the registered resources and a
/// share of the stream. For a mapping that must wait inside a struct between calls (the demo's
/// step mode maps in one frame and unmaps in a later one), where [`Mapping`]'s borrows cannot be
/// stored next to what they borrow. Safe because nothing can drop, map or re-flag the resources
/// while they are inside; [`OwnedMapping::unmap`] hands them back. Unmaps on drop too.
#[derive(Debug)]
pub struct OwnedMapping {
    // Field order is drop order: unmapped before the resources are unregistered and the stream goes.
    inner: RawMapping,
    resources: Vec<GraphicsResource>,
    stream: Rc<Stream>,
}

impl OwnedMapping {
    /// Maps `resources` with one `cuGraphicsMapResources` ordered on `stream`, taking them.
    ///
    /// # Errors
    /// As [`map_resources`]; the resources come back with the error.
    #[doc(alias = "cuGraphicsMapResources")]
    pub fn map(resources: Vec<GraphicsResource>, stream: Rc<Stream>) -> std::result::Result<OwnedMapping, (Error, Vec<GraphicsResource>)> {
        // SAFETY: the value owns the resources and a share of the stream until it is unmapped
        // (`unmap` unmaps before handing them back; drop unmaps first, by field order), and
        // gives out no mutable access to them, so nothing else maps, unmaps or re-flags them.
        match unsafe { RawMapping::map(&resources, &stream) } {
            Ok(inner) => Ok(OwnedMapping { inner, resources, stream }),
            Err(e) => Err((e, resources)),
        }
    }

    /// Device pointer and size of mapped resource `index` (`cuGraphicsResourceGetMappedPointer`).
    ///
    /// # Errors
    /// As [`Mapping::pointer`].
    #[doc(alias = "cuGraphicsResourceGetMappedPointer")]
    pub fn pointer(&self, index: usize) -> Result<MappedPtr<'_>> {
        self.inner.pointer(index)
    }

    /// The CUDA array of layer `array_index`, mip level `mip_level` of mapped image resource
    /// `index`; as [`Mapping::array`].
    ///
    /// # Errors
    /// As [`Mapping::array`].
    #[doc(alias = "cuGraphicsSubResourceGetMappedArray")]
    pub fn array(&self, index: usize, array_index: u32, mip_level: u32) -> Result<MappedArray<'_>> {
        self.inner.array(index, array_index, mip_level)
    }

    /// The mapped resources (read only).
    pub fn resources(&self) -> &[GraphicsResource] {
        &self.resources
    }

    /// The stream the mapping is ordered on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Unmaps now (one `cuGraphicsUnmapResources` on the mapping's stream) and hands the
    /// resources back, with the unmap's result.
    #[doc(alias = "cuGraphicsUnmapResources")]
    pub fn unmap(self) -> (Vec<GraphicsResource>, Result<()>) {
        let OwnedMapping { inner, resources, stream: _ } = self;
        let r = inner.unmap();
        (resources, r)
    }
}

/// The CUDA array of one mapped image (a layer and mip level); valid only while its
/// [`Mapping`] lives, which it borrows. Kernels reach it through a surface or texture object
/// ([`crate::safe::image`]), copies through `cuMemcpy2D`.
#[derive(Debug, Clone, Copy)]
pub struct MappedArray<'m> {
    raw: CUarray,
    desc: CUDA_ARRAY_DESCRIPTOR,
    /// The mapping's stream: work on it is ordered after the map and before the unmap.
    stream: crate::sys::CUstream,
    api: &'m Api,
}

impl<'m> MappedArray<'m> {
    /// The raw handle (valid while the mapping lives).
    pub fn raw(&self) -> CUarray {
        self.raw
    }
    /// Width and height, texels.
    pub fn size(&self) -> (usize, usize) {
        (self.desc.width, self.desc.height)
    }
    /// The array's shape, element format and channels (`cuArrayGetDescriptor`).
    pub fn descriptor(&self) -> CUDA_ARRAY_DESCRIPTOR {
        self.desc
    }
    /// Bytes per texel: channels × the element format's size, for the formats GL images map
    /// to (8-, 16- and 32-bit integers, half and float); `None` for any other (packed or
    /// block-compressed) format.
    pub fn texel_bytes(&self) -> Option<usize> {
        use crate::sys::array_format as f;
        let element = match self.desc.format {
            f::UNSIGNED_INT8 | f::SIGNED_INT8 => 1,
            f::UNSIGNED_INT16 | f::SIGNED_INT16 | f::HALF => 2,
            f::UNSIGNED_INT32 | f::SIGNED_INT32 | f::FLOAT => 4,
            _ => return None,
        };
        Some(element * self.desc.num_channels as usize)
    }
    /// The stream the mapping was made on (copies into the array go there, ordered between the
    /// map and the unmap).
    pub fn stream(&self) -> crate::sys::CUstream {
        self.stream
    }
    /// The table the mapping was made with.
    pub fn api(&self) -> &'m Api {
        self.api
    }
}

/// The device address of one mapped buffer; valid only while its [`Mapping`] lives.
#[derive(Debug, Clone, Copy)]
pub struct MappedPtr<'m> {
    ptr: CUdeviceptr,
    size: usize,
    index: usize,
    api: &'m Api,
}

impl<'m> MappedPtr<'m> {
    /// Device address.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// The mapped buffer as `size / size_of::<T>()` values for kernel launches; the view
    /// borrows the mapping, so it cannot outlive the unmap.
    pub fn view<T: crate::safe::memory::DeviceCopy>(&self) -> crate::safe::memory::DevicePtr<'m, T> {
        // SAFETY: the buffer is mapped, `size` bytes at `ptr`, for as long as the mapping is
        // borrowed ('m), and the view holds only whole values inside it.
        unsafe { crate::safe::memory::DevicePtr::from_raw_parts(self.ptr, self.size / std::mem::size_of::<T>().max(1)) }
    }
    /// Mapped size, bytes.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Copies the start of the mapped buffer into `dst` (`cuMemcpyDtoH`, synchronous).
    ///
    /// # Errors
    /// [`Error::MappedSize`] when `dst` is larger than the mapping; the driver's error.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn copy_to_host<T: crate::safe::memory::DeviceCopy>(&self, dst: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(dst);
        if bytes > self.size {
            return Err(Error::MappedSize { index: self.index, expected: bytes, actual: self.size });
        }
        // SAFETY: the buffer is mapped for as long as `self` borrows the mapping and holds at least
        // `bytes` bytes (checked); `dst` is writable for `bytes` bytes of a type valid for any bits.
        unsafe { self.api.cuMemcpyDtoH(dst.as_mut_ptr().cast(), self.ptr, bytes) }
    }

    /// Checks that at least `bytes` are mapped.
    ///
    /// # Errors
    /// [`Error::MappedSize`] when the buffer is smaller.
    pub fn require(self, bytes: usize) -> Result<Self> {
        if self.size < bytes {
            Err(Error::MappedSize { index: self.index, expected: bytes, actual: self.size })
        } else {
            Ok(self)
        }
    }
}
