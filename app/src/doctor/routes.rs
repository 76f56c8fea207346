//! The routes the demo takes with its defaults (`--present auto`, `--backend auto`, `--interop
//! map`) on the facts seen, and why: the same decisions as `demo::present` (the window) and
//! `backend::select` (the backend), predicted from [`Facts`] instead of made.

use serde::Serialize;

use super::checks::gl::{classify, display_kind, shares_line, DisplayKind};
use super::facts::{ContextFact, CudaFact, DriverFact, Facts, JitFact, SharesFact};

/// One decision: the route taken and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// The route: `native`, `copy` or `none` (window); `cuda`, `cpu` or `none` (backend);
    /// `map` or `none` (storage).
    pub route: String,
    /// Why.
    pub why: String,
}

impl Route {
    fn new(route: &str, why: impl Into<String>) -> Self {
        Self { route: route.into(), why: why.into() }
    }
}

/// The demo's routes with its defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Routes {
    /// How the window shows frames (`--present auto`): `native`, `copy`, or `none` (no display,
    /// or no route works: the windowed demo stops with an error).
    pub window: Route,
    /// The backend of the run that [`Routes::interop`] is about (`--backend auto`): the windowed
    /// run where there is a display, else the `--headless` run.
    pub backend: Route,
    /// How positions reach GL (`--interop map`, the default): `map`, or `none` on the CPU backend.
    pub storage: Route,
    /// What `--headless` does: `cuda`, `cpu`, or `none` (no headless GL context).
    pub headless: Route,
    /// True when that run has CUDA interop (the exit status is then 0).
    pub interop: bool,
}

/// Why CUDA cannot run at all (no driver, no device, PTX that does not load), if so.
fn cuda_missing(f: &Facts) -> Option<String> {
    match (&f.driver, &f.cuda, &f.jit) {
        (DriverFact::Missing(_), _, _) => Some("no CUDA driver library (see driver)".into()),
        (_, CudaFact::InitFailed(e), _) => Some(format!("cuInit failed: {e}")),
        (_, CudaFact::NotTried, _) => Some("CUDA was not asked".into()),
        (_, CudaFact::Devices(d), _) if d.is_empty() => Some("no CUDA device".into()),
        (_, _, JitFact::Failed(_)) => Some("the embedded PTX does not load (see ptx)".into()),
        _ => None,
    }
}

/// The backend `auto` makes on a context whose `cuGLGetDevices` answer is `shares`, named
/// `what` (`the window's GL`, `the headless GL on …`).
fn backend_on(f: &Facts, shares: &SharesFact, what: &str) -> Route {
    if let Some(why) = cuda_missing(f) {
        return Route::new("cpu", format!("CUDA unavailable: {why}"));
    }
    match shares {
        SharesFact::Lists(d) if !d.is_empty() => Route::new("cuda", format!("CUDA device {} shares {what}", d[0])),
        other => Route::new("cpu", format!("CUDA cannot share {what}: {}", shares_line(other))),
    }
}

/// The `--headless` run: its EGL device and backend.
fn headless(f: &Facts) -> Route {
    match &f.headless {
        ContextFact::Made { gl, shares } => {
            let on = format!("the headless GL on EGL device {} ({})", gl.egl_device.as_deref().unwrap_or("?"), gl.renderer);
            backend_on(f, shares, &on)
        }
        ContextFact::Failed(e) => Route::new("none", format!("no headless GL context: {e}")),
        ContextFact::NotTried(why) => Route::new("none", why.clone()),
    }
}

/// The window's route and its backend, as `demo::present`'s `auto` chooses them.
fn window(f: &Facts, headless: &Route) -> (Route, Route) {
    let copy = |why: String| {
        let backend = Route::new(&headless.route, format!("copy route: {}", headless.why));
        match &f.headless {
            ContextFact::Made { .. } => Some((Route::new("copy", why), backend)),
            _ => None,
        }
    };
    match &f.window {
        ContextFact::NotTried(why) => (Route::new("none", why.clone()), Route::new("none", "no window")),
        ContextFact::Made { gl, shares } => {
            let what = format!("the window's GL ({})", gl.renderer);
            match shares {
                SharesFact::Lists(d) if !d.is_empty() => (Route::new("native", format!("CUDA shares {what}")), backend_on(f, shares, &what)),
                SharesFact::NoCuda(why) => (
                    Route::new("native", format!("no CUDA at all ({why}): the copy route would gain nothing")),
                    Route::new("cpu", format!("CUDA unavailable: {why}")),
                ),
                other => {
                    let why = format!("CUDA cannot share {what}, {}: {}", classify(&gl.vendor, &gl.renderer).describe(), shares_line(other));
                    copy(why.clone()).unwrap_or_else(|| {
                        (Route::new("native", format!("{why}; the copy route has no headless GL context")), Route::new("cpu", why))
                    })
                }
            }
        }
        ContextFact::Failed(e) => copy(format!("no GL context for the window: {e}"))
            .unwrap_or_else(|| (Route::new("none", format!("no window could show the frames: {e}")), Route::new("none", "no window"))),
    }
}

/// The routes on `f`.
pub fn routes(f: &Facts) -> Routes {
    let headless = headless(f);
    let has_display = display_kind(&f.env) != DisplayKind::None;
    let (window, windowed_backend) = window(f, &headless);
    let backend =
        if has_display { windowed_backend } else { Route::new(&headless.route, format!("no display, so with --headless: {}", headless.why)) };
    let storage = if backend.route == "cuda" {
        Route::new("map", "--interop map (the default): the VBOs registered once, mapped and unmapped every frame")
    } else {
        Route::new("none", "no CUDA: the CPU backend uploads the positions with glBufferSubData")
    };
    let interop = backend.route == "cuda";
    Routes { window, backend, storage, headless, interop }
}
