//! The bad-input suite: every way a user can hand the binary something wrong — command-line
//! values, initial-condition and state files, output paths, sizes it cannot run, options that do
//! not apply to the chosen backend — and what must happen then: the exit code, the key words of
//! the message (the cause and the remedy), no panic. Then the runs that go wrong while running:
//! interrupts (SIGINT, SIGTERM) at a frame boundary keep every output, a diverging run exits
//! non-zero and saves its last finite state, and the overlay never changes a setting.
//!
//! Everything runs on the CPU backend (headless on Mesa's EGL device where a GL context is
//! needed) with small N: no GPU, a few seconds in all.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/signals.rs"]
mod signals;
use cli::{report, run, scratch, BIN};
use signals::Signal;

/// One case: the arguments, the exit code, and words the output (stderr or stdout) must hold.
struct Case {
    name: &'static str,
    args: Vec<String>,
    code: i32,
    words: &'static [&'static str],
}

fn case(name: &'static str, args: &[&str], code: i32, words: &'static [&'static str]) -> Case {
    Case { name, args: args.iter().map(|s| s.to_string()).collect(), code, words }
}

/// Headless CPU demo arguments, `extra` replacing the defaults it names (clap refuses an option twice).
fn demo(extra: &[&str]) -> Vec<String> {
    let mut v = vec!["--headless".to_string()];
    for (k, val) in [("--backend", "cpu"), ("--bodies", "64"), ("--frames", "2"), ("--width", "64"), ("--height", "64")] {
        if !extra.contains(&k) {
            v.extend([k.to_string(), val.to_string()]);
        }
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn demo_case(name: &'static str, extra: &[&str], code: i32, words: &'static [&'static str]) -> Case {
    Case { name, args: demo(extra), code, words }
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write fixture");
    p.to_str().expect("utf-8 path").to_string()
}

/// A little-endian tipsy file of two dark particles with its last `cut` bytes removed; `cut = 0`
/// writes a file whose header is no tipsy header (ndim 9).
fn tipsy_fixture(dir: &Path, name: &str, cut: usize) -> String {
    let mut b = Vec::new();
    b.extend_from_slice(&0f64.to_le_bytes());
    for f in [2i32, if cut == 0 { 9 } else { 3 }, 0, 2, 0, 0] {
        b.extend_from_slice(&f.to_le_bytes());
    }
    for i in 0..2i32 {
        for v in [1.0f32, i as f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&i.to_le_bytes());
    }
    b.truncate(b.len() - cut);
    let p = dir.join(name);
    std::fs::write(&p, b).expect("write fixture");
    p.to_str().expect("utf-8 path").to_string()
}

#[test]
fn every_bad_input_is_a_clear_error_without_a_panic() {
    let dir = scratch("bad", "inputs");
    let d = dir.to_str().expect("utf-8 path").to_string();
    let bad_number = write(&dir, "bad-number.csv", "x,y,z,vx,vy,vz,mass\n0,0,0,0,0,0,1\n1,0,zero,0,0,0,1\n");
    let short_row = write(&dir, "short-row.csv", "x,y,z,vx,vy,vz,mass\n0,0,0,0,0,0,1\n1,0,0\n");
    let nan_row = write(&dir, "nan.csv", "x,y,z,vx,vy,vz,mass\n0,0,0,0,0,0,1\nNaN,0,0,0,0,0,1\n");
    let empty = write(&dir, "empty.csv", "");
    let missing = format!("{d}/missing.csv");
    let ptx = write(&dir, "kernel.ptx", ".version 7.8\n");
    let (truncated_tipsy, not_tipsy) = (tipsy_fixture(&dir, "cut.tipsy", 20), tipsy_fixture(&dir, "garbage.tipsy", 0));
    let out_dir = format!("{d}/bench-out");
    let cases = vec![
        // Command-line values.
        demo_case("bodies 0", &["--bodies", "0"], 1, &["--bodies", "1"]),
        demo_case("bodies negative", &["--bodies", "-5"], 2, &["--bodies"]),
        demo_case("bodies not a number", &["--bodies", "many"], 2, &["--bodies", "many"]),
        demo_case("dt 0", &["--dt", "0"], 1, &["--dt", "> 0"]),
        demo_case("dt negative", &["--dt", "-1"], 1, &["--dt"]),
        demo_case("dt NaN", &["--dt", "NaN"], 1, &["--dt", "finite"]),
        demo_case("dt infinite", &["--dt", "inf"], 1, &["--dt", "finite"]),
        demo_case("softening negative", &["--softening", "-0.1"], 1, &["--softening"]),
        demo_case("G zero", &["--gravitational-constant", "0"], 1, &["--gravitational-constant"]),
        demo_case("width 0", &["--width", "0"], 1, &["--width"]),
        demo_case("height 0", &["--height", "0"], 1, &["--height"]),
        demo_case("frames 0", &["--frames", "0"], 1, &["--frames"]),
        demo_case("steps per frame 0", &["--steps-per-frame", "0"], 1, &["--steps-per-frame"]),
        demo_case("steps per frame neither number nor auto", &["--steps-per-frame", "many"], 2, &["--steps-per-frame", "auto"]),
        demo_case("target fps 0", &["--target-fps", "0"], 1, &["--target-fps", "> 0"]),
        demo_case("ui scale 0", &["--ui-scale", "0"], 1, &["--ui-scale", "0.25"]),
        demo_case("block size not a multiple of 32", &["--block-size", "100"], 1, &["--block-size", "multiple of 32"]),
        demo_case("block size too large", &["--block-size", "2048"], 1, &["--block-size", "1024"]),
        demo_case("sprite cap below 1", &["--max-sprite-px", "0"], 1, &["--max-sprite-px"]),
        demo_case("unknown preset", &["--init", "spiral"], 1, &["spiral"]),
        demo_case("unknown interop mode", &["--interop", "zero-copy"], 2, &["--interop", "zero-copy"]),
        demo_case("unknown backend", &["--backend", "gpu"], 2, &["--backend", "gpu"]),
        demo_case("unknown stream kind", &["--stream", "fast"], 2, &["--stream"]),
        demo_case("unknown precision", &["--precision", "f16"], 2, &["--precision", "f16"]),
        // fp64 has no step mode and takes blocks up to 256 (refused before CUDA is touched).
        // The tree solver: θ finite and ≥ 0 (clap's parser, exit 2); fp32, on one GPU.
        demo_case("theta negative", &["--solver", "tree", "--theta", "-0.5"], 2, &["--theta", "finite number ≥ 0", "0.5"]),
        demo_case("theta NaN", &["--solver", "tree", "--theta", "NaN"], 2, &["--theta", "finite number ≥ 0"]),
        demo_case("theta infinite", &["--solver", "tree", "--theta", "inf"], 2, &["--theta", "finite number ≥ 0"]),
        demo_case("theta not a number", &["--theta", "wide"], 2, &["--theta", "not a number"]),
        demo_case("unknown solver", &["--solver", "fmm"], 2, &["--solver", "fmm"]),
        demo_case(
            "tree with a split",
            &["--backend", "cuda", "--solver", "tree", "--slices-per-gpu", "2"],
            1,
            &["--solver tree", "--slices-per-gpu", "--solver direct"],
        ),
        demo_case("tree with f64", &["--backend", "auto", "--solver", "tree", "--precision", "f64"], 1, &["--solver tree", "--precision f32"]),
        case("accuracy theta negative", &["accuracy", "--theta", "0.5,-1"], 2, &["--theta", "finite number ≥ 0"]),
        case("accuracy bodies 0", &["accuracy", "--bodies", "0"], 1, &["--bodies", "at least 1"]),
        case("accuracy unknown scene after a good one", &["accuracy", "--init", "plummer,foo"], 1, &["--init foo", "unknown initial condition"]),
        case("accuracy missing state file", &["accuracy", "--init", "plummer,missing-state.csv"], 1, &["--init missing-state.csv", "no such file"]),
        case("accuracy softening negative", &["accuracy", "--softening", "-1"], 1, &["--softening", "finite number ≥ 0"]),
        case("accuracy on CUDA without a driver", &["accuracy", "--backend", "cuda", "--bodies", "64"], 1, &["--backend cpu", "CUDA"]),
        demo_case("f64 on the CPU backend runs", &["--precision", "f64"], 0, &[]),
        demo_case(
            "f64 with step mode",
            &["--precision", "f64", "--backend", "cuda", "--step-mode"],
            1,
            &["--step-mode cannot run with --precision f64", "fp32 workflow", "use --precision f32 for step mode"],
        ),
        demo_case(
            "f64 with a block too large",
            &["--precision", "f64", "--backend", "cuda", "--block-size", "512"],
            1,
            &["--block-size", "at most 256"],
        ),
        demo_case("unknown option", &["--turbo"], 2, &["--turbo"]),
        case("demo option before a subcommand", &["--headless", "info"], 2, &["info"]),
        // Sizes that cannot run.
        demo_case("huge N on the CPU", &["--bodies", "100000000"], 1, &["estimated", "interactions/s", "--allow-slow"]),
        case("huge N on the GPU", &["--headless", "--backend", "cuda", "--bodies", "200000000", "--frames", "1"], 1, &["estimated", "--allow-slow"]),
        demo_case("N beyond host memory", &["--bodies", "2000000000", "--allow-slow"], 1, &["host memory", "fewer bodies"]),
        // Initial-condition and state files.
        demo_case("missing CSV", &["--init", &missing], 1, &["missing.csv"]),
        demo_case("empty CSV", &["--init", &empty], 1, &["empty.csv"]),
        demo_case("directory as CSV", &["--init", &d], 1, &["not a file"]),
        demo_case("CSV with a bad number", &["--init", &bad_number], 1, &["bad-number.csv", "line"]),
        demo_case("CSV with a short row", &["--init", &short_row], 1, &["short-row.csv"]),
        demo_case("CSV with NaN", &["--init", &nan_row], 1, &["nan.csv"]),
        demo_case("truncated tipsy", &["--init", &truncated_tipsy], 1, &["cut.tipsy", "truncated at byte", "particle 1 (dark record 1)"]),
        demo_case("not a tipsy file", &["--init", &not_tipsy], 1, &["garbage.tipsy", "not a tipsy snapshot"]),
        // Output paths, refused before the first frame.
        demo_case("screenshot not PNG", &["--screenshot", "frame.jpg"], 1, &["frame.jpg", ".png"]),
        demo_case("screenshot in a missing directory", &["--screenshot", "/nonexistent-dir/x.png"], 1, &["/nonexistent-dir", "does not exist"]),
        demo_case("save-state is a directory", &["--save-state", &d], 1, &["--save-state", "directory"]),
        demo_case(
            "save-state not writable",
            &["--save-state", "/proc/nbody-state.csv"],
            1,
            &["--save-state", "/proc/nbody-state.csv", "cannot write"],
        ),
        demo_case(
            "trace and timeline in one file",
            &["--trace", "same.json", "--timeline", "same.json"],
            1,
            &["--trace and --timeline name the same file"],
        ),
        demo_case("trace in a missing directory", &["--trace", "/nonexistent-dir/t.jsonl"], 1, &["--trace", "does not exist"]),
        // Options that do not apply: a notice, and the run goes on.
        demo_case(
            "CUDA options with the CPU backend",
            &["--interop", "copy", "--kernel", &ptx, "--block-size", "256"],
            0,
            &["notice", "--interop", "--kernel", "do not apply here", "the CPU backend never touches CUDA"],
        ),
        demo_case(
            "interop options typed at their defaults with the CPU backend",
            &["--interop", "map", "--map-flags", "none", "--stream", "legacy"],
            0,
            &["notice: options that do not apply here are ignored: --interop, --map-flags, --stream (the CPU backend"],
        ),
        demo_case("an unknown step kernel", &["--step-kernel", "nbody_step_m3x3"], 2, &["--step-kernel", "nbody_step_m2x4", "nbody_stepk_u4x1"]),
        demo_case(
            "a step kernel with fp64",
            &["--backend", "cuda", "--precision", "f64", "--step-kernel", "nbody_step_p1"],
            1,
            &["--step-kernel nbody_step_p1", "fp32", "--precision f64"],
        ),
        demo_case("a step kernel with the CPU backend", &["--step-kernel", "nbody_stepk_m4x1"], 0, &["notice", "--step-kernel"]),
        demo_case("--no-vsync headless", &["--no-vsync"], 0, &["notice", "--no-vsync (a headless run has no window"]),
        demo_case(
            "--target-fps with a fixed step count",
            &["--target-fps", "30", "--steps-per-frame", "2"],
            0,
            &["notice", "--target-fps (only --steps-per-frame auto"],
        ),
        demo_case("--ui-scale without the overlay", &["--no-overlay", "--ui-scale", "2"], 0, &["notice", "--ui-scale (--no-overlay"]),
        demo_case(
            "--workflow without the overlay, headless",
            &["--no-overlay", "--workflow"],
            1,
            &["--workflow", "--no-overlay", "leave one of them out"],
        ),
        demo_case("step mode with the CPU backend", &["--step-mode"], 1, &["--step-mode", "--backend cpu", "--backend cuda"]),
        demo_case(
            "register flags with the CPU backend",
            &["--register-flags", "read-only"],
            0,
            &["notice", "--register-flags (the CPU backend never touches CUDA)"],
        ),
        demo_case(
            "map interop and register flags with the CPU backend",
            &["--interop", "map", "--register-flags", "write-discard"],
            0,
            &["notice: options that do not apply here are ignored: --interop, --register-flags (the CPU backend"],
        ),
        // bench.
        case("bench bodies 0", &["bench", "--bodies", "0", "--out", &out_dir], 1, &["--bodies", "N = 0"]),
        case("bench unknown mode", &["bench", "--modes", "warp", "--out", &out_dir], 2, &["warp"]),
        case(
            "bench f64 in the tree mode",
            &["bench", "--precision", "f64", "--modes", "tree,map", "--out", &out_dir],
            1,
            &["--precision f64", "tree cannot run in fp64", "GPU tree is float32", "leave it out of --modes", "--precision f32"],
        ),
        case(
            "bench f64 in the draw mode",
            &["bench", "--precision", "f64", "--modes", "draw", "--out", &out_dir],
            1,
            &["--precision f64", "draw cannot run in fp64", "simulates nothing", "--precision f32"],
        ),
        case(
            "bench f64 with a block too large for the fp64 kernel",
            &["bench", "--precision", "f64", "--modes", "compute", "--block-size", "512", "--out", &out_dir],
            1,
            &["--block-size", "at most 256"],
        ),
        // The split over slices and GPUs (refused before CUDA is touched).
        demo_case("slices per gpu 0", &["--slices-per-gpu", "0"], 1, &["--slices-per-gpu", "at least 1"]),
        demo_case("a list of GPU counts in the demo", &["--gpus", "1,2"], 1, &["--gpus", "one value", "`bench` and `scale`"]),
        demo_case(
            "gpus on the CPU backend",
            &["--gpus", "2", "--slices-per-gpu", "2"],
            0,
            &["notice", "--gpus", "--slices-per-gpu", "do not apply here"],
        ),
        demo_case("gpus 0", &["--gpus", "0"], 2, &["--gpus", "number ≥ 1 or `all`"]),
        demo_case(
            "f64 split over slices",
            &["--precision", "f64", "--backend", "cuda", "--slices-per-gpu", "2"],
            1,
            &["--precision f64", "fp32", "--precision f32"],
        ),
        demo_case(
            "step mode split over slices",
            &["--backend", "cuda", "--render-gpu-computes", "no", "--step-mode"],
            1,
            &["step mode", "given: --render-gpu-computes no"],
        ),
        // scale (refused before the driver is asked).
        case("scale gpus 0", &["scale", "--gpus", "0", "--out", &out_dir], 2, &["--gpus", "number ≥ 1 or `all`"]),
        case("scale gpus not a number", &["scale", "--gpus", "two", "--out", &out_dir], 2, &["--gpus", "two"]),
        case("scale frames 0", &["scale", "--frames", "0", "--out", &out_dir], 1, &["--frames", "at least 1"]),
        case("scale slices 0", &["scale", "--slices-per-gpu", "0", "--out", &out_dir], 1, &["--slices-per-gpu", "at least 1"]),
        case(
            "scale render GPU apart",
            &["scale", "--render-gpu-computes", "no", "--out", &out_dir],
            1,
            &["--render-gpu-computes no", "scale draws nothing"],
        ),
        case("scale slices 1,0", &["scale", "--slices-per-gpu", "1,0", "--out", &out_dir], 1, &["--slices-per-gpu", "at least 1", "1,0"]),
        case("scale unknown gather", &["scale", "--gather", "mpi", "--out", &out_dir], 2, &["--gather", "mpi"]),
        case(
            "scale auto steps",
            &["scale", "--steps-per-frame", "auto", "--out", &out_dir],
            1,
            &["--steps-per-frame auto", "scale times a fixed count"],
        ),
        case("bench unknown precision", &["bench", "--precision", "f16", "--out", &out_dir], 2, &["--precision", "f16"]),
        case("bench auto steps", &["bench", "--steps-per-frame", "auto", "--out", &out_dir], 1, &["--steps-per-frame", "fixed count"]),
        case("bench cpu budget 0", &["bench", "--modes", "cpu", "--cpu-budget-ms", "0", "--out", &out_dir], 1, &["--cpu-budget-ms"]),
        case(
            "bench that measures nothing",
            &["bench", "--modes", "cpu", "--bodies", "8192", "--cpu-budget-ms", "0.001", "--frames", "2", "--rounds", "1", "--out", &out_dir],
            1,
            &["no row was measured", "--cpu-budget-ms"],
        ),
        // bench's GPU setups (refused before the driver is asked).
        case("bench gpus 0", &["bench", "--gpus", "0", "--out", &out_dir], 2, &["--gpus", "number ≥ 1 or `all`"]),
        case("bench slices 0", &["bench", "--slices-per-gpu", "1,0", "--out", &out_dir], 1, &["--slices-per-gpu", "at least 1"]),
        case(
            "bench nccl with two slices",
            &["bench", "--gather", "nccl", "--slices-per-gpu", "1,2", "--out", &out_dir],
            1,
            &["--gather nccl", "one slice per GPU", "--gather peer"],
        ),
        case(
            "scale nccl with two slices",
            &["scale", "--gather", "nccl", "--slices-per-gpu", "2", "--out", &out_dir],
            1,
            &["--gather nccl", "one slice per GPU", "--gather peer"],
        ),
        case(
            "bench split in f64",
            &["bench", "--precision", "f64", "--modes", "compute", "--gpus", "1,2", "--out", &out_dir],
            1,
            &["--precision f64", "one slice", "--precision f32"],
        ),
        case(
            "bench timeline with two setups",
            &["bench", "--slices-per-gpu", "1,2", "--timeline", "t.json", "--out", &out_dir],
            1,
            &["--timeline", "2 GPU setups", "one value each"],
        ),
        case(
            "bench gpus without a CUDA mode",
            &["bench", "--modes", "cpu", "--gpus", "2", "--bodies", "64", "--frames", "1", "--rounds", "1", "--warmup", "0", "--out", &out_dir],
            0,
            &["notice", "--gpus", "apply to the CUDA modes"],
        ),
        // lab.
        case("lab unknown case", &["lab", "map-twice-over"], 1, &["map-twice-over"]),
    ];
    assert!(cases.len() >= 40, "the suite has {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let o = run(&args);
        let all = report(&o);
        let mut why = Vec::new();
        if o.status.code() != Some(c.code) {
            why.push(format!("exit code {:?}, expected {}", o.status.code(), c.code));
        }
        if all.contains("panicked") {
            why.push("it panicked".to_string());
        }
        for w in c.words {
            if !all.contains(w) {
                why.push(format!("no {w:?} in the output"));
            }
        }
        if !why.is_empty() {
            failures.push(format!("{} ({}): {}\n{all}", c.name, c.args.join(" "), why.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

/// A headless CPU run of `frames` frames (or until interrupted) that saves its state and a
/// screenshot into `dir`, started and announced ([`signals::start`]) with `env` added.
fn announced_run(dir: &Path, frames: Option<&str>, env: &[(&str, &str)]) -> (signals::Run, PathBuf, PathBuf) {
    let state = dir.join("state.csv");
    let shot = dir.join("shot.png");
    let mut cmd = Command::new(BIN);
    cmd.args(["--headless", "--backend", "cpu", "--bodies", "512", "--width", "64", "--height", "64"]);
    if let Some(f) = frames {
        cmd.args(["--frames", f]);
    }
    cmd.arg("--save-state").arg(&state).arg("--screenshot").arg(&shot).env("RUST_LOG", "warn").envs(env.iter().copied());
    (signals::start(cmd, dir), state, shot)
}

fn state_rows(path: &Path) -> Vec<Vec<f64>> {
    let body = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    body.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with('x'))
        .map(|l| l.split(',').map(|v| v.trim().parse::<f64>().unwrap_or(f64::NAN)).collect())
        .collect()
}

/// Exit status 128 + the signal's number, the outputs written, no panic.
fn assert_orderly_stop(end: &signals::Ended, code: i32, state: &Path, shot: &Path) {
    let all = end.text();
    assert_eq!(end.status.code(), Some(code), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(end.stderr.contains("interrupted"), "{all}");
    assert_eq!(state_rows(state).len(), 512, "--save-state written:\n{all}");
    assert!(std::fs::read(shot).unwrap_or_default().starts_with(b"\x89PNG"), "--screenshot written:\n{all}");
}

#[test]
fn an_interrupt_keeps_the_state_and_the_screenshot() {
    for (signal, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let dir = scratch("bad", &format!("interrupt-{signal}"));
        let (run, state, shot) = announced_run(&dir, Some("1000000"), &[]);
        run.signal(signal);
        assert_orderly_stop(&run.wait(), code, &state, &shot);
    }
}

/// `timeout`, make and CI runners signal the process and its process group, microseconds
/// apart: one request, an orderly stop with every output, every time.
#[test]
fn a_signal_burst_like_timeouts_is_one_request_every_time() {
    for i in 0..20 {
        let (signal, code) = if i % 4 == 3 { (Signal::SIGTERM, 143) } else { (Signal::SIGINT, 130) };
        let dir = scratch("bad", &format!("burst-{i}"));
        let (run, state, shot) = announced_run(&dir, Some("1000000"), &[]);
        run.signal_like_timeout(signal);
        let end = run.wait();
        assert!(!end.stderr.contains("exiting now"), "run {i}: a burst was taken for two requests:\n{}", end.text());
        assert_orderly_stop(&end, code, &state, &shot);
    }
}

/// A second signal at least a second after the first exits at once, cleanly (an exit status,
/// not a crash): here the run is held before its outputs (`NBODY_TEST_HOLD=outputs`), so only
/// the second signal can end it. The wait starts once the run says it holds, which is after it
/// handled the first signal: the second is then at least 1.2 s after it, however loaded the
/// machine.
#[test]
fn a_second_signal_a_second_later_exits_at_once_and_cleanly() {
    for (signal, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let dir = scratch("bad", &format!("forced-{signal}"));
        let (mut run, _, _) = announced_run(&dir, Some("1000000"), &[("NBODY_TEST_HOLD", "outputs")]);
        run.signal(signal);
        run.wait_until_held();
        // At least the burst window (1 s) after the first was handled: a lower bound, not a guess.
        std::thread::sleep(std::time::Duration::from_millis(1200));
        run.signal(signal);
        let end = run.wait();
        let all = end.text();
        assert_eq!(end.status.code(), Some(code), "an exit status, not a crash:\n{all}");
        assert!(end.stderr.contains("again") && end.stderr.contains("exiting now"), "{all}");
        assert!(!all.contains("panicked"), "{all}");
    }
}

/// Ctrl-C inside a step (held there until the signal, `NBODY_TEST_HOLD=step`) stops the step
/// between its tasks instead of finishing it: the saved state has the positions the run started
/// from, bit for bit (the closing half kick moves no body).
#[test]
fn ctrl_c_stops_a_step_and_keeps_the_state_before_it() {
    let n = 3000;
    let init = sim::init::InitialCondition::Plummer.generate(n, 5, 1.0).expect("plummer");
    // Also with one frame: the run did not finish it, so it exits 130 too, not 0.
    for frames in ["1000", "1"] {
        let dir = scratch("bad", &format!("long-step-{frames}"));
        let (start, end) = (dir.join("start.csv"), dir.join("end.csv"));
        sim::state_csv::write_state(&start, &init).expect("write start.csv");
        let mut cmd = Command::new(BIN);
        cmd.args(["--headless", "--backend", "cpu", "--frames", frames, "--no-overlay", "--width", "32", "--height", "32"])
            .arg("--init")
            .arg(&start)
            .arg("--save-state")
            .arg(&end)
            .env("RUST_LOG", "info")
            .env("NBODY_TEST_HOLD", "step");
        let run = signals::start(cmd, &dir);
        run.signal(Signal::SIGINT);
        let o = run.wait();
        let all = o.text();
        assert_eq!(o.status.code(), Some(130), "--frames {frames}: {all}");
        assert!(!all.contains("panicked"), "{all}");
        assert!(all.contains("stopped by the interrupt"), "{all}");
        if frames == "1" {
            assert!(o.stderr.contains("after 1 of 1 frames (the last one's steps stopped)"), "{all}");
        }
        let saved = sim::state_csv::read_state(&end).expect("--save-state written");
        assert_eq!(saved.pos, init.pos, "the stopped step moved bodies:\n{all}");
    }
}

/// Ctrl-C in `accuracy`'s last (here only) scene and N stops it at the next row: exit 130, the
/// rows finished printed and in `--csv` (held after the direct row, `NBODY_TEST_HOLD=step`).
#[test]
fn ctrl_c_stops_accuracy_between_rows_and_keeps_them() {
    let dir = scratch("bad", "accuracy-interrupt");
    let csv = dir.join("acc.csv");
    let mut cmd = Command::new(BIN);
    cmd.args(["accuracy", "--init", "plummer", "--bodies", "600", "--theta", "0.5,1"]).arg("--csv").arg(&csv).env("NBODY_TEST_HOLD", "step");
    let run = signals::start(cmd, &dir);
    run.signal(Signal::SIGINT);
    let o = run.wait();
    let all = o.text();
    assert_eq!(o.status.code(), Some(130), "{all}");
    assert!(o.stderr.contains("interrupted after 1 row(s)"), "{all}");
    let rows = std::fs::read_to_string(&csv).unwrap_or_default();
    assert_eq!(rows.lines().count(), 2, "header and the direct row:\n{rows}\n{all}");
    assert!(rows.lines().nth(1).is_some_and(|l| l.starts_with("plummer,600,direct,,")), "{rows}");
}

/// Ctrl-C during the first step of a run whose step is long (N = 300000 on 2 threads: 22 s at
/// the CPU backend's nominal rate, so it needs --allow-slow): --allow-slow warns once, and the
/// stopped step leaves the velocities synchronised, so writing the state needs no force
/// evaluation and none is announced.
#[test]
fn ctrl_c_before_any_step_finished_announces_no_closing_force_evaluation() {
    let dir = scratch("bad", "first-step");
    let end = dir.join("end.csv");
    let mut cmd = Command::new(BIN);
    cmd.args(["--headless", "--backend", "cpu", "--init", "plummer", "--bodies", "300000", "--frames", "1000", "--no-overlay", "--allow-slow"])
        .args(["--width", "32", "--height", "32"])
        .arg("--save-state")
        .arg(&end)
        .env("RUST_LOG", "info")
        .env("RAYON_NUM_THREADS", "2")
        .env("NBODY_TEST_HOLD", "step");
    let run = signals::start(cmd, &dir);
    run.signal(Signal::SIGINT);
    let o = run.wait();
    let all = o.text();
    assert_eq!(o.status.code(), Some(130), "{all}");
    assert!(all.contains(", 0 steps"), "{all}");
    assert_eq!(all.matches("running anyway (--allow-slow)").count(), 1, "{all}");
    assert!(!all.contains("one more force evaluation"), "{all}");
    assert_eq!(state_rows(&end).len(), 300_000, "{all}");
}

#[test]
fn without_frames_ctrl_c_is_the_normal_end() {
    let dir = scratch("bad", "until-ctrl-c");
    let (run, state, shot) = announced_run(&dir, None, &[]);
    run.signal_like_timeout(Signal::SIGINT);
    let o = run.wait();
    assert_eq!(o.status.code(), Some(0), "{}", o.text());
    assert_eq!(state_rows(&state).len(), 512);
    assert!(shot.is_file());
}

#[test]
fn a_diverging_run_fails_and_saves_its_last_finite_state() {
    let dir = scratch("bad", "diverge");
    let state = dir.join("state.csv");
    let s = state.to_str().expect("utf-8");
    let o = run(&demo(&["--dt", "1e30", "--frames", "20", "--diagnostics-interval", "1", "--save-state", s]));
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "a diverged run exits non-zero:\n{all}");
    assert!(all.contains("diverged") && all.contains("--dt") && all.contains("--softening"), "cause and remedy:\n{all}");
    let rows = state_rows(&state);
    assert_eq!(rows.len(), 64, "{all}");
    assert!(rows.iter().flatten().all(|v| v.is_finite()), "the saved state is finite (the last finite one)");
    // And it can start the next run.
    let o = run(&demo(&["--init", s, "--frames", "1"]));
    assert!(o.status.success(), "the saved state is a valid --init:\n{}", report(&o));
}

/// A `--dt` too large for the closest encounters, though the run stays finite: the summary gives
/// the relative energy change and the remedy, and the exit status stays 0. At a fitting `--dt`
/// the change is given without a warning.
#[test]
fn a_large_dt_that_stays_finite_is_reported_with_its_energy_change() {
    let line = |dt: &str| {
        let o = run(&demo(&["--init", "plummer", "--dt", dt, "--frames", "20", "--diagnostics-interval", "1"]));
        assert_eq!(o.status.code(), Some(0), "{}", report(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines().find(|l| l.contains("energy change")).unwrap_or_else(|| panic!("no energy change in:\n{}", report(&o))).to_string()
    };
    let bad = line("0.2");
    assert!(bad.contains("warning:") && bad.contains("over 10 %") && bad.contains("--dt 0.2") && bad.contains("smaller --dt"), "{bad}");
    let good = line("0.01");
    assert!(!good.contains("warning"), "{good}");
}

#[test]
fn the_overlay_never_changes_a_setting() {
    // Values outside the overlay widgets' old ranges (steps 1000, dt 1.0), with and without the
    // overlay: the saved states must be the same bits.
    let dir = scratch("bad", "overlay-bits");
    let mut saved = Vec::new();
    for (name, overlay) in [("with", true), ("without", false)] {
        let path = dir.join(format!("{name}.csv"));
        let p = path.to_str().expect("utf-8").to_string();
        let mut extra = vec!["--init", "ball", "--bodies", "32", "--frames", "3", "--dt", "1.5", "--softening", "2", "--steps-per-frame", "1500"];
        extra.extend(["--save-state", &p]);
        if !overlay {
            extra.push("--no-overlay");
        }
        let o = run(&demo(&extra));
        assert!(o.status.success(), "{name} the overlay:\n{}", report(&o));
        saved.push(std::fs::read(&path).expect("state"));
    }
    assert_eq!(saved[0], saved[1], "the overlay changed the run");
}
