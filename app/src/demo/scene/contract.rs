//! The frame's contract with its backend, checked on the CPU with a recording backend: each
//! frame simulates (or in step mode takes one step of the workflow) before it draws, the body
//! draw sits between `before_draw` and `after_draw`, no draw touches the buffers while step mode
//! has them mapped, and the backend's GL objects are released at the end, after the last draw.
//! In every mode of the scene: headless, windowed (the timer read a frame later), paused, step
//! mode.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::tests::{args, scene};
use super::*;
use crate::backend::step::{Images, StepState, StepView, WorkflowStep};
use crate::backend::{CudaSide, PositionVbos, Readout, SettingsChange, Shown, Sides, SimTimings, State};
use crate::demo::headless::headless_input;

/// The calls the scene made, in order.
type Log = Rc<RefCell<Vec<String>>>;

/// A backend that does nothing but write down what it was asked, with a step mode that follows
/// the real state machine ([`StepState`]).
struct Recording {
    log: Log,
    step: Option<StepState>,
    /// Between `before_draw` and `after_draw`: the body draw is being issued.
    drawing: Cell<bool>,
}

impl Recording {
    fn note(&self, what: impl Into<String>) {
        self.log.borrow_mut().push(what.into());
    }
}

impl SimBackend for Recording {
    fn describe(&self) -> crate::backend::BackendInfo {
        crate::backend::BackendInfo {
            label: "recording".into(),
            n: 200,
            solver: sim::tree::Solver::Direct,
            rate: crate::backend::NominalRate { per_s: f64::INFINITY, basis: crate::backend::RateBasis::Nothing },
        }
    }
    fn simulate(&mut self, _: Gl<'_>, _: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.note(format!("simulate {steps}"));
        Ok(SimTimings { host_ms: 0.1, ..SimTimings::default() })
    }
    fn set_params(&mut self, _: Gl<'_>, _: PhysParams) {}
    fn shown(&self) -> Shown {
        // Asked between the hooks only by the render step, for the buffers it draws right then.
        if self.drawing.get() {
            self.note("draw");
        }
        Shown { front: 0, buffers: None }
    }
    fn before_draw(&mut self, _: Gl<'_>) {
        self.note("before_draw");
        self.drawing.set(true);
    }
    fn after_draw(&mut self, _: Gl<'_>) {
        self.note("after_draw");
        self.drawing.set(false);
    }
    fn release_gl(&mut self, _: Gl<'_>) {
        self.note("release");
    }
    fn state(&mut self, _: Gl<'_>, _: &PositionVbos, _: Readout) -> anyhow::Result<State> {
        anyhow::bail!("a recording backend holds no state")
    }
    fn sides(&mut self) -> Sides<'_> {
        Sides::Cuda(self)
    }
}

impl CudaSide for Recording {
    fn settings(&self) -> Option<crate::backend::InteropSettings> {
        None
    }
    fn apply_settings(&mut self, _: Gl<'_>, _: &PositionVbos, _: crate::backend::InteropSettings) -> anyhow::Result<SettingsChange> {
        Ok(SettingsChange::Applied)
    }
    fn device_panel(&self) -> Option<crate::backend::DevicePanel> {
        None
    }
    fn entry_points(&self) -> Vec<interop::driver::EntryReport> {
        Vec::new()
    }
    fn cuda_context(&self) -> Option<std::sync::Arc<interop::Context>> {
        None
    }
    fn step_mode_unavailable(&self) -> Option<String> {
        None
    }
    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()> {
        self.step = on.then_some(StepState::Unmapped);
        Ok(())
    }
    fn next_step(&mut self, _: Gl<'_>, _: &PositionVbos, _: u32) -> anyhow::Result<WorkflowStep> {
        let state = self.step.ok_or_else(|| anyhow::anyhow!("not in step mode"))?;
        let step = state.next_step(Images::Off);
        self.note(step.label());
        self.step = Some(state.after(step));
        Ok(step)
    }
    fn step_view(&self) -> Option<StepView> {
        self.step.map(|state| StepView {
            state,
            next: state.next_step(Images::Off),
            buffers: Vec::new(),
            display_front: (!state.mapped()).then_some(0),
            pointers: None,
            last: None,
            images: Vec::new(),
            objects: Vec::new(),
        })
    }
}

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
    s.sim.backend = Some(Box::new(Recording { log: log.clone(), step: None, drawing: Default::default() }));
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
