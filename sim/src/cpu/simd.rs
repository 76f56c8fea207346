//! The direct sum's force loop in explicit SIMD (`pulp`, dispatched at run time: AVX-512 or
//! AVX2 + FMA, whichever the CPU has), for f32 and f64: one vector of bodies `i` against every
//! source `j`.

use pulp::{Simd, WithSimd};

use super::{Real, Sources, SUM_TILE};

/// The widest SIMD lane count [`Accelerations`] supports (AVX-512's 16 f32 lanes).
pub(super) const MAX_LANES: usize = 16;

/// pulp's vector operations by element type: what the direct sum's force loop needs, for
/// `f32` and `f64` (each an IEEE operation per lane).
pub trait Lane: Real {
    /// A vector of `Self` on the instruction set `S`.
    type V<S: Simd>: Copy;
    /// Lanes of `S` (the force loop uses at most 16).
    fn v_lanes<S: Simd>() -> usize;
    /// `x` in every lane.
    fn v_splat<S: Simd>(s: S, x: Self) -> Self::V<S>;
    /// `a + b`.
    fn v_add<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// `a − b`.
    fn v_sub<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// `a × b` (not fused with an addition).
    fn v_mul<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// `a / b`, correctly rounded.
    fn v_div<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// The square root, correctly rounded.
    fn v_sqrt<S: Simd>(s: S, a: Self::V<S>) -> Self::V<S>;
    /// The smaller per lane; `b` where `a` is NaN (x86's `minps`/`minpd`, IEEE minNum here).
    fn v_min<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// `x` where `r > 0`, else `0`.
    fn v_where_positive<S: Simd>(s: S, r: Self::V<S>, x: Self::V<S>) -> Self::V<S>;
    /// The first lanes from `from` (as many as it holds, at most the lane count), 0 in the rest.
    fn v_load<S: Simd>(s: S, from: &[Self]) -> Self::V<S>;
    /// The first lanes of `v` into `to` (as many as it holds).
    fn v_store<S: Simd>(s: S, to: &mut [Self], v: Self::V<S>);
}

macro_rules! lane {
    ($t:ty, $v:ident, $lanes:ident, $splat:ident, $add:ident, $sub:ident, $mul:ident, $div:ident, $sqrt:ident, $min:ident, $gt:ident,
     $select:ident, $load:ident, $store:ident) => {
        impl Lane for $t {
            type V<S: Simd> = S::$v;
            #[inline(always)]
            fn v_lanes<S: Simd>() -> usize {
                S::$lanes
            }
            #[inline(always)]
            fn v_splat<S: Simd>(s: S, x: Self) -> S::$v {
                s.$splat(x)
            }
            #[inline(always)]
            fn v_add<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$add(a, b)
            }
            #[inline(always)]
            fn v_sub<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$sub(a, b)
            }
            #[inline(always)]
            fn v_mul<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$mul(a, b)
            }
            #[inline(always)]
            fn v_div<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$div(a, b)
            }
            #[inline(always)]
            fn v_sqrt<S: Simd>(s: S, a: S::$v) -> S::$v {
                s.$sqrt(a)
            }
            #[inline(always)]
            fn v_min<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$min(a, b)
            }
            #[inline(always)]
            fn v_where_positive<S: Simd>(s: S, r: S::$v, x: S::$v) -> S::$v {
                let zero = s.$splat(0.0);
                s.$select(s.$gt(r, zero), x, zero)
            }
            #[inline(always)]
            fn v_load<S: Simd>(s: S, from: &[Self]) -> S::$v {
                s.$load(from)
            }
            #[inline(always)]
            fn v_store<S: Simd>(s: S, to: &mut [Self], v: S::$v) {
                s.$store(to, v)
            }
        }
    };
}

lane!(
    f32,
    f32s,
    F32_LANES,
    splat_f32s,
    add_f32s,
    sub_f32s,
    mul_f32s,
    div_f32s,
    sqrt_f32s,
    min_f32s,
    greater_than_f32s,
    select_f32s,
    partial_load_f32s,
    partial_store_f32s
);
lane!(
    f64,
    f64s,
    F64_LANES,
    splat_f64s,
    add_f64s,
    sub_f64s,
    mul_f64s,
    div_f64s,
    sqrt_f64s,
    min_f64s,
    greater_than_f64s,
    select_f64s,
    partial_load_f64s,
    partial_store_f64s
);

