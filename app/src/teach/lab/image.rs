//! The image workflow's mistakes: a GL texture registered with `cuGraphicsGLRegisterImage` asked
//! for a pointer, a buffer asked for an array, a layer a 2D texture lacks, a surface over a
//! texture registered without the surface flag, a three-channel format, an invalid map-flags
//! value, a texture deleted while registered, and the map, unmap or unregister of a registered
//! texture with no GL context current. Each makes its own scratch texture (RGBA8, 16 × 16,
//! nearest filtering) or buffer.

use std::ptr::null_mut;
use std::sync::Arc;

use interop::sys::{register_flags, stream_flags, CUarray, CUgraphicsResource, CUstream};
use interop::{map_resources, Api, Context, Error, GraphicsResource, Stream, SurfaceObject};

use super::scratch::{Scratch, Texture};
use super::{got_from, result_words, Case, Got, SetupFailed};
use crate::gfx::context::HeadlessContext;
use crate::gfx::gl::Gl;

/// Runs an image-workflow case (`ctx` current, sharing `gl`'s device; `owner`: the owner of
/// `gl`'s context, which the `*-no-gl-context` cases release).
pub(super) fn run(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>, owner: Option<&HeadlessContext>) -> Result<Got, SetupFailed> {
    match case.name {
        "texture-deleted-while-registered" => return texture_deleted(gl, ctx),
        "map-no-gl-context" => return without_gl(Released::Map, gl, ctx, owner),
        "unmap-no-gl-context" => return without_gl(Released::Unmap, gl, ctx, owner),
        "unregister-no-gl-context" => return without_gl(Released::Unregister, gl, ctx, owner),
        _ => {}
    }
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
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

/// `texture-deleted-while-registered` (isolated): register a texture, glDeleteTextures it, then
/// map, get the array, unmap and unregister (raw calls, each code kept). The answer is the first
/// call the driver refused, or CUDA_SUCCESS when it accepted all of them.
fn texture_deleted(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let texture = Texture::new(gl, glow::RGBA8, glow::RGBA)?;
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut raw: CUgraphicsResource = null_mut();
    // SAFETY: writes one handle; the texture is a live RGBA8 2D texture of the GL context current
    // here, which shares its device with `ctx`.
    unsafe { api.cuGraphicsGLRegisterImage(&mut raw, texture.id(), glow::TEXTURE_2D, register_flags::NONE) }?;
    // The mistake: the GL texture goes while CUDA still has it registered.
    let name = texture.delete();
    gl.finish();
    let mut arr = [raw];
    let mut steps: Vec<(&'static str, Result<(), Error>)> = Vec::new();
    // Progress on stderr: if the process dies, the parent's report ends with the last step.
    eprintln!("lab: glDeleteTextures({name}) of the registered texture done; cuGraphicsMapResources");
    // SAFETY: `arr` holds the resource registered above, not mapped, and the stream is live; that
    // its texture is deleted is the mistake, which the driver has to find out.
    let map = unsafe { api.cuGraphicsMapResources(1, arr.as_mut_ptr(), stream.raw()) };
    let mapped = map.is_ok();
    steps.push(("cuGraphicsMapResources", map));
    let mut array: CUarray = null_mut();
    if mapped {
        eprintln!("lab: cuGraphicsSubResourceGetMappedArray");
        // SAFETY: writes one handle; the resource is registered and mapped (layer 0, level 0).
        steps.push(("cuGraphicsSubResourceGetMappedArray", unsafe { api.cuGraphicsSubResourceGetMappedArray(&mut array, raw, 0, 0) }));
        eprintln!("lab: cuGraphicsUnmapResources");
        // SAFETY: the resource is registered and mapped (above); the stream is live.
        steps.push(("cuGraphicsUnmapResources", unsafe { api.cuGraphicsUnmapResources(1, arr.as_mut_ptr(), stream.raw()) }));
    }
    eprintln!("lab: cuGraphicsUnregisterResource");
    // SAFETY: registered above and, after the unmap, not mapped; unregistered once, not used again.
    steps.push(("cuGraphicsUnregisterResource", unsafe { api.cuGraphicsUnregisterResource(raw) }));
    let sync = stream.synchronize();
    let words: Vec<String> = steps.iter().map(|(call, r)| format!("{call}: {}", result_words(r))).collect();
    let detail = format!(
        "texture {name} (RGBA8 {s} × {s}) registered, then deleted with glDeleteTextures; {}{}; cuStreamSynchronize: {}",
        words.join(", "),
        if mapped { format!(" (array handle {array:?})") } else { " (not mapped, so no array and no unmap)".to_string() },
        result_words(&sync),
        s = super::scratch::SIDE
    );
    let mut g = match steps.into_iter().find(|(_, r)| r.is_err()) {
        Some((call, r)) => {
            let mut g = got_from(r)?;
            g.text = format!("{call}: {}", g.text);
            g
        }
        None => {
            let mut g = got_from(Ok(()))?;
            g.text = "the driver accepted the map, the array, the unmap and the unregister of the deleted texture".into();
            g
        }
    };
    g.detail = Some(detail);
    Ok(g)
}

/// Which interop call a `*-no-gl-context` case makes with no GL context current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Released {
    /// `cuGraphicsMapResources` of the registered, unmapped texture.
    Map,
    /// `cuGraphicsUnmapResources` of the mapped texture.
    Unmap,
    /// `cuGraphicsUnregisterResource` of the registered, unmapped texture.
    Unregister,
}

impl Released {
    fn call(self) -> &'static str {
        match self {
            Released::Map => "cuGraphicsMapResources",
            Released::Unmap => "cuGraphicsUnmapResources",
            Released::Unregister => "cuGraphicsUnregisterResource",
        }
    }
}

