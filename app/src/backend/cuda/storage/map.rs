//! `map` storage ([`MapStorage`]): both GL VBOs registered with CUDA
//! (`cuGraphicsGLRegisterBuffer`) and mapped every frame. One frame (the resource-mapping
//! workflow, `interop::safe::graphics`): `cuGraphicsMapResources` (both buffers, one call, on the
//! frame's stream) → `cuGraphicsResourceGetMappedPointer` (each, size checked) → the launches
//! (reading the front buffer, writing the back one) → `cuGraphicsUnmapResources` (one call, same
//! stream) → GL draws the written buffer. CUDA events around each step give the map, kernel and
//! unmap times.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use interop::sys::map_flags;
use interop::{map_resources, Context, DeviceBuffer, DevicePtr, GraphicsResource, Mapping, Stream};

use super::{FrameCx, Storage};
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
/// `map` ([`crate::backend::select::make_backend`]) the fallback is checked with this function.
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

impl MapStorage {
    /// Registers both VBOs, which must hold `n` bodies, with `flags` (only `none` is accepted:
    /// [`check_register_flags`]).
    ///
    /// # Errors
    /// The VBOs hold another N; register flags other than `none`; `cuGraphicsGLRegisterBuffer`
    /// fails (named with the GL buffer).
    #[doc(alias = "cuGraphicsGLRegisterBuffer")]
    pub fn register(ctx: &Arc<Context>, vbos: &PositionVbos, n: usize, flags: ResourceFlags) -> Result<MapStorage> {
        super::check_vbos_hold(vbos, n)?;
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
pub(in crate::backend::cuda) fn set_role_map_flags(
    resources: &mut [GraphicsResource],
    front: usize,
    wanted: ResourceFlags,
    steps: u32,
) -> Result<()> {
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
#[doc(alias = "cuGraphicsMapResources")]
pub(in crate::backend::cuda) fn with_shown_vbo<R>(
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
        let wanted = match cx.map_flags {
            ResourceFlags::WriteDiscard if gpu.writes_back_in_parts() => ResourceFlags::None,
            w => w,
        };
        set_role_map_flags(&mut self.resources, gpu.front(), wanted, role_steps)?;
        if cx.separate_maps {
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

    fn step_mode_refusal(&self, separate_maps: bool) -> Option<&'static str> {
        separate_maps.then_some("map-separate maps each buffer in its own call")
    }

    fn as_map(&mut self) -> Option<&mut MapStorage> {
        Some(self)
    }

    fn registered(&self) -> Option<&[GraphicsResource]> {
        Some(&self.resources)
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

    // The table below tells read-only from write-discard only if the two flags differ.
    const _: () = assert!(map_flags::READ_ONLY != map_flags::WRITE_DISCARD);

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
    }
}
