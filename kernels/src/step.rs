//! The fp32 step kernels (`nbody_step_*`) and their stream-K pairs (`nbody_stepk_*` +
//! `nbody_stepk_finish`): one typed, checked launch function each.

use super::{
    check_block, check_step_args, launch_step, lookup, valid_block, StepLoop, StepScalars, StepShape, BODIES_PER_THREAD, BODY_BYTES, EQUAL_MASS,
    FINISH_BLOCK, MASS_SCALED, MASS_SCALED_TILE_BYTES, STEPK_FINISH_PARAMS, STEPK_PARAMS, STEP_PARAMS, THREADS_PER_BODY,
};
use interop::DevicePtr;
use interop::Launch;
use interop::Stream;
use interop::{Error, Result};
use interop::{Function, Module};

/// `nbody_step_pP`, `nbody_step_sS`, `nbody_step_mPxS` or `nbody_step_uPxS` of a loaded module, its parameters
/// checked against [`STEP_PARAMS`], with its stream-K halves (`nbody_stepk_*` and
/// `nbody_stepk_finish`, checked against [`STEPK_PARAMS`] and [`STEPK_FINISH_PARAMS`]) where the
/// module has them.
#[derive(Debug, Clone)]
pub struct StepKernel {
    function: Function,
    p: u32,
    split: u32,
    step_loop: StepLoop,
    /// The stream-K first half and the finishing kernel.
    stream_k: Option<(Function, Function)>,
}

