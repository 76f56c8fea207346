//! The overlay's timings: the last frame's times (the rows this backend measures), the pace and
//! the throughput, then a small rolling plot per series.

use egui::{Color32, RichText};
use egui_plot::{Line, Plot, PlotPoints};

use super::{ms, Overlay, HISTORY, MEASURES};
use crate::cuda::settings::InteropMode;
use crate::ui::action::FrameStats;
use crate::ui::rows::{handover_ms, timing_rows, DENSITY_ROW, GATHER_ROW};

impl Overlay {
    /// The timings of the last frame `self.last` (for the interop `mode`, if any), then their plots.
    pub(super) fn timings_ui(&mut self, ui: &mut egui::Ui, mode: Option<InteropMode>) {
        let s = self.last;
        egui::Grid::new("timings").num_columns(2).show(ui, |ui| {
            self.frame_rows(ui, mode, &s);
            self.pace_rows(ui, &s);
            self.throughput_rows(ui, mode, &s);
        });
        self.timing_plots(ui, mode, &s);
    }

    /// The rows of the frame time and of each time this backend measures.
    fn frame_rows(&self, ui: &mut egui::Ui, mode: Option<InteropMode>, s: &FrameStats) {
        ui.label("frame (host)");
        if s.frame == 0 || s.host_frame_ms <= 0.0 {
            // The first frame has no previous one to measure from.
            ui.label("— (first frame)");
        } else {
            ui.label(format!("{:.2} ms ({:.0} fps)", s.host_frame_ms, 1e3 / s.host_frame_ms));
        }
        ui.end_row();
        // Only the rows this backend measures, each named for what measured it (ui/rows.rs).
        let extra = [s.sim.gather_ms.map(|_| GATHER_ROW), s.density_ms.map(|_| DENSITY_ROW)];
        for row in timing_rows(mode, s.draw_clock).into_iter().chain(extra.into_iter().flatten()) {
            ui.label(row.label);
            ui.label(ms(row.measure.of(s)));
            ui.end_row();
        }
    }

    /// The rows of the steps per frame (and what limits them under auto) and of the simulated time
    /// per wall second.
    fn pace_rows(&self, ui: &mut egui::Ui, s: &FrameStats) {
        ui.label("steps / frame");
        let c = &self.controls;
        let pace = if c.auto_steps { " (auto)" } else { "" };
        match self.sim_time.steps_rate() {
            Some(r) if r < 10.0 => ui.label(format!("{}{pace} · {r:.2} steps/s", s.steps)),
            Some(r) => ui.label(format!("{}{pace} · {r:.0} steps/s", s.steps)),
            None => ui.label(format!("{}{pace}", s.steps)),
        };
        ui.end_row();
        if c.auto_steps {
            // Which limit set the count: what fits the frame, or the scene's rate.
            ui.label("auto limit");
            ui.label(if c.rate_limited { "scene rate (keys [ ])" } else { "frame budget" });
            ui.end_row();
        }
        ui.label("sim time / wall s");
        let now = self.sim_time.rate().map_or_else(|| "—".to_owned(), |r| format!("{r:.3}"));
        if c.auto_steps {
            ui.label(format!("{now} (asked {:.3})", c.sim_rate));
        } else {
            ui.label(now);
        }
        ui.end_row();
    }

    /// The rows of the interop share of the frame (with interop) and of the interactions per second.
    fn throughput_rows(&self, ui: &mut egui::Ui, mode: Option<InteropMode>, s: &FrameStats) {
        // The hand-over between CUDA and GL as a share of the frame, where there is interop.
        if mode.is_some() {
            ui.label("interop share");
            match handover_ms(mode, s).filter(|_| s.frame > 0 && s.host_frame_ms > 0.0) {
                Some(h) => ui.label(format!("{:.1} % of the frame", 100.0 * h / s.host_frame_ms)),
                None => ui.label("—"),
            };
            ui.end_row();
        }
        // Under the tree (the solver the backend ran) N² over the step time is the rate the
        // direct sum would need, as the bench's "effective" column; the tree evaluates far
        // fewer terms, so no GFLOP/s.
        let tree = s.tree;
        if tree {
            ui.label("effective interactions/s").on_hover_text("N² over the step time: what the direct sum would need to keep pace");
        } else {
            ui.label("interactions/s");
        }
        match self.throughput() {
            Some((per_s, _)) if tree => {
                ui.label(format!("{per_s:.3e}"));
            }
            Some((per_s, gflops)) => {
                ui.label(format!("{per_s:.3e}  ({gflops:.1} GFLOP/s)"));
            }
            None => {
                ui.label("—");
            }
        }
        ui.end_row();
    }

    /// One small plot per series (each with its own y scale: frame times and CUDA event times
    /// differ by orders of magnitude), over the last HISTORY frames.
    fn timing_plots(&self, ui: &mut egui::Ui, mode: Option<InteropMode>, s: &FrameStats) {
        let colors = [
            Color32::from_rgb(200, 200, 200),
            Color32::from_rgb(90, 170, 255),
            Color32::from_rgb(255, 160, 60),
            Color32::from_rgb(120, 220, 120),
            Color32::from_rgb(220, 100, 220),
            Color32::from_rgb(255, 230, 90),
        ];
        ui.label(RichText::new(format!("last {HISTORY} frames (ms)")).small());
        egui::Grid::new("timing_plots").num_columns(2).spacing([6.0, 2.0]).show(ui, |ui| {
            // The frame time, then the rows this backend shows, named as they are.
            let rows = timing_rows(mode, s.draw_clock);
            let labelled = self.series.iter().zip(colors).enumerate().filter_map(|(i, (series, color))| {
                let label = match i {
                    0 => Some(series.name),
                    _ => rows.iter().find(|r| r.measure == MEASURES[i - 1]).map(|r| r.label),
                };
                label.map(|l| (l, series, color))
            });
            for (label, series, color) in labelled {
                if series.last().is_none() {
                    continue;
                }
                let max = series.points.iter().map(|p| p[1]).fold(0.0, f64::max);
                ui.label(RichText::new(format!("{label}\nmax {max:.3}")).color(color).small());
                let pts: PlotPoints<'_> = series.points.iter().copied().collect();
                Plot::new(("timing_plot", series.name))
                    .height(30.0)
                    .width(ui.available_width().max(120.0))
                    .include_y(0.0)
                    .show_x(false)
                    .show_y(false)
                    .show_axes(false)
                    .show_grid(false)
                    .allow_drag(false)
                    .allow_zoom(false)
                    .allow_scroll(false)
                    .allow_boxed_zoom(false)
                    .allow_double_click_reset(false)
                    .show(ui, |plot| plot.line(Line::new(series.name, pts).color(color)));
                ui.end_row();
            }
        });
    }
}
