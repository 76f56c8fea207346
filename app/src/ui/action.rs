//! The values that cross the UI pass: what a frame measured, going in ([`FrameStats`]), and what
//! the user asked for, coming out ([`Action`]), applied by the frame loop before the next
//! simulate.

use crate::backend::{InteropSettings, SimTimings};
use crate::gfx::gpu_timer::DrawClock;
use sim::PhysParams;

/// Measurements of one frame, recorded after it is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameStats {
    /// Frame number (0-based).
    pub frame: u64,
    /// Host time from the start of the previous frame to the start of this one (ms).
    pub host_frame_ms: f64,
    /// Timings of the simulate call.
    pub sim: SimTimings,
    /// Time of the body draw (ms), of this or an earlier frame, measured as `draw_clock` says.
    pub draw_ms: Option<f64>,
    /// What measured `draw_ms`: a GL timer query, or the host time of the draw calls.
    pub draw_clock: DrawClock,
    /// GPU time of the last completed density-view pass (ms, CUDA events), in the density view.
    pub density_ms: Option<f64>,
    /// Bodies N.
    pub n: usize,
    /// Leapfrog steps done this frame.
    pub steps: u32,
    /// Time step dt of those steps (simulated time units).
    pub dt: f32,
    /// The backend ran the tree solver (its `auto` resolved): the rate over N² is then an
    /// effective one.
    pub tree: bool,
}

/// What the user asked for in the overlay; applied by the frame loop before the next simulate.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set new physical parameters (`backend.set_params`).
    SetParams(PhysParams),
    /// Do one frame's worth of steps while paused.
    SingleStep,
    /// Restart from the initial condition the run started with (`--init` as given: the CSV
    /// file, or the preset with `--bodies` and `--seed`).
    Restart,
    /// Drop the backend, recreate the VBOs from a new initial condition, make a new backend.
    Reset {
        /// Initial condition name (as `--init`).
        init: String,
        /// Number of bodies.
        n: usize,
    },
    /// Apply changed interop settings (`backend.apply_settings`).
    ApplySettings(InteropSettings),
    /// Compute energy and momentum now.
    ComputeDiagnostics,
    /// Turn step mode on or off (Workflow panel).
    SetStepMode(bool),
    /// Take the next step of the step-mode frame.
    NextStep,
    /// Run the mistake-lab case of this name on scratch resources.
    RunLab(String),
    /// Step by another force solver, or the tree with another θ (`backend.set_solver`).
    SetSolver(sim::tree::Solver),
}
