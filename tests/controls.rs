//! The windowed demo under Xvfb, driven with real key presses (xdotool): space pauses (two
//! screenshots taken while paused are the same image), `s` writes a screenshot, Esc quits with
//! exit code 0 and the outputs written, a scene key loads the scene at its own N; the copy
//! present route shows in the window (an X dump) exactly the frame the demo made; and both
//! routes run under a Wayland compositor (Weston, headless). CPU backend, mostly without the
//! overlay (its plots change every frame), small N. A test whose programs are missing here is
//! reported as ignored; on CI, which installs them, it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/tools.rs"]
mod tools;

use cli::{panel_grey, scratch, Image, BIN};
use tools::Needs;

/// Xvfb through `xvfb-run`, and xdotool for the keys.
const XVFB_KEYS: Needs = Needs { tools: &["xvfb-run", "xdotool"], packages: "xvfb xdotool" };
/// As [`XVFB_KEYS`], and `xwd` to dump the window.
const XVFB_KEYS_DUMP: Needs = Needs { tools: &["xvfb-run", "xdotool", "xwd"], packages: "xvfb xdotool x11-apps" };
/// The Wayland compositor Weston.
const WESTON: Needs = Needs { tools: &["weston"], packages: "weston" };

fn main() {
    tools::run(tools::tool_tests![
        space_pauses_s_saves_a_screenshot_and_escape_quits => XVFB_KEYS,
        the_copy_route_shows_the_frames_in_the_window => XVFB_KEYS_DUMP,
        a_scene_key_loads_the_scene_at_its_own_n => XVFB_KEYS,
        both_routes_run_under_a_wayland_compositor => WESTON,
        the_overlay_gets_its_width_back_after_the_window_shrank => XVFB_KEYS,
    ])
}

/// The start of a window script: the demo with `args` in the background (`$pid`), waited for
/// until its first frame (the ready file), its window found (`$wid`) and focused: real (XTEST)
/// key presses go to the focused window; synthetic XSendEvent ones are ignored by winit.
fn launch(args: &str) -> String {
    format!(
        r#"NBODY_TEST_READY=ready '{BIN}' {args} & pid=$!
until [ -e ready ]; do kill -0 $pid 2>/dev/null || {{ echo "ended before its first frame"; wait $pid; echo "exit=$?"; exit 3; }}; sleep 0.05; done
wid=$(xdotool search --name '^nbody-interop$' 2>/dev/null | head -1)
[ -z "$wid" ] && {{ echo "no window"; kill $pid; exit 3; }}
until [ "$(xdotool getwindowfocus 2>/dev/null)" = "$wid" ]; do xdotool windowfocus "$wid" 2>/dev/null; sleep 0.05; done
"#
    )
}

