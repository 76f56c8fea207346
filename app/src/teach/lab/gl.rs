//! GL interop cases that the driver answers with an error code: registration (a name that is no
//! buffer, no GL context on the thread) and the mapping state (map twice, a pointer or unmap
//! without a map, a repeated entry, map flags or unregister while mapped, another context). The
//! silent ones, which return success, are in [`super::silent`]; both use [`Scratch`] buffers.

use std::ptr::null_mut;
use std::sync::Arc;

use interop::sys::{map_flags, register_flags, stream_flags, CUcontext, CUdeviceptr, CUgraphicsResource};
use interop::{map_resources, Context, Error, GraphicsResource, SchedFlag, Stream};

use super::scratch::Scratch;
use super::{got_from, result_words, Case, Got, SetupFailed};
use crate::gfx::context::HeadlessContext;
use crate::gfx::gl::Gl;

/// Runs a GL interop case (`ctx`: the CUDA context that shares `gl`'s device, made current here;
/// `owner`: the owner of `gl`'s context, when the lab made it).
pub(super) fn run(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>, owner: Option<&HeadlessContext>) -> Result<Got, SetupFailed> {
    ctx.make_current()?;
    let flags = register_flags::NONE;
    match case.name {
        "register-buffer-zero" => match GraphicsResource::register_gl_buffer(ctx, 0, flags) {
            Ok(r) => {
                drop(r);
                got_from(Ok(()))
            }
            Err(e) => got_from(Err(e)),
        },
        "register-deleted-buffer" => {
            let name = Scratch::new(gl)?.delete();
            match GraphicsResource::register_gl_buffer(ctx, name, flags) {
                Ok(r) => {
                    drop(r);
                    got_from(Ok(()))
                }
                Err(e) => got_from(Err(e)),
            }
        }
        "map-already-mapped" | "pointer-of-unmapped" | "unmap-twice" | "map-same-resource-twice" | "set-map-flags-while-mapped" => {
            mapping_state(case, gl, ctx)
        }
        "map-wrong-context" => wrong_context(gl, ctx),
        "unregister-while-mapped" => unregister_while_mapped(gl, ctx),
        "register-no-gl-context" => register_without_gl(gl, ctx),
        "image-pointer"
        | "image-layer-out-of-range"
        | "surface-without-ldst"
        | "register-rgb8-texture"
        | "buffer-as-array"
        | "map-flags-invalid"
        | "texture-deleted-while-registered"
        | "map-no-gl-context"
        | "unmap-no-gl-context"
        | "unregister-no-gl-context" => super::image::run(case, gl, ctx, owner),
        "register-every-frame" => super::cost::run(gl, ctx),
        _ => super::silent::run(case, gl, ctx),
    }
}

