//! The slices as a CUDA backend runs them ([`SlicedRender`]): the [`SlicedStepper`] plus the
//! render side (the GL device's context and kernels), as an [`Integrator`].

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use interop::{Context, Stream};

use super::SlicedStepper;
use crate::cuda::integrator::{Float4Pair, Integrator, KernelFacts, SlicesFacts};
use crate::cuda::kernel_set::Kernels;
use crate::cuda::settings::Precision;
use kernels::launch_rule::LaunchConfig;
use sim::partial::FrameSteps;
use sim::PhysParams;

/// A [`SlicedStepper`] as a CUDA backend runs it: the state in the slices' own buffers, copied
/// into one of the two float4 buffers GL draws after each frame's steps.
pub struct SlicedRender {
    slices: SlicedStepper,
    /// Kernels loaded in the GL device's context (the potential of the diagnostics).
    kernels: Kernels,
    /// The GL device's context.
    ctx: Arc<Context>,
    /// The GL device's CUDA ordinal.
    render: i32,
    /// Index (0/1) of the float4 buffer that received the newest positions.
    front: usize,
}

impl SlicedRender {
    /// The slices, drawn from the GL device `render` whose context is `ctx` and kernels `kernels`.
    pub fn new(slices: SlicedStepper, kernels: Kernels, ctx: Arc<Context>, render: i32) -> SlicedRender {
        SlicedRender { slices, kernels, ctx, render, front: 0 }
    }

    /// The slices.
    pub fn stepper(&self) -> &SlicedStepper {
        &self.slices
    }

    /// The slices made their contexts current: the GL device's again.
    fn back_to_render(&self) -> Result<()> {
        self.ctx.make_current().context("cuCtxSetCurrent")
    }
}

impl Integrator for SlicedRender {
    fn precision(&self) -> Precision {
        Precision::F32
    }

    fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    fn launch_config(&self) -> LaunchConfig {
        self.slices.launch()
    }

    fn kernel_facts(&self, auto: &str) -> KernelFacts {
        let l = self.slices.launch();
        let layout = self.slices.layout();
        let devices = self.slices.devices();
        let mut gpus = devices.clone();
        gpus.dedup();
        KernelFacts {
            kernel: format!("{} · {}{auto}", self.kernels.source(), l.describe()),
            attributes: self.kernels.step_kernel(l).and_then(|k| k.function().attributes().ok()),
            slices: Some(SlicesFacts {
                gpus,
                slices: layout.slices,
                len: layout.len,
                devices,
                render: self.render,
                render_computes: self.slices.renders_from_own_slice(self.render),
                gather: self.slices.gather().describe(),
            }),
        }
    }

    fn params(&self) -> PhysParams {
        self.slices.params()
    }

    fn set_params(&mut self, params: PhysParams) {
        self.slices.set_params(params);
    }

    fn set_block(&mut self, block: u32) -> Result<()> {
        bail!(
            "the block size of a run split over slices is fixed when it starts (the slices are aligned to its blocks); \
             restart with --block-size {block}"
        )
    }

    fn synchronized(&self) -> bool {
        self.slices.synchronized()
    }

    fn front(&self) -> usize {
        self.front
    }

    /// Whole steps on the slices, then the copy of the positions into the float4 buffer GL did
    /// not draw last (a step over slices is one launch per slice: never split, never stopped).
    fn launch_frame(&mut self, pos: Float4Pair<'_>, steps: u32, stream: &Stream) -> Result<FrameSteps> {
        if steps > 0 {
            self.slices.launch_steps(steps)?;
            self.back_to_render()?;
            let to = 1 - self.front;
            self.slices.show(pos[to], &self.ctx, self.render, stream)?;
            self.front = to;
        }
        Ok(FrameSteps { done: steps, stopped: false, parts: None })
    }

    fn sync_in(&mut self, _pos: Float4Pair<'_>, _stream: &Stream) -> Result<()> {
        self.slices.sync_in()?;
        self.back_to_render()
    }

    fn read_back(&self, _pos: &mut Vec<[f32; 4]>) -> Result<Vec<[f32; 4]>> {
        let v = self.slices.velocities()?;
        self.back_to_render()?;
        Ok(v)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
