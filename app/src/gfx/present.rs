//! How a window shows its frames: the **native** route (the window's own GL context, frames
//! drawn into its default framebuffer and swapped) or the **copy** route (frames made in a
//! headless context on an EGL device, read back and blitted: [`super::copy_window`]).
//! [`DemoWindow`] is either, behind one interface for the windowed loop.

use winit::dpi::PhysicalSize;
use winit::window::Window;

use super::copy_window::{CopyWindow, PresentCosts};
use super::gl::CurrentContext;
use super::target::RenderTarget;
use super::window::WindowContext;
use super::GlInfo;

/// A window and the GL context its frames are made in; see the module docs.
pub enum DemoWindow {
    /// The window's own GL context.
    Native(WindowContext),
    /// A headless context, read back into a window without GL.
    Copy(CopyWindow),
}

impl std::fmt::Debug for DemoWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Native(w) => f.debug_tuple("Native").field(w).finish(),
            Self::Copy(w) => f.debug_tuple("Copy").field(w).finish(),
        }
    }
}

impl DemoWindow {
    /// The window.
    pub fn window(&self) -> &Window {
        match self {
            Self::Native(w) => w.window(),
            Self::Copy(w) => w.window(),
        }
    }

    /// The owned proof that the frames' GL context is current.
    pub fn current(&self) -> &CurrentContext {
        match self {
            Self::Native(w) => w.current(),
            Self::Copy(w) => w.current(),
        }
    }

    /// Facts about the frames' GL context.
    pub fn info(&self) -> &GlInfo {
        match self {
            Self::Native(w) => &w.info,
            Self::Copy(w) => w.info(),
        }
    }

    /// `native` or `copy`.
    pub fn route(&self) -> &'static str {
        match self {
            Self::Native(_) => "native",
            Self::Copy(_) => "copy",
        }
    }

    /// The copy route's readback and present costs (`None` on the native route).
    pub fn costs(&self) -> Option<PresentCosts> {
        match self {
            Self::Native(_) => None,
            Self::Copy(w) => Some(w.costs()),
        }
    }

    /// One line for the overlay and the log: the route, where frames are made and, on the copy
    /// route, its mean costs per frame.
    pub fn describe(&self) -> String {
        let info = self.info();
        match self {
            Self::Native(_) => format!("present: native (the window's GL: {})", info.renderer),
            Self::Copy(w) => {
                let c = w.costs();
                let on = info.egl_device.as_deref().unwrap_or(&info.renderer);
                format!("present: copy (made on EGL device {on}) · readback {:.2} ms · present {:.2} ms", c.readback_ms, c.present_ms)
            }
        }
    }

    /// The window's size changed: the native route resizes its GL surface (the copy route's
    /// targets follow in [`DemoWindow::target`]).
    pub fn resize(&self) {
        if let Self::Native(w) = self {
            w.resize_surface();
        }
    }

    /// The target of a frame of `size` physical pixels.
    ///
    /// # Errors
    /// The copy route could not make its framebuffer or buffers of that size.
    pub fn target(&mut self, size: PhysicalSize<u32>) -> anyhow::Result<RenderTarget> {
        match self {
            Self::Native(_) => Ok(RenderTarget::Default { width: size.width, height: size.height }),
            Self::Copy(w) => w.target(size),
        }
    }

    /// Show the frame just drawn (native: the buffer swap; copy: the readback, and the window
    /// shows the frame before it).
    ///
    /// # Errors
    /// The window system's or GL's error.
    pub fn present(&mut self) -> anyhow::Result<()> {
        match self {
            Self::Native(w) => w.swap_buffers(),
            Self::Copy(w) => w.present(),
        }
    }
}
