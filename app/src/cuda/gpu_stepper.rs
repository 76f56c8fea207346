//! The fp32 leapfrog stepper on the GPU ([`GpuStepper`]): the kernels, the velocities and the
//! leapfrog state, with the positions in two caller-provided buffers that ping-pong; long steps
//! as launches over body ranges, stopped by an interrupt or run in parts over frames.

use anyhow::{bail, Context as _};
use interop::{DevicePtr, Stream};

pub use super::integrator::Interrupt;
use super::integrator::{Float4Pair, Integrator, KernelFacts};
use super::kernel_set::Kernels;
use super::settings::Precision;
use kernels::launch_rule::{validate_block_size, LaunchConfig, Masses};
use sim::partial::PartialStep;
use sim::{Leapfrog, PhysParams};

/// The GPU side of the integrator: kernels, velocities and leapfrog state, with positions in
/// two caller-provided buffers (mapped GL buffers, or device buffers) that ping-pong.
///
/// A step estimated longer than [`LONG_STEP_S`] (with an interrupt set,
/// [`GpuStepper::set_interrupt`]) runs as several launches over body ranges; with
/// [`GpuStepper::set_in_parts`] such a step runs in parts over calls of [`GpuStepper::launch_frame`]
/// (frames), its state kept in a [`PartialStep`] (see [`sim::partial`]). Every method
/// that reads or changes the state first finishes ([`GpuStepper::sync_in`], the whole-step
/// [`GpuStepper::launch_steps`]) or abandons ([`GpuStepper::abandon_step`]) a step in progress.
pub struct GpuStepper {
    /// The loaded kernels.
    kernels: Kernels,
    /// Velocities `[N][4]`, updated in place.
    vel: interop::DeviceBuffer<[f32; 4]>,
    /// Leapfrog state (while a step is in progress: the phase after it).
    leap: Leapfrog,
    /// Index (0/1) of the position buffer holding the newest positions (while a step is in
    /// progress: the one before it, which its launches read).
    front: usize,
    /// The step kernel's launch for a whole step: block size, P, S, loop, stream-K (private: the
    /// rule chose it for these masses, [`GpuStepper::launch`] reads it).
    launch: LaunchConfig,
    /// The launch of a step split over body ranges: the rule's plain pick for N (stream-K groups
    /// each body's sum by its CTAs, which differ per range; the plain kernel keeps the split
    /// step's bits those of one plain launch of it).
    range_launch: LaunchConfig,
    /// What the masses allow ([`Masses::of`] the positions): the launch rule may pick the
    /// mass-scaled kernels where they suit, the equal-mass ones where all are equal.
    masses: Masses,
    /// The launch rule may pick a stream-K launch ([`GpuStepper::set_stream_k`]; default true).
    stream_k_ok: bool,
    /// The block size asked for ([`kernels::launch_rule::AUTO_BLOCK`]: the rule's), which the launch was chosen with.
    block_asked: u32,
    /// Physics parameters.
    params: PhysParams,
    /// N.
    n: usize,
    /// The run's stop request ([`GpuStepper::set_interrupt`]): a long step is split into
    /// launches that it is checked between.
    interrupt: Option<Interrupt>,
    /// The velocities before a split step, restored when it is stopped or abandoned half-way
    /// (made on the first split step).
    vel_backup: Option<interop::DeviceBuffer<[f32; 4]>>,
    /// Run split steps in parts over calls of [`GpuStepper::launch_frame`] ([`GpuStepper::set_in_parts`]).
    in_parts: bool,
    /// The split step in progress between two calls (only while steps run in parts).
    partial: Option<PartialStep>,
    /// The Barnes–Hut tree that computes the steps in place of the direct kernel
    /// ([`GpuStepper::set_tree`]); `None`: the direct sum.
    tree: Option<Box<super::tree::GpuTree>>,
}

pub use sim::partial::{FrameSteps, StepProgress, LAUNCH_S, LONG_STEP_S};

/// The all-pairs rate (interactions/s) to expect from a GPU: the H200's measured 2.0e12
/// (`bench --modes compute`, N ≥ 131072: 132 SMs at 1980 MHz) scaled by SMs × clock. A lead
/// for estimates (step length, refusals), not a measurement.
pub fn nominal_rate(info: &interop::safe::DeviceInfo) -> f64 {
    const H200_RATE: f64 = 2.0e12;
    const H200_SM_KHZ: f64 = 132.0 * 1_980_000.0;
    let sm_khz = f64::from(info.multiprocessors.max(1)) * f64::from(info.clock_khz.max(1));
    H200_RATE * sm_khz / H200_SM_KHZ
}

