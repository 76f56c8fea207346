//! The CUDA settings a user picks (interop mode, precision, register/map flags, stream, context
//! scheduling): domain types that the backends, the overlay and the command line share. They
//! derive clap's `ValueEnum` so that the command line ([`crate::cli`]) takes them as they are.

use clap::ValueEnum;
use interop::sys::register_flags;

/// How results reach GL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InteropMode {
    /// Registered GL buffers mapped every frame (cuGraphicsMapResources).
    Map,
    /// CUDA device buffer → pinned host memory → glBufferSubData.
    Copy,
    /// CUDA allocates the buffers (cuMemCreate), GL imports them (GL_EXT_memory_object_fd):
    /// no map/unmap per frame, a CUDA event and a GL fence order the two APIs.
    External,
}

/// How external-memory storage orders CUDA's writes and GL's reads (`--external-sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ExternalSync {
    /// `semaphore` where Vulkan, `GL_EXT_semaphore_fd` and the CUDA import are all there, else `host`.
    #[default]
    Auto,
    /// The host waits: a GL fence before the launches, a CUDA event before the draw.
    Host,
    /// GPU-side: two Vulkan-made binary semaphores imported into CUDA and GL; no host wait.
    Semaphore,
}

/// What the frame shows (`--view`, key `v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum View {
    /// Each body a point sprite, drawn by GL from the position VBO.
    #[default]
    Points,
    /// The projected mass density: CUDA splats the bodies into a float image that GL owns (the
    /// image workflow: `cuGraphicsGLRegisterImage`, a mapped CUDA array, surface and texture
    /// objects), tone-maps it into a second image, and GL draws that full-screen. CUDA backend only.
    Density,
}

/// How the density view's float image is written (`--density-path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum DensityPath {
    /// A kernel writes the mapped array through a surface object (`surf2Dwrite`).
    #[default]
    Surface,
    /// The sum stays in linear device memory and `cuMemcpy2DAsync` copies it into the mapped array.
    Copy,
}

/// Floating-point precision of the simulation state and the force sum (`--precision`). A
/// setting of the whole run: a CUDA backend is built for one precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Precision {
    /// fp32: float4 state, the kernel writes the positions GL's float4 vertex buffers hold directly.
    F32,
    /// fp64: double4 state and sums in CUDA buffers (`nbody_step_f64`); each frame
    /// `nbody_to_float4` writes the float4 positions GL draws (CUDA backend and the bench's CUDA
    /// modes; not the CPU backend).
    F64,
}

impl Precision {
    /// The value's name as the command line and the bench rows spell it (`f32`, `f64`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

/// Register or map flags (CU_GRAPHICS_REGISTER_FLAGS_* / CU_GRAPHICS_MAP_RESOURCE_FLAGS_*).
///
/// As register flags (`--register-flags`) a value is a promise for the buffer's whole life, which
/// the ping-pong position buffers cannot keep for `read-only` or `write-discard`: the map storage
/// refuses them (`backend::cuda::check_register_flags`). As map flags (`--map-flags`) the value
/// is applied per frame by role (`backend::cuda::role_map_flag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResourceFlags {
    /// No hint: CUDA may read and write the buffer.
    None,
    /// "CUDA will not write to this resource" (as map flag: on the buffer the kernel only reads).
    ReadOnly,
    /// "CUDA will not read from this resource and will write over the entire contents" (as map
    /// flag: on the buffer the kernel only writes).
    WriteDiscard,
}

/// Stream kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamKind {
    /// The legacy default stream (entry points resolved with CU_GET_PROC_ADDRESS_LEGACY_STREAM).
    Legacy,
    /// The per-thread default stream (entry points resolved with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
    PerThread,
    /// A created stream with CU_STREAM_NON_BLOCKING (priority: the demo's `--stream-priority`, else 0).
    NonBlocking,
}

