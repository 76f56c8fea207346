//! CPU backends: the same fused leapfrog as the CUDA kernel, in float64 (the test reference) and
//! float32 (the application's CPU backend), both parallel over bodies `i` with rayon.
//!
//! Both follow the convention of [`crate::sim`]: one all-pairs force evaluation per step,
//! `v += a(x_n) * kick` (kick = dt/2 on the first step after a synchronisation, else dt), then
//! `x_{n+1} = x_n + v * dt`. [`CpuF32::bodies`] / [`CpuF64::bodies`] finish with the closing half
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
//! For every body `i` the sum over `j` runs in index order `j = 0, 1, …, N−1` with one accumulator
//! per component, like a thread of the CUDA kernel. Several bodies `i` are processed side by side
//! (independent accumulators), one per SIMD lane, so no sum is reordered.
//!
//! # SIMD (float32)
//! [`CpuF32`]'s force loop is explicit SIMD through [`pulp`]: the lanes hold bodies `i`, every
//! source `j` is broadcast to all lanes, and [`pulp::Arch`] picks at run time the widest
//! instruction set the CPU has (x86-64: AVX2 + FMA, 8 lanes; else SSE2 or scalar). Each lane does
//! the same IEEE operations in the same order as the scalar loop (no fused multiply-add, an exact
//! `sqrt` and division), so on x86-64 the SIMD and scalar results are the same bits (`minps`
//! returns its second operand for a NaN first one, as IEEE minNum does here); a unit test checks
//! it, the capped 0/0 of a massless body included. (On aarch64 NEON's `fmin` returns NaN there:
//! not a target of this project.)

use std::ops::{Add, AddAssign, Div, Mul, Sub};

use pulp::{Simd, WithSimd};
use rayon::prelude::*;

use super::partial::{parts_for, FrameSteps, PartialStep, StepProgress};
use super::{Bodies, Leapfrog, PhysParams};

/// Bodies `i` per rayon task (and per stack buffer of accelerations).
const CHUNK: usize = 64;

/// Nominal all-pairs rate of [`CpuF32`] per thread (interactions/s), for estimates: 2.4e9 per
/// thread was measured on the 2-core CI machine with the SIMD loop (`bench --modes cpu`,
/// N = 16384: 4.8e9 on 2 threads, AVX2), rounded down.
pub const NOMINAL_RATE_PER_THREAD: f64 = 2.0e9;
/// Bodies `i` computed side by side in the inner loop over `j`.
const LANES: usize = 8;

/// The float operations the force loop needs, for `f32` and `f64`.
trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + AddAssign
{
    const ZERO: Self;
    const MAX: Self;
    fn sqrt(self) -> Self;
    /// The smaller of two values; the non-NaN one when one is NaN (IEEE minNum).
    fn min(self, other: Self) -> Self;
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
/// `out` is `[len][3]`; `eps2` is ε². Each sum runs over `j` in index order.
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
        let sources = src.x[..n].iter().zip(&src.y[..n]).zip(&src.z[..n]).zip(&src.m[..n]);
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
                ax[l] += dx * s;
                ay[l] += dy * s;
                az[l] += dz * s;
            }
        }
        for (l, a) in block.iter_mut().enumerate() {
            *a = [g * ax[l], g * ay[l], g * az[l]];
        }
    }
}

/// The widest SIMD lane count [`AccelerationsF32`] supports (AVX-512's 16 f32 lanes).
const MAX_LANES: usize = 16;

/// [`accelerations_range`] for f32, in explicit SIMD: one `pulp` vector of bodies `i`, each source
/// `j` broadcast to every lane. The same operations per lane as the scalar loop (see the module
/// docs), so the results are the same bits.
struct AccelerationsF32<'a> {
    src: &'a Sources<f32>,
    g: f32,
    eps2: f32,
    first: usize,
    /// `[len][3]` accelerations of bodies `first .. first + len`.
    out: &'a mut [[f32; 3]],
}

