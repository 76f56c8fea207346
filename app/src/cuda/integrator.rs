//! The integrator a CUDA backend runs ([`Integrator`]), one implementation per file: fp32
//! ([`super::gpu_stepper::GpuStepper`], `gpu_stepper.rs`), fp64
//! ([`super::gpu_stepper_f64::GpuStepperF64`], `gpu_stepper_f64.rs`) and fp32 over slices and
//! GPUs ([`super::slices::SlicedRender`], `slices/render.rs`).
//!
//! Every integrator leaves the newest positions as float4 in one of two buffers GL draws
//! ([`Integrator::front`]): fp32 steps ping-pong between them; fp64 and the slices keep the state
//! in buffers of their own and write it into the buffer GL did not draw last after a frame's
//! steps. The storage (map, copy, external) gives the two buffers each frame.

use anyhow::Result;
use interop::safe::FunctionAttributes;
use interop::{DevicePtr, Stream};

use super::kernel_set::Kernels;
use super::settings::Precision;
pub use super::slices_facts::SlicesFacts;
use kernels::launch_rule::LaunchConfig;
use sim::partial::{FrameSteps, StepProgress};
use sim::PhysParams;

/// The two float4 position buffers of a frame (`[N][4]` f32 each), as the storage gives them.
pub type Float4Pair<'a> = [DevicePtr<'a, [f32; 4]>; 2];

/// What the device panel shows of an integrator.
pub struct KernelFacts {
    /// The kernel source and launch, e.g. `embedded PTX · block 256, P 1, S 4`.
    pub kernel: String,
    /// The step kernel's registers and local memory, where the driver gave them.
    pub attributes: Option<FunctionAttributes>,
    /// The bodies over slices and GPUs (`None`: one GPU, one slice).
    pub slices: Option<SlicesFacts>,
}

/// A stop request and the rate (interactions/s) a step's length is estimated from.
#[derive(Debug, Clone, Copy)]
pub struct Interrupt {
    /// True once the run should stop (e.g. `stop::stopped`: Ctrl-C, SIGTERM).
    pub requested: fn() -> bool,
    /// Interactions per second the device is expected to reach
    /// ([`super::gpu_stepper::nominal_rate`]).
    pub rate: f64,
}

/// One integrator of a CUDA backend: the leapfrog state and the launches that advance it.
///
/// The long-step methods (interrupt, parts over frames) have defaults for an integrator whose
/// steps are always whole: the fp64 step is one launch, a step over slices one launch per slice.
/// What one implementation alone has (the fp32 stepper's tree, step mode and stream-K choice,
/// the fp64 state, the slices' times) is reached through [`Integrator::as_any`].
pub trait Integrator {
    /// fp32 or fp64.
    fn precision(&self) -> Precision;
    /// The loaded kernels (in the GL device's context: the potential of the diagnostics, the
    /// density view).
    fn kernels(&self) -> &Kernels;
    /// The step kernel's launch (block size, P, S, loop; [`LaunchConfig::f64`] for fp64).
    fn launch_config(&self) -> LaunchConfig;
    /// The kernel, its attributes and the slices for the device panel; `auto` is appended to the
    /// block size where it was the launch rule's choice.
    fn kernel_facts(&self, auto: &str) -> KernelFacts;
    /// Physics parameters.
    fn params(&self) -> PhysParams;
    /// Sets the physics parameters of the next steps.
    fn set_params(&mut self, params: PhysParams);
    /// Changes the block size ([`kernels::launch_rule::AUTO_BLOCK`]: automatic).
    ///
    /// # Errors
    /// An invalid block size for this integrator's kernels, or one it cannot change.
    fn set_block(&mut self, block: u32) -> Result<()>;
    /// True when the velocities are synchronised with the positions.
    fn synchronized(&self) -> bool;
    /// Index (0/1) of the float4 buffer that holds the newest positions.
    fn front(&self) -> usize;
    /// One frame's `steps` on `stream`, leaving the newest float4 positions in
    /// `pos[self.front()]`. Returns the steps done and a step in progress.
    ///
    /// # Errors
    /// A launch fails or is refused.
    fn launch_frame(&mut self, pos: Float4Pair<'_>, steps: u32, stream: &Stream) -> Result<FrameSteps>;
    /// The rest of a step in progress and the synchronising half kick, if needed.
    ///
    /// # Errors
    /// A launch fails.
    fn sync_in(&mut self, pos: Float4Pair<'_>, stream: &Stream) -> Result<()>;
    /// True when [`Integrator::sync_in`] would write one of the float4 buffers: a storage GL
    /// reads without a map waits for GL first.
    fn sync_writes_float4(&self) -> bool {
        false
    }
    /// The velocities `[N][4]` f32 after [`Integrator::sync_in`]; `pos` holds the float4 front
    /// positions the storage read, which an integrator with a state of its own replaces with it.
    ///
    /// # Errors
    /// A device-to-host copy fails.
    fn read_back(&self, pos: &mut Vec<[f32; 4]>) -> Result<Vec<[f32; 4]>>;
    /// The stop request, looked at between launches or steps.
    fn set_interrupt(&mut self, _interrupt: Option<Interrupt>) {}
    /// Runs a long step in parts over frames (fp32).
    fn set_in_parts(&mut self, _on: bool) {}
    /// The step in progress between two frames.
    fn step_in_progress(&self) -> Option<StepProgress> {
        None
    }
    /// True when the next frame writes the back float4 buffer in part only.
    fn writes_back_in_parts(&self) -> bool {
        false
    }
    /// Abandons the step in progress; `Ok(None)` when none.
    ///
    /// # Errors
    /// Restoring the velocities fails.
    fn abandon_step(&mut self, _stream: &Stream) -> Result<Option<StepProgress>> {
        Ok(None)
    }
    /// The integrator as [`std::any::Any`], for what one implementation alone has (see the
    /// trait's docs).
    fn as_any(&self) -> &dyn std::any::Any;
    /// [`Integrator::as_any`], to change it.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}
