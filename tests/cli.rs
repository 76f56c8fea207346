//! End-to-end tests of the `nbody-interop` binary's demo path: headless rendering with the CPU
//! backend (checked pixel by pixel), backend selection and clear errors (the windowed runs under
//! Xvfb are in `windowed.rs`). Small N (≤ 2048) keeps each test to a few seconds on a 2-core
//! machine with Mesa llvmpipe; none needs a GPU.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};

#[path = "common/cli.rs"]
mod cli;
#[path = "common/fake_driver.rs"]
mod fake_driver;

use cli::{assert_no_panic, check_screenshot, out_err, scratch, Image, BIN};

/// The binary with `args`, logging at `info`.
fn run(args: &[&str]) -> Output {
    cli::run_with(args, &[("RUST_LOG", "info")])
}

#[test]
fn headless_cpu_screenshot_has_bodies_and_overlay() {
    let dir = scratch("cli", "headless");
    let shot = dir.join("x.png");
    let o = run(&[
        "--headless",
        "--backend",
        "cpu",
        "--bodies",
        "2048",
        "--frames",
        "30",
        "--width",
        "960",
        "--height",
        "600",
        "--screenshot",
        shot.to_str().expect("utf-8 path"),
    ]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_no_panic(&o);
    assert!(out.contains("30 frames") && out.contains("CPU f32"), "summary line missing:\n{out}");
    check_screenshot(&shot, 960, 600);
}

/// With tone mapping (forced on Mesa with `NBODY_TONEMAP=on`) a dense Plummer core keeps its
/// bodies' colour: fewer saturated white pixels in the scene than the direct additive path gives.
#[test]
fn tone_mapping_keeps_the_core_from_clipping_to_white() {
    let dir = scratch("cli", "tonemap");
    let white = |mode: &str| -> usize {
        let shot = dir.join(format!("{mode}.png"));
        let o = Command::new(BIN)
            .args(["--headless", "--backend", "cpu", "--init", "plummer", "--bodies", "4096", "--frames", "3", "--no-overlay"])
            .args(["--width", "320", "--height", "240", "--screenshot", shot.to_str().expect("utf-8")])
            .env("NBODY_TONEMAP", mode)
            .env("RUST_LOG", "warn")
            .output()
            .expect("spawn nbody-interop");
        assert!(o.status.success(), "NBODY_TONEMAP={mode}: {:?}", out_err(&o));
        let img = Image::load(&shot);
        img.count((0, img.w), (0, img.h), |p| p[0] >= 250 && p[1] >= 250 && p[2] >= 250)
    };
    let (off, on) = (white("off"), white("on"));
    assert!(off > 20, "the direct path clips the core ({off} white pixels)");
    assert!(on * 4 < off, "tone mapped: {on} white pixels, direct: {off}");
}

/// `--steps-per-frame auto` runs headless (N = 256 on the CPU, 30 frames/s to fill) and the
/// summary says how many steps a frame took.
#[test]
fn auto_steps_per_frame_runs_and_reports_its_steps() {
    let o = run(&[
        "--headless",
        "--backend",
        "cpu",
        "--bodies",
        "256",
        "--frames",
        "40",
        "--no-overlay",
        "--width",
        "32",
        "--height",
        "32",
        "--steps-per-frame",
        "auto",
        "--target-fps",
        "30",
    ]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    let per_frame: f64 = out
        .split(" per frame")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no steps per frame in the summary:\n{out}"));
    // How many steps fill a frame depends on this machine's speed: the rule itself is tested
    // with given timings in demo::pace; here the run must report a whole number of steps.
    assert!(per_frame >= 1.0, "auto ran {per_frame} steps per frame:\n{out}");
}

#[test]
fn cuda_backend_on_mesa_fails_naming_the_gl_context() {
    let o = run(&["--headless", "--backend", "cuda", "--frames", "2", "--bodies", "1024"]);
    let (_, err) = out_err(&o);
    assert!(!o.status.success(), "--backend cuda succeeded without CUDA:\n{err}");
    assert_no_panic(&o);
    assert!(err.contains("error:"), "no error line:\n{err}");
    assert!(err.contains("GL_VENDOR=") && err.contains("GL_RENDERER="), "error does not name the GL context:\n{err}");
}

#[test]
fn auto_backend_falls_back_to_cpu_with_a_notice() {
    let o = run(&["--headless", "--backend", "auto", "--frames", "3", "--bodies", "1024"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_no_panic(&o);
    assert!(err.contains("CUDA unavailable, running the CPU backend"), "fallback notice missing:\n{err}");
    assert!(out.contains("CPU f32"), "summary does not name the CPU backend:\n{out}");
}

/// Without a driver library `auto` falls back once: the notice is logged once (not again for
/// the restart at the CPU backend's default N), and the CUDA options given are named as ignored
/// on a line of their own; an N too large for the CPU is refused at the CPU's rate, not a GPU's.
#[test]
fn auto_without_a_driver_says_so_once_and_judges_n_at_the_cpus_rate() {
    let no_driver = |args: &[&str]| cli::run_with(args, &[("RUST_LOG", "info"), ("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")]);
    let o = no_driver(&["--headless", "--frames", "1", "--kernel", "missing.ptx", "--block-size", "256"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_eq!(err.matches("CUDA unavailable, running the CPU backend").count(), 1, "{err}");
    assert!(err.contains("--block-size, --kernel do not apply to the CPU backend and are ignored"), "{err}");
    assert!(out.contains("1 frame,") && out.contains("1 step ("), "{out}");
    let o = no_driver(&["--headless", "--frames", "1", "--bodies", "5000000"]);
    let (_, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the nominal rate of the CPU backend") && err.contains("--allow-slow"), "{err}");
}

#[test]
fn unknown_initial_condition_is_a_clear_error() {
    let o = run(&["--headless", "--backend", "cpu", "--frames", "1", "--init", "nosuch"]);
    let (_, err) = out_err(&o);
    assert!(!o.status.success(), "--init nosuch succeeded");
    assert_eq!(o.status.code(), Some(1), "exit code");
    assert_no_panic(&o);
    assert!(err.contains("nosuch") && err.contains("plummer"), "error does not name the input and the valid names:\n{err}");
}

#[test]
fn screenshot_that_is_not_png_is_a_clear_error() {
    let o = run(&["--headless", "--backend", "cpu", "--frames", "1", "--bodies", "256", "--screenshot", "frame.jpg"]);
    let (_, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "a .jpg screenshot was accepted:\n{err}");
    assert_no_panic(&o);
    assert!(err.contains("frame.jpg") && err.contains(".png"), "error does not name the file and the remedy:\n{err}");
}

#[test]
fn unwritable_screenshot_is_a_clear_error() {
    let o = run(&["--headless", "--backend", "cpu", "--frames", "1", "--bodies", "256", "--screenshot", "/nonexistent-dir/x.png"]);
    let (_, err) = out_err(&o);
    assert!(!o.status.success(), "screenshot into a missing directory succeeded");
    assert_no_panic(&o);
    assert!(err.contains("/nonexistent-dir/x.png"), "error does not name the path:\n{err}");
}

#[test]
fn save_state_and_diagnostics_interval() {
    let dir = scratch("cli", "state");
    let csv = dir.join("state.csv");
    let o = run(&[
        "--headless",
        "--backend",
        "cpu",
        "--frames",
        "4",
        "--bodies",
        "256",
        "--no-overlay",
        "--width",
        "64",
        "--height",
        "64",
        "--diagnostics-interval",
        "2",
        "--save-state",
        csv.to_str().expect("utf-8 path"),
        "--summary",
        dir.join("summary.json").to_str().expect("utf-8 path"),
    ]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_eq!(out.matches("diagnostics frame").count(), 2, "diagnostics every 2 of 4 frames:\n{out}");
    let body = std::fs::read_to_string(&csv).expect("state file written");
    let rows = body.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
    assert_eq!(rows, 257, "header + 256 bodies");
    // The summary: the run's counts, its stages and where it came from.
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary written")).expect("JSON");
    assert_eq!(
        (s["status"].as_str(), s["frames"].as_u64(), s["steps"].as_u64(), s["bodies"].as_u64()),
        (Some("complete"), Some(4), Some(4), Some(256)),
        "{s}"
    );
    assert_eq!(s["stages_ms"]["frame"]["count"].as_u64(), Some(3), "every frame after the first: {s}");
    assert!(s["stages_ms"]["kernel"]["median"].as_f64().is_some_and(|k| k > 0.0), "the CPU step: {s}");
    assert_eq!((s["route"]["headless"].as_bool(), s["route"]["interop"].is_null()), (Some(true), true), "{s}");
    let p = &s["provenance"];
    assert!(p["commit"].is_string() && p["command_line"].as_array().is_some_and(|a| a.iter().any(|x| x == "--summary")), "{s}");
    assert!(p["gpu"].is_null() && p["cpu"]["cores"].as_u64().is_some_and(|c| c >= 1), "{s}");
}

/// A tipsy snapshot written by `--save-state x.tipsy` is bit-exact (encoding the bodies it holds
/// gives the same bytes), and `--init x.tipsy` starts from exactly the bodies that `--init` of
/// the same state as CSV gives (the two runs save the same CSV).
#[test]
fn tipsy_round_trips_through_save_state() {
    use sim::{state_csv, tipsy};
    let dir = scratch("cli", "tipsy");
    let path = |name: &str| dir.join(name).to_str().expect("utf-8 path").to_string();
    let common = ["--headless", "--backend", "cpu", "--frames", "2", "--no-overlay", "--width", "32", "--height", "32"];
    let o = run(&[&common[..], &["--bodies", "100", "--save-state", &path("a.tipsy")]].concat());
    assert!(o.status.success(), "{:?}", out_err(&o));
    let bytes = std::fs::read(path("a.tipsy")).expect("tipsy written");
    assert_eq!(bytes.len(), 32 + 100 * 36, "padded header + 100 dark records");
    let (_, bodies) = tipsy::parse(Path::new("a.tipsy"), &bytes).expect("parse");
    // 0.01 is the default --softening, written into every record's eps.
    assert_eq!(tipsy::encode(Path::new("a.tipsy"), &bodies, 0.0, 0.01).expect("encode"), bytes);
    state_csv::write_state(Path::new(&path("a.csv")), &bodies).expect("csv");
    for (from, to) in [("a.tipsy", "from-tipsy.csv"), ("a.csv", "from-csv.csv")] {
        let o = run(&[&common[..], &["--init", &path(from), "--save-state", &path(to)]].concat());
        assert!(o.status.success(), "--init {from}: {:?}", out_err(&o));
    }
    let (t, c) = (std::fs::read(path("from-tipsy.csv")).expect("saved"), std::fs::read(path("from-csv.csv")).expect("saved"));
    assert_eq!(t, c, "the same run from the tipsy file and from its CSV");
}

#[test]
fn switch_probe_without_cuda_names_the_cause() {
    let out = scratch("cli", "switch");
    let out_arg = out.join("o");
    let out_arg = out_arg.to_str().expect("utf-8 path");
    let o = run(&["switch", "--iters", "1", "--rounds", "2", "--out", out_arg]);
    let (_, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "--iters below --rounds accepted:\n{err}");
    assert!(err.contains("--iters (1) must be at least --rounds (2)"), "unclear error:\n{err}");
    let o = run(&["switch", "--iters", "10", "--rounds", "2", "--warmup", "1", "--out", out_arg]);
    let (_, err) = out_err(&o);
    assert_no_panic(&o);
    if o.status.success() {
        // A machine with an NVIDIA GPU: the probe ran and wrote its file.
        let doc: serde_json::Value = serde_json::from_reader(File::open(out.join("o/switch.json")).expect("switch.json")).expect("JSON");
        assert_eq!(doc["status"], "complete");
        assert_eq!(doc["rounds_done"], 2);
        for v in doc["variants"].as_array().expect("variants") {
            assert_eq!(v["iters"], 10, "{v}");
        }
        return;
    }
    assert_eq!(o.status.code(), Some(1), "exit code:\n{err}");
    assert!(err.contains("needs CUDA and a headless GL context on the same NVIDIA GPU"), "error does not say what is needed:\n{err}");
    assert!(!out.join("o").exists(), "a run that could not start left its output directory");
}

#[test]
fn info_with_missing_driver_functions_prints_the_whole_report() {
    let so = fake_driver::build("cli", &["cuCtxCreate", "cuLaunchKernel"]);
    // `info` prints the whole report, then fails naming the first missing function.
    let o = Command::new(BIN).arg("info").env("NBODY_CUDA_LIBRARY", &so).output().expect("spawn nbody-interop");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "info with missing functions:\n{out}\n{err}");
    for name in ["cuCtxCreate", "cuLaunchKernel", "cuGraphicsMapResources"] {
        assert!(out.contains(name), "the report lacks {name}:\n{out}");
    }
    assert!(err.contains("cuCtxCreate"), "the error does not name the missing function:\n{err}");
}

#[test]
fn info_json_without_a_driver_is_json() {
    let o = Command::new(BIN).args(["info", "--json"]).env("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1").output().expect("spawn nbody-interop");
    let (out, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "info without a driver:\n{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{out}"));
    assert!(v["error"].as_str().is_some_and(|e| e.contains("/nonexistent/libcuda.so.1")), "{v}");
}

#[test]
fn bench_that_measures_nothing_leaves_no_output_directory() {
    let dir = scratch("cli", "bench-nothing").join("out");
    let o = run(&[
        "bench",
        "--modes",
        "cpu",
        "--init",
        "figure-eight",
        "--bodies",
        "64",
        "--frames",
        "2",
        "--rounds",
        "1",
        "--out",
        dir.to_str().expect("utf-8"),
    ]);
    let (_, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "figure-eight at N = 64 was accepted:\n{err}");
    assert!(err.contains("--bodies 3"), "the error does not suggest --bodies 3:\n{err}");
    assert!(!dir.exists(), "an empty output directory was left behind");
}

/// `--solver tree` runs the CPU backend's tree (the summary names it and θ); with `--backend
/// auto` and no CUDA it falls back to the CPU's tree, and says why.
#[test]
fn tree_solver_runs_on_the_cpu_and_names_itself() {
    let o = run(&["--headless", "--backend", "cpu", "--solver", "tree", "--theta", "0.7", "--frames", "3", "--bodies", "1024"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert!(out.contains("CPU f32 tree θ=0.7 (rayon"), "summary does not name the tree:\n{out}");
    let o = run(&["--headless", "--backend", "auto", "--solver", "tree", "--frames", "2", "--bodies", "512"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    // `auto` tries the GPU tree first; without CUDA the CPU backend runs its own tree.
    assert!(err.contains("CUDA unavailable"), "{err}");
    assert!(out.contains("CPU f32 tree θ=0.5"), "{out}");
}

/// `--solver auto` on the CPU backend: the direct sum below the crossover N, the tree from it
/// (16384 at θ ≥ 0.75).
#[test]
fn auto_solver_picks_by_n() {
    let o = run(&["--headless", "--backend", "cpu", "--solver", "auto", "--frames", "2", "--bodies", "1024"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert!(out.contains("CPU f32 (rayon"), "{out}");
    let o = run(&["--headless", "--backend", "cpu", "--solver", "auto", "--theta", "0.75", "--frames", "2", "--bodies", "16384"]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert!(out.contains("CPU f32 tree θ=0.75 (rayon"), "{out}");
}

/// `accuracy` prints a row per solver and θ and writes the same rows to `--csv`; θ = 0 is the
/// direct sum (relative error at f32 rounding: below 1e-6), and larger θ costs fewer
/// interactions.
#[test]
fn accuracy_prints_and_writes_its_rows() {
    let dir = scratch("cli", "accuracy");
    let csv_path = dir.join("acc.csv");
    let o = run(&["accuracy", "--init", "plummer", "--bodies", "600", "--theta", "0,0.5,1", "--csv", csv_path.to_str().unwrap()]);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert!(out.contains("| plummer | 600 | direct |") && out.contains("| plummer | 600 | tree | 0.5 |"), "{out}");
    let mut r = csv::Reader::from_path(&csv_path).expect("csv");
    let headers = r.headers().expect("header").clone();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    assert_eq!(rows.len(), 4, "direct + 3 θ");
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (theta, med, per_body) = (col("theta"), col("err_median"), col("interactions_per_body"));
    let num = |row: &csv::StringRecord, c: usize| row[c].parse::<f64>().unwrap();
    assert_eq!(num(&rows[1], theta), 0.0);
    assert!(num(&rows[1], med) < 1e-6, "θ = 0: {:?}", rows[1]);
    assert!(num(&rows[3], per_body) < num(&rows[2], per_body) && num(&rows[2], per_body) < 600.0, "{rows:?}");
}

/// `bench` and `scale` document the `--steps-per-frame` and `--init` they take (a fixed count,
/// default 1; the Plummer sphere), not the demo's (`auto` in a window; galaxies); `accuracy`
/// names figure-eight as refused and the least N.
#[test]
fn help_says_what_each_command_takes() {
    for args in [&["bench", "-h"][..], &["bench", "--help"], &["scale", "-h"], &["scale", "--help"]] {
        let (out, err) = out_err(&run(args));
        assert!(out.contains("--steps-per-frame <N>") && !out.contains("auto in a window") && !out.contains("N|auto"), "{args:?}:\n{out}{err}");
        assert!(out.contains("whole number ≥ 1 [default: 1]"), "{args:?}:\n{out}");
        assert!(out.contains("[default: plummer]") && !out.contains("default: galaxies"), "{args:?}:\n{out}");
    }
    let (out, _) = out_err(&run(&["--help"]));
    assert!(out.contains("--steps-per-frame <N|auto>") && out.contains("auto in a window") && out.contains("[default: galaxies]"), "{out}");
    let (out, _) = out_err(&run(&["accuracy", "--help"]));
    assert!(out.contains("figure-eight") && out.contains("at least 512 bodies"), "{out}");
    // What `accuracy` says it refuses, it refuses: figure-eight (3 bodies) and N below 512.
    for (args, words) in [
        (&["accuracy", "--init", "figure-eight"][..], &["--init figure-eight", "3 bodies are too few", "512"][..]),
        (&["accuracy", "--init", "plummer", "--bodies", "100"], &["--bodies 100", "too few", "512"]),
    ] {
        let o = run(args);
        let (out, err) = out_err(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}:\n{out}{err}");
        assert!(words.iter().all(|w| err.contains(w)), "{args:?}:\n{err}");
        assert!(!out.contains("0.0×"), "{out}");
    }
}

/// Values the options cannot hold are refused with the range, naming the option: a float beyond
/// f32 (not "got inf"), a negative count (not "unexpected argument '-1'"), θ outside 0–2 (not a
/// 31-digit label).
#[test]
fn out_of_range_values_are_refused_with_the_range() {
    let cases: [(&[&str], &[&str]); 9] = [
        (&["--headless", "--dt", "1e308"], &["--dt", "1e308 is beyond the range of a 32-bit float", "3.4e38"]),
        (&["bench", "--dt", "1e308"], &["--dt", "32-bit float"]),
        (&["accuracy", "--softening", "1e39"], &["--softening", "32-bit float"]),
        (&["--headless", "--bodies", "-1"], &["--bodies", "must be a positive integer (got -1)"]),
        (&["--headless", "--frames", "-1"], &["--frames", "must be a positive integer (got -1)"]),
        (&["bench", "--frames", "-1"], &["--frames", "must be a positive integer"]),
        (&["bench", "--warmup", "-1"], &["--warmup", "must be a whole number ≥ 0 (got -1)"]),
        (&["--headless", "--theta", "1e30"], &["--theta", "at most 2 (got 1e30)"]),
        (&["bench", "--theta", "2.5"], &["--theta", "at most 2 (got 2.5)"]),
    ];
    for (args, words) in cases {
        let o = run(args);
        let (out, err) = out_err(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}:\n{out}{err}");
        assert!(words.iter().all(|w| err.contains(w)), "{args:?}:\n{err}");
        assert!(!err.contains("unexpected argument") && !err.contains("got inf") && !err.contains("1000000000000000000000000000000"), "{err}");
    }
    // The range's ends are taken.
    for args in
        [&["--headless", "--theta", "2", "--frames", "1", "--bodies", "64"][..], &["--headless", "--dt", "3e38", "--frames", "1", "--bodies", "64"]]
    {
        let o = run(args);
        assert!(!String::from_utf8_lossy(&o.stderr).contains("invalid value"), "{args:?}: {:?}", out_err(&o));
    }
}

/// `info` without a driver says what it needs and what runs without a GPU.
#[test]
fn info_without_a_driver_names_what_runs_on_the_cpu() {
    let o = Command::new(BIN).arg("info").env("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1").output().expect("spawn nbody-interop");
    let (out, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("bench --modes cpu") && err.contains("lab --replay") && err.contains("/nonexistent/libcuda.so.1"), "{err}");
}

/// README's tour: every command parses; those that need an NVIDIA GPU are in the second list,
/// and every CPU equivalent given there ("without a GPU") runs without one.
#[test]
fn the_readme_tour_says_which_commands_need_a_gpu() {
    use clap::Parser as _;
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).expect("README.md");
    let tour = readme.split("## A short tour").nth(1).and_then(|t| t.split("\n## ").next()).expect("the tour section");
    let (anywhere, gpu) = tour.split_once("need an NVIDIA GPU").expect("a list of the commands that need a GPU");
    let commands = |text: &str, prefix: &str| -> Vec<Vec<String>> {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(prefix))
            .map(|c| c.split(" #").next().unwrap_or(c).split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let needs_gpu = |args: &[String]| {
        let has = |w: &str| args.iter().any(|a| a == w);
        let modes = args.iter().position(|a| a == "--modes").and_then(|i| args.get(i + 1));
        matches!(args.first().map(String::as_str), Some("info" | "switch" | "scale"))
            || (args.first().is_some_and(|a| a == "lab") && !has("--replay"))
            || has("--step-mode")
            || has("--interop")
            || args.windows(2).any(|w| w[0] == "--view" && w[1] == "density")
            || (args.first().is_some_and(|a| a == "bench") && modes.is_none_or(|m| m.split(',').any(|m| !matches!(m, "cpu" | "draw"))))
            || (has("--solver") && !has("--backend") && args.iter().any(|a| a == "1048576"))
    };
    let parse = |args: &[String]| {
        nbody_app::cli::Cli::try_parse_from(std::iter::once("nbody-interop".to_string()).chain(args.iter().cloned()))
            .unwrap_or_else(|e| panic!("{args:?} does not parse: {e}"));
    };
    let run_anywhere = commands(anywhere, "cargo run --release --");
    assert!(run_anywhere.len() >= 3, "{anywhere}");
    for c in &run_anywhere {
        parse(c);
        assert!(!needs_gpu(c), "{c:?} needs a GPU but is listed as running anywhere");
    }
    let on_gpu = commands(gpu, "cargo run --release --");
    assert!(on_gpu.iter().all(|c| needs_gpu(c)), "a command in the GPU list runs anywhere: {on_gpu:?}");
    for c in &on_gpu {
        parse(c);
    }
    let instead = commands(gpu, "#   without a GPU: cargo run --release --");
    assert!(
        instead.iter().any(|c| c.first().is_some_and(|a| a == "bench")) && instead.iter().any(|c| c.contains(&"--replay".to_string())),
        "{instead:?}"
    );
    for c in &instead {
        parse(c);
        assert!(!needs_gpu(c), "{c:?} is given as the CPU equivalent but needs a GPU");
    }
}

/// A frame of more steps than a run should hold is refused before it starts, with its estimate
/// and the remedies; `--bodies` with the figure-eight (always 3) and an unknown `NBODY_TONEMAP`
/// are said, not ignored silently; an unknown `NBODY_GL_ROUTE` is refused before any window.
#[test]
fn frame_estimates_and_ignored_settings_are_said() {
    let o = run(&["--headless", "--backend", "cpu", "--bodies", "4096", "--steps-per-frame", "1000000000", "--frames", "1"]);
    let (_, err) = out_err(&o);
    assert_no_panic(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("one frame of --steps-per-frame 1000000000 steps") && err.contains("--allow-slow"), "{err}");

    let o =
        run(&["--headless", "--backend", "cpu", "--init", "figure-eight", "--bodies", "100000", "--frames", "1", "--width", "64", "--height", "64"]);
    let (_, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("--bodies (the figure-eight has always 3 bodies)"), "{err}");

    let o = Command::new(BIN)
        .args(["--headless", "--backend", "cpu", "--bodies", "256", "--frames", "1", "--width", "64", "--height", "64"])
        .env("RUST_LOG", "warn")
        .env("NBODY_TONEMAP", "bogus")
        .output()
        .expect("spawn nbody-interop");
    let (_, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("NBODY_TONEMAP=bogus is neither on nor off"), "{err}");

    let o = Command::new(BIN).args(["--backend", "cpu", "--frames", "1"]).env("NBODY_GL_ROUTE", "vulkan").output().expect("spawn nbody-interop");
    let (_, err) = out_err(&o);
    assert!(!o.status.success() && err.contains("NBODY_GL_ROUTE=vulkan: unknown route; use glx or egl"), "{err}");
}

/// Without a display the windowed demo's error reads as one sentence and names the remedy.
#[test]
fn no_display_error_reads_cleanly() {
    let o = Command::new(BIN)
        .args(["--backend", "cpu", "--frames", "1"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("spawn nbody-interop");
    let (_, err) = out_err(&o);
    assert_no_panic(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("use --headless") && !err.contains(".;"), "{err}");
}
