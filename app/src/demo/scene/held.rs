//! What a windowed run keeps on the host in case its display goes away (see
//! [`crate::gfx::display_loss`]): with `--screenshot` the last frame's pixels, with `--save-state`
//! the newest state read (the start, each diagnostics sample, and one read every few seconds
//! where that costs little, [`HOLD_STATE_EVERY_S`]). A window destroyed by another client leaves
//! the event loop and the backend alive: the run then writes its state from the backend and the
//! screenshot from the pixels kept here ([`Scene::held_screenshot`]). A broken X connection leaves
//! nothing that may be touched: Xlib's I/O error handler writes from what is kept here
//! ([`write_held_outputs`]) and ends the process.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context as _;

use super::Scene;
use crate::backend::Readout;
use crate::gfx::screenshot;
use crate::gfx::target::RenderTarget;
use sim::Bodies;

/// Shortest time (s) between two reads of the state kept for a lost display; a read also waits
/// for 20 times its own estimated cost (one force evaluation), so it takes at most 5 % of the run.
pub const HOLD_STATE_EVERY_S: f64 = 5.0;

/// What is kept (one windowed run per process).
struct Held {
    /// `--screenshot`'s path.
    screenshot: Option<PathBuf>,
    /// `--save-state`'s path.
    save_state: Option<PathBuf>,
    /// The other outputs asked for (flag and path), which need the run itself.
    others: Vec<String>,
    /// The last frame's pixels: its number, width, height, RGBA8 top row first.
    pixels: Option<(u64, u32, u32, Vec<u8>)>,
    /// The newest state read: its frame, the bodies, ε (for a tipsy header).
    state: Option<(u64, Bodies, f32)>,
    /// When the state was last read for this.
    read_at: Option<Instant>,
}

static HELD: Mutex<Option<Held>> = Mutex::new(None);

