//! The mistake lab and the API trace without a GPU: `lab` lists its cases, every case against a
//! missing driver is reported "unavailable" with the load error (never a crash), and `--trace`
//! writes JSON lines. The cases themselves run on the GPU machine (`.ci/gpu-check run`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nbody_app::teach::lab::CASES;

const BIN: &str = env!("CARGO_BIN_EXE_nbody-interop");

fn run(args: &[&str], library: Option<&str>) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env("RUST_LOG", "warn");
    if let Some(l) = library {
        c.env("NBODY_CUDA_LIBRARY", l);
    }
    c.output().expect("spawn nbody-interop")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn assert_no_panic(o: &Output) {
    let (out, err) = text(o);
    assert!(!err.contains("panicked") && !out.contains("panicked"), "the binary panicked:\n{err}");
}

/// A shared library that is certainly present and certainly not the CUDA driver.
fn not_the_driver() -> PathBuf {
    for c in ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"] {
        if Path::new(c).exists() {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("libm.so.6")
}

#[test]
fn lab_without_a_name_lists_every_case_and_needs_no_driver() {
    let o = run(&["lab"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = text(&o);
    assert!(o.status.success(), "listing must succeed without a driver: {err}");
    for c in CASES {
        assert!(out.contains(c.name), "{} missing from:\n{out}", c.name);
    }
    assert!(out.contains("CUDA_ERROR_ALREADY_MAPPED") && out.contains("CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"), "{out}");
}

#[test]
fn lab_list_json_has_one_object_per_case() {
    let o = run(&["lab", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert!(o.status.success());
    let (out, _) = text(&o);
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(rows.len(), CASES.len());
    assert_eq!(rows[0]["case"], CASES[0].name);
    assert!(rows.iter().all(|r| r["expected"].as_array().is_some_and(|a| !a.is_empty())));
}

#[test]
fn a_named_case_against_a_missing_driver_is_unavailable_with_the_load_error() {
    let o = run(&["lab", "proc-address-old-version"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "a case that cannot run is a failure");
    assert!(out.contains("unavailable: no CUDA driver library could be loaded"), "{out}");
    assert!(out.contains("/nonexistent/libcuda.so.1"), "the load error names the path tried:\n{out}");
    assert!(err.contains("could not run") && err.contains("proc-address-old-version"), "the reason is on stderr:\n{err}");
}

#[test]
fn every_case_against_a_missing_driver_is_reported_in_json() {
    let o = run(&["lab", "all", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, _) = text(&o);
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(rows.len(), CASES.len());
    for (r, c) in rows.iter().zip(CASES) {
        assert_eq!(r["case"], c.name);
        for key in ["call", "expected", "got_code", "got_name", "got_text", "ok", "explanation", "fix"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        assert_eq!(r["ok"], false);
        assert_eq!(r["got_code"], serde_json::Value::Null);
        assert_eq!(r["got_name"], "unavailable");
        assert!(r["got_text"].as_str().is_some_and(|t| t.starts_with("unavailable: ")), "{r}");
    }
}

#[test]
fn a_library_that_is_not_the_driver_is_reported_not_loaded() {
    let lib = not_the_driver();
    let o = run(&["lab", "proc-address-misspelt"], lib.to_str());
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, _) = text(&o);
    assert!(out.contains("unavailable:") && out.contains("cuDriverGetVersion"), "{out}");
}

#[test]
fn an_unknown_case_names_the_cases() {
    let o = run(&["lab", "map-twice-please"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = text(&o);
    assert!(err.contains("unknown lab case") && err.contains("unmap-twice"), "{err}");
}

#[test]
fn trace_file_gets_the_gl_draw_of_every_frame_on_the_cpu_backend() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lab-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("trace.jsonl");
    let p = path.to_str().expect("utf-8 path");
    let o = run(
        &["--headless", "--backend", "cpu", "--bodies", "256", "--frames", "4", "--width", "96", "--height", "64", "--trace", p, "--step-mode"],
        None,
    );
    assert_no_panic(&o);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("step mode needs CUDA"), "step mode on the CPU backend says why it cannot run:\n{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .expect("trace written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    // The CPU backend makes no driver calls: one GL draw per frame.
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["frame"], i);
        assert_eq!(l["step"], "draw");
        assert_eq!(l["api"], "gl");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_to_an_unwritable_path_is_a_clear_error() {
    let o = run(&["--headless", "--backend", "cpu", "--bodies", "64", "--frames", "1", "--trace", "/nonexistent/dir/t.jsonl"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = text(&o);
    assert!(err.contains("--trace") && err.contains("/nonexistent/dir/t.jsonl"), "{err}");
}
