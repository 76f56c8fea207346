//! The windowed loop: a winit `ApplicationHandler` whose state (`WindowState`) is made in
//! `resumed` — the window context ([`crate::gfx::window::WindowContext`]), the scene and egui-winit — and whose
//! redraws run [`Scene::frame`] and present. Mouse: left drag orbits, right drag pans, the wheel
//! zooms. Keys: Esc/q quit, space pause, `.` one step (paused), r restart from `--init`, s save a
//! screenshot (`nbody-interop-PID-K.png`), h hide or show the overlay, t trails, 1–4 the presets
//! plummer, galaxies, ball, figure-eight (each at its own N, or `--bodies`), `[` and `]` halve and
//! double the simulated time per wall second that `--steps-per-frame auto` keeps to.
//!
//! Long steps run in parts over frames ([`Scene::steps_in_parts`]): a step estimated over
//! `LONG_STEP_S` (0.5 s) runs in launches (CUDA; CPU: ranges of bodies) of about 0.2 s, and a
//! frame runs as many of them as keep its showing (UI, draw, paint, present) within a quarter of
//! the time ([`crate::demo::pace::PartBudget`]: one where drawing is cheap, many where a software
//! renderer draws a million bodies), at most about 2 s of them, so winit's event loop, and with
//! it a close request or a key, is answered within about that time. The window shows the
//! positions of before the step until its last launch (the overlay says "step in progress: k of
//! m launches"). Closing the window (or Esc, q, Ctrl-C)
//! during such a step abandons it: `--save-state` writes the state of before it, and the run
//! exits as any closed run does (0, or 130 with `--frames` not reached).
//!
//! A display that goes away under the run — the window destroyed by another client, the X
//! connection killed, the X server ended ([`crate::gfx::display_loss`]) — ends it as Ctrl-C
//! does, with every output it can write: the state (from the backend where the event loop came
//! back, else the newest one kept) and the screenshot from the last frame drawn (kept on the host
//! while `--screenshot` is asked for, [`Scene::hold_for_display_loss`]); then the process exits
//! with [`super::EXIT_DISPLAY_LOST`].

use anyhow::{anyhow, Context as _};
use winit::application::ApplicationHandler;
use winit::dpi::{PhysicalPosition, PhysicalSize};
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, NamedKey};
use winit::window::WindowId;

use super::scene::Scene;
use super::Summary;
use crate::cli::DemoArgs;
use crate::gfx::present::DemoWindow;
use crate::ui::action::Action;
use crate::ui::overlay::RESET_INITS;
use sim::{Bodies, PhysParams};

/// What a key press did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOutcome {
    /// End the run (Esc, q).
    Quit,
    /// A control acted.
    Handled,
    /// Not a control.
    Ignored,
}

/// The windowed state, made in `resumed`.
///
/// Teardown order = field order: `scene` (backend → GL objects → egui painter), then the
/// egui-winit state, then the window and the GL context of its frames ([`DemoWindow`]: native,
/// the GL surface, GL context, and last the window; copy, its FBO and buffers, the window, and
/// last the headless context).
struct WindowState {
    scene: Scene,
    egui_winit: egui_winit::State,
    win: DemoWindow,
    size: PhysicalSize<u32>,
    cursor: Option<PhysicalPosition<f64>>,
    drag: Option<MouseButton>,
    /// Frames presented that moved the bodies or ended with no long step in progress (what
    /// `--frames` counts: a step in parts over frames shows its old positions until its last
    /// launch, and a frame of its parts that completed none moved nothing).
    whole: u64,
    screenshot_taken: bool,
    /// `s` was pressed: the next frame is saved before it is presented.
    shot_next: bool,
    /// Screenshots taken with `s`.
    shots: u32,
    /// The window was destroyed under us: no more GL calls on its surface.
    window_gone: bool,
}

