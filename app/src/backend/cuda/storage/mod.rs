//! Where a CUDA backend's positions live ([`Storage`]), one implementation per file:
//! - `map` ([`map::MapStorage`]): both GL VBOs registered with CUDA and mapped every frame;
//! - `copy` ([`copy::CopyStorage`]): two device buffers, the newest copied to pinned host memory
//!   and uploaded with `glBufferSubData`;
//! - `external` ([`external::ExternalStorage`]): two CUDA allocations that GL imports and draws.
//!
//! A storage gives the integrator ([`crate::cuda::integrator::Integrator`]) its two float4
//! buffers each frame, around the frame's launches: map → launches → unmap, launches → copy →
//! upload, or fence wait → launches → event wait.

pub mod copy;
pub mod external;
mod external_sync;
pub mod map;

pub use external_sync::semaphores_unavailable;

use anyhow::Result;
use interop::{DeviceBuffer, DevicePtr, Event, Stream};

use crate::backend::{InteropFacts, InteropSettings, PositionVbos, SimTimings};
use crate::cuda::clock::GpuClock;
use crate::cuda::gpu_stepper::FrameSteps;
use crate::cuda::integrator::Integrator;
use crate::cuda::settings::ResourceFlags;
use crate::gfx::gl::Gl;

/// What a storage's frame works with: the backend's integrator, stream, events and clock.
pub struct FrameCx<'a> {
    /// The integrator that launches the steps.
    pub gpu: &'a mut dyn Integrator,
    /// The frame's stream.
    pub stream: &'a Stream,
    /// Four events recorded around the frame's work (map, kernel, unmap or copy).
    pub events: &'a [Event; 4],
    /// Places the events on the host clock.
    pub clock: &'a GpuClock,
    /// Number of bodies N.
    pub n: usize,
    /// `--map-flags`: the map flag asked for, given to the buffers by their role.
    pub map_flags: ResourceFlags,
    /// Map each buffer with its own call (the bench's `map-separate`).
    pub separate_maps: bool,
}

/// The launch of the potential kernel (the diagnostics): the step kernel's block size (fp32,
/// as the step in progress ran it) or the fp64 one's (≤ 256), and the softening, both taken
/// before [`Storage::sync`] finishes a step in progress.
#[derive(Debug, Clone, Copy)]
pub struct PotentialLaunch {
    block: u32,
    softening: f32,
}

impl FrameCx<'_> {
    /// The potential's launch as the integrator stands now ([`PotentialLaunch`]).
    pub fn potential_launch(&self) -> PotentialLaunch {
        PotentialLaunch { block: self.gpu.launch_config().block, softening: self.gpu.params().softening }
    }

    /// The potential of the positions at `pos` (`[N][4]` f32) into `phi` (`[N]` f32; the
    /// diagnostics) with `launch`.
    ///
    /// # Errors
    /// The launch fails.
    pub fn potential(&self, launch: PotentialLaunch, pos: DevicePtr<'_, [f32; 4]>, phi: &DeviceBuffer<f32>) -> Result<()> {
        self.gpu.kernels().launch_potential(launch.block, self.n, pos, phi.view(), launch.softening, self.stream)
    }
}

