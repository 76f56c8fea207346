//! The egui overlay: timings with rolling plots, throughput, live interop settings, simulation
//! controls, the device panel, the entry-point report and energy/momentum diagnostics.
//!
//! The overlay only builds UI ([`Overlay::ui`], called inside the egui pass, no GL). What the user
//! asked for comes back as [`Action`]s, which the frame loop applies at the start of the next
//! frame, before `simulate`; painting is the frame loop's job too.

use std::collections::VecDeque;

use egui::{Color32, RichText};

use super::action::{Action, FrameStats};
use super::bundled_glyphs;
use super::rows::Measure;
use super::widgets::{keep, settings_ui, solver_ui};
use crate::backend::{InteropSettings, SimTimings};
use crate::cuda::settings::View;
use crate::gfx::GlInfo;
use sim::tree::Solver;
use sim::{interactions, Diagnostics, PhysParams, FLOPS_PER_INTERACTION};

/// Frames kept in the rolling plots.
pub const HISTORY: usize = 300;

/// Initial conditions offered by the reset combo (names as `--init` takes them).
pub const RESET_INITS: [&str; 4] = ["plummer", "galaxies", "ball", "figure-eight"];

/// What the overlay shows about the backend and the context (gathered outside the UI pass).
#[derive(Debug, Clone, Copy)]
pub struct BackendView<'a> {
    /// Backend label.
    pub label: &'a str,
    /// Fallback or error notice, shown prominently.
    pub notice: Option<&'a str>,
    /// Interop settings in force (None for the CPU backend).
    pub settings: Option<InteropSettings>,
    /// Device panel rows.
    pub device_panel: Option<&'a crate::backend::DevicePanel>,
    /// Entry-point report rows: function, version, flags, status, remedy.
    pub entry_points: &'a [interop::driver::EntryReport],
    /// The GL context.
    pub gl_info: &'a GlInfo,
    /// How the window shows frames, with the copy route's costs (windowed runs).
    pub present: Option<&'a str>,
    /// The Workflow panel's data (last frame's calls, step mode).
    pub workflow: super::workflow::WorkflowView<'a>,
}

/// Loop state the overlay edits directly.
#[derive(Debug, Clone, PartialEq)]
pub struct Controls {
    /// Physical parameters in force.
    pub params: PhysParams,
    /// Leapfrog steps per frame in force (with `auto_steps`, the count the pace controller chose).
    pub steps_per_frame: u32,
    /// `--steps-per-frame auto`: the frame loop sets `steps_per_frame` to fill the frame interval,
    /// up to what `sim_rate` asks for.
    pub auto_steps: bool,
    /// Simulated time per wall-clock second that auto keeps to (time units per s): the scene's
    /// own rate, halved and doubled by the keys `[` and `]`.
    pub sim_rate: f64,
    /// The last auto count was set by `sim_rate` (else by the frame budget).
    pub rate_limited: bool,
    /// Draw trails behind the bodies (`--trails`).
    pub trails: bool,
    /// What the frame shows (`--view`, key `v`).
    pub view: View,
    /// Paused: no steps unless single-stepped.
    pub paused: bool,
    /// Initial condition the next reset uses.
    pub reset_init: String,
    /// N the next reset uses.
    pub reset_n: usize,
    /// The force solver asked for (`--solver`, `--theta`; the overlay's solver row).
    pub solver: Solver,
    /// The θ the solver row shows and gives a tree (kept while the direct sum is picked).
    pub theta: f32,
}

#[derive(Debug, Default)]
struct Series {
    name: &'static str,
    points: VecDeque<[f64; 2]>,
}

impl Series {
    fn push(&mut self, frame: u64, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.points.push_back([frame as f64, v]);
        }
        while self.points.front().is_some_and(|p| p[0] + (HISTORY as f64) <= frame as f64) {
            self.points.pop_front();
        }
    }
    fn last(&self) -> Option<f64> {
        self.points.back().map(|p| p[1])
    }
}

