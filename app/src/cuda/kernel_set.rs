//! The N-body kernels of the embedded PTX (`kernels::PTX`, or a PTX file), loaded into one module: the fp32
//! step kernels with their stream-K scratch, the fp64 step and conversion kernels, and the
//! potential kernel; and the check that N bodies fit the device's memory.
//!
//! Kernel ABI and semantics: `kernels/README.md`. Buffers are `[N][4]` f32 (x, y, z, mass) and
//! (vx, vy, vz, 0). The launches themselves are `kernels`' typed, checked functions:
//! nothing here is `unsafe`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::{Context, DeviceBuffer, DevicePtr, Module, Stream};
use kernels::{DensityKernels, PotentialKernel, StepKernel, StepKernelF64, StepScalars, ToFloat4Kernel};

use kernels::launch_rule::{self, ForcedKernel, ForcedKernelRefused, LaunchConfig, LaunchRuleError, Masses};
use sim::PhysParams;

pub use kernels::{StepLoop, BODIES_PER_THREAD, BODY_BYTES, EQUAL_MASS, MASS_SCALED, MAX_BODIES, THREADS_PER_BODY};

/// ε² as passed to the kernel: ε below 1e-12 is treated as exact gravity (ε = 0), since smaller
/// non-zero values would overflow the self term (kernels/README.md).
pub fn eps2(softening: f32) -> f32 {
    if softening.abs() < 1e-12 {
        0.0
    } else {
        softening * softening
    }
}

/// ε² for the fp64 kernels: the same rule as [`eps2`] (a softening below 1e-12 is exact
/// gravity, whose path the kernel takes for ε² = 0), squared in f64.
pub fn eps2_f64(softening: f32) -> f64 {
    if eps2(softening) == 0.0 {
        0.0
    } else {
        f64::from(softening) * f64::from(softening)
    }
}

/// The buffers of one step launch: `(pos_in, pos_out, vel)`, each `[N][4]` f32.
pub type StepBuffers<'a> = (DevicePtr<'a, [f32; 4]>, DevicePtr<'a, [f32; 4]>, DevicePtr<'a, [f32; 4]>);

/// The loaded kernels, and the scratch buffer of their stream-K launches.
pub struct Kernels {
    /// Sums of the stream-K segments (`[bodies][4]` f32: `(G + ceil(len / bpb)) · bpb`, about
    /// N plus G blocks of bodies), grown on demand. One stream at a time: the two kernels of a
    /// launch use it after the call returns, so stream-K launches of these kernels go to one
    /// stream, or a stream waits for the other's before it launches (each stepper has its own
    /// `Kernels` and stream).
    scratch: std::cell::RefCell<Option<DeviceBuffer<[f32; 4]>>>,
    module: Module,
    step: Vec<StepKernel>,
    potential: PotentialKernel,
    sms: u32,
    source: String,
    ctx: Arc<Context>,
    /// The step kernel chosen by hand (`--step-kernel`), if any.
    forced: Option<ForcedKernel>,
}

impl Kernels {
    /// Loads the embedded PTX, or the file `ptx_path`, and looks up its kernels, each checked
    /// against the parameter list this build launches it with.
    ///
    /// # Errors
    /// The file cannot be read; the JIT fails (the error carries the JIT log); a kernel is
    /// missing or declares other parameters.
    pub fn load(ctx: &Arc<Context>, ptx_path: Option<&Path>) -> anyhow::Result<Kernels> {
        let (text, source) = match ptx_path {
            Some(p) => (std::fs::read(p).with_context(|| format!("cannot read the PTX file {}", p.display()))?, p.display().to_string()),
            None => (kernels::PTX.as_bytes().to_vec(), "embedded kernels/nbody.ptx".to_string()),
        };
        let module = Module::from_ptx(ctx, &text).with_context(|| format!("loading the PTX of {source}"))?;
        let mut step = Vec::new();
        for p in BODIES_PER_THREAD {
            step.push(StepKernel::new(&module, p).with_context(|| format!("{source} has no usable kernel nbody_step_p{p}"))?);
        }
        // The j-split, mass-scaled and equal-mass kernels are optional: a PTX file without them (an older
        // --kernel) still runs.
        for s in THREADS_PER_BODY {
            match StepKernel::new_split(&module, s) {
                Ok(k) => step.push(k),
                Err(e) => tracing::debug!("{source}: no j-split kernel nbody_step_s{s} ({e})"),
            }
        }
        for (p, s) in MASS_SCALED {
            match StepKernel::new_mass_scaled(&module, p, s) {
                Ok(k) => step.push(k),
                Err(e) => tracing::debug!("{source}: no mass-scaled kernel nbody_step_m{p}x{s} ({e})"),
            }
        }
        for (p, s) in EQUAL_MASS {
            match StepKernel::new_equal_mass(&module, p, s) {
                Ok(k) => step.push(k),
                Err(e) => tracing::debug!("{source}: no equal-mass kernel nbody_step_u{p}x{s} ({e})"),
            }
        }
        let potential = PotentialKernel::new(&module).with_context(|| format!("{source} has no usable kernel nbody_potential"))?;
        let sms = ctx.device().attribute(interop::sys::attr::MULTIPROCESSOR_COUNT)?.max(1) as u32;
        Ok(Kernels { scratch: std::cell::RefCell::new(None), module, step, potential, sms, source, ctx: Arc::clone(ctx), forced: None })
    }

