//! The density view on the CUDA side: the image workflow of the driver API each frame, on the
//! two textures of [`DensityTextures`] (`kernels/README.md`, "density view"):
//!
//! ```text
//! register (once, and again on resize)  cuGraphicsGLRegisterImage      R32F: SURFACE_LDST (surface path) | NONE (copy path)
//!                                                                       RGBA8: SURFACE_LDST, map flag WRITE_DISCARD
//! map                                   cuGraphicsMapResources          both images, one call, on the backend's stream
//! get the arrays                        cuGraphicsSubResourceGetMappedArray
//! splat                                 nbody_density_splat             mass per pixel, atomicAdd into linear memory
//! store   (surface path)                cuSurfObjectCreate + nbody_density_store (surf2Dwrite, and clears the sum)
//!         (copy path)                   cuMemcpy2DAsync into the array, cuMemsetD8Async of the sum
//! tone map                              cuTexObjectCreate + cuSurfObjectCreate + nbody_density_tonemap
//! destroy the objects                   cuTexObjectDestroy, cuSurfObjectDestroy
//! unmap                                 cuGraphicsUnmapResources        GL's later draws see CUDA's writes
//! draw                                  ImagePass: the RGBA8 texture full-screen
//! unregister (resize, teardown)         cuGraphicsUnregisterResource, then glDeleteTextures
//! ```
//!
//! Surfaces have no atomic operations (CUDA Programming Guide, "Surface Functions"), so the sum
//! is made in a linear buffer and stored into the image afterwards: by a kernel through a surface
//! object, or by `cuMemcpy2D` (`--density-path`).
//!
//! Events on the stream bound each part of a pass (map, splat, store, tone map, unmap), so the
//! timeline places them on the CUDA track ([`DensityView::take_spans`]). Step mode takes the
//! same workflow one call (or one small group) at a time (the `steps` module, on
//! [`interop::safe::HeldImages`]).

mod steps;

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use glam::Mat4;
use interop::sys::{event_flags, map_flags, register_flags};
use interop::{
    map_resources, safe::HeldImages, safe::Sampling, Context, DeviceBuffer, DevicePtr, Event, GraphicsResource, MappedArray, Stream, SurfaceObject,
    TextureObject,
};
use kernels::DensityKernels;

use super::clock::GpuClock;
use super::settings::DensityPath;
use crate::gfx::density::{DensityTextures, ImagePass};
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;

/// Spans of CUDA-stream work, back to back from `start` (the host instant of the first one's
/// start, placed by a [`GpuClock`]): (name, ms), `None` where an event did not complete.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSpans {
    /// Where the first span starts on the host clock (`None`: not placed).
    pub start: Option<Instant>,
    /// Name and length, ms, in order.
    pub spans: Vec<(&'static str, Option<f64>)>,
}

/// The parts of a whole pass, each between two of the pass's events (their indices).
const PASS_SPANS: [(&str, usize, usize); 5] =
    [("density: map images", 0, 1), ("density: splat", 1, 2), ("density: store", 2, 3), ("density: tone map", 3, 4), ("density: unmap images", 4, 5)];

/// Step mode's hold on the images between steps: the mapping with its objects, the arrays'
/// handles and which objects are which.
#[derive(Debug, Default)]
struct StepHold {
    /// The images while mapped (they are inside it then: `DensityView::images` is empty).
    held: Option<HeldImages>,
    /// The arrays' handles (density, shown), once taken.
    arrays: Option<[u64; 2]>,
    /// Indices into the held objects: the density surface (surface path), the density texture,
    /// the shown image's surface.
    objects: Option<(Option<usize>, usize, usize)>,
    /// Draw the snapshot, not the image: from the map until the draw step.
    show_snapshot: bool,
}

/// The density view of one CUDA context: the GL textures and their registrations, the linear
/// sum, the kernels, the full-screen pass and the events around each part of the CUDA work.
///
/// Teardown: [`DensityView::release`] (unregister, then delete the GL objects). Dropped without
/// it, the registrations are undone and the GL objects stay until the context goes.
pub struct DensityView {
    /// [R32F density, RGBA8 image], registered; unregistered before the textures are deleted.
    images: Vec<GraphicsResource>,
    /// `[height][width]` f32: the mass per pixel, zero between frames.
    accum: DeviceBuffer<f32>,
    kernels: DensityKernels,
    /// A pass: before the map, after it, after the splat, the store, the tone map, the unmap.
    /// A step-mode step: before and after its work (0 and 1).
    events: [Event; 6],
    /// Events 0 and 4 hold a pass whose time is not yet read.
    pending: bool,
    last_ms: Option<f64>,
    /// Spans recorded but not yet handed to the timeline: (name, start event, end event).
    due: Vec<(&'static str, usize, usize)>,
    /// Step mode: what waits between steps.
    step: StepHold,
    textures: Option<DensityTextures>,
    pass: Option<ImagePass>,
    path: DensityPath,
    ctx: Arc<Context>,
}

impl std::fmt::Debug for DensityView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DensityView").field("size", &self.size()).field("path", &self.path).finish_non_exhaustive()
    }
}

