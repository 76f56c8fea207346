//! The CUDA backend: one context, stream, kernels and velocities, and a storage for the two
//! position buffers that is one of
//! - `map`: both GL VBOs registered with CUDA (`cuGraphicsGLRegisterBuffer`) and mapped every
//!   frame. One frame (the resource-mapping workflow, `interop::graphics`):
//!   `cuGraphicsMapResources` (both buffers, one call, on the frame's stream) →
//!   `cuGraphicsResourceGetMappedPointer` (each, size checked) → `cuLaunchKernel` (reads the front
//!   buffer, writes the back one) → `cuGraphicsUnmapResources` (one call, same stream) → GL draws
//!   the written buffer. CUDA events around each step give the map, kernel and unmap times.
//! - `copy`: two device buffers; each frame the newest is copied to pinned host memory and
//!   uploaded with `glBufferSubData`.
//! - `external`: two CUDA allocations that GL imports and draws from (see the `external` module:
//!   its synchronisation rules and teardown order).
//!
//! Construction, readback, diagnostics, the device panel and teardown exist once for all three.
//! A change of storage, stream or table is a rebuild, which [`super::select`] does.
//!
//! # Precision (`--precision f32 | f64`)
//! The integrator is a [`Stepper`]: fp32 ([`crate::cuda::kernels::GpuStepper`]: the kernel reads
//! and writes the two float4 position buffers above directly) or fp64
//! ([`crate::cuda::kernels::GpuStepperF64`]: double4 positions, ping-pong, and double4
//! velocities in CUDA buffers of its own). With fp64 each frame is, per storage, the same
//! workflow with one more launch: `map` — map both VBOs → the `nbody_step_f64` launches on the
//! CUDA buffers → one `nbody_to_float4` into the mapped VBO that GL did not draw last → unmap;
//! `copy` — the launches → the conversion into a float4 device buffer → the copy path above;
//! `external` — fence wait → the launches → the conversion into an imported buffer → event wait.
//! The conversion is timed inside the kernel span (`kernel_ms`, so interactions/s include its
//! ~N·48 bytes of traffic). As only the conversion writes a GL buffer, and only the one GL did
//! not draw last, the map flags' roles hold with any `--steps-per-frame` in fp64.
//! Readback ([`SimBackend::bodies`], diagnostics, `--save-state`) returns f32 [`Bodies`] rounded
//! from the f64 state; an f32 initial state is widened exactly. The diagnostics' potentials are
//! the fp32 `nbody_potential` of the float4 positions. [`CudaBackend::state_f64`] reads the f64
//! state itself (tests). An fp64 step is one launch (not split for Ctrl-C, which is looked at
//! between steps); step mode (`--step-mode`) is fp32 only.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::sys::{event_flags, map_flags};
use interop::{map_resources, Context, DeviceBuffer, DeviceInfo, DevicePtr, Event, ExportableBuffer, GraphicsResource, Mapping, PinnedBuffer, Stream};

use super::external::{ExternalStorage, Unsupported};
use super::stepwise::StepwiseFrame;
use super::{InteropSettings, PositionVbos, SettingsChange, SimBackend, SimTimings};
use crate::cuda::clock::GpuClock;
use crate::cuda::kernels::{
    check_fits, narrow, validate_block_size, FrameSteps, GpuStepper, GpuStepperF64, Kernels, SplitRender, StateF64, StepProgress, Stepper, BODY_BYTES,
};
use crate::cuda::split::SplitStepper;
use crate::cuda::session::{entry_rows, ms, open_for_gl, sched_flag};
use crate::cuda::settings::{CtxSched, InteropMode, Precision, ResourceFlags, SplitOptions};
use crate::gfx::buffers::upload_positions;
use crate::gfx::fence::wait_for_gl;
use crate::gfx::gl::Gl;
use crate::gfx::GlInfo;
use crate::sim::{diagnostics, Bodies, Diagnostics, PhysParams};

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
    /// fp32, or fp64 (the state in CUDA buffers, converted to float4 for GL each frame).
    pub precision: Precision,
    /// The bodies split over slices and GPUs (fp32; `None` or a single slice: the plain stepper).
    pub split: Option<SplitOptions>,
}

/// Where the positions live.
pub(super) enum Storage {
    /// Both GL buffers registered with CUDA. Empty while a step-mode frame holds them mapped
    /// (they are in its `OwnedMapping` then; `leave_mapped_step` puts them back).
    Map { resources: Vec<GraphicsResource> },
    /// Two device buffers and a pinned staging buffer; GL gets a copy each frame.
    /// `gl_front`: the GL buffer holding the newest upload; uploads alternate between the two so
    /// that the other one keeps the previous frame's positions (the renderer colours by speed).
    /// `pinned` is `None` only while a copy into it is in flight (inside `frame`).
    Copy { pos: [DeviceBuffer<[f32; 4]>; 2], pinned: Option<PinnedBuffer<[f32; 4]>>, cur: usize, gl_front: usize },
    /// CUDA allocations imported into GL.
    External(ExternalStorage),
}

