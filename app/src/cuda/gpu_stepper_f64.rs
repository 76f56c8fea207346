//! The fp64 leapfrog stepper on the GPU ([`GpuStepperF64`]): the double4 state in its own
//! CUDA buffers, converted into a float4 buffer for GL after each frame's steps.

use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::{Context, DeviceBuffer, DevicePtr, Stream};
use kernels::{StepKernelF64, StepScalarsF64, ToFloat4Kernel};

use super::gpu_stepper::{nominal_rate, FrameSteps, LONG_STEP_S};
use super::integrator::{Float4Pair, Integrator, Interrupt, KernelFacts};
use super::kernel_set::{eps2_f64, Kernels};
use super::settings::Precision;
use kernels::launch_rule::{validate_block_size, LaunchConfig, AUTO_BLOCK};
use sim::{Bodies, Leapfrog, PhysParams};

/// The fp64 kernels' block size for [`AUTO_BLOCK`]: their launch bound (256).
pub const F64_AUTO_BLOCK: u32 = kernels::F64_MAX_BLOCK;

/// Threads per block of the conversion kernel `nbody_to_float4` (memory-bound, any valid size).
pub const CONVERT_BLOCK: u32 = 256;

/// Environment variable: `lib` makes the fp64 path use `nbody_step_f64_lib` (the CUDA math
/// library's double rsqrt) instead of `nbody_step_f64`, for comparisons.
pub const F64_RSQRT_ENV: &str = "NBODY_F64_RSQRT";

/// The fp64 kernel's speed as a fraction of the fp32 one's on an H200 (`bench --modes compute`,
/// N = 131072: 0.759e12 against 2.0e12 interactions/s, docs/results.md). A lead
/// for estimates, like [`nominal_rate`].
pub const F64_RATE_FRACTION: f64 = 0.38;

/// [`nominal_rate`] for a precision: the fp64 kernel's is [`F64_RATE_FRACTION`] of it.
pub fn nominal_rate_for(info: &interop::safe::DeviceInfo, precision: Precision) -> f64 {
    match precision {
        Precision::F32 => nominal_rate(info),
        Precision::F64 => nominal_rate(info) * F64_RATE_FRACTION,
    }
}

/// The fp64 kernels' block size for `block` ([`AUTO_BLOCK`]: [`F64_AUTO_BLOCK`]).
///
/// # Errors
/// Not a multiple of 32 from 32 to 1024, or above the fp64 kernels' 256; the message names the remedy.
pub fn f64_block(block: u32) -> anyhow::Result<u32> {
    validate_block_size(block)?;
    let b = if block == AUTO_BLOCK { F64_AUTO_BLOCK } else { block };
    if b > kernels::F64_MAX_BLOCK {
        bail!(
            "block size {b}: the fp64 kernel (--precision f64) takes at most {} threads per block; use a multiple of 32 up to {}, or 0",
            kernels::F64_MAX_BLOCK,
            kernels::F64_MAX_BLOCK
        );
    }
    Ok(b)
}

/// The fp64 integrator: double4 positions in two CUDA buffers of its own that ping-pong, double4
/// velocities updated in place, one launch of `nbody_step_f64` per step (the whole body range:
/// an fp64 step is never split, so a stop request is looked at between steps only). GL never
/// sees these buffers: [`GpuStepperF64::convert`] writes the newest positions as float4 into a
/// buffer GL draws (`nbody_to_float4`).
///
/// Field order is drop order: the buffers go before the kernels' module.
pub struct GpuStepperF64 {
    /// Positions `[N][4]` f64 (x, y, z, mass); `pos[front_f64]` is the newest.
    pos: [DeviceBuffer<[f64; 4]>; 2],
    /// Velocities `[N][4]` f64 (vx, vy, vz, 0).
    vel: DeviceBuffer<[f64; 4]>,
    step: StepKernelF64,
    convert: ToFloat4Kernel,
    /// The loaded kernels (the module, the potential kernel of the diagnostics).
    kernels: Kernels,
    /// Leapfrog state.
    leap: Leapfrog,
    /// Index (0/1) of the f64 position buffer holding the newest positions.
    front_f64: usize,
    /// Index (0/1) of the float4 buffer the last conversion wrote (the one GL draws).
    front: usize,
    /// Threads per block of the step kernel (a multiple of 32 up to 256).
    block: u32,
    /// Physics parameters.
    params: PhysParams,
    /// N.
    n: usize,
    /// The run's stop request, looked at between the steps of a long frame.
    interrupt: Option<Interrupt>,
}

