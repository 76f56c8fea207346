//! `map` storage ([`MapStorage`]): both GL VBOs registered with CUDA
//! (`cuGraphicsGLRegisterBuffer`) and mapped every frame. One frame (the resource-mapping
//! workflow, `interop::safe::graphics`): `cuGraphicsMapResources` (both buffers, one call, on the
//! frame's stream) → `cuGraphicsResourceGetMappedPointer` (each, size checked) → the launches
//! (reading the front buffer, writing the back one) → `cuGraphicsUnmapResources` (one call, same
//! stream) → GL draws the written buffer. CUDA events around each step give the map, kernel and
//! unmap times.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use interop::sys::map_flags;
use interop::{map_resources, Context, DeviceBuffer, DevicePtr, GraphicsResource, Mapping, Stream};

use super::{FrameCx, Storage};
use crate::backend::cuda::{check_register_flags, role_map_flag, CudaOptions};
use crate::backend::{PositionVbos, SimTimings};
use crate::cuda::gpu_stepper::FrameSteps;
use crate::cuda::kernel_set::BODY_BYTES;
use crate::cuda::session::ms;
use crate::cuda::settings::{InteropMode, Precision, ResourceFlags};
use crate::gfx::gl::Gl;

/// Both GL position buffers registered with CUDA. `resources` is empty while a step-mode frame
/// holds them mapped (they are in its `OwnedMapping` then; the backend's `leave_mapped_step`
/// puts them back).
pub struct MapStorage {
    /// The two registered VBOs, in the order of [`PositionVbos::buffers`].
    pub(in crate::backend::cuda) resources: Vec<GraphicsResource>,
}

impl MapStorage {
    /// Registers both VBOs, which must hold `n` bodies, with `flags` (only `none` is accepted:
    /// [`check_register_flags`]).
    ///
    /// # Errors
    /// The VBOs hold another N; register flags other than `none`; `cuGraphicsGLRegisterBuffer`
    /// fails (named with the GL buffer).
    pub fn register(ctx: &Arc<Context>, vbos: &PositionVbos, n: usize, flags: ResourceFlags) -> Result<MapStorage> {
        if vbos.n != n {
            anyhow::bail!("the GL buffers hold {} bodies, the state {n}", vbos.n);
        }
        check_register_flags(InteropMode::Map, flags)?;
        let mut resources = Vec::with_capacity(2);
        for b in vbos.buffers {
            resources.push(
                GraphicsResource::register_gl_buffer(ctx, b.0.get(), flags.register_bits())
                    .with_context(|| format!("cuGraphicsGLRegisterBuffer of GL buffer {}", b.0.get()))?,
            );
        }
        Ok(MapStorage { resources })
    }
}

/// The two mapped buffers of a mapping as kernel views, each checked to hold `bytes`.
fn mapped_views<'m>(mapping: &'m Mapping<'_>, bytes: usize) -> Result<[DevicePtr<'m, [f32; 4]>; 2]> {
    Ok([mapping.pointer(0)?.require(bytes)?.view(), mapping.pointer(1)?.require(bytes)?.view()])
}

/// Sets the per-frame map flags by role (`cuGraphicsResourceSetMapFlags`, before the map):
/// each buffer gets [`role_map_flag`]`(wanted, i == front, steps)`. A flag is set only when
/// it differs from the one in force (it takes effect at the next map).
///
/// # Errors
/// The driver's error of `cuGraphicsResourceSetMapFlags`.
#[doc(alias = "cuGraphicsResourceSetMapFlags")]
pub fn set_role_map_flags(resources: &mut [GraphicsResource], front: usize, wanted: ResourceFlags, steps: u32) -> Result<()> {
    for (i, r) in resources.iter_mut().enumerate() {
        let bits = role_map_flag(wanted, i == front, steps);
        if r.map_flags() != bits {
            r.set_map_flags(bits).context("cuGraphicsResourceSetMapFlags")?;
        }
    }
    Ok(())
}

