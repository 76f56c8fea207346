//! The windowed demo's keyboard controls, driven under Xvfb with synthetic key presses
//! (xdotool): space pauses (two screenshots taken while paused are the same image), `s` writes a
//! screenshot, Esc quits with exit code 0 and the outputs written; a scene key loads its scene at
//! its own N. CPU backend, no overlay (its plots change every frame), small N.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nbody-interop");

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("controls-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

#[test]
fn space_pauses_s_saves_a_screenshot_and_escape_quits() {
    let have = |tool: &str| Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
    let missing: Vec<_> = ["xvfb-run", "xdotool"].into_iter().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        assert!(std::env::var_os("CI").is_none(), "CI needs {missing:?} (apt-get install xvfb xdotool)");
        println!("skipped: {missing:?} not installed");
        return;
    }
    let dir = scratch("keys");
    let state = dir.join("state.csv");
    // Each step waits for what the demo shows (its first frame, the focus, each screenshot
    // file, its exit), never for a guessed time; `timeout` only guards against a hang.
    let script = format!(
        r#"NBODY_TEST_READY=ready '{bin}' --backend cpu --bodies 256 --width 320 --height 240 --no-overlay --save-state '{state}' & pid=$!
until [ -e ready ]; do kill -0 $pid 2>/dev/null || {{ echo "ended before its first frame"; wait $pid; echo "exit=$?"; exit 3; }}; sleep 0.05; done
wid=$(xdotool search --name '^nbody-interop$' 2>/dev/null | head -1)
[ -z "$wid" ] && {{ echo "no window"; kill $pid; exit 3; }}
# Real (XTEST) key presses go to the focused window; synthetic XSendEvent ones are ignored by winit.
until [ "$(xdotool getwindowfocus 2>/dev/null)" = "$wid" ]; do xdotool windowfocus "$wid" 2>/dev/null; sleep 0.05; done
shots() {{ ls nbody-interop-*.png 2>/dev/null | wc -l; }}
xdotool key space
xdotool key s
until [ "$(shots)" -ge 1 ]; do sleep 0.05; done
xdotool key s
until [ "$(shots)" -ge 2 ]; do sleep 0.05; done
xdotool key Escape
wait $pid; echo "exit=$?""#,
        bin = BIN,
        state = state.display()
    );
    let o = Command::new("timeout")
        .args(["-s", "KILL", "600", "xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "sh", "-c", &script])
        .current_dir(&dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("exit=0"), "Esc did not end the demo with exit 0:\n{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let mut shots: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read scratch dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    shots.sort();
    assert_eq!(shots.len(), 2, "two presses of s, two screenshots: {shots:?}\n{err}");
    let a = std::fs::read(&shots[0]).expect("first screenshot");
    let b = std::fs::read(&shots[1]).expect("second screenshot");
    assert!(a.starts_with(b"\x89PNG"), "a PNG");
    assert_eq!(a, b, "paused with space: the two frames must be the same image");
    assert!(state.is_file(), "Esc still writes --save-state:\n{err}");
}

/// Key 2 after the figure-eight (N = 3) loads the galaxies at their own N (`--bodies` here), not
/// at the three bodies in force: the state saved on Esc holds that many bodies.
#[test]
fn a_scene_key_loads_the_scene_at_its_own_n() {
    let have = |tool: &str| Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
    let missing: Vec<_> = ["xvfb-run", "xdotool"].into_iter().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        assert!(std::env::var_os("CI").is_none(), "CI needs {missing:?} (apt-get install xvfb xdotool)");
        println!("skipped: {missing:?} not installed");
        return;
    }
    let dir = scratch("scene-key");
    let state = dir.join("state.csv");
    // The screenshot (`s`, pressed after `2`) is taken at the end of the frame that applied the
    // reset, so once it exists the galaxies are in force.
    let script = format!(
        r#"NBODY_TEST_READY=ready '{bin}' --backend cpu --init figure-eight --bodies 300 --width 320 --height 240 --no-overlay --save-state '{state}' & pid=$!
until [ -e ready ]; do kill -0 $pid 2>/dev/null || {{ echo "ended before its first frame"; wait $pid; echo "exit=$?"; exit 3; }}; sleep 0.05; done
wid=$(xdotool search --name '^nbody-interop$' 2>/dev/null | head -1)
[ -z "$wid" ] && {{ echo "no window"; kill $pid; exit 3; }}
until [ "$(xdotool getwindowfocus 2>/dev/null)" = "$wid" ]; do xdotool windowfocus "$wid" 2>/dev/null; sleep 0.05; done
xdotool key 2
xdotool key s
until ls nbody-interop-*.png >/dev/null 2>&1; do sleep 0.05; done
xdotool key Escape
wait $pid; echo "exit=$?""#,
        bin = BIN,
        state = state.display()
    );
    let o = Command::new("timeout")
        .args(["-s", "KILL", "600", "xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "sh", "-c", &script])
        .current_dir(&dir)
        .env("RUST_LOG", "warn")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("exit=0"), "Esc did not end the demo with exit 0:\n{out}\n{err}");
    let csv = std::fs::read_to_string(&state).unwrap_or_else(|e| panic!("--save-state {}: {e}\n{err}", state.display()));
    let bodies = csv.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit() || c == '-')).count();
    assert_eq!(bodies, 300, "key 2 loads the galaxies at --bodies 300, not at the figure-eight's 3:\n{err}");
}