/// Runs `script` with `sh` under a fresh Xvfb (1280×800×24) in `dir`, with `RUST_LOG=log`;
/// `timeout` only guards against a hang.
fn under_xvfb(dir: &Path, script: &str, log: &str) -> std::process::Output {
    Command::new("timeout")
        .args(["-s", "KILL", "600", "xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "sh", "-c", script])
        .current_dir(dir)
        .env("RUST_LOG", log)
        .output()
        .expect("spawn xvfb-run")
}

fn space_pauses_s_saves_a_screenshot_and_escape_quits() {
    let dir = scratch("controls", "keys");
    let state = dir.join("state.csv");
    // Each step waits for what the demo shows (its first frame, the focus, each screenshot
    // file, its exit), never for a guessed time; `timeout` only guards against a hang.
    let script = format!(
        r#"{start}shots() {{ ls nbody-interop-*.png 2>/dev/null | wc -l; }}
xdotool key space
xdotool key s
until [ "$(shots)" -ge 1 ]; do sleep 0.05; done
xdotool key s
until [ "$(shots)" -ge 2 ]; do sleep 0.05; done
xdotool key Escape
wait $pid; echo "exit=$?""#,
        start = launch(&format!("--backend cpu --bodies 256 --width 320 --height 240 --no-overlay --save-state '{}'", state.display()))
    );
    let o = under_xvfb(&dir, &script, "warn");
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

/// An X window dump (`xwd -id`) as RGB rows, top first: (width, height, pixels). Only the
/// ZPixmap, 32-bit, LSB-first form that a 24-bit TrueColor server (Xvfb) writes.
fn read_xwd(bytes: &[u8]) -> (usize, usize, Vec<[u8; 3]>) {
    let field = |i: usize| u32::from_be_bytes(bytes[i * 4..i * 4 + 4].try_into().expect("xwd header")) as usize;
    let (header, format, width, height, byte_order, bpp, line, ncolors) =
        (field(0), field(2), field(4), field(5), field(7), field(11), field(12), field(19));
    assert_eq!((format, bpp, byte_order), (2, 32, 0), "an xwd of a 24-bit TrueColor Xvfb screen (ZPixmap, 32 bpp, LSB first)");
    let data = &bytes[header + ncolors * 12..];
    let mut px = Vec::with_capacity(width * height);
    for y in 0..height {
        for x in 0..width {
            let p = &data[y * line + x * 4..y * line + x * 4 + 4];
            px.push([p[2], p[1], p[0]]);
        }
    }
    (width, height, px)
}

fn the_copy_route_shows_the_frames_in_the_window() {
    let dir = scratch("controls", "copy");
    // The window shows each frame one frame late: first its content changes from what it showed
    // at the first frame (nothing yet, or that frame), so a frame has been shown; then paused
    // (space) every frame is the same, and the X server's copy of the window is taken until two
    // dumps agree; then Esc ends the run and --screenshot writes the frame the demo made.
    let script = format!(
        r#"{start}xwd -id "$wid" -silent -out first.xwd
until sleep 0.1; xwd -id "$wid" -silent -out a.xwd; ! cmp -s first.xwd a.xwd; do :; done
xdotool key space
xwd -id "$wid" -silent -out a.xwd
until sleep 0.3; xwd -id "$wid" -silent -out b.xwd; cmp -s a.xwd b.xwd; do mv b.xwd a.xwd; done
xdotool key Escape
wait $pid; echo "exit=$?""#,
        start = launch("--backend cpu --present copy --bodies 2048 --width 320 --height 240 --no-overlay --screenshot shot.png")
    );
    let o = under_xvfb(&dir, &script, "info");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("exit=0"), "Esc did not end the demo with exit 0:\n{out}\n{err}");
    assert!(err.contains(r#"route="copy""#), "the log names the copy route:\n{err}");
    let (w, h, shown) = read_xwd(&std::fs::read(dir.join("a.xwd")).expect("the window's dump"));
    assert_eq!((w, h), (320, 240), "the window keeps its size");
    let made = Image::load(&dir.join("shot.png")).rgba;
    // Rounding cannot differ (the same RGBA8 bytes both ways), so every pixel must agree.
    let differ = shown.iter().zip(made.chunks_exact(4)).filter(|(s, m)| s[..] != m[..3]).count();
    assert_eq!(differ, 0, "{differ} of {} pixels of the window differ from the frame the demo made", w * h);
    let lit = shown.iter().filter(|p| p.iter().any(|&c| c > 64)).count();
    assert!(lit > 50, "the window shows bodies ({lit} lit pixels)");
}

/// Key 2 after the figure-eight (N = 3) loads the galaxies at their own N (`--bodies` here), not
/// at the three bodies in force: the state saved on Esc holds that many bodies.
fn a_scene_key_loads_the_scene_at_its_own_n() {
    let dir = scratch("controls", "scene-key");
    let state = dir.join("state.csv");
    // The screenshot (`s`, pressed after `2`) is taken at the end of the frame that applied the
    // reset, so once it exists the galaxies are in force.
    let script = format!(
        r#"{start}xdotool key 2
xdotool key s
until ls nbody-interop-*.png >/dev/null 2>&1; do sleep 0.05; done
xdotool key Escape
wait $pid; echo "exit=$?""#,
        start = launch(&format!(
            "--backend cpu --init figure-eight --bodies 300 --width 320 --height 240 --no-overlay --save-state '{}'",
            state.display()
        ))
    );
    let o = under_xvfb(&dir, &script, "warn");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("exit=0"), "Esc did not end the demo with exit 0:\n{out}\n{err}");
    let csv = std::fs::read_to_string(&state).unwrap_or_else(|e| panic!("--save-state {}: {e}\n{err}", state.display()));
    let bodies = csv.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit() || c == '-')).count();
    assert_eq!(bodies, 300, "key 2 loads the galaxies at --bodies 300, not at the figure-eight's 3:\n{err}");
}

/// Both window routes under a Wayland compositor (Weston's headless backend: `wl_shm`, no
/// GPU): the native route through EGL on Wayland, the copy route through softbuffer's `wl_shm`
/// buffers. Each runs 20 frames, writes its screenshot and exits 0.
fn both_routes_run_under_a_wayland_compositor() {
    let dir = scratch("controls", "wayland");
    let runtime = dir.join("xdg");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod 700");
    // Weston makes its socket once it listens; each run waits for it, never for a guessed time.
    let script = format!(
        r#"weston --backend=headless-backend.so --socket=wl-nbody --idle-time=0 > weston.log 2>&1 & w=$!
until [ -e "$XDG_RUNTIME_DIR/wl-nbody" ]; do kill -0 $w 2>/dev/null || {{ echo "weston ended"; cat weston.log; exit 3; }}; sleep 0.05; done
for p in native copy; do
  WAYLAND_DISPLAY=wl-nbody '{bin}' --backend cpu --present $p --bodies 512 --width 320 --height 240 --frames 20 --screenshot $p.png > $p.log 2>&1
  echo "$p exit=$?"
done
kill $w"#,
        bin = BIN
    );
    let o = Command::new("timeout")
        .args(["-s", "KILL", "600", "sh", "-c", &script])
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("DISPLAY")
        .env("RUST_LOG", "info")
        .output()
        .expect("spawn weston");
    let out = String::from_utf8_lossy(&o.stdout);
    for p in ["native", "copy"] {
        let log = std::fs::read_to_string(dir.join(format!("{p}.log"))).unwrap_or_default();
        assert!(out.contains(&format!("{p} exit=0")), "--present {p} under Weston:\n{out}\n{log}");
        assert!(log.contains(&format!(r#"route="{p}""#)), "--present {p} names its route:\n{log}");
        assert!(dir.join(format!("{p}.png")).is_file(), "--present {p} wrote its screenshot:\n{log}");
    }
}

/// The overlay panel (360 points wide) keeps its width across a window shrunk to 200 pixels and
/// enlarged again: in a screenshot (`s`) after each resize, the panel's grey reaches past 330
/// pixels once the window is wide again (egui alone kept the squeezed 200).
fn the_overlay_gets_its_width_back_after_the_window_shrank() {
    let dir = scratch("controls", "panel-width");
    // `windowsize --sync` waits until the window has its new size; each screenshot is taken at
    // the end of the frame that handled the key, so it shows that size.
    let script = format!(
        r#"{start}shot() {{ xdotool key s; until [ "$(ls nbody-interop-*.png 2>/dev/null | wc -l)" -ge "$1" ]; do sleep 0.05; done; }}
xdotool windowsize --sync "$wid" 200 400
shot 1
xdotool windowsize --sync "$wid" 800 400
shot 2
xdotool key Escape
wait $pid; echo "exit=$?""#,
        start = launch("--backend cpu --bodies 256 --width 800 --height 400")
    );
    let o = under_xvfb(&dir, &script, "warn");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("exit=0"), "the run did not end with exit 0:\n{out}\n{err}");
    let mut shots: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read scratch dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    shots.sort_by_key(|p| p.to_string_lossy().rsplit('-').next().and_then(|k| k.trim_end_matches(".png").parse::<u32>().ok()));
    assert_eq!(shots.len(), 2, "{shots:?}\n{err}");
    let img = Image::load(&shots[1]);
    let (w, h) = (img.w, img.h);
    assert_eq!(w, 800, "the window is wide again");
    // egui's dark panel fill, in most rows of column 330.
    let rows = (0..h).filter(|&y| panel_grey(img.px(330, y))).count();
    assert!(rows * 2 > h, "the panel is narrow after the window grew back: {rows} of {h} rows of column 330 are panel grey");
}
