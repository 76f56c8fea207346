//! Kernels' ways into a mapped GL image's CUDA array ([`MappedArray`]): surface objects
//! (`cuSurfObjectCreate`: `surf2Dread`/`surf2Dwrite` by byte and row coordinates; register the
//! image with `CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST`, "CUDA will bind this resource to a
//! surface"), texture objects
//! (`cuTexObjectCreate`: filtered, addressed `tex2D` reads) and 2D copies
//! (`cuMemcpy2DAsync` between linear device memory and the array).
//!
//! Each object borrows the [`MappedArray`] it was made from, which borrows the mapping, so none
//! can outlive the unmap; each is destroyed on drop. The image workflow in full:
//!
//! ```text
//! register (once)     cuGraphicsGLRegisterImage (SURFACE_LDST)   GraphicsResource::register_gl_image
//! map (per frame)     cuGraphicsMapResources                     map_resources -> Mapping
//! get the array       cuGraphicsSubResourceGetMappedArray        Mapping::array -> MappedArray
//! surface object      cuSurfObjectCreate                         SurfaceObject::new
//! launch              cuLaunchKernel (surf2Dwrite)               (takes SurfaceObject::handle)
//! destroy it          cuSurfObjectDestroy                        drop(SurfaceObject)
//! unmap               cuGraphicsUnmapResources                   drop(Mapping)
//! draw                (GL samples the texture)
//! unregister          cuGraphicsUnregisterResource               drop(GraphicsResource)
//! ```
//!
//! [`HeldImages`] is the same workflow for a caller that waits between the calls (the demo's
//! step mode): it owns the mapping and the objects it makes, and lends them out as borrows of
//! itself.

use std::marker::PhantomData;

use std::rc::Rc;

use crate::driver::error::{Error, Result};
use crate::safe::graphics::{GraphicsResource, MappedArray, OwnedMapping};
use crate::safe::memory::{DeviceCopy, DevicePtr};
use crate::safe::stream::Stream;
use crate::sys::{
    memory_type, resource_type, texture, CUarray, CUdeviceptr, CUsurfObject, CUtexObject, CUDA_MEMCPY2D, CUDA_RESOURCE_DESC, CUDA_TEXTURE_DESC,
};
use crate::Api;

/// A description of the CUDA array `array` (`CU_RESOURCE_TYPE_ARRAY`: `res.array.hArray`, the
/// union's first word).
fn array_resource(array: CUarray) -> CUDA_RESOURCE_DESC {
    let mut res = [0u64; 16];
    res[0] = array as usize as u64;
    CUDA_RESOURCE_DESC { res_type: resource_type::ARRAY, res, flags: 0 }
}

/// The kind of an [`ArrayObject`]: how the driver destroys it. Implemented by [`Surface`] and
/// [`Texture`] only.
pub trait ObjectKind: sealed::Sealed {
    /// Destroys the object `handle` (`cuSurfObjectDestroy` or `cuTexObjectDestroy`).
    ///
    /// # Safety
    /// `handle` was made by the matching create call and is destroyed once.
    #[doc(hidden)]
    unsafe fn destroy(api: &Api, handle: u64) -> Result<()>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Surface {}
    impl Sealed for super::Texture {}
}

/// [`ObjectKind`] of surface objects (`surf2Dread`/`surf2Dwrite`).
#[derive(Debug)]
pub enum Surface {}

/// [`ObjectKind`] of texture objects (`tex2D`).
#[derive(Debug)]
pub enum Texture {}

impl ObjectKind for Surface {
    unsafe fn destroy(api: &Api, handle: u64) -> Result<()> {
        // SAFETY: the caller's contract (made by cuSurfObjectCreate, destroyed once).
        unsafe { api.cuSurfObjectDestroy(handle) }
    }
}

impl ObjectKind for Texture {
    unsafe fn destroy(api: &Api, handle: u64) -> Result<()> {
        // SAFETY: the caller's contract (made by cuTexObjectCreate, destroyed once).
        unsafe { api.cuTexObjectDestroy(handle) }
    }
}

/// A surface or texture object over a mapped image's array ([`SurfaceObject`],
/// [`TextureObject`]); destroyed on drop unless it is a loan of a [`HeldImages`] object.
#[derive(Debug)]
pub struct ArrayObject<'m, K: ObjectKind> {
    handle: u64,
    /// The array's width and height in texels, and its texel size in bytes (`None`: a format
    /// [`MappedArray::texel_bytes`] does not know).
    extent: ((usize, usize), Option<usize>),
    /// Destroyed on drop (false: a loan of a [`HeldImages`] object, which destroys it itself).
    owned: bool,
    /// The stream of the mapping the array belongs to: launches using the object go there, so
    /// that the unmap is ordered after them.
    stream: crate::sys::CUstream,
    api: &'m Api,
    _array: PhantomData<(&'m MappedArray<'m>, K)>,
}

