//! The image workflow's mistakes: a GL texture registered with `cuGraphicsGLRegisterImage` asked
//! for a pointer, a buffer asked for an array, a layer a 2D texture lacks, a surface over a
//! texture registered without the surface flag, a three-channel format, and an invalid map-flags
//! value. Each makes its own scratch texture (RGBA8, 16 × 16, nearest filtering) or buffer.

use std::sync::Arc;

use interop::sys::register_flags;
use interop::{map_resources, Context, GraphicsResource, Stream, SurfaceObject};

use super::scratch::Scratch;
use super::{got_from, Case, Got, SetupFailed};
use crate::gfx::gl::Gl;

/// Texels per side of a scratch texture.
const SIDE: i32 = 16;

/// A scratch 2D texture with `internal` format; deleted on drop.
struct Texture<'a> {
    gl: Gl<'a>,
    name: glow::NativeTexture,
}

impl<'a> Texture<'a> {
    fn new(gl: Gl<'a>, internal: u32, format: u32) -> Result<Self, SetupFailed> {
        let name = gl.create_texture().map_err(|e| SetupFailed(format!("glGenTextures: {e}")))?;
        gl.bind_texture(glow::TEXTURE_2D, Some(name));
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, glow::NEAREST as i32);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, glow::NEAREST as i32);
        gl.tex_image_2d_empty(glow::TEXTURE_2D, internal, SIDE, SIDE, format, glow::UNSIGNED_BYTE);
        gl.bind_texture(glow::TEXTURE_2D, None);
        Ok(Self { gl, name })
    }

    fn id(&self) -> u32 {
        self.name.0.get()
    }
}

impl Drop for Texture<'_> {
    fn drop(&mut self) {
        self.gl.delete_texture(self.name);
    }
}

/// Runs an image-workflow case (`ctx` current, sharing `gl`'s device).
pub(super) fn run(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let stream = Stream::create(ctx, interop::sys::stream_flags::NON_BLOCKING, 0)?;
    let r = match case.name {
        "image-pointer" | "image-layer-out-of-range" | "surface-without-ldst" => {
            let rgba = Texture::new(gl, glow::RGBA8, glow::RGBA)?;
            let flags = if case.name == "surface-without-ldst" { register_flags::NONE } else { register_flags::SURFACE_LDST };
            let mut res = vec![GraphicsResource::register_gl_image(ctx, rgba.id(), glow::TEXTURE_2D, flags)?];
            let mapping = map_resources(&mut res, &stream)?;
            let r = match case.name {
                "image-pointer" => mapping.pointer(0).map(|_| ()),
                "image-layer-out-of-range" => mapping.array(0, 1, 0).map(|_| ()),
                _ => {
                    let array = mapping.array(0, 0, 0)?;
                    SurfaceObject::new(&array).map(drop)
                }
            };
            mapping.unmap()?;
            drop(res); // unregister before the texture is deleted
            r
        }
        "register-rgb8-texture" => {
            let rgb = Texture::new(gl, glow::RGB8, glow::RGB)?;
            GraphicsResource::register_gl_image(ctx, rgb.id(), glow::TEXTURE_2D, register_flags::NONE).map(drop)
        }
        "buffer-as-array" | "map-flags-invalid" => {
            let buffer = Scratch::new(gl)?;
            let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
            let r = if case.name == "map-flags-invalid" {
                // 7 is none of CU_GRAPHICS_MAP_RESOURCE_FLAGS_NONE (0), _READ_ONLY (1), _WRITE_DISCARD (2).
                res[0].set_map_flags(7)
            } else {
                let mapping = map_resources(&mut res, &stream)?;
                let r = mapping.array(0, 0, 0).map(|_| ());
                mapping.unmap()?;
                r
            };
            drop(res); // unregister before the scratch buffer is deleted
            r
        }
        other => return Err(SetupFailed(format!("{other} is not an image-workflow case"))),
    };
    stream.synchronize()?;
    got_from(r)
}
