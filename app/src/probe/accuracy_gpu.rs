//! `accuracy --backend cuda`: the same table as the CPU's ([`super::accuracy`]) for the GPU's
//! solvers. The float64 reference is the fp64 step kernel with the CUDA math library's `rsqrt`
//! (`nbody_step_f64_lib`), the `direct` row the fp32 step kernel the launch rule picks, the
//! `tree` rows the GPU tree ([`crate::cuda::tree::GpuTree`]); each kernel runs one step from
//! zero velocities with kick 1, drift 0 and G = 1, so the velocities it leaves are the
//! accelerations. Times are CUDA events (the tree: its phases, of a second step).

use std::sync::Arc;

use anyhow::Context as _;
use interop::sys::stream_flags;
use interop::{Context, Device, DeviceBuffer, Event, SchedFlag, Stream, StreamSemantics};
use kernels::StepScalarsF64;

use crate::cuda::kernel_set::{eps2_f64, Kernels};
use crate::cuda::tree::GpuTree;
use kernels::launch_rule::{Masses, AUTO_BLOCK};
use sim::PhysParams;

/// Threads per block of the fp64 reference (the fp64 kernels' largest).
const F64_BLOCK: u32 = 256;

/// Device 0's primary context, a stream and the kernels, for the whole table.
pub struct GpuAccuracy {
    kernels: Kernels,
    stream: Stream,
    ctx: Arc<Context>,
}

/// A tree row's measurement: accelerations `[N][3]` (G = 1), terms per body, the build and
/// moments (ms) and the whole step (ms).
pub struct TreeRun {
    /// Accelerations `[N][3]`.
    pub acc: Vec<[f32; 3]>,
    /// Leaves and accepted cells per body.
    pub per_body: f64,
    /// Build and moments, ms (CUDA events).
    pub build_ms: f64,
    /// The whole step, ms (CUDA events).
    pub force_ms: f64,
}