/// A surface object over a mapped image's array; destroyed on drop (`cuSurfObjectDestroy`).
pub type SurfaceObject<'m> = ArrayObject<'m, Surface>;

/// A texture object over a mapped image's array; destroyed on drop (`cuTexObjectDestroy`).
pub type TextureObject<'m> = ArrayObject<'m, Texture>;

impl<'m, K: ObjectKind> ArrayObject<'m, K> {
    /// The object `handle` just made over `array`, owned (destroyed on drop).
    fn made(array: &MappedArray<'m>, handle: u64) -> Self {
        Self { handle, extent: (array.size(), array.texel_bytes()), owned: true, stream: array.stream(), api: array.api(), _array: PhantomData }
    }

    /// The handle a kernel takes (`cudaSurfaceObject_t` or `cudaTextureObject_t`, 64 bits).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// The array's width and height, texels (height 0 for a 1D array), and its texel size in
    /// bytes (`None` for a format [`MappedArray::texel_bytes`] does not know).
    pub fn extent(&self) -> ((usize, usize), Option<usize>) {
        self.extent
    }

    /// The mapping's stream (raw handle): launches that use the object belong there.
    pub fn stream(&self) -> crate::sys::CUstream {
        self.stream
    }
}

impl<'m> SurfaceObject<'m> {
    /// A surface object over `array` (`cuSurfObjectCreate` with a `CU_RESOURCE_TYPE_ARRAY`
    /// description).
    ///
    /// # Errors
    /// The driver's error (the reference: `CUDA_ERROR_INVALID_VALUE` and context errors). An
    /// image registered without `SURFACE_LDST` is not refused here: driver 580 on an H200 made
    /// the object (this workspace's GPU test `gl_image_round_trip_and_its_mistakes`); register
    /// with the flag, as the reference's flag description asks.
    #[doc(alias = "cuSurfObjectCreate")]
    pub fn new(array: &MappedArray<'m>) -> Result<Self> {
        let desc = array_resource(array.raw());
        let mut handle: CUsurfObject = 0;
        // SAFETY: `desc` describes the live mapped array (it lives while 'm does); writes one handle.
        unsafe { array.api().cuSurfObjectCreate(&mut handle, &desc) }?;
        Ok(Self::made(array, handle))
    }
}

/// How a texture object samples: filtering and addressing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Nearest texel, coordinates in texels, clamped at the edges.
    Point,
    /// Bilinear between the four nearest texels, coordinates in texels, clamped. 8- and 16-bit
    /// integer formats are read as normalized floats (no `CU_TRSF_READ_AS_INTEGER`); the
    /// driver refuses linear filtering of 32-bit integer formats.
    Linear,
}

impl<'m> TextureObject<'m> {
    /// A texture object over `array` with `sampling`, unnormalized coordinates and clamped
    /// addressing (`cuTexObjectCreate`, no resource view).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuTexObjectCreate")]
    pub fn new(array: &MappedArray<'m>, sampling: Sampling) -> Result<Self> {
        let res = array_resource(array.raw());
        let tex = CUDA_TEXTURE_DESC {
            address_mode: [texture::ADDRESS_CLAMP; 3],
            filter_mode: match sampling {
                Sampling::Point => texture::FILTER_POINT,
                Sampling::Linear => texture::FILTER_LINEAR,
            },
            ..Default::default()
        };
        let mut handle: CUtexObject = 0;
        // SAFETY: both descriptions are complete and live for the call, the array is mapped
        // ('m), the view pointer is null (allowed: no view); writes one handle.
        unsafe { array.api().cuTexObjectCreate(&mut handle, &res, &tex, std::ptr::null()) }?;
        Ok(Self::made(array, handle))
    }
}

impl<K: ObjectKind> Drop for ArrayObject<'_, K> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: made by `new` of this kind, destroyed once (loans own nothing); the array it
        // reads is still mapped ('m).
        drop(unsafe { K::destroy(self.api, self.handle) });
    }
}

