//! The project's own kernels (`kernels/nbody.cu`, loaded as PTX) as safe, typed functions.
//!
//! Their ABI and what each kernel reads and writes are specified in `kernels/README.md`; this
//! module is the one place that restates them. Each kernel is checked against its parameter list
//! when it is looked up ([`StepKernel::new`], [`StepKernelF64::new`], [`ToFloat4Kernel::new`],
//! [`PotentialKernel::new`]: a PTX file with other parameters is refused), and each launch
//! checks what the specification needs for the kernel to stay inside its buffers — a valid block
//! size, `1 ≤ N ≤ MAX_BODIES`, buffers of at least N bodies that do not overlap — and computes
//! the grid and the shared memory itself. That is why
//! the single `unsafe` block of each launch is sound, and why callers need none. That rests on the
//! module being the project's PTX (`kernels/nbody.ptx`) or a file a user gives in its place
//! (`--kernel`, for tuning), which is trusted like the program itself: a kernel with the right
//! parameters but other accesses is outside what these checks can see.

use crate::error::{Error, Result};
use crate::launch::Launch;
use crate::memory::DevicePtr;
use crate::module::{Function, Module, PtxParam};
use crate::stream::Stream;

/// Bytes of one body in a position or velocity buffer (`float4`).
pub const BODY_BYTES: usize = 16;

/// Largest N the kernels take (`kernels/README.md`: `1 ≤ N < 2^31 − 4096`, so that the last
/// tile's indices stay within `int`).
pub const MAX_BODIES: usize = (i32::MAX as usize) - 4096;

/// Bodies per thread the step kernels come in (`nbody_step_p1`, `_p2`, `_p4`).
pub const BODIES_PER_THREAD: [u32; 3] = [1, 2, 4];

/// Threads per body of the j-split step kernels (`nbody_step_s2`, `_s4`, `_s8`; one body per
/// thread group; `kernels/README.md`, "j-split").
pub const SPLITS: [u32; 3] = [2, 4, 8];

/// (P, S) of the mass-scaled step kernels `nbody_step_m{P}x{S}` (`kernels/README.md`,
/// "mass-scaled loop"): P bodies per thread, S threads per body.
pub const MASS_SCALED: [(u32, u32); 5] = [(2, 2), (2, 4), (2, 8), (4, 1), (4, 4)];

/// Dynamic shared memory per thread of a mass-scaled step kernel: the tile's `float4` and its
/// `float` e (`kernels/README.md`).
pub const MASS_SCALED_TILE_BYTES: usize = 20;

/// (P, S) of the equal-mass step kernels `nbody_step_u{P}x{S}` (`kernels/README.md`, "Equal
/// masses"): P bodies per thread, S threads per body; for states whose bodies all have one mass.
pub const EQUAL_MASS: [(u32, u32); 2] = [(2, 4), (4, 1)];

/// The softened inner loop of a step kernel (`kernels/README.md`); every loop takes the classic
/// exact one for ε² = 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepLoop {
    /// `nbody_step_pP`, `nbody_step_sS`: `m_j (x_j − x_i) / (r² + ε²)^{3/2}`, 13 instructions
    /// per interaction; any masses.
    Classic,
    /// `nbody_step_mPxS`: the masses folded into the tile, 12 instructions; masses 0 or with
    /// |m| in the range the caller checks (`kernels/README.md`, "mass-scaled loop").
    MassScaled,
    /// `nbody_step_uPxS`: every body's mass taken once from the block's first body, 12
    /// instructions and three LDS.128 per four sources; only for states whose bodies all have
    /// the same mass (the caller checks; with unequal masses the result is wrong).
    EqualMass,
}

impl StepLoop {
    /// The kernel name's letter for a (P, S) of this loop: `m` or `u` (`None` for the classic
    /// loop, whose kernels are named `pP` / `sS`).
    pub fn letter(self) -> Option<char> {
        match self {
            StepLoop::Classic => None,
            StepLoop::MassScaled => Some('m'),
            StepLoop::EqualMass => Some('u'),
        }
    }
}

