//! Interrupts. SIGINT (Ctrl-C), SIGTERM and SIGHUP set one flag ([`stopped`]) that every frame
//! loop — the demo's (headless and windowed), the bench's, the probes' — reads at each frame
//! boundary; the loop then ends and writes every output the user asked for (state, screenshot,
//! trace, bench rows). A run that was asked for a count (`--frames N`, a bench's rows) and ended
//! before it returns [`Interrupted`], for which `main` exits with [`exit_code`]: 128 + the
//! signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), the shell convention. A
//! run told to go until interrupted (the demo without `--frames`) exits 0.
//!
//! A long step does not hold the run: the backends look at the flag inside a step (the CPU
//! backend between its tasks, the CUDA backend between the launches of a long step) and stop
//! it, leaving the state of before it. Writing that state then costs one more force evaluation
//! (the closing half kick), announced when it is long.
//!
//! Signals come in bursts: `timeout`, `make`, CI runners and process supervisors send one to the
//! process and one to its process group, microseconds apart, and a terminal sends Ctrl-C to the
//! whole foreground group. Every signal within [`BURST`] of the first is the same request. A
//! signal at least [`BURST`] after the first means "now": the process ends at once with
//! `_exit(2)` (no destructors, no `atexit` handlers, so nothing races a driver or GL call in
//! progress on another thread), losing the outputs not yet written. The signals are received on a
//! thread of their own (signal-hook's self-pipe iterator), never inside a signal handler.
//!
//! Two environment variables exist for the tests alone (listed with the others in the user
//! guide): `NBODY_TEST_READY=PATH` makes the run create `PATH` once it is where a test wants to
//! signal it (after the first frame, or inside the held step), and `NBODY_TEST_HOLD=step|outputs`
//! holds the first step until an interrupt arrives (`step`), or holds the run after its loop,
//! before the outputs, until it is ended (`outputs`; it then also creates `PATH.held`). With them
//! a test signals a run at a chosen point without guessing how long anything takes. The step
//! hold works where a step looks for interrupts: the CPU backend's steps and CUDA steps long
//! enough to be split into launches.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

/// Set by the signal thread (and by [`request`]).
static STOP: AtomicBool = AtomicBool::new(false);
/// The first signal's number (0: none yet; [`request`] counts as SIGINT).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// When the first signal arrived.
static FIRST_AT: Mutex<Option<Instant>> = Mutex::new(None);

/// Signals closer than this to the first one are the same request (s).
pub const BURST: Duration = Duration::from_secs(1);

/// SIGINT's number (POSIX).
pub const SIGINT: i32 = signal_hook::consts::SIGINT;
/// SIGTERM's number (POSIX).
pub const SIGTERM: i32 = signal_hook::consts::SIGTERM;

/// What a signal asks for, given the first one's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The first signal: an orderly stop.
    Stop,
    /// Part of the first one's burst: nothing more.
    SameRequest,
    /// A second request: exit now with this status.
    ExitNow(i32),
}

/// The rule: the first signal stops, those within [`BURST`] of it are the same request, a later
/// one exits at once with 128 + its number.
fn judge(first: Option<Instant>, signal: i32, now: Instant) -> Verdict {
    match first {
        None => Verdict::Stop,
        Some(t) if now.saturating_duration_since(t) < BURST => Verdict::SameRequest,
        Some(_) => Verdict::ExitNow(128 + signal),
    }
}

/// Receives SIGINT, SIGTERM and SIGHUP from now on, on a thread of its own (once per process;
/// later calls do nothing). Call it before the work a signal should stop: a signal that arrives
/// before it ends the process as the default action does. Where the handlers cannot be set a
/// warning says that an interrupt then ends the process without its outputs.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("no SIGINT/SIGTERM handler ({e}): an interrupt would end the run without writing its outputs");
                return;
            }
        };
        let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for signal in signals.forever() {
                on_signal(signal, Instant::now());
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("no signal thread ({e}): an interrupt would not be seen");
        }
    });
}

/// One signal received: stop, ignore it as part of a burst, or end the process now.
fn on_signal(signal: i32, now: Instant) {
    let first = {
        let mut at = FIRST_AT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = *at;
        if first.is_none() {
            *at = Some(now);
        }
        first
    };
    match judge(first, signal, now) {
        Verdict::Stop => {
            let _ = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
            STOP.store(true, Ordering::SeqCst);
        }
        Verdict::SameRequest => tracing::debug!(signal, "signal within 1 s of the first: the same request"),
        Verdict::ExitNow(code) => {
            eprintln!(
                "{} again, {:.1} s after the first: exiting now; outputs not written yet are lost",
                signal_name(signal),
                first.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64())
            );
            // `_exit`: no destructor or `atexit` handler runs, so none races the main thread,
            // which may be inside a driver or GL call.
            signal_hook::low_level::exit(code);
        }
    }
}

