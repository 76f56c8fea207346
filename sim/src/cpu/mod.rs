//! CPU backends: the same fused leapfrog as the CUDA kernel, in float64 (the test reference,
//! [`CpuF64`]) and in the CPU backend's [`Cpu`] (float32, [`CpuF32`], or float64 for
//! `--precision f64`), all parallel over bodies `i` with rayon.
//!
//! All follow the convention of [`crate`]: one all-pairs force evaluation per step,
//! `v += a(x_n) * kick` (kick = dt/2 on the first step after a synchronisation, else dt), then
//! `x_{n+1} = x_n + v * dt`. [`Cpu::bodies`] / [`CpuF64::bodies`] finish with the closing half
//! kick `v += a(x_n) * dt/2`, so the velocities they return are synchronised with the positions
//! (kick-drift-kick leapfrog; Verlet 1967, Hut, Makino & McMillan 1995 for the shared half kicks).
//!
//! Acceleration with Plummer softening ε (GPU Gems 3, ch. 31, eq. 3):
//! `a_i = G Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}`. A pair with `|x_j − x_i|² + ε² = 0`
//! (the term `j = i` when ε = 0, or two coincident bodies) contributes nothing instead of 0/0;
//! for distinct bodies so close that `1/r³` overflows, `m_j/r³` is capped at the largest finite
//! float (as in the kernel), so the result is never NaN for finite input.
//!
//! # Summation order
//! For every body `i` the sum over `j` runs in index order `j = 0, 1, …, N−1`, tile by tile
//! (`SUM_TILE` sources): each tile's terms are summed from zero, then the tile's sum is added to
//! the body's total. With one running sum, once a heavy body's term is in it, the terms of light
//! bodies far away fall below its rounding and are lost (in the two-galaxy scene at N = 1M, a
//! star's pull from the other galaxy's disk, 0.7 % of its acceleration); a tile's sum of them is
//! `SUM_TILE` times larger and is kept. Several bodies `i` are processed side by side
//! (independent accumulators), one per SIMD lane, so no sum is reordered.
//!
//! # SIMD
//! [`Cpu`]'s force loop is explicit SIMD through [`pulp`], in f32 or f64: the lanes hold bodies
//! `i`, every source `j` is broadcast to all lanes, and [`pulp::Arch`] picks at run time the
//! widest instruction set the CPU has (x86-64: AVX-512, 16 f32 or 8 f64 lanes; else AVX2 + FMA,
//! 8 or 4; else scalar). Each lane does the same IEEE operations in the same order as the scalar
//! loop (no fused multiply-add, an exact `sqrt` and division), so on x86-64 the SIMD and scalar
//! results are the same bits (`minps`/`minpd` return their second operand for a NaN first one,
//! as IEEE minNum does here); unit tests check it for both types, the capped 0/0 of a massless
//! body included. (On aarch64 NEON's `fmin` returns NaN there: not a target of this project.)

use std::ops::{Add, AddAssign, Div, Mul, Sub};

use rayon::prelude::*;

mod float64;
pub mod peak;
mod simd;
mod stepper;

pub use float64::CpuF64;
#[cfg(test)]
use simd::Accelerations;
pub use simd::Lane;
pub use stepper::{Cpu, CpuF32};

use super::{Bodies, PhysParams};

/// Bodies `i` per rayon task (and per stack buffer of accelerations).
const CHUNK: usize = 64;

/// Nominal all-pairs rate of [`CpuF32`] per thread (interactions/s), for estimates: 2.4e9 per
/// thread was measured on the 2-core CI machine with the SIMD loop (`bench --modes cpu`,
/// N = 16384: 4.8e9 on 2 threads, AVX2), rounded down.
pub const NOMINAL_RATE_PER_THREAD: f64 = 2.0e9;

/// Nominal all-pairs rate of the float64 [`Cpu`] per thread (interactions/s), for estimates:
/// 1.1e9 per thread was measured on the 2-core CI machine with AVX-512 (8 f64 lanes;
/// `bench --modes cpu --precision f64`, docs/results.md "CPU, 2 cores, 2026-12-05"), halved for
/// AVX2's 4 lanes.
pub const NOMINAL_RATE_PER_THREAD_F64: f64 = 5.0e8;
/// Bodies `i` computed side by side in the inner loop over `j`.
const LANES: usize = 8;

/// Sources per partial sum of the force loops (see the module docs, "Summation order").
const SUM_TILE: usize = 1024;

