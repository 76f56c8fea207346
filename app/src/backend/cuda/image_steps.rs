//! Step mode's image workflow (`--view density`): after the buffers' steps of the frame, the
//! density pass one step at a time ([`crate::backend::step`]: register → map → arrays → objects
//! → splat → store → tone map → destroy → unmap → draw; unregister on a resize), each step a
//! call of [`crate::cuda::density::DensityView`]'s step methods. The render step of each frame
//! only draws (`density_step_draw`): the image, or while the images are mapped the snapshot
//! taken before their map; it also tells the state machine what the view needs next
//! ([`Images`]) by keeping the target it drew ([`DensityTarget`]).

use std::rc::Rc;

use anyhow::Context as _;

use super::density::density_gain;
use super::storage::map::with_shown_vbo;
use super::CudaBackend;
use crate::backend::step::{Images, WorkflowStep};
use crate::cuda::density::DensityView;
use crate::cuda::settings::DensityPath;
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;

/// What the last step-mode frame drew in the density view: the target's size, the camera's
/// projection (the splat's) and the density path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DensityTarget {
    /// Width and height of the target, pixels.
    pub size: [u32; 2],
    /// The bodies' projection into GL clip space.
    pub view_proj: glam::Mat4,
    /// Surface or copy.
    pub path: DensityPath,
}

impl CudaBackend {
    /// What the step after `AwaitDraw` needs (the state machine's input): `Off` in the points
    /// view (no density target drawn), else the images' registration against the target.
    pub(super) fn step_images(&self) -> Images {
        let Some(t) = self.stepwise.as_ref().and_then(|s| s.density) else { return Images::Off };
        match &self.density {
            None => Images::Missing,
            Some(v) if v.path() != t.path => Images::Stale,
            Some(v) if !v.registered() => Images::Missing,
            Some(v) if v.size() != t.size => Images::Stale,
            Some(_) => Images::Ready,
        }
    }

    /// Step mode's render step in the density view: keeps `target`'s size, `view_proj` and
    /// `path` for the next steps (the view is made, unregistered, on the first frame) and draws
    /// what GL may draw now; no CUDA work on the images or the buffers.
    pub(super) fn density_step_draw(&mut self, gl: Gl<'_>, target: &RenderTarget, view_proj: glam::Mat4, path: DensityPath) -> anyhow::Result<()> {
        let size = target.size();
        if let Some(sw) = self.stepwise.as_mut() {
            sw.density = Some(DensityTarget { size, view_proj, path });
        }
        if self.density.is_none() {
            let kernels = self.gpu.kernels().density()?;
            self.density = Some(DensityView::unregistered(gl, self.gl_info.is_gles, &self.ctx, kernels, path)?);
        }
        if let Some(v) = &self.density {
            v.draw_step(gl, target);
        }
        Ok(())
    }

    /// Takes image step `step`; returns what it did.
    pub(super) fn image_step(&mut self, gl: Gl<'_>, step: WorkflowStep) -> anyhow::Result<String> {
        let t = self.stepwise.as_ref().and_then(|s| s.density).context("the density view is off")?;
        let stream = Rc::clone(&self.stream);
        if step == WorkflowStep::UnregisterImages && self.density.as_ref().is_some_and(|v| v.path() != t.path) {
            // Another density path registers the density image with other flags: a new view.
            self.release_density(gl);
            return Ok(format!("both images unregistered, then deleted by GL (the density path is now {:?})", t.path));
        }
        if step == WorkflowStep::RegisterImages && self.density.is_none() {
            let kernels = self.gpu.kernels().density()?;
            self.density = Some(DensityView::unregistered(gl, self.gl_info.is_gles, &self.ctx, kernels, t.path)?);
        }
        let gain = density_gain(t.size, self.total_mass);
        let (n, front) = (self.n, self.gpu.front());
        let v = self.density.as_mut().context("no density view")?;
        match step {
            WorkflowStep::UnregisterImages => {
                let old = v.size();
                v.unregister_images(gl, &stream)?;
                Ok(format!(
                    "both images unregistered, then deleted by GL (they were {}×{}, the target is {}×{})",
                    old[0], old[1], t.size[0], t.size[1]
                ))
            }
            WorkflowStep::RegisterImages => {
                v.resize(gl, t.size, &stream)?;
                Ok(format!(
                    "two {}×{} textures made by GL and registered: R32F density ({}), RGBA8 shown image (SURFACE_LDST, map flag WRITE_DISCARD)",
                    t.size[0],
                    t.size[1],
                    match t.path {
                        DensityPath::Surface => "SURFACE_LDST",
                        DensityPath::Copy => "no flags: the copy path writes it with cuMemcpy2D",
                    }
                ))
            }
            WorkflowStep::MapImages => v.step_map(gl, &stream),
            WorkflowStep::GetArrays => v.step_arrays(),
            WorkflowStep::MakeObjects => v.step_objects(),
            WorkflowStep::Splat => {
                let Some(map) = self.storage.as_mut().and_then(|s| s.as_map()) else { anyhow::bail!("step mode needs --interop map") };
                // The shown VBO, mapped read-only around the splat (the only kernel that reads it).
                let msg = with_shown_vbo(&mut map.resources, front, n, &stream, |pos| v.step_splat(pos, n, t.view_proj, &stream))?;
                Ok(format!("{msg}, from buffer {front} (mapped read-only around the launch)"))
            }
            WorkflowStep::Store => v.step_store(&stream),
            WorkflowStep::ToneMap => v.step_tonemap(gain, &stream),
            WorkflowStep::DestroyObjects => v.step_destroy(),
            WorkflowStep::UnmapImages => v.step_unmap(&stream),
            WorkflowStep::DrawImage => {
                let msg = v.step_drawn();
                if let Some(sw) = self.stepwise.as_mut() {
                    sw.shown = front;
                }
                Ok(format!("{msg} (the positions of buffer {front})"))
            }
            WorkflowStep::Map | WorkflowStep::GetPointers | WorkflowStep::Launch | WorkflowStep::Unmap | WorkflowStep::Draw => {
                anyhow::bail!("{step:?} is a step of the buffer workflow")
            }
        }
    }

    /// Ends a step-mode image pass in progress (objects destroyed, images unmapped); the frame
    /// then waits for its draw again ([`crate::backend::step::StepState::left`]).
    ///
    /// # Errors
    /// The driver's error of a destroy or the unmap.
    pub(super) fn leave_image_steps(&mut self) -> anyhow::Result<()> {
        let r = self.density.as_mut().map_or(Ok(()), DensityView::leave_steps);
        if let Some(sw) = self.stepwise.as_mut().filter(|sw| sw.state.images_mapped()) {
            sw.state = sw.state.left();
            sw.last = Some("image pass ended early (the images were needed elsewhere)".into());
        }
        r
    }
}