/// The CUDA backend bound to the two GL position buffers.
///
/// Field order is drop order: a step-mode frame (unmaps what it mapped) → the storage (graphics
/// resources are unregistered here, before the renderer deletes the GL buffers; external
/// allocations are released after `release_gl` deleted their GL side) → device buffers →
/// events and the clock → kernels and velocities → stream → context.
pub struct CudaBackend {
    pub(super) stepwise: Option<StepwiseFrame>,
    pub(super) storage: Option<Storage>,
    phi: Option<DeviceBuffer<f32>>,
    events: [Event; 4],
    /// Places the frame's events on the host clock (the timeline).
    clock: GpuClock,
    pub(super) gpu: Stepper,
    pub(super) stream: Rc<Stream>,
    ctx: Arc<Context>,
    pub(super) opts: CudaOptions,
    info: DeviceInfo,
    gl_info: GlInfo,
    pub(super) n: usize,
}

/// Refuses register flags whose promise the ping-pong position buffers cannot keep.
///
/// `cuGraphicsGLRegisterBuffer` documents `CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY` as "Specifies
/// that CUDA will not write to this resource" and `CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD` as
/// "Specifies that CUDA will not read from this resource and will write over the entire contents
/// of the resource". A registration holds for the buffer's whole life, but each of the two
/// buffers is read by the kernel in one frame (as the front buffer) and written in the next (as
/// the back one), and with `--steps-per-frame` ≥ 2 both are read and written in the same frame:
/// neither promise holds, so `map` accepts only `none`. The role of a buffer in *this* frame is
/// told to the driver with the map flags instead (`--map-flags`, [`role_map_flag`]). That the
/// promise matters was seen on the H200 (driver 580): with both buffers registered `READ_ONLY`,
/// GL read the old positions (relative error 4e-4 against the reference step).
///
/// `copy` and `external` register nothing and ignore the flag; where `external` falls back to
/// `map` ([`super::select::make_backend`]) the fallback is checked with this function.
///
/// # Errors
/// `interop` is `map` and `flags` is `read-only` or `write-discard`; the message says why and
/// what to use instead (`--register-flags none` with `--map-flags`).
pub fn check_register_flags(interop: InteropMode, flags: ResourceFlags) -> anyhow::Result<()> {
    if interop != InteropMode::Map || flags == ResourceFlags::None {
        return Ok(());
    }
    let (promise, role) = match flags {
        ResourceFlags::ReadOnly => ("CUDA will not write to this resource", "only reads"),
        _ => ("CUDA will not read from this resource and will write over the entire contents of the resource", "only writes"),
    };
    bail!(
        "--register-flags {name} cannot be used with the map interop (registered GL buffers): \
         CU_GRAPHICS_REGISTER_FLAGS_{flag} promises the driver, for as long as the buffer is registered, that \
         \"{promise}\", but the two position buffers are ping-pong buffers: each is read by the kernel in one frame and \
         written in the next (with --steps-per-frame 2 or more, read and written in the same frame). Use \
         --register-flags none with --map-flags {name}, which sets CU_GRAPHICS_MAP_RESOURCE_FLAGS_{flag} before each \
         map on the buffer the kernel {role} in that frame (with --steps-per-frame 1; with more, no hint is given)",
        name = flags.name(),
        flag = flags.name().to_uppercase().replace('-', "_"),
    )
}

/// The map flag (`CU_GRAPHICS_MAP_RESOURCE_FLAGS_*`) of one position buffer for one frame, by its
/// role: with one step per frame the kernel only reads the front buffer and only writes (all of)
/// the back one, so `read-only` marks the front buffer `READ_ONLY` and `write-discard` marks the
/// back buffer `WRITE_DISCARD`; the other buffer gets `NONE`. With `steps` ≥ 2 both buffers are
/// read and written within the frame, so every buffer gets `NONE`; `none` always gives `NONE`.
pub fn role_map_flag(wanted: ResourceFlags, is_front: bool, steps: u32) -> u32 {
    match (wanted, is_front, steps == 1) {
        (ResourceFlags::ReadOnly, true, true) => map_flags::READ_ONLY,
        (ResourceFlags::WriteDiscard, false, true) => map_flags::WRITE_DISCARD,
        _ => map_flags::NONE,
    }
}