/// Fewest bodies per launch of a split step.
const MIN_LAUNCH_BODIES: usize = 1024;

/// How a call went on with a split step.
enum Part {
    /// The last launch ran: the front flipped.
    Done(StepProgress),
    /// Launches remain (the call's budget is spent).
    InProgress(StepProgress),
    /// An interrupt stopped it: velocities and phase restored, front unchanged.
    Stopped,
}

impl GpuStepper {
    /// The velocities `[N][4]` f32 (while a step is in progress: those after it).
    pub fn velocities(&self) -> &interop::DeviceBuffer<[f32; 4]> {
        &self.vel
    }

    /// Number of bodies N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// A stepper for `vel.len()` bodies with synchronised velocities; `masses`: what the masses
    /// of the positions allow ([`Masses::of`]).
    ///
    /// # Errors
    /// Invalid block size; the occupancy query fails; the kernel chosen by hand
    /// ([`Kernels::with_forced`]) cannot run here (e.g. an equal-mass kernel with masses that
    /// differ).
    pub fn new(kernels: Kernels, vel: interop::DeviceBuffer<[f32; 4]>, block: u32, params: PhysParams, masses: Masses) -> anyhow::Result<Self> {
        validate_block_size(block)?;
        let n = vel.len();
        let launch = kernels.choose_launch(n, block, masses, true)?;
        let range_launch = kernels.choose_launch(n, block, masses, false)?;
        Ok(GpuStepper {
            kernels,
            vel,
            leap: Leapfrog { synchronized: true },
            front: 0,
            launch,
            range_launch,
            masses,
            stream_k_ok: true,
            block_asked: block,
            params,
            n,
            interrupt: None,
            vel_backup: None,
            in_parts: false,
            partial: None,
            tree: None,
        })
    }

    /// Split steps estimated longer than [`LONG_STEP_S`] (N² at `interrupt.rate`) into launches
    /// of about [`LAUNCH_S`], and stop such a step between two launches when
    /// `interrupt.requested()` says so: the velocities are restored and the positions stay, so the
    /// state is the one before the step. Without it every step is one launch.
    pub fn set_interrupt(&mut self, interrupt: Option<Interrupt>) {
        self.interrupt = interrupt;
    }

    /// Run split steps in parts over frames: [`GpuStepper::launch_frame`] then runs one launch
    /// ([`sim::partial::PARTS_PER_FRAME`]) of a split step per call and keeps the step in
    /// progress for the next call (the windowed demo, so that its event loop runs between the
    /// launches). Off: every call runs whole steps. A step in progress is not touched here.
    pub fn set_in_parts(&mut self, on: bool) {
        self.in_parts = on;
    }

    /// Steps by the tree solver from now on (`Some`), or by the direct kernel (`None`). A tree
    /// step is always one pass (never split over launches or frames).
    ///
    /// # Errors
    /// A step is in progress (finish or abandon it first).
    pub fn set_tree(&mut self, tree: Option<super::tree::GpuTree>) -> anyhow::Result<()> {
        if self.partial.is_some() {
            bail!("a split step is in progress: finish it before switching the solver");
        }
        self.tree = tree.map(Box::new);
        Ok(())
    }

    /// The tree solver, if the steps use it.
    pub fn tree(&self) -> Option<&super::tree::GpuTree> {
        self.tree.as_deref()
    }

    /// The solver the steps use: the tree with its θ, or the direct sum.
    pub fn solver(&self) -> sim::tree::Solver {
        self.tree.as_ref().map_or(sim::tree::Solver::Direct, |t| sim::tree::Solver::Tree { theta: t.theta() })
    }

    /// The tree solver, mutable (θ, phase timing).
    pub fn tree_mut(&mut self) -> Option<&mut super::tree::GpuTree> {
        self.tree.as_deref_mut()
    }

    /// The split step in progress between two frames: launches done, of all.
    pub fn step_in_progress(&self) -> Option<StepProgress> {
        self.partial.map(|p| p.progress())
    }

