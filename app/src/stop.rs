//! Interrupts. SIGINT (Ctrl-C), SIGTERM and SIGHUP set one flag ([`stopped`]) that every frame
//! loop — the demo's (headless and windowed), the bench's, the switch probe's — reads at each
//! frame boundary; the loop then ends and writes every output the user asked for (state,
//! screenshot, trace, bench rows). A run that was asked for a count (`--frames N`, a bench's
//! rows) and ended before it returns [`Interrupted`], for which `main` exits 130 (128 + SIGINT,
//! the shell convention); a run told to go until interrupted (the demo without `--frames`)
//! exits 0. A long step does not hold the run: the backends look at the flag inside a step (the
//! CPU backend between its tasks, the CUDA backend between the launches of a step estimated over
//! half a second) and stop it, leaving the state of before it. In the windowed demo such a step is
//! also spread over frames (one launch each, `sim::partial`), so a closed window is
//! answered as quickly; a run that ends during it abandons it, with the same state kept. Writing that state then costs one
//! more force evaluation (the closing half kick), announced when it is long; a second interrupt
//! exits 130 at once, without the outputs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// Set by the signal handler (and by [`request`]); cleared by [`reset`] when a run starts.
static STOP: AtomicBool = AtomicBool::new(false);

/// Exit code of a run that was interrupted after writing its outputs.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Installs the handler once per process (later calls do nothing). Without one (another handler
/// is installed) a warning says that an interrupt then ends the process without its outputs.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let handler = || {
            // A second interrupt while the first waits for a frame boundary (a long step):
            // end now, without the outputs.
            if STOP.swap(true, Ordering::SeqCst) {
                eprintln!("second interrupt: exiting now, without writing the outputs");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        };
        if let Err(e) = ctrlc::set_handler(handler) {
            tracing::warn!("no Ctrl-C/SIGTERM handler ({e}): an interrupt would end the run without writing its outputs");
        }
    });
}

/// True once an interrupt arrived since the last [`reset`].
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Acts as an interrupt would (for hooks that stop a run at a chosen point, and tests).
pub fn request() {
    STOP.store(true, Ordering::SeqCst);
}

/// Clears the flag at the start of a run.
pub fn reset() {
    STOP.store(false, Ordering::SeqCst);
}

/// A run ended early by an interrupt, after writing what it was asked to write.
#[derive(Debug, thiserror::Error)]
#[error("interrupted {0}; the outputs asked for were written")]
pub struct Interrupted(pub String);