impl GpuAccuracy {
    /// Opens the driver, device 0's primary context, a stream, and loads the embedded PTX.
    ///
    /// # Errors
    /// No usable CUDA driver or device; the PTX does not load.
    pub fn open() -> anyhow::Result<GpuAccuracy> {
        let api =
            crate::libraries::init(StreamSemantics::Legacy).context("accuracy --backend cuda needs a CUDA driver: use --backend cpu without one")?;
        let device = Device::get(&api, 0).context("CUDA device 0")?;
        let ctx = Context::primary(&device, SchedFlag::Auto).context("cuDevicePrimaryCtxRetain")?;
        ctx.make_current().context("cuCtxSetCurrent")?;
        let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0).context("cuStreamCreate")?;
        let kernels = Kernels::load(&ctx, None)?;
        Ok(GpuAccuracy { kernels, stream, ctx })
    }

    /// The device's identity and driver, for the results' provenance (`None` where the driver
    /// does not answer `cuDeviceGet*`).
    pub fn facts(&self) -> Option<crate::provenance::GpuFacts> {
        let info = self.ctx.device().info().ok()?;
        Some(crate::provenance::GpuFacts::of(&info, interop::driver::entry::cuda_version_string(self.ctx.api().driver_version())))
    }

    /// The device's name, for the table's title.
    pub fn device_name(&self) -> String {
        self.ctx.device().info().map(|i| i.name).unwrap_or_else(|_| "CUDA device 0".into())
    }

    /// The float64 accelerations of `pos` (`[N][4]` f32, widened) with softening `eps`, G = 1.
    ///
    /// # Errors
    /// An allocation, the launch or a copy fails.
    pub fn exact(&self, pos: &[[f32; 4]], eps: f32) -> anyhow::Result<Vec<[f64; 3]>> {
        let n = pos.len();
        let wide: Vec<[f64; 4]> = pos.iter().map(|p| p.map(f64::from)).collect();
        let input = DeviceBuffer::from_slice(&self.ctx, &wide)?;
        let out = DeviceBuffer::<[f64; 4]>::alloc(&self.ctx, n)?;
        let vel = DeviceBuffer::from_slice(&self.ctx, &vec![[0.0f64; 4]; n])?;
        let s = StepScalarsF64 { dt_drift: 0.0, kick: 1.0, eps2: eps2_f64(eps), g: 1.0 };
        self.kernels
            .step_f64(true)?
            .launch(F64_BLOCK, n, 0..n, input.view(), out.view(), vel.view(), s, &self.stream)
            .context("nbody_step_f64_lib")?;
        self.stream.synchronize().context("cuStreamSynchronize")?;
        Ok(vel.to_vec()?.iter().map(|v| [v[0], v[1], v[2]]).collect())
    }

    /// The fp32 direct kernel's accelerations of `pos` and its time (ms, CUDA events).
    ///
    /// # Errors
    /// An allocation, the launch or a copy fails.
    pub fn direct(&self, pos: &[[f32; 4]], eps: f32) -> anyhow::Result<(Vec<[f32; 3]>, f64)> {
        let n = pos.len();
        let [input, out, mut vel] = self.buffers(pos)?;
        let launch = self.kernels.choose_launch(n, AUTO_BLOCK, Masses::of(pos), true)?;
        let params = PhysParams { g: 1.0, dt: 0.0, softening: eps };
        let events = [Event::new(&self.ctx, 0)?, Event::new(&self.ctx, 0)?];
        let mut ms = 0.0;
        // Twice: the second is timed warm.
        for _ in 0..2 {
            vel.copy_from_host(&vec![[0.0f32; 4]; n])?;
            events[0].record(&self.stream)?;
            self.kernels.launch_step(launch, n, (input.view(), out.view(), vel.view()), 0.0, 1.0, params, &self.stream)?;
            events[1].record(&self.stream)?;
            events[1].synchronize()?;
            ms = f64::from(Event::elapsed_ms(&events[0], &events[1])?.unwrap_or(0.0));
        }
        Ok((acc_of(&vel)?, ms))
    }

    /// The GPU tree's accelerations of `pos` with opening angle `theta`, and its cost.
    ///
    /// # Errors
    /// The tree does not fit; an allocation, a launch or a copy fails.
    pub fn tree(&self, pos: &[[f32; 4]], eps: f32, theta: f32) -> anyhow::Result<TreeRun> {
        let n = pos.len();
        let [input, out, mut vel] = self.buffers(pos)?;
        let mut tree = GpuTree::new(&self.kernels, &self.ctx, n, theta)?;
        tree.time_phases(&self.ctx)?;
        let params = PhysParams { g: 1.0, dt: 0.0, softening: eps };
        for _ in 0..2 {
            // The copy is not ordered with the (non-blocking) stream: the step before must be done.
            vel.copy_from_host(&vec![[0.0f32; 4]; n])?;
            tree.step((input.view(), out.view(), vel.view()), 0.0, 1.0, params, &self.stream)?;
            self.stream.synchronize().context("cuStreamSynchronize")?;
        }
        let p = tree.phases()?.context("the tree's phase events")?;
        let counts = tree.counts(&self.stream)?;
        anyhow::ensure!(!counts.overflow, "a walk's stack overflowed (θ = {theta}, N = {n}): its sums are incomplete");
        Ok(TreeRun {
            acc: acc_of(&vel)?,
            per_body: counts.interactions as f64 / n as f64,
            build_ms: f64::from(p.build_ms + p.moments_ms),
            force_ms: f64::from(p.total_ms()),
        })
    }

    /// Positions in, positions out and velocities for `pos`.
    fn buffers(&self, pos: &[[f32; 4]]) -> anyhow::Result<[DeviceBuffer<[f32; 4]>; 3]> {
        let n = pos.len();
        Ok([DeviceBuffer::from_slice(&self.ctx, pos)?, DeviceBuffer::alloc(&self.ctx, n)?, DeviceBuffer::alloc(&self.ctx, n)?])
    }
}

/// The accelerations a kick-1 step from rest left in `vel`.
fn acc_of(vel: &DeviceBuffer<[f32; 4]>) -> anyhow::Result<Vec<[f32; 3]>> {
    Ok(vel.to_vec()?.iter().map(|v| [v[0], v[1], v[2]]).collect())
}
