//! Barnes–Hut tree solver (Barnes & Hut 1986, Nature 324, 446): the accelerations of the
//! direct sum ([`crate::sim::cpu`]) approximated in O(N log N) by an octree whose far cells act
//! through their multipole moments.
//!
//! # Method
//! - **Build** ([`Octree::build`]): the bounding cube of the bodies, a 63-bit Morton (Z-order) key
//!   per body (21 bits per axis on a 2²¹-cell grid of the cube), the bodies sorted by key (rayon's
//!   parallel sort), and the octree made from the sorted keys: a cell's bodies are one contiguous
//!   run, its children the runs sharing the next 3 bits. A cell with at most [`LEAF_BODIES`]
//!   bodies (or at the grid's finest level) is a leaf.
//! - **Moments**, in f64, from the leaves up: mass `M`, centre of mass `c` and the traceless
//!   quadrupole `Q_kl = Σ m (3 s_k s_l − |s|² δ_kl)`, `s = x − c`, and `S = Σ m |s|²` (shifted to the parent's centre
//!   of mass with the parallel-axis term), monopole + quadrupole as in Bonsai (Bédorf, Gaburov &
//!   Portegies Zwart 2012, J. Comput. Phys. 231, 2825).
//! - **Walk**, one per body, parallel over bodies with rayon: a cell of side `l` is *opened*
//!   (its children, or a leaf's bodies, visited in its place) when `l / d ≥ θ`, where `d` is the
//!   distance from the body to the cell's **centre of mass** (Barnes & Hut 1986's `l/D < θ`
//!   acceptance). A cell whose cube contains the body is always opened, so no body ever feels
//!   itself through a multipole. θ = 0 opens every cell: the direct sum, in another order.
//!
//! # Force law
//! Body–body terms are the direct sum's, `G m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}` (the
//! term with `r² + ε² = 0` skipped). A cell's terms are the second-order Taylor expansion of the
//! *softened* potential `−G Σ m / (|d + s|² + ε²)^{1/2}` about its centre of mass
//! (`d = c − x_i`, `R² = |d|² + ε²`): the monopole `G M d / R³`, softened exactly as the direct
//! sum, and the quadrupole `G [−Q d / R⁵ + (5/2) (dᵀ Q d − ε² S) d / R⁷]` with `S = Σ m |s|²`.
//! The `ε² S` term is what softening adds to Bonsai's quadrupole (which uses `R` in place of
//! `|d|` and drops it); for ε = 0 the two are the same.
//! Positions arrive as f32; differences, terms and sums are f64, and the result is rounded to
//! f32 once, `[N][3]` in the units of the direct path (G × mass / length²), so the leapfrog of
//! [`crate::sim::cpu::CpuF32`] runs on either.

mod build;
mod error;
mod walk;
#[cfg(test)]
mod tests;

pub use build::{Octree, LEAF_BODIES};
pub use error::{relative_errors, ErrorStats};
pub use walk::Interactions;

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
/// 32768; at θ = 0.5 0.737 against 0.503 at 32768, 0.871 against 1.077 at 49152). CPU: the
/// `accuracy` table of 2 cores (docs/results.md "CPU, 2 cores, 2026-12-04": the tree 1.0× the
/// direct sum at 16384 and θ = 0.75; 0.4× at 16384 and 1.4× at 65536 for θ = 0.5). Below θ =
/// 0.5 (not measured on the GPU; 0.4× on the CPU at 65536 and θ = 0.3) the tree costs about
/// twice as many terms, so the crossover is put 4× further out.
pub const AUTO_TREE_FROM: [(f32, usize, usize); 3] = [(0.75, 32768, 16384), (0.5, 49152, 65536), (0.0, 131072, 262144)];

/// Terms per body of a tree step at opening angle `theta`, for estimates of a step's length (a
/// bound above the measurements, not one): 3000 (0.5/θ)^2.2, infinite at θ = 0. Measured: the
/// H200's GPU tree at N = 1M 7896, 2376, 919 and 513 at θ = 0.3, 0.5, 0.75 and 1 (docs/results.md,
/// "H200, 2026-12-04, GPU tree"); the CPU octree at N = 65536 5344, 1750, 678 and 368.
pub fn tree_terms_per_body(theta: f32) -> f64 {
    3000.0 * (0.5 / f64::from(theta)).powf(2.2)
}

/// What one term of the CPU tree's walk costs in the CPU backend's all-pairs interactions: the
/// walk takes one body at a time in float64, about 1.6e8 terms/s on 2 cores against 4.4e9
/// interactions/s of the SIMD direct sum (docs/results.md, "CPU, 2 cores, 2026-12-04").
pub const CPU_TREE_TERM_COST: f64 = 27.0;

