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
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT).is_ok());
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
/// frame goes (`draw_breakdown`).
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
    let (x0, x1, y0, y1) = plot_ranges(rows);
    // Labelled y ticks whatever the range (one N spans a factor of 4, where plotters' own log
    // ticks may be none).
    let y_ticks = log_ticks(y0, y1);
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
            .build_cartesian_2d((x0..x1).log_scale().with_key_points(ns), (y0..y1).log_scale().with_key_points(y_ticks))
            .map_err(|e| anyhow!("plot: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("bodies N")
            .y_desc("median frame time (ms)")
            .x_label_formatter(&|x| n_label(*x))
            .y_label_formatter(&|y| tick_label(*y))
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
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled()))).map_err(|e| anyhow!("plot: {e}"))?;
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

/// The plot's ranges `(x0, x1, y0, y1)`: the rows' N and median frame times (ms, at least 1e-6),
/// widened by a factor of 1.5 in N and 2 in time on each side.
fn plot_ranges(rows: &[Row]) -> (f64, f64, f64, f64) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for r in rows {
        let (x, y) = (r.n as f64, r.times.frame.median.max(1e-6));
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    (x0 / 1.5, x1 * 1.5, y0 / 2.0, y1 * 2.0)
}

/// Ticks of a log axis from `lo` to `hi` (> 0): the values m × 10^k in the range for m in the
/// densest of {1, 2, 3, 5}, {1, 2, 5}, {1} that gives at most 8 of them (the sparsest, {1}, when
/// none does), but never fewer than two while a denser one has two (a range of a factor 4, the
/// narrowest a plot has, always holds two of {1, 2, 3, 5}).
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && hi > lo) {
        return Vec::new();
    }
    let ticks = |ms: &[f64]| -> Vec<f64> {
        let (k0, k1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        (k0..=k1).flat_map(|k| ms.iter().map(move |m| m * 10f64.powi(k))).filter(|t| (lo..=hi).contains(t)).collect()
    };
    let sets: [&[f64]; 3] = [&[1.0, 2.0, 3.0, 5.0], &[1.0, 2.0, 5.0], &[1.0]];
    let mut best = ticks(sets[0]);
    for m in &sets[1..] {
        let t = ticks(m);
        if best.len() <= 8 || t.len() < 2 {
            break;
        }
        best = t;
    }
    best
}

/// A tick's label: whole numbers from 1 on, else the significant digits (0.002, 0.05).
pub(super) fn tick_label(y: f64) -> String {
    if y >= 1.0 {
        format!("{y:.0}")
    } else {
        // Up to 3 significant digits, trailing zeros dropped.
        let digits = (-y.log10().floor()) as usize + 2;
        let s = format!("{y:.digits$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Width in pixels of the column right of the breakdown's bars: each bar's median frame time,
/// and the legend beside them.
const BREAKDOWN_SIDE_PX: u32 = 230;

/// The breakdown's x axis: shares of the median frame, 0 to 100 %, nothing past it.
pub(super) const BREAKDOWN_X: std::ops::Range<f64> = 0.0..100.0;

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
    let area = area
        .titled("where a frame goes: parts of the median frame (CUDA events, GL timer query)", ("sans-serif", 20))
        .map_err(|e| anyhow!("plot: {e}"))?;
    // The bars on the left, 0–100 %; the frame times and the legend in a column on the right.
    let (width, _) = area.dim_in_pixel();
    let (left, side) = area.split_horizontally(width.saturating_sub(BREAKDOWN_SIDE_PX));
    let mut chart = ChartBuilder::on(&left)
        .margin(16)
        .margin_right(8)
        .x_label_area_size(40)
        .y_label_area_size(190)
        .build_cartesian_2d(BREAKDOWN_X, (0..bars).into_segmented())
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
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    for (i, (_, color)) in PARTS.iter().enumerate() {
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
        chart.draw_series(rects).map_err(|e| anyhow!("plot: {e}"))?;
    }
    // The side column: each bar's median frame time level with it, then the legend.
    let (_, base_y) = side.get_base_pixel();
    for (row, r) in rows.iter().enumerate() {
        let ms = r.times.frame.median;
        let text = if ms >= 10.0 { format!("{ms:.0} ms") } else { format!("{ms:.2} ms") };
        let (_, y) = chart.backend_coord(&(BREAKDOWN_X.end, SegmentValue::Exact(bars - row)));
        side.draw(&Text::new(text, (4, y - base_y + 3), ("sans-serif", 12))).map_err(|e| anyhow!("plot: {e}"))?;
    }
    let (_, y) = chart.backend_coord(&(BREAKDOWN_X.end, SegmentValue::Exact(bars)));
    let (lx, ly) = (84, y - base_y);
    for (i, (name, color)) in PARTS.iter().enumerate() {
        let top = ly + 20 * i as i32;
        side.draw(&Rectangle::new([(lx, top), (lx + 14, top + 12)], color.filled())).map_err(|e| anyhow!("plot: {e}"))?;
        side.draw(&Text::new(*name, (lx + 20, top - 1), ("sans-serif", 14))).map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The breakdown's x axis is the share of the frame: from 0 to 100 %.
    const _: () = assert!(BREAKDOWN_X.start == 0.0 && BREAKDOWN_X.end == 100.0);

    /// One N spans a factor of 4 on the y axis (median / 2 to median × 2): wherever it falls, at
    /// least two labelled ticks, in the range, ascending; wide ranges stay at powers of ten.
    #[test]
    fn a_single_n_gets_labelled_y_ticks() {
        for median in [0.0013, 0.07, 0.9, 1.0, 2.1, 4.2, 7.049, 67.1, 999.0, 1384.4, 3.3e5] {
            let (lo, hi) = (median / 2.0, median * 2.0);
            let t = log_ticks(lo, hi);
            assert!(t.len() >= 2, "{median}: {t:?}");
            assert!(t.iter().all(|x| (lo..=hi).contains(x)) && t.windows(2).all(|w| w[0] < w[1]), "{median}: {t:?}");
            assert!(t.iter().all(|x| !tick_label(*x).is_empty()), "{t:?}");
        }
        assert_eq!(log_ticks(0.5, 2000.0), vec![1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_ticks(2.0, 350.0), vec![2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0]);
        assert_eq!(tick_label(0.002), "0.002");
        assert_eq!(tick_label(0.05), "0.05");
        assert_eq!(tick_label(300.0), "300");
    }
}