/// Parameters of `nbody_step_pP`: `(const float4* pos_in, float4* pos_out, float4* vel, int n,
/// float dt_drift, float kick, float eps2, float g, int i_begin, int i_end)`.
pub const STEP_PARAMS: [PtxParam; 10] = [
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::B32,
    PtxParam::B32,
];

/// Parameters of the stream-K first halves `nbody_stepk_*`: `(const float4* pos_in, float4*
/// partial, int n, float eps2, int i_begin, int i_end)` (`kernels/README.md`, "stream-K").
pub const STEPK_PARAMS: [PtxParam; 6] = [PtxParam::B64, PtxParam::B64, PtxParam::B32, PtxParam::F32, PtxParam::B32, PtxParam::B32];

/// Parameters of `nbody_stepk_finish`: `(const float4* pos_in, float4* pos_out, float4* vel,
/// const float4* partial, int n, float dt_drift, float kick, float g, int i_begin, int i_end,
/// int bpb, int ctas)`.
pub const STEPK_FINISH_PARAMS: [PtxParam; 12] = [
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::B32,
    PtxParam::B32,
    PtxParam::B32,
    PtxParam::B32,
];

/// Threads per block of `nbody_stepk_finish` launches (one body per thread).
const FINISH_BLOCK: u32 = 256;

/// Parameters of `nbody_step_f64` and `nbody_step_f64_lib`: `(const double4* pos_in, double4*
/// pos_out, double4* vel, int n, double dt_drift, double kick, double eps2, double g, int
/// i_begin, int i_end)`.
pub const STEP_F64_PARAMS: [PtxParam; 10] = [
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B32,
    PtxParam::F64,
    PtxParam::F64,
    PtxParam::F64,
    PtxParam::F64,
    PtxParam::B32,
    PtxParam::B32,
];

/// Largest block size of the fp64 step kernels (built with `__launch_bounds__(256)`).
pub const F64_MAX_BLOCK: u32 = 256;

/// Parameters of `nbody_to_float4`: `(const double4* pos, float4* out, int n)`.
pub const TO_FLOAT4_PARAMS: [PtxParam; 3] = [PtxParam::B64, PtxParam::B64, PtxParam::B32];

/// Parameters of `nbody_potential`: `(const float4* pos, float* phi, int n, float eps2)`.
pub const POTENTIAL_PARAMS: [PtxParam; 4] = [PtxParam::B64, PtxParam::B64, PtxParam::B32, PtxParam::F32];

/// True for the block sizes the kernels take: multiples of 32 from 32 to 1024 (other sizes
/// read past the shared-memory tile, `kernels/README.md`).
pub fn valid_block(block: u32) -> bool {
    (32..=1024).contains(&block) && block % 32 == 0
}

fn lookup(module: &Module, name: &str, want: &[PtxParam]) -> Result<Function> {
    let f = module.function(name)?;
    match f.params() {
        Some(p) if p == want => Ok(f),
        Some(p) => Err(Error::InvalidArgument(format!(
            "kernel {name} of this PTX takes {p:?}, but this build launches it with {want:?} (kernels/README.md, ABI)"
        ))),
        None => Err(Error::InvalidArgument(format!("kernel {name}: the PTX text has no .entry {name} to check its parameters against"))),
    }
}

/// N as the kernels' `int`, checked against [`MAX_BODIES`].
fn checked_n(n: usize) -> Result<i32> {
    if n == 0 || n > MAX_BODIES {
        return Err(Error::InvalidArgument(format!("N = {n} is out of range for the kernels (1 ≤ N ≤ {MAX_BODIES})")));
    }
    i32::try_from(n).map_err(|_| Error::InvalidArgument(format!("N = {n} does not fit the kernels' int")))
}

