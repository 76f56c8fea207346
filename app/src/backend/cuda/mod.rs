//! The CUDA backend: one context, stream, kernels and velocities, an integrator
//! ([`crate::cuda::integrator::Integrator`]: fp32, fp64 or fp32 over slices) and a storage for
//! the two position buffers ([`storage::Storage`], one file each) that is one of
//! - `map`: both GL VBOs registered with CUDA (`cuGraphicsGLRegisterBuffer`) and mapped every
//!   frame ([`storage::map`]);
//! - `copy`: two device buffers; each frame the newest is copied to pinned host memory and
//!   uploaded with `glBufferSubData` ([`storage::copy`]);
//! - `external`: two CUDA allocations that GL imports and draws from ([`storage::external`]: its
//!   synchronisation rules and teardown order).
//!
//! Construction, readback, diagnostics, the device panel and teardown exist once for all three.
//! A change of storage, stream or table is a rebuild, which [`super::select`] does.
//!
//! # Precision (`--precision f32 | f64`)
//! The integrator is an [`Integrator`]: fp32 ([`crate::cuda::gpu_stepper::GpuStepper`]: the kernel reads
//! and writes the two float4 position buffers above directly) or fp64
//! ([`crate::cuda::gpu_stepper_f64::GpuStepperF64`]: double4 positions, ping-pong, and double4
//! velocities in CUDA buffers of its own). With fp64 each frame is, per storage, the same
//! workflow with one more launch: `map` — map both VBOs → the `nbody_step_f64` launches on the
//! CUDA buffers → one `nbody_to_float4` into the mapped VBO that GL did not draw last → unmap;
//! `copy` — the launches → the conversion into a float4 device buffer → the copy path above;
//! `external` — fence wait → the launches → the conversion into an imported buffer → event wait.
//! The conversion is timed inside the kernel span (`kernel_ms`, so interactions/s include its
//! ~N·48 bytes of traffic). As only the conversion writes a GL buffer, and only the one GL did
//! not draw last, the map flags' roles hold with any `--steps-per-frame` in fp64.
//! Readback ([`crate::backend::SimBackend::state`], diagnostics, `--save-state`) returns f32 [`Bodies`] rounded
//! from the f64 state; an f32 initial state is widened exactly. The diagnostics' potentials are
//! the fp32 `nbody_potential` of the float4 positions. [`CudaBackend::state_f64`] reads the f64
//! state itself (tests). An fp64 step is one launch (not split for Ctrl-C, which is looked at
//! between steps); step mode (`--step-mode`) is fp32 only.

mod density;
mod frame;
mod image_steps;
mod sim_backend;
mod stepwise;
pub mod storage;

pub use stepwise::STEP_MODE_SPLIT;
pub use storage::map::{check_register_flags, role_map_flag};
pub use storage::{external, semaphores_unavailable};

use std::rc::Rc;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::sys::event_flags;
use interop::{safe::DeviceInfo, Context, DeviceBuffer, Event, ExportableBuffer, Stream};

use self::external::{ExternalStorage, Unsupported};
use self::stepwise::StepwiseFrame;
use self::storage::{make_storage, Storage};
use super::{InteropSettings, PositionVbos};
use crate::cuda::clock::GpuClock;
use crate::cuda::density::DensityView;
use crate::cuda::gpu_stepper::GpuStepper;
use crate::cuda::gpu_stepper_f64::{GpuStepperF64, StateF64};
use crate::cuda::integrator::Integrator;
use crate::cuda::kernel_set::{check_fits, Kernels};
use crate::cuda::session::{open_for_gl, sched_flag};
use crate::cuda::settings::{CtxSched, ExternalSync, InteropMode, Precision, SliceOptions};
use crate::cuda::slices::SlicedRender;
use crate::cuda::slices::SlicedStepper;
use crate::gfx::gl::Gl;
use crate::gfx::GlInfo;
use kernels::launch_rule::{validate_block_size, ForcedKernel};
use sim::{Bodies, PhysParams};

/// Everything a CUDA backend is made from.
#[derive(Debug, Clone)]
pub struct CudaOptions {
    /// Map/copy/external and the other live settings.
    pub settings: InteropSettings,
    /// Map each buffer with its own map/unmap call (the bench's `map-separate`).
    pub separate_maps: bool,
    /// Context scheduling flag.
    pub ctx_sched: CtxSched,
    /// PTX file to load instead of the embedded kernel.
    pub kernel: Option<std::path::PathBuf>,
    /// The fp32 step kernel chosen by hand (`--step-kernel`); `None`: the launch rule's choice.
    pub step_kernel: Option<ForcedKernel>,
    /// fp32, or fp64 (the state in CUDA buffers, converted to float4 for GL each frame).
    pub precision: Precision,
    /// The bodies split over slices and GPUs (fp32; `None` or a single slice: the plain stepper).
    pub split: Option<SliceOptions>,
    /// How external storage orders CUDA and GL: host waits, or Vulkan semaphores on the GPU.
    pub external_sync: ExternalSync,
}

