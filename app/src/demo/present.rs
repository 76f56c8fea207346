//! Which route the windowed demo's window takes (`--present`, [`Present`]) and why.
//!
//! `auto`: the window's own GL context (native) where CUDA shares it, or where CUDA is not
//! wanted (`--backend cpu`) or not there at all; else the copy route (frames made on the CUDA
//! device's EGL device, [`CopyWindow`]); else native again, where the backend selection falls
//! back to the CPU with its reason. When no route shows a window, the error lists every route
//! tried, each with its own error.

use anyhow::{anyhow, Context as _};
use winit::event_loop::ActiveEventLoop;

use crate::backend::select::BackendChoice;
use crate::cli::{DemoArgs, Present};
use crate::cuda::session::cuda_shares_current_gl;
use crate::gfx::copy_window::CopyWindow;
use crate::gfx::present::DemoWindow;
use crate::gfx::window::{WindowContext, REMEDIES};

/// What to do when the copy route failed.
const COPY_REMEDIES: &str = "the copy route needs an EGL device (the NVIDIA driver's libEGL_nvidia.so.0 through glvnd's \
     libEGL.so.1, or Mesa's software device) and a window system softbuffer can draw into (X11 or Wayland); \
     --present native uses the window's own GL; --headless needs no window";

/// The window's title.
const TITLE: &str = "nbody-interop";

/// Open the window by the route `args.present` asks for. Returns the window and, when `auto`
/// passed over a route, a note that says which and why (for the log).
///
/// # Errors
/// The route asked for failed, or (`auto`) every route failed: the message lists each.
pub(super) fn open(event_loop: &ActiveEventLoop, args: &DemoArgs) -> anyhow::Result<(DemoWindow, Option<String>)> {
    let (w, h, vsync) = (args.width, args.height, !args.no_vsync);
    match args.present {
        Present::Native => Ok((DemoWindow::Native(WindowContext::new(event_loop, TITLE, w, h, vsync)?), None)),
        Present::Copy => {
            let c = CopyWindow::new(event_loop, TITLE, w, h, vsync).map_err(|e| anyhow!("--present copy: {e:#}\nremedies: {COPY_REMEDIES}"))?;
            Ok((DemoWindow::Copy(c), None))
        }
        Present::Auto => auto(event_loop, args),
    }
}

/// `--present auto`; see the module docs.
fn auto(event_loop: &ActiveEventLoop, args: &DemoArgs) -> anyhow::Result<(DemoWindow, Option<String>)> {
    let (w, h, vsync) = (args.width, args.height, !args.no_vsync);
    let mut tried = Vec::new();
    let mut native_works = false;
    match WindowContext::try_routes(event_loop, TITLE, w, h, vsync) {
        Ok(native) if args.backend == BackendChoice::Cpu => return Ok((DemoWindow::Native(native), None)),
        Ok(native) => match cuda_shares_current_gl() {
            Ok(Ok(())) => return Ok((DemoWindow::Native(native), None)),
            // No CUDA at all: the copy route would gain nothing; the backend falls back to the CPU.
            Err(e) => {
                tracing::debug!("window: native route ({e:#})");
                return Ok((DemoWindow::Native(native), None));
            }
            Ok(Err(why)) => {
                native_works = true;
                tried.push(format!("native: CUDA cannot share the window's GL ({}): {why}", native.info.renderer));
                // What the doctor's checks find behind it (a remote display, PRIME, a container).
                if let Some(f) = crate::doctor::fallback::explain_here(&native.info, &why.to_string()) {
                    tried.push(f.sentence());
                }
                // Dropped here, before the copy route makes its own context current.
                drop(native);
            }
        },
        Err(failed) => tried.extend(failed.into_iter().map(|f| format!("native, {f}"))),
    }
    match CopyWindow::new(event_loop, TITLE, w, h, vsync) {
        Ok(c) => return Ok((DemoWindow::Copy(c), Some(format!("window: the copy route, because {}", tried.join("; "))))),
        Err(e) => tried.push(format!("copy: {e:#}")),
    }
    let listed = tried.iter().enumerate().map(|(i, t)| format!("{}. {t}", i + 1)).collect::<Vec<_>>().join("\n  ");
    if native_works {
        // The window's GL works without CUDA: the backend selection decides (CPU fallback or error).
        let native = WindowContext::new(event_loop, TITLE, w, h, vsync).context("opening the window again")?;
        return Ok((DemoWindow::Native(native), Some(format!("window: the native route without CUDA; tried:\n  {listed}"))));
    }
    Err(anyhow!("no window could show the frames; tried, in order:\n  {listed}\nremedies: {REMEDIES}"))
}