/// The cost of one step of `n` bodies with `solver` on the GPU (`gpu`) or the CPU, in the
/// backend's all-pairs interactions, for estimates at its nominal rate: N² for the direct sum;
/// for the tree N × [`tree_terms_per_body`] (at most N²) terms, each [`CPU_TREE_TERM_COST`]
/// interactions on the CPU; `auto` as [`Solver::resolve`] picks.
pub fn step_terms(solver: Solver, n: usize, gpu: bool) -> f64 {
    let n = n as f64;
    match solver.resolve(n as usize, gpu) {
        Solver::Tree { theta } => n * tree_terms_per_body(theta).min(n) * if gpu { 1.0 } else { CPU_TREE_TERM_COST },
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
        let (_, from_gpu, from_cpu) = AUTO_TREE_FROM.iter().copied().find(|(t, _, _)| theta >= *t).unwrap_or(AUTO_TREE_FROM[2]);
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

/// Bodies per rayon task of the walks.
const TASK: usize = 64;

/// Accelerations of all bodies of `pos` (`[N][4]`: x, y, z, mass, f32) by the tree with opening
/// angle `theta`: builds an [`Octree`] and walks it for every body, in parallel (rayon).
///
/// Returns `[N][3]` accelerations (`g` × mass / length², as [`crate::sim::cpu::accelerations_f64`])
/// and the interactions counted. `eps` is the softening length ε.
pub fn accelerations_tree(pos: &[[f32; 4]], g: f32, eps: f32, theta: f32) -> (Vec<[f32; 3]>, Interactions) {
    let tree = Octree::build(pos);
    let mut acc = vec![[0.0f32; 3]; pos.len()];
    let counts = tree.accelerations_into(pos, 0, &mut acc, g, eps, theta);
    (acc, counts)
}

impl Octree {
    /// Accelerations of bodies `first .. first + out.len()` of `pos` (`[N][4]`, the positions
    /// the tree was built from) into `out` (`[len][3]`), in rayon tasks of 64 bodies. Returns
    /// the interactions counted.
    pub fn accelerations_into(&self, pos: &[[f32; 4]], first: usize, out: &mut [[f32; 3]], g: f32, eps: f32, theta: f32) -> Interactions {
        self.accelerations_stoppable(pos, first, out, g, eps, theta, None).unwrap_or_default()
    }

    /// As [`Octree::accelerations_into`], but every task first asks `stop` and does nothing when
    /// it says so: returns `None` then (some of `out` is not written).
    #[allow(clippy::too_many_arguments)]
    pub fn accelerations_stoppable(
        &self,
        pos: &[[f32; 4]],
        first: usize,
        out: &mut [[f32; 3]],
        g: f32,
        eps: f32,
        theta: f32,
        stop: Option<&(dyn Fn() -> bool + Sync)>,
    ) -> Option<Interactions> {
        let (g, eps2, theta) = (f64::from(g), f64::from(eps) * f64::from(eps), f64::from(theta));
        // One rayon task: the bodies of chunk `c`, body `k` of it at `at(c * TASK + k)`.
        let walk = |c: usize, chunk: &mut [[f32; 3]], at: &dyn Fn(usize) -> [f64; 3]| -> Option<Interactions> {
            if stop.is_some_and(|s| s()) {
                return None;
            }
            let mut counts = Interactions::default();
            let mut stack = Vec::with_capacity(64);
            for (k, a) in chunk.iter_mut().enumerate() {
                let (acc, n) = self.acceleration(&mut stack, at(c * TASK + k), eps2, theta);
                *a = acc.map(|x| (g * x) as f32);
                counts += n;
            }
            Some(counts)
        };
        if first == 0 && out.len() == self.bodies.len() && out.len() > TASK {
            // All bodies: walked in Morton order (neighbours walk nearly the same cells, which
            // stay in cache), then put back in the caller's order. Each body's walk and sum are
            // the same as in any other order, so the bits are too.
            let sorted_at = |i: usize| {
                let b = self.bodies[i];
                [b[0], b[1], b[2]]
            };
            let mut sorted = vec![[0.0f32; 3]; out.len()];
            let counts = sorted
                .par_chunks_mut(TASK)
                .enumerate()
                .map(|(c, chunk)| walk(c, chunk, &sorted_at))
                .try_reduce(Interactions::default, |a, b| Some(a + b))?;
            for (a, &i) in sorted.iter().zip(&self.order) {
                out[i as usize] = *a;
            }
            return Some(counts);
        }
        let at = |i: usize| {
            let p = pos[first + i];
            [p[0], p[1], p[2]].map(f64::from)
        };
        let task = |c: usize, chunk: &mut [[f32; 3]]| walk(c, chunk, &at);
        if out.len() <= TASK {
            task(0, out)
        } else {
            out.par_chunks_mut(TASK)
                .enumerate()
                .map(|(c, chunk)| task(c, chunk))
                .try_reduce(Interactions::default, |a, b| Some(a + b))
        }
    }
}
