//! The CUDA backend's frame: the storage's frame around the integrator's launches
//! ([`super::storage::Storage::frame`]), the slices' times, and the readback of the state ([`super::storage::Storage::sync`]).

use std::time::Instant;

use anyhow::Context as _;
use interop::DeviceBuffer;

use super::storage::FrameCx;
use super::CudaBackend;
use crate::backend::{PositionVbos, SimTimings};
use crate::cuda::settings::Precision;
use crate::gfx::gl::Gl;
use sim::Bodies;

impl CudaBackend {
    /// The frame's context for the storage: the integrator, stream, events and clock.
    fn frame_cx(&mut self) -> FrameCx<'_> {
        FrameCx {
            gpu: self.gpu.as_mut(),
            stream: &self.stream,
            events: &self.events,
            clock: &self.clock,
            n: self.n,
            map_flags: self.opts.settings.map_flags,
            separate_maps: self.opts.separate_maps,
        }
    }

    /// The rest of a step in progress (in parts over frames: its remaining launches), the
    /// synchronising half kick (if the velocities are half a step ahead) and, with `phi`,
    /// the potential of the front buffer, then a stream sync, and with `out` a copy of the front
    /// positions into it ([`super::storage::Storage::sync`]).
    fn sync_storage(&mut self, gl: Gl<'_>, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> anyhow::Result<()> {
        let mut storage = self.storage.take().context("backend storage missing")?;
        let r = storage.sync(self.frame_cx(), gl, phi, out);
        self.storage = Some(storage);
        r
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
        let phi = self.phi.take();
        let f32_out = (self.gpu.precision() == Precision::F32).then_some(&mut pos[..]);
        let res = self.sync_storage(gl, phi.as_ref().filter(|_| with_phi), f32_out);
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
            let (mut t, f) = match storage.frame(self.frame_cx(), gl, vbos, steps)? {
                (t, Some(f)) => (t, f),
                // A step in progress: nothing more to say of the frame.
                (t, None) => return Ok(t),
            };
            if f.stopped {
                tracing::info!(done = f.done, of = steps, "a long step was stopped by the interrupt; the state of before it is kept");
            }
            t.stopped_after = (f.done < steps).then_some(f.done);
            t.parts = f.parts;
            Ok(t)
        })();
        self.storage = Some(storage);
        let mut t = res?;
        if let Some(r) = super::sliced(self.gpu.as_ref()) {
            // The slices compute on their own streams: the kernel time is theirs (the backend's
            // stream only waits for them and copies), and the gather time of the last step.
            if let Some((k, g)) = r.stepper().last_step_times() {
                t.kernel_ms = Some(k);
                t.gather_ms = Some(g);
            }
            self.ctx.make_current().context("cuCtxSetCurrent")?;
        }
        // The stream is idle here (every path waited for its last event), but for external
        // storage ordered by semaphores, whose step may still run: its clock is not rebased.
        if self.storage.as_ref().is_none_or(|s| s.stream_idle_after_frame()) {
            self.clock.rebase_if_old(&self.stream)?;
        }
        t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(t)
    }

    /// Finishes the half step with the old dt before a dt change (a launch that writes the back
    /// buffer; external storage waits for GL first).
    pub(super) fn finish_half_step(&mut self, gl: Gl<'_>) -> anyhow::Result<()> {
        self.sync_storage(gl, None, None)
    }
}
