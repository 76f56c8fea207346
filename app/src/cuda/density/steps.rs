//! The density view one step at a time (step mode): each method is one step of
//! [`crate::backend::step`]'s image workflow — one driver call, or one small group — and the
//! mapping, the arrays and the objects wait between the steps in an [`interop::safe::HeldImages`].
//! Each step that queues stream work records events 0 and 1 around it, for the timeline
//! ([`DensityView::take_spans`]).
//!
//! While the images are mapped GL must not sample them: the map step first copies the shown
//! image into a GL-owned snapshot, which [`DensityView::draw_step`] draws until the draw step.

use std::rc::Rc;

use anyhow::Context as _;
use glam::Mat4;
use interop::{safe::HeldImages, safe::HeldKind, safe::Sampling, DevicePtr, Stream};

use super::{DensityView, StepHold};
use crate::cuda::settings::DensityPath;
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;

/// One image of the view as step mode shows it: its name, GL texture, whether it is mapped and
/// its array's handle once taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepImage {
    /// `"density (R32F)"` or `"shown (RGBA8)"`.
    pub name: &'static str,
    /// GL texture name.
    pub gl_texture: u32,
    /// Mapped for CUDA now (held by step mode).
    pub mapped: bool,
    /// The array's handle, once taken in this mapping.
    pub array: Option<u64>,
}

impl DensityView {
    fn held(&self) -> anyhow::Result<&HeldImages> {
        self.step.held.as_ref().context("the density images are not mapped")
    }

    /// Records event `i` on `stream`.
    fn mark(&self, i: usize, stream: &Stream) -> anyhow::Result<()> {
        self.events[i].record(stream).context("cuEventRecord (density view)")
    }

    /// A step's stream work ends: event 1 after it, and its span due for the timeline.
    fn span_done(&mut self, name: &'static str, stream: &Stream) -> anyhow::Result<()> {
        self.mark(1, stream)?;
        self.pending = false;
        self.due = vec![(name, 0, 1)];
        Ok(())
    }

    /// Map step: the shown image copied into the snapshot (GL's last look at it), then both
    /// images mapped with one `cuGraphicsMapResources` on `stream` and held.
    ///
    /// # Errors
    /// No textures, a snapshot GL cannot make, or the driver's error (the images stay registered).
    pub fn step_map(&mut self, gl: Gl<'_>, stream: &Rc<Stream>) -> anyhow::Result<String> {
        anyhow::ensure!(self.step.held.is_none(), "the density images are mapped already");
        let t = self.textures.as_mut().context("the density view has no textures")?;
        t.snapshot_image(gl).context("the density image's snapshot")?;
        self.mark(0, stream)?;
        match HeldImages::map(std::mem::take(&mut self.images), Rc::clone(stream)) {
            Ok(h) => self.step = StepHold { held: Some(h), arrays: None, objects: None, show_snapshot: true },
            Err((e, back)) => {
                self.images = back;
                return Err(anyhow::Error::new(e).context("cuGraphicsMapResources (density images)"));
            }
        }
        self.span_done("density: map images", stream)?;
        Ok("both images mapped on the frame's stream; CUDA owns them, GL draws a copy taken before the map".into())
    }

    /// Arrays step: `cuGraphicsSubResourceGetMappedArray` of each image (layer 0, level 0).
    ///
    /// # Errors
    /// Not mapped, or the driver's error.
    pub fn step_arrays(&mut self) -> anyhow::Result<String> {
        let h = self.held()?;
        let d = h.array(0).context("cuGraphicsSubResourceGetMappedArray (density)")?;
        let i = h.array(1).context("cuGraphicsSubResourceGetMappedArray (image)")?;
        let (dw, dh) = d.size();
        let msg = format!(
            "arrays {:#x} (density, {dw}×{dh}) and {:#x} (shown image): no device pointer, kernels reach them through objects",
            d.raw() as usize,
            i.raw() as usize
        );
        self.step.arrays = Some([d.raw() as usize as u64, i.raw() as usize as u64]);
        Ok(msg)
    }

