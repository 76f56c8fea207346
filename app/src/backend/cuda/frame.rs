//! The CUDA backend's frame: the step launches between map and unmap (or before the copy, or
//! between the fence and event waits of external storage), the readback of the state, and the
//! storages `map` and `copy` are made here.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::{map_resources, Context, DeviceBuffer, GraphicsResource, PinnedBuffer};

use super::{check_register_flags, mapped_views, CudaBackend, Storage};
use crate::backend::{InteropSettings, PositionVbos, SimTimings};
use crate::cuda::gpu_stepper::FrameSteps;
use crate::cuda::kernel_set::BODY_BYTES;
use crate::cuda::session::ms;
use crate::cuda::settings::{InteropMode, Precision, ResourceFlags};
use crate::gfx::buffers::upload_positions;
use crate::gfx::fence::wait_for_gl;
use crate::gfx::gl::Gl;
use sim::Bodies;

impl CudaBackend {
    /// The rest of a step in progress (spread over frames: its remaining launches), the
    /// synchronising half kick (if the velocities are half a step ahead) and, with `phi`,
    /// the potential of the front buffer, then a stream sync, and with `out` a copy of the front
    /// positions into it. External storage waits for GL first when the half kick writes (rule 2
    /// of its module).
    pub(super) fn sync_storage(
        &mut self,
        gl: Gl<'_>,
        storage: &mut Storage,
        phi: Option<&DeviceBuffer<f32>>,
        out: Option<&mut [[f32; 4]]>,
    ) -> anyhow::Result<()> {
        // The potential kernel's block size: the step's (fp32), or the fp64 one's (≤ 256).
        let (n, block, eps) = (self.n, self.gpu.launch_config().block, self.gpu.params().softening);
        let stream = &self.stream;
        let gpu = &mut self.gpu;
        match storage {
            Storage::Map { resources } => {
                Self::set_role_map_flags(resources, gpu.front(), ResourceFlags::None, 1)?;
                let mapping = map_resources(resources, stream).context("cuGraphicsMapResources")?;
                let pos = mapped_views(&mapping, n * BODY_BYTES)?;
                gpu.sync_in(pos, stream)?;
                if let Some(phi) = phi {
                    gpu.kernels().launch_potential(block, n, pos[gpu.front()], phi.view(), eps, stream)?;
                }
                stream.synchronize()?;
                if let Some(out) = out {
                    mapping.pointer(gpu.front())?.copy_to_host(out)?;
                }
                mapping.unmap().context("cuGraphicsUnmapResources")?;
            }
            Storage::Copy { pos, cur, .. } => {
                gpu.set_front(*cur);
                gpu.sync_in([pos[0].view(), pos[1].view()], stream)?;
                *cur = gpu.front();
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
                    gpu.kernels().launch_potential(block, n, x.views()[gpu.front()], phi.view(), eps, stream)?;
                }
                stream.synchronize().context("cuStreamSynchronize")?;
                if let Some(out) = out {
                    x.cuda_buffer(gpu.front()).read_at(0, out).context("cuMemcpyDtoH of the positions")?;
                }
            }
        }
        Ok(())
    }

    /// Positions, velocities (synchronised) and, if asked, φ from the GPU. fp64: the f64 state
    /// rounded to f32 (φ from the float4 positions).
    pub(super) fn read_state(&mut self, gl: Gl<'_>, with_phi: bool) -> anyhow::Result<(Bodies, Option<Vec<f32>>)> {
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
        let vel = self.gpu.read_back(&mut pos)?;
        let phi_host = match (&self.phi, with_phi) {
            (Some(phi), true) => Some(phi.to_vec()?),
            _ => None,
        };
        Ok((Bodies { pos, vel }, phi_host))
    }

    /// One frame of the backend's own path (`bench --modes compute` times the kernel alone
    /// instead). See [`crate::backend::SimBackend::simulate`].
    pub(super) fn frame(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.leave_mapped_step()?;
        let t0 = Instant::now();
        let mut storage = self.storage.take().context("backend storage missing")?;
        let res = (|| -> anyhow::Result<SimTimings> {
            let (mut t, f) = match &mut storage {
                Storage::Map { resources } => self.map_frame(resources, steps)?,
                Storage::Copy { pos, pinned, cur, front } => match self.copy_frame(gl, vbos, pos, pinned, (cur, front), steps)? {
                    (t, Some(f)) => (t, f),
                    // A step in progress: nothing more to say of the frame.
                    (t, None) => return Ok(t),
                },
                Storage::External(x) => {
                    let [e0, e1, ..] = &self.events;
                    x.frame(gl, self.gpu.as_mut(), &self.stream, [e0, e1], &self.clock, steps)?
                }
            };
            if f.stopped {
                tracing::info!(done = f.done, of = steps, "a long step was stopped by the interrupt; the state of before it is kept");
            }
            t.stopped_after = (f.done < steps).then_some(f.done);
            t.spread = f.spread;
            Ok(t)
        })();
        self.storage = Some(storage);
        let mut t = res?;
        if self.gpu.slices().is_some() {
            // The slices compute on their own streams: the kernel time is theirs (the backend's
            // stream only waits for them and copies), and the gather time of the last step.
            if let Some((k, g)) = self.gpu.slice_times() {
                t.kernel_ms = Some(k);
                t.gather_ms = Some(g);
            }
            self.ctx.make_current().context("cuCtxSetCurrent")?;
        }
        // The stream is idle here (every path waited for its last event), but for external
        // storage ordered by semaphores, whose step may still run: its clock is not rebased.
        if !matches!(&self.storage, Some(Storage::External(x)) if x.gpu_side()) {
            self.clock.rebase_if_old(&self.stream)?;
        }
        t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(t)
    }

    /// A frame of map storage: the GL buffers mapped (one by one with `--separate-maps`), the
    /// steps launched, the buffers unmapped; map, kernel and unmap timed by the events.
    fn map_frame(&mut self, resources: &mut [GraphicsResource], steps: u32) -> anyhow::Result<(SimTimings, FrameSteps)> {
        let bytes = self.n * BODY_BYTES;
        let [e0, e1, e2, e3] = &self.events;
        let stream = &self.stream;
        let mut t = SimTimings::default();
        let f: FrameSteps;
        // fp64 writes only the buffer GL did not draw last, and all of it: the roles
        // hold with any step count ≥ 1 (see the module docs). A step written in parts
        // over frames (fp32) must not be discarded between them.
        let role_steps = if self.gpu.precision() == Precision::F64 { steps.min(1) } else { steps };
        let wanted = match self.opts.settings.map_flags {
            ResourceFlags::WriteDiscard if self.gpu.writes_back_in_parts() => ResourceFlags::None,
            w => w,
        };
        Self::set_role_map_flags(resources, self.gpu.front(), wanted, role_steps)?;
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
        Ok((t, f))
    }

    /// A frame of copy storage: the steps launched on the device buffers, the newest positions
    /// copied to the pinned buffer and uploaded to the GL buffer GL did not draw last. `None`
    /// steps: a step in progress left the positions as they were (nothing copied; `t` is final).
    fn copy_frame(
        &mut self,
        gl: Gl<'_>,
        vbos: &PositionVbos,
        pos: &[DeviceBuffer<[f32; 4]>; 2],
        pinned: &mut Option<PinnedBuffer<[f32; 4]>>,
        (cur, front): (&mut usize, &mut usize),
        steps: u32,
    ) -> anyhow::Result<(SimTimings, Option<FrameSteps>)> {
        let [e0, e1, e2, _] = &self.events;
        let stream = &self.stream;
        let mut t = SimTimings::default();
        self.gpu.set_front(*cur);
        e0.record(stream)?;
        let f = self.gpu.launch_frame([pos[0].view(), pos[1].view()], steps, stream)?;
        *cur = self.gpu.front();
        e1.record(stream)?;
        if f.done == 0 && f.spread.is_some() {
            // A step in progress: the positions did not change, GL keeps both uploads
            // (the shown one and the one before it, for the speed colour).
            e1.synchronize().context("cuEventSynchronize")?;
            t.stream_start = self.clock.at(e0)?;
            t.kernel_ms = ms(e0, e1)?;
            t.stopped_after = Some(0);
            t.spread = f.spread;
            return Ok((t, None));
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
        upload_positions(gl, vbos, 1 - *front, host.as_slice())?;
        *front = 1 - *front;
        let upload_host = up.elapsed().as_secs_f64() * 1e3;
        t.kernel_ms = ms(e0, e1)?;
        t.upload_ms = Some(ms(e1, e2)?.unwrap_or(0.0) + upload_host);
        Ok((t, Some(f)))
    }

    /// Finishes the half step with the old dt before a dt change (a launch that writes the back
    /// buffer; external storage waits for GL first).
    pub(super) fn finish_half_step(&mut self, gl: Gl<'_>) -> anyhow::Result<()> {
        let mut storage = self.storage.take().context("backend storage missing")?;
        let r = self.sync_storage(gl, &mut storage, None, None);
        self.storage = Some(storage);
        r
    }
}

/// The storage `s.interop` asks for (`map` or `copy`; `external` is made by [`super::external::ExternalStorage::new`]).
pub(super) fn make_storage(ctx: &Arc<Context>, vbos: &PositionVbos, bodies: &Bodies, s: InteropSettings) -> anyhow::Result<Storage> {
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
            Storage::Copy { pos, pinned: Some(pinned), cur: 0, front: 0 }
        }
        InteropMode::External => bail!("external storage is made by ExternalStorage::new, with the GL context"),
    })
}
