//! The grouped walk (f32, explicit SIMD): one walk of the tree per group, whose interaction
//! list every body of the group then evaluates ([`super::simd::accelerations`]).

use super::build::{CellF32, Group, Octree, WalkNode};
use super::simd::{accelerations, TreeOp, TreeSimd};
use super::walk::Interactions;

/// One group's interaction lists and the walk's stack: scratch space, one per task.
#[derive(Debug, Default)]
pub(super) struct Lists {
    /// The bodies of the opened leaves: x, y, z, mass.
    bodies: Vec<[f32; 4]>,
    /// The accepted cells' multipoles.
    cells: Vec<CellF32>,
    /// Cells to visit.
    stack: Vec<u32>,
}

impl Octree {
    /// The interaction lists of group `g` at opening angle θ (`theta2` = θ²): a walk from the
    /// root with the group's box (the least and greatest coordinates of its bodies). A cell is
    /// opened (its children, or a leaf's bodies, visited in its place) when its cube meets the
    /// box, or when `l ≥ θ d` with `l` its side and `d` the distance from its centre of mass to
    /// the box: for every body of the group `d` is at most its own distance, so a cell that the
    /// walk of any one body would open is opened. Massless cells are skipped. `eps2` is ε² (the
    /// cells' spreads are listed times ε²).
    fn lists(&self, g: &Group, theta2: f32, eps2: f32, l: &mut Lists) {
        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for b in &self.sorted[g.start as usize..g.end as usize] {
            for k in 0..3 {
                lo[k] = lo[k].min(b[k]);
                hi[k] = hi[k].max(b[k]);
            }
        }
        l.bodies.clear();
        l.cells.clear();
        l.stack.clear();
        l.stack.push(0);
        while let Some(i) = l.stack.pop() {
            let w = &self.walk[i as usize];
            if w.count & WalkNode::MASSLESS != 0 {
                continue;
            }
            let meets = (0..3).all(|k| w.lo[k] <= hi[k] && lo[k] <= w.hi[k]);
            if !meets {
                let d = [0, 1, 2].map(|k| (lo[k] - w.cell[k]).max(w.cell[k] - hi[k]).max(0.0));
                if w.side2 < theta2 * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) {
                    l.cells.extend_from_slice(std::slice::from_ref(&w.cell));
                    if let Some(c) = l.cells.last_mut() {
                        c[10] *= eps2;
                    }
                    continue;
                }
            }
            let (first, n) = (w.first, w.n());
            if w.count & WalkNode::LEAF != 0 {
                l.bodies.extend_from_slice(&self.sorted[first as usize..(first + n) as usize]);
            } else {
                l.stack.extend((first..first + n).rev());
            }
        }
    }
}

/// The grouped walk over consecutive groups: the accelerations of their bodies (Morton order,
/// `[len][3]`, times G) into `out`, and the interactions counted.
pub(super) struct WalkGroups<'a> {
    pub(super) tree: &'a Octree,
    pub(super) groups: &'a [Group],
    pub(super) out: &'a mut [[f32; 3]],
    pub(super) lists: &'a mut Lists,
    pub(super) g: f32,
    pub(super) eps2: f32,
    pub(super) theta2: f32,
}

impl TreeOp for WalkGroups<'_> {
    type Output = Interactions;

    #[inline(always)]
    fn run<S: TreeSimd>(self, simd: S) -> Interactions {
        let Self { tree, groups, out, lists, g, eps2, theta2 } = self;
        let base = groups.first().map_or(0, |g| g.start as usize);
        let mut counts = Interactions::default();
        for grp in groups {
            tree.lists(grp, theta2, eps2, lists);
            let (start, end) = (grp.start as usize, grp.end as usize);
            accelerations(simd, &lists.bodies, &lists.cells, &tree.sorted[start..end], &mut out[start - base..end - base], g, eps2);
            let len = (end - start) as u64;
            counts += Interactions { body_body: len * lists.bodies.len() as u64, body_cell: len * lists.cells.len() as u64 };
        }
        counts
    }
}
