//! Silent mistakes: every driver call returns `CUDA_SUCCESS` and the data is wrong (or may be).
//! Each case writes a known pattern ([`PATTERN`]) into a zeroed scratch buffer through CUDA (or
//! re-specifies the buffer in GL, or has GL fill a scratch texture that CUDA then reads under
//! `WRITE_DISCARD`), reads the result back (GL's `glGetBufferSubData`, the mapped size, or
//! CUDA's copy of the texture), and reports a [`Data`] answer: the old contents, the new, or
//! neither. All of them are isolated (a late or forbidden write may fault and spoil the context).

use std::sync::Arc;

use interop::sys::{map_flags, register_flags, stream_flags};
use interop::{map_resources, Context, Error, GraphicsResource, Stream};

use super::scratch::{Scratch, Texture, SCRATCH_BYTES};
use super::{got_from, Case, Data, Got, SetupFailed};
use crate::gfx::gl::Gl;

/// 32-bit words of a scratch buffer.
const WORDS: usize = SCRATCH_BYTES / 4;
/// What a scratch buffer holds before the case writes (glBufferData of zero bytes).
const OLD: u32 = 0;
/// What CUDA writes (`cuMemsetD32Async`).
pub const PATTERN: u32 = 0xa5a5_a5a5;
/// How long the spin kernel on stream B of `map-stream-mismatch` delays the write, ns (20 ms).
pub const MISMATCH_SPIN_NS: u64 = 20_000_000;
/// The size `buffer-data-on-registered` re-specifies the buffer to, bytes.
pub const RESIZED_BYTES: usize = 1024;
/// The byte GL fills the re-specified buffer with.
const RESIZED_FILL: u8 = 0x5a;
/// The byte of every channel of `write-discard-read-back`'s texture before it is registered.
const TEXEL_OLD: u8 = 0x3c;
/// The byte of every channel GL clears the texture to after the registration, right before the
/// map: the texture's contents when CUDA reads it (the same byte in every channel, so that the
/// channel order of the CUDA array does not matter).
const TEXEL_NEW: u8 = 0xa5;

/// What `got` shows against [`OLD`] and [`PATTERN`], in words (for the detail).
fn words(got: &[u32]) -> String {
    let first: Vec<String> = got.iter().take(4).map(|w| format!("{w:#010x}")).collect();
    let written = got.iter().filter(|&&w| w == PATTERN).count();
    let old = got.iter().filter(|&&w| w == OLD).count();
    format!("first words {}; {written} of {} words as written ({PATTERN:#010x}), {old} as before ({OLD:#010x})", first.join(" "), got.len())
}

/// The short text of a silent answer.
fn said(d: Data) -> &'static str {
    match d {
        Data::Stale => "every call returned CUDA_SUCCESS, and GL read the old contents",
        Data::Garbled => "every call returned CUDA_SUCCESS, and GL read neither the old contents nor what CUDA wrote",
        Data::Current => "every call returned CUDA_SUCCESS, and GL read what CUDA wrote",
    }
}

/// Runs a silent case (`ctx` current, sharing `gl`'s device).
pub(super) fn run(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    match case.name {
        "map-stream-mismatch" => stream_mismatch(gl, ctx),
        "gl-read-while-mapped" => gl_read_while_mapped(gl, ctx),
        "write-read-only-registered" => write_read_only(gl, ctx),
        "buffer-data-on-registered" => buffer_data_on_registered(gl, ctx),
        "write-discard-read-back" => write_discard_read_back(gl, ctx),
        other => Err(SetupFailed(format!("no GL case {other}"))),
    }
}

