//! The cells' moments, leaves up, one level at a time (each level in parallel): mass, centre of
//! mass, traceless quadrupole and spread in f64 ([`Node`]), and their f32 copies for the grouped
//! walk ([`WalkNode`]) with each cell's cube, rounded outwards.

use rayon::prelude::*;

use super::build::{CellF32, Node, Octree, WalkNode};

impl Octree {
    /// Fills the moments of every cell, the deepest level first: a leaf's from its bodies, a
    /// cell's from its children's (the parallel-axis shift to its centre of mass).
    pub(super) fn moments(&mut self) {
        let count = self.nodes.len();
        self.walk = vec![WalkNode::default(); count];
        let bodies = &self.bodies;
        for l in (0..self.levels.len().saturating_sub(1)).rev() {
            let (first, last) = (self.levels[l], self.levels[l + 1]);
            let (nodes, deeper) = self.nodes.split_at_mut(last);
            let walk = &mut self.walk[first..last];
            nodes[first..].par_iter_mut().zip(walk).for_each(|(nd, w)| {
                let (first, count) = if nd.is_leaf() {
                    leaf(nd, &bodies[nd.start as usize..nd.end as usize]);
                    (nd.start, (nd.end - nd.start) | WalkNode::LEAF)
                } else {
                    let (a, b) = ((nd.child as usize) - last, (nd.child + nd.children) as usize - last);
                    internal(nd, &deeper[a..b]);
                    (nd.child, nd.children)
                };
                // Outwards, with slack for the rounding of the centre and half side in f64 (the
                // bodies were put in cells by their grid coordinates).
                let reach = nd.half * (1.0 + 1e-9);
                *w = WalkNode {
                    cell: cell_f32(nd),
                    side2: (4.0 * nd.half * nd.half) as f32,
                    lo: nd.center.map(|x| down(x - reach)),
                    hi: nd.center.map(|x| up(x + reach)),
                    first,
                    count: if nd.mass > 0.0 { count } else { count | WalkNode::MASSLESS },
                };
            });
        }
    }
}

/// A leaf's moments from its bodies.
fn leaf(nd: &mut Node, bodies: &[[f64; 4]]) {
    let (mass, com) = centre_of_mass(bodies.iter().map(|b| (b[3], [b[0], b[1], b[2]])), nd.center);
    let (mut quad, mut spread) = ([0.0; 6], 0.0);
    for b in bodies {
        let s = [0, 1, 2].map(|k| b[k] - com[k]);
        let q = point_quad(b[3], s);
        for k in 0..6 {
            quad[k] += q[k];
        }
        spread += b[3] * (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
    }
    (nd.mass, nd.com, nd.quad, nd.spread) = (mass, com, quad, spread);
}

/// A cell's moments from its children's.
fn internal(nd: &mut Node, children: &[Node]) {
    let (mass, com) = centre_of_mass(children.iter().map(|c| (c.mass, c.com)), nd.center);
    let (mut quad, mut spread) = ([0.0; 6], 0.0);
    for c in children {
        // Parallel-axis shift of the child's moments to this cell's centre of mass.
        let d = [0, 1, 2].map(|k| c.com[k] - com[k]);
        let shifted = point_quad(c.mass, d);
        for k in 0..6 {
            quad[k] += c.quad[k] + shifted[k];
        }
        spread += c.spread + c.mass * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    }
    (nd.mass, nd.com, nd.quad, nd.spread) = (mass, com, quad, spread);
}

/// The largest f32 at most `x`.
fn down(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) > x {
        f.next_down()
    } else {
        f
    }
}

/// The least f32 at least `x`.
fn up(x: f64) -> f32 {
    let f = x as f32;
    if f64::from(f) < x {
        f.next_up()
    } else {
        f
    }
}

/// The f32 multipole of a cell for the grouped walk's cell terms (the quadrupole negated).
fn cell_f32(nd: &Node) -> CellF32 {
    let q = nd.quad.map(|x| -x as f32);
    let c = nd.com.map(|x| x as f32);
    [c[0], c[1], c[2], nd.mass as f32, q[0], q[1], q[2], q[3], q[4], q[5], nd.spread as f32]
}

/// Total mass and centre of mass of `(mass, position)` points; `fallback` as the centre when
/// the total mass is 0.
fn centre_of_mass(points: impl Iterator<Item = (f64, [f64; 3])>, fallback: [f64; 3]) -> (f64, [f64; 3]) {
    let (mut m, mut s) = (0.0, [0.0; 3]);
    for (mi, x) in points {
        m += mi;
        for k in 0..3 {
            s[k] += mi * x[k];
        }
    }
    if m > 0.0 {
        (m, s.map(|v| v / m))
    } else {
        (m, fallback)
    }
}

/// The traceless quadrupole `m (3 s_k s_l − |s|² δ_kl)` of a point mass `m` at offset `s`, as
/// `[xx, yy, zz, xy, xz, yz]`.
fn point_quad(m: f64, s: [f64; 3]) -> [f64; 6] {
    let s2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
    [
        m * (3.0 * s[0] * s[0] - s2),
        m * (3.0 * s[1] * s[1] - s2),
        m * (3.0 * s[2] * s[2] - s2),
        m * 3.0 * s[0] * s[1],
        m * 3.0 * s[0] * s[2],
        m * 3.0 * s[1] * s[2],
    ]
}