/// The two mapped buffers of a mapping as kernel views, each checked to hold `bytes`.
fn mapped_views<'m>(mapping: &'m Mapping<'_>, bytes: usize) -> anyhow::Result<[DevicePtr<'m, [f32; 4]>; 2]> {
    Ok([mapping.pointer(0)?.require(bytes)?.view(), mapping.pointer(1)?.require(bytes)?.view()])
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
            Precision::F32 => 2 + usize::from((n as f64) * (n as f64) / crate::cuda::kernels::nominal_rate(&info) > crate::cuda::kernels::LONG_STEP_S),
            Precision::F64 => 6,
        };
        check_fits(&ctx, n, storage_bufs + state_bufs)?;
        let kernels = Kernels::load(&ctx, opts.kernel.as_deref())?;
        let events = [0, 1, 2, 3].map(|_| Event::new(&ctx, event_flags::DEFAULT));
        let [e0, e1, e2, e3] = events;
        let events = [e0?, e1?, e2?, e3?];
        let clock = GpuClock::new(&ctx, &stream)?;
        let split = opts.split.filter(|o| !o.is_single());
        if split.is_some() && opts.precision == Precision::F64 {
            bail!(
                "--precision f64 runs on one GPU in one slice; the split over slices and GPUs (--gpus, --slices-per-gpu, \
                 --render-gpu-computes no, --gather nccl) is fp32: use --precision f32, or leave those options at their defaults"
            );
        }
        let gpu = match opts.precision {
            Precision::F32 if split.is_some() => {
                let o = split.context("split options")?;
                let render = ctx.device().ordinal();
                let count = interop::Device::count(ctx.api()).context("cuDeviceGetCount")?;
                let devices = o.devices(count.max(0) as u32, render)?;
                let split = SplitStepper::new(ctx.api(), sched_flag(opts.ctx_sched), &devices, bodies, s.block_size, None, params, opts.kernel.as_deref(), o.gather)?;
                ctx.make_current().context("cuCtxSetCurrent")?;
                Stepper::Split(Box::new(SplitRender { split, kernels, ctx: Arc::clone(&ctx), render, shown: 0 }))
            }
            Precision::F32 => {
                let vel = DeviceBuffer::from_slice(&ctx, &bodies.vel).context("uploading velocities")?;
                let masses = crate::cuda::kernels::Masses::of(&bodies.pos);
                Stepper::F32(GpuStepper::new(kernels, vel, s.block_size, params, masses)?)
            }
            Precision::F64 => Stepper::F64(GpuStepperF64::new(&ctx, kernels, bodies, s.block_size, params)?),
        };
        let storage = match fns {
            Some(fns) => Storage::External(ExternalStorage::new(&ctx, gl, fns, bodies)?),
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
        })
    }

    /// [`SimBackend::set_interrupt`] with step lengths estimated at `rate` interactions/s
    /// instead of the device's nominal rate: a low rate makes every step "long", so that tests
    /// split (and spread) steps at a small N.
    pub fn set_interrupt_at(&mut self, requested: fn() -> bool, rate: f64) {
        self.gpu.set_interrupt(Some(crate::cuda::kernels::Interrupt { requested, rate }));
    }

    /// Allows (the default) or forbids the stream-K launches of the fp32 step
    /// ([`crate::cuda::kernels::GpuStepper::set_stream_k`]): forbidden, whole and split steps
    /// give the same bits, which tests compare.
    ///
    /// # Errors
    /// The launch cannot be chosen again (the occupancy query fails).
    pub fn set_stream_k(&mut self, on: bool) -> anyhow::Result<()> {
        self.gpu.set_stream_k(on)
    }

    /// The CUDA device's attributes.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Block size, bodies per thread and threads per body (j-split) of the step kernel in use
    /// (fp64: the block size, 1, 1).
    pub fn launch_config(&self) -> crate::cuda::kernels::Launch {
        self.gpu.launch_config()
    }

    /// The split stepper when the bodies are split over slices and GPUs (`None`: one slice).
    pub fn split(&self) -> Option<&SplitStepper> {
        match &self.gpu {
            Stepper::Split(r) => Some(&r.split),
            _ => None,
        }
    }

    /// The precision of the state.
    pub fn precision(&self) -> Precision {
        self.gpu.precision()
    }

    /// fp64: the f64 positions (newest) and velocities as they are on the device, without the
    /// synchronising half kick (after k ≥ 1 steps the velocities are half a step ahead, as in
    /// [`crate::sim::Leapfrog`]); `None` for fp32. For tests that compare the state itself with
    /// the float64 reference (the readback of [`SimBackend::bodies`] is rounded to f32).
    ///
    /// # Errors
    /// A step-mode frame cannot be ended; the stream cannot be synchronised; a copy fails.
    pub fn state_f64(&mut self) -> anyhow::Result<Option<StateF64>> {
        self.leave_mapped_step()?;
        let Stepper::F64(g) = &self.gpu else { return Ok(None) };
        self.stream.synchronize().context("cuStreamSynchronize")?;
        Ok(Some(g.read()?))
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// External storage: the CUDA allocation behind GL buffer `i` (0 or 1), for checks that
    /// compare both sides; `None` for the other storages.
    pub fn external_buffer(&self, i: usize) -> Option<&ExportableBuffer> {
        match &self.storage {
            Some(Storage::External(x)) => Some(x.cuda_buffer(i)),
            _ => None,
        }
    }

    /// Sets the per-frame map flags by role (`cuGraphicsResourceSetMapFlags`, before the map):
    /// each buffer gets [`role_map_flag`]`(wanted, i == front, steps)`. A flag is set only when
    /// it differs from the one in force (it takes effect at the next map).
    ///
    /// # Errors
    /// The driver's error of `cuGraphicsResourceSetMapFlags`.
    #[doc(alias = "cuGraphicsResourceSetMapFlags")]
    pub(super) fn set_role_map_flags(resources: &mut [GraphicsResource], front: usize, wanted: ResourceFlags, steps: u32) -> anyhow::Result<()> {
        for (i, r) in resources.iter_mut().enumerate() {
            let bits = role_map_flag(wanted, i == front, steps);
            if r.map_flags() != bits {
                r.set_map_flags(bits).context("cuGraphicsResourceSetMapFlags")?;
            }
        }
        Ok(())
    }

    /// The rest of a step in progress (spread over frames: its remaining launches), the
    /// synchronising half kick (if the velocities are half a step ahead) and, with `phi`,
    /// the potential of the front buffer, then a stream sync, and with `out` a copy of the front
    /// positions into it. External storage waits for GL first when the half kick writes (rule 2
    /// of its module).
    fn sync_storage(&mut self, gl: Gl<'_>, storage: &mut Storage, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> anyhow::Result<()> {
        // The potential kernel's block size: the step's (fp32), or the fp64 one's (≤ 256).
        let (n, block, eps) = (self.n, self.gpu.launch_config().block, self.gpu.params().softening);
        let stream = &self.stream;
        let gpu = &mut self.gpu;
        match storage {
            Storage::Map { resources } => {
                Self::set_role_map_flags(resources, gpu.gl_front(), ResourceFlags::None, 1)?;
                let mapping = map_resources(resources, stream).context("cuGraphicsMapResources")?;
                let pos = mapped_views(&mapping, n * BODY_BYTES)?;
                gpu.sync_in(pos, stream)?;
                if let Some(phi) = phi {
                    gpu.kernels().launch_potential(block, n, pos[gpu.gl_front()], phi.view(), eps, stream)?;
                }
                stream.synchronize()?;
                if let Some(out) = out {
                    mapping.pointer(gpu.gl_front())?.copy_to_host(out)?;
                }
                mapping.unmap().context("cuGraphicsUnmapResources")?;
            }
            Storage::Copy { pos, cur, .. } => {
                gpu.set_gl_front(*cur);
                gpu.sync_in([pos[0].view(), pos[1].view()], stream)?;
                *cur = gpu.gl_front();
                if let Some(phi) = phi {
                    gpu.kernels().launch_potential(block, n, pos[*cur].view(), phi.view(), eps, stream)?;
                }
                stream.synchronize()?;
                if let Some(out) = out {
                    pos[*cur].copy_to_host(out)?;
                }
            }
            Storage::External(x) => {
                x.check_live()?;
                if gpu.sync_writes_float4() || gpu.step_in_progress().is_some() {
                    // The rest of a step in progress and the synchronising half kick write the
                    // back buffer: rule 2.
                    wait_for_gl(gl)?;
                }
                gpu.sync_in(x.views(), stream)?;
                if let Some(phi) = phi {
                    gpu.kernels().launch_potential(block, n, x.views()[gpu.gl_front()], phi.view(), eps, stream)?;
                }
                stream.synchronize().context("cuStreamSynchronize")?;
                if let Some(out) = out {
                    x.cuda_buffer(gpu.gl_front()).read_at(0, out).context("cuMemcpyDtoH of the positions")?;
                }
            }
        }
        Ok(())
    }

    /// Positions, velocities (synchronised) and, if asked, φ from the GPU. fp64: the f64 state
    /// rounded to f32 (φ from the float4 positions).
    fn read_state(&mut self, gl: Gl<'_>, with_phi: bool) -> anyhow::Result<(Bodies, Option<Vec<f32>>)> {
        self.leave_mapped_step()?;
        let n = self.n;
        if with_phi && self.phi.is_none() {
            self.phi = Some(DeviceBuffer::alloc(&self.ctx, n)?);
        }
        let mut pos = vec![[0f32; 4]; n];
        let mut storage = self.storage.take().context("backend storage missing")?;
        let phi = self.phi.take();
        let f32_out = (self.gpu.precision() == Precision::F32).then_some(&mut pos[..]);
        let res = self.sync_storage(gl, &mut storage, phi.as_ref().filter(|_| with_phi), f32_out);
        self.storage = Some(storage);
        self.phi = phi;
        res?;
        let vel = match &self.gpu {
            Stepper::F32(g) => g.vel.to_vec()?,
            Stepper::F64(g) => {
                let (p, v) = g.read()?;
                pos = narrow(&p);
                narrow(&v)
            }
            Stepper::Split(r) => {
                let v = r.split.velocities()?;
                self.ctx.make_current().context("cuCtxSetCurrent")?;
                v
            }
        };
        let phi_host = match (&self.phi, with_phi) {
            (Some(phi), true) => Some(phi.to_vec()?),
            _ => None,
        };
        Ok((Bodies { pos, vel }, phi_host))
    }

    /// One frame of the backend's own path (`bench --modes compute` times the kernel alone
    /// instead). See [`SimBackend::simulate`].
    fn frame(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.leave_mapped_step()?;
        let t0 = Instant::now();
        let bytes = self.n * BODY_BYTES;
        let mut storage = self.storage.take().context("backend storage missing")?;
        let res = (|| -> anyhow::Result<SimTimings> {
            let [e0, e1, e2, e3] = &self.events;
            let stream = &self.stream;
            let mut t = SimTimings::default();
            let f: FrameSteps;
            match &mut storage {
                Storage::Map { resources } => {
                    // fp64 writes only the buffer GL did not draw last, and all of it: the roles
                    // hold with any step count ≥ 1 (see the module docs). A step written in parts
                    // over frames (fp32) must not be discarded between them.
                    let role_steps = if self.gpu.precision() == Precision::F64 { steps.min(1) } else { steps };
                    let wanted = match self.opts.settings.map_flags {
                        ResourceFlags::WriteDiscard if self.gpu.writes_back_in_parts() => ResourceFlags::None,
                        w => w,
                    };
                    Self::set_role_map_flags(resources, self.gpu.gl_front(), wanted, role_steps)?;
                    if self.opts.separate_maps {
                        let (a, b) = resources.split_at_mut(1);
                        e0.record(stream)?;
                        let m0 = map_resources(a, stream).context("cuGraphicsMapResources (buffer 0)")?;
                        let m1 = map_resources(b, stream).context("cuGraphicsMapResources (buffer 1)")?;
                        e1.record(stream)?;
                        let pos = [m0.pointer(0)?.require(bytes)?.view(), m1.pointer(0)?.require(bytes)?.view()];
                        // Both buffers stay mapped until the unmaps below, ordered after the kernels on the stream.
                        f = self.gpu.launch_frame(pos, steps, stream)?;
                        e2.record(stream)?;
                        m0.unmap().context("cuGraphicsUnmapResources (buffer 0)")?;
                        m1.unmap().context("cuGraphicsUnmapResources (buffer 1)")?;
                    } else {
                        e0.record(stream)?;
                        let mapping = map_resources(resources, stream).context("cuGraphicsMapResources")?;
                        e1.record(stream)?;
                        // Views of this frame's mapping: a step in progress keeps no pointer.
                        let pos = mapped_views(&mapping, bytes)?;
                        f = self.gpu.launch_frame(pos, steps, stream)?;
                        e2.record(stream)?;
                        mapping.unmap().context("cuGraphicsUnmapResources")?;
                    }
                    e3.record(stream)?;
                    e3.synchronize().context("cuEventSynchronize")?;
                    let waited = Instant::now();
                    t.stream_start = self.clock.at(e0)?;
                    t.clock_residual_us = self.clock.residual_us(e3, waited)?;
                    t.map_ms = ms(e0, e1)?;
                    t.kernel_ms = ms(e1, e2)?;
                    t.unmap_ms = ms(e2, e3)?;
                }
                Storage::Copy { pos, pinned, cur, gl_front } => {
                    self.gpu.set_gl_front(*cur);
                    e0.record(stream)?;
                    f = self.gpu.launch_frame([pos[0].view(), pos[1].view()], steps, stream)?;
                    *cur = self.gpu.gl_front();
                    e1.record(stream)?;
                    if f.done == 0 && f.spread.is_some() {
                        // A step in progress: the positions did not change, GL keeps both uploads
                        // (the shown one and the one before it, for the speed colour).
                        e1.synchronize().context("cuEventSynchronize")?;
                        t.stream_start = self.clock.at(e0)?;
                        t.kernel_ms = ms(e0, e1)?;
                        t.stopped_after = Some(0);
                        t.spread = f.spread;
                        return Ok(t);
                    }
                    let buf = pinned.take().context("the pinned staging buffer was lost by an earlier failed copy")?;
                    let mut copy = match pos[*cur].copy_to_pinned(buf, stream) {
                        Ok(c) => c,
                        Err((e, buf)) => {
                            *pinned = Some(buf);
                            return Err(anyhow::Error::new(e).context("cuMemcpyDtoHAsync"));
                        }
                    };
                    copy.record(e2)?;
                    let host = pinned.insert(copy.wait().context("cuEventSynchronize")?);
                    let up = Instant::now();
                    t.stream_start = self.clock.at(e0)?;
                    t.clock_residual_us = self.clock.residual_us(e2, up)?;
                    // The pinned data is complete: its copy's event was waited on.
                    upload_positions(gl, vbos, 1 - *gl_front, host.as_slice())?;
                    *gl_front = 1 - *gl_front;
                    let upload_host = up.elapsed().as_secs_f64() * 1e3;
                    t.kernel_ms = ms(e0, e1)?;
                    t.upload_ms = Some(ms(e1, e2)?.unwrap_or(0.0) + upload_host);
                }
                Storage::External(x) => (t, f) = x.frame(gl, &mut self.gpu, stream, [e0, e1], &self.clock, steps)?,
            }
            if f.stopped {
                tracing::info!(done = f.done, of = steps, "a long step was stopped by the interrupt; the state of before it is kept");
            }
            t.stopped_after = (f.done < steps).then_some(f.done);
            t.spread = f.spread;
            Ok(t)
        })();
        self.storage = Some(storage);
        let mut t = res?;
        if let Stepper::Split(r) = &self.gpu {
            // The slices compute on their own streams: the kernel time is theirs (the backend's
            // stream only waits for them and copies), and the gather time of the last step.
            if let Some((k, g)) = r.split.last_step_times() {
                t.kernel_ms = Some(k);
                t.gather_ms = Some(g);
            }
            self.ctx.make_current().context("cuCtxSetCurrent")?;
        }
        // The stream is idle here (every path waited for its last event).
        self.clock.rebase_if_old(&self.stream)?;
        t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(t)
    }

    /// Finishes the half step with the old dt before a dt change (a launch that writes the back
    /// buffer; external storage waits for GL first).
    fn finish_half_step(&mut self, gl: Gl<'_>) -> anyhow::Result<()> {
        let mut storage = self.storage.take().context("backend storage missing")?;
        let r = self.sync_storage(gl, &mut storage, None, None);
        self.storage = Some(storage);
        r
    }
}

