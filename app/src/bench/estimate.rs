//! The cpu mode's frame-time estimate, which decides the N it skips (`--cpu-budget-ms`): the
//! all-pairs sum timed on this machine ([`calibrate`]), scaled by N² and the steps per frame,
//! plus the rest of a frame (upload, draw, `glFinish`) from a probe frame ([`probe_rest`]),
//! scaled by N.
//!
//! Both are measured here, not taken from a nominal rate, and neither is scaled from a size
//! where fixed costs (the thread pool's wake-up, the GL calls) hide the work: the sum is timed at
//! the first size from [`CALIBRATION_FIRST_N`] (doubling) where a step takes at least
//! [`CALIBRATION_MIN_MS`], the best of three steps.

use std::time::Instant;

use super::modes::Gfx;
use super::plan::Plan;
use crate::backend::cpu::CpuBackend;
use crate::backend::LongSteps as _;
use crate::cli::{BenchMode, Precision};
use crate::stop::{stopped, stopped_in_step};
use sim::cpu::{Cpu, Float};
use sim::init::initial_bodies;
use sim::tree::{step_terms, Solver};
use sim::{Bodies, PhysParams};

/// The calibration's first body count, doubled until a step takes [`CALIBRATION_MIN_MS`].
pub(super) const CALIBRATION_FIRST_N: usize = 1024;
/// The calibration's largest body count (a step of it takes about 1 s on 2 cores in a release
/// build: every machine reaches [`CALIBRATION_MIN_MS`] before it).
pub(super) const CALIBRATION_MAX_N: usize = 65536;
/// A calibration step takes at least this long (ms) at the size it measures, so the fixed cost
/// of a step (waking the threads: tens of µs) is a small part of it: 50–200 ms, as the size
/// doubles from below 50 ms.
pub(super) const CALIBRATION_MIN_MS: f64 = 50.0;
/// The most bodies of the probe frame that times the rest of a frame (upload, draw): a prefix of
/// this many of the run's initial condition, at most the calibration's size (so a probe frame
/// takes at most about as long as a calibration step).
pub(super) const CPU_PROBE_MAX_N: usize = 8192;

/// What the cpu mode's frame time is estimated from, measured on this machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CpuEstimate {
    /// All-pairs interactions per second of the CPU backend's SIMD sum: N² over the fastest of
    /// three steps of `calibrated_n` bodies.
    pub(super) rate: f64,
    /// The body count the rate was measured at.
    pub(super) calibrated_n: usize,
    /// The rest of the fastest probe frame (frame time less its step: upload, draw,
    /// `glFinish`), ms.
    pub(super) rest_ms: f64,
    /// The body count of the probe frame.
    pub(super) probe_n: usize,
}

impl CpuEstimate {
    /// Estimated frame time of `mode` (`cpu`, `cpu-tree` at opening angle `theta`, or `draw`)
    /// with `n` bodies at `steps` steps per frame, ms: the solver's cost in all-pairs
    /// interactions ([`step_terms`]: N² for the direct sum) at the calibrated rate, plus the
    /// probe's rest scaled by N; `draw` the rest alone. `None` for the CUDA modes.
    pub(super) fn mode_ms(&self, mode: BenchMode, n: usize, steps: u32, theta: f32) -> Option<f64> {
        let solver = match mode {
            BenchMode::Cpu => Solver::Direct,
            BenchMode::CpuTree => Solver::Tree { theta },
            BenchMode::Draw => return Some(self.rest_ms * (n as f64 / self.probe_n.max(1) as f64).max(1.0)),
            _ => return None,
        };
        let terms = step_terms(solver, n, false);
        Some(f64::from(steps) * terms / self.rate * 1e3 + self.rest_ms * (n as f64 / self.probe_n.max(1) as f64).max(1.0))
    }

    /// The estimate in words, for the run's log.
    pub(super) fn describe(&self) -> String {
        format!(
            "the all-pairs sum runs {:.3e} interactions/s here (best of 3 steps of {} bodies), the upload and draw of {} \
             bodies take {} ms",
            self.rate,
            self.calibrated_n,
            self.probe_n,
            ms_text(self.rest_ms)
        )
    }
}

/// A time in ms for messages: 2 decimals below 10, whole ms up to a million, then in e-notation.
pub(super) fn ms_text(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.2}")
    } else if ms < 1e6 {
        format!("{ms:.0}")
    } else {
        format!("{ms:.2e}")
    }
}

/// Times the CPU backend's all-pairs sum in `precision` ([`Cpu`], one step at a time, a Plummer
/// sphere of `seed`): from [`CALIBRATION_FIRST_N`] bodies, doubled (up to [`CALIBRATION_MAX_N`])
/// until a step takes [`CALIBRATION_MIN_MS`], then the fastest of three steps at that size.
/// Returns (interactions/s, the size), or `None` when an interrupt arrived (checked inside each
/// step).
///
/// # Errors
/// The initial condition cannot be made.
pub(super) fn calibrate(seed: u64, precision: Precision) -> anyhow::Result<Option<(f64, usize)>> {
    match precision {
        Precision::F32 => calibrate_in::<f32>(seed),
        Precision::F64 => calibrate_in::<f64>(seed),
    }
}

