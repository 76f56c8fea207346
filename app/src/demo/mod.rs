//! The demo: one frame loop, windowed (winit + glutin-winit) or headless (EGL device + FBO).
//!
//! Every frame has the same shape ([`scene::Scene::frame`]):
//! 1. apply what the overlay asked for last frame (settings, reset, parameters);
//! 2. `simulate` — `backend.simulate` (CUDA or CPU; uploads/maps the VBOs, draws nothing);
//! 3. UI pass — egui runs the overlay (no GL);
//! 4. render the bodies into the target framebuffer (the default one when windowed, an FBO
//!    headless), timed by a GL timer query: [`frame::render_bodies`], which the bench's frame
//!    uses too;
//! 5. paint egui into the same framebuffer;
//! 6. present (swap buffers, [`windowed`]) or finish (headless, [`headless`]) — the caller's step.

pub mod frame;
pub mod headless;
pub mod scene;
pub mod windowed;

use anyhow::{bail, Context as _};

use crate::cli::DemoArgs;
use crate::sim::init::initial_bodies;
use crate::sim::PhysParams;

/// Run the demo with `args`: windowed, or headless with `--headless`.
///
/// # Errors
/// Bad arguments (unknown `--init`, zero size, unwritable screenshot directory), no GL context,
/// `--backend cuda` without CUDA, or a failure while running; each names what failed.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    validate(args)?;
    let params = PhysParams { g: args.sim.gravitational_constant, dt: args.sim.dt, softening: args.sim.softening };
    let bodies = initial_bodies(&args.sim.init, args.bodies, args.sim.seed, params.g)?;
    if args.headless {
        headless::run(args, bodies, params)
    } else {
        windowed::run(args, bodies, params)
    }
}

fn validate(args: &DemoArgs) -> anyhow::Result<()> {
    if args.width == 0 || args.height == 0 {
        bail!("--width and --height must be at least 1 (got {}×{})", args.width, args.height);
    }
    if args.frames == Some(0) {
        bail!("--frames must be at least 1");
    }
    if !(args.sim.dt.is_finite() && args.sim.dt > 0.0) {
        bail!("--dt must be a finite number > 0 (got {})", args.sim.dt);
    }
    if !(args.sim.softening.is_finite() && args.sim.softening >= 0.0) {
        bail!("--softening must be a finite number ≥ 0 (got {})", args.sim.softening);
    }
    if !(args.sim.gravitational_constant.is_finite() && args.sim.gravitational_constant > 0.0) {
        bail!("--gravitational-constant must be a finite number > 0 (got {})", args.sim.gravitational_constant);
    }
    if !(args.max_sprite_px.is_finite() && args.max_sprite_px >= 1.0) {
        bail!("--max-sprite-px must be a number ≥ 1 (got {})", args.max_sprite_px);
    }
    if args.sim.steps_per_frame == 0 {
        bail!("--steps-per-frame must be at least 1");
    }
    crate::cuda::kernels::validate_block_size(args.sim.block_size).context("--block-size")?;
    if args.bodies == 0 || args.bodies > crate::cuda::kernels::MAX_BODIES {
        bail!("--bodies must be from 1 to {} (got {})", crate::cuda::kernels::MAX_BODIES, args.bodies);
    }
    if args.trace.is_some() && !interop::entry::TRACING_COMPILED {
        bail!("--trace needs driver-call tracing, which this build leaves out: build with the default `trace` feature");
    }
    if let Some(p) = &args.screenshot {
        if !p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            bail!("--screenshot {}: screenshots are written as PNG; give a file name ending in .png", p.display());
        }
    }
    for (flag, path) in [("--screenshot", &args.screenshot), ("--save-state", &args.save_state), ("--trace", &args.trace)] {
        if let Some(p) = path {
            if p.is_dir() {
                bail!("cannot write {flag} file {}: it is a directory; give a file name", p.display());
            }
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    bail!("cannot write {flag} file {}: directory {} does not exist", p.display(), dir.display());
                }
            }
        }
    }
    Ok(())
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frames drawn.
    pub frames: u64,
    /// Mean wall time per frame (ms).
    pub mean_frame_ms: f64,
    /// Backend label.
    pub label: String,
}

impl Summary {
    /// Print the one-line summary to stdout.
    pub fn print(&self) {
        println!("nbody-interop: {} frames, mean frame {:.3} ms, backend: {}", self.frames, self.mean_frame_ms, self.label);
    }
}
