//! The step kernels against the float64 reference: every variant, block size and loop, stream-K,
//! exact gravity, the potential.

use super::steps::bits;
use super::*;

/// One kernel call on the GPU (P, block) from `bodies`.
pub(super) const C: StepLoop = StepLoop::Classic;
pub(super) const M: StepLoop = StepLoop::MassScaled;
pub(super) const U: StepLoop = StepLoop::EqualMass;

/// Every step kernel as (P bodies per thread, S threads per body, loop). The equal-mass ones
/// run on states whose masses are all equal: the Plummer sphere's are (1/N each).
pub(super) const VARIANTS: [(u32, u32, StepLoop); 11] =
    [(1, 1, C), (2, 1, C), (4, 1, C), (1, 4, C), (1, 8, C), (2, 2, M), (2, 4, M), (2, 8, M), (4, 1, M), (2, 4, U), (4, 1, U)];

/// True when the PTX ships the stream-K pair of the variant (P, S, loop).
pub(super) fn has_stream_k((p, split, step_loop): (u32, u32, StepLoop)) -> bool {
    let pair = LaunchConfig { stream_k: Some(1), ..launch(p, split, step_loop, 0) };
    ::kernels::launch_rule::STEP_KERNEL_NAMES.contains(&pair.kernel_name().as_str())
}

pub(super) fn launch(p: u32, split: u32, step_loop: StepLoop, block: u32) -> LaunchConfig {
    LaunchConfig { block, p, threads_per_body: split, step_loop, stream_k: None }
}

/// Each variant's launches: the plain one, and where the PTX ships its stream-K pair, stream-K
/// on 1 CTA, on 7 (uneven shares), on the H200's 132 SMs and on 1000 (more CTAs than units at
/// small N: CTAs without work).
pub(super) fn launches(p: u32, split: u32, step_loop: StepLoop, block: u32) -> Vec<LaunchConfig> {
    let plain = launch(p, split, step_loop, block);
    let stream_k = if has_stream_k((p, split, step_loop)) { vec![1, 7, 132, 1000] } else { Vec::new() };
    std::iter::once(plain).chain(stream_k.into_iter().map(|c| LaunchConfig { stream_k: Some(c), ..plain })).collect()
}

pub(super) fn gpu_step(ctx: &Arc<Context>, k: &Kernels, bodies: &Bodies, params: PhysParams, l: LaunchConfig, kick: f32) -> Result<StepOut, Failed> {
    let n = bodies.len();
    let tail = 64;
    let poison = [f32::from_bits(0x7fc0_dead); 4];
    let pin = DeviceBuffer::from_slice(ctx, &bodies.pos)?;
    let mut out_host = vec![poison; n + tail];
    let pout = DeviceBuffer::from_slice(ctx, &out_host)?;
    let vel = DeviceBuffer::from_slice(ctx, &bodies.vel)?;
    let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
    // Three distinct buffers of ≥ N bodies (pout holds N + tail: the kernel must not write past N).
    k.launch_step(l, n, (pin.view(), pout.view(), vel.view()), params.dt, kick, params, &stream)?;
    stream.synchronize()?;
    pout.copy_to_host(&mut out_host)?;
    let tail_ok = out_host[n..].iter().all(|v| v.iter().zip(poison).all(|(a, b)| a.to_bits() == b.to_bits()));
    out_host.truncate(n);
    Ok((out_host, vel.to_vec()?, tail_ok))
}

pub(super) fn one_step_matches_float64_reference() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let bodies = plummer(4096, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let (rp, rv) = step_reference_f64(&bodies, params, 0.5 * f64::from(params.dt), f64::from(params.dt));
    for (p, s, m) in VARIANTS {
        for block in [256, 1024] {
            for l in launches(p, s, m, block) {
                let (pos, vel, _) = gpu_step(&ctx, &k, &bodies, params, l, 0.5 * params.dt)?;
                let (ep, ev) = (rel_err(&pos, &rp), rel_err3(&vel, &rv));
                let what = l.describe();
                eprintln!("{what}: position rel. error {ep:.2e}, velocity {ev:.2e}");
                ensure(ep <= 1e-5 && ev <= 1e-5, format!("{what}: errors {ep:e} / {ev:e} > 1e-5"))?;
            }
        }
    }
    Ok(())
}