/// [`calibrate`] in `T`.
fn calibrate_in<T: Float>(seed: u64) -> anyhow::Result<Option<(f64, usize)>> {
    let params = PhysParams::default();
    let mut n = CALIBRATION_FIRST_N;
    loop {
        let bodies = initial_bodies(crate::cli::BENCH_INIT, n, seed, params.g)?;
        let mut sim = Cpu::<T>::new(&bodies, params);
        sim.set_interrupt(Some(stopped_in_step));
        let mut step_ms = || -> Option<f64> {
            let t = Instant::now();
            (sim.step(1) == 1 && !stopped()).then(|| t.elapsed().as_secs_f64() * 1e3)
        };
        let Some(first) = step_ms() else { return Ok(None) };
        if first < CALIBRATION_MIN_MS && n < CALIBRATION_MAX_N {
            n *= 2;
            continue;
        }
        let mut best = first;
        for _ in 0..2 {
            let Some(t) = step_ms() else { return Ok(None) };
            best = best.min(t);
        }
        let interactions = n as f64 * n as f64;
        return Ok(Some((interactions / (best.max(1e-6) * 1e-3), n)));
    }
}

/// The rest of a cpu frame, ms: after one untimed frame, the fastest of three frames of `bodies`
/// (one step each) less their step time. `None` when an interrupt arrived.
///
/// # Errors
/// The GL side fails.
pub(super) fn probe_rest(plan: &Plan, gfx: &mut Gfx, bodies: &Bodies) -> anyhow::Result<Option<f64>> {
    gfx.load(bodies)?;
    let mut backend = CpuBackend::new(bodies, plan.params);
    backend.set_interrupt(stopped_in_step);
    let span = plan.params.dt;
    gfx.frame(&mut backend, 1, span)?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        if stopped() {
            return Ok(None);
        }
        let p = gfx.frame(&mut backend, 1, span)?;
        let step_ms = p.sim.kernel_ms.unwrap_or(0.0).clamp(0.0, p.frame_ms);
        best = best.min(p.frame_ms - step_ms);
    }
    Ok((!stopped()).then_some(best))
}

/// The cpu mode's estimate for a run of `plan`: [`calibrate`], then [`probe_rest`] on a prefix of
/// at most [`CPU_PROBE_MAX_N`] bodies (and at most the calibration's size, and the largest N) of
/// `init` (`--init`; a file or figure-eight gives what it holds). `None` when an interrupt arrived.
///
/// # Errors
/// The initial condition cannot be made; the GL side fails.
pub(super) fn estimate(plan: &Plan, gfx: &mut Gfx, init: &str, seed: u64, precision: Precision) -> anyhow::Result<Option<CpuEstimate>> {
    let Some((rate, calibrated_n)) = calibrate(seed, precision)? else { return Ok(None) };
    let largest = plan.bodies.iter().copied().max().unwrap_or(1);
    let k = largest.min(calibrated_n).clamp(1, CPU_PROBE_MAX_N);
    let mut bodies = initial_bodies(init, k, seed, plan.params.g)?;
    bodies.pos.truncate(k);
    bodies.vel.truncate(k);
    let probe_n = bodies.pos.len();
    let Some(rest_ms) = probe_rest(plan, gfx, &bodies)? else { return Ok(None) };
    Ok(Some(CpuEstimate { rate, calibrated_n, rest_ms, probe_n }))
}

/// How long a default run without a GPU may take by the estimate (s): the (mode, N) pairs beyond
/// it are left out, smallest N first kept.
pub(super) const DEFAULT_RUN_S: f64 = 180.0;

/// A (mode, N) the estimate leaves out, and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Skip {
    /// The mode.
    pub(super) mode: BenchMode,
    /// The body count.
    pub(super) n: usize,
    /// Why, for the log and `bench.json`'s `skipped`.
    pub(super) reason: String,
}