/// The mistakes of the mapping state on one registered scratch buffer.
fn mapping_state(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?];
    let mut raw = [res[0].raw()];
    let r = match case.name {
        "map-already-mapped" => {
            let mapping = map_resources(&mut res, &stream)?;
            // SAFETY: `raw` holds one registered resource of this context (`res` keeps it
            // registered) and the stream is live. It is mapped already — the mistake; the
            // driver checks the state and refuses without changing it.
            let r = unsafe { api.cuGraphicsMapResources(1, raw.as_mut_ptr(), stream.raw()) };
            if r.is_ok() {
                // SAFETY: a driver that accepted the second map gets the matching unmap.
                drop(unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) });
            }
            mapping.unmap()?;
            r
        }
        "pointer-of-unmapped" => {
            let (mut ptr, mut size): (CUdeviceptr, usize) = (0, 0);
            // SAFETY: writes two values; the resource is registered but not mapped — the
            // mistake; the driver checks and answers without writing a usable pointer.
            unsafe { api.cuGraphicsResourceGetMappedPointer(&mut ptr, &mut size, raw[0]) }
        }
        "unmap-twice" => {
            map_resources(&mut res, &stream)?.unmap()?;
            // SAFETY: `raw` holds one registered resource and the stream is live; it was
            // unmapped already — the mistake; the driver checks and refuses.
            unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) }
        }
        "map-same-resource-twice" => {
            let mut twice = [raw[0], raw[0]];
            // SAFETY: both entries are the one registered, unmapped resource (`res` keeps it
            // registered) and the stream is live. The repeat is the mistake; the driver checks
            // the array and refuses without mapping.
            let r = unsafe { api.cuGraphicsMapResources(2, twice.as_mut_ptr(), stream.raw()) };
            if r.is_ok() {
                // SAFETY: a driver that accepted the array mapped the resource: unmap it once.
                drop(unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) });
            }
            r
        }
        _ => {
            let mapping = map_resources(&mut res, &stream)?;
            // SAFETY: `raw[0]` is registered (`res`) and mapped (`mapping`), and READ_ONLY is a
            // valid flag. Changing the flags while mapped is the mistake; the driver checks the
            // state and refuses without changing them.
            let r = unsafe { api.cuGraphicsResourceSetMapFlags(raw[0], map_flags::READ_ONLY) };
            mapping.unmap()?;
            r
        }
    };
    stream.synchronize()?;
    let g = got_from(r);
    drop(res); // unregister before the scratch buffer is deleted
    drop(buffer);
    g
}

/// `map-wrong-context`: register under `ctx`, map with a second context (same device) pushed.
fn wrong_context(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let res = GraphicsResource::register_gl_buffer(ctx, buffer.name(), register_flags::NONE)?;
    let mut raw = [res.raw()];
    // cuCtxCreate makes the new context current (pushed on this thread's stack): pop it, so that
    // the case pushes it itself around the map, as a library with its own context would.
    let other = Context::create(ctx.device(), SchedFlag::Auto)?;
    let mut popped: CUcontext = null_mut();
    // SAFETY: writes one handle; pops the context cuCtxCreate pushed on this thread.
    unsafe { api.cuCtxPopCurrent(&mut popped) }?;
    let r = {
        let _pushed = other.push()?;
        // SAFETY: `raw` holds a resource registered under `ctx` (`res` keeps it registered); the
        // null stream is the legacy stream of the current context. That the current context is
        // `other`, not the one that registered, is the mistake; the driver checks and refuses.
        let r = unsafe { api.cuGraphicsMapResources(1, raw.as_mut_ptr(), null_mut()) };
        if r.is_ok() {
            // SAFETY: a driver that accepted the map gets the matching unmap, under the same
            // context, and the context is drained before it is destroyed.
            drop(unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), null_mut()) });
            // SAFETY: no arguments; acts on `other`, current here.
            drop(unsafe { api.cuCtxSynchronize() });
        }
        r
    };
    let detail = format!(
        "registered under {:?} (the GL device's primary context), mapped with {:?} (cuCtxCreate on the same device) \
         pushed; that context was popped and destroyed afterwards",
        ctx.raw(),
        other.raw()
    );
    drop(other);
    ctx.make_current()?;
    let mut g = got_from(r)?;
    g.detail = Some(detail);
    drop(res);
    drop(buffer);
    Ok(g)
}