/// The run wrote its outputs itself (its teardown ran): a broken connection found later, while
/// the window is dropped, must not overwrite them with older data.
static WRITTEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The run has written its outputs (from the backend and the window): what is kept here is no
/// longer needed and must not overwrite them ([`write_held_outputs`] then only reports).
pub fn mark_outputs_written() {
    WRITTEN.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn held() -> std::sync::MutexGuard<'static, Option<Held>> {
    HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// True when every pixel of `rgba` (RGBA8) is the same.
fn uniform(rgba: &[u8]) -> bool {
    rgba.chunks_exact(4).all(|p| p == &rgba[..4])
}

impl Scene {
    /// After a windowed frame drawn into `target` (before it is presented): keeps the outputs
    /// asked for, its pixels with `--screenshot`, and with `--save-state` the newest state (the
    /// last finite one, read again where due and no step is in progress).
    ///
    /// # Errors
    /// The readback of the pixels or of the state failed.
    pub fn hold_for_display_loss(&mut self, target: &RenderTarget) -> anyhow::Result<()> {
        let a = &self.args;
        {
            let mut h = held();
            if h.is_none() {
                let others = [("--summary", &a.summary), ("--trace", &a.trace), ("--timeline", &a.timeline)];
                let others = others.iter().filter_map(|(f, p)| p.as_ref().map(|p| format!("{f} {}", p.display()))).collect();
                *h = Some(Held {
                    screenshot: a.screenshot.clone(),
                    save_state: a.save_state.clone(),
                    others,
                    pixels: None,
                    state: None,
                    read_at: None,
                });
            }
        }
        if self.args.screenshot.is_some() && self.frame > 0 {
            let [w, hgt] = target.size();
            target.bind(self.current.gl());
            if matches!(target, RenderTarget::Default { .. }) {
                self.gl().read_buffer(glow::BACK);
            }
            let rgba = screenshot::read_rgba(self.current.gl(), w, hgt)?;
            // One colour all over is no frame (a window destroyed under the run reads back
            // blank): the last frame with something drawn stays.
            if !uniform(&rgba) {
                if let Some(h) = held().as_mut() {
                    h.pixels = Some((self.frame, w, hgt, rgba));
                }
            }
        }
        if self.args.save_state.is_some() {
            self.hold_state()?;
        }
        Ok(())
    }

    /// The state part of [`Scene::hold_for_display_loss`].
    fn hold_state(&mut self) -> anyhow::Result<()> {
        let (due, kept_frame) = match held().as_ref() {
            Some(h) => (h.read_at, h.state.as_ref().map(|s| s.0)),
            None => return Ok(()),
        };
        let cost_s = self.sim.backend.as_deref_mut().map_or(0.0, |b| {
            let info = b.describe();
            sim::tree::step_terms(info.solver, info.n, b.sides().cuda().is_some()) / info.rate.per_s.max(1.0)
        });
        let every = HOLD_STATE_EVERY_S.max(20.0 * cost_s);
        let read = due.is_some_and(|t| t.elapsed().as_secs_f64() >= every) && self.step_in_progress().is_none();
        if read {
            let cur = self.current.clone();
            let vbos = *self.view.renderer.vbos();
            if let Some(b) = self.sim.backend.as_deref_mut() {
                let bodies = b.state(cur.gl(), &vbos, Readout::Bodies).context("reading the state kept for a lost display")?.bodies;
                self.check_finite(self.frame, bodies);
            }
        }
        let mut h = held();
        let Some(h) = h.as_mut() else { return Ok(()) };
        if read || due.is_none() {
            h.read_at = Some(Instant::now());
        }
        if kept_frame != Some(self.sim.last_finite.0) || h.state.is_none() {
            h.state = Some((self.sim.last_finite.0, self.sim.last_finite.1.clone(), self.hud.overlay.controls.params.softening));
        }
        Ok(())
    }

    /// Writes `--screenshot` at `path` from the last frame kept ([`Scene::hold_for_display_loss`]):
    /// the window is gone and cannot be read.
    ///
    /// # Errors
    /// No frame was kept (none was drawn), or the file cannot be written.
    pub fn held_screenshot(&self, path: &Path) -> anyhow::Result<()> {
        let h = held();
        let Some((frame, w, hgt, rgba)) = h.as_ref().and_then(|h| h.pixels.as_ref()) else {
            anyhow::bail!("--screenshot {}: the window was gone before a frame was drawn, so no screenshot was made", path.display());
        };
        screenshot::write_png(path, *w, *hgt, rgba)?;
        eprintln!("--screenshot {}: written from the last frame drawn (frame {frame}): the window was gone", path.display());
        Ok(())
    }
}

/// Xlib's connection to the display broke (the X server ended, or another client ended this
/// one's connection): writes `--screenshot` from the last frame's pixels and `--save-state` from
/// the newest state kept, says which, names the outputs that could not be written, and returns
/// the exit status [`crate::demo::EXIT_DISPLAY_LOST`]. Runs inside the Xlib call that found the
/// connection broken ([`crate::gfx::display_loss::on_connection_lost`]): it touches nothing but
/// what is kept here.
pub fn write_held_outputs() -> i32 {
    eprintln!(
        "error: the connection to the display was lost (the X server ended, or another client ended this one's \
         connection): the run ends here, writing what it holds"
    );
    if WRITTEN.load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("the outputs asked for were written before");
        return crate::demo::EXIT_DISPLAY_LOST;
    }
    let Ok(mut guard) = HELD.try_lock() else {
        eprintln!("the outputs kept for this could not be reached; none was written");
        return crate::demo::EXIT_DISPLAY_LOST;
    };
    let Some(h) = guard.as_mut() else {
        return crate::demo::EXIT_DISPLAY_LOST;
    };
    if let Some(path) = &h.screenshot {
        match &h.pixels {
            Some((frame, w, hgt, rgba)) => match screenshot::write_png(path, *w, *hgt, rgba) {
                Ok(()) => eprintln!("--screenshot {}: written from the last frame drawn (frame {frame})", path.display()),
                Err(e) => eprintln!("--screenshot {}: not written: {e:#}", path.display()),
            },
            None => eprintln!("--screenshot {}: no frame was drawn before, so no screenshot was made", path.display()),
        }
    }
    if let Some(path) = &h.save_state {
        match &h.state {
            Some((frame, bodies, eps)) => match sim::write_state_file(path, bodies, 0.0, *eps) {
                Ok(()) => eprintln!(
                    "--save-state {}: the state of frame {frame}, the newest the run held (read at the start, at each \
                     diagnostics sample and every {HOLD_STATE_EVERY_S:.0} s or more)",
                    path.display()
                ),
                Err(e) => eprintln!("--save-state {}: not written: {e:#}", path.display()),
            },
            None => eprintln!("--save-state {}: no state was held yet, so none was written", path.display()),
        }
    }
    for o in &h.others {
        eprintln!("{o}: not written: it needs the run, which ended inside the lost connection's call");
    }
    crate::demo::EXIT_DISPLAY_LOST
}

#[cfg(test)]
mod tests {
    /// A blank read-back (a destroyed window's) is told from a drawn frame.
    #[test]
    fn a_blank_frame_is_not_kept() {
        assert!(super::uniform(&[0, 0, 0, 255].repeat(100)));
        let mut drawn = [0, 0, 0, 255].repeat(100);
        drawn[41] = 200;
        assert!(!super::uniform(&drawn));
    }
}
