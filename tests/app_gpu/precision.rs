//! The fp64 path against the float64 reference, alone and through each storage, and the bench's
//! rows for it and for GPU setups.

use super::steps::auto_block_settings;
use super::*;

/// The fp64 kernel's accelerations (both rsqrt variants) against the float64 CPU reference, at
/// N = 1, 3, 33, 1000, 4097, 16384 with fresh seeds, softened and exact. One launch with kick 1
/// and drift 0 makes `vel_out − vel_in` the acceleration itself (G = 1), so the comparison sees
/// the force sums directly: ‖a − a_ref‖ / ‖a_ref‖ ≤ 1e-12 (the bound; one Newton step
/// leaves ≤ 7e-14 per term, the sums differ from the CPU's in rounding order only, ~1e-16 ·
/// sqrt(N)); positions come out unchanged, and slots past N untouched.
pub(super) fn f64_step_matches_float64_reference() -> Result<(), Failed> {
    use ::kernels::StepScalarsF64;
    use sim::cpu::accelerations_f64;
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    for library in [false, true] {
        let kernel = k.step_f64(library)?;
        for n in [1usize, 3, 33, 1000, 4097, 16384] {
            for eps in [0.01f32, 0.0] {
                let bodies = plummer(n, fresh_seed())?;
                let pos64: Vec<[f64; 4]> = bodies.pos.iter().map(|b| b.map(f64::from)).collect();
                let vel64: Vec<[f64; 4]> = bodies.vel.iter().map(|b| b.map(f64::from)).collect();
                let a_ref = accelerations_f64(&pos64, 1.0, f64::from(eps));
                let tail = 32;
                let poison = [f64::from_bits(0x7ff8_dead_beef_0000); 4];
                let pin = DeviceBuffer::from_slice(&ctx, &pos64)?;
                let mut out = vec![poison; n + tail];
                let pout = DeviceBuffer::from_slice(&ctx, &out)?;
                let vel = DeviceBuffer::from_slice(&ctx, &vel64)?;
                let eps2 = nbody_app::cuda::kernel_set::eps2_f64(eps);
                let s = StepScalarsF64 { dt_drift: 0.0, kick: 1.0, eps2, g: 1.0 };
                kernel.launch(256, n, 0..n, pin.view(), pout.view(), vel.view(), s, &stream)?;
                stream.synchronize()?;
                pout.copy_to_host(&mut out)?;
                let tail_ok = out[n..].iter().all(|v| v.iter().zip(poison).all(|(a, b)| a.to_bits() == b.to_bits()));
                ensure(tail_ok, format!("fp64 N={n}: wrote past N"))?;
                ensure(out[..n] == pos64[..], format!("fp64 N={n}: drift 0 moved bodies"))?;
                let v_out = vel.to_vec()?;
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for ((vo, vi), r) in v_out.iter().zip(&vel64).zip(&a_ref) {
                    for c in 0..3 {
                        num += ((vo[c] - vi[c]) - r[c]).powi(2);
                        den += r[c] * r[c];
                    }
                }
                let e = if den > 0.0 { (num / den).sqrt() } else { num.sqrt() };
                eprintln!("fp64 lib={library} N={n} eps={eps}: acceleration rel. error {e:.2e}");
                ensure(e <= 1e-12, format!("fp64 lib={library} N={n} eps={eps}: acceleration error {e:e} > 1e-12"))?;
            }
        }
    }
    Ok(())
}

