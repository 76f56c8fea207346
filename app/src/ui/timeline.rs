//! The Workflow panel's timeline: the last frame's spans (or, in step mode, those of the
//! workflow frame so far) on a µs axis, one row per track — host calls, the CUDA stream (CUDA
//! events), GL (timer queries) and CUPTI's records where loaded — all on the host clock
//! ([`crate::trace::timeline`] says how the GPU's times are placed). Hovering a span shows its
//! name, start, length and detail. egui only.

use egui::{Color32, FontId, Pos2, Rect, RichText, Sense, Stroke, StrokeKind, Vec2};

use crate::trace::{Span, Step, Track};

/// Height of one row, points.
const ROW_H: f32 = 18.0;
/// Width of the row labels, points.
const LABEL_W: f32 = 78.0;

/// The colour of a span: host calls by their workflow step, GPU spans by what ran.
pub fn color(s: &Span) -> Color32 {
    let by_name = |n: &str| match n {
        "map" | "density: map images" => Some(Color32::from_rgb(240, 150, 60)),
        "kernel" => Some(Color32::from_rgb(90, 200, 110)),
        "unmap" | "density: unmap images" => Some(Color32::from_rgb(190, 110, 230)),
        "density: splat" | "density: store" | "density: tone map" => Some(Color32::from_rgb(60, 170, 150)),
        "draw" => Some(Color32::from_rgb(80, 160, 255)),
        "copy + upload" => Some(Color32::from_rgb(230, 210, 90)),
        _ => None,
    };
    match s.track {
        Track::Host => match Step::of(&s.name) {
            Step::Map => Color32::from_rgb(240, 150, 60),
            Step::GetPointer | Step::GetArray => Color32::from_rgb(240, 200, 120),
            Step::MakeObjects | Step::DestroyObjects => Color32::from_rgb(120, 210, 210),
            Step::Launch => Color32::from_rgb(90, 200, 110),
            Step::Unmap => Color32::from_rgb(190, 110, 230),
            Step::Register | Step::Unregister => Color32::from_rgb(230, 90, 90),
            Step::Draw => Color32::from_rgb(80, 160, 255),
            Step::Timing => Color32::from_gray(120),
            Step::Other => Color32::from_gray(160),
        },
        _ => by_name(&s.name).unwrap_or(Color32::from_rgb(90, 200, 110)),
    }
}

/// A tick spacing (1, 2 or 5 × 10^k µs) that gives about `want` ticks over `span_us`.
pub fn tick_step(span_us: f64, want: f64) -> f64 {
    let raw = (span_us / want.max(1.0)).max(1e-3);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw).unwrap_or(10.0 * p)
}