/// Copies a `width` × `height` texel region from linear device memory (`src`, rows `pitch`
/// bytes apart) into `array` at (0, 0) (`cuMemcpy2DAsync`), on the mapping's stream
/// ([`MappedArray::stream`]), so the copy is ordered after the map and before the unmap.
///
/// # Safety
/// `src` must hold `height` rows of `pitch` bytes, each with `width` texels, readable on the
/// array's device until the copy has run on the mapping's stream.
///
/// # Errors
/// [`Error::InvalidArgument`] when the region is larger than the array, a row than the pitch,
/// or the array's texel size is unknown; the driver's error.
#[doc(alias = "cuMemcpy2DAsync")]
pub unsafe fn copy_device_to_array(src: CUdeviceptr, pitch: usize, array: &MappedArray<'_>, width: usize, height: usize) -> Result<()> {
    let (aw, ah) = array.size();
    let texel = texel_bytes(array)?;
    let row = width * texel;
    if width > aw || height > ah.max(1) || row > pitch {
        return Err(Error::InvalidArgument(format!("a {width}×{height} copy ({row} bytes a row, pitch {pitch}) into a {aw}×{ah} array")));
    }
    let copy = CUDA_MEMCPY2D {
        src_x_in_bytes: 0,
        src_y: 0,
        src_memory_type: memory_type::DEVICE,
        src_host: std::ptr::null(),
        src_device: src,
        src_array: std::ptr::null_mut(),
        src_pitch: pitch,
        dst_x_in_bytes: 0,
        dst_y: 0,
        dst_memory_type: memory_type::ARRAY,
        dst_host: std::ptr::null_mut(),
        dst_device: 0,
        dst_array: array.raw(),
        dst_pitch: 0,
        width_in_bytes: row,
        height,
    };
    // SAFETY: the destination region lies inside the mapped array by the descriptor's width,
    // height and texel size (checked above; the driver checks it too); the source's extent is
    // the caller's contract; `copy` lives for the call; the stream is the mapping's, alive while
    // the mapping ('_) is.
    unsafe { array.api().cuMemcpy2DAsync(&copy, array.stream()) }
}

/// [`copy_device_to_array`] from a device view: `height` rows of `pitch` bytes at the start of
/// `src`, each with `width` texels, into `array` at (0, 0), on the mapping's stream. Safe because
/// the view's length is checked to cover the region; as for kernel launches, the view's owner
/// keeps the memory until the stream has run the copy (a synchronisation before it frees it).
///
/// # Errors
/// [`Error::InvalidArgument`] when `src` is shorter than the region; as [`copy_device_to_array`].
#[doc(alias = "cuMemcpy2DAsync")]
pub fn copy_view_to_array<T: DeviceCopy>(src: DevicePtr<'_, T>, pitch: usize, array: &MappedArray<'_>, width: usize, height: usize) -> Result<()> {
    let texel = texel_bytes(array)?;
    let needed = pitch.saturating_mul(height.saturating_sub(1)).saturating_add(width.saturating_mul(texel));
    if height > 0 && src.bytes() < needed {
        return Err(Error::InvalidArgument(format!(
            "{} bytes of source for {height} rows of pitch {pitch} ({width} texels of {texel} bytes)",
            src.bytes()
        )));
    }
    // SAFETY: `src` holds at least the region's bytes (checked above) on the array's device (a
    // view of this context's memory); its owner keeps it until the stream has run the copy.
    unsafe { copy_device_to_array(src.addr(), pitch, array, width, height) }
}

/// The texel size of `array`, or an error for a format [`MappedArray::texel_bytes`] does not know.
fn texel_bytes(array: &MappedArray<'_>) -> Result<usize> {
    array.texel_bytes().ok_or_else(|| Error::InvalidArgument(format!("array format 0x{:x}: texel size unknown", array.descriptor().format)))
}

