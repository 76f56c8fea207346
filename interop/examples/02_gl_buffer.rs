//! The resource-mapping workflow on a GL buffer, headless: register the buffer with CUDA, map
//! it, launch a kernel that writes it, unmap, draw it with GL and check the pixels.
//!
//! ```text
//! register (once)  cuGraphicsGLRegisterBuffer          GraphicsResource::register_gl_buffer
//! map              cuGraphicsMapResources              map_resources -> Mapping
//! get pointer      cuGraphicsResourceGetMappedPointer  Mapping::pointer -> MappedPtr
//! launch           cuLaunchKernel                      Launch, checked against the PTX
//! unmap            cuGraphicsUnmapResources            Mapping::unmap
//! draw             glDrawArrays                        (GL)
//! ```
//!
//! `cargo run -p cuda-gl-interop --example 02_gl_buffer`

mod common;

use std::process::ExitCode;

use common::{draw, exit, HeadlessGl, Res};
use cuda_gl_interop::sys::{register_flags, stream_flags};
use cuda_gl_interop::{gl_devices, map_resources, Context, Device, GraphicsResource, Launch, Module, SchedFlag, Stream, StreamSemantics};
use glow::HasContext as _;

/// `grid(out, side)`: point i of side² goes to the centre of pixel (i % side, i / side), in clip
/// coordinates (x, y, 0, 1): one `float4` per point.
const PTX: &str = include_str!("ptx/grid.ptx");

/// The target is `SIDE` × `SIDE` pixels, one point each.
const SIDE: i32 = 16;

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
    let kernel = Module::from_ptx(&ctx, PTX.as_bytes())?.function("grid")?;
    let n = (SIDE * SIDE) as usize;

    // GL: a buffer of n points, all zero (w = 0: nothing is drawn from it before the kernel runs).
    let g = &gl.gl;
    let vertex = "#version 330 core\nlayout(location = 0) in vec4 p;\nvoid main() { gl_Position = p; }\n";
    let program = draw::program(g, vertex, "#version 330 core\nout vec4 c;\nvoid main() { c = vec4(1.0); }\n")?;
    // SAFETY: the context is current on this thread (HeadlessGl); GL checks names and sizes.
    let buffer = unsafe {
        g.bind_vertex_array(Some(g.create_vertex_array()?));
        let buffer = g.create_buffer()?;
        g.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
        g.buffer_data_u8_slice(glow::ARRAY_BUFFER, &vec![0; n * 16], glow::DYNAMIC_DRAW);
        g.vertex_attrib_pointer_f32(0, 4, glow::FLOAT, false, 16, 0);
        g.enable_vertex_attrib_array(0);
        buffer
    };
    draw::texture_target(g, SIDE, SIDE)?;

    // CUDA: register once (the kernel overwrites all of it, so no read-back into CUDA is needed).
    let mut resources = [GraphicsResource::register_gl_buffer(&ctx, buffer.0.get(), register_flags::WRITE_DISCARD)?];
    let mapping = map_resources(&mut resources, &stream)?;
    let points = mapping.pointer(0)?.require(n * 16)?;
    let launch = Launch::new(&kernel).block(n as u32).ptr(points.view::<[f32; 4]>()).u32(SIDE as u32);
    // SAFETY: `grid` writes side² float4 values from the start of the view, which holds at least
    // that many (`require`); the unmap below is ordered after the kernel on the same stream.
    unsafe { launch.launch(&stream) }?;
    mapping.unmap()?; // GL work issued from here on sees what the kernel wrote

    // SAFETY: current context; the one enabled attribute array covers the n points drawn.
    unsafe {
        g.clear_color(0.0, 0.0, 0.0, 1.0);
        g.clear(glow::COLOR_BUFFER_BIT);
        g.use_program(Some(program));
        g.draw_arrays(glow::POINTS, 0, n as i32);
    }
    let lit = draw::pixels(g, SIDE, SIDE).chunks_exact(4).filter(|p| p[0] == 255).count();
    println!("{lit} of {n} pixels lit by the points the kernel wrote");
    // `resources` drops (unregisters) before `gl`: CUDA lets go before the GL objects go.
    if lit != n {
        return Err(format!("expected all {n} pixels lit").into());
    }
    Ok(())
}
