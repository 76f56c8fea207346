//! External memory and an external semaphore, headless: CUDA allocates memory it can export
//! (`ExportableBuffer`: `cuMemCreate` with a POSIX-fd handle type), GL imports it as a memory
//! object (`GL_EXT_memory_object_fd`), and a binary semaphore made by Vulkan, imported into CUDA
//! (`ExternalSemaphore`) and GL (`GL_EXT_semaphore_fd`), orders GL's read after CUDA's write on
//! the GPU: no map, no unmap, no host wait. `cargo run -p cuda-gl-interop --example 04_external_memory`

mod common;

use std::os::fd::{AsRawFd as _, IntoRawFd as _};
use std::process::ExitCode;

use common::{exit, vulkan::ExportableSemaphore, HeadlessGl, Res};
use cuda_gl_interop::sys::stream_flags;
use cuda_gl_interop::{gl_devices, Context, Device, ExportableBuffer, ExternalSemaphore, Launch, Module, SchedFlag, Stream, StreamSemantics};
use glow::HasContext as _;

/// `index(out, n)`: `out[i] = 2 i + 1` for i < n (u32).
const PTX: &str = include_str!("ptx/index.ptx");
/// Values written, u32.
const N: usize = 1024;
/// `GL_HANDLE_TYPE_OPAQUE_FD_EXT`.
const OPAQUE_FD: u32 = 0x9586;

fn main() -> ExitCode {
    exit(run())
}

fn run() -> Res {
    let api = cuda_gl_interop::init(StreamSemantics::Legacy)?; // without a driver: the names tried
    let gl = HeadlessGl::new()?;
    let device = Device::from_raw(&api, *gl_devices(&api)?.first().ok_or("the GL context does not run on a CUDA device")?);
    let ctx = Context::primary(&device, SchedFlag::Auto)?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    let kernel = Module::from_ptx(&ctx, PTX.as_bytes())?.function("index")?;
    gl.require(&["GL_EXT_memory_object_fd", "GL_EXT_semaphore_fd"])?;
    // SAFETY: each type is the function's prototype in the Khronos registry (glext.h).
    let (create_memory, import_memory, buffer_storage, gen_semaphore, import_semaphore, wait_semaphore) = unsafe {
        (
            gl.function::<unsafe extern "system" fn(i32, *mut u32)>(c"glCreateMemoryObjectsEXT")?,
            gl.function::<unsafe extern "system" fn(u32, u64, u32, i32)>(c"glImportMemoryFdEXT")?,
            gl.function::<unsafe extern "system" fn(u32, isize, u32, u64)>(c"glBufferStorageMemEXT")?,
            gl.function::<unsafe extern "system" fn(i32, *mut u32)>(c"glGenSemaphoresEXT")?,
            gl.function::<unsafe extern "system" fn(u32, u32, i32)>(c"glImportSemaphoreFdEXT")?,
            gl.function::<unsafe extern "system" fn(u32, u32, *const u32, u32, *const u32, *const u32)>(c"glWaitSemaphoreEXT")?,
        )
    };

    // CUDA memory (rounded up to the allocation granularity), the semaphore in CUDA.
    let memory = ExportableBuffer::new(&ctx, N * 4)?;
    let vulkan = ExportableSemaphore::new(device.uuid_bytes()?)?;
    let cuda_done = ExternalSemaphore::import_fd(&ctx, vulkan.export_fd()?)?;
    // GL: a memory object on the CUDA allocation, a buffer on it, the semaphore in GL.
    let (g, mut object, mut semaphore, memory_fd, semaphore_fd) = (&gl.gl, 0, 0, memory.export_fd()?, vulkan.export_fd()?);
    // SAFETY: the context is current on this thread (HeadlessGl); each call writes one name; the
    // size imported is that of the allocation behind the fd (`ExportableBuffer::size`).
    let shared = unsafe {
        create_memory(1, &mut object);
        import_memory(object, memory.size() as u64, OPAQUE_FD, memory_fd.as_raw_fd());
        if g.get_error() != glow::NO_ERROR {
            return Err("GL refused the CUDA allocation's fd".into()); // the fds close here
        }
        let _ = memory_fd.into_raw_fd(); // GL owns it now
        gen_semaphore(1, &mut semaphore);
        import_semaphore(semaphore, OPAQUE_FD, semaphore_fd.as_raw_fd());
        if g.get_error() != glow::NO_ERROR {
            return Err("GL refused the semaphore's fd".into());
        }
        let _ = semaphore_fd.into_raw_fd(); // GL owns it now
        let (shared, copy) = (g.create_buffer()?, g.create_buffer()?);
        g.bind_buffer(glow::COPY_READ_BUFFER, Some(shared));
        buffer_storage(glow::COPY_READ_BUFFER, (N * 4) as isize, object, 0);
        g.bind_buffer(glow::COPY_WRITE_BUFFER, Some(copy));
        g.buffer_data_size(glow::COPY_WRITE_BUFFER, (N * 4) as i32, glow::STREAM_READ);
        shared
    };

    // CUDA writes, then signals on the same stream; GL waits on the GPU, then copies.
    let launch = Launch::new(&kernel).grid((N as u32).div_ceil(256)).block(256).ptr(memory.view::<u32>()).u32(N as u32);
    // SAFETY: `index` writes out[i] for i < N, inside the view of N values; `memory` outlives the
    // kernel (its drop synchronises the context before it frees the allocation).
    unsafe { launch.launch(&stream) }?;
    cuda_done.signal(&stream)?;
    let mut out = vec![0u8; N * 4];
    // SAFETY: current context; one buffer barrier (`shared`), no textures; `out` holds N * 4 bytes.
    unsafe {
        wait_semaphore(semaphore, 1, &shared.0.get(), 0, std::ptr::null(), std::ptr::null());
        g.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, 0, 0, (N * 4) as i32);
        g.get_buffer_sub_data(glow::COPY_WRITE_BUFFER, 0, &mut out);
    }
    let wrong = out.chunks_exact(4).enumerate().filter(|(i, b)| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) != 2 * *i as u32 + 1).count();
    println!("GL read {} of {N} values as CUDA wrote them", N - wrong);
    // Drops, in reverse order of declaration: the CUDA import, Vulkan's objects, the allocation,
    // and the GL context with its buffers, memory object and semaphore.
    if wrong != 0 {
        return Err(format!("{wrong} values differ").into());
    }
    Ok(())
}