/// The driver handles that the closure of [`HeadlessContext::without_current`] (which must be
/// `Send`, so that it can hold no GL proof) passes to the driver.
#[derive(Debug, Clone, Copy)]
struct Handles {
    resource: CUgraphicsResource,
    stream: CUstream,
}

// SAFETY: two driver handles, plain data that the driver accepts from any thread with the CUDA
// context current (interop's GraphicsResource and Stream are Send for the same reason); the
// closure that takes them runs on this thread anyway.
unsafe impl Send for Handles {}

/// Makes `which` on `h`.
///
/// # Safety
/// `h.resource` is registered under the CUDA context current on this thread (never unregistered
/// before: a driver checks a resource's mapped state, not whether a handle is still registered),
/// and `h.stream` is a live stream of that context.
unsafe fn interop_call(api: &Api, which: Released, h: Handles) -> Result<(), Error> {
    let mut arr = [h.resource];
    match which {
        // SAFETY: the caller's contract; the driver checks the mapped state.
        Released::Map => unsafe { api.cuGraphicsMapResources(1, arr.as_mut_ptr(), h.stream) },
        // SAFETY: as above.
        Released::Unmap => unsafe { api.cuGraphicsUnmapResources(1, arr.as_mut_ptr(), h.stream) },
        // SAFETY: as above; the caller does not use the handle again once this succeeded.
        Released::Unregister => unsafe { api.cuGraphicsUnregisterResource(h.resource) },
    }
}

