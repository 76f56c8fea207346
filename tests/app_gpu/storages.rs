//! The interop storages on the GPU: map and copy write what GL reads; external memory, its frames
//! and its teardown.

use nbody_app::cuda::settings::ExternalSync;

use super::*;

/// One interop frame through the real GL buffers; positions read back from GL must equal the
/// float64 reference of that step.
pub(super) fn interop_case(ctx: &HeadlessContext, settings: InteropSettings) -> Result<(), Failed> {
    let gl = ctx.gl();
    let bodies = plummer(4096, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let opts = CudaOptions {
        settings,
        separate_maps: false,
        ctx_sched: CtxSched::Auto,
        kernel: None,
        step_kernel: None,
        precision: Precision::F32,
        split: None,
        external_sync: nbody_app::cuda::settings::ExternalSync::Auto,
    };
    let result = (|| -> Result<(), Failed> {
        let made = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params);
        if settings.register_flags != ResourceFlags::None && settings.interop == InteropMode::Map {
            // READ_ONLY ("CUDA will not write") and WRITE_DISCARD ("CUDA will not read") cannot
            // hold for the ping-pong buffers: the map storage refuses to register with them.
            let e = made.err().ok_or("register flags read-only/write-discard were accepted for map")?;
            let msg = format!("{e:#}");
            ensure(msg.contains("ping-pong") && msg.contains("--register-flags none"), format!("unexpected error: {msg}"))?;
            return Ok(());
        }
        let mut backend = made?;
        let t = backend.simulate(gl, &vbos, 1)?;
        ensure(t.kernel_ms.is_some_and(|k| k > 0.0), format!("no kernel time: {t:?}"))?;
        let mut bytes = vec![0u8; bodies.len() * BODY_BYTES];
        // Desktop GL (the NVIDIA EGL context) has glGetBufferSubData.
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbos.buffers[backend.shown().front]));
        gl.get_buffer_sub_data(glow::ARRAY_BUFFER, 0, &mut bytes);
        gl.bind_buffer(glow::ARRAY_BUFFER, None);
        let pos: Vec<[f32; 4]> = bytes
            .chunks_exact(16)
            .map(|c| std::array::from_fn(|k| f32::from_le_bytes([c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]])))
            .collect();
        let (rp, _) = step_reference_f64(&bodies, params, 0.5 * f64::from(params.dt), f64::from(params.dt));
        let e = rel_err(&pos, &rp);
        eprintln!("{settings:?}: GL readback rel. error {e:.2e}; timings {t:?}");
        ensure(e <= 1e-5, format!("{settings:?}: GL readback rel. error {e:e}"))?;
        drop(backend); // unregister before the GL buffers are deleted
        Ok(())
    })();
    renderer.destroy(gl);
    result
}

pub(super) fn interop_map_and_copy_write_what_gl_reads() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let base = InteropSettings {
        interop: InteropMode::Map,
        register_flags: ResourceFlags::None,
        map_flags: ResourceFlags::None,
        stream: StreamKind::Legacy,
        stream_priority: 0,
        block_size: 256,
    };
    let mut failures = Vec::new();
    let mut cases = Vec::new();
    for stream in [StreamKind::Legacy, StreamKind::PerThread, StreamKind::NonBlocking] {
        for register_flags in [ResourceFlags::None, ResourceFlags::ReadOnly, ResourceFlags::WriteDiscard] {
            cases.push(InteropSettings { stream, register_flags, ..base });
        }
        // The role map flags (read-only on the front buffer, write-discard on the back one).
        cases.push(InteropSettings { stream, map_flags: ResourceFlags::WriteDiscard, ..base });
        cases.push(InteropSettings { stream, map_flags: ResourceFlags::ReadOnly, ..base });
        cases.push(InteropSettings { stream, interop: InteropMode::Copy, ..base });
    }
    for c in cases {
        if let Err(e) = interop_case(&ctx, c) {
            failures.push(format!("{c:?}: {}", e.message().unwrap_or("failed")));
        }
    }
    ensure(failures.is_empty(), failures.join("\n"))
}

// ---------------------------------------------------------------------------------------------
// External memory (`--interop external`, nbody_app::external)

