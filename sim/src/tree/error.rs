//! Force-error statistics: per-body relative acceleration errors against a reference, and their
//! median, 99th percentile and maximum.

use serde::Serialize;

/// Per-body relative errors `|a − a_ref| / |a_ref|` (f64 norms) of `approx` (`[N][3]` f32)
/// against `exact` (`[N][3]` f64), pairwise up to the shorter length. Bodies with `|a_ref| = 0`
/// (where a relative error has no meaning) are left out.
pub fn relative_errors(approx: &[[f32; 3]], exact: &[[f64; 3]]) -> Vec<f64> {
    approx
        .iter()
        .zip(exact)
        .filter_map(|(a, e)| {
            let norm = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]).sqrt();
            let d = [0, 1, 2].map(|k| f64::from(a[k]) - e[k]);
            (norm > 0.0).then(|| (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt() / norm)
        })
        .collect()
}

/// Median, 99th percentile and maximum of a set of relative errors (dimensionless).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct ErrorStats {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The 99th percentile: the value at rank `ceil(0.99 n)` of the sorted errors (nearest rank).
    pub p99: f64,
    /// The largest error.
    pub max: f64,
}

impl ErrorStats {
    /// The statistics of `errors`; `None` when it is empty. NaN errors sort last (they are the
    /// maximum).
    pub fn of(errors: &[f64]) -> Option<Self> {
        if errors.is_empty() {
            return None;
        }
        let mut e = errors.to_vec();
        e.sort_by(f64::total_cmp);
        let n = e.len();
        let median = if n % 2 == 1 { e[n / 2] } else { 0.5 * (e[n / 2 - 1] + e[n / 2]) };
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        Some(Self { median, p99: e[rank - 1], max: e[n - 1] })
    }
}
