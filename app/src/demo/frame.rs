//! The render step that every frame shares — the demo's (windowed and headless) and the bench's:
//! the bodies drawn into the target from the backend's buffers, then the backend told that the
//! draw was issued ([`crate::backend::SimBackend::after_draw`]). In step mode, while CUDA has the
//! buffers mapped, GL must not touch them: the target is only cleared.

use crate::backend::{SimBackend, SimTimings};
use crate::cuda::density::StreamSpans;
use crate::cuda::settings::{DensityPath, InteropMode, View};
use crate::gfx::clock::GlClock;
use crate::gfx::gl::Gl;
use crate::gfx::renderer::{DrawParams, Renderer};
use crate::gfx::target::RenderTarget;
use crate::trace::{Recorder, Track};

/// The render step for `view`. Points: the bodies of `backend` drawn into `target` (from its own
/// buffers when it has them, [`crate::backend::Shown::buffers`], else the renderer's VBOs at
/// `params.front`) between [`SimBackend::before_draw`] and [`SimBackend::after_draw`], timed by a
/// GL timer query that `wait_timer` reads at once; with `show` false (step mode with the buffers
/// mapped) the target is only cleared; a density view the backend still holds is dropped (its
/// images unregistered, its textures deleted). Density (with `show`): the backend's density pass
/// drawn over `target` ([`crate::backend::CudaSide::draw_density`]). Where the density view
/// cannot be drawn the bodies are drawn instead, and the reason is returned (the caller turns
/// the view off and says why). Points in step mode with the buffers mapped (`show` false): the
/// copy the renderer took before the map ([`Renderer::snapshot`]) where it has one.
#[allow(clippy::too_many_arguments)]
pub fn render_view(
    gl: Gl<'_>,
    renderer: &mut Renderer,
    backend: &mut dyn SimBackend,
    target: &RenderTarget,
    params: &DrawParams<'_>,
    wait_timer: bool,
    show: bool,
    (view, path): (View, DensityPath),
) -> Option<String> {
    if let (false, View::Points, Some((snap, front))) = (show, view, renderer.snapshot()) {
        let p = DrawParams { front, ..*params };
        renderer.draw_from(gl, target, &p, wait_timer, Some(snap));
        return None;
    }
    let reason = match (view, backend.sides().cuda()) {
        (View::Points, cuda) => {
            if let Some(c) = cuda {
                c.drop_density(gl);
            }
            None
        }
        // Step mode draws what GL may draw now (the image, or its snapshot while CUDA has the
        // images mapped) whether or not the buffers are mapped: it touches neither.
        (View::Density, Some(c)) if show || c.step_view().is_some() => match c.draw_density(gl, target, params.view_proj(target.size()), path) {
            Ok(()) => return None,
            Err(e) => Some(format!("density view off: {e:#}")),
        },
        (View::Density, Some(_)) => None,
        (View::Density, None) if !show => None,
        (View::Density, None) => Some("density view off: it is made by CUDA, and this run uses the CPU backend (--backend cuda)".to_string()),
    };
    if show {
        backend.before_draw(gl);
        renderer.draw_from(gl, target, params, wait_timer, backend.shown().buffers);
        backend.after_draw(gl);
    } else {
        target.clear(gl);
    }
    reason
}

/// Puts a frame's GPU work on the timeline (the demo's and the bench's frames): the CUDA stream's
/// spans by interop mode — map, kernel and unmap in `map`; kernel, then copy and upload in
/// `copy`; the kernel alone in `external` (its map and unmap columns are host waits) and
/// `compute` (`mode` `None` with CUDA timings) — placed from `t.stream_start`, and the clock's
/// residual as a counter.
pub fn trace_stream(r: &Recorder, mode: Option<InteropMode>, t: &SimTimings) {
    match mode {
        Some(InteropMode::Map) => r.stream_spans(t.stream_start, &[("map", t.map_ms), ("kernel", t.kernel_ms), ("unmap", t.unmap_ms)]),
        // Copy: the kernel, then the copy and the GL upload, which end as simulate returns.
        Some(InteropMode::Copy) => r.stream_spans(t.stream_start, &[("kernel", t.kernel_ms), ("copy + upload", t.upload_ms)]),
        Some(_) => r.stream_spans(t.stream_start, &[("kernel", t.kernel_ms)]),
        None if t.stream_start.is_some() => r.stream_spans(t.stream_start, &[("kernel", t.kernel_ms)]),
        None => {}
    }
    if let Some(us) = t.clock_residual_us {
        r.clock_residual(us);
    }
}

