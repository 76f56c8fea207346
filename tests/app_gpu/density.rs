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

/// Step mode in the density view, headless, one step a frame as `--step-mode` takes them: the
/// buffers' steps, then the image workflow's (registered at the first density frame, again
/// after a resize), each frame drawn as the scene would (GL draws the image, or its snapshot
/// while CUDA has the images mapped); leaving step mode mid-pass unmaps the images.
pub(super) fn density_step_mode_walks_the_image_workflow() -> Result<(), Failed> {
    use nbody_app::backend::step::{StepState, WorkflowStep};
    use WorkflowStep::*;
    let ctx = HeadlessContext::new(0)?;
    let gl = ctx.gl();
    let mut bodies = plummer(4096, 11)?;
    for p in &mut bodies.pos {
        p[3] = 1.0 / 4096.0;
    }
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let mut renderer = Renderer::new(gl, &ctx.info, &bodies)?;
    let vbos = *renderer.vbos();
    let settings = InteropSettings {
        interop: InteropMode::Map,
        register_flags: ResourceFlags::None,
        map_flags: ResourceFlags::None,
        stream: StreamKind::NonBlocking,
        stream_priority: 0,
        block_size: 256,
    };
    let opts = CudaOptions {
        settings,
        separate_maps: false,
        ctx_sched: CtxSched::Auto,
        kernel: None,
        step_kernel: None,
        precision: Precision::F32,
        split: None,
        external_sync: nbody_app::cuda::settings::ExternalSync::Auto,
    };
    let small = OffscreenTarget::new(gl, SIZE[0], SIZE[1])?;
    let large = OffscreenTarget::new(gl, SIZE[0] + 32, SIZE[1] + 16)?;
    let result = (|| -> Result<(), Failed> {
        let mut backend = CudaBackend::new(&opts, gl, &ctx.info, &vbos, &bodies, params)?;
        let view_proj = OrbitCamera::framing(Vec3::ZERO, 4.0).view_proj(SIZE[0] as f32 / SIZE[1] as f32);
        backend.set_step_mode(true)?;
        let frame = |backend: &mut CudaBackend, target: &OffscreenTarget| -> Result<(WorkflowStep, StepState), Failed> {
            let step = backend.next_step(gl, &vbos, 1)?;
            let v = backend.step_view().ok_or("step mode ended")?;
            // Mapped images: the image drawn is the snapshot; mapped buffers are not touched.
            backend.draw_density(gl, &RenderTarget::Offscreen(*target), view_proj, DensityPath::Surface)?;
            gl.finish();
            Ok((step, v.state))
        };
        let mut steps = Vec::new();
        for _ in 0..4 + 1 + 9 {
            let (step, state) = frame(&mut backend, &small)?;
            ensure(
                state.images_mapped() == matches!(step, MapImages | GetArrays | MakeObjects | Splat | Store | ToneMap | DestroyObjects),
                format!("{state:?} after {step:?}"),
            )?;
            steps.push(step);
        }
        let pass = [MapImages, GetArrays, MakeObjects, Splat, Store, ToneMap, DestroyObjects, UnmapImages, DrawImage];
        let mut want = vec![Map, GetPointers, Launch, Unmap, RegisterImages];
        want.extend(pass);
        eprintln!("density step mode: {steps:?}");
        ensure(steps == want, format!("steps {steps:?}, expected {want:?}"))?;
        // A resize: the next frame unregisters and registers again before its pass.
        let mut steps = Vec::new();
        for _ in 0..4 + 2 + 9 {
            steps.push(frame(&mut backend, &large)?.0);
        }
        let mut want = vec![Map, GetPointers, Launch, Unmap, UnregisterImages, RegisterImages];
        want.extend(pass);
        ensure(steps == want, format!("after a resize: steps {steps:?}, expected {want:?}"))?;
        // Leaving step mode in the middle of the image pass unmaps the images; whole frames follow.
        for _ in 0..4 + 3 {
            frame(&mut backend, &large)?;
        }
        ensure(backend.step_view().is_some_and(|v| v.state.images_mapped()), "the images are mapped mid-pass")?;
        backend.set_step_mode(false)?;
        backend.simulate(gl, &vbos, 1)?;
        backend.draw_density(gl, &RenderTarget::Offscreen(large), view_proj, DensityPath::Surface)?;
        backend.release_gl(gl);
        drop(backend); // unregister before the GL buffers are deleted
        Ok(())
    })();
    small.destroy(gl);
    large.destroy(gl);
    renderer.destroy(gl);
    result
}