/// Context scheduling flag (CU_CTX_SCHED_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CtxSched {
    /// CU_CTX_SCHED_AUTO.
    Auto,
    /// CU_CTX_SCHED_SPIN.
    Spin,
    /// CU_CTX_SCHED_YIELD.
    Yield,
    /// CU_CTX_SCHED_BLOCKING_SYNC.
    Blocking,
}

impl ResourceFlags {
    /// The `CU_GRAPHICS_REGISTER_FLAGS_*` bits of `cuGraphicsGLRegisterBuffer` for this value.
    pub fn register_bits(self) -> u32 {
        match self {
            ResourceFlags::None => register_flags::NONE,
            ResourceFlags::ReadOnly => register_flags::READ_ONLY,
            ResourceFlags::WriteDiscard => register_flags::WRITE_DISCARD,
        }
    }

    /// The value's name as the command line spells it (`none`, `read-only`, `write-discard`).
    pub fn name(self) -> &'static str {
        match self {
            ResourceFlags::None => "none",
            ResourceFlags::ReadOnly => "read-only",
            ResourceFlags::WriteDiscard => "write-discard",
        }
    }
}

/// How a split step shares the positions between its slices (`--gather`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GatherChoice {
    /// NCCL when it loads and every slice has a device of its own, else peer copies.
    Auto,
    /// `ncclAllGather` (fails when NCCL does not load or a device holds two slices).
    Nccl,
    /// `cuMemcpyPeerAsync` from each slice to every other.
    Peer,
}

/// Refuses `--gather nccl` with more than one slice per GPU before anything starts: NCCL takes
/// one rank per device (a split with it would fail when it starts).
///
/// # Errors
/// `gather` is [`GatherChoice::Nccl`] and `slices_per_gpu` is above 1; the message gives the remedy.
pub fn check_gather_slices(gather: GatherChoice, slices_per_gpu: u32) -> anyhow::Result<()> {
    if gather == GatherChoice::Nccl && slices_per_gpu > 1 {
        anyhow::bail!(
            "--gather nccl takes one slice per GPU (one NCCL rank per device), and --slices-per-gpu {slices_per_gpu} asks \
             for more; use --gather peer (or auto), or --slices-per-gpu 1"
        );
    }
    Ok(())
}

/// Checks a list of `--slices-per-gpu` (`bench`, `scale`) with the `--gather` it runs with, and
/// returns its largest value.
///
/// # Errors
/// An empty list; a 0 in it (the message gives the list as typed); more than one slice per GPU
/// with `--gather nccl` ([`check_gather_slices`]).
pub fn check_slices_per_gpu(values: &[u32], gather: GatherChoice) -> anyhow::Result<u32> {
    let Some(&largest) = values.iter().max() else {
        anyhow::bail!("--slices-per-gpu needs at least one value (e.g. 1 or 1,2,4)");
    };
    if values.contains(&0) {
        let typed = values.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        anyhow::bail!("every --slices-per-gpu value must be at least 1, a GPU's share of the bodies in one slice or more (got {typed})");
    }
    check_gather_slices(gather, largest)?;
    Ok(largest)
}

/// A GPU count of `--gpus`: a number ≥ 1, or `all` (every CUDA device of the machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCount {
    /// Every CUDA device.
    All,
    /// This many, devices 0 to count − 1.
    Count(u32),
}

impl std::str::FromStr for GpuCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "all" => Ok(GpuCount::All),
            t => match t.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(GpuCount::Count(n)),
                _ => Err(format!("`{t}` is not a GPU count: give a number ≥ 1 or `all`")),
            },
        }
    }
}

impl GpuCount {
    /// The count on a machine of `devices` CUDA devices.
    ///
    /// # Errors
    /// More GPUs than the machine has, with the remedy.
    pub fn resolve(self, devices: u32) -> anyhow::Result<u32> {
        match self {
            GpuCount::All if devices >= 1 => Ok(devices),
            GpuCount::All => anyhow::bail!("--gpus all: this machine has no CUDA device"),
            GpuCount::Count(n) if n <= devices => Ok(n),
            GpuCount::Count(n) => anyhow::bail!(
                "--gpus {n}: this machine has {devices} CUDA device(s); ask for at most {devices} (or `all`), \
                 or use --slices-per-gpu to split the bodies over several slices of one GPU"
            ),
        }
    }
}

