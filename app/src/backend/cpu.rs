//! [`CpuBackend`]: the float32 CPU simulation ([`CpuF32`], rayon) behind [`SimBackend`].
//!
//! A frame: `steps` leapfrog steps on the CPU (timed as `kernel_ms`), then one `glBufferSubData`
//! of the `[N][4]` f32 positions into the buffer that is *not* the current front (timed as
//! `upload_ms`), which then becomes the front. The other buffer keeps the positions of the
//! previous frame, which the renderer uses to colour bodies by speed. Never touches CUDA.
//!
//! A step estimated over `LONG_STEP_S` (0.5 s: N above about 63,000 on 2 threads; up to 10 s
//! without `--allow-slow`) is spread over frames when asked ([`crate::backend::LongSteps::set_spread`], the
//! windowed demo): each frame computes the accelerations of one range of bodies (about 0.2 s)
//! and uploads nothing until the last range moved the bodies ([`CpuF32::step_frame`]).
//!
//! The accelerations come from the all-pairs sum or, with `--solver tree`, the Barnes–Hut tree
//! ([`crate::sim::tree`]); the leapfrog and the upload are the same. The `--allow-slow` check
//! counts the solver's cost ([`crate::sim::tree::step_terms`]); the spreading of long steps
//! counts N² interactions either way, so under the tree it spreads steps that need not be.

use std::time::Instant;

use super::{LongSteps, PositionVbos, SimBackend, SimTimings, StepProgress};
use crate::gfx::buffers::upload_positions;
use crate::gfx::gl::Gl;
use crate::sim::cpu::CpuF32;
use crate::sim::diagnostics::diagnostics;
use crate::sim::tree::Solver;
use crate::sim::{Bodies, Diagnostics, PhysParams};

/// CPU simulation backend: compute with [`CpuF32`], upload with `glBufferSubData`.
#[derive(Debug)]
pub struct CpuBackend {
    sim: CpuF32,
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
        let mut sim = CpuF32::new(bodies, params);
        sim.set_solver(solver);
        Self { sim, front: 0, threads: rayon::current_num_threads() }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl SimBackend for CpuBackend {
    fn label(&self) -> String {
        match self.sim.solver() {
            Solver::Direct => format!("CPU f32 (rayon, {} threads)", self.threads),
            tree => format!("CPU f32 {} (rayon, {} threads)", tree.label(), self.threads),
        }
    }

    fn n(&self) -> usize {
        self.sim.len()
    }

    fn nominal_rate(&self) -> (f64, String) {
        let rate = crate::sim::cpu::NOMINAL_RATE_PER_THREAD * self.threads as f64;
        (rate, format!("the CPU backend on {} threads", self.threads))
    }

    fn simulate(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        let t0 = Instant::now();
        if steps == 0 {
            return Ok(SimTimings { host_ms: ms_since(t0), ..SimTimings::default() });
        }
        let f = self.sim.step_frame(steps);
        if f.stopped {
            tracing::info!(done = f.done, of = steps, "a step was stopped by the interrupt; the state of before it is kept");
        }
        let stopped_after = (f.done < steps).then_some(f.done);
        let kernel_ms = ms_since(t0);
        if f.done == 0 {
            // Nothing moved (a step in progress, or stopped): both buffers keep what they hold.
            return Ok(SimTimings { host_ms: ms_since(t0), kernel_ms: Some(kernel_ms), stopped_after, spread: f.spread, ..SimTimings::default() });
        }
        let t1 = Instant::now();
        let back = 1 - self.front;
        upload_positions(gl, vbos, back, self.sim.positions())?;
        self.front = back;
        let upload_ms = ms_since(t1);
        Ok(SimTimings {
            host_ms: ms_since(t0),
            map_ms: None,
            kernel_ms: Some(kernel_ms),
            unmap_ms: None,
            upload_ms: Some(upload_ms),
            stopped_after,
            spread: f.spread,
            ..SimTimings::default()
        })
    }

    fn front(&self) -> usize {
        self.front
    }

    fn solver(&self) -> Solver {
        self.sim.solver()
    }

    fn set_solver(&mut self, solver: Solver) -> anyhow::Result<()> {
        self.sim.set_solver(solver);
        Ok(())
    }

    fn set_params(&mut self, _gl: Gl<'_>, params: PhysParams) {
        self.sim.set_params(params);
    }

    fn bodies(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos) -> anyhow::Result<Bodies> {
        Ok(self.sim.bodies())
    }

    fn diagnostics(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos) -> anyhow::Result<Diagnostics> {
        let params = self.sim.params();
        Ok(diagnostics(&self.sim.bodies(), params))
    }


    fn long_steps(&self) -> Option<&dyn LongSteps> {
        Some(self)
    }

    fn long_steps_mut(&mut self) -> Option<&mut dyn LongSteps> {
        Some(self)
    }
}

impl LongSteps for CpuBackend {
    fn synchronized(&self) -> bool {
        self.sim.is_synchronized()
    }

    fn set_interrupt(&mut self, requested: fn() -> bool) {
        self.sim.set_interrupt(Some(requested));
    }

    fn set_spread(&mut self, on: bool) {
        let rate = crate::sim::cpu::NOMINAL_RATE_PER_THREAD * self.threads as f64;
        self.sim.set_spread(on.then_some(rate));
    }

    fn step_in_progress(&self) -> Option<StepProgress> {
        self.sim.step_in_progress()
    }

    fn abandon_step(&mut self) -> anyhow::Result<()> {
        if let Some(p) = self.sim.abandon_step() {
            tracing::info!(parts = p.done, of = p.of, "long step abandoned; state of before the step kept");
        }
        Ok(())
    }
}

