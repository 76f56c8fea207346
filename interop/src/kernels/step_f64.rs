//! The fp64 step kernels (`nbody_step_f64`, `nbody_step_f64_lib`): typed, checked launches.

use super::{check_block, check_step_args, lookup, BODY_BYTES, F64_MAX_BLOCK, STEP_F64_PARAMS};
use crate::error::{Error, Result};
use crate::launch::Launch;
use crate::memory::DevicePtr;
use crate::module::{Function, Module};
use crate::stream::Stream;


/// The scalars of one fp64 leapfrog step (as [`super::StepScalars`], in double).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepScalarsF64 {
    /// Drift time (0 for a synchronising half kick).
    pub dt_drift: f64,
    /// Kick time.
    pub kick: f64,
    /// Softening squared ε² (0: exact gravity).
    pub eps2: f64,
    /// Gravitational constant G.
    pub g: f64,
}

/// `nbody_step_f64` (1/sqrt from the fp32 estimate and one Newton step, ≤ 6e-14 relative) or
/// `nbody_step_f64_lib` (the CUDA math library's double `rsqrt`) of a loaded module, its
/// parameters checked against [`STEP_F64_PARAMS`]. Buffers are `[N][4]` f64 (x, y, z, mass;
/// vx, vy, vz, 0); one body per thread (`kernels/README.md`, fp64).
#[derive(Debug, Clone)]
pub struct StepKernelF64 {
    function: Function,
}

impl StepKernelF64 {
    /// Looks up `nbody_step_f64` (`library_rsqrt` false) or `nbody_step_f64_lib` (true).
    ///
    /// # Errors
    /// The module has no such kernel; its parameters differ from [`STEP_F64_PARAMS`].
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module, library_rsqrt: bool) -> Result<Self> {
        let name = if library_rsqrt { "nbody_step_f64_lib" } else { "nbody_step_f64" };
        Ok(StepKernelF64 { function: lookup(module, name, &STEP_F64_PARAMS)? })
    }

    /// The kernel.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// One fp64 leapfrog step for bodies `bodies` of `n` (all: `0..n`), on `stream`, with
    /// `block` threads per block (a multiple of 32 up to [`F64_MAX_BLOCK`]),
    /// `ceil(len / block)` blocks and `block · 32` bytes of shared memory.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a block size outside 32..=256 or not a multiple of 32, an
    /// invalid N or range, short or overlapping buffers; the driver's launch error.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(
        &self,
        block: u32,
        n: usize,
        bodies: std::ops::Range<usize>,
        pos_in: DevicePtr<'_, [f64; 4]>,
        pos_out: DevicePtr<'_, [f64; 4]>,
        vel: DevicePtr<'_, [f64; 4]>,
        s: StepScalarsF64,
        stream: &Stream,
    ) -> Result<()> {
        check_block(block)?;
        if block > F64_MAX_BLOCK {
            return Err(Error::InvalidArgument(format!("block size {block}: the fp64 kernels take at most {F64_MAX_BLOCK}")));
        }
        let (nn, i_begin, i_end) = check_step_args(n, &bodies, &pos_in, &pos_out, &vel)?;
        let grid = u32::try_from(bodies.len().div_ceil(block as usize))
            .map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
        let launch = Launch::new(&self.function)
            .grid(grid)
            .block(block)
            .shared_bytes(block * 2 * BODY_BYTES as u32)
            .ptr(pos_in)
            .ptr(pos_out)
            .ptr(vel)
            .i32(nn)
            .f64(s.dt_drift)
            .f64(s.kick)
            .f64(s.eps2)
            .f64(s.g)
            .i32(i_begin)
            .i32(i_end);
        // SAFETY: the parameter list is STEP_F64_PARAMS (checked at `new` against the PTX, and
        // by `launch` against the arguments). Per kernels/README.md the kernel reads
        // pos_in[0..n) and writes pos_out and vel at [i_begin, i_end) only, for a block size that
        // is a multiple of 32 from 32 to 256 (its launch bounds), grid ceil(len / B) and B·32
        // bytes of shared memory (one double4 per thread) — all checked or computed here — and
        // 1 ≤ n ≤ MAX_BODIES, 0 ≤ i_begin < i_end ≤ n (checked); each buffer holds ≥ n bodies
        // of 32 bytes and they do not overlap (checked). The views borrow their owners for this
        // call; the owners keep the memory until the stream is done with it.
        unsafe { launch.launch(stream) }
    }
}
