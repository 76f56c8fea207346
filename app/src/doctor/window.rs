//! The window's GL context, made as the native route makes it (`WindowContext::try_routes`:
//! GLX then EGL on X11, EGL on Wayland) in a one-turn winit event loop, asked `cuGLGetDevices`
//! while current, then closed.

use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, EventLoop};
use winit::window::WindowId;

use super::checks::gl::{display_kind, DisplayKind};
use super::env::Env;
use super::facts::{ContextFact, GlSeen, SharesFact};
use crate::gfx::window::WindowContext;

/// The window's context fact: not tried without a display server in `env`; else the context (its
/// strings and `shares()`'s answer while it is current) or every route's error.
pub(super) fn probe(env: &Env, shares: fn() -> SharesFact) -> ContextFact {
    if display_kind(env) == DisplayKind::None {
        return ContextFact::NotTried("no display server (DISPLAY and WAYLAND_DISPLAY are unset)".into());
    }
    let event_loop = match EventLoop::new() {
        Ok(l) => l,
        Err(e) => return ContextFact::Failed(format!("opening the display (winit event loop): {e}")),
    };
    let mut app = Probe { shares, fact: None };
    if let Err(e) = event_loop.run_app(&mut app) {
        return ContextFact::Failed(format!("winit event loop: {e}"));
    }
    app.fact.unwrap_or_else(|| ContextFact::Failed("the event loop ended before a window could be made".into()))
}

/// The one-turn application: a window on `resumed`, its facts, then exit.
struct Probe {
    shares: fn() -> SharesFact,
    fact: Option<ContextFact>,
}

impl ApplicationHandler for Probe {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.fact.is_none() {
            self.fact = Some(match WindowContext::try_routes(event_loop, "nbody-interop doctor", 320, 200, false) {
                Ok(w) => {
                    let fact = ContextFact::Made { gl: GlSeen::from(&w.info), shares: (self.shares)() };
                    drop(w);
                    fact
                }
                Err(failed) => ContextFact::Failed(failed.join("; ")),
            });
        }
        event_loop.exit();
    }

    fn window_event(&mut self, _event_loop: &ActiveEventLoop, _id: WindowId, _event: WindowEvent) {}
}