/// The storage `s.interop` asks for (`map` or `copy`; `external` is made by [`ExternalStorage::new`]).
fn make_storage(ctx: &Arc<Context>, vbos: &PositionVbos, bodies: &Bodies, s: InteropSettings) -> anyhow::Result<Storage> {
    if vbos.n != bodies.len() {
        bail!("the GL buffers hold {} bodies, the state {}", vbos.n, bodies.len());
    }
    Ok(match s.interop {
        InteropMode::Map => {
            check_register_flags(s.interop, s.register_flags)?;
            let mut resources = Vec::with_capacity(2);
            for b in vbos.buffers {
                resources.push(
                    GraphicsResource::register_gl_buffer(ctx, b.0.get(), s.register_flags.register_bits())
                        .with_context(|| format!("cuGraphicsGLRegisterBuffer of GL buffer {}", b.0.get()))?,
                );
            }
            Storage::Map { resources }
        }
        InteropMode::Copy => {
            let pos = [DeviceBuffer::from_slice(ctx, &bodies.pos)?, DeviceBuffer::alloc(ctx, bodies.len())?];
            let pinned = PinnedBuffer::alloc(ctx, bodies.len(), 0).context("cuMemHostAlloc")?;
            Storage::Copy { pos, pinned: Some(pinned), cur: 0, gl_front: 0 }
        }
        InteropMode::External => bail!("external storage is made by ExternalStorage::new, with the GL context"),
    })
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
        if let Some(Storage::External(x)) = &self.storage {
            x.warn_if_not_released();
        }
    }
}