    /// Objects step: over the density array a surface object (surface path: the store writes
    /// it) and a texture object (bilinear: the tone map reads it); over the shown array a
    /// surface object (the tone map writes it).
    ///
    /// # Errors
    /// Not mapped, or the driver's error (objects made before it stay held until the unmap).
    pub fn step_objects(&mut self) -> anyhow::Result<String> {
        anyhow::ensure!(self.step.arrays.is_some(), "no arrays taken");
        let path = self.path;
        let h = self.step.held.as_mut().context("the density images are not mapped")?;
        let store = match path {
            DensityPath::Surface => Some(h.make_surface(0).context("cuSurfObjectCreate (density)")?),
            DensityPath::Copy => None,
        };
        let texture = h.make_texture(0, Sampling::Linear).context("cuTexObjectCreate (density)")?;
        let out = h.make_surface(1).context("cuSurfObjectCreate (image)")?;
        self.step.objects = Some((store, texture, out));
        Ok(match store {
            Some(_) => "surface object over the density array (the store writes it), texture object over it (the tone map reads it), surface object over the shown array",
            None => "texture object over the density array (the tone map reads it), surface object over the shown array (the copy path stores with cuMemcpy2D, no surface)",
        }
        .into())
    }

    /// Splat step: the first `n` bodies of `pos` as `view_proj` projects them, each body's mass
    /// added to its pixel of the linear sum (`atomicAdd`: surfaces have no atomics).
    ///
    /// # Errors
    /// No objects yet, or the launch's error.
    pub fn step_splat(&mut self, pos: DevicePtr<'_, [f32; 4]>, n: usize, view_proj: Mat4, stream: &Stream) -> anyhow::Result<String> {
        anyhow::ensure!(self.step.objects.is_some(), "no objects made");
        let [w, h] = self.size().map(|v| v as usize);
        let rows = super::clip_rows(view_proj);
        self.mark(0, stream)?;
        self.kernels.splat(n, pos, self.accum.view(), (w, h), rows, stream).context("nbody_density_splat")?;
        self.span_done("density: splat", stream)?;
        Ok(format!("{n} bodies splatted into the {w}×{h} sum (linear memory)"))
    }

    /// Store step: the sum into the density array, through its surface object (a kernel) or by
    /// `cuMemcpy2DAsync` (copy path); the sum is cleared for the next pass.
    ///
    /// # Errors
    /// No objects, or the driver's error.
    pub fn step_store(&mut self, stream: &Stream) -> anyhow::Result<String> {
        let (store, _, _) = self.step.objects.context("no objects made")?;
        self.mark(0, stream)?;
        let h = self.step.held.as_ref().context("the density images are not mapped")?;
        let density = h.array(0).context("cuGraphicsSubResourceGetMappedArray (density)")?;
        match store {
            Some(i) => DensityView::store(&self.kernels, &mut self.accum, &density, Some(&h.surface(i)?), stream)?,
            None => DensityView::store(&self.kernels, &mut self.accum, &density, None, stream)?,
        }
        self.span_done("density: store", stream)?;
        Ok(match store {
            Some(_) => "nbody_density_store wrote the sum into the density array through the surface object (surf2Dwrite)",
            None => "cuMemcpy2DAsync copied the sum into the density array (ordered between the map and the unmap)",
        }
        .into())
    }

    /// Tone-map step: the density array read through its texture object, the shown array
    /// written through its surface object, with `gain` (see [`DensityView::run`]).
    ///
    /// # Errors
    /// No objects, or the launch's error.
    pub fn step_tonemap(&mut self, gain: f32, stream: &Stream) -> anyhow::Result<String> {
        let (_, texture, out) = self.step.objects.context("no objects made")?;
        let [w, h] = self.size().map(|v| v as usize);
        self.mark(0, stream)?;
        let held = self.held()?;
        self.kernels.tonemap(&held.texture(texture)?, (w, h), gain, &held.surface(out)?, stream).context("nbody_density_tonemap")?;
        self.span_done("density: tone map", stream)?;
        Ok("nbody_density_tonemap read the density (texture object, bilinear) and wrote the shown image (surface object)".into())
    }

