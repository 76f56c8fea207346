//! Steps over body ranges, in parts over frames and split over slices (copies and NCCL): the same
//! bits as whole steps, and clean stops.

use super::kernels::{launch, C, M, U};
use super::*;

pub(super) fn never() -> bool {
    false
}

pub(super) fn always() -> bool {
    true
}

/// A step split into launches over body ranges (what a long step does so that Ctrl-C answers
/// between them) gives the same bits as one plain launch (stream-K forbidden: ranges always run
/// the plain kernel); a split step
/// stopped after its first launch leaves positions, velocities and the front buffer as before.
pub(super) fn split_steps_match_and_stop_cleanly() -> Result<(), Failed> {
    use nbody_app::cuda::gpu_stepper::GpuStepper;
    use nbody_app::cuda::integrator::{Integrator, Interrupt};
    let ctx = cuda()?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    for n in [4097usize, 16384] {
        let bodies = plummer(n, fresh_seed())?;
        // (steps done, front, positions, velocities, launches per step)
        type Run = (u32, usize, Vec<[f32; 4]>, Vec<[f32; 4]>, usize);
        let run = |interrupt: Option<Interrupt>, steps: u32| -> Result<Run, Failed> {
            let pos = [DeviceBuffer::from_slice(&ctx, &bodies.pos)?, DeviceBuffer::from_slice(&ctx, &bodies.pos)?];
            let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel)?;
            let mut gpu = GpuStepper::new(Kernels::load(&ctx, None)?, vel, 0, params, Masses::of(&bodies.pos))?;
            // Body ranges run the plain kernel: compare with whole steps of the plain kernel.
            gpu.set_stream_k(false)?;
            gpu.set_interrupt(interrupt);
            let parts = gpu.launches_per_step();
            let done = gpu.launch_steps([pos[0].view(), pos[1].view()], steps, &stream)?;
            stream.synchronize()?;
            Ok((done, gpu.front(), pos[gpu.front()].to_vec()?, gpu.velocities().to_vec()?, parts))
        };
        let whole = run(None, 3)?;
        // rate 1 interaction/s: every step is "long" and split into as many launches as allowed.
        let split = run(Some(Interrupt { requested: never, rate: 1.0 }), 3)?;
        eprintln!("N={n}: a step in {} launches", split.4);
        ensure(split.4 > 1, format!("N={n}: the step was not split"))?;
        ensure(whole.0 == 3 && split.0 == 3 && whole.1 == split.1, format!("N={n}: steps {} / {}", whole.0, split.0))?;
        let same = |a: &[[f32; 4]], b: &[[f32; 4]]| a.iter().zip(b).all(|(x, y)| x.map(f32::to_bits) == y.map(f32::to_bits));
        ensure(same(&whole.2, &split.2) && same(&whole.3, &split.3), format!("N={n}: split steps differ from whole ones"))?;
        let stopped = run(Some(Interrupt { requested: always, rate: 1.0 }), 3)?;
        ensure(stopped.0 == 0 && stopped.1 == 0, format!("N={n}: {} steps done, front {}", stopped.0, stopped.1))?;
        ensure(same(&stopped.2, &bodies.pos) && same(&stopped.3, &bodies.vel), format!("N={n}: a stopped step changed the state"))?;
    }
    Ok(())
}

/// `interop` with no flags, the legacy stream and the automatic block size.
pub(super) fn auto_block_settings(interop: InteropMode) -> InteropSettings {
    InteropSettings {
        interop,
        register_flags: ResourceFlags::None,
        map_flags: ResourceFlags::None,
        stream: StreamKind::Legacy,
        stream_priority: 0,
        block_size: 0,
    }
}

/// Which storage a test of steps in parts runs on: `interop` with `map_flags`, the legacy stream
/// and block size 256.
pub(super) fn parts_settings(interop: InteropMode, map_flags: ResourceFlags) -> InteropSettings {
    InteropSettings { interop, register_flags: ResourceFlags::None, map_flags, stream: StreamKind::Legacy, stream_priority: 0, block_size: 256 }
}

