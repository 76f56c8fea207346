//! The headless loop: an EGL context on the CUDA device's EGL device, an offscreen FBO, and the
//! frames of [`Scene::frame`] each followed by `glFinish`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;

use super::scene::Scene;
use crate::cli::DemoArgs;
use crate::gfx::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};
use crate::gfx::renderer::{OffscreenTarget, RenderTarget};
use crate::sim::{Bodies, PhysParams};

/// Egui input of a headless frame: `width` × `height` points at 1 pixel per point.
pub(crate) fn headless_input(width: u32, height: u32, time: f64) -> egui::RawInput {
    let mut raw = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width as f32, height as f32))),
        time: Some(time),
        ..Default::default()
    };
    raw.viewports.entry(egui::ViewportId::ROOT).or_default().native_pixels_per_point = Some(1.0);
    raw
}

/// Run the demo headless: EGL context, offscreen FBO, `--frames` frames (or until Ctrl-C), then
/// the screenshot, the state and the summary.
///
/// # Errors
/// No headless GL context, or a failure while running or writing the outputs.
pub fn run(args: &DemoArgs, bodies: Bodies, params: PhysParams) -> anyhow::Result<()> {
    // Declared first, dropped last: the context outlives the scene.
    let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).context("headless GL context")?;
    tracing::info!(gl = %ctx.info.summary(), device = ?ctx.info.egl_device, "headless GL");
    // `ctx` (declared first) outlives `scene`, which holds a share of its proof of currency.
    let mut scene = Scene::new(ctx.current().clone(), ctx.info.clone(), args, &bodies, params)?;
    drop(bodies);
    let fbo = OffscreenTarget::new(ctx.gl(), args.width, args.height).context("offscreen framebuffer")?;
    scene.offscreen = Some(fbo);
    let target = RenderTarget::Offscreen(fbo);

    let stop = Arc::new(AtomicBool::new(false));
    if args.frames.is_none() {
        let s = Arc::clone(&stop);
        match ctrlc::set_handler(move || s.store(true, Ordering::SeqCst)) {
            Ok(()) => eprintln!("headless without --frames: running until Ctrl-C (the screenshot and state are saved then)"),
            Err(e) => tracing::warn!("no Ctrl-C handler ({e}); stop with --frames"),
        }
    }
    while args.frames.is_none_or(|n| scene.frames() < n) && !stop.load(Ordering::SeqCst) {
        let input = headless_input(args.width, args.height, scene.time());
        scene.frame(input, target, 1.0, true)?;
        ctx.gl().finish();
        for line in scene.take_reports() {
            println!("{line}");
        }
    }
    if let Some(path) = &args.screenshot {
        scene.screenshot(&target, path)?;
    }
    let summary = scene.finish()?;
    drop(scene);
    drop(ctx);
    summary.print();
    Ok(())
}