/// Copies the whole of `array` into host memory `dst` (rows tightly packed), synchronously:
/// `cuMemcpy2DAsync` on the mapping's stream, then `cuStreamSynchronize` of it. For tests and
/// the lab.
///
/// # Errors
/// [`Error::InvalidArgument`] when `dst` is not exactly the array's size or the texel size is
/// unknown; the driver's error.
#[doc(alias = "cuMemcpy2DAsync")]
pub fn copy_array_to_host(array: &MappedArray<'_>, dst: &mut [u8]) -> Result<()> {
    let (w, h) = array.size();
    let row = w * texel_bytes(array)?;
    let rows = h.max(1);
    if dst.len() != row * rows {
        return Err(Error::InvalidArgument(format!("{} bytes for a {w}×{h} array of {row} bytes a row", dst.len())));
    }
    let copy = CUDA_MEMCPY2D {
        src_x_in_bytes: 0,
        src_y: 0,
        src_memory_type: memory_type::ARRAY,
        src_host: std::ptr::null(),
        src_device: 0,
        src_array: array.raw(),
        src_pitch: 0,
        dst_x_in_bytes: 0,
        dst_y: 0,
        dst_memory_type: memory_type::HOST,
        dst_host: dst.as_mut_ptr().cast(),
        dst_device: 0,
        dst_array: std::ptr::null_mut(),
        dst_pitch: row,
        width_in_bytes: row,
        height: rows,
    };
    // SAFETY: the source is the whole mapped array; `dst` is writable for rows × row bytes
    // (checked) and outlives the copy, which is waited for below before returning; the stream
    // is the mapping's, alive while the mapping is.
    unsafe { array.api().cuMemcpy2DAsync(&copy, array.stream()) }?;
    // SAFETY: the mapping's stream is alive while the mapping ('_) is.
    unsafe { array.api().cuStreamSynchronize(array.stream()) }
}

/// What a [`HeldImages`] object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldKind {
    /// A surface object (`cuSurfObjectCreate`).
    Surface,
    /// A texture object (`cuTexObjectCreate`) with its sampling.
    Texture(Sampling),
}

/// One object that a [`HeldImages`] made and holds: its kind, the mapped image (index into the
/// mapping) whose array it reads or writes, and its handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldObject {
    /// Surface or texture.
    pub kind: HeldKind,
    /// Index of the mapped image.
    pub image: usize,
    /// The handle a kernel takes (`cudaSurfaceObject_t` or `cudaTextureObject_t`, 64 bits).
    pub handle: u64,
    extent: ((usize, usize), Option<usize>),
}

/// Mapped GL images together with the surface and texture objects made over their arrays, for
/// an image workflow that waits between its calls (the demo's step mode: map in one frame, make
/// the objects in the next, launch, destroy, unmap in later ones), where [`SurfaceObject`]'s and
/// [`TextureObject`]'s borrows cannot be stored next to the mapping they borrow.
///
/// It owns the mapping (an [`OwnedMapping`]: the registered images and a share of the stream),
/// and every object it makes; it lends the objects out only as borrows of itself
/// ([`HeldImages::surface`], [`HeldImages::texture`]), so none outlives it. The objects are
/// destroyed before the unmap: by [`HeldImages::destroy_objects`], by [`HeldImages::unmap`]
/// and on drop.
#[derive(Debug)]
pub struct HeldImages {
    objects: Vec<HeldObject>,
    /// `Some` until [`HeldImages::unmap`] takes it.
    mapping: Option<OwnedMapping>,
}

impl HeldImages {
    /// Maps `images` (registered GL images) with one `cuGraphicsMapResources` on `stream`, taking them.
    ///
    /// # Errors
    /// As [`OwnedMapping::map`]; the images come back with the error.
    #[doc(alias = "cuGraphicsMapResources")]
    pub fn map(images: Vec<GraphicsResource>, stream: Rc<Stream>) -> std::result::Result<HeldImages, (Error, Vec<GraphicsResource>)> {
        OwnedMapping::map(images, stream).map(|m| HeldImages { objects: Vec::new(), mapping: Some(m) })
    }

    fn mapping(&self) -> Result<&OwnedMapping> {
        self.mapping.as_ref().ok_or_else(|| Error::InvalidArgument("the images were unmapped".into()))
    }