/// Registers the two textures: the density image (with `SURFACE_LDST` where a kernel stores
/// into it) and the shown image (`SURFACE_LDST`; its map flag `WRITE_DISCARD`: CUDA writes every
/// texel and reads none).
fn register(ctx: &Arc<Context>, t: &DensityTextures, path: DensityPath) -> anyhow::Result<Vec<GraphicsResource>> {
    let (density, image) = t.names();
    let density_flags = match path {
        DensityPath::Surface => register_flags::SURFACE_LDST,
        DensityPath::Copy => register_flags::NONE,
    };
    let d =
        GraphicsResource::register_gl_image(ctx, density, glow::TEXTURE_2D, density_flags).context("cuGraphicsGLRegisterImage (GL_R32F density)")?;
    let mut i = GraphicsResource::register_gl_image(ctx, image, glow::TEXTURE_2D, register_flags::SURFACE_LDST)
        .context("cuGraphicsGLRegisterImage (GL_RGBA8 image)")?;
    i.set_map_flags(map_flags::WRITE_DISCARD).context("cuGraphicsResourceSetMapFlags (WRITE_DISCARD)")?;
    Ok(vec![d, i])
}

/// Rows 0, 1 and 3 of `view_proj` (GL clip x, y and w), as `nbody_density_splat` takes them.
pub(crate) fn clip_rows(view_proj: Mat4) -> [[f32; 4]; 3] {
    [view_proj.row(0).to_array(), view_proj.row(1).to_array(), view_proj.row(3).to_array()]
}

impl DensityView {
    /// The view at `size` (the target's pixels): the textures made and registered in `ctx`
    /// (current, on the GL context's device), the sum allocated and cleared on `stream`.
    ///
    /// # Errors
    /// GL cannot make the textures or the pass; the driver refuses a registration or an
    /// allocation. Whatever was made is released first.
    pub fn new(
        gl: Gl<'_>,
        is_gles: bool,
        ctx: &Arc<Context>,
        kernels: DensityKernels,
        size: [u32; 2],
        path: DensityPath,
        stream: &Stream,
    ) -> anyhow::Result<Self> {
        let mut view = DensityView::unregistered(gl, is_gles, ctx, kernels, path)?;
        if let Err(e) = view.resize(gl, size, stream) {
            view.release(gl);
            return Err(e);
        }
        Ok(view)
    }

    /// The view without textures (no registration yet: [`DensityView::resize`] makes and
    /// registers them; step mode's register step does).
    ///
    /// # Errors
    /// GL cannot make the pass; the driver refuses an event or the allocation.
    pub fn unregistered(gl: Gl<'_>, is_gles: bool, ctx: &Arc<Context>, kernels: DensityKernels, path: DensityPath) -> anyhow::Result<Self> {
        let mut events = Vec::with_capacity(6);
        for _ in 0..6 {
            events.push(Event::new(ctx, event_flags::DEFAULT)?);
        }
        let events: [Event; 6] = events.try_into().map_err(|_| anyhow::anyhow!("six events"))?;
        let pass = ImagePass::new(gl, is_gles).context("the density view's full-screen pass")?;
        let accum = match DeviceBuffer::alloc(ctx, 1) {
            Ok(a) => a,
            Err(e) => {
                pass.delete(gl);
                return Err(e.into());
            }
        };
        Ok(DensityView {
            images: Vec::new(),
            accum,
            kernels,
            events,
            pending: false,
            last_ms: None,
            due: Vec::new(),
            step: StepHold::default(),
            textures: None,
            pass: Some(pass),
            path,
            ctx: Arc::clone(ctx),
        })
    }

    /// Width and height, pixels (0 × 0 before the first size).
    pub fn size(&self) -> [u32; 2] {
        self.textures.as_ref().map_or([0, 0], |t| t.size)
    }

    /// How the density image is written.
    pub fn path(&self) -> DensityPath {
        self.path
    }

