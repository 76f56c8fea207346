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
use crate::trace::clock::{calibrate, signed_us};

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
        let (host, gl_ns, bracket_us) = calibrate(|| gl.timestamp_ns());
        GlClock { host, gl_ns, bracket_us }
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
