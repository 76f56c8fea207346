//! The scene's teaching side: the API trace (`--trace`, the Workflow panel), step mode and the
//! mistake lab run from the overlay ([`crate::trace`], [`crate::backend::step`], [`crate::teach::lab`]).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context as _};

use super::Scene;
use crate::backend::step::FrameStep;
use crate::backend::SimBackend;
use crate::backend::{PositionVbos, SimTimings};
use crate::demo::frame::{trace_density, GlTrack};
use crate::gfx::gl::Gl;
use crate::trace::{Recorder, Span};

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
                self.cupti = crate::trace::cupti::CuptiTrack::start(&r);
            }
        }
        crate::trace::set_active(Some(r.clone()));
        self.trace_file = Some(r.clone());
        self.recorder = Some(r);
        Ok(())
    }

    /// Tracing is on while the Workflow panel is open or with `--trace`, off otherwise (then a
    /// driver call costs one relaxed atomic load more). Installs the recorder on the backend's
    /// table, again whenever the backend was re-made.
    pub(super) fn sync_trace(&mut self) {
        let want = self.trace_file.is_some() || (!self.args.no_overlay && self.overlay.workflow.open);
        let api = self.backend.as_ref().and_then(|b| b.cuda()?.api());
        let addr = api.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize);
        match (want, &self.recorder) {
            (true, Some(r)) if addr != self.traced_api => {
                if let Some(a) = &api {
                    r.install(a);
                }
                self.traced_api = addr;
            }
            (true, None) => {
                let r = Recorder::new();
                if let Some(a) = &api {
                    r.install(a);
                }
                crate::trace::set_active(Some(r.clone()));
                self.recorder = Some(r);
                self.traced_api = addr;
            }
            (false, Some(_)) => {
                if let Some(a) = &api {
                    a.set_tracer(None);
                }
                crate::trace::set_active(None);
                self.recorder = None;
                self.traced_api = 0;
            }
            _ => {}
        }
    }

    /// The GL track follows the recorder: `GL_TIMESTAMP` queries and the GL clock while it is
    /// on (the drift is measured when it goes off).
    pub(super) fn sync_gl_track(&mut self) {
        match (&self.recorder, self.gl_track.is_some()) {
            (Some(r), false) => self.gl_track = Some(GlTrack::start(self.current.gl(), &mut self.renderer, r)),
            (None, true) => {
                if let Some(t) = self.gl_track.take() {
                    t.finish(self.current.gl(), &mut self.renderer, &Recorder::new());
                }
            }
            _ => {}
        }
    }

    /// What the timeline panel shows next: the frame's spans; in step mode they are added to
    /// those of the workflow frame so far, which starts again at its map.
    pub(super) fn collect_timeline(&mut self, spans: Vec<Span>) {
        let stepping = self.overlay.workflow.step_mode;
        let stepped = self.stepped.take();
        if stepping && stepped.is_none() {
            // Waiting for "next step": the frame only redrew; the timeline keeps the steps so far.
            return;
        }
        // The frame's map starts it again (not the density view's map of its images, which
        // follows the buffers' steps in the same frame).
        let restart = !stepping || stepped == Some(FrameStep::Map);
        if restart {
            self.timeline_spans.clear();
        }
        self.timeline_spans.extend(spans);
        let over = self.timeline_spans.len().saturating_sub(crate::trace::MAX_CALLS_PER_FRAME);
        self.timeline_spans.drain(..over);
    }

    /// Stops tracing and flushes the `--trace` file (after the backend's teardown).
    pub(super) fn stop_trace(&mut self) {
        crate::trace::set_active(None);
        if let (Some(t), Some(r)) = (self.gl_track.take(), self.recorder.as_ref()) {
            t.finish(self.current.gl(), &mut self.renderer, r);
        }
        if let (Some(mut c), Some(r)) = (self.cupti.take(), self.trace_file.as_ref()) {
            c.finish(r);
        }
        self.recorder = None;
        if let Some(r) = self.trace_file.take() {
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
        if let (Some(r), Some(c)) = (&self.recorder, self.backend.as_deref_mut().and_then(SimBackend::cuda_mut)) {
            if let Some(spans) = c.take_density_spans() {
                trace_density(r, &spans);
            }
        }
        if let (Some(r), Some(i)) = (&self.recorder, shown) {
            let buffer = self.renderer.vbos().buffers[i.min(1)].0.get();
            r.gl_draw(self.renderer.draw_ms(), t0.elapsed().as_secs_f64() * 1e6, buffer);
            if let Some(g) = &self.gl_track {
                // Headless runs read the draw's queries at once; a window reads them one or more
                // frames later, so the draws placed now are earlier frames' (at their own GL times).
                let what = if self.args.headless { format!("vbo {buffer}") } else { "an earlier frame's body draw".to_string() };
                g.record(&mut self.renderer, r, &what);
            }
        }
    }

    /// Turns the backend's step mode on or off; the overlay shows why it cannot.
    pub(super) fn set_step_mode(&mut self, on: bool) {
        let r = match self.backend.as_mut().map(|b| b.cuda_mut()) {
            Some(Some(c)) => c.set_step_mode(on),
            Some(None) => Err(anyhow!("step mode needs CUDA: {}", crate::backend::STEP_MODE_NEEDS_CUDA)),
            None => Err(anyhow!("no simulation backend")),
        };
        match r {
            Ok(()) => self.overlay.workflow.step_mode = on,
            Err(e) => {
                // The backends' reasons mostly name step mode already.
                let e = format!("{e:#}");
                let msg = if e.starts_with("step mode") { e } else { format!("step mode: {e}") };
                tracing::warn!("{msg}");
                self.overlay.workflow.step_mode = false;
                self.overlay.set_message(Some(msg));
            }
        }
    }

    /// `simulate`, or in step mode the next step of the frame when one was asked for (headless
    /// `--step-mode` runs take one step every frame).
    pub(super) fn simulate_or_step(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        let per_frame = self.overlay.controls.steps_per_frame.max(1);
        let auto = self.args.headless && self.args.step_mode;
        let next = std::mem::take(&mut self.step_next) || auto;
        self.stepped = None;
        let step_view = |b: &dyn SimBackend| b.cuda().and_then(|c| c.step_view());
        if self.overlay.workflow.step_mode && step_view(self.backend()?.as_ref()).is_none() {
            // The backend was re-made (new settings): step mode again, if it still can.
            self.set_step_mode(true);
        }
        if step_view(self.backend()?.as_ref()).is_none() {
            return self.simulate_parts(gl, vbos, steps);
        }
        let backend = self.backend()?;
        let mut t = SimTimings::default();
        if next {
            let want = step_view(backend.as_ref()).map(|v| v.next);
            if want == Some(FrameStep::Map) {
                // GL's last look at the buffers before CUDA takes them: keep a copy to show.
                let front = backend.front();
                if let Err(e) = self.renderer.take_snapshot(gl, front) {
                    tracing::warn!("step mode snapshot: {e:#}");
                }
            }
            let cuda = self.backend()?.cuda_mut().context("step mode without a CUDA backend")?;
            let t0 = Instant::now();
            let r = cuda.next_step(gl, vbos, per_frame);
            self.stepped = want;
            t.host_ms = t0.elapsed().as_secs_f64() * 1e3;
            match r {
                Ok(step) => tracing::debug!(?step, frame = self.frame, "step mode"),
                Err(e) if auto => return Err(e.context("step mode")),
                Err(e) => self.overlay.set_message(Some(format!("step failed: {e:#}"))),
            }
        }
        Ok(t)
    }

    /// The buffer GL may draw now: the backend's front, or in step mode the one the state
    /// machine allows (`None` while the buffers are mapped).
    pub(super) fn shown_front(&mut self) -> anyhow::Result<Option<usize>> {
        let b = self.backend()?;
        Ok(match b.cuda().and_then(|c| c.step_view()) {
            Some(v) => v.display_front,
            None => Some(b.front()),
        })
    }

    /// Runs a mistake-lab case against the live contexts, on scratch resources.
    pub(super) fn run_lab(&mut self, name: &str) {
        let ctx = self.backend.as_ref().and_then(|b| b.cuda()?.cuda_context());
        let o = crate::teach::lab::run_live(name, self.current.gl(), ctx.as_ref());
        tracing::info!(case = %o.case, got = %o.got_summary(), ok = o.ok, "mistake lab");
        self.overlay.workflow.lab.push(o);
    }
}
