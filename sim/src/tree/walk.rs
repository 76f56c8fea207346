//! The walk of one body through the [`Octree`] in f64 (the float64 backend's tree): the opening
//! test, body–body and body–cell terms.

use std::ops::{Add, AddAssign};

use super::build::{Node, Octree};

/// Interactions counted by walks: body–body terms (the bodies of opened leaves) and body–cell
/// terms (accepted cells, monopole + quadrupole).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Interactions {
    /// Body–body terms.
    pub body_body: u64,
    /// Body–cell terms.
    pub body_cell: u64,
}

impl Interactions {
    /// Both kinds together.
    pub fn total(&self) -> u64 {
        self.body_body + self.body_cell
    }
}

impl Add for Interactions {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self { body_body: self.body_body + o.body_body, body_cell: self.body_cell + o.body_cell }
    }
}

impl AddAssign for Interactions {
    fn add_assign(&mut self, o: Self) {
        *self = *self + o;
    }
}

impl Octree {
    /// The acceleration at `x` (f64, length units) divided by G, and the interactions it took:
    /// a depth-first walk from the root with the opening test of [`crate::tree`]
    /// (open when `l / d ≥ θ`, `d` to the centre of mass, or when the cube contains `x`).
    /// `eps2` is ε²; `stack` is scratch space (cleared here).
    pub(super) fn acceleration(&self, stack: &mut Vec<u32>, x: [f64; 3], eps2: f64, theta: f64) -> ([f64; 3], Interactions) {
        let mut a = [0.0f64; 3];
        let mut counts = Interactions::default();
        if self.nodes.is_empty() {
            return (a, counts);
        }
        let theta2 = theta * theta;
        stack.clear();
        stack.push(0);
        while let Some(i) = stack.pop() {
            let n = &self.nodes[i as usize];
            if n.mass == 0.0 {
                // Massless bodies pull nothing (the direct sum's terms are 0 too).
                continue;
            }
            let d = [n.com[0] - x[0], n.com[1] - x[1], n.com[2] - x[2]];
            let d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            let side = 2.0 * n.half;
            // Slack for the rounding of the cube's centre and half side (the bodies were put in
            // cells by their grid coordinates).
            let reach = n.half * (1.0 + 1e-9);
            let contains = (0..3).all(|k| (x[k] - n.center[k]).abs() <= reach);
            if !contains && side * side < theta2 * d2 {
                cell_term(&mut a, n, d, d2 + eps2, eps2);
                counts.body_cell += 1;
            } else if n.is_leaf() {
                for b in &self.bodies[n.start as usize..n.end as usize] {
                    body_term(&mut a, b, x, eps2);
                }
                counts.body_body += u64::from(n.end - n.start);
            } else {
                stack.extend(n.child..n.child + n.children);
            }
        }
        (a, counts)
    }
}

/// Adds `m (b − x) / (|b − x|² + ε²)^{3/2}` (the direct sum's term; nothing when `r² + ε² = 0`).
#[inline]
fn body_term(a: &mut [f64; 3], b: &[f64; 4], x: [f64; 3], eps2: f64) {
    let d = [b[0] - x[0], b[1] - x[1], b[2] - x[2]];
    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
    if r2 > 0.0 {
        let s = b[3] / (r2 * r2.sqrt());
        for k in 0..3 {
            a[k] += d[k] * s;
        }
    }
}

/// Adds a cell's monopole `M d / R³` and quadrupole `−Q d / R⁵ + (5/2) (dᵀ Q d − ε² S) d / R⁷`,
/// with `d` from the body to the centre of mass, `r2 = R² = |d|² + ε²` (> 0: an accepted cell's
/// centre of mass is never at the body) and `S = Σ m |s|²`.
#[inline]
fn cell_term(a: &mut [f64; 3], n: &Node, d: [f64; 3], r2: f64, eps2: f64) {
    let [qxx, qyy, qzz, qxy, qxz, qyz] = n.quad;
    let mass = n.mass;
    let qd = [qxx * d[0] + qxy * d[1] + qxz * d[2], qxy * d[0] + qyy * d[1] + qyz * d[2], qxz * d[0] + qyz * d[1] + qzz * d[2]];
    let dqd = d[0] * qd[0] + d[1] * qd[1] + d[2] * qd[2];
    let inv2 = 1.0 / r2;
    let inv3 = inv2 * inv2.sqrt();
    let inv5 = inv3 * inv2;
    let radial = mass * inv3 + 2.5 * (dqd - eps2 * n.spread) * inv5 * inv2;
    for k in 0..3 {
        a[k] += radial * d[k] - qd[k] * inv5;
    }
}