/// The overlay's state: rolling histories, controls and the last diagnostics.
#[derive(Debug)]
pub struct Overlay {
    /// Loop state the UI edits (read by the frame loop).
    pub controls: Controls,
    /// The frame's host time, then one series per [`Measure`] but the gather, in [`MEASURES`] order.
    series: [Series; 6],
    /// Simulated time per wall second of the last frames.
    sim_time: SimTimeRate,
    last: FrameStats,
    diagnostics: Option<(u64, Diagnostics)>,
    first_diagnostics: Option<Diagnostics>,
    message: Option<String>,
    panel_width: f32,
    /// The panel's width across window resizes.
    width: PanelWidth,
    /// The Workflow panel (step mode, mistake lab); the frame loop reads and fills it.
    pub workflow: super::workflow::WorkflowPanel,
}

/// The banner of a frame that ended with a long step in progress (in parts over frames), e.g.
/// "step in progress: 3 of 23 launches"; `None` otherwise. `cuda`: the parts are kernel
/// launches (else the CPU backend's ranges of bodies).
pub fn step_in_progress_text(t: &SimTimings, cuda: bool) -> Option<String> {
    let p = t.parts.filter(|p| p.in_progress())?;
    let unit = if cuda { "launches" } else { "parts" };
    Some(format!(
        "step in progress: {} of {} {unit}\nthe view shows the positions before the step until its last {}",
        p.done,
        p.of,
        if cuda { "launch" } else { "part" }
    ))
}

/// The measures with a plot, in the order of [`Overlay`]'s series after the host frame time.
const MEASURES: [Measure; 5] = [Measure::Map, Measure::Kernel, Measure::Unmap, Measure::Upload, Measure::Draw];

mod rate;
mod timings;
mod width;

pub use rate::{SimTimeRate, SIM_TIME_FRAMES};
pub use width::PanelWidth;

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{v:.3} ms"))
}

impl Overlay {
    /// An overlay starting from these controls.
    pub fn new(controls: Controls) -> Self {
        let names = ["frame (host)", "map", "kernel", "unmap", "upload", "draw"];
        Self {
            controls,
            series: names.map(|name| Series { name, points: VecDeque::new() }),
            sim_time: SimTimeRate::default(),
            last: FrameStats::default(),
            diagnostics: None,
            first_diagnostics: None,
            message: None,
            panel_width: 0.0,
            width: PanelWidth::default(),
            workflow: super::workflow::WorkflowPanel::default(),
        }
    }

    /// Record a finished frame.
    pub fn record(&mut self, s: &FrameStats) {
        // Frame 0 has no previous frame, hence no host frame time.
        let host = (s.frame > 0).then_some(s.host_frame_ms);
        let values = std::iter::once(host).chain(MEASURES.map(|m| m.of(s)));
        for (series, v) in self.series.iter_mut().zip(values) {
            series.push(s.frame, v);
        }
        // Whole steps only: a frame of a step in parts over frames counts when it completes it.
        self.sim_time.push(s.sim.stopped_after.unwrap_or(s.steps), s.dt, host.unwrap_or(0.0));
        self.last = *s;
    }

    /// Show new diagnostics, computed at `frame`.
    pub fn set_diagnostics(&mut self, frame: u64, d: Diagnostics) {
        if self.first_diagnostics.is_none() {
            self.first_diagnostics = Some(d);
        }
        self.diagnostics = Some((frame, d));
    }

    /// Forget diagnostics and histories (after a reset).
    pub fn clear(&mut self) {
        self.diagnostics = None;
        self.first_diagnostics = None;
        for s in &mut self.series {
            s.points.clear();
        }
        self.sim_time.clear();
    }

    /// A message (e.g. a failed reset or settings change) shown until the next one.
    pub fn set_message(&mut self, m: Option<String>) {
        self.message = m;
    }

