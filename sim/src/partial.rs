//! Long steps in parts: the pure bookkeeping (no GL, no CUDA, no threads) of a leapfrog step whose
//! force evaluation runs as several parts over consecutive body ranges `i_begin..i_end`.
//!
//! Why: a step estimated longer than [`LONG_STEP_S`] is split into parts of about [`LAUNCH_S`]
//! (CUDA: one kernel launch each, `cuda::gpu_stepper::GpuStepper`; CPU: one range of tasks,
//! [`super::cpu::CpuF32`]) so that
//! - an interrupt (Ctrl-C, SIGTERM) is seen between two parts, and
//! - in the windowed demo the step runs *in parts over frames*: each frame runs one part and returns
//!   to the window system's event loop, so that closing the window is answered within a part.
//!
//! A part writes the new positions of its bodies into the back buffer and kicks their
//! velocities; the front buffer (the positions before the step) is read by every part and never
//! written, so GL may keep drawing it between frames. Positions flip (front ↔ back) only when
//! the last part is done ([`PartialStep::advance`] returns true). A step *abandoned* half-way
//! (an interrupt, a closed window, a parameter or settings change) restores the velocities of
//! before it (the CUDA stepper keeps a copy; the CPU applies no kick before the last part) and
//! the leapfrog phase [`PartialStep::leap_before`]: the state is exactly the one before the step.
//!
//! ```text
//! state                 front buffer        back buffer              velocities
//! none                  newest positions    older positions          at the leapfrog phase
//! PartialStep{next: k}  positions x_n       x_{n+1} for parts < k    kicked for parts < k
//! advance() → done      (flip) x_{n+1}      x_n                      all kicked
//! abandon               x_n                 (garbage, not shown)     restored
//! ```

use std::ops::Range;

use serde::Serialize;

use super::Leapfrog;

/// A step estimated longer than this (s) is split into parts of about [`LAUNCH_S`] so that a
/// stop request, or in the windowed demo the window system, is answered within about that time.
pub const LONG_STEP_S: f64 = 0.5;
/// Length (s) of one part (CUDA: one launch) of a split step.
pub const LAUNCH_S: f64 = 0.2;

/// Parts a step of `secs` estimated seconds over `n` bodies is split into: 1 when
/// `secs ≤ LONG_STEP_S`, else `ceil(secs / LAUNCH_S)`, at most one part per `min_bodies`
/// bodies (and at least 1).
pub fn parts_for(secs: f64, n: usize, min_bodies: usize) -> usize {
    if secs.is_nan() || secs <= LONG_STEP_S {
        return 1;
    }
    let most = n.div_ceil(min_bodies.max(1)).max(1);
    ((secs / LAUNCH_S).ceil() as usize).clamp(1, most)
}

/// The bodies of part `k` of `parts` over `n` bodies: `k·n/parts .. (k+1)·n/parts`
/// (consecutive, covering `0..n` exactly once).
pub fn part_range(n: usize, parts: usize, k: usize) -> Range<usize> {
    let parts = parts.max(1);
    k * n / parts..(k + 1) * n / parts
}

/// How far a split step has got: parts (CUDA: launches) done, of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StepProgress {
    /// Parts done.
    pub done: usize,
    /// Parts of the step.
    pub of: usize,
}

impl StepProgress {
    /// True while parts remain.
    pub fn in_progress(self) -> bool {
        self.done < self.of
    }
}

/// What one frame's call of a stepper did (the CUDA `GpuStepper::launch_frame`,
/// [`super::cpu::CpuF32::step_frame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameSteps {
    /// Whole steps completed (a step in parts counts in the call that runs its last part).
    pub done: u32,
    /// An interrupt stopped a step; its state was restored.
    pub stopped: bool,
    /// The call worked on a step in parts over frames: its parts done so far, of all
    /// ([`StepProgress::in_progress`]: the step goes on in the next call).
    pub parts: Option<StepProgress>,
}

/// A split step in progress (see the module docs): which part runs next, and what the step
/// needs to go on in a later frame or to be abandoned. Device pointers are never kept: each
/// frame takes them from its own mapping.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartialStep {
    /// Bodies N.
    n: usize,
    /// Parts of the step.
    parts: usize,
    /// Index of the next part to run (`parts` once all ran).
    next: usize,
    /// Drift of the step (the kernel's `dt_drift`).
    pub drift: f32,
    /// Kick of the step (dt/2 after a synchronisation, else dt).
    pub kick: f32,
    /// The leapfrog phase before the step, put back when it is abandoned.
    pub leap_before: Leapfrog,
    /// Index (0/1) of the buffer read by every part (the front before the step).
    pub front: usize,
}