/// `map-no-gl-context`, `unmap-no-gl-context`, `unregister-no-gl-context` (isolated): a texture
/// registered (and for the unmap, mapped) with the GL context current, then `which` with no GL
/// context current on the thread ([`HeadlessContext::without_current`]). A call the driver
/// refused is made again with the GL context current (the control); then the texture is unmapped
/// and unregistered with the GL context current.
fn without_gl(which: Released, gl: Gl<'_>, ctx: &Arc<Context>, owner: Option<&HeadlessContext>) -> Result<Got, SetupFailed> {
    let Some(owner) = owner else {
        return Err(SetupFailed(
            "needs the lab's own headless GL context, which it releases (it runs in a child process: lab NAME --json --child)".into(),
        ));
    };
    let api = ctx.api();
    let texture = Texture::new(gl, glow::RGBA8, glow::RGBA)?;
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut raw: CUgraphicsResource = null_mut();
    // SAFETY: writes one handle; the texture is a live RGBA8 2D texture of the GL context current
    // here, which shares its device with `ctx`.
    unsafe { api.cuGraphicsGLRegisterImage(&mut raw, texture.id(), glow::TEXTURE_2D, register_flags::NONE) }?;
    let h = Handles { resource: raw, stream: stream.raw() };
    let (mut mapped, mut registered) = (false, true);
    if which == Released::Unmap {
        // SAFETY: registered above, not mapped; the stream is live; the GL context is current.
        if let Err(e) = unsafe { interop_call(api, Released::Map, h) } {
            // SAFETY: registered above, not mapped: unregistered once.
            drop(unsafe { interop_call(api, Released::Unregister, h) });
            return Err(e.into());
        }
        mapped = true;
    }
    // Progress on stderr: if the process dies, the parent's report ends with the last step.
    eprintln!("lab: releasing the GL context (eglMakeCurrent with EGL_NO_CONTEXT), then {}", which.call());
    let released = owner.without_current(move || {
        // SAFETY: `h` is the texture registered above under `ctx` (current on this thread: the CUDA
        // context is not released with the GL one), mapped for the unmap only, and its stream is
        // live. That no GL context is current is the mistake; the driver has to find out.
        unsafe { interop_call(ctx.api(), which, h) }
    });
    let r = match released {
        Ok(r) => r,
        Err(e) => {
            // Not released: the call was not made. Clean up with the GL context current.
            if mapped {
                // SAFETY: registered and mapped above.
                drop(unsafe { interop_call(api, Released::Unmap, h) });
            }
            // SAFETY: registered above, no longer mapped: unregistered once.
            drop(unsafe { interop_call(api, Released::Unregister, h) });
            return Err(SetupFailed(format!("the GL context could not be released: {e:#}")));
        }
    };
    eprintln!("lab: {} returned {}; the GL context is current again", which.call(), result_words(&r));
    let apply = |ok: bool, mapped: &mut bool, registered: &mut bool| match (which, ok) {
        (Released::Map, true) => *mapped = true,
        (Released::Unmap, true) => *mapped = false,
        (Released::Unregister, true) => *registered = false,
        (_, false) => {}
    };
    apply(r.is_ok(), &mut mapped, &mut registered);
    let control = r.is_err().then(|| {
        eprintln!("lab: {} again with the GL context current", which.call());
        // SAFETY: the refused call left the resource as it was: registered, mapped for the unmap only.
        let c = unsafe { interop_call(api, which, h) };
        apply(c.is_ok(), &mut mapped, &mut registered);
        c
    });
    let mut cleanup = Vec::new();
    if mapped {
        eprintln!("lab: cuGraphicsUnmapResources (cleanup)");
        // SAFETY: registered and mapped; the GL context is current.
        cleanup.push(format!("cuGraphicsUnmapResources: {}", result_words(&unsafe { interop_call(api, Released::Unmap, h) })));
    }
    if registered {
        eprintln!("lab: cuGraphicsUnregisterResource (cleanup)");
        // SAFETY: registered, no longer mapped: unregistered once, not used again.
        cleanup.push(format!("cuGraphicsUnregisterResource: {}", result_words(&unsafe { interop_call(api, Released::Unregister, h) })));
    }
    let sync = stream.synchronize();
    let said = result_words(&r);
    let mut g = got_from(r)?;
    g.detail = Some(without_gl_detail(which, texture.id(), &said, control.as_ref(), &cleanup, &sync));
    drop(texture);
    Ok(g)
}

/// The detail of a [`without_gl`] case: the texture `texture` as it was before, the call `which`
/// and what it returned (`said`), the control call `control` (made only when it was refused), the
/// `cleanup` calls and the stream's synchronize `sync`.
fn without_gl_detail(
    which: Released,
    texture: u32,
    said: &str,
    control: Option<&Result<(), Error>>,
    cleanup: &[String],
    sync: &Result<(), Error>,
) -> String {
    let before = match which {
        Released::Unmap => "registered and mapped",
        _ => "registered",
    };
    format!(
        "texture {} (RGBA8) {before} with the GL context current; {} with no GL context current on the thread: {said} \
         ({}); released afterwards, with the GL context current again: {}; cuStreamSynchronize: {}",
        texture,
        which.call(),
        match control {
            Some(c) => format!("the same call with the GL context current: {}", result_words(c)),
            None => "accepted, so not made again".to_string(),
        },
        if cleanup.is_empty() { "nothing left to release".to_string() } else { cleanup.join(", ") },
        result_words(sync)
    )
}