    /// Interactions per second and GFLOP/s of the last frame: from the kernel time, or from the
    /// host frame time when the backend reports none.
    pub fn throughput(&self) -> Option<(f64, f64)> {
        let s = &self.last;
        if s.steps == 0 || s.sim.parts.is_some() {
            // A frame of a step in parts over frames ran a part of a step.
            return None;
        }
        let t_ms = s.sim.kernel_ms.unwrap_or(s.host_frame_ms);
        if t_ms <= 0.0 {
            return None;
        }
        let per_s = interactions(s.n, s.steps) / (t_ms * 1e-3);
        Some((per_s, per_s * FLOPS_PER_INTERACTION * 1e-9))
    }

    /// Build the overlay (a left side panel) in `ui`; returns what the user asked for.
    pub fn ui(&mut self, ui: &mut egui::Ui, view: &BackendView<'_>) -> Vec<Action> {
        let mut actions = Vec::new();
        let screen = ui.available_rect_before_wrap().width();
        let panel = egui::Panel::left("overlay").resizable(true).default_size(width::DEFAULT_WIDTH);
        let panel = match self.width.restore(screen) {
            Some(w) => panel.exact_size(w),
            None => panel,
        };
        let panel = panel.show(ui, |ui| {
            egui::ScrollArea::both().show(ui, |ui| {
                self.header_ui(ui, view);
                ui.separator();
                ui.label(RichText::new(HELP).small()).on_hover_text(HELP_LONG);
                self.timings_ui(ui, view.settings.map(|s| s.interop));
                ui.separator();
                self.sim_ui(ui, &mut actions);
                ui.separator();
                // With the Workflow panel open from the start (step mode, --workflow) the
                // settings and diagnostics start folded, so the panel is in view.
                let lesson = self.workflow.step_mode || self.workflow.open_at_start;
                settings_ui(ui, view.settings, !lesson, &mut actions);
                self.diagnostics_ui(ui, !lesson, &mut actions);
                let last = self.last;
                self.workflow.ui(ui, &view.workflow, &last, &mut actions);
                device_ui(ui, view);
            });
        });
        self.panel_width = panel.response.rect.right().max(0.0);
        self.width.shown(panel.response.rect.width(), screen);
        if self.workflow.open {
            let free = ui.ctx().content_rect().width() - self.panel_width - 24.0;
            super::workflow::timeline_window(ui.ctx(), &view.workflow, free.clamp(240.0, 900.0));
        }
        self.banners(ui, view);
        actions
    }

    /// The panel's head: the backend and its notices, the GL (and EGL device, present path) facts.
    fn header_ui(&self, ui: &mut egui::Ui, view: &BackendView<'_>) {
        ui.heading("nbody-interop");
        ui.label(RichText::new(view.label).strong());
        if let Some(n) = view.notice {
            // Long notices (driver error chains) are cut to a few lines; hover for all.
            let short: String = n.chars().take(220).collect();
            let short = if short.len() < n.len() { format!("{short}…") } else { short };
            ui.label(RichText::new(short).color(Color32::YELLOW).strong()).on_hover_text(n);
        }
        if let Some(m) = &self.message {
            ui.label(RichText::new(m).color(Color32::from_rgb(255, 140, 60)));
        }
        ui.label(RichText::new(view.gl_info.summary()).small());
        if let Some(d) = &view.gl_info.egl_device {
            ui.label(RichText::new(format!("EGL device: {d}")).small());
        }
        if let Some(p) = view.present {
            ui.label(RichText::new(p).small());
        }
    }

