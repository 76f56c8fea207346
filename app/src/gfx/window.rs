//! The windowed GL context (winit + glutin-winit): a window, its GL surface and a context made
//! current on the event-loop thread, with the proof of that ([`CurrentContext`]).
//!
//! Like the headless context it asks for desktop GL 3.3 core first and falls back to OpenGL ES
//! 3.0 (`NBODY_GL_API=gles` skips desktop GL).
//!
//! # Routes
//! A window's GL context comes through one of two window-system APIs, tried in this order
//! ([`Route`], [`routes`]): on X11, **GLX** (through glvnd, which loads the GLX vendor library the
//! X server names: NVIDIA's `libGLX_nvidia.so.0` on an NVIDIA display, Mesa's elsewhere), then
//! **EGL on X11** (glvnd's `libEGL.so.1` and the vendor libraries its JSON files list); on
//! Wayland, EGL only. `NBODY_GL_ROUTE=glx` or `egl` tries that route alone. When every route
//! fails the error lists each with its own error, then the remedies.

use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use glutin::config::{ConfigTemplateBuilder, GlConfig as _};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::{Display, DisplayApiPreference, GlDisplay as _};
use glutin::prelude::{GlSurface as _, NotCurrentGlContext as _};
use glutin::surface::{SwapInterval, WindowSurface};
use glutin_winit::GlWindow as _;
use raw_window_handle::{HasDisplayHandle as _, HasWindowHandle as _, RawDisplayHandle};
use winit::dpi::PhysicalSize;
use winit::event_loop::ActiveEventLoop;
use winit::window::{Window, WindowAttributes};

use super::context::{force_gles, query_fns_loaded};
use super::gl::{CurrentContext, Gl};
use super::GlInfo;

/// The window and its GL objects. Field order is drop order: the GL surface, the context, and
/// last the window whose handle both of them hold.
struct WindowParts {
    surface: glutin::surface::Surface<WindowSurface>,
    context: glutin::context::PossiblyCurrentContext,
    window: Window,
}

/// A window with a current GL context. The window and its GL objects are shared by the clones of
/// the proof ([`CurrentContext`], e.g. the demo scene's), which keep them alive: they go with the
/// last of them.
pub struct WindowContext {
    current: CurrentContext,
    /// Vendor, renderer and version of the context.
    pub info: GlInfo,
    parts: std::rc::Rc<WindowParts>,
}

impl std::fmt::Debug for WindowContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowContext").field("info", &self.info).finish_non_exhaustive()
    }
}

/// A window-system API through which a window gets its GL context (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// GLX on X11, through glvnd's `libGLX.so.0` and the X server's GLX vendor library.
    Glx,
    /// EGL on the window system (X11 or Wayland), through `libEGL.so.1`.
    Egl,
}

impl Route {
    /// How the route is named in messages.
    pub fn name(self) -> &'static str {
        match self {
            Route::Glx => "GLX (X11, glvnd)",
            Route::Egl => "EGL on the window system",
        }
    }
}

/// The routes to try for a display, in order: X11 gets GLX then EGL, Wayland (and anything else)
/// EGL. `NBODY_GL_ROUTE` (`glx` or `egl`) narrows it to one.
///
/// # Errors
/// `NBODY_GL_ROUTE` holds another value, or asks for GLX on a display that is not X11.
pub fn routes(display: &RawDisplayHandle) -> anyhow::Result<Vec<Route>> {
    let x11 = matches!(display, RawDisplayHandle::Xlib(_) | RawDisplayHandle::Xcb(_));
    let all = if x11 { vec![Route::Glx, Route::Egl] } else { vec![Route::Egl] };
    match std::env::var("NBODY_GL_ROUTE").ok().as_deref().map(str::trim) {
        None | Some("") => Ok(all),
        Some(r) if r.eq_ignore_ascii_case("egl") => Ok(vec![Route::Egl]),
        Some(r) if r.eq_ignore_ascii_case("glx") && x11 => Ok(vec![Route::Glx]),
        Some(r) if r.eq_ignore_ascii_case("glx") => {
            anyhow::bail!("NBODY_GL_ROUTE=glx: GLX needs an X11 display, and this one is not; use egl or unset it")
        }
        Some(r) => anyhow::bail!("NBODY_GL_ROUTE={r}: unknown route; use glx or egl, or unset it to try both"),
    }
}

