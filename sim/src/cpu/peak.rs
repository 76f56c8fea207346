//! The FMA peak of one core, against which the bench puts the direct sum's rate: measured by a
//! loop of independent fused multiply-adds on the instruction set the force loops run on, beside
//! the nominal figure from the clock `/proc/cpuinfo` gives.

use std::time::Instant;

use pulp::{Simd, WithSimd};

/// Independent FMA chains of the loop: enough to hide an FMA's latency (4 cycles) on two pipes.
const CHAINS: usize = 12;
/// FMAs per chain and repetition (a repetition takes about 7 ms at 100 GFLOP/s with 16 lanes).
const ITERS: usize = 1 << 21;

/// One core's FMA throughput and what it is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaPeak {
    /// The instruction set `pulp` dispatches to here: `avx512`, `avx2` or `scalar`.
    pub isa: &'static str,
    /// f32 lanes of a vector on it (16, 8 or 1).
    pub lanes: usize,
    /// `cpu MHz` of `/proc/cpuinfo` (its first processor); `None` where it is not readable.
    pub mhz: Option<f64>,
    /// f32 GFLOP/s of one thread running 12 independent chains of vector FMAs, 2 flops
    /// per lane and FMA, the best of 5 runs: the FMA peak the direct sum's fraction is of.
    pub gflops: f64,
}

impl FmaPeak {
    /// f32 flops per cycle at the `/proc/cpuinfo` clock (`gflops` over the clock): 2 × FMA
    /// pipes × lanes a pipe takes per cycle where the core runs at that clock (32 for two 256-bit
    /// pipes).
    pub fn flops_per_cycle(&self) -> Option<f64> {
        self.mhz.map(|m| self.gflops * 1e3 / m)
    }
}

/// Measures one core's FMA peak on the calling thread (about 50 ms).
pub fn measure() -> FmaPeak {
    let (isa, lanes) = (crate::tree::isa(), pulp::Arch::new().dispatch(Lanes));
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = Instant::now();
        let sink = pulp::Arch::new().dispatch(Chains);
        let s = t.elapsed().as_secs_f64();
        // The result is used, so the loop is not optimised away.
        if sink.is_finite() && s > 0.0 {
            best = best.max((2 * CHAINS * ITERS * lanes) as f64 / s * 1e-9);
        }
    }
    FmaPeak { isa, lanes, mhz: cpuinfo_mhz(), gflops: best }
}

/// The `cpu MHz` of the first processor in `/proc/cpuinfo`.
pub fn cpuinfo_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find(|l| l.starts_with("cpu MHz")).and_then(|l| l.split(':').nth(1)).and_then(|v| v.trim().parse().ok())
}

/// The f32 lane count of the dispatched instruction set.
struct Lanes;

impl WithSimd for Lanes {
    type Output = usize;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> usize {
        S::F32_LANES
    }
}

/// [`CHAINS`] chains of [`ITERS`] FMAs each, `x ← x · a + b` (a fixed point near 1, so the
/// values stay normal), summed at the end.
struct Chains;

impl WithSimd for Chains {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) -> f32 {
        // Opaque to the optimiser, so the chains are computed, not folded.
        let (a, b) = (s.splat_f32s(std::hint::black_box(0.999_9)), s.splat_f32s(std::hint::black_box(1e-4)));
        let mut x = [s.splat_f32s(std::hint::black_box(1.0)); CHAINS];
        for _ in 0..ITERS {
            for v in &mut x {
                *v = s.mul_add_e_f32s(*v, a, b);
            }
        }
        let mut sum = s.splat_f32s(0.0);
        for v in x {
            sum = s.add_f32s(sum, v);
        }
        s.reduce_sum_f32s(sum)
    }
}

#[cfg(test)]
mod tests {
    /// The peak is a positive rate of at least one flop per lane a nanosecond; the clock, where
    /// known, is a plausible one.
    #[test]
    fn the_peak_is_measured() {
        let p = super::measure();
        assert!(p.gflops >= 1e-3 * p.lanes as f64, "{p:?}");
        assert!(p.mhz.is_none_or(|m| (100.0..10_000.0).contains(&m)), "{p:?}");
    }
}
