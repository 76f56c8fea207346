//! The overlay's rates over its last frames: simulated time and whole steps per wall second.

use std::collections::VecDeque;

/// Frames over which the overlay's simulated time per wall second is measured.
pub const SIM_TIME_FRAMES: usize = 30;

/// Simulated time and steps per wall second over the last [`SIM_TIME_FRAMES`] frames: the sum of
/// their whole steps (× dt) over the sum of their start-to-start times (one frame jitters too
/// much to read; a step in parts over frames counts in the frame that completes it).
#[derive(Debug, Default)]
pub struct SimTimeRate {
    /// (simulated time units, wall ms, whole steps) of each frame, oldest first.
    frames: VecDeque<(f64, f64, u32)>,
}

impl SimTimeRate {
    /// Add a frame of `steps` steps of `dt` that came `host_frame_ms` after the one before
    /// (0 or less: the first frame, not counted).
    pub fn push(&mut self, steps: u32, dt: f32, host_frame_ms: f64) {
        if host_frame_ms > 0.0 && host_frame_ms.is_finite() {
            if self.frames.len() == SIM_TIME_FRAMES {
                self.frames.pop_front();
            }
            self.frames.push_back((f64::from(steps) * f64::from(dt), host_frame_ms, steps));
        }
    }

    /// Simulated time units per wall second over the frames kept; `None` before the first.
    pub fn rate(&self) -> Option<f64> {
        let (sim, wall_ms) = self.frames.iter().fold((0.0, 0.0), |(a, b), &(s, w, _)| (a + s, b + w));
        (wall_ms > 0.0).then(|| sim / (wall_ms * 1e-3))
    }

    /// Whole steps per wall second over the frames kept; `None` before the first.
    pub fn steps_rate(&self) -> Option<f64> {
        let (steps, wall_ms) = self.frames.iter().fold((0.0, 0.0), |(a, b), &(_, w, k)| (a + f64::from(k), b + w));
        (wall_ms > 0.0).then(|| steps / (wall_ms * 1e-3))
    }

    /// Forget the frames (a reset).
    pub fn clear(&mut self) {
        self.frames.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::SimTimeRate;

    /// A step in parts over ten frames of 300 ms (nine with no whole step, then the one that
    /// completes it): 1 step in 3 s, not the 3.3 steps/s that one step over one frame's time says.
    #[test]
    fn steps_per_second_count_whole_steps_over_all_frames() {
        let mut r = SimTimeRate::default();
        for k in 0..10 {
            r.push(u32::from(k == 9), 0.01, 300.0);
        }
        let steps = r.steps_rate().expect("a rate");
        assert!((steps - 1.0 / 3.0).abs() < 1e-9, "{steps} steps/s");
        let sim = r.rate().expect("a rate");
        assert!((sim - 0.01 / 3.0).abs() < 1e-9, "{sim} time units/s");
        assert_eq!(SimTimeRate::default().steps_rate(), None);
    }
}
