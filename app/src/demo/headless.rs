//! The headless loop: an EGL context on the CUDA device's EGL device, an offscreen FBO, and the
//! frames of [`Scene::frame`] each followed by `glFinish`.

use anyhow::{anyhow, Context as _};

use super::scene::Scene;
use crate::cli::DemoArgs;
use crate::gfx::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};
use crate::gfx::target::{OffscreenTarget, RenderTarget};
use sim::{Bodies, PhysParams};

/// How often a headless run prints a progress line.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Egui input of a headless frame on a `width` × `height` pixel target at the overlay's `zoom`
/// ([`super::scene::Scene::ui_zoom_for`]): the screen is `width / zoom` × `height / zoom` points,
/// at a native 1 pixel per point.
pub(crate) fn headless_input(width: u32, height: u32, time: f64, zoom: f32) -> egui::RawInput {
    // egui lays out in points: at zoom z a target of W pixels is W / z points wide.
    let z = zoom.max(0.1);
    let mut raw = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width as f32 / z, height as f32 / z))),
        time: Some(time),
        ..Default::default()
    };
    raw.viewports.entry(egui::ViewportId::ROOT).or_default().native_pixels_per_point = Some(1.0);
    raw
}

/// The line a headless run without `--frames` starts with: it runs until Ctrl-C, and then writes
/// the outputs asked for, named (none asked for: says so, and which options write them).
pub(crate) fn until_interrupted_note(args: &DemoArgs) -> String {
    let asked: Vec<String> = [
        ("--screenshot", &args.screenshot),
        ("--save-state", &args.save_state),
        ("--summary", &args.summary),
        ("--trace", &args.trace),
        ("--timeline", &args.timeline),
    ]
    .into_iter()
    .filter_map(|(flag, path)| path.as_ref().map(|p| format!("{flag} {}", p.display())))
    .collect();
    if asked.is_empty() {
        "headless without --frames: running until Ctrl-C; no output file was asked for (--screenshot, --save-state, \
         --summary write them then)"
            .to_string()
    } else {
        format!("headless without --frames: running until Ctrl-C, which then writes {}", asked.join(", "))
    }
}

/// Run the demo headless: EGL context, offscreen FBO, `--frames` frames (or until Ctrl-C), then
/// the screenshot, the state and the summary. An interrupt (SIGINT/SIGTERM) ends the run at the
/// next frame boundary; a diverging run ends at the diagnostics sample that finds it. Every
/// output is written in every case, each even when another fails.
///
/// # Errors
/// No headless GL context; a failure while running (the outputs are still written); outputs
/// that could not be written (each named); [`super::scene::Diverged`]; with `--frames`, an
/// interrupt before the last frame or during its steps ([`crate::stop::Interrupted`], exit
/// code 128 + the signal: 130, 143).
pub fn run(args: &DemoArgs, bodies: Bodies, params: PhysParams) -> anyhow::Result<()> {
    // Declared first, dropped last: the context outlives the scene.
    let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).context("headless GL context")?;
    tracing::info!(gl = %ctx.info.summary(), device = ?ctx.info.egl_device, "headless GL");
    // `ctx` (declared first) outlives `scene`, which holds a share of its proof of currency.
    let mut scene = Scene::new(ctx.current().clone(), ctx.info.clone(), args, &bodies, params)?;
    drop(bodies);
    let fbo = OffscreenTarget::new(ctx.gl(), args.width, args.height).context("offscreen framebuffer")?;
    scene.set_offscreen(fbo);
    let target = RenderTarget::Offscreen(fbo);

    if args.frames.is_none() {
        eprintln!("{}", until_interrupted_note(args));
    }
    let mut failure = None;
    let mut last_progress = std::time::Instant::now();
    while args.frames.is_none_or(|n| scene.frames() < n) && !crate::stop::stopped() && scene.diverged().is_none() {
        if last_progress.elapsed() >= PROGRESS_EVERY {
            // A long run says how far it is (stderr, so stdout keeps only the results).
            last_progress = std::time::Instant::now();
            let s = scene.summary();
            let of = args.frames.map_or_else(String::new, |n| format!(" of {n}"));
            eprintln!(
                "frame {}{of}: {} steps, {} steps/s, {:.3} ms per frame",
                s.frames,
                s.steps,
                super::steps_per_s_text(s.steps_per_s),
                s.mean_frame_ms
            );
        }
        let input = headless_input(args.width, args.height, scene.time(), scene.ui_zoom_for(args.height, 1.0));
        let r = scene.frame(input, target, 1.0, true);
        ctx.gl().finish();
        for line in scene.take_reports() {
            println!("{line}");
        }
        if let Err(e) = r {
            failure = Some(e);
            break;
        }
        crate::stop::ready();
    }
    // Short of `--frames`, or the last frame's steps stopped: the run did not finish.
    let cut = scene.last_frame_cut();
    let interrupted = args.frames.is_some_and(|n| scene.frames() < n || cut) && crate::stop::stopped();
    crate::stop::hold_before_outputs();
    let mut errors: Vec<anyhow::Error> = Vec::new();
    if let Some(path) = &args.screenshot {
        if let Err(e) = scene.screenshot(&target, path) {
            errors.push(e);
        }
    }
    let finished = scene.finish();
    let summary = scene.summary();
    drop(scene);
    drop(ctx);
    summary.print();
    if let Err(e) = finished {
        errors.push(e);
    }
    if let Some(f) = failure {
        for e in errors {
            tracing::error!("{e:#}");
        }
        return Err(f);
    }
    match errors.len() {
        0 if interrupted => Err(super::frames_interrupted(summary.frames, args.frames.unwrap_or(0), cut).into()),
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(anyhow!("{}", errors.iter().map(|e| format!("{e:#}")).collect::<Vec<_>>().join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    fn note(extra: &[&str]) -> String {
        let mut v = vec!["nbody-interop", "--headless", "--backend", "cpu"];
        v.extend_from_slice(extra);
        super::until_interrupted_note(&crate::cli::Cli::try_parse_from(v).expect("arguments parse").demo)
    }

    /// A bare `--headless` promises no file; with outputs asked for, the line names those only.
    #[test]
    fn the_start_line_names_only_the_outputs_asked_for() {
        let bare = note(&[]);
        assert!(bare.contains("no output file was asked for"), "{bare}");
        assert!(!bare.contains("saved"), "{bare}");
        let state = note(&["--save-state", "end.csv"]);
        assert!(state.contains("--save-state end.csv") && !state.contains("--screenshot"), "{state}");
        let both = note(&["--save-state", "end.csv", "--screenshot", "a.png"]);
        assert!(both.contains("--screenshot a.png, --save-state end.csv"), "{both}");
    }
}
