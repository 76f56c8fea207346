//! The density view's image workflow on the GPU: bodies splatted into a registered `GL_R32F`
//! texture (surface path and `cuMemcpy2D` path), tone-mapped into a registered `GL_RGBA8` one.

use glam::{Mat4, Vec3};
use nbody_app::cuda::density::DensityView;
use nbody_app::cuda::settings::DensityPath;
use nbody_app::gfx::camera::OrbitCamera;

use super::*;

const SIZE: [u32; 2] = [320, 200];

/// Runs one density pass over `bodies` (all in view of `view_proj`) with `path` and returns the
/// two images.
fn pass(path: DensityPath, bodies: &Bodies, view_proj: Mat4) -> Result<(Vec<f32>, Vec<u8>), Failed> {
    let headless = HeadlessContext::new(0)?;
    let gl = headless.gl();
    let ctx = cuda()?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    let kernels = Kernels::load(&ctx, None)?.density()?;
    let pos = DeviceBuffer::from_slice(&ctx, &bodies.pos)?;
    let mut view = DensityView::new(gl, headless.info.is_gles, &ctx, kernels, SIZE, path, &stream)?;
    let r = (|| -> anyhow::Result<(Vec<f32>, Vec<u8>)> {
        view.run(pos.view(), bodies.len(), view_proj, (SIZE[0] * SIZE[1]) as f32, &stream)?;
        // A second pass: the sum must have been cleared by the first.
        view.run(pos.view(), bodies.len(), view_proj, (SIZE[0] * SIZE[1]) as f32, &stream)?;
        let images = view.read_images(&stream)?;
        stream.synchronize()?;
        Ok(images)
    })();
    view.release(gl);
    Ok(r?)
}

pub(super) fn density_view_holds_every_body_once() -> Result<(), Failed> {
    let mut bodies = plummer(4096, 11)?;
    // Equal masses of 2^-12: every partial sum of them is exact in f32, in any order.
    for p in &mut bodies.pos {
        p[3] = 1.0 / 4096.0;
    }
    let cam = OrbitCamera::framing(Vec3::ZERO, 4.0);
    let view_proj = cam.view_proj(SIZE[0] as f32 / SIZE[1] as f32);
    let inside = bodies
        .pos
        .iter()
        .filter(|p| {
            let c = view_proj * Vec3::new(p[0], p[1], p[2]).extend(1.0);
            let (x, y) = (c.x / c.w, c.y / c.w);
            c.w > 0.0 && x.abs() < 0.999 && y.abs() < 0.999
        })
        .count();
    ensure(inside > 3000, format!("the camera frames only {inside} of 4096 bodies"))?;
    let (surface, image) = pass(DensityPath::Surface, &bodies, view_proj)?;
    let (copied, image_copy) = pass(DensityPath::Copy, &bodies, view_proj)?;
    let total: f64 = surface.iter().map(|&v| f64::from(v)).sum::<f64>() * 4096.0;
    eprintln!("density view: {inside} bodies well inside, {total} counted in the image");
    // Bodies within 0.1 % of the edge may fall either side of it.
    ensure(total >= inside as f64 && total <= 4096.0, format!("{total} bodies in the density image, {inside} well inside the view"))?;
    ensure(surface == copied, "the surface and the cuMemcpy2D paths wrote different density images")?;
    ensure(image == image_copy, "the surface and the cuMemcpy2D paths tone-mapped differently")?;
    let lit = image.chunks_exact(4).filter(|p| p[0] > 40 || p[1] > 40 || p[2] > 40).count();
    ensure(lit > 500 && image.chunks_exact(4).all(|p| p[3] == 255), format!("{lit} lit pixels in the shown image"))?;
    Ok(())
}