impl PartialStep {
    /// Starts a step of `parts` parts over `n` bodies reading buffer `front`: takes the step's
    /// drift and kick from `leap` (which then says unsynchronised, as after the step).
    pub fn start(n: usize, parts: usize, front: usize, leap: &mut Leapfrog, dt: f32) -> PartialStep {
        let leap_before = *leap;
        let (drift, kick) = leap.next_step(dt);
        PartialStep { n, parts: parts.max(1), next: 0, drift, kick, leap_before, front }
    }

    /// The bodies of the next part, `None` once all ran.
    pub fn next_range(&self) -> Option<Range<usize>> {
        (self.next < self.parts).then(|| part_range(self.n, self.parts, self.next))
    }

    /// Marks the next part done; returns true when it was the last (the caller then flips the
    /// front buffer and drops the partial step).
    pub fn advance(&mut self) -> bool {
        self.next = (self.next + 1).min(self.parts);
        self.next == self.parts
    }

    /// Parts done, of all.
    pub fn progress(&self) -> StepProgress {
        StepProgress { done: self.next, of: self.parts }
    }

    /// Bodies N of the step.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Undoes the step's bookkeeping: `leap` goes back to [`PartialStep::leap_before`]. The
    /// caller restores the velocities (positions in the front buffer were never written).
    pub fn abandon(self, leap: &mut Leapfrog) {
        *leap = self.leap_before;
    }
}

/// Parts one `simulate` call of the windowed demo runs of a step in parts: one (about
/// [`LAUNCH_S`]), then the call returns; the frame calls it as often as its part budget says
/// (the demo's `PartBudget`) before it returns to the event loop.
pub const PARTS_PER_FRAME: usize = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_steps_are_one_part_long_ones_parts_of_launch_s() {
        assert_eq!(parts_for(0.0, 1 << 20, 1024), 1);
        assert_eq!(parts_for(LONG_STEP_S, 1 << 20, 1024), 1);
        assert_eq!(parts_for(f64::NAN, 1 << 20, 1024), 1);
        assert_eq!(parts_for(0.51, 1 << 20, 1024), 3, "0.51 s in parts of 0.2 s");
        assert_eq!(parts_for(10.0, 1 << 20, 1024), 50);
        // At most one part per `min_bodies` bodies.
        assert_eq!(parts_for(1e9, 4097, 1024), 5);
        assert_eq!(parts_for(1e9, 10, 1024), 1);
        assert_eq!(parts_for(1e9, 10, 0), 10, "min_bodies 0 counts as 1");
    }

    #[test]
    fn ranges_cover_every_body_once_in_order() {
        for (n, parts) in [(1usize, 1usize), (10, 3), (4097, 5), (16384, 16), (7, 7), (100, 1)] {
            let mut next = 0;
            for k in 0..parts {
                let r = part_range(n, parts, k);
                assert_eq!(r.start, next, "N={n} parts={parts} k={k}");
                assert!(r.end >= r.start);
                next = r.end;
            }
            assert_eq!(next, n, "N={n} parts={parts}");
        }
    }

    /// A step walks its parts in order, says how far it is, and flips only after the last.
    #[test]
    fn a_partial_step_runs_its_parts_then_completes() {
        let mut leap = Leapfrog { synchronized: true };
        let mut p = PartialStep::start(4097, 5, 1, &mut leap, 0.01);
        assert!(!leap.synchronized, "the phase is the one after the step while it runs");
        assert_eq!((p.drift, p.kick, p.front), (0.01, 0.005, 1), "first step after a sync: half kick");
        let mut seen = Vec::new();
        let mut frames = 0;
        loop {
            frames += 1;
            assert_eq!(p.progress(), StepProgress { done: frames - 1, of: 5 });
            assert!(p.progress().in_progress());
            let r = p.next_range().expect("a part remains");
            seen.push(r);
            if p.advance() {
                break;
            }
        }
        assert_eq!(frames, 5, "one part per frame: five frames");
        assert_eq!(p.next_range(), None);
        assert_eq!(p.progress(), StepProgress { done: 5, of: 5 });
        assert!(!p.progress().in_progress());
        assert!(p.advance(), "advancing past the end stays done");
        assert_eq!(p.progress().done, 5);
        assert_eq!(seen.first().map(|r| r.start), Some(0));
        assert_eq!(seen.last().map(|r| r.end), Some(4097));
        // The next step (not after a sync) kicks by dt.
        let q = PartialStep::start(4097, 5, 0, &mut leap, 0.01);
        assert_eq!(q.kick, 0.01);
    }

    /// Abandoning puts the leapfrog phase back, whatever part the step had reached.
    #[test]
    fn an_abandoned_step_restores_the_phase() {
        for before in [true, false] {
            for parts_done in 0..3 {
                let mut leap = Leapfrog { synchronized: before };
                let mut p = PartialStep::start(100, 3, 0, &mut leap, 0.1);
                for _ in 0..parts_done {
                    p.advance();
                }
                p.abandon(&mut leap);
                assert_eq!(leap, Leapfrog { synchronized: before });
            }
        }
    }
}
