//! The probe's rig: a CUDA context, stream and events, a headless GL context with a registered
//! buffer, and one measured iteration of each variant on them.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use interop::sys::event_flags;
use interop::{map_resources, safe::DeviceInfo, Context, DeviceBuffer, Event, GraphicsResource, Stream};
use kernels::TouchKernel;

use crate::cli::SwitchArgs;
use crate::cuda::session::{ms, open_for_gl};
use crate::gfx::context::HeadlessContext;

use crate::gfx::target::OffscreenTarget;

use super::{Sample, Variant, VBO_BYTES};

/// Everything the probe runs with. Drop order: [`Drop`] unregisters the GL buffer from CUDA,
/// then deletes the GL objects (buffer, query, FBO); then the fields go in order — the CUDA
/// objects (scratch memory, events, kernel, stream, context), then the GL context.
pub(super) struct Rig {
    pub(super) resource: Option<GraphicsResource>,
    pub(super) scratch: DeviceBuffer<u32>,
    pub(super) events: [Event; 4],
    pub(super) touch: TouchKernel,
    pub(super) stream: Stream,
    pub(super) ctx: Arc<Context>,
    pub(super) info: DeviceInfo,
    pub(super) vbo: Option<glow::NativeBuffer>,
    pub(super) query: Option<glow::NativeQuery>,
    pub(super) target: Option<OffscreenTarget>,
    pub(super) gl: HeadlessContext,
}

impl Drop for Rig {
    fn drop(&mut self) {
        // cuGraphicsUnregisterResource before the GL buffer goes; the context is current here.
        self.resource = None;
        let gl = self.gl.gl();
        if let Some(b) = self.vbo.take() {
            gl.delete_buffer(b);
        }
        if let Some(q) = self.query.take() {
            gl.delete_query(q);
        }
        if let Some(t) = self.target.take() {
            t.destroy(self.gl.gl());
        }
    }
}

pub(super) fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// CUDA-event time from `a` to `b` in µs.
pub(super) fn event_us(a: &Event, b: &Event) -> anyhow::Result<Option<f64>> {
    Ok(ms(a, b).context("cuEventElapsedTime")?.map(|t| t * 1e3))
}

/// What `switch` needs and could not get.
pub(super) const NEEDS: &str = "the switch probe needs CUDA and a headless GL context on the same NVIDIA GPU (it runs where \
                     `nbody-interop bench --modes map` runs)";