/// The stream-K halves of the step kernel `nbody_step_{suffix}`: `None` when the module has no
/// `nbody_stepk_{suffix}` (`CUDA_ERROR_NOT_FOUND`: an older or a user's PTX).
///
/// # Errors
/// `nbody_stepk_{suffix}` is there but takes other parameters than [`STEPK_PARAMS`], or
/// `nbody_stepk_finish` is missing or takes other parameters than [`STEPK_FINISH_PARAMS`]; any
/// other driver error of the lookup.
fn lookup_stream_k(module: &Module, suffix: &str) -> Result<Option<(Function, Function)>> {
    let name = format!("nbody_stepk_{suffix}");
    match module.function(&name) {
        Err(e) if e.code() == Some(interop::sys::CuResult::CUDA_ERROR_NOT_FOUND) => return Ok(None),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    Ok(Some((lookup(module, &name, &STEPK_PARAMS)?, lookup(module, "nbody_stepk_finish", &STEPK_FINISH_PARAMS)?)))
}

impl StepKernel {
    /// Looks up `nbody_step_p{p}` in `module` and checks its PTX parameter list.
    ///
    /// # Errors
    /// `p` is not 1, 2 or 4; the module has no such kernel (`CUDA_ERROR_NOT_FOUND`); its
    /// parameters differ from [`STEP_PARAMS`] ([`Error::InvalidArgument`]); its stream-K half is
    /// there but unusable (see [`StepKernel::launch_range_stream_k`]; a module without it is fine).
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module, p: u32) -> Result<Self> {
        if !BODIES_PER_THREAD.contains(&p) {
            return Err(Error::InvalidArgument(format!("no step kernel for P = {p} (1, 2 or 4)")));
        }
        let suffix = format!("p{p}");
        Ok(StepKernel {
            function: lookup(module, &format!("nbody_step_{suffix}"), &STEP_PARAMS)?,
            p,
            split: 1,
            step_loop: StepLoop::Classic,
            stream_k: lookup_stream_k(module, &suffix)?,
        })
    }

    /// Looks up the j-split kernel `nbody_step_s{s}` (S threads per body, P = 1) in `module`
    /// and checks its PTX parameter list.
    ///
    /// # Errors
    /// `s` is not 2, 4 or 8; the module has no such kernel; its parameters differ from
    /// [`STEP_PARAMS`]; its stream-K half is there but unusable.
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new_split(module: &Module, s: u32) -> Result<Self> {
        if !THREADS_PER_BODY.contains(&s) {
            return Err(Error::InvalidArgument(format!("no j-split step kernel for S = {s} (2, 4 or 8)")));
        }
        let suffix = format!("s{s}");
        Ok(StepKernel {
            function: lookup(module, &format!("nbody_step_{suffix}"), &STEP_PARAMS)?,
            p: 1,
            split: s,
            step_loop: StepLoop::Classic,
            stream_k: lookup_stream_k(module, &suffix)?,
        })
    }

    /// Looks up the mass-scaled kernel `nbody_step_m{p}x{s}` (P bodies per thread, S threads per
    /// body; its softened loop takes the masses into the tile, `kernels/README.md`,
    /// "mass-scaled loop") in `module` and checks its PTX parameter list.
    ///
    /// # Errors
    /// `(p, s)` is not one of [`MASS_SCALED`]; the module has no such kernel; its parameters
    /// differ from [`STEP_PARAMS`]; its stream-K half is there but unusable.
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new_mass_scaled(module: &Module, p: u32, s: u32) -> Result<Self> {
        if !MASS_SCALED.contains(&(p, s)) {
            return Err(Error::InvalidArgument(format!("no mass-scaled step kernel for P = {p}, S = {s} (one of {MASS_SCALED:?})")));
        }
        Self::new_pxs(module, p, s, StepLoop::MassScaled)
    }

    /// Looks up the equal-mass kernel `nbody_step_u{p}x{s}` (P bodies per thread, S threads per
    /// body; its softened loop takes every body's mass from the block's first body,
    /// `kernels/README.md`, "Equal masses") in `module` and checks its PTX parameter list. Launch
    /// it only on positions whose masses are all equal: with others its result is wrong.
    ///
    /// # Errors
    /// `(p, s)` is not one of [`EQUAL_MASS`]; the module has no such kernel; its parameters
    /// differ from [`STEP_PARAMS`]; its stream-K half is there but unusable.
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new_equal_mass(module: &Module, p: u32, s: u32) -> Result<Self> {
        if !EQUAL_MASS.contains(&(p, s)) {
            return Err(Error::InvalidArgument(format!("no equal-mass step kernel for P = {p}, S = {s} (one of {EQUAL_MASS:?})")));
        }
        Self::new_pxs(module, p, s, StepLoop::EqualMass)
    }

    /// `nbody_step_{letter}{p}x{s}` of `module` with its stream-K halves ([`StepLoop::letter`]
    /// of `step_loop`), (P, S) already checked. The classic loop has no such kernels: an error.
    fn new_pxs(module: &Module, p: u32, s: u32, step_loop: StepLoop) -> Result<Self> {
        let Some(letter) = step_loop.letter() else {
            return Err(Error::InvalidArgument(format!("the classic loop has no nbody_step_?{p}x{s} kernel")));
        };
        let suffix = format!("{letter}{p}x{s}");
        Ok(StepKernel {
            function: lookup(module, &format!("nbody_step_{suffix}"), &STEP_PARAMS)?,
            p,
            split: s,
            step_loop,
            stream_k: lookup_stream_k(module, &suffix)?,
        })
    }

    /// The kernel's softened inner loop.
    pub fn step_loop(&self) -> StepLoop {
        self.step_loop
    }

    /// Dynamic shared memory of a launch with `block` threads: `block · 16` bytes, or
    /// `block · 20` for a mass-scaled kernel.
    pub fn shared_bytes(&self, block: u32) -> u32 {
        let per_thread = if self.step_loop == StepLoop::MassScaled { MASS_SCALED_TILE_BYTES } else { BODY_BYTES };
        block * per_thread as u32
    }

    /// Threads per body S (1 for the `nbody_step_pP` kernels).
    pub fn threads_per_body(&self) -> u32 {
        self.split
    }

    /// True for the block sizes this kernel takes: those of [`valid_block`] that are also a
    /// multiple of 32 · S (each split lane then owns whole warps).
    pub fn takes_block(&self, block: u32) -> bool {
        valid_block(block) && block.is_multiple_of(32 * self.split)
    }

    /// [`check_block`], and a multiple of 32 · S for a j-split kernel ([`StepKernel::takes_block`]).
    fn check_takes_block(&self, block: u32) -> Result<()> {
        check_block(block)?;
        if !self.takes_block(block) {
            return Err(Error::InvalidArgument(format!(
                "block size {block}: the j-split kernel {} takes multiples of {} up to 1024",
                self.function.name(),
                32 * self.split
            )));
        }
        Ok(())
    }

    /// Bodies one block integrates: `block / S · P` (`block · P` without the j-split).
    pub fn bodies_per_block(&self, block: u32) -> u32 {
        block / self.split * self.p
    }

    /// The kernel (attributes, occupancy).
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// The stream-K first half (`nbody_stepk_*`; attributes, occupancy), if the module has it.
    pub fn stream_k_function(&self) -> Option<&Function> {
        self.stream_k.as_ref().map(|(f, _)| f)
    }

    /// Bodies of the scratch buffer a stream-K launch over `len` bodies with `block` threads and
    /// `ctas` persistent blocks needs: `(ctas + ceil(len / bodies_per_block)) · bodies_per_block`
    /// (`kernels/README.md`, "stream-K").
    pub fn stream_k_scratch(&self, block: u32, len: usize, ctas: u32) -> usize {
        let bpb = self.bodies_per_block(block) as usize;
        (ctas as usize + len.div_ceil(bpb)) * bpb
    }

    /// The step of [`StepKernel::launch_range`] in two launches (`kernels/README.md`,
    /// "stream-K"): `nbody_stepk_*` on `ctas` persistent blocks of `block` threads, which share
    /// the work of `bodies` against all `n` equally (to one unit of 32 interactions per body
    /// block) and write their sums to `partial`, then `nbody_stepk_finish` (one thread per body),
    /// which adds each body's sums in block order and updates it. The same semantics as one
    /// `launch_range`; not the same bits (the sum over j is grouped differently), but the same
    /// bits for the same `ctas` every time, and a plain launch's bits for `ctas` = 1. `partial`
    /// is scratch: it must not be used by other work until the stream has run both kernels.
    ///
    /// # Errors
    /// As [`StepKernel::launch_range`]; the module has no stream-K halves; `ctas` is 0, above
    /// `i32::MAX`, or so large that `ctas · units` passes `i64::MAX` (the kernels' unit
    /// arithmetic; `units = ceil(len / bodies_per_block) · ceil(n / 32)`); `partial` holds fewer
    /// than [`StepKernel::stream_k_scratch`] bodies or overlaps another buffer.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch_range_stream_k(
        &self,
        block: u32,
        n: usize,
        bodies: std::ops::Range<usize>,
        ctas: u32,
        pos_in: DevicePtr<'_, [f32; 4]>,
        pos_out: DevicePtr<'_, [f32; 4]>,
        vel: DevicePtr<'_, [f32; 4]>,
        partial: DevicePtr<'_, [f32; 4]>,
        s: StepScalars,
        stream: &Stream,
    ) -> Result<()> {
        let Some((first, finish)) = &self.stream_k else {
            return Err(Error::InvalidArgument(format!("this PTX has no stream-K kernels for {}", self.function.name())));
        };
        self.check_takes_block(block)?;
        let (nn, i_begin, i_end) = check_step_args(n, &bodies, &pos_in, &pos_out, &vel)?;
        let bpb = self.bodies_per_block(block);
        let units = (bodies.len().div_ceil(bpb as usize) as u128) * (n.div_ceil(32) as u128);
        let ctas_i = i32::try_from(ctas)
            .ok()
            .filter(|&c| c > 0 && u128::from(ctas) * units <= i64::MAX as u128)
            .ok_or_else(|| Error::InvalidArgument(format!("{ctas} CTAs for {units} units: give 1 to i32::MAX CTAs with CTAs × units ≤ 2^63")))?;
        let need = self.stream_k_scratch(block, bodies.len(), ctas);
        if partial.len() < need {
            return Err(Error::InvalidArgument(format!(
                "partial holds {} bodies, a stream-K step of {} bodies on {ctas} CTAs needs {need}",
                partial.len(),
                bodies.len()
            )));
        }
        if [&pos_in, &pos_out, &vel].iter().any(|b| b.overlaps(&partial)) {
            return Err(Error::InvalidArgument("partial must not overlap pos_in, pos_out or vel".into()));
        }
        self.launch_stream_k_sums(first, block, ctas, pos_in, partial, nn, s.eps2, i_begin, i_end, stream)?;
        // bpb ≤ 1024 / S · P ≤ 4096.
        launch_stream_k_finish(finish, bodies.len(), pos_in, pos_out, vel, partial, nn, s, i_begin, i_end, bpb as i32, ctas_i, stream)
    }

    /// The first half of [`StepKernel::launch_range_stream_k`], its arguments checked there.
    #[allow(clippy::too_many_arguments)]
    fn launch_stream_k_sums(
        &self,
        first: &Function,
        block: u32,
        ctas: u32,
        pos_in: DevicePtr<'_, [f32; 4]>,
        partial: DevicePtr<'_, [f32; 4]>,
        n: i32,
        eps2: f32,
        i_begin: i32,
        i_end: i32,
        stream: &Stream,
    ) -> Result<()> {
        let launch = Launch::new(first)
            .grid(ctas)
            .block(block)
            .shared_bytes(self.shared_bytes(block))
            .ptr(pos_in)
            .ptr(partial)
            .i32(n)
            .f32(eps2)
            .i32(i_begin)
            .i32(i_end);
        // SAFETY: the parameter list is STEPK_PARAMS (checked against the PTX when the kernel was
        // looked up, and here against the arguments). Per kernels/README.md ("stream-K") the
        // kernel reads pos_in[0..n) and writes partial[0..(G + ceil(len / bpb)) · bpb) only, for
        // G = the grid, a block size taken by this kernel and its shared memory (computed here),
        // 1 ≤ n ≤ MAX_BODIES and 0 ≤ i_begin < i_end ≤ n; the caller
        // (`launch_range_stream_k`) checked those, that 1 ≤ G with G · units < 2^63 (the
        // kernel's 64-bit unit arithmetic then never overflows), that partial holds that many
        // bodies and that it overlaps no other buffer. The views borrow their owners for this
        // call, and the owners keep the memory until the stream has finished with it.
        unsafe { launch.launch(stream) }
    }

    /// Bodies per thread P.
    pub fn p(&self) -> u32 {
        self.p
    }

    /// One leapfrog step for all `n` bodies: [`StepKernel::launch_range`] over `0..n`.
    ///
    /// # Errors
    /// As [`StepKernel::launch_range`].
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(
        &self,
        block: u32,
        n: usize,
        pos_in: DevicePtr<'_, [f32; 4]>,
        pos_out: DevicePtr<'_, [f32; 4]>,
        vel: DevicePtr<'_, [f32; 4]>,
        s: StepScalars,
        stream: &Stream,
    ) -> Result<()> {
        self.launch_range(block, n, 0..n, pos_in, pos_out, vel, s, stream)
    }

    /// One leapfrog step for bodies `bodies` (a sub-range of `0..n`) against all `n`:
    /// `vel[i] += G a_i(pos_in) kick`, `pos_out[i] = pos_in[i] + vel[i] dt_drift` for `i` in
    /// `bodies`, on `stream`, with `block` threads per block, `ceil(len / bodies_per_block)`
    /// blocks and [`StepKernel::shared_bytes`] of shared memory. Buffers are `[N][4]` f32. A long step
    /// is several such launches over consecutive ranges (the results are the same bits: each
    /// body's sum runs over j in the same order).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid block size or N, an empty range or one past N,
    /// a buffer of fewer than N bodies, or overlapping buffers; the driver's launch error.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch_range(
        &self,
        block: u32,
        n: usize,
        bodies: std::ops::Range<usize>,
        pos_in: DevicePtr<'_, [f32; 4]>,
        pos_out: DevicePtr<'_, [f32; 4]>,
        vel: DevicePtr<'_, [f32; 4]>,
        s: StepScalars,
        stream: &Stream,
    ) -> Result<()> {
        self.check_takes_block(block)?;
        let shape = StepShape { block, bodies_per_block: self.bodies_per_block(block), shared_bytes: self.shared_bytes(block) };
        launch_step(&self.function, shape, n, bodies, pos_in, pos_out, vel, s, stream)
    }
}

