//! The binary in a window under Xvfb: a windowed run draws and exits, a window without any GL
//! lists every route it tried, a window closed mid-run ends the demo cleanly, and `doctor` names
//! the window's GL. CPU backend, small N. A test whose programs (Xvfb, the X utilities, Python)
//! are missing here is reported as ignored; on CI, which installs them, it fails.

use std::process::Command;

use nbody_app::doctor::EXIT_NO_INTEROP;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/tools.rs"]
mod tools;

use cli::{assert_no_panic, check_screenshot, out_err, scratch, BIN};
use tools::{x_lock, Needs};

/// Xvfb through `xvfb-run`.
const XVFB: Needs = Needs { tools: &["xvfb-run"], packages: "xvfb" };
/// Xvfb, `xwininfo` to find the window and Python (ctypes and libX11) to close it.
const XVFB_CLOSE: Needs = Needs { tools: &["xvfb-run", "xwininfo", "python3"], packages: "xvfb x11-utils python3" };

fn main() {
    tools::run(tools::tool_tests![
        windowed_under_xvfb_draws_and_exits => XVFB,
        window_without_gl_lists_every_route_and_the_remedy => XVFB,
        closing_the_window_mid_run_exits_cleanly => XVFB_CLOSE,
        doctor_under_xvfb_names_the_windows_gl => XVFB,
    ])
}

/// A windowed run under Xvfb draws its frames (bodies and overlay in the screenshot), logs the
/// GL route it took and exits 0.
fn windowed_under_xvfb_draws_and_exits() {
    let _x = x_lock();
    let dir = scratch("windowed", "windowed");
    let shot = dir.join("w.png");
    let o = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1280x800x24", BIN])
        .args(["--backend", "cpu", "--bodies", "1024", "--frames", "5", "--width", "800", "--height", "500"])
        .arg("--screenshot")
        .arg(&shot)
        .env("RUST_LOG", "info")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_no_panic(&o);
    assert!(out.contains("5 frames"), "summary line missing:\n{out}");
    assert!(err.contains("window GL context") && err.contains("GLX"), "the route taken is logged (GLX first on X11):\n{err}");
    check_screenshot(&shot, 800, 500);
}

/// With no GL vendor library that works on either route, the window's error lists each route
/// tried, in order, with its own error, and the remedies; exit 1, no panic.
fn window_without_gl_lists_every_route_and_the_remedy() {
    let _x = x_lock();
    // An X server without the GLX extension fails the GLX route; glvnd then finds no EGL vendor
    // (ICD) file and the EGL route fails too, and so does the copy route's EGL device.
    let o = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 640x480x24 -extension GLX", BIN, "--backend", "cpu", "--bodies", "64", "--frames", "2"])
        .env("RUST_LOG", "warn")
        .env("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent/nbody-no-such-vendor.json")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert_no_panic(&o);
    // `--present auto` goes on to the copy route, whose EGL device list is empty here too.
    for words in [
        "tried, in order",
        "1. native, GLX (X11, glvnd)",
        "2. native, EGL on the window system",
        "3. copy: ",
        "--headless",
        "DISPLAY",
        "--present copy",
    ] {
        assert!(err.contains(words), "no {words:?} in:\n{err}");
    }
    assert_eq!(err.matches("tried, in order").count(), 1, "the error is printed once:\n{err}");
}

/// Python (ctypes + libX11) that sends WM_DELETE_WINDOW to the window given in argv[1], as a
/// window manager's close button does.
const WM_CLOSE_PY: &str = r#"
import ctypes, ctypes.util, sys
x = ctypes.CDLL(ctypes.util.find_library("X11"))
x.XOpenDisplay.restype = ctypes.c_void_p
x.XOpenDisplay.argtypes = [ctypes.c_char_p]
x.XInternAtom.restype = ctypes.c_ulong
x.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
class Msg(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("l", ctypes.c_long * 5)]
class Ev(ctypes.Union):
    _fields_ = [("xclient", Msg), ("pad", ctypes.c_long * 24)]