/// A long step in parts over frames (the windowed demo: one launch per `simulate`, the mapping
/// made again every frame) gives, once its last launch ran, the same bits as whole steps, for
/// map (with the write-discard map hint too: it must not be given while the back buffer is
/// written in parts), copy and external storage; the front buffer does not change while a step
/// is in progress; an abandoned step leaves positions and velocities as they were before it.
/// A rate of 1 interaction/s makes every step "long" (N = 4097: 5 launches).
pub(super) fn steps_in_parts_match_whole_steps_and_abandon_cleanly() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let gl = ctx.gl();
    let bodies = plummer(4097, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let same = |a: &[[f32; 4]], b: &[[f32; 4]]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.map(f32::to_bits) == y.map(f32::to_bits));
    let mut cases = vec![
        parts_settings(InteropMode::Map, ResourceFlags::None),
        parts_settings(InteropMode::Map, ResourceFlags::WriteDiscard),
        parts_settings(InteropMode::Copy, ResourceFlags::None),
    ];
    if ctx.info.memory_object.is_ok() {
        cases.push(parts_settings(InteropMode::External, ResourceFlags::None));
    }
    let mut failures = Vec::new();
    for settings in cases {
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
        let r = (|| -> Result<(), Failed> {
            // Whole steps: 3 frames of one step.
            let whole = {
                let mut b = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params)?;
                // The steps in parts run body ranges with the plain kernel: the same for the whole ones.
                b.set_stream_k(false)?;
                for _ in 0..3 {
                    b.simulate(gl, &vbos, 1)?;
                }
                let s = b.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
                b.release_gl(gl);
                s
            };
            for i in 0..2 {
                upload(gl, &vbos, i, &bodies.pos);
            }
            let mut b = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params)?;
            // Its half kick is a whole launch: plain too.
            b.set_stream_k(false)?;
            b.set_interrupt_at(never, 1.0);
            b.set_in_parts(true);
            let (mut steps, mut frames, mut launches) = (0u32, 0u32, 0usize);
            while steps < 3 {
                let front = b.shown().front;
                let t = b.simulate(gl, &vbos, 1)?;
                frames += 1;
                let p = t.parts.ok_or(format!("{settings:?}: frame {frames} worked on no step in parts: {t:?}"))?;
                launches = p.of;
                if p.in_progress() {
                    ensure(b.shown().front == front && t.stopped_after == Some(0), format!("{settings:?}: a step in progress flipped the front"))?;
                    ensure(b.step_in_progress() == Some(p), format!("{settings:?}: progress {:?} / {p:?}", b.step_in_progress()))?;
                }
                steps += t.stopped_after.unwrap_or(1);
                ensure(frames < 100, format!("{settings:?}: no end after {frames} frames"))?;
            }
            eprintln!("{settings:?}: 3 steps of {launches} launches in {frames} frames");
            ensure(launches > 1 && frames == 3 * launches as u32, format!("{settings:?}: {frames} frames for 3 steps of {launches} launches"))?;
            let in_parts = b.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
            ensure(
                same(&in_parts.pos, &whole.pos) && same(&in_parts.vel, &whole.vel),
                format!("{settings:?}: steps in parts differ from whole ones"),
            )?;
            // Abandoned after two of its launches: the state of before the step (synchronised by
            // the readback above, so no half kick changes it).
            b.simulate(gl, &vbos, 1)?;
            b.simulate(gl, &vbos, 1)?;
            ensure(b.step_in_progress().is_some_and(|p| p.done == 2), format!("{settings:?}: {:?}", b.step_in_progress()))?;
            b.abandon_step()?;
            ensure(b.step_in_progress().is_none(), format!("{settings:?}: still in progress"))?;
            let after = b.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
            ensure(same(&after.pos, &in_parts.pos) && same(&after.vel, &in_parts.vel), format!("{settings:?}: an abandoned step changed the state"))?;
            // A readback in the middle of a step finishes it: the same bits as a whole step.
            b.simulate(gl, &vbos, 1)?;
            let finished = b.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
            ensure(b.step_in_progress().is_none(), format!("{settings:?}: the readback left the step in progress"))?;
            ensure(!same(&finished.pos, &in_parts.pos), format!("{settings:?}: the finished step moved nothing"))?;
            b.release_gl(gl);
            Ok(())
        })();
        renderer.destroy(gl);
        if let Err(e) = r {
            failures.push(e.message().unwrap_or("failed").to_string());
        }
    }
    ensure(failures.is_empty(), failures.join("\n"))
}

/// Writes `pos` into GL buffer `i` of `vbos`.
pub(super) fn upload(gl: nbody_app::gfx::gl::Gl<'_>, vbos: &PositionVbos, i: usize, pos: &[[f32; 4]]) {
    nbody_app::gfx::buffers::upload_positions(gl, vbos, i, pos).expect("glBufferSubData");
}