    /// The banners over the scene: both buffers mapped (step mode), or a long step in progress.
    fn banners(&self, ui: &mut egui::Ui, view: &BackendView<'_>) {
        if view.workflow.step.is_some_and(|s| s.state.mapped()) {
            // Step mode between map and unmap: say why the image does not change.
            egui::Area::new(egui::Id::unique("mapped_banner")).anchor(egui::Align2::RIGHT_TOP, [-12.0, 12.0]).show(ui.ctx(), |ui| {
                egui::Frame::popup(ui.style()).show(ui, |ui| {
                    ui.label(
                        RichText::new("CUDA has both buffers mapped: GL may not touch them now.\nThe view shows a copy taken right before the map.")
                            .color(Color32::YELLOW),
                    );
                });
            });
        }
        if let Some(text) = step_in_progress_text(&self.last.sim, view.settings.is_some()) {
            // A long step in parts over frames: say why the image does not move.
            egui::Area::new(egui::Id::unique("step_in_progress")).anchor(egui::Align2::RIGHT_BOTTOM, [-12.0, -12.0]).show(ui.ctx(), |ui| {
                egui::Frame::popup(ui.style()).show(ui, |ui| {
                    ui.label(RichText::new(text).color(Color32::YELLOW));
                });
            });
        }
    }

    /// Width of the overlay panel (points) in the last UI pass; the scene is centred in the area
    /// to its right.
    pub fn panel_width(&self) -> f32 {
        self.panel_width
    }

    fn sim_ui(&mut self, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
        let c = &mut self.controls;
        let mut p = c.params;
        ui.label(format!("N = {}", self.last.n));
        egui::Grid::new("sim").num_columns(2).show(ui, |ui| {
            ui.label("dt");
            ui.add(keep(egui::DragValue::new(&mut p.dt).speed(1e-5).range(1e-12..=1e6)));
            ui.end_row();
            ui.label("softening ε");
            ui.add(keep(egui::DragValue::new(&mut p.softening).speed(1e-4).range(0.0..=1e6)));
            ui.end_row();
            ui.label("G");
            ui.add(keep(egui::DragValue::new(&mut p.g).speed(1e-3).range(1e-12..=1e12)));
            ui.end_row();
            ui.label("steps / frame");
            ui.horizontal(|ui| {
                // With auto the field shows the count in force and is not editable.
                ui.add_enabled(!c.auto_steps, keep(egui::DragValue::new(&mut c.steps_per_frame).range(1..=u32::MAX)));
                ui.checkbox(&mut c.auto_steps, "auto").on_hover_text(
                    "as many steps as fit the frame interval (vsync or --target-fps), measured as it runs, \
                     up to the scene's simulated time per wall second (keys [ and ])",
                );
            });
            ui.end_row();
        });
        if p != c.params {
            c.params = p;
            actions.push(Action::SetParams(p));
        }
        solver_ui(ui, &mut c.solver, &mut c.theta, actions);
        ui.horizontal(|ui| {
            ui.checkbox(&mut c.paused, "pause");
            ui.checkbox(&mut c.trails, "trails").on_hover_text("the last frames' positions behind each body (key t)");
            let mut density = c.view == View::Density;
            if ui.checkbox(&mut density, "density").on_hover_text("the projected mass density, made by CUDA in GL textures (key v)").changed() {
                c.view = if density { View::Density } else { View::Points };
            }
            if ui.add_enabled(c.paused, egui::Button::new("single step")).clicked() {
                actions.push(Action::SingleStep);
            }
        });
        ui.horizontal(|ui| {
            egui::ComboBox::from_id_salt("reset_init").selected_text(c.reset_init.clone()).show_ui(ui, |ui| {
                for name in RESET_INITS {
                    ui.selectable_value(&mut c.reset_init, name.to_owned(), name);
                }
            });
            if c.reset_init == "figure-eight" {
                // The figure-eight orbit has exactly three bodies; the N field would mislead.
                ui.label("N = 3 (fixed)");
            } else if !RESET_INITS.contains(&c.reset_init.as_str()) {
                // A state file (the run's --init) fixes N itself.
                ui.label("N from the file");
            } else {
                ui.label("N");
                ui.add(keep(egui::DragValue::new(&mut c.reset_n).range(1..=usize::MAX).speed(64)));
            }
            if ui.button("load").on_hover_text("replace the bodies with this preset").clicked() {
                actions.push(Action::Reset { init: c.reset_init.clone(), n: c.reset_n });
            }
        });
        if ui.button("reset").on_hover_text("restart from the run's own initial condition (--init)").clicked() {
            actions.push(Action::Restart);
        }
    }

