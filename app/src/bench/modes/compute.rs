//! The `compute` mode's runners: the step kernel alone on device buffers (fp32, fp64, or split
//! over slices and GPUs), in a CUDA context of their own, no GL.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use interop::sys::event_flags;
use interop::{safe::DeviceInfo, Context, Device, DeviceBuffer, Event, Stream, StreamSemantics};

use super::FrameSample;
use crate::backend::SimTimings;
use crate::cuda::clock::GpuClock;
use crate::cuda::gpu_stepper::GpuStepper;
use crate::cuda::gpu_stepper_f64::GpuStepperF64;
use crate::cuda::integrator::Integrator;
use crate::cuda::kernel_set::{check_fits, Kernels};
use crate::cuda::session::{make_stream, sched_flag};
use crate::cuda::settings::{CtxSched, GatherChoice, StreamKind};
use crate::cuda::slices::SlicedStepper;
use kernels::launch_rule::{ForcedKernel, LaunchConfig, Masses};
use sim::{Bodies, PhysParams};

/// The default-stream semantics a stream kind needs.
fn semantics(stream: StreamKind) -> StreamSemantics {
    if stream == StreamKind::PerThread {
        StreamSemantics::PerThread
    } else {
        StreamSemantics::Legacy
    }
}

/// The CUDA context of the `compute` mode: `interop::init` → device 0 → its primary context with
/// the scheduling flag. Held for the whole run.
pub struct ComputeCtx {
    /// The primary context of device 0 (current on this thread).
    pub ctx: Arc<Context>,
    /// Device 0's attributes.
    pub info: DeviceInfo,
    /// The scheduling flag the context was made with (split setups give it to every device's).
    pub sched: CtxSched,
}

impl ComputeCtx {
    /// Open the driver and retain device 0's primary context with `sched`.
    ///
    /// # Errors
    /// No driver, no device, or the context cannot be made.
    pub fn open(stream: StreamKind, sched: CtxSched) -> anyhow::Result<ComputeCtx> {
        let api = crate::libraries::init(semantics(stream)).context("no usable CUDA driver")?;
        let device = Device::get(&api, 0).context("CUDA device 0")?;
        let ctx = Context::primary(&device, sched_flag(sched)).context("cuDevicePrimaryCtxRetain")?;
        let info = device.info().context("reading device 0's attributes")?;
        Ok(ComputeCtx { ctx, info, sched })
    }

    /// The driver's CUDA version, e.g. `12.8`.
    pub fn driver_version(&self) -> String {
        interop::driver::entry::cuda_version_string(self.ctx.api().driver_version())
    }
}

/// The `compute` mode's frame: the step kernel alone, positions ping-ponging between two device
/// buffers, CUDA events around the launches.
///
/// Field order is drop order: position buffers → events and the clock → kernels and velocities →
/// stream → context.
pub struct ComputeRunner {
    pub(super) pos: [DeviceBuffer<[f32; 4]>; 2],
    pub(super) events: [Event; 2],
    pub(super) clock: GpuClock,
    pub(super) gpu: GpuStepper,
    pub(super) stream: Stream,
    pub(super) ctx: Arc<Context>,
}