impl Rig {
    pub(super) fn open(args: &SwitchArgs) -> anyhow::Result<Rig> {
        let gl_ctx = HeadlessContext::new(crate::gfx::context::HEADLESS_CUDA_DEVICE).context("headless GL context").context(NEEDS)?;
        let (ctx, stream, info) = open_for_gl(&gl_ctx.info, args.stream, 0, args.ctx_sched).context(NEEDS)?;
        // CUDA objects first: until the Rig exists, an error drops them and the GL context only.
        // (The Function keeps its module loaded.)
        let touch = TouchKernel::load(&ctx).context("loading the probe kernel")?;
        let mut events = Vec::with_capacity(4);
        for _ in 0..4 {
            events.push(Event::new(&ctx, event_flags::DEFAULT).context("cuEventCreate")?);
        }
        let events: [Event; 4] = events.try_into().map_err(|_| anyhow::anyhow!("four events"))?;
        let scratch = DeviceBuffer::alloc(&ctx, 1).context("cuMemAlloc (4 bytes)")?;
        let mut rig = Rig { resource: None, scratch, events, touch, stream, ctx, info, vbo: None, query: None, target: None, gl: gl_ctx };
        // From here on, Rig's Drop releases what was made, in order, on every error path.
        rig.target = Some(OffscreenTarget::new(rig.gl.gl(), 16, 16).context("offscreen framebuffer")?);
        let gl = rig.gl.gl();
        rig.query = if rig.gl.info.timer_query { gl.create_query().ok() } else { None };
        let vbo = gl.create_buffer().map_err(|e| anyhow::anyhow!("glGenBuffers: {e}"))?;
        rig.vbo = Some(vbo);
        gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
        gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &[0u8; VBO_BYTES], glow::DYNAMIC_DRAW);
        gl.bind_buffer(glow::ARRAY_BUFFER, None);
        rig.resource = Some(GraphicsResource::register_gl_buffer(&rig.ctx, vbo.0.get(), 0).context("cuGraphicsGLRegisterBuffer")?);
        Ok(rig)
    }

    /// The CUDA part: the kernel between events `0` and `1`, then (with `wait`) wait for event 1.
    /// Returns the host µs.
    pub(super) fn cuda_part(&self, i: u32, wait: bool) -> anyhow::Result<f64> {
        let t = Instant::now();
        let [e0, e1, ..] = &self.events;
        e0.record(&self.stream).context("cuEventRecord")?;
        // The rig outlives every launch it queues: each iteration waits for its launches.
        self.touch.launch(self.scratch.view(), i, &self.stream).context("cuLaunchKernel")?;
        e1.record(&self.stream).context("cuEventRecord")?;
        if wait {
            e1.synchronize().context("cuEventSynchronize")?;
        }
        Ok(us(t))
    }

    pub(super) fn kernel_us(&self) -> anyhow::Result<Option<f64>> {
        let [e0, e1, ..] = &self.events;
        event_us(e0, e1)
    }

    /// The GL part: 1×1 scissored clear in a timer query, then `glFinish` and the query's
    /// result (with `finish`), or only `glFlush` (submitted, not waited for). Returns (host µs,
    /// GL µs).
    pub(super) fn gl_part(&self, i: u32, finish: bool) -> (f64, Option<f64>) {
        let gl = self.gl.gl();
        let t = Instant::now();
        if let Some(q) = self.query {
            gl.begin_query(glow::TIME_ELAPSED, q);
        }
        gl.bind_framebuffer(glow::FRAMEBUFFER, self.target.map(|t| t.fbo));
        gl.enable(glow::SCISSOR_TEST);
        gl.scissor(0, 0, 1, 1);
        let c = (i % 256) as f32 / 255.0;
        gl.clear_color(c, 0.0, 0.0, 1.0);
        gl.clear(glow::COLOR_BUFFER_BIT);
        gl.disable(glow::SCISSOR_TEST);
        if self.query.is_some() {
            gl.end_query(glow::TIME_ELAPSED);
        }
        if !finish {
            gl.flush();
            return (us(t), None);
        }
        gl.finish();
        let host = us(t);
        (host, self.gl_us())
    }

    /// The result of the last timer query (waits for it).
    pub(super) fn gl_us(&self) -> Option<f64> {
        let gl = self.gl.gl();
        self.query.map(|q| gl.get_query_parameter_u64(q, glow::QUERY_RESULT) as f64 * 1e-3)
    }

    /// Map the registered buffer, store into it, unmap, wait; fills the CUDA fields of `s`.
    pub(super) fn map_part(&mut self, i: u32, s: &mut Sample) -> anyhow::Result<()> {
        let t = Instant::now();
        let [e0, e1, e2, e3] = &self.events;
        let resource = self.resource.as_mut().context("no registered buffer")?;
        e0.record(&self.stream).context("cuEventRecord")?;
        let call = Instant::now();
        let mapping = map_resources(std::slice::from_mut(resource), &self.stream).context("cuGraphicsMapResources")?;
        s.map_call = Some(us(call));
        e1.record(&self.stream).context("cuEventRecord")?;
        let ptr = mapping.pointer(0).context("cuGraphicsResourceGetMappedPointer")?.require(4)?;
        // The buffer stays mapped until the unmap below, ordered after the launch on the stream.
        self.touch.launch(ptr.view(), i, &self.stream).context("cuLaunchKernel")?;
        e2.record(&self.stream).context("cuEventRecord")?;
        let call = Instant::now();
        mapping.unmap().context("cuGraphicsUnmapResources")?;
        s.unmap_call = Some(us(call));
        e3.record(&self.stream).context("cuEventRecord")?;
        e3.synchronize().context("cuEventSynchronize")?;
        s.cuda_host = Some(us(t));
        s.map = event_us(e0, e1)?;
        s.kernel = event_us(e1, e2)?;
        s.unmap = event_us(e2, e3)?;
        Ok(())
    }

    pub(super) fn iteration(&mut self, v: Variant, i: u32) -> anyhow::Result<Sample> {
        let t = Instant::now();
        let mut s = Sample::default();
        match v {
            Variant::Cuda => {
                s.cuda_host = Some(self.cuda_part(i, true)?);
                s.kernel = self.kernel_us()?;
            }
            Variant::Gl => {
                let (h, g) = self.gl_part(i, true);
                (s.gl_host, s.gl) = (Some(h), g);
            }
            Variant::CudaGl => {
                s.cuda_host = Some(self.cuda_part(i, true)?);
                s.kernel = self.kernel_us()?;
                let (h, g) = self.gl_part(i, true);
                (s.gl_host, s.gl) = (Some(h), g);
            }
            Variant::CudaGlAsync => {
                self.cuda_part(i, false)?;
                self.gl_part(i, false);
                self.gl.gl().finish();
                self.events[1].synchronize().context("cuEventSynchronize")?;
                s.kernel = self.kernel_us()?;
                s.gl = self.gl_us();
            }
            Variant::CudaFence => {
                s.cuda_host = Some(self.cuda_part(i, true)?);
                s.kernel = self.kernel_us()?;
                let t = Instant::now();
                crate::gfx::fence::wait_for_gl(self.gl.gl()).context("GL fence")?;
                s.gl_host = Some(us(t));
            }
            Variant::Map | Variant::MapGl => {
                self.map_part(i, &mut s)?;
                if v == Variant::MapGl {
                    let (h, g) = self.gl_part(i, true);
                    (s.gl_host, s.gl) = (Some(h), g);
                }
            }
            Variant::GlMap => {
                self.gl_part(i, false);
                self.map_part(i, &mut s)?;
                self.gl.gl().finish();
                s.gl = self.gl_us();
            }
        }
        s.total = us(t);
        Ok(s)
    }
}
