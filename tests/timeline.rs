//! `--timeline`: the written file is a Trace Event Format document (every event has `ph`, `ts`,
//! `pid`, `tid`; spans have `dur ≥ 0`; per track the spans come in time order) with a frame span
//! and a GL draw for every frame. CPU backend, headless (Mesa): no GPU needed.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nbody-interop");

#[test]
fn the_timeline_is_trace_event_format_with_every_frame_and_draw() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("timeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("t.json");
    let frames = 6;
    let o = Command::new(BIN)
        .args(["--headless", "--backend", "cpu", "--bodies", "256", "--width", "96", "--height", "64"])
        .args(["--frames", &frames.to_string(), "--timeline", path.to_str().expect("utf-8")])
        .output()
        .expect("spawn");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("timeline written")).expect("JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut last_ts: HashMap<u64, f64> = HashMap::new();
    let (mut frame_spans, mut draws) = (0, 0);
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
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "span with a bad dur: {e}");
                let end = ts + e["dur"].as_f64().unwrap_or(0.0);
                let prev = last_ts.insert(tid, end).unwrap_or(0.0);
                assert!(ts + 1e-3 >= prev, "spans out of order on track {tid}: {e} after {prev}");
                if names.get(&tid).map(String::as_str) == Some("frames") {
                    frame_spans += 1;
                }
                if names.get(&tid).map(String::as_str) == Some("GL") && e["name"] == "draw" {
                    draws += 1;
                }
            }
            "i" | "C" => {}
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert_eq!(frame_spans, frames, "one span per frame");
    assert_eq!(draws, frames, "one GL draw per frame");
    for t in ["frames", "host", "CUDA stream", "GL"] {
        assert!(names.values().any(|n| n == t), "no {t} track: {names:?}");
    }
}