impl GpuStepperF64 {
    /// Widens `bodies` (exactly) to double4 and uploads them (positions into buffer 0, both
    /// buffers hold them), with synchronised velocities. `block` as [`f64_block`];
    /// [`F64_RSQRT_ENV`]`=lib` picks the library-rsqrt kernel.
    ///
    /// # Errors
    /// An invalid block size; the PTX has no fp64 or conversion kernel; an allocation or copy fails.
    pub fn new(ctx: &Arc<Context>, kernels: Kernels, bodies: &Bodies, block: u32, params: PhysParams) -> anyhow::Result<Self> {
        let block = f64_block(block)?;
        let library = std::env::var(F64_RSQRT_ENV).is_ok_and(|v| v.trim() == "lib");
        let step = kernels.step_f64(library)?;
        let convert = kernels.to_float4()?;
        let pos64 = widen(&bodies.pos);
        let pos = [
            DeviceBuffer::from_slice(ctx, &pos64).context("uploading the f64 positions")?,
            DeviceBuffer::from_slice(ctx, &pos64).context("uploading the f64 positions")?,
        ];
        let vel = DeviceBuffer::from_slice(ctx, &widen(&bodies.vel)).context("uploading the f64 velocities")?;
        Ok(GpuStepperF64 {
            pos,
            vel,
            step,
            convert,
            kernels,
            leap: Leapfrog { synchronized: true },
            front_f64: 0,
            front: 0,
            block,
            params,
            n: bodies.len(),
            interrupt: None,
        })
    }

    /// The step kernel (attributes).
    pub fn step_kernel(&self) -> &StepKernelF64 {
        &self.step
    }

    /// Look at `interrupt.requested()` between the steps of a frame estimated longer than
    /// [`LONG_STEP_S`] (N² · steps at `interrupt.rate`, the fp64 rate). A single step is one
    /// launch and runs to its end.
    pub fn set_interrupt(&mut self, interrupt: Option<Interrupt>) {
        self.interrupt = interrupt;
    }

    /// Changes the block size (as [`f64_block`]).
    ///
    /// # Errors
    /// An invalid block size for the fp64 kernels.
    pub fn set_block(&mut self, block: u32) -> anyhow::Result<()> {
        self.block = f64_block(block)?;
        Ok(())
    }

    /// `steps` leapfrog steps of the f64 state on `stream`. Returns the steps done: `steps`, or
    /// fewer when the interrupt asked to stop between two of them.
    ///
    /// # Errors
    /// A launch fails or is refused.
    pub fn launch_steps(&mut self, steps: u32, stream: &Stream) -> anyhow::Result<u32> {
        let n2 = (self.n as f64) * (self.n as f64);
        let between = self.interrupt.filter(|i| f64::from(steps) * n2 / i.rate.max(1.0) > LONG_STEP_S);
        for done in 0..steps {
            if let Some(i) = between.filter(|_| done > 0) {
                stream.synchronize().context("cuStreamSynchronize (between the steps of a long frame)")?;
                if (i.requested)() {
                    return Ok(done);
                }
            }
            let before = self.leap;
            let (drift, kick) = self.leap.next_step(self.params.dt);
            if let Err(e) = self.launch_one(drift, kick, stream) {
                self.leap = before;
                return Err(e);
            }
        }
        Ok(steps)
    }

