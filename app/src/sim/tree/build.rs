//! [`Octree::build`]: bounding cube, Morton keys, the sorted bodies, the cells and their moments.

use rayon::prelude::*;

/// Most bodies in a leaf cell; a cell with more is split into its octants (unless it is at the
/// finest level of the Morton grid, where its bodies share one grid cell).
pub const LEAF_BODIES: usize = 8;

/// Bits of the Morton grid per axis (2²¹ cells along each side of the bounding cube).
const BITS: u32 = 21;

/// One cell of the octree: its cube, its moments (f64) and what it holds.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Node {
    /// Centre of the cell's cube (length units).
    pub(super) center: [f64; 3],
    /// Half the side of the cube (length units).
    pub(super) half: f64,
    /// Total mass M of the bodies in the cell.
    pub(super) mass: f64,
    /// Centre of mass (length units); the cube's centre when M = 0.
    pub(super) com: [f64; 3],
    /// Traceless quadrupole about the centre of mass, `Σ m (3 s_k s_l − |s|² δ_kl)`, stored as
    /// `[xx, yy, zz, xy, xz, yz]` (mass × length²).
    pub(super) quad: [f64; 6],
    /// Trace of the second moment about the centre of mass, `Σ m |s|²` (mass × length²): the
    /// softened expansion's extra term (see [`crate::sim::tree`]).
    pub(super) spread: f64,
    /// Leaf: index of its first body in [`Octree::bodies`]; else index of its first child in
    /// [`Octree::nodes`] (the children are consecutive).
    pub(super) first: u32,
    /// Leaf: its number of bodies; else its number of children (1 to 8).
    pub(super) count: u32,
    /// True for a leaf (its bodies interact one by one when it is opened).
    pub(super) leaf: bool,
}

/// A Barnes–Hut octree over N bodies (see [`crate::sim::tree`] for the method and the sources).
#[derive(Debug, Clone, Default)]
pub struct Octree {
    /// The cells; `nodes[0]` is the root (the bounding cube). Empty for N = 0.
    pub(super) nodes: Vec<Node>,
    /// The bodies in Morton order, `[N][4]` f64: x, y, z, mass.
    pub(super) bodies: Vec<[f64; 4]>,
    /// The index in the caller's `[N]` order of each body of [`Octree::bodies`].
    pub(super) order: Vec<u32>,
}

impl Octree {
    /// The tree of the bodies `pos` (`[N][4]` f32: x, y, z, mass): Morton keys on a 2²¹ grid of
    /// the bounding cube, a parallel sort (rayon), then the cells and their moments (mass,
    /// centre of mass, traceless quadrupole; f64), leaves up.
    pub fn build(pos: &[[f32; 4]]) -> Self {
        if pos.is_empty() {
            return Self::default();
        }
        let (lo, hi) = pos
            .par_iter()
            .map(|p| ([p[0], p[1], p[2]].map(f64::from), [p[0], p[1], p[2]].map(f64::from)))
            .reduce(
                || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
                |(a, b), (c, d)| ([0, 1, 2].map(|k| a[k].min(c[k])), [0, 1, 2].map(|k| b[k].max(d[k]))),
            );
        let extent = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        // Padded so that the largest coordinate falls inside the last grid cell; 1 for a single
        // point (or coincident bodies); a non-finite extent (NaN or ±∞ positions) gives 1 too.
        let side = if extent > 0.0 && extent.is_finite() { extent * (1.0 + 1e-6) } else { 1.0 };
        let center = [0, 1, 2].map(|k| if lo[k].is_finite() && hi[k].is_finite() { 0.5 * (lo[k] + hi[k]) } else { 0.0 });
        let origin = center.map(|c| c - 0.5 * side);
        let scale = f64::from(1u32 << BITS) / side;
        let mut order: Vec<(u64, u32)> = pos
            .par_iter()
            .enumerate()
            .map(|(i, p)| {
                let cell = |k: usize| ((f64::from(p[k]) - origin[k]) * scale).clamp(0.0, f64::from((1u32 << BITS) - 1)) as u64;
                (morton(cell(0), cell(1), cell(2)), i as u32)
            })
            .collect();
        // Ties (bodies in one grid cell) keep index order, so the tree does not depend on threads.
        order.par_sort_unstable();
        let keys: Vec<u64> = order.iter().map(|o| o.0).collect();
        let bodies = order.iter().map(|&(_, i)| pos[i as usize].map(f64::from)).collect();
        let order = order.iter().map(|o| o.1).collect();
        let mut tree = Self { nodes: Vec::with_capacity(2 * pos.len() / LEAF_BODIES + 1), bodies, order };
        tree.nodes.push(Node::default());
        tree.build_node(&keys, 0, 0, 0..pos.len(), center, 0.5 * side);
        tree
    }

    /// Number of cells (leaves included).
    pub fn cells(&self) -> usize {
        self.nodes.len()
    }

