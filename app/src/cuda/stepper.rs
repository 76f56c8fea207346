//! The integrator a CUDA backend runs ([`Stepper`]): fp32 ([`GpuStepper`]), fp64
//! ([`GpuStepperF64`]) or fp32 split over slices and GPUs ([`SlicedRender`]).

use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::{Context, DevicePtr, Stream};

use super::gpu_stepper::{FrameSteps, GpuStepper, Interrupt, StepProgress};
use super::gpu_stepper_f64::GpuStepperF64;
use super::kernel_set::Kernels;
use super::settings::Precision;
use super::slices::SlicedStepper;
use kernels::launch_rule::LaunchConfig;
use sim::PhysParams;

/// The integrator a CUDA backend runs: fp32 ([`GpuStepper`], positions in the two float4
/// buffers GL draws), fp64 ([`GpuStepperF64`], the state in its own buffers, converted into
/// one of those float4 buffers after each frame's steps) or fp32 split over slices and GPUs
/// ([`SlicedRender`], the state in the slices' buffers, copied into one of those float4 buffers
/// after each frame's steps). What the backend's storages share.
pub enum Stepper {
    /// fp32.
    F32(GpuStepper),
    /// fp64.
    F64(GpuStepperF64),
    /// fp32 with the bodies split over slices on one or more GPUs ([`crate::cuda::slices`]): the
    /// state in the slices' own buffers, copied into one of the float4 buffers after each
    /// frame's steps (as fp64 converts into one).
    Sliced(Box<SlicedRender>),
}

/// A [`SlicedStepper`] as a CUDA backend runs it: the slices, plus the render side (the GL
/// device's context and kernels, for the diagnostics and the panel).
pub struct SlicedRender {
    /// The slices.
    pub split: SlicedStepper,
    /// Kernels loaded in the GL device's context (the potential of the diagnostics).
    pub kernels: Kernels,
    /// The GL device's context.
    pub ctx: Arc<Context>,
    /// The GL device's CUDA ordinal.
    pub render: i32,
    /// Index (0/1) of the float4 buffer that received the newest positions.
    pub shown: usize,
}

impl Stepper {
    /// The precision.
    pub fn precision(&self) -> Precision {
        match self {
            Stepper::F32(_) => Precision::F32,
            Stepper::F64(_) => Precision::F64,
            Stepper::Sliced(_) => Precision::F32,
        }
    }

    /// The loaded kernels.
    pub fn kernels(&self) -> &Kernels {
        match self {
            Stepper::F32(g) => &g.kernels,
            Stepper::F64(g) => &g.kernels,
            Stepper::Sliced(r) => &r.kernels,
        }
    }

    /// Physics parameters.
    pub fn params(&self) -> PhysParams {
        match self {
            Stepper::F32(g) => g.params,
            Stepper::F64(g) => g.params,
            Stepper::Sliced(r) => r.split.params(),
        }
    }

    /// Sets the physics parameters of the next steps.
    pub fn set_params(&mut self, params: PhysParams) {
        match self {
            Stepper::F32(g) => g.params = params,
            Stepper::F64(g) => g.params = params,
            Stepper::Sliced(r) => r.split.set_params(params),
        }
    }

    /// True when the velocities are synchronised with the positions.
    pub fn synchronized(&self) -> bool {
        match self {
            Stepper::F32(g) => g.leap.synchronized,
            Stepper::F64(g) => g.leap.synchronized,
            Stepper::Sliced(r) => r.split.synchronized(),
        }
    }

    /// The step kernel's launch (block size, P, S, loop; [`LaunchConfig::f64`] for fp64).
    pub fn launch_config(&self) -> LaunchConfig {
        match self {
            Stepper::F32(g) => g.launch_in_use(),
            Stepper::F64(g) => LaunchConfig::f64(g.block),
            Stepper::Sliced(r) => r.split.launch(),
        }
    }

    /// Changes the block size ([`kernels::launch_rule::AUTO_BLOCK`]: automatic).
    ///
    /// # Errors
    /// An invalid block size for this precision's kernels.
    pub fn set_block(&mut self, block: u32) -> anyhow::Result<()> {
        match self {
            Stepper::F32(g) => g.set_block(block),
            Stepper::F64(g) => g.set_block(block),
            Stepper::Sliced(_) => bail!(
                "the block size of a run split over slices is fixed when it starts (the slices are aligned to its blocks); \
                 restart with --block-size {block}"
            ),
        }
    }

    /// Allows or forbids stream-K launches ([`GpuStepper::set_stream_k`]); the fp64 and split
    /// steppers never use them.
    ///
    /// # Errors
    /// As [`GpuStepper::set_stream_k`].
    pub fn set_stream_k(&mut self, on: bool) -> anyhow::Result<()> {
        match self {
            Stepper::F32(g) => g.set_stream_k(on),
            Stepper::F64(_) | Stepper::Sliced(_) => Ok(()),
        }
    }

    /// The stop request ([`GpuStepper::set_interrupt`], [`GpuStepperF64::set_interrupt`]).
    pub fn set_interrupt(&mut self, interrupt: Option<Interrupt>) {
        match self {
            Stepper::F32(g) => g.set_interrupt(interrupt),
            Stepper::F64(g) => g.set_interrupt(interrupt),
            // A step split over GPUs is one launch per slice: never split further, never stopped.
            Stepper::Sliced(_) => {}
        }
    }

