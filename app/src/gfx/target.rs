//! Where a frame is drawn: the window's default framebuffer or an offscreen FBO of headless runs.

use anyhow::anyhow;

use super::gl::Gl;

/// Where a frame is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderTarget {
    /// The default framebuffer (windowed runs), `width` × `height` physical pixels.
    Default {
        /// Width in physical pixels.
        width: u32,
        /// Height in physical pixels.
        height: u32,
    },
    /// An offscreen framebuffer (headless runs).
    Offscreen(OffscreenTarget),
}

impl RenderTarget {
    /// Size in physical pixels.
    pub fn size(&self) -> [u32; 2] {
        match self {
            Self::Default { width, height } => [*width, *height],
            Self::Offscreen(t) => [t.width, t.height],
        }
    }

    /// Binds it, sets the viewport to its size and clears colour (the demo's background) and
    /// depth, as the body draw does, touching no position buffer.
    pub fn clear(&self, gl: Gl<'_>) {
        let [w, h] = self.size();
        self.bind(gl);
        gl.viewport(0, 0, w as i32, h as i32);
        gl.disable(glow::SCISSOR_TEST);
        gl.clear_color(BACKGROUND[0], BACKGROUND[1], BACKGROUND[2], 1.0);
        gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
    }

    /// Bind it as the draw and read framebuffer.
    pub fn bind(&self, gl: Gl<'_>) {
        let fbo = match self {
            Self::Default { .. } => None,
            Self::Offscreen(t) => Some(t.fbo),
        };
        gl.bind_framebuffer(glow::FRAMEBUFFER, fbo);
    }
}

/// An FBO with an RGBA8 colour and a 24-bit depth renderbuffer, for headless rendering.
///
/// Delete it with [`OffscreenTarget::destroy`] before the context goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffscreenTarget {
    /// The framebuffer object.
    pub fbo: glow::NativeFramebuffer,
    pub(super) color: glow::NativeRenderbuffer,
    pub(super) depth: glow::NativeRenderbuffer,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl OffscreenTarget {
    /// Make a `width` × `height` FBO.
    ///
    /// # Errors
    /// A zero or too large size, or an incomplete framebuffer.
    pub fn new(gl: Gl<'_>, width: u32, height: u32) -> anyhow::Result<Self> {
        let g = gl;
        let gl = &g;
        let max = gl.max_renderbuffer_size().max(0) as u32;
        if width == 0 || height == 0 || width > max || height > max {
            anyhow::bail!("framebuffer size {width}×{height} is outside 1..={max} pixels");
        }
        let (w, h) = (width as i32, height as i32);
        let fbo = gl.create_framebuffer().map_err(|e| anyhow!("glGenFramebuffers: {e}"))?;
        let target = match (gl.create_renderbuffer(), gl.create_renderbuffer()) {
            (Ok(color), Ok(depth)) => Self { fbo, color, depth, width, height },
            (a, b) => {
                gl.delete_framebuffer(fbo);
                for rb in [a, b].into_iter().flatten() {
                    gl.delete_renderbuffer(rb);
                }
                anyhow::bail!("glGenRenderbuffers failed");
            }
        };
        gl.bind_renderbuffer(glow::RENDERBUFFER, Some(target.color));
        gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, w, h);
        gl.bind_renderbuffer(glow::RENDERBUFFER, Some(target.depth));
        gl.renderbuffer_storage(glow::RENDERBUFFER, glow::DEPTH_COMPONENT24, w, h);
        gl.bind_renderbuffer(glow::RENDERBUFFER, None);
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::RENDERBUFFER, Some(target.color));
        gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::DEPTH_ATTACHMENT, glow::RENDERBUFFER, Some(target.depth));
        let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
        if status != glow::FRAMEBUFFER_COMPLETE {
            target.destroy(*gl);
            anyhow::bail!("offscreen framebuffer {width}×{height} incomplete: status 0x{status:04X}");
        }
        Ok(target)
    }

    /// Delete the FBO and its renderbuffers.
    pub fn destroy(self, gl: Gl<'_>) {
        gl.delete_framebuffer(self.fbo);
        gl.delete_renderbuffer(self.color);
        gl.delete_renderbuffer(self.depth);
    }
}

/// The background colour behind the bodies (linear RGB), the clear colour of every target.
pub(super) const BACKGROUND: [f32; 3] = [0.0, 0.0, 0.015];
