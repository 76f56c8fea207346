//! The grouped walk's arithmetic in explicit SIMD ([`pulp`], dispatched at run time): the
//! body–body and body–cell terms of a group's bodies (in the lanes) against its interaction
//! lists (each entry broadcast).
//!
//! [`TreeSimd`] is pulp's [`Simd`] plus a reciprocal square root: the hardware estimate
//! (`vrsqrt14ps`, 14 bits, on AVX-512; `vrsqrtps`, 12 bits, on AVX2) and one Newton–Raphson step,
//! `y (3 − x y²) / 2`, which leaves a relative error of about 1e-7 (2e-7 at most from 12 bits:
//! the step squares the estimate's error, 3 × (2⁻¹²)² / 2 ≈ 9e-8, plus the rounding of four f32
//! operations), far below the tree's own error (1e-5 and up). It replaces the exact square root
//! and division of the direct sum, whose divider is the direct sum's bottleneck. Without AVX2
//! the scalar path computes `1 / sqrt(x)` exactly.

use pulp::{Simd, WithSimd};

use super::build::CellF32;

/// The widest SIMD lane count [`accelerations`] supports (AVX-512's 16 f32 lanes).
const MAX_LANES: usize = 16;

/// pulp's SIMD operations and a reciprocal square root to about f32 precision.
pub(super) trait TreeSimd: Simd {
    /// `1 / sqrt(x)` per lane, relative error ≲ 2e-7 (see the module docs); `x` > 0 and
    /// normal.
    fn rsqrt(self, x: Self::f32s) -> Self::f32s;
}

impl TreeSimd for pulp::Scalar {
    #[inline(always)]
    fn rsqrt(self, x: f32) -> f32 {
        1.0 / x.sqrt()
    }
}

#[cfg(target_arch = "x86_64")]
impl TreeSimd for pulp::x86::V3 {
    #[inline(always)]
    fn rsqrt(self, x: Self::f32s) -> Self::f32s {
        newton(self, x, self.approx_reciprocal_sqrt_f32x8(x))
    }
}

#[cfg(target_arch = "x86_64")]
impl TreeSimd for pulp::x86::V4 {
    #[inline(always)]
    fn rsqrt(self, x: Self::f32s) -> Self::f32s {
        let y: Self::f32s = pulp::cast(self.avx512f._mm512_rsqrt14_ps(pulp::cast(x)));
        newton(self, x, y)
    }
}

/// One Newton–Raphson step of `1 / sqrt(x)` from the estimate `y`: `y (1.5 − (x / 2) y²)`.
#[inline(always)]
fn newton<S: Simd>(s: S, x: S::f32s, y: S::f32s) -> S::f32s {
    let half_x = s.mul_f32s(s.splat_f32s(-0.5), x);
    let u = s.mul_add_e_f32s(half_x, s.mul_f32s(y, y), s.splat_f32s(1.5));
    s.mul_f32s(y, u)
}

/// Work that runs on a [`TreeSimd`] token ([`dispatch`] picks it).
pub(super) trait TreeOp {
    /// What the work returns.
    type Output;
    /// Does the work with `simd`'s instructions.
    fn run<S: TreeSimd>(self, simd: S) -> Self::Output;
}

/// A [`TreeOp`] with its token, run by pulp's `vectorize` (which compiles it with the token's
/// instruction set enabled).
struct With<O, T> {
    op: O,
    simd: T,
}

impl<O: TreeOp, T: TreeSimd> WithSimd for With<O, T> {
    type Output = O::Output;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> O::Output {
        self.op.run(self.simd)
    }
}

/// Runs `op` with the widest instruction set this CPU has: AVX-512 (16 f32 lanes), AVX2 + FMA
/// (8 lanes) or scalar code.
pub(super) fn dispatch<O: TreeOp>(op: O) -> O::Output {
    #[cfg(target_arch = "x86_64")]
    match pulp::Arch::new() {
        pulp::Arch::V4(s) => return Simd::vectorize(s, With { op, simd: s }),
        pulp::Arch::V3(s) => return Simd::vectorize(s, With { op, simd: s }),
        _ => {}
    }
    Simd::vectorize(pulp::Scalar, With { op, simd: pulp::Scalar })
}

/// The name of the instruction set the CPU backend's SIMD code (the tree's walk and the direct
/// sum, both dispatched at run time) runs on here: `avx512`, `avx2` or `scalar`.
pub fn isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    match pulp::Arch::new() {
        pulp::Arch::V4(_) => return "avx512",
        pulp::Arch::V3(_) => return "avx2",
        _ => {}
    }
    "scalar"
}

