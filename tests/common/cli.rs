//! What the tests that run the `nbody-interop` binary share: its path, a scratch folder per
//! test, running it, its output as text, and the screenshots it writes, decoded and checked.

// Each test crate that includes this file uses part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::BufReader;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_nbody-interop");

/// A fresh scratch folder `<prefix>-<name>-<pid>` under Cargo's temporary folder for tests.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Runs the binary with `args` and `RUST_LOG=warn`; its output.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run_with(args, &[])
}

/// Runs the binary with `args`, `RUST_LOG=warn` and the variables `vars` (which may set
/// `RUST_LOG` otherwise); its output.
pub fn run_with<S: AsRef<OsStr>>(args: &[S], vars: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("RUST_LOG", "warn");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn nbody-interop")
}

/// A run's standard output and standard error.
pub fn out_err(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A run's exit code, the signal that ended it, its stdout and its stderr, for assertions (and
/// their messages) over all it said.
pub fn report(o: &Output) -> String {
    format!(
        "exit {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        o.status.signal(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Asserts that the run did not panic (no "panicked" on either stream).
pub fn assert_no_panic(o: &Output) {
    let (out, err) = out_err(o);
    assert!(!err.contains("panicked") && !out.contains("panicked"), "the binary panicked:\n{err}");
}

/// A screenshot of the binary: an RGBA8 PNG, decoded.
pub struct Image {
    /// Width in pixels.
    pub w: usize,
    /// Height in pixels.
    pub h: usize,
    /// `[h][w][4]` bytes, rows top first.
    pub rgba: Vec<u8>,
}

impl Image {
    /// Decodes the PNG at `path`.
    ///
    /// # Panics
    /// It cannot be read, or it is not 8-bit RGBA.
    pub fn load(path: &Path) -> Self {
        let file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let mut reader = png::Decoder::new(BufReader::new(file)).read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size().expect("png size")];
        let info = reader.next_frame(&mut buf).expect("png data");
        assert_eq!(info.color_type, png::ColorType::Rgba, "screenshot is RGBA");
        assert_eq!(info.bit_depth, png::BitDepth::Eight, "screenshot is 8-bit");
        buf.truncate(info.buffer_size());
        Self { w: info.width as usize, h: info.height as usize, rgba: buf }
    }

    /// The pixel at column `x`, row `y` (top first).
    pub fn px(&self, x: usize, y: usize) -> [u8; 4] {
        let i = (y * self.w + x) * 4;
        [self.rgba[i], self.rgba[i + 1], self.rgba[i + 2], self.rgba[i + 3]]
    }

    /// Count pixels in the rectangle (x0..x1, y0..y1) for which `f` holds.
    pub fn count(&self, (x0, x1): (usize, usize), (y0, y1): (usize, usize), f: impl Fn([u8; 4]) -> bool) -> usize {
        let mut n = 0;
        for y in y0..y1.min(self.h) {
            for x in x0..x1.min(self.w) {
                n += usize::from(f(self.px(x, y)));
            }
        }
        n
    }
}

/// Bright pixel: a body sprite (or overlay text).
pub fn bright(p: [u8; 4]) -> bool {
    p[0].max(p[1]).max(p[2]) > 100
}

/// egui's dark panel fill: a neutral grey around 27.
pub fn panel_grey(p: [u8; 4]) -> bool {
    let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
    (r - g).abs() <= 3 && (g - b).abs() <= 3 && (15..=45).contains(&r)
}

/// Scene and overlay checks shared by the headless and windowed screenshots: the overlay is a
/// left side panel (default 360 points wide), the bodies are centred in the window.
pub fn check_screenshot(path: &Path, w: usize, h: usize) {
    let img = Image::load(path);
    assert_eq!((img.w, img.h), (w, h), "screenshot size");
    // Overlay: the panel region (well inside its 360-point default width) is mostly panel grey,
    // with some bright text on it.
    let panel = ((4, 330), (4, h - 4));
    let area = (panel.0 .1 - panel.0 .0) * (panel.1 .1 - panel.1 .0);
    let grey = img.count(panel.0, panel.1, panel_grey);
    assert!(grey * 2 > area, "overlay panel missing: {grey} of {area} pixels are panel grey");
    let text_px = img.count(panel.0, panel.1, bright);
    assert!(text_px > 500, "overlay text missing: only {text_px} bright pixels in the panel");
    // Scene: right of the panel, many bright body pixels on a mostly dark background.
    let scene = ((400, w), (0, h));
    let scene_area = (w - 400) * h;
    let body_px = img.count(scene.0, scene.1, bright);
    assert!(body_px > 300, "no bodies drawn: only {body_px} bright pixels in the scene");
    let dark = img.count(scene.0, scene.1, |p| p[0].max(p[1]).max(p[2]) < 40);
    assert!(dark * 3 > scene_area, "scene background is not dark: {dark} of {scene_area} dark pixels");
}