impl ComputeRunner {
    /// Upload `bodies` (positions into buffer 0, velocities) and load the kernels.
    ///
    /// # Errors
    /// N too large for the device, an invalid block size, a PTX load, allocation or stream failure.
    pub fn new(
        cc: &ComputeCtx,
        stream: StreamKind,
        kernel: Option<&Path>,
        forced: Option<ForcedKernel>,
        block: u32,
        bodies: &Bodies,
        params: PhysParams,
    ) -> anyhow::Result<ComputeRunner> {
        let ctx = Arc::clone(&cc.ctx);
        ctx.make_current().context("cuCtxSetCurrent")?;
        // Two position buffers, the velocities, a stream-K step's scratch.
        check_fits(&ctx, bodies.len(), 4)?;
        let stream = make_stream(&ctx, stream, 0)?;
        let kernels = Kernels::load(&ctx, kernel)?.with_forced(forced)?;
        let pos = [
            DeviceBuffer::from_slice(&ctx, &bodies.pos).context("uploading positions")?,
            DeviceBuffer::alloc(&ctx, bodies.len()).context("cuMemAlloc (second position buffer)")?,
        ];
        let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel).context("uploading velocities")?;
        let events = [Event::new(&ctx, event_flags::DEFAULT)?, Event::new(&ctx, event_flags::DEFAULT)?];
        let gpu = GpuStepper::new(kernels, vel, block, params, Masses::of(&bodies.pos))?;
        let clock = GpuClock::new(&ctx, &stream)?;
        Ok(ComputeRunner { pos, events, clock, gpu, stream, ctx })
    }

    /// The step kernel's launch (block size, P, S, loop).
    pub fn launch_config(&self) -> LaunchConfig {
        self.gpu.launch()
    }

    /// One frame: `steps` launches between two events, then wait for the second.
    ///
    /// # Errors
    /// A launch, record or synchronize fails.
    pub fn frame(&mut self, steps: u32) -> anyhow::Result<FrameSample> {
        let [e0, e1] = &self.events;
        let pos = [self.pos[0].view(), self.pos[1].view()];
        let t0 = Instant::now();
        e0.record(&self.stream).context("cuEventRecord")?;
        // The buffers outlive the launches: the frame waits for `e1`, recorded after them.
        self.gpu.launch_steps(pos, steps, &self.stream)?;
        e1.record(&self.stream).context("cuEventRecord")?;
        e1.synchronize().context("cuEventSynchronize")?;
        let waited = Instant::now();
        let frame_ms = (waited - t0).as_secs_f64() * 1e3;
        let kernel_ms = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(f64::from);
        let sim = SimTimings {
            host_ms: frame_ms,
            kernel_ms,
            stream_start: self.clock.at(e0)?,
            clock_residual_us: self.clock.residual_us(e1, waited)?,
            ..SimTimings::default()
        };
        self.clock.rebase_if_old(&self.stream)?;
        let tree = match self.gpu.tree() {
            Some(t) => {
                let phases = t.phases()?.unwrap_or_default();
                let counts = t.counts(&self.stream)?;
                Some(super::TreeSample { phases, per_body: counts.interactions as f64 / self.gpu.n() as f64 })
            }
            None => None,
        };
        Ok(FrameSample { frame_ms, sim, draw_ms: None, readback_ms: None, density_ms: None, tree })
    }

    /// Steps by the GPU tree with opening angle `theta` from now on (the `tree` mode), its phases
    /// timed.
    ///
    /// # Errors
    /// As [`crate::cuda::tree::GpuTree::new`]; `cuEventCreate` fails.
    pub fn use_tree(&mut self, theta: f32) -> anyhow::Result<()> {
        let mut tree = crate::cuda::tree::GpuTree::new(self.gpu.kernels(), &self.ctx, self.gpu.n(), theta)?;
        tree.time_phases(&self.ctx)?;
        self.gpu.set_tree(Some(tree))
    }
}

impl ComputeRunner {
    /// True when the newest positions and the velocities are all finite (read back from the device).
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn finite(&self) -> anyhow::Result<bool> {
        let finite = |v: Vec<[f32; 4]>| v.iter().all(|b| b.iter().all(|x| x.is_finite()));
        let pos = self.pos[self.gpu.front()].to_vec().context("reading the positions back")?;
        Ok(finite(pos) && finite(self.gpu.velocities().to_vec().context("reading the velocities back")?))
    }
}

/// The fp64 kernel alone (`--precision f64`, compute mode): the backends' fp64 integrator
/// ([`GpuStepperF64`]: double4 positions in two device buffers that ping-pong, double4
/// velocities, one launch of `nbody_step_f64` per step), no conversion and no GL.
///
/// Field order is drop order: events → the stepper (buffers, kernels) → stream → context.
pub struct ComputeRunnerF64 {
    pub(super) events: [Event; 2],
    pub(super) gpu: GpuStepperF64,
    pub(super) stream: Stream,
    pub(super) ctx: Arc<Context>,
}

impl ComputeRunnerF64 {
    /// Upload `bodies` as double4 and look up the fp64 kernel (`NBODY_F64_RSQRT=lib` picks the
    /// CUDA math library's rsqrt variant, for comparisons).
    ///
    /// # Errors
    /// N too large for the device; a block size above 256; a PTX without the fp64 kernel; an
    /// allocation or stream failure.
    pub fn new(
        cc: &ComputeCtx,
        stream: StreamKind,
        kernel: Option<&Path>,
        block: u32,
        bodies: &Bodies,
        params: PhysParams,
    ) -> anyhow::Result<ComputeRunnerF64> {
        let ctx = Arc::clone(&cc.ctx);
        ctx.make_current().context("cuCtxSetCurrent")?;
        // Three [N][4] f64 buffers: as many bytes as six f32 ones.
        check_fits(&ctx, bodies.len(), 6)?;
        let kernels = Kernels::load(&ctx, kernel)?;
        let gpu = GpuStepperF64::new(&ctx, kernels, bodies, block, params)?;
        let stream = make_stream(&ctx, stream, 0)?;
        let events = [Event::new(&ctx, event_flags::DEFAULT)?, Event::new(&ctx, event_flags::DEFAULT)?];
        Ok(ComputeRunnerF64 { events, gpu, stream, ctx })
    }