/// The second half of [`StepKernel::launch_range_stream_k`] (`nbody_stepk_finish`), its
/// arguments checked there.
#[allow(clippy::too_many_arguments)]
fn launch_stream_k_finish(
    finish: &Function,
    len: usize,
    pos_in: DevicePtr<'_, [f32; 4]>,
    pos_out: DevicePtr<'_, [f32; 4]>,
    vel: DevicePtr<'_, [f32; 4]>,
    partial: DevicePtr<'_, [f32; 4]>,
    n: i32,
    s: StepScalars,
    i_begin: i32,
    i_end: i32,
    bpb: i32,
    ctas: i32,
    stream: &Stream,
) -> Result<()> {
    let grid = u32::try_from(len.div_ceil(FINISH_BLOCK as usize))
        .map_err(|_| Error::InvalidArgument(format!("{len} bodies need more blocks than a grid holds")))?;
    let launch = Launch::new(finish)
        .grid(grid)
        .block(FINISH_BLOCK)
        .ptr(pos_in)
        .ptr(pos_out)
        .ptr(vel)
        .ptr(partial)
        .i32(n)
        .f32(s.dt_drift)
        .f32(s.kick)
        .f32(s.g)
        .i32(i_begin)
        .i32(i_end)
        .i32(bpb)
        .i32(ctas);
    // SAFETY: the parameter list is STEPK_FINISH_PARAMS (checked against the PTX at lookup, here
    // against the arguments). The kernel reads pos_in[i], vel[i] for i in [i_begin, i_end) and
    // partial[0..(ctas + ceil(len / bpb)) · bpb), and writes pos_out[i] and vel[i] there, with one
    // thread per body (grid ceil(len / 256) of 256 threads, no shared memory); bpb and ctas are
    // those of the first half, so the slots it reads are the ones that launch wrote, on the same
    // stream before it. `launch_range_stream_k` checked the buffer sizes, the overlaps and
    // ctas · units < 2^63.
    unsafe { launch.launch(stream) }
}
