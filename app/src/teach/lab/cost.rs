//! What registering every frame costs (`register-every-frame`): over [`ITERATIONS`] frames, a
//! texture and a buffer registered, mapped, unmapped and unregistered in each frame, against
//! the same objects registered once and only mapped and unmapped in each frame. Each frame is
//! timed on the host from its first call to the end of a `cuStreamSynchronize` (the map and the
//! unmap are stream-ordered); no GL work runs between the frames. The answer is `CUDA_SUCCESS`
//! when every call succeeded, with the medians and 99th percentiles, in µs, in its text and detail.

use std::ptr::null_mut;
use std::sync::Arc;
use std::time::Instant;

use interop::sys::{register_flags, stream_flags, CUgraphicsResource};
use interop::{map_resources, Api, Context, Error, GraphicsResource, Stream};

use super::scratch::{Scratch, Texture};
use super::{got_from, Got, SetupFailed};
use crate::gfx::gl::Gl;

/// Frames measured for each of the four ways.
pub const ITERATIONS: usize = 200;

/// The GL object a frame registers.
#[derive(Debug, Clone, Copy)]
enum Object {
    /// A 2D texture (`cuGraphicsGLRegisterImage`).
    Texture(u32),
    /// A buffer (`cuGraphicsGLRegisterBuffer`).
    Buffer(u32),
}

/// One frame that registers `object`: register, map, unmap, unregister, wait for `stream`.
fn frame_registering(api: &Api, object: Object, stream: &Stream) -> Result<(), Error> {
    let mut raw: CUgraphicsResource = null_mut();
    match object {
        // SAFETY: writes one handle; the name is a live RGBA8 2D texture of the GL context current
        // on this thread, which shares its device with the current CUDA context.
        Object::Texture(name) => unsafe { api.cuGraphicsGLRegisterImage(&mut raw, name, glow::TEXTURE_2D, register_flags::NONE) },
        // SAFETY: writes one handle; the name is a live buffer of the GL context current here.
        Object::Buffer(name) => unsafe { api.cuGraphicsGLRegisterBuffer(&mut raw, name, register_flags::NONE) },
    }?;
    let mut arr = [raw];
    // SAFETY: `arr` holds the resource registered above, not mapped; the stream is live.
    let mapped = unsafe { api.cuGraphicsMapResources(1, arr.as_mut_ptr(), stream.raw()) };
    // SAFETY: mapped just above (unmapped only if that succeeded); the stream is live.
    let unmapped = mapped.and_then(|()| unsafe { api.cuGraphicsUnmapResources(1, arr.as_mut_ptr(), stream.raw()) });
    // SAFETY: registered above and not mapped (either the map failed or the unmap ran); the
    // handle is not used again.
    let unregistered = unsafe { api.cuGraphicsUnregisterResource(raw) };
    unmapped.and(unregistered).and_then(|()| stream.synchronize())
}

/// One frame of a resource registered once: map, unmap, wait for `stream`.
fn frame_registered(res: &mut [GraphicsResource], stream: &Stream) -> Result<(), Error> {
    map_resources(res, stream)?.unmap()?;
    stream.synchronize()
}

/// The median and the 99th percentile of `us` (sorted here), µs.
fn median_p99(us: &mut [f64]) -> (f64, f64) {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us.get(((us.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN);
    (at(0.5), at(0.99))
}

/// Host time of `f`, µs.
fn timed(f: impl FnOnce() -> Result<(), Error>) -> Result<f64, Error> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e6)
}

/// `register-every-frame`: the four ways, frame by frame in turn, [`ITERATIONS`] times.
pub(super) fn run(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    ctx.make_current()?;
    let api = ctx.api();
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let texture = Texture::new(gl, glow::RGBA8, glow::RGBA)?;
    let buffer = Scratch::new(gl)?;
    let mut tex_once = vec![GraphicsResource::register_gl_image(ctx, texture.id(), glow::TEXTURE_2D, register_flags::NONE)?];
    let mut buf_once = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
    let mut us: [Vec<f64>; 4] = std::array::from_fn(|_| Vec::with_capacity(ITERATIONS));
    let mut failed = None;
    'frames: for _ in 0..ITERATIONS {
        let frames: [&mut dyn FnMut() -> Result<(), Error>; 4] = [
            &mut || frame_registering(api, Object::Texture(texture.id()), &stream),
            &mut || frame_registered(&mut tex_once, &stream),
            &mut || frame_registering(api, Object::Buffer(buffer.name()), &stream),
            &mut || frame_registered(&mut buf_once, &stream),
        ];
        for (f, out) in frames.into_iter().zip(us.iter_mut()) {
            match timed(f) {
                Ok(t) => out.push(t),
                Err(e) => {
                    failed = Some(e);
                    break 'frames;
                }
            }
        }
    }
    drop(tex_once); // unregister before the texture and the buffer are deleted
    drop(buf_once);
    drop(buffer);
    drop(texture);
    if let Some(e) = failed {
        return got_from(Err(e));
    }
    let [mut tex_every, mut tex_map, mut buf_every, mut buf_map] = us;
    let (te, tm, be, bm) = (median_p99(&mut tex_every), median_p99(&mut tex_map), median_p99(&mut buf_every), median_p99(&mut buf_map));
    let mut g = got_from(Ok(()))?;
    g.text = format!(
        "every call returned CUDA_SUCCESS; a frame (median of {ITERATIONS}) that registers and unregisters took {:.0} µs against \
         {:.0} µs for map + unmap alone (texture), {:.0} µs against {:.0} µs (buffer)",
        te.0, tm.0, be.0, bm.0
    );
    g.detail = Some(format!(
        "host µs per frame, median / 99th percentile of {ITERATIONS}, each frame ended by cuStreamSynchronize, no GL work \
         between frames: texture (RGBA8 16 × 16) register + map + unmap + unregister {:.1} / {:.1}, map + unmap of one \
         registered once {:.1} / {:.1}; buffer (256 bytes) register + map + unmap + unregister {:.1} / {:.1}, map + unmap \
         {:.1} / {:.1}; registering every frame added {:.1} µs a frame (texture) and {:.1} µs (buffer) at the median",
        te.0,
        te.1,
        tm.0,
        tm.1,
        be.0,
        be.1,
        bm.0,
        bm.1,
        te.0 - tm.0,
        be.0 - bm.0
    ));
    Ok(g)
}
