//! The density view's kernels (`kernels/README.md`, "density view"): `nbody_density_splat` (the
//! bodies' mass projected into a float image in linear memory, atomically), `nbody_density_store`
//! (that image written into a mapped R32F GL texture through a surface object, and cleared) and
//! `nbody_density_tonemap` (the R32F image read through a texture object, smoothed, tone-mapped
//! and written into a mapped RGBA8 GL texture through a surface object).

use super::{check_block, check_len, checked_n, lookup};
use interop::DevicePtr;
use interop::Launch;
use interop::Stream;
use interop::{safe::PtxParam, Function, Module};
use interop::{Error, Result};
use interop::{SurfaceObject, TextureObject};

/// Parameters of `nbody_density_splat`: `(const float4* pos, int n, float* accum, int width, int
/// height, float4 row_x, float4 row_y, float4 row_w)`.
pub const SPLAT_PARAMS: [PtxParam; 8] =
    [PtxParam::B64, PtxParam::B32, PtxParam::B64, PtxParam::B32, PtxParam::B32, PtxParam::Bytes(16), PtxParam::Bytes(16), PtxParam::Bytes(16)];

/// Parameters of `nbody_density_store`: `(float* accum, int width, int height,
/// cudaSurfaceObject_t density)`.
pub const STORE_PARAMS: [PtxParam; 4] = [PtxParam::B64, PtxParam::B32, PtxParam::B32, PtxParam::B64];

/// Parameters of `nbody_density_tonemap`: `(cudaTextureObject_t density, int width, int height,
/// float gain, cudaSurfaceObject_t image)`.
pub const TONEMAP_PARAMS: [PtxParam; 5] = [PtxParam::B64, PtxParam::B32, PtxParam::B32, PtxParam::F32, PtxParam::B64];

/// Threads per block of the density kernels (one body or one pixel per thread).
const BLOCK: u32 = 256;

/// The three density kernels of a loaded module, their parameters checked.
#[derive(Debug, Clone)]
pub struct DensityKernels {
    splat: Function,
    store: Function,
    tonemap: Function,
}

/// `width` × `height` as the kernels' ints, and the grid of one pixel per thread.
fn image_grid(width: usize, height: usize) -> Result<(i32, i32, u32)> {
    let pixels = width.checked_mul(height).filter(|&p| p > 0 && p <= i32::MAX as usize);
    let Some(pixels) = pixels else {
        return Err(Error::InvalidArgument(format!("a {width}×{height} density image: 1 to 2^31 − 1 pixels")));
    };
    Ok((width as i32, height as i32, pixels.div_ceil(BLOCK as usize) as u32))
}

/// Checks that `stream` is the stream of the mapping an object's array belongs to (`what` names
/// the object): the unmap on that stream is then ordered after the launch.
fn check_stream(what: &str, object_stream: interop::sys::CUstream, stream: &Stream) -> Result<()> {
    if object_stream != stream.raw() {
        return Err(Error::InvalidArgument(format!("{what}: launch on the stream its images were mapped on, so that the unmap follows the kernel")));
    }
    Ok(())
}

/// Checks that a surface or texture object's array is at least `width` × `height` texels of 4
/// bytes (`what` names it in the error).
fn check_extent(what: &str, extent: ((usize, usize), Option<usize>), width: usize, height: usize) -> Result<()> {
    let ((w, h), texel) = extent;
    if w < width || h < height || texel != Some(4) {
        return Err(Error::InvalidArgument(format!(
            "{what}: a {w}×{h} array of {texel:?}-byte texels, the kernel writes {width}×{height} texels of 4 bytes"
        )));
    }
    Ok(())
}

impl DensityKernels {
    /// Looks up the three kernels in `module` and checks their PTX parameter lists.
    ///
    /// # Errors
    /// A kernel is missing or takes other parameters ([`SPLAT_PARAMS`], [`STORE_PARAMS`],
    /// [`TONEMAP_PARAMS`]).
    #[doc(alias = "cuModuleGetFunction")]
    pub fn new(module: &Module) -> Result<Self> {
        Ok(DensityKernels {
            splat: lookup(module, "nbody_density_splat", &SPLAT_PARAMS)?,
            store: lookup(module, "nbody_density_store", &STORE_PARAMS)?,
            tonemap: lookup(module, "nbody_density_tonemap", &TONEMAP_PARAMS)?,
        })
    }

