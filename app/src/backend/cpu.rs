//! [`CpuBackend`]: the CPU simulation ([`Cpu`] in f32, or in f64 with `--precision f64`; rayon)
//! behind [`SimBackend`].
//!
//! A frame: `steps` leapfrog steps on the CPU (timed as `kernel_ms`), then one `glBufferSubData`
//! of the `[N][4]` f32 positions (f64 ones rounded to f32 first) into the buffer that is *not*
//! the current front (timed as `upload_ms`), which then becomes the front. The other buffer keeps
//! the positions of the previous frame, which the renderer uses to colour bodies by speed. Never
//! touches CUDA.
//!
//! A step estimated over `LONG_STEP_S` (0.5 s: the direct sum from N of about 63,000 on 2
//! threads; up to 10 s without `--allow-slow`) runs in parts over frames when asked
//! ([`crate::backend::LongSteps::set_in_parts`], the windowed demo): each frame computes the
//! accelerations of one range of bodies (about 0.2 s) and uploads nothing until the last range
//! moved the bodies ([`Cpu::step_frame`]).
//!
//! The accelerations come from the all-pairs sum or, with `--solver tree`, the Barnes–Hut tree
//! ([`sim::tree`]); the leapfrog and the upload are the same. The `--allow-slow` check and
//! the split of long steps into parts count the solver's cost ([`sim::tree::step_terms`]).

use std::time::Instant;

use super::{BackendInfo, LongSteps, NominalRate, PositionVbos, RateBasis, Readout, Shown, Sides, SimBackend, SimTimings, State, StepProgress};
use crate::cuda::settings::Precision;
use crate::gfx::buffers::upload_positions;
use crate::gfx::gl::Gl;
use sim::cpu::{Cpu, CpuF32};
use sim::diagnostics::diagnostics;
use sim::partial::FrameSteps;
use sim::tree::{Interactions, Solver, TreePhases};
use sim::{Bodies, PhysParams};

/// The simulation in the precision asked for.
#[derive(Debug)]
enum Sim {
    /// f32 state: its positions are what GL draws.
    F32(Box<CpuF32>),
    /// f64 state, and its positions rounded to f32 for the upload.
    F64(Box<Cpu<f64>>, Vec<[f32; 4]>),
}

/// Forwards a call to the simulation of either precision.
macro_rules! sim {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Sim::F32($s) => $e,
            Sim::F64($s, _) => $e,
        }
    };
}

/// CPU simulation backend: compute with [`Cpu`], upload with `glBufferSubData`.
#[derive(Debug)]
pub struct CpuBackend {
    sim: Sim,
    front: usize,
    threads: usize,
}

