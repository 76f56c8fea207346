//! The small kernels beside the step: `nbody_to_float4` (the fp64 state converted for GL),
//! `nbody_potential` (each body's potential, for the diagnostics) and `nbody_touch` (one store,
//! for the context-switch probe and the lab).

use super::{check_block, check_len, checked_n, lookup, BODY_BYTES, POTENTIAL_PARAMS, TO_FLOAT4_PARAMS};
use interop::DevicePtr;
use interop::Launch;
use interop::Stream;
use interop::{safe::PtxParam, Function, Module};
use interop::{Error, Result};

/// `nbody_to_float4` of a loaded module, its parameters checked against [`TO_FLOAT4_PARAMS`]: the
/// fp64 path's conversion of the double4 positions into the float4 vertex buffer GL draws
/// (`kernels/README.md`, fp64).
#[derive(Debug, Clone)]
pub struct ToFloat4Kernel {
    function: Function,
}

impl ToFloat4Kernel {
    /// Looks up `nbody_to_float4` in `module` and checks its PTX parameter list.
    ///
    /// # Errors
    /// The module has no such kernel; its parameters differ from [`TO_FLOAT4_PARAMS`].
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module) -> Result<Self> {
        Ok(ToFloat4Kernel { function: lookup(module, "nbody_to_float4", &TO_FLOAT4_PARAMS)? })
    }

    /// The kernel.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// `out[i] = (float4) pos[i]` for the first `n` bodies (`pos` `[N][4]` f64, `out` `[N][4]`
    /// f32; each component rounded to nearest, a result below `FLT_MIN` flushed to 0), on
    /// `stream`, with `block` threads per block, `ceil(n / block)` blocks, no shared memory.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid block size or N, a buffer of fewer than N
    /// bodies, or overlapping buffers; the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(&self, block: u32, n: usize, pos: DevicePtr<'_, [f64; 4]>, out: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> Result<()> {
        check_block(block)?;
        let nn = checked_n(n)?;
        check_len("pos", &pos, n)?;
        check_len("out", &out, n)?;
        if pos.overlaps(&out) {
            return Err(Error::InvalidArgument("pos and out must not overlap".into()));
        }
        let grid =
            u32::try_from(n.div_ceil(block as usize)).map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
        let launch = Launch::new(&self.function).grid(grid).block(block).ptr(pos).ptr(out).i32(nn);
        // SAFETY: the parameter list is TO_FLOAT4_PARAMS (checked at `new` against the PTX, and by
        // `launch` against the arguments). Per kernels/README.md the kernel reads pos[0..n) (32
        // bytes each) and writes out[0..n) (16 bytes each) only, one element per thread for
        // i = blockIdx.x · B + threadIdx.x < n, with a valid block size (checked) and grid
        // ceil(n / B) (computed here), no shared memory; 1 ≤ n ≤ MAX_BODIES (checked); both
        // buffers hold ≥ n bodies and do not overlap (checked). The views borrow their owners for
        // this call; the owners keep the memory until the stream has finished with it (their
        // teardown synchronises the stream or unmaps on it).
        unsafe { launch.launch(stream) }
    }
}

/// `nbody_potential` of a loaded module, its parameters checked against [`POTENTIAL_PARAMS`].
#[derive(Debug, Clone)]
pub struct PotentialKernel {
    function: Function,
}

impl PotentialKernel {
    /// Looks up `nbody_potential` in `module` and checks its PTX parameter list.
    ///
    /// # Errors
    /// The module has no such kernel; its parameters differ from [`POTENTIAL_PARAMS`].
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module) -> Result<Self> {
        Ok(PotentialKernel { function: lookup(module, "nbody_potential", &POTENTIAL_PARAMS)? })
    }

    /// The kernel.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// `phi[i] = −Σ_{j≠i} m_j / sqrt(r² + ε²)` for `n` bodies of `pos` (`[N][4]` f32) into `phi`
    /// (`[N]` f32), with `block` threads per block, `ceil(n / block)` blocks and `block · 16`
    /// bytes of shared memory.
    ///
    /// # Errors
    /// As [`super::StepKernel::launch`].
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(&self, block: u32, n: usize, pos: DevicePtr<'_, [f32; 4]>, phi: DevicePtr<'_, f32>, eps2: f32, stream: &Stream) -> Result<()> {
        check_block(block)?;
        let nn = checked_n(n)?;
        check_len("pos", &pos, n)?;
        check_len("phi", &phi, n)?;
        if pos.overlaps(&phi) {
            return Err(Error::InvalidArgument("pos and phi must not overlap".into()));
        }
        let grid =
            u32::try_from(n.div_ceil(block as usize)).map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
        let launch = Launch::new(&self.function).grid(grid).block(block).shared_bytes(block * BODY_BYTES as u32).ptr(pos).ptr(phi).i32(nn).f32(eps2);
        // SAFETY: the parameter list is POTENTIAL_PARAMS (checked at `new` and by `launch`). Per
        // kernels/README.md the kernel reads pos[0..n) and writes phi[0..n) only, for a valid
        // block size, grid ceil(n / B) and B·16 bytes of shared memory (checked or computed here);
        // both buffers hold ≥ n values and do not overlap (checked); their owners keep the memory
        // until the stream has finished with it.
        unsafe { launch.launch(stream) }
    }
}

/// PTX of `nbody_touch(u32* p, u32 v)`: one thread stores `v` at `p[0]`. The context-switch
/// probe's work that is too small to matter.
pub const TOUCH_PTX: &str = "\
.version 7.0
.target sm_50
.address_size 64
.visible .entry nbody_touch(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
";

/// Parameters of `nbody_touch`: `(unsigned* p, unsigned v)`.
pub const TOUCH_PARAMS: [PtxParam; 2] = [PtxParam::B64, PtxParam::B32];

/// `nbody_touch` ([`TOUCH_PTX`]) loaded into a context.
#[derive(Debug, Clone)]
pub struct TouchKernel {
    function: Function,
}

impl TouchKernel {
    /// Loads [`TOUCH_PTX`] into `ctx`.
    ///
    /// # Errors
    /// The JIT fails; the kernel is missing or has other parameters.
    pub fn load(ctx: &std::sync::Arc<interop::Context>) -> Result<Self> {
        let module = Module::from_ptx(ctx, TOUCH_PTX.as_bytes())?;
        Ok(TouchKernel { function: lookup(&module, "nbody_touch", &TOUCH_PARAMS)? })
    }

    /// One thread stores `v` into `dst[0]` on `stream` (grid 1, block 1).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty `dst`; the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(&self, dst: DevicePtr<'_, u32>, v: u32, stream: &Stream) -> Result<()> {
        if dst.is_empty() {
            return Err(Error::InvalidArgument("nbody_touch needs a buffer of at least one u32".into()));
        }
        let launch = Launch::new(&self.function).ptr(dst).u32(v);
        // SAFETY: the parameter list is TOUCH_PARAMS (checked at `load` and by `launch`); the
        // kernel (TOUCH_PTX above) stores 4 bytes at dst[0] only, which exists (checked); the
        // owner of `dst` keeps it until the stream has finished with it.
        unsafe { launch.launch(stream) }
    }
}
