//! Barnes–Hut tree solver (Barnes & Hut 1986, Nature 324, 446): the accelerations of the
//! direct sum ([`crate::cpu`]) approximated in O(N log N) by an octree whose far cells act
//! through their multipole moments.
//!
//! # Method
//! - **Build** ([`Octree::build`]): the bounding cube of the bodies, a 63-bit Morton (Z-order) key
//!   per body (21 bits per axis on a 2²¹-cell grid of the cube), the bodies sorted by key (rayon's
//!   parallel sort), and the octree made from the sorted keys, one level at a time (the cells of
//!   a level split in parallel): a cell's bodies are one contiguous run, its children the runs
//!   sharing the next 3 bits. A cell with at most [`LEAF_BODIES`] bodies (or at the grid's finest
//!   level) is a leaf. The walk's **groups** are the largest cells of at most [`GROUP_BODIES`]
//!   bodies.
//! - **Moments**, in f64, from the leaves up, one level at a time (in parallel within a level):
//!   mass `M`, centre of mass `c` and the traceless quadrupole `Q_kl = Σ m (3 s_k s_l − |s|²
//!   δ_kl)`, `s = x − c`, and `S = Σ m |s|²` (shifted to the parent's centre of mass with the
//!   parallel-axis term), monopole + quadrupole as in Bonsai (Bédorf, Gaburov & Portegies Zwart
//!   2012, J. Comput. Phys. 231, 2825); then rounded to f32 for the walk.
//! - **Walk**, one per group, parallel over groups with rayon (as the GPU tree,
//!   `kernels/README.md` "Tree code"): a cell of side `l` is *opened* (its children, or a leaf's
//!   bodies, visited in its place) when `l / d ≥ θ`, where `d` is the distance from the cell's
//!   **centre of mass** to the group's box (Barnes & Hut 1986's `l/D < θ` acceptance), or when its
//!   cube meets the box. `d` is at most the distance to any body of the group, so the group opens
//!   every cell that one of its bodies' own walk would open (`l/d ≥ θ` from the body, or its cube
//!   containing the body): no body feels itself through a multipole, and no body's terms are
//!   coarser than its own walk's. The accepted cells and the opened leaves' bodies form the
//!   group's interaction list, which every body of the group evaluates in explicit SIMD
//!   ([`pulp`], AVX-512 or AVX2 picked at run time; the sources in the lanes). θ = 0 opens every
//!   cell: the direct sum, in another order.
//!
//! # Force law
//! Body–body terms are the direct sum's, `G m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}` (the
//! term with `r² + ε² = 0` adds nothing). A cell's terms are the second-order Taylor expansion of
//! the *softened* potential `−G Σ m / (|d + s|² + ε²)^{1/2}` about its centre of mass
//! (`d = c − x_i`, `R² = |d|² + ε²`): the monopole `G M d / R³`, softened exactly as the direct
//! sum, and the quadrupole `G [−Q d / R⁵ + (5/2) (dᵀ Q d − ε² S) d / R⁷]` with `S = Σ m |s|²`.
//! The `ε² S` term is what softening adds to Bonsai's quadrupole (which uses `R` in place of
//! `|d|` and drops it); for ε = 0 the two are the same.
//!
//! # Precision
//! The moments are summed in f64. The grouped walk ([`Octree::accelerations_into`], the CPU
//! backend's f32 tree) evaluates the terms in f32 with a reciprocal square root good to about
//! 1e-7 (`simd.rs`): its rounding is 1e-7 to 1e-6 of an acceleration, against the tree's own
//! 1e-5 to 1e-2 (`docs/results.md`). [`Octree::accelerations_f64`] (the float64 backend's tree)
//! walks one body at a time in f64, with the same opening test from the body itself.

mod build;
mod error;
mod group;
mod moments;
mod simd;
#[cfg(test)]
mod tests;
mod walk;

pub use build::{BuildTimes, Coord, Octree, GROUP_BODIES, LEAF_BODIES};
pub use error::{relative_errors, ErrorStats};
pub use simd::isa;
pub use walk::Interactions;

use std::ops::Range;

use rayon::prelude::*;

