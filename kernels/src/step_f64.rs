//! The fp64 step kernels (`nbody_step_f64`, `nbody_step_f64_lib`): typed, checked launches.

use super::{check_block, launch_step, lookup, StepScalarsF64, StepShape, BODY_BYTES, F64_MAX_BLOCK, STEP_F64_PARAMS};
use interop::DevicePtr;
use interop::Stream;
use interop::{Error, Result};
use interop::{Function, Module};

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
        // One body per thread, one double4 tile slot per thread.
        let shape = StepShape { block, bodies_per_block: block, shared_bytes: block * 2 * BODY_BYTES as u32 };
        launch_step(&self.function, shape, n, bodies, pos_in, pos_out, vel, s, stream)
    }
}
