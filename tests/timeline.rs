//! `--timeline`: the written file is a Trace Event Format document (every event has `ph`, `ts`,
//! `pid`, `tid`; spans have `dur ≥ 0`; per track the spans come in time order; `B`/`E` pairs
//! match) with a frame span and a GL draw for every frame, each draw placed (by its
//! `GL_TIMESTAMP`) inside its frame, and `otherData` saying how the clocks were aligned and what
//! the trace lacks. The demo and the bench (one file per mode and N). CPU backend, headless
//! (Mesa): no GPU needed.

use std::collections::HashMap;
use std::process::Command;

#[path = "common/cli.rs"]
mod cli;

use cli::{scratch, BIN};

/// Spans as (start, end) µs pairs.
type Spans = Vec<(f64, f64)>;

/// Checks `doc` against the Trace Event Format and returns (frame spans, GL draws).
fn check_trace_event_format(doc: &serde_json::Value) -> (Spans, Spans) {
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut last_ts: HashMap<u64, f64> = HashMap::new();
    let mut open: HashMap<u64, Vec<String>> = HashMap::new();
    let (mut frames, mut draws) = (Vec::new(), Vec::new());
    for e in events {
        for k in ["ph", "ts", "pid", "tid"] {
            assert!(e.get(k).is_some(), "event without {k}: {e}");
        }
        let tid = e["tid"].as_u64().expect("tid");
        let ts = e["ts"].as_f64().expect("ts");
        match e["ph"].as_str().expect("ph") {
            "M" => {
                if e["name"] == "thread_name" {
                    names.insert(tid, e["args"]["name"].as_str().unwrap_or_default().to_string());
                }
            }
            "X" => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "span with a bad dur: {e}");
                let end = ts + dur;
                let prev = last_ts.insert(tid, end).unwrap_or(f64::NEG_INFINITY);
                assert!(ts + 1e-3 >= prev, "spans out of order on track {tid}: {e} after {prev}");
                match names.get(&tid).map(String::as_str) {
                    Some("frames") => frames.push((ts, end)),
                    Some("GL") if e["name"] == "draw" => draws.push((ts, end)),
                    _ => {}
                }
            }
            "B" => open.entry(tid).or_default().push(e["name"].as_str().unwrap_or_default().to_string()),
            "E" => assert!(open.entry(tid).or_default().pop().is_some(), "E without B: {e}"),
            "i" | "C" => {}
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "unmatched B events: {open:?}");
    for t in ["frames", "host", "CUDA stream", "GL"] {
        assert!(names.values().any(|n| n == t), "no {t} track: {names:?}");
    }
    let other = &doc["otherData"];
    assert!(other["gl_clock"]["drift_over_run_us"].is_number(), "GL clock alignment noted: {other}");
    let lacks = other["lacks"].as_array().expect("lacks");
    assert!(lacks.iter().any(|l| l.as_str().is_some_and(|l| l.contains("CUDA stream"))), "CPU run says it lacks CUDA spans: {lacks:?}");
    assert!(lacks.iter().any(|l| l.as_str().is_some_and(|l| l.contains("CUPTI"))), "says it lacks CUPTI: {lacks:?}");
    (frames, draws)
}

#[test]
fn the_timeline_is_trace_event_format_with_every_frame_and_draw() {
    let dir = scratch("timeline", "timeline");
    let path = dir.join("t.json");
    let frames = 6;
    let o = Command::new(BIN)
        .args(["--headless", "--backend", "cpu", "--bodies", "256", "--width", "96", "--height", "64"])
        .args(["--frames", &frames.to_string(), "--timeline", path.to_str().expect("utf-8")])
        .output()
        .expect("spawn");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("timeline written")).expect("JSON");
    let (frame_spans, draws) = check_trace_event_format(&doc);
    assert_eq!(frame_spans.len(), frames, "one span per frame");
    assert_eq!(draws.len(), frames, "one GL draw per frame");
    // Each draw, placed by its GL_TIMESTAMP, lies in its frame (5 µs for the clock bracket).
    for (i, (d, f)) in draws.iter().zip(&frame_spans).enumerate() {
        assert!(d.0 >= f.0 - 5.0 && d.0 <= f.1 + 5.0, "draw {i} at {d:?} outside its frame {f:?}");
    }
}

#[test]
fn bench_writes_one_timeline_per_mode_and_n() {
    let dir = scratch("timeline", "bench-timeline");
    let base = dir.join("t.json");
    let o = Command::new(BIN)
        .args(["bench", "--modes", "cpu,draw", "--bodies", "128,256", "--frames", "4", "--warmup", "1", "--rounds", "2"])
        .args(["--width", "96", "--height", "64", "--out", dir.join("out").to_str().expect("utf-8")])
        .args(["--timeline", base.to_str().expect("utf-8")])
        .output()
        .expect("spawn");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for mode in ["cpu", "draw"] {
        for n in [128, 256] {
            let path = dir.join(format!("t-{mode}-{n}.json"));
            let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("timeline written")).expect("JSON");
            let (frames, draws) = check_trace_event_format(&doc);
            assert_eq!(frames.len(), 4, "{mode} {n}: the measured frames of both rounds");
            assert_eq!(draws.len(), 4, "{mode} {n}: one draw per measured frame");
        }
    }
}