    fn diagnostics_ui(&mut self, ui: &mut egui::Ui, open: bool, actions: &mut Vec<Action>) {
        egui::CollapsingHeader::new("Energy and momentum").default_open(open).show(ui, |ui| {
            if ui.button("compute now").clicked() {
                actions.push(Action::ComputeDiagnostics);
            }
            match self.diagnostics {
                None => {
                    ui.label("not computed yet (--diagnostics-interval K, or compute now)");
                }
                Some((frame, d)) => {
                    let drift = self.first_diagnostics.map(|d0| (d.total - d0.total) / d0.total.abs().max(f64::MIN_POSITIVE));
                    egui::Grid::new("diag").num_columns(2).show(ui, |ui| {
                        ui.label("at frame");
                        ui.label(frame.to_string());
                        ui.end_row();
                        ui.label("E = K + U");
                        ui.label(format!("{:.6e}", d.total));
                        ui.end_row();
                        ui.label("K / U");
                        ui.label(format!("{:.6e} / {:.6e}", d.kinetic, d.potential));
                        ui.end_row();
                        ui.label("ΔE / |E₀|");
                        ui.label(drift.map_or_else(|| "—".into(), |x| format!("{x:.3e}")));
                        ui.end_row();
                        ui.label("|P|");
                        ui.label(format!("{:.3e}", norm(d.momentum)));
                        ui.end_row();
                        ui.label("|L|");
                        ui.label(format!("{:.6e}", norm(d.angular_momentum)));
                        ui.end_row();
                    });
                }
            }
        });
    }
}