    /// These kernels with the step kernel `forced` chosen by hand (`--step-kernel`; `None`: the
    /// launch rule chooses).
    ///
    /// # Errors
    /// This PTX lacks the kernel (or, for a stream-K pair, its `nbody_stepk_*` half).
    pub fn with_forced(mut self, forced: Option<ForcedKernel>) -> anyhow::Result<Kernels> {
        if let Some(f) = forced {
            let shape = LaunchConfig { block: 0, p: f.p, threads_per_body: f.threads_per_body, step_loop: f.step_loop, stream_k: None };
            match self.step_kernel(shape) {
                Some(k) if !f.stream_k || k.stream_k_function().is_some() => {}
                _ => {
                    return Err(LaunchRuleError::from(ForcedKernelRefused(format!(
                        "--step-kernel {}: {} has no such kernel; use one it has, or leave --step-kernel out",
                        f.name(),
                        self.source
                    )))
                    .into())
                }
            }
        }
        self.forced = forced;
        Ok(self)
    }

    /// Where the PTX came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The JIT info log.
    pub fn jit_log(&self) -> &str {
        self.module.info_log()
    }

    /// The fp64 step kernel: `nbody_step_f64` (rsqrt from the fp32 estimate refined by one
    /// Newton step), or with `library_rsqrt` `nbody_step_f64_lib` (the CUDA math library's).
    ///
    /// # Errors
    /// The PTX (an older `--kernel` file) has no such kernel, or it takes other parameters.
    pub fn step_f64(&self, library_rsqrt: bool) -> anyhow::Result<StepKernelF64> {
        StepKernelF64::new(&self.module, library_rsqrt).with_context(|| format!("{} has no usable fp64 step kernel", self.source))
    }

    /// The fp64 path's conversion kernel `nbody_to_float4` (double4 → the float4 GL draws).
    ///
    /// # Errors
    /// The PTX (an older `--kernel` file) has no such kernel, or it takes other parameters.
    pub fn to_float4(&self) -> anyhow::Result<ToFloat4Kernel> {
        ToFloat4Kernel::new(&self.module).with_context(|| format!("{} has no usable kernel nbody_to_float4", self.source))
    }

    /// The density view's kernels (`nbody_density_splat`, `_store`, `_tonemap`).
    ///
    /// # Errors
    /// The PTX (an older `--kernel` file) lacks one, or one takes other parameters.
    pub fn density(&self) -> anyhow::Result<DensityKernels> {
        DensityKernels::new(&self.module).with_context(|| format!("{} has no usable density kernels (nbody_density_*)", self.source))
    }

    /// The GPU's multiprocessor count.
    pub fn sms(&self) -> u32 {
        self.sms
    }

    /// The tree code's kernels (`nbody_tree_*`).
    ///
    /// # Errors
    /// The PTX (an older `--kernel` file) lacks one, or one takes other parameters.
    pub fn tree(&self) -> anyhow::Result<kernels::TreeKernels> {
        kernels::TreeKernels::new(&self.module).with_context(|| format!("{} has no usable tree kernels (nbody_tree_*)", self.source))
    }

    /// The step kernel of a launch (P bodies per thread, S threads per body, the loop), if the
    /// PTX has it.
    pub fn step_kernel(&self, l: LaunchConfig) -> Option<&StepKernel> {
        self.step.iter().find(|k| k.p() == l.p && k.threads_per_body() == l.threads_per_body && k.step_loop() == l.step_loop)
    }

    /// The launch for `n` bodies on this device's SMs among the kernels of this PTX:
    /// [`launch_rule::choose`].
    ///
    /// # Errors
    /// An override is not valid; the occupancy query fails.
    pub fn choose_launch(&self, n: usize, block: u32, masses: Masses, stream_k_ok: bool) -> anyhow::Result<LaunchConfig> {
        launch_rule::choose(&self.step, self.sms, n, block, masses, stream_k_ok, self.forced).map_err(Into::into)
    }