    /// Remakes the textures at `size` if it changed: unregister, delete, make, register (the
    /// image workflow's lifecycle: a registration names one texture's storage), and the sum.
    ///
    /// # Errors
    /// As [`DensityView::new`]; the view then has no textures and [`DensityView::run`] fails.
    pub fn resize(&mut self, gl: Gl<'_>, size: [u32; 2], stream: &Stream) -> anyhow::Result<()> {
        if self.size() == size {
            return Ok(());
        }
        self.unregister_images(gl, stream)?;
        let t = DensityTextures::new(gl, size)?;
        let images = match register(&self.ctx, &t, self.path) {
            Ok(i) => i,
            Err(e) => {
                t.delete(gl);
                return Err(e);
            }
        };
        let pixels = size[0] as usize * size[1] as usize;
        let mut accum = DeviceBuffer::alloc(&self.ctx, pixels).context("the density view's sum (cuMemAlloc)")?;
        accum.memset_async(0, stream)?;
        self.accum = accum;
        self.images = images;
        self.textures = Some(t);
        self.pending = false;
        self.due.clear();
        Ok(())
    }

    /// Unregisters both images (after the stream's work on them; a step-mode hold is ended
    /// first), then deletes their textures: the view has no textures afterwards.
    ///
    /// # Errors
    /// The stream cannot be synchronised, or ending a step-mode hold failed (the images are
    /// unregistered and deleted anyway).
    pub fn unregister_images(&mut self, gl: Gl<'_>, stream: &Stream) -> anyhow::Result<()> {
        let left = self.leave_steps();
        let synced = stream.synchronize();
        self.images.clear();
        if let Some(t) = self.textures.take() {
            t.delete(gl);
        }
        self.due.clear();
        left?;
        Ok(synced?)
    }

    /// Whether both images are registered (the view has its textures).
    pub fn registered(&self) -> bool {
        self.textures.is_some()
    }

    /// Stores the sum into the density image `density`: through `surface` (a kernel,
    /// `nbody_density_store`, which clears the sum), or without one by `cuMemcpy2DAsync` and a
    /// clear of the sum (`cuMemsetD8Async`); on `stream`, the mapping's.
    fn store(
        kernels: &DensityKernels,
        accum: &mut DeviceBuffer<f32>,
        density: &MappedArray<'_>,
        surface: Option<&SurfaceObject<'_>>,
        stream: &Stream,
    ) -> anyhow::Result<()> {
        let (w, h) = density.size();
        match surface {
            Some(surface) => kernels.store(accum.view(), (w, h), surface, stream).context("nbody_density_store"),
            None => {
                interop::safe::image::copy_view_to_array(accum.view(), w * 4, density, w, h).context("cuMemcpy2DAsync (sum → density array)")?;
                accum.memset_async(0, stream).context("cuMemsetD8Async (the sum)")
            }
        }
    }

    /// The spans recorded since the last call, placed by `clock` (waits for their last event):
    /// a whole pass's map, splat, store, tone map and unmap, or a step-mode step's work.
    ///
    /// # Errors
    /// The driver's error of the wait or an elapsed time.
    pub fn take_spans(&mut self, clock: &GpuClock) -> anyhow::Result<Option<StreamSpans>> {
        let due = std::mem::take(&mut self.due);
        let (Some(first), Some(last)) = (due.first(), due.last()) else { return Ok(None) };
        self.events[last.2].synchronize().context("cuEventSynchronize (density view)")?;
        let start = clock.at(&self.events[first.1])?;
        let mut spans = Vec::with_capacity(due.len());
        for (name, a, b) in due {
            spans.push((name, super::session::ms(&self.events[a], &self.events[b])?));
        }
        Ok(Some(StreamSpans { start, spans }))
    }

