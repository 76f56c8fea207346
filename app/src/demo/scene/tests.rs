//! Tests of the scene's frame on a headless context (Mesa's software EGL device here).

use clap::Parser as _;

use super::test_backend::TestBackend;
use super::*;
use crate::backend::Readout;
use crate::cli::Cli;
use crate::demo::headless::headless_input;
use crate::gfx::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};
use sim::init::initial_bodies;

pub(super) fn args(extra: &[&str]) -> DemoArgs {
    let mut v = vec!["nbody-interop", "--headless", "--backend", "cpu", "--bodies", "200"];
    v.extend_from_slice(extra);
    if !extra.contains(&"--width") {
        v.extend_from_slice(&["--width", "96", "--height", "64"]);
    }
    Cli::try_parse_from(v).expect("arguments parse").demo
}

/// Headless scene on Mesa's software EGL device (or whatever device this machine has).
pub(super) fn scene(a: &DemoArgs) -> (Scene, RenderTarget, HeadlessContext) {
    let ctx = HeadlessContext::new(HEADLESS_CUDA_DEVICE).expect("headless GL");
    let params = PhysParams { g: 1.0, dt: 1e-3, softening: 0.01 };
    let bodies = initial_bodies(a.init(), a.n_bodies(), a.sim.seed, params.g).expect("bodies");
    let mut s = Scene::new(ctx.current().clone(), ctx.info.clone(), a, &bodies, params).expect("scene");
    let fbo = OffscreenTarget::new(ctx.gl(), a.width, a.height).expect("fbo");
    s.set_offscreen(fbo);
    (s, RenderTarget::Offscreen(fbo), ctx)
}

fn frame(s: &mut Scene, t: RenderTarget) {
    let [w, h] = t.size();
    s.frame(headless_input(w, h, s.time(), s.ui_zoom_for(h, 1.0)), t, 1.0, true).expect("frame");
}

#[test]
fn reset_recreates_vbos_and_backend_with_the_new_n() {
    let a = args(&[]);
    let (mut s, t, ctx) = scene(&a);
    frame(&mut s, t);
    s.sim.pending.push(Action::Reset { init: "ball".into(), n: 300 });
    frame(&mut s, t);
    assert_eq!(s.view.renderer.vbos().n, 300);
    assert_eq!(s.sim.backend.as_ref().map(|b| b.describe().n), Some(300));
    assert_eq!(s.hud.overlay.controls.reset_init, "ball", "the scene box shows the scene in force");
    assert_eq!(s.hud.overlay.controls.reset_n, 300, "and its N");
    // A bad reset is shown in the overlay and keeps the old state.
    s.sim.pending.push(Action::Reset { init: "nosuch".into(), n: 10 });
    frame(&mut s, t);
    assert_eq!(s.view.renderer.vbos().n, 300);
    drop(s);
    drop(ctx);
}

/// Keys 1–4 after the figure-eight (N = 3): each scene at its own N — the backend's default
/// without `--bodies`, `--bodies` where given — and the scene box and rate follow the scene.
#[test]
fn scene_keys_load_each_scene_at_its_own_n() {
    use crate::demo::pace::{FIGURE_EIGHT_RATE, GALAXIES_RATE};
    let v = ["nbody-interop", "--headless", "--backend", "cpu", "--init", "figure-eight", "--width", "96", "--height", "64"];
    let mut a = Cli::try_parse_from(v).expect("arguments parse").demo;
    // What the demo's entry sets for the CPU backend (smaller here, for a quick test).
    a.default_bodies = Some(300);
    let (mut s, t, ctx) = scene(&a);
    frame(&mut s, t);
    assert_eq!(s.bodies(), 3);
    assert_eq!(s.hud.overlay.controls.reset_init, "figure-eight", "the box shows the scene at the start");
    assert_eq!(s.sim_rate(), FIGURE_EIGHT_RATE);
    s.load_scene("galaxies");
    frame(&mut s, t);
    assert_eq!(s.bodies(), 300, "the default N, not the figure-eight's 3");
    assert_eq!((s.scene_init(), s.hud.overlay.controls.reset_init.as_str()), ("galaxies", "galaxies"));
    assert_eq!(s.sim_rate(), GALAXIES_RATE, "another scene, its own rate");
    s.scale_rate(2.0);
    s.push_action(Action::Reset { init: "galaxies".into(), n: 300 });
    frame(&mut s, t);
    assert_eq!(s.sim_rate(), 2.0 * GALAXIES_RATE, "the same scene again keeps the rate the keys set");
    s.push_action(Action::Restart);
    frame(&mut s, t);
    assert_eq!((s.bodies(), s.scene_init()), (3, "figure-eight"), "r: the run's own scene");
    drop(s);
    // With --bodies, the keys load that N.
    let (mut s, t, ctx2) = scene(&args(&["--init", "figure-eight"]));
    s.load_scene("ball");
    frame(&mut s, t);
    assert_eq!(s.bodies(), 200);
    drop(s);
    drop(ctx2);
    drop(ctx);
}

