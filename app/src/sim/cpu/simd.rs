//! The f32 force loop in explicit SIMD (`pulp`, dispatched at run time: AVX2 + FMA where the CPU
//! has it): one vector of bodies `i` against every source `j`.

use pulp::{Simd, WithSimd};

use super::{Sources, SUM_TILE};

/// The widest SIMD lane count [`AccelerationsF32`] supports (AVX-512's 16 f32 lanes).
pub(super) const MAX_LANES: usize = 16;

/// [`super::accelerations_range`] for f32, in explicit SIMD: one `pulp` vector of bodies `i`, each source
/// `j` broadcast to every lane. The same operations per lane as the scalar loop (see the module
/// docs), so the results are the same bits.
pub(super) struct AccelerationsF32<'a> {
    pub(super) src: &'a Sources<f32>,
    pub(super) g: f32,
    pub(super) eps2: f32,
    pub(super) first: usize,
    /// `[len][3]` accelerations of bodies `first .. first + len`.
    pub(super) out: &'a mut [[f32; 3]],
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
            // Tile by tile, each tile summed from zero, as the scalar loop (`SUM_TILE`).
            for j0 in (0..n).step_by(SUM_TILE) {
                let j1 = (j0 + SUM_TILE).min(n);
                let (mut tx, mut ty, mut tz) = (zero, zero, zero);
                let sources = src.x[j0..j1].iter().zip(&src.y[j0..j1]).zip(&src.z[j0..j1]).zip(&src.m[j0..j1]);
                for (((&xj, &yj), &zj), &mj) in sources {
                    let dx = simd.sub_f32s(simd.splat_f32s(xj), xi);
                    let dy = simd.sub_f32s(simd.splat_f32s(yj), yi);
                    let dz = simd.sub_f32s(simd.splat_f32s(zj), zi);
                    let r2 = simd.add_f32s(
                        simd.add_f32s(simd.add_f32s(simd.mul_f32s(dx, dx), simd.mul_f32s(dy, dy)), simd.mul_f32s(dz, dz)),
                        eps2v,
                    );
                    // As the scalar loop: m/r³ capped at MAX (min returns MAX for a NaN quotient,
                    // as IEEE minNum does), and 0 where r² + ε² = 0.
                    let s = simd.div_f32s(simd.splat_f32s(mj), simd.mul_f32s(r2, simd.sqrt_f32s(r2)));
                    let s = simd.select_f32s(simd.greater_than_f32s(r2, zero), simd.min_f32s(s, big), zero);
                    tx = simd.add_f32s(tx, simd.mul_f32s(dx, s));
                    ty = simd.add_f32s(ty, simd.mul_f32s(dy, s));
                    tz = simd.add_f32s(tz, simd.mul_f32s(dz, s));
                }
                ax = simd.add_f32s(ax, tx);
                ay = simd.add_f32s(ay, ty);
                az = simd.add_f32s(az, tz);
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
