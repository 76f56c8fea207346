//! A mapped GL buffer written by a kernel that another CUDA library launches (cudarc, a C or C++
//! library through FFI, …). This crate's `Launch` and views cannot cross into that library; what
//! crosses is the raw device address of the mapping, `MappedPtr::device_ptr` (a `CUdeviceptr`,
//! `u64`), passed as a kernel argument like any other 64-bit value. The address is valid in the
//! CUDA context that mapped the buffer (here the device's primary context) until the unmap, and
//! the compiler no longer sees that: the launch is `unsafe`, and its caller unmaps only after it.
//!
//! `foreign_launch` stands for the other library (cudarc is not a dependency of this crate): it
//! takes raw driver handles and the address, and launches with `cuLaunchKernel`'s argument array,
//! the form a driver-API launcher ends in.
//!
//! `cargo run -p cuda-gl-interop --example 05_cudarc`

mod common;

use std::ffi::c_void;
use std::process::ExitCode;

use common::{exit, HeadlessGl, Res};
use cuda_gl_interop::sys::{register_flags, stream_flags, CUdeviceptr, CUfunction, CUstream};
use cuda_gl_interop::{gl_devices, map_resources, Api, Context, Device, GraphicsResource, Module, SchedFlag, Stream, StreamSemantics};
use glow::HasContext as _;

/// `index(out, n)`: `out[i] = 2 i + 1` for i < n (u32).
const PTX: &str = include_str!("ptx/index.ptx");
/// Values written, u32.
const N: u32 = 1000;

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
    let kernel = Module::from_ptx(&ctx, PTX.as_bytes())?.function("index")?;

    let (g, bytes) = (&gl.gl, N as usize * 4);
    // SAFETY: the context is current on this thread (HeadlessGl); GL checks names and sizes.
    let buffer = unsafe {
        let buffer = g.create_buffer()?;
        g.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
        g.buffer_data_u8_slice(glow::ARRAY_BUFFER, &vec![0; bytes], glow::DYNAMIC_DRAW);
        buffer
    };
    let mut resources = [GraphicsResource::register_gl_buffer(&ctx, buffer.0.get(), register_flags::NONE)?];
    let mapping = map_resources(&mut resources, &stream)?;
    let address: CUdeviceptr = mapping.pointer(0)?.require(bytes)?.device_ptr();
    // SAFETY: `address` holds `bytes` = N u32 values (`require`), mapped in `ctx`, current on this
    // thread, until `mapping.unmap()` below, which the stream orders after the kernel.
    unsafe { foreign_launch(&api, kernel.raw(), stream.raw(), address, N) }?;
    mapping.unmap()?; // GL work issued from here on sees what the kernel wrote

    let mut out = vec![0u8; bytes];
    // SAFETY: current context; the buffer bound to ARRAY_BUFFER holds `bytes` bytes, `out` as many.
    unsafe { g.get_buffer_sub_data(glow::ARRAY_BUFFER, 0, &mut out) };
    let wrong = out.chunks_exact(4).enumerate().filter(|(i, b)| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) != 2 * *i as u32 + 1).count();
    println!("GL read {} of {N} values that the foreign launch wrote through the mapped address", N as usize - wrong);
    // `resources` drops (unregisters) before `gl`: CUDA lets go before the GL objects go.
    if wrong != 0 {
        return Err(format!("{wrong} values differ").into());
    }
    Ok(())
}

/// Another library's launch of `index(out, n)`: raw handles in, one `cuLaunchKernel`. (Only
/// this crate's entry-point table is used, to reach the driver function.)
///
/// # Safety
/// `f` is `index` of a module of the current context; `out` holds `n` u32 values that `f` may
/// write in that context until the launch has completed on `stream`.
unsafe fn foreign_launch(api: &Api, f: CUfunction, stream: CUstream, mut out: CUdeviceptr, mut n: u32) -> cuda_gl_interop::Result<()> {
    let blocks = n.div_ceil(256);
    // `kernelParams`: one pointer per parameter of `.entry index(.param .u64 out, .param .u32 n)`.
    let mut params = [(&mut out as *mut CUdeviceptr).cast::<c_void>(), (&mut n as *mut u32).cast::<c_void>()];
    // SAFETY: two parameters as the PTX declares, each pointing at a live value of its type for the
    // call; the memory `out` names is the caller's promise; `f` and `stream` are live handles.
    unsafe { api.cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) }
}
