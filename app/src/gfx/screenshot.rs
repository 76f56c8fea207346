//! Screenshots: read the bound framebuffer back and write it as PNG.

use std::path::Path;

use super::gl::Gl;
use sim::file_io::{OutputFile, WriteProblem};

/// Read `width` × `height` RGBA8 pixels of the framebuffer bound for reading, top row first
/// (GL's rows start at the bottom; they are flipped here). Alpha is forced to 255.
///
/// # Errors
/// The size does not fit GL's integers.
pub fn read_rgba(gl: Gl<'_>, width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let row = width as usize * 4;
    let mut pixels = vec![0u8; row * height as usize];
    gl.read_pixels_rgba(width, height, &mut pixels)?;
    flip_rows(&mut pixels, row);
    for px in pixels.chunks_exact_mut(4) {
        px[3] = 255;
    }
    Ok(pixels)
}

/// Reverse the order of the rows of a tightly packed image, in place.
pub fn flip_rows(pixels: &mut [u8], row_bytes: usize) {
    if row_bytes == 0 {
        return;
    }
    let rows = pixels.len() / row_bytes;
    for y in 0..rows / 2 {
        let (top, bottom) = pixels.split_at_mut((rows - 1 - y) * row_bytes);
        top[y * row_bytes..(y + 1) * row_bytes].swap_with_slice(&mut bottom[..row_bytes]);
    }
}

/// Write RGBA8 pixels (top row first) to a PNG file. The file appears whole or not at all
/// ([`OutputFile`]: a temporary beside it, renamed over it when complete).
///
/// # Errors
/// The file cannot be created or written, or the pixels do not fit `width` × `height`; the
/// message names the path, the cause and the remedy, and the target is left as it was.
pub fn write_png(path: &Path, width: u32, height: u32, rgba: &[u8]) -> anyhow::Result<()> {
    let io = |e: std::io::Error| anyhow::anyhow!("cannot write screenshot {}: {}", path.display(), WriteProblem(&e));
    let encoding = |e: png::EncodingError| match e {
        png::EncodingError::IoError(e) => io(e),
        e => anyhow::anyhow!("cannot write screenshot {}: {e}", path.display()),
    };
    let mut out = OutputFile::create(path).map_err(io)?;
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(encoding)?;
    w.write_image_data(rgba).map_err(encoding)?;
    w.finish().map_err(encoding)?;
    out.commit().map_err(io)
}

#[cfg(test)]
mod tests {
    #[test]
    fn flip_reverses_rows() {
        let mut p = vec![1, 1, 2, 2, 3, 3];
        super::flip_rows(&mut p, 2);
        assert_eq!(p, vec![3, 3, 2, 2, 1, 1]);
    }
}