/// The CUDA backend bound to the two GL position buffers.
///
/// Field order is drop order: a step-mode frame (unmaps what it mapped) → the storage (graphics
/// resources are unregistered here, before the renderer deletes the GL buffers; external
/// allocations are released after `release_gl` deleted their GL side) → device buffers →
/// events and the clock → kernels and velocities → stream → context.
pub struct CudaBackend {
    pub(super) stepwise: Option<StepwiseFrame>,
    /// `--view density`: registered GL images; released (unregistered, then the textures
    /// deleted) in `release_gl`, before the storage.
    density: Option<DensityView>,
    pub(super) storage: Option<Box<dyn Storage>>,
    phi: Option<DeviceBuffer<f32>>,
    events: [Event; 4],
    /// Places the frame's events on the host clock (the timeline).
    clock: GpuClock,
    pub(super) gpu: Box<dyn Integrator>,
    pub(super) stream: Rc<Stream>,
    ctx: Arc<Context>,
    pub(super) opts: CudaOptions,
    info: DeviceInfo,
    gl_info: GlInfo,
    pub(super) n: usize,
    /// Sum of the bodies' masses (the density view's scale).
    total_mass: f64,
}

/// What the integrator is when it is not the fp32 stepper on one GPU ([`single_f32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotSingleF32 {
    /// The fp64 integrator.
    F64,
    /// fp32 with the bodies split over slices.
    Slices,
}

/// The fp32 stepper on one GPU, which alone has step mode and the tree.
///
/// # Errors
/// [`NotSingleF32`]: what the integrator is instead.
pub(super) fn single_f32(gpu: &mut dyn Integrator) -> Result<&mut GpuStepper, NotSingleF32> {
    let precision = gpu.precision();
    gpu.as_any_mut().downcast_mut::<GpuStepper>().ok_or(match precision {
        Precision::F64 => NotSingleF32::F64,
        Precision::F32 => NotSingleF32::Slices,
    })
}

/// The slices' integrator, when the bodies are split over slices.
pub(super) fn sliced(gpu: &dyn Integrator) -> Option<&SlicedRender> {
    gpu.as_any().downcast_ref::<SlicedRender>()
}

impl CudaBackend {
    /// Make a CUDA backend sharing the current GL context: `map` registers `vbos` (which hold
    /// `bodies.pos`), `copy` allocates device buffers, `external` allocates exportable buffers
    /// and imports them into GL.
    ///
    /// # Errors
    /// CUDA missing or not sharing the GL context; N too large for the device; an invalid block
    /// size; a PTX load or registration failure; for `map`, register flags other than `none`
    /// ([`check_register_flags`]: they cannot hold for the ping-pong buffers). For `external`,
    /// [`Unsupported`] (in the chain) when this GL or CUDA cannot do external memory (the GL table
    /// is checked before CUDA is touched): the caller may fall back to `map`.
    pub fn new(opts: &CudaOptions, gl: Gl<'_>, gl_info: &GlInfo, vbos: &PositionVbos, bodies: &Bodies, params: PhysParams) -> anyhow::Result<Self> {
        let s = opts.settings;
        validate_block_size(s.block_size)?;
        let fns = match s.interop {
            InteropMode::External => Some(gl_info.memory_object.clone().map_err(Unsupported)?),
            _ => None,
        };
        let n = bodies.len();
        let (ctx, stream, info) = open_for_gl(gl_info, s.stream, s.stream_priority, opts.ctx_sched)?;
        // CUDA's own buffers: velocities; copy adds two device position buffers, external allocates
        // both position buffers itself (map uses GL's VBOs).
        // A step long enough to be split (Ctrl-C between launches) backs the velocities up.
        // A stream-K step needs its scratch: N plus G blocks of bodies (kernels/README.md), counted
        // as one [N][4] f32 buffer more (G blocks of up to 4096 bodies fit the 5 % left over).
        // fp64: its own three [N][4] f64 buffers (as many bytes as six f32 ones) in place of the
        // f32 velocities, and no backup (an fp64 step is never split).
        let storage_bufs = if s.interop == InteropMode::Map { 0 } else { 2 };
        let state_bufs = match opts.precision {
            Precision::F32 => {
                2 + usize::from((n as f64) * (n as f64) / crate::cuda::gpu_stepper::nominal_rate(&info) > crate::cuda::gpu_stepper::LONG_STEP_S)
            }
            Precision::F64 => 6,
        };
        check_fits(&ctx, n, storage_bufs + state_bufs)?;
        let kernels = Kernels::load(&ctx, opts.kernel.as_deref())?.with_forced(opts.step_kernel)?;
        let events = [0, 1, 2, 3].map(|_| Event::new(&ctx, event_flags::DEFAULT));
        let [e0, e1, e2, e3] = events;
        let events = [e0?, e1?, e2?, e3?];
        let clock = GpuClock::new(&ctx, &stream)?;
        let gpu = make_integrator(opts, &ctx, kernels, bodies, params)?;
        let storage: Box<dyn Storage> = match fns {
            Some(fns) => Box::new(ExternalStorage::new(&ctx, gl, fns, bodies, (opts.external_sync, &gl_info.semaphore))?),
            None => make_storage(&ctx, vbos, bodies, s)?,
        };
        Ok(CudaBackend {
            stepwise: None,
            storage: Some(storage),
            phi: None,
            events,
            clock,
            gpu,
            stream: Rc::new(stream),
            ctx,
            opts: opts.clone(),
            info,
            gl_info: gl_info.clone(),
            n,
            total_mass: bodies.pos.iter().map(|p| f64::from(p[3])).sum(),
            density: None,
        })
    }

