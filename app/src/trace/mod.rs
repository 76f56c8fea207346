//! The per-frame API trace: every driver call made through `interop`'s entry-point table, with the
//! resolved version and export, the arguments in short form, the result and the host time.
//!
//! [`interop::Api::set_tracer`] hands each call to a closure; when no tracer is installed a call
//! costs one relaxed atomic load more than an untraced one, so the demo installs a [`Recorder`]
//! only while the overlay's "Workflow" panel is open or `--trace PATH.jsonl` was given.
//!
//! The demo marks frame boundaries ([`Recorder::begin_frame`], [`Recorder::end_frame`]); calls
//! outside a frame (setup before frame 0, teardown) are recorded with `frame: null` and shown with
//! the next finished frame. Each call is classified by the step of the resource-mapping workflow
//! it belongs to ([`Step`]). The GL draw, which is not a driver call, is added by the demo with
//! its GL timer-query time ([`Recorder::gl_draw`]).
//!
//! `--trace` writes one JSON object per line ([`Call`]); `--timeline` writes the same calls, with
//! the GPU's spans beside them, as a Trace Event Format file ([`timeline`]). Example of a line:
//!
//! ```text
//! {"seq":43,"frame":3,"step":"get_pointer","api":"cuda","name":"cuGraphicsResourceGetMappedPointer",
//!  "version":3020,"export":"cuGraphicsResourceGetMappedPointer_v2","address":"0x7f3a1c2b4f20",
//!  "args":"p_dev_ptr=0x7ffc… p_size=0x7ffc… resource=0x5581…","returned":"p_dev_ptr→0x7f3a00000000 p_size→1048576",
//!  "noise":false,"code":0,"result":"CUDA_SUCCESS","host_us":1.2,"t_us":18734.5,"gpu_ms":null}
//! ```

pub mod clock;
pub mod cupti;
mod records;
pub mod timeline;

pub use records::{group, is_noise, Call, Group, Span, Step, Track, MAX_CALLS_PER_FRAME};

use std::cell::RefCell;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use anyhow::Context as _;
use interop::driver::entry::Tracer;
use interop::sys::CuResult;
use interop::{driver::TraceRecord, Api};
use sim::file_io::OutputFile;

struct Sink {
    path: PathBuf,
    /// Written beside the target until [`Recorder::finish`] puts it in place (`sim::file_io`:
    /// dropped before that, it removes its temporary).
    out: OutputFile,
}

struct Inner {
    epoch: Instant,
    seq: u64,
    frame: Option<u64>,
    current: Vec<Call>,
    last: Vec<Call>,
    spans: Vec<Span>,
    last_spans: Vec<Span>,
    last_frame: Option<u64>,
    sink: Option<Sink>,
    error: Option<String>,
    timeline: Option<timeline::Timeline>,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            epoch: Instant::now(),
            seq: 0,
            frame: None,
            current: Vec::new(),
            last: Vec::new(),
            spans: Vec::new(),
            last_spans: Vec::new(),
            last_frame: None,
            sink: None,
            error: None,
            timeline: None,
        }
    }
}

impl Inner {
    fn now_us(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1e6
    }

    fn us_of(&self, t: Instant) -> f64 {
        clock::signed_us(t, self.epoch)
    }

    fn add_span(&mut self, span: Span, args: serde_json::Value) {
        if let Some(t) = self.timeline.as_mut() {
            t.span(&span, args);
        }
        if self.spans.len() < MAX_CALLS_PER_FRAME {
            self.spans.push(span);
        }
    }