impl WithSimd for AccelerationsF32<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self { src, g, eps2, first, out } = self;
        let lanes = S::F32_LANES.min(MAX_LANES);
        let n = src.len();
        let (zero, big, eps2v) = (simd.splat_f32s(0.0), simd.splat_f32s(f32::MAX), simd.splat_f32s(eps2));
        for (b, block) in out.chunks_mut(lanes).enumerate() {
            let i0 = first + b * lanes;
            let last = i0 + block.len() - 1;
            let (mut xs, mut ys, mut zs) = ([0.0f32; MAX_LANES], [0.0f32; MAX_LANES], [0.0f32; MAX_LANES]);
            for l in 0..lanes {
                // Lanes past the end of a short block repeat the last body; their results are dropped.
                let i = (i0 + l).min(last);
                (xs[l], ys[l], zs[l]) = (src.x[i], src.y[i], src.z[i]);
            }
            let xi = simd.partial_load_f32s(&xs[..lanes]);
            let yi = simd.partial_load_f32s(&ys[..lanes]);
            let zi = simd.partial_load_f32s(&zs[..lanes]);
            let (mut ax, mut ay, mut az) = (zero, zero, zero);
            let sources = src.x[..n].iter().zip(&src.y[..n]).zip(&src.z[..n]).zip(&src.m[..n]);
            for (((&xj, &yj), &zj), &mj) in sources {
                let dx = simd.sub_f32s(simd.splat_f32s(xj), xi);
                let dy = simd.sub_f32s(simd.splat_f32s(yj), yi);
                let dz = simd.sub_f32s(simd.splat_f32s(zj), zi);
                let r2 = simd.add_f32s(
                    simd.add_f32s(simd.add_f32s(simd.mul_f32s(dx, dx), simd.mul_f32s(dy, dy)), simd.mul_f32s(dz, dz)),
                    eps2v,
                );
                // As the scalar loop: m/r³ capped at MAX (min returns MAX for a NaN quotient, as
                // IEEE minNum does), and 0 where r² + ε² = 0.
                let s = simd.div_f32s(simd.splat_f32s(mj), simd.mul_f32s(r2, simd.sqrt_f32s(r2)));
                let s = simd.select_f32s(simd.greater_than_f32s(r2, zero), simd.min_f32s(s, big), zero);
                ax = simd.add_f32s(ax, simd.mul_f32s(dx, s));
                ay = simd.add_f32s(ay, simd.mul_f32s(dy, s));
                az = simd.add_f32s(az, simd.mul_f32s(dz, s));
            }
            simd.partial_store_f32s(&mut xs[..lanes], ax);
            simd.partial_store_f32s(&mut ys[..lanes], ay);
            simd.partial_store_f32s(&mut zs[..lanes], az);
            for (l, a) in block.iter_mut().enumerate() {
                *a = [g * xs[l], g * ys[l], g * zs[l]];
            }
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
/// Parallel over `i` with rayon; each sum runs over `j` in index order.
pub fn accelerations_f64(pos: &[[f64; 4]], g: f64, eps: f64) -> Vec<[f64; 3]> {
    let mut src = Sources::default();
    src.load(pos.iter().copied());
    let mut acc = vec![[0.0; 3]; pos.len()];
    if pos.len() <= CHUNK {
        accelerations_range(&src, g, eps * eps, 0, &mut acc);
    } else {
        acc.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, out)| accelerations_range(&src, g, eps * eps, c * CHUNK, out));
    }
    acc
}

