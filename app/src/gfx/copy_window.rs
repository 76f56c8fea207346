//! The copy present route: frames made in a headless GL context on an EGL device (the CUDA
//! device's own, where there is one), read back a frame behind ([`super::readback`]) and shown
//! in a window that has no GL context at all, through softbuffer (X11 with MIT-SHM where the
//! server offers it, else plain `PutImage`; Wayland `wl_shm`).
//!
//! This is how a GPU without an NVIDIA-driven display shows the demo: a server reached through
//! VNC or X forwarding, a cloud or container GPU with only the compute driver, Xvfb. The
//! frame itself is exactly the headless one (interop, draw, tone map and overlay into an FBO of
//! the window's size); only the last step differs: readback and a software blit instead of a
//! buffer swap. VirtualGL does the same for unmodified GL programs.

use std::num::NonZeroU32;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use winit::dpi::PhysicalSize;
use winit::event_loop::ActiveEventLoop;
use winit::window::Window;

use super::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};
use super::gl::CurrentContext;
use super::readback::{PixelOrder, Readback};
use super::target::{OffscreenTarget, RenderTarget};
use super::GlInfo;

/// Host time of the copy route's last step, per frame (ms): the readback (the fence wait, the
/// map, and the copy out of the mapped pixel-pack buffer into the window's buffer, flipped and
/// in the window's pixel format) and the present (softbuffer's blit to the window system). Kept as exponential means over about 20 frames, and as totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PresentCosts {
    /// Mean readback time, ms.
    pub readback_ms: f64,
    /// Mean present time, ms.
    pub present_ms: f64,
    /// Frames presented.
    pub frames: u64,
    /// Sum of the readback times, ms.
    pub readback_total_ms: f64,
    /// Sum of the present times, ms.
    pub present_total_ms: f64,
}

impl PresentCosts {
    fn add(&mut self, readback_ms: f64, present_ms: f64) {
        const A: f64 = 0.05;
        if self.frames == 0 {
            (self.readback_ms, self.present_ms) = (readback_ms, present_ms);
        } else {
            self.readback_ms += A * (readback_ms - self.readback_ms);
            self.present_ms += A * (present_ms - self.present_ms);
        }
        self.frames += 1;
        self.readback_total_ms += readback_ms;
        self.present_total_ms += present_ms;
    }
}

/// The FBO the frames are drawn into and the readback of it, at the window's size.
struct Frame {
    target: OffscreenTarget,
    readback: Readback,
}

/// A window shown through softbuffer, with the headless GL context that makes its frames.
///
/// Teardown: `Drop` deletes the FBO and the pixel-pack buffers while the context is current;
/// then (field order) the softbuffer surface and its connection, the window, and last the
/// headless context (its EGL objects go with the last clone of its proof, so the demo's scene
/// must be dropped first, as the windowed loop's field order does).
pub struct CopyWindow {
    frame: Option<Frame>,
    surface: softbuffer::Surface<Rc<Window>, Rc<Window>>,
    _connection: softbuffer::Context<Rc<Window>>,
    window: Rc<Window>,
    headless: HeadlessContext,
    costs: PresentCosts,
    /// With vsync asked for: the display's refresh interval, which `present` paces to (softbuffer
    /// has no swap interval).
    interval: Option<Duration>,
    last_present: Option<Instant>,
}

impl std::fmt::Debug for CopyWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyWindow").field("info", &self.headless.info).field("costs", &self.costs).finish_non_exhaustive()
    }
}

impl CopyWindow {
    /// Make the headless context (EGL device of CUDA device [`HEADLESS_CUDA_DEVICE`] first,
    /// [`HeadlessContext::new`]), then a `width` × `height` window titled `title` and its
    /// softbuffer surface. `vsync` paces presents to the monitor's refresh rate (60 Hz when
    /// the window system does not say).
    ///
    /// # Errors
    /// No headless GL context (the message lists each EGL device's answer), the window could not
    /// be made, or softbuffer could not attach to the window system.
    pub fn new(event_loop: &ActiveEventLoop, title: &str, width: u32, height: u32, vsync: bool) -> anyhow::Result<Self> {
        let headless = HeadlessContext::new(HEADLESS_CUDA_DEVICE).context("the GL context frames are made in")?;
        let attrs = Window::default_attributes().with_title(title).with_inner_size(PhysicalSize::new(width, height)).with_resizable(true);
        let window = Rc::new(event_loop.create_window(attrs).map_err(|e| anyhow!("creating the window: {e}"))?);
        let connection = softbuffer::Context::new(window.clone()).map_err(|e| anyhow!("softbuffer on this window system: {e}"))?;
        let surface = softbuffer::Surface::new(&connection, window.clone()).map_err(|e| anyhow!("softbuffer surface: {e}"))?;
        let interval = vsync.then(|| {
            let mhz = window.current_monitor().and_then(|m| m.refresh_rate_millihertz()).filter(|&m| m > 0).unwrap_or(60_000);
            Duration::from_secs_f64(1e3 / f64::from(mhz))
        });
        tracing::info!(gl = %headless.info.summary(), device = ?headless.info.egl_device, "copy present route");
        Ok(Self { frame: None, surface, _connection: connection, window, headless, costs: PresentCosts::default(), interval, last_present: None })
    }