/// One frame of the fp64 CUDA backend (`--precision f64`) with `interop` (map, map-separate,
/// copy, external) from a fresh seed: the f64 state read back through the test hook
/// (`CudaBackend::state_f64`, no half kick) must match the float64 CPU reference of that step
/// (kick dt/2, drift dt) to ‖·‖ relative error ≤ 1e-12 on positions and velocities, masses
/// unchanged; the float4 buffer GL draws must hold exactly the f32 rounding of the f64 positions
/// (`nbody_to_float4` rounds to nearest, as `as f32` does; plummer positions are far from the
/// flushed subnormals) — read with glGetBufferSubData for map and copy, from the CUDA allocation
/// for external (whose GL readback was seen stale, see `external_frames`) — while the other
/// buffer still holds the initial positions; `state()` returns the same rounding, and the
/// diagnostics are finite.
pub(super) fn f64_case(ctx: &HeadlessContext, interop: InteropMode, separate_maps: bool) -> Result<(), Failed> {
    use nbody_app::cuda::gpu_stepper_f64::narrow;
    let gl = ctx.gl();
    let bodies = plummer(4096, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let settings = auto_block_settings(interop);
    // Host waits: the test reads this frame's timings (with semaphores they come a frame later).
    let opts = CudaOptions {
        settings,
        separate_maps,
        ctx_sched: CtxSched::Auto,
        kernel: None,
        step_kernel: None,
        precision: Precision::F64,
        split: None,
        external_sync: nbody_app::cuda::settings::ExternalSync::Host,
    };
    let what = format!("f64 {interop:?}{}", if separate_maps { " (separate maps)" } else { "" });
    let result = (|| -> Result<(), Failed> {
        let mut backend = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params)?;
        let r = (|| -> Result<(), Failed> {
            ensure(
                backend.precision() == Precision::F64 && backend.describe().label.contains(" f64 "),
                format!("{what}: label {}", backend.describe().label),
            )?;
            let t = backend.simulate(gl, &vbos, 1)?;
            ensure(t.kernel_ms.is_some_and(|k| k > 0.0), format!("{what}: no kernel time: {t:?}"))?;
            let (pos, vel) = backend.state_f64()?.ok_or("no f64 state")?;
            let (rp, rv) = step_reference_f64(&bodies, params, 0.5 * f64::from(params.dt), f64::from(params.dt));
            let rel = |a: &[[f64; 4]], b: &dyn Fn(usize) -> [f64; 3]| {
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for (i, x) in a.iter().enumerate() {
                    let y = b(i);
                    for k in 0..3 {
                        num += (x[k] - y[k]).powi(2);
                        den += y[k] * y[k];
                    }
                }
                (num / den.max(1e-300)).sqrt()
            };
            let ep = rel(&pos, &|i| [rp[i][0], rp[i][1], rp[i][2]]);
            let ev = rel(&vel, &|i| rv[i]);
            eprintln!("{what}: f64 state rel. error positions {ep:.2e}, velocities {ev:.2e}; timings {t:?}");
            ensure(ep <= 1e-12 && ev <= 1e-12, format!("{what}: rel. errors {ep:e} / {ev:e} > 1e-12"))?;
            ensure(pos.iter().zip(&rp).all(|(a, b)| a[3] == b[3]), format!("{what}: masses changed"))?;
            let want = narrow(&pos);
            let front = backend.shown().front;
            let read = |i: usize| -> Result<Vec<[f32; 4]>, Failed> {
                let mut out = vec![[0f32; 4]; bodies.len()];
                if interop == InteropMode::External {
                    backend.external_buffer(i).ok_or("no external storage")?.read_at(0, &mut out)?;
                } else {
                    let mut bytes = vec![0u8; bodies.len() * BODY_BYTES];
                    gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbos.buffers[i]));
                    gl.get_buffer_sub_data(glow::ARRAY_BUFFER, 0, &mut bytes);
                    gl.bind_buffer(glow::ARRAY_BUFFER, None);
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(16)) {
                        *o = std::array::from_fn(|k| f32::from_le_bytes([c[4 * k], c[4 * k + 1], c[4 * k + 2], c[4 * k + 3]]));
                    }
                }
                Ok(out)
            };
            let bits = |v: &[[f32; 4]]| -> Vec<[u32; 4]> { v.iter().map(|b| b.map(f32::to_bits)).collect() };
            let (shown, other) = (read(front)?, read(1 - front)?);
            ensure(bits(&shown) == bits(&want), format!("{what}: the float4 buffer {front} is not the f32 rounding of the f64 positions"))?;
            ensure(bits(&other) == bits(&bodies.pos), format!("{what}: the other float4 buffer lost the initial positions"))?;
            let b = backend.state(gl, &vbos, Readout::Bodies).map(|s| s.bodies)?;
            ensure(bits(&b.pos) == bits(&want), format!("{what}: state() is not the f32 rounding of the f64 positions"))?;
            let d = backend.state(gl, &vbos, Readout::WithDiagnostics)?.diagnostics.ok_or("no diagnostics")?;
            ensure(d.total.is_finite(), format!("{what}: diagnostics {d:?}"))
        })();
        backend.release_gl(gl);
        r
    })();
    renderer.destroy(gl);
    result
}

/// [`f64_case`] for every storage: map (one map call), map-separate, copy, external.
pub(super) fn f64_interop_step_matches_float64_reference() -> Result<(), Failed> {
    let ctx = HeadlessContext::new(0)?;
    let mut failures = Vec::new();
    for (interop, separate) in [(InteropMode::Map, false), (InteropMode::Map, true), (InteropMode::Copy, false), (InteropMode::External, false)] {
        if interop == InteropMode::External && ctx.info.memory_object.is_err() {
            failures.push("external: this GL cannot import CUDA memory".to_string());
            continue;
        }
        if let Err(e) = f64_case(&ctx, interop, separate) {
            failures.push(format!("{interop:?} separate={separate}: {}", e.message().unwrap_or("failed")));
        }
    }
    ensure(failures.is_empty(), failures.join("\n"))
}