    /// Launches per step: 1, or for a long step with an interrupt set, enough for [`LAUNCH_S`]
    /// each (at most one per 1024 bodies).
    pub fn launches_per_step(&self) -> usize {
        let Some(i) = self.interrupt.filter(|_| self.tree.is_none()) else { return 1 };
        sim::partial::parts_for(self.step_seconds(i.rate), self.n, MIN_LAUNCH_BODIES)
    }

    /// True when the next frame writes the back buffer in part only: a step is in progress, or
    /// one would start in parts over frames. A `WRITE_DISCARD` map hint on the back buffer would
    /// then let the driver drop the parts already written.
    pub fn writes_back_in_parts(&self) -> bool {
        self.partial.is_some() || (self.in_parts && self.launches_per_step() > 1)
    }

    /// Changes the block size ([`kernels::launch_rule::AUTO_BLOCK`] for the automatic choice) and re-chooses P.
    ///
    /// # Errors
    /// Invalid block size; a step is in progress (abandon it first: its launches must all use
    /// the same kernel).
    pub fn set_block(&mut self, block: u32) -> anyhow::Result<()> {
        validate_block_size(block)?;
        if self.partial.is_some() {
            bail!("a long step is in progress: abandon it before changing the block size");
        }
        self.launch = self.kernels.choose_launch(self.n, block, self.masses, self.stream_k_ok)?;
        self.range_launch = self.kernels.choose_launch(self.n, block, self.masses, false)?;
        self.block_asked = block;
        Ok(())
    }

    /// The launch of a whole step: block size, P, S, loop, stream-K (chosen by
    /// [`Kernels::choose_launch`] for N, the block size asked for and the masses).
    pub fn launch(&self) -> LaunchConfig {
        self.launch
    }

    /// The launch the steps run now: the rule's plain pick while steps are split over body
    /// ranges (a step in progress, or the next step long enough), else [`GpuStepper::launch`].
    pub fn launch_in_use(&self) -> LaunchConfig {
        if self.partial.is_some() || self.launches_per_step() > 1 {
            self.range_launch
        } else {
            self.launch
        }
    }

    /// Allows (the default) or forbids stream-K launches, and re-chooses the launch with the
    /// same block size. Forbidden, every step is one plain launch (or, when long, plain launches
    /// over body ranges), so whole and split steps give the same bits (tests, comparisons).
    ///
    /// # Errors
    /// As [`GpuStepper::set_block`].
    pub fn set_stream_k(&mut self, on: bool) -> anyhow::Result<()> {
        self.stream_k_ok = on;
        self.set_block(self.block_asked)
    }