/// `vbos`: the renderer's, which only give the backend its N (external storage draws from its
/// own buffers). Made once per test: a renderer per cycle would count GL's shader and buffer
/// memory in the leak check.
pub(super) fn external_backend(
    ctx: &HeadlessContext,
    vbos: &PositionVbos,
    bodies: &Bodies,
    params: PhysParams,
    stream: StreamKind,
    sync: ExternalSync,
) -> Result<CudaBackend, Failed> {
    if let Err(why) = &ctx.info.memory_object {
        return Err(format!("this GL cannot import CUDA memory: {why}").into());
    }
    let settings = InteropSettings {
        interop: InteropMode::External,
        register_flags: ResourceFlags::None,
        map_flags: ResourceFlags::None,
        stream,
        stream_priority: 0,
        block_size: 256,
    };
    let opts = CudaOptions {
        settings,
        separate_maps: false,
        ctx_sched: CtxSched::Auto,
        kernel: None,
        step_kernel: None,
        precision: Precision::F32,
        split: None,
        external_sync: sync,
    };
    Ok(CudaBackend::new(&opts, ctx.gl(), &ctx.info, vbos, bodies, params)?)
}

/// Bodies whose float4 is compared every frame: the first, a few inside, the last.
pub(super) const PROBED: [usize; 6] = [0, 1, 63, 1000, 2049, 4095];

/// Frames of `backend` with a draw from the imported buffers each; after each simulate (whose
/// CUDA-event wait ends the kernel's writes, or, with semaphores, whose "step done" GL waits for
/// in `before_draw`) the probed float4s of the front buffer are copied
/// by GL (glCopyBufferSubData) into a GL-owned buffer and read back from there — glGetBufferSubData
/// straight from an imported buffer was seen returning stale data — and must equal, bit for bit,
/// what cuMemcpyDtoH reads from the same CUDA allocation.
pub(super) fn external_frames(
    ctx: &HeadlessContext,
    backend: &mut CudaBackend,
    renderer: &mut Renderer,
    frames: usize,
    dt: f32,
) -> Result<(), Failed> {
    let gl = ctx.gl();
    let vbos = *renderer.vbos();
    let target = OffscreenTarget::new(gl, 128, 128)?;
    let camera = framing_camera(renderer);
    let bytes = PROBED.len() * BODY_BYTES;
    let probe = gl.create_buffer()?;
    gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(probe));
    gl.buffer_data_u8_slice(glow::COPY_WRITE_BUFFER, &vec![0u8; bytes], glow::STREAM_READ);
    gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
    let result = (|| -> Result<(), Failed> {
        let mut last: Vec<[f32; 4]> = Vec::new();
        let mut moved = 0usize;
        for frame in 0..frames {
            backend.simulate(gl, &vbos, 1)?;
            let front = backend.shown().front;
            let src = backend.shown().buffers.ok_or("the external backend has no draw buffers")?.buffers[front];
            let mut got = vec![0u8; bytes];
            // GL reads the buffers: with semaphores it waits for the step here (on the GPU).
            backend.before_draw(gl);
            gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src));
            gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(probe));
            for (k, &i) in PROBED.iter().enumerate() {
                let (from, to) = ((i * BODY_BYTES) as i32, (k * BODY_BYTES) as i32);
                gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, from, to, BODY_BYTES as i32);
            }
            gl.get_buffer_sub_data(glow::COPY_WRITE_BUFFER, 0, &mut got);
            gl.bind_buffer(glow::COPY_READ_BUFFER, None);
            gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
            let mut want = vec![[0f32; 4]; PROBED.len()];
            for (k, &i) in PROBED.iter().enumerate() {
                backend.external_buffer(front).ok_or("no external storage")?.read_at(i * BODY_BYTES, &mut want[k..k + 1])?;
            }
            let want_bytes: Vec<u8> = want.iter().flatten().flat_map(|f| f.to_le_bytes()).collect();
            if got != want_bytes {
                let got_f: Vec<f32> = got.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                return Err(format!("frame {frame}: GL sees {got_f:?}, CUDA wrote {want:?} (bodies {PROBED:?}, buffer {front})").into());
            }
            if !last.is_empty() && last != want {
                moved += 1;
            }
            last = want;
            let p = DrawParams { camera: &camera, front, time_span: dt, pixels_per_point: 1.0, scene_left: 0.0, advanced: true };
            renderer.draw_from(gl, &RenderTarget::Offscreen(target), &p, false, backend.shown().buffers);
            // The next step waits on this fence; the readback above was waited for already
            // (glGetBufferSubData of its result), as after_draw's contract asks.
            backend.after_draw(gl);
        }
        // Positions change every step: equal values are a real check, not two stale copies.
        ensure(moved + 1 >= frames, format!("the probed bodies moved in only {moved} of {frames} frames"))?;
        let e = gl.get_error();
        ensure(e == glow::NO_ERROR, format!("GL error 0x{e:04X}"))
    })();
    gl.delete_buffer(probe);
    target.destroy(gl);
    result
}

