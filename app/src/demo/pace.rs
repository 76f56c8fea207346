//! `--steps-per-frame auto`: as many leapfrog steps per shown frame as fit the frame interval, so
//! the interop hand-over (map/unmap, or the upload) and the draw are paid once per shown frame
//! rather than once per step.
//!
//! The controller measures the work of each frame (simulate + UI + draw + paint, not the wait for
//! vsync) and scales the step count by `budget / work`, where the budget is
//! [`BUDGET_SHARE`] of the frame interval (the display's refresh interval with vsync, else
//! `1 / --target-fps`). With work = a + b·steps (a: the per-frame cost, b: one step) the fixed
//! point is a + b·steps = budget. Each update changes the count by at most a factor of
//! [`MAX_CHANGE`], and the time per step it works from is the median of the last [`WINDOW`]
//! frames, so one slow frame (a diagnostics sample, a resize) does not change the rate. The count
//! stays in `1 ..= `[`MAX_STEPS`].

/// Share of the frame interval the work may fill (the rest absorbs jitter).
pub const BUDGET_SHARE: f64 = 0.9;
/// Largest factor by which one update may change the step count.
pub const MAX_CHANGE: f64 = 2.0;
/// Upper bound of the step count.
pub const MAX_STEPS: u32 = 1 << 20;
/// Frames whose median time per step sets the next count.
pub const WINDOW: usize = 5;

/// The step-count controller of `--steps-per-frame auto`. The count itself lives with the caller
/// (the overlay shows and may fix it); the controller keeps the recent per-step times.
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    /// Frame interval to fill, ms.
    interval_ms: f64,
    /// Work time per step of the last [`WINDOW`] frames, ms, oldest first.
    per_step_ms: std::collections::VecDeque<f64>,
}

impl Pace {
    /// A controller for frames of `interval_ms` (e.g. 16.67 for 60 Hz), starting at 1 step.
    pub fn new(interval_ms: f64) -> Self {
        Pace { interval_ms: interval_ms.max(1e-3), per_step_ms: std::collections::VecDeque::with_capacity(WINDOW) }
    }

    /// Fill frames of `interval_ms` from now on (the display's refresh interval, found once the
    /// window exists).
    pub fn set_interval_ms(&mut self, interval_ms: f64) {
        self.interval_ms = interval_ms.max(1e-3);
    }

    /// The frame interval the controller fills, ms.
    pub fn interval_ms(&self) -> f64 {
        self.interval_ms
    }

    /// Take the measured work time (ms) of a frame that ran `ran` steps and return the count for
    /// the next frame, from the `current` one. A frame with no steps (paused) or a non-finite
    /// time leaves `current` as it is.
    pub fn next(&mut self, current: u32, ran: u32, work_ms: f64) -> u32 {
        let current = current.max(1);
        if ran == 0 || !work_ms.is_finite() || work_ms <= 0.0 {
            return current;
        }
        if self.per_step_ms.len() == WINDOW {
            self.per_step_ms.pop_front();
        }
        self.per_step_ms.push_back(work_ms / f64::from(ran));
        let mut sorted: Vec<f64> = self.per_step_ms.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let per_step = sorted[sorted.len() / 2];
        let budget = BUDGET_SHARE * self.interval_ms;
        let factor = (budget / (per_step * f64::from(current))).clamp(1.0 / MAX_CHANGE, MAX_CHANGE);
        (f64::from(current) * factor).floor().clamp(1.0, f64::from(MAX_STEPS)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work a + b·steps converges to the budget: steps → (0.9·T − a) / b.
    #[test]
    fn converges_to_the_budget() {
        let (a, b, t) = (0.8, 0.15, 1000.0 / 60.0);
        let (mut p, mut s) = (Pace::new(t), 1);
        for _ in 0..60 {
            s = p.next(s, s, a + b * f64::from(s));
        }
        let want = (BUDGET_SHARE * t - a) / b;
        let got = f64::from(s);
        assert!((got - want).abs() <= 0.05 * want + 1.0, "steps {got}, want ≈ {want:.1}");
    }

    /// Slower than the budget at one step: stays at one step.
    #[test]
    fn never_below_one_step() {
        let mut p = Pace::new(16.7);
        for _ in 0..10 {
            assert_eq!(p.next(1, 1, 500.0), 1);
        }
    }

    /// One slow frame (10× the others) leaves the count where it was.
    #[test]
    fn one_slow_frame_does_not_change_the_rate() {
        let (mut p, mut s) = (Pace::new(16.7), 1);
        for _ in 0..50 {
            s = p.next(s, s, 0.1 * f64::from(s));
        }
        let after = p.next(s, s, 10.0 * 0.1 * f64::from(s));
        assert!(after >= s, "{s} → {after}");
    }

    /// Paused frames and bad times change nothing.
    #[test]
    fn paused_and_bad_times_are_ignored() {
        let mut p = Pace::new(16.7);
        let s = p.next(1, 1, 1.0);
        assert_eq!(p.next(s, 0, 1.0), s);
        assert_eq!(p.next(s, s, f64::NAN), s);
        assert_eq!(p.next(s, s, 0.0), s);
    }
}
