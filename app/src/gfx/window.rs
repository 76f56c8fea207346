//! The windowed GL context (winit + glutin-winit): a window, its GL surface and a context made
//! current on the event-loop thread, with the proof of that ([`CurrentContext`]).
//!
//! Like the headless context it asks for desktop GL 3.3 core first and falls back to OpenGL ES
//! 3.0 (`NBODY_GL_API=gles` skips desktop GL).

use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use glutin::config::{ConfigTemplateBuilder, GlConfig as _};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::{GetGlDisplay as _, GlDisplay as _};
use glutin::prelude::{GlSurface as _, NotCurrentGlContext as _};
use glutin::surface::{SwapInterval, WindowSurface};
use glutin_winit::GlWindow as _;
use raw_window_handle::HasWindowHandle as _;
use winit::dpi::PhysicalSize;
use winit::event_loop::ActiveEventLoop;
use winit::window::Window;

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

impl WindowContext {
    /// Open a `width` × `height` window titled `title` with a GL 3.3 core (else GLES 3.0)
    /// context current on this thread; `vsync` sets the swap interval to 1 (else 0).
    ///
    /// # Errors
    /// No GL config, display, window, context or surface could be made; the message names the
    /// step and the windowing system's error.
    pub fn new(event_loop: &ActiveEventLoop, title: &str, width: u32, height: u32, vsync: bool) -> anyhow::Result<Self> {
        let attrs = Window::default_attributes().with_title(title).with_inner_size(PhysicalSize::new(width, height)).with_resizable(true);
        let template = ConfigTemplateBuilder::new().with_alpha_size(8);
        let builder = glutin_winit::DisplayBuilder::new().with_window_attributes(Some(attrs.clone()));
        // The picker must return a config; an empty list is reported by unwinding out of it,
        // caught here and turned into an error (no panic escapes; the default hook, which would
        // print a panic message, is swapped out for the duration).
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            builder.build(event_loop, template, |configs| {
                configs
                    .reduce(|best, c| if c.num_samples() < best.num_samples() { c } else { best })
                    .unwrap_or_else(|| std::panic::panic_any("no GL config for the window"))
            })
        }));
        std::panic::set_hook(hook);
        let built = built.map_err(|_| anyhow!("no GL framebuffer config for the window"))?;
        let (window, config) = built.map_err(|e| anyhow!("creating the GL display and window: {e}"))?;
        let display = config.display();
        let window = match window {
            Some(w) => w,
            None => glutin_winit::finalize_window(event_loop, attrs, &config).context("creating the window")?,
        };
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
        let surface =
            unsafe { display.create_window_surface(&config, &sattrs) }.map_err(|e| anyhow!("creating the window surface: {e}"))?;
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
