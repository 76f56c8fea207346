//! `nbody-interop bench`, run as a program: outputs and their columns, an interrupted run (through
//! the `NBODY_BENCH_STOP_AFTER_ROWS` test hook, which acts like Ctrl-C), CUDA modes on a machine
//! without a GPU, and bad arguments.
//!
//! The cpu mode runs headless on whatever EGL gives (Mesa llvmpipe on CI). Sizes are small so the
//! file stays well under 20 s in a debug build on 2 cores.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/cli.rs"]
mod cli;
#[path = "common/signals.rs"]
mod signals;

use cli::{report, BIN};

/// A fresh, empty directory under the target dir (kept after the test for inspection).
fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-tests").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `bench args --out out` with the variables `env`.
fn bench(args: &[&str], out: &Path, env: &[(&str, &str)]) -> Output {
    let mut all: Vec<&OsStr> = vec![OsStr::new("bench")];
    all.extend(args.iter().map(OsStr::new));
    all.extend([OsStr::new("--out"), out.as_os_str()]);
    cli::run_with(&all, env)
}

/// `bench args --out out`, killed if it is still running after `guard` seconds: a guard
/// against a run that would hang, far beyond its normal length, not a time limit.
fn bench_with_guard(guard_s: u32, args: &[&str], out: &Path) -> Output {
    Command::new("timeout")
        .args(["-s", "KILL", &guard_s.to_string(), BIN, "bench"])
        .args(args)
        .arg("--out")
        .arg(out)
        .env("RUST_LOG", "warn")
        .output()
        .expect("spawn timeout")
}

/// Columns every row has, in both files.
const COLUMNS: &[&str] = &[
    "mode",
    "n",
    "steps_per_frame",
    "block_size",
    "bodies_per_thread",
    "frames",
    "rounds",
    "warmup",
    "frame_ms_median",
    "frame_ms_p95",
    "frame_ms_p99",
    "frame_ms_max",
    "map_ms_median",
    "map_ms_p95",
    "map_ms_p99",
    "map_ms_max",
    "kernel_ms_median",
    "kernel_ms_p95",
    "kernel_ms_p99",
    "kernel_ms_max",
    "unmap_ms_median",
    "unmap_ms_p95",
    "unmap_ms_p99",
    "unmap_ms_max",
    "upload_ms_median",
    "upload_ms_p95",
    "upload_ms_p99",
    "upload_ms_max",
    "draw_ms_median",
    "draw_ms_p95",
    "draw_ms_p99",
    "draw_ms_max",
    "readback_ms_median",
    "readback_ms_p99",
    "interactions_per_s",
    "gflops",
    "overhead_us",
    "overhead_pct",
    "spread_pct",
    "diverged",
    "gpu_name",
    "driver_version",
    "gl_vendor",
    "gl_renderer",
    "egl_device",
    "stream",
    "register_flags",
    "map_flags",
    "ctx_sched",
    "build_profile",
    "date",
    "host",
];