    /// Destroy step: every object destroyed (`cuSurfObjectDestroy`, `cuTexObjectDestroy`); the
    /// images stay mapped.
    ///
    /// # Errors
    /// Not mapped, or the driver's error.
    pub fn step_destroy(&mut self) -> anyhow::Result<String> {
        let h = self.step.held.as_mut().context("the density images are not mapped")?;
        let k = h.objects().len();
        h.destroy_objects().context("cuSurfObjectDestroy / cuTexObjectDestroy")?;
        self.step.objects = None;
        Ok(format!("{k} objects destroyed; the images stay mapped"))
    }

    /// Unmap step: one `cuGraphicsUnmapResources` on the mapping's stream; the images go back
    /// to the view (registered), GL's again. The new image is drawn at the draw step.
    ///
    /// # Errors
    /// Not mapped, or the driver's error (the images come back anyway).
    pub fn step_unmap(&mut self, stream: &Stream) -> anyhow::Result<String> {
        let h = self.step.held.take().context("the density images are not mapped")?;
        self.mark(0, stream)?;
        let (images, r) = h.unmap();
        self.images = images;
        self.step.arrays = None;
        self.step.objects = None;
        r.context("cuGraphicsUnmapResources (density images)")?;
        self.span_done("density: unmap images", stream)?;
        Ok("images unmapped on the stream: GL's draws are ordered after the kernels".into())
    }

    /// Draw step: from now on [`DensityView::draw_step`] draws the new image, not the snapshot.
    pub fn step_drawn(&mut self) -> String {
        self.step.show_snapshot = false;
        "GL draws the shown image full-screen".into()
    }

    /// Ends a step-mode hold early: objects destroyed, images unmapped and back in the view.
    /// Nothing to do when the images are not held.
    ///
    /// # Errors
    /// The driver's error of a destroy or the unmap (the images come back anyway).
    pub fn leave_steps(&mut self) -> anyhow::Result<()> {
        self.step.arrays = None;
        self.step.objects = None;
        let Some(h) = self.step.held.take() else { return Ok(()) };
        let (images, r) = h.unmap();
        self.images = images;
        r.context("cuGraphicsUnmapResources (leaving step mode's image pass)")
    }

    /// Whether step mode holds the images mapped.
    pub fn images_held(&self) -> bool {
        self.step.held.is_some()
    }

    /// Step mode's draw: the snapshot from the map step until the draw step, else the shown
    /// image; without textures the target is cleared. No CUDA work.
    pub fn draw_step(&self, gl: Gl<'_>, target: &RenderTarget) {
        let tex = self.textures.as_ref().and_then(|t| if self.step.show_snapshot { t.snapshot } else { Some(t.image) });
        match (&self.pass, tex) {
            (Some(p), Some(t)) => p.draw(gl, target, t),
            _ => target.clear(gl),
        }
    }

    /// The two images and the objects that exist now, for the step-mode panel.
    pub fn step_images(&self) -> (Vec<StepImage>, Vec<String>) {
        let Some(t) = &self.textures else { return (Vec::new(), Vec::new()) };
        let (d, i) = t.names();
        let mapped = self.step.held.is_some();
        let arrays = self.step.arrays;
        let images = vec![
            StepImage { name: "density (R32F)", gl_texture: d, mapped, array: arrays.map(|a| a[0]) },
            StepImage { name: "shown (RGBA8)", gl_texture: i, mapped, array: arrays.map(|a| a[1]) },
        ];
        let names = ["density", "shown image"];
        let objects = self.step.held.as_ref().map_or_else(Vec::new, |h| {
            h.objects()
                .iter()
                .map(|o| {
                    let kind = match o.kind {
                        HeldKind::Surface => "surface object",
                        HeldKind::Texture(_) => "texture object",
                    };
                    format!("{kind} {:#x} over the {} array", o.handle, names.get(o.image).unwrap_or(&"?"))
                })
                .collect()
        });
        (images, objects)
    }
}