/// θ of the demo and the CLI when `--theta` is not given (Barnes & Hut 1986 used θ ≈ 1; 0.5 is
/// the common choice: with the quadrupole a median relative force error of 2.5–4.3e-4 on the
/// Plummer and galaxies scenes, `docs/results.md`).
pub const DEFAULT_THETA: f32 = 0.5;

/// How a backend computes accelerations.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub enum Solver {
    /// The all-pairs sum, O(N²) (exact up to float rounding).
    #[default]
    Direct,
    /// The Barnes–Hut octree with opening angle θ (≥ 0; see the module docs), O(N log N).
    Tree {
        /// Opening angle θ (dimensionless): a cell of side `l` at distance `d` from the body
        /// (to its centre of mass) is opened when `l / d ≥ θ`.
        theta: f32,
    },
    /// The tree with opening angle θ from the N where it is faster than the direct sum on the
    /// backend that runs it, the direct sum below ([`Solver::resolve`]).
    Auto {
        /// Opening angle θ of the tree, when it is picked.
        theta: f32,
    },
}

/// The smallest N from which `--solver auto` runs the tree, by θ (rows: θ at least this), on the
/// GPU and on the CPU. GPU: the H200's crossovers (`bench --modes compute,tree`, docs/results.md
/// "H200, 2026-12-04, GPU tree": at θ = 0.75 the tree's step is 0.489 ms against 0.503 at N =
/// 32768; at θ = 0.5 0.737 against 0.503 at 32768, 0.871 against 1.077 at 49152); below θ = 0.5
/// (not measured there) the tree costs about twice as many terms, so the crossover is put 4×
/// further out. CPU: the grouped SIMD tree against the SIMD direct sum on 2 cores (`bench
/// --modes cpu,cpu-tree`, docs/results.md "CPU, 2 cores, 2026-12-05": the first power of two
/// from which the tree's step is shorter: 4096 at θ = 0.75 and 1 (1.37× and 1.18× faster
/// there; at 2048, where a step takes about 1 ms, 1.09× and 0.52×), 8192 at θ = 0.5 (0.93× at
/// 4096, 1.66× at 8192) and 0.3 (1.02×)); below θ = 0.3 (not measured) 4× further out.
pub const AUTO_TREE_FROM: [(f32, usize, usize); 4] = [(0.75, 32768, 4096), (0.5, 49152, 8192), (0.3, 131072, 8192), (0.0, 131072, 32768)];

/// Terms per body of a GPU tree step at opening angle `theta`, for estimates of a step's length
/// (a bound above the measurements, not one): 3000 (0.5/θ)^2.2, infinite at θ = 0. Measured: the
/// H200's GPU tree at N = 1M 7896, 2376, 919 and 513 at θ = 0.3, 0.5, 0.75 and 1 (docs/results.md,
/// "H200, 2026-12-04, GPU tree").
pub fn tree_terms_per_body(theta: f32) -> f64 {
    3000.0 * (0.5 / f64::from(theta)).powf(2.2)
}

/// Terms per body of a CPU tree step (the grouped walk, whose groups open more cells than each
/// body would) at opening angle `theta`, for estimates: 3600 (0.5/θ)^1.8, at or above the
/// Plummer sphere's at N = 65536 (8840, 3339, 1378 and 1021 at θ = 0.3, 0.5, 0.75 and 1;
/// `accuracy`, docs/results.md "CPU, 2 cores, 2026-12-05") and at N = 1M (1463 at θ = 0.75).
pub fn cpu_tree_terms_per_body(theta: f32) -> f64 {
    3600.0 * (0.5 / f64::from(theta)).powf(1.8)
}

/// What one term of the CPU tree costs in the CPU backend's all-pairs interactions, its build
/// included: a whole tree step evaluates about 2.3e9 terms/s on 2 cores at θ = 0.75 from N =
/// 262144 to 1M (the walk alone 2.7e9), against 6.6e9 interactions/s of the SIMD direct sum:
/// 2.9 interactions a term (docs/results.md, "CPU, 2 cores, 2026-12-05"); rounded up.
pub const CPU_TREE_TERM_COST: f64 = 3.0;