fn json_rows(dir: &Path) -> (serde_json::Value, Vec<serde_json::Value>) {
    let text = std::fs::read_to_string(dir.join("bench.json")).expect("bench.json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("bench.json is JSON");
    let rows = doc["rows"].as_array().expect("rows array").clone();
    (doc, rows)
}

fn csv_rows(dir: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(dir.join("bench.csv")).expect("bench.csv");
    let header: Vec<String> = r.headers().expect("header").iter().map(str::to_string).collect();
    let rows = r.records().map(|rec| rec.expect("record").iter().map(str::to_string).collect()).collect();
    (header, rows)
}

fn positive(row: &serde_json::Value, key: &str) -> f64 {
    let v = row[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {row}"));
    assert!(v.is_finite() && v > 0.0, "{key} = {v} should be finite and > 0");
    v
}

/// A run whose state becomes NaN/∞ is written, its row marked `diverged`, and the bench exits 1
/// naming the row and the remedy.
#[test]
fn diverged_rows_are_marked_and_fail_the_run() {
    let dir = out_dir("diverged");
    let args = ["--modes", "cpu", "--bodies", "64", "--frames", "3", "--warmup", "1", "--rounds", "1", "--dt", "1e30", "--softening", "0"];
    let o = bench(&args, &dir, &[]);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("diverged") && all.contains("cpu N=64") && all.contains("--dt"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    let (_, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1, "{all}");
    assert_eq!(rows[0]["diverged"], true);
}

#[test]
fn cpu_mode_writes_json_csv_and_png() {
    let dir = out_dir("cpu");
    // A generous CPU budget: a loaded CI machine must not make the probe skip N = 4096.
    let args = ["--modes", "cpu", "--bodies", "1024,4096", "--frames", "20", "--warmup", "2", "--rounds", "2", "--cpu-budget-ms", "60000"];
    let o = bench(&args, &dir, &[]);
    assert!(o.status.success(), "{}", report(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("GFLOP/s") && stdout.contains("bench.json"), "{}", report(&o));

    let (doc, rows) = json_rows(&dir);
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["complete"], true);
    assert_eq!(rows.len(), 2, "one row per (mode, N)");
    for (row, n) in rows.iter().zip([1024u64, 4096]) {
        for c in COLUMNS {
            assert!(row.get(*c).is_some(), "bench.json row lacks {c}");
        }
        assert_eq!(row["mode"], "cpu");
        assert_eq!(row["n"].as_u64(), Some(n));
        assert_eq!(row["frames"].as_u64(), Some(20));
        assert_eq!(row["rounds"].as_u64(), Some(2));
        assert_eq!(row["steps_per_frame"].as_u64(), Some(1));
        assert_eq!(row["diverged"], false);
        for key in [
            "frame_ms_median",
            "frame_ms_p95",
            "frame_ms_p99",
            "frame_ms_max",
            "kernel_ms_median",
            "upload_ms_median",
            "interactions_per_s",
            "gflops",
            "interactions_per_s_frame",
            "gflops_frame",
        ] {
            positive(row, key);
        }
        let (med, p95, p99, max) =
            (positive(row, "frame_ms_median"), positive(row, "frame_ms_p95"), positive(row, "frame_ms_p99"), positive(row, "frame_ms_max"));
        assert!(med <= p95 && p95 <= p99 && p99 <= max, "percentiles out of order: {med} {p95} {p99} {max}");
        // GFLOP/s is 20 flops per interaction, from N² interactions per frame over the median kernel time.
        let ips = n as f64 * n as f64 / (row["kernel_ms_median"].as_f64().unwrap() * 1e-3);
        assert!((row["interactions_per_s"].as_f64().unwrap() / ips - 1.0).abs() < 1e-9);
        assert!((row["gflops"].as_f64().unwrap() / (ips * 20e-9) - 1.0).abs() < 1e-9);
        let spread = row["spread_pct"].as_f64().unwrap();
        assert!(spread.is_finite() && spread >= 0.0);
        // No CUDA in the cpu mode, and compute was not measured: these stay empty.
        for key in ["map_ms_median", "unmap_ms_median", "overhead_us", "overhead_pct", "gpu_name", "stream", "ctx_sched", "readback_ms_median"] {
            assert!(row[key].is_null(), "{key} should be null for cpu: {}", row[key]);
        }
        assert!(!row["gl_renderer"].as_str().unwrap_or("").is_empty());
        assert!(matches!(row["build_profile"].as_str(), Some("debug" | "release")));
        assert!(row["date"].as_str().unwrap_or("").contains('T'), "RFC 3339 date");
    }

    let (header, records) = csv_rows(&dir);
    for c in COLUMNS {
        assert!(header.iter().any(|h| h == c), "bench.csv lacks column {c}");
    }
    assert_eq!(records.len(), 2);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for rec in &records {
        assert_eq!(rec[col("mode")], "cpu");
        for name in ["frame_ms_median", "frame_ms_p99", "interactions_per_s", "gflops"] {
            let v: f64 = rec[col(name)].parse().unwrap_or_else(|_| panic!("{name} = {:?}", rec[col(name)]));
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
        assert_eq!(rec[col("overhead_us")], "", "empty without compute");
    }

    let png = std::fs::read(dir.join("bench.png")).expect("bench.png");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "bench.png is a PNG");
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().contains("tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn interrupted_run_keeps_finished_rows() {
    let dir = out_dir("interrupted");
    let o = bench(
        &["--modes", "cpu", "--bodies", "128,256,512", "--frames", "4", "--warmup", "1", "--rounds", "2"],
        &dir,
        &[("NBODY_BENCH_STOP_AFTER_ROWS", "1")],
    );
    assert!(!o.status.success(), "an interrupted run fails: {}", report(&o));
    assert_eq!(o.status.code(), Some(130), "interrupted: 128 + SIGINT {}", report(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"), "{}", report(&o));
    let (doc, rows) = json_rows(&dir);
    assert_eq!(doc["status"], "interrupted");
    assert_eq!(doc["complete"], false);
    // The file names its run: schema, program, commit, command line and machine.
    assert_eq!(doc["schema_version"], 3);
    let p = &doc["provenance"];
    assert!(p["commit"].as_str().is_some_and(|c| !c.is_empty()) && p["dirty"].is_boolean(), "{doc}");
    let argv: Vec<&str> = p["command_line"].as_array().expect("command_line").iter().filter_map(|a| a.as_str()).collect();
    assert!(argv.windows(2).any(|w| w == ["--bodies", "128,256,512"]), "{argv:?}");
    assert!(p["cpu"]["threads"].as_u64().is_some_and(|t| t >= 1) && p["cpu"]["cores"].as_u64().is_some_and(|t| t >= 1), "{doc}");
    assert!(p["date_utc"].as_str().is_some_and(|d| d.ends_with('Z')) && p["gpu"].is_null(), "{doc}");
    // The CSV's provenance sits beside it, the same block.
    let side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bench.csv.provenance.json")).expect("bench.csv.provenance.json")).expect("JSON");
    assert_eq!(&side, p);
    assert_eq!(rows.len(), 1, "exactly the finished row");
    assert_eq!(rows[0]["n"].as_u64(), Some(128));
    assert_eq!(rows[0]["frames"].as_u64(), Some(4));
    positive(&rows[0], "frame_ms_median");
    let (_, records) = csv_rows(&dir);
    assert_eq!(records.len(), 1);
    assert!(dir.join("bench.png").is_file());
}

#[test]
fn compute_without_gpu_fails_cleanly() {
    if interop::init(interop::StreamSemantics::Legacy).is_ok() {
        eprintln!("skipped: a CUDA driver is present, so compute may run here");
        return;
    }
    let dir = out_dir("compute");
    let o = bench(&["--modes", "compute", "--bodies", "1024", "--frames", "2", "--warmup", "0", "--rounds", "1"], &dir, &[]);
    assert!(!o.status.success(), "{}", report(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("compute: skipped:"), "{}", report(&o));
    assert!(err.contains("requested mode(s) could not run here") && err.contains("CUDA"), "{}", report(&o));
    assert!(!dir.join("bench.json").exists() && !dir.join("bench.csv").exists(), "no rows, so no files");
}

/// A mode asked for by name that cannot run here: the others are measured and written, the
/// file says the run is incomplete and why, and the exit code is 1.
#[test]
fn a_requested_mode_that_cannot_run_marks_the_results_incomplete() {
    if interop::init(interop::StreamSemantics::Legacy).is_ok() {
        eprintln!("skipped: a CUDA driver is present, so compute may run here");
        return;
    }
    let dir = out_dir("draw-compute");
    let o = bench(&["--modes", "draw,compute", "--bodies", "64", "--frames", "2", "--warmup", "0", "--rounds", "1"], &dir, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", report(&o));
    let (doc, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1, "the draw row is written");
    assert_eq!(doc["complete"], false);
    let status = doc["status"].as_str().expect("status");
    assert!(status.starts_with("incomplete:") && status.contains("compute"), "{status}");
    assert!(doc["skipped"].as_array().is_some_and(|s| s.iter().any(|k| k["mode"] == "compute")), "{doc}");
    // draw simulates nothing: the table shows no rate for it.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.contains("0.000e0"), "{stdout}");
}

/// The cpu probe runs a prefix of at most 8192 bodies, whatever the smallest N: N = 200000 is
/// judged (and skipped, over a 1 ms budget) without a frame of 200000 bodies (four of them would
/// take hours in a debug build: the run is killed after 600 s, a guard against a hang, not a time limit).
#[test]
fn the_cpu_probe_judges_a_large_n_from_a_small_prefix() {
    let dir = out_dir("probe-prefix");
    let args = ["--modes", "cpu", "--bodies", "200000", "--frames", "2", "--rounds", "1", "--cpu-budget-ms", "1"];
    let o = bench_with_guard(600, &args, &dir);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("cpu N=200000: skipped: estimated") && all.contains("no row was measured"), "{all}");
}

/// Ctrl-C during the cpu probe (held inside its first step until the signal,
/// `NBODY_TEST_HOLD=step`) ends the bench as an interrupted run, without rows.
#[test]
fn ctrl_c_stops_the_cpu_probe() {
    let dir = out_dir("probe-interrupted");
    std::fs::create_dir_all(&dir).expect("out dir");
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "--modes", "cpu", "--bodies", "8192", "--steps-per-frame", "1000", "--frames", "2", "--rounds", "1", "--warmup", "0"])
        .arg("--out")
        .arg(&dir)
        .env("RUST_LOG", "warn")
        .env("NBODY_TEST_HOLD", "step");
    let run = signals::start(cmd, &dir);
    run.signal_like_timeout(signals::Signal::SIGINT);
    let o = run.wait();
    let all = o.text();
    assert_eq!(o.status.code(), Some(130), "{all}");
    assert!(all.contains("interrupted") && all.contains("no rows were measured"), "{all}");
}

#[test]
fn bad_body_count_is_a_clear_error() {
    let dir = out_dir("bad-bodies");
    let o = bench(&["--bodies", "0"], &dir, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--bodies") && err.contains("N = 0"), "{}", report(&o));
    assert!(!dir.join("bench.json").exists());
}

/// A `--timeline` path that cannot be written is refused before anything runs, and the results
/// of an earlier run in `--out` are left as they were.
#[test]
fn a_bad_timeline_path_fails_first_and_keeps_earlier_results() {
    let dir = out_dir("bad-timeline");
    std::fs::create_dir_all(&dir).expect("out dir");
    std::fs::write(dir.join("bench.json"), "{\"earlier\": true}").expect("earlier results");
    let o = bench(&["--modes", "draw", "--bodies", "64", "--frames", "2", "--rounds", "1", "--timeline", "/nonexistent/dir/t.json"], &dir, &[]);
    assert!(!o.status.success(), "{}", report(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--timeline") && err.contains("/nonexistent/dir/t-draw-64.json"), "{}", report(&o));
    assert_eq!(std::fs::read_to_string(dir.join("bench.json")).expect("still there"), "{\"earlier\": true}");
}

/// `--readback` times the copy route's readback in every whole frame: the `readback_ms_*`
/// columns are filled (each frame but the first hands out the frame before).
#[test]
fn readback_fills_its_columns() {
    let dir = out_dir("readback");
    let args =
        ["--modes", "cpu", "--bodies", "256", "--frames", "6", "--warmup", "1", "--rounds", "1", "--readback", "--width", "320", "--height", "200"];
    let o = bench(&args, &dir, &[]);
    assert!(o.status.success(), "{}", report(&o));
    let (_, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1);
    let (med, max) = (positive(&rows[0], "readback_ms_median"), positive(&rows[0], "readback_ms_max"));
    assert!(med <= max, "{med} {max}");
}

/// A run that measures nothing keeps the results of an earlier run in `--out` (the tables, their
/// provenance sidecar and the plot), and says so; the files are replaced only by a run's own rows.
#[test]
fn a_run_that_measures_nothing_keeps_the_earlier_results() {
    let dir = out_dir("keep-earlier");
    std::fs::create_dir_all(&dir).expect("out dir");
    let earlier = ["bench.json", "bench.csv", "bench.csv.provenance.json", "bench.png"];
    for f in earlier {
        std::fs::write(dir.join(f), format!("earlier {f}")).expect("earlier results");
    }
    let o = bench(&["--modes", "cpu", "--bodies", "8192", "--cpu-budget-ms", "0.001", "--frames", "2", "--rounds", "1"], &dir, &[]);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("no rows were measured") && all.contains("are kept"), "{all}");
    for f in earlier {
        assert_eq!(std::fs::read_to_string(dir.join(f)).expect("still there"), format!("earlier {f}"), "{f} changed:\n{all}");
    }
    // A run with rows replaces all four.
    let o = bench(&["--modes", "cpu", "--bodies", "64", "--frames", "2", "--warmup", "0", "--rounds", "1"], &dir, &[]);
    assert!(o.status.success(), "{}", report(&o));
    for f in earlier {
        assert_ne!(std::fs::read(dir.join(f)).expect("written"), format!("earlier {f}").into_bytes(), "{f} was not replaced");
    }
}

/// `--out` naming a file (or a device such as /dev/full) is refused up front with the remedy,
/// and the file is left alone.
#[test]
fn out_that_is_a_file_is_refused_with_the_remedy() {
    let dir = out_dir("out-is-a-file");
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = dir.join("results.txt");
    std::fs::write(&file, "mine").expect("a file");
    for out in [file.as_path(), Path::new("/dev/full")] {
        let o = bench(&["--modes", "cpu", "--bodies", "64", "--frames", "1", "--rounds", "1"], out, &[]);
        let all = report(&o);
        assert_eq!(o.status.code(), Some(1), "{all}");
        assert!(all.contains(&format!("--out {} is a file, not a directory: give a directory", out.display())), "{all}");
        assert!(!all.contains("os error 17"), "{all}");
    }
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), "mine");
}

/// The cpu mode's estimate is measured on this machine, not scaled up from the smallest N: with
/// N = 4 first (whose frame is all fixed costs), N = 1024 is judged by its own cost and measured
/// within a budget of 1 s (a debug build's frame of 1024 bodies takes about 0.1–0.2 s on 2 cores;
/// an estimate from N = 4 scaled by N² was seconds). The estimate is printed, and lies within a
/// factor of 10 of the measured frame (a bound for a noisy, shared machine, not a timing).
#[test]
fn the_cpu_estimate_is_measured_here_not_scaled_from_the_smallest_n() {
    let dir = out_dir("estimate");
    let args = ["--modes", "cpu", "--bodies", "4,1024", "--frames", "2", "--warmup", "0", "--rounds", "1", "--cpu-budget-ms", "1000"];
    let o = bench(&args, &dir, &[]);
    let all = report(&o);
    assert!(o.status.success(), "{all}");
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err.lines().find(|l| l.starts_with("cpu: estimated frame times:")).unwrap_or_else(|| panic!("no estimate:\n{all}"));
    assert!(line.contains("interactions/s here (best of 3 steps of"), "{line}");
    let estimate: f64 = line
        .split("N=1024 ")
        .nth(1)
        .and_then(|r| r.split(" ms").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no estimate for N=1024 in {line}"));
    let (_, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 2, "both N measured:\n{all}");
    let measured = positive(&rows[1], "frame_ms_median");
    assert!(estimate / measured < 10.0 && measured / estimate < 10.0, "estimated {estimate} ms, measured {measured} ms");
}

/// An N the cpu mode skips over `--cpu-budget-ms` fails a run that asked for cpu (after writing
/// the other rows: bench.json says incomplete), unless `--skip-slow` accepts the skip (exit 0,
/// the skip listed, the run complete).
#[test]
fn a_skipped_cpu_n_fails_the_run_unless_skip_slow() {
    let dir = out_dir("skip-slow");
    let args = ["--modes", "cpu", "--bodies", "64,200000", "--frames", "2", "--warmup", "0", "--rounds", "1"];
    let o = bench(&args, &dir, &[]);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("cpu N=200000: skipped: estimated") && all.contains("--skip-slow"), "{all}");
    let (doc, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1, "the N = 64 row is written");
    assert_eq!(doc["complete"], false);
    assert!(doc["status"].as_str().is_some_and(|s| s.starts_with("incomplete:") && s.contains("cpu N=200000")), "{doc}");

    let o = bench(&[&args[..], &["--skip-slow"]].concat(), &dir, &[]);
    let all = report(&o);
    assert!(o.status.success(), "{all}");
    assert!(all.contains("cpu N=200000: skipped: estimated"), "the skip is listed:\n{all}");
    let (doc, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1);
    assert_eq!(doc["complete"], true);
    assert!(doc["skipped"].as_array().is_some_and(|s| s.iter().any(|k| k["n"] == 200000)), "{doc}");
}

/// `--steps-per-frame 1000000000` is estimated like a large N (steps × N²) and refused before a
/// frame runs, instead of starting a frame that would never end (the run is killed after 300 s: a
/// guard against a hang, not a time limit).
#[test]
fn a_billion_steps_per_frame_is_estimated_not_run() {
    let dir = out_dir("billion-steps");
    let args = ["--modes", "cpu", "--bodies", "64", "--steps-per-frame", "1000000000", "--frames", "1", "--warmup", "0", "--rounds", "1"];
    let o = bench_with_guard(300, &args, &dir);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("cpu N=64: skipped: estimated") && all.contains("1000000000 step(s)"), "{all}");
}

/// The tour's bench without a CUDA driver: every CUDA mode is skipped for the one reason, which
/// is printed once (not once per mode, twice over), and the error points to `--modes cpu`.
#[test]
fn cuda_modes_without_a_driver_share_one_message_that_points_to_the_cpu_mode() {
    let dir = out_dir("no-driver");
    let args = ["--modes", "compute,map,copy,external,draw", "--bodies", "64", "--frames", "2", "--warmup", "0", "--rounds", "1"];
    let o = bench(&args, &dir, &[("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")]);
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("/nonexistent/libcuda.so.1"), "{all}");
    assert_eq!(all.matches("dlopen failed").count(), 1, "the driver's error once:\n{all}");
    assert!(all.contains("compute, map, copy, external: skipped: no usable CUDA driver"), "{all}");
    assert!(all.contains("`nbody-interop bench --modes cpu`"), "{all}");
    let (_, rows) = json_rows(&dir);
    assert_eq!(rows.len(), 1, "the draw row is written");
}