/// How the bodies are split over GPUs (`--gpus`, `--slices-per-gpu`, `--gather`,
/// `--render-gpu-computes`); see [`crate::cuda::slices`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceOptions {
    /// GPUs that compute (devices in order, the render GPU first when it computes).
    pub gpus: GpuCount,
    /// Slices per computing GPU.
    pub slices_per_gpu: u32,
    /// How the slices share the positions.
    pub gather: GatherChoice,
    /// The GPU GL draws on computes a share too (`false`: it only receives the positions).
    pub render_gpu_computes: bool,
}

impl SliceOptions {
    /// True when the options ask for the one-slice, one-GPU step (the plain stepper): one GPU,
    /// one slice, the render GPU computing, and no NCCL asked for (`--gather nccl` with one slice
    /// runs the split path with NCCL's one-rank all-gather, as `scale` does).
    pub fn is_single(&self) -> bool {
        self.gpus == GpuCount::Count(1) && self.slices_per_gpu == 1 && self.render_gpu_computes && self.gather != GatherChoice::Nccl
    }

    /// The device of each slice on a machine of `devices` CUDA devices with GL on `render`:
    /// the computing GPUs are the render GPU and the next ones in ordinal order (with
    /// `render_gpu_computes`), else the first `gpus` devices other than the render GPU; each
    /// holds `slices_per_gpu` consecutive slices.
    ///
    /// # Errors
    /// More GPUs than the machine has (counting the render GPU apart), with the remedy.
    pub fn devices(&self, devices: u32, render: i32) -> anyhow::Result<Vec<i32>> {
        let others: Vec<i32> = (0..devices as i32).filter(|&d| d != render).collect();
        let order: Vec<i32> = if self.render_gpu_computes { std::iter::once(render).chain(others).collect() } else { others };
        let avail = order.len() as u32;
        let g = match self.gpus {
            // The render GPU computes: every device counts, as in `scale`.
            _ if self.render_gpu_computes => self.gpus.resolve(devices)?,
            GpuCount::All if avail >= 1 => avail,
            GpuCount::Count(n) if n <= avail => n,
            _ => anyhow::bail!(
                "--render-gpu-computes no leaves {avail} CUDA device(s) besides the one GL draws on (device {render}), and \
                 --gpus asks for {}; use --render-gpu-computes yes, or fewer --gpus",
                match self.gpus {
                    GpuCount::All => "all".to_string(),
                    GpuCount::Count(n) => n.to_string(),
                }
            ),
        };
        Ok(order.iter().take(g as usize).flat_map(|&d| std::iter::repeat_n(d, self.slices_per_gpu as usize)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(gpus: GpuCount, slices: u32, computes: bool) -> SliceOptions {
        SliceOptions { gpus, slices_per_gpu: slices, gather: GatherChoice::Auto, render_gpu_computes: computes }
    }

    #[test]
    fn split_devices_put_the_render_gpu_first_or_leave_it_out() {
        assert_eq!(opts(GpuCount::Count(2), 1, true).devices(4, 1).unwrap(), vec![1, 0]);
        assert_eq!(opts(GpuCount::All, 1, false).devices(4, 1).unwrap(), vec![0, 2, 3]);
        assert_eq!(opts(GpuCount::Count(1), 2, true).devices(1, 0).unwrap(), vec![0, 0]);
        let e = opts(GpuCount::Count(1), 1, false).devices(1, 0).unwrap_err().to_string();
        assert!(e.contains("--render-gpu-computes"), "{e}");
        let e = opts(GpuCount::Count(3), 1, true).devices(2, 0).unwrap_err().to_string();
        assert!(e.contains("2 CUDA device"), "{e}");
        assert!(opts(GpuCount::Count(1), 1, true).is_single());
        assert!("0".parse::<GpuCount>().is_err() && "all".parse::<GpuCount>() == Ok(GpuCount::All));
    }
}