    /// [`crate::backend::LongSteps::set_interrupt`] with step lengths estimated at `rate` interactions/s
    /// instead of the device's nominal rate: a low rate makes every step "long", so that tests
    /// split steps (and run them in parts) at a small N.
    pub fn set_interrupt_at(&mut self, requested: fn() -> bool, rate: f64) {
        self.gpu.set_interrupt(Some(crate::cuda::integrator::Interrupt { requested, rate }));
    }

    /// Allows (the default) or forbids the stream-K launches of the fp32 step
    /// ([`crate::cuda::gpu_stepper::GpuStepper::set_stream_k`]): forbidden, whole and split steps
    /// give the same bits, which tests compare.
    ///
    /// # Errors
    /// The launch cannot be chosen again (the occupancy query fails).
    pub fn set_stream_k(&mut self, on: bool) -> anyhow::Result<()> {
        match single_f32(self.gpu.as_mut()) {
            Ok(g) => g.set_stream_k(on),
            // The fp64 and slices' steps never use stream-K launches.
            Err(_) => Ok(()),
        }
    }

    /// Steps by `solver` from the next frame: the direct kernel, or the GPU tree
    /// ([`crate::cuda::tree::GpuTree`], its workspace allocated here) with its θ; `auto` picks by
    /// N ([`sim::tree::Solver::resolve`]; the direct sum in fp64 and split setups). A
    /// step in parts over frames is abandoned first (the state goes back to before it).
    ///
    /// # Errors
    /// The tree with `--precision f64` or the bodies split over slices (both keep the direct
    /// sum); the tree's memory does not fit or its kernels are missing; finishing the step fails.
    pub fn set_solver(&mut self, solver: sim::tree::Solver) -> anyhow::Result<()> {
        let Ok(gpu) = single_f32(self.gpu.as_mut()) else {
            // `auto` keeps the direct sum here; only an explicit tree is refused.
            if let sim::tree::Solver::Tree { .. } = solver {
                bail!(
                    "the GPU tree is float32 and runs on one GPU: --precision f64 and the split over slices (--gpus, \
                     --slices) use the direct sum; use --solver direct with them, or drop them to use the tree"
                );
            }
            return Ok(());
        };
        gpu.abandon_step(&self.stream)?;
        match solver.resolve(self.n, true) {
            sim::tree::Solver::Direct | sim::tree::Solver::Auto { .. } => gpu.set_tree(None),
            sim::tree::Solver::Tree { theta } => {
                if let Some(tree) = gpu.tree_mut() {
                    return tree.set_theta(theta);
                }
                let tree = crate::cuda::tree::GpuTree::new(gpu.kernels(), &self.ctx, self.n, theta)?;
                gpu.set_tree(Some(tree))
            }
        }
    }

    /// The solver the steps use.
    pub fn solver(&self) -> sim::tree::Solver {
        self.gpu.as_any().downcast_ref::<GpuStepper>().map_or(sim::tree::Solver::Direct, GpuStepper::solver)
    }