pub(super) fn n_not_a_multiple_of_the_block_size() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.05 };
    for n in [1usize, 3, 33, 1000, 4097, 16384] {
        let bodies = plummer(n, fresh_seed())?;
        let (rp, _) = step_reference_f64(&bodies, params, f64::from(params.dt), f64::from(params.dt));
        for (p, s, m) in VARIANTS {
            // Every kernel at B = 256; the unsplit ones also at the smallest tiles: B = 32 (one
            // loop trip per tile for m4x1's 32 sources per trip) and 96 (three).
            let blocks: &[u32] = if s == 1 { &[256, 32, 96] } else { &[256] };
            for &b in blocks {
                for l in launches(p, s, m, b) {
                    let (pos, _, tail_ok) = gpu_step(&ctx, &k, &bodies, params, l, params.dt)?;
                    ensure(tail_ok, format!("N={n} {}: wrote past N", l.describe()))?;
                    let e = rel_err(&pos, &rp);
                    ensure(e <= 1e-5, format!("N={n} {}: rel. error {e:e}", l.describe()))?;
                }
            }
        }
    }
    Ok(())
}

pub(super) fn exact_gravity_with_distinct_bodies_is_finite() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let bodies = plummer(2048, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-4, softening: 0.0 };
    let (rp, _) = step_reference_f64(&bodies, params, f64::from(params.dt), f64::from(params.dt));
    for (p, s, m) in VARIANTS {
        for l in launches(p, s, m, 256) {
            let (pos, vel, _) = gpu_step(&ctx, &k, &bodies, params, l, params.dt)?;
            ensure(pos.iter().chain(&vel).all(|v| v.iter().all(|x| x.is_finite())), format!("{}: non-finite value with ε = 0", l.describe()))?;
            let e = rel_err(&pos, &rp);
            ensure(e <= 1e-5, format!("{}: ε = 0 rel. error {e:e}", l.describe()))?;
        }
    }
    Ok(())
}

/// The mass-scaled loop where it is hardest: a cluster far from the origin (x ≈ 100, where
/// k·x rounds by ~1e-5 and a self term left in would add O(1) to each acceleration), a small
/// softening, massless and negative masses; against the float64 reference, velocities compared
/// (they carry the accelerations).
pub(super) fn mass_scaled_loop_with_hard_masses_matches_float64_reference() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let mut bodies = plummer(4097, fresh_seed())?;
    for (i, b) in bodies.pos.iter_mut().enumerate() {
        b[0] += 100.0;
        b[1] -= 50.0;
        match i % 97 {
            0 => b[3] = 0.0,
            1 => b[3] = -b[3],
            _ => {}
        }
    }
    ensure(Masses::of(&bodies.pos).scaled, "the test's masses should suit the scaled loop")?;
    // A long kick (dt = 0.1) so that the velocity change, G a dt, dominates the velocity.
    let params = PhysParams { g: 1.0, dt: 0.1, softening: 1e-3 };
    let (_, rv) = step_reference_f64(&bodies, params, f64::from(params.dt), f64::from(params.dt));
    let dv_ref: Vec<[f64; 4]> =
        rv.iter().zip(&bodies.vel).map(|(r, v)| [r[0] - f64::from(v[0]), r[1] - f64::from(v[1]), r[2] - f64::from(v[2]), 0.0]).collect();
    // The equal-mass loop is not for these masses (its own test below).
    for (p, s, m) in VARIANTS.into_iter().filter(|v| v.2 != U) {
        kick_matches(&ctx, &k, &bodies, params, &dv_ref, launches(p, s, m, 256), 5e-5)?;
    }
    Ok(())
}

/// Each launch's kick (velocity change, G a dt) against `dv_ref` within `tol` (relative L2), and
/// nothing written past N.
pub(super) fn kick_matches(
    ctx: &Arc<Context>,
    k: &Kernels,
    bodies: &Bodies,
    params: PhysParams,
    dv_ref: &[[f64; 4]],
    ls: Vec<LaunchConfig>,
    tol: f64,
) -> Result<(), Failed> {
    for l in ls {
        let (_, vel, tail_ok) = gpu_step(ctx, k, bodies, params, l, params.dt)?;
        ensure(tail_ok, format!("{}: wrote past N", l.describe()))?;
        let dv: Vec<[f32; 4]> = vel.iter().zip(&bodies.vel).map(|(a, v)| [a[0] - v[0], a[1] - v[1], a[2] - v[2], 0.0]).collect();
        let e = rel_err(&dv, dv_ref);
        eprintln!("{}: kick rel. error {e:.2e}", l.describe());
        ensure(e <= tol, format!("{}: kick (G a dt) rel. error {e:e} > {tol:e}", l.describe()))?;
    }
    Ok(())
}