    /// `steps` whole steps ping-ponging between `pos` on `stream`, starting from `self.front`.
    /// A step in progress (in parts over frames) is finished first and counts as the first of them.
    ///
    /// # Errors
    /// A launch fails or is refused (buffers too small, or the same buffer twice).
    /// Returns the steps done: `steps`, or fewer when a split step was stopped (see
    /// [`GpuStepper::set_interrupt`]; the state is then the one after the steps done).
    pub fn launch_steps(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], steps: u32, stream: &Stream) -> anyhow::Result<u32> {
        Ok(self.run(pos, steps, stream, false)?.done)
    }

    /// One frame's steps: as [`GpuStepper::launch_steps`], but with [`GpuStepper::set_in_parts`]
    /// a split step runs one launch per call: a call continues the step in progress (and, when
    /// that was its last launch, ends there), or runs the whole steps that come before the
    /// first split one and that one's first launch. `pos` is taken again each call (a mapping
    /// may give other pointers each frame); nothing here keeps a device pointer.
    ///
    /// # Errors
    /// A launch fails (a step in progress is then abandoned, best effort).
    pub fn launch_frame(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], steps: u32, stream: &Stream) -> anyhow::Result<FrameSteps> {
        self.run(pos, steps, stream, self.in_parts)
    }

    /// [`GpuStepper::launch_frame`] with steps in parts on or off.
    fn run(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], steps: u32, stream: &Stream, in_parts: bool) -> anyhow::Result<FrameSteps> {
        let mut out = FrameSteps::default();
        if steps == 0 {
            // Paused: a step in progress waits.
            return Ok(out);
        }
        let budget = if in_parts { sim::partial::PARTS_PER_FRAME } else { usize::MAX };
        if self.partial.is_some() {
            match self.continue_partial(pos, stream, budget)? {
                Part::Stopped => return Ok(FrameSteps { stopped: true, ..out }),
                Part::InProgress(p) => return Ok(FrameSteps { parts: Some(p), ..out }),
                Part::Done(p) => {
                    out.done = 1;
                    if in_parts {
                        // The frame's launch is spent: the next step starts next frame.
                        out.parts = Some(p);
                        return Ok(out);
                    }
                }
            }
        }
        // A frame of many steps that is long in all is stopped between steps too.
        let between = self.interrupt.filter(|i| f64::from(steps) * self.step_seconds(i.rate) > LONG_STEP_S);
        while out.done < steps {
            if let Some(i) = between.filter(|_| out.done > 0) {
                stream.synchronize().context("cuStreamSynchronize (between the steps of a long frame)")?;
                if (i.requested)() {
                    out.stopped = true;
                    return Ok(out);
                }
            }
            let parts = self.launches_per_step();
            if parts > 1 {
                self.begin_partial(parts, stream)?;
                match self.continue_partial(pos, stream, budget)? {
                    Part::Stopped => {
                        out.stopped = true;
                        return Ok(out);
                    }
                    Part::InProgress(p) => {
                        out.parts = Some(p);
                        return Ok(out);
                    }
                    Part::Done(p) => {
                        out.done += 1;
                        if in_parts {
                            out.parts = Some(p);
                            return Ok(out);
                        }
                    }
                }
            } else {
                let before = self.leap;
                let (drift, kick) = self.leap.next_step(self.params.dt);
                if let Err(e) = self.launch_whole(pos, drift, kick, stream) {
                    self.leap = before;
                    return Err(e);
                }
                out.done += 1;
            }
        }
        Ok(out)
    }

    /// One step's estimated length at `rate` interactions/s (s).
    fn step_seconds(&self, rate: f64) -> f64 {
        sim::tree::step_terms(self.solver(), self.n, true) / rate.max(1.0)
    }

    /// Finishes a step in progress (its remaining launches, an interrupt looked at between
    /// them), then the synchronising half kick (if needed), front → other buffer.
    ///
    /// # Errors
    /// As [`GpuStepper::launch_steps`].
    /// The half kick is one launch and never stopped: the state it synchronises is the one a
    /// stopped run writes.
    pub fn sync_in(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], stream: &Stream) -> anyhow::Result<()> {
        if self.partial.is_some() {
            self.continue_partial(pos, stream, usize::MAX)?;
        }
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.launch_whole(pos, drift, kick, stream)?;
        }
        Ok(())
    }

    /// Abandons the step in progress: velocities restored from the backup (positions in the
    /// front buffer were never written), leapfrog phase put back; the state is the one before the
    /// step. Returns how far it had got (`None`: no step was in progress).
    ///
    /// # Errors
    /// The copy back fails (`cuMemcpyDtoDAsync`, `cuStreamSynchronize`).
    pub fn abandon_step(&mut self, stream: &Stream) -> anyhow::Result<Option<StepProgress>> {
        let Some(p) = self.partial.take() else { return Ok(None) };
        p.abandon(&mut self.leap);
        let backup = self.vel_backup.as_ref().context("velocity backup of the step in progress")?;
        self.vel.copy_from_device_async(backup.view(), stream).context("cuMemcpyDtoDAsync (restoring the velocities)")?;
        stream.synchronize().context("cuStreamSynchronize")?;
        let g = p.progress();
        tracing::info!(launches = g.done, of = g.of, "long step abandoned between launches; state of before the step kept");
        Ok(Some(g))
    }

    /// Starts a split step of `parts` launches: the velocity backup, then the step's drift and
    /// kick ([`PartialStep::start`]).
    fn begin_partial(&mut self, parts: usize, stream: &Stream) -> anyhow::Result<()> {
        let backup = match self.vel_backup.take() {
            Some(b) => b,
            None => interop::DeviceBuffer::alloc(self.vel.context(), self.n).context("cuMemAlloc (velocity backup of a split step)")?,
        };
        let backup = self.vel_backup.insert(backup);
        backup.copy_from_device_async(self.vel.view(), stream).context("cuMemcpyDtoDAsync (velocity backup)")?;
        self.partial = Some(PartialStep::start(self.n, parts, self.front, &mut self.leap, self.params.dt));
        Ok(())
    }

    /// Runs up to `budget` launches of the step in progress, each followed by a stream
    /// synchronisation, with a look at the interrupt before each. The last one flips the front.
    /// A failed launch abandons the step (best effort; the failure is what is reported).
    fn continue_partial(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], stream: &Stream, budget: usize) -> anyhow::Result<Part> {
        let mut p = self.partial.take().context("no step in progress")?;
        // Body ranges run the plain kernel (see `range_launch`).
        let launch = self.range_launch;
        let requested = self.interrupt.map(|i| i.requested);
        let mut ran = 0;
        loop {
            if requested.is_some_and(|r| r()) {
                self.partial = Some(p);
                self.abandon_step(stream)?;
                return Ok(Part::Stopped);
            }
            if ran >= budget {
                self.partial = Some(p);
                return Ok(Part::InProgress(p.progress()));
            }
            let Some(bodies) = p.next_range() else { bail!("a finished step was left in progress") };
            let bufs = (pos[p.front], pos[1 - p.front], self.vel.view());
            let r = self
                .kernels
                .launch_step_range(launch, self.n, bodies, bufs, p.drift, p.kick, self.params, stream)
                .and_then(|()| stream.synchronize().context("cuStreamSynchronize (between the launches of a long step)"));
            if let Err(e) = r {
                self.partial = Some(p);
                if let Err(again) = self.abandon_step(stream) {
                    tracing::warn!("restoring the velocities after a failed launch: {again:#}");
                }
                return Err(e);
            }
            ran += 1;
            if p.advance() {
                self.front = 1 - p.front;
                return Ok(Part::Done(p.progress()));
            }
        }
    }

    /// One step front → other buffer in one launch; flips the front.
    fn launch_whole(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], drift: f32, kick: f32, stream: &Stream) -> anyhow::Result<()> {
        let cur = self.front;
        let bufs = (pos[cur], pos[1 - cur], self.vel.view());
        if let Some(tree) = &mut self.tree {
            tree.step(bufs, drift, kick, self.params, stream)?;
        } else {
            self.kernels.launch_step(self.launch, self.n, bufs, drift, kick, self.params, stream)?;
        }
        self.front = 1 - cur;
        Ok(())
    }
}

