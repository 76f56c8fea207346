//! [`Cpu`]: the CPU backend's state and leapfrog steps in f32 ([`CpuF32`]) or f64, multithreaded
//! with rayon, with steps that an interrupt stops between tasks or that run in parts over frames.

use std::time::Instant;

use rayon::prelude::*;

use super::simd::Accelerations;
use super::{for_chunks, Float, Sources, CHUNK};
use crate::partial::{parts_for, FrameSteps, PartialStep, StepProgress};
use crate::tree::{Interactions, Octree, Solver, TreePhases};
use crate::{Bodies, Leapfrog, PhysParams};

/// The CPU backend's simulation in float type `T` (`f32`: [`CpuF32`], the application's CPU
/// backend; `f64`: `--precision f64`), multithreaded with rayon (tasks of 64 bodies `i`).
///
/// State in the kernel's layout: positions `[N][4]` (x, y, z, mass) and velocities `[N][4]`
/// (vx, vy, vz, 0) in `T`. Between [`Cpu::step`] calls the velocities lag the positions by half
/// a step; [`Cpu::bodies`] synchronises them. The direct sum is the explicit-SIMD loop of
/// [`crate::cpu`] in `T`; the tree ([`Solver::Tree`]) is the grouped SIMD walk for f32 and
/// the f64 walk per body for f64 ([`crate::tree::TreeReal`]).
#[derive(Debug, Clone)]
pub struct Cpu<T> {
    pub(super) pos: Vec<[T; 4]>,
    pub(super) vel: Vec<[T; 4]>,
    params: PhysParams,
    /// True when `vel` is at the same time as `pos` (the next kick is dt/2).
    pub(super) leap: Leapfrog,
    /// Snapshot of `pos` in SoA form, the sources of the current force evaluation.
    src: Sources<T>,
    /// Accelerations of the current force evaluation, `[N][3]` (applied once all are known).
    acc: Vec<[T; 3]>,
    /// The run's stop request ([`Cpu::set_interrupt`]).
    interrupt: Option<fn() -> bool>,
    /// Run long steps in parts over calls of [`Cpu::step_frame`], at this rate (interactions/s)
    /// ([`Cpu::set_in_parts`]).
    in_parts: Option<f64>,
    /// The step in progress between two calls: its accelerations are computed range by range
    /// from the sources (`src` or `tree`); no body moves before the last range.
    partial: Option<PartialStep>,
    /// How the accelerations are computed ([`Cpu::set_solver`]).
    solver: Solver,
    /// With [`Solver::Tree`]: the octree of the current force evaluation (built from `pos` with
    /// the sources; `pos` does not move before the evaluation's last range).
    tree: Option<Octree>,
    /// With [`Solver::Tree`]: the accelerations of the current evaluation in the tree's Morton
    /// order, range by range (put back in the bodies' order into `acc` after the last).
    acc_sorted: Vec<[T; 3]>,
    /// Interactions of the current (then the last complete) tree force evaluation.
    tree_interactions: Interactions,
    /// Phases of the current tree force evaluation, and of the last complete one.
    phases: (TreePhases, TreePhases),
}

/// The float32 CPU backend: the application's CPU simulation ([`Cpu`] in f32).
pub type CpuF32 = Cpu<f32>;

