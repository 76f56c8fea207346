//! The HUD, the frame's third owner: egui (context and painter), the overlay and its panels;
//! the frame's UI pass (no GL) with the overlay's view model, and its paint into the target.

use anyhow::anyhow;

use super::zoom::ui_zoom;
use super::Scene;
use crate::backend::CudaSide;
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;
use crate::gfx::GlInfo;
use crate::trace::{Call, Span};
use crate::ui::overlay::{BackendView, Overlay};
use crate::ui::workflow::WorkflowView;

/// What the overlay's device and entry-point panels show: built once per backend (and again
/// after its settings change), not every frame.
#[derive(Debug, Default)]
pub(super) struct Panels {
    pub(super) device: Option<crate::backend::DevicePanel>,
    pub(super) entry_points: Vec<interop::driver::EntryReport>,
}

/// The overlay and what draws it.
pub(super) struct Hud {
    /// egui's GL objects, destroyed before the context goes ([`Scene::destroy`]).
    pub(super) painter: egui_glow::Painter,
    pub(super) egui_ctx: egui::Context,
    pub(super) overlay: Overlay,
    /// The overlay's notice about the backend (a fallback), also logged.
    pub(super) notice: Option<String>,
    /// How the window shows frames ([`Scene::set_present`]; `None` headless).
    pub(super) present: Option<String>,
    /// The backend's panels, made once per backend (`None`: to be made).
    pub(super) panels: Option<Panels>,
    /// The overlay zoom last set (`--ui-scale`, or [`super::auto_ui_zoom`] of the target's height).
    pub(super) ui_zoom: Option<f32>,
    /// The overlay was hidden with `h`.
    pub(super) overlay_hidden: bool,
}

impl Hud {
    /// The HUD at the start, its zoom set to `zoom`.
    pub(super) fn new(painter: egui_glow::Painter, egui_ctx: egui::Context, overlay: Overlay, zoom: f32) -> Hud {
        Hud { painter, egui_ctx, overlay, notice: None, present: None, panels: None, ui_zoom: Some(zoom), overlay_hidden: false }
    }
}

/// What the UI pass made: egui's output to paint, and the pixels its side panel covers.
pub(super) struct UiPass {
    pub(super) output: egui::FullOutput,
    pub(super) scene_left: f32,
}

/// The overlay's view model of the backend: its label and notice, the interop settings, the
/// device and entry-point panels, the GL and present lines, and the Workflow panel's calls,
/// spans and step state.
#[allow(clippy::too_many_arguments)]
fn backend_view<'a>(
    cuda: Option<&dyn CudaSide>,
    label: &'a str,
    panels: &'a Panels,
    notice: Option<&'a str>,
    present: Option<&'a str>,
    gl_info: &'a GlInfo,
    trace: (Option<u64>, &'a [Call], bool),
    spans: &'a [Span],
    step: (Option<&'a crate::backend::step::StepView>, Option<&'a str>),
) -> BackendView<'a> {
    let settings = cuda.and_then(|c| c.settings());
    let (frame, calls, tracing) = trace;
    BackendView {
        label,
        notice,
        settings,
        device_panel: panels.device.as_ref(),
        entry_points: &panels.entry_points,
        gl_info,
        present,
        workflow: WorkflowView {
            calls,
            frame,
            spans,
            tracing,
            step: step.0,
            step_unavailable: step.1,
            cuda: cuda.is_some(),
            mode: settings.map(|s| s.interop),
        },
    }
}

impl Scene {
    /// The frame's UI pass (no GL): the overlay laid out from its view model; the actions it
    /// returns wait for the next frame. `None` with `--no-overlay` or the overlay hidden.
    ///
    /// # Errors
    /// No backend (a reset failed).
    pub(super) fn ui_pass(&mut self, raw_input: egui::RawInput, target: &RenderTarget, pixels_per_point: f32) -> anyhow::Result<Option<UiPass>> {
        if self.args.no_overlay || self.hud.overlay_hidden {
            return Ok(None);
        }
        let (trace_frame, calls) = self.telemetry.recorder.as_ref().map(crate::trace::Recorder::last_frame).unwrap_or_default();
        let tracing = self.telemetry.recorder.is_some();
        let backend = self.sim.backend.as_deref_mut().ok_or_else(|| anyhow!("no simulation backend (a reset failed)"))?;
        let label = backend.describe().label;
        let cuda = backend.sides().cuda().map(|c| &*c);
        let step_view = cuda.and_then(|c| c.step_view());
        let step_unavailable = cuda.map_or_else(|| Some(crate::backend::STEP_MODE_NEEDS_CUDA.to_string()), |c| c.step_mode_unavailable());
        let panels = self.hud.panels.get_or_insert_with(|| {
            let (device, entry_points) = cuda.map(|c| (c.device_panel(), c.entry_points())).unwrap_or_default();
            Panels { device, entry_points }
        });
        let view = backend_view(
            cuda,
            &label,
            panels,
            self.hud.notice.as_deref(),
            self.hud.present.as_deref(),
            &self.gl_info,
            (trace_frame, &calls, tracing),
            &self.telemetry.timeline_spans,
            (step_view.as_ref(), step_unavailable.as_deref()),
        );
        // The overlay's zoom follows the window's size (a 4K window gets a readable overlay);
        // set only when that size asks for another value, so egui's own Ctrl +/- zoom stays.
        let zoom = ui_zoom(&self.args, target.size()[1], pixels_per_point);
        if self.hud.ui_zoom != Some(zoom) {
            self.hud.ui_zoom = Some(zoom);
            self.hud.egui_ctx.set_zoom_factor(zoom);
        }
        let overlay = &mut self.hud.overlay;
        let mut actions = Vec::new();
        let output = self.hud.egui_ctx.run_ui(raw_input, |ui| actions = overlay.ui(ui, &view));
        self.sim.pending.extend(actions);
        let scene_left = self.hud.overlay.panel_width() * output.pixels_per_point;
        Ok(Some(UiPass { output, scene_left }))
    }

    /// The frame's paint: egui's shapes tessellated and drawn into the same framebuffer as the
    /// bodies. Returns egui's platform output (cursor, clipboard) for the windowed integration.
    pub(super) fn paint(&mut self, gl: Gl<'_>, ui: Option<UiPass>, target: &RenderTarget) -> egui::PlatformOutput {
        let Some(UiPass { output: mut out, .. }) = ui else { return egui::PlatformOutput::default() };
        target.bind(gl);
        let prims = self.hud.egui_ctx.tessellate(std::mem::take(&mut out.shapes), out.pixels_per_point);
        self.hud.painter.paint_and_update_textures(target.size(), out.pixels_per_point, &prims, &mut out.textures_delta);
        out.platform_output
    }
}