/// Maps the shown VBO (`resources[front]`, `[n][4]` f32) on `stream` with the map flag
/// `READ_ONLY` (the density kernels only read it), runs `f` on its positions, then unmaps.
///
/// # Errors
/// The driver's error for the flag, the map, the pointer or the unmap; `f`'s error (the buffer
/// is unmapped first, on drop).
pub fn with_shown_vbo<R>(
    resources: &mut [GraphicsResource],
    front: usize,
    n: usize,
    stream: &Stream,
    f: impl FnOnce(DevicePtr<'_, [f32; 4]>) -> Result<R>,
) -> Result<R> {
    let shown = resources.get_mut(front..=front).context("no shown VBO")?;
    if shown[0].map_flags() != map_flags::READ_ONLY {
        shown[0].set_map_flags(map_flags::READ_ONLY).context("cuGraphicsResourceSetMapFlags (READ_ONLY)")?;
    }
    let mapping = map_resources(shown, stream).context("cuGraphicsMapResources (shown VBO)")?;
    let ptr = mapping.pointer(0).context("cuGraphicsResourceGetMappedPointer")?.require(n * BODY_BYTES)?;
    let r = f(ptr.view())?;
    mapping.unmap().context("cuGraphicsUnmapResources (shown VBO)")?;
    Ok(r)
}

impl Storage for MapStorage {
    /// The GL buffers mapped (one by one with `--separate-maps`), the steps launched, the
    /// buffers unmapped; map, kernel and unmap timed by the events.
    fn frame(&mut self, cx: FrameCx<'_>, _gl: Gl<'_>, _vbos: &PositionVbos, steps: u32) -> Result<(SimTimings, Option<FrameSteps>)> {
        let bytes = cx.n * BODY_BYTES;
        let [e0, e1, e2, e3] = cx.events;
        let (stream, gpu) = (cx.stream, cx.gpu);
        let mut t = SimTimings::default();
        let f: FrameSteps;
        // fp64 writes only the buffer GL did not draw last, and all of it: the roles
        // hold with any step count ≥ 1 (see the backend's docs). A step written in parts
        // over frames (fp32) must not be discarded between them.
        let role_steps = if gpu.precision() == Precision::F64 { steps.min(1) } else { steps };
        let wanted = match cx.opts.settings.map_flags {
            ResourceFlags::WriteDiscard if gpu.writes_back_in_parts() => ResourceFlags::None,
            w => w,
        };
        set_role_map_flags(&mut self.resources, gpu.front(), wanted, role_steps)?;
        if cx.opts.separate_maps {
            let (a, b) = self.resources.split_at_mut(1);
            e0.record(stream)?;
            let m0 = map_resources(a, stream).context("cuGraphicsMapResources (buffer 0)")?;
            let m1 = map_resources(b, stream).context("cuGraphicsMapResources (buffer 1)")?;
            e1.record(stream)?;
            let pos = [m0.pointer(0)?.require(bytes)?.view(), m1.pointer(0)?.require(bytes)?.view()];
            // Both buffers stay mapped until the unmaps below, ordered after the kernels on the stream.
            f = gpu.launch_frame(pos, steps, stream)?;
            e2.record(stream)?;
            m0.unmap().context("cuGraphicsUnmapResources (buffer 0)")?;
            m1.unmap().context("cuGraphicsUnmapResources (buffer 1)")?;
        } else {
            e0.record(stream)?;
            let mapping = map_resources(&mut self.resources, stream).context("cuGraphicsMapResources")?;
            e1.record(stream)?;
            // Views of this frame's mapping: a step in progress keeps no pointer.
            let pos = mapped_views(&mapping, bytes)?;
            f = gpu.launch_frame(pos, steps, stream)?;
            e2.record(stream)?;
            mapping.unmap().context("cuGraphicsUnmapResources")?;
        }
        e3.record(stream)?;
        e3.synchronize().context("cuEventSynchronize")?;
        let waited = Instant::now();
        t.stream_start = cx.clock.at(e0)?;
        t.clock_residual_us = cx.clock.residual_us(e3, waited)?;
        t.map_ms = ms(e0, e1)?;
        t.kernel_ms = ms(e1, e2)?;
        t.unmap_ms = ms(e2, e3)?;
        Ok((t, Some(f)))
    }

    fn sync(&mut self, cx: FrameCx<'_>, _gl: Gl<'_>, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> Result<()> {
        let launch = cx.potential_launch();
        set_role_map_flags(&mut self.resources, cx.gpu.front(), ResourceFlags::None, 1)?;
        let mapping = map_resources(&mut self.resources, cx.stream).context("cuGraphicsMapResources")?;
        let pos = mapped_views(&mapping, cx.n * BODY_BYTES)?;
        cx.gpu.sync_in(pos, cx.stream)?;
        let front = cx.gpu.front();
        if let Some(phi) = phi {
            cx.potential(launch, pos[front], phi)?;
        }
        cx.stream.synchronize()?;
        if let Some(out) = out {
            mapping.pointer(front)?.copy_to_host(out)?;
        }
        mapping.unmap().context("cuGraphicsUnmapResources")?;
        Ok(())
    }

    fn with_shown(&mut self, front: usize, n: usize, stream: &Stream, f: &mut dyn FnMut(DevicePtr<'_, [f32; 4]>) -> Result<()>) -> Result<()> {
        with_shown_vbo(&mut self.resources, front, n, stream, f)
    }

    fn step_mode_refusal(&self, opts: &CudaOptions) -> Option<&'static str> {
        opts.separate_maps.then_some("map-separate maps each buffer in its own call")
    }

    fn as_map(&mut self) -> Option<&mut MapStorage> {
        Some(self)
    }

    fn registered(&self) -> Option<&[GraphicsResource]> {
        Some(&self.resources)
    }
}