/// One kernel call's worth of the integrator in float64, from float32 inputs.
///
/// Computes `a = a(x)` with `params.g` and `params.softening` (`params.dt` is not used), then
/// `v += a * kick` and `x_out = x + v * dt_drift`. Returns `(pos_out, vel)`: `pos_out` is `[N][4]`
/// (x, y, z, mass, the mass copied through), `vel` is `[N][3]` (the kicked velocities).
/// A GPU test compares one launch of the kernel with it; the closing half kick is
/// `kick = dt/2, dt_drift = 0`.
pub fn step_reference_f64(
    bodies: &Bodies,
    params: PhysParams,
    kick: f64,
    dt_drift: f64,
) -> (Vec<[f64; 4]>, Vec<[f64; 3]>) {
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

/// Float32 CPU backend, multithreaded with rayon (tasks of 64 bodies `i`): the application's CPU
/// simulation backend.
///
/// State in the kernel's layout: positions `[N][4]` (x, y, z, mass) and velocities `[N][4]`
/// (vx, vy, vz, 0), f32. Between [`CpuF32::step`] calls the velocities lag the positions by half a
/// step; [`CpuF32::bodies`] synchronises them.
#[derive(Debug, Clone)]
pub struct CpuF32 {
    pos: Vec<[f32; 4]>,
    vel: Vec<[f32; 4]>,
    params: PhysParams,
    /// True when `vel` is at the same time as `pos` (the next kick is dt/2).
    leap: Leapfrog,
    /// Snapshot of `pos` in SoA form, the sources of the current force evaluation.
    src: Sources<f32>,
    /// Accelerations of the current force evaluation, `[N][3]` (applied once all are known).
    acc: Vec<[f32; 3]>,
    /// The run's stop request ([`CpuF32::set_interrupt`]).
    interrupt: Option<fn() -> bool>,
    /// Spread long steps over calls of [`CpuF32::step_frame`], at this rate (interactions/s)
    /// ([`CpuF32::set_spread`]).
    spread: Option<f64>,
    /// The step in progress between two calls: its accelerations are computed range by range
    /// into `acc` from the sources `src`; no body moves before the last range.
    partial: Option<PartialStep>,
}

impl CpuF32 {
    /// A backend holding a copy of `bodies` (taken as synchronised) and stepping with `params`.
    ///
    /// Velocities missing from `bodies.vel` (a shorter vector) are taken as 0.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        let mut vel = bodies.vel.clone();
        vel.resize(bodies.pos.len(), [0.0; 4]);
        Self {
            pos: bodies.pos.clone(),
            vel,
            params,
            leap: Leapfrog { synchronized: true },
            src: Sources::default(),
            acc: Vec::new(),
            interrupt: None,
            spread: None,
            partial: None,
        }
    }

    /// Spread steps estimated over [`crate::sim::partial::LONG_STEP_S`] at `rate` interactions/s over calls of
    /// [`CpuF32::step_frame`]: their force evaluation runs in parts of about
    /// [`crate::sim::partial::LAUNCH_S`] (body ranges, [`parts_for`]), one per call, and the
    /// bodies move only after the last (see [`crate::sim::partial`]). `None`: whole steps.
    pub fn set_spread(&mut self, rate: Option<f64>) {
        self.spread = rate;
    }

    /// The step in progress between two calls of [`CpuF32::step_frame`]: parts done, of all.
    pub fn step_in_progress(&self) -> Option<StepProgress> {
        self.partial.map(|p| p.progress())
    }

    /// Abandons the step in progress: no body had moved, so only the leapfrog phase goes back.
    /// Returns how far it had got.
    pub fn abandon_step(&mut self) -> Option<StepProgress> {
        let p = self.partial.take()?;
        p.abandon(&mut self.leap);
        Some(p.progress())
    }

    /// One frame's steps: as [`CpuF32::step`], but with [`CpuF32::set_spread`] a long step
    /// runs one part per call (a call continues the step in progress and ends when that part
    /// was its last, or runs the steps before it and its first part). Paused (`steps` 0): a
    /// step in progress waits.
    pub fn step_frame(&mut self, steps: u32) -> FrameSteps {
        let parts = match self.spread {
            Some(rate) => parts_for((self.len() as f64).powi(2) / rate.max(1.0), self.len(), CHUNK),
            None => 1,
        };
        let mut out = FrameSteps::default();
        if steps == 0 {
            return out;
        }
        if self.partial.is_some() || parts > 1 {
            if self.partial.is_none() {
                self.src.load(self.pos.iter().copied());
                self.acc.resize(self.pos.len(), [0.0; 3]);
                self.partial = Some(PartialStep::start(self.len(), parts, 0, &mut self.leap, self.params.dt));
            }
            let budget = if self.spread.is_some() { crate::sim::partial::PARTS_PER_FRAME } else { usize::MAX };
            match self.continue_partial(budget) {
                None => out.stopped = true,
                Some(p) if p.in_progress() => out.spread = Some(p),
                Some(p) => {
                    out.done = 1;
                    out.spread = Some(p);
                    if self.spread.is_none() {
                        // Not spreading (any more): the frame's other steps run whole.
                        out.done += self.step(steps - 1);
                        out.stopped = out.done < steps;
                    }
                }
            }
            return out;
        }
        out.done = self.step(steps);
        out.stopped = out.done < steps;
        out
    }

    /// Computes up to `budget` ranges of the step in progress; after the last, applies its kick
    /// and drift. Returns its progress, or `None` when an interrupt abandoned it.
    fn continue_partial(&mut self, budget: usize) -> Option<StepProgress> {
        let mut p = self.partial.take()?;
        for _ in 0..budget {
            let Some(range) = p.next_range() else { break };
            if !self.accelerations(range, true) {
                p.abandon(&mut self.leap);
                return None;
            }
            if p.advance() {
                self.apply(p.kick, p.drift);
                return Some(p.progress());
            }
        }
        self.partial = Some(p);
        Some(p.progress())
    }

    /// Look at `requested` between the tasks of each force evaluation (every 64 bodies) and stop
    /// a step when it says so: the step's accelerations are all computed before any body moves,
    /// so a stopped step leaves the state as it was. `None`: never stop.
    pub fn set_interrupt(&mut self, requested: Option<fn() -> bool>) {
        self.interrupt = requested;
    }

    /// Advance `steps` leapfrog steps (one force evaluation each); positions stay in `self`.
    /// Returns the steps done: fewer than `steps` when the interrupt stopped one (the state is
    /// then the one after the steps done).
    pub fn step(&mut self, steps: u32) -> u32 {
        let mut first = 0;
        if self.partial.is_some() {
            // A step in progress is finished first and counts as the first.
            if self.continue_partial(usize::MAX).is_none() {
                return 0;
            }
            first = 1;
        }
        for done in first..steps {
            let before = self.leap;
            let (drift, kick) = self.leap.next_step(self.params.dt);
            if !self.kick_drift(kick, drift, true) {
                self.leap = before;
                return done;
            }
        }
        steps
    }

    /// Finish a step in progress (an interrupt may abandon it), then apply the closing half kick
    /// `v += a(x) * dt/2` if the velocities lag the positions. The half kick is never stopped: a
    /// stopped run writes the state it synchronises.
    pub fn synchronize(&mut self) {
        if self.partial.is_some() {
            self.continue_partial(usize::MAX);
        }
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.kick_drift(kick, drift, false);
        }
    }

    /// True when the velocities are synchronised with the positions.
    pub fn is_synchronized(&self) -> bool {
        self.leap.synchronized
    }

    /// Current positions, `[N][4]` f32 (x, y, z, mass), ready for the vertex-buffer upload.
    pub fn positions(&self) -> &[[f32; 4]] {
        &self.pos
    }

    /// The state with synchronised velocities (applies the half kick if needed; the next
    /// [`CpuF32::step`] then starts with a half kick).
    pub fn bodies(&mut self) -> Bodies {
        self.synchronize();
        Bodies { pos: self.pos.clone(), vel: self.vel.clone() }
    }

    /// The physical parameters in use.
    pub fn params(&self) -> PhysParams {
        self.params
    }

    /// Use `params` for the following steps. When they differ from the current ones a step in
    /// progress is abandoned (it starts again with the new ones) and the state is synchronised
    /// (closing half kick with the old parameters), so the leapfrog restarts cleanly with the
    /// new dt, G or ε.
    pub fn set_params(&mut self, params: PhysParams) {
        if params != self.params {
            self.abandon_step();
            self.synchronize();
            self.params = params;
        }
    }

    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// One force evaluation at the current positions (all accelerations first), then
    /// `v += a * kick; x += v * drift`. With `stoppable` and an interrupt set, a stop request seen
    /// by any task of the evaluation abandons it before any body moves: returns false.
    fn kick_drift(&mut self, kick: f32, drift: f32, stoppable: bool) -> bool {
        self.src.load(self.pos.iter().copied());
        self.acc.resize(self.pos.len(), [0.0; 3]);
        if !self.accelerations(0..self.pos.len(), stoppable) {
            return false;
        }
        self.apply(kick, drift);
        true
    }

    /// The accelerations of bodies `bodies` into `acc`, from the sources `src`, in tasks of
    /// [`CHUNK`] bodies (rayon). With `stoppable` and an interrupt set, a stop request seen by
    /// any task: returns false (nothing else changes).
    fn accelerations(&mut self, bodies: std::ops::Range<usize>, stoppable: bool) -> bool {
        let (src, g, eps) = (&self.src, self.params.g, self.params.softening);
        let stop = self.interrupt.filter(|_| stoppable);
        let stopped = std::sync::atomic::AtomicBool::new(false);
        let arch = pulp::Arch::new();
        let first = bodies.start;
        let task = |c: usize, out: &mut [[f32; 3]]| {
            if stop.is_some_and(|requested| requested()) {
                stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            arch.dispatch(AccelerationsF32 { src, g, eps2: eps * eps, first: first + c * CHUNK, out });
        };
        let acc = &mut self.acc[bodies];
        if acc.len() <= CHUNK {
            task(0, acc);
        } else {
            acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| task(c, out));
        }
        !stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `v += a * kick; x += v * drift` for every body, with the accelerations in `acc`.
    fn apply(&mut self, kick: f32, drift: f32) {
        let acc = &self.acc;
        for_chunks(&mut self.pos, &mut self.vel, |c, pos, vel| {
            for ((p, v), a) in pos.iter_mut().zip(vel.iter_mut()).zip(&acc[c * CHUNK..]) {
                for k in 0..3 {
                    v[k] += a[k] * kick;
                    p[k] += v[k] * drift;
                }
            }
        });
    }
}

