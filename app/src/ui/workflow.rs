//! The overlay's "Workflow" panel, teaching the resource-mapping workflow: the last frame's
//! driver calls grouped by step with their CUDA-event and GL times, step mode (its state machine
//! is [`crate::backend::step`]; in the density view the images, their arrays and objects too)
//! and the mistake lab ([`crate::teach::lab`]). egui only: the panel returns [`Action`]s and
//! never touches GL or CUDA.

use egui::{Color32, RichText};

use super::action::{Action, FrameStats};
use crate::backend::step::{Side, StepView};
use crate::trace::{group, Call, Span, Step};

/// What the panel shows, gathered outside the UI pass.
#[derive(Debug, Clone, Copy)]
pub struct WorkflowView<'a> {
    /// Driver calls of the last finished frame (empty while tracing is off).
    pub calls: &'a [Call],
    /// Index of that frame.
    pub frame: Option<u64>,
    /// The timeline's spans: that frame's, or in step mode the workflow frame's so far.
    pub spans: &'a [Span],
    /// Whether a tracer is installed.
    pub tracing: bool,
    /// Step-mode state (CUDA map backend in step mode).
    pub step: Option<&'a StepView>,
    /// Why step mode cannot run with this backend (`None`: it can).
    pub step_unavailable: Option<&'a str>,
    /// The backend runs on CUDA (its times come from CUDA events; the CPU backend's step time is
    /// the host's clock).
    pub cuda: bool,
    /// The CUDA backend's interop mode (`None`: the CPU backend), for the timing rows.
    pub mode: Option<crate::cuda::settings::InteropMode>,
}

impl Default for WorkflowView<'_> {
    fn default() -> Self {
        WorkflowView {
            calls: &[],
            frame: None,
            spans: &[],
            tracing: false,
            step: None,
            step_unavailable: Some("no backend"),
            cuda: false,
            mode: None,
        }
    }
}

/// The panel's own state.
#[derive(Debug, Default)]
pub struct WorkflowPanel {
    /// The panel is open (the demo traces calls only then, or with `--trace`).
    pub open: bool,
    /// Step mode asked for (the demo switches the backend).
    pub step_mode: bool,
    /// Open the panel at the first frame (`--workflow`; step mode opens it too).
    pub open_at_start: bool,
    /// Results of the mistake-lab cases run from the panel, newest last.
    pub lab: Vec<crate::teach::lab::Outcome>,
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{v:.3} ms"))
}

impl WorkflowPanel {
    /// Builds the panel (a collapsing section of the overlay).
    pub fn ui(&mut self, ui: &mut egui::Ui, view: &WorkflowView<'_>, stats: &FrameStats, actions: &mut Vec<Action>) {
        // Open from the start in step mode (--step-mode): the panel is the lesson then.
        let r = egui::CollapsingHeader::new("Workflow")
            .default_open(self.step_mode || self.open_at_start)
            .show(ui, |ui| self.body(ui, view, stats, actions));
        self.open = r.body_returned.is_some();
    }

    /// The panel's contents (shown while it is open).
    pub fn body(&mut self, ui: &mut egui::Ui, view: &WorkflowView<'_>, stats: &FrameStats, actions: &mut Vec<Action>) {
        ui.label(RichText::new("register -> map -> get pointer -> launch -> unmap -> draw -> unregister").small());
        if view.step.is_some_and(|s| !s.images.is_empty()) {
            ui.label(RichText::new("images: register -> map -> get array -> objects -> launch -> destroy objects -> unmap -> draw").small());
        }
        egui::Grid::new("workflow_times").num_columns(2).show(ui, |ui| {
            // The rows this backend measures, named as in the timings above.
            for row in super::rows::timing_rows(view.mode, stats.draw_clock) {
                ui.label(row.label);
                ui.label(ms(row.measure.of(stats)));
                ui.end_row();
            }
        });
        ui.separator();
        self.step_ui(ui, view, actions);
        ui.separator();
        calls_ui(ui, view, stats);
        ui.separator();
        self.lab_ui(ui, actions);
    }