impl SimBackend for CudaBackend {
    fn label(&self) -> String {
        let mode = match (self.opts.settings.interop, self.opts.separate_maps) {
            (InteropMode::Map, false) => "map",
            (InteropMode::Map, true) => "map-separate",
            (InteropMode::Copy, _) => "copy",
            (InteropMode::External, _) => "external",
        };
        format!("CUDA {mode} {} · {}", self.gpu.precision().name(), self.info.name)
    }

    fn n(&self) -> usize {
        self.n
    }

    fn simulate(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.frame(gl, vbos, steps)
    }

    fn front(&self) -> usize {
        match &self.storage {
            Some(Storage::Copy { gl_front, .. }) => *gl_front,
            _ => self.gpu.gl_front(),
        }
    }

    fn draw_buffers(&self) -> Option<PositionVbos> {
        match &self.storage {
            Some(Storage::External(x)) => x.draw_buffers(self.n),
            _ => None,
        }
    }

    fn after_draw(&mut self, gl: Gl<'_>) {
        if let Some(Storage::External(x)) = &mut self.storage {
            x.after_draw(gl);
        }
    }

    fn release_gl(&mut self, gl: Gl<'_>) {
        if let Some(Storage::External(x)) = &mut self.storage {
            x.release_gl(gl, &self.stream);
        }
    }