    /// Fills node `idx`: the cube (`center`, `half`) at Morton `level` holding the sorted bodies
    /// `range`; its children first (recursively), then its moments from theirs.
    fn build_node(&mut self, keys: &[u64], idx: usize, level: u32, range: std::ops::Range<usize>, center: [f64; 3], half: f64) {
        if range.len() <= LEAF_BODIES || level == BITS {
            self.nodes[idx] = self.leaf(range, center, half);
            return;
        }
        let shift = 3 * (BITS - 1 - level);
        let octant = |k: u64| (k >> shift) & 7;
        // The keys of one cell share their bits above `shift`, so each octant is a contiguous run.
        let mut runs = Vec::with_capacity(8);
        let mut start = range.start;
        while start < range.end {
            let o = octant(keys[start]);
            let end = start + keys[start..range.end].partition_point(|&k| octant(k) <= o);
            runs.push((o, start..end));
            start = end;
        }
        let first = self.nodes.len();
        self.nodes.resize(first + runs.len(), Node::default());
        for (j, (o, run)) in runs.iter().enumerate() {
            let q = 0.5 * half;
            let bit = |b: u64| if o >> b & 1 == 1 { q } else { -q };
            let c = [center[0] + bit(2), center[1] + bit(1), center[2] + bit(0)];
            self.build_node(keys, first + j, level + 1, run.clone(), c, q);
        }
        let children = &self.nodes[first..first + runs.len()];
        let (mass, com) = centre_of_mass(children.iter().map(|c| (c.mass, c.com)), center);
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
        self.nodes[idx] = Node { center, half, mass, com, quad, spread, first: first as u32, count: runs.len() as u32, leaf: false };
    }

    /// A leaf holding the sorted bodies `range`, with its moments.
    fn leaf(&self, range: std::ops::Range<usize>, center: [f64; 3], half: f64) -> Node {
        let bodies = &self.bodies[range.clone()];
        let (mass, com) = centre_of_mass(bodies.iter().map(|b| (b[3], [b[0], b[1], b[2]])), center);
        let (mut quad, mut spread) = ([0.0; 6], 0.0);
        for b in bodies {
            let s = [0, 1, 2].map(|k| b[k] - com[k]);
            let q = point_quad(b[3], s);
            for k in 0..6 {
                quad[k] += q[k];
            }
            spread += b[3] * (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
        }
        Node { center, half, mass, com, quad, spread, first: range.start as u32, count: range.len() as u32, leaf: true }
    }
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

/// Interleaves the low 21 bits of `x`, `y`, `z` into a 63-bit Morton key: bit `b` of `x` goes to
/// bit `3b + 2`, of `y` to `3b + 1`, of `z` to `3b`.
fn morton(x: u64, y: u64, z: u64) -> u64 {
    spread(x) << 2 | spread(y) << 1 | spread(z)
}

/// Spreads the low 21 bits of `v` to every third bit (bit `b` to bit `3b`).
fn spread(v: u64) -> u64 {
    let mut v = v & 0x1f_ffff;
    v = (v | v << 32) & 0x001f_0000_0000_ffff;
    v = (v | v << 16) & 0x001f_0000_ff00_00ff;
    v = (v | v << 8) & 0x100f_00f0_0f00_f00f;
    v = (v | v << 4) & 0x10c3_0c30_c30c_30c3;
    v = (v | v << 2) & 0x1249_2492_4924_9249;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit spreading puts bit `b` at bit `3b`, for every one of the 21 bits.
    #[test]
    fn morton_keys_interleave_the_bits() {
        for b in 0..21 {
            assert_eq!(spread(1 << b), 1 << (3 * b), "bit {b}");
        }
        assert_eq!(morton(1, 0, 0), 4);
        assert_eq!(morton(0, 1, 0), 2);
        assert_eq!(morton(0, 0, 1), 1);
        assert_eq!(morton(0x1f_ffff, 0x1f_ffff, 0x1f_ffff), (1 << 63) - 1);
    }

    /// Every body lands in exactly one leaf, inside the leaf's cube; each cell's mass is the sum
    /// of its bodies' (f64 sums of at most N terms: 1e-12 relative).
    #[test]
    fn every_body_is_in_one_leaf_inside_its_cube() {
        let pos: Vec<[f32; 4]> = (0..1000).map(|i| {
            let t = i as f32;
            [(t * 0.37).sin() * 3.0, (t * 0.11).cos(), (t * 0.07).sin() * (t * 0.013).cos(), 1.0 + (t * 0.5).sin().abs()]
        }).collect();
        let tree = Octree::build(&pos);
        let mut seen = 0;
        for n in tree.nodes.iter().filter(|n| n.leaf) {
            for b in &tree.bodies[n.first as usize..(n.first + n.count) as usize] {
                for k in 0..3 {
                    assert!((b[k] - n.center[k]).abs() <= n.half * (1.0 + 1e-9), "{b:?} outside {:?} ± {}", n.center, n.half);
                }
            }
            seen += n.count as usize;
        }
        assert_eq!(seen, pos.len());
        let total: f64 = pos.iter().map(|p| f64::from(p[3])).sum();
        assert!((tree.nodes[0].mass - total).abs() <= 1e-12 * total);
    }
}