impl<T: Float> Cpu<T> {
    /// A backend holding a copy of `bodies` (taken as synchronised; converted to `T`) and
    /// stepping with `params`.
    ///
    /// Velocities missing from `bodies.vel` (a shorter vector) are taken as 0.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        let mut vel: Vec<[T; 4]> = bodies.vel.iter().map(|v| v.map(T::from_f32)).collect();
        vel.resize(bodies.pos.len(), [T::ZERO; 4]);
        Self {
            pos: bodies.pos.iter().map(|p| p.map(T::from_f32)).collect(),
            vel,
            params,
            leap: Leapfrog { synchronized: true },
            src: Sources::default(),
            acc: Vec::new(),
            interrupt: None,
            in_parts: None,
            partial: None,
            solver: Solver::Direct,
            tree: None,
            acc_sorted: Vec::new(),
            tree_interactions: Interactions::default(),
            phases: Default::default(),
        }
    }

    /// Compute the accelerations of the following force evaluations with `solver`: the
    /// all-pairs sum (the default) or the Barnes–Hut tree ([`crate::tree`]); `auto` picks by
    /// N ([`Solver::resolve`]). A step in progress is abandoned first (it starts again with the
    /// new solver).
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

    /// The phases (build, moments, walk; ms) of the last complete tree force evaluation; zero
    /// with [`Solver::Direct`].
    pub fn tree_phases(&self) -> TreePhases {
        self.phases.1
    }

    /// Loads the sources of a force evaluation from `pos` (and builds the tree when the solver
    /// is [`Solver::Tree`]); the accelerations are sized to N.
    fn load_sources(&mut self) {
        self.acc.resize(self.pos.len(), [T::ZERO; 3]);
        match self.solver {
            // `set_solver` resolves `Auto`: it is never kept.
            Solver::Direct | Solver::Auto { .. } => {
                self.src.load(self.pos.iter().copied());
                self.tree = None;
            }
            Solver::Tree { .. } => {
                let tree = Octree::build(&self.pos);
                let t = tree.times();
                self.phases.0 = TreePhases { build_ms: t.build_ms, moments_ms: t.moments_ms, walk_ms: 0.0 };
                self.tree = Some(tree);
                self.acc_sorted.resize(self.pos.len(), [T::ZERO; 3]);
                self.tree_interactions = Interactions::default();
            }
        }
    }

    /// Run steps estimated over [`crate::partial::LONG_STEP_S`] at `rate` interactions/s in parts
    /// over calls of [`Cpu::step_frame`]: their force evaluation runs as parts of about
    /// [`crate::partial::LAUNCH_S`] (body ranges, [`parts_for`]), one per call, and the
    /// bodies move only after the last (see [`crate::partial`]). A step's length is
    /// estimated from the solver's cost ([`crate::tree::step_terms`]). `None`: whole steps.
    pub fn set_in_parts(&mut self, rate: Option<f64>) {
        self.in_parts = rate;
    }

    /// The step in progress between two calls of [`Cpu::step_frame`]: parts done, of all.
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

    /// One frame's steps: as [`Cpu::step`], but with [`Cpu::set_in_parts`] a long step runs one
    /// part per call (a call continues the step in progress and ends when that part was its
    /// last, or runs the steps before it and its first part). Paused (`steps` 0): a step in
    /// progress waits.
    pub fn step_frame(&mut self, steps: u32) -> FrameSteps {
        let parts = match self.in_parts {
            Some(rate) => parts_for(crate::tree::step_terms(self.solver, self.len(), false) / rate.max(1.0), self.len(), CHUNK),
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
            let budget = if self.in_parts.is_some() { crate::partial::PARTS_PER_FRAME } else { usize::MAX };
            match self.continue_partial(budget) {
                None => out.stopped = true,
                Some(p) if p.in_progress() => out.parts = Some(p),
                Some(p) => {
                    out.done = 1;
                    out.parts = Some(p);
                    if self.in_parts.is_none() {
                        // Not in parts (any more): the frame's other steps run whole.
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
                self.finish_accelerations();
                self.apply(T::from_f32(p.kick), T::from_f32(p.drift));
                return Some(p.progress());
            }
        }
        self.partial = Some(p);
        Some(p.progress())
    }

    /// Look at `requested` between the tasks of each force evaluation (every 64 bodies, or 8
    /// groups of the tree) and stop a step when it says so: the step's accelerations are all
    /// computed before any body moves, so a stopped step leaves the state as it was. `None`:
    /// never stop.
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

    /// Current positions, `[N][4]` (x, y, z, mass) in `T`; for f32 ready for the vertex-buffer
    /// upload.
    pub fn positions(&self) -> &[[T; 4]] {
        &self.pos
    }

    /// Current velocities, `[N][4]` (vx, vy, vz, 0) in `T`: half a step behind the positions
    /// unless [`Cpu::is_synchronized`].
    pub fn velocities(&self) -> &[[T; 4]] {
        &self.vel
    }

    /// The state with synchronised velocities, rounded to f32 (applies the half kick if needed;
    /// the next [`Cpu::step`] then starts with a half kick).
    pub fn bodies(&mut self) -> Bodies {
        self.synchronize();
        let f32s = |v: &[[T; 4]]| v.iter().map(|x| x.map(T::to_f32)).collect();
        Bodies { pos: f32s(&self.pos), vel: f32s(&self.vel) }
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
        self.finish_accelerations();
        self.apply(T::from_f32(kick), T::from_f32(drift));
        true
    }

    /// The accelerations of bodies `bodies` into `acc` (the direct sum, in tasks of [`CHUNK`]
    /// bodies), or of the tree's groups that start in `bodies` (Morton order) into
    /// `acc_sorted`. With `stoppable` and an interrupt set, a stop request seen by any task:
    /// returns false (nothing else changes).
    fn accelerations(&mut self, bodies: std::ops::Range<usize>, stoppable: bool) -> bool {
        let (src, g, eps) = (&self.src, self.params.g, self.params.softening);
        let stop = self.interrupt.filter(|_| stoppable);
        if let (Solver::Tree { theta }, Some(tree)) = (self.solver, &self.tree) {
            let asked = stop.map(|f| move || f());
            let asked = asked.as_ref().map(|f| f as &(dyn Fn() -> bool + Sync));
            let t = Instant::now();
            let done = T::walk(tree, bodies, &mut self.acc_sorted, g, eps, theta, asked);
            self.phases.0.walk_ms += t.elapsed().as_secs_f64() * 1e3;
            return match done {
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
        let (g, eps2) = (T::from_f32(g), T::from_f32(eps) * T::from_f32(eps));
        let task = |c: usize, out: &mut [[T; 3]]| {
            if stop.is_some_and(|requested| requested()) {
                stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            arch.dispatch(Accelerations { src, g, eps2, first: first + c * CHUNK, out });
        };
        let acc = &mut self.acc[bodies];
        if acc.len() <= CHUNK {
            task(0, acc);
        } else {
            acc.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| task(c, out));
        }
        !stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// After a force evaluation's last range: the tree's accelerations go back to the bodies'
    /// order, and its phases become the last complete ones.
    fn finish_accelerations(&mut self) {
        if let Some(tree) = &self.tree {
            let t = Instant::now();
            tree.unsort(&self.acc_sorted, &mut self.acc);
            self.phases.0.walk_ms += t.elapsed().as_secs_f64() * 1e3;
            self.phases.1 = self.phases.0;
        }
    }

    /// `v += a * kick; x += v * drift` for every body, with the accelerations in `acc`.
    fn apply(&mut self, kick: T, drift: T) {
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