/// The usual name of `signal` (`SIGINT`, …) for messages.
pub fn signal_name(signal: i32) -> String {
    match signal {
        signal_hook::consts::SIGINT => "SIGINT".into(),
        signal_hook::consts::SIGTERM => "SIGTERM".into(),
        signal_hook::consts::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

/// What a second request is, for messages about it: "Ctrl-C again" after SIGINT (or
/// [`request`], or none yet), "SIGTERM again" after SIGTERM, "SIGHUP again" after SIGHUP.
pub fn again_hint() -> String {
    again_hint_for(SIGNAL.load(Ordering::SeqCst))
}

/// [`again_hint`] after `signal` (0: none, or [`request`]).
fn again_hint_for(signal: i32) -> String {
    match signal {
        0 | SIGINT => "Ctrl-C again".into(),
        s => format!("{} again", signal_name(s)),
    }
}

/// True once an interrupt arrived (or [`request`] was called).
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Acts as a SIGINT would (for hooks that stop a run at a chosen point, and tests).
pub fn request() {
    let _ = SIGNAL.compare_exchange(0, SIGINT, Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// The exit status of an interrupted run: 128 + the first signal's number (130 for SIGINT, 143
/// for SIGTERM); 130 when the run ended early without a signal (a closed window, [`request`]).
pub fn exit_code() -> u8 {
    match SIGNAL.load(Ordering::SeqCst) {
        s @ 1..=127 => u8::try_from(128 + s).unwrap_or(EXIT_INTERRUPTED),
        _ => EXIT_INTERRUPTED,
    }
}

/// Exit status of a run interrupted by SIGINT (128 + 2), or ended early without a signal.
pub const EXIT_INTERRUPTED: u8 = 130;

/// A run ended early by an interrupt, after writing what it was asked to write.
#[derive(Debug, thiserror::Error)]
#[error("interrupted {0}; the outputs asked for were written")]
pub struct Interrupted(pub String);

/// The test-only hold point `NBODY_TEST_HOLD` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    Step,
    Outputs,
}

fn hold() -> Option<Hold> {
    static HOLD: OnceLock<Option<Hold>> = OnceLock::new();
    *HOLD.get_or_init(|| match std::env::var("NBODY_TEST_HOLD").as_deref() {
        Ok("step") => Some(Hold::Step),
        Ok("outputs") => Some(Hold::Outputs),
        _ => None,
    })
}

/// Test hook: creates the file `NBODY_TEST_READY` names, once per process (nothing without it).
/// The loops call it after their first frame; a held step calls it while it holds.
pub fn ready() {
    static DONE: Once = Once::new();
    DONE.call_once(|| {
        if hold() == Some(Hold::Step) {
            // The held step announces itself.
            return;
        }
        mark_ready();
    });
}

fn mark_ready() {
    if let Some(path) = std::env::var_os("NBODY_TEST_READY").map(PathBuf::from) {
        if let Err(e) = std::fs::write(&path, b"ready\n") {
            tracing::warn!("NBODY_TEST_READY={}: {e}", path.display());
        }
    }
}

/// The interrupt check a step makes between its parts: [`stopped`]. Under `NBODY_TEST_HOLD=step`
/// the first call marks the run ready and waits there, inside the step, until an interrupt
/// arrives, so that a test's signal always finds a step in progress.
pub fn stopped_in_step() -> bool {
    static HELD: Once = Once::new();
    if hold() == Some(Hold::Step) {
        HELD.call_once(|| {
            mark_ready();
            while !stopped() {
                std::thread::sleep(Duration::from_millis(5));
            }
        });
    }
    stopped()
}

/// Test hook for the forced exit: under `NBODY_TEST_HOLD=outputs` a run that was interrupted
/// creates `<NBODY_TEST_READY>.held` (the first signal was handled before this point) and waits
/// here, before writing its outputs, until a second signal ends the process.
pub fn hold_before_outputs() {
    if hold() == Some(Hold::Outputs) && stopped() {
        if let Some(path) = std::env::var_os("NBODY_TEST_READY") {
            let mut held = path;
            held.push(".held");
            if let Err(e) = std::fs::write(&held, b"held\n") {
                tracing::warn!("NBODY_TEST_READY.held: {e}");
            }
        }
        loop {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_one_request_and_a_later_signal_exits_with_its_number() {
        let t = Instant::now();
        assert_eq!(judge(None, SIGINT, t), Verdict::Stop);
        assert_eq!(judge(Some(t), SIGINT, t + Duration::from_micros(30)), Verdict::SameRequest);
        assert_eq!(judge(Some(t), SIGTERM, t + Duration::from_millis(999)), Verdict::SameRequest);
        assert_eq!(judge(Some(t), SIGINT, t + BURST), Verdict::ExitNow(130));
        assert_eq!(judge(Some(t), SIGTERM, t + Duration::from_secs(5)), Verdict::ExitNow(143));
        // A clock read before the first signal's (another thread) is still the same burst.
        assert_eq!(judge(Some(t + Duration::from_millis(1)), SIGINT, t), Verdict::SameRequest);
    }

    /// The second request the stop message asks for is of the signal that came.
    #[test]
    fn the_again_hint_names_the_signal_that_came() {
        assert_eq!(again_hint_for(SIGINT), "Ctrl-C again");
        assert_eq!(again_hint_for(0), "Ctrl-C again");
        assert_eq!(again_hint_for(SIGTERM), "SIGTERM again");
        assert_eq!(again_hint_for(signal_hook::consts::SIGHUP), "SIGHUP again");
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(SIGINT), "SIGINT");
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
        assert_eq!(signal_name(64), "signal 64");
    }
}
