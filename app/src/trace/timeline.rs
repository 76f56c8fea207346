//! `--timeline PATH.json`: the recorder's second writer, a trace in the Trace Event Format (the
//! JSON that ui.perfetto.dev and `chrome://tracing` open; Google's "Trace Event Format" document).
//!
//! One process, four tracks (threads): `frames` (one span per frame), `host` (every traced driver
//! call and the GL draw call, with its result), `CUDA stream` (map, kernel and unmap of each frame
//! from the CUDA events around them) and `GL` (the body draw from its timer query); counters for
//! the frame time and interactions/s.
//!
//! # Clocks
//! Host spans are measured on the host clock (`Instant`, µs since the recorder was made): a call
//! ends when the tracer sees it and started `host_us` earlier. The GPU gives durations only
//! (CUDA events, GL timer queries), so GPU spans are placed on the host clock: the CUDA spans of a
//! frame end back to back at the moment the frame's simulate returned, which waited for the last
//! event (the host learns of the GPU's end up to one wake-up later: on the H200 the gap between an
//! event's completion and the host's return from `cuEventSynchronize` was 2–10 µs, `switch`);
//! the GL draw starts when its draw call was issued (a lower bound: GL runs it later). So the GPU
//! spans are right in length and order, and shifted against the host spans by at most the
//! wake-up (CUDA) or the submission delay (GL). `otherData` in the file says so.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use serde_json::{json, Value};

/// Track (thread) ids of the timeline.
const TID_FRAMES: u32 = 0;
const TID_HOST: u32 = 1;
const TID_CUDA: u32 = 2;
const TID_GL: u32 = 3;

/// The events of a run, written at the end.
#[derive(Debug)]
pub struct Timeline {
    path: PathBuf,
    epoch: Instant,
    events: Vec<Value>,
    frame: Option<(u64, f64)>,
}

impl Timeline {
    /// A timeline to be written to `path`, with time 0 at `epoch`.
    pub fn new(path: &Path, epoch: Instant) -> Timeline {
        Timeline { path: path.to_path_buf(), epoch, events: Vec::new(), frame: None }
    }

    /// µs since the epoch, now.
    pub fn now_us(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1e6
    }

    fn span(&mut self, tid: u32, name: &str, cat: &str, ts: f64, dur: f64, args: Value) {
        self.events.push(json!({ "name": name, "cat": cat, "ph": "X", "pid": 1, "tid": tid, "ts": ts.max(0.0), "dur": dur.max(0.0), "args": args }));
    }

    /// A host call that just returned (`now`), `host_us` long.
    pub fn call(&mut self, name: &str, host_us: f64, args: Value) {
        let end = self.now_us();
        self.span(TID_HOST, name, "host", end - host_us, host_us, args);
    }

    /// Frame `frame` begins now.
    pub fn begin_frame(&mut self, frame: u64) {
        let t = self.now_us();
        self.frame = Some((frame, t));
        self.events.push(json!({ "name": format!("frame {frame}"), "cat": "frame", "ph": "i", "s": "g", "pid": 1, "tid": TID_FRAMES, "ts": t }));
    }

    /// The current frame ends now.
    pub fn end_frame(&mut self) {
        if let Some((frame, t0)) = self.frame.take() {
            let t1 = self.now_us();
            self.span(TID_FRAMES, &format!("frame {frame}"), "frame", t0, t1 - t0, json!({ "frame": frame }));
        }
    }

    /// GPU spans of the frame's stream, back to back, the last ending now (see the module docs).
    /// `spans`: (name, ms); `None` durations are left out.
    pub fn stream_spans(&mut self, spans: &[(&str, Option<f64>)]) {
        let end = self.now_us();
        let total: f64 = spans.iter().filter_map(|s| s.1).map(|ms| ms * 1e3).sum();
        let mut t = end - total;
        for (name, ms) in spans {
            if let Some(ms) = ms {
                let d = ms * 1e3;
                self.span(TID_CUDA, name, "cuda", t, d, json!({ "gpu_ms": ms }));
                t += d;
            }
        }
    }

    /// The body draw: issued at `start_us` (host), GL time `gpu_ms` from its timer query.
    pub fn gl_draw(&mut self, start_us: f64, gpu_ms: Option<f64>, buffer: u32) {
        let args = json!({ "vbo": buffer, "gpu_ms": gpu_ms });
        self.span(TID_GL, "draw", "gl", start_us, gpu_ms.map_or(0.0, |ms| ms * 1e3), args);
    }

    /// A counter sample now.
    pub fn counter(&mut self, name: &str, value: f64) {
        let t = self.now_us();
        self.events.push(json!({ "name": name, "ph": "C", "pid": 1, "tid": TID_FRAMES, "ts": t, "args": { name: value } }));
    }

    /// Writes the file (thread names first, then the events in the order they happened).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self) -> anyhow::Result<()> {
        let mut all: Vec<Value> = [(TID_FRAMES, "frames"), (TID_HOST, "host"), (TID_CUDA, "CUDA stream"), (TID_GL, "GL")]
            .iter()
            .map(|(tid, name)| json!({ "name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "ts": 0, "args": { "name": name } }))
            .collect();
        all.push(json!({ "name": "process_name", "ph": "M", "pid": 1, "tid": 0, "ts": 0, "args": { "name": "nbody-interop" } }));
        all.extend(self.events.iter().cloned());
        let doc = json!({
            "traceEvents": all,
            "displayTimeUnit": "ms",
            "otherData": {
                "clock": "host Instant, µs since the recorder was made",
                "gpu_alignment": "GPU durations placed on the host clock: CUDA spans end when the frame's event wait returned (late by one wake-up), GL draws start at their draw call (a lower bound)",
            }
        });
        let text = serde_json::to_string(&doc).context("encoding the timeline")?;
        std::fs::write(&self.path, text).with_context(|| format!("writing --timeline {}", self.path.display()))
    }
}