/// `map-stream-mismatch`: map on A, write on B behind a spin kernel, unmap on A, read in GL.
fn stream_mismatch(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let a = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let b = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
    let mapping = map_resources(&mut res, &a)?;
    let ptr = mapping.pointer(0)?.require(SCRATCH_BYTES)?.device_ptr();
    let module = super::context::spin(ctx, &b, MISMATCH_SPIN_NS)?;
    // SAFETY: `ptr` is the mapped buffer's device address with at least SCRATCH_BYTES = WORDS * 4
    // bytes (checked by `require`). The write is ordered on B, behind the spin kernel, and not with
    // the unmap on A — the mistake: it may land after the unmap. A write to device memory cannot
    // reach this process's memory; a fault would come back as a CUDA error (this case runs in a
    // child process).
    let write = unsafe { api.cuMemsetD32Async(ptr, PATTERN, WORDS, b.raw()) };
    mapping.unmap()?;
    let (first, gl_err) = buffer.read_words(WORDS);
    let late = b.synchronize();
    let (after, _) = buffer.read_words(WORDS);
    drop(module);
    if let Err(e) = write.and(late) {
        return got_from(Err(e));
    }
    let d = Data::classify(&first, OLD, PATTERN);
    let detail = format!(
        "GL read right after the unmap on A (B still spinning {} ms before its write): {} (GL error {gl_err:#x}); after \
         cuStreamSynchronize(B): {}",
        MISMATCH_SPIN_NS / 1_000_000,
        words(&first),
        words(&after)
    );
    drop(res);
    drop(buffer);
    Ok(Got::silent(d, said(d), detail))
}

/// `gl-read-while-mapped`: write through the mapping, wait, read in GL before the unmap.
fn gl_read_while_mapped(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let a = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
    let mapping = map_resources(&mut res, &a)?;
    let ptr = mapping.pointer(0)?.require(SCRATCH_BYTES)?.device_ptr();
    // SAFETY: `ptr` is the mapped buffer's device address with at least WORDS * 4 bytes (checked
    // by `require`); the write is ordered on A after the map, and A is waited for below.
    if let Err(e) = unsafe { api.cuMemsetD32Async(ptr, PATTERN, WORDS, a.raw()) }.and_then(|()| a.synchronize()) {
        return got_from(Err(e));
    }
    // The mistake: GL reads the buffer while CUDA holds it mapped.
    let (during, gl_err) = buffer.read_words(WORDS);
    mapping.unmap()?;
    let (after, after_err) = buffer.read_words(WORDS);
    let d = Data::classify(&during, OLD, PATTERN);
    let detail = format!(
        "GL read while mapped (CUDA's write complete): {} (GL error {gl_err:#x}); after the unmap: {} (GL error {after_err:#x})",
        words(&during),
        words(&after)
    );
    drop(res);
    drop(buffer);
    Ok(Got::silent(d, said(d), detail))
}

/// `write-read-only-registered`: register READ_ONLY, write through the mapping, unmap, read in GL.
fn write_read_only(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let a = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::READ_ONLY)?];
    let mapping = map_resources(&mut res, &a)?;
    let ptr = mapping.pointer(0)?.require(SCRATCH_BYTES)?.device_ptr();
    // SAFETY: `ptr` is the mapped buffer's device address with at least WORDS * 4 bytes (checked
    // by `require`), ordered on A between the map and the unmap. Writing a resource registered
    // READ_ONLY breaks a promise to the driver, not a memory rule of this process; a fault comes
    // back as a CUDA error (this case runs in a child process).
    let write = unsafe { api.cuMemsetD32Async(ptr, PATTERN, WORDS, a.raw()) }.and_then(|()| a.synchronize());
    let unmap = mapping.unmap();
    if let Err(e) = write.and(unmap) {
        return got_from(Err(e));
    }
    let (got, gl_err) = buffer.read_words(WORDS);
    let d = Data::classify(&got, OLD, PATTERN);
    let detail = format!("GL read after the unmap: {} (GL error {gl_err:#x})", words(&got));
    drop(res);
    drop(buffer);
    Ok(Got::silent(d, said(d), detail))
}

