//! The project's own kernels (`kernels/nbody.cu`, loaded as PTX) as safe, typed functions.
//!
//! Their ABI and what each kernel reads and writes are specified in `kernels/README.md`; this
//! crate is the one place that restates them. Each kernel is checked against its parameter list
//! when it is looked up ([`StepKernel::new`], [`StepKernelF64::new`], [`ToFloat4Kernel::new`],
//! [`PotentialKernel::new`]: a PTX file with other parameters is refused), and each launch
//! checks what the specification needs for the kernel to stay inside its buffers — a valid block
//! size, `1 ≤ N ≤ MAX_BODIES`, buffers of at least N bodies that do not overlap — and computes
//! the grid and the shared memory itself. That is why
//! the single `unsafe` block of each launch is sound, and why callers need none. That rests on the
//! module being the project's PTX (`kernels/nbody.ptx`) or a file a user gives in its place
//! (`--kernel`, for tuning), which is trusted like the program itself: a kernel with the right
//! parameters but other accesses is outside what these checks can see.

use interop::{safe::PtxParam, DevicePtr, Error, Function, Launch, Module, Result, Stream};

mod density;
mod helpers;
pub mod launch_rule;
mod step;
mod step_f64;
mod tree;

pub use density::{DensityKernels, SPLAT_PARAMS, STORE_PARAMS, TONEMAP_PARAMS};
pub use helpers::{PotentialKernel, ToFloat4Kernel, TouchKernel, TOUCH_PARAMS, TOUCH_PTX};
pub use step::StepKernel;
pub use step_f64::StepKernelF64;
pub use tree::{TreeCounts, TreeKernels, TreeWorkspace, MAX_TREE_BODIES};

/// The project's kernels as PTX (`kernels/nbody.ptx`, made from `kernels/nbody.cu` by
/// `kernels/gen_ptx.py`), embedded in the program: the module every kernel here is looked up in
/// unless a user gives another file (`--kernel`).
pub const PTX: &str = include_str!("../nbody.ptx");

/// Bytes of one body in a position or velocity buffer (`float4`).
pub const BODY_BYTES: usize = 16;

/// Largest N the kernels take (`kernels/README.md`: `1 ≤ N < 2^31 − 4096`, so that the last
/// tile's indices stay within `int`).
pub const MAX_BODIES: usize = (i32::MAX as usize) - 4096;

/// Bodies per thread the step kernels come in (`nbody_step_p1`, `_p2`, `_p4`).
pub const BODIES_PER_THREAD: [u32; 3] = [1, 2, 4];

/// Threads per body of the j-split step kernels (`nbody_step_s4`, `_s8`; one body per thread
/// group; `kernels/README.md`, "j-split"). `s2` is an exploration variant the product does not
/// ship (`kernels/README.md`, "Which kernels ship").
pub const THREADS_PER_BODY: [u32; 2] = [4, 8];

/// (P, S) of the mass-scaled step kernels `nbody_step_m{P}x{S}` (`kernels/README.md`,
/// "mass-scaled loop"): P bodies per thread, S threads per body (`m4x4` is an exploration
/// variant the product does not ship).
pub const MASS_SCALED: [(u32, u32); 4] = [(2, 2), (2, 4), (2, 8), (4, 1)];

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
    (32..=1024).contains(&block) && block.is_multiple_of(32)
}