/// Checks `NBODY_GL_ROUTE` before any window opens: unset, empty, `glx` or `egl`.
///
/// # Errors
/// Another value, named with the accepted ones.
pub fn check_route_variable() -> anyhow::Result<()> {
    match std::env::var("NBODY_GL_ROUTE").ok().as_deref().map(str::trim) {
        None | Some("") => Ok(()),
        Some(r) if r.eq_ignore_ascii_case("egl") || r.eq_ignore_ascii_case("glx") => Ok(()),
        Some(r) => anyhow::bail!("NBODY_GL_ROUTE={r}: unknown route; use glx or egl, or unset it to try both"),
    }
}

/// What to do when no route gave a window a GL context.
pub const REMEDIES: &str = "run without a window with --headless (on NVIDIA it uses the EGL device and needs no display); \
     check that DISPLAY (X11) or WAYLAND_DISPLAY names a running display server; install the GL driver of the GPU that \
     drives that display (NVIDIA: the driver's libGLX_nvidia.so.0 and libEGL_nvidia.so.0, which glvnd picks; \
     __GLX_VENDOR_LIBRARY_NAME and __EGL_VENDOR_LIBRARY_FILENAMES override its choice); an X server without the \
     NVIDIA driver (Xvfb, a remote X server) offers NVIDIA's GLX nothing to attach to: --present copy makes the \
     frames on the GPU's EGL device and shows them in any window";

impl WindowContext {
    /// Open a `width` × `height` window titled `title` with a GL 3.3 core (else GLES 3.0)
    /// context current on this thread; `vsync` sets the swap interval to 1 (else 0). The routes
    /// of [`routes`] are tried in order; the first that gives a current context wins.
    ///
    /// # Errors
    /// Every route failed: the message lists each route with the step that failed and the
    /// windowing system's error, then the remedies; or `NBODY_GL_ROUTE` is invalid.
    pub fn new(event_loop: &ActiveEventLoop, title: &str, width: u32, height: u32, vsync: bool) -> anyhow::Result<Self> {
        Self::try_routes(event_loop, title, width, height, vsync).map_err(|failed| {
            let lines: Vec<String> = failed.iter().enumerate().map(|(i, f)| format!("{}. {f}", i + 1)).collect();
            anyhow!("no GL context for a window; tried, in order:\n  {}\nremedies: {REMEDIES}", lines.join("\n  "))
        })
    }

    /// As [`WindowContext::new`], but a failure is the list of what was tried: one line per
    /// route, `"<route>: <error>"` (or one line about an invalid `NBODY_GL_ROUTE`), for callers
    /// that go on to other routes.
    ///
    /// # Errors
    /// Every route failed (the list).
    pub fn try_routes(event_loop: &ActiveEventLoop, title: &str, width: u32, height: u32, vsync: bool) -> Result<Self, Vec<String>> {
        let attrs = Window::default_attributes().with_title(title).with_inner_size(PhysicalSize::new(width, height)).with_resizable(true);
        let display = match event_loop.display_handle() {
            Ok(d) => d.as_raw(),
            Err(e) => return Err(vec![format!("the window system's display handle: {e}")]),
        };
        let mut failed = Vec::new();
        for route in routes(&display).map_err(|e| vec![format!("{e:#}")])? {
            match Self::through(event_loop, display, route, attrs.clone(), vsync) {
                Ok(w) => {
                    tracing::info!(route = route.name(), renderer = %w.info.renderer, "window GL context");
                    return Ok(w);
                }
                Err(e) => {
                    tracing::info!(route = route.name(), "no window GL context: {e:#}");
                    failed.push(format!("{}: {e:#}", route.name()));
                }
            }
        }
        Err(failed)
    }

