//! GPU timing of the body draw: GL timer queries (`GL_TIME_ELAPSED`, `GL_TIMESTAMP`) in a small
//! ring, read a few frames later without stalling the pipeline.

use std::collections::VecDeque;

use super::gl::Gl;
use super::GlInfo;

/// A finished body draw: its start on the GL clock (a `GL_TIMESTAMP` query put right before
/// it) and its GL time (`GL_TIME_ELAPSED`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedDraw {
    /// GL time (ns) when the commands before the draw were done: the draw's earliest start.
    pub start_gl_ns: i64,
    /// GL time of the draw, ms; `None` where the driver gave a bogus interval (llvmpipe's first).
    pub ms: Option<f64>,
}

/// What timed the body draw ([`DrawTime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrawClock {
    /// A GL timer query (`GL_TIME_ELAPSED`): GL's own time of the draw.
    #[default]
    GlTimer,
    /// The host (CPU) time of issuing the draw calls: this GL gives no timer query.
    HostCalls,
}

/// The body draw's time, ms, and what measured it ([`super::renderer::Renderer::draw_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DrawTime {
    /// What measured `ms`.
    pub clock: DrawClock,
    /// The newest draw's time, ms; `None` while none was measured.
    pub ms: Option<f64>,
}

/// GL timer queries (`GL_TIME_ELAPSED`) in a small ring, read without stalling; with
/// timestamps on ([`super::renderer::Renderer::set_timestamps`], desktop GL), a `GL_TIMESTAMP` query before each.
#[derive(Debug)]
pub(super) struct GpuTimer {
    pub(super) free: Vec<glow::NativeQuery>,
    pub(super) in_flight: VecDeque<(glow::NativeQuery, Option<glow::NativeQuery>)>,
    pub(super) active: Option<(glow::NativeQuery, Option<glow::NativeQuery>)>,
    /// Queries for the `GL_TIMESTAMP`s (made when timestamps are turned on).
    pub(super) free_stamps: Vec<glow::NativeQuery>,
    pub(super) stamps: bool,
    /// Draws read since the last [`super::renderer::Renderer::take_timed_draws`] (timestamps on only).
    pub(super) finished: Vec<TimedDraw>,
    pub(super) is_gles: bool,
    pub(super) last_ms: Option<f64>,
}

impl GpuTimer {
    pub(super) fn new(gl: &Gl<'_>, info: &GlInfo) -> Self {
        let mut free = Vec::new();
        if info.timer_query {
            for _ in 0..4 {
                match gl.create_query() {
                    Ok(q) => free.push(q),
                    Err(e) => tracing::debug!(error = %e, "glGenQueries failed; no GL draw times"),
                }
            }
        }
        let is_gles = info.is_gles;
        Self { free, in_flight: VecDeque::new(), active: None, free_stamps: Vec::new(), stamps: false, finished: Vec::new(), is_gles, last_ms: None }
    }

    /// Whether this GL gave timer queries (the draw is timed by GL, not by the host).
    pub(super) fn available(&self) -> bool {
        !self.free.is_empty() || !self.in_flight.is_empty() || self.active.is_some()
    }

    /// Timestamps on (desktop GL with timer queries only; `false` when this GL cannot).
    pub(super) fn set_stamps(&mut self, gl: &Gl<'_>, on: bool) -> bool {
        let has_queries = !self.free.is_empty() || !self.in_flight.is_empty();
        let can = !self.is_gles && has_queries;
        self.stamps = on && can;
        let stamps_made = self.free_stamps.len() + self.in_flight.iter().filter(|(_, t)| t.is_some()).count();
        if self.stamps && stamps_made == 0 {
            for _ in 0..4 {
                if let Ok(q) = gl.create_query() {
                    self.free_stamps.push(q);
                }
            }
        }
        if !self.stamps {
            self.finished.clear();
        }
        self.stamps
    }

    pub(super) fn begin(&mut self, gl: &Gl<'_>) {
        // Only built with queries when GlInfo::timer_query says GL_TIME_ELAPSED works.
        if let Some(q) = self.free.pop() {
            let stamp = if self.stamps { self.free_stamps.pop() } else { None };
            if let Some(t) = stamp {
                gl.query_counter(t, glow::TIMESTAMP);
            }
            gl.begin_query(glow::TIME_ELAPSED, q);
            self.active = Some((q, stamp));
        }
    }

    pub(super) fn end(&mut self, gl: &Gl<'_>) {
        if let Some(q) = self.active.take() {
            gl.end_query(glow::TIME_ELAPSED);
            self.in_flight.push_back(q);
        }
    }

    /// Read finished queries, oldest first; with `wait`, block on all of them (headless).
    pub(super) fn poll(&mut self, gl: &Gl<'_>, wait: bool) {
        if self.is_gles && !self.in_flight.is_empty() && gl.gpu_disjoint() {
            // Results of the queries in flight are meaningless; recycle them unread.
            self.free.extend(self.in_flight.drain(..).map(|(q, _)| q));
            return;
        }
        while let Some(&(q, stamp)) = self.in_flight.front() {
            let ready = |query: glow::NativeQuery| gl.get_query_parameter_u32(query, glow::QUERY_RESULT_AVAILABLE) != 0;
            let available = wait || (ready(q) && stamp.is_none_or(ready));
            if !available {
                break;
            }
            // Waits for the results when `wait`; else both are available.
            let ns = gl.get_query_parameter_u64(q, glow::QUERY_RESULT);
            let ms = ns as f64 * 1e-6;
            // Some drivers (llvmpipe) report a bogus first interval; a draw never takes 10 s.
            if ms < 1e4 {
                self.last_ms = Some(ms);
            }
            if let Some(t) = stamp {
                let start = gl.get_query_parameter_u64(t, glow::QUERY_RESULT);
                if self.stamps {
                    self.finished.push(TimedDraw { start_gl_ns: start as i64, ms: (ms < 1e4).then_some(ms) });
                }
                self.free_stamps.push(t);
            }
            self.in_flight.pop_front();
            self.free.push(q);
        }
    }

    pub(super) fn destroy(&mut self, gl: &Gl<'_>) {
        let pairs = self.in_flight.drain(..).chain(self.active.take());
        let all: Vec<glow::NativeQuery> =
            pairs.flat_map(|(q, t)| std::iter::once(q).chain(t)).chain(self.free.drain(..)).chain(self.free_stamps.drain(..)).collect();
        for q in all {
            gl.delete_query(q);
        }
    }
}
