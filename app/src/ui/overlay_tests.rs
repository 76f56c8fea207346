//! Tests of the overlay's pure parts: the simulated-time rate and the step-in-progress banner.

use super::*;
use crate::backend::StepProgress;

/// Simulated time per wall second: over the frames kept, not the last one alone.
#[test]
fn sim_time_per_wall_second_is_over_the_last_frames() {
    let mut r = SimTimeRate::default();
    assert_eq!(r.rate(), None);
    r.push(34, 0.001, 0.0);
    assert_eq!(r.rate(), None, "the first frame has no period");
    // 33 steps of 0.001 in 15 ms, then 34 in 21 ms: 0.067 time units in 36 ms.
    r.push(33, 0.001, 15.0);
    r.push(34, 0.001, 21.0);
    let got = r.rate().expect("a rate");
    assert!((got - 0.067 / 0.036).abs() < 1e-4, "{got}");
    for _ in 0..SIM_TIME_FRAMES {
        r.push(20, 0.001, 10.0);
    }
    assert!((r.rate().expect("a rate") - 2.0).abs() < 1e-4, "only the last {SIM_TIME_FRAMES} frames count");
}

#[test]
fn the_step_in_progress_banner_says_how_far_the_step_is() {
    let mut t = SimTimings::default();
    assert_eq!(step_in_progress_text(&t, true), None);
    t.spread = Some(StepProgress { done: 3, of: 23 });
    let text = step_in_progress_text(&t, true).expect("a banner");
    assert!(text.starts_with("step in progress: 3 of 23 launches"), "{text}");
    assert!(step_in_progress_text(&t, false).is_some_and(|s| s.starts_with("step in progress: 3 of 23 parts")));
    // The frame that ran the last launch shows the new positions: no banner.
    t.spread = Some(StepProgress { done: 23, of: 23 });
    assert_eq!(step_in_progress_text(&t, true), None);
}
