//! The CUDA backend's density view: the shown positions handed to [`DensityView::run`] for each
//! storage — `map` maps the shown VBO (read-only map flag) for the pass, `copy` and `external`
//! pass their CUDA buffers — then the image drawn. In step mode the pass is taken one step at a
//! time instead (`image_steps`); a frame then only draws.

use anyhow::Context as _;

use super::CudaBackend;
use crate::cuda::density::DensityView;
use crate::cuda::settings::DensityPath;
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;

impl CudaBackend {
    /// See [`crate::backend::CudaSide::draw_density`].
    pub(super) fn density_frame(&mut self, gl: Gl<'_>, target: &RenderTarget, view_proj: glam::Mat4, path: DensityPath) -> anyhow::Result<()> {
        if self.stepwise.is_some() {
            return self.density_step_draw(gl, target, view_proj, path);
        }
        self.leave_mapped_step()?;
        let size = target.size();
        match &mut self.density {
            Some(v) if v.path() == path => v.resize(gl, size, &self.stream)?,
            _ => {
                self.release_density(gl);
                let kernels = self.gpu.kernels().density()?;
                self.density = Some(DensityView::new(gl, self.gl_info.is_gles, &self.ctx, kernels, size, path, &self.stream)?);
            }
        }
        let view = self.density.as_mut().context("density view missing")?;
        let gain = density_gain(size, self.total_mass);
        let (n, front, stream) = (self.n, self.gpu.front(), &self.stream);
        let storage = self.storage.as_mut().context("backend storage missing")?;
        storage.with_shown(front, n, stream, &mut |pos| view.run(pos, n, view_proj, gain, stream))?;
        view.draw(gl, target);
        Ok(())
    }

    /// Unregisters and deletes the density view, if any (after the stream's work on it); a
    /// step-mode image pass in progress is ended first.
    pub(super) fn release_density(&mut self, gl: Gl<'_>) {
        if let Err(e) = self.leave_image_steps() {
            tracing::warn!("ending step mode's image pass before releasing the density view: {e:#}");
        }
        if let Some(mut v) = self.density.take() {
            if let Err(e) = self.stream.synchronize() {
                tracing::warn!("cuStreamSynchronize before releasing the density view: {e:#}");
            }
            v.release(gl);
        }
    }
}

/// The tone map's gain for a `size` image of bodies of `total_mass`: the mass per pixel if all of
/// it were spread evenly maps to 1 (before the log scale).
pub(super) fn density_gain(size: [u32; 2], total_mass: f64) -> f32 {
    (f64::from(size[0]) * f64::from(size[1]) / total_mass.max(f64::MIN_POSITIVE)) as f32
}
