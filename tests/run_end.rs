//! How a windowed run ends when its display goes away — the window destroyed by another X
//! client, the client's connection killed, the X server ended: it writes its state and its
//! screenshot (the last frame drawn) and exits 3, without a panic. CPU backend, under an Xvfb of
//! each test's own, driven with xdotool (reported as ignored without them; on CI, which installs
//! them, a failure).

use std::process::Command;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/tools.rs"]
mod tools;

use cli::{scratch, Image, BIN};
use tools::{x_lock, Needs};

/// The exit status of a run whose display went away (docs/troubleshooting.md).
const DISPLAY_LOST: i32 = 3;

/// Xvfb itself (each test starts its own), and xdotool to find and close the window.
const XVFB_KEYS: Needs = Needs { tools: &["Xvfb", "xdotool"], packages: "xvfb xdotool" };

fn main() {
    tools::run(tools::tool_tests![
        a_window_destroyed_by_another_client_writes_the_outputs => XVFB_KEYS,
        a_killed_connection_writes_the_outputs => XVFB_KEYS,
        the_x_server_ending_writes_the_outputs => XVFB_KEYS,
    ])
}

/// Bodies of the windowed runs.
const N: usize = 700;

/// A shell script that starts an Xvfb of its own (`$xpid`, its display found through
/// `-displayfd`), the demo in it with `--save-state` and `--screenshot` (`$pid`), waits for its
/// first frame (the ready file) and its window (`$wid`), runs `act`, and prints the demo's exit
/// status as `exit=N`. Every wait is for something the run shows, never a guessed time; the
/// caller's `timeout` only guards against a hang.
fn script(act: &str) -> String {
    format!(
        r#"Xvfb -displayfd 5 -screen 0 1280x800x24 -nolisten tcp 5>display.txt 2>xvfb.log & xpid=$!
until [ -s display.txt ]; do kill -0 $xpid 2>/dev/null || {{ echo "no Xvfb"; cat xvfb.log; exit 3; }}; sleep 0.05; done
export DISPLAY=:$(cat display.txt)
NBODY_TEST_READY=ready '{BIN}' --backend cpu --bodies {N} --width 480 --height 320 --save-state state.csv --screenshot shot.png > out.txt 2> err.txt & pid=$!
until [ -e ready ]; do kill -0 $pid 2>/dev/null || {{ echo "ended before its first frame"; wait $pid; echo "exit=$?"; kill $xpid; exit 3; }}; sleep 0.05; done
wid=$(xdotool search --name '^nbody-interop$' 2>/dev/null | head -1)
[ -z "$wid" ] && {{ echo "no window"; kill $pid $xpid; exit 3; }}
{act}
wait $pid; echo "exit=$?"
kill $xpid 2>/dev/null; wait $xpid 2>/dev/null; true"#
    )
}

/// Runs `act` against a windowed run and checks how it ended: exit [`DISPLAY_LOST`], no panic,
/// the state whole (N bodies) and the screenshot a PNG of the window's size.
fn display_goes_away(name: &str, act: &str) {
    let _x = x_lock();
    let dir = scratch("run-end", name);
    let o = Command::new("timeout")
        .args(["-s", "KILL", "600", "sh", "-c", &script(act)])
        .current_dir(&dir)
        .env("RUST_LOG", "warn")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("spawn sh");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let all = format!(
        "script stdout:\n{}\nscript stderr:\n{}\nrun stdout:\n{}\nrun stderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        read("out.txt"),
        read("err.txt")
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("exit={DISPLAY_LOST}")), "exit {DISPLAY_LOST} expected:\n{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(read("err.txt").contains("error: "), "the cause is said:\n{all}");
    let state = read("state.csv");
    let rows = state.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit() || c == '-')).count();
    assert_eq!(rows, N, "--save-state whole:\n{all}");
    let shot = dir.join("shot.png");
    assert!(shot.is_file(), "--screenshot:\n{all}");
    let img = Image::load(&shot);
    assert_eq!((img.w, img.h), (480, 320), "{all}");
    let px = img.rgba;
    assert!(px.chunks_exact(4).any(|p| p != &px[..4]), "the screenshot is a frame drawn, not a blank image:\n{all}");
}

/// Another client destroys the window (XDestroyWindow): winit's event loop fails; the run
/// writes its state from the backend and the screenshot from the last frame drawn.
fn a_window_destroyed_by_another_client_writes_the_outputs() {
    display_goes_away("windowclose", r#"xdotool windowclose "$wid""#);
}

/// Another client kills this one's connection (XKillClient): Xlib's I/O error handler writes
/// what the run holds and exits.
fn a_killed_connection_writes_the_outputs() {
    display_goes_away("windowkill", r#"xdotool windowkill "$wid""#);
}

/// The X server ends under the run.
fn the_x_server_ending_writes_the_outputs() {
    display_goes_away("xserver", "kill $xpid");
}