/// The cost of one step of `n` bodies with `solver` on the GPU (`gpu`) or the CPU, in the
/// backend's all-pairs interactions, for estimates at its nominal rate: N² for the direct sum;
/// for the tree N × [`tree_terms_per_body`] (GPU) or N × [`cpu_tree_terms_per_body`] ×
/// [`CPU_TREE_TERM_COST`] (CPU), the terms at most N per body; `auto` as [`Solver::resolve`]
/// picks.
pub fn step_terms(solver: Solver, n: usize, gpu: bool) -> f64 {
    let n = n as f64;
    match solver.resolve(n as usize, gpu) {
        Solver::Tree { theta } if gpu => n * tree_terms_per_body(theta).min(n),
        Solver::Tree { theta } => n * cpu_tree_terms_per_body(theta).min(n) * CPU_TREE_TERM_COST,
        _ => n * n,
    }
}

impl Solver {
    /// Short name for labels: `direct`, `tree θ=0.5`, or `auto θ=0.5`.
    pub fn label(&self) -> String {
        match self {
            Solver::Direct => "direct".to_string(),
            Solver::Tree { theta } => format!("tree θ={theta}"),
            Solver::Auto { theta } => format!("auto θ={theta}"),
        }
    }

    /// The solver that runs `n` bodies on the GPU (`gpu`) or the CPU: [`Solver::Auto`] becomes
    /// the tree from [`AUTO_TREE_FROM`]'s N for its θ on, the direct sum below; the others stay.
    pub fn resolve(self, n: usize, gpu: bool) -> Solver {
        let Solver::Auto { theta } = self else { return self };
        let (_, from_gpu, from_cpu) = AUTO_TREE_FROM.iter().copied().find(|(t, _, _)| theta >= *t).unwrap_or(AUTO_TREE_FROM[3]);
        if n >= if gpu { from_gpu } else { from_cpu } {
            Solver::Tree { theta }
        } else {
            Solver::Direct
        }
    }
}

/// Checks an opening angle: finite and ≥ 0.
///
/// # Errors
/// θ negative, NaN or infinite; the message names the remedy.
pub fn check_theta(theta: f32) -> Result<f32, String> {
    if theta.is_finite() && theta >= 0.0 {
        Ok(theta)
    } else {
        Err(format!(
            "θ must be a finite number ≥ 0 (got {theta}): 0 opens every cell (the direct sum), 0.5 is the usual \
             choice, larger is faster and less accurate"
        ))
    }
}

/// Groups per rayon task of the walks (about 150 bodies).
const TASK_GROUPS: usize = 8;

/// Accelerations of all bodies of `pos` (`[N][4]`: x, y, z, mass, f32) by the tree with opening
/// angle `theta`: builds an [`Octree`] and runs the grouped walk over it, in parallel (rayon).
///
/// Returns `[N][3]` accelerations (`g` × mass / length², as [`crate::cpu::accelerations_f64`])
/// and the interactions counted. `eps` is the softening length ε.
pub fn accelerations_tree(pos: &[[f32; 4]], g: f32, eps: f32, theta: f32) -> (Vec<[f32; 3]>, Interactions) {
    let tree = Octree::build(pos);
    let mut acc = vec![[0.0f32; 3]; pos.len()];
    let counts = tree.accelerations_into(pos, 0, &mut acc, g, eps, theta);
    (acc, counts)
}

/// The phases of one force evaluation by the tree on the CPU (ms, host clock): as the GPU
/// tree's, build (cube, keys, sort, cells, groups), moments, and walk (the walks and putting
/// the accelerations back in the bodies' order).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreePhases {
    /// [`BuildTimes::build_ms`].
    pub build_ms: f64,
    /// [`BuildTimes::moments_ms`].
    pub moments_ms: f64,
    /// The walks, all ranges together.
    pub walk_ms: f64,
}

/// A stop request asked between the walks' tasks.
pub type Stop<'a> = Option<&'a (dyn Fn() -> bool + Sync)>;

