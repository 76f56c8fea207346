//! Telemetry, the frame's fourth owner: the API trace (`--trace`, the Workflow panel), the GL
//! track, CUPTI's records (`--timeline`), the timeline panel's spans, the stage times of
//! `--summary` and the lines for stdout ([`crate::trace`]).

use std::sync::Arc;
use std::time::Instant;

use super::Scene;
use crate::backend::step::WorkflowStep;
use crate::backend::SimTimings;
use crate::demo::frame::{trace_cpu_step, trace_density, trace_stream, GlTrack};
use crate::demo::summary::StageLog;
use crate::trace::{Recorder, Span};

/// What the frame records about itself.
#[derive(Default)]
pub(super) struct Telemetry {
    /// The API trace while it is on (Workflow panel open, or `--trace`); see [`crate::trace`].
    pub(super) recorder: Option<Recorder>,
    /// The `--trace` recorder, kept for the whole run.
    pub(super) trace_file: Option<Recorder>,
    /// The GL clock and timestamp queries while the recorder is on (the GL track).
    pub(super) gl_track: Option<GlTrack>,
    /// CUPTI's activity records for `--timeline` (where CUPTI loads).
    pub(super) cupti: Option<crate::trace::cupti::CuptiTrack>,
    /// What the overlay's timeline panel shows: the last frame's spans, or in step mode the
    /// spans of the workflow frame so far (one step more each time).
    pub(super) timeline_spans: Vec<Span>,
    /// Address of the table the recorder was last installed on (0: none).
    pub(super) traced_api: usize,
    /// Every frame's stage times, for `--summary`.
    pub(super) stages: StageLog,
    /// Lines for stdout (diagnostics) made during the last frame; the loop prints them after it.
    pub(super) reports: Vec<String>,
}

impl Scene {
    /// `--trace PATH`: a recorder writing every call, active before the backend is made.
    pub(super) fn start_trace_file(&mut self) -> anyhow::Result<()> {
        if self.args.trace.is_none() && self.args.timeline.is_none() {
            return Ok(());
        }
        let mut r = match &self.args.trace {
            Some(path) => {
                tracing::info!(path = %path.display(), "tracing every driver call (one JSON object per line)");
                Recorder::to_file(path)?
            }
            None => Recorder::new(),
        };
        if let Some(path) = &self.args.timeline {
            tracing::info!(path = %path.display(), "writing a timeline (Trace Event Format)");
            r = r.with_timeline(path);
            if self.args.backend == crate::backend::select::BackendChoice::Cpu {
                r.note("cupti", serde_json::json!("not loaded: the CPU backend makes no GPU work"));
            } else if !crate::backend::select::driver_library_loads() {
                r.note("cupti", serde_json::json!("not loaded: no CUDA driver here (the CPU backend makes no GPU work)"));
            } else {
                self.telemetry.cupti = crate::trace::cupti::CuptiTrack::start(&r);
            }
        }
        crate::trace::set_active(Some(r.clone()));
        self.telemetry.trace_file = Some(r.clone());
        self.telemetry.recorder = Some(r);
        Ok(())
    }

