//! `--timeline PATH.json`: the recorder's second writer, a trace in the Trace Event Format (the
//! JSON that ui.perfetto.dev and `chrome://tracing` open; Google's "Trace Event Format" document).
//!
//! One process, five tracks (threads): `frames` (one span per frame), `host` (every traced driver
//! call and the GL draw call, with its result), `CUDA stream` (map, kernel and unmap of each frame
//! from the CUDA events around them), `GL` (the body draw from its timer queries) and, where
//! CUPTI was loaded, `CUPTI (GPU)` (its kernel and memcpy activity records); counters for the
//! frame time, interactions/s and the clock alignment. The writer takes the recorder's
//! [`Span`]s, the same ones the overlay's timeline panel draws.
//!
//! # Clocks
//! Everything is on the host clock (`Instant`, µs since the recorder was made). Host calls are
//! measured there. The GPU's times are placed on it:
//! - **CUDA stream**: the backend's `GpuClock` (a reference event waited for once, then
//!   `cuEventElapsedTime` from it) gives the instant the stream reached the frame's first event;
//!   the spans follow back to back (they are bounded by consecutive events). Late by one host
//!   wake-up; each frame measures the error again (`clock residual µs` counter, `otherData`).
//! - **GL**: a `GL_TIMESTAMP` query before each draw, placed by `GL_TIMESTAMP` read between two
//!   host instants at the start (and again at the end, which measures the drift).
//! - **CUPTI**: its records' ns timestamps, placed by `cuptiGetTimestamp` read between two host
//!   instants.
//!
//! Without a placement (no CUDA clock, GL without timestamps) a span falls back to the old rule:
//! CUDA spans end when the frame's wait returned, the draw starts at its draw call. `otherData`
//! says which was used and what the trace lacks.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{json, Map, Value};

use super::{Span, Track};

/// Track (thread) ids of the timeline.
const TID_FRAMES: u32 = 0;

fn tid(track: Track) -> u32 {
    match track {
        Track::Host => 1,
        Track::Cuda => 2,
        Track::Gl => 3,
        Track::Cupti => 4,
    }
}

/// The events of a run, written at the end.
#[derive(Debug)]
pub struct Timeline {
    path: PathBuf,
    events: Vec<Value>,
    frame: Option<(u64, f64)>,
    notes: Map<String, Value>,
    cupti: bool,
    residuals: Vec<f64>,
    /// Tracks that got at least one span.
    seen: std::collections::HashSet<u32>,
}

impl Timeline {
    /// A timeline to be written to `path`.
    pub fn new(path: &Path) -> Timeline {
        Timeline {
            path: path.to_path_buf(),
            events: Vec::new(),
            frame: None,
            notes: Map::new(),
            cupti: false,
            residuals: Vec::new(),
            seen: Default::default(),
        }
    }

    /// A span of any track; `args` are shown by the viewer.
    pub fn span(&mut self, s: &Span, args: Value) {
        self.cupti |= s.track == Track::Cupti;
        self.seen.insert(tid(s.track));
        let cat = match s.track {
            Track::Host => "host",
            Track::Cuda => "cuda",
            Track::Gl => "gl",
            Track::Cupti => "cupti",
        };
        self.events.push(
            json!({ "name": s.name, "cat": cat, "ph": "X", "pid": 1, "tid": tid(s.track), "ts": s.start_us, "dur": s.dur_us.max(0.0), "args": args }),
        );
    }

    /// Frame `frame` begins at `t` (µs).
    pub fn begin_frame(&mut self, frame: u64, t: f64) {
        self.frame = Some((frame, t));
        self.events.push(json!({ "name": format!("frame {frame}"), "cat": "frame", "ph": "i", "s": "g", "pid": 1, "tid": TID_FRAMES, "ts": t }));
    }

    /// The current frame ends at `t` (µs).
    pub fn end_frame(&mut self, t: f64) {
        if let Some((frame, t0)) = self.frame.take() {
            let name = format!("frame {frame}");
            self.events.push(json!({ "name": name, "cat": "frame", "ph": "X", "pid": 1, "tid": TID_FRAMES, "ts": t0, "dur": (t - t0).max(0.0), "args": { "frame": frame } }));
        }
    }