/// `bench --precision f64` in the CUDA modes (map, map-separate, copy, external, compute) writes
/// one row per mode, each with `precision` f64, a kernel time and a finite state.
pub(super) fn bench_f64_rows_say_f64() -> Result<(), Failed> {
    // On the GPU machine the test binary runs without the build tree: NBODY_BIN names the
    // binary there (.ci/gpu-check sets it), and the scratch directory is the system's.
    let out = std::env::temp_dir().join(format!("bench-f64-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = std::env::var_os("NBODY_BIN").map_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_nbody-interop")), std::path::PathBuf::from);
    let o = std::process::Command::new(bin)
        .args(["bench", "--precision", "f64", "--modes", "map,map-separate,copy,external,compute", "--bodies", "4096"])
        .args(["--frames", "6", "--rounds", "2", "--warmup", "2", "--width", "128", "--height", "128", "--out"])
        .arg(&out)
        .env("RUST_LOG", "warn")
        .output()?;
    let all = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    ensure(o.status.success(), format!("bench --precision f64 failed:\n{all}"))?;
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json"))?)?;
    let rows = doc["rows"].as_array().ok_or("no rows")?;
    let mut modes: Vec<&str> = rows.iter().filter_map(|r| r["mode"].as_str()).collect();
    modes.sort_unstable();
    ensure(modes == ["compute", "copy", "external", "map", "map-separate"], format!("rows for {modes:?}:\n{all}"))?;
    for r in rows {
        ensure(r["precision"] == "f64", format!("row without precision f64: {r}"))?;
        ensure(r["diverged"] == false, format!("diverged row: {r}"))?;
        ensure(r["kernel_ms_median"].as_f64().is_some_and(|k| k > 0.0), format!("no kernel time: {r}"))?;
    }
    let csv = std::fs::read_to_string(out.join("bench.csv"))?;
    ensure(csv.lines().skip(1).all(|l| l.contains(",f64,")), format!("bench.csv rows without f64:\n{csv}"))
}

/// `bench --slices-per-gpu 1,2` writes a row per (mode, setup): the 2-slice rows say 1 GPU, 2
/// slices and their gather path, with a gather time, and each interop row's overhead is against
/// the compute row of its own setup.
pub(super) fn bench_setups_give_a_row_per_setup() -> Result<(), Failed> {
    let out = std::env::temp_dir().join(format!("bench-setups-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let bin = std::env::var_os("NBODY_BIN").map_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_nbody-interop")), std::path::PathBuf::from);
    let o = std::process::Command::new(bin)
        .args(["bench", "--modes", "compute,map,external", "--slices-per-gpu", "1,2", "--bodies", "8192"])
        .args(["--frames", "6", "--rounds", "2", "--warmup", "2", "--width", "128", "--height", "128", "--out"])
        .arg(&out)
        .env("RUST_LOG", "warn")
        .output()?;
    let all = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    ensure(o.status.success(), format!("bench --slices-per-gpu 1,2 failed:\n{all}"))?;
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json"))?)?;
    let rows = doc["rows"].as_array().ok_or("no rows")?;
    ensure(rows.len() == 6, format!("{} rows, expected 3 modes × 2 setups:\n{all}", rows.len()))?;
    for r in rows {
        ensure(r["gpus"] == 1 && r["diverged"] == false, format!("row: {r}"))?;
        let two = r["slices"] == 2;
        ensure(two || r["slices"] == 1, format!("slices: {r}"))?;
        let gather = r["gather"].as_str().unwrap_or_default();
        ensure(if two { gather == "peer" } else { gather == "none" }, format!("gather path: {r}"))?;
        ensure(r["gather_ms_median"].as_f64().is_some() == two, format!("gather time: {r}"))?;
        // One GPU in every row: no speedup (that compares with one GPU, as many slices per GPU).
        ensure(r["speedup"].is_null() && r["scaling_efficiency"].is_null(), format!("speedup: {r}"))?;
        if r["mode"] != "compute" {
            ensure(r["overhead_us"].as_f64().is_some(), format!("no overhead against compute: {r}"))?;
        }
    }
    ensure(all.contains("[1 GPU × 2 slices]"), format!("the table does not name the setups:\n{all}"))
}