    /// Tracing is on while the Workflow panel is open or with `--trace`, off otherwise (then a
    /// driver call costs one relaxed atomic load more). Installs the recorder on the backend's
    /// table, again whenever the backend was re-made.
    pub(super) fn sync_trace(&mut self) {
        let want = self.telemetry.trace_file.is_some() || (!self.args.no_overlay && self.hud.overlay.workflow.open);
        let api = self.sim.backend.as_mut().and_then(|b| b.sides().cuda()?.api());
        let addr = api.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize);
        match (want, &self.telemetry.recorder) {
            (true, Some(r)) if addr != self.telemetry.traced_api => {
                if let Some(a) = &api {
                    r.install(a);
                }
                self.telemetry.traced_api = addr;
            }
            (true, None) => {
                let r = Recorder::new();
                if let Some(a) = &api {
                    r.install(a);
                }
                crate::trace::set_active(Some(r.clone()));
                self.telemetry.recorder = Some(r);
                self.telemetry.traced_api = addr;
            }
            (false, Some(_)) => {
                if let Some(a) = &api {
                    a.set_tracer(None);
                }
                crate::trace::set_active(None);
                self.telemetry.recorder = None;
                self.telemetry.traced_api = 0;
            }
            _ => {}
        }
    }

    /// The GL track follows the recorder: `GL_TIMESTAMP` queries and the GL clock while it is
    /// on (the drift is measured when it goes off).
    pub(super) fn sync_gl_track(&mut self) {
        match (&self.telemetry.recorder, self.telemetry.gl_track.is_some()) {
            (Some(r), false) => self.telemetry.gl_track = Some(GlTrack::start(self.current.gl(), &mut self.view.renderer, r)),
            (None, true) => {
                if let Some(t) = self.telemetry.gl_track.take() {
                    t.finish(self.current.gl(), &mut self.view.renderer, &Recorder::new());
                }
            }
            _ => {}
        }
    }

    /// What the timeline panel shows next: the frame's spans; in step mode they are added to
    /// those of the workflow frame so far, which starts again at its map.
    pub(super) fn collect_timeline(&mut self, spans: Vec<Span>) {
        let stepping = self.hud.overlay.workflow.step_mode;
        let stepped = self.sim.stepped.take();
        if stepping && stepped.is_none() {
            // Waiting for "next step": the frame only redrew; the timeline keeps the steps so far.
            return;
        }
        // The frame's map starts it again (not the density view's map of its images, which
        // follows the buffers' steps in the same frame).
        let restart = !stepping || stepped == Some(WorkflowStep::Map);
        if restart {
            self.telemetry.timeline_spans.clear();
        }
        self.telemetry.timeline_spans.extend(spans);
        let over = self.telemetry.timeline_spans.len().saturating_sub(crate::trace::MAX_CALLS_PER_FRAME);
        self.telemetry.timeline_spans.drain(..over);
    }

    /// Stops tracing and flushes the `--trace` file (after the backend's teardown).
    pub(super) fn stop_trace(&mut self) {
        crate::trace::set_active(None);
        if let (Some(t), Some(r)) = (self.telemetry.gl_track.take(), self.telemetry.recorder.as_ref()) {
            t.finish(self.current.gl(), &mut self.view.renderer, r);
        }
        if let (Some(mut c), Some(r)) = (self.telemetry.cupti.take(), self.telemetry.trace_file.as_ref()) {
            c.finish(r);
        }
        self.telemetry.recorder = None;
        if let Some(r) = self.telemetry.trace_file.take() {
            match r.finish() {
                Ok(()) if self.args.trace.is_some() => tracing::info!(calls = r.count(), "trace written"),
                Ok(()) => tracing::info!("timeline written"),
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
    }

    /// Adds the GL draw (with the renderer's timer-query time) to the trace, the draws whose
    /// GL timestamps came back to the GL track, and the density view's CUDA work to the CUDA
    /// stream's track.
    pub(super) fn trace_draw(&mut self, t0: Instant, shown: Option<usize>) {
        if let (Some(r), Some(c)) = (&self.telemetry.recorder, self.sim.backend.as_deref_mut().and_then(|b| b.sides().cuda())) {
            if let Some(spans) = c.take_density_spans() {
                trace_density(r, &spans);
            }
        }
        if let (Some(r), Some(i)) = (&self.telemetry.recorder, shown) {
            let buffer = self.view.renderer.vbos().buffers[i.min(1)].0.get();
            r.gl_draw(self.view.renderer.draw_ms(), t0.elapsed().as_secs_f64() * 1e6, buffer);
            if let Some(g) = &self.telemetry.gl_track {
                // Headless runs read the draw's queries at once; a window reads them one or more
                // frames later, so the draws placed now are earlier frames' (at their own GL times).
                let what = if self.args.headless { format!("vbo {buffer}") } else { "an earlier frame's body draw".to_string() };
                g.record(&mut self.view.renderer, r, &what);
            }
        }
    }

    /// The frame's simulate step on the trace: the CUDA stream's spans, or the CPU backend's
    /// step and upload on the host row (no stream).
    pub(super) fn trace_simulate(&mut self, t_sim: Instant, timings: &SimTimings) {
        let Some(r) = &self.telemetry.recorder else { return };
        let Some(b) = self.sim.backend.as_deref_mut() else { return };
        let cuda = b.sides().cuda();
        let cpu = cuda.is_none();
        let mode = cuda.and_then(|c| c.settings()).map(|s| s.interop);
        trace_stream(r, mode, timings);
        if cpu {
            trace_cpu_step(r, t_sim, timings);
        }
    }

    /// The frame-time and interaction-rate counters on the trace.
    pub(super) fn trace_counters(&self, timings: &SimTimings, steps: u32, host_frame_ms: f64) {
        let Some(r) = &self.telemetry.recorder else { return };
        let Some(b) = self.sim.backend.as_deref() else { return };
        if self.frame > 0 {
            r.counter("frame ms", host_frame_ms);
        }
        if let Some(t) = timings.kernel_ms.filter(|&t| t > 0.0 && steps > 0 && timings.parts.is_none()) {
            let info = b.describe();
            let tree = matches!(info.solver, sim::tree::Solver::Tree { .. });
            let name = if tree { "effective interactions/s" } else { "interactions/s" };
            r.counter(name, sim::interactions(info.n, steps) / (t * 1e-3));
        }
    }

    /// The frame's end on the trace: CUPTI's records every 256 frames, the recorder's frame
    /// closed, and the timeline panel's spans collected.
    pub(super) fn trace_end_frame(&mut self) {
        if let Some(r) = self.telemetry.recorder.clone() {
            if let Some(c) = self.telemetry.cupti.as_mut().filter(|_| self.frame % 256 == 255) {
                c.flush_into(&r);
            }
            r.end_frame();
            self.collect_timeline(r.last_spans());
        }
    }
}