/// `--steps-per-frame auto` on a three-body scene: once the frame budget allows more, the
/// scene's rate sets the count (not the budget's thousands of steps). The frames' times are given
/// (0.5 ms of work plus 1 µs a step, 16.7 ms start to start), not measured, so the count does not
/// depend on how busy the machine is; `demo::pace`'s tests cover the controller itself.
#[test]
fn auto_steps_keep_to_the_scene_rate() {
    // A long frame interval (1 frame/s): the budget alone would allow far more steps.
    let a = args(&["--init", "figure-eight", "--steps-per-frame", "auto", "--target-fps", "1", "--no-overlay"]);
    let (mut s, t, ctx) = scene(&a);
    frame(&mut s, t);
    let none = crate::backend::SimTimings::default();
    for _ in 0..32 {
        let steps = s.hud.overlay.controls.steps_per_frame;
        s.pace_frame_times(0.5 + 0.001 * f64::from(steps), 1000.0 / 60.0, steps, &none);
    }
    let c = &s.hud.overlay.controls;
    assert!(c.rate_limited, "the rate limits a three-body scene ({} steps)", c.steps_per_frame);
    // The figure-eight's rate (2 time units per wall second) at dt = 0.001 over 16.7 ms frames.
    assert!((33..=34).contains(&c.steps_per_frame), "{} steps a frame", c.steps_per_frame);
    frame(&mut s, t);
    drop(s);
    drop(ctx);
}

#[test]
fn overlay_with_cuda_panels_and_settings_change() {
    use crate::backend::InteropSettings;
    use crate::cuda::settings::{InteropMode, ResourceFlags, StreamKind};
    let a = args(&["--width", "900", "--height", "700"]);
    let (mut s, t, ctx) = scene(&a);
    let settings = InteropSettings {
        interop: InteropMode::Map,
        register_flags: ResourceFlags::None,
        map_flags: ResourceFlags::WriteDiscard,
        stream: StreamKind::NonBlocking,
        stream_priority: -1,
        block_size: 256,
    };
    s.sim.backend = Some(Box::new(TestBackend::with_settings(Some(settings))));
    s.hud.notice = Some("CUDA unavailable, running the CPU backend: example notice".into());
    for _ in 0..3 {
        frame(&mut s, t);
    }
    if let Some(path) = std::env::var_os("NBODY_OVERLAY_PNG") {
        s.screenshot(&t, std::path::Path::new(&path)).expect("screenshot");
    }
    let changed = InteropSettings { interop: InteropMode::Copy, ..settings };
    s.sim.pending.push(Action::ApplySettings(changed));
    frame(&mut s, t);
    assert_eq!(s.sim.backend.as_mut().and_then(|b| b.sides().cuda()?.settings()), Some(changed));
    drop(s);
    drop(ctx);
}

#[test]
fn pause_single_step_and_params() {
    let a = args(&["--steps-per-frame", "2"]);
    let (mut s, t, ctx) = scene(&a);
    s.hud.overlay.controls.paused = true;
    let cur = s.current.clone();
    let gl = cur.gl();
    let vbos = *s.view.renderer.vbos();
    let before = s.sim.backend.as_mut().expect("backend").state(gl, &vbos, Readout::Bodies).expect("bodies").bodies;
    frame(&mut s, t);
    let paused = s.sim.backend.as_mut().expect("backend").state(gl, &vbos, Readout::Bodies).expect("bodies").bodies;
    assert_eq!(before.pos, paused.pos, "paused frames do not step");
    s.sim.pending.push(Action::SingleStep);
    // What the overlay does when dt is edited: new controls, and an action for the backend.
    let p = PhysParams { g: 1.0, dt: 2e-3, softening: 0.02 };
    s.hud.overlay.controls.params = p;
    s.sim.pending.push(Action::SetParams(p));
    frame(&mut s, t);
    let stepped = s.sim.backend.as_mut().expect("backend").state(gl, &vbos, Readout::Bodies).expect("bodies").bodies;
    assert_ne!(before.pos, stepped.pos, "single step advances");
    assert_eq!(s.sim.time_span, 2.0 * 2e-3, "time span = dt · steps of the last stepping frame");
    drop(s);
    drop(ctx);
}

