//! The view, the frame's second owner: the renderer (VBOs, sprites, trails, step mode's
//! snapshot), the camera and the headless run's offscreen target; the frame's render step; and
//! which view is on (`--view`, key `v`: points or the density view).

use std::time::Instant;

use super::Scene;
use crate::cuda::settings::View;
use crate::demo::frame::render_view;
use crate::gfx::camera::OrbitCamera;
use crate::gfx::gl::Gl;
use crate::gfx::renderer::{DrawParams, Renderer};
use crate::gfx::target::{OffscreenTarget, RenderTarget};

/// What the bodies are drawn with and from where they are seen.
pub(super) struct SceneView {
    /// The body renderer: VBOs, VAO, program, timer queries, step mode's snapshot.
    pub(super) renderer: Renderer,
    /// The orbit camera (mouse and keys in a window).
    pub(super) camera: OrbitCamera,
    /// The headless run's FBO, deleted with the scene's other GL objects.
    pub(super) offscreen: Option<OffscreenTarget>,
}

impl Scene {
    /// The frame's render step: the bodies (or the density view) drawn into `target` through
    /// the one render function the bench shares ([`render_view`]), then put on the trace.
    /// `advanced`: the frame stepped, so the trails move on; `scene_left`: pixels the overlay's
    /// side panel covers.
    ///
    /// # Errors
    /// No backend (a reset failed), or the step-mode state cannot be read.
    pub(super) fn render(
        &mut self,
        gl: Gl<'_>,
        target: &RenderTarget,
        pixels_per_point: f32,
        scene_left: f32,
        advanced: bool,
        wait_timer: bool,
    ) -> anyhow::Result<()> {
        // In step mode GL must not touch mapped buffers: `None` draws step mode's snapshot or
        // nothing.
        let shown = self.shown_front()?;
        self.view.renderer.set_trails(self.hud.overlay.controls.trails);
        let params = DrawParams {
            camera: &self.view.camera,
            front: shown.unwrap_or(0),
            time_span: self.sim.time_span,
            pixels_per_point,
            scene_left,
            advanced,
        };
        let t_draw = Instant::now();
        let backend = self.sim.backend.as_deref_mut().ok_or_else(|| anyhow::anyhow!("no simulation backend (a reset failed)"))?;
        let view = (self.hud.overlay.controls.view, self.args.density_path);
        if let Some(why) = render_view(gl, &mut self.view.renderer, backend, target, &params, wait_timer, shown.is_some(), view) {
            self.hud.overlay.controls.view = View::Points;
            self.set_notice(Some(why));
        }
        self.trace_draw(t_draw, shown);
        Ok(())
    }

    /// Switch between the points and the density view (key `v`; the overlay has the same box).
    pub fn toggle_view(&mut self) {
        let c = &mut self.hud.overlay.controls;
        c.view = if c.view == View::Points { View::Density } else { View::Points };
    }

    /// GPU time of the last density pass (ms), while the density view is on.
    pub(super) fn density_ms(&mut self) -> Option<f64> {
        let on = self.hud.overlay.controls.view == View::Density;
        self.sim.backend.as_deref_mut().and_then(|b| b.sides().cuda()).filter(|_| on).and_then(|c| c.density_ms())
    }
}