/// The split path on one GPU: `slices` slices on device 0 (peer path, copies within the device),
/// `steps` steps in frames of 5, against the one-slice run of the same launch.
pub(super) fn split_case(bodies: &Bodies, slices: usize, launch: LaunchConfig, choice: GatherChoice, steps: u32) -> Result<SlicedStepper, Failed> {
    let api = interop::init(StreamSemantics::Legacy)?;
    let params = PhysParams { g: 1.0, dt: 0.001, softening: 0.01 };
    let mut s = SlicedStepper::new(&api, SchedFlag::Auto, &vec![0; slices], bodies, launch.block, Some(launch), params, None, None, choice)
        .map_err(|e| format!("{e:#}"))?;
    let mut left = steps;
    while left > 0 {
        let k = left.min(5);
        let f = s.frame(k).map_err(|e| format!("{e:#}"))?;
        ensure(f.kernel_ms.len() == k as usize && f.gather_ms.len() == k as usize, "one kernel and one gather time per step")?;
        left -= k;
    }
    Ok(s)
}

/// Bits of `[N][4]` values, for exact comparison.
pub(super) fn bits(v: &[[f32; 4]]) -> Vec<u32> {
    v.iter().flatten().map(|x| x.to_bits()).collect()
}

/// Two and three slices on one GPU give the same bits as one slice (each slice starts on a block
/// boundary of the one-launch step, so every body's sum is the same), for the classic, the
/// mass-scaled and the equal-mass loop; every slice's copy of the positions agrees; N is not a
/// multiple of anything. An equal-mass launch for masses that differ is refused.
pub(super) fn split_slices_on_one_gpu_give_the_same_bits() -> Result<(), Failed> {
    let bodies = plummer(5000, fresh_seed())?;
    for l in [launch(1, 1, C, 256), launch(4, 1, M, 128), launch(1, 4, C, 256), launch(4, 1, U, 256)] {
        let one = split_case(&bodies, 1, l, GatherChoice::Auto, 12)?;
        ensure(one.gather().name() == "none", "one slice gathers nothing")?;
        let (p1, v1) = (one.positions().map_err(|e| format!("{e:#}"))?, one.velocities().map_err(|e| format!("{e:#}"))?);
        ensure(p1.iter().flatten().all(|x| x.is_finite()), "finite positions")?;
        drop(one);
        for slices in [2, 3] {
            let s = split_case(&bodies, slices, l, GatherChoice::Auto, 12)?;
            ensure(s.gather().name() == "peer", "slices on one device gather with copies")?;
            let (p, v) = (s.positions().map_err(|e| format!("{e:#}"))?, s.velocities().map_err(|e| format!("{e:#}"))?);
            ensure(bits(&p) == bits(&p1), format!("{} with {slices} slices: positions differ from one slice", l.kernel_name()))?;
            ensure(bits(&v) == bits(&v1), format!("{} with {slices} slices: velocities differ from one slice", l.kernel_name()))?;
            ensure(s.copies_agree().map_err(|e| format!("{e:#}"))?, "every slice holds the same positions")?;
        }
    }
    // An equal-mass launch given for bodies whose masses differ: refused, not run.
    let mut mixed = bodies.clone();
    mixed.pos[7][3] *= 2.0;
    let api = interop::init(StreamSemantics::Legacy)?;
    let e = SlicedStepper::new(
        &api,
        SchedFlag::Auto,
        &[0],
        &mixed,
        256,
        Some(launch(4, 1, U, 256)),
        PhysParams::default(),
        None,
        None,
        GatherChoice::Auto,
    )
    .err()
    .ok_or("an equal-mass launch ran on masses that differ")?;
    ensure(format!("{e:#}").contains("masses differ"), format!("unclear refusal: {e:#}"))?;
    Ok(())
}

