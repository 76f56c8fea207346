//! The render step that every frame shares — the demo's (windowed and headless) and the bench's:
//! the bodies drawn into the target from the backend's buffers, then the backend told that the
//! draw was issued ([`crate::backend::SimBackend::after_draw`]). In step mode, while CUDA has the
//! buffers mapped, GL must not touch them: the target is only cleared.

use crate::backend::SimBackend;
use crate::gfx::gl::Gl;
use crate::gfx::renderer::{DrawParams, RenderTarget, Renderer};

/// Draw the bodies of `backend` into `target` (from its own buffers when it has them,
/// [`SimBackend::draw_buffers`], else the renderer's VBOs at `params.front`), timed by a GL timer
/// query that `wait_timer` reads at once; then [`SimBackend::after_draw`]. With `show` false
/// (step mode with the buffers mapped) the target is only cleared.
pub fn render_bodies(
    gl: Gl<'_>,
    renderer: &mut Renderer,
    backend: &mut dyn SimBackend,
    target: &RenderTarget,
    params: &DrawParams<'_>,
    wait_timer: bool,
    show: bool,
) {
    if show {
        renderer.draw_from(gl, target, params, wait_timer, backend.draw_buffers());
        backend.after_draw(gl);
    } else {
        clear_target(gl, target);
    }
}

/// Clears `target` as the body draw does, without touching the position buffers.
pub fn clear_target(gl: Gl<'_>, target: &RenderTarget) {
    let [w, h] = target.size();
    target.bind(gl);
    gl.viewport(0, 0, w as i32, h as i32);
    gl.disable(glow::SCISSOR_TEST);
    gl.clear_color(0.0, 0.0, 0.015, 1.0);
    gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
}

