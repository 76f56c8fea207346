//! `bench.png`: the results drawn with plotters.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Context as _};

use super::{has_setups, row_label, Row};

/// Register the embedded font plotters draws text with (once per process).
///
/// plotters is built with its `ab_glyph` feature rather than `ttf`: `ttf` goes through font-kit,
/// which links fontconfig and needs system fonts, which headless GPU machines often lack. The
/// font is Ubuntu Light from `epaint_default_fonts` (the crate egui takes its fonts from).
fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded font (Ubuntu Light) could not be loaded"))
    }
}

/// `16k`, `1M`-style label of a body count.
pub(super) fn n_label(n: f64) -> String {
    if n >= 1048576.0 && (n / 1048576.0).fract() == 0.0 {
        format!("{}M", n / 1048576.0)
    } else if n >= 1024.0 && (n / 1024.0).fract() == 0.0 {
        format!("{}k", n / 1024.0)
    } else {
        format!("{n:.0}")
    }
}

/// Draw `bench.png`: above, the median frame time (ms) against N, log-log, one line per mode (per
/// mode and GPU setup when the run has setups besides the plain one); below, where each row's
/// frame goes ([`draw_breakdown`]).
///
/// # Errors
/// Nothing to plot, or plotters fails to draw or encode the PNG.
pub fn plot(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use plotters::prelude::*;

    register_font()?;
    if rows.is_empty() {
        anyhow::bail!("no rows to plot");
    }
    // One line per mode (and GPU setup, when the run has more than the plain one).
    let setups = has_setups(rows);
    let labels: Vec<String> = rows.iter().map(|r| row_label(r, setups)).collect();
    let mut modes: Vec<&str> = Vec::new();
    for l in &labels {
        if !modes.contains(&l.as_str()) {
            modes.push(l);
        }
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for r in rows {
        let (x, y) = (r.n as f64, r.times.frame.median.max(1e-6));
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let (x0, x1, y0, y1) = (x0 / 1.5, x1 * 1.5, y0 / 2.0, y1 * 2.0);
    // Label the x axis at the measured body counts.
    let mut ns: Vec<f64> = rows.iter().map(|r| r.n as f64).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();

    // plotters picks the encoder from the extension, so the temporary file ends in `.png` too.
    let tmp = path.with_extension("tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (1024, 680 + breakdown_height(rows.len()))).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let (top, bottom) = root.split_vertically(680);
        let mut chart = ChartBuilder::on(&top)
            .caption("nbody-interop bench: median frame time", ("sans-serif", 26))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((x0..x1).log_scale().with_key_points(ns), (y0..y1).log_scale())
            .map_err(|e| anyhow!("plot: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("bodies N")
            .y_desc("median frame time (ms)")
            .x_label_formatter(&|x| n_label(*x))
            .y_label_formatter(&|y| if *y >= 1.0 { format!("{y:.0}") } else { format!("{y:.3}") })
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        for (i, mode) in modes.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut pts: Vec<(f64, f64)> =
                rows.iter().zip(&labels).filter(|(_, l)| l == mode).map(|(r, _)| (r.n as f64, r.times.frame.median.max(1e-6))).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| anyhow!("plot: {e}"))?
                .label(mode.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
                .map_err(|e| anyhow!("plot: {e}"))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        draw_breakdown(&bottom, rows, &labels)?;
        root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Height in pixels of [`draw_breakdown`]'s panel for `bars` rows: a bar of 18 px per row.
fn breakdown_height(bars: usize) -> u32 {
    (90 + 18 * bars as u32).max(240)
}

/// The parts of a frame [`draw_breakdown`] stacks, with their colours: the CUDA-event spans of
/// the map, the kernels and the unmap, the upload, the GL timer query of the draw, and the rest
/// of the host frame time.
const PARTS: [(&str, plotters::style::RGBColor); 6] = [
    ("map", plotters::style::RGBColor(214, 39, 40)),
    ("kernel", plotters::style::RGBColor(31, 119, 180)),
    ("unmap", plotters::style::RGBColor(255, 127, 14)),
    ("upload", plotters::style::RGBColor(148, 103, 189)),
    ("draw", plotters::style::RGBColor(44, 160, 44)),
    ("rest", plotters::style::RGBColor(190, 190, 190)),
];

/// A row's frame split into [`PARTS`], in ms. `external`'s map and unmap columns are host waits
/// (on the GL fence, on the CUDA event after the kernels), not spans of their own: they are left
/// in the rest. Parts that overlap can sum past the frame; they are then scaled to it.
fn frame_parts(r: &Row) -> [f64; 6] {
    let t = &r.times;
    let med = |s: Option<crate::bench::stats::Summary>| s.map_or(0.0, |s| s.median.max(0.0));
    let waits = r.mode == "external";
    let mut p = [if waits { 0.0 } else { med(t.map) }, med(t.kernel), if waits { 0.0 } else { med(t.unmap) }, med(t.upload), med(t.draw), 0.0];
    let frame = t.frame.median.max(1e-9);
    let sum: f64 = p.iter().sum();
    if sum > frame {
        p.iter_mut().for_each(|x| *x *= frame / sum);
    } else {
        p[5] = frame - sum;
    }
    p
}

/// Where each row's frame goes: one horizontal bar per row (mode and N, top to bottom in the
/// rows' order), the parts of its median frame ([`frame_parts`]) stacked as shares of it, the
/// frame's median in ms at the bar's end.
///
/// # Errors
/// plotters fails to draw.
fn draw_breakdown<DB: plotters::prelude::DrawingBackend>(
    area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    labels: &[String],
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let bars = rows.len();
    // Bar 0 at the top: segment b holds row bars − 1 − b.
    let names: Vec<String> = rows.iter().zip(labels).map(|(r, l)| format!("{l} · {}", n_label(r.n as f64))).collect();
    let mut chart = ChartBuilder::on(area)
        .caption("where a frame goes: parts of the median frame (CUDA events, GL timer query)", ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(190)
        // Room on the right for the frame times and the legend.
        .build_cartesian_2d(0f64..135f64, (0..bars).into_segmented())
        .map_err(|e| anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(bars)
        .y_label_formatter(&|y| match y {
            SegmentValue::CenterOf(b) if *b < bars => names[bars - 1 - *b].clone(),
            _ => String::new(),
        })
        .x_desc("share of the median frame (%)")
        .x_label_formatter(&|x| if *x <= 100.0 { format!("{x:.0}") } else { String::new() })
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    for (i, (name, color)) in PARTS.iter().enumerate() {
        let rects: Vec<Rectangle<(f64, SegmentValue<usize>)>> = rows
            .iter()
            .enumerate()
            .map(|(row, r)| {
                let p = frame_parts(r);
                let frame: f64 = p.iter().sum::<f64>().max(1e-9);
                let left: f64 = p[..i].iter().sum::<f64>() / frame * 100.0;
                let right = left + p[i] / frame * 100.0;
                let b = bars - 1 - row;
                let mut bar = Rectangle::new([(left, SegmentValue::Exact(b)), (right, SegmentValue::Exact(b + 1))], color.filled());
                bar.set_margin(2, 2, 0, 0);
                bar
            })
            .collect();
        let color = *color;
        chart
            .draw_series(rects)
            .map_err(|e| anyhow!("plot: {e}"))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .draw_series(rows.iter().enumerate().map(|(row, r)| {
            let ms = r.times.frame.median;
            let text = if ms >= 10.0 { format!("{ms:.0} ms") } else { format!("{ms:.2} ms") };
            Text::new(text, (101.0, SegmentValue::Exact(bars - row)), ("sans-serif", 12))
        }))
        .map_err(|e| anyhow!("plot: {e}"))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    Ok(())
}