/// The float of a step kernel's state and scalars: `f32` (`nbody_step_*`) or `f64`
/// (`nbody_step_f64*`).
pub trait StepFloat: Copy + std::fmt::Debug + PartialEq + interop::DeviceCopy + private::Sealed {
    /// Appends `self` to a launch's arguments as the kernel's `float` or `double`.
    fn arg(self, launch: Launch<'_>) -> Launch<'_>;
}

impl StepFloat for f32 {
    fn arg(self, launch: Launch<'_>) -> Launch<'_> {
        launch.f32(self)
    }
}

impl StepFloat for f64 {
    fn arg(self, launch: Launch<'_>) -> Launch<'_> {
        launch.f64(self)
    }
}

mod private {
    /// Only the kernels' two floats are [`super::StepFloat`]s.
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The scalars of one leapfrog step in the kernel's float `T` (`kernels/README.md`, Semantics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepScalarsOf<T> {
    /// Drift time: `pos_out = pos_in + vel · dt_drift` (0 for a synchronising half kick).
    pub dt_drift: T,
    /// Kick time: `vel += a · g · kick`.
    pub kick: T,
    /// Softening squared ε² (0: exact gravity).
    pub eps2: T,
    /// Gravitational constant G.
    pub g: T,
}

/// The scalars of an fp32 step ([`StepKernel`]).
pub type StepScalars = StepScalarsOf<f32>;

/// The scalars of an fp64 step ([`StepKernelF64`]).
pub type StepScalarsF64 = StepScalarsOf<f64>;

/// The shape of one step launch, checked by the kernel's type before this module launches it:
/// threads per block, bodies one block integrates, and bytes of dynamic shared memory.
struct StepShape {
    block: u32,
    bodies_per_block: u32,
    shared_bytes: u32,
}

/// The one plain step launch of both precisions: `function` (parameters [`STEP_PARAMS`] or
/// [`STEP_F64_PARAMS`], checked at lookup) over `bodies` of `n`, on `stream`, with
/// `ceil(len / bodies_per_block)` blocks. Checks N, the range and the buffers
/// ([`check_step_args`]); the caller checked that the kernel takes `shape`.
#[allow(clippy::too_many_arguments)]
fn launch_step<T: StepFloat>(
    function: &Function,
    shape: StepShape,
    n: usize,
    bodies: std::ops::Range<usize>,
    pos_in: DevicePtr<'_, [T; 4]>,
    pos_out: DevicePtr<'_, [T; 4]>,
    vel: DevicePtr<'_, [T; 4]>,
    s: StepScalarsOf<T>,
    stream: &Stream,
) -> Result<()> {
    let (nn, i_begin, i_end) = check_step_args(n, &bodies, &pos_in, &pos_out, &vel)?;
    let grid = u32::try_from(bodies.len().div_ceil(shape.bodies_per_block as usize))
        .map_err(|_| Error::InvalidArgument(format!("N = {n} needs more blocks than a grid holds")))?;
    let launch = Launch::new(function).grid(grid).block(shape.block).shared_bytes(shape.shared_bytes).ptr(pos_in).ptr(pos_out).ptr(vel).i32(nn);
    let launch = s.g.arg(s.eps2.arg(s.kick.arg(s.dt_drift.arg(launch)))).i32(i_begin).i32(i_end);
    // SAFETY: the parameter list is STEP_PARAMS for f32 and STEP_F64_PARAMS for f64 (checked
    // against the PTX when the kernel was looked up, and by `launch` against these arguments).
    // Per kernels/README.md the kernel reads pos_in[0..n) and writes pos_out[i_begin..i_end)
    // and vel[i_begin..i_end) only, for a block size it takes (a multiple of 32, of 32·S for a
    // j-split kernel, up to 1024, 256 for fp64: checked by the caller), grid ceil(len /
    // bodies_per_block) and the shared memory of its tile (both computed by the caller's
    // kernel type), 1 ≤ n ≤ MAX_BODIES and 0 ≤ i_begin < i_end ≤ n (checked above); each
    // buffer holds ≥ n bodies and they do not overlap (checked above). The views borrow their
    // owners for this call; the owners keep the memory until the stream has finished with it
    // (their teardown synchronises the stream or unmaps on it).
    unsafe { launch.launch(stream) }
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

fn check_len<T: interop::DeviceCopy>(what: &str, v: &DevicePtr<'_, T>, n: usize) -> Result<()> {
    if v.len() < n {
        return Err(Error::InvalidArgument(format!("{what} holds {} values, the kernel needs N = {n}", v.len())));
    }
    Ok(())
}

/// The checks every step launch makes on N, the body range and the three buffers (of any body
/// type): `1 ≤ n ≤ MAX_BODIES`, `bodies` non-empty within `0..n`, each buffer ≥ n bodies, no two
/// overlapping. Returns N and the range as the kernels' `int`s.
fn check_step_args<T: interop::DeviceCopy>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use interop::safe::ptx_entries;

    #[test]
    fn the_committed_ptx_declares_the_parameters_this_module_launches() {
        let ptx = PTX;
        let entries = ptx_entries(ptx);
        for p in BODIES_PER_THREAD {
            let name = format!("nbody_step_p{p}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
        }
        for s in THREADS_PER_BODY {
            let name = format!("nbody_step_s{s}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
        }
        let pxs = MASS_SCALED.iter().map(|&(p, s)| format!("m{p}x{s}")).chain(EQUAL_MASS.iter().map(|&(p, s)| format!("u{p}x{s}")));
        for suffix in pxs {
            let name = format!("nbody_step_{suffix}");
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_PARAMS, "{name}");
        }
        // Every stream-K first half there is takes STEPK_PARAMS, and its plain twin is there too.
        for (name, params) in entries.iter().filter(|(n, _)| n.starts_with("nbody_stepk_") && n != "nbody_stepk_finish") {
            assert_eq!(*params, STEPK_PARAMS.to_vec(), "{name}");
            let twin = name.replace("nbody_stepk_", "nbody_step_");
            assert!(entries.iter().any(|(n, _)| *n == twin), "{name} has no plain twin {twin}");
        }
        let e = entries.iter().find(|(n, _)| n == "nbody_potential").expect("nbody_potential");
        assert_eq!(e.1, POTENTIAL_PARAMS);
        for name in ["nbody_step_f64", "nbody_step_f64_lib"] {
            let e = entries.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, STEP_F64_PARAMS, "{name}");
        }
        let e = entries.iter().find(|(n, _)| n == "nbody_to_float4").expect("nbody_to_float4");
        assert_eq!(e.1, TO_FLOAT4_PARAMS);
        for (name, want) in
            [("nbody_density_splat", &SPLAT_PARAMS[..]), ("nbody_density_store", &STORE_PARAMS[..]), ("nbody_density_tonemap", &TONEMAP_PARAMS[..])]
        {
            let e = entries.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, want, "{name}");
        }
        for (name, want) in tree::ENTRIES {
            let e = entries.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(e.1, want, "{name}");
        }
        assert_eq!(ptx_entries(TOUCH_PTX), vec![("nbody_touch".to_string(), TOUCH_PARAMS.to_vec())]);
    }

    #[test]
    fn entries_parse_types_and_skip_what_is_not_an_entry() {
        let ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .f64 k_param_1,\n\t.param .align 4 .b8 k_param_2[12],\n\t.param .s32 k_param_3\n)\n{\n}\n// .entry not really";
        assert_eq!(ptx_entries(ptx), vec![("k".to_string(), vec![PtxParam::B64, PtxParam::F64, PtxParam::Bytes(12), PtxParam::B32])]);
        // An array of another type than .b8 is not a by-value struct.
        assert_eq!(ptx_entries(".entry k(\n.param .u32 k_p[4]\n)"), vec![("k".to_string(), vec![PtxParam::Other])]);
    }

    #[test]
    fn block_sizes_follow_the_kernel_rule() {
        assert!(valid_block(32) && valid_block(1024) && valid_block(256));
        assert!(!valid_block(0) && !valid_block(48) && !valid_block(2048));
        assert!(checked_n(0).is_err() && checked_n(MAX_BODIES + 1).is_err() && checked_n(1).is_ok());
    }
}