    fn step_ui(&mut self, ui: &mut egui::Ui, view: &WorkflowView<'_>, actions: &mut Vec<Action>) {
        if let Some(why) = view.step_unavailable {
            ui.label(RichText::new(format!("step mode needs CUDA (--interop map): {why}")).color(Color32::YELLOW));
            if self.step_mode {
                self.step_mode = false;
                actions.push(Action::SetStepMode(false));
            }
            return;
        }
        ui.horizontal(|ui| {
            if ui.checkbox(&mut self.step_mode, "step mode").changed() {
                actions.push(Action::SetStepMode(self.step_mode));
            }
            let next = view.step.map(|s| s.next);
            if ui.add_enabled(next.is_some(), egui::Button::new("next step")).clicked() {
                actions.push(Action::NextStep);
            }
            if let Some(n) = next {
                ui.label(RichText::new(format!("next: {}", n.label())).small());
            }
        });
        let Some(s) = view.step else {
            ui.label(RichText::new("(the frame runs whole; tick step mode to pause between its steps)").small());
            return;
        };
        ui.label(format!(
            "state: {:?} — {}",
            s.state,
            if s.state.mapped() { "CUDA owns the buffers, GL must not touch them (body draw skipped)" } else { "GL may use the buffers" }
        ));
        // A grid lays its columns out at the widths of its last frame; one per state (a new id
        // gets egui's sizing pass), so a step's new cells ("unmapped") do not overlap.
        egui::Grid::new(("workflow_buffers", format!("{:?}", s.state))).striped(true).show(ui, |ui| {
            for h in ["buffer", "GL name", "registered", "mapped", "may touch", "role"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for b in &s.buffers {
                ui.label(b.index.to_string());
                ui.label(b.gl_buffer.to_string());
                ui.label(if b.registered { "yes" } else { "no" });
                ui.label(if b.mapped { "mapped" } else { "unmapped" });
                let (t, c) = match b.side {
                    Side::Cuda => ("CUDA", Color32::from_rgb(120, 220, 120)),
                    Side::Gl => ("GL", Color32::from_rgb(90, 170, 255)),
                };
                ui.label(RichText::new(t).color(c).strong());
                ui.label(&b.role);
                ui.end_row();
            }
        });
        if let Some(p) = s.pointers {
            ui.label(RichText::new(format!("device pointers: {:#x}, {:#x} (valid until the unmap)", p[0], p[1])).small());
        }
        images_ui(ui, s);
        if let Some(l) = &s.last {
            ui.label(RichText::new(super::bundled_glyphs(l)).small());
        }
    }

    fn lab_ui(&mut self, ui: &mut egui::Ui, actions: &mut Vec<Action>) {
        egui::CollapsingHeader::new("Mistake lab").default_open(false).show(ui, |ui| {
            ui.label(RichText::new("Each button makes one classic mistake on scratch resources and shows what the driver says.").small());
            ui.horizontal_wrapped(|ui| {
                for c in crate::teach::lab::CASES {
                    if ui.button(c.name).on_hover_text(c.call).clicked() {
                        actions.push(Action::RunLab(c.name.to_string()));
                    }
                }
            });
            if !self.lab.is_empty() && ui.small_button("clear").clicked() {
                self.lab.clear();
            }
            for o in self.lab.iter().rev() {
                let (mark, color) = if o.ok { ("✔", Color32::from_rgb(120, 220, 120)) } else { ("✘", Color32::from_rgb(255, 140, 60)) };
                ui.label(RichText::new(format!("{mark} {}: {}", o.case, o.got_summary())).color(color).strong());
                ui.label(RichText::new(format!("call: {}", o.call)).small());
                ui.label(RichText::new(format!("expected: {}", o.expected.join(" or "))).small());
                if !o.got_text.is_empty() {
                    ui.label(RichText::new(format!("driver: {}", o.got_text)).small());
                }
                ui.label(RichText::new(format!("why: {}", o.explanation)).small());
                ui.label(RichText::new(format!("fix: {}", o.fix)).small());
                ui.separator();
            }
        });
    }
}

/// The timeline window (bottom right, over the scene), shown while the Workflow panel is open:
/// timelines need width, which the side panel lacks.
pub fn timeline_window(ctx: &egui::Context, view: &WorkflowView<'_>, width: f32) {
    let title = match (view.step.is_some(), view.frame) {
        (true, _) => "the workflow frame so far (step mode: one step more each time)".to_string(),
        (false, Some(f)) => format!("frame {f}: host calls, the CUDA stream and GL on the host clock"),
        (false, None) => "timeline".to_string(),
    };
    egui::Window::new("Timeline")
        .anchor(egui::Align2::RIGHT_BOTTOM, [-8.0, -8.0])
        .default_width(width)
        .min_width(width)
        .resizable(false)
        .collapsible(true)
        .show(ctx, |ui| super::timeline::ui(ui, view.spans, &title));
}

/// The density view's images in step mode: who may touch each, its array, and the objects.
fn images_ui(ui: &mut egui::Ui, s: &StepView) {
    if s.images.is_empty() {
        return;
    }
    egui::Grid::new(("workflow_images", format!("{:?}", s.state))).striped(true).show(ui, |ui| {
        for h in ["image", "GL texture", "mapped", "may touch", "CUDA array"] {
            ui.label(RichText::new(h).strong());
        }
        ui.end_row();
        for i in &s.images {
            ui.label(i.name);
            ui.label(i.gl_texture.to_string());
            ui.label(if i.mapped { "mapped" } else { "unmapped" });
            let (t, c) = match i.side {
                Side::Cuda => ("CUDA", Color32::from_rgb(120, 220, 120)),
                Side::Gl => ("GL", Color32::from_rgb(90, 170, 255)),
            };
            ui.label(RichText::new(t).color(c).strong());
            ui.label(i.array.map_or_else(|| "—".to_string(), |a| format!("{a:#x}")));
            ui.end_row();
        }
    });
    for o in &s.objects {
        ui.label(RichText::new(o).small());
    }
    if s.state.images_mapped() {
        ui.label(RichText::new("CUDA owns the images: GL draws the copy taken before their map").small());
    }
}

fn calls_ui(ui: &mut egui::Ui, view: &WorkflowView<'_>, stats: &FrameStats) {
    if !view.tracing {
        ui.label(RichText::new("(tracing starts next frame)").small());
        return;
    }
    let frame = view.frame.map_or_else(|| "—".to_string(), |f| f.to_string());
    ui.label(RichText::new(format!("driver calls of frame {frame} ({} calls)", view.calls.len())).strong());
    // One grid per list of calls (as for the buffers above): a step of step mode shows other
    // calls, whose columns are sized before they are drawn; a frame of the same calls keeps it.
    let shown: Vec<(&str, &str, &str)> = view.calls.iter().map(|c| (c.name.as_str(), c.export.as_str(), c.result.as_str())).collect();
    egui::Grid::new(("workflow_calls", shown)).striped(true).num_columns(5).show(ui, |ui| {
        // The step's CUDA-event times belong to the first map, launch and unmap of the frame
        // (the buffers'); later ones (the density view's images) have their own spans.
        let mut timed = std::collections::HashSet::new();
        for g in group(view.calls) {
            let first = timed.insert(g.step);
            let time = match g.step {
                Step::Map if first => stats.sim.map_ms,
                Step::Launch if first => stats.sim.kernel_ms,
                Step::Unmap if first => stats.sim.unmap_ms,
                Step::Draw => g.calls.iter().find_map(|c| c.gpu_ms),
                _ => None,
            };
            let head = match time {
                Some(t) => format!("{} · {t:.3} ms", g.step.label()),
                None => g.step.label().to_string(),
            };
            ui.label(RichText::new(head).color(Color32::from_rgb(255, 230, 90)));
            ui.end_row();
            for c in g.calls {
                let name = if c.export != c.name { format!("{} -> {}", c.name, c.export) } else { c.name.clone() };
                let name = if c.noise { RichText::new(name).monospace().weak() } else { RichText::new(name).monospace() };
                let hover = if c.returned.is_empty() {
                    format!("{} @ {}", c.args, c.address)
                } else {
                    format!("{} @ {}\nreturned: {}", c.args, c.address, c.returned)
                };
                ui.label(name).on_hover_text(hover);
                ui.label(if c.version > 0 { format!("v{}", c.version) } else { String::new() });
                let color = if c.code == 0 { Color32::GRAY } else { Color32::from_rgb(255, 140, 60) };
                ui.label(RichText::new(&c.result).color(color).small());
                ui.label(format!("{:.1} µs", c.host_us));
                // What came back (the mapped pointer and size, a new handle) says more than the
                // arguments where there is something.
                let shown = if c.returned.is_empty() { &c.args } else { &c.returned };
                let args: String = shown.chars().take(48).collect();
                ui.label(RichText::new(args).small());
                ui.end_row();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::step::{BufferView, StepState};

    fn run_body(panel: &mut WorkflowPanel, view: &WorkflowView<'_>) -> Vec<Action> {
        let ctx = egui::Context::default();
        let mut actions = Vec::new();
        let raw = egui::RawInput { screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(800.0, 600.0))), ..Default::default() };
        let mut out = ctx.run_ui(raw, |ui| panel.body(ui, view, &FrameStats::default(), &mut actions));
        out.textures_delta.clear(); // no painter here
        actions
    }

    #[test]
    fn the_panel_turns_step_mode_off_when_the_backend_cannot_step() {
        let mut panel = WorkflowPanel { step_mode: true, ..Default::default() };
        let view = WorkflowView { step_unavailable: Some("this run uses the CPU backend"), ..Default::default() };
        assert_eq!(run_body(&mut panel, &view), [Action::SetStepMode(false)]);
        assert!(!panel.step_mode);
    }

    #[test]
    fn the_panel_shows_calls_buffers_and_lab_results() {
        use crate::trace::{Call, Step};
        let call = |name: &str, step| Call {
            seq: 0,
            frame: Some(1),
            step,
            api: "cuda",
            name: name.into(),
            version: 3000,
            export: name.into(),
            address: "0x1".into(),
            args: "count=2".into(),
            returned: String::new(),
            noise: false,
            code: 0,
            result: "CUDA_SUCCESS".into(),
            host_us: 1.0,
            t_us: 0.0,
            gpu_ms: None,
        };
        let calls = [call("cuGraphicsMapResources", Step::Map), call("cuLaunchKernel", Step::Launch)];
        let step = StepView {
            state: StepState::Pointers,
            next: crate::backend::step::WorkflowStep::Launch,
            images: vec![crate::backend::step::ImageView { name: "shown (RGBA8)", gl_texture: 5, mapped: false, side: Side::Gl, array: None }],
            objects: vec!["surface object 0x1 over the shown image array".into()],
            buffers: vec![BufferView { index: 0, gl_buffer: 3, registered: true, mapped: true, side: Side::Cuda, role: "front".into() }],
            display_front: None,
            pointers: Some([0x1000, 0x2000]),
            last: Some("mapped".into()),
        };
        let mut panel = WorkflowPanel { step_mode: true, ..Default::default() };
        panel.lab.push(crate::teach::lab::Outcome::unavailable(&crate::teach::lab::CASES[0], "no GPU"));
        let view = WorkflowView {
            calls: &calls,
            frame: Some(1),
            spans: &[],
            tracing: true,
            step: Some(&step),
            step_unavailable: None,
            cuda: true,
            mode: Some(crate::cuda::settings::InteropMode::Map),
        };
        assert!(run_body(&mut panel, &view).is_empty(), "nothing clicked, nothing asked");
    }
}