/// NCCL with one rank: `--gather nccl` on one GPU runs ncclCommInitAll + ncclAllGather (in place,
/// one rank) every step and gives the same bits as the step without a gather.
pub(super) fn nccl_with_one_rank_gives_the_same_bits() -> Result<(), Failed> {
    let bodies = plummer(4096, fresh_seed())?;
    let l = launch(1, 1, C, 256);
    let plain = split_case(&bodies, 1, l, GatherChoice::Auto, 10)?;
    let nccl = split_case(&bodies, 1, l, GatherChoice::Nccl, 10)?;
    ensure(nccl.gather().name() == "nccl", format!("gather path {}", nccl.gather().describe()))?;
    eprintln!("{}", nccl.gather().describe());
    let (a, b) = (plain.positions().map_err(|e| format!("{e:#}"))?, nccl.positions().map_err(|e| format!("{e:#}"))?);
    ensure(bits(&a) == bits(&b), "NCCL one-rank run differs from the plain run")?;
    // Two slices on one device cannot be NCCL ranks: a clear refusal.
    let api = interop::init(StreamSemantics::Legacy)?;
    let e = SlicedStepper::new(&api, SchedFlag::Auto, &[0, 0], &bodies, 256, Some(l), PhysParams::default(), None, None, GatherChoice::Nccl)
        .err()
        .ok_or("two NCCL ranks on one device were accepted")?;
    ensure(format!("{e:#}").contains("one rank per device"), format!("unclear refusal: {e:#}"))?;
    Ok(())
}

/// The CUDA backend with the bodies in 2 slices on one GPU (copies between them, then into GL's
/// buffer): map, copy and external each draw the positions of the step (float64 reference of
/// that step, 1e-5 as for one slice), the readback and the diagnostics work, the panel names the
/// gather, and step mode is refused by name.
pub(super) fn split_backend_draws_the_step() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let gl = ctx.gl();
    let bodies = plummer(4096, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let split = SliceOptions { gpus: GpuCount::Count(1), slices_per_gpu: 2, gather: GatherChoice::Auto, render_gpu_computes: true };
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let result = (|| -> Result<(), Failed> {
        for interop in [InteropMode::Map, InteropMode::Copy, InteropMode::External] {
            if interop == InteropMode::External && ctx.info.memory_object.is_err() {
                eprintln!("external skipped: this GL cannot import CUDA memory");
                continue;
            }
            upload(gl, &vbos, 0, &bodies.pos);
            let settings = auto_block_settings(interop);
            // Host waits: the test reads this frame's timings (with semaphores they come a frame later).
            let opts = CudaOptions {
                settings,
                separate_maps: false,
                ctx_sched: CtxSched::Auto,
                kernel: None,
                step_kernel: None,
                precision: Precision::F32,
                split: Some(split),
                external_sync: nbody_app::cuda::settings::ExternalSync::Host,
            };
            let mut backend = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params).map_err(|e| format!("{interop:?}: {e:#}"))?;
            let panel = backend.device_panel();
            let gather = panel.as_ref().and_then(|p| p.slices.as_ref()).map(|s| s.gather.as_str());
            ensure(gather.is_some_and(|g| g.contains("cuMemcpyDtoDAsync")), format!("{interop:?}: panel {panel:?}"))?;
            ensure(backend.step_mode_unavailable().is_some_and(|w| w.contains("--slices-per-gpu")), "step mode is refused by name")?;
            backend.simulate(gl, &vbos, 1).map_err(|e| format!("{interop:?}: {e:#}"))?;
            let (rp, _) = step_reference_f64(&bodies, params, 0.5 * f64::from(params.dt), f64::from(params.dt));
            let got = backend.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies).map_err(|e| format!("{interop:?}: {e:#}"))?;
            let e = rel_err(&got.pos, &rp);
            eprintln!("{interop:?} split in 2 slices: rel. error {e:.2e}");
            ensure(e <= 1e-5, format!("{interop:?} split: rel. error {e:e}"))?;
            let d =
                backend.state(gl, &vbos, Readout::WithDiagnostics).map_err(|e| format!("{interop:?}: {e:#}"))?.diagnostics.ok_or("no diagnostics")?;
            ensure(d.total.is_finite() && d.potential < 0.0, format!("{interop:?}: diagnostics {d:?}"))?;
            // Ten more frames of three steps: still finite, the GL copy keeps up.
            let mut gather = None;
            for _ in 0..10 {
                gather = backend.simulate(gl, &vbos, 3).map_err(|e| format!("{interop:?}: {e:#}"))?.gather_ms;
            }
            eprintln!("{interop:?}: gather of the last step {gather:?} ms");
            ensure(gather.is_some_and(|g| g >= 0.0), format!("{interop:?}: no gather time in the frame's timings"))?;
            let got = backend.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies).map_err(|e| format!("{interop:?}: {e:#}"))?;
            ensure(got.pos.iter().flatten().all(|x| x.is_finite()), "finite after 31 steps")?;
            backend.release_gl(gl);
            drop(backend);
        }
        Ok(())
    })();
    renderer.destroy(gl);
    result
}
