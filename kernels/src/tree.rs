//! The tree code's kernels (`kernels/README.md`, "Tree code"): Barnes & Hut (1986) on the GPU.
//! A step is three phases on one stream:
//! - **build** ([`TreeKernels::build`]): the header zeroed (`cuMemsetD8Async`), the bounding box
//!   (`nbody_tree_bounds`), a 63-bit Morton key per body (`nbody_tree_keys`), a stable radix
//!   sort of (key, index) in 8 passes of 8 bits (`nbody_tree_sort_count`, `_scan`, `_scatter`),
//!   the sorted positions and the binary radix tree of Karras (2012, HPG, "Maximizing
//!   parallelism in the construction of BVHs, octrees, and k-d trees") (`nbody_tree_build`),
//!   and the walk's groups, the largest subtrees of at most 32 bodies (`nbody_tree_groups`);
//! - **moments** ([`TreeKernels::moments`]): mass, centre of mass, traceless quadrupole, spread
//!   and box of every internal node, from the leaves up (`nbody_tree_moments`);
//! - **walk** ([`TreeKernels::walk`]): one warp per group of at most 32 bodies walks the tree
//!   with the group's box and updates its bodies with the leapfrog at their own indices
//!   (`nbody_tree_walk`): the caller's buffers keep their order.
//!
//! The tree's buffers are a [`TreeWorkspace`] the caller owns and sizes from N
//! ([`TreeWorkspace::bytes_for`]). Its buffers are private, so the only memory a launch can be
//! given is the caller's positions and velocities, which are checked as the step kernels' are.

use std::sync::Arc;

use super::{check_block, check_len, check_step_args, lookup};
use interop::Context;
use interop::Launch;
use interop::Stream;
use interop::{safe::PtxParam, Function, Module};
use interop::{DeviceBuffer, DevicePtr};
use interop::{Error, Result};

/// Words (u32) of the tree's header before the moments' arrival counters: `[0..6)` the box,
/// `[8..10)` the walk's interactions (u64), `[10]` its stack-overflow flag, `[11]` its next group, `[12]` its deepest stack, `[13]` the number of
/// groups.
pub const HEADER_WORDS: usize = 16;

/// Keys per tile of the radix sort (256 threads × 8).
pub const SORT_TILE: usize = 2048;

/// Radix-sort passes (8 bits each over the 63-bit keys; an even count leaves the result in the
/// first of the two key buffers).
pub const SORT_PASSES: u32 = 8;

/// Digits of the radix sort (8 bits a pass): counts per tile and digit.
pub const RADIX: usize = 256;

/// Threads per block of the walk: 8 warps, each taking groups of 32 bodies in turn.
pub const WALK_THREADS: u32 = 256;

/// Entries (i32 node ids) of each walk warp's stack in device memory (`nbody.cu`'s `STACK`).
pub const WALK_STACK: usize = 4096;

/// Largest N of the tree code: Karras's index arithmetic (`i + l·d`, `l < 2N`) stays in `int`.
pub const MAX_TREE_BODIES: usize = 1 << 28;

/// Parameters of `nbody_tree_bounds`: `(const float4* pos, int n, unsigned* header)`.
pub const BOUNDS_PARAMS: [PtxParam; 3] = [PtxParam::B64, PtxParam::B32, PtxParam::B64];
/// Parameters of `nbody_tree_keys`: `(const float4* pos, int n, const unsigned* header,
/// unsigned long long* keys, unsigned* idx)`.
pub const KEYS_PARAMS: [PtxParam; 5] = [PtxParam::B64, PtxParam::B32, PtxParam::B64, PtxParam::B64, PtxParam::B64];
/// Parameters of `nbody_tree_sort_count`: `(const unsigned long long* keys, int n, int shift,
/// unsigned* hist, int tiles)`.
pub const SORT_COUNT_PARAMS: [PtxParam; 5] = [PtxParam::B64, PtxParam::B32, PtxParam::B32, PtxParam::B64, PtxParam::B32];
/// Parameters of `nbody_tree_sort_scan`: `(unsigned* hist, int tiles, unsigned* totals)`.
pub const SORT_SCAN_PARAMS: [PtxParam; 3] = [PtxParam::B64, PtxParam::B32, PtxParam::B64];
/// Parameters of `nbody_tree_sort_scatter`: `(const unsigned long long* keys_in, const unsigned*
/// idx_in, unsigned long long* keys_out, unsigned* idx_out, int n, int shift, const unsigned*
/// hist, int tiles, const unsigned* totals)`.
pub const SORT_SCATTER_PARAMS: [PtxParam; 9] =
    [PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B32, PtxParam::B32, PtxParam::B64, PtxParam::B32, PtxParam::B64];