x.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.POINTER(Ev)]
x.XFlush.argtypes = [ctypes.c_void_p]
d = x.XOpenDisplay(None)
w = int(sys.argv[1], 0)
e = Ev()
e.xclient.type = 33
e.xclient.window = w
e.xclient.message_type = x.XInternAtom(d, b"WM_PROTOCOLS", 0)
e.xclient.format = 32
e.xclient.l[0] = x.XInternAtom(d, b"WM_DELETE_WINDOW", 0)
x.XSendEvent(d, w, 0, 0, ctypes.byref(e))
x.XFlush(d)
"#;

/// A window closed mid-run (no `--frames`) ends the demo with exit 0 and its summary. The time
/// from the close to the exit is printed, not asserted: speed lives in benchmarks.
fn closing_the_window_mid_run_exits_cleanly() {
    let _x = x_lock();
    let dir = scratch("windowed", "close");
    let py = dir.join("wm_close.py");
    std::fs::write(&py, WM_CLOSE_PY).expect("write wm_close.py");
    // No --frames: the demo runs until the window is closed. The script waits for its first
    // frame (NBODY_TEST_READY), closes the window, and prints how long the process took to exit;
    // `timeout` only guards against a hang.
    let script = format!(
        r#"NBODY_TEST_READY=ready '{bin}' --backend cpu --bodies 512 --width 640 --height 400 & pid=$!
until [ -e ready ]; do kill -0 $pid 2>/dev/null || {{ echo "ended before its first frame"; exit 3; }}; sleep 0.05; done
wid=$(xwininfo -root -tree | awk '/"nbody-interop"/ {{print $1; exit}}')
[ -z "$wid" ] && {{ echo "no window"; kill $pid; exit 3; }}
python3 '{py}' "$wid"
t0=$(date +%s%N); wait $pid; rc=$?; t1=$(date +%s%N)
echo "exit=$rc close_ms=$(( (t1 - t0) / 1000000 ))""#,
        bin = BIN,
        py = py.display()
    );
    let o = Command::new("timeout")
        .args(["-s", "KILL", "600", "xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "sh", "-c", &script])
        .current_dir(&dir)
        .env("RUST_LOG", "info")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "script failed:\nstdout:\n{out}\nstderr:\n{err}");
    assert_no_panic(&o);
    assert!(out.contains("exit=0"), "the demo did not exit 0 after close:\n{out}\n{err}");
    let ms = out.split("close_ms=").nth(1).map(str::trim).unwrap_or("?");
    println!("exit {ms} ms after the window was closed");
    assert!(out.contains("backend: CPU f32"), "no summary line:\n{out}");
}

/// Under Xvfb the window's GL is Mesa's llvmpipe, named as such; without CUDA the demo takes the
/// native route with the CPU backend.
fn doctor_under_xvfb_names_the_windows_gl() {
    let _x = x_lock();
    let o = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1280x800x24", BIN, "doctor", "--json"])
        .env("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("spawn xvfb-run");
    let (out, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(i32::from(EXIT_NO_INTEROP)), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{out}"));
    let check = |n: &str| v["checks"].as_array().and_then(|l| l.iter().find(|c| c["name"] == n)).cloned().unwrap_or_default();
    assert_eq!(check("display")["verdict"], "ok", "{v}");
    let window = check("window-gl");
    assert_eq!(window["verdict"], "problem", "{v}");
    assert!(window["evidence"].as_str().is_some_and(|e| e.contains("llvmpipe") && e.contains("Mesa's software rasterizer")), "{window}");
    assert_eq!(check("remote-display")["verdict"], "problem", "{v}");
    assert_eq!(v["routes"]["window"]["route"], "native", "{v}");
    assert_eq!(v["routes"]["backend"]["route"], "cpu", "{v}");
}