impl CpuBackend {
    /// A backend stepping a copy of `bodies` with `params`; both VBOs already hold
    /// `bodies.pos` (the renderer made them from the same bodies), and buffer 0 is the front.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        Self::with_solver(bodies, params, Solver::Direct)
    }

    /// As [`CpuBackend::new`], computing the accelerations with `solver`.
    pub fn with_solver(bodies: &Bodies, params: PhysParams, solver: Solver) -> Self {
        Self::with_precision(bodies, params, solver, Precision::F32)
    }

    /// As [`CpuBackend::with_solver`], in `precision`: f32 ([`CpuF32`]) or f64 (the state, the
    /// direct sum and the tree's walk in float64, the positions rounded to f32 for drawing).
    pub fn with_precision(bodies: &Bodies, params: PhysParams, solver: Solver, precision: Precision) -> Self {
        let sim = match precision {
            Precision::F32 => Sim::F32(Box::new(CpuF32::new(bodies, params))),
            Precision::F64 => Sim::F64(Box::new(Cpu::new(bodies, params)), bodies.pos.clone()),
        };
        let mut b = Self { sim, front: 0, threads: rayon::current_num_threads() };
        sim!(&mut b.sim, s => s.set_solver(solver));
        b
    }

    /// The precision of the state and the forces.
    pub fn precision(&self) -> Precision {
        match self.sim {
            Sim::F32(_) => Precision::F32,
            Sim::F64(..) => Precision::F64,
        }
    }

    /// The tree's interactions and phases of the last complete force evaluation (zero with the
    /// direct sum).
    pub fn tree_step(&self) -> (Interactions, TreePhases) {
        sim!(&self.sim, s => (s.tree_interactions(), s.tree_phases()))
    }

    /// The nominal all-pairs rate of this precision on this many threads (interactions/s).
    fn rate(&self) -> f64 {
        let per_thread = match self.sim {
            Sim::F32(_) => sim::cpu::NOMINAL_RATE_PER_THREAD,
            Sim::F64(..) => sim::cpu::NOMINAL_RATE_PER_THREAD_F64,
        };
        per_thread * self.threads as f64
    }

    fn step_frame(&mut self, steps: u32) -> FrameSteps {
        sim!(&mut self.sim, s => s.step_frame(steps))
    }

    /// The newest positions in f32, `[N][4]`.
    fn positions(&mut self) -> &[[f32; 4]] {
        match &mut self.sim {
            Sim::F32(s) => s.positions(),
            Sim::F64(s, shown) => {
                for (o, p) in shown.iter_mut().zip(s.positions()) {
                    *o = p.map(|x| x as f32);
                }
                shown
            }
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl SimBackend for CpuBackend {
    fn describe(&self) -> BackendInfo {
        let p = self.precision().name();
        let solver = sim!(&self.sim, s => s.solver());
        let label = match solver {
            Solver::Direct => format!("CPU {p} (rayon, {} threads)", self.threads),
            tree => format!("CPU {p} {} (rayon, {} threads)", tree.label(), self.threads),
        };
        let rate = NominalRate { per_s: self.rate(), basis: RateBasis::Cpu { threads: self.threads, precision: Some(p) } };
        BackendInfo { label, n: sim!(&self.sim, s => s.len()), solver, rate }
    }

    fn simulate(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        let t0 = Instant::now();
        if steps == 0 {
            return Ok(SimTimings { host_ms: ms_since(t0), ..SimTimings::default() });
        }
        let f = self.step_frame(steps);
        if f.stopped {
            tracing::info!(done = f.done, of = steps, "a step was stopped by the interrupt; the state of before it is kept");
        }
        let stopped_after = (f.done < steps).then_some(f.done);
        let kernel_ms = ms_since(t0);
        if f.done == 0 {
            // Nothing moved (a step in progress, or stopped): both buffers keep what they hold.
            return Ok(SimTimings { host_ms: ms_since(t0), kernel_ms: Some(kernel_ms), stopped_after, parts: f.parts, ..SimTimings::default() });
        }
        let t1 = Instant::now();
        let back = 1 - self.front;
        upload_positions(gl, vbos, back, self.positions())?;
        self.front = back;
        let upload_ms = ms_since(t1);
        Ok(SimTimings {
            host_ms: ms_since(t0),
            map_ms: None,
            kernel_ms: Some(kernel_ms),
            unmap_ms: None,
            upload_ms: Some(upload_ms),
            stopped_after,
            parts: f.parts,
            ..SimTimings::default()
        })
    }

    fn shown(&self) -> Shown {
        Shown { front: self.front, buffers: None }
    }

    fn set_solver(&mut self, solver: Solver) -> anyhow::Result<()> {
        sim!(&mut self.sim, s => s.set_solver(solver));
        Ok(())
    }

    fn set_params(&mut self, _gl: Gl<'_>, params: PhysParams) {
        sim!(&mut self.sim, s => s.set_params(params));
    }

    fn state(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos, with: Readout) -> anyhow::Result<State> {
        let (bodies, params) = sim!(&mut self.sim, s => (s.bodies(), s.params()));
        // The diagnostics only where asked: the potential is an all-pairs sum.
        let diagnostics = (with == Readout::WithDiagnostics).then(|| diagnostics(&bodies, params));
        Ok(State { bodies, diagnostics })
    }

    fn sides(&mut self) -> Sides<'_> {
        Sides::LongSteps(self)
    }
}

impl LongSteps for CpuBackend {
    fn synchronized(&self) -> bool {
        sim!(&self.sim, s => s.is_synchronized())
    }

    fn set_interrupt(&mut self, requested: fn() -> bool) {
        sim!(&mut self.sim, s => s.set_interrupt(Some(requested)));
    }

    fn set_in_parts(&mut self, on: bool) {
        let rate = self.rate();
        sim!(&mut self.sim, s => s.set_in_parts(on.then_some(rate)));
    }

    fn step_in_progress(&self) -> Option<StepProgress> {
        sim!(&self.sim, s => s.step_in_progress())
    }

    fn abandon_step(&mut self) -> anyhow::Result<()> {
        if let Some(p) = sim!(&mut self.sim, s => s.abandon_step()) {
            tracing::info!(parts = p.done, of = p.of, "long step abandoned; state of before the step kept");
        }
        Ok(())
    }
}