    /// One pass on `stream`: map both images, splat the first `n` bodies of `pos` (`[N][4]` f32)
    /// as `view_proj` projects them, store the sum into the density image, tone-map it into the
    /// shown image with `gain` (the mass per pixel that maps to 1, inverted), unmap. The previous
    /// pass's time is read first ([`DensityView::last_ms`]).
    ///
    /// # Errors
    /// No textures (a failed resize), or the driver's error for the failing call, named.
    pub fn run(&mut self, pos: DevicePtr<'_, [f32; 4]>, n: usize, view_proj: Mat4, gain: f32, stream: &Stream) -> anyhow::Result<()> {
        self.read_time();
        let size = self.size();
        anyhow::ensure!(self.textures.is_some(), "the density view has no textures (its last resize failed)");
        anyhow::ensure!(self.step.held.is_none(), "the density images are held mapped by step mode");
        self.step.show_snapshot = false;
        let (w, h) = (size[0] as usize, size[1] as usize);
        let rows = clip_rows(view_proj);
        let [e0, e1, e2, e3, e4, e5] = &self.events;
        e0.record(stream)?;
        let mapping = map_resources(&mut self.images, stream).context("cuGraphicsMapResources (density images)")?;
        e1.record(stream)?;
        let density = mapping.array(0, 0, 0).context("cuGraphicsSubResourceGetMappedArray (density)")?;
        let image = mapping.array(1, 0, 0).context("cuGraphicsSubResourceGetMappedArray (image)")?;
        self.kernels.splat(n, pos, self.accum.view(), (w, h), rows, stream).context("nbody_density_splat")?;
        e2.record(stream)?;
        match self.path {
            DensityPath::Surface => {
                let surface = SurfaceObject::new(&density).context("cuSurfObjectCreate (density)")?;
                Self::store(&self.kernels, &mut self.accum, &density, Some(&surface), stream)?;
            }
            DensityPath::Copy => Self::store(&self.kernels, &mut self.accum, &density, None, stream)?,
        }
        e3.record(stream)?;
        let texture = TextureObject::new(&density, Sampling::Linear).context("cuTexObjectCreate (density)")?;
        let out = SurfaceObject::new(&image).context("cuSurfObjectCreate (image)")?;
        self.kernels.tonemap(&texture, (w, h), gain, &out, stream).context("nbody_density_tonemap")?;
        drop((out, texture, image, density));
        e4.record(stream)?;
        mapping.unmap().context("cuGraphicsUnmapResources (density images)")?;
        e5.record(stream)?;
        self.pending = true;
        self.due = PASS_SPANS.to_vec();
        Ok(())
    }

    /// The density image and the shown image as the last pass left them (`[height][width]` f32
    /// mass per pixel, and `[height][width][4]` RGBA8; row 0 at the bottom), read through a map
    /// on `stream` and `cuMemcpy2D` into host memory: for tests and the record.
    ///
    /// # Errors
    /// No textures; the driver's error for the map, the arrays or the copies.
    pub fn read_images(&mut self, stream: &Stream) -> anyhow::Result<(Vec<f32>, Vec<u8>)> {
        let [w, h] = self.size();
        anyhow::ensure!(self.textures.is_some(), "the density view has no textures");
        anyhow::ensure!(self.step.held.is_none(), "the density images are held mapped by step mode");
        let pixels = w as usize * h as usize;
        let (mut density, mut image) = (vec![0u8; pixels * 4], vec![0u8; pixels * 4]);
        // The shown image is read, so its WRITE_DISCARD map flag is lifted for this map.
        self.images[1].set_map_flags(map_flags::NONE)?;
        let mapping = map_resources(&mut self.images, stream)?;
        interop::safe::image::copy_array_to_host(&mapping.array(0, 0, 0)?, &mut density)?;
        interop::safe::image::copy_array_to_host(&mapping.array(1, 0, 0)?, &mut image)?;
        mapping.unmap()?;
        self.images[1].set_map_flags(map_flags::WRITE_DISCARD)?;
        let density = density.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect();
        Ok((density, image))
    }

    /// Draws the shown image over `target` (after [`DensityView::run`]: the unmap orders CUDA's
    /// writes before this draw).
    pub fn draw(&self, gl: Gl<'_>, target: &RenderTarget) {
        if let (Some(p), Some(t)) = (&self.pass, &self.textures) {
            p.draw(gl, target, t.image);
        }
    }

    /// Reads the last pass's time if its events have completed.
    fn read_time(&mut self) {
        if self.pending {
            if let Ok(Some(ms)) = Event::elapsed_ms(&self.events[0], &self.events[4]) {
                self.last_ms = Some(f64::from(ms));
                self.pending = false;
            }
        }
    }

    /// GPU time of the last completed pass, ms: map, splat, store, tone map (CUDA events
    /// recorded before the map and before the unmap).
    pub fn last_ms(&mut self) -> Option<f64> {
        self.read_time();
        self.last_ms
    }

    /// Unregisters both images (after the stream's work on them), then deletes the textures and
    /// the pass.
    pub fn release(&mut self, gl: Gl<'_>) {
        if let Err(e) = self.accum.context().make_current() {
            tracing::warn!("cuCtxSetCurrent before unregistering the density images: {e:#}");
        }
        if let Err(e) = self.leave_steps() {
            tracing::warn!("ending step mode's hold on the density images: {e:#}");
        }
        self.images.clear();
        if let Some(t) = self.textures.take() {
            t.delete(gl);
        }
        if let Some(p) = self.pass.take() {
            p.delete(gl);
        }
    }
}
