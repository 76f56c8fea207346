//! The density view's GL side: the two textures CUDA writes through the image workflow (an R32F
//! density image and the RGBA8 image tone-mapped from it, both the target's size) and the
//! full-screen pass that draws the RGBA8 one. CUDA registers them (`cuda::density`); GL owns
//! them, so they are deleted here, after CUDA has unregistered them.

use anyhow::anyhow;

use super::gl::Gl;
use super::shaders::{link_program, IMAGE_FRAG_SRC, TONEMAP_VERT_SRC};
use super::target::RenderTarget;

/// The density view's textures, `size` texels each: `density` (`GL_R32F`, one float per pixel:
/// the mass that projects into it) and `image` (`GL_RGBA8`, what is shown). Delete with
/// [`DensityTextures::delete`] once CUDA has unregistered them.
#[derive(Debug)]
pub struct DensityTextures {
    /// The R32F density image.
    pub density: glow::NativeTexture,
    /// The RGBA8 image drawn to the target.
    pub image: glow::NativeTexture,
    /// Width and height, texels.
    pub size: [u32; 2],
    /// A GL-owned copy of `image` ([`DensityTextures::snapshot_image`]), drawn in step mode
    /// while CUDA has the images mapped; made at the first snapshot.
    pub snapshot: Option<glow::NativeTexture>,
}

/// A 2D texture of `size` with level 0 allocated and no mipmaps (`filter` for both min and
/// mag, so that it is complete).
fn texture(gl: Gl<'_>, size: [u32; 2], internal: u32, format: u32, ty: u32, filter: u32) -> anyhow::Result<glow::NativeTexture> {
    let tex = gl.create_texture().map_err(|e| anyhow!("glGenTextures: {e}"))?;
    gl.bind_texture(glow::TEXTURE_2D, Some(tex));
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, filter as i32);
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, filter as i32);
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_WRAP_S, glow::CLAMP_TO_EDGE as i32);
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_WRAP_T, glow::CLAMP_TO_EDGE as i32);
    gl.tex_image_2d_empty(glow::TEXTURE_2D, internal, size[0] as i32, size[1] as i32, format, ty);
    gl.bind_texture(glow::TEXTURE_2D, None);
    Ok(tex)
}

impl DensityTextures {
    /// Both textures at `size` (width, height in pixels, each ≥ 1).
    ///
    /// # Errors
    /// A zero size, or GL cannot make a texture.
    pub fn new(gl: Gl<'_>, size: [u32; 2]) -> anyhow::Result<Self> {
        if size[0] == 0 || size[1] == 0 {
            anyhow::bail!("a {}×{} density view: the target has no pixels", size[0], size[1]);
        }
        let density = texture(gl, size, glow::R32F, glow::RED, glow::FLOAT, glow::NEAREST)?;
        let image = match texture(gl, size, glow::RGBA8, glow::RGBA, glow::UNSIGNED_BYTE, glow::LINEAR) {
            Ok(t) => t,
            Err(e) => {
                gl.delete_texture(density);
                return Err(e);
            }
        };
        Ok(DensityTextures { density, image, size, snapshot: None })
    }

    /// GL names of the two textures, as `cuGraphicsGLRegisterImage` takes them: (density, image).
    pub fn names(&self) -> (u32, u32) {
        (self.density.0.get(), self.image.0.get())
    }