/// `unregister-while-mapped` (isolated): raw calls only, so that a resource the driver freed is
/// never touched again.
fn unregister_while_mapped(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let api = ctx.api();
    let buffer = Scratch::new(gl)?;
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    let mut raw: CUgraphicsResource = null_mut();
    // SAFETY: writes one handle; the buffer is a live GL buffer of the GL context current here,
    // which shares its device with `ctx`.
    unsafe { api.cuGraphicsGLRegisterBuffer(&mut raw, buffer.name(), register_flags::NONE) }?;
    let mut arr = [raw];
    // SAFETY: `arr` holds the resource registered above, not mapped; the stream is live.
    if let Err(e) = unsafe { api.cuGraphicsMapResources(1, arr.as_mut_ptr(), stream.raw()) } {
        // SAFETY: registered above and not mapped: unregistered once.
        drop(unsafe { api.cuGraphicsUnregisterResource(raw) });
        return Err(e.into());
    }
    // Progress on stderr: if the process dies, the parent's report ends with the last step.
    eprintln!("lab: calling cuGraphicsUnregisterResource on the mapped resource");
    // SAFETY: `raw` is registered and mapped — the mistake. The handle is not used again after
    // an unregister the driver accepted.
    let r = unsafe { api.cuGraphicsUnregisterResource(raw) };
    eprintln!("lab: cuGraphicsUnregisterResource returned {}", result_words(&r));
    // Either way the handle is left alone: after an accepted unregister it names nothing, and
    // the documentation of cuGraphicsUnmapResources and cuGraphicsUnregisterResource does not
    // say what they do after a refused one. This runs in a child process, whose exit releases
    // what is left.
    let then = if r.is_ok() {
        "the lab then left the handle alone (no unmap, no second unregister)"
    } else {
        "the lab then left the resource mapped and registered (cuda.h does not say what an unmap or unregister does after \
         this refusal); the child process's exit releases it"
    };
    eprintln!("lab: cuStreamSynchronize");
    let sync = stream.synchronize();
    eprintln!("lab: glGetBufferSubData");
    let (words, gl_err) = buffer.read_words(4);
    let refused = r.is_err();
    let mut g = got_from(r)?;
    g.detail =
        Some(format!("{then}; cuStreamSynchronize: {}; GL reads the buffer afterwards: {:#x?} (GL error {gl_err:#x})", result_words(&sync), words));
    if refused {
        // Still registered and mapped: neither the GL buffer nor the stream is destroyed under
        // it; the child process ends right after this case.
        std::mem::forget(buffer);
        std::mem::forget(stream);
    } else {
        eprintln!("lab: glDeleteBuffers and the stream's destruction");
        drop(buffer);
    }
    Ok(g)
}

/// What the registering thread of `register-no-gl-context` saw: the registration, and the
/// unregistration of a registration the driver accepted.
type WorkerSaw = (Result<(), Error>, Option<Result<(), Error>>);

/// `register-no-gl-context` (isolated): the registration on a spawned thread that has the CUDA
/// context current but no GL context; the same name on this (the GL) thread as the control.
fn register_without_gl(gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    let buffer = Scratch::new(gl)?;
    let name = buffer.name();
    let worker_ctx = Arc::clone(ctx);
    let worker = std::thread::spawn(move || -> Result<WorkerSaw, Error> {
        worker_ctx.make_current()?;
        let api = worker_ctx.api();
        let mut raw: CUgraphicsResource = null_mut();
        // SAFETY: writes one handle; `name` is a live buffer of the GL context of the spawning
        // thread, and no GL context is current on this one — the mistake; the driver must find
        // out that it cannot resolve the name.
        let r = unsafe { api.cuGraphicsGLRegisterBuffer(&mut raw, name, register_flags::NONE) };
        // SAFETY: a registration the driver accepted is released again, once.
        let undone = r.is_ok().then(|| unsafe { api.cuGraphicsUnregisterResource(raw) });
        Ok((r, undone))
    });
    let (r, undone) = match worker.join() {
        Ok(res) => res?,
        Err(_) => return Err(SetupFailed("the registering thread panicked".into())),
    };
    ctx.make_current()?;
    let control = GraphicsResource::register_gl_buffer(ctx, name, register_flags::NONE).map(drop);
    let mut g = got_from(r)?;
    g.detail = Some(format!(
        "buffer {name} registered on a spawned thread with the CUDA context current and no GL context{}; the same name \
         on the thread whose GL context made it: {}",
        undone.map_or_else(String::new, |u| format!(" (unregistered again: {})", result_words(&u))),
        result_words(&control)
    ));
    drop(buffer);
    Ok(g)
}