    /// The array of layer 0, level 0 of mapped image `image` (`cuGraphicsSubResourceGetMappedArray`).
    ///
    /// # Errors
    /// As [`OwnedMapping::array`].
    #[doc(alias = "cuGraphicsSubResourceGetMappedArray")]
    pub fn array(&self, image: usize) -> Result<MappedArray<'_>> {
        self.mapping()?.array(image, 0, 0)
    }

    /// The mapped images (read only).
    pub fn resources(&self) -> &[GraphicsResource] {
        self.mapping.as_ref().map_or(&[], OwnedMapping::resources)
    }

    /// The objects made so far, in order.
    pub fn objects(&self) -> &[HeldObject] {
        &self.objects
    }

    /// Makes a surface object over image `image`'s array (`cuGraphicsSubResourceGetMappedArray`,
    /// `cuSurfObjectCreate`) and holds it; returns its index among [`HeldImages::objects`].
    ///
    /// # Errors
    /// As [`SurfaceObject::new`].
    #[doc(alias = "cuSurfObjectCreate")]
    pub fn make_surface(&mut self, image: usize) -> Result<usize> {
        let array = self.mapping()?.array(image, 0, 0)?;
        // Held by handle from here: destroyed by `destroy_objects`, before the unmap.
        let s = std::mem::ManuallyDrop::new(SurfaceObject::new(&array)?);
        self.objects.push(HeldObject { kind: HeldKind::Surface, image, handle: s.handle, extent: s.extent });
        Ok(self.objects.len() - 1)
    }

    /// Makes a texture object over image `image`'s array with `sampling` (as
    /// [`TextureObject::new`]) and holds it; returns its index among [`HeldImages::objects`].
    ///
    /// # Errors
    /// As [`TextureObject::new`].
    #[doc(alias = "cuTexObjectCreate")]
    pub fn make_texture(&mut self, image: usize, sampling: Sampling) -> Result<usize> {
        let array = self.mapping()?.array(image, 0, 0)?;
        // Held by handle from here: destroyed by `destroy_objects`, before the unmap.
        let t = std::mem::ManuallyDrop::new(TextureObject::new(&array, sampling)?);
        self.objects.push(HeldObject { kind: HeldKind::Texture(sampling), image, handle: t.handle, extent: t.extent });
        Ok(self.objects.len() - 1)
    }

    fn api(&self) -> Result<&Api> {
        Ok(self.mapping()?.stream().context().api())
    }

    /// Held object `o` as an object of kind `K` that owns nothing (see [`HeldImages::surface`]).
    fn loan<K: ObjectKind>(&self, o: &HeldObject) -> Result<ArrayObject<'_, K>> {
        Ok(ArrayObject {
            handle: o.handle,
            extent: o.extent,
            owned: false,
            stream: self.mapping()?.stream().raw(),
            api: self.api()?,
            _array: PhantomData,
        })
    }

    /// Held object `index` as a surface object, lent for as long as `self` is borrowed: the loan
    /// does not own the object, so dropping it destroys nothing ([`HeldImages`] does).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no such object or it is a texture object.
    pub fn surface(&self, index: usize) -> Result<SurfaceObject<'_>> {
        match self.objects.get(index) {
            Some(o) if o.kind == HeldKind::Surface => self.loan(o),
            _ => Err(Error::InvalidArgument(format!("held object {index} is not a surface object"))),
        }
    }

    /// Held object `index` as a texture object, lent as [`HeldImages::surface`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no such object or it is a surface object.
    pub fn texture(&self, index: usize) -> Result<TextureObject<'_>> {
        match self.objects.get(index) {
            Some(o) if matches!(o.kind, HeldKind::Texture(_)) => self.loan(o),
            _ => Err(Error::InvalidArgument(format!("held object {index} is not a texture object"))),
        }
    }

    /// Destroys every held object (`cuSurfObjectDestroy`, `cuTexObjectDestroy`), newest first;
    /// the mapping stays. Returns the first error; every object is destroyed (or given up) anyway.
    ///
    /// # Errors
    /// The driver's error of the first destroy that failed.
    #[doc(alias = "cuSurfObjectDestroy")]
    #[doc(alias = "cuTexObjectDestroy")]
    pub fn destroy_objects(&mut self) -> Result<()> {
        let objects = std::mem::take(&mut self.objects);
        let Some(m) = self.mapping.as_ref() else { return Ok(()) };
        let api = m.stream().context().api();
        let mut first = Ok(());
        for o in objects.iter().rev() {
            let r = match o.kind {
                // SAFETY: made by `make_surface` over a still-mapped array, destroyed once (taken
                // out of `objects` above); no loan of it outlives `&mut self` (and loans own nothing).
                HeldKind::Surface => unsafe { Surface::destroy(api, o.handle) },
                // SAFETY: as above, made by `make_texture`.
                HeldKind::Texture(_) => unsafe { Texture::destroy(api, o.handle) },
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Destroys the objects, then unmaps (one `cuGraphicsUnmapResources` on the mapping's
    /// stream) and hands the images back, with the first error.
    #[doc(alias = "cuGraphicsUnmapResources")]
    pub fn unmap(mut self) -> (Vec<GraphicsResource>, Result<()>) {
        let destroyed = self.destroy_objects();
        let Some(m) = self.mapping.take() else { return (Vec::new(), destroyed) };
        let (images, r) = m.unmap();
        (images, destroyed.and(r))
    }
}

impl Drop for HeldImages {
    fn drop(&mut self) {
        // Objects first; the mapping unmaps when its field drops after this. An error here
        // cannot be returned; callers who care call `unmap`.
        drop(self.destroy_objects());
    }
}