/// Float64 CPU backend: the reference of the tests (same integrator as [`CpuF32`] and the kernel),
/// parallel over bodies `i` with rayon.
///
/// Holds positions `[N][3]`, velocities `[N][3]` and masses `[N]` in f64, converted from the f32
/// [`Bodies`] it starts from.
#[derive(Debug, Clone)]
pub struct CpuF64 {
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
    params: PhysParams,
    leap: Leapfrog,
    src: Sources<f64>,
}

impl CpuF64 {
    /// A backend holding `bodies` converted to f64 (taken as synchronised), stepping with `params`
    /// (converted to f64 for every step).
    ///
    /// Velocities missing from `bodies.vel` (a shorter vector) are taken as 0.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        let pos = bodies.pos.iter().map(|p| [p[0], p[1], p[2]].map(f64::from)).collect();
        let mass = bodies.pos.iter().map(|p| f64::from(p[3])).collect();
        let mut vel: Vec<[f64; 3]> = bodies.vel.iter().map(|v| [v[0], v[1], v[2]].map(f64::from)).collect();
        vel.resize(bodies.pos.len(), [0.0; 3]);
        Self { pos, vel, mass, params, leap: Leapfrog { synchronized: true }, src: Sources::default() }
    }

    /// A backend from float64 state: positions `[N][3]`, velocities `[N][3]`, masses `[N]`.
    /// The shortest of the three sets N.
    pub fn from_f64(pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64], params: PhysParams) -> Self {
        let n = pos.len().min(vel.len()).min(mass.len());
        Self {
            pos: pos[..n].to_vec(),
            vel: vel[..n].to_vec(),
            mass: mass[..n].to_vec(),
            params,
            leap: Leapfrog { synchronized: true },
            src: Sources::default(),
        }
    }

    /// Advance `steps` leapfrog steps (one force evaluation each).
    pub fn step(&mut self, steps: u32) {
        for _ in 0..steps {
            // Halving an f32 is exact, so the f64 kick is the same as halving in f64.
            let (drift, kick) = self.leap.next_step(self.params.dt);
            self.kick_drift(f64::from(kick), f64::from(drift));
        }
    }

    /// Apply the closing half kick `v += a(x) * dt/2` if the velocities lag the positions.
    pub fn synchronize(&mut self) {
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.kick_drift(f64::from(kick), f64::from(drift));
        }
    }

    /// True when the velocities are synchronised with the positions.
    pub fn is_synchronized(&self) -> bool {
        self.leap.synchronized
    }

    /// Current positions rounded to f32, `[N][4]` (x, y, z, mass).
    pub fn positions(&self) -> Vec<[f32; 4]> {
        self.pos.iter().zip(&self.mass).map(|(p, &m)| [p[0] as f32, p[1] as f32, p[2] as f32, m as f32]).collect()
    }

    /// Current positions in f64, `[N][3]`.
    pub fn pos_f64(&self) -> &[[f64; 3]] {
        &self.pos
    }

    /// Current velocities in f64, `[N][3]`; half a step behind the positions unless
    /// [`CpuF64::is_synchronized`].
    pub fn vel_f64(&self) -> &[[f64; 3]] {
        &self.vel
    }

    /// Masses in f64, `[N]`.
    pub fn masses(&self) -> &[f64] {
        &self.mass
    }

    /// The state with synchronised velocities, rounded to f32 (applies the half kick if needed).
    pub fn bodies(&mut self) -> Bodies {
        self.synchronize();
        let pos = self.positions();
        let vel = self.vel.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
        Bodies { pos, vel }
    }

    /// The physical parameters in use.
    pub fn params(&self) -> PhysParams {
        self.params
    }

    /// Use `params` for the following steps; synchronises first when they differ from the current
    /// ones (see [`CpuF32::set_params`]).
    pub fn set_params(&mut self, params: PhysParams) {
        if params != self.params {
            self.synchronize();
            self.params = params;
        }
    }

    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    fn kick_drift(&mut self, kick: f64, drift: f64) {
        self.src.load(self.pos.iter().zip(&self.mass).map(|(p, &m)| [p[0], p[1], p[2], m]));
        let (src, g, eps) = (&self.src, f64::from(self.params.g), f64::from(self.params.softening));
        for_chunks(&mut self.pos, &mut self.vel, |c, pos, vel| {
            let mut acc = [[0.0f64; 3]; CHUNK];
            let acc = &mut acc[..pos.len()];
            accelerations_range(src, g, eps * eps, c * CHUNK, acc);
            for ((p, v), a) in pos.iter_mut().zip(vel.iter_mut()).zip(acc.iter()) {
                for k in 0..3 {
                    v[k] += a[k] * kick;
                    p[k] += v[k] * drift;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A long step spread over frames (rate 1 interaction/s: every step is long; N = 300 in
    /// parts of at least 64 bodies: 5 parts) moves nothing until its last part, then gives the
    /// same bits as a whole step; an abandoned one leaves the state as it was; a readback
    /// (`bodies`) in the middle finishes it.
    #[test]
    fn a_spread_step_matches_a_whole_one_and_abandons_cleanly() {
        let bodies = test_bodies(300);
        let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.05 };
        let (mut a, mut b) = (CpuF32::new(&bodies, params), CpuF32::new(&bodies, params));
        a.set_spread(Some(1.0));
        for step in 0..3 {
            let before = (a.pos.clone(), a.vel.clone());
            let mut frames = 0;
            loop {
                frames += 1;
                let f = a.step_frame(2);
                let p = f.spread.expect("spread");
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
            assert_eq!((&a.pos, &a.vel, a.leap), (&b.pos, &b.vel, b.leap), "step {step}: spread and whole differ");
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
        // Whole steps (no spreading) finish a step in progress first, counting it.
        a.step_frame(1);
        a.set_spread(None);
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
        a.set_spread(Some(1.0));
        a.step_frame(1);
        assert!(a.step_in_progress().is_some());
        a.set_params(PhysParams { softening: 0.1, ..params });
        assert_eq!(a.step_in_progress(), None);
        assert_eq!(a.bodies(), bodies, "the state of before the step (synchronised, nothing moved)");
    }

    /// The SIMD force loop gives the scalar loop's bits, on whatever instruction set `pulp` picks
    /// here, for N not a multiple of any lane count, ε = 0 (the skipped self term and the cap) and
    /// ε > 0.
    #[test]
    fn simd_matches_scalar_bit_for_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let n = 203;
        let mut pos: Vec<[f32; 4]> = (0..n).map(|_| [next(), next(), next(), next().abs()]).collect();
        pos[7] = pos[3]; // two coincident bodies
        pos[8] = [0.0, 0.0, 0.0, 1.0];
        pos[9] = [1e-20, 0.0, 0.0, 0.0]; // r³ underflows: 1/0 for body 9, 0/0 (massless j) for body 8
        let mut src = Sources::default();
        src.load(pos.iter().copied());
        for eps in [0.0f32, 0.05] {
            let mut scalar = vec![[0.0f32; 3]; n];
            accelerations_range(&src, 1.5, eps * eps, 0, &mut scalar);
            for first in [0, 5] {
                let mut simd = vec![[0.0f32; 3]; n - first];
                pulp::Arch::new().dispatch(AccelerationsF32 { src: &src, g: 1.5, eps2: eps * eps, first, out: &mut simd });
                for (i, (a, b)) in simd.iter().zip(&scalar[first..]).enumerate() {
                    assert!(a.iter().all(|x| x.is_finite()), "body {i}: {a:?}");
                    assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits), "ε = {eps}, body {}", first + i);
                }
            }
        }
    }
}
