//! How the bodies are cut into slices and shared after each step: the gather path, the slices'
//! ranges, one slice's resources, and a frame's timings.

use std::sync::Arc;

use anyhow::bail;
use interop::{Context, DeviceBuffer, Event, Stream};

use crate::cuda::kernel_set::Kernels;

/// How the positions are shared after each step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatherPath {
    /// One slice: nothing to gather.
    None,
    /// `ncclAllGather` in one group over a communicator clique (`ncclCommInitAll`), NCCL `version`.
    Nccl {
        /// NCCL's version, `major.minor.patch`.
        version: String,
    },
    /// `cuMemcpyPeerAsync` from each slice to every other; `direct`: peer access is enabled
    /// between every pair of distinct devices (else some copies are staged through host memory).
    /// Slices on the same device copy with `cuMemcpyDtoDAsync`.
    PeerCopies {
        /// Every pair of distinct devices has peer access.
        direct: bool,
        /// All slices are on one device (every copy is a `cuMemcpyDtoDAsync` within it).
        one_device: bool,
        /// Why NCCL is not used (`--gather peer`, NCCL missing, a device holding two slices).
        why: String,
    },
}

impl GatherPath {
    /// Short name for reports: `none`, `nccl`, `peer`.
    pub fn name(&self) -> &'static str {
        match self {
            GatherPath::None => "none",
            GatherPath::Nccl { .. } => "nccl",
            GatherPath::PeerCopies { .. } => "peer",
        }
    }

    /// One line for the overlay and the log.
    pub fn describe(&self) -> String {
        match self {
            GatherPath::None => "one slice: no gather".into(),
            GatherPath::Nccl { version } => format!("NCCL {version} ncclAllGather"),
            GatherPath::PeerCopies { one_device: true, why, .. } => {
                format!("copies between the slices of one GPU (cuMemcpyDtoDAsync) — {why}")
            }
            GatherPath::PeerCopies { direct: true, why, .. } => format!("peer copies (cuMemcpyPeerAsync, direct) — {why}"),
            GatherPath::PeerCopies { direct: false, why, .. } => {
                format!("peer copies (cuMemcpyPeerAsync, staged through host memory where no peer access) — {why}")
            }
        }
    }
}

/// How N bodies are cut into slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceLayout {
    /// N.
    pub n: usize,
    /// Number of slices.
    pub slices: usize,
    /// Bodies per slice (the last ones may reach past N): a multiple of `align`.
    pub len: usize,
}

impl SliceLayout {
    /// `slices` slices of `ceil(N / slices)` bodies rounded up to a multiple of `align` (the
    /// step kernel's bodies per block).
    ///
    /// # Errors
    /// N, `slices` or `align` is 0.
    pub fn new(n: usize, slices: usize, align: usize) -> anyhow::Result<SliceLayout> {
        if n == 0 || slices == 0 || align == 0 {
            bail!("a split needs N ≥ 1, at least one slice and a block alignment ≥ 1 (got N = {n}, {slices} slices, {align})");
        }
        let len = n.div_ceil(slices).div_ceil(align) * align;
        Ok(SliceLayout { n, slices, len })
    }

    /// Slots per buffer: `slices · len` (≥ N).
    pub fn padded(&self) -> usize {
        self.slices * self.len
    }

    /// The bodies slice `r` integrates: its share of `0..N` (empty for slices wholly past N).
    pub fn bodies(&self, r: usize) -> std::ops::Range<usize> {
        let lo = (r * self.len).min(self.n);
        lo..((r + 1) * self.len).min(self.n)
    }
}

/// One slice: a device's context, its own stream, kernels and full-size buffers.
pub(super) struct Slice {
    /// Position buffers `[padded][4]` that ping-pong (every slice holds all positions).
    pub(super) pos: [DeviceBuffer<[f32; 4]>; 2],
    /// Velocities `[padded][4]`; only this slice's bodies are current.
    pub(super) vel: DeviceBuffer<[f32; 4]>,
    /// Recorded after this slice's part of the gather (peer copies).
    pub(super) done: Event,
    /// Per step of a frame: events before the kernel, after it, after the gather.
    pub(super) marks: Vec<[Event; 3]>,
    pub(super) kernels: Kernels,
    pub(super) stream: Stream,
    pub(super) ctx: Arc<Context>,
    /// CUDA device ordinal.
    pub(super) device: i32,
}

/// Timings of one [`super::SlicedStepper::frame`].
#[derive(Debug, Clone, Default)]
pub struct SplitFrame {
    /// Host time from the first enqueue to every stream finished, ms.
    pub wall_ms: f64,
    /// Per step: the slowest slice's kernel time (CUDA events), ms.
    pub kernel_ms: Vec<f64>,
    /// Per step: the slowest slice's gather time (from its kernel's end to its gather's end), ms.
    /// It holds the wait for the other slices (a slice's copies into another slice's buffer wait
    /// until that slice's kernel has read it): where the slices' kernels do not run side by side
    /// — several slices of one GPU, whose grids queue behind each other — it is up to most of
    /// the step (4 slices of N = 262144 on one H200: 17 ms of a 34.5 ms step).
    pub gather_ms: Vec<f64>,
}