/// winit application: `state` is `None` until `resumed` makes the window.
struct App {
    args: DemoArgs,
    start: Option<(Bodies, PhysParams)>,
    state: Option<WindowState>,
    error: Option<anyhow::Error>,
    summary: Option<Summary>,
    /// Frames counted for `--frames` (whole ones, `WindowState::whole`), kept after the
    /// window state goes.
    presented: u64,
    /// The interrupt stopped the steps of the last frame counted (`Scene::last_frame_cut`).
    last_cut: bool,
    /// The copy route's summary line (mean readback and present times), printed after the run's.
    present_summary: Option<String>,
    /// What took the display away, when it went (the window destroyed by another client).
    display_lost: Option<String>,
}

/// winit's OS errors read `os error at <source file>:<line>: <message>`, the file being in
/// winit's sources: the user needs only the message.
fn without_source_location(msg: &str) -> &str {
    msg.strip_prefix("os error at ").and_then(|rest| rest.split_once(": ")).map_or(msg, |(_, m)| m)
}

/// Run the demo in a window until it is closed (or `--frames` were presented), then the
/// screenshot, the state and the summary.
///
/// # Errors
/// No display or GL context, or a failure while running or writing the outputs.
pub fn run(args: &DemoArgs, bodies: Bodies, params: PhysParams) -> anyhow::Result<()> {
    let event_loop = EventLoop::new().map_err(|e| {
        anyhow!(
            "opening the display (winit event loop): {}; use --headless without a display",
            without_source_location(&e.to_string()).trim_end_matches('.')
        )
    })?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App {
        args: args.clone(),
        start: Some((bodies, params)),
        state: None,
        error: None,
        summary: None,
        presented: 0,
        last_cut: false,
        present_summary: None,
        display_lost: None,
    };
    // winit panics on some losses of the window (its input context destroyed under it): the
    // panic is caught here, named in one line, and the run ends as a lost display.
    crate::gfx::display_loss::watch_window_system_panics();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| event_loop.run_app(&mut app)));
    match ran {
        Ok(r) => r.context("winit event loop")?,
        Err(panic) => match crate::gfx::display_loss::window_system_failure() {
            Some(why) => app.display_lost = Some(format!("the window system failed: {why}")),
            None => std::panic::resume_unwind(panic),
        },
    }
    if app.display_lost.is_some() {
        if let Some(st) = app.state.as_mut() {
            // No more GL calls on its surface: the screenshot comes from the last frame kept.
            st.window_gone = true;
        }
    }
    // Normally `exiting` tore down already; this covers an event loop that ended otherwise.
    app.teardown();
    if let Some(s) = &app.summary {
        s.print();
    }
    if let Some(line) = &app.present_summary {
        println!("{line}");
    }
    if let Some(why) = app.display_lost.take() {
        if let Some(e) = app.error.take() {
            eprintln!("error: {e:#}");
        }
        eprintln!(
            "error: the display went away ({why}): the run ended there; the outputs asked for were written, each \
             unless a line above says why not"
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        std::process::exit(super::EXIT_DISPLAY_LOST);
    }
    if let Some(e) = app.error.take() {
        return Err(e);
    }
    // Asked for N frames and ended before them (Ctrl-C, SIGTERM, the window closed), or Ctrl-C
    // stopped the last one's steps: interrupted.
    if let Some(n) = args.frames.filter(|&n| app.presented < n || app.last_cut) {
        return Err(super::frames_interrupted(app.presented, n, app.last_cut).into());
    }
    Ok(())
}

impl App {
    fn fail(&mut self, event_loop: &ActiveEventLoop, e: anyhow::Error) {
        // The first error is returned (and printed once by main); later ones are logged.
        if self.error.is_none() {
            self.error = Some(e);
        } else {
            tracing::error!("{e:#}");
        }
        event_loop.exit();
    }

