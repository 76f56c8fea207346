//! Step mode's CUDA side: one frame of `--interop map` taken one step at a time, the mapping held
//! between the steps ([`StepwiseFrame`]); in the density view the image workflow's steps follow
//! (`image_steps`). The states are [`crate::backend::step`]'s.

use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::OwnedMapping;

use super::image_steps::DensityTarget;
use super::storage::map::{set_role_map_flags, MapStorage};
use super::{single_f32, sliced, CudaBackend, NotSingleF32};
use crate::backend::step::{BufferView, ImageView, Side, StepState, StepView, WorkflowStep};
use crate::cuda::integrator::Integrator;
use crate::cuda::kernel_set::BODY_BYTES;
use crate::cuda::settings::Precision;
use crate::gfx::gl::Gl;

/// Why step mode does not run with `--precision f64`.
pub const STEP_MODE_F64: &str = "step mode walks the fp32 workflow (map → pointers → one step kernel in the mapped buffers → \
     unmap); with --precision f64 the state lives in CUDA buffers and a conversion kernel writes GL's buffer, so use \
     --precision f32 for step mode";

/// Why step mode refuses a run split over slices or GPUs.
pub const STEP_MODE_SPLIT: &str = "step mode walks one step kernel in the mapped buffers; a run split over slices or GPUs (--gpus, \
     --slices-per-gpu, --render-gpu-computes no, --gather nccl) computes in the slices' own buffers and copies into GL: leave \
     those options out (--gpus 1 --slices-per-gpu 1 --render-gpu-computes yes --gather auto) for step mode";

/// A frame of `--interop map` taken one step at a time: an explicit state machine
/// ([`StepState`]) that owns the mapping between the steps.
///
/// Invariant: `mapping` is `Some` exactly in the mapped states (`Mapped`, `Pointers`,
/// `Launched`) — it holds the backend's registered resources then — and `ptrs` exactly in
/// `Pointers` and `Launched`.
pub struct StepwiseFrame {
    pub(super) state: StepState,
    mapping: Option<OwnedMapping>,
    ptrs: Option<[interop::sys::CUdeviceptr; 2]>,
    /// The buffer GL draws (the newest positions already drawn).
    pub(super) shown: usize,
    /// The buffer the kernel reads this frame (the front at the map).
    read: usize,
    /// What the last step did.
    pub(super) last: Option<String>,
    /// Steps per frame the map flags were set for at the map step: the launch step uses the
    /// same count, so a flag set by role (READ_ONLY on the buffer the kernel only reads) holds.
    steps: u32,
    /// The density view's target as the last frame drew it (`None`: the points view, so the
    /// frame ends with the buffer's draw).
    pub(super) density: Option<DensityTarget>,
}

impl std::fmt::Debug for StepwiseFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepwiseFrame").field("state", &self.state).field("shown", &self.shown).finish_non_exhaustive()
    }
}

impl StepwiseFrame {
    /// A frame that starts unmapped, GL drawing buffer `front`.
    fn new(front: usize) -> StepwiseFrame {
        StepwiseFrame { state: StepState::Unmapped, mapping: None, ptrs: None, shown: front, read: front, last: None, steps: 1, density: None }
    }
}

impl CudaBackend {
    /// Ok when step mode can run: registered buffers mapped in one call.
    pub(super) fn step_support(&self) -> Result<(), String> {
        match self.gpu.precision() {
            Precision::F64 => return Err(STEP_MODE_F64.into()),
            Precision::F32 if sliced(self.gpu.as_ref()).is_some() => return Err(STEP_MODE_SPLIT.into()),
            Precision::F32 => {}
        }
        match self.storage.as_ref().map(|s| s.step_mode_refusal(self.opts.separate_maps)) {
            Some(None) => Ok(()),
            Some(Some(why)) => Err(why.into()),
            None => Err("the backend has no storage".into()),
        }
    }