impl Integrator for GpuStepper {
    fn precision(&self) -> Precision {
        Precision::F32
    }

    fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    fn launch_config(&self) -> LaunchConfig {
        self.launch_in_use()
    }

    fn kernel_facts(&self, auto: &str) -> KernelFacts {
        let l = self.launch_in_use();
        let k = self.kernels.step_kernel(l);
        // A stream-K launch: the attributes of its first half, the kernel that carries the work.
        let f = k.and_then(|k| if l.stream_k.is_some() { k.stream_k_function() } else { Some(k.function()) });
        KernelFacts {
            kernel: format!("{} · {}{auto}", self.kernels.source(), l.describe()),
            attributes: f.and_then(|f| f.attributes().ok()),
            slices: None,
        }
    }

    fn params(&self) -> PhysParams {
        self.params
    }

    fn set_params(&mut self, params: PhysParams) {
        self.params = params;
    }

    fn set_block(&mut self, block: u32) -> anyhow::Result<()> {
        GpuStepper::set_block(self, block)
    }

    fn synchronized(&self) -> bool {
        self.leap.synchronized
    }

    fn front(&self) -> usize {
        self.front
    }

    fn launch_frame(&mut self, pos: Float4Pair<'_>, steps: u32, stream: &Stream) -> anyhow::Result<FrameSteps> {
        GpuStepper::launch_frame(self, pos, steps, stream)
    }

    fn sync_in(&mut self, pos: Float4Pair<'_>, stream: &Stream) -> anyhow::Result<()> {
        GpuStepper::sync_in(self, pos, stream)
    }

    fn sync_writes_float4(&self) -> bool {
        !self.leap.synchronized
    }

    fn read_back(&self, _pos: &mut Vec<[f32; 4]>) -> anyhow::Result<Vec<[f32; 4]>> {
        Ok(self.vel.to_vec()?)
    }

    fn set_interrupt(&mut self, interrupt: Option<Interrupt>) {
        GpuStepper::set_interrupt(self, interrupt);
    }

    fn set_in_parts(&mut self, on: bool) {
        GpuStepper::set_in_parts(self, on);
    }

    fn step_in_progress(&self) -> Option<StepProgress> {
        GpuStepper::step_in_progress(self)
    }

    fn writes_back_in_parts(&self) -> bool {
        GpuStepper::writes_back_in_parts(self)
    }

    fn abandon_step(&mut self, stream: &Stream) -> anyhow::Result<Option<StepProgress>> {
        GpuStepper::abandon_step(self, stream)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
