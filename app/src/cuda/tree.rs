//! The Barnes–Hut tree solver on the GPU ([`GpuTree`]): the tree code's kernels
//! (`kernels::TreeKernels`, `kernels/README.md`, "Tree code") and their workspace, run
//! as one leapfrog step: build (box, Morton keys, radix sort, Karras's radix tree), moments
//! (monopole and quadrupole), then a walk per group of 32 bodies that updates each body at its
//! own index, so the buffers GL draws keep their order.

use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::{Context, Event, Stream};
use kernels::{StepScalars, TreeCounts, TreeKernels, TreeWorkspace, MAX_TREE_BODIES};

use super::kernel_set::{check_bytes_fit, eps2, Kernels, StepBuffers};
use sim::PhysParams;

/// The times of a step's three phases on the GPU (ms, from CUDA events).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TreePhases {
    /// Box, keys, sort and tree (ms).
    pub build_ms: f32,
    /// Moments (ms).
    pub moments_ms: f32,
    /// Walk and leapfrog update (ms).
    pub walk_ms: f32,
}

impl TreePhases {
    /// The whole step (ms).
    pub fn total_ms(&self) -> f32 {
        self.build_ms + self.moments_ms + self.walk_ms
    }
}

/// The tree solver of one stepper: kernels, workspace, opening angle, and optionally events
/// around the phases.
pub struct GpuTree {
    kernels: TreeKernels,
    ws: TreeWorkspace,
    /// Opening angle θ (dimensionless, ≥ 0): a node of side `l` is opened when `l ≥ θ d`, `d`
    /// from its centre of mass to the group's box (`kernels/README.md`, "Tree code").
    theta: f32,
    /// Four events (start, built, moments done, walked) recorded around each step when timing.
    events: Option<[Event; 4]>,
}

impl GpuTree {
    /// The tree solver for `n` bodies with opening angle `theta`: its kernels looked up in the
    /// loaded module, its memory checked against the free memory and allocated.
    ///
    /// # Errors
    /// The PTX lacks the tree kernels; θ is negative or not finite; N is out of range; the
    /// workspace does not fit (the message gives the estimate, the free memory and the remedy);
    /// an allocation fails.
    pub fn new(kernels: &Kernels, ctx: &Arc<Context>, n: usize, theta: f32) -> anyhow::Result<Self> {
        let theta = sim::tree::check_theta(theta).map_err(anyhow::Error::msg)?;
        let tree = kernels.tree()?;
        if n == 0 || n > MAX_TREE_BODIES {
            bail!("the GPU tree takes 1 to {MAX_TREE_BODIES} bodies, not {n}: use --solver direct for this N");
        }
        let walk_grid = tree.walk_grid(kernels.sms()).context("cuOccupancyMaxActiveBlocksPerMultiprocessor (the tree walk)")?;
        let need = TreeWorkspace::bytes_for(n, walk_grid);
        tracing::info!(bodies = n, mib = need as f64 / 1048576.0, "GPU tree workspace");
        let who = format!("the tree of {n} bodies needs");
        check_bytes_fit(ctx, need, &who, "besides the bodies", "use fewer bodies, or --solver direct")?;
        let ws = TreeWorkspace::alloc(ctx, n, walk_grid).context("cuMemAlloc (the tree's workspace)")?;
        Ok(GpuTree { kernels: tree, ws, theta, events: None })
    }

    /// The opening angle θ.
    pub fn theta(&self) -> f32 {
        self.theta
    }

    /// Sets the opening angle θ (taken from the next step).
    ///
    /// # Errors
    /// θ negative or not finite.
    pub fn set_theta(&mut self, theta: f32) -> anyhow::Result<()> {
        self.theta = sim::tree::check_theta(theta).map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// Records CUDA events around the phases of every step from now on ([`GpuTree::phases`]).
    ///
    /// # Errors
    /// `cuEventCreate` fails.
    pub fn time_phases(&mut self, ctx: &Arc<Context>) -> anyhow::Result<()> {
        let make = || Event::new(ctx, 0).context("cuEventCreate");
        self.events = Some([make()?, make()?, make()?, make()?]);
        Ok(())
    }

    /// One leapfrog step of all bodies by the tree: `bufs.0` (the positions the tree is built
    /// from) → `bufs.1`, velocities `bufs.2` updated in place; `drift` and `kick` as the direct
    /// kernels' (`sim::Leapfrog`). On `stream`, asynchronous.
    ///
    /// # Errors
    /// A launch fails or is refused (buffers shorter than N or overlapping).
    pub fn step(&mut self, bufs: StepBuffers<'_>, drift: f32, kick: f32, params: PhysParams, stream: &Stream) -> anyhow::Result<()> {
        let mark = |k: usize| -> anyhow::Result<()> {
            if let Some(e) = &self.events {
                e[k].record(stream).context("cuEventRecord")?;
            }
            Ok(())
        };
        mark(0)?;
        self.kernels.build(&mut self.ws, bufs.0, stream).context("the tree's build (nbody_tree_bounds … nbody_tree_build)")?;
        mark(1)?;
        self.kernels.moments(&mut self.ws, stream).context("nbody_tree_moments")?;
        mark(2)?;
        let s = StepScalars { dt_drift: drift, kick, eps2: eps2(params.softening), g: params.g };
        self.kernels.walk(&mut self.ws, bufs, s, self.theta, stream).context("nbody_tree_walk")?;
        mark(3)
    }

    /// The last step's phase times (`None` without [`GpuTree::time_phases`] or before a step).
    /// Waits for the step's last event.
    ///
    /// # Errors
    /// `cuEventSynchronize` or `cuEventElapsedTime` fails.
    pub fn phases(&self) -> anyhow::Result<Option<TreePhases>> {
        let Some(e) = &self.events else { return Ok(None) };
        e[3].synchronize().context("cuEventSynchronize")?;
        let ms = |a: usize, b: usize| Event::elapsed_ms(&e[a], &e[b]).context("cuEventElapsedTime");
        match (ms(0, 1)?, ms(1, 2)?, ms(2, 3)?) {
            (Some(build_ms), Some(moments_ms), Some(walk_ms)) => Ok(Some(TreePhases { build_ms, moments_ms, walk_ms })),
            _ => Ok(None),
        }
    }

    /// The last walk's counts (interactions, stack overflow); synchronises `stream`.
    ///
    /// # Errors
    /// The synchronisation or the copy fails.
    pub fn counts(&self, stream: &Stream) -> anyhow::Result<TreeCounts> {
        self.ws.counts(stream).context("reading the tree's header")
    }

    /// The body indices in key order of the last build (tests: a permutation of 0..N).
    ///
    /// # Errors
    /// The copy fails.
    pub fn sorted_indices(&self, stream: &Stream) -> anyhow::Result<Vec<u32>> {
        self.ws.sorted_indices(stream).context("reading the tree's sorted indices")
    }
}