/// [`super::accelerations_range`] in explicit SIMD: one `pulp` vector of bodies `i`, each source
/// `j` broadcast to every lane. The same operations per lane as the scalar loop (see the module
/// docs), so the results are the same bits.
pub(super) struct Accelerations<'a, T> {
    pub(super) src: &'a Sources<T>,
    pub(super) g: T,
    pub(super) eps2: T,
    pub(super) first: usize,
    /// `[len][3]` accelerations of bodies `first .. first + len`.
    pub(super) out: &'a mut [[T; 3]],
}

impl<T: Lane> WithSimd for Accelerations<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self { src, g, eps2, first, out } = self;
        let lanes = T::v_lanes::<S>().min(MAX_LANES);
        let n = src.len();
        let (zero, big, eps2v) = (T::v_splat(simd, T::ZERO), T::v_splat(simd, T::MAX), T::v_splat(simd, eps2));
        for (b, block) in out.chunks_mut(lanes).enumerate() {
            let i0 = first + b * lanes;
            let last = i0 + block.len() - 1;
            let (mut xs, mut ys, mut zs) = ([T::ZERO; MAX_LANES], [T::ZERO; MAX_LANES], [T::ZERO; MAX_LANES]);
            for l in 0..lanes {
                // Lanes past the end of a short block repeat the last body; their results are dropped.
                let i = (i0 + l).min(last);
                (xs[l], ys[l], zs[l]) = (src.x[i], src.y[i], src.z[i]);
            }
            let xi = T::v_load(simd, &xs[..lanes]);
            let yi = T::v_load(simd, &ys[..lanes]);
            let zi = T::v_load(simd, &zs[..lanes]);
            let (mut ax, mut ay, mut az) = (zero, zero, zero);
            // Tile by tile, each tile summed from zero, as the scalar loop (`SUM_TILE`).
            for j0 in (0..n).step_by(SUM_TILE) {
                let j1 = (j0 + SUM_TILE).min(n);
                let (mut tx, mut ty, mut tz) = (zero, zero, zero);
                let sources = src.x[j0..j1].iter().zip(&src.y[j0..j1]).zip(&src.z[j0..j1]).zip(&src.m[j0..j1]);
                for (((&xj, &yj), &zj), &mj) in sources {
                    let dx = T::v_sub(simd, T::v_splat(simd, xj), xi);
                    let dy = T::v_sub(simd, T::v_splat(simd, yj), yi);
                    let dz = T::v_sub(simd, T::v_splat(simd, zj), zi);
                    let r2 =
                        T::v_add(simd, T::v_add(simd, T::v_add(simd, T::v_mul(simd, dx, dx), T::v_mul(simd, dy, dy)), T::v_mul(simd, dz, dz)), eps2v);
                    // As the scalar loop: m/r³ capped at MAX (min returns MAX for a NaN quotient,
                    // as IEEE minNum does), and 0 where r² + ε² = 0.
                    let s = T::v_div(simd, T::v_splat(simd, mj), T::v_mul(simd, r2, T::v_sqrt(simd, r2)));
                    let s = T::v_where_positive(simd, r2, T::v_min(simd, s, big));
                    tx = T::v_add(simd, tx, T::v_mul(simd, dx, s));
                    ty = T::v_add(simd, ty, T::v_mul(simd, dy, s));
                    tz = T::v_add(simd, tz, T::v_mul(simd, dz, s));
                }
                ax = T::v_add(simd, ax, tx);
                ay = T::v_add(simd, ay, ty);
                az = T::v_add(simd, az, tz);
            }
            T::v_store(simd, &mut xs[..lanes], ax);
            T::v_store(simd, &mut ys[..lanes], ay);
            T::v_store(simd, &mut zs[..lanes], az);
            for (l, a) in block.iter_mut().enumerate() {
                *a = [g * xs[l], g * ys[l], g * zs[l]];
            }
        }
    }
}
