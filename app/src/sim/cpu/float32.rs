//! [`CpuF32`]: the float32 CPU backend's state and leapfrog steps, multithreaded with rayon, with
//! steps that an interrupt stops between tasks or that are spread over frames.

use rayon::prelude::*;

use crate::sim::partial::{parts_for, FrameSteps, PartialStep, StepProgress};
use super::simd::AccelerationsF32;
use super::{for_chunks, Sources, CHUNK};
use crate::sim::tree::{Interactions, Octree, Solver};
use crate::sim::{Bodies, Leapfrog, PhysParams};

/// Float32 CPU backend, multithreaded with rayon (tasks of 64 bodies `i`): the application's CPU
/// simulation backend.
///
/// State in the kernel's layout: positions `[N][4]` (x, y, z, mass) and velocities `[N][4]`
/// (vx, vy, vz, 0), f32. Between [`CpuF32::step`] calls the velocities lag the positions by half a
/// step; [`CpuF32::bodies`] synchronises them.
#[derive(Debug, Clone)]
pub struct CpuF32 {
    pub(super) pos: Vec<[f32; 4]>,
    pub(super) vel: Vec<[f32; 4]>,
    params: PhysParams,
    /// True when `vel` is at the same time as `pos` (the next kick is dt/2).
    pub(super) leap: Leapfrog,
    /// Snapshot of `pos` in SoA form, the sources of the current force evaluation.
    src: Sources<f32>,
    /// Accelerations of the current force evaluation, `[N][3]` (applied once all are known).
    acc: Vec<[f32; 3]>,
    /// The run's stop request ([`CpuF32::set_interrupt`]).
    interrupt: Option<fn() -> bool>,
    /// Spread long steps over calls of [`CpuF32::step_frame`], at this rate (interactions/s)
    /// ([`CpuF32::set_spread`]).
    spread: Option<f64>,
    /// The step in progress between two calls: its accelerations are computed range by range
    /// into `acc` from the sources `src`; no body moves before the last range.
    partial: Option<PartialStep>,
    /// How the accelerations are computed ([`CpuF32::set_solver`]).
    solver: Solver,
    /// With [`Solver::Tree`]: the octree of the current force evaluation (built from `pos` with
    /// the sources; `pos` does not move before the evaluation's last range).
    tree: Option<Octree>,
    /// Interactions of the last force evaluation with [`Solver::Tree`] (all its ranges).
    tree_interactions: Interactions,
}

