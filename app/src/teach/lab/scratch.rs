//! The scratch GL objects the GL cases of the lab register, map or delete: a buffer ([`Scratch`])
//! and a 2D texture ([`Texture`]).

use super::SetupFailed;
use crate::gfx::gl::Gl;

/// Bytes of a scratch buffer.
pub(super) const SCRATCH_BYTES: usize = 256;

/// A GL buffer of [`SCRATCH_BYTES`] zero bytes for one case; deleted on drop (after the case's
/// resources, which are declared after it and so dropped first).
pub(super) struct Scratch<'a> {
    gl: Gl<'a>,
    buffer: Option<glow::NativeBuffer>,
}

impl<'a> Scratch<'a> {
    /// glGenBuffers + glBufferData of [`SCRATCH_BYTES`] zero bytes.
    pub(super) fn new(gl: Gl<'a>) -> Result<Scratch<'a>, SetupFailed> {
        let b = gl.create_buffer().map_err(|e| SetupFailed(format!("glGenBuffers: {e}")))?;
        let s = Scratch { gl, buffer: Some(b) };
        s.specify(SCRATCH_BYTES, 0)?;
        Ok(s)
    }

    /// The GL name (0 once deleted).
    pub(super) fn name(&self) -> u32 {
        self.buffer.map_or(0, |b| b.0.get())
    }

    /// glBufferData: new storage of `bytes` bytes, each `fill` (a resize when `bytes` differs).
    ///
    /// # Errors
    /// A GL error.
    pub(super) fn specify(&self, bytes: usize, fill: u8) -> Result<(), SetupFailed> {
        let g = self.gl;
        while g.get_error() != glow::NO_ERROR {}
        g.bind_buffer(glow::ARRAY_BUFFER, self.buffer);
        g.buffer_data_u8_slice(glow::ARRAY_BUFFER, &vec![fill; bytes], glow::DYNAMIC_DRAW);
        g.bind_buffer(glow::ARRAY_BUFFER, None);
        match g.get_error() {
            glow::NO_ERROR => Ok(()),
            e => Err(SetupFailed(format!("glBufferData of {bytes} bytes: GL error {e:#x}"))),
        }
    }

    /// glGetBufferSubData of the first `words` 32-bit words, and the GL error it left
    /// (`GL_NO_ERROR` = 0). Words GL did not write keep the sentinel 0xeeeeeeee.
    pub(super) fn read_words(&self, words: usize) -> (Vec<u32>, u32) {
        let g = self.gl;
        while g.get_error() != glow::NO_ERROR {}
        let mut bytes = vec![0xeeu8; words * 4];
        g.bind_buffer(glow::COPY_READ_BUFFER, self.buffer);
        g.get_buffer_sub_data(glow::COPY_READ_BUFFER, 0, &mut bytes);
        g.bind_buffer(glow::COPY_READ_BUFFER, None);
        let err = g.get_error();
        let words = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        (words, err)
    }

    /// Deletes the buffer now and returns the (now free) name.
    pub(super) fn delete(mut self) -> u32 {
        let n = self.name();
        if let Some(b) = self.buffer.take() {
            self.gl.delete_buffer(b);
        }
        n
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.gl.delete_buffer(b);
        }
    }
}

/// Texels per side of a scratch texture.
pub(super) const SIDE: i32 = 16;

/// A scratch 2D texture ([`SIDE`] × [`SIDE`], nearest filtering, one level) with an internal
/// format of the case's choice; deleted on drop (after the case's resources, declared after it).
pub(super) struct Texture<'a> {
    gl: Gl<'a>,
    name: Option<glow::NativeTexture>,
}

impl<'a> Texture<'a> {
    /// glGenTextures + glTexImage2D of level 0 with `internal` format (contents undefined).
    pub(super) fn new(gl: Gl<'a>, internal: u32, format: u32) -> Result<Self, SetupFailed> {
        let name = gl.create_texture().map_err(|e| SetupFailed(format!("glGenTextures: {e}")))?;
        gl.bind_texture(glow::TEXTURE_2D, Some(name));
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, glow::NEAREST as i32);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, glow::NEAREST as i32);
        gl.tex_image_2d_empty(glow::TEXTURE_2D, internal, SIDE, SIDE, format, glow::UNSIGNED_BYTE);
        gl.bind_texture(glow::TEXTURE_2D, None);
        Ok(Self { gl, name: Some(name) })
    }

    /// The GL name (0 once deleted).
    pub(super) fn id(&self) -> u32 {
        self.name.map_or(0, |n| n.0.get())
    }

    /// Sets every texel of an RGBA8 texture to `rgba` with GL: the texture attached to a scratch
    /// framebuffer and cleared (glClearColor of each byte / 255, exact in unorm8), then glFinish.
    ///
    /// # Errors
    /// An incomplete framebuffer or a GL error.
    pub(super) fn fill_rgba8(&self, rgba: [u8; 4]) -> Result<(), SetupFailed> {
        let g = self.gl;
        while g.get_error() != glow::NO_ERROR {}
        let fbo = g.create_framebuffer().map_err(|e| SetupFailed(format!("glGenFramebuffers: {e}")))?;
        g.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        g.framebuffer_texture_2d(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, self.name, 0);
        let status = g.check_framebuffer_status(glow::FRAMEBUFFER);
        if status == glow::FRAMEBUFFER_COMPLETE {
            g.disable(glow::SCISSOR_TEST);
            g.viewport(0, 0, SIDE, SIDE);
            let [r, gr, b, a] = rgba.map(|c| f32::from(c) / 255.0);
            g.clear_color(r, gr, b, a);
            g.clear(glow::COLOR_BUFFER_BIT);
        }
        g.bind_framebuffer(glow::FRAMEBUFFER, None);
        g.delete_framebuffer(fbo);
        g.finish();
        match (status, g.get_error()) {
            (glow::FRAMEBUFFER_COMPLETE, glow::NO_ERROR) => Ok(()),
            (glow::FRAMEBUFFER_COMPLETE, e) => Err(SetupFailed(format!("clearing the texture: GL error {e:#x}"))),
            (s, _) => Err(SetupFailed(format!("the texture's framebuffer is incomplete ({s:#x})"))),
        }
    }

    /// glDeleteTextures now; returns the (now free) name.
    pub(super) fn delete(mut self) -> u32 {
        let n = self.id();
        if let Some(t) = self.name.take() {
            self.gl.delete_texture(t);
        }
        n
    }
}

impl Drop for Texture<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.name.take() {
            self.gl.delete_texture(t);
        }
    }
}
