//! The tone-mapping pass: the sprites' light summed in a half-float buffer and mapped to the
//! target so a dense core keeps its colour (module docs of `renderer`), and where it is used.

use super::gl::Gl;
use super::shaders::{link_program, TONEMAP_FRAG_SRC, TONEMAP_VERT_SRC};
use super::target::BACKGROUND;

/// True for GL renderers that rasterize on the CPU (Mesa's llvmpipe and softpipe, SwiftShader),
/// where the float light buffer costs more than it shows.
pub(super) fn software_rasterizer(renderer: &str) -> bool {
    let r = renderer.to_ascii_lowercase();
    ["llvmpipe", "softpipe", "swiftshader", "software rasterizer"].iter().any(|s| r.contains(s))
}

/// Whether to sum the light in a float buffer and tone-map it: `NBODY_TONEMAP=on` or `off`
/// decides; else on for desktop GL that is not a software rasterizer.
pub(super) fn tonemap_wanted(is_gles: bool, renderer: &str) -> bool {
    match std::env::var("NBODY_TONEMAP").ok().as_deref().map(str::trim) {
        Some("on") => !is_gles,
        Some("off") => false,
        Some(other) if !other.is_empty() => {
            tracing::warn!("NBODY_TONEMAP={other} is neither on nor off: ignored, the renderer decides (unset it, or use on or off)");
            !is_gles && !software_rasterizer(renderer)
        }
        _ => !is_gles && !software_rasterizer(renderer),
    }
}

/// The half-float light buffer: an FBO with an `RGBA16F` texture of the target's size.
#[derive(Debug)]
pub(super) struct LightBuffer {
    pub(super) fbo: glow::NativeFramebuffer,
    pub(super) tex: glow::NativeTexture,
    pub(super) size: [u32; 2],
}

/// The tone-mapping pass: its program, an empty VAO (the triangle comes from `gl_VertexID`) and
/// the light buffer.
#[derive(Debug)]
pub(super) struct Tonemap {
    pub(super) program: glow::NativeProgram,
    pub(super) vao: glow::NativeVertexArray,
    pub(super) u_light: Option<glow::NativeUniformLocation>,
    pub(super) u_background: Option<glow::NativeUniformLocation>,
    pub(super) light: Option<LightBuffer>,
}

impl Tonemap {
    pub(super) fn new(gl: &Gl<'_>) -> anyhow::Result<Tonemap> {
        let program = link_program(gl, false, (TONEMAP_VERT_SRC, "tonemap.vert"), (TONEMAP_FRAG_SRC, "tonemap.frag"))?;
        let vao = match gl.create_vertex_array() {
            Ok(v) => v,
            Err(e) => {
                gl.delete_program(program);
                anyhow::bail!("glGenVertexArrays: {e}");
            }
        };
        let (u_light, u_background) = (gl.get_uniform_location(program, "u_light"), gl.get_uniform_location(program, "u_background"));
        Ok(Tonemap { program, vao, u_light, u_background, light: None })
    }

    /// The light buffer for a `size` target: kept, or (re)made. `None` when GL cannot make a
    /// complete one (the caller then draws without tone mapping).
    pub(super) fn light(&mut self, gl: &Gl<'_>, size: [u32; 2]) -> Option<glow::NativeFramebuffer> {
        if let Some(l) = self.light.as_ref().filter(|l| l.size == size) {
            return Some(l.fbo);
        }
        if let Some(l) = self.light.take() {
            gl.delete_framebuffer(l.fbo);
            gl.delete_texture(l.tex);
        }
        let tex = gl.create_texture().ok()?;
        gl.bind_texture(glow::TEXTURE_2D, Some(tex));
        gl.tex_image_2d_empty(glow::TEXTURE_2D, glow::RGBA16F, size[0] as i32, size[1] as i32, glow::RGBA, glow::HALF_FLOAT);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, glow::NEAREST as i32);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, glow::NEAREST as i32);
        gl.bind_texture(glow::TEXTURE_2D, None);
        let Ok(fbo) = gl.create_framebuffer() else {
            gl.delete_texture(tex);
            return None;
        };
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, Some(tex), 0);
        if gl.check_framebuffer_status(glow::FRAMEBUFFER) != glow::FRAMEBUFFER_COMPLETE {
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.delete_framebuffer(fbo);
            gl.delete_texture(tex);
            return None;
        }
        self.light = Some(LightBuffer { fbo, tex, size });
        Some(fbo)
    }

    /// Map the light buffer into the bound target (`w` × `h`): one full-screen triangle.
    pub(super) fn resolve(&self, gl: &Gl<'_>) {
        let Some(l) = &self.light else { return };
        gl.disable(glow::BLEND);
        gl.use_program(Some(self.program));
        gl.active_texture(glow::TEXTURE0);
        gl.bind_texture(glow::TEXTURE_2D, Some(l.tex));
        gl.uniform_1_i32(self.u_light.as_ref(), 0);
        gl.uniform_3_f32(self.u_background.as_ref(), BACKGROUND[0], BACKGROUND[1], BACKGROUND[2]);
        gl.bind_vertex_array(Some(self.vao));
        // SAFETY: the VAO enables no vertex attribute array (its positions come from
        // gl_VertexID), so the draw reads no vertex buffer.
        unsafe { gl.draw_arrays(glow::TRIANGLES, 0, 3) };
        gl.bind_vertex_array(None);
        gl.bind_texture(glow::TEXTURE_2D, None);
        gl.use_program(None);
    }

    pub(super) fn destroy(&mut self, gl: &Gl<'_>) {
        if let Some(l) = self.light.take() {
            gl.delete_framebuffer(l.fbo);
            gl.delete_texture(l.tex);
        }
        gl.delete_vertex_array(self.vao);
        gl.delete_program(self.program);
    }
}
