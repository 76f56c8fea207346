//! The GPU-setup options the demo, `bench` and `scale` share.

use clap::Args;

use super::values::{parse_count_u32, YesNo};
use crate::cuda::settings::{GatherChoice, GpuCount};

/// The GPUs that compute and how their slices share the positions (CUDA backend, fp32): the
/// demo runs one setup (one value each); `bench` and `scale` take comma-separated lists and
/// sweep every combination.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "GPUs")]
pub struct GpuArgs {
    /// GPUs that compute, a number or all (bench, scale: a list, e.g. 1,2,4,8).
    ///
    /// The bodies are split into one slice per GPU (the GPU GL draws on first), gathered after
    /// every step, and the render GPU's vertex buffer receives the positions; a count g uses
    /// CUDA devices 0 to g − 1.
    #[arg(long, value_delimiter = ',', default_value = "1", allow_negative_numbers = true)]
    pub gpus: Vec<GpuCount>,
    /// Slices per computing GPU, each on its own stream and buffers (bench, scale: a list).
    ///
    /// Above 1 the split path runs on one GPU too; `--gather nccl` takes only 1.
    #[arg(long = "slices-per-gpu", value_delimiter = ',', default_value = "1", value_parser = parse_count_u32, allow_negative_numbers = true, hide_short_help = true)]
    pub slices_per_gpu: Vec<u32>,
    /// How the slices share the positions after each step.
    #[arg(long, value_enum, default_value_t = GatherChoice::Auto, hide_short_help = true)]
    pub gather: GatherChoice,
    /// Whether the GPU GL draws on computes a slice (bench: yes,no sweeps both).
    ///
    /// `no` leaves it to receive the positions and draw (it runs no step kernel, only the copy
    /// in and the map or import; needs another GPU). `scale`, which draws nothing, takes only
    /// `yes`.
    #[arg(long = "render-gpu-computes", value_enum, value_delimiter = ',', default_value = "yes", hide_short_help = true)]
    pub render_gpu_computes: Vec<YesNo>,
}

impl GpuArgs {
    /// The options given more than one value (`--gpus 1,2`), as typed: the demo runs one setup.
    pub fn lists(&self) -> Vec<&'static str> {
        [("--gpus", self.gpus.len()), ("--slices-per-gpu", self.slices_per_gpu.len()), ("--render-gpu-computes", self.render_gpu_computes.len())]
            .into_iter()
            .filter(|(_, len)| *len > 1)
            .map(|(name, _)| name)
            .collect()
    }
}
