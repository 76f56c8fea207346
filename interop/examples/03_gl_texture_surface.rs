//! The image workflow, headless: a GL texture registered with CUDA, mapped, its CUDA array
//! written by a kernel through a surface object, unmapped, then read back by GL.
//!
//! ```text
//! register (once)  cuGraphicsGLRegisterImage (SURFACE_LDST)  GraphicsResource::register_gl_image
//! map              cuGraphicsMapResources                    map_resources -> Mapping
//! get the array    cuGraphicsSubResourceGetMappedArray       Mapping::array -> MappedArray
//! surface object   cuSurfObjectCreate                        SurfaceObject::new
//! launch           cuLaunchKernel (sust.b.2d)                Launch::surface
//! destroy it       cuSurfObjectDestroy                       drop(SurfaceObject)
//! unmap            cuGraphicsUnmapResources                  Mapping::unmap
//! ```
//!
//! `cargo run -p cuda-gl-interop --example 03_gl_texture_surface`

mod common;

use std::process::ExitCode;

use common::{draw, exit, HeadlessGl, Res};
use cuda_gl_interop::sys::{register_flags, stream_flags};
use cuda_gl_interop::{
    gl_devices, map_resources, Context, Device, GraphicsResource, Launch, Module, SchedFlag, Stream, StreamSemantics, SurfaceObject,
};

/// `paint(surf, w, h)`: texel (x, y) of a `w` × `h` RGBA8 surface becomes (x, y, 128, 255).
const PTX: &str = include_str!("ptx/paint.ptx");

/// The texture's size, texels.
const W: i32 = 32;
/// The texture's size, texels.
const H: i32 = 16;

fn main() -> ExitCode {
    exit(run())
}

fn run() -> Res {
    let api = cuda_gl_interop::init(StreamSemantics::Legacy)?; // without a driver: the names tried
    let gl = HeadlessGl::new()?;
    // The CUDA device that runs this GL context (cuGLGetDevices): none on Mesa or another vendor's GPU.
    let device = *gl_devices(&api)?.first().ok_or("the GL context does not run on a CUDA device")?;
    let ctx = Context::primary(&Device::from_raw(&api, device), SchedFlag::Auto)?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    let kernel = Module::from_ptx(&ctx, PTX.as_bytes())?.function("paint")?;

    // GL: an RGBA8 texture, attached to the framebuffer that GL reads back below.
    let texture = draw::texture_target(&gl.gl, W, H)?;
    // CUDA: register it once, for surface loads and stores.
    let mut images = [GraphicsResource::register_gl_image(&ctx, texture.0.get(), glow::TEXTURE_2D, register_flags::SURFACE_LDST)?];

    let mapping = map_resources(&mut images, &stream)?;
    let array = mapping.array(0, 0, 0)?; // layer 0, mip level 0
    println!("CUDA array {:?} texels, {:?} bytes per texel", array.size(), array.texel_bytes());
    if array.size() != (W as usize, H as usize) || array.texel_bytes() != Some(4) {
        return Err("the mapped array is not the W × H RGBA8 texture".into());
    }
    let surface = SurfaceObject::new(&array)?;
    let texels = (W * H) as u32;
    let launch = Launch::new(&kernel).grid(texels.div_ceil(256)).block(256).surface(&surface).u32(W as u32).u32(H as u32);
    // SAFETY: `paint` stores only texels (x, y) with x < W and y < H, inside the W × H array of
    // 4-byte texels checked above; the unmap below is ordered after it on the same stream.
    unsafe { launch.launch(&stream) }?;
    drop(surface); // cuSurfObjectDestroy, before the unmap
    mapping.unmap()?; // GL work issued from here on sees what the kernel stored

    // GL reads the texture (bottom row first, as the array's row 0).
    let pixels = draw::pixels(&gl.gl, W, H);
    let expected = |i: usize| [(i % W as usize) as u8, (i / W as usize) as u8, 128, 255];
    let wrong = pixels.chunks_exact(4).enumerate().filter(|(i, p)| **p != expected(*i)).count();
    println!("{} of {texels} texels as the kernel stored them", texels as usize - wrong);
    // `images` drops (unregisters) before `gl`: CUDA lets go before the texture and context go.
    if wrong != 0 {
        return Err(format!("{wrong} texels differ; texel 0 is {:?}", &pixels[..4]).into());
    }
    Ok(())
}
