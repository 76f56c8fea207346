//! The scratch GL buffer each GL case of the lab registers, maps or deletes.

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