    /// The synchronising half kick, if the velocities are half a step ahead (positions do not
    /// move: drift 0).
    ///
    /// # Errors
    /// The launch fails.
    pub fn sync_in(&mut self, stream: &Stream) -> anyhow::Result<()> {
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.launch_one(drift, kick, stream)?;
        }
        Ok(())
    }

    /// One launch front → other buffer over all N.
    fn launch_one(&mut self, drift: f32, kick: f32, stream: &Stream) -> anyhow::Result<()> {
        let p = self.params;
        let s = StepScalarsF64 { dt_drift: f64::from(drift), kick: f64::from(kick), eps2: eps2_f64(p.softening), g: f64::from(p.g) };
        let (a, b, n) = (self.front_f64, 1 - self.front_f64, self.n);
        self.step
            .launch(self.block, n, 0..n, self.pos[a].view(), self.pos[b].view(), self.vel.view(), s, stream)
            .with_context(|| format!("cuLaunchKernel of {} (N = {n}, block {})", self.step.function().name(), self.block))?;
        self.front_f64 = b;
        Ok(())
    }

    /// Writes the newest positions as float4 into `out` (`[N][4]` f32, e.g. a mapped vertex
    /// buffer), on `stream`: one `nbody_to_float4` launch.
    ///
    /// # Errors
    /// The launch fails or is refused (`out` shorter than N).
    pub fn convert(&self, out: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> anyhow::Result<()> {
        self.convert
            .launch(CONVERT_BLOCK, self.n, self.pos[self.front_f64].view(), out, stream)
            .with_context(|| format!("cuLaunchKernel of nbody_to_float4 (N = {})", self.n))
    }

    /// The f64 positions (newest) and velocities as they are on the device (velocities half a
    /// step ahead unless synchronised). Synchronous copies.
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn read(&self) -> anyhow::Result<StateF64> {
        let pos = self.pos[self.front_f64].to_vec().context("cuMemcpyDtoH of the f64 positions")?;
        Ok((pos, self.vel.to_vec().context("cuMemcpyDtoH of the f64 velocities")?))
    }
}

/// The f64 state read back: positions `[N][4]` f64 (x, y, z, mass) and velocities `[N][4]` f64.
pub type StateF64 = (Vec<[f64; 4]>, Vec<[f64; 4]>);

/// `[N][4]` f32 widened to f64 (exact).
pub fn widen(v: &[[f32; 4]]) -> Vec<[f64; 4]> {
    v.iter().map(|b| b.map(f64::from)).collect()
}

/// `[N][4]` f64 rounded to the nearest f32 (what `nbody_to_float4` computes, except that the
/// kernel flushes results below `FLT_MIN` to 0).
pub fn narrow(v: &[[f64; 4]]) -> Vec<[f32; 4]> {
    v.iter().map(|b| b.map(|x| x as f32)).collect()
}

impl Integrator for GpuStepperF64 {
    fn precision(&self) -> Precision {
        Precision::F64
    }

    fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    fn launch_config(&self) -> LaunchConfig {
        LaunchConfig::f64(self.block)
    }

    fn kernel_facts(&self, auto: &str) -> KernelFacts {
        let f = self.step.function();
        KernelFacts {
            kernel: format!("{} · fp64 {} + nbody_to_float4 · block {}{auto}", self.kernels.source(), f.name(), self.block),
            attributes: f.attributes().ok(),
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
        GpuStepperF64::set_block(self, block)
    }

    fn synchronized(&self) -> bool {
        self.leap.synchronized
    }

    fn front(&self) -> usize {
        self.front
    }

    /// The launches advance the f64 state, then (if any step ran) one `nbody_to_float4` writes
    /// it into the other float4 buffer, which becomes the front (GL's other buffer keeps the
    /// previous positions, as with fp32). Whole steps only: never in parts.
    fn launch_frame(&mut self, pos: Float4Pair<'_>, steps: u32, stream: &Stream) -> anyhow::Result<FrameSteps> {
        let done = self.launch_steps(steps, stream)?;
        if done > 0 {
            let to = 1 - self.front;
            self.convert(pos[to], stream)?;
            self.front = to;
        }
        Ok(FrameSteps { done, stopped: done < steps, parts: None })
    }

    /// On the f64 state: `pos` is untouched (the half kick does not move positions, so the
    /// float4 front stays the f32 rounding of the state).
    fn sync_in(&mut self, _pos: Float4Pair<'_>, stream: &Stream) -> anyhow::Result<()> {
        GpuStepperF64::sync_in(self, stream)
    }

    fn read_back(&self, pos: &mut Vec<[f32; 4]>) -> anyhow::Result<Vec<[f32; 4]>> {
        let (p, v) = self.read()?;
        *pos = narrow(&p);
        Ok(narrow(&v))
    }

    fn set_interrupt(&mut self, interrupt: Option<Interrupt>) {
        GpuStepperF64::set_interrupt(self, interrupt);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
