//! The shader sources (`shaders/`) and their compilation and linking for this context's GL or GLES.

use anyhow::anyhow;

use super::gl::Gl;

/// The body program's stages and the tone-mapping pass's, without their `#version` line.
pub(super) const VERT_SRC: &str = include_str!("../../../shaders/bodies.vert");
pub(super) const FRAG_SRC: &str = include_str!("../../../shaders/bodies.frag");
pub(super) const TONEMAP_VERT_SRC: &str = include_str!("../../../shaders/tonemap.vert");
pub(super) const TONEMAP_FRAG_SRC: &str = include_str!("../../../shaders/tonemap.frag");
pub(super) const IMAGE_FRAG_SRC: &str = include_str!("../../../shaders/image.frag");

/// Compile one shader stage with the `#version` line for this context.
pub(super) fn compile(gl: &Gl<'_>, is_gles: bool, kind: u32, src: &str, name: &str) -> anyhow::Result<glow::NativeShader> {
    let header = if is_gles { "#version 300 es\nprecision highp float;\n" } else { "#version 330 core\n" };
    let full = format!("{header}#line 1\n{src}");
    let sh = gl.create_shader(kind).map_err(|e| anyhow!("glCreateShader: {e}"))?;
    gl.shader_source(sh, &full);
    gl.compile_shader(sh);
    if !gl.get_shader_compile_status(sh) {
        let log = gl.get_shader_info_log(sh);
        gl.delete_shader(sh);
        anyhow::bail!("compiling shaders/{name}: {log}");
    }
    Ok(sh)
}

/// Compile and link the body program.
pub(super) fn build_program(gl: &Gl<'_>, is_gles: bool) -> anyhow::Result<glow::NativeProgram> {
    link_program(gl, is_gles, (VERT_SRC, "bodies.vert"), (FRAG_SRC, "bodies.frag"))
}

/// Compile and link a program from a vertex and a fragment shader (source, file name).
pub(super) fn link_program(gl: &Gl<'_>, is_gles: bool, vert: (&str, &str), frag: (&str, &str)) -> anyhow::Result<glow::NativeProgram> {
    let vs = compile(gl, is_gles, glow::VERTEX_SHADER, vert.0, vert.1)?;
    let fs = match compile(gl, is_gles, glow::FRAGMENT_SHADER, frag.0, frag.1) {
        Ok(fs) => fs,
        Err(e) => {
            gl.delete_shader(vs);
            return Err(e);
        }
    };
    let p = match gl.create_program() {
        Ok(p) => p,
        Err(e) => {
            gl.delete_shader(vs);
            gl.delete_shader(fs);
            anyhow::bail!("glCreateProgram: {e}");
        }
    };
    gl.attach_shader(p, vs);
    gl.attach_shader(p, fs);
    gl.link_program(p);
    gl.detach_shader(p, vs);
    gl.detach_shader(p, fs);
    gl.delete_shader(vs);
    gl.delete_shader(fs);
    if !gl.get_program_link_status(p) {
        let log = gl.get_program_info_log(p);
        gl.delete_program(p);
        anyhow::bail!("linking shaders/{} + {}: {log}", vert.1, frag.1);
    }
    Ok(p)
}