pub(super) fn external_gl_draws_what_the_kernel_wrote_every_frame() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let bodies = plummer(4096, fresh_seed())?;
    let mut renderer = Renderer::new(ctx.gl(), &ctx.info, &bodies)?;
    let mut failures = Vec::new();
    let cases = [
        (StreamKind::Legacy, 1000, ExternalSync::Host),
        (StreamKind::NonBlocking, 100, ExternalSync::Host),
        (StreamKind::PerThread, 100, ExternalSync::Host),
        (StreamKind::Legacy, 1000, ExternalSync::Semaphore),
        (StreamKind::NonBlocking, 300, ExternalSync::Semaphore),
    ];
    for (stream, frames, sync) in cases {
        let vbos = *renderer.vbos();
        let r = external_backend(&ctx, &vbos, &bodies, params, stream, sync).and_then(|mut backend| {
            let r = external_frames(&ctx, &mut backend, &mut renderer, frames, params.dt);
            backend.release_gl(ctx.gl());
            r
        });
        eprintln!("{stream:?}, {sync:?}, {frames} frames: {}", if r.is_ok() { "GL = CUDA every frame" } else { "FAILED" });
        if let Err(e) = r {
            failures.push(format!("{stream:?}, {sync:?}: {}", e.message().unwrap_or("failed")));
        }
    }
    renderer.destroy(ctx.gl());
    ensure(failures.is_empty(), failures.join("\n"))
}

/// One step through the external backend, read back with `bodies` (CUDA side), against the
/// float64 reference of that step (tolerance: see the file docs); then diagnostics run.
pub(super) fn external_step_matches_float64_reference() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let gl = ctx.gl();
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let bodies = plummer(4096, fresh_seed())?;
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let result = (|| -> Result<(), Failed> {
        let mut backend = external_backend(&ctx, &vbos, &bodies, params, StreamKind::Legacy, ExternalSync::Host)?;
        let r = (|| -> Result<(), Failed> {
            let t = backend.simulate(gl, &vbos, 1)?;
            ensure(t.kernel_ms.is_some_and(|k| k > 0.0) && t.map_ms.is_some() && t.unmap_ms.is_some(), format!("timings {t:?}"))?;
            let got = backend.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
            let (rp, _) = step_reference_f64(&bodies, params, 0.5 * f64::from(params.dt), f64::from(params.dt));
            let e = rel_err(&got.pos, &rp);
            eprintln!("external: rel. error {e:.2e}; timings {t:?}");
            ensure(e <= 1e-5, format!("external: rel. error {e:e}"))?;
            let d = backend.state(gl, &vbos, Readout::WithDiagnostics)?.diagnostics.ok_or("no diagnostics")?;
            ensure(d.total.is_finite(), format!("diagnostics {d:?}"))
        })();
        backend.release_gl(gl);
        r
    })();
    renderer.destroy(gl);
    result
}

pub(super) fn open_fds() -> Result<usize, Failed> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

/// 100 × (create, one frame, release_gl, drop) of the external backend: no device memory (free
/// bytes within one allocation granularity, 2 MiB) and no file descriptor may be left behind.
pub(super) fn external_create_destroy_leaks_nothing() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let gl = ctx.gl();
    // Holds the primary context for the whole test, so it is not remade every cycle.
    let cu = cuda()?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let bodies = plummer(4096, 11)?;
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let cycle = || -> Result<(), Failed> {
        let mut b = external_backend(&ctx, &vbos, &bodies, params, StreamKind::Legacy, ExternalSync::Host)?;
        let r = b.simulate(gl, &vbos, 1);
        b.release_gl(gl);
        drop(b);
        r?;
        Ok(())
    };
    let measure = || -> Result<(usize, usize), Failed> {
        gl.finish();
        cu.make_current()?;
        Ok((cu.memory_info()?.0, open_fds()?))
    };
    let result = (|| -> Result<(), Failed> {
        cycle()?; // first use: lazily made driver state is not a leak
        let (free0, fds0) = measure()?;
        for _ in 0..100 {
            cycle()?;
        }
        let (free1, fds1) = measure()?;
        eprintln!("free device memory {free0} → {free1} bytes; open fds {fds0} → {fds1}");
        ensure(fds1 <= fds0, format!("{} file descriptors leaked over 100 cycles", fds1 - fds0))?;
        ensure(free0.abs_diff(free1) <= 2 << 20, format!("free device memory moved by {} bytes over 100 cycles", free0.abs_diff(free1)))
    })();
    renderer.destroy(gl);
    result
}
