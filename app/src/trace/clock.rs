//! The host clock, for placing GPU times on it: signed differences of [`Instant`]s, and reading
//! another clock between two host instants ([`calibrate`]). Used by the CUDA, GL and CUPTI
//! placements of the timeline (`cuda::clock`, `gfx::clock`, [`super::cupti`]).

use std::time::Instant;

/// `a − b` in µs, negative when `a` is earlier.
pub fn signed_us(a: Instant, b: Instant) -> f64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_secs_f64() * 1e6,
        None => -(b.duration_since(a).as_secs_f64() * 1e6),
    }
}

/// Reads another clock with `read` between two host instants, 5 times, and keeps the tightest:
/// (the bracket's middle, the value read, the bracket's width in µs). Placing the value at the
/// middle errs by at most half the width.
pub fn calibrate<T>(mut read: impl FnMut() -> T) -> (Instant, T, f64) {
    let a = Instant::now();
    let v = read();
    let b = Instant::now();
    let mut best = (a + (b - a) / 2, v, (b - a).as_secs_f64() * 1e6);
    for _ in 0..4 {
        let a = Instant::now();
        let v = read();
        let b = Instant::now();
        let w = (b - a).as_secs_f64() * 1e6;
        if w < best.2 {
            best = (a + (b - a) / 2, v, w);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn signed_differences_and_a_calibration_of_the_host_clock_itself() {
        let t = Instant::now();
        let later = t + Duration::from_micros(250);
        assert!((signed_us(later, t) - 250.0).abs() < 1e-6);
        assert!((signed_us(t, later) + 250.0).abs() < 1e-6);
        let (mid, read, width) = calibrate(Instant::now);
        assert!(width >= 0.0 && signed_us(read, mid).abs() <= width / 2.0 + 1e-3);
    }
}
