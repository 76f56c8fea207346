//! The scene tests' backend ([`TestBackend`]): a CUDA-like backend without a GPU that writes
//! down what the scene asks of it, keeps the settings it is given, and walks step mode through
//! the real state machine ([`StepState`]) where it is allowed one.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::backend::step::{Images, StepState, StepView, WorkflowStep};
use crate::backend::{
    BackendInfo, CudaSide, DevicePanel, InteropSettings, NominalRate, PositionVbos, RateBasis, Readout, SettingsChange, Shown, Sides, SimBackend,
    SimTimings, State,
};
use crate::gfx::gl::Gl;
use sim::PhysParams;

/// The calls the scene made, in order: `simulate N`, `before_draw`, `draw` (the body draw,
/// seen as the render step asking for the shown buffers between the two hooks), `after_draw`,
/// a step mode step's label, `release`.
pub(super) type Log = Rc<RefCell<Vec<String>>>;

/// Why the test backend refuses step mode when it was made without one.
const NO_STEP_MODE: &str = "the test backend has no step mode";

/// A backend that simulates nothing: `simulate` returns fixed CUDA-like timings, the state
/// cannot be read back, the entry-point panel has one row.
pub(super) struct TestBackend {
    log: Log,
    /// The interop settings the overlay shows and changes (`None`: none to show).
    settings: Option<InteropSettings>,
    /// Step mode may be turned on.
    step_mode: bool,
    /// Step mode's state while it is on.
    step: Option<StepState>,
    /// Between `before_draw` and `after_draw`: the body draw is being issued.
    drawing: Cell<bool>,
}

impl TestBackend {
    /// A backend with `settings` and no step mode (the overlay's CUDA panels).
    pub(super) fn with_settings(settings: Option<InteropSettings>) -> TestBackend {
        TestBackend { log: Log::default(), settings, step_mode: false, step: None, drawing: Cell::new(false) }
    }

    /// A backend with a step mode that writes its calls into `log` (the frame contract).
    pub(super) fn recording(log: Log) -> TestBackend {
        TestBackend { log, step_mode: true, ..TestBackend::with_settings(None) }
    }

    fn note(&self, what: impl Into<String>) {
        self.log.borrow_mut().push(what.into());
    }
}

impl SimBackend for TestBackend {
    fn describe(&self) -> BackendInfo {
        BackendInfo {
            label: "CUDA map · test device".into(),
            n: 200,
            solver: sim::tree::Solver::Direct,
            rate: NominalRate { per_s: f64::INFINITY, basis: RateBasis::Nothing },
        }
    }
    fn simulate(&mut self, _: Gl<'_>, _: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.note(format!("simulate {steps}"));
        Ok(SimTimings { host_ms: 1.0, map_ms: Some(0.01), kernel_ms: Some(0.5), unmap_ms: Some(0.02), upload_ms: None, ..SimTimings::default() })
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
        anyhow::bail!("the test backend holds no state")
    }
    fn sides(&mut self) -> Sides<'_> {
        Sides::Cuda(self)
    }
}

impl CudaSide for TestBackend {
    fn settings(&self) -> Option<InteropSettings> {
        self.settings
    }
    fn apply_settings(&mut self, _: Gl<'_>, _: &PositionVbos, s: InteropSettings) -> anyhow::Result<SettingsChange> {
        self.settings = Some(s);
        Ok(SettingsChange::Applied)
    }
    fn device_panel(&self) -> Option<DevicePanel> {
        None
    }
    fn entry_points(&self) -> Vec<interop::driver::EntryReport> {
        vec![interop::driver::EntryReport {
            name: "cuGraphicsMapResources",
            version: 3000,
            flags: 0,
            result: 0,
            status: interop::driver::SymbolStatus::Found,
            required: true,
            address: 0x1000,
            remedy: None,
        }]
    }
    fn cuda_context(&self) -> Option<std::sync::Arc<interop::Context>> {
        None
    }
    fn step_mode_unavailable(&self) -> Option<String> {
        (!self.step_mode).then(|| NO_STEP_MODE.into())
    }
    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()> {
        if !self.step_mode {
            anyhow::bail!("{NO_STEP_MODE}");
        }
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