/// Puts the density view's CUDA work on the CUDA stream's track: a whole pass as map images,
/// splat, store, tone map and unmap images (in step mode the last step's work), placed from
/// `s.start` by the backend's [`crate::cuda::clock::GpuClock`] like the step's spans.
pub fn trace_density(r: &Recorder, s: &StreamSpans) {
    r.stream_spans(s.start, &s.spans);
}

/// Puts the CPU backend's frame on the host row: its step (forces and leapfrog on the rayon
/// pool, `t.kernel_ms`) from `start`, then the upload into the VBO (`t.upload_ms`).
pub fn trace_cpu_step(r: &Recorder, start: std::time::Instant, t: &SimTimings) {
    let Some(step_ms) = t.kernel_ms else { return };
    r.span_at(Track::Host, "CPU step", start, step_ms * 1e3, "forces and leapfrog on the CPU (rayon)");
    if let Some(up) = t.upload_ms {
        let at = start + std::time::Duration::from_secs_f64(step_ms * 1e-3);
        r.span_at(Track::Host, "upload (glBufferSubData)", at, up * 1e3, "the new positions into the VBO GL draws next");
    }
}

/// The GL clock of a traced run and the body draws on it.
#[derive(Debug)]
pub struct GlTrack {
    clock: Option<GlClock>,
}

impl GlTrack {
    /// Turns the renderer's `GL_TIMESTAMP` queries on and reads the GL clock; without them (GLES,
    /// no timer queries) the trace notes that the GL track has no placed draws.
    pub fn start(gl: Gl<'_>, renderer: &mut Renderer, r: &Recorder) -> GlTrack {
        let on = renderer.set_timestamps(gl, true);
        if !on {
            r.note(
                "gl_clock",
                serde_json::json!("no GL_TIMESTAMP queries in this GL (GLES or no timer queries): GL draws are placed at their draw call"),
            );
        }
        GlTrack { clock: on.then(|| GlClock::calibrate(gl)) }
    }

    /// Moves the draws the renderer timed since the last call onto the GL track; `what` names
    /// the buffer drawn.
    pub fn record(&self, renderer: &mut Renderer, r: &Recorder, what: &str) {
        let draws = renderer.take_timed_draws();
        if let Some(c) = &self.clock {
            for d in draws {
                let detail = match d.ms {
                    Some(ms) => format!("{what}, {ms:.3} ms (GL_TIME_ELAPSED)"),
                    None => format!("{what}, no GL time (the driver's interval was bogus)"),
                };
                r.gl_span("draw", c.host_of(d.start_gl_ns), d.ms.unwrap_or(0.0), &detail);
            }
        }
    }

    /// Reads the GL clock again and notes how far it drifted from the host clock over the run;
    /// turns the timestamps off.
    pub fn finish(self, gl: Gl<'_>, renderer: &mut Renderer, r: &Recorder) {
        renderer.set_timestamps(gl, false);
        if let Some(c) = self.clock {
            let end = GlClock::calibrate(gl);
            r.note(
                "gl_clock",
                serde_json::json!({
                    "placement": "GL_TIMESTAMP query before each draw; GL_TIMESTAMP read between two host instants (tightest of 5)",
                    "start_bracket_us": c.bracket_us,
                    "end_bracket_us": end.bracket_us,
                    "drift_over_run_us": c.drift_us(&end),
                }),
            );
        }
    }
}