/// The equal-mass loop where it is hardest: the same cluster far from the origin with a small
/// softening (the self term must come out exactly 0: with ε = 1e-3 a term left in would be
/// 1e9 times a rounding of x), every mass 0.3 / N (not a power of two: the sum's final
/// multiplication rounds), and all of them negative; each against the float64 reference with
/// the classic kernels' 1e-5. Also: the launch rule picks the equal-mass loop for such a state
/// and never for one whose masses differ by a bit.
pub(super) fn equal_mass_loop_matches_float64_reference() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let n = 4097;
    for sign in [1.0f32, -1.0] {
        let mut bodies = plummer(n, fresh_seed())?;
        for b in &mut bodies.pos {
            b[0] += 100.0;
            b[1] -= 50.0;
            b[3] = sign * 0.3 / n as f32;
        }
        ensure(Masses::of(&bodies.pos).equal, "the test's masses should be equal")?;
        let params = PhysParams { g: 1.0, dt: 0.1, softening: 1e-3 };
        let (_, rv) = step_reference_f64(&bodies, params, f64::from(params.dt), f64::from(params.dt));
        let dv_ref: Vec<[f64; 4]> =
            rv.iter().zip(&bodies.vel).map(|(r, v)| [r[0] - f64::from(v[0]), r[1] - f64::from(v[1]), r[2] - f64::from(v[2]), 0.0]).collect();
        for (p, s) in EQUAL_MASS {
            for block in [256, 1024] {
                kick_matches(&ctx, &k, &bodies, params, &dv_ref, launches(p, s, U, block), 1e-5)?;
            }
        }
    }
    let mut bodies = plummer(131072, fresh_seed())?;
    let picked = k.choose_launch(bodies.len(), 0, Masses::of(&bodies.pos), true)?;
    ensure(picked.step_loop == U, format!("equal masses, N = 131072: the rule picked {}", picked.describe()))?;
    bodies.pos[77][3] = f32::from_bits(bodies.pos[77][3].to_bits() + 1);
    let picked = k.choose_launch(bodies.len(), 0, Masses::of(&bodies.pos), true)?;
    ensure(picked.step_loop != U, format!("masses not all equal: the rule picked {}", picked.describe()))?;
    Ok(())
}

/// A step over a body range that starts off a block boundary (37..4000 of 4097): stream-K on one
/// CTA gives the plain launch's bits, on 132 CTAs the same values within 1e-5, and neither writes
/// a position outside the range.
pub(super) fn stream_k_over_a_body_range() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let bodies = plummer(4097, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let range = 37..4000;
    let poison = [f32::from_bits(0x7fc0_dead); 4];
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    // (positions written, velocities)
    type Out = (Vec<[f32; 4]>, Vec<[f32; 4]>);
    let run = |l: LaunchConfig| -> Result<Out, Failed> {
        let pin = DeviceBuffer::from_slice(&ctx, &bodies.pos)?;
        let pout = DeviceBuffer::from_slice(&ctx, &vec![poison; bodies.len()])?;
        let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel)?;
        k.launch_step_range(l, bodies.len(), range.clone(), (pin.view(), pout.view(), vel.view()), params.dt, params.dt, params, &stream)?;
        stream.synchronize()?;
        Ok((pout.to_vec()?, vel.to_vec()?))
    };
    for (p, s, m) in VARIANTS.into_iter().filter(|v| has_stream_k(*v)) {
        let plain = launch(p, s, m, 256);
        let (pp, pv) = run(plain)?;
        let untouched =
            |v: &[[f32; 4]]| v.iter().enumerate().filter(|(i, _)| !range.contains(i)).all(|(_, b)| b.map(f32::to_bits) == poison.map(f32::to_bits));
        ensure(untouched(&pp), format!("{}: wrote outside the range", plain.describe()))?;
        let (op, ov) = run(LaunchConfig { stream_k: Some(1), ..plain })?;
        ensure(
            bits(&op) == bits(&pp) && bits(&ov) == bits(&pv),
            format!("{}: one CTA differs from the plain launch over the range", plain.describe()),
        )?;
        let sk = LaunchConfig { stream_k: Some(132), ..plain };
        let (kp, kv) = run(sk)?;
        ensure(untouched(&kp), format!("{}: wrote outside the range", sk.describe()))?;
        let to64 = |v: &[[f32; 4]]| v[range.clone()].iter().map(|b| b.map(f64::from)).collect::<Vec<_>>();
        let (ep, ev) = (rel_err(&kp[range.clone()], &to64(&pp)), rel_err(&kv[range.clone()], &to64(&pv)));
        ensure(ep <= 1e-5 && ev <= 1e-5, format!("{}: differs from the plain launch by {ep:e} / {ev:e}", sk.describe()))?;
    }
    Ok(())
}