    /// Copies the shown image into the snapshot texture (made at the first call;
    /// `glCopyTexSubImage2D` from a framebuffer the image is attached to): GL's last look at the
    /// image before CUDA maps it, drawn while it is mapped (step mode). Leaves no framebuffer bound.
    ///
    /// # Errors
    /// GL cannot make the texture or the framebuffer, or the framebuffer is incomplete.
    pub fn snapshot_image(&mut self, gl: Gl<'_>) -> anyhow::Result<glow::NativeTexture> {
        let snap = match self.snapshot {
            Some(t) => t,
            None => *self.snapshot.insert(texture(gl, self.size, glow::RGBA8, glow::RGBA, glow::UNSIGNED_BYTE, glow::LINEAR)?),
        };
        let fbo = gl.create_framebuffer().map_err(|e| anyhow!("glGenFramebuffers: {e}"))?;
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(glow::READ_FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, Some(self.image), 0);
        let complete = gl.check_framebuffer_status(glow::READ_FRAMEBUFFER) == glow::FRAMEBUFFER_COMPLETE;
        if complete {
            gl.read_buffer(glow::COLOR_ATTACHMENT0);
            gl.bind_texture(glow::TEXTURE_2D, Some(snap));
            gl.copy_read_framebuffer_to_texture(self.size[0] as i32, self.size[1] as i32);
            gl.bind_texture(glow::TEXTURE_2D, None);
        }
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
        gl.delete_framebuffer(fbo);
        anyhow::ensure!(complete, "the density image is not a complete framebuffer attachment");
        Ok(snap)
    }

    /// Deletes the textures. CUDA must have unregistered them first.
    pub fn delete(self, gl: Gl<'_>) {
        gl.delete_texture(self.density);
        gl.delete_texture(self.image);
        if let Some(s) = self.snapshot {
            gl.delete_texture(s);
        }
    }
}

/// The full-screen pass that draws a texture over the whole target (`shaders/tonemap.vert`'s
/// triangle with `shaders/image.frag`). Delete with [`ImagePass::delete`].
#[derive(Debug)]
pub struct ImagePass {
    program: glow::NativeProgram,
    vao: glow::NativeVertexArray,
    u_image: Option<glow::NativeUniformLocation>,
}

impl ImagePass {
    /// Compiles the pass for this context (`is_gles`: GLSL ES 3.00, else GLSL 3.30).
    ///
    /// # Errors
    /// A shader does not compile or link, or GL has no vertex array.
    pub fn new(gl: Gl<'_>, is_gles: bool) -> anyhow::Result<Self> {
        let program = link_program(&gl, is_gles, (TONEMAP_VERT_SRC, "tonemap.vert"), (IMAGE_FRAG_SRC, "image.frag"))?;
        let vao = match gl.create_vertex_array() {
            Ok(v) => v,
            Err(e) => {
                gl.delete_program(program);
                anyhow::bail!("glGenVertexArrays: {e}");
            }
        };
        let u_image = gl.get_uniform_location(program, "u_image");
        Ok(ImagePass { program, vao, u_image })
    }

    /// Draws `texture` over the whole of `target` (bound here, viewport set to its size, no
    /// blending).
    pub fn draw(&self, gl: Gl<'_>, target: &RenderTarget, texture: glow::NativeTexture) {
        let [w, h] = target.size();
        target.bind(gl);
        gl.viewport(0, 0, w as i32, h as i32);
        gl.disable(glow::SCISSOR_TEST);
        gl.disable(glow::BLEND);
        gl.disable(glow::DEPTH_TEST);
        gl.use_program(Some(self.program));
        gl.active_texture(glow::TEXTURE0);
        gl.bind_texture(glow::TEXTURE_2D, Some(texture));
        gl.uniform_1_i32(self.u_image.as_ref(), 0);
        gl.bind_vertex_array(Some(self.vao));
        // SAFETY: the VAO enables no vertex attribute array (its positions come from
        // gl_VertexID), so the draw reads no vertex buffer.
        unsafe { gl.draw_arrays(glow::TRIANGLES, 0, 3) };
        gl.bind_vertex_array(None);
        gl.bind_texture(glow::TEXTURE_2D, None);
        gl.use_program(None);
    }

    /// Deletes the program and the vertex array.
    pub fn delete(self, gl: Gl<'_>) {
        gl.delete_vertex_array(self.vao);
        gl.delete_program(self.program);
    }
}