#[test]
fn the_overlay_switches_the_solver_live() {
    let a = args(&[]);
    let (mut s, t, ctx) = scene(&a);
    frame(&mut s, t);
    assert_eq!(s.sim.backend.as_ref().expect("backend").describe().solver, sim::tree::Solver::Direct);
    // What the solver row does when "tree" is picked and θ set.
    let tree = sim::tree::Solver::Tree { theta: 0.7 };
    s.hud.overlay.controls.solver = tree;
    s.sim.pending.push(Action::SetSolver(tree));
    frame(&mut s, t);
    let b = s.sim.backend.as_ref().expect("backend").describe();
    assert_eq!(b.solver, tree);
    assert!(b.label.contains("tree θ=0.7"), "{}", b.label);
    s.sim.pending.push(Action::SetSolver(sim::tree::Solver::Direct));
    frame(&mut s, t);
    assert_eq!(s.sim.backend.as_ref().expect("backend").describe().solver, sim::tree::Solver::Direct);
    drop(s);
    drop(ctx);
}

#[test]
fn workflow_panel_traces_and_explains_what_needs_cuda() {
    let a = args(&[]);
    let (mut s, t, ctx) = scene(&a);
    frame(&mut s, t);
    assert!(s.telemetry.recorder.is_none(), "no tracing while the Workflow panel is closed");
    // What opening the panel does (the UI pass sets `open` from the collapsing header).
    s.hud.overlay.workflow.open = true;
    frame(&mut s, t);
    let (_, calls) = s.telemetry.recorder.as_ref().expect("tracing while the panel is open").last_frame();
    assert!(calls.iter().any(|c| c.name == "glDrawArrays" && c.step == crate::trace::Step::Draw), "{calls:?}");
    // The CPU backend: the lab says what a case needs, step mode says why it cannot run.
    s.sim.pending.push(Action::RunLab("ptx-version-too-new".into()));
    s.sim.pending.push(Action::SetStepMode(true));
    frame(&mut s, t);
    let o = s.hud.overlay.workflow.lab.last().expect("a lab outcome");
    assert!(o.is_unavailable() && o.got_text.contains("CUDA backend"), "{o:?}");
    assert!(!s.hud.overlay.workflow.step_mode);
    // The panel closed again (the test's UI pass leaves it collapsed): tracing stops.
    frame(&mut s, t);
    assert!(s.telemetry.recorder.is_none());
    drop(s);
    drop(ctx);
}

/// Headless, egui's screen is the target in points of the overlay's zoom: at --ui-scale 1.5 a
/// 300 × 200 pixel target is 200 × 133 points, so a window anchored to its corner (the Timeline)
/// stays inside the picture (it was 300 × 200 points, half of it off the target).
#[test]
fn headless_overlay_fills_the_target_at_any_zoom() {
    let a = args(&["--ui-scale", "1.5", "--width", "300", "--height", "200"]);
    let (mut s, t, ctx) = scene(&a);
    // From the first frame on (a headless run of one frame has no other).
    for _ in 0..2 {
        frame(&mut s, t);
        let r = s.hud.egui_ctx.content_rect();
        assert!((r.width() * 1.5 - 300.0).abs() < 0.5 && (r.height() * 1.5 - 200.0).abs() < 0.5, "{r:?}");
    }
    drop(s);
    drop(ctx);
}

#[test]
fn overlay_zoom_follows_the_window_height() {
    assert_eq!(auto_ui_zoom(800, 1.0), 1.0);
    assert_eq!(auto_ui_zoom(1080, 1.0), 1.0);
    assert_eq!(auto_ui_zoom(1440, 1.0), 1.25);
    assert_eq!(auto_ui_zoom(2160, 1.0), 2.0);
    assert_eq!(auto_ui_zoom(4320, 1.0), 2.0);
    // A HiDPI window (scale 2) of 2160 physical pixels is 1080 logical: egui's scale does it.
    assert_eq!(auto_ui_zoom(2160, 2.0), 1.0);
}