/// The accelerations (× `g`) of `bodies` (`[len][4]`, x, y, z, mass; one group) into `out`
/// (`[len][3]`) from the group's interaction lists: `sources` (x, y, z, m) and `cells`
/// ([`CellF32`], its spread already multiplied by ε²). The group's bodies fill the lanes (a short last vector repeats
/// its last body; those lanes are dropped), every list entry is broadcast to all lanes, and the
/// body–body and body–cell terms are summed apart, then added. The terms are those of
/// [`crate::tree`] ("Force law"), in f32: for body–body terms `r² + ε²` is raised to the
/// least normal float and `m/r³` is capped at the largest float, so a body's own term (`r = 0`,
/// ε = 0) and coincident bodies add `0 · MAX = 0`, and a massless source adds 0, as in the
/// direct sum.
#[inline(always)]
pub(super) fn accelerations<S: TreeSimd>(
    simd: S,
    sources: &[[f32; 4]],
    cells: &[CellF32],
    bodies: &[[f32; 4]],
    out: &mut [[f32; 3]],
    g: f32,
    eps2: f32,
) {
    let s = simd;
    let lanes = S::F32_LANES.min(MAX_LANES);
    let (eps2v, tiny, big) = (s.splat_f32s(eps2), s.splat_f32s(f32::MIN_POSITIVE), s.splat_f32s(f32::MAX));
    let (minus_half5, zero) = (s.splat_f32s(-2.5), s.splat_f32s(0.0));
    for (block, out) in bodies.chunks(lanes).zip(out.chunks_mut(lanes)) {
        let mut lane = [[0.0f32; MAX_LANES]; 3];
        for l in 0..lanes {
            let b = block[l.min(block.len() - 1)];
            (lane[0][l], lane[1][l], lane[2][l]) = (b[0], b[1], b[2]);
        }
        let (xi, yi, zi) = (s.partial_load_f32s(&lane[0][..lanes]), s.partial_load_f32s(&lane[1][..lanes]), s.partial_load_f32s(&lane[2][..lanes]));
        let (mut ax, mut ay, mut az) = (zero, zero, zero);
        for src in sources {
            let dx = s.sub_f32s(s.splat_f32s(src[0]), xi);
            let dy = s.sub_f32s(s.splat_f32s(src[1]), yi);
            let dz = s.sub_f32s(s.splat_f32s(src[2]), zi);
            let r2 = s.mul_add_e_f32s(dz, dz, s.mul_add_e_f32s(dy, dy, s.mul_add_e_f32s(dx, dx, eps2v)));
            let inv = s.rsqrt(s.max_f32s(r2, tiny));
            let inv3 = s.min_f32s(s.mul_f32s(s.mul_f32s(inv, inv), inv), big);
            let w = s.min_f32s(s.mul_f32s(s.splat_f32s(src[3]), inv3), big);
            ax = s.mul_add_e_f32s(dx, w, ax);
            ay = s.mul_add_e_f32s(dy, w, ay);
            az = s.mul_add_e_f32s(dz, w, az);
        }
        let (mut cx, mut cy, mut cz) = (zero, zero, zero);
        for c in cells {
            let dx = s.sub_f32s(s.splat_f32s(c[0]), xi);
            let dy = s.sub_f32s(s.splat_f32s(c[1]), yi);
            let dz = s.sub_f32s(s.splat_f32s(c[2]), zi);
            let r2 = s.mul_add_e_f32s(dz, dz, s.mul_add_e_f32s(dy, dy, s.mul_add_e_f32s(dx, dx, eps2v)));
            let inv = s.rsqrt(r2);
            let inv2 = s.mul_f32s(inv, inv);
            let inv5 = s.mul_f32s(s.mul_f32s(inv2, inv2), inv);
            // (No closures here: they would be compiled without the token's instruction set.)
            let (nxx, nyy, nzz) = (s.splat_f32s(c[4]), s.splat_f32s(c[5]), s.splat_f32s(c[6]));
            let (nxy, nxz, nyz) = (s.splat_f32s(c[7]), s.splat_f32s(c[8]), s.splat_f32s(c[9]));
            // −Q d, then −(dᵀ Q d − ε² S).
            let qx = s.mul_add_e_f32s(nxz, dz, s.mul_add_e_f32s(nxy, dy, s.mul_f32s(nxx, dx)));
            let qy = s.mul_add_e_f32s(nyz, dz, s.mul_add_e_f32s(nyy, dy, s.mul_f32s(nxy, dx)));
            let qz = s.mul_add_e_f32s(nzz, dz, s.mul_add_e_f32s(nyz, dy, s.mul_f32s(nxz, dx)));
            let e = s.mul_add_e_f32s(dz, qz, s.mul_add_e_f32s(dy, qy, s.mul_add_e_f32s(dx, qx, s.splat_f32s(c[10]))));
            // [M R² + (5/2) (dᵀ Q d − ε² S) / R²] d − Q d, all over R⁵.
            let radial = s.mul_add_e_f32s(s.mul_f32s(e, inv2), minus_half5, s.mul_f32s(s.splat_f32s(c[3]), r2));
            cx = s.mul_add_e_f32s(s.mul_add_e_f32s(radial, dx, qx), inv5, cx);
            cy = s.mul_add_e_f32s(s.mul_add_e_f32s(radial, dy, qy), inv5, cy);
            cz = s.mul_add_e_f32s(s.mul_add_e_f32s(radial, dz, qz), inv5, cz);
        }
        let gv = s.splat_f32s(g);
        s.partial_store_f32s(&mut lane[0][..lanes], s.mul_f32s(gv, s.add_f32s(ax, cx)));
        s.partial_store_f32s(&mut lane[1][..lanes], s.mul_f32s(gv, s.add_f32s(ay, cy)));
        s.partial_store_f32s(&mut lane[2][..lanes], s.mul_f32s(gv, s.add_f32s(az, cz)));
        for (l, a) in out.iter_mut().enumerate() {
            *a = [lane[0][l], lane[1][l], lane[2][l]];
        }
    }
}