    pub(super) fn set_stepwise(&mut self, on: bool) -> anyhow::Result<()> {
        if on {
            self.step_support().map_err(|e| anyhow::anyhow!("step mode needs CUDA map mode: {e}"))?;
            // Step mode runs whole steps: a step in parts over frames is abandoned.
            self.gpu.abandon_step(&self.stream)?;
            if self.stepwise.is_none() {
                self.stepwise = Some(StepwiseFrame::new(self.gpu.front()));
            }
            Ok(())
        } else {
            let r = self.leave_mapped_step();
            self.stepwise = None;
            r
        }
    }

    /// Unmaps a step-mode frame that is mapped and puts the resources back into the storage
    /// (before anything else maps, reads back or re-registers the buffers); an image pass in
    /// progress is ended too. A frame whose kernel ran goes on to `AwaitDraw`, others back to
    /// `Unmapped` ([`StepState::left`]).
    pub(super) fn leave_mapped_step(&mut self) -> anyhow::Result<()> {
        let images = self.leave_image_steps();
        let Some(sw) = self.stepwise.as_mut() else { return images };
        sw.ptrs = None;
        let r = match sw.mapping.take() {
            Some(m) => {
                let (back, r) = m.unmap();
                if let Some(map) = self.storage.as_mut().and_then(|s| s.as_map()) {
                    map.resources = back;
                }
                r
            }
            None => Ok(()),
        };
        if sw.state.mapped() {
            sw.state = sw.state.left();
            sw.last = Some("unmapped early (the buffers were needed elsewhere)".into());
        }
        r.context("cuGraphicsUnmapResources (leaving the step-mode frame)")?;
        images
    }

    /// Takes the next step of the step-mode frame: a step of the buffer workflow, or in the
    /// density view one of the image workflow ([`CudaBackend::image_step`]).
    pub(super) fn step_once(&mut self, gl: Gl<'_>, steps: u32) -> anyhow::Result<WorkflowStep> {
        let images = self.step_images();
        let step = self.stepwise.as_ref().context("not in step mode")?.state.next_step(images);
        let t0 = Instant::now();
        let r = if step.is_image_step() { self.image_step(gl, step) } else { self.buffer_step(step, steps) };
        let host_us = t0.elapsed().as_secs_f64() * 1e6;
        let sw = self.stepwise.as_mut().context("not in step mode")?;
        match r {
            Ok(msg) => {
                sw.state = sw.state.after(step);
                sw.last = Some(format!("{}: {msg} ({host_us:.0} µs host)", step.label()));
                Ok(step)
            }
            Err(e) => {
                sw.last = Some(format!("{} failed: {e:#}", step.label()));
                Err(e)
            }
        }
    }