#[test]
fn the_timeline_shows_the_last_frame_and_grows_in_step_mode() {
    use crate::trace::{Span, Track};
    let a = args(&[]);
    let (mut s, t, ctx) = scene(&a);
    s.hud.overlay.workflow.open = true;
    frame(&mut s, t);
    s.hud.overlay.workflow.open = true;
    frame(&mut s, t);
    let has = |track: Track, name: &str| s.telemetry.timeline_spans.iter().any(|x| x.track == track && x.name == name);
    assert!(has(Track::Host, "glDrawArrays"), "the draw call on the host row: {:?}", s.telemetry.timeline_spans);
    assert!(has(Track::Gl, "draw"), "the draw on the GL row (GL_TIMESTAMP): {:?}", s.telemetry.timeline_spans);
    // Step mode: the spans add up one step at a time (frames without a step add nothing) and
    // start again at the next map of the buffers — not at the density view's map of its images.
    use crate::backend::step::WorkflowStep;
    let span = |name: &str| Span { track: Track::Host, name: name.into(), start_us: 0.0, dur_us: 1.0, detail: String::new() };
    s.hud.overlay.workflow.step_mode = true;
    s.telemetry.timeline_spans.clear();
    for (name, stepped, len) in [
        ("cuGraphicsMapResources", Some(WorkflowStep::Map), 1),
        ("glDrawArrays", None, 1),
        ("cuGraphicsResourceGetMappedPointer", Some(WorkflowStep::GetPointers), 2),
        ("cuLaunchKernel", Some(WorkflowStep::Launch), 3),
        ("cuGraphicsUnmapResources", Some(WorkflowStep::Unmap), 4),
        ("cuGraphicsMapResources", Some(WorkflowStep::MapImages), 5),
        ("cuSurfObjectCreate", Some(WorkflowStep::MakeObjects), 6),
        ("cuGraphicsMapResources", Some(WorkflowStep::Map), 1),
    ] {
        s.sim.stepped = stepped;
        s.collect_timeline(vec![span(name)]);
        assert_eq!(s.telemetry.timeline_spans.len(), len, "after {name} (stepped: {stepped:?})");
    }
    s.hud.overlay.workflow.step_mode = false;
    drop(s);
    drop(ctx);
}

/// A run stopped before its first frame has nothing drawn: no screenshot is made (no file, an
/// error that says why), rather than a black image reported as written. After a frame it is.
#[test]
fn no_screenshot_before_the_first_frame() {
    let a = args(&[]);
    let (mut s, t, ctx) = scene(&a);
    let dir = std::env::temp_dir().join(format!("nbody-first-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("shot.png");
    let _ = std::fs::remove_file(&path);
    let e = s.screenshot(&t, &path).expect_err("nothing drawn yet");
    assert!(format!("{e:#}").contains("no frame was drawn"), "{e:#}");
    assert!(!path.exists(), "no file left");
    frame(&mut s, t);
    s.screenshot(&t, &path).expect("after a frame");
    assert!(path.is_file());
    let _ = std::fs::remove_dir_all(&dir);
    drop(s);
    drop(ctx);
}

/// The run's end reads the state back (for a backend that cannot say its velocities are
/// synchronised, one force evaluation) only for `--save-state`: the test backend's read fails,
/// so a read shows as an error.
#[test]
fn the_end_reads_no_state_when_none_was_asked_for() {
    let dir = std::env::temp_dir().join(format!("nbody-end-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let state = dir.join("end.csv");
    for save in [false, true] {
        let a = if save { args(&["--save-state", state.to_str().expect("utf-8")]) } else { args(&[]) };
        let (mut s, t, ctx) = scene(&a);
        s.sim.backend = Some(Box::new(TestBackend::with_settings(None)));
        frame(&mut s, t);
        let end = s.finish();
        if save {
            let e = end.expect_err("--save-state reads the state, which the test backend refuses");
            assert!(format!("{e:#}").contains("reading the final state"), "{e:#}");
        } else {
            end.expect("no state asked for: none read");
        }
        drop(s);
        drop(ctx);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
