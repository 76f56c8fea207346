//! The two position vertex buffers (VBOs) the bodies are drawn from, and uploads into them.

use anyhow::anyhow;

use super::gl::Gl;
use sim::Bodies;

/// The two GL position vertex buffers, each `[N][4]` f32 (x, y, z, mass), at least `16 * N`
/// bytes: made by the renderer (`GL_ARRAY_BUFFER`, `GL_DYNAMIC_DRAW`), or imported from CUDA
/// by the CUDA backend's external-memory storage (`Shown::buffers`).
#[derive(Debug, Clone, Copy)]
pub struct PositionVbos {
    /// The GL buffer names.
    pub buffers: [glow::NativeBuffer; 2],
    /// Number of bodies N each buffer holds.
    pub n: usize,
}

pub(super) fn create_vbos(gl: &Gl<'_>, bodies: &Bodies) -> anyhow::Result<PositionVbos> {
    let bytes: &[u8] = as_bytes(&bodies.pos);
    let mut made = Vec::with_capacity(2);
    for i in 0..2 {
        match gl.create_buffer() {
            Ok(b) => {
                gl.bind_buffer(glow::ARRAY_BUFFER, Some(b));
                gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, bytes, glow::DYNAMIC_DRAW);
                gl.bind_buffer(glow::ARRAY_BUFFER, None);
                made.push(b);
            }
            Err(e) => {
                for b in made {
                    gl.delete_buffer(b);
                }
                return Err(anyhow!("glGenBuffers (position VBO {i}): {e}"));
            }
        }
    }
    if gl.get_error() == glow::OUT_OF_MEMORY {
        for b in made {
            gl.delete_buffer(b);
        }
        anyhow::bail!("glBufferData: out of memory for 2 × {} bytes", bytes.len());
    }
    Ok(PositionVbos { buffers: [made[0], made[1]], n: bodies.len() })
}

pub(super) fn delete_vbos(gl: &Gl<'_>, vbos: &PositionVbos) {
    // n = 0 marks buffers already deleted (callers set it), so each goes once.
    if vbos.n == 0 {
        return;
    }
    for b in vbos.buffers {
        gl.delete_buffer(b);
    }
}

/// View `[[f32; 4]]` as bytes (for buffer uploads).
pub fn as_bytes(v: &[[f32; 4]]) -> &[u8] {
    // SAFETY: [f32; 4] has no padding and every bit pattern is a valid u8; the slice covers
    // exactly size_of_val(v) bytes of the same allocation and borrows `v`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Upload positions into one VBO (`glBufferSubData` from offset 0).
///
/// # Errors
/// `pos` is longer than the buffer.
pub fn upload_positions(gl: Gl<'_>, vbos: &PositionVbos, index: usize, pos: &[[f32; 4]]) -> anyhow::Result<()> {
    if pos.len() > vbos.n || index > 1 {
        anyhow::bail!("upload of {} bodies into VBO {index} of {} bodies", pos.len(), vbos.n);
    }
    gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbos.buffers[index]));
    gl.buffer_sub_data_u8_slice(glow::ARRAY_BUFFER, 0, as_bytes(pos));
    gl.bind_buffer(glow::ARRAY_BUFFER, None);
    Ok(())
}

/// Two buffers of `n` bodies each with undefined contents (`glBufferData` with zeros).
pub(super) fn create_empty_vbos(gl: &Gl<'_>, n: usize) -> anyhow::Result<PositionVbos> {
    let zeros = Bodies { pos: vec![[0.0; 4]; n], vel: Vec::new() };
    create_vbos(gl, &zeros)
}

/// Copies both buffers of `src` into `dst` on the GPU (`glCopyBufferSubData`), `16 N` bytes each.
pub(super) fn copy_vbos(gl: &Gl<'_>, src: &PositionVbos, dst: &PositionVbos) {
    let bytes = (src.n.min(dst.n) * 16) as i32;
    for i in 0..2 {
        gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src.buffers[i]));
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(dst.buffers[i]));
        gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, 0, 0, bytes);
    }
    gl.bind_buffer(glow::COPY_READ_BUFFER, None);
    gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
}

/// Copies the first `16 n` bytes of buffer `src` into `dst` on the GPU (`glCopyBufferSubData`);
/// both hold at least `n` bodies.
pub(super) fn copy_buffer(gl: &Gl<'_>, src: glow::NativeBuffer, dst: glow::NativeBuffer, n: usize) {
    // GL takes the size as a GLsizeiptr; glow as i32 (past 134M bodies nothing is copied).
    let Ok(bytes) = i32::try_from(n * 16) else { return };
    gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src));
    gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(dst));
    gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, 0, 0, bytes);
    gl.bind_buffer(glow::COPY_READ_BUFFER, None);
    gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
}