    /// Takes buffer step `step` (`steps` leapfrog steps at the launch); returns what it did.
    fn buffer_step(&mut self, step: WorkflowStep, steps: u32) -> anyhow::Result<String> {
        let bytes = self.n * BODY_BYTES;
        let sw = self.stepwise.as_mut().context("not in step mode")?;
        let Some(MapStorage { resources }) = self.storage.as_mut().and_then(|s| s.as_map()) else { bail!("step mode needs --interop map") };
        let gpu = match single_f32(self.gpu.as_mut()) {
            Ok(gpu) => gpu,
            Err(NotSingleF32::F64) => bail!("{STEP_MODE_F64}"),
            Err(NotSingleF32::Slices) => bail!("{STEP_MODE_SPLIT}"),
        };
        match step {
            WorkflowStep::Map => {
                set_role_map_flags(resources, gpu.front(), self.opts.settings.map_flags, steps)?;
                // The mapping takes the resources (and a share of the stream) until the unmap step
                // or `leave_mapped_step` hands them back.
                match OwnedMapping::map(std::mem::take(resources), self.stream.clone()) {
                    Ok(m) => sw.mapping = Some(m),
                    Err((e, back)) => {
                        *resources = back;
                        return Err(anyhow::Error::new(e).context("cuGraphicsMapResources"));
                    }
                }
                sw.read = gpu.front();
                sw.steps = steps;
                Ok("both buffers mapped on the frame's stream; CUDA owns them, GL must not touch them".to_string())
            }
            WorkflowStep::GetPointers => {
                let m = sw.mapping.as_ref().context("not mapped")?;
                let pa = m.pointer(0).context("cuGraphicsResourceGetMappedPointer (buffer 0)")?;
                let pb = m.pointer(1).context("cuGraphicsResourceGetMappedPointer (buffer 1)")?;
                let (a, sa, b, sb) = (pa.device_ptr(), pa.size(), pb.device_ptr(), pb.size());
                if sa < bytes || sb < bytes {
                    bail!("mapped sizes {sa} and {sb} bytes, {bytes} needed");
                }
                sw.ptrs = Some([a, b]);
                Ok(format!("device pointers {a:#x} ({sa} B) and {b:#x} ({sb} B)"))
            }
            WorkflowStep::Launch => {
                sw.ptrs.context("no device pointers")?;
                let m = sw.mapping.as_ref().context("not mapped")?;
                // Both buffers stay mapped (`sw.mapping`) until the unmap step, which is ordered
                // after the kernels on the same stream.
                let pos = [m.pointer(0)?.require(bytes)?.view(), m.pointer(1)?.require(bytes)?.view()];
                let steps = sw.steps;
                gpu.launch_steps(pos, steps, &self.stream)?;
                let what = match gpu.tree().map(|t| t.theta()) {
                    // The tree step: 28 launches of its build, then the moments and the walk.
                    Some(theta) => format!(
                        "{steps} tree step(s) launched (θ = {theta}: box, keys, 8 sort passes, tree, groups, moments, walk; 30 launches a step)"
                    ),
                    None => format!("{steps} step(s) launched"),
                };
                Ok(format!("{what}: buffer {} → buffer {}", gpu.front() ^ (steps as usize & 1), gpu.front()))
            }
            WorkflowStep::Unmap => {
                sw.ptrs = None;
                let (back, r) = sw.mapping.take().context("not mapped")?.unmap();
                *resources = back;
                r.context("cuGraphicsUnmapResources")?;
                Ok("unmapped on the stream: GL may use both buffers (its commands are ordered after the kernel)".into())
            }
            WorkflowStep::Draw => {
                sw.shown = gpu.front();
                Ok(format!("GL draws buffer {}", gpu.front()))
            }
            _ => bail!("{step:?} is a step of the image workflow"),
        }
    }

    pub(super) fn stepwise_view(&self) -> Option<StepView> {
        let sw = self.stepwise.as_ref()?;
        let resources = self.storage.as_ref()?.registered()?;
        // While mapped, the resources are inside the step's mapping.
        let resources = sw.mapping.as_ref().map_or(resources, OwnedMapping::resources);
        let mapped = sw.state.mapped();
        let buffers = resources
            .iter()
            .enumerate()
            .map(|(i, r)| BufferView {
                index: i,
                gl_buffer: r.gl_buffer(),
                registered: true,
                mapped,
                side: sw.state.side(),
                role: match (sw.state, i == sw.read, i == sw.shown, i == self.gpu.front()) {
                    (StepState::Mapped | StepState::Pointers, true, _, _) => "front: the kernel will read it".into(),
                    (StepState::Mapped | StepState::Pointers, false, _, _) => "back: the kernel will write it".into(),
                    (StepState::Launched, true, _, _) => "the kernel reads it".into(),
                    (StepState::Launched, false, _, _) => "the kernel writes it".into(),
                    (StepState::AwaitDraw, _, true, _) => "GL draws it (previous positions)".into(),
                    (StepState::AwaitDraw, _, _, true) => "new positions, not drawn yet".into(),
                    (_, _, true, _) => "GL draws it".into(),
                    _ => String::new(),
                },
            })
            .collect();
        let (images, objects) = self.density.as_ref().filter(|_| sw.density.is_some()).map(|v| v.step_images()).unwrap_or_default();
        let images = images
            .into_iter()
            .map(|i| ImageView {
                name: i.name,
                gl_texture: i.gl_texture,
                mapped: i.mapped,
                side: if i.mapped { Side::Cuda } else { Side::Gl },
                array: i.array,
            })
            .collect();
        Some(StepView {
            state: sw.state,
            next: sw.state.next_step(self.step_images()),
            buffers,
            display_front: (!mapped).then_some(sw.shown),
            pointers: sw.ptrs,
            last: sw.last.clone(),
            images,
            objects,
        })
    }
}
