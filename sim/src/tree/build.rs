//! [`Octree::build`]: bounding cube, Morton keys, the sorted bodies, the cells (level by level,
//! in parallel) and the walk's groups; the moments are [`super::moments`]'.

use std::time::Instant;

use rayon::prelude::*;

/// Most bodies in a leaf cell; a cell with more is split into its octants (unless it is at the
/// finest level of the Morton grid, where its bodies share one grid cell).
pub const LEAF_BODIES: usize = 16;

/// Most bodies in a walk group: the groups are the cells of at most this many bodies whose
/// parent has more, with consecutive siblings packed together (a leaf with more, at the grid's
/// finest level, is a group of its own). The bodies of a group share one interaction list
/// ([`crate::tree`], "Walk").
pub const GROUP_BODIES: usize = 64;

/// Bits of the Morton grid per axis (2²¹ cells along each side of the bounding cube).
const BITS: u32 = 21;

/// A coordinate type the tree is built from: `f32` (the CPU backend's state) or `f64`.
pub trait Coord: Copy + Send + Sync {
    /// The value in f64 (exact for both).
    fn to_f64(self) -> f64;
}

impl Coord for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Coord for f64 {
    fn to_f64(self) -> f64 {
        self
    }
}

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
    /// softened expansion's extra term (see [`crate::tree`]).
    pub(super) spread: f64,
    /// The cell's bodies: `start .. end` of [`Octree::bodies`] (Morton order).
    pub(super) start: u32,
    /// End of the cell's bodies (exclusive).
    pub(super) end: u32,
    /// Index of the first child in [`Octree::nodes`] (the children are consecutive); unused
    /// for a leaf.
    pub(super) child: u32,
    /// Number of children (1 to 8); 0 for a leaf (its bodies interact one by one when it is
    /// opened).
    pub(super) children: u32,
}

impl Node {
    /// True for a leaf.
    pub(super) fn is_leaf(&self) -> bool {
        self.children == 0
    }
}

/// A cell as the grouped walk reads it, in f32: its multipole (the cell term's record), what
/// the opening test needs, and what to visit when it is opened; one 80-byte record, so that a
/// visit touches few cache lines.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
pub(super) struct WalkNode {
    /// The multipole: centre of mass (length units), mass, quadrupole, spread ([`CellF32`]).
    pub(super) cell: CellF32,
    /// The side of the cube, squared (length²): `(2 half)²`.
    pub(super) side2: f32,
    /// Low corner of the cell's cube, rounded down to f32 (with a 1e-9 relative slack).
    pub(super) lo: [f32; 3],
    /// High corner of the cell's cube, rounded up to f32.
    pub(super) hi: [f32; 3],
    /// Leaf: first body (Morton order); else first child.
    pub(super) first: u32,
    /// Leaf: bodies | [`WalkNode::LEAF`]; else children; [`WalkNode::MASSLESS`] when M = 0.
    pub(super) count: u32,
}

impl WalkNode {
    /// Flag of [`WalkNode::count`]: the cell is a leaf.
    pub(super) const LEAF: u32 = 1 << 31;
    /// Flag of [`WalkNode::count`]: the cell has no mass (the walk skips it).
    pub(super) const MASSLESS: u32 = 1 << 30;
    /// The count without the flags.
    pub(super) fn n(&self) -> u32 {
        self.count & !(Self::LEAF | Self::MASSLESS)
    }
}

/// A cell's multipole in f32, as the grouped walk's cell terms read it: centre of mass (3),
/// mass, the quadrupole's negative `−[xx, yy, zz, xy, xz, yz]`, spread `S`; see [`Node`] (in an
/// interaction list the spread is multiplied by ε²).
pub(super) type CellF32 = [f32; 11];

/// A group of the walk: the bodies `start .. end` (Morton order) of one cell.
#[derive(Debug, Clone, Copy)]
pub(super) struct Group {
    /// First body.
    pub(super) start: u32,
    /// End of its bodies (exclusive).
    pub(super) end: u32,
}

/// How long the build's phases took (ms, host clock).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BuildTimes {
    /// Bounding cube, keys, sort, the sorted bodies, the cells and the groups.
    pub build_ms: f64,
    /// Mass, centre of mass, quadrupole and box of every cell, leaves up.
    pub moments_ms: f64,
}