/// The float operations the force loop needs, for `f32` and `f64`.
pub trait Real:
    Copy + Send + Sync + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + AddAssign
{
    /// 0.
    const ZERO: Self;
    /// The largest finite value.
    const MAX: Self;
    /// The square root (IEEE, correctly rounded).
    fn sqrt(self) -> Self;
    /// The smaller of two values; the non-NaN one when one is NaN (IEEE minNum).
    fn min(self, other: Self) -> Self;
    /// Neither NaN nor ±∞.
    fn is_finite(self) -> bool;
}

/// A float type the CPU backend steps in: `f32` or `f64`.
pub trait Float: Lane + crate::tree::TreeReal {
    /// The value of an f32 (exact).
    fn from_f32(x: f32) -> Self;
    /// The value rounded to f32.
    fn to_f32(self) -> f32;
}

impl Float for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Float for f64 {
    fn from_f32(x: f32) -> Self {
        f64::from(x)
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const MAX: Self = f32::MAX;
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn min(self, other: Self) -> Self {
        f32::min(self, other)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const MAX: Self = f64::MAX;
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn min(self, other: Self) -> Self {
        f64::min(self, other)
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

/// Sources of the force sum in structure-of-arrays form (x, y, z, mass), `[N]` each.
#[derive(Debug, Clone, Default)]
struct Sources<T> {
    x: Vec<T>,
    y: Vec<T>,
    z: Vec<T>,
    m: Vec<T>,
}

impl<T: Real> Sources<T> {
    /// Refill from `[x, y, z]` positions and masses (reusing the allocations).
    fn load(&mut self, pos: impl Iterator<Item = [T; 4]>) {
        self.x.clear();
        self.y.clear();
        self.z.clear();
        self.m.clear();
        for [x, y, z, m] in pos {
            self.x.push(x);
            self.y.push(y);
            self.z.push(z);
            self.m.push(m);
        }
    }

    fn len(&self) -> usize {
        self.x.len()
    }
}

/// Accelerations of bodies `first .. first + out.len()` due to all sources, times `g`.
///
/// `out` is `[len][3]`; `eps2` is ε². Each sum runs over `j` in index order, [`SUM_TILE`] sources
/// at a time (the module docs, "Summation order").
fn accelerations_range<T: Real>(src: &Sources<T>, g: T, eps2: T, first: usize, out: &mut [[T; 3]]) {
    let n = src.len();
    for (b, block) in out.chunks_mut(LANES).enumerate() {
        let i0 = first + b * LANES;
        let last = i0 + block.len() - 1;
        let mut xi = [T::ZERO; LANES];
        let mut yi = [T::ZERO; LANES];
        let mut zi = [T::ZERO; LANES];
        for l in 0..LANES {
            // Lanes past the end of a short block repeat the last body; their results are dropped.
            let i = (i0 + l).min(last);
            xi[l] = src.x[i];
            yi[l] = src.y[i];
            zi[l] = src.z[i];
        }
        let mut ax = [T::ZERO; LANES];
        let mut ay = [T::ZERO; LANES];
        let mut az = [T::ZERO; LANES];
        for j0 in (0..n).step_by(SUM_TILE) {
            let j1 = (j0 + SUM_TILE).min(n);
            let (mut tx, mut ty, mut tz) = ([T::ZERO; LANES], [T::ZERO; LANES], [T::ZERO; LANES]);
            let sources = src.x[j0..j1].iter().zip(&src.y[j0..j1]).zip(&src.z[j0..j1]).zip(&src.m[j0..j1]);
            for (((&xj, &yj), &zj), &mj) in sources {
                for l in 0..LANES {
                    let dx = xj - xi[l];
                    let dy = yj - yi[l];
                    let dz = zj - zi[l];
                    let r2 = dx * dx + dy * dy + dz * dz + eps2;
                    // r² + ε² = 0 only for j = i (or a coincident body) with ε = 0: skip it. For
                    // distinct bodies so close that r³ underflows, m/r³ is capped at MAX (like the
                    // kernel's fminf), so the term stays finite.
                    let s = if r2 > T::ZERO { (mj / (r2 * r2.sqrt())).min(T::MAX) } else { T::ZERO };
                    tx[l] += dx * s;
                    ty[l] += dy * s;
                    tz[l] += dz * s;
                }
            }
            for l in 0..LANES {
                ax[l] += tx[l];
                ay[l] += ty[l];
                az[l] += tz[l];
            }
        }
        for (l, a) in block.iter_mut().enumerate() {
            *a = [g * ax[l], g * ay[l], g * az[l]];
        }
    }
}

/// Runs `f(chunk_index, chunk_of_a, chunk_of_b)` over matching `CHUNK`-sized chunks of two slices
/// of length N: in parallel with rayon when there is more than one chunk, else inline.
fn for_chunks<A: Send, B: Send>(a: &mut [A], b: &mut [B], f: impl Fn(usize, &mut [A], &mut [B]) + Sync) {
    if a.len() <= CHUNK {
        a.chunks_mut(CHUNK).zip(b.chunks_mut(CHUNK)).enumerate().for_each(|(c, (a, b))| f(c, a, b));
    } else {
        a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).enumerate().for_each(|(c, (a, b))| f(c, a, b));
    }
}

/// All-pairs accelerations in float64 (the one-step reference for the GPU tests).
///
/// `pos` is `[N][4]` (x, y, z, mass); returns `[N][3]`,
/// `a_i = g Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + eps²)^{3/2}`, pairs with `r² + eps² = 0` skipped
/// and `m_j / r³` capped at `f64::MAX` (see the module docs).
/// Parallel over `i` with rayon; each sum runs over `j` in index order, tile by tile (the module
/// docs, "Summation order").
pub fn accelerations_f64(pos: &[[f64; 4]], g: f64, eps: f64) -> Vec<[f64; 3]> {
    let mut src = Sources::default();
    src.load(pos.iter().copied());
    let mut acc = vec![[0.0; 3]; pos.len()];
    if pos.len() <= CHUNK {
        accelerations_range(&src, g, eps * eps, 0, &mut acc);
    } else {
        acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| accelerations_range(&src, g, eps * eps, c * CHUNK, out));
    }
    acc
}

/// All-pairs accelerations in float32, by the CPU backend's SIMD loop ([`CpuF32`]'s force
/// evaluation): `pos` is `[N][4]` (x, y, z, mass), returns `[N][3]` (same law and conventions as
/// [`accelerations_f64`]). Parallel over `i` with rayon.
pub fn accelerations_f32(pos: &[[f32; 4]], g: f32, eps: f32) -> Vec<[f32; 3]> {
    let mut src = Sources::default();
    src.load(pos.iter().copied());
    let mut acc = vec![[0.0f32; 3]; pos.len()];
    let arch = pulp::Arch::new();
    let src = &src;
    acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| arch.dispatch(simd::Accelerations { src, g, eps2: eps * eps, first: c * CHUNK, out }));
    acc
}

/// One kernel call's worth of the integrator in float64, from float32 inputs.
///
/// Computes `a = a(x)` with `params.g` and `params.softening` (`params.dt` is not used), then
/// `v += a * kick` and `x_out = x + v * dt_drift`. Returns `(pos_out, vel)`: `pos_out` is `[N][4]`
/// (x, y, z, mass, the mass copied through), `vel` is `[N][3]` (the kicked velocities).
/// A GPU test compares one launch of the kernel with it; the closing half kick is
/// `kick = dt/2, dt_drift = 0`.
pub fn step_reference_f64(bodies: &Bodies, params: PhysParams, kick: f64, dt_drift: f64) -> (Vec<[f64; 4]>, Vec<[f64; 3]>) {
    let mut pos: Vec<[f64; 4]> = bodies.pos.iter().map(|p| p.map(f64::from)).collect();
    let acc = accelerations_f64(&pos, f64::from(params.g), f64::from(params.softening));
    let mut vel = Vec::with_capacity(pos.len());
    for ((p, v), a) in pos.iter_mut().zip(&bodies.vel).zip(&acc) {
        let mut v3 = [0.0; 3];
        for k in 0..3 {
            v3[k] = f64::from(v[k]) + a[k] * kick;
            p[k] += v3[k] * dt_drift;
        }
        vel.push(v3);
    }
    (pos, vel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partial::{FrameSteps, StepProgress};

    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    fn stop_requested() -> bool {
        STOP.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A step stopped by the interrupt leaves the state (and the leapfrog phase) as it was; the
    /// next steps then give the same bits as a run that was never stopped.
    #[test]
    fn a_stopped_step_leaves_the_state_unchanged() {
        let bodies = Bodies {
            pos: (0..300).map(|i| [(i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), i as f32 * 1e-3, 1e-3]).collect(),
            vel: vec![[0.0; 4]; 300],
        };
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.05 };
        let (mut a, mut b) = (CpuF32::new(&bodies, params), CpuF32::new(&bodies, params));
        a.set_interrupt(Some(stop_requested));
        assert_eq!(a.step(2), 2);
        b.step(2);
        STOP.store(true, std::sync::atomic::Ordering::Relaxed);
        let before = (a.pos.clone(), a.vel.clone(), a.is_synchronized());
        assert_eq!(a.step(3), 0, "the first step is stopped");
        STOP.store(false, std::sync::atomic::Ordering::Relaxed);
        assert_eq!((a.pos.clone(), a.vel.clone(), a.is_synchronized()), before);
        assert_eq!(a.step(1), 1);
        b.step(1);
        assert_eq!(a.bodies(), b.bodies());
    }

    fn test_bodies(n: usize) -> Bodies {
        Bodies {
            pos: (0..n).map(|i| [(i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), i as f32 * 1e-3, 1e-3]).collect(),
            vel: (0..n).map(|i| [(i as f32 * 0.05).cos() * 0.1, 0.0, (i as f32 * 0.21).sin() * 0.1, 0.0]).collect(),
        }
    }

    /// A long step in parts over frames (rate 1 interaction/s: every step is long; N = 300 in
    /// parts of at least 64 bodies: 5 parts) moves nothing until its last part, then gives the
    /// same bits as a whole step; an abandoned one leaves the state as it was; a readback
    /// (`bodies`) in the middle finishes it.
    #[test]
    fn a_step_in_parts_matches_a_whole_one_and_abandons_cleanly() {
        let bodies = test_bodies(300);
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.05 };
        let (mut a, mut b) = (CpuF32::new(&bodies, params), CpuF32::new(&bodies, params));
        a.set_in_parts(Some(1.0));
        for step in 0..3 {
            let before = (a.pos.clone(), a.vel.clone());
            let mut frames = 0;
            loop {
                frames += 1;
                let f = a.step_frame(2);
                let p = f.parts.expect("in parts");
                assert_eq!(p, StepProgress { done: frames, of: 5 });
                if p.in_progress() {
                    assert_eq!(f.done, 0);
                    assert_eq!((&a.pos, &a.vel), (&before.0, &before.1), "nothing moves before the last part");
                    assert_eq!(a.step_in_progress(), Some(p));
                } else {
                    assert_eq!(f.done, 1, "the step is done, the frame ends there");
                    break;
                }
            }
            assert_eq!(frames, 5, "step {step}");
            b.step(1);
            assert_eq!((&a.pos, &a.vel, a.leap), (&b.pos, &b.vel, b.leap), "step {step}: in parts and whole differ");
        }
        // Abandoned after two parts: as before it, and the next steps as if it never started.
        let before = (a.pos.clone(), a.vel.clone(), a.leap);
        a.step_frame(1);
        a.step_frame(1);
        assert_eq!(a.abandon_step(), Some(StepProgress { done: 2, of: 5 }));
        assert_eq!((a.pos.clone(), a.vel.clone(), a.leap), before);
        assert_eq!(a.abandon_step(), None);
        // Paused frames leave a step in progress as it is.
        a.step_frame(1);
        assert_eq!(a.step_frame(0), FrameSteps::default());
        assert_eq!(a.step_in_progress(), Some(StepProgress { done: 1, of: 5 }));
        // A readback finishes it: the state after one more whole step.
        b.step(1);
        assert_eq!(a.bodies(), b.bodies());
        assert_eq!(a.step_in_progress(), None);
        // Whole steps (not in parts) finish a step in progress first, counting it.
        a.step_frame(1);
        a.set_in_parts(None);
        assert_eq!(a.step(2), 2);
        b.step(2);
        assert_eq!(a.bodies(), b.bodies());
    }

    /// A parameter change abandons the step in progress (it starts again with the new ones).
    #[test]
    fn a_parameter_change_abandons_the_step_in_progress() {
        let bodies = test_bodies(200);
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.05 };
        let mut a = CpuF32::new(&bodies, params);
        a.set_in_parts(Some(1.0));
        a.step_frame(1);
        assert!(a.step_in_progress().is_some());
        a.set_params(PhysParams { softening: 0.1, ..params });
        assert_eq!(a.step_in_progress(), None);
        assert_eq!(a.bodies(), bodies, "the state of before the step (synchronised, nothing moved)");
    }

