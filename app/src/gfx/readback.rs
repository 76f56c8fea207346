//! Asynchronous readback of rendered frames: two pixel-pack buffers (PBOs), a frame behind.
//!
//! Frame k's `glReadPixels` goes into PBO `k mod 2` and returns at once (the copy runs on the
//! GPU after the frame's draws); a fence follows it. The pixels handed out at frame k are frame
//! k − 1's, whose fence has had a whole frame to signal, so the host wait is normally nil and
//! GL never stalls on a synchronous `glReadPixels` (the pattern of NVIDIA's "Fast Texture
//! Transfers" and the ARB_pixel_buffer_object specification's "asynchronous glReadPixels" example).

use std::time::Instant;

use anyhow::{anyhow, Context as _};

use super::fence::wait_fence;
use super::gl::Gl;
use super::GlInfo;

/// Bytes per pixel of the frames read back (RGBA8 or BGRA8).
const RGBA: usize = 4;

/// Two pixel-pack buffers of one frame size each; see the module docs.
///
/// Delete it with [`Readback::destroy`] before its context goes.
#[derive(Debug)]
pub struct Readback {
    pbos: [glow::NativeBuffer; 2],
    /// The fence after each buffer's pending read (`None`: nothing pending in it).
    fences: [Option<glow::NativeFence>; 2],
    /// The buffer the next read goes into.
    next: usize,
    width: u32,
    height: u32,
    /// The byte order GL writes the pixels in.
    order: PixelOrder,
}

/// The byte order of the pixels read back: `GL_BGRA` on desktop GL (the window's `0x00RRGGBB`
/// as little-endian words but for the top byte, which the conversion clears), `GL_RGBA` on GLES
/// (where `GL_BGRA` is an extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelOrder {
    /// Bytes B, G, R, A.
    Bgra,
    /// Bytes R, G, B, A.
    Rgba,
}

impl PixelOrder {
    /// The order to read back in from the context `info` describes: RGBA on GLES, else BGRA.
    pub fn for_context(info: &GlInfo) -> Self {
        if info.is_gles {
            PixelOrder::Rgba
        } else {
            PixelOrder::Bgra
        }
    }
}

impl Readback {
    /// Two pixel-pack buffers for `width` × `height` frames of 4 bytes a pixel in `order`
    /// (8 · width · height bytes of GL memory in all).
    ///
    /// # Errors
    /// A size of 0 or over GL's integers, or `glGenBuffers` failed.
    pub fn new(gl: Gl<'_>, width: u32, height: u32, order: PixelOrder) -> anyhow::Result<Self> {
        let bytes = frame_bytes(width, height)?;
        let a = gl.create_buffer().map_err(|e| anyhow!("glGenBuffers (pixel-pack): {e}"))?;
        let b = match gl.create_buffer() {
            Ok(b) => b,
            Err(e) => {
                gl.delete_buffer(a);
                anyhow::bail!("glGenBuffers (pixel-pack): {e}");
            }
        };
        for pbo in [a, b] {
            gl.bind_buffer(glow::PIXEL_PACK_BUFFER, Some(pbo));
            // `frame_bytes` checked that the size fits GL's integers.
            gl.buffer_data_size(glow::PIXEL_PACK_BUFFER, bytes as i32, glow::STREAM_READ);
        }
        gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
        Ok(Self { pbos: [a, b], fences: [None, None], next: 0, width, height, order })
    }

    /// Frame size in pixels.
    pub fn size(&self) -> [u32; 2] {
        [self.width, self.height]
    }

    /// True when a read is pending, so the next [`Readback::push`] hands out a frame.
    pub fn pending(&self) -> bool {
        self.fences[1 - self.next].is_some()
    }

    /// Start reading the framebuffer bound for reading (its bottom-left `width` × `height`)
    /// into the next buffer, then, if the previous frame's read is pending, wait for its fence,
    /// map its buffer and convert its pixels into `out` (`width` × `height` window pixels,
    /// `0x00RRGGBB`, rows top first: [`to_xrgb_top_down`]). Returns the host time of the wait,
    /// the map and the conversion, ms; `None` when no frame was pending ([`Readback::pending`])
    /// or `out` is `None` (the pending frame is then dropped).
    ///
    /// # Errors
    /// `glReadPixels`, the fence, its wait or the map failed, or `out` has the wrong size.
    pub fn push(&mut self, gl: Gl<'_>, out: Option<&mut [u32]>) -> anyhow::Result<Option<f64>> {
        let this = self.next;
        let other = 1 - this;
        let format = match self.order {
            PixelOrder::Bgra => glow::BGRA,
            PixelOrder::Rgba => glow::RGBA,
        };
        gl.read_pixels_to_pack_buffer(self.pbos[this], self.width, self.height, format).context("reading the frame into a pixel-pack buffer")?;
        let fence = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map_err(|e| anyhow!("glFenceSync: {e}"))?;
        self.fences[this] = Some(fence);
        self.next = other;
        let Some(prev) = self.fences[other].take() else { return Ok(None) };
        let t0 = Instant::now();
        wait_fence(gl, prev, t0).context("waiting for the previous frame's readback")?;
        let Some(out) = out else { return Ok(None) };
        let bytes = frame_bytes(self.width, self.height)?;
        let (order, w, h) = (self.order, self.width, self.height);
        // SAFETY: the closure only converts pixels (no GL call), as the function requires.
        let converted = unsafe { gl.with_mapped_pack_buffer(self.pbos[other], bytes, |px| to_xrgb_top_down(px, order, w, h, out)) }
            .context("mapping the previous frame's pixel-pack buffer")?;
        converted?;
        Ok(Some(t0.elapsed().as_secs_f64() * 1e3))
    }