/// One storage of a CUDA backend's two position buffers.
pub trait Storage {
    /// One frame: the integrator's launches for `steps` between the storage's own steps, timed
    /// by the events. `None` steps: a step in progress left the positions as they were and the
    /// timings are final.
    ///
    /// # Errors
    /// A CUDA or GL failure, the failing call named.
    fn frame(&mut self, cx: FrameCx<'_>, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> Result<(SimTimings, Option<FrameSteps>)>;
    /// The rest of a step in progress and the synchronising half kick (if the velocities are
    /// half a step ahead), with `phi` (`[N]` f32) the potential of the front buffer, then a
    /// stream sync, and with `out` (`[N][4]` f32) a copy of the front positions into it.
    ///
    /// # Errors
    /// A CUDA or GL failure, named.
    fn sync(&mut self, cx: FrameCx<'_>, gl: Gl<'_>, phi: Option<&DeviceBuffer<f32>>, out: Option<&mut [[f32; 4]]>) -> Result<()>;
    /// Runs `f` on the shown positions (`[N][4]` f32; `front` is the integrator's): the density
    /// view's splat reads them.
    ///
    /// # Errors
    /// `f`'s error, or mapping the shown buffer fails.
    fn with_shown(&mut self, front: usize, n: usize, stream: &Stream, f: &mut dyn FnMut(DevicePtr<'_, [f32; 4]>) -> Result<()>) -> Result<()>;
    /// Index (0/1) of the GL buffer GL draws: the integrator's front unless the storage keeps
    /// its own (copy).
    fn front(&self, gpu: &dyn Integrator) -> usize {
        gpu.front()
    }
    /// How positions reach GL, for the device panel.
    fn interop_facts(&self, settings: &InteropSettings) -> InteropFacts {
        InteropFacts::Flags { register: settings.register_flags, map: settings.map_flags }
    }
    /// Why step mode cannot walk this storage (`None`: it can).
    fn step_mode_refusal(&self, separate_maps: bool) -> Option<&'static str>;
    /// The map storage, for step mode and a re-registration (`None`: another storage).
    fn as_map(&mut self) -> Option<&mut map::MapStorage> {
        None
    }
    /// The registered buffers, for step mode's view (`None`: nothing registered).
    fn registered(&self) -> Option<&[interop::GraphicsResource]> {
        None
    }
    /// The external storage, for checks that compare its CUDA and GL sides (`None`: another
    /// storage).
    fn as_external(&self) -> Option<&external::ExternalStorage> {
        None
    }
    /// The buffers GL draws instead of the renderer's VBOs ([`crate::backend::Shown::buffers`];
    /// `None`: the VBOs).
    fn draw_buffers(&self, _n: usize) -> Option<PositionVbos> {
        None
    }
    /// Right before GL draws the positions (external storage ordered by semaphores: GL waits
    /// for the last step's).
    fn before_draw(&mut self, _gl: Gl<'_>) {}
    /// Right after the body draw was issued (external storage: the GL fence the next launch
    /// waits on).
    fn after_draw(&mut self, _gl: Gl<'_>) {}
    /// Deletes the GL objects the storage owns, context current, after the stream's work.
    fn release_gl(&mut self, _gl: Gl<'_>, _stream: &Stream) {}
    /// False while the frame's step may still run on the GPU after `frame` returned (external
    /// storage ordered by semaphores): the clock is then not rebased.
    fn stream_idle_after_frame(&self) -> bool {
        true
    }
    /// At teardown: warns when GL objects were not released ([`Storage::release_gl`]).
    fn warn_if_not_released(&self) {}
}

/// Refuses GL position buffers that do not hold the state's `n` bodies (a storage maps them or
/// uploads into them whole).
///
/// # Errors
/// `vbos.n` differs from `n`.
fn check_vbos_hold(vbos: &PositionVbos, n: usize) -> Result<()> {
    if vbos.n != n {
        anyhow::bail!("the GL buffers hold {} bodies, the state {n}", vbos.n);
    }
    Ok(())
}

/// The storage `s.interop` asks for, `map` or `copy` (`external` is made by
/// [`external::ExternalStorage::new`], with the GL context).
///
/// # Errors
/// The GL buffers and the state differ in N; a registration or allocation fails; `external`.
pub fn make_storage(
    ctx: &std::sync::Arc<interop::Context>,
    vbos: &PositionVbos,
    bodies: &sim::Bodies,
    s: crate::backend::InteropSettings,
) -> Result<Box<dyn Storage>> {
    use crate::cuda::settings::InteropMode;
    Ok(match s.interop {
        InteropMode::Map => Box::new(map::MapStorage::register(ctx, vbos, bodies.len(), s.register_flags)?),
        InteropMode::Copy => Box::new(copy::CopyStorage::new(ctx, vbos, bodies)?),
        InteropMode::External => anyhow::bail!("external storage is made by ExternalStorage::new, with the GL context"),
    })
}