    /// Index (0/1) of the float4 buffer that holds the newest positions: the fp32 stepper's
    /// front, the fp64 one's last conversion target.
    pub fn front(&self) -> usize {
        match self {
            Stepper::F32(g) => g.front,
            Stepper::F64(g) => g.shown,
            Stepper::Sliced(r) => r.shown,
        }
    }

    /// Sets [`Stepper::front`] (a storage that keeps its own index: copy).
    pub fn set_gl_front(&mut self, i: usize) {
        match self {
            Stepper::F32(g) => g.front = i,
            Stepper::F64(g) => g.shown = i,
            Stepper::Sliced(r) => r.shown = i,
        }
    }

    /// One frame's `steps` on `stream`, leaving the newest float4 positions in
    /// `pos[self.front()]`. fp32: the launches ping-pong between `pos`. fp64: the launches
    /// advance the f64 state, then (if any step ran) one `nbody_to_float4` writes it into the
    /// other float4 buffer, which becomes the front (GL's other buffer keeps the previous
    /// positions, as with fp32). Returns the steps done ([`GpuStepper::launch_steps`]).
    ///
    /// # Errors
    /// A launch fails or is refused.
    pub fn advance(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], steps: u32, stream: &Stream) -> anyhow::Result<u32> {
        match self {
            Stepper::F32(g) => g.launch_steps(pos, steps, stream),
            Stepper::F64(g) => {
                let done = g.launch_steps(steps, stream)?;
                if done > 0 {
                    let to = 1 - g.shown;
                    g.convert(pos[to], stream)?;
                    g.shown = to;
                }
                Ok(done)
            }
            Stepper::Sliced(r) => {
                if steps > 0 {
                    r.split.launch_steps(steps)?;
                    // The slices made their contexts current: the GL device's again for the rest.
                    r.ctx.make_current().context("cuCtxSetCurrent")?;
                    let to = 1 - r.shown;
                    r.split.show(pos[to], &r.ctx, r.render, stream)?;
                    r.shown = to;
                }
                Ok(steps)
            }
        }
    }

    /// One frame's steps as [`GpuStepper::launch_frame`]: fp32 spreads a split step over frames
    /// when [`Stepper::set_spread`] is on; fp64 runs whole steps ([`Stepper::advance`]: its steps
    /// are one launch each, never spread).
    ///
    /// # Errors
    /// A launch fails or is refused.
    pub fn launch_frame(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], steps: u32, stream: &Stream) -> anyhow::Result<FrameSteps> {
        match self {
            Stepper::F32(g) => g.launch_frame(pos, steps, stream),
            Stepper::F64(_) | Stepper::Sliced(_) => {
                let done = self.advance(pos, steps, stream)?;
                Ok(FrameSteps { done, stopped: done < steps, spread: None })
            }
        }
    }

    /// Spread long steps over frames (fp32; fp64 steps are never split).
    pub fn set_spread(&mut self, on: bool) {
        if let Stepper::F32(g) = self {
            g.set_spread(on);
        }
    }

    /// The split step in progress between two frames (fp32 only).
    pub fn step_in_progress(&self) -> Option<StepProgress> {
        match self {
            Stepper::F32(g) => g.step_in_progress(),
            Stepper::F64(_) | Stepper::Sliced(_) => None,
        }
    }

    /// True when the next frame writes the back float4 buffer in part only (fp32 spread steps).
    pub fn writes_back_in_parts(&self) -> bool {
        match self {
            Stepper::F32(g) => g.writes_back_in_parts(),
            Stepper::F64(_) | Stepper::Sliced(_) => false,
        }
    }

    /// Abandons the step in progress ([`GpuStepper::abandon_step`]); `Ok(None)` when none.
    ///
    /// # Errors
    /// Restoring the velocities fails.
    pub fn abandon_step(&mut self, stream: &Stream) -> anyhow::Result<Option<StepProgress>> {
        match self {
            Stepper::F32(g) => g.abandon_step(stream),
            Stepper::F64(_) | Stepper::Sliced(_) => Ok(None),
        }
    }

    /// The synchronising half kick, if needed. fp32: front → other buffer of `pos`; fp64: on
    /// the f64 state (`pos` untouched: the half kick does not move positions, so the float4
    /// front stays the f32 rounding of the state).
    ///
    /// # Errors
    /// The launch fails.
    pub fn sync_in(&mut self, pos: [DevicePtr<'_, [f32; 4]>; 2], stream: &Stream) -> anyhow::Result<()> {
        match self {
            Stepper::F32(g) => g.sync_in(pos, stream),
            Stepper::F64(g) => g.sync_in(stream),
            Stepper::Sliced(r) => {
                r.split.sync_in()?;
                r.ctx.make_current().context("cuCtxSetCurrent")
            }
        }
    }

    /// True when [`Stepper::sync_in`] would write one of the float4 buffers (fp32 with
    /// velocities half a step ahead): a storage GL reads without a map waits for GL first.
    pub fn sync_writes_float4(&self) -> bool {
        matches!(self, Stepper::F32(g) if !g.leap.synchronized)
    }
}