/// The folded Device and Entry points panels: the CUDA device's facts and the entry-point report.
fn device_ui(ui: &mut egui::Ui, view: &BackendView<'_>) {
    egui::CollapsingHeader::new("Device").default_open(false).show(ui, |ui| {
        if view.device_panel.is_none() {
            ui.label("(no CUDA device in use)");
        }
        let rows = view.device_panel.map(device_rows).unwrap_or_default();
        egui::Grid::new("device").striped(true).show(ui, |ui| {
            for (k, v) in &rows {
                ui.label(k);
                ui.label(bundled_glyphs(v));
                ui.end_row();
            }
        });
    });
    egui::CollapsingHeader::new("Entry points").default_open(false).show(ui, |ui| {
        if view.entry_points.is_empty() {
            ui.label("(no CUDA entry points loaded)");
        }
        egui::Grid::new("entry_points").striped(true).show(ui, |ui| {
            for h in ["function", "version", "flags", "status", "remedy"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for e in view.entry_points {
                for cell in entry_row(e) {
                    ui.label(cell);
                }
                ui.end_row();
            }
        });
    });
}

fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// The controls, in one line under the heading (all glyphs in egui's bundled fonts).
pub const HELP: &str = "keys: Esc/q quit, space pause, . step, r reset, s screenshot, h overlay, t trails, v view, 1-4 scenes, [ ] slower/faster";

/// The controls in full (hover text of [`HELP`]).
pub const HELP_LONG: &str = "Esc or q: quit (the outputs asked for are written)\n\
space: pause / resume\n\
. (period): one step while paused\n\
r: restart from the run's own initial condition (--init)\n\
s: save a screenshot (nbody-interop-PID-K.png)\n\
h: hide / show this overlay\n\
t: trails on / off\n\
v: points / density view (CUDA backend)\n\
1 2 3 4: scenes plummer, galaxies, ball, figure-eight, each at its own N (or --bodies)\n\
[ and ]: halve / double the simulated time per wall second (steps / frame auto)\n\
mouse: left drag orbits, right drag pans, wheel zooms";

/// The device panel's rows (name, value) from its typed facts.
fn device_rows(p: &crate::backend::DevicePanel) -> Vec<(String, String)> {
    use crate::backend::InteropFacts;
    let i = &p.device;
    let mut rows: Vec<(String, String)> = vec![
        ("device".into(), format!("{} (ordinal {})", i.name, i.ordinal)),
        ("uuid".into(), i.uuid.clone().unwrap_or_else(|| "—".into())),
        ("PCI bus id".into(), i.pci_bus_id.clone()),
        ("compute capability".into(), format!("{}.{}", i.compute_capability.0, i.compute_capability.1)),
        ("memory".into(), format!("{:.1} GiB", i.total_memory_bytes as f64 / (1u64 << 30) as f64)),
        ("SMs × clock".into(), format!("{} × {} MHz", i.multiprocessors, i.clock_khz / 1000)),
        ("L2".into(), format!("{} MiB", i.l2_cache_bytes >> 20)),
        (
            "shared / block, / SM".into(),
            format!("{} KiB, {} KiB", i.shared_memory_per_block_bytes >> 10, i.shared_memory_per_multiprocessor_bytes >> 10),
        ),
        ("max threads / block".into(), i.max_threads_per_block.to_string()),
        ("warp size".into(), i.warp_size.to_string()),
        ("unified addressing".into(), i.unified_addressing.to_string()),
        ("driver".into(), format!("CUDA {}", interop::driver::entry::cuda_version_string(p.driver_version))),
        ("default-stream semantics".into(), p.semantics.to_string()),
        ("context".into(), format!("{:?}, sched {:?}", p.context.0, p.context.1)),
        ("stream".into(), format!("{:?} (priority {})", p.stream.0, p.stream.1)),
    ];
    match &p.interop {
        InteropFacts::External { mib_each, dedicated, semaphores } => {
            let dedicated = if *dedicated { "dedicated" } else { "not dedicated" };
            rows.push(("interop".into(), format!("external memory: cuMemCreate → fd → glImportMemoryFdEXT ({mib_each} MiB each, {dedicated})")));
            rows.push((
                "sync".into(),
                match semaphores {
                    Some(device) => format!("GPU-side: two Vulkan semaphores ({device}) in CUDA and GL; no host wait"),
                    None => "GL fence wait → kernel → CUDA event wait (map = fence, unmap = event)".into(),
                },
            ));
        }
        InteropFacts::Flags { register, map } => rows.push(("register / map flags".into(), format!("{} / {}", register.name(), map.name()))),
    }
    if let Some(s) = &p.slices {
        let role = if s.render_computes { "computes too" } else { "only draws (peer copy in)" };
        rows.push((
            "GPUs · slices".into(),
            format!(
                "{} GPU(s) {:?} · {} slices of {} bodies (devices {:?}) · render GPU {} {role}",
                s.gpus.len(),
                s.gpus,
                s.slices,
                s.len,
                s.devices,
                s.render
            ),
        ));
        rows.push(("gather".into(), s.gather.clone()));
    }
    rows.push(("precision".into(), p.precision.name().into()));
    rows.push(("kernel".into(), p.kernel.clone()));
    rows.push(("GL".into(), format!("{} · {}", p.gl.0, p.gl.1)));
    if let Some(a) = p.kernel_attributes {
        rows.push(("kernel registers / local".into(), format!("{} / {} B", a.registers, a.local_bytes)));
    }
    rows
}

/// One row of the entry-point panel: function, ABI version asked for, `cuGetProcAddress` flags,
/// symbol status, remedy.
fn entry_row(e: &interop::driver::EntryReport) -> [String; 5] {
    [e.name.to_string(), e.version.to_string(), format!("{:#x}", e.flags), e.status.to_string(), e.remedy.clone().unwrap_or_default()]
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;