/// `buffer-data-on-registered`: map (pointer, size), glBufferData to a new size, map again.
fn buffer_data_on_registered(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let buffer = Scratch::new(gl)?;
    let a = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
    let (before_ptr, before_size) = {
        let mapping = map_resources(&mut res, &a)?;
        let p = mapping.pointer(0)?;
        let seen = (p.device_ptr(), p.size());
        mapping.unmap()?;
        seen
    };
    // The mistake: new storage for a registered buffer.
    buffer.specify(RESIZED_BYTES, RESIZED_FILL)?;
    let (after_ptr, after_size, head) = {
        let mapping = map_resources(&mut res, &a)?;
        let p = mapping.pointer(0)?;
        let seen = (p.device_ptr(), p.size());
        let mut head = [0u32; 4];
        let read = p.copy_to_host(&mut head);
        mapping.unmap()?;
        (seen.0, seen.1, read.map(|()| head))
    };
    let d = if after_size == RESIZED_BYTES {
        Data::Current
    } else if after_size == before_size {
        Data::Stale
    } else {
        Data::Garbled
    };
    let seen = match head {
        Ok(h) => format!("{:#010x?}", h),
        Err(e) => format!("not readable ({e})"),
    };
    let fill = u32::from_ne_bytes([RESIZED_FILL; 4]);
    let detail = format!(
        "before: pointer {before_ptr:#x}, {before_size} bytes; after glBufferData({RESIZED_BYTES} bytes of {RESIZED_FILL:#04x}): \
         pointer {after_ptr:#x}{}, {after_size} bytes; CUDA reads there first {seen} (GL's new contents are {fill:#010x}, \
         the old {OLD:#010x})",
        if after_ptr == before_ptr { " (the same)" } else { " (moved)" }
    );
    let text = match d {
        Data::Current => "every call returned CUDA_SUCCESS, and the mapping has the new size",
        Data::Stale => "every call returned CUDA_SUCCESS, and the mapping still has the old size",
        Data::Garbled => "every call returned CUDA_SUCCESS, and the mapping has neither the old size nor the new",
    };
    drop(res);
    drop(buffer);
    Ok(Got::silent(d, text, detail))
}

/// One map of `res` (a registered texture) on `stream`: CUDA copies the array of layer 0, level 0
/// to the host (`cuMemcpy2DAsync`, then a wait), and the texels come back as 32-bit words.
fn texels_through_cuda(res: &mut [GraphicsResource], stream: &Stream) -> Result<Vec<u32>, Error> {
    let mapping = map_resources(res, stream)?;
    let read = mapping.array(0, 0, 0).and_then(|array| {
        let (w, h) = array.size();
        let mut bytes = vec![0xee_u8; w * h.max(1) * array.texel_bytes().unwrap_or(4)];
        interop::safe::image::copy_array_to_host(&array, &mut bytes)?;
        Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<u32>>())
    });
    let unmap = mapping.unmap();
    let words = read?;
    unmap?;
    Ok(words)
}

/// `write-discard-read-back`: GL fills a texture ([`TEXEL_OLD`]), it is registered, GL clears it
/// to [`TEXEL_NEW`], the map flags are set to WRITE_DISCARD, and CUDA maps it and copies it to the
/// host. Then the same with map flags NONE, for the detail.
fn write_discard_read_back(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let texture = Texture::new(gl, glow::RGBA8, glow::RGBA)?;
    texture.fill_rgba8([TEXEL_OLD; 4])?;
    let a = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_image(ctx, texture.id(), glow::TEXTURE_2D, register_flags::NONE)?];
    texture.fill_rgba8([TEXEL_NEW; 4])?;
    // The mistake: a promise that CUDA will not read, then a read.
    res[0].set_map_flags(map_flags::WRITE_DISCARD)?;
    let discarded = texels_through_cuda(&mut res, &a);
    res[0].set_map_flags(map_flags::NONE)?;
    let control = texels_through_cuda(&mut res, &a);
    drop(res); // unregister before the texture is deleted
    drop(texture);
    let got = match discarded {
        Ok(w) => w,
        Err(e) => return got_from(Err(e)),
    };
    let (old, new) = (u32::from_ne_bytes([TEXEL_OLD; 4]), u32::from_ne_bytes([TEXEL_NEW; 4]));
    let texels = |w: &[u32]| {
        let first: Vec<String> = w.iter().take(4).map(|t| format!("{t:#010x}")).collect();
        format!(
            "first texels {}; {} of {} texels as GL cleared them last ({new:#010x}), {} as before ({old:#010x})",
            first.join(" "),
            w.iter().filter(|&&t| t == new).count(),
            w.len(),
            w.iter().filter(|&&t| t == old).count()
        )
    };
    let d = Data::classify(&got, old, new);
    let detail = format!(
        "CUDA's copy of the texture mapped with WRITE_DISCARD: {}; the same texture mapped with NONE afterwards: {}",
        texels(&got),
        match &control {
            Ok(w) => texels(w),
            Err(e) => format!("not read ({e})"),
        }
    );
    let text = match d {
        Data::Current => "every call returned CUDA_SUCCESS, and CUDA read the texels GL wrote last",
        Data::Stale => "every call returned CUDA_SUCCESS, and CUDA read the texels of before GL's last write",
        Data::Garbled => "every call returned CUDA_SUCCESS, and CUDA read neither GL's last texels nor the ones before",
    };
    Ok(Got::silent(d, text, detail))
}