    /// Launches one leapfrog step (see `kernels/README.md`): `vel += G a(pos_in) kick`,
    /// `pos_out = pos_in + vel dt_drift`, for the first `n` bodies of the buffers.
    ///
    /// # Errors
    /// The launch fails or is refused (no such P, an invalid block size, buffers too small or
    /// overlapping), naming the kernel, N and the block size.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_step(
        &self,
        launch: LaunchConfig,
        n: usize,
        bufs: StepBuffers<'_>,
        dt_drift: f32,
        kick: f32,
        params: PhysParams,
        stream: &Stream,
    ) -> anyhow::Result<()> {
        self.launch_step_range(launch, n, 0..n, bufs, dt_drift, kick, params, stream)
    }

    /// [`Kernels::launch_step`] for the bodies `bodies` only (one launch of a split step).
    ///
    /// # Errors
    /// The launch fails or is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_step_range(
        &self,
        launch: LaunchConfig,
        n: usize,
        bodies: std::ops::Range<usize>,
        bufs: StepBuffers<'_>,
        dt_drift: f32,
        kick: f32,
        params: PhysParams,
        stream: &Stream,
    ) -> anyhow::Result<()> {
        let block = launch.block;
        let k = self.step_kernel(launch).with_context(|| format!("the PTX has no step kernel {}", launch.kernel_name()))?;
        let (pos_in, pos_out, vel) = bufs;
        let s = StepScalars { dt_drift, kick, eps2: eps2(params.softening), g: params.g };
        let what = || format!("cuLaunchKernel of {} (bodies {bodies:?} of N = {n}, block {block})", launch.kernel_name());
        let Some(ctas) = launch.stream_k else {
            return k.launch_range(block, n, bodies.clone(), pos_in, pos_out, vel, s, stream).with_context(what);
        };
        let need = k.stream_k_scratch(block, bodies.len(), ctas);
        let mut scratch = self.scratch.borrow_mut();
        if scratch.as_ref().is_none_or(|b| b.len() < need) {
            // The old buffer goes first (its drop waits for the context's queued work, which may
            // still read it), then the larger one is made.
            *scratch = None;
            *scratch = Some(DeviceBuffer::alloc(&self.ctx, need).with_context(|| {
                format!(
                    "cuMemAlloc of the stream-K scratch ({need} bodies, {:.1} MiB); use fewer bodies, or a \
                     plain kernel (--step-kernel nbody_step_…) that needs none",
                    (need * BODY_BYTES) as f64 / (1u64 << 20) as f64
                )
            })?);
        }
        let partial = scratch.as_ref().context("stream-K scratch")?.view();
        k.launch_range_stream_k(block, n, bodies.clone(), ctas, pos_in, pos_out, vel, partial, s, stream).with_context(what)
    }

    /// Launches `nbody_potential`: `phi[i] = −Σ_{j≠i} m_j / sqrt(r² + ε²)`.
    ///
    /// # Errors
    /// The launch fails or is refused.
    pub fn launch_potential(
        &self,
        block: u32,
        n: usize,
        pos: DevicePtr<'_, [f32; 4]>,
        phi: DevicePtr<'_, f32>,
        softening: f32,
        stream: &Stream,
    ) -> anyhow::Result<()> {
        self.potential.launch(block, n, pos, phi, eps2(softening), stream).context("cuLaunchKernel of nbody_potential")
    }
}

/// Refuses N the kernel or the device cannot hold, before CUDA allocates anything.
///
/// `device_buffers` counts the `[N][4]` f32 buffers (16 bytes per body each) that CUDA allocates
/// for the mode (the VBOs GL already allocated are not counted: they are in use, so the free
/// memory `cuMemGetInfo` reports already lacks them; a step long enough to be split needs one
/// more, the velocity backup); 4 bytes per body are added for the potentials of the
/// diagnostics, and 5 % of the free memory is left over.
///
/// # Errors
/// N = 0 or above [`MAX_BODIES`]; `cuMemGetInfo` fails; or a message naming N, the bytes needed
/// and the device's free and total memory, with the remedy.
#[doc(alias = "cuMemGetInfo")]
pub fn check_fits(ctx: &Context, n: usize, device_buffers: usize) -> anyhow::Result<()> {
    if n == 0 || n > MAX_BODIES {
        bail!("N = {n} is out of range for the kernel (1 ≤ N ≤ {MAX_BODIES})");
    }
    let need = n.checked_mul(BODY_BYTES * device_buffers + 4).context("N is too large")?;
    check_bytes_fit(
        ctx,
        need,
        &format!("{n} bodies need"),
        &format!("{device_buffers} buffers of [N][4] f32"),
        "use fewer bodies, or end the other programs using the GPU (nvidia-smi lists them)",
    )
}

/// Refuses `need` bytes of device memory when they are more than 95 % of what `ctx`'s device
/// has free (5 % stays for the driver, the module and the stream's work). The message is
/// "`who` X GiB of device memory (`what`), more than the GPU has free (… free of …); `remedy`".
///
/// # Errors
/// `cuMemGetInfo` fails; or the message above.
#[doc(alias = "cuMemGetInfo")]
pub fn check_bytes_fit(ctx: &Context, need: usize, who: &str, what: &str, remedy: &str) -> anyhow::Result<()> {
    let (free, total) = ctx.memory_info().context("cuMemGetInfo")?;
    if need > free / 20 * 19 {
        let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
        bail!(
            "{who} {:.2} GiB of device memory ({what}), more than the GPU has free ({:.2} GiB free of {:.2} GiB); {remedy}",
            gib(need),
            gib(free),
            gib(total)
        );
    }
    Ok(())
}