    /// Final screenshot (if not taken), save state, summary, then drop in order. Every output
    /// is attempted even when the run failed or another output fails; the errors are kept in
    /// `self.error` (the first as is, the others logged).
    fn teardown(&mut self) {
        let Some(mut st) = self.state.take() else { return };
        crate::stop::hold_before_outputs();
        self.presented = st.whole;
        // Before the screenshot's extra frame (no steps) clears it.
        self.last_cut = st.scene.last_frame_cut();
        let mut errors = Vec::new();
        if let (Some(path), false) = (self.args.screenshot.clone(), st.screenshot_taken) {
            if st.window_gone {
                // The window cannot be read: the last frame drawn, as kept.
                if let Err(e) = st.scene.held_screenshot(&path) {
                    errors.push(e);
                }
            } else if st.size.width > 0 && st.size.height > 0 {
                // Render one more frame (no steps) and read it back before any swap.
                st.scene.pause();
                let input = st.egui_winit.take_egui_input(st.win.window());
                let ppp = st.win.window().scale_factor() as f32;
                let r = st
                    .win
                    .target(st.size)
                    .and_then(|target| st.scene.frame(input, target, ppp, false).and_then(|_| st.scene.screenshot(&target, &path)));
                if let Err(e) = r {
                    errors.push(e.context(format!("writing --screenshot {}", path.display())));
                }
            } else {
                errors.push(anyhow!("--screenshot {}: the window was gone before it could be read", path.display()));
            }
        }
        if let Err(e) = st.scene.finish() {
            errors.push(e);
        }
        super::scene::mark_outputs_written();
        self.summary = Some(st.scene.summary());
        self.present_summary = st.win.costs().filter(|c| c.frames > 0).map(|c| {
            let n = c.frames as f64;
            format!(
                "present: copy route, {} frames shown, mean readback {:.3} ms, mean present {:.3} ms per frame ({}×{} pixels)",
                c.frames,
                c.readback_total_ms / n,
                c.present_total_ms / n,
                st.size.width,
                st.size.height
            )
        });
        st.scene.destroy();
        drop(st);
        for e in errors {
            if self.error.is_none() {
                self.error = Some(e);
            } else {
                tracing::error!("{e:#}");
            }
        }
    }

    fn create(&mut self, event_loop: &ActiveEventLoop) -> anyhow::Result<WindowState> {
        let (bodies, params) = self.start.take().ok_or_else(|| anyhow!("window state made twice"))?;
        let (win, note) = super::present::open(event_loop, &self.args)?;
        if let Some(note) = note {
            tracing::info!("{note}");
        }
        tracing::info!(route = win.route(), gl = %win.info().summary(), "windowed GL");
        // WindowState drops the scene (and its share of the proof) before the window context.
        let mut scene = Scene::new(win.current().clone(), win.info().clone(), &self.args, &bodies, params)?;
        scene.set_present(Some(win.describe()));
        let window = win.window();
        // A broken X connection: Xlib's I/O error handler writes what the run holds and exits.
        crate::gfx::display_loss::on_connection_lost(super::scene::write_held_outputs);
        // With vsync a frame lasts one refresh interval: --steps-per-frame auto fills that.
        if !self.args.no_vsync {
            if let Some(mhz) = window.current_monitor().and_then(|m| m.refresh_rate_millihertz()) {
                scene.use_display_rate(f64::from(mhz) / 1e3);
            }
        }
        tracing::info!(interval_ms = scene.pace_interval_ms(), "frame interval for --steps-per-frame auto");
        let egui_winit = egui_winit::State::new(
            scene.egui_ctx().clone(),
            egui::ViewportId::ROOT,
            window,
            Some(window.scale_factor() as f32),
            window.theme(),
            Some(scene.max_texture_side()),
        );
        let size = window.inner_size();
        Ok(WindowState {
            scene,
            egui_winit,
            win,
            size,
            cursor: None,
            drag: None,
            whole: 0,
            screenshot_taken: false,
            shot_next: false,
            shots: 0,
            window_gone: false,
        })
    }