/// The float type a backend steps in, and the tree walk it uses: the grouped SIMD walk for
/// `f32`, one f64 walk per body for `f64`.
pub trait TreeReal: Coord + Default {
    /// The accelerations (× `g`) of the bodies of the groups whose first body lies in `range`
    /// (Morton order) into `sorted` (`[N][3]`, Morton order): see
    /// [`Octree::accelerations_sorted`].
    #[allow(clippy::too_many_arguments)]
    fn walk(tree: &Octree, range: Range<usize>, sorted: &mut [[Self; 3]], g: f32, eps: f32, theta: f32, stop: Stop<'_>) -> Option<Interactions>;
}

impl TreeReal for f32 {
    fn walk(tree: &Octree, range: Range<usize>, sorted: &mut [[f32; 3]], g: f32, eps: f32, theta: f32, stop: Stop<'_>) -> Option<Interactions> {
        tree.accelerations_sorted(range, sorted, g, eps, theta, stop)
    }
}

impl TreeReal for f64 {
    fn walk(tree: &Octree, range: Range<usize>, sorted: &mut [[f64; 3]], g: f32, eps: f32, theta: f32, stop: Stop<'_>) -> Option<Interactions> {
        tree.accelerations_f64(range, sorted, g, eps, theta, stop)
    }
}

impl Octree {
    /// The indices in [`Octree::groups`] of the groups whose first body lies in `range`
    /// (Morton order). Ranges that cover `0..N` in consecutive pieces give every group once.
    fn group_range(&self, range: Range<usize>) -> Range<usize> {
        let at = |b: usize| self.groups.partition_point(|g| (g.start as usize) < b);
        at(range.start)..at(range.end)
    }

    /// The bodies (Morton order) of the groups whose first body lies in `range`: what
    /// [`Octree::accelerations_sorted`] writes.
    pub fn span(&self, range: Range<usize>) -> Range<usize> {
        let g = &self.groups[self.group_range(range)];
        match (g.first(), g.last()) {
            (Some(a), Some(b)) => a.start as usize..b.end as usize,
            _ => 0..0,
        }
    }

    /// Runs `task` over the groups whose first body lies in `range`, in rayon tasks of
    /// [`TASK_GROUPS`] groups, each with its part of `sorted` (`[N]`, Morton order) and a
    /// scratch value from `init`; every task first asks `stop` and does nothing when it says so
    /// (`None` then). Returns the interactions the tasks counted.
    fn over_groups<T: Send, W>(
        &self,
        range: Range<usize>,
        sorted: &mut [T],
        stop: Stop<'_>,
        init: impl Fn() -> W + Sync + Send,
        task: impl Fn(&mut W, &[build::Group], &mut [T]) -> Interactions + Sync + Send,
    ) -> Option<Interactions> {
        let groups = &self.groups[self.group_range(range)];
        let Some(first) = groups.first() else { return Some(Interactions::default()) };
        let mut rest = &mut sorted[first.start as usize..];
        let mut tasks = Vec::with_capacity(groups.len().div_ceil(TASK_GROUPS));
        for chunk in groups.chunks(TASK_GROUPS) {
            let len = (chunk[chunk.len() - 1].end - chunk[0].start) as usize;
            let (out, r) = std::mem::take(&mut rest).split_at_mut(len);
            tasks.push((chunk, out));
            rest = r;
        }
        tasks
            .into_par_iter()
            .map_init(init, |w, (chunk, out)| if stop.is_some_and(|s| s()) { None } else { Some(task(w, chunk, out)) })
            .try_reduce(Interactions::default, |a, b| Some(a + b))
    }

    /// The accelerations (× `g`, f32) of the bodies of the groups whose first body lies in
    /// `range` (Morton order; the bodies [`Octree::span`] gives) into `sorted` (`[N][3]`, Morton
    /// order: body `k` is the caller's `order[k]`), by the grouped SIMD walk at opening angle
    /// `theta` with softening `eps`. Every task first asks `stop` and does nothing when it says
    /// so: returns `None` then (some of the span is not written). Each group's results are the
    /// same bits however the bodies are split into ranges and tasks.
    pub fn accelerations_sorted(
        &self,
        range: Range<usize>,
        sorted: &mut [[f32; 3]],
        g: f32,
        eps: f32,
        theta: f32,
        stop: Stop<'_>,
    ) -> Option<Interactions> {
        let (eps2, theta2) = (eps * eps, theta * theta);
        self.over_groups(range, sorted, stop, group::Lists::default, |lists, groups, out| {
            simd::dispatch(group::WalkGroups { tree: self, groups, out, lists, g, eps2, theta2 })
        })
    }

