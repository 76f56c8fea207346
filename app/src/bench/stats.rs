//! Order statistics of per-frame samples (ms): median, p95, p99, max.
//!
//! Percentiles interpolate linearly between the two nearest ranks (`q · (n − 1)`, the "type 7"
//! rule of R and NumPy's default), so the median of an even count is the mean of the middle pair.

use serde::Serialize;

/// Median, 95th and 99th percentile and maximum of a sample, in the sample's unit (ms here).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// 50th percentile.
    pub median: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summary of `values`; `None` when there are no finite values (non-finite ones are ignored).
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Summary { median: percentile_sorted(&v, 0.50), p95: percentile_sorted(&v, 0.95), p99: percentile_sorted(&v, 0.99), max: v[v.len() - 1] })
    }
}

/// The `q`-quantile (0 ≤ q ≤ 1) of an ascending, non-empty slice, interpolating between ranks.
fn percentile_sorted(v: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    v[lo] + (v[hi] - v[lo]) * frac
}

/// max − min of the finite `values` (0 when there are none): the spread of per-round medians.
pub fn spread(values: &[f64]) -> f64 {
    let mut finite = values.iter().copied().filter(|x| x.is_finite());
    let Some(first) = finite.next() else { return 0.0 };
    let (lo, hi) = finite.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)));
    hi - lo
}

/// Median of `values` (`None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    Summary::of(values).map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.median, 50.5);
        assert!((s.p95 - 95.05).abs() < 1e-9);
        assert!((s.p99 - 99.01).abs() < 1e-9);
        assert_eq!(s.max, 100.0);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(Summary::of(&[f64::NAN, 4.0]).unwrap().max, 4.0);
        assert_eq!(spread(&[3.0, f64::NAN, 1.0, 2.5]), 2.0);
        assert_eq!(spread(&[7.0]), 0.0);
        assert_eq!(spread(&[]), 0.0);
    }
}