/// Parameters of `nbody_tree_build`: `(const float4* pos, int n, const unsigned long long*
/// keys, const unsigned* idx, float4* sorted, int2* child, int* parent, int2* range)`.
pub const BUILD_PARAMS: [PtxParam; 8] =
    [PtxParam::B64, PtxParam::B32, PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B64];
/// Parameters of `nbody_tree_groups`: `(int n, const int2* child, const int2* range, int2*
/// groups, unsigned* header)`.
pub const GROUPS_PARAMS: [PtxParam; 5] = [PtxParam::B32, PtxParam::B64, PtxParam::B64, PtxParam::B64, PtxParam::B64];
/// Parameters of `nbody_tree_moments`: `(int n, const float4* sorted, const int2* child, const
/// int* parent, unsigned* counters, float4* com, float4* quad, float4* quad2, float4* box_lo,
/// float4* box_hi)`.
pub const MOMENTS_PARAMS: [PtxParam; 10] = [
    PtxParam::B32,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
];
/// Parameters of `nbody_tree_walk`: `(const float4* pos_in, float4* pos_out, float4* vel, int n,
/// float dt_drift, float kick, float eps2, float g, float theta, const float4* sorted, const
/// unsigned* idx, const int2* child, const float4* com, const float4* quad, const float4* quad2,
/// const float4* box_lo, const float4* box_hi, unsigned* header, int* stacks, const int2* groups)`.
pub const WALK_PARAMS: [PtxParam; 20] = [
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::F32,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
    PtxParam::B64,
];

/// The tree kernels' names and parameter lists, as [`TreeKernels::new`] looks them up.
pub const ENTRIES: [(&str, &[PtxParam]); 9] = [
    ("nbody_tree_bounds", &BOUNDS_PARAMS),
    ("nbody_tree_keys", &KEYS_PARAMS),
    ("nbody_tree_sort_count", &SORT_COUNT_PARAMS),
    ("nbody_tree_sort_scan", &SORT_SCAN_PARAMS),
    ("nbody_tree_sort_scatter", &SORT_SCATTER_PARAMS),
    ("nbody_tree_build", &BUILD_PARAMS),
    ("nbody_tree_groups", &GROUPS_PARAMS),
    ("nbody_tree_moments", &MOMENTS_PARAMS),
    ("nbody_tree_walk", &WALK_PARAMS),
];

/// Threads per block of the per-body kernels (keys, build, moments) and of bounds.
const BLOCK: u32 = 256;
/// Threads of the sort's count and scatter blocks.
const SORT_THREADS: u32 = 256;
/// Threads of each of the sort's scan blocks (one block a digit).
const SCAN_THREADS: u32 = 1024;
/// Most blocks of the bounds reduction (each adds six atomics).
const BOUNDS_MAX_BLOCKS: usize = 1024;