    fn synchronized(&self) -> bool {
        self.gpu.synchronized()
    }

    fn nominal_rate(&self) -> (f64, String) {
        let i = &self.info;
        let scale = match self.gpu.precision() {
            Precision::F32 => String::new(),
            Precision::F64 => format!(", × {} for the fp64 kernel", crate::cuda::kernels::F64_RATE_FRACTION),
        };
        let what = format!(
            "{} ({} SMs at {} MHz; the H200's measured 2.0e12 scaled by SMs × clock{scale})",
            i.name,
            i.multiprocessors,
            i.clock_khz / 1000
        );
        (crate::cuda::kernels::nominal_rate_for(i, self.gpu.precision()), what)
    }

    fn set_interrupt(&mut self, requested: fn() -> bool) {
        let rate = crate::cuda::kernels::nominal_rate_for(&self.info, self.gpu.precision());
        self.gpu.set_interrupt(Some(crate::cuda::kernels::Interrupt { requested, rate }));
    }

    fn set_spread(&mut self, on: bool) {
        self.gpu.set_spread(on);
    }

    fn step_in_progress(&self) -> Option<StepProgress> {
        self.gpu.step_in_progress()
    }

    fn abandon_step(&mut self) -> anyhow::Result<()> {
        self.gpu.abandon_step(&self.stream)?;
        Ok(())
    }