/// Stream-K is deterministic: the same launch twice gives the same bits; and on one CTA (every
/// block of bodies a single segment over all sources, in the plain kernel's order) it gives the
/// plain kernel's bits.
pub(super) fn stream_k_is_deterministic() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let bodies = plummer(4097, fresh_seed())?;
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    for (p, s, m) in VARIANTS.into_iter().filter(|v| has_stream_k(*v)) {
        let plain = launch(p, s, m, 256);
        let sk = LaunchConfig { stream_k: Some(132), ..plain };
        let a = gpu_step(&ctx, &k, &bodies, params, sk, params.dt)?;
        let b = gpu_step(&ctx, &k, &bodies, params, sk, params.dt)?;
        ensure(bits(&a.0) == bits(&b.0) && bits(&a.1) == bits(&b.1), format!("{}: two runs differ", sk.describe()))?;
        let one = gpu_step(&ctx, &k, &bodies, params, LaunchConfig { stream_k: Some(1), ..plain }, params.dt)?;
        let reference = gpu_step(&ctx, &k, &bodies, params, plain, params.dt)?;
        ensure(
            bits(&one.0) == bits(&reference.0) && bits(&one.1) == bits(&reference.1),
            format!("{}: stream-K on one CTA differs from one plain launch", plain.describe()),
        )?;
    }
    Ok(())
}

pub(super) fn potential_kernel_matches_float64() -> Result<(), Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let bodies = plummer(3000, fresh_seed())?;
    let pos = DeviceBuffer::from_slice(&ctx, &bodies.pos)?;
    let phi = DeviceBuffer::<f32>::alloc(&ctx, bodies.len())?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    for eps in [0.0f32, 0.05] {
        k.launch_potential(256, bodies.len(), pos.view(), phi.view(), eps, &stream)?;
        stream.synchronize()?;
        let got = phi.to_vec()?;
        let want = potentials_f64(&bodies.pos, f64::from(eps));
        let (mut num, mut den) = (0.0, 0.0);
        for (g, w) in got.iter().zip(&want) {
            num += (f64::from(*g) - w).powi(2);
            den += w * w;
        }
        let e = (num / den).sqrt();
        ensure(e <= 1e-5, format!("ε={eps}: potential rel. error {e:e}"))?;
    }
    Ok(())
}

/// The launch rule's automatic choice (block size left to it) on this GPU for every N of a
/// geometric grid from 1 to 16M, each kind of masses (mixed and inside the mass-scaled range,
/// all equal, outside that range, equal and outside it) and whole or ranged steps (stream-K
/// allowed or not): the set of kernels it picks, by name.
pub(super) fn launch_rule_picks() -> Result<std::collections::BTreeMap<String, usize>, Failed> {
    let ctx = cuda()?;
    let k = Kernels::load(&ctx, None)?;
    let mut ns: Vec<usize> = (0..=96).map(|i| (2f64.powf(f64::from(i) / 4.0)).round() as usize).collect();
    ns.extend((0..=24).flat_map(|e| [(1usize << e) + 1, (1usize << e).saturating_sub(1).max(1)]));
    ns.extend([3, 5, 6, 7, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000]);
    ns.sort_unstable();
    ns.dedup();
    let masses = [
        Masses { scaled: true, equal: false },
        Masses { scaled: true, equal: true },
        Masses { scaled: false, equal: false },
        Masses { scaled: false, equal: true },
    ];
    let mut picks = std::collections::BTreeMap::new();
    for &n in &ns {
        for m in masses {
            for stream_k_ok in [true, false] {
                let l = k.choose_launch(n, 0, m, stream_k_ok)?;
                *picks.entry(l.kernel_name()).or_insert(0) += 1;
            }
        }
    }
    Ok(picks)
}

/// The PTX ships the kernels the launch rule picks on the GPU it was measured on (132 SMs: the
/// H200), the plain twin of each stream-K pair it picks (steps over body ranges run it), and
/// the reference loop `nbody_step_p1`, and nothing else: `--step-kernel`'s list is exactly
/// that. Elsewhere the picks are printed only (another GPU may pick fewer).
pub(super) fn the_ptx_ships_what_the_launch_rule_picks() -> Result<(), Failed> {
    let picks = launch_rule_picks()?;
    let sms = cuda()?.device().attribute(interop::sys::attr::MULTIPROCESSOR_COUNT)?;
    eprintln!("launch rule picks on {sms} SMs (kernel: cases): {picks:?}");
    let shipped: std::collections::BTreeSet<String> = ::kernels::launch_rule::STEP_KERNEL_NAMES.iter().map(|s| s.to_string()).collect();
    let mut expected: std::collections::BTreeSet<String> = picks.keys().cloned().collect();
    let twins: Vec<String> = expected.iter().filter_map(|k| k.strip_prefix("nbody_stepk_").map(|v| format!("nbody_step_{v}"))).collect();
    expected.extend(twins);
    expected.insert("nbody_step_p1".into());
    if !expected.is_subset(&shipped) {
        return Err(format!("picked but not shipped: {:?}", expected.difference(&shipped).collect::<Vec<_>>()).into());
    }
    if sms == 132 && expected != shipped {
        return Err(format!("shipped but never picked: {:?}", shipped.difference(&expected).collect::<Vec<_>>()).into());
    }
    Ok(())
}