    /// A counter sample at `t` (µs).
    pub fn counter(&mut self, name: &str, t: f64, value: f64) {
        self.events.push(json!({ "name": name, "ph": "C", "pid": 1, "tid": TID_FRAMES, "ts": t, "args": { name: value } }));
    }

    /// One CUDA clock residual, µs (summarised in `otherData`).
    pub fn residual(&mut self, us: f64) {
        self.residuals.push(us);
    }

    /// A fact for `otherData`.
    pub fn note(&mut self, key: &str, value: Value) {
        self.notes.insert(key.to_string(), value);
    }

    /// Writes the file: thread names first, then the events sorted by time within each track
    /// (GPU spans are recorded when the host learns of them, after later host calls). The file
    /// appears whole or not at all (a temporary beside it, renamed over it when complete).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self) -> anyhow::Result<()> {
        let mut tracks = vec![(TID_FRAMES, "frames")];
        tracks.extend([Track::Host, Track::Cuda, Track::Gl].map(|t| (tid(t), t.label())));
        if self.cupti {
            tracks.push((tid(Track::Cupti), Track::Cupti.label()));
        }
        let mut all: Vec<Value> = tracks
            .iter()
            .map(|(tid, name)| json!({ "name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "ts": 0, "args": { "name": name } }))
            .collect();
        all.push(json!({ "name": "process_name", "ph": "M", "pid": 1, "tid": 0, "ts": 0, "args": { "name": "nbody-interop" } }));
        let mut events = self.events.clone();
        let key = |e: &Value| (e["tid"].as_u64().unwrap_or(0), e["ts"].as_f64().unwrap_or(0.0));
        events.sort_by(|a, b| {
            let (ta, sa) = key(a);
            let (tb, sb) = key(b);
            ta.cmp(&tb).then(sa.total_cmp(&sb))
        });
        all.extend(events);
        let mut other = Map::new();
        other.insert("clock".into(), json!("host Instant, µs since the recorder was made"));
        other.insert(
            "gpu_alignment".into(),
            json!("CUDA spans placed by a reference CUDA event (cuEventElapsedTime from it); GL draws by GL_TIMESTAMP queries; CUPTI records by cuptiGetTimestamp; the measured errors are in cuda_clock, gl_clock and cupti where this run had them"),
        );
        if !self.residuals.is_empty() {
            let mut r = self.residuals.clone();
            r.sort_by(f64::total_cmp);
            let q = |p: f64| r[((r.len() - 1) as f64 * p).round() as usize];
            other.insert(
                "cuda_clock".into(),
                json!({
                    "placement": "reference event recorded on the idle stream and waited for; event times = its host instant + cuEventElapsedTime",
                    "residual_us_meaning": "per frame: host return from the wait for the frame's last event minus that event's placed time (wake-up now minus wake-up at the reference, plus drift)",
                    "samples": r.len(),
                    "residual_us_median": q(0.5),
                    "residual_us_p90": q(0.9),
                    "residual_us_min": r[0],
                    "residual_us_max": r[r.len() - 1],
                }),
            );
        }
        let mut lacks = Vec::new();
        if !self.seen.contains(&tid(Track::Cuda)) {
            lacks.push("CUDA stream spans: no CUDA work in this run (CPU backend or draw mode)".to_string());
        }
        if !self.seen.contains(&tid(Track::Gl)) {
            lacks.push("GL spans: no timed draws".to_string());
        }
        if !self.cupti {
            let why = self.notes.get("cupti").and_then(|v| v.as_str()).unwrap_or("CUPTI was not used");
            lacks.push(format!("CUPTI activity records (kernels, memcpys): {why}"));
        }
        other.insert("lacks".into(), json!(lacks));
        for (k, v) in &self.notes {
            other.insert(k.clone(), v.clone());
        }
        let doc = json!({ "traceEvents": all, "displayTimeUnit": "ms", "otherData": other });
        let text = serde_json::to_string(&doc).context("encoding the timeline")?;
        sim::file_io::write_whole(&self.path, text.as_bytes()).with_context(|| format!("writing --timeline {}", self.path.display()))
    }
}