    fn push(&mut self, call: Call) {
        let span = Span {
            track: Track::Host,
            name: call.name.clone(),
            start_us: call.t_us,
            dur_us: call.host_us.max(0.0),
            detail: format!("{} {}", call.result, call.args),
        };
        // The file's arguments only when there is a file (the panel needs the span alone).
        let args = match self.timeline {
            Some(_) => {
                serde_json::json!({ "result": call.result, "version": call.version, "export": call.export, "args": call.args, "step": call.step.label() })
            }
            None => serde_json::Value::Null,
        };
        self.add_span(span, args);
        if let Some(s) = self.sink.as_mut() {
            let line = serde_json::to_string(&call).map_err(|e| e.to_string());
            let r = line.and_then(|l| writeln!(s.out, "{l}").map_err(|e| e.to_string()));
            if let Err(e) = r {
                if self.error.is_none() {
                    self.error = Some(format!("writing the trace {}: {e}", s.path.display()));
                }
            }
        }
        if self.current.len() < MAX_CALLS_PER_FRAME {
            self.current.push(call);
        }
        self.seq += 1;
    }
}

/// Collects traced calls per frame and, with `--trace`, writes each as a JSON line.
/// Cheap to clone (shared state).
#[derive(Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.lock();
        f.debug_struct("Recorder").field("calls", &i.seq).field("frame", &i.frame).finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder that keeps the calls of the last frame in memory only.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// A recorder that also writes every call to `path` (JSON lines). The lines go to a
    /// temporary beside `path`, renamed over it by the first [`Recorder::finish`]: until then a
    /// file already at `path` stays as it was, and a run that never finishes leaves none.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn to_file(path: &Path) -> anyhow::Result<Recorder> {
        let out = OutputFile::create(path).with_context(|| format!("cannot create the --trace file {}", path.display()))?;
        let r = Recorder::new();
        r.lock().sink = Some(Sink { path: path.to_path_buf(), out });
        Ok(r)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (plain pushes); keep going.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Also writes a Trace Event Format timeline to `path` at [`Recorder::finish`] ([`timeline`]).
    #[must_use]
    pub fn with_timeline(self, path: &Path) -> Recorder {
        self.lock().timeline = Some(timeline::Timeline::new(path));
        self
    }

    /// Whether a `--timeline` file is written.
    pub fn writes_timeline(&self) -> bool {
        self.lock().timeline.is_some()
    }

    /// µs since the recorder was made, of `t` (negative before).
    pub fn us_of(&self, t: Instant) -> f64 {
        self.lock().us_of(t)
    }

    /// The frame's CUDA-stream spans (name, ms), back to back from `start` — the host instant
    /// the stream reached the first one ([`crate`]'s `GpuClock`) — or, without it, ending now.
    /// `None` durations are left out.
    pub fn stream_spans(&self, start: Option<Instant>, spans: &[(&str, Option<f64>)]) {
        let mut i = self.lock();
        let total: f64 = spans.iter().filter_map(|s| s.1).map(|ms| ms * 1e3).sum();
        let placed = start.is_some();
        let mut t = match start {
            Some(s) => i.us_of(s),
            None => i.now_us() - total,
        };
        for (name, ms) in spans {
            if let Some(ms) = ms {
                let d = ms * 1e3;
                let span =
                    Span { track: Track::Cuda, name: (*name).to_string(), start_us: t, dur_us: d, detail: format!("{ms:.3} ms (CUDA events)") };
                i.add_span(
                    span,
                    serde_json::json!({ "gpu_ms": ms, "placed_by": if placed { "reference event" } else { "end of the frame's wait" } }),
                );
                t += d;
            }
        }
    }

    /// A GL span (the body draw) that began at host instant `start` and took `ms` of GL time.
    pub fn gl_span(&self, name: &str, start: Instant, ms: f64, detail: &str) {
        let mut i = self.lock();
        let start_us = i.us_of(start);
        let span = Span { track: Track::Gl, name: name.to_string(), start_us, dur_us: ms * 1e3, detail: detail.to_string() };
        i.add_span(span, serde_json::json!({ "gpu_ms": ms, "detail": detail, "placed_by": "GL_TIMESTAMP" }));
    }

    /// A span on any track from instants (CUPTI records, placed by their own clock).
    pub fn span_at(&self, track: Track, name: &str, start: Instant, dur_us: f64, detail: &str) {
        let mut i = self.lock();
        let start_us = i.us_of(start);
        let span = Span { track, name: name.to_string(), start_us, dur_us: dur_us.max(0.0), detail: detail.to_string() };
        i.add_span(span, serde_json::json!({ "detail": detail }));
    }

    /// One measurement of the CUDA clock's alignment error, µs (a counter, and summarised in
    /// the timeline's `otherData`).
    pub fn clock_residual(&self, us: f64) {
        let mut i = self.lock();
        let now = i.now_us();
        if let Some(t) = i.timeline.as_mut() {
            t.counter("CUDA clock residual µs", now, us);
            t.residual(us);
        }
    }

    /// A counter sample (`--timeline` only).
    pub fn counter(&self, name: &str, value: f64) {
        let mut i = self.lock();
        let now = i.now_us();
        if let Some(t) = i.timeline.as_mut() {
            t.counter(name, now, value);
        }
    }

    /// A fact for the timeline file's `otherData` (the clocks' alignment, what is missing).
    pub fn note(&self, key: &str, value: serde_json::Value) {
        if let Some(t) = self.lock().timeline.as_mut() {
            t.note(key, value);
        }
    }

    /// Whether this recorder writes a file.
    pub fn writes_file(&self) -> bool {
        self.lock().sink.is_some()
    }

    /// The tracer closure for `api`: records each call with the name of its status code. It holds
    /// the table weakly (the table owns the tracer; a strong reference would be a cycle).
    pub fn tracer(&self, api: &Arc<Api>) -> Tracer {
        let rec = self.clone();
        let weak: Weak<Api> = Arc::downgrade(api);
        Box::new(move |r: &TraceRecord| {
            let name = if r.result.is_success() {
                "CUDA_SUCCESS".to_string()
            } else {
                // `error_name` calls cuGetErrorName directly, not through the traced wrappers.
                weak.upgrade().map_or_else(|| result_name(r.result), |a| a.error_name(r.result))
            };
            rec.record(r, name);
        })
    }

    /// Installs this recorder as `api`'s tracer.
    pub fn install(&self, api: &Arc<Api>) {
        api.set_tracer(Some(self.tracer(api)));
    }

    /// Records one call (what the tracer does; public for tests with made-up records).
    pub fn record(&self, r: &TraceRecord, result: String) {
        let mut i = self.lock();
        let t_us = i.now_us() - r.host_us;
        let call = Call::from_record(i.seq, i.frame, r, result, t_us);
        i.push(call);
    }

    /// Marks the start of frame `frame`.
    pub fn begin_frame(&self, frame: u64) {
        let mut i = self.lock();
        i.frame = Some(frame);
        let now = i.now_us();
        if let Some(t) = i.timeline.as_mut() {
            t.begin_frame(frame, now);
        }
    }

    /// Marks the end of the current frame: its calls (and those recorded outside a frame since the
    /// last one) become [`Recorder::last_frame`]; the file is flushed.
    pub fn end_frame(&self) {
        let mut i = self.lock();
        let now = i.now_us();
        if let Some(t) = i.timeline.as_mut() {
            t.end_frame(now);
        }
        i.last = std::mem::take(&mut i.current);
        i.last_spans = std::mem::take(&mut i.spans);
        i.last_frame = i.frame.take();
        let err = i.sink.as_mut().and_then(|s| s.out.flush().err().map(|e| format!("writing the trace {}: {e}", s.path.display())));
        if let (Some(e), None) = (err, &i.error) {
            i.error = Some(e);
        }
    }

    /// Adds the GL draw of the bodies to the current frame, with its GL timer-query time (ms, of
    /// this frame or an earlier one) and the host time of the draw call (µs).
    pub fn gl_draw(&self, gpu_ms: Option<f64>, host_us: f64, buffer: u32) {
        let mut i = self.lock();
        let t_us = i.now_us() - host_us;
        let call = Call {
            seq: i.seq,
            frame: i.frame,
            step: Step::Draw,
            api: "gl",
            name: "glDrawArrays".into(),
            version: 0,
            export: "glDrawArrays".into(),
            address: "0x0".into(),
            args: format!("mode=GL_POINTS vbo={buffer}"),
            returned: String::new(),
            noise: false,
            code: 0,
            result: "GL".into(),
            host_us,
            t_us,
            gpu_ms,
        };
        i.push(call);
    }

    /// The calls of the last finished frame, and its index.
    pub fn last_frame(&self) -> (Option<u64>, Vec<Call>) {
        let i = self.lock();
        (i.last_frame, i.last.clone())
    }

    /// The spans of the last finished frame (host calls, stream, GL, CUPTI), in the order
    /// they were recorded.
    pub fn last_spans(&self) -> Vec<Span> {
        self.lock().last_spans.clone()
    }

    /// Calls recorded so far.
    pub fn count(&self) -> u64 {
        self.lock().seq
    }

    /// Flushes the `--trace` file and puts it in place (the first call renames its temporary over
    /// the target; calls recorded later are appended and flushed by the next call), writes the
    /// `--timeline` file whole, and returns the first write error, if any. A `--trace` file that
    /// failed is given up: its temporary is removed, the target left as it was.
    ///
    /// # Errors
    /// Writing, flushing or renaming the `--trace` file failed, or writing the `--timeline` file.
    pub fn finish(&self) -> anyhow::Result<()> {
        let mut i = self.lock();
        if let Some(s) = i.sink.as_mut() {
            let done = s.out.put_in_place();
            if let Err(e) = done {
                let path = s.path.clone();
                i.sink = None;
                return Err(e).with_context(|| format!("writing the trace {}", path.display()));
            }
        }
        if let Some(t) = i.timeline.as_ref() {
            t.write()?;
        }
        match i.error.take() {
            Some(e) => Err(anyhow::anyhow!(e)),
            None => Ok(()),
        }
    }
}