    fn set_params(&mut self, gl: Gl<'_>, params: PhysParams) {
        if let Err(e) = self.leave_mapped_step() {
            tracing::warn!("ending the step-mode frame: {e:#}");
        }
        if params != self.gpu.params() {
            // The step in progress was made with the old parameters: it starts again with the new.
            if let Err(e) = self.gpu.abandon_step(&self.stream) {
                tracing::warn!("abandoning the step in progress before the parameter change: {e:#}");
            }
        }
        if params.dt != self.gpu.params().dt && !self.gpu.synchronized() {
            // The half-step velocities belong to the old dt: finish the step with it first.
            if let Err(e) = self.finish_half_step(gl) {
                tracing::warn!("finishing the leapfrog step before the dt change failed: {e:#}");
            }
        }
        self.gpu.set_params(params);
    }

    fn bodies(&mut self, gl: Gl<'_>, _vbos: &PositionVbos) -> anyhow::Result<Bodies> {
        Ok(self.read_state(gl, false)?.0)
    }

    fn diagnostics(&mut self, gl: Gl<'_>, _vbos: &PositionVbos) -> anyhow::Result<Diagnostics> {
        let (b, phi) = self.read_state(gl, true)?;
        let phi = phi.context("potential not computed")?;
        Ok(diagnostics::from_parts(&b.pos, &b.vel, &phi, f64::from(self.gpu.params().g)))
    }

    fn settings(&self) -> Option<InteropSettings> {
        Some(self.opts.settings)
    }

    fn apply_settings(&mut self, _gl: Gl<'_>, vbos: &PositionVbos, s: InteropSettings) -> anyhow::Result<SettingsChange> {
        let old = self.opts.settings;
        if s == old {
            return Ok(SettingsChange::Applied);
        }
        validate_block_size(s.block_size)?;
        if self.gpu.precision() == Precision::F64 {
            crate::cuda::kernels::f64_block(s.block_size)?;
        }
        // Before a rebuild too: a refused registration must not fall back to the CPU backend.
        check_register_flags(s.interop, s.register_flags)?;
        // A step in progress needs the same kernel and buffers to the end: abandon it (before a
        // rebuild too, which reads the state of before it).
        self.gpu.abandon_step(&self.stream)?;
        if s.interop != old.interop || s.stream != old.stream || s.stream_priority != old.stream_priority {
            // A new storage, table (semantics) or stream: a new backend from the current state.
            return Ok(SettingsChange::Rebuild);
        }
        // Nothing may stay mapped while the registration is re-made (step mode ends with it).
        self.leave_mapped_step()?;
        if s.register_flags != old.register_flags {
            if let Some(Storage::Map { .. }) = &self.storage {
                self.storage = None; // unregister before registering again
                let bodies_stub = Bodies { pos: vec![[0.0; 4]; self.n], vel: Vec::new() };
                self.storage = Some(make_storage(&self.ctx, vbos, &bodies_stub, s)?);
            }
        }
        // External storage: register and map flags do not apply (nothing is registered or mapped).
        self.gpu.set_block(s.block_size)?;
        self.opts.settings = s;
        Ok(SettingsChange::Applied)
    }

    fn device_panel(&self) -> Vec<(String, String)> {
        let i = &self.info;
        let s = &self.opts.settings;
        let mut rows = vec![
            ("device".into(), format!("{} (ordinal {})", i.name, i.ordinal)),
            ("uuid".into(), i.uuid.clone().unwrap_or_else(|| "—".into())),
            ("PCI bus id".into(), i.pci_bus_id.clone()),
            ("compute capability".into(), format!("{}.{}", i.compute_capability.0, i.compute_capability.1)),
            ("memory".into(), format!("{:.1} GiB", i.total_memory_bytes as f64 / (1u64 << 30) as f64)),
            ("SMs × clock".into(), format!("{} × {} MHz", i.multiprocessors, i.clock_khz / 1000)),
            ("L2".into(), format!("{} MiB", i.l2_cache_bytes >> 20)),
            ("shared / block, / SM".into(), format!("{} KiB, {} KiB", i.shared_memory_per_block_bytes >> 10, i.shared_memory_per_multiprocessor_bytes >> 10)),
            ("max threads / block".into(), i.max_threads_per_block.to_string()),
            ("warp size".into(), i.warp_size.to_string()),
            ("unified addressing".into(), i.unified_addressing.to_string()),
            ("driver".into(), format!("CUDA {}", interop::entry::cuda_version_string(self.ctx.api().driver_version()))),
            ("default-stream semantics".into(), self.ctx.api().semantics().to_string()),
            ("context".into(), format!("{:?}, sched {:?}", self.ctx.kind(), self.opts.ctx_sched)),
            ("stream".into(), format!("{:?} (priority {})", s.stream, self.stream.priority().unwrap_or(0))),
        ];
        match &self.storage {
            Some(Storage::External(x)) => rows.extend(x.panel_rows()),
            _ => rows.push(("register / map flags".into(), format!("{} / {}", s.register_flags.name(), s.map_flags.name()))),
        }
        let auto = if s.block_size == 0 { " (auto)" } else { "" };
        let (kernel, attributes) = match &self.gpu {
            Stepper::F32(g) => {
                let l = g.launch_in_use();
                let k = g.kernels.step_kernel(l);
                // A stream-K launch: the attributes of its first half, the kernel that carries the work.
                let f = k.and_then(|k| if l.stream_k.is_some() { k.stream_k_function() } else { Some(k.function()) });
                (format!("{} · {}{auto}", g.kernels.source(), l.describe()), f.map(|f| f.attributes()))
            }
            Stepper::F64(g) => (
                format!(
                    "{} · fp64 {} + nbody_to_float4 · block {}{auto}",
                    g.kernels.source(),
                    g.step_kernel().function().name(),
                    g.block
                ),
                Some(g.step_kernel().function().attributes()),
            ),
            Stepper::Split(r) => {
                let l = r.split.launch();
                (
                    format!("{} · {}{auto}", r.kernels.source(), l.describe()),
                    r.kernels.step_kernel(l).map(|k| k.function().attributes()),
                )
            }
        };
        if let Stepper::Split(r) = &self.gpu {
            let layout = r.split.layout();
            let devices = r.split.devices();
            let mut gpus = devices.clone();
            gpus.dedup();
            rows.push((
                "GPUs · slices".into(),
                format!(
                    "{} GPU(s) {:?} · {} slices of {} bodies (devices {:?}) · render GPU {} {}",
                    gpus.len(),
                    gpus,
                    layout.slices,
                    layout.len,
                    devices,
                    r.render,
                    if r.split.renders_from_own_slice(r.render) { "computes too" } else { "only draws (peer copy in)" }
                ),
            ));
            rows.push(("gather".into(), r.split.gather().describe()));
        }
        rows.push(("precision".into(), self.gpu.precision().name().into()));
        rows.push(("kernel".into(), kernel));
        rows.push(("GL".into(), format!("{} · {}", self.gl_info.vendor, self.gl_info.renderer)));
        if let Some(Ok(a)) = attributes {
            rows.push(("kernel registers / local".into(), format!("{} / {} B", a.registers, a.local_bytes)));
        }
        rows
    }