    /// The window.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// The owned proof that the headless context is current (for the demo's scene).
    pub fn current(&self) -> &CurrentContext {
        self.headless.current()
    }

    /// Facts about the headless context.
    pub fn info(&self) -> &GlInfo {
        &self.headless.info
    }

    /// The copy costs so far.
    pub fn costs(&self) -> PresentCosts {
        self.costs
    }

    /// The target of the next frame: an FBO of `size` (made again, with its readback and the
    /// window's buffer, when the window's size changed).
    ///
    /// # Errors
    /// The FBO, the pixel-pack buffers or softbuffer's resize failed.
    pub fn target(&mut self, size: PhysicalSize<u32>) -> anyhow::Result<RenderTarget> {
        let gl = self.headless.gl();
        if let Some(f) = &self.frame {
            if [f.target.width, f.target.height] == [size.width, size.height] {
                return Ok(RenderTarget::Offscreen(f.target));
            }
        }
        if let Some(old) = self.frame.take() {
            old.target.destroy(gl);
            old.readback.destroy(gl);
        }
        let (Some(w), Some(h)) = (NonZeroU32::new(size.width), NonZeroU32::new(size.height)) else {
            anyhow::bail!("a {}×{} window has nothing to draw", size.width, size.height);
        };
        let target = OffscreenTarget::new(gl, size.width, size.height).context("the copy route's framebuffer")?;
        let order = PixelOrder::for_context(&self.headless.info);
        let readback = match Readback::new(gl, size.width, size.height, order) {
            Ok(r) => r,
            Err(e) => {
                target.destroy(gl);
                return Err(e.context("the copy route's pixel-pack buffers"));
            }
        };
        if let Err(e) = self.surface.resize(w, h) {
            target.destroy(gl);
            readback.destroy(gl);
            anyhow::bail!("softbuffer resize to {w}×{h}: {e}");
        }
        self.frame = Some(Frame { target, readback });
        Ok(RenderTarget::Offscreen(target))
    }

    /// Read the frame just drawn into the FBO of [`CopyWindow::target`] back (asynchronously),
    /// and show the previous one in the window.
    ///
    /// # Errors
    /// No frame was drawn since the last resize, or GL's readback or softbuffer's present failed.
    pub fn present(&mut self) -> anyhow::Result<()> {
        let gl = self.headless.gl();
        let frame = self.frame.as_mut().ok_or_else(|| anyhow!("present before any frame was drawn"))?;
        if let (Some(interval), Some(last)) = (self.interval, self.last_present) {
            std::thread::sleep(interval.saturating_sub(last.elapsed()));
        }
        RenderTarget::Offscreen(frame.target).bind(gl);
        // The previous frame goes straight from the mapped pixel-pack buffer into the window's
        // buffer (one pass: flip, reorder).
        let mut buffer =
            if frame.readback.pending() { Some(self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer buffer: {e}"))?) } else { None };
        let readback_ms = frame.readback.push(gl, buffer.as_deref_mut())?;
        gl.flush();
        let (Some(buffer), Some(readback_ms)) = (buffer, readback_ms) else { return Ok(()) };
        let t0 = Instant::now();
        buffer.present().map_err(|e| anyhow!("softbuffer present: {e}"))?;
        self.last_present = Some(Instant::now());
        self.costs.add(readback_ms, t0.elapsed().as_secs_f64() * 1e3);
        Ok(())
    }
}

impl Drop for CopyWindow {
    fn drop(&mut self) {
        if let Some(f) = self.frame.take() {
            let gl = self.headless.gl();
            f.target.destroy(gl);
            f.readback.destroy(gl);
        }
    }
}