    /// One route: the GL display, a config, the window (with the config's X11 visual), a context
    /// and its surface, made current.
    fn through(event_loop: &ActiveEventLoop, raw: RawDisplayHandle, route: Route, attrs: WindowAttributes, vsync: bool) -> anyhow::Result<Self> {
        let preference = match route {
            Route::Glx => DisplayApiPreference::Glx(Box::new(winit::platform::x11::register_xlib_error_hook)),
            Route::Egl => DisplayApiPreference::Egl,
        };
        // SAFETY: `raw` is the event loop's live display connection, which outlives every window
        // and GL object made from it (the event loop runs until the demo ends).
        let display = unsafe { Display::new(raw, preference) }.map_err(|e| anyhow!("opening the GL display: {e}"))?;
        let template = ConfigTemplateBuilder::new().with_alpha_size(8).build();
        // SAFETY: the template names no native window, so no handle has to outlive the call.
        let configs = unsafe { display.find_configs(template) }.map_err(|e| anyhow!("listing GL configs: {e}"))?;
        let config = configs
            .reduce(|best, c| if c.num_samples() < best.num_samples() { c } else { best })
            .context("no GL framebuffer config with 8-bit alpha")?;
        let window = glutin_winit::finalize_window(event_loop, attrs, &config).context("creating the window")?;
        let raw = window.window_handle().context("window handle")?.as_raw();
        let gl_attrs = ContextAttributesBuilder::new()
            .with_context_api(ContextApi::OpenGl(Some(Version::new(3, 3))))
            .with_profile(GlProfile::Core)
            .build(Some(raw));
        let gles_attrs = ContextAttributesBuilder::new().with_context_api(ContextApi::Gles(Some(Version::new(3, 0)))).build(Some(raw));
        let desktop = if force_gles() {
            Err(glutin::error::ErrorKind::NotSupported("NBODY_GL_API=gles").into())
        } else {
            // SAFETY: the attributes carry the handle of `window`, which outlives the context
            // (Self drops the window last), and `config` belongs to `display`.
            unsafe { display.create_context(&config, &gl_attrs) }
        };
        let not_current = desktop.or_else(|e: glutin::error::Error| {
            tracing::info!("no OpenGL 3.3 core context ({e}); trying OpenGL ES 3.0");
            // SAFETY: as for the desktop context above.
            unsafe { display.create_context(&config, &gles_attrs) }
        });
        let not_current = not_current.map_err(|e| anyhow!("no OpenGL 3.3 core or OpenGL ES 3.0 context: {e}"))?;
        let sattrs = window.build_surface_attributes(Default::default()).context("window surface attributes")?;
        // SAFETY: the surface attributes hold the handle of `window`, which outlives the surface
        // (dropped after it, by field order).
        let surface = unsafe { display.create_window_surface(&config, &sattrs) }.map_err(|e| anyhow!("creating the window surface: {e}"))?;
        let context = not_current.make_current(&surface).map_err(|e| anyhow!("making the GL context current: {e}"))?;
        let interval = if vsync { SwapInterval::Wait(std::num::NonZeroU32::MIN) } else { SwapInterval::DontWait };
        if let Err(e) = surface.set_swap_interval(&context, interval) {
            tracing::warn!("could not set the swap interval ({interval:?}): {e}");
        }
        let fns = query_fns_loaded(|s| display.get_proc_address(s));
        // SAFETY: the context is current on this thread; the loader gives its entry points.
        let gl = unsafe { glow::Context::from_loader_function_cstr(|s| display.get_proc_address(s)) };
        let info = {
            // SAFETY: the context is current on this thread (made so just above).
            let g = unsafe { Gl::new(&gl) };
            GlInfo::query(g, None, None, fns).with_memory_object(g, |s| display.get_proc_address(s))
        };
        let parts = std::rc::Rc::new(WindowParts { surface, context, window });
        let keep: std::rc::Rc<dyn std::any::Any> = parts.clone();
        // SAFETY: the context was made current on this (the event-loop) thread just above, the
        // parts `keep` holds own it, and nothing releases it from this thread.
        let current = unsafe { CurrentContext::assume_current(Arc::new(gl), keep) };
        Ok(WindowContext { current, info, parts })
    }

    /// The proof that the context is current, for GL calls.
    pub fn gl(&self) -> Gl<'_> {
        self.current.gl()
    }

    /// The owned proof (for owners such as the demo's scene, dropped before this value).
    pub fn current(&self) -> &CurrentContext {
        &self.current
    }

    /// The window.
    pub fn window(&self) -> &Window {
        &self.parts.window
    }

    /// Resize the GL surface to the window's inner size.
    pub fn resize_surface(&self) {
        self.parts.window.resize_surface(&self.parts.surface, &self.parts.context);
    }

    /// Present the back buffer (`eglSwapBuffers` / `glXSwapBuffers`).
    ///
    /// # Errors
    /// The windowing system's error.
    pub fn swap_buffers(&self) -> anyhow::Result<()> {
        self.parts.surface.swap_buffers(&self.parts.context).map_err(|e| anyhow!("eglSwapBuffers/glXSwapBuffers: {e}"))
    }
}