    /// One frame: `steps` launches between two events, then wait for the second.
    ///
    /// # Errors
    /// A launch, record or synchronize fails.
    pub fn frame(&mut self, steps: u32) -> anyhow::Result<FrameSample> {
        let [e0, e1] = &self.events;
        let t0 = Instant::now();
        e0.record(&self.stream).context("cuEventRecord")?;
        // The buffers (the stepper's) outlive the launches: the frame waits for `e1`.
        self.gpu.launch_steps(steps, &self.stream)?;
        e1.record(&self.stream).context("cuEventRecord")?;
        e1.synchronize().context("cuEventSynchronize")?;
        let frame_ms = t0.elapsed().as_secs_f64() * 1e3;
        let kernel_ms = Event::elapsed_ms(e0, e1).context("cuEventElapsedTime")?.map(f64::from);
        Ok(FrameSample {
            frame_ms,
            sim: SimTimings { host_ms: frame_ms, kernel_ms, ..SimTimings::default() },
            draw_ms: None,
            readback_ms: None,
            density_ms: None,
            tree: None,
        })
    }

    /// True when the newest positions and the velocities are all finite.
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn finite(&self) -> anyhow::Result<bool> {
        let (pos, vel) = self.gpu.read()?;
        Ok(pos.iter().chain(&vel).all(|b| b.iter().all(|x| x.is_finite())))
    }
}

/// The `compute` mode of a split setup (`--gpus`, `--slices-per-gpu`, `--render-gpu-computes`):
/// the step kernel alone on the slices of a [`SlicedStepper`], each slice on its own device
/// stream, gathered after every step; no GL. One frame = [`SlicedStepper::frame`].
pub struct SlicedComputeRunner {
    pub(super) split: SlicedStepper,
}

impl SlicedComputeRunner {
    /// Upload `bodies` to one slice per entry of `devices` (see [`SlicedStepper::new`]; the launch
    /// rule's pick for one slice's bodies with `block`; every device's primary context gets the
    /// scheduling flag of `cc`).
    ///
    /// # Errors
    /// As [`SlicedStepper::new`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cc: &ComputeCtx,
        devices: &[i32],
        kernel: Option<&Path>,
        forced: Option<ForcedKernel>,
        block: u32,
        bodies: &Bodies,
        params: PhysParams,
        gather: GatherChoice,
    ) -> anyhow::Result<SlicedComputeRunner> {
        let split = SlicedStepper::new(cc.ctx.api(), sched_flag(cc.sched), devices, bodies, block, None, params, kernel, forced, gather)?;
        Ok(SlicedComputeRunner { split })
    }

    /// The split stepper (layout, gather path, launch).
    pub fn split(&self) -> &SlicedStepper {
        &self.split
    }

    /// One frame: `steps` whole steps on every slice with their gathers, waited for. Kernel
    /// time: the sum over the steps of the slowest slice's kernel; gather time: the slowest
    /// slice's gather of the last step (as the demo's backend reports it).
    ///
    /// # Errors
    /// As [`SlicedStepper::frame`].
    pub fn frame(&mut self, steps: u32) -> anyhow::Result<FrameSample> {
        let f = self.split.frame(steps)?;
        let sim = SimTimings {
            host_ms: f.wall_ms,
            kernel_ms: (!f.kernel_ms.is_empty()).then(|| f.kernel_ms.iter().sum()),
            gather_ms: f.gather_ms.last().copied(),
            ..SimTimings::default()
        };
        Ok(FrameSample { frame_ms: f.wall_ms, sim, draw_ms: None, readback_ms: None, density_ms: None, tree: None })
    }

    /// True when the newest positions and the velocities are all finite.
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn finite(&self) -> anyhow::Result<bool> {
        let pos = self.split.positions()?;
        let vel = self.split.velocities()?;
        Ok(pos.iter().chain(&vel).all(|b| b.iter().all(|x| x.is_finite())))
    }
}
