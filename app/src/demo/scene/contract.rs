//! The frame's contract with its backend, checked on the CPU with the recording test backend
//! ([`TestBackend::recording`]): each
//! frame simulates (or in step mode takes one step of the workflow) before it draws, the body
//! draw sits between `before_draw` and `after_draw`, no draw touches the buffers while step mode
//! has them mapped, and the backend's GL objects are released at the end, after the last draw.
//! In every mode of the scene: headless, windowed (the timer read a frame later), paused, step
//! mode.

use super::test_backend::{Log, TestBackend};
use super::tests::{args, scene};
use crate::backend::step::WorkflowStep;
use crate::demo::headless::headless_input;

/// The modes of the scene.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// A headless run: the GL timer read at once.
    Headless,
    /// A window's frames: the GL timer read a frame later.
    Windowed,
    /// Paused (space): frames take no step.
    Paused,
    /// Step mode: one step of the interop workflow a frame (headless: every frame).
    Stepping,
}

/// `frames` frames of a scene in `mode` (`--steps-per-frame 3`) on the recording backend, then
/// its end; the calls made.
fn record(mode: Mode, frames: usize) -> Vec<String> {
    let a = args(if mode == Mode::Stepping { &["--step-mode"] } else { &["--steps-per-frame", "3"] });
    let (step_mode, windowed) = (mode == Mode::Stepping, mode == Mode::Windowed);
    let (mut s, t, ctx) = scene(&a);
    let log = Log::default();
    s.drop_backend();
    s.sim.backend = Some(Box::new(TestBackend::recording(log.clone())));
    if step_mode {
        s.set_step_mode(true);
        assert!(s.hud.overlay.workflow.step_mode, "the recording backend has a step mode");
    }
    if mode == Mode::Paused {
        s.pause();
    }
    for _ in 0..frames {
        let [w, h] = t.size();
        s.frame(headless_input(w, h, s.time(), s.ui_zoom_for(h, 1.0)), t, 1.0, !windowed).expect("frame");
        log.borrow_mut().push("—".into());
    }
    s.destroy();
    drop(s);
    drop(ctx);
    let calls = log.borrow().clone();
    calls
}

/// One frame's calls: simulate, then the draw between its two hooks.
fn plain_frame(steps: u32) -> Vec<String> {
    [format!("simulate {steps}"), "before_draw".into(), "draw".into(), "after_draw".into(), "—".into()].into()
}

#[test]
fn headless_and_windowed_frames_simulate_then_draw_between_the_hooks_then_release() {
    for mode in [Mode::Headless, Mode::Windowed] {
        let calls = record(mode, 2);
        let mut want = [plain_frame(3), plain_frame(3)].concat();
        want.push("release".into());
        assert_eq!(calls, want, "{mode:?}");
    }
}

#[test]
fn a_paused_frame_simulates_no_step_and_still_draws() {
    let calls = record(Mode::Paused, 2);
    let mut want = [plain_frame(0), plain_frame(0)].concat();
    want.push("release".into());
    assert_eq!(calls, want);
}

#[test]
fn step_mode_never_draws_while_the_buffers_are_mapped() {
    let calls = record(Mode::Stepping, 6);
    let drawn = |step: &str| vec![step.to_string(), "before_draw".into(), "draw".into(), "after_draw".into(), "—".into()];
    let hidden = |step: &str| vec![step.to_string(), "—".into()];
    let mut want = [
        hidden(WorkflowStep::Map.label()),
        hidden(WorkflowStep::GetPointers.label()),
        hidden(WorkflowStep::Launch.label()),
        drawn(WorkflowStep::Unmap.label()),
        drawn(WorkflowStep::Draw.label()),
        hidden(WorkflowStep::Map.label()),
    ]
    .concat();
    want.push("release".into());
    assert_eq!(calls, want);
}
