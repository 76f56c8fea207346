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

/// Draw `bench.png`: median frame time (ms) against N, log-log, one line per mode (per mode and
/// GPU setup when the run has setups besides the plain one).
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
        let root = BitMapBackend::new(&tmp, (1024, 680)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let mut chart = ChartBuilder::on(&root)
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
        root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}