    fn redraw(&mut self, event_loop: &ActiveEventLoop) -> anyhow::Result<()> {
        let frames = self.args.frames;
        let screenshot = self.args.screenshot.clone();
        let Some(st) = self.state.as_mut() else { return Ok(()) };
        let size = st.win.window().inner_size();
        if size.width == 0 || size.height == 0 || st.win.window().is_minimized() == Some(true) {
            // Minimised: no frame and no GL calls until the window comes back.
            return Ok(());
        }
        if size != st.size {
            st.size = size;
            st.win.resize();
        }
        let target = st.win.target(size)?;
        let input = st.egui_winit.take_egui_input(st.win.window());
        let ppp = st.win.window().scale_factor() as f32;
        let steps_before = st.scene.steps_done();
        let platform_output = st.scene.frame(input, target, ppp, false)?;
        for line in st.scene.take_reports() {
            println!("{line}");
        }
        st.egui_winit.handle_platform_output(st.win.window(), platform_output);
        if let Err(e) = st.scene.hold_for_display_loss(&target) {
            tracing::warn!("keeping the outputs for a lost display: {e:#}");
        }
        if std::mem::take(&mut st.shot_next) {
            st.shots += 1;
            let path = std::path::PathBuf::from(format!("nbody-interop-{}-{}.png", std::process::id(), st.shots));
            match st.scene.screenshot(&target, &path) {
                Ok(()) => eprintln!("screenshot saved: {}", path.display()),
                Err(e) => tracing::warn!("screenshot: {e:#}"),
            }
        }
        // A frame that completed no step and leaves a long step in progress (in parts over frames)
        // does not count for `--frames`: the run ends after N frames that moved the bodies, as
        // headless runs do (a frame of parts may complete one step and go on into the next).
        let moved = st.scene.steps_done() > steps_before;
        let whole = st.whole + u64::from(moved || st.scene.step_in_progress().is_none());
        let last = frames.is_some_and(|n| whole >= n);
        if last {
            if let Some(path) = &screenshot {
                st.scene.screenshot(&target, path)?;
                st.screenshot_taken = true;
            }
        }
        st.win.present()?;
        if st.win.costs().is_some() {
            st.scene.set_present(Some(st.win.describe()));
        }
        st.whole = whole;
        crate::stop::ready();
        if last {
            event_loop.exit();
        } else {
            st.win.window().request_redraw();
        }
        Ok(())
    }

    /// The keyboard controls (README, "Controls"; the overlay's help line lists them).
    fn key(st: &mut WindowState, key: &Key) -> KeyOutcome {
        let Key::Character(c) = key else {
            return match key {
                Key::Named(NamedKey::Escape) => KeyOutcome::Quit,
                Key::Named(NamedKey::Space) => {
                    st.scene.toggle_pause();
                    KeyOutcome::Handled
                }
                _ => KeyOutcome::Ignored,
            };
        };
        match c.as_str() {
            "q" | "Q" => return KeyOutcome::Quit,
            "." => st.scene.push_action(Action::SingleStep),
            "r" | "R" => st.scene.push_action(Action::Restart),
            "s" | "S" => st.shot_next = true,
            "h" | "H" => st.scene.toggle_overlay(),
            "t" | "T" => st.scene.toggle_trails(),
            "v" | "V" => st.scene.toggle_view(),
            "1" | "2" | "3" | "4" => {
                // The scene at its own N (or --bodies), not the N in force.
                let i = c.as_str().parse::<usize>().unwrap_or(1) - 1;
                st.scene.load_scene(RESET_INITS[i.min(RESET_INITS.len() - 1)]);
            }
            "[" => st.scene.scale_rate(0.5),
            "]" => st.scene.scale_rate(2.0),
            _ => return KeyOutcome::Ignored,
        }
        KeyOutcome::Handled
    }