/// Draws the timeline of `spans`; `title` heads it (the frame it shows).
pub fn ui(ui: &mut egui::Ui, spans: &[Span], title: &str) {
    ui.label(RichText::new(title).strong());
    if spans.is_empty() {
        ui.label(RichText::new("(no spans yet: tracing runs while this panel is open)").small());
        return;
    }
    let t0 = spans.iter().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
    let t1 = spans.iter().map(|s| s.start_us + s.dur_us).fold(f64::NEG_INFINITY, f64::max);
    let len = (t1 - t0).max(1.0);
    let mut tracks = vec![Track::Host, Track::Cuda, Track::Gl];
    if spans.iter().any(|s| s.track == Track::Cupti) {
        tracks.push(Track::Cupti);
    }
    let width = ui.available_width().max(LABEL_W + 120.0);
    let height = ROW_H * tracks.len() as f32 + 16.0;
    let (rect, response) = ui.allocate_exact_size(Vec2::new(width, height), Sense::hover());
    let painter = ui.painter_at(rect);
    let plot_x0 = rect.left() + LABEL_W;
    let plot_w = (rect.width() - LABEL_W - 4.0).max(1.0);
    let x_of = |t: f64| plot_x0 + ((t - t0) / len) as f32 * plot_w;
    let text = ui.visuals().text_color();
    let font = FontId::proportional(11.0);
    let mut rects = Vec::with_capacity(spans.len());
    for (row, track) in tracks.iter().enumerate() {
        let y = rect.top() + row as f32 * ROW_H;
        let band = Rect::from_min_size(Pos2::new(plot_x0, y + 1.0), Vec2::new(plot_w, ROW_H - 2.0));
        painter.rect_filled(band, 2.0, Color32::from_white_alpha(8));
        painter.text(Pos2::new(rect.left() + 2.0, y + ROW_H / 2.0), egui::Align2::LEFT_CENTER, track.label(), font.clone(), text);
        for s in spans.iter().filter(|s| s.track == *track) {
            let x = x_of(s.start_us);
            let w = (x_of(s.start_us + s.dur_us) - x).max(1.5);
            let r = Rect::from_min_size(Pos2::new(x, y + 3.0), Vec2::new(w, ROW_H - 6.0));
            painter.rect_filled(r, 1.5, color(s));
            if w > 40.0 {
                painter.text(r.center(), egui::Align2::CENTER_CENTER, &s.name, FontId::proportional(10.0), Color32::BLACK);
            }
            rects.push((r.expand2(Vec2::new(1.0, 0.0)), s));
        }
    }
    // The µs axis.
    let axis_y = rect.top() + ROW_H * tracks.len() as f32 + 2.0;
    painter.line_segment([Pos2::new(plot_x0, axis_y), Pos2::new(plot_x0 + plot_w, axis_y)], Stroke::new(1.0, Color32::GRAY));
    let step = tick_step(len, 5.0);
    let mut t = 0.0;
    while t <= len + 1e-9 {
        let x = x_of(t0 + t);
        painter.line_segment([Pos2::new(x, axis_y), Pos2::new(x, axis_y + 3.0)], Stroke::new(1.0, Color32::GRAY));
        painter.text(Pos2::new(x, axis_y + 3.0), egui::Align2::CENTER_TOP, format!("{t:.0} µs"), FontId::proportional(9.0), text);
        t += step;
    }
    painter.rect_stroke(rect, 0.0, Stroke::new(1.0, Color32::from_white_alpha(20)), StrokeKind::Inside);
    let hovered = response.hover_pos().and_then(|p| rects.iter().rev().find(|(r, _)| r.contains(p)).map(|(_, s)| *s));
    if let Some(s) = hovered {
        let (start, dur) = (s.start_us - t0, s.dur_us);
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(RichText::new(&s.name).strong().monospace());
            ui.label(format!("{}: starts at {start:.1} µs, lasts {dur:.1} µs", s.track.label()));
            if !s.detail.is_empty() {
                ui.label(RichText::new(&s.detail).small());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_1_2_5_steps() {
        assert_eq!(tick_step(1000.0, 5.0), 200.0);
        assert_eq!(tick_step(3500.0, 5.0), 1000.0);
        assert_eq!(tick_step(40.0, 5.0), 10.0);
    }

    #[test]
    fn the_timeline_draws_every_track_without_panicking() {
        let span = |track, name: &str, start_us, dur_us| Span { track, name: name.into(), start_us, dur_us, detail: "d".into() };
        let spans = [
            span(Track::Host, "cuGraphicsMapResources", 0.0, 12.0),
            span(Track::Cuda, "map", 10.0, 320.0),
            span(Track::Cuda, "kernel", 330.0, 2300.0),
            span(Track::Gl, "draw", 2700.0, 780.0),
            span(Track::Cupti, "nbody_step", 331.0, 2290.0),
        ];
        let ctx = egui::Context::default();
        for s in [&spans[..], &[]] {
            let mut out = ctx.run_ui(egui::RawInput::default(), |ui| super::ui(ui, s, "frame 3"));
            out.textures_delta.clear();
        }
    }
}