fn check_block(block: u32) -> Result<()> {
    if valid_block(block) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("block size {block}: the kernels take multiples of 32 from 32 to 1024")))
    }
}

fn check_len<T: crate::DeviceCopy>(what: &str, v: &DevicePtr<'_, T>, n: usize) -> Result<()> {
    if v.len() < n {
        return Err(Error::InvalidArgument(format!("{what} holds {} values, the kernel needs N = {n}", v.len())));
    }
    Ok(())
}

/// The checks every step launch makes on N, the body range and the three buffers (of any body
/// type): `1 ≤ n ≤ MAX_BODIES`, `bodies` non-empty within `0..n`, each buffer ≥ n bodies, no two
/// overlapping. Returns N and the range as the kernels' `int`s.
fn check_step_args<T: crate::DeviceCopy>(
    n: usize,
    bodies: &std::ops::Range<usize>,
    pos_in: &DevicePtr<'_, T>,
    pos_out: &DevicePtr<'_, T>,
    vel: &DevicePtr<'_, T>,
) -> Result<(i32, i32, i32)> {
    let nn = checked_n(n)?;
    if bodies.start >= bodies.end || bodies.end > n {
        return Err(Error::InvalidArgument(format!("body range {bodies:?} is empty or reaches past N = {n}")));
    }
    check_len("pos_in", pos_in, n)?;
    check_len("pos_out", pos_out, n)?;
    check_len("vel", vel, n)?;
    if pos_in.overlaps(pos_out) || pos_in.overlaps(vel) || pos_out.overlaps(vel) {
        return Err(Error::InvalidArgument("pos_in, pos_out and vel must be distinct, non-overlapping buffers".into()));
    }
    // Both ≤ n ≤ MAX_BODIES < i32::MAX (checked above).
    Ok((nn, bodies.start as i32, bodies.end as i32))
}