    /// As [`Octree::accelerations_sorted`] in f64, one walk per body (the opening test from the
    /// body itself: `l / d ≥ θ` with `d` to the centre of mass, or the cube containing the
    /// body), for the float64 backend.
    pub fn accelerations_f64(
        &self,
        range: Range<usize>,
        sorted: &mut [[f64; 3]],
        g: f32,
        eps: f32,
        theta: f32,
        stop: Stop<'_>,
    ) -> Option<Interactions> {
        let (g, eps2, theta) = (f64::from(g), f64::from(eps) * f64::from(eps), f64::from(theta));
        self.over_groups(range, sorted, stop, Vec::new, |stack, groups, out| {
            let mut counts = Interactions::default();
            let start = groups[0].start as usize;
            for (k, a) in out.iter_mut().enumerate() {
                let b = self.bodies[start + k];
                let (acc, n) = self.acceleration(stack, [b[0], b[1], b[2]], eps2, theta);
                *a = acc.map(|x| g * x);
                counts += n;
            }
            counts
        })
    }

    /// Puts values in Morton order back in the caller's: `out[order[k]] = sorted[k]`.
    pub fn unsort<T: Copy>(&self, sorted: &[T], out: &mut [T]) {
        for (v, &i) in sorted.iter().zip(&self.order) {
            out[i as usize] = *v;
        }
    }

    /// Accelerations of bodies `first .. first + out.len()` of `pos` (`[N][4]`, the positions
    /// the tree was built from) into `out` (`[len][3]`), by the grouped walk in rayon tasks.
    /// Returns the interactions counted (of the whole groups the bodies asked for belong to).
    pub fn accelerations_into(&self, pos: &[[f32; 4]], first: usize, out: &mut [[f32; 3]], g: f32, eps: f32, theta: f32) -> Interactions {
        self.accelerations_stoppable(pos, first, out, g, eps, theta, None).unwrap_or_default()
    }

    /// As [`Octree::accelerations_into`], but every task first asks `stop` and does nothing when
    /// it says so: returns `None` then (some of `out` is not written). A part of the bodies
    /// costs the whole groups its bodies belong to; the CPU backend steps in parts of whole
    /// groups instead ([`Octree::accelerations_sorted`]).
    #[allow(clippy::too_many_arguments)]
    pub fn accelerations_stoppable(
        &self,
        pos: &[[f32; 4]],
        first: usize,
        out: &mut [[f32; 3]],
        g: f32,
        eps: f32,
        theta: f32,
        stop: Stop<'_>,
    ) -> Option<Interactions> {
        let n = self.len();
        debug_assert_eq!(pos.len(), n, "the positions the tree was built from");
        let mut sorted = vec![[0.0f32; 3]; n];
        if first == 0 && out.len() == n {
            let counts = self.accelerations_sorted(0..n, &mut sorted, g, eps, theta, stop)?;
            self.unsort(&sorted, out);
            return Some(counts);
        }
        // Some bodies: the runs of consecutive groups that hold them.
        let mut rank = vec![0u32; n];
        self.unsort(&(0..n as u32).collect::<Vec<_>>(), &mut rank);
        let mut need = vec![false; self.groups.len()];
        for &k in &rank[first..first + out.len()] {
            need[self.groups.partition_point(|g| g.end <= k)] = true;
        }
        let mut counts = Interactions::default();
        let mut gi = 0;
        while gi < need.len() {
            if !need[gi] {
                gi += 1;
                continue;
            }
            let run = gi..gi + need[gi..].iter().take_while(|&&x| x).count();
            let bodies = self.groups[run.start].start as usize..self.groups[run.end - 1].start as usize + 1;
            counts += self.accelerations_sorted(bodies, &mut sorted, g, eps, theta, stop)?;
            gi = run.end;
        }
        for (a, &k) in out.iter_mut().zip(&rank[first..]) {
            *a = sorted[k as usize];
        }
        Some(counts)
    }
}