/// A Barnes–Hut octree over N bodies (see [`crate::tree`] for the method and the sources).
#[derive(Debug, Clone, Default)]
pub struct Octree {
    /// The cells, level by level; `nodes[0]` is the root (the bounding cube). Empty for N = 0.
    pub(super) nodes: Vec<Node>,
    /// The cells as the grouped walk reads them (f32), one per node.
    pub(super) walk: Vec<WalkNode>,
    /// The bodies in Morton order, `[N][4]` f64: x, y, z, mass.
    pub(super) bodies: Vec<[f64; 4]>,
    /// The same bodies in f32 (the input's values for an f32 input).
    pub(super) sorted: Vec<[f32; 4]>,
    /// The index in the caller's `[N]` order of each body of [`Octree::bodies`].
    pub(super) order: Vec<u32>,
    /// First index of each level in [`Octree::nodes`], and the end of the last.
    pub(super) levels: Vec<usize>,
    /// The walk's groups, in Morton order (ascending `start`; together they hold every body once).
    pub(super) groups: Vec<Group>,
    /// The build's phases.
    pub(super) times: BuildTimes,
}

impl Octree {
    /// The tree of the bodies `pos` (`[N][4]`: x, y, z, mass, f32 or f64): Morton keys on a
    /// 2²¹ grid of the bounding cube, a parallel sort (rayon), the cells level by level (each
    /// level in parallel), then their moments (mass, centre of mass, traceless quadrupole, the
    /// box of their bodies; f64, leaves up, each level in parallel). [`Octree::times`] says how
    /// long the two phases took.
    pub fn build<T: Coord>(pos: &[[T; 4]]) -> Self {
        if pos.is_empty() {
            return Self::default();
        }
        let t0 = Instant::now();
        let xyz = |p: &[T; 4]| [p[0].to_f64(), p[1].to_f64(), p[2].to_f64()];
        let (lo, hi) = pos.par_iter().map(|p| (xyz(p), xyz(p))).reduce(
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
        let mut keyed: Vec<(u64, u32)> = pos
            .par_iter()
            .enumerate()
            .map(|(i, p)| {
                let x = xyz(p);
                let cell = |k: usize| ((x[k] - origin[k]) * scale).clamp(0.0, f64::from((1u32 << BITS) - 1)) as u64;
                (morton(cell(0), cell(1), cell(2)), i as u32)
            })
            .collect();
        // Ties (bodies in one grid cell) keep index order, so the tree does not depend on threads.
        keyed.par_sort_unstable();
        let keys: Vec<u64> = keyed.par_iter().map(|o| o.0).collect();
        let order: Vec<u32> = keyed.par_iter().map(|o| o.1).collect();
        drop(keyed);
        let bodies: Vec<[f64; 4]> = order.par_iter().map(|&i| pos[i as usize].map(T::to_f64)).collect();
        let sorted = bodies.par_iter().map(|b| b.map(|c| c as f32)).collect();
        let (nodes, levels) = cells(&keys, center, 0.5 * side);
        let groups = groups(&nodes);
        let mut tree = Self { nodes, walk: Vec::new(), bodies, sorted, order, levels, groups, times: BuildTimes::default() };
        let t1 = Instant::now();
        tree.moments();
        tree.times = BuildTimes { build_ms: ms(t0, t1), moments_ms: ms(t1, Instant::now()) };
        tree
    }

    /// Number of cells (leaves included).
    pub fn cells(&self) -> usize {
        self.nodes.len()
    }

    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// True for the tree of no bodies.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// How long [`Octree::build`]'s phases took.
    pub fn times(&self) -> BuildTimes {
        self.times
    }
}

fn ms(a: Instant, b: Instant) -> f64 {
    (b - a).as_secs_f64() * 1e3
}

/// The cells over the sorted `keys` (the root's cube: `center`, `half`), level by level: a
/// cell's bodies are one run of keys, its children the runs that share the next 3 bits. Each
/// level's splits are found in parallel; the children of a level follow it in order. Returns
/// the nodes (moments not yet set) and the first index of each level (plus the end).
fn cells(keys: &[u64], center: [f64; 3], half: f64) -> (Vec<Node>, Vec<usize>) {
    let n = keys.len() as u32;
    let mut nodes = Vec::with_capacity(keys.len() / 2 + 8);
    nodes.push(Node { center, half, start: 0, end: n, ..Node::default() });
    let mut levels = vec![0];
    let mut level = 0u32;
    loop {
        let (first, last) = (*levels.last().unwrap_or(&0), nodes.len());
        if first == last {
            break;
        }
        let splits: Vec<([u32; 9], usize)> = nodes[first..last].par_iter().map(|nd| split(keys, nd, level)).collect();
        for (i, (bounds, runs)) in (first..last).zip(splits) {
            if runs == 0 {
                continue;
            }
            let child = nodes.len() as u32;
            let parent = nodes[i];
            let q = 0.5 * parent.half;
            for r in 0..runs {
                let o = keys[bounds[r] as usize] >> (3 * (BITS - 1 - level)) & 7;
                let bit = |b: u64| if o >> b & 1 == 1 { q } else { -q };
                let c = [parent.center[0] + bit(2), parent.center[1] + bit(1), parent.center[2] + bit(0)];
                nodes.push(Node { center: c, half: q, start: bounds[r], end: bounds[r + 1], ..Node::default() });
            }
            nodes[i].child = child;
            nodes[i].children = runs as u32;
        }
        levels.push(last);
        level += 1;
    }
    (nodes, levels)
}

/// The runs of `node`'s keys by octant at `level`: `bounds[0..=runs]` (0 runs for a leaf).
fn split(keys: &[u64], node: &Node, level: u32) -> ([u32; 9], usize) {
    let mut bounds = [0u32; 9];
    let (start, end) = (node.start as usize, node.end as usize);
    if end - start <= LEAF_BODIES || level == BITS {
        return (bounds, 0);
    }
    let shift = 3 * (BITS - 1 - level);
    let octant = |k: u64| (k >> shift) & 7;
    // The keys of one cell share their bits above `shift`, so each octant is a contiguous run.
    let mut runs = 0;
    let mut s = start;
    bounds[0] = start as u32;
    while s < end {
        let o = octant(keys[s]);
        s += keys[s..end].partition_point(|&k| octant(k) <= o);
        runs += 1;
        bounds[runs] = s as u32;
    }
    (bounds, runs)
}

/// The walk's groups, in Morton order: the cells of at most [`GROUP_BODIES`] bodies whose parent
/// has more, consecutive siblings among them packed together while their bodies fit in one
/// group (siblings share their parent's cube, so a pack's box is no larger than it); a leaf with
/// more bodies (at the grid's finest level) is a group of its own.
fn groups(nodes: &[Node]) -> Vec<Group> {
    let mut out = Vec::new();
    if let Some(root) = nodes.first() {
        if root.is_leaf() || (root.end - root.start) as usize <= GROUP_BODIES {
            out.push(Group { start: root.start, end: root.end });
        } else {
            pack(nodes, root, &mut out);
        }
    }
    out
}

/// The groups of the children of `parent` (which has more than [`GROUP_BODIES`] bodies).
fn pack(nodes: &[Node], parent: &Node, out: &mut Vec<Group>) {
    let mut open: Option<Group> = None;
    for c in &nodes[parent.child as usize..(parent.child + parent.children) as usize] {
        let len = (c.end - c.start) as usize;
        if len > GROUP_BODIES {
            out.extend(open.take());
            if c.is_leaf() {
                out.push(Group { start: c.start, end: c.end });
            } else {
                pack(nodes, c, out);
            }
            continue;
        }
        match &mut open {
            Some(g) if (c.end - g.start) as usize <= GROUP_BODIES => g.end = c.end,
            _ => {
                out.extend(open.take());
                open = Some(Group { start: c.start, end: c.end });
            }
        }
    }
    out.extend(open);
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

    /// Every body lands in exactly one leaf, inside the leaf's cube (also in f32); each cell's mass is
    /// the sum of its bodies' (f64 sums of at most N terms: 1e-12 relative); the groups hold
    /// every body once, in order, each at most [`GROUP_BODIES`] unless it is one leaf.
    #[test]
    fn every_body_is_in_one_leaf_inside_its_cube() {
        let pos: Vec<[f32; 4]> = (0..1000)
            .map(|i| {
                let t = i as f32;
                [(t * 0.37).sin() * 3.0, (t * 0.11).cos(), (t * 0.07).sin() * (t * 0.013).cos(), 1.0 + (t * 0.5).sin().abs()]
            })
            .collect();
        let tree = Octree::build(&pos);
        let mut seen = 0;
        for (n, w) in tree.nodes.iter().zip(&tree.walk).filter(|(n, _)| n.is_leaf()) {
            for (b, s) in tree.bodies[n.start as usize..n.end as usize].iter().zip(&tree.sorted[n.start as usize..]) {
                for k in 0..3 {
                    assert!((b[k] - n.center[k]).abs() <= n.half * (1.0 + 1e-9), "{b:?} outside {:?} ± {}", n.center, n.half);
                    assert!(w.lo[k] <= s[k] && s[k] <= w.hi[k], "{s:?} outside its f32 cube");
                }
            }
            seen += (n.end - n.start) as usize;
        }
        assert_eq!(seen, pos.len());
        let total: f64 = pos.iter().map(|p| f64::from(p[3])).sum();
        assert!((tree.nodes[0].mass - total).abs() <= 1e-12 * total);
        let mut next = 0;
        for g in &tree.groups {
            assert_eq!(g.start, next);
            let leaf = tree.nodes.iter().any(|n| n.is_leaf() && (n.start, n.end) == (g.start, g.end));
            assert!((g.end - g.start) as usize <= GROUP_BODIES || leaf);
            // A pack of siblings: inside one cell of more than GROUP_BODIES bodies (or the root).
            let parent = tree.nodes.iter().filter(|n| n.start <= g.start && g.end <= n.end).min_by_key(|n| n.end - n.start);
            assert!(parent.is_some());
            next = g.end;
        }
        assert_eq!(next as usize, pos.len());
    }
}