    fn entry_points(&self) -> Vec<[String; 5]> {
        entry_rows(self.ctx.api())
    }

    fn cuda_context(&self) -> Option<Arc<Context>> {
        Some(self.ctx.clone())
    }

    fn step_mode_unavailable(&self) -> Option<String> {
        self.step_support().err()
    }

    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()> {
        self.set_stepwise(on)
    }

    fn next_step(&mut self, _gl: Gl<'_>, _vbos: &PositionVbos, steps: u32) -> anyhow::Result<super::step::FrameStep> {
        self.step_once(steps)
    }

    fn step_view(&self) -> Option<super::step::StepView> {
        self.stepwise_view()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_flags_that_break_ping_pong_are_refused_for_map() {
        for (flags, promise) in [(ResourceFlags::ReadOnly, "will not write"), (ResourceFlags::WriteDiscard, "will not read")] {
            let e = check_register_flags(InteropMode::Map, flags).expect_err("refused").to_string();
            let name = flags.name();
            for want in [
                format!("--register-flags {name} cannot be used"),
                promise.to_string(),
                "ping-pong".to_string(),
                "read by the kernel in one frame and written in the next".to_string(),
                format!("--register-flags none with --map-flags {name}"),
            ] {
                assert!(e.contains(&want), "{name}: {want:?} missing from: {e}");
            }
        }
    }

    #[test]
    fn register_flags_none_is_accepted_and_other_storages_ignore_the_flag() {
        for interop in [InteropMode::Map, InteropMode::Copy, InteropMode::External] {
            check_register_flags(interop, ResourceFlags::None).expect("none is always accepted");
        }
        for flags in [ResourceFlags::ReadOnly, ResourceFlags::WriteDiscard] {
            // copy and external register nothing (external's fallback to map is checked in select).
            check_register_flags(InteropMode::Copy, flags).expect("copy registers nothing");
            check_register_flags(InteropMode::External, flags).expect("external registers nothing");
        }
    }

    #[test]
    fn role_map_flags_are_the_documented_ones() {
        use ResourceFlags::{None as N, ReadOnly as Ro, WriteDiscard as Wd};
        // (wanted, is_front, steps) → flag: read-only on the buffer the kernel only reads (front),
        // write-discard on the one it only writes (back), only with one step per frame.
        let table = [
            (N, true, 1, map_flags::NONE),
            (N, false, 1, map_flags::NONE),
            (Ro, true, 1, map_flags::READ_ONLY),
            (Ro, false, 1, map_flags::NONE),
            (Wd, true, 1, map_flags::NONE),
            (Wd, false, 1, map_flags::WRITE_DISCARD),
            (Ro, true, 2, map_flags::NONE),
            (Ro, false, 2, map_flags::NONE),
            (Wd, true, 2, map_flags::NONE),
            (Wd, false, 2, map_flags::NONE),
            (Wd, false, 8, map_flags::NONE),
            (N, false, 8, map_flags::NONE),
        ];
        for (wanted, is_front, steps, want) in table {
            assert_eq!(role_map_flag(wanted, is_front, steps), want, "{wanted:?}, front {is_front}, {steps} steps");
        }
        assert_ne!(map_flags::READ_ONLY, map_flags::WRITE_DISCARD);
    }
}
