//! `copy` storage ([`CopyStorage`]): two device buffers the steps ping-pong between; each frame
//! the newest is copied to pinned host memory (`cuMemcpyDtoHAsync`) and uploaded to a GL buffer
//! with `glBufferSubData`. Nothing is registered or mapped.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use interop::{Context, DeviceBuffer, DevicePtr, PinnedBuffer, Stream};

use super::{FrameCx, Storage};
use crate::backend::{PositionVbos, SimTimings};
use crate::cuda::gpu_stepper::FrameSteps;
use crate::cuda::integrator::Integrator;
use crate::cuda::session::ms;
use crate::gfx::buffers::upload_positions;
use crate::gfx::gl::Gl;
use sim::Bodies;

/// Two device buffers and a pinned staging buffer; GL gets a copy each frame.
pub struct CopyStorage {
    /// The device position buffers `[N][4]` f32 the steps ping-pong between; the integrator's
    /// front names the newest.
    pos: [DeviceBuffer<[f32; 4]>; 2],
    /// The staging buffer; `None` only while a copy into it is in flight (inside `frame`).
    pinned: Option<PinnedBuffer<[f32; 4]>>,
    /// The GL buffer holding the newest upload; uploads alternate between the two so that the
    /// other one keeps the previous frame's positions (the renderer colours by speed).
    front: usize,
}

impl CopyStorage {
    /// Device buffers holding `bodies.pos` and a pinned buffer of N bodies, for the GL buffers
    /// `vbos`.
    ///
    /// # Errors
    /// `vbos` hold another N; an allocation or the upload fails.
    #[doc(alias = "cuMemHostAlloc")]
    pub fn new(ctx: &Arc<Context>, vbos: &PositionVbos, bodies: &Bodies) -> Result<CopyStorage> {
        super::check_vbos_hold(vbos, bodies.len())?;
        let pos = [DeviceBuffer::from_slice(ctx, &bodies.pos)?, DeviceBuffer::alloc(ctx, bodies.len())?];
        let pinned = PinnedBuffer::alloc(ctx, bodies.len(), 0).context("cuMemHostAlloc")?;
        Ok(CopyStorage { pos, pinned: Some(pinned), front: 0 })
    }

    fn views(&self) -> [DevicePtr<'_, [f32; 4]>; 2] {
        [self.pos[0].view(), self.pos[1].view()]
    }
}

impl Storage for CopyStorage {
    /// The steps launched on the device buffers, the newest positions copied to the pinned
    /// buffer and uploaded to the GL buffer GL did not draw last. A step in progress leaves the
    /// positions as they were: nothing copied, the timings final.
    fn frame(&mut self, cx: FrameCx<'_>, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> Result<(SimTimings, Option<FrameSteps>)> {
        let [e0, e1, e2, _] = cx.events;
        let (stream, gpu) = (cx.stream, cx.gpu);
        let mut t = SimTimings::default();
        e0.record(stream)?;
        let f = gpu.launch_frame(self.views(), steps, stream)?;
        e1.record(stream)?;
        if f.done == 0 && f.parts.is_some() {
            // A step in progress: the positions did not change, GL keeps both uploads
            // (the shown one and the one before it, for the speed colour).
            e1.synchronize().context("cuEventSynchronize")?;
            t.stream_start = cx.clock.at(e0)?;
            t.kernel_ms = ms(e0, e1)?;
            t.stopped_after = Some(0);
            t.parts = f.parts;
            return Ok((t, None));
        }
        let buf = self.pinned.take().context("the pinned staging buffer was lost by an earlier failed copy")?;
        let mut copy = match self.pos[gpu.front()].copy_to_pinned(buf, stream) {
            Ok(c) => c,
            Err((e, buf)) => {
                self.pinned = Some(buf);
                return Err(anyhow::Error::new(e).context("cuMemcpyDtoHAsync"));
            }
        };
        copy.record(e2)?;
        let host = self.pinned.insert(copy.wait().context("cuEventSynchronize")?);
        let up = Instant::now();
        t.stream_start = cx.clock.at(e0)?;
        t.clock_residual_us = cx.clock.residual_us(e2, up)?;
        // The pinned data is complete: its copy's event was waited on.
        upload_positions(gl, vbos, 1 - self.front, host.as_slice())?;
        self.front = 1 - self.front;
        let upload_host = up.elapsed().as_secs_f64() * 1e3;
        t.kernel_ms = ms(e0, e1)?;
        t.upload_ms = Some(ms(e1, e2)?.unwrap_or(0.0) + upload_host);
        Ok((t, Some(f)))
    }

    fn sync(&mut self, cx: FrameCx<'_>, _gl: Gl<'_>, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> Result<()> {
        let launch = cx.potential_launch();
        cx.gpu.sync_in(self.views(), cx.stream)?;
        let newest = cx.gpu.front();
        if let Some(phi) = phi {
            cx.potential(launch, self.pos[newest].view(), phi)?;
        }
        cx.stream.synchronize()?;
        if let Some(out) = out {
            self.pos[newest].copy_to_host(out)?;
        }
        Ok(())
    }

    fn with_shown(&mut self, front: usize, _n: usize, _stream: &Stream, f: &mut dyn FnMut(DevicePtr<'_, [f32; 4]>) -> Result<()>) -> Result<()> {
        f(self.pos[front].view())
    }

    fn front(&self, _gpu: &dyn Integrator) -> usize {
        self.front
    }

    fn step_mode_refusal(&self, _separate_maps: bool) -> Option<&'static str> {
        Some("--interop copy maps nothing (positions reach GL by a copy)")
    }
}
