//! GL time on the host clock, for the timeline's GL track.
//!
//! A `glQueryCounter(…, GL_TIMESTAMP)` query records the GL time (ns) at which the commands
//! before it were done; `glGet(GL_TIMESTAMP)` reads the GL time now. A [`GlClock`] reads
//! `GL_TIMESTAMP` between two host [`Instant`]s a few times and keeps the tightest pair: GL's
//! time `g` was read somewhere inside the host bracket, so placing `g` at the bracket's middle
//! errs by at most half its width ([`GlClock::bracket_us`]). Calibrating again at the end of a run
//! measures the drift between the two clocks over it ([`GlClock::drift_us`]).

use std::time::{Duration, Instant};

use super::gl::Gl;

/// Host and GL times read together.
#[derive(Debug, Clone, Copy)]
pub struct GlClock {
    host: Instant,
    gl_ns: i64,
    /// Width of the host bracket around the GL read, µs (the placement errs by at most half).
    pub bracket_us: f64,
}

impl GlClock {
    /// Reads the two clocks (the tightest of 5 brackets). Needs desktop GL with timer queries
    /// (`GlInfo::timer_query` and not GLES); the caller checks.
    pub fn calibrate(gl: Gl<'_>) -> GlClock {
        let mut best: Option<GlClock> = None;
        for _ in 0..5 {
            let a = Instant::now();
            let g = gl.timestamp_ns();
            let b = Instant::now();
            let width = b - a;
            let c = GlClock { host: a + width / 2, gl_ns: g, bracket_us: width.as_secs_f64() * 1e6 };
            if best.is_none_or(|x| c.bracket_us < x.bracket_us) {
                best = Some(c);
            }
        }
        best.unwrap_or(GlClock { host: Instant::now(), gl_ns: gl.timestamp_ns(), bracket_us: f64::INFINITY })
    }

    /// The host instant of GL time `gl_ns`.
    pub fn host_of(&self, gl_ns: i64) -> Instant {
        let d = gl_ns - self.gl_ns;
        let delta = Duration::from_nanos(d.unsigned_abs());
        if d >= 0 {
            self.host + delta
        } else {
            self.host.checked_sub(delta).unwrap_or(self.host)
        }
    }

    /// How far `later`'s reading disagrees with this one's prediction, µs: the drift between
    /// the GL and host clocks from this calibration to `later` (± the two half brackets).
    pub fn drift_us(&self, later: &GlClock) -> f64 {
        signed_us(later.host, self.host_of(later.gl_ns))
    }
}

/// `a − b` in µs, negative when `a` is earlier.
pub fn signed_us(a: Instant, b: Instant) -> f64 {
    match a.checked_duration_since(b) {
        Some(d) => d.as_secs_f64() * 1e6,
        None => -(b.duration_since(a).as_secs_f64() * 1e6),
    }
}