    /// The SIMD force loop gives the scalar loop's bits, in f32 and f64, on whatever instruction
    /// set `pulp` picks here, for N not a multiple of any lane count, ε = 0 (the skipped self
    /// term and the cap) and ε > 0.
    #[test]
    fn simd_matches_scalar_bit_for_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        // Two whole tiles of SUM_TILE sources and a partial one: the tiles' sums are compared too.
        let n = 2 * SUM_TILE + 203;
        let mut pos: Vec<[f32; 4]> = (0..n).map(|_| [next(), next(), next(), next().abs()]).collect();
        pos[7] = pos[3]; // two coincident bodies
        pos[8] = [0.0, 0.0, 0.0, 1.0];
        pos[9] = [1e-20, 0.0, 0.0, 0.0]; // r³ underflows: 1/0 for body 9, 0/0 (massless j) for body 8
        same_bits(&pos, |x| x.to_bits().into());
        let mut pos64: Vec<[f64; 4]> = pos.iter().map(|p| p.map(f64::from)).collect();
        pos64[9] = [1e-120, 0.0, 0.0, 0.0]; // the same underflow in f64
        same_bits(&pos64, f64::to_bits);
    }

    /// [`simd_matches_scalar_bit_for_bit`] for one float type (`bits` gives a value's bits).
    fn same_bits<T: Float + std::fmt::Debug>(pos: &[[T; 4]], bits: fn(T) -> u64) {
        let n = pos.len();
        let mut src = Sources::default();
        src.load(pos.iter().copied());
        let g = T::from_f32(1.5);
        for eps in [0.0f32, 0.05] {
            let eps2 = T::from_f32(eps) * T::from_f32(eps);
            let mut scalar = vec![[T::ZERO; 3]; n];
            accelerations_range(&src, g, eps2, 0, &mut scalar);
            for first in [0, 5] {
                let mut simd = vec![[T::ZERO; 3]; n - first];
                pulp::Arch::new().dispatch(Accelerations { src: &src, g, eps2, first, out: &mut simd });
                for (i, (a, b)) in simd.iter().zip(&scalar[first..]).enumerate() {
                    assert!(a.iter().all(|&x| x.is_finite()), "body {i}: {a:?}");
                    assert_eq!(a.map(bits), b.map(bits), "ε = {eps}, body {}", first + i);
                }
            }
        }
    }
}