/// The (mode, N) of the CPU and GL modes in `modes` the estimate rules out, and the seconds the
/// rest will take: a cpu or cpu-tree frame over `budget_ms` (`--cpu-budget-ms`), and with
/// `run_budget_s` (a default run without a GPU) every pair that would take the run past it,
/// N ascending. `frames` is the frames a pair runs (warm-up included); `theta` the cpu-tree's θ.
pub(super) fn plan_skips(
    est: &CpuEstimate,
    modes: &[BenchMode],
    bodies: &[usize],
    (steps, frames, theta): (u32, u64, f32),
    budget_ms: f64,
    run_budget_s: Option<f64>,
) -> (Vec<Skip>, f64) {
    let mut skips = Vec::new();
    let mut total_s = 0.0;
    for &n in bodies {
        for &mode in modes {
            let Some(ms) = est.mode_ms(mode, n, steps, theta) else { continue };
            let solver = if mode == BenchMode::CpuTree { "the tree's terms" } else { "the all-pairs sum" };
            let pair_s = ms * frames as f64 * 1e-3;
            let reason = if mode.is_cpu() && ms > budget_ms {
                Some(format!(
                    "estimated {} ms per frame ({steps} step(s) of {solver} at {:.3e} interactions/s, timed here) exceeds \
                     --cpu-budget-ms {budget_ms}",
                    ms_text(ms),
                    est.rate,
                ))
            } else if run_budget_s.is_some_and(|b| total_s + pair_s > b) {
                Some(format!(
                    "estimated {pair_s:.0} s for its {frames} frames would take this default run past {:.0} s (no GPU \
                     here): give --bodies (and --modes) to measure it",
                    run_budget_s.unwrap_or_default()
                ))
            } else {
                None
            };
            match reason {
                Some(reason) => skips.push(Skip { mode, n, reason }),
                None => total_s += pair_s,
            }
        }
    }
    (skips, total_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A default run keeps the smallest N of each mode within its budget; a frame over the
    /// cpu budget is skipped whatever the run's.
    #[test]
    fn the_plan_keeps_small_n_within_the_budgets() {
        // 1e9 interactions/s, 1 ms of rest at 1000 bodies; 100 frames a pair.
        let e = CpuEstimate { rate: 1e9, calibrated_n: 16384, rest_ms: 1.0, probe_n: 1000 };
        let modes = [BenchMode::Draw, BenchMode::Cpu];
        // cpu at 1000: 2 ms (0.2 s), at 10000: 110 ms (11 s), at 100000: 10.1 s a frame.
        let (skips, total) = plan_skips(&e, &modes, &[1000, 10_000, 100_000], (1, 100, 0.5), 2000.0, Some(5.0));
        let left: Vec<(BenchMode, usize)> = skips.iter().map(|s| (s.mode, s.n)).collect();
        assert_eq!(left, [(BenchMode::Cpu, 10_000), (BenchMode::Draw, 100_000), (BenchMode::Cpu, 100_000)]);
        assert!(skips[2].reason.contains("--cpu-budget-ms"), "{:?}", skips[2]);
        assert!(skips[0].reason.contains("default run"), "{:?}", skips[0]);
        // draw 0.1 + cpu 0.2 + draw (10000) 1.0 s.
        assert!((total - 1.3).abs() < 1e-9, "{total}");
        let (skips, _) = plan_skips(&e, &modes, &[1000, 10_000, 100_000], (1, 100, 0.5), 2000.0, None);
        assert_eq!(skips.len(), 1);
    }

    /// The estimate scales the sum by N² and the steps, the rest by N from the probe's size up.
    #[test]
    fn the_estimate_scales_by_n_squared_and_steps() {
        // 1e9 interactions/s: 1e6 interactions take 1 ms.
        let e = CpuEstimate { rate: 1e9, calibrated_n: 16384, rest_ms: 2.0, probe_n: 1000 };
        assert!((e.mode_ms(BenchMode::Cpu, 1000, 1, 0.5).unwrap() - 3.0).abs() < 1e-9);
        assert!((e.mode_ms(BenchMode::Cpu, 2000, 1, 0.5).unwrap() - (4.0 + 4.0)).abs() < 1e-9);
        assert!((e.mode_ms(BenchMode::Cpu, 1000, 10, 0.5).unwrap() - (10.0 + 2.0)).abs() < 1e-9);
        // Below the probe's size the rest is the probe's own, not less.
        assert!((e.mode_ms(BenchMode::Cpu, 10, 1, 0.5).unwrap() - (1e-4 + 2.0)).abs() < 1e-9);
        // A billion steps per frame is estimated as such (and skipped by any budget), not run.
        assert!(e.mode_ms(BenchMode::Cpu, 64, 1_000_000_000, 0.5).unwrap() > 1e6);
        assert_eq!(ms_text(e.mode_ms(BenchMode::Cpu, 64, 1_000_000_000, 0.5).unwrap()), "4.10e6");
    }

    /// The calibration settles on a size whose first step took at least 50 ms (or the largest),
    /// and its rate is a plausible one for a CPU: between 1e5 and 1e13 interactions/s (a debug
    /// build on a loaded machine, a release build on a large one). The best of the three steps
    /// may be faster than the first: a fifth of the minimum is the bound, for a noisy machine.
    #[test]
    fn the_calibration_times_a_step_of_at_least_its_minimum() {
        let (rate, n) = calibrate(1, Precision::F32).expect("plummer").expect("no interrupt");
        assert!((CALIBRATION_FIRST_N..=CALIBRATION_MAX_N).contains(&n) && n.is_power_of_two(), "{n}");
        assert!((1e5..1e13).contains(&rate), "{rate}");
        let step_ms = n as f64 * n as f64 / rate * 1e3;
        assert!(step_ms >= CALIBRATION_MIN_MS / 5.0 || n == CALIBRATION_MAX_N, "{n} bodies: {step_ms} ms");
    }
}