    fn camera_input(st: &mut WindowState, event: &WindowEvent) {
        let over_egui = st.scene.egui_ctx().is_pointer_over_egui() || st.scene.egui_ctx().egui_wants_pointer_input();
        let scale = st.win.window().scale_factor() as f32;
        match event {
            WindowEvent::MouseInput { state: ElementState::Pressed, button, .. } if !over_egui => {
                if matches!(button, MouseButton::Left | MouseButton::Right) {
                    st.drag = Some(*button);
                }
            }
            WindowEvent::MouseInput { state: ElementState::Released, button, .. } if st.drag == Some(*button) => st.drag = None,
            WindowEvent::CursorMoved { position, .. } => {
                if let (Some(prev), Some(button)) = (st.cursor, st.drag) {
                    let (dx, dy) = ((position.x - prev.x) as f32, (position.y - prev.y) as f32);
                    let h = st.size.height as f32;
                    match button {
                        MouseButton::Left => st.scene.camera_mut().orbit(dx / scale, dy / scale),
                        _ => st.scene.camera_mut().pan(dx, dy, h),
                    }
                }
                st.cursor = Some(*position);
            }
            WindowEvent::CursorLeft { .. } => st.cursor = None,
            WindowEvent::MouseWheel { delta, .. } if !over_egui => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / (40.0 * scale),
                };
                st.scene.camera_mut().zoom(steps);
            }
            _ => {}
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.state.is_some() || self.start.is_none() {
            return;
        }
        match self.create(event_loop) {
            Ok(st) => {
                st.win.window().request_redraw();
                self.state = Some(st);
            }
            Err(e) => self.fail(event_loop, e),
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, id: WindowId, event: WindowEvent) {
        // Events of another window are not ours: `--present auto` may have opened and dropped a
        // native window before the one it kept, and winit reports that one's `Destroyed` too.
        if self.state.as_ref().is_some_and(|st| st.win.window().id() != id) {
            return;
        }
        match event {
            WindowEvent::CloseRequested => {
                event_loop.exit();
                return;
            }
            WindowEvent::Destroyed => {
                if let Some(st) = self.state.as_mut() {
                    st.window_gone = true;
                    // Not by this run (it drops its window only after the loop): another client's.
                    self.display_lost = Some("the window was destroyed by another X client".to_string());
                }
                event_loop.exit();
                return;
            }
            WindowEvent::RedrawRequested => {
                if let Err(e) = self.redraw(event_loop) {
                    self.fail(event_loop, e);
                }
                return;
            }
            _ => {}
        }
        let Some(st) = self.state.as_mut() else { return };
        let response = st.egui_winit.on_window_event(st.win.window(), &event);
        if !response.consumed {
            Self::camera_input(st, &event);
            // Synthetic presses (winit reports keys held when the window gains the focus) and
            // auto-repeats are not new presses: a toggle (space, h, t) must not flip twice. Only
            // the single step (`.`) repeats while held.
            if let WindowEvent::KeyboardInput { event: key, is_synthetic: false, .. } = &event {
                let typing = st.scene.egui_ctx().egui_wants_keyboard_input();
                let repeat_ok = key.logical_key == Key::Character(".".into());
                if key.state == ElementState::Pressed && (!key.repeat || repeat_ok) && !typing && Self::key(st, &key.logical_key) == KeyOutcome::Quit
                {
                    event_loop.exit();
                    return;
                }
            }
        } else if let WindowEvent::CursorMoved { position, .. } = event {
            st.cursor = Some(position);
        }
        match event {
            WindowEvent::Resized(size) if size.width > 0 && size.height > 0 => {
                st.size = size;
                st.win.resize();
                st.win.window().request_redraw();
            }
            WindowEvent::Occluded(false) | WindowEvent::ScaleFactorChanged { .. } => st.win.window().request_redraw(),
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        if crate::stop::stopped() {
            // Ctrl-C or SIGTERM: end at this frame boundary; `exiting` writes the outputs.
            event_loop.exit();
            return;
        }
        if let Some(st) = &self.state {
            if st.win.window().is_minimized() == Some(true) {
                // Nothing to draw: sleep until an event (or 100 ms, to see an interrupt).
                let wake = std::time::Instant::now() + std::time::Duration::from_millis(100);
                event_loop.set_control_flow(ControlFlow::WaitUntil(wake));
            } else {
                event_loop.set_control_flow(ControlFlow::Poll);
                st.win.window().request_redraw();
            }
        }
    }

    fn exiting(&mut self, _event_loop: &ActiveEventLoop) {
        self.teardown();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn winit_os_errors_lose_the_source_location() {
        let m = "os error at /root/.cargo/registry/src/winit-0.30.13/src/platform_impl/linux/mod.rs:765: neither \
                 WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set.";
        assert_eq!(super::without_source_location(m), "neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set.");
        assert_eq!(super::without_source_location("the event loop can't be recreated"), "the event loop can't be recreated");
    }
}