impl CpuF32 {
    /// A backend holding a copy of `bodies` (taken as synchronised) and stepping with `params`.
    ///
    /// Velocities missing from `bodies.vel` (a shorter vector) are taken as 0.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        let mut vel = bodies.vel.clone();
        vel.resize(bodies.pos.len(), [0.0; 4]);
        Self {
            pos: bodies.pos.clone(),
            vel,
            params,
            leap: Leapfrog { synchronized: true },
            src: Sources::default(),
            acc: Vec::new(),
            interrupt: None,
            spread: None,
            partial: None,
            solver: Solver::Direct,
            tree: None,
            tree_interactions: Interactions::default(),
        }
    }

    /// Compute the accelerations of the following force evaluations with `solver`: the
    /// all-pairs sum (the default) or the Barnes–Hut tree ([`crate::sim::tree`]). A step in
    /// progress is abandoned first (it starts again with the new solver).
    pub fn set_solver(&mut self, solver: Solver) {
        let solver = solver.resolve(self.pos.len(), false);
        if solver != self.solver {
            self.abandon_step();
            self.solver = solver;
        }
    }

    /// The solver in use.
    pub fn solver(&self) -> Solver {
        self.solver
    }

    /// Interactions (body–body and body–cell) of the last complete tree force evaluation; zero
    /// with [`Solver::Direct`] (its N² pairs are known).
    pub fn tree_interactions(&self) -> Interactions {
        self.tree_interactions
    }

    /// Loads the sources of a force evaluation from `pos` (and builds the tree when the solver
    /// is [`Solver::Tree`]); the accelerations are sized to N.
    fn load_sources(&mut self) {
        self.acc.resize(self.pos.len(), [0.0; 3]);
        match self.solver {
            // `set_solver` resolves `Auto`: it is never kept.
            Solver::Direct | Solver::Auto { .. } => {
                self.src.load(self.pos.iter().copied());
                self.tree = None;
            }
            Solver::Tree { .. } => {
                self.tree = Some(Octree::build(&self.pos));
                self.tree_interactions = Interactions::default();
            }
        }
    }

    /// Spread steps estimated over [`crate::sim::partial::LONG_STEP_S`] at `rate` interactions/s over calls of
    /// [`CpuF32::step_frame`]: their force evaluation runs in parts of about
    /// [`crate::sim::partial::LAUNCH_S`] (body ranges, [`parts_for`]), one per call, and the
    /// bodies move only after the last (see [`crate::sim::partial`]). `None`: whole steps.
    pub fn set_spread(&mut self, rate: Option<f64>) {
        self.spread = rate;
    }

    /// The step in progress between two calls of [`CpuF32::step_frame`]: parts done, of all.
    pub fn step_in_progress(&self) -> Option<StepProgress> {
        self.partial.map(|p| p.progress())
    }

    /// Abandons the step in progress: no body had moved, so only the leapfrog phase goes back.
    /// Returns how far it had got.
    pub fn abandon_step(&mut self) -> Option<StepProgress> {
        let p = self.partial.take()?;
        p.abandon(&mut self.leap);
        Some(p.progress())
    }

    /// One frame's steps: as [`CpuF32::step`], but with [`CpuF32::set_spread`] a long step
    /// runs one part per call (a call continues the step in progress and ends when that part
    /// was its last, or runs the steps before it and its first part). Paused (`steps` 0): a
    /// step in progress waits.
    pub fn step_frame(&mut self, steps: u32) -> FrameSteps {
        let parts = match self.spread {
            Some(rate) => parts_for((self.len() as f64).powi(2) / rate.max(1.0), self.len(), CHUNK),
            None => 1,
        };
        let mut out = FrameSteps::default();
        if steps == 0 {
            return out;
        }
        if self.partial.is_some() || parts > 1 {
            if self.partial.is_none() {
                self.load_sources();
                self.partial = Some(PartialStep::start(self.len(), parts, 0, &mut self.leap, self.params.dt));
            }
            let budget = if self.spread.is_some() { crate::sim::partial::PARTS_PER_FRAME } else { usize::MAX };
            match self.continue_partial(budget) {
                None => out.stopped = true,
                Some(p) if p.in_progress() => out.spread = Some(p),
                Some(p) => {
                    out.done = 1;
                    out.spread = Some(p);
                    if self.spread.is_none() {
                        // Not spreading (any more): the frame's other steps run whole.
                        out.done += self.step(steps - 1);
                        out.stopped = out.done < steps;
                    }
                }
            }
            return out;
        }
        out.done = self.step(steps);
        out.stopped = out.done < steps;
        out
    }

    /// Computes up to `budget` ranges of the step in progress; after the last, applies its kick
    /// and drift. Returns its progress, or `None` when an interrupt abandoned it.
    fn continue_partial(&mut self, budget: usize) -> Option<StepProgress> {
        let mut p = self.partial.take()?;
        for _ in 0..budget {
            let Some(range) = p.next_range() else { break };
            if !self.accelerations(range, true) {
                p.abandon(&mut self.leap);
                return None;
            }
            if p.advance() {
                self.apply(p.kick, p.drift);
                return Some(p.progress());
            }
        }
        self.partial = Some(p);
        Some(p.progress())
    }

    /// Look at `requested` between the tasks of each force evaluation (every 64 bodies) and stop
    /// a step when it says so: the step's accelerations are all computed before any body moves,
    /// so a stopped step leaves the state as it was. `None`: never stop.
    pub fn set_interrupt(&mut self, requested: Option<fn() -> bool>) {
        self.interrupt = requested;
    }

    /// Advance `steps` leapfrog steps (one force evaluation each); positions stay in `self`.
    /// Returns the steps done: fewer than `steps` when the interrupt stopped one (the state is
    /// then the one after the steps done).
    pub fn step(&mut self, steps: u32) -> u32 {
        let mut first = 0;
        if self.partial.is_some() {
            // A step in progress is finished first and counts as the first.
            if self.continue_partial(usize::MAX).is_none() {
                return 0;
            }
            first = 1;
        }
        for done in first..steps {
            let before = self.leap;
            let (drift, kick) = self.leap.next_step(self.params.dt);
            if !self.kick_drift(kick, drift, true) {
                self.leap = before;
                return done;
            }
        }
        steps
    }

    /// Finish a step in progress (an interrupt may abandon it), then apply the closing half kick
    /// `v += a(x) * dt/2` if the velocities lag the positions. The half kick is never stopped: a
    /// stopped run writes the state it synchronises.
    pub fn synchronize(&mut self) {
        if self.partial.is_some() {
            self.continue_partial(usize::MAX);
        }
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.kick_drift(kick, drift, false);
        }
    }

    /// True when the velocities are synchronised with the positions.
    pub fn is_synchronized(&self) -> bool {
        self.leap.synchronized
    }

    /// Current positions, `[N][4]` f32 (x, y, z, mass), ready for the vertex-buffer upload.
    pub fn positions(&self) -> &[[f32; 4]] {
        &self.pos
    }

    /// The state with synchronised velocities (applies the half kick if needed; the next
    /// [`CpuF32::step`] then starts with a half kick).
    pub fn bodies(&mut self) -> Bodies {
        self.synchronize();
        Bodies { pos: self.pos.clone(), vel: self.vel.clone() }
    }

    /// The physical parameters in use.
    pub fn params(&self) -> PhysParams {
        self.params
    }

    /// Use `params` for the following steps. When they differ from the current ones a step in
    /// progress is abandoned (it starts again with the new ones) and the state is synchronised
    /// (closing half kick with the old parameters), so the leapfrog restarts cleanly with the
    /// new dt, G or ε.
    pub fn set_params(&mut self, params: PhysParams) {
        if params != self.params {
            self.abandon_step();
            self.synchronize();
            self.params = params;
        }
    }

    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// One force evaluation at the current positions (all accelerations first), then
    /// `v += a * kick; x += v * drift`. With `stoppable` and an interrupt set, a stop request seen
    /// by any task of the evaluation abandons it before any body moves: returns false.
    fn kick_drift(&mut self, kick: f32, drift: f32, stoppable: bool) -> bool {
        self.load_sources();
        if !self.accelerations(0..self.pos.len(), stoppable) {
            return false;
        }
        self.apply(kick, drift);
        true
    }

    /// The accelerations of bodies `bodies` into `acc`, from the sources `src`, in tasks of
    /// [`CHUNK`] bodies (rayon). With `stoppable` and an interrupt set, a stop request seen by
    /// any task: returns false (nothing else changes).
    fn accelerations(&mut self, bodies: std::ops::Range<usize>, stoppable: bool) -> bool {
        let (src, g, eps) = (&self.src, self.params.g, self.params.softening);
        let stop = self.interrupt.filter(|_| stoppable);
        if let (Solver::Tree { theta }, Some(tree)) = (self.solver, &self.tree) {
            let asked = stop.map(|f| move || f());
            let asked = asked.as_ref().map(|f| f as &(dyn Fn() -> bool + Sync));
            let first = bodies.start;
            return match tree.accelerations_stoppable(&self.pos, first, &mut self.acc[bodies], g, eps, theta, asked) {
                Some(n) => {
                    self.tree_interactions += n;
                    true
                }
                None => false,
            };
        }
        let stopped = std::sync::atomic::AtomicBool::new(false);
        let arch = pulp::Arch::new();
        let first = bodies.start;
        let task = |c: usize, out: &mut [[f32; 3]]| {
            if stop.is_some_and(|requested| requested()) {
                stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            arch.dispatch(AccelerationsF32 { src, g, eps2: eps * eps, first: first + c * CHUNK, out });
        };
        let acc = &mut self.acc[bodies];
        if acc.len() <= CHUNK {
            task(0, acc);
        } else {
            acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| task(c, out));
        }
        !stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `v += a * kick; x += v * drift` for every body, with the accelerations in `acc`.
    fn apply(&mut self, kick: f32, drift: f32) {
        let acc = &self.acc;
        for_chunks(&mut self.pos, &mut self.vel, |c, pos, vel| {
            for ((p, v), a) in pos.iter_mut().zip(vel.iter_mut()).zip(&acc[c * CHUNK..]) {
                for k in 0..3 {
                    v[k] += a[k] * kick;
                    p[k] += v[k] * drift;
                }
            }
        });
    }
}
