//! The image workflow on the GPU: a GL texture registered with `cuGraphicsGLRegisterImage`,
//! mapped, surface and texture objects made over its CUDA array (made and destroyed: no kernel
//! uses them here), the array written with `cuMemcpy2D`, then read by GL; and the driver's answers to the image workflow's mistakes,
//! printed for the record (`image workflow: …` lines).

use interop::sys::{array_format, register_flags};
use interop::{map_resources, safe::Sampling, GraphicsResource, SurfaceObject, TextureObject};

use super::*;

const W: usize = 64;
const H: usize = 32;

/// An RGBA8 (or `internal`) `W` × `H` texture with nearest filtering (complete without mipmaps).
fn texture(gl: nbody_app::gfx::gl::Gl<'_>, internal: u32, format: u32) -> Result<glow::NativeTexture, Failed> {
    let t = gl.create_texture()?;
    gl.bind_texture(glow::TEXTURE_2D, Some(t));
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, glow::NEAREST as i32);
    gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, glow::NEAREST as i32);
    gl.tex_image_2d_empty(glow::TEXTURE_2D, internal, W as i32, H as i32, format, glow::UNSIGNED_BYTE);
    gl.bind_texture(glow::TEXTURE_2D, None);
    Ok(t)
}

/// What the driver answered, for the record.
fn answer<T>(r: &interop::Result<T>) -> String {
    match r {
        Ok(_) => "CUDA_SUCCESS".into(),
        Err(e) => e.code().map_or_else(|| format!("{e}"), |c| format!("{c:?}")),
    }
}

pub(super) fn gl_image_round_trip_and_its_mistakes() -> Result<(), Failed> {
    let headless = HeadlessContext::new(0)?;
    let gl = headless.gl();
    let ctx = cuda()?;
    let stream = Stream::special(&ctx, interop::safe::StreamKind::Null);
    let tex = texture(gl, glow::RGBA8, glow::RGBA)?;
    let pattern: Vec<u8> = (0..W * H * 4).map(|i| (i * 7 % 251) as u8).collect();
    let result = (|| -> Result<(), Failed> {
        // register → map → array → surface and texture objects → copy in → unmap.
        let mut res = vec![GraphicsResource::register_gl_image(&ctx, tex.0.get(), glow::TEXTURE_2D, register_flags::SURFACE_LDST)?];
        let src = DeviceBuffer::from_slice(&ctx, &pattern)?;
        {
            let mapping = map_resources(&mut res, &stream)?;
            let array = mapping.array(0, 0, 0)?;
            let d = array.descriptor();
            ensure(
                array.size() == (W, H) && d.format == array_format::UNSIGNED_INT8 && d.num_channels == 4,
                format!("the array of a {W}×{H} RGBA8 texture: {d:?}"),
            )?;
            let surface = SurfaceObject::new(&array)?;
            let texture_object = TextureObject::new(&array, Sampling::Point)?;
            ensure(surface.handle() != 0 && texture_object.handle() != 0, "object handles are 0")?;
            // SAFETY: `src` holds H rows of W·4 bytes on this device and lives past the sync below.
            unsafe { interop::safe::image::copy_device_to_array(src.ptr(), W * 4, &array, W, H)? };
            let mut back = vec![0u8; W * H * 4];
            interop::safe::image::copy_array_to_host(&array, &mut back)?;
            ensure(back == pattern, "the array read back differs from what was copied in")?;
            let pointer = mapping.pointer(0);
            eprintln!("image workflow: cuGraphicsResourceGetMappedPointer on a mapped image -> {}", answer(&pointer));
            ensure(pointer.is_err(), "a mapped image gave a device pointer")?;
            drop((surface, texture_object));
            mapping.unmap()?;
        }
        // GL sees what CUDA wrote: the texture as an FBO's colour, read back.
        let fbo = gl.create_framebuffer()?;
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, Some(tex), 0);
        let mut seen = vec![0u8; W * H * 4];
        let read = gl.read_pixels_rgba(W as u32, H as u32, &mut seen);
        gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        gl.delete_framebuffer(fbo);
        read?;
        ensure(seen == pattern, "GL read other texels than CUDA wrote")?;

        drop(res); // one registration of the texture at a time
                   // Mistakes: a surface over an image registered without SURFACE_LDST (made all the same by
                   // the H200's driver 580: printed, not asserted), and a layer a 2D texture does not have.
        let mut plain = vec![GraphicsResource::register_gl_image(&ctx, tex.0.get(), glow::TEXTURE_2D, register_flags::NONE)?];
        {
            let mapping = map_resources(&mut plain, &stream)?;
            let array = mapping.array(0, 0, 0)?;
            let s = SurfaceObject::new(&array);
            eprintln!("image workflow: cuSurfObjectCreate on an image registered without SURFACE_LDST -> {}", answer(&s));
            let layer = mapping.array(0, 1, 0);
            eprintln!("image workflow: cuGraphicsSubResourceGetMappedArray of layer 1 of a 2D texture -> {}", answer(&layer));
            ensure(layer.is_err(), "a 2D texture gave an array for layer 1")?;
            drop(s);
        }
        // An invalid map-flags value (the reference: CUDA_ERROR_INVALID_VALUE).
        let flags = plain[0].set_map_flags(7);
        eprintln!("image workflow: cuGraphicsResourceSetMapFlags(7) -> {}", answer(&flags));
        ensure(flags.is_err(), "map flags 7 were accepted")?;
        drop(plain);
        // A three-channel internal format, which the reference does not list (the H200's driver
        // 580 registered it all the same: printed, not asserted).
        let rgb = texture(gl, glow::RGB8, glow::RGB)?;
        let r = GraphicsResource::register_gl_image(&ctx, rgb.0.get(), glow::TEXTURE_2D, register_flags::NONE);
        eprintln!("image workflow: cuGraphicsGLRegisterImage of a GL_RGB8 texture -> {}", answer(&r));
        drop(r);
        gl.delete_texture(rgb);
        // A buffer's mapping has no array.
        let buf = gl.create_buffer()?;
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(buf));
        gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &[0u8; 1024], glow::DYNAMIC_DRAW);
        gl.bind_buffer(glow::ARRAY_BUFFER, None);
        let mut b = vec![GraphicsResource::register_gl_buffer(&ctx, buf.0.get(), register_flags::NONE)?];
        {
            let mapping = map_resources(&mut b, &stream)?;
            let a = mapping.array(0, 0, 0);
            eprintln!("image workflow: cuGraphicsSubResourceGetMappedArray on a mapped buffer -> {}", answer(&a));
            ensure(a.is_err(), "a mapped buffer gave an array")?;
        }
        drop(b);
        gl.delete_buffer(buf);
        Ok(())
    })();
    gl.delete_texture(tex);
    result
}