/// The device memory of the tree of N bodies (all private; sizes in [`TreeWorkspace::bytes_for`]).
pub struct TreeWorkspace {
    n: usize,
    /// Which phases of a step the buffers hold ([`Phase`]).
    phase: Phase,
    /// [`HEADER_WORDS`] words, zeroed at each build.
    header: DeviceBuffer<u32>,
    /// The moments' arrival counters, one an internal node (N − 1), zeroed at each build.
    counters: DeviceBuffer<u32>,
    /// Keys and body indices, two of each for the sort's passes (the result in `[0]`).
    keys: [DeviceBuffer<u64>; 2],
    idx: [DeviceBuffer<u32>; 2],
    /// The sort's per-tile digit counts, [`RADIX`] × tiles, and each digit's total.
    hist: DeviceBuffer<u32>,
    totals: DeviceBuffer<u32>,
    /// The positions in key order, `[N][4]`.
    sorted: DeviceBuffer<[f32; 4]>,
    /// Internal nodes' children and their bodies' runs (first, last), `[N − 1][2]` each; parents
    /// of all 2N − 1 nodes.
    child: DeviceBuffer<[i32; 2]>,
    range: DeviceBuffer<[i32; 2]>,
    parent: DeviceBuffer<i32>,
    /// The walk's groups (first body, bodies), `[N][2]` at most.
    groups: DeviceBuffer<[i32; 2]>,
    /// Internal nodes' moments (`[N − 1][4]` each): centre of mass and mass; Qxx, Qyy, Qzz, Qxy;
    /// Qxz, Qyz, S, side; box low and high corners.
    moments: [DeviceBuffer<[f32; 4]>; 5],
    /// The walk's grid (blocks of [`WALK_THREADS`]): as many as fit on the GPU at once.
    walk_grid: u32,
    /// The walk's stacks, [`WALK_STACK`] entries for each of its `walk_grid × 8` warps.
    stacks: DeviceBuffer<i32>,
}

/// What a workspace holds: each phase needs the one before it, so that a kernel never reads a
/// tree that was not (completely) made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing usable (fresh, or a phase failed).
    Empty,
    /// A build succeeded: the sorted bodies, the tree and the groups.
    Built,
    /// Its moments too.
    Moments,
    /// Walked: the counts are the walk's; the next step builds again.
    Walked,
}

/// The caller's buffers of a walk: `(pos_in, pos_out, vel)`, each `[N][4]` f32.
pub type BodyViews<'a> = (DevicePtr<'a, [f32; 4]>, DevicePtr<'a, [f32; 4]>, DevicePtr<'a, [f32; 4]>);

/// What the last walk counted ([`TreeWorkspace::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeCounts {
    /// Body–node terms evaluated (leaves and accepted cells), summed over all bodies.
    pub interactions: u64,
    /// A group's stack overflowed: its bodies' sums miss terms (never expected; a bug).
    pub overflow: bool,
    /// The most entries a walk's stack held (of `WALK_STACK`).
    pub deepest_stack: u32,
}

impl TreeWorkspace {
    /// Device bytes of the workspace for N bodies and a walk grid of `walk_grid` blocks
    /// ([`TreeKernels::walk_grid`]): 4 (header) + 24 (keys and indices, twice) + 16 (sorted) + 16
    /// (children, runs) + 8 (parents) + 8 (groups) + 80 (moments) bytes a body, about 156 N, plus
    /// the sort's 256 × ⌈N / 2048⌉ + 256 counts and 16 KiB of stack a walk warp (128 KiB a block).
    pub fn bytes_for(n: usize, walk_grid: u32) -> usize {
        let m = n.max(2) - 1;
        let stacks = walk_grid as usize * (WALK_THREADS as usize / 32) * WALK_STACK * 4;
        4 * (HEADER_WORDS + m) + 24 * n + 4 * RADIX * (n.div_ceil(SORT_TILE) + 1) + 16 * n + 16 * m + 4 * (2 * n - 1) + 8 * n + 80 * m + stacks
    }