    /// The byte order GL writes the pixels in.
    pub fn order(&self) -> PixelOrder {
        self.order
    }

    /// Delete the buffers and any pending fence.
    pub fn destroy(self, gl: Gl<'_>) {
        for f in self.fences.into_iter().flatten() {
            gl.delete_sync(f);
        }
        for pbo in self.pbos {
            gl.delete_buffer(pbo);
        }
    }
}

/// Bytes of one `width` × `height` RGBA8 frame.
///
/// # Errors
/// A zero size, or more bytes than GL's integers hold.
pub fn frame_bytes(width: u32, height: u32) -> anyhow::Result<usize> {
    let bytes = width as usize * height as usize * RGBA;
    if bytes == 0 || i32::try_from(bytes).is_err() {
        anyhow::bail!("a {width}×{height} frame cannot be read back (0 or over 2 GiB of RGBA8)");
    }
    Ok(bytes)
}

/// Convert pixels of 4 bytes in `order` with rows bottom first (GL's order) into the window's
/// 32-bit pixels, `0x00RRGGBB`, rows top first: `out` is `width` × `height` of them. Rows are
/// converted in parallel (rayon).
///
/// # Errors
/// `src` or `out` does not hold `width · height` pixels.
pub fn to_xrgb_top_down(src: &[u8], order: PixelOrder, width: u32, height: u32, out: &mut [u32]) -> anyhow::Result<()> {
    use rayon::prelude::*;
    let (w, h) = (width as usize, height as usize);
    if src.len() != w * h * RGBA || out.len() != w * h {
        anyhow::bail!("{width}×{height} pixels: got {} bytes read back and {} window pixels", src.len(), out.len());
    }
    out.par_chunks_exact_mut(w.max(1)).enumerate().for_each(|(y, row)| {
        let line = &src[(h - 1 - y) * w * RGBA..(h - y) * w * RGBA];
        match order {
            // Little-endian B, G, R, A is the word 0xAARRGGBB: clear the top byte.
            PixelOrder::Bgra => {
                for (px, s) in row.iter_mut().zip(line.chunks_exact(RGBA)) {
                    *px = u32::from_le_bytes([s[0], s[1], s[2], 0]);
                }
            }
            PixelOrder::Rgba => {
                for (px, s) in row.iter_mut().zip(line.chunks_exact(RGBA)) {
                    *px = u32::from_le_bytes([s[2], s[1], s[0], 0]);
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_flip_and_channels_pack_as_0rgb() {
        // 2 × 2: bottom row red, green; top row blue, white (GL order: bottom row first).
        let rgba = [255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255, 255, 255, 255, 255];
        let mut out = [0u32; 4];
        to_xrgb_top_down(&rgba, PixelOrder::Rgba, 2, 2, &mut out).unwrap();
        assert_eq!(out, [0x0000FF, 0xFFFFFF, 0xFF0000, 0x00FF00]);
        // The same picture as B, G, R, A bytes (alpha 7: never reaches the window's top byte).
        let bgra = [0, 0, 255, 7, 0, 255, 0, 7, 255, 0, 0, 7, 255, 255, 255, 7];
        to_xrgb_top_down(&bgra, PixelOrder::Bgra, 2, 2, &mut out).unwrap();
        assert_eq!(out, [0x0000FF, 0xFFFFFF, 0xFF0000, 0x00FF00]);
    }

    #[test]
    fn wrong_sizes_are_errors() {
        let mut out = [0u32; 3];
        assert!(to_xrgb_top_down(&[0; 16], PixelOrder::Rgba, 2, 2, &mut out).is_err());
        assert!(frame_bytes(0, 10).is_err());
        assert!(frame_bytes(40_000, 40_000).is_err());
        assert_eq!(frame_bytes(1920, 1080).unwrap(), 1920 * 1080 * 4);
    }
}