    /// Adds each of the first `n` bodies' mass (`pos` `[N][4]` f32: x, y, z, mass) to its pixel
    /// of `accum` (`[height][width]` f32, row 0 at the bottom), where the pixel is the body's
    /// clip position `(row_x · p, row_y · p, row_w · p)`, `p = (x, y, z, 1)`, in NDC; bodies
    /// behind the camera (w ≤ 0) or outside [−1, 1) are skipped. On `stream`, 256 threads per
    /// block, `ceil(n / 256)` blocks.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for N out of range, `pos` shorter than N, `accum` shorter
    /// than `width × height` or overlapping `pos`; the driver's launch error.
    #[allow(clippy::too_many_arguments)]
    #[doc(alias = "cuLaunchKernel")]
    pub fn splat(
        &self,
        n: usize,
        pos: DevicePtr<'_, [f32; 4]>,
        accum: DevicePtr<'_, f32>,
        (width, height): (usize, usize),
        rows: [[f32; 4]; 3],
        stream: &Stream,
    ) -> Result<()> {
        check_block(BLOCK)?;
        let nn = checked_n(n)?;
        let (w, h, _) = image_grid(width, height)?;
        check_len("pos", &pos, n)?;
        check_len("accum", &accum, width * height)?;
        if pos.overlaps(&accum) {
            return Err(Error::InvalidArgument("pos and accum must not overlap".into()));
        }
        let grid = n.div_ceil(BLOCK as usize) as u32;
        let [rx, ry, rw] = rows;
        let launch = Launch::new(&self.splat).grid(grid).block(BLOCK).ptr(pos).i32(nn).ptr(accum).i32(w).i32(h).f32x4(rx).f32x4(ry).f32x4(rw);
        // SAFETY: the parameter list is SPLAT_PARAMS (checked at `new` and by `launch`). Per
        // kernels/README.md the kernel reads pos[i] for i = blockIdx.x · 256 + threadIdx.x < n and
        // adds to accum[py · width + px] with 0 ≤ px < width, 0 ≤ py < height (clamped in the
        // kernel), nothing else; pos holds ≥ n bodies and accum ≥ width · height floats
        // (checked), and they do not overlap (checked). The views borrow their owners for this
        // call; the owners keep the memory until the stream has run it (the caller's mapping is
        // unmapped on this stream; the scratch buffer is freed after a stream synchronisation).
        unsafe { launch.launch(stream) }
    }

    /// The surface path's store: `accum` (`[height][width]` f32) written into the R32F array
    /// under `density` through `surf2Dwrite`, then set to 0. On `stream`, one pixel per thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `accum` is shorter than `width × height` or the surface's
    /// array is smaller or not 4 bytes a texel; the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn store(&self, accum: DevicePtr<'_, f32>, (width, height): (usize, usize), density: &SurfaceObject<'_>, stream: &Stream) -> Result<()> {
        let (w, h, grid) = image_grid(width, height)?;
        check_len("accum", &accum, width * height)?;
        check_extent("density surface", density.extent(), width, height)?;
        check_stream("density surface", density.stream(), stream)?;
        let launch = Launch::new(&self.store).grid(grid).block(BLOCK).ptr(accum).i32(w).i32(h).surface(density);
        // SAFETY: the parameter list is STORE_PARAMS (checked at `new` and by `launch`). The
        // kernel reads and zeroes accum[i] and writes texel (i mod width, i / width) of the surface
        // for i < width · height only; accum holds that many floats and the surface's array is at
        // least width × height texels of 4 bytes (both checked), so no surface access is out of
        // bounds (which would trap). The surface object borrows its mapped array, so the mapping
        // outlives this call, and `stream` is the mapping's (checked): the unmap is ordered after
        // the kernel.
        unsafe { launch.launch(stream) }
    }

    /// The tone map: each pixel of the `width` × `height` image is a 5 × 5-texel smoothing of the
    /// R32F array under `density` (read through the texture object, bilinear), times `gain`,
    /// mapped to `log2(1 + v) / 12` and coloured, written as RGBA8 into the array under `image`.
    /// On `stream`, one pixel per thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when either array is smaller than `width × height` or not 4
    /// bytes a texel; the driver's launch error.
    #[doc(alias = "cuLaunchKernel")]
    pub fn tonemap(
        &self,
        density: &TextureObject<'_>,
        (width, height): (usize, usize),
        gain: f32,
        image: &SurfaceObject<'_>,
        stream: &Stream,
    ) -> Result<()> {
        let (w, h, grid) = image_grid(width, height)?;
        check_extent("density texture", density.extent(), width, height)?;
        check_extent("image surface", image.extent(), width, height)?;
        check_stream("density texture", density.stream(), stream)?;
        check_stream("image surface", image.stream(), stream)?;
        let launch = Launch::new(&self.tonemap).grid(grid).block(BLOCK).texture(density).i32(w).i32(h).f32(gain).surface(image);
        // SAFETY: the parameter list is TONEMAP_PARAMS (checked at `new` and by `launch`). The
        // kernel reads the texture (clamped addressing: any coordinate is in bounds) and writes
        // texel (i mod width, i / width) of the surface for i < width · height only; the surface's
        // array is at least width × height texels of 4 bytes (checked). Both objects borrow their
        // mapped arrays, so the mappings outlive this call, and `stream` is the mappings' (checked):
        // they unmap after the kernel.
        unsafe { launch.launch(stream) }
    }
}