/// The scalars of one leapfrog step (`kernels/README.md`, Semantics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepScalars {
    /// Drift time: `pos_out = pos_in + vel · dt_drift` (0 for a synchronising half kick).
    pub dt_drift: f32,
    /// Kick time: `vel += a · g · kick`.
    pub kick: f32,
    /// Softening squared ε² (0: exact gravity).
    pub eps2: f32,
    /// Gravitational constant G.
    pub g: f32,
}

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
        Err(e) if e.code() == Some(crate::sys::CuResult::CUDA_ERROR_NOT_FOUND) => return Ok(None),
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
        if !SPLITS.contains(&s) {
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
    pub fn split(&self) -> u32 {
        self.split
    }

    /// True for the block sizes this kernel takes: those of [`valid_block`] that are also a
    /// multiple of 32 · S (each split lane then owns whole warps).
    pub fn takes_block(&self, block: u32) -> bool {
        valid_block(block) && block % (32 * self.split) == 0
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
        let (nn, i_begin, i_end) = check_step_args(n, &bodies, &pos_in, &pos_out, &vel)?;
        let grid = u32::try_from(bodies.len().div_ceil(self.bodies_per_block(block) as usize))
            .map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
        let launch = Launch::new(&self.function)
            .grid(grid)
            .block(block)
            .shared_bytes(self.shared_bytes(block))
            .ptr(pos_in)
            .ptr(pos_out)
            .ptr(vel)
            .i32(nn)
            .f32(s.dt_drift)
            .f32(s.kick)
            .f32(s.eps2)
            .f32(s.g)
            .i32(i_begin)
            .i32(i_end);
        // SAFETY: the parameter list is STEP_PARAMS (checked at `new`/`new_split` against the
        // PTX, and by `launch` against the arguments). Per kernels/README.md the kernel reads
        // pos_in[0..n) and writes pos_out[i_begin..i_end) and vel[i_begin..i_end) only, for a
        // block size that is a multiple of 32 (of 32·S for a j-split kernel) from 32 to 1024,
        // grid ceil(len / (B/S·P)) and B·16 bytes of shared memory (B·20 for a mass-scaled one) — all
        // checked or computed here — and 1 ≤ n ≤ MAX_BODIES, 0 ≤ i_begin < i_end ≤ n (checked);
        // each buffer holds ≥ n bodies and they do not overlap (checked). The views borrow their owners for this call; the owners
        // keep the memory until the stream has finished with it (their teardown synchronises the
        // stream or unmaps on it).
        unsafe { launch.launch(stream) }
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

/// The scalars of one fp64 leapfrog step (as [`StepScalars`], in double).
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
        let grid = u32::try_from(n.div_ceil(block as usize))
            .map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
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
    /// As [`StepKernel::launch`].
    #[doc(alias = "cuLaunchKernel")]
    pub fn launch(&self, block: u32, n: usize, pos: DevicePtr<'_, [f32; 4]>, phi: DevicePtr<'_, f32>, eps2: f32, stream: &Stream) -> Result<()> {
        check_block(block)?;
        let nn = checked_n(n)?;
        check_len("pos", &pos, n)?;
        check_len("phi", &phi, n)?;
        if pos.overlaps(&phi) {
            return Err(Error::InvalidArgument("pos and phi must not overlap".into()));
        }
        let grid = u32::try_from(n.div_ceil(block as usize))
            .map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
        let launch =
            Launch::new(&self.function).grid(grid).block(block).shared_bytes(block * BODY_BYTES as u32).ptr(pos).ptr(phi).i32(nn).f32(eps2);
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
    pub fn load(ctx: &std::sync::Arc<crate::Context>) -> Result<Self> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::ptx_entries;

    #[test]
    fn the_committed_ptx_declares_the_parameters_this_module_launches() {
        let ptx = include_str!("../../kernels/nbody.ptx");
        let entries = ptx_entries(ptx);
        for p in BODIES_PER_THREAD {
            let name = format!("nbody_step_p{p}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
        }
        for s in SPLITS {
            let name = format!("nbody_step_s{s}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
        }
        let pxs = MASS_SCALED.iter().map(|&(p, s)| format!("m{p}x{s}")).chain(EQUAL_MASS.iter().map(|&(p, s)| format!("u{p}x{s}")));
        for suffix in pxs {
            let name = format!("nbody_step_{suffix}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
            let name = format!("nbody_stepk_{suffix}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEPK_PARAMS, "{name}");
        }
        let e = entries.iter().find(|(n, _)| n == "nbody_potential").expect("nbody_potential");
        assert_eq!(e.1, POTENTIAL_PARAMS);
        for name in ["nbody_step_f64", "nbody_step_f64_lib"] {
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_F64_PARAMS, "{name}");
        }
        let e = entries.iter().find(|(n, _)| n == "nbody_to_float4").expect("nbody_to_float4");
        assert_eq!(e.1, TO_FLOAT4_PARAMS);
        assert_eq!(ptx_entries(TOUCH_PTX), vec![("nbody_touch".to_string(), TOUCH_PARAMS.to_vec())]);
    }

    #[test]
    fn entries_parse_types_and_skip_what_is_not_an_entry() {
        let ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .f64 k_param_1,\n\t.param .align 4 .b8 k_param_2[12],\n\t.param .s32 k_param_3\n)\n{\n}\n// .entry not really";
        assert_eq!(ptx_entries(ptx), vec![("k".to_string(), vec![PtxParam::B64, PtxParam::F64, PtxParam::Other, PtxParam::B32])]);
    }

    #[test]
    fn block_sizes_follow_the_kernel_rule() {
        assert!(valid_block(32) && valid_block(1024) && valid_block(256));
        assert!(!valid_block(0) && !valid_block(48) && !valid_block(2048));
        assert!(checked_n(0).is_err() && checked_n(MAX_BODIES + 1).is_err() && checked_n(1).is_ok());
    }
}