/// The `cuda.h` name of a status code without a table at hand (`CUDA_ERROR_<n>` if unknown).
pub fn result_name(r: CuResult) -> String {
    r.known_name().map_or_else(|| format!("CUDA_ERROR_{}", r.0), str::to_string)
}

thread_local! {
    /// The recorder that every table opened on this thread by the CUDA backend gets (see
    /// [`set_active`]); the demo's tracing is per thread, as its GL and CUDA work is.
    static ACTIVE: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Sets (or clears) the recorder that tables opened from now on, on this thread, get at once —
/// so registration and the rest of a backend's setup are traced too ([`attach_active`]).
pub fn set_active(rec: Option<Recorder>) {
    ACTIVE.with(|a| *a.borrow_mut() = rec);
}

/// Installs the active recorder (if any) as `api`'s tracer. Called by the CUDA backend right
/// after it opens the driver.
pub fn attach_active(api: &Arc<Api>) {
    ACTIVE.with(|a| {
        if let Some(r) = a.borrow().as_ref() {
            r.install(api);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &'static str, result: i32) -> TraceRecord {
        TraceRecord {
            name,
            version: 3000,
            export: format!("{name}_ptsz"),
            address: 0x1000,
            args: "count=2 ".into(),
            returned: if result == 0 { "p_size→1024 ".into() } else { String::new() },
            result: CuResult(result),
            host_us: 1.5,
        }
    }

    #[test]
    fn steps_of_the_workflow_calls() {
        assert_eq!(Step::of("cuGraphicsGLRegisterBuffer"), Step::Register);
        assert_eq!(Step::of("cuGraphicsMapResources"), Step::Map);
        assert_eq!(Step::of("cuGraphicsResourceGetMappedPointer"), Step::GetPointer);
        assert_eq!(Step::of("cuLaunchKernel"), Step::Launch);
        assert_eq!(Step::of("cuGraphicsUnmapResources"), Step::Unmap);
        assert_eq!(Step::of("cuGraphicsUnregisterResource"), Step::Unregister);
        assert_eq!(Step::of("cuEventRecord"), Step::Timing);
        // The image workflow's calls: registered and mapped as buffers are, then arrays and objects.
        assert_eq!(Step::of("cuGraphicsGLRegisterImage"), Step::Register);
        assert_eq!(Step::of("cuGraphicsSubResourceGetMappedArray"), Step::GetArray);
        assert_eq!(Step::of("cuSurfObjectCreate"), Step::MakeObjects);
        assert_eq!(Step::of("cuTexObjectCreate"), Step::MakeObjects);
        assert_eq!(Step::of("cuSurfObjectDestroy"), Step::DestroyObjects);
        assert_eq!(Step::of("cuTexObjectDestroy"), Step::DestroyObjects);
        assert_eq!(Step::of("cuCtxSynchronize"), Step::Other);
    }

    #[test]
    fn frames_group_calls_and_setup_goes_with_the_first_frame() {
        let r = Recorder::new();
        r.record(&rec("cuGraphicsGLRegisterBuffer", 0), "CUDA_SUCCESS".into());
        r.begin_frame(0);
        for n in ["cuEventRecord", "cuGraphicsMapResources", "cuEventRecord", "cuGraphicsResourceGetMappedPointer"] {
            r.record(&rec(n, 0), "CUDA_SUCCESS".into());
        }
        r.record(&rec("cuGraphicsResourceGetMappedPointer", 0), "CUDA_SUCCESS".into());
        r.record(&rec("cuLaunchKernel", 0), "CUDA_SUCCESS".into());
        r.record(&rec("cuGraphicsUnmapResources", 211), "CUDA_ERROR_NOT_MAPPED".into());
        r.gl_draw(Some(0.25), 3.0, 7);
        r.end_frame();
        let (frame, calls) = r.last_frame();
        assert_eq!(frame, Some(0));
        assert_eq!(calls.len(), 9);
        assert_eq!(calls[0].frame, None, "setup call outside a frame");
        assert_eq!(calls[1].frame, Some(0));
        assert_eq!(calls[1].export, "cuEventRecord_ptsz");
        assert_eq!(calls[1].address, "0x1000");
        assert_eq!(calls[7].code, 211);
        assert_eq!(calls[8].api, "gl");
        let steps: Vec<Step> = group(&calls).iter().map(|g| g.step).collect();
        assert_eq!(steps, [Step::Register, Step::Timing, Step::Map, Step::Timing, Step::GetPointer, Step::Launch, Step::Unmap, Step::Draw]);
        assert_eq!(group(&calls)[4].calls.len(), 2);
        // The next frame starts empty.
        r.begin_frame(1);
        r.end_frame();
        assert_eq!(r.last_frame(), (Some(1), Vec::new()));
        assert_eq!(r.count(), 9);
    }

    #[test]
    fn trace_file_has_one_json_object_per_call() {
        let dir = std::env::temp_dir().join(format!("nbody-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("t.jsonl");
        let r = Recorder::to_file(&path).expect("trace file");
        assert!(r.writes_file());
        r.begin_frame(5);
        r.record(&rec("cuGraphicsMapResources", 208), "CUDA_ERROR_ALREADY_MAPPED".into());
        r.gl_draw(None, 1.0, 3);
        r.end_frame();
        r.finish().expect("flush");
        let text = std::fs::read_to_string(&path).expect("read trace");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["frame"], 5);
        assert_eq!(lines[0]["step"], "map");
        assert_eq!(lines[0]["name"], "cuGraphicsMapResources");
        assert_eq!(lines[0]["version"], 3000);
        assert_eq!(lines[0]["code"], 208);
        assert_eq!(lines[0]["result"], "CUDA_ERROR_ALREADY_MAPPED");
        assert_eq!(lines[0]["args"], "count=2");
        assert_eq!(lines[0]["returned"], "", "nothing is returned by a failed call");
        assert_eq!(lines[0]["noise"], false);
        assert_eq!(lines[1]["api"], "gl");
        assert_eq!(lines[1]["step"], "draw");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn result_names_without_a_table() {
        assert_eq!(result_name(CuResult(208)), "CUDA_ERROR_ALREADY_MAPPED");
        assert_eq!(result_name(CuResult(12345)), "CUDA_ERROR_12345");
    }
}
