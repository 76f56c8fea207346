//! The GL calls the examples share: a texture as the framebuffer, its pixels, a program. Each
//! takes the function table of a [`super::HeadlessGl`], whose context is current on this thread.

use glow::HasContext as _;

use super::Res;

/// A `w` × `h` RGBA8 texture, attached to a new framebuffer that is bound for drawing and
/// reading, with the viewport set to it.
pub fn texture_target(gl: &glow::Context, w: i32, h: i32) -> Res<glow::NativeTexture> {
    // SAFETY: the context is current on this thread (HeadlessGl); GL checks names and sizes.
    unsafe {
        let tex = gl.create_texture()?;
        gl.bind_texture(glow::TEXTURE_2D, Some(tex));
        gl.tex_storage_2d(glow::TEXTURE_2D, 1, glow::RGBA8, w, h);
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(gl.create_framebuffer()?));
        gl.framebuffer_texture_2d(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, Some(tex), 0);
        gl.viewport(0, 0, w, h);
        Ok(tex)
    }
}

/// The bound framebuffer's `w` × `h` pixels, RGBA8, bottom row first.
pub fn pixels(gl: &glow::Context, w: i32, h: i32) -> Vec<u8> {
    let mut out = vec![0u8; (w * h * 4) as usize];
    // SAFETY: the context is current; `out` holds w·h RGBA8 pixels, rows packed (alignment 4).
    unsafe {
        gl.pixel_store_i32(glow::PACK_ALIGNMENT, 4);
        gl.read_pixels(0, 0, w, h, glow::RGBA, glow::UNSIGNED_BYTE, glow::PixelPackData::Slice(Some(&mut out)));
    }
    out
}

/// A program of a vertex and a fragment shader (GLSL sources), linked.
pub fn program(gl: &glow::Context, vertex: &str, fragment: &str) -> Res<glow::NativeProgram> {
    // SAFETY: the context is current on this thread (HeadlessGl); GL checks the sources.
    unsafe {
        let p = gl.create_program()?;
        for (kind, src) in [(glow::VERTEX_SHADER, vertex), (glow::FRAGMENT_SHADER, fragment)] {
            let s = gl.create_shader(kind)?;
            gl.shader_source(s, src);
            gl.compile_shader(s);
            gl.attach_shader(p, s);
        }
        gl.link_program(p);
        if !gl.get_program_link_status(p) {
            return Err(gl.get_program_info_log(p).into());
        }
        Ok(p)
    }
}