#[cfg(test)]
mod summation_tests {
    use super::*;
    use crate::init::InitialCondition;

    /// The two-galaxy scene at N = 262144: the first galaxy's stars (indices 1 … 64, after its
    /// centre at index 0, 0.3 of the total mass) feel the other galaxy's disk, 5.2 away, through
    /// 131071 terms each about 5e-8 of their acceleration: below the rounding of one running
    /// sum (whose relative half ulp is 3–6e-8), so that sum loses most of them. Tile sums keep
    /// them. Median relative error of the float32 SIMD loop against the float64 sum, x86-64
    /// AVX2: 1.7e-3 with one running sum, 4.6e-7 with tile sums of 1024 (float32 rounding); the
    /// bound, 2e-5, lies 85× below the one and 43× above the other.
    #[test]
    fn light_bodies_behind_a_heavy_one_are_not_lost() {
        let n = 262_144;
        let bodies = InitialCondition::Galaxies.generate(n, 1, 1.0).expect("galaxies");
        let eps = 0.01f32;
        let mut src32 = Sources::default();
        src32.load(bodies.pos.iter().copied());
        let mut acc32 = vec![[0.0f32; 3]; 64];
        pulp::Arch::new().dispatch(Accelerations { src: &src32, g: 1.0, eps2: eps * eps, first: 1, out: &mut acc32 });
        let mut src64 = Sources::default();
        src64.load(bodies.pos.iter().map(|p| p.map(f64::from)));
        let mut acc64 = vec![[0.0f64; 3]; 64];
        accelerations_range(&src64, 1.0, f64::from(eps * eps), 1, &mut acc64);
        let mut errors: Vec<f64> = acc32
            .iter()
            .zip(&acc64)
            .map(|(a, r)| {
                let d = (0..3).map(|k| (f64::from(a[k]) - r[k]).powi(2)).sum::<f64>().sqrt();
                d / r.iter().map(|x| x * x).sum::<f64>().sqrt()
            })
            .collect();
        errors.sort_by(f64::total_cmp);
        let median = errors[errors.len() / 2];
        assert!(median < 2e-5, "median relative error {median:.2e} of the first galaxy's stars");
    }
}
