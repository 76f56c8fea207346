//! The windowed demo's keyboard controls, driven under Xvfb with synthetic key presses
//! (xdotool): space pauses (two screenshots taken while paused are the same image), `s` writes a
//! screenshot, Esc quits with exit code 0 and the outputs written. CPU backend, no overlay (its
//! plots change every frame), small N.

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
    let script = format!(
        r#"'{bin}' --backend cpu --bodies 256 --width 320 --height 240 --no-overlay --save-state '{state}' & pid=$!
for i in $(seq 100); do
  wid=$(xdotool search --name '^nbody-interop$' 2>/dev/null | head -1)
  [ -n "$wid" ] && break; sleep 0.1
done
[ -z "$wid" ] && {{ echo "no window"; kill $pid; exit 3; }}
sleep 1
# Real (XTEST) key presses go to the focused window; synthetic XSendEvent ones are ignored by winit.
# Under load the window may not take the focus at once: retry until it has it (up to 5 s).
for i in $(seq 50); do
  xdotool windowfocus "$wid" 2>/dev/null
  [ "$(xdotool getwindowfocus 2>/dev/null)" = "$wid" ] && break; sleep 0.1
done
xdotool key space; sleep 1
xdotool key s; sleep 1
xdotool key s; sleep 1
xdotool key Escape
for i in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && {{ echo "still running after Escape"; kill -INT $pid; }}
wait $pid; echo "exit=$?""#,
        bin = BIN,
        state = state.display()
    );
    let o = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1280x800x24", "sh", "-c", &script])
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