    /// Allocates the workspace for `n` bodies and the walk grid `walk_grid` (`cuMemAlloc`, 19
    /// buffers).
    ///
    /// # Errors
    /// `n` is 0 or above [`MAX_TREE_BODIES`], `walk_grid` is 0; an allocation fails
    /// (`CUDA_ERROR_OUT_OF_MEMORY`: check [`TreeWorkspace::bytes_for`] against the free memory
    /// first).
    #[doc(alias = "cuMemAlloc")]
    pub fn alloc(ctx: &Arc<Context>, n: usize, walk_grid: u32) -> Result<Self> {
        if n == 0 || n > MAX_TREE_BODIES {
            return Err(Error::InvalidArgument(format!("the tree code takes 1 ≤ N ≤ {MAX_TREE_BODIES} bodies, not {n}")));
        }
        if walk_grid == 0 {
            return Err(Error::InvalidArgument("the tree walk needs a grid of at least one block".into()));
        }
        let m = n.max(2) - 1;
        let tiles = n.div_ceil(SORT_TILE);
        Ok(TreeWorkspace {
            n,
            phase: Phase::Empty,
            header: DeviceBuffer::alloc(ctx, HEADER_WORDS)?,
            counters: DeviceBuffer::alloc(ctx, m)?,
            keys: [DeviceBuffer::alloc(ctx, n)?, DeviceBuffer::alloc(ctx, n)?],
            idx: [DeviceBuffer::alloc(ctx, n)?, DeviceBuffer::alloc(ctx, n)?],
            hist: DeviceBuffer::alloc(ctx, RADIX * tiles)?,
            totals: DeviceBuffer::alloc(ctx, RADIX)?,
            sorted: DeviceBuffer::alloc(ctx, n)?,
            child: DeviceBuffer::alloc(ctx, m)?,
            range: DeviceBuffer::alloc(ctx, m)?,
            parent: DeviceBuffer::alloc(ctx, 2 * n - 1)?,
            groups: DeviceBuffer::alloc(ctx, n)?,
            moments: [
                DeviceBuffer::alloc(ctx, m)?,
                DeviceBuffer::alloc(ctx, m)?,
                DeviceBuffer::alloc(ctx, m)?,
                DeviceBuffer::alloc(ctx, m)?,
                DeviceBuffer::alloc(ctx, m)?,
            ],
            walk_grid,
            stacks: DeviceBuffer::alloc(ctx, walk_grid as usize * (WALK_THREADS as usize / 32) * WALK_STACK)?,
        })
    }

    /// N, the bodies the workspace was made for.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false (N ≥ 1).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The last walk's counts: synchronises `stream` (the one the step ran on), then reads the
    /// header (`cuMemcpyDtoH`).
    ///
    /// # Errors
    /// The synchronisation or the copy fails.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn counts(&self, stream: &Stream) -> Result<TreeCounts> {
        stream.synchronize()?;
        let mut h = [0u32; HEADER_WORDS];
        self.header.copy_to_host(&mut h)?;
        Ok(TreeCounts { interactions: u64::from(h[8]) | (u64::from(h[9]) << 32), overflow: h[10] != 0, deepest_stack: h[12] })
    }

    /// The body indices in key order as the last build left them (a permutation of 0..N, for tests).
    ///
    /// # Errors
    /// The copy fails.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn sorted_indices(&self, stream: &Stream) -> Result<Vec<u32>> {
        stream.synchronize()?;
        self.idx[0].to_vec()
    }
}

/// The tree code's nine kernels of a loaded module, their parameters checked.
#[derive(Debug, Clone)]
pub struct TreeKernels {
    bounds: Function,
    keys: Function,
    sort_count: Function,
    sort_scan: Function,
    sort_scatter: Function,
    build: Function,
    groups: Function,
    moments: Function,
    walk: Function,
}

/// A launch of `function` with one thread per item of `items`, [`BLOCK`] threads a block.
fn per_item(function: &Function, items: usize) -> Result<Launch<'_>> {
    Ok(Launch::new(function).grid(grid_of(items.div_ceil(BLOCK as usize))?).block(BLOCK))
}

/// `count` blocks as a grid dimension.
fn grid_of(count: usize) -> Result<u32> {
    u32::try_from(count.max(1)).map_err(|_| Error::InvalidArgument(format!("{count} blocks do not fit a grid")))
}

impl TreeKernels {
    /// The walk's grid on a GPU of `sms` multiprocessors: `sms` × the blocks of
    /// `WALK_THREADS` one multiprocessor holds at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`),
    /// so that every warp is resident and its stack is in use.
    ///
    /// # Errors
    /// The occupancy query fails.
    #[doc(alias = "cuOccupancyMaxActiveBlocksPerMultiprocessor")]
    pub fn walk_grid(&self, sms: u32) -> Result<u32> {
        let per_sm = self.walk.max_active_blocks_per_sm(WALK_THREADS, 0)?.max(1) as u32;
        Ok(sms.max(1) * per_sm)
    }

