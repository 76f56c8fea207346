//! The results as the text table printed on stdout.

use std::fmt::Write as _;

use super::{has_setups, row_label, Row};

/// `v` with `prec` decimals, or `—`.
pub(crate) fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.prec$}"))
}

/// `1.23e9` style for rates.
fn sci(v: f64) -> String {
    format!("{v:.3e}")
}

/// The interactions/s cell: the hardware rate, or a tree row's effective rate marked `eff.`.
fn rate_cell(r: &Row, no_rate: bool) -> String {
    match (no_rate, r.rates.interactions_per_s, r.rates.effective_interactions_per_s) {
        (false, Some(v), _) => sci(v),
        (false, None, Some(v)) => format!("{} eff.", sci_short(v)),
        _ => "—".to_string(),
    }
}

/// `1.2e9` style, for a cell that carries a mark.
fn sci_short(v: f64) -> String {
    format!("{v:.1e}")
}

/// The results as a text table (one line per row; with GPU setups other than the plain one, the
/// mode names its setup and the gather time and scaling efficiency get columns).
pub fn table(rows: &[Row]) -> String {
    let setups = has_setups(rows);
    let labels: Vec<String> = rows.iter().map(|r| row_label(r, setups)).collect();
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(13);
    let mut s = String::new();
    let _ = write!(
        s,
        "{:<w$} {:>8} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9} {:>8}",
        "mode", "N", "frame med", "frame p99", "map", "kernel", "unmap", "draw", "overhead µs", "overhead", "interact/s", "GFLOP/s", "spread"
    );
    let _ = writeln!(s, "{}", if setups { format!(" {:>8} {:>10}", "gather", "scaling") } else { String::new() });
    let _ = write!(
        s,
        "{:<w$} {:>8} {:>10} {:>10} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9} {:>8}",
        "", "bodies", "ms", "ms", "ms", "ms", "ms", "ms", "", "%", "", "", "%"
    );
    let _ = writeln!(s, "{}", if setups { format!(" {:>8} {:>10}", "ms", "eff. %") } else { String::new() });
    for (r, label) in rows.iter().zip(&labels) {
        // `draw` simulates nothing: no rate (the JSON keeps its 0).
        let no_rate = r.mode == "draw";
        let _ = write!(
            s,
            "{:<w$} {:>8} {:>10.3} {:>10.3} {:>8} {:>10} {:>8} {:>8} {:>11} {:>9} {:>12} {:>9} {:>8.1}",
            label,
            r.n,
            r.times.frame.median,
            r.times.frame.p99,
            opt(r.times.map.map(|s| s.median), 3),
            opt(r.times.kernel.map(|s| s.median), 3),
            opt(r.times.unmap.map(|s| s.median), 3),
            opt(r.times.draw.map(|s| s.median), 3),
            opt(r.comparison.overhead_us, 1),
            opt(r.comparison.overhead_pct, 1),
            rate_cell(r, no_rate),
            if no_rate { "—".to_string() } else { format!("{:.1}", r.rates.gflops) },
            r.comparison.spread_pct
        );
        let _ = writeln!(
            s,
            "{}",
            if setups {
                format!(" {:>8} {:>10}", opt(r.times.gather.map(|s| s.median), 3), opt(r.comparison.scaling_efficiency.map(|e| e * 100.0), 1))
            } else {
                String::new()
            }
        );
        if r.comparison.diverged {
            let _ = writeln!(s, "{:<w$} {:>8} ↑ diverged: NaN or ∞ in the state; these timings are of non-finite arithmetic", "", "");
        }
    }
    for r in rows.iter().filter(|r| r.cpu.fma_peak_fraction.is_some()) {
        let (c, peak) = (&r.cpu, r.cpu.fma_peak_gflops_per_core.unwrap_or_default());
        let _ = write!(
            s,
            "{} N={}: {} interactions/s per core, {} % of one core's FMA peak ({peak:.1} GFLOP/s measured, {})",
            row_label(r, false),
            r.n,
            opt(c.interactions_per_s_per_core.map(|v| v * 1e-9), 2) + "e9",
            opt(c.fma_peak_fraction.map(|f| f * 100.0), 0),
            c.cpu_isa.as_deref().unwrap_or("?")
        );
        let _ = writeln!(
            s,
            "{}",
            c.fma_peak_fraction_cpuinfo_clock
                .zip(c.cpu_mhz)
                .map_or(String::new(), |(f, mhz)| format!("; {:.0} % of 32 flops a cycle at the cpuinfo clock, {mhz:.0} MHz", f * 100.0))
        );
    }
    if rows.iter().any(|r| r.rates.effective_interactions_per_s.is_some()) {
        let _ = writeln!(
            s,
            "eff.: effective interactions/s, N² over the tree's step time (what the direct sum would need), not a rate of interactions evaluated"
        );
    }
    s
}