    /// The CUDA device's attributes.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Block size, bodies per thread and threads per body (j-split) of the step kernel in use
    /// (fp64: the block size, 1, 1).
    pub fn launch_config(&self) -> kernels::launch_rule::LaunchConfig {
        self.gpu.launch_config()
    }

    /// The split stepper when the bodies are split over slices and GPUs (`None`: one slice).
    pub fn split(&self) -> Option<&SlicedStepper> {
        sliced(self.gpu.as_ref()).map(SlicedRender::stepper)
    }

    /// The precision of the state.
    pub fn precision(&self) -> Precision {
        self.gpu.precision()
    }

    /// fp64: the f64 positions (newest) and velocities as they are on the device, without the
    /// synchronising half kick (after k ≥ 1 steps the velocities are half a step ahead, as in
    /// [`sim::Leapfrog`]); `None` for fp32. For tests that compare the state itself with
    /// the float64 reference (the readback of [`crate::backend::SimBackend::state`] is rounded to f32).
    ///
    /// # Errors
    /// A step-mode frame cannot be ended; the stream cannot be synchronised; a copy fails.
    pub fn state_f64(&mut self) -> anyhow::Result<Option<StateF64>> {
        self.leave_mapped_step()?;
        if self.gpu.precision() != Precision::F64 {
            return Ok(None);
        }
        self.stream.synchronize().context("cuStreamSynchronize")?;
        self.gpu.as_any().downcast_ref::<GpuStepperF64>().map(GpuStepperF64::read).transpose()
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// External storage: the CUDA allocation behind GL buffer `i` (0 or 1), for checks that
    /// compare both sides; `None` for the other storages.
    pub fn external_buffer(&self, i: usize) -> Option<&ExportableBuffer> {
        Some(self.storage.as_ref()?.as_external()?.cuda_buffer(i))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // End a step-mode frame (unmap) and let queued kernels finish before the fields free
        // the memory they use (the velocities, the device buffers) and unregister the GL buffers.
        if let Err(e) = self.leave_mapped_step() {
            tracing::warn!("ending the step-mode frame at teardown: {e:#}");
        }
        if let Err(e) = self.stream.synchronize() {
            tracing::warn!("cuStreamSynchronize at teardown: {e:#}");
        }
        if let Some(s) = &self.storage {
            s.warn_if_not_released();
        }
    }
}

/// The stepper of `opts` on the render context `ctx`: fp32 on one GPU or split over slices and
/// GPUs (`--gpus` and co.), or fp64 (one GPU, one slice).
///
/// # Errors
/// A split asked for with fp64; more GPUs than the machine has; a stepper cannot be made.
fn make_integrator(
    opts: &CudaOptions,
    ctx: &Arc<Context>,
    kernels: Kernels,
    bodies: &Bodies,
    params: PhysParams,
) -> anyhow::Result<Box<dyn Integrator>> {
    let split = opts.split.filter(|o| !o.is_single());
    if split.is_some() && opts.precision == Precision::F64 {
        bail!(
            "--precision f64 runs on one GPU in one slice; the split over slices and GPUs (--gpus, --slices-per-gpu, \
             --render-gpu-computes no, --gather nccl) is fp32: use --precision f32, or leave those options at their defaults"
        );
    }
    let integrator: Box<dyn Integrator> = match opts.precision {
        Precision::F32 if split.is_some() => {
            let o = split.context("split options")?;
            let render = ctx.device().ordinal();
            let count = interop::Device::count(ctx.api()).context("cuDeviceGetCount")?;
            let devices = o.devices(count.max(0) as u32, render)?;
            let split = SlicedStepper::new(
                ctx.api(),
                sched_flag(opts.ctx_sched),
                &devices,
                bodies,
                opts.settings.block_size,
                None,
                params,
                opts.kernel.as_deref(),
                opts.step_kernel,
                o.gather,
            )?;
            ctx.make_current().context("cuCtxSetCurrent")?;
            Box::new(SlicedRender::new(split, kernels, Arc::clone(ctx), render))
        }
        Precision::F32 => {
            let vel = DeviceBuffer::from_slice(ctx, &bodies.vel).context("uploading velocities")?;
            let masses = kernels::launch_rule::Masses::of(&bodies.pos);
            Box::new(GpuStepper::new(kernels, vel, opts.settings.block_size, params, masses)?)
        }
        Precision::F64 => Box::new(GpuStepperF64::new(ctx, kernels, bodies, opts.settings.block_size, params)?),
    };
    Ok(integrator)
}