    /// Looks up the nine kernels in `module` and checks their PTX parameter lists.
    ///
    /// # Errors
    /// A kernel is missing or takes other parameters (the `*_PARAMS` constants).
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module) -> Result<Self> {
        let [bounds, keys, sort_count, sort_scan, sort_scatter, build, groups, moments, walk] =
            ENTRIES.map(|(name, params)| lookup(module, name, params));
        Ok(TreeKernels {
            bounds: bounds?,
            keys: keys?,
            sort_count: sort_count?,
            sort_scan: sort_scan?,
            sort_scatter: sort_scatter?,
            build: build?,
            groups: groups?,
            moments: moments?,
            walk: walk?,
        })
    }

    /// The build phase on `stream`: header and counters zeroed, box, keys, the sort, the sorted
    /// positions and the radix tree of `pos` (`[N][4]` f32: x, y, z, mass; N = `ws.len()`) and
    /// the walk's groups. 28 launches and two memsets. Any phase may come before it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `pos` holds fewer than N bodies; the driver's error (the
    /// workspace is then not built: [`TreeKernels::moments`] refuses it).
    #[doc(alias = "cuLaunchKernel")]
    pub fn build(&self, ws: &mut TreeWorkspace, pos: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> Result<()> {
        ws.phase = Phase::Empty;
        check_block(BLOCK)?;
        check_len("pos", &pos, ws.n)?;
        ws.header.memset_async(0, stream)?;
        ws.counters.memset_async(0, stream)?;
        self.launch_bounds(ws, pos, stream)?;
        self.launch_keys(ws, pos, stream)?;
        for pass in 0..SORT_PASSES {
            let src = (pass % 2) as usize;
            let shift = (8 * pass) as i32;
            self.launch_sort_count(ws, src, shift, stream)?;
            self.launch_sort_scan(ws, stream)?;
            self.launch_sort_scatter(ws, src, shift, stream)?;
        }
        self.launch_build(ws, pos, stream)?;
        self.launch_groups(ws, stream)?;
        ws.phase = Phase::Built;
        Ok(())
    }

    /// `nbody_tree_bounds` over `pos` (at least N bodies: checked by `build`).
    fn launch_bounds(&self, ws: &TreeWorkspace, pos: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> Result<()> {
        let grid = grid_of(ws.n.div_ceil(BLOCK as usize).min(BOUNDS_MAX_BLOCKS))?;
        let launch = Launch::new(&self.bounds).grid(grid).block(BLOCK).ptr(pos).i32(ws.n as i32).ptr(ws.header.view());
        // SAFETY: the parameter list is BOUNDS_PARAMS (checked at `new` and by `launch`). The
        // kernel reads pos[0..n) (pos holds ≥ n bodies: checked by `build`) and adds atomics to
        // header[0..6) (the header holds HEADER_WORDS ≥ 6 words). The workspace's buffers live as
        // long as `ws`, which the caller keeps until the stream is done (its owners synchronise).
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_keys`: `keys[0]` and `idx[0]` of every body.
    fn launch_keys(&self, ws: &TreeWorkspace, pos: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> Result<()> {
        let launch = per_item(&self.keys, ws.n)?.ptr(pos).i32(ws.n as i32).ptr(ws.header.view()).ptr(ws.keys[0].view()).ptr(ws.idx[0].view());
        // SAFETY: KEYS_PARAMS (checked). Reads pos[0..n) (≥ n: checked by `build`) and
        // header[0..6); writes keys[0][0..n) and idx[0][0..n): each buffer holds n.
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_sort_count` of pass `shift` over `keys[src]`.
    fn launch_sort_count(&self, ws: &TreeWorkspace, src: usize, shift: i32, stream: &Stream) -> Result<()> {
        let tiles = ws.n.div_ceil(SORT_TILE);
        let launch = Launch::new(&self.sort_count)
            .grid(grid_of(tiles)?)
            .block(SORT_THREADS)
            .ptr(ws.keys[src].view())
            .i32(ws.n as i32)
            .i32(shift)
            .ptr(ws.hist.view())
            .i32(tiles as i32);
        // SAFETY: SORT_COUNT_PARAMS (checked). Block t reads keys[t·2048 ..) below n and writes
        // hist[d·tiles + t], d < 256: hist holds 256·tiles.
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_sort_scan`: each digit's counts scanned, its total in `totals`.
    fn launch_sort_scan(&self, ws: &TreeWorkspace, stream: &Stream) -> Result<()> {
        let tiles = ws.n.div_ceil(SORT_TILE) as i32;
        let launch = Launch::new(&self.sort_scan).grid(RADIX as u32).block(SCAN_THREADS).ptr(ws.hist.view()).i32(tiles).ptr(ws.totals.view());
        // SAFETY: SORT_SCAN_PARAMS (checked). Block d reads and writes hist[d·tiles ..
        // (d + 1)·tiles), d < 256 = the grid: inside hist's 256·tiles; writes totals[d] (256).
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_sort_scatter`: `keys[src]`, `idx[src]` → `keys[1 − src]`, `idx[1 − src]`.
    fn launch_sort_scatter(&self, ws: &TreeWorkspace, src: usize, shift: i32, stream: &Stream) -> Result<()> {
        let tiles = ws.n.div_ceil(SORT_TILE);
        let launch = Launch::new(&self.sort_scatter)
            .grid(grid_of(tiles)?)
            .block(SORT_THREADS)
            .ptr(ws.keys[src].view())
            .ptr(ws.idx[src].view())
            .ptr(ws.keys[1 - src].view())
            .ptr(ws.idx[1 - src].view())
            .i32(ws.n as i32)
            .i32(shift)
            .ptr(ws.hist.view())
            .i32(tiles as i32)
            .ptr(ws.totals.view());
        // SAFETY: SORT_SCATTER_PARAMS (checked). Reads keys_in, idx_in below n, hist below
        // 256·tiles and totals[0..256); writes keys_out[at], idx_out[at] with `at` a rank below n
        // (the scanned counts of the n keys this pass's count and scan kernels just made): every
        // buffer holds n, and in and out are distinct buffers.
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_build`: the sorted positions and the radix tree.
    fn launch_build(&self, ws: &TreeWorkspace, pos: DevicePtr<'_, [f32; 4]>, stream: &Stream) -> Result<()> {
        let launch = per_item(&self.build, ws.n)?
            .ptr(pos)
            .i32(ws.n as i32)
            .ptr(ws.keys[0].view())
            .ptr(ws.idx[0].view())
            .ptr(ws.sorted.view())
            .ptr(ws.child.view())
            .ptr(ws.parent.view())
            .ptr(ws.range.view());
        // SAFETY: BUILD_PARAMS (checked). Reads keys[0..n), idx[0..n) and pos[idx[i]] (idx is a
        // permutation of 0..n: the sort's 8 passes, launched just before on this stream, permute
        // the identity the keys kernel wrote; pos holds ≥ n: checked by `build`); writes
        // sorted[0..n), child[0..n − 1), range[0..n − 1) and parent[0..2n − 1) (Karras's children
        // are nodes < 2n − 1): the sizes allocated.
        unsafe { launch.launch(stream) }
    }

    /// `nbody_tree_groups`: the walk's groups and their count in the header.
    fn launch_groups(&self, ws: &TreeWorkspace, stream: &Stream) -> Result<()> {
        let launch = per_item(&self.groups, ws.n.max(2) - 1)?
            .i32(ws.n as i32)
            .ptr(ws.child.view())
            .ptr(ws.range.view())
            .ptr(ws.groups.view())
            .ptr(ws.header.view());
        // SAFETY: GROUPS_PARAMS (checked). Reads child and range of internal nodes < n − 1 (the
        // build kernel's, launched just before) and range of their internal children; writes
        // groups[k] for k < the number of subtrees emitted, which are disjoint runs of bodies,
        // so k < n (the buffer's length); adds to header[13].
        unsafe { launch.launch(stream) }
    }

    /// The moments phase on `stream`, after a [`TreeKernels::build`] of the same workspace.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the workspace was not built (or its build failed) or its
    /// moments were already made; the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn moments(&self, ws: &mut TreeWorkspace, stream: &Stream) -> Result<()> {
        if ws.phase != Phase::Built {
            return Err(Error::InvalidArgument(format!("the tree's moments need a fresh build (the workspace is {:?})", ws.phase)));
        }
        ws.phase = Phase::Empty;
        let [com, quad, quad2, lo, hi] = &ws.moments;
        let launch = per_item(&self.moments, ws.n)?
            .i32(ws.n as i32)
            .ptr(ws.sorted.view())
            .ptr(ws.child.view())
            .ptr(ws.parent.view())
            .ptr(ws.counters.view())
            .ptr(com.view())
            .ptr(quad.view())
            .ptr(quad2.view())
            .ptr(lo.view())
            .ptr(hi.view());
        // SAFETY: MOMENTS_PARAMS (checked). The phase is Built: a build of this workspace
        // succeeded, so child and parent hold the radix tree of n bodies (nodes < 2n − 1) and the
        // counters are zero. Reads sorted[0..n), child and parent of those nodes, increments
        // counters[node < n − 1]; writes the moments of internal nodes < n − 1: every buffer
        // holds that many (allocated for ws.n).
        unsafe { launch.launch(stream)? };
        ws.phase = Phase::Moments;
        Ok(())
    }

    /// The walk phase on `stream` (after [`TreeKernels::moments`]): each body's acceleration sum
    /// by the tree with opening angle `theta`, then `vel += a·g·kick`, `pos_out = pos_in +
    /// vel·dt_drift` at the body's own index (`[N][4]` f32 each, N = `ws.len()`; `pos_in` the
    /// positions the tree was built from). `eps2` is ε² (length²).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for buffers shorter than N or overlapping, θ negative or not
    /// finite, a workspace whose moments were not made since its last build (or that was walked
    /// already); the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn walk(
        &self,
        ws: &mut TreeWorkspace,
        (pos_in, pos_out, vel): BodyViews<'_>,
        s: super::StepScalars,
        theta: f32,
        stream: &Stream,
    ) -> Result<()> {
        let (n, _, _) = check_step_args(ws.n, &(0..ws.n), &pos_in, &pos_out, &vel)?;
        if !(theta.is_finite() && theta >= 0.0) {
            return Err(Error::InvalidArgument(format!("θ = {theta}: the opening angle must be finite and ≥ 0")));
        }
        if ws.phase != Phase::Moments {
            return Err(Error::InvalidArgument(format!("the tree's walk needs a build and its moments first (the workspace is {:?})", ws.phase)));
        }
        ws.phase = Phase::Empty;
        let [com, quad, quad2, lo, hi] = &ws.moments;
        let launch = Launch::new(&self.walk)
            .grid(ws.walk_grid)
            .block(WALK_THREADS)
            .ptr(pos_in)
            .ptr(pos_out)
            .ptr(vel)
            .i32(n)
            .f32(s.dt_drift)
            .f32(s.kick)
            .f32(s.eps2)
            .f32(s.g)
            .f32(theta)
            .ptr(ws.sorted.view())
            .ptr(ws.idx[0].view())
            .ptr(ws.child.view())
            .ptr(com.view())
            .ptr(quad.view())
            .ptr(quad2.view())
            .ptr(lo.view())
            .ptr(hi.view())
            .ptr(ws.header.view())
            .ptr(ws.stacks.view())
            .ptr(ws.groups.view());
        // SAFETY: WALK_PARAMS (checked). The phase was Moments: a build and its moments
        // succeeded since the last walk, so idx is a permutation of 0..n, child holds the tree
        // (nodes < 2n − 1), groups[0..header[13]) are disjoint runs of bodies below n and the
        // next-group counter header[11] is 0. The kernel reads the workspace's buffers at those
        // nodes and bodies (their sizes) and header[11..14); warp w of block b uses
        // stacks[(8b + w)·WALK_STACK ..] up to WALK_STACK entries (it checks before each push; an
        // overflow stops the group and sets header[10]), and the grid is walk_grid, the blocks
        // the stacks were allocated for; adds to header[8..13). It writes pos_out[idx[i]] and
        // vel[idx[i]] and reads pos_in[idx[i]] for i < n: pos_in, pos_out and vel hold ≥ n
        // bodies and do not overlap (checked above).
        unsafe { launch.launch(stream)? };
        ws.phase = Phase::Walked;
        Ok(())
    }
}
